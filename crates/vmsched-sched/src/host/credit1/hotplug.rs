//! Credit1 and CPU hot-plug: a pCPU leaving the pool (`xen-hptool cpu-offline`) and joining it
//! again. After Xen RELEASE-4.20.0 `sched/credit.c` (`csched_deinit_pdata`, `csched_free_pdata`,
//! `csched_alloc_pdata`, `csched_switch_sched` → `init_pdata`) and, for 3.3, what 3.3.0-rc7
//! `sched_credit.c` and `arch/x86/smpboot.c` imply (facts only; the code is our own). The Xen
//! core moves the vCPUs (host/xen_core.rs, `cpu_offline`); this file keeps the pool's CPU mask,
//! the idlers, the master CPU, the pool credit, the tickers and the cached affinities right.
//!
//! # The eras
//!
//! * **4.20**: `deinit_pdata` takes the CPU's share out of the pool credit (`prv->credit` drops
//!   by `credits_per_tslice`, `prv->ncpus` by one), clears it from the idlers and the pool's
//!   CPUs, moves the master (the CPU holding the accounting timer) to the first CPU left if it
//!   was the master, moves its node's `balance_bias` off it and kills its ticker. `init_pdata`
//!   undoes that for a CPU coming back: its share is added, it idles (in the idlers), with an
//!   empty runqueue and a ticker armed one tick period from now. A cpupool may lose its last
//!   CPU (one without domains, before `xl cpupool-destroy`): `deinit_pdata` then kills the
//!   accounting timer, and `init_pdata` of the next CPU to join makes it the master and arms
//!   the timer again (docs/cpupools.md).
//! * **3.3** has no scheduler hook for a CPU going away: CPU offline existed only for S3
//!   suspend (`disable_nonboot_cpus`, with every other CPU idle and no vCPU migration), the boot
//!   CPU never went down, and a CPU coming back reused its per-CPU data, so
//!   `csched_pcpu_init` (the only place `csched_priv.credit` grows) did not run again. The
//!   pool credit therefore stays at its boot value whatever the online CPUs. The CPU pick and
//!   the stealer read `cpu_online_map`, so an offline CPU gets no vCPU. What 3.3 lacked is done
//!   as 4.20 does it (the core migrates the vCPUs; a master that goes offline hands its
//!   accounting duty to the first online CPU, unreachable from a scenario since pCPU 0 never
//!   goes offline). The ticker of the dead CPU stops; its pending expiry fires as soon as the
//!   CPU is back. Upstream the dead CPU stayed in the idlers (its last pick was idle); the model
//!   clears it, which changes nothing: the CPU pick and the stealer AND the idlers with the
//!   online CPUs, and the tickle with the vCPU's affinity (an IPI to the dead CPU upstream,
//!   which does nothing).

use vmsched_core::ids::{CpuId, EntityId};

use super::{Credit1, ACCT_TIMER};
use crate::host::xen_core::XenCtx;

impl Credit1 {
    /// Xen: csched_deinit_pdata + csched_free_pdata (4.20; 3.3: see the module doc). Every vCPU
    /// whose `processor` is `cpu` is already off its runqueue (the core's `sleep`); the one
    /// running there is charged up to now and its `schedule()` bookkeeping is done here (the
    /// core switches it out without the policy: upstream the stop_machine that precedes the
    /// removal switched it out through `csched_schedule`).
    pub(super) fn cpu_remove(&mut self, ctx: &mut XenCtx, cpu: CpuId) {
        assert!(
            self.online.contains(cpu),
            "credit1: CPU {} is not in the pool",
            cpu.0
        );
        let now = ctx.now() as i64;
        if let Some(c) = ctx.cpu(cpu).curr {
            if self.v.burns_exact_time() {
                self.burn_credits(c, now);
                self.units[c.idx()].start_time -= now;
            } else if self.exact_debit {
                // [seed 001] `schedule()`'s exact debit (ERRATA X13).
                self.burn_exact(c, now);
            }
            self.units[c.idx()].last_sched_time = now;
        }
        debug_assert!(
            self.pcpus[cpu.idx()].runq.is_empty(),
            "credit1: the core dequeued every vCPU of an offlined CPU"
        );
        let pc = &mut self.pcpus[cpu.idx()];
        pc.nr_runnable = 0;
        if self.v.has_master_timer() {
            self.credit -= self.credits_per_tslice;
        }
        self.online.remove(cpu);
        self.idlers.remove(cpu);
        if self.online.is_empty() {
            // A cpupool's last CPU (`xl cpupool-cpu-remove` of a pool without domains): the
            // accounting timer stops until a CPU joins again (cpu_add); no master meanwhile.
            ctx.set_timer(ACCT_TIMER, None);
        } else if self.master == cpu {
            self.master = self.online.first().expect("non-empty");
        }
        let node = self.node_of[cpu.idx()] as usize;
        if self.balance_bias[node] == cpu {
            if let Some(b) = self.node_mask[node].and(&self.online).first() {
                self.balance_bias[node] = b;
            }
        }
        ctx.set_timer(1 + cpu.0, None);
        self.refresh_affinities(ctx);
    }

    /// Xen: csched_alloc_pdata + csched_switch_sched → init_pdata (4.20; 3.3: see the module
    /// doc). `cpu` joins the pool idle, with an empty runqueue.
    pub(super) fn cpu_add(&mut self, ctx: &mut XenCtx, cpu: CpuId) {
        assert!(
            !self.online.contains(cpu),
            "credit1: CPU {} is already in the pool",
            cpu.0
        );
        let now = ctx.now() as i64;
        let v4 = self.v.has_master_timer();
        self.online.insert(cpu);
        if self.online.len() == 1 {
            // The first CPU of an empty cpupool (`xl cpupool-create`, then `cpupool-cpu-add`)
            // is its master; the accounting timer starts one timeslice from now, or at the
            // first vCPU's insert if none has been inserted yet.
            self.master = cpu;
            if v4 && self.started {
                ctx.set_timer(ACCT_TIMER, Some(now as u64 + self.tslice as u64));
            }
        }
        self.idlers.insert(cpu);
        let node = self.node_of[cpu.idx()] as usize;
        if self.node_mask[node].and(&self.online).len() == 1 {
            self.balance_bias[node] = cpu;
        }
        let n = self.pcpus.len() as u32;
        let runq_sort = self.runq_sort;
        let pc = &mut self.pcpus[cpu.idx()];
        debug_assert!(pc.runq.is_empty());
        pc.nr_runnable = 0;
        if v4 {
            self.credit += self.credits_per_tslice;
            // Fresh per-CPU data (xzalloc, then init_pdata).
            pc.tick = 0;
            pc.runq_sort_last = runq_sort;
            pc.idle_bias = CpuId(n - 1);
            pc.last_load_balance = now;
            ctx.set_timer(1 + cpu.0, Some((now + self.tick_period) as u64));
        } else {
            // The ticker's expiry passed while the CPU was down: it fires at once.
            ctx.set_timer(1 + cpu.0, Some(now as u64));
            if !self.tickle_on_wake {
                // ERRATA X6 switch: no wake will tickle it, so its idle vCPU takes a slice now
                // (as at bring-up, `insert_unit`) and looks for work at each slice end.
                ctx.resched(cpu);
            }
        }
        self.refresh_affinities(ctx);
    }

    /// Every vCPU's cached hard and soft affinity from its (possibly widened) parameters and
    /// the CPUs online now (Xen keeps the masks and ANDs them with the pool's CPUs where it
    /// reads them); `CSFLAG_UNIT_PINNED` follows the hard affinity as set (`csched_aff_cntl`).
    fn refresh_affinities(&mut self, ctx: &XenCtx) {
        for i in 0..self.units.len() {
            let p = &ctx.ent(EntityId(i as u32)).params;
            let hard = p.hard_affinity.and(&self.online);
            let soft = p.soft_affinity;
            let sh = soft.and(&hard);
            let has_soft = self.v.tickles_one_idler()
                && !sh.is_empty()
                && !hard.is_subset(&soft)
                && !self.online.is_subset(&soft);
            let u = &mut self.units[i];
            u.hard = hard;
            u.soft = soft;
            u.has_soft = has_soft;
            u.pinned = p.hard_affinity.len() == 1;
        }
    }
}
