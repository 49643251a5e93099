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
    // avg 2560, imbalance min(4096 − 2560, 2560 − 1024) = 1536: one nice-0 task moves.
    assert_eq!(h.sched.cls.fair.rqs[0].nr_running, 3);
    assert_eq!(h.sched.cls.fair.rqs[1].nr_running, 2);
    assert_eq!(cpu_of(&h, 0), 0, "the pinned task stayed");
    assert_eq!(cpu_of(&h, 2), 1, "the coldest movable task moved");
}
