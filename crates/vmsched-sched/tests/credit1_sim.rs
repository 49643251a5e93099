//! Credit1 on the full simulator (guest CFS levels, the Xen core's timer slop and entry latency),
//! in both eras: two busy vCPUs on one pCPU share it in 30 ms slices; weights 512:256 give 2:1;
//! a cap of 50 holds a hog to half a CPU; a vCPU that wakes from UNDER is BOOSTed and preempts
//! a hog at once. The unit-level rules are in `host/credit1/tests/`.

use vmsched_core::report::Results;
use vmsched_core::trace::Record;

const MS: u64 = 1_000_000;

/// A domain of one vCPU on pCPU 0 running `workload` (a TOML `[[domain.workload]]` body).
fn dom(name: &str, extra: &str, workload: &str) -> String {
    format!(
        "[[domain]]\nname = \"{name}\"\nvcpus = 1\nvcpu_pcpus = [[0]]\n{extra}\n[domain.sched]\n\
         scheduler = \"cfs\"\n[[domain.workload]]\n{workload}\n"
    )
}

const HOG: &str = "kind = \"cpu_loop\"\nname = \"hog\"";

fn scenario(version: &str, duration_ms: u64, doms: &[String]) -> String {
    format!(
        "name = \"c1\"\n[run]\nduration_ms = {duration_ms}\nwarmup_ms = 300\nseed = 1\n\
         [machine]\npcpus = 1\n[host]\nscheduler = \"credit\"\nversion = \"{version}\"\n{}",
        doms.concat()
    )
}

fn run(src: &str) -> Results {
    vmsched_sched::run("c1.toml", src, &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// Run lengths (vCPU index, ns) of every host run on pCPU 0 starting after 300 ms.
fn host_runs(src: &str) -> Vec<(u32, u64)> {
    let s = vmsched_sched::load("c1.toml", src, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.enable_trace(10_000_000);
    sim.run();
    let tr = sim.take_trace().unwrap();
    assert_eq!(tr.dropped, 0);
    let host = tr.meta.cpus[0].level;
    let mut out = Vec::new();
    let mut cur: Option<(u32, u64)> = None;
    for r in &tr.records {
        if let Record::Switch { t, level, next, .. } = *r {
            if level != host {
                continue;
            }
            if let Some((e, since)) = cur {
                if since >= 300 * MS {
                    out.push((e, t - since));
                }
            }
            cur = next.map(|n| (n.0, t));
        }
    }
    out
}

/// The host share of each vCPU (its `running_ns` over the measured time), in declaration order.
fn shares(r: &Results) -> Vec<f64> {
    r.entities
        .iter()
        .filter(|e| e.level == "host")
        .map(|e| e.running_ns as f64 / r.measured_ns as f64)
        .collect()
}

const VERSIONS: [&str; 2] = ["3.3", "4.20"];

#[test]
fn two_busy_vcpus_on_one_pcpu_share_it_half_and_half_in_30_ms_slices() {
    for v in VERSIONS {
        let src = scenario(v, 3000, &[dom("a", "", HOG), dom("b", "", HOG)]);
        let runs = host_runs(&src);
        assert!(runs.len() >= 20, "{v}: {runs:?}");
        for w in runs.windows(2) {
            assert_ne!(w[0].0, w[1].0, "{v}: the two vCPUs alternate");
        }
        // Every switch is at the end of a slice: a run lasts a whole number of 30 ms slices
        // (plus the timer entry latency), never less than one.
        for &(_, d) in &runs {
            let slices = (d + MS / 2) / (30 * MS);
            assert!(
                slices >= 1 && d.abs_diff(slices * 30 * MS) < 100_000,
                "{v}: a run of {d} ns: {runs:?}"
            );
        }
        let sh = shares(&run(&src));
        for s in &sh {
            assert!((s - 0.5).abs() < 0.03, "{v}: shares {sh:?}");
        }
    }
}

#[test]
fn weights_512_and_256_share_two_to_one() {
    for v in VERSIONS {
        let src = scenario(v, 3000, &[dom("a", "weight = 512", HOG), dom("b", "", HOG)]);
        let sh = shares(&run(&src));
        let ratio = sh[0] / sh[1];
        assert!((1.85..2.15).contains(&ratio), "{v}: shares {sh:?}");
    }
}

#[test]
fn a_cap_of_50_holds_a_hog_to_half_a_cpu() {
    for v in VERSIONS {
        let src = scenario(v, 3000, &[dom("a", "cap = 50", HOG)]);
        let r = run(&src);
        let sh = shares(&r);
        assert!((sh[0] - 0.5).abs() < 0.03, "{v}: share {sh:?}");
        let host = r.entities.iter().find(|e| e.level == "host").unwrap();
        assert!(
            host.offline_ns as f64 > 0.4 * r.measured_ns as f64,
            "{v}: parked time is offline: {}",
            host.offline_ns
        );
    }
}

/// A vCPU that wakes every 10 ms for a short burst (cyclictest, no main thread) beside a hog.
const TICKER: &str =
    "kind = \"cyclictest\"\nname = \"ct\"\ninterval_us = 10000\nmain_thread = false";

#[test]
fn a_vcpu_waking_from_under_is_boosted_and_preempts_a_hog_at_once() {
    for v in VERSIONS {
        let src = scenario(v, 3000, &[dom("io", "", TICKER), dom("hog", "", HOG)]);
        let r = run(&src);
        let io = r
            .entities
            .iter()
            .find(|e| e.level == "host" && e.name.starts_with("io"))
            .unwrap();
        assert!(io.wait_count > 250, "{v}: {} wake-ups", io.wait_count);
        // BOOST preempts the hog at the wake (the hog has run past the 4.20 ratelimit): the
        // wait is the timer slop and entry latency, not a 30 ms slice.
        assert!(
            io.wait_max_ns < 100_000,
            "{v}: worst wait {} ns",
            io.wait_max_ns
        );
        let hog = r
            .entities
            .iter()
            .find(|e| e.level == "host" && e.name.starts_with("hog"))
            .unwrap();
        assert!(
            hog.cpu_share > 0.95,
            "{v}: the hog keeps the rest: {}",
            hog.cpu_share
        );
    }
}

/// The shipped scenario `credit1_boost_interactive`: beside batch hogs, a BOOSTed interactive
/// vCPU never waits, but one sharing its pCPU with a guest that wakes BOOST for 20 ms bursts
/// waits whenever its wake lands between the burster's wake and the next tick (the tick's
/// demotion does not reschedule, ERRATA X8): for the rest of the burst, up to a 30 ms slice.
/// Whether its wakes land there is a matter of phase (cyclictest's 10 ms grid against the
/// 10 ms Credit1 ticker), which the seed varies (`run.vary`): about one seed in three shows
/// the long waits, and every seed that waits at all waits for a burst (how often it waits
/// depends on the phase too).
#[test]
fn the_shipped_scenario_shows_boost_and_a_boosted_burst_holding_the_cpu() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/vmsched/scenarios/credit1_boost_interactive.toml"
    );
    let src = std::fs::read_to_string(path).unwrap();
    let waits = |src: &str| {
        let r = run(src);
        let io = r
            .entities
            .iter()
            .find(|e| e.name == "interactive.v0")
            .unwrap();
        (io.wait_max_ns, io.wait_mean_ns, io.wait_count)
    };
    let mut shown = 0;
    for seed in 1..9 {
        let (max, mean, _) = waits(&src.replace("seed = 2", &format!("seed = {seed}")));
        if max > 0 {
            shown += 1;
            assert!(
                (5 * MS..=31 * MS).contains(&max) && mean > 100_000.0,
                "seed {seed}: worst {max} ns, mean {mean} ns"
            );
        }
    }
    assert!(shown >= 2, "{shown} of 8 seeds show a wait behind a burst");
    // The shipped seed is one that shows it.
    let (max, mean, n) = waits(&src);
    assert!(n > 100, "{n} wake-ups");
    assert!(
        (5 * MS..=31 * MS).contains(&max) && mean > 100_000.0,
        "behind BOOSTed bursts: worst {max} ns, mean {mean} ns"
    );
    let a = src.find("[[domain]]\nname = \"booter\"").unwrap();
    let b = a + src[a + 1..].find("[[domain]]").unwrap() + 1;
    // Without the booter, and without the 3.3 domctl that re-boosts batch's vCPUs (ERRATA X11:
    // a re-boosted hog on pCPU 0 can hold it the same way): BOOST alone, no wait.
    let without = format!("{}{}", &src[..a], &src[b..]).replace("at_ms = 1000", "at_ms = 2999");
    let (max, _, n) = waits(&without);
    assert!(n > 200, "{n} wake-ups");
    assert!(max < 100_000, "BOOST alone: no wait, got {max} ns");
}

/// Xen 4.18 and 4.19 have 4.20's `credit.c` but for trace records: the same scenario gives the
/// same results under the three names.
#[test]
fn versions_4_18_and_4_19_schedule_as_4_20() {
    let src = |v: &str| {
        let doms = [
            dom("a", "weight = 512", HOG),
            dom("b", "", HOG),
            dom("c", "cap = 30", TICKER),
        ];
        scenario(v, 1500, &doms)
    };
    let base = format!("{:?}", run(&src("4.20")).entities);
    for v in ["4.18", "4.19"] {
        assert_eq!(format!("{:?}", run(&src(v)).entities), base, "{v}");
    }
    assert_ne!(
        format!("{:?}", run(&src("3.3")).entities),
        base,
        "3.3 differs"
    );
}

/// Bad input names its field: a release that is not modelled, an option the release lacks, a
/// run-time change the release does not take, a value out of Xen's range.
#[test]
fn bad_credit1_parameters_are_refused_by_name() {
    let base = scenario("3.3", 1000, &[dom("a", "", HOG)]);
    let err = |src: String| {
        vmsched_sched::load("c1.toml", &src, &[])
            .err()
            .unwrap_or_else(|| panic!("accepted:\n{src}"))
    };
    let e = err(base.replace("\"3.3\"", "\"4.17\""));
    assert!(
        e.field.contains("version") || e.message.contains("4.17"),
        "{e}"
    );
    let e = err(base.replace("version = \"3.3\"", "version = \"3.3\"\ntslice_ms = 10"));
    assert_eq!(e.field, "host.tslice_ms", "{e}");
    let e = err(base.replace("version = \"3.3\"", "version = \"3.3\"\nratelimit_us = 500"));
    assert_eq!(e.field, "host.ratelimit_us", "{e}");
    let e = err(base.replace("version = \"3.3\"", "version = \"4.20\"\nratelimit_us = 50"));
    assert_eq!(e.field, "host.ratelimit_us", "{e}");
    let e = err(base.replace("version = \"3.3\"", "version = \"4.20\"\ntslice_ms = 0"));
    assert_eq!(e.field, "host.tslice_ms", "{e}");
    let ev = "[[event]]\nat_ms = 100\naction = \"sched_host\"\ntslice_ms = 10\n";
    let e = err(format!("{base}{ev}"));
    assert!(e.message.contains("3.3"), "{e}");
    let ok = base.replace("\"3.3\"", "\"4.20\"");
    vmsched_sched::load("c1.toml", &format!("{ok}{ev}"), &[]).unwrap();
    let ev = "[[event]]\nat_ms = 100\naction = \"sched_host\"\nratelimit_us = 40000\n";
    let e = err(format!("{ok}{ev}"));
    assert!(e.message.contains("slice"), "{e}");
}

/// A random Credit1 scenario: topology, both eras and their options, domains with weights, caps,
/// affinities, creation and destruction times, workloads that block and wake, and a timeline of
/// `xl sched-credit -d/-s`, pause and unpause. Drawn from the project's seeded stream, so a
/// failing case is a seed.
fn random_credit1_scenario(seed: u64) -> String {
    let mut r = vmsched_core::rng::Stream::new(seed, "credit1-fuzz");
    let mut pick = |n: u64| r.range(0, n - 1);
    let duration = 100 + pick(900);
    let mut s = format!(
        "name = \"r\"\n[run]\nduration_ms = {duration}\nwarmup_ms = {}\nseed = {}\n",
        pick(50),
        pick(1000)
    );
    let (pcpus, sockets, threads) = [
        (1, 1, 1),
        (2, 1, 1),
        (2, 2, 1),
        (4, 2, 2),
        (4, 1, 2),
        (6, 2, 1),
        (3, 1, 1),
    ][pick(7) as usize];
    s += &format!(
        "[machine]\npcpus = {pcpus}\nsockets = {sockets}\nthreads_per_core = {threads}\n\
         ipi_latency_ns = {}\n",
        [0, 0, 1000][pick(3) as usize]
    );
    let v33 = pick(2) == 0;
    if v33 {
        s += "[host]\nscheduler = \"credit\"\nversion = \"3.3\"\n";
    } else {
        s += &format!(
            "[host]\nscheduler = \"credit\"\nversion = \"4.20\"\ntslice_ms = {}\nratelimit_us = {}\n\
             tickle_one_idle_cpu = {}\nvcpu_migration_delay_us = {}\n\
             load_balance_ratelimit_us = {}\nsmt_power_savings = {}\n",
            [1, 2, 10, 30, 100][pick(5) as usize],
            [0, 100, 1000][pick(3) as usize],
            pick(2) == 1,
            [0, 0, 2000][pick(3) as usize],
            [0, 1000, 100_000][pick(3) as usize],
            pick(2) == 1,
        );
    }
    let ndoms = 1 + pick(4);
    // Domains created during the run come last, in creation order; events name only domains
    // that live through the whole run.
    let first_created = if ndoms > 1 && pick(3) == 0 {
        ndoms - 1
    } else {
        ndoms
    };
    let mut steady = Vec::new();
    for d in 0..ndoms {
        let vcpus = 1 + pick(4);
        s += &format!(
            "[[domain]]\nname = \"d{d}\"\nvcpus = {vcpus}\nweight = {}\ncap = {}\n",
            [1, 256, 512, 65535][pick(4) as usize],
            [0, 0, 10, 50, 100 * vcpus][pick(5) as usize],
        );
        match pick(5) {
            0 => s += &format!("pcpus = [{}]\n", pick(pcpus)),
            1 => s += &format!("soft_pcpus = [{}]\n", pick(pcpus)),
            _ => {}
        }
        let mut lives = true;
        if d >= first_created {
            s += &format!("create_at_ms = {}\n", 1 + pick(duration / 2));
            lives = false;
        }
        if pick(5) == 0 {
            s += &format!("destroy_at_ms = {}\n", duration / 2 + pick(duration / 2));
            lives = false;
        }
        if lives {
            steady.push(d);
        }
        s += "[domain.sched]\nscheduler = \"cfs\"\n";
        for w in 0..1 + pick(2) {
            s += "[[domain.workload]]\n";
            s += &match pick(3) {
                0 => format!(
                    "kind = \"cpu_loop\"\nname = \"w{w}\"\ncopies = {}\n",
                    1 + pick(3)
                ),
                1 => format!("kind = \"context1\"\nname = \"w{w}\"\n"),
                _ => format!(
                    "kind = \"cyclictest\"\nname = \"w{w}\"\nthreads = {}\ninterval_us = {}\n",
                    1 + pick(2),
                    [100, 1000, 10_000][pick(3) as usize],
                ),
            };
        }
    }
    let mut paused = vec![false; ndoms as usize];
    let mut at = 0;
    for _ in 0..pick(6) {
        at += 1 + pick(duration / 6);
        if at >= duration || steady.is_empty() {
            break;
        }
        let d = steady[pick(steady.len() as u64) as usize];
        s += &format!("[[event]]\nat_ms = {at}\n");
        s += &match pick(3) {
            0 => format!(
                "action = \"sched_domain\"\ndomain = \"d{d}\"\nweight = {}\ncap = {}\n",
                [1, 128, 1024][pick(3) as usize],
                [0, 20][pick(2) as usize]
            ),
            1 if !v33 => format!(
                "action = \"sched_host\"\ntslice_ms = {}\nratelimit_us = {}\n",
                [5, 30, 1000][pick(3) as usize],
                [0, 100, 1000][pick(3) as usize]
            ),
            _ => {
                let p = &mut paused[d as usize];
                *p = !*p;
                let a = if *p { "pause" } else { "unpause" };
                format!("action = \"{a}\"\ndomain = \"d{d}\"\n")
            }
        };
    }
    s
}

/// Every random Credit1 scenario either fails validation naming a field, or runs to its end with
/// the engine's invariants checked after every event. VMSCHED_FUZZ_CASES raises the count.
#[test]
fn random_credit1_scenarios_validate_or_run() {
    let cases: u64 = std::env::var("VMSCHED_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let (mut ran, mut refused) = (0, 0);
    for seed in 0..cases {
        let src = random_credit1_scenario(seed);
        match vmsched_sched::load("r.toml", &src, &[]) {
            Err(e) => {
                assert!(!e.field.is_empty(), "seed {seed}: {e}\n{src}");
                refused += 1;
            }
            Ok(s) => {
                let run = std::panic::catch_unwind(|| {
                    let mut sim = vmsched_sched::build(&s);
                    sim.set_debug_checks(true);
                    sim.run();
                    sim.results().duration_ns
                });
                match run {
                    Ok(d) => assert_eq!(d, s.run.duration_ms * MS),
                    Err(_) => panic!("seed {seed} panicked; scenario:\n{src}"),
                }
                ran += 1;
            }
        }
    }
    eprintln!("random credit1 scenarios: {ran} ran, {refused} refused");
    assert!(
        ran > cases / 2,
        "only {ran} of {cases} ran ({refused} refused)"
    );
}
