//! What the engine tells a scheduler through the seams of `vmsched_core::sched`: the cause,
//! waker and parent of each wake-up (`WakeInfo`), and the runstate of the entity backing each
//! CPU (`CpuInfo::backing`, x86 `vcpu_is_preempted`). A recording wrapper around the real
//! policies logs what the hooks see in whole simulations.

use std::sync::{Arc, Mutex};

use vmsched_core::sim::{LevelOpts, SimBuilder};
use vmsched_core::testkit::named;
use vmsched_core::workload::cpu_loop::CpuLoopConfig;
use vmsched_core::workload::program::{ProgramConfig, StepConfig};
use vmsched_core::{
    CpuId, CpuSet, CpuTopo, EntityId, Pick, Policy, RunState, SchedCtx, Scheduler, WakeCause,
    WakeInfo, NS_PER_MS, NS_PER_S,
};
use vmsched_sched::guest::cfs::Cfs;
use vmsched_sched::host::credit2::Credit2;

#[derive(Default)]
struct Log {
    wakes: Vec<(EntityId, WakeInfo)>,
    /// The backing runstate of every CPU of the level, at each tick.
    backing: Vec<Vec<RunState>>,
}

/// A policy that logs what its hooks see and otherwise is `inner`.
struct Recorder<S> {
    inner: S,
    log: Arc<Mutex<Log>>,
}

impl<S: Scheduler> Scheduler for Recorder<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn nr_timers(&self) -> u32 {
        self.inner.nr_timers()
    }
    fn tick_period(&self) -> Option<u64> {
        self.inner.tick_period()
    }
    fn insert(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        self.inner.insert(ctx, e)
    }
    fn wake(&mut self, ctx: &mut SchedCtx, e: EntityId, info: WakeInfo) {
        self.log.lock().unwrap().wakes.push((e, info));
        self.inner.wake(ctx, e, info)
    }
    fn block(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        self.inner.block(ctx, e)
    }
    fn yield_(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        self.inner.yield_(ctx, e)
    }
    fn schedule(&mut self, ctx: &mut SchedCtx, cpu: CpuId) -> Pick {
        self.inner.schedule(ctx, cpu)
    }
    fn context_saved(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        self.inner.context_saved(ctx, e)
    }
    fn tick(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        let states = (0..ctx.nr_cpus())
            .map(|c| ctx.cpu(CpuId(c as u32)).backing)
            .collect();
        self.log.lock().unwrap().backing.push(states);
        self.inner.tick(ctx, cpu)
    }
    fn on_timer(&mut self, ctx: &mut SchedCtx, key: u32) {
        self.inner.on_timer(ctx, key)
    }
}

fn ms_step(ms: u64) -> StepConfig {
    StepConfig::Compute {
        ns: None,
        us: None,
        ms: Some(ms),
        exp_us: None,
        uniform_us: None,
        kernel: false,
    }
}

/// One pCPU; a guest of one vCPU whose two tasks ping-pong a token and whose third sleeps.
#[test]
fn wake_info_carries_cause_waker_and_cpu() {
    let topo = [CpuTopo::default()];
    let mut b = SimBuilder::new(3);
    let host_log = Arc::new(Mutex::new(Log::default()));
    let guest_log = Arc::new(Mutex::new(Log::default()));
    let host = b.add_level(
        "host",
        Box::new(Recorder {
            inner: Credit2::sched(Default::default(), &topo, 1),
            log: host_log.clone(),
        }),
        LevelOpts::default(),
    );
    b.add_pcpus(host, &topo);
    let g = b.add_level(
        "g",
        Box::new(Recorder {
            inner: Cfs::sched(Default::default(), &topo),
            log: guest_log.clone(),
        }),
        LevelOpts::default(),
    );
    b.add_vcpu(host, g, named("g.v0", 0, 1), CpuTopo::default());
    let pingpong = ProgramConfig {
        name: "pp".into(),
        copies: 2,
        nice: 0,
        policy: Policy::Normal,
        rt_priority: 0,
        sched_runtime_ns: 0,
        sched_deadline_ns: 0,
        sched_period_ns: 0,
        affinity: None,
        channels: vec!["c".into()],
        tokens: vec![1],
        counters: vec![],
        start_us: 0,
        max_tasks: None,
        steps: vec![
            StepConfig::Wait {
                chan: "c".into(),
                block_cost_ns: 0,
            },
            ms_step(1),
            StepConfig::Signal {
                chan: "c".into(),
                sync: false,
                wake_cost_ns: 0,
            },
            StepConfig::Loop { to: 0, times: None },
        ],
    };
    b.add_workload(g, pingpong.build(), |i| named(&format!("pp.{i}"), 0, 1));
    let sleeper = ProgramConfig {
        name: "sl".into(),
        copies: 1,
        channels: vec![],
        tokens: vec![],
        steps: vec![
            StepConfig::Sleep {
                ns: None,
                us: None,
                ms: Some(5),
                exp_us: None,
                uniform_us: None,
                slack_ns: 0,
            },
            StepConfig::Loop { to: 0, times: None },
        ],
        ..pingpong.clone()
    };
    b.add_workload(g, sleeper.build(), |_| named("sl.0", 0, 1));
    let mut sim = b.build(100 * NS_PER_MS, 0, 0);
    sim.set_debug_checks(true);
    sim.run();

    let log = guest_log.lock().unwrap();
    let (pp0, pp1, sl) = (EntityId(0), EntityId(1), EntityId(2));
    let first: Vec<_> = log.wakes.iter().take(3).collect();
    assert!(
        first
            .iter()
            .all(|(_, i)| i.cause == WakeCause::Fork && i.is_new()),
        "every task's first wake-up is its fork: {first:?}"
    );
    let unblocks: Vec<_> = log
        .wakes
        .iter()
        .filter(|(_, i)| i.cause == WakeCause::Unblock)
        .collect();
    assert!(unblocks.len() > 10, "the ping-pong wakes: {unblocks:?}");
    for (e, i) in &unblocks {
        let other = if *e == pp0 { pp1 } else { pp0 };
        assert_eq!(i.waker, Some(other), "the partner wakes {e:?}");
        assert_eq!(i.waker_cpu, Some(CpuId(0)));
    }
    let timers: Vec<_> = log
        .wakes
        .iter()
        .filter(|(_, i)| i.cause == WakeCause::Timer)
        .collect();
    assert!(timers.len() >= 10, "the sleeper wakes every 5 ms");
    assert!(timers.iter().all(|(e, i)| *e == sl && i.waker.is_none()));

    // The vCPU was woken once as a new guest's first task appeared (a reschedule IPI to a
    // halted vCPU), and never by another vCPU.
    let hl = host_log.lock().unwrap();
    assert_eq!(hl.wakes[0].1.cause, WakeCause::Ipi);
    assert!(hl.wakes.iter().all(|(_, i)| i.waker.is_none()));
}

/// Two guests of two vCPUs on one pCPU: in `busy`, a hog per vCPU (the vCPU not running is
/// preempted); in `half`, one hog (its other vCPU is halted). Their ticks read the backing
/// state of both vCPUs.
#[test]
fn cpu_info_tells_preempted_from_halted() {
    let topo = [CpuTopo::default()];
    let gtopo = [
        CpuTopo::default(),
        CpuTopo {
            core: 1,
            ..Default::default()
        },
    ];
    let mut b = SimBuilder::new(5);
    let host = b.add_level(
        "host",
        Box::new(Credit2::sched(Default::default(), &topo, 2)),
        LevelOpts::default(),
    );
    b.add_pcpus(host, &topo);
    let mut logs = vec![];
    for (d, (name, hogs)) in [("busy", 2), ("half", 1)].into_iter().enumerate() {
        let log = Arc::new(Mutex::new(Log::default()));
        let l = b.add_level(
            name,
            Box::new(Recorder {
                inner: Cfs::sched(Default::default(), &gtopo),
                log: log.clone(),
            }),
            LevelOpts::default(),
        );
        for v in 0..2 {
            let mut p = named(&format!("{name}.v{v}"), d as u32, 1);
            p.hard_affinity = CpuSet::single(CpuId(0));
            b.add_vcpu(host, l, p, gtopo[v]);
        }
        let hog = CpuLoopConfig {
            name: "hog".into(),
            copies: hogs,
            nice: 0,
            affinity: None,
            pin_each: true,
        };
        b.add_workload(l, hog.build(2), |i| {
            let mut p = named(&format!("{name}.hog{i}"), 0, 2);
            p.hard_affinity = CpuSet::single(CpuId(i as u32));
            p.initial_cpu = CpuId(i as u32);
            p
        });
        logs.push(log);
    }
    let mut sim = b.build(NS_PER_S, 0, 0);
    sim.set_debug_checks(true);
    sim.run();

    // A tick runs on an executing vCPU: its own backing entity is running.
    let busy = logs[0].lock().unwrap();
    assert!(busy.backing.len() > 50);
    let preempted = busy
        .backing
        .iter()
        .filter(|s| s.contains(&RunState::Runnable))
        .count();
    assert!(
        preempted > busy.backing.len() / 2,
        "with a hog on each vCPU, the other vCPU is mostly preempted: {preempted} of {}",
        busy.backing.len()
    );
    assert!(busy.backing.iter().all(|s| !s.contains(&RunState::Blocked)));
    let half = logs[1].lock().unwrap();
    assert!(half.backing.len() > 50);
    assert!(
        half.backing
            .iter()
            .all(|s| s[0] == RunState::Running && s[1] == RunState::Blocked),
        "the idle vCPU is halted, not preempted"
    );
}
