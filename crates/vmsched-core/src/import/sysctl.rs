//! Linux sysctl and `sched_features` dumps, read into knob names and values.
//!
//! Accepted lines (one setting a line; blank lines and `#` / `;` comments skipped):
//!
//! * `sysctl -a` and sysctl.conf(5): `kernel.sched_latency_ns = 24000000` (also with `/` as the
//!   separator: `kernel/sched_latency_ns = ...`);
//! * `grep . /proc/sys/kernel/sched_*`: `/proc/sys/kernel/sched_latency_ns:24000000`;
//! * debugfs, `grep . /sys/kernel/debug/sched/*` (Linux ≥ 5.13 moved most knobs there, without the
//!   `sched_` prefix) or `name: value` lines: `/sys/kernel/debug/sched/latency_ns:24000000`,
//!   `latency_ns: 24000000`;
//! * the feature line of `/sys/kernel/debug/sched_features` (5.10; `.../sched/features` later):
//!   the file's content alone (`GENTLE_FAIR_SLEEPERS START_DEBIT NO_HRTICK ...`, every word
//!   upper case) or behind its path as above.
//!
//! Every knob is named by its 5.10 sysctl name without the `kernel.` prefix (`sched_latency_ns`),
//! whichever form it came in. Keys outside `kernel.sched_*` and the sched debugfs directory
//! (`vm.*`, `net.*`: a `sysctl -a` dump has a thousand) are counted, not kept. Lines that `sysctl`
//! prints about keys it could not read (`sysctl: permission denied on key ...`) are skipped.
//! What the knobs mean is the guest scheduler's business (`vmsched-sched`'s `guest/cfs/sysctl.rs`
//! for CFS).

use super::{error, Note};
use crate::scenario::ScenarioError;

/// One knob as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// As written in the file.
    pub key: String,
    /// Its 5.10 sysctl name without `kernel.` (`sched_latency_ns`).
    pub knob: String,
    pub value: String,
    pub line: usize,
}

/// One word of a `sched_features` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Feature {
    /// Without `NO_`.
    pub name: String,
    pub enabled: bool,
    pub line: usize,
}

/// A dump, read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dump {
    pub entries: Vec<Entry>,
    pub features: Vec<Feature>,
    /// Lines skipped (keys outside the scheduler's, `sysctl:` complaints), as notes.
    pub skipped: Vec<Note>,
    /// How many keys outside the scheduler's were skipped.
    pub other_keys: usize,
}

/// The knob a key names, or None for a key that is not the scheduler's.
fn knob(key: &str) -> Option<String> {
    let k = key
        .trim()
        .trim_start_matches("/proc/sys/")
        .trim_start_matches('/')
        .replace('/', ".");
    if let Some(rest) = k.strip_prefix("kernel.") {
        return rest.starts_with("sched_").then(|| rest.to_string());
    }
    for dir in [
        "sys.kernel.debug.sched.",
        "kernel.debug.sched.",
        "debug.sched.",
    ] {
        if let Some(rest) = k.strip_prefix(dir) {
            return Some(format!("sched_{}", rest.trim_start_matches("sched_")));
        }
    }
    for f in [
        "sys.kernel.debug.sched_features",
        "kernel.debug.sched_features",
    ] {
        if k == f {
            return Some("sched_features".into());
        }
    }
    // A bare debugfs name (`latency_ns: 24000000`) or sysctl name.
    if !k.contains('.') {
        return Some(format!("sched_{}", k.trim_start_matches("sched_")));
    }
    None
}

fn is_feature_word(w: &str) -> bool {
    !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        && w.as_bytes()[0].is_ascii_uppercase()
}

fn features(file: &str, line: usize, key: &str, text: &str) -> Result<Vec<Feature>, ScenarioError> {
    text.split_whitespace()
        .map(|w| {
            if !is_feature_word(w) {
                return Err(error(
                    file,
                    Some(line),
                    key,
                    format!("'{w}' is not a feature name (upper case, digits and '_')"),
                ));
            }
            Ok(match w.strip_prefix("NO_") {
                Some(n) => Feature {
                    name: n.to_string(),
                    enabled: false,
                    line,
                },
                None => Feature {
                    name: w.to_string(),
                    enabled: true,
                    line,
                },
            })
        })
        .collect()
}

/// Reads a dump. Errors name the line: a line that is neither a setting, a feature line nor a
/// comment.
pub fn parse(file: &str, src: &str) -> Result<Dump, ScenarioError> {
    let mut d = Dump::default();
    for (i, raw) in src.lines().enumerate() {
        let line = i + 1;
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
            continue;
        }
        if t.starts_with("sysctl: ") {
            d.skipped.push(Note {
                line: Some(line),
                key: "sysctl".into(),
                message: format!("skipped: {t}"),
            });
            continue;
        }
        if t.split_whitespace().all(is_feature_word) {
            d.features
                .extend(features(file, line, "sched_features", t)?);
            continue;
        }
        // `key = value`, else `key: value` / `/path:value`.
        let split = t.split_once('=').or_else(|| t.split_once(':'));
        let Some((key, value)) = split else {
            return Err(error(
                file,
                Some(line),
                "",
                format!(
                    "expected `name = value`, `/path:value` or a sched_features line, got \
                     '{}'",
                    t.chars().take(60).collect::<String>()
                ),
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(error(
                file,
                Some(line),
                "",
                format!("'{key}' is not a sysctl name"),
            ));
        }
        match knob(key) {
            Some(k) if k == "sched_features" => {
                d.features.extend(features(file, line, key, value)?);
            }
            Some(knob) => d.entries.push(Entry {
                key: key.to_string(),
                knob,
                value: value.to_string(),
                line,
            }),
            None => d.other_keys += 1,
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_names_the_same_knob() {
        let src = "\
# sysctl -a | grep sched
kernel.sched_latency_ns = 24000000
kernel/sched_min_granularity_ns = 3000000
/proc/sys/kernel/sched_wakeup_granularity_ns:4000000
/sys/kernel/debug/sched/migration_cost_ns:500000
tunable_scaling: 1
vm.swappiness = 60
net.core.somaxconn = 4096
sysctl: permission denied on key 'fs.protected_hardlinks'
/sys/kernel/debug/sched_features:GENTLE_FAIR_SLEEPERS NO_START_DEBIT
HRTICK NO_WA_IDLE
";
        let d = parse("dump", src).unwrap();
        let knobs: Vec<(&str, &str, usize)> = d
            .entries
            .iter()
            .map(|e| (e.knob.as_str(), e.value.as_str(), e.line))
            .collect();
        assert_eq!(
            knobs,
            [
                ("sched_latency_ns", "24000000", 2),
                ("sched_min_granularity_ns", "3000000", 3),
                ("sched_wakeup_granularity_ns", "4000000", 4),
                ("sched_migration_cost_ns", "500000", 5),
                ("sched_tunable_scaling", "1", 6),
            ]
        );
        assert_eq!(d.other_keys, 2);
        assert_eq!(d.skipped.len(), 1);
        let f: Vec<(&str, bool, usize)> = d
            .features
            .iter()
            .map(|f| (f.name.as_str(), f.enabled, f.line))
            .collect();
        assert_eq!(
            f,
            [
                ("GENTLE_FAIR_SLEEPERS", true, 10),
                ("START_DEBIT", false, 10),
                ("HRTICK", true, 11),
                ("WA_IDLE", false, 11),
            ]
        );
    }

    #[test]
    fn malformed_lines_name_their_line() {
        let e = parse(
            "dump",
            "kernel.sched_latency_ns = 1\nthis is not a setting\n",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("expected"), "{e}");
        let e = parse("dump", "sched_features: GENTLE_FAIR_SLEEPERS hrtick\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(1), "sched_features"));
        assert!(e.message.contains("'hrtick'"), "{e}");
        let e = parse("dump", "kernel sched = 3\n").unwrap_err();
        assert_eq!(e.line, Some(1));
    }
}
