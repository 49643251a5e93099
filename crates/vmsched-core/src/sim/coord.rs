//! Coordinated scheduling between a Linux guest and its KVM host (seed 003 §VI.B; the
//! real-time case of its refs [10][11]; `[domain.coord]`, scenario/coord.rs; docs/kvm.md).
//!
//! The guest flags some of its tasks as interactive (at build: RT tasks, named tasks). When a
//! flagged task wakes, the guest kernel makes a *boost* hypercall for the vCPU the task is
//! queued on (`Scheduler::task_cpu`), unless it already did for that vCPU: from that vCPU if it
//! executes (the woken task pays `hypercall_ns` as kernel time before its work, as a context
//! switch's cost), else from the executing vCPU whose code woke the task (a remote wake-up; its
//! current task pays, and the call names the target vCPU, as KVM_HC_KICK_CPU names one), and
//! the host writes the boost attributes into the vCPU thread's
//! `params.linux` and calls its scheduler's `prio_changed` (the Linux core's
//! `__sched_setscheduler`: a class switch to SCHED_FIFO, or a renice), so the thread's wake-up
//! and preemption follow the host core's rules for them (a halted thread changes class at its
//! wake-up, then preempts a fair host loop at once). With no executing vCPU of the guest to
//! make the call (a timer of a preempted vCPU), its vCPU makes it when it next executes.
//! When the last flagged task queued on a boosted vCPU blocks (or exits), the guest makes the
//! *unboost* hypercall (charged to the task that runs next there, if any) and the host
//! restores the thread's attributes. The host also restores them when the boost has lasted
//! `bound_us`; the guest, which is not told, boosts that vCPU again only after its unboost.
//!
//! Not modelled: a flagged task moved to another vCPU by the guest's load balancer (the old
//! vCPU stays boosted until a flagged task blocks there; the new one is not boosted until a
//! flagged task wakes there); the unboost's cost when the vCPU goes idle (it halts at once);
//! any priority change of a boosted thread for a later, higher-priority flagged wake-up; a
//! parallel job's ranks are never flagged (they are added after coordination is set up).
//! Nothing here runs unless a domain has coordination on: the engine's hooks test one `Option`.

use super::*;
use crate::sched::{LinuxAttr, Policy};

/// A coordinated guest as the builder gives it ([`SimBuilder::add_coord`]).
#[derive(Clone, Copy, Debug)]
pub struct CoordSpec {
    /// The boosted vCPU thread's attributes (policy, nice, RT priority).
    pub boost: LinuxAttr,
    /// A flagged RT task passes its own `rt_priority` on (refs \[10\]\[11\]).
    pub pass_priority: bool,
    /// The cost of each hypercall on the calling vCPU.
    pub hypercall_ns: Nanos,
    /// The longest boost without an unboost; 0: no bound.
    pub bound_ns: Nanos,
}

/// Per-domain hypercall counts (reported in `Results::coord`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoordCounts {
    pub boosts: u64,
    pub unboosts: u64,
    /// Boosts the host ended at `bound_us`.
    pub expired: u64,
}

/// One vCPU of a coordinated guest.
#[derive(Clone, Copy, Debug)]
struct VcpuCoord {
    /// The guest made its boost hypercall and not yet its unboost.
    guest_boosted: bool,
    /// The boost hypercall waits for the vCPU to execute.
    pending: bool,
    /// The host runs the thread with the boost attributes; `saved` are its own.
    host_boosted: bool,
    saved: LinuxAttr,
    /// The RT priority asked for (`pass_priority`), else the spec's.
    prio: u32,
    bound_slot: SlotId,
}

/// One coordinated guest level.
struct DomCoord {
    level: LevelId,
    spec: CoordSpec,
    /// Per entity of the level: flagged interactive.
    flagged: Vec<bool>,
    /// The flagged entities, in id order.
    list: Vec<EntityId>,
    vcpus: Vec<VcpuCoord>,
    counts: CoordCounts,
    /// Counts at the end of the warm-up (the report is of the measured window).
    base: CoordCounts,
}

impl DomCoord {
    /// Entities added after coordination was set up (a parallel job's ranks) are not flagged.
    #[inline]
    fn is_flagged(&self, e: EntityId) -> bool {
        self.flagged.get(e.idx()).copied().unwrap_or(false)
    }
}

/// Every coordinated guest; `by_level[l]` indexes `doms`.
pub(super) struct Coord {
    by_level: Vec<Option<u32>>,
    doms: Vec<DomCoord>,
}

impl SimBuilder {
    /// Coordination for guest level `guest` (its vCPUs and tasks added): `flag` says which of
    /// its entities are interactive.
    pub fn add_coord(
        &mut self,
        guest: LevelId,
        spec: CoordSpec,
        flag: impl Fn(&EntityParams) -> bool,
    ) {
        let flagged: Vec<bool> = self.sim.levels[guest.idx()]
            .ent_info
            .iter()
            .map(|e| flag(&e.params))
            .collect();
        let list = (0..flagged.len())
            .filter(|&i| flagged[i])
            .map(|i| EntityId(i as u32))
            .collect();
        let ncpu = self.sim.levels[guest.idx()].cpu_g.len();
        let vcpus = (0..ncpu)
            .map(|k| {
                let g = self.sim.levels[guest.idx()].cpu_g[k];
                VcpuCoord {
                    guest_boosted: false,
                    pending: false,
                    host_boosted: false,
                    saved: LinuxAttr::default(),
                    prio: spec.boost.rt_priority,
                    bound_slot: self.slot(SlotKind::CoordBound(g)),
                }
            })
            .collect();
        let nlevels = self.sim.levels.len();
        let c = self.sim.coord.get_or_insert_with(|| {
            Box::new(Coord {
                by_level: vec![None; nlevels],
                doms: Vec::new(),
            })
        });
        c.by_level.resize(nlevels, None);
        c.by_level[guest.idx()] = Some(c.doms.len() as u32);
        c.doms.push(DomCoord {
            level: guest,
            spec,
            flagged,
            list,
            vcpus,
            counts: CoordCounts::default(),
            base: CoordCounts::default(),
        });
    }
}

impl Simulation {
    /// The coordinated guest of level `l`, if it is one.
    #[inline]
    fn coord_dom(&self, l: LevelId) -> Option<usize> {
        let c = self.coord.as_ref()?;
        c.by_level
            .get(l.idx())
            .copied()
            .flatten()
            .map(|d| d as usize)
    }

    /// Entity `g` was just woken: a flagged task makes its vCPU's boost hypercall.
    #[cold]
    #[inline(never)]
    pub(super) fn coord_wake(&mut self, g: GEnt) {
        let (l, e) = (self.ents[g.idx()].level, self.ents[g.idx()].local);
        let Some(d) = self.coord_dom(l) else { return };
        let EntKind::Task(t) = self.ents[g.idx()].kind else {
            return;
        };
        let dom = &self.coord.as_ref().expect("coordinated").doms[d];
        if !dom.is_flagged(e) {
            return;
        }
        let lc = self.levels[l.idx()]
            .sched
            .task_cpu(e)
            .expect("invariant: a coordinated guest's scheduler tells task_cpu");
        let v = dom.vcpus[lc.idx()];
        if v.guest_boosted {
            return;
        }
        let linux = self.levels[l.idx()].ent_info[e.idx()].params.linux;
        let dom = &mut self.coord.as_mut().expect("coordinated").doms[d];
        let rt = matches!(linux.policy, Policy::Fifo | Policy::Rr);
        let prio = if dom.spec.pass_priority && rt {
            linux.rt_priority
        } else {
            dom.spec.boost.rt_priority
        };
        let cost = dom.spec.hypercall_ns;
        dom.counts.boosts += 1;
        let v = &mut dom.vcpus[lc.idx()];
        v.guest_boosted = true;
        v.prio = prio;
        // Who makes the call: the task's vCPU if it executes (the woken task pays it before
        // its work), else the executing vCPU of this guest whose code woke it (a remote
        // wake-up: its current task pays), else the task's vCPU once it executes.
        let c = self.levels[l.idx()].cpu_g[lc.idx()];
        let waker = self
            .local_cpu
            .filter(|&w| w != c && self.cpus[w.idx()].level == l && self.cpus[w.idx()].executing);
        if self.cpus[c.idx()].executing {
            self.charge(t, cost);
            self.host_boost(d, lc.idx());
        } else if let Some(w) = waker {
            if let Some(EntKind::Task(wt)) = self.curr_of(w).map(|n| self.ents[n.idx()].kind) {
                self.charge(wt, cost);
            }
            self.host_boost(d, lc.idx());
        } else {
            self.charge(t, cost);
            self.coord.as_mut().expect("coordinated").doms[d].vcpus[lc.idx()].pending = true;
        }
    }

    /// Guest CPU `c` executes again: a boost hypercall it owes is made now.
    #[cold]
    #[inline(never)]
    pub(super) fn coord_executing(&mut self, c: GCpu) {
        let (l, lc) = (self.cpus[c.idx()].level, self.cpus[c.idx()].local);
        let Some(d) = self.coord_dom(l) else { return };
        let v = &mut self.coord.as_mut().expect("coordinated").doms[d].vcpus[lc.idx()];
        if std::mem::take(&mut v.pending) {
            self.host_boost(d, lc.idx());
        }
    }

    /// Entity `g` blocked (or exited) on guest CPU `c`, which rescheduled: if it was flagged
    /// and no flagged task is left queued on `c`, the guest makes its unboost hypercall.
    #[cold]
    #[inline(never)]
    pub(super) fn coord_block(&mut self, g: GEnt, c: GCpu) {
        let (l, e) = (self.ents[g.idx()].level, self.ents[g.idx()].local);
        let Some(d) = self.coord_dom(l) else { return };
        let lc = self.cpus[c.idx()].local;
        let dom = &self.coord.as_ref().expect("coordinated").doms[d];
        if !dom.is_flagged(e) || !dom.vcpus[lc.idx()].guest_boosted {
            return;
        }
        let lv = &self.levels[l.idx()];
        let left = dom
            .list
            .iter()
            .any(|&f| lv.ent_info[f.idx()].runnable && lv.sched.task_cpu(f) == Some(lc));
        if left {
            return;
        }
        let dom = &mut self.coord.as_mut().expect("coordinated").doms[d];
        dom.counts.unboosts += 1;
        let cost = dom.spec.hypercall_ns;
        let v = &mut dom.vcpus[lc.idx()];
        v.guest_boosted = false;
        v.pending = false;
        if let Some(n) = self.curr_of(c) {
            if let EntKind::Task(t) = self.ents[n.idx()].kind {
                self.charge(t, cost);
            }
        }
        self.host_unboost(d, lc.idx());
    }

    /// The host's bound of a boost of guest CPU `c` expired (slot `CoordBound`).
    #[cold]
    pub(super) fn coord_bound(&mut self, c: GCpu) {
        let (l, lc) = (self.cpus[c.idx()].level, self.cpus[c.idx()].local);
        let d = self
            .coord_dom(l)
            .expect("invariant: a bound of a coordinated guest");
        let dom = &mut self.coord.as_mut().expect("coordinated").doms[d];
        if dom.vcpus[lc.idx()].host_boosted {
            dom.counts.expired += 1;
            self.host_unboost(d, lc.idx());
        }
    }

    /// Task `t` pays `cost` of kernel time before its work goes on (as a context switch's cost).
    fn charge(&mut self, t: usize, cost: Nanos) {
        if cost == 0 {
            return;
        }
        let progressing = self.tasks[t].run_since.is_some();
        if progressing {
            self.stop_progress(t);
        }
        self.tasks[t].overhead += cost;
        if progressing {
            self.start_progress(t);
        }
    }

    /// The host boosts the thread of vCPU `k` of coordinated guest `d`.
    fn host_boost(&mut self, d: usize, k: usize) {
        let dom = &mut self.coord.as_mut().expect("coordinated").doms[d];
        let (level, bound) = (dom.level, dom.spec.bound_ns);
        let mut boost = dom.spec.boost;
        let v = &mut dom.vcpus[k];
        if v.host_boosted {
            return;
        }
        boost.rt_priority = match boost.policy {
            Policy::Fifo | Policy::Rr => v.prio,
            _ => 0,
        };
        let slot = v.bound_slot;
        let c = self.levels[level.idx()].cpu_g[k];
        let b = self.cpus[c.idx()]
            .backing
            .expect("invariant: a guest CPU is a vCPU");
        let (hl, he) = (self.ents[b.idx()].level, self.ents[b.idx()].local);
        let attr = &mut self.levels[hl.idx()].ent_info[he.idx()].params.linux;
        let v = &mut self.coord.as_mut().expect("coordinated").doms[d].vcpus[k];
        v.saved = *attr;
        v.host_boosted = true;
        *attr = LinuxAttr {
            times: attr.times,
            ..boost
        };
        if bound > 0 {
            self.q.arm(slot, self.now + bound);
        }
        self.with_sched(hl, |s, ctx| s.prio_changed(ctx, he));
    }

    /// The host gives the thread of vCPU `k` of coordinated guest `d` its own attributes back.
    fn host_unboost(&mut self, d: usize, k: usize) {
        let dom = &mut self.coord.as_mut().expect("coordinated").doms[d];
        let level = dom.level;
        let v = &mut dom.vcpus[k];
        if !v.host_boosted {
            return;
        }
        v.host_boosted = false;
        let (saved, slot) = (v.saved, v.bound_slot);
        self.q.cancel(slot);
        let c = self.levels[level.idx()].cpu_g[k];
        let b = self.cpus[c.idx()]
            .backing
            .expect("invariant: a guest CPU is a vCPU");
        let (hl, he) = (self.ents[b.idx()].level, self.ents[b.idx()].local);
        self.levels[hl.idx()].ent_info[he.idx()].params.linux = saved;
        self.with_sched(hl, |s, ctx| s.prio_changed(ctx, he));
    }

    /// The warm-up ends: the counts start again.
    pub(super) fn coord_reset_metrics(&mut self) {
        if let Some(c) = &mut self.coord {
            for d in &mut c.doms {
                d.base = d.counts;
            }
        }
    }

    /// Per coordinated guest: its level's name and its hypercall counts since the warm-up.
    pub(crate) fn coord_rows(&self) -> Vec<(String, CoordCounts)> {
        let Some(c) = &self.coord else {
            return Vec::new();
        };
        c.doms
            .iter()
            .map(|d| {
                let counts = CoordCounts {
                    boosts: d.counts.boosts - d.base.boosts,
                    unboosts: d.counts.unboosts - d.base.unboosts,
                    expired: d.counts.expired - d.base.expired,
                };
                (self.levels[d.level.idx()].name.clone(), counts)
            })
            .collect()
    }
}
