//! Credit1's parameters: the Xen release reproduced ([`Credit1Version`], with the rules that
//! changed between releases as its methods), the boot and `xl sched-credit -s` parameters, and
//! the seed-001/002 options of the 3.3 variant ([`Credit1Params`], [`Credit1BoostDomain`]), with
//! their validation. Moved out of host/credit1.rs unchanged; re-exported there.

use vmsched_core::time::Nanos;

use super::V33_TSLICE_MS;

/// Which Xen release to reproduce. Ordered by release, so a rule introduced in release X holds
/// for every `v >= X`. Xen 4.18, 4.19 and 4.20 have the same `credit.c` but for trace records
/// (`git diff RELEASE-4.18.0 RELEASE-4.20.0 -- xen/common/sched/credit.c`); 4.17 lacks the
/// load-balance ratelimit and the yield rules of 4.18, and is not modelled.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Deserialize,
    serde::Serialize,
)]
pub enum Credit1Version {
    #[serde(rename = "3.3")]
    V3_3,
    #[serde(rename = "4.18")]
    V4_18,
    #[serde(rename = "4.19")]
    V4_19,
    #[default]
    #[serde(rename = "4.20")]
    V4_20,
}

impl Credit1Version {
    /// The 4.x releases modelled (4.18–4.20): every rule of a 4.x release up to 4.18 holds.
    fn is_4x(self) -> bool {
        self >= Credit1Version::V4_18
    }
    /// [4.0+] credit is burnt from measured run time (10 credits per ms), not sampled at ticks.
    pub fn burns_exact_time(self) -> bool {
        self.is_4x()
    }
    /// [3.4+] the accounting pass has its own master timer (every tslice); before, the master
    /// CPU ran it at every third tick; and the idle vCPU gets no slice timer.
    pub fn has_master_timer(self) -> bool {
        self.is_4x()
    }
    /// [4.1+] weight is per vCPU: a domain weighs `weight × active vCPUs`.
    pub fn per_vcpu_weight(self) -> bool {
        self.is_4x()
    }
    /// [4.1+] a vCPU leaving the active set keeps half its credit (before: 0).
    pub fn halves_on_deactivate(self) -> bool {
        self.is_4x()
    }
    /// [4.1+] `SCHEDOP_yield` sets the YIELD flag (before: no hook).
    pub fn has_yield_flag(self) -> bool {
        self.is_4x()
    }
    /// [4.1+] a cross-socket move in the CPU pick needs twice the idlers; `idle_bias`.
    pub fn cross_socket_factor(self) -> usize {
        if self.is_4x() {
            2
        } else {
            1
        }
    }
    /// [4.1+] an HVM guest's event-channel callback can be a per-vCPU vector
    /// (`HVMIRQ_callback_vector`, Xen commit e5fd1f6505; `hvm_assert_evtchn_irq` kicks the
    /// notified vCPU). [3.3] only the GSI / PCI INTx callback exists, and
    /// `hvm_assert_evtchn_irq` raises it for vCPU 0 alone (ERRATA X9).
    pub fn hvm_vector_callback(self) -> bool {
        self.is_4x()
    }
    /// [4.2+] tslice and ratelimit exist (`sched_credit_tslice_ms`, `sched_ratelimit_us`).
    pub fn has_tslice_and_ratelimit(self) -> bool {
        self.is_4x()
    }
    /// [4.5+] soft affinity; [4.20] the tickle rules of ERRATA X10 (one idler, the woken vCPU's
    /// CPU preempted only when no idler fits).
    pub fn tickles_one_idler(self) -> bool {
        self.is_4x()
    }
    /// [4.7+] the wake that ends a migration does not boost (ERRATA X9).
    pub fn migration_wake_unboosted(self) -> bool {
        self.is_4x()
    }
    /// [4.9+] per-CPU `nr_runnable`; stealers skip peers with at most one.
    pub fn skips_lone_peers(self) -> bool {
        self.is_4x()
    }
    /// [4.13+] the ticker stops while a CPU idles and restarts on the tick grid.
    pub fn ticker_stops_when_idle(self) -> bool {
        self.is_4x()
    }
    /// [4.18+] `load-balance-ratelimit`; yielded vCPUs are not stolen (ERRATA X11).
    pub fn has_load_balance_ratelimit(self) -> bool {
        self.is_4x()
    }
    /// [3.3] a domctl pauses and unpauses the domain's vCPUs (ERRATA X11).
    pub fn adjust_pauses_domain(self) -> bool {
        !self.is_4x()
    }
}

/// Credit1 boot and `xl sched-credit -s` parameters, named after Xen's. Options that a release
/// lacks must be left out for it; unset options take the release's default.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Credit1Params {
    pub version: Credit1Version,
    /// [4.2+] `sched_credit_tslice_ms` (1..=1000, default 30). Xen 3.3's slice is a fixed 30 ms.
    pub tslice_ms: Option<u64>,
    /// [4.2+] `sched_ratelimit_us` (0 = off, or 100..=500000; default 1000), clamped to the
    /// tslice as at boot.
    pub ratelimit_us: Option<u64>,
    /// [4.1+] `tickle_one_idle_cpu` (default true).
    pub tickle_one_idle_cpu: Option<bool>,
    /// [3.4+] `vcpu_migration_delay` in µs (0..=100000, default 0): a vCPU that ran this recently
    /// is cache-hot and not stolen.
    pub vcpu_migration_delay_us: Option<u64>,
    /// [4.18+] `load-balance-ratelimit` in µs (0..=1000000, default 1000): a CPU steals at most
    /// once per this period.
    pub load_balance_ratelimit_us: Option<u64>,
    /// `sched_smt_power_savings`: prefer filling busy cores in the CPU pick.
    pub smt_power_savings: bool,
    /// Xen's `timer_slop` (ns), applied by the Xen core to every timer it arms.
    pub timer_slop_ns: Option<Nanos>,
    /// Timer entry latency (ns) of the Xen core (host/xen_core.rs).
    pub timer_entry_ns: Option<Nanos>,
    /// Seed 002 (ERRATA X6), both eras: a wake turns an UNDER vCPU into BOOST (default true).
    /// `false` is the credit scheduler before BOOST existed (Xen before 3.0.4): the woken vCPU
    /// keeps UNDER or OVER and goes to the tail of its class; tickling is unchanged (its CPU
    /// only if it is of strictly higher priority than the running vCPU, plus the idlers).
    pub boost_on_wake: Option<bool>,
    /// Seed 002 (ERRATA X6), 3.3 only: a wake raises reschedules (default true). `false` is
    /// Ongaro et al.'s change: the woken vCPU is queued and no CPU is tickled, not even an idle
    /// one; it runs at its CPU's next natural scheduling point (the running vCPU blocks, yields
    /// or ends its 30 ms slice; an idle CPU's 30 ms idle slice ends) or is stolen by a CPU that
    /// reschedules. Refused for 4.x, whose idle CPUs have no slice timer and would never look.
    pub tickle_on_wake: Option<bool>,
    /// Seed 002, 3.3 only: the slides' "waiting until all events have been processed allows the
    /// scheduler to decide which domain has highest priority" read as a deferred tickle (default
    /// false). A wake caused by another vCPU's event send during its upcall
    /// (`WakeInfo::waker`) is queued (BOOST as usual) without a tickle; when that upcall has
    /// served every pending port (`Scheduler::wake_batch_end`), the tickles of the vCPUs it
    /// woke that are still queued are raised, once per CPU, against the CPUs' state then. A
    /// wake from outside a batch (a physical interrupt's event, a timer) is a batch of one and
    /// tickles at once. Needs `tickle_on_wake` left on.
    pub deferred_tickle: bool,
    /// Seed 001 first improvement (ERRATA X13), 3.3 only: debit the exact run time (10 credits
    /// per ms, to the nanosecond with the sub-credit remainder carried) in `schedule()` and in
    /// the tick, instead of 100 credits to whoever runs at a tick.
    pub exact_debit: bool,
    /// Seed 001 first improvement (ERRATA X13), 3.3 only: the slice of a vCPU picked in BOOST,
    /// in ms (1..=30; the talk's experiment: 2). A BOOST vCPU still runnable when a
    /// reschedule comes after its BOOST slice becomes UNDER (unless it holds boost credit) and
    /// queues behind the UNDER vCPUs.
    pub boost_slice_ms: Option<u64>,
    /// Seed 001 first improvement (ERRATA X13), 3.3 only: a vCPU whose credit passes the upper
    /// bound (credits per tslice, 300) at a pass keeps 300 when it leaves the active set, not 0.
    pub keep_credit_above_limit: bool,
    /// Seed 001 first improvement (ERRATA X13), 3.3 only: at each pass, before the pass's
    /// credit is added, the credits of a domain's active vCPUs are levelled (each gets the
    /// mean; the remainder of the integer division to the head of its active list, one each).
    pub level_domain_credits: bool,
    /// Seed 001 second improvement (ERRATA X13), 3.3 only: domains holding *boost credit*, with
    /// their boost limit and boost ratio. A vCPU with boost credit is BOOST; what it runs is
    /// debited from its boost credit first; it becomes UNDER when its boost credit runs out.
    pub boost_domains: Vec<Credit1BoostDomain>,
}

/// One domain of [`Credit1Params::boost_domains`] (seed 001's second improvement).
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Credit1BoostDomain {
    /// The `[[domain]]` name.
    pub domain: String,
    /// Boost limit: the most boost credit a vCPU of the domain holds, in ms of run time
    /// (1..=10000; the talk's evaluation: 100).
    pub limit_ms: u64,
    /// Boost ratio: the share of one CPU given to the domain at each pass as boost credit, in
    /// place of the same amount of its weighted credit, in % (1..=100).
    pub ratio_pct: u64,
}

impl Credit1Params {
    /// Checks every field against the range Xen accepts and the release named.
    pub fn validate(&self) -> Result<(), String> {
        let v = self.version;
        if !v.has_tslice_and_ratelimit() {
            if matches!(self.tslice_ms, Some(t) if t != V33_TSLICE_MS) {
                return Err("tslice_ms: Xen 3.3's credit scheduler has a fixed 30 ms slice".into());
            }
            if matches!(self.ratelimit_us, Some(r) if r != 0) {
                return Err("ratelimit_us: Xen 3.3's credit scheduler has no ratelimit".into());
            }
            if self.tickle_one_idle_cpu.is_some() {
                return Err(
                    "tickle_one_idle_cpu: a Xen 4.1+ option (3.3 tickles every idler)".into(),
                );
            }
            if self.load_balance_ratelimit_us.is_some() {
                return Err("load_balance_ratelimit_us: a Xen 4.18+ option".into());
            }
            if self.vcpu_migration_delay_us.is_some() {
                return Err("vcpu_migration_delay_us: a Xen 3.4+ option".into());
            }
        }
        let t = self.tslice_ms.unwrap_or(30);
        if !(1..=1000).contains(&t) {
            return Err(format!("tslice_ms: {t} must be in 1..=1000 (ms)"));
        }
        if let Some(r) = self.ratelimit_us {
            if r != 0 && !(100..=500_000).contains(&r) {
                return Err(format!(
                    "ratelimit_us: {r} must be 0 (off) or in 100..=500000 (µs)"
                ));
            }
        }
        let d = self.vcpu_migration_delay_us.unwrap_or(0);
        if d > 100_000 {
            return Err(format!(
                "vcpu_migration_delay_us: {d} must be in 0..=100000 (µs)"
            ));
        }
        let l = self.load_balance_ratelimit_us.unwrap_or(0);
        if l > 1_000_000 {
            return Err(format!(
                "load_balance_ratelimit_us: {l} must be in 0..=1000000 (µs)"
            ));
        }
        let e = self.timer_entry_ns.unwrap_or(0);
        if e > 1_000_000 {
            return Err(format!("timer_entry_ns: {e} must be in 0..=1000000 (ns)"));
        }
        self.validate_seed_options()
    }

    /// The seed 001 and 002 options (ERRATA X6, X13): ranges, and the 3.3-only ones refused for
    /// 4.x by name.
    fn validate_seed_options(&self) -> Result<(), String> {
        if self.version.is_4x() {
            let only33 = "an option of the Xen 3.3 variant only";
            if self.tickle_on_wake.is_some() {
                return Err(format!(
                    "tickle_on_wake: {only33} (4.x idle CPUs have no slice timer to find the woken vCPU)"
                ));
            }
            if self.exact_debit {
                return Err(format!(
                    "exact_debit: {only33} (seed 001; 4.x debits exact time already)"
                ));
            }
            if self.deferred_tickle {
                return Err(format!("deferred_tickle: {only33} (seed 002)"));
            }
            if self.boost_slice_ms.is_some() {
                return Err(format!("boost_slice_ms: {only33} (seed 001)"));
            }
            if self.keep_credit_above_limit {
                return Err(format!("keep_credit_above_limit: {only33} (seed 001)"));
            }
            if self.level_domain_credits {
                return Err(format!("level_domain_credits: {only33} (seed 001)"));
            }
            if !self.boost_domains.is_empty() {
                return Err(format!("boost_domains: {only33} (seed 001)"));
            }
        }
        if self.deferred_tickle && self.tickle_on_wake == Some(false) {
            return Err(
                "deferred_tickle: defers the tickle that tickle_on_wake = false removes; \
                 leave tickle_on_wake on"
                    .into(),
            );
        }
        if let Some(b) = self.boost_slice_ms {
            if !(1..=V33_TSLICE_MS).contains(&b) {
                return Err(format!("boost_slice_ms: {b} must be in 1..=30 (ms)"));
            }
        }
        for (i, b) in self.boost_domains.iter().enumerate() {
            if b.domain.is_empty() {
                return Err(format!("boost_domains: entry {i} names no domain"));
            }
            if !(1..=10_000).contains(&b.limit_ms) {
                return Err(format!(
                    "boost_domains: limit_ms {} of {} must be in 1..=10000 (ms)",
                    b.limit_ms, b.domain
                ));
            }
            if !(1..=100).contains(&b.ratio_pct) {
                return Err(format!(
                    "boost_domains: ratio_pct {} of {} must be in 1..=100 (% of one CPU)",
                    b.ratio_pct, b.domain
                ));
            }
            if self.boost_domains[..i].iter().any(|o| o.domain == b.domain) {
                return Err(format!("boost_domains: {} is named twice", b.domain));
            }
        }
        Ok(())
    }

    /// The slice in ms (3.3: 30).
    pub fn tslice_ms(&self) -> u64 {
        self.tslice_ms.unwrap_or(V33_TSLICE_MS)
    }

    /// The ratelimit in µs as Xen applies it: 0 in 3.3; at most the tslice (boot clamp).
    pub fn ratelimit_us(&self) -> u64 {
        if !self.version.has_tslice_and_ratelimit() {
            return 0;
        }
        self.ratelimit_us
            .unwrap_or(1000)
            .min(self.tslice_ms() * 1000)
    }
}
