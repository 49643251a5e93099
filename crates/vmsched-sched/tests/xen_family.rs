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
