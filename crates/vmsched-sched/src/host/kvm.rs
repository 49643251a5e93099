//! The KVM host: a Linux kernel's scheduler at the host level (`[host] scheduler = "linux"`,
//! only with `[machine] hypervisor = "kvm"`). Its entities are the QEMU vCPU threads (one per
//! vCPU, each a host task with the nice value and policy of its domain's `vcpu_nice`,
//! `vcpu_policy`, `vcpu_rt_priority`) and the host processes of `[[host.process]]` (any task
//! workload, run on the pCPUs). The scheduler is the Linux core with its classes, exactly as in
//! a guest (`LinuxCore<Cfs, Rt>` for 5.10, `LinuxCore<Eevdf, Rt>` for 6.6/6.12/6.18), chosen by
//! `[host.sched]`, the same table as a guest's `[domain.sched]`.
//!
//! What KVM adds around the scheduler (spec/linux-schedulers.md §5, ERRATA L10; docs/kvm.md):
//! - the core tells the engine its run queues' lengths ([`Scheduler::nr_running`]), so a vCPU
//!   thread halt-polls (`kvm_vcpu_halt`, window from `crate::hv`) only while it is alone on its
//!   pCPU (`single_task_running()`), and stops polling when another task is queued there;
//! - `kvm_vcpu_on_spin`'s directed yield goes through the core's `yield_to`
//!   ([`Scheduler::yield_to`]; the candidate choice is the engine's, `sim/tasks.rs`);
//! - PV steal time (`steal_time`, KVM_FEATURE_STEAL_TIME / arm64 PV_TIME_ST): off, the guests'
//!   `paravirt_time_accounting` reads no steal clock.
//!
//! [`Scheduler::nr_running`]: vmsched_core::Scheduler::nr_running
//! [`Scheduler::yield_to`]: vmsched_core::Scheduler::yield_to

use serde::{Deserialize, Serialize};
use vmsched_core::scenario::DomainConfig;
use vmsched_core::workload::WorkloadConfig;
use vmsched_core::{CpuTopo, LinuxAttr, Policy, Scheduler, XenAttr};

use crate::build::GuestSchedConfig;
use crate::guest::bfs::Bfs;
use crate::guest::cfs::Cfs;
use crate::guest::eevdf::{Eevdf, EevdfKernel, EevdfParams};
use crate::host::{DomainSchedParams, HostConfig};

pub mod module;
pub use module::{KvmModuleParams, KvmVersion};

/// `[host] scheduler = "linux"`: a KVM host.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KvmHostParams {
    /// `[host.sched]`: the host kernel's scheduler, the same table as a guest's
    /// `[domain.sched]` (`scheduler = "cfs"` for 5.10, `"eevdf"` with `kernel = "6.6" | "6.12"
    /// | "6.18"`, with their sysctls and features). Default: EEVDF of Linux 6.12.
    #[serde(default = "default_sched")]
    pub sched: GuestSchedConfig,
    /// PV steal time (x86 MSR_KVM_STEAL_TIME, arm64 PV_TIME_ST): the guest reads its vCPU
    /// thread's host run-queue wait as steal. Default on; a guest consumes it only with
    /// `[domain.kernel] paravirt_time_accounting = true`.
    #[serde(default = "yes")]
    pub steal_time: bool,
    /// `[[host.process]]`: workloads run on the host itself (the document's "infinite loops on
    /// the host"); the same tables as `[[domain.workload]]`, with affinities naming pCPUs.
    #[serde(default, rename = "process", skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<WorkloadConfig>,
    /// KVM/ARM 3.x's guest timer path (ERRATA L9; arm64 only): a guest timer that fires while
    /// its vCPU is out of guest mode is handled by a host kworker (nice 0, SCHED_OTHER, unbound)
    /// that the host scheduler must run before it kicks the vCPU. Default off (the later timer
    /// rework, about v4.15, kicks from the hrtimer itself).
    #[serde(default)]
    pub timer_kworker: bool,
    /// The kworker's run time per activation (ns; default 0: only its scheduling is modelled;
    /// not calibrated).
    #[serde(default)]
    pub timer_kworker_ns: u64,
    /// `[host.kvm]`: KVM's module parameters for halt polling and the PAUSE-loop window,
    /// defaults by the host kernel's version (`host/kvm/module.rs`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub kvm: KvmModuleParams,
}

fn is_default(p: &KvmModuleParams) -> bool {
    *p == KvmModuleParams::default()
}

fn default_sched() -> GuestSchedConfig {
    GuestSchedConfig::Eevdf(EevdfParams::new(EevdfKernel::V6_12))
}

fn yes() -> bool {
    true
}

impl Default for KvmHostParams {
    fn default() -> Self {
        KvmHostParams {
            sched: default_sched(),
            steal_time: true,
            processes: Vec::new(),
            timer_kworker: false,
            timer_kworker_ns: 0,
            kvm: KvmModuleParams::default(),
        }
    }
}

impl KvmHostParams {
    /// The host kernel's scheduler's own checks; the field is under `sched`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        use vmsched_core::scenario::ConfigCheck;
        self.sched.check().map_err(|(f, m)| (join("sched", &f), m))
    }

    /// The KVM release: the host kernel's (`[host.sched]`; BFS 0.458 patches 3.17).
    pub fn kvm_version(&self) -> KvmVersion {
        use crate::guest::cfs::CfsVersion;
        match &self.sched {
            GuestSchedConfig::Cfs(p) => match p.version {
                CfsVersion::V5_10 => KvmVersion::V5_10,
                CfsVersion::V3_17 => KvmVersion::V3_17,
            },
            GuestSchedConfig::Eevdf(p) => match p.kernel {
                EevdfKernel::V6_6 => KvmVersion::V6_6,
                EevdfKernel::V6_12 => KvmVersion::V6_12,
                EevdfKernel::V6_18 => KvmVersion::V6_18,
            },
            GuestSchedConfig::Bfs(_) => KvmVersion::V3_17,
        }
    }

    /// Builds the host kernel over the pCPUs `topo`.
    pub fn make(&self, topo: &[CpuTopo]) -> Box<dyn Scheduler> {
        match &self.sched {
            GuestSchedConfig::Cfs(p) => {
                Box::new(Cfs::sched(p.clone(), topo).into_kvm_host("linux-cfs"))
            }
            GuestSchedConfig::Eevdf(p) => {
                Box::new(Eevdf::sched(p.clone(), topo).into_kvm_host("linux-eevdf"))
            }
            GuestSchedConfig::Bfs(p) => {
                Box::new(Bfs::sched(p.clone(), topo).into_kvm_host("linux-bfs"))
            }
        }
    }
}

fn join(a: &str, b: &str) -> String {
    if b.is_empty() {
        a.to_string()
    } else {
        format!("{a}.{b}")
    }
}

impl HostConfig for KvmHostParams {
    /// A Linux host reads no Xen attribute.
    fn vcpu_attr(&self, _d: &DomainSchedParams) -> XenAttr {
        XenAttr::default()
    }
}

/// The host task attributes of a domain's vCPU threads (`vcpu_nice`, `vcpu_policy`,
/// `vcpu_rt_priority`; absent: SCHED_OTHER at nice 0, QEMU's default).
pub fn vcpu_thread_attr<G>(d: &DomainConfig<G>) -> LinuxAttr {
    LinuxAttr {
        policy: d.vcpu_policy.unwrap_or_default(),
        nice: d.vcpu_nice.unwrap_or(0),
        rt_priority: d.vcpu_rt_priority.unwrap_or(0),
        ..Default::default()
    }
}

/// Checks a domain's vCPU thread fields: under a Linux host their ranges (as `sched_setattr`
/// and `setpriority` check them), under any other host that none is given (a Xen host would
/// ignore them). The field is relative to the domain.
pub fn check_vcpu_fields<G>(d: &DomainConfig<G>, linux_host: bool) -> Result<(), (String, String)> {
    let given = [
        ("vcpu_nice", d.vcpu_nice.is_some()),
        ("vcpu_policy", d.vcpu_policy.is_some()),
        ("vcpu_rt_priority", d.vcpu_rt_priority.is_some()),
    ];
    if !linux_host {
        return match given.iter().find(|(_, g)| *g) {
            Some((f, _)) => Err((
                f.to_string(),
                "a vCPU thread attribute of a KVM host: only `[host] scheduler = \"linux\"` \
                 reads it"
                    .into(),
            )),
            None => Ok(()),
        };
    }
    let a = vcpu_thread_attr(d);
    // A SCHED_DEADLINE vCPU thread would need its runtime, deadline and period, which no
    // field gives (accepted after the deadline class came, it broke the deadline class's
    // invariant at build; tests/hardening.rs `a_deadline_vcpu_thread_is_refused`).
    if a.policy == Policy::Deadline {
        return Err((
            "vcpu_policy".into(),
            "a SCHED_DEADLINE vCPU thread is not modelled (no runtime, deadline or period for \
             it): use normal, batch, idle, fifo or rr"
                .into(),
        ));
    }
    if !(-20..=19).contains(&a.nice) {
        return Err((
            "vcpu_nice".into(),
            format!("must be in -20..=19, got {}", a.nice),
        ));
    }
    let rt = matches!(a.policy, Policy::Fifo | Policy::Rr);
    if rt && !(1..=99).contains(&a.rt_priority) {
        return Err((
            "vcpu_rt_priority".into(),
            format!(
                "a {:?} vCPU thread needs vcpu_rt_priority in 1..=99, got {}",
                a.policy, a.rt_priority
            ),
        ));
    }
    if !rt && a.rt_priority != 0 {
        return Err((
            "vcpu_rt_priority".into(),
            format!(
                "only a fifo or rr vCPU thread has an RT priority (vcpu_policy is {:?})",
                a.policy
            ),
        ));
    }
    Ok(())
}

/// Checks a domain's `[domain.coord]` (coordinated scheduling, sim/coord.rs): only a KVM host
/// reads it (a Xen host would ignore it: refused when enabled), its fields' ranges, the tasks it
/// names, and no `sched_vcpu` event on a coordinated domain (the host owns its vCPU threads'
/// attributes while it boosts them). The field is relative to the domain.
pub fn check_coord<G>(
    d: &DomainConfig<G>,
    linux_host: bool,
    events: &[vmsched_core::scenario::EventConfig],
) -> Result<(), (String, String)> {
    let c = &d.coord;
    if !c.enable {
        return Ok(());
    }
    if !linux_host {
        return Err((
            "coord.enable".into(),
            "coordinated scheduling is a KVM host's (the host boosts QEMU vCPU threads): only \
             `[host] scheduler = \"linux\"` reads it"
                .into(),
        ));
    }
    let workloads: Vec<&str> = d.workloads.iter().map(|w| w.name()).collect();
    let tasks: Vec<String> = d
        .workloads
        .iter()
        .flat_map(|w| w.build(d.vcpus).tasks.into_iter().map(|t| t.name))
        .collect();
    c.validate(&workloads, &tasks)
        .map_err(|(f, m)| (join("coord", &f), m))?;
    let vcpu_event = events.iter().any(|e| {
        e.action == vmsched_core::scenario::EventAction::SchedVcpu
            && e.domain.as_deref() == Some(d.name.as_str())
    });
    if vcpu_event {
        return Err((
            "coord.enable".into(),
            "a coordinated domain's vCPU threads take no sched_vcpu event (the host sets their \
             attributes while it boosts them)"
                .into(),
        ));
    }
    Ok(())
}

/// The engine's coordination of a domain with `coord.enable` (validated), and which of its
/// tasks are flagged interactive (by workload, the group of a guest task).
pub fn coord_spec<G>(
    d: &DomainConfig<G>,
) -> (
    vmsched_core::sim::CoordSpec,
    impl Fn(&vmsched_core::EntityParams) -> bool + '_,
) {
    let c = &d.coord;
    let rt = matches!(c.boost_policy, Policy::Fifo | Policy::Rr);
    let spec = vmsched_core::sim::CoordSpec {
        boost: LinuxAttr {
            policy: c.boost_policy,
            nice: if rt { 0 } else { c.boost_nice },
            rt_priority: if rt { c.boost_rt_priority } else { 0 },
            ..Default::default()
        },
        pass_priority: c.pass_priority,
        hypercall_ns: c.hypercall_ns,
        bound_ns: c.bound_ns().expect("invariant: a validated bound fits"),
    };
    let flag = move |p: &vmsched_core::EntityParams| {
        let wl = d.workloads.get(p.group as usize).map_or("", |w| w.name());
        c.flags(wl, &p.name, p.linux.policy)
    };
    (spec, flag)
}

/// Checks the host processes on `pcpus` pCPUs; the field is relative to `host`. Network
/// workloads (`ping`, `stream`), `vmboot` and programs with emulated I/O (`ioreq` steps) are
/// guest workloads and are refused.
pub fn check_processes(p: &KvmHostParams, pcpus: u32) -> Result<(), (String, String)> {
    if p.timer_kworker_ns > 0 && !p.timer_kworker {
        return Err((
            "timer_kworker_ns".into(),
            "the timer kworker's cost needs timer_kworker = true".into(),
        ));
    }
    for (i, w) in p.processes.iter().enumerate() {
        let at = |f: &str| join(&format!("process.{i}"), f);
        if p.processes[..i].iter().any(|o| o.name() == w.name()) {
            return Err((
                at("name"),
                format!("host process name '{}' is used twice", w.name()),
            ));
        }
        let guest_only = match w {
            WorkloadConfig::Ping(_) | WorkloadConfig::Stream(_) | WorkloadConfig::VmBoot(_) => {
                Some("kind")
            }
            WorkloadConfig::Program(pr)
                if pr
                    .steps
                    .iter()
                    .any(|s| matches!(s, vmsched_core::workload::program::StepConfig::Ioreq)) =>
            {
                Some("steps")
            }
            _ => None,
        };
        if let Some(f) = guest_only {
            return Err((
                at(f),
                "a guest workload (network, VM boot or emulated I/O): a host process runs \
                 CPU, sleep and pipe work only"
                    .into(),
            ));
        }
        // A host process's affinity names pCPUs (the workload's messages say vCPUs).
        w.validate(pcpus).map_err(|(f, m)| {
            let m = m.replace("the domain has", "the machine has");
            (at(&f), m.replace("vCPU", "pCPU"))
        })?;
    }
    vmsched_core::workload::check_task_ceiling(&p.processes, pcpus, "process")
}

#[cfg(test)]
mod tests;
