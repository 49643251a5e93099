//! §2.1 and §2.10: the base slice by release and CPU count, feature defaults by release, and
//! the parameters' validation (errors name the field).

use super::*;

/// §2.1: base_slice = 0.75 ms (0.70 ms from 6.15) × 1 + ilog2(min(ncpus, 8)).
#[test]
fn base_slice_by_release_and_cpus() {
    for (kernel, per) in [
        (EevdfKernel::V6_6, [750, 1500, 2250, 3000]),
        (EevdfKernel::V6_12, [750, 1500, 2250, 3000]),
        (EevdfKernel::V6_18, [700, 1400, 2100, 2800]),
    ] {
        for (i, n) in [1, 2, 4, 8].into_iter().enumerate() {
            let e = Eevdf::new(EevdfParams::new(kernel), &flat(n));
            assert_eq!(e.base_slice, per[i] * US, "{kernel:?}, {n} CPUs");
        }
        let e = Eevdf::new(EevdfParams::new(kernel), &flat(16));
        assert_eq!(e.base_slice, per[3] * US, "{kernel:?}: capped at 8 CPUs");
    }
    let mut p = EevdfParams::new(EevdfKernel::V6_12);
    p.base_slice_ns = Some(3 * MS);
    assert_eq!(Eevdf::new(p, &flat(1)).base_slice, 3 * MS, "written value");
    let mut p = EevdfParams::new(EevdfKernel::V6_12);
    p.sched_tunable_scaling = 0;
    assert_eq!(Eevdf::new(p, &flat(8)).base_slice, 750 * US, "no scaling");
}

/// §2.10: feature defaults by release.
#[test]
fn feature_defaults_by_release() {
    let f = EevdfFeatures::default();
    let v66 = f.resolve(EevdfKernel::V6_6).unwrap();
    assert!(v66.place_lag && v66.place_deadline_initial && v66.run_to_parity);
    assert!(v66.wakeup_preemption && v66.cache_hot_buddy && !v66.next_buddy);
    assert!(!v66.preempt_short && !v66.delay_dequeue && !v66.delay_zero);
    assert!(!v66.pick_buddy && !v66.place_rel_deadline);
    for k in [EevdfKernel::V6_12, EevdfKernel::V6_18] {
        let v = f.resolve(k).unwrap();
        assert!(v.preempt_short && v.delay_dequeue && v.delay_zero && v.pick_buddy);
        assert!(v.place_rel_deadline && v.run_to_parity && !v.next_buddy);
    }
}

/// A flag the release does not have is refused, naming it.
#[test]
fn flags_of_later_releases_are_refused() {
    for name in ["PREEMPT_SHORT", "DELAY_DEQUEUE", "DELAY_ZERO", "PICK_BUDDY"] {
        let mut p = EevdfParams::new(EevdfKernel::V6_6);
        match name {
            "PREEMPT_SHORT" => p.features.PREEMPT_SHORT = Some(false),
            "DELAY_DEQUEUE" => p.features.DELAY_DEQUEUE = Some(false),
            "DELAY_ZERO" => p.features.DELAY_ZERO = Some(true),
            _ => p.features.PICK_BUDDY = Some(true),
        }
        let e = p.validate().unwrap_err();
        assert!(e.starts_with(&format!("features.{name}: ")), "{e}");
    }
    let mut p = EevdfParams::new(EevdfKernel::V6_12);
    p.features.PREEMPT_SHORT = Some(false);
    assert!(p.validate().is_ok());
}

/// Bad values are refused naming the field.
#[test]
fn validate_names_the_field() {
    type Case = (fn(&mut EevdfParams), &'static str);
    let cases: [Case; 4] = [
        (|p| p.hz = 7, "hz"),
        (|p| p.sched_tunable_scaling = 3, "sched_tunable_scaling"),
        (|p| p.base_slice_ns = Some(0), "base_slice_ns"),
        (
            |p| p.sched_migration_cost_ns = 1 << 40,
            "sched_migration_cost_ns",
        ),
    ];
    for (f, field) in cases {
        let mut p = EevdfParams::new(EevdfKernel::V6_18);
        f(&mut p);
        let e = p.validate().unwrap_err();
        assert!(e.starts_with(&format!("{field}: ")), "{e}");
    }
}

/// §2.1 (6.12+): a task's own `sched_runtime` sets its slice, clamped to 0.1..100 ms and not
/// scaled; 6.6 ignores it.
#[test]
fn custom_slices_from_6_12() {
    let ents = vec![
        task(0, 4, 0, 30 * US),
        task(1, 4, 0, 2 * MS),
        task(2, 4, 0, 0),
    ];
    let h = harness(EevdfKernel::V6_12, 4, ents.clone());
    assert_eq!((se(&h, A).slice, se(&h, A).custom_slice), (100 * US, true));
    assert_eq!(se(&h, B).slice, 2 * MS);
    assert_eq!(
        (se(&h, C).slice, se(&h, C).custom_slice),
        (2250 * US, false)
    );
    let h = harness(EevdfKernel::V6_6, 4, ents);
    assert!(!se(&h, A).custom_slice);
    assert_eq!(se(&h, A).slice, 2250 * US);
}

/// ERRATA L5: 6.x drops steal beyond the clock delta unless `steal_carry_over`; the core's
/// run queue gets the switch from the class.
#[test]
fn steal_handling_is_set_on_the_run_queues() {
    let h = harness(EevdfKernel::V6_12, 2, vec![]);
    assert!(h.sched.rq.iter().all(|r| r.drop_excess_steal));
    let mut p = EevdfParams::new(EevdfKernel::V6_6);
    p.steal_carry_over = true;
    let h = harness_with(p, 2, vec![]);
    assert!(h.sched.rq.iter().all(|r| !r.drop_excess_steal));
}
