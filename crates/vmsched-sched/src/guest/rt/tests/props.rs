//! §3.1 as a property: whatever the sequence of wake-ups, blocks, yields and ticks, once the
//! reschedules are delivered, no CPU runs a lower class (or idles) while an RT task that may
//! run there waits, and every CPU runs its highest-priority RT task; with throttling (§3.3) or
//! the fair server (§3.6), the same holds on every CPU whose RT queue is not held back.
use super::*;
use proptest::prelude::*;

/// One step of the random schedule.
#[derive(Clone, Debug)]
enum Op {
    Wake(u32, Option<u32>),
    Block(u32),
    Yield(u32),
    Run(u64),
}

fn op(n: u32, ncpus: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..n, proptest::option::of(0..ncpus)).prop_map(|(e, w)| Op::Wake(e, w)),
        (0..n).prop_map(Op::Block),
        (0..n).prop_map(Op::Yield),
        (1u64..100_000_000).prop_map(Op::Run),
    ]
}

/// A task: fair (priority 0) or RT of a policy and priority, pinned or free.
fn task() -> impl Strategy<Value = (u32, bool, Option<u32>)> {
    (
        prop_oneof![Just(0u32), 1u32..100],
        any::<bool>(),
        proptest::option::of(0u32..3),
    )
}

/// The checks after the reschedules settled. With throttling or the fair server, a throttled
/// CPU's RT tasks are not eligible (§3.3), nor are they while the CPU's fair server runs
/// (§3.6), so only the other CPUs are checked, and only the per-CPU rule.
fn check(h: &Harness<CfsSched>, throttling: bool) -> Result<(), TestCaseError> {
    let rt = &h.sched.cls.rt;
    let ncpus = h.cpus.len();
    for c in 0..ncpus {
        let rq = &rt.rqs[c];
        let lx_rq = &h.sched.rq[c];
        let server_runs = rt.fair_server.as_ref().is_some_and(|s| {
            s[c].active && s[c].running && !s[c].throttled && lx_rq.cfs_nr_running > 0
        });
        if rq.nr_running == 0 || rq.throttled || server_runs {
            continue;
        }
        let curr = h.curr(c as u32);
        prop_assert!(
            curr.is_some_and(|e| rt.owns(EntityId(e))),
            "CPU {c} has {} RT task(s) queued but runs {curr:?}",
            rq.nr_running
        );
        let e = EntityId(curr.unwrap());
        prop_assert_eq!(
            rt.prio(e),
            rq.highest_prio(),
            "CPU {} runs a lower RT task",
            c
        );
    }
    if throttling {
        return Ok(());
    }
    // No RT task waits while a CPU of its affinity runs something of lower priority.
    for (i, t) in rt.tasks.iter().enumerate() {
        let e = EntityId(i as u32);
        if !t.owned || !t.on_rq || h.ents[i].on_cpu.is_some() {
            continue;
        }
        for c in h.ents[i].params.hard_affinity.iter() {
            let lower = match h.curr(c.0) {
                None => true,
                Some(x) => !rt.owns(EntityId(x)) || rt.prio(EntityId(x)) > t.prio,
            };
            prop_assert!(
                !lower,
                "RT task {} (prio {}) waits on CPU {} while CPU {} runs {:?}",
                e.0,
                t.prio,
                t.cpu.0,
                c.0,
                h.curr(c.0)
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn rt_never_waits_behind_a_lower_class(
        tasks in proptest::collection::vec(task(), 2..7),
        ops in proptest::collection::vec(op(7, 3), 1..120),
        mode in 0u8..3,
    ) {
        let ncpus = 3;
        let ents: Vec<EntityParams> = tasks
            .iter()
            .enumerate()
            .map(|(i, &(prio, is_rr, pin))| {
                let p = match pin {
                    Some(c) => pinned(i, ncpus, c),
                    None => params(i, ncpus),
                };
                match (prio, is_rr) {
                    (0, _) => p,
                    (_, true) => rr(p, prio),
                    (_, false) => fifo(p, prio),
                }
            })
            .collect();
        let n = ents.len() as u32;
        // 0: no bandwidth control, 1: RT throttling (5.10), 2: the fair server (6.12).
        let mut p = CfsParams::default();
        match mode {
            0 => p.rt.sched_rt_runtime_us = -1,
            2 => p.rt.fair_server = Some(true),
            _ => {}
        }
        let throttling = mode != 0;
        let mut h = harness_with(p, ncpus, ents);
        let mut forked = vec![false; n as usize];
        for o in ops {
            match o {
                Op::Wake(e, w) if e < n && !h.ents[e as usize].runnable => {
                    let cause = if forked[e as usize] { WakeCause::Unblock } else { WakeCause::Fork };
                    forked[e as usize] = true;
                    h.wake(e, WakeInfo { cause, waker_cpu: w.map(CpuId), ..Default::default() });
                }
                Op::Block(e) if e < n && h.ents[e as usize].on_cpu.is_some() => {
                    h.block(e);
                }
                Op::Yield(e) if e < n && h.ents[e as usize].on_cpu.is_some() => {
                    h.yield_(e);
                }
                Op::Run(d) => h.run_for(d, 1_000_000),
                _ => continue,
            }
            h.pump();
            check(&h, throttling)?;
        }
    }
}
