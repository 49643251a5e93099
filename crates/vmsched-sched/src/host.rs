//! Host schedulers (place vCPUs on physical CPUs: Xen's, and the Linux KVM host of `kvm.rs`), and what a host policy's configuration makes
//! of a domain's scheduling parameters ([`HostConfig`]).
pub mod arinc653;
pub mod bvt;
pub mod credit1;
pub mod credit2;
pub mod kvm;
pub mod null;
pub mod pinned;
pub mod rtds;
pub mod sedf;
pub mod xen_core;

use vmsched_core::XenAttr;

/// A domain's scheduling parameters as its `[[domain]]` table gives them (`weight`, `cap`),
/// before any host policy reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DomainSchedParams {
    /// `weight` (Xen `xl sched-credit -w`, `xl sched-credit2 -w`; xl.cfg `cpu_weight`).
    pub weight: u32,
    /// `cap` in percent of one pCPU, 0 = none (`-c`; xl.cfg `cap`).
    pub cap: u32,
    /// RTDS `budget_us` (`xl sched-rtds -b`), if given.
    pub budget_us: Option<u64>,
    /// RTDS `period_us` (`xl sched-rtds -p`), if given.
    pub period_us: Option<u64>,
    /// RTDS `extratime` (`xl sched-rtds -e`), if given.
    pub extratime: Option<bool>,
}

/// A host policy's configuration (`[host]`): it owns what a domain's scheduling parameters mean
/// for the policy. Each policy's parameter type implements it; the registry
/// (`build::HostSchedConfig`) only dispatches, so a policy with other per-domain parameters
/// (RTDS: budget, period, extratime) adds them here and in its own impl.
pub trait HostConfig {
    /// The attributes every vCPU of a domain with parameters `d` carries (`EntityParams.xen`).
    fn vcpu_attr(&self, d: &DomainSchedParams) -> XenAttr;
}

/// The credit schedulers' reading: weight and cap, per domain.
fn credit_attr(d: &DomainSchedParams) -> XenAttr {
    XenAttr {
        weight: d.weight,
        cap_pct: d.cap,
        ..Default::default()
    }
}

impl HostConfig for credit1::Credit1Params {
    /// `xl sched-credit -d D -w W -c C`: the domain's weight and cap.
    fn vcpu_attr(&self, d: &DomainSchedParams) -> XenAttr {
        credit_attr(d)
    }
}

impl HostConfig for credit2::Credit2Params {
    /// `xl sched-credit2 -d D -w W -c C`: the domain's weight and cap.
    fn vcpu_attr(&self, d: &DomainSchedParams) -> XenAttr {
        credit_attr(d)
    }
}

impl HostConfig for pinned::PinnedParams {
    /// The pinned host reads no domain parameter.
    fn vcpu_attr(&self, _d: &DomainSchedParams) -> XenAttr {
        XenAttr::default()
    }
}

impl HostConfig for rtds::RtdsParams {
    /// `xl sched-rtds -d D -v all -p P -b B -e E`: the domain's period, budget and extratime
    /// for every vCPU (absent: Xen's 10 ms, 4 ms, on).
    fn vcpu_attr(&self, d: &DomainSchedParams) -> XenAttr {
        XenAttr {
            budget_us: d.budget_us.unwrap_or(rtds::DEFAULT_BUDGET_US),
            period_us: d.period_us.unwrap_or(rtds::DEFAULT_PERIOD_US),
            extratime: d.extratime.unwrap_or(true),
            ..Default::default()
        }
    }
}

impl HostConfig for null::NullParams {
    /// null reads no domain parameter.
    fn vcpu_attr(&self, _d: &DomainSchedParams) -> XenAttr {
        XenAttr::default()
    }
}

impl HostConfig for arinc653::Arinc653Params {
    /// ARINC653 reads no domain parameter: the `[host]` table names the vCPUs.
    fn vcpu_attr(&self, _d: &DomainSchedParams) -> XenAttr {
        XenAttr::default()
    }
}

impl HostConfig for sedf::SedfParams {
    /// `xl sched-sedf -d D -p P -s S -e E -w W`: with a period or a slice, the domain's period
    /// (Xen's 100 ms if only the slice is given) and slice; without, its weight; extratime
    /// (default on) in both (host/sedf.rs, "Domain parameters").
    fn vcpu_attr(&self, d: &DomainSchedParams) -> XenAttr {
        let timed = d.period_us.is_some() || d.budget_us.is_some();
        XenAttr {
            weight: d.weight,
            period_us: if timed {
                d.period_us.unwrap_or((sedf::WEIGHT_PERIOD / 1000) as u64)
            } else {
                0
            },
            budget_us: d.budget_us.unwrap_or(0),
            extratime: d.extratime.unwrap_or(true),
            ..Default::default()
        }
    }
}

impl HostConfig for bvt::BvtParams {
    /// BVT's per-domain parameters are in `[host] domains` (by name); it reads none here.
    fn vcpu_attr(&self, _d: &DomainSchedParams) -> XenAttr {
        XenAttr::default()
    }
}
