//! The Perfetto sink: a [`Trace`] written as a Perfetto trace (a `Trace` protobuf: a stream of
//! `TracePacket`s with track descriptors and track events), to open in ui.perfetto.dev.
//!
//! The encoder is a small hand-written protobuf writer for the few messages needed, with the
//! field numbers of Perfetto's published protos (`protos/perfetto/trace/trace_packet.proto`,
//! `track_event/track_descriptor.proto`, `track_event/track_event.proto`,
//! `track_event/process_descriptor.proto`, `track_event/thread_descriptor.proto`,
//! `track_event/counter_descriptor.proto`, `track_event/debug_annotation.proto`).
//!
//! **Layout** (docs/trace.md). One process per level: `host` holds a thread track per physical
//! CPU; each domain holds a thread track per vCPU and per task. A CPU track's slices are the
//! entities it runs (named after them); an entity's track has a slice per interval it is running
//! (named after its CPU, category `running`), runnable (`runnable`) or offline (`offline`). A
//! vCPU is both: its entity track (when the host runs it, on which pCPU) is in its domain's
//! process, and its track as a CPU of the guest (which task it runs) is a child of that entity
//! track and is named after it. The policy's figure (credit, vruntime) is a counter track under
//! each entity, sampled at its switches. Wake-ups, blocks, reschedule deliveries, ticks and
//! timer fires are instants.

use std::io::{self, Write};

use super::{Record, Trace};
use crate::ids::{GCpu, GEnt};
use crate::sched::RunState;

// Field numbers (Perfetto's published protos).
const TRACE_PACKET: u32 = 1;
const PKT_TIMESTAMP: u32 = 8;
const PKT_SEQ_ID: u32 = 10;
const PKT_TRACK_EVENT: u32 = 11;
const PKT_SEQ_FLAGS: u32 = 13;
const PKT_TRACK_DESCRIPTOR: u32 = 60;
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const TD_UUID: u32 = 1;
const TD_NAME: u32 = 2;
const TD_PROCESS: u32 = 3;
const TD_THREAD: u32 = 4;
const TD_PARENT_UUID: u32 = 5;
const TD_COUNTER: u32 = 8;
const PD_PID: u32 = 1;
const PD_PROCESS_NAME: u32 = 6;
const THD_PID: u32 = 1;
const THD_TID: u32 = 2;
const THD_THREAD_NAME: u32 = 5;
const TE_DEBUG_ANNOTATIONS: u32 = 4;
const TE_TYPE: u32 = 9;
const TE_TRACK_UUID: u32 = 11;
const TE_CATEGORIES: u32 = 22;
const TE_NAME: u32 = 23;
const TE_COUNTER_VALUE: u32 = 30;
const DA_BOOL_VALUE: u32 = 2;
const DA_STRING_VALUE: u32 = 6;
const DA_NAME: u32 = 10;
const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
const TYPE_INSTANT: u64 = 3;
const TYPE_COUNTER: u64 = 4;

/// The trusted sequence all packets are written on.
const SEQ_ID: u64 = 1;

// Track uuids: disjoint ranges per kind of track, in id order (deterministic).
const UUID_NOTES: u64 = 1;
const UUID_LEVEL: u64 = 1 << 32;
const UUID_CPU: u64 = 2 << 32;
const UUID_ENT: u64 = 3 << 32;
const UUID_PROBE: u64 = 4 << 32;

/// Track uuid of a CPU's track.
pub fn cpu_uuid(c: GCpu) -> u64 {
    UUID_CPU + c.0 as u64
}

/// Track uuid of an entity's track.
pub fn ent_uuid(e: GEnt) -> u64 {
    UUID_ENT + e.0 as u64
}

/// A protobuf message being encoded.
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint(((field as u64) << 3) | wire as u64);
    }

    fn uint(&mut self, field: u32, v: u64) {
        self.key(field, 0);
        self.varint(v);
    }

    /// int32/int64 (two's complement varint, not zigzag).
    fn int(&mut self, field: u32, v: i64) {
        self.uint(field, v as u64);
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn str(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    fn msg(&mut self, field: u32, build: impl FnOnce(&mut Pb)) {
        let mut m = Pb::default();
        build(&mut m);
        self.bytes(field, &m.0);
    }
}

/// A debug annotation of an instant: a string or a bool.
enum Arg<'a> {
    Str(&'static str, &'a str),
    Bool(&'static str, bool),
}

struct Writer<W: Write> {
    out: W,
    first: bool,
}

impl<W: Write> Writer<W> {
    fn packet(&mut self, build: impl FnOnce(&mut Pb)) -> io::Result<()> {
        let mut p = Pb::default();
        build(&mut p);
        p.uint(PKT_SEQ_ID, SEQ_ID);
        if std::mem::take(&mut self.first) {
            p.uint(PKT_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
        }
        let mut head = Pb::default();
        head.key(TRACE_PACKET, 2);
        head.varint(p.0.len() as u64);
        self.out.write_all(&head.0)?;
        self.out.write_all(&p.0)
    }

    fn track(&mut self, build: impl FnOnce(&mut Pb)) -> io::Result<()> {
        self.packet(|p| p.msg(PKT_TRACK_DESCRIPTOR, build))
    }

    fn event(&mut self, t: u64, build: impl FnOnce(&mut Pb)) -> io::Result<()> {
        self.packet(|p| {
            p.uint(PKT_TIMESTAMP, t);
            p.msg(PKT_TRACK_EVENT, build);
        })
    }

    fn begin(&mut self, t: u64, track: u64, name: &str, cat: Option<&str>) -> io::Result<()> {
        self.event(t, |e| {
            e.uint(TE_TYPE, TYPE_SLICE_BEGIN);
            e.uint(TE_TRACK_UUID, track);
            if let Some(c) = cat {
                e.str(TE_CATEGORIES, c);
            }
            e.str(TE_NAME, name);
        })
    }

    fn end(&mut self, t: u64, track: u64) -> io::Result<()> {
        self.event(t, |e| {
            e.uint(TE_TYPE, TYPE_SLICE_END);
            e.uint(TE_TRACK_UUID, track);
        })
    }

    fn instant(&mut self, t: u64, track: u64, name: &str, args: &[Arg]) -> io::Result<()> {
        self.event(t, |e| {
            e.uint(TE_TYPE, TYPE_INSTANT);
            e.uint(TE_TRACK_UUID, track);
            e.str(TE_NAME, name);
            for a in args {
                e.msg(TE_DEBUG_ANNOTATIONS, |d| match *a {
                    Arg::Str(n, v) => {
                        d.str(DA_NAME, n);
                        d.str(DA_STRING_VALUE, v);
                    }
                    Arg::Bool(n, v) => {
                        d.str(DA_NAME, n);
                        d.uint(DA_BOOL_VALUE, v as u64);
                    }
                });
            }
        })
    }

    fn counter(&mut self, t: u64, track: u64, v: i64) -> io::Result<()> {
        self.event(t, |e| {
            e.uint(TE_TYPE, TYPE_COUNTER);
            e.uint(TE_TRACK_UUID, track);
            e.int(TE_COUNTER_VALUE, v);
        })
    }
}

/// Names of the trace's CPUs and entities as the tracks show them.
struct Names {
    /// Per CPU: `pCPU 3` for a physical CPU, its vCPU entity's name for a virtual one.
    cpu: Vec<String>,
    /// Per level: the process id of its group of tracks.
    pid: Vec<i64>,
}

impl Names {
    fn new(tr: &Trace) -> Names {
        let m = &tr.meta;
        let cpu = m
            .cpus
            .iter()
            .map(|c| match c.backing {
                None => format!("pCPU {}", c.local),
                Some(b) => m.ents[b.idx()].name.clone(),
            })
            .collect();
        let pid = (0..m.levels.len()).map(|l| l as i64 + 1).collect();
        Names { cpu, pid }
    }

    /// The process an entity's track belongs to: a vCPU's is its domain (the level it is a CPU
    /// of), a task's its own level.
    fn ent_pid(&self, tr: &Trace, e: GEnt) -> i64 {
        let em = &tr.meta.ents[e.idx()];
        let l = match em.vcpu_of {
            Some(c) => tr.meta.cpus[c.idx()].level,
            None => em.level,
        };
        self.pid[l.idx()]
    }
}

fn state_slice(s: RunState) -> Option<&'static str> {
    match s {
        RunState::Running => Some("running"),
        RunState::Runnable => Some("runnable"),
        RunState::Offline => Some("offline"),
        RunState::Blocked => None,
    }
}

/// Writes `tr` as a Perfetto trace to `out` (buffer it: many small writes).
pub fn write<W: Write>(tr: &Trace, out: W) -> io::Result<()> {
    let m = &tr.meta;
    let names = Names::new(tr);
    let mut w = Writer { out, first: true };
    let ncpu = m.cpus.len() as i64;
    let tid_cpu = |c: usize| 100_000 + c as i64;
    let tid_ent = |e: usize| 100_000 + ncpu + e as i64;

    // Track descriptors: levels (processes), CPUs, entities, probe counters.
    w.track(|t| {
        t.uint(TD_UUID, UUID_NOTES);
        t.str(TD_NAME, "vmsched");
    })?;
    for (l, lm) in m.levels.iter().enumerate() {
        w.track(|t| {
            t.uint(TD_UUID, UUID_LEVEL + l as u64);
            t.msg(TD_PROCESS, |p| {
                p.int(PD_PID, names.pid[l]);
                p.str(PD_PROCESS_NAME, &format!("{} ({})", lm.name, lm.sched));
            });
        })?;
    }
    for (e, em) in m.ents.iter().enumerate() {
        let pid = names.ent_pid(tr, GEnt(e as u32));
        w.track(|t| {
            t.uint(TD_UUID, ent_uuid(GEnt(e as u32)));
            t.msg(TD_THREAD, |th| {
                th.int(THD_PID, pid);
                th.int(THD_TID, tid_ent(e));
                th.str(THD_THREAD_NAME, &em.name);
            });
        })?;
    }
    for (c, cm) in m.cpus.iter().enumerate() {
        w.track(|t| {
            t.uint(TD_UUID, cpu_uuid(GCpu(c as u32)));
            match cm.backing {
                None => t.msg(TD_THREAD, |th| {
                    th.int(THD_PID, names.pid[cm.level.idx()]);
                    th.int(THD_TID, tid_cpu(c));
                    th.str(THD_THREAD_NAME, &names.cpu[c]);
                }),
                Some(b) => {
                    // A vCPU as a CPU of its guest: under the entity that runs it.
                    t.uint(TD_PARENT_UUID, ent_uuid(b));
                    let level = &m.levels[cm.level.idx()].name;
                    t.str(
                        TD_NAME,
                        &format!("{} as cpu{} of {level}", names.cpu[c], cm.local),
                    );
                }
            }
        })?;
    }
    let mut probed = vec![false; m.ents.len()];
    for r in &tr.records {
        if let Record::Probe { ent, .. } = *r {
            probed[ent.idx()] = true;
        }
    }
    for (e, em) in m.ents.iter().enumerate() {
        if probed[e] {
            let sched = m.levels[em.level.idx()].sched;
            w.track(|t| {
                t.uint(TD_UUID, UUID_PROBE + e as u64);
                t.uint(TD_PARENT_UUID, ent_uuid(GEnt(e as u32)));
                t.str(TD_NAME, &format!("{} {} probe", em.name, sched));
                t.msg(TD_COUNTER, |_| {});
            })?;
        }
    }

    // Events, in record (= time) order. Open slices: per CPU, per entity.
    let mut cpu_open = vec![false; m.cpus.len()];
    let mut ent_open = vec![false; m.ents.len()];
    let mut ent_cpu: Vec<Option<GCpu>> = vec![None; m.ents.len()];
    for r in &tr.records {
        match *r {
            Record::Switch {
                t, cpu, prev, next, ..
            } => {
                let u = cpu_uuid(cpu);
                if std::mem::take(&mut cpu_open[cpu.idx()]) {
                    w.end(t, u)?;
                }
                if let Some(p) = prev {
                    ent_cpu[p.idx()] = None;
                }
                if let Some(n) = next {
                    w.begin(t, u, &m.ents[n.idx()].name, None)?;
                    cpu_open[cpu.idx()] = true;
                    ent_cpu[n.idx()] = Some(cpu);
                }
            }
            Record::Probe { t, ent, value, .. } => {
                w.counter(t, UUID_PROBE + ent.0 as u64, value)?
            }
            Record::Runstate { t, ent, to, .. } => {
                let u = ent_uuid(ent);
                if std::mem::take(&mut ent_open[ent.idx()]) {
                    w.end(t, u)?;
                }
                if let Some(cat) = state_slice(to) {
                    let name = match (to, ent_cpu[ent.idx()]) {
                        (RunState::Running, Some(c)) => names.cpu[c.idx()].as_str(),
                        _ => cat,
                    };
                    w.begin(t, u, name, Some(cat))?;
                    ent_open[ent.idx()] = true;
                }
            }
            Record::Wake {
                t,
                ent,
                waker_cpu,
                cause,
                ..
            } => {
                let mut args = vec![Arg::Str("cause", cause.name())];
                if let Some(c) = waker_cpu {
                    args.push(Arg::Str("waker_cpu", &names.cpu[c.idx()]));
                }
                w.instant(t, ent_uuid(ent), "wake", &args)?;
            }
            Record::Block { t, ent, .. } => w.instant(t, ent_uuid(ent), "block", &[])?,
            Record::Resched { t, cpu, held, .. } => {
                w.instant(t, cpu_uuid(cpu), "resched", &[Arg::Bool("held", held)])?
            }
            Record::Tick { t, cpu, held, .. } => {
                w.instant(t, cpu_uuid(cpu), "tick", &[Arg::Bool("held", held)])?
            }
            Record::Timer {
                t, ent, cpu, held, ..
            } => w.instant(
                t,
                cpu_uuid(cpu),
                "timer",
                &[
                    Arg::Str("task", &m.ents[ent.idx()].name),
                    Arg::Bool("held", held),
                ],
            )?,
            Record::Notify {
                t,
                cpu,
                port,
                already,
                ..
            } => w.instant(
                t,
                cpu_uuid(cpu),
                "evtchn notify",
                &[
                    Arg::Str("port", &port.to_string()),
                    Arg::Bool("already_pending", already),
                ],
            )?,
            Record::Handler {
                t, cpu, port, end, ..
            } => w.instant(
                t,
                cpu_uuid(cpu),
                if end {
                    "evtchn handler end"
                } else {
                    "evtchn handler"
                },
                &[Arg::Str("port", &port.to_string())],
            )?,
            // Shown by the xentrace sink (docs/trace.md); nothing here yet.
            Record::Continue { .. }
            | Record::Sched { .. }
            | Record::Latency { .. }
            | Record::Domain { .. } => {}
        }
    }
    let end = tr.complete_until();
    for (c, open) in cpu_open.iter().enumerate() {
        if *open {
            w.end(end, cpu_uuid(GCpu(c as u32)))?;
        }
    }
    for (e, open) in ent_open.iter().enumerate() {
        if *open {
            w.end(end, ent_uuid(GEnt(e as u32)))?;
        }
    }
    if let Some(at) = tr.truncated_at {
        let msg = format!(
            "{} records dropped: the buffer holds {}",
            tr.dropped, tr.max_records
        );
        w.instant(at, UUID_NOTES, "trace truncated", &[Arg::Str("why", &msg)])?;
    }
    w.out.flush()
}

/// Writes `tr` to the file `path`.
pub fn write_file(tr: &Trace, path: &std::path::Path) -> io::Result<()> {
    let f = std::fs::File::create(path)?;
    write(tr, io::BufWriter::with_capacity(1 << 20, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_keys_encode_as_protobuf() {
        let mut p = Pb::default();
        p.uint(1, 150);
        assert_eq!(p.0, [0x08, 0x96, 0x01]);
        let mut p = Pb::default();
        p.str(2, "testing");
        assert_eq!(p.0, [0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g']);
        let mut p = Pb::default();
        p.int(4, -1);
        assert_eq!(p.0.len(), 1 + 10, "a negative int64 is a ten-byte varint");
        let mut p = Pb::default();
        p.msg(60, |m| m.uint(1, 1));
        assert_eq!(p.0, [0xe2, 0x03, 0x02, 0x08, 0x01]);
    }
}
