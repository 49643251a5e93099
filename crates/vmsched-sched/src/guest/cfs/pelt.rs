//! Per-entity load tracking (PELT) as in **Linux v5.10** `kernel/sched/pelt.c`, `pelt.h` and the
//! PELT parts of `fair.c` (attach, detach, removed load, util_est), for the fair classes of the
//! Linux core. Written from the upstream formulas, in the same integer arithmetic so that the
//! numbers are a kernel's numbers.
//!
//! Time is cut into 1024 µs periods (the unit is 1024 ns, "about a µs"); a contribution `p`
//! periods old weighs `y^p` with `y^32 = 1/2`. `decay_load` multiplies by `y^n` with the 32-entry
//! table of `y^k · 2^32` (`sched-pelt.h`), halving once per 32 periods; the geometric series
//! converges to `LOAD_AVG_MAX` = 47742. A signal (`SchedAvg`) keeps three sums, updated at every
//! accounting point (`___update_load_sum`): `load_sum` (time runnable, to be scaled by weight),
//! `runnable_sum` (time runnable × number runnable × 1024) and `util_sum` (time running × 1024),
//! and their averages (`___update_load_avg`): the sum divided by the maximum a sum can have at
//! the current position in the period (`LOAD_AVG_MAX − 1024 + period_contrib`).
//!
//! The PELT clock is the run queue's `clock_task` (the model's CPUs all have capacity 1024 and a
//! fixed frequency, so `update_rq_clock_pelt` scales nothing); upstream's `lost_idle_time` (the
//! time a CPU whose util_sum is at its maximum spends idle) is not subtracted.

/// `LOAD_AVG_PERIOD`: y^32 = 0.5.
pub(crate) const LOAD_AVG_PERIOD: u64 = 32;
/// `LOAD_AVG_MAX`: the maximum of a PELT sum, 1024 · Σ y^n.
pub(crate) const LOAD_AVG_MAX: u64 = 47742;
/// `SCHED_CAPACITY_SHIFT` / `SCHED_CAPACITY_SCALE`.
pub(crate) const SCHED_CAPACITY_SHIFT: u32 = 10;
pub(crate) const SCHED_CAPACITY_SCALE: u64 = 1 << SCHED_CAPACITY_SHIFT;
/// `UTIL_AVG_UNCHANGED` as in 5.10 (the low bit of `util_est.enqueued`).
const UTIL_AVG_UNCHANGED: u32 = 0x1;
/// `UTIL_EST_WEIGHT_SHIFT`: the EWMA keeps 3/4 of the old value.
const UTIL_EST_WEIGHT_SHIFT: u32 = 2;

/// `runnable_avg_yN_inv[k]` = ⌊(2^32 − 1) · y^k⌋ for k < 32 (the generated `sched-pelt.h`; a
/// test recomputes it from y).
const RUNNABLE_AVG_YN_INV: [u32; 32] = [
    0xffffffff, 0xfa83b2da, 0xf5257d14, 0xefe4b99a, 0xeac0c6e6, 0xe5b906e6, 0xe0ccdeeb, 0xdbfbb796,
    0xd744fcc9, 0xd2a81d91, 0xce248c14, 0xc9b9bd85, 0xc5672a10, 0xc12c4cc9, 0xbd08a39e, 0xb8fbaf46,
    0xb504f333, 0xb123f581, 0xad583ee9, 0xa9a15ab4, 0xa5fed6a9, 0xa2704302, 0x9ef5325f, 0x9b8d39b9,
    0x9837f050, 0x94f4efa8, 0x91c3d373, 0x8ea4398a, 0x8b95c1e3, 0x88980e80, 0x85aac367, 0x82cd8698,
];

/// `struct util_est`: the task's utilisation when it last went to sleep (`enqueued`, with the
/// UTIL_AVG_UNCHANGED flag in its low bit) and a moving average of it (`ewma`); for a run queue,
/// `enqueued` is the sum over its queued tasks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UtilEst {
    pub(crate) enqueued: u32,
    pub(crate) ewma: u32,
}

/// Linux v5.10: struct sched_avg (of an entity or of a `cfs_rq`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SchedAvg {
    /// In ns of the PELT clock; 0 for an entity means "not attached" (upstream's convention).
    pub(crate) last_update_time: u64,
    pub(crate) load_sum: u64,
    pub(crate) runnable_sum: u64,
    pub(crate) util_sum: u64,
    pub(crate) period_contrib: u32,
    pub(crate) load_avg: u64,
    pub(crate) runnable_avg: u64,
    pub(crate) util_avg: u64,
    pub(crate) util_est: UtilEst,
}

/// The load of entities that left a run queue while asleep (migrated at wake-up), taken off at
/// the queue's next update. Linux v5.10: `cfs_rq->removed`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Removed {
    pub(crate) nr: u32,
    pub(crate) load_avg: u64,
    pub(crate) util_avg: u64,
    pub(crate) runnable_avg: u64,
}

/// Linux v5.10: decay_load: `val · y^n`.
#[inline]
pub(crate) fn decay_load(mut val: u64, n: u64) -> u64 {
    if n > LOAD_AVG_PERIOD * 63 {
        return 0;
    }
    let mut n = n as u32;
    if n as u64 >= LOAD_AVG_PERIOD {
        val >>= n / LOAD_AVG_PERIOD as u32;
        n %= LOAD_AVG_PERIOD as u32;
    }
    // mul_u64_u32_shr(val, inv, 32)
    ((val as u128 * RUNNABLE_AVG_YN_INV[n as usize] as u128) >> 32) as u64
}

/// Linux v5.10: __accumulate_pelt_segments: `d1·y^p + 1024·Σ_{n=1}^{p−1} y^n + d3`.
#[inline]
fn accumulate_pelt_segments(periods: u64, d1: u32, d3: u32) -> u32 {
    let c1 = decay_load(d1 as u64, periods) as u32;
    let c2 = (LOAD_AVG_MAX - decay_load(LOAD_AVG_MAX, periods) - 1024) as u32;
    c1 + c2 + d3
}

/// Linux v5.10: accumulate_sum, for an update that crosses at least one period boundary
/// (`delta` in 1024 ns units, `delta + period_contrib >= 1024`): the sums decay by the periods
/// crossed, then gain the three segments. Kept out of line (and cold): most updates stay inside
/// the current period and take the few additions of `update_load_sum` instead.
#[cold]
#[inline(never)]
fn accumulate_sum_periods(delta: u64, sa: &mut SchedAvg, load: u64, runnable: u64, running: bool) {
    let delta = delta + sa.period_contrib as u64;
    let periods = delta / 1024;
    sa.load_sum = decay_load(sa.load_sum, periods);
    sa.runnable_sum = decay_load(sa.runnable_sum, periods);
    sa.util_sum = decay_load(sa.util_sum, periods);
    let delta = delta % 1024;
    // With `load == 0` the contribution is unused (runnable and running are 0 too).
    let contrib = if load != 0 {
        accumulate_pelt_segments(periods, 1024 - sa.period_contrib, delta as u32)
    } else {
        0
    };
    sa.period_contrib = delta as u32;
    add_contrib(sa, contrib, load, runnable, running);
}

/// The contribution `contrib` added to the three sums (the end of upstream's accumulate_sum).
#[inline(always)]
fn add_contrib(sa: &mut SchedAvg, contrib: u32, load: u64, runnable: u64, running: bool) {
    if load != 0 {
        sa.load_sum += load * contrib as u64;
    }
    if runnable != 0 {
        sa.runnable_sum += (runnable * contrib as u64) << SCHED_CAPACITY_SHIFT;
    }
    if running {
        sa.util_sum += (contrib as u64) << SCHED_CAPACITY_SHIFT;
    }
}

/// Linux v5.10: ___update_load_sum. Returns whether a period boundary was crossed (then the
/// averages must be recomputed).
///
/// The common cases are handled here, inline: less than 1024 ns since the last update (no
/// change, upstream's `delta >> 10 == 0` exit), or the time stays within the current period
/// (`period_contrib` grows, the sums gain `delta`: upstream's accumulate_sum with no period
/// crossed). Crossing a boundary goes to [`accumulate_sum_periods`].
#[inline(always)]
pub(crate) fn update_load_sum(
    now: u64,
    sa: &mut SchedAvg,
    load: u64,
    mut runnable: u64,
    mut running: bool,
) -> bool {
    let delta = now.wrapping_sub(sa.last_update_time);
    if (delta as i64) < 0 {
        sa.last_update_time = now;
        return false;
    }
    let delta = delta >> 10;
    if delta == 0 {
        return false;
    }
    sa.last_update_time += delta << 10;
    if load == 0 {
        runnable = 0;
        running = false;
    }
    let in_period = delta + sa.period_contrib as u64;
    if in_period < 1024 {
        sa.period_contrib = in_period as u32;
        add_contrib(sa, delta as u32, load, runnable, running);
        return false;
    }
    accumulate_sum_periods(delta, sa, load, runnable, running);
    true
}

/// Linux v5.10: get_pelt_divider
#[inline]
pub(crate) fn pelt_divider(sa: &SchedAvg) -> u64 {
    LOAD_AVG_MAX - 1024 + sa.period_contrib as u64
}

/// Linux v5.10: ___update_load_avg
#[inline]
pub(crate) fn update_load_avg(sa: &mut SchedAvg, load: u64) {
    let divider = pelt_divider(sa);
    sa.load_avg = load * sa.load_sum / divider;
    sa.runnable_avg = sa.runnable_sum / divider;
    sa.util_avg = sa.util_sum / divider;
}

/// Linux v5.10: cfs_se_util_change (clears UTIL_AVG_UNCHANGED once util_avg moved).
#[inline]
fn se_util_change(sa: &mut SchedAvg) {
    sa.util_est.enqueued &= !UTIL_AVG_UNCHANGED;
}

/// A task entity's update. Linux v5.10: __update_load_avg_se (runnable = on_rq for a task).
#[inline]
pub(crate) fn update_se(now: u64, sa: &mut SchedAvg, on_rq: bool, running: bool, weight: u64) {
    if update_load_sum(now, sa, on_rq as u64, on_rq as u64, running) {
        se_period_end(sa, weight);
    }
}

/// A task entity's averages after a period boundary (the rare part of `update_se`, out of line).
#[cold]
#[inline(never)]
fn se_period_end(sa: &mut SchedAvg, weight: u64) {
    update_load_avg(sa, weight);
    se_util_change(sa);
}

/// A sleeping entity decayed to `now`. Linux v5.10: __update_load_avg_blocked_se
#[inline]
pub(crate) fn update_blocked_se(now: u64, sa: &mut SchedAvg, weight: u64) {
    if update_load_sum(now, sa, 0, 0, false) {
        update_load_avg(sa, weight);
    }
}

/// A run queue's update: its load is its queued weight, runnable its number of tasks.
/// Linux v5.10: __update_load_avg_cfs_rq
#[inline]
pub(crate) fn update_cfs_rq(now: u64, sa: &mut SchedAvg, weight: u64, nr: u32, curr: bool) -> bool {
    if update_load_sum(now, sa, weight, nr as u64, curr) {
        rq_period_end(sa);
        return true;
    }
    false
}

/// A run queue's averages after a period boundary (the rare part of `update_cfs_rq`, out of
/// line).
#[cold]
#[inline(never)]
fn rq_period_end(sa: &mut SchedAvg) {
    update_load_avg(sa, 1);
}

/// `*a -= b` floored at 0. Linux: sub_positive
#[inline]
fn sub_positive(a: &mut u64, b: u64) {
    *a = a.saturating_sub(b);
}

/// Takes the removed load off, then updates the queue's sums. Linux v5.10:
/// update_cfs_rq_load_avg
#[inline(always)]
pub(crate) fn update_cfs_rq_load_avg(
    now: u64,
    sa: &mut SchedAvg,
    removed: &mut Removed,
    weight: u64,
    nr: u32,
    curr: bool,
) -> bool {
    let mut decayed = false;
    if removed.nr != 0 {
        take_removed(sa, removed);
        decayed = true;
    }
    decayed | update_cfs_rq(now, sa, weight, nr, curr)
}

/// The load of entities that left asleep taken off the queue's signal (the rare part of
/// `update_cfs_rq_load_avg`, out of line).
#[cold]
#[inline(never)]
fn take_removed(sa: &mut SchedAvg, removed: &mut Removed) {
    let divider = pelt_divider(sa);
    let r = std::mem::take(removed);
    sub_positive(&mut sa.load_avg, r.load_avg);
    sub_positive(&mut sa.load_sum, r.load_avg * divider);
    sub_positive(&mut sa.util_avg, r.util_avg);
    sub_positive(&mut sa.util_sum, r.util_avg * divider);
    sub_positive(&mut sa.runnable_avg, r.runnable_avg);
    sub_positive(&mut sa.runnable_sum, r.runnable_avg * divider);
}

/// Aligns the entity on the queue's period and adds it. Linux v5.10: attach_entity_load_avg
pub(crate) fn attach(rq: &mut SchedAvg, se: &mut SchedAvg, weight: u64) {
    let divider = pelt_divider(rq);
    se.last_update_time = rq.last_update_time;
    se.period_contrib = rq.period_contrib;
    se.util_sum = se.util_avg * divider;
    se.runnable_sum = se.runnable_avg * divider;
    se.load_sum = (se.load_avg * divider)
        .checked_div(weight)
        .unwrap_or(divider);
    rq.load_avg += se.load_avg;
    rq.load_sum += weight * se.load_sum;
    rq.util_avg += se.util_avg;
    rq.util_sum += se.util_sum;
    rq.runnable_avg += se.runnable_avg;
    rq.runnable_sum += se.runnable_sum;
}

/// Linux v5.10: detach_entity_load_avg
pub(crate) fn detach(rq: &mut SchedAvg, se: &SchedAvg, weight: u64) {
    sub_positive(&mut rq.load_avg, se.load_avg);
    sub_positive(&mut rq.load_sum, weight * se.load_sum);
    sub_positive(&mut rq.util_avg, se.util_avg);
    sub_positive(&mut rq.util_sum, se.util_sum);
    sub_positive(&mut rq.runnable_avg, se.runnable_avg);
    sub_positive(&mut rq.runnable_sum, se.runnable_sum);
}

/// Records a sleeping entity that leaves the queue (wake-up migration): decayed to the queue's
/// last update, its averages go to `removed`. Linux v5.10: remove_entity_load_avg
pub(crate) fn remove(rq: &SchedAvg, removed: &mut Removed, se: &mut SchedAvg, weight: u64) {
    update_blocked_se(rq.last_update_time, se, weight);
    removed.nr += 1;
    removed.util_avg += se.util_avg;
    removed.load_avg += se.load_avg;
    removed.runnable_avg += se.runnable_avg;
}

/// A task's weight changes: its load average is recomputed from its sum at the new weight.
/// Linux v5.10: reweight_entity (dequeue_load_avg, the new `load_avg`, enqueue_load_avg)
pub(crate) fn reweight(rq: &mut SchedAvg, se: &mut SchedAvg, old_weight: u64, weight: u64) {
    sub_positive(&mut rq.load_avg, se.load_avg);
    sub_positive(&mut rq.load_sum, old_weight * se.load_sum);
    se.load_avg = weight * se.load_sum / pelt_divider(se);
    rq.load_avg += se.load_avg;
    rq.load_sum += weight * se.load_sum;
}

/// A new task's first utilisation, from its queue's. Linux v5.10: post_init_entity_util_avg
/// (`scaled_weight` is `se->load.weight`, which a 64-bit kernel keeps scaled up by 1024).
pub(crate) fn post_init_util(rq: &SchedAvg, se: &mut SchedAvg, scaled_weight: u64) {
    let cap = (SCHED_CAPACITY_SCALE as i64 - rq.util_avg as i64) / 2;
    if cap > 0 {
        if rq.util_avg != 0 {
            se.util_avg = (rq.util_avg * scaled_weight / (rq.load_avg + 1)).min(cap as u64);
        } else {
            se.util_avg = cap as u64;
        }
    }
    se.runnable_avg = se.util_avg;
}

/// Linux v5.10: _task_util_est
#[inline]
pub(crate) fn task_util_est_raw(se: &SchedAvg) -> u32 {
    se.util_est.ewma.max(se.util_est.enqueued) | UTIL_AVG_UNCHANGED
}

/// Linux v5.10: task_util_est
#[inline]
pub(crate) fn task_util_est(se: &SchedAvg) -> u64 {
    se.util_avg.max(task_util_est_raw(se) as u64)
}

/// Linux v5.10: util_est_enqueue
#[inline]
pub(crate) fn util_est_enqueue(rq: &mut SchedAvg, se: &SchedAvg) {
    rq.util_est.enqueued = rq.util_est.enqueued.wrapping_add(task_util_est_raw(se));
}

/// Linux v5.10 (5.10.13): util_est_dequeue, with the task's own update when it goes to sleep.
pub(crate) fn util_est_dequeue(rq: &mut SchedAvg, se: &mut SchedAvg, task_sleep: bool) {
    let q = rq.util_est.enqueued;
    rq.util_est.enqueued = q - q.min(task_util_est_raw(se));
    if !task_sleep {
        return;
    }
    let mut ue = se.util_est;
    if ue.enqueued & UTIL_AVG_UNCHANGED != 0 {
        return;
    }
    ue.enqueued = se.util_avg as u32 | UTIL_AVG_UNCHANGED;
    // UTIL_EST_FASTUP
    if ue.ewma < ue.enqueued {
        ue.ewma = ue.enqueued;
        se.util_est = ue;
        return;
    }
    let diff = ue.enqueued as i64 - ue.ewma as i64;
    let margin = (SCHED_CAPACITY_SCALE / 100) as i64;
    // within_margin
    if diff.abs() < margin {
        return;
    }
    if se.util_avg > SCHED_CAPACITY_SCALE {
        return;
    }
    let ewma = ((ue.ewma as i64) << UTIL_EST_WEIGHT_SHIFT) + diff;
    ue.ewma = (ewma >> UTIL_EST_WEIGHT_SHIFT) as u32;
    se.util_est = ue;
}

/// A run queue's PELT state: its signal and the load of tasks that left it asleep.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RqAvg {
    pub(crate) avg: SchedAvg,
    pub(crate) removed: Removed,
}

/// What a run queue's signal accumulates at an update: `cfs_rq->load.weight` (unscaled),
/// `h_nr_running`, and whether a fair task is current.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RqLoad {
    pub(crate) weight: u64,
    pub(crate) nr: u32,
    pub(crate) curr: bool,
}

/// A task entity's PELT state as its class sees it at an update.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SeLoad {
    pub(crate) on_rq: bool,
    pub(crate) running: bool,
    pub(crate) weight: u64,
}

impl RqAvg {
    /// The entity's and the queue's signals brought to `now`; a detached entity
    /// (`last_update_time == 0`) is attached when `attach` (DO_ATTACH), after
    /// `post_init_entity_util_avg` if it is a new task (`*fresh`). Linux v5.10: update_load_avg
    /// (tasks only: no group propagation).
    #[inline]
    pub(crate) fn update_load_avg(
        &mut self,
        now: u64,
        rq: RqLoad,
        se: &mut SchedAvg,
        s: SeLoad,
        do_attach: bool,
        fresh: &mut bool,
    ) {
        if se.last_update_time != 0 {
            update_se(now, se, s.on_rq, s.running, s.weight);
        }
        update_cfs_rq_load_avg(
            now,
            &mut self.avg,
            &mut self.removed,
            rq.weight,
            rq.nr,
            rq.curr,
        );
        if se.last_update_time == 0 && do_attach {
            self.attach_entity(se, s.weight, fresh);
        }
    }

    /// A detached entity attached at its enqueue, after `post_init_entity_util_avg` if it is a
    /// new task (the rare part of `update_load_avg`, out of line).
    #[cold]
    #[inline(never)]
    fn attach_entity(&mut self, se: &mut SchedAvg, weight: u64, fresh: &mut bool) {
        if std::mem::take(fresh) {
            post_init_util(&self.avg, se, weight << SCHED_CAPACITY_SHIFT);
        }
        attach(&mut self.avg, se, weight);
    }

    /// The queue's own signal brought to `now` (upstream: update_blocked_averages, what an
    /// idle CPU's balancing does for its queue).
    #[inline]
    pub(crate) fn update_blocked(&mut self, now: u64, rq: RqLoad) {
        update_cfs_rq_load_avg(
            now,
            &mut self.avg,
            &mut self.removed,
            rq.weight,
            rq.nr,
            rq.curr,
        );
    }

    /// `e` leaves this queue while runnable (balancing, hot-plug): its signal comes off now and
    /// it is attached again where it is enqueued. Linux v5.10: detach_entity_cfs_rq
    #[inline]
    pub(crate) fn detach_entity(&mut self, se: &mut SchedAvg, weight: u64) {
        detach(&mut self.avg, se, weight);
        se.last_update_time = 0;
    }

    /// `e` leaves this queue asleep (a wake-up elsewhere, or it exited). Linux v5.10:
    /// migrate_task_rq_fair → remove_entity_load_avg
    #[inline]
    pub(crate) fn remove_entity(&mut self, se: &mut SchedAvg, weight: u64) {
        remove(&self.avg, &mut self.removed, se, weight);
        se.last_update_time = 0;
    }
}
