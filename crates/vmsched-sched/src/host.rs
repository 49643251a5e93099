//! Host schedulers (place vCPUs on physical CPUs), and what a host policy's configuration makes
//! of a domain's scheduling parameters ([`HostConfig`]).
pub mod credit1;
pub mod credit2;
pub mod pinned;
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
