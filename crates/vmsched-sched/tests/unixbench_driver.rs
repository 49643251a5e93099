//! Context1 under UnixBench's `Run` driver (`driver = "unixbench"`, issue 14 item 2;
//! workload/context1.rs): seed 000's pinned pair run as passes of fresh processes with idle
//! gaps. Each pass forks a new parent and child that make round trips for the pass's length
//! and exit; the driver waits for both before its next gap; the score is `Run`'s.

use vmsched_core::sched::RunState;
use vmsched_core::workload::context1::run_score;

fn scenario(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../python/vmsched/scenarios")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

/// Seed 000's pinned pair with the driver: `passes` passes of `pass_s` s after gaps of
/// `gap_ms`, the run covering them all (no warm-up).
fn pinned_pair(passes: u32, pass_s: u32, gap_ms: u64) -> vmsched_core::report::Results {
    let text = scenario("seed000_context1_ratelimit.toml").replacen(
        "kind = \"context1\"",
        &format!(
            "kind = \"context1\"\ndriver = \"unixbench\"\npasses = {passes}\npass_s = {pass_s}\n\
             gap_ms = {gap_ms}"
        ),
        1,
    );
    let total_ms = u64::from(passes) * (gap_ms + u64::from(pass_s) * 1000) + 200;
    let ov: Vec<(String, String)> = [
        ("run.duration_ms", total_ms.to_string()),
        ("run.warmup_ms", "0".to_string()),
        ("run.sample_interval_us", "0".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let s = vmsched_sched::load("s.toml", &text, &ov).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.run();
    sim.results()
}

#[test]
fn every_pass_forks_a_fresh_pair_that_runs_for_the_pass_and_exits() {
    let (passes, pass_s, gap_ms) = (3, 1, 300);
    let r = pinned_pair(passes, pass_s, gap_ms);
    let w = r
        .workloads
        .iter()
        .find(|w| w.name == "context1")
        .expect("the context1 workload");
    let count = |n: &str| {
        w.counters
            .iter()
            .find(|(c, _)| c == n)
            .unwrap_or_else(|| panic!("counter {n}"))
            .1
    };
    let per_pass: Vec<u64> = (1..=passes).map(|k| count(&format!("pass{k}"))).collect();
    // Every pass made round trips, and together they are all the round trips.
    assert!(per_pass.iter().all(|&c| c > 1000), "{per_pass:?}");
    assert_eq!(per_pass.iter().sum::<u64>(), count("iterations"));
    // Each parent ran for its pass: fork to alarm is the pass (plus at most a round trip or a
    // few slices of domU2's vCPU), never less.
    let (_, elapsed) = w
        .histograms
        .iter()
        .find(|(h, _)| h == "elapsed")
        .expect("the elapsed histogram");
    assert_eq!(elapsed.count, u64::from(passes));
    let secs = elapsed.mean_ns / 1e9;
    assert!(
        (f64::from(pass_s)..f64::from(pass_s) + 0.3).contains(&secs),
        "{secs}"
    );
    // The figure is Run's score of these passes.
    let want = run_score(&per_pass, secs);
    assert!(
        (w.figure.value - want).abs() <= 1e-9 * want,
        "{} {want}",
        w.figure.value
    );
    // Every process of every pass existed (was forked) and is gone at the end; the driver
    // ran every pass and exited.
    for name in (1..=passes).flat_map(|k| [format!("parent{k}"), format!("child{k}")]) {
        let e = r
            .entities
            .iter()
            .find(|e| e.name == format!("context1.{name}"))
            .unwrap_or_else(|| panic!("task {name}"));
        assert!(e.running_ns > 0, "{name} ran");
        assert_eq!(e.final_state, RunState::Offline, "{name} exited");
    }
}
