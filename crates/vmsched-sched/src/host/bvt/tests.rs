//! Unit tests of BVT (Xen 3.0 `sched_bvt.c`), one per rule of the module doc: virtual time by
//! MCU and `mcu_advance`, least-evt picking, slices with the context switch allowance, the wake
//! rules, warping and its timers, the 32-bit wrap, and the parameter checks.

use super::*;
use vmsched_core::testkit::{params, Harness};
use vmsched_core::time::{ms, us};

fn dom(d: usize, mcu_advance: u32) -> (usize, BvtDomain) {
    (
        d,
        BvtDomain {
            domain: format!("d{d}"),
            mcu_advance,
            warpback: false,
            warp_value: 0,
            warpl_ms: 2000,
            warpu_ms: 1000,
        },
    )
}

fn harness(ncpus: usize, n: usize, doms: &[(usize, BvtDomain)]) -> Harness<BvtSched> {
    let p = BvtParams {
        timer_entry_ns: 0,
        ..Default::default()
    };
    let ents = (0..n).map(|i| params(i, ncpus)).collect();
    Harness::new(Bvt::sched(&p, ncpus, n, doms), ncpus, ents)
}

fn wake(h: &mut Harness<BvtSched>, e: u32) {
    h.wake(e, WakeInfo::default());
}

fn vt(h: &Harness<BvtSched>, e: u32) -> (u32, u32) {
    h.sched.ops.vt(EntityId(e))
}

#[test]
fn virtual_time_advances_by_mcu_advance_per_started_mcu() {
    let mut h = harness(1, 1, &[dom(0, 7)]);
    wake(&mut h, 0);
    assert_eq!(
        h.take_resched(),
        vec![0],
        "an idle CPU takes the woken vCPU"
    );
    assert_eq!(
        h.schedule(0),
        Pick {
            next: Some(EntityId(0)),
            slice: Some(ms(50))
        },
        "alone: 10 × ctx_allow"
    );
    h.advance(us(250)); // 2.5 MCUs: 3 charged
    h.schedule(0);
    assert_eq!(vt(&h, 0), (21, 21));
    assert_eq!(h.sched.ops.svt(CpuId(0)), 21);
}

#[test]
fn idle_gets_ctx_allow() {
    let mut h = harness(1, 1, &[]);
    assert_eq!(
        h.schedule(0),
        Pick {
            next: None,
            slice: Some(ms(5))
        }
    );
}

#[test]
fn least_evt_runs_and_the_slice_is_the_lead_in_mcus_plus_ctx_allow() {
    let mut h = harness(1, 2, &[]);
    wake(&mut h, 0);
    h.schedule(0);
    h.advance(ms(1)); // e0: avt 100
    wake(&mut h, 1); // avt 0 → svt 0; evt 0 ≤ e0's 100: preempt
    assert_eq!(h.take_resched(), vec![0]);
    let p = h.schedule(0);
    assert_eq!(p.next, Some(EntityId(1)));
    // (100 − 0) / 10 = 10 "ns" (MCUs, as upstream adds them) + 5 ms.
    assert_eq!(p.slice, Some(ms(5) + 10));
    assert_eq!(vt(&h, 0), (100, 100));
}

#[test]
fn shares_follow_the_inverse_of_mcu_advance() {
    let mut h = harness(1, 2, &[dom(0, 10), dom(1, 20)]);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    h.run_for(ms(3000), us(100));
    let (a, b) = (h.run_ns[0] as f64 / 3e9, h.run_ns[1] as f64 / 3e9);
    assert!((0.64..=0.69).contains(&a), "mcu_advance 10: {a}");
    assert!((0.31..=0.36).contains(&b), "mcu_advance 20: {b}");
}

#[test]
fn a_woken_vcpu_is_brought_up_to_svt() {
    let mut h = harness(1, 2, &[]);
    wake(&mut h, 0);
    h.schedule(0);
    h.advance(ms(10));
    h.schedule(0); // e0: avt 1000, svt 1000
    assert_eq!(h.sched.ops.svt(CpuId(0)), 1000);
    wake(&mut h, 1); // inserted at avt 0 < svt
    assert_eq!(vt(&h, 1), (1000, 1000), "no credit for having slept");
}

#[test]
fn a_woken_vcpu_behind_the_runner_pulls_the_slice_timer_in() {
    let mut h = harness(1, 2, &[dom(0, 10), dom(1, 10)]);
    wake(&mut h, 1);
    h.schedule(0);
    h.advance(ms(1));
    h.block(1); // e1 at avt 100
    wake(&mut h, 0);
    h.take_resched();
    h.schedule(0); // e0 runs alone from 1 ms: slice 50 ms
    assert_eq!(h.curr(0), Some(0));
    h.advance(ms(2)); // e0 at 200 (not yet charged)
                      // e1 wakes at evt 100 ≤ e0's 200: preempt.
    wake(&mut h, 1);
    assert_eq!(h.take_resched(), vec![0]);
    // Behind the runner: the s_timer is pulled in to lastschd + lead + ctx_allow.
    let mut h = harness(1, 2, &[dom(0, 10), dom(1, 10)]);
    wake(&mut h, 0);
    h.schedule(0);
    h.advance(ms(1));
    h.schedule(0); // e0 avt 100, lastschd 1 ms, slice 50 ms
    h.sched.ops.units[1].avt = 300;
    h.advance(us(500)); // e0 at 150 when e1 (300) wakes
    h.take_resched();
    h.take_timers();
    wake(&mut h, 1);
    assert!(h.take_resched().is_empty());
    let t = h.take_timers();
    assert_eq!(t, vec![(0, Some(ms(1) + 15 + ms(5)))]);
}

#[test]
fn warp_borrows_virtual_time_until_its_limit() {
    let warped = BvtDomain {
        domain: "d0".into(),
        mcu_advance: 10,
        warpback: true,
        warp_value: 5000,
        warpl_ms: 20,
        warpu_ms: 30,
    };
    let mut h = harness(1, 2, &[(0, warped)]);
    wake(&mut h, 1);
    h.schedule(0);
    h.advance(ms(1));
    h.schedule(0); // e1 at 100
    wake(&mut h, 0); // e0 at svt 100, evt 100 − 5000 (wrapping): below e1's
    assert_eq!(vt(&h, 0).1, 100u32.wrapping_sub(5000));
    h.take_timers();
    assert_eq!(
        h.schedule(0).next,
        Some(EntityId(1)),
        "u32: the warp wraps below zero"
    );
    // With avt above the warp, it wins.
    let warped = BvtDomain {
        domain: "d0".into(),
        mcu_advance: 10,
        warpback: true,
        warp_value: 50,
        warpl_ms: 20,
        warpu_ms: 30,
    };
    let mut h = harness(1, 2, &[(0, warped)]);
    wake(&mut h, 1);
    h.schedule(0);
    h.advance(ms(10));
    h.schedule(0); // e1 at 1000
    wake(&mut h, 0); // avt 1000, evt 950 ≤ e1's 1000: preempt
    assert_eq!(vt(&h, 0), (1000, 950));
    assert_eq!(h.take_resched(), vec![0]);
    h.take_timers();
    assert_eq!(h.schedule(0).next, Some(EntityId(0)));
    let warp_key = 1; // after the one CPU's timer
    let t = h.take_timers();
    assert!(
        t.contains(&(warp_key, Some(ms(30)))),
        "warp limit armed: {t:?}"
    );
    // The limit: unwarped, the unwarp timer armed for warpu.
    h.advance(ms(20));
    h.fire_timer(warp_key);
    assert!(!h.sched.ops.doms[0].warp);
    assert!(h.take_timers().contains(&(warp_key + 1, Some(ms(60)))));
    h.advance(ms(30));
    h.fire_timer(warp_key + 1);
    assert!(h.sched.ops.doms[0].warp);
    assert_eq!(h.take_resched(), vec![0]);
}

#[test]
fn virtual_times_wrap_below_0xf0000000() {
    let mut h = harness(1, 1, &[]);
    h.sched.ops.units[0].avt = 0xf000_0000;
    h.sched.ops.pcpus[0].svt = 0xf000_0000;
    wake(&mut h, 0);
    h.schedule(0);
    assert_eq!(h.sched.ops.svt(CpuId(0)), 0x1000_0000);
    assert_eq!(vt(&h, 0), (0x1000_0000, 0x1000_0000));
}

#[test]
fn parameters_are_checked_with_their_field() {
    assert!(BvtParams::default().validate().is_ok());
    let p = BvtParams {
        ctx_allow_us: 5,
        ..Default::default()
    };
    assert!(p.validate().unwrap_err().starts_with("ctx_allow_us: "));
    let p = BvtParams {
        domains: vec![dom(0, 0).1],
        ..Default::default()
    };
    assert!(p
        .validate()
        .unwrap_err()
        .starts_with("domains.0.mcu_advance: "));
    let src = |host: &str, dom: &str| {
        format!(
            "[machine]\npcpus = 1\n[host]\nscheduler = \"bvt\"\n{host}\n[[domain]]\nname = \"a\"\n\
             vcpus = 1\n{dom}\n[domain.sched]\nscheduler = \"cfs\"\n"
        )
    };
    let ok = crate::build::load(
        "t.toml",
        &src("domains = [{ domain = \"a\", mcu_advance = 20 }]", ""),
        &[],
    );
    assert!(ok.is_ok(), "{:?}", ok.err());
    let e =
        crate::build::load("t.toml", &src("domains = [{ domain = \"b\" }]", ""), &[]).unwrap_err();
    assert_eq!(e.field, "host.domains.0.domain", "{e}");
    let e = crate::build::load("t.toml", &src("", "weight = 512"), &[]).unwrap_err();
    assert_eq!(e.field, "domain.0.weight", "{e}");
    let e = crate::build::load("t.toml", &src("", "cap = 10"), &[]).unwrap_err();
    assert_eq!(e.field, "domain.0.cap", "{e}");
}
