//! Credit1's placement and load balancing: the CPU pick (`_csched_cpu_pick`, used at insertion
//! [4.20], for a migration and by the tick-time check) and stealing (`csched_load_balance`,
//! `csched_runq_steal`) by a CPU whose best local vCPU is OVER or idle. After xen-schedulers.md
//! §2.12–2.13 and ERRATA X11, checked against Xen 3.3.0-rc7 and RELEASE-4.20.0 (facts only).

use crate::host::xen_core::XenCtx;
use vmsched_core::cpuset::CpuSet;
use vmsched_core::ids::{CpuId, EntityId};

use super::{Credit1, Pri};

impl Credit1 {
    /// Xen: csched_res_pick: the pick, committed ([4.1+] `idle_bias`); [4.7+] sets MIGRATING so
    /// the next wake (the end of the migration) does not boost.
    pub(super) fn res_pick(&mut self, ctx: &XenCtx, e: EntityId) -> CpuId {
        if self.v.migration_wake_unboosted() {
            self.units[e.idx()].migrating = true;
        }
        self.cpu_pick(ctx, e, true)
    }

    /// Xen: _csched_cpu_pick (csched_cpu_pick in 3.3). Start from `processor(v)` (or the next CPU
    /// of its affinity); among the idle CPUs of its affinity, move to a CPU whose core (same
    /// socket) or socket (other socket; [4.1+] twice as many) has more idle CPUs. The start CPU
    /// counts as idle: [3.3] always (so on one socket without SMT a running vCPU never moves,
    /// ERRATA X11); [4.20] only if it is v's own CPU and nothing is queued on it. [4.20] soft
    /// affinity first, then hard; a busy start CPU jumps to an idle candidate first.
    pub(super) fn cpu_pick(&mut self, _ctx: &XenCtx, e: EntityId, commit: bool) -> CpuId {
        let v420 = self.v.tickles_one_idler();
        let u = &self.units[e.idx()];
        let start = u.processor;
        let factor = self.v.cross_socket_factor();
        let mut cpu = start;
        let mut bias_of: Option<CpuId> = None;
        for soft in [true, false] {
            if soft && !u.has_soft {
                continue;
            }
            let mut cpus = if soft { u.soft.and(&u.hard) } else { u.hard };
            cpus.and_with(&self.online);
            if cpus.is_empty() {
                continue;
            }
            cpu = cpus.test_or_cycle(start).expect("non-empty");
            let mut idlers = self.idlers.and(&self.online);
            if !v420 || (start == cpu && self.pcpus[cpu.idx()].runq.is_empty()) {
                idlers.insert(cpu);
            }
            cpus.and_with(&idlers);
            if v420 && !cpus.contains(cpu) && !cpus.is_empty() {
                cpu = cpus.cycle(cpu).expect("non-empty");
            }
            cpus.remove(cpu);
            while let Some(nxt) = cpus.cycle(cpu) {
                let same_socket = self.core_mask[nxt.idx()].contains(cpu);
                let (group_cpu, group_nxt, f) = if same_socket {
                    (&self.sibling[cpu.idx()], &self.sibling[nxt.idx()], 1)
                } else {
                    (
                        &self.core_mask[cpu.idx()],
                        &self.core_mask[nxt.idx()],
                        factor,
                    )
                };
                let cpu_idlers = idlers.and(group_cpu);
                let mut nxt_idlers = idlers.and(group_nxt);
                let (wc, wn) = (cpu_idlers.len(), nxt_idlers.len());
                let moves = if self.params.smt_power_savings {
                    wc > wn
                } else {
                    wc * f < wn
                };
                if moves {
                    if v420 {
                        nxt_idlers.and_with(&cpus);
                        bias_of = Some(nxt);
                        cpu = nxt_idlers
                            .cycle(self.pcpus[nxt.idx()].idle_bias)
                            .expect("nxt is an idle candidate");
                        cpus.minus_with(&self.sibling[cpu.idx()]);
                    } else {
                        cpu = nxt;
                        cpus.remove(cpu);
                    }
                } else {
                    cpus.minus_with(&nxt_idlers);
                }
            }
            if idlers.contains(cpu) {
                break;
            }
        }
        if let (true, Some(b)) = (commit, bias_of) {
            self.pcpus[b.idx()].idle_bias = cpu;
        }
        cpu
    }

    /// Xen: csched_load_balance. Visit the busy CPUs other than `cpu` and steal the first
    /// queued vCPU of priority above `pri` that may run on `cpu`. [3.3] one pass in CPU order
    /// after `cpu`. [4.20] soft affinity, then hard; nodes from `cpu`'s on; within a node from
    /// `balance_bias`; peers with at most one runnable vCPU are skipped. Returns the stolen vCPU,
    /// now on `cpu` (the caller dequeues its own head when nothing is found).
    pub(super) fn load_balance(
        &mut self,
        ctx: &XenCtx,
        cpu: CpuId,
        pri: Pri,
        now: i64,
    ) -> Option<EntityId> {
        if !self.v.tickles_one_idler() {
            let mut workers = self.online.minus(&self.idlers);
            workers.remove(cpu);
            let mut peer = cpu;
            while let Some(p) = workers.cycle(peer) {
                workers.remove(p);
                peer = p;
                if let Some(s) = self.runq_steal(ctx, p, cpu, pri, false, now) {
                    return Some(s);
                }
            }
            return None;
        }
        let nnodes = self.node_mask.len();
        let home = self.node_of[cpu.idx()] as usize;
        for soft in [true, false] {
            for k in 0..nnodes {
                let node = (home + k) % nnodes;
                let mut workers = self.online.minus(&self.idlers);
                workers.and_with(&self.node_mask[node]);
                workers.remove(cpu);
                let Some(first) = workers.cycle(self.balance_bias[node]) else {
                    continue;
                };
                let mut peer = first;
                loop {
                    if self.pcpus[peer.idx()].nr_runnable > 1 {
                        if let Some(s) = self.runq_steal(ctx, peer, cpu, pri, soft, now) {
                            self.balance_bias[node] = peer;
                            return Some(s);
                        }
                    }
                    peer = workers.cycle(peer).expect("non-empty");
                    if peer == first {
                        break;
                    }
                }
            }
        }
        None
    }

    /// Xen: csched_runq_steal. Nothing from a peer running idle (it will pick its own work);
    /// scan its runqueue head first and stop at the first vCPU of priority ≤ `pri`; skip
    /// [4.18+] yielded vCPUs, [soft step] vCPUs without soft affinity, and cache-hot ones; take
    /// the first allowed on `cpu` (soft step: in its soft affinity).
    fn runq_steal(
        &mut self,
        ctx: &XenCtx,
        peer: CpuId,
        cpu: CpuId,
        pri: Pri,
        soft: bool,
        now: i64,
    ) -> Option<EntityId> {
        // A peer running idle will pick its own work.
        ctx.cpu(peer).curr?;
        let skip_yield = self.v.has_load_balance_ratelimit();
        let mut found = None;
        for &e in &self.pcpus[peer.idx()].runq {
            let u = &self.units[e.idx()];
            if u.pri <= pri {
                break;
            }
            if (skip_yield && u.yield_) || (soft && !u.has_soft) {
                continue;
            }
            let mask: CpuSet = if soft { u.soft.and(&u.hard) } else { u.hard };
            let hot = self.migr_delay > 0 && now - u.last_sched_time < self.migr_delay;
            if !hot && mask.contains(cpu) {
                found = Some(e);
                break;
            }
        }
        let e = found?;
        self.runq_remove(e);
        self.units[e.idx()].processor = cpu;
        self.pcpus[cpu.idx()].nr_runnable += 1;
        Some(e)
    }
}
