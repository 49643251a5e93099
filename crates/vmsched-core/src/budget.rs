//! Budgets before work (issue 18 item 2): what a validated scenario will cost, computed from its
//! configuration before anything is built, and checked against a memory limit.
//!
//! The model (docs/limits.md) adds up, per part of the scenario, the bytes the engine allocates
//! for it and the copies the results make at the end:
//!
//! * every entity (a vCPU at the host, a task in a guest) keeps a wait-time histogram (HDR, two
//!   significant digits over 1 ns .. 1 h, its counts allocated per range on first use:
//!   [`WAIT_HIST_BYTES`] as runs leave them) plus [`ENTITY_BYTES`] of state in the engine and
//!   its scheduler;
//! * a task also holds its program three times (the workload's spec, the build's copy and the
//!   engine's), and one entry per task in every channel's wait and spin queues;
//! * a guest CPU (one per vCPU) and a physical CPU each [`CPU_BYTES`];
//! * a cyclictest thread's latency histogram (HDR with three digits, [`LAT_HIST_BYTES`], also
//!   allocated per range) and its 1-µs buckets, [`BUCKET_BYTES`] each (the summary's, the result
//!   column's and the Arrow and polars copies; the engine's own are allocated 64 at a time on
//!   first use and left out);
//! * a sampled series [`SAMPLE_BYTES`] per sample (plus its name per row in the long table);
//! * a trace buffer, when the run writes a trace, [`TRACE_RECORD_BYTES`] per record;
//! * xenmon's figures (docs/xenmon.md), [`XENMON_ROW_BYTES`] per vCPU and window (the whole
//!   run's rows and one per `run.xenmon_window_ms` window).
//!
//! The constants are calibrated against the peak resident size of real runs
//! (`tests/test_budgets.py` holds the estimate within a factor of two of it). The estimate
//! names the field whose part is largest, so an error can say which value to lower.
//!
//! The same parts give the size of the output a run writes (Parquet tables, uncompressed upper
//! bound) and an upper bound on events per simulated second where loops and timers bound it.

use std::mem::size_of;

use crate::scenario::Scenario;
use crate::time::{Nanos, NS_PER_S, NS_PER_US};
use crate::workload::{Step, WorkloadConfig};

/// A wait histogram's counts as a run leaves them (metrics::lazy allocates 128 bytes per
/// quarter of a power-of-two range on first use): 0.4–3.8 KB per entity over the benchmark set
/// (1.1 KB the median of its rows, `mixed-p64` for 5 s the largest), at most 18.6 KB
/// (`LatHist::full_bytes`) whatever it records.
pub const WAIT_HIST_BYTES: u64 = 2 * 1024;
/// A cyclictest thread's latency histogram (three digits: 1 KB per quarter range) likewise:
/// 0.5–20 KB over the benchmark set (`mixed-p64` for 5 s: 20 KB), at most 133 KB.
pub const LAT_HIST_BYTES: u64 = 20 * 1024;
/// Engine and scheduler state of one entity beyond its wait histogram (its parameters with two
/// CPU masks, runstate accounting, the scheduler's per-entity data, its name).
pub const ENTITY_BYTES: u64 = 3 * 1024;
/// Engine and scheduler state of one CPU (timer slots, pending timers, a run queue).
pub const CPU_BYTES: u64 = 2 * 1024;
/// A task's own state beyond its entity's (slots, random stream, program counters).
pub const TASK_BYTES: u64 = 512;
/// One 1-µs bucket of a fixed latency histogram, over its copies from the summary to the result
/// tables.
pub const BUCKET_BYTES: u64 = 32;
/// One sample of a series, over all its copies (engine, results, table, Arrow, polars), plus
/// twice the series' name (repeated on every row of the long table, as text and in Arrow).
pub const SAMPLE_BYTES: u64 = 120;
/// xenmon's rows of one vCPU in one window, over all their copies (the engine's window row, the
/// report's vCPU row and its share of its domain's, the table, Arrow, polars).
pub const XENMON_ROW_BYTES: u64 = 1536;
/// One trace record in the buffer and while it is written.
pub const TRACE_RECORD_BYTES: u64 = 48;
/// The engine's own, whatever the scenario (the event queue's first blocks, the levels).
pub const BASE_BYTES: u64 = 1 << 20;

/// Output bytes (uncompressed, an upper bound of the Parquet files) per entity row, per
/// histogram row beyond its buckets, per bucket and per sample.
const OUT_ENTITY_BYTES: u64 = 256;
const OUT_HIST_BYTES: u64 = 256;
const OUT_BUCKET_BYTES: u64 = 8;
const OUT_SAMPLE_BYTES: u64 = 16;
/// A vCPU's xenmon row and its share of its domain's.
const OUT_XENMON_BYTES: u64 = 512;

/// One part of the estimate: the field that sets its size, what it is, and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// Dotted path of the field to lower to shrink this part (`domain.0.workload.1.copies`).
    pub field: String,
    /// What the part is, with its count (`1000000 tasks`).
    pub what: String,
    pub bytes: u64,
}

/// What a scenario will cost: memory (by part), output size and an event-rate bound.
#[derive(Clone, Debug)]
pub struct Estimate {
    /// The part to name in an error: the largest, or the sum of many parts of one kind (the
    /// vCPUs of every domain, the tasks of every workload) when that is over twice as large.
    pub largest: Part,
    /// Memory parts, largest first.
    pub parts: Vec<Part>,
    /// Their sum (saturating).
    pub memory_bytes: u64,
    /// Bytes of the result tables a run writes (uncompressed; Parquet is smaller).
    pub output_bytes: u64,
    /// The field whose part of the output is largest.
    pub output_field: String,
    /// An upper bound on events per simulated second, where one exists (every loop of every
    /// task takes a bounded-below time a round, every timer has a period), and the field whose
    /// part is largest. None when some part has no bound (an exponential compute).
    pub events_per_s: Option<(u64, String)>,
}

/// Where a memory limit comes from (for the error message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LimitSource {
    /// `[run] memory_limit_mb`.
    Scenario,
    /// An option of the caller (`memory_limit_mb=` in Python, `--memory-limit-mb`).
    Option,
    /// [`DEFAULT_FRACTION_PCT`] of the memory available (MemAvailable in /proc/meminfo).
    Available(u64),
    /// [`FALLBACK_LIMIT_BYTES`]: the available memory is not known here.
    Fallback,
}

/// A memory limit in bytes and where it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    pub bytes: u64,
    pub source: LimitSource,
}

/// The share of the machine's available memory a run may plan to use by default.
pub const DEFAULT_FRACTION_PCT: u64 = 80;
/// The default limit where the available memory cannot be read (not Linux): 4 GiB.
pub const FALLBACK_LIMIT_BYTES: u64 = 4 << 30;
/// Events per simulated second past which a run is worth a warning: a hundred times what the
/// engine does in a second of wall time (about ten million, docs/performance.md), so every
/// simulated second takes minutes. A long run at an ordinary rate is the user's choice.
pub const EVENTS_RATE_WARN: u64 = 1_000_000_000;
/// ... unless the whole run stays under this many events (seconds of wall time).
pub const EVENTS_MIN_WARN: u64 = 100_000_000;

/// The memory available to a new run: MemAvailable from /proc/meminfo (Linux), else None.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

impl Limit {
    /// The limit in force: `option` (MB) if given, else the scenario's `memory_limit_mb`, else
    /// [`DEFAULT_FRACTION_PCT`] of the available memory, else [`FALLBACK_LIMIT_BYTES`].
    pub fn resolve(option_mb: Option<u64>, scenario_mb: Option<u64>) -> Limit {
        let mb = |v: u64| v.saturating_mul(1 << 20);
        if let Some(v) = option_mb {
            return Limit {
                bytes: mb(v),
                source: LimitSource::Option,
            };
        }
        if let Some(v) = scenario_mb {
            return Limit {
                bytes: mb(v),
                source: LimitSource::Scenario,
            };
        }
        match available_memory() {
            Some(avail) => Limit {
                bytes: avail / 100 * DEFAULT_FRACTION_PCT,
                source: LimitSource::Available(avail),
            },
            None => Limit {
                bytes: FALLBACK_LIMIT_BYTES,
                source: LimitSource::Fallback,
            },
        }
    }

    fn describe(&self) -> String {
        let how = "raise it with run.memory_limit_mb, --memory-limit-mb or memory_limit_mb=";
        match self.source {
            LimitSource::Scenario => format!("the limit of {} (run.memory_limit_mb)", mib(self.bytes)),
            LimitSource::Option => format!("the limit of {} (the memory_limit_mb option)", mib(self.bytes)),
            LimitSource::Available(a) => format!(
                "the limit of {} ({DEFAULT_FRACTION_PCT}% of the {} this machine has available; {how})",
                mib(self.bytes),
                mib(a)
            ),
            LimitSource::Fallback => format!(
                "the default limit of {} (the available memory is unknown here; {how})",
                mib(self.bytes)
            ),
        }
    }
}

/// `n` bytes as MB (MiB), with thousands separators.
pub fn mib(n: u64) -> String {
    let m = n.div_ceil(1 << 20);
    let s = m.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("{out} MB")
}

/// The counts a workload brings, read from its configuration (nothing is built).
struct Shape {
    /// The field that sets the number of tasks.
    tasks_field: &'static str,
    tasks: u64,
    /// Steps of each task's program.
    steps: u64,
    channels: u64,
    /// Fixed-bucket latency histograms (one per cyclictest thread) and their buckets.
    hists: u64,
    buckets: u64,
    /// Sampled series.
    gap_pairs: u64,
    /// Per task: an upper bound of its events per simulated second, and the field that sets
    /// it (None: unbounded, e.g. an exponential compute in a loop).
    rate: Option<(u64, String)>,
}

/// Events per simulated second of a task looping over `steps` with `min_ns` the least time a
/// round takes (None if a round can take no time, which validation refuses, or if unbounded).
fn loop_rate(steps: usize, min_ns: Nanos) -> Option<u64> {
    // Every step is at most a few events (a compute's end, a timer, a wake-up, a reschedule).
    (min_ns > 0).then(|| (steps as u64 * 4).saturating_mul(NS_PER_S) / min_ns)
}

/// The tasks a workload declares on `vcpus` CPUs (with `max_tasks`, the most it may have at
/// once) and the field that sets their number (empty where the CPU count does).
pub fn task_count(w: &WorkloadConfig, vcpus: u32) -> (u64, &'static str) {
    let s = shape(w, vcpus);
    (s.tasks, s.tasks_field)
}

fn shape(w: &WorkloadConfig, vcpus: u32) -> Shape {
    match w {
        WorkloadConfig::CpuLoop(c) => Shape {
            tasks_field: "copies",
            tasks: c.copies.into(),
            steps: 2,
            channels: 0,
            hists: 0,
            buckets: 0,
            gap_pairs: 0,
            // An hour of compute a round.
            rate: Some((1, "copies".into())),
        },
        WorkloadConfig::Context1(c) => {
            let round =
                c.c_syscall_ns.saturating_mul(4) + c.c_pipe_rw_ns.saturating_mul(4) + c.c_user_ns;
            let round = round - round * u64::from(c.jitter_pct.min(100)) / 100;
            let field = [
                ("c_syscall_ns", c.c_syscall_ns),
                ("c_pipe_rw_ns", c.c_pipe_rw_ns),
                ("c_user_ns", c.c_user_ns),
            ]
            .into_iter()
            .max_by_key(|(_, v)| *v)
            .map_or("c_user_ns", |(f, _)| f);
            // The "unixbench" driver: a driver and a pair per pass and copy, one program of
            // sections (about 28 steps a pair), three channels a pair; one pass runs at a time.
            let (tasks, steps, channels, gap_pairs, tasks_field) = match c.driver {
                crate::workload::context1::Driver::Window => (2, 12, 2, 1, ""),
                crate::workload::context1::Driver::Unixbench => {
                    let n = u64::from(c.passes) * u64::from(c.copies);
                    let field = if c.copies > 1 { "copies" } else { "passes" };
                    (1 + 2 * n, 1 + 28 * n, 1 + 3 * n, 0, field)
                }
            };
            Shape {
                tasks_field,
                tasks,
                steps,
                channels,
                hists: 0,
                buckets: 0,
                gap_pairs,
                rate: loop_rate(24, round).map(|r| (r, field.to_string())),
            }
        }
        WorkloadConfig::Cyclictest(c) => {
            let threads = u64::from(c.threads);
            let per = loop_rate(3, c.interval_us.saturating_mul(NS_PER_US)).unwrap_or(u64::MAX);
            Shape {
                tasks_field: "threads",
                tasks: threads + u64::from(c.main_thread),
                steps: 3,
                channels: 0,
                hists: threads,
                buckets: c.histogram_us.into(),
                gap_pairs: 0,
                rate: Some((per.saturating_mul(threads), "interval_us".into())),
            }
        }
        // Packets handled as kernel work (sim/io.rs): no task; a packet is a few events at each
        // hop (NIC, netback, the guest's handler, the way back).
        // A job's ranks (in the domains of its placement): N tasks, N² channels; a finite
        // program whose message rate is bounded by its compute phases (not estimated here).
        WorkloadConfig::Parallel(c) => {
            let n: u64 = c.placement.iter().map(|p| u64::from(p.ranks)).sum();
            let layout = crate::workload::parallel::Layout::new(&c.placement);
            let steps = c.shape().map_or(0, |s| {
                (0..layout.n)
                    .map(|r| c.program(&layout, &s, r).len() as u64)
                    .max()
                    .unwrap_or(0)
            });
            Shape {
                tasks_field: "placement",
                tasks: n,
                steps,
                channels: n.saturating_mul(n),
                hists: 0,
                buckets: 0,
                gap_pairs: 0,
                rate: None,
            }
        }
        WorkloadConfig::Ping(c) => Shape {
            tasks_field: "",
            tasks: 0,
            steps: 0,
            channels: 0,
            hists: 0,
            buckets: 0,
            gap_pairs: 0,
            rate: loop_rate(12, c.interval_us.saturating_mul(NS_PER_US))
                .map(|r| (r, "interval_us".into())),
        },
        WorkloadConfig::Stream(c) => {
            let bits = u64::from(c.packet_bytes).saturating_mul(8);
            let per_s = u64::from(c.rate_mbps).saturating_mul(1_000_000) / bits.max(1);
            Shape {
                tasks_field: "",
                tasks: 0,
                steps: 0,
                channels: 0,
                hists: 0,
                buckets: 0,
                gap_pairs: 0,
                rate: Some((per_s.saturating_mul(12), "rate_mbps".into())),
            }
        }
        // A player task (a frame boundary, a decode and a loop per frame) and maybe a sound
        // thread (the same per period). Their histograms are not counted (as a ping's and a
        // stream's: small, and no field sets their number).
        WorkloadConfig::Video(c) => {
            let player = loop_rate(3, NS_PER_S / u64::from(c.fps.max(1))).unwrap_or(u64::MAX);
            let audio = loop_rate(3, c.audio_period_us.saturating_mul(NS_PER_US)).unwrap_or(0);
            let field = if audio > player {
                "audio_period_us"
            } else {
                "fps"
            };
            Shape {
                tasks_field: "",
                tasks: 1 + u64::from(c.audio_period_us > 0),
                steps: 3,
                channels: 0,
                hists: 0,
                buckets: 0,
                gap_pairs: 0,
                rate: Some((player.saturating_add(audio), field.into())),
            }
        }
        // A launcher and one slot per launch; an application's loop body (a user chunk and a
        // read) takes at least `work_us / reads`.
        WorkloadConfig::Startup(c) => Shape {
            tasks_field: "iterations",
            tasks: 1 + u64::from(c.iterations),
            steps: 11,
            channels: 1,
            hists: 1,
            buckets: 0,
            gap_pairs: 0,
            rate: loop_rate(
                3,
                c.work_us.saturating_mul(NS_PER_US) / u64::from(c.reads.max(1)),
            )
            .map(|r| (r, "work_us".into())),
        },
        // Threads looping over a fixed critical section (and exponential work between): at
        // most one acquisition per critical section, whichever thread holds the lock.
        WorkloadConfig::Spinlock(c) => Shape {
            tasks_field: "threads",
            tasks: c.threads(vcpus).into(),
            steps: 6,
            channels: 1,
            hists: 0,
            buckets: 0,
            gap_pairs: 0,
            rate: loop_rate(6, c.cs_ns).map(|r| (r, "cs_ns".into())),
        },
        // Recorded programs without a loop: they end (the rate is their finite step count).
        WorkloadConfig::Replay(r) => {
            let tasks = r.tasks.len() as u64;
            Shape {
                tasks_field: "tasks",
                tasks,
                steps: r.step_count().div_ceil(tasks.max(1)),
                channels: r.tasks.len() as u64,
                hists: 0,
                buckets: 0,
                gap_pairs: 0,
                rate: Some((0, "tasks".into())),
            }
        }
        // One task per vCPU; exponential bursts and waits: no bound on the rate.
        WorkloadConfig::VmBoot(b) => Shape {
            tasks_field: "",
            tasks: vcpus.into(),
            steps: 6 + u64::from(b.ioreqs.min(crate::workload::vmboot::MAX_IOREQS)),
            channels: 0,
            hists: 0,
            buckets: 0,
            gap_pairs: 0,
            rate: None,
        },
        WorkloadConfig::Program(p) => {
            let prog = p.compile().unwrap_or_default();
            let tasks = u64::from(p.max_tasks.unwrap_or(p.copies).max(p.copies));
            let min_ns: Option<Nanos> = prog.iter().try_fold(0u64, |acc, s| match s {
                Step::Compute { dur, .. } | Step::Sleep { dur, .. } => match dur {
                    crate::workload::Dist::Fixed(d) => Some(acc.saturating_add(*d)),
                    crate::workload::Dist::Uniform(lo, _) => Some(acc.saturating_add(*lo)),
                    crate::workload::Dist::Exp(_) => None,
                },
                _ => Some(acc),
            });
            // A program without a loop ends; one that only waits is bounded by its wakers.
            let loops = prog
                .iter()
                .any(|s| matches!(s, Step::Goto { times: None, .. }));
            let rate = match (loops, min_ns) {
                (false, _) => Some(0),
                (true, Some(m)) => loop_rate(prog.len(), m),
                (true, None) => None,
            };
            Shape {
                tasks_field: if p.max_tasks.is_some() {
                    "max_tasks"
                } else {
                    "copies"
                },
                tasks,
                steps: prog.len() as u64,
                channels: p.channels.len() as u64,
                hists: 0,
                buckets: 0,
                gap_pairs: 0,
                rate: rate.map(|r| (r.saturating_mul(tasks), "steps".into())),
            }
        }
    }
}

impl Estimate {
    /// The estimate of a validated scenario; `trace_records`: the trace bound if the run
    /// writes a trace.
    pub fn of<H, G: serde::Serialize>(
        s: &Scenario<H, G>,
        trace_records: Option<usize>,
    ) -> Estimate {
        let entity = WAIT_HIST_BYTES + ENTITY_BYTES;
        let mut parts = Vec::new();
        let mut out = Vec::new();
        let mut rates: Vec<(u64, String)> = Vec::new();
        let mut rate_bounded = true;
        // Sampled series: (samples, bytes) over every workload.
        let mut series = (0u64, 0u64);
        let pcpus = u64::from(s.machine.pcpus);
        parts.push(Part {
            field: "machine.pcpus".into(),
            what: format!("{pcpus} pCPUs"),
            bytes: pcpus * CPU_BYTES + BASE_BYTES,
        });
        let samples = match s.run.sample_interval_ns() {
            Ok(i) if i > 0 => s.run.duration_ns().unwrap_or(0) / i + 1,
            _ => 0,
        };
        for (i, d) in s.domains.iter().enumerate() {
            let v = u64::from(d.vcpus);
            parts.push(Part {
                field: format!("domain.{i}.vcpus"),
                what: format!("{v} vCPUs"),
                bytes: v.saturating_mul(entity + CPU_BYTES),
            });
            out.push((format!("domain.{i}.vcpus"), v * OUT_ENTITY_BYTES));
            // The guest's tick: HZ a second on each vCPU (the guest scheduler's `hz` if it has
            // one, else 1000).
            let hz = toml::Value::try_from(&d.sched)
                .ok()
                .and_then(|t| t.get("hz").and_then(|h| h.as_integer()))
                .map_or(1000, |h| h.max(0) as u64);
            rates.push((v.saturating_mul(hz), format!("domain.{i}.sched.hz")));
            for (j, w) in d.workloads.iter().enumerate() {
                let at = |f: &str| match f {
                    "" => format!("domain.{i}.workload.{j}"),
                    f => format!("domain.{i}.workload.{j}.{f}"),
                };
                let sh = shape(w, d.vcpus);
                let step_bytes = sh.steps * size_of::<Step>() as u64 * 3;
                let per_task = entity + TASK_BYTES + step_bytes + sh.channels * 16;
                parts.push(Part {
                    field: at(sh.tasks_field),
                    what: format!("{} tasks", sh.tasks),
                    bytes: sh.tasks.saturating_mul(per_task),
                });
                out.push((at(sh.tasks_field), sh.tasks * OUT_ENTITY_BYTES));
                if sh.hists > 0 {
                    parts.push(Part {
                        field: at("threads"),
                        what: format!("{} latency histograms", sh.hists),
                        bytes: sh.hists.saturating_mul(LAT_HIST_BYTES),
                    });
                    let b = sh.hists.saturating_mul(sh.buckets);
                    parts.push(Part {
                        field: at("histogram_us"),
                        what: format!("{} histograms of {} buckets", sh.hists, sh.buckets),
                        bytes: b.saturating_mul(BUCKET_BYTES),
                    });
                    out.push((
                        at("histogram_us"),
                        b.saturating_mul(OUT_BUCKET_BYTES) + sh.hists * OUT_HIST_BYTES,
                    ));
                }
                if sh.gap_pairs > 0 && samples > 0 {
                    let n = sh.gap_pairs.saturating_mul(samples);
                    // "<domain>/<workload>: probe(<workload>.parent) - probe(<workload>.child)"
                    let name = (d.name.len() + 3 * w.name().len() + 36) as u64;
                    series.0 = series.0.saturating_add(n);
                    series.1 = series
                        .1
                        .saturating_add(n.saturating_mul(SAMPLE_BYTES + 2 * name));
                    out.push((
                        "run.sample_interval_us".into(),
                        n.saturating_mul(OUT_SAMPLE_BYTES),
                    ));
                }
                match sh.rate {
                    Some((r, f)) => rates.push((r, at(&f))),
                    None => rate_bounded = false,
                }
            }
        }
        if series.0 > 0 {
            parts.push(Part {
                field: "run.sample_interval_us".into(),
                what: format!("{} samples", series.0),
                bytes: series.1,
            });
        }
        let vcpus = s
            .domains
            .iter()
            .fold(0u64, |a, d| a.saturating_add(u64::from(d.vcpus)));
        let windows = match (
            s.run.xenmon_window_ns(),
            s.run.duration_ns(),
            s.run.warmup_ns(),
        ) {
            (Ok(w), Ok(d), Ok(wu)) if w > 0 => d
                .saturating_sub(wu)
                .div_ceil(w)
                .min(crate::sim::XENMON_MAX_WINDOWS),
            _ => 0,
        };
        let xm_rows = vcpus.saturating_mul(windows + 1);
        parts.push(Part {
            field: "run.xenmon_window_ms".into(),
            what: format!("{xm_rows} xenmon rows ({vcpus} vCPUs, {windows} windows)"),
            bytes: xm_rows.saturating_mul(XENMON_ROW_BYTES),
        });
        out.push((
            "run.xenmon_window_ms".into(),
            xm_rows.saturating_mul(OUT_XENMON_BYTES),
        ));
        if let Some(n) = trace_records {
            parts.push(Part {
                field: "trace_max_records".into(),
                what: format!("a trace of up to {n} records"),
                bytes: (n as u64).saturating_mul(TRACE_RECORD_BYTES),
            });
        }
        let mut merged = parts;
        merged.sort_by_key(|p| std::cmp::Reverse(p.bytes));
        let memory_bytes = merged.iter().fold(0u64, |a, p| a.saturating_add(p.bytes));
        // Many small parts of one kind (1,000 domains of 256 vCPUs): the count of domains is
        // what to lower, so the error names `domain` when their sum is over twice the largest.
        let sum = |kind: &str| {
            merged.iter().filter(|p| p.what.ends_with(kind)).fold(
                (0u64, 0u64, 0u64),
                |(n, c, b), p| {
                    let count = p.what.split(' ').next().and_then(|x| x.parse().ok());
                    (
                        n + 1,
                        c.saturating_add(count.unwrap_or(0)),
                        b.saturating_add(p.bytes),
                    )
                },
            )
        };
        let mut largest = merged[0].clone();
        for (kind, of) in [(" vCPUs", "domains"), (" tasks", "workloads")] {
            let (n, count, bytes) = sum(kind);
            if n > 1 && bytes / 2 > largest.bytes {
                largest = Part {
                    field: "domain".into(),
                    what: format!("{n} {of} of {count}{kind} in all"),
                    bytes,
                };
            }
        }
        let output_bytes = out.iter().fold(0u64, |a, (_, b)| a.saturating_add(*b));
        let output_field = out
            .iter()
            .max_by_key(|(_, b)| *b)
            .map(|(f, _)| f.clone())
            .unwrap_or_default();
        let events_per_s = rate_bounded.then(|| {
            let total = rates.iter().fold(0u64, |a, (r, _)| a.saturating_add(*r));
            let field = rates
                .iter()
                .max_by_key(|(r, _)| *r)
                .map(|(_, f)| f.clone())
                .unwrap_or_default();
            (total, field)
        });
        Estimate {
            largest,
            parts: merged,
            memory_bytes,
            output_bytes,
            output_field,
            events_per_s,
        }
    }

    /// Err((field, message)) if the estimate exceeds `limit`; the field is the largest part's.
    pub fn check(&self, limit: &Limit) -> Result<(), (String, String)> {
        if self.memory_bytes <= limit.bytes {
            return Ok(());
        }
        let p = &self.largest;
        Err((
            p.field.clone(),
            format!(
                "the run would need about {} of memory ({} for {}), more than {}",
                mib(self.memory_bytes),
                mib(p.bytes),
                p.what,
                limit.describe()
            ),
        ))
    }

    /// An upper bound on the events of a run of `duration_ns`, if its rate is over
    /// [`EVENTS_RATE_WARN`] a simulated second and the run over [`EVENTS_MIN_WARN`] events:
    /// (events, the field that contributes most).
    pub fn events_warning(&self, duration_ns: Nanos) -> Option<(u64, String)> {
        let (rate, field) = self.events_per_s.as_ref()?;
        if *rate <= EVENTS_RATE_WARN {
            return None;
        }
        let n = (u128::from(*rate) * u128::from(duration_ns) / u128::from(NS_PER_S))
            .min(u128::from(u64::MAX)) as u64;
        (n > EVENTS_MIN_WARN).then(|| (n, field.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_in_force_and_its_wording() {
        let l = Limit::resolve(Some(10), Some(20));
        assert_eq!((l.bytes, l.source.clone()), (10 << 20, LimitSource::Option));
        let l = Limit::resolve(None, Some(20));
        assert_eq!(
            (l.bytes, l.source.clone()),
            (20 << 20, LimitSource::Scenario)
        );
        assert!(l.describe().contains("20 MB (run.memory_limit_mb)"));
        let l = Limit::resolve(None, None);
        assert!(matches!(
            l.source,
            LimitSource::Available(_) | LimitSource::Fallback
        ));
        assert_eq!(mib(1), "1 MB");
        assert_eq!(mib(38_805 << 20), "38,805 MB");
    }

    #[test]
    fn histogram_estimates_lie_between_an_empty_and_a_full_one() {
        use crate::metrics::LatHist;
        // Two significant digits over 1 ns .. 1 h: 36 sub-bucket halves of 128 u32 counts and
        // a slot per quarter; three digits: 33 halves of 1,024.
        let wait = LatHist::with_precision(0, 2);
        assert_eq!(wait.full_bytes(), 36 * 128 * 4 + 144);
        assert!((wait.heap_bytes()..wait.full_bytes()).contains(&WAIT_HIST_BYTES));
        let lat = LatHist::new(0);
        assert_eq!(lat.full_bytes(), 33 * 1024 * 4 + 132);
        assert!((lat.heap_bytes()..lat.full_bytes()).contains(&LAT_HIST_BYTES));
    }
}
