//! Cpupools made and unmade during a run (docs/cpupools.md, "Timeline events"):
//! `cpupool_create` makes a declared pool exist, empty, with its scheduler; pCPUs taken from
//! Pool-0 are then added, a domain is migrated in and back out, the pCPUs are removed and
//! `cpupool_destroy` ends the pool, under each scheduler a pool can have. The validation
//! refuses what Xen refuses (destroying a pool with pCPUs or domains, -EBUSY; moving a domain
//! into a pool with no pCPU) and what is not modelled, naming the field. The engine's
//! invariants are checked after every event (`set_debug_checks`).

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;

use run::{assert_sums, ent, load_err, traced};
use vmsched_core::trace::Trace;
use vmsched_core::NS_PER_MS;

/// The host pCPUs that switched in a vCPU whose name starts with one of `prefixes` in
/// `[from, to)` ms.
fn cpus_running(tr: &Trace, prefixes: &[&str], from: u64, to: u64) -> Vec<u32> {
    run::cpus_running(tr, &run::ents_named(tr, prefixes), from, to)
}

/// Four pCPUs, all in Pool-0 (Credit2) at boot, two domains of two busy vCPUs, and a pool
/// "x" declared with no pCPU (shared with test_cpupools.py).
const LIFECYCLE: &str = include_str!("../../../tests/fixtures/pools/lifecycle.toml");

/// An RTDS pool "rt" on pCPUs 2 and 3 beside Pool-0, one busy domain "a" in Pool-0 (shared
/// with test_cpupools.py).
const RT_POOL: &str = include_str!("../../../tests/fixtures/pools/rt_pool.toml");

/// `LIFECYCLE` with `sched` as pool x's scheduler line and `events` as the timeline.
fn machine(sched: &str, events: &str) -> String {
    let line = "[cpupool.sched]\nscheduler = \"credit2\"\n";
    assert!(
        LIFECYCLE.contains(line),
        "the fixture gives pool x a scheduler line"
    );
    let src = LIFECYCLE.replacen(line, &format!("[cpupool.sched]\n{sched}\n"), 1);
    format!("{src}{events}\n")
}

fn event(at: u64, action: &str, rest: &str) -> String {
    format!("[[event]]\nat_ms = {at}\naction = \"{action}\"\n{rest}\n")
}

/// The whole life of a pool: xl cpupool-create, its pCPUs taken from Pool-0, a domain in
/// and out, its pCPUs given back, xl cpupool-destroy.
fn lifecycle() -> String {
    [
        event(100, "cpupool_create", "pool = \"x\""),
        event(200, "cpupool_cpu_remove", "pool = \"Pool-0\"\ncpu = 2"),
        event(200, "cpupool_cpu_remove", "pool = \"Pool-0\"\ncpu = 3"),
        event(250, "cpupool_cpu_add", "pool = \"x\"\ncpu = 2"),
        event(250, "cpupool_cpu_add", "pool = \"x\"\ncpu = 3"),
        event(300, "cpupool_migrate", "domain = \"m\"\npool = \"x\""),
        event(600, "cpupool_migrate", "domain = \"m\"\npool = \"Pool-0\""),
        event(700, "cpupool_cpu_remove", "pool = \"x\"\ncpu = 2"),
        event(700, "cpupool_cpu_remove", "pool = \"x\"\ncpu = 3"),
        event(750, "cpupool_destroy", "pool = \"x\""),
        event(800, "cpupool_cpu_add", "pool = \"Pool-0\"\ncpu = 2"),
        event(800, "cpupool_cpu_add", "pool = \"Pool-0\"\ncpu = 3"),
    ]
    .concat()
}

#[test]
fn a_pool_created_at_run_time_takes_cpus_and_a_domain_then_is_destroyed_empty() {
    for sched in [
        "scheduler = \"credit2\"",
        "scheduler = \"credit\"",
        "scheduler = \"rtds\"",
        "scheduler = \"null\"",
        "scheduler = \"arinc653\"",
    ] {
        let src = machine(sched, &lifecycle());
        let (r, tr, log) = traced(&src);
        assert_sums(&r);
        let within = |who: &[&str], from, to, allowed: &[u32]| {
            let got = cpus_running(&tr, who, from, to);
            assert!(
                got.iter().all(|c| allowed.contains(c)),
                "{sched}: {who:?} ran on {got:?} in [{from}, {to}) ms"
            );
            got
        };
        // Before the pool has pCPUs, and while it has them but no domain, nothing runs on
        // the pCPUs Pool-0 gave away (free, then in an empty pool).
        within(&["a.v", "m.v"], 201, 300, &[0, 1]);
        // m runs only on the pool's pCPUs while it is there, a never leaves Pool-0.
        within(&["m.v"], 300, 600, &[2, 3]);
        within(&["a.v"], 201, 800, &[0, 1]);
        // Destroyed, the pCPUs given back to Pool-0 run its vCPUs again.
        let after = within(&["a.v", "m.v"], 800, 1000, &[0, 1, 2, 3]);
        assert!(
            after.contains(&2) && after.contains(&3),
            "{sched}: Pool-0 uses pCPUs 2 and 3 again after 800 ms: {after:?}"
        );
        if !sched.contains("arinc653") {
            // ARINC653's default table names dom0's vCPUs only (docs/cpupools.md).
            let in_x = within(&["m.v"], 300, 600, &[2, 3]);
            assert_eq!(in_x, vec![2, 3], "{sched}: m runs in pool x");
        }
        for v in 0..2 {
            assert!(ent(&r, &format!("m.v{v}")).running_ns > 0, "{sched}");
        }
        let created = log.iter().position(|l| l.contains("cpupool 1 (x) created"));
        let destroyed = log
            .iter()
            .position(|l| l.contains("cpupool 1 (x) destroyed"));
        assert!(
            matches!((created, destroyed), (Some(c), Some(d)) if c < d),
            "{sched}: the log records the creation, then the destruction: {log:?}"
        );
        let (b, _, _) = traced(&src);
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            serde_json::to_string(&b).unwrap(),
            "{sched}: deterministic"
        );
    }
}

/// A pool made at boot can also be emptied (its last pCPU removed once it has no domain,
/// as Xen allows) and destroyed.
#[test]
fn a_boot_pool_without_domains_can_be_emptied_and_destroyed() {
    let src = machine("scheduler = \"credit2\"", "").replace(
        "[[cpupool]]\nname = \"x\"\n",
        "[[cpupool]]\nname = \"x\"\npcpus = [3]\n",
    ) + &event(100, "cpupool_cpu_remove", "pool = \"x\"\ncpu = 3")
        + &event(150, "cpupool_destroy", "pool = \"x\"")
        + &event(200, "cpupool_cpu_add", "pool = \"Pool-0\"\ncpu = 3");
    let (r, tr, log) = traced(&src);
    assert_sums(&r);
    let all = ["a.v", "m.v"];
    assert_eq!(cpus_running(&tr, &all, 0, 100), vec![0, 1, 2]);
    assert_eq!(cpus_running(&tr, &all, 101, 200), vec![0, 1, 2]);
    // Back in Pool-0, pCPU 3 runs one of its vCPUs (moved there by Credit2's balancer; a
    // vCPU alone on its pCPU is not switched again, hence the single pCPU).
    assert!(cpus_running(&tr, &all, 200, 1000).contains(&3));
    assert!(log.iter().any(|l| l.contains("cpupool 1 (x) destroyed")));
}

#[test]
fn create_and_destroy_are_validated_naming_the_field() {
    let create = event(100, "cpupool_create", "pool = \"x\"");
    let add2 = |at| {
        event(at, "cpupool_cpu_remove", "pool = \"Pool-0\"\ncpu = 2")
            + &event(at, "cpupool_cpu_add", "pool = \"x\"\ncpu = 2")
    };
    let cases: Vec<(String, &str)> = vec![
        // Destroying a pool that has a pCPU (Xen -EBUSY).
        (
            create.clone() + &add2(200) + &event(300, "cpupool_destroy", "pool = \"x\""),
            "event.3.pool",
        ),
        // ... or a domain (Xen -EBUSY).
        (
            create.clone()
                + &add2(200)
                + &event(300, "cpupool_migrate", "domain = \"m\"\npool = \"x\"")
                + &event(400, "cpupool_cpu_remove", "pool = \"x\"\ncpu = 2"),
            "event.4.cpu",
        ),
        // Moving a domain into a pool with no pCPU.
        (
            create.clone() + &event(200, "cpupool_migrate", "domain = \"m\"\npool = \"x\""),
            "event.1.pool",
        ),
        // Using the pool before it is created.
        (add2(50) + &create, "event.1.pool"),
        // Creating it twice (again after its destruction).
        (
            create.clone()
                + &event(200, "cpupool_destroy", "pool = \"x\"")
                + &event(300, "cpupool_create", "pool = \"x\""),
            "event.2.pool",
        ),
        // Using it after its destruction.
        (
            create.clone() + &event(200, "cpupool_destroy", "pool = \"x\"") + &add2(300),
            "event.3.pool",
        ),
        // Creating a pool no [[cpupool]] declares, or Pool-0; destroying Pool-0.
        (
            create.clone() + &event(200, "cpupool_create", "pool = \"y\""),
            "event.1.pool",
        ),
        (
            create.clone() + &event(200, "cpupool_create", "pool = \"Pool-0\""),
            "event.1.pool",
        ),
        (
            create.clone() + &event(200, "cpupool_destroy", "pool = \"Pool-0\""),
            "event.1.pool",
        ),
        (
            create.clone() + &event(200, "cpupool_destroy", ""),
            "event.1.pool",
        ),
        // A pool made at boot is declared with pCPUs.
        (String::new(), "cpupool.0.pcpus"),
    ];
    for (events, field) in &cases {
        let (f, msg) = load_err(&machine("scheduler = \"credit2\"", events));
        assert_eq!(&f, field, "{msg}\n{events}");
    }
    // A pool made by an event has no pCPU at boot, and no domain is in it at boot.
    let with_cpus = machine("scheduler = \"credit2\"", &create).replace(
        "[[cpupool]]\nname = \"x\"\n",
        "[[cpupool]]\nname = \"x\"\npcpus = [3]\n",
    );
    assert_eq!(load_err(&with_cpus).0, "cpupool.0.pcpus");
    let dom_in = machine("scheduler = \"credit2\"", &create).replace(
        "name = \"m\"\nvcpus = 2\n",
        "name = \"m\"\nvcpus = 2\npool = \"x\"\n",
    );
    assert_eq!(load_err(&dom_in).0, "domain.1.pool");
    // On a machine without [[cpupool]] the actions are refused.
    let plain = machine("scheduler = \"credit2\"", &create).replace(
        "[[cpupool]]\nname = \"x\"\n[cpupool.sched]\nscheduler = \"credit2\"\n",
        "",
    );
    assert_eq!(load_err(&plain).0, "event.0.action");
}

/// The Python tests' `cpupool_migrate` (test_cpupools.py) as a timeline event: domain a moved
/// at 200 ms into the RTDS pool with a reservation of 2 ms every 10 ms runs alone on its
/// pCPU until then, then gets its budget; a pool event on a pCPU of another pool names its
/// field.
#[test]
fn the_rt_pool_fixture_migrates_a_domain_into_its_reservation() {
    let src = RT_POOL.replacen("[run]\n", "[run]\nvary = false\n", 1)
        + &event(
            200,
            "cpupool_migrate",
            "domain = \"a\"\npool = \"rt\"\nbudget_us = 2000\nperiod_us = 10000\n\
             extratime = false",
        );
    let (r, _, _) = traced(&src);
    let ran = ent(&r, "a.v0").running_ns as f64;
    let want = (200 + 40) as f64 * NS_PER_MS as f64;
    assert!(
        (ran / want - 1.0).abs() < 0.02,
        "a.v0 ran {ran} ns, not ~{want}"
    );
    let bad = RT_POOL.to_string() + &event(10, "cpupool_cpu_remove", "pool = \"rt\"\ncpu = 1");
    assert_eq!(load_err(&bad).0, "event.0.cpu");
}
