//! §3.6: the 6.12 fair server (50 ms every 1 s, deferred), instead of RT throttling.
use super::*;

fn with_fair_server(n: usize, ents: Vec<EntityParams>) -> Harness<CfsSched> {
    let mut p = CfsParams::default();
    p.rt.fair_server = Some(true);
    harness_with(p, n, ents)
}

/// Under a FIFO hog, the fair task gets the server's 50 ms in every 1 s period, at the end of
/// the period (after 950 ms of starvation: the zero-laxity time), and RT keeps the rest.
#[test]
fn fair_tasks_get_fifty_ms_a_second_under_rt_load() {
    let mut h = with_fair_server(1, vec![fifo(params(0, 1), 50), params(1, 1)]);
    fork(&mut h, 1);
    h.pump();
    wake(&mut h, 0);
    h.pump();
    h.run_for(ms(940), ms(1));
    assert_eq!(h.curr(0), Some(0));
    assert!(h.run_ns[1] < ms(1), "deferred: the fair task waits");
    h.run_for(ms(30), ms(1));
    assert_eq!(
        h.curr(0),
        Some(1),
        "the server runs the fair task ahead of RT"
    );
    for period in 1..4 {
        let before = h.run_ns[1];
        h.run_for(ms(1000), ms(1));
        let fair = h.run_ns[1] - before;
        assert!(
            (ms(46)..=ms(54)).contains(&fair),
            "period {period}: fair ran {fair} ns"
        );
    }
    assert_eq!(h.run_ns[0] + h.run_ns[1], h.now, "the CPU never idles");
}

/// No fair work, no server: RT is not throttled at all (unlike §3.3).
#[test]
fn rt_alone_is_not_throttled() {
    let mut h = with_fair_server(1, vec![fifo(params(0, 1), 50)]);
    wake(&mut h, 0);
    h.pump();
    h.run_for(ms(3000), ms(1));
    assert_eq!(h.run_ns[0], ms(3000));
    assert!(!h.sched.cls.rt.throttled(CpuId(0)));
}

/// A fair task that runs on its own uses the server's runtime in the background: the server
/// never has to run, and restarts its period each time; once an RT hog arrives, the fair task
/// waits for the zero-laxity time and then gets its 50 ms per period.
#[test]
fn background_fair_time_keeps_the_server_deferred() {
    let mut h = with_fair_server(1, vec![params(0, 1), fifo(params(1, 1), 50)]);
    fork(&mut h, 0);
    h.pump();
    for _ in 0..150 {
        h.run_for(ms(10), ms(1));
        let s = h.sched.cls.rt.fair_server.as_ref().unwrap()[0];
        assert!(s.active && s.deferred && !s.running, "{s:?}");
    }
    wake(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(1));
    let before = h.run_ns[0];
    h.run_for(ms(3000), ms(1));
    let fair = h.run_ns[0] - before;
    assert!((ms(100)..=ms(160)).contains(&fair), "fair ran {fair} ns");
}

/// With the fair server on, the RT sysctls are accepted but do not throttle.
#[test]
fn the_fair_server_replaces_throttling() {
    let mut h = with_fair_server(1, vec![fifo(params(0, 1), 50), params(1, 1)]);
    fork(&mut h, 1);
    wake(&mut h, 0);
    h.pump();
    h.run_for(ms(960), ms(1));
    assert!(!h.sched.cls.rt.throttled(CpuId(0)));
    assert_eq!(h.sched.cls.rt.rt_time(CpuId(0)), 0);
}

#[test]
fn bad_fair_server_parameters_are_refused_by_field() {
    let mut p = RtParams {
        fair_server_runtime_ns: 2_000_000_000,
        ..RtParams::default()
    };
    assert!(p
        .validate()
        .unwrap_err()
        .starts_with("fair_server_runtime_ns:"));
    p.fair_server_runtime_ns = 0;
    p.fair_server_period_ns = 10;
    assert!(p
        .validate()
        .unwrap_err()
        .starts_with("fair_server_period_ns:"));
}

/// The fair server follows an EEVDF guest's kernel: 6.6 throttles RT as 5.10 does (a lone FIFO
/// hog gets 950 ms of each second and the CPU idles the rest), 6.12 and 6.18 run the fair
/// server instead (no fair work: the hog keeps the whole CPU); an explicit setting wins.
#[test]
fn an_eevdf_guests_fair_server_follows_its_kernel() {
    use crate::guest::eevdf::{Eevdf, EevdfKernel, EevdfParams};
    let hog_share = |p: EevdfParams| {
        let t = flat(1);
        let mut h = Harness::with_topology(Eevdf::sched(p, &t), t, vec![fifo(params(0, 1), 50)]);
        h.wake(0, WakeInfo::default());
        h.pump();
        h.run_for(ms(1000), ms(1));
        let before = h.run_ns[0];
        h.run_for(ms(3000), ms(1));
        (h.run_ns[0] - before) as f64 / ms(3000) as f64
    };
    let throttled = hog_share(EevdfParams::new(EevdfKernel::V6_6));
    assert!((0.94..=0.96).contains(&throttled), "6.6: {throttled}");
    for k in [EevdfKernel::V6_12, EevdfKernel::V6_18] {
        let s = hog_share(EevdfParams::new(k));
        assert!(s > 0.999, "{k:?}: the fair server, no throttling: {s}");
        let mut p = EevdfParams::new(k);
        p.rt.fair_server = Some(false);
        let s = hog_share(p);
        assert!((0.94..=0.96).contains(&s), "{k:?} without the server: {s}");
    }
}
