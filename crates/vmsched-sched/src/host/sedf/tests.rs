//! Unit tests of SEDF (Xen 4.2.1 `sched_sedf.c`), one per rule of the module doc: EDF with
//! slices and periods, the wait queue, extra time by weight and penalty, the wake rules, weight
//! mode, missed deadlines, placement, and the parameter checks.

use super::*;
use vmsched_core::sched::EntityParams;
use vmsched_core::testkit::{params, placed_on, Harness};
use vmsched_core::time::{ms, us};
use vmsched_core::XenAttr;

const MS: i64 = 1_000_000;

/// A vCPU with a period and a slice (µs) and an extra flag.
fn rt(i: usize, ncpus: usize, period_us: u64, slice_us: u64, extra: bool) -> EntityParams {
    let mut p = params(i, ncpus);
    p.xen = XenAttr {
        period_us,
        budget_us: slice_us,
        extratime: extra,
        ..Default::default()
    };
    p
}

/// A weighted vCPU: best effort with extratime, a share of 100 ms without.
fn weighted(i: usize, ncpus: usize, weight: u32, extra: bool) -> EntityParams {
    let mut p = params(i, ncpus);
    p.xen = XenAttr {
        weight,
        extratime: extra,
        ..Default::default()
    };
    p
}

fn harness(ncpus: usize, ents: Vec<EntityParams>) -> Harness<SedfSched> {
    let p = SedfParams {
        timer_entry_ns: 0,
        ..Default::default()
    };
    Harness::new(Sedf::sched(&p, ncpus), ncpus, ents)
}

fn wake(h: &mut Harness<SedfSched>, e: u32) {
    h.wake(e, WakeInfo::default());
}

fn state(h: &Harness<SedfSched>, e: u32) -> (i64, i64, i64, i64) {
    h.sched.ops.state(EntityId(e))
}

#[test]
fn a_slice_per_period_and_idle_the_rest_without_extratime() {
    let mut h = harness(1, vec![rt(0, 1, 10_000, 2_000, false)]);
    wake(&mut h, 0);
    // First wake: deadline = now + slice, then (a "short block") one period more: the first
    // period begins after one slice.
    assert_eq!(state(&h, 0).0, 12 * MS);
    assert_eq!(
        h.take_resched(),
        vec![0],
        "an idle CPU is always rescheduled"
    );
    assert_eq!(
        h.schedule(0),
        Pick {
            next: None,
            slice: Some(ms(2))
        },
        "idle until the period begins"
    );
    h.advance(ms(2));
    assert_eq!(
        h.schedule(0),
        Pick {
            next: Some(EntityId(0)),
            slice: Some(ms(2))
        }
    );
    h.advance(ms(2));
    assert_eq!(h.schedule(0).next, None);
    assert_eq!(state(&h, 0), (22 * MS, 10 * MS, 2 * MS, 0));
    assert_eq!(h.timer[0], Some(ms(12)));
}

#[test]
fn earliest_deadline_first_and_shares_follow_slices() {
    // A 4 ms of 10 ms, B 4 ms of 20 ms, no extratime: A gets 40 %, B 20 %.
    let ents = vec![
        rt(0, 1, 10_000, 4_000, false),
        rt(1, 1, 20_000, 4_000, false),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    h.run_for(ms(1000), us(100));
    let (a, b) = (h.run_ns[0] as f64 / 1e9, h.run_ns[1] as f64 / 1e9);
    assert!((0.39..=0.41).contains(&a), "A {a}");
    assert!((0.19..=0.21).contains(&b), "B {b}");
}

#[test]
fn runqueue_is_sorted_by_deadline() {
    let ents = vec![
        rt(0, 1, 20_000, 1_000, false),
        rt(1, 1, 10_000, 1_000, false),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0); // deadline 21 ms, period from 1 ms
    wake(&mut h, 1); // deadline 11 ms, period from 1 ms
    h.advance(ms(1));
    assert_eq!(
        h.schedule(0).next,
        Some(EntityId(1)),
        "the earlier deadline first"
    );
    h.advance(ms(1));
    assert_eq!(h.schedule(0).next, Some(EntityId(0)));
}

#[test]
fn extra_time_goes_by_extra_weight_in_quanta() {
    // Best-effort vCPUs (slice 0) run in extra time only, 500 µs at a time, shares by weight.
    let mut h = harness(1, vec![weighted(0, 1, 1, true), weighted(1, 1, 3, true)]);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    let p = h.schedule(0);
    assert_eq!(p.slice, Some(EXTRA_QUANTUM as u64), "{p:?}");
    h.run_for(ms(1000), us(100));
    let (a, b) = (h.run_ns[0] as f64 / 1e9, h.run_ns[1] as f64 / 1e9);
    assert!((0.23..=0.27).contains(&a), "w1 {a}");
    assert!((0.73..=0.77).contains(&b), "w3 {b}");
}

#[test]
fn extra_time_needs_a_quantum_before_the_next_period() {
    // The RT vCPU's period begins 300 µs after it is woken (its slice): less than a quantum,
    // so the best-effort vCPU does not get one; the CPU idles until then.
    let ents = vec![rt(0, 1, 10_000, 300, false), weighted(1, 1, 1, true)];
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    // Best effort: first deadline now, a long block: period from now, then pushed one period
    // on by update_queues (slice 0): extra time only.
    let p = h.schedule(0);
    assert_eq!(
        p,
        Pick {
            next: None,
            slice: Some(us(300))
        }
    );
}

#[test]
fn weight_mode_shares_the_100ms_period_after_reservations() {
    // Weights 1 and 3 without extratime, beside a vCPU reserving 10 ms of 100 ms.
    let ents = vec![
        weighted(0, 1, 1, false),
        weighted(1, 1, 3, false),
        rt(2, 1, 100_000, 10_000, false),
    ];
    let h = harness(1, ents);
    // slice = w × (100 − 5 − 10) ms / 4
    assert_eq!(state(&h, 0).1, 100 * MS);
    assert_eq!(state(&h, 0).2, 85 * MS / 4);
    assert_eq!(state(&h, 1).2, 3 * 85 * MS / 4);
    // Per CPU: a weighted vCPU on another CPU counts only there.
    let ents = vec![weighted(0, 2, 1, false), weighted(1, 2, 3, false)];
    let h = harness(2, ents);
    assert_eq!(state(&h, 0).2, 95 * MS);
    assert_eq!(state(&h, 1).2, 95 * MS);
}

#[test]
fn short_block_takes_the_next_period_and_a_penalty() {
    let mut h = harness(1, vec![rt(0, 1, 10_000, 4_000, true)]);
    wake(&mut h, 0); // deadline 14 ms, period from 4 ms
    h.advance(ms(4));
    h.schedule(0);
    assert_eq!(h.curr(0), Some(0));
    h.advance(ms(1));
    h.block(0); // 1 ms of 4 used, at 5 ms
    assert_eq!(state(&h, 0).3, MS);
    h.advance(ms(2));
    wake(&mut h, 0); // 7 ms: inside its period (deadline 14 ms)
    let u = &h.sched.ops.units[0];
    assert_eq!(u.deadl_abs, 24 * MS, "the next period");
    assert_eq!(u.cputime, 0);
    assert_eq!(u.short_block_lost_tot, 3 * MS, "slice − cputime");
    assert!(u.want_pen_q && u.on_extra[PEN_Q]);
    assert_eq!(u.score[PEN_Q], ((10 * MS) << 10) / (3 * MS));
    // Its period begins at 14 ms: it waits, and (the CPU idle) takes a penalty quantum first.
    assert_eq!(u.queue, Queue::Wait);
    let p = h.schedule(0);
    assert_eq!(
        p,
        Pick {
            next: Some(EntityId(0)),
            slice: Some(EXTRA_QUANTUM as u64)
        }
    );
    assert!(h.sched.ops.units[0].run_pen);
    // After the quantum the penalty is cleared and it stays on the utilisation queue only.
    h.advance(us(500));
    h.schedule(0);
    let u = &h.sched.ops.units[0];
    assert!(!u.want_pen_q && !u.on_extra[PEN_Q] && u.short_block_lost_tot == 0);
}

#[test]
fn long_block_starts_a_fresh_period_at_the_wake() {
    let mut h = harness(1, vec![rt(0, 1, 10_000, 4_000, false)]);
    wake(&mut h, 0);
    h.advance(ms(4));
    h.schedule(0);
    h.advance(ms(1));
    h.block(0);
    h.advance(ms(30)); // 35 ms: past its deadline (14 ms)
    wake(&mut h, 0);
    assert_eq!(state(&h, 0), (45 * MS, 10 * MS, 4 * MS, 0));
    assert_eq!(h.sched.ops.units[0].queue, Queue::Run);
    assert_eq!(h.take_resched(), vec![0]);
}

#[test]
fn wake_before_the_period_begins_keeps_the_deadline() {
    let mut h = harness(1, vec![rt(0, 1, 10_000, 4_000, false)]);
    wake(&mut h, 0);
    h.advance(ms(4));
    h.schedule(0);
    h.advance(ms(4));
    h.schedule(0); // slice used: deadline 24 ms, period from 14 ms
    assert_eq!(state(&h, 0).0, 24 * MS);
    h.advance(ms(1));
    // Blocked while waiting (a domain pause), woken at 10 ms: before its period.
    h.set_paused(0, true);
    h.set_paused(0, false);
    assert_eq!(state(&h, 0).0, 24 * MS);
    assert_eq!(h.sched.ops.units[0].queue, Queue::Wait);
}

#[test]
fn a_missed_deadline_gives_a_fresh_period() {
    // Two vCPUs of 9 ms in 10 ms on one CPU: overloaded. Whoever misses its deadline gets the
    // first period after now with its cputime reset; no deadline stays in the past.
    let ents = vec![
        rt(0, 1, 10_000, 9_000, false),
        rt(1, 1, 10_000, 9_000, false),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.take_resched();
    let mut missed = 0;
    for _ in 0..400 {
        h.schedule(0);
        // update_queues ran: every queued vCPU's deadline is now or later.
        let now = h.now as i64;
        for e in 0..2 {
            let u = &h.sched.ops.units[e];
            assert!(
                u.queue == Queue::None || u.deadl_abs >= now,
                "vCPU {e} at {now}"
            );
            missed +=
                (u.queue == Queue::Run && u.cputime == 0 && u.deadl_abs - now > 9 * MS) as u32;
        }
        let next = h.timer[0].expect("a slice timer");
        h.advance(next - h.now);
    }
    assert!(missed > 0, "some deadline was missed and renewed");
    assert!(
        h.run_ns[0] > ms(30) && h.run_ns[1] > ms(30),
        "{:?}",
        h.run_ns
    );
}

#[test]
fn a_waking_vcpu_preempts_only_if_its_period_begins_before_the_slice_ends() {
    let ents = vec![
        rt(0, 1, 10_000, 5_000, false),
        rt(1, 1, 10_000, 1_000, false),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0); // period from 5 ms
    h.advance(ms(5));
    h.take_resched();
    assert_eq!(h.schedule(0).slice, Some(ms(5)), "A runs EDF until 10 ms");
    wake(&mut h, 1); // period from 6 ms < 10 ms
    assert_eq!(h.take_resched(), vec![0]);
    // Now B is on the runqueue; with a period beginning after the slice end nothing happens.
    let ents = vec![
        rt(0, 1, 10_000, 2_000, false),
        rt(1, 1, 10_000, 5_000, false),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0); // period from 2 ms
    h.advance(ms(2));
    h.schedule(0); // A runs until 4 ms
    h.take_resched();
    wake(&mut h, 1); // period from 7 ms > 4 ms, A runs EDF: no switch
    assert!(h.take_resched().is_empty());
}

#[test]
fn vcpus_stay_on_their_cpu() {
    // Both start on CPU 0; CPU 1 idles (no load balancing in SEDF).
    let mut ents = vec![placed_on(0, 2, 0), placed_on(1, 2, 0)];
    for p in &mut ents {
        p.xen = XenAttr {
            weight: 1,
            ..Default::default()
        };
    }
    let mut h = harness(2, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    h.run_for(ms(100), us(100));
    assert_eq!(h.curr(1), None);
    assert!(h.run_ns[0] + h.run_ns[1] <= ms(100));
}

#[test]
fn domain_fields_are_checked_as_xl_sched_sedf_does() {
    assert!(validate_domain(None, None, 256, 0).is_ok());
    assert!(validate_domain(Some(10_000), Some(2_000), 256, 0).is_ok());
    assert!(
        validate_domain(None, Some(2_000), 256, 0).is_ok(),
        "100 ms period"
    );
    let f = |r: Result<(), (String, String)>| r.unwrap_err().0;
    assert_eq!(f(validate_domain(Some(10_000), None, 256, 0)), "budget_us");
    assert_eq!(f(validate_domain(Some(9), Some(5), 256, 0)), "period_us");
    assert_eq!(
        f(validate_domain(Some(10_000_001), Some(5), 256, 0)),
        "period_us"
    );
    assert_eq!(f(validate_domain(Some(1000), Some(4), 256, 0)), "budget_us");
    assert_eq!(
        f(validate_domain(Some(1000), Some(1001), 256, 0)),
        "budget_us"
    );
    assert_eq!(f(validate_domain(None, None, 40_000, 0)), "weight");
    assert_eq!(f(validate_domain(None, None, 256, 50)), "cap");
    // In a scenario, with the field's path.
    let src = |dom: &str| {
        format!(
            "[machine]\npcpus = 1\n[host]\nscheduler = \"sedf\"\n[[domain]]\nname = \"a\"\n\
             vcpus = 1\n{dom}\n[domain.sched]\nscheduler = \"cfs\"\n"
        )
    };
    assert!(crate::build::load("t.toml", &src("period_us = 10000\nbudget_us = 1000"), &[]).is_ok());
    let e = crate::build::load("t.toml", &src("period_us = 10000"), &[]).unwrap_err();
    assert_eq!(e.field, "domain.0.budget_us", "{e}");
    let cfg = crate::build::HostSchedConfig::Sedf(SedfParams::default());
    use vmsched_core::scenario::ConfigCheck;
    assert!(cfg.check_adjust("weight", 2).is_err());
    assert!(cfg.check_adjust("pause", 1).is_ok());
}

#[test]
fn a_lone_best_effort_vcpu_loses_at_most_a_quantum_per_period() {
    // Extra time comes in 500 µs quanta and only with a whole quantum before the next period
    // begins: with the core's 1 µs timer entry latency the quanta drift off the 100 ms grid
    // and the CPU idles for the remainder once a period. Not work-conserving, but nearly.
    let mut h = Harness::new(Sedf::sched(&Default::default(), 1), 1, vec![params(0, 1)]);
    wake(&mut h, 0);
    h.pump();
    h.run_for(ms(1000), us(50));
    let share = h.run_ns[0] as f64 / 1e9;
    assert!(share < 1.0 && share > 1.0 - 10.0 * 0.0005, "{share}");
}
