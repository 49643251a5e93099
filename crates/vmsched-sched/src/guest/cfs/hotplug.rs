//! CFS and CPU hot-plug in the guest (Linux v5.10 `rq_offline_fair` / `rq_online_fair`, the
//! sched domains rebuilt without an inactive CPU, and `move_queued_task` as `migrate_tasks`
//! uses it; facts only, our own code). The Linux core empties the CPU
//! (guest/linux_core.rs); this file keeps CFS's view of where a task may go.
//!
//! CFS reads one mask per task, `allowed`: the task's affinity within the CPUs online now. It
//! stands for `p->cpus_ptr` together with the sched-domain spans, which upstream leave out an
//! inactive CPU, so placement (`select_idle_sibling`'s scans, fork placement) and balancing
//! (the destination must be in `allowed`) never choose an offline CPU. The latency tunables'
//! CPU-count factor is not recomputed: 5.10's `rq_offline_fair` → `update_sysctl` runs while
//! the dying CPU still counts as online, and a CPU coming back restores the count the factor
//! was computed from at boot.

use vmsched_core::cpuset::CpuSet;
use vmsched_core::ids::{CpuId, EntityId};

use super::Cfs;
use crate::guest::linux_core::LinuxCtx;

impl Cfs {
    /// Every task's `allowed` from its (possibly widened) affinity and the CPUs online now.
    pub(super) fn refresh_allowed(&mut self, ctx: &LinuxCtx) {
        let mut online = CpuSet::empty();
        for c in 0..self.ncpus() {
            if ctx.cpu(CpuId(c as u32)).online {
                online.insert(CpuId(c as u32));
            }
        }
        for (i, se) in self.ses.iter_mut().enumerate() {
            se.allowed = ctx
                .ent(EntityId(i as u32))
                .params
                .hard_affinity
                .and(&online);
        }
    }

    /// Linux v5.10: move_queued_task for a CFS task (`dequeue_entity` without DEQUEUE_SLEEP
    /// makes its vruntime relative, `set_task_cpu`, `enqueue_entity` on `dst` makes it absolute
    /// again); the core's `check_preempt_curr` follows.
    pub(super) fn move_queued(&mut self, ctx: &mut LinuxCtx, e: usize, src: usize, dst: usize) {
        debug_assert!(self.ses[e].on_rq && self.rqs[src].curr != Some(e));
        self.dequeue_entity(ctx, src, e, false);
        self.detach_entity_cfs_rq(src, e);
        let se = &mut self.ses[e];
        se.cpu = dst;
        se.exec_start = 0;
        self.enqueue_entity(ctx, dst, e, false, false);
    }
}
