//! Credit2's parameters: the Xen release reproduced ([`Credit2Version`]), the runqueue
//! arrangement (`credit2_runqueue=`) and the boot and `xl sched-credit2 -s` parameters
//! ([`Credit2Params`]) with their validation against the ranges Xen 4.20 accepts. Moved out of
//! host/credit2.rs unchanged; re-exported there.

use vmsched_core::cpuset::MAX_CPUS;
use vmsched_core::time::Nanos;

use super::LOADAVG_GRANULARITY_SHIFT;
use crate::host::xen_core::{TIMER_ENTRY_DEFAULT_NS, TIMER_SLOP_DEFAULT_NS};

/// Which Xen release to reproduce.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub enum Credit2Version {
    #[default]
    #[serde(rename = "4.20.0")]
    V4_20_0,
    #[serde(rename = "4.20.1")]
    V4_20_1,
    #[serde(rename = "4.20.2")]
    V4_20_2,
    #[serde(rename = "4.20.3")]
    V4_20_3,
    #[serde(rename = "4.20.4")]
    V4_20_4,
    #[serde(rename = "4.21")]
    V4_21,
}

impl Credit2Version {
    /// Whether `csched2_runtime` counts the credit of the vCPU being switched out as waiting
    /// (Xen commit ae648e9f80, backported to 4.20.2; ERRATA X3).
    pub fn counts_outgoing_credit(self) -> bool {
        !matches!(self, Credit2Version::V4_20_0 | Credit2Version::V4_20_1)
    }
}

/// `credit2_runqueue=`: which CPUs share a runqueue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunqueueArrangement {
    Cpu,
    Core,
    #[default]
    Socket,
    Node,
    All,
}

/// Credit2 boot and `xl sched-credit2 -s` parameters, named after Xen's, with 4.20 defaults.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Credit2Params {
    pub version: Credit2Version,
    /// `sched_ratelimit_us`: minimum run time after a switch-in before preemption; 0 = off.
    pub ratelimit_us: u64,
    /// `credit2_runqueue`.
    pub runqueue: RunqueueArrangement,
    /// `sched_credit2_max_cpus_runqueue`.
    pub max_cpus_runqueue: u32,
    /// `sched_credit2_migrate_resist`: credit lead a vCPU needs to move to another CPU.
    pub migrate_resist_us: u64,
    /// `credit2_cap_period_ms`: budget replenishment period of capped domains.
    pub cap_period_ms: u64,
    /// `credit2_load_window_shift`: log2 of the load-average window in ns.
    pub load_window_shift: u32,
    /// `credit2_load_precision_shift`: fractional bits of load averages.
    pub load_precision_shift: u32,
    /// `credit2_balance_under`: log2 tolerance (in vCPUs) when not overloaded.
    pub balance_under: i32,
    /// `credit2_balance_over`: log2 tolerance (in vCPUs) when overloaded.
    pub balance_over: i32,
    /// `sched_smt_power_savings`: fill busy cores before idle ones.
    pub smt_power_savings: bool,
    /// Xen's `timer_slop` boot parameter (ns), applied by the Xen core to every timer it arms
    /// for the policy (xen-schedulers.md §1.8).
    pub timer_slop_ns: Nanos,
    /// Timer entry latency (ns): how long after a host timer's expiry the Xen core runs its
    /// handler (`schedule()` reads `NOW()`), the running vCPU burning credit meanwhile
    /// (host/xen_core.rs; what breaks equal-credit ties, ERRATA X3). 0 = timers entered exactly.
    pub timer_entry_ns: Nanos,
}

impl Default for Credit2Params {
    fn default() -> Self {
        Credit2Params {
            version: Credit2Version::V4_20_0,
            ratelimit_us: 1000,
            runqueue: RunqueueArrangement::Socket,
            max_cpus_runqueue: 16,
            migrate_resist_us: 500,
            cap_period_ms: 10,
            load_window_shift: 30,
            load_precision_shift: 18,
            balance_under: 0,
            balance_over: -3,
            smt_power_savings: false,
            timer_slop_ns: TIMER_SLOP_DEFAULT_NS,
            timer_entry_ns: TIMER_ENTRY_DEFAULT_NS,
        }
    }
}

impl Credit2Params {
    /// Checks every field against the range Xen accepts (or, for the load shifts, the range in
    /// which the integer load arithmetic cannot overflow).
    pub fn validate(&self) -> Result<(), String> {
        let r = self.ratelimit_us;
        if r != 0 && !(100..=500_000).contains(&r) {
            return Err(format!(
                "ratelimit_us: {r} must be 0 (off) or in 100..=500000 (µs)"
            ));
        }
        let m = self.max_cpus_runqueue;
        if m == 0 || m as usize > MAX_CPUS {
            return Err(format!("max_cpus_runqueue: {m} must be in 1..={MAX_CPUS}"));
        }
        let t = self.timer_entry_ns;
        if t > 1_000_000 {
            return Err(format!("timer_entry_ns: {t} must be in 0..=1000000 (ns)"));
        }
        let m = self.migrate_resist_us;
        if m > 1_000_000 {
            return Err(format!(
                "migrate_resist_us: {m} must be in 0..=1000000 (µs)"
            ));
        }
        let c = self.cap_period_ms;
        if !(1..=1_000_000).contains(&c) {
            return Err(format!("cap_period_ms: {c} must be in 1..=1000000 (ms)"));
        }
        let w = self.load_window_shift;
        if !(11..=40).contains(&w) {
            return Err(format!("load_window_shift: {w} must be in 11..=40"));
        }
        let p = self.load_precision_shift;
        if !(4..=30).contains(&p) || w - LOADAVG_GRANULARITY_SHIFT + p > 48 {
            return Err(format!(
                "load_precision_shift: {p} must be in 4..=30, with \
                 load_window_shift - 10 + load_precision_shift <= 48"
            ));
        }
        for (name, tol) in [
            ("balance_under", self.balance_under),
            ("balance_over", self.balance_over),
        ] {
            if !(0..=62).contains(&(p as i64 + tol as i64)) {
                return Err(format!(
                    "{name}: {tol} must keep load_precision_shift + {name} in 0..=62"
                ));
            }
        }
        Ok(())
    }
}
