//! The Linux scheduler core below every Linux scheduling class, after `kernel/sched/core.c`
//! (v5.10): the per-CPU run-queue clock (`rq->clock`, `rq->clock_task` with steal time),
//! `need_resched`, the class chain and the skeletons that call the classes (wake-up, fork,
//! `__schedule`, `scheduler_tick`, `yield`, `yield_to`).
//!
//! # The class chain
//!
//! Like `struct sched_class`, a [`SchedClass`] is a table of hooks; the core holds one instance
//! of each class in the fixed order stop > deadline > RT > fair > idle and asks them in that
//! order for the next task. [`LinuxCore`] is generic over the classes, so every call is static
//! (one `Box<dyn Scheduler>` per level, no further indirection): `LinuxCore<Cfs, Rt>` is Linux
//! 5.10 with CFS as the fair class, the RT class (`guest/rt.rs`) above it and [`EmptyClass`] in
//! the other slots. A class is added by implementing [`SchedClass`] and naming it in the type,
//! without touching the others. A task belongs to the first class, in chain order, whose
//! [`SchedClass::accepts`] takes its policy (`p->sched_class`); CFS accepts every policy, so a
//! core without an RT class (`LinuxCore<Cfs>`) runs SCHED_FIFO and SCHED_RR tasks as normal
//! ones. The stop class never has tasks (no stop-machine work is modelled) and the idle class
//! is the engine's idle: a CPU with nothing to pick idles.
//!
//! # Who calls what
//!
//! The engine calls the [`Scheduler`] hooks (see `vmsched_core::sched`); the core turns each
//! into the class calls Linux makes, with the run queue's clock brought up to date where Linux
//! calls `update_rq_clock`:
//!
//! * `wake(e)`: `try_to_wake_up`: `select_task_rq` (placement: the CPU is chosen by the task's
//!   class, as its own operation), `migrate_task_rq` + `set_task_cpu` if it moves, the target
//!   queue's clock, `enqueue_task(ENQUEUE_WAKEUP)`, then `check_preempt_curr` (the class's
//!   `wakeup_preempt` when the current task is of the same class, a reschedule when the wakee's
//!   class is higher or the CPU idles), the class's `task_woken` (RT: push) and the `avg_idle`
//!   update of `ttwu_do_wakeup`. A first wake-up (`WakeCause::Fork`) is `wake_up_new_task`:
//!   `task_fork` on the parent's queue, `select_task_rq(SD_BALANCE_FORK)`, enqueue,
//!   `check_preempt_curr(WF_FORK)`, `task_woken`.
//!   A wake-up that changes the task's CPU is traced as `SchedEvent::Migrate` (the fair
//!   classes trace their balancers' moves the same way: docs/cfs.md).
//! * `on_timer(key)`: a class's own timer (hrtimer); the keys are given out in chain order at
//!   construction (`nr_timers`, `set_timer_base`).
//! * `block(e)`: `deactivate_task(DEQUEUE_SLEEP)` on the task's queue (`__schedule` follows).
//! * `yield_(e)`: `do_sched_yield` → the class's `yield_task`.
//! * `schedule(cpu)`: `__schedule`: clock, clear `need_resched`, `put_prev_task(prev)`, then each
//!   class's `pick_next_task` in order and `set_next_task` on the pick. A class may balance
//!   inside its pick when it has nothing (CFS's `newidle_balance`).
//! * `tick(cpu)`: `scheduler_tick`: clock, the current task's class `task_tick`, then every
//!   class's `trigger_load_balance` (periodic balancing).
//!
//! A class hook reads the level and the core's run queues through a [`LinuxCtx`] and requests
//! reschedules only through [`LinuxCtx::resched_curr`], which sets `need_resched` once until the
//! next `__schedule` (TIF_NEED_RESCHED).

use std::ops::{Deref, DerefMut};

use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{Pick, Policy, SchedCtx, Scheduler, WakeInfo};
use vmsched_core::time::Nanos;
use vmsched_core::trace::SchedEvent;

/// The per-CPU run-queue fields the core owns (Linux v5.10: the core part of `struct rq`).
#[derive(Clone, Debug, Default)]
pub struct Rq {
    /// `rq->clock`: the wall clock as of the last `update_rq_clock`.
    pub clock: u64,
    /// `rq->clock_task`: `clock` minus the steal time accounted so far.
    pub clock_task: u64,
    /// `rq->prev_steal_time_rq`: the steal clock already subtracted.
    pub prev_steal_time_rq: u64,
    /// TIF_NEED_RESCHED of the CPU's current task: a reschedule was requested and `__schedule`
    /// has not run since.
    pub need_resched: bool,
    /// `rq->idle_stamp`: when the CPU last went idle after a failed newidle balance.
    pub idle_stamp: Option<u64>,
    /// `rq->avg_idle`: the average idle period, fed at each wake-up of an idle CPU.
    pub avg_idle: u64,
    /// `2 × sysctl_sched_migration_cost`: the cap of `avg_idle`.
    pub max_idle_balance_cost: u64,
    /// Steal beyond the clock delta is dropped, not carried over (6.6.87, 6.12.19, 6.13+:
    /// ERRATA L5); set by the fair class's `init_rq`. False: 5.10.y's carry-over.
    pub drop_excess_steal: bool,
    /// Steal is subtracted only in whole ticks of this length (Linux 3.x's `steal_ticks`), the
    /// rest staying pending; set by the fair class's `init_rq` (CFS 3.17). 0: exact (4.x on).
    pub steal_tick_ns: u64,
    /// `rq->rt.rt_nr_running` + `rq->dl.dl_nr_running`: RT and deadline tasks queued or
    /// running here, kept by those classes, so that another class's idle test (`idle_cpu`
    /// reads the whole `rq->nr_running`) sees them.
    pub rt_nr_running: u32,
    /// `rq->cfs.h_nr_running`: the fair class's runnable tasks here (running included), as of
    /// the start of the last `__schedule` or tick of this CPU (the core reads it from the fair
    /// class's [`SchedClass::nr_running`]), for the fair server (6.12's `dl_server`).
    pub cfs_nr_running: u32,
    /// Deadline run time (task clock, ns) not yet added to the RT class's `rt_time`: Linux
    /// v5.10's `update_curr_dl` charges it to the RT bandwidth too; the deadline class adds
    /// here and the RT class takes it at its accounting points.
    pub dl_rt_time: u64,
}

/// What a class hook sees: the engine's context of the level plus the core's run queues.
pub struct LinuxCtx<'c, 'a> {
    sched: &'c mut SchedCtx<'a>,
    rq: &'c mut [Rq],
}

impl<'a> Deref for LinuxCtx<'_, 'a> {
    type Target = SchedCtx<'a>;
    #[inline]
    fn deref(&self) -> &SchedCtx<'a> {
        self.sched
    }
}

impl DerefMut for LinuxCtx<'_, '_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.sched
    }
}

impl<'c, 'a> LinuxCtx<'c, 'a> {
    #[inline]
    pub fn new(sched: &'c mut SchedCtx<'a>, rq: &'c mut [Rq]) -> Self {
        LinuxCtx { sched, rq }
    }

    #[inline]
    pub fn rq(&self, cpu: usize) -> &Rq {
        &self.rq[cpu]
    }

    #[inline]
    pub fn rq_mut(&mut self, cpu: usize) -> &mut Rq {
        &mut self.rq[cpu]
    }

    /// `rq_clock_task(rq)`.
    #[inline]
    pub fn rq_clock_task(&self, cpu: usize) -> u64 {
        self.rq[cpu].clock_task
    }

    /// Linux v5.10: update_rq_clock + update_rq_clock_task (steal capped at the delta, the
    /// excess carried over to later updates as in 5.10.y, or dropped with
    /// `Rq::drop_excess_steal`, ERRATA L5; in whole ticks with `Rq::steal_tick_ns`, 3.x). The steal reading is the
    /// engine's steal clock when the guest accounts steal time (PARAVIRT_TIME_ACCOUNTING), else
    /// 0.
    #[inline]
    pub fn update_rq_clock(&mut self, cpu: usize) {
        let now = self.sched.now();
        let steal_clock = now - self.sched.clock_task(CpuId(cpu as u32));
        let rq = &mut self.rq[cpu];
        if now <= rq.clock {
            return;
        }
        let mut delta = now - rq.clock;
        rq.clock = now;
        let pending = steal_clock.saturating_sub(rq.prev_steal_time_rq);
        let mut steal = pending.min(delta);
        if rq.steal_tick_ns > 0 {
            steal -= steal % rq.steal_tick_ns;
        }
        rq.prev_steal_time_rq += if rq.drop_excess_steal { pending } else { steal };
        delta -= steal;
        rq.clock_task += delta;
    }

    /// Linux v5.10: resched_curr. Requests a reschedule of `cpu` once until its next
    /// `__schedule`.
    #[inline]
    pub fn resched_curr(&mut self, cpu: usize) {
        if !self.rq[cpu].need_resched {
            self.rq[cpu].need_resched = true;
            self.sched.resched(CpuId(cpu as u32));
        }
    }
}

/// `enqueue_task` flags (Linux `ENQUEUE_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EnqueueFlags {
    /// ENQUEUE_WAKEUP: the task wakes up (else it is new, or moved by a balancer).
    pub wakeup: bool,
    /// ENQUEUE_MIGRATED: it changed CPU on the way (`set_task_cpu`).
    pub migrated: bool,
}

/// `dequeue_task` flags (Linux `DEQUEUE_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DequeueFlags {
    /// DEQUEUE_SLEEP: the task goes to sleep (else it moves, or its attributes change).
    pub sleep: bool,
}

/// Wake-up preemption flags (Linux `WF_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WakeFlags {
    /// WF_FORK: the first wake-up of a new task.
    pub fork: bool,
    /// WF_SYNC: the waker is about to sleep.
    pub sync: bool,
}

/// A Linux scheduling class (Linux `struct sched_class`). CPUs and tasks are the level's local
/// indices. Every hook is called by [`LinuxCore`] with the lock-holding context Linux has: the
/// task's run queue (and, for a migration, both) is "locked", nothing else runs meanwhile.
/// Hooks for tasks of another class are never called, except [`SchedClass::init_task`].
pub trait SchedClass: Send {
    /// A class that never has tasks ([`EmptyClass`]). When every class above fair is empty,
    /// the core skips the class lookup (Linux 5.10's fast path of `pick_next_task` when all
    /// tasks are fair).
    const EMPTY: bool = false;

    /// Whether tasks of `policy` belong to this class (`__setscheduler`'s choice of
    /// `p->sched_class`). The core gives a task to the first accepting class in chain order.
    fn accepts(&self, policy: Policy) -> bool;

    /// Run-queue defaults this class sets at boot (Linux `sched_init`), once per CPU.
    fn init_rq(&self, _rq: &mut Rq) {}

    /// Build time, every task, in id order, for every class (as `__sched_fork` initialises a
    /// task's `se`, `rt` and `dl` whatever its class). `owned`: the task is this class's.
    fn init_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, owned: bool);

    /// `task_cpu(p)`: where the task is queued, runs or last ran.
    fn task_cpu(&self, e: EntityId) -> CpuId;

    /// Placement of a waking task: choose its CPU (`select_task_rq`, with the fallback to an
    /// allowed CPU). Called before any queue is touched; must return a CPU in the task's
    /// affinity.
    fn select_task_rq(&mut self, ctx: &mut LinuxCtx, e: EntityId, info: WakeInfo) -> CpuId;

    /// Placement of a new task (`select_task_rq` with SD_BALANCE_FORK), after `task_fork`.
    /// `parent_cpu` is the CPU the parent runs on.
    fn select_task_rq_fork(&mut self, ctx: &mut LinuxCtx, e: EntityId, parent_cpu: CpuId) -> CpuId;

    /// The waking task moves to `new_cpu` (`migrate_task_rq` followed by `set_task_cpu`); it
    /// is on no queue.
    fn migrate_task_rq(&mut self, ctx: &mut LinuxCtx, e: EntityId, new_cpu: CpuId);

    /// `e`, on no queue of this class (it is joining the class from another one), is on
    /// `cpu` now (Linux `set_task_rq` of a task that moved while in another class, then
    /// `attach_task_cfs_rq`'s view of its CPU). The default is [`SchedClass::migrate_task_rq`];
    /// a class whose `migrate_task_rq` expects a waking task's state overrides it.
    fn attach_task_cpu(&mut self, ctx: &mut LinuxCtx, e: EntityId, cpu: CpuId) {
        self.migrate_task_rq(ctx, e, cpu);
    }

    /// A new task is set up on its parent's CPU (`task_fork`, from `sched_fork`).
    fn task_fork(&mut self, ctx: &mut LinuxCtx, e: EntityId, parent_cpu: CpuId);

    /// Put `e` on `cpu`'s queue (its clock is up to date).
    fn enqueue_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId, f: EnqueueFlags);

    /// Take `e` off `cpu`'s queue (its clock is up to date). With `sleep`, `e` is the current
    /// task, which blocks; `__schedule` follows at once.
    fn dequeue_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId, f: DequeueFlags);

    /// The current task `e` of `cpu` yields (`sched_yield`); `__schedule` follows at once.
    fn yield_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId);

    /// The current task of `cpu` (the yielder's CPU, Linux's `rq`) yields to `target` of the
    /// same class, queued on its own CPU (`p_rq`, maybe another) (`yield_to`); returns whether
    /// the class arranged for `target` to run next.
    fn yield_to_task(&mut self, _ctx: &mut LinuxCtx, _cpu: CpuId, _target: EntityId) -> bool {
        false
    }

    /// `p` of this class was just queued on `cpu`, whose current task `curr` is of this class
    /// too: should `p` preempt it? Requests with `resched_curr` (Linux v5.10:
    /// `check_preempt_curr`; 6.x: `wakeup_preempt`).
    fn wakeup_preempt(
        &mut self,
        ctx: &mut LinuxCtx,
        cpu: CpuId,
        curr: EntityId,
        p: EntityId,
        f: WakeFlags,
    );

    /// `e` of this class was woken onto `cpu` and `check_preempt_curr` has run (Linux
    /// `task_woken`, from `ttwu_do_wakeup` and `wake_up_new_task`): the RT class pushes tasks
    /// that cannot run here to other CPUs.
    fn task_woken(&mut self, _ctx: &mut LinuxCtx, _cpu: CpuId, _e: EntityId) {}

    /// The next task of this class for `cpu`, if it has one; `put_prev_task` was called for the
    /// previous task. May pull work from other CPUs first (newidle balance).
    fn pick_next_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId) -> Option<EntityId>;

    /// `prev` of this class stops being `cpu`'s current task (it may stay queued).
    fn put_prev_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, prev: EntityId);

    /// `e`, just picked, becomes `cpu`'s current task.
    fn set_next_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId);

    /// The tick, for `cpu`'s current task `curr` of this class.
    fn task_tick(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, curr: EntityId);

    /// The class's runnable tasks on `cpu`, running included (`rq->cfs.h_nr_running` for the
    /// fair class). The core reads the fair class's at each `__schedule` and tick into
    /// [`Rq::cfs_nr_running`]; a fair class that leaves the default (0) never starts the
    /// fair server of the class above it.
    fn nr_running(&self, _cpu: CpuId) -> u32 {
        0
    }

    /// The tick of `cpu`, for every class (fair: `trigger_load_balance`).
    fn trigger_load_balance(&mut self, _ctx: &mut LinuxCtx, _cpu: CpuId) {}

    /// How many timers of its own the class wants (hrtimers such as the RT period timer).
    /// Called once, at construction; the core then calls [`SchedClass::set_timer_base`].
    fn nr_timers(&self) -> u32 {
        0
    }

    /// The engine key of the class's timer 0: the class arms its timer `k` with
    /// `ctx.set_timer(base + k, ..)`. Called once by the core at construction.
    fn set_timer_base(&mut self, _base: u32) {}

    /// The class's timer `k` (0..[`SchedClass::nr_timers`], relative to its base) fired.
    /// Called outside any CPU's code (an hrtimer interrupt); the class brings the clocks it
    /// reads up to date itself.
    fn on_timer(&mut self, _ctx: &mut LinuxCtx, _k: u32) {}

    /// `e`'s attributes changed (`set_user_nice`, `__sched_setscheduler` within the class:
    /// the new values are in `params.linux`; the core updated `e`'s run queue clock). The class
    /// takes the new weight or priority, keeping `e` where it is (blocked, queued or running),
    /// then does its `prio_changed`: a running `e` whose priority dropped is rescheduled here;
    /// returns true when `e` is queued and not running, so the core checks whether it now
    /// preempts its CPU's current task (`check_preempt_curr`). Called from the engine's
    /// [`Scheduler::prio_changed`] (a `sched_task` timeline event), outside any CPU's code.
    fn prio_changed(&mut self, _ctx: &mut LinuxCtx, _e: EntityId) -> bool {
        false
    }

    /// `e` exited and has been dequeued (Linux `sched_dead` / the class's `task_dead`): drop
    /// what the class keeps for it. Called from the engine's [`Scheduler::remove`]; `e` is
    /// blocked, on no CPU, and never wakes again.
    fn task_dead(&mut self, _ctx: &mut LinuxCtx, _e: EntityId) {}

    /// `e` just joined this class (`switched_to`). Nothing calls it yet.
    fn switched_to(&mut self, _ctx: &mut LinuxCtx, _e: EntityId) {}

    /// The class's main figure for `e` (vruntime for CFS).
    fn probe(&self, _e: EntityId) -> Option<i64> {
        None
    }

    // --- CPU hot-plug (Linux v5.10 `sched_cpu_deactivate`, `sched_cpu_dying`,
    // `sched_cpu_activate`) ---

    /// `cpu` went offline (`ctx.cpu(cpu).online` is false) or came back online (Linux
    /// `rq_offline` / `rq_online` of every class, from `set_rq_offline` / `set_rq_online`).
    /// Called by the core from the engine's [`Scheduler::cpu_offline`] /
    /// [`Scheduler::cpu_online`], for every class, before any task moves. From an offline on,
    /// the class must place no task on `cpu` (its placement and balancing see only online
    /// CPUs: Linux rebuilds the sched domains without it); the engine already widened the hard
    /// affinity of every task left with no online CPU. Requests nothing.
    fn rq_hotplug(&mut self, _ctx: &mut LinuxCtx, _cpu: CpuId) {}

    /// The next task of this class queued on `cpu`, in the order `pick_next_task` would take
    /// them, without taking it (Linux `migrate_tasks` picks them that way); not the current
    /// task. Called by the core on an offline CPU, after `put_prev_task`, to empty it.
    fn next_queued(&self, _cpu: CpuId) -> Option<EntityId> {
        None
    }

    /// Moves `e`, queued (not running) on `src`, to `dst` (Linux `move_queued_task`:
    /// `deactivate_task`, `set_task_cpu`, `activate_task`; both queues' clocks are up to date).
    /// The core then checks whether `e` preempts `dst`'s current task. Called by the core for
    /// the tasks [`SchedClass::next_queued`] names when `src` goes offline.
    fn move_queued_task(&mut self, _ctx: &mut LinuxCtx, e: EntityId, _src: CpuId, _dst: CpuId) {
        unreachable!("a class with queued task {} moves it", e.0)
    }
}

/// A class with no tasks: the stop and idle classes of the model, and the RT and deadline
/// slots until those classes exist. It accepts no policy, so none of its task hooks is called.
#[derive(Clone, Copy, Debug, Default)]
pub struct EmptyClass;

impl SchedClass for EmptyClass {
    const EMPTY: bool = true;

    fn accepts(&self, _policy: Policy) -> bool {
        false
    }
    fn init_task(&mut self, _ctx: &mut LinuxCtx, _e: EntityId, _owned: bool) {}
    fn task_cpu(&self, _e: EntityId) -> CpuId {
        unreachable!("an empty class has no tasks")
    }
    fn select_task_rq(&mut self, _: &mut LinuxCtx, _: EntityId, _: WakeInfo) -> CpuId {
        unreachable!("an empty class has no tasks")
    }
    fn select_task_rq_fork(&mut self, _: &mut LinuxCtx, _: EntityId, _: CpuId) -> CpuId {
        unreachable!("an empty class has no tasks")
    }
    fn migrate_task_rq(&mut self, _: &mut LinuxCtx, _: EntityId, _: CpuId) {}
    fn task_fork(&mut self, _: &mut LinuxCtx, _: EntityId, _: CpuId) {}
    fn enqueue_task(&mut self, _: &mut LinuxCtx, _: CpuId, _: EntityId, _: EnqueueFlags) {}
    fn dequeue_task(&mut self, _: &mut LinuxCtx, _: CpuId, _: EntityId, _: DequeueFlags) {}
    fn yield_task(&mut self, _: &mut LinuxCtx, _: CpuId, _: EntityId) {}
    fn wakeup_preempt(
        &mut self,
        _: &mut LinuxCtx,
        _: CpuId,
        _: EntityId,
        _: EntityId,
        _: WakeFlags,
    ) {
    }
    #[inline]
    fn pick_next_task(&mut self, _: &mut LinuxCtx, _: CpuId) -> Option<EntityId> {
        None
    }
    fn put_prev_task(&mut self, _: &mut LinuxCtx, _: CpuId, _: EntityId) {}
    fn set_next_task(&mut self, _: &mut LinuxCtx, _: CpuId, _: EntityId) {}
    fn task_tick(&mut self, _: &mut LinuxCtx, _: CpuId, _: EntityId) {}
}

/// A task's class, in chain order (lower is higher priority).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClassId {
    Stop,
    Deadline,
    Rt,
    Fair,
    Idle,
}

/// The Linux scheduler of one guest kernel (or, later, a KVM host): the core with its classes.
pub struct LinuxCore<Fair: SchedClass, Rt: SchedClass = EmptyClass, Dl: SchedClass = EmptyClass> {
    name: &'static str,
    tick_ns: Nanos,
    /// The first timer key of the fair and of the deadline class (the RT class's start at 0),
    /// and the total.
    timer_base: [u32; 3],
    /// The kernel is a KVM host (host/kvm.rs): it tells the engine its run queues' lengths
    /// (for halt polling) and offers directed yield ([`Scheduler::nr_running`],
    /// [`Scheduler::yield_to`]). A guest kernel answers neither, so the engine asks nothing.
    kvm_host: bool,
    pub rq: Vec<Rq>,
    pub cls: Classes<Fair, Rt, Dl>,
}

/// The class chain of a [`LinuxCore`], in order, and each task's class.
pub struct Classes<Fair: SchedClass, Rt: SchedClass, Dl: SchedClass> {
    name: &'static str,
    /// `p->sched_class` of every task.
    class: Vec<ClassId>,
    /// Every task is the fair class's (known at build: tasks are inserted then; cleared for
    /// good when a task moves to another class, [`Classes::switch_class`]), so the other
    /// classes have nothing to do: the core skips them (the 5.10 fast path of
    /// `pick_next_task` when all runnable tasks are fair).
    fair_only: bool,
    /// Blocked tasks whose policy names another class than theirs (a `sched_setattr` between
    /// classes while they slept): they change class at their next wake-up
    /// ([`Classes::switch_class`]). A count, so the wake path looks only when there are some.
    pending_switches: u32,
    pub stop: EmptyClass,
    pub dl: Dl,
    pub rt: Rt,
    pub fair: Fair,
    pub idle: EmptyClass,
}

/// Runs `$body` with `$c` bound to the class of task `$e` in `$s` (static dispatch on
/// `p->sched_class`; no lookup at all when only the fair class can have tasks, or has any).
macro_rules! with_class {
    ($s:expr, $e:expr, |$c:ident| $body:expr) => {
        if Self::FAIR_ONLY || $s.fair_only {
            let $c = &mut $s.fair;
            $body
        } else {
            match $s.class[$e.idx()] {
                ClassId::Stop => {
                    let $c = &mut $s.stop;
                    $body
                }
                ClassId::Deadline => {
                    let $c = &mut $s.dl;
                    $body
                }
                ClassId::Rt => {
                    let $c = &mut $s.rt;
                    $body
                }
                ClassId::Fair => {
                    let $c = &mut $s.fair;
                    $body
                }
                ClassId::Idle => {
                    let $c = &mut $s.idle;
                    $body
                }
            }
        }
    };
}

impl<Fair: SchedClass> LinuxCore<Fair> {
    /// A kernel with `fair` as its only class with tasks, `ncpus` CPUs and a tick every
    /// `tick_ns` (1/HZ).
    pub fn new(name: &'static str, ncpus: usize, tick_ns: Nanos, fair: Fair) -> Self {
        LinuxCore::with_classes(name, ncpus, tick_ns, fair, EmptyClass, EmptyClass)
    }
}

impl<Fair: SchedClass, Rt: SchedClass, Dl: SchedClass> LinuxCore<Fair, Rt, Dl> {
    /// Only the fair class can have tasks (the RT and deadline slots are empty).
    const FAIR_ONLY: bool = Rt::EMPTY && Dl::EMPTY;

    pub fn with_classes(
        name: &'static str,
        ncpus: usize,
        tick_ns: Nanos,
        fair: Fair,
        rt: Rt,
        dl: Dl,
    ) -> Self {
        let (mut dl, mut rt, mut fair) = (dl, rt, fair);
        let mut rq = vec![Rq::default(); ncpus];
        for r in &mut rq {
            dl.init_rq(r);
            rt.init_rq(r);
            fair.init_rq(r);
        }
        // RT's keys first, then fair's, then the deadline class's (added last, so that the
        // other classes' keys are those of a core without it).
        let fair_base = rt.nr_timers();
        let dl_base = fair_base + fair.nr_timers();
        let timer_base = [fair_base, dl_base, dl_base + dl.nr_timers()];
        rt.set_timer_base(0);
        fair.set_timer_base(fair_base);
        dl.set_timer_base(dl_base);
        LinuxCore {
            name,
            tick_ns,
            timer_base,
            kvm_host: false,
            rq,
            cls: Classes {
                name,
                class: Vec::new(),
                fair_only: true,
                pending_switches: 0,
                stop: EmptyClass,
                dl,
                rt,
                fair,
                idle: EmptyClass,
            },
        }
    }

    /// This kernel as a KVM host named `name` (host/kvm.rs): its entities are vCPU threads and
    /// host processes.
    pub fn into_kvm_host(mut self, name: &'static str) -> Self {
        self.name = name;
        self.cls.name = name;
        self.kvm_host = true;
        self
    }

    /// `rq->nr_running` of `cpu`: the RT and the fair class's runnable tasks, running included.
    pub fn nr_running(&self, cpu: CpuId) -> u32 {
        self.rq[cpu.idx()].rt_nr_running + self.cls.fair.nr_running(cpu)
    }

    /// The class of task `e`.
    pub fn class_of(&self, e: EntityId) -> ClassId {
        self.cls.class[e.idx()]
    }

    /// The classes and a context over the run queues, borrowed apart.
    #[inline]
    fn split<'c, 'a>(
        &'c mut self,
        ctx: &'c mut SchedCtx<'a>,
    ) -> (&'c mut Classes<Fair, Rt, Dl>, LinuxCtx<'c, 'a>) {
        (&mut self.cls, LinuxCtx::new(ctx, &mut self.rq))
    }
}

impl<Fair: SchedClass, Rt: SchedClass, Dl: SchedClass> Classes<Fair, Rt, Dl> {
    /// Only the fair class can have tasks (the RT and deadline slots are empty).
    const FAIR_ONLY: bool = Rt::EMPTY && Dl::EMPTY;

    fn class_for(&self, policy: Policy) -> ClassId {
        if self.stop.accepts(policy) {
            ClassId::Stop
        } else if self.dl.accepts(policy) {
            ClassId::Deadline
        } else if self.rt.accepts(policy) {
            ClassId::Rt
        } else if self.fair.accepts(policy) {
            ClassId::Fair
        } else {
            panic!(
                "no scheduling class of {} takes {policy:?} tasks",
                self.name
            )
        }
    }

    #[inline]
    fn task_cpu(&mut self, e: EntityId) -> CpuId {
        with_class!(self, e, |c| c.task_cpu(e))
    }

    /// Linux v5.10: check_preempt_curr. `p` was just queued on `cpu`.
    #[inline]
    fn check_preempt_curr(&mut self, lx: &mut LinuxCtx, cpu: CpuId, p: EntityId, f: WakeFlags) {
        match lx.cpu(cpu).curr {
            // The idle class is preempted by anything.
            None => lx.resched_curr(cpu.idx()),
            Some(curr) if curr == p => {}
            Some(curr) => {
                let (kc, kp) = if Self::FAIR_ONLY || self.fair_only {
                    (ClassId::Fair, ClassId::Fair)
                } else {
                    (self.class[curr.idx()], self.class[p.idx()])
                };
                if kc == kp {
                    with_class!(self, p, |c| c.wakeup_preempt(lx, cpu, curr, p, f));
                } else if kp < kc {
                    lx.resched_curr(cpu.idx());
                }
            }
        }
    }

    /// Linux v5.10: `__sched_setscheduler` for a task whose new policy belongs to class `to`
    /// (`p->sched_class` changes: SCHED_OTHER ↔ SCHED_FIFO/RR under a core with an RT class).
    /// A runnable task (queued or running on `task_cpu`) is taken out of its old class as
    /// Linux does it, `dequeue_task(DEQUEUE_SAVE)` and, if it runs, `put_prev_task`; it joins
    /// the new class on the same CPU (`attach_task_cpu`, the class's `prio_changed` to take its
    /// attributes, `enqueue_task(ENQUEUE_RESTORE)`, `set_next_task` if it runs); then
    /// `check_class_changed`: a running task that dropped to a lower class reschedules its CPU
    /// (`switched_to_fair`), a queued one is checked against the current task
    /// (`check_preempt_curr`); a running task that rose (`switched_to_rt`) just goes on. A
    /// blocked task changes class at its next wake-up ([`Classes::wake_switch`]), which keeps
    /// the old class's sleeping state (EEVDF's delayed dequeue) consistent. The deadline class
    /// takes no task this way (validation refuses it: no runtime, deadline or period).
    fn switch_class(&mut self, lx: &mut LinuxCtx, e: EntityId, to: ClassId) {
        let from = self.class[e.idx()];
        assert!(
            from != ClassId::Deadline && to != ClassId::Deadline,
            "{}: a move of task {} into or out of the deadline class is not modelled",
            self.name,
            lx.ent(e).params.name
        );
        if !lx.ent(e).runnable {
            self.pending_switches += 1;
            return;
        }
        let cpu = self.task_cpu(e);
        let running = lx.cpu(cpu).curr == Some(e);
        lx.update_rq_clock(cpu.idx());
        with_class!(self, e, |c| c.dequeue_task(
            lx,
            cpu,
            e,
            DequeueFlags { sleep: false }
        ));
        if running {
            with_class!(self, e, |c| c.put_prev_task(lx, cpu, e));
        }
        self.class[e.idx()] = to;
        self.fair_only &= to == ClassId::Fair;
        with_class!(self, e, |c| {
            if c.task_cpu(e) != cpu {
                c.attach_task_cpu(lx, e, cpu);
            }
            c.prio_changed(lx, e);
            c.enqueue_task(lx, cpu, e, EnqueueFlags::default());
            if running {
                c.set_next_task(lx, cpu, e);
            }
        });
        if running {
            if to > from {
                lx.resched_curr(cpu.idx());
            }
        } else {
            self.check_preempt_curr(lx, cpu, e, WakeFlags::default());
        }
    }

    /// A class change left for the wake-up of blocked `e` (see [`Classes::switch_class`]):
    /// `e` wakes in its old class on its previous CPU (`enqueue_task(ENQUEUE_WAKEUP)`, which
    /// places it or requeues a delayed entity), then moves to the class of its policy as a
    /// queued task. Returns the CPU it is queued on, or None if `e` keeps its class.
    fn wake_switch(&mut self, lx: &mut LinuxCtx, e: EntityId) -> Option<CpuId> {
        let to = self.class_for(lx.ent(e).params.linux.policy);
        if to == self.class[e.idx()] {
            return None;
        }
        self.pending_switches = self.pending_switches.saturating_sub(1);
        let cpu = self.task_cpu(e);
        lx.update_rq_clock(cpu.idx());
        let f = EnqueueFlags {
            wakeup: true,
            migrated: false,
        };
        with_class!(self, e, |c| c.enqueue_task(lx, cpu, e, f));
        self.switch_class(lx, e, to);
        Some(cpu)
    }

    /// Linux v5.10: wake_up_new_task (with sched_fork's `task_fork`).
    fn wake_up_new_task(&mut self, lx: &mut LinuxCtx, e: EntityId, info: WakeInfo) {
        let parent_cpu = match info.parent {
            Some(p) => self.task_cpu(p),
            None => info.waker_cpu.unwrap_or_else(|| self.task_cpu(e)),
        };
        let cpu = with_class!(self, e, |c| {
            c.task_fork(lx, e, parent_cpu);
            c.select_task_rq_fork(lx, e, parent_cpu)
        });
        let cpu = self.is_cpu_allowed_or_fallback(lx, e, cpu);
        lx.update_rq_clock(cpu.idx());
        with_class!(self, e, |c| c.enqueue_task(
            lx,
            cpu,
            e,
            EnqueueFlags::default()
        ));
        let f = WakeFlags {
            fork: true,
            sync: false,
        };
        self.check_preempt_curr(lx, cpu, e, f);
        with_class!(self, e, |c| c.task_woken(lx, cpu, e));
    }

    /// Linux v5.10: select_fallback_rq: the first online CPU of `e`'s affinity on the node of
    /// `cpu`, else anywhere in its affinity. (An affinity with no online CPU left was widened
    /// by the engine at the offline: `cpuset_cpus_allowed_fallback`.)
    fn select_fallback_rq(lx: &LinuxCtx, e: EntityId, cpu: CpuId) -> CpuId {
        let hard = &lx.ent(e).params.hard_affinity;
        let node = lx.cpu(cpu).topo.node;
        let ok = |c: &CpuId| lx.cpu(*c).online;
        hard.iter()
            .filter(ok)
            .find(|c| lx.cpu(*c).topo.node == node)
            .or_else(|| hard.iter().find(ok))
            .unwrap_or_else(|| {
                panic!(
                    "invariant: task {} has an online CPU in its affinity",
                    lx.ent(e).params.name
                )
            })
    }

    /// Linux v5.10: the check of `select_task_rq`: a CPU that is not online (active) or not in
    /// the task's affinity is replaced by `select_fallback_rq` from the task's CPU.
    #[inline]
    fn is_cpu_allowed_or_fallback(&mut self, lx: &LinuxCtx, e: EntityId, cpu: CpuId) -> CpuId {
        if lx.cpu(cpu).online {
            return cpu;
        }
        let from = self.task_cpu(e);
        Self::select_fallback_rq(lx, e, from)
    }

    /// Linux v5.10: migrate_tasks (from sched_cpu_dying): every task queued on `dead`, in
    /// pick order, moves to `select_fallback_rq` (`__migrate_task` → `move_queued_task`,
    /// then `check_preempt_curr` on its new CPU).
    fn migrate_tasks(&mut self, lx: &mut LinuxCtx, dead: CpuId) {
        loop {
            let next = self
                .dl
                .next_queued(dead)
                .or_else(|| self.rt.next_queued(dead))
                .or_else(|| self.fair.next_queued(dead));
            let Some(p) = next else { break };
            let dest = Self::select_fallback_rq(lx, p, dead);
            lx.update_rq_clock(dest.idx());
            with_class!(self, p, |c| c.move_queued_task(lx, p, dead, dest));
            self.check_preempt_curr(lx, dest, p, WakeFlags::default());
        }
    }
}

impl<Fair: SchedClass, Rt: SchedClass, Dl: SchedClass> LinuxCore<Fair, Rt, Dl> {
    /// Linux v5.10: yield_to. The current task `curr` gives its CPU to `target` (same class,
    /// runnable, not running): the class marks `target` to run next, and with `preempt` the
    /// target's CPU reschedules if it runs another task. Returns whether the class obliged; the
    /// caller then reschedules `curr`'s CPU (the yield itself). The KVM host calls it for
    /// `kvm_vcpu_on_spin` (the engine's [`Scheduler::yield_to`], host/kvm.rs).
    pub fn yield_to(
        &mut self,
        ctx: &mut SchedCtx,
        curr: EntityId,
        target: EntityId,
        preempt: bool,
    ) -> bool {
        let (kc, kt) = (self.class_of(curr), self.class_of(target));
        if kc != kt || !ctx.ent(target).runnable || ctx.ent(target).on_cpu.is_some() {
            return false;
        }
        let (s, mut lx) = self.split(ctx);
        let lx = &mut lx;
        let tcpu = s.task_cpu(target);
        let cpu = lx.ent(curr).on_cpu.unwrap_or_else(|| s.task_cpu(curr));
        lx.update_rq_clock(cpu.idx());
        lx.update_rq_clock(tcpu.idx());
        let yielded = with_class!(s, target, |c| c.yield_to_task(lx, cpu, target));
        if yielded && preempt && lx.cpu(tcpu).curr.is_some_and(|c| c != curr) {
            lx.resched_curr(tcpu.idx());
        }
        yielded
    }
}

impl<Fair: SchedClass, Rt: SchedClass, Dl: SchedClass> Scheduler for LinuxCore<Fair, Rt, Dl> {
    fn name(&self) -> &'static str {
        self.name
    }

    /// A KVM host's `rq->nr_running` (KVM's `single_task_running()`); a guest's: None.
    fn nr_running(&self, cpu: CpuId) -> Option<u32> {
        self.kvm_host.then(|| LinuxCore::nr_running(self, cpu))
    }

    /// `task_cpu(p)`: the CPU of the task's class's queue.
    fn task_cpu(&self, e: EntityId) -> Option<CpuId> {
        let s = &self.cls;
        Some(if Self::FAIR_ONLY || s.fair_only {
            s.fair.task_cpu(e)
        } else {
            match s.class[e.idx()] {
                ClassId::Stop => s.stop.task_cpu(e),
                ClassId::Deadline => s.dl.task_cpu(e),
                ClassId::Rt => s.rt.task_cpu(e),
                ClassId::Fair => s.fair.task_cpu(e),
                ClassId::Idle => s.idle.task_cpu(e),
            }
        })
    }

    /// A KVM host's `yield_to(target, preempt = true)` (from `kvm_vcpu_on_spin`); a guest
    /// kernel has no caller of it: None.
    fn yield_to(&mut self, ctx: &mut SchedCtx, curr: EntityId, target: EntityId) -> Option<bool> {
        if !self.kvm_host {
            return None;
        }
        Some(LinuxCore::yield_to(self, ctx, curr, target, true))
    }

    /// One tick every 1/HZ.
    fn tick_period(&self) -> Option<Nanos> {
        Some(self.tick_ns)
    }

    /// The classes' own timers, the RT class's keys first, then the fair and the deadline
    /// class's.
    fn nr_timers(&self) -> u32 {
        self.timer_base[2]
    }

    /// A class's timer: handed to the class that owns the key, relative to its base.
    fn on_timer(&mut self, ctx: &mut SchedCtx, key: u32) {
        let [fair, dl, _] = self.timer_base;
        let (s, mut lx) = self.split(ctx);
        if key < fair {
            s.rt.on_timer(&mut lx, key);
        } else if key < dl {
            s.fair.on_timer(&mut lx, key - fair);
        } else {
            s.dl.on_timer(&mut lx, key - dl);
        }
    }

    /// Build time (`sched_fork`'s initialisation): the task's class by its policy, then every
    /// class initialises its part of the task.
    fn insert(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        let (s, mut lx) = self.split(ctx);
        let lx = &mut lx;
        assert_eq!(e.idx(), s.class.len(), "insert: tasks come in id order");
        let k = s.class_for(lx.ent(e).params.linux.policy);
        s.class.push(k);
        s.fair_only &= k == ClassId::Fair;
        s.stop.init_task(lx, e, k == ClassId::Stop);
        s.dl.init_task(lx, e, k == ClassId::Deadline);
        s.rt.init_task(lx, e, k == ClassId::Rt);
        s.fair.init_task(lx, e, k == ClassId::Fair);
        s.idle.init_task(lx, e, k == ClassId::Idle);
    }

    /// Linux v5.10: try_to_wake_up (select_task_rq, set_task_cpu, ttwu_do_activate:
    /// enqueue_task with ENQUEUE_WAKEUP, check_preempt_curr, the avg_idle update of
    /// ttwu_do_wakeup), or wake_up_new_task for a first wake-up.
    fn wake(&mut self, ctx: &mut SchedCtx, e: EntityId, info: WakeInfo) {
        let (s, mut lx) = self.split(ctx);
        let lx = &mut lx;
        if info.is_new() {
            s.wake_up_new_task(lx, e, info);
            return;
        }
        if s.pending_switches > 0 {
            if let Some(cpu) = s.wake_switch(lx, e) {
                with_class!(s, e, |c| c.task_woken(lx, cpu, e));
                return;
            }
        }
        let (cpu, migrated) = with_class!(s, e, |c| {
            let prev = c.task_cpu(e);
            let cpu = c.select_task_rq(lx, e, info);
            let cpu = if lx.cpu(cpu).online {
                cpu
            } else {
                Classes::<Fair, Rt, Dl>::select_fallback_rq(lx, e, prev)
            };
            if cpu != prev {
                c.migrate_task_rq(lx, e, cpu);
                lx.trace(|| SchedEvent::Migrate {
                    ent: e,
                    from: prev,
                    to: cpu,
                });
            }
            (cpu, cpu != prev)
        });
        lx.update_rq_clock(cpu.idx());
        let f = EnqueueFlags {
            wakeup: true,
            migrated,
        };
        with_class!(s, e, |c| c.enqueue_task(lx, cpu, e, f));
        let wf = WakeFlags {
            fork: false,
            sync: info.sync,
        };
        s.check_preempt_curr(lx, cpu, e, wf);
        with_class!(s, e, |c| c.task_woken(lx, cpu, e));
        let rq = lx.rq_mut(cpu.idx());
        if let Some(stamp) = rq.idle_stamp.take() {
            let sample = rq.clock - stamp;
            let diff = sample as i64 - rq.avg_idle as i64;
            rq.avg_idle = ((rq.avg_idle as i64 + diff / 8) as u64).min(rq.max_idle_balance_cost);
        }
    }

    /// Linux v5.10: deactivate_task with DEQUEUE_SLEEP from `__schedule` (the engine calls
    /// `schedule` right after).
    fn block(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        let (s, mut lx) = self.split(ctx);
        let cpu = s.task_cpu(e);
        let lx = &mut lx;
        lx.update_rq_clock(cpu.idx());
        let f = DequeueFlags { sleep: true };
        with_class!(s, e, |c| c.dequeue_task(lx, cpu, e, f));
    }

    /// Linux v5.10: do_sched_yield → `yield_task` of the task's class.
    fn yield_(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        let (s, mut lx) = self.split(ctx);
        let cpu = s.task_cpu(e);
        with_class!(s, e, |c| c.yield_task(&mut lx, cpu, e))
    }

    /// Linux v5.10: __schedule → pick_next_task: put the previous task back into its class,
    /// then ask the classes in order. No HRTICK: no slice timer.
    fn schedule(&mut self, ctx: &mut SchedCtx, cpu: CpuId) -> Pick {
        let prev = ctx.cpu(cpu).curr;
        let (s, mut lx) = self.split(ctx);
        let lx = &mut lx;
        lx.update_rq_clock(cpu.idx());
        lx.rq_mut(cpu.idx()).need_resched = false;
        if let Some(p) = prev {
            with_class!(s, p, |c| c.put_prev_task(lx, cpu, p));
        }
        if !lx.cpu(cpu).online {
            // The offline's reschedule (sched_cpu_dying): empty the CPU, run nothing.
            s.migrate_tasks(lx, cpu);
            return Pick {
                next: None,
                slice: None,
            };
        }
        let next = if Self::FAIR_ONLY || s.fair_only {
            s.fair.pick_next_task(lx, cpu)
        } else {
            lx.rq_mut(cpu.idx()).cfs_nr_running = s.fair.nr_running(cpu);
            s.stop
                .pick_next_task(lx, cpu)
                .or_else(|| s.dl.pick_next_task(lx, cpu))
                .or_else(|| s.rt.pick_next_task(lx, cpu))
                .or_else(|| s.fair.pick_next_task(lx, cpu))
                .or_else(|| s.idle.pick_next_task(lx, cpu))
        };
        if let Some(n) = next {
            with_class!(s, n, |c| c.set_next_task(lx, cpu, n));
        }
        Pick { next, slice: None }
    }

    /// Linux v5.10: scheduler_tick: the clock, the current task's `task_tick`, then
    /// `trigger_load_balance`.
    fn tick(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        let curr = ctx.cpu(cpu).curr;
        let (s, mut lx) = self.split(ctx);
        let lx = &mut lx;
        lx.update_rq_clock(cpu.idx());
        let fair_only = Self::FAIR_ONLY || s.fair_only;
        if !fair_only {
            lx.rq_mut(cpu.idx()).cfs_nr_running = s.fair.nr_running(cpu);
        }
        if let Some(c) = curr {
            with_class!(s, c, |x| x.task_tick(lx, cpu, c));
        }
        if !fair_only {
            s.dl.trigger_load_balance(lx, cpu);
            s.rt.trigger_load_balance(lx, cpu);
        }
        s.fair.trigger_load_balance(lx, cpu);
    }

    /// Linux v5.10: do_task_dead (the task was dequeued by the `block` before) and
    /// `sched_dead` → the class's `task_dead`.
    fn remove(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        let (s, mut lx) = self.split(ctx);
        with_class!(s, e, |c| c.task_dead(&mut lx, e));
    }

    /// Linux v5.10: set_user_nice / __sched_setscheduler for a task that stays in its class:
    /// the class reweights it in place (a dequeue with DEQUEUE_SAVE and an enqueue with
    /// ENQUEUE_RESTORE leave its vruntime as it was), then `prio_changed`. A change of class
    /// (`switched_from`/`switched_to`) is the core's class switch, at a guest as at a KVM
    /// host (only SCHED_DEADLINE moves are refused, `check_policy_change`).
    fn prio_changed(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        let (s, mut lx) = self.split(ctx);
        let lx = &mut lx;
        let k = s.class_for(lx.ent(e).params.linux.policy);
        if k != s.class[e.idx()] {
            s.switch_class(lx, e, k);
            return;
        }
        let cpu = s.task_cpu(e);
        lx.update_rq_clock(cpu.idx());
        if with_class!(s, e, |c| c.prio_changed(lx, e)) {
            s.check_preempt_curr(lx, cpu, e, WakeFlags::default());
        }
    }

    /// Linux v5.10: sched_cpu_deactivate (the CPU is no longer active: no wake-up or balancer
    /// places a task there) and `set_rq_offline` (every class's `rq_offline`). The tasks queued
    /// there move at the `schedule` of the CPU that the engine runs right after
    /// (`sched_cpu_dying` → `migrate_tasks`), with the current one put back first.
    fn cpu_offline(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        let (s, mut lx) = self.split(ctx);
        let lx = &mut lx;
        lx.update_rq_clock(cpu.idx());
        s.dl.rq_hotplug(lx, cpu);
        s.rt.rq_hotplug(lx, cpu);
        s.fair.rq_hotplug(lx, cpu);
        if lx.cpu(cpu).curr.is_none() {
            s.migrate_tasks(lx, cpu);
        }
    }

    /// Linux v5.10: sched_cpu_activate (`set_rq_online`: every class's `rq_online`). Tasks
    /// come to the CPU through wake-ups and balancing.
    fn cpu_online(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        let (s, mut lx) = self.split(ctx);
        let lx = &mut lx;
        lx.update_rq_clock(cpu.idx());
        s.dl.rq_hotplug(lx, cpu);
        s.rt.rq_hotplug(lx, cpu);
        s.fair.rq_hotplug(lx, cpu);
    }

    fn probe(&self, e: EntityId) -> Option<i64> {
        let s = &self.cls;
        match s.class.get(e.idx())? {
            ClassId::Stop => s.stop.probe(e),
            ClassId::Deadline => s.dl.probe(e),
            ClassId::Rt => s.rt.probe(e),
            ClassId::Fair => s.fair.probe(e),
            ClassId::Idle => s.idle.probe(e),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The core's skeletons with CFS as the fair class and, to show the chain, a minimal FIFO
    //! class (one list per CPU, no priorities) in the RT slot.
    use super::*;
    use crate::guest::cfs::{Cfs, CfsParams};
    use vmsched_core::sched::{CpuTopo, WakeCause};
    use vmsched_core::testkit::{flat, params, Harness};
    use vmsched_core::time::ms;

    /// SCHED_FIFO without priorities: a FIFO per CPU, the task stays on its initial CPU.
    #[derive(Default)]
    struct Fifo {
        cpu: Vec<CpuId>,
        queue: Vec<Vec<EntityId>>,
    }

    impl SchedClass for Fifo {
        fn accepts(&self, policy: Policy) -> bool {
            policy == Policy::Fifo
        }
        fn init_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, _owned: bool) {
            self.cpu.push(ctx.ent(e).params.initial_cpu);
            self.queue.resize(ctx.nr_cpus(), Vec::new());
        }
        fn task_cpu(&self, e: EntityId) -> CpuId {
            self.cpu[e.idx()]
        }
        fn select_task_rq(&mut self, _: &mut LinuxCtx, e: EntityId, _: WakeInfo) -> CpuId {
            self.cpu[e.idx()]
        }
        fn select_task_rq_fork(&mut self, _: &mut LinuxCtx, e: EntityId, _: CpuId) -> CpuId {
            self.cpu[e.idx()]
        }
        fn migrate_task_rq(&mut self, _: &mut LinuxCtx, _: EntityId, _: CpuId) {}
        fn task_fork(&mut self, _: &mut LinuxCtx, _: EntityId, _: CpuId) {}
        fn enqueue_task(&mut self, _: &mut LinuxCtx, cpu: CpuId, e: EntityId, _: EnqueueFlags) {
            self.queue[cpu.idx()].push(e);
        }
        fn dequeue_task(&mut self, _: &mut LinuxCtx, cpu: CpuId, e: EntityId, _: DequeueFlags) {
            self.queue[cpu.idx()].retain(|&x| x != e);
        }
        fn yield_task(&mut self, _: &mut LinuxCtx, _: CpuId, _: EntityId) {}
        fn wakeup_preempt(
            &mut self,
            _: &mut LinuxCtx,
            _: CpuId,
            _: EntityId,
            _: EntityId,
            _: WakeFlags,
        ) {
        }
        fn pick_next_task(&mut self, _: &mut LinuxCtx, cpu: CpuId) -> Option<EntityId> {
            self.queue[cpu.idx()].first().copied()
        }
        fn put_prev_task(&mut self, _: &mut LinuxCtx, _: CpuId, _: EntityId) {}
        fn set_next_task(&mut self, _: &mut LinuxCtx, _: CpuId, _: EntityId) {}
        fn task_tick(&mut self, _: &mut LinuxCtx, _: CpuId, _: EntityId) {}
    }

    type WithFifo = LinuxCore<Cfs, Fifo>;

    fn with_fifo(ncpus: usize, ents: Vec<vmsched_core::EntityParams>) -> Harness<WithFifo> {
        let topo = flat(ncpus);
        let cfs = Cfs::new(CfsParams::default(), &topo);
        let core = LinuxCore::with_classes(
            "cfs+fifo",
            ncpus,
            4_000_000,
            cfs,
            Fifo::default(),
            EmptyClass,
        );
        Harness::new(core, ncpus, ents)
    }

    /// §3.1: a task of a higher class preempts a fair task at once and runs before it; the
    /// fair task gets the CPU back when the FIFO task blocks.
    #[test]
    fn a_higher_class_preempts_the_fair_class() {
        let mut rt = params(1, 1);
        rt.linux.policy = Policy::Fifo;
        let mut h = with_fifo(1, vec![params(0, 1), rt]);
        assert_eq!(h.sched.class_of(EntityId(0)), ClassId::Fair);
        assert_eq!(h.sched.class_of(EntityId(1)), ClassId::Rt);
        h.wake(0, WakeInfo::of(WakeCause::Fork));
        h.pump();
        assert_eq!(h.curr(0), Some(0));
        h.run_for(ms(10), ms(1));
        h.wake(1, WakeInfo::default());
        assert_eq!(
            h.take_resched(),
            vec![0],
            "the FIFO wakee reschedules the fair CPU"
        );
        h.schedule(0);
        assert_eq!(h.curr(0), Some(1));
        h.run_for(ms(50), ms(1));
        assert_eq!(
            h.curr(0),
            Some(1),
            "the fair task's tick never preempts FIFO"
        );
        h.block(1);
        assert_eq!(h.curr(0), Some(0));
    }

    /// In a core without an RT class, CFS takes SCHED_FIFO tasks; with one (`Cfs::sched`),
    /// the RT class takes them first.
    #[test]
    fn fifo_tasks_go_to_the_first_accepting_class() {
        let mut rt = params(0, 1);
        rt.linux.policy = Policy::Fifo;
        rt.linux.rt_priority = 1;
        let topo = [CpuTopo::default()];
        let bare = LinuxCore::new("cfs", 1, 4_000_000, Cfs::new(CfsParams::default(), &topo));
        let h = Harness::new(bare, 1, vec![rt.clone()]);
        assert_eq!(h.sched.class_of(EntityId(0)), ClassId::Fair);
        let h = Harness::new(Cfs::sched(CfsParams::default(), &topo), 1, vec![rt]);
        assert_eq!(h.sched.class_of(EntityId(0)), ClassId::Rt);
    }

    /// need_resched: a CPU is asked to reschedule once until it runs `__schedule`.
    #[test]
    fn resched_requests_are_deduplicated_until_schedule() {
        let mut h = Harness::new(
            Cfs::sched(CfsParams::default(), &[CpuTopo::default()]),
            1,
            (0..3).map(|i| params(i, 1)).collect(),
        );
        h.wake(0, WakeInfo::of(WakeCause::Fork));
        h.pump();
        h.advance(ms(20));
        h.wake(1, WakeInfo::default());
        h.wake(2, WakeInfo::default());
        assert_eq!(h.requests.len(), 1, "one request for two preempting wakees");
        assert!(h.sched.rq[0].need_resched);
        h.deliver_resched();
        assert!(!h.sched.rq[0].need_resched);
    }
}
