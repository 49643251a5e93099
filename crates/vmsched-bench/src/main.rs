//! `vmsched-bench`: throughput of the engine on fixed scenarios (a benchmark, not a test).
//!
//! ```text
//! cargo run --release -p vmsched-bench -- [seed000|large|all] [--seconds S]
//! ```
//! Prints events per second, simulated seconds per wall second and peak memory (VmHWM). Wall
//! times on shared machines are noisy: compare versions with instruction counts too
//! (`valgrind --tool=callgrind target/release/vmsched-bench seed000 --seconds 1`).

use std::time::Instant;

const SEED000: &str =
    include_str!("../../../python/vmsched/scenarios/seed000_context1_ratelimit.toml");

/// 64 pCPUs (2 sockets), 32 domains of 4 vCPUs: Context1 pairs, cyclictest, CPU loops and a
/// sleep/compute program, all on Credit2 and CFS.
fn large_scenario() -> String {
    let mut s = String::from(
        "name = \"bench_large\"\n[run]\nduration_ms = 1000\n[machine]\npcpus = 64\nsockets = 2\n\
         [host]\nscheduler = \"credit2\"\n",
    );
    for d in 0..32 {
        s += &format!(
            "[[domain]]\nname = \"d{d}\"\nvcpus = 4\n[domain.sched]\nscheduler = \"cfs\"\n"
        );
        s += match d % 4 {
            0 => {
                "[[domain.workload]]\nkind = \"context1\"\nname = \"ctx\"\naffinity = [0]\n\
                  [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"hog\"\ncopies = 2\n"
            }
            1 => {
                "[[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\nthreads = 4\n\
                  [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"hog\"\ncopies = 1\n"
            }
            2 => "[[domain.workload]]\nkind = \"cpu_loop\"\nname = \"hog\"\ncopies = 4\n",
            _ => {
                "[[domain.workload]]\nkind = \"program\"\nname = \"io\"\ncopies = 4\nsteps = [\n\
                  { op = \"compute\", exp_us = 300 },\n{ op = \"sleep\", exp_us = 700 },\n\
                  { op = \"loop\", to = 0 },\n]\n"
            }
        };
    }
    s
}

fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn bench(name: &str, src: &str, seconds: u64) {
    let ov = vec![("run.duration_ms".to_string(), (seconds * 1000).to_string())];
    let s = vmsched_sched::load(name, src, &ov).unwrap_or_else(|e| panic!("{e}"));
    let t0 = Instant::now();
    let mut sim = vmsched_sched::build(&s);
    let built = t0.elapsed();
    let t1 = Instant::now();
    sim.run();
    let wall = t1.elapsed().as_secs_f64();
    let ev = sim.events();
    println!(
        "{name:>8}: {seconds:>4} s simulated, {ev:>12} events in {wall:>7.3} s wall (build {:.3} s): \
         {:>6.2} M events/s, {:>8.1} simulated s per wall s, peak RSS {} KiB",
        built.as_secs_f64(),
        ev as f64 / wall / 1e6,
        seconds as f64 / wall,
        peak_rss_kib().map_or("?".into(), |v| v.to_string()),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args.first().map(String::as_str).unwrap_or("all");
    let seconds = args
        .iter()
        .position(|a| a == "--seconds")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    if matches!(which, "seed000" | "all") {
        bench("seed000", SEED000, seconds);
    }
    if matches!(which, "large" | "all") {
        bench("large", &large_scenario(), seconds);
    }
}
