//! Run-time changes from the scenario's `[[event]]` timeline, as the engine delivers them: each
//! event has its own queue slot, armed at build; when it fires the engine writes the new
//! attributes into the entities' parameters and calls the level's documented hook
//! (`Scheduler::adjust`, `adjust_global`, `prio_changed`, `set_paused`; contracts in
//! docs/design.md, Lifecycle). Nothing here runs on the per-event hot path.

use super::*;
use crate::sched::GlobalParam;

/// One timeline action, with its targets resolved to the level's ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimelineAction {
    /// `xl sched-credit2 -d`: the Xen attributes of every entity of `group` (a domain).
    DomainAttr {
        level: LevelId,
        group: u32,
        weight: Option<u32>,
        cap_pct: Option<u32>,
    },
    /// `xl sched-credit2 -s`: a scheduler-wide parameter of `level`.
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
    /// The entities of `group` at level `l`, in id order.
    fn group_members(&self, l: LevelId, group: u32) -> impl Iterator<Item = EntityId> + '_ {
        self.levels[l.idx()]
            .ent_info
            .iter()
            .enumerate()
            .filter(move |(_, e)| e.params.group == group)
            .map(|(i, _)| EntityId(i as u32))
    }

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
            } => {
                let lv = &mut self.levels[level.idx()];
                for e in lv.ent_info.iter_mut().filter(|e| e.params.group == group) {
                    if let Some(w) = weight {
                        e.params.xen.weight = w;
                    }
                    if let Some(c) = cap_pct {
                        e.params.xen.cap_pct = c;
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

    /// The entities of `group` at level `l` (for tests).
    pub fn group_entities(&self, l: LevelId, group: u32) -> Vec<EntityId> {
        self.group_members(l, group).collect()
    }
}
