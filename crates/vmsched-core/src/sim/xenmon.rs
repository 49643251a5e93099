//! xenmon's figures (docs/xenmon.md; spec/xen-schedulers.md §8.6 and §8.7): per vCPU, the
//! worst wait split by how the wait began, the slice granted per dispatch, and the same figures
//! as the run's over fixed windows.
//!
//! Xen's xenmon (tools/xenmon: xenbaked samples the trace every 100 ms, xenmon.py sums the
//! samples over the last 1 s and 10 s) reports per domain and physical CPU the CPU time gotten,
//! the mean slice allocated, the time blocked and waited and the number of executions. Here the
//! engine's runstate accounting gives those exactly; this module adds what it lacks:
//!
//! * on the hot path, at a switch-in, two compares (the worst wait after a wake — runnable
//!   from blocked — and after a preemption — runnable while it ran) and an add (the slice the
//!   pick granted, xenmon's "allocated");
//! * a window slot that, every `run.xenmon_window_ms` from the end of the warm-up, reads every
//!   vCPU's accounting with its open interval (without closing it: a wait spanning a window's
//!   end counts whole in the window where it ends, as xenbaked books INFNEXT's "waited" in the
//!   sample of the switch-in) and keeps the difference from the previous window as one row.
//!   Rows are windows × vCPUs, reserved at the build (crate::budget counts them); at most
//!   [`MAX_WINDOWS`] windows are kept, so a run of simulated years neither fills memory nor
//!   spends its time on window events (the run's log says where they stopped).

use serde::Serialize;

use super::*;

/// The most windows a run keeps (27 hours of 1 s windows); later ones are not measured.
pub const MAX_WINDOWS: u64 = 100_000;

/// xenmon's per-entity figures beyond the runstate times and the dispatch count.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct XmStats {
    /// Worst wait that began with a wake (runnable from blocked), and that began with a
    /// preemption (runnable from running), over the measured window.
    pub wait_max_wake: Nanos,
    pub wait_max_preempt: Nanos,
    /// The same since the current window began.
    pub win_wait_max_wake: Nanos,
    pub win_wait_max_preempt: Nanos,
    /// Sum of the slices granted at dispatch (Xen's INFNEXT "slice"), and the dispatches that
    /// had one (a pick without a timer grants no slice).
    pub allocated: Nanos,
    pub allocated_n: u64,
}

impl XmStats {
    /// A wait of `w` that began when the entity left `from` ended at a switch-in.
    #[inline(always)]
    pub(super) fn waited(&mut self, from: RunState, w: Nanos) {
        match from {
            RunState::Blocked => {
                self.wait_max_wake = self.wait_max_wake.max(w);
                self.win_wait_max_wake = self.win_wait_max_wake.max(w);
            }
            RunState::Running => {
                self.wait_max_preempt = self.wait_max_preempt.max(w);
                self.win_wait_max_preempt = self.win_wait_max_preempt.max(w);
            }
            // Unpaused (offline to runnable): neither class; the overall worst wait has it.
            RunState::Runnable | RunState::Offline => {}
        }
    }

    /// A switch-in with the slice its pick granted.
    #[inline(always)]
    pub(super) fn dispatched(&mut self, slice: Option<Nanos>) {
        if let Some(d) = slice {
            self.allocated += d;
            self.allocated_n += 1;
        }
    }
}

/// One vCPU's figures over one window.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct XenmonWindowRow {
    /// Window number (0: the first after the warm-up), its start and its length.
    pub window: u64,
    pub start_ns: SimTime,
    pub passed_ns: Nanos,
    /// Global entity index (the order of the report's entities).
    pub ent: u32,
    /// Time in each runstate (indexed by [`RunState`]).
    pub time: [Nanos; 4],
    pub runs: u64,
    pub allocated: Nanos,
    pub allocated_n: u64,
    pub wait_max_wake: Nanos,
    pub wait_max_preempt: Nanos,
}

/// Cumulative figures of one vCPU at a window's end.
#[derive(Clone, Copy, Default)]
struct Snap {
    time: [Nanos; 4],
    runs: u64,
    allocated: Nanos,
    allocated_n: u64,
}

/// The fixed windows: the slot, the vCPUs followed, the last snapshot and the rows.
pub(super) struct Windows {
    window: Nanos,
    slot: SlotId,
    ents: Vec<GEnt>,
    prev: Vec<Snap>,
    start: SimTime,
    index: u64,
    rows: Vec<XenmonWindowRow>,
    /// [`MAX_WINDOWS`] were kept: no more windows, no open one.
    full: bool,
}

impl SimBuilder {
    /// xenmon's windows of `window_ns` from the end of the warm-up (0: off).
    pub fn xenmon_window(&mut self, window_ns: Nanos) {
        if window_ns == 0 {
            self.sim.xenmon = None;
            return;
        }
        let slot = self.slot(SlotKind::XenmonWindow);
        self.sim.xenmon = Some(Box::new(Windows {
            window: window_ns,
            slot,
            ents: Vec::new(),
            prev: Vec::new(),
            start: 0,
            index: 0,
            rows: Vec::new(),
            full: false,
        }));
    }
}

impl Simulation {
    /// At the build's end: follows every vCPU, reserves the rows and arms the first window.
    pub(super) fn xenmon_start(&mut self) {
        let Some(x) = self.xenmon.as_mut() else {
            return;
        };
        x.ents = (0..self.ents.len())
            .filter(|&g| matches!(self.ents[g].kind, EntKind::Vcpu(_)))
            .map(|g| GEnt(g as u32))
            .collect();
        x.prev = vec![Snap::default(); x.ents.len()];
        x.start = self.warmup;
        let windows = (self.end - self.warmup).div_ceil(x.window).min(MAX_WINDOWS) as usize;
        let n = windows.saturating_mul(x.ents.len());
        // Sized by the scenario: the budget (crate::budget) refuses such runs first.
        if x.rows.try_reserve_exact(n).is_err() {
            panic!("allocation failed: {n} xenmon window rows (run.xenmon_window_ms)");
        }
        // A window that ends after the run is the run's end's (`xenmon_rows`): no slot for it,
        // so a run shorter than one window has no extra queue entry.
        if self.warmup + x.window < self.end {
            self.q.arm(x.slot, self.warmup + x.window);
        }
    }

    /// The warm-up's end: the accounting was reset, so the windows start again from zero.
    pub(super) fn xenmon_reset(&mut self) {
        if let Some(x) = self.xenmon.as_mut() {
            x.prev.iter_mut().for_each(|p| *p = Snap::default());
            x.start = self.now;
            x.index = 0;
            x.rows.clear();
            x.full = false;
        }
    }

    fn xenmon_snap(&self, g: GEnt) -> Snap {
        let e = &self.ents[g.idx()];
        let st = &self.ent_stats[g.idx()];
        let mut time = st.time;
        time[e.state as usize] += self.now - e.since;
        Snap {
            time,
            runs: st.runs,
            allocated: st.xm.allocated,
            allocated_n: st.xm.allocated_n,
        }
    }

    /// The row of the `i`-th vCPU followed, for the window from `x.start` to now.
    fn xenmon_row(&self, x: &Windows, i: usize) -> XenmonWindowRow {
        let (g, p) = (x.ents[i], &x.prev[i]);
        let c = self.xenmon_snap(g);
        let xm = &self.ent_stats[g.idx()].xm;
        XenmonWindowRow {
            window: x.index,
            start_ns: x.start,
            passed_ns: self.now - x.start,
            ent: g.0,
            time: std::array::from_fn(|s| c.time[s] - p.time[s]),
            runs: c.runs - p.runs,
            allocated: c.allocated - p.allocated,
            allocated_n: c.allocated_n - p.allocated_n,
            wait_max_wake: xm.win_wait_max_wake,
            wait_max_preempt: xm.win_wait_max_preempt,
        }
    }

    /// The window slot: one row per vCPU (into the rows reserved at the build), then the next
    /// window.
    pub(super) fn xenmon_window_end(&mut self) {
        let mut x = self
            .xenmon
            .take()
            .expect("invariant: a xenmon slot has windows");
        for i in 0..x.ents.len() {
            let row = self.xenmon_row(&x, i);
            x.rows.push(row);
            let g = x.ents[i];
            x.prev[i] = self.xenmon_snap(g);
            let xm = &mut self.ent_stats[g.idx()].xm;
            xm.win_wait_max_wake = 0;
            xm.win_wait_max_preempt = 0;
        }
        x.index += 1;
        x.start = self.now;
        if x.index >= MAX_WINDOWS {
            x.full = true;
            self.log.push(format!(
                "xenmon: {MAX_WINDOWS} windows kept, the last ending at {} ns; no more windows",
                self.now
            ));
        } else if self.now + x.window < self.end {
            self.q.arm(x.slot, self.now + x.window);
        }
        self.xenmon = Some(x);
    }

    /// Every closed window's rows, then the open one's if it has begun (the run's end closes
    /// a last, shorter window). Empty when windows are off.
    pub(crate) fn xenmon_rows(&self) -> Vec<XenmonWindowRow> {
        let Some(x) = self.xenmon.as_deref() else {
            return Vec::new();
        };
        let mut v = x.rows.clone();
        if self.now > x.start && !x.full {
            v.extend((0..x.ents.len()).map(|i| self.xenmon_row(x, i)));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_classed_by_the_state_they_began_from() {
        let mut x = XmStats::default();
        x.waited(RunState::Blocked, 3);
        x.waited(RunState::Running, 7);
        x.waited(RunState::Blocked, 2);
        // An unpaused vCPU's wait is in neither class.
        x.waited(RunState::Offline, 100);
        assert_eq!((x.wait_max_wake, x.wait_max_preempt), (3, 7));
        assert_eq!((x.win_wait_max_wake, x.win_wait_max_preempt), (3, 7));
        x.dispatched(Some(30));
        x.dispatched(None);
        x.dispatched(Some(10));
        assert_eq!((x.allocated, x.allocated_n), (40, 2));
    }
}
