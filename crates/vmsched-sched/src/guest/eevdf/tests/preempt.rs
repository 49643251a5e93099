//! §2.5 RUN_TO_PARITY, §2.7 wake-up preemption with ERRATA L2 and L6, PREEMPT_SHORT (6.12, and
//! 6.18's form), the 6.18 protection `vprot`, NEXT_BUDDY / PICK_BUDDY.

use super::*;

/// A (nice 0) runs, freshly picked and protected; 0.1 ms later B (nice −5, so a third of A's
/// virtual slice) wakes for the first time: placed at V = A's vruntime with lag 0, B is eligible
/// and its deadline is earlier than A's, and A is still eligible. Returns whether B preempted.
fn heavier_wakee_preempts(p: EevdfParams) -> bool {
    let mut h = harness_with(p, 1, vec![task(0, 1, 0, 0), task(1, 1, -5, 0)]);
    wake_pump(&mut h, A);
    h.advance(100 * US);
    wake(&mut h, B);
    let f = fair(&h);
    assert!(f.entity_eligible(0, A as usize) && f.entity_eligible(0, B as usize));
    assert!(before(se(&h, B).deadline, se(&h, A).deadline));
    !h.take_resched().is_empty()
}

/// §2.5 RUN_TO_PARITY (ERRATA L2: curr's deadline counts only when it is eligible but not
/// protected): a protected eligible curr keeps the CPU against a wakee with an earlier
/// deadline; without RUN_TO_PARITY the wakee preempts.
#[test]
fn run_to_parity_protects_an_eligible_curr() {
    for kernel in [EevdfKernel::V6_6, EevdfKernel::V6_12, EevdfKernel::V6_18] {
        // The wakee's slice is the base one: PREEMPT_SHORT does not apply.
        assert!(
            !heavier_wakee_preempts(EevdfParams::new(kernel)),
            "{kernel:?}: protected"
        );
        let p = with_features(kernel, |f| f.RUN_TO_PARITY = Some(false));
        if kernel == EevdfKernel::V6_18 {
            // 6.18 NO_RUN_TO_PARITY still protects one normalised base slice (0.7 ms).
            assert!(!heavier_wakee_preempts(p), "{kernel:?}: 0.7 ms quantum");
        } else {
            assert!(heavier_wakee_preempts(p), "{kernel:?}: no protection");
        }
    }
}

/// ERRATA L2: a wakee with positive lag is placed before V, which moves V below curr's
/// vruntime: curr is no longer eligible, drops out of the pick whatever its protection, and the
/// wakee preempts.
#[test]
fn an_ineligible_curr_is_preempted_despite_protection() {
    for kernel in [EevdfKernel::V6_6, EevdfKernel::V6_12, EevdfKernel::V6_18] {
        let mut h = harness(kernel, 1, vec![task(0, 1, 0, 0), task(1, 1, 0, 0)]);
        wake_pump(&mut h, A);
        wake_pump(&mut h, B);
        while h.curr(0) != Some(B) {
            h.run_for(MS, 100 * US);
        }
        h.advance(100 * US);
        h.block(B); // B leaves with positive lag; A is picked and protected
        assert!(se(&h, B).vlag > 0);
        h.advance(50 * US);
        assert!(fair(&h).protect_slice(A as usize), "{kernel:?}");
        wake(&mut h, B);
        assert!(!fair(&h).entity_eligible(0, A as usize), "{kernel:?}");
        assert_eq!(h.take_resched(), vec![0], "{kernel:?}: B preempts");
        h.schedule(0);
        assert_eq!(h.curr(0), Some(B));
    }
}

/// L2: with default slices and RUN_TO_PARITY, a zero-lag wakee of equal weight never preempts
/// an eligible curr (placed at V, its deadline is a full slice away: later than curr's).
#[test]
fn a_zero_lag_wakee_does_not_preempt() {
    for kernel in [EevdfKernel::V6_6, EevdfKernel::V6_12, EevdfKernel::V6_18] {
        let mut h = harness(kernel, 1, vec![task(0, 1, 0, 0), task(1, 1, 0, 0)]);
        wake_pump(&mut h, A);
        h.advance(200 * US);
        wake(&mut h, B);
        assert!(h.take_resched().is_empty(), "{kernel:?}");
    }
}

/// WAKEUP_PREEMPTION off: nothing a wake-up does preempts.
#[test]
fn no_wakeup_preemption() {
    let p = with_features(EevdfKernel::V6_12, |f| {
        f.WAKEUP_PREEMPTION = Some(false);
        f.RUN_TO_PARITY = Some(false);
    });
    assert!(!heavier_wakee_preempts(p));
}

/// A short-slice wakee (0.1 ms, 6.12+ custom slice) against a protected curr with the base
/// slice; returns whether it preempted and curr's protection afterwards.
fn short_wakee(p: EevdfParams, ran: u64) -> (bool, Harness<EevdfSched>) {
    let mut h = harness_with(p, 1, vec![task(0, 1, 0, 0), task(1, 1, 0, 100 * US)]);
    wake_pump(&mut h, A);
    h.advance(ran);
    wake(&mut h, B);
    let preempted = !h.take_resched().is_empty();
    (preempted, h)
}

/// §2.7 PREEMPT_SHORT (6.12): an eligible wakee with a shorter slice and an earlier deadline
/// cancels curr's protection and preempts; without PREEMPT_SHORT RUN_TO_PARITY holds.
#[test]
fn preempt_short_6_12() {
    let (yes, h) = short_wakee(EevdfParams::new(EevdfKernel::V6_12), 100 * US);
    assert!(yes, "short wakee preempts");
    assert!(!fair(&h).protect_slice(A as usize), "protection cancelled");
    let p = with_features(EevdfKernel::V6_12, |f| f.PREEMPT_SHORT = Some(false));
    let (no, h) = short_wakee(p, 100 * US);
    assert!(!no);
    assert!(fair(&h).protect_slice(A as usize));
}

/// §2.7 / ERRATA L6 (6.18): the pick is evaluated with curr's protection ignored; a win
/// preempts (and cancels the protection), and without PREEMPT_SHORT the protection holds.
#[test]
fn preempt_short_6_18_win() {
    let (yes, h) = short_wakee(EevdfParams::new(EevdfKernel::V6_18), 100 * US);
    assert!(yes);
    let a = se(&h, A);
    assert_eq!(a.vprot, a.vruntime, "protection cancelled");
    let p = with_features(EevdfKernel::V6_18, |f| f.PREEMPT_SHORT = Some(false));
    assert!(!short_wakee(p, 100 * US).0);
}

/// ERRATA L6 (6.18): a short-slice wakee that loses the pick (it comes back with negative lag:
/// not eligible) shortens curr's protection to the smallest queued slice from curr's current
/// vruntime; a wakee that is not shorter leaves it.
#[test]
fn preempt_short_6_18_loss_shortens_protection() {
    for short in [true, false] {
        let p = with_features(EevdfKernel::V6_18, |f| f.DELAY_DEQUEUE = Some(false));
        let slice = if short { 100 * US } else { 0 };
        let mut h = harness_with(p, 1, vec![task(0, 1, 0, 0), task(1, 1, 0, slice)]);
        wake(&mut h, B);
        wake(&mut h, A);
        h.pump();
        assert_eq!(h.curr(0), Some(B));
        h.advance(100 * US);
        h.block(B); // ran ahead of A: leaves with negative lag
        assert!(se(&h, B).vlag < 0);
        assert_eq!(h.curr(0), Some(A));
        let full = {
            let a = se(&h, A);
            assert_eq!(a.vprot, a.deadline, "alone: protected to the deadline");
            a.vprot
        };
        h.advance(100 * US);
        h.take_resched();
        wake(&mut h, B);
        assert!(!fair(&h).entity_eligible(0, B as usize));
        assert!(h.take_resched().is_empty(), "the wakee loses");
        let a = se(&h, A);
        if short {
            assert_eq!(vdiff(a.vprot, a.vruntime), 100_000, "v + the 0.1 ms slice");
        } else {
            assert_eq!(a.vprot, full, "unchanged");
        }
    }
}

/// §2.5 / L6 (6.17+): at pick, protection reaches only as far as the smallest queued slice; 6.12
/// protects to the deadline.
#[test]
fn protection_6_18_is_limited_to_the_smallest_queued_slice() {
    for (kernel, want) in [
        (EevdfKernel::V6_12, None),
        (EevdfKernel::V6_18, Some(200 * US)),
    ] {
        let ents = vec![task(0, 1, 0, 0), task(1, 1, 0, 200 * US)];
        let mut h = harness(kernel, 1, ents);
        wake(&mut h, A);
        h.pump();
        wake(&mut h, B);
        h.pump();
        // A was picked alone; B queued later. Re-pick: A is still the earliest eligible? Make
        // the pick happen with both queued.
        h.schedule(0);
        let c = h.curr(0).unwrap();
        let other = A + B - c;
        let x = se(&h, c);
        if let Some(w) = want {
            let s = x.slice.min(se(&h, other).slice).min(w);
            let expect = min_v(
                x.deadline,
                x.vruntime.wrapping_add(calc_delta_fair(s, x.load)),
            );
            assert_eq!(x.vprot, expect, "{kernel:?}");
        } else {
            assert_eq!(x.vlag as u64, x.deadline, "{kernel:?}: the deadline marker");
        }
    }
}

/// ERRATA L6: update_curr reschedules when the vruntime reaches the protection point (6.18),
/// before the deadline.
#[test]
fn update_curr_6_18_reschedules_at_vprot() {
    let ents = vec![task(0, 1, 0, 0), task(1, 1, 0, 200 * US)];
    let mut h = harness(EevdfKernel::V6_18, 1, ents);
    wake(&mut h, A);
    wake(&mut h, B);
    h.pump();
    // B (0.2 ms slice) runs first (earlier deadline); then A is picked with B queued.
    assert_eq!(h.curr(0), Some(B));
    h.advance(200 * US);
    charge(&mut h, 0);
    h.pump();
    assert_eq!(h.curr(0), Some(A), "B ran ahead: A is picked with B queued");
    let a = se(&h, A);
    let prot = vdiff(a.vprot, a.vruntime);
    assert!(prot > 0 && prot < vdiff(a.deadline, a.vruntime));
    h.advance(prot as u64);
    charge(&mut h, 0);
    assert_eq!(h.take_resched(), vec![0]);
}

/// 6.12 (did_preempt_short): once PREEMPT_SHORT has cancelled curr's protection and curr is no
/// longer eligible, update_curr reschedules although curr's request is not used up.
#[test]
fn did_preempt_short_reschedules_an_ineligible_unprotected_curr() {
    let mut h = harness(
        EevdfKernel::V6_12,
        1,
        vec![task(0, 1, 0, 0), task(1, 1, 0, 0)],
    );
    wake_pump(&mut h, A);
    wake_pump(&mut h, B);
    h.advance(100 * US);
    charge(&mut h, 0);
    assert!(h.take_resched().is_empty(), "protected");
    h.sched.cls.fair.cancel_protect_slice(A as usize);
    h.advance(10 * US);
    charge(&mut h, 0);
    assert_eq!(h.take_resched(), vec![0]);
}

/// §2.7: BATCH wakees never preempt; a normal wakee always preempts a SCHED_IDLE curr.
#[test]
fn idle_and_batch_policies() {
    let mut a = task(0, 1, 0, 0);
    a.linux.policy = Policy::Idle;
    let mut h = harness(EevdfKernel::V6_18, 1, vec![a, task(1, 1, 0, 0)]);
    wake_pump(&mut h, A);
    h.advance(10 * US);
    wake(&mut h, B);
    assert_eq!(h.take_resched(), vec![0], "normal preempts idle");
    let a = se(&h, A);
    assert!(
        vdiff(a.vprot, a.vruntime) <= 0,
        "6.18 cancels the protection"
    );

    let mut b = task(1, 1, -10, 0);
    b.linux.policy = Policy::Batch;
    let p = with_features(EevdfKernel::V6_12, |f| f.RUN_TO_PARITY = Some(false));
    let mut h = harness_with(p, 1, vec![task(0, 1, 0, 0), b]);
    wake_pump(&mut h, A);
    h.advance(100 * US);
    wake(&mut h, B);
    assert!(h.take_resched().is_empty(), "batch never preempts");
}

/// NEXT_BUDDY (off by default): a waking task becomes the next buddy, picked first while
/// eligible (6.6 honours it through NEXT_BUDDY itself; 6.12 through PICK_BUDDY).
#[test]
fn next_buddy_is_picked_first_while_eligible() {
    for kernel in [EevdfKernel::V6_6, EevdfKernel::V6_12] {
        let p = with_features(kernel, |f| f.NEXT_BUDDY = Some(true));
        let ents = vec![task(0, 1, 0, 0), task(1, 1, 0, 0), task(2, 1, 0, 0)];
        let mut h = harness_with(p, 1, ents);
        wake_pump(&mut h, A);
        wake_pump(&mut h, B);
        h.advance(10 * US);
        wake(&mut h, C);
        assert_eq!(fair(&h).rqs[0].next, Some(C as usize), "{kernel:?}");
        // B's deadline is earlier than C's, both eligible: the buddy wins anyway.
        assert!(before(se(&h, B).deadline, se(&h, C).deadline));
        h.schedule(0);
        assert_eq!(h.curr(0), Some(C), "{kernel:?}");
        assert_eq!(fair(&h).rqs[0].next, None, "cleared when picked");
    }
    // 6.12 with PICK_BUDDY off ignores the buddy.
    let p = with_features(EevdfKernel::V6_12, |f| {
        f.NEXT_BUDDY = Some(true);
        f.PICK_BUDDY = Some(false);
    });
    let ents = vec![task(0, 1, 0, 0), task(1, 1, 0, 0), task(2, 1, 0, 0)];
    let mut h = harness_with(p, 1, ents);
    wake_pump(&mut h, A);
    wake_pump(&mut h, B);
    h.advance(10 * US);
    wake(&mut h, C);
    h.schedule(0);
    assert_eq!(h.curr(0), Some(B));
}
