//! Credit2 as in Xen 4.2.1 (`version = "4.2.1"`, xen-schedulers.md §3 "[4.2]", ERRATA X12): one
//! test per rule where 4.2.1 differs from 4.20, each named after the rule and, where it helps,
//! checked against the 4.20 behaviour of the same setup.

use super::*;
use vmsched_core::testkit::{placed_on, sockets};

fn v42() -> Credit2Params {
    Credit2Params {
        version: Credit2Version::V4_2_1,
        ..Default::default()
    }
}

fn with_ctx<R>(h: &mut Harness<Credit2Sched>, f: impl FnOnce(&mut Credit2, &mut XenCtx) -> R) -> R {
    let mut ctx = SchedCtx::new(h.now, h.clock, &h.cpus, &h.ents, &mut h.requests);
    h.sched.with_ops(&mut ctx, f)
}

/// Two CPUs of one runqueue: e0 runs on CPU 0, e2 on CPU 1, e1 (last on CPU 1) is queued.
fn two_busy_one_queued(p: Credit2Params) -> Harness<Credit2Sched> {
    let ents = vec![placed_on(0, 2, 0), placed_on(1, 2, 1), placed_on(2, 2, 1)];
    let mut h = harness(p, flat(2), ents);
    // 4.20 picks the first CPU by load at insertion: place them as 4.2.1 does.
    for (e, c) in [(0, 0), (1, 1), (2, 1)] {
        set_processor(&mut h, e, c);
    }
    wake(&mut h, 0);
    h.schedule(0);
    wake(&mut h, 2);
    h.schedule(1);
    wake(&mut h, 1);
    assert_eq!((h.curr(0), h.curr(1)), (Some(0), Some(2)));
    assert_eq!(runq(&h, 0), vec![1]);
    h.take_resched();
    h
}

#[test]
fn max_timer_is_2ms_and_idle_gets_a_2ms_timer() {
    let mut h = flat_harness(v42(), 1, 1);
    assert_eq!(
        h.schedule(0),
        Pick {
            next: None,
            slice: Some(ms(2))
        },
        "4.2.1's csched_runtime gives the idle vCPU MAX_TIMER"
    );
    wake(&mut h, 0);
    assert_eq!(
        h.schedule(0),
        Pick {
            next: Some(EntityId(0)),
            slice: Some(ms(2))
        }
    );
    // 4.20: no timer for idle, 10 ms for a lone vCPU.
    let mut h = flat_harness(Credit2Params::default(), 1, 1);
    assert_eq!(h.schedule(0).slice, None);
    wake(&mut h, 0);
    assert_eq!(h.schedule(0).slice, Some(ms(10)));
}

#[test]
fn runtime_is_the_lead_over_the_head_clamped_to_500us_and_2ms() {
    let mut h = flat_harness(v42(), 1, 2);
    wake(&mut h, 0);
    h.schedule(0);
    h.take_resched();
    wake(&mut h, 1);
    assert!(h.take_resched().is_empty(), "equal credit tickles nobody");
    assert_eq!(runq(&h, 0), vec![1]);
    for (head, slice) in [
        (9 * MS, ms(1)),         // the 1 ms lead
        (9_900 * US, us(500)),   // a 100 µs lead: MIN_TIMER
        (10 * MS, us(500)),      // no lead: MIN_TIMER
        (-5 * MS, ms(2)),        // min(10 ms, 15 ms), then MAX_TIMER
        (8_400 * US, us(1_600)), // 1.6 ms
    ] {
        set_credit(&mut h, 0, 10 * MS);
        set_credit(&mut h, 1, head);
        let pick = h.schedule(0);
        assert_eq!(pick.next, Some(EntityId(0)));
        assert_eq!(pick.slice, Some(slice), "head credit {head}");
    }
}

#[test]
fn burn_keeps_no_remainder_and_has_no_floor() {
    // e1 (weight 300) sets max_weight; e0 (weight 256) burns 300/256 credit per ns, rounded
    // down at every burn in 4.2.1; 4.20 carries the remainder.
    let burned = |p: Credit2Params| {
        let mut ents = vec![params(0, 1), params(1, 1)];
        ents[1].xen.weight = 300;
        let mut h = harness(p, flat(1), ents);
        wake(&mut h, 0);
        h.schedule(0);
        for _ in 0..3 {
            h.advance(1000);
            assert_eq!(h.schedule(0).next, Some(EntityId(0)));
        }
        10 * MS - credit(&h, 0)
    };
    assert_eq!(burned(v42()), 3 * 1171);
    assert_eq!(burned(rl(0)), 1171 + 1172 + 1172);
    // No floor: a tickle burns the running vCPU below CREDIT_MIN.
    let mut h = flat_harness(v42(), 1, 2);
    wake(&mut h, 0);
    h.schedule(0);
    set_credit(&mut h, 0, CREDIT_MIN + 100);
    h.advance(1000);
    wake(&mut h, 1);
    assert_eq!(credit(&h, 0), CREDIT_MIN + 100 - 1000);
}

#[test]
fn x12_reset_burns_nobody_and_forgives_the_running_time() {
    let after = |p: Credit2Params| {
        let ents = vec![placed_on(0, 2, 0), placed_on(1, 2, 1)];
        let mut h = harness(p, flat(2), ents);
        set_processor(&mut h, 0, 0);
        set_processor(&mut h, 1, 1);
        wake(&mut h, 0);
        h.schedule(0);
        wake(&mut h, 1);
        h.schedule(1);
        assert_eq!((h.curr(0), h.curr(1)), (Some(0), Some(1)));
        set_credit(&mut h, 0, -2 * MS);
        set_credit(&mut h, 1, 0);
        h.advance(ms(1));
        h.schedule(1); // e1 burns to −1 ms: the epoch ends
        (credit(&h, 0), credit(&h, 1), h)
    };
    let (c0, c1, mut h) = after(v42());
    assert_eq!(c1, 9 * MS);
    assert_eq!(c0, 8 * MS, "e0's 1 ms of running was not burned");
    assert_eq!(h.sched.ops.units[0].start_time, ms(1) as i64);
    h.advance(us(500));
    h.schedule(0);
    assert_eq!(
        credit(&h, 0),
        7_500 * US,
        "and it is not charged later either"
    );
    // 4.20 burns the running vCPU first.
    let (c0, c1, _) = after(rl(0));
    assert_eq!((c0, c1), (7 * MS, 9 * MS));
}

#[test]
fn reset_looks_at_the_picked_vcpu_only_and_adds_init_once() {
    // e0 continues with −1 credit; the head e1 (of CPU 1, 100 credit) is skipped by migration
    // resistance. 4.2.1 resets on snext's credit alone; 4.20 also looks at the head.
    for (p, reset) in [(v42(), true), (rl(0), false)] {
        let mut h = two_busy_one_queued(p);
        set_credit(&mut h, 0, -1);
        set_credit(&mut h, 1, 100);
        assert_eq!(h.schedule(0).next, Some(EntityId(0)));
        let expect = if reset { CREDIT_INIT + 100 } else { 100 };
        assert_eq!(credit(&h, 1), expect);
    }
    // A vCPU at −10 ms gets INIT once (4.20 gives 2 × INIT when snext sits at CREDIT_MIN).
    for (p, expect) in [(v42(), 0), (rl(0), CREDIT_INIT)] {
        let mut h = flat_harness(p, 1, 1);
        wake(&mut h, 0);
        h.schedule(0);
        set_credit(&mut h, 0, CREDIT_MIN);
        h.schedule(0);
        assert_eq!(credit(&h, 0), expect);
    }
}

#[test]
fn x12_candidate_skip_is_strict() {
    // A queued vCPU of another CPU is taken once its lead reaches MIGRATE_RESIST exactly.
    let mut h = two_busy_one_queued(v42());
    set_credit(&mut h, 0, 5 * MS);
    set_credit(&mut h, 1, 5_500 * US);
    assert_eq!(h.schedule(0).next, Some(EntityId(1)));
    assert_eq!(credit(&h, 1), 5_550 * US, "MIGRATE_COMPENSATION");
    assert_eq!(h.sched.ops.processor(EntityId(1)), CpuId(0));
    // One credit less: skipped, and the scan stops at no one else.
    let mut h = two_busy_one_queued(v42());
    set_credit(&mut h, 0, 5 * MS);
    set_credit(&mut h, 1, 5_500 * US - 1);
    assert_eq!(h.schedule(0).next, Some(EntityId(0)));
}

#[test]
fn candidate_stops_at_the_first_vcpu_not_skipped() {
    // 4.2.1 takes the first not-skipped vCPU only if it beats the default, then stops.
    let mut h = flat_harness(v42(), 1, 3);
    wake(&mut h, 0);
    h.schedule(0);
    wake(&mut h, 1);
    wake(&mut h, 2);
    set_credit(&mut h, 0, 5 * MS);
    set_credit(&mut h, 1, 4 * MS);
    set_credit(&mut h, 2, 3 * MS);
    assert_eq!(h.schedule(0).next, Some(EntityId(0)));
}

#[test]
fn yield_has_no_hook() {
    // 4.20's yield lets a queued vCPU with less credit in; 4.2.1 has no yield hook.
    for (p, next) in [(v42(), 0), (rl(0), 1)] {
        let mut h = flat_harness(p, 1, 2);
        wake(&mut h, 0);
        h.schedule(0);
        wake(&mut h, 1);
        set_credit(&mut h, 0, 5 * MS);
        set_credit(&mut h, 1, 4 * MS);
        assert_eq!(h.yield_(0).next, Some(EntityId(next)));
    }
}

#[test]
fn tickle_tries_its_own_cpu_first_even_with_an_idle_cpu() {
    // e1 (last on CPU 0) wakes while e0 runs there with less credit and CPU 1 idles: 4.2.1
    // tickles CPU 0; 4.20 prefers the idle CPU.
    for (p, cpu) in [(v42(), 0), (rl(0), 1)] {
        let ents = vec![placed_on(0, 2, 0), placed_on(1, 2, 0)];
        let mut h = harness(p, flat(2), ents);
        set_processor(&mut h, 0, 0);
        set_processor(&mut h, 1, 0);
        wake(&mut h, 0);
        h.schedule(0);
        h.take_resched();
        set_credit(&mut h, 0, MS);
        wake(&mut h, 1);
        assert_eq!(h.take_resched(), vec![cpu]);
    }
    // With equal credit it takes the first idle untickled CPU.
    let ents = vec![placed_on(0, 2, 0), placed_on(1, 2, 0)];
    let mut h = harness(v42(), flat(2), ents);
    wake(&mut h, 0);
    h.schedule(0);
    h.take_resched();
    wake(&mut h, 1);
    assert_eq!(h.take_resched(), vec![1]);
}

#[test]
fn tickle_takes_the_lowest_busy_cpu_with_a_lead_of_migrate_resist() {
    // e2 runs on CPU 1 (e1's own) with more credit; e0 on CPU 0 has the lowest credit.
    let setup = |c0: i64| {
        let ents = vec![placed_on(0, 2, 0), placed_on(1, 2, 1), placed_on(2, 2, 1)];
        let mut h = harness(v42(), flat(2), ents);
        wake(&mut h, 0);
        h.schedule(0);
        wake(&mut h, 2);
        h.schedule(1);
        h.take_resched();
        set_credit(&mut h, 0, c0);
        set_credit(&mut h, 1, 5 * MS);
        set_credit(&mut h, 2, 9 * MS);
        wake(&mut h, 1);
        h.take_resched()
    };
    assert_eq!(setup(4_500 * US), vec![0], "a lead of exactly 500 µs");
    assert!(setup(4_500 * US + 1).is_empty(), "a lead 1 short");
}

#[test]
fn runqueues_are_per_socket_with_no_size_cap() {
    let h = harness(v42(), sockets(2, 2), vec![params(0, 4)]);
    let rqs: Vec<usize> = (0..4).map(|c| h.sched.ops.runqueue_of(CpuId(c))).collect();
    assert_eq!(rqs, vec![0, 0, 1, 1]);
    // 32 CPUs on one socket: one runqueue (4.20 caps runqueues at 16 CPUs).
    let h = harness(v42(), flat(32), vec![params(0, 32)]);
    assert_eq!(h.sched.ops.nr_runqueues(), 1);
    let h = harness(Credit2Params::default(), flat(32), vec![params(0, 32)]);
    assert_eq!(h.sched.ops.nr_runqueues(), 2);
    // The runqueue id is the socket id (sockets 0 and 2: slot 1 stays empty), and CPU 0 is
    // always in runqueue 0.
    let mut topo = flat(3);
    topo[0].socket = 2;
    topo[1].socket = 0;
    topo[2].socket = 2;
    let h = harness(v42(), topo, vec![params(0, 3)]);
    let rqs: Vec<usize> = (0..3).map(|c| h.sched.ops.runqueue_of(CpuId(c))).collect();
    assert_eq!(rqs, vec![0, 0, 2]);
    assert!(!h.sched.ops.rq_live(1));
}

#[test]
fn insert_uses_the_initial_cpu_and_ignores_affinity() {
    // Both vCPUs start on CPU 1 (socket 1): 4.2.1 assigns them to its runqueue.
    let mut ents = vec![placed_on(0, 2, 1), placed_on(1, 2, 1)];
    ents[1].hard_affinity = CpuSet::single(CpuId(0));
    let h = harness(v42(), sockets(2, 1), ents);
    for e in 0..2 {
        assert_eq!(h.sched.ops.units[e].rq, 1);
        assert_eq!(h.sched.ops.processor(EntityId(e as u32)), CpuId(1));
        assert_eq!(h.sched.ops.units[e].hard, CpuSet::first_n(2));
    }
}

#[test]
fn choose_cpu_takes_the_least_loaded_runqueue_and_its_first_cpu() {
    let mut h = harness(v42(), sockets(3, 2), vec![placed_on(0, 6, 1)]);
    let one = 1i64 << 18;
    h.sched.ops.units[0].avgload = 4 * one;
    for (r, b) in [(0, 6 * one), (1, 3 * one), (2, 3 * one)] {
        h.sched.ops.rqs[r].b_avgload = b;
    }
    // rq0 counts 6 − 4 = 2 without e0's own load: the least.
    assert_eq!(h.sched.ops.choose_cpu_4_2(EntityId(0)), CpuId(0));
    h.sched.ops.units[0].avgload = one;
    // rq0 at 5; rq1 and rq2 tie at 3: the first, and its first CPU.
    assert_eq!(h.sched.ops.choose_cpu_4_2(EntityId(0)), CpuId(2));
    // A pending balancer request names the runqueue.
    h.sched.ops.units[0].migrate_rq = Some(2);
    assert_eq!(h.sched.ops.choose_cpu_4_2(EntityId(0)), CpuId(4));
}

#[test]
fn x12_balancer_migration_of_a_running_vcpu_is_not_kicked() {
    for (p, kicked) in [(v42(), false), (rl(0), true)] {
        let p = Credit2Params {
            runqueue: RunqueueArrangement::Socket,
            ..p
        };
        let mut h = harness(p, sockets(2, 1), vec![placed_on(0, 2, 0)]);
        if h.sched.ops.units[0].rq != 0 {
            h.sched.ops.runq_deassign(EntityId(0));
            h.sched.ops.units[0].processor = CpuId(0);
            h.sched.ops.runq_assign(EntityId(0), 0);
        }
        wake(&mut h, 0);
        h.schedule(0);
        assert_eq!(h.curr(0), Some(0));
        h.take_resched();
        let now = h.now as i64;
        with_ctx(&mut h, |s, x| s.migrate_to_rq(x, EntityId(0), 1, now));
        let r = h.take_resched();
        assert_eq!(r.contains(&0), kicked, "{r:?}");
        if !kicked {
            // It keeps running until its own slice ends, then moves to runqueue 1.
            assert_eq!(h.curr(0), Some(0));
            h.advance(ms(2));
            h.schedule(0);
            h.pump();
            assert_eq!(h.sched.ops.units[0].rq, 1);
            assert_eq!(h.curr(1), Some(0));
        }
    }
}

#[test]
fn load_average_is_one_weighted_sum_rounded_once() {
    // Window and precision 2^18 samples; avg 3 with load 0 over one sample: 4.2.1 computes
    // ((2^18 − 1) · 3) >> 18 = 2, where 4.20's two-term form keeps 3.
    for (p, expect) in [(v42(), 2), (Credit2Params::default(), 3)] {
        let mut h = flat_harness(p, 1, 1);
        h.now = 1 << 20;
        let t = (h.now >> 10) as i64;
        h.sched.ops.rqs[0].avgload = 3;
        h.sched.ops.rqs[0].load = 0;
        h.sched.ops.rqs[0].load_last_update = t - 1;
        let now = h.now as i64;
        with_ctx(&mut h, |s, x| s.update_load(x, 0, None, 0, now));
        assert_eq!(h.sched.ops.rqs[0].avgload, expect);
    }
    // The window is 2^18 samples (≈ 268 ms): past it the average restarts at load << 18.
    let mut h = flat_harness(v42(), 1, 1);
    h.now = 1 << 30;
    let t = (h.now >> 10) as i64;
    h.sched.ops.rqs[0].avgload = 5;
    h.sched.ops.rqs[0].load = 1;
    h.sched.ops.rqs[0].load_last_update = t - (1 << 18) - 1;
    let now = h.now as i64;
    with_ctx(&mut h, |s, x| s.update_load(x, 0, None, 0, now));
    assert_eq!(h.sched.ops.rqs[0].avgload, 1 << 18);
    assert_eq!(
        h.sched.ops.units[0].avgload,
        1 << 17,
        "new vCPUs start at 0.5"
    );
}

#[test]
fn parameters_4_2_1_lacks_are_refused_with_the_field() {
    let p: Credit2Params = toml::from_str("version = \"4.2.1\"").unwrap();
    assert_eq!(p.version, Credit2Version::V4_2_1);
    assert!(p.validate().is_ok());
    for (p, field) in [
        (
            Credit2Params {
                runqueue: RunqueueArrangement::Core,
                ..v42()
            },
            "runqueue: ",
        ),
        (
            Credit2Params {
                max_cpus_runqueue: 8,
                ..v42()
            },
            "max_cpus_runqueue: ",
        ),
        (
            Credit2Params {
                cap_period_ms: 20,
                ..v42()
            },
            "cap_period_ms: ",
        ),
        (
            Credit2Params {
                load_window_shift: 20,
                ..v42()
            },
            "load_window_shift: ",
        ),
        (
            Credit2Params {
                smt_power_savings: true,
                ..v42()
            },
            "smt_power_savings: ",
        ),
    ] {
        assert!(p.validate().unwrap_err().starts_with(field), "{field}");
    }
}

#[test]
fn scenario_refuses_ratelimit_caps_and_pinning_under_4_2_1() {
    let src = |host: &str, dom: &str| {
        format!(
            "[machine]\npcpus = 2\n[host]\nscheduler = \"credit2\"\nversion = \"4.2.1\"\n{host}\n\
             [[domain]]\nname = \"a\"\nvcpus = 1\n{dom}\n[domain.sched]\nscheduler = \"cfs\"\n"
        )
    };
    let ok = crate::build::load("t.toml", &src("", "weight = 512"), &[]);
    assert!(ok.is_ok(), "{:?}", ok.err());
    let e = crate::build::load("t.toml", &src("ratelimit_us = 0", ""), &[]).unwrap_err();
    assert_eq!(e.field, "host.ratelimit_us", "{e}");
    let set = [("host.ratelimit_us".to_string(), "500".to_string())];
    let e = crate::build::load("t.toml", &src("", ""), &set).unwrap_err();
    assert_eq!(e.field, "host.ratelimit_us", "{e}");
    for (dom, field) in [
        ("cap = 50", "domain.0.cap"),
        ("pcpus = [0]", "domain.0.pcpus"),
        ("vcpu_pcpus = [[1]]", "domain.0.vcpu_pcpus"),
        ("soft_pcpus = [0]", "domain.0.soft_pcpus"),
    ] {
        let e = crate::build::load("t.toml", &src("", dom), &[]).unwrap_err();
        assert_eq!(e.field, field, "{e}");
    }
    // The same fields stay accepted under 4.20.
    let src20 = src("", "cap = 50\npcpus = [0]").replace("version = \"4.2.1\"", "");
    assert!(crate::build::load("t.toml", &src20, &[]).is_ok());
    // Run-time changes: weight yes; cap and ratelimit no.
    let cfg = crate::build::HostSchedConfig::Credit2(v42());
    use vmsched_core::scenario::ConfigCheck;
    assert!(cfg.check_adjust("weight", 512).is_ok());
    assert!(cfg.check_adjust("cap", 50).unwrap_err().contains("4.2.1"));
    assert!(cfg
        .check_adjust("ratelimit_us", 500)
        .unwrap_err()
        .contains("4.2.1"));
}
