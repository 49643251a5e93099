//! The xentrace sink: the host level of a [`Trace`] written as Xen's binary trace, the file
//! `xentrace` writes, for Xen's own readers (`xentrace_format`, `xenalyze`).
//!
//! Where the format comes from (facts only, from Xen's public headers and tools; spec
//! xen-schedulers.md §8.1–8.4): `xen/include/public/trace.h` (event ids, header word),
//! `tools/xentrace/xentrace.c` (file layout: per-pCPU windows, each after a
//! `TRC_TRACE_CPU_CHANGE` record), `xen/common/sched/core.c` (the generic scheduler records, their
//! data and their order at a decision point), `xen/common/sched/credit.c` and `credit2.c` (the
//! schedulers' own `TRC_SCHED_CLASS` records).
//!
//! **Record.** Little-endian 32-bit words: a header (bits 0–27 the event id, bits 28–30 the
//! number of data words, bit 31 set when a 64-bit cycle count follows), the cycle count, the data.
//! Times are the simulation's nanoseconds converted to cycles of a CPU of `cpu_hz`
//! ([`XentraceOpts`]; default 2.4 GHz, xenalyze's own default), so `xenalyze --cpu-hz` with the
//! same figure reads them back as the simulation's times.
//!
//! **What is written** (docs/trace.md): per switch `SWITCH_INFPREV`, `SWITCH_INFNEXT`,
//! `SWITCH`, then the runstate changes of the vCPU switched out and of the one switched in (the
//! idle vCPU included, domain `DOMID_IDLE`, vCPU = the pCPU); per kept vCPU `SWITCH_INFCONT` and
//! `CONTINUE_RUNNING`; `WAKE` then its runstate change; `BLOCK` (its runstate change comes at the
//! switch); other runstate changes (pauses, hot-unplug); and each scheduler's own records,
//! written by the [`XenClass`] of the host's scheduler ([`class_of`]). Guest levels are not Xen's
//! to trace and are left out.

use std::io::{self, Write};

use super::{Record, SchedEvent, Trace};
use crate::ids::{GCpu, GEnt, LevelId};
use crate::sched::RunState;
use crate::time::{Nanos, SimTime};

mod classes;
pub use classes::{class_of, Credit1, Credit2, Credit2v421, Null, Rtds, CLASSES};

/// `TRC_LOST_RECORDS`.
pub const TRC_LOST_RECORDS: u32 = 0x0001_f001;
/// `TRC_TRACE_CPU_CHANGE`: starts each pCPU's window of the file (pCPU, window bytes).
pub const TRC_TRACE_CPU_CHANGE: u32 = 0x0001_f003;
/// `TRC_SCHED_MIN`: runstate changes.
pub const TRC_SCHED_MIN: u32 = 0x0002_1000;
/// `TRC_SCHED_CLASS`: scheduler-specific records ([`class_event`]).
pub const TRC_SCHED_CLASS: u32 = 0x0002_2000;
/// `TRC_SCHED_VERBOSE`: the generic scheduler records.
pub const TRC_SCHED_VERBOSE: u32 = 0x0002_8000;
/// `TRC_SCHED_RUNSTATE_CHANGE`, or'ed with `old << 8 | new << 4`; data: dv.
pub const TRC_SCHED_RUNSTATE_CHANGE: u32 = TRC_SCHED_MIN + 1;
/// `TRC_SCHED_CONTINUE_RUNNING`; data: dv.
pub const TRC_SCHED_CONTINUE_RUNNING: u32 = TRC_SCHED_MIN + 2;
/// `TRC_SCHED_WAKE`; data: domain, vCPU.
pub const TRC_SCHED_WAKE: u32 = TRC_SCHED_VERBOSE + 4;
/// `TRC_SCHED_BLOCK`; data: domain, vCPU.
pub const TRC_SCHED_BLOCK: u32 = TRC_SCHED_VERBOSE + 6;
/// `TRC_SCHED_SWITCH`; data: prev domain, prev vCPU, next domain, next vCPU.
pub const TRC_SCHED_SWITCH: u32 = TRC_SCHED_VERBOSE + 10;
/// `TRC_SCHED_SWITCH_INFPREV`; data: domain, vCPU, run time.
pub const TRC_SCHED_SWITCH_INFPREV: u32 = TRC_SCHED_VERBOSE + 14;
/// `TRC_SCHED_SWITCH_INFNEXT`; data: domain, vCPU, waited, slice.
pub const TRC_SCHED_SWITCH_INFNEXT: u32 = TRC_SCHED_VERBOSE + 15;
/// `TRC_SCHED_SWITCH_INFCONT`; data: domain, vCPU, run time, slice.
pub const TRC_SCHED_SWITCH_INFCONT: u32 = TRC_SCHED_VERBOSE + 17;
/// `TRC_SCHED_DOM_ADD` (4.20: the domain).
pub const TRC_SCHED_DOM_ADD: u32 = TRC_SCHED_VERBOSE + 1;
/// `TRC_SCHED_DOM_REM` (4.20: the domain).
pub const TRC_SCHED_DOM_REM: u32 = TRC_SCHED_VERBOSE + 2;
/// `TRC_SCHED_SLEEP`; data: domain, vCPU.
pub const TRC_SCHED_SLEEP: u32 = TRC_SCHED_VERBOSE + 3;
/// `TRC_SCHED_YIELD`; data: domain, vCPU.
pub const TRC_SCHED_YIELD: u32 = TRC_SCHED_VERBOSE + 5;
/// `DOMID_IDLE`: the domain of the idle vCPUs (one per pCPU, numbered as the pCPU).
pub const DOMID_IDLE: u32 = 0x7fff;

/// Header bit 31: a cycle count follows.
const HDR_CYCLES: u32 = 1 << 31;
const EXTRA_SHIFT: u32 = 28;
/// Most data words a record has.
pub const MAX_EXTRA: usize = 7;

/// xenalyze's default CPU frequency (its `--cpu-hz`).
pub const DEFAULT_CPU_HZ: u64 = 2_400_000_000;

/// Bytes of one pCPU's records the file holds in one window, as xentrace dumps a per-pCPU
/// buffer (xentrace's windows are the size of Xen's per-CPU trace buffer; any size reads the
/// same).
const WINDOW_BYTES: usize = 256 * 1024;

/// Choices of the export.
#[derive(Clone, Copy, Debug)]
pub struct XentraceOpts {
    /// The CPU frequency the cycle counts assume: cycles = ns × `cpu_hz` / 10⁹.
    pub cpu_hz: u64,
}

impl Default for XentraceOpts {
    fn default() -> Self {
        XentraceOpts {
            cpu_hz: DEFAULT_CPU_HZ,
        }
    }
}

/// The event id of record `n` of scheduler `sched_id` (Xen `TRC_SCHED_CLASS_EVT`: Credit 0,
/// Credit2 1, ARINC653 3, RTDS 4, null 5).
pub const fn class_event(sched_id: u32, n: u32) -> u32 {
    TRC_SCHED_CLASS | (sched_id << 9) | n
}

/// Appends one record to `buf`: the header (event id, number of data words, cycles flag), the
/// cycle count if any, the data words, all little-endian.
pub fn encode(buf: &mut Vec<u8>, event: u32, cycles: Option<u64>, data: &[u32]) {
    assert!(
        event < 1 << EXTRA_SHIFT,
        "event id {event:#x} beyond 28 bits"
    );
    assert!(data.len() <= MAX_EXTRA, "{} data words", data.len());
    let mut hdr = event | (data.len() as u32) << EXTRA_SHIFT;
    if cycles.is_some() {
        hdr |= HDR_CYCLES;
    }
    buf.extend_from_slice(&hdr.to_le_bytes());
    if let Some(c) = cycles {
        buf.extend_from_slice(&c.to_le_bytes());
    }
    for w in data {
        buf.extend_from_slice(&w.to_le_bytes());
    }
}

/// The cycle count of time `t` (ns) on a CPU of `hz`: `1 + t × hz / 10⁹`. The count starts at 1,
/// not 0: xenalyze refuses a pCPU whose first cycle count is 0 (a TSC is never 0 on a real
/// machine); one cycle is well under the simulation's nanosecond.
pub fn cycles(t: SimTime, hz: u64) -> u64 {
    1 + (t as u128 * hz as u128 / 1_000_000_000) as u64
}

/// Xen's number for a runstate (`RUNSTATE_running` 0, `runnable` 1, `blocked` 2, `offline` 3).
pub fn runstate_no(s: RunState) -> u32 {
    match s {
        RunState::Running => 0,
        RunState::Runnable => 1,
        RunState::Blocked => 2,
        RunState::Offline => 3,
    }
}

/// A duration as Xen's 32-bit trace fields hold it (truncated, as Xen does).
fn ns32(d: Nanos) -> u32 {
    d as u32
}

/// A slice as `SWITCH_INFNEXT`/`INFCONT` hold it: the ns of the timer, -1 for none.
fn slice32(s: Option<Nanos>) -> u32 {
    s.map_or(u32::MAX, ns32)
}

/// The Xen ids of the host's vCPUs and pCPUs, for [`XenClass`] implementations.
pub struct Ids {
    /// Per global entity: (domain id, vCPU id) if it is a vCPU of the host.
    ent: Vec<Option<(u32, u32)>>,
    /// Per global CPU: the pCPU id if it is a CPU of the host.
    pcpu: Vec<Option<u32>>,
}

impl Ids {
    /// Domain and vCPU ids of host entity `e`.
    pub fn dom_vcpu(&self, e: GEnt) -> (u32, u32) {
        self.ent[e.idx()].expect("invariant: a host-level record names a host vCPU")
    }

    /// The "dv" word: `domain << 16 | vcpu`.
    pub fn dv(&self, e: GEnt) -> u32 {
        let (d, v) = self.dom_vcpu(e);
        (d << 16) | (v & 0xffff)
    }

    /// pCPU id of host CPU `c`.
    pub fn pcpu(&self, c: GCpu) -> u32 {
        self.pcpu[c.idx()].expect("invariant: a host-level record names a pCPU")
    }
}

/// How one Xen scheduler writes its own events (its `TRC_SCHED_CLASS` records). A scheduler
/// added to the project adds an implementation and a line in [`CLASSES`] (both in
/// `xentrace/classes.rs`; docs/trace.md).
pub trait XenClass: Sync {
    /// Xen's scheduler id in [`class_event`].
    fn sched_id(&self) -> u32;
    /// The record number within the class and the data words of `ev`, or None when Xen's
    /// scheduler traces no such event.
    fn record(&self, ev: &SchedEvent<GEnt, GCpu>, ids: &Ids) -> Option<(u32, Vec<u32>)>;
    /// The event id of record `n` ([`class_event`] with [`Self::sched_id`]; a release before
    /// the scheduler ids, Credit2 4.2.1, numbers its records from `TRC_SCHED_CLASS`).
    fn event(&self, n: u32) -> u32 {
        class_event(self.sched_id(), n)
    }
    /// Whether record `n` carries a cycle count (all but a few of 4.2.1's Credit2 records).
    fn has_cycles(&self, _n: u32) -> bool {
        true
    }
}

/// What was written, for the run's results.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct XentraceSummary {
    /// Records written (the `TRC_TRACE_CPU_CHANGE` window headers not counted).
    pub records: u64,
    /// Records per Xen event id, in id order (a class record counted under its id).
    pub by_event: Vec<(u32, u64)>,
    /// The CPU frequency the cycle counts assume.
    pub cpu_hz: u64,
    /// Xen domain id of each domain, by name, in domain-id order.
    pub domains: Vec<(String, u32)>,
    /// On a machine with cpupools: each pool's name, its scheduler's name and Xen's id of
    /// that scheduler (None: it writes no class records), Pool-0 first. The file itself has
    /// no record of the pools (Xen's `cpupool.c` traces nothing); empty without pools.
    pub pools: Vec<(String, &'static str, Option<u32>)>,
    /// Set when the trace was truncated (its records end there).
    pub truncated_at_ns: Option<SimTime>,
}

/// The host level of a trace: the Xen ids and the names of its domains.
struct Host {
    level: LevelId,
    ids: Ids,
    npcpu: usize,
    domains: Vec<(String, u32)>,
}

impl Host {
    /// Domain ids: in level order from 1, except a domain named `dom0` or `Domain-0`, which is
    /// 0. vCPU ids: the vCPU's CPU number in its guest.
    fn of(tr: &Trace) -> Option<Host> {
        let m = &tr.meta;
        let level = m.cpus.iter().find(|c| c.backing.is_none())?.level;
        let mut pcpu = vec![None; m.cpus.len()];
        let mut npcpu = 0;
        for (c, cm) in m.cpus.iter().enumerate() {
            if cm.level == level {
                pcpu[c] = Some(cm.local);
                npcpu = npcpu.max(cm.local as usize + 1);
            }
        }
        // The guest levels of the host's vCPUs, in level order.
        let mut guests: Vec<LevelId> = m
            .ents
            .iter()
            .filter(|e| e.level == level)
            .filter_map(|e| e.vcpu_of.map(|c| m.cpus[c.idx()].level))
            .collect();
        guests.sort();
        guests.dedup();
        let mut domid = vec![None; m.levels.len()];
        let mut next = 1;
        for &g in &guests {
            let name = &m.levels[g.idx()].name;
            domid[g.idx()] = Some(if name == "dom0" || name == "Domain-0" {
                0
            } else {
                next += 1;
                next - 1
            });
        }
        let ent = m
            .ents
            .iter()
            .map(|e| {
                let c = e.vcpu_of.filter(|_| e.level == level)?;
                let cm = &m.cpus[c.idx()];
                Some((domid[cm.level.idx()]?, cm.local))
            })
            .collect();
        let mut domains: Vec<(String, u32)> = guests
            .iter()
            .map(|g| (m.levels[g.idx()].name.clone(), domid[g.idx()].unwrap()))
            .collect();
        domains.sort_by_key(|d| d.1);
        Some(Host {
            level,
            ids: Ids { ent, pcpu },
            npcpu,
            domains,
        })
    }
}

/// The per-pCPU buffers being filled, flushed to the file a window at a time.
struct Out<W: Write> {
    out: W,
    buf: Vec<Vec<u8>>,
    /// Per pCPU: the cycle count of its last record (a pCPU's counts never go back).
    floor: Vec<u64>,
    records: u64,
    by_event: std::collections::BTreeMap<u32, u64>,
}

impl<W: Write> Out<W> {
    /// Writes a record; returns the cycle count it got (at least the pCPU's last).
    fn rec(&mut self, pcpu: u32, cycles: u64, event: u32, data: &[u32]) -> io::Result<u64> {
        self.rec_opt(pcpu, Some(cycles), event, data)
    }

    /// A record with or without a cycle count.
    fn rec_opt(
        &mut self,
        pcpu: u32,
        cycles: Option<u64>,
        event: u32,
        data: &[u32],
    ) -> io::Result<u64> {
        let f = &mut self.floor[pcpu as usize];
        let cycles = cycles.map(|c| c.max(*f));
        *f = cycles.unwrap_or(*f);
        let used = *f;
        let b = &mut self.buf[pcpu as usize];
        encode(b, event, cycles, data);
        self.records += 1;
        *self.by_event.entry(event).or_default() += 1;
        if b.len() >= WINDOW_BYTES {
            // Every pCPU's buffer at once, as xentrace dumps all of them on each round: a
            // reader merging the pCPUs by time (xenalyze) must meet each pCPU's window before
            // the records of another pCPU that come after it.
            for p in 0..self.buf.len() {
                self.flush(p as u32)?;
            }
        }
        Ok(used)
    }

    /// Writes pCPU `pcpu`'s buffer as one window: `TRC_TRACE_CPU_CHANGE` (pCPU, bytes), then
    /// the records.
    fn flush(&mut self, pcpu: u32) -> io::Result<()> {
        let b = &mut self.buf[pcpu as usize];
        if b.is_empty() {
            return Ok(());
        }
        let mut head = Vec::with_capacity(12);
        encode(
            &mut head,
            TRC_TRACE_CPU_CHANGE,
            None,
            &[pcpu, b.len() as u32],
        );
        self.out.write_all(&head)?;
        self.out.write_all(b)?;
        b.clear();
        Ok(())
    }
}

/// Per host vCPU, what the generic records' fields need.
#[derive(Clone, Copy, Default)]
struct VcpuState {
    /// The pCPU it last ran on (Xen's `v->processor`); 0 before it ever ran.
    pcpu: u32,
    /// When it was last switched in or out (Xen's unit `state_entry_time`).
    switched: SimTime,
    state: Option<RunState>,
    /// The pCPU its last wake was written on.
    pcpu_woken: u32,
    /// The pCPU and cycle count of its last runstate change.
    rs_last: Option<(u32, u64)>,
}

/// A class record waiting for the record after it ([`flush_class`]).
struct PendingClass {
    t: SimTime,
    /// The pCPU whose code reported it, if any.
    local: Option<u32>,
    /// The pCPU it names as the one scheduling (RTDS's and null's `SCHEDULE`).
    marker: Option<u32>,
    /// The pCPU a tickle names.
    tickle: Option<u32>,
    event: u32,
    cycles: bool,
    data: Vec<u32>,
}

/// Writes the pending class records on the pCPU whose code made them, as Xen does. The engine
/// says which CPU ran the hook when one did; a pCPU's scheduler (`do_schedule`) and timers run
/// outside any, so: from a `SCHEDULE` record on, its pCPU; else the pCPU of a wake they
/// directly follow (`after_wake`, at the same time); else the pCPU of the switch or
/// continue that directly follows them (`switch_p`: they came from its scheduler); else a
/// tickle's pCPU, and pCPU 0 for the rest (a timer outside any CPU).
fn flush_class<W: Write>(
    w: &mut Out<W>,
    pending: &mut Vec<PendingClass>,
    switch_p: Option<u32>,
    after_wake: Option<(u32, SimTime)>,
    hz: u64,
) -> io::Result<()> {
    let mut marker = None;
    for pc in pending.drain(..) {
        marker = pc.marker.or(marker);
        let p = marker.or(pc.local).unwrap_or_else(|| {
            after_wake
                .filter(|a| a.1 == pc.t)
                .map(|a| a.0)
                .or(switch_p)
                .or(pc.tickle)
                .unwrap_or(0)
        });
        let c = pc.cycles.then(|| cycles(pc.t, hz));
        w.rec_opt(p, c, pc.event, &pc.data)?;
    }
    Ok(())
}

/// The policy events that are Xen core records, not a scheduler's own (written as generic
/// records whatever the scheduler).
fn generic(ev: &SchedEvent<GEnt, GCpu>) -> bool {
    matches!(
        ev,
        SchedEvent::Sleep { .. } | SchedEvent::CoreWake { .. } | SchedEvent::Yield { .. }
    )
}

/// Writes the host level of `tr` as a xentrace file to `out` (buffer it). A trace without a
/// host level (no physical CPU) writes an empty file.
pub fn write<W: Write>(tr: &Trace, opts: &XentraceOpts, out: W) -> io::Result<XentraceSummary> {
    assert!(opts.cpu_hz > 0, "cpu_hz must be positive");
    let Some(host) = Host::of(tr) else {
        return Ok(XentraceSummary {
            cpu_hz: opts.cpu_hz,
            ..Default::default()
        });
    };
    // The class of the host's scheduler; on a machine with cpupools, of the pool whose
    // scheduler reported the events that follow (SchedEvent::Pool marks them).
    let lm = &tr.meta.levels[host.level.idx()];
    let pool_class: Vec<Option<&'static dyn XenClass>> =
        lm.pools.iter().map(|p| class_of(p.2)).collect();
    let mut class = class_of(lm.class);
    let hz = opts.cpu_hz as u128;
    let cyc = |t: SimTime| cycles(t, hz as u64);
    let ids = &host.ids;
    let m = &tr.meta;
    let mut w = Out {
        out,
        buf: vec![Vec::new(); host.npcpu],
        floor: vec![0; host.npcpu],
        records: 0,
        by_event: Default::default(),
    };
    let mut vs = vec![VcpuState::default(); m.ents.len()];
    // Per pCPU: when its idle vCPU was last switched in or out.
    let mut idle_switched = vec![0 as SimTime; host.npcpu];
    // Per pCPU: the vCPU it runs (None: idle).
    let mut cur: Vec<Option<GEnt>> = vec![None; host.npcpu];
    // A switch to idle whose idle runstate change waits for the previous vCPU's (§8.4 order).
    let mut idle_in: Option<(u32, SimTime, GEnt)> = None;
    // A wake whose runstate change (at the same instant) goes to the waker's pCPU.
    let mut woken: Option<(GEnt, u32, SimTime)> = None;
    let idle_rs = |from: RunState, to: RunState| {
        TRC_SCHED_RUNSTATE_CHANGE | runstate_no(from) << 8 | runstate_no(to) << 4
    };
    // The pCPU a CPU stands for: itself for a pCPU, where it last ran for a vCPU of the host
    // (a deeper nested guest's CPU: pCPU 0, an approximation).
    let pcpu_of = |c: GCpu, vs: &[VcpuState]| -> u32 {
        match (ids.pcpu[c.idx()], m.cpus[c.idx()].backing) {
            (Some(p), _) => p,
            (None, Some(b)) if m.ents[b.idx()].level == host.level => vs[b.idx()].pcpu,
            _ => 0,
        }
    };
    // The class records since the last other record, written when the next one shows where
    // they belong (flush_class).
    let mut pending: Vec<PendingClass> = Vec::new();
    // The pCPU and time of a wake whose runstate change was the last record.
    let mut after_wake: Option<(u32, SimTime)> = None;
    let mut wake_rs: Option<(GEnt, SimTime)> = None;
    for r in &tr.records {
        if !pending.is_empty()
            && !matches!(*r, Record::Sched { level, ev, .. } if level == host.level && !generic(&ev))
        {
            let switch_p = match *r {
                Record::Switch { t, level, cpu, .. } | Record::Continue { t, level, cpu, .. }
                    if level == host.level && t == pending[0].t =>
                {
                    Some(ids.pcpu(cpu))
                }
                _ => None,
            };
            flush_class(&mut w, &mut pending, switch_p, after_wake, hz as u64)?;
        }
        if let Some((p, t, prev)) = idle_in {
            // The probes of the switch come between it and prev's runstate change.
            let wait = matches!(*r, Record::Runstate { ent, .. } if ent == prev)
                || matches!(*r, Record::Probe { .. });
            if !wait {
                w.rec(
                    p,
                    cyc(t),
                    idle_rs(RunState::Runnable, RunState::Running),
                    &[DOMID_IDLE << 16 | p],
                )?;
                idle_in = None;
            }
        }
        match *r {
            Record::Switch {
                t,
                level,
                cpu,
                prev,
                next,
                slice,
            } if level == host.level => {
                let p = ids.pcpu(cpu);
                let c = cyc(t);
                cur[p as usize] = next;
                let dv = |e: Option<GEnt>| e.map_or((DOMID_IDLE, p), |e| ids.dom_vcpu(e));
                let (pd, pv) = dv(prev);
                let (nd, nv) = dv(next);
                // Run time: since prev was switched in; waited: since next was last switched
                // in or out if it is runnable (Xen 4.20's unit state_entry_time), else 0.
                let ran = match prev {
                    Some(e) => t - vs[e.idx()].switched,
                    None => t - idle_switched[p as usize],
                };
                let waited = match next {
                    Some(e) if vs[e.idx()].state == Some(RunState::Runnable) => {
                        t - vs[e.idx()].switched
                    }
                    Some(_) => 0,
                    None => t - idle_switched[p as usize],
                };
                w.rec(p, c, TRC_SCHED_SWITCH_INFPREV, &[pd, pv, ns32(ran)])?;
                w.rec(
                    p,
                    c,
                    TRC_SCHED_SWITCH_INFNEXT,
                    &[nd, nv, ns32(waited), slice32(slice)],
                )?;
                w.rec(p, c, TRC_SCHED_SWITCH, &[pd, pv, nd, nv])?;
                match prev {
                    Some(e) => vs[e.idx()].switched = t,
                    None => {
                        idle_switched[p as usize] = t;
                        w.rec(
                            p,
                            c,
                            idle_rs(RunState::Running, RunState::Runnable),
                            &[DOMID_IDLE << 16 | p],
                        )?;
                    }
                }
                match next {
                    Some(e) => {
                        vs[e.idx()].switched = t;
                        vs[e.idx()].pcpu = p;
                    }
                    None => {
                        idle_switched[p as usize] = t;
                        idle_in = prev.map(|e| (p, t, e));
                    }
                }
            }
            Record::Continue {
                t,
                level,
                cpu,
                ent,
                slice,
            } if level == host.level => {
                let p = ids.pcpu(cpu);
                let (d, v) = ids.dom_vcpu(ent);
                let ran = t - vs[ent.idx()].switched;
                w.rec(
                    p,
                    cyc(t),
                    TRC_SCHED_SWITCH_INFCONT,
                    &[d, v, ns32(ran), slice32(slice)],
                )?;
                w.rec(p, cyc(t), TRC_SCHED_CONTINUE_RUNNING, &[ids.dv(ent)])?;
            }
            Record::Runstate {
                t,
                level,
                ent,
                from,
                to,
            } if level == host.level => {
                // A wake's own change (out of blocked or offline, not into running: a vCPU
                // that was runnable changes nothing at its wake, and its next change, when
                // a pCPU takes it, is that pCPU's).
                let of_wake = from != RunState::Running && to != RunState::Running;
                let p = match woken.take() {
                    Some((e, p, wt)) if e == ent && wt == t && of_wake => {
                        vs[ent.idx()].pcpu_woken = p;
                        wake_rs = Some((ent, t));
                        p
                    }
                    _ => vs[ent.idx()].pcpu,
                };
                vs[ent.idx()].state = Some(to);
                // A change on another pCPU than the vCPU's last one at the same instant (it
                // left one pCPU and another took it at once) is put one cycle later: xenalyze
                // merges the pCPUs by cycle count and takes equal counts in no set order, so
                // it would otherwise see the vCPU run on one before it left the other (a
                // real vCPU cannot: the second pCPU waits for the first's context switch).
                let mut c = cyc(t);
                if let Some((q, qc)) = vs[ent.idx()].rs_last {
                    if q != p && c <= qc {
                        c = qc + 1;
                    }
                }
                let c = w.rec(p, c, idle_rs(from, to), &[ids.dv(ent)])?;
                vs[ent.idx()].rs_last = Some((p, c));
                if let Some((ip, it, _)) = idle_in.filter(|x| x.2 == ent) {
                    w.rec(
                        ip,
                        cyc(it),
                        idle_rs(RunState::Runnable, RunState::Running),
                        &[DOMID_IDLE << 16 | ip],
                    )?;
                    idle_in = None;
                }
            }
            Record::Wake {
                t,
                level,
                ent,
                waker_cpu,
                ..
            } if level == host.level => {
                let p = waker_cpu.map_or(vs[ent.idx()].pcpu, |c| ids.pcpu(c));
                let (d, v) = ids.dom_vcpu(ent);
                w.rec(p, cyc(t), TRC_SCHED_WAKE, &[d, v])?;
                woken = Some((ent, p, t));
            }
            Record::Block { t, level, ent } if level == host.level => {
                let (d, v) = ids.dom_vcpu(ent);
                w.rec(vs[ent.idx()].pcpu, cyc(t), TRC_SCHED_BLOCK, &[d, v])?;
            }
            Record::Sched {
                ev: SchedEvent::Pool { pool },
                level,
                ..
            } if level == host.level => {
                class = pool_class.get(pool as usize).copied().flatten();
            }
            Record::Sched {
                t,
                level,
                cpu,
                ev:
                    SchedEvent::Sleep { ent } | SchedEvent::CoreWake { ent } | SchedEvent::Yield { ent },
            } if level == host.level => {
                let (d, v) = ids.dom_vcpu(ent);
                let p = cpu.map_or(vs[ent.idx()].pcpu, |c| pcpu_of(c, &vs));
                let event = match r {
                    Record::Sched {
                        ev: SchedEvent::Sleep { .. },
                        ..
                    } => TRC_SCHED_SLEEP,
                    Record::Sched {
                        ev: SchedEvent::Yield { .. },
                        ..
                    } => TRC_SCHED_YIELD,
                    _ => {
                        // Its runstate change (if any) follows on the same pCPU.
                        woken = Some((ent, p, t));
                        TRC_SCHED_WAKE
                    }
                };
                w.rec(p, cyc(t), event, &[d, v])?;
            }
            Record::Domain {
                t,
                level,
                ent,
                created,
            } if level == host.level => {
                let (d, _) = ids.dom_vcpu(ent);
                let event = if created {
                    TRC_SCHED_DOM_ADD
                } else {
                    TRC_SCHED_DOM_REM
                };
                w.rec(0, cyc(t), event, &[d])?;
            }
            Record::Sched { t, level, cpu, ev } if level == host.level => {
                let Some(class) = class else { continue };
                let Some((n, data)) = class.record(&ev, ids) else {
                    continue;
                };
                let (marker, tickle) = match ev {
                    SchedEvent::Schedule { cpu, .. }
                    | SchedEvent::NullSchedule { cpu, .. }
                    | SchedEvent::RunqSchedule { cpu, .. } => (Some(ids.pcpu(cpu)), None),
                    SchedEvent::Tickle { cpu } => (None, Some(ids.pcpu(cpu))),
                    _ => (None, None),
                };
                pending.push(PendingClass {
                    t,
                    local: cpu.map(|c| pcpu_of(c, &vs)),
                    marker,
                    tickle,
                    event: class.event(n),
                    cycles: class.has_cycles(n),
                    data,
                });
            }
            _ => {}
        }
        if !matches!(*r, Record::Sched { .. }) {
            after_wake = match *r {
                Record::Runstate { t, ent, .. } if wake_rs == Some((ent, t)) => {
                    Some((vs[ent.idx()].pcpu_woken, t))
                }
                _ => None,
            };
        }
    }
    flush_class(&mut w, &mut pending, None, after_wake, hz as u64)?;
    if let Some((p, t, _)) = idle_in {
        w.rec(
            p,
            cyc(t),
            idle_rs(RunState::Runnable, RunState::Running),
            &[DOMID_IDLE << 16 | p],
        )?;
    }
    if let Some(first) = tr.truncated_at {
        // The bound dropped records from `first` on (crate::trace: one buffer for the whole
        // run, so from then on every pCPU loses its records). Xen's writer reports a loss with
        // the next record that fits (`insert_lost_records`): here each pCPU gets one
        // TRC_LOST_RECORDS at the end of the run, as if its buffer had room again then:
        // the count (the run's dropped records, of every level: the model has no per-pCPU
        // count), the vCPU current at the loss (domain low, vCPU high half), the first lost
        // cycle count. xenalyze marks the pCPU's time from `first` as lost.
        let fc = cyc(first);
        let at = cyc(tr.end).max(fc + 1);
        for p in 0..host.npcpu {
            let (d, v) = cur[p].map_or((DOMID_IDLE, p as u32), |e| ids.dom_vcpu(e));
            let count = tr.dropped.min(u32::MAX as u64) as u32;
            w.rec(
                p as u32,
                at,
                TRC_LOST_RECORDS,
                &[count, (d & 0xffff) | v << 16, fc as u32, (fc >> 32) as u32],
            )?;
        }
    }
    for p in 0..host.npcpu {
        w.flush(p as u32)?;
    }
    w.out.flush()?;
    Ok(XentraceSummary {
        records: w.records,
        by_event: w.by_event.into_iter().collect(),
        cpu_hz: opts.cpu_hz,
        domains: host.domains,
        pools: lm
            .pools
            .iter()
            .zip(&pool_class)
            .map(|((n, s, _), c)| (n.clone(), *s, c.map(|c| c.sched_id())))
            .collect(),
        truncated_at_ns: tr.truncated_at,
    })
}

/// Writes the host level of `tr` to the file `path`.
pub fn write_file(
    tr: &Trace,
    opts: &XentraceOpts,
    path: &std::path::Path,
) -> io::Result<XentraceSummary> {
    let f = std::fs::File::create(path)?;
    write(tr, opts, io::BufWriter::with_capacity(1 << 20, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(b: &[u8]) -> Vec<u32> {
        b.chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn header_holds_the_event_the_word_count_and_the_cycles_bit_little_endian() {
        let mut b = Vec::new();
        encode(
            &mut b,
            TRC_SCHED_SWITCH,
            Some(0x1_0000_0002),
            &[1, 2, 0x7fff, 3],
        );
        assert_eq!(b.len(), 4 + 8 + 16);
        assert_eq!(
            &b[..4],
            &[0x0a, 0x80, 0x02, 0xc0],
            "0x8000_0000 | 4 << 28 | 0x2800a"
        );
        let w = words(&b);
        assert_eq!(w[0], 0xc002_800a);
        assert_eq!((w[1], w[2]), (2, 1), "cycles: low word, then high");
        assert_eq!(&w[3..], &[1, 2, 0x7fff, 3]);
        let mut b = Vec::new();
        encode(&mut b, TRC_TRACE_CPU_CHANGE, None, &[3, 4096]);
        assert_eq!(
            words(&b),
            vec![0x2001_f003, 3, 4096],
            "xentrace's window header"
        );
        let mut b = Vec::new();
        encode(&mut b, TRC_SCHED_CONTINUE_RUNNING, Some(5), &[]);
        assert_eq!(words(&b)[0], 0x8002_1002);
    }

    #[test]
    fn event_ids_are_xens() {
        assert_eq!(TRC_SCHED_SWITCH_INFPREV, 0x0002_800e);
        assert_eq!(TRC_SCHED_SWITCH_INFNEXT, 0x0002_800f);
        assert_eq!(TRC_SCHED_SWITCH_INFCONT, 0x0002_8011);
        assert_eq!(TRC_SCHED_WAKE, 0x0002_8004);
        assert_eq!(TRC_SCHED_BLOCK, 0x0002_8006);
        let rs = |a, b| TRC_SCHED_RUNSTATE_CHANGE | runstate_no(a) << 8 | runstate_no(b) << 4;
        assert_eq!(rs(RunState::Running, RunState::Runnable), 0x0002_1011);
        assert_eq!(rs(RunState::Blocked, RunState::Runnable), 0x0002_1211);
        assert_eq!(rs(RunState::Runnable, RunState::Offline), 0x0002_1131);
        assert_eq!(class_event(0, 6), 0x0002_2006, "TRC_CSCHED_TICKLE");
        assert_eq!(class_event(1, 3), 0x0002_2203, "TRC_CSCHED2_CREDIT_BURN");
        assert_eq!(class_event(1, 22), 0x0002_2216, "TRC_CSCHED2_RATELIMIT");
        assert_eq!(class_event(4, 1), 0x0002_2801, "RTDS tickle");
    }

    /// A host of two pCPUs with one domain of one vCPU (domain 1, vCPU 0).
    fn tiny(records: Vec<Record>, truncated_at: Option<SimTime>) -> Trace {
        use crate::trace::{CpuMeta, EntMeta, LevelMeta, TraceMeta};
        let lv = |name: &str| LevelMeta {
            name: name.into(),
            sched: "credit2",
            class: "credit2",
            pools: Vec::new(),
        };
        let cpu = |level: u32, local: u32, backing: Option<GEnt>| CpuMeta {
            level: LevelId(level),
            local,
            backing,
        };
        Trace {
            records,
            max_records: 100,
            dropped: truncated_at.map_or(0, |_| 7),
            truncated_at,
            end: 1_000_000,
            meta: TraceMeta {
                levels: vec![lv("host"), lv("domU1")],
                cpus: vec![cpu(0, 0, None), cpu(0, 1, None), cpu(1, 0, Some(GEnt(0)))],
                ents: vec![EntMeta {
                    level: LevelId(0),
                    name: "domU1.v0".into(),
                    vcpu_of: Some(GCpu(2)),
                }],
            },
        }
    }

    /// (pCPU, event, cycles, data) of each record of a file.
    fn read(b: &[u8]) -> Vec<(u32, u32, Option<u64>, Vec<u32>)> {
        let w = words(b);
        let (mut out, mut i) = (Vec::new(), 0);
        while i < w.len() {
            let (p, end) = (w[i + 1], i + 3 + w[i + 2] as usize / 4);
            i += 3;
            while i < end {
                let n = ((w[i] >> 28) & 7) as usize;
                let c = (w[i] >> 31 == 1).then(|| w[i + 1] as u64 | (w[i + 2] as u64) << 32);
                let at = i + 1 + if c.is_some() { 2 } else { 0 };
                out.push((p, w[i] & 0x0fff_ffff, c, w[at..at + n].to_vec()));
                i = at + n;
            }
        }
        out
    }

    #[test]
    fn yield_domain_records_and_lost_records() {
        let (l, e) = (LevelId(0), GEnt(0));
        let tr = tiny(
            vec![
                Record::Domain {
                    t: 10,
                    level: l,
                    ent: e,
                    created: true,
                },
                Record::Switch {
                    t: 20,
                    level: l,
                    cpu: GCpu(1),
                    prev: None,
                    next: Some(e),
                    slice: None,
                },
                Record::Sched {
                    t: 30,
                    level: l,
                    cpu: Some(GCpu(1)),
                    ev: SchedEvent::Yield { ent: e },
                },
            ],
            Some(40),
        );
        let mut b = Vec::new();
        write(
            &tr,
            &XentraceOpts {
                cpu_hz: 1_000_000_000,
            },
            &mut b,
        )
        .unwrap();
        let r = read(&b);
        let find = |ev: u32| r.iter().filter(move |x| x.1 == ev);
        assert_eq!(
            find(TRC_SCHED_DOM_ADD)
                .map(|x| (x.0, x.2, x.3.clone()))
                .collect::<Vec<_>>(),
            vec![(0, Some(11), vec![1])]
        );
        assert_eq!(
            find(TRC_SCHED_YIELD)
                .map(|x| (x.0, x.2, x.3.clone()))
                .collect::<Vec<_>>(),
            vec![(1, Some(31), vec![1, 0])],
            "on the yielding vCPU's pCPU"
        );
        // Lost records: one per pCPU, last on it, at the run's end; count, the vCPU current
        // at the loss (domain low, vCPU high: idle 0x7fff on pCPU 0), the first lost cycles.
        let lost: Vec<_> = find(TRC_LOST_RECORDS).collect();
        assert_eq!(lost.len(), 2);
        assert_eq!(lost[0].3, vec![7, DOMID_IDLE, 41, 0]);
        assert_eq!(lost[1].3, vec![7, 1, 41, 0]);
        for x in &lost {
            assert_eq!(x.2, Some(1_000_001));
            assert_eq!(r.iter().rfind(|y| y.0 == x.0).unwrap().1, TRC_LOST_RECORDS);
        }
    }

    #[test]
    #[should_panic(expected = "data words")]
    fn more_than_seven_data_words_is_refused() {
        encode(&mut Vec::new(), TRC_SCHED_SWITCH, None, &[0; 8]);
    }
}
