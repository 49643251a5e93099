//! From a scenario to a ready-to-run simulation: the scheduler registries and the assembly.
//!
//! `HostSchedConfig` and `GuestSchedConfig` are the registries: serde-tagged enums whose tag is
//! the `scheduler` field of `[host]` and `[domain.sched]`. Adding a policy is one variant here,
//! one arm in `make_host`/`make_guest`, and its file.

use serde::{Deserialize, Serialize};
use vmsched_core::hv::ExitModel;
use vmsched_core::pv::PvModel;
use vmsched_core::report::Results;
use vmsched_core::scenario::{
    Arch, ConfigCheck, EventAction, GuestType, Hypervisor, MachineConfig, Preempt, ScenarioError,
    SetValue, TickMode,
};
use vmsched_core::sim::{
    DeviceModel, FlowKind, IoSpec, LevelOpts, NetFlow, SimBuilder, Simulation, TimelineAction,
};
use vmsched_core::workload::spinlock::LockKind;
use vmsched_core::workload::WorkloadConfig;
use vmsched_core::{
    CpuId, CpuSet, CpuTopo, EntityParams, GlobalParam, LevelClock, LevelId, LinuxAttr, Policy,
    XenAttr,
};

use crate::guest::bfs::{Bfs, BfsParams};
use crate::guest::cfs::{Cfs, CfsParams};
use crate::guest::eevdf::{Eevdf, EevdfParams};
use crate::host::arinc653::{Arinc653, Arinc653Params, Slot};
use crate::host::bvt::{Bvt, BvtParams};
use crate::host::credit1::{Credit1, Credit1Params};
use crate::host::credit2::{Credit2, Credit2Params};
use crate::host::kvm::KvmHostParams;
use crate::host::null::{Null, NullParams};
use crate::host::pinned::{Pinned, PinnedParams};
use crate::host::rtds::{Rtds, RtdsParams};
use crate::host::sedf::{Sedf, SedfParams};
use crate::host::{DomainSchedParams, HostConfig};

/// `[host] scheduler = "..."`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "scheduler", rename_all = "lowercase")]
pub enum HostSchedConfig {
    /// Xen Credit1 (`sched=credit`), 3.3 or 4.20.
    Credit(Credit1Params),
    Credit2(Credit2Params),
    Pinned(PinnedParams),
    /// Xen RTDS (`sched=rtds`), 4.20.
    Rtds(RtdsParams),
    /// Xen's null scheduler (`sched=null`), 4.20.
    Null(NullParams),
    /// Xen's ARINC 653 scheduler (`sched=arinc653`), 4.20.
    Arinc653(Arinc653Params),
    /// Xen's SEDF (`sched=sedf`), historic: as in 4.2.1 (removed in 4.6).
    Sedf(SedfParams),
    /// Xen's BVT (`sched=bvt`), historic: as in 3.0 (removed in 3.1).
    Bvt(BvtParams),
    /// A Linux KVM host (`hypervisor = "kvm"` only): the Linux core over vCPU threads and host
    /// processes (host/kvm.rs, docs/kvm.md).
    Linux(KvmHostParams),
}

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

impl ConfigCheck for HostSchedConfig {
    fn check(&self) -> Result<(), (String, String)> {
        match self {
            HostSchedConfig::Credit(p) => p.validate().map_err(split_field),
            HostSchedConfig::Credit2(p) => p.validate().map_err(split_field),
            HostSchedConfig::Pinned(_) => Ok(()),
            HostSchedConfig::Rtds(p) => p.validate().map_err(split_field),
            HostSchedConfig::Null(_) => Ok(()),
            HostSchedConfig::Arinc653(p) => p.validate().map_err(split_field),
            HostSchedConfig::Sedf(p) => p.validate().map_err(split_field),
            HostSchedConfig::Bvt(p) => p.validate().map_err(split_field),
            HostSchedConfig::Linux(p) => p.validate(),
        }
    }

    /// Credit2 takes `xl sched-credit2 -d -w/-c`, `-s -r` and domain pauses; Credit1 takes
    /// `xl sched-credit -d -w/-c` and pauses, and in 4.x `-s -t/-r`; both take domains created
    /// and destroyed during the run, pCPU offline/online and a guest's `VCPUOP_down`; the pinned
    /// host takes no run-time change.
    fn check_adjust(&self, field: &str, value: i64) -> Result<(), String> {
        match (self, field) {
            (
                HostSchedConfig::Credit(_),
                "weight" | "cap" | "pause" | "create_at_ms" | "destroy_at_ms" | "cpu_offline"
                | "cpu_online" | "vcpu_down",
            ) => Ok(()),
            (HostSchedConfig::Credit(p), "ratelimit_us" | "tslice_ms") => {
                if !p.version.has_tslice_and_ratelimit() {
                    return Err(format!(
                        "Xen 3.3's credit scheduler takes no run-time `{field}` (no xm sched-credit -s)"
                    ));
                }
                let mut q = p.clone();
                if field == "tslice_ms" {
                    q.tslice_ms = Some(value as u64);
                } else {
                    q.ratelimit_us = Some(value as u64);
                }
                q.validate().map_err(|m| split_field(m).1)?;
                if q.ratelimit_us() < q.ratelimit_us.unwrap_or(1000) {
                    return Err(format!(
                        "ratelimit {} µs above the slice of {} ms (xl sched-credit -s refuses it)",
                        q.ratelimit_us.unwrap_or(1000),
                        q.tslice_ms()
                    ));
                }
                Ok(())
            }
            (HostSchedConfig::Credit(_), _) => {
                Err(format!("credit takes no run-time change of `{field}`"))
            }
            (HostSchedConfig::Credit2(p), "cap" | "ratelimit_us") if p.version.is_4_2() => Err(
                format!("Xen 4.2.1's Credit2 has no `{field}` (xl sched-credit2 takes -d -w only)"),
            ),
            (
                HostSchedConfig::Credit2(_),
                "weight" | "cap" | "pause" | "create_at_ms" | "destroy_at_ms" | "cpu_offline"
                | "cpu_online" | "vcpu_down",
            ) => Ok(()),
            (HostSchedConfig::Credit2(p), "ratelimit_us") => {
                let mut q = p.clone();
                q.ratelimit_us = value as u64;
                q.validate().map(|_| ()).map_err(|m| split_field(m).1)
            }
            (HostSchedConfig::Credit2(_), "tslice_ms") => {
                Err("credit2 has no time slice (xl sched-credit2 -s takes -r only)".into())
            }
            (HostSchedConfig::Credit2(_), _) => {
                Err(format!("credit2 takes no run-time change of `{field}`"))
            }
            (HostSchedConfig::Pinned(_), _) => Err(format!(
                "the pinned host takes no run-time change of `{field}`"
            )),
            (
                HostSchedConfig::Rtds(_),
                "budget_us" | "pause" | "create_at_ms" | "destroy_at_ms" | "cpu_offline"
                | "cpu_online" | "vcpu_down",
            ) => Ok(()),
            (HostSchedConfig::Rtds(_), "weight" | "cap") => Err(format!(
                "rtds has no `{field}` (xl sched-rtds takes a period, a budget and extratime)"
            )),
            (HostSchedConfig::Rtds(_), _) => {
                Err(format!("rtds takes no run-time change of `{field}`"))
            }
            (
                HostSchedConfig::Null(_),
                "pause" | "create_at_ms" | "destroy_at_ms" | "cpu_offline" | "cpu_online"
                | "vcpu_down",
            ) => Ok(()),
            (HostSchedConfig::Null(_), _) => Err(format!(
                "null has no parameters: it takes no run-time change of `{field}`"
            )),
            (
                HostSchedConfig::Arinc653(_),
                "pause" | "create_at_ms" | "destroy_at_ms" | "cpu_offline" | "cpu_online"
                | "vcpu_down",
            ) => Ok(()),
            (HostSchedConfig::Arinc653(_), _) => Err(format!(
                "arinc653 follows its table: it takes no run-time change of `{field}`"
            )),
            (HostSchedConfig::Sedf(_), "pause" | "create_at_ms" | "destroy_at_ms") => Ok(()),
            (HostSchedConfig::Sedf(_), _) => Err(format!(
                "sedf (historic, Xen 4.2.1) takes no run-time change of `{field}`"
            )),
            (HostSchedConfig::Bvt(_), "pause" | "create_at_ms" | "destroy_at_ms") => Ok(()),
            (HostSchedConfig::Bvt(_), _) => Err(format!(
                "bvt (historic, Xen 3.0) takes no run-time change of `{field}`"
            )),
            (
                HostSchedConfig::Linux(_),
                "cpu_offline" | "cpu_online" | "nice" | "policy" | "rt_priority",
            ) => Ok(()),
            (HostSchedConfig::Linux(_), _) => Err(format!(
                "the linux (KVM) host takes no run-time change of `{field}` (only pCPU \
                 offline/online and a vCPU thread's or host process's nice, policy and \
                 rt_priority)"
            )),
        }
    }

    /// A KVM host's vCPU threads and processes move between the fair and the RT class at run
    /// time (the Linux core's class switch, `guest/linux_core.rs`); SCHED_DEADLINE stays out
    /// (no runtime, deadline or period is given). A Xen host takes no policy.
    fn check_policy_change(&self, from: Policy, to: Policy) -> Result<(), String> {
        match self {
            HostSchedConfig::Linux(_) if from == Policy::Deadline || to == Policy::Deadline => {
                Err(format!(
                    "a move from {from:?} to {to:?} at the KVM host: SCHED_DEADLINE is not \
                     modelled for host tasks at run time"
                ))
            }
            _ => Ok(()),
        }
    }

    fn host_processes(&self) -> &[WorkloadConfig] {
        match self {
            HostSchedConfig::Linux(p) => &p.processes,
            _ => &[],
        }
    }

    fn check_cpupool(&self) -> Result<(), String> {
        crate::cpupool::check_cpupool(self)
    }
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

    fn check_policy_change(&self, from: Policy, to: Policy) -> Result<(), String> {
        let class = |p: Policy| match p {
            Policy::Deadline => "deadline",
            Policy::Fifo | Policy::Rr => "RT",
            Policy::Normal | Policy::Batch | Policy::Idle => "fair",
        };
        match self {
            GuestSchedConfig::Cfs(_) | GuestSchedConfig::Eevdf(_) if class(from) != class(to) => {
                Err(format!(
                    "moving a task from {from:?} to {to:?} changes its scheduling class ({} → \
                     {}), which is not modelled at run time",
                    class(from),
                    class(to)
                ))
            }
            GuestSchedConfig::Cfs(_) | GuestSchedConfig::Eevdf(_) => Ok(()),
            GuestSchedConfig::Bfs(_) if to == Policy::Deadline => {
                Err("BFS has no SCHED_DEADLINE".into())
            }
            // BFS queues every policy in one array: a task changes level, not class.
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
    fn reads_preempted(&self) -> bool {
        match self {
            GuestSchedConfig::Cfs(p) => p.vcpu_is_preempted,
            GuestSchedConfig::Eevdf(p) => p.vcpu_is_preempted,
            GuestSchedConfig::Bfs(_) => false,
        }
    }

    /// Sets the switch from the guest's PV flag (a KVM guest, `[domain.pv]`); Linux 3.17
    /// predates `vcpu_is_preempted` (4.10) and BFS does not read it: both stay without.
    fn set_reads_preempted(&mut self, on: bool) {
        match self {
            GuestSchedConfig::Cfs(p) if p.version != crate::guest::cfs::CfsVersion::V3_17 => {
                p.vcpu_is_preempted = on
            }
            GuestSchedConfig::Eevdf(p) => p.vcpu_is_preempted = on,
            GuestSchedConfig::Cfs(_) | GuestSchedConfig::Bfs(_) => {}
        }
    }
}

/// Policy `validate()` messages start with the field name (`ratelimit_us: ...`) when they can.
fn split_field(msg: String) -> (String, String) {
    match msg.split_once(": ") {
        Some((f, m)) if !f.contains(' ') => (f.to_string(), m.to_string()),
        _ => (String::new(), msg),
    }
}

pub type Scenario = vmsched_core::scenario::Scenario<HostSchedConfig, GuestSchedConfig>;

/// Parses and validates a scenario file's text with command-line `--set` overrides.
pub fn load(
    file: &str,
    src: &str,
    overrides: &[(String, String)],
) -> Result<Scenario, ScenarioError> {
    let typed: Vec<(String, SetValue)> = overrides
        .iter()
        .map(|(k, v)| (k.clone(), SetValue::Text(v.clone())))
        .collect();
    load_with(file, src, &typed)
}

/// Parses and validates a scenario file's text with typed overrides.
pub fn load_with(
    file: &str,
    src: &str,
    overrides: &[(String, SetValue)],
) -> Result<Scenario, ScenarioError> {
    let s = Scenario::parse_with(file, src, overrides)?;
    let names_ratelimit = overrides.iter().any(|(k, _)| k == "host.ratelimit_us")
        || toml::from_str::<toml::Table>(src)
            .ok()
            .and_then(|t| t.get("host")?.get("ratelimit_us").cloned())
            .is_some();
    check_layout(&s, names_ratelimit).map_err(|(field, message)| ScenarioError {
        file: file.to_string(),
        line: None,
        field,
        message,
    })?;
    Ok(s)
}

/// Checks that need the host policy and the whole machine together. `names_ratelimit`: the
/// file or an override sets `host.ratelimit_us` (Credit2 4.2.1 refuses it).
fn check_layout(s: &Scenario, names_ratelimit: bool) -> Result<(), (String, String)> {
    crate::cpupool::check_layouts(s)?;
    check_rtds_fields(s)?;
    check_kvm_fields(s)?;
    check_pv_fields(s)?;
    match &s.host {
        HostSchedConfig::Credit(p) => {
            // Seed 001's boost credit names domains.
            for (i, b) in p.boost_domains.iter().enumerate() {
                if !s.domains.iter().any(|d| d.name == b.domain) {
                    return Err((
                        format!("host.boost_domains.{i}.domain"),
                        format!("no [[domain]] is named {:?}", b.domain),
                    ));
                }
            }
            Ok(())
        }
        HostSchedConfig::Credit2(p) => {
            crate::host::credit2::check_scenario_4_2(p, &s.domains, names_ratelimit)
        }
        HostSchedConfig::Pinned(_) => crate::host::pinned::check_layout(s),
        HostSchedConfig::Rtds(_) | HostSchedConfig::Null(_) | HostSchedConfig::Sedf(_) => Ok(()),
        HostSchedConfig::Bvt(p) => crate::host::bvt::check_layout(p, &s.domains),
        HostSchedConfig::Linux(p) => {
            if s.machine.hypervisor != Hypervisor::Kvm {
                return Err((
                    "host.scheduler".into(),
                    "\"linux\" is a KVM host: set machine.hypervisor = \"kvm\" (Xen hosts \
                     are credit, credit2, rtds, null, arinc653, sedf, bvt)"
                        .into(),
                ));
            }
            if p.timer_kworker && s.machine.arch != Arch::Arm64 {
                return Err((
                    "host.timer_kworker".into(),
                    "the timer kworker is KVM/ARM's (3.x arch timer, ERRATA L9): set \
                     machine.arch = \"arm64\""
                        .into(),
                ));
            }
            crate::host::kvm::check_processes(p, s.machine.pcpus)
                .map_err(|(f, m)| (format!("host.{f}"), m))
        }
        HostSchedConfig::Arinc653(p) => {
            // A slot names a domain of the scenario and one of its vCPUs.
            for (i, slot) in p.schedule.iter().flatten().enumerate() {
                let Some(d) = s.domains.iter().find(|d| d.name == slot.domain) else {
                    return Err((
                        format!("host.schedule.{i}.domain"),
                        format!("no [[domain]] is named {:?}", slot.domain),
                    ));
                };
                if slot.vcpu >= d.vcpus {
                    return Err((
                        format!("host.schedule.{i}.vcpu"),
                        format!(
                            "domain {:?} has {} vCPUs (ids 0..{})",
                            d.name, d.vcpus, d.vcpus
                        ),
                    ));
                }
            }
            Ok(())
        }
    }
}

/// A domain's RTDS fields (`budget_us`, `period_us`, `extratime`): checked as `xl sched-rtds`
/// checks them under an RTDS host, refused under any other (they would be silently ignored).
fn check_rtds_fields(s: &Scenario) -> Result<(), (String, String)> {
    for (i, d) in s.domains.iter().enumerate() {
        // With cpupools, the scheduler of the domain's pool reads them.
        let host = crate::cpupool::host_of(s, i);
        let rtds = matches!(host, HostSchedConfig::Rtds(_));
        let sedf = matches!(host, HostSchedConfig::Sedf(_));
        if sedf {
            // SEDF reads the same fields as its period, slice and extra flag.
            crate::host::sedf::validate_domain(d.period_us, d.budget_us, d.weight, d.cap)
                .map_err(|(f, m)| (format!("domain.{i}.{f}"), m))?;
            continue;
        }
        if rtds {
            crate::host::rtds::validate_domain(d.period_us, d.budget_us)
                .map_err(|(f, m)| (format!("domain.{i}.{f}"), m))?;
            continue;
        }
        let given = [
            ("budget_us", d.budget_us.is_some()),
            ("period_us", d.period_us.is_some()),
            ("extratime", d.extratime.is_some()),
        ];
        if let Some((f, _)) = given.iter().find(|(_, g)| *g) {
            return Err((
                format!("domain.{i}.{f}"),
                "an RTDS parameter: only an RTDS host (`[host]` or the domain's cpupool) reads \
                 it"
                .into(),
            ));
        }
    }
    Ok(())
}

/// A domain's vCPU thread fields (`vcpu_nice`, `vcpu_policy`, `vcpu_rt_priority`): checked
/// under a Linux (KVM) host, refused under any other.
fn check_kvm_fields(s: &Scenario) -> Result<(), (String, String)> {
    let linux = matches!(s.host, HostSchedConfig::Linux(_));
    for (i, d) in s.domains.iter().enumerate() {
        crate::host::kvm::check_vcpu_fields(d, linux)
            .map_err(|(f, m)| (format!("domain.{i}.{f}"), m))?;
        crate::host::kvm::check_coord(d, linux, &s.events)
            .map_err(|(f, m)| (format!("domain.{i}.{f}"), m))?;
    }
    Ok(())
}

/// The paravirtual interfaces of domain `d` on this machine (`[domain.pv]` resolved,
/// vmsched_core::pv); the error names the field under `pv`.
fn pv_model(
    s: &Scenario,
    d: &vmsched_core::scenario::DomainConfig<GuestSchedConfig>,
) -> Result<PvModel, (String, String)> {
    d.pv.resolve(
        s.machine.hypervisor,
        s.machine.arch,
        d.vcpus,
        s.host.steal_clock(),
    )
}

/// `[domain.pv]` and what reads it: under a KVM host the guest scheduler's
/// `vcpu_is_preempted` is the PV flag (an explicit `true` the guest cannot have is refused);
/// a `pv_qspinlock` needs PV spinlocks.
fn check_pv_fields(s: &Scenario) -> Result<(), (String, String)> {
    for (i, d) in s.domains.iter().enumerate() {
        let m = pv_model(s, d).map_err(|(f, e)| (format!("domain.{i}.pv.{f}"), e))?;
        if s.machine.hypervisor == Hypervisor::Kvm
            && !m.vcpu_is_preempted
            && d.sched.reads_preempted()
        {
            return Err((
                format!("domain.{i}.sched.vcpu_is_preempted"),
                "the guest cannot read a preempted flag here (arm64, no steal time, or \
                 `pv.vcpu_is_preempted = false`); under KVM `[domain.pv] vcpu_is_preempted` \
                 decides"
                    .into(),
            ));
        }
        for (j, w) in d.workloads.iter().enumerate() {
            if let WorkloadConfig::Spinlock(c) = w {
                if c.lock == LockKind::PvQspinlock && !m.pv_spinlock {
                    return Err((
                        format!("domain.{i}.workload.{j}.lock"),
                        "pv_qspinlock needs PV spinlocks, which this guest does not use \
                         (`[domain.pv] pv_spinlock`: off on arm64, with one vCPU, `nopvspin` \
                         or `realtime_hint`)"
                            .into(),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// How a host configuration places vCPUs at build time.
#[derive(Clone, Copy, PartialEq, Eq)]
enum VcpuPlacement {
    /// Hard affinity and first CPU from the scenario (Xen 4.20's `sched_init_vcpu`).
    Affinity,
    /// vCPU k of the machine, in domain order, owns pCPU k.
    OwnPcpu,
}

impl HostSchedConfig {
    fn placement(&self) -> VcpuPlacement {
        match self {
            HostSchedConfig::Credit(_) | HostSchedConfig::Credit2(_) => VcpuPlacement::Affinity,
            HostSchedConfig::Pinned(_) => VcpuPlacement::OwnPcpu,
            HostSchedConfig::Rtds(_)
            | HostSchedConfig::Null(_)
            | HostSchedConfig::Arinc653(_)
            | HostSchedConfig::Sedf(_)
            | HostSchedConfig::Bvt(_)
            | HostSchedConfig::Linux(_) => VcpuPlacement::Affinity,
        }
    }

    /// The host policy's configuration, for what it owns ([`HostConfig`]).
    pub(crate) fn config(&self) -> &dyn HostConfig {
        match self {
            HostSchedConfig::Credit(p) => p,
            HostSchedConfig::Credit2(p) => p,
            HostSchedConfig::Pinned(p) => p,
            HostSchedConfig::Rtds(p) => p,
            HostSchedConfig::Null(p) => p,
            HostSchedConfig::Arinc653(p) => p,
            HostSchedConfig::Sedf(p) => p,
            HostSchedConfig::Bvt(p) => p,
            HostSchedConfig::Linux(p) => p,
        }
    }

    /// Does this Xen deliver an HVM guest's event-channel callback only to its vCPU 0? Xen
    /// before 4.1 had only the GSI / PCI INTx callback, which `hvm_assert_evtchn_irq` raises
    /// for vCPU 0 alone (Xen 3.3 `xen/arch/x86/hvm/irq.c`; ERRATA X9), so PV-on-HVM drivers
    /// bind every port to vCPU 0. 4.1+ has per-vCPU vector callbacks (`HVMIRQ_callback_vector`,
    /// commit e5fd1f6505), which upstream Linux uses. Credit2, RTDS, null, ARINC653 and the
    /// pinned host model 4.x.
    fn hvm_callback_vcpu0_only(&self) -> bool {
        match self {
            HostSchedConfig::Credit(p) => !p.version.hvm_vector_callback(),
            HostSchedConfig::Credit2(_)
            | HostSchedConfig::Pinned(_)
            | HostSchedConfig::Rtds(_)
            | HostSchedConfig::Null(_)
            | HostSchedConfig::Arinc653(_)
            | HostSchedConfig::Sedf(_)
            | HostSchedConfig::Linux(_) => false,
            // Xen 3.0: the GSI callback to vCPU 0 only (ERRATA X9).
            HostSchedConfig::Bvt(_) => true,
        }
    }

    /// The host task attributes of a domain's vCPU threads: a Linux host's reading of
    /// `vcpu_nice`, `vcpu_policy`, `vcpu_rt_priority`; the defaults under Xen.
    fn vcpu_linux_attr(
        &self,
        d: &vmsched_core::scenario::DomainConfig<GuestSchedConfig>,
    ) -> LinuxAttr {
        match self {
            HostSchedConfig::Linux(_) => crate::host::kvm::vcpu_thread_attr(d),
            _ => LinuxAttr::default(),
        }
    }

    /// Does the host give its guests a steal clock? Xen always does (the runstate area);
    /// a KVM host with PV steal time on.
    fn steal_clock(&self) -> bool {
        match self {
            HostSchedConfig::Linux(p) => p.steal_time,
            _ => true,
        }
    }

    /// The per-vCPU attributes this host takes from a domain's scheduling parameters
    /// (`[[domain]]` `weight`, `cap`): the host policy's configuration owns what they mean.
    fn vcpu_attr(&self, d: &vmsched_core::scenario::DomainConfig<GuestSchedConfig>) -> XenAttr {
        let p = DomainSchedParams {
            weight: d.weight,
            cap: d.cap,
            budget_us: d.budget_us,
            period_us: d.period_us,
            extratime: d.extratime,
        };
        self.config().vcpu_attr(&p)
    }
}

fn make_host(
    cfg: &HostSchedConfig,
    topo: &[CpuTopo],
    domain_names: &[&str],
) -> Box<dyn vmsched_core::Scheduler> {
    let nr_domains = domain_names.len() as u32;
    match cfg {
        HostSchedConfig::Credit(p) => {
            let mut s = Credit1::sched(p.clone(), topo, nr_domains);
            for b in &p.boost_domains {
                let d = domain_names
                    .iter()
                    .position(|n| *n == b.domain)
                    .expect("validated: boost_domains name domains");
                s.ops.set_boost_domain(d, b.limit_ms, b.ratio_pct);
            }
            Box::new(s)
        }
        HostSchedConfig::Credit2(p) => Box::new(Credit2::sched(p.clone(), topo, nr_domains)),
        HostSchedConfig::Pinned(_) => Box::new(Pinned::new(topo.len())),
        HostSchedConfig::Rtds(p) => Box::new(Rtds::sched(p.clone(), topo)),
        HostSchedConfig::Null(_) => Box::new(Null::sched(topo.len())),
        HostSchedConfig::Sedf(p) => Box::new(Sedf::sched(p, topo.len())),
        HostSchedConfig::Bvt(p) => {
            let doms: Vec<_> = p
                .domains
                .iter()
                .map(|d| {
                    let i = domain_names
                        .iter()
                        .position(|n| *n == d.domain)
                        .expect("validated: host.domains name domains");
                    (i, d.clone())
                })
                .collect();
            Box::new(Bvt::sched(p, topo.len(), domain_names.len(), &doms))
        }
        HostSchedConfig::Arinc653(p) => {
            let table = p.schedule.as_ref().map(|slots| {
                let slots = slots
                    .iter()
                    .map(|sl| {
                        let d = domain_names
                            .iter()
                            .position(|n| *n == sl.domain)
                            .expect("validated: a slot names a domain");
                        Slot::new(d as u32, sl.vcpu, sl.runtime_us as i64 * 1000)
                    })
                    .collect();
                (
                    slots,
                    p.major_frame_ns().expect("a table has a major frame"),
                )
            });
            Box::new(Arinc653::sched(p, topo.len(), table))
        }
        HostSchedConfig::Linux(p) => p.make(topo),
    }
}

fn make_guest(cfg: &GuestSchedConfig, topo: &[CpuTopo]) -> Box<dyn vmsched_core::Scheduler> {
    match cfg {
        GuestSchedConfig::Cfs(p) => Box::new(Cfs::sched(p.clone(), topo)),
        GuestSchedConfig::Eevdf(p) => Box::new(Eevdf::sched(p.clone(), topo)),
        GuestSchedConfig::Bfs(p) => Box::new(Bfs::sched(p.clone(), topo)),
    }
}

/// The exit model of a guest on this machine (crate::hv presets; validation has refused the
/// guest types that do not exist on it).
fn exit_model(m: &MachineConfig, guest_type: Option<GuestType>) -> ExitModel {
    let guest = m
        .guest_type(guest_type)
        .expect("invariant: guest_type validated");
    ExitModel::for_guest(
        m.hypervisor,
        m.arch,
        m.vwfi,
        guest,
        m.wfe_trap_ns,
        m.halt_poll_ns,
        m.kick_ns,
        m.hypercall_ns,
    )
}

/// Builds the simulation of a validated scenario.
pub fn build(s: &Scenario) -> Simulation {
    let mut b = SimBuilder::new(s.run.seed);
    let ptopo = s.machine.topology();
    let host = b.add_level(
        "host",
        crate::cpupool::make_host_level(
            s,
            &ptopo,
            &s.domains
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>(),
            make_host,
        ),
        LevelOpts {
            clock: LevelClock::default(),
            preempt_full: true,
            ipi_latency: s.machine.ipi_latency_ns,
            ctxsw_cost: s.machine.ctxsw_cost_ns,
            vcpu_refill: s.machine.vcpu_refill_ns,
            exit: ExitModel::default(),
            tick_periodic: false,
            skew_tick: false,
            tick_phase: None,
            pv: PvModel::default(),
        },
    );
    b.add_pcpus(host, &ptopo);
    let placement = s.host.placement();
    let all_p = CpuSet::first_n(s.machine.pcpus as usize);
    let mut next_pcpu = 0u32;
    let mut prev_cpu: Option<u32> = None;
    let mut flows: Vec<NetFlow> = Vec::new();
    let mut dms: Vec<DeviceModel> = Vec::new();
    for (di, d) in s.domains.iter().enumerate() {
        let gtopo: Vec<CpuTopo> = (0..d.vcpus)
            .map(|v| CpuTopo {
                core: v,
                ..Default::default()
            })
            .collect();
        let pv = pv_model(s, d).expect("invariant: [domain.pv] validated");
        let mut guest_sched = d.sched.clone();
        if s.machine.hypervisor == Hypervisor::Kvm {
            // Under KVM the PV flag is what the guest scheduler reads (`[domain.pv]`).
            guest_sched.set_reads_preempted(pv.vcpu_is_preempted);
        }
        let guest = b.add_level(
            &d.name,
            make_guest(&guest_sched, &gtopo),
            LevelOpts {
                clock: LevelClock {
                    steal_accounting: d.kernel.paravirt_time_accounting && s.host.steal_clock(),
                    ..Default::default()
                },
                preempt_full: d.kernel.preempt == Preempt::Full,
                ipi_latency: d.kernel.ipi_latency_ns,
                ctxsw_cost: d.kernel.ctxsw_cost_ns,
                vcpu_refill: 0,
                exit: match pv.haltpoll {
                    // cpuidle-haltpoll turns host polling off (MSR_KVM_POLL_CONTROL).
                    Some(_) => ExitModel {
                        halt: vmsched_core::hv::Halt::Block,
                        ..exit_model(&s.machine, d.guest_type)
                    },
                    None => exit_model(&s.machine, d.guest_type),
                },
                tick_periodic: d.kernel.tick == TickMode::Periodic,
                skew_tick: d.kernel.skew_tick,
                tick_phase: d.kernel.tick_phase_ns,
                pv,
            },
        );
        for v in 0..d.vcpus {
            let (hard, initial) = if placement == VcpuPlacement::OwnPcpu {
                let c = next_pcpu;
                next_pcpu += 1;
                (CpuSet::single(CpuId(c)), c)
            } else {
                let hard = CpuSet::from_ids(d.hard_affinity(v, s.machine.pcpus));
                // Xen 4.20: vCPU 0 on the first allowed CPU, vCPU k after vCPU k-1's (of
                // its cpupool's: all of them without pools).
                let allowed = hard.and(&crate::cpupool::boot_cpus(s, di));
                let initial = match prev_cpu {
                    Some(p) if v > 0 => allowed.cycle(CpuId(p)).unwrap().0,
                    _ => allowed.first().unwrap().0,
                };
                (hard, initial)
            };
            prev_cpu = Some(initial);
            let soft = d
                .soft_pcpus
                .as_ref()
                .map(|p| CpuSet::from_ids(p.iter().copied()))
                .unwrap_or(all_p);
            b.add_vcpu(
                host,
                guest,
                EntityParams {
                    name: format!("{}.v{v}", d.name),
                    group: di as u32,
                    xen: crate::cpupool::host_of(s, di).vcpu_attr(d),
                    linux: s.host.vcpu_linux_attr(d),
                    hard_affinity: hard,
                    soft_affinity: soft,
                    initial_cpu: CpuId(initial),
                },
                gtopo[v as usize],
            );
        }
        if vmsched_core::scenario::io::uses_ioreq(d) {
            dms.push(DeviceModel {
                guest,
                before_flow: flows.len(),
                cost: d.device_model.cost_ns(),
                vcpu: d.device_model.vcpu,
            });
        }
        let all_v = CpuSet::first_n(d.vcpus as usize);
        for (wi, w) in d.workloads.iter().enumerate() {
            if matches!(w, WorkloadConfig::Parallel(_)) {
                // Its ranks run in the domains of its placement: added below, once they exist.
                continue;
            }
            let valid = "invariant: a built scenario validated";
            let net = match w {
                WorkloadConfig::Ping(p) => Some((FlowKind::Ping(p.times().expect(valid)), p.vcpu)),
                WorkloadConfig::Stream(p) => {
                    Some((FlowKind::Stream(p.params().expect(valid)), p.vcpu))
                }
                _ => None,
            };
            if let Some((kind, mut vcpu)) = net {
                // Xen 3.3, HVM guest: the callback reaches vCPU 0 only, so netfront's port is
                // bound there whatever the workload asks.
                let hvm_x86 = s.machine.hypervisor == Hypervisor::Xen
                    && s.machine.arch == Arch::X86
                    && s.machine.guest_type(d.guest_type) == Ok(GuestType::Hvm);
                if vcpu != 0 && hvm_x86 && s.host.hvm_callback_vcpu0_only() {
                    b.note(format!(
                        "{}: workload '{}': netfront's event channel is bound to vCPU 0, not \
                         vCPU {vcpu}: Xen 3.3 delivers an HVM guest's event-channel callback \
                         (GSI / PCI INTx) to vCPU 0 only",
                        d.name,
                        w.name()
                    ));
                    vcpu = 0;
                }
                flows.push(NetFlow {
                    guest,
                    workload: b.nr_workloads(),
                    kind,
                    vcpu,
                });
            }
            let spec = w.build(d.vcpus);
            let tasks = spec.tasks.clone();
            b.add_workload(guest, spec, |i| {
                let t = &tasks[i];
                let aff = t
                    .affinity
                    .as_ref()
                    .map(|a| CpuSet::from_ids(a.iter().copied()))
                    .unwrap_or(all_v);
                EntityParams {
                    name: t.name.clone(),
                    group: wi as u32,
                    xen: XenAttr::default(),
                    linux: LinuxAttr {
                        policy: t.policy,
                        nice: t.nice,
                        rt_priority: t.rt_prio,
                        times: t.times,
                    },
                    hard_affinity: aff,
                    soft_affinity: aff,
                    initial_cpu: aff.first().unwrap_or(CpuId(0)),
                }
            });
        }
        if let (HostSchedConfig::Linux(_), true) = (&s.host, d.coord.enable) {
            let (spec, flag) = crate::host::kvm::coord_spec(d);
            b.add_coord(guest, spec, flag);
        }
    }
    if let HostSchedConfig::Linux(p) = &s.host {
        add_host_processes(&mut b, host, p, s.domains.len() as u32, s.machine.pcpus);
        if p.timer_kworker {
            // An unbound nice-0 kworker (ERRATA L9), after the host processes.
            let all = CpuSet::first_n(s.machine.pcpus as usize);
            let params = EntityParams {
                name: "kworker/kvm-arch-timer".into(),
                group: (s.domains.len() + p.processes.len()) as u32,
                xen: XenAttr::default(),
                linux: LinuxAttr::default(),
                hard_affinity: all,
                soft_affinity: all,
                initial_cpu: CpuId(0),
            };
            b.add_timer_worker(host, params, p.timer_kworker_ns);
        }
    }
    // Converted with checked arithmetic; `load` refused a scenario where they overflow.
    let ns = |v: Result<u64, (String, String)>| {
        v.unwrap_or_else(|(f, m)| panic!("invariant: a built scenario validated, but {f}: {m}"))
    };
    let vifs = add_jobs(&mut b, s);
    add_io(&mut b, s, flows, dms, vifs);
    add_events(&mut b, s, host);
    b.xenmon_window(ns(s.run.xenmon_window_ns()));
    b.build(
        ns(s.run.duration_ns()),
        ns(s.run.warmup_ns()),
        ns(s.run.sample_interval_ns()),
    )
}

/// A KVM host's `[[host.process]]` workloads, as tasks of the host level: process `i` is group
/// `nr_domains + i` there (after the domains' vCPUs), its affinity names pCPUs.
fn add_host_processes(
    b: &mut SimBuilder,
    host: LevelId,
    p: &KvmHostParams,
    nr_domains: u32,
    pcpus: u32,
) {
    let all_p = CpuSet::first_n(pcpus as usize);
    for (wi, w) in p.processes.iter().enumerate() {
        let spec = w.build(pcpus);
        let tasks = spec.tasks.clone();
        b.add_workload(host, spec, |i| {
            let t = &tasks[i];
            let aff = t
                .affinity
                .as_ref()
                .map(|a| CpuSet::from_ids(a.iter().copied()))
                .unwrap_or(all_p);
            EntityParams {
                name: t.name.clone(),
                group: nr_domains + wi as u32,
                xen: XenAttr::default(),
                linux: LinuxAttr {
                    policy: t.policy,
                    nice: t.nice,
                    rt_priority: t.rt_prio,
                    ..Default::default()
                },
                hard_affinity: aff,
                soft_affinity: aff,
                initial_cpu: aff.first().unwrap_or(CpuId(0)),
            }
        });
    }
}

/// The I/O path (docs/io.md), if a domain runs an I/O workload: the driver domain (the first
/// with `driver = true`; validation refused an I/O workload without one) and the pinged guests
/// get event channels; their backends are bound in the driver domain in declaration order,
/// which is creation order (domains created during the run are declared last, in order).
/// HVM guests with emulated I/O get ioreq ports in the driver domain (ERRATA X9).
fn add_io(
    b: &mut SimBuilder,
    s: &Scenario,
    flows: Vec<NetFlow>,
    device_models: Vec<DeviceModel>,
    vifs: Vec<LevelId>,
) {
    if flows.is_empty() && device_models.is_empty() && vifs.is_empty() {
        return;
    }
    let di = s
        .domains
        .iter()
        .position(|d| d.driver)
        .expect("invariant: validation found a driver domain");
    let level = |i: usize| LevelId(i as u32 + 1);
    let ev = |i: usize| {
        let k = &s.domains[i].kernel;
        (level(i), k.evtchn_order, k.evtchn_word_bits)
    };
    let mut evtchn = vec![ev(di)];
    for g in flows.iter().map(|p| p.guest).chain(vifs.iter().copied()) {
        let i = g.0 as usize - 1;
        if !evtchn.iter().any(|e| e.0 == g) {
            evtchn.push(ev(i));
        }
    }
    b.add_io(IoSpec {
        driver: level(di),
        netback: s.domains[di].netback.clone(),
        evtchn,
        flows,
        device_models,
        vifs,
    });
}

/// Parallel jobs (workload/parallel.rs; docs/parallel.md): each job's parts, one workload per
/// domain of its placement (in its order, a group of that domain after its own workloads and
/// the parts placed there before), linked as one job. Returns the guests that need a vif for
/// jobs across domains, in creation (declaration) order.
fn add_jobs(b: &mut SimBuilder, s: &Scenario) -> Vec<LevelId> {
    let mut vif_doms: Vec<usize> = Vec::new();
    let mut extra = vec![0u32; s.domains.len()];
    for d in &s.domains {
        for w in &d.workloads {
            let WorkloadConfig::Parallel(job) = w else {
                continue;
            };
            let idx: Vec<usize> = job
                .placement
                .iter()
                .map(|p| {
                    s.domains
                        .iter()
                        .position(|o| o.name == p.domain)
                        .expect("invariant: a validated placement names a domain")
                })
                .collect();
            let vcpus: Vec<u32> = idx.iter().map(|&i| s.domains[i].vcpus).collect();
            let first = b.nr_workloads();
            let parts = job.build_parts(&vcpus);
            let nparts = parts.len();
            for (spec, &i) in parts.into_iter().zip(&idx) {
                let level = LevelId(i as u32 + 1);
                let group = s.domains[i].workloads.len() as u32 + extra[i];
                extra[i] += 1;
                let all_v = CpuSet::first_n(s.domains[i].vcpus as usize);
                let tasks = spec.tasks.clone();
                b.add_workload(level, spec, |k| {
                    let aff = tasks[k]
                        .affinity
                        .as_ref()
                        .map(|a| CpuSet::from_ids(a.iter().copied()))
                        .unwrap_or(all_v);
                    EntityParams {
                        name: tasks[k].name.clone(),
                        group,
                        xen: XenAttr::default(),
                        linux: LinuxAttr {
                            nice: tasks[k].nice,
                            ..Default::default()
                        },
                        hard_affinity: aff,
                        soft_affinity: aff,
                        initial_cpu: aff.first().unwrap_or(CpuId(0)),
                    }
                });
                if nparts > 1 && !vif_doms.contains(&i) {
                    vif_doms.push(i);
                }
            }
            b.add_job(first, nparts);
        }
    }
    vif_doms.sort_unstable();
    vif_doms
        .into_iter()
        .map(|i| LevelId(i as u32 + 1))
        .collect()
}

/// The `[[event]]` timeline, with names resolved: domain `i` is guest level `i + 1` and group
/// `i` at the host; a workload is a group of its guest level.
fn add_events(b: &mut SimBuilder, s: &Scenario, host: LevelId) {
    let dom = |n: &Option<String>| {
        s.domains
            .iter()
            .position(|d| Some(&d.name) == n.as_ref())
            .expect("invariant: a validated event names a domain")
    };
    let ms = |f: &str, v: u64| {
        vmsched_core::time::time_ns(f, v, vmsched_core::NS_PER_MS)
            .expect("invariant: a validated domain time fits")
    };
    for (di, d) in s.domains.iter().enumerate() {
        if let Some(c) = d.create_at_ms {
            let action = TimelineAction::CreateDomain {
                level: host,
                group: di as u32,
                guest: LevelId(di as u32 + 1),
            };
            b.add_event(ms("create_at_ms", c), action);
        }
        if let Some(x) = d.destroy_at_ms {
            let action = TimelineAction::DestroyDomain {
                level: host,
                group: di as u32,
                guest: LevelId(di as u32 + 1),
            };
            b.add_event(ms("destroy_at_ms", x), action);
        }
    }
    let mut order: Vec<usize> = (0..s.events.len()).collect();
    order.sort_by_key(|&i| s.events[i].at_ms);
    for i in order {
        let e = &s.events[i];
        let at = e
            .at_ns("at_ms")
            .expect("invariant: a validated event time fits");
        // Cpupool events, and `sched_host` on a machine with pools (docs/cpupools.md).
        if let Some(actions) = crate::cpupool::event_actions(s, e, host) {
            for a in actions {
                b.add_event(at, a);
            }
            continue;
        }
        let action = match e.action {
            EventAction::SchedDomain => TimelineAction::DomainAttr {
                level: host,
                group: dom(&e.domain) as u32,
                weight: e.weight,
                cap_pct: e.cap,
                rtds: match (e.budget_us, e.period_us, e.extratime) {
                    (Some(b), Some(p), Some(x)) => Some((b, p, x)),
                    _ => None,
                },
            },
            EventAction::SchedHost => {
                // One action per parameter given (`-t` before `-r`, as xl passes both at once).
                if let Some(t) = e.tslice_ms {
                    let param = GlobalParam::TsliceMs(t);
                    b.add_event(at, TimelineAction::Global { level: host, param });
                }
                let Some(r) = e.ratelimit_us else { continue };
                let param = GlobalParam::RatelimitUs(r);
                TimelineAction::Global { level: host, param }
            }
            EventAction::SchedTask if e.domain.is_none() => {
                // A host process: group `nr_domains + i` of the host level.
                let HostSchedConfig::Linux(p) = &s.host else {
                    unreachable!("invariant: only a KVM host has processes to change")
                };
                let wl = p
                    .processes
                    .iter()
                    .position(|w| Some(w.name()) == e.workload.as_deref())
                    .expect("invariant: a validated event names a host process");
                let group = (s.domains.len() + wl) as u32;
                let task = e.task.as_ref().map(|t| {
                    b.entity_named(host, group, t)
                        .expect("invariant: a validated event names a task")
                });
                TimelineAction::TaskAttr {
                    level: host,
                    group,
                    task,
                    nice: e.nice,
                    policy: e.policy,
                    rt_priority: e.rt_priority,
                }
            }
            EventAction::SchedVcpu => {
                // The vCPU threads: group `d` of the host level, thread `k` named `<domain>.vk`.
                let d = dom(&e.domain);
                let task = e.cpu.map(|k| {
                    let name = format!("{}.v{k}", s.domains[d].name);
                    b.entity_named(host, d as u32, &name)
                        .expect("invariant: a validated event names a vCPU")
                });
                TimelineAction::TaskAttr {
                    level: host,
                    group: d as u32,
                    task,
                    nice: e.nice,
                    policy: e.policy,
                    rt_priority: e.rt_priority,
                }
            }
            EventAction::SchedTask => {
                let d = dom(&e.domain);
                let level = LevelId(d as u32 + 1);
                let wl = s.domains[d]
                    .workloads
                    .iter()
                    .position(|w| Some(w.name()) == e.workload.as_deref())
                    .expect("invariant: a validated event names a workload")
                    as u32;
                let task = e.task.as_ref().map(|t| {
                    b.entity_named(level, wl, t)
                        .expect("invariant: a validated event names a task")
                });
                TimelineAction::TaskAttr {
                    level,
                    group: wl,
                    task,
                    nice: e.nice,
                    policy: e.policy,
                    rt_priority: e.rt_priority,
                }
            }
            EventAction::Pause | EventAction::Unpause => TimelineAction::Pause {
                level: host,
                group: dom(&e.domain) as u32,
                paused: e.action == EventAction::Pause,
            },
            EventAction::CpuOffline | EventAction::CpuOnline => TimelineAction::CpuHotplug {
                // No domain: a pCPU of the host; else a vCPU of the domain's guest.
                level: match e.domain {
                    None => host,
                    Some(_) => LevelId(dom(&e.domain) as u32 + 1),
                },
                cpu: CpuId(
                    e.cpu
                        .expect("invariant: a validated cpu event names its CPU"),
                ),
                online: e.action == EventAction::CpuOnline,
            },
            EventAction::CpupoolCpuAdd
            | EventAction::CpupoolCpuRemove
            | EventAction::CpupoolMigrate => unreachable!("cpupool events are handled above"),
        };
        b.add_event(at, action);
    }
}

/// Loads, builds and runs a scenario; refuses one whose memory estimate exceeds the limit in
/// force (`run.memory_limit_mb`, else a share of the available memory: docs/limits.md).
pub fn run(
    file: &str,
    src: &str,
    overrides: &[(String, String)],
) -> Result<Results, ScenarioError> {
    let s = load(file, src, overrides)?;
    let limit = vmsched_core::budget::Limit::resolve(None, s.run.memory_limit_mb);
    vmsched_core::budget::Estimate::of(&s, None)
        .check(&limit)
        .map_err(|(field, message)| ScenarioError {
            file: file.to_string(),
            line: None,
            field,
            message,
        })?;
    let mut sim = build(&s);
    sim.run();
    Ok(sim.results())
}
