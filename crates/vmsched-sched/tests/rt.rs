//! The RT class (SCHED_FIFO, SCHED_RR; guest/rt.rs) through whole scenarios: class order
//! against the fair class, RT throttling, and errors naming the field.

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

/// §3.3: a FIFO hog leaves a CPU-bound fair task only the throttled part of every period
/// (1 − 950/1000 = 5 %); with `sched_rt_runtime_us = -1` it leaves it nothing.
#[test]
fn throttling_leaves_fair_work_five_percent() {
    let src = format!("{ONE_VCPU}{FIFO_HOG}{FAIR_LOOP}");
    let r = run_src(&src, &[]);
    let (hog, fair) = (share(&r, "hog.0"), share(&r, "loop.0"));
    // Three periods; the tick (4 ms at HZ 250) is the throttle's granularity.
    assert!((0.94..0.955).contains(&hog), "RT share {hog}");
    assert!((0.045..0.06).contains(&fair), "fair share {fair}");
    let r = run_src(&src, &[("domain.0.sched.rt.sched_rt_runtime_us", "-1")]);
    assert_eq!(share(&r, "loop.0"), 0.0, "unthrottled RT starves fair work");
}

/// §3.3: without fair work a throttled CPU idles: RT still gets no more than its runtime.
#[test]
fn throttled_rt_idles_the_cpu_without_fair_work() {
    let r = run_src(&format!("{ONE_VCPU}{FIFO_HOG}"), &[]);
    let hog = share(&r, "hog.0");
    assert!((0.94..0.955).contains(&hog), "RT share {hog}");
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
    let e = load_err(ONE_VCPU, &[("domain.0.sched.rt.sched_rt_perid_us", "1")]);
    assert!(e.message.contains("sched_rt_perid_us"), "{e}");
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
