//! Chaos mode (issue 14 item 6; `[domain.chaos]`, docs/chaos.md): seeded vCPU stalls take the
//! configured share of a busy vCPU's time under a Xen and a KVM host, the guest sees them as
//! steal and as a preempted vCPU, the same seed gives the same stalls, and rate 0 is the run
//! without the table, byte for byte.

use vmsched_core::report::Results;

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;
use run::{assert_sums, ent};

/// A guest `g` of two vCPUs, each owning a pCPU (`host`: the host's lines, then the domain's
/// placement lines), running two CPU loops, with `chaos` as its `[domain.chaos]` table (empty:
/// none).
fn busy(host: &str, chaos: &str) -> String {
    let (host, place) = host.split_once('|').unwrap();
    format!(
        "[run]\nduration_ms = 4000\nwarmup_ms = 100\nseed = 7\n[machine]\npcpus = 2\n{host}\n\
         [[domain]]\nname = \"g\"\nvcpus = 2\n{place}\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"loop\"\ncopies = 2\n{chaos}"
    )
}

const XEN: &str = "[host]\nscheduler = \"pinned\"|";
const KVM: &str = "hypervisor = \"kvm\"\n[host]\nscheduler = \"linux\"|vcpu_pcpus = [[0], [1]]";

fn chaos(rate: f64, dist: &str) -> String {
    format!("[domain.chaos]\nrate = {rate}\nduration = \"{dist}\"\nmean_us = 500\n")
}

/// Builds and runs with debug checks; returns the results and the injected (stalls, ns).
fn go(src: &str) -> (Results, Vec<(u64, u64)>) {
    let s = run::load("chaos.toml", src, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.run();
    let inj = sim
        .chaos_injected()
        .iter()
        .map(|c| (c.stalls, c.stolen_ns))
        .collect();
    (sim.results(), inj)
}

fn json(r: &Results) -> String {
    serde_json::to_string(r).unwrap()
}

/// Tolerance on the stolen share: with ~1,600 stall/gap cycles per vCPU (4 s at a 2.5 ms mean
/// cycle) the share's standard deviation is below 0.01; 0.03 is over three of them.
const TOL: f64 = 0.03;

#[test]
fn injected_steal_adds_up_to_the_rate_under_xen_and_kvm() {
    for host in [XEN, KVM] {
        for dist in ["exponential", "uniform", "fixed"] {
            let (r, inj) = go(&busy(host, &chaos(0.2, dist)));
            assert_sums(&r);
            assert_eq!(inj.len(), 2, "one stream per vCPU");
            for v in 0..2 {
                let (stalls, ns) = inj[v];
                assert!(stalls > 1000, "{host} {dist}: {stalls} stalls");
                // Over the whole run (4 s, warm-up included).
                let share = ns as f64 / 4e9;
                assert!(
                    (share - 0.2).abs() < TOL,
                    "{host} {dist}: injected share {share}"
                );
                // The guest sees it: its vCPU's steal (runnable at the host, the only waiting
                // the host causes here: each vCPU owns its pCPU) over the measured window.
                let e = ent(&r, &format!("g.v{v}"));
                let steal = (e.runnable_ns + e.offline_ns) as f64 / r.measured_ns as f64;
                assert!(
                    (steal - 0.2).abs() < TOL,
                    "{host} {dist}: v{v} steal {steal}"
                );
            }
            // The loops execute only while their vCPUs do.
            let exec: u64 = r
                .entities
                .iter()
                .filter(|e| e.kind == "task")
                .map(|e| e.executed_ns)
                .sum();
            let share = exec as f64 / (2 * r.measured_ns) as f64;
            assert!((share - 0.8).abs() < TOL, "{host} {dist}: executed {share}");
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_injections_and_another_seed_others() {
    let src = busy(XEN, &chaos(0.1, "exponential"));
    let (a, ia) = go(&src);
    let (b, ib) = go(&src);
    assert_eq!(ia, ib);
    assert_eq!(json(&a), json(&b));
    let (c, ic) = go(&src.replace("seed = 7", "seed = 8"));
    assert_ne!(ia, ic);
    assert_ne!(json(&a), json(&c));
    // The two vCPUs draw from their own streams.
    assert_ne!(ia[0], ia[1]);
    // A named stream: two domains naming one stream would draw alike; renaming it changes them.
    let (_, id) = go(&src.replace("mean_us = 500", "mean_us = 500\nstream = \"other\""));
    assert_ne!(ia, id);
}

#[test]
fn rate_zero_is_byte_identical_to_no_chaos() {
    for host in [XEN, KVM] {
        let (plain, none) = go(&busy(host, ""));
        let (zero, inj) = go(&busy(host, &chaos(0.0, "exponential")));
        assert!(none.is_empty() && inj.is_empty(), "nothing injected");
        assert_eq!(json(&plain), json(&zero), "{host}");
    }
    // A shipped scenario with the table appended at rate 0.
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/rt_cyclictest.toml"
    ))
    .unwrap();
    let with = src.replacen(
        "[[domain.workload]]\nkind = \"cyclictest\"",
        "[domain.chaos]\nrate = 0\n\n[[domain.workload]]\nkind = \"cyclictest\"",
        1,
    );
    assert_ne!(src, with);
    assert_eq!(json(&go(&src).0), json(&go(&with).0));
}

#[test]
fn stalls_delay_a_guest_timer_and_grow_cyclictest_latency() {
    let src = |c: &str| {
        format!(
            "[run]\nduration_ms = 2000\nwarmup_ms = 100\nseed = 3\n[machine]\npcpus = 1\n\
             [host]\nscheduler = \"pinned\"\n[[domain]]\nname = \"g\"\nvcpus = 1\n\
             [domain.sched]\nscheduler = \"eevdf\"\nkernel = \"6.12\"\n\
             [[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\nthreads = 1\n\
             interval_us = 1000\npriority = 90\n{c}"
        )
    };
    let lat = |r: &Results| r.workloads[0].histograms[0].1.clone();
    let (calm, _) = go(&src(""));
    let (wild, _) = go(&src(&chaos(0.1, "fixed")));
    let (c, w) = (lat(&calm), lat(&wild));
    // A 500 µs stall that begins just before a timer expiry delays that wake-up by up to
    // 500 µs; without stalls the idle guest on its own pCPU wakes at once.
    assert!(
        w.max_ns > c.max_ns + 250_000,
        "max {} vs {}",
        w.max_ns,
        c.max_ns
    );
    assert!(w.max_ns <= c.max_ns + 500_000 + 50_000, "max {}", w.max_ns);
    // About a tenth of the wake-ups fall in a stall: the p99 moves.
    assert!(w.p99_ns > c.p99_ns, "p99 {} vs {}", w.p99_ns, c.p99_ns);
}

#[test]
fn bad_tables_are_refused_naming_the_field() {
    for (bad, field) in [
        ("[domain.chaos]\nrate = 1.5\n", "domain.0.chaos.rate"),
        (
            "[domain.chaos]\nrate = 0.1\nmean_us = -1\n",
            "domain.0.chaos.mean_us",
        ),
        (
            "[domain.chaos]\nrate = 0.1\nduration = \"normal\"\n",
            "duration",
        ),
        ("[domain.chaos]\nrate = 0.1\nbogus = 1\n", "bogus"),
    ] {
        let Err(e) = run::load("chaos.toml", &busy(XEN, bad), &[]) else {
            panic!("{bad}: should be refused");
        };
        let all = format!("{} {}", e.field, e.message);
        assert!(all.contains(field), "{bad}: {all}");
    }
}

#[test]
fn the_table_can_be_set_from_the_command_line() {
    let s = run::load(
        "chaos.toml",
        &busy(XEN, ""),
        &[
            ("domain.0.chaos.rate", "0.25"),
            ("domain.0.chaos.duration", "fixed"),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let c = s.domains[0].chaos.as_ref().expect("the table is created");
    assert_eq!(c.rate, 0.25);
    assert_eq!(c.duration, vmsched_core::scenario::chaos::ChaosDist::Fixed);
    assert_eq!(c.mean_us, 1000.0, "the other fields take their defaults");
}

/// Shipped scenarios with a busy host, halting guests, the I/O path or a KVM host: with
/// stalls in their first domain they run to the end under the engine's invariant checks
/// (a stalled vCPU on a pCPU reads runnable and does not execute), their runstates add up,
/// and the first domain's vCPUs wait longer at the host than without.
#[test]
fn shipped_scenarios_run_under_chaos_with_the_invariants_checked() {
    for name in ["rt_cyclictest", "kvm_host", "io_ping", "kvm_lock_holder"] {
        let src = std::fs::read_to_string(format!(
            "{}/../../scenarios/{name}.toml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let ov = [
            ("run.duration_ms", "600"),
            ("domain.0.chaos.rate", "0.15"),
            ("domain.0.chaos.mean_us", "700"),
        ];
        let r = run::run(&format!("{name}.toml"), &src, &ov);
        assert_sums(&r);
        let calm = run::run(&format!("{name}.toml"), &src, &ov[..1]);
        let s = run::load("x.toml", &src, &[]).unwrap();
        let d = &s.domains[0].name;
        let wait = |r: &Results| -> u64 {
            r.entities
                .iter()
                .filter(|e| e.kind == "vcpu" && e.name.starts_with(&format!("{d}.v")))
                .map(|e| e.runnable_ns)
                .sum()
        };
        assert!(
            wait(&r) > wait(&calm),
            "{name}: {} vs {}",
            wait(&r),
            wait(&calm)
        );
    }
}

/// The results' `chaos` rows (docs/chaos.md, "In the results"): per vCPU, the stalls begun and
/// the stalled time inside the measured window, with the configured rate and mean.
#[test]
fn the_results_count_the_stalls_at_the_configured_rate() {
    for host in [XEN, KVM] {
        for dist in ["exponential", "uniform", "fixed"] {
            let (r, _) = go(&busy(host, &chaos(0.2, dist)));
            assert_eq!(r.chaos.len(), 2, "{host} {dist}: a row per vCPU");
            let t = r.measured_ns as f64;
            for (v, c) in r.chaos.iter().enumerate() {
                assert_eq!((c.domain.as_str(), c.vcpu), ("g", v as u32));
                assert_eq!(c.name, format!("g.v{v}"));
                assert_eq!((c.rate, c.mean_us), (0.2, 500.0));
                // count × mean ≈ rate × time. Stalls and gaps alternate as a renewal process of
                // mean cycle 2.5 ms: ~1,560 cycles in 3.9 s, the count's standard deviation at
                // most 2.1 % (exponential stalls, the widest); 7 % is over three of them.
                let want = c.rate * t;
                let by_count = c.stalls as f64 * c.mean_us * 1e3;
                assert!(
                    (by_count / want - 1.0).abs() < 0.07,
                    "{host} {dist} v{v}: {} stalls × {} µs against {want} ns",
                    c.stalls,
                    c.mean_us
                );
                // The stalled time is the rate's share of the window (TOL as above).
                let share = c.stalled_ns as f64 / t;
                assert!((share - 0.2).abs() < TOL, "{host} {dist} v{v}: {share}");
            }
        }
    }
}

/// Where the model makes them equal, the stalls are the steal exactly: a vCPU that never
/// halts, alone on a pCPU that a pinned host never takes from it, waits at the host only while
/// it is stalled, so its `runnable_ns` is its stalled time to the nanosecond.
#[test]
fn the_stalled_time_is_the_steal_of_a_busy_vcpu_alone_on_its_pcpu() {
    for dist in ["exponential", "fixed"] {
        let (r, _) = go(&busy(XEN, &chaos(0.1, dist)));
        for c in &r.chaos {
            let e = ent(&r, &c.name);
            assert_eq!(
                e.offline_ns + e.blocked_ns,
                0,
                "{}: always wants its CPU",
                c.name
            );
            assert_eq!(e.runnable_ns, c.stalled_ns, "{dist} {}", c.name);
        }
    }
    // A warm-up that ends inside a stall: the window counts only the stall's part inside it.
    // Over the whole run (no warm-up) the rows are `chaos_injected`'s totals.
    let src = busy(XEN, &chaos(0.1, "exponential")).replace("warmup_ms = 100", "warmup_ms = 0");
    let (r, inj) = go(&src);
    let rows: Vec<(u64, u64)> = r.chaos.iter().map(|c| (c.stalls, c.stalled_ns)).collect();
    assert_eq!(rows, inj);
}

/// The rows reach the tables a run writes (the Python API's `Results.chaos`) only with chaos
/// mode on; without it the results, JSON included, have no trace of them.
#[test]
fn the_chaos_table_is_written_only_with_chaos() {
    let (r, _) = go(&busy(XEN, &chaos(0.1, "fixed")));
    let tables = r.tables();
    let t = tables
        .iter()
        .find(|t| t.name == "chaos")
        .expect("a chaos table");
    let cols: Vec<&str> = t.columns.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        cols,
        [
            "domain",
            "vcpu",
            "name",
            "stalls",
            "stalled_ns",
            "rate",
            "mean_us"
        ]
    );
    assert!(json(&r).contains("\"chaos\":[{"));
    let (plain, _) = go(&busy(XEN, ""));
    assert!(plain.chaos.is_empty());
    assert!(plain.tables().iter().all(|t| t.name != "chaos"));
    assert!(!json(&plain).contains("chaos"));
}

/// `vcpu_is_preempted` observed directly (what a guest scheduler reads in `CpuInfo`), stepping
/// the run 37 µs at a time: a busy vCPU alone on its pCPU reads preempted exactly while a
/// stall is in progress; a halted one is stalled without being preempted (a halted vCPU is not
/// preempted), and is preempted only inside a stall.
#[test]
fn vcpu_is_preempted_is_true_exactly_during_a_stall_of_a_vcpu_that_wants_to_run() {
    // From 20 ms on: the loops have started (the seeded start offsets are below 11 ms:
    // docs/design.md, Variation).
    let step = |src: &str, check: &mut dyn FnMut(&[vmsched_core::sim::ChaosView])| {
        let s = run::load("chaos.toml", src, &[]).unwrap_or_else(|e| panic!("{e}"));
        let mut sim = vmsched_sched::build(&s);
        sim.set_debug_checks(true);
        sim.run_until(20_000_000);
        while sim.now() < 300_000_000 {
            sim.run_until(sim.now() + 37_000);
            check(&sim.chaos_view());
        }
    };
    let mut stalled = 0;
    step(&busy(XEN, &chaos(0.2, "fixed")), &mut |v| {
        for c in v {
            assert!(!c.halted, "a busy vCPU never halts: {c:?}");
            assert_eq!(c.preempted, c.stalled, "{c:?}");
            stalled += u32::from(c.stalled);
        }
    });
    // A fifth of 2 × 7,570 looks fall in a stall.
    assert!((2_500..4_000).contains(&stalled), "{stalled} looks stalled");
    // One vCPU running cyclictest (1 ms period): mostly halted.
    let idle = "[run]\nduration_ms = 400\nwarmup_ms = 0\nseed = 3\n[machine]\npcpus = 1\n\
                [host]\nscheduler = \"pinned\"\n[[domain]]\nname = \"g\"\nvcpus = 1\n\
                [domain.sched]\nscheduler = \"eevdf\"\nkernel = \"6.12\"\n\
                [[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\nthreads = 1\n\
                interval_us = 1000\npriority = 90\n";
    let (mut halted_in_stall, mut preempted) = (0, 0);
    step(&format!("{idle}{}", chaos(0.2, "fixed")), &mut |v| {
        let c = v[0];
        assert!(
            !c.preempted || c.stalled,
            "preempted outside a stall: {c:?}"
        );
        assert!(!(c.preempted && c.halted), "halted and preempted: {c:?}");
        halted_in_stall += u32::from(c.stalled && c.halted);
        preempted += u32::from(c.preempted);
    });
    assert!(halted_in_stall > 100, "{halted_in_stall}");
    assert!(
        preempted > 0,
        "a wake-up fell into a stall and read preempted"
    );
}

/// `correlated = true` stalls the whole domain at once: every vCPU draws the same stalls from
/// one stream, so at every look all are stalled or none is; off (the default), they differ.
#[test]
fn correlated_stalls_take_every_vcpu_at_once() {
    let src = busy(
        XEN,
        &format!("{}correlated = true\n", chaos(0.2, "exponential")),
    );
    let s = run::load("chaos.toml", &src, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    let mut together = 0;
    while sim.now() < 300_000_000 {
        sim.run_until(sim.now() + 37_000);
        let v = sim.chaos_view();
        assert_eq!(v[0].stalled, v[1].stalled, "at {}", sim.now());
        together += u32::from(v[0].stalled);
    }
    assert!(together > 1000, "{together} looks with both stalled");
    let (r, inj) = go(&src);
    assert_eq!(inj[0], inj[1]);
    assert_eq!(r.chaos[0].stalls, r.chaos[1].stalls);
    // Each vCPU still loses `rate` of its time.
    let share = r.chaos[0].stalled_ns as f64 / r.measured_ns as f64;
    assert!((share - 0.2).abs() < TOL, "{share}");
    let (_, apart) = go(&busy(XEN, &chaos(0.2, "exponential")));
    assert_ne!(apart[0], apart[1]);
    // Off by default, and `false` is the table without the key, byte for byte.
    let (a, _) = go(&busy(XEN, &chaos(0.2, "exponential")));
    let (b, _) = go(&busy(
        XEN,
        &format!("{}correlated = false\n", chaos(0.2, "exponential")),
    ));
    assert_eq!(json(&a), json(&b));
}
