//! Tunables (§1.1) and parameter validation and parsing.

use super::*;

// --- §1.1 tunables -------------------------------------------------------------------------------

/// §1.1: LOG scaling, factor 1 + ilog2(min(ncpus, 8)).
#[test]
fn tunables_scale_logarithmically_with_vcpus() {
    for (n, lat, min_gran, wake_gran) in [
        (1, 6_000_000, 750_000, 1_000_000),
        (2, 12_000_000, 1_500_000, 2_000_000),
        (3, 12_000_000, 1_500_000, 2_000_000),
        (4, 18_000_000, 2_250_000, 3_000_000),
        (8, 24_000_000, 3_000_000, 4_000_000),
        (16, 24_000_000, 3_000_000, 4_000_000),
    ] {
        let c = Cfs::new(CfsParams::default(), &flat(n));
        assert_eq!(
            (c.tun.latency, c.tun.min_gran, c.tun.wakeup_gran),
            (lat, min_gran, wake_gran),
            "{n} vCPUs"
        );
        assert_eq!(c.tun.nr_latency, 8);
        assert_eq!(c.tun.migration_cost, 500_000);
    }
}

/// §1.1: NONE (factor 1) and LINEAR (factor min(ncpus, 8)) scaling.
#[test]
fn tunable_scaling_none_and_linear() {
    let none = CfsParams {
        sched_tunable_scaling: 0,
        ..Default::default()
    };
    let c = Cfs::new(none, &flat(4));
    assert_eq!(
        (c.tun.latency, c.tun.min_gran, c.tun.wakeup_gran),
        (6_000_000, 750_000, 1_000_000)
    );
    let linear = CfsParams {
        sched_tunable_scaling: 2,
        ..Default::default()
    };
    let c = Cfs::new(linear.clone(), &flat(3));
    assert_eq!(
        (c.tun.latency, c.tun.min_gran, c.tun.wakeup_gran),
        (18_000_000, 2_250_000, 3_000_000)
    );
    let c = Cfs::new(linear, &flat(16));
    assert_eq!(c.tun.latency, 48_000_000);
}

/// §1.1: an explicit sysctl value is the effective value, whatever the vCPU count.
#[test]
fn tunable_overrides_win() {
    let p = CfsParams {
        sched_latency_ns: Some(10_000_000),
        sched_min_granularity_ns: Some(1_000_000),
        sched_wakeup_granularity_ns: Some(0),
        ..Default::default()
    };
    let c = Cfs::new(p, &flat(4));
    assert_eq!(
        (c.tun.latency, c.tun.min_gran, c.tun.wakeup_gran),
        (10_000_000, 1_000_000, 0)
    );
}

/// §1.10: the tick period is TICK_NSEC for the configured HZ.
#[test]
fn tick_period_follows_hz() {
    for (hz, ns) in [
        (100, 10_000_000),
        (250, 4_000_000),
        (300, 3_333_333),
        (1000, 1_000_000),
    ] {
        let c = Cfs::sched(
            CfsParams {
                hz,
                ..Default::default()
            },
            &flat(1),
        );
        assert_eq!(c.tick_period(), Some(ns));
    }
}

// --- parameters ------------------------------------------------------------------------------------

/// Parameters: ranges are checked and errors name the field.
#[test]
fn validate_rejects_bad_values() {
    assert!(CfsParams::default().validate().is_ok());
    let bad = [
        (
            CfsParams {
                hz: 0,
                ..Default::default()
            },
            "hz",
        ),
        (
            CfsParams {
                hz: 20_000,
                ..Default::default()
            },
            "hz",
        ),
        (
            CfsParams {
                hz: 7,
                ..Default::default()
            },
            "hz",
        ),
        (
            CfsParams {
                hz: 10_000,
                ..Default::default()
            },
            "hz",
        ),
        (
            CfsParams {
                sched_tunable_scaling: 3,
                ..Default::default()
            },
            "sched_tunable_scaling",
        ),
        (
            CfsParams {
                sched_latency_ns: Some(50_000),
                ..Default::default()
            },
            "sched_latency_ns",
        ),
        (
            CfsParams {
                sched_min_granularity_ns: Some(2 * NS_PER_S),
                ..Default::default()
            },
            "sched_min_granularity_ns",
        ),
        (
            CfsParams {
                sched_wakeup_granularity_ns: Some(2 * NS_PER_S),
                ..Default::default()
            },
            "sched_wakeup_granularity_ns",
        ),
        (
            CfsParams {
                sched_nr_latency: 0,
                ..Default::default()
            },
            "sched_nr_latency",
        ),
    ];
    for (p, field) in bad {
        let err = p.validate().expect_err(field);
        assert!(err.starts_with(field), "{err}");
    }
}

/// Parameters: serde defaults, the version tag and unknown-field rejection.
#[test]
fn params_deserialize_with_defaults() {
    let p: CfsParams = serde_json::from_str(r#"{"hz": 1000, "version": "5.10"}"#).unwrap();
    assert_eq!(p.hz, 1000);
    assert_eq!(p.sched_migration_cost_ns, 500_000);
    assert!(
        p.gentle_fair_sleepers
            && p.start_debit
            && !p.next_buddy
            && p.last_buddy
            && p.wakeup_preemption
    );
    assert!(!p.vcpu_is_preempted);
    assert!(serde_json::from_str::<CfsParams>(r#"{"version": "6.6"}"#).is_err());
    assert!(serde_json::from_str::<CfsParams>(r#"{"sched_latency": 1}"#).is_err());
}

#[test]
#[should_panic(expected = "validated")]
fn new_panics_on_invalid_params() {
    Cfs::sched(
        CfsParams {
            hz: 0,
            ..Default::default()
        },
        &flat(1),
    );
}

/// 32-bit ARM's own CONFIG_HZ choice (arch/arm/Kconfig: 200 and 500 beside Kconfig.hz's four)
/// is a real 5.10 configuration, as it is in 3.17; a rate no Kconfig offers is refused in both.
#[test]
fn arm32_hz_choices_exist_in_5_10_and_3_17() {
    for version in [CfsVersion::V5_10, CfsVersion::V3_17] {
        for hz in [200, 500] {
            let p = CfsParams {
                hz,
                version,
                ..Default::default()
            };
            assert!(p.validate().is_ok(), "{version:?} hz {hz}");
        }
        let p = CfsParams {
            hz: 128,
            version,
            ..Default::default()
        };
        assert!(p.validate().unwrap_err().starts_with("hz:"), "{version:?}");
    }
}
