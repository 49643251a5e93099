//! Unit tests of ARINC653, one per rule of xen-schedulers.md §5 (and of `arinc653.c` where the
//! spec is short). The whole-simulator check that a run follows its table to the nanosecond is
//! in `crates/vmsched-sched/tests/xen_family.rs`.

use super::*;
use vmsched_core::sched::EntityParams;
use vmsched_core::testkit::{params, pinned, Harness};
use vmsched_core::time::{ms, us};

const MS: i64 = 1_000_000;

fn exact() -> Arinc653Params {
    Arinc653Params {
        timer_slop_ns: 0,
        timer_entry_ns: 0,
        ..Default::default()
    }
}

/// Entities `params(i, ncpus)` (domain i, vCPU 0) under `table`.
fn harness(
    ncpus: usize,
    ents: Vec<EntityParams>,
    table: Option<(Vec<Slot>, i64)>,
) -> Harness<Arinc653Sched> {
    Harness::new(Arinc653::sched(&exact(), ncpus, table), ncpus, ents)
}

/// Slots (domain, ms) for vCPU 0 of each domain.
fn table(slots: &[(u32, i64)], major_ms: i64) -> Option<(Vec<Slot>, i64)> {
    Some((
        slots
            .iter()
            .map(|&(d, r)| Slot::new(d, 0, r * MS))
            .collect(),
        major_ms * MS,
    ))
}

fn wake(h: &mut Harness<Arinc653Sched>, e: u32) {
    h.wake(e, WakeInfo::default());
}

/// Runs CPU `cpu`'s schedule at its timer, `n` times; returns (start ms ×1000, entity) of each.
fn follow(h: &mut Harness<Arinc653Sched>, cpu: u32, n: usize) -> Vec<(u64, Option<u32>)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let at = h.timer[cpu as usize].expect("the CPU always has a timer");
        h.advance(at - h.now);
        h.schedule(cpu);
        out.push((h.now / 1000, h.curr(cpu)));
    }
    out
}

/// §5 validation (`arinc653_sched_set`): 1..=64 slots, each runtime > 0, their sum within the
/// major frame; each error names its field.
#[test]
fn the_table_is_validated_by_field() {
    let slot = |r| SlotConfig {
        domain: "a".into(),
        vcpu: 0,
        runtime_us: r,
    };
    let p = |slots: Vec<SlotConfig>, major| Arinc653Params {
        schedule: Some(slots),
        major_frame_us: major,
        ..Default::default()
    };
    assert!(p(vec![slot(5000), slot(5000)], None).validate().is_ok());
    assert!(p(vec![slot(5000)], Some(5000)).validate().is_ok());
    let err = |q: Arinc653Params| q.validate().unwrap_err();
    assert!(err(p(vec![], None)).starts_with("schedule:"));
    assert!(err(p(vec![slot(1); 65], None)).starts_with("schedule:"));
    assert!(err(p(vec![slot(10), slot(0)], None)).starts_with("schedule.1.runtime_us:"));
    assert!(err(p(vec![slot(3000), slot(3000)], Some(5000))).starts_with("major_frame_us:"));
    let q = Arinc653Params {
        major_frame_us: Some(10_000),
        ..Default::default()
    };
    assert!(err(q).starts_with("major_frame_us:"));
    assert_eq!(
        p(vec![slot(3000), slot(4000)], None).major_frame_ns(),
        Some(7 * MS)
    );
}

/// §5 defaults (4.20): the table starts empty and every vCPU of domain 0 appends a 10 ms slot,
/// the major frame growing by as much; other domains get none.
#[test]
fn default_table_gives_each_dom0_vcpu_10ms() {
    let mut ents: Vec<EntityParams> = (0..3).map(|i| params(i, 1)).collect();
    ents[1].group = 0; // dom0 has vCPUs 0 and 1 (entities 0 and 1); entity 2 is domain 2.
    let h = harness(1, ents, None);
    let (slots, major) = h.sched.ops.table();
    let got: Vec<(u32, u32, i64)> = slots
        .iter()
        .map(|s| (s.domain, s.vcpu, s.runtime))
        .collect();
    assert_eq!(got, vec![(0, 0, 10 * MS), (0, 1, 10 * MS)]);
    assert_eq!(major, 20 * MS);
}

/// §5 do_schedule: the first reschedule starts a major frame; each slot runs its vCPU until the
/// slot's end (the slice), in table order; past the last slot the CPU idles to the frame's end;
/// then the next frame starts.
#[test]
fn slots_run_in_order_then_idle_to_the_frame_end() {
    let ents = (0..3).map(|i| params(i, 1)).collect();
    let mut h = harness(1, ents, table(&[(0, 2), (1, 3), (2, 1)], 8));
    for e in 0..3 {
        wake(&mut h, e);
    }
    assert_eq!(h.take_resched(), vec![0]);
    let pick = h.schedule(0);
    assert_eq!((pick.next, pick.slice), (Some(EntityId(0)), Some(ms(2))));
    let seen = follow(&mut h, 0, 8);
    assert_eq!(
        seen,
        vec![
            (2000, Some(1)),
            (5000, Some(2)),
            (6000, None),
            (8000, Some(0)),
            (10_000, Some(1)),
            (13_000, Some(2)),
            (14_000, None),
            (16_000, Some(0)),
        ]
    );
}

/// §5: a slot whose vCPU is blocked (or never woken) idles for the whole slot; nobody else gets
/// the time, and the CPU still reschedules at the slot's end.
#[test]
fn a_blocked_partitions_slot_is_wasted() {
    let ents = (0..2).map(|i| params(i, 1)).collect();
    let mut h = harness(1, ents, table(&[(0, 2), (1, 2)], 4));
    wake(&mut h, 1);
    let pick = h.schedule(0);
    assert_eq!(
        (pick.next, pick.slice),
        (None, Some(ms(2))),
        "vCPU 0 is not awake"
    );
    let seen = follow(&mut h, 0, 3);
    assert_eq!(seen, vec![(2000, Some(1)), (4000, None), (6000, Some(1))]);
    // vCPU 1 blocks in its slot: idle until the slot's end, not given away.
    h.advance(us(500));
    let pick = h.block(1);
    assert_eq!((pick.next, pick.slice), (None, Some(us(1500))));
}

/// §5 wake: the vCPU's CPU reschedules, and a vCPU woken inside its own slot runs for the rest
/// of it.
#[test]
fn a_wake_inside_its_slot_runs_for_the_rest_of_it() {
    let ents = (0..2).map(|i| params(i, 1)).collect();
    let mut h = harness(1, ents, table(&[(0, 2), (1, 2)], 4));
    wake(&mut h, 1);
    h.schedule(0);
    h.advance(us(700));
    wake(&mut h, 0);
    assert_eq!(h.take_resched(), vec![0]);
    let pick = h.schedule(0);
    assert_eq!((pick.next, pick.slice), (Some(EntityId(0)), Some(us(1300))));
}

/// §5 sleep: a paused vCPU is asleep; its CPU reschedules and idles for the rest of the slot.
#[test]
fn a_paused_vcpu_is_asleep() {
    let mut h = harness(1, vec![params(0, 1)], table(&[(0, 5)], 5));
    wake(&mut h, 0);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    h.advance(ms(1));
    h.set_paused(0, true);
    h.pump();
    assert_eq!(h.curr(0), None);
    assert_eq!(h.timer[0], Some(ms(5)));
    h.set_paused(0, false);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
}

/// §5 step 1 (4.20): a frame that has ended is followed by one that starts when the CPU
/// reschedules, not at the old frame's end: a late reschedule shifts every later slot.
#[test]
fn a_late_reschedule_shifts_the_next_frame() {
    let mut h = harness(
        1,
        vec![params(0, 1), params(1, 1)],
        table(&[(0, 1), (1, 1)], 2),
    );
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.schedule(0);
    h.advance(ms(1));
    h.schedule(0);
    // The frame ends at 2 ms; the CPU reschedules 30 µs late.
    h.advance(ms(1) + us(30));
    let pick = h.schedule(0);
    assert_eq!((pick.next, pick.slice), (Some(EntityId(0)), Some(ms(1))));
    let seen = follow(&mut h, 0, 2);
    assert_eq!(seen, vec![(3030, Some(1)), (4030, Some(0))]);
}

/// §5: an empty table (the default with no domain-0 vCPU) idles and re-checks every 10 ms.
#[test]
fn an_empty_table_idles_in_10ms_steps() {
    let mut p = params(0, 1);
    p.group = 1;
    let mut h = harness(1, vec![p], None);
    assert!(h.sched.ops.table().0.is_empty());
    wake(&mut h, 0);
    let pick = h.schedule(0);
    assert_eq!((pick.next, pick.slice), (None, Some(ms(10))));
}

/// A slot whose vCPU does not exist idles; a removed vCPU's slot idles from then on.
#[test]
fn slots_of_missing_or_removed_vcpus_idle() {
    // Domain 5 does not exist.
    let mut h = harness(1, vec![params(0, 1)], table(&[(5, 1), (0, 1)], 2));
    wake(&mut h, 0);
    assert_eq!(h.schedule(0).next, None);
    assert_eq!(follow(&mut h, 0, 1), vec![(1000, Some(0))]);
    h.set_paused(0, true);
    h.pump();
    h.remove(0);
    assert!(h.sched.ops.table().0.iter().all(|s| s.unit.is_none()));
}

/// Several CPUs (upstream's code, one frame and index for the pool): a slot's vCPU runs only on
/// its own CPU; every other CPU idles through the slot, rescheduling at its end.
#[test]
fn with_two_cpus_only_the_slots_vcpu_runs_on_its_cpu() {
    let ents = vec![pinned(0, 2, 0), pinned(1, 2, 1)];
    let mut h = harness(2, ents, table(&[(0, 2), (1, 3)], 5));
    wake(&mut h, 0);
    wake(&mut h, 1);
    assert_eq!(h.take_resched(), vec![0, 1]);
    let p0 = h.schedule(0);
    let p1 = h.schedule(1);
    assert_eq!((p0.next, p0.slice), (Some(EntityId(0)), Some(ms(2))));
    assert_eq!(
        (p1.next, p1.slice),
        (None, Some(ms(2))),
        "slot 0 belongs to CPU 0's vCPU"
    );
    h.advance(ms(2));
    let p0 = h.schedule(0);
    let p1 = h.schedule(1);
    assert_eq!((p0.next, p0.slice), (None, Some(ms(3))));
    assert_eq!((p1.next, p1.slice), (Some(EntityId(1)), Some(ms(3))));
}

/// Whole scenario: a slot must name a domain of the scenario and one of its vCPUs, and the
/// table's own checks come back with the `host.` path.
#[test]
fn scenario_table_errors_name_the_field() {
    let src = |schedule: &str| {
        format!(
            "[machine]\npcpus = 1\n[host]\nscheduler = \"arinc653\"\nschedule = [{schedule}]\n\
             [[domain]]\nname = \"a\"\nvcpus = 2\n[domain.sched]\nscheduler = \"cfs\"\n"
        )
    };
    let load = |s: &str| crate::build::load("t.toml", &src(s), &[]);
    assert!(load("{ domain = \"a\", vcpu = 1, runtime_us = 1000 }").is_ok());
    let e = load("{ domain = \"a\", vcpu = 0, runtime_us = 10 }, { domain = \"b\", vcpu = 0, runtime_us = 10 }")
        .unwrap_err();
    assert_eq!(e.field, "host.schedule.1.domain", "{e}");
    let e = load("{ domain = \"a\", vcpu = 2, runtime_us = 10 }").unwrap_err();
    assert_eq!(e.field, "host.schedule.0.vcpu", "{e}");
    let e = load("{ domain = \"a\", vcpu = 0, runtime_us = 0 }").unwrap_err();
    assert_eq!(e.field, "host.schedule.0.runtime_us", "{e}");
}
