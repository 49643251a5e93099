//! The seed 002 switches (ERRATA X6) and the seed 001 options (ERRATA X13) of Credit1 on the
//! full simulator, one test per group, each against the same scenario with the options off:
//! without `boost_on_wake` or `tickle_on_wake` a woken vCPU waits for the hog's slice to end;
//! with the first improvement (exact debit, a 2 ms BOOST slice, credit kept above the limit,
//! levelled credits) a vCPU queued behind a BOOSTed burst waits at most about 2 ms; with boost
//! credit a periodic vCPU beyond its weighted share stays BOOST and stops waiting. The unit
//! rules are in `host/credit1/tests/options.rs`.

use vmsched_core::report::{EntityResult, Results};

const MS: u64 = 1_000_000;

/// A domain of one vCPU on pCPU 0 running `workload` (a TOML `[[domain.workload]]` body).
fn dom(name: &str, extra: &str, workload: &str) -> String {
    format!(
        "[[domain]]\nname = \"{name}\"\nvcpus = 1\nvcpu_pcpus = [[0]]\n{extra}\n[domain.sched]\n\
         scheduler = \"cfs\"\n[[domain.workload]]\n{workload}\n"
    )
}

const HOG: &str = "kind = \"cpu_loop\"\nname = \"hog\"";
/// Wakes every 10 ms for a few µs (cyclictest, no main thread).
const TICKER: &str =
    "kind = \"cyclictest\"\nname = \"ct\"\ninterval_us = 10000\nmain_thread = false";

/// One pCPU, `host` lines after `scheduler = "credit"`.
fn scenario(host: &str, doms: &[String]) -> String {
    format!(
        "name = \"c1opts\"\n[run]\nvary = false\nduration_ms = 3000\nwarmup_ms = 300\nseed = 1\n\
         [machine]\npcpus = 1\n[host]\nscheduler = \"credit\"\n{host}\n{}",
        doms.concat()
    )
}

fn run(src: &str) -> Results {
    vmsched_sched::run("c1opts.toml", src, &[]).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// The host vCPU of domain `name`.
fn vcpu<'a>(r: &'a Results, name: &str) -> &'a EntityResult {
    r.entities
        .iter()
        .find(|e| e.level == "host" && e.name == format!("{name}.v0"))
        .unwrap_or_else(|| panic!("no vCPU {name}.v0"))
}

#[test]
fn x6_without_boost_or_tickle_a_woken_vcpu_waits_for_the_hogs_slice() {
    let doms = [dom("io", "", TICKER), dom("hog", "", HOG)];
    for v in ["3.3", "4.20"] {
        let r = run(&scenario(&format!("version = \"{v}\""), &doms));
        let io = vcpu(&r, "io");
        assert!(io.wait_count > 250, "{v}: {} wake-ups", io.wait_count);
        assert!(
            io.wait_max_ns < 100_000,
            "{v}: BOOST and tickle: {}",
            io.wait_max_ns
        );
        // Without BOOST the woken vCPU is UNDER: it preempts an OVER hog, but an UNDER one
        // keeps the CPU to its slice's end (3.3: 30 ms; 4.20: 30 ms too, the ratelimit aside).
        let r = run(&scenario(
            &format!("version = \"{v}\"\nboost_on_wake = false"),
            &doms,
        ));
        let io = vcpu(&r, "io");
        assert!(
            io.wait_max_ns > 5 * MS && io.wait_max_ns <= 31 * MS,
            "{v}: no BOOST: worst wait {} ns",
            io.wait_max_ns
        );
    }
    // Without tickling (3.3) the woken vCPU is BOOST but nobody reschedules: it runs when the
    // hog's slice ends, so its wait is spread over the slice.
    let r = run(&scenario(
        "version = \"3.3\"\ntickle_on_wake = false",
        &doms,
    ));
    let io = vcpu(&r, "io");
    assert!(io.wait_count > 50, "{} runs", io.wait_count);
    assert!(
        io.wait_max_ns > 10 * MS && io.wait_max_ns <= 31 * MS && io.wait_mean_ns > 2e6,
        "no tickle: worst {} ns, mean {} ns",
        io.wait_max_ns,
        io.wait_mean_ns
    );
    assert!(
        vcpu(&r, "hog").cpu_share > 0.95,
        "the hog is never preempted"
    );
}

/// A guest that wakes BOOST for 20 ms bursts every 30 ms.
const BURSTS: &str = "kind = \"program\"\nname = \"burst\"\n\
    steps = [{ op = \"compute\", ms = 20 }, { op = \"sleep\", ms = 10 }, { op = \"loop\", to = 0 }]";

#[test]
fn x13_the_first_improvement_cuts_the_wait_behind_a_boosted_burst_to_the_boost_slice() {
    let doms = [
        dom("io", "", TICKER),
        dom("burst", "", BURSTS),
        dom("hog", "", HOG),
    ];
    let plain = run(&scenario("version = \"3.3\"", &doms));
    let first = run(&scenario(
        "version = \"3.3\"\nexact_debit = true\nboost_slice_ms = 2\n\
         keep_credit_above_limit = true\nlevel_domain_credits = true",
        &doms,
    ));
    let (p, f) = (vcpu(&plain, "io"), vcpu(&first, "io"));
    assert!(f.wait_count > 250, "{} wake-ups", f.wait_count);
    // Plain 3.3: a wake that lands in a BOOSTed burst waits for the burst (ERRATA X8).
    assert!(
        p.wait_max_ns > 5 * MS,
        "plain 3.3: worst {} ns",
        p.wait_max_ns
    );
    // The 2 ms BOOST slice: the burst is UNDER after 2 ms and the BOOSTed io vCPU preempts it
    // or is picked at that reschedule.
    assert!(
        f.wait_max_ns <= 2 * MS + 200_000 && 2 * f.wait_max_ns < p.wait_max_ns,
        "first improvement: worst {} ns against {} ns",
        f.wait_max_ns,
        p.wait_max_ns
    );
}

/// A periodic interactive guest: 2 ms of work every 10 ms (20 % of the CPU).
const INTERACTIVE: &str = "kind = \"program\"\nname = \"app\"\n\
    steps = [{ op = \"compute\", ms = 2 }, { op = \"sleep\", ms = 8 }, { op = \"loop\", to = 0 }]";

#[test]
fn x13_boost_credit_keeps_a_periodic_vcpu_boost_and_its_worst_wait_drops() {
    // Weight 32 against two hogs of 256: a weighted share of about 6 %, below its 20 %.
    let doms = [
        dom("app", "weight = 32", INTERACTIVE),
        dom("hog1", "", HOG),
        dom("hog2", "", HOG),
    ];
    let plain = run(&scenario("version = \"3.3\"", &doms));
    let boost = run(&scenario(
        "version = \"3.3\"\nboost_domains = [{ domain = \"app\", limit_ms = 100, ratio_pct = 30 }]",
        &doms,
    ));
    let (p, b) = (vcpu(&plain, "app"), vcpu(&boost, "app"));
    // Plain 3.3: beyond its share it goes OVER and waits behind UNDER hogs' 30 ms slices.
    assert!(
        p.wait_max_ns > 20 * MS,
        "plain 3.3: worst {} ns",
        p.wait_max_ns
    );
    // Boost credit (30 % of a CPU, more than it uses): BOOST at every wake, so it preempts.
    assert!(b.wait_count > 250, "{} wake-ups", b.wait_count);
    assert!(
        b.wait_max_ns < MS && 10 * b.wait_max_ns < p.wait_max_ns,
        "boost credit: worst {} ns against {} ns",
        b.wait_max_ns,
        p.wait_max_ns
    );
    assert!(b.cpu_share > 0.19, "it gets its 20 %: {}", b.cpu_share);
}

#[test]
fn the_options_are_refused_by_name() {
    let doms = [dom("app", "", HOG)];
    let err = |host: &str| {
        vmsched_sched::load("c1opts.toml", &scenario(host, &doms), &[])
            .err()
            .unwrap_or_else(|| panic!("accepted: {host}"))
    };
    for (host, field) in [
        ("version = \"4.20\"\nexact_debit = true", "host.exact_debit"),
        ("version = \"4.20\"\nboost_slice_ms = 2", "host.boost_slice_ms"),
        ("version = \"4.20\"\ntickle_on_wake = false", "host.tickle_on_wake"),
        ("version = \"3.3\"\nboost_slice_ms = 0", "host.boost_slice_ms"),
        (
            "version = \"3.3\"\nboost_domains = [{ domain = \"app\", limit_ms = 100, ratio_pct = 0 }]",
            "host.boost_domains",
        ),
        (
            "version = \"3.3\"\nboost_domains = [{ domain = \"nope\", limit_ms = 100, ratio_pct = 20 }]",
            "host.boost_domains.0.domain",
        ),
    ] {
        let e = err(host);
        assert_eq!(e.field, field, "{host}: {e}");
    }
}

/// A random 3.3 scenario with a random subset of the seed options: 1–4 pCPUs, 2–4 domains of
/// 1–2 free vCPUs with weights, caps, hogs, periodic wakers and bursts, and a weight change, a
/// pause and (with 2+ pCPUs) pCPU 1 offline for 40 ms during the run. Drawn from the project's seeded stream.
fn random_scenario(seed: u64) -> String {
    let mut r = vmsched_core::rng::Stream::new(seed, "credit1-seed-options");
    let mut pick = |n: u64| r.range(0, n - 1);
    let pcpus = 1 + pick(4);
    let mut host = String::from("version = \"3.3\"\n");
    if pick(2) == 0 {
        host += "boost_on_wake = false\n";
    }
    if pick(3) == 0 {
        host += "tickle_on_wake = false\n";
    }
    for opt in [
        "exact_debit",
        "keep_credit_above_limit",
        "level_domain_credits",
    ] {
        if pick(2) == 0 {
            host += &format!("{opt} = true\n");
        }
    }
    if pick(2) == 0 {
        host += &format!("boost_slice_ms = {}\n", [1, 2, 10][pick(3) as usize]);
    }
    let ndoms = 2 + pick(3);
    let mut doms = String::new();
    let mut boost = Vec::new();
    for d in 0..ndoms {
        let work = [HOG, TICKER, BURSTS, INTERACTIVE][pick(4) as usize];
        let vcpus = 1 + pick(2);
        let copies = if work == TICKER {
            String::new()
        } else {
            format!("copies = {vcpus}\n")
        };
        doms += &format!(
            "[[domain]]\nname = \"d{d}\"\nvcpus = {vcpus}\nweight = {}\ncap = {}\n\
             [domain.sched]\nscheduler = \"cfs\"\n[[domain.workload]]\n{work}\n{copies}",
            [32, 256, 512][pick(3) as usize],
            [0, 0, 50][pick(3) as usize],
        );
        if pick(2) == 0 {
            boost.push(format!(
                "{{ domain = \"d{d}\", limit_ms = {}, ratio_pct = {} }}",
                [1, 100, 1000][pick(3) as usize],
                [1, 30, 100][pick(3) as usize]
            ));
        }
    }
    if !boost.is_empty() {
        host += &format!("boost_domains = [{}]\n", boost.join(", "));
    }
    let hotplug = if pcpus > 1 {
        "[[event]]\nat_ms = 180\naction = \"cpu_offline\"\ncpu = 1\n\
         [[event]]\nat_ms = 220\naction = \"cpu_online\"\ncpu = 1\n"
    } else {
        ""
    };
    format!(
        "name = \"r\"\n[run]\nvary = false\nduration_ms = {}\nwarmup_ms = 0\nseed = {seed}\n\
         [machine]\npcpus = {pcpus}\n[host]\nscheduler = \"credit\"\n{host}{doms}\
         [[event]]\nat_ms = 100\naction = \"sched_domain\"\ndomain = \"d0\"\nweight = 128\n\
         [[event]]\nat_ms = 150\naction = \"pause\"\ndomain = \"d1\"\n\
         [[event]]\nat_ms = 250\naction = \"unpause\"\ndomain = \"d1\"\n{hotplug}",
        300 + pick(700)
    )
}

/// Every random combination of the options runs to its end with the engine's invariants checked
/// after every event. VMSCHED_FUZZ_CASES raises the count.
#[test]
fn random_option_combinations_run_with_the_invariants_checked() {
    let cases: u64 = std::env::var("VMSCHED_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    for seed in 0..cases {
        let src = random_scenario(seed);
        let s = vmsched_sched::load("r.toml", &src, &[])
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}"));
        let run = std::panic::catch_unwind(|| {
            let mut sim = vmsched_sched::build(&s);
            sim.set_debug_checks(true);
            sim.run();
            let r = sim.results();
            (r.duration_ns, r.events)
        });
        match run {
            Ok((d, events)) => {
                assert_eq!(d, s.run.duration_ms * MS, "seed {seed}");
                assert!(events > 100, "seed {seed}: {events} events");
            }
            Err(_) => panic!("seed {seed} panicked; scenario:\n{src}"),
        }
    }
}
