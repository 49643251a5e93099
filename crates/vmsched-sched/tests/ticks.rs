//! Guest timers and tick options on whole scenarios: a task's sleep timer is held while its
//! vCPU is away; NO_HZ idle (the default: no tick on an idle CPU, so a sleeping guest's vCPU
//! stays halted) against a periodic tick (every tick wakes the halted vCPU); the tick grid's
//! phase drawn from the seed per kernel (every CPU of a guest on one grid, as Linux aligns
//! them); and `skew_tick`.

use vmsched_core::trace::{Record, Trace};

/// One pCPU; guest `g` has `vcpus` vCPUs and one task that computes 100 µs every 50 ms.
fn scenario(kernel: &str, vcpus: u32, seed: u64) -> String {
    format!(
        "name = \"t\"\n[run]\nvary = false\nduration_ms = 1000\nwarmup_ms = 0\nseed = {seed}\n\
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

/// A guest task's sleep timer is per CPU: it fires on the vCPU the task slept on, is held while
/// that vCPU is away (preempted at the host), and expires the moment the vCPU is switched back
/// in, never before. Here the guest's only vCPU shares pCPU 0 with a spinning domain under
/// 4.20.2 with R = 5 ms, so it is away for 5 ms at a time while the task sleeps 1 ms.
#[test]
fn a_guest_timer_is_held_while_its_vcpu_is_away_and_fires_when_it_returns() {
    let text = "name = \"t\"\n[run]\nvary = false\nduration_ms = 300\nwarmup_ms = 0\nseed = 1\n\
         [machine]\npcpus = 1\narch = \"arm64\"\n[host]\nscheduler = \"credit2\"\n\
         version = \"4.20.2\"\nratelimit_us = 5000\n\
         [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"program\"\nname = \"app\"\n\
         steps = [{ op = \"compute\", us = 300 }, { op = \"sleep\", ms = 1 }, \
         { op = \"loop\", to = 0 }]\n\
         [[domain]]\nname = \"h\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"spin\"\n";
    let (_, tr) = run(text);
    let host = tr.meta.cpus[0].level;
    let vcpu = tr.meta.ents.iter().position(|e| e.name == "g.v0").unwrap() as u32;
    let (mut held, mut checked) = (None::<u64>, 0);
    for r in &tr.records {
        match *r {
            Record::Timer {
                t, held: true, cpu, ..
            } => {
                let backing = tr.meta.cpus[cpu.idx()].backing.unwrap();
                assert_eq!(backing.0, vcpu, "the timer is on the task's own vCPU");
                held = Some(t);
            }
            Record::Timer { t, held: false, .. } => {
                if let Some(h) = held.take() {
                    assert!(t >= h);
                    checked += 1;
                }
            }
            Record::Switch { t, level, next, .. }
                if level == host && next.map(|n| n.0) == Some(vcpu) =>
            {
                if let Some(h) = held {
                    // The vCPU is back: the held timer must be delivered at this instant.
                    let delivered = tr
                        .records
                        .iter()
                        .any(|x| matches!(*x, Record::Timer { t: u, held: false, .. } if u == t));
                    assert!(
                        delivered,
                        "timer held at {h} not delivered at the switch-in {t}"
                    );
                }
            }
            _ => {}
        }
    }
    assert!(checked >= 10, "held timers seen: {checked}");
}
