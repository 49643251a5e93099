//! Loading and running a scenario text in an integration test, shared by the test files that
//! include it with `#[path = "common/run.rs"] mod run;`: `--set` overrides as pairs, and the
//! engine's debug invariant checks on for every run.

use vmsched_core::report::Results;
use vmsched_core::scenario::ScenarioError;

/// Loads `src` (called `file` in its errors) with the `--set` overrides `ov`.
pub fn load(
    file: &str,
    src: &str,
    ov: &[(&str, &str)],
) -> Result<vmsched_sched::Scenario, ScenarioError> {
    let ov: Vec<(String, String)> = ov
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vmsched_sched::load(file, src, &ov)
}

/// Loads and runs `src` with debug checks; a scenario that does not load panics with its error.
pub fn run(file: &str, src: &str, ov: &[(&str, &str)]) -> Results {
    let s = load(file, src, ov).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.run();
    sim.results()
}

/// Runs `src` traced (up to 20 M records, none dropped) with the engine's checks on; returns
/// the results, the trace and the engine's log.
pub fn traced(src: &str) -> (Results, vmsched_core::trace::Trace, Vec<String>) {
    let s = load("test.toml", src, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.enable_trace(20_000_000);
    sim.run();
    let tr = sim.take_trace().expect("traced");
    assert_eq!(tr.dropped, 0);
    (sim.results(), tr, sim.log().to_vec())
}

/// The field and message of the error that refuses `src`; panics if it loads.
pub fn load_err(src: &str) -> (String, String) {
    match load("test.toml", src, &[]) {
        Ok(_) => panic!("the scenario should be refused:\n{src}"),
        Err(e) => (e.field.clone(), e.to_string()),
    }
}

/// The entity named `name` (at any level) of `r`.
pub fn ent<'a>(r: &'a Results, name: &str) -> &'a vmsched_core::report::EntityResult {
    r.entities
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no entity {name}"))
}

/// The workload named `name` of `r`.
pub fn wl<'a>(r: &'a Results, name: &str) -> &'a vmsched_core::report::WorkloadResult {
    r.workloads
        .iter()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("no workload {name}"))
}

/// Counter `c` of the workload named `w`.
pub fn counter(r: &Results, w: &str, c: &str) -> u64 {
    wl(r, w)
        .counters
        .iter()
        .find(|(k, _)| k == c)
        .unwrap_or_else(|| panic!("no counter {c} in {w}"))
        .1
}

/// Every entity's runstates add up to the elapsed (measured) time.
pub fn assert_sums(r: &Results) {
    for e in &r.entities {
        let sum = e.running_ns + e.runnable_ns + e.blocked_ns + e.offline_ns;
        assert_eq!(sum, r.measured_ns, "runstates of {} add up", e.name);
    }
}

/// The entity ids (global) whose name starts with one of `prefixes`.
pub fn ents_named(tr: &vmsched_core::trace::Trace, prefixes: &[&str]) -> Vec<u32> {
    tr.meta
        .ents
        .iter()
        .enumerate()
        .filter(|(_, m)| prefixes.iter().any(|p| m.name.starts_with(p)))
        .map(|(i, _)| i as u32)
        .collect()
}

/// The host pCPUs (global ids = local ids: the host is level 0) that switched in one of
/// `ents` in `[from, to)` ms, sorted, each once.
pub fn cpus_running(tr: &vmsched_core::trace::Trace, ents: &[u32], from: u64, to: u64) -> Vec<u32> {
    use vmsched_core::trace::Record;
    let ms = vmsched_core::NS_PER_MS;
    let mut cpus: Vec<u32> = tr
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Switch {
                t,
                cpu,
                next: Some(n),
                ..
            } if ents.contains(&n.0) && *t >= from * ms && *t < to * ms => Some(cpu.0),
            _ => None,
        })
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}
