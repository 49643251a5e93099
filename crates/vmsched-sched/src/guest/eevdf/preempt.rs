//! EEVDF's slices, deadlines and slice protection, and wake-up preemption (Linux 6.6
//! `check_preempt_wakeup`, 6.12 `check_preempt_wakeup_fair` with PREEMPT_SHORT, 6.18 with
//! `vprot` and ERRATA L6; `update_deadline`, `protect_slice`, `set_protect_slice`,
//! `update_protect_slice`, `cancel_protect_slice`, `did_preempt_short`, `do_preempt_short`).
//! Facts only, our own code.

use vmsched_core::sched::Policy;

use super::{before, calc_delta_fair, min_v, vdiff, Eevdf, EevdfKernel};
use crate::guest::linux_core::LinuxCtx;

impl Eevdf {
    // --- slices, deadlines, protection ---------------------------------------------------------

    /// The request of `e` as place_entity and update_deadline set it.
    #[inline]
    pub(super) fn request(&self, e: usize) -> u64 {
        let se = &self.ses[e];
        if se.custom_slice {
            se.slice
        } else {
            self.base_slice
        }
    }

    /// Linux 6.x: update_deadline. True when the request was used up.
    pub(super) fn update_deadline(&mut self, e: usize) -> bool {
        let slice = self.request(e);
        let se = &mut self.ses[e];
        if before(se.vruntime, se.deadline) {
            return false;
        }
        se.slice = slice;
        se.deadline = se.vruntime.wrapping_add(calc_delta_fair(slice, se.load));
        true
    }

    /// The smallest slice on the queue, curr included. Linux 6.12+: cfs_rq_min_slice
    pub(super) fn cfs_rq_min_slice(&self, cpu: usize) -> u64 {
        let rq = &self.rqs[cpu];
        let mut s = u64::MAX;
        if let Some(c) = rq.curr.filter(|&c| self.ses[c].on_rq) {
            s = self.ses[c].slice;
        }
        rq.queue.iter().fold(s, |m, &x| m.min(self.ses[x].slice))
    }

    /// Whether `e` (current) still holds its slice protection: 6.6–6.16 the `vlag == deadline`
    /// marker, 6.17+ `vruntime < vprot`. Linux: protect_slice
    #[inline]
    pub(super) fn protect_slice(&self, e: usize) -> bool {
        let se = &self.ses[e];
        if self.v6_18() {
            vdiff(se.vprot, se.vruntime) > 0
        } else {
            se.vlag as u64 == se.deadline
        }
    }

    /// Linux: cancel_protect_slice
    pub(super) fn cancel_protect_slice(&mut self, e: usize) {
        if self.protect_slice(e) {
            let se = &mut self.ses[e];
            if self.kernel >= EevdfKernel::V6_18 {
                se.vprot = se.vruntime;
            } else {
                se.vlag = se.deadline.wrapping_add(1) as i64;
            }
        }
    }

    /// At pick: 6.6–6.16 stash the deadline in `vlag`; 6.17+ protect up to the deadline, or
    /// less when a smaller slice is queued (RUN_TO_PARITY) or beyond the normalised base slice
    /// (NO_RUN_TO_PARITY). Linux: set_next_entity's marker / set_protect_slice
    pub(super) fn set_protect_slice(&mut self, cpu: usize, e: usize) {
        if !self.v6_18() {
            let se = &mut self.ses[e];
            se.vlag = se.deadline as i64;
            return;
        }
        let mut slice = self.kernel.normalized_base_slice_ns();
        if self.feat.run_to_parity {
            slice = self.cfs_rq_min_slice(cpu);
        }
        let se = &self.ses[e];
        let slice = slice.min(se.slice);
        let mut vprot = se.deadline;
        if slice != se.slice {
            vprot = min_v(
                vprot,
                se.vruntime.wrapping_add(calc_delta_fair(slice, se.load)),
            );
        }
        self.ses[e].vprot = vprot;
    }

    /// 6.17+: a queued task with a smaller slice shortens curr's protection. Linux:
    /// update_protect_slice
    pub(super) fn update_protect_slice(&mut self, cpu: usize, e: usize) {
        let slice = self.cfs_rq_min_slice(cpu);
        let se = &self.ses[e];
        let v = se.vruntime.wrapping_add(calc_delta_fair(slice, se.load));
        self.ses[e].vprot = min_v(se.vprot, v);
    }

    /// 6.12–6.16: curr's protection was cancelled and it is no longer eligible. Linux:
    /// did_preempt_short
    pub(super) fn did_preempt_short(&self, cpu: usize, curr: usize) -> bool {
        if !self.feat.preempt_short {
            return false;
        }
        let se = &self.ses[curr];
        if se.vlag as u64 == se.deadline {
            return false;
        }
        !self.entity_eligible(cpu, curr)
    }

    /// 6.12–6.16: should the wakee `p` cancel curr's protection? Linux: do_preempt_short
    pub(super) fn do_preempt_short(&self, cpu: usize, p: usize, curr: usize) -> bool {
        if !self.feat.preempt_short {
            return false;
        }
        let (pse, se) = (&self.ses[p], &self.ses[curr]);
        if pse.slice >= se.slice || !self.entity_eligible(cpu, p) {
            return false;
        }
        before(pse.deadline, se.deadline) || !self.entity_eligible(cpu, curr)
    }

    // --- preemption ----------------------------------------------------------------------------

    /// `p` was just queued (or requeued) on `cpu`. Linux 6.6: check_preempt_wakeup; 6.12:
    /// check_preempt_wakeup_fair; 6.18 with ERRATA L6.
    pub(super) fn check_preempt_wakeup(
        &mut self,
        ctx: &mut LinuxCtx,
        cpu: usize,
        p: usize,
        fork: bool,
    ) {
        let Some(curr) = self.rqs[cpu].curr else {
            ctx.resched_curr(cpu);
            return;
        };
        if curr == p {
            return;
        }
        if self.feat.next_buddy && !fork && !self.ses[p].sched_delayed {
            self.set_next_buddy(cpu, p);
        }
        if ctx.rq(cpu).need_resched || !self.feat.wakeup_preemption {
            return;
        }
        let c_idle = self.ses[curr].policy == Policy::Idle;
        let p_idle = self.ses[p].policy == Policy::Idle;
        if c_idle && !p_idle {
            if self.v6_18() {
                self.cancel_protect_slice(curr);
            }
            ctx.resched_curr(cpu);
            return;
        }
        if c_idle != p_idle || self.ses[p].policy == Policy::Batch {
            return;
        }
        self.update_curr(ctx, cpu, true);
        ctx.trace(|| vmsched_core::trace::SchedEvent::WakeCheck {
            ent: vmsched_core::ids::EntityId(p as u32),
            curr: vmsched_core::ids::EntityId(curr as u32),
            rule: if !self.entity_eligible(cpu, p) {
                vmsched_core::trace::WakeRule::NotEligible
            } else if self.feat.run_to_parity && self.protect_slice(curr) {
                vmsched_core::trace::WakeRule::RunToParity
            } else if self.pick_eevdf(cpu, Some(curr), true) == Some(p) {
                vmsched_core::trace::WakeRule::Preempt
            } else {
                vmsched_core::trace::WakeRule::EarlierDeadline
            },
            a: 0,
            b: 0,
        });
        match self.kernel {
            EevdfKernel::V6_6 => {
                if self.pick_eevdf(cpu, Some(curr), true) == Some(p) {
                    ctx.resched_curr(cpu);
                }
            }
            EevdfKernel::V6_12 => {
                if self.do_preempt_short(cpu, p, curr) {
                    self.cancel_protect_slice(curr);
                }
                if self.pick_eevdf(cpu, Some(curr), true) == Some(p) {
                    ctx.resched_curr(cpu);
                }
            }
            EevdfKernel::V6_18 => {
                let short = self.feat.preempt_short && self.ses[p].slice < self.ses[curr].slice;
                if self.pick_eevdf(cpu, Some(curr), !short) == Some(p) {
                    if short {
                        self.cancel_protect_slice(curr);
                    }
                    ctx.resched_curr(cpu);
                } else if self.feat.run_to_parity && short {
                    self.update_protect_slice(cpu, curr);
                }
            }
        }
    }
}
