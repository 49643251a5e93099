//! The scheduler interface: one trait for every policy at every level.
//!
//! A scheduler places the *entities* of one level on the *CPUs* of that level: Xen Credit2 puts
//! vCPUs on physical CPUs; a guest's CFS puts tasks on the guest's vCPUs; a Linux KVM host would
//! put vCPU threads and host processes on physical CPUs through the very same trait. Like Xen's
//! `struct scheduler` and Linux's `struct sched_class`, the trait is a fixed table of hooks.
//!
//! **Policies decide, the engine acts.** A hook reads the level through a [`SchedCtx`] (the time,
//! each CPU's current entity, each entity's runnability, affinity and parameters, the guest clock
//! with or without steal time) and answers with a decision ([`Pick`]) or requests
//! ([`SchedCtx::resched`], [`SchedCtx::set_timer`]). It never touches engine state. The engine
//! owns runstates, time, and when a CPU really executes.
//!
//! Ids are local to the level: CPUs `0..nr_cpus`, entities `0..nr_entities`.
//!
//! Hook order, as the engine drives it:
//! * build: `insert(e)` for every entity, in id order, all blocked;
//! * an entity becomes runnable: `wake(e)`; the scheduler queues it and may `resched` CPUs;
//! * the current entity of a CPU stops wanting the CPU: `block(e)` (or `yield_(e)`), followed at
//!   once by `schedule(cpu)`;
//! * a CPU reschedules (its timer from the last [`Pick::slice`] fired, a `resched` request was
//!   delivered, or the current entity blocked or yielded): `schedule(cpu)`, then, if the pick is a
//!   different entity, `context_saved(prev)` for the entity switched out;
//! * the periodic tick of a busy CPU, if the policy has one ([`Scheduler::tick_period`]): `tick(cpu)`;
//! * a timer the scheduler armed with [`SchedCtx::set_timer`]: `on_timer(key)`.
//! * run-time changes from the scenario's timeline, outside any CPU's code: `adjust`,
//!   `adjust_global`, `prio_changed`, `set_paused`, `remove`, and CPU hot-plug: `cpu_offline`
//!   (then `schedule` of that CPU if something still runs there), `cpu_online`, and `set_down`
//!   for the vCPU behind a guest CPU that went offline or came back.
//!
//! Requests made by a hook are applied when the hook returns, in order, before the engine does
//! anything else (in `schedule`, before the pick is applied): a reschedule (an IPI when it
//! crosses CPUs), a timer, or a pause ([`SchedCtx::pause`], [`SchedCtx::unpause`]: the entity
//! still wants a CPU but the scheduler holds it back, and the engine accounts it `offline`).
//!
//! At a guest level, hooks that concern a CPU run only while that vCPU executes: a `resched` of a
//! vCPU that the host has descheduled is delivered when it next runs, and one of a halted vCPU
//! first wakes it at the host level (DESIGN.md §2).

use crate::cpuset::CpuSet;
use crate::ids::{CpuId, EntityId};
use crate::time::{Nanos, SimTime};
use crate::trace::SchedEvent;

/// Xen's runstates (`xen/include/public/vcpu.h`), used for every entity at every level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    Running = 0,
    Runnable = 1,
    Blocked = 2,
    Offline = 3,
}

/// Linux scheduling policy of a task (ignored by host schedulers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    #[default]
    Normal,
    Batch,
    Idle,
    Fifo,
    Rr,
    /// SCHED_DEADLINE (`sched_runtime_ns`, `sched_deadline_ns`, `sched_period_ns`).
    Deadline,
}

/// The scheduling attributes a Xen policy reads for a vCPU (from its domain: `xl
/// sched-credit2 -d`, `xl sched-credit -d`, `xl sched-rtds -v`). Each policy reads the fields it
/// knows and ignores the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XenAttr {
    /// Credit/Credit2 weight (1..=65535; Xen's default 256).
    pub weight: u32,
    /// Credit/Credit2 cap in percent of one CPU, 0 = none.
    pub cap_pct: u32,
    /// RTDS budget per period (µs); 0 = the policy's default.
    pub budget_us: u64,
    /// RTDS period (µs); 0 = the policy's default.
    pub period_us: u64,
    /// RTDS extratime: may run beyond its budget when CPUs idle.
    pub extratime: bool,
}

impl Default for XenAttr {
    fn default() -> Self {
        XenAttr {
            weight: 256,
            cap_pct: 0,
            budget_us: 0,
            period_us: 0,
            extratime: true,
        }
    }
}

/// The scheduling attributes a Linux class reads for a task (`sched_setattr`): of a guest's
/// task, or of a vCPU thread or host process under a Linux (KVM) host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinuxAttr {
    pub policy: Policy,
    /// Nice value (SCHED_NORMAL, SCHED_BATCH), -20..=19.
    pub nice: i32,
    /// `sched_priority` of SCHED_FIFO/SCHED_RR (1..=99).
    pub rt_priority: u32,
    /// `sched_runtime`, `sched_deadline`, `sched_period`.
    pub times: SchedTimes,
}

/// The times of `struct sched_attr` (ns): SCHED_DEADLINE's runtime, relative deadline and
/// period; `sched_runtime_ns` is also a SCHED_NORMAL/BATCH/IDLE task's requested slice under
/// EEVDF from Linux 6.12 (`sched_setattr` uses the one field for both). 0: not given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedTimes {
    pub sched_runtime_ns: u64,
    pub sched_deadline_ns: u64,
    /// 0: the deadline (`__checkparam_dl`).
    pub sched_period_ns: u64,
}

/// Static parameters of an entity, given at build time: the engine's part (name, group,
/// affinity, first CPU) and the attributes of each policy family. An entity carries both
/// families, as a Linux task carries `se`, `rt` and `dl` whatever its class: which one is read
/// depends on the scheduler of its level.
#[derive(Clone, Debug)]
pub struct EntityParams {
    /// Display name, e.g. `d1v0` or `context1.parent`.
    pub name: String,
    /// The group the entity belongs to: its domain at the host level, its process at a guest level.
    pub group: u32,
    pub hard_affinity: CpuSet,
    pub soft_affinity: CpuSet,
    /// The CPU the entity is first placed on (Xen `processor(v)` at creation).
    pub initial_cpu: CpuId,
    /// What a Xen policy reads (host level).
    pub xen: XenAttr,
    /// What a Linux class reads (tasks).
    pub linux: LinuxAttr,
}

/// Where a CPU sits in the machine: what Credit2's runqueue arrangement and Linux's wake
/// placement read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTopo {
    pub node: u32,
    pub socket: u32,
    pub core: u32,
    pub thread: u32,
    /// Id of the last-level cache domain.
    pub llc: u32,
}

/// What a scheduler may read about one CPU of its level.
#[derive(Clone, Debug)]
pub struct CpuInfo {
    /// The entity the engine has on this CPU (None: idle).
    pub curr: Option<EntityId>,
    /// Whether the CPU is executing right now: always for a physical CPU; for a vCPU, whether its
    /// backing entity is running all the way down to a physical CPU.
    pub executing: bool,
    /// The runstate of the entity backing this CPU at the level below, as that level's
    /// hypervisor reports it (Xen's runstate area, KVM's `preempted` flag): `Running` for a
    /// physical CPU; for a vCPU `Running`, `Runnable` (preempted: it wants its CPU back),
    /// `Blocked` (halted: the guest idles on it) or `Offline` (paused, parked). It is the
    /// backing entity's own state: a vCPU of a nested guest whose vCPU is `Running` may still not
    /// execute if a level further down descheduled it (see `executing`).
    pub backing: RunState,
    /// Steal time: for a vCPU, the time its backing entity spent runnable or offline, as the
    /// host's runstate area reports it (updated at each runstate change of the vCPU, so constant
    /// while the vCPU runs). Zero for a physical CPU.
    pub steal_ns: Nanos,
    pub topo: CpuTopo,
    /// The CPU is online: false from a `cpu_offline` timeline event until its `cpu_online`
    /// (Xen: the pCPU left its cpupool; Linux: the CPU is neither active nor online). The
    /// engine writes it before calling [`Scheduler::cpu_offline`] / [`Scheduler::cpu_online`];
    /// an offline CPU runs nothing (an invariant the engine checks).
    pub online: bool,
}

impl CpuInfo {
    /// x86 `vcpu_is_preempted` as Xen (`xen_vcpu_stolen`) and KVM (`steal_time.preempted`)
    /// report it: the backing entity wants its CPU but the host is not running it. A halted
    /// (blocked) vCPU is not preempted, nor is a parked (offline) one. Always false for a
    /// physical CPU.
    #[inline]
    pub fn vcpu_is_preempted(&self) -> bool {
        self.backing == RunState::Runnable
    }
}

/// What a scheduler may read about one entity of its level.
#[derive(Clone, Debug)]
pub struct EntityInfo {
    /// Wants a CPU: runnable or running (Xen `vcpu_runnable`, Linux `TASK_RUNNING`).
    pub runnable: bool,
    /// The CPU it is running on now, if any.
    pub on_cpu: Option<CpuId>,
    pub params: EntityParams,
}

/// Why an entity wakes up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WakeCause {
    /// Another entity of the same level released what it waited on (a pipe write, a futex
    /// wake, a semaphore post): Linux `try_to_wake_up` from a task, Xen `vcpu_unblock` from a
    /// hypercall of another vCPU.
    #[default]
    Unblock,
    /// A timer expired (a task's hrtimer, a vCPU's singleshot timer or guest tick).
    Timer,
    /// A reschedule or call-function IPI aimed at the CPU the entity backs (a halted vCPU that
    /// must run its guest's scheduler).
    Ipi,
    /// An event from outside the level (an event channel, a virtual interrupt from a device
    /// model).
    Event,
    /// An I/O completion.
    Io,
    /// The entity's very first wake-up after its creation (Linux `wake_up_new_task` after
    /// fork: fork placement and `place_entity(initial)`; Xen: the first `vcpu_wake` of a new
    /// vCPU).
    Fork,
}

impl WakeCause {
    /// The cause as a lower-case word (for traces).
    pub fn name(self) -> &'static str {
        match self {
            WakeCause::Unblock => "unblock",
            WakeCause::Timer => "timer",
            WakeCause::Ipi => "ipi",
            WakeCause::Event => "event",
            WakeCause::Io => "io",
            WakeCause::Fork => "fork",
        }
    }
}

/// A wake-up as the waker sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct WakeInfo {
    /// Why the entity wakes.
    pub cause: WakeCause,
    /// The CPU (of this level) the waker runs on, if the waker is at this level (for a timer or
    /// an IPI: the CPU that handles it).
    pub waker_cpu: Option<CpuId>,
    /// The entity (of this level) that wakes it, if it is one: the task that wrote the pipe.
    pub waker: Option<EntityId>,
    /// For [`WakeCause::Fork`], the parent (of this level), if it has one.
    pub parent: Option<EntityId>,
    /// Linux `WF_SYNC`: the waker is about to sleep (pipe writes).
    pub sync: bool,
}

impl WakeInfo {
    /// The first wake-up of a new entity ([`WakeCause::Fork`]).
    #[inline]
    pub fn is_new(&self) -> bool {
        self.cause == WakeCause::Fork
    }

    /// A wake-up of `cause` with nothing else known.
    #[inline]
    pub fn of(cause: WakeCause) -> WakeInfo {
        WakeInfo {
            cause,
            ..Default::default()
        }
    }
}

/// The answer of `schedule(cpu)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    /// The entity to run (the same as the current one to keep it), or None for idle.
    pub next: Option<EntityId>,
    /// When to call `schedule(cpu)` again (Xen's `s_timer`), relative to now. None: no timer.
    pub slice: Option<Nanos>,
}

/// A request from a hook to the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Reschedule this CPU (Xen tickle / raise SCHEDULE_SOFTIRQ; Linux `resched_curr`).
    Resched(CpuId),
    /// Arm (Some) or cancel (None) the scheduler's own timer `key`.
    Timer(u32, Option<SimTime>),
    /// The entity is paused (Xen pause flags such as `parked` or `migrating`): it still wants a
    /// CPU, but the scheduler will not run it. The engine accounts it `offline` instead of
    /// `runnable` when it next leaves a CPU while still wanting one, and when a wake-up finds it
    /// paused (Xen's runstate rules, xen-schedulers.md §1.3). A queued entity stays `runnable`
    /// (Xen changes no runstate when it parks a queued vCPU).
    Pause(EntityId),
    /// The pause is lifted. With `wake` (Xen `vcpu_wake`, as after a migration) an `offline`
    /// entity that wants a CPU becomes `runnable` now; without it (Xen's
    /// `unpark_parked_units`) the runstate is left alone: an `offline` entity stays offline until
    /// it runs.
    Unpause(EntityId, bool),
    /// A policy event for the trace ([`SchedCtx::trace`]; only while tracing is on).
    Trace(SchedEvent),
}

/// Per-level switches that change what the scheduler observes.
#[derive(Clone, Copy, Debug, Default)]
pub struct LevelClock {
    /// Linux `CONFIG_PARAVIRT_TIME_ACCOUNTING` (and the steal clock available): subtract steal
    /// time from `clock_task`.
    pub steal_accounting: bool,
    /// Tracing is on: [`SchedCtx::trace`] reports the policy's events (set by the engine).
    pub trace: bool,
}

/// The window through which a hook sees its level and makes requests.
pub struct SchedCtx<'a> {
    now: SimTime,
    clock: LevelClock,
    cpus: &'a [CpuInfo],
    ents: &'a [EntityInfo],
    out: &'a mut Vec<Request>,
}

impl<'a> SchedCtx<'a> {
    pub fn new(
        now: SimTime,
        clock: LevelClock,
        cpus: &'a [CpuInfo],
        ents: &'a [EntityInfo],
        out: &'a mut Vec<Request>,
    ) -> Self {
        SchedCtx {
            now,
            clock,
            cpus,
            ents,
            out,
        }
    }

    /// Reports a policy event for the trace (crate::trace) as a [`Request::Trace`]. `ev` is
    /// called, and the event kept, only while tracing is on ([`LevelClock::trace`]): when off
    /// this is one test of a flag.
    #[inline]
    pub fn trace(&mut self, ev: impl FnOnce() -> SchedEvent) {
        if self.clock.trace {
            self.out.push(Request::Trace(ev()));
        }
    }

    #[inline]
    pub fn now(&self) -> SimTime {
        self.now
    }

    #[inline]
    pub fn nr_cpus(&self) -> usize {
        self.cpus.len()
    }

    #[inline]
    pub fn nr_entities(&self) -> usize {
        self.ents.len()
    }

    #[inline]
    pub fn cpu(&self, c: CpuId) -> &CpuInfo {
        &self.cpus[c.idx()]
    }

    #[inline]
    pub fn ent(&self, e: EntityId) -> &EntityInfo {
        &self.ents[e.idx()]
    }

    /// The CPU's task clock (Linux `rq->clock_task`): wall time, minus the CPU's steal time when
    /// steal accounting is on. Without steal accounting a descheduled vCPU's absence is charged to
    /// whatever task was running on it.
    #[inline]
    pub fn clock_task(&self, c: CpuId) -> SimTime {
        if self.clock.steal_accounting {
            self.now.saturating_sub(self.cpus[c.idx()].steal_ns)
        } else {
            self.now
        }
    }

    #[inline]
    pub fn resched(&mut self, c: CpuId) {
        self.out.push(Request::Resched(c));
    }

    /// Pauses `e` ([`Request::Pause`]).
    #[inline]
    pub fn pause(&mut self, e: EntityId) {
        self.out.push(Request::Pause(e));
    }

    /// Lifts the pause of `e` ([`Request::Unpause`]).
    #[inline]
    pub fn unpause(&mut self, e: EntityId, wake: bool) {
        self.out.push(Request::Unpause(e, wake));
    }

    /// Arms the scheduler's own timer `key` (0..[`Scheduler::nr_timers`]) at `at`, or cancels it.
    #[inline]
    pub fn set_timer(&mut self, key: u32, at: Option<SimTime>) {
        self.out.push(Request::Timer(key, at));
    }

    /// How many requests the hooks have made so far (for [`crate::cpupool`], which shifts the
    /// timer keys of one pool's scheduler by the pool's base).
    #[inline]
    pub(crate) fn mark(&self) -> usize {
        self.out.len()
    }

    /// Tags the trace events reported since `from` ([`Self::mark`]) as cpupool `pool`'s: puts
    /// a [`SchedEvent::Pool`] before them if there are any. Cold: only while tracing is on.
    #[cold]
    #[inline(never)]
    pub(crate) fn tag_pool_traces(&mut self, from: usize, pool: u32) {
        if self.out[from..]
            .iter()
            .any(|r| matches!(r, Request::Trace(_)))
        {
            self.out
                .insert(from, Request::Trace(SchedEvent::Pool { pool }));
        }
    }

    /// Whether tracing is on ([`LevelClock::trace`]).
    #[inline]
    pub(crate) fn tracing(&self) -> bool {
        self.clock.trace
    }

    /// Adds `base` to the key of every timer request made since `from` ([`Self::mark`]).
    #[inline]
    pub(crate) fn offset_timers(&mut self, from: usize, base: u32) {
        for r in &mut self.out[from..] {
            if let Request::Timer(k, _) = r {
                *k += base;
            }
        }
    }
}

/// A scheduling policy. See the module doc for the order in which the engine calls the hooks.
pub trait Scheduler: Send {
    /// Short name, e.g. `credit2`.
    fn name(&self) -> &'static str;

    /// The name of the layout its own trace records take (the xentrace sink's class, docs/
    /// trace.md): its name, or a release whose records differ (`credit2-4.2.1`).
    fn trace_class(&self) -> &'static str {
        self.name()
    }

    /// Number of timers the policy wants (`set_timer` keys `0..n`). Called once at build.
    fn nr_timers(&self) -> u32 {
        0
    }

    /// Period of the policy's tick while a CPU is busy (Linux: 1/HZ), or None.
    fn tick_period(&self) -> Option<Nanos> {
        None
    }

    /// Called once per entity at build time, in id order; every entity starts blocked.
    fn insert(&mut self, ctx: &mut SchedCtx, e: EntityId);

    /// `e` became runnable. It is not running and not queued. Queue it and request reschedules.
    fn wake(&mut self, ctx: &mut SchedCtx, e: EntityId, info: WakeInfo);

    /// `e`, current on its CPU, stops being runnable. `schedule` of that CPU follows at once.
    fn block(&mut self, ctx: &mut SchedCtx, e: EntityId);

    /// `e`, current on its CPU, yields. `schedule` of that CPU follows at once.
    fn yield_(&mut self, ctx: &mut SchedCtx, e: EntityId);

    /// Choose what `cpu` runs next. The current entity is `ctx.cpu(cpu).curr` and is still
    /// runnable unless it just blocked. Must return an entity whose hard affinity contains `cpu`
    /// and that is not running on another CPU.
    fn schedule(&mut self, ctx: &mut SchedCtx, cpu: CpuId) -> Pick;

    /// `e` was switched out of its CPU (Xen `context_saved`).
    fn context_saved(&mut self, _ctx: &mut SchedCtx, _e: EntityId) {}

    /// The periodic tick of a busy CPU.
    fn tick(&mut self, _ctx: &mut SchedCtx, _cpu: CpuId) {}

    /// A timer armed with `set_timer` fired.
    fn on_timer(&mut self, _ctx: &mut SchedCtx, _key: u32) {}

    /// `waker` finished a batch of work during which it woke entities with
    /// [`WakeInfo::waker`] = `waker` (a vCPU's event-channel upcall has served every pending
    /// port; the notifications it sent meanwhile woke them). Called after the batch's last wake,
    /// before the waker's CPU goes idle if it has nothing left. A policy that defers its
    /// reschedules to the end of such a batch raises them here (Credit1's seed-002
    /// `deferred_tickle`); the default does nothing.
    fn wake_batch_end(&mut self, _ctx: &mut SchedCtx, _waker: EntityId) {}

    /// The entities runnable on `cpu`, the current one included (Linux `rq->nr_running`), for
    /// a host whose hypervisor polls on halt only while the vCPU thread is alone on its pCPU
    /// (KVM's `single_task_running()` in `kvm_vcpu_halt`). None (the default): the policy does
    /// not say, and the engine lets a halt window run its course (Xen's hosts). Asked once at
    /// build (with CPU 0) to learn whether the policy says; must be cheap.
    fn nr_running(&self, _cpu: CpuId) -> Option<u32> {
        None
    }

    /// The CPU whose queue holds `e` (or that it runs on or last ran on: Linux `task_cpu(p)`),
    /// for coordinated scheduling (sim/coord.rs: which vCPU a woken interactive task waits
    /// on). None (the default): the policy does not say. Must be cheap.
    fn task_cpu(&self, _e: EntityId) -> Option<CpuId> {
        None
    }

    /// Directed yield (Linux `yield_to(p, preempt = true)`, from KVM's `kvm_vcpu_on_spin`):
    /// `curr`, current on its CPU, offers that CPU to `target` (runnable, not running). Returns
    /// None if the policy has no directed yield (the engine then makes a plain
    /// [`Self::yield_`]); `Some(true)` if `curr` yielded in favour of `target` (the engine then
    /// reschedules `curr`'s CPU; the policy requested the target's CPU's reschedule itself),
    /// `Some(false)` if it refused (nothing changed: `curr` goes on). A policy that has it
    /// refuses a target that runs, `curr` itself included: the engine asks that to learn
    /// whether the policy has a directed yield.
    fn yield_to(
        &mut self,
        _ctx: &mut SchedCtx,
        _curr: EntityId,
        _target: EntityId,
    ) -> Option<bool> {
        None
    }

    /// The policy's main per-entity figure, for traces: vruntime for CFS, credit for Credit2.
    fn probe(&self, _e: EntityId) -> Option<i64> {
        None
    }

    // --- Lifecycle and run-time changes (docs/design.md, Lifecycle) ---

    /// `e` leaves the level for good (a task exited: Linux `do_task_dead` then `sched_dead`;
    /// Xen `remove_unit`). Called by the engine right after `e` blocked and its CPU
    /// rescheduled: `e` is not runnable, on no CPU, and will never be woken again. The
    /// scheduler drops what it keeps for `e` (its id stays allocated). May request
    /// reschedules and timers.
    fn remove(&mut self, _ctx: &mut SchedCtx, _e: EntityId) {}

    /// The attributes of the entities of `group` changed at run time (Xen `xl sched-* -d`:
    /// a domain's weight or cap). Called by the engine from a timeline event, outside any CPU's
    /// code, after it has written the new values into every member's `params.xen`; the members
    /// may be in any state. May request reschedules, timers and pauses.
    fn adjust(&mut self, _ctx: &mut SchedCtx, _group: u32) {}

    /// A scheduler-wide parameter changed at run time (Xen `xl sched-* -s`). Called by the
    /// engine from a timeline event, outside any CPU's code; validation let through only the
    /// parameters the configured policy takes (its `ConfigCheck::check_global`), so a policy
    /// that gets one it does not know may panic. May request reschedules and timers.
    fn adjust_global(&mut self, _ctx: &mut SchedCtx, p: GlobalParam) {
        panic!("{}: no run-time parameter {p:?}", self.name())
    }

    /// The Linux attributes of `e` changed at run time (`setpriority`/nice, `sched_setattr`).
    /// Called by the engine from a timeline event, outside any CPU's code, after it wrote the
    /// new values into `params.linux`; `e` may be blocked, queued or running. May request
    /// reschedules.
    fn prio_changed(&mut self, _ctx: &mut SchedCtx, _e: EntityId) {}

    /// `e` is paused (`paused`) or unpaused from outside the scheduler (Xen `domain_pause`,
    /// `domain_unpause` for every vCPU of a domain: `xl pause`/`xl unpause`). Called by the
    /// engine from a timeline event, outside any CPU's code; `e` may be in any state. The
    /// scheduler must stop running `e` (tickle its CPU, dequeue it) and tell the engine with
    /// [`SchedCtx::pause`] / [`SchedCtx::unpause`], so its time is accounted `offline`. The
    /// default refuses (only host levels take pauses; validation checks the target).
    fn set_paused(&mut self, _ctx: &mut SchedCtx, _e: EntityId, _paused: bool) {
        panic!("{}: pausing entities is not supported", self.name())
    }

    /// CPU `cpu` of this level goes offline (Xen `xen-hptool cpu-offline`: the pCPU leaves
    /// its cpupool, `cpupool_unassign_cpu` → `cpu_disable_scheduler`, `schedule_cpu_rm`;
    /// Linux `echo 0 > .../cpuN/online`: `sched_cpu_deactivate`, `sched_cpu_dying`,
    /// `migrate_tasks`). Called by the engine from a `cpu_offline` timeline event, outside
    /// any CPU's code, after it cleared `ctx.cpu(cpu).online` and widened to every CPU of the
    /// level the hard affinity of each entity left with no online CPU in it (Xen "Breaking
    /// affinity", Linux `select_fallback_rq`; the engine logs each, [`crate::sim::Simulation::log`]).
    /// Validation guarantees another CPU stays online. The entity current on `cpu` (if any) is
    /// still there and may be running, queued elsewhere or blocked entities may name `cpu` as
    /// theirs. The scheduler must stop using `cpu` and move what it keeps there to online
    /// CPUs; it asks for the current entity to leave with a reschedule of `cpu`, which the
    /// engine delivers at once, and from then on `schedule(cpu)` must return no entity. May
    /// request reschedules, timers and pauses. The default refuses (validation lets through
    /// only levels whose scheduler takes CPU offlining).
    fn cpu_offline(&mut self, _ctx: &mut SchedCtx, cpu: CpuId) {
        panic!("{}: CPU {} offline is not supported", self.name(), cpu.0)
    }

    /// CPU `cpu` of this level comes back online (`xen-hptool cpu-online`: the pCPU rejoins
    /// Pool-0, `cpupool_cpu_add` → `schedule_cpu_add`; Linux `sched_cpu_activate`). Called
    /// by the engine from a `cpu_online` timeline event, outside any CPU's code, after it set
    /// `ctx.cpu(cpu).online`; `cpu` is idle. Affinities widened at the offline stay wide (as
    /// upstream: neither Xen nor Linux restores them). The scheduler takes `cpu` into use; it
    /// may request reschedules (of `cpu`, to let it pick work) and timers. The default refuses.
    fn cpu_online(&mut self, _ctx: &mut SchedCtx, cpu: CpuId) {
        panic!("{}: CPU {} online is not supported", self.name(), cpu.0)
    }

    /// The vCPU `e` is taken down (`down`) or brought up by its own guest (Xen `VCPUOP_down`
    /// / `VCPUOP_up`: the `_VPF_down` pause flag): its guest took the CPU it backs offline,
    /// or online again. Called by the engine from a guest's `cpu_offline` event after the
    /// guest moved its tasks away and its CPU idles, and from `cpu_online` before the guest
    /// CPU runs; `e` may be running, queued or blocked. Like [`Self::set_paused`] the
    /// scheduler must stop running `e` and tell the engine with [`SchedCtx::pause`] /
    /// [`SchedCtx::unpause`]; the engine accounts `e` `offline` while it is down. The default
    /// refuses (validation checks the host takes it).
    fn set_down(&mut self, _ctx: &mut SchedCtx, _e: EntityId, _down: bool) {
        panic!("{}: taking vCPUs down is not supported", self.name())
    }

    /// A cpupool operation (docs/cpupools.md): only a host level built with `[[cpupool]]`
    /// tables ([`crate::cpupool::PoolSched`]) takes one; the default refuses (validation lets
    /// pool events through only for such a machine). Called by the engine from a cpupool
    /// timeline event, outside any CPU's code; what holds is said per [`PoolOp`].
    fn cpupool(&mut self, _ctx: &mut SchedCtx, op: PoolOp) {
        panic!("{}: no cpupools ({op:?})", self.name())
    }

    /// Which pool each pCPU and domain is in, for a host level with cpupools (the engine
    /// reads it in cpupool operations and results); None (the default): no pools.
    fn pool_map(&self) -> Option<&crate::cpupool::PoolMap> {
        None
    }

    /// The name of pool `pool`'s scheduler, for a host level with cpupools (the trace's
    /// metadata); None (the default): no pools.
    fn pool_sched_name(&self, _pool: u32) -> Option<&'static str> {
        None
    }

    /// The [`Self::trace_class`] of pool `pool`'s scheduler; None (the default): no pools.
    fn pool_trace_class(&self, _pool: u32) -> Option<&'static str> {
        None
    }
}

/// A cpupool operation ([`Scheduler::cpupool`]). Pools are numbered as Xen numbers them:
/// Pool-0 is 0, the `[[cpupool]]` tables 1, 2, ... in their order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolOp {
    /// `xl cpupool-cpu-add`: the free pCPU `cpu` (offline for the engine, in no pool) now
    /// belongs to `pool`; the engine then brings it online ([`Scheduler::cpu_online`], which
    /// the pool's scheduler takes as `schedule_cpu_add`).
    AssignCpu { cpu: CpuId, pool: u32 },
    /// `xl cpupool-migrate` (Xen `sched_move_domain`): every vCPU of domain `group` leaves
    /// its pool's scheduler (`remove_unit`) and joins `pool`'s (`insert_unit`), in id order,
    /// paused there ([`Scheduler::set_paused`]). The engine paused them in the old pool first
    /// (each is on no CPU) and wrote their new parameters (attributes, affinities, first CPU);
    /// it unpauses them afterwards.
    MoveDomain { group: u32, pool: u32 },
    /// `xl sched-credit2 -s -p POOL` (`xl sched-credit -s -p POOL`): a scheduler-wide
    /// parameter of `pool`'s scheduler ([`Scheduler::adjust_global`] there).
    Global { pool: u32, param: GlobalParam },
}

/// A scheduler-wide parameter changed at run time ([`Scheduler::adjust_global`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobalParam {
    /// Xen `xl sched-credit2 -s -r` / `xl sched-credit -s -r`: the rate limit (µs).
    RatelimitUs(u64),
    /// Xen `xl sched-credit -s -t`: the time slice (ms).
    TsliceMs(u64),
}
