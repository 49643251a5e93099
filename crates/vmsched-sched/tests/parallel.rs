//! Parallel jobs across domains (issue 17 item 7; workload/parallel.rs, sim/job.rs,
//! docs/parallel.md): barriers release only when every rank arrived, busy-polling ranks keep
//! their vCPUs from halting (ERRATA W6), spin-then-block blocks after its bound, messages
//! between domains cost more than within one, EP's runtime on an idle machine is its compute,
//! and a hog sharing a pCPU slows the job.

use vmsched_core::report::{Results, WorkloadResult};

#[allow(dead_code)]
#[path = "common/run.rs"]
mod common_run;
use common_run::ent;

fn run(src: &str, ov: &[(&str, &str)]) -> Results {
    common_run::run("parallel.toml", src, ov)
}

fn part<'a>(r: &'a Results, dom: &str, name: &str) -> &'a WorkloadResult {
    r.workloads
        .iter()
        .find(|w| w.name == name && w.level == dom)
        .unwrap_or_else(|| panic!("no workload {dom}/{name}"))
}

fn counter(w: &WorkloadResult, c: &str) -> u64 {
    w.counters
        .iter()
        .find(|(k, _)| k == c)
        .unwrap_or_else(|| panic!("no counter {c}"))
        .1
}

#[test]
fn shipped_scenario_runs_and_reports_the_job_runtime() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/nas_parallel.toml"
    ))
    .unwrap();
    let r = run(&src, &[]);
    // One row per domain of the placement, each with the job-wide figure.
    let parts: Vec<&WorkloadResult> = r.workloads.iter().filter(|w| w.name == "lu").collect();
    assert_eq!(parts.len(), 4);
    let t = parts[0].figure.value;
    assert!(parts
        .iter()
        .all(|w| w.figure.value.to_bits() == t.to_bits()));
    assert_eq!(counter(parts[0], "ranks_done"), 16);
    // Each rank computes 3 iterations of LU class A's 120 ms (480 s serial / 16 ranks / 250
    // iterations) within ± 2 %; 16 ranks share 8 pCPUs.
    assert!(t > 2.0 * 3.0 * 0.120 * 0.98, "LU ran {t} s");
    // The ranks' messages between domains went through dom0's netback.
    assert!(counter(parts[0], "net_msgs") > 0);
    assert!(ent(&r, "dom0.v0").running_ns > 0);
}

/// A host of `pcpus` pCPUs under Credit2 with dom0 (the driver domain, pinned to pCPU 0), then
/// `doms`: (name, vCPUs, pCPUs its vCPUs are pinned to, one per vCPU), then a parallel job
/// declared in dom0 with `job` (TOML lines) and `extra` (more domains).
fn src(pcpus: u32, doms: &[(&str, u32, &[u32])], job: &str, extra: &str) -> String {
    let mut s = format!(
        "[run]\nvary = false\nduration_ms = 400\nseed = 3\n[machine]\npcpus = {pcpus}\nkick_ns = 1000\n\
         [host]\nscheduler = \"credit2\"\n\
         [[domain]]\nname = \"dom0\"\nvcpus = 1\ndriver = true\npcpus = [0]\n\
         [domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"parallel\"\nname = \"job\"\n{job}\n"
    );
    for (name, vcpus, pins) in doms {
        let pins: Vec<String> = pins.iter().map(|p| format!("[{p}]")).collect();
        s += &format!(
            "[[domain]]\nname = \"{name}\"\nvcpus = {vcpus}\nvcpu_pcpus = [{}]\n\
             [domain.sched]\nscheduler = \"cfs\"\n",
            pins.join(", ")
        );
    }
    s + extra
}

fn placement(doms: &[(&str, u32)]) -> String {
    let p: Vec<String> = doms
        .iter()
        .map(|(d, n)| format!("{{ domain = \"{d}\", ranks = {n} }}"))
        .collect();
    format!("placement = [{}]", p.join(", "))
}

/// A CPU hog domain of one vCPU pinned to `pcpu`.
fn hog(name: &str, pcpu: u32) -> String {
    format!(
        "[[domain]]\nname = \"{name}\"\nvcpus = 1\npcpus = [{pcpu}]\n\
         [domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"{name}\"\n"
    )
}

fn runtime(r: &Results) -> f64 {
    let w = r
        .workloads
        .iter()
        .find(|w| w.kind == vmsched_core::workload::WorkloadKind::Parallel)
        .expect("a part of the job");
    assert_eq!(w.figure.name, "runtime");
    w.figure.value
}

const MS: u64 = 1_000_000;

/// Two ranks, each alone in its domain on its own pCPU; rank 1 shares its pCPU with a hog, so
/// it arrives at the end of its compute phase about twice as late as rank 0.
fn two_ranks(exchange: &str, wait: &str) -> Results {
    let job = format!(
        "{}\ncompute_us = 20000\niterations = 1\nspread = 0.0\nexchange = \"{exchange}\"\n\
         wait = \"{wait}\"\nspin_us = 500",
        placement(&[("a", 1), ("b", 1)])
    );
    run(
        &src(4, &[("a", 1, &[1]), ("b", 1, &[2])], &job, &hog("hog", 2)),
        &[],
    )
}

#[test]
fn a_barrier_releases_only_when_every_rank_has_arrived() {
    // Without a barrier after the compute, rank 0 (domain a) is done long before rank 1.
    let free = two_ranks("none", "poll");
    let (end_a, end_b) = (
        counter(part(&free, "a", "job"), "part_end_ns"),
        counter(part(&free, "b", "job"), "part_end_ns"),
    );
    assert!(
        end_a + 10 * MS < end_b,
        "the hog slows rank 1: {end_a} vs {end_b}"
    );
    // With one, rank 0 cannot leave before rank 1 reached it (its message to rank 0 is sent
    // on arrival, and takes the path through dom0).
    let bar = two_ranks("barrier", "poll");
    let (a, b) = (
        counter(part(&bar, "a", "job"), "part_end_ns"),
        counter(part(&bar, "b", "job"), "part_end_ns"),
    );
    let arrived_b = end_b - 100_000;
    assert!(
        a >= arrived_b,
        "rank 0 left at {a}, rank 1 arrived ≈ {arrived_b}"
    );
    assert!(b >= arrived_b);
    assert_eq!(counter(part(&bar, "a", "job"), "ranks_done"), 2);
    assert!((runtime(&bar) * 1e9) as u64 >= arrived_b);
}

#[test]
fn a_polling_rank_keeps_its_vcpu_busy_while_it_waits() {
    let r = two_ranks("barrier", "poll");
    let end = counter(part(&r, "a", "job"), "part_end_ns");
    let dur = 400 * MS;
    // ERRATA W6: a.v0 never halts while its rank runs (it does once the job is over; and for
    // the 1 µs kick at t = 0, when the rank's creation wakes the halted vCPU).
    let v = ent(&r, "a.v0");
    assert!(
        v.blocked_ns <= dur - end + 1_000,
        "a.v0 halted {} ns, more than after the job's end ({} ns)",
        v.blocked_ns,
        dur - end
    );
    // Its rank computed 20 ms and spun the rest: it executed nearly all of its lifetime.
    let t = ent(&r, "job.r0");
    assert!(t.executed_ns > end - 2 * MS, "{} of {end}", t.executed_ns);
    assert!(t.executed_ns > 30 * MS, "it waited for rank 1 busy");
}

#[test]
fn spin_then_block_blocks_after_the_bound() {
    let r = two_ranks("barrier", "spin_block");
    let end = counter(part(&r, "a", "job"), "part_end_ns");
    let t = ent(&r, "job.r0");
    // 20 ms of compute, 0.5 ms of spinning, a few µs of messages: then it slept.
    assert!(
        t.executed_ns >= 20 * MS + 500_000 && t.executed_ns < 20 * MS + 800_000,
        "executed {}",
        t.executed_ns
    );
    // Its vCPU halted while the rank slept, before the job's end.
    let v = ent(&r, "a.v0");
    assert!(
        v.blocked_ns > (400 * MS - end) + 5 * MS,
        "a.v0 halted {} ns",
        v.blocked_ns
    );
    // The rank still waited for rank 1.
    let b = counter(part(&r, "b", "job"), "part_end_ns");
    let free = two_ranks("none", "poll");
    let arrived_b = counter(part(&free, "b", "job"), "part_end_ns") - 100_000;
    assert!(end >= arrived_b && b >= arrived_b);
}

/// A ping-pong of `iters` rounds between two ranks, in one domain of two vCPUs or in two
/// domains of one, on an idle host.
fn ping_pong(same: bool, iters: u32) -> f64 {
    let job = |p: String| {
        format!(
            "{p}\ncompute_us = 10\niterations = {iters}\nspread = 0.0\nexchange = \"ring\"\n\
             bytes = 1024"
        )
    };
    let r = if same {
        run(
            &src(4, &[("a", 2, &[1, 2])], &job(placement(&[("a", 2)])), ""),
            &[],
        )
    } else {
        run(
            &src(
                4,
                &[("a", 1, &[1]), ("b", 1, &[2])],
                &job(placement(&[("a", 1), ("b", 1)])),
                "",
            ),
            &[],
        )
    };
    runtime(&r)
}

#[test]
fn messages_between_domains_cost_more_than_within_one() {
    let (iters, same, cross) = (200, ping_pong(true, 200), ping_pong(false, 200));
    // Within a domain: the compute and a shared-memory copy per round.
    assert!(same > 0.0 && same < f64::from(iters) * 20e-6, "{same}");
    // Across: each round's message takes the sender's send (5 µs + the copy), netback's work
    // in dom0 (tx 3 µs + copy 3 µs by default + the copy) and the receiver's (5 µs + the copy),
    // with dom0 woken from halt (the kick).
    let per_msg = (5.0 + 1.0 + 3.0 + 3.0 + 1.0 + 5.0 + 1.0) * 1e-6;
    assert!(cross > f64::from(iters) * per_msg, "{cross}");
    assert!(cross > 2.0 * same, "cross {cross} vs same {same}");
}

fn ep(extra: &str) -> Results {
    let job = format!(
        "kernel = \"ep\"\n{}\niterations = 10\ncompute_us = 10000",
        placement(&[("a", 2), ("b", 2)])
    );
    run(
        &src(8, &[("a", 2, &[1, 2]), ("b", 2, &[3, 4])], &job, extra),
        &[],
    )
}

#[test]
fn ep_on_an_idle_machine_takes_its_iterations_times_its_compute() {
    let r = ep("");
    let t = runtime(&r);
    // 10 × 10 ms, each drawn within ± 2 %; the start barrier and the final all-reduces are
    // a few messages of tens of µs.
    assert!((0.098..0.103).contains(&t), "EP ran {t} s");
}

#[test]
fn the_job_slows_when_a_hog_shares_a_pcpu_with_a_rank() {
    let idle = runtime(&ep(""));
    let shared = runtime(&ep(&hog("hog", 3)));
    // The rank on pCPU 3 gets about half of it; everybody waits for it at the end.
    assert!(shared > 1.5 * idle, "idle {idle} s, shared {shared} s");
}

#[test]
fn the_same_seed_gives_the_same_runtime() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/nas_parallel.toml"
    ))
    .unwrap();
    let a = runtime(&run(&src, &[]));
    let b = runtime(&run(&src, &[]));
    assert_eq!(a.to_bits(), b.to_bits());
    let c = runtime(&run(&src, &[("run.seed", "2")]));
    assert_ne!(a.to_bits(), c.to_bits(), "the spread is seeded");
}

#[test]
fn a_job_is_timed_from_its_own_start_whatever_the_warm_up() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/nas_parallel.toml"
    ))
    .unwrap();
    // The job starts at 10 ms; a warm-up ending mid-job resets the other metrics, not its own.
    let plain = run(&src, &[]);
    let warm = run(&src, &[("run.warmup_ms", "300")]);
    assert_eq!(runtime(&plain).to_bits(), runtime(&warm).to_bits());
    let w = part(&warm, "d1", "lu");
    assert_eq!(counter(w, "ranks_started"), 16);
    assert_eq!(w.histograms[0].1.count, 3, "rank 0's three iterations");
}
