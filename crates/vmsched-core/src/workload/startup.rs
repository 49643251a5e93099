//! Application start-up time (`kind = "startup"`): seed 003's xterm benchmark (Fanguède et al.,
//! ADVCOMP 2015, §IV-B and §V-B): "how long it takes from when an application is launched to
//! when \[it\] is ready", with hot caches (no I/O wait), `iterations` launches (the document: 100),
//! reported as the mean and the standard deviation.
//!
//! Two roles, one program:
//!
//! - the **launcher** (the workload's first task, a shell script in the document) sleeps a gap
//!   (`interval_ms`, or an exponential draw with that mean if `random_gap`), forks the
//!   application, waits until it says it is ready (a measuring script waits for the window
//!   before it closes it and launches again), and repeats `iterations` times, then exits;
//! - each **application** (a forked child: the fork placement of its scheduler applies, CFS's
//!   START_DEBIT, BFS's split of the parent's slice) runs `work_us` of CPU broken by `reads`
//!   short cached reads (`read_us` of CPU each, inside a system call: the cached page-cache
//!   path, no sleep), then records its start-up time (now − its fork) into histogram
//!   `startup`, wakes the launcher and exits.
//!
//! The amount of work is an assumption, not a measurement: the document gives none. Its
//! default, 100 ms of CPU (about 170 M cycles at the Chromebook's 1.7 GHz) with 500 reads of
//! 4 µs, is the order of a hot-cache xterm launch on a 1.7 GHz Cortex-A15: the dynamic linking
//! of libX11/libXt/libXaw and their relocations, the X connection set-up, font and resource
//! loading; desktop x86 hot-cache launches of xterm take a few tens of ms at two to three times
//! the A15's speed per clock (docs/seed003.md, "The start-up workload"). The X server's own
//! work for the launch is not modelled. The figure: mean start-up time in seconds.

use serde::{Deserialize, Serialize};

use super::{Dist, Figure, Step, TaskSpec, WorkloadKind, WorkloadSpec};
use crate::sched::Policy;
use crate::time::{config_ns, time_ns, Nanos, MAX_EXP_MEAN_NS, NEVER, NS_PER_MS, NS_PER_US};

/// The most launches of one start-up workload (each launch is a preallocated task slot).
pub const MAX_ITERATIONS: u32 = 100_000;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StartupConfig {
    pub name: String,
    /// Launches measured (the document: 100).
    #[serde(default = "d_iterations")]
    pub iterations: u32,
    /// The gap between one launch's "ready" and the next launch.
    #[serde(default = "d_interval")]
    pub interval_ms: u64,
    /// Draw each gap from an exponential distribution with mean `interval_ms`.
    #[serde(default)]
    pub random_gap: bool,
    /// CPU work of one launch until "ready", the reads included (µs).
    #[serde(default = "d_work")]
    pub work_us: u64,
    /// Short cached reads (system calls) that break the work.
    #[serde(default = "d_reads")]
    pub reads: u32,
    /// CPU time of one cached read, in the kernel (µs).
    #[serde(default = "d_read")]
    pub read_us: u64,
    /// When the launcher starts.
    #[serde(default)]
    pub start_ms: u64,
    #[serde(default)]
    pub nice: i32,
    #[serde(default)]
    pub affinity: Option<Vec<u32>>,
}

fn d_iterations() -> u32 {
    100
}
fn d_interval() -> u64 {
    200
}
fn d_work() -> u64 {
    100_000
}
fn d_reads() -> u32 {
    500
}
fn d_read() -> u64 {
    4
}

/// The launcher's steps; the application's start at [`APP_AT`].
const APP_AT: u16 = 5;

impl StartupConfig {
    /// The user-mode CPU time between two reads (ns).
    fn chunk_ns(&self) -> Nanos {
        let work = self.work_us.saturating_mul(NS_PER_US);
        let reads = self.read_us.saturating_mul(NS_PER_US) * u64::from(self.reads);
        (work - reads) / u64::from(self.reads)
    }

    /// Checks what serde cannot; the error names the field.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.iterations == 0 || self.iterations > MAX_ITERATIONS {
            return Err((
                "iterations".into(),
                format!("must be 1..={MAX_ITERATIONS}, got {}", self.iterations),
            ));
        }
        if self.random_gap {
            config_ns("interval_ms", self.interval_ms, NS_PER_MS, MAX_EXP_MEAN_NS)?;
        } else {
            time_ns("interval_ms", self.interval_ms, NS_PER_MS)?;
        }
        time_ns("start_ms", self.start_ms, NS_PER_MS)?;
        let work = time_ns("work_us", self.work_us, NS_PER_US)?;
        if self.reads == 0 {
            return Err((
                "reads".into(),
                "must be at least 1 (the work is broken by cached reads)".into(),
            ));
        }
        let read = time_ns("read_us", self.read_us, NS_PER_US)?;
        let reads = read.saturating_mul(u64::from(self.reads));
        if reads >= work || (work - reads) / u64::from(self.reads) == 0 {
            return Err((
                "work_us".into(),
                format!(
                    "{} µs cannot hold {} reads of {} µs and user work between them",
                    self.work_us, self.reads, self.read_us
                ),
            ));
        }
        Ok(())
    }

    /// The program shared by the launcher (from step 0) and the applications (from
    /// `APP_AT`).
    pub fn program(&self) -> Vec<Step> {
        let gap = self.interval_ms * NS_PER_MS;
        vec![
            // 0..5: the launcher.
            Step::Sleep {
                dur: if self.random_gap {
                    Dist::Exp(gap)
                } else {
                    Dist::Fixed(gap)
                },
                slack: 50_000,
            },
            Step::Fork { child_at: APP_AT },
            Step::Wait {
                chan: 0,
                block_cost: 0,
                slept: None,
            },
            Step::Goto {
                to: 0,
                times: Some(self.iterations - 1),
            },
            Step::Exit,
            // 5..: the application.
            Step::Compute {
                dur: Dist::Fixed(self.chunk_ns()),
                kernel: false,
            },
            Step::Compute {
                dur: Dist::Fixed(self.read_us * NS_PER_US),
                kernel: true,
            },
            Step::Goto {
                to: APP_AT,
                times: Some(self.reads - 1),
            },
            Step::Ready { hist: 0 },
            Step::Signal {
                chan: 0,
                sync: false,
                wake_cost: 0,
            },
            Step::Exit,
        ]
    }

    pub fn build(&self) -> WorkloadSpec {
        let program = self.program();
        let task = |name: String, start: Nanos| TaskSpec {
            name,
            program: program.clone(),
            nice: self.nice,
            policy: Policy::Normal,
            rt_prio: 0,
            times: Default::default(),
            affinity: self.affinity.clone(),
            start,
        };
        let mut tasks = super::task_vec("iterations", 1 + u64::from(self.iterations));
        tasks.push(task(
            format!("{}.launcher", self.name),
            self.start_ms * NS_PER_MS,
        ));
        for k in 0..self.iterations {
            tasks.push(task(format!("{}.app{k}", self.name), NEVER));
        }
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::Startup,
            tasks,
            channels: 1,
            counters: vec![],
            hists: vec!["startup".into()],
            gap_pairs: vec![],
            tokens: vec![],
            hist_buckets: 0,
        }
    }
}

/// The mean start-up time (s) from the histogram's exact mean (µs).
pub fn figure(hist_mean_us: &[f64]) -> Figure {
    Figure {
        name: "startup_time".into(),
        value: hist_mean_us.first().copied().unwrap_or(0.0) / 1e6,
        unit: "s".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> StartupConfig {
        toml::from_str("name = \"xterm\"").unwrap()
    }

    #[test]
    fn defaults_are_the_documents_100_launches() {
        let c = cfg();
        assert_eq!(c.iterations, 100);
        c.validate().unwrap();
        let w = c.build();
        assert_eq!(w.kind, WorkloadKind::Startup);
        // The launcher starts; every application slot waits for a fork.
        assert_eq!(w.tasks.len(), 101);
        assert_eq!(w.tasks[0].start, 0);
        assert!(w.tasks[1..].iter().all(|t| t.start == NEVER));
        assert_eq!(w.hists, vec!["startup".to_string()]);
        assert_eq!(w.channels, 1);
    }

    #[test]
    fn the_application_runs_exactly_the_work() {
        let c = StartupConfig {
            work_us: 1000,
            reads: 10,
            read_us: 20,
            ..cfg()
        };
        c.validate().unwrap();
        let p = c.program();
        let fixed = |s: &Step| match s {
            Step::Compute {
                dur: Dist::Fixed(d),
                kernel,
            } => (*d, *kernel),
            s => panic!("not a fixed compute: {s:?}"),
        };
        let a = APP_AT as usize;
        let (user, k0) = fixed(&p[a]);
        let (read, k1) = fixed(&p[a + 1]);
        // The reads are system calls; the user work between them is not.
        assert!(!k0 && k1);
        assert_eq!(read, 20_000);
        // The loop body runs `reads` times (a Goto with times n jumps back n times).
        assert_eq!(
            p[a + 2],
            Step::Goto {
                to: APP_AT,
                times: Some(9)
            }
        );
        assert_eq!(10 * (user + read), 1_000_000);
        assert_eq!(p[a + 3], Step::Ready { hist: 0 });
        assert!(matches!(p[a + 4], Step::Signal { chan: 0, .. }));
        assert_eq!(p[a + 5], Step::Exit);
    }

    #[test]
    fn the_launcher_forks_waits_and_repeats() {
        let c = StartupConfig {
            iterations: 3,
            random_gap: true,
            ..cfg()
        };
        let p = c.program();
        assert!(matches!(
            p[0],
            Step::Sleep {
                dur: Dist::Exp(200_000_000),
                ..
            }
        ));
        assert_eq!(p[1], Step::Fork { child_at: APP_AT });
        assert!(matches!(p[2], Step::Wait { chan: 0, .. }));
        assert_eq!(
            p[3],
            Step::Goto {
                to: 0,
                times: Some(2)
            }
        );
        assert_eq!(p[4], Step::Exit);
        assert_eq!(c.build().tasks.len(), 4);
    }

    #[test]
    fn bad_fields_are_named() {
        let bad = |c: StartupConfig| c.validate().unwrap_err().0;
        assert_eq!(
            bad(StartupConfig {
                iterations: 0,
                ..cfg()
            }),
            "iterations"
        );
        assert_eq!(bad(StartupConfig { reads: 0, ..cfg() }), "reads");
        assert_eq!(
            bad(StartupConfig {
                work_us: 2000,
                reads: 500,
                ..cfg()
            }),
            "work_us"
        );
        assert_eq!(
            bad(StartupConfig {
                interval_ms: u64::MAX,
                ..cfg()
            }),
            "interval_ms"
        );
        assert_eq!(
            bad(StartupConfig {
                read_us: u64::MAX,
                ..cfg()
            }),
            "read_us"
        );
        let w: Result<StartupConfig, _> = toml::from_str("name = \"x\"\nwork_ms = 3");
        assert!(w.unwrap_err().to_string().contains("work_ms"));
    }

    #[test]
    fn the_figure_is_the_mean_in_seconds() {
        let f = figure(&[250_000.0]);
        assert_eq!((f.name.as_str(), f.unit.as_str()), ("startup_time", "s"));
        assert!((f.value - 0.25).abs() < 1e-12);
    }
}
