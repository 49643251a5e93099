//! Load balancing (§1.17): newidle, NOHZ idle and periodic balancing.

use super::*;

// --- §1.17 load balancing ------------------------------------------------------------------------

/// Two vCPUs: A runs on 0 with B queued behind it, X (pinned to 1) runs on 1.
fn lb_setup() -> Harness<CfsSched> {
    let mut h = harness(
        2,
        vec![placed_on(0, 2, 0), placed_on(1, 2, 0), pinned(2, 2, 1)],
    );
    start(&mut h, C);
    start(&mut h, A);
    wake(&mut h, B); // prev 0 busy, 1 busy: queued on 0
    assert_eq!(cpu_of(&h, B), 0);
    h
}

/// §1.17: newidle pulls a queued, cache-cold task from an overloaded vCPU.
#[test]
fn newidle_pulls_a_cold_task() {
    let mut h = lb_setup();
    h.advance(ms(10));
    h.block(C);
    assert_eq!(h.curr(1), Some(B));
    assert_eq!(h.sched.cls.fair.rqs[0].nr_running, 1);
    assert!(
        h.take_resched().is_empty(),
        "the pull is served by this very schedule"
    );
}

/// §1.17: a cache-hot task (ran < 500 µs ago) is not pulled by newidle.
#[test]
fn newidle_leaves_cache_hot_tasks() {
    let mut h = lb_setup();
    h.advance(ms(10));
    h.sched.cls.fair.ses[1].exec_start = h.now; // ran just now (clock_task = now without steal)
    h.block(C);
    assert_eq!(h.curr(1), None);
    assert!(h.sched.rq[1].idle_stamp.is_some());
}

/// §1.17: newidle is skipped when avg_idle < migration_cost.
#[test]
fn newidle_gated_by_avg_idle() {
    let mut h = lb_setup();
    h.advance(ms(10));
    h.sched.rq[1].avg_idle = 100_000;
    h.block(C);
    assert_eq!(h.curr(1), None);
}

/// §1.17: a busy vCPU's tick eventually balances on behalf of an idle one (NOHZ kick).
#[test]
fn nohz_idle_balance_pulls_to_idle_cpu() {
    let mut h = lb_setup();
    h.advance(ms(10));
    h.sched.cls.fair.ses[1].exec_start = h.now;
    h.block(C);
    assert_eq!(h.curr(1), None);
    h.advance(ms(4));
    h.tick(0);
    assert_eq!(cpu_of(&h, B), 1);
    assert!(h.take_resched().contains(&1));
    h.schedule(1);
    assert_eq!(h.curr(1), Some(B));
}

/// §1.17: periodic balancing of a busy vCPU pulls load from an overloaded one; pinned tasks stay.
#[test]
fn periodic_balance_moves_load_not_pinned_tasks() {
    // Task 0 (pinned to vCPU 0) is the coldest queued task: it must be skipped.
    let ents = vec![
        pinned(0, 2, 0),
        placed_on(1, 2, 0),
        placed_on(2, 2, 0),
        placed_on(3, 2, 0),
        pinned(4, 2, 1),
    ];
    let mut h = harness(2, ents);
    start(&mut h, 4);
    start(&mut h, 1);
    for e in [2, 3, 0] {
        wake(&mut h, e);
    }
    assert_eq!(h.sched.cls.fair.rqs[0].nr_running, 4);
    // Busy interval: 2 ms × 16 = 32 ms = 8 jiffies − 1 = 28 ms.
    h.advance(ms(24));
    h.tick(1);
    assert_eq!(h.sched.cls.fair.rqs[0].nr_running, 4, "not yet due");
    h.advance(ms(4));
    h.tick(1);
    // vCPU 1's one task is young (util about 740 of 1024: group_has_spare), vCPU 0 is
    // overloaded: migrate_task, (4 − 1) >> 1 = 1 task moves, the coldest movable one.
    assert_eq!(h.sched.cls.fair.rqs[0].nr_running, 3);
    assert_eq!(h.sched.cls.fair.rqs[1].nr_running, 2);
    assert_eq!(cpu_of(&h, 0), 0, "the pinned task stayed");
    assert_eq!(cpu_of(&h, 2), 1, "the coldest movable task moved");
}

// --- Linux v5.10 group classification, imbalance kinds, active balance --------------------------

/// vCPU 0: F (free) runs, P (pinned to 0) queued behind it; vCPU 1: X (pinned to 1) runs; for
/// 200 ms, so that the PELT signals have settled (X's util near 1024: vCPU 1 is
/// group_fully_busy; vCPU 0 has two tasks and util near 1024: group_overloaded).
fn overloaded_beside_fully_busy() -> Harness<CfsSched> {
    let (p, f, x) = (0, 1, 2);
    let mut h = harness(
        2,
        vec![pinned(0, 2, 0), placed_on(1, 2, 0), pinned(2, 2, 1)],
    );
    start(&mut h, x);
    start(&mut h, p);
    wake(&mut h, f);
    assert_eq!(
        cpu_of(&h, f),
        0,
        "every vCPU busy: queued on its previous one"
    );
    h.advance(ms(200));
    h.tick(0); // P's slice is over
    h.schedule(0);
    assert_eq!(h.curr(0), Some(f));
    h.tick(1);
    h.take_resched();
    h
}

/// Linux v5.10 calculate_imbalance / detach_tasks / need_active_balance: a busy vCPU
/// (group_fully_busy) balancing against an overloaded one moves load (migrate_load); nothing
/// queued is movable (the queued task is pinned, the running one cannot be detached), so each
/// pass fails, and once nr_balance_failed exceeds cache_nice_tries + 2 the busiest vCPU's
/// stopper pushes its current task over (active balance).
#[test]
fn repeated_failures_end_in_an_active_balance_of_the_running_task() {
    let (p, f) = (0, 1);
    let mut h = overloaded_beside_fully_busy();
    let mut failed = h.sched.cls.fair.rqs[1].lb.nr_balance_failed;
    assert!(failed >= 1, "the fixture's own pass failed");
    // The busy interval after a failure: 2 ms × 16 = 32 ms = 8 jiffies − 1 = 28 ms.
    loop {
        h.advance(ms(28));
        h.tick(1);
        if h.sched.cls.fair.rqs[0].lb.push_cpu.is_some() {
            break;
        }
        failed += 1;
        assert_eq!(h.sched.cls.fair.rqs[1].lb.nr_balance_failed, failed);
        assert_eq!(cpu_of(&h, f), 0, "nothing queued could move");
        assert!(
            failed <= 3,
            "no active balance past cache_nice_tries + 2 failures"
        );
    }
    assert_eq!(
        failed, 3,
        "the pass that took the count past 3 asked for it"
    );
    assert_eq!(
        h.sched.cls.fair.rqs[0].lb.push_cpu,
        Some(1),
        "the stopper is asked"
    );
    assert!(h.take_resched().contains(&0));
    // need_active_balance set the count to cache_nice_tries + 1.
    assert_eq!(h.sched.cls.fair.rqs[1].lb.nr_balance_failed, 2);
    h.schedule(0);
    assert_eq!(cpu_of(&h, f), 1, "the task that was running moved");
    assert_eq!(h.curr(0), Some(p));
    assert_eq!(h.sched.cls.fair.rqs[1].lb.nr_balance_failed, 0);
}

/// Linux v5.10 find_busiest_group: a busy destination (CPU_NOT_IDLE) does not balance against
/// a vCPU that is not overloaded (one task): balanced, and the failure count restarts.
#[test]
fn a_busy_cpu_leaves_a_fully_busy_one_alone() {
    let mut h = harness(
        2,
        vec![pinned(0, 2, 0), placed_on(1, 2, 0), pinned(2, 2, 1)],
    );
    start(&mut h, C);
    start(&mut h, A);
    h.sched.cls.fair.rqs[1].lb.nr_balance_failed = 2;
    h.advance(ms(28));
    h.tick(1);
    assert_eq!(h.sched.cls.fair.rqs[1].lb.nr_balance_failed, 0);
    assert_eq!(h.sched.cls.fair.rqs[0].lb.push_cpu, None);
}

/// Linux v5.10 wake_affine_weight: the wakee's load, still part of its previous vCPU's PELT
/// load while it sleeps, comes off that vCPU's side. Here prev's load is mostly the wakee's:
/// without the subtraction the waker's vCPU would look lighter.
#[test]
fn wake_affine_weight_takes_the_wakees_load_off_its_previous_cpu() {
    let (w, p, x) = (0, 1, 2);
    let mut h = harness(
        2,
        vec![pinned(0, 2, 0), placed_on(1, 2, 1), pinned(2, 2, 1)],
    );
    start(&mut h, w);
    start(&mut h, x);
    h.advance(ms(5));
    let fair = &mut h.sched.cls.fair;
    fair.rqs[0].pelt.avg.load_avg = 1024;
    fair.rqs[1].pelt.avg.load_avg = 1024 + 2048;
    fair.ses[p as usize].avg.load_avg = 2048;
    fair.ses[p as usize].avg.last_update_time = 1;
    // this: (1024 + 2048)·100 = 307200; prev: (3072 − 2048)·108 = 110592 → prev.
    // (Without the subtraction, prev: 3072·108 = 331776 > 307200 → this.)
    wake_from(&mut h, p, 0, false);
    assert_eq!(cpu_of(&h, p), 1);
}
