//! xenmon's figures (docs/xenmon.md) on the full simulator: per vCPU the runstate shares add up
//! to the window, the execution count is the number of switch-ins the trace shows, the windows
//! add up to the run, the worst wait is split by how it began (a hog preempted by a BOOSTed
//! vCPU waits after preemptions only; a vCPU that wakes BOOST waits after wakes only, briefly
//! unless a BOOSTed burst holds the CPU), and the same seed gives the same rows.

use vmsched_core::report::{Results, XenmonRow};
use vmsched_core::trace::Record;

const MS: u64 = 1_000_000;

fn dom(name: &str, workload: &str) -> String {
    format!(
        "[[domain]]\nname = \"{name}\"\nvcpus = 1\nvcpu_pcpus = [[0]]\n[domain.sched]\n\
         scheduler = \"cfs\"\n[[domain.workload]]\n{workload}\n"
    )
}

const HOG: &str = "kind = \"cpu_loop\"\nname = \"hog\"";
const TICKER: &str =
    "kind = \"cyclictest\"\nname = \"ct\"\ninterval_us = 10000\nmain_thread = false";

/// One pCPU under Credit1 4.20: a ticker that wakes every 10 ms and two hogs.
fn scenario(warmup_ms: u64, window_ms: u64) -> String {
    format!(
        "name = \"xm\"\n[run]\nduration_ms = 3000\nwarmup_ms = {warmup_ms}\nseed = 1\n\
         xenmon_window_ms = {window_ms}\nvary = false\n[machine]\npcpus = 1\n[host]\nscheduler = \"credit\"\n\
         version = \"4.20\"\n{}{}{}",
        dom("io", TICKER),
        dom("hog1", HOG),
        dom("hog2", HOG)
    )
}

fn run(src: &str) -> Results {
    vmsched_sched::run("xm.toml", src, &[]).unwrap_or_else(|e| panic!("{e}"))
}

fn rows<'a>(r: &'a Results, window: Option<u64>, kind: &str) -> Vec<&'a XenmonRow> {
    r.xenmon
        .iter()
        .filter(|x| x.window == window && x.kind == kind)
        .collect()
}

fn vcpu<'a>(r: &'a Results, window: Option<u64>, domain: &str) -> &'a XenmonRow {
    rows(r, window, "vcpu")
        .into_iter()
        .find(|x| x.domain == domain)
        .unwrap_or_else(|| panic!("no vCPU row of {domain}"))
}

#[test]
fn runstate_shares_add_up_to_the_window_for_every_vcpu_and_window() {
    let r = run(&scenario(300, 1000));
    let mut scopes = vec![None];
    scopes.extend((0..3).map(Some));
    for w in scopes {
        let vs = rows(&r, w, "vcpu");
        assert_eq!(vs.len(), 3, "{w:?}");
        for x in vs {
            let sum = x.gotten_ns + x.waited_ns + x.blocked_ns + x.offline_ns;
            assert_eq!(sum, x.passed_ns, "{w:?} {}", x.name);
            assert_eq!(x.offline_ns, 0);
            let pct = x.pct(x.gotten_ns) + x.pct(x.waited_ns) + x.pct(x.blocked_ns);
            assert!((pct - 100.0).abs() < 1e-9, "{w:?} {}: {pct}", x.name);
        }
    }
    // Windows of 1 s from the warm-up's end at 300 ms; the run's end closes a 700 ms one.
    let starts: Vec<(u64, u64)> = rows(&r, None, "domain")
        .iter()
        .map(|x| (x.start_ns, x.passed_ns))
        .collect();
    assert_eq!(starts, vec![(300 * MS, 2700 * MS); 3]);
    let w2 = vcpu(&r, Some(2), "hog1");
    assert_eq!((w2.start_ns, w2.passed_ns), (2300 * MS, 700 * MS));
    assert!(rows(&r, Some(3), "vcpu").is_empty());
    // One pCPU, always busy: the gotten shares of a window add up to one CPU.
    for w in 0..3 {
        let total: f64 = rows(&r, Some(w), "domain")
            .iter()
            .map(|x| x.pct(x.gotten_ns))
            .sum();
        assert!((total - 100.0).abs() < 1e-6, "window {w}: {total}");
    }
}

#[test]
fn windows_add_up_to_the_run_and_domains_to_their_vcpus() {
    let r = run(&scenario(300, 1000));
    for d in ["io", "hog1", "hog2"] {
        let run = vcpu(&r, None, d);
        let ws: Vec<&XenmonRow> = (0..3).map(|w| vcpu(&r, Some(w), d)).collect();
        assert_eq!(ws.iter().map(|x| x.gotten_ns).sum::<u64>(), run.gotten_ns);
        assert_eq!(ws.iter().map(|x| x.waited_ns).sum::<u64>(), run.waited_ns);
        assert_eq!(ws.iter().map(|x| x.blocked_ns).sum::<u64>(), run.blocked_ns);
        assert_eq!(ws.iter().map(|x| x.exec_count).sum::<u64>(), run.exec_count);
        assert_eq!(
            ws.iter().map(|x| x.allocated_ns).sum::<u64>(),
            run.allocated_ns
        );
        let worst = |f: fn(&XenmonRow) -> u64| ws.iter().map(|x| f(x)).max().unwrap();
        assert_eq!(worst(|x| x.wait_max_wake_ns), run.wait_max_wake_ns);
        assert_eq!(worst(|x| x.wait_max_preempt_ns), run.wait_max_preempt_ns);
        // A one-vCPU domain's row is its vCPU's.
        let dom = rows(&r, None, "domain")
            .into_iter()
            .find(|x| x.name == d)
            .unwrap();
        assert_eq!((dom.vcpus, dom.gotten_ns), (1, run.gotten_ns));
    }
}

#[test]
fn the_execution_count_is_the_number_of_switch_ins_in_the_trace() {
    let src = scenario(0, 1000);
    let r = run(&src);
    let s = vmsched_sched::load("xm.toml", &src, &[]).unwrap();
    let mut sim = vmsched_sched::build(&s);
    sim.enable_trace(10_000_000);
    sim.run();
    let tr = sim.take_trace().unwrap();
    assert_eq!(tr.dropped, 0);
    for (g, e) in r.entities.iter().enumerate() {
        if e.kind != "vcpu" {
            continue;
        }
        let ins = tr
            .records
            .iter()
            .filter(|x| matches!(x, Record::Switch { next: Some(n), .. } if n.0 as usize == g))
            .count() as u64;
        let x = vcpu(&r, None, e.name.split('.').next().unwrap());
        assert_eq!(x.exec_count, ins, "{}", e.name);
        assert!(ins > 50, "{}: {ins} switch-ins", e.name);
    }
}

#[test]
fn worst_waits_are_split_by_wake_and_preemption() {
    let r = run(&scenario(300, 1000));
    let io = vcpu(&r, None, "io");
    // The ticker wakes UNDER, is BOOSTed and preempts a hog at once; it runs microseconds and
    // is never preempted itself.
    // (The preemption is in the instant of the wake: its waits are 0.)
    assert!(io.wait_max_wake_ns < 100_000, "{io:?}");
    assert!(io.exec_count > 250, "{io:?}");
    assert_eq!(io.wait_max_preempt_ns, 0);
    for h in ["hog1", "hog2"] {
        let x = vcpu(&r, None, h);
        // A hog never blocks: every wait began with a preemption (by the ticker or by the
        // other hog's slice, 30 ms less what the ticker took).
        assert_eq!(x.wait_max_wake_ns, 0, "{x:?}");
        assert!(x.wait_max_preempt_ns > 20 * MS, "{x:?}");
        assert!(x.allocated_per_ex() > 0.0);
    }
}

/// The shipped `credit1_boost_interactive`: the interactive vCPU, BOOSTed at each wake, waits
/// after wakes only, and for milliseconds when a BOOSTed burst holds its pCPU (ERRATA X8).
#[test]
fn a_wake_behind_a_boosted_burst_waits_long_after_the_wake() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/vmsched/scenarios/credit1_boost_interactive.toml"
    );
    let src = std::fs::read_to_string(path).unwrap();
    // Fixed phases (run.vary = false): a run where the wakes land behind the bursts.
    let r = vmsched_sched::run(path, &src, &[("run.vary".into(), "false".into())]).unwrap();
    let io = vcpu(&r, None, "interactive");
    assert!(io.wait_max_wake_ns > MS, "{io:?}");
    assert_eq!(io.wait_max_preempt_ns, 0, "{io:?}");
    // "batch" has two vCPUs: its row sums theirs (in % of one CPU, so past 100) and keeps the
    // worse of their worst waits.
    let vs: Vec<&XenmonRow> = rows(&r, None, "vcpu")
        .into_iter()
        .filter(|x| x.domain == "batch")
        .collect();
    let d = rows(&r, None, "domain")
        .into_iter()
        .find(|x| x.name == "batch")
        .unwrap();
    assert_eq!((vs.len(), d.vcpus), (2, 2));
    assert_eq!(d.gotten_ns, vs[0].gotten_ns + vs[1].gotten_ns);
    assert_eq!(d.exec_count, vs[0].exec_count + vs[1].exec_count);
    assert!(d.pct(d.gotten_ns) > 100.0, "{d:?}");
    let worst = vs[0].wait_max_preempt_ns.max(vs[1].wait_max_preempt_ns);
    assert_eq!(d.wait_max_preempt_ns, worst);
}

#[test]
fn the_same_seed_gives_the_same_rows_and_windows_can_be_off() {
    let a = run(&scenario(300, 1000));
    let b = run(&scenario(300, 1000));
    assert_eq!(a.xenmon, b.xenmon);
    let off = run(&scenario(300, 0));
    assert!(off.xenmon.iter().all(|x| x.window.is_none()));
    // The windows do not change the run.
    let run_rows = |r: &Results| -> Vec<XenmonRow> {
        r.xenmon
            .iter()
            .filter(|x| x.window.is_none())
            .cloned()
            .collect()
    };
    assert_eq!(run_rows(&off), run_rows(&a));
}

fn budget_src(window_ms: u64, vcpus: u32, duration_ms: u64) -> String {
    format!(
        "name = \"b\"\n[run]\nduration_ms = {duration_ms}\nwarmup_ms = 500\n\
         xenmon_window_ms = {window_ms}\nvary = false\n[machine]\npcpus = 1\n[host]\nscheduler = \"credit2\"\n\
         [[domain]]\nname = \"d\"\nvcpus = {vcpus}\n[domain.sched]\nscheduler = \"cfs\"\n"
    )
}

#[test]
fn the_budget_counts_xenmon_rows_per_vcpu_and_window() {
    use vmsched_core::budget::{Estimate, XENMON_ROW_BYTES};
    let part = |window: u64| {
        let s = vmsched_sched::load("b.toml", &budget_src(window, 4, 100_000), &[]).unwrap();
        Estimate::of(&s, None)
            .parts
            .into_iter()
            .find(|p| p.field == "run.xenmon_window_ms")
            .unwrap()
    };
    // 99.5 s in 1 s windows: 100 windows (the last one half), and the run's rows.
    assert_eq!(part(1000).bytes, 4 * 101 * XENMON_ROW_BYTES);
    assert_eq!(part(0).bytes, 4 * XENMON_ROW_BYTES);
    assert!(part(1).what.contains("99500 windows"), "{}", part(1).what);
    // A million 1 ms windows of 1,000 vCPUs: refused before the run, naming the field.
    let e = vmsched_sched::run("b.toml", &budget_src(1, 1000, 1_000_000), &[]).unwrap_err();
    assert_eq!(e.field, "run.xenmon_window_ms", "{e}");
}

#[test]
fn at_most_max_windows_are_kept_and_the_log_says_where_they_stopped() {
    use vmsched_core::sim::XENMON_MAX_WINDOWS;
    // 1 ms windows over 150 s: only the first XENMON_MAX_WINDOWS (100 s) are measured.
    let src = budget_src(1, 1, 150_500);
    let s = vmsched_sched::load("b.toml", &src, &[]).unwrap();
    let mut sim = vmsched_sched::build(&s);
    sim.run();
    let r = sim.results();
    let kept = r
        .xenmon
        .iter()
        .filter(|x| x.kind == "vcpu" && x.window.is_some())
        .count() as u64;
    assert_eq!(kept, XENMON_MAX_WINDOWS);
    let last = r.xenmon.iter().filter_map(|x| x.window).max();
    assert_eq!(last, Some(XENMON_MAX_WINDOWS - 1));
    assert!(
        sim.log()
            .iter()
            .any(|l| l.starts_with("xenmon: 100000 windows kept")),
        "{:?}",
        sim.log()
    );
}

#[test]
fn a_window_beyond_the_time_range_is_refused_naming_the_field() {
    let src = scenario(300, 1000).replace(
        "xenmon_window_ms = 1000",
        "xenmon_window_ms = 18446744073709551615",
    );
    let e = vmsched_sched::load("xm.toml", &src, &[]).unwrap_err();
    assert_eq!(e.field, "run.xenmon_window_ms", "{e}");
    assert_eq!(e.line, Some(6), "{e}");
}

#[test]
fn offline_time_is_its_own_share_and_the_windows_see_it_where_it_was() {
    let src = scenario(300, 1000)
        + "[[event]]\nat_ms = 1000\naction = \"pause\"\ndomain = \"hog1\"\n\
           [[event]]\nat_ms = 1200\naction = \"unpause\"\ndomain = \"hog1\"\n";
    let r = run(&src);
    let h = vcpu(&r, None, "hog1");
    assert_eq!(h.offline_ns, 200 * MS, "{h:?}");
    // Window 0 is 300..1300 ms: the whole pause; windows 1 and 2 have none.
    assert_eq!(vcpu(&r, Some(0), "hog1").offline_ns, 200 * MS);
    assert_eq!(vcpu(&r, Some(1), "hog1").offline_ns, 0);
    for w in [None, Some(0), Some(1), Some(2)] {
        let x = vcpu(&r, w, "hog1");
        let sum = x.gotten_ns + x.waited_ns + x.blocked_ns + x.offline_ns;
        assert_eq!(sum, x.passed_ns, "{w:?}");
        assert!((x.pct(x.offline_ns) + x.pct(sum - x.offline_ns) - 100.0).abs() < 1e-9);
    }
}
