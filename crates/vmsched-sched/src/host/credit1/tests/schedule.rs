//! `do_schedule` (§2.11): the slice (3.3: a fixed 30 ms, idle too; 4.20: the tslice, idle none),
//! the 4.20 ratelimit (the remainder, at least 100 µs; not for a yielder, ERRATA X11) and the
//! 4.20 ticker that stops while the CPU idles.

use super::*;

#[test]
fn v3_3_the_slice_is_a_fixed_30_ms_for_the_idle_vcpu_too() {
    let mut h = one_cpu(V33, 1);
    wake(&mut h, 0);
    assert_eq!(h.schedule(0).slice, Some(ms(30)));
    h.advance(ms(1));
    let pick = h.block(0);
    assert_eq!(
        pick,
        Pick {
            next: None,
            slice: Some(ms(30))
        }
    );
}

#[test]
fn v4_20_the_slice_is_the_tslice_and_idle_gets_no_timer() {
    let p = Credit1Params {
        tslice_ms: Some(5),
        ..exact(V420)
    };
    let mut h = harness(p, flat(1), vec![pinned(0, 1, 0)]);
    wake(&mut h, 0);
    assert_eq!(h.schedule(0).slice, Some(ms(5)));
    h.advance(ms(2));
    assert_eq!(
        h.block(0),
        Pick {
            next: None,
            slice: None
        }
    );
}

/// Two vCPUs on one CPU; vCPU 0 switched in at 0, vCPU 1 queued BOOST (beats it).
fn contended(p: Credit1Params) -> H {
    let mut h = harness(p, flat(1), vec![pinned(0, 1, 0), pinned(1, 1, 0)]);
    wake(&mut h, 0);
    h.pump();
    ops_mut(&mut h).units[1].migrating = false;
    h
}

#[test]
fn v4_20_ratelimit_keeps_the_current_for_the_rest_of_the_window() {
    let mut h = contended(exact(V420));
    h.advance(us(300));
    wake(&mut h, 1);
    assert_eq!(
        h.take_resched(),
        vec![0],
        "BOOST beats UNDER: the CPU is tickled"
    );
    let pick = h.schedule(0);
    assert_eq!(
        pick,
        Pick {
            next: Some(EntityId(0)),
            slice: Some(us(700))
        }
    );
    h.advance(us(700));
    assert_eq!(
        h.schedule(0).next,
        Some(EntityId(1)),
        "past the window: preempted"
    );
}

#[test]
fn v4_20_ratelimit_gives_at_least_the_100_us_minimum_timer() {
    let mut h = contended(exact(V420));
    h.advance(us(10));
    wake(&mut h, 1);
    let pick = h.schedule(0);
    assert_eq!(
        pick,
        Pick {
            next: Some(EntityId(0)),
            slice: Some(us(100))
        }
    );
}

#[test]
fn v4_20_ratelimit_0_is_off() {
    let p = Credit1Params {
        ratelimit_us: Some(0),
        ..exact(V420)
    };
    let mut h = contended(p);
    h.advance(us(10));
    wake(&mut h, 1);
    assert_eq!(h.schedule(0).next, Some(EntityId(1)));
}

#[test]
fn x11_v4_20_a_yield_bypasses_the_ratelimit() {
    let mut h = contended(exact(V420));
    wake(&mut h, 1);
    h.take_resched();
    h.advance(us(300));
    assert_eq!(h.yield_(0).next, Some(EntityId(1)));
}

#[test]
fn the_ratelimit_is_clamped_to_the_tslice_as_at_boot() {
    let p = Credit1Params {
        tslice_ms: Some(2),
        ratelimit_us: Some(5000),
        ..exact(V420)
    };
    assert_eq!(p.ratelimit_us(), 2000);
    assert_eq!(exact(V33).ratelimit_us(), 0, "3.3 has none");
    assert_eq!(exact(V420).ratelimit_us(), 1000, "the default");
}

#[test]
fn v4_20_the_ticker_stops_while_idle_and_restarts_on_the_grid() {
    let mut h = one_cpu(V420, 1);
    h.pump();
    assert_eq!(h.sched_timers[1], Some(ms(10)), "armed at bring-up");
    h.advance(us(4200));
    wake(&mut h, 0);
    h.pump();
    assert_eq!(
        h.sched_timers[1],
        Some(ms(10)),
        "from idle: the next multiple of 10 ms"
    );
    h.advance(us(4200));
    h.block(0);
    h.pump();
    assert_eq!(h.sched_timers[1], None, "stopped when going idle");
    h.advance(ms(3));
    wake(&mut h, 0);
    h.pump();
    assert_eq!(h.sched_timers[1], Some(ms(20)), "restarted on the grid");
}

#[test]
fn v3_3_the_ticker_runs_while_idle() {
    let mut h = one_cpu(V33, 1);
    wake(&mut h, 0);
    h.pump();
    h.advance(ms(1));
    h.block(0);
    h.pump();
    assert_eq!(h.sched_timers[1], Some(ms(10)), "still armed");
}
