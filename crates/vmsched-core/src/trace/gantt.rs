//! What every CPU ran in a window of a trace, as slices: the rows of the HTML report's Gantt
//! chart (issue 13 item 4, docs/report.md), at every level at once: a pCPU running a vCPU, and
//! that vCPU, as a CPU of its guest, running a task.
//!
//! Read from the [`Record::Switch`] records alone: a CPU runs the entity its last switch put
//! on it until its next switch. A guest CPU keeps its task while its vCPU is descheduled at
//! the host (the guest does not see the absence, as in the Perfetto trace's CPU tracks); the
//! host rows show those absences. The records before the window are replayed so that a slice
//! that began before it is shown from the window's start.

use super::{Record, Trace};
use crate::ids::{GCpu, GEnt};
use crate::time::SimTime;

/// CPU `cpu` ran entity `ent` over `[start, end)`, clipped to the window asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    pub cpu: GCpu,
    pub ent: GEnt,
    pub start: SimTime,
    pub end: SimTime,
}

/// Every non-empty slice of every CPU within `[start, end)`, ordered by CPU, then by time.
/// The window is cut at the trace's end or truncation ([`Trace::complete_until`]).
pub fn slices(trace: &Trace, start: SimTime, end: SimTime) -> Vec<Slice> {
    let end = end.min(trace.complete_until());
    let mut out = Vec::new();
    if start >= end {
        return out;
    }
    // Per CPU: what it runs since when.
    let mut cur: Vec<Option<(GEnt, SimTime)>> = vec![None; trace.meta.cpus.len()];
    let close = |out: &mut Vec<Slice>, cpu: GCpu, run: Option<(GEnt, SimTime)>, t: SimTime| {
        if let Some((ent, since)) = run {
            let (a, b) = (since.max(start), t.min(end));
            if a < b {
                out.push(Slice {
                    cpu,
                    ent,
                    start: a,
                    end: b,
                });
            }
        }
    };
    for r in &trace.records {
        if r.t() >= end {
            break;
        }
        if let Record::Switch { t, cpu, next, .. } = *r {
            let slot = &mut cur[cpu.idx()];
            if slot.map(|(e, _)| Some(e)) == Some(next) {
                continue;
            }
            close(&mut out, cpu, *slot, t);
            *slot = next.map(|e| (e, t));
        }
    }
    for (i, run) in cur.iter().enumerate() {
        close(&mut out, GCpu(i as u32), *run, end);
    }
    out.sort_by_key(|s| (s.cpu.idx(), s.start));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::LevelId;
    use crate::trace::{CpuMeta, TraceBuf, TraceMeta};

    fn switch(t: SimTime, cpu: u32, next: Option<u32>) -> Record {
        Record::Switch {
            t,
            level: LevelId(0),
            cpu: GCpu(cpu),
            prev: None,
            next: next.map(GEnt),
            slice: None,
        }
    }

    fn trace(records: &[Record], end: SimTime, cpus: usize) -> Trace {
        let mut b = TraceBuf::new(100);
        for r in records {
            b.push(*r);
        }
        let meta = TraceMeta {
            cpus: (0..cpus)
                .map(|i| CpuMeta {
                    level: LevelId(0),
                    local: i as u32,
                    backing: None,
                })
                .collect(),
            ..TraceMeta::default()
        };
        b.finish(end, meta)
    }

    #[test]
    fn slices_are_clipped_to_the_window_and_idle_is_a_gap() {
        // cpu0: e0 from 0, idle at 40, e1 from 60; cpu1: e2 from 10 to the end.
        let tr = trace(
            &[
                switch(0, 0, Some(0)),
                switch(10, 1, Some(2)),
                switch(40, 0, None),
                switch(60, 0, Some(1)),
            ],
            100,
            2,
        );
        let s = slices(&tr, 20, 80);
        let want = [(0, 0, 20, 40), (0, 1, 60, 80), (1, 2, 20, 80)];
        assert_eq!(s.len(), want.len(), "{s:?}");
        for (got, (cpu, ent, a, b)) in s.iter().zip(want) {
            assert_eq!(
                (got.cpu, got.ent, got.start, got.end),
                (GCpu(cpu), GEnt(ent), a, b)
            );
        }
    }

    #[test]
    fn a_switch_to_the_same_entity_continues_its_slice_and_truncation_ends_the_window() {
        let mut tr = trace(&[switch(0, 0, Some(3)), switch(30, 0, Some(3))], 100, 1);
        tr.truncated_at = Some(50);
        let s = slices(&tr, 0, 100);
        assert_eq!(
            s,
            vec![Slice {
                cpu: GCpu(0),
                ent: GEnt(3),
                start: 0,
                end: 50
            }]
        );
        assert!(slices(&tr, 60, 90).is_empty());
    }
}
