//! CPU hot-plug from the `[[event]]` timeline (`TimelineAction::CpuHotplug`): a pCPU of the
//! host (`xen-hptool cpu-offline N` / `cpu-online N`) or a vCPU of a guest (`echo 0 >
//! /sys/devices/system/cpu/cpuN/online`), as the engine delivers them.
//!
//! **Offline** (Xen 4.20 `cpupool_unassign_cpu` → `cpu_disable_scheduler`, `schedule_cpu_rm`;
//! Linux v5.10 `sched_cpu_deactivate`, `sched_cpu_dying`, `migrate_tasks`). The engine marks
//! the CPU offline, widens to every CPU of the level the hard affinity of each entity left with
//! no online CPU (Xen "Breaking affinity for %pv" → `sched_set_affinity(cpumask_all)`; Linux
//! `select_fallback_rq` → `cpuset_cpus_allowed_fallback`, the possible mask) and logs it, then
//! calls the level's `Scheduler::cpu_offline`, which moves everything queued there away and asks
//! the current entity to leave. The engine then reschedules the CPU if something is still
//! current on it (an offline CPU's `schedule` picks nothing), even when it is a vCPU the host is
//! not running: the offline completes at the event's instant, the stopper's own run time is not
//! modelled. Sleep timers armed on a guest CPU move to the lowest online CPU of the guest (Linux
//! `hrtimers_dead_cpu` moves them to the CPU doing the offline), its tick stops, and its vCPU
//! goes down at the host (`VCPUOP_down`: `Scheduler::set_down`), `offline` until it comes up.
//! Before all that, a guest CPU's event channels move (`Simulation::evtchn_cpu_offline` in
//! `sim/io.rs`, Linux `irq_migrate_all_off_this_cpu` → `xen_rebind_evtchn_to_cpu`): the
//! handler in progress there completes, every port bound there is rebound to an online vCPU
//! and its pending event follows it. They stay there when the CPU comes back online.
//!
//! **Online** (`cpupool_cpu_add` → `schedule_cpu_add`; `sched_cpu_activate`). The engine marks
//! the CPU online and calls `Scheduler::cpu_online`; for a guest CPU it then brings the vCPU up
//! (`VCPUOP_up`, then a wake-up: the vCPU runs, finds its CPU idle and halts) and restarts a
//! periodic tick. Affinities widened at an offline stay wide, as upstream.
//!
//! Cold code, reached only from a timeline slot.

use super::*;
use crate::cpuset::CpuSet;

impl Simulation {
    /// What the run logged, in order (affinities broken by a CPU going offline).
    pub fn log(&self) -> &[String] {
        &self.log
    }

    /// CPU `lc` of level `l` goes offline.
    #[cold]
    #[inline(never)]
    pub(super) fn cpu_offline(&mut self, l: LevelId, lc: CpuId) {
        let g = self.levels[l.idx()].cpu_g[lc.idx()];
        assert!(
            self.levels[l.idx()].cpu_info[lc.idx()].online,
            "invariant: offline of CPU {} of {}, which is offline (validation checks the order)",
            lc.0,
            self.levels[l.idx()].name
        );
        self.levels[l.idx()].cpu_info[lc.idx()].online = false;
        // Its event channels move first: the handler in progress there completes, then the
        // interrupted task is the scheduler's to move like any other.
        self.evtchn_cpu_offline(l, lc);
        self.run_actions();
        self.break_affinities(l, lc);
        self.with_sched(l, |s, ctx| s.cpu_offline(ctx, lc));
        // The reschedules it asked for (raised outside any CPU: at once).
        self.run_actions();
        if self.levels[l.idx()].cpu_info[lc.idx()].curr.is_some() {
            self.do_schedule(g);
            self.run_actions();
        }
        let lv = &self.levels[l.idx()];
        if let Some(e) = lv.cpu_info[lc.idx()].curr {
            panic!(
                "invariant: {} kept {} on offline CPU {}",
                lv.sched.name(),
                lv.ent_info[e.idx()].params.name,
                lc.0
            );
        }
        let (sched_slot, tick_slot) = (self.cpus[g.idx()].sched_slot, self.cpus[g.idx()].tick_slot);
        self.q.cancel(sched_slot);
        self.q.cancel(tick_slot);
        self.cpus[g.idx()].pending.clear(PendingIrqs::TICK);
        self.cpus[g.idx()].need_resched = false;
        self.move_timers(l, g);
        if let Some(b) = self.cpus[g.idx()].backing {
            self.vcpu_down(b);
        }
    }

    /// CPU `lc` of level `l` comes back online.
    #[cold]
    #[inline(never)]
    pub(super) fn cpu_online(&mut self, l: LevelId, lc: CpuId) {
        let g = self.levels[l.idx()].cpu_g[lc.idx()];
        assert!(
            !self.levels[l.idx()].cpu_info[lc.idx()].online,
            "invariant: online of CPU {} of {}, which is online (validation checks the order)",
            lc.0,
            self.levels[l.idx()].name
        );
        self.levels[l.idx()].cpu_info[lc.idx()].online = true;
        self.cpus[g.idx()].pending.clear(PendingIrqs::RESCHED);
        self.with_sched(l, |s, ctx| s.cpu_online(ctx, lc));
        if let Some(b) = self.cpus[g.idx()].backing {
            self.vcpu_up(b);
        }
        self.start_periodic_tick(g);
    }

    /// Widens to every CPU of level `l` the hard affinity of each entity left with no online
    /// CPU by the offline of `lc`, and logs it for the entities that exist. A vCPU of a domain
    /// not created yet is left alone (its creation fits it, [`Self::fit_affinity_to_online`]);
    /// a task not started or forked yet, or gone, is widened without a word (upstream its
    /// placement at fork would fall back).
    /// With cpupools only the vCPUs of `lc`'s pool are looked at, against that pool's
    /// online pCPUs (Xen `cpu_disable_scheduler` walks the pool's domains).
    fn break_affinities(&mut self, l: LevelId, lc: CpuId) {
        let lv = &self.levels[l.idx()];
        let mut online = CpuSet::empty();
        for (c, ci) in lv.cpu_info.iter().enumerate() {
            if ci.online {
                online.insert(CpuId(c as u32));
            }
        }
        let pool = self.pool_online(l, lc);
        if let Some((_, cpus)) = pool {
            online = cpus;
        }
        let all = CpuSet::first_n(lv.cpu_info.len());
        for k in 0..lv.ent_info.len() {
            if pool.is_some_and(|(p, _)| !self.in_pool(l, k, p)) {
                continue;
            }
            let lv = &self.levels[l.idx()];
            let hard = &lv.ent_info[k].params.hard_affinity;
            if !hard.contains(lc) || hard.intersects(&online) {
                continue;
            }
            let exists = match self.ents[lv.ent_g[k].idx()].kind {
                EntKind::Vcpu(vc) => {
                    if !self.levels[self.cpus[vc.idx()].level.idx()].alive {
                        continue;
                    }
                    true
                }
                EntKind::Task(t) => {
                    lv.alive && !matches!(self.tasks[t].phase, Phase::New | Phase::Exited)
                }
            };
            let lv = &mut self.levels[l.idx()];
            let e = &mut lv.ent_info[k];
            e.params.hard_affinity = all;
            if exists {
                self.log.push(format!(
                    "t={} ns {}: CPU {} offline: breaking affinity of {} (now every CPU)",
                    self.now, lv.name, lc.0, e.params.name
                ));
            }
        }
    }

    /// At a domain's creation: the hard affinity of entity `k` of level `l`, if no CPU of it is
    /// online, widened to every CPU and logged, as [`Self::break_affinities`] does at an
    /// offline (Xen `sched_init_vcpu` gives a new vCPU every CPU; an affinity with no online
    /// CPU of the pool is refused by `vcpu_set_hard_affinity`, so it keeps that).
    pub(super) fn fit_affinity_to_online(&mut self, l: LevelId, k: usize) {
        let lv = &mut self.levels[l.idx()];
        let n = lv.cpu_info.len();
        let e = &mut lv.ent_info[k];
        let any = e
            .params
            .hard_affinity
            .iter()
            .any(|c| c.idx() < n && lv.cpu_info[c.idx()].online);
        if !any {
            e.params.hard_affinity = CpuSet::first_n(n);
            self.log.push(format!(
                "t={} ns {}: no CPU of the affinity of {} is online: it gets every CPU",
                self.now, lv.name, e.params.name
            ));
        }
    }

    /// Sleep timers armed or held on guest CPU `g` (going offline) move to the lowest online
    /// CPU of its level.
    fn move_timers(&mut self, l: LevelId, g: GCpu) {
        let lv = &self.levels[l.idx()];
        let Some(to) = lv.cpu_info.iter().position(|c| c.online) else {
            panic!("invariant: level {} has an online CPU", lv.name);
        };
        let to = lv.cpu_g[to];
        let armed = std::mem::take(&mut self.cpus[g.idx()].armed_timers);
        for &t in &armed {
            self.tasks[t].timer_cpu = to;
            self.cpus[to.idx()].armed_timers.push(t);
        }
        let held = self.cpus[g.idx()].pending.take_timers();
        for &t in &held {
            // Delivered on the new CPU (held again there if it is away).
            self.actions.push_back(Action::TaskTimer(t));
        }
        self.run_actions();
    }

    /// The vCPU `b` goes down at its level (`VCPUOP_down`): its scheduler stops running it and
    /// it is `offline` until it comes up.
    fn vcpu_down(&mut self, b: GEnt) {
        let (hl, he) = (self.ents[b.idx()].level, self.ents[b.idx()].local);
        self.with_sched(hl, |s, ctx| s.set_down(ctx, he, true));
        // The tickle that takes it off its pCPU, if it still runs there.
        self.run_actions();
        let lv = &self.levels[hl.idx()];
        assert!(
            lv.ent_info[he.idx()].on_cpu.is_none(),
            "invariant: {} kept down vCPU {} on its CPU",
            lv.sched.name(),
            lv.ent_info[he.idx()].params.name
        );
        if self.ents[b.idx()].state != RunState::Offline {
            self.set_runstate(b, RunState::Offline);
        }
    }

    /// The vCPU `b` comes up (`VCPUOP_up`): its scheduler may run it again, and it is woken so
    /// that its guest CPU starts (it finds nothing to run and halts, or pulls work).
    fn vcpu_up(&mut self, b: GEnt) {
        let (hl, he) = (self.ents[b.idx()].level, self.ents[b.idx()].local);
        self.with_sched(hl, |s, ctx| s.set_down(ctx, he, false));
        if !self.levels[hl.idx()].ent_info[he.idx()].runnable && !self.ents[b.idx()].in_xen {
            self.wake_entity(b, WakeInfo::of(WakeCause::Ipi));
        }
    }
}
