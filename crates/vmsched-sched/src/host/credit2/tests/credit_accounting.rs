//! Credit accounting: burning (§3.5), the credit-sorted runqueue (§3.6), and the epoch
//! reset (§3.7).

use super::*;

// ------------------------------------------------------------------------------------------
// §3.5 burning
// ------------------------------------------------------------------------------------------

#[test]
fn burn_half_weight_burns_twice_as_fast() {
    let mut ents = vec![params(0, 2), params(1, 2)];
    ents[0].xen.weight = 512;
    let mut h = harness(rl(0), flat(2), ents);
    assert_eq!(h.sched.ops.rqs[0].max_weight, 512);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.deliver_resched();
    assert!(h.curr(0).is_some() && h.curr(1).is_some());
    h.advance(ms(1));
    h.schedule(0);
    h.schedule(1);
    assert_eq!(credit(&h, 0), 9 * MS);
    assert_eq!(credit(&h, 1), 8 * MS);
}

#[test]
fn burn_keeps_the_residual() {
    // weights 3 and 2 → max_weight 3; the weight-2 vCPU burns 1.5 credits/ns.
    let mut ents = vec![params(0, 2), params(1, 2)];
    ents[0].xen.weight = 3;
    ents[1].xen.weight = 2;
    let mut h = harness(rl(0), flat(2), ents);
    wake(&mut h, 1);
    h.deliver_resched();
    let cpu = h.ents[1].on_cpu.unwrap().0;
    for _ in 0..3 {
        h.advance(1);
        h.schedule(cpu);
    }
    // 3 × 1 ns: charges 1 (r 1), 2 (r 0), 1 (r 1): 4 credits, residual 1.
    assert_eq!(credit(&h, 1), 10 * MS - 4);
    assert_eq!(h.sched.ops.units[1].residual, 1);
}

#[test]
fn burn_floors_at_credit_min() {
    let mut h = harness(rl(0), flat(1), vec![params(0, 1)]);
    wake(&mut h, 0);
    h.schedule(0);
    h.advance(ms(25));
    // Burn through tickle scoring, which does not reset.
    set_credit(&mut h, 0, -9 * MS);
    h.sched.ops.burn_credits(EntityId(0), h.now as i64);
    assert_eq!(credit(&h, 0), CREDIT_MIN);
    assert_eq!(h.sched.probe(EntityId(0)), Some(-10 * MS));
}

// ------------------------------------------------------------------------------------------
// §3.6 ordering, §3.7 reset
// ------------------------------------------------------------------------------------------

#[test]
fn runq_is_credit_descending_and_fifo_among_equals() {
    let mut h = flat_harness(rl(0), 1, 4);
    set_credit(&mut h, 2, 5 * MS);
    set_credit(&mut h, 3, 7 * MS);
    // Keep CPU 0 busy with a fifth party: nothing runs, we only queue.
    h.sched.ops.rqs[0].idle = CpuSet::empty();
    h.sched.ops.rqs[0].smt_idle = CpuSet::empty();
    for e in [2, 0, 3, 1] {
        wake(&mut h, e);
    }
    assert_eq!(runq(&h, 0), vec![0, 1, 3, 2]);
}

#[test]
fn reset_adds_init_and_clips_at_carryover() {
    // Appendix A6: snext −0.3 ms, head −1 ms, a blocked vCPU at +2 ms.
    let mut h = flat_harness(rl(0), 1, 3);
    set_credit(&mut h, 0, -300 * US);
    set_credit(&mut h, 1, -MS);
    set_credit(&mut h, 2, 2 * MS);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.schedule(0);
    assert_eq!(h.curr(0), Some(0));
    assert_eq!(credit(&h, 0), 9_700 * US);
    assert_eq!(credit(&h, 1), 9 * MS);
    assert_eq!(
        credit(&h, 2),
        10_500 * US,
        "blocked vCPUs are reset too, clipped at INIT + CARRYOVER"
    );
}

#[test]
fn reset_only_when_top_credit_is_not_positive() {
    let mut h = flat_harness(rl(0), 1, 2);
    set_credit(&mut h, 0, -MS);
    set_credit(&mut h, 1, 1);
    wake(&mut h, 0);
    wake(&mut h, 1);
    assert_eq!(runq(&h, 0), vec![1, 0]);
    h.schedule(0);
    assert_eq!(h.curr(0), Some(1));
    assert_eq!(
        (credit(&h, 0), credit(&h, 1)),
        (-MS, 1),
        "top credit 1 > 0: no reset"
    );
    // The next pick has only non-positive credit around it: reset.
    set_credit(&mut h, 1, 0);
    h.advance(us(1));
    h.schedule(0);
    assert_eq!(credit(&h, 1), 10 * MS - 1_000);
    assert_eq!(credit(&h, 0), 9 * MS);
}

#[test]
fn reset_adds_twice_init_when_snext_is_at_the_floor() {
    let mut h = flat_harness(rl(0), 1, 2);
    wake(&mut h, 0);
    set_credit(&mut h, 0, CREDIT_MIN);
    set_credit(&mut h, 1, -MS);
    h.schedule(0);
    assert_eq!(credit(&h, 0), 10 * MS);
    assert_eq!(
        credit(&h, 1),
        10_500 * US,
        "−1 ms + 20 ms clipped at 10.5 ms"
    );
}

#[test]
fn reset_burns_running_vcpus_first() {
    let mut h = flat_harness(rl(0), 2, 3);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.deliver_resched();
    let c0 = h.ents[0].on_cpu.unwrap().0;
    assert!(h.ents[1].on_cpu.is_some());
    h.advance(ms(2));
    set_credit(&mut h, 0, MS);
    set_credit(&mut h, 1, MS);
    // e0 burns to −1 ms at its CPU's schedule: reset. e1, running elsewhere, has 2 ms of
    // unaccounted run time: the reset charges them before adding INIT.
    h.schedule(c0);
    assert_eq!(h.curr(c0), Some(0));
    assert_eq!(credit(&h, 0), 9 * MS);
    assert_eq!(credit(&h, 1), 9 * MS);
    assert_eq!(h.sched.ops.units[1].start_time, ms(2) as i64);
    assert_eq!(credit(&h, 2), 10_500 * US);
}
