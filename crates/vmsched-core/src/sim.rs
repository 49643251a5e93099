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
//! a vCPU that is not executing is kept pending ([`PendingIrqs`]) and delivered when the vCPU
//! next runs; if the vCPU is halted (blocked at the host) it is first woken through the host
//! scheduler's wake path (Xen: the virtual timer or event channel kicks the vCPU; ERRATA X4).
//!
//! **Exits.** What an idle vCPU does (block, poll, stay), what a trappable spin does and what a
//! kick costs is the guest level's [`ExitModel`] (crate::hv): the loop asks the model and never
//! looks at the hypervisor or the architecture.
//!
//! **The loop.** Pop the earliest slot, handle it, then run the FIFO of follow-up actions it
//! caused (deliveries of reschedule requests, task steps to interpret) at the same instant.
//! Actions keep the call stack shallow and the order deterministic.
//!
//! **Preemption points.** A guest kernel with `preempt = "none"` honours a reschedule of a CPU
//! whose task is inside a system call (a kernel compute step) only at the end of that step, the
//! syscall exit; `preempt = "full"` honours it at once. Host reschedules are always immediate.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::hv::{ExitModel, HaltWindow, KvmVcpu, PendingIrqs};
use crate::ids::{CpuId, EntityId, GCpu, GEnt, LevelId};
use crate::metrics::LatHist;
use crate::queue::{EventQueue, SlotId};
use crate::rng::Stream;
use crate::sched::{
    CpuInfo, CpuTopo, EntityInfo, EntityParams, LevelClock, Pick, Request, RunState, SchedCtx,
    Scheduler, WakeCause, WakeInfo,
};
use crate::time::{Nanos, SimTime, NEVER};
use crate::trace::{emit, TraceBuf};
use crate::workload::{Chan, Dist, Step, WorkloadSpec};

/// Options of one level that are not the scheduler's.
#[derive(Clone, Copy, Debug, Default)]
pub struct LevelOpts {
    pub clock: LevelClock,
    /// Kernel preemption model: true = `CONFIG_PREEMPT` (reschedule at once, even in a syscall).
    pub preempt_full: bool,
    /// Delay of a reschedule request sent by code running on one CPU to another CPU of this
    /// level (an IPI). Requests for the local CPU, and those raised outside any CPU (task
    /// creation, timers), are immediate.
    pub ipi_latency: Nanos,
    /// Cost of switching entities on a CPU of this level, paid by the incoming entity before it
    /// makes progress: a task on every switch-in; a vCPU on a physical CPU only when the CPU
    /// last ran another entity (not when it resumes the vCPU it last ran, idle or not between).
    pub ctxsw_cost: Nanos,
    /// Host levels: a further delay a vCPU pays when switched in on a physical CPU that last ran
    /// another entity (the refill of the caches the other one evicted; a stated assumption, no
    /// Xen figure: docs/simplifications.md).
    pub vcpu_refill: Nanos,
    /// Host levels: how long after its (hard) deadline a task's sleep timer is handled on a
    /// CPU of this level: the timer interrupt, the expiry and the wake-up
    /// (`machine.timer_expiry_ns`). 0 (guest levels, and the default): at the deadline.
    pub timer_expiry: Nanos,
    /// Guest levels: what the hypervisor does with this guest's idle vCPUs, trappable spins
    /// and kicks (crate::hv). The default is Xen's x86 PV guest: block at once, no spin traps,
    /// no costs.
    pub exit: ExitModel,
    /// The tick keeps running on an idle CPU (Linux without `CONFIG_NO_HZ_IDLE`): a halted vCPU
    /// is woken by every tick. False (the default): NO_HZ idle, no tick while the CPU is idle.
    pub tick_periodic: bool,
    /// Linux `skew_tick=1`: CPU `i` of `n` ticks `i × period / (2n)` after the level's grid.
    pub skew_tick: bool,
    /// The tick grid's offset from time 0 (modulo the period); None: drawn from the seed.
    pub tick_phase: Option<Nanos>,
    /// Guest levels: the paravirtual interfaces the guest kernel uses (crate::pv; sim/pv.rs).
    /// The default (all off) is the engine's behaviour before them.
    pub pv: crate::pv::PvModel,
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
    /// Offset of the level's tick grid from time 0, in `0..tick_period`: the kernel booted at
    /// an unknown time, so unless [`LevelOpts::tick_phase`] gives it the phase is drawn from the
    /// run's seed and the level's name (stream `tick-phase/<name>`); every CPU of the level
    /// ticks on the same grid unless the level skews its ticks ([`LevelOpts::skew_tick`]).
    tick_phase: Nanos,
    /// The delivery jitter of the level's policy timers (stream `irq/<name>`; sim/ticks.rs).
    irq_rng: Stream,
    /// The scheduler counts the entities runnable on each CPU ([`Scheduler::nr_running`]): a
    /// vCPU of a guest below polls in its halt window only while it is alone on its pCPU (KVM's
    /// `single_task_running()`). Known at build.
    polls_alone: bool,
    /// KVM's `kvm->last_boosted_vcpu` of this guest level: the guest CPU whose vCPU the last
    /// directed yield went to (`kvm_vcpu_on_spin` starts after it).
    last_boosted: u32,
    /// The level exists: false for the guest of a domain not created yet or already destroyed
    /// (`[[domain]] create_at_ms`/`destroy_at_ms`). Nothing reaches a dead level's CPUs: its
    /// ticks are not armed and its events do not wake the vCPUs behind them.
    alive: bool,
}

/// The KVM/ARM 3.x arch-timer kworker (ERRATA L9): its task, and the guest CPUs it has to kick.
struct TimerWorker {
    task: usize,
    queue: Vec<GCpu>,
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
    /// The entity it runs (global), mirroring its level's `cpu_info[local].curr` (written
    /// together in `switch_in`/`switch_out`; `check_invariants` compares them).
    curr: Option<GEnt>,
    executing: bool,
    sched_slot: SlotId,
    resched_slot: SlotId,
    tick_slot: SlotId,
    /// The end of the window in which an idle vCPU stays on its pCPU before it blocks
    /// ([`HaltWindow::After`]: KVM's halt-polling, the cost of the block hypercall).
    halt_slot: SlotId,
    /// The delayed wake of a halted vCPU ([`ExitModel::kick_ns`] > 0), and the cause it carries.
    kick_slot: SlotId,
    kick_cause: WakeCause,
    /// With the KVM/ARM 3.x timer kworker (ERRATA L9): the soft timer KVM armed for this guest
    /// CPU's timer when its vCPU last left guest mode has fired (one per exit: it is armed for
    /// the guest's one compare value and not re-armed until the vCPU has entered again).
    backup_timer_fired: bool,
    /// The vCPU was preempted while in its halt window: the window is over, it blocks as soon as
    /// it runs idle again (KVM stops polling when another task wants the pCPU).
    halt_due: bool,
    /// Guest events held while the vCPU is away.
    pending: PendingIrqs,
    /// A reschedule waiting for the current task's system call to end.
    need_resched: bool,
    /// Tasks whose sleep timer is armed on this CPU (for slack coalescing, ERRATA W1).
    armed_timers: Vec<usize>,
    /// Kernel work (an event-channel upcall, sim/io.rs) runs on this guest CPU: its current
    /// task makes no progress and the CPU does not halt until it ends.
    kwork: bool,
    /// Physical CPUs: the last entity switched in (idle does not clear it), and the end of the
    /// switch to a vCPU ([`LevelOpts::ctxsw_cost`], [`LevelOpts::vcpu_refill`]): until then the
    /// vCPU is running but does not execute.
    last_ent: Option<GEnt>,
    switch_slot: SlotId,
    /// Guest CPUs of a guest with cpuidle-haltpoll (sim/pv.rs): the CPU's poll limit, whether
    /// the armed halt window is the guest's own poll (not KVM's: the host cannot end it), and
    /// when the vCPU halted for idleness after it (the HLT state's entry).
    poll_limit: Nanos,
    guest_poll: bool,
    halted_at: Option<SimTime>,
    /// Guest CPUs under KVM: the vCPU's halt-poll and PAUSE-loop windows (sim/pv.rs).
    kvm: KvmVcpu,
    /// The delivery jitter of this CPU's tick and slice timer (stream `irq/<level>/<cpu>`;
    /// sim/ticks.rs).
    irq_rng: Stream,
    /// Chaos mode holds this guest CPU's vCPU off (sim/chaos.rs): it does not execute though
    /// its host may run it, and reads as preempted.
    stalled: bool,
}

/// Per-entity accounting (xenmon's figures): the cold half of an entity, written at its switches
/// and runstate changes and read at the end, kept apart from the per-event `EntState`
/// (`Simulation::ent_stats`, indexed like `ents`).
pub struct EntStats {
    pub time: [Nanos; 4],
    pub runs: u64,
    pub preemptions: u64,
    pub migrations: u64,
    pub wait: LatHist,
    /// xenmon's further figures (sim/xenmon.rs).
    pub xm: xenmon::XmStats,
}

/// The hot half of an entity: what the event loop reads on every event (its level, its CPU, its
/// state), compact so that a large host's entity table stays in cache. Its accounting is in
/// [`EntStats`], its scheduler's view in its level's `ent_info`.
struct EntState {
    level: LevelId,
    local: EntityId,
    kind: EntKind,
    /// The CPU it runs on (global), mirroring its level's `ent_info[local].on_cpu` (written
    /// together in `switch_in`/`switch_out`; `check_invariants` compares them): `cpu_of_ent`
    /// reads it without touching the scheduler's per-entity data.
    cpu: Option<GCpu>,
    state: RunState,
    since: SimTime,
    last_cpu: Option<GCpu>,
    /// Time runnable or offline since the start (the steal clock; never reset).
    steal: Nanos,
    /// Paused by its scheduler ([`Request::Pause`]): it wants a CPU but is held back, so it is
    /// accounted offline when it leaves its CPU or wakes up.
    paused: bool,
    /// The state it left when it last became runnable: how its current wait began (a wake
    /// from blocked, a preemption while running), for xenmon's split worst waits.
    wait_from: RunState,
    /// An HVM vCPU waits in Xen for its device model (Xen's `_VPF_blocked_in_xen`, ERRATA X9;
    /// sim/io.rs): not runnable, accounted offline, and woken only by the completion, not by
    /// guest events.
    in_xen: bool,
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
    /// The spin is a `SpinBlock`'s: when its bound runs out the task sleeps on the channel.
    spin_block: bool,
    run_since: Option<SimTime>,
    /// CPU time the task really executed (its CPU chain ran it), up to `run_since`.
    executed: Nanos,
    /// `executed` at the end of the warm-up.
    executed_base: Nanos,
    done_slot: SlotId,
    timer_slot: SlotId,
    /// Its creation (armed at build at its start time, or at its domain's creation).
    start_slot: SlotId,
    /// When it was created (started or forked); a `Ready` step measures from it.
    born: SimTime,
    timer_cpu: GCpu,
    block_paid: bool,
    /// Soft deadline of the armed sleep timer (the hard one is the slot's time).
    timer_soft: SimTime,
    periodic_next: Option<SimTime>,
    latency_pending: Option<(u16, SimTime)>,
    /// Waiting for a lock, spinning or halted (sim/pv.rs); None for every other task.
    lock_wait: Option<pv::LockWait>,
    /// Spinning until the CPUs (bit k: CPU k of its level) it sent call-function IPIs to have
    /// run them (sim/pv.rs).
    csd_wait: Option<u64>,
    rng: Stream,
}

struct Channel {
    tokens: u32,
    waiters: VecDeque<usize>,
    spinners: Vec<usize>,
    /// A lock's holder (sim/pv.rs); unused by other channels.
    owner: Option<usize>,
}

struct WorkloadState {
    spec: WorkloadSpec,
    level: LevelId,
    tasks: Vec<usize>,
    /// Index in `tasks` of the next slot a `fork` fills (slots that only a fork fills come
    /// last; `tasks.len()`: none left).
    next_child: usize,
    chans: Vec<Channel>,
    counters: Vec<u64>,
    hists: Vec<LatHist>,
}

#[derive(Clone, Copy, Debug)]
enum SlotKind {
    SchedTimer(GCpu),
    Resched(GCpu),
    Tick(GCpu),
    /// A vCPU's halt window ends.
    Halt(GCpu),
    /// A halted vCPU's delayed kick.
    Kick(GCpu),
    /// The switch of physical CPU `c` to its current vCPU is over: the vCPU executes.
    Switched(GCpu),
    TaskDone(usize),
    TaskTimer(usize),
    TaskStart(usize),
    LevelTimer(LevelId, u32),
    /// Timeline event `i` (sim/lifecycle.rs).
    Timeline(u32),
    /// The I/O path (sim/io.rs): a guest CPU's port handler ends; the IPI that starts its
    /// upcall; flow `f`'s next packet arrives at the NIC.
    Kwork(GCpu),
    Upcall(GCpu),
    Packet(u32),
    /// The end of a xenmon window (sim/xenmon.rs).
    XenmonWindow,
    /// The host's bound of the boost of a coordinated guest CPU (sim/coord.rs).
    CoordBound(GCpu),
    /// Chaos mode: stalled vCPU `i`'s gap or stall ends (sim/chaos.rs).
    Chaos(u32),
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
    /// An event-channel upcall starts on a running vCPU (sim/io.rs).
    Upcall(GCpu),
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
    /// Each entity's accounting (cold: see [`EntStats`]), indexed like `ents`.
    ent_stats: Vec<EntStats>,
    tasks: Vec<Task>,
    wls: Vec<WorkloadState>,
    actions: VecDeque<Action>,
    events: u64,
    actions_run: u64,
    end: SimTime,
    warmup: SimTime,
    sample_every: Nanos,
    sample_slot: SlotId,
    series: Vec<Series>,
    series_src: Vec<(usize, usize, usize)>,
    debug_checks: bool,
    /// The CPU whose code the engine is running (a task's steps, its tick), if any.
    local_cpu: Option<GCpu>,
    /// The trace channel: None when tracing is off (crate::trace).
    trace: Option<Box<TraceBuf>>,
    /// The stop flag and the stall check, looked at every [`WATCH_EVERY`] events.
    watch: Watch,
    /// The `[[event]]` timeline's actions, indexed by their slots' `SlotKind::Timeline`.
    timeline: Vec<TimelineAction>,
    /// What the run reports as a kernel or hypervisor would log it (affinities broken by a CPU
    /// going offline: sim/hotplug.rs); [`Simulation::log`].
    log: Vec<String>,
    /// The I/O path: event channels, kernel work, packets (sim/io.rs); None without I/O.
    io: Option<Box<io::IoState>>,
    /// The KVM/ARM 3.x arch-timer kworker (ERRATA L9), if the host has one: its task and the
    /// guest CPUs whose timer fired while their vCPU was out of guest mode, to be kicked when
    /// it runs ([`SimBuilder::add_timer_worker`]).
    timer_worker: Option<TimerWorker>,
    /// xenmon's fixed windows (sim/xenmon.rs); None when they are off.
    xenmon: Option<Box<xenmon::Windows>>,
    /// Parallel jobs (sim/job.rs): each one's first workload (part 0) and its number of parts.
    jobs: Vec<(usize, usize)>,
    /// Coordinated scheduling with a KVM host (sim/coord.rs); None when no guest has it.
    coord: Option<Box<coord::Coord>>,
    /// The bound of the delay drawn for each timer interrupt's delivery (sim/ticks.rs,
    /// [`Variation`]); 0: timers fire at their expiry.
    irq_jitter: Nanos,
    /// Chaos mode's stalled vCPUs (sim/chaos.rs); empty without `[domain.chaos]`.
    chaos: Vec<chaos::ChaosCpu>,
}

/// Events between two looks at the stop flag and at the progress of simulated time (a power of
/// two: the look costs one mask test per event).
pub const WATCH_EVERY: u64 = 1 << 14;
/// Looks in a row at which simulated time has not moved before a run is declared stuck: more than
/// 2^20 events at one instant (a 4,096-pCPU tick storm is a few ten thousand).
pub const STALL_LOOKS: u32 = 64;

/// What `run_until` looks at every [`WATCH_EVERY`] events.
#[derive(Default)]
struct Watch {
    /// Set from elsewhere (a SIGINT handler): `run_until` returns at its next look.
    stop: Option<Arc<AtomicBool>>,
    /// Simulated time at the last look, and how many looks in a row found it there.
    at: SimTime,
    still: u32,
}

mod builder;
mod chaos;
mod check;
mod coord;
mod cpupool;
mod evtchn;
mod hotplug;
mod io;
mod job;
mod lifecycle;
mod pv;
mod switch;
mod tasks;
mod ticks;
mod trace_io;
mod xenmon;

pub use builder::SimBuilder;
pub use chaos::{ChaosCount, ChaosResult, ChaosView};
pub use coord::{CoordCounts, CoordSpec};
pub use cpupool::PoolAction;
pub use evtchn::ScanOrder;
pub use io::{DeviceModel, FlowKind, IoSpec, NetFlow};
pub use lifecycle::TimelineAction;
pub use ticks::Variation;
pub use xenmon::{XenmonWindowRow, XmStats, MAX_WINDOWS as XENMON_MAX_WINDOWS};

impl Simulation {
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Queue entries dispatched so far: the benchmark's "events" (docs/design.md, Events).
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Same-instant follow-up actions run so far (reschedule deliveries, task steps, ticks and
    /// timers run from the action FIFO after an event), counted apart from [`Self::events`].
    pub fn actions(&self) -> u64 {
        self.actions_run
    }

    /// Events armed in the queue now (its length): the live timers the benchmark's bare-heap
    /// floor is sized by. Read-only; nothing on the event path touches it.
    pub fn queued(&self) -> usize {
        self.q.len()
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
                    // An IPI only when code running on one CPU asks another to reschedule.
                    if lat == 0 || self.local_cpu.is_none_or(|l| l == g) {
                        self.actions.push_back(Action::Resched(g));
                    } else {
                        let s = self.cpus[g.idx()].resched_slot;
                        self.q.arm_min(s, self.now + lat);
                    }
                }
                Request::Pause(e) => {
                    let g = self.levels[l.idx()].ent_g[e.idx()];
                    self.ents[g.idx()].paused = true;
                }
                Request::Unpause(e, wake) => {
                    let g = self.levels[l.idx()].ent_g[e.idx()];
                    self.ents[g.idx()].paused = false;
                    let runnable = self.levels[l.idx()].ent_info[e.idx()].runnable;
                    if wake && runnable && self.ents[g.idx()].state == RunState::Offline {
                        self.set_runstate(g, RunState::Runnable);
                    }
                }
                Request::Trace(ev) => self.trace_sched_event(l, ev),
                Request::Timer(k, at) => {
                    let s = *self.levels[l.idx()]
                        .timer_slots
                        .get(k as usize)
                        .unwrap_or_else(|| panic!("scheduler timer key {k} beyond nr_timers"));
                    match at {
                        Some(t) => {
                            let at = t.max(self.now).saturating_add(self.level_irq_delay(l));
                            self.q.arm(s, at)
                        }
                        None => self.q.cancel(s),
                    }
                }
            }
        }
        self.levels[l.idx()].req.drain(..n);
    }

    /// A flag that stops the run: once it is set, `run_until` returns between two events within
    /// [`WATCH_EVERY`] events, leaving the simulation as it was there (a later `run_until` goes
    /// on from it). The caller tells a stop from the end by the flag.
    pub fn set_stop_flag(&mut self, flag: Option<Arc<AtomicBool>>) {
        self.watch.stop = flag;
    }

    /// Runs until simulated time `until` (inclusive of events at that time), or until the stop
    /// flag is set (see [`Self::set_stop_flag`]). Panics, naming the instant and the last event,
    /// if simulated time stands still for [`STALL_LOOKS`] × [`WATCH_EVERY`] events.
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
            if self.events & (WATCH_EVERY - 1) == 0 && self.look(slot) {
                return;
            }
            if self.debug_checks {
                if let Err(e) = self.check_invariants() {
                    panic!("invariant broken at t={}: {e}", self.now);
                }
            }
        }
        self.now = self.now.max(until);
    }

    /// The look every [`WATCH_EVERY`] events: true if the stop flag is set; a panic if simulated
    /// time has stood still too long (a loop of steps that take no time, a timer storm).
    #[cold]
    fn look(&mut self, last: SlotId) -> bool {
        if let Some(stop) = &self.watch.stop {
            if stop.load(Ordering::Relaxed) {
                return true;
            }
        }
        if self.now != self.watch.at || self.events == WATCH_EVERY {
            self.watch.at = self.now;
            self.watch.still = 0;
            return false;
        }
        self.watch.still += 1;
        if self.watch.still >= STALL_LOOKS {
            panic!(
                "no progress in simulated time: more than {} events at t={} ns; the last was {}",
                u64::from(STALL_LOOKS) * WATCH_EVERY,
                self.now,
                self.describe_slot(last)
            );
        }
        false
    }

    /// An event slot in words, naming its task and workload when it has one (for errors).
    fn describe_slot(&self, slot: SlotId) -> String {
        let kind = self.slot_kind[slot.0 as usize];
        match kind {
            SlotKind::TaskDone(t) | SlotKind::TaskTimer(t) | SlotKind::TaskStart(t) => {
                let wl = &self.wls[self.tasks[t].wl];
                let task = wl.tasks.iter().position(|&x| x == t);
                let name = task.map_or("?", |i| wl.spec.tasks[i].name.as_str());
                format!("{kind:?} of task '{name}' (workload '{}')", wl.spec.name)
            }
            _ => format!("{kind:?}"),
        }
    }

    /// Runs the whole scenario.
    pub fn run(&mut self) {
        self.run_until(self.end);
        self.close_intervals();
    }

    fn handle(&mut self, slot: SlotId) {
        match self.slot_kind[slot.0 as usize] {
            SlotKind::SchedTimer(c) | SlotKind::Resched(c) => self.deliver_resched(c),
            SlotKind::Tick(c) => self.deliver_tick(c),
            SlotKind::Halt(c) => self.halt_window_over(c),
            SlotKind::Kick(c) => self.kicked(c),
            SlotKind::Switched(c) => self.switched(c),
            SlotKind::Chaos(i) => self.chaos_event(i),
            SlotKind::TaskDone(t) => self.compute_done(t),
            SlotKind::TaskTimer(t) => self.task_timer(t),
            SlotKind::TaskStart(t) => {
                self.tasks[t].phase = Phase::Ready;
                self.tasks[t].born = self.now;
                let e = self.tasks[t].ent;
                self.wake_entity(e, WakeInfo::of(WakeCause::Fork));
            }
            SlotKind::LevelTimer(l, k) => self.with_sched(l, |s, ctx| s.on_timer(ctx, k)),
            SlotKind::Timeline(i) => self.timeline_event(i),
            SlotKind::Kwork(c) => self.kwork_done(c),
            SlotKind::Upcall(c) => self.upcall(c),
            SlotKind::Packet(f) => self.packet_arrives(f),
            SlotKind::Sample => {
                self.sample();
                self.q.arm(self.sample_slot, self.now + self.sample_every);
            }
            SlotKind::XenmonWindow => self.xenmon_window_end(),
            SlotKind::CoordBound(c) => self.coord_bound(c),
            SlotKind::Warmup => self.reset_metrics(),
            SlotKind::End => {}
        }
    }

    // Inlined into the event loop; `destroy_domain` (cold) is its only other caller.
    #[inline(always)]
    fn run_actions(&mut self) {
        while let Some(a) = self.actions.pop_front() {
            self.actions_run += 1;
            match a {
                Action::Resched(c) => self.deliver_resched(c),
                Action::Advance(t) => self.advance(t),
                Action::Tick(c) => self.deliver_tick(c),
                Action::TaskTimer(t) => self.task_timer(t),
                Action::Upcall(c) => self.upcall(c),
                Action::IdleCheck(c) => {
                    let cs = &self.cpus[c.idx()];
                    if cs.executing && cs.curr.is_none() {
                        self.do_schedule(c);
                    }
                }
            }
        }
    }

    #[inline]
    fn curr_of(&self, c: GCpu) -> Option<GEnt> {
        self.cpus[c.idx()].curr
    }

    #[inline]
    fn cpu_of_ent(&self, g: GEnt) -> Option<GCpu> {
        self.ents[g.idx()].cpu
    }

    /// A reschedule request reaches CPU `c`.
    fn deliver_resched(&mut self, c: GCpu) {
        emit!(self.trace_resched(c));
        if !self.cpus[c.idx()].executing {
            self.cpus[c.idx()].pending.raise(PendingIrqs::RESCHED);
            self.kick_backing(c, WakeCause::Ipi);
            return;
        }
        if let Some(g) = self.curr_of(c) {
            match self.ents[g.idx()].kind {
                EntKind::Task(t) => {
                    let task = &self.tasks[t];
                    let lv = &self.levels[self.cpus[c.idx()].level.idx()];
                    if task.phase == Phase::Computing && task.kernel && !lv.opts.preempt_full {
                        self.cpus[c.idx()].need_resched = true;
                        return;
                    }
                }
                EntKind::Vcpu(vc) => {
                    if self.q.is_armed(self.cpus[vc.idx()].halt_slot)
                        && !self.cpus[vc.idx()].guest_poll
                    {
                        // The vCPU sits in its halt window and its pCPU is asked to reschedule:
                        // the poll gives up and the vCPU blocks (KVM: `kvm_vcpu_can_poll` sees
                        // need_resched).
                        self.q.cancel(self.cpus[vc.idx()].halt_slot);
                        self.block_entity(g);
                        return;
                    }
                }
            }
        }
        self.do_schedule(c);
    }

    /// Wakes the vCPU behind `c` if it is halted, so a pending guest event (of `cause`) gets
    /// delivered: now, or after the exit model's kick latency.
    fn kick_backing(&mut self, c: GCpu, cause: WakeCause) {
        let lv = &self.levels[self.cpus[c.idx()].level.idx()];
        if !lv.alive {
            return;
        }
        let kick = lv.opts.exit.kick_ns;
        if let Some(b) = self.cpus[c.idx()].backing {
            let (l, e) = (self.ents[b.idx()].level, self.ents[b.idx()].local);
            // Blocked in Xen (an ioreq): only its completion wakes it; the event waits.
            if !self.levels[l.idx()].ent_info[e.idx()].runnable && !self.ents[b.idx()].in_xen {
                if kick == 0 {
                    self.wake_entity(b, WakeInfo::of(cause));
                } else {
                    let cs = &mut self.cpus[c.idx()];
                    if !self.q.is_armed(cs.kick_slot) {
                        cs.kick_cause = cause;
                        self.q.arm(cs.kick_slot, self.now + kick);
                    }
                }
            }
        }
    }

    /// A guest timer (or the periodic tick) fired for CPU `c` while its vCPU is out of guest
    /// mode: the vCPU is kicked, directly or, with the KVM/ARM 3.x arch-timer kworker (ERRATA
    /// L9), by that kworker once the host scheduler runs it (the host hrtimer only queues its
    /// work).
    fn timer_kick(&mut self, c: GCpu) {
        let Some(w) = &mut self.timer_worker else {
            self.kick_backing(c, WakeCause::Timer);
            return;
        };
        if !self.levels[self.cpus[c.idx()].level.idx()].alive {
            return;
        }
        // KVM/ARM 3.x: kvm_timer_sync_hwstate arms one soft timer at the exit, for the guest's
        // compare value (its earliest timer); kvm_timer_expire queues the work once and does
        // not restart. Later guest timers of the same absence stay pending until the guest
        // runs and programs its timer again: they queue no further work.
        if std::mem::replace(&mut self.cpus[c.idx()].backup_timer_fired, true) {
            return;
        }
        if !w.queue.contains(&c) {
            w.queue.push(c);
        }
        // queue_work: wake the kworker if it sleeps, else leave it a token (it is pending or
        // running and will look at the queue again).
        let t = w.task;
        let ch = &mut self.wls[self.tasks[t].wl].chans[0];
        if ch.waiters.pop_front().is_some() {
            self.tasks[t].phase = Phase::Ready;
            self.wake_entity(self.tasks[t].ent, WakeInfo::of(WakeCause::Timer));
        } else {
            ch.tokens = 1;
        }
    }

    /// The timer kworker's work: every queued guest CPU's vCPU is kicked, in queue order.
    #[cold]
    fn kick_timer_queue(&mut self) {
        let mut i = 0;
        while let Some(c) = self
            .timer_worker
            .as_ref()
            .and_then(|w| w.queue.get(i).copied())
        {
            i += 1;
            self.kick_backing(c, WakeCause::Timer);
        }
        if let Some(w) = &mut self.timer_worker {
            w.queue.clear();
        }
    }

    /// A delayed kick reaches the vCPU behind `c`: it wakes unless something woke it meanwhile.
    #[cold]
    fn kicked(&mut self, c: GCpu) {
        let cs = &self.cpus[c.idx()];
        let b = cs.backing.expect("invariant: a kick targets a vCPU");
        let (l, e) = (self.ents[b.idx()].level, self.ents[b.idx()].local);
        if self.levels[cs.level.idx()].alive
            && !self.levels[l.idx()].ent_info[e.idx()].runnable
            && !self.ents[b.idx()].in_xen
        {
            self.wake_entity(b, WakeInfo::of(cs.kick_cause));
        }
    }

    fn do_schedule(&mut self, c: GCpu) {
        let (l, lc) = (self.cpus[c.idx()].level, self.cpus[c.idx()].local);
        // An offline CPU is rescheduled once, at its offline, even if its vCPU is away.
        debug_assert!(
            self.cpus[c.idx()].executing || !self.levels[l.idx()].cpu_info[lc.idx()].online
        );
        self.cpus[c.idx()].need_resched = false;
        self.cpus[c.idx()].pending.clear(PendingIrqs::RESCHED);
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
            Some(d) => {
                let at = (self.now + d).saturating_add(self.cpu_irq_delay(c));
                self.q.arm(slot, at)
            }
            None => self.q.cancel(slot),
        }
        if pick.next == prev {
            match prev {
                // Still idle (woken for a tick or a request that found nothing to run): halt
                // again.
                None => self.cpu_idle(c),
                Some(p) => emit!(self.trace_continue(c, p, pick.slice)),
            }
            return;
        }
        emit!(self.trace_switch(c, prev, pick.next, pick.slice));
        match prev {
            Some(p) => self.switch_out(l, p, c),
            // The CPU leaves idle: a halt window in progress ends (the poll succeeded).
            None => self.end_halt_window(c),
        }
        if let Some(n) = pick.next {
            self.switch_in(l, n, c, pick.slice);
        }
        if let Some(p) = prev {
            self.with_sched(l, |s, ctx| s.context_saved(ctx, p));
        }
        if pick.next.is_none() {
            self.cpu_idle(c);
        }
    }

    /// Runs `f` as code executing on CPU `c`: reschedule requests for `c` made meanwhile are
    /// local and pay no IPI latency.
    fn on_cpu<R>(&mut self, c: GCpu, f: impl FnOnce(&mut Self) -> R) -> R {
        let prev = self.local_cpu.replace(c);
        let r = f(self);
        self.local_cpu = prev;
        r
    }

    /// `g`, current on its CPU, stops being runnable; its CPU reschedules at once.
    fn block_entity(&mut self, g: GEnt) {
        let (l, e) = (self.ents[g.idx()].level, self.ents[g.idx()].local);
        let c = self
            .cpu_of_ent(g)
            .expect("invariant: block of an entity that is not running");
        emit!(self.trace_block(g));
        self.levels[l.idx()].ent_info[e.idx()].runnable = false;
        self.with_sched(l, |s, ctx| s.block(ctx, e));
        self.do_schedule(c);
        if self.coord.is_some() {
            self.coord_block(g, c);
        }
    }

    fn wake_entity(&mut self, g: GEnt, info: WakeInfo) {
        emit!(self.trace_wake(g, info));
        let (l, e) = (self.ents[g.idx()].level, self.ents[g.idx()].local);
        let ei = &mut self.levels[l.idx()].ent_info[e.idx()];
        assert!(
            !ei.runnable,
            "invariant: wake of runnable entity {}",
            ei.params.name
        );
        ei.runnable = true;
        let state = if self.ents[g.idx()].paused {
            RunState::Offline
        } else {
            RunState::Runnable
        };
        self.set_runstate(g, state);
        self.with_sched(l, |s, ctx| s.wake(ctx, e, info));
        if self.levels[l.idx()].polls_alone {
            self.end_polls_not_alone(l);
        }
        if self.coord.is_some() {
            self.coord_wake(g);
        }
    }

    /// The vCPU `b` (running) would poll in its halt window, but its host scheduler counts
    /// another runnable entity on its pCPU: KVM's `kvm_vcpu_can_poll` fails
    /// (`single_task_running()`), so it blocks at once.
    #[inline]
    fn host_busy(&self, b: GEnt) -> bool {
        let (hl, he) = (self.ents[b.idx()].level, self.ents[b.idx()].local);
        let lv = &self.levels[hl.idx()];
        if !lv.polls_alone {
            return false;
        }
        let pc = lv.ent_info[he.idx()]
            .on_cpu
            .expect("a running vCPU is on a CPU");
        lv.sched.nr_running(pc).is_some_and(|n| n > 1)
    }

    /// A wake-up at level `l`, whose scheduler counts runnable entities per CPU: a vCPU polling
    /// in its halt window on a CPU that now has another runnable entity stops polling and
    /// blocks (KVM's poll loop checks `single_task_running()` on every iteration). Called on
    /// every wake-up at a KVM host level only (never under Xen): kept out of the wake path.
    #[inline(never)]
    fn end_polls_not_alone(&mut self, l: LevelId) {
        for i in 0..self.levels[l.idx()].cpu_info.len() {
            let lv = &self.levels[l.idx()];
            let Some(e) = lv.cpu_info[i].curr else {
                continue;
            };
            let g = lv.ent_g[e.idx()];
            let EntKind::Vcpu(vc) = self.ents[g.idx()].kind else {
                continue;
            };
            if !self.q.is_armed(self.cpus[vc.idx()].halt_slot)
                || self.cpus[vc.idx()].guest_poll
                || lv.sched.nr_running(CpuId(i as u32)).is_none_or(|n| n <= 1)
            {
                continue;
            }
            self.q.cancel(self.cpus[vc.idx()].halt_slot);
            if self.ents[g.idx()].state == RunState::Running {
                self.block_entity(g);
            }
        }
    }
}
