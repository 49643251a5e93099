//! Turning tracing on and taking the trace out (the records themselves are emitted by one
//! `trace::emit!` line at each point of the engine; crate::trace has the rest).

use super::*;
use crate::trace::{CpuMeta, EntMeta, LevelMeta, Record, SchedEvent, Trace, TraceBuf, TraceMeta};

impl Simulation {
    /// Records a trace of the run from now on, keeping at most `max_records` records.
    pub fn enable_trace(&mut self, max_records: usize) {
        self.trace = Some(Box::new(TraceBuf::new(max_records)));
        for lv in &mut self.levels {
            lv.opts.clock.trace = true;
        }
    }

    /// Stops tracing and returns the trace so far with the run's names, if tracing was on.
    pub fn take_trace(&mut self) -> Option<Trace> {
        let buf = self.trace.take()?;
        for lv in &mut self.levels {
            lv.opts.clock.trace = false;
        }
        let meta = TraceMeta {
            levels: self
                .levels
                .iter()
                .map(|lv| LevelMeta {
                    name: lv.name.clone(),
                    sched: lv.sched.name(),
                    class: lv.sched.trace_class(),
                    pools: lv.sched.pool_map().map_or(Vec::new(), |m| {
                        (0..m.names.len() as u32)
                            .map(|p| {
                                let sched = lv.sched.pool_sched_name(p).unwrap_or("");
                                let class = lv.sched.pool_trace_class(p).unwrap_or("");
                                (m.names[p as usize].clone(), sched, class)
                            })
                            .collect()
                    }),
                })
                .collect(),
            cpus: self
                .cpus
                .iter()
                .map(|c| CpuMeta {
                    level: c.level,
                    local: c.local.0,
                    backing: c.backing,
                })
                .collect(),
            ents: self
                .ents
                .iter()
                .map(|e| EntMeta {
                    level: e.level,
                    name: self.levels[e.level.idx()].ent_info[e.local.idx()]
                        .params
                        .name
                        .clone(),
                    vcpu_of: match e.kind {
                        EntKind::Vcpu(c) => Some(c),
                        EntKind::Task(_) => None,
                    },
                })
                .collect(),
        };
        Some(buf.finish(self.now, meta))
    }
}

/// The recording methods behind the engine's `emit!` lines: called only while tracing is on,
/// out of line so that the hot path carries nothing but the test.
impl Simulation {
    fn record(&mut self, r: Record) {
        self.trace
            .as_deref_mut()
            .expect("invariant: a trace record while tracing is off")
            .push(r);
    }

    /// CPU `c` switches from `prev` to `next` (local ids of its level), with the policy's figure
    /// for both.
    #[cold]
    #[inline(never)]
    pub(super) fn trace_switch(
        &mut self,
        c: GCpu,
        prev: Option<EntityId>,
        next: Option<EntityId>,
        slice: Option<Nanos>,
    ) {
        let (t, level) = (self.now, self.cpus[c.idx()].level);
        let lv = &self.levels[level.idx()];
        let g = |e: Option<EntityId>| e.map(|e| lv.ent_g[e.idx()]);
        let (gp, gn) = (g(prev), g(next));
        let probes =
            [prev, next].map(|e| e.and_then(|e| Some((lv.ent_g[e.idx()], lv.sched.probe(e)?))));
        self.record(Record::Switch {
            t,
            level,
            cpu: c,
            prev: gp,
            next: gn,
            slice,
        });
        for (ent, value) in probes.into_iter().flatten() {
            self.record(Record::Probe {
                t,
                level,
                ent,
                value,
            });
        }
    }

    /// CPU `c` ran its scheduler and keeps `e` (a local id of its level), with a timer of
    /// `slice`.
    #[cold]
    #[inline(never)]
    pub(super) fn trace_continue(&mut self, c: GCpu, e: EntityId, slice: Option<Nanos>) {
        let level = self.cpus[c.idx()].level;
        let ent = self.levels[level.idx()].ent_g[e.idx()];
        self.record(Record::Continue {
            t: self.now,
            level,
            cpu: c,
            ent,
            slice,
        });
    }

    /// A trace event the policy of level `l` reported (a [`Request::Trace`]), with global ids,
    /// from the CPU whose code ran the hook.
    #[cold]
    #[inline(never)]
    pub(super) fn trace_sched_event(&mut self, l: LevelId, ev: SchedEvent) {
        let lv = &self.levels[l.idx()];
        let ev = ev.map(|e| lv.ent_g[e.idx()], |c| lv.cpu_g[c.idx()]);
        let r = Record::Sched {
            t: self.now,
            level: l,
            cpu: self.local_cpu,
            ev,
        };
        self.record(r);
    }

    /// Entity `g` is about to change runstate; a non-change (closing intervals for windowed
    /// figures) is not recorded.
    #[cold]
    #[inline(never)]
    pub(super) fn trace_runstate(&mut self, g: GEnt, to: RunState) {
        let e = &self.ents[g.idx()];
        if e.state != to {
            let r = Record::Runstate {
                t: self.now,
                level: e.level,
                ent: g,
                from: e.state,
                to,
            };
            self.record(r);
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn trace_wake(&mut self, g: GEnt, info: WakeInfo) {
        let level = self.ents[g.idx()].level;
        let waker_cpu = info
            .waker_cpu
            .map(|c| self.levels[level.idx()].cpu_g[c.idx()]);
        self.record(Record::Wake {
            t: self.now,
            level,
            ent: g,
            waker_cpu,
            cause: info.cause,
        });
    }

    #[cold]
    #[inline(never)]
    pub(super) fn trace_block(&mut self, g: GEnt) {
        let level = self.ents[g.idx()].level;
        self.record(Record::Block {
            t: self.now,
            level,
            ent: g,
        });
    }

    /// Domain `group` of `level` is created (`created`) or destroyed: recorded with its
    /// first entity (none: nothing recorded).
    #[cold]
    #[inline(never)]
    pub(super) fn trace_domain(&mut self, level: LevelId, group: u32, created: bool) {
        let lv = &self.levels[level.idx()];
        let Some(k) = lv.ent_info.iter().position(|e| e.params.group == group) else {
            return;
        };
        let ent = lv.ent_g[k];
        self.record(Record::Domain {
            t: self.now,
            level,
            ent,
            created,
        });
    }

    /// A reschedule request reaches `c`; held if `c` is a vCPU that is not executing.
    #[cold]
    #[inline(never)]
    pub(super) fn trace_resched(&mut self, c: GCpu) {
        let (t, level, held) = self.cpu_instant(c);
        self.record(Record::Resched {
            t,
            level,
            cpu: c,
            held,
        });
    }

    /// The tick of `c` fires; held if `c` is a vCPU that is not executing.
    #[cold]
    #[inline(never)]
    pub(super) fn trace_tick(&mut self, c: GCpu) {
        let (t, level, held) = self.cpu_instant(c);
        self.record(Record::Tick {
            t,
            level,
            cpu: c,
            held,
        });
    }

    /// Port `port` of the level of vCPU `c` is notified (`already`: it was pending).
    #[cold]
    #[inline(never)]
    pub(super) fn trace_notify(&mut self, c: GCpu, port: u32, already: bool) {
        let (t, level, _) = self.cpu_instant(c);
        self.record(Record::Notify {
            t,
            level,
            cpu: c,
            port,
            already,
        });
    }

    /// `c`'s upcall takes `port` (`end` false) or its handler ends (`end` true).
    #[cold]
    #[inline(never)]
    pub(super) fn trace_handler(&mut self, c: GCpu, port: u32, end: bool) {
        let (t, level, _) = self.cpu_instant(c);
        self.record(Record::Handler {
            t,
            level,
            cpu: c,
            port,
            end,
        });
    }

    /// Now, `c`'s level, and whether what reaches `c` is held (a vCPU that is not executing).
    fn cpu_instant(&self, c: GCpu) -> (SimTime, LevelId, bool) {
        let cs = &self.cpus[c.idx()];
        (self.now, cs.level, !cs.executing)
    }

    /// Task `t`'s sleep timer fires on the CPU it was armed on.
    #[cold]
    #[inline(never)]
    pub(super) fn trace_timer(&mut self, t: usize) {
        let c = self.tasks[t].timer_cpu;
        let cs = &self.cpus[c.idx()];
        let r = Record::Timer {
            t: self.now,
            level: cs.level,
            ent: self.tasks[t].ent,
            cpu: c,
            held: !cs.executing,
        };
        self.record(r);
    }

    /// Task `t` runs its first step after a timed wake-up whose latency its workload records
    /// (from the timer's `expiry`).
    #[cold]
    #[inline(never)]
    pub(super) fn trace_latency(&mut self, t: usize, expiry: SimTime) {
        let g = self.tasks[t].ent;
        let r = Record::Latency {
            t: self.now,
            level: self.ents[g.idx()].level,
            ent: g,
            expiry,
        };
        self.record(r);
    }
}
