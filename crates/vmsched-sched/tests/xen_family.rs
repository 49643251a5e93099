//! RTDS, null and ARINC653 on the full simulator (guest levels, the Xen core's timers): the
//! shipped scenarios run and show their scheduler's defining behaviour. The unit-level rules
//! are in `host/rtds/tests/`, `host/null/tests.rs` and `host/arinc653/tests.rs`.

use vmsched_core::report::Results;

const MS: u64 = 1_000_000;

fn shipped(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../python/vmsched/scenarios")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

fn run(name: &str, src: &str) -> Results {
    vmsched_sched::run(name, src, &[]).unwrap_or_else(|e| panic!("{e}"))
}

fn host_vcpu<'r>(r: &'r Results, name: &str) -> &'r vmsched_core::report::EntityResult {
    r.entities
        .iter()
        .find(|e| e.level == "host" && e.name == name)
        .unwrap_or_else(|| panic!("no host vCPU {name}"))
}

/// `rtds_reservation`: the real-time vCPU gets its reservation (1 ms of 2 ms, no extratime)
/// and no more, the hogs share the rest of both pCPUs, and cyclictest's worst latency is about
/// the unreserved half of a period (it waits for the next period boundary), not the 10 ms of
/// the hogs' periods.
#[test]
fn rtds_reservation_scenario() {
    let r = run("rtds_reservation.toml", &shipped("rtds_reservation.toml"));
    let rt = host_vcpu(&r, "rt.v0");
    // Each dispatch may overrun by the core's timer entry latency (1 µs).
    assert!(
        (0.495..=0.502).contains(&rt.cpu_share),
        "rt share {}",
        rt.cpu_share
    );
    let busy: f64 = r
        .entities
        .iter()
        .filter(|e| e.level == "host")
        .map(|e| e.cpu_share)
        .sum();
    assert!(busy > 1.999, "both pCPUs busy: {busy}");
    for n in ["be1.v0", "be1.v1", "be2.v0", "be2.v1"] {
        let s = host_vcpu(&r, n).cpu_share;
        assert!((0.3..0.45).contains(&s), "{n}: {s}");
    }
    let ct = r.workloads.iter().find(|w| w.name == "ct").unwrap();
    let max = ct.histograms[0].1.max_ns;
    assert!(
        (MS / 2..=MS + 100_000).contains(&max),
        "cyclictest waits out the spent budget, up to ~1 ms: {max} ns"
    );
}

/// `null_static`: every vCPU keeps its pCPU (never preempted, never waiting once it runs), the
/// vCPU of the domain created with no pCPU free runs only after another domain is destroyed,
/// and cyclictest sees no host interference.
#[test]
fn null_static_scenario() {
    let r = run("null_static.toml", &shipped("null_static.toml"));
    for n in ["rt.v0", "rt.v1", "be.v0", "be.v1"] {
        let v = host_vcpu(&r, n);
        // be's vCPUs leave their pCPUs once, when the domain is destroyed.
        let destroyed = u64::from(n.starts_with("be"));
        assert_eq!((v.preemptions, v.migrations), (destroyed, 0), "{n}");
    }
    for n in ["be.v0", "be.v1"] {
        let v = host_vcpu(&r, n);
        assert!(v.running_ns >= 999 * MS, "{n} ran {} ns", v.running_ns);
    }
    let late = host_vcpu(&r, "late.v0");
    // Created at 700 ms, it waits for be's pCPU until 1000 ms, then runs to the end.
    assert!(
        late.running_ns <= 500 * MS && late.running_ns >= 499 * MS,
        "late ran {} ns",
        late.running_ns
    );
    assert!(
        late.wait_max_ns >= 299 * MS,
        "late waited {} ns",
        late.wait_max_ns
    );
    let ct = r.workloads.iter().find(|w| w.name == "ct").unwrap();
    for (_, h) in &ct.histograms {
        assert!(
            h.max_ns < 100_000,
            "no host preemption: worst {} ns",
            h.max_ns
        );
    }
}
