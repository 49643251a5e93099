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
