//! §3.3: RT throttling (`sched_rt_runtime_us` of every `sched_rt_period_us`, per CPU).
use super::*;

/// A FIFO hog and a fair task on one CPU: in every 1 s period the hog gets at most the 950 ms
/// runtime (plus one tick, the throttle's granularity) and the fair task the rest.
#[test]
fn rt_never_exceeds_its_runtime_per_period() {
    let mut h = harness(1, vec![fifo(params(0, 1), 50), params(1, 1)]);
    fork(&mut h, 1);
    h.pump();
    wake(&mut h, 0);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    for period in 0..4 {
        let before = (h.run_ns[0], h.run_ns[1]);
        h.run_for(ms(1000), ms(1));
        let (rt, fair) = (h.run_ns[0] - before.0, h.run_ns[1] - before.1);
        assert!(
            rt <= ms(950) + ms(4),
            "period {period}: RT ran {rt} ns of 1 s"
        );
        assert!(rt >= ms(940), "period {period}: RT ran only {rt} ns");
        assert_eq!(rt + fair, ms(1000), "period {period}: the CPU never idles");
    }
}

/// While throttled the RT queue keeps its tasks but gives nothing to pick; the period timer
/// unthrottles it and reschedules the CPU, and the hog preempts the fair task again.
#[test]
fn the_period_timer_unthrottles() {
    let mut h = harness(1, vec![fifo(params(0, 1), 50), params(1, 1)]);
    fork(&mut h, 1);
    h.pump();
    wake(&mut h, 0);
    h.pump();
    h.run_for(ms(960), ms(1));
    assert!(h.sched.cls.rt.throttled(CpuId(0)));
    assert_eq!(
        h.curr(0),
        Some(1),
        "the fair task runs while RT is throttled"
    );
    assert_eq!(h.sched.cls.rt.rqs[0].nr_running, 1, "the hog stays queued");
    h.run_for(ms(45), ms(1));
    assert!(!h.sched.cls.rt.throttled(CpuId(0)));
    assert_eq!(h.curr(0), Some(0));
}

/// `sched_rt_runtime_us = -1`: no throttling, and no period timer.
#[test]
fn minus_one_disables_throttling() {
    let mut p = CfsParams::default();
    p.rt.sched_rt_runtime_us = -1;
    let mut h = harness_with(p, 1, vec![fifo(params(0, 1), 50), params(1, 1)]);
    fork(&mut h, 1);
    wake(&mut h, 0);
    h.pump();
    h.run_for(ms(3000), ms(1));
    assert_eq!(h.run_ns[1], 0, "the fair task starves");
    assert!(h.sched_timers.iter().all(Option::is_none));
}

/// The period timer starts with the first RT enqueue and stops once a period passes with no
/// RT task and no RT run time left anywhere.
#[test]
fn the_period_timer_stops_when_rt_is_idle() {
    let mut h = harness(1, vec![fifo(params(0, 1), 50)]);
    assert!(h.sched_timers.iter().all(Option::is_none));
    wake(&mut h, 0);
    h.pump();
    assert!(
        h.sched_timers.iter().any(Option::is_some),
        "armed at enqueue"
    );
    h.run_for(ms(100), ms(1));
    h.block(0);
    h.pump();
    // The next expiry takes the 100 ms off; the one after finds nothing and stops.
    h.run_for(ms(2100), ms(1));
    assert!(h.sched_timers.iter().all(Option::is_none));
    assert_eq!(h.sched.cls.rt.rt_time(CpuId(0)), 0);
}

/// No borrowing between CPUs (RT_RUNTIME_SHARE off): each CPU's hog is throttled on its own
/// budget even when the other CPU's RT queue is idle.
#[test]
fn each_cpu_has_its_own_runtime() {
    let ents = vec![fifo(pinned(0, 2, 0), 50), params(1, 2), pinned(2, 2, 1)];
    let mut h = harness(2, ents);
    fork(&mut h, 2);
    wake(&mut h, 0);
    h.pump();
    h.run_for(ms(2000), ms(1));
    assert!(h.run_ns[0] <= ms(2 * 950 + 8), "RT ran {}", h.run_ns[0]);
}
