//! The shared conformance suite: this thread's task policy for the entities it builds, every
//! case as a generic function over `Scheduler`, and the macros a level file instantiates
//! (`common_conformance!`, `host_conformance!`, `guest_conformance!`, `linux_host_conformance!`),
//! all written through one table, `conformance_cases!` (a case's name to its call and CPU
//! count), which a policy that takes only some of the cases lists them with.

use std::cell::Cell;

use vmsched_core::testkit::{pinned_to, Harness};
use vmsched_core::{
    CpuId, CpuSet, EntityParams, Policy, Request, Scheduler, WakeCause, WakeInfo, NS_PER_MS,
    NS_PER_S,
};

thread_local! {
    /// The policy and `rt_priority` of every entity the suite builds on this thread (a Linux
    /// level's tasks), set by the constructor of the instance under test: normal tasks unless
    /// an instance asks for RT or deadline ones (`rr_guest`, `dl_guest`).
    pub(crate) static TASK_POLICY: Cell<(Policy, u32)> = const { Cell::new((Policy::Normal, 0)) };
}

/// `testkit::params` with this thread's task policy.
pub(crate) fn params(i: usize, ncpus: usize) -> EntityParams {
    let mut p = vmsched_core::testkit::params(i, ncpus);
    (p.linux.policy, p.linux.rt_priority) = TASK_POLICY.get();
    if p.linux.policy == Policy::Deadline {
        // A full-bandwidth reservation (Q = D = P = 10 ms): never throttled while it could run,
        // so a CPU with deadline work never idles.
        let t = 10 * NS_PER_MS;
        p.linux.times = vmsched_core::sched::SchedTimes {
            sched_runtime_ns: t,
            sched_deadline_ns: t,
            sched_period_ns: t,
        };
    }
    p
}

/// `testkit::pinned` with this thread's task policy.
pub(crate) fn pinned(i: usize, ncpus: usize, cpu: u32) -> EntityParams {
    pinned_to(params(i, ncpus), cpu)
}

/// `testkit::placed_on` with this thread's task policy.
pub(crate) fn placed_on(i: usize, ncpus: usize, initial: u32) -> EntityParams {
    let mut p = params(i, ncpus);
    p.initial_cpu = CpuId(initial);
    p
}

/// A lone entity gets its CPU at once and keeps it.
pub(crate) fn lone_entity_runs<S: Scheduler>(s: S) {
    let mut h = Harness::new(s, 1, vec![params(0, 1)]);
    h.wake(0, WakeInfo::of(WakeCause::Fork));
    h.pump();
    assert_eq!(h.curr(0), Some(0), "a lone runnable entity must be running");
    h.run_for(NS_PER_S, NS_PER_MS);
    assert_eq!(h.curr(0), Some(0));
    assert!(h.run_ns[0] >= NS_PER_S, "ran {} ns of 1 s", h.run_ns[0]);
}

/// N entities sharing one CPU all make progress.
pub(crate) fn n_entities_one_cpu_all_progress<S: Scheduler>(s: S, ncpus: usize) {
    let n = 3;
    let ents = (0..n).map(|i| pinned_to(params(i, ncpus), 0)).collect();
    let mut h = Harness::new(s, ncpus, ents);
    for e in 0..n as u32 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    h.run_for(3 * NS_PER_S, 100_000);
    let total: u64 = h.run_ns.iter().sum();
    assert!(
        total >= 3 * NS_PER_S - NS_PER_MS,
        "the CPU idled with work queued: {total}"
    );
    for (i, r) in h.run_ns.iter().enumerate() {
        assert!(
            *r > 3 * NS_PER_S / 10,
            "entity {i} got only {r} ns of 3 s: {:?}",
            h.run_ns
        );
    }
}

/// An idle CPU takes a waking entity when the entity's own CPU is busy.
pub(crate) fn idle_cpu_takes_waking_entity<S: Scheduler>(s: S) {
    // Both entities start on CPU 0.
    let mut p1 = params(1, 2);
    p1.initial_cpu = CpuId(0);
    let mut h = Harness::new(s, 2, vec![params(0, 2), p1]);
    h.wake(0, WakeInfo::of(WakeCause::Fork));
    h.pump();
    h.run_for(10 * NS_PER_MS, NS_PER_MS);
    let c0 = (0..2)
        .find(|c| h.curr(*c) == Some(0))
        .expect("entity 0 runs");
    h.wake(
        1,
        WakeInfo {
            waker_cpu: Some(CpuId(c0)),
            ..Default::default()
        },
    );
    h.pump();
    h.run_for(5 * NS_PER_MS, NS_PER_MS / 10);
    assert!(
        h.curr(0).is_some() && h.curr(1).is_some(),
        "both entities should run on the two CPUs: {:?} {:?}",
        h.curr(0),
        h.curr(1)
    );
}

/// Hard affinity holds (the harness asserts it on every pick) even under pressure.
pub(crate) fn affinity_holds<S: Scheduler>(s: S) {
    let ents = (0..4)
        .map(|i| pinned_to(params(i, 4), (i % 2) as u32 + 2))
        .collect();
    let mut h = Harness::new(s, 4, ents);
    for e in 0..4 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    h.run_for(NS_PER_S, 100_000);
    assert_eq!(h.curr(0), None);
    assert_eq!(h.curr(1), None);
    for (i, r) in h.run_ns.iter().enumerate() {
        assert!(*r > NS_PER_S / 4, "entity {i}: {r}");
    }
}

/// Work conservation: as many CPUs busy as there are runnable entities (up to the CPU count).
pub(crate) fn work_conserving<S: Scheduler>(s: S) {
    let ents = (0..3).map(|i| params(i, 4)).collect();
    let mut h = Harness::new(s, 4, ents);
    for e in 0..3 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    h.run_for(200 * NS_PER_MS, 100_000);
    let busy = (0..4).filter(|c| h.curr(*c).is_some()).count();
    assert_eq!(busy, 3, "3 runnable entities on 4 CPUs must occupy 3 CPUs");
}

/// Two CPU-bound entities on one CPU for `ms` of simulated time: their CPU time in that window.
pub(crate) fn window<S: Scheduler>(h: &mut Harness<S>, ms: u64) -> (u64, u64) {
    let before = (h.run_ns[0], h.run_ns[1]);
    h.run_for(ms * NS_PER_MS, 100_000);
    (h.run_ns[0] - before.0, h.run_ns[1] - before.1)
}

pub(crate) fn two_on_one_cpu<S: Scheduler>(s: S) -> Harness<S> {
    let ents = (0..2).map(|i| pinned_to(params(i, 1), 0)).collect();
    let mut h = Harness::new(s, 1, ents);
    for e in 0..2 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    h
}

/// Two CPU-bound entities on one CPU: the ratio of their CPU times (0 to 1) over 1 s after
/// 200 ms, then, after `change` and another 200 ms, over 2 s.
pub(crate) fn shares_around<S: Scheduler>(
    s: S,
    change: impl FnOnce(&mut Harness<S>),
) -> (f64, f64) {
    let mut h = two_on_one_cpu(s);
    h.run_for(200 * NS_PER_MS, 100_000);
    let (a, b) = window(&mut h, 1000);
    let before = a as f64 / b as f64;
    change(&mut h);
    h.pump();
    h.run_for(200 * NS_PER_MS, 100_000);
    let (a, b) = window(&mut h, 2000);
    (before, a as f64 / b as f64)
}

/// `shares_around` a change of entity 1's nice from 0 to 5 (`prio_changed`).
pub(crate) fn shares_around_nice_5<S: Scheduler>(s: S) -> (f64, f64) {
    shares_around(s, |h| {
        h.ents[1].params.linux.nice = 5;
        h.prio_changed(1);
    })
}

/// Parameter change (host): raising one entity's weight (its group's, `adjust`) moves the
/// shares after the change, not before.
pub(crate) fn weight_change_moves_shares<S: Scheduler>(s: S) {
    let (before, after) = shares_around(s, |h| {
        h.ents[0].params.xen.weight = 768;
        h.adjust(0);
    });
    assert!((0.8..1.25).contains(&before), "equal weights: {before}");
    assert!((2.4..3.6).contains(&after), "weights 768:256: {after}");
}

/// Parameter change (RTDS host): two CPU-bound vCPUs without extratime at 2 ms of 10 ms each
/// share 1:1 (the CPU idles the rest); raising one budget to 6 ms (`adjust`) makes it 3:1 from
/// the next period on.
pub(crate) fn budget_change_moves_shares<S: Scheduler>(s: S) {
    let ents = (0..2)
        .map(|i| {
            let mut p = pinned_to(params(i, 1), 0);
            p.xen.budget_us = 2000;
            p.xen.period_us = 10_000;
            p.xen.extratime = false;
            p
        })
        .collect();
    let mut h = Harness::new(s, 1, ents);
    for e in 0..2 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    h.run_for(100 * NS_PER_MS, 100_000);
    let (a, b) = window(&mut h, 1000);
    // Each dispatch overruns by the core's timer entry latency (1 µs): within 1 %.
    for x in [a, b] {
        assert!(
            x.abs_diff(200 * NS_PER_MS) < 2 * NS_PER_MS,
            "2 ms each per 10 ms: {a} {b}"
        );
    }
    h.ents[0].params.xen.budget_us = 6000;
    h.adjust(0);
    h.pump();
    h.run_for(100 * NS_PER_MS, 100_000);
    let (a, b) = window(&mut h, 1000);
    let after = a as f64 / b as f64;
    assert!(
        (2.9..3.1).contains(&after),
        "budgets 6:2 ms: {after} ({a} {b})"
    );
}

/// Parameter change (guest): a nice change (`prio_changed`) moves the shares after it.
pub(crate) fn nice_change_moves_shares<S: Scheduler>(s: S) {
    let (before, after) = shares_around_nice_5(s);
    assert!((0.85..1.18).contains(&before), "nice 0:0: {before}");
    assert!((2.6..3.5).contains(&after), "nice 0:5 (1024:335): {after}");
}

/// Pause (host): a paused entity leaves its CPU at once, is reported paused, gets no CPU while
/// paused, and runs again after the unpause.
pub(crate) fn paused_entity_gets_no_cpu<S: Scheduler>(s: S) {
    let mut h = two_on_one_cpu(s);
    h.run_for(100 * NS_PER_MS, 100_000);
    for e in 0..2 {
        h.set_paused(e, true);
        h.pump();
        assert!(h.paused[e as usize], "entity {e} was not reported paused");
        assert_ne!(h.curr(0), Some(e), "paused entity {e} still runs");
        let (a, b) = window(&mut h, 500);
        let mine = if e == 0 { a } else { b };
        assert_eq!(mine, 0, "paused entity {e} got CPU time");
        assert_eq!(a + b, 500 * NS_PER_MS, "the other entity must have the CPU");
        h.set_paused(e, false);
        h.pump();
        assert!(!h.paused[e as usize]);
        let (a, b) = window(&mut h, 500);
        assert!(a > 0 && b > 0, "both run after the unpause: {a} {b}");
    }
}

/// Removal: of three CPU-bound entities on one CPU, the one removed (`remove`, after it was
/// taken off its CPU: paused at a host level, blocked at a guest level) never runs again, and
/// the other two share the CPU.
pub(crate) fn removed_entity_never_runs<S: Scheduler>(s: S, host: bool) {
    let ents = (0..3).map(|i| pinned_to(params(i, 1), 0)).collect();
    let mut h = Harness::new(s, 1, ents);
    for e in 0..3 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    h.run_for(100 * NS_PER_MS, 100_000);
    let x = h.curr(0).expect("the CPU runs someone");
    if host {
        h.set_paused(x, true);
        h.pump();
    } else {
        h.block(x);
        h.pump();
    }
    assert_ne!(h.curr(0), Some(x));
    h.remove(x);
    h.pump();
    let before = h.run_ns.clone();
    h.run_for(NS_PER_S, 100_000);
    let got: Vec<u64> = (0..3).map(|i| h.run_ns[i] - before[i]).collect();
    assert_eq!(got[x as usize], 0, "the removed entity ran: {got:?}");
    assert_eq!(got.iter().sum::<u64>(), NS_PER_S, "the CPU idled: {got:?}");
    for (i, g) in got.iter().enumerate() {
        if i != x as usize {
            assert!(*g > NS_PER_S / 4, "entity {i} starved: {got:?}");
        }
    }
}

/// CPU offline and online (both levels): four CPU-bound entities on three CPUs, entity 3 pinned
/// to CPU 2. CPU 2 goes offline: it runs nothing from then on (sampled every 100 µs), entity 3
/// has its affinity broken (widened) and still runs, the two CPUs left stay busy. CPU 2 comes
/// back: it is soon in use again (busy most of the last half second). Returns what every CPU
/// ran at every sample, for the determinism check.
pub(crate) fn cpu_offline_and_online<S: Scheduler>(s: S) -> Vec<Option<u32>> {
    let mut ents: Vec<_> = (0..3).map(|i| params(i, 3)).collect();
    ents.push(pinned(3, 3, 2));
    let mut h = Harness::new(s, 3, ents);
    for e in 0..4 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    let mut seen = Vec::new();
    let sample = |h: &mut Harness<S>, seen: &mut Vec<Option<u32>>, ms: u64| {
        for _ in 0..ms * 10 {
            h.run_for(100_000, 100_000);
            seen.extend((0..3).map(|c| h.curr(c)));
        }
    };
    sample(&mut h, &mut seen, 100);
    assert_eq!(h.cpu_offline(2), vec![3], "entity 3's affinity is broken");
    let before = h.run_ns.clone();
    let from = seen.len();
    sample(&mut h, &mut seen, 500);
    assert!(
        seen[from..].chunks(3).all(|c| c[2].is_none()),
        "offline CPU 2 ran an entity"
    );
    let got: Vec<u64> = (0..4).map(|i| h.run_ns[i] - before[i]).collect();
    assert_eq!(
        got.iter().sum::<u64>(),
        1000 * NS_PER_MS,
        "the two online CPUs stay busy: {got:?}"
    );
    assert!(got[3] > 50 * NS_PER_MS, "entity 3 still runs: {got:?}");
    h.cpu_online(2);
    sample(&mut h, &mut seen, 500);
    let busy = seen[seen.len() - 3 * 2500..]
        .chunks(3)
        .filter(|c| c[2].is_some())
        .count();
    assert!(
        busy > 2000,
        "CPU 2 back in use: busy in {busy} of 2500 samples"
    );
    seen
}

/// Block and wake: a blocked entity is never picked (the harness also asserts it on every pick)
/// and gets no CPU while blocked; its CPU goes to the other entity at once. A wake-up on an
/// otherwise idle CPU asks for a reschedule of that CPU (its only one), which picks it.
pub(crate) fn block_and_wake<S: Scheduler>(s: S) {
    let mut h = two_on_one_cpu(s);
    h.run_for(100 * NS_PER_MS, 100_000);
    let x = h.curr(0).expect("the CPU runs someone");
    let y = 1 - x;
    let pick = h.block(x);
    assert_eq!(
        pick.next.map(|e| e.0),
        Some(y),
        "the CPU must go to the other entity"
    );
    h.pump();
    let before = (h.run_ns[x as usize], h.run_ns[y as usize]);
    h.run_for(500 * NS_PER_MS, 100_000);
    assert_eq!(h.run_ns[x as usize], before.0, "a blocked entity ran");
    assert_eq!(
        h.run_ns[y as usize] - before.1,
        500 * NS_PER_MS,
        "the CPU idled"
    );
    // The other one blocks too: nothing is runnable, the CPU idles.
    let pick = h.block(y);
    assert_eq!(pick.next, None, "nothing is runnable: the CPU must idle");
    h.pump();
    h.run_for(10 * NS_PER_MS, NS_PER_MS);
    assert_eq!(h.curr(0), None);
    // A wake-up on the idle CPU asks for a reschedule of it, and that reschedule picks it.
    h.wake(x, WakeInfo::of(WakeCause::Timer));
    let asked = h.take_resched();
    assert!(
        asked.contains(&0),
        "the wake of {x} asked for {asked:?}, not CPU 0"
    );
    h.schedule(0);
    h.pump();
    assert_eq!(
        h.curr(0),
        Some(x),
        "the woken entity must run on its idle CPU"
    );
    // Both share the CPU again once the second is woken.
    h.wake(y, WakeInfo::of(WakeCause::Io));
    h.pump();
    let (a, b) = window(&mut h, 500);
    assert!(a > 0 && b > 0, "both run after their wake-ups: {a} {b}");
    assert_eq!(a + b, 500 * NS_PER_MS, "the CPU idled with work");
}

/// Wake on idle CPUs: an entity allowed on CPUs 1 and 2 of 3 idle CPUs, woken after it blocked,
/// gets a reschedule of a CPU in its affinity and runs there once that is delivered (nothing
/// else is runnable).
pub(crate) fn wake_reschedules_cpu_in_affinity<S: Scheduler>(s: S) {
    let mut p = placed_on(0, 3, 1);
    p.hard_affinity = CpuSet::from_ids([1, 2]);
    let mut h = Harness::new(s, 3, vec![p]);
    for round in 0..3 {
        h.wake(0, WakeInfo::of(WakeCause::Event));
        let asked = h.take_resched();
        assert!(
            asked.iter().any(|c| *c == 1 || *c == 2),
            "round {round}: a wake of an entity on CPUs 1-2 asked for {asked:?}"
        );
        for c in asked {
            h.schedule(c);
        }
        h.pump();
        let on = h.ents[0].on_cpu.map(|c| c.0);
        assert!(matches!(on, Some(1 | 2)), "round {round}: runs on {on:?}");
        h.run_for(5 * NS_PER_MS, NS_PER_MS);
        h.block(0);
        h.pump();
        h.run_for(5 * NS_PER_MS, NS_PER_MS);
        assert!(
            (0..3).all(|c| h.curr(c).is_none()),
            "round {round}: not idle"
        );
    }
}

/// Yield: a lone runnable entity that yields is picked again (a yield never idles a CPU with
/// work), and two entities on one CPU that yield whenever they run both keep running. What a
/// yield does to a competitor differs (Credit2 biases the yielder's credit by `YIELD_BIAS`, CFS
/// sets a skip buddy that `pick_next_entity` may pass over), so neither is asserted to run next.
pub(crate) fn yield_keeps_cpu_busy<S: Scheduler>(lone: S, pair: S) {
    let mut h = Harness::new(lone, 1, vec![params(0, 1)]);
    h.wake(0, WakeInfo::of(WakeCause::Fork));
    h.pump();
    for _ in 0..10 {
        h.run_for(NS_PER_MS, 100_000);
        let pick = h.yield_(0);
        assert_eq!(
            pick.next.map(|e| e.0),
            Some(0),
            "a lone yielder must run again"
        );
        h.pump();
        assert_eq!(h.curr(0), Some(0));
    }
    let mut h = two_on_one_cpu(pair);
    let mut picked = [0u32; 2];
    for _ in 0..200 {
        h.run_for(NS_PER_MS, 100_000);
        let x = h.curr(0).expect("a CPU with work must not idle");
        let pick = h.yield_(x);
        let next = pick.next.expect("a yield idled a CPU with work").0;
        picked[next as usize] += 1;
        h.pump();
    }
    assert!(
        picked[0] > 0 && picked[1] > 0,
        "picks after yields: {picked:?}"
    );
    assert_eq!(
        h.run_ns.iter().sum::<u64>(),
        h.now,
        "the CPU idled with work"
    );
}

/// Checks the requests not yet applied (every timer key below `nr_timers()`, no deadline in the
/// past), logs them and the CPUs' current entities, then applies them.
pub(crate) fn checked_pump<S: Scheduler>(h: &mut Harness<S>, log: &mut Vec<String>) {
    let nt = h.sched.nr_timers();
    for r in &h.requests {
        if let Request::Timer(k, at) = *r {
            assert!(k < nt, "timer key {k} not below nr_timers() = {nt}");
            if let Some(t) = at {
                assert!(t >= h.now, "timer {k} armed at {t}, before now {}", h.now);
            }
        }
    }
    log.push(format!("{} {:?}", h.now, h.requests));
    h.pump();
    let curr: Vec<Option<u32>> = (0..h.cpus.len() as u32).map(|c| h.curr(c)).collect();
    log.push(format!("{curr:?} {:?}", h.run_ns));
}

/// Checks a pick's slice (positive when present) and logs the pick.
pub(crate) fn checked_pick(pick: vmsched_core::Pick, log: &mut Vec<String>) {
    if let Some(d) = pick.slice {
        assert!(d > 0, "a pick with an empty slice: {pick:?}");
    }
    log.push(format!("{pick:?}"));
}

/// A fixed sequence of every hook a level sees (wake, tick, timers, block, yield, schedule, the
/// level's run-time change) on 2 CPUs and 4 entities (one capped), checked by `checked_pump` and
/// `checked_pick` at every step; returns the log of picks, requests and CPU times.
pub(crate) fn scripted_run<S: Scheduler>(s: S, host: bool) -> Vec<String> {
    let mut capped = pinned(3, 2, 1);
    // A cap makes a capping host policy arm its own timers; other policies ignore it.
    capped.xen.cap_pct = 40;
    let ents = vec![params(0, 2), params(1, 2), placed_on(2, 2, 0), capped];
    let mut h = Harness::new(s, 2, ents);
    let mut log = Vec::new();
    let causes = [
        WakeCause::Fork,
        WakeCause::Ipi,
        WakeCause::Event,
        WakeCause::Unblock,
    ];
    for (e, cause) in causes.into_iter().enumerate() {
        h.wake(e as u32, WakeInfo::of(cause));
        checked_pump(&mut h, &mut log);
        h.run_for(3 * NS_PER_MS, 100_000);
    }
    for round in 0..20u32 {
        h.run_for(7 * NS_PER_MS + 311_000 * round as u64, 100_000);
        checked_pump(&mut h, &mut log);
        let c = round % 2;
        let Some(x) = h.curr(c) else { continue };
        match round % 4 {
            0 | 1 => {
                let pick = h.block(x);
                checked_pick(pick, &mut log);
                checked_pump(&mut h, &mut log);
                h.run_for(2 * NS_PER_MS, 100_000);
                h.wake(x, WakeInfo::of(WakeCause::Timer));
            }
            2 => {
                let pick = h.yield_(x);
                checked_pick(pick, &mut log);
            }
            _ => {
                if host {
                    let g = h.ents[x as usize].params.group;
                    h.ents[x as usize].params.xen.weight = 128 + 64 * round;
                    h.adjust(g);
                } else {
                    h.ents[x as usize].params.linux.nice = (round % 7) as i32 - 3;
                    h.prio_changed(x);
                }
            }
        }
        checked_pump(&mut h, &mut log);
        for c in 0..2 {
            let pick = h.schedule(c);
            checked_pick(pick, &mut log);
        }
        checked_pump(&mut h, &mut log);
    }
    h.run_for(50 * NS_PER_MS, 100_000);
    checked_pump(&mut h, &mut log);
    assert!(
        h.run_ns.iter().all(|r| *r > 0),
        "every entity ran: {:?}",
        h.run_ns
    );
    log
}

/// Timers: over `scripted_run`, every slice is positive when present and every timer the policy
/// arms has a key below `nr_timers()` and a deadline not in the past.
pub(crate) fn timers_well_formed<S: Scheduler>(s: S, host: bool) {
    let log = scripted_run(s, host);
    assert!(!log.is_empty());
}

/// Determinism: the same hook calls on two fresh instances give the same picks, requests and
/// CPU times.
pub(crate) fn deterministic<S: Scheduler>(a: S, b: S, host: bool) {
    let la = scripted_run(a, host);
    let lb = scripted_run(b, host);
    assert_eq!(la.len(), lb.len(), "the two runs logged different lengths");
    for (i, (x, y)) in la.iter().zip(&lb).enumerate() {
        assert_eq!(x, y, "the two runs differ at step {i}");
    }
}

/// The CPU offline/online run twice gives the same picks.
pub(crate) fn cpu_hotplug_deterministic<S: Scheduler>(a: S, b: S) {
    assert_eq!(cpu_offline_and_online(a), cpu_offline_and_online(b));
}

/// One `#[test]` a case named: `conformance_cases!(ctor, host; case, ...)` writes, for each
/// case, a test of that name calling the case of that name with instances from `ctor` at the
/// CPU count the suite uses for it; `host` (true at a host level) goes to the cases that remove
/// or script an entity. The table of the suite: every instantiation below and every policy's
/// partial list of cases in the level files goes through it.
macro_rules! conformance_cases {
    ($ctor:expr, $host:expr; $($case:ident),* $(,)?) => {
        $( conformance_case!($case, $ctor, $host); )*
    };
}

/// One row of the table (see `conformance_cases!`).
macro_rules! conformance_case {
    (n_entities_one_cpu_all_progress, $ctor:expr, $host:expr) => {
        #[test]
        fn n_entities_one_cpu_all_progress() {
            super::n_entities_one_cpu_all_progress($ctor(2), 2);
        }
    };
    (cpu_hotplug_deterministic, $ctor:expr, $host:expr) => {
        #[test]
        fn cpu_hotplug_deterministic() {
            super::cpu_hotplug_deterministic($ctor(3), $ctor(3));
        }
    };
    (yield_keeps_cpu_busy, $ctor:expr, $host:expr) => {
        #[test]
        fn yield_keeps_cpu_busy() {
            super::yield_keeps_cpu_busy($ctor(1), $ctor(1));
        }
    };
    (removed_entity_never_runs, $ctor:expr, $host:expr) => {
        #[test]
        fn removed_entity_never_runs() {
            super::removed_entity_never_runs($ctor(1), $host);
        }
    };
    (timers_well_formed, $ctor:expr, $host:expr) => {
        #[test]
        fn timers_well_formed() {
            super::timers_well_formed($ctor(2), $host);
        }
    };
    (deterministic, $ctor:expr, $host:expr) => {
        #[test]
        fn deterministic() {
            super::deterministic($ctor(2), $ctor(2), $host);
        }
    };
    // The cases of one instance at a CPU count of their own.
    ($case:ident, $ctor:expr, $host:expr) => {
        #[test]
        fn $case() {
            super::$case($ctor(conformance_cpus!($case)));
        }
    };
}

/// The CPU count a one-instance case runs on.
macro_rules! conformance_cpus {
    (idle_cpu_takes_waking_entity) => {
        2
    };
    (nr_running_counts_runnable_entities) => {
        2
    };
    (wake_reschedules_cpu_in_affinity) => {
        3
    };
    (cpu_offline_and_online) => {
        3
    };
    (affinity_holds) => {
        4
    };
    (work_conserving) => {
        4
    };
    ($case:ident) => {
        1
    };
}

/// The cases every policy at every level passes, then the level's own (`$host`; `$case`s),
/// in a module `$name`, after the `$extra` items.
macro_rules! common_conformance {
    ($name:ident, $ctor:expr, { $($extra:item)* }) => {
        common_conformance!($name, $ctor, false; { $($extra)* });
    };
    ($name:ident, $ctor:expr, $host:expr; $($case:ident),* { $($extra:item)* }) => {
        mod $name {
            use super::*;
            $($extra)*
            conformance_cases!($ctor, $host;
                lone_entity_runs,
                n_entities_one_cpu_all_progress,
                idle_cpu_takes_waking_entity,
                affinity_holds,
                work_conserving,
                block_and_wake,
                wake_reschedules_cpu_in_affinity,
                cpu_offline_and_online,
                cpu_hotplug_deterministic,
                yield_keeps_cpu_busy,
                $($case),*
            );
        }
    };
}

macro_rules! host_conformance {
    ($name:ident, $ctor:expr) => {
        host_conformance!($name, $ctor, weight_change_moves_shares);
    };
    // `$param`: the policy's parameter-change case (RTDS has budgets, not weights).
    ($name:ident, $ctor:expr, $param:ident) => {
        common_conformance!($name, $ctor, true;
            $param,
            paused_entity_gets_no_cpu,
            removed_entity_never_runs,
            timers_well_formed,
            deterministic
            {}
        );
    };
}

/// A change of class at run time (a guest's `sched_task`, the KVM host's `sched_vcpu`,
/// coordinated scheduling's boost: `__sched_setscheduler` from SCHED_OTHER to SCHED_FIFO and
/// back) takes effect at once for a running or queued entity (as FIFO it takes the CPU from a
/// fair one; back to normal both run again) and at the wake-up of a blocked one (it preempts
/// the fair entity when it wakes). Every Linux kernel at either level.
pub fn class_change_takes_effect<S: Scheduler>(s: S) {
    use vmsched_core::Policy;
    let mut h = two_on_one_cpu(s);
    h.run_for(100 * NS_PER_MS, 100_000);
    let set = |h: &mut Harness<S>, policy: Policy, prio: u32| {
        h.ents[1].params.linux.policy = policy;
        h.ents[1].params.linux.rt_priority = prio;
        h.prio_changed(1);
        h.pump();
    };
    set(&mut h, Policy::Fifo, 10);
    let (a, b) = window(&mut h, 200);
    assert!(a == 0 && b > 0, "as FIFO entity 1 holds the CPU: {a} {b}");
    set(&mut h, Policy::Normal, 0);
    let (a, b) = window(&mut h, 1000);
    assert!(a > 0 && b > 0, "back to normal both run: {a} {b}");
    // Blocked while its class changes: it switches at its wake-up and preempts at once.
    for _ in 0..200 {
        if h.curr(0) == Some(1) {
            break;
        }
        h.run_for(NS_PER_MS, 100_000);
    }
    assert_eq!(h.curr(0), Some(1), "entity 1 gets its turn");
    h.block(1);
    h.pump();
    set(&mut h, Policy::Fifo, 10);
    assert_eq!(
        h.curr(0),
        Some(0),
        "the fair entity runs while the FIFO one sleeps"
    );
    h.run_for(NS_PER_MS, 100_000);
    h.wake(1, WakeInfo::of(WakeCause::Unblock));
    h.pump();
    assert_eq!(
        h.curr(0),
        Some(1),
        "the FIFO entity preempts at its wake-up"
    );
}

macro_rules! guest_conformance {
    ($name:ident, $ctor:expr) => {
        common_conformance!($name, $ctor, false;
            class_change_takes_effect,
            nice_change_moves_shares,
            removed_entity_never_runs,
            timers_well_formed,
            deterministic
            {}
        );
    };
}

/// A Linux KVM host (host/kvm.rs): the Linux core at the host level over vCPU threads. The
/// guest cases hold (its parameter change is nice: a vCPU thread's `renice`; it takes no pause,
/// so removal follows a block), plus the two hooks only a KVM host answers.
macro_rules! linux_host_conformance {
    ($name:ident, $ctor:expr) => {
        common_conformance!($name, $ctor, false;
            nice_change_moves_shares,
            removed_entity_never_runs,
            timers_well_formed,
            deterministic,
            nr_running_counts_runnable_entities,
            directed_yield_reaches_the_target,
            class_change_takes_effect
            {}
        );
    };
}
