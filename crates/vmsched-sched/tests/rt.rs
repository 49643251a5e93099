//! The RT class (SCHED_FIFO, SCHED_RR; guest/rt.rs) through whole scenarios: class order
//! against the fair class, RT throttling, cyclictest `-p`, and errors naming the field.

use vmsched_core::report::Results;

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;

fn run_src(src: &str, ov: &[(&str, &str)]) -> Results {
    run::run("rt.toml", src, ov)
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

fn latency(r: &Results, name: &str) -> vmsched_core::metrics::HistSummary {
    r.workloads
        .iter()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("no workload {name}"))
        .histograms[0]
        .1
        .clone()
}

/// One guest vCPU on its own pCPU (a pinned host): the guest's scheduler alone decides.
const ONE_VCPU: &str = r#"
[run]
vary = false
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

/// §3.6: with the 6.12 fair server instead of throttling, the fair loop still gets 50 ms a
/// second under the FIFO hog, but a hog alone keeps its whole CPU.
#[test]
fn the_fair_server_guarantees_fair_work_without_throttling() {
    let fs = ("domain.0.sched.rt.fair_server", "true");
    let r = run_src(&format!("{ONE_VCPU}{FIFO_HOG}{FAIR_LOOP}"), &[fs]);
    let fair = share(&r, "loop.0");
    assert!((0.045..0.06).contains(&fair), "fair share {fair}");
    let r = run_src(&format!("{ONE_VCPU}{FIFO_HOG}"), &[fs]);
    assert!(share(&r, "hog.0") > 0.999, "RT alone is not throttled");
}

/// §3.3: without fair work a throttled CPU idles: RT still gets no more than its runtime.
#[test]
fn throttled_rt_idles_the_cpu_without_fair_work() {
    let r = run_src(&format!("{ONE_VCPU}{FIFO_HOG}"), &[]);
    let hog = share(&r, "hog.0");
    assert!((0.94..0.955).contains(&hog), "RT share {hog}");
}

/// §3.1 with cyclictest (workloads.md §2.1 `-p`): a thread with a priority above a FIFO hog's
/// preempts it at every wake-up (no latency, no slack), except while the CPU's RT queue is
/// throttled, which holds it back with the hog (§3.3: the whole queue is throttled); one
/// below the hog never runs; a SCHED_OTHER one runs only while the hog is throttled.
#[test]
fn cyclictest_priority_orders_it_against_a_fifo_hog() {
    let ct = "\n[[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\nmain_thread = false\n";
    let src = format!("{ONE_VCPU}{FIFO_HOG}{ct}");
    let prio = |p: &'static str| ("domain.0.workload.1.priority", p);
    let unthrottled = ("domain.0.sched.rt.sched_rt_runtime_us", "-1");
    let above = latency(&run_src(&src, &[prio("20"), unthrottled]), "ct");
    assert!(above.count >= 2995, "every period sampled: {}", above.count);
    assert_eq!(above.max_us, 0, "FIFO 20 preempts FIFO 10 at once");
    let throttled = latency(&run_src(&src, &[prio("20")]), "ct");
    assert_eq!(
        throttled.count - throttled.buckets_us[0],
        3,
        "0 µs but for one late sample per throttled window"
    );
    // About 50 periods lost in each of the three throttled windows, one late sample each.
    assert!(
        (2830..2870).contains(&throttled.count),
        "periods sampled: {}",
        throttled.count
    );
    assert!(
        (45_000..=50_000).contains(&throttled.max_us),
        "the throttled window shows as latency: {} us",
        throttled.max_us
    );
    // Below the hog: throttling frees the CPU for the fair class only, so it never runs.
    let below = latency(&run_src(&src, &[prio("5")]), "ct");
    assert_eq!(below.count, 0, "FIFO 5 behind a FIFO 10 hog never runs");
    // SCHED_OTHER: it runs in the throttled 50 ms of every second, one late sample each time
    // and then one per period (W3b).
    let other = latency(&run_src(&src, &[prio("0")]), "ct");
    assert!(
        (100..200).contains(&other.count),
        "about 50 periods in each of 3 windows: {} samples",
        other.count
    );
    assert!(
        other.max_us > 900_000,
        "waits out the RT runtime: max {} us",
        other.max_us
    );
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

/// A `sched_task` event `body` at `at_ms` on guest `g`.
fn event(at_ms: &str, body: &str) -> String {
    format!("\n[[event]]\nat_ms = {at_ms}\naction = \"sched_task\"\ndomain = \"g\"\n{body}\n")
}

/// `chrt` of a runnable guest task at run time moves it between the fair and the RT class at
/// once (the Linux core's class switch, as at the KVM host): the FIFO hog made normal at
/// 1.5 s shares the vCPU with the fair loop from then on; the loop made FIFO above the hog at
/// 1.5 s takes the vCPU (up to RT throttling). Within the class a FIFO→RR change runs too.
#[test]
fn a_runnable_guest_task_changes_class_at_once() {
    let src = format!("{ONE_VCPU}{FIFO_HOG}{FAIR_LOOP}");
    // Before: the loop has 5 % (throttling); after, half: (0.075 + 0.75) / 3 s.
    let r = run_src(
        &format!(
            "{src}{}",
            event("1500", "workload = \"hog\"\npolicy = \"normal\"")
        ),
        &[],
    );
    let (hog, fair) = (share(&r, "hog.0"), share(&r, "loop.0"));
    assert!(
        (0.25..0.31).contains(&fair),
        "the loop shares after the move: {fair}"
    );
    assert!((0.69..0.75).contains(&hog), "the hog: {hog}");
    // The loop made FIFO 20 over the FIFO-10 hog: it holds the vCPU (95 % of each period).
    let r = run_src(
        &format!(
            "{src}{}",
            event(
                "1500",
                "workload = \"loop\"\npolicy = \"fifo\"\nrt_priority = 20"
            )
        ),
        &[],
    );
    let fair = share(&r, "loop.0");
    assert!((0.48..0.53).contains(&fair), "5 % then 95 %: {fair}");
    // Within the class: FIFO to RR at another priority runs.
    let r = run_src(
        &format!(
            "{src}{}",
            event(
                "10",
                "workload = \"hog\"\npolicy = \"rr\"\nrt_priority = 50"
            )
        ),
        &[],
    );
    assert!(share(&r, "hog.0") > 0.9);
}

/// A blocked guest task `chrt`'d at run time changes class at its next wake-up: a fair
/// sleeper (10 µs of work per 1 ms sleep) under a FIFO hog runs only in the throttled 50 ms of
/// each second; made FIFO above the hog while it sleeps in such a window (at 976 ms), it
/// preempts the hog at every wake-up from then on.
#[test]
fn a_blocked_guest_task_changes_class_at_its_wake_up() {
    let sleeper = "\n[[domain.workload]]\nkind = \"program\"\nname = \"s\"\ncounters = [\"n\"]\n\
                   steps = [{ op = \"compute\", us = 10 }, { op = \"sleep\", us = 1000, slack_ns = 0 }, \
                   { op = \"count\", counter = \"n\" }, { op = \"loop\", to = 0 }]\n";
    let src = format!("{ONE_VCPU}{FIFO_HOG}{sleeper}");
    let loops = |r: &Results| {
        let w = r.workloads.iter().find(|w| w.name == "s").unwrap();
        w.counters.iter().find(|(k, _)| k == "n").unwrap().1
    };
    let before = loops(&run_src(&src, &[]));
    let chrt = event(
        "976",
        "workload = \"s\"\npolicy = \"fifo\"\nrt_priority = 20",
    );
    let after = loops(&run_src(&format!("{src}{chrt}"), &[]));
    // Unchanged: about 50 loops in each of the 3 throttled windows. Changed: every ms after
    // the first second.
    assert!(before < 200, "throttled windows only: {before}");
    assert!(after > 1800, "FIFO from its next wake-up: {after}");
}

/// Refused by field: an RT priority outside 1..=99 for an RT task, and a move to or from
/// SCHED_DEADLINE (no runtime, deadline or period is given at run time).
#[test]
fn impossible_policy_changes_are_refused_by_field() {
    let src = format!("{ONE_VCPU}{FIFO_HOG}{FAIR_LOOP}");
    let e = load_err(
        &format!(
            "{src}{}",
            event("10", "workload = \"hog\"\nrt_priority = 0")
        ),
        &[],
    );
    assert_eq!(e.field, "event.0.rt_priority", "{e}");
    let e = load_err(
        &format!(
            "{src}{}",
            event("10", "workload = \"loop\"\npolicy = \"fifo\"")
        ),
        &[],
    );
    assert_eq!(e.field, "event.0.policy", "{e}");
    assert!(e.message.contains("rt_priority"), "{e}");
    let e = load_err(
        &format!(
            "{src}{}",
            event("10", "workload = \"loop\"\npolicy = \"deadline\"")
        ),
        &[],
    );
    assert_eq!(e.field, "event.0.policy", "{e}");
}

/// Found by the fuzz generators (docs/fuzzing.md): a fair server of zero runtime looped forever
/// replenishing whole periods of nothing. As Linux 6.12's `dl_server_start` (which returns at
/// once for a server of no runtime, the "fair server disabled" setting of its debugfs file), a
/// zero-runtime server never starts: the FIFO hog keeps its CPU, as with throttling off.
#[test]
fn a_fair_server_of_no_runtime_never_runs() {
    let src = format!("{ONE_VCPU}{FIFO_HOG}{FAIR_LOOP}");
    let ov = [
        ("run.duration_ms", "20"),
        ("domain.0.sched.rt.fair_server", "true"),
        ("domain.0.sched.rt.fair_server_period_ns", "1000000"),
        ("domain.0.sched.rt.fair_server_runtime_ns", "0"),
    ];
    let r = run_src(&src, &ov);
    assert_eq!(
        share(&r, "loop.0"),
        0.0,
        "a server of no runtime gives fair work nothing"
    );
}

/// RT_RUNTIME_SHARE (on in 3.17, off from 5.10): one FIFO hog in a 2-vCPU guest borrows the
/// idle vCPU's unused RT runtime up to the whole period and is never throttled under 3.17;
/// under 5.10, or 3.17 with the feature off, it gets its own CPU's 950 ms a second.
#[test]
fn runtime_share_lets_one_hog_run_the_whole_period() {
    let two = ONE_VCPU
        .replace("pcpus = 1", "pcpus = 2")
        .replace("vcpus = 1", "vcpus = 2");
    let src = format!("{two}{FIFO_HOG}");
    let v317 = ("domain.0.sched.kernel", "\"3.17\"");
    let hog = share(&run_src(&src, &[v317]), "hog.0");
    assert!(hog > 0.999, "3.17 shares runtime: {hog}");
    let hog = share(&run_src(&src, &[]), "hog.0");
    assert!((0.94..0.955).contains(&hog), "5.10 throttles: {hog}");
    let off = ("domain.0.sched.rt.rt_runtime_share", "false");
    let hog = share(&run_src(&src, &[v317, off]), "hog.0");
    assert!(
        (0.94..0.955).contains(&hog),
        "3.17 with the feature off: {hog}"
    );
    let on = ("domain.0.sched.rt.rt_runtime_share", "true");
    assert!(
        share(&run_src(&src, &[on]), "hog.0") > 0.999,
        "5.10 with the feature on"
    );
}
