//! Cpupools (docs/cpupools.md) through whole scenarios: an RTDS pool beside a Credit2 pool
//! (isolation and the RTDS reservation), `cpupool_cpu_remove` / `cpupool_cpu_add` (a removed
//! pCPU runs nothing and its vCPUs move to the pool's other pCPUs), `cpupool_migrate` (the
//! domain runs only on its new pool's pCPUs, with the new scheduler's default parameters or
//! the event's), per-pool `sched_host`, determinism, byte-identical results without pools, and
//! the validation errors naming their field. The engine's invariants are checked after every
//! event (`set_debug_checks`).

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;

use vmsched_core::report::Results;
use vmsched_core::trace::Trace;
use vmsched_core::NS_PER_MS;

use run::{assert_sums, cpus_running, ent, ents_named, load_err, traced};

/// The host entity ids (global) of the vCPUs whose name starts with `prefix`.
fn vcpus_of(tr: &Trace, prefix: &str) -> Vec<u32> {
    ents_named(tr, &[prefix])
}

/// Four pCPUs: Pool-0 (Credit2) keeps 0 and 1, pool "rt" (RTDS) has 2 and 3. In Pool-0 a
/// domain of four busy vCPUs overloads its two pCPUs; in "rt" a domain of two busy vCPUs
/// has a reservation of 3 ms every 10 ms each, with no extra time.
const POOLS: &str = r#"
[run]
duration_ms = 2000
warmup_ms = 0
[machine]
pcpus = 4
[host]
scheduler = "credit2"
[[cpupool]]
name = "rt"
pcpus = [2, 3]
[cpupool.sched]
scheduler = "rtds"
[[domain]]
name = "hog"
vcpus = 4
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
copies = 4
pin_each = true
[[domain]]
name = "rt"
vcpus = 2
pool = "rt"
budget_us = 3000
period_us = 10000
extratime = false
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
copies = 2
pin_each = true
"#;

fn with_events(base: &str, events: &str) -> String {
    format!("{base}\n{events}")
}

#[test]
fn an_rtds_pool_keeps_its_reservation_beside_an_overloaded_credit2_pool() {
    let (r, tr, _) = traced(POOLS);
    // The RTDS vCPUs get their budget, 30 % each, no more (no extra time), and run only on
    // the pool's pCPUs; the Credit2 domain's four vCPUs share Pool-0's two pCPUs and never
    // reach the idle RTDS pCPUs.
    for v in 0..2 {
        let e = ent(&r, &format!("rt.v{v}"));
        let share = e.running_ns as f64 / r.measured_ns as f64;
        assert!((share - 0.30).abs() < 0.01, "rt.v{v}: {share}");
    }
    let hog: u64 = (0..4)
        .map(|v| ent(&r, &format!("hog.v{v}")).running_ns)
        .sum();
    let two_cpus = 2 * r.measured_ns;
    assert!(
        hog <= two_cpus && hog > two_cpus * 99 / 100,
        "hog gets Pool-0's two pCPUs: {hog}"
    );
    assert_eq!(
        cpus_running(&tr, &vcpus_of(&tr, "rt.v"), 0, 2000),
        vec![2, 3]
    );
    assert_eq!(
        cpus_running(&tr, &vcpus_of(&tr, "hog.v"), 0, 2000),
        vec![0, 1]
    );
    assert_sums(&r);
}

#[test]
fn a_removed_pcpu_runs_nothing_and_its_vcpus_move_to_the_pool_s_other_pcpus() {
    let src = with_events(
        POOLS,
        r#"
[[event]]
at_ms = 500
action = "cpupool_cpu_remove"
pool = "rt"
cpu = 3
[[event]]
at_ms = 1500
action = "cpupool_cpu_add"
pool = "Pool-0"
cpu = 3
"#,
    );
    let (r, tr, _) = traced(&src);
    let rt = vcpus_of(&tr, "rt.v");
    let hog = vcpus_of(&tr, "hog.v");
    assert_eq!(cpus_running(&tr, &rt, 0, 500), vec![2, 3]);
    // From the removal on, nothing runs on pCPU 3 until it joins Pool-0; the RTDS domain is
    // on pCPU 2 alone (both reservations fit: 60 %).
    assert_eq!(cpus_running(&tr, &rt, 500, 2000), vec![2]);
    assert_eq!(cpus_running(&tr, &hog, 500, 1500), vec![0, 1]);
    assert_eq!(cpus_running(&tr, &hog, 1500, 2000), vec![0, 1, 3]);
    for v in 0..2 {
        let e = ent(&r, &format!("rt.v{v}"));
        let share = e.running_ns as f64 / r.measured_ns as f64;
        assert!((share - 0.30).abs() < 0.01, "rt.v{v}: {share}");
    }
    assert_sums(&r);
}

#[test]
fn a_migrated_domain_runs_only_on_its_new_pool_with_the_new_scheduler_s_defaults() {
    let src = with_events(
        POOLS,
        r#"
[[event]]
at_ms = 1000
action = "cpupool_migrate"
domain = "rt"
pool = "Pool-0"
"#,
    );
    let (r, tr, log) = traced(&src);
    let rt = vcpus_of(&tr, "rt.v");
    assert_eq!(cpus_running(&tr, &rt, 0, 1000), vec![2, 3]);
    assert_eq!(cpus_running(&tr, &rt, 1000, 2000), vec![0, 1]);
    assert!(
        log.iter().any(|l| l.contains("cpupool 0 (Pool-0)")),
        "{log:?}"
    );
    // In Pool-0 the two vCPUs have Credit2's default weight, as the hog's four: six equal
    // vCPUs share two pCPUs for the second half, a third each (before: 30 %).
    for v in 0..2 {
        let e = ent(&r, &format!("rt.v{v}"));
        let second_half = e.running_ns - 300 * NS_PER_MS;
        let share = second_half as f64 / (1000 * NS_PER_MS) as f64;
        assert!((share - 1.0 / 3.0).abs() < 0.03, "rt.v{v}: {share}");
    }
    assert_sums(&r);
}

#[test]
fn a_migration_takes_the_parameters_it_gives() {
    // hog moves into the RTDS pool with 2 ms every 10 ms per vCPU: four vCPUs, 80 % of the
    // pool's two pCPUs, beside rt's 60 %: 140 % of 200 %, so every budget is met.
    let src = with_events(
        POOLS,
        r#"
[[event]]
at_ms = 1000
action = "cpupool_migrate"
domain = "hog"
pool = "rt"
budget_us = 2000
period_us = 10000
extratime = false
"#,
    );
    let (r, tr, _) = traced(&src);
    assert_eq!(
        cpus_running(&tr, &vcpus_of(&tr, "hog.v"), 1000, 2000),
        vec![2, 3]
    );
    for v in 0..4 {
        let e = ent(&r, &format!("hog.v{v}"));
        // Half of two pCPUs over four vCPUs for the first second, 20 % for the second.
        let expect = 500 * NS_PER_MS + 200 * NS_PER_MS;
        let diff = e.running_ns.abs_diff(expect);
        assert!(diff < 15 * NS_PER_MS, "hog.v{v}: {}", e.running_ns);
    }
    assert_sums(&r);
}

#[test]
fn sched_host_reaches_the_pool_it_names() {
    // Two Credit2 pools; the ratelimit of one changes. Nothing is asserted of the slices
    // here (conformance and ERRATA X3 cover them): the event must reach that pool's
    // scheduler (a ratelimit RTDS cannot take is refused for the RTDS pool).
    let two = POOLS.replace(
        "[cpupool.sched]\nscheduler = \"rtds\"",
        "[cpupool.sched]\nscheduler = \"credit2\"",
    );
    let two = two.replace(
        "budget_us = 3000\nperiod_us = 10000\nextratime = false\n",
        "",
    );
    let src = with_events(
        &two,
        r#"
[[event]]
at_ms = 500
action = "sched_host"
pool = "rt"
ratelimit_us = 0
"#,
    );
    let (r, _, _) = traced(&src);
    assert_sums(&r);
    let bad = with_events(
        POOLS,
        r#"
[[event]]
at_ms = 500
action = "sched_host"
pool = "rt"
ratelimit_us = 0
"#,
    );
    let (field, msg) = load_err(&bad);
    assert_eq!(field, "event.0.ratelimit_us", "{msg}");
    assert!(msg.contains("cpupool 'rt'"), "{msg}");
}

#[test]
fn a_per_pool_ratelimit_changes_only_that_pool() {
    // Two Credit2 4.20.2 pools of one pCPU each, two equal spinners in each. Pool "b" gets a
    // ratelimit of 20 ms at 0 ms: its vCPUs switch every 20 ms instead of every 1 ms
    // (ERRATA X3), Pool-0's do as before.
    let src = r#"
[run]
duration_ms = 1000
warmup_ms = 0
[machine]
pcpus = 2
[host]
scheduler = "credit2"
version = "4.20.2"
[[cpupool]]
name = "b"
pcpus = [1]
[cpupool.sched]
scheduler = "credit2"
version = "4.20.2"
[[domain]]
name = "a1"
vcpus = 1
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "l"
[[domain]]
name = "a2"
vcpus = 1
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "l"
[[domain]]
name = "b1"
vcpus = 1
pool = "b"
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "l"
[[domain]]
name = "b2"
vcpus = 1
pool = "b"
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "l"
"#;
    let (base, _, _) = traced(src);
    let changed = with_events(
        src,
        r#"
[[event]]
at_ms = 0
action = "sched_host"
pool = "b"
ratelimit_us = 20000
"#,
    );
    let (r, _, _) = traced(&changed);
    let runs = |r: &Results, n: &str| ent(r, n).runs;
    // Pool-0 is untouched: the same runs as without the event.
    assert_eq!(runs(&r, "a1.v0"), runs(&base, "a1.v0"));
    assert_eq!(runs(&r, "a2.v0"), runs(&base, "a2.v0"));
    // Pool "b"'s slices are 20 times longer.
    assert!(
        runs(&base, "b1.v0") > 400,
        "1 ms slices: {}",
        runs(&base, "b1.v0")
    );
    assert!(
        runs(&r, "b1.v0") < 30,
        "20 ms slices: {}",
        runs(&r, "b1.v0")
    );
    assert_sums(&r);
}

#[test]
fn pools_are_deterministic() {
    let src = with_events(
        POOLS,
        r#"
[[event]]
at_ms = 400
action = "cpupool_cpu_remove"
pool = "rt"
cpu = 3
[[event]]
at_ms = 800
action = "cpupool_cpu_add"
pool = "rt"
cpu = 3
[[event]]
at_ms = 1200
action = "cpupool_migrate"
domain = "rt"
pool = "Pool-0"
"#,
    );
    let (a, _, _) = traced(&src);
    let (b, _, _) = traced(&src);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

#[test]
fn the_pool_fields_are_validated_naming_the_field() {
    let cases: &[(&str, &str, &str)] = &[
        // A pCPU in two pools.
        (
            "scheduler = \"rtds\"\n",
            "scheduler = \"rtds\"\n[[cpupool]]\nname = \"x\"\npcpus = [3]\n[cpupool.sched]\nscheduler = \"null\"\n",
            "cpupool.1.pcpus",
        ),
        // A domain in an unknown pool.
        ("pool = \"rt\"\n", "pool = \"nope\"\n", "domain.1.pool"),
        // A historic scheduler.
        (
            "scheduler = \"rtds\"",
            "scheduler = \"bvt\"",
            "cpupool.0.sched.scheduler",
        ),
        // Pool-0 left without pCPUs.
        ("pcpus = [2, 3]\n", "pcpus = [0, 1, 2, 3]\n", "cpupool"),
        // An ARINC653 pool's table naming no domain.
        (
            "scheduler = \"rtds\"\n",
            "scheduler = \"arinc653\"\nmajor_frame_us = 10000\nschedule = [{ domain = \"nope\", vcpu = 0, runtime_us = 5000 }]\n",
            "cpupool.0.sched.schedule.0.domain",
        ),
        // A pinning outside the domain's pool.
        ("pool = \"rt\"\n", "pool = \"rt\"\npcpus = [0]\n", "domain.1.pcpus"),
    ];
    for (from, to, field) in cases {
        let src = POOLS.replacen(from, to, 1);
        let (f, msg) = load_err(&src);
        assert_eq!(&f, field, "{msg}");
    }
    // KVM hosts refuse pools.
    let kvm = POOLS
        .replace(
            "[machine]\npcpus = 4\n",
            "[machine]\npcpus = 4\nhypervisor = \"kvm\"\n",
        )
        .replace(
            "[host]\nscheduler = \"credit2\"",
            "[host]\nscheduler = \"linux\"",
        );
    let (f, msg) = load_err(&kvm);
    assert!(f == "cpupool" || f.starts_with("domain"), "{f}: {msg}");
    // Events: the last pCPU of a pool with domains; a pCPU not in the pool; adding a pCPU of
    // another pool; migrating into the domain's own pool.
    let ev: &[(&str, &str)] = &[
        (
            "[[event]]\nat_ms = 1\naction = \"cpupool_cpu_remove\"\npool = \"rt\"\ncpu = 2\n[[event]]\nat_ms = 2\naction = \"cpupool_cpu_remove\"\npool = \"rt\"\ncpu = 3\n",
            "event.1.cpu",
        ),
        (
            "[[event]]\nat_ms = 1\naction = \"cpupool_cpu_remove\"\npool = \"rt\"\ncpu = 1\n",
            "event.0.cpu",
        ),
        (
            "[[event]]\nat_ms = 1\naction = \"cpupool_cpu_add\"\npool = \"rt\"\ncpu = 1\n",
            "event.0.cpu",
        ),
        (
            "[[event]]\nat_ms = 1\naction = \"cpupool_migrate\"\ndomain = \"rt\"\npool = \"rt\"\n",
            "event.0.pool",
        ),
        (
            "[[event]]\nat_ms = 1\naction = \"cpupool_migrate\"\ndomain = \"hog\"\npool = \"rt\"\nweight = 5\n",
            "event.0.weight",
        ),
    ];
    for (events, field) in ev {
        let (f, msg) = load_err(&with_events(POOLS, events));
        assert_eq!(&f, field, "{msg}");
    }
}

/// Seed 000 as shipped (1 s), and with a ninth pCPU in a Credit2 pool of its own that holds
/// no domain: Pool-0 has exactly the machine of before, so every entity's figures are the
/// same (the routing through the pools changes no decision).
#[test]
fn a_pool_without_domains_changes_nothing_for_pool_0() {
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/vmsched/scenarios/seed000_context1_ratelimit.toml"
    ))
    .unwrap();
    let ov = [("run.duration_ms", "1000")];
    let s = vmsched_sched::load("seed000.toml", &shipped, &[])
        .map(|_| ())
        .and_then(|_| {
            vmsched_sched::load(
                "seed000.toml",
                &shipped,
                &ov.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<Vec<_>>(),
            )
        })
        .unwrap();
    let mut sim = vmsched_sched::build(&s);
    sim.run();
    let base = sim.results();
    let pooled_src = shipped.replace("pcpus = 8\n", "pcpus = 9\n").replacen(
        "\n[[domain]]\n",
        "\n[[cpupool]]\nname = \"spare\"\npcpus = [8]\n[cpupool.sched]\nscheduler = \"credit2\"\nversion = \"4.20.0\"\n\n[[domain]]\n",
        1,
    );
    assert!(pooled_src.contains("name = \"spare\""));
    let ov: Vec<(String, String)> = ov
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let s = vmsched_sched::load("seed000_pooled.toml", &pooled_src, &ov).unwrap();
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.run();
    let mut pooled = sim.results();
    for e in &mut pooled.entities {
        assert_eq!(e.pool.as_deref(), Some("Pool-0"), "{}", e.name);
        e.pool = None;
    }
    assert_eq!(
        serde_json::to_string(&base.entities).unwrap(),
        serde_json::to_string(&pooled.entities).unwrap()
    );
    assert_eq!(
        serde_json::to_string(&base.workloads).unwrap(),
        serde_json::to_string(&pooled.workloads).unwrap()
    );
    assert_eq!(base.events, pooled.events, "the spare pCPU idles: no event");
    assert!(
        base.entities.iter().all(|e| e.pool.is_none()),
        "no pools, no pool"
    );
}

#[test]
fn a_vcpu_pinned_to_a_removed_pcpu_gets_every_cpu_of_its_pool() {
    let src = POOLS.replacen(
        "pool = \"rt\"\n",
        "pool = \"rt\"\nvcpu_pcpus = [[2], [3]]\n",
        1,
    );
    let src = with_events(
        &src,
        r#"
[[event]]
at_ms = 500
action = "cpupool_cpu_remove"
pool = "rt"
cpu = 3
"#,
    );
    let (r, tr, log) = traced(&src);
    // Xen's "Breaking affinity" looks at the pool: rt.v1 had no other pCPU of "rt"; hog's
    // vCPUs (Pool-0) are left alone.
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(log[0].contains("rt.v1"), "{log:?}");
    let v1 = vcpus_of(&tr, "rt.v1");
    assert_eq!(cpus_running(&tr, &v1, 0, 500), vec![3]);
    assert_eq!(cpus_running(&tr, &v1, 500, 2000), vec![2]);
    let e = ent(&r, "rt.v1");
    let share = e.running_ns as f64 / r.measured_ns as f64;
    assert!(
        (share - 0.30).abs() < 0.01,
        "rt.v1 keeps its reservation: {share}"
    );
    assert_sums(&r);
}

/// Every scheduler that can be a pool's, as the pool "x" (pCPUs 2 and 3) beside a Credit2
/// Pool-0: a domain moves in, a pCPU leaves and comes back, the domain moves out again, and
/// another domain stays. The engine's invariants hold after every event; runstates add up;
/// the moved domain runs only on its pool's pCPUs in each phase; the run is deterministic.
#[test]
fn every_pool_scheduler_takes_cpus_and_domains_in_and_out() {
    for sched in [
        "scheduler = \"credit2\"",
        "scheduler = \"credit\"",
        "scheduler = \"rtds\"",
        "scheduler = \"null\"",
        "scheduler = \"arinc653\"",
    ] {
        let src = format!(
            r#"
[run]
duration_ms = 1000
warmup_ms = 0
[machine]
pcpus = 4
[host]
scheduler = "credit2"
[[cpupool]]
name = "x"
pcpus = [2, 3]
[cpupool.sched]
{sched}
[[domain]]
name = "a"
vcpus = 2
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
copies = 2
pin_each = true
[[domain]]
name = "m"
vcpus = 2
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
copies = 2
pin_each = true
[[domain]]
name = "s"
vcpus = 1
pool = "x"
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cyclictest"
name = "ct"
interval_us = 1000
[[event]]
at_ms = 200
action = "cpupool_migrate"
domain = "m"
pool = "x"
[[event]]
at_ms = 400
action = "cpupool_cpu_remove"
pool = "x"
cpu = 3
[[event]]
at_ms = 600
action = "cpupool_cpu_add"
pool = "x"
cpu = 3
[[event]]
at_ms = 800
action = "cpupool_migrate"
domain = "m"
pool = "Pool-0"
"#
        );
        let (r, tr, _) = traced(&src);
        assert_sums(&r);
        let m = vcpus_of(&tr, "m.v");
        let within = |from, to, allowed: &[u32]| {
            let got = cpus_running(&tr, &m, from, to);
            assert!(
                got.iter().all(|c| allowed.contains(c)),
                "{sched}: m ran on {got:?} in [{from}, {to}) ms"
            );
        };
        within(0, 200, &[0, 1]);
        within(200, 400, &[2, 3]);
        within(400, 600, &[2]);
        within(600, 800, &[2, 3]);
        within(800, 1000, &[0, 1]);
        for v in 0..2 {
            assert!(
                ent(&r, &format!("m.v{v}")).running_ns > 0,
                "{sched}: m.v{v} runs"
            );
        }
        let (b, _, _) = traced(&src);
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            serde_json::to_string(&b).unwrap(),
            "{sched}: deterministic"
        );
    }
}

/// The xentrace export of a machine with pools writes the generic scheduler records (a
/// switch on each pCPU that runs something), whatever pool the pCPU is in.
#[test]
fn the_xentrace_export_covers_every_pool() {
    use vmsched_core::trace::xentrace::{self as xt, XentraceOpts};
    let (_, tr, _) = traced(POOLS);
    let mut b = Vec::new();
    let sum = xt::write(&tr, &XentraceOpts::default(), &mut b).unwrap();
    assert!(sum.records > 0);
    let switch = sum
        .by_event
        .iter()
        .find(|(id, _)| *id == xt::TRC_SCHED_SWITCH)
        .map(|(_, n)| *n)
        .unwrap_or(0);
    assert!(switch > 0, "{:?}", sum.by_event);
    // Both pools' domains are named.
    let names: Vec<&str> = sum.domains.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"hog") && names.contains(&"rt"), "{names:?}");
}

/// A domain created during the run in a pool, and destroyed there: its vCPUs run only on the
/// pool's pCPUs while it lives.
#[test]
fn a_domain_created_and_destroyed_in_a_pool_lives_there() {
    let src = format!(
        "{POOLS}\n{}",
        r#"
[[domain]]
name = "late"
vcpus = 1
pool = "rt"
budget_us = 2000
period_us = 10000
extratime = false
create_at_ms = 500
destroy_at_ms = 1500
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
"#
    );
    let (r, tr, _) = traced(&src);
    let late = vcpus_of(&tr, "late.v");
    assert_eq!(cpus_running(&tr, &late, 0, 500), Vec::<u32>::new());
    let on = cpus_running(&tr, &late, 500, 1500);
    assert!(
        !on.is_empty() && on.iter().all(|c| [2, 3].contains(c)),
        "{on:?}"
    );
    assert_eq!(cpus_running(&tr, &late, 1500, 2000), Vec::<u32>::new());
    let e = ent(&r, "late.v0");
    assert_eq!(e.pool.as_deref(), Some("rt"));
    // 2 ms of every 10 ms for its second of life.
    assert!(
        e.running_ns.abs_diff(200 * NS_PER_MS) < 5 * NS_PER_MS,
        "{}",
        e.running_ns
    );
    assert_sums(&r);
}
