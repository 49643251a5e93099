//! The guest scheduler registry: `[domain.sched] scheduler = "..."` as a serde-tagged enum,
//! its checks (`ConfigCheck`: parameters, run-time changes, deadline admission) and
//! `make_guest`, which boxes the chosen Linux core.

use serde::{Deserialize, Serialize};
use vmsched_core::scenario::ConfigCheck;
use vmsched_core::{CpuTopo, Policy};

use crate::guest::bfs::{Bfs, BfsParams};
use crate::guest::cfs::{Cfs, CfsParams};
use crate::guest::eevdf::{Eevdf, EevdfParams};

use super::split_field;

/// `[domain.sched] scheduler = "..."`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "scheduler", rename_all = "lowercase")]
pub enum GuestSchedConfig {
    Cfs(CfsParams),
    /// Linux EEVDF (`kernel = "6.6" | "6.12" | "6.18"`).
    Eevdf(EevdfParams),
    /// BFS (`version = "0.458"`, the release for Linux 3.17): the whole scheduler, RT included.
    Bfs(BfsParams),
}

impl ConfigCheck for GuestSchedConfig {
    fn check(&self) -> Result<(), (String, String)> {
        match self {
            GuestSchedConfig::Cfs(p) => p.validate().map_err(split_field),
            GuestSchedConfig::Eevdf(p) => p.validate().map_err(split_field),
            GuestSchedConfig::Bfs(p) => p.validate().map_err(split_field),
        }
    }

    /// Linux 5.10 (CFS under the RT class) takes nice, a change of policy within a class
    /// (see `check_policy_change`) and an RT task's new `rt_priority`.
    fn check_adjust(&self, field: &str, _value: i64) -> Result<(), String> {
        match (self, field) {
            (
                GuestSchedConfig::Cfs(_),
                "nice" | "policy" | "rt_priority" | "cpu_offline" | "cpu_online",
            ) => Ok(()),
            (GuestSchedConfig::Cfs(_), _) => {
                Err(format!("cfs takes no run-time change of `{field}`"))
            }
            (
                GuestSchedConfig::Eevdf(_),
                "nice" | "policy" | "rt_priority" | "cpu_offline" | "cpu_online",
            ) => Ok(()),
            (GuestSchedConfig::Eevdf(_), _) => {
                Err(format!("eevdf takes no run-time change of `{field}`"))
            }
            (
                GuestSchedConfig::Bfs(_),
                "nice" | "policy" | "rt_priority" | "cpu_offline" | "cpu_online",
            ) => Ok(()),
            (GuestSchedConfig::Bfs(_), _) => {
                Err(format!("bfs takes no run-time change of `{field}`"))
            }
        }
    }

    /// A task stays in its class: normal, batch and idle move among themselves (the fair
    /// class), fifo and rr among themselves (the RT class); a move between classes (the
    /// deadline class included; `switched_from`/`switched_to`) is not modelled.
    /// Linux v5.10: the period bounds of `__checkparam_dl` and `sched_dl_overflow`
    /// (`guest/deadline.rs`).
    fn check_dl_tasks(
        &self,
        vcpus: u32,
        tasks: &[(String, vmsched_core::sched::SchedTimes)],
    ) -> Result<(), (usize, String, String)> {
        if let GuestSchedConfig::Bfs(_) = self {
            return match tasks.first() {
                Some(_) => Err((
                    0,
                    "policy".into(),
                    "BFS has no SCHED_DEADLINE (it replaces the whole Linux scheduler and \
                     queues only normal, RT, ISO and idle tasks)"
                        .into(),
                )),
                None => Ok(()),
            };
        }
        let (rt, dl) = self.rt_dl();
        crate::guest::deadline::admit(rt, dl, vcpus, tasks)
    }

    /// A guest kernel's task moves between the fair and the RT class at run time (the Linux
    /// core's class switch, `guest/linux_core.rs`: at once if it is runnable, at its next
    /// wake-up if it is blocked); SCHED_DEADLINE stays out (no runtime, deadline or period is
    /// given). BFS queues every policy in one array: a task changes level, not class.
    fn check_policy_change(&self, from: Policy, to: Policy) -> Result<(), String> {
        match self {
            GuestSchedConfig::Cfs(_) | GuestSchedConfig::Eevdf(_)
                if from != to && (from == Policy::Deadline || to == Policy::Deadline) =>
            {
                Err(format!(
                    "a move from {from:?} to {to:?}: SCHED_DEADLINE is not modelled at run \
                     time (no runtime, deadline or period is given)"
                ))
            }
            GuestSchedConfig::Cfs(_) | GuestSchedConfig::Eevdf(_) => Ok(()),
            GuestSchedConfig::Bfs(_) if to == Policy::Deadline => {
                Err("BFS has no SCHED_DEADLINE".into())
            }
            GuestSchedConfig::Bfs(_) => Ok(()),
        }
    }
}

impl GuestSchedConfig {
    /// The RT and deadline sysctls of the guest kernel.
    fn rt_dl(
        &self,
    ) -> (
        &crate::guest::rt::RtParams,
        &crate::guest::deadline::DlParams,
    ) {
        match self {
            GuestSchedConfig::Cfs(p) => (&p.rt, &p.deadline),
            GuestSchedConfig::Eevdf(p) => (&p.rt, &p.deadline),
            GuestSchedConfig::Bfs(_) => unreachable!("BFS refuses deadline tasks first"),
        }
    }

    /// The guest scheduler's `vcpu_is_preempted` switch (`available_idle_cpu`); BFS has none.
    pub(super) fn reads_preempted(&self) -> bool {
        match self {
            GuestSchedConfig::Cfs(p) => p.vcpu_is_preempted,
            GuestSchedConfig::Eevdf(p) => p.vcpu_is_preempted,
            GuestSchedConfig::Bfs(_) => false,
        }
    }

    /// Sets the switch from the guest's PV flag (a KVM guest, `[domain.pv]`); Linux 3.17
    /// predates `vcpu_is_preempted` (4.10) and BFS does not read it: both stay without.
    pub(super) fn set_reads_preempted(&mut self, on: bool) {
        match self {
            GuestSchedConfig::Cfs(p) if p.version != crate::guest::cfs::CfsVersion::V3_17 => {
                p.vcpu_is_preempted = on
            }
            GuestSchedConfig::Eevdf(p) => p.vcpu_is_preempted = on,
            GuestSchedConfig::Cfs(_) | GuestSchedConfig::Bfs(_) => {}
        }
    }
}

pub(super) fn make_guest(
    cfg: &GuestSchedConfig,
    topo: &[CpuTopo],
) -> Box<dyn vmsched_core::Scheduler> {
    match cfg {
        GuestSchedConfig::Cfs(p) => Box::new(Cfs::sched(p.clone(), topo)),
        GuestSchedConfig::Eevdf(p) => Box::new(Eevdf::sched(p.clone(), topo)),
        GuestSchedConfig::Bfs(p) => Box::new(Bfs::sched(p.clone(), topo)),
    }
}
