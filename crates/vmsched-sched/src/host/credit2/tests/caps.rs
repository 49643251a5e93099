//! Caps (§3.17): budget, parking and unparking, the min_time overrun and its debt (X12).

use super::*;

#[test]
fn cap_50_percent_alone_gets_half_a_cpu() {
    let h = capped(50, 1);
    let mut s = Sim::new(h, 0);
    assert_eq!(
        s.sched_timers[0],
        Some(ms(10)),
        "replenishment armed one period after build"
    );
    s.wake(0);
    s.run_until(ms(1000));
    s.finish();
    let busy = s.busy(0, 0, ms(1000));
    assert!(busy.abs_diff(ms(500)) <= ms(6), "busy {busy}");
    // Parks after its 5 ms, unparks at each replenishment.
    assert_eq!(s.runs[0], (0, 0, 0, ms(5)));
    assert_eq!(s.runs[1], (0, 0, ms(10), ms(15)));
}

#[test]
fn cap_parks_and_unparks() {
    let mut h = capped(50, 1);
    assert_eq!(h.take_timers(), vec![(0, Some(ms(10)))]);
    wake(&mut h, 0);
    assert_eq!(
        h.schedule(0),
        Pick {
            next: Some(EntityId(0)),
            slice: Some(ms(5))
        }
    );
    assert_eq!(
        h.sched.ops.doms[0].budget, 0,
        "the whole 5 ms quota was grabbed"
    );
    h.advance(ms(5));
    assert_eq!(
        h.schedule(0),
        Pick {
            next: None,
            slice: None
        }
    );
    assert!(h.sched.is_parked(EntityId(0)));
    assert_eq!(h.sched.ops.doms[0].parked, vec![EntityId(0)]);
    h.advance(ms(5));
    h.fire_timer(0);
    assert!(!h.sched.is_parked(EntityId(0)));
    assert_eq!(h.take_resched(), vec![0]);
    assert_eq!(h.take_timers(), vec![(0, Some(ms(20)))]);
    assert_eq!(h.schedule(0).next, Some(EntityId(0)));
}

#[test]
fn x12_min_time_floor_overruns_the_budget_and_the_debt_is_repaid() {
    // cap 2 %: 200 µs per 10 ms; quota = max(200 µs, 500 µs); slice floor R = 1 ms.
    let h = capped(2, 1);
    let mut s = Sim::new(h, 0);
    s.wake(0);
    s.run_until(ms(300));
    s.finish();
    assert_eq!(
        s.runs[0],
        (0, 0, 0, ms(1)),
        "runs the 1 ms floor on a 200 µs budget"
    );
    // Debt 800 µs: repaid by four replenishments; runnable again at the fifth (50 ms).
    assert_eq!(s.runs[1], (0, 0, ms(50), ms(51)));
    let busy = s.busy(0, 0, ms(300));
    assert_eq!(busy, ms(6), "2 % over 300 ms = 6 ms");
}

#[test]
fn capped_vcpu_with_competition_and_uncapped_peer_takes_the_rest() {
    let h = capped(25, 2);
    let mut s = Sim::new(h, 0);
    s.wake(0);
    s.wake(1);
    s.run_until(ms(2000));
    s.finish();
    let b0 = s.busy(0, 0, ms(2000));
    let b1 = s.busy(1, 0, ms(2000));
    assert!(b0.abs_diff(ms(500)) <= ms(20), "capped at 25 %: {b0}");
    assert!(
        (b0 + b1).abs_diff(ms(2000)) <= ms(1),
        "work conserving: {b0} + {b1}"
    );
}
