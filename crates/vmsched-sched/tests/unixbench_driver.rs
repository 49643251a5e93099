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

/// The shipped N-copy form (`seed000_unixbench_ncopy.toml`, `./Run -c 4`) shortened to
/// `passes` passes of `pass_s` s after 300 ms gaps, with `copies` copies.
fn ncopy(passes: u32, pass_s: u32, copies: u32) -> vmsched_core::report::Results {
    let gap_ms = 300;
    let total_ms = u64::from(passes) * (gap_ms + u64::from(pass_s) * 1000) + 200;
    let ov: Vec<(String, String)> = [
        ("run.duration_ms", total_ms.to_string()),
        ("domain.0.workload.0.passes", passes.to_string()),
        ("domain.0.workload.0.pass_s", pass_s.to_string()),
        ("domain.0.workload.0.gap_ms", gap_ms.to_string()),
        ("domain.0.workload.0.copies", copies.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let text = scenario("seed000_unixbench_ncopy.toml");
    let s = vmsched_sched::load("s.toml", &text, &ov).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.run();
    sim.results()
}

#[test]
fn n_copies_run_each_pass_in_parallel_and_count_together() {
    let (passes, pass_s) = (2, 1);
    let one = ncopy(passes, pass_s, 1);
    let four = ncopy(passes, pass_s, 4);
    let wl = |r: &vmsched_core::report::Results| {
        r.workloads
            .iter()
            .find(|w| w.name == "context1")
            .expect("the context1 workload")
            .clone()
    };
    let (w1, w4) = (wl(&one), wl(&four));
    let count = |w: &vmsched_core::report::WorkloadResult, n: &str| {
        w.counters
            .iter()
            .find(|(c, _)| c == n)
            .unwrap_or_else(|| panic!("counter {n}"))
            .1
    };
    let per_pass = |w: &vmsched_core::report::WorkloadResult| -> Vec<u64> {
        (1..=passes)
            .map(|k| count(w, &format!("pass{k}")))
            .collect()
    };
    let (p1, p4) = (per_pass(&w1), per_pass(&w4));
    assert_eq!(p4.iter().sum::<u64>(), count(&w4, "iterations"));
    // Four pairs on four vCPUs (each shared with a hog's vCPU) make more than twice the
    // round trips of one pair, which has the guest's idle vCPUs to itself (51k against 120k
    // per 1 s pass with seed 1: each pair then gets about one vCPU's half of a pCPU).
    for (a, b) in p1.iter().zip(&p4) {
        assert!(*b > 2 * *a, "one copy {p1:?}, four {p4:?}");
    }
    // The copies ran at the same time: the driver finished both passes within the run, which
    // copies one after the other (4 × 1 s per pass) would not.
    let driver = four
        .entities
        .iter()
        .find(|e| e.name == "context1.run")
        .expect("the driver task");
    assert_eq!(driver.final_state, RunState::Offline, "the driver exited");
    // Every parent recorded its elapsed time, each about the pass.
    let (_, elapsed) = w4
        .histograms
        .iter()
        .find(|(h, _)| h == "elapsed")
        .expect("the elapsed histogram");
    assert_eq!(elapsed.count, u64::from(passes * 4));
    let secs = elapsed.mean_ns / 1e9;
    assert!(
        (f64::from(pass_s)..f64::from(pass_s) + 0.3).contains(&secs),
        "{secs}"
    );
    assert!(
        (w4.figure.value - run_score(&p4, secs)).abs() <= 1e-9 * w4.figure.value,
        "the figure is Run's score of the summed passes"
    );
    // Every process of every copy of every pass was forked, ran and exited.
    for k in 1..=passes {
        for c in 1..=4 {
            for role in ["parent", "child"] {
                let name = format!("context1.{role}{k}.{c}");
                let e = four
                    .entities
                    .iter()
                    .find(|e| e.name == name)
                    .unwrap_or_else(|| panic!("task {name}"));
                assert!(e.running_ns > 0, "{name} ran");
                assert_eq!(e.final_state, RunState::Offline, "{name} exited");
            }
        }
    }
}
