//! Load tracking (§3.14) and load balancing (§3.16, X12).

use super::*;

#[test]
fn load_tracking_follows_the_ewma() {
    let mut h = flat_harness(Credit2Params::default(), 1, 1);
    assert_eq!(
        h.sched.ops.units[0].avgload,
        1 << 17,
        "new vCPUs start at 0.5"
    );
    h.advance(1 << 20); // t = 2^20 ns → sample 1024
    wake(&mut h, 0);
    let rq = &h.sched.ops.rqs[0];
    assert_eq!((rq.load, rq.load_last_update), (1, 1024));
    // A runqueue sampled after more than a window restarts at load << P (here 0).
    assert_eq!(rq.avgload, 0);
    h.schedule(0);
    h.advance(1 << 29); // half a window (2^19 samples) later
    h.block(0);
    let rq = &h.sched.ops.rqs[0];
    assert_eq!(rq.load, 0);
    // avg += d·(1<<18)>>20 − d·0>>20 with d = 2^19: 2^17.
    assert_eq!(rq.avgload, 1 << 17);
    // The vCPU was runnable the whole time (sample 1): 0.5 + (1 − 0.5)·(1/2)... via the
    // wake (sample 0 over 1024 samples) then the block (sample 1 over 2^19).
    let u = &h.sched.ops.units[0];
    let after_wake: i64 = (1 << 17) - ((1024 * (1 << 17)) >> 20);
    let expect =
        after_wake + (((1i64 << 19) * (1 << 18)) >> 20) - (((1i64 << 19) * after_wake) >> 20);
    assert_eq!(u.avgload, expect);
    // Idle for another half window: the average decays by half (sample 0).
    h.advance(1 << 29);
    wake(&mut h, 0);
    assert_eq!(h.sched.ops.rqs[0].avgload, 1 << 16);
    assert_eq!(h.sched.ops.rqs[0].load, 1);
}

fn with_ctx<R>(h: &mut Harness<Credit2Sched>, f: impl FnOnce(&mut Credit2, &mut XenCtx) -> R) -> R {
    let mut ctx = SchedCtx::new(h.now, h.clock, &h.cpus, &h.ents, &mut h.requests);
    h.sched.with_ops(&mut ctx, f)
}

#[test]
fn x12_balance_overload_test_reads_the_last_runqueue() {
    // Three single-CPU runqueues. rq0 holds e0, e1 (0.65 each, b_avgload 1.3, overloaded);
    // rq1 and rq2 sit at 0.5. Balancing from CPU 2: the max-delta runqueue is rq0 (delta 0.8),
    // but the over/under-load test reads the last runqueue of the list, rq2 itself (0.5 < 1):
    // the under-load tolerance (1.0) applies and nothing moves. From CPU 0, the same test reads
    // rq2 against rq0 (1.3 >= 1): the over-load tolerance (0.125) applies and a vCPU moves.
    let one = 1i64 << 18;
    let setup = || {
        let p = Credit2Params {
            runqueue: RunqueueArrangement::Cpu,
            ..Default::default()
        };
        let mut h = flat_harness(p, 3, 3);
        assert_eq!(
            (0..3).map(|e| h.sched.ops.units[e].rq).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        h.sched.ops.runq_deassign(EntityId(1));
        h.sched.ops.units[1].processor = CpuId(0);
        h.sched.ops.runq_assign(EntityId(1), 0);
        h.now = ms(1);
        let t = (h.now >> 10) as i64;
        for (e, l) in [(0, one * 65 / 100), (1, one * 65 / 100), (2, one / 2)] {
            h.sched.ops.units[e].avgload = l;
            h.sched.ops.units[e].load_last_update = t;
        }
        for (r, b) in [(0, one * 130 / 100), (1, one / 2), (2, one / 2)] {
            h.sched.ops.rqs[r].b_avgload = b;
            h.sched.ops.rqs[r].avgload = b;
            h.sched.ops.rqs[r].load_last_update = t;
        }
        h
    };
    let rqs =
        |h: &Harness<Credit2Sched>| (0..3).map(|e| h.sched.ops.units[e].rq).collect::<Vec<_>>();
    let mut h = setup();
    let now = h.now as i64;
    with_ctx(&mut h, |s, ctx| s.balance_load(ctx, CpuId(2), now));
    assert_eq!(rqs(&h), vec![0, 0, 2]);
    let mut h = setup();
    with_ctx(&mut h, |s, ctx| s.balance_load(ctx, CpuId(0), now));
    assert_ne!(rqs(&h), vec![0, 0, 2]);
}

#[test]
fn reset_tickles_a_running_capped_vcpu_out_of_budget() {
    let mut ents = vec![params(0, 2), params(1, 2)];
    ents[0].xen.cap_pct = 50;
    let mut h = harness(rl(0), flat(2), ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.deliver_resched();
    let (c0, c1) = (h.ents[0].on_cpu.unwrap().0, h.ents[1].on_cpu.unwrap().0);
    assert_eq!(h.sched.ops.units[0].budget, ms(5) as i64);
    h.advance(ms(6));
    set_credit(&mut h, 1, MS);
    h.take_resched();
    h.schedule(c1); // e1 burns to -5 ms: reset; e0 is burned and found over budget
    assert_eq!(h.sched.ops.units[0].budget, -MS);
    assert_eq!(h.take_resched(), vec![c0]);
    h.schedule(c0);
    assert_eq!(h.curr(c0), None, "parked: the pool is empty");
    assert!(h.sched.is_parked(EntityId(0)));
}

#[test]
fn balancer_pushes_a_vcpu_to_an_idle_runqueue_at_reset() {
    // Two single-CPU runqueues; three busy vCPUs, all assigned to runqueue 0.
    let p = Credit2Params {
        runqueue: RunqueueArrangement::Cpu,
        ratelimit_us: 0,
        ..Default::default()
    };
    let h = flat_harness(p, 2, 3);
    let mut s = Sim::new(h, 0);
    for e in 0..3 {
        if s.h.sched.ops.units[e].rq != 0 {
            let sch = &mut s.h.sched.ops;
            sch.runq_deassign(EntityId(e as u32));
            sch.units[e].processor = CpuId(0);
            sch.runq_assign(EntityId(e as u32), 0);
        }
    }
    for e in 0..3 {
        s.wake(e);
    }
    s.run_until(ms(2000));
    s.finish();
    let on1: Vec<u32> = (0..3)
        .filter(|&e| s.h.sched.ops.units[e as usize].rq == 1)
        .collect();
    assert!(!on1.is_empty(), "someone was moved to runqueue 1");
    let busy1: u64 = (0..3)
        .map(|e| {
            s.runs
                .iter()
                .filter(|r| r.0 == e && r.1 == 1)
                .map(|r| r.3 - r.2)
                .sum::<u64>()
        })
        .sum();
    assert!(busy1 > ms(1500), "CPU 1 was put to work: {busy1}");
}
