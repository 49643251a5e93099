//! The xentrace export on whole scenarios: the file parses back as xentrace's layout (per-pCPU
//! windows of records), every switch of the host appears with its pCPU and domain/vCPU ids in
//! Xen's order (INFPREV, INFNEXT, SWITCH, the two runstate changes), and each scheduler writes
//! its own class records. (Xen's own readers, xentrace_format and xenalyze, are run on the file
//! by tests/test_xentrace.py.)

use vmsched_core::trace::xentrace::{self as xt, XentraceOpts};
use vmsched_core::trace::{Record, Trace};

fn scenario(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../python/vmsched/scenarios")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

fn run(name: &str, ms: u64) -> Trace {
    let ov = [
        ("run.duration_ms", ms.to_string()),
        ("run.warmup_ms", "0".into()),
    ]
    .map(|(k, v)| (k.to_string(), v));
    let s = vmsched_sched::load(name, &scenario(name), &ov).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.enable_trace(10_000_000);
    sim.run();
    sim.take_trace().unwrap()
}

/// One record read back: pCPU (from its window), event id, cycles, data.
#[derive(Debug, Clone)]
struct Rec {
    pcpu: u32,
    event: u32,
    cycles: Option<u64>,
    data: Vec<u32>,
}

/// Reads a xentrace file: windows of (TRC_TRACE_CPU_CHANGE pCPU, bytes) and that many bytes of
/// records of that pCPU.
fn parse(b: &[u8]) -> Vec<Rec> {
    let word = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        assert_eq!(
            word(i),
            0x2001_f003,
            "a window starts with TRC_TRACE_CPU_CHANGE"
        );
        let (pcpu, len) = (word(i + 4), word(i + 8) as usize);
        i += 12;
        let end = i + len;
        assert!(end <= b.len());
        while i < end {
            let h = word(i);
            i += 4;
            let n = ((h >> 28) & 7) as usize;
            let cycles = (h >> 31 == 1).then(|| {
                let c = u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
                i += 8;
                c
            });
            let data = (0..n).map(|k| word(i + 4 * k)).collect();
            i += 4 * n;
            out.push(Rec {
                pcpu,
                event: h & 0x0fff_ffff,
                cycles,
                data,
            });
        }
        assert_eq!(i, end, "a window holds whole records");
    }
    out
}

fn export(tr: &Trace) -> (xt::XentraceSummary, Vec<Rec>) {
    let mut b = Vec::new();
    let s = xt::write(tr, &XentraceOpts::default(), &mut b).unwrap();
    (s, parse(&b))
}

/// Domain and vCPU ids of a host entity as the export numbers them.
fn dv(tr: &Trace, sum: &xt::XentraceSummary, e: vmsched_core::GEnt) -> (u32, u32) {
    let c = tr.meta.ents[e.idx()].vcpu_of.unwrap();
    let dom = &tr.meta.levels[tr.meta.cpus[c.idx()].level.idx()].name;
    let d = sum.domains.iter().find(|(n, _)| n == dom).unwrap().1;
    (d, tr.meta.cpus[c.idx()].local)
}

#[test]
fn every_host_switch_is_written_on_its_pcpu_in_xens_order() {
    for (name, ms) in [
        ("seed000_context1_ratelimit.toml", 200),
        ("credit1_boost_interactive.toml", 1500),
        // RTDS and null write class records too; ARINC653 has none upstream.
        ("rtds_reservation.toml", 1000),
        ("null_static.toml", 1500),
        ("arinc653_partitions.toml", 1000),
    ] {
        let tr = run(name, ms);
        let (sum, recs) = export(&tr);
        assert_eq!(sum.records as usize, recs.len());
        let host = tr.meta.cpus[0].level;
        let cyc = |t: u64| xt::cycles(t, sum.cpu_hz);
        // Per pCPU, the switch records (INFPREV, INFNEXT, SWITCH) in file order.
        let npcpu = 1 + recs.iter().map(|r| r.pcpu).max().unwrap() as usize;
        let mut per: Vec<Vec<&Rec>> = vec![Vec::new(); npcpu];
        for r in &recs {
            assert!(
                r.cycles.is_some(),
                "every scheduler record has a cycle count"
            );
            per[r.pcpu as usize].push(r);
        }
        for p in &per {
            assert!(
                p.windows(2).all(|w| w[0].cycles <= w[1].cycles),
                "{name}: time order"
            );
        }
        let mut at = vec![0usize; npcpu];
        let mut switches = 0;
        for r in &tr.records {
            let Record::Switch {
                t,
                level,
                cpu,
                prev,
                next,
                slice,
            } = *r
            else {
                continue;
            };
            if level != host {
                continue;
            }
            switches += 1;
            let p = tr.meta.cpus[cpu.idx()].local as usize;
            let ids = |e: Option<vmsched_core::GEnt>| match e {
                Some(e) => dv(&tr, &sum, e),
                None => (0x7fff, p as u32),
            };
            let (pd, pv) = ids(prev);
            let (nd, nv) = ids(next);
            // Find this switch's SWITCH record on its pCPU, after the previous one.
            let list = &per[p];
            let k = (at[p]..list.len())
                .find(|&k| list[k].event == xt::TRC_SCHED_SWITCH)
                .unwrap_or_else(|| panic!("{name}: switch at {t} on pCPU {p} not written"));
            at[p] = k + 1;
            let c = Some(cyc(t));
            let (ip, inx, sw) = (list[k - 2], list[k - 1], list[k]);
            assert_eq!(sw.data, vec![pd, pv, nd, nv], "{name}: SWITCH at {t}");
            assert_eq!(sw.cycles, c);
            assert_eq!(ip.event, xt::TRC_SCHED_SWITCH_INFPREV);
            assert_eq!(&ip.data[..2], &[pd, pv]);
            assert_eq!(inx.event, xt::TRC_SCHED_SWITCH_INFNEXT);
            assert_eq!(&inx.data[..2], &[nd, nv]);
            assert_eq!(inx.data[3], slice.map_or(u32::MAX, |s| s as u32));
            assert_eq!((ip.cycles, inx.cycles), (c, c));
            // Then prev's runstate change (running → something) and next's (→ running).
            let rs = |r: &Rec| (r.event & 0xffff_f00f == 0x0002_1001).then_some(r.event);
            let (a, b) = (list[k + 1], list[k + 2]);
            assert_eq!(
                rs(a).map(|e| (e >> 8) & 0xf),
                Some(0),
                "{name}: prev leaves running at {t}: {:x?}",
                &list[k - 2..k + 3]
            );
            assert_eq!(a.data, vec![pd << 16 | pv]);
            assert_eq!(rs(b).map(|e| (e >> 4) & 0xf), Some(0), "{name}: next runs");
            assert_eq!(b.data, vec![nd << 16 | nv]);
        }
        assert!(switches >= 10, "{name}: {switches} switches");
        // A wake: WAKE, then at once on the same pCPU the vCPU's change out of blocked.
        let mut wakes = 0;
        for list in &per {
            for (k, w) in list.iter().enumerate() {
                if w.event != xt::TRC_SCHED_WAKE {
                    continue;
                }
                wakes += 1;
                let rs = list[k + 1];
                assert_eq!(
                    rs.event & 0xffff_ff0f,
                    0x0002_1201,
                    "{name}: blocked → x after WAKE"
                );
                assert_eq!(rs.data, vec![w.data[0] << 16 | w.data[1]]);
                assert_eq!(rs.cycles, w.cycles);
            }
        }
        assert!(wakes > 0, "{name}: no wake");
        assert_eq!(
            recs.iter()
                .filter(|r| r.event == xt::TRC_SCHED_SWITCH)
                .count(),
            switches,
            "{name}: one SWITCH per switch of the host"
        );
    }
}

/// The class records of the host's scheduler: every policy event the trace holds is written
/// once under its scheduler's id, with ids that name a host vCPU or pCPU.
#[test]
fn each_scheduler_writes_its_own_class_records() {
    use vmsched_core::trace::SchedEvent;
    for (name, ms, sched_id, must) in [
        // Credit2: credit burn, tickle.
        ("seed000_context1_ratelimit.toml", 200, 1, &[3u32, 6][..]),
        // Credit1: tickle, boost.
        ("credit1_boost_interactive.toml", 1500, 0, &[6, 7][..]),
        // RTDS: tickle, runq pick, budget burn, replenish, schedule.
        ("rtds_reservation.toml", 1000, 4, &[1, 2, 3, 4, 6][..]),
        // null: picked cpu, assign, schedule.
        ("null_static.toml", 1500, 5, &[1, 2, 5][..]),
    ] {
        let tr = run(name, ms);
        let (sum, recs) = export(&tr);
        let host = tr.meta.cpus[0].level;
        let class = xt::class_of(tr.meta.levels[host.idx()].sched).unwrap();
        assert_eq!(class.sched_id(), sched_id);
        let base = xt::TRC_SCHED_CLASS | sched_id << 9;
        let written: Vec<&Rec> = recs.iter().filter(|r| r.event & !0x1ff == base).collect();
        for n in must {
            assert!(
                written.iter().any(|r| r.event == base | n),
                "{name}: no class record {n}"
            );
        }
        // One record per policy event Xen traces, in the same order.
        let events: Vec<SchedEvent<_, _>> = tr
            .records
            .iter()
            .filter_map(|r| match *r {
                Record::Sched { level, ev, .. } if level == host => Some(ev),
                _ => None,
            })
            .collect();
        let npcpu = 1 + recs.iter().map(|r| r.pcpu).max().unwrap();
        let doms: Vec<u32> = sum.domains.iter().map(|d| d.1).collect();
        let traced = events
            .iter()
            .filter(|e| {
                // Xen core records (written as generic ones), not the class's.
                !matches!(
                    e,
                    SchedEvent::Sleep { .. }
                        | SchedEvent::CoreWake { .. }
                        | SchedEvent::Yield { .. }
                ) && !matches!(
                    (sched_id, e),
                    (
                        0,
                        SchedEvent::CreditBurn { .. } | SchedEvent::CreditReset { .. }
                    ) | (1, SchedEvent::Boost { .. } | SchedEvent::Unboost { .. })
                )
            })
            .count();
        assert_eq!(written.len(), traced, "{name}");
        for r in &written {
            match (sched_id, r.event & 0x1ff) {
                // RTDS: a tickle names a pCPU; pick, burn, replenish a vCPU (dv); schedule
                // the pCPU whose buffer holds it, with the idle flag in the top bits.
                (4, 1) => assert!(r.data[0] < npcpu, "{name}: tickle of {}", r.data[0]),
                (4, 2..=4) => assert!(doms.contains(&(r.data[0] >> 16)), "{name}: {r:?}"),
                (4, 6) => assert_eq!(r.data[0] & 0xffff, r.pcpu, "{name}: schedule on its pCPU"),
                // null: pick, assign, deassign: dv, pCPU; schedule: the pCPU (high half)
                // whose buffer holds it, and its vCPU or -1.
                (5, 1..=3) => {
                    assert!(doms.contains(&(r.data[0] >> 16)), "{name}: {r:?}");
                    assert!(r.data[1] < npcpu, "{name}: {r:?}");
                }
                (5, 5) => {
                    assert_eq!(r.data[0] >> 16, r.pcpu, "{name}: schedule on its pCPU");
                    assert!(r.data[1] == u32::MAX || doms.contains(&(r.data[1] >> 16)));
                }
                (4 | 5, _) => {}
                (_, 6) => assert!(r.data[0] < npcpu, "{name}: tickle of pCPU {}", r.data[0]),
                // Credit1 boost/unboost: domain, vCPU; Credit2 burn/reset/ratelimit: dv.
                (0, 7 | 8) => assert!(doms.contains(&r.data[0])),
                (_, 3 | 7 | 22) => assert!(doms.contains(&(r.data[0] >> 16))),
                _ => {}
            }
        }
    }
}

/// A machine with cpupools (cpupools.toml: Credit2 Pool-0 on pCPUs 0–1, an RTDS pool "rt" on
/// 2–3; pCPU 3 moves to Pool-0 at 500 ms, domain "ui" to "rt" at 1000 ms): every class record
/// carries the id of the scheduler of the pool it belongs to at its time: a pCPU's (its
/// SCHEDULE, a tickle of it) the pCPU's pool, a vCPU's (dv) its domain's pool.
#[test]
fn pooled_machines_write_each_pools_class_records() {
    let tr = run("cpupools.toml", 1500);
    let (sum, recs) = export(&tr);
    let ids: Vec<(&str, &str, Option<u32>)> = sum
        .pools
        .iter()
        .map(|(n, s, i)| (n.as_str(), *s, *i))
        .collect();
    assert_eq!(
        ids,
        vec![("Pool-0", "credit2", Some(1)), ("rt", "rtds", Some(4))]
    );
    let dom = |n: &str| sum.domains.iter().find(|d| d.0 == n).unwrap().1;
    let (batch, ui, ctl) = (dom("batch"), dom("ui"), dom("ctl"));
    let ms = |c: u64| (c - 1) as f64 / sum.cpu_hz as f64 * 1e3;
    // Xen's scheduler id of the pool a pCPU, a domain is in at `t` ms (None: at the instant
    // of a move, either).
    let cpu_sched = |p: u32, t: f64| match (p, t) {
        (3, 500.0) => None,
        (0 | 1, _) => Some(1),
        (3, t) if t > 500.0 => Some(1),
        _ => Some(4),
    };
    let dom_sched = |d: u32, t: f64| {
        if d == batch || (d == ui && t < 1000.0) {
            Some(1)
        } else if d == ui && t == 1000.0 {
            None
        } else {
            assert!(d == ctl || d == ui, "domain {d}");
            Some(4)
        }
    };
    let mut seen = std::collections::BTreeMap::new();
    for r in &recs {
        if r.event & 0xffff_f000 != xt::TRC_SCHED_CLASS {
            continue;
        }
        let (sid, n) = ((r.event >> 9) & 0xf, r.event & 0x1ff);
        let t = ms(r.cycles.unwrap());
        *seen.entry((sid, n, r.pcpu)).or_insert(0) += 1;
        let want = match (sid, n) {
            // Tickles name a pCPU; SCHEDULE is its pCPU's own.
            (1, 6) | (4, 1) => cpu_sched(r.data[0], t),
            (4, 6) => cpu_sched(r.data[0] & 0xffff, t),
            (1, 21) => cpu_sched(r.data[0] & 0xffff, t),
            // The rest name a vCPU (dv first).
            _ => dom_sched(r.data[0] >> 16, t),
        };
        if let Some(w) = want {
            assert_eq!(sid, w, "class record {:#x} at {t} ms: {r:?}", r.event);
        }
    }
    // Both schedulers write, and pCPU 3 changes hands: RTDS's records on it before 500 ms,
    // Credit2's after, and RTDS's SCHEDULE never after (an RTDS record may still be written
    // there: a wake of an "rt" vCPU run by pCPU 3's code, e.g. ui's timer after it moved).
    assert!(seen.keys().any(|k| k.0 == 1) && seen.keys().any(|k| k.0 == 4));
    let on3 = |sid: u32, n: Option<u32>, before: bool| {
        recs.iter().any(|r| {
            r.pcpu == 3
                && (r.event >> 9) & 0xf == sid
                && n.is_none_or(|n| r.event & 0x1ff == n)
                && r.event & 0xffff_f000 == xt::TRC_SCHED_CLASS
                && (ms(r.cycles.unwrap()) < 500.0) == before
        })
    };
    assert!(on3(4, None, true) && on3(1, None, false) && !on3(4, Some(6), false));
    assert!(on3(4, Some(6), true));
    // Every switch is still written on its pCPU (the generic records need no pool).
    let switches = tr
        .records
        .iter()
        .filter(|r| matches!(r, Record::Switch { level, .. } if *level == tr.meta.cpus[0].level))
        .count();
    let written = recs
        .iter()
        .filter(|r| r.event == xt::TRC_SCHED_SWITCH)
        .count();
    assert_eq!(switches, written);
}

/// Xen core records beyond the switches (lifecycle_boot_fork.toml, Credit2: "build" is
/// created at 200 ms and destroyed at 1300 ms, "web" paused at 700 ms and unpaused at 800):
/// `DOM_ADD`/`DOM_REM` with the domain, once each; a `SLEEP` per vCPU of the paused domain;
/// at the unpause a `WAKE` per vCPU, each followed at once on its pCPU by the vCPU's
/// runstate change if it has one; and Credit2's `SCHEDULE` first on its pCPU, with that pCPU.
#[test]
fn lifecycle_pause_and_schedule_records() {
    let tr = run("lifecycle_boot_fork.toml", 1500);
    let (sum, recs) = export(&tr);
    let dom = |n: &str| sum.domains.iter().find(|d| d.0 == n).unwrap().1;
    let ms = |r: &Rec| (r.cycles.unwrap() - 1) / (sum.cpu_hz / 1000);
    let of = |ev: u32| recs.iter().filter(move |r| r.event == ev);
    let add: Vec<_> = of(xt::TRC_SCHED_DOM_ADD)
        .map(|r| (ms(r), r.data.clone()))
        .collect();
    assert_eq!(add, vec![(200, vec![dom("build")])]);
    let rem: Vec<_> = of(xt::TRC_SCHED_DOM_REM)
        .map(|r| (ms(r), r.data.clone()))
        .collect();
    assert_eq!(rem, vec![(1300, vec![dom("build")])]);
    let web = dom("web");
    let nweb = tr
        .meta
        .ents
        .iter()
        .filter(|e| {
            e.vcpu_of
                .is_some_and(|c| tr.meta.levels[tr.meta.cpus[c.idx()].level.idx()].name == "web")
        })
        .count();
    // (Each on its vCPU's pCPU: sorted, as the file holds them per pCPU.)
    let mut sleeps: Vec<_> = of(xt::TRC_SCHED_SLEEP)
        .filter(|r| r.data[0] == web)
        .map(|r| (ms(r), r.data[1]))
        .collect();
    sleeps.sort();
    assert_eq!(
        sleeps,
        (0..nweb as u32).map(|v| (700, v)).collect::<Vec<_>>()
    );
    // Per pCPU in file order: each WAKE of web at 800 ms, then its runstate change if any.
    let mut woken = 0;
    for p in 0..4 {
        let list: Vec<&Rec> = recs.iter().filter(|r| r.pcpu == p).collect();
        for (k, w) in list.iter().enumerate() {
            let at = w.cycles == Some(xt::cycles(800_000_000, sum.cpu_hz));
            if w.event != xt::TRC_SCHED_WAKE || w.data[0] != web || !at {
                continue;
            }
            woken += 1;
            let next = list[k + 1];
            if next.event & 0xffff_f00f == 0x0002_1001 && next.data[0] == web << 16 | w.data[1] {
                // Out of offline (it was queued) or blocked (its wake-up waited for the
                // unpause), never out of running.
                assert!(matches!((next.event >> 8) & 0xf, 2 | 3), "{next:?}");
                assert_eq!(next.cycles, w.cycles);
            }
        }
    }
    assert_eq!(woken, nweb, "one WAKE per vCPU at the unpause");
    // Credit2's SCHEDULE (0x22215): on its own pCPU, before the switch it leads to.
    let sched = xt::class_event(1, 21);
    assert!(of(sched).count() > 10);
    for r in of(sched) {
        assert_eq!(r.data[0] & 0xffff, r.pcpu, "{r:?}");
        assert_eq!(r.data[1] & 0xff, 0, "no tasklet");
    }
}

/// Credit2 as in 4.2.1 (credit2_4_2_1_slices.toml) writes 4.2.1's layouts: ids from
/// `TRC_SCHED_CLASS` without the scheduler id (credit burn 0x22003, tickle 0x22006, credit
/// reset 0x22007), the domain in the low half of the vCPU word, three words for a burn (no
/// budget), a tickle without a cycle count; and none of 4.20's records.
#[test]
fn credit2_4_2_1_writes_its_own_layouts() {
    let tr = run("credit2_4_2_1_slices.toml", 500);
    let (sum, recs) = export(&tr);
    let doms: Vec<u32> = sum.domains.iter().map(|d| d.1).collect();
    let class: Vec<&Rec> = recs
        .iter()
        .filter(|r| r.event & 0xffff_f000 == xt::TRC_SCHED_CLASS)
        .collect();
    assert!(class
        .iter()
        .all(|r| matches!(r.event, 0x22003 | 0x22006 | 0x22007)));
    let burns: Vec<_> = class.iter().filter(|r| r.event == 0x22003).collect();
    assert!(!burns.is_empty());
    for r in &burns {
        assert_eq!(r.data.len(), 3);
        assert!(r.cycles.is_some());
        assert!(doms.contains(&(r.data[0] & 0xffff)), "{r:?}");
    }
    for r in class.iter().filter(|r| r.event == 0x22006) {
        assert_eq!(r.cycles, None, "4.2.1's tickle has no cycle count");
        assert!(r.data[0] < 256);
    }
    // The policy's events are all still written: one record per burn, tickle and reset.
    use vmsched_core::trace::SchedEvent;
    let host = tr.meta.cpus[0].level;
    let n = tr
        .records
        .iter()
        .filter(|r| {
            matches!(r, Record::Sched { level, ev: SchedEvent::CreditBurn { .. } | SchedEvent::Tickle { .. } | SchedEvent::CreditReset { .. }, .. } if *level == host)
        })
        .count();
    assert_eq!(class.len(), n);
}
