//! CPU hot-plug (Xen 4.20 `csched_deinit_pdata`, `csched_free_pdata`, `init_pdata`; Xen 3.3,
//! which has no such hook: credit1/hotplug.rs): the master CPU moves, the pool credit follows
//! the online CPUs (4.20; 3.3 keeps its boot value), the vCPUs of an offlined CPU are queued
//! elsewhere, and a CPU back online is used again. The harness takes a CPU offline as the
//! engine does (`Harness::cpu_offline`).

use super::*;

/// `n` busy vCPUs free on `ncpus` flat CPUs, woken and run for 50 ms.
fn busy(v: Credit1Version, ncpus: usize, n: usize) -> H {
    let mut h = free(v, ncpus, n);
    wake_all(&mut h);
    h.run_for(ms(50), us(100));
    h
}

/// Runnable vCPUs as the per-CPU `nr_runnable` counts them (4.9+): each one once.
fn nr_runnable_total(h: &H) -> u32 {
    ops(h)
        .online
        .iter()
        .map(|c| ops(h).pcpus[c.idx()].nr_runnable)
        .sum()
}

#[test]
fn the_master_moves_to_the_first_online_cpu_when_it_goes_offline() {
    for v in [V33, V420] {
        let mut h = busy(v, 3, 3);
        assert_eq!(ops(&h).master, CpuId(0), "{v:?}");
        let acct_at = h.sched_timers[0];
        h.cpu_offline(0);
        assert_eq!(ops(&h).master, CpuId(1), "{v:?}: the first CPU left");
        assert_eq!(h.sched_timers[1], None, "{v:?}: CPU 0's ticker is killed");
        // 4.20: the accounting timer moves with its expiry (migrate_timer).
        assert_eq!(h.sched_timers[0], acct_at, "{v:?}");
        // A master that is not the offlined CPU stays.
        h.cpu_offline(2);
        assert_eq!(ops(&h).master, CpuId(1), "{v:?}");
    }
    // 3.3: the accounting pass now runs at the new master's every third tick.
    let mut h = busy(V33, 3, 3);
    h.cpu_offline(0);
    let mut sort = ops(&h).runq_sort;
    let t0 = ops(&h).pcpus[1].tick;
    let mut passes = 0;
    for _ in 0..3 {
        tick(&mut h, 1);
        if ops(&h).runq_sort != sort {
            sort = ops(&h).runq_sort;
            passes += 1;
            assert_eq!(ops(&h).pcpus[1].tick % 3, 0);
        }
    }
    assert_eq!(
        passes, 1,
        "one pass in three ticks of CPU 1 (from tick {t0})"
    );
    // CPU 2's ticks run none.
    let sort = ops(&h).runq_sort;
    for _ in 0..3 {
        tick(&mut h, 2);
    }
    assert_eq!(ops(&h).runq_sort, sort);
}

#[test]
fn the_pool_credit_follows_the_online_cpus_in_4_20_and_not_in_3_3() {
    for (v, offline, back) in [(V420, 600, 900), (V33, 900, 900)] {
        // One domain of three vCPUs, all active: the pass hands out the pool credit, 300 each
        // while three CPUs are online (their peak), 200 each with two (4.20).
        let ents = (0..3)
            .map(|i| {
                let mut p = params(i, 3);
                p.group = 0;
                p
            })
            .collect();
        let mut h = harness(exact(v), flat(3), ents);
        assert_eq!(ops(&h).credit, 900, "{v:?}");
        h.cpu_offline(2);
        assert_eq!(ops(&h).credit, offline, "{v:?}");
        for e in 0..3 {
            activate(&mut h, e);
        }
        acct(&mut h);
        let each = offline / 3;
        for e in 0..3 {
            assert_eq!(credit(&h, e), each, "{v:?}: vCPU {e}");
        }
        h.cpu_online(2);
        assert_eq!(ops(&h).credit, back, "{v:?}");
    }
    // 4.20: a new slice recomputes the pool credit from the CPUs online.
    let mut h = free(V420, 3, 1);
    h.cpu_offline(1);
    with_ctx(&mut h, |o, x| o.adjust_global(x, GlobalParam::TsliceMs(10)));
    assert_eq!(ops(&h).credit, 2 * 100);
}

#[test]
fn the_vcpus_of_an_offlined_cpu_are_queued_elsewhere() {
    for v in [V33, V420] {
        // Five busy vCPUs on three CPUs: CPU 1 or 2 runs one and has one or more queued.
        let mut h = busy(v, 3, 5);
        let on = |h: &H, c: u32| (0..5).filter(|&e| unit(h, e).processor == CpuId(c)).count();
        let gone = if on(&h, 2) >= on(&h, 1) { 2 } else { 1 };
        assert!(on(&h, gone) >= 2, "{v:?}: {}", on(&h, gone));
        assert!(!runq(&h, gone).is_empty());
        let running = h.curr(gone).expect("the CPU is busy");
        let before = credit(&h, running);
        h.advance(ms(3));
        assert!(h.cpu_offline(gone).is_empty(), "no affinity to break");
        let g = CpuId(gone);
        assert!(runq(&h, gone).is_empty());
        assert!(!ops(&h).idlers.contains(g) && !ops(&h).online.contains(g));
        for e in 0..5 {
            let u = unit(&h, e);
            assert_ne!(u.processor, g, "{v:?}: vCPU {e}");
            assert!(!u.hard.contains(g), "{v:?}: vCPU {e}");
            let c = u.processor.0;
            assert!(
                h.curr(c) == Some(e) || runq(&h, c).contains(&e),
                "{v:?}: vCPU {e} runs or is queued on CPU {c}"
            );
        }
        if v == V420 {
            // The running vCPU was charged its 3 ms up to the removal, and each runnable vCPU
            // is counted once, on its new CPU.
            assert!(credit(&h, running) <= before - 30, "{v:?}");
            assert_eq!(nr_runnable_total(&h), 5);
        }
        // They all keep running on the two CPUs left.
        let run0 = h.run_ns.clone();
        h.run_for(ms(600), us(100));
        for e in 0..5 {
            assert!(
                h.run_ns[e] - run0[e] > ms(100),
                "{v:?}: vCPU {e} ran {} ns",
                h.run_ns[e] - run0[e]
            );
        }
        assert_eq!(h.curr(gone), None);
        if v == V420 {
            assert_eq!(nr_runnable_total(&h), 5);
        }
    }
}

#[test]
fn a_vcpu_pinned_to_an_offlined_cpu_has_its_affinity_broken_and_runs_elsewhere() {
    for v in [V33, V420] {
        let mut h = harness(
            exact(v),
            flat(3),
            vec![params(0, 3), params(1, 3), pinned(2, 3, 2)],
        );
        wake_all(&mut h);
        h.run_for(ms(20), us(100));
        assert!(unit(&h, 2).pinned);
        assert_eq!(h.cpu_offline(2), vec![2]);
        let u = unit(&h, 2);
        assert!(!u.pinned, "{v:?}: the widened affinity holds every CPU");
        assert_eq!(u.hard, CpuSet::from_ids([0, 1]), "{v:?}");
        let before = h.run_ns[2];
        h.run_for(ms(300), us(100));
        assert!(h.run_ns[2] - before > ms(50), "{v:?}");
    }
}

#[test]
fn a_cpu_back_online_idles_ticks_and_is_used_again() {
    for v in [V33, V420] {
        let mut h = busy(v, 3, 5);
        h.cpu_offline(2);
        h.run_for(ms(100), us(100));
        assert_eq!(h.sched_timers[3], None, "{v:?}: no ticker while offline");
        let now = h.now;
        h.cpu_online(2);
        assert!(ops(&h).online.contains(CpuId(2)), "{v:?}");
        // 4.20: a fresh ticker one period on; 3.3: the ticker held while the CPU was down
        // fires at once.
        let at = if v == V420 { now + ms(10) } else { now };
        assert_eq!(h.sched_timers[3], Some(at), "{v:?}");
        for e in 0..5 {
            assert!(unit(&h, e).hard.contains(CpuId(2)), "{v:?}: vCPU {e}");
        }
        // The reschedule the core raises finds nothing queued there: a stealer or a tickle
        // brings work to it soon, and it stays busy.
        let mut busy_samples = 0;
        for _ in 0..3000 {
            h.run_for(us(100), us(100));
            busy_samples += h.curr(2).is_some() as u32;
        }
        assert!(
            busy_samples > 2500,
            "{v:?}: CPU 2 busy in {busy_samples} of 3000"
        );
        if v == V420 {
            assert_eq!(nr_runnable_total(&h), 5);
        }
    }
}
