//! Nested virtualization is expressible without a new engine: a third level whose CPUs are
//! entities of a guest level. A task in the nested guest progresses only while every CPU under
//! it, down to the physical one, runs it.

use vmsched_core::sim::{LevelOpts, SimBuilder};
use vmsched_core::testkit::named;
use vmsched_core::workload::cpu_loop::CpuLoopConfig;
use vmsched_core::workload::program::{ProgramConfig, StepConfig};
use vmsched_core::{CpuTopo, Policy, NS_PER_S};
use vmsched_sched::guest::cfs::Cfs;
use vmsched_sched::host::credit2::Credit2;

#[test]
fn a_nested_guest_runs_only_when_every_level_runs_it() {
    let topo = [CpuTopo::default()];
    let mut b = SimBuilder::new(1);
    // L0: Credit2 on one pCPU, shared by the L1 hypervisor's vCPU and a CPU-bound L1 guest.
    let l0 = b.add_level(
        "l0",
        Box::new(Credit2::sched(Default::default(), &topo, 2)),
        LevelOpts::default(),
    );
    b.add_pcpus(l0, &topo);
    // L1: a guest hypervisor (Credit2 as well) with one vCPU; its entity is the L2 vCPU.
    let l1 = b.add_level(
        "l1",
        Box::new(Credit2::sched(Default::default(), &topo, 1)),
        LevelOpts::default(),
    );
    b.add_vcpu(l0, l1, named("l1.v0", 0, 1), CpuTopo::default());
    let other = b.add_level(
        "other",
        Box::new(Cfs::sched(Default::default(), &topo)),
        LevelOpts::default(),
    );
    b.add_vcpu(l0, other, named("other.v0", 1, 1), CpuTopo::default());
    // L2: a Linux guest of the L1 hypervisor, counting 1 ms compute steps.
    let l2 = b.add_level(
        "l2",
        Box::new(Cfs::sched(Default::default(), &topo)),
        LevelOpts::default(),
    );
    b.add_vcpu(l1, l2, named("l2.v0", 0, 1), CpuTopo::default());
    let prog = ProgramConfig {
        name: "p".into(),
        copies: 1,
        nice: 0,
        policy: Policy::Normal,
        rt_priority: 0,
        sched_runtime_ns: 0,
        sched_deadline_ns: 0,
        sched_period_ns: 0,
        affinity: None,
        channels: vec![],
        tokens: vec![],
        counters: vec!["ms".into()],
        start_us: 0,
        max_tasks: None,
        steps: vec![
            StepConfig::Compute {
                ns: None,
                us: None,
                ms: Some(1),
                exp_us: None,
                uniform_us: None,
                kernel: false,
            },
            StepConfig::Count {
                counter: "ms".into(),
            },
            StepConfig::Loop { to: 0, times: None },
        ],
    };
    b.add_workload(l2, prog.build(), |_| named("p.0", 0, 1));
    let hog = CpuLoopConfig {
        name: "hog".into(),
        copies: 1,
        nice: 0,
        affinity: None,
        pin_each: false,
    };
    b.add_workload(other, hog.build(1), |_| named("hog.0", 0, 1));
    let mut sim = b.build(2 * NS_PER_S, 0, 0);
    sim.set_debug_checks(true);
    sim.run();
    let r = sim.results();
    let share = |n: &str| r.entities.iter().find(|e| e.name == n).unwrap().cpu_share;
    // The L1 vCPU gets half the pCPU; the L2 vCPU runs all of L1's time; the L2 task's compute
    // completes only in that half.
    assert!(
        (share("l1.v0") - 0.5).abs() < 0.03,
        "l1.v0 {}",
        share("l1.v0")
    );
    let done = r.workloads.iter().find(|w| w.name == "p").unwrap().counters[0].1;
    assert!(
        (970..=1010).contains(&done),
        "1 ms steps done in half of 2 s: {done}"
    );
    // As seen from inside the nested guest the task ran all the time (its vCPU never halted).
    assert!(share("l2.v0") > 0.99);
    assert!(share("p.0") > 0.99);
}
