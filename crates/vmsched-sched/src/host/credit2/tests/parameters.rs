//! Parameter validation and the serde names and defaults of the configuration.

use super::*;

#[test]
fn validate_checks_ranges_and_names_the_field() {
    assert!(Credit2Params::default().validate().is_ok());
    assert!(rl(0).validate().is_ok());
    assert!(rl(100).validate().is_ok());
    assert!(rl(500_000).validate().is_ok());
    for bad in [50, 99, 500_001, 600_000] {
        let e = rl(bad).validate().unwrap_err();
        assert!(
            e.contains("ratelimit_us") && e.contains("100..=500000"),
            "{e}"
        );
    }
    let p = Credit2Params {
        load_precision_shift: 3,
        ..Default::default()
    };
    assert!(p
        .validate()
        .unwrap_err()
        .starts_with("load_precision_shift: "));
    let p = Credit2Params {
        max_cpus_runqueue: 0,
        ..Default::default()
    };
    assert!(p.validate().unwrap_err().starts_with("max_cpus_runqueue: "));
    let p = Credit2Params {
        cap_period_ms: 0,
        ..Default::default()
    };
    assert!(p.validate().unwrap_err().starts_with("cap_period_ms: "));
    let p = Credit2Params {
        load_window_shift: 10,
        ..Default::default()
    };
    assert!(p.validate().unwrap_err().starts_with("load_window_shift: "));
}

#[test]
fn params_serde_names_and_defaults() {
    let p: Credit2Params = toml::from_str("").unwrap();
    assert_eq!(p, Credit2Params::default());
    assert_eq!(p.version, Credit2Version::V4_20_0);
    assert_eq!(
        (
            p.ratelimit_us,
            p.max_cpus_runqueue,
            p.migrate_resist_us,
            p.cap_period_ms
        ),
        (1000, 16, 500, 10)
    );
    assert_eq!(
        (
            p.load_window_shift,
            p.load_precision_shift,
            p.balance_under,
            p.balance_over
        ),
        (30, 18, 0, -3)
    );
    assert_eq!(p.runqueue, RunqueueArrangement::Socket);
    let p: Credit2Params =
        toml::from_str("version = \"4.20.2\"\nrunqueue = \"all\"\nratelimit_us = 0").unwrap();
    assert_eq!(
        (p.version, p.runqueue, p.ratelimit_us),
        (Credit2Version::V4_20_2, RunqueueArrangement::All, 0)
    );
    assert!(
        toml::from_str::<Credit2Params>("ratelimit = 5").is_err(),
        "unknown fields are rejected"
    );
    assert!(toml::from_str::<Credit2Params>("version = \"4.19\"").is_err());
    let v: Vec<bool> = ["4.20.0", "4.20.1", "4.20.2", "4.20.3", "4.20.4", "4.21"]
        .iter()
        .map(|s| {
            toml::from_str::<Credit2Params>(&format!("version = \"{s}\""))
                .unwrap()
                .version
                .counts_outgoing_credit()
        })
        .collect();
    assert_eq!(v, [false, false, true, true, true, true]);
}
