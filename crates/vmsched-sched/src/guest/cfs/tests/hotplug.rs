//! CPU hot-plug in the guest (Linux v5.10 `sched_cpu_deactivate`, `sched_cpu_dying` →
//! `migrate_tasks`, `select_fallback_rq`, `sched_cpu_activate`), through the Linux core with
//! CFS as the fair class; the harness takes a CPU offline as the engine does.

use super::*;

/// Four CPU-bound tasks pinned to CPU 3 (three queued, one running), and one task on each other
/// CPU.
fn crowded_cpu3() -> Harness<CfsSched> {
    let mut ents: Vec<EntityParams> = (0..4).map(|i| pinned(i, 4, 3)).collect();
    ents.extend((4..7).map(|i| pinned(i, 4, i as u32 - 4)));
    let mut h = harness(4, ents);
    for e in 0..7 {
        fork_from(&mut h, e, 0);
        h.pump();
    }
    h.run_for(ms(30), ms(1));
    h
}

/// `migrate_tasks`: every task of the dying CPU goes to `select_fallback_rq`, the first online
/// CPU of its (here widened) affinity on the node, CPU 0: all four, none spread.
#[test]
fn migrate_tasks_moves_every_task_to_the_fallback_cpu() {
    let mut h = crowded_cpu3();
    assert_eq!(h.sched.cls.fair.rqs[3].nr_running, 4);
    let broken = h.cpu_offline(3);
    assert_eq!(broken, vec![0, 1, 2, 3], "their only CPU went away");
    for e in 0..4 {
        assert_eq!(cpu_of(&h, e), 0, "task {e} on the fallback CPU");
    }
    let rqs = &h.sched.cls.fair.rqs;
    assert_eq!(rqs[3].nr_running, 0);
    assert!(rqs[3].timeline.is_empty() && rqs[3].curr.is_none());
    assert_eq!(rqs[0].nr_running, 5, "the four joined task 4 on CPU 0");
}

/// An offline CPU takes no wake-up: a task that slept on it wakes elsewhere, even when the
/// CPU looks idle (CFS's idle search never considers it; the core would fall back).
#[test]
fn a_task_that_slept_on_an_offlined_cpu_wakes_on_an_online_one() {
    let mut h = harness(3, (0..3).map(|i| placed_on(i, 3, i as u32)).collect());
    for e in 0..3 {
        fork_from(&mut h, e, e);
        h.pump();
    }
    h.run_for(ms(10), ms(1));
    let on2 = h.curr(2).expect("CPU 2 busy");
    h.block(on2);
    h.pump();
    h.cpu_offline(2);
    wake_from(&mut h, on2, 0, false);
    h.pump();
    assert_ne!(cpu_of(&h, on2), 2);
    h.run_for(ms(100), ms(1));
    assert_eq!(h.curr(2), None, "nothing runs on the offline CPU");
    for _ in 0..200 {
        h.run_for(ms(1), ms(1));
        assert_eq!(h.curr(2), None);
    }
}

/// `sched_cpu_activate`: the CPU is usable again; balancing brings it work, and an affinity
/// broken at the offline stays wide (the task may now run anywhere).
#[test]
fn an_onlined_cpu_is_used_again_and_broken_affinities_stay_wide() {
    let mut h = crowded_cpu3();
    h.cpu_offline(3);
    h.run_for(ms(100), ms(1));
    h.cpu_online(3);
    let mut busy3 = 0;
    for _ in 0..500 {
        h.run_for(ms(1), ms(1));
        busy3 += h.curr(3).is_some() as u32;
    }
    assert!(busy3 > 400, "CPU 3 busy in {busy3} of 500 ms");
    for e in 0..4 {
        assert_eq!(
            h.ents[e].params.hard_affinity,
            vmsched_core::CpuSet::first_n(4)
        );
    }
}
