//! The cost of switching a pCPU to another vCPU (`machine.ctxsw_cost_ns`, the switch itself,
//! plus `machine.vcpu_refill_ns`, an assumed cache refill): the vCPU switched in is running but
//! executes nothing for the cost; resuming the vCPU the pCPU last ran costs nothing; the loss of
//! two hogs sharing a pCPU is the cost times their switches.

use vmsched_core::report::{EntityResult, Results};

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;

fn run_src(src: &str, ov: &[(&str, &str)]) -> Results {
    run::run("test.toml", src, ov)
}

fn of_kind<'a>(r: &'a Results, kind: &str) -> Vec<&'a EntityResult> {
    r.entities.iter().filter(|e| e.kind == kind).collect()
}

const MS: u64 = 1_000_000;

/// One guest with one vCPU alone on one pCPU, running `workload`.
fn alone(workload: &str) -> String {
    format!(
        "[run]\nvary = false\nduration_ms = 100\nwarmup_ms = 0\n[machine]\npcpus = 1\n[host]\n\
         scheduler = \"pinned\"\n[[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\n\
         scheduler = \"cfs\"\n[[domain.workload]]\n{workload}\n"
    )
}

#[test]
fn a_vcpu_switched_in_runs_without_progress_for_the_cost() {
    let src = alone("kind = \"cpu_loop\"\nname = \"hog\"");
    for (sw, refill) in [(0u64, 0u64), (7_000, 0), (0, 40_000), (3_000, 25_000)] {
        let r = run_src(
            &src,
            &[
                ("machine.ctxsw_cost_ns", &sw.to_string()),
                ("machine.vcpu_refill_ns", &refill.to_string()),
            ],
        );
        let v = of_kind(&r, "vcpu");
        let t = of_kind(&r, "task");
        assert_eq!((v.len(), t.len()), (1, 1));
        // The one switch-in, at the start: the vCPU is running all along (no steal) ...
        assert_eq!(v[0].runs, 1);
        assert_eq!(v[0].running_ns, 100 * MS);
        assert_eq!(v[0].runnable_ns, 0);
        // ... but its task executes only once the switch is over.
        assert_eq!(
            t[0].executed_ns,
            100 * MS - sw - refill,
            "cost {sw} + {refill} ns"
        );
    }
}

#[test]
fn resuming_the_vcpu_the_pcpu_last_ran_costs_nothing() {
    // The vCPU blocks every 100 µs of work for 1 ms: the pCPU idles, then resumes the same vCPU.
    let src = alone(
        "kind = \"program\"\nname = \"s\"\ncounters = [\"n\"]\nsteps = [{ op = \"compute\", us = 100 }, { op = \"sleep\", ms = 1, slack_ns = 0 }, { op = \"count\", counter = \"n\" }, { op = \"loop\", to = 0 }]",
    );
    let cost = 30_000u64;
    let free = run_src(&src, &[]);
    let paid = run_src(&src, &[("machine.vcpu_refill_ns", &cost.to_string())]);
    let v = of_kind(&paid, "vcpu")[0];
    assert!(v.runs > 50, "the vCPU is resumed often: {} runs", v.runs);
    let (e0, e1) = (
        of_kind(&free, "task")[0].executed_ns,
        of_kind(&paid, "task")[0].executed_ns,
    );
    // Only the first switch-in pays (the whole run shifts by it: at most one 100 µs compute
    // more is cut at the end); a cost on every resume would lose runs × 30 µs, over 1.5 ms.
    assert!(
        e1 <= e0 && e0 - e1 <= cost + 100_000,
        "executed {e0} ns free, {e1} ns with the cost"
    );
}

/// Two single-vCPU guests, each a hog, sharing one pCPU under `host` (the `[host]` body).
fn two_hogs(host: &str) -> String {
    let mut s = format!(
        "[run]\nvary = false\nduration_ms = 300\nwarmup_ms = 0\nseed = 3\n[machine]\npcpus = 1\n[host]\n{host}\n"
    );
    for d in ["a", "b"] {
        s += &format!(
            "[[domain]]\nname = \"{d}\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
             [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"hog_{d}\"\n"
        );
    }
    s
}

/// The pCPU time the hogs lost to switches, and the number of switches.
fn loss(r: &Results, dur: u64) -> (u64, u64) {
    let exec: u64 = of_kind(r, "task").iter().map(|t| t.executed_ns).sum();
    let run: u64 = of_kind(r, "vcpu").iter().map(|v| v.running_ns).sum();
    // The guests see their vCPUs running the whole time: the switch is not steal.
    assert_eq!(run, dur);
    let switches: u64 = of_kind(r, "vcpu").iter().map(|v| v.runs).sum();
    (dur - exec, switches)
}

#[test]
fn two_hogs_on_one_pcpu_lose_the_cost_per_switch() {
    let dur = 300 * MS;
    let cost = 20_000u64;
    let mut per_host = Vec::new();
    for host in [
        "scheduler = \"credit2\"\nversion = \"4.2.1\"",
        "scheduler = \"credit2\"",
        "scheduler = \"credit\"",
    ] {
        let src = two_hogs(host);
        let (lost0, _) = loss(&run_src(&src, &[]), dur);
        assert_eq!(lost0, 0, "{host}: no cost, no loss");
        let (lost, n) = loss(
            &run_src(&src, &[("machine.vcpu_refill_ns", &cost.to_string())]),
            dur,
        );
        // Every switch-in puts the other vCPU on the pCPU and costs the full 20 µs; the last
        // one may be cut by the end of the run.
        assert!(
            lost <= n * cost && lost > (n - 1) * cost,
            "{host}: lost {lost} ns over {n} switches"
        );
        per_host.push((lost, n));
    }
    // Credit2 (4.2.1 without a ratelimit above all) switches far more often than Credit1's
    // 30 ms slices, and loses that much more.
    let (c2_421, c2, c1) = (per_host[0], per_host[1], per_host[2]);
    assert!(c2_421.1 > 5 * c1.1, "switches {c2_421:?} vs {c1:?}");
    assert!(c2_421.0 > 5 * c1.0 && c2.0 > c1.0);
}

#[test]
fn the_switch_cost_is_deterministic_and_zero_changes_nothing() {
    let src = two_hogs("scheduler = \"credit2\"\nversion = \"4.2.1\"");
    let text = |ov: &[(&str, &str)]| debug_text(&run_src(&src, ov));
    let a = text(&[
        ("machine.ctxsw_cost_ns", "5000"),
        ("machine.vcpu_refill_ns", "30000"),
    ]);
    let b = text(&[
        ("machine.ctxsw_cost_ns", "5000"),
        ("machine.vcpu_refill_ns", "30000"),
    ]);
    assert_eq!(a, b);
    let zero = text(&[
        ("machine.ctxsw_cost_ns", "0"),
        ("machine.vcpu_refill_ns", "0"),
    ]);
    assert_eq!(zero, text(&[]));
    assert_ne!(a, zero);
}

fn debug_text(r: &Results) -> String {
    format!("{r:?}")
}

#[test]
fn a_negative_or_huge_refill_is_an_error_naming_the_field() {
    let src = alone("kind = \"cpu_loop\"\nname = \"hog\"");
    for v in ["-1", "9223372036854775807"] {
        let ov = [("machine.vcpu_refill_ns".to_string(), v.to_string())];
        let e = vmsched_sched::load("test.toml", &src, &ov).expect_err("refused");
        assert!(e.to_string().contains("machine.vcpu_refill_ns"), "{v}: {e}");
    }
}
