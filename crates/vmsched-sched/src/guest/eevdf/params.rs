//! EEVDF's parameters: the kernel release, the tunables named after their debugfs files
//! (`/sys/kernel/debug/sched/base_slice_ns`, `migration_cost_ns`, `tunable_scaling`) and the
//! feature flags of `kernel/sched/features.h` under their real names, each with the default of
//! the release (linux-schedulers.md §2.1, §2.10; ERRATA L5).

use serde::{Deserialize, Serialize};

use crate::guest::cfs::LINUX_HZ;
use crate::guest::deadline::DlParams;
use crate::guest::rt::RtParams;
use vmsched_core::time::NS_PER_S;

/// The kernel release whose EEVDF is modelled (`kernel = "6.6" | "6.12" | "6.18"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
pub enum EevdfKernel {
    /// 6.6: EEVDF with RUN_TO_PARITY; no PREEMPT_SHORT, DELAY_DEQUEUE or PICK_BUDDY.
    #[serde(rename = "6.6")]
    V6_6,
    /// 6.12 (as 6.12.19): PREEMPT_SHORT, DELAY_DEQUEUE, PICK_BUDDY, custom slices,
    /// PLACE_REL_DEADLINE (the 6.12.y backport).
    #[serde(rename = "6.12")]
    V6_12,
    /// 6.18 (as 6.18.2): base slice 0.70 ms (6.15), slice protection `vprot` limited to the
    /// smallest queued slice (6.17), yield moving vruntime to the deadline (ERRATA L3, L6).
    #[serde(rename = "6.18")]
    V6_18,
}

impl EevdfKernel {
    /// `normalized_sysctl_sched_base_slice`: 0.75 ms, 0.70 ms from 6.15 (commit 2ae891b82695).
    pub fn normalized_base_slice_ns(self) -> u64 {
        match self {
            EevdfKernel::V6_6 | EevdfKernel::V6_12 => 750_000,
            EevdfKernel::V6_18 => 700_000,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            EevdfKernel::V6_6 => "6.6",
            EevdfKernel::V6_12 => "6.12",
            EevdfKernel::V6_18 => "6.18",
        }
    }
}

/// The `sched_features` EEVDF reads, by their names in `kernel/sched/features.h`. An absent
/// flag takes the release's default; a flag the release does not have is refused.
#[allow(non_snake_case)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EevdfFeatures {
    /// Keep a task's lag across sleeps and migrations (default on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub PLACE_LAG: Option<bool>,
    /// A new task's first deadline is half a slice away (default on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub PLACE_DEADLINE_INITIAL: Option<bool>,
    /// A task moved between queues keeps its deadline relative to its vruntime (6.12+, on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub PLACE_REL_DEADLINE: Option<bool>,
    /// Once picked, a task runs until it is no longer eligible or gets a new deadline
    /// (default on; from 6.17 limited to the smallest queued slice).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub RUN_TO_PARITY: Option<bool>,
    /// A waking task with a shorter slice may cancel the current task's protection (6.12+, on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub PREEMPT_SHORT: Option<bool>,
    /// A waking task becomes the next buddy (default off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub NEXT_BUDDY: Option<bool>,
    /// An eligible next buddy is picked first (6.12+, on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub PICK_BUDDY: Option<bool>,
    /// A next buddy counts as cache hot for the balancer (default on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub CACHE_HOT_BUDDY: Option<bool>,
    /// A task that sleeps while not eligible stays queued until picked (6.12+, on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub DELAY_DEQUEUE: Option<bool>,
    /// A delayed task leaves with its positive lag cut to 0 (6.12+, on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub DELAY_ZERO: Option<bool>,
    /// A waking task may preempt the current one (default on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub WAKEUP_PREEMPTION: Option<bool>,
}

/// The effective flags of one kernel (defaults filled in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Features {
    pub place_lag: bool,
    pub place_deadline_initial: bool,
    pub place_rel_deadline: bool,
    pub run_to_parity: bool,
    pub preempt_short: bool,
    pub next_buddy: bool,
    pub pick_buddy: bool,
    pub cache_hot_buddy: bool,
    pub delay_dequeue: bool,
    pub delay_zero: bool,
    pub wakeup_preemption: bool,
}

impl EevdfFeatures {
    /// (name, value, the first release that has the flag).
    fn table(&self) -> [(&'static str, Option<bool>, EevdfKernel); 11] {
        use EevdfKernel::*;
        [
            ("PLACE_LAG", self.PLACE_LAG, V6_6),
            ("PLACE_DEADLINE_INITIAL", self.PLACE_DEADLINE_INITIAL, V6_6),
            ("PLACE_REL_DEADLINE", self.PLACE_REL_DEADLINE, V6_12),
            ("RUN_TO_PARITY", self.RUN_TO_PARITY, V6_6),
            ("PREEMPT_SHORT", self.PREEMPT_SHORT, V6_12),
            ("NEXT_BUDDY", self.NEXT_BUDDY, V6_6),
            ("PICK_BUDDY", self.PICK_BUDDY, V6_12),
            ("CACHE_HOT_BUDDY", self.CACHE_HOT_BUDDY, V6_6),
            ("DELAY_DEQUEUE", self.DELAY_DEQUEUE, V6_12),
            ("DELAY_ZERO", self.DELAY_ZERO, V6_12),
            ("WAKEUP_PREEMPTION", self.WAKEUP_PREEMPTION, V6_6),
        ]
    }

    /// The flags of `kernel` with these overrides; a flag the release does not have is
    /// refused naming it.
    pub(crate) fn resolve(&self, kernel: EevdfKernel) -> Result<Features, String> {
        for (name, v, since) in self.table() {
            if v.is_some() && kernel < since {
                return Err(format!(
                    "features.{name}: Linux {} has no such feature (it appeared in {})",
                    kernel.name(),
                    since.name()
                ));
            }
        }
        let new = kernel >= EevdfKernel::V6_12;
        Ok(Features {
            place_lag: self.PLACE_LAG.unwrap_or(true),
            place_deadline_initial: self.PLACE_DEADLINE_INITIAL.unwrap_or(true),
            place_rel_deadline: self.PLACE_REL_DEADLINE.unwrap_or(new),
            run_to_parity: self.RUN_TO_PARITY.unwrap_or(true),
            preempt_short: self.PREEMPT_SHORT.unwrap_or(new),
            next_buddy: self.NEXT_BUDDY.unwrap_or(false),
            pick_buddy: self.PICK_BUDDY.unwrap_or(new),
            cache_hot_buddy: self.CACHE_HOT_BUDDY.unwrap_or(true),
            delay_dequeue: self.DELAY_DEQUEUE.unwrap_or(new),
            delay_zero: self.DELAY_ZERO.unwrap_or(new),
            wakeup_preemption: self.WAKEUP_PREEMPTION.unwrap_or(true),
        })
    }
}

/// EEVDF's parameters (`[domain.sched] scheduler = "eevdf"`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EevdfParams {
    /// The release modelled; required (a scenario names the version it models).
    pub kernel: EevdfKernel,
    /// CONFIG_HZ of the guest kernel.
    #[serde(default = "default_hz")]
    pub hz: u32,
    /// 0 = none, 1 = log (default), 2 = linear: how `base_slice_ns` scales with the CPU count.
    #[serde(default = "one")]
    pub sched_tunable_scaling: u32,
    /// None: the release's normalised base slice × the CPU-count factor. Some: the effective
    /// value, as written to `/sys/kernel/debug/sched/base_slice_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_slice_ns: Option<u64>,
    #[serde(default = "default_migration_cost")]
    pub sched_migration_cost_ns: u64,
    /// Whether the guest sees that a vCPU is preempted by its host (x86 Xen/KVM).
    #[serde(default)]
    pub vcpu_is_preempted: bool,
    /// Steal time beyond a clock delta is carried over to later updates (5.10.y, 6.6.57) rather
    /// than dropped (6.6.87, 6.12.19, 6.18.2 and 6.13+: "Don't try to catch up excess steal
    /// time"); ERRATA L5. Default: dropped, as the stable releases of every modelled kernel.
    #[serde(default)]
    pub steal_carry_over: bool,
    #[serde(default)]
    pub features: EevdfFeatures,
    /// The RT class's sysctls (`[domain.sched.rt]`, docs/rt.md); the fair server is on by
    /// default from 6.12.
    #[serde(default)]
    pub rt: RtParams,
    /// The deadline class's sysctls (`[domain.sched.deadline]`, docs/deadline.md).
    #[serde(default, skip_serializing_if = "DlParams::is_default")]
    pub deadline: DlParams,
}

fn default_hz() -> u32 {
    250
}
fn one() -> u32 {
    1
}
fn default_migration_cost() -> u64 {
    500_000
}

impl EevdfParams {
    /// The parameters of `kernel` with every default.
    pub fn new(kernel: EevdfKernel) -> Self {
        EevdfParams {
            kernel,
            hz: default_hz(),
            sched_tunable_scaling: 1,
            base_slice_ns: None,
            sched_migration_cost_ns: default_migration_cost(),
            vcpu_is_preempted: false,
            steal_carry_over: false,
            features: EevdfFeatures::default(),
            rt: RtParams::default(),
            deadline: DlParams::default(),
        }
    }

    /// Checks what Linux accepts; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !LINUX_HZ.contains(&self.hz) {
            return Err(format!(
                "hz: {} is not a CONFIG_HZ Linux offers (100, 250, 300 or 1000; 24, 48 or 1024 \
                 on some architectures)",
                self.hz
            ));
        }
        if self.sched_tunable_scaling > 2 {
            return Err(format!(
                "sched_tunable_scaling: {} is outside 0..=2",
                self.sched_tunable_scaling
            ));
        }
        if self.sched_migration_cost_ns > u32::MAX as u64 {
            return Err(format!(
                "sched_migration_cost_ns: {} is outside 0..={}",
                self.sched_migration_cost_ns,
                u32::MAX
            ));
        }
        if let Some(s) = self.base_slice_ns {
            // sched_base_slice is an unsigned int debugfs file; a slice of 0 would give every
            // task a deadline equal to its vruntime (and a 0-length request).
            if !(1..=NS_PER_S).contains(&s) {
                return Err(format!("base_slice_ns: {s} is outside 1..={NS_PER_S}"));
            }
        }
        self.rt.validate().map_err(|m| format!("rt.{m}"))?;
        self.deadline
            .validate()
            .map_err(|m| format!("deadline.{m}"))?;
        self.features.resolve(self.kernel).map(|_| ())
    }
}
