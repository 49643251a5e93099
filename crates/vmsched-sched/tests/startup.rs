//! The start-up workload (workload/startup.rs, seed 003's xterm) on the full simulator: alone,
//! a launch takes exactly its work; beside loops it takes its scheduler's share; the launches
//! are sequential (the launcher waits for "ready"); it runs as a host process under KVM; the
//! fork placement of the scheduler applies (CFS START_DEBIT delays a launch beside a loop
//! against the same work started at once); the mean and the standard deviation come from the
//! `startup` histogram. The program's unit rules are in the workload's own tests.

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;

use vmsched_core::report::{Results, WorkloadResult};

const MS: f64 = 1e6;

fn xterm<'a>(r: &'a Results, level: &str) -> &'a WorkloadResult {
    r.workloads
        .iter()
        .find(|w| w.name == "xterm" && w.level == level)
        .expect("the start-up workload")
}

/// One pCPU under Xen's pinned host, a 1-vCPU CFS guest with the start-up workload (`extra`
/// lines of the workload) and `loops` CPU loops.
fn guest(sched: &str, loops: u32, extra: &str) -> String {
    let lp = if loops > 0 {
        format!("[[domain.workload]]\nkind = \"cpu_loop\"\nname = \"loop\"\ncopies = {loops}\n")
    } else {
        String::new()
    };
    format!(
        "name = \"s\"\n[run]\nduration_ms = 20000\nseed = 1\n[machine]\npcpus = 1\n[host]\n\
         scheduler = \"pinned\"\n[[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\n{sched}\n\
         [[domain.workload]]\nkind = \"startup\"\nname = \"xterm\"\niterations = 10\n\
         interval_ms = 100\nwork_us = 50000\nreads = 100\nread_us = 5\n{extra}\n{lp}"
    )
}

#[test]
fn alone_a_launch_takes_its_work_and_the_launches_are_sequential() {
    let r = run::run("s.toml", &guest("scheduler = \"cfs\"", 0, ""), &[]);
    let w = xterm(&r, "g");
    let h = &w.histograms[0].1;
    assert_eq!(w.histograms[0].0, "startup");
    assert_eq!(h.count, 10);
    // 50 ms of CPU (user chunks and reads), nothing else runs: exactly the work.
    assert!((h.mean_ns - 50.0 * MS).abs() < 1e3, "{}", h.mean_ns);
    assert!(h.stdev_ns < 1e3);
    assert!((w.figure.value - 0.05).abs() < 1e-5);
    assert_eq!(w.figure.unit, "s");
    // The launcher and ten applications: each launch waited for the previous one's "ready"
    // (a launch every 150 ms: 10 in 1.5 s; the rest of the run the launcher has exited).
    let apps = r
        .entities
        .iter()
        .filter(|e| e.name.starts_with("xterm.app"))
        .count();
    assert_eq!(apps, 10);
    for e in r.entities.iter().filter(|e| e.name.starts_with("xterm.")) {
        assert!(e.offline_ns > 0, "{} exited", e.name);
    }
}

#[test]
fn beside_loops_a_launch_takes_its_fair_share() {
    for sched in [
        "scheduler = \"cfs\"",
        "scheduler = \"cfs\"\nkernel = \"3.17\"\nhz = 200",
        "scheduler = \"bfs\"\nhz = 200",
        "scheduler = \"eevdf\"\nkernel = \"6.12\"",
    ] {
        let one = run::run("s.toml", &guest(sched, 1, ""), &[]);
        let two = run::run("s.toml", &guest(sched, 2, ""), &[]);
        let (m1, m2) = (
            xterm(&one, "g").histograms[0].1.mean_ns,
            xterm(&two, "g").histograms[0].1.mean_ns,
        );
        // Half the vCPU beside one loop, a third beside two (within a slice's rounding).
        assert!((m1 / (100.0 * MS) - 1.0).abs() < 0.15, "{sched}: {m1}");
        assert!((m2 / (150.0 * MS) - 1.0).abs() < 0.15, "{sched}: {m2}");
    }
}

#[test]
fn start_debit_delays_a_forked_launch() {
    // CFS places a forked child one slice after the parent's queue (START_DEBIT): beside a
    // loop, the launch starts behind it. Without START_DEBIT it starts at min_vruntime and
    // runs at once: the launch is shorter by about the debit.
    let with = run::run("s.toml", &guest("scheduler = \"cfs\"", 1, ""), &[]);
    let without = run::run(
        "s.toml",
        &guest("scheduler = \"cfs\"\nstart_debit = false", 1, ""),
        &[],
    );
    let (a, b) = (
        xterm(&with, "g").histograms[0].1.mean_ns,
        xterm(&without, "g").histograms[0].1.mean_ns,
    );
    assert!(a > b, "START_DEBIT {a} vs none {b}");
}

#[test]
fn runs_as_a_host_process_under_kvm() {
    let src = "name = \"h\"\n[run]\nduration_ms = 10000\nseed = 1\n[machine]\npcpus = 2\n\
               hypervisor = \"kvm\"\n[host]\nscheduler = \"linux\"\n[host.sched]\n\
               scheduler = \"cfs\"\n[[host.process]]\nkind = \"cpu_loop\"\nname = \"hostloop\"\n\
               copies = 3\n[[host.process]]\nkind = \"startup\"\nname = \"xterm\"\n\
               iterations = 5\nwork_us = 40000\nreads = 40\nread_us = 5\n\
               [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n";
    let r = run::run("h.toml", src, &[]);
    let w = xterm(&r, "host");
    let h = &w.histograms[0].1;
    assert_eq!(h.count, 5);
    // Four CPU-bound tasks on two pCPUs while it runs: about half a pCPU, never more than one.
    assert!(h.mean_ns > 40.0 * MS * 1.5, "{}", h.mean_ns);
    assert!(h.min_ns >= 40_000_000);
}

#[test]
fn bad_fields_are_named_with_their_path() {
    let e = run::load(
        "s.toml",
        &guest("scheduler = \"cfs\"", 0, ""),
        &[("domain.0.workload.0.reads", "0")],
    )
    .unwrap_err();
    assert!(e.to_string().contains("domain.0.workload.0.reads"), "{e}");
    let e = run::load(
        "s.toml",
        &guest("scheduler = \"cfs\"", 0, ""),
        &[("domain.0.workload.0.work_us", "100")],
    )
    .unwrap_err();
    assert!(e.to_string().contains("domain.0.workload.0.work_us"), "{e}");
}
