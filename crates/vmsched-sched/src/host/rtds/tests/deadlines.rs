//! Deadlines on the period grid, replenishment and budget burning (§4.4, §4.5, A7).

use super::*;

/// §4.4: the first deadline is one period after boot (the initial deadline 0 has passed at
/// insertion), with a full budget at level 0.
#[test]
fn first_deadline_is_one_period_after_boot() {
    let h = harness(1, vec![rt(0, 1, 3000, 7000, true)]);
    let u = unit(&h, 0);
    assert_eq!(
        (u.cur_deadline, u.cur_budget, u.priority_level),
        (7 * MS, 3 * MS, 0)
    );
}

/// §4.4 (`rt_update_deadline`): a deadline that has passed moves to the first point of the
/// period grid strictly after now (aligned to boot, not to the wake), with a full budget.
#[test]
fn update_deadline_lands_on_the_grid_after_now() {
    let mut h = harness(1, vec![rt(0, 1, 3000, 7000, true)]);
    for (now, expect) in [
        (7 * MS, 14 * MS),
        (20 * MS, 21 * MS),
        (21 * MS + 1, 28 * MS),
    ] {
        h.sched.ops.units[0].cur_budget = 1;
        h.sched.ops.units[0].priority_level = 2;
        h.sched.ops.rt_update_deadline(EntityId(0), now);
        let u = unit(&h, 0);
        assert_eq!(u.cur_deadline, expect, "now {now}");
        assert_eq!(
            (u.cur_budget, u.priority_level, u.last_start),
            (3 * MS, 0, now)
        );
    }
    // Far behind (more than 1024 periods): the multiplication gives the same grid point.
    h.sched.ops.rt_update_deadline(EntityId(0), 7000 * MS + 5);
    assert_eq!(unit(&h, 0).cur_deadline, 7007 * MS);
}

/// A7: period 10 ms, budget 4 ms, deadline 20 ms; it blocks at 13 ms with 1 ms left. A wake at
/// 17 ms keeps the 1 ms and the deadline 20 ms (deferrable server); a wake at 23 ms gets the
/// deadline 30 ms, 4 ms, level 0.
#[test]
fn a7_deferrable_server_wake() {
    for (wake_at, deadline, budget) in [(17, 20, 1), (23, 30, 4)] {
        let mut h = harness(1, vec![rt(0, 1, 4000, 10_000, true)]);
        h.advance(ms(10));
        wake(&mut h, 0);
        h.pump();
        // Into the period [10, 20) ms: 3 ms of run time by 13 ms.
        assert_eq!(unit(&h, 0).cur_deadline, 20 * MS);
        h.advance(ms(3));
        h.block(0);
        h.pump();
        assert_eq!(unit(&h, 0).cur_budget, MS);
        h.advance(ms(wake_at) - h.now);
        wake(&mut h, 0);
        let u = unit(&h, 0);
        assert_eq!(
            (u.cur_deadline, u.cur_budget, u.priority_level),
            (deadline * MS, budget * MS, 0),
            "woken at {wake_at} ms"
        );
        h.pump();
        assert_eq!(h.curr(0), Some(0));
        assert_eq!(
            h.timer[0],
            Some(h.now + budget as u64 * ms(1)),
            "slice = budget left"
        );
    }
}

/// §4.5: a running vCPU burns exactly the time it ran; a queued one burns nothing.
#[test]
fn running_burns_queued_keeps() {
    let ents = vec![
        rt_on(0, 1, 0, 4000, 10_000, false),
        rt_on(1, 1, 0, 4000, 20_000, false),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    h.advance(us(1250));
    h.schedule(0);
    assert_eq!(unit(&h, 0).cur_budget, 4 * MS - 1_250_000);
    assert_eq!(unit(&h, 1).cur_budget, 4 * MS, "queued: keeps its budget");
}

/// §4.5: without extratime an exhausted budget is 0 and the vCPU is depleted: it goes to the
/// depleted queue and its CPU idles even with nothing else to run, until its replenishment
/// at the next period, which queues it and tickles a CPU.
#[test]
fn depleted_without_extratime_waits_for_its_period() {
    let mut h = harness(1, vec![rt(0, 1, 3000, 10_000, false)]);
    wake(&mut h, 0);
    h.pump();
    assert_eq!(h.timer[0], Some(ms(3)), "slice = budget");
    h.advance(ms(3));
    let pick = h.schedule(0);
    h.pump();
    assert_eq!(pick.next, None, "depleted: the CPU idles");
    assert!(unit(&h, 0).depleted);
    assert_eq!(depletedq(&h), vec![0]);
    assert_eq!(repl_timer(&h), Some(ms(10)));
    h.advance(ms(7) - 1);
    assert_eq!(h.curr(0), None);
    h.advance(1);
    h.sched_timers[0] = None;
    h.fire_timer(REPL_TIMER);
    assert_eq!(
        h.take_resched(),
        vec![0],
        "the replenished vCPU tickles its idle CPU"
    );
    assert!(!unit(&h, 0).depleted);
    assert_eq!(runq(&h), vec![0]);
    h.schedule(0);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    assert_eq!(unit(&h, 0).cur_deadline, 20 * MS);
    assert_eq!(repl_timer(&h), Some(ms(20)));
}

/// §4.5: with extratime an exhausted budget is refilled at the same deadline one level lower;
/// a lone vCPU keeps running.
#[test]
fn extratime_refills_a_level_lower() {
    let mut h = harness(1, vec![rt(0, 1, 3000, 10_000, true)]);
    wake(&mut h, 0);
    h.pump();
    h.advance(ms(3));
    let pick = h.schedule(0);
    assert_eq!(pick.next, Some(EntityId(0)));
    assert_eq!(pick.slice, Some(ms(3)));
    let u = unit(&h, 0);
    assert_eq!(
        (u.priority_level, u.cur_budget, u.cur_deadline),
        (1, 3 * MS, 10 * MS)
    );
    h.advance(ms(3));
    h.schedule(0);
    assert_eq!(unit(&h, 0).priority_level, 2);
    // The period ends: level 0 and a full budget again.
    fire_repl(&mut h);
    let u = unit(&h, 0);
    assert_eq!(
        (u.priority_level, u.cur_budget, u.cur_deadline),
        (0, 3 * MS, 20 * MS)
    );
}

/// §4.4: when a running vCPU's replenishment gives it a deadline that the runqueue's head
/// beats, the handler tickles for the head, which then preempts it.
#[test]
fn replenishment_of_a_running_vcpu_tickles_for_a_better_head() {
    // X: 10 ms of 10 ms; Y: 1 ms of 12 ms. X (deadline 10) runs first.
    let ents = vec![
        rt_on(0, 1, 0, 10_000, 10_000, false),
        rt_on(1, 1, 0, 1000, 12_000, false),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    assert_eq!(runq(&h), vec![1]);
    // At 10 ms X gets the deadline 20 ms; Y's 12 ms beats it.
    h.advance(ms(10));
    h.sched_timers[0] = None;
    h.fire_timer(REPL_TIMER);
    assert_eq!(unit(&h, 0).cur_deadline, 20 * MS);
    assert_eq!(
        h.take_resched(),
        vec![0],
        "the head is tickled onto X's CPU"
    );
    h.schedule(0);
    h.pump();
    assert_eq!(h.curr(0), Some(1), "Y preempts X");
    assert_eq!(runq(&h), vec![0]);
}

/// §4.4: a queued vCPU that is replenished is re-sorted in the runqueue by its new deadline.
#[test]
fn replenishment_resorts_a_queued_vcpu() {
    // e0 (2 ms of 2 ms) runs; e1 (deadline 3 ms) and e2 (deadline 5 ms) wait.
    let ents = vec![
        rt_on(0, 1, 0, 2000, 2000, false),
        rt_on(1, 1, 0, 1000, 3000, false),
        rt_on(2, 1, 0, 1000, 5000, false),
    ];
    let mut h = harness(1, ents);
    for e in 0..3 {
        wake(&mut h, e);
    }
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    assert_eq!(runq(&h), vec![1, 2]);
    // The CPU is not rescheduled here: only the replenishments run.
    assert_eq!(fire_repl(&mut h), vec![0], "e1 beats e0's new deadline");
    assert_eq!(h.now, 2 * MS as u64);
    assert_eq!(replq(&h), vec![1, 0, 2], "by deadline: 3, 4, 5 ms");
    fire_repl(&mut h);
    assert_eq!(h.now, 3 * MS as u64);
    assert_eq!(unit(&h, 1).cur_deadline, 6 * MS);
    assert_eq!(runq(&h), vec![2, 1], "e1 (now 6 ms) behind e2 (5 ms)");
    assert_eq!(repl_timer(&h), Some(ms(4)));
}

/// Upstream quirk kept (module doc): `replq` is ordered by (level, deadline) like the runqueue,
/// so a vCPU that wakes at level 1 before its deadline is queued behind a level-0 vCPU with a
/// later deadline; the timer follows the head, and the vCPU's replenishment comes late.
#[test]
fn replq_by_level_first_delays_a_level_one_replenishment() {
    let ents = vec![
        rt_on(0, 1, 0, 1000, 10_000, true),
        rt_on(1, 1, 0, 1000, 20_000, false),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    h.pump();
    // A uses its budget (level 1, deadline 10 ms), then blocks at 1.5 ms.
    h.advance(ms(1));
    h.schedule(0);
    assert_eq!(unit(&h, 0).priority_level, 1);
    h.advance(us(500));
    h.block(0);
    h.pump();
    // B (level 0, deadline 20 ms) wakes and runs; A wakes at 2 ms, before its deadline.
    wake(&mut h, 1);
    h.pump();
    h.advance(us(500));
    wake(&mut h, 0);
    h.pump();
    assert_eq!(unit(&h, 0).cur_deadline, 10 * MS);
    assert_eq!(
        replq(&h),
        vec![1, 0],
        "level 1 goes behind level 0, whatever the deadlines"
    );
    assert_eq!(repl_timer(&h), Some(ms(20)), "armed for the head, B");
    fire_repl(&mut h);
    assert_eq!(h.now, 20 * MS as u64);
    let a = unit(&h, 0);
    assert_eq!(
        (a.cur_deadline, a.priority_level),
        (30 * MS, 0),
        "A's 10 ms replenishment came at 20 ms"
    );
}
