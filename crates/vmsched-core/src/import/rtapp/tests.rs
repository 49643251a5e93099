//! The rt-app importer's unit tests (moved out of `import/rtapp.rs`): small rt-app JSON
//! documents against the programs, sched policies and notes the importer must produce, by the
//! rules of docs/import.md (rt-app's own `doc/tutorial.txt` for what each key means), and the
//! errors that name the offending key.

use super::*;

fn programs(f: &Fragment) -> Vec<ProgramConfig> {
    f.table["domain"][0]["workload"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let mut t = w.as_table().unwrap().clone();
            assert_eq!(t.remove("kind").unwrap().as_str(), Some("program"));
            toml::Value::Table(t).try_into().unwrap()
        })
        .collect()
}

fn ops(p: &ProgramConfig) -> Vec<String> {
    p.steps
        .iter()
        .map(|s| match s {
            StepConfig::Compute { us: Some(u), .. } => format!("compute {u}"),
            StepConfig::Sleep {
                us: Some(u),
                slack_ns,
                ..
            } => format!("sleep {u}/{slack_ns}"),
            StepConfig::Yield => "yield".into(),
            StepConfig::Count { counter } => format!("count {counter}"),
            StepConfig::Loop { to, times } => format!("loop {to} {times:?}"),
            StepConfig::Exit => "exit".into(),
            other => format!("{other:?}"),
        })
        .collect()
}

/// The tutorial's shape, written for this test: two threads, one periodic with phases.
const APP: &str = r#"{
  "global": { "duration": 2, "calibration": "CPU0", "default_policy": "SCHED_OTHER" },
  "tasks": {
    "periodic": {
      "instance": 2, "policy": "SCHED_FIFO", "priority": 50, "cpus": [1, 0],
      "phases": {
        "light": { "loop": 10, "run": 1000, "timer": { "ref": "unique", "period": 30000 } },
        "heavy": { "loop": 5, "runtime": 4000, "sleep": 1000, "timer0": { "ref": "unique", "period": 30000 } }
      },
      "loop": 3
    },
    "background": { "delay": 500, "priority": 5, "run": 10000, "sleep": 10000, "yield": "" }
  }
}"#;

#[test]
fn tasks_become_programs() {
    let f = import("app.json", APP).unwrap();
    assert_eq!(f.table["run"]["duration_ms"].as_integer(), Some(2000));
    let p = programs(&f);
    assert_eq!(p.len(), 2);
    let (a, b) = (&p[0], &p[1]);
    assert_eq!(
        (a.name.as_str(), a.copies, a.policy, a.rt_priority),
        ("periodic", 2, Policy::Fifo, 50)
    );
    assert_eq!(a.affinity, Some(vec![0, 1]));
    assert_eq!(
        ops(a),
        [
            "compute 1000",
            "sleep 29000/0",
            "loop 0 Some(9)",
            "compute 4000",
            "sleep 1000/0",
            "sleep 25000/0",
            "loop 3 Some(4)",
            "count loops",
            "loop 0 Some(2)",
            "exit"
        ]
    );
    assert_eq!((b.policy, b.nice, b.start_us), (Policy::Normal, 5, 500));
    assert_eq!(
        ops(b),
        [
            "compute 10000",
            "sleep 10000/50000",
            "yield",
            "count loops",
            "loop 0 None"
        ]
    );
    let timers: Vec<&Note> = f
        .notes
        .iter()
        .filter(|n| n.key.starts_with("timer"))
        .collect();
    assert_eq!(timers.len(), 2);
    assert!(f.notes.iter().any(|n| n.key == "global.calibration"));
    let g = import(
        "g.json",
        r#"{"tasks": {"t": {"phases": {"a": {"loop": -1, "run": 1, "sleep": 1},
                                          "b": {"run": 2}}}}}"#,
    )
    .unwrap();
    assert!(
        g.notes
            .iter()
            .any(|n| n.key == "b" && n.message.contains("never runs")),
        "{:?}",
        g.notes
    );
    // The fragment's TOML is what a scenario takes.
    let text = f.to_toml();
    assert!(text.contains("[[domain.workload]]"), "{text}");
}

/// rt-app's `doc/examples/deadline.json` shape, written for this test, and the legacy keys.
#[test]
fn deadline_tasks_take_their_parameters_with_rt_apps_defaults() {
    let f = import(
        "dl.json",
        r#"{"global": {"default_policy": "SCHED_DEADLINE"},
                "tasks": {
                  "full": {"loop": -1, "run": 10000, "timer": {"ref": "u", "period": 100000},
                           "dl-runtime": 12000, "dl-period": 100000, "dl-deadline": 50000},
                  "implicit": {"run": 1000, "sleep": 9000, "dl-runtime": 2000, "priority": 7},
                  "period_only": {"run": 1000, "dl-runtime": 2000, "dl-period": 20000},
                  "legacy": {"runtime": 3000, "period": 30000, "phases": {"p": {"run": 1}}},
                  "other": {"policy": "SCHED_OTHER", "run": 1, "sleep": 1}
                }}"#,
    )
    .unwrap();
    let p = programs(&f);
    let times = |i: usize| {
        (
            p[i].policy,
            p[i].sched_runtime_ns,
            p[i].sched_period_ns,
            p[i].sched_deadline_ns,
        )
    };
    let dl = Policy::Deadline;
    assert_eq!(times(0), (dl, 12_000_000, 100_000_000, 50_000_000));
    // The period defaults to the runtime, the deadline to the period.
    assert_eq!(times(1), (dl, 2_000_000, 2_000_000, 2_000_000));
    assert_eq!(times(2), (dl, 2_000_000, 20_000_000, 20_000_000));
    assert_eq!(times(3), (dl, 3_000_000, 30_000_000, 30_000_000));
    assert_eq!(times(4), (Policy::Normal, 0, 0, 0));
    // A deadline task sleeps with no timer slack, as an RT task; its priority is noted.
    assert_eq!(ops(&p[1])[1], "sleep 9000/0");
    assert!(f
        .notes
        .iter()
        .any(|n| n.key == "priority" && n.message.contains("SCHED_DEADLINE")));
    // Its dl-* keys are read, not noted as ignored.
    assert!(
        !f.notes.iter().any(|n| n.key.starts_with("dl-")),
        "{:?}",
        f.notes
    );
    // The scenario's program takes the fields back.
    let text = f.to_toml();
    assert!(text.contains("sched_runtime_ns = 12000000"), "{text}");
}

fn err(src: &str) -> ScenarioError {
    import("bad.json", src).unwrap_err()
}

#[test]
fn what_does_not_map_is_an_error_naming_key_and_line() {
    for (src, line, field, says) in [
        ("{\"global\": {}}", 1, "tasks", "missing"),
        (
            "{\"tasks\": {\"t\": {\n\"run\": 10,\n\"lock\": \"m\"}}}",
            3,
            "tasks.t.lock",
            "synchronise",
        ),
        (
            "{\"tasks\": {\"t\": {\"run\": 10,\n\"mem\": 100}}}",
            2,
            "tasks.t.mem",
            "not modelled",
        ),
        (
            "{\"tasks\": {\"t\": {\n\"policy\": \"SCHED_DEADLINE\", \"run\": 1}}}",
            1,
            "tasks.t",
            "sched_deadline_ns",
        ),
        (
            "{\"tasks\": {\"t\": {\"policy\": \"SCHED_DEADLINE\", \"run\": 1,\n\"dl-runtime\": 5000, \"dl-deadline\": 4000}}}",
            1,
            "tasks.t",
            "at most sched_deadline_ns",
        ),
        (
            "{\"tasks\": {\"t\": {\"policy\": \"SCHED_DEADLINE\", \"dl-runtime\": 1000,\n\"phases\": {\"p\": {\n\"dl-period\": 9000, \"run\": 1}}}}}",
            3,
            "tasks.t.dl-period",
            "between phases",
        ),
        (
            "{\"tasks\": {\"t\": {\"policy\": \"SCHED_DEADLINE\",\n\"dl-runtime\": -5, \"run\": 1}}}",
            2,
            "tasks.t.dl-runtime",
            "0..=",
        ),
        (
            "{\"tasks\": {\"t\": {\"policy\": \"SCHED_FIFO\",\n\"priority\": 0, \"run\": 1}}}",
            2,
            "tasks.t.priority",
            "1..=99",
        ),
        (
            "{\"tasks\": {\"t\": {\"run\": -1}}}",
            1,
            "tasks.t.run",
            "0..=",
        ),
        (
            "{\"tasks\": {\"t\": {\"run\": \"10\"}}}",
            1,
            "tasks.t.run",
            "expected an integer",
        ),
        (
            "{\"tasks\": {\"t\": {\"timer\": {\"ref\": \"x\"}}}}",
            1,
            "tasks.t.timer",
            "period",
        ),
        (
            "{\"tasks\": {\"t\": {\"loop\": 0, \"run\": 1}}}",
            1,
            "tasks.t.loop",
            "-1 or at least 1",
        ),
        (
            "{\"tasks\": {\"t\": {\"taskgroup\": \"/g\", \"run\": 1}}}",
            1,
            "tasks.t.taskgroup",
            "group",
        ),
        (
            "{\"tasks\": {\"t\": {\"phases\": {\"p\": {\n\"priority\": 3, \"run\": 1}}}}}",
            2,
            "tasks.t.priority",
            "between phases",
        ),
        (
            "{\"tasks\": {\"t\": {\"instance\": 1}}}",
            1,
            "tasks.t",
            "at least one event",
        ),
        (
            "{\"tasks\": {\"t\": {\"yield\": \"\"}}}",
            1,
            "tasks.t",
            "as a program workload",
        ),
        (
            "{\"tasks\": {\"t\": {\"run\": 1}, \"t\": {\"run\": 2}}}",
            1,
            "tasks.t",
            "twice",
        ),
        ("[1]", 1, "", "expected an object"),
        // A key holding a newline stays on one line (found by the rtapp fuzz target).
        (
            "{\"tasks\": {\"a\\nb\": {\"run\\n\": -1}}}",
            1,
            "tasks.a\\nb.run\\n",
            "0..=",
        ),
    ] {
        let e = err(src);
        assert_eq!(
            (e.line, e.field.as_str()),
            (Some(line), field),
            "{src}: {e}"
        );
        assert!(e.message.contains(says), "{src}: {e}");
    }
}
