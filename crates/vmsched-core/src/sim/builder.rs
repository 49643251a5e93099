//! Assembling a simulation: levels, CPUs, vCPUs, workloads and their timer slots, in the order
//! they are added; and the start-up path's seeded phases (`order_ties`: tick phases, boot
//! order, start offsets; `build`: the measurement window's phase).

use super::*;

impl Simulation {
    /// Breaks, from the run's seed, the ties that declaration order would otherwise break
    /// (issue 10 item 9; docs/design.md, Ties):
    ///
    /// * each level's tick phase: the kernel's boot time modulo its tick period is unknown, so
    ///   it is drawn from the stream `tick-phase/<level name>`;
    /// * the order of the tasks' starts at one instant across levels (which domain's work, and
    ///   so which vCPU, reaches the host scheduler first at boot): levels are ordered by a key
    ///   drawn from the stream `boot-order/<level name>`, tasks of one level keep their
    ///   declared order (they are forked in that order).
    ///
    /// With a start spread ([`Variation::start_spread`], issue 14), each task's start is
    /// moved later by its guest's offset (stream `start/<level name>`, uniform in
    /// `0..spread`; none for the host level, whose boot is time 0) plus its workload's (stream
    /// `start/<level name>/<workload name>`, uniform in `0..spread / 10`): a real run's
    /// domains and benchmarks are started one after another, at times no two runs share. The
    /// tasks of one workload keep starting together: the workload starts them itself (a
    /// Context1 pair's fork), and an offset between them would be a different program.
    ///
    /// All are keyed by the level's (and task's) *name*, not its index, so a scenario with its
    /// domains declared in another order draws the same phases, offsets and boot order.
    fn order_ties(&mut self, seed: u64, var: Variation) {
        let key: Vec<u64> = self
            .levels
            .iter()
            .map(|lv| Stream::new(seed, &format!("boot-order/{}", lv.name)).next_u64())
            .collect();
        for lv in &mut self.levels {
            if let Some(p) = lv.tick_period {
                lv.tick_phase = match lv.opts.tick_phase {
                    Some(ph) => ph % p,
                    None => Stream::new(seed, &format!("tick-phase/{}", lv.name)).range(0, p - 1),
                };
            }
        }
        let spread = var.start_spread;
        let offset: Vec<Nanos> = self
            .levels
            .iter()
            .map(|lv| {
                let host = lv
                    .cpu_g
                    .first()
                    .is_none_or(|c| self.cpus[c.idx()].backing.is_none());
                if spread == 0 || host {
                    0
                } else {
                    Stream::new(seed, &format!("start/{}", lv.name)).range(0, spread - 1)
                }
            })
            .collect();
        let mut starts: Vec<(SimTime, u64, usize, SlotId)> = Vec::new();
        for (s, k) in self.slot_kind.iter().enumerate() {
            if let SlotKind::TaskStart(t) = *k {
                let slot = SlotId(s as u32);
                if let Some(mut at) = self.q.deadline(slot) {
                    let l = self.ents[self.tasks[t].ent.idx()].level;
                    if spread >= 10 {
                        // One offset per workload: its tasks are started by the workload
                        // itself (a pair's fork), in their declared order, at one instant.
                        let lv = &self.levels[l.idx()];
                        let wl = &self.wls[self.tasks[t].wl].spec.name;
                        let own = Stream::new(seed, &format!("start/{}/{wl}", lv.name))
                            .range(0, spread / 10 - 1);
                        at = at.saturating_add(offset[l.idx()] + own);
                    }
                    starts.push((at, key[l.idx()], s, slot));
                }
            }
        }
        // Re-armed in (time, key, declaration) order: equal times pop in that order.
        starts.sort_unstable();
        for (at, _, _, slot) in starts {
            self.q.arm(slot, at);
        }
        // A periodic tick runs on every CPU from boot, busy or not (a level that does not
        // exist yet starts its ticks when it is created).
        for c in 0..self.cpus.len() {
            self.start_periodic_tick(GCpu(c as u32));
        }
    }
}

/// Assembles a simulation. Levels, CPUs and entities are numbered in the order they are added.
pub struct SimBuilder {
    pub(super) sim: Simulation,
    pub(super) seed: u64,
    var: Variation,
}

impl SimBuilder {
    pub fn new(seed: u64) -> SimBuilder {
        let mut q = EventQueue::new();
        let sample_slot = q.add_slot();
        SimBuilder {
            sim: Simulation {
                now: 0,
                q,
                slot_kind: vec![SlotKind::Sample],
                levels: Vec::new(),
                cpus: Vec::new(),
                ents: Vec::new(),
                ent_stats: Vec::new(),
                tasks: Vec::new(),
                wls: Vec::new(),
                actions: VecDeque::with_capacity(64),
                events: 0,
                actions_run: 0,
                end: 0,
                warmup: 0,
                sample_every: 0,
                sample_slot,
                series: Vec::new(),
                series_src: Vec::new(),
                debug_checks: false,
                local_cpu: None,
                trace: None,
                watch: Default::default(),
                timeline: Vec::new(),
                log: Vec::new(),
                io: None,
                xenmon: None,
                jobs: Vec::new(),
                timer_worker: None,
                coord: None,
                irq_jitter: 0,
                chaos: Vec::new(),
            },
            seed,
            var: Variation::default(),
        }
    }

    /// What the seed varies besides per-call costs (issue 14; `[run] vary`): start offsets,
    /// the measurement window's phase, timer-interrupt jitter. None unless this is called.
    pub fn vary(&mut self, var: Variation) {
        self.var = var;
    }

    /// A line for the run's log ([`Simulation::log`]): what the build changed from what the
    /// scenario asked, as the real system would (a port bound elsewhere).
    pub fn note(&mut self, line: String) {
        self.sim.log.push(line);
    }

    pub(super) fn slot(&mut self, k: SlotKind) -> SlotId {
        let s = self.sim.q.add_slot();
        self.sim.slot_kind.push(k);
        // A slot's id indexes its kind.
        debug_assert_eq!(s.0 as usize + 1, self.sim.slot_kind.len());
        s
    }

    pub fn add_level(&mut self, name: &str, sched: Box<dyn Scheduler>, opts: LevelOpts) -> LevelId {
        let l = LevelId(self.sim.levels.len() as u32);
        let n = sched.nr_timers();
        let tick_period = sched.tick_period();
        let polls_alone = sched.nr_running(CpuId(0)).is_some();
        let timer_slots = (0..n)
            .map(|k| self.slot(SlotKind::LevelTimer(l, k)))
            .collect();
        self.sim.levels.push(Level {
            name: name.to_string(),
            sched,
            opts,
            cpu_info: Vec::new(),
            ent_info: Vec::new(),
            req: Vec::with_capacity(16),
            cpu_g: Vec::new(),
            ent_g: Vec::new(),
            timer_slots,
            tick_period,
            tick_phase: 0,
            irq_rng: Stream::new(self.seed, &format!("irq/{name}")),
            polls_alone,
            last_boosted: 0,
            alive: true,
        });
        l
    }

    fn add_cpu(&mut self, level: LevelId, topo: CpuTopo, backing: Option<GEnt>) -> GCpu {
        let g = GCpu(self.sim.cpus.len() as u32);
        let lv = &mut self.sim.levels[level.idx()];
        let local = CpuId(lv.cpu_info.len() as u32);
        let irq_rng = Stream::new(self.seed, &format!("irq/{}/{}", lv.name, local.0));
        lv.cpu_info.push(CpuInfo {
            curr: None,
            executing: backing.is_none(),
            backing: if backing.is_none() {
                RunState::Running
            } else {
                RunState::Blocked
            },
            steal_ns: 0,
            topo,
            online: true,
        });
        lv.cpu_g.push(g);
        let sched_slot = self.slot(SlotKind::SchedTimer(g));
        let resched_slot = self.slot(SlotKind::Resched(g));
        let tick_slot = self.slot(SlotKind::Tick(g));
        let halt_slot = self.slot(SlotKind::Halt(g));
        let kick_slot = self.slot(SlotKind::Kick(g));
        let switch_slot = self.slot(SlotKind::Switched(g));
        self.sim.cpus.push(CpuState {
            level,
            local,
            backing,
            curr: None,
            executing: backing.is_none(),
            sched_slot,
            resched_slot,
            tick_slot,
            halt_slot,
            kick_slot,
            kick_cause: WakeCause::Ipi,
            backup_timer_fired: false,
            halt_due: false,
            pending: PendingIrqs::with_capacity(8),
            need_resched: false,
            armed_timers: Vec::with_capacity(8),
            kwork: false,
            last_ent: None,
            switch_slot,
            poll_limit: 0,
            guest_poll: false,
            halted_at: None,
            kvm: KvmVcpu::new(&self.sim.levels[level.idx()].opts.exit),
            irq_rng,
            stalled: false,
        });
        g
    }

    fn add_entity(&mut self, level: LevelId, params: EntityParams, kind: EntKind) -> GEnt {
        let g = GEnt(self.sim.ents.len() as u32);
        let lv = &mut self.sim.levels[level.idx()];
        let local = EntityId(lv.ent_info.len() as u32);
        lv.ent_info.push(EntityInfo {
            runnable: false,
            on_cpu: None,
            params,
        });
        lv.ent_g.push(g);
        self.sim.ents.push(EntState {
            level,
            local,
            kind,
            cpu: None,
            state: RunState::Blocked,
            since: 0,
            last_cpu: None,
            steal: 0,
            paused: false,
            wait_from: RunState::Blocked,
            in_xen: false,
        });
        self.sim.ent_stats.push(EntStats {
            time: [0; 4],
            runs: 0,
            preemptions: 0,
            migrations: 0,
            wait: LatHist::with_precision(0, 2),
            xm: Default::default(),
        });
        g
    }

    /// Adds the physical CPUs of the host level.
    pub fn add_pcpus(&mut self, level: LevelId, topo: &[CpuTopo]) {
        for t in topo {
            self.add_cpu(level, *t, None);
        }
    }

    /// Adds a vCPU: an entity of `host` and a CPU of `guest`.
    pub fn add_vcpu(&mut self, host: LevelId, guest: LevelId, params: EntityParams, topo: CpuTopo) {
        let cpu = GCpu(self.sim.cpus.len() as u32);
        let e = self.add_entity(host, params, EntKind::Vcpu(cpu));
        let c = self.add_cpu(guest, topo, Some(e));
        debug_assert_eq!(c, cpu);
    }

    /// Adds a workload's tasks to a guest level. `params(i)` gives the entity parameters of the
    /// workload's task `i`.
    pub fn add_workload(
        &mut self,
        level: LevelId,
        spec: WorkloadSpec,
        params: impl Fn(usize) -> EntityParams,
    ) {
        let wl = self.sim.wls.len();
        let mut tasks = Vec::new();
        let mut first_child = 0;
        for (i, ts) in spec.tasks.iter().enumerate() {
            let t = self.sim.tasks.len();
            let ent = self.add_entity(level, params(i), EntKind::Task(t));
            let done_slot = self.slot(SlotKind::TaskDone(t));
            let timer_slot = self.slot(SlotKind::TaskTimer(t));
            let start_slot = self.slot(SlotKind::TaskStart(t));
            let name = format!("{}/{}", self.sim.levels[level.idx()].name, ts.name);
            self.sim.tasks.push(Task {
                ent,
                wl,
                program: ts.program.clone().into_boxed_slice(),
                pc: 0,
                loops: vec![0; ts.program.len()].into_boxed_slice(),
                phase: Phase::New,
                remaining: 0,
                overhead: 0,
                kernel: false,
                spinning: None,
                spin_block: false,
                run_since: None,
                executed: 0,
                executed_base: 0,
                done_slot,
                timer_slot,
                start_slot,
                born: 0,
                timer_cpu: GCpu(0),
                block_paid: false,
                timer_soft: 0,
                periodic_next: None,
                latency_pending: None,
                lock_wait: None,
                csd_wait: None,
                rng: Stream::new(self.seed, &name),
            });
            if ts.start == NEVER {
                // A slot for a forked child: it does not exist until the fork.
                self.sim.ents[ent.idx()].state = RunState::Offline;
            } else {
                self.sim.q.arm(start_slot, ts.start);
                first_child += 1;
            }
            tasks.push(t);
        }
        let chans = (0..spec.channels)
            .map(|c| Channel {
                tokens: spec.tokens.get(c as usize).copied().unwrap_or(0),
                waiters: VecDeque::with_capacity(tasks.len()),
                spinners: Vec::with_capacity(tasks.len()),
                owner: None,
            })
            .collect();
        let counters = vec![0; spec.counters.len()];
        let hists = spec
            .hists
            .iter()
            .map(|_| LatHist::new(spec.hist_buckets))
            .collect();
        debug_assert!(
            spec.tasks[first_child..].iter().all(|t| t.start == NEVER),
            "fork slots come after the tasks started at build"
        );
        self.sim.wls.push(WorkloadState {
            spec,
            level,
            tasks,
            next_child: first_child,
            chans,
            counters,
            hists,
        });
    }

    /// The KVM/ARM 3.x arch-timer kworker (ERRATA L9) at the host level `level`: a task with
    /// `params` that sleeps until a guest timer (or periodic tick) fires for a vCPU that is not
    /// in guest mode, then runs `cost` and kicks every such vCPU (wakes its thread if it is
    /// halted). Without it such a timer kicks the vCPU directly. Call once, after the domains.
    pub fn add_timer_worker(&mut self, level: LevelId, params: EntityParams, cost: Nanos) {
        assert!(self.sim.timer_worker.is_none(), "one timer worker");
        let name = params.name.clone();
        let spec = WorkloadSpec {
            name: name.clone(),
            kind: crate::workload::WorkloadKind::Program,
            tasks: vec![crate::workload::TaskSpec {
                name,
                program: vec![
                    Step::Wait {
                        chan: 0,
                        block_cost: 0,
                        slept: None,
                    },
                    Step::Compute {
                        dur: Dist::Fixed(cost),
                        kernel: true,
                    },
                    Step::KickTimers,
                    Step::Goto { to: 0, times: None },
                ],
                nice: params.linux.nice,
                policy: params.linux.policy,
                rt_prio: params.linux.rt_priority,
                times: Default::default(),
                affinity: None,
                start: 0,
            }],
            channels: 1,
            counters: vec![],
            hists: vec![],
            gap_pairs: vec![],
            tokens: vec![],
            hist_buckets: 0,
        };
        let task = self.sim.tasks.len();
        self.add_workload(level, spec, |_| params.clone());
        self.sim.timer_worker = Some(TimerWorker {
            task,
            queue: Vec::new(),
        });
    }

    /// Finishes the build: calls every scheduler's `insert` and arms the run's end.
    ///
    /// With a start spread the warm-up's end (the measurement window's start) is moved later
    /// by a draw from the stream `window`, uniform in `0..min(spread, warmup)`: where the
    /// window falls against the host's periodic work (its accounting periods, its slices)
    /// differs from run to run. The run's end stays (the window is up to that much shorter;
    /// rates are per measured second). A run without a warm-up measures from time 0 as before.
    pub fn build(mut self, duration: Nanos, warmup: Nanos, sample_every: Nanos) -> Simulation {
        let bound = self.var.start_spread.min(warmup);
        let warmup = match bound {
            0 => warmup,
            b => warmup + Stream::new(self.seed, "window").range(0, b - 1),
        };
        let warmup = warmup.min(duration.saturating_sub(1));
        let end = self.slot(SlotKind::End);
        self.sim.q.arm(end, duration);
        if warmup > 0 {
            let w = self.slot(SlotKind::Warmup);
            self.sim.q.arm(w, warmup);
        }
        let mut sim = self.sim;
        let nr_cpus = sim.cpus.len();
        if let Some(w) = &mut sim.timer_worker {
            // Each guest CPU is queued at most once: no allocation during the run.
            w.queue.reserve(nr_cpus);
        }
        sim.end = duration;
        sim.warmup = warmup;
        sim.sample_every = sample_every;
        // Domains created during the run: their vCPUs do not exist yet (offline, not inserted)
        // and their guests' tasks start when they are created.
        let created: Vec<(LevelId, u32, LevelId)> = sim
            .timeline
            .iter()
            .filter_map(|a| match *a {
                TimelineAction::CreateDomain {
                    level,
                    group,
                    guest,
                } => Some((level, group, guest)),
                _ => None,
            })
            .collect();
        for &(_, _, guest) in &created {
            sim.levels[guest.idx()].alive = false;
            for t in 0..sim.tasks.len() {
                let g = sim.tasks[t].ent;
                if sim.ents[g.idx()].level == guest {
                    sim.q.cancel(sim.tasks[t].start_slot);
                    sim.ents[g.idx()].state = RunState::Offline;
                }
            }
        }
        sim.irq_jitter = self.var.irq_jitter;
        sim.order_ties(self.seed, self.var);
        for l in 0..sim.levels.len() {
            for e in 0..sim.levels[l].ent_info.len() {
                let group = sim.levels[l].ent_info[e].params.group;
                if created
                    .iter()
                    .any(|&(cl, cg, _)| cl.idx() == l && cg == group)
                {
                    let g = sim.levels[l].ent_g[e];
                    sim.ents[g.idx()].state = RunState::Offline;
                    continue;
                }
                sim.with_sched(LevelId(l as u32), |s, ctx| {
                    s.insert(ctx, EntityId(e as u32))
                });
            }
        }
        if let Some(samples) = duration.checked_div(sample_every) {
            let cap = samples as usize + 1;
            for (w, wl) in sim.wls.iter().enumerate() {
                for &(a, b) in &wl.spec.gap_pairs {
                    // Sized by the scenario: a failed allocation is a panic (a CoreError in
                    // Python), not an abort. The budget (crate::budget) refuses such runs first.
                    let mut t_ns = Vec::new();
                    let mut values = Vec::new();
                    if t_ns.try_reserve_exact(cap).is_err()
                        || values.try_reserve_exact(cap).is_err()
                    {
                        panic!(
                            "allocation failed: a series of {cap} samples \
                             (run.sample_interval_us)"
                        );
                    }
                    sim.series.push(Series {
                        name: format!(
                            "{}/{}: probe({}) - probe({})",
                            sim.levels[wl.level.idx()].name,
                            wl.spec.name,
                            wl.spec.tasks[a].name,
                            wl.spec.tasks[b].name
                        ),
                        t_ns,
                        values,
                    });
                    sim.series_src.push((w, a, b));
                }
            }
            sim.q.arm(sim.sample_slot, sample_every);
        }
        sim.xenmon_start();
        sim
    }
}
