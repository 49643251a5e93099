//! The benchmark's results: one [`Row`] per scenario, the [`Report`] around them (machine,
//! git commit, how it was run), written as JSON (`--json FILE`), printed as a text or markdown
//! table (`--format md`), and compared row by row against an earlier JSON (`--compare`).
//! docs/performance.md says how the figures are measured; `bench/baseline.json` is one report.

use serde::{Deserialize, Serialize};

/// What one scenario measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub name: String,
    pub pcpus: u32,
    pub simulated_s: f64,
    pub events: u64,
    pub actions: u64,
    /// Parsing and validating the scenario (`vmsched_sched::load`).
    pub load_s: f64,
    /// Building the simulation from it (`vmsched_sched::build`).
    pub build_s: f64,
    /// The run itself (`Simulation::run`) in CPU time (the thread's time on a CPU: on a
    /// shared machine, wall time also counts the waits for one). Load, build and the floor are
    /// CPU times too.
    pub run_s: f64,
    /// The run in wall time.
    pub run_wall_s: f64,
    /// Events per CPU second of the run (per core: the engine is single-threaded).
    pub events_per_s: f64,
    pub events_per_wall_s: f64,
    pub sim_s_per_wall_s: f64,
    pub sim_s_per_cpu_s: f64,
    /// VmHWM after the run: the process's high-water mark (the scenario's own only when the
    /// report says `isolated`).
    pub peak_rss_kib: Option<u64>,
    /// Mean length of the event queue over the second half of the run (20 samples).
    pub live_timers: f64,
    /// The bare-heap floor with that many live timers.
    pub floor_events: u64,
    pub floor_events_per_s: f64,
    /// floor events/s ÷ scenario events/s: how many times slower than the queue alone.
    pub x_floor: f64,
    /// Instructions per event: from hardware counters (`perf stat`, the whole process: load
    /// and build included) or from callgrind (`--callgrind`: the run alone), or None.
    pub instructions_per_event: Option<f64>,
    /// Which of the two, when there is a figure.
    #[serde(default)]
    pub instructions_source: Option<String>,
    /// FNV-1a 64 of the results JSON: equal digests, same schedule.
    pub digest: String,
}

/// The machine a report was measured on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub cpu: String,
    pub logical_cpus: usize,
    pub mem_total_kib: Option<u64>,
    pub kernel: String,
    /// /proc/loadavg when the run started (a shared machine makes wall figures noisy).
    pub loadavg_at_start: String,
    /// Whether `perf stat -e instructions` counts here.
    pub hw_counters: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub commit: String,
    /// "cpu": load, build, run and floor times are the thread's CPU time; "wall" where the
    /// kernel gives no per-thread CPU time.
    pub clock: String,
    pub machine: Machine,
    /// One scenario per process (`--isolate`): peak RSS is each scenario's own.
    pub isolated: bool,
    /// `--seconds` if given (otherwise each scenario's default length).
    pub seconds: Option<f64>,
    /// Where instructions per event come from: "perf", "callgrind" or "none".
    #[serde(default)]
    pub counter: String,
    pub rows: Vec<Row>,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// FNV-1a, 64 bits.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Whether hardware instruction counts are available (`perf stat -e instructions:u true`
/// counts rather than answering `<not supported>`).
pub fn hw_counters() -> bool {
    let Ok(out) = std::process::Command::new("perf")
        .args(["stat", "-x", ",", "-e", "instructions:u", "true"])
        .output()
    else {
        return false;
    };
    parse_perf_instructions(&String::from_utf8_lossy(&out.stderr)).is_some()
}

/// The total instruction count of a callgrind output file (its `totals:` line).
pub fn parse_callgrind_total(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("totals:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The instruction count in `perf stat -x ,` output, if it counted.
pub fn parse_perf_instructions(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.contains("instructions"))
        .and_then(|l| l.split(',').next())
        .and_then(|v| v.trim().parse().ok())
}

pub fn machine() -> Machine {
    let cpuinfo = read("/proc/cpuinfo");
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown".to_string(), |(_, v)| v.trim().to_string());
    let hv = cpuinfo.contains(" hypervisor");
    let mem_total_kib = read("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok());
    Machine {
        cpu: if hv {
            format!("{cpu} (virtual machine)")
        } else {
            cpu
        },
        logical_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        mem_total_kib,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        loadavg_at_start: read("/proc/loadavg")
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        hw_counters: hw_counters(),
    }
}

/// The commit of the tree the binary was built from (`-dirty` when the sources it is built
/// from, `crates/` and the workspace's Cargo files, have uncommitted changes: a docs edit does
/// not make a measurement dirty).
pub fn commit() -> String {
    let dir = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) => {
            let dirty = git(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                "../../crates",
                "../../Cargo.toml",
                "../../Cargo.lock",
            ])
            .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        }
        None => "unknown".to_string(),
    }
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("?".to_string(), |k| format!("{:.1}", k as f64 / 1024.0))
}

/// `v` with at least three significant digits (small rates stay readable).
fn sig(v: f64) -> String {
    if v.is_nan() || v <= 0.0 || v >= 1.0 {
        return format!("{v:.2}");
    }
    let digits = (2.0 - v.log10().floor()).clamp(0.0, 12.0) as usize;
    format!("{v:.digits$}")
}

fn ipe(v: Option<f64>) -> String {
    v.map_or("n/a".to_string(), |v| format!("{v:.0}"))
}

const HEADER: [&str; 15] = [
    "scenario",
    "pCPUs",
    "sim s",
    "events",
    "actions",
    "load s",
    "build s",
    "run s",
    "M events/s",
    "wall M ev/s",
    "sim s/wall s",
    "peak MiB",
    "live timers",
    "floor M ev/s",
    "x floor",
];

fn cells(r: &Row) -> Vec<String> {
    vec![
        r.name.clone(),
        r.pcpus.to_string(),
        format!("{}", r.simulated_s),
        r.events.to_string(),
        r.actions.to_string(),
        format!("{:.3}", r.load_s),
        format!("{:.3}", r.build_s),
        format!("{:.3}", r.run_s),
        format!("{:.2}", r.events_per_s / 1e6),
        format!("{:.2}", r.events_per_wall_s / 1e6),
        sig(r.sim_s_per_wall_s),
        mib(r.peak_rss_kib),
        format!("{:.0}", r.live_timers),
        format!("{:.1}", r.floor_events_per_s / 1e6),
        format!("{:.1}", r.x_floor),
        ipe(r.instructions_per_event),
    ]
}

/// The rows as a table: markdown (`md`) or aligned text.
pub fn table(rep: &Report, md: bool) -> String {
    let mut head: Vec<String> = HEADER.iter().map(|s| s.to_string()).collect();
    head.push("instr/event".to_string());
    let rows: Vec<Vec<String>> = rep.rows.iter().map(cells).collect();
    let mut out = String::new();
    if md {
        out += &format!("| {} |\n", head.join(" | "));
        let align: Vec<&str> = (0..head.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        out += &format!("|{}|\n", align.join("|"));
        for r in &rows {
            out += &format!("| {} |\n", r.join(" | "));
        }
        return out;
    }
    let width: Vec<usize> = (0..head.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([head[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |r: &[String]| {
        let v: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = width[i])
                } else {
                    format!("{c:>w$}", w = width[i])
                }
            })
            .collect();
        v.join("  ") + "\n"
    };
    out += &line(&head);
    for r in &rows {
        out += &line(r);
    }
    out
}

/// The header lines of a report: commit, machine, how it was run.
pub fn describe(rep: &Report) -> String {
    let m = &rep.machine;
    format!(
        "commit {}; {} x {}, {} MiB, Linux {}; load average at start {}; {}; times: {}; \
         instructions per event: {}",
        rep.commit,
        m.logical_cpus,
        m.cpu,
        m.mem_total_kib.map_or(0, |k| k / 1024),
        m.kernel,
        m.loadavg_at_start,
        if rep.isolated {
            "one scenario per process (peak RSS is each scenario's own)"
        } else {
            "all scenarios in one process (peak RSS is cumulative)"
        },
        if rep.clock == "cpu" {
            "the thread's CPU time (wall time only in simulated s per wall s)"
        } else {
            "wall"
        },
        match rep
            .rows
            .iter()
            .find_map(|r| r.instructions_source.as_deref())
        {
            Some(src) => src,
            None if m.hw_counters => "hardware counters with --isolate (perf stat)",
            None => {
                "n/a (no hardware counters here: perf stat -e instructions says <not \
                 supported>; --callgrind measures them)"
            }
        }
    )
}

fn ratio(new: f64, old: f64) -> String {
    if old > 0.0 && new.is_finite() {
        format!("{:.3}", new / old)
    } else {
        "-".to_string()
    }
}

/// Row-by-row ratios of `new` to `old` (rows matched by name): events/s (above 1 is faster),
/// instructions per event, peak RSS and build time (below 1 is better), and whether the
/// schedule is the same (equal digests at equal simulated length).
pub fn compare(new: &Report, old: &Report) -> String {
    let mut out = format!("compared with {} (this run: {})\n", old.commit, new.commit);
    let head = [
        "scenario",
        "events/s new/old",
        "instr/event new/old",
        "peak RSS new/old",
        "build new/old",
        "schedule",
    ];
    let mut rows = vec![head.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
    for r in &new.rows {
        let Some(o) = old.rows.iter().find(|o| o.name == r.name) else {
            rows.push(vec![r.name.clone(), "(not in the old report)".to_string()]);
            continue;
        };
        let sched = if r.simulated_s != o.simulated_s {
            format!(
                "different length ({} s vs {} s)",
                r.simulated_s, o.simulated_s
            )
        } else if r.digest == o.digest && r.events == o.events {
            "same".to_string()
        } else {
            format!("differs ({} vs {} events)", r.events, o.events)
        };
        let ipe = match (r.instructions_per_event, o.instructions_per_event) {
            (Some(n), Some(o)) => ratio(n, o),
            _ => "n/a".to_string(),
        };
        let rss = match (r.peak_rss_kib, o.peak_rss_kib) {
            (Some(n), Some(o)) => ratio(n as f64, o as f64),
            _ => "-".to_string(),
        };
        rows.push(vec![
            r.name.clone(),
            ratio(r.events_per_s, o.events_per_s),
            ipe,
            rss,
            ratio(r.build_s, o.build_s),
            sched,
        ]);
    }
    let width = |i: usize| rows.iter().filter_map(|r| r.get(i)).map(String::len).max();
    for r in &rows {
        let v: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = width(i).unwrap_or(0)))
            .collect();
        out += v.join("  ").trim_end();
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, eps: f64, digest: &str) -> Row {
        Row {
            name: name.to_string(),
            pcpus: 8,
            simulated_s: 1.0,
            events: 100,
            actions: 10,
            load_s: 0.0,
            build_s: 0.5,
            run_s: 1.0,
            run_wall_s: 1.0,
            events_per_s: eps,
            events_per_wall_s: eps,
            sim_s_per_wall_s: 1.0,
            sim_s_per_cpu_s: 1.0,
            peak_rss_kib: Some(1024),
            live_timers: 10.0,
            floor_events: 100,
            floor_events_per_s: 1e7,
            x_floor: 2.0,
            instructions_per_event: None,
            instructions_source: None,
            digest: digest.to_string(),
        }
    }

    fn report(rows: Vec<Row>) -> Report {
        Report {
            commit: "abc".to_string(),
            clock: "cpu".to_string(),
            machine: machine(),
            isolated: true,
            seconds: None,
            counter: "none".to_string(),
            rows,
        }
    }

    #[test]
    fn compare_gives_the_ratio_per_row_and_flags_a_changed_schedule() {
        let old = report(vec![row("a", 1e6, "1"), row("b", 1e6, "2")]);
        let new = report(vec![
            row("a", 2e6, "1"),
            row("b", 1e6, "3"),
            row("c", 1.0, ""),
        ]);
        let text = compare(&new, &old);
        let line = |n: &str| {
            text.lines()
                .find(|l| l.starts_with(&format!("{n} ")))
                .unwrap_or_else(|| panic!("no row {n} in\n{text}"))
                .to_string()
        };
        assert!(
            line("a").contains("2.000") && line("a").ends_with("same"),
            "{text}"
        );
        assert!(line("b").contains("differs"), "{text}");
        assert!(line("c").contains("not in the old report"), "{text}");
    }

    #[test]
    fn a_report_round_trips_through_json_and_tables_have_every_row() {
        let rep = report(vec![row("a", 1e6, "1"), row("b", 1e6, "2")]);
        let back: Report = serde_json::from_str(&serde_json::to_string(&rep).unwrap()).unwrap();
        assert_eq!(back.rows.len(), 2);
        assert_eq!(back.rows[1].name, "b");
        let md = table(&rep, true);
        assert_eq!(md.lines().count(), 4, "{md}");
        assert!(md.lines().all(|l| l.starts_with('|')), "{md}");
        assert!(md.contains("| n/a |"), "{md}");
    }

    #[test]
    fn small_figures_keep_three_significant_digits() {
        assert_eq!(sig(2.5), "2.50");
        assert_eq!(sig(0.0314159), "0.0314");
        assert_eq!(sig(0.000123456), "0.000123");
        assert_eq!(sig(0.0), "0.00");
    }

    #[test]
    fn perf_output_is_parsed_only_when_it_counted() {
        assert_eq!(
            parse_perf_instructions("123456,,instructions:u,1000,100.00,,\n"),
            Some(123456)
        );
        assert_eq!(
            parse_perf_instructions("<not supported>,,instructions:u,0,100.00,,\n"),
            None
        );
        assert_eq!(
            parse_callgrind_total("events: Ir\nsummary: 42\ntotals: 33128473\n"),
            Some(33128473)
        );
        assert_eq!(parse_callgrind_total("events: Ir\n"), None);
    }
}
