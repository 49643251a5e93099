//! Run-time changes (§2.19, ERRATA X11): `xl sched-credit -d -w/-c` (3.3 re-boosts the domain's
//! vCPUs), `-s -t/-r` (4.x: the slice recomputes the tick and credits), pause and removal.

use super::*;

#[test]
fn a_weight_change_adjusts_the_global_weight_of_an_active_domain_at_once() {
    for (v, want) in [(V33, 512 + 256), (V420, 2 * 512)] {
        // Domain 0 with two vCPUs, both active; domain 1 inactive.
        let mut e1 = params(1, 2);
        e1.group = 0;
        let mut e2 = params(2, 2);
        e2.group = 1;
        let mut h = harness(exact(v), flat(2), vec![params(0, 2), e1, e2]);
        activate(&mut h, 0);
        activate(&mut h, 1);
        for e in 0..2 {
            h.ents[e].params.xen.weight = 512;
        }
        h.adjust(0);
        let w = if v == V33 { want - 256 } else { want };
        assert_eq!(ops(&h).weight, w, "{v:?}");
        assert_eq!(ops(&h).doms[0].weight, 512);
        // The inactive domain's change is only stored.
        h.ents[2].params.xen.weight = 1000;
        h.adjust(1);
        assert_eq!(ops(&h).weight, w);
        assert_eq!(ops(&h).doms[1].weight, 1000);
    }
}

#[test]
fn a_cap_change_is_stored_and_enforced_at_the_next_pass() {
    let mut h = one_cpu(V420, 1);
    wake(&mut h, 0);
    h.pump();
    activate(&mut h, 0);
    h.ents[0].params.xen.cap_pct = 10;
    h.adjust(0);
    assert_eq!(ops(&h).doms[0].cap, 10);
    assert!(!h.sched.is_parked(EntityId(0)), "nothing until the pass");
    set_credit(&mut h, 0, -100);
    acct(&mut h);
    assert!(
        h.sched.is_parked(EntityId(0)),
        "cap 10: earns 30, parked below -30"
    );
}

#[test]
fn x11_v3_3_a_domain_change_reboosts_its_vcpus() {
    let mut h = one_cpu(V33, 3);
    wake_all(&mut h);
    for e in 0..3 {
        set_pri(&mut h, e, PRI_UNDER);
    }
    assert_eq!(h.curr(0), Some(0));
    h.adjust(1);
    assert_eq!(pri(&h, 1), PRI_BOOST, "queued: re-woken");
    assert_eq!(runq(&h, 0), vec![1, 2]);
    assert_eq!(h.take_resched(), vec![0], "and it tickles");
    h.adjust(0);
    assert_eq!(pri(&h, 0), PRI_BOOST, "running: back BOOST");
    // 4.20 does not pause.
    let mut h = one_cpu(V420, 2);
    wake_all(&mut h);
    ops_mut(&mut h).units[1].migrating = false;
    h.adjust(1);
    assert_eq!(pri(&h, 1), PRI_UNDER);
}

#[test]
fn v4_20_a_tslice_change_recomputes_the_tick_and_the_credits() {
    let mut h = free(V420, 2, 1);
    with_ctx(&mut h, |o, x| o.adjust_global(x, GlobalParam::TsliceMs(12)));
    let o = ops(&h);
    assert_eq!(
        (o.tslice, o.tick_period, o.credits_per_tslice, o.credit),
        (ms(12) as i64, ms(4) as i64, 120, 240)
    );
    with_ctx(&mut h, |o, x| {
        o.adjust_global(x, GlobalParam::RatelimitUs(500))
    });
    assert_eq!(ops(&h).ratelimit, us(500) as i64);
    // Xen refuses a ratelimit above the slice, and a slice below the ratelimit.
    with_ctx(&mut h, |o, x| {
        o.adjust_global(x, GlobalParam::RatelimitUs(20_000))
    });
    assert_eq!(ops(&h).ratelimit, us(500) as i64);
    with_ctx(&mut h, |o, x| {
        o.adjust_global(x, GlobalParam::TsliceMs(1000))
    });
    with_ctx(&mut h, |o, x| {
        o.adjust_global(x, GlobalParam::RatelimitUs(20_000))
    });
    assert_eq!(ops(&h).ratelimit, ms(20) as i64);
    assert_eq!(ops(&h).credits_per_tslice, 10_000);
}

#[test]
fn a_removed_vcpu_leaves_the_active_set() {
    let mut h = one_cpu(V420, 2);
    wake_all(&mut h);
    activate(&mut h, 1);
    assert_eq!(ops(&h).weight, 256);
    h.set_paused(1, true);
    h.pump();
    h.remove(1);
    assert!(!unit(&h, 1).active);
    assert_eq!(ops(&h).weight, 0);
    assert!(ops(&h).active_doms.is_empty());
}

#[test]
fn sleep_dequeues_a_queued_vcpu_and_reschedules_a_running_one() {
    for v in [V33, V420] {
        let mut h = one_cpu(v, 2);
        wake_all(&mut h);
        let (run, queued) = (h.curr(0).unwrap(), 1 - h.curr(0).unwrap());
        assert_eq!(runq(&h, 0), vec![queued]);
        h.set_paused(queued, true);
        assert!(runq(&h, 0).is_empty(), "{v:?}");
        h.set_paused(run, true);
        assert_eq!(h.take_resched(), vec![0], "{v:?}");
    }
}
