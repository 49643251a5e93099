//! PELT (`cfs/pelt.rs`) against numbers computed from the upstream formulas: y^32 = 1/2, a sum
//! of 1024-µs periods; a signal always on converges to 1024·(1 − y^n), a half-on one to half of
//! that, and a sleeper's signal halves every 32 periods.

use crate::guest::cfs::pelt::{self, SchedAvg};

/// One PELT period in ns (1024 units of 1024 ns).
const PERIOD_NS: u64 = 1024 * 1024;

fn y() -> f64 {
    0.5f64.powf(1.0 / 32.0)
}

#[test]
fn the_decay_table_is_y_to_the_k_times_2_to_the_32() {
    for k in 0..32u64 {
        let exact = ((1u64 << 32) - 1) as f64 * y().powi(k as i32);
        let table = pelt::decay_load(1 << 32, k) as f64;
        // decay_load(2^32, k) = table[k] (the multiply by 2^32 then >> 32 is exact).
        assert!((table - exact).abs() <= 1.0, "k = {k}: {table} vs {exact}");
    }
}

#[test]
fn decay_halves_every_32_periods_and_ends_after_2016() {
    assert_eq!(pelt::decay_load(1 << 20, 32), (1 << 19) - 1);
    assert_eq!(pelt::decay_load(1 << 20, 64), (1 << 18) - 1);
    let d = pelt::decay_load(1_000_000, 16) as f64;
    assert!((d - 1_000_000.0 * y().powi(16)).abs() <= 1.0, "{d}");
    assert_eq!(pelt::decay_load(u32::MAX as u64, 32 * 63 + 1), 0);
}

/// Runs an entity always on (`on`) or never from `from` for `periods` whole periods, updated at
/// every period boundary, as `update_load_avg` at each tick would.
fn run(sa: &mut SchedAvg, from: u64, periods: u64, on: bool) -> u64 {
    let mut t = from;
    for _ in 0..periods {
        t += PERIOD_NS;
        pelt::update_se(t, sa, on, on, 1024);
    }
    t
}

#[test]
fn a_task_running_all_the_time_converges_to_1024_times_1_minus_y_n() {
    for n in [1u64, 4, 16, 32, 100, 345] {
        let mut sa = SchedAvg::default();
        run(&mut sa, 0, n, true);
        let want = 1024.0 * (1.0 - y().powi(n as i32));
        for (what, got) in [
            ("util", sa.util_avg),
            ("load", sa.load_avg),
            ("runnable", sa.runnable_avg),
        ] {
            assert!(
                (got as f64 - want).abs() <= 3.0,
                "{what} after {n} periods: {got}, formula {want:.1}"
            );
        }
    }
}

#[test]
fn a_task_running_half_of_every_period_converges_to_half() {
    let mut sa = SchedAvg::default();
    let mut t = 0;
    let n = 400;
    for _ in 0..n {
        t += PERIOD_NS / 2;
        pelt::update_se(t, &mut sa, true, true, 1024); // ran the first half
        t += PERIOD_NS / 2;
        pelt::update_se(t, &mut sa, false, false, 1024); // slept the second
    }
    // Each completed period contributes 512 decayed by one more period: 512·(1 − y^n).
    let want = 512.0 * (1.0 - y().powi(n));
    assert!(
        (sa.util_avg as f64 - want).abs() <= 3.0,
        "{} vs {want:.1}",
        sa.util_avg
    );
}

#[test]
fn a_sleeping_task_decays_by_half_every_32_periods() {
    let mut sa = SchedAvg::default();
    let t = run(&mut sa, 0, 1000, true);
    let full = sa.util_avg as f64;
    pelt::update_blocked_se(t + 32 * PERIOD_NS, &mut sa, 1024);
    assert!(
        (sa.util_avg as f64 - full / 2.0).abs() <= 2.0,
        "{} vs {}",
        sa.util_avg,
        full / 2.0
    );
    pelt::update_blocked_se(t + 64 * PERIOD_NS, &mut sa, 1024);
    assert!(
        (sa.util_avg as f64 - full / 4.0).abs() <= 2.0,
        "{}",
        sa.util_avg
    );
    assert!(
        (sa.load_avg as f64 - full / 4.0).abs() <= 2.0,
        "{}",
        sa.load_avg
    );
}

#[test]
fn less_than_a_microsecond_changes_nothing_and_load_is_weighted() {
    let mut sa = SchedAvg::default();
    assert!(!pelt::update_load_sum(1023, &mut sa, 1, 1, true));
    assert_eq!(sa.last_update_time, 0);
    let mut heavy = SchedAvg::default();
    let mut t = 0;
    for _ in 0..1000 {
        t += PERIOD_NS;
        pelt::update_se(t, &mut heavy, true, true, 2048);
    }
    // load_avg = weight · load_sum / divider; util_avg ignores the weight.
    assert!(
        heavy.load_avg > 2 * 1000 && heavy.load_avg <= 2048,
        "{}",
        heavy.load_avg
    );
    assert!(heavy.util_avg <= 1024 && heavy.util_avg > 1000);
}

#[test]
fn attach_then_detach_leaves_the_queue_as_it_was() {
    let mut rq = SchedAvg {
        last_update_time: 5 * PERIOD_NS + 300 * 1024,
        period_contrib: 300,
        ..Default::default()
    };
    let mut se = SchedAvg {
        load_avg: 700,
        util_avg: 600,
        runnable_avg: 650,
        ..Default::default()
    };
    pelt::attach(&mut rq, &mut se, 1024);
    assert_eq!(se.last_update_time, rq.last_update_time);
    assert_eq!((rq.load_avg, rq.util_avg, rq.runnable_avg), (700, 600, 650));
    // The sums are the averages times the divider at this point of the period.
    assert_eq!(se.util_sum, 600 * (pelt::LOAD_AVG_MAX - 1024 + 300));
    pelt::detach(&mut rq, &se, 1024);
    assert_eq!((rq.load_avg, rq.util_avg, rq.runnable_avg), (0, 0, 0));
    assert_eq!((rq.load_sum, rq.util_sum, rq.runnable_sum), (0, 0, 0));
}

#[test]
fn removed_load_leaves_at_the_next_update_of_the_old_queue() {
    let mut rq = SchedAvg::default();
    let mut removed = pelt::Removed::default();
    let mut se = SchedAvg::default();
    let t = run(&mut se, 0, 200, true);
    rq.last_update_time = t;
    pelt::attach(&mut rq, &mut se, 1024);
    let before = rq.load_avg;
    pelt::remove(&rq, &mut removed, &mut se, 1024);
    assert_eq!(rq.load_avg, before, "removal is deferred");
    pelt::update_cfs_rq_load_avg(t + 10, &mut rq, &mut removed, 0, 0, false);
    assert_eq!(rq.load_avg, 0);
    assert_eq!(removed, pelt::Removed::default());
}

#[test]
fn util_est_keeps_the_peak_and_decays_by_a_quarter() {
    let mut rq = SchedAvg::default();
    let mut se = SchedAvg {
        util_avg: 400,
        ..Default::default()
    };
    pelt::util_est_enqueue(&mut rq, &se);
    pelt::util_est_dequeue(&mut rq, &mut se, true);
    // UTIL_EST_FASTUP: the ewma jumps up to the new sample (with the low flag bit).
    assert_eq!(se.util_est.enqueued, 401);
    assert_eq!(se.util_est.ewma, 401);
    assert_eq!(rq.util_est.enqueued, 0);
    // No util_avg update since: the sample is not taken again.
    se.util_avg = 100;
    pelt::util_est_dequeue(&mut rq, &mut se, true);
    assert_eq!(se.util_est.ewma, 401);
    // After an update (the flag cleared), the ewma moves a quarter of the way down.
    se.util_est.enqueued &= !1;
    pelt::util_est_dequeue(&mut rq, &mut se, true);
    assert_eq!(se.util_est.enqueued, 101);
    assert_eq!(se.util_est.ewma, (401 * 4 - 300) / 4);
    assert_eq!(pelt::task_util_est(&se), 326 | 1);
}

#[test]
fn a_new_task_starts_at_half_the_spare_capacity() {
    let rq = SchedAvg::default();
    let mut se = SchedAvg::default();
    pelt::post_init_util(&rq, &mut se, 1024 << 10);
    assert_eq!((se.util_avg, se.runnable_avg), (512, 512));
    let busy = SchedAvg {
        util_avg: 800,
        load_avg: 1000,
        ..Default::default()
    };
    pelt::post_init_util(&busy, &mut se, 1024 << 10);
    assert_eq!(se.util_avg, 112);
}

/// Upstream's ___update_load_sum written in one piece (accumulate_sum with its period branch
/// inline), as the model had it before the common in-period case was split off
/// (`update_load_sum`'s fast path and the out-of-line `accumulate_sum_periods`).
fn reference_update_load_sum(
    now: u64,
    sa: &mut SchedAvg,
    load: u64,
    runnable: u64,
    running: bool,
) -> bool {
    let delta = now.wrapping_sub(sa.last_update_time);
    if (delta as i64) < 0 {
        sa.last_update_time = now;
        return false;
    }
    let mut delta = delta >> 10;
    if delta == 0 {
        return false;
    }
    sa.last_update_time += delta << 10;
    let (runnable, running) = if load == 0 {
        (0, false)
    } else {
        (runnable, running)
    };
    let mut contrib = delta as u32;
    delta += sa.period_contrib as u64;
    let periods = delta / 1024;
    if periods != 0 {
        sa.load_sum = pelt::decay_load(sa.load_sum, periods);
        sa.runnable_sum = pelt::decay_load(sa.runnable_sum, periods);
        sa.util_sum = pelt::decay_load(sa.util_sum, periods);
        delta %= 1024;
        if load != 0 {
            let d1 = 1024 - sa.period_contrib;
            let c1 = pelt::decay_load(d1 as u64, periods);
            let c2 = pelt::LOAD_AVG_MAX - pelt::decay_load(pelt::LOAD_AVG_MAX, periods) - 1024;
            contrib = (c1 + c2) as u32 + delta as u32;
        }
    }
    sa.period_contrib = delta as u32;
    if load != 0 {
        sa.load_sum += load * contrib as u64;
    }
    if runnable != 0 {
        sa.runnable_sum += (runnable * contrib as u64) << 10;
    }
    if running {
        sa.util_sum += (contrib as u64) << 10;
    }
    periods != 0
}

#[test]
fn the_split_update_gives_the_one_piece_sums_at_any_step() {
    // A fixed xorshift stream of steps: below 1024 ns (no change), inside the period, across
    // one or a few boundaries, across thousands (everything decays away), and a clock that goes
    // back; loads, run-queue lengths and running flags drawn with them.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut a, mut b) = (SchedAvg::default(), SchedAvg::default());
    let mut now = 1u64 << 20;
    let mut crossed = 0;
    for i in 0..200_000 {
        let r = next();
        now = match r % 16 {
            0 => now + r % 1024,
            1..=9 => now + (r >> 8) % 200_000,
            10..=13 => now + (r >> 8) % (4 * PERIOD_NS),
            14 => now + (r >> 8) % (3000 * PERIOD_NS),
            _ => now.saturating_sub((r >> 8) % 5000),
        };
        let load = [0u64, 1, 1024, 3121, 88761][(r >> 40) as usize % 5];
        let nr = (r >> 44) % 4;
        let running = (r >> 50) & 1 == 1;
        let got = pelt::update_load_sum(now, &mut a, load, nr, running);
        let want = reference_update_load_sum(now, &mut b, load, nr, running);
        assert_eq!(got, want, "step {i}: period crossed");
        assert_eq!(
            a, b,
            "step {i}: now {now}, load {load}, nr {nr}, running {running}"
        );
        crossed += got as u32;
    }
    assert!(
        crossed > 10_000,
        "the walk crossed only {crossed} period boundaries"
    );
}
