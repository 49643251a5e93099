//! parallel: a bulk-synchronous parallel job (an MPI program) whose ranks are spread over
//! several domains (issue 17 item 7; spec/workloads.md §5 with ERRATA W6; docs/parallel.md).
//!
//! One *job* of N ranks. The placement list puts `ranks` ranks in each named domain (seed 004:
//! 4 DomU × 4 ranks, launched by mpirun from dom0). Each rank is a task; it runs its kernel's
//! iterations: compute phases (a per-rank, per-phase uniform spread drawn from the rank's own
//! seeded stream) separated by communication: point-to-point messages to neighbours,
//! all-reduces and barriers (dissemination rounds: ⌈log2 N⌉ pairwise rounds, spec §5.2 step 3),
//! all-to-all. A receive waits for the next message from that one sender (MPI matching by
//! source, in order): one channel per (receiver, sender) pair.
//!
//! **Transport** (spec §5.2 step 5). Ranks in the same domain exchange through shared memory: the
//! sender copies (`shm_ns` + `shm_ns_per_kb` per KiB, user time) and the receiver sees the data
//! at once. Ranks in different domains go through TCP over the driver domain's virtual switch
//! (sim/job.rs on the engine's I/O path, docs/io.md): the sender's kernel (`send_ns` + the copy)
//! queues it on its netfront and notifies its backend port in the driver domain; netback there
//! (`netback.tx_ns + rx_copy_ns` + the copy, kernel work on the driver domain's vCPU) moves it to
//! the receiver's netfront and notifies its port; the receiver's kernel (`recv_ns` + the copy)
//! hands it to the rank. Each leg needs its vCPU to run.
//!
//! **Waiting** (spec §5.2 step 4, ERRATA W6): `wait = "poll"` (Open MPI's default) busy-polls: the
//! rank stays runnable and its vCPU never halts, so Credit1 never boosts it. `wait =
//! "spin_block"` spins at most `spin_us` of CPU, then blocks in the kernel until the message
//! comes (a blocking MPI: its vCPU may halt).
//!
//! **Figure**: the job's runtime, from the start (`start_ms`) to the last rank's finish, in
//! seconds; NaN if some rank has not finished by the end of the run. Every part of the job (its
//! ranks in one domain, one workload row per domain) reports the same job-wide figure; its own
//! `part_end_ns` says when its last rank finished. The histogram `iteration` holds rank 0's
//! iteration times. The job's counters and histogram are not reset at the warm-up's end (a job
//! is timed from its own start).
//!
//! **Simplified** (docs/simplifications.md, "Parallel jobs"): a rank is a fixed program; sends are
//! buffered (no rendezvous for large messages); an all-reduce is ⌈log2 N⌉ dissemination rounds;
//! `poll` never yields (Open MPI's `mpi_yield_when_idle` is not modelled); messages between
//! domains carry no TCP windows, losses or ACKs; the NAS compute per iteration is an assumption.

pub mod nas;

use serde::{Deserialize, Serialize};

use super::{Chan, Dist, Figure, Step, TaskSpec, WorkloadKind, WorkloadSpec};
use crate::sched::Policy;
use crate::time::{time_ns, Nanos, NS_PER_MS, NS_PER_US};

/// A rank's bookkeeping step (`Step::JobMark`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobMark {
    /// The rank starts; the job started at this time (its `start_ms`).
    Start(Nanos),
    /// Rank 0 ends an iteration: its time goes into the `iteration` histogram.
    Lap,
    /// The rank finishes.
    Finish,
}

/// Counter indices of every part of a job. The first five are job-wide (the same in every
/// part); the last two the part's own.
pub const STARTED: u16 = 0;
pub const DONE: u16 = 1;
pub const START_NS: u16 = 2;
pub const END_NS: u16 = 3;
pub const NET_MSGS: u16 = 4;
pub const PART_DONE: u16 = 5;
pub const PART_END_NS: u16 = 6;
/// Counters summed over the job's parts by the engine: the first `JOB_WIDE` are written to
/// every part.
pub const JOB_WIDE: u16 = 5;
/// Its histogram: rank 0's iteration times.
pub const ITERATION: u16 = 0;

/// Most ranks a job may have (a receiver has a channel per sender: N² channels in all).
pub const MAX_RANKS: u32 = 128;

/// Ranks in one domain.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    pub domain: String,
    pub ranks: u32,
}

/// How a rank waits for a message.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WaitMode {
    /// Busy-poll (Open MPI's progress engine): the vCPU never halts.
    #[default]
    Poll,
    /// Spin at most `spin_us` of CPU, then block until the message comes.
    SpinBlock,
}

/// A custom job's communication after each compute phase (`kernel = "custom"`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Exchange {
    /// Nothing: the ranks only compute (and meet at the start and the end).
    None,
    /// A barrier (an all-reduce of nothing).
    #[default]
    Barrier,
    /// An all-reduce of `bytes`.
    AllReduce,
    /// Each rank exchanges `bytes` with its two ring neighbours (r ± 1).
    Ring,
    /// Each rank sends `bytes` to every other rank.
    AllToAll,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ParallelConfig {
    pub name: String,
    /// A NAS kernel's shape (`ep`, `lu`, `sp`, `bt`, `mg`, `ft`, `cg`; parallel/nas.rs) or
    /// `custom` (default): `iterations` × (`compute_us`, then `exchange`).
    #[serde(default)]
    pub kernel: nas::Kernel,
    /// The NAS problem class (`S`, `W`, `A`..`E` as the kernel has them); default: the class
    /// of seed 004 (EP D, LU/SP/BT/CG A, MG C, FT B).
    #[serde(default)]
    pub class: Option<String>,
    /// Ranks per domain, in rank order (rank 0 is the first domain's first rank).
    pub placement: Vec<Placement>,
    /// When the ranks start (default 0).
    #[serde(default)]
    pub start_ms: u64,
    /// Iterations (a preset's default: its class's; required for `custom`).
    #[serde(default)]
    pub iterations: Option<u32>,
    /// Compute per rank per iteration, before the spread (a preset's default: its calibration;
    /// required for `custom`).
    #[serde(default)]
    pub compute_us: Option<u64>,
    /// Each compute phase is drawn uniformly within ± this fraction (default 0.02).
    #[serde(default = "d_spread")]
    pub spread: f64,
    /// A custom job's exchange (default `barrier`).
    #[serde(default)]
    pub exchange: Exchange,
    /// A custom job's message size (default 8 bytes).
    #[serde(default = "d_bytes")]
    pub bytes: u32,
    /// `poll` (default) or `spin_block`.
    #[serde(default)]
    pub wait: WaitMode,
    /// `spin_block`'s spin bound, in µs of CPU (default 50).
    #[serde(default = "d_spin")]
    pub spin_us: u64,
    /// Shared memory: a message's fixed cost to the sender (default 1 µs) and per KiB (default
    /// 250 ns, ≈ 4 GB/s).
    #[serde(default = "d_shm")]
    pub shm_ns: u64,
    #[serde(default = "d_shm_kb")]
    pub shm_ns_per_kb: u64,
    /// TCP through the driver domain: the sender kernel's fixed cost (default 5 µs), the
    /// receiver kernel's (default 5 µs), and per KiB at each of the three copies (sender,
    /// netback, receiver; default 1 µs, ≈ 1 GB/s).
    #[serde(default = "d_send")]
    pub send_ns: u64,
    #[serde(default = "d_recv")]
    pub recv_ns: u64,
    #[serde(default = "d_net_kb")]
    pub net_ns_per_kb: u64,
    /// Pin a domain's k-th rank to its vCPU k (modulo its vCPUs); default: unpinned (Open MPI
    /// 1.6 does not bind).
    #[serde(default)]
    pub pin: bool,
    #[serde(default)]
    pub nice: i32,
}

fn d_spread() -> f64 {
    0.02
}
fn d_bytes() -> u32 {
    8
}
fn d_spin() -> u64 {
    50
}
fn d_shm() -> u64 {
    1_000
}
fn d_shm_kb() -> u64 {
    250
}
fn d_send() -> u64 {
    5_000
}
fn d_recv() -> u64 {
    5_000
}
fn d_net_kb() -> u64 {
    1_000
}

/// The job's resolved shape: what a rank does per iteration, and its costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub iterations: u32,
    pub compute: Nanos,
    pub kernel: nas::Kernel,
    pub class: char,
}

/// Where each rank lives: (part, index within the part), and each part's rank count.
#[derive(Clone, Debug)]
pub struct Layout {
    pub n: u32,
    pub of: Vec<(u16, u32)>,
    pub parts: Vec<u32>,
}

impl Layout {
    pub fn new(placement: &[Placement]) -> Layout {
        let mut of = Vec::new();
        for (p, pl) in placement.iter().enumerate() {
            of.extend((0..pl.ranks).map(|k| (p as u16, k)));
        }
        Layout {
            n: of.len() as u32,
            of,
            parts: placement.iter().map(|p| p.ranks).collect(),
        }
    }

    /// The channel in `to`'s part on which `to` receives from `from`.
    pub fn chan(&self, to: u32, from: u32) -> Chan {
        (self.of[to as usize].1 * self.n + from) as Chan
    }
}

impl ParallelConfig {
    /// The resolved shape; errors name the field.
    pub fn shape(&self) -> Result<Shape, (String, String)> {
        let class = nas::class(self.kernel, self.class.as_deref())?;
        let n: u32 = self.placement.iter().map(|p| p.ranks).sum();
        let (iters, compute) = nas::defaults(self.kernel, class, n);
        let iterations = match (self.iterations, iters) {
            (Some(i), _) => i,
            (None, Some(i)) => i,
            (None, None) => {
                return Err((
                    "iterations".into(),
                    "a custom job needs iterations (a preset has its class's)".into(),
                ))
            }
        };
        let compute = match (self.compute_us, compute) {
            (Some(c), _) => time_ns("compute_us", c, NS_PER_US)?,
            (None, Some(c)) => c,
            (None, None) => {
                return Err((
                    "compute_us".into(),
                    "a custom job needs compute_us (a preset has its calibration)".into(),
                ))
            }
        };
        Ok(Shape {
            iterations,
            compute,
            kernel: self.kernel,
            class,
        })
    }

    /// Checks the fields that need no other domain (the placement's domains are checked by
    /// [`check_placement`]).
    pub fn validate(&self) -> Result<(), (String, String)> {
        super::check_nice(self.nice)?;
        if self.placement.is_empty() {
            return Err((
                "placement".into(),
                "must place ranks in at least one domain".into(),
            ));
        }
        for (k, p) in self.placement.iter().enumerate() {
            if p.ranks == 0 {
                return Err((
                    format!("placement.{k}.ranks"),
                    "must be at least 1 (leave the domain out instead)".into(),
                ));
            }
            if self.placement[..k].iter().any(|o| o.domain == p.domain) {
                return Err((
                    format!("placement.{k}.domain"),
                    format!("domain '{}' is placed twice", p.domain),
                ));
            }
        }
        let n: u64 = self.placement.iter().map(|p| u64::from(p.ranks)).sum();
        if n > u64::from(MAX_RANKS) {
            return Err((
                "placement".into(),
                format!("places {n} ranks; at most {MAX_RANKS}"),
            ));
        }
        let s = self.shape()?;
        if s.iterations == 0 {
            return Err(("iterations".into(), "must be at least 1".into()));
        }
        nas::check_ranks(self.kernel, n as u32)?;
        if !(0.0..1.0).contains(&self.spread) {
            return Err(("spread".into(), "must be in [0, 1)".into()));
        }
        time_ns("start_ms", self.start_ms, NS_PER_MS)?;
        if self.wait == WaitMode::SpinBlock && self.spin_us == 0 {
            return Err((
                "spin_us".into(),
                "must be positive with wait = \"spin_block\"".into(),
            ));
        }
        time_ns("spin_us", self.spin_us, NS_PER_US)?;
        for (f, v) in [
            ("shm_ns", self.shm_ns),
            ("shm_ns_per_kb", self.shm_ns_per_kb),
            ("send_ns", self.send_ns),
            ("recv_ns", self.recv_ns),
            ("net_ns_per_kb", self.net_ns_per_kb),
        ] {
            if v > 1_000_000_000 {
                return Err((f.into(), "must be at most 1 s".into()));
            }
        }
        let layout = Layout::new(&self.placement);
        for p in 0..layout.parts.len() {
            let len = self.program(&layout, &s, first_rank(&layout, p)).len();
            if len >= u16::MAX as usize {
                return Err((
                    "kernel".into(),
                    format!("a rank's program has {len} steps; at most 65534"),
                ));
            }
        }
        Ok(())
    }

    /// One workload per placement entry (the job's *parts*, in order), each with its ranks.
    pub fn build_parts(&self, vcpus: &[u32]) -> Vec<WorkloadSpec> {
        let s = self.shape().expect("invariant: a built job validated");
        let layout = Layout::new(&self.placement);
        let start = self.start_ms * NS_PER_MS;
        let mut parts = Vec::with_capacity(layout.parts.len());
        let mut r = 0u32;
        for (p, pl) in self.placement.iter().enumerate() {
            let mut tasks = super::task_vec("placement.ranks", pl.ranks.into());
            for k in 0..pl.ranks {
                tasks.push(TaskSpec {
                    name: format!("{}.r{r}", self.name),
                    program: self.program(&layout, &s, r),
                    nice: self.nice,
                    policy: Policy::Normal,
                    rt_prio: 0,
                    times: Default::default(),
                    affinity: self
                        .pin
                        .then(|| vec![k % vcpus.get(p).copied().unwrap_or(1).max(1)]),
                    start,
                });
                r += 1;
            }
            parts.push(WorkloadSpec {
                name: self.name.clone(),
                kind: WorkloadKind::Parallel,
                tasks,
                channels: (pl.ranks * layout.n) as u16,
                counters: [
                    "ranks_started",
                    "ranks_done",
                    "start_ns",
                    "end_ns",
                    "net_msgs",
                    "part_done",
                    "part_end_ns",
                ]
                .map(String::from)
                .to_vec(),
                hists: vec!["iteration".into()],
                gap_pairs: vec![],
                tokens: vec![],
                hist_buckets: 0,
            });
        }
        parts
    }

    /// Rank `r`'s program.
    pub fn program(&self, layout: &Layout, s: &Shape, r: u32) -> Vec<Step> {
        let mut p = Prog {
            steps: Vec::new(),
            cfg: self,
            layout,
            r,
        };
        p.steps.push(Step::JobMark {
            mark: JobMark::Start(self.start_ms * NS_PER_MS),
        });
        nas::emit(&mut p, s);
        p.steps.push(Step::JobMark {
            mark: JobMark::Finish,
        });
        p.steps.push(Step::Exit);
        p.steps
    }
}

fn first_rank(layout: &Layout, part: usize) -> u32 {
    layout.parts[..part].iter().sum()
}

/// Checks the placement against the scenario's domains: `(name, driver, lives)` per domain,
/// `lives`: created or destroyed during the run. A job's ranks run in domains that exist for the
/// whole run; a job in several domains needs a driver domain, and places no rank in it (its
/// messages go through its netback). Errors name the field.
pub fn check_placement(
    cfg: &ParallelConfig,
    domains: &[(&str, bool, bool)],
) -> Result<(), (String, String)> {
    let driver = domains.iter().position(|d| d.1);
    for (k, p) in cfg.placement.iter().enumerate() {
        let Some(i) = domains.iter().position(|d| d.0 == p.domain) else {
            return Err((
                format!("placement.{k}.domain"),
                format!("no domain is named '{}'", p.domain),
            ));
        };
        if domains[i].2 {
            return Err((
                format!("placement.{k}.domain"),
                format!(
                    "'{}' is created or destroyed during the run: a job's ranks run in domains \
                     that exist throughout",
                    p.domain
                ),
            ));
        }
        if cfg.placement.len() > 1 {
            match driver {
                None => {
                    return Err((
                        format!("placement.{k}.domain"),
                        "a job across domains needs a driver domain for its messages: mark \
                         one [[domain]] with driver = true"
                            .into(),
                    ))
                }
                Some(d) if d == i => {
                    return Err((
                        format!("placement.{k}.domain"),
                        format!(
                            "'{}' is the driver domain: a job across domains places its ranks \
                             in guests behind it",
                            p.domain
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// A rank's program as it is written: compute phases, sends and receives, loops.
pub struct Prog<'a> {
    pub steps: Vec<Step>,
    cfg: &'a ParallelConfig,
    pub layout: &'a Layout,
    /// The rank.
    pub r: u32,
}

impl Prog<'_> {
    pub fn n(&self) -> u32 {
        self.layout.n
    }

    /// A compute phase of `ns` (before the spread).
    pub fn compute(&mut self, ns: Nanos) {
        if ns == 0 {
            return;
        }
        let d = (ns as f64 * self.cfg.spread) as Nanos;
        let dur = if d == 0 {
            Dist::Fixed(ns)
        } else {
            Dist::Uniform(ns - d, ns + d)
        };
        self.steps.push(Step::Compute { dur, kernel: false });
    }

    fn copy(per_kb: u64, bytes: u32) -> Nanos {
        (u64::from(bytes) * per_kb).div_ceil(1024)
    }

    /// Sends `bytes` to rank `to` (asynchronous: the sender goes on once it has handed the data
    /// over).
    pub fn send(&mut self, to: u32, bytes: u32) {
        if to == self.r {
            return;
        }
        let l = self.layout;
        let chan = l.chan(to, self.r);
        let c = self.cfg;
        if l.of[to as usize].0 == l.of[self.r as usize].0 {
            let cost = c.shm_ns + Self::copy(c.shm_ns_per_kb, bytes);
            self.steps.push(Step::Compute {
                dur: Dist::Fixed(cost),
                kernel: false,
            });
            self.steps.push(Step::Signal {
                chan,
                sync: false,
                wake_cost: 0,
            });
        } else {
            let copy = Self::copy(c.net_ns_per_kb, bytes);
            self.steps.push(Step::Compute {
                dur: Dist::Fixed(c.send_ns + copy),
                kernel: true,
            });
            self.steps.push(Step::NetSend {
                part: l.of[to as usize].0,
                chan,
                copy_ns: copy.min(u32::MAX as u64) as u32,
                rx_ns: (c.recv_ns + copy).min(u32::MAX as u64) as u32,
            });
        }
    }

    /// Waits for the next message from rank `from`.
    pub fn recv(&mut self, from: u32) {
        if from == self.r {
            return;
        }
        let chan = self.layout.chan(self.r, from);
        self.steps.push(match self.cfg.wait {
            WaitMode::Poll => Step::Spin { chan, wfe: false },
            WaitMode::SpinBlock => Step::SpinBlock {
                chan,
                bound: self.cfg.spin_us * NS_PER_US,
            },
        });
    }

    /// Sends to every partner, then receives from every partner (a halo exchange).
    pub fn exchange(&mut self, partners: &[u32], bytes: u32) {
        for &q in partners {
            self.send(q, bytes);
        }
        for &q in partners {
            self.recv(q);
        }
    }

    /// An all-reduce of `bytes` (a barrier with 0): dissemination, ⌈log2 N⌉ rounds, each a send
    /// to r + 2^k and a receive from r − 2^k.
    pub fn allreduce(&mut self, bytes: u32) {
        let n = self.n();
        let mut k = 1;
        while k < n {
            self.send((self.r + k) % n, bytes);
            self.recv((self.r + n - k) % n);
            k *= 2;
        }
    }

    /// An all-to-all: `bytes` to every other rank (r+1, r+2, ... in turn), then one message from
    /// each.
    pub fn alltoall(&mut self, bytes: u32) {
        let n = self.n();
        for k in 1..n {
            self.send((self.r + k) % n, bytes);
        }
        for k in 1..n {
            self.recv((self.r + n - k) % n);
        }
    }

    /// Marks the start of a loop body.
    pub fn here(&self) -> u16 {
        self.steps.len() as u16
    }

    /// Ends a loop body started at `at`, run `times` times in all.
    pub fn repeat(&mut self, at: u16, times: u32) {
        if times > 1 && (self.steps.len() as u16) > at {
            self.steps.push(Step::Goto {
                to: at,
                times: Some(times - 1),
            });
        }
    }

    /// Rank 0 ends an iteration.
    pub fn lap(&mut self) {
        if self.r == 0 {
            self.steps.push(Step::JobMark { mark: JobMark::Lap });
        }
    }

    /// A custom job's exchange.
    pub fn custom(&mut self) {
        let (n, r, b) = (self.n(), self.r, self.cfg.bytes);
        match self.cfg.exchange {
            Exchange::None => {}
            Exchange::Barrier => self.allreduce(0),
            Exchange::AllReduce => self.allreduce(b),
            Exchange::Ring => {
                let mut ps = vec![(r + 1) % n, (r + n - 1) % n];
                ps.dedup();
                self.exchange(&ps, b)
            }
            Exchange::AllToAll => self.alltoall(b),
        }
    }
}

/// The job's runtime in seconds (NaN until every rank that started has finished).
pub fn figure(counters: &[u64]) -> Figure {
    let (started, done) = (counters[STARTED as usize], counters[DONE as usize]);
    let value = if started > 0 && done == started {
        (counters[END_NS as usize] - counters[START_NS as usize]) as f64 / 1e9
    } else {
        f64::NAN
    };
    Figure {
        name: "runtime".into(),
        value,
        unit: "s".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(kernel: &str, iterations: u32) -> ParallelConfig {
        let src = format!(
            "name = \"j\"\nkernel = \"{kernel}\"\niterations = {iterations}\n\
             placement = [{{ domain = \"a\", ranks = 4 }}, {{ domain = \"b\", ranks = 4 }}, \
             {{ domain = \"c\", ranks = 4 }}, {{ domain = \"d\", ranks = 4 }}]\n\
             compute_us = 1000\n"
        );
        toml::from_str(&src).unwrap()
    }

    /// The steps a program executes, in order (loops unrolled, no `Goto`).
    fn trace(prog: &[Step]) -> Vec<Step> {
        let (mut pc, mut loops, mut out) = (0, vec![0u32; prog.len()], Vec::new());
        while pc < prog.len() {
            match prog[pc] {
                Step::Goto { to, times } => {
                    let n = times.expect("a job's loops are counted");
                    if loops[pc] < n {
                        loops[pc] += 1;
                        pc = to as usize;
                    } else {
                        loops[pc] = 0;
                        pc += 1;
                    }
                }
                Step::Exit => break,
                s => {
                    out.push(s);
                    pc += 1;
                }
            }
        }
        out
    }

    enum Op {
        Send(u32),
        Recv(u32),
    }

    /// Rank `r`'s sends and receives, in order.
    fn ops(l: &Layout, r: u32, prog: &[Step]) -> Vec<Op> {
        let n = l.n;
        let part = l.of[r as usize].0;
        let first = |p: u16| first_rank(l, p as usize);
        trace(prog)
            .into_iter()
            .filter_map(|s| match s {
                Step::Signal { chan, .. } => Some(Op::Send(first(part) + chan as u32 / n)),
                Step::NetSend { part, chan, .. } => Some(Op::Send(first(part) + chan as u32 / n)),
                Step::Spin { chan, .. } | Step::SpinBlock { chan, .. } => {
                    Some(Op::Recv(chan as u32 % n))
                }
                _ => None,
            })
            .collect()
    }

    /// Runs the ranks' sends and receives without time (a receive waits for a message from
    /// its sender): every rank must get to its end, and no message may be left over.
    fn completes(cfg: &ParallelConfig) -> usize {
        let s = cfg.shape().unwrap();
        let l = Layout::new(&cfg.placement);
        let n = l.n as usize;
        let progs: Vec<Vec<Op>> = (0..l.n)
            .map(|r| ops(&l, r, &cfg.program(&l, &s, r)))
            .collect();
        let mut pc = vec![0usize; n];
        let mut inbox = vec![0u64; n * n];
        let mut msgs = 0;
        loop {
            let mut moved = false;
            for r in 0..n {
                while let Some(op) = progs[r].get(pc[r]) {
                    match *op {
                        Op::Send(to) => {
                            inbox[to as usize * n + r] += 1;
                            msgs += 1;
                        }
                        Op::Recv(from) => {
                            let b = &mut inbox[r * n + from as usize];
                            if *b == 0 {
                                break;
                            }
                            *b -= 1;
                        }
                    }
                    pc[r] += 1;
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        for r in 0..n {
            assert_eq!(pc[r], progs[r].len(), "{:?}: rank {r} is stuck", cfg.kernel);
        }
        assert!(
            inbox.iter().all(|&b| b == 0),
            "{:?}: messages left",
            cfg.kernel
        );
        msgs
    }

    #[test]
    fn every_kernel_completes_with_every_message_received() {
        for k in ["ep", "lu", "sp", "bt", "mg", "ft", "cg", "custom"] {
            for it in [1, 3] {
                let mut c = job(k, it);
                for e in [
                    Exchange::None,
                    Exchange::Barrier,
                    Exchange::Ring,
                    Exchange::AllToAll,
                ] {
                    c.exchange = e;
                    c.validate().unwrap();
                    assert!(completes(&c) > 0);
                }
            }
        }
    }

    /// Receives per iteration of rank `r` (the difference between 2 and 1 iterations).
    fn recvs_per_iteration(k: &str, r: u32) -> usize {
        let count = |it| {
            let c = job(k, it);
            let l = Layout::new(&c.placement);
            let p = c.program(&l, &c.shape().unwrap(), r);
            ops(&l, r, &p)
                .iter()
                .filter(|o| matches!(o, Op::Recv(_)))
                .count()
        };
        count(2) - count(1)
    }

    #[test]
    fn the_kernels_synchronise_as_the_spec_counts() {
        // An all-reduce of 16 ranks is log2(16) = 4 pairwise rounds (spec §5.2 step 3).
        let c = job("custom", 1);
        let l = Layout::new(&c.placement);
        let mut p = Prog {
            steps: vec![],
            cfg: &c,
            layout: &l,
            r: 5,
        };
        p.allreduce(8);
        assert_eq!(ops(&l, 5, &p.steps).len(), 8);
        // EP: no communication per batch.
        assert_eq!(recvs_per_iteration("ep", 5), 0);
        // LU, an inner rank of the 4 × 4 grid: the 4-neighbour halo, then 62 k-planes of two
        // upstream receives down and two back up.
        assert_eq!(recvs_per_iteration("lu", 5), 4 + 62 * 2 * 2);
        // SP, BT: the face exchange with 6 neighbours, and 3 directions × 2 sweeps × 3
        // hand-offs: 19 synchronisations per step.
        assert_eq!(recvs_per_iteration("sp", 5), 6 + 18);
        assert_eq!(recvs_per_iteration("bt", 5), 6 + 18);
        // MG (4 × 2 × 2): 9 levels down and up, 6 halo receives each, and the norm.
        assert_eq!(recvs_per_iteration("mg", 5), 18 * 6 + 4);
        // FT: the transpose from 15 ranks and the checksum.
        assert_eq!(recvs_per_iteration("ft", 5), 15 + 4);
        // CG: 2 row-reduction steps, the transpose, 2 dot products of 2 steps: 7 rounds.
        assert_eq!(recvs_per_iteration("cg", 6), 7);
        // A diagonal rank of CG's grid (5 is at row 1, column 1) is its own transpose partner.
        assert_eq!(recvs_per_iteration("cg", 5), 6);
    }

    #[test]
    fn presets_follow_the_class_tables() {
        let mut c = job("lu", 1);
        c.iterations = None;
        c.compute_us = None;
        let s = c.shape().unwrap();
        assert_eq!((s.iterations, s.class), (250, 'A'));
        // The assumed serial 480 s, over 16 ranks and 250 iterations.
        assert_eq!(s.compute, 480 * 1_000_000_000 / 16 / 250);
        c.class = Some("b".into());
        let b = c.shape().unwrap();
        assert_eq!(b.iterations, 250);
        let ratio = b.compute as f64 / s.compute as f64;
        assert!((ratio - (102f64 / 64.0).powi(3)).abs() < 1e-6, "{ratio}");
        c.kernel = nas::Kernel::Ep;
        c.class = None;
        assert_eq!(c.shape().unwrap().class, 'D');
        c.kernel = nas::Kernel::Cg;
        assert_eq!(c.shape().unwrap().iterations, 15 * 25);
        c.class = Some("D".into());
        assert_eq!(c.shape().unwrap_err().0, "class");
    }

    #[test]
    fn ep_computes_its_iterations_and_nothing_else() {
        let c = job("ep", 10);
        let l = Layout::new(&c.placement);
        let p = c.program(&l, &c.shape().unwrap(), 0);
        let user: Nanos = trace(&p)
            .iter()
            .filter_map(|s| match s {
                Step::Compute {
                    dur: Dist::Uniform(a, b),
                    kernel: false,
                } => Some((a + b) / 2),
                _ => None,
            })
            .sum();
        assert_eq!(user, 10 * 1_000_000);
    }

    #[test]
    fn validation_names_the_field() {
        let mut c = job("custom", 1);
        c.placement[1].ranks = 0;
        assert_eq!(c.validate().unwrap_err().0, "placement.1.ranks");
        let mut c = job("custom", 1);
        c.placement[2].domain = "a".into();
        assert_eq!(c.validate().unwrap_err().0, "placement.2.domain");
        let mut c = job("custom", 1);
        c.iterations = None;
        assert_eq!(c.validate().unwrap_err().0, "iterations");
        let mut c = job("custom", 1);
        c.compute_us = None;
        assert_eq!(c.validate().unwrap_err().0, "compute_us");
        let mut c = job("lu", 1);
        c.placement.pop();
        c.placement[0].ranks = 1;
        assert_eq!(c.validate().unwrap_err().0, "placement");
        let mut c = job("sp", 1);
        c.placement[0].ranks = 5;
        assert_eq!(c.validate().unwrap_err().0, "placement");
        let mut c = job("custom", 1);
        c.wait = WaitMode::SpinBlock;
        c.spin_us = 0;
        assert_eq!(c.validate().unwrap_err().0, "spin_us");
        let mut c = job("custom", 1);
        c.spread = 1.5;
        assert_eq!(c.validate().unwrap_err().0, "spread");
        let c = job("custom", 1);
        let doms = [
            ("dom0", true, false),
            ("a", false, false),
            ("b", false, false),
            ("c", false, false),
        ];
        assert_eq!(
            check_placement(&c, &doms).unwrap_err().0,
            "placement.3.domain"
        );
        let doms = [
            ("dom0", true, false),
            ("a", false, false),
            ("b", false, true),
            ("c", false, false),
            ("d", false, false),
        ];
        let e = check_placement(&c, &doms).unwrap_err();
        assert_eq!(e.0, "placement.1.domain");
        assert!(e.1.contains("during the run"));
        let doms = [
            ("a", true, false),
            ("b", false, false),
            ("c", false, false),
            ("d", false, false),
        ];
        assert_eq!(
            check_placement(&c, &doms).unwrap_err().0,
            "placement.0.domain"
        );
        let doms = [
            ("a", false, false),
            ("b", false, false),
            ("c", false, false),
            ("d", false, false),
        ];
        assert!(check_placement(&c, &doms).unwrap_err().1.contains("driver"));
    }
}
