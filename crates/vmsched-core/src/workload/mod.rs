//! Workloads: what tasks do.
//!
//! Every workload is compiled, at build time, into one small *program* per task: a vector of
//! [`Step`]s that the engine interprets (DESIGN.md §5). Steps compute for a duration, sleep,
//! wait on and signal channels (pipes, futexes), spin, loop, and record metrics. The built-in
//! workloads are such programs, each faithful to its real benchmark (spec/workloads.md), in a
//! file of its own; users write their own programs in the scenario file.
//!
//! A workload also names its metrics (counters and latency histograms) and turns them into its
//! benchmark's own figure at the end of the run ([`WorkloadKind::figure`]).

pub mod context1;
pub mod cpu_loop;
pub mod cyclictest;
pub mod parallel;
pub mod ping;
pub mod program;
pub mod replay;
pub mod spinlock;
pub mod startup;
pub mod stream;
pub mod video;
pub mod vmboot;

use serde::{Deserialize, Serialize};

use crate::sched::Policy;
use crate::time::Nanos;

/// A duration drawn per execution of a step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    Fixed(Nanos),
    /// Uniform in [lo, hi].
    Uniform(Nanos, Nanos),
    /// Exponential with this mean.
    Exp(Nanos),
}

/// Index of a channel within its workload.
pub type Chan = u16;
/// Index of a counter within its workload.
pub type Counter = u16;
/// Index of a latency histogram within its workload.
pub type Hist = u16;

/// One instruction of a task program.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// Use the CPU for a while. `kernel`: inside a system call, so under a non-preemptible guest
    /// kernel a reschedule waits for the step's end (the syscall exit).
    Compute { dur: Dist, kernel: bool },
    /// Take a token from the channel, blocking until one is there. `block_cost`: kernel time
    /// spent before actually sleeping (the dequeue and `schedule()` path); the channel is checked
    /// again after it. `slept`: a counter bumped each time the wait had to sleep.
    Wait {
        chan: Chan,
        block_cost: Nanos,
        slept: Option<Counter>,
    },
    /// Put a token into the channel, waking the first waiter if any (a sync wake-up if `sync`,
    /// Linux `WF_SYNC`). `wake_cost`: kernel time the waker then spends (try_to_wake_up), only
    /// when somebody was woken.
    Signal {
        chan: Chan,
        sync: bool,
        wake_cost: Nanos,
    },
    /// Burn the CPU until the channel has a token, then take it (a spinning lock or IPI wait:
    /// unlike `Wait`, the vCPU stays busy). `wfe`: the loop waits with a trappable instruction
    /// (WFE in arm64 spinlocks, PAUSE on x86), which an exit model that traps it turns into a
    /// yield of the vCPU (crate::hv::Spin; ERRATA X4).
    Spin { chan: Chan, wfe: bool },
    /// Take lock `lock` (a channel holding one token while the lock is free) of kind `kind`
    /// (spinlock.rs), spinning, halting or sleeping as the kind and the guest's PV interfaces
    /// say (sim/pv.rs); the wait is recorded in histogram `hist`.
    Lock {
        lock: Chan,
        kind: spinlock::LockKind,
        hist: Hist,
    },
    /// Release lock `lock`: hand it to the next waiter or free it, kicking a halted waiter.
    Unlock {
        lock: Chan,
        kind: spinlock::LockKind,
    },
    /// Spin-then-block (a blocking MPI's wait, parallel.rs): burn the CPU until the channel has
    /// a token, for at most `bound` of CPU time; then sleep until one comes, as `Wait`.
    SpinBlock { chan: Chan, bound: Nanos },
    /// A parallel job's message to a rank in another domain (parallel.rs; sim/job.rs): the
    /// sender's netfront queues it for the driver domain's netback (its per-message work
    /// `netback.tx_ns + rx_copy_ns`, plus `copy_ns`), which passes it to the receiver's
    /// netfront (`rx_ns` of the receiver's kernel), which puts a token into channel `chan` of
    /// the job's part `part`. The sender goes on at once.
    NetSend {
        part: u16,
        chan: Chan,
        copy_ns: u32,
        rx_ns: u32,
    },
    /// A parallel job's bookkeeping (parallel.rs): a rank's start and finish, rank 0's
    /// iteration ends.
    JobMark { mark: parallel::JobMark },
    /// Sleep for a while (relative timer) with the given timer slack.
    Sleep { dur: Dist, slack: Nanos },
    /// cyclictest's loop body: sleep until the next absolute period boundary, then record the
    /// wake-up latency (time the task runs again minus the programmed expiry) in `hist`. The
    /// first expiry is one interval after the task first runs (rt-tests ≥ v0.75, ERRATA W2).
    /// Missed periods are skipped (ERRATA W3b).
    Periodic {
        interval: Nanos,
        slack: Nanos,
        hist: Hist,
    },
    /// Video playback's frame boundary (video.rs): judge the frame decoded since the last
    /// boundary against its display time (one `period` after that boundary; late by more than
    /// `max_lateness` and `drop_late`: dropped), count the frames whose display time passed
    /// meanwhile as skipped (when dropping), then sleep until the next boundary, woken there as
    /// by a device interrupt (no slack), and record the wake-up latency; or, if that boundary
    /// has passed, go on at once. The first execution only sleeps one period. Uses the
    /// workload's counters from `counters` and histograms from `hists` on, in video.rs's
    /// order (the player's, or its audio thread's).
    Frame {
        period: Nanos,
        max_lateness: Nanos,
        drop_late: bool,
        counters: Counter,
        hists: Hist,
    },
    /// `sched_yield()`.
    Yield,
    /// Call-function IPIs to the CPUs of `mask` (bit k: CPU k of the task's level; the
    /// sender's own is left out), waited for by spinning (Linux `smp_call_function_many` with
    /// `wait`; sim/pv.rs): each is handled at once if that CPU executes, else when its vCPU
    /// next runs (a halted one is kicked). With PV sched yield (`[domain.pv] pv_sched_yield`)
    /// and more than one target, the first preempted busy target gets a directed yield.
    CallFunc { mask: u64 },
    /// An HVM guest's emulated I/O access (ERRATA X9): the vCPU blocks in Xen (runstate
    /// offline) until the driver domain's device model completes it (sim/io.rs).
    Ioreq,
    /// The KVM/ARM 3.x arch-timer kworker's work (ERRATA L9): kick every vCPU whose guest timer
    /// fired while it was out of guest mode, in the order they were queued (`kvm_vcpu_kick`: a
    /// halted vCPU thread is woken). Only the engine's timer worker runs it
    /// (`SimBuilder::add_timer_worker`).
    KickTimers,
    /// The start-up workload's "ready" (startup.rs): record the time since the task was
    /// created (its fork, or its start) into histogram `hist`, while measuring.
    Ready { hist: Hist },
    /// Bump a counter.
    Count { counter: Counter },
    /// Jump to step `to`; `times` = None loops forever, Some(n) jumps n times then falls through.
    Goto { to: u16, times: Option<u32> },
    /// Jump to step `to` while less than `dur` has passed since the task was created (its fork,
    /// or its start), then fall through: a loop ended by an `alarm(dur)` set at the task's
    /// start, checked once a round (UnixBench's timed loops, context1.rs).
    LoopFor { to: u16, dur: Nanos },
    /// Jump to step `to` if channel `chan` holds a token, which stays there (a flag: a closed
    /// pipe's end-of-file, seen by every later read); else go on.
    Branch { chan: Chan, to: u16 },
    /// `fork()`: a new task of the same workload starts running this program at step
    /// `child_at`; the parent goes on with the next step. The child wakes with
    /// `WakeCause::Fork` and its parent (Linux `wake_up_new_task`). It takes one of the
    /// workload's preallocated task slots (`max_tasks`); with none left the fork fails
    /// (EAGAIN) and only the parent goes on.
    Fork { child_at: u16 },
    /// End the task.
    Exit,
}

/// Serde default for counts (`copies`, `threads`).
pub(crate) fn one() -> u32 {
    1
}

/// A nice value as `setpriority` accepts it: -20..=19.
pub(crate) fn check_nice(nice: i32) -> Result<(), (String, String)> {
    if !(-20..=19).contains(&nice) {
        return Err(("nice".into(), format!("must be in -20..=19, got {nice}")));
    }
    Ok(())
}

/// A task count (`copies`, `threads`): at least 1. (Upper limits are budgets: issue 18 item 2.)
pub(crate) fn check_copies(field: &str, n: u32) -> Result<(), (String, String)> {
    if n == 0 {
        return Err((
            field.into(),
            "must be at least 1 (to run no task, leave the workload out)".into(),
        ));
    }
    Ok(())
}

/// Linux's `PID_MAX_LIMIT` on 64-bit (include/linux/threads.h: 4 × 1024 × 1024): no kernel
/// holds more tasks, whatever `kernel.pid_max` says.
pub const PID_MAX_LIMIT: u64 = 4 * 1024 * 1024;

/// The tasks of one kernel (a guest's workloads, or a KVM host's processes) on `cpus` CPUs:
/// at most [`PID_MAX_LIMIT`] together. The error names the workload (`prefix.J.FIELD`, its
/// index in `workloads`) that declares the most. Checked once each workload is valid on its
/// own (its counts then fit the arithmetic) and before anything is built per task, so that a
/// mistyped count fails at once instead of validating millions of tasks.
pub fn check_task_ceiling(
    workloads: &[WorkloadConfig],
    cpus: u32,
    prefix: &str,
) -> Result<(), (String, String)> {
    let counts: Vec<(u64, &str)> = workloads
        .iter()
        .map(|w| crate::budget::task_count(w, cpus))
        .collect();
    let total = counts.iter().fold(0u64, |a, c| a.saturating_add(c.0));
    if total <= PID_MAX_LIMIT {
        return Ok(());
    }
    let (j, (n, field)) = counts
        .iter()
        .enumerate()
        .max_by_key(|(j, c)| (c.0, std::cmp::Reverse(*j)))
        .expect("a total above the limit has a workload");
    let field = if field.is_empty() { "kind" } else { field };
    Err((
        format!("{prefix}.{j}.{field}"),
        format!(
            "{total} tasks in one kernel ({n} from this workload): Linux holds at most \
             {PID_MAX_LIMIT} (PID_MAX_LIMIT)"
        ),
    ))
}

/// An empty task list with room for `n` tasks; a failed allocation (a count from the scenario)
/// panics with the field's name, which the binding turns into a `CoreError`, instead of
/// aborting. The budget (crate::budget) refuses such scenarios before they are built.
pub(crate) fn task_vec(field: &str, n: u64) -> Vec<TaskSpec> {
    let mut v = Vec::new();
    if usize::try_from(n).map_or(true, |n| v.try_reserve_exact(n).is_err()) {
        panic!("allocation failed: {n} tasks ({field})");
    }
    v
}

/// One task of a workload.
#[derive(Clone, Debug)]
pub struct TaskSpec {
    pub name: String,
    pub program: Vec<Step>,
    pub nice: i32,
    pub policy: Policy,
    pub rt_prio: u32,
    /// `sched_runtime`, `sched_deadline`, `sched_period` (SCHED_DEADLINE, or the EEVDF slice).
    pub times: crate::sched::SchedTimes,
    /// vCPUs the task may run on (None: all).
    pub affinity: Option<Vec<u32>>,
    /// When the task is created (ns after the start of the run); [`crate::time::NEVER`] for a
    /// slot that only a `fork` step fills (the task does not exist until then).
    pub start: Nanos,
}

/// A workload instance as the engine builds it.
#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    pub name: String,
    pub kind: WorkloadKind,
    pub tasks: Vec<TaskSpec>,
    pub channels: u16,
    pub counters: Vec<String>,
    pub hists: Vec<String>,
    /// Pairs of task indices whose probe gap (vruntime difference under CFS) is sampled into a
    /// time series when the run samples.
    pub gap_pairs: Vec<(usize, usize)>,
    /// Initial tokens per channel (missing entries: 0).
    pub tokens: Vec<u32>,
    /// Buckets of 1 µs of the workload's fixed latency histograms (cyclictest `-h N`); 0: none.
    pub hist_buckets: u32,
}

/// The benchmark a workload stands for, for its figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    CpuLoop,
    Context1,
    Cyclictest,
    Program,
    /// ICMP echo through a driver domain (ping.rs): no task, the engine's I/O path.
    Ping,
    /// A windowed packet flow into a guest (stream.rs): no task, the engine's I/O path.
    Stream,
    /// Video playback with frame deadlines (video.rs).
    Video,
    /// A booting guest's CPU burst (vmboot.rs).
    #[serde(rename = "vmboot")]
    VmBoot,
    /// A bulk-synchronous parallel job across domains (parallel.rs): one workload per part.
    Parallel,
    /// Application start-up time (startup.rs): launches until "ready".
    Startup,
    /// Threads contending one lock (spinlock.rs).
    Spinlock,
    /// A recorded scheduler trace re-run (replay.rs).
    Replay,
}

/// A workload's headline figure in its benchmark's unit.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: String,
}

/// The workloads a scenario may name, `[[domain.workload]] kind = "..."`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkloadConfig {
    CpuLoop(cpu_loop::CpuLoopConfig),
    Context1(context1::Context1Config),
    Cyclictest(cyclictest::CyclictestConfig),
    Program(program::ProgramConfig),
    Ping(ping::PingConfig),
    Stream(stream::StreamConfig),
    Video(video::VideoConfig),
    #[serde(rename = "vmboot")]
    VmBoot(vmboot::VmBootConfig),
    Parallel(parallel::ParallelConfig),
    Startup(startup::StartupConfig),
    Spinlock(spinlock::SpinlockConfig),
    Replay(replay::ReplayConfig),
}

impl WorkloadConfig {
    pub fn name(&self) -> &str {
        match self {
            WorkloadConfig::CpuLoop(c) => &c.name,
            WorkloadConfig::Context1(c) => &c.name,
            WorkloadConfig::Cyclictest(c) => &c.name,
            WorkloadConfig::Program(c) => &c.name,
            WorkloadConfig::Ping(c) => &c.name,
            WorkloadConfig::Stream(c) => &c.name,
            WorkloadConfig::Video(c) => &c.name,
            WorkloadConfig::VmBoot(c) => &c.name,
            WorkloadConfig::Parallel(c) => &c.name,
            WorkloadConfig::Startup(c) => &c.name,
            WorkloadConfig::Spinlock(c) => &c.name,
            WorkloadConfig::Replay(c) => &c.name,
        }
    }

    /// Checks values serde cannot; the error names the field.
    pub fn validate(&self, nr_vcpus: u32) -> Result<(), (String, String)> {
        let aff = |a: &Option<Vec<u32>>| -> Result<(), (String, String)> {
            if let Some(a) = a {
                if a.is_empty() {
                    return Err(("affinity".into(), "must name at least one vCPU".into()));
                }
                if let Some(v) = a.iter().find(|v| **v >= nr_vcpus) {
                    return Err((
                        "affinity".into(),
                        format!("vCPU {v} does not exist (the domain has {nr_vcpus} vCPUs)"),
                    ));
                }
            }
            Ok(())
        };
        match self {
            WorkloadConfig::CpuLoop(c) => {
                aff(&c.affinity)?;
                check_copies("copies", c.copies)?;
                check_nice(c.nice)
            }
            WorkloadConfig::Context1(c) => {
                aff(&c.affinity)?;
                check_nice(c.nice)?;
                c.validate()
            }
            WorkloadConfig::Cyclictest(c) => {
                aff(&c.affinity)?;
                c.validate()
            }
            WorkloadConfig::Program(c) => {
                aff(&c.affinity)?;
                for (i, s) in c.steps.iter().enumerate() {
                    if let program::StepConfig::CallFunc { cpus } = s {
                        if cpus.is_empty() {
                            return Err((format!("steps.{i}.cpus"), "names no CPU".into()));
                        }
                        if let Some(k) = cpus.iter().find(|k| u32::from(**k) >= nr_vcpus.min(64)) {
                            return Err((
                                format!("steps.{i}.cpus"),
                                format!("CPU {k} does not exist ({nr_vcpus} CPUs; at most 64)"),
                            ));
                        }
                    }
                }
                c.validate()
            }
            WorkloadConfig::Ping(c) => c.validate(nr_vcpus),
            WorkloadConfig::Stream(c) => c.validate(nr_vcpus),
            WorkloadConfig::Video(c) => {
                aff(&c.affinity)?;
                c.validate()
            }
            WorkloadConfig::VmBoot(c) => c.validate(),
            WorkloadConfig::Parallel(c) => c.validate(),
            WorkloadConfig::Startup(c) => {
                aff(&c.affinity)?;
                check_nice(c.nice)?;
                c.validate()
            }
            WorkloadConfig::Spinlock(c) => {
                aff(&c.affinity)?;
                c.validate()
            }
            WorkloadConfig::Replay(c) => {
                for (i, t) in c.tasks.iter().enumerate() {
                    aff(&t.affinity).map_err(|(f, m)| (format!("tasks.{i}.{f}"), m))?;
                }
                c.validate()
            }
        }
    }

    /// The workload as it runs in its own domain. A parallel job runs in the domains of its
    /// placement instead ([`parallel::ParallelConfig::build_parts`]): in its own it has no
    /// task.
    pub fn build(&self, nr_vcpus: u32) -> WorkloadSpec {
        match self {
            WorkloadConfig::CpuLoop(c) => c.build(nr_vcpus),
            WorkloadConfig::Context1(c) => c.build(),
            WorkloadConfig::Cyclictest(c) => c.build(),
            WorkloadConfig::Program(c) => c.build(),
            WorkloadConfig::Ping(c) => c.build(),
            WorkloadConfig::Stream(c) => c.build(),
            WorkloadConfig::Video(c) => c.build(),
            WorkloadConfig::VmBoot(c) => c.build(nr_vcpus),
            WorkloadConfig::Startup(c) => c.build(),
            WorkloadConfig::Spinlock(c) => c.build(nr_vcpus),
            WorkloadConfig::Replay(c) => c.build(),
            WorkloadConfig::Parallel(c) => WorkloadSpec {
                name: c.name.clone(),
                kind: WorkloadKind::Program,
                tasks: vec![],
                channels: 0,
                counters: vec![],
                hists: vec![],
                gap_pairs: vec![],
                tokens: vec![],
                hist_buckets: 0,
            },
        }
    }
}

impl WorkloadKind {
    /// Figures derived from the counters, reported beside them.
    pub fn derived(self, counters: &[u64]) -> Vec<(String, u64)> {
        match self {
            WorkloadKind::Context1 => {
                let (it, sleeps) = (counters[0], counters[1] + counters[2]);
                // A slow round trip has two sleeps, a fast one one.
                let fast = (2 * it).saturating_sub(sleeps).min(it);
                vec![("fast".into(), fast), ("slow".into(), it - fast)]
            }
            WorkloadKind::Ping => ping::derived(counters),
            _ => vec![],
        }
    }

    /// The workload's figure from its metrics over `secs` seconds of measured time.
    /// `executed_ns`: the CPU time the workload's tasks really executed.
    pub fn figure(
        self,
        counters: &[u64],
        hist_mean_us: &[f64],
        secs: f64,
        executed_ns: u64,
    ) -> Figure {
        match self {
            WorkloadKind::CpuLoop => Figure {
                name: "cpu".into(),
                value: executed_ns as f64 / 1e9 / secs.max(1e-9),
                unit: "cpus".into(),
            },
            // With the "unixbench" driver (counters per pass), `Run`'s score of the passes.
            WorkloadKind::Context1 if counters.len() > context1::PASSES as usize => Figure {
                name: "score".into(),
                value: context1::run_score(
                    &counters[context1::PASSES as usize..],
                    hist_mean_us.first().copied().unwrap_or(0.0) / 1e6,
                ),
                unit: "lps".into(),
            },
            WorkloadKind::Context1 => Figure {
                name: "score".into(),
                value: counters.first().copied().unwrap_or(0) as f64 / secs.max(1e-9),
                unit: "lps".into(),
            },
            WorkloadKind::Cyclictest => Figure {
                name: "avg_latency".into(),
                value: hist_mean_us.first().copied().unwrap_or(0.0),
                unit: "us".into(),
            },
            WorkloadKind::Ping => Figure {
                name: "avg_rtt".into(),
                value: hist_mean_us.first().copied().unwrap_or(0.0),
                unit: "us".into(),
            },
            WorkloadKind::Stream => stream::figure(counters, secs),
            WorkloadKind::Video => video::figure(counters),
            WorkloadKind::VmBoot => vmboot::figure(executed_ns),
            WorkloadKind::Parallel => parallel::figure(counters),
            WorkloadKind::Startup => startup::figure(hist_mean_us),
            WorkloadKind::Spinlock => spinlock::figure(counters, secs),
            WorkloadKind::Replay => replay::figure(counters),
            WorkloadKind::Program => Figure {
                name: "count".into(),
                value: counters.first().copied().unwrap_or(0) as f64,
                unit: "ops".into(),
            },
        }
    }
}
