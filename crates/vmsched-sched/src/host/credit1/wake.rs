//! Credit1's per-CPU runqueues and wake-ups: insertion by priority with [4.1+] YIELD's one
//! place further (`__runq_insert`, `runq_insert`, `runq_remove`), the wake (`csched_unit_wake`,
//! BOOST on wake and the seed 002 switches of ERRATA X6) and the tickle of 3.3 and 4.20
//! (`__runq_tickle`). After xen-schedulers.md §2.3–2.4 and §2.8, checked against Xen 3.3.0-rc7
//! `sched_credit.c` and RELEASE-4.20.0 `sched/credit.c` (facts only); moved out of
//! `credit1.rs` unchanged.

use vmsched_core::cpuset::CpuSet;
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::trace::SchedEvent;

use crate::host::xen_core::XenCtx;

use super::{Credit1, PRI_BOOST, PRI_IDLE, PRI_UNDER};

impl Credit1 {
    // ---------------------------------------------------------------------------------------
    // Runqueue
    // ---------------------------------------------------------------------------------------

    /// Xen: __runq_insert. Before the first vCPU of strictly lower priority (FIFO within a
    /// priority); [4.1+] a yielding vCPU goes one place further if that place holds a guest vCPU
    /// ([4.20] that is not the last element of the list, the idle vCPU included).
    pub(super) fn runq_insert_at(&mut self, ctx: &XenCtx, e: EntityId) {
        let u = &self.units[e.idx()];
        debug_assert!(!u.on_runq, "credit1: insert of a queued vCPU");
        let cpu = u.processor;
        let runq = &self.pcpus[cpu.idx()].runq;
        let mut pos = runq
            .iter()
            .position(|o| u.pri > self.units[o.idx()].pri)
            .unwrap_or(runq.len());
        if u.yield_ && pos < runq.len() {
            // The idle vCPU sits on the runqueue while the CPU runs a guest vCPU.
            let idle_queued = ctx.cpu(cpu).curr.is_some();
            if pos + 1 < runq.len() || idle_queued {
                pos += 1;
            }
        }
        self.pcpus[cpu.idx()].runq.insert(pos, e);
        self.units[e.idx()].on_runq = true;
    }

    /// Xen: runq_insert (counts the vCPU in `nr_runnable`).
    pub(super) fn runq_insert(&mut self, ctx: &XenCtx, e: EntityId) {
        self.runq_insert_at(ctx, e);
        let cpu = self.units[e.idx()].processor;
        self.pcpus[cpu.idx()].nr_runnable += 1;
    }

    /// Xen: __runq_remove (clears YIELD: [4.20] the flag lives until the vCPU leaves a runqueue).
    pub(super) fn runq_remove_at(&mut self, e: EntityId) {
        let u = &mut self.units[e.idx()];
        debug_assert!(u.on_runq, "credit1: remove of a vCPU not queued");
        u.on_runq = false;
        u.yield_ = false;
        let runq = &mut self.pcpus[u.processor.idx()].runq;
        let i = runq
            .iter()
            .position(|o| *o == e)
            .expect("invariant: a queued vCPU is on its CPU's runqueue");
        runq.remove(i);
    }

    /// Xen: runq_remove (uncounts it).
    pub(super) fn runq_remove(&mut self, e: EntityId) {
        let cpu = self.units[e.idx()].processor;
        self.pcpus[cpu.idx()].nr_runnable -= 1;
        self.runq_remove_at(e);
    }

    // ---------------------------------------------------------------------------------------
    // Wake-up
    // ---------------------------------------------------------------------------------------

    /// Xen: csched_unit_wake. `waker` is the CPU the wake runs on (its tickle cursor).
    pub(super) fn unit_wake(&mut self, ctx: &mut XenCtx, e: EntityId, waker: Option<CpuId>) {
        let u = &self.units[e.idx()];
        if ctx.cpu(u.processor).curr == Some(e) || u.on_runq {
            return;
        }
        let migrating = std::mem::take(&mut self.units[e.idx()].migrating);
        if self.wake_boosts(e, migrating) {
            self.units[e.idx()].pri = PRI_BOOST;
            ctx.trace(|| SchedEvent::Boost { ent: e });
        }
        self.runq_insert(ctx, e);
        // ERRATA X6: with `tickle_on_wake = false` the wake raises no reschedule.
        if self.tickle_on_wake {
            self.runq_tickle(ctx, e, waker);
        }
    }

    /// Whether a wake makes `e` BOOST: ERRATA X7, its stored priority is UNDER (whatever its
    /// credit), unless it is parked or ([4.7+]) the wake ends a migration, and unless BOOST is
    /// switched off (ERRATA X6); [seed 001] or it holds boost credit and is not parked.
    pub(super) fn wake_boosts(&self, e: EntityId, migrating: bool) -> bool {
        let u = &self.units[e.idx()];
        if u.parked {
            return false;
        }
        (self.boost_on_wake
            && u.pri == PRI_UNDER
            && !(migrating && self.v.migration_wake_unboosted()))
            || u.boost_credit > 0
    }

    /// Xen: __runq_tickle.
    pub(super) fn runq_tickle(&mut self, ctx: &mut XenCtx, e: EntityId, waker: Option<CpuId>) {
        if self.v.tickles_one_idler() {
            self.runq_tickle_420(ctx, e, waker);
        } else {
            self.runq_tickle_33(ctx, e);
        }
    }

    /// [3.3] The vCPU's CPU if it beats the running vCPU; if that CPU is busy, every idle CPU
    /// too; all within the vCPU's affinity. Idlers are not cleared.
    pub(super) fn runq_tickle_33(&mut self, ctx: &mut XenCtx, e: EntityId) {
        for c in self.tickle_mask_33(ctx, e).iter() {
            ctx.trace(|| SchedEvent::Tickle { cpu: c });
            ctx.resched(c);
        }
    }

    /// The CPUs [`Self::runq_tickle_33`] raises for `e`.
    pub(super) fn tickle_mask_33(&self, ctx: &XenCtx, e: EntityId) -> CpuSet {
        let u = &self.units[e.idx()];
        let cpu = u.processor;
        let cur = self.pri_of(ctx.cpu(cpu).curr);
        let mut mask = CpuSet::empty();
        if u.pri > cur {
            mask.insert(cpu);
        }
        if cur > PRI_IDLE && !self.idlers.is_empty() {
            mask.or_with(&self.idlers);
            mask.and_with(&u.hard);
        }
        mask
    }

    /// [4.20] ERRATA X10: every decision concerns the woken vCPU's CPU; the waker's CPU only
    /// holds the round-robin cursor. Tickled CPUs leave the idlers at once.
    pub(super) fn runq_tickle_420(&mut self, ctx: &mut XenCtx, e: EntityId, waker: Option<CpuId>) {
        let u = &self.units[e.idx()];
        let cpu = u.processor;
        let cur = self.pri_of(ctx.cpu(cpu).curr);
        let idle_mask = self.idlers.and(&self.online);
        let mut mask = CpuSet::empty();
        // An exclusively pinned vCPU whose CPU idles; or its CPU idles; or no CPU idles and it
        // beats the running vCPU: its own CPU.
        if (u.pinned && idle_mask.contains(cpu))
            || cur == PRI_IDLE
            || (idle_mask.is_empty() && u.pri > cur)
        {
            mask.insert(cpu);
        } else if !idle_mask.is_empty() {
            for soft in [true, false] {
                if soft && !u.has_soft {
                    continue;
                }
                let step = if soft { u.soft.and(&u.hard) } else { u.hard };
                let s = step.and(&idle_mask);
                if s.is_empty() && soft {
                    continue;
                }
                if s.is_empty() {
                    if u.pri > cur {
                        // The kick-away guard tests v's own hard affinity against the idlers,
                        // empty here by construction (4.13+): cur is never marked.
                        mask.insert(cpu);
                    }
                } else if self.tickle_one {
                    let w = waker.unwrap_or(cpu).idx();
                    let last = &mut self.pcpus[w].last_tickle;
                    *last = s.cycle(*last).expect("a non-empty set cycles");
                    mask.insert(*last);
                } else {
                    mask.or_with(&s);
                }
                if !mask.is_empty() {
                    break;
                }
            }
        }
        for c in mask.iter() {
            self.idlers.remove(c);
            ctx.trace(|| SchedEvent::Tickle { cpu: c });
            ctx.resched(c);
        }
    }
}
