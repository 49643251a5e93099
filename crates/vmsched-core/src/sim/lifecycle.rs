//! Lifecycle: tasks that fork and exit, and run-time changes from the scenario's `[[event]]`
//! timeline.
//!
//! **Fork and exit.** A `fork` step takes the workload's next preallocated task slot (built
//! with the workload, its entity inserted at build and `offline` until then: it does not
//! exist), sets its program counter and wakes it with `WakeCause::Fork`, its parent and the
//! parent's CPU (Linux `wake_up_new_task`); no slot left: the fork fails and the parent goes
//! on. `exit` blocks the task (its CPU reschedules), makes it `offline` for good and calls the
//! scheduler's `remove` hook; its statistics stay. Slots are never recycled.
//!
//! **Timeline.** Run-time changes as the engine delivers them: each
//! event has its own queue slot, armed at build; when it fires the engine writes the new
//! attributes into the entities' parameters and calls the level's documented hook
//! (`Scheduler::adjust`, `adjust_global`, `prio_changed`, `set_paused`, `cpu_offline`,
//! `cpu_online`; contracts in docs/design.md, Lifecycle). CPU hot-plug is in sim/hotplug.rs. Nothing here runs on the per-event hot path.

use super::*;
use crate::sched::GlobalParam;
use crate::trace::emit;

/// One timeline action, with its targets resolved to the level's ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimelineAction {
    /// `xl sched-credit -d` / `xl sched-credit2 -d` (weight, cap) or `xl sched-rtds -d -v all
    /// -p -b -e` (`rtds`: budget µs, period µs, extratime): the Xen attributes of every entity
    /// of `group` (a domain).
    DomainAttr {
        level: LevelId,
        group: u32,
        weight: Option<u32>,
        cap_pct: Option<u32>,
        rtds: Option<(u64, u64, bool)>,
    },
    /// `xl sched-credit -s` / `xl sched-credit2 -s`: a scheduler-wide parameter of `level`.
    Global { level: LevelId, param: GlobalParam },
    /// nice / `sched_setattr` of `task`, or of every entity of `group` (a workload).
    TaskAttr {
        level: LevelId,
        group: u32,
        task: Option<EntityId>,
        nice: Option<i32>,
        policy: Option<crate::sched::Policy>,
        rt_priority: Option<u32>,
    },
    /// `xl pause` (`paused`) / `xl unpause` of every entity of `group` (a domain).
    Pause {
        level: LevelId,
        group: u32,
        paused: bool,
    },
    /// `xl create`: the entities of `group` at `level` (a domain's vCPUs, offline and not
    /// inserted until now) are inserted (Xen `sched_init_vcpu` → `insert_unit`), then the
    /// domain boots: the tasks of its `guest` level start (at their start times from now).
    CreateDomain {
        level: LevelId,
        group: u32,
        guest: LevelId,
    },
    /// `xl destroy`: the entities of `group` are paused, leave their CPUs, become `offline`
    /// for good and are removed from their scheduler (Xen `domain_kill`, `sched_destroy_vcpu`
    /// → `remove_unit`). Their `guest` level stops where it is, its tasks `offline` from now
    /// on; every figure is kept.
    DestroyDomain {
        level: LevelId,
        group: u32,
        guest: LevelId,
    },
    /// CPU `cpu` of `level` goes offline (`online` false) or comes back: `xen-hptool
    /// cpu-offline/cpu-online` for a pCPU of the host, `/sys/devices/system/cpu/cpuN/online`
    /// for a vCPU of a guest, whose vCPU then goes down or up at the host (sim/hotplug.rs).
    CpuHotplug {
        level: LevelId,
        cpu: CpuId,
        online: bool,
    },
    /// A cpupool operation on the host `level` (`xl cpupool-cpu-add/-cpu-remove/-migrate`,
    /// `xl sched-* -s -p`): sim/cpupool.rs.
    Cpupool {
        level: LevelId,
        op: super::PoolAction,
    },
}

impl SimBuilder {
    /// Adds a timeline event at `at` (ns). Events at the same time run in the order added.
    pub fn add_event(&mut self, at: SimTime, action: TimelineAction) {
        let i = self.sim.timeline.len() as u32;
        self.sim.timeline.push(action);
        let s = self.slot(SlotKind::Timeline(i));
        self.sim.q.arm(s, at);
    }

    /// The local id of the entity of `level` in `group` named `name`, if there is one.
    pub fn entity_named(&self, level: LevelId, group: u32, name: &str) -> Option<EntityId> {
        self.sim.levels[level.idx()]
            .ent_info
            .iter()
            .position(|e| e.params.group == group && e.params.name == name)
            .map(|i| EntityId(i as u32))
    }
}

impl Simulation {
    /// Timeline event `i` fires.
    #[cold]
    #[inline(never)]
    pub(super) fn timeline_event(&mut self, i: u32) {
        match self.timeline[i as usize] {
            TimelineAction::DomainAttr {
                level,
                group,
                weight,
                cap_pct,
                rtds,
            } => {
                let lv = &mut self.levels[level.idx()];
                for e in lv.ent_info.iter_mut().filter(|e| e.params.group == group) {
                    if let Some(w) = weight {
                        e.params.xen.weight = w;
                    }
                    if let Some(c) = cap_pct {
                        e.params.xen.cap_pct = c;
                    }
                    if let Some((b, p, x)) = rtds {
                        e.params.xen.budget_us = b;
                        e.params.xen.period_us = p;
                        e.params.xen.extratime = x;
                    }
                }
                self.with_sched(level, |s, ctx| s.adjust(ctx, group));
            }
            TimelineAction::Global { level, param } => {
                self.with_sched(level, |s, ctx| s.adjust_global(ctx, param));
            }
            TimelineAction::TaskAttr {
                level,
                group,
                task,
                nice,
                policy,
                rt_priority,
            } => {
                let n = self.levels[level.idx()].ent_info.len();
                for k in 0..n {
                    let e = EntityId(k as u32);
                    let info = &mut self.levels[level.idx()].ent_info[k];
                    if info.params.group != group || task.is_some_and(|t| t != e) {
                        continue;
                    }
                    let a = &mut info.params.linux;
                    if let Some(v) = nice {
                        a.nice = v;
                    }
                    if let Some(v) = policy {
                        a.policy = v;
                    }
                    if let Some(v) = rt_priority {
                        a.rt_priority = v;
                    }
                    self.with_sched(level, |s, ctx| s.prio_changed(ctx, e));
                }
            }
            TimelineAction::CreateDomain {
                level,
                group,
                guest,
            } => self.create_domain(level, group, guest),
            TimelineAction::DestroyDomain {
                level,
                group,
                guest,
            } => self.destroy_domain(level, group, guest),
            TimelineAction::Cpupool { level, op } => self.cpupool_event(level, op),
            TimelineAction::CpuHotplug { level, cpu, online } => {
                if online {
                    self.cpu_online(level, cpu);
                } else {
                    self.cpu_offline(level, cpu);
                }
            }
            TimelineAction::Pause {
                level,
                group,
                paused,
            } => {
                let n = self.levels[level.idx()].ent_info.len();
                for k in 0..n {
                    let e = EntityId(k as u32);
                    if self.levels[level.idx()].ent_info[k].params.group != group {
                        continue;
                    }
                    self.with_sched(level, |s, ctx| s.set_paused(ctx, e, paused));
                    // Xen vcpu_sleep_nosync: a queued vCPU goes offline at once; a running one
                    // when its CPU switches it out.
                    let g = self.levels[level.idx()].ent_g[k];
                    if paused
                        && self.ents[g.idx()].paused
                        && self.ents[g.idx()].state == RunState::Runnable
                    {
                        self.set_runstate(g, RunState::Offline);
                    }
                }
            }
        }
    }

    fn create_domain(&mut self, level: LevelId, group: u32, guest: LevelId) {
        emit!(self.trace_domain(level, group, true));
        let n = self.levels[level.idx()].ent_info.len();
        for k in 0..n {
            if self.levels[level.idx()].ent_info[k].params.group != group {
                continue;
            }
            let g = self.levels[level.idx()].ent_g[k];
            self.set_runstate(g, RunState::Blocked);
            // A vCPU whose pCPUs are all offline now runs anywhere (sim/hotplug.rs).
            self.fit_affinity_to_online(level, k);
            self.with_sched(level, |s, ctx| s.insert(ctx, EntityId(k as u32)));
        }
        // The guest exists from now on; a periodic tick starts on each of its CPUs.
        self.levels[guest.idx()].alive = true;
        for k in 0..self.levels[guest.idx()].cpu_g.len() {
            let c = self.levels[guest.idx()].cpu_g[k];
            self.start_periodic_tick(c);
        }
        // Boot: every task of the guest that is not a fork slot starts, at its start time
        // counted from now.
        for w in 0..self.wls.len() {
            if self.wls[w].level != guest {
                continue;
            }
            for i in 0..self.wls[w].next_child {
                let t = self.wls[w].tasks[i];
                let at = self.now + self.wls[w].spec.tasks[i].start;
                self.q.arm(self.tasks[t].start_slot, at);
                // It exists from now on (blocked until it starts).
                let g = self.tasks[t].ent;
                self.set_runstate(g, RunState::Blocked);
            }
        }
    }

    fn destroy_domain(&mut self, level: LevelId, group: u32, guest: LevelId) {
        let n = self.levels[level.idx()].ent_info.len();
        let of_group =
            |sim: &Self, k: usize| sim.levels[level.idx()].ent_info[k].params.group == group;
        for k in 0..n {
            if of_group(self, k) {
                self.with_sched(level, |s, ctx| s.set_paused(ctx, EntityId(k as u32), true));
            }
        }
        // The reschedules that take the vCPUs off their CPUs (raised outside any CPU: at once).
        self.run_actions();
        for k in 0..n {
            if !of_group(self, k) {
                continue;
            }
            let g = self.levels[level.idx()].ent_g[k];
            assert!(
                self.levels[level.idx()].ent_info[k].on_cpu.is_none(),
                "invariant: {} kept destroyed {} on its CPU",
                self.levels[level.idx()].sched.name(),
                self.levels[level.idx()].ent_info[k].params.name
            );
            if self.ents[g.idx()].state != RunState::Offline {
                self.set_runstate(g, RunState::Offline);
            }
            self.with_sched(level, |s, ctx| s.remove(ctx, EntityId(k as u32)));
        }
        emit!(self.trace_domain(level, group, false));
        // The guest is gone: nothing reaches its CPUs any more (no tick, no wake-up of its
        // vCPUs by a leftover timer).
        self.levels[guest.idx()].alive = false;
        for k in 0..self.levels[guest.idx()].cpu_g.len() {
            let c = self.levels[guest.idx()].cpu_g[k];
            self.q.cancel(self.cpus[c.idx()].tick_slot);
        }
        // The guest is gone: its tasks no longer exist (its level never runs again, so no hook
        // of it is called and nothing changes these runstates).
        for k in 0..self.levels[guest.idx()].ent_g.len() {
            let g = self.levels[guest.idx()].ent_g[k];
            if self.ents[g.idx()].state != RunState::Offline {
                self.set_runstate(g, RunState::Offline);
            }
        }
    }

    /// Task `t`, running on `c`, forks: the child starts at step `child_at`.
    #[cold]
    #[inline(never)]
    pub(super) fn fork_task(&mut self, t: usize, child_at: usize, c: GCpu) {
        let wl = self.tasks[t].wl;
        let w = &mut self.wls[wl];
        let Some(&child) = w.tasks.get(w.next_child) else {
            return; // EAGAIN: no slot left (max_tasks).
        };
        w.next_child += 1;
        let parent = self.tasks[t].ent;
        let ch = &mut self.tasks[child];
        debug_assert_eq!(ch.phase, Phase::New, "fork into a used slot");
        ch.pc = child_at;
        ch.phase = Phase::Ready;
        ch.born = self.now;
        let g = ch.ent;
        let info = WakeInfo {
            cause: WakeCause::Fork,
            waker_cpu: Some(self.cpus[c.idx()].local),
            waker: Some(self.ents[parent.idx()].local),
            parent: Some(self.ents[parent.idx()].local),
            sync: false,
        };
        self.wake_entity(g, info);
    }

    /// Task `t`, current on its CPU, exits: it blocks for good, is `offline` from now on, and
    /// leaves its scheduler (`Scheduler::remove`).
    pub(super) fn exit_task(&mut self, t: usize) {
        self.tasks[t].phase = Phase::Exited;
        let g = self.tasks[t].ent;
        self.block_entity(g);
        self.set_runstate(g, RunState::Offline);
        let (l, e) = (self.ents[g.idx()].level, self.ents[g.idx()].local);
        self.with_sched(l, |s, ctx| s.remove(ctx, e));
    }
}
