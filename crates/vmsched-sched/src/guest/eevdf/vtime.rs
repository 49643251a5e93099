//! EEVDF's virtual time (Linux 6.x `kernel/sched/fair.c`; facts only, our own code): the
//! queue's average vruntime V kept as upstream keeps it (`avg_vruntime`, `avg_load`,
//! `entity_key`, `update_min_vruntime`), lag (`entity_lag`, clamped) and eligibility
//! (`vruntime_eligible`, exact), and the deadline-ordered queue that stands for the augmented
//! rbtree (`__enqueue_entity`, `__dequeue_entity`).

use super::{before, calc_delta_fair, min_v, vdiff, Eevdf};

impl Eevdf {
    // --- V, lag, eligibility -------------------------------------------------------------------

    /// Linux 6.x: entity_key
    #[inline]
    pub(super) fn entity_key(&self, cpu: usize, v: u64) -> i64 {
        vdiff(v, self.rqs[cpu].min_vruntime)
    }

    /// The sums with the running entity added on the fly.
    #[inline]
    pub(super) fn sums(&self, cpu: usize) -> (i64, i64) {
        let rq = &self.rqs[cpu];
        let (mut avg, mut load) = (rq.avg_vruntime, rq.avg_load);
        if let Some(c) = rq.curr.filter(|&c| self.ses[c].on_rq) {
            let w = self.ses[c].load.weight as i64;
            avg = avg.wrapping_add(self.entity_key(cpu, self.ses[c].vruntime).wrapping_mul(w));
            load += w;
        }
        (avg, load)
    }

    /// V, rounded toward −∞. Linux 6.x: avg_vruntime
    pub(super) fn avg_vruntime(&self, cpu: usize) -> u64 {
        let (mut avg, load) = self.sums(cpu);
        if load != 0 {
            if avg < 0 {
                avg -= load - 1;
            }
            avg /= load;
        }
        self.rqs[cpu].min_vruntime.wrapping_add(avg as u64)
    }

    /// `v ≤ V`, without the division. Linux 6.x: vruntime_eligible
    #[inline]
    pub(super) fn vruntime_eligible(&self, cpu: usize, v: u64) -> bool {
        let (avg, load) = self.sums(cpu);
        avg >= self.entity_key(cpu, v).wrapping_mul(load)
    }

    /// Linux 6.x: entity_eligible
    #[inline]
    pub(super) fn entity_eligible(&self, cpu: usize, e: usize) -> bool {
        self.vruntime_eligible(cpu, self.ses[e].vruntime)
    }

    /// `V − vruntime`, clamped to ±calc_delta_fair(max(2·slice, TICK_NSEC)). Linux 6.6–6.18:
    /// entity_lag
    pub(super) fn entity_lag(&self, v_avg: u64, e: usize) -> i64 {
        let se = &self.ses[e];
        let limit = calc_delta_fair((2 * se.slice).max(self.tick_ns), se.load) as i64;
        vdiff(v_avg, se.vruntime).clamp(-limit, limit)
    }

    /// Linux 6.x: update_entity_lag
    pub(super) fn update_entity_lag(&mut self, cpu: usize, e: usize) {
        self.ses[e].vlag = self.entity_lag(self.avg_vruntime(cpu), e);
    }

    /// Linux 6.x: update_min_vruntime (with __update_min_vruntime's shift of the sum)
    pub(super) fn update_min_vruntime(&mut self, cpu: usize) {
        let rq = &self.rqs[cpu];
        let curr = rq.curr.filter(|&c| self.ses[c].on_rq);
        let mut v = rq.min_vruntime;
        if let Some(c) = curr {
            v = self.ses[c].vruntime;
        }
        let mut tree_min: Option<u64> = None;
        for &x in &rq.queue {
            let xv = self.ses[x].vruntime;
            tree_min = Some(tree_min.map_or(xv, |m| min_v(m, xv)));
        }
        if let Some(m) = tree_min {
            v = if curr.is_none() { m } else { min_v(v, m) };
        }
        let rq = &mut self.rqs[cpu];
        let delta = vdiff(v, rq.min_vruntime);
        if delta > 0 {
            rq.avg_vruntime = rq
                .avg_vruntime
                .wrapping_sub(rq.avg_load.wrapping_mul(delta));
            rq.min_vruntime = v;
        }
    }

    // --- the queue (the rbtree) ----------------------------------------------------------------

    /// Linux 6.x: __enqueue_entity (avg_vruntime_add, insertion by deadline)
    pub(super) fn queue_insert(&mut self, cpu: usize, e: usize) {
        let key = self.entity_key(cpu, self.ses[e].vruntime);
        let w = self.ses[e].load.weight as i64;
        let d = self.ses[e].deadline;
        let ses = &self.ses;
        let rq = &mut self.rqs[cpu];
        rq.avg_vruntime = rq.avg_vruntime.wrapping_add(key.wrapping_mul(w));
        rq.avg_load += w;
        let at = rq.queue.partition_point(|&x| !before(d, ses[x].deadline));
        rq.queue.insert(at, e);
    }

    /// Linux 6.x: __dequeue_entity (avg_vruntime_sub)
    pub(super) fn queue_remove(&mut self, cpu: usize, e: usize) {
        let key = self.entity_key(cpu, self.ses[e].vruntime);
        let w = self.ses[e].load.weight as i64;
        let rq = &mut self.rqs[cpu];
        let at = rq
            .queue
            .iter()
            .position(|&x| x == e)
            .expect("queue_remove: entity is queued");
        rq.queue.remove(at);
        rq.avg_vruntime = rq.avg_vruntime.wrapping_sub(key.wrapping_mul(w));
        rq.avg_load -= w;
    }
}
