//! Tests of the benchmark's scenarios: that they load, build and run what they claim, and that
//! each is deterministic (same seed, same event count and results digest twice, and the same
//! again when the run is cut into the benchmark's sampling pieces). Validity, not speed: no
//! test here asserts a time.

use super::*;
use scenarios::{mixed_on, mixed_scenario};

/// Fraction of the pCPUs' time that vCPUs ran, over `ms` ms of `mixed_scenario(pcpus)`.
fn host_busy(pcpus: u32, ms: u64) -> f64 {
    let ov = vec![
        ("run.duration_ms".to_string(), ms.to_string()),
        ("run.warmup_ms".to_string(), (ms / 2).to_string()),
    ];
    let src = mixed_scenario("busy", pcpus);
    let s = vmsched_sched::load("busy", &src, &ov).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.run();
    assert!(sim.events() > 0 && sim.actions() > 0);
    let r = sim.results();
    let vcpus: Vec<_> = r.entities.iter().filter(|e| e.kind == "vcpu").collect();
    assert_eq!(vcpus.len(), 2 * pcpus as usize);
    let busy: u64 = vcpus.iter().map(|e| e.running_ns).sum();
    busy as f64 / (pcpus as u64 * r.measured_ns) as f64
}

/// The 1,024-pCPU scenario loads, builds and runs, and its pCPUs are as busy as those of the
/// same mix on 256 pCPUs over the same window (a 256-CPU ceiling would leave three quarters
/// of them idle). Both still ramp up at 40 ms: Credit2 spreads the vCPUs over its runqueues
/// gradually (at 64 pCPUs the host is already about 97 % busy then).
#[test]
fn x1024_runs_and_uses_its_pcpus_like_256_does() {
    let (old_max, big) = (host_busy(256, 40), host_busy(1024, 40));
    assert!(
        big > 0.5 && (big - old_max).abs() < 0.03,
        "256 pCPUs: {old_max}, 1024 pCPUs: {big}"
    );
}

/// The RTDS benchmark scenario loads and runs: 256 vCPUs on 64 pCPUs, every pCPU busy
/// (hogs with extratime leave no idle time).
#[test]
fn rtds_bench_runs_256_vcpus_on_64_pcpus() {
    // No start offsets (run.vary): in 30 ms a domain starting up to 10 ms late leaves idle time.
    let ov = vec![
        ("run.duration_ms".to_string(), "30".to_string()),
        ("run.vary".to_string(), "false".to_string()),
    ];
    let src = mixed_on("r", 64, "rtds", 64);
    let s = vmsched_sched::load("r", &src, &ov).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.run();
    let r = sim.results();
    let vcpus: Vec<_> = r.entities.iter().filter(|e| e.kind == "vcpu").collect();
    assert_eq!(vcpus.len(), 256);
    let busy: u64 = vcpus.iter().map(|e| e.running_ns).sum();
    assert!(busy as f64 / (64 * r.measured_ns) as f64 > 0.99, "{busy}");
}

#[test]
fn pcpus_above_the_ceiling_are_refused_by_name() {
    let Err(e) = vmsched_sched::load("x", &mixed_on("x", 4098, "credit2", 2049), &[]) else {
        panic!("4,098 pCPUs must be refused");
    };
    let msg = e.to_string();
    assert!(
        msg.contains("machine.pcpus") && msg.contains("4096"),
        "{msg}"
    );
    assert!(vmsched_sched::load("x", &mixed_scenario("x", 4096), &[]).is_ok());
}

/// Every name the benchmark lists resolves, and every scenario of the set loads (the
/// 4,096-pCPU ones too, at their default length: loading is cheap, building them is not done
/// here).
#[test]
fn every_listed_scenario_loads() {
    let names = scenarios::all_names();
    assert!(names.len() >= 16 + scenarios::EXTRAS.len(), "{names:?}");
    for n in &names {
        let b = scenarios::get(n).unwrap_or_else(|| panic!("{n} is listed but unknown"));
        assert_eq!(&b.name, n);
        let s = load(&b, b.default_seconds);
        assert!(s.machine.pcpus >= 1, "{n}");
    }
    for mix in scenarios::MIXES {
        for p in scenarios::SIZES {
            let b = scenarios::get(&format!("{mix}-p{p}")).expect("size family");
            assert_eq!(load(&b, 0.001).machine.pcpus, p, "{mix}-p{p}");
        }
    }
    assert!(scenarios::get("ctx1-p12").is_none());
    assert!(scenarios::expand("nonesuch").is_none());
}

/// The mixed size family's 64- and 1,024-pCPU rows are the former `large` and `x1024`: the
/// same scenario under the new name, so their figures carry over.
#[test]
fn mixed_rows_are_the_former_large_and_x1024() {
    for (old, new) in [("large", "mixed-p64"), ("x1024", "mixed-p1024")] {
        let (a, b) = (scenarios::get(old).unwrap(), scenarios::get(new).unwrap());
        let strip = |s: &str| s.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert_eq!(strip(&a.src), strip(&b.src), "{old} vs {new}");
    }
}

/// Runs `name` for `ms` twice whole and once cut into the sampling pieces: the event and
/// action counts and the results digest must agree. Returns the outcome.
fn deterministic(name: &str, ms: u64) -> Outcome {
    let b = scenarios::get(name).unwrap_or_else(|| panic!("{name}"));
    let secs = ms as f64 / 1000.0;
    let first = outcome(&b, secs, false);
    let again = outcome(&b, secs, false);
    let cut = outcome(&b, secs, true);
    assert!(first.events > 0, "{name}: no events");
    for (what, o) in [("second run", &again), ("sampled run", &cut)] {
        assert_eq!(
            (o.events, o.actions, o.digest),
            (first.events, first.actions, first.digest),
            "{name}: the {what} differs from the first"
        );
    }
    assert!(cut.live_timers >= 1.0, "{name}: no live timers sampled");
    first
}

/// The guests' workloads of a scenario, by kind, over a short run.
fn workload_kinds(name: &str, ms: u64) -> Vec<String> {
    let b = scenarios::get(name).unwrap();
    let s = load(&b, ms as f64 / 1000.0);
    let mut sim = vmsched_sched::build(&s);
    sim.run();
    let mut k: Vec<String> = sim
        .results()
        .workloads
        .iter()
        .map(|w| format!("{:?}", w.kind))
        .collect();
    k.sort();
    k.dedup();
    k
}

#[test]
fn size_family_small_rows_are_deterministic() {
    for mix in scenarios::MIXES {
        deterministic(&format!("{mix}-p8"), 50);
    }
    deterministic("ctx1-p64", 10);
    deterministic("cyclic-p64", 10);
}

#[test]
fn vm1000_is_deterministic_and_has_1000_domains_of_2_vcpus() {
    deterministic("vm1000-p256", 3);
    let b = scenarios::get("vm1000-p256").unwrap();
    let s = load(&b, 0.001);
    assert_eq!(s.machine.pcpus, 256);
    assert_eq!(s.domains.len(), 1000);
    assert!(s.domains.iter().all(|d| d.vcpus == 2));
}

#[test]
fn eevdf_deadline_and_bfs_rows_are_deterministic() {
    for n in ["eevdf-p64", "deadline-p64", "bfs-p64"] {
        deterministic(n, 10);
    }
}

#[test]
fn kvm_rows_are_deterministic() {
    deterministic("seed003like", 200);
    deterministic("kvm64", 20);
}

#[test]
fn nas_and_rtds_rows_are_deterministic() {
    deterministic("nas", 100);
    deterministic("rtds", 10);
}

/// The scheduler family runs what it names: a KVM host with host processes and a guest of one
/// vCPU for seed003like; 16 guests of 4 vCPUs under a Linux host for kvm64; deadline tasks for
/// deadline-p64; a parallel job for nas.
#[test]
fn scheduler_family_rows_are_what_they_say() {
    let load_of = |n: &str| load(&scenarios::get(n).unwrap(), 0.001);
    let s3 = load_of("seed003like");
    assert_eq!(s3.machine.pcpus, 2);
    assert_eq!(s3.domains.len(), 1);
    assert_eq!(s3.domains[0].vcpus, 1);
    let k = load_of("kvm64");
    assert_eq!(k.machine.pcpus, 16);
    assert_eq!(k.domains.len(), 16);
    assert_eq!(k.domains.iter().map(|d| d.vcpus).sum::<u32>(), 64);
    let kinds = workload_kinds("seed003like", 20);
    assert!(
        kinds.iter().any(|k| k.contains("Cyclictest")),
        "seed003like: {kinds:?}"
    );
    let kinds = workload_kinds("nas", 20);
    assert!(
        kinds.iter().any(|k| k.contains("Parallel")),
        "nas: {kinds:?}"
    );
}
