//! The per-CPU runqueue (§2.4): priority order, FIFO (round robin) within a priority, the YIELD
//! placement, and the resort after an accounting pass.

use super::*;

/// Four vCPUs pinned to CPU 0, none queued; vCPU 0 runs.
fn four(v: Credit1Version) -> H {
    let mut h = one_cpu(v, 4);
    wake(&mut h, 0);
    h.pump();
    for e in 0..4 {
        ops_mut(&mut h).units[e].migrating = false;
    }
    h
}

fn insert(h: &mut H, e: u32, p: Pri) {
    set_pri(h, e, p);
    h.ents[e as usize].runnable = true;
    with_ctx(h, |ops, x| ops.runq_insert(x, EntityId(e)));
}

#[test]
fn runq_insert_orders_by_priority_first_in_first_out_within_one() {
    let mut h = four(V420);
    insert(&mut h, 1, PRI_OVER);
    insert(&mut h, 2, PRI_UNDER);
    insert(&mut h, 3, PRI_UNDER);
    assert_eq!(runq(&h, 0), vec![2, 3, 1]);
    let mut h = four(V420);
    insert(&mut h, 1, PRI_UNDER);
    insert(&mut h, 2, PRI_BOOST);
    insert(&mut h, 3, PRI_BOOST);
    assert_eq!(runq(&h, 0), vec![2, 3, 1]);
    assert_eq!(
        ops(&h).pcpus[0].nr_runnable,
        4,
        "three queued plus the running one"
    );
}

#[test]
fn round_robin_within_a_priority_at_the_end_of_a_slice() {
    for v in [V33, V420] {
        let mut h = four(v);
        for e in 1..3 {
            wake(&mut h, e);
        }
        h.pump();
        for e in 0..3 {
            set_pri(&mut h, e, PRI_UNDER);
        }
        let mut order = Vec::new();
        for _ in 0..6 {
            h.advance(ms(30));
            order.push(h.schedule(0).next.unwrap().0);
        }
        assert_eq!(order, vec![1, 2, 0, 1, 2, 0], "{v:?}");
    }
}

#[test]
fn v4_20_a_yielding_vcpu_goes_behind_one_lower_priority_vcpu() {
    let mut h = four(V420);
    insert(&mut h, 1, PRI_OVER);
    insert(&mut h, 2, PRI_OVER);
    ops_mut(&mut h).units[3].yield_ = true;
    insert(&mut h, 3, PRI_UNDER);
    assert_eq!(runq(&h, 0), vec![1, 3, 2]);
}

#[test]
fn v4_20_a_yielding_vcpu_at_the_tail_stays_there_when_idle_is_not_queued() {
    // The CPU runs idle (the idle vCPU is not on the runqueue): no element after the last one.
    let mut h = one_cpu(V420, 3);
    ops_mut(&mut h).units[1].migrating = false;
    insert(&mut h, 1, PRI_OVER);
    ops_mut(&mut h).units[2].yield_ = true;
    insert(&mut h, 2, PRI_UNDER);
    assert_eq!(runq(&h, 0), vec![2, 1], "before the last element: no skip");
}

#[test]
fn v3_3_yield_only_requeues_at_the_tail_of_its_priority() {
    let mut h = four(V33);
    set_pri(&mut h, 0, PRI_UNDER);
    insert(&mut h, 1, PRI_UNDER);
    insert(&mut h, 2, PRI_OVER);
    h.advance(ms(2));
    let pick = h.yield_(0);
    assert!(!unit(&h, 0).yield_, "no YIELD flag in 3.3");
    assert_eq!(pick.next, Some(EntityId(1)));
    assert_eq!(runq(&h, 0), vec![0, 2], "behind its equals, ahead of OVER");
}

#[test]
fn runq_sort_moves_under_and_boost_ahead_of_over_in_order_once_per_pass() {
    let mut h = four(V33);
    h.sched.ops.pcpus[0].runq = vec![EntityId(1), EntityId(2), EntityId(3)];
    for e in 1..4 {
        h.sched.ops.units[e].on_runq = true;
    }
    set_pri(&mut h, 1, PRI_OVER);
    set_pri(&mut h, 2, PRI_BOOST);
    set_pri(&mut h, 3, PRI_UNDER);
    activate(&mut h, 0);
    acct(&mut h);
    assert_eq!(runq(&h, 0), vec![1, 2, 3], "the pass itself does not sort");
    tick(&mut h, 0);
    assert_eq!(runq(&h, 0), vec![2, 3, 1], "BOOST not moved ahead of UNDER");
    set_pri(&mut h, 2, PRI_OVER);
    tick(&mut h, 0);
    assert_eq!(runq(&h, 0), vec![2, 3, 1], "once per pass");
}
