//! Burning and the accounting pass (§2.5–2.7, Appendix A1–A4): sampling (3.3) and exact burning
//! (4.20), the tick, the pass by weight, peak and cap, the list order, parking, clipping and
//! deactivation.

use super::*;

/// vCPUs of the given (domain, weight) on `ncpus` flat CPUs, free.
fn weighted(v: Credit1Version, ncpus: usize, doms: &[(u32, u32)]) -> H {
    let ents = doms
        .iter()
        .enumerate()
        .map(|(i, &(d, w))| {
            let mut p = params(i, ncpus);
            p.group = d;
            p.xen.weight = w;
            p
        })
        .collect();
    harness(exact(v), flat(ncpus), ents)
}

#[test]
fn a1_weights_512_and_256_earn_200_and_100_per_pass() {
    // e0: D1 (w 256); e1: D2 (w 512), at the head of the active list (activated last).
    let mut h = weighted(V420, 1, &[(0, 256), (1, 512)]);
    activate(&mut h, 0);
    activate(&mut h, 1);
    assert_eq!(ops(&h).active_doms, vec![1, 0]);
    assert_eq!(ops(&h).weight, 768);
    acct(&mut h);
    assert_eq!((credit(&h, 1), credit(&h, 0)), (200, 100));
    assert_eq!((pri(&h, 0), pri(&h, 1)), (PRI_UNDER, PRI_UNDER));
}

#[test]
fn a2_weight_is_per_domain_in_3_3_and_per_vcpu_in_4_20() {
    // D1 (e0, e1; w 256) ahead of D2 (e2; w 256) in the active list; two CPUs (C = 600).
    for (v, d1, d2, head) in [(V33, 150, 300, 1), (V420, 200, 200, 0)] {
        let mut h = weighted(v, 2, &[(0, 256), (0, 256), (1, 256)]);
        activate(&mut h, 2);
        activate(&mut h, 0);
        activate(&mut h, 1);
        assert_eq!(ops(&h).active_doms, vec![0, 1]);
        let w = if v == V33 { 512 } else { 768 };
        assert_eq!(ops(&h).weight, w, "{v:?}");
        acct(&mut h);
        assert_eq!(
            (credit(&h, 0), credit(&h, 1), credit(&h, 2)),
            (d1, d1, d2),
            "{v:?}"
        );
        // 3.3: D2 could not use its fair share after D1 took extra: it moves to the head.
        assert_eq!(ops(&h).active_doms[0], head, "{v:?}");
    }
}

#[test]
fn a3_peak_hands_the_surplus_to_later_domains_and_the_list_order_matters() {
    // Two CPUs; D1 = e0 (w 256), D2 = e1 (w 768).
    let mut h = weighted(V420, 2, &[(0, 256), (1, 768)]);
    activate(&mut h, 0);
    activate(&mut h, 1);
    assert_eq!(ops(&h).active_doms, vec![1, 0], "order [D2, D1]");
    acct(&mut h);
    assert_eq!((credit(&h, 1), credit(&h, 0)), (300, 300));

    let mut h = weighted(V420, 2, &[(0, 256), (1, 768)]);
    activate(&mut h, 1);
    activate(&mut h, 0);
    assert_eq!(ops(&h).active_doms, vec![0, 1], "order [D1, D2]");
    acct(&mut h);
    assert_eq!((credit(&h, 0), credit(&h, 1)), (150, 300));
    assert_eq!(ops(&h).active_doms, vec![1, 0], "D2 moved to the head");
}

#[test]
fn a4_cap_parks_below_minus_cap_share_and_unparks_at_zero() {
    for v in [V33, V420] {
        let mut p = pinned(0, 1, 0);
        p.xen.cap_pct = 50;
        let mut h = harness(exact(v), flat(1), vec![p]);
        wake(&mut h, 0);
        h.pump();
        assert_eq!(h.curr(0), Some(0));
        activate(&mut h, 0);
        let mut seen = Vec::new();
        for _ in 0..4 {
            if !h.sched.is_parked(EntityId(0)) {
                let c = credit(&h, 0);
                set_credit(&mut h, 0, c - 300); // one busy pass
            }
            acct(&mut h);
            h.pump();
            seen.push((credit(&h, 0), h.sched.is_parked(EntityId(0)), h.curr(0)));
        }
        assert_eq!(
            seen,
            vec![
                (-150, false, Some(0)),
                (-300, true, None),
                (-150, true, None),
                (0, false, Some(0))
            ],
            "{v:?}"
        );
        assert!(!h.paused[0]);
        assert_eq!(
            pri(&h, 0),
            PRI_UNDER,
            "{v:?}: an unparked vCPU is not boosted"
        );
    }
}

#[test]
fn a_parked_vcpu_is_offline_for_the_engine() {
    let mut p = pinned(0, 1, 0);
    p.xen.cap_pct = 10;
    let mut h = harness(exact(V420), flat(1), vec![p]);
    wake(&mut h, 0);
    h.pump();
    activate(&mut h, 0);
    set_credit(&mut h, 0, -300);
    acct(&mut h);
    h.take_pauses();
    assert!(h.paused[0], "the engine is told: offline");
}

#[test]
fn credit_above_a_tslice_deactivates_3_3_to_zero_4_20_to_half() {
    for (v, left) in [(V33, 0), (V420, 275)] {
        let mut h = one_cpu(v, 1);
        activate(&mut h, 0);
        set_credit(&mut h, 0, 250);
        acct(&mut h);
        let u = unit(&h, 0);
        assert_eq!((u.credit, u.active), (left, false), "{v:?}");
        assert_eq!(ops(&h).weight, 0);
        assert!(ops(&h).active_doms.is_empty());
        assert_eq!(u.pri, PRI_UNDER, "an inactive vCPU keeps its priority");
    }
}

#[test]
fn credit_is_clipped_at_minus_one_tslice_at_the_pass() {
    for v in [V33, V420] {
        let mut h = one_cpu(v, 1);
        activate(&mut h, 0);
        set_credit(&mut h, 0, -1000);
        acct(&mut h);
        assert_eq!((credit(&h, 0), pri(&h, 0)), (-300, PRI_OVER), "{v:?}");
    }
}

#[test]
fn inactive_vcpus_earn_nothing_and_keep_their_priority() {
    let mut h = one_cpu(V420, 2);
    activate(&mut h, 0);
    set_pri(&mut h, 1, PRI_BOOST);
    set_credit(&mut h, 1, -50);
    acct(&mut h);
    assert_eq!((credit(&h, 1), pri(&h, 1)), (-50, PRI_BOOST));
    assert_eq!(credit(&h, 0), 300);
}

#[test]
fn v3_3_tick_charges_100_to_whoever_runs_at_the_tick() {
    let mut h = one_cpu(V33, 2);
    wake(&mut h, 0);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    h.advance(ms(9));
    // e0 blocks just before the tick; e1 runs at it.
    wake(&mut h, 1);
    h.block(0);
    h.pump();
    assert_eq!(h.curr(0), Some(1));
    h.advance(ms(1));
    tick(&mut h, 0);
    assert_eq!(credit(&h, 0), 0, "never charged: blocked before the tick");
    assert_eq!(credit(&h, 1), -100, "charged a whole tick for 1 ms");
    assert!(unit(&h, 1).active, "a tick activates the vCPU it catches");
    assert!(!unit(&h, 0).active);
}

#[test]
fn v4_20_burns_exact_run_time_with_a_residual() {
    let mut h = one_cpu(V420, 1);
    wake(&mut h, 0);
    h.pump();
    h.advance(us(1050));
    tick(&mut h, 0);
    let u = unit(&h, 0);
    assert_eq!(u.credit, -10, "10 credits per ms");
    assert_eq!(u.residual, 500_000, "the half credit is kept");
    assert_eq!(
        u.start_time, 1_000_000,
        "start_time advances by the credits' worth"
    );
    h.advance(us(950));
    tick(&mut h, 0);
    // delta = 1 ms: 10 credits + 0.5 residual.
    assert_eq!(credit(&h, 0), -20);
}

#[test]
fn v3_3_accounting_runs_on_the_master_cpu_every_third_tick() {
    let mut h = free(V33, 2, 1);
    activate(&mut h, 0);
    for _ in 0..3 {
        tick(&mut h, 1);
    }
    assert_eq!(ops(&h).runq_sort, 0, "CPU 1 is not the master");
    tick(&mut h, 0);
    tick(&mut h, 0);
    assert_eq!(ops(&h).runq_sort, 0);
    tick(&mut h, 0);
    assert_eq!(ops(&h).runq_sort, 1, "the third master tick ran the pass");
    // Each tick re-arms itself 10 ms later.
    assert!(timers(&mut h).contains(&(1, Some(ms(10)))));
}

#[test]
fn v4_20_accounting_has_its_own_timer_every_tslice() {
    let mut h = free(V420, 1, 1);
    activate(&mut h, 0);
    for _ in 0..3 {
        tick(&mut h, 0);
    }
    assert_eq!(ops(&h).runq_sort, 0, "ticks do not account in 4.x");
    timers(&mut h);
    h.advance(ms(30));
    h.fire_timer(ACCT_TIMER);
    assert_eq!(ops(&h).runq_sort, 1);
    assert_eq!(timers(&mut h), vec![(ACCT_TIMER, Some(ms(60)))]);
}

#[test]
fn the_pool_credit_is_a_tslice_of_credits_per_cpu() {
    let h = free(V33, 4, 1);
    assert_eq!((ops(&h).credits_per_tslice, ops(&h).credit), (300, 1200));
    let p = Credit1Params {
        tslice_ms: Some(10),
        ..exact(V420)
    };
    let h = harness(p, flat(2), vec![params(0, 2)]);
    assert_eq!((ops(&h).credits_per_tslice, ops(&h).credit), (100, 200));
    assert_eq!(ops(&h).tick_period, ms(10) as i64 / 3 / 1000 * 1000);
}
