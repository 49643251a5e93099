//! The scenario file schema (TOML) and its validation.
//!
//! The schema is generic over the host and guest scheduler configurations, which live with the
//! policies in `vmsched-sched` as serde-tagged enums (`scheduler = "credit2"`): that enum is the
//! registry. Every table denies unknown fields. A bad file gets one error naming the file, the
//! line, the field and what was expected; nothing runs on a scenario that did not validate.
//! The validation pass itself is in scenario/validate.rs.
//!
//! `--set key=value` overrides are applied to the parsed document before validation, with dotted
//! keys (`host.ratelimit_us=20000`, `domain.1.weight=512`, `run.seed=3`). They are typed: a value
//! is read by the type its field has ([`SetValue`]), not re-parsed from TOML text.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::sched::{CpuTopo, Policy};
use crate::time::{time_ns, Nanos, NS_PER_MS, NS_PER_US};
use crate::workload::WorkloadConfig;

pub mod chaos;
pub mod coord;
pub mod costs;
mod cpupool;
mod errpath;
mod events;
pub mod io;
mod overrides;
mod validate;
pub use cpupool::CpupoolConfig;
pub use events::{EventAction, EventConfig};
pub use overrides::SetValue;
use overrides::{lookup, set_path, typed_value};

/// Checks a scheduler configuration beyond its types.
pub trait ConfigCheck {
    /// Err((field, message)).
    fn check(&self) -> Result<(), (String, String)>;

    /// Whether the policy takes a run-time change of `field` to `value` from the `[[event]]`
    /// timeline (`weight`, `cap`, `ratelimit_us`, `tslice_ms`, `pause` at the host; `nice`,
    /// `policy` (as its discriminant), `rt_priority` in a guest; `cpu_offline`/`cpu_online`
    /// with the CPU as value at either level, and `vcpu_down` at the host for a guest's CPU
    /// offline). Err(why not). The default takes none.
    fn check_adjust(&self, field: &str, _value: i64) -> Result<(), String> {
        Err(format!(
            "this scheduler takes no run-time change of `{field}`"
        ))
    }

    /// Whether a guest's scheduler takes a `sched_task` event moving a task from policy
    /// `from` (its policy at build) to `to` (after `check_adjust("policy", ..)` took `to`):
    /// a Linux kernel whose classes cannot hand a task over refuses moves between them.
    /// Err(why not). The default takes every move.
    fn check_policy_change(&self, _from: Policy, _to: Policy) -> Result<(), String> {
        Ok(())
    }

    /// A KVM host's own processes (`[[host.process]]`), which a `sched_task` event without
    /// `domain` names. The default has none.
    fn host_processes(&self) -> &[WorkloadConfig] {
        &[]
    }

    /// A guest kernel's admission of its SCHED_DEADLINE tasks (`sched_setattr`'s period
    /// bounds and `sched_dl_overflow`), given by name and times in declaration order, for a
    /// guest of `vcpus` CPUs. Err((index of the refused task, field, message)). The default
    /// takes every task.
    fn check_dl_tasks(
        &self,
        _vcpus: u32,
        _tasks: &[(String, crate::sched::SchedTimes)],
    ) -> Result<(), (usize, String, String)> {
        Ok(())
    }

    /// Whether a host scheduler can be a cpupool's (docs/cpupools.md): Err(why not). The
    /// default takes it.
    fn check_cpupool(&self) -> Result<(), String> {
        Ok(())
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario<H, G> {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The cost profile the scenario's per-operation costs come from: a shipped profile's name
    /// (`"cortex-a55"`) or a profile file's path (scenario/costs.rs, docs/scenarios.md). The
    /// scenario's own fields win over the profile's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub costs: Option<String>,
    #[serde(default)]
    pub run: RunConfig,
    pub machine: MachineConfig,
    pub host: H,
    /// Cpupools beside Pool-0 (docs/cpupools.md): each with its own host scheduler over its
    /// pCPUs; `[host]` is Pool-0's and holds the pCPUs none of them names.
    #[serde(
        default = "Vec::new",
        rename = "cpupool",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub cpupools: Vec<CpupoolConfig<H>>,
    /// The guests. None is allowed only beside a KVM host's own processes: bare metal, a
    /// Linux machine running `[[host.process]]` workloads (`vmsched validate`'s model side).
    #[serde(default = "Vec::new", rename = "domain")]
    pub domains: Vec<DomainConfig<G>>,
    /// The `[[event]]` timeline: run-time changes, in time order (ties in declaration order).
    #[serde(default, rename = "event", skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventConfig>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Simulated time, including the warm-up.
    #[serde(default = "d_duration")]
    pub duration_ms: u64,
    /// Metrics are reset at this time.
    #[serde(default)]
    pub warmup_ms: u64,
    #[serde(default = "d_seed")]
    pub seed: u64,
    /// Sample traced per-workload series (e.g. Context1's vruntime gap) this often; 0: off.
    #[serde(default)]
    pub sample_interval_us: u64,
    /// xenmon's figures over fixed windows of this length from the end of the warm-up (the
    /// `xenmon` table's rows with a window number; docs/xenmon.md); 0: only the whole run's.
    #[serde(default = "d_xenmon_window")]
    pub xenmon_window_ms: u64,
    /// The memory the run may plan to use (MB); absent: 80% of the machine's available memory
    /// (`crate::budget`, docs/limits.md). A run whose estimate exceeds it is refused before it
    /// starts. Not a property of the run's results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_mb: Option<u64>,
    /// Vary with the seed what differs between real runs (docs/design.md, Variation): each
    /// domain's and task's start offset, the measurement window's phase and the delivery of
    /// timer interrupts. `false` keeps them fixed (every start at its declared time, the window
    /// at `warmup_ms`, timers exact) for tests that check a rule to the nanosecond; the tick
    /// phases and the boot order stay drawn from the seed either way (docs/design.md, Ties).
    #[serde(default = "d_vary")]
    pub vary: bool,
    /// With `vary`: each domain's work starts uniformly within this bound after its declared
    /// time, each workload within a tenth of it after its domain, and the warm-up's end (the
    /// measurement window's start) within it, at most `warmup_ms`.
    #[serde(default = "d_start_spread")]
    pub start_spread_us: u64,
    /// With `vary`: a timer interrupt (a tick, a scheduler's slice or policy timer) is handled
    /// a delay drawn uniformly from `0..=irq_jitter_ns` after its expiry.
    #[serde(default = "d_irq_jitter")]
    pub irq_jitter_ns: u64,
}

fn d_vary() -> bool {
    true
}
/// 10 ms: one period of the slowest tick modelled (HZ = 100).
fn d_start_spread() -> u64 {
    10_000
}
/// 2 µs: a timer interrupt's entry on a 1–3 GHz core varies by about that much.
fn d_irq_jitter() -> u64 {
    2_000
}

/// The largest `run.start_spread_us` (1 s) and `run.irq_jitter_ns` (100 µs, below any tick).
pub const MAX_START_SPREAD_US: u64 = 1_000_000;
pub const MAX_IRQ_JITTER_NS: u64 = 100_000;

fn d_duration() -> u64 {
    1000
}
fn d_seed() -> u64 {
    1
}
fn d_xenmon_window() -> u64 {
    1000
}

impl RunConfig {
    /// `duration_ms` in ns, checked: the run's end.
    pub fn duration_ns(&self) -> Result<Nanos, (String, String)> {
        time_ns("run.duration_ms", self.duration_ms, NS_PER_MS)
    }

    /// `warmup_ms` in ns, checked.
    pub fn warmup_ns(&self) -> Result<Nanos, (String, String)> {
        time_ns("run.warmup_ms", self.warmup_ms, NS_PER_MS)
    }

    /// `sample_interval_us` in ns, checked (0: no sampling).
    pub fn sample_interval_ns(&self) -> Result<Nanos, (String, String)> {
        time_ns("run.sample_interval_us", self.sample_interval_us, NS_PER_US)
    }

    /// `xenmon_window_ms` in ns, checked (0: no windows).
    pub fn xenmon_window_ns(&self) -> Result<Nanos, (String, String)> {
        time_ns("run.xenmon_window_ms", self.xenmon_window_ms, NS_PER_MS)
    }

    fn validate(&self) -> Result<(), (String, String)> {
        let end = self.duration_ns()?;
        let warmup = self.warmup_ns()?;
        self.sample_interval_ns()?;
        self.xenmon_window_ns()?;
        if end == 0 {
            return Err(("run.duration_ms".into(), "must be positive".into()));
        }
        if warmup >= end {
            return Err((
                "run.warmup_ms".into(),
                "must be shorter than run.duration_ms".into(),
            ));
        }
        if self.memory_limit_mb == Some(0) {
            return Err(("run.memory_limit_mb".into(), "must be at least 1".into()));
        }
        if self.start_spread_us > MAX_START_SPREAD_US {
            return Err((
                "run.start_spread_us".into(),
                format!("must be at most {MAX_START_SPREAD_US} (1 s)"),
            ));
        }
        if self.irq_jitter_ns > MAX_IRQ_JITTER_NS {
            return Err((
                "run.irq_jitter_ns".into(),
                format!("must be at most {MAX_IRQ_JITTER_NS} (100 µs)"),
            ));
        }
        Ok(())
    }

    /// What the seed varies (`vary`, `start_spread_us`, `irq_jitter_ns`); nothing when `vary`
    /// is false. Validated bounds, so the conversion cannot overflow.
    pub fn variation(&self) -> crate::sim::Variation {
        if !self.vary {
            return crate::sim::Variation::default();
        }
        crate::sim::Variation {
            start_spread: self.start_spread_us * NS_PER_US,
            irq_jitter: self.irq_jitter_ns,
        }
    }
}

/// Checks that a configured nanosecond value is within [`crate::time::MAX_TIME_NS`].
pub(crate) fn check_ns(field: &str, v: Nanos) -> Result<(), (String, String)> {
    time_ns(field, v, 1).map(|_| ())
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            duration_ms: d_duration(),
            warmup_ms: 0,
            seed: d_seed(),
            sample_interval_us: 0,
            xenmon_window_ms: d_xenmon_window(),
            memory_limit_mb: None,
            vary: d_vary(),
            start_spread_us: d_start_spread(),
            irq_jitter_ns: d_irq_jitter(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    #[default]
    X86,
    /// Every CPU reports socket 0, core 0, no SMT (ERRATA X4).
    Arm64,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    pub pcpus: u32,
    #[serde(default)]
    pub arch: Arch,
    #[serde(default = "one")]
    pub sockets: u32,
    #[serde(default = "one")]
    pub threads_per_core: u32,
    /// Delay of a reschedule IPI between physical CPUs.
    #[serde(default)]
    pub ipi_latency_ns: u64,
    /// Cost of switching a pCPU to another vCPU than it last ran (Xen `context_switch`: state
    /// save and restore), during which the vCPU runs without executing; also the cost of a host
    /// task's switch. Default 0.
    #[serde(default)]
    pub ctxsw_cost_ns: u64,
    /// A further delay for a vCPU switched in on a pCPU that last ran another entity: the
    /// refill of the caches the other one evicted. A modelling assumption (no Xen figure);
    /// default 0.
    #[serde(default)]
    pub vcpu_refill_ns: u64,
    /// Xen's `vwfi=` on Arm: "trap" (default: WFI blocks the vCPU, WFE yields it) or "native".
    #[serde(default)]
    pub vwfi: Vwfi,
    /// Round trip of a trapped spin-wait (guest exit, yield, re-entry): a trapped WFE on Arm, a
    /// PAUSE-loop exit on x86 (about the default `ple_window` of 4096 cycles).
    #[serde(default = "d_wfe_trap")]
    pub wfe_trap_ns: u64,
    /// The hypervisor: "xen" (default) or "kvm"; with `arch`, `vwfi` and each domain's
    /// `guest_type` it selects the exit model (`hv::ExitModel::for_guest`).
    #[serde(default)]
    pub hypervisor: Hypervisor,
    /// KVM's `halt_poll_ns` (default `KVM_HALT_POLL_NS_DEFAULT`: 200000 on x86, 500000 on
    /// arm64; 0 turns polling off). Only with `hypervisor = "kvm"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halt_poll_ns: Option<u64>,
    /// Latency of the kick that wakes a halted vCPU for a guest event (default 0).
    #[serde(default)]
    pub kick_ns: u64,
    /// Cost of the trap on a vCPU's halt path (hypercall or HLT/WFI exit; default 0).
    #[serde(default)]
    pub hypercall_ns: u64,
    /// A timer expiry at the host level (bare metal, a KVM host's `[[host.process]]` tasks):
    /// the hrtimer interrupt's entry, the expiry and the wake-up of the timer's task
    /// (Linux: `hrtimer_interrupt` → `hrtimer_wakeup` → `try_to_wake_up`), and the idle CPU's
    /// exit before it. A host task's sleep timer is handled this much after its deadline
    /// (its hard one, with the slack). Default 0: the timer is handled at its deadline.
    /// Guests' timers do not take it (their path is the host's kick, `kick_ns`).
    /// `vmsched calibrate` measures it (docs/validation.md).
    #[serde(default)]
    pub timer_expiry_ns: u64,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Hypervisor {
    #[default]
    Xen,
    Kvm,
}

/// A guest's virtualization mode (xl.cfg `type`): it decides which exits exist.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum GuestType {
    /// Paravirtualized (Xen x86 only): the idle loop blocks by hypercall; PAUSE is not trapped.
    Pv,
    /// Hardware-virtualized: HLT/WFI and PAUSE-loop/WFE exits.
    Hvm,
}

fn d_wfe_trap() -> u64 {
    2000
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Vwfi {
    #[default]
    Trap,
    Native,
}

fn one() -> u32 {
    1
}

impl MachineConfig {
    /// Sockets of equal size, each holding whole cores: `pcpus` is a multiple of `sockets`, and
    /// a socket's CPUs a multiple of `threads_per_core`.
    fn validate_topology(&self) -> Result<(), (String, String)> {
        let (n, s, t) = (self.pcpus, self.sockets, self.threads_per_core);
        if s == 0 || s > n || n % s != 0 {
            return Err((
                "machine.sockets".into(),
                format!("must divide machine.pcpus = {n} into equal sockets (1..={n}), got {s}"),
            ));
        }
        let per_socket = n / s;
        if t == 0 || t > per_socket || per_socket % t != 0 {
            return Err((
                "machine.threads_per_core".into(),
                format!("must divide the {per_socket} pCPUs of a socket into whole cores, got {t}"),
            ));
        }
        Ok(())
    }

    /// The hypervisor's options: costs bounded, `halt_poll_ns` only for KVM, `vwfi = "native"`
    /// only on Arm (Xen's `vwfi=` and KVM's `wfi_trap_policy` exist only there).
    fn validate_hv(&self) -> Result<(), (String, String)> {
        check_ns("machine.kick_ns", self.kick_ns)?;
        check_ns("machine.hypercall_ns", self.hypercall_ns)?;
        if let Some(p) = self.halt_poll_ns {
            check_ns("machine.halt_poll_ns", p)?;
            if self.hypervisor != Hypervisor::Kvm {
                return Err((
                    "machine.halt_poll_ns".into(),
                    "is KVM's halt-polling window: set machine.hypervisor = \"kvm\" or remove it"
                        .into(),
                ));
            }
        }
        if self.vwfi == Vwfi::Native && self.arch != Arch::Arm64 {
            return Err((
                "machine.vwfi".into(),
                "\"native\" exists only with arch = \"arm64\" (WFI/WFE trapping is an Arm option)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// A domain's guest type: `given`, or the default of the hypervisor and architecture ("pv"
    /// for Xen on x86, as xl's `type`; "hvm" otherwise). Err: a type that does not exist there.
    pub fn guest_type(&self, given: Option<GuestType>) -> Result<GuestType, String> {
        let xen_x86 = self.hypervisor == Hypervisor::Xen && self.arch == Arch::X86;
        match given {
            None if xen_x86 => Ok(GuestType::Pv),
            None | Some(GuestType::Hvm) => Ok(GuestType::Hvm),
            Some(GuestType::Pv) if xen_x86 => Ok(GuestType::Pv),
            Some(GuestType::Pv) => Err(match self.hypervisor {
                Hypervisor::Kvm => "\"pv\" needs Xen: KVM guests are \"hvm\"".into(),
                Hypervisor::Xen => {
                    "\"pv\" exists only on x86: Xen on Arm guests are \"hvm\"".into()
                }
            }),
        }
    }

    /// The physical CPUs' topology.
    pub fn topology(&self) -> Vec<CpuTopo> {
        let n = self.pcpus;
        let per_socket = n.div_ceil(self.sockets.max(1)).max(1);
        (0..n)
            .map(|i| match self.arch {
                Arch::Arm64 => CpuTopo::default(),
                Arch::X86 => {
                    let socket = i / per_socket;
                    CpuTopo {
                        node: socket,
                        socket,
                        core: i / self.threads_per_core.max(1),
                        thread: i % self.threads_per_core.max(1),
                        llc: socket,
                    }
                }
            })
            .collect()
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DomainConfig<G> {
    pub name: String,
    pub vcpus: u32,
    /// Xen weight (`xl sched-credit -w`, `xl sched-credit2 -w`; xl.cfg `cpu_weight`).
    #[serde(default = "d_weight")]
    pub weight: u32,
    /// Xen cap in percent of one pCPU, 0 = none (`xl sched-credit -c`, `xl sched-credit2 -c`;
    /// xl.cfg `cap`).
    #[serde(default)]
    pub cap: u32,
    /// RTDS budget per period of every vCPU (µs; `xl sched-rtds -d D -v all -b`); absent:
    /// Xen's 4000. Read by the RTDS host only; validated by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_us: Option<u64>,
    /// RTDS period of every vCPU (µs; `xl sched-rtds -p`); absent: Xen's 10000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_us: Option<u64>,
    /// RTDS extratime of every vCPU (`xl sched-rtds -e 1/0`); absent: on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extratime: Option<bool>,
    /// Nice value of every vCPU thread under a Linux (KVM) host (`renice` of the QEMU vCPU
    /// threads); absent: 0. Read by `[host] scheduler = "linux"` only, refused by the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpu_nice: Option<i32>,
    /// Scheduling policy of every vCPU thread under a Linux (KVM) host (`chrt`): "normal"
    /// (default), "batch", "idle", "fifo" or "rr".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpu_policy: Option<crate::sched::Policy>,
    /// `sched_priority` (1..=99) of vCPU threads whose `vcpu_policy` is "fifo" or "rr".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpu_rt_priority: Option<u32>,
    /// This VM's halt-polling cap in ns (`KVM_CAP_HALT_POLL`, Linux 5.8 on: it sets the VM's
    /// `max_halt_poll_ns` in place of the `halt_poll_ns` module parameter, here
    /// `machine.halt_poll_ns`), for its vCPUs only. KVM only; not under a 3.17 host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halt_poll_ns: Option<u64>,
    /// Hard affinity of every vCPU (pCPU ids); default all.
    #[serde(default)]
    pub pcpus: Option<Vec<u32>>,
    /// Hard affinity per vCPU; overrides `pcpus`.
    #[serde(default)]
    pub vcpu_pcpus: Option<Vec<Vec<u32>>>,
    /// Soft affinity of every vCPU; default all.
    #[serde(default)]
    pub soft_pcpus: Option<Vec<u32>>,
    /// The cpupool the domain is created in (a `[[cpupool]]` name; default Pool-0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    #[serde(default)]
    pub kernel: KernelConfig,
    /// The guest's paravirtual interfaces (crate::pv, docs/pvops.md); absent fields take the
    /// guest kernel's boot-time choice on this machine.
    #[serde(default)]
    pub pv: crate::pv::PvConfig,
    pub sched: G,
    #[serde(default, rename = "workload")]
    pub workloads: Vec<WorkloadConfig>,
    /// `xl create` during the run (ms): the vCPUs are inserted then, and the guest's tasks
    /// start at their start times counted from then. None: the domain exists from the start.
    /// Domains created during the run come after the others, in creation order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_at_ms: Option<u64>,
    /// `xl destroy` during the run (ms): the vCPUs leave the host scheduler; figures are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destroy_at_ms: Option<u64>,
    /// "pv" or "hvm" (xl.cfg `type`); default: "pv" for Xen on x86 (xl's default there), "hvm"
    /// otherwise (Xen on Arm and KVM have only hardware-virtualized guests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_type: Option<GuestType>,
    /// A driver domain (dom0): it owns the physical NIC and runs netback for the guests' I/O
    /// workloads (docs/io.md). The first such domain serves every guest.
    #[serde(default)]
    pub driver: bool,
    /// The driver domain's network path costs (read only with `driver = true`).
    #[serde(default)]
    pub netback: io::NetbackConfig,
    /// An HVM guest's device model in the driver domain (read when its programs make emulated
    /// I/O accesses, `ioreq` steps; ERRATA X9, docs/io.md).
    #[serde(default)]
    pub device_model: io::DeviceModelConfig,
    /// Coordinated scheduling with a KVM host (seed 003 §VI.B; docs/kvm.md). Read by
    /// `[host] scheduler = "linux"` only, refused by the others when enabled.
    #[serde(default)]
    pub coord: coord::CoordConfig,
    /// Seeded injection of vCPU preemptions (issue 14 item 6; docs/chaos.md). Absent or rate
    /// 0: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chaos: Option<chaos::ChaosConfig>,
}

fn d_weight() -> u32 {
    256
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Preempt {
    /// PREEMPT_NONE / VOLUNTARY: a reschedule inside a system call waits for its exit.
    #[default]
    None,
    /// CONFIG_PREEMPT.
    Full,
}

/// What the guest's tick does on an idle CPU.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TickMode {
    /// CONFIG_NO_HZ_IDLE: the tick stops while the CPU is idle.
    #[default]
    NohzIdle,
    /// CONFIG_HZ_PERIODIC: the tick runs on idle CPUs too, waking a halted vCPU every period.
    Periodic,
}

/// The guest kernel's settings that are not its scheduler's.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KernelConfig {
    /// CONFIG_PARAVIRT_TIME_ACCOUNTING (with a steal clock available).
    #[serde(default)]
    pub paravirt_time_accounting: bool,
    #[serde(default)]
    pub preempt: Preempt,
    /// Delay of a reschedule IPI between the guest's vCPUs.
    #[serde(default)]
    pub ipi_latency_ns: u64,
    /// Cost of a task context switch.
    #[serde(default)]
    pub ctxsw_cost_ns: u64,
    /// The tick on idle CPUs: `nohz_idle` (stopped) or `periodic`.
    #[serde(default)]
    pub tick: TickMode,
    /// Linux `skew_tick=1`: the CPUs' ticks are spread over half a period instead of aligned.
    #[serde(default)]
    pub skew_tick: bool,
    /// Offset of the tick grid from time 0 (taken modulo the tick period); absent: drawn from
    /// the run's seed (the kernel booted at an unknown time).
    #[serde(default)]
    pub tick_phase_ns: Option<u64>,
    /// The order in which the kernel's event-channel upcall serves pending ports:
    /// `round_robin` (upstream Linux `events_2l`, the default) or `lowest_first` (XenLinux up
    /// to 3.1; ERRATA X5).
    #[serde(default)]
    pub evtchn_order: crate::sim::ScanOrder,
    /// Ports per event-channel word: the guest's long, 64 (default) or 32.
    #[serde(default = "d_word_bits")]
    pub evtchn_word_bits: u32,
}

fn d_word_bits() -> u32 {
    64
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            paravirt_time_accounting: false,
            preempt: Preempt::None,
            ipi_latency_ns: 0,
            ctxsw_cost_ns: 0,
            tick: TickMode::NohzIdle,
            skew_tick: false,
            tick_phase_ns: None,
            evtchn_order: Default::default(),
            evtchn_word_bits: d_word_bits(),
        }
    }
}

/// A scenario that failed to load: where and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub line: Option<usize>,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ScenarioError {}

fn line_of(src: &str, offset: usize) -> usize {
    src[..offset.min(src.len())]
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

/// Line of the value at a dotted path (`domain.1.vcpus`) in the source, if it is there.
fn locate(src: &str, path: &str) -> Option<usize> {
    let root = toml::de::DeTable::parse(src).ok()?;
    let mut cur = toml::de::DeValue::Table(root.into_inner());
    let mut span = None;
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        let next = match seg.parse::<usize>() {
            Ok(i) => cur.get(i),
            Err(_) => cur.get(seg),
        };
        match next {
            Some(v) => {
                span = Some(v.span());
                cur = v.get_ref().clone();
            }
            None => break,
        }
    }
    span.map(|s| line_of(src, s.start))
}

/// As [`locate`]; a top-level field the file does not have (a missing `[[domain]]`) is the top
/// level's, at line 1, as serde reports a missing field.
fn locate_or_top(src: &str, path: &str) -> Option<usize> {
    locate(src, path).or((!path.is_empty() && !path.contains('.')).then_some(1))
}

/// Serde reports an unknown field inside a tagged table (`[host]`, `[[domain.workload]]`) at the
/// table's header; point at the field's own line when it follows in that table.
fn refine_line(src: &str, line: Option<usize>, msg: &str) -> Option<usize> {
    let line = line?;
    let Some(rest) = msg.strip_prefix("unknown field `") else {
        return Some(line);
    };
    let Some(field) = rest.split('`').next() else {
        return Some(line);
    };
    for (i, l) in src.lines().enumerate().skip(line - 1) {
        let t = l.trim_start();
        if i + 1 > line && t.starts_with('[') {
            break;
        }
        if let Some(after) = t.strip_prefix(field) {
            if after.trim_start().starts_with('=') {
                return Some(i + 1);
            }
        }
    }
    Some(line)
}

impl<H, G> Scenario<H, G>
where
    H: DeserializeOwned + Serialize + ConfigCheck,
    G: DeserializeOwned + Serialize + ConfigCheck,
{
    /// Parses and validates a scenario with command-line `--set key=value` overrides (each
    /// value is text, parsed by its field's type). `file` names the source in errors.
    pub fn parse(
        file: &str,
        src: &str,
        overrides: &[(String, String)],
    ) -> Result<Self, ScenarioError> {
        let typed: Vec<(String, SetValue)> = overrides
            .iter()
            .map(|(k, v)| (k.clone(), SetValue::Text(v.clone())))
            .collect();
        Self::parse_with(file, src, &typed)
    }

    /// Parses and validates a scenario with typed overrides (see [`SetValue`]).
    pub fn parse_with(
        file: &str,
        src: &str,
        overrides: &[(String, SetValue)],
    ) -> Result<Self, ScenarioError> {
        let err = |line, field: &str, message: String| ScenarioError {
            file: file.to_string(),
            line,
            field: field.to_string(),
            message,
        };
        // First the file as written, so errors point at its lines.
        let scenario: Self = toml::from_str(src).map_err(|e| {
            let msg = e.message().trim().to_string();
            let found = errpath::locate_error(src, e.span(), &msg);
            let line = found
                .at
                .or(e.span().map(|s| s.start))
                .map(|o| line_of(src, o));
            err(refine_line(src, line, &msg), &found.path, msg)
        })?;
        // A cost profile fills the fields the file leaves out; the merged document is then the
        // scenario (and the base the overrides apply to).
        let mut merged: Option<toml::Value> = None;
        let scenario = match &scenario.costs {
            None => scenario,
            Some(spec) => {
                let at = || locate(src, "costs");
                let profile = costs::source(spec, file)
                    .and_then(|text| costs::parse(spec, &text))
                    .map_err(|m| err(at(), "costs", m))?;
                let mut doc: toml::Value =
                    toml::from_str(src).map_err(|e| err(None, "", e.to_string()))?;
                costs::apply(&mut doc, &profile);
                let s: Self = doc.clone().try_into().map_err(|e: toml::de::Error| {
                    let msg = e.message().trim();
                    err(at(), "costs", format!("with cost profile {spec}: {msg}"))
                })?;
                merged = Some(doc);
                s
            }
        };
        // The file as written must validate on its own, unless overrides are given: then it is
        // the result that must (an event at 5 ms of a 2 ms file is fine with `--set
        // run.duration_ms=10`). A failure of a field no override changes still points at its
        // line in the file.
        let own = scenario.validate();
        if overrides.is_empty() {
            return match own {
                Ok(()) => Ok(scenario),
                Err((field, msg)) => Err(err(locate_or_top(src, &field), &field, msg)),
            };
        }
        // The fields' types: the validated scenario with its defaults, serialised. Values are set
        // in the document as written (defaults of another variant would not fit a new `kind`).
        let schema = toml::Value::try_from(&scenario).ok();
        let mut doc: toml::Value = match merged {
            Some(d) => d,
            None => toml::from_str(src).map_err(|e| err(None, "", e.to_string()))?,
        };
        for (k, v) in overrides {
            if k.trim().is_empty() {
                // Nothing to name but the option itself (found by the overrides fuzz target).
                return Err(err(
                    None,
                    "--set",
                    format!("--set {k}={v}: the key is empty (KEY=VALUE)"),
                ));
            }
            let target = schema.as_ref().and_then(|s| lookup(s, k));
            typed_value(v, target)
                .and_then(|tv| set_path(&mut doc, k, tv))
                .map_err(|m| err(None, k, format!("--set {k}={v}: {m}")))?;
        }
        let names = overrides
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let scenario: Self = doc.try_into().map_err(|e: toml::de::Error| {
            let msg = e.message().trim();
            // The override the message is about: the one whose value it quotes, else the first.
            let key = overrides
                .iter()
                .find(|(_, v)| msg.contains(&v.to_string()))
                .or(overrides.first())
                .map_or("", |(k, _)| k.as_str());
            err(None, key, format!("after --set {names}: {msg}"))
        })?;
        match scenario.validate() {
            Ok(()) => Ok(scenario),
            // The file's own error, unchanged by the overrides: said as the file's, at its line.
            Err(e) if own.as_ref().err() == Some(&e) => {
                Err(err(locate_or_top(src, &e.0), &e.0, e.1))
            }
            // Said with the overrides; at the field's line in the file if it has one there and
            // no override set it.
            Err((field, msg)) => {
                let line = match overrides.iter().any(|(k, _)| *k == field) {
                    true => None,
                    false => locate(src, &field),
                };
                Err(err(line, &field, format!("after --set {names}: {msg}")))
            }
        }
    }
}

impl<G> DomainConfig<G> {
    /// Hard affinity of vCPU `v` as pCPU ids.
    pub fn hard_affinity(&self, v: u32, pcpus: u32) -> Vec<u32> {
        if let Some(per) = &self.vcpu_pcpus {
            return per[v as usize].clone();
        }
        self.pcpus.clone().unwrap_or_else(|| (0..pcpus).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    struct Host {
        version: String,
        #[serde(default = "d_ratelimit")]
        ratelimit_us: u64,
        #[serde(default)]
        boost: bool,
    }
    fn d_ratelimit() -> u64 {
        1000
    }
    impl ConfigCheck for Host {
        fn check(&self) -> Result<(), (String, String)> {
            if self.ratelimit_us < 100 {
                return Err(("ratelimit_us".into(), "must be ≥ 100".into()));
            }
            Ok(())
        }
    }
    #[derive(Debug, Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    struct Guest {
        #[serde(default)]
        version: String,
    }
    impl ConfigCheck for Guest {
        fn check(&self) -> Result<(), (String, String)> {
            Ok(())
        }
    }
    type S = Scenario<Host, Guest>;
    const SRC: &str = "[machine]\npcpus = 2\n[host]\nversion = \"4.20.2\"\n\
                       [[domain]]\nname = \"d\"\nvcpus = 1\n[domain.sched]\n";

    fn set(k: &str, v: SetValue) -> Vec<(String, SetValue)> {
        vec![(k.to_string(), v)]
    }

    #[test]
    fn overrides_are_typed_by_the_schema() {
        let s = S::parse("t.toml", SRC, &[("host.version".into(), "4.21".into())]).unwrap();
        assert_eq!(s.host.version, "4.21");
        // A defaulted field has its type too, and so does a field of an array's element.
        let ov = [
            ("host.ratelimit_us".to_string(), "20000".to_string()),
            ("host.boost".into(), "true".into()),
            ("domain.0.sched.version".into(), "5.10".into()),
        ];
        let s = S::parse("t.toml", SRC, &ov).unwrap();
        assert_eq!((s.host.ratelimit_us, s.host.boost), (20000, true));
        assert_eq!(s.domains[0].sched.version, "5.10");
        let s = S::parse_with("t.toml", SRC, &set("run.seed", SetValue::Int(9))).unwrap();
        assert_eq!(s.run.seed, 9);
    }

    #[test]
    fn override_errors_name_the_key_and_the_type() {
        let e =
            S::parse_with("t.toml", SRC, &set("host.version", SetValue::Float(4.21))).unwrap_err();
        assert_eq!(e.field, "host.version");
        assert!(e.message.contains("expected a string"), "{e}");
        let e = S::parse("t.toml", SRC, &[("run.seed".into(), "x".into())]).unwrap_err();
        assert_eq!(e.field, "run.seed");
        assert_eq!(e.message, "--set run.seed=x: expected an integer, got 'x'");
        // Validation after the overrides still runs and says so.
        let e = S::parse("t.toml", SRC, &[("host.ratelimit_us".into(), "50".into())]).unwrap_err();
        assert_eq!(e.field, "host.ratelimit_us");
        assert!(
            e.message.starts_with("after --set host.ratelimit_us=50"),
            "{e}"
        );
        let e = S::parse("t.toml", SRC, &[("host.frob".into(), "1".into())]).unwrap_err();
        assert!(e.message.contains("frob"), "{e}");
        // An empty key is refused, and the error still names where it comes from.
        let e = S::parse("t.toml", SRC, &[("".into(), "1".into())]).unwrap_err();
        assert_eq!(e.field, "--set");
        assert!(e.message.contains("key is empty"), "{e}");
    }
}
