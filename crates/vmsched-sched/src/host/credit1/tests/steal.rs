//! Load balancing by stealing (§2.12) and the CPU pick (§2.13, ERRATA X11): a CPU whose best
//! local vCPU is OVER or idle takes a higher-priority queued vCPU from a busy peer.

use super::*;

/// Two CPUs: vCPU 0 runs on CPU 0 (pinned there unless `free0`); vCPU 1 (free) is queued
/// behind it with priority `p1`, without a tickle; CPU 1 idles. With `own` CPU 1 also has a
/// vCPU 2 of its own queued, of priority `own`.
fn setup(v: Credit1Version, free0: bool, p1: Pri, own: Option<Pri>) -> H {
    let e0 = if free0 {
        placed_on(0, 2, 0)
    } else {
        pinned(0, 2, 0)
    };
    let mut h = harness(
        exact(v),
        flat(2),
        vec![e0, placed_on(1, 2, 0), pinned(2, 2, 1)],
    );
    // Wherever 3.3's domctl put it, it runs on CPU 0.
    ops_mut(&mut h).units[0].processor = CpuId(0);
    wake(&mut h, 0);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    h.advance(ms(5));
    for (e, cpu, p) in [(1, 0, Some(p1)), (2, 1, own)] {
        let Some(p) = p else { continue };
        let u = &mut ops_mut(&mut h).units[e];
        u.processor = CpuId(cpu);
        u.migrating = false;
        u.pri = p;
        h.ents[e].runnable = true;
        with_ctx(&mut h, |ops, x| ops.runq_insert(x, EntityId(e as u32)));
    }
    h
}

fn queued_behind(v: Credit1Version) -> H {
    setup(v, false, PRI_OVER, None)
}

#[test]
fn an_idle_cpu_steals_a_higher_priority_vcpu_from_a_busy_peer() {
    for v in [V33, V420] {
        let mut h = queued_behind(v);
        assert_eq!(h.schedule(1).next, Some(EntityId(1)), "{v:?}");
        assert_eq!(ops(&h).processor(EntityId(1)), CpuId(1));
        assert!(runq(&h, 0).is_empty());
    }
}

#[test]
fn a_cpu_whose_head_is_under_or_boost_does_not_steal() {
    for v in [V33, V420] {
        let mut h = setup(v, false, PRI_BOOST, Some(PRI_UNDER));
        assert_eq!(
            h.schedule(1).next,
            Some(EntityId(2)),
            "{v:?}: its own UNDER head"
        );
        assert_eq!(runq(&h, 0), vec![1]);
    }
}

#[test]
fn only_a_strictly_higher_priority_vcpu_is_stolen() {
    for v in [V33, V420] {
        let mut h = setup(v, false, PRI_OVER, Some(PRI_OVER));
        assert_eq!(
            h.schedule(1).next,
            Some(EntityId(2)),
            "{v:?}: OVER is no better"
        );
        assert_eq!(runq(&h, 0), vec![1], "{v:?}");
        let mut h = setup(v, false, PRI_UNDER, Some(PRI_OVER));
        assert_eq!(
            h.schedule(1).next,
            Some(EntityId(1)),
            "{v:?}: UNDER beats OVER"
        );
        assert_eq!(runq(&h, 1), vec![2], "{v:?}");
    }
}

#[test]
fn nothing_is_stolen_from_a_peer_running_idle() {
    // CPU 1 idles with vCPU 1 queued on it (tickled, not yet rescheduled): CPU 0 does not take
    // it, CPU 1 will pick it itself.
    for v in [V33, V420] {
        let mut h = harness(exact(v), flat(2), vec![pinned(0, 2, 0), placed_on(1, 2, 1)]);
        let u = &mut ops_mut(&mut h).units[1];
        u.processor = CpuId(1);
        u.pri = PRI_UNDER;
        h.ents[1].runnable = true;
        with_ctx(&mut h, |ops, x| ops.runq_insert(x, EntityId(1)));
        ops_mut(&mut h).idlers.remove(CpuId(1));
        ops_mut(&mut h).pcpus[1].nr_runnable = 2;
        h.advance(ms(5));
        assert_eq!(h.schedule(0).next, None, "{v:?}");
        assert_eq!(runq(&h, 1), vec![1]);
    }
}

#[test]
fn stealing_respects_hard_affinity() {
    for v in [V33, V420] {
        let mut h = queued_behind(v);
        ops_mut(&mut h).units[1].hard = CpuSet::single(CpuId(0));
        assert_eq!(h.schedule(1).next, None, "{v:?}");
        assert_eq!(runq(&h, 0), vec![1]);
    }
}

#[test]
fn v4_20_a_cpu_steals_at_most_once_per_load_balance_ratelimit() {
    let mut h = queued_behind(V420);
    ops_mut(&mut h).pcpus[1].last_load_balance = h.now as i64 - us(500) as i64;
    assert_eq!(h.schedule(1).next, None, "balanced 0.5 ms ago: stays idle");
    h.advance(us(600));
    assert_eq!(
        h.schedule(1).next,
        Some(EntityId(1)),
        "1.1 ms after: steals"
    );
}

#[test]
fn v4_20_peers_with_one_runnable_vcpu_are_skipped() {
    let mut h = queued_behind(V420);
    ops_mut(&mut h).pcpus[0].nr_runnable = 1;
    assert_eq!(h.schedule(1).next, None);
}

#[test]
fn v4_20_yielded_vcpus_are_not_stolen() {
    let mut h = queued_behind(V420);
    ops_mut(&mut h).units[1].yield_ = true;
    assert_eq!(h.schedule(1).next, None);
    // 3.3 has no such rule (and no flag).
    let mut h = queued_behind(V33);
    ops_mut(&mut h).units[1].yield_ = true;
    assert_eq!(h.schedule(1).next, Some(EntityId(1)));
}

#[test]
fn v4_20_vcpu_migration_delay_keeps_cache_hot_vcpus_home() {
    let mut h = setup(V420, false, PRI_UNDER, None);
    ops_mut(&mut h).migr_delay = ms(10) as i64;
    ops_mut(&mut h).units[1].last_sched_time = ms(1) as i64;
    assert_eq!(h.schedule(1).next, None, "ran 4 ms ago: cache-hot");
    h.advance(ms(8));
    assert_eq!(h.schedule(1).next, Some(EntityId(1)), "12 ms ago: stolen");
}

#[test]
fn v4_20_the_tick_moves_a_running_vcpu_with_waiters_to_an_idle_cpu() {
    // vCPU 0 (free) runs on CPU 0 with vCPU 1 queued there; CPU 1 idles. The tick's CPU pick
    // finds CPU 1 better (CPU 0 has a waiter): vCPU 0 is marked migrating and CPU 0
    // rescheduled; vCPU 1 runs on CPU 0, vCPU 0 ends up on CPU 1.
    let mut h = setup(V420, true, PRI_UNDER, None);
    activate(&mut h, 0);
    tick(&mut h, 0);
    assert!(h.sched.ops.units[0].pri == PRI_UNDER);
    h.take_pauses();
    assert!(h.paused[0], "migrating: paused for the core");
    h.pump();
    assert_eq!((h.curr(0), h.curr(1)), (Some(1), Some(0)));
    assert!(!h.paused[0]);
    assert_eq!(
        pri(&h, 0),
        PRI_UNDER,
        "the wake that ends a migration is not boosted"
    );
}

#[test]
fn x11_v3_3_on_one_socket_without_smt_the_tick_never_moves_a_running_vcpu() {
    let mut h = setup(V33, true, PRI_UNDER, None);
    activate(&mut h, 0);
    tick(&mut h, 0);
    assert!(h.take_resched().is_empty());
    h.take_pauses();
    assert!(!h.paused[0]);
}

#[test]
fn the_cpu_pick_needs_twice_the_idlers_across_sockets_from_4_1() {
    // Two sockets of two cores; CPUs 0 and 1 (socket 0) busy, CPUs 2 and 3 idle. From CPU 0
    // (counted idle: 3.3 always, 4.20 as v's own CPU with nothing queued): socket 0 has 1 idler,
    // socket 1 has 2. 3.3 moves (1 < 2); 4.20 does not (1 × 2 < 2 fails).
    for (v, want) in [(V33, 2), (V420, 0)] {
        let ents = vec![pinned(0, 4, 0), placed_on(1, 4, 0), pinned(2, 4, 1)];
        let mut h = harness(exact(v), sockets(2, 2), ents);
        wake(&mut h, 0);
        wake(&mut h, 2);
        h.pump();
        assert_eq!((h.curr(0), h.curr(1)), (Some(0), Some(2)));
        ops_mut(&mut h).units[1].processor = CpuId(0);
        let cpu = with_ctx(&mut h, |ops, x| ops.cpu_pick(x, EntityId(1), false));
        assert_eq!(cpu, CpuId(want), "{v:?}");
    }
}

#[test]
fn v3_3_a_new_domain_starts_on_the_least_populated_cpu_off_cpu_0s_core() {
    // Flat: ties go to the higher CPU and CPU 0 only wins when strictly emptier.
    let mut ents: Vec<EntityParams> = (0..3).map(|i| params(i, 4)).collect();
    for i in 0..2 {
        let mut p = params(3 + i, 4);
        p.group = 3;
        ents.push(p);
    }
    let h = harness(exact(V33), flat(4), ents);
    let cpus: Vec<u32> = (0..5).map(|e| ops(&h).processor(EntityId(e)).0).collect();
    assert_eq!(
        cpus,
        vec![3, 2, 1, 0, 1],
        "vCPU 1 of the last domain follows its vCPU 0"
    );
    // SMT pairs: only second threads, never CPU 0's core.
    let h = harness(exact(V33), smt_pairs(4), vec![params(0, 4)]);
    assert_eq!(ops(&h).processor(EntityId(0)), CpuId(3));
    // Pinned elsewhere: the next CPU of its hard affinity.
    let h = harness(exact(V33), flat(4), vec![pinned(0, 4, 1)]);
    assert_eq!(ops(&h).processor(EntityId(0)), CpuId(1));
}
