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
    /// Xen 4.2.1 (`xen/common/sched_credit2.c`, experimental then): per-socket runqueues, a
    /// 2 ms maximum slice, no ratelimit, caps, yield or affinity (host/credit2.rs, "Xen 4.2.1").
    #[serde(rename = "4.2.1")]
    V4_2_1,
}

impl Credit2Version {
    /// Whether `csched2_runtime` counts the credit of the vCPU being switched out as waiting
    /// (Xen commit ae648e9f80, backported to 4.20.2; ERRATA X3).
    pub fn counts_outgoing_credit(self) -> bool {
        !matches!(
            self,
            Credit2Version::V4_20_0 | Credit2Version::V4_20_1 | Credit2Version::V4_2_1
        )
    }

    /// Xen 4.2.1's experimental Credit2 rather than the 4.20 line.
    pub fn is_4_2(self) -> bool {
        self == Credit2Version::V4_2_1
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
    /// which the integer load arithmetic cannot overflow). Under 4.2.1, the parameters that
    /// release does not have must keep their (4.20) defaults; `ratelimit_us`, whose default is
    /// not 0, is refused by the scenario check when the file names it (build.rs).
    pub fn validate(&self) -> Result<(), String> {
        if self.version.is_4_2() {
            self.validate_4_2()?;
        }
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

    /// The 4.20 parameters Xen 4.2.1 lacks: `credit2_runqueue=` (4.7), the runqueue size cap
    /// (4.14), `credit2_cap_period_ms` (4.10), the load precision/window split (4.8; 4.2.1
    /// has a fixed window of 2^18 samples of 1024 ns and the same precision) and SMT power
    /// savings in Credit2 (4.8).
    fn validate_4_2(&self) -> Result<(), String> {
        let d = Credit2Params::default();
        let not_in =
            |f: &str| format!("{f}: Xen 4.2.1's Credit2 has no such parameter (leave it out)");
        if self.runqueue != RunqueueArrangement::Socket {
            return Err(format!(
                "runqueue: Xen 4.2.1's Credit2 always has one runqueue per socket, got {:?}",
                self.runqueue
            ));
        }
        if self.max_cpus_runqueue != d.max_cpus_runqueue {
            return Err(not_in("max_cpus_runqueue"));
        }
        if self.cap_period_ms != d.cap_period_ms {
            return Err(not_in("cap_period_ms"));
        }
        if self.load_window_shift != d.load_window_shift {
            return Err(not_in("load_window_shift"));
        }
        if self.load_precision_shift != d.load_precision_shift {
            return Err(not_in("load_precision_shift"));
        }
        if self.smt_power_savings {
            return Err(not_in("smt_power_savings"));
        }
        Ok(())
    }
}

/// The scenario checks of Credit2 4.2.1 that need more than `[host]`: that release has no
/// ratelimit (`host_names_ratelimit`: the file or an override sets `host.ratelimit_us`), no
/// caps and no affinity in Credit2 (its pick, tickle and candidate code ignore the vCPUs'
/// masks, so pinning would be silently broken): a domain's `cap`, `pcpus`, `vcpu_pcpus` or
/// `soft_pcpus` is refused. Returns (field, message).
pub fn check_scenario_4_2<G>(
    p: &Credit2Params,
    domains: &[vmsched_core::scenario::DomainConfig<G>],
    host_names_ratelimit: bool,
) -> Result<(), (String, String)> {
    if !p.version.is_4_2() {
        return Ok(());
    }
    if host_names_ratelimit {
        return Err((
            "host.ratelimit_us".into(),
            "Xen 4.2.1's Credit2 has no ratelimit (it came in 4.8); leave it out".into(),
        ));
    }
    for (i, d) in domains.iter().enumerate() {
        let given = [
            ("cap", d.cap != 0),
            ("pcpus", d.pcpus.is_some()),
            ("vcpu_pcpus", d.vcpu_pcpus.is_some()),
            ("soft_pcpus", d.soft_pcpus.is_some()),
        ];
        if let Some((f, _)) = given.iter().find(|(_, g)| *g) {
            let why = if *f == "cap" {
                "Xen 4.2.1's Credit2 has no caps (they came in 4.10)"
            } else {
                "Xen 4.2.1's Credit2 ignores vCPU affinity (its CPU pick, tickle and candidate \
                 selection never read it), so pinning is refused rather than silently broken"
            };
            return Err((format!("domain.{i}.{f}"), why.into()));
        }
    }
    Ok(())
}
