//! The Xen schedulers' own trace records (`TRC_SCHED_CLASS`), one [`XenClass`] a scheduler:
//! Credit1, Credit2 (4.20 and as in 4.2.1), RTDS and null, and the [`CLASSES`] table that
//! names them. Moved out of the xentrace sink ([`super`]), which owns the file layout and the
//! generic scheduler records.
//!
//! Where the records come from (facts only, from Xen's sources; spec xen-schedulers.md §8.4):
//! each scheduler's `TRC_*` definitions and the `__trace_var` calls in
//! `xen/common/sched/credit.c`, `credit2.c`, `rt.c` and `null.c` (4.20), and
//! `xen/common/sched_credit2.c` (4.2.1).

use super::{Ids, XenClass, TRC_SCHED_CLASS};
use crate::ids::{GCpu, GEnt};
use crate::trace::SchedEvent;

/// Credit1 (`xen/common/sched/credit.c`, `TRC_CSCHED_*`).
pub struct Credit1;

impl XenClass for Credit1 {
    fn sched_id(&self) -> u32 {
        0
    }

    fn record(&self, ev: &SchedEvent<GEnt, GCpu>, ids: &Ids) -> Option<(u32, Vec<u32>)> {
        let dv2 = |e: GEnt| {
            let (d, v) = ids.dom_vcpu(e);
            vec![d, v]
        };
        Some(match *ev {
            // PICKED_CPU: domain, vCPU, pCPU.
            SchedEvent::PickedCpu { ent, cpu } => {
                let (d, v) = ids.dom_vcpu(ent);
                (5, vec![d, v, ids.pcpu(cpu)])
            }
            SchedEvent::Tickle { cpu } => (6, vec![ids.pcpu(cpu)]),
            SchedEvent::Boost { ent } => (7, dv2(ent)),
            SchedEvent::Unboost { ent } => (8, dv2(ent)),
            // SCHEDULE: pCPU (16 bits), tasklet (8 bits, none modelled: 0), idle (8 bits).
            SchedEvent::Schedule { cpu, idle, .. } => {
                (9, vec![(ids.pcpu(cpu) & 0xffff) | (idle as u32) << 24])
            }
            SchedEvent::Ratelimit { ent, runtime } => (10, vec![ids.dv(ent), runtime]),
            _ => return None,
        })
    }
}

/// Credit2 (`xen/common/sched/credit2.c`, `TRC_CSCHED2_*`).
pub struct Credit2;

impl XenClass for Credit2 {
    fn sched_id(&self) -> u32 {
        1
    }

    fn record(&self, ev: &SchedEvent<GEnt, GCpu>, ids: &Ids) -> Option<(u32, Vec<u32>)> {
        Some(match *ev {
            // CREDIT_BURN: dv, credit, budget (INT_MIN: no cap), delta.
            SchedEvent::CreditBurn { ent, credit, delta } => (
                3,
                vec![ids.dv(ent), credit as u32, i32::MIN as u32, delta as u32],
            ),
            SchedEvent::Tickle { cpu } => (6, vec![ids.pcpu(cpu)]),
            // CREDIT_RESET: dv, credit before, credit after.
            SchedEvent::CreditReset { ent, start, end } => {
                (7, vec![ids.dv(ent), start as u32, end as u32])
            }
            // PICKED_CPU: the chosen runqueue's load (two words, not modelled: 0), dv,
            // runqueue id (not kept: 0) << 16 | pCPU... as Xen packs it, pCPU in the high half.
            SchedEvent::PickedCpu { ent, cpu } => {
                (19, vec![0, 0, ids.dv(ent), ids.pcpu(cpu) << 16])
            }
            // SCHEDULE: pCPU (16 bits), runqueue id (16 bits); then tasklet (none modelled:
            // 0), idle, smt_idle, tickled, a byte each.
            SchedEvent::RunqSchedule {
                cpu,
                runq,
                tickled,
                idle,
                smt_idle,
            } => (
                21,
                vec![
                    (ids.pcpu(cpu) & 0xffff) | runq << 16,
                    (idle as u32) << 8 | (smt_idle as u32) << 16 | (tickled as u32) << 24,
                ],
            ),
            SchedEvent::Ratelimit { ent, runtime } => (22, vec![ids.dv(ent), runtime]),
            _ => return None,
        })
    }
}

/// Credit2 as in Xen 4.2.1 (`xen/common/sched_credit2.c`): its records are numbered from
/// `TRC_SCHED_CLASS` itself (no scheduler id bits: 0x00022001...), pack a vCPU with the
/// domain in the low and the vCPU in the high 16 bits, and its tickle has no cycle count.
/// It has no budget, picked-CPU, ratelimit or schedule record.
pub struct Credit2v421;

impl XenClass for Credit2v421 {
    fn sched_id(&self) -> u32 {
        1
    }

    fn event(&self, n: u32) -> u32 {
        TRC_SCHED_CLASS + n
    }

    /// `TRC_CSCHED2_TICKLE` (and `RUNQ_POS`, not written) go without a cycle count.
    fn has_cycles(&self, n: u32) -> bool {
        !matches!(n, 2 | 6)
    }

    fn record(&self, ev: &SchedEvent<GEnt, GCpu>, ids: &Ids) -> Option<(u32, Vec<u32>)> {
        let vd = |e: GEnt| {
            let (d, v) = ids.dom_vcpu(e);
            (d & 0xffff) | v << 16
        };
        Some(match *ev {
            // CREDIT_BURN: domain:vCPU, credit, delta.
            SchedEvent::CreditBurn { ent, credit, delta } => {
                (3, vec![vd(ent), credit as u32, delta as u32])
            }
            // TICKLE: the pCPU (8 bits).
            SchedEvent::Tickle { cpu } => (6, vec![ids.pcpu(cpu) & 0xff]),
            // CREDIT_RESET: domain:vCPU, credit before, after.
            SchedEvent::CreditReset { ent, start, end } => {
                (7, vec![vd(ent), start as u32, end as u32])
            }
            _ => return None,
        })
    }
}

/// A 64-bit figure as Xen's records hold it: the low word, then the high one.
fn words64(v: i64) -> [u32; 2] {
    [v as u32, ((v as u64) >> 32) as u32]
}

/// RTDS (`xen/common/sched/rt.c`, `TRC_RTDS_*`). Xen packs a vCPU as a 16-bit unit id then a
/// 16-bit domain id, which is the "dv" word.
pub struct Rtds;

impl XenClass for Rtds {
    fn sched_id(&self) -> u32 {
        4
    }

    fn record(&self, ev: &SchedEvent<GEnt, GCpu>, ids: &Ids) -> Option<(u32, Vec<u32>)> {
        Some(match *ev {
            // TICKLE: the pCPU (16 bits, then padding).
            SchedEvent::Tickle { cpu } => (1, vec![ids.pcpu(cpu) & 0xffff]),
            // RUNQ_PICK: dv, deadline (64 bits), budget left (64 bits).
            SchedEvent::RunqPick {
                ent,
                deadline,
                budget,
            } => {
                let (dl, dh) = deadline.words();
                let [bl, bh] = words64(budget as i64);
                (2, vec![ids.dv(ent), dl, dh, bl, bh])
            }
            // BUDGET_BURN: dv, budget left (64 bits), delta, priority level, extratime.
            SchedEvent::BudgetBurn {
                ent,
                budget,
                delta,
                level,
                extratime,
            } => {
                let [bl, bh] = words64(budget as i64);
                (3, vec![ids.dv(ent), bl, bh, delta, level, extratime as u32])
            }
            // BUDGET_REPLENISH: dv, priority level (0 after a replenishment), deadline
            // (64 bits), budget (64 bits).
            SchedEvent::Replenish {
                ent,
                deadline,
                budget,
            } => {
                let (dl, dh) = deadline.words();
                let [bl, bh] = words64(budget as i64);
                (4, vec![ids.dv(ent), 0, dl, dh, bl, bh])
            }
            // SCHEDULE: pCPU (16 bits), tasklet (8 bits, none modelled: 0), then a byte with
            // "tickled" in its low and "idle" in its high 4 bits.
            SchedEvent::Schedule { cpu, tickled, idle } => (
                6,
                vec![(ids.pcpu(cpu) & 0xffff) | (tickled as u32) << 24 | (idle as u32) << 28],
            ),
            _ => return None,
        })
    }
}

/// null (`xen/common/sched/null.c`, `TRC_SNULL_*`).
pub struct Null;

impl XenClass for Null {
    fn sched_id(&self) -> u32 {
        5
    }

    fn record(&self, ev: &SchedEvent<GEnt, GCpu>, ids: &Ids) -> Option<(u32, Vec<u32>)> {
        Some(match *ev {
            // PICKED_CPU: dv, the pCPU picked.
            SchedEvent::PickedCpu { ent, cpu } => (1, vec![ids.dv(ent), ids.pcpu(cpu)]),
            // UNIT_ASSIGN, UNIT_DEASSIGN: dv, the pCPU.
            SchedEvent::Assign { ent, cpu } => (2, vec![ids.dv(ent), ids.pcpu(cpu)]),
            SchedEvent::Deassign { ent, cpu } => (3, vec![ids.dv(ent), ids.pcpu(cpu)]),
            // MIGRATE: dv, then the old pCPU in the low and the new one in the high 16 bits.
            SchedEvent::Migrate { ent, from, to } => (
                4,
                vec![ids.dv(ent), (ids.pcpu(from) & 0xffff) | ids.pcpu(to) << 16],
            ),
            // SCHEDULE: tasklet (16 bits, none modelled: 0) then the pCPU (16 bits); the
            // pCPU's assigned vCPU as dv, or -1 in both halves when it has none.
            SchedEvent::NullSchedule { cpu, assigned } => (
                5,
                vec![
                    ids.pcpu(cpu) << 16,
                    assigned.map_or(u32::MAX, |e| ids.dv(e)),
                ],
            ),
            _ => return None,
        })
    }
}

/// The schedulers whose own records are written, by [`crate::sched::Scheduler::name`].
/// (By [`crate::sched::Scheduler::trace_class`]: `credit2-4.2.1` is Credit2 as in 4.2.1.)
pub static CLASSES: &[(&str, &dyn XenClass)] = &[
    ("credit", &Credit1),
    ("credit2", &Credit2),
    ("credit2-4.2.1", &Credit2v421),
    ("rtds", &Rtds),
    ("null", &Null),
];

/// The [`XenClass`] of the scheduler named `sched`, if it has one.
pub fn class_of(sched: &str) -> Option<&'static dyn XenClass> {
    CLASSES.iter().find(|(n, _)| *n == sched).map(|(_, c)| *c)
}
