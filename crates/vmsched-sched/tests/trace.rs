//! The trace channel on whole scenarios: the records agree with the run's own accounting, tracing
//! changes nothing, and the bound truncates. (The Perfetto file itself is checked by
//! tests/test_trace.py, which decodes it with Perfetto's published protos.)

use vmsched_core::trace::{Record, Trace};
use vmsched_core::{GEnt, RunState};

fn scenario(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../python/vmsched/scenarios")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

/// Runs a shipped scenario for 200 ms from t = 0 (no warm-up), traced if `max_records` is given.
fn run(name: &str, max_records: Option<usize>) -> (vmsched_core::report::Results, Option<Trace>) {
    let ov = [("run.duration_ms", "200"), ("run.warmup_ms", "0")]
        .map(|(k, v)| (k.to_string(), v.to_string()));
    let s = vmsched_sched::load(name, &scenario(name), &ov).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    if let Some(n) = max_records {
        sim.enable_trace(n);
    }
    sim.run();
    let tr = sim.take_trace();
    assert!(sim.take_trace().is_none(), "the trace is taken once");
    (sim.results(), tr)
}

#[test]
fn tracing_changes_no_figure() {
    for name in ["seed000_context1_ratelimit.toml", "seed000_ncopy.toml"] {
        let (plain, none) = run(name, None);
        assert!(none.is_none());
        let (traced, tr) = run(name, Some(10_000_000));
        assert!(!tr.unwrap().records.is_empty());
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            serde_json::to_string(&traced).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn records_are_ordered_chained_and_add_up_to_the_reported_times() {
    let (r, tr) = run("seed000_ncopy.toml", Some(10_000_000));
    let tr = tr.unwrap();
    assert_eq!(tr.dropped, 0);
    assert_eq!(tr.end, r.duration_ns);
    let n = tr.meta.ents.len();
    assert_eq!(n, r.entities.len());
    let mut state = vec![RunState::Blocked; n];
    let mut since = vec![0u64; n];
    let mut time = vec![[0u64; 4]; n];
    let mut on_cpu: Vec<Option<u32>> = vec![None; tr.meta.cpus.len()];
    let mut last = 0;
    let (mut switches, mut probes, mut wakes) = (0, 0, 0);
    for rec in &tr.records {
        assert!(rec.t() >= last, "records in time order");
        last = rec.t();
        match *rec {
            Record::Runstate {
                t,
                level,
                ent,
                from,
                to,
            } => {
                let e = ent.idx();
                assert_eq!(tr.meta.ents[e].level, level);
                assert_eq!(from, state[e], "{}: runstates chain", tr.meta.ents[e].name);
                assert_ne!(from, to);
                time[e][from as usize] += t - since[e];
                state[e] = to;
                since[e] = t;
            }
            Record::Switch {
                level,
                cpu,
                prev,
                next,
                ..
            } => {
                switches += 1;
                assert_eq!(tr.meta.cpus[cpu.idx()].level, level);
                assert_eq!(on_cpu[cpu.idx()], prev.map(|p| p.0), "prev is what ran");
                assert_ne!(prev, next);
                for e in [prev, next].into_iter().flatten() {
                    assert_eq!(tr.meta.ents[e.idx()].level, level);
                }
                on_cpu[cpu.idx()] = next.map(|e| e.0);
            }
            Record::Probe { .. } => probes += 1,
            Record::Wake { ent, .. } => {
                wakes += 1;
                assert_ne!(
                    state[ent.idx()],
                    RunState::Running,
                    "a wake of a running entity"
                );
            }
            _ => {}
        }
    }
    assert!(switches > 100 && probes > 100 && wakes > 100);
    for (e, er) in r.entities.iter().enumerate() {
        time[e][state[e] as usize] += tr.end - since[e];
        assert_eq!(tr.meta.ents[e].name, er.name);
        assert_eq!(
            time[e][RunState::Running as usize],
            er.running_ns,
            "{}",
            er.name
        );
        assert_eq!(
            time[e][RunState::Runnable as usize],
            er.runnable_ns,
            "{}",
            er.name
        );
        assert_eq!(
            time[e][RunState::Blocked as usize],
            er.blocked_ns,
            "{}",
            er.name
        );
    }
    // Every vCPU entity names the guest CPU it is, and that CPU names it back.
    for (e, em) in tr.meta.ents.iter().enumerate() {
        if let Some(c) = em.vcpu_of {
            assert_eq!(tr.meta.cpus[c.idx()].backing, Some(GEnt(e as u32)));
        }
    }
}

#[test]
fn a_full_buffer_keeps_the_first_records_and_marks_where_it_stopped() {
    let (_, full) = run("seed000_context1_ratelimit.toml", Some(10_000_000));
    let full = full.unwrap();
    let (_, cut) = run("seed000_context1_ratelimit.toml", Some(1000));
    let cut = cut.unwrap();
    assert_eq!(cut.records[..], full.records[..1000]);
    assert_eq!(cut.dropped as usize, full.records.len() - 1000);
    assert_eq!(cut.truncated_at, Some(full.records[1000].t()));
    assert_eq!(cut.complete_until(), full.records[1000].t());
}
