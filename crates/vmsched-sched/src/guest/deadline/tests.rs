//! Unit tests of the deadline class (SCHED_DEADLINE) under CFS in the Linux core: one test per
//! rule of `linux-schedulers.md` §3.1 and §3.4 (and the upstream functions named in
//! `guest/deadline.rs`), driven through the engine's test [`Harness`]. Times are in ms.

use super::*;
use crate::guest::cfs::{Cfs, CfsParams, CfsSched};
use crate::guest::linux_core::ClassId;
use vmsched_core::sched::{EntityParams, WakeCause};
use vmsched_core::testkit::{flat, params, pinned, Harness};
use vmsched_core::time::{ms, us};

mod props;

fn harness_with(hrtick: bool, n: usize, ents: Vec<EntityParams>) -> Harness<CfsSched> {
    let t = flat(n);
    let mut p = CfsParams::default();
    p.deadline.hrtick = hrtick;
    Harness::with_topology(Cfs::sched(p, &t), t, ents)
}

/// A SCHED_DEADLINE task of runtime `q`, relative deadline `d` and period `p` (ns).
fn dl(mut e: EntityParams, q: u64, d: u64, p: u64) -> EntityParams {
    e.linux.policy = Policy::Deadline;
    e.linux.times = SchedTimes {
        sched_runtime_ns: q,
        sched_deadline_ns: d,
        sched_period_ns: p,
    };
    e
}

fn fifo(mut e: EntityParams, prio: u32) -> EntityParams {
    e.linux.policy = Policy::Fifo;
    e.linux.rt_priority = prio;
    e
}

fn fork(h: &mut Harness<CfsSched>, e: u32) {
    h.wake(e, WakeInfo::of(WakeCause::Fork));
}

fn class(h: &Harness<CfsSched>) -> &Dl {
    &h.sched.cls.dl
}

/// §3.1: SCHED_DEADLINE tasks belong to the deadline class.
#[test]
fn deadline_tasks_go_to_the_deadline_class() {
    let h = harness_with(
        false,
        1,
        vec![params(0, 1), dl(params(1, 1), ms(1), ms(10), ms(10))],
    );
    assert_eq!(h.sched.class_of(EntityId(0)), ClassId::Fair);
    assert_eq!(h.sched.class_of(EntityId(1)), ClassId::Deadline);
    assert!(class(&h).owns(EntityId(1)) && !class(&h).owns(EntityId(0)));
}

/// §3.4: EDF on absolute deadlines: of three tasks woken together, the earliest deadline runs
/// first, then the next one when it is throttled, and so on.
#[test]
fn edf_runs_the_earliest_absolute_deadline_first() {
    let mut h = harness_with(
        true,
        1,
        vec![
            dl(params(0, 1), ms(1), ms(10), ms(10)),
            dl(params(1, 1), ms(1), ms(5), ms(10)),
            dl(params(2, 1), ms(1), ms(20), ms(20)),
            params(3, 1),
        ],
    );
    for e in 0..4 {
        fork(&mut h, e);
    }
    h.pump();
    assert_eq!(h.curr(0), Some(1), "deadline 5 ms first");
    h.run_for(us(1500), us(100));
    assert_eq!(h.curr(0), Some(0), "then deadline 10 ms");
    h.run_for(ms(1), us(100));
    assert_eq!(h.curr(0), Some(2), "then deadline 20 ms");
    h.run_for(ms(1), us(100));
    assert_eq!(h.curr(0), Some(3), "then the fair task");
}

/// §3.4.2 with HRTICK: a CPU-bound deadline task runs exactly its runtime in every period and
/// is throttled (off the queue, the fair task runs) until the replenishment at the next period.
#[test]
fn throttled_until_the_replenishment_exactly_with_hrtick() {
    let mut h = harness_with(
        true,
        1,
        vec![dl(params(0, 1), ms(2), ms(10), ms(10)), params(1, 1)],
    );
    fork(&mut h, 0);
    fork(&mut h, 1);
    h.pump();
    let mut last = 0;
    for k in 0..20u64 {
        h.run_for(ms(2) - us(100), us(100));
        assert_eq!(h.curr(0), Some(0), "period {k}: runs its runtime");
        h.run_for(us(200), us(100));
        assert!(class(&h).throttled(EntityId(0)), "period {k}: throttled");
        assert_eq!(h.curr(0), Some(1), "period {k}: the fair task runs");
        h.run_for(ms(8) - us(100) - us(100), us(100));
        assert_eq!(h.curr(0), Some(1), "period {k}: still throttled");
        h.run_for(us(100), us(100));
        assert_eq!(h.curr(0), Some(0), "period {k}: replenished");
        assert_eq!(class(&h).deadline(EntityId(0)), ms(10) * (k + 2));
        assert_eq!(
            h.run_ns[0] - last,
            ms(2),
            "period {k}: its runtime, no more"
        );
        last = h.run_ns[0];
    }
}

/// §3.4.2 without HRTICK (upstream default): the runtime is enforced at the tick, so a period
/// may take up to a tick more, paid back by the next ones (the deadline moves by as many
/// periods as the overrun takes): over many periods the task never gets more than its
/// bandwidth plus one tick.
#[test]
fn without_hrtick_the_overrun_is_at_most_a_tick_and_paid_back() {
    let mut h = harness_with(
        false,
        1,
        vec![dl(params(0, 1), ms(3), ms(10), ms(10)), params(1, 1)],
    );
    fork(&mut h, 0);
    fork(&mut h, 1);
    let tick = ms(4);
    let mut prev = 0;
    for k in 1..=100u64 {
        h.run_for(ms(10), us(500));
        let ran = h.run_ns[0];
        assert!(ran - prev <= ms(3) + tick, "period {k}: {} ns", ran - prev);
        assert!(ran <= k * ms(3) + tick, "after {k} periods: {ran} ns");
        prev = ran;
    }
    assert!(h.run_ns[0] >= 100 * ms(3) - tick, "{}", h.run_ns[0]);
}

/// §3.4.3, `update_dl_entity`: a wake-up keeps the deadline and remaining runtime while
/// runtime / (deadline − now) ≤ Q/D; past that, or after the deadline, a new period
/// (deadline = now + D, runtime = Q).
#[test]
fn cbs_wake_up_rule() {
    let e = || vec![dl(params(0, 1), ms(2), ms(10), ms(10)), params(1, 1)];
    // Ran 1 ms of 2, slept; woken at 2 ms: 1 ms over 8 ms (0.125) fits 0.2.
    let mut h = harness_with(true, 1, e());
    fork(&mut h, 0);
    h.pump();
    h.run_for(ms(1), us(100));
    h.block(0);
    h.run_for(ms(1), us(100));
    h.wake(0, WakeInfo::default());
    h.pump();
    assert_eq!(class(&h).deadline(EntityId(0)), ms(10), "kept");
    assert_eq!(class(&h).runtime(EntityId(0)), ms(1) as i64, "kept");
    // Woken at 7 ms: 1 ms over 3 ms (0.33) exceeds 0.2: a new period from now.
    let mut h = harness_with(true, 1, e());
    fork(&mut h, 0);
    h.pump();
    h.run_for(ms(1), us(100));
    h.block(0);
    h.run_for(ms(6), us(100));
    h.wake(0, WakeInfo::default());
    h.pump();
    assert_eq!(class(&h).deadline(EntityId(0)), ms(17), "now + D");
    assert_eq!(class(&h).runtime(EntityId(0)), ms(2) as i64, "Q");
    // Woken after its deadline: a new period.
    let mut h = harness_with(true, 1, e());
    fork(&mut h, 0);
    h.pump();
    h.run_for(ms(1), us(100));
    h.block(0);
    h.run_for(ms(14), us(100));
    h.wake(0, WakeInfo::default());
    h.pump();
    assert_eq!(class(&h).deadline(EntityId(0)), ms(25));
    assert_eq!(class(&h).runtime(EntityId(0)), ms(2) as i64);
}

/// `update_dl_revised_wakeup`: a constrained task (D < P) woken before its deadline with too
/// much runtime left keeps its deadline, its runtime cut to (Q/D) × (deadline − now).
#[test]
fn constrained_tasks_take_the_revised_wake_up_rule() {
    let mut h = harness_with(
        true,
        1,
        vec![dl(params(0, 1), ms(2), ms(5), ms(10)), params(1, 1)],
    );
    fork(&mut h, 0);
    h.pump();
    h.run_for(ms(1), us(100));
    h.block(0);
    h.run_for(ms(2), us(100));
    h.wake(0, WakeInfo::default());
    h.pump();
    // 1 ms left over 2 ms (0.5) > 0.4: runtime = 0.4 × 2 ms (to 2^-20 precision).
    assert_eq!(class(&h).deadline(EntityId(0)), ms(5));
    let r = class(&h).runtime(EntityId(0));
    assert!(
        (ms(8) / 10 - 1000..=ms(8) / 10).contains(&(r as u64)),
        "{r}"
    );
}

/// A throttled task that blocks and wakes again stays throttled until its replenishment
/// timer (`enqueue_task_dl` leaves a throttled task to the timer).
#[test]
fn a_throttled_task_that_wakes_waits_for_its_timer() {
    let mut h = harness_with(
        false,
        1,
        vec![dl(params(0, 1), ms(2), ms(10), ms(10)), params(1, 1)],
    );
    fork(&mut h, 0);
    fork(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    // A tick after its runtime throttles it; it blocks before its CPU reschedules.
    h.advance(ms(2) + us(10));
    h.tick(0);
    assert!(class(&h).throttled(EntityId(0)));
    h.block(0);
    h.pump();
    assert_eq!(h.curr(0), Some(1));
    h.advance(ms(3));
    h.wake(0, WakeInfo::default());
    h.pump();
    assert_eq!(
        h.curr(0),
        Some(1),
        "still throttled: the fair task keeps the CPU"
    );
    assert!(class(&h).throttled(EntityId(0)));
    h.run_for(ms(5) - us(20), us(100));
    assert_eq!(h.curr(0), Some(1));
    h.run_for(us(20), us(10));
    assert_eq!(h.curr(0), Some(0), "replenished at 10 ms");
    assert_eq!(class(&h).deadline(EntityId(0)), ms(20));
}

/// `sched_yield` gives up the rest of the runtime until the next period.
#[test]
fn yield_sleeps_until_the_next_period() {
    let mut h = harness_with(
        true,
        1,
        vec![dl(params(0, 1), ms(2), ms(10), ms(10)), params(1, 1)],
    );
    fork(&mut h, 0);
    fork(&mut h, 1);
    h.pump();
    h.run_for(ms(1), us(100));
    h.yield_(0);
    h.pump();
    assert_eq!(h.curr(0), Some(1));
    assert!(class(&h).throttled(EntityId(0)));
    h.run_for(ms(9), us(100));
    assert_eq!(h.curr(0), Some(0));
    assert_eq!(
        class(&h).runtime(EntityId(0)),
        ms(2) as i64,
        "a full runtime"
    );
    assert_eq!(class(&h).deadline(EntityId(0)), ms(20));
}

/// §3.1: a deadline wakee preempts an RT task and a fair task at once.
#[test]
fn deadline_preempts_rt_and_fair() {
    let mut h = harness_with(
        false,
        1,
        vec![
            params(0, 1),
            fifo(params(1, 1), 99),
            dl(params(2, 1), ms(1), ms(10), ms(10)),
        ],
    );
    fork(&mut h, 0);
    h.pump();
    h.run_for(ms(1), us(100));
    fork(&mut h, 2);
    assert_eq!(h.take_resched(), vec![0], "the fair CPU is preempted");
    h.schedule(0);
    assert_eq!(h.curr(0), Some(2));
    h.block(2);
    fork(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(1), "FIFO 99 runs");
    h.run_for(ms(5), us(100));
    h.wake(2, WakeInfo::default());
    assert_eq!(h.take_resched(), vec![0], "FIFO 99 is preempted");
    h.schedule(0);
    assert_eq!(h.curr(0), Some(2));
}

/// `check_preempt_curr_dl`: an earlier deadline preempts a running deadline task; a later one
/// does not.
#[test]
fn an_earlier_deadline_preempts() {
    let mut h = harness_with(
        false,
        1,
        vec![
            dl(params(0, 1), ms(3), ms(10), ms(10)),
            dl(params(1, 1), ms(1), ms(20), ms(20)),
            dl(params(2, 1), ms(1), ms(2), ms(20)),
        ],
    );
    fork(&mut h, 0);
    h.pump();
    fork(&mut h, 1);
    assert!(h.take_resched().is_empty(), "deadline 20 ms waits");
    fork(&mut h, 2);
    assert_eq!(h.take_resched(), vec![0], "deadline 2 ms preempts");
    h.schedule(0);
    assert_eq!(h.curr(0), Some(2));
}

/// Global EDF, `select_task_rq_dl`: a wakee that cannot preempt the deadline task of its CPU
/// goes to a CPU without deadline tasks.
#[test]
fn a_wakee_that_cannot_preempt_goes_to_a_free_cpu() {
    let mut h = harness_with(
        false,
        2,
        vec![
            dl(pinned(0, 2, 0), ms(3), ms(5), ms(10)),
            dl(params(1, 2), ms(3), ms(10), ms(10)),
            pinned(2, 2, 1),
        ],
    );
    fork(&mut h, 0);
    fork(&mut h, 2);
    h.pump();
    assert_eq!((h.curr(0), h.curr(1)), (Some(0), Some(2)));
    h.sched.cls.dl.tasks[1].cpu = CpuId(0);
    fork(&mut h, 1);
    h.pump();
    assert_eq!(
        h.curr(1),
        Some(1),
        "moved to the CPU running only fair work"
    );
}

/// `push_dl_task` / `pull_dl_task`: with two deadline tasks queued on one CPU, the later one
/// is pushed to a CPU without deadline work; when a CPU's deadline task blocks it pulls a
/// queued one that would wait elsewhere.
#[test]
fn push_and_pull_keep_the_earliest_deadlines_running() {
    let mut h = harness_with(
        false,
        2,
        vec![
            dl(params(0, 2), ms(3), ms(5), ms(10)),
            dl(params(1, 2), ms(3), ms(8), ms(10)),
            dl(params(2, 2), ms(3), ms(9), ms(10)),
        ],
    );
    // All three start on CPU 0's queue via their initial CPU.
    for e in 0..3 {
        h.sched.cls.dl.tasks[e].cpu = CpuId(0);
    }
    fork(&mut h, 0);
    h.pump();
    fork(&mut h, 1);
    h.pump();
    assert_eq!(
        (h.curr(0), h.curr(1)),
        (Some(0), Some(1)),
        "1 went to the free CPU"
    );
    fork(&mut h, 2);
    h.pump();
    // 2 waits on one of the CPUs; when 1 blocks, CPU 1 takes (or keeps) task 2.
    let where2 = class(&h).task_cpu(EntityId(2));
    h.block(1);
    h.pump();
    assert_eq!(
        h.curr(1),
        Some(2),
        "task 2 (queued on CPU {}) runs on CPU 1",
        where2.0
    );
    assert_eq!(h.curr(0), Some(0));
}

/// §3.4.1: `to_ratio` and the admission test (95 % of each CPU by default, −1: none); the
/// period bounds of the sysctls.
#[test]
fn admission_control() {
    let t = |q: u64, p: u64| SchedTimes {
        sched_runtime_ns: q,
        sched_deadline_ns: p,
        sched_period_ns: p,
    };
    let (rt, dlp) = (RtParams::default(), DlParams::default());
    let ok = vec![
        ("a.0".to_string(), t(ms(5), ms(10))),
        ("b.0".into(), t(ms(4), ms(10))),
    ];
    assert!(admit(&rt, &dlp, 1, &ok).is_ok());
    let over = vec![
        ("a.0".to_string(), t(ms(5), ms(10))),
        ("b.0".into(), t(ms(5), ms(10))),
    ];
    let (i, f, m) = admit(&rt, &dlp, 1, &over).unwrap_err();
    assert_eq!((i, f.as_str()), (1, "sched_runtime_ns"));
    assert!(m.contains("'b.0'"), "{m}");
    assert!(admit(&rt, &dlp, 2, &over).is_ok(), "two CPUs take 1.0");
    let free = RtParams {
        sched_rt_runtime_us: -1,
        ..RtParams::default()
    };
    assert!(admit(&free, &dlp, 1, &over).is_ok(), "no limit");
    let mut s = t(us(50), us(50));
    s.sched_period_ns = 0;
    let short = vec![("s.0".to_string(), s)];
    let (_, f, _) = admit(&rt, &dlp, 1, &short).unwrap_err();
    assert_eq!(
        f, "sched_deadline_ns",
        "a period below 100 µs (from the deadline)"
    );
    let mut long = t(ms(1), ms(10));
    long.sched_period_ns = 5_000_000_000;
    let (_, f, _) = admit(&rt, &dlp, 1, &[("l.0".to_string(), long)]).unwrap_err();
    assert_eq!(f, "sched_period_ns");
}
