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
        // From its start, which the seed moves by up to run.start_spread_us (10 ms).
        assert!(v.running_ns >= 989 * MS, "{n} ran {} ns", v.running_ns);
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

/// Every host run on pCPU 0 of a traced run of `src`: (vCPU name, start, end).
fn host_runs(name: &str, src: &str, ov: &[(&str, &str)]) -> (Vec<(String, u64, u64)>, u64) {
    let ov: Vec<(String, String)> = ov
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let s = vmsched_sched::load(name, src, &ov).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.enable_trace(10_000_000);
    sim.run();
    let tr = sim.take_trace().unwrap();
    assert_eq!(tr.dropped, 0);
    let host = tr.meta.cpus[0].level;
    let mut out = Vec::new();
    let mut cur: Option<(usize, u64)> = None;
    for r in &tr.records {
        if let vmsched_core::trace::Record::Switch { t, level, next, .. } = *r {
            if level != host {
                continue;
            }
            if let Some((e, since)) = cur.take() {
                out.push((tr.meta.ents[e].name.clone(), since, t));
            }
            cur = next.map(|n| (n.idx(), t));
        }
    }
    if let Some((e, since)) = cur {
        out.push((tr.meta.ents[e].name.clone(), since, tr.end));
    }
    (out, tr.end)
}

/// `arinc653_partitions`: the pCPU follows its table. With exact timers every frame is 12 ms
/// from the first: the hogs (dom0, p1) run exactly their slots, to the nanosecond, every frame;
/// p2 runs only inside its slot; the spare 2 ms are idle. With the default timer entry latency
/// `e` every switch comes `e` after the slot boundary it is due at, and each frame starts when
/// the last one's end is handled (upstream's drift: frames of 12 ms + `e`); the slot
/// boundaries inside a frame stay anchored at its start, so slot i runs [start + offset + e,
/// start + offset + length + e), the first slot from the frame's start.
#[test]
fn arinc653_follows_its_table_to_the_nanosecond() {
    let src = shipped("arinc653_partitions.toml");
    // (slot owner, offset, length) in ns; major frame 12 ms.
    let slots = [
        ("dom0.v0", 0, 2 * MS),
        ("p1.v0", 2 * MS, 5 * MS),
        ("p2.v0", 7 * MS, 3 * MS),
    ];
    for (entry, drift) in [("0", 0u64), ("1000", 1000)] {
        // Fixed phases and exact timers (run.vary = false): the table to the nanosecond.
        let ov = [
            ("host.timer_entry_ns", entry),
            ("host.timer_slop_ns", "0"),
            ("run.vary", "false"),
        ];
        let (runs, end) = host_runs("arinc653_partitions.toml", &src, &ov);
        let first = runs.iter().find(|r| r.0 == "dom0.v0").expect("dom0 runs").1;
        let frame = 12 * MS + drift;
        let frames = (end - first) / frame;
        assert!(frames >= 90, "{frames} frames");
        // Where each run lies: inside its owner's slot of some frame.
        for (name, s, e) in &runs {
            let k = (s - first) / frame;
            let at = s - first - k * frame;
            let (_, off, len) = slots
                .iter()
                .find(|(n, ..)| n == name)
                .unwrap_or_else(|| panic!("{name} has no slot"));
            let lead = if *off > 0 { drift } else { 0 };
            assert!(
                at >= off + lead && at + (e - s) <= off + len + drift,
                "{name} ran [{s}, {e}) outside its slot (frame {k}, offset {at})"
            );
        }
        // The hogs run exactly their slots in every whole frame.
        for k in 0..frames {
            let base = first + k * frame;
            for (name, off, len) in &slots[..2] {
                let lead = if *off > 0 { drift } else { 0 };
                let want = (base + off + lead, base + off + len + drift);
                assert!(
                    runs.iter().any(|r| r.0 == *name && (r.1, r.2) == want),
                    "{name}: no run [{}, {}) in frame {k}",
                    want.0,
                    want.1
                );
            }
        }
        // p2 runs in its slots, at least once per frame for its 1 ms timer.
        let p2 = runs.iter().filter(|r| r.0 == "p2.v0").count() as u64;
        assert!(p2 >= frames, "p2 ran {p2} times in {frames} frames");
    }
}

/// `arinc653_partitions`: p2's cyclictest timers that fire outside p2's 3 ms slot wait for it:
/// the worst latency is the 9 ms the rest of the frame takes, and the hogs get exactly their
/// slots' share (2/12 and 5/12), nothing of the spare time.
#[test]
fn arinc653_partitions_scenario() {
    let r = run(
        "arinc653_partitions.toml",
        &shipped("arinc653_partitions.toml"),
    );
    let ct = r.workloads.iter().find(|w| w.name == "ct").unwrap();
    let max = ct.histograms[0].1.max_ns;
    assert!((8 * MS..=9 * MS + 100_000).contains(&max), "worst {max} ns");
    for (n, share) in [("dom0.v0", 2.0 / 12.0), ("p1.v0", 5.0 / 12.0)] {
        let s = host_vcpu(&r, n).cpu_share;
        assert!((s - share).abs() < 0.003, "{n}: {s}, table {share}");
    }
}

/// `xl sched-rtds -d rt -v all -p 2000 -b 1500 -e 0` at 1 s (a `sched_domain` event): from the
/// next period on the rt vCPU may get 1.5 ms of every 2 ms, and never more. (The reservations,
/// 0.75 + 4 × 0.3 = 1.95 of 2 pCPUs with u_max = 0.75, are above the global-EDF bound of
/// Goossens, Funk and Baruah, 2 − 0.75: some periods come up short, by about 0.1 ms on
/// average.) The three fields go together (as xl wants), are checked, and another host refuses
/// them.
#[test]
fn rtds_budget_change_on_the_timeline() {
    let src = shipped("rtds_reservation.toml")
        .replace("duration_ms = 2000", "duration_ms = 3000")
        .replace("warmup_ms = 200", "warmup_ms = 1100");
    let event = |fields: &str| {
        format!("{src}\n[[event]]\nat_ms = 1000\naction = \"sched_domain\"\ndomain = \"rt\"\n{fields}\n")
    };
    let r = run(
        "t.toml",
        &event("budget_us = 1500\nperiod_us = 2000\nextratime = false"),
    );
    let s = host_vcpu(&r, "rt.v0").cpu_share;
    assert!(
        (0.65..=0.752).contains(&s),
        "rt share after the change: {s}"
    );
    let err = |src: &str| vmsched_sched::load("t.toml", src, &[]).unwrap_err();
    let e = err(&event("budget_us = 1500\nperiod_us = 2000"));
    assert_eq!(e.field, "event.0.extratime", "{e}");
    let e = err(&event(
        "budget_us = 2500\nperiod_us = 2000\nextratime = true",
    ));
    assert_eq!(e.field, "event.0.budget_us", "{e}");
    let e = err(&event("weight = 512"));
    assert_eq!(e.field, "event.0.weight", "{e}");
    let credit2 = src
        .replace("scheduler = \"rtds\"", "scheduler = \"credit2\"")
        .replace("budget_us = 1000 ", "# ")
        .replace("period_us = 2000\n", "")
        .replace("extratime = false\n", "")
        .replace("budget_us = 3000", "# 3 ms");
    let credit2 = format!(
        "{credit2}\n[[event]]\nat_ms = 1000\naction = \"sched_domain\"\ndomain = \"rt\"\n\
         budget_us = 1500\nperiod_us = 2000\nextratime = false\n"
    );
    let e = err(&credit2);
    assert_eq!(e.field, "event.0.budget_us", "{e}");
}

/// `credit2_4_2_1_slices`: two hogs on one pCPU under Credit2 4.2.1 alternate in 2 ms slices
/// (its MAX_TIMER; each incoming vCPU sees nobody queued because of delayed insertion), where
/// 4.20.0 alternates every 10 ms; each run is deterministic.
#[test]
fn credit2_4_2_1_slices_scenario() {
    let src = shipped("credit2_4_2_1_slices.toml");
    for (version, slice_ms) in [("4.2.1", 2.0), ("4.20.0", 10.0)] {
        let set = [("host.version".to_string(), version.to_string())];
        let r = vmsched_sched::run("credit2_4_2_1_slices.toml", &src, &set)
            .unwrap_or_else(|e| panic!("{e}"));
        for n in ["a.v0", "b.v0"] {
            let v = host_vcpu(&r, n);
            assert!(
                (0.49..=0.51).contains(&v.cpu_share),
                "{version} {n}: {}",
                v.cpu_share
            );
            let wait_ms = v.wait_mean_ns / MS as f64;
            assert!(
                (slice_ms * 0.95..=slice_ms * 1.05).contains(&wait_ms),
                "{version} {n}: mean wait {wait_ms} ms, slice {slice_ms} ms"
            );
        }
        let again = vmsched_sched::run("credit2_4_2_1_slices.toml", &src, &set).unwrap();
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            serde_json::to_string(&again).unwrap()
        );
    }
}

/// `sedf_reservation`: the reserved domain gets its 5 ms of 20 ms and no more; the two
/// best-effort domains share the rest by extra weight, about 1:3.
#[test]
fn sedf_reservation_scenario() {
    let r = run("sedf_reservation.toml", &shipped("sedf_reservation.toml"));
    let rt = host_vcpu(&r, "rt.v0").cpu_share;
    assert!((0.249..=0.251).contains(&rt), "rt {rt}");
    let (b1, b2) = (
        host_vcpu(&r, "be1.v0").cpu_share,
        host_vcpu(&r, "be2.v0").cpu_share,
    );
    assert!((0.17..=0.20).contains(&b1), "be1 {b1}");
    assert!((0.53..=0.57).contains(&b2), "be2 {b2}");
}

/// `bvt_shares`: the hogs share the pCPU by the inverse of their mcu_advance (about 2:1), and
/// the waking domain preempts at once (cyclictest's worst latency far below the 5 ms context
/// switch allowance a waiting vCPU would otherwise wait).
#[test]
fn bvt_shares_scenario() {
    let r = run("bvt_shares.toml", &shipped("bvt_shares.toml"));
    let (f, s) = (
        host_vcpu(&r, "fast.v0").cpu_share,
        host_vcpu(&r, "slow.v0").cpu_share,
    );
    assert!((1.8..=2.2).contains(&(f / s)), "fast {f}, slow {s}");
    let ct = r.workloads.iter().find(|w| w.name == "ct").unwrap();
    let max = ct.histograms[0].1.max_ns;
    assert!(max < MS / 2, "ping's worst latency {max} ns");
}
