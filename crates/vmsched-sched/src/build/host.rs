//! The host scheduler registry: `[host] scheduler = "..."` as a serde-tagged enum, its checks
//! of parameters and run-time changes (`ConfigCheck`), what it tells the builder about vCPU
//! placement and attributes, and `make_host`, which boxes the chosen policy.

use serde::{Deserialize, Serialize};
use vmsched_core::scenario::ConfigCheck;
use vmsched_core::workload::WorkloadConfig;
use vmsched_core::{CpuTopo, LinuxAttr, Policy, XenAttr};

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

use super::{split_field, GuestSchedConfig};

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

/// How a host configuration places vCPUs at build time.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum VcpuPlacement {
    /// Hard affinity and first CPU from the scenario (Xen 4.20's `sched_init_vcpu`).
    Affinity,
    /// vCPU k of the machine, in domain order, owns pCPU k.
    OwnPcpu,
}

impl HostSchedConfig {
    pub(super) fn placement(&self) -> VcpuPlacement {
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
    pub(super) fn hvm_callback_vcpu0_only(&self) -> bool {
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
    pub(super) fn vcpu_linux_attr(
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
    pub(super) fn steal_clock(&self) -> bool {
        match self {
            HostSchedConfig::Linux(p) => p.steal_time,
            _ => true,
        }
    }

    /// The per-vCPU attributes this host takes from a domain's scheduling parameters
    /// (`[[domain]]` `weight`, `cap`): the host policy's configuration owns what they mean.
    pub(super) fn vcpu_attr(
        &self,
        d: &vmsched_core::scenario::DomainConfig<GuestSchedConfig>,
    ) -> XenAttr {
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

pub(super) fn make_host(
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
