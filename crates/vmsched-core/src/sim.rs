//! The simulation: the recursive CPU/entity model driven by one event queue.
//!
//! **Model** (DESIGN.md §1–3). A *level* is one scheduler instance with its CPUs and entities:
//! the host (physical CPUs, vCPUs as entities) and each guest kernel (vCPUs as CPUs, tasks as
//! entities). A vCPU is both an entity of the host level and a CPU of its guest's level; it
//! *executes* only while it runs on a CPU that executes, down to a physical one. A task makes
//! progress only while it is current on an executing CPU. A third level (a nested guest) is a
//! level whose CPUs are entities of a guest level: the engine has no depth limit.
//!
//! **Time.** One wall clock. A guest's clock is the wall clock; its scheduler's task clock
//! subtracts steal time only when the guest accounts it ([`LevelClock`]).
//!
//! **Guest events wait for their vCPU.** A reschedule request, a tick or a task's timer aimed at
//! a vCPU that is not executing is kept pending and delivered when the vCPU next runs; if the vCPU
//! is halted (blocked at the host) it is first woken through the host scheduler's wake path
//! (Xen: the virtual timer or event channel kicks the vCPU; ERRATA X4).
//!
//! **The loop.** Pop the earliest slot, handle it, then run the FIFO of follow-up actions it
//! caused (deliveries of reschedule requests, task steps to interpret) at the same instant.
//! Actions keep the call stack shallow and the order deterministic.
//!
//! **Preemption points.** A guest kernel with `preempt = "none"` honours a reschedule of a CPU
//! whose task is inside a system call (a kernel compute step) only at the end of that step, the
//! syscall exit; `preempt = "full"` honours it at once. Host reschedules are always immediate.

use std::collections::VecDeque;

use crate::ids::{CpuId, EntityId, GCpu, GEnt, LevelId};
use crate::metrics::LatHist;
use crate::queue::{EventQueue, SlotId};
use crate::rng::Stream;
use crate::sched::{
    CpuInfo, CpuTopo, EntityInfo, EntityParams, LevelClock, Pick, Request, RunState, SchedCtx,
    Scheduler, WakeInfo,
};
use crate::time::{Nanos, SimTime, NEVER};
use crate::workload::{Chan, Dist, Step, WorkloadSpec};

/// Options of one level that are not the scheduler's.
#[derive(Clone, Copy, Debug, Default)]
pub struct LevelOpts {
    pub clock: LevelClock,
    /// Kernel preemption model: true = `CONFIG_PREEMPT` (reschedule at once, even in a syscall).
    pub preempt_full: bool,
    /// Delay of a reschedule request sent to a CPU of this level (an IPI).
    pub ipi_latency: Nanos,
    /// Cost of switching entities on a CPU of this level, paid by the incoming entity before it
    /// makes progress (tasks only).
    pub ctxsw_cost: Nanos,
    /// Guest levels on Arm: WFI and WFE are not trapped (Xen `vwfi=native`): an idle vCPU keeps
    /// its pCPU instead of blocking, and a WFE spin does not yield.
    pub vwfi_native: bool,
    /// Round trip of a trapped WFE (guest → hypervisor yield → guest); a `Spin` step with `wfe`
    /// yields the vCPU to the host after every such interval (ERRATA X4). 0: WFE is not trapped.
    pub wfe_trap: Nanos,
}

struct Level {
    name: String,
    sched: Box<dyn Scheduler>,
    opts: LevelOpts,
    cpu_info: Vec<CpuInfo>,
    ent_info: Vec<EntityInfo>,
    req: Vec<Request>,
    cpu_g: Vec<GCpu>,
    ent_g: Vec<GEnt>,
    timer_slots: Vec<SlotId>,
    tick_period: Option<Nanos>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EntKind {
    Vcpu(GCpu),
    Task(usize),
}

struct CpuState {
    level: LevelId,
    local: CpuId,
    /// The vCPU entity (at the parent level) this CPU is, or None for a physical CPU.
    backing: Option<GEnt>,
    executing: bool,
    sched_slot: SlotId,
    resched_slot: SlotId,
    tick_slot: SlotId,
    pending_resched: bool,
    pending_tick: bool,
    /// A reschedule waiting for the current task's system call to end.
    need_resched: bool,
    pending_timers: Vec<usize>,
    /// Tasks whose sleep timer is armed on this CPU (for slack coalescing, ERRATA W1).
    armed_timers: Vec<usize>,
}

/// Per-entity accounting (xenmon's figures).
pub struct EntStats {
    pub time: [Nanos; 4],
    pub runs: u64,
    pub preemptions: u64,
    pub migrations: u64,
    pub wait: LatHist,
}

struct EntState {
    level: LevelId,
    local: EntityId,
    kind: EntKind,
    state: RunState,
    since: SimTime,
    last_cpu: Option<GCpu>,
    /// Time runnable or offline since the start (the steal clock; never reset).
    steal: Nanos,
    stats: EntStats,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not started yet.
    New,
    /// Runnable, about to interpret the step at `pc`.
    Ready,
    /// Using the CPU for `remaining` (+ `overhead`).
    Computing,
    Blocked,
    Sleeping,
    Exited,
}

struct Task {
    ent: GEnt,
    wl: usize,
    program: Box<[Step]>,
    pc: usize,
    loops: Box<[u32]>,
    phase: Phase,
    remaining: Nanos,
    overhead: Nanos,
    kernel: bool,
    spinning: Option<Chan>,
    /// The current spin waits with WFE, trapping to the host.
    spin_wfe: bool,
    run_since: Option<SimTime>,
    done_slot: SlotId,
    timer_slot: SlotId,
    timer_cpu: GCpu,
    block_paid: bool,
    /// Soft deadline of the armed sleep timer (the hard one is the slot's time).
    timer_soft: SimTime,
    periodic_next: Option<SimTime>,
    latency_pending: Option<(u16, SimTime)>,
    rng: Stream,
}

struct Channel {
    tokens: u32,
    waiters: VecDeque<usize>,
    spinners: Vec<usize>,
}

struct WorkloadState {
    spec: WorkloadSpec,
    level: LevelId,
    tasks: Vec<usize>,
    chans: Vec<Channel>,
    counters: Vec<u64>,
    hists: Vec<LatHist>,
}

#[derive(Clone, Copy, Debug)]
enum SlotKind {
    SchedTimer(GCpu),
    Resched(GCpu),
    Tick(GCpu),
    TaskDone(usize),
    TaskTimer(usize),
    TaskStart(usize),
    LevelTimer(LevelId, u32),
    Sample,
    Warmup,
    End,
}

#[derive(Clone, Copy, Debug)]
enum Action {
    Resched(GCpu),
    Advance(usize),
    Tick(GCpu),
    TaskTimer(usize),
    IdleCheck(GCpu),
}

/// A sampled time series (only when the scenario asks for sampling).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Series {
    pub name: String,
    pub t_ns: Vec<u64>,
    pub values: Vec<i64>,
}

pub struct Simulation {
    now: SimTime,
    q: EventQueue,
    slot_kind: Vec<SlotKind>,
    levels: Vec<Level>,
    cpus: Vec<CpuState>,
    ents: Vec<EntState>,
    tasks: Vec<Task>,
    wls: Vec<WorkloadState>,
    actions: VecDeque<Action>,
    events: u64,
    end: SimTime,
    warmup: SimTime,
    sample_every: Nanos,
    sample_slot: SlotId,
    series: Vec<Series>,
    series_src: Vec<(usize, usize, usize)>,
    debug_checks: bool,
}

/// Assembles a simulation. Levels, CPUs and entities are numbered in the order they are added.
pub struct SimBuilder {
    sim: Simulation,
    seed: u64,
}

impl SimBuilder {
    pub fn new(seed: u64) -> SimBuilder {
        let mut q = EventQueue::new();
        let sample_slot = q.add_slot();
        SimBuilder {
            sim: Simulation {
                now: 0,
                q,
                slot_kind: vec![SlotKind::Sample],
                levels: Vec::new(),
                cpus: Vec::new(),
                ents: Vec::new(),
                tasks: Vec::new(),
                wls: Vec::new(),
                actions: VecDeque::with_capacity(64),
                events: 0,
                end: 0,
                warmup: 0,
                sample_every: 0,
                sample_slot,
                series: Vec::new(),
                series_src: Vec::new(),
                debug_checks: false,
            },
            seed,
        }
    }

    fn slot(&mut self, k: SlotKind) -> SlotId {
        let s = self.sim.q.add_slot();
        self.sim.slot_kind.push(k);
        debug_assert_eq!(self.sim.slot_kind.len(), self.sim.q_slots());
        s
    }

    pub fn add_level(&mut self, name: &str, sched: Box<dyn Scheduler>, opts: LevelOpts) -> LevelId {
        let l = LevelId(self.sim.levels.len() as u32);
        let n = sched.nr_timers();
        let tick_period = sched.tick_period();
        let timer_slots = (0..n)
            .map(|k| self.slot(SlotKind::LevelTimer(l, k)))
            .collect();
        self.sim.levels.push(Level {
            name: name.to_string(),
            sched,
            opts,
            cpu_info: Vec::new(),
            ent_info: Vec::new(),
            req: Vec::with_capacity(16),
            cpu_g: Vec::new(),
            ent_g: Vec::new(),
            timer_slots,
            tick_period,
        });
        l
    }

    fn add_cpu(&mut self, level: LevelId, topo: CpuTopo, backing: Option<GEnt>) -> GCpu {
        let g = GCpu(self.sim.cpus.len() as u32);
        let lv = &mut self.sim.levels[level.idx()];
        let local = CpuId(lv.cpu_info.len() as u32);
        lv.cpu_info.push(CpuInfo {
            curr: None,
            executing: backing.is_none(),
            steal_ns: 0,
            topo,
        });
        lv.cpu_g.push(g);
        let sched_slot = self.slot(SlotKind::SchedTimer(g));
        let resched_slot = self.slot(SlotKind::Resched(g));
        let tick_slot = self.slot(SlotKind::Tick(g));
        self.sim.cpus.push(CpuState {
            level,
            local,
            backing,
            executing: backing.is_none(),
            sched_slot,
            resched_slot,
            tick_slot,
            pending_resched: false,
            pending_tick: false,
            need_resched: false,
            pending_timers: Vec::with_capacity(8),
            armed_timers: Vec::with_capacity(8),
        });
        g
    }

    fn add_entity(&mut self, level: LevelId, params: EntityParams, kind: EntKind) -> GEnt {
        let g = GEnt(self.sim.ents.len() as u32);
        let lv = &mut self.sim.levels[level.idx()];
        let local = EntityId(lv.ent_info.len() as u32);
        lv.ent_info.push(EntityInfo {
            runnable: false,
            on_cpu: None,
            params,
        });
        lv.ent_g.push(g);
        self.sim.ents.push(EntState {
            level,
            local,
            kind,
            state: RunState::Blocked,
            since: 0,
            last_cpu: None,
            steal: 0,
            stats: EntStats {
                time: [0; 4],
                runs: 0,
                preemptions: 0,
                migrations: 0,
                wait: LatHist::with_precision(0, 2),
            },
        });
        g
    }

    /// Adds the physical CPUs of the host level.
    pub fn add_pcpus(&mut self, level: LevelId, topo: &[CpuTopo]) {
        for t in topo {
            self.add_cpu(level, *t, None);
        }
    }

    /// Adds a vCPU: an entity of `host` and a CPU of `guest`.
    pub fn add_vcpu(&mut self, host: LevelId, guest: LevelId, params: EntityParams, topo: CpuTopo) {
        let cpu = GCpu(self.sim.cpus.len() as u32);
        let e = self.add_entity(host, params, EntKind::Vcpu(cpu));
        let c = self.add_cpu(guest, topo, Some(e));
        debug_assert_eq!(c, cpu);
    }

    /// Adds a workload's tasks to a guest level. `params(i)` gives the entity parameters of the
    /// workload's task `i`.
    pub fn add_workload(
        &mut self,
        level: LevelId,
        spec: WorkloadSpec,
        params: impl Fn(usize) -> EntityParams,
    ) {
        let wl = self.sim.wls.len();
        let mut tasks = Vec::new();
        for (i, ts) in spec.tasks.iter().enumerate() {
            let t = self.sim.tasks.len();
            let ent = self.add_entity(level, params(i), EntKind::Task(t));
            let done_slot = self.slot(SlotKind::TaskDone(t));
            let timer_slot = self.slot(SlotKind::TaskTimer(t));
            let start_slot = self.slot(SlotKind::TaskStart(t));
            let name = format!("{}/{}", self.sim.levels[level.idx()].name, ts.name);
            self.sim.tasks.push(Task {
                ent,
                wl,
                program: ts.program.clone().into_boxed_slice(),
                pc: 0,
                loops: vec![0; ts.program.len()].into_boxed_slice(),
                phase: Phase::New,
                remaining: 0,
                overhead: 0,
                kernel: false,
                spinning: None,
                spin_wfe: false,
                run_since: None,
                done_slot,
                timer_slot,
                timer_cpu: GCpu(0),
                block_paid: false,
                timer_soft: 0,
                periodic_next: None,
                latency_pending: None,
                rng: Stream::new(self.seed, &name),
            });
            self.sim.q.arm(start_slot, ts.start);
            tasks.push(t);
        }
        let chans = (0..spec.channels)
            .map(|c| Channel {
                tokens: spec.tokens.get(c as usize).copied().unwrap_or(0),
                waiters: VecDeque::with_capacity(tasks.len()),
                spinners: Vec::with_capacity(tasks.len()),
            })
            .collect();
        let counters = vec![0; spec.counters.len()];
        let hists = spec
            .hists
            .iter()
            .map(|_| LatHist::new(spec.hist_buckets))
            .collect();
        self.sim.wls.push(WorkloadState {
            spec,
            level,
            tasks,
            chans,
            counters,
            hists,
        });
    }

    /// Finishes the build: calls every scheduler's `insert` and arms the run's end.
    pub fn build(mut self, duration: Nanos, warmup: Nanos, sample_every: Nanos) -> Simulation {
        let end = self.slot(SlotKind::End);
        self.sim.q.arm(end, duration);
        if warmup > 0 {
            let w = self.slot(SlotKind::Warmup);
            self.sim.q.arm(w, warmup);
        }
        let mut sim = self.sim;
        sim.end = duration;
        sim.warmup = warmup;
        sim.sample_every = sample_every;
        for l in 0..sim.levels.len() {
            for e in 0..sim.levels[l].ent_info.len() {
                sim.with_sched(LevelId(l as u32), |s, ctx| {
                    s.insert(ctx, EntityId(e as u32))
                });
            }
        }
        if let Some(samples) = duration.checked_div(sample_every) {
            let cap = samples as usize + 1;
            for (w, wl) in sim.wls.iter().enumerate() {
                for &(a, b) in &wl.spec.gap_pairs {
                    sim.series.push(Series {
                        name: format!(
                            "{}/{}: probe({}) - probe({})",
                            sim.levels[wl.level.idx()].name,
                            wl.spec.name,
                            wl.spec.tasks[a].name,
                            wl.spec.tasks[b].name
                        ),
                        t_ns: Vec::with_capacity(cap),
                        values: Vec::with_capacity(cap),
                    });
                    sim.series_src.push((w, a, b));
                }
            }
            sim.q.arm(sim.sample_slot, sample_every);
        }
        sim
    }
}

impl Simulation {
    fn q_slots(&self) -> usize {
        self.slot_kind.len()
    }

    pub fn now(&self) -> SimTime {
        self.now
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    pub fn end(&self) -> SimTime {
        self.end
    }

    pub fn warmup(&self) -> SimTime {
        self.warmup
    }

    /// Check the engine invariants after every event (slow; for tests).
    pub fn set_debug_checks(&mut self, on: bool) {
        self.debug_checks = on;
    }

    /// Runs a hook of level `l` with a context, then turns its requests into actions.
    fn with_sched<R>(
        &mut self,
        l: LevelId,
        f: impl FnOnce(&mut dyn Scheduler, &mut SchedCtx) -> R,
    ) -> R {
        let lv = &mut self.levels[l.idx()];
        let r = {
            let mut ctx = SchedCtx::new(
                self.now,
                lv.opts.clock,
                &lv.cpu_info,
                &lv.ent_info,
                &mut lv.req,
            );
            f(lv.sched.as_mut(), &mut ctx)
        };
        self.drain_requests(l);
        r
    }

    fn drain_requests(&mut self, l: LevelId) {
        let n = self.levels[l.idx()].req.len();
        for i in 0..n {
            let r = self.levels[l.idx()].req[i];
            match r {
                Request::Resched(c) => {
                    let g = self.levels[l.idx()].cpu_g[c.idx()];
                    let lat = self.levels[l.idx()].opts.ipi_latency;
                    if lat == 0 {
                        self.actions.push_back(Action::Resched(g));
                    } else {
                        let s = self.cpus[g.idx()].resched_slot;
                        self.q.arm_min(s, self.now + lat);
                    }
                }
                Request::Timer(k, at) => {
                    let s = *self.levels[l.idx()]
                        .timer_slots
                        .get(k as usize)
                        .unwrap_or_else(|| panic!("scheduler timer key {k} beyond nr_timers"));
                    match at {
                        Some(t) => self.q.arm(s, t.max(self.now)),
                        None => self.q.cancel(s),
                    }
                }
            }
        }
        self.levels[l.idx()].req.drain(..n);
    }

    /// Runs until simulated time `until` (inclusive of events at that time).
    pub fn run_until(&mut self, until: SimTime) {
        while let Some(t) = self.q.peek_time() {
            if t > until {
                break;
            }
            let (t, slot) = self.q.pop().expect("peeked");
            assert!(
                t >= self.now,
                "invariant: time went back from {} to {t}",
                self.now
            );
            self.now = t;
            self.events += 1;
            self.handle(slot);
            self.run_actions();
            if self.debug_checks {
                if let Err(e) = self.check_invariants() {
                    panic!("invariant broken at t={}: {e}", self.now);
                }
            }
        }
        self.now = self.now.max(until);
    }

    /// Runs the whole scenario.
    pub fn run(&mut self) {
        self.run_until(self.end);
        self.close_intervals();
    }

    fn handle(&mut self, slot: SlotId) {
        match self.slot_kind[slot.0 as usize] {
            SlotKind::SchedTimer(c) | SlotKind::Resched(c) => self.deliver_resched(c),
            SlotKind::Tick(c) => {
                if self.cpus[c.idx()].executing {
                    self.do_tick(c);
                } else {
                    self.cpus[c.idx()].pending_tick = true;
                }
            }
            SlotKind::TaskDone(t) => self.compute_done(t),
            SlotKind::TaskTimer(t) => self.task_timer(t),
            SlotKind::TaskStart(t) => {
                self.tasks[t].phase = Phase::Ready;
                let e = self.tasks[t].ent;
                self.wake_entity(
                    e,
                    WakeInfo {
                        new: true,
                        ..Default::default()
                    },
                );
            }
            SlotKind::LevelTimer(l, k) => self.with_sched(l, |s, ctx| s.on_timer(ctx, k)),
            SlotKind::Sample => {
                self.sample();
                self.q.arm(self.sample_slot, self.now + self.sample_every);
            }
            SlotKind::Warmup => self.reset_metrics(),
            SlotKind::End => {}
        }
    }

    fn run_actions(&mut self) {
        while let Some(a) = self.actions.pop_front() {
            match a {
                Action::Resched(c) => self.deliver_resched(c),
                Action::Advance(t) => self.advance(t),
                Action::Tick(c) => {
                    if self.cpus[c.idx()].executing {
                        self.do_tick(c);
                    } else {
                        self.cpus[c.idx()].pending_tick = true;
                    }
                }
                Action::TaskTimer(t) => self.task_timer(t),
                Action::IdleCheck(c) => {
                    let cs = &self.cpus[c.idx()];
                    let curr = self.levels[cs.level.idx()].cpu_info[cs.local.idx()].curr;
                    if cs.executing && curr.is_none() {
                        self.do_schedule(c);
                    }
                }
            }
        }
    }

    fn curr_of(&self, c: GCpu) -> Option<GEnt> {
        let cs = &self.cpus[c.idx()];
        let lv = &self.levels[cs.level.idx()];
        lv.cpu_info[cs.local.idx()].curr.map(|e| lv.ent_g[e.idx()])
    }

    fn cpu_of_ent(&self, g: GEnt) -> Option<GCpu> {
        let es = &self.ents[g.idx()];
        let lv = &self.levels[es.level.idx()];
        lv.ent_info[es.local.idx()]
            .on_cpu
            .map(|c| lv.cpu_g[c.idx()])
    }

    /// A reschedule request reaches CPU `c`.
    fn deliver_resched(&mut self, c: GCpu) {
        if !self.cpus[c.idx()].executing {
            self.cpus[c.idx()].pending_resched = true;
            self.kick_backing(c);
            return;
        }
        if let Some(g) = self.curr_of(c) {
            if let EntKind::Task(t) = self.ents[g.idx()].kind {
                let task = &self.tasks[t];
                let lv = &self.levels[self.cpus[c.idx()].level.idx()];
                if task.phase == Phase::Computing && task.kernel && !lv.opts.preempt_full {
                    self.cpus[c.idx()].need_resched = true;
                    return;
                }
            }
        }
        self.do_schedule(c);
    }

    /// Wakes the vCPU behind `c` if it is halted, so a pending guest event gets delivered.
    fn kick_backing(&mut self, c: GCpu) {
        if let Some(b) = self.cpus[c.idx()].backing {
            if self.ents[b.idx()].state == RunState::Blocked {
                self.wake_entity(b, WakeInfo::default());
            }
        }
    }

    fn do_schedule(&mut self, c: GCpu) {
        let (l, lc) = (self.cpus[c.idx()].level, self.cpus[c.idx()].local);
        debug_assert!(self.cpus[c.idx()].executing);
        self.cpus[c.idx()].need_resched = false;
        self.cpus[c.idx()].pending_resched = false;
        let prev = self.levels[l.idx()].cpu_info[lc.idx()].curr;
        let pick: Pick = self.with_sched(l, |s, ctx| s.schedule(ctx, lc));
        if let Some(n) = pick.next {
            let info = &self.levels[l.idx()].ent_info[n.idx()];
            assert!(
                info.runnable,
                "invariant: {} picked {} on CPU {}, which is not runnable",
                self.levels[l.idx()].sched.name(),
                info.params.name,
                lc.0
            );
            assert!(
                info.params.hard_affinity.contains(lc),
                "invariant: {} picked {} on CPU {} outside its hard affinity",
                self.levels[l.idx()].sched.name(),
                info.params.name,
                lc.0
            );
            assert!(
                info.on_cpu.is_none() || info.on_cpu == Some(lc),
                "invariant: {} picked {} on CPU {} while it runs on CPU {:?}",
                self.levels[l.idx()].sched.name(),
                info.params.name,
                lc.0,
                info.on_cpu
            );
        }
        let slot = self.cpus[c.idx()].sched_slot;
        match pick.slice {
            Some(d) => self.q.arm(slot, self.now + d),
            None => self.q.cancel(slot),
        }
        if pick.next == prev {
            return;
        }
        if let Some(p) = prev {
            self.switch_out(l, p, c);
        }
        if let Some(n) = pick.next {
            self.switch_in(l, n, c);
        }
        if let Some(p) = prev {
            self.with_sched(l, |s, ctx| s.context_saved(ctx, p));
        }
        if pick.next.is_none() {
            self.cpu_idle(c);
        }
    }

    fn set_runstate(&mut self, g: GEnt, new: RunState) {
        let now = self.now;
        let e = &mut self.ents[g.idx()];
        let d = now - e.since;
        e.stats.time[e.state as usize] += d;
        if matches!(e.state, RunState::Runnable | RunState::Offline) {
            e.steal += d;
        }
        e.state = new;
        e.since = now;
        if let EntKind::Vcpu(vc) = e.kind {
            let steal = e.steal;
            let cs = &self.cpus[vc.idx()];
            self.levels[cs.level.idx()].cpu_info[cs.local.idx()].steal_ns = steal;
        }
    }

    fn switch_out(&mut self, l: LevelId, e: EntityId, c: GCpu) {
        let lv = &mut self.levels[l.idx()];
        let g = lv.ent_g[e.idx()];
        lv.ent_info[e.idx()].on_cpu = None;
        lv.cpu_info[self.cpus[c.idx()].local.idx()].curr = None;
        let runnable = lv.ent_info[e.idx()].runnable;
        self.set_runstate(
            g,
            if runnable {
                RunState::Runnable
            } else {
                RunState::Blocked
            },
        );
        if runnable {
            self.ents[g.idx()].stats.preemptions += 1;
        }
        match self.ents[g.idx()].kind {
            EntKind::Vcpu(vc) => self.stop_executing(vc),
            EntKind::Task(t) => self.stop_progress(t),
        }
    }

    fn switch_in(&mut self, l: LevelId, e: EntityId, c: GCpu) {
        let lc = self.cpus[c.idx()].local;
        let lv = &mut self.levels[l.idx()];
        let g = lv.ent_g[e.idx()];
        lv.ent_info[e.idx()].on_cpu = Some(lc);
        lv.cpu_info[lc.idx()].curr = Some(e);
        let ctxsw = lv.opts.ctxsw_cost;
        let has_tick = lv.tick_period.is_some();
        let es = &mut self.ents[g.idx()];
        if es.state == RunState::Runnable && self.now >= self.warmup {
            es.stats.wait.record(self.now - es.since);
        }
        es.stats.runs += 1;
        if es.last_cpu.is_some_and(|p| p != c) {
            es.stats.migrations += 1;
        }
        es.last_cpu = Some(c);
        self.set_runstate(g, RunState::Running);
        if has_tick && !self.q.is_armed(self.cpus[c.idx()].tick_slot) {
            self.arm_tick(c);
        }
        match self.ents[g.idx()].kind {
            EntKind::Vcpu(vc) => {
                if self.cpus[c.idx()].executing {
                    self.start_executing(vc);
                }
            }
            EntKind::Task(t) => {
                self.tasks[t].overhead += ctxsw;
                if self.cpus[c.idx()].executing {
                    self.start_progress(t);
                }
            }
        }
    }

    fn start_executing(&mut self, vc: GCpu) {
        let (l, lc) = (self.cpus[vc.idx()].level, self.cpus[vc.idx()].local);
        self.cpus[vc.idx()].executing = true;
        self.levels[l.idx()].cpu_info[lc.idx()].executing = true;
        let cs = &mut self.cpus[vc.idx()];
        if cs.pending_tick {
            cs.pending_tick = false;
            self.actions.push_back(Action::Tick(vc));
        }
        let mut timers = std::mem::take(&mut self.cpus[vc.idx()].pending_timers);
        for t in timers.drain(..) {
            self.actions.push_back(Action::TaskTimer(t));
        }
        self.cpus[vc.idx()].pending_timers = timers;
        if self.cpus[vc.idx()].pending_resched {
            self.cpus[vc.idx()].pending_resched = false;
            self.actions.push_back(Action::Resched(vc));
        }
        match self.curr_of(vc) {
            Some(g) => match self.ents[g.idx()].kind {
                EntKind::Task(t) => self.start_progress(t),
                EntKind::Vcpu(x) => self.start_executing(x),
            },
            None => self.actions.push_back(Action::IdleCheck(vc)),
        }
    }

    fn stop_executing(&mut self, vc: GCpu) {
        let (l, lc) = (self.cpus[vc.idx()].level, self.cpus[vc.idx()].local);
        self.cpus[vc.idx()].executing = false;
        self.levels[l.idx()].cpu_info[lc.idx()].executing = false;
        if let Some(g) = self.curr_of(vc) {
            match self.ents[g.idx()].kind {
                EntKind::Task(t) => self.stop_progress(t),
                EntKind::Vcpu(x) => self.stop_executing(x),
            }
        }
    }

    /// The CPU picked nothing: stop its tick, and halt the vCPU behind it unless a guest event
    /// is pending (Xen's block returns at once then).
    fn cpu_idle(&mut self, c: GCpu) {
        let s = self.cpus[c.idx()].tick_slot;
        self.q.cancel(s);
        self.cpus[c.idx()].pending_tick = false;
        let cs = &self.cpus[c.idx()];
        if let Some(b) = cs.backing {
            if cs.pending_resched || !cs.pending_timers.is_empty() {
                return;
            }
            if self.levels[cs.level.idx()].opts.vwfi_native {
                // WFI is not trapped: the vCPU idles on its pCPU.
                return;
            }
            if self.ents[b.idx()].state == RunState::Running {
                self.block_entity(b);
            }
        }
    }

    fn arm_tick(&mut self, c: GCpu) {
        let p = self.levels[self.cpus[c.idx()].level.idx()]
            .tick_period
            .expect("tick period");
        let next = (self.now / p + 1) * p;
        self.q.arm(self.cpus[c.idx()].tick_slot, next);
    }

    fn do_tick(&mut self, c: GCpu) {
        let (l, lc) = (self.cpus[c.idx()].level, self.cpus[c.idx()].local);
        if self.levels[l.idx()].cpu_info[lc.idx()].curr.is_none() {
            return;
        }
        self.with_sched(l, |s, ctx| s.tick(ctx, lc));
        self.arm_tick(c);
        if !self.cpus[c.idx()].armed_timers.is_empty() {
            self.timer_interrupt(c);
        }
    }

    /// `g`, current on its CPU, stops being runnable; its CPU reschedules at once.
    fn block_entity(&mut self, g: GEnt) {
        let (l, e) = (self.ents[g.idx()].level, self.ents[g.idx()].local);
        let c = self
            .cpu_of_ent(g)
            .expect("invariant: block of an entity that is not running");
        self.levels[l.idx()].ent_info[e.idx()].runnable = false;
        self.with_sched(l, |s, ctx| s.block(ctx, e));
        self.do_schedule(c);
    }

    fn wake_entity(&mut self, g: GEnt, info: WakeInfo) {
        let (l, e) = (self.ents[g.idx()].level, self.ents[g.idx()].local);
        let ei = &mut self.levels[l.idx()].ent_info[e.idx()];
        assert!(
            !ei.runnable,
            "invariant: wake of runnable entity {}",
            ei.params.name
        );
        ei.runnable = true;
        self.set_runstate(g, RunState::Runnable);
        self.with_sched(l, |s, ctx| s.wake(ctx, e, info));
    }

    // ---- tasks ---------------------------------------------------------------------------

    fn task_cpu(&self, t: usize) -> Option<GCpu> {
        self.cpu_of_ent(self.tasks[t].ent)
    }

    fn start_progress(&mut self, t: usize) {
        let now = self.now;
        let task = &mut self.tasks[t];
        task.run_since = Some(now);
        match task.phase {
            Phase::Computing => {
                let at = now
                    .saturating_add(task.overhead)
                    .saturating_add(task.remaining)
                    .min(NEVER);
                self.q.arm(task.done_slot, at);
            }
            Phase::Ready => self.actions.push_back(Action::Advance(t)),
            _ => {}
        }
    }

    fn stop_progress(&mut self, t: usize) {
        let now = self.now;
        let task = &mut self.tasks[t];
        if let Some(s) = task.run_since.take() {
            let mut el = now - s;
            let o = el.min(task.overhead);
            task.overhead -= o;
            el -= o;
            if task.phase == Phase::Computing {
                task.remaining = task.remaining.saturating_sub(el);
            }
            self.q.cancel(task.done_slot);
        }
    }

    fn begin_compute(&mut self, t: usize, d: Nanos, kernel: bool) {
        let now = self.now;
        let task = &mut self.tasks[t];
        task.phase = Phase::Computing;
        task.remaining = d;
        task.kernel = kernel;
        if task.run_since.is_some() {
            task.run_since = Some(now);
            let at = now
                .saturating_add(task.overhead)
                .saturating_add(d)
                .min(NEVER);
            self.q.arm(task.done_slot, at);
        }
    }

    fn compute_done(&mut self, t: usize) {
        if self.tasks[t].spinning.is_some() {
            self.wfe_trap(t);
            return;
        }
        let task = &mut self.tasks[t];
        task.overhead = 0;
        task.remaining = 0;
        task.run_since = Some(self.now);
        task.phase = Phase::Ready;
        let kernel = std::mem::replace(&mut task.kernel, false);
        let c = self
            .task_cpu(t)
            .expect("invariant: a computing task is on a CPU");
        if kernel && self.cpus[c.idx()].need_resched {
            // The syscall exits: the deferred reschedule happens now.
            self.do_schedule(c);
            if self.task_cpu(t) != Some(c) {
                return;
            }
        }
        self.advance(t);
    }

    /// A WFE-spinning task's wait traps to the host: its vCPU yields, then spins on.
    fn wfe_trap(&mut self, t: usize) {
        let c = self
            .task_cpu(t)
            .expect("invariant: a spinning task is on a CPU");
        let chunk = self.levels[self.cpus[c.idx()].level.idx()].opts.wfe_trap;
        let task = &mut self.tasks[t];
        task.remaining = chunk;
        task.run_since = Some(self.now);
        if let Some(b) = self.cpus[c.idx()].backing {
            let (l, e) = (self.ents[b.idx()].level, self.ents[b.idx()].local);
            let pc = self
                .cpu_of_ent(b)
                .expect("invariant: an executing vCPU runs");
            self.with_sched(l, |s, ctx| s.yield_(ctx, e));
            self.do_schedule(pc);
        }
        if self.tasks[t].run_since.is_some() {
            let at = self.now + self.tasks[t].overhead + chunk;
            self.q.arm(self.tasks[t].done_slot, at);
        }
    }

    fn draw(&mut self, t: usize, d: Dist) -> Nanos {
        match d {
            Dist::Fixed(v) => v,
            Dist::Uniform(a, b) => self.tasks[t].rng.range(a, b),
            Dist::Exp(m) => self.tasks[t].rng.exp(m as f64),
        }
    }

    /// Interprets task `t`'s program from its `pc` until a step takes time or blocks.
    fn advance(&mut self, t: usize) {
        let Some(c) = self.task_cpu(t) else { return };
        if !self.cpus[c.idx()].executing || self.tasks[t].phase != Phase::Ready {
            return;
        }
        let measuring = self.now >= self.warmup;
        if let Some((h, expiry)) = self.tasks[t].latency_pending.take() {
            if measuring {
                let wl = self.tasks[t].wl;
                self.wls[wl].hists[h as usize].record(self.now - expiry);
            }
        }
        if self.tasks[t].overhead > 0 {
            // Pay the context switch before the step (kernel time).
            self.begin_compute(t, 0, true);
            return;
        }
        let wl = self.tasks[t].wl;
        for _ in 0..100_000 {
            let pc = self.tasks[t].pc;
            let step = self.tasks[t].program[pc].clone();
            match step {
                Step::Compute { dur, kernel } => {
                    self.tasks[t].pc += 1;
                    let d = self.draw(t, dur);
                    if !kernel && self.cpus[c.idx()].need_resched {
                        // Return to user space with a reschedule pending.
                        self.tasks[t].phase = Phase::Computing;
                        self.tasks[t].remaining = d;
                        self.tasks[t].kernel = false;
                        self.do_schedule(c);
                        if self.task_cpu(t) == Some(c) && self.cpus[c.idx()].executing {
                            self.start_progress(t);
                        }
                        return;
                    }
                    self.begin_compute(t, d, kernel);
                    return;
                }
                Step::Wait {
                    chan,
                    block_cost,
                    fast,
                    slow,
                } => {
                    let ch = &mut self.wls[wl].chans[chan as usize];
                    if ch.tokens > 0 {
                        ch.tokens -= 1;
                        self.tasks[t].block_paid = false;
                        self.tasks[t].pc += 1;
                        if let (Some(k), true) = (fast, measuring) {
                            self.wls[wl].counters[k as usize] += 1;
                        }
                        continue;
                    }
                    if block_cost > 0 && !self.tasks[t].block_paid {
                        self.tasks[t].block_paid = true;
                        self.begin_compute(t, block_cost, true);
                        return;
                    }
                    self.tasks[t].block_paid = false;
                    self.tasks[t].pc += 1;
                    if let (Some(k), true) = (slow, measuring) {
                        self.wls[wl].counters[k as usize] += 1;
                    }
                    self.wls[wl].chans[chan as usize].waiters.push_back(t);
                    self.tasks[t].phase = Phase::Blocked;
                    let g = self.tasks[t].ent;
                    self.block_entity(g);
                    return;
                }
                Step::Signal {
                    chan,
                    sync,
                    wake_cost,
                } => {
                    self.tasks[t].pc += 1;
                    let woke = self.signal(wl, chan, Some(c), sync);
                    if woke && wake_cost > 0 {
                        self.begin_compute(t, wake_cost, true);
                        return;
                    }
                }
                Step::Spin { chan, wfe } => {
                    let ch = &mut self.wls[wl].chans[chan as usize];
                    self.tasks[t].pc += 1;
                    if ch.tokens > 0 {
                        ch.tokens -= 1;
                        continue;
                    }
                    ch.spinners.push(t);
                    let trap = self.levels[self.cpus[c.idx()].level.idx()].opts.wfe_trap;
                    let wfe = wfe && trap > 0 && self.cpus[c.idx()].backing.is_some();
                    self.tasks[t].spinning = Some(chan);
                    self.tasks[t].spin_wfe = wfe;
                    self.begin_compute(t, if wfe { trap } else { NEVER }, false);
                    return;
                }
                Step::Sleep { dur, slack } => {
                    self.tasks[t].pc += 1;
                    let d = self.draw(t, dur);
                    self.sleep_until(t, c, self.now + d, slack);
                    return;
                }
                Step::Periodic {
                    interval,
                    slack,
                    hist,
                } => {
                    self.tasks[t].pc += 1;
                    let next = match self.tasks[t].periodic_next {
                        None => self.now + interval,
                        Some(mut n) => {
                            n += interval;
                            while n <= self.now {
                                n += interval;
                            }
                            n
                        }
                    };
                    self.tasks[t].periodic_next = Some(next);
                    self.tasks[t].latency_pending = Some((hist, next));
                    self.sleep_until(t, c, next, slack);
                    return;
                }
                Step::Yield => {
                    self.tasks[t].pc += 1;
                    let (l, e) = (
                        self.ents[self.tasks[t].ent.idx()].level,
                        self.ents[self.tasks[t].ent.idx()].local,
                    );
                    self.with_sched(l, |s, ctx| s.yield_(ctx, e));
                    self.do_schedule(c);
                    if self.task_cpu(t) != Some(c) {
                        return;
                    }
                }
                Step::Count { counter } => {
                    self.tasks[t].pc += 1;
                    if measuring {
                        self.wls[wl].counters[counter as usize] += 1;
                    }
                }
                Step::Goto { to, times } => match times {
                    None => self.tasks[t].pc = to as usize,
                    Some(n) => {
                        let k = &mut self.tasks[t].loops[pc];
                        if *k < n {
                            *k += 1;
                            self.tasks[t].pc = to as usize;
                        } else {
                            *k = 0;
                            self.tasks[t].pc += 1;
                        }
                    }
                },
                Step::Exit => {
                    self.tasks[t].phase = Phase::Exited;
                    let g = self.tasks[t].ent;
                    self.block_entity(g);
                    return;
                }
            }
            if self.tasks[t].pc >= self.tasks[t].program.len() {
                self.tasks[t].phase = Phase::Exited;
                let g = self.tasks[t].ent;
                self.block_entity(g);
                return;
            }
        }
        panic!(
            "invariant: task {} ran 100000 steps without time passing",
            self.levels[self.ents[self.tasks[t].ent.idx()].level.idx()].ent_info
                [self.ents[self.tasks[t].ent.idx()].local.idx()]
            .params
            .name
        );
    }

    /// Arms task `t`'s sleep timer on CPU `c`: soft deadline `expiry`, hard deadline
    /// `expiry + slack` (Linux hrtimer slack, ERRATA W1), then blocks the task.
    fn sleep_until(&mut self, t: usize, c: GCpu, expiry: SimTime, slack: Nanos) {
        let task = &mut self.tasks[t];
        task.timer_cpu = c;
        task.timer_soft = expiry;
        task.phase = Phase::Sleeping;
        self.q.arm(task.timer_slot, expiry + slack);
        self.cpus[c.idx()].armed_timers.push(t);
        let g = task.ent;
        self.block_entity(g);
    }

    /// Task `t`'s sleep timer reached its hard deadline. Delivered on the CPU it was armed on;
    /// waits for that vCPU.
    fn task_timer(&mut self, t: usize) {
        let c = self.tasks[t].timer_cpu;
        if self.tasks[t].phase != Phase::Sleeping {
            return;
        }
        if !self.cpus[c.idx()].executing {
            if !self.cpus[c.idx()].pending_timers.contains(&t) {
                self.cpus[c.idx()].pending_timers.push(t);
            }
            self.kick_backing(c);
            return;
        }
        self.timer_interrupt(c);
    }

    /// A timer interrupt is handled on CPU `c` now: every sleep timer armed there whose soft
    /// deadline has passed expires, in the order they were armed (hrtimer slack coalescing).
    fn timer_interrupt(&mut self, c: GCpu) {
        let mut i = 0;
        while i < self.cpus[c.idx()].armed_timers.len() {
            let t = self.cpus[c.idx()].armed_timers[i];
            if self.tasks[t].timer_soft > self.now {
                i += 1;
                continue;
            }
            self.cpus[c.idx()].armed_timers.remove(i);
            self.cpus[c.idx()].pending_timers.retain(|x| *x != t);
            self.q.cancel(self.tasks[t].timer_slot);
            if self.tasks[t].phase != Phase::Sleeping {
                continue;
            }
            self.tasks[t].phase = Phase::Ready;
            let waker = self.cpus[c.idx()].local;
            let g = self.tasks[t].ent;
            self.wake_entity(
                g,
                WakeInfo {
                    waker_cpu: Some(waker),
                    sync: false,
                    new: false,
                },
            );
        }
    }

    /// Puts a token into a channel; returns whether a sleeping waiter was woken.
    fn signal(&mut self, wl: usize, chan: Chan, from: Option<GCpu>, sync: bool) -> bool {
        let ch = &mut self.wls[wl].chans[chan as usize];
        if let Some(w) = ch.waiters.pop_front() {
            self.tasks[w].phase = Phase::Ready;
            let waker = from.map(|c| self.cpus[c.idx()].local);
            let g = self.tasks[w].ent;
            self.wake_entity(
                g,
                WakeInfo {
                    waker_cpu: waker,
                    sync,
                    new: false,
                },
            );
            return true;
        }
        if let Some(s) = ch.spinners.pop() {
            // The spinner sees the token: its spin ends (now, if it is running).
            let running = self.tasks[s].run_since.is_some();
            self.stop_progress(s);
            let task = &mut self.tasks[s];
            task.spinning = None;
            task.phase = Phase::Ready;
            task.remaining = 0;
            if running {
                task.run_since = Some(self.now);
                self.actions.push_back(Action::Advance(s));
            }
            return false;
        }
        ch.tokens += 1;
        false
    }

    // ---- metrics ---------------------------------------------------------------------------

    fn sample(&mut self) {
        for i in 0..self.series_src.len() {
            let (w, a, b) = self.series_src[i];
            let wl = &self.wls[w];
            let (ta, tb) = (wl.tasks[a], wl.tasks[b]);
            let (ea, eb) = (
                self.ents[self.tasks[ta].ent.idx()].local,
                self.ents[self.tasks[tb].ent.idx()].local,
            );
            let s = &self.levels[wl.level.idx()].sched;
            if let (Some(pa), Some(pb)) = (s.probe(ea), s.probe(eb)) {
                self.series[i].t_ns.push(self.now);
                self.series[i].values.push(pa - pb);
            }
        }
    }

    fn reset_metrics(&mut self) {
        self.close_intervals();
        for e in &mut self.ents {
            e.stats.time = [0; 4];
            e.stats.runs = 0;
            e.stats.preemptions = 0;
            e.stats.migrations = 0;
            e.stats.wait.reset();
        }
        for w in &mut self.wls {
            w.counters.iter_mut().for_each(|c| *c = 0);
            w.hists.iter_mut().for_each(|h| h.reset());
        }
    }

    /// Closes every entity's open runstate interval at `now` (windowed figures, DESIGN §6).
    pub fn close_intervals(&mut self) {
        for g in 0..self.ents.len() {
            let s = self.ents[g].state;
            self.set_runstate(GEnt(g as u32), s);
        }
    }

    /// Checks the engine's invariants; an error names the broken one.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (l, lv) in self.levels.iter().enumerate() {
            for (c, ci) in lv.cpu_info.iter().enumerate() {
                if let Some(e) = ci.curr {
                    let ei = &lv.ent_info[e.idx()];
                    if ei.on_cpu != Some(CpuId(c as u32)) {
                        return Err(format!(
                            "level {l}: CPU {c} runs {} which is on {:?}",
                            ei.params.name, ei.on_cpu
                        ));
                    }
                    if !ei.params.hard_affinity.contains(CpuId(c as u32)) {
                        return Err(format!(
                            "level {l}: {} on CPU {c} outside its affinity",
                            ei.params.name
                        ));
                    }
                }
            }
            for (e, ei) in lv.ent_info.iter().enumerate() {
                if let Some(c) = ei.on_cpu {
                    if lv.cpu_info[c.idx()].curr != Some(EntityId(e as u32)) {
                        return Err(format!(
                            "level {l}: {} thinks it is on CPU {c:?}",
                            ei.params.name
                        ));
                    }
                    if !ei.runnable {
                        return Err(format!(
                            "level {l}: {} runs but is not runnable",
                            ei.params.name
                        ));
                    }
                }
                let g = lv.ent_g[e];
                let st = self.ents[g.idx()].state;
                let want = match (ei.on_cpu.is_some(), ei.runnable) {
                    (true, _) => RunState::Running,
                    (false, true) => RunState::Runnable,
                    (false, false) => RunState::Blocked,
                };
                if st != want && st != RunState::Offline {
                    return Err(format!(
                        "level {l}: {} is {st:?}, should be {want:?}",
                        ei.params.name
                    ));
                }
            }
        }
        for (i, cs) in self.cpus.iter().enumerate() {
            let want = match cs.backing {
                None => true,
                Some(b) => {
                    self.ents[b.idx()].state == RunState::Running
                        && self
                            .cpu_of_ent(b)
                            .is_some_and(|p| self.cpus[p.idx()].executing)
                }
            };
            if cs.executing != want {
                return Err(format!(
                    "CPU {i}: executing={} but should be {want}",
                    cs.executing
                ));
            }
        }
        Ok(())
    }

    // ---- results -----------------------------------------------------------------------------

    pub fn results(&self) -> crate::report::Results {
        crate::report::collect(self)
    }
}

/// Read access for the report module.
pub(crate) mod view {
    use super::*;

    pub struct EntRow<'a> {
        pub level: &'a str,
        pub name: &'a str,
        pub is_vcpu: bool,
        pub group: u32,
        pub state: RunState,
        /// How long it has been waiting for a CPU, if it is runnable now.
        pub open_wait: Nanos,
        pub stats: &'a EntStats,
    }

    pub struct WlRow<'a> {
        pub level: &'a str,
        pub spec: &'a WorkloadSpec,
        pub counters: &'a [u64],
        pub hists: &'a [LatHist],
    }

    impl Simulation {
        pub(crate) fn ent_rows(&self) -> impl Iterator<Item = EntRow<'_>> {
            self.ents.iter().map(move |e| {
                let lv = &self.levels[e.level.idx()];
                let p = &lv.ent_info[e.local.idx()].params;
                EntRow {
                    level: &lv.name,
                    name: &p.name,
                    is_vcpu: matches!(e.kind, EntKind::Vcpu(_)),
                    group: p.group,
                    state: e.state,
                    open_wait: if e.state == RunState::Runnable {
                        self.now - e.since
                    } else {
                        0
                    },
                    stats: &e.stats,
                }
            })
        }

        pub(crate) fn wl_rows(&self) -> impl Iterator<Item = WlRow<'_>> {
            self.wls.iter().map(move |w| WlRow {
                level: &self.levels[w.level.idx()].name,
                spec: &w.spec,
                counters: &w.counters,
                hists: &w.hists,
            })
        }

        pub(crate) fn series(&self) -> &[Series] {
            &self.series
        }
    }
}
