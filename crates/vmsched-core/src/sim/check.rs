//! Metrics collection, windows, the engine's invariants, and read access for the report.

use super::*;

impl Simulation {
    // ---- metrics ---------------------------------------------------------------------------

    pub(super) fn sample(&mut self) {
        for i in 0..self.series_src.len() {
            let (w, a, b) = self.series_src[i];
            let wl = &self.wls[w];
            let (ta, tb) = (wl.tasks[a], wl.tasks[b]);
            let (ea, eb) = (
                self.ents[self.tasks[ta].ent.idx()].local,
                self.ents[self.tasks[tb].ent.idx()].local,
            );
            let s = &self.levels[wl.level.idx()].sched;
            if let (Some(pa), Some(pb)) = (s.probe(ea), s.probe(eb)) {
                self.series[i].t_ns.push(self.now);
                self.series[i].values.push(pa - pb);
            }
        }
    }

    pub(super) fn reset_metrics(&mut self) {
        self.close_intervals();
        self.coord_reset_metrics();
        self.chaos_reset_metrics();
        for st in &mut self.ent_stats {
            st.time = [0; 4];
            st.runs = 0;
            st.preemptions = 0;
            st.migrations = 0;
            st.wait.reset();
            st.xm = Default::default();
        }
        for t in 0..self.tasks.len() {
            self.tasks[t].executed_base = self.executed_ns(t);
        }
        for w in &mut self.wls {
            // A parallel job is timed from its own start (workload/parallel.rs).
            if w.spec.kind == crate::workload::WorkloadKind::Parallel {
                continue;
            }
            w.counters.iter_mut().for_each(|c| *c = 0);
            w.hists.iter_mut().for_each(|h| h.reset());
        }
        self.io_reset_metrics();
        self.xenmon_reset();
    }

    /// CPU time task `t` really executed so far (its open interval included), since the start.
    pub(super) fn executed_ns(&self, t: usize) -> Nanos {
        let task = &self.tasks[t];
        task.executed + task.run_since.map_or(0, |s| self.now - s)
    }

    /// Closes every entity's open runstate interval at `now` (windowed figures, DESIGN §6).
    pub fn close_intervals(&mut self) {
        for g in 0..self.ents.len() {
            let s = self.ents[g].state;
            self.set_runstate(GEnt(g as u32), s);
        }
    }

    /// Checks the engine's invariants; an error names the broken one.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (l, lv) in self.levels.iter().enumerate() {
            for (c, ci) in lv.cpu_info.iter().enumerate() {
                self.check_offline_cpu(l, c, ci)?;
                let mirror = self.cpus[lv.cpu_g[c].idx()].curr;
                if mirror != ci.curr.map(|e| lv.ent_g[e.idx()]) {
                    return Err(format!(
                        "level {l}: CPU {c} runs {:?} but its hot entry says {mirror:?}",
                        ci.curr
                    ));
                }
                if let Some(e) = ci.curr {
                    let ei = &lv.ent_info[e.idx()];
                    if ei.on_cpu != Some(CpuId(c as u32)) {
                        return Err(format!(
                            "level {l}: CPU {c} runs {} which is on {:?}",
                            ei.params.name, ei.on_cpu
                        ));
                    }
                    if !ei.params.hard_affinity.contains(CpuId(c as u32)) {
                        return Err(format!(
                            "level {l}: {} on CPU {c} outside its affinity",
                            ei.params.name
                        ));
                    }
                }
            }
            for (e, ei) in lv.ent_info.iter().enumerate() {
                let mirror = self.ents[lv.ent_g[e].idx()].cpu;
                if mirror != ei.on_cpu.map(|c| lv.cpu_g[c.idx()]) {
                    return Err(format!(
                        "level {l}: {} is on CPU {:?} but its hot entry says {mirror:?}",
                        ei.params.name, ei.on_cpu
                    ));
                }
                if let Some(c) = ei.on_cpu {
                    if lv.cpu_info[c.idx()].curr != Some(EntityId(e as u32)) {
                        return Err(format!(
                            "level {l}: {} thinks it is on CPU {c:?}",
                            ei.params.name
                        ));
                    }
                    if !ei.runnable {
                        return Err(format!(
                            "level {l}: {} runs but is not runnable",
                            ei.params.name
                        ));
                    }
                }
                let g = lv.ent_g[e];
                let st = self.ents[g.idx()].state;
                let stalled = matches!(self.ents[g.idx()].kind, EntKind::Vcpu(vc) if self.cpus[vc.idx()].stalled);
                let want = match (ei.on_cpu.is_some(), ei.runnable) {
                    (true, _) if stalled => RunState::Runnable,
                    (true, _) => RunState::Running,
                    (false, true) => RunState::Runnable,
                    (false, false) => RunState::Blocked,
                };
                if st != want && st != RunState::Offline {
                    return Err(format!(
                        "level {l}: {} is {st:?}, should be {want:?}",
                        ei.params.name
                    ));
                }
                if self.ents[g.idx()].in_xen
                    && ei.on_cpu.is_none()
                    && (ei.runnable || st != RunState::Offline)
                {
                    return Err(format!(
                        "level {l}: {} waits in Xen for its device model but is {st:?}{}",
                        ei.params.name,
                        if ei.runnable { " and runnable" } else { "" }
                    ));
                }
            }
        }
        for (i, cs) in self.cpus.iter().enumerate() {
            let want = match cs.backing {
                None => true,
                Some(b) => {
                    !cs.stalled
                        && self.ents[b.idx()].state == RunState::Running
                        && self.cpu_of_ent(b).is_some_and(|p| {
                            self.cpus[p.idx()].executing
                                && !self.q.is_armed(self.cpus[p.idx()].switch_slot)
                        })
                }
            };
            if cs.executing != want {
                return Err(format!(
                    "CPU {i}: executing={} but should be {want}",
                    cs.executing
                ));
            }
        }
        Ok(())
    }

    /// CPU hot-plug (sim/hotplug.rs): an offline CPU runs nothing, and the vCPU behind an
    /// offline guest CPU is down, `offline` at its host.
    fn check_offline_cpu(&self, l: usize, c: usize, ci: &CpuInfo) -> Result<(), String> {
        if ci.online {
            return Ok(());
        }
        if let Some(e) = ci.curr {
            return Err(format!(
                "level {l}: offline CPU {c} runs {}",
                self.levels[l].ent_info[e.idx()].params.name
            ));
        }
        let g = self.levels[l].cpu_g[c];
        if let Some(b) = self.cpus[g.idx()].backing {
            if self.ents[b.idx()].state != RunState::Offline || self.cpus[g.idx()].executing {
                return Err(format!(
                    "level {l}: the vCPU behind offline CPU {c} is {:?}, not offline",
                    self.ents[b.idx()].state
                ));
            }
        }
        Ok(())
    }

    // ---- results -----------------------------------------------------------------------------

    pub fn results(&self) -> crate::report::Results {
        crate::report::collect(self)
    }
}

/// Read access for the report module.
pub(crate) mod view {
    use super::*;

    pub struct EntRow<'a> {
        pub level: &'a str,
        pub name: &'a str,
        pub is_vcpu: bool,
        /// For a vCPU, the guest level (domain) it runs.
        pub domain: Option<&'a str>,
        pub group: u32,
        pub state: RunState,
        /// How long it has been waiting for a CPU, if it is runnable now.
        pub open_wait: Nanos,
        /// CPU time it really executed: for a task, while every CPU under it ran it (its
        /// running time also counts time its vCPU was descheduled); for a vCPU, its running time.
        pub executed: Nanos,
        pub stats: &'a EntStats,
    }

    pub struct WlRow<'a> {
        pub level: &'a str,
        pub spec: &'a WorkloadSpec,
        pub counters: &'a [u64],
        /// CPU time its tasks really executed.
        pub executed_ns: Nanos,
        pub hists: &'a [LatHist],
    }

    impl Simulation {
        pub(crate) fn ent_rows(&self) -> impl Iterator<Item = EntRow<'_>> {
            self.ents.iter().zip(&self.ent_stats).map(move |(e, st)| {
                let lv = &self.levels[e.level.idx()];
                let p = &lv.ent_info[e.local.idx()].params;
                EntRow {
                    level: &lv.name,
                    name: &p.name,
                    is_vcpu: matches!(e.kind, EntKind::Vcpu(_)),
                    domain: match e.kind {
                        EntKind::Vcpu(vc) => {
                            Some(self.levels[self.cpus[vc.idx()].level.idx()].name.as_str())
                        }
                        EntKind::Task(_) => None,
                    },
                    group: p.group,
                    state: e.state,
                    open_wait: if e.state == RunState::Runnable {
                        self.now - e.since
                    } else {
                        0
                    },
                    executed: match e.kind {
                        EntKind::Task(t) => self.executed_ns(t) - self.tasks[t].executed_base,
                        EntKind::Vcpu(_) => st.time[RunState::Running as usize],
                    },
                    stats: st,
                }
            })
        }

        pub(crate) fn wl_rows(&self) -> impl Iterator<Item = WlRow<'_>> {
            self.wls.iter().map(move |w| WlRow {
                level: &self.levels[w.level.idx()].name,
                spec: &w.spec,
                counters: &w.counters,
                executed_ns: w
                    .tasks
                    .iter()
                    .map(|t| self.executed_ns(*t) - self.tasks[*t].executed_base)
                    .sum(),
                hists: &w.hists,
            })
        }

        pub(crate) fn series(&self) -> &[Series] {
            &self.series
        }
    }
}
