//! The replay workload (`kind = "replay"`, docs/replay.md) in whole runs: a dependency wake-up
//! waits for its waker to reach its point (so a scheduler that delays the waker delays the
//! wakee), a timer-like sleep does not, and a trace read by the importer replays its recorded
//! CPU time and wake-ups when nothing competes.

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;

use run::{assert_sums, ent, run};
use vmsched_core::import::schedtrace::{self, Selection, TraceFormat};
use vmsched_core::report::Results;

/// Two tasks on a 2-CPU bare-metal level for 20 ms: `a` on CPU 0 computes 12 ms, wakes `b`,
/// computes 8 ms; `b` on CPU 1 sleeps as `b_sleep` says, then computes 5 ms. `hog`: a CPU loop
/// on CPU 0 beside `a`.
fn scenario(b_sleep: &str, hog: bool) -> String {
    let hog = if hog {
        "[[domain.workload]]\nkind = \"cpu_loop\"\nname = \"hog\"\naffinity = [0]\n"
    } else {
        ""
    };
    format!(
        r#"
[run]
vary = false
duration_ms = 20
[machine]
pcpus = 2
[host]
scheduler = "pinned"
[[domain]]
name = "machine"
vcpus = 2
[domain.sched]
scheduler = "eevdf"
kernel = "6.18"
[[domain.workload]]
kind = "replay"
name = "trace"
tasks = [
  {{ name = "a:1", affinity = [0], steps = "c12000000 k1 c8000000" }},
  {{ name = "b:2", affinity = [1], steps = "{b_sleep} c5000000" }},
]
{hog}"#
    )
}

fn wakes(r: &Results, task: &str) -> u64 {
    let w = r.workloads.iter().find(|w| w.name == "trace").unwrap();
    w.counters.iter().find(|(n, _)| n == task).unwrap().1
}

#[test]
fn a_dependency_wake_waits_for_its_waker() {
    // Alone, a reaches its wake-up at 12 ms: b runs its 5 ms before the end (20 ms).
    let r = run("replay.toml", &scenario("w0", false), &[]);
    assert_eq!(ent(&r, "trace.b:2").executed_ns, 5_000_000);
    assert_eq!(wakes(&r, "b:2"), 1);
    assert_eq!(ent(&r, "trace.a:1").executed_ns, 20_000_000);
    // A hog shares CPU 0 with a: a gets about half of it and has not reached its wake-up
    // (12 ms of CPU) by the end, so b has not run: the replayed wake-up moved with its waker.
    let r = run("replay.toml", &scenario("w0", true), &[]);
    assert_sums(&r);
    assert!(ent(&r, "trace.a:1").executed_ns < 12_000_000);
    assert_eq!(ent(&r, "trace.b:2").executed_ns, 0);
    assert_eq!(wakes(&r, "b:2"), 0);
}

#[test]
fn a_timer_like_sleep_keeps_its_recorded_length() {
    // b's 12 ms sleep ends at 12 ms whatever a does.
    for hog in [false, true] {
        let r = run("replay.toml", &scenario("s12000000", hog), &[]);
        assert_eq!(ent(&r, "trace.b:2").executed_ns, 5_000_000, "hog {hog}");
        assert_eq!(wakes(&r, "b:2"), 1);
    }
}

#[test]
fn bad_replays_are_refused_naming_the_field() {
    let src = scenario("w0", false).replace("\"w0 c5000000\"", "\"w0 w0 c5000000\"");
    let e = run::load("replay.toml", &src, &[]).unwrap_err();
    assert!(e.field.ends_with("tasks.1.steps"), "{e}");
    assert!(e.message.contains("never end"), "{e}");
    let src = scenario("w0", false).replace("\"w0 c5000000\"", "\"w0 y5\"");
    let e = run::load("replay.toml", &src, &[]).unwrap_err();
    assert!(e.message.contains("token 1 'y5'"), "{e}");
    let src = scenario("w0", false).replace("affinity = [1]", "affinity = [2]");
    let e = run::load("replay.toml", &src, &[]).unwrap_err();
    assert!(e.field.ends_with("tasks.1.affinity"), "{e}");
}

/// A recorded pipe ping-pong with timer wake-ups (ftrace text): ping (pid 10) and pong
/// (pid 11) on CPU 0, a kworker woken from an interrupt.
const FTRACE: &str = "\
            ping-10      [000] d..2.   100.000000: sched_switch: prev_comm=sh prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=ping next_pid=10 next_prio=120
            ping-10      [000] d..3.   100.000100: sched_wakeup: comm=pong pid=11 prio=120 target_cpu=000
            ping-10      [000] d..2.   100.000200: sched_switch: prev_comm=ping prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=pong next_pid=11 next_prio=120
            pong-11      [000] d..3.   100.000400: sched_wakeup: comm=ping pid=10 prio=120 target_cpu=000
            pong-11      [000] d..2.   100.000500: sched_switch: prev_comm=pong prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=ping next_pid=10 next_prio=120
            ping-10      [000] d..3.   100.000600: sched_wakeup: comm=pong pid=11 prio=120 target_cpu=000
            ping-10      [000] d..2.   100.000700: sched_switch: prev_comm=ping prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=pong next_pid=11 next_prio=120
            pong-11      [000] d..2.   100.000900: sched_switch: prev_comm=pong prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
          <idle>-0       [000] d.h3.   100.001500: sched_wakeup: comm=ping pid=10 prio=120 target_cpu=000
          <idle>-0       [000] d..2.   100.001500: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=ping next_pid=10 next_prio=120
            ping-10      [000] d..2.   100.001800: sched_switch: prev_comm=ping prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
";

#[test]
fn an_imported_trace_replays_its_cpu_time_and_wakes() {
    let tr = schedtrace::parse("t", FTRACE, TraceFormat::Ftrace, &Selection::default()).unwrap();
    // Bare metal (the default), and the same level as a guest of the pinned host.
    let guest = schedtrace::ScenarioOptions {
        pinned_guest: true,
        ..Default::default()
    };
    for o in [Default::default(), guest] {
        let s = schedtrace::scenario(&tr, &o);
        let text = vmsched_core::import::write_toml(&s);
        assert_eq!(text.contains("[[host.process]]"), !o.pinned_guest, "{text}");
        let r = run("replay.toml", &text, &[]);
        for t in &tr.tasks {
            let rec = t.recorded();
            let e = ent(&r, &format!("trace.{}", t.name()));
            assert_eq!(e.executed_ns, rec.cpu_ns, "{}", t.name());
            assert_eq!(wakes(&r, &t.name()), rec.wakes, "{}", t.name());
        }
    }
    // ping: 0.2 + 0.2 + 0.3 ms of CPU and 2 wake-ups; pong: 0.3 + 0.2 ms and 2.
    let rec = |n: &str| tr.tasks.iter().find(|t| t.name() == n).unwrap().recorded();
    assert_eq!((rec("ping:10").cpu_ns, rec("ping:10").wakes), (700_000, 2));
    assert_eq!((rec("pong:11").cpu_ns, rec("pong:11").wakes), (500_000, 2));
    // The same under CFS 5.10 (the scheduler is a parameter of the replay).
    let cfs = schedtrace::ScenarioOptions {
        scheduler: "cfs".into(),
        kernel: None,
        ..Default::default()
    };
    let text = vmsched_core::import::write_toml(&schedtrace::scenario(&tr, &cfs));
    let r = run("replay.toml", &text, &[]);
    assert_eq!(ent(&r, "trace.ping:10").executed_ns, 700_000);
}
