//! `vmsched-bench`: throughput of the engine on fixed scenarios (a benchmark, not a test).
//!
//! ```text
//! cargo run --release -p vmsched-bench -- [NAME|GROUP ...] [--seconds S] [--isolate]
//!     [--format text|md] [--json FILE] [--compare OLD.json] [--list]
//! ```
//! NAME is a scenario of `scenarios.rs` (`--list` prints them): the size family
//! `<ctx1|cyclic|mixed>-p<8|64|256|1024|4096>` and `vm1000-p256`; the scheduler family
//! `eevdf-p64`, `seed003like`, `kvm64`, `deadline-p64`, `bfs-p64`, `nas`, `rtds`; and the
//! former names `seed000`, `seed001`, `seed002`, `large`, `x1024`, `x4096`. GROUP is `all`
//! (seed000 + large, the default, as before), `scale` (x1024 + x4096), `sizes`, `extra`,
//! `set` (sizes + extra: what `bench/baseline.json` records) or `small` (set without the
//! 1,024- and 4,096-pCPU rows).
//!
//! Per scenario: events and same-instant actions, load and build time apart from the run,
//! events per second, simulated seconds per wall second, peak memory (VmHWM: with `--isolate`
//! the binary re-executes itself once per scenario, so the figure is the scenario's own), the
//! mean number of live timers (the event queue's length over the second half of the run), the
//! bare-heap floor for that many timers run in the same process right after (`floor.rs`) and the
//! ratio to it, instructions per event where the machine has hardware counters (`perf stat`,
//! with `--isolate`; "n/a" elsewhere: measure them with callgrind, docs/performance.md) and a
//! digest of the results (same digest, same schedule). Wall times on shared machines are noisy:
//! compare versions with instruction counts too. docs/performance.md records the numbers.

mod floor;
mod report;
mod scenarios;

use std::process::Command;
use std::time::Instant;

use report::{Report, Row};
use scenarios::Bench;

/// This thread's time on a CPU so far, in seconds (`CLOCK_THREAD_CPUTIME_ID`): on a shared
/// machine it leaves out the time spent waiting for a CPU, which wall time counts. None where
/// the clock is missing (it reads zero).
fn cpu_time_s() -> Option<f64> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    let s = t.tv_sec as f64 + t.tv_nsec as f64 / 1e9;
    (s > 0.0).then_some(s)
}

/// A stopwatch reading both clocks.
struct Watch {
    wall: Instant,
    cpu: Option<f64>,
}

impl Watch {
    fn start() -> Self {
        Watch {
            wall: Instant::now(),
            cpu: cpu_time_s(),
        }
    }

    /// (wall seconds, CPU seconds: the wall ones where the CPU clock is missing).
    fn read(&self) -> (f64, f64) {
        let wall = self.wall.elapsed().as_secs_f64();
        let cpu = match (self.cpu, cpu_time_s()) {
            (Some(a), Some(b)) => b - a,
            _ => wall,
        };
        (wall, cpu)
    }
}

fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Samples of the queue length taken during a run (the run is cut into this many equal
/// pieces; cutting does not change the schedule, a test checks it).
const SAMPLES: u64 = 20;
/// The floor runs this many events at most (and at least `FLOOR_MIN`): its rate is steady
/// well before.
const FLOOR_MAX: u64 = 5_000_000;
const FLOOR_MIN: u64 = 1_000_000;

/// A run's schedule-level outcome: what the determinism test compares.
pub struct Outcome {
    pub events: u64,
    pub actions: u64,
    pub digest: u64,
    /// Mean queue length over the second half of the samples.
    pub live_timers: f64,
}

/// Loads `b` for `seconds` simulated seconds. A scenario whose own warm-up is not shorter than
/// that runs without one (the warm-up only decides what the results count).
fn load(b: &Bench, seconds: f64) -> vmsched_sched::Scenario {
    let ms = (seconds * 1000.0).round().max(1.0) as u64;
    let mut ov = vec![("run.duration_ms".to_string(), ms.to_string())];
    ov.extend(b.overrides.iter().cloned());
    let go = |ov: &[(String, String)]| vmsched_sched::load(&b.name, &b.src, ov);
    match go(&ov) {
        Ok(s) => s,
        Err(e) if e.to_string().contains("run.warmup_ms") => {
            ov.push(("run.warmup_ms".to_string(), "0".to_string()));
            go(&ov).unwrap_or_else(|e| panic!("{}: {e}", b.name))
        }
        Err(e) => panic!("{}: {e}", b.name),
    }
}

/// Runs `sim` to its end in `SAMPLES` pieces, returning the mean queue length over the second
/// half of the pieces.
#[inline(never)]
fn run_sampled(sim: &mut vmsched_core::sim::Simulation) -> f64 {
    let (start, end) = (sim.now(), sim.end());
    let mut live = 0usize;
    for k in 1..=SAMPLES {
        sim.run_until(start + (end - start) * k / SAMPLES);
        if k > SAMPLES / 2 {
            live += sim.queued();
        }
    }
    sim.run();
    live as f64 / (SAMPLES - SAMPLES / 2) as f64
}

fn digest(sim: &vmsched_core::sim::Simulation) -> u64 {
    let json = serde_json::to_vec(&sim.results()).expect("results serialise");
    report::fnv1a(&json)
}

/// Runs `b` once and reports its outcome (for the determinism test; no timing).
pub fn outcome(b: &Bench, seconds: f64, sampled: bool) -> Outcome {
    let s = load(b, seconds);
    let mut sim = vmsched_sched::build(&s);
    let live_timers = if sampled {
        run_sampled(&mut sim)
    } else {
        sim.run();
        0.0
    };
    Outcome {
        events: sim.events(),
        actions: sim.actions(),
        digest: digest(&sim),
        live_timers,
    }
}

/// Measures `b` in this process.
fn measure(b: &Bench, seconds: f64) -> Row {
    let w = Watch::start();
    let s = load(b, seconds);
    let (_, load_s) = w.read();
    let w = Watch::start();
    let mut sim = vmsched_sched::build(&s);
    let (_, build_s) = w.read();
    let w = Watch::start();
    let live_timers = run_sampled(&mut sim);
    let (run_wall_s, run_s) = w.read();
    let peak = peak_rss_kib();
    let (events, actions) = (sim.events(), sim.actions());
    let simulated_s = sim.end() as f64 / 1e9;
    let d = digest(&sim);
    drop(sim);
    let floor_events = events.clamp(FLOOR_MIN, FLOOR_MAX);
    let w = Watch::start();
    floor::run(live_timers.round() as usize, floor_events);
    let (_, floor_s) = w.read();
    let per = |n: f64, t: f64| n / t.max(1e-9);
    let events_per_s = per(events as f64, run_s);
    let floor_events_per_s = per(floor_events as f64, floor_s);
    Row {
        name: b.name.clone(),
        pcpus: s.machine.pcpus,
        simulated_s,
        events,
        actions,
        load_s,
        build_s,
        run_s,
        run_wall_s,
        events_per_s,
        events_per_wall_s: per(events as f64, run_wall_s),
        sim_s_per_wall_s: per(simulated_s, run_wall_s),
        sim_s_per_cpu_s: per(simulated_s, run_s),
        peak_rss_kib: peak,
        live_timers,
        floor_events,
        floor_events_per_s,
        x_floor: floor_events_per_s / events_per_s.max(1e-9),
        instructions_per_event: None,
        instructions_source: None,
        digest: format!("{d:016x}"),
    }
}

const CHILD_TAG: &str = "vmsched-bench-row ";

/// Where instructions per event come from.
#[derive(Clone, Copy, PartialEq)]
enum Counter {
    None,
    /// `perf stat -e instructions:u` around the child: the whole process.
    Perf,
    /// A second child under callgrind collecting only inside `run_sampled`: the run alone.
    Callgrind,
}

/// Runs this binary as the child measuring `b`, under `wrap` (a command and its arguments)
/// if given, and returns its row.
fn child(b: &Bench, seconds: f64, wrap: &[String]) -> Row {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let secs = seconds.to_string();
    let args = [b.name.as_str(), "--seconds", secs.as_str(), "--child"];
    let out = match wrap.split_first() {
        Some((cmd, rest)) => Command::new(cmd).args(rest).arg(&exe).args(args).output(),
        None => Command::new(&exe).args(args).output(),
    }
    .unwrap_or_else(|e| panic!("{}: cannot start the child: {e}", b.name));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(json) = stdout.lines().find_map(|l| l.strip_prefix(CHILD_TAG)) else {
        panic!(
            "{}: the child gave no row ({}):\n{}",
            b.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    };
    serde_json::from_str(json).expect("the child's row")
}

/// Measures `b` in a fresh process of this binary, with instructions per event from `counter`.
fn measure_isolated(b: &Bench, seconds: f64, counter: Counter) -> Row {
    let tmp = |what: &str| {
        std::env::temp_dir()
            .join(format!(
                "vmsched-bench-{what}-{}-{}",
                std::process::id(),
                b.name
            ))
            .to_string_lossy()
            .into_owned()
    };
    match counter {
        Counter::None => child(b, seconds, &[]),
        Counter::Perf => {
            let path = tmp("perf");
            let wrap: Vec<String> = ["perf", "stat", "-x", ",", "-e", "instructions:u", "-o"]
                .iter()
                .map(|s| s.to_string())
                .chain([path.clone(), "--".to_string()])
                .collect();
            let mut row = child(b, seconds, &wrap);
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let _ = std::fs::remove_file(&path);
            row.instructions_per_event =
                report::parse_perf_instructions(&text).map(|n| n as f64 / row.events.max(1) as f64);
            row.instructions_source = Some("perf stat, whole process".to_string());
            row
        }
        Counter::Callgrind => {
            let mut row = child(b, seconds, &[]);
            let path = tmp("callgrind");
            let wrap: Vec<String> = [
                "valgrind",
                "--tool=callgrind",
                "--collect-atstart=no",
                "--toggle-collect=vmsched_bench::run_sampled",
            ]
            .iter()
            .map(|s| s.to_string())
            .chain([format!("--callgrind-out-file={path}")])
            .collect();
            let under = child(b, seconds, &wrap);
            assert_eq!(
                (under.events, &under.digest),
                (row.events, &row.digest),
                "{}: the run under callgrind is not the native run",
                b.name
            );
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let _ = std::fs::remove_file(&path);
            row.instructions_per_event =
                report::parse_callgrind_total(&text).map(|n| n as f64 / row.events.max(1) as f64);
            row.instructions_source = Some("callgrind, the run only".to_string());
            row
        }
    }
}

fn line(r: &Row) -> String {
    format!(
        "{:>14}: {:>5} pCPUs, {:>6} s simulated, {:>11} events + {:>10} actions in {:.3} s CPU \
         ({:.3} s wall; load {:.3} s, build {:.3} s): {:.2} M events/s ({:.2} M per wall s), \
         {:.3} simulated s per wall s, peak {} KiB, {:.0} live timers, floor {:.1} M events/s \
         ({:.1}x), digest {}",
        r.name,
        r.pcpus,
        r.simulated_s,
        r.events,
        r.actions,
        r.run_s,
        r.run_wall_s,
        r.load_s,
        r.build_s,
        r.events_per_s / 1e6,
        r.events_per_wall_s / 1e6,
        r.sim_s_per_wall_s,
        r.peak_rss_kib.map_or("?".to_string(), |v| v.to_string()),
        r.live_timers,
        r.floor_events_per_s / 1e6,
        r.x_floor,
        r.digest,
    )
}

const DEFINITION: &str = "\
An event is one queue entry dispatched (Simulation::events): a timer, IPI, tick, compute end, \
sleep end or task start popped from the event queue and handled. The same-instant follow-up \
actions it triggers (reschedule deliveries, ticks and timers delivered to a vCPU that just \
came back, task steps, idle checks; Simulation::actions) are counted apart and are not events. \
Times are the thread's CPU time (/proc/thread-self/schedstat; wall time where that is \
missing): events/s is per CPU second, simulated s per wall s is per wall second. The floor is a bare (time, seq) binary heap doing one pop and one push per event with the \
scenario's mean number of live timers; x floor = floor events/s / scenario events/s. \
Instructions per event: hardware counters where perf stat counts them (with --isolate), else \
callgrind's total Ir / events, e.g. \
`valgrind --tool=callgrind target/release/vmsched-bench seed000 --seconds 1` \
(the count includes scenario load and build; compare versions at the same --seconds).";

const USAGE: &str = "usage: vmsched-bench [NAME|GROUP ...] [--seconds S] [--isolate] \
[--format text|md] [--json FILE] [--compare OLD.json] [--callgrind] [--list]\n\
GROUP: all (seed000 + large, the default), scale (x1024 + x4096), sizes, extra, set, small; \
--list prints the names. S may be fractional; without it each scenario runs its default length.";

fn usage(msg: &str) -> ! {
    eprintln!("vmsched-bench: {msg}\n{USAGE}");
    std::process::exit(2);
}

struct Args {
    names: Vec<String>,
    seconds: Option<f64>,
    isolate: bool,
    child: bool,
    md: bool,
    json: Option<String>,
    compare: Option<String>,
    list: bool,
    callgrind: bool,
}

fn parse_args() -> Args {
    let mut a = Args {
        names: Vec::new(),
        seconds: None,
        isolate: false,
        child: false,
        md: false,
        json: None,
        compare: None,
        list: false,
        callgrind: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| {
            it.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        match arg.as_str() {
            "--seconds" => {
                let v = value("--seconds");
                match v.parse::<f64>() {
                    Ok(s) if s > 0.0 && s.is_finite() => a.seconds = Some(s),
                    _ => usage(&format!("--seconds: not a positive number: {v}")),
                }
            }
            "--isolate" => a.isolate = true,
            "--child" => a.child = true,
            "--format" => match value("--format").as_str() {
                "md" => a.md = true,
                "text" => a.md = false,
                f => usage(&format!("--format: unknown format {f} (text or md)")),
            },
            "--json" => a.json = Some(value("--json")),
            "--compare" => a.compare = Some(value("--compare")),
            "--list" => a.list = true,
            "--callgrind" => a.callgrind = true,
            f if f.starts_with("--") => usage(&format!("unknown option {f}")),
            n => match scenarios::expand(n) {
                Some(v) => a.names.extend(v),
                None => usage(&format!("unknown scenario or group {n}")),
            },
        }
    }
    if a.names.is_empty() {
        a.names = scenarios::expand("all").expect("all");
    }
    a
}

fn main() {
    let args = parse_args();
    if args.list {
        for n in scenarios::all_names() {
            let b = scenarios::get(&n).expect("listed");
            println!("{n:<14} {:>5} s  {}", b.default_seconds, b.what);
        }
        return;
    }
    if args.child {
        let b = scenarios::get(&args.names[0]).expect("expanded");
        let row = measure(&b, args.seconds.unwrap_or(b.default_seconds));
        println!(
            "{CHILD_TAG}{}",
            serde_json::to_string(&row).expect("row serialises")
        );
        return;
    }
    let old: Option<Report> = args.compare.as_ref().map(|p| {
        let text = std::fs::read_to_string(p)
            .unwrap_or_else(|e| usage(&format!("--compare: cannot read {p}: {e}")));
        serde_json::from_str(&text)
            .unwrap_or_else(|e| usage(&format!("--compare: {p} is not a benchmark report: {e}")))
    });
    let machine = report::machine();
    let counter = if args.callgrind {
        Counter::Callgrind
    } else if args.isolate && machine.hw_counters {
        Counter::Perf
    } else {
        Counter::None
    };
    let mut rep = Report {
        clock: if cpu_time_s().is_some() {
            "cpu".to_string()
        } else {
            "wall".to_string()
        },
        commit: report::commit(),
        machine,
        isolated: args.isolate || args.callgrind,
        seconds: args.seconds,
        counter: match counter {
            Counter::None => "none",
            Counter::Perf => "perf",
            Counter::Callgrind => "callgrind",
        }
        .to_string(),
        rows: Vec::new(),
    };
    println!("{DEFINITION}");
    println!("{}", report::describe(&rep));
    for n in &args.names {
        let b = scenarios::get(n).expect("expanded");
        let secs = args.seconds.unwrap_or(b.default_seconds);
        let row = if args.isolate || args.callgrind {
            measure_isolated(&b, secs, counter)
        } else {
            measure(&b, secs)
        };
        println!("{}", line(&row));
        rep.rows.push(row);
    }
    let (ev, act, wall) = rep.rows.iter().fold((0, 0, 0.0), |(e, a, w), r| {
        (e + r.events, a + r.actions, w + r.run_s)
    });
    println!(
        "   total: {ev} events, {act} actions ({:.2} actions per event), {wall:.3} s CPU\n",
        act as f64 / ev.max(1) as f64
    );
    print!("{}", report::table(&rep, args.md));
    if let Some(p) = &args.json {
        let text = serde_json::to_string_pretty(&rep).expect("report serialises");
        std::fs::write(p, text + "\n").unwrap_or_else(|e| usage(&format!("--json {p}: {e}")));
    }
    if let Some(old) = &old {
        println!();
        print!("{}", report::compare(&rep, old));
    }
}

#[cfg(test)]
mod tests;
