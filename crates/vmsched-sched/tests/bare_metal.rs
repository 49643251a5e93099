//! Bare metal: a KVM host's Linux level with its own processes and no domain (the model side of
//! `vmsched validate`). It loads, runs with the engine's checks on, and its host processes get
//! the CPU time and wake-ups they would on a machine with nothing else on it.

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;

const SRC: &str = r#"
[run]
duration_ms = 300
warmup_ms = 50
[machine]
pcpus = 2
hypervisor = "kvm"
ctxsw_cost_ns = 2000
[host]
scheduler = "linux"
[host.sched]
scheduler = "eevdf"
kernel = "6.18"
[[host.process]]
kind = "cyclictest"
name = "ct"
affinity = [0]
priority = 80
[[host.process]]
kind = "cpu_loop"
name = "hog"
affinity = [0]
[[host.process]]
kind = "context1"
name = "pair"
affinity = [1]
"#;

#[test]
fn a_kvm_host_with_processes_and_no_domain_runs() {
    let r = run::run("bare.toml", SRC, &[]);
    run::assert_sums(&r);
    let hog = run::ent(&r, "hog.0");
    // The FIFO cyclictest thread takes a little of CPU 0; the hog has the rest of it.
    assert!(
        hog.cpu_share > 0.9 && hog.cpu_share < 1.0,
        "{}",
        hog.cpu_share
    );
    let w = |name: &str| {
        r.workloads
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no workload {name}"))
    };
    assert!(
        w("pair").figure.value > 0.0,
        "the Context1 pair made round trips"
    );
    // 250 ms of 1 ms periods: one sample each (the first expiry comes one interval in).
    let ct = &w("ct").histograms[0].1;
    assert!((240..=250).contains(&ct.count), "{}", ct.count);
}

#[test]
fn no_domain_and_no_host_process_is_refused() {
    let src = SRC.split("[[host.process]]").next().unwrap();
    let e = run::load("bare.toml", src, &[]).unwrap_err();
    assert_eq!(e.field, "domain");
    assert!(e.message.contains("[[host.process]]"), "{e}");
}

/// The latency histogram of workload `name`'s first thread.
fn hist(r: &vmsched_core::report::Results, name: &str) -> vmsched_core::metrics::HistSummary {
    let w = r.workloads.iter().find(|w| w.name == name).unwrap();
    w.histograms[0].1.clone()
}

/// `machine.timer_expiry_ns` (the host's hrtimer interrupt, expiry and wake-up): a FIFO
/// cyclictest thread, which runs as soon as its timer is handled, sees every latency grow by
/// exactly the cost, behind a hog on its CPU or on an idle one, with the variation off.
#[test]
fn a_host_timer_expiry_cost_adds_exactly_itself_to_a_fifo_cyclictest() {
    for hog in ["[0]", "[1]"] {
        let base = [("run.vary", "false"), ("host.process.1.affinity", hog)];
        let without = run::run("bare.toml", SRC, &base);
        let mut with = base.to_vec();
        with.push(("machine.timer_expiry_ns", "37000"));
        let with = run::run("bare.toml", SRC, &with);
        run::assert_sums(&with);
        let (a, b) = (hist(&without, "ct"), hist(&with, "ct"));
        assert!(a.count > 200, "{}", a.count);
        assert_eq!(a.count, b.count, "hog on {hog}");
        assert_eq!(b.min_ns, a.min_ns + 37_000, "hog on {hog}");
        assert_eq!(b.max_ns, a.max_ns + 37_000, "hog on {hog}");
        assert!(
            (b.mean_ns - a.mean_ns - 37_000.0).abs() < 1e-6,
            "hog on {hog}"
        );
    }
}

/// The cost is the host level's: a guest's timers (here a Xen guest's cyclictest) do not take
/// it, and a negative or huge figure is refused naming the field.
#[test]
fn the_timer_expiry_cost_is_the_hosts_only_and_checked() {
    let guest = r#"
[run]
duration_ms = 100
vary = false
[machine]
pcpus = 1
[host]
scheduler = "credit2"
[[domain]]
name = "d"
vcpus = 1
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cyclictest"
name = "ct"
priority = 80
"#;
    let a = hist(&run::run("g.toml", guest, &[]), "ct");
    let set = [("machine.timer_expiry_ns", "37000")];
    let b = hist(&run::run("g.toml", guest, &set), "ct");
    assert!(a.count > 50);
    assert_eq!((a.count, a.max_ns), (b.count, b.max_ns));
    let e = run::load("bare.toml", SRC, &[("machine.timer_expiry_ns", "-1")]).unwrap_err();
    assert!(e.field.contains("timer_expiry_ns"), "{e}");
}
