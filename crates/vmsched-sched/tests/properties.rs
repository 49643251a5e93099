//! Property tests over whole simulations: long-run CPU shares follow weights (Credit2, CFS), and
//! runs are deterministic for any seed.

use proptest::prelude::*;

fn run(src: &str, ov: &[(String, String)]) -> vmsched_core::report::Results {
    let s = vmsched_sched::load("prop.toml", src, ov).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.run();
    sim.results()
}

fn credit2_domains(weights: &[u32]) -> String {
    let mut s = String::from(
        "[run]\nduration_ms = 3000\n[machine]\npcpus = 1\n[host]\nscheduler = \"credit2\"\n",
    );
    for (i, w) in weights.iter().enumerate() {
        s += &format!(
            "[[domain]]\nname = \"d{i}\"\nvcpus = 1\nweight = {w}\n[domain.sched]\nscheduler = \"cfs\"\n\
             [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"l\"\n"
        );
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Credit2: CPU-bound vCPUs sharing one pCPU get shares proportional to their weights.
    #[test]
    fn credit2_shares_follow_weights(weights in proptest::collection::vec(64u32..1024, 2..4)) {
        let r = run(&credit2_domains(&weights), &[]);
        let total: u32 = weights.iter().sum();
        for (i, w) in weights.iter().enumerate() {
            let share = r.entities.iter().find(|e| e.name == format!("d{i}.v0")).unwrap().cpu_share;
            let want = *w as f64 / total as f64;
            prop_assert!((share - want).abs() < 0.04, "weights {:?}: d{} got {:.3}, want {:.3}", weights, i, share, want);
        }
    }

    /// CFS: CPU-bound tasks of different nice values on one vCPU share it by their weights.
    #[test]
    fn cfs_shares_follow_nice(nices in proptest::collection::vec(-5i32..6, 2..4)) {
        let mut s = String::from("[run]\nduration_ms = 3000\n[machine]\npcpus = 1\n[host]\nscheduler = \"pinned\"\n\
            [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n");
        for (i, n) in nices.iter().enumerate() {
            s += &format!("[[domain.workload]]\nkind = \"cpu_loop\"\nname = \"l{i}\"\nnice = {n}\n");
        }
        let r = run(&s, &[]);
        const W: [f64; 11] = [3121.0, 2501.0, 1991.0, 1586.0, 1277.0, 1024.0, 820.0, 655.0, 526.0, 423.0, 335.0];
        let total: f64 = nices.iter().map(|n| W[(n + 5) as usize]).sum();
        for (i, n) in nices.iter().enumerate() {
            let share = r.entities.iter().find(|e| e.name == format!("l{i}.0")).unwrap().cpu_share;
            let want = W[(n + 5) as usize] / total;
            prop_assert!((share - want).abs() < 0.03, "nices {:?}: l{} got {:.3}, want {:.3}", nices, i, share, want);
        }
    }

    /// Same scenario and seed, same bytes, for any seed.
    #[test]
    fn deterministic_for_any_seed(seed in 0u64..1_000_000) {
        let src = include_str!("../../../python/vmsched/scenarios/seed000_context1_ratelimit.toml");
        let ov = vec![
            ("run.seed".to_string(), seed.to_string()),
            ("run.duration_ms".to_string(), "200".to_string()),
            ("run.warmup_ms".to_string(), "0".to_string()),
        ];
        let a = serde_json::to_string(&run(src, &ov)).unwrap();
        let b = serde_json::to_string(&run(src, &ov)).unwrap();
        prop_assert_eq!(a, b);
    }
}

/// A random small scenario, possibly invalid (weights, affinities, ratelimits out of range).
fn any_scenario() -> impl Strategy<Value = String> {
    let domain = (
        1u32..5,                                                        // vcpus
        prop_oneof![4 => 1u32..65536, 1 => 0u32..70000],                // weight
        proptest::option::of(proptest::collection::vec(0u32..6, 1..3)), // pcpus
        0u32..4,                                                        // workload kind
        proptest::option::of(proptest::collection::vec(0u32..5, 1..3)), // task affinity
        any::<bool>(),                                                  // steal accounting
    );
    (
        1u32..5,
        prop_oneof![Just("credit2"), Just("pinned")],
        prop_oneof![3 => Just(0u64), 3 => Just(1000), 3 => Just(20000), 1 => Just(50), 1 => Just(600000)],
        proptest::collection::vec(domain, 1..4),
    )
        .prop_map(|(pcpus, host, rl, domains)| {
            let mut s = format!("[run]\nduration_ms = 60\n[machine]\npcpus = {pcpus}\narch = \"arm64\"\n[host]\nscheduler = \"{host}\"\n");
            if host == "credit2" {
                s += &format!("ratelimit_us = {rl}\n");
            }
            for (i, (v, w, p, k, aff, pvta)) in domains.into_iter().enumerate() {
                s += &format!("[[domain]]\nname = \"d{i}\"\nvcpus = {v}\nweight = {w}\n");
                if let Some(p) = p {
                    // Mostly valid pCPU ids; now and then one past the last.
                    let p: Vec<u32> = p.iter().map(|c| c % (pcpus + 1)).collect();
                    s += &format!("pcpus = {p:?}\n");
                }
                s += &format!("[domain.kernel]\nparavirt_time_accounting = {pvta}\n[domain.sched]\nscheduler = \"cfs\"\n[[domain.workload]]\n");
                s += match k {
                    0 => "kind = \"context1\"\nname = \"w\"\n",
                    1 => "kind = \"cyclictest\"\nname = \"w\"\n",
                    2 => "kind = \"cpu_loop\"\nname = \"w\"\ncopies = 3\n",
                    _ => "kind = \"program\"\nname = \"w\"\ncopies = 2\nchannels = [\"c\"]\nsteps = [{ op = \"compute\", exp_us = 200 }, { op = \"signal\", chan = \"c\" }, { op = \"spin\", chan = \"c\", wfe = true }, { op = \"sleep\", us = 300 }, { op = \"loop\", to = 0 }]\n",
                };
                if let Some(a) = aff {
                    let a: Vec<u32> = a.iter().map(|c| c % (v + 1)).collect();
                    s += &format!("affinity = {a:?}\n");
                }
            }
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any scenario either fails to load with an error naming the file, or runs to the end
    /// keeping every invariant: never a panic.
    #[test]
    fn any_scenario_errs_cleanly_or_runs(src in any_scenario()) {
        match vmsched_sched::load("fuzz.toml", &src, &[]) {
            Err(e) => prop_assert!(e.to_string().starts_with("fuzz.toml"), "{}", e),
            Ok(s) => {
                let mut sim = vmsched_sched::build(&s);
                sim.set_debug_checks(true);
                sim.run();
                let r = sim.results();
                for e in &r.entities {
                    prop_assert_eq!(e.running_ns + e.runnable_ns + e.blocked_ns + e.offline_ns, r.duration_ns);
                }
            }
        }
    }
}
