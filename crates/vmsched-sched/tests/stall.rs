//! The engine's watch over a run (issue 18 item 3): a stop flag set from elsewhere ends
//! `run_until` within `WATCH_EVERY` events, and a run whose simulated time stands still is
//! stopped with a message naming the instant. Scenarios that `check` refuses (loops that take no
//! time) are built here without validation, as a bug in validation would let them through.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use vmsched_core::sim::{LevelOpts, SimBuilder, Simulation, STALL_LOOKS, WATCH_EVERY};
use vmsched_core::testkit::named;
use vmsched_core::workload::program::{ProgramConfig, StepConfig};
use vmsched_core::workload::{Dist, Step};
use vmsched_core::{CpuTopo, Policy, NS_PER_S};
use vmsched_sched::guest::cfs::Cfs;
use vmsched_sched::host::credit2::Credit2;

const BASE: &str = r#"
[run]
duration_ms = 1000
[machine]
pcpus = 2
[host]
scheduler = "credit2"
[[domain]]
name = "d"
vcpus = 1
[domain.sched]
scheduler = "cfs"
"#;

/// One pCPU, one vCPU, one task 'spin' running `program` (not validated).
fn lone_task(program: Vec<Step>) -> Simulation {
    let topo = [CpuTopo::default()];
    let mut b = SimBuilder::new(1);
    let host = b.add_level(
        "host",
        Box::new(Credit2::sched(Default::default(), &topo, 1)),
        LevelOpts::default(),
    );
    b.add_pcpus(host, &topo);
    let guest = b.add_level(
        "guest",
        Box::new(Cfs::sched(Default::default(), &topo)),
        LevelOpts::default(),
    );
    b.add_vcpu(host, guest, named("v0", 0, 1), CpuTopo::default());
    let valid = ProgramConfig {
        name: "spin".into(),
        copies: 1,
        max_tasks: None,
        nice: 0,
        policy: Policy::Normal,
        rt_priority: 0,
        sched_runtime_ns: 0,
        sched_deadline_ns: 0,
        sched_period_ns: 0,
        affinity: None,
        channels: vec![],
        tokens: vec![],
        counters: vec![],
        start_us: 0,
        steps: vec![
            StepConfig::Compute {
                ns: None,
                us: None,
                ms: Some(1),
                exp_us: None,
                uniform_us: None,
                kernel: false,
            },
            StepConfig::Loop { to: 0, times: None },
        ],
    };
    let mut spec = valid.build();
    spec.tasks[0].program = program;
    b.add_workload(guest, spec, |_| named("spin.0", 0, 1));
    b.build(NS_PER_S, 0, 0)
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn a_zero_time_loop_is_reported_naming_the_instant_and_task() {
    let forever = Step::Goto { to: 0, times: None };
    for first in [
        Step::Compute {
            dur: Dist::Fixed(0),
            kernel: false,
        },
        Step::Sleep {
            dur: Dist::Fixed(0),
            slack: 0,
        },
        Step::Yield,
    ] {
        let mut sim = lone_task(vec![first, forever]);
        let end = sim.end();
        let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.run_until(end)))
            .expect_err("a loop that takes no time must be stopped");
        let msg = panic_text(p);
        // Events at one instant: the watch in run_until. Steps within one event (a lone task's
        // yield): the step interpreter's own bound. Both name the task.
        let watch = msg.starts_with("no progress in simulated time: ") && msg.contains("at t=0 ns");
        let steps = msg.contains("without time passing");
        assert!(watch || steps, "{first:?}: {msg}");
        assert!(msg.contains("spin.0"), "{msg}");
        assert!(
            sim.events() <= (u64::from(STALL_LOOKS) + 2) * WATCH_EVERY,
            "{}",
            sim.events()
        );
    }
}

fn unchecked(workload: &str) -> vmsched_sched::Scenario {
    toml::from_str(&format!("{BASE}{workload}")).expect("parses")
}

#[test]
fn the_stop_flag_ends_a_run_between_events_and_it_can_go_on() {
    let s = unchecked("[[domain.workload]]\nkind = \"context1\"\nname = \"c\"\n");
    let mut sim = vmsched_sched::build(&s);
    let stop = Arc::new(AtomicBool::new(true));
    sim.set_stop_flag(Some(stop.clone()));
    let end = sim.end();
    sim.run_until(end);
    assert_eq!(sim.events(), WATCH_EVERY, "stopped at the first look");
    assert!(sim.now() < end);
    stop.store(false, Ordering::Relaxed);
    sim.run_until(end);
    assert_eq!(sim.now(), end);
    // The same run without a stop gives the same events: stopping does not change the run.
    let mut again = vmsched_sched::build(&s);
    again.run_until(end);
    assert_eq!(again.events(), sim.events());
}
