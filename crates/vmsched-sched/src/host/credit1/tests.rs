//! Unit tests of Credit1, one per rule of xen-schedulers.md §2 (and its Appendix A) and ERRATA
//! X7, X8, X10, X11, each named after its rule, in both eras where the rule differs.
//!
//! The helpers drive the policy on the Xen core through `vmsched_core::testkit::Harness`, with
//! the timer slop and entry latency at 0 so that slices and timers are exact. Timer key 0 is the
//! 4.20 accounting timer, key `1 + c` CPU c's ticker.

use super::*;
use vmsched_core::sched::{EntityParams, SchedCtx};
use vmsched_core::testkit::{flat, params, pinned, placed_on, smt_pairs, sockets, Harness};
use vmsched_core::time::{ms, us, SimTime};

mod accounting;
mod boost;
mod hotplug;
mod lifecycle;
mod options;
mod runqueue;
mod schedule;
mod steal;
mod tickle;

const V33: Credit1Version = Credit1Version::V3_3;
const V420: Credit1Version = Credit1Version::V4_20;

type H = Harness<Credit1Sched>;

/// Parameters of `version` with exact timers.
fn exact(version: Credit1Version) -> Credit1Params {
    Credit1Params {
        version,
        timer_slop_ns: Some(0),
        timer_entry_ns: Some(0),
        ..Default::default()
    }
}

fn harness(p: Credit1Params, topo: Vec<CpuTopo>, ents: Vec<EntityParams>) -> H {
    let nd = ents.iter().map(|e| e.group + 1).max().unwrap_or(0);
    let s = Credit1::sched(p, &topo, nd);
    Harness::with_topology(s, topo, ents)
}

/// `n` vCPUs (one domain each) pinned to CPU 0 of a one-CPU machine.
fn one_cpu(v: Credit1Version, n: usize) -> H {
    harness(exact(v), flat(1), (0..n).map(|i| pinned(i, 1, 0)).collect())
}

/// `n` vCPUs (one domain each) free on `ncpus` flat CPUs, vCPU i first on CPU i % ncpus.
fn free(v: Credit1Version, ncpus: usize, n: usize) -> H {
    harness(
        exact(v),
        flat(ncpus),
        (0..n).map(|i| params(i, ncpus)).collect(),
    )
}

fn ops(h: &H) -> &Credit1 {
    &h.sched.ops
}

fn ops_mut(h: &mut H) -> &mut Credit1 {
    &mut h.sched.ops
}

fn unit(h: &H, e: u32) -> &Unit {
    &h.sched.ops.units[e as usize]
}

fn credit(h: &H, e: u32) -> i64 {
    unit(h, e).credit
}

fn pri(h: &H, e: u32) -> Pri {
    unit(h, e).pri
}

fn set_credit(h: &mut H, e: u32, c: i64) {
    h.sched.ops.units[e as usize].credit = c;
}

fn set_pri(h: &mut H, e: u32, p: Pri) {
    h.sched.ops.units[e as usize].pri = p;
}

fn runq(h: &H, cpu: u32) -> Vec<u32> {
    ops(h).pcpus[cpu as usize]
        .runq
        .iter()
        .map(|e| e.0)
        .collect()
}

/// Wakes `e` as a timer would on its own CPU.
fn wake(h: &mut H, e: u32) {
    h.wake(e, WakeInfo::default());
}

/// Wakes `e` from a wake running on CPU `waker`.
fn wake_from(h: &mut H, e: u32, waker: u32) {
    h.wake(
        e,
        WakeInfo {
            waker_cpu: Some(CpuId(waker)),
            ..Default::default()
        },
    );
}

/// Fires CPU `cpu`'s ticker.
fn tick(h: &mut H, cpu: u32) {
    h.fire_timer(1 + cpu);
}

/// Runs `f` on the policy with a context of the harness's level.
fn with_ctx<R>(h: &mut H, f: impl FnOnce(&mut Credit1, &mut XenCtx) -> R) -> R {
    let mut ctx = SchedCtx::new(h.now, h.clock, &h.cpus, &h.ents, &mut h.requests);
    h.sched.with_ops(&mut ctx, f)
}

/// Runs one accounting pass (`csched_acct`: 4.20's master timer, 3.3's master tick) alone.
fn acct(h: &mut H) {
    with_ctx(h, |ops, x| ops.acct(x));
}

/// Makes `e` active (as a tick that found it running would).
fn activate(h: &mut H, e: u32) {
    ops_mut(h).acct_start(EntityId(e));
}

/// The timer requests since the last call, as (key, deadline).
fn timers(h: &mut H) -> Vec<(u32, Option<SimTime>)> {
    h.take_timers()
}

/// Wakes every vCPU in order and lets the CPUs settle (the 4.20 first wake is not boosted:
/// insertion picks a CPU, which sets MIGRATING).
fn wake_all(h: &mut H) {
    for e in 0..h.ents.len() as u32 {
        wake(h, e);
        h.pump();
    }
}

#[test]
fn priorities_are_xens() {
    assert_eq!((PRI_BOOST, PRI_UNDER, PRI_OVER, PRI_IDLE), (0, -1, -2, -64));
}

#[test]
fn a_new_vcpu_starts_under_with_no_credit_and_inactive() {
    for v in [V33, V420] {
        let h = one_cpu(v, 1);
        let u = unit(&h, 0);
        assert_eq!((u.credit, u.pri, u.active), (0, PRI_UNDER, false), "{v:?}");
    }
}

#[test]
fn tickers_start_at_build_and_the_4_20_accounting_timer_every_tslice() {
    let mut h = free(V420, 2, 1);
    let mut t = timers(&mut h);
    t.sort();
    assert_eq!(
        t,
        vec![(0, Some(ms(30))), (1, Some(ms(10))), (2, Some(ms(10)))]
    );
    let mut h = free(V33, 2, 1);
    let mut t = timers(&mut h);
    t.sort();
    assert_eq!(
        t,
        vec![(1, Some(ms(10))), (2, Some(ms(10)))],
        "3.3: no master timer"
    );
}
