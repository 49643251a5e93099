//! Cpupools: several host schedulers in one machine, each over its own subset of the pCPUs
//! (Xen 4.1+ `xen/common/sched/cpupool.c`; Xen 4.20 is the model: docs/cpupools.md).
//!
//! A pool is one scheduler instance with its pCPUs; every domain is in exactly one pool; a
//! pCPU is in at most one (a *free* pCPU, in none, runs its idle vCPU: Xen's idle scheduler
//! of `cpupool_free_cpus`). Pool-0 is the boot scheduler (`[host]`) and holds the pCPUs no
//! `[[cpupool]]` names.
//!
//! [`PoolSched`] is what the engine holds for a host level with pools: it implements the
//! engine's [`Scheduler`] by routing each hook to the scheduler of the pool concerned, as
//! Xen's core reaches a CPU's or a unit's scheduler through `get_sched_res(cpu)->scheduler`
//! and `unit_scheduler(unit)`: a pCPU's `schedule` and `tick` by the pCPU's pool, an
//! entity's hooks by its domain's pool, a policy timer by the pool owning its key. The hot
//! path pays one index lookup and one more dynamic call; there is no name lookup. A machine
//! without pools never builds one (its level holds its scheduler directly, as before).
//!
//! Each pool's scheduler sees the whole level (every pCPU and every vCPU id, as the engine's
//! [`SchedCtx`] shows them) but is told at the start that the pCPUs outside the pool are
//! not its own (`cpu_offline` of each, before any vCPU is inserted: Xen's `schedule_cpu_rm`
//! without a unit to move), and is given only its pool's vCPUs (`insert`); a vCPU id that
//! never was its own is a hole its policy leaves alone. Its timers have keys
//! `base..base + nr_timers` at the level; [`PoolSched`] shifts them.
//!
//! The pool table ([`PoolMap`]) is also what the engine reads for the operations
//! (`sim/cpupool.rs`): which pool a pCPU or a domain is in.

use crate::cpuset::CpuSet;
use crate::ids::{CpuId, EntityId};
use crate::sched::{GlobalParam, Pick, PoolOp, SchedCtx, Scheduler, WakeInfo};
use crate::time::Nanos;

/// A pCPU in no pool.
pub const FREE: u32 = u32::MAX;

/// Which pool each pCPU and each domain is in (Xen `get_sched_res(cpu)->cpupool`,
/// `d->cpupool`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolMap {
    /// The pools' names, Pool-0 first.
    pub names: Vec<String>,
    /// The pool of each pCPU, [`FREE`] for none.
    pub cpu_pool: Vec<u32>,
    /// The pool of each domain (host group).
    pub dom_pool: Vec<u32>,
}

impl PoolMap {
    /// The pCPUs of pool `p`.
    pub fn cpus(&self, p: u32) -> CpuSet {
        let mut s = CpuSet::empty();
        for (c, &q) in self.cpu_pool.iter().enumerate() {
            if q == p {
                s.insert(CpuId(c as u32));
            }
        }
        s
    }
}

/// One pool's scheduler and where its timer keys start at the level.
struct Pool {
    sched: Box<dyn Scheduler>,
    base: u32,
}

/// The host scheduler of a machine with cpupools: one scheduler per pool, hooks routed by
/// the pool of the pCPU or the entity concerned (see the module doc).
pub struct PoolSched {
    pools: Vec<Pool>,
    map: PoolMap,
    /// The pool of each entity (its domain's), filled at `insert`.
    ent_pool: Vec<u32>,
    /// The pool owning each level timer key.
    key_pool: Vec<u32>,
    /// The pools have been told which pCPUs are not theirs.
    started: bool,
}

impl PoolSched {
    /// The pools' schedulers (Pool-0 first) and the initial map. Every scheduler was built
    /// for every pCPU of the level; none may have a periodic tick (no Xen policy has one).
    pub fn new(scheds: Vec<Box<dyn Scheduler>>, map: PoolMap) -> PoolSched {
        assert_eq!(
            scheds.len(),
            map.names.len(),
            "cpupool: one scheduler per pool"
        );
        let mut pools = Vec::with_capacity(scheds.len());
        let mut key_pool = Vec::new();
        for (p, sched) in scheds.into_iter().enumerate() {
            assert!(
                sched.tick_period().is_none(),
                "cpupool: {} has a periodic tick (not a Xen policy)",
                sched.name()
            );
            let base = key_pool.len() as u32;
            key_pool.extend(std::iter::repeat_n(p as u32, sched.nr_timers() as usize));
            pools.push(Pool { sched, base });
        }
        PoolSched {
            pools,
            map,
            ent_pool: Vec::new(),
            key_pool,
            started: false,
        }
    }

    /// The scheduler of pool `p`.
    pub fn pool_sched(&self, p: u32) -> &dyn Scheduler {
        self.pools[p as usize].sched.as_ref()
    }

    /// Runs `f` on pool `p`'s scheduler and shifts the timer keys it requested.
    #[inline]
    fn on<R>(
        &mut self,
        p: u32,
        ctx: &mut SchedCtx,
        f: impl FnOnce(&mut dyn Scheduler, &mut SchedCtx) -> R,
    ) -> R {
        let pool = &mut self.pools[p as usize];
        let m = ctx.mark();
        let r = f(pool.sched.as_mut(), ctx);
        if pool.base != 0 {
            ctx.offset_timers(m, pool.base);
        }
        if ctx.tracing() {
            ctx.tag_pool_traces(m, p);
        }
        r
    }

    #[inline]
    fn ent(&self, e: EntityId) -> u32 {
        self.ent_pool[e.idx()]
    }

    /// Xen `cpupool_create` + `cpupool_assign_cpu` at boot, before any domain: each pool's
    /// scheduler lets go of the pCPUs that are not its own (`schedule_cpu_rm`, nothing to
    /// move). The requests this makes (cancelled per-CPU timers) go to the engine.
    fn start(&mut self, ctx: &mut SchedCtx) {
        self.started = true;
        let n = ctx.nr_cpus();
        for p in 0..self.pools.len() as u32 {
            for c in 0..n {
                if self.map.cpu_pool[c] != p {
                    self.on(p, ctx, |s, ctx| s.cpu_offline(ctx, CpuId(c as u32)));
                }
            }
        }
    }
}

impl Scheduler for PoolSched {
    fn name(&self) -> &'static str {
        "cpupools"
    }

    fn nr_timers(&self) -> u32 {
        self.key_pool.len() as u32
    }

    fn tick_period(&self) -> Option<Nanos> {
        None
    }

    /// Xen `sched_init_vcpu` in the domain's pool.
    fn insert(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        if !self.started {
            self.start(ctx);
        }
        let p = self.map.dom_pool[ctx.ent(e).params.group as usize];
        if self.ent_pool.len() <= e.idx() {
            self.ent_pool.resize(e.idx() + 1, FREE);
        }
        self.ent_pool[e.idx()] = p;
        self.on(p, ctx, |s, ctx| s.insert(ctx, e));
    }

    #[inline]
    fn wake(&mut self, ctx: &mut SchedCtx, e: EntityId, info: WakeInfo) {
        let p = self.ent(e);
        self.on(p, ctx, |s, ctx| s.wake(ctx, e, info));
    }

    #[inline]
    fn block(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        let p = self.ent(e);
        self.on(p, ctx, |s, ctx| s.block(ctx, e));
    }

    #[inline]
    fn yield_(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        let p = self.ent(e);
        self.on(p, ctx, |s, ctx| s.yield_(ctx, e));
    }

    /// A free pCPU runs its idle vCPU (Xen's idle scheduler), with no timer.
    #[inline]
    fn schedule(&mut self, ctx: &mut SchedCtx, cpu: CpuId) -> Pick {
        let p = self.map.cpu_pool[cpu.idx()];
        if p == FREE {
            return Pick {
                next: None,
                slice: None,
            };
        }
        self.on(p, ctx, |s, ctx| s.schedule(ctx, cpu))
    }

    #[inline]
    fn context_saved(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        let p = self.ent(e);
        self.on(p, ctx, |s, ctx| s.context_saved(ctx, e));
    }

    #[inline]
    fn tick(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        let p = self.map.cpu_pool[cpu.idx()];
        if p != FREE {
            self.on(p, ctx, |s, ctx| s.tick(ctx, cpu));
        }
    }

    #[inline]
    fn on_timer(&mut self, ctx: &mut SchedCtx, key: u32) {
        let p = self.key_pool[key as usize];
        let local = key - self.pools[p as usize].base;
        self.on(p, ctx, |s, ctx| s.on_timer(ctx, local));
    }

    /// To the waker's pool (seed 002's deferred tickle is Credit1's, per pool).
    fn wake_batch_end(&mut self, ctx: &mut SchedCtx, waker: EntityId) {
        let p = self.ent(waker);
        self.on(p, ctx, |s, ctx| s.wake_batch_end(ctx, waker));
    }

    fn probe(&self, e: EntityId) -> Option<i64> {
        let p = *self.ent_pool.get(e.idx())?;
        self.pools.get(p as usize)?.sched.probe(e)
    }

    fn remove(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        let p = self.ent(e);
        self.on(p, ctx, |s, ctx| s.remove(ctx, e));
    }

    fn adjust(&mut self, ctx: &mut SchedCtx, group: u32) {
        let p = self.map.dom_pool[group as usize];
        self.on(p, ctx, |s, ctx| s.adjust(ctx, group));
    }

    /// `xl sched-* -s` without `-p`: Pool-0's scheduler.
    fn adjust_global(&mut self, ctx: &mut SchedCtx, param: GlobalParam) {
        self.on(0, ctx, |s, ctx| s.adjust_global(ctx, param));
    }

    fn prio_changed(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        let p = self.ent(e);
        self.on(p, ctx, |s, ctx| s.prio_changed(ctx, e));
    }

    fn set_paused(&mut self, ctx: &mut SchedCtx, e: EntityId, paused: bool) {
        let p = self.ent(e);
        self.on(p, ctx, |s, ctx| s.set_paused(ctx, e, paused));
    }

    /// `xl cpupool-cpu-remove` (Xen `cpupool_unassign_cpu`): the pCPU's pool lets it go
    /// (`cpu_disable_scheduler`, `schedule_cpu_rm`) and it is free from now on.
    fn cpu_offline(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        let p = self.map.cpu_pool[cpu.idx()];
        assert_ne!(p, FREE, "cpupool: pCPU {} is in no pool", cpu.0);
        self.on(p, ctx, |s, ctx| s.cpu_offline(ctx, cpu));
        self.map.cpu_pool[cpu.idx()] = FREE;
    }

    /// `xl cpupool-cpu-add` after [`PoolOp::AssignCpu`]: the pool's `schedule_cpu_add`.
    fn cpu_online(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        let p = self.map.cpu_pool[cpu.idx()];
        assert_ne!(p, FREE, "cpupool: pCPU {} was assigned no pool", cpu.0);
        self.on(p, ctx, |s, ctx| s.cpu_online(ctx, cpu));
    }

    fn set_down(&mut self, ctx: &mut SchedCtx, e: EntityId, down: bool) {
        let p = self.ent(e);
        self.on(p, ctx, |s, ctx| s.set_down(ctx, e, down));
    }

    fn pool_map(&self) -> Option<&PoolMap> {
        Some(&self.map)
    }

    fn pool_sched_name(&self, pool: u32) -> Option<&'static str> {
        Some(self.pools.get(pool as usize)?.sched.name())
    }

    fn pool_trace_class(&self, pool: u32) -> Option<&'static str> {
        Some(self.pools.get(pool as usize)?.sched.trace_class())
    }

    fn cpupool(&mut self, ctx: &mut SchedCtx, op: PoolOp) {
        match op {
            PoolOp::AssignCpu { cpu, pool } => {
                assert_eq!(
                    self.map.cpu_pool[cpu.idx()],
                    FREE,
                    "cpupool: pCPU {} is not free",
                    cpu.0
                );
                self.map.cpu_pool[cpu.idx()] = pool;
            }
            PoolOp::MoveDomain { group, pool } => {
                // Xen sched_move_domain: every unit leaves the old scheduler, then joins
                // the new one (here one after the other, in id order; nothing runs between).
                for i in 0..ctx.nr_entities().min(self.ent_pool.len()) {
                    let e = EntityId(i as u32);
                    if ctx.ent(e).params.group != group {
                        continue;
                    }
                    let old = self.ent_pool[i];
                    self.on(old, ctx, |s, ctx| s.remove(ctx, e));
                    self.ent_pool[i] = pool;
                    self.on(pool, ctx, |s, ctx| {
                        s.insert(ctx, e);
                        s.set_paused(ctx, e, true);
                    });
                }
                self.map.dom_pool[group as usize] = pool;
            }
            PoolOp::Global { pool, param } => {
                self.on(pool, ctx, |s, ctx| s.adjust_global(ctx, param));
            }
        }
    }
}
