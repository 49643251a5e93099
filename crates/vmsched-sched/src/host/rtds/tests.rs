//! Unit tests of RTDS, one per rule of xen-schedulers.md §4 (and worked example A7), plus the
//! property tests: a vCPU never gets more than its budget in a period, and a schedulable set
//! meets every deadline.
//!
//! Hook-level tests use exact timers (`timer_slop_ns = 0`, `timer_entry_ns = 0`) so that
//! slices and deadlines are the rule's own numbers.

use super::*;
use vmsched_core::sched::{EntityParams, Request, SchedCtx};
use vmsched_core::testkit::{flat, params, pinned, Harness};
use vmsched_core::time::{ms, us, SimTime};

mod deadlines;
mod picking;
mod properties;
mod tickle;

const MS: i64 = 1_000_000;

/// RTDS on the Xen core with exact timers.
fn exact() -> RtdsParams {
    RtdsParams {
        timer_slop_ns: 0,
        timer_entry_ns: 0,
    }
}

fn harness(ncpus: usize, ents: Vec<EntityParams>) -> Harness<RtdsSched> {
    Harness::new(Rtds::sched(exact(), &flat(ncpus)), ncpus, ents)
}

/// `params(i, ncpus)` with budget and period (µs) and extratime.
fn rt(i: usize, ncpus: usize, budget_us: u64, period_us: u64, extra: bool) -> EntityParams {
    let mut p = params(i, ncpus);
    p.xen.budget_us = budget_us;
    p.xen.period_us = period_us;
    p.xen.extratime = extra;
    p
}

/// `rt` hard-pinned to `cpu`.
fn rt_on(
    i: usize,
    ncpus: usize,
    cpu: u32,
    budget_us: u64,
    period_us: u64,
    extra: bool,
) -> EntityParams {
    let mut p = pinned(i, ncpus, cpu);
    p.xen.budget_us = budget_us;
    p.xen.period_us = period_us;
    p.xen.extratime = extra;
    p
}

/// Calls `f` on the policy with a context of the harness's level (a hook called directly).
fn ops<R>(h: &mut Harness<RtdsSched>, f: impl FnOnce(&mut Rtds, &mut XenCtx) -> R) -> R {
    let mut ctx = SchedCtx::new(h.now, h.clock, &h.cpus, &h.ents, &mut h.requests);
    h.sched.with_ops(&mut ctx, f)
}

fn wake(h: &mut Harness<RtdsSched>, e: u32) {
    h.wake(e, WakeInfo::default());
}

fn unit(h: &Harness<RtdsSched>, e: u32) -> &Unit {
    &h.sched.ops.units[e as usize]
}

fn runq(h: &Harness<RtdsSched>) -> Vec<u32> {
    h.sched.ops.runq.iter().map(|e| e.0).collect()
}

fn depletedq(h: &Harness<RtdsSched>) -> Vec<u32> {
    h.sched.ops.depletedq.iter().map(|e| e.0).collect()
}

fn replq(h: &Harness<RtdsSched>) -> Vec<u32> {
    h.sched.ops.replq.iter().map(|e| e.0).collect()
}

/// The replenishment timer as last armed.
fn repl_timer(h: &Harness<RtdsSched>) -> Option<SimTime> {
    h.sched_timers[REPL_TIMER as usize]
}

/// Fires the replenishment timer at its deadline (advancing to it); returns the CPUs it
/// tickled, which are not rescheduled, and records the timer it re-armed.
fn fire_repl(h: &mut Harness<RtdsSched>) -> Vec<u32> {
    let at = repl_timer(h).expect("the replenishment timer is armed");
    assert!(at >= h.now);
    h.advance(at - h.now);
    h.sched_timers[REPL_TIMER as usize] = None;
    h.fire_timer(REPL_TIMER);
    let tickled = h.take_resched();
    h.pump();
    tickled
}

// ------------------------------------------------------------------------------------------
// Parameters
// ------------------------------------------------------------------------------------------

/// §4.1: a vCPU whose domain gives no parameter has Xen's defaults: budget 4 ms, period
/// 10 ms, extratime on.
#[test]
fn defaults_are_4ms_of_10ms_with_extratime() {
    let mut p = params(0, 1);
    p.xen = XenAttr::default();
    let h = harness(1, vec![p]);
    let u = unit(&h, 0);
    assert_eq!((u.budget, u.period, u.extratime), (4 * MS, 10 * MS, true));
    let cfg = RtdsParams::default();
    let d = crate::host::DomainSchedParams {
        weight: 256,
        cap: 0,
        budget_us: None,
        period_us: None,
        extratime: None,
    };
    let a = crate::host::HostConfig::vcpu_attr(&cfg, &d);
    assert_eq!(
        (a.budget_us, a.period_us, a.extratime),
        (4000, 10_000, true)
    );
    let d = crate::host::DomainSchedParams {
        budget_us: Some(500),
        period_us: Some(2000),
        extratime: Some(false),
        ..d
    };
    let a = crate::host::HostConfig::vcpu_attr(&cfg, &d);
    assert_eq!((a.budget_us, a.period_us, a.extratime), (500, 2000, false));
}

/// §4.1: `xl sched-rtds -v` refuses a period below 10 µs or above what the domctl carries, a
/// budget below 10 µs and a budget above the period; each error names its field.
#[test]
fn domain_parameters_are_validated_as_xl_does() {
    assert!(validate_domain(None, None).is_ok());
    assert!(validate_domain(Some(10), Some(10)).is_ok());
    assert_eq!(
        validate_domain(Some(9), Some(9)).unwrap_err().0,
        "period_us"
    );
    assert_eq!(
        validate_domain(Some(MAX_PERIOD_US + 1), None)
            .unwrap_err()
            .0,
        "period_us"
    );
    assert_eq!(validate_domain(None, Some(9)).unwrap_err().0, "budget_us");
    assert_eq!(
        validate_domain(Some(1000), Some(1001)).unwrap_err().0,
        "budget_us"
    );
    // The default budget (4 ms) does not fit a 1 ms period.
    assert_eq!(
        validate_domain(Some(1000), None).unwrap_err().0,
        "budget_us"
    );
    assert!(RtdsParams::default().validate().is_ok());
    let bad = RtdsParams {
        timer_entry_ns: 2_000_000,
        ..Default::default()
    };
    assert!(bad.validate().unwrap_err().starts_with("timer_entry_ns:"));
}

/// Whole scenario: the domain fields reach the vCPUs under an RTDS host, bad ones are refused
/// with the field's path, and another host refuses them.
#[test]
fn scenario_fields_are_checked_with_their_path() {
    let src = |host: &str, extra: &str| {
        format!(
            "[machine]\npcpus = 1\n[host]\nscheduler = \"{host}\"\n[[domain]]\nname = \"a\"\n\
             vcpus = 1\n{extra}\n[domain.sched]\nscheduler = \"cfs\"\n"
        )
    };
    let ok = crate::build::load(
        "t.toml",
        &src("rtds", "budget_us = 500\nperiod_us = 1000"),
        &[],
    );
    assert!(ok.is_ok(), "{:?}", ok.err());
    let e = crate::build::load(
        "t.toml",
        &src("rtds", "budget_us = 2000\nperiod_us = 1000"),
        &[],
    )
    .unwrap_err();
    assert_eq!(e.field, "domain.0.budget_us", "{e}");
    let e = crate::build::load("t.toml", &src("rtds", "period_us = 5"), &[]).unwrap_err();
    assert_eq!(e.field, "domain.0.period_us", "{e}");
    let e = crate::build::load("t.toml", &src("credit2", "extratime = false"), &[]).unwrap_err();
    assert_eq!(e.field, "domain.0.extratime", "{e}");
}

// ------------------------------------------------------------------------------------------
// Sleep, context saved, removal
// ------------------------------------------------------------------------------------------

/// §4.9: a paused (slept) queued vCPU leaves the runqueue and `replq`; a running one makes
/// its CPU reschedule, and after the switch it is on no queue and has no replenishment event.
#[test]
fn sleep_dequeues_or_reschedules() {
    let ents = (0..2)
        .map(|i| rt_on(i, 1, 0, 2000, 10_000, false))
        .collect();
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    assert_eq!(runq(&h), vec![1]);
    h.set_paused(1, true);
    assert!(runq(&h).is_empty());
    assert_eq!(replq(&h), vec![0]);
    h.set_paused(0, true);
    assert_eq!(
        h.take_resched(),
        vec![0],
        "a running vCPU's CPU reschedules"
    );
    h.schedule(0);
    h.pump();
    assert_eq!(h.curr(0), None);
    assert!(
        replq(&h).is_empty(),
        "no replenishment for a vCPU that cannot run"
    );
    assert_eq!(repl_timer(&h), None, "the timer stops with an empty replq");
    // Unpaused, both come back.
    h.set_paused(0, false);
    h.set_paused(1, false);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    assert_eq!(replq(&h).len(), 2);
}

/// §4.9: `context_saved` re-queues a vCPU switched out while runnable and drops the
/// replenishment event of one that blocked.
#[test]
fn context_saved_requeues_the_runnable_and_forgets_the_blocked() {
    let ents = vec![
        rt_on(0, 1, 0, 2000, 10_000, false),
        rt_on(1, 1, 0, 1000, 5_000, false),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    // e1 (deadline 5 ms) beats e0 (10 ms): it preempts, e0 is queued at context_saved.
    wake(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(1));
    assert_eq!(runq(&h), vec![0]);
    h.advance(us(300));
    h.block(1);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    assert_eq!(
        replq(&h),
        vec![0],
        "the blocked vCPU has no replenishment event"
    );
    assert_eq!(repl_timer(&h), Some(ms(10)));
}

/// Removal (domain destroyed): the vCPU leaves its queue and `replq`.
#[test]
fn remove_unit_leaves_every_queue() {
    let ents = (0..2)
        .map(|i| rt_on(i, 1, 0, 2000, 10_000, false))
        .collect();
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    h.set_paused(1, true);
    h.remove(1);
    h.pump();
    assert!(runq(&h).is_empty() && depletedq(&h).is_empty());
    assert_eq!(replq(&h), vec![0]);
}

/// Yield: RTDS has no yield hook; a yield reschedules, and a vCPU that still strictly beats
/// every queued one keeps its CPU.
#[test]
fn yield_only_reschedules() {
    let ents = vec![
        rt_on(0, 1, 0, 2000, 5_000, false),
        rt_on(1, 1, 0, 2000, 10_000, false),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    h.advance(us(500));
    let pick = h.yield_(0);
    assert_eq!(
        pick.next,
        Some(EntityId(0)),
        "earlier deadline: keeps its CPU"
    );
    assert_eq!(pick.slice, Some(us(1500)), "the budget left");
}

/// `adjust`: the domain's new budget and period apply from the vCPU's next replenishment; the
/// current deadline and budget stay.
#[test]
fn adjust_applies_at_the_next_replenishment() {
    let mut h = harness(1, vec![rt_on(0, 1, 0, 2000, 10_000, false)]);
    wake(&mut h, 0);
    h.pump();
    h.advance(ms(1));
    h.ents[0].params.xen.budget_us = 3000;
    h.ents[0].params.xen.period_us = 4000;
    h.adjust(0);
    h.pump();
    let u = unit(&h, 0);
    assert_eq!((u.cur_deadline, u.cur_budget), (10 * MS, 2 * MS));
    assert_eq!((u.budget, u.period), (3 * MS, 4 * MS));
    fire_repl(&mut h);
    let u = unit(&h, 0);
    assert_eq!((u.cur_deadline, u.cur_budget), (14 * MS, 3 * MS));
    // Requests were only reschedules and the timer.
    assert!(h
        .requests
        .iter()
        .all(|r| matches!(r, Request::Resched(_) | Request::Timer(..))));
}
