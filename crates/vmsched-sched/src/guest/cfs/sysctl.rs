//! A Linux guest's sysctl and `sched_features` dump, as CFS parameters (`[domain.sched]`).
//!
//! The dump is read by `vmsched_core::import::sysctl` into knob names (5.10's sysctl names
//! without `kernel.`) and feature words; this file says which of them [`CfsParams`] has. Knobs
//! (`/proc/sys/kernel/sched_*` in 5.10, `/sys/kernel/debug/sched/*` from 5.13):
//! `sched_latency_ns`, `sched_min_granularity_ns`, `sched_wakeup_granularity_ns` (their values
//! as read are the effective, already scaled, values: what the fields take),
//! `sched_tunable_scaling`, `sched_migration_cost_ns`; and the RT class's
//! `sched_rr_timeslice_ms`, `sched_rt_period_us`, `sched_rt_runtime_us` into
//! `[domain.sched.rt]` (docs/rt.md). Features (5.10's
//! `kernel/sched/features.h`): `GENTLE_FAIR_SLEEPERS`, `START_DEBIT`, `NEXT_BUDDY`, `LAST_BUDDY`,
//! `WAKEUP_PREEMPTION`. Every other knob or feature is listed in a note: the ones the model
//! follows as if on whatever the dump says, the 5.10 ones it does not model, and names 5.10 does
//! not have.

use vmsched_core::import::sysctl::Dump;
use vmsched_core::import::{Fragment, Note};
use vmsched_core::scenario::ScenarioError;

use super::CfsParams;

/// Knob → `[domain.sched]` field (the same name).
const KNOBS: [&str; 5] = [
    "sched_latency_ns",
    "sched_min_granularity_ns",
    "sched_wakeup_granularity_ns",
    "sched_tunable_scaling",
    "sched_migration_cost_ns",
];

/// RT class knob → `[domain.sched.rt]` field (the same name; signed: `sched_rt_runtime_us` may
/// be −1).
const RT_KNOBS: [&str; 3] = [
    "sched_rr_timeslice_ms",
    "sched_rt_period_us",
    "sched_rt_runtime_us",
];

/// Feature → `[domain.sched]` field.
const FEATURES: [(&str, &str); 5] = [
    ("GENTLE_FAIR_SLEEPERS", "gentle_fair_sleepers"),
    ("START_DEBIT", "start_debit"),
    ("NEXT_BUDDY", "next_buddy"),
    ("LAST_BUDDY", "last_buddy"),
    ("WAKEUP_PREEMPTION", "wakeup_preemption"),
];

/// 5.10 features whose behaviour the model has built in, as when they are on.
const BUILT_IN: [&str; 4] = ["CACHE_HOT_BUDDY", "SIS_PROP", "WA_IDLE", "WA_WEIGHT"];

/// 5.10 features the model does not model.
const NOT_MODELLED: [&str; 13] = [
    "HRTICK",
    "DOUBLE_TICK",
    "NONTASK_CAPACITY",
    "TTWU_QUEUE",
    "SIS_AVG_CPU",
    "WARN_DOUBLE_CLOCK",
    "RT_PUSH_IPI",
    "RT_RUNTIME_SHARE",
    "LB_MIN",
    "ATTACH_AGE_LOAD",
    "WA_BIAS",
    "UTIL_EST",
    "UTIL_EST_FASTUP",
];

/// The `[domain.sched]` table (`scheduler = "cfs"` and the fields the dump sets) of a dump.
pub fn import(file: &str, dump: &Dump) -> Result<Fragment, ScenarioError> {
    let mut notes = dump.skipped.clone();
    let mut sched = toml::Table::new();
    sched.insert("scheduler".into(), "cfs".into());
    let mut rt = toml::Table::new();
    // The line each field came from, for errors of the whole table (RT fields as `rt.<knob>`).
    let mut lines: Vec<(String, usize)> = Vec::new();
    // `kernel.sched_domain.cpuN.domainM.*` (CONFIG_SCHED_DEBUG): hundreds of per-CPU lines, one
    // note for all of them.
    let (domains, entries): (Vec<_>, Vec<_>) = dump
        .entries
        .iter()
        .partition(|e| e.knob.starts_with("sched_domain."));
    if let Some(first) = domains.first() {
        notes.push(Note {
            line: Some(first.line),
            key: first.key.clone(),
            message: format!(
                "{} sched_domain entries (per-CPU balancing parameters) not modelled: the guest \
                 model has one balancing domain (docs/cfs.md)",
                domains.len()
            ),
        });
    }
    for e in entries {
        if let Some(field) = KNOBS.iter().find(|k| **k == e.knob) {
            let v: u64 = e.value.parse().map_err(|_| ScenarioError {
                file: file.into(),
                line: Some(e.line),
                field: e.key.clone(),
                message: format!("expected a non-negative integer, got '{}'", e.value),
            })?;
            let max = if *field == "sched_tunable_scaling" {
                u32::MAX.into()
            } else {
                i64::MAX as u64
            };
            let v = i64::try_from(v)
                .ok()
                .filter(|_| v <= max)
                .ok_or_else(|| ScenarioError {
                    file: file.into(),
                    line: Some(e.line),
                    field: e.key.clone(),
                    message: format!("{v} is out of range"),
                })?;
            sched.insert((*field).into(), v.into());
            lines.push((field.to_string(), e.line));
        } else if let Some(field) = RT_KNOBS.iter().find(|k| **k == e.knob) {
            let v: i64 = e.value.trim().parse().map_err(|_| ScenarioError {
                file: file.into(),
                line: Some(e.line),
                field: e.key.clone(),
                message: format!("expected an integer, got '{}'", e.value),
            })?;
            rt.insert((*field).into(), v.into());
            lines.push((format!("rt.{field}"), e.line));
        } else {
            let message = match e.knob.as_str() {
                "sched_child_runs_first" if e.value.trim() != "0" => {
                    "not modelled: the model's children never run first (0)".into()
                }
                _ => format!("not modelled (value {})", e.value),
            };
            notes.push(Note {
                line: Some(e.line),
                key: e.key.clone(),
                message,
            });
        }
    }
    for f in &dump.features {
        if let Some((_, field)) = FEATURES.iter().find(|(n, _)| *n == f.name) {
            sched.insert((*field).into(), f.enabled.into());
            lines.push((field.to_string(), f.line));
            continue;
        }
        let word = if f.enabled {
            f.name.clone()
        } else {
            format!("NO_{}", f.name)
        };
        let message = if BUILT_IN.contains(&f.name.as_str()) {
            if f.enabled {
                "built into the model (always on)".to_string()
            } else {
                "off here, but the model always behaves as if it is on".to_string()
            }
        } else if NOT_MODELLED.contains(&f.name.as_str()) {
            "a Linux 5.10 feature the model does not model".to_string()
        } else {
            "not a feature of Linux 5.10 (kernel/sched/features.h)".to_string()
        };
        notes.push(Note {
            line: Some(f.line),
            key: word,
            message,
        });
    }
    if dump.other_keys > 0 {
        notes.push(Note {
            line: None,
            key: "sysctl".into(),
            message: format!(
                "{} keys outside kernel.sched_* ignored (not scheduler tunables)",
                dump.other_keys
            ),
        });
    }
    // The values in range: CfsParams' own check, pointed at the line of the field it names.
    // `scheduler` is the registry's tag, not a CfsParams field.
    if !rt.is_empty() {
        sched.insert("rt".into(), rt.into());
    }
    let mut fields = sched.clone();
    fields.remove("scheduler");
    let params: CfsParams =
        toml::Value::Table(fields)
            .try_into()
            .map_err(|e: toml::de::Error| ScenarioError {
                file: file.into(),
                line: None,
                field: "sched".into(),
                message: e.message().to_string(),
            })?;
    params.validate().map_err(|m| {
        let (field, msg) = m.split_once(": ").unwrap_or(("", &m));
        let line = lines.iter().rev().find(|(f, _)| f == field).map(|l| l.1);
        let knob = field.strip_prefix("rt.").unwrap_or(field);
        let key = dump
            .entries
            .iter()
            .rev()
            .find(|e| e.knob == knob)
            .map_or(field.to_string(), |e| e.key.clone());
        ScenarioError {
            file: file.into(),
            line,
            field: key,
            message: msg.to_string(),
        }
    })?;
    notes.sort_by_key(|n| n.line.unwrap_or(usize::MAX));
    let mut d = toml::Table::new();
    d.insert("sched".into(), sched.into());
    let mut table = toml::Table::new();
    table.insert("domain".into(), toml::Value::Array(vec![d.into()]));
    Ok(Fragment { table, notes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmsched_core::import::sysctl::parse;

    fn import_text(src: &str) -> Result<Fragment, ScenarioError> {
        import("dump.txt", &parse("dump.txt", src)?)
    }

    #[test]
    fn knobs_and_features_become_cfs_fields() {
        let src = "\
kernel.sched_latency_ns = 24000000
kernel.sched_min_granularity_ns = 3000000
kernel.sched_wakeup_granularity_ns = 4000000
kernel.sched_migration_cost_ns = 500000
kernel.sched_tunable_scaling = 1
kernel.sched_child_runs_first = 1
kernel.sched_rr_timeslice_ms = 100
kernel.sched_domain.cpu0.domain0.busy_factor = 32
kernel.sched_domain.cpu0.domain0.name = MC
vm.swappiness = 60
GENTLE_FAIR_SLEEPERS NO_START_DEBIT NEXT_BUDDY LAST_BUDDY NO_WAKEUP_PREEMPTION NO_HRTICK NO_WA_IDLE SIS_PROP FROB
";
        let f = import_text(src).unwrap();
        let s = f.table["domain"][0]["sched"].as_table().unwrap();
        assert_eq!(s["scheduler"].as_str(), Some("cfs"));
        assert_eq!(s["sched_latency_ns"].as_integer(), Some(24_000_000));
        assert_eq!(s["sched_min_granularity_ns"].as_integer(), Some(3_000_000));
        assert_eq!(
            s["sched_wakeup_granularity_ns"].as_integer(),
            Some(4_000_000)
        );
        assert_eq!(s["sched_migration_cost_ns"].as_integer(), Some(500_000));
        assert_eq!(s["sched_tunable_scaling"].as_integer(), Some(1));
        for (field, on) in [
            ("gentle_fair_sleepers", true),
            ("start_debit", false),
            ("next_buddy", true),
            ("last_buddy", true),
            ("wakeup_preemption", false),
        ] {
            assert_eq!(s[field].as_bool(), Some(on), "{field}");
        }
        let notes: Vec<String> = f.notes.iter().map(|n| n.to_string()).collect();
        assert_eq!(notes.len(), 7, "{notes:#?}");
        assert!(notes[1].contains("2 sched_domain entries"), "{notes:#?}");
        assert!(notes[0].contains("sched_child_runs_first: not modelled: the model's children"));
        // The RT class's knob is modelled now ([domain.sched.rt]).
        assert_eq!(s["rt"]["sched_rr_timeslice_ms"].as_integer(), Some(100));
        assert!(notes
            .iter()
            .any(|n| n.contains("NO_HRTICK: a Linux 5.10 feature the model does not model")));
        assert!(notes
            .iter()
            .any(|n| n.contains("NO_WA_IDLE: off here, but the model always")));
        assert!(notes
            .iter()
            .any(|n| n.contains("SIS_PROP: built into the model")));
        assert!(notes
            .iter()
            .any(|n| n.contains("FROB: not a feature of Linux 5.10")));
        assert!(notes.iter().any(|n| n.contains("1 keys outside")));
        // The table is what CFS takes.
        let mut t = s.clone();
        t.remove("scheduler");
        let p: CfsParams = toml::Value::Table(t).try_into().unwrap();
        assert_eq!(p.sched_latency_ns, Some(24_000_000));
        assert!(!p.start_debit);
    }

    #[test]
    fn bad_values_name_the_key_and_the_line() {
        let e =
            import_text("kernel.sched_latency_ns = 24000000\nkernel.sched_tunable_scaling = 7\n")
                .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (Some(2), "kernel.sched_tunable_scaling")
        );
        assert!(e.message.contains("outside 0..=2"), "{e}");
        let e = import_text("\n/proc/sys/kernel/sched_latency_ns:fast\n").unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (Some(2), "/proc/sys/kernel/sched_latency_ns")
        );
        assert!(e.message.contains("'fast'"), "{e}");
        let e = import_text("kernel.sched_latency_ns = 99999999999999999999\n").unwrap_err();
        assert_eq!(e.line, Some(1));
        let e = import_text("kernel.sched_latency_ns = 10\n").unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (Some(1), "kernel.sched_latency_ns")
        );
    }

    /// The RT sysctls go to `[domain.sched.rt]`; a bad one is named by its key and line.
    #[test]
    fn rt_knobs_become_rt_fields() {
        let f = import_text(
            "kernel.sched_rt_period_us = 1000000\nkernel.sched_rt_runtime_us = -1\n\
             kernel.sched_rr_timeslice_ms = 25\n",
        )
        .unwrap();
        let rt = &f.table["domain"][0]["sched"]["rt"];
        assert_eq!(rt["sched_rt_runtime_us"].as_integer(), Some(-1));
        assert_eq!(rt["sched_rt_period_us"].as_integer(), Some(1_000_000));
        assert_eq!(rt["sched_rr_timeslice_ms"].as_integer(), Some(25));
        assert!(f.notes.is_empty(), "{:?}", f.notes);
        let e = import_text(
            "kernel.sched_rt_period_us = 1000000\nkernel.sched_rt_runtime_us = 2000000\n",
        )
        .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (Some(2), "kernel.sched_rt_runtime_us")
        );
        let e = import_text("/proc/sys/kernel/sched_rt_runtime_us:lots\n").unwrap_err();
        assert_eq!(e.line, Some(1));
    }
}
