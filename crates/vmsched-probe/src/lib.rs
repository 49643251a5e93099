//! Microbenchmarks of the running Linux kernel's per-operation costs, for `vmsched calibrate`
//! (the cost profile) and `vmsched validate` (the real side of the Context1 rows).
//!
//! Each probe repeats a measurement `reps` times and reports the median and spread of the
//! repetitions ([`Stats`]). Their patterns are the classic ones:
//! - [`syscall`]: a null system call (getppid) in a loop (lmbench `lat_syscall null`);
//! - [`pipe_op`]: a write and a read of one word on one pipe in one process, halved: one pipe
//!   operation without a sleep or a wake-up (lmbench's `lat_ctx` overhead term);
//! - [`round_trip`]: UnixBench Context1's loop (src/context1.c): two processes, two pipes, the
//!   parent writes a counter into the first and reads it back from the second;
//! - [`ctxsw`]: lmbench `lat_ctx -s 0 2`'s method: the round trip with both processes pinned to
//!   one CPU, less the four pipe operations it contains, halved (two switches per round trip);
//! - [`wakeup`]: a task blocked in `read` on one CPU, written to from another: from the
//!   writer's clock reading before its `write` to the reader's after its `read` returned (the
//!   wake-up IPI, the idle exit, the switch and the syscall's two halves);
//! - [`timer`]: cyclictest's measurement: an absolute `clock_nanosleep` and `now − expiry`,
//!   with a given timer slack (cyclictest runs SCHED_OTHER threads with the default 50 µs);
//! - [`timer_expiry`]: the host's timer-expiry path alone: the same measurement from a thread
//!   pinned to one (otherwise idle) CPU, SCHED_FIFO when permitted (cyclictest `-p`), slack
//!   1 ns: the hrtimer interrupt, the idle exit, the expiry and the wake-up of the thread, which
//!   nothing else on its CPU delays (the model's `machine.timer_expiry_ns`).
//!
//! Nothing here runs on the simulator's side: these are real system calls on the local machine,
//! so their results are noisy and tests assert only that they ran.

mod sys;

use sys::{fork, get, now_ns, pin, put, KeepAffinity, Pipe};

/// The spread of one probe over its repetitions (each repetition's per-operation figure).
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub median_ns: f64,
    /// 10th and 90th percentiles of the repetitions.
    pub p10_ns: f64,
    pub p90_ns: f64,
    pub min_ns: f64,
    pub max_ns: f64,
    pub reps: u32,
}

impl Stats {
    /// Stats of per-repetition figures (nearest-rank percentiles). Err if there are none.
    pub fn of(mut v: Vec<f64>) -> Result<Stats, String> {
        if v.is_empty() {
            return Err("reps: must be at least 1".into());
        }
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        Ok(Stats {
            median_ns: at(0.5),
            p10_ns: at(0.1),
            p90_ns: at(0.9),
            min_ns: v[0],
            max_ns: v[v.len() - 1],
            reps: v.len() as u32,
        })
    }
}

fn check(reps: u32, iters: u32) -> Result<(), String> {
    if reps == 0 {
        return Err("reps: must be at least 1".into());
    }
    if iters == 0 {
        return Err("iters: must be at least 1".into());
    }
    Ok(())
}

/// The mean cost (ns) of `iters` runs of `f`, per repetition.
fn per_op(
    reps: u32,
    iters: u32,
    mut f: impl FnMut() -> Result<(), String>,
) -> Result<Stats, String> {
    check(reps, iters)?;
    let mut v = Vec::with_capacity(reps as usize);
    for _ in 0..reps {
        let t0 = now_ns();
        for _ in 0..iters {
            f()?;
        }
        v.push((now_ns() - t0) as f64 / iters as f64);
    }
    Stats::of(v)
}

/// A null system call (ns).
pub fn syscall(reps: u32, iters: u32) -> Result<Stats, String> {
    per_op(reps, iters, || {
        std::hint::black_box(sys::null_syscall());
        Ok(())
    })
}

/// One pipe operation (a write or a read of one word, no wake-up; ns).
pub fn pipe_op(reps: u32, iters: u32) -> Result<Stats, String> {
    let p = Pipe::new()?;
    let s = per_op(reps, iters, || match put(p.w, 1) && get(p.r).is_some() {
        true => Ok(()),
        false => Err("pipe write/read failed".into()),
    })?;
    Ok(halve(s))
}

fn halve(s: Stats) -> Stats {
    Stats {
        median_ns: s.median_ns / 2.0,
        p10_ns: s.p10_ns / 2.0,
        p90_ns: s.p90_ns / 2.0,
        min_ns: s.min_ns / 2.0,
        max_ns: s.max_ns / 2.0,
        reps: s.reps,
    }
}

/// Context1's round trip between two processes (ns per round trip). `cpus`: pin the parent
/// to the first and the child to the second; None leaves both to the scheduler (as Context1).
pub fn round_trip(reps: u32, iters: u32, cpus: Option<(u32, u32)>) -> Result<Stats, String> {
    check(reps, iters)?;
    let _keep = KeepAffinity::new()?;
    if let Some((p, c)) = cpus {
        allowed(c)?;
        pin(p)?;
    }
    let (p1, p2) = (Pipe::new()?, Pipe::new()?);
    let total = reps as u64 * iters as u64;
    let child = fork(|| {
        if let Some((_, c)) = cpus {
            if pin(c).is_err() {
                return false;
            }
        }
        // The child's half of context1.c: read the counter, check it, write it back.
        for i in 0..total {
            match get(p1.r) {
                Some(v) if v == i => {}
                _ => return false,
            }
            if !put(p2.w, i) {
                return false;
            }
        }
        true
    })?;
    let mut v = Vec::with_capacity(reps as usize);
    let mut i = 0u64;
    for _ in 0..reps {
        let t0 = now_ns();
        for _ in 0..iters {
            if !put(p1.w, i) || get(p2.r) != Some(i) {
                return Err("round_trip: the child stopped answering".into());
            }
            i += 1;
        }
        v.push((now_ns() - t0) as f64 / iters as f64);
    }
    if !child.wait() {
        return Err("round_trip: the child failed".into());
    }
    Stats::of(v)
}

/// A task switch on one CPU (ns): the round trip of two processes pinned to `cpu`, less its
/// four pipe operations (measured on the same CPU), halved.
pub fn ctxsw(reps: u32, iters: u32, cpu: u32) -> Result<Stats, String> {
    let pipe = {
        let _keep = KeepAffinity::new()?;
        pin(cpu)?;
        pipe_op(reps, iters)?
    };
    let rt = round_trip(reps, iters, Some((cpu, cpu)))?;
    let net = |x: f64| ((x - 4.0 * pipe.median_ns) / 2.0).max(0.0);
    Ok(Stats {
        median_ns: net(rt.median_ns),
        p10_ns: net(rt.p10_ns),
        p90_ns: net(rt.p90_ns),
        min_ns: net(rt.min_ns),
        max_ns: net(rt.max_ns),
        reps: rt.reps,
    })
}

/// Busy-waits `ns` (so that the other side has blocked before the next wake-up).
fn spin(ns: u64) {
    let t = now_ns() + ns;
    while now_ns() < t {
        std::hint::spin_loop();
    }
}

/// Wake-up to running across CPUs (ns): the writer on `waker_cpu`, the blocked reader on
/// `wakee_cpu`. Each repetition's figure is the median of its `iters` wake-ups.
pub fn wakeup(reps: u32, iters: u32, waker_cpu: u32, wakee_cpu: u32) -> Result<Stats, String> {
    check(reps, iters)?;
    let _keep = KeepAffinity::new()?;
    allowed(wakee_cpu)?;
    pin(waker_cpu)?;
    let (p1, p2) = (Pipe::new()?, Pipe::new()?);
    let total = reps as u64 * iters as u64;
    let child = fork(|| {
        if pin(wakee_cpu).is_err() {
            return false;
        }
        for _ in 0..total {
            let Some(t0) = get(p1.r) else { return false };
            let t1 = now_ns();
            if !put(p2.w, t1.saturating_sub(t0)) {
                return false;
            }
        }
        true
    })?;
    let mut v = Vec::with_capacity(reps as usize);
    let mut one = Vec::with_capacity(iters as usize);
    for _ in 0..reps {
        one.clear();
        for _ in 0..iters {
            // 100 µs: the reader is back in `read` and asleep (its CPU idle) when written to.
            spin(100_000);
            if !put(p1.w, now_ns()) {
                return Err("wakeup: write failed".into());
            }
            match get(p2.r) {
                Some(d) => one.push(d as f64),
                None => return Err("wakeup: the child stopped answering".into()),
            }
        }
        v.push(Stats::of(one.clone())?.median_ns);
    }
    if !child.wait() {
        return Err("wakeup: the child failed".into());
    }
    Stats::of(v)
}

/// Timer overshoot (ns): `clock_nanosleep` to an absolute time `interval_ns` ahead, then
/// `now − expiry`, with the calling thread's timer slack set to `slack_ns` (0: 1 ns, the least
/// the kernel takes) and restored after. Each repetition's figure is the median of its `iters`.
pub fn timer(reps: u32, iters: u32, interval_ns: u64, slack_ns: u64) -> Result<Stats, String> {
    check(reps, iters)?;
    if interval_ns == 0 {
        return Err("interval_ns: must be positive".into());
    }
    let old = sys::timer_slack();
    sys::set_timer_slack(slack_ns.max(1))?;
    let mut v = Vec::with_capacity(reps as usize);
    let mut one = Vec::with_capacity(iters as usize);
    for _ in 0..reps {
        one.clear();
        let mut next = now_ns() + interval_ns;
        for _ in 0..iters {
            sys::sleep_until(next);
            let now = now_ns();
            one.push(now.saturating_sub(next) as f64);
            next = next.max(now) + interval_ns;
        }
        v.push(Stats::of(one.clone())?.median_ns);
    }
    sys::set_timer_slack(old)?;
    Stats::of(v)
}

/// The timer-expiry path (ns): [`timer`]'s measurement (slack 1 ns) from a new thread pinned
/// to `cpu`, SCHED_FIFO priority 80 when the process may (cyclictest `-p 80`), so that its
/// wake-up waits for no other task. Returns the stats and whether the thread ran FIFO.
pub fn timer_expiry(
    reps: u32,
    iters: u32,
    interval_ns: u64,
    cpu: u32,
) -> Result<(Stats, bool), String> {
    check(reps, iters)?;
    allowed(cpu)?;
    let t = std::thread::spawn(move || {
        pin(cpu)?;
        let fifo = sys::set_fifo(80).is_ok();
        timer(reps, iters, interval_ns, 1).map(|s| (s, fifo))
    });
    t.join()
        .map_err(|_| "timer_expiry: the probe thread panicked".to_string())?
}

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> Result<Vec<u32>, String> {
    sys::allowed()
}

/// Err unless the caller may run on `cpu` (checked before a fork: a child that cannot pin
/// itself would leave the parent waiting on its pipe).
fn allowed(cpu: u32) -> Result<(), String> {
    match sys::allowed()?.contains(&cpu) {
        true => Ok(()),
        false => Err(format!("cpu {cpu}: not in this process's affinity")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_take_nearest_rank_percentiles() {
        let s = Stats::of((1..=11).map(f64::from).collect()).unwrap();
        assert_eq!((s.median_ns, s.p10_ns, s.p90_ns), (6.0, 2.0, 10.0));
        assert_eq!((s.min_ns, s.max_ns, s.reps), (1.0, 11.0, 11));
        assert!(Stats::of(vec![]).is_err());
    }

    #[test]
    fn bad_counts_are_refused_by_name() {
        assert!(syscall(0, 1).unwrap_err().starts_with("reps"));
        assert!(pipe_op(1, 0).unwrap_err().starts_with("iters"));
        assert!(timer(1, 1, 0, 0).unwrap_err().starts_with("interval_ns"));
        assert!(timer_expiry(1, 1, 0, 0)
            .unwrap_err()
            .starts_with("interval_ns"));
        assert!(timer_expiry(1, 1, 1000, 1 << 20)
            .unwrap_err()
            .contains("affinity"));
    }

    // The probes run real system calls: these check that each ran and answered, not how fast.
    #[test]
    fn every_probe_runs() {
        let cpus = allowed_cpus().unwrap();
        let (a, b) = (cpus[0], *cpus.last().unwrap());
        for s in [
            syscall(3, 100).unwrap(),
            pipe_op(3, 100).unwrap(),
            round_trip(3, 50, None).unwrap(),
            round_trip(3, 50, Some((a, a))).unwrap(),
            ctxsw(3, 50, a).unwrap(),
            wakeup(2, 5, a, b).unwrap(),
            timer(2, 5, 100_000, 0).unwrap(),
            timer_expiry(2, 5, 100_000, b).unwrap().0,
        ] {
            assert_eq!(s.reps as usize, if s.reps == 2 { 2 } else { 3 });
            assert!(s.min_ns <= s.median_ns && s.median_ns <= s.max_ns, "{s:?}");
        }
        // The caller's affinity is given back.
        assert_eq!(allowed_cpus().unwrap(), cpus);
    }
}
