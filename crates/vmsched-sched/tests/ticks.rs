//! Guest tick options on whole scenarios: NO_HZ idle (the default: no tick on an idle CPU, so
//! a sleeping guest's vCPU stays halted) against a periodic tick (every tick wakes the halted
//! vCPU), the tick grid's phase drawn from the seed per kernel (every CPU of a guest on one
//! grid, as Linux aligns them), and `skew_tick`.

use vmsched_core::trace::{Record, Trace};

/// One pCPU; guest `g` has `vcpus` vCPUs and one task that computes 100 µs every 50 ms.
fn scenario(kernel: &str, vcpus: u32, seed: u64) -> String {
    format!(
        "name = \"t\"\n[run]\nduration_ms = 1000\nwarmup_ms = 0\nseed = {seed}\n\
         [machine]\npcpus = 1\narch = \"arm64\"\n[host]\nscheduler = \"credit2\"\n\
         [[domain]]\nname = \"g\"\nvcpus = {vcpus}\n[domain.kernel]\n{kernel}\n\
         [domain.sched]\nscheduler = \"cfs\"\nhz = 250\n\
         [[domain.workload]]\nkind = \"program\"\nname = \"app\"\n\
         steps = [{{ op = \"compute\", us = 100 }}, {{ op = \"sleep\", ms = 50 }}, \
         {{ op = \"loop\", to = 0 }}]\n"
    )
}

fn run(text: &str) -> (vmsched_core::report::Results, Trace) {
    let s = vmsched_sched::load("t.toml", text, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.enable_trace(10_000_000);
    sim.run();
    (sim.results(), sim.take_trace().unwrap())
}

/// (time, guest CPU index within its level) of every guest tick when it fires. A tick that
/// fires on a vCPU that is not executing is recorded `held`, and again when it is delivered;
/// the delivery is not a new tick (the next tick is armed only at delivery).
fn ticks(tr: &Trace) -> Vec<(u64, u32)> {
    let host = tr.meta.cpus[0].level;
    let first_guest = tr.meta.cpus.iter().position(|c| c.level != host).unwrap() as u32;
    let mut pending = vec![false; tr.meta.cpus.len()];
    let mut out = Vec::new();
    for r in &tr.records {
        if let Record::Tick {
            t,
            level,
            cpu,
            held,
        } = *r
        {
            if level == host {
                continue;
            }
            let was = std::mem::replace(&mut pending[cpu.idx()], held);
            if held || !was {
                out.push((t, cpu.0 - first_guest));
            }
        }
    }
    out
}

fn vcpu_runs(r: &vmsched_core::report::Results) -> u64 {
    r.entities.iter().find(|e| e.name == "g.v0").unwrap().runs
}

#[test]
fn nohz_idle_is_the_default_and_a_periodic_tick_wakes_the_idle_vcpu() {
    let (nohz, tr_nohz) = run(&scenario("", 1, 1));
    let (explicit, _) = run(&scenario("tick = \"nohz_idle\"", 1, 1));
    assert_eq!(vcpu_runs(&nohz), vcpu_runs(&explicit));
    // NO_HZ idle: the vCPU wakes for the task's timer only (20 periods of 50 ms in 1 s), and
    // ticks only while the task runs (100 µs of every 50 ms: almost never).
    let n = vcpu_runs(&nohz);
    assert!((20..=22).contains(&n), "{n} runs");
    assert!(ticks(&tr_nohz).len() <= 3, "{:?}", ticks(&tr_nohz));
    // Periodic (HZ = 250): the tick wakes the halted vCPU every 4 ms: 250 ticks in 1 s.
    let (per, tr_per) = run(&scenario("tick = \"periodic\"", 1, 1));
    let t = ticks(&tr_per);
    assert!((248..=251).contains(&t.len()), "{} ticks", t.len());
    for w in t.windows(2) {
        assert_eq!(w[1].0 - w[0].0, 4_000_000, "one tick every 4 ms");
    }
    let n = vcpu_runs(&per);
    assert!(n >= 240, "the vCPU runs for every tick: {n} runs");
}

#[test]
fn the_tick_phase_is_drawn_from_the_seed_and_shared_by_the_cpus_of_a_guest() {
    let p = 4_000_000u64;
    let phase_of = |tr: &Trace| {
        let t = ticks(tr);
        assert!(!t.is_empty());
        let ph = t[0].0 % p;
        for &(at, _) in &t {
            assert_eq!(at % p, ph, "every CPU of the guest ticks on one grid");
        }
        ph
    };
    // Two vCPUs, periodic so that both tick.
    let phases: Vec<u64> = (1..=4)
        .map(|seed| phase_of(&run(&scenario("tick = \"periodic\"", 2, seed)).1))
        .collect();
    assert!(
        phases.windows(2).any(|w| w[0] != w[1]),
        "the phase depends on the seed: {phases:?}"
    );
    assert_eq!(
        phase_of(&run(&scenario("tick = \"periodic\"", 2, 3)).1),
        phases[2],
        "and only on it"
    );
    // skew_tick: CPU i of n ticks i × period / (2n) later than CPU 0 (Linux).
    let (_, tr) = run(&scenario("tick = \"periodic\"\nskew_tick = true", 2, 1));
    let t = ticks(&tr);
    let ph = |cpu: u32| t.iter().find(|x| x.1 == cpu).unwrap().0 % p;
    assert_eq!((ph(1) + p - ph(0)) % p, p / 4, "{:?}", &t[..6]);
}
