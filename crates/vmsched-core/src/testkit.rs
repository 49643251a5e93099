//! A minimal driver for scheduler unit tests: one level, no workloads, time moved by hand.
//!
//! It applies a scheduler's decisions the way the engine does (switches the current entity,
//! calls `context_saved`, records requests) but lets the test choose every event, so a test can
//! set up exactly the situation a spec rule talks about and assert the decision.

use crate::cpuset::CpuSet;
use crate::ids::{CpuId, EntityId};
use crate::sched::{
    CpuInfo, CpuTopo, EntityInfo, EntityParams, LevelClock, LinuxAttr, Pick, Request, RunState,
    SchedCtx, Scheduler, WakeInfo, XenAttr,
};
use crate::time::{Nanos, SimTime};

pub struct Harness<S: Scheduler> {
    pub sched: S,
    pub now: SimTime,
    pub clock: LevelClock,
    pub cpus: Vec<CpuInfo>,
    pub ents: Vec<EntityInfo>,
    /// Requests not yet taken by the test.
    pub requests: Vec<Request>,
    /// Slice of the last pick per CPU, as an absolute deadline.
    pub timer: Vec<Option<SimTime>>,
    /// Running time of each entity so far (accumulated by `advance`).
    pub run_ns: Vec<Nanos>,
    /// The scheduler's own timers as last armed (by key), for `run_for`.
    pub sched_timers: Vec<Option<SimTime>>,
    /// Whether the scheduler holds each entity paused (`Request::Pause`), as of the last `pump`.
    pub paused: Vec<bool>,
}

// ------------------------------------------------------------------------------------------
// Entity parameters
// ------------------------------------------------------------------------------------------

/// Default parameters for test entity `i` on `ncpus` CPUs: weight 256, nice 0, any CPU, first
/// placed on CPU `i % ncpus`.
pub fn params(i: usize, ncpus: usize) -> EntityParams {
    EntityParams {
        name: format!("e{i}"),
        group: i as u32,
        xen: XenAttr::default(),
        linux: LinuxAttr::default(),
        hard_affinity: CpuSet::first_n(ncpus),
        soft_affinity: CpuSet::first_n(ncpus),
        initial_cpu: CpuId((i % ncpus) as u32),
    }
}

/// `params(i, ncpus)` hard-pinned to CPU `cpu` (and first placed there).
pub fn pinned(i: usize, ncpus: usize, cpu: u32) -> EntityParams {
    pinned_to(params(i, ncpus), cpu)
}

/// `p` hard-pinned to CPU `cpu` (and first placed there); soft affinity unchanged.
pub fn pinned_to(mut p: EntityParams, cpu: u32) -> EntityParams {
    p.hard_affinity = CpuSet::single(CpuId(cpu));
    p.initial_cpu = CpuId(cpu);
    p
}

/// `params(i, ncpus)` free to run anywhere but first placed on CPU `initial`.
pub fn placed_on(i: usize, ncpus: usize, initial: u32) -> EntityParams {
    let mut p = params(i, ncpus);
    p.initial_cpu = CpuId(initial);
    p
}

/// Default parameters with a chosen name and group (domain or task group), allowed on the first
/// `ncpus` CPUs and first placed on CPU 0: for entities built with `SimBuilder` by name.
pub fn named(name: &str, group: u32, ncpus: usize) -> EntityParams {
    EntityParams {
        name: name.into(),
        group,
        xen: XenAttr::default(),
        linux: LinuxAttr::default(),
        hard_affinity: CpuSet::first_n(ncpus),
        soft_affinity: CpuSet::first_n(ncpus),
        initial_cpu: CpuId(0),
    }
}

// ------------------------------------------------------------------------------------------
// Topologies
// ------------------------------------------------------------------------------------------

/// `n` CPUs on one socket, one core each, one shared LLC (the harness's default machine).
pub fn flat(n: usize) -> Vec<CpuTopo> {
    (0..n)
        .map(|c| CpuTopo {
            core: c as u32,
            ..Default::default()
        })
        .collect()
}

/// `n` CPUs (`n` even) on one socket as SMT pairs: CPUs `2k` and `2k + 1` are the two threads
/// of core `k`.
pub fn smt_pairs(n: usize) -> Vec<CpuTopo> {
    (0..n as u32)
        .map(|c| CpuTopo {
            core: c / 2,
            thread: c % 2,
            ..Default::default()
        })
        .collect()
}

/// `sockets` sockets of `cores` single-thread cores, one NUMA node per socket: CPU `c` is core
/// `c % cores` of socket and node `c / cores`.
pub fn sockets(sockets: usize, cores: usize) -> Vec<CpuTopo> {
    let cores = cores as u32;
    (0..sockets as u32 * cores)
        .map(|c| CpuTopo {
            socket: c / cores,
            core: c % cores,
            node: c / cores,
            ..Default::default()
        })
        .collect()
}

/// `n` single-thread cores on one socket, split into last-level-cache domains of `per_llc`
/// consecutive CPUs.
pub fn llcs(n: usize, per_llc: usize) -> Vec<CpuTopo> {
    let per = per_llc as u32;
    (0..n as u32)
        .map(|c| CpuTopo {
            core: c,
            llc: c / per,
            ..Default::default()
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// Harness
// ------------------------------------------------------------------------------------------

impl<S: Scheduler> Harness<S> {
    /// `ncpus` CPUs on one socket, one core each, one shared LLC.
    pub fn new(sched: S, ncpus: usize, ents: Vec<EntityParams>) -> Self {
        Self::with_topology(sched, flat(ncpus), ents)
    }

    pub fn with_topology(sched: S, topo: Vec<CpuTopo>, ents: Vec<EntityParams>) -> Self {
        let cpus: Vec<CpuInfo> = topo
            .into_iter()
            .map(|t| CpuInfo {
                curr: None,
                executing: true,
                backing: RunState::Running,
                steal_ns: 0,
                topo: t,
                online: true,
            })
            .collect();
        let n = cpus.len();
        let ents: Vec<EntityInfo> = ents
            .into_iter()
            .map(|p| EntityInfo {
                runnable: false,
                on_cpu: None,
                params: p,
            })
            .collect();
        let nt = sched.nr_timers() as usize;
        let ne = ents.len();
        let mut h = Harness {
            run_ns: vec![0; ne],
            paused: vec![false; ne],
            sched_timers: vec![None; nt],
            sched,
            now: 0,
            clock: LevelClock::default(),
            cpus,
            ents,
            requests: Vec::new(),
            timer: vec![None; n],
        };
        for e in 0..h.ents.len() {
            h.with_ctx(|s, ctx| s.insert(ctx, EntityId(e as u32)));
        }
        h
    }

    fn with_ctx<R>(&mut self, f: impl FnOnce(&mut S, &mut SchedCtx) -> R) -> R {
        let mut ctx = SchedCtx::new(
            self.now,
            self.clock,
            &self.cpus,
            &self.ents,
            &mut self.requests,
        );
        f(&mut self.sched, &mut ctx)
    }

    pub fn advance(&mut self, d: Nanos) {
        for c in &self.cpus {
            if let Some(e) = c.curr {
                self.run_ns[e.idx()] += d;
            }
        }
        self.now += d;
    }

    /// Drives the level for `dur` in steps of `step`: delivers reschedule requests, runs CPU
    /// timers (slices), the tick of busy CPUs (at the policy's tick period, aligned) and the
    /// policy's own timers. Entities never block on their own: they are CPU-bound.
    pub fn run_for(&mut self, dur: Nanos, step: Nanos) {
        let end = self.now + dur;
        let tick = self.sched.tick_period();
        while self.now < end {
            self.pump();
            let mut next = (self.now + step).min(end);
            for t in self.timer.iter().chain(self.sched_timers.iter()).flatten() {
                if *t > self.now && *t < next {
                    next = *t;
                }
            }
            if let Some(p) = tick {
                next = next.min((self.now / p + 1) * p);
            }
            let d = next - self.now;
            self.advance(d);
            if let Some(p) = tick {
                if self.now.is_multiple_of(p) {
                    for c in 0..self.cpus.len() {
                        if self.cpus[c].curr.is_some() {
                            self.tick(c as u32);
                        }
                    }
                }
            }
            for k in 0..self.sched_timers.len() {
                if matches!(self.sched_timers[k], Some(t) if t <= self.now) {
                    self.sched_timers[k] = None;
                    self.fire_timer(k as u32);
                }
            }
            self.run_due_timers();
        }
        self.pump();
    }

    /// Applies pending requests until none are left: timers are recorded (asserting each key is
    /// below `nr_timers()` and no deadline is in the past), reschedules delivered.
    pub fn pump(&mut self) {
        for _ in 0..1000 {
            for (k, at) in self.take_timers() {
                let nt = self.sched_timers.len();
                assert!(
                    (k as usize) < nt,
                    "timer key {k} not below nr_timers() = {nt}"
                );
                if let Some(t) = at {
                    assert!(
                        t >= self.now,
                        "timer {k} armed at {t}, before now {}",
                        self.now
                    );
                }
                self.sched_timers[k as usize] = at;
            }
            self.take_pauses();
            if self.deliver_resched().is_empty() {
                return;
            }
        }
        panic!("reschedule requests never settle");
    }

    pub fn curr(&self, c: u32) -> Option<u32> {
        self.cpus[c as usize].curr.map(|e| e.0)
    }

    /// Wakes `e` (marks it runnable, calls `wake`).
    pub fn wake(&mut self, e: u32, info: WakeInfo) {
        let e = EntityId(e);
        assert!(!self.ents[e.idx()].runnable, "wake of a runnable entity");
        self.ents[e.idx()].runnable = true;
        self.with_ctx(|s, ctx| s.wake(ctx, e, info));
    }

    /// The current entity of its CPU blocks; its CPU reschedules at once.
    pub fn block(&mut self, e: u32) -> Pick {
        let e = EntityId(e);
        let cpu = self.ents[e.idx()]
            .on_cpu
            .expect("block of an entity that is not running");
        self.ents[e.idx()].runnable = false;
        self.with_ctx(|s, ctx| s.block(ctx, e));
        self.schedule(cpu.0)
    }

    /// The current entity of its CPU yields; its CPU reschedules at once.
    pub fn yield_(&mut self, e: u32) -> Pick {
        let e = EntityId(e);
        let cpu = self.ents[e.idx()]
            .on_cpu
            .expect("yield of an entity that is not running");
        self.with_ctx(|s, ctx| s.yield_(ctx, e));
        self.schedule(cpu.0)
    }

    /// The current entity `curr` offers its CPU to `target` (`Scheduler::yield_to`, KVM's
    /// directed yield); if it yielded, its CPU reschedules at once. Returns the answer.
    pub fn yield_to(&mut self, curr: u32, target: u32) -> Option<bool> {
        let (e, t) = (EntityId(curr), EntityId(target));
        let cpu = self.ents[e.idx()]
            .on_cpu
            .expect("yield_to of an entity that is not running");
        let r = self.with_ctx(|s, ctx| s.yield_to(ctx, e, t));
        if r == Some(true) {
            self.schedule(cpu.0);
        }
        r
    }

    /// Runs `schedule(cpu)` and applies the pick (asserting a present slice is positive).
    pub fn schedule(&mut self, cpu: u32) -> Pick {
        let c = CpuId(cpu);
        let pick = self.with_ctx(|s, ctx| s.schedule(ctx, c));
        let prev = self.cpus[c.idx()].curr;
        if let Some(d) = pick.slice {
            assert!(d > 0, "an empty slice on CPU {cpu}: {pick:?}");
        }
        if let Some(n) = pick.next {
            let info = &self.ents[n.idx()];
            assert!(info.runnable, "picked a non-runnable entity {n:?}");
            assert!(
                info.params.hard_affinity.contains(c),
                "picked {n:?} outside its affinity"
            );
            assert!(
                info.on_cpu.is_none() || info.on_cpu == Some(c),
                "picked {n:?}, which runs on another CPU"
            );
        }
        if pick.next != prev {
            if let Some(p) = prev {
                self.ents[p.idx()].on_cpu = None;
            }
            if let Some(n) = pick.next {
                self.ents[n.idx()].on_cpu = Some(c);
            }
            self.cpus[c.idx()].curr = pick.next;
            if let Some(p) = prev {
                self.with_ctx(|s, ctx| s.context_saved(ctx, p));
            }
        }
        self.timer[c.idx()] = pick.slice.map(|d| self.now + d);
        pick
    }

    pub fn tick(&mut self, cpu: u32) {
        self.with_ctx(|s, ctx| s.tick(ctx, CpuId(cpu)));
    }

    /// The run-time hooks as the engine calls them from a timeline event (docs/design.md,
    /// Lifecycle): write the new attributes into `ents[..].params` first.
    pub fn adjust(&mut self, group: u32) {
        self.with_ctx(|s, ctx| s.adjust(ctx, group));
    }

    pub fn prio_changed(&mut self, e: u32) {
        self.with_ctx(|s, ctx| s.prio_changed(ctx, EntityId(e)));
    }

    /// `remove(e)`: `e` must be off every CPU and not runnable for the policy (blocked, or
    /// paused at a host level).
    pub fn remove(&mut self, e: u32) {
        self.with_ctx(|s, ctx| s.remove(ctx, EntityId(e)));
    }

    pub fn set_paused(&mut self, e: u32, paused: bool) {
        self.with_ctx(|s, ctx| s.set_paused(ctx, EntityId(e), paused));
    }

    /// CPU `cpu` goes offline as the engine takes it (sim/hotplug.rs): marked offline, the hard
    /// affinity of every entity left with no online CPU widened to every CPU (returned, in id
    /// order), `cpu_offline`, the reschedules it asked for, then `schedule(cpu)` if the CPU
    /// still runs something. (The harness has no level below: a guest CPU's vCPU is not taken
    /// down.)
    pub fn cpu_offline(&mut self, cpu: u32) -> Vec<u32> {
        let c = CpuId(cpu);
        self.cpus[c.idx()].online = false;
        let mut online = CpuSet::empty();
        for (i, ci) in self.cpus.iter().enumerate() {
            if ci.online {
                online.insert(CpuId(i as u32));
            }
        }
        let all = CpuSet::first_n(self.cpus.len());
        let mut broken = Vec::new();
        for (i, e) in self.ents.iter_mut().enumerate() {
            let hard = &mut e.params.hard_affinity;
            if hard.contains(c) && !hard.intersects(&online) {
                *hard = all;
                broken.push(i as u32);
            }
        }
        self.with_ctx(|s, ctx| s.cpu_offline(ctx, c));
        self.pump();
        if self.cpus[c.idx()].curr.is_some() {
            self.schedule(cpu);
            self.pump();
        }
        assert_eq!(
            self.curr(cpu),
            None,
            "offline CPU {cpu} still runs an entity"
        );
        self.timer[c.idx()] = None;
        broken
    }

    /// CPU `cpu` comes back online: marked online, `cpu_online`, its requests applied.
    pub fn cpu_online(&mut self, cpu: u32) {
        let c = CpuId(cpu);
        self.cpus[c.idx()].online = true;
        self.with_ctx(|s, ctx| s.cpu_online(ctx, c));
        self.pump();
    }

    pub fn fire_timer(&mut self, key: u32) {
        self.with_ctx(|s, ctx| s.on_timer(ctx, key));
    }

    /// Takes the reschedule requests made since the last call, in order, without duplicates.
    pub fn take_resched(&mut self) -> Vec<u32> {
        let mut v = Vec::new();
        self.requests.retain(|r| match r {
            Request::Resched(c) => {
                if !v.contains(&c.0) {
                    v.push(c.0);
                }
                false
            }
            _ => true,
        });
        v
    }

    /// Takes the timer requests made since the last call.
    pub fn take_timers(&mut self) -> Vec<(u32, Option<SimTime>)> {
        let mut v = Vec::new();
        self.requests.retain(|r| match r {
            Request::Timer(k, at) => {
                v.push((*k, *at));
                false
            }
            _ => true,
        });
        v
    }

    /// Applies the pause requests made since the last call to `paused`.
    pub fn take_pauses(&mut self) {
        let paused = &mut self.paused;
        self.requests.retain(|r| match r {
            Request::Pause(e) => {
                paused[e.idx()] = true;
                false
            }
            Request::Unpause(e, _) => {
                paused[e.idx()] = false;
                false
            }
            _ => true,
        });
    }

    /// Delivers every pending reschedule request (in order) and returns the CPUs rescheduled.
    pub fn deliver_resched(&mut self) -> Vec<u32> {
        let cpus = self.take_resched();
        for &c in &cpus {
            self.schedule(c);
        }
        cpus
    }

    /// Runs the CPU's scheduler timer if it is due at or before `now`.
    pub fn run_due_timers(&mut self) {
        for c in 0..self.cpus.len() {
            if matches!(self.timer[c], Some(t) if t <= self.now) {
                self.schedule(c as u32);
            }
        }
    }
}
