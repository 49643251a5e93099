//! The Xen scheduler core below every Xen policy, after `xen/common/sched/core.c` (Xen 4.20)
//! and xen-schedulers.md §1: the pause flags and the runnable predicate, the runstate rules
//! the engine applies on the core's requests (`offline` for a paused vCPU), `vcpu_wake`, the
//! migration protocol, idle handling and the host timer slop.
//!
//! # Policy and core
//!
//! A Xen policy (Credit2, Credit1, RTDS, null and ARINC653) implements [`XenOps`],
//! the hooks of Xen's `struct scheduler`. [`XenCore`] implements the engine's `Scheduler` by
//! doing what `core.c` does around them, and is generic over the policy, so the calls are static
//! (`Box<XenCore<Credit2>>` is the only indirection of the level).
//!
//! * **Pause flags** (§1.2). The core keeps each vCPU's pause flags that a policy or the core
//!   sets: `parked` (caps, set and cleared by the policy through [`XenCtx::park`] and
//!   [`XenCtx::unpark`], or for Credit1's `vcpu_unpause` [`XenCtx::unpark_wake`]) and `migrating` (set by a policy's balancer with
//!   [`XenCtx::set_migrating`], cleared by the core when the migration completes). The
//!   `blocked` flag is the engine's: an entity that does not want a CPU. A vCPU is runnable
//!   (`unit_runnable`) when it wants a CPU and no flag is set.
//! * **Runstates** (§1.3). The engine owns time and runstates; the core tells it when a vCPU
//!   is paused (`Request::Pause`). A paused vCPU switched out while it wants the CPU goes
//!   `offline`, not `runnable`; a wake-up that finds it paused makes it `offline`; lifting a
//!   pause through `vcpu_wake` makes an `offline` vCPU `runnable`, while unparking does not (it
//!   stays `offline` until it runs, as upstream, whose `unpark_parked_units` calls no
//!   `vcpu_wake`). A capped vCPU's parked time is therefore offline time (still steal time for
//!   the guest: Xen's runstate area counts runnable and offline).
//! * **Wake** (§1.5). `vcpu_wake`: the policy's `wake` is called only for a runnable vCPU.
//!   Xen calls no hook when a vCPU blocks; the next `do_schedule` sees it not runnable.
//! * **Migration** (§1.7). A balancer that moves a running vCPU sets `migrating` and tickles its
//!   CPU. When the vCPU has been switched out and its context saved, the core completes the
//!   move (`sched_unit_migrate_finish`): `pick_resource`, the policy's `migrate`, clears the
//!   flag and wakes the vCPU on its new CPU through `vcpu_wake`. A pause flag does not stop a
//!   switch already decided: Credit2's balancer runs inside `do_schedule` and may mark the very
//!   vCPU being picked; as upstream, it runs until the tickle reschedules its CPU.
//! * **Idle** (§1.6). A CPU whose policy picks nothing runs the idle vCPU with no timer (4.20);
//!   the engine halts it until a tickle. There are no tasklets.
//! * **Timer slop** (§1.8). Xen 4.20 programs the timer hardware for
//!   `max(earliest expiry, now + timer_slop)`: every timer the core arms for the policy (the
//!   slice timer `s_timer` and the policy's own timers) fires no earlier than `timer_slop` after
//!   it was set. Coalescing of timers that are close together is not modelled: each timer is
//!   its own slot.
//! * **Timer entry latency** (§1.8). Between a host timer's expiry and the moment the handler
//!   reads `NOW()` the CPU takes the interrupt, runs the timer softirq and raises
//!   `SCHEDULE_SOFTIRQ`; the running vCPU's runstate (and so its credit) covers that time. The
//!   core models it as a fixed cost `timer_entry_ns` (default [`TIMER_ENTRY_DEFAULT_NS`], 1 µs):
//!   every timer it arms for the policy (`s_timer` and the policy's own) is entered that long
//!   after its expiry, and the vCPU that was running keeps running (and burning) meanwhile. It is
//!   what breaks credit ties between equal vCPUs upstream: a vCPU preempted by its slice timer
//!   has burned slightly more than its slice (ERRATA X3's 0.5 ms row needs it).
//!
//! # Hook contracts
//!
//! Every [`XenOps`] hook is called by the core with the scheduler lock of the vCPU's runqueue
//! "held" (nothing else runs meanwhile), reads the level through [`XenCtx`], and may request
//! reschedules (`tickle`), arm its own timers, and set or clear the pause flags it owns. Each
//! hook's doc says when it is called.

use std::ops::{Deref, DerefMut};

use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{GlobalParam, Pick, SchedCtx, Scheduler, WakeInfo};
use vmsched_core::time::{Nanos, SimTime};
use vmsched_core::trace::SchedEvent;

/// Xen's default `timer_slop` (ns).
pub const TIMER_SLOP_DEFAULT_NS: Nanos = 50_000;

/// Default timer entry latency (ns): interrupt entry, timer softirq and the schedule softirq up
/// to `NOW()` in `schedule()`, about 1 µs on a 1–2 GHz core (an assumption: upstream has no
/// such constant; it is what the hardware takes).
pub const TIMER_ENTRY_DEFAULT_NS: Nanos = 1_000;

/// `_VPF_parked` (Credit2 caps).
const VPF_PARKED: u8 = 1;
/// `_VPF_migrating`.
const VPF_MIGRATING: u8 = 2;
/// The domain is paused (Xen's `pause_count` of the domain, > 0): `xl pause`.
const VPF_DOMPAUSED: u8 = 4;
/// `_VPF_down`: the guest took the vCPU down (`VCPUOP_down`).
const VPF_DOWN: u8 = 8;
/// Not a Xen flag: the vCPU was removed (`remove_unit`); the core skips it from then on.
const GONE: u8 = 16;

/// What a policy hook sees: the engine's context of the level plus the core's pause flags.
pub struct XenCtx<'c, 'a> {
    sched: &'c mut SchedCtx<'a>,
    pause: &'c mut [u8],
    slop: Nanos,
    entry: Nanos,
}

impl<'a> Deref for XenCtx<'_, 'a> {
    type Target = SchedCtx<'a>;
    #[inline]
    fn deref(&self) -> &SchedCtx<'a> {
        self.sched
    }
}

impl DerefMut for XenCtx<'_, '_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.sched
    }
}

impl<'c, 'a> XenCtx<'c, 'a> {
    #[inline]
    pub fn new(
        sched: &'c mut SchedCtx<'a>,
        pause: &'c mut [u8],
        slop: Nanos,
        entry: Nanos,
    ) -> Self {
        XenCtx {
            sched,
            pause,
            slop,
            entry,
        }
    }

    /// Xen `unit_runnable`: the vCPU wants a CPU (not `blocked`) and no pause flag is set.
    #[inline]
    pub fn unit_runnable(&self, e: EntityId) -> bool {
        self.pause[e.idx()] == 0 && self.sched.ent(e).runnable
    }

    /// Whether `_VPF_parked` is set.
    #[inline]
    pub fn is_parked(&self, e: EntityId) -> bool {
        self.pause[e.idx()] & VPF_PARKED != 0
    }

    /// Whether `_VPF_down` is set: the guest took the vCPU down (Xen `!is_unit_online`).
    #[inline]
    pub fn is_down(&self, e: EntityId) -> bool {
        self.pause[e.idx()] & VPF_DOWN != 0
    }

    /// Whether `_VPF_migrating` is set.
    #[inline]
    pub fn is_migrating(&self, e: EntityId) -> bool {
        self.pause[e.idx()] & VPF_MIGRATING != 0
    }

    /// Sets `_VPF_parked` (Credit2: `park_unit`).
    #[inline]
    pub fn park(&mut self, e: EntityId) {
        self.set_flag(e, VPF_PARKED);
    }

    /// Clears `_VPF_parked` (Credit2: `unpark_parked_units`). No `vcpu_wake`: an offline vCPU
    /// stays offline until it runs.
    #[inline]
    pub fn unpark(&mut self, e: EntityId) {
        self.clear_flag(e, VPF_PARKED, false);
    }

    /// Clears `_VPF_parked` and lifts the pause through `vcpu_wake` (Credit1's `vcpu_unpause`
    /// of a parked vCPU): an `offline` vCPU that wants a CPU becomes `runnable` now. The core
    /// calls no hook here: the policy queues the vCPU itself (its wake path) if
    /// [`XenCtx::unit_runnable`] now holds.
    #[inline]
    pub fn unpark_wake(&mut self, e: EntityId) {
        self.clear_flag(e, VPF_PARKED, true);
    }

    /// Sets `_VPF_migrating`: the vCPU's CPU must switch it out, then the core completes the
    /// migration (`sched_unit_migrate_finish`).
    #[inline]
    pub fn set_migrating(&mut self, e: EntityId) {
        self.set_flag(e, VPF_MIGRATING);
    }

    #[inline]
    fn set_flag(&mut self, e: EntityId, f: u8) {
        if self.pause[e.idx()] == 0 {
            self.sched.pause(e);
        }
        self.pause[e.idx()] |= f;
    }

    #[inline]
    fn clear_flag(&mut self, e: EntityId, f: u8, wake: bool) {
        let was = self.pause[e.idx()];
        self.pause[e.idx()] &= !f;
        if was != 0 && self.pause[e.idx()] == 0 {
            self.sched.unpause(e, wake);
        }
    }

    /// Arms the policy's timer `key` at `at` (no earlier than the timer slop from now), or
    /// cancels it. The hook runs the timer entry latency after that expiry.
    #[inline]
    pub fn set_timer(&mut self, key: u32, at: Option<SimTime>) {
        let earliest = self.sched.now() + self.slop;
        let entry = self.entry;
        self.sched
            .set_timer(key, at.map(|t| t.max(earliest) + entry));
    }
}

/// A Xen scheduling policy (Xen `struct scheduler`). CPUs and vCPUs are the level's local ids.
pub trait XenOps: Send {
    /// Short name, e.g. `credit2`.
    fn name(&self) -> &'static str;

    /// The name of the trace layout it writes ([`Scheduler::trace_class`]): its name, or a
    /// release whose records differ (`credit2-4.2.1`).
    fn trace_class(&self) -> &'static str {
        self.name()
    }

    /// Number of the policy's own timers (keys `0..n`), asked once at build.
    fn nr_timers(&self) -> u32 {
        0
    }

    /// Xen `insert_unit` (with `alloc_udata`): a new vCPU, blocked, joins the policy. Called
    /// once per vCPU at build, in id order; with cpupools (docs/cpupools.md) only for the
    /// pool's vCPUs (ids may skip) and again for a vCPU migrated back in after its
    /// `remove_unit`: keep per-vCPU state with [`put_unit`].
    fn insert_unit(&mut self, x: &mut XenCtx, e: EntityId);

    /// Xen `remove_unit`: the vCPU leaves (its domain is destroyed). Called by the core from
    /// the engine's [`Scheduler::remove`] (a domain's `destroy_at_ms`), after the domain was
    /// paused (`sleep`) and the vCPU left its CPU: it is on no CPU, not queued, and never
    /// runnable again (the core keeps it paused). Drop it from runqueues and domain counts.
    fn remove_unit(&mut self, _x: &mut XenCtx, _e: EntityId) {}

    /// Xen `wake`, from `vcpu_wake`: `e` is runnable (no pause flag) and may still be running
    /// or being switched out. Queue it and tickle.
    fn wake(&mut self, x: &mut XenCtx, e: EntityId, info: WakeInfo);

    /// Xen `sleep`, from `vcpu_sleep_nosync` (pause): `e` stopped being runnable for a reason
    /// other than blocking; dequeue it, or tickle its CPU if it runs. Called by the core when
    /// the engine pauses the vCPU's domain ([`Scheduler::set_paused`], a `pause` timeline
    /// event), after the core set the pause flag (so `unit_runnable(e)` is false).
    fn sleep(&mut self, _x: &mut XenCtx, _e: EntityId) {}

    /// Xen `yield`, from SCHEDOP_yield: `e` runs; `do_schedule` of its CPU follows at once.
    fn yield_(&mut self, x: &mut XenCtx, e: EntityId);

    /// Xen `do_schedule`: choose what `cpu` runs next and for how long (the `s_timer`);
    /// `None` is the idle vCPU, which gets no timer. The current vCPU is `x.cpu(cpu).curr`; it
    /// may have blocked or been paused. A vCPU other than the current one is switched in after
    /// this returns; the previous one's context is then saved (`context_saved`).
    fn do_schedule(&mut self, x: &mut XenCtx, cpu: CpuId) -> Pick;

    /// Xen `context_saved`: `e` has been switched out (its CPU's current vCPU is already the
    /// new pick). The core completes a pending migration right after.
    fn context_saved(&mut self, _x: &mut XenCtx, _e: EntityId) {}

    /// Xen `pick_resource` (`pick_cpu`): the CPU a migrating vCPU should move to.
    fn pick_resource(&mut self, x: &mut XenCtx, e: EntityId) -> CpuId;

    /// Xen `migrate`: move the (not running, not queued) vCPU `e` to `cpu`.
    fn migrate(&mut self, x: &mut XenCtx, e: EntityId, cpu: CpuId);

    /// Xen `adjust` (`xl sched-* -d`): the domain's parameters changed. Called by the core
    /// from the engine's [`Scheduler::adjust`] (a `sched_domain` timeline event), once per
    /// domain, after the engine wrote the new values into `params.xen` of every vCPU of the
    /// domain; the vCPUs may be running, queued, blocked or paused. May tickle, arm timers,
    /// park and unpark.
    fn adjust(&mut self, _x: &mut XenCtx, _domain: u32) {}

    /// Xen `adjust_global` (`xl sched-* -s`): a scheduler-wide parameter changed. Called by
    /// the core from [`Scheduler::adjust_global`] (a `sched_host` timeline event) only with
    /// parameters the policy's configuration accepted at validation. May tickle.
    fn adjust_global(&mut self, _x: &mut XenCtx, p: GlobalParam) {
        panic!("{}: no run-time parameter {p:?}", self.name())
    }

    /// A timer armed with [`XenCtx::set_timer`] fired.
    fn on_timer(&mut self, _x: &mut XenCtx, _key: u32) {}

    /// The engine's [`Scheduler::wake_batch_end`]: `waker` finished the batch of events during
    /// which it woke others (no Xen hook: seed 002's deferred tickle). Default: nothing.
    fn wake_batch_end(&mut self, _x: &mut XenCtx, _waker: EntityId) {}

    /// Period of a per-CPU tick (Credit1's accounting tick), or None.
    fn tick_period(&self) -> Option<Nanos> {
        None
    }

    /// The tick of a busy CPU.
    fn tick(&mut self, _x: &mut XenCtx, _cpu: CpuId) {}

    /// The policy's main per-vCPU figure (credit), for traces.
    fn probe(&self, _e: EntityId) -> Option<i64> {
        None
    }

    // --- CPU hot-plug (a policy that does not implement these refuses CPU offlining; its
    // configuration must then refuse `cpu_offline` at validation) ---

    /// Xen `sched_unit_master(unit)` (`unit->res`): the CPU `e` runs on, is queued for or last
    /// ran on (`processor(v)`). Read by the core when a CPU goes offline, to send away the
    /// vCPUs that are there.
    fn processor(&self, e: EntityId) -> CpuId {
        panic!("{}: no processor({})", self.name(), e.0)
    }

    /// Xen `schedule_cpu_rm` → `deinit_pdata` and `free_pdata`: the policy lets go of `cpu`,
    /// which left the pool (`x.cpu(cpu).online` is false). Called by the core from
    /// [`Scheduler::cpu_offline`] after it marked every vCPU whose `processor` is `cpu`
    /// migrating and called `sleep` on it (so none is queued for `cpu`), and before it moves
    /// them (`pick_resource`, `migrate`, `wake`, which must then choose online CPUs only). The
    /// vCPU running on `cpu`, if any, is still there: it is switched out right after (the
    /// core's `schedule` of an offline CPU picks idle) and its migration completes after its
    /// `context_saved`, as the core's protocol has it. The engine already widened the hard
    /// affinity of every vCPU left with no online CPU (`params.hard_affinity`): a policy that
    /// keeps affinities re-reads them. May tickle online CPUs.
    fn remove_cpu(&mut self, _x: &mut XenCtx, cpu: CpuId) {
        panic!("{}: CPU {} offline is not supported", self.name(), cpu.0)
    }

    /// Xen `schedule_cpu_add` → `alloc_pdata`, `switch_sched` (`init_pdata`): `cpu` joined
    /// the pool again (`x.cpu(cpu).online` is true) and idles. Called by the core from
    /// [`Scheduler::cpu_online`]; the core then raises the CPU's reschedule, as upstream
    /// raises SCHEDULE_SOFTIRQ on it. May tickle.
    fn add_cpu(&mut self, _x: &mut XenCtx, cpu: CpuId) {
        panic!("{}: CPU {} online is not supported", self.name(), cpu.0)
    }
}

/// Puts the new state `u` of vCPU `e` into a policy's per-vCPU vector at `e`'s id: pushed
/// when `e` is the next id (always, without cpupools); with cpupools (docs/cpupools.md) a
/// pool's policy gets only its pool's vCPUs, so the ids before `e` that were never its own
/// are filled with `hole(&u)` (state no hook of this policy ever reads: the core routes
/// nothing of those vCPUs here), and a vCPU that left the pool and comes back
/// (`cpupool-migrate`) overwrites its old state (Xen: a fresh `alloc_udata`).
pub fn put_unit<U>(units: &mut Vec<U>, e: EntityId, u: U, hole: impl Fn(&U) -> U) {
    if e.idx() < units.len() {
        units[e.idx()] = u;
        return;
    }
    while units.len() < e.idx() {
        let h = hole(&u);
        units.push(h);
    }
    units.push(u);
}

/// The Xen core of one cpupool (every CPU of the level) around policy `P`.
pub struct XenCore<P: XenOps> {
    pub ops: P,
    /// Pause flags per vCPU (`VPF_*`).
    pause: Vec<u8>,
    /// `timer_slop` (ns).
    slop: Nanos,
    /// Timer entry latency (ns).
    entry: Nanos,
}

impl<P: XenOps> XenCore<P> {
    /// The core around `ops`, with Xen's default timer slop (50 µs) and the default timer
    /// entry latency (1 µs).
    pub fn new(ops: P) -> Self {
        XenCore::with_timers(ops, TIMER_SLOP_DEFAULT_NS, TIMER_ENTRY_DEFAULT_NS)
    }

    /// The core around `ops` with `timer_slop` = `slop_ns` and a timer entry latency of
    /// `entry_ns`.
    pub fn with_timers(ops: P, slop_ns: Nanos, entry_ns: Nanos) -> Self {
        XenCore {
            ops,
            pause: Vec::new(),
            slop: slop_ns,
            entry: entry_ns,
        }
    }

    /// The configured timer slop.
    pub fn timer_slop(&self) -> Nanos {
        self.slop
    }

    /// The configured timer entry latency.
    pub fn timer_entry(&self) -> Nanos {
        self.entry
    }

    /// Whether `_VPF_parked` is set on `e`.
    pub fn is_parked(&self, e: EntityId) -> bool {
        self.pause[e.idx()] & VPF_PARKED != 0
    }

    /// Runs `f` on the policy with a context of the level (what the core does around every
    /// hook; public for tests and for callers of hooks the engine does not drive yet).
    #[inline]
    pub fn with_ops<R>(
        &mut self,
        ctx: &mut SchedCtx,
        f: impl FnOnce(&mut P, &mut XenCtx) -> R,
    ) -> R {
        let mut x = XenCtx::new(ctx, &mut self.pause, self.slop, self.entry);
        f(&mut self.ops, &mut x)
    }

    /// Xen: vcpu_wake (the hook is called only for a runnable vCPU).
    /// Xen: vcpu_wake from the core itself (an unpause, `VCPUOP_up`, the end of a
    /// migration), which the engine's wake-up records do not show: traced here (`WAKE`).
    /// The pause flag `flag` is cleared first (its runstate change follows the record).
    fn core_wake(ops: &mut P, x: &mut XenCtx, e: EntityId, flag: u8) {
        x.trace(|| SchedEvent::CoreWake { ent: e });
        x.clear_flag(e, flag, true);
        Self::vcpu_wake(ops, x, e, WakeInfo::default());
    }

    #[inline]
    fn vcpu_wake(ops: &mut P, x: &mut XenCtx, e: EntityId, info: WakeInfo) {
        if x.unit_runnable(e) {
            ops.wake(x, e, info);
        }
    }
}

impl<P: XenOps> Scheduler for XenCore<P> {
    fn name(&self) -> &'static str {
        self.ops.name()
    }

    fn trace_class(&self) -> &'static str {
        self.ops.trace_class()
    }

    fn nr_timers(&self) -> u32 {
        self.ops.nr_timers()
    }

    fn tick_period(&self) -> Option<Nanos> {
        self.ops.tick_period()
    }

    /// Xen: sched_init_vcpu → insert_unit: at build, or when the vCPU's domain is created
    /// during the run (`create_at_ms`); in id order either way.
    /// With cpupools (docs/cpupools.md) a pool's core gets only its pool's vCPUs: the ids
    /// skipped are holes, kept `GONE`; a vCPU migrated back into a pool it left comes again.
    fn insert(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        if e.idx() < self.pause.len() {
            assert!(
                self.pause[e.idx()] & GONE != 0,
                "xen core: vCPU {} inserted twice",
                e.0
            );
            self.pause[e.idx()] = 0;
        } else {
            self.pause.resize(e.idx(), GONE);
            self.pause.push(0);
        }
        self.pause
            .reserve(ctx.nr_entities().saturating_sub(self.pause.len()));
        self.with_ops(ctx, |ops, x| ops.insert_unit(x, e));
    }

    /// Xen: vcpu_wake.
    fn wake(&mut self, ctx: &mut SchedCtx, e: EntityId, info: WakeInfo) {
        self.with_ops(ctx, |ops, x| Self::vcpu_wake(ops, x, e, info));
    }

    /// Xen calls no policy hook when a vCPU blocks (SCHEDOP_block, WFI/HLT): the `do_schedule`
    /// that follows sees it not runnable.
    fn block(&mut self, _ctx: &mut SchedCtx, _e: EntityId) {}

    /// Xen: SCHEDOP_yield → the policy's `yield` (`schedule` follows).
    fn yield_(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        self.with_ops(ctx, |ops, x| ops.yield_(x, e));
        ctx.trace(|| SchedEvent::Yield { ent: e });
    }

    /// Xen: schedule() → do_schedule; `s_timer` is armed no earlier than the timer slop, and
    /// the next `schedule()` runs the timer entry latency after it expires. A CPU that left
    /// the pool runs its idle vCPU (Xen's idle scheduler of a free CPU), without the policy.
    fn schedule(&mut self, ctx: &mut SchedCtx, cpu: CpuId) -> Pick {
        if !ctx.cpu(cpu).online {
            return Pick {
                next: None,
                slice: None,
            };
        }
        let (slop, entry) = (self.slop, self.entry);
        let mut pick = self.with_ops(ctx, |ops, x| ops.do_schedule(x, cpu));
        pick.slice = pick.slice.map(|s| s.max(slop) + entry);
        pick
    }

    /// Xen: sched_context_switched → context_saved, then sched_unit_migrate_finish for a
    /// vCPU with `migrating` set: pick_resource, migrate, clear the flag, vcpu_wake.
    fn context_saved(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        self.with_ops(ctx, |ops, x| {
            ops.context_saved(x, e);
            if x.is_migrating(e) {
                let cpu = ops.pick_resource(x, e);
                ops.migrate(x, e, cpu);
                Self::core_wake(ops, x, e, VPF_MIGRATING);
            }
        });
    }

    fn tick(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        self.with_ops(ctx, |ops, x| ops.tick(x, cpu));
    }

    fn on_timer(&mut self, ctx: &mut SchedCtx, key: u32) {
        self.with_ops(ctx, |ops, x| ops.on_timer(x, key));
    }

    fn wake_batch_end(&mut self, ctx: &mut SchedCtx, waker: EntityId) {
        self.with_ops(ctx, |ops, x| ops.wake_batch_end(x, waker));
    }

    fn probe(&self, e: EntityId) -> Option<i64> {
        self.ops.probe(e)
    }

    /// Xen: sched_destroy_vcpu → remove_unit (the vCPU stays paused for good).
    fn remove(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        self.with_ops(ctx, |ops, x| {
            debug_assert!(!x.unit_runnable(e), "remove_unit of a runnable vCPU");
            ops.remove_unit(x, e);
            x.set_flag(e, GONE);
        });
    }

    /// Xen: the domctl `putinfo` → the policy's `adjust`.
    fn adjust(&mut self, ctx: &mut SchedCtx, group: u32) {
        self.with_ops(ctx, |ops, x| ops.adjust(x, group));
    }

    /// Xen: the sysctl `putinfo` → the policy's `adjust_global`.
    fn adjust_global(&mut self, ctx: &mut SchedCtx, p: GlobalParam) {
        self.with_ops(ctx, |ops, x| ops.adjust_global(x, p));
    }

    /// Xen: cpupool_unassign_cpu → cpu_disable_scheduler, then schedule_cpu_rm. Every vCPU
    /// whose `processor` is `cpu` is sent away, in id order (`sched_unit_migrate_start`: the
    /// `migrating` flag and `vcpu_sleep_nosync`, so the policy's `sleep` dequeues it or
    /// tickles `cpu`); the policy lets go of the CPU (`remove_cpu`); then each of them that is
    /// not running on `cpu` completes its migration at once (`sched_unit_migrate_finish`:
    /// `pick_resource`, `migrate`, the flag cleared, `vcpu_wake`). The one running there
    /// completes it after the engine switched it out (`context_saved`). Upstream the whole
    /// removal runs in stop_machine with every pCPU idle; here the running vCPU's credit is
    /// burnt by the policy's `remove_cpu` and it leaves its CPU at the same instant.
    fn cpu_offline(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        let n = self.pause.len();
        self.with_ops(ctx, |ops, x| {
            let here = |ops: &P, x: &XenCtx, e: EntityId| {
                x.pause[e.idx()] & GONE == 0 && ops.processor(e) == cpu
            };
            for i in 0..n {
                let e = EntityId(i as u32);
                if here(ops, x, e) {
                    x.trace(|| SchedEvent::Sleep { ent: e });
                    x.set_flag(e, VPF_MIGRATING);
                    ops.sleep(x, e);
                }
            }
            ops.remove_cpu(x, cpu);
            for i in 0..n {
                let e = EntityId(i as u32);
                if here(ops, x, e) && x.is_migrating(e) && x.cpu(cpu).curr != Some(e) {
                    let to = ops.pick_resource(x, e);
                    ops.migrate(x, e, to);
                    Self::core_wake(ops, x, e, VPF_MIGRATING);
                }
            }
        });
    }

    /// Xen: cpupool_cpu_add → schedule_cpu_add (the policy's `add_cpu`), then
    /// SCHEDULE_SOFTIRQ on the CPU.
    fn cpu_online(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        self.with_ops(ctx, |ops, x| {
            ops.add_cpu(x, cpu);
            x.resched(cpu);
        });
    }

    /// Xen: VCPUOP_down (`_VPF_down`, then `vcpu_sleep_nosync` → the policy's `sleep`) and
    /// VCPUOP_up (the flag cleared, then `vcpu_wake`).
    fn set_down(&mut self, ctx: &mut SchedCtx, e: EntityId, down: bool) {
        self.with_ops(ctx, |ops, x| {
            if down {
                x.trace(|| SchedEvent::Sleep { ent: e });
                x.set_flag(e, VPF_DOWN);
                ops.sleep(x, e);
            } else {
                Self::core_wake(ops, x, e, VPF_DOWN);
            }
        });
    }

    /// Xen: `domain_pause` (per vCPU: the pause count goes up, then `vcpu_sleep_nosync` calls
    /// the policy's `sleep`) and `domain_unpause` (the count goes down, then `vcpu_wake`). The
    /// engine accounts a queued vCPU `offline` from the pause on, a running one from when it
    /// leaves its CPU, and makes it `runnable` again at the unpause unless another pause flag
    /// (a cap's `parked`) still holds it.
    fn set_paused(&mut self, ctx: &mut SchedCtx, e: EntityId, paused: bool) {
        self.with_ops(ctx, |ops, x| {
            if paused {
                x.trace(|| SchedEvent::Sleep { ent: e });
                x.set_flag(e, VPF_DOMPAUSED);
                ops.sleep(x, e);
            } else {
                Self::core_wake(ops, x, e, VPF_DOMPAUSED);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    //! The core's own rules, with Credit2 as the policy.
    use super::*;
    use crate::host::credit2::{Credit2, Credit2Params, Credit2Sched};
    use vmsched_core::cpuset::CpuSet;
    use vmsched_core::sched::{CpuTopo, Request};
    use vmsched_core::testkit::{params, Harness};
    use vmsched_core::time::ms;

    /// One pCPU; timers entered exactly unless `p` sets `timer_entry_ns` (see `one_cpu_entry`).
    /// The policy-timer requests the harness has applied, as (key, deadline).
    fn timer_requests(h: &Harness<Credit2Sched>) -> Vec<(u32, Option<SimTime>)> {
        h.requests
            .iter()
            .filter_map(|r| match r {
                Request::Timer(k, at) => Some((*k, *at)),
                _ => None,
            })
            .collect()
    }

    fn one_cpu(p: Credit2Params, caps: &[u32]) -> Harness<Credit2Sched> {
        one_cpu_entry(
            Credit2Params {
                timer_entry_ns: 0,
                ..p
            },
            caps,
        )
    }

    fn one_cpu_entry(p: Credit2Params, caps: &[u32]) -> Harness<Credit2Sched> {
        let ents = caps
            .iter()
            .enumerate()
            .map(|(i, &cap)| {
                let mut e = params(i, 1);
                e.xen.cap_pct = cap;
                e.hard_affinity = CpuSet::single(CpuId(0));
                e.initial_cpu = CpuId(0);
                e
            })
            .collect();
        let n = caps.len() as u32;
        Harness::new(Credit2::sched(p, &[CpuTopo::default()], n), 1, ents)
    }

    /// §1.8 (4.20): no timer fires earlier than `timer_slop` after it was set: the slice timer
    /// is floored at the slop.
    #[test]
    fn the_slice_timer_is_floored_at_the_timer_slop() {
        let mut h = one_cpu(Credit2Params::default(), &[0]);
        assert_eq!(h.sched.timer_slop(), TIMER_SLOP_DEFAULT_NS);
        h.wake(0, WakeInfo::default());
        // A lone vCPU gets the 10 ms maximum slice.
        assert_eq!(h.schedule(0).slice, Some(ms(10)));
        let p = Credit2Params {
            timer_slop_ns: ms(25),
            ..Default::default()
        };
        let mut h = one_cpu(p, &[0]);
        h.wake(0, WakeInfo::default());
        assert_eq!(h.schedule(0).slice, Some(ms(25)));
    }

    /// §1.8: the policy's own timers are floored too (a capped domain's replenishment).
    #[test]
    fn policy_timers_are_floored_at_the_timer_slop() {
        let p = Credit2Params {
            timer_slop_ns: ms(15),
            ..Default::default()
        };
        let h = one_cpu(p, &[50]);
        let timers = timer_requests(&h);
        assert_eq!(timers, vec![(0, Some(ms(15)))], "period 10 ms, slop 15 ms");
    }

    /// §1.8: every timer the core arms is entered `timer_entry_ns` after its expiry (floored
    /// at the slop first): the slice timer and the policy's timers.
    #[test]
    fn timers_are_entered_the_entry_latency_after_expiry() {
        let p = Credit2Params {
            timer_entry_ns: 3_000,
            ..Default::default()
        };
        let mut h = one_cpu_entry(p.clone(), &[0]);
        assert_eq!(h.sched.timer_entry(), 3_000);
        h.wake(0, WakeInfo::default());
        assert_eq!(h.schedule(0).slice, Some(ms(10) + 3_000));
        let h = one_cpu_entry(p, &[50]);
        let timers = timer_requests(&h);
        assert_eq!(timers, vec![(0, Some(ms(10) + 3_000))]);
        // The default is 1 µs.
        assert_eq!(
            Credit2Params::default().timer_entry_ns,
            TIMER_ENTRY_DEFAULT_NS
        );
        assert_eq!(TIMER_ENTRY_DEFAULT_NS, 1_000);
    }

    /// §1.2: a parked vCPU is paused (not runnable for the core, which tells the engine);
    /// the replenishment unparks it and lifts the pause, and it runs again.
    #[test]
    fn parking_pauses_the_vcpu_and_unparking_lifts_it() {
        // Cap 10 %: 1 ms of budget per 10 ms period.
        let mut h = one_cpu(Credit2Params::default(), &[10]);
        h.wake(0, WakeInfo::default());
        h.pump();
        assert_eq!(h.curr(0), Some(0));
        assert!(!h.paused[0]);
        h.advance(ms(1));
        h.schedule(0);
        h.pump();
        assert!(h.sched.is_parked(EntityId(0)), "out of budget: parked");
        assert!(h.paused[0], "the engine is told");
        assert_eq!(h.curr(0), None);
        h.advance(ms(9));
        h.fire_timer(0);
        h.pump();
        assert!(!h.sched.is_parked(EntityId(0)));
        assert!(!h.paused[0]);
        assert_eq!(h.curr(0), Some(0), "replenished: it runs again");
    }
}
