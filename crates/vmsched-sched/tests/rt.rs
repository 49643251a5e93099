//! The RT class (SCHED_FIFO, SCHED_RR; guest/rt.rs) through whole scenarios: class order
//! against the fair class and errors naming the field.

use vmsched_core::report::Results;

fn run_src(src: &str, ov: &[(&str, &str)]) -> Results {
    let ov: Vec<(String, String)> = ov
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let s = vmsched_sched::load("rt.toml", src, &ov).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.run();
    sim.results()
}

fn load_err(src: &str, ov: &[(&str, &str)]) -> vmsched_core::scenario::ScenarioError {
    let ov: Vec<(String, String)> = ov
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vmsched_sched::load("rt.toml", src, &ov).expect_err("must be refused")
}

fn share(r: &Results, name: &str) -> f64 {
    r.entities
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no entity {name}"))
        .cpu_share
}

/// One guest vCPU on its own pCPU (a pinned host): the guest's scheduler alone decides.
const ONE_VCPU: &str = r#"
[run]
duration_ms = 3000
[machine]
pcpus = 1
[host]
scheduler = "pinned"
[[domain]]
name = "g"
vcpus = 1
[domain.sched]
scheduler = "cfs"
"#;

/// A SCHED_FIFO priority-10 CPU hog.
const FIFO_HOG: &str = r#"
[[domain.workload]]
kind = "program"
name = "hog"
policy = "fifo"
rt_priority = 10
steps = [{ op = "compute", ms = 10 }, { op = "loop", to = 0 }]
"#;

const FAIR_LOOP: &str = "\n[[domain.workload]]\nkind = \"cpu_loop\"\nname = \"loop\"\n";

/// §3.1: a FIFO hog keeps its vCPU from a CPU-bound fair task (no throttling in this model
/// yet).
#[test]
fn a_fifo_hog_runs_before_fair_work() {
    let r = run_src(&format!("{ONE_VCPU}{FIFO_HOG}{FAIR_LOOP}"), &[]);
    assert_eq!(share(&r, "loop.0"), 0.0);
    assert!(share(&r, "hog.0") > 0.999);
}

#[test]
fn bad_rt_sysctls_are_refused_by_field() {
    let e = load_err(
        ONE_VCPU,
        &[("domain.0.sched.rt.sched_rt_runtime_us", "2000000")],
    );
    assert_eq!(e.field, "domain.0.sched.rt.sched_rt_runtime_us", "{e}");
    let e = load_err(
        ONE_VCPU,
        &[("domain.0.sched.rt.sched_rr_timeslice_ms", "0")],
    );
    assert_eq!(e.field, "domain.0.sched.rt.sched_rr_timeslice_ms", "{e}");
    let e = load_err(
        ONE_VCPU,
        &[("domain.0.sched.rt.sched_rr_timeslise_ms", "1")],
    );
    assert!(e.message.contains("sched_rr_timeslise_ms"), "{e}");
}

/// A run-time policy change that would move a task between the RT and the fair class is
/// refused by name, and so is an RT policy without a priority in 1..=99.
#[test]
fn class_changing_events_are_refused_by_field() {
    let src = format!("{ONE_VCPU}{FIFO_HOG}{FAIR_LOOP}");
    let ev = |body: &str| {
        format!("{src}\n[[event]]\nat_ms = 10\naction = \"sched_task\"\ndomain = \"g\"\n{body}\n")
    };
    let e = load_err(
        &ev("workload = \"loop\"\npolicy = \"fifo\"\nrt_priority = 5"),
        &[],
    );
    assert_eq!(e.field, "event.0.policy", "{e}");
    assert!(e.message.contains("class"), "{e}");
    let e = load_err(&ev("workload = \"hog\"\npolicy = \"normal\""), &[]);
    assert_eq!(e.field, "event.0.policy", "{e}");
    let e = load_err(&ev("workload = \"hog\"\nrt_priority = 0"), &[]);
    assert_eq!(e.field, "event.0.rt_priority", "{e}");
    // Within the class: FIFO to RR at another priority runs.
    let ok = ev("workload = \"hog\"\npolicy = \"rr\"\nrt_priority = 50");
    let r = run_src(&ok, &[]);
    assert!(share(&r, "hog.0") > 0.9);
}
