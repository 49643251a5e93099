//! Scenario checks that need the host policy and the whole machine together: the layout per
//! host policy, the RTDS/SEDF domain fields, the KVM vCPU thread fields and `[domain.pv]`.

use vmsched_core::pv::PvModel;
use vmsched_core::scenario::{Arch, Hypervisor};
use vmsched_core::workload::spinlock::LockKind;
use vmsched_core::workload::WorkloadConfig;

use super::{GuestSchedConfig, HostSchedConfig, Scenario};

/// Checks that need the host policy and the whole machine together. `names_ratelimit`: the
/// file or an override sets `host.ratelimit_us` (Credit2 4.2.1 refuses it).
pub(super) fn check_layout(s: &Scenario, names_ratelimit: bool) -> Result<(), (String, String)> {
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
            let v = p.kvm_version();
            p.kvm
                .check(s.machine.arch, v)
                .map_err(|(f, m)| (format!("host.kvm.{f}"), m))?;
            if v == crate::host::kvm::KvmVersion::V3_17
                && s.machine.halt_poll_ns.is_some_and(|n| n > 0)
            {
                return Err((
                    "machine.halt_poll_ns".into(),
                    "the host kernel (3.17) has no halt polling (it came with 4.0): set 0 or \
                     remove it"
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
/// A domain's `halt_poll_ns` (`KVM_CAP_HALT_POLL`): a time in range, on a KVM machine, and
/// not under a 3.17 host (the capability came with Linux 5.8: commit acd05785e48c, "kvm: add
/// capability for halt polling").
fn check_halt_poll(s: &Scenario, ns: Option<u64>) -> Result<(), String> {
    let Some(ns) = ns else {
        return Ok(());
    };
    if ns > vmsched_core::time::MAX_TIME_NS {
        return Err(format!(
            "must be at most {} ns, got {ns}",
            vmsched_core::time::MAX_TIME_NS
        ));
    }
    if s.machine.hypervisor != Hypervisor::Kvm {
        return Err("is KVM's per-VM halt-polling cap (KVM_CAP_HALT_POLL): set \
                    machine.hypervisor = \"kvm\" or remove it"
            .into());
    }
    if let HostSchedConfig::Linux(p) = &s.host {
        if p.kvm_version() == crate::host::kvm::KvmVersion::V3_17 {
            return Err(
                "KVM_CAP_HALT_POLL came with Linux 5.8; a 3.17 host has only the \
                        module parameter (machine.halt_poll_ns)"
                    .into(),
            );
        }
    }
    Ok(())
}

fn check_kvm_fields(s: &Scenario) -> Result<(), (String, String)> {
    let linux = matches!(s.host, HostSchedConfig::Linux(_));
    for (i, d) in s.domains.iter().enumerate() {
        crate::host::kvm::check_vcpu_fields(d, linux)
            .map_err(|(f, m)| (format!("domain.{i}.{f}"), m))?;
        check_halt_poll(s, d.halt_poll_ns).map_err(|m| (format!("domain.{i}.halt_poll_ns"), m))?;
        crate::host::kvm::check_coord(d, linux, &s.events)
            .map_err(|(f, m)| (format!("domain.{i}.{f}"), m))?;
    }
    Ok(())
}

/// The paravirtual interfaces of domain `d` on this machine (`[domain.pv]` resolved,
/// vmsched_core::pv); the error names the field under `pv`.
pub(super) fn pv_model(
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
