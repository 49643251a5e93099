//! Cpupool operations from the `[[event]]` timeline (`TimelineAction::Cpupool`), as the engine
//! delivers them to a host level built with pools (`crate::cpupool::PoolSched`;
//! docs/cpupools.md). After Xen 4.20 `xen/common/sched/cpupool.c` and `core.c`.
//!
//! * **`cpupool-cpu-remove`** (`cpupool_unassign_cpu` → `cpu_disable_scheduler`,
//!   `schedule_cpu_rm`): the engine's CPU offline (sim/hotplug.rs), whose affinity breaking
//!   looks only at the pCPU's pool (a vCPU of that pool left with no CPU of it in its hard
//!   affinity gets every CPU, "Breaking affinity"); the pool's scheduler moves the vCPUs
//!   away and the pCPU is free (in no pool, idle) afterwards.
//! * **`cpupool-cpu-add`** (`cpupool_assign_cpu_locked` → `schedule_cpu_add`): the free pCPU
//!   is given to the pool, then the engine's CPU online.
//! * **`cpupool-migrate`** (`cpupool_move_domain` → `sched_move_domain`): the domain is
//!   paused (`domain_pause`: each vCPU leaves its CPU), its vCPUs get their new attributes
//!   (the new scheduler's defaults unless the event gives them: `sched_alloc_udata`), every
//!   CPU as hard and soft affinity (`sched_set_affinity(cpumask_all)`) and a first CPU
//!   cycling over the new pool's pCPUs from its first (`sched_set_res`), leave the old
//!   scheduler and join the new one (`remove_unit`, `insert_unit`), and the domain is
//!   unpaused (`domain_unpause` → `vcpu_wake`). A vCPU its guest took down stays down.
//! * **`sched_host` with a pool** (`xl sched-credit2 -s -p POOL`): that pool's scheduler.
//! * **`cpupool-create`** / **`cpupool-destroy`** (`cpupool_create`, `cpupool_destroy`): the
//!   pool's scheduler was built at boot, told that no pCPU is its own and given no vCPU, so
//!   an empty pool's scheduler is never reached: creating it is the instant from which the
//!   scenario may give it pCPUs and domains, destroying it the instant after which it may
//!   not (validation checks both, scenario/cpupool.rs). The engine logs them and checks that
//!   a destroyed pool is empty.
//!
//! Cold code, reached only from a timeline slot.

use super::*;
use crate::cpuset::CpuSet;
use crate::sched::{GlobalParam, PoolOp, XenAttr};

/// One cpupool timeline action, resolved to ids (pools numbered Pool-0 = 0, then the
/// `[[cpupool]]` tables in order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolAction {
    /// `xl cpupool-cpu-remove POOL CPU`.
    CpuRemove { cpu: CpuId },
    /// `xl cpupool-cpu-add POOL CPU`.
    CpuAdd { cpu: CpuId, pool: u32 },
    /// `xl cpupool-migrate DOMAIN POOL`: domain `group` moves to `pool`, its vCPUs taking
    /// `xen` (the new scheduler's defaults, or the event's values).
    Migrate { group: u32, pool: u32, xen: XenAttr },
    /// `xl sched-credit2 -s -p POOL ...`.
    Global { pool: u32, param: GlobalParam },
    /// `xl cpupool-create`: `pool` (empty, its scheduler built at boot) exists from now on.
    Create { pool: u32 },
    /// `xl cpupool-destroy POOL`: `pool`, with no pCPU and no domain, is gone.
    Destroy { pool: u32 },
}

impl Simulation {
    /// A cpupool action on host level `l`.
    #[cold]
    #[inline(never)]
    pub(super) fn cpupool_event(&mut self, l: LevelId, a: PoolAction) {
        match a {
            PoolAction::CpuRemove { cpu } => self.cpu_offline(l, cpu),
            PoolAction::CpuAdd { cpu, pool } => {
                self.with_sched(l, |s, ctx| s.cpupool(ctx, PoolOp::AssignCpu { cpu, pool }));
                self.cpu_online(l, cpu);
            }
            PoolAction::Global { pool, param } => {
                self.with_sched(l, |s, ctx| s.cpupool(ctx, PoolOp::Global { pool, param }));
            }
            PoolAction::Migrate { group, pool, xen } => self.cpupool_migrate(l, group, pool, xen),
            PoolAction::Create { pool } => self.cpupool_life(l, pool, "created"),
            PoolAction::Destroy { pool } => self.cpupool_life(l, pool, "destroyed"),
        }
    }

    /// Xen `cpupool_create` / `cpupool_destroy` of `pool` (module doc): a log line; a
    /// destroyed pool holds no pCPU and no domain (Xen's `cpupool_destroy` refuses one that
    /// does with -EBUSY; validation refuses the event).
    fn cpupool_life(&mut self, l: LevelId, pool: u32, what: &str) {
        let map = self.levels[l.idx()]
            .sched
            .pool_map()
            .expect("invariant: a cpupool event on a level with pools");
        assert!(
            map.cpus(pool).is_empty() && !map.dom_pool.contains(&pool),
            "invariant: cpupool {pool} is {what} with pCPUs or domains (validation checks it)"
        );
        self.log.push(format!(
            "t={} ns {}: cpupool {pool} ({}) {what}",
            self.now,
            self.levels[l.idx()].name,
            map_name(self, l, pool)
        ));
    }

    /// The pool of pCPU `lc` of level `l` and that pool's online pCPUs, if the level has pools.
    pub(super) fn pool_online(&self, l: LevelId, lc: CpuId) -> Option<(u32, CpuSet)> {
        let lv = &self.levels[l.idx()];
        let map = lv.sched.pool_map()?;
        let p = map.cpu_pool[lc.idx()];
        let mut cpus = map.cpus(p);
        for c in 0..lv.cpu_info.len() {
            if !lv.cpu_info[c].online {
                cpus.remove(CpuId(c as u32));
            }
        }
        Some((p, cpus))
    }

    /// Whether entity `k` of level `l` (a vCPU: its group is its domain) is in pool `p`.
    pub(super) fn in_pool(&self, l: LevelId, k: usize, p: u32) -> bool {
        let lv = &self.levels[l.idx()];
        lv.sched
            .pool_map()
            .is_none_or(|m| m.dom_pool.get(lv.ent_info[k].params.group as usize) == Some(&p))
    }

    /// Xen `sched_move_domain` of domain `group` of level `l` into `pool` (module doc).
    fn cpupool_migrate(&mut self, l: LevelId, group: u32, pool: u32, xen: XenAttr) {
        let n = self.levels[l.idx()].ent_info.len();
        let members: Vec<usize> = (0..n)
            .filter(|&k| self.levels[l.idx()].ent_info[k].params.group == group)
            .collect();
        // domain_pause: each vCPU stops in its old pool (a queued one is offline at once, a
        // running one when its CPU switches it out, at once: outside any CPU's code).
        for &k in &members {
            self.with_sched(l, |s, ctx| s.set_paused(ctx, EntityId(k as u32), true));
            let g = self.levels[l.idx()].ent_g[k];
            if self.ents[g.idx()].paused && self.ents[g.idx()].state == RunState::Runnable {
                self.set_runstate(g, RunState::Offline);
            }
        }
        self.run_actions();
        let map = self.levels[l.idx()]
            .sched
            .pool_map()
            .expect("invariant: a cpupool event on a level with pools");
        let cpus = map.cpus(pool);
        let all = CpuSet::first_n(self.levels[l.idx()].cpu_info.len());
        let mut at = cpus.first().expect("invariant: the new pool has a pCPU");
        for &k in &members {
            let lv = &mut self.levels[l.idx()];
            assert!(
                lv.ent_info[k].on_cpu.is_none(),
                "invariant: {} kept {} on its CPU through cpupool-migrate",
                lv.sched.name(),
                lv.ent_info[k].params.name
            );
            let p = &mut lv.ent_info[k].params;
            p.xen = xen;
            p.hard_affinity = all;
            p.soft_affinity = all;
            p.initial_cpu = at;
            at = cpus.cycle(at).unwrap_or(at);
        }
        self.with_sched(l, |s, ctx| {
            s.cpupool(ctx, PoolOp::MoveDomain { group, pool })
        });
        self.log.push(format!(
            "t={} ns {}: domain {group} moves to cpupool {pool} ({})",
            self.now,
            self.levels[l.idx()].name,
            map_name(self, l, pool)
        ));
        for &k in &members {
            let e = EntityId(k as u32);
            let g = self.levels[l.idx()].ent_g[k];
            // A vCPU its guest took down (VCPUOP_down) stays down in the new pool.
            if self.vcpu_is_down(g) {
                self.with_sched(l, |s, ctx| s.set_down(ctx, e, true));
            }
        }
        // domain_unpause.
        for &k in &members {
            self.with_sched(l, |s, ctx| s.set_paused(ctx, EntityId(k as u32), false));
        }
        self.run_actions();
    }

    /// The cpupool entity `g` is in at the end of the run: a vCPU's domain's pool, a task's
    /// (its guest's vCPUs'); None without pools.
    pub(crate) fn pool_name_of(&self, g: GEnt) -> Option<&str> {
        let mut g = g;
        loop {
            let e = &self.ents[g.idx()];
            let lv = &self.levels[e.level.idx()];
            if let Some(m) = lv.sched.pool_map() {
                let group = lv.ent_info[e.local.idx()].params.group as usize;
                return m.dom_pool.get(group).map(|&p| m.names[p as usize].as_str());
            }
            // A task: the pool of the vCPU behind its level's first CPU.
            g = self.cpus[lv.cpu_g.first()?.idx()].backing?;
        }
    }

    /// Whether host entity `g` is a vCPU whose guest CPU is offline (taken down).
    fn vcpu_is_down(&self, g: GEnt) -> bool {
        match self.ents[g.idx()].kind {
            EntKind::Vcpu(vc) => {
                let c = &self.cpus[vc.idx()];
                !self.levels[c.level.idx()].cpu_info[c.local.idx()].online
            }
            EntKind::Task(_) => false,
        }
    }
}

fn map_name(sim: &Simulation, l: LevelId, pool: u32) -> String {
    sim.levels[l.idx()]
        .sched
        .pool_map()
        .and_then(|m| m.names.get(pool as usize).cloned())
        .unwrap_or_default()
}
