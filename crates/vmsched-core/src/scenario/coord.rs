//! `[domain.coord]`: coordinated scheduling between a Linux guest and its KVM host, as seed 003
//! proposes it (§VI.B, "Towards Coordinated Task Scheduling in Virtualized Systems"): when a
//! task the guest deems interactive wakes on a vCPU, the guest kernel makes a hypercall (an
//! HVC trap on Arm, about 2000 cycles, as Virtual-BFQ's channel), and the host boosts that
//! vCPU's QEMU thread until the guest says it is done or a bound expires. The real-time case is
//! the one of the document's refs \[10\] (Kiszka, "Towards Linux as a real-time hypervisor",
//! RTLWS 2009) and \[11\]: the host passes the guest task's policy and priority on to the vCPU
//! thread. The engine side is `sim/coord.rs`; docs/kvm.md, Coordinated scheduling.

use serde::{Deserialize, Serialize};

use super::check_ns;
use crate::sched::Policy;

/// `[domain.coord]` of a domain under a KVM host.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CoordConfig {
    /// Coordination on (`--set domain.N.coord.enable=true`). Default off.
    #[serde(default)]
    pub enable: bool,
    /// Detection: every SCHED_FIFO/SCHED_RR guest task is interactive (the real-time case of
    /// refs \[10\]\[11\]). Default on.
    #[serde(default = "yes")]
    pub rt: bool,
    /// Detection: the explicit per-task flag. Workload names (every task of the workload) or
    /// task names (`ct.0`) of this domain whose tasks are interactive whatever their policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<String>,
    /// What the boosted vCPU thread becomes: "fifo" (default) or "rr" at `boost_rt_priority`,
    /// or "normal" at `boost_nice`.
    #[serde(default = "d_policy")]
    pub boost_policy: Policy,
    /// The boosted thread's `sched_priority` (1..=99; default 1) under "fifo" or "rr".
    #[serde(default = "d_prio")]
    pub boost_rt_priority: u32,
    /// Pass the waking task's own RT priority on to the vCPU thread instead of
    /// `boost_rt_priority` when the task is FIFO/RR (refs \[10\]\[11\]). Default off.
    #[serde(default)]
    pub pass_priority: bool,
    /// The boosted thread's nice value under `boost_policy = "normal"` (default -20).
    #[serde(default = "d_nice")]
    pub boost_nice: i32,
    /// Cost of each hypercall (boost and unboost) on the calling vCPU, ns. Default 1000: the
    /// document's 2000 cycles of an HVC trap at 2 GHz (2000 ns on a 1 GHz Arm core).
    #[serde(default = "d_cost")]
    pub hypercall_ns: u64,
    /// The longest the host keeps a boost without an unboost (µs): at expiry it restores the
    /// thread's attributes, and the guest boosts that vCPU again only after its unboost. 0: no
    /// bound. Default 10000 (10 ms; a model choice, the document names no value).
    #[serde(default = "d_bound")]
    pub bound_us: u64,
}

fn yes() -> bool {
    true
}
fn d_policy() -> Policy {
    Policy::Fifo
}
fn d_prio() -> u32 {
    1
}
fn d_nice() -> i32 {
    -20
}
fn d_cost() -> u64 {
    1000
}
fn d_bound() -> u64 {
    10_000
}

impl Default for CoordConfig {
    fn default() -> Self {
        CoordConfig {
            enable: false,
            rt: yes(),
            tasks: Vec::new(),
            boost_policy: d_policy(),
            boost_rt_priority: d_prio(),
            pass_priority: false,
            boost_nice: d_nice(),
            hypercall_ns: d_cost(),
            bound_us: d_bound(),
        }
    }
}

impl CoordConfig {
    /// The bound in ns (0: none), checked.
    pub fn bound_ns(&self) -> Result<u64, (String, String)> {
        crate::time::time_ns("bound_us", self.bound_us, crate::time::NS_PER_US)
    }

    /// Checks the table of a domain whose workloads are named `workloads` and whose tasks are
    /// named `task_names`. Err((field relative to the table, message)).
    pub fn validate(
        &self,
        workloads: &[&str],
        task_names: &[String],
    ) -> Result<(), (String, String)> {
        check_ns("hypercall_ns", self.hypercall_ns)?;
        self.bound_ns()?;
        match self.boost_policy {
            Policy::Fifo | Policy::Rr => {
                if !(1..=99).contains(&self.boost_rt_priority) {
                    return Err((
                        "boost_rt_priority".into(),
                        format!("must be in 1..=99, got {}", self.boost_rt_priority),
                    ));
                }
            }
            Policy::Normal => {
                if !(-20..=19).contains(&self.boost_nice) {
                    return Err((
                        "boost_nice".into(),
                        format!("must be in -20..=19, got {}", self.boost_nice),
                    ));
                }
            }
            p => {
                return Err((
                    "boost_policy".into(),
                    format!("must be \"fifo\", \"rr\" or \"normal\", got {p:?}"),
                ))
            }
        }
        for (i, t) in self.tasks.iter().enumerate() {
            if !workloads.contains(&t.as_str()) && !task_names.contains(t) {
                return Err((
                    format!("tasks.{i}"),
                    format!("names no workload or task of the domain: '{t}'"),
                ));
            }
        }
        if !self.rt && self.tasks.is_empty() && self.enable {
            return Err((
                "tasks".into(),
                "with rt = false, name the interactive tasks (no task would ever be boosted)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Is a task of workload `workload`, named `task`, with `policy`, interactive?
    pub fn flags(&self, workload: &str, task: &str, policy: Policy) -> bool {
        (self.rt && matches!(policy, Policy::Fifo | Policy::Rr))
            || self.tasks.iter().any(|t| t == workload || t == task)
    }
}
