//! Cost profiles: the per-operation costs of one machine, in one file a scenario names
//! (`costs = "cortex-a55"` or `costs = "path/to/profile.toml"`; docs/scenarios.md).
//!
//! A profile is TOML with these tables, each merged into the scenario where the scenario does
//! not give the field itself (the scenario's own figures win):
//! - `[machine]` into `[machine]` (`ctxsw_cost_ns`, `ipi_latency_ns`, `kick_ns`, ...);
//! - `[kernel]` into every domain's `[domain.kernel]` (a guest's `ctxsw_cost_ns`, ...);
//! - `[netback]` and `[device_model]` into every domain's `[domain.netback]` and
//!   `[domain.device_model]` (a driver domain's per-packet costs, an HVM guest's qemu-dm work
//!   per emulated access; each is read only where it applies, docs/io.md);
//! - `[workload.KIND]` into every workload of that kind, the domains' and the KVM host's
//!   processes (`[workload.context1]`: `c_syscall_ns`, `c_pipe_rw_ns`, ...);
//! - `[profile]` (name, description) and `[measured]` (figures the model takes no field for,
//!   kept with the profile for the record) are not merged.
//!
//! The shipped profiles are in `crates/vmsched-core/profiles/`, compiled in, each figure
//! with its source in a comment. `vmsched calibrate` writes one measured on the local machine.
//! The merge works on the TOML document before it is read as a scenario, so a profile's field
//! is checked exactly as the same field written in the scenario (and named with the profile).

use std::path::{Path, PathBuf};

use toml::{Table, Value};

/// The shipped profiles: name and text.
pub const SHIPPED: &[(&str, &str)] = &[
    ("cortex-a55", include_str!("../../profiles/cortex-a55.toml")),
    (
        "chromebook-exynos5250",
        include_str!("../../profiles/chromebook-exynos5250.toml"),
    ),
    ("core2-quad", include_str!("../../profiles/core2-quad.toml")),
    (
        "xeon-2x4-2.5ghz",
        include_str!("../../profiles/xeon-2x4-2.5ghz.toml"),
    ),
];

/// The tables a profile may have.
const SECTIONS: &[&str] = &[
    "profile",
    "measured",
    "machine",
    "kernel",
    "netback",
    "device_model",
    "workload",
];

/// The tables merged into every `[[domain]]`'s table of the same name.
const DOMAIN_SECTIONS: &[&str] = &["kernel", "netback", "device_model"];

/// The shipped profiles' names, for messages.
pub fn shipped_names() -> String {
    SHIPPED
        .iter()
        .map(|(n, _)| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A spec names a file when it has a path separator or ends in `.toml`; else a shipped profile.
fn is_path(spec: &str) -> bool {
    spec.contains('/') || spec.ends_with(".toml")
}

/// The text of the profile `spec` names: a shipped profile, or a file (a relative path is
/// taken from the scenario file's directory when that file exists, else from the working
/// directory). Err: the message (the caller names the field).
pub fn source(spec: &str, scenario_file: &str) -> Result<String, String> {
    if !is_path(spec) {
        return SHIPPED
            .iter()
            .find(|(n, _)| *n == spec)
            .map(|(_, t)| t.to_string())
            .ok_or_else(|| {
                format!(
                    "unknown cost profile \"{spec}\"; shipped: {} (or a path to a profile file)",
                    shipped_names()
                )
            });
    }
    let p = Path::new(spec);
    let path: PathBuf = match Path::new(scenario_file).parent() {
        Some(dir) if p.is_relative() && Path::new(scenario_file).is_file() => dir.join(p),
        _ => p.to_path_buf(),
    };
    let what = |e: String| format!("cost profile {}: {e}", path.display());
    // A regular file of bounded size: not a device or a FIFO a scenario could name to hang
    // the load (the fuzz targets feed arbitrary scenarios).
    let meta = std::fs::metadata(&path).map_err(|e| what(e.to_string()))?;
    if !meta.is_file() || meta.len() > MAX_PROFILE_BYTES {
        return Err(what(format!(
            "not a regular file of at most {MAX_PROFILE_BYTES} bytes"
        )));
    }
    std::fs::read_to_string(&path).map_err(|e| what(e.to_string()))
}

/// The largest profile file read (a profile is a few dozen lines).
const MAX_PROFILE_BYTES: u64 = 1 << 20;

/// Parses a profile's text and checks its tables. Err: the message.
pub fn parse(spec: &str, text: &str) -> Result<Table, String> {
    let t: Table =
        toml::from_str(text).map_err(|e| format!("cost profile {spec}: {}", e.message().trim()))?;
    for (k, v) in &t {
        if !SECTIONS.contains(&k.as_str()) {
            return Err(format!(
                "cost profile {spec}: unknown table [{k}] (expected one of: {})",
                SECTIONS.join(", ")
            ));
        }
        if !v.is_table() {
            return Err(format!("cost profile {spec}: `{k}` must be a table"));
        }
    }
    if let Some(w) = t.get("workload").and_then(Value::as_table) {
        if let Some((k, _)) = w.iter().find(|(_, v)| !v.is_table()) {
            return Err(format!(
                "cost profile {spec}: `workload.{k}` must be a table ([workload.KIND])"
            ));
        }
    }
    Ok(t)
}

/// Copies `from`'s keys into `into` where `into` has none.
fn fill(into: &mut Table, from: &Table) {
    for (k, v) in from {
        if !into.contains_key(k) {
            into.insert(k.clone(), v.clone());
        }
    }
}

fn table<'a>(doc: &'a mut Table, key: &str) -> Option<&'a mut Table> {
    doc.get_mut(key).and_then(Value::as_table_mut)
}

/// Merges the profile into the scenario document: each of its fields where the scenario has
/// none (see the module doc).
pub fn apply(doc: &mut Value, profile: &Table) {
    let Some(doc) = doc.as_table_mut() else {
        return;
    };
    let section = |k: &str| profile.get(k).and_then(Value::as_table);
    if let (Some(p), Some(m)) = (section("machine"), table(doc, "machine")) {
        fill(m, p);
    }
    let kinds = section("workload");
    let workloads = |list: Option<&mut Value>| {
        let (Some(kinds), Some(list)) = (kinds, list.and_then(Value::as_array_mut)) else {
            return;
        };
        for w in list.iter_mut().filter_map(Value::as_table_mut) {
            let kind = w.get("kind").and_then(Value::as_str).unwrap_or("");
            if let Some(p) = kinds.get(kind).and_then(Value::as_table) {
                fill(w, p);
            }
        }
    };
    if let Some(doms) = doc.get_mut("domain").and_then(Value::as_array_mut) {
        for d in doms.iter_mut().filter_map(Value::as_table_mut) {
            for &name in DOMAIN_SECTIONS {
                let Some(p) = section(name) else { continue };
                let t = d.entry(name).or_insert_with(|| Value::Table(Table::new()));
                if let Some(t) = t.as_table_mut() {
                    fill(t, p);
                }
            }
            workloads(d.get_mut("workload"));
        }
    }
    if let Some(h) = table(doc, "host") {
        workloads(h.get_mut("process"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(src: &str) -> Value {
        toml::from_str(src).unwrap()
    }

    const PROFILE: &str = "[machine]\nctxsw_cost_ns = 5\nipi_latency_ns = 6\n\
                           [kernel]\nctxsw_cost_ns = 7\n\
                           [workload.context1]\nc_pipe_rw_ns = 8\n\
                           [measured]\ntimer_ns = 9\n";

    #[test]
    fn apply_fills_only_what_is_missing_everywhere_it_belongs() {
        let p = parse("p", PROFILE).unwrap();
        let mut d = doc(
            "[machine]\npcpus = 1\nctxsw_cost_ns = 1\n[host]\nscheduler = \"linux\"\n\
             [[host.process]]\nkind = \"context1\"\nname = \"h\"\n\
             [[host.process]]\nkind = \"cpu_loop\"\nname = \"l\"\n\
             [[domain]]\nname = \"a\"\n[[domain.workload]]\nkind = \"context1\"\nname = \"c\"\n\
             c_pipe_rw_ns = 2\n\
             [[domain]]\nname = \"b\"\n[domain.kernel]\nctxsw_cost_ns = 3\n",
        );
        apply(&mut d, &p);
        let at = |path: &str| {
            path.split('.')
                .try_fold(&d, |v, k| match k.parse::<usize>() {
                    Ok(i) => v.get(i),
                    Err(_) => v.get(k),
                })
        };
        let int = |path: &str| at(path).and_then(Value::as_integer);
        assert_eq!(
            int("machine.ctxsw_cost_ns"),
            Some(1),
            "the scenario's own wins"
        );
        assert_eq!(int("machine.ipi_latency_ns"), Some(6));
        assert_eq!(int("domain.0.kernel.ctxsw_cost_ns"), Some(7), "table made");
        assert_eq!(int("domain.1.kernel.ctxsw_cost_ns"), Some(3));
        assert_eq!(int("domain.0.workload.0.c_pipe_rw_ns"), Some(2));
        assert_eq!(int("host.process.0.c_pipe_rw_ns"), Some(8));
        assert_eq!(
            at("host.process.1.c_pipe_rw_ns"),
            None,
            "only the named kind"
        );
        assert_eq!(at("measured"), None, "[measured] is not merged");
    }

    #[test]
    fn netback_and_device_model_fill_every_domain_field_by_field() {
        let p = parse(
            "p",
            "[netback]\nnic_rx_ns = 4\n[device_model]\nnotify_ns = 5\nemulate_ns = 6\n",
        )
        .unwrap();
        let mut d = doc(
            "[[domain]]\nname = \"a\"\n[domain.device_model]\nemulate_ns = 1\n\
                         [[domain]]\nname = \"b\"\n",
        );
        apply(&mut d, &p);
        let int = |i: usize, t: &str, k: &str| d["domain"][i][t][k].as_integer();
        assert_eq!(
            int(0, "device_model", "emulate_ns"),
            Some(1),
            "the scenario's own"
        );
        assert_eq!(int(0, "device_model", "notify_ns"), Some(5));
        assert_eq!(int(1, "device_model", "emulate_ns"), Some(6), "table made");
        assert_eq!(int(1, "netback", "nic_rx_ns"), Some(4));
        assert_eq!(
            d["domain"][1].get("kernel"),
            None,
            "no [kernel] in this profile"
        );
    }

    #[test]
    fn parse_refuses_unknown_tables_and_bad_shapes() {
        assert!(parse("p", "[cpu]\nx = 1\n")
            .unwrap_err()
            .contains("unknown table [cpu]"));
        assert!(parse("p", "machine = 1\n")
            .unwrap_err()
            .contains("`machine` must be a table"));
        let e = parse("p", "[workload]\ncontext1 = 1\n").unwrap_err();
        assert!(e.contains("workload.context1"), "{e}");
        assert!(parse("p", "[machine\n")
            .unwrap_err()
            .starts_with("cost profile p:"));
    }

    #[test]
    fn names_resolve_to_shipped_profiles_and_unknown_ones_list_them() {
        for (name, text) in SHIPPED {
            assert_eq!(source(name, "x.toml").unwrap(), *text);
            parse(name, text).unwrap();
        }
        let e = source("/dev/zero.toml", "x.toml").unwrap_err();
        assert!(e.contains("No such file"), "{e}");
        let e = source("/dev/zero", "x.toml").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let e = source("nope", "x.toml").unwrap_err();
        assert!(
            e.contains("\"cortex-a55\", \"chromebook-exynos5250\""),
            "{e}"
        );
    }
}
