//! Credit2 runqueues: which CPUs share one (the `credit2_runqueue=` arrangement, built once
//! at boot), the SMT idleness masks and `cpumask_cycle` helpers the tickle and placement code
//! walk, the assignment of vCPUs to a runqueue (which sets its `max_weight`), and the
//! credit-sorted list of queued vCPUs.

use vmsched_core::cpuset::CpuSet;
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::CpuTopo;

use super::{Credit2, Runqueue, RunqueueArrangement};

impl Credit2 {
    // ---------------------------------------------------------------------------------------
    // Runqueue arrangement
    // ---------------------------------------------------------------------------------------

    fn topo_siblings(cpus: &[CpuTopo], c: usize) -> CpuSet {
        let t = cpus[c];
        let mut m = CpuSet::single(CpuId(c as u32));
        for (d, o) in cpus.iter().enumerate() {
            if o.socket == t.socket && o.core == t.core && o.thread != t.thread {
                m.insert(CpuId(d as u32));
            }
        }
        m
    }

    /// Xen: cpu_add_to_runqueue (with cpu_runqueue_match and cpu_runqueue_siblings_match).
    pub(super) fn cpu_add_to_runqueue(
        &mut self,
        cpus: &[CpuTopo],
        cpu: usize,
        max_per_rq: u32,
    ) -> usize {
        if self.v42 {
            return self.cpu_add_to_runqueue_4_2(cpus, cpu);
        }
        let (t, sibs) = (cpus[cpu], Self::topo_siblings(cpus, cpu));
        let mut valid: Option<usize> = None;
        for (i, rq) in self.rqs.iter().enumerate() {
            if rq.refcnt == 0 {
                continue; // freed when its last CPU went offline (credit2/hotplug.rs)
            }
            let peer = cpus[rq.pick_bias.idx()];
            let matches = match self.params.runqueue {
                RunqueueArrangement::Cpu => false,
                RunqueueArrangement::Core => peer.socket == t.socket && peer.core == t.core,
                RunqueueArrangement::Socket => peer.socket == t.socket,
                RunqueueArrangement::Node => peer.node == t.node,
                RunqueueArrangement::All => true,
            };
            if !matches {
                continue;
            }
            if !rq.active.and(&sibs).is_empty() {
                valid = Some(i);
                break;
            }
            let room = {
                let (mut counted, mut tot) = (CpuSet::empty(), 0);
                for r in rq.active.iter() {
                    let rs = Self::topo_siblings(cpus, r.idx());
                    if rs.and(&counted).is_empty() {
                        counted = union(counted, &rs);
                        tot += rs.len();
                    }
                }
                tot + sibs.len() <= max_per_rq as usize
            };
            let better = match valid {
                None => true,
                Some(v) => rq.refcnt < self.rqs[v].refcnt,
            };
            if rq.refcnt < max_per_rq && room && better {
                valid = Some(i);
            }
        }
        // A new runqueue takes the first free index (upstream: the first unused id).
        let free = self.rqs.iter().position(|rq| rq.refcnt == 0);
        let r = valid.or(free).unwrap_or_else(|| {
            self.rqs.push(empty_runqueue(cpu));
            self.rqs.len() - 1
        });
        self.rqs[r].refcnt += 1;
        r
    }

    /// Xen 4.2.1: init_pcpu's choice. The runqueue id is the CPU's socket (CPU 0 always
    /// runqueue 0); runqueues are indexed by that id, so sockets without online CPUs leave
    /// empty slots that placement and balancing skip.
    fn cpu_add_to_runqueue_4_2(&mut self, cpus: &[CpuTopo], cpu: usize) -> usize {
        let r = if cpu == 0 {
            0
        } else {
            cpus[cpu].socket as usize
        };
        while self.rqs.len() <= r {
            self.rqs.push(empty_runqueue(cpu));
        }
        self.rqs[r].refcnt += 1;
        r
    }

    /// Xen: init_cpu_runqueue
    pub(super) fn init_cpu_runqueue(&mut self, cpus: &[CpuTopo], cpu: usize, r: usize) {
        let c = CpuId(cpu as u32);
        self.cpu_rq[cpu] = r;
        self.sibling_mask[cpu] = CpuSet::single(c);
        if self.rqs[r].nr_cpus > 0 {
            for s in Self::topo_siblings(cpus, cpu).iter() {
                if self.rqs[r].active.contains(s) {
                    self.sibling_mask[s.idx()].insert(c);
                    self.sibling_mask[cpu].insert(s);
                }
            }
        }
        let rq = &mut self.rqs[r];
        if rq.nr_cpus == 0 {
            // Xen: the first CPU activates the runqueue (a freed one is empty again).
            debug_assert!(rq.runq.is_empty() && rq.svc.is_empty() && rq.active.is_empty());
            rq.max_weight = 1;
            rq.load = 0;
            rq.load_last_update = 0;
            rq.avgload = 0;
            rq.b_avgload = 0;
            rq.idle = CpuSet::empty();
            rq.tickled = CpuSet::empty();
            rq.smt_idle = CpuSet::empty();
        }
        rq.idle.insert(c);
        rq.active.insert(c);
        rq.smt_idle.insert(c);
        rq.nr_cpus += 1;
        if rq.nr_cpus == 1 {
            rq.pick_bias = c;
        }
    }

    // ---------------------------------------------------------------------------------------
    // CPU masks and SMT idleness
    // ---------------------------------------------------------------------------------------

    /// Xen `cpumask_cycle`: the first member of `m` after `n`, wrapping.
    #[inline]
    pub(super) fn cycle(&self, n: CpuId, m: &CpuSet) -> Option<CpuId> {
        m.cycle(n)
    }

    /// Xen: smt_idle_mask_set, with the idlers upstream's callers pass (the runqueue's idle
    /// CPUs not tickled), tested without building that set.
    pub(super) fn smt_idle_mask_set(&mut self, r: usize, cpu: CpuId) {
        let sibs = &self.sibling_mask[cpu.idx()];
        let rq = &self.rqs[r];
        if sibs.is_subset_of_minus(&rq.idle, &rq.tickled) {
            self.rqs[r].smt_idle.or_with(sibs);
        }
    }

    /// Xen: smt_idle_mask_clear
    pub(super) fn smt_idle_mask_clear(&mut self, r: usize, cpu: CpuId) {
        let sibs = &self.sibling_mask[cpu.idx()];
        if sibs.is_subset(&self.rqs[r].smt_idle) {
            self.rqs[r].smt_idle.minus_with(sibs);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Runqueue assignment and the runqueue list
    // ---------------------------------------------------------------------------------------

    /// Xen: update_max_weight
    pub(super) fn update_max_weight(&mut self, r: usize, new_weight: i64, old_weight: i64) {
        if new_weight > self.rqs[r].max_weight {
            self.rqs[r].max_weight = new_weight;
        } else if old_weight == self.rqs[r].max_weight {
            let m = self.rqs[r]
                .svc
                .iter()
                .map(|e| self.units[e.idx()].weight)
                .max();
            self.rqs[r].max_weight = m.unwrap_or(1).max(1);
        }
    }

    /// Xen: _runq_assign
    pub(super) fn runq_assign(&mut self, e: EntityId, r: usize) {
        let u = &mut self.units[e.idx()];
        u.rq = r;
        let (w, avg) = (u.weight, u.avgload);
        self.rqs[r].svc.push(e);
        self.update_max_weight(r, w, 0);
        self.rqs[r].b_avgload += avg;
    }

    /// Xen: _runq_deassign
    pub(super) fn runq_deassign(&mut self, e: EntityId) {
        let u = &self.units[e.idx()];
        let (r, w, avg) = (u.rq, u.weight, u.avgload);
        let pos = self.rqs[r].svc.iter().position(|x| *x == e);
        self.rqs[r]
            .svc
            .remove(pos.expect("credit2: a vCPU is on its runqueue's svc list"));
        self.update_max_weight(r, 0, w);
        self.rqs[r].b_avgload -= avg;
        if !self.v42 {
            self.rqs[r].b_avgload = self.rqs[r].b_avgload.max(0);
        }
    }

    /// Xen: runq_insert
    pub(super) fn runq_insert(&mut self, e: EntityId) {
        let u = &self.units[e.idx()];
        debug_assert!(
            !u.on_runq && !u.scheduled,
            "credit2: runq_insert of a queued or running vCPU"
        );
        let (r, credit) = (u.rq, u.credit);
        let units = &self.units;
        let pos = self.rqs[r]
            .runq
            .iter()
            .position(|x| credit > units[x.idx()].credit);
        let runq = &mut self.rqs[r].runq;
        runq.insert(pos.unwrap_or(runq.len()), e);
        self.units[e.idx()].on_runq = true;
    }

    /// Xen: runq_remove
    pub(super) fn runq_remove(&mut self, e: EntityId) {
        let r = self.units[e.idx()].rq;
        let pos = self.rqs[r].runq.iter().position(|x| *x == e);
        self.rqs[r]
            .runq
            .remove(pos.expect("credit2: runq_remove of a vCPU that is not queued"));
        self.units[e.idx()].on_runq = false;
    }
}

/// A runqueue with no CPU and no vCPU yet.
fn empty_runqueue(cpu: usize) -> Runqueue {
    Runqueue {
        runq: Vec::new(),
        svc: Vec::new(),
        refcnt: 0,
        nr_cpus: 0,
        active: CpuSet::empty(),
        idle: CpuSet::empty(),
        tickled: CpuSet::empty(),
        smt_idle: CpuSet::empty(),
        load: 0,
        load_last_update: 0,
        avgload: 0,
        b_avgload: 0,
        max_weight: 1,
        pick_bias: CpuId(cpu as u32),
    }
}

/// `a ∪ b`.
fn union(mut a: CpuSet, b: &CpuSet) -> CpuSet {
    let mut b = *b;
    while let Some(c) = b.first() {
        b.remove(c);
        a.insert(c);
    }
    a
}
