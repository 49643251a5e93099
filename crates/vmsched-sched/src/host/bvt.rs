//! Xen's BVT scheduler (Borrowed Virtual Time), historic: Xen 2.0 and 3.0's default scheduler,
//! removed in 3.1 (replaced by Credit). Modelled as in Xen 3.0 (`xen/common/sched_bvt.c`, tag
//! RELEASE-3.0.0), with seed 004's thesis for the prose. Facts only; the code is our own.
//!
//! # What it models
//!
//! Every vCPU has an *actual virtual time* (`avt`) that advances while it runs: by the domain's
//! `mcu_advance` (the inverse of its weight) for every started *minimum charging unit* of 100 µs
//! (`calc_avt`: the run time is rounded up to whole MCUs). Its *effective virtual time*
//! (`evt`) is `avt`, minus the domain's `warp_value` while the domain is *warped* (borrowing
//! virtual time, for latency-sensitive domains). Each CPU has its own runqueue (which also holds
//! its idle vCPU at virtual time ~0) and runs the vCPU of least `evt`; a vCPU stays on the CPU
//! it was created on (no load balancing). The CPU's *scheduler virtual time* (`svt`) is the
//! least `avt` on its runqueue; a vCPU waking behind it is brought up to it, so sleeping earns
//! no credit.
//!
//! Slices (`bvt_do_schedule`): the next vCPU runs `(evt of the runner-up − its evt) /
//! mcu_advance + ctx_allow`, where `ctx_allow` (5 ms, `xm sched-bvt-ctxallow`) is the context
//! switch allowance; with nobody else runnable 10 × `ctx_allow`; the idle vCPU `ctx_allow`.
//! As written upstream the virtual-time difference divided by `mcu_advance` is a number of MCUs
//! added to a time in ns, so in practice every slice is `ctx_allow` plus a few ns; the model
//! keeps that. A waking vCPU (`bvt_wake`) preempts at once when its `evt` is at or below the
//! runner's (or the CPU idles); otherwise it pulls the CPU's slice timer in to the runner's
//! last switch-in + that same difference + `ctx_allow`, if that is earlier.
//!
//! Warping: a domain with `warpback` is warped; when one of its vCPUs is picked, a *warp
//! limit* timer (`warpl`) is armed, and when it fires the domain is unwarped for `warpu`, after
//! which the *unwarp* timer warps it again. Virtual times are 32-bit and wrap as upstream does
//! (every value on a CPU is lowered by 0xe0000000 when its `svt` passes 0xf0000000).
//!
//! # Parameters
//!
//! `[host]`: `ctx_allow_us` (5000; Xen clamps what it reports at 10 µs: 10..=1000000 here),
//! and `domains`, a list of `{ domain, mcu_advance, warpback, warp_value, warpl_ms, warpu_ms }`
//! (`xm sched-bvt DOM MCUADV WARPBACK WARPVALUE WARPL WARPU`), defaults 10, off, 0, 2000, 1000;
//! `mcu_advance` must be positive (`bvt_adjdom`). A domain not listed keeps the defaults.
//!
//! # Engine mapping
//!
//! BVT implements the Xen ops ([`XenOps`]) on the Xen core (`host/xen_core.rs`), which is
//! 4.20's: the 3.0 core's differences (no timer slop, `lastschd` set at every `schedule()`)
//! are the policy's, which sets `lastschd` itself. `insert_unit` is `bvt_alloc_task` +
//! `bvt_add_task` (with the domain's `bvt_adjdom`), `do_schedule` is `bvt_do_schedule`, `wake`
//! is `bvt_wake`, `sleep` is `bvt_sleep`. The policy's timers: key `c < ncpus` is CPU `c`'s
//! pulled-in slice timer (it reschedules the CPU), then per domain its warp and unwarp timers.
//!
//! # Simplifications
//!
//! * One pool; no CPU hot-plug or run-time parameter change (refused); no trace records.
//! * A vCPU's CPU never changes (3.0 moved vCPUs only on an affinity change).

use crate::host::xen_core::{XenCore, XenCtx, XenOps, TIMER_ENTRY_DEFAULT_NS};
use vmsched_core::cpuset::{CpuSet, MAX_CPUS};
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{Pick, WakeInfo};
use vmsched_core::time::Nanos;

/// Minimum charging unit (ns).
pub const MCU: i64 = 100_000;
/// Default `mcu_advance`.
pub const MCU_ADVANCE: u32 = 10;
/// The idle vCPU's virtual times.
const IDLE_VT: u32 = u32::MAX;

/// One domain's BVT parameters (`xm sched-bvt`).
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct BvtDomain {
    /// The `[[domain]]` name.
    pub domain: String,
    /// Virtual time per MCU run: the inverse of the weight (default 10).
    #[serde(default = "d_mcu")]
    pub mcu_advance: u32,
    /// Warped (borrowing virtual time).
    #[serde(default)]
    pub warpback: bool,
    /// Virtual time borrowed while warped.
    #[serde(default)]
    pub warp_value: i32,
    /// Warp limit (ms): how long a warped vCPU may run warped; 0 = no limit.
    #[serde(default = "d_warpl")]
    pub warpl_ms: u64,
    /// Unwarp requirement (ms): how long the domain stays unwarped after its limit.
    #[serde(default = "d_warpu")]
    pub warpu_ms: u64,
}

fn d_mcu() -> u32 {
    MCU_ADVANCE
}
fn d_warpl() -> u64 {
    2000
}
fn d_warpu() -> u64 {
    1000
}

/// `[host] scheduler = "bvt"`.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BvtParams {
    /// Context switch allowance (µs; `xm sched-bvt-ctxallow`).
    pub ctx_allow_us: u64,
    /// Per-domain parameters.
    pub domains: Vec<BvtDomain>,
    /// Timer entry latency of the Xen core (ns); 0 = exact timers.
    pub timer_entry_ns: Nanos,
}

impl Default for BvtParams {
    fn default() -> Self {
        BvtParams {
            ctx_allow_us: 5000,
            domains: Vec::new(),
            timer_entry_ns: TIMER_ENTRY_DEFAULT_NS,
        }
    }
}

impl BvtParams {
    /// Checks the fields, naming the one at fault (domain names are checked with the scenario).
    pub fn validate(&self) -> Result<(), String> {
        let c = self.ctx_allow_us;
        if !(10..=1_000_000).contains(&c) {
            return Err(format!("ctx_allow_us: {c} must be in 10..=1000000 (µs)"));
        }
        let t = self.timer_entry_ns;
        if t > 1_000_000 {
            return Err(format!("timer_entry_ns: {t} must be in 0..=1000000 (ns)"));
        }
        for (i, d) in self.domains.iter().enumerate() {
            if d.mcu_advance == 0 {
                return Err(format!(
                    "domains.{i}.mcu_advance: must be positive (bvt_adjdom refuses 0)"
                ));
            }
            for (f, v) in [("warpl_ms", d.warpl_ms), ("warpu_ms", d.warpu_ms)] {
                if v > 1_000_000 {
                    return Err(format!("domains.{i}.{f}: {v} must be in 0..=1000000 (ms)"));
                }
            }
        }
        Ok(())
    }
}

/// Per-domain state (Xen `struct bvt_dom_info`).
#[derive(Clone, Debug)]
struct Dom {
    mcu_advance: u32,
    warpback: bool,
    warp: bool,
    warp_value: i32,
    warpl: i64,
    warpu: i64,
    /// vCPU 0 (whose CPU the warp timers reschedule).
    first: Option<EntityId>,
}

impl Default for Dom {
    fn default() -> Self {
        Dom {
            mcu_advance: MCU_ADVANCE,
            warpback: false,
            warp: false,
            warp_value: 0,
            warpl: 2000 * 1_000_000,
            warpu: 1000 * 1_000_000,
            first: None,
        }
    }
}

/// Per-vCPU state (Xen `struct bvt_vcpu_info`, and `lastschd`).
#[derive(Clone, Debug)]
struct Unit {
    processor: CpuId,
    dom: usize,
    avt: u32,
    evt: u32,
    lastschd: i64,
    on_runq: bool,
}

/// A runqueue entry: a vCPU, or the CPU's idle vCPU.
type Entry = Option<EntityId>;

/// Per-CPU state (Xen `struct bvt_cpu_info` and the `s_timer`'s expiry).
#[derive(Clone, Debug)]
struct Pcpu {
    runq: Vec<Entry>,
    svt: u32,
    s_timer: i64,
}

/// BVT as the engine runs it: the policy on the Xen core.
pub type BvtSched = XenCore<Bvt>;

/// The BVT scheduler of one pool holding every CPU of the level.
pub struct Bvt {
    ctx_allow: i64,
    online: CpuSet,
    pcpus: Vec<Pcpu>,
    units: Vec<Unit>,
    doms: Vec<Dom>,
}

impl Bvt {
    /// BVT over `ncpus` CPUs for `nr_domains` domains; `doms` gives (domain index, parameters)
    /// for the domains `[host] domains` lists.
    pub fn new(
        params: &BvtParams,
        ncpus: usize,
        nr_domains: usize,
        doms: &[(usize, BvtDomain)],
    ) -> Bvt {
        if let Err(e) = params.validate() {
            panic!("Bvt::new: invalid parameters: {e}");
        }
        assert!(
            (1..=MAX_CPUS).contains(&ncpus),
            "bvt: needs 1..={MAX_CPUS} CPUs"
        );
        let mut ds = vec![Dom::default(); nr_domains];
        for (i, d) in doms {
            let x = &mut ds[*i];
            x.mcu_advance = d.mcu_advance;
            x.warpback = d.warpback;
            x.warp = d.warpback;
            x.warp_value = d.warp_value;
            x.warpl = d.warpl_ms as i64 * 1_000_000;
            x.warpu = d.warpu_ms as i64 * 1_000_000;
        }
        let pcpu = Pcpu {
            // Xen: the idle vCPU is added at the runqueue's head at boot.
            runq: vec![None],
            svt: 0,
            s_timer: i64::MAX,
        };
        Bvt {
            ctx_allow: params.ctx_allow_us as i64 * 1000,
            online: CpuSet::first_n(ncpus),
            pcpus: vec![pcpu; ncpus],
            units: Vec::new(),
            doms: ds,
        }
    }

    /// BVT on the Xen core (no timer slop: Xen 3.0 had none).
    pub fn sched(
        params: &BvtParams,
        ncpus: usize,
        nr_domains: usize,
        doms: &[(usize, BvtDomain)],
    ) -> BvtSched {
        XenCore::with_timers(
            Bvt::new(params, ncpus, nr_domains, doms),
            0,
            params.timer_entry_ns,
        )
    }

    /// The vCPU's (avt, evt).
    pub fn vt(&self, e: EntityId) -> (u32, u32) {
        (self.units[e.idx()].avt, self.units[e.idx()].evt)
    }

    /// CPU `c`'s scheduler virtual time.
    pub fn svt(&self, c: CpuId) -> u32 {
        self.pcpus[c.idx()].svt
    }

    fn ncpus(&self) -> u32 {
        self.pcpus.len() as u32
    }

    /// Xen: calc_avt
    fn calc_avt(&self, e: EntityId, now: i64) -> u32 {
        let u = &self.units[e.idx()];
        let ranfor = (now - u.lastschd) as u32 as i64;
        let mcus = ((ranfor + MCU - 1) / MCU) as u32;
        u.avt
            .wrapping_add(mcus.wrapping_mul(self.doms[u.dom].mcu_advance))
    }

    /// Xen: calc_evt
    fn calc_evt(&self, e: EntityId, avt: u32) -> u32 {
        let d = &self.doms[self.units[e.idx()].dom];
        if d.warp {
            avt.wrapping_sub(d.warp_value as u32)
        } else {
            avt
        }
    }

    fn entry_vt(&self, x: Entry) -> (u32, u32) {
        x.map_or((IDLE_VT, IDLE_VT), |e| {
            let u = &self.units[e.idx()];
            (u.avt, u.evt)
        })
    }

    fn del_from_runq(&mut self, e: EntityId) {
        let c = self.units[e.idx()].processor.idx();
        let q = &mut self.pcpus[c].runq;
        let i = q
            .iter()
            .position(|x| *x == Some(e))
            .expect("on its runqueue");
        q.remove(i);
        self.units[e.idx()].on_runq = false;
    }

    fn warp_key(&self, d: usize) -> u32 {
        self.ncpus() + 2 * d as u32
    }
}

impl XenOps for Bvt {
    fn name(&self) -> &'static str {
        "bvt"
    }

    /// Per CPU its pulled-in slice timer, per domain its warp and unwarp timers.
    fn nr_timers(&self) -> u32 {
        self.ncpus() + 2 * self.doms.len() as u32
    }

    /// Xen: bvt_alloc_task + bvt_add_task: the vCPU starts at its CPU's `svt`.
    fn insert_unit(&mut self, x: &mut XenCtx, e: EntityId) {
        assert_eq!(e.idx(), self.units.len(), "bvt: vCPUs come in id order");
        let p = &x.ent(e).params;
        let (cpu, d) = (p.initial_cpu, p.group as usize);
        assert!(
            self.online.contains(cpu),
            "bvt: {} starts on no online CPU",
            p.name
        );
        assert!(d < self.doms.len(), "bvt: {} names domain {d}", p.name);
        let svt = self.pcpus[cpu.idx()].svt;
        self.units.push(Unit {
            processor: cpu,
            dom: d,
            avt: svt,
            evt: svt,
            lastschd: 0,
            on_runq: false,
        });
        if self.doms[d].first.is_none() {
            self.doms[d].first = Some(e);
        }
        let n = self.units.len() + 1;
        for pc in &mut self.pcpus {
            pc.runq.reserve(n.saturating_sub(pc.runq.len()));
        }
    }

    /// Xen: bvt_wake
    fn wake(&mut self, x: &mut XenCtx, e: EntityId, _info: WakeInfo) {
        if self.units[e.idx()].on_runq {
            return;
        }
        let now = x.now() as i64;
        let cpu = self.units[e.idx()].processor;
        let c = cpu.idx();
        self.pcpus[c].runq.insert(0, Some(e));
        self.units[e.idx()].on_runq = true;
        let svt = self.pcpus[c].svt;
        if self.units[e.idx()].avt < svt {
            self.units[e.idx()].avt = svt;
        }
        let evt = self.calc_evt(e, self.units[e.idx()].avt);
        self.units[e.idx()].evt = evt;
        let Some(curr) = x.cpu(cpu).curr else {
            return x.resched(cpu);
        };
        let curr_evt = self.calc_evt(curr, self.calc_avt(curr, now));
        if evt <= curr_evt {
            return x.resched(cpu);
        }
        let adv = self.doms[self.units[curr.idx()].dom].mcu_advance;
        // As upstream: a number of MCUs added to a time in ns.
        let r_time = self.units[curr.idx()].lastschd
            + (evt.wrapping_sub(curr_evt) / adv) as i64
            + self.ctx_allow;
        if self.pcpus[c].s_timer > r_time {
            self.pcpus[c].s_timer = r_time;
            x.set_timer(c as u32, Some(r_time.max(now) as u64));
        }
    }

    /// Xen: bvt_sleep (domain pause)
    fn sleep(&mut self, x: &mut XenCtx, e: EntityId) {
        let cpu = self.units[e.idx()].processor;
        if x.cpu(cpu).curr == Some(e) {
            x.resched(cpu);
        } else if self.units[e.idx()].on_runq {
            self.del_from_runq(e);
        }
    }

    /// BVT has no yield hook: the core reschedules.
    fn yield_(&mut self, _x: &mut XenCtx, _e: EntityId) {}

    /// Xen: bvt_do_schedule (with the 3.0 core's `lastschd` and `s_timer`).
    fn do_schedule(&mut self, x: &mut XenCtx, cpu: CpuId) -> Pick {
        let now = x.now() as i64;
        let c = cpu.idx();
        x.set_timer(c as u32, None);
        if let Some(prev) = x.cpu(cpu).curr {
            let avt = self.calc_avt(prev, now);
            let evt = self.calc_evt(prev, avt);
            let u = &mut self.units[prev.idx()];
            (u.avt, u.evt) = (avt, evt);
            let d = u.dom;
            if self.doms[d].warpback && self.doms[d].warpl > 0 {
                x.set_timer(self.warp_key(d), None);
            }
            if self.units[prev.idx()].on_runq {
                self.del_from_runq(prev);
            }
            if x.unit_runnable(prev) {
                self.pcpus[c].runq.push(Some(prev));
                self.units[prev.idx()].on_runq = true;
            }
        }
        // The least evt first (the first of equals), the runner-up after it.
        let (mut next, mut next_evt): (Entry, u32) = (None, IDLE_VT);
        let (mut prime, mut prime_evt): (Option<Entry>, u32) = (None, IDLE_VT);
        let mut min_avt = IDLE_VT;
        for &p in &self.pcpus[c].runq {
            let (avt, evt) = self.entry_vt(p);
            if evt < next_evt {
                (prime, prime_evt) = (Some(next), next_evt);
                (next, next_evt) = (p, evt);
            } else if prime_evt == IDLE_VT || evt < prime_evt {
                (prime, prime_evt) = (Some(p), evt);
            }
            min_avt = min_avt.min(avt);
        }
        if let Some(n) = next {
            let d = self.units[n.idx()].dom;
            if self.doms[d].warp && self.doms[d].warpl > 0 {
                x.set_timer(self.warp_key(d), Some((now + self.doms[d].warpl) as u64));
            }
        }
        if min_avt != IDLE_VT {
            self.pcpus[c].svt = min_avt;
        }
        if self.pcpus[c].svt >= 0xf000_0000 {
            for u in self.units.iter_mut().filter(|u| u.processor == cpu) {
                u.evt = u.evt.wrapping_sub(0xe000_0000);
                u.avt = u.avt.wrapping_sub(0xe000_0000);
            }
            self.pcpus[c].svt -= 0xe000_0000;
        }
        let r_time = match (next, prime) {
            (None, _) => self.ctx_allow,
            (Some(_), None | Some(None)) => 10 * self.ctx_allow,
            (Some(n), Some(Some(_))) => {
                let adv = self.doms[self.units[n.idx()].dom].mcu_advance;
                (prime_evt.wrapping_sub(next_evt) / adv) as i64 + self.ctx_allow
            }
        };
        if let Some(n) = next {
            self.units[n.idx()].lastschd = now;
        }
        self.pcpus[c].s_timer = now + r_time;
        Pick {
            next,
            slice: Some(r_time as u64),
        }
    }

    /// Xen 3.0 moves no vCPU by itself; the core asks only on CPU hot-plug, which is refused.
    fn pick_resource(&mut self, _x: &mut XenCtx, e: EntityId) -> CpuId {
        self.units[e.idx()].processor
    }

    fn migrate(&mut self, _x: &mut XenCtx, e: EntityId, cpu: CpuId) {
        self.units[e.idx()].processor = cpu;
    }

    /// Key `c < ncpus`: CPU `c`'s pulled-in slice timer. Then per domain: warp_timer_fn (the
    /// warp limit reached: unwarped, the unwarp timer armed) and unwarp_timer_fn (warped again).
    fn on_timer(&mut self, x: &mut XenCtx, key: u32) {
        let n = self.ncpus();
        if key < n {
            return x.resched(CpuId(key));
        }
        let d = ((key - n) / 2) as usize;
        let Some(first) = self.doms[d].first else {
            return;
        };
        let cpu = self.units[first.idx()].processor;
        let now = x.now() as i64;
        if (key - n).is_multiple_of(2) {
            self.doms[d].warp = false;
            if self.doms[d].warpu == 0 {
                self.doms[d].warpback = false;
                x.resched(cpu);
            }
            x.set_timer(key + 1, Some((now + self.doms[d].warpu) as u64));
        } else if self.doms[d].warpback {
            self.doms[d].warp = true;
            x.resched(cpu);
        }
    }

    /// The vCPU's effective virtual time.
    fn probe(&self, e: EntityId) -> Option<i64> {
        self.units.get(e.idx()).map(|u| u.evt as i64)
    }

    fn processor(&self, e: EntityId) -> CpuId {
        self.units[e.idx()].processor
    }
}

/// The scenario checks of BVT: `[host] domains` name domains of the scenario, each once; a
/// domain's `cap` (BVT has none) and a `weight` other than 256 (BVT's weight is
/// `mcu_advance`, its inverse, in `[host] domains`) are refused. Returns (field, message).
pub fn check_layout<G>(
    p: &BvtParams,
    domains: &[vmsched_core::scenario::DomainConfig<G>],
) -> Result<(), (String, String)> {
    for (i, b) in p.domains.iter().enumerate() {
        if !domains.iter().any(|d| d.name == b.domain) {
            return Err((
                format!("host.domains.{i}.domain"),
                format!("no [[domain]] is named {:?}", b.domain),
            ));
        }
        if p.domains[..i].iter().any(|o| o.domain == b.domain) {
            return Err((
                format!("host.domains.{i}.domain"),
                format!("{:?} is listed twice", b.domain),
            ));
        }
    }
    for (i, d) in domains.iter().enumerate() {
        if d.cap != 0 {
            return Err((format!("domain.{i}.cap"), "BVT has no caps".into()));
        }
        if d.weight != 256 {
            return Err((
                format!("domain.{i}.weight"),
                "BVT's weight is its inverse, `mcu_advance`, in [host] domains (xm sched-bvt)"
                    .into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
