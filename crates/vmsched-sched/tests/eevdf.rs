//! EEVDF over whole runs: CPU shares follow nice weights in full simulations of each kernel
//! (6.6, 6.12, 6.18), scenario selection and its errors, and, over a long run of one guest
//! level, PREEMPT_SHORT giving a short-slice task lower wake-up latency than a long-slice one.

use vmsched_core::testkit::{pinned, Harness};
use vmsched_core::{WakeInfo, NS_PER_MS};
use vmsched_sched::guest::eevdf::{Eevdf, EevdfKernel, EevdfParams, EevdfSched};

fn run(src: &str) -> vmsched_core::report::Results {
    let s = vmsched_sched::load("eevdf.toml", src, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.run();
    sim.results()
}

/// Nice values → weights (linux-schedulers.md §1.2).
fn weight(nice: i32) -> f64 {
    const W: [f64; 11] = [
        3121.0, 2501.0, 1991.0, 1586.0, 1277.0, 1024.0, 820.0, 655.0, 526.0, 423.0, 335.0,
    ];
    W[(nice + 5) as usize]
}

/// CPU-bound tasks of different nice values on one vCPU share it by their weights, for every
/// kernel, in a full simulation (host: pinned).
#[test]
fn shares_follow_nice_in_a_full_simulation() {
    for kernel in ["6.6", "6.12", "6.18"] {
        for nices in [vec![0, 5], vec![-5, 0, 3], vec![2, 2, -1, 4]] {
            let mut s = format!(
                "[run]\nduration_ms = 3000\n[machine]\npcpus = 1\n[host]\nscheduler = \"pinned\"\n\
                 [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"eevdf\"\n\
                 kernel = \"{kernel}\"\n"
            );
            for (i, n) in nices.iter().enumerate() {
                s += &format!(
                    "[[domain.workload]]\nkind = \"cpu_loop\"\nname = \"l{i}\"\nnice = {n}\n"
                );
            }
            let r = run(&s);
            let total: f64 = nices.iter().map(|&n| weight(n)).sum();
            for (i, &n) in nices.iter().enumerate() {
                let share = r
                    .entities
                    .iter()
                    .find(|e| e.name == format!("l{i}.0"))
                    .unwrap()
                    .cpu_share;
                let want = weight(n) / total;
                assert!(
                    (share - want).abs() < 0.02,
                    "{kernel} {nices:?}: l{i} got {share:.3}, want {want:.3}"
                );
            }
        }
    }
}

/// Two 4-vCPU guests with pipes, sleeps and hogs under Credit2, each kernel and some flags off:
/// the run completes, every vCPU's runstates add up, and the same seed gives the same bytes.
#[test]
fn mixed_workloads_run_deterministically() {
    for (kernel, features) in [
        ("6.6", ""),
        ("6.12", ""),
        ("6.18", ""),
        (
            "6.12",
            "features = { DELAY_DEQUEUE = false, PREEMPT_SHORT = false }\n",
        ),
        (
            "6.18",
            "features = { RUN_TO_PARITY = false, NEXT_BUDDY = true }\n",
        ),
    ] {
        let mut s = String::from(
            "[run]\nduration_ms = 400\n[machine]\npcpus = 2\n[host]\nscheduler = \"credit2\"\n",
        );
        for d in 0..2 {
            s += &format!(
                "[[domain]]\nname = \"d{d}\"\nvcpus = 4\n[domain.sched]\nscheduler = \"eevdf\"\n\
                 kernel = \"{kernel}\"\n{features}\
                 [[domain.workload]]\nkind = \"context1\"\nname = \"c\"\n\
                 [[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\n\
                 [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"hog\"\ncopies = 3\nnice = {}\n",
                d * 3
            );
        }
        let a = serde_json::to_string(&run(&s)).unwrap();
        let b = serde_json::to_string(&run(&s)).unwrap();
        assert_eq!(a, b, "{kernel} {features}");
        let r = run(&s);
        let lps = r
            .workloads
            .iter()
            .find(|w| w.name == "c")
            .map(|w| format!("{w:?}"))
            .unwrap_or_default();
        assert!(!lps.is_empty(), "{kernel}: context1 reported");
    }
}

fn load_err(sched: &str) -> String {
    let s = format!(
        "[run]\nduration_ms = 10\n[machine]\npcpus = 1\n[host]\nscheduler = \"pinned\"\n\
         [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"eevdf\"\n{sched}"
    );
    match vmsched_sched::load("bad.toml", &s, &[]) {
        Ok(_) => panic!("{sched} loaded"),
        Err(e) => e.to_string(),
    }
}

/// Selection errors name the field: a missing or unknown kernel, an unknown flag, a flag the
/// release does not have, a bad tunable.
#[test]
fn bad_eevdf_configurations_name_the_field() {
    let e = load_err("");
    assert!(e.contains("kernel"), "{e}");
    let e = load_err("kernel = \"6.9\"\n");
    assert!(e.contains("kernel") || e.contains("6.9"), "{e}");
    let e = load_err("kernel = \"6.12\"\nfeatures = { NO_SUCH_FLAG = true }\n");
    assert!(e.contains("NO_SUCH_FLAG"), "{e}");
    let e = load_err("kernel = \"6.6\"\nfeatures = { DELAY_DEQUEUE = true }\n");
    assert!(e.contains("features.DELAY_DEQUEUE"), "{e}");
    let e = load_err("kernel = \"6.18\"\nbase_slice_ns = 0\n");
    assert!(e.contains("base_slice_ns"), "{e}");
    let e = load_err("kernel = \"6.18\"\nsched_latency_ns = 6000000\n");
    assert!(e.contains("sched_latency_ns"), "{e}");
}

/// One guest CPU: two hogs and two periodic tasks that wake, run `run_ns` and sleep about 2 ms,
/// one with a 0.1 ms slice, one with a 3 ms slice (`sched_runtime`, 6.12+). Returns every
/// wake-up latency (wake to running) of each periodic task, in ns, over 4 s.
fn periodic_latency_samples(p: EevdfParams, run_ns: u64) -> [Vec<u64>; 2] {
    const STEP: u64 = 10_000;
    let run_len = run_ns;
    let mut ents = vec![pinned(0, 1, 0), pinned(1, 1, 0)];
    for (i, slice) in [(2, 100_000u64), (3, 3 * NS_PER_MS)] {
        let mut e = pinned(i, 1, 0);
        e.linux.times.sched_runtime_ns = slice;
        ents.push(e);
    }
    let topo = vmsched_core::testkit::flat(1);
    let mut h: Harness<EevdfSched> = Harness::with_topology(Eevdf::sched(p, &topo), topo, ents);
    for e in 0..2 {
        h.wake(e, WakeInfo::default());
        h.pump();
    }
    let tick = h.sched.tick_period().unwrap();
    // Per periodic task: next wake time (None while awake), wake stamp, run so far.
    let period = [2_030_000u64, 2_170_000];
    let mut next = [Some(1_000_000u64), Some(1_500_000)];
    let mut woke = [0u64; 2];
    let mut started = [false; 2];
    let mut ran = [0u64; 2];
    let mut lat: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    let end = 4 * 1000 * NS_PER_MS;
    while h.now < end {
        h.advance(STEP);
        if let Some(c) = h.curr(0) {
            if c >= 2 {
                ran[(c - 2) as usize] += STEP;
            }
        }
        if h.now.is_multiple_of(tick) {
            h.tick(0);
        }
        h.pump();
        for k in 0..2 {
            let e = 2 + k as u32;
            if next[k].is_some_and(|t| h.now >= t) {
                next[k] = None;
                woke[k] = h.now;
                started[k] = false;
                ran[k] = 0;
                h.wake(e, WakeInfo::default());
                h.pump();
            }
            if next[k].is_none() && !started[k] && h.curr(0) == Some(e) {
                started[k] = true;
                lat[k].push(h.now - woke[k]);
            }
            if next[k].is_none() && ran[k] >= run_len && h.curr(0) == Some(e) {
                next[k] = Some(h.now + period[k]);
                h.block(e);
                h.pump();
            }
        }
    }
    assert!(lat[0].len() > 1000 && lat[1].len() > 1000);
    lat
}

fn mean(v: &[u64]) -> f64 {
    v.iter().sum::<u64>() as f64 / v.len() as f64
}

/// §2.7 PREEMPT_SHORT, over 4 s of one guest CPU with two hogs: a task with a 0.1 ms slice
/// that wakes every ~2 ms for 0.2 ms of work gets the CPU sooner on average than one with a
/// 3 ms slice doing the same, and sooner than itself without PREEMPT_SHORT.
///
/// (With bursts much shorter than the slices the two means come together: a sleeper keeps no
/// credit for sleeping, so each one waits on average what it must to pay back the lag its burst
/// costs, whatever its slice; see docs/eevdf.md.)
#[test]
fn preempt_short_gives_short_slices_lower_latency() {
    for kernel in [EevdfKernel::V6_12, EevdfKernel::V6_18] {
        let on = periodic_latency_samples(EevdfParams::new(kernel), 200_000);
        let (short, long) = (mean(&on[0]), mean(&on[1]));
        assert!(
            short < 0.8 * long,
            "{kernel:?}: short {short:.0} ns vs long {long:.0} ns"
        );
        let mut p = EevdfParams::new(kernel);
        p.features.PREEMPT_SHORT = Some(false);
        let off = periodic_latency_samples(p, 200_000);
        let short_off = mean(&off[0]);
        assert!(
            short < 0.9 * short_off,
            "{kernel:?}: short {short:.0} ns with PREEMPT_SHORT, {short_off:.0} without"
        );
    }
}

/// A random scenario of EEVDF guests: kernels, flags, slices, weights, pipes, sleeps, yields,
/// forks and exits, cyclictest, nice and policy changes and guest CPU hot-plug at run time.
fn random_eevdf_scenario(seed: u64) -> String {
    let mut r = vmsched_core::rng::Stream::new(seed, "eevdf-fuzz");
    let mut pick = |n: u64| r.range(0, n - 1);
    let pcpus = 1 + pick(3);
    let mut s = format!(
        "[run]\nduration_ms = {}\nseed = {seed}\n[machine]\npcpus = {pcpus}\n\
         [host]\nscheduler = \"credit2\"\n",
        20 + pick(60)
    );
    let flags = [
        "PLACE_LAG",
        "PLACE_DEADLINE_INITIAL",
        "RUN_TO_PARITY",
        "NEXT_BUDDY",
        "CACHE_HOT_BUDDY",
        "WAKEUP_PREEMPTION",
        "PREEMPT_SHORT",
        "PICK_BUDDY",
        "DELAY_DEQUEUE",
        "DELAY_ZERO",
        "PLACE_REL_DEADLINE",
    ];
    let mut events = String::new();
    for d in 0..1 + pick(2) {
        let vcpus = 1 + pick(4);
        let kernel = ["6.6", "6.12", "6.18"][pick(3) as usize];
        let nflags = if kernel == "6.6" {
            6
        } else {
            flags.len() as u64
        };
        let mut f = Vec::new();
        for fl in flags.iter().take(nflags as usize) {
            if pick(3) == 0 {
                f.push(format!("{fl} = {}", pick(2) == 1));
            }
        }
        s += &format!(
            "[[domain]]\nname = \"d{d}\"\nvcpus = {vcpus}\n\
             [domain.kernel]\nparavirt_time_accounting = {}\npreempt = \"{}\"\n\
             [domain.sched]\nscheduler = \"eevdf\"\nkernel = \"{kernel}\"\nhz = {}\n\
             steal_carry_over = {}\nvcpu_is_preempted = {}\nfeatures = {{ {} }}\n",
            pick(2) == 1,
            ["none", "full"][pick(2) as usize],
            [100, 250, 1000][pick(3) as usize],
            pick(2) == 1,
            pick(2) == 1,
            f.join(", ")
        );
        if pick(3) == 0 {
            s += &format!(
                "base_slice_ns = {}\n",
                [100_000, 3_000_000][pick(2) as usize]
            );
        }
        for w in 0..1 + pick(3) {
            s += "[[domain.workload]]\n";
            s += &match pick(4) {
                0 => format!(
                    "kind = \"cpu_loop\"\nname = \"w{w}\"\ncopies = {}\nnice = {}\n",
                    1 + pick(3),
                    pick(20) as i64 - 10
                ),
                1 => format!("kind = \"context1\"\nname = \"w{w}\"\n"),
                2 => format!(
                    "kind = \"cyclictest\"\nname = \"w{w}\"\ninterval_us = {}\n",
                    [100, 1000][pick(2) as usize]
                ),
                _ => format!(
                    "kind = \"program\"\nname = \"w{w}\"\ncopies = {}\nmax_tasks = 12\n\
                     policy = \"{}\"\nchannels = [\"c\"]\ntokens = [1]\nsteps = [\n\
                     {{ op = \"compute\", exp_us = {} }},\n{{ op = \"wait\", chan = \"c\" }},\n\
                     {{ op = \"compute\", exp_us = 50 }},\n{{ op = \"signal\", chan = \"c\" }},\n\
                     {{ op = \"sleep\", exp_us = {} }},\n{{ op = \"yield\" }},\n\
                     {{ op = \"fork\", child_at = 8 }},\n{{ op = \"loop\", to = 0 }},\n\
                     {{ op = \"compute\", exp_us = 300 }},\n{{ op = \"exit\" }},\n]\n",
                    1 + pick(3),
                    ["normal", "batch", "idle"][pick(3) as usize],
                    [20, 500, 3000][pick(3) as usize],
                    [10, 300, 2000][pick(3) as usize],
                ),
            };
            if pick(3) == 0 {
                events += &format!(
                    "[[event]]\nat_ms = {}\naction = \"sched_task\"\ndomain = \"d{d}\"\n\
                     workload = \"w{w}\"\nnice = {}\n",
                    1 + pick(15),
                    pick(40) as i64 - 20
                );
            }
        }
        if vcpus > 1 && pick(2) == 0 {
            let cpu = 1 + pick(vcpus - 1);
            let off = 1 + pick(10);
            events += &format!(
                "[[event]]\nat_ms = {off}\naction = \"cpu_offline\"\ndomain = \"d{d}\"\ncpu = {cpu}\n\
                 [[event]]\nat_ms = {}\naction = \"cpu_online\"\ndomain = \"d{d}\"\ncpu = {cpu}\n",
                off + 1 + pick(8)
            );
        }
    }
    s + &events
}

/// Random EEVDF scenarios validate and run with the engine's invariants checked after every
/// event (VMSCHED_FUZZ_CASES raises the count from 60).
#[test]
fn random_eevdf_scenarios_run_with_the_invariants_checked() {
    let cases: u64 = std::env::var("VMSCHED_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    for seed in 0..cases {
        let src = random_eevdf_scenario(seed);
        let s = vmsched_sched::load("fuzz.toml", &src, &[])
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}"));
        let run = std::panic::catch_unwind(|| {
            let mut sim = vmsched_sched::build(&s);
            sim.set_debug_checks(true);
            sim.run();
            sim.results().duration_ns
        });
        match run {
            Ok(d) => assert_eq!(d, s.run.duration_ms * 1_000_000),
            Err(_) => panic!("seed {seed} panicked; scenario:\n{src}"),
        }
    }
}

use vmsched_core::Scheduler;
