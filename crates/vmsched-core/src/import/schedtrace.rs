//! Real scheduler traces in: `perf sched record` recordings (as `perf script` prints them) and
//! ftrace's `trace` file with the `sched_switch`, `sched_waking`/`sched_wakeup` and
//! `sched_wakeup_new` events, read into each task's runs, sleeps and wakers, and written as a
//! replay workload (`kind = "replay"`, `crate::workload::replay`) in a whole runnable scenario
//! (issue 14 item 5; docs/replay.md).
//!
//! The line formats are the kernel's (`include/trace/events/sched.h`'s `TP_printk`: the
//! `prev_comm=... ==> next_comm=...` payload is the same in both) and their prefixes:
//!
//! * ftrace: `<comm>-<pid> [(<tgid>)] [<cpu>] [<irq flags>] <secs.frac>: <event>: <payload>`
//!   (`kernel/trace/trace_output.c`); the flags' third character says a hard or soft interrupt
//!   was running (`h`, `s`, `H`, `z`, `Z`), so such a wake-up has no task as its waker;
//! * perf: `perf script --ns -F comm,tid,cpu,time,event,trace`:
//!   `<comm> <tid> [<cpu>] <secs.frac>: sched:<event>: <payload>`.
//!
//! perf.data's binary format is not read here: the Python importer runs `perf script`.
//!
//! The rules (docs/replay.md): a task's CPU time is the time between its switch-in and its
//! switch-out, summed over preemptions (a switch-out in state `R`/`R+`) up to its next sleep (a
//! switch-out in any other state; `X`/`Z` is its exit). A sleep ends at the wake-up event that
//! targets the sleeping task (`sched_waking` when the trace has it, as `perf sched record`
//! records: it is emitted by the waker; else `sched_wakeup`). The waker is the task the line's
//! prefix names (the CPU's current task). If it is a selected task, running, and not in an
//! interrupt, the sleep is a dependency (`w`/`k` tokens); otherwise it is timer-like (`s`, its
//! recorded length). Every selected task exists from the trace's first event: one running at
//! that time (first seen switching out, or current on a line) runs from there; one first seen
//! being woken was asleep since then.

use std::collections::{BTreeMap, BTreeSet};

use super::{error, Note};
use crate::scenario::ScenarioError;
use crate::workload::replay::{format_steps, recorded, Recorded, Tok};

/// The largest trace read (bytes): a second of a busy machine's scheduler events is a few MB.
pub const MAX_TRACE_BYTES: u64 = 512 * 1024 * 1024;

/// Which text a trace is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// `perf script --ns -F comm,tid,cpu,time,event,trace` of a `perf sched record`.
    Perf,
    /// The ftrace `trace` file (`/sys/kernel/tracing/trace`).
    Ftrace,
}

/// Which tasks are replayed: those whose pid is in `pids` or whose comm (any it had) is in
/// `comms`; both empty: every task but the idle tasks (pid 0).
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub pids: Vec<u32>,
    pub comms: Vec<String>,
}

/// One task of the trace as the replay sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct TracedTask {
    pub pid: u32,
    /// Its last comm in the trace.
    pub comm: String,
    /// Its last `prio` in the trace (the kernel's: 100..=139 normal, 0..=98 real-time).
    pub prio: i32,
    /// The CPUs it ran on.
    pub cpus: BTreeSet<u32>,
    pub toks: Vec<Tok>,
}

impl TracedTask {
    /// `comm:pid`, the task's name in the replay.
    pub fn name(&self) -> String {
        format!("{}:{}", self.comm, self.pid)
    }

    pub fn recorded(&self) -> Recorded {
        recorded(&self.toks)
    }
}

/// A trace read: the selected tasks (in order of first appearance), its CPUs and time span.
#[derive(Clone, Debug)]
pub struct Trace {
    pub tasks: Vec<TracedTask>,
    /// One more than the highest CPU number of any line.
    pub cpus: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub notes: Vec<Note>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WakeKind {
    Waking,
    Wakeup,
    New,
}

#[derive(Clone, Debug)]
enum Ev {
    Switch {
        prev: u32,
        prev_comm: String,
        prev_prio: i32,
        /// `R`/`R+`: preempted; `X`/`Z`: exited; else asleep.
        prev_state: String,
        next: u32,
        next_comm: String,
        next_prio: i32,
    },
    Wake {
        kind: WakeKind,
        pid: u32,
        comm: String,
        prio: i32,
    },
}

#[derive(Clone, Debug)]
struct Line {
    ts: u64,
    cpu: u32,
    /// The CPU's current task (0: idle, or one perf lost track of).
    cur: u32,
    cur_comm: String,
    irq: bool,
    /// None: another event (its line still says which task is current).
    ev: Option<Ev>,
}

/// ftrace's comm for a pid its saved-cmdlines cache no longer holds (`<...>`): not a name.
fn is_unknown_comm(c: &str) -> bool {
    c == "<...>"
}

/// `secs.frac` as ns (up to 9 fraction digits), exactly.
fn parse_ts(s: &str) -> Option<u64> {
    let (a, b) = s.split_once('.').unwrap_or((s, ""));
    if a.is_empty() || b.len() > 9 || !a.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if !b.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = a.parse().ok()?;
    let frac: u64 = if b.is_empty() { 0 } else { b.parse().ok()? };
    secs.checked_mul(1_000_000_000)?
        .checked_add(frac * 10u64.pow(9 - b.len() as u32))
}

/// The value of `key=` in `s` up to the next ` <word>=` of `keys` (comm may hold spaces).
fn field<'a>(s: &'a str, key: &str, next: Option<&str>) -> Option<&'a str> {
    let pat = format!("{key}=");
    let at = if s.starts_with(&pat) {
        0
    } else {
        s.find(&format!(" {pat}"))? + 1
    };
    let v = &s[at + pat.len()..];
    Some(match next {
        Some(n) => &v[..v.rfind(&format!(" {n}="))?],
        None => v.split_ascii_whitespace().next().unwrap_or(""),
    })
}

fn num<T: std::str::FromStr>(s: Option<&str>) -> Option<T> {
    s?.trim().parse().ok()
}

/// The payload of a `sched_switch` line.
fn parse_switch(p: &str) -> Option<Ev> {
    let (a, b) = p.split_once(" ==> ")?;
    Some(Ev::Switch {
        prev_comm: field(a, "prev_comm", Some("prev_pid"))?.to_string(),
        prev: num(field(a, "prev_pid", None))?,
        prev_prio: num(field(a, "prev_prio", None))?,
        prev_state: field(a, "prev_state", None)?.to_string(),
        next_comm: field(b, "next_comm", Some("next_pid"))?.to_string(),
        next: num(field(b, "next_pid", None))?,
        next_prio: num(field(b, "next_prio", None))?,
    })
}

/// The payload of a `sched_waking`/`sched_wakeup(_new)` line.
fn parse_wake(kind: WakeKind, p: &str) -> Option<Ev> {
    Some(Ev::Wake {
        kind,
        comm: field(p, "comm", Some("pid"))?.to_string(),
        pid: num(field(p, "pid", None))?,
        prio: num(field(p, "prio", None))?,
    })
}

/// The position of the `[cpu]` field: ` [` digits `]`.
fn cpu_field(l: &str) -> Option<(usize, usize, u32)> {
    let b = l.as_bytes();
    let mut from = 0;
    while let Some(i) = l[from..].find('[').map(|i| i + from) {
        let mut j = i + 1;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > i + 1 && j < b.len() && b[j] == b']' && (i == 0 || b[i - 1] == b' ') {
            return Some((i, j + 1, l[i + 1..j].parse().ok()?));
        }
        from = i + 1;
    }
    None
}

/// One line: None for a header or comment.
fn parse_line(
    file: &str,
    no: usize,
    l: &str,
    fmt: TraceFormat,
    other: &mut BTreeMap<String, u64>,
) -> Result<Option<Line>, ScenarioError> {
    let t = l.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(None);
    }
    let bad = |m: &str| error(file, Some(no), "", m.to_string());
    let Some((open, close, cpu)) = cpu_field(l) else {
        return Err(bad(&format!(
            "not a {} event line (no [CPU] field)",
            match fmt {
                TraceFormat::Perf => "perf script",
                TraceFormat::Ftrace => "ftrace",
            }
        )));
    };
    let mut task = l[..open].trim();
    if fmt == TraceFormat::Ftrace && task.ends_with(')') {
        // The tgid column of `options/record-tgid`.
        if let Some(p) = task.rfind('(') {
            task = task[..p].trim_end();
        }
    }
    let (comm, pid) = match fmt {
        TraceFormat::Ftrace => task.rsplit_once('-'),
        TraceFormat::Perf => task.rsplit_once(|c: char| c.is_ascii_whitespace()),
    }
    .ok_or_else(|| bad("expected the task (comm and pid) before [CPU]"))?;
    // perf prints `:-1 -1` for a task whose thread it lost track of (one that exited).
    let cur: u32 = match pid.trim().parse::<i64>() {
        Ok(-1) => 0,
        Ok(p) => u32::try_from(p).map_err(|_| bad(&format!("'{pid}' is not a pid")))?,
        Err(_) => return Err(bad(&format!("'{pid}' is not a pid"))),
    };
    // After [cpu]: [flags] secs.frac: event: payload
    let rest = &l[close..];
    let mut irq = false;
    let mut ts = None;
    let mut after = rest;
    for tok in rest.split_ascii_whitespace() {
        let at = after.find(tok).expect("a token of the rest") + tok.len();
        after = &after[at..];
        if let Some(v) = tok.strip_suffix(':').and_then(parse_ts) {
            ts = Some(v);
            break;
        }
        if fmt == TraceFormat::Ftrace {
            irq = matches!(
                tok.as_bytes().get(2),
                Some(b'h' | b's' | b'H' | b'z' | b'Z')
            );
        }
    }
    let ts = ts.ok_or_else(|| bad("expected a timestamp `seconds.fraction:` after [CPU]"))?;
    let after = after.trim_start();
    let (event, payload) = after
        .split_once(": ")
        .or_else(|| after.strip_suffix(':').map(|e| (e, "")))
        .ok_or_else(|| bad("expected `event: payload` after the timestamp"))?;
    let event = event.trim();
    let name = event.strip_prefix("sched:").unwrap_or(event);
    let ev = match name {
        "sched_switch" => Some(parse_switch(payload)),
        "sched_waking" => Some(parse_wake(WakeKind::Waking, payload)),
        "sched_wakeup" => Some(parse_wake(WakeKind::Wakeup, payload)),
        "sched_wakeup_new" => Some(parse_wake(WakeKind::New, payload)),
        _ => {
            *other.entry(name.to_string()).or_default() += 1;
            None
        }
    };
    let ev = ev
        .map(|e| {
            e.ok_or_else(|| {
                error(
                    file,
                    Some(no),
                    name,
                    format!("cannot read the payload '{}'", payload.trim()),
                )
            })
        })
        .transpose()?;
    Ok(Some(Line {
        ts,
        cpu,
        cur,
        cur_comm: comm.trim().to_string(),
        irq,
        ev,
    }))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum St {
    Unknown,
    Running(u64),
    Runnable,
    Sleeping(u64),
    Dead,
}

struct Live {
    st: St,
    pending: u64,
    t: TracedTask,
}

impl Live {
    fn flush(&mut self) {
        if self.pending > 0 {
            self.t.toks.push(Tok::Compute(self.pending));
            self.pending = 0;
        }
    }
}

/// `pid` is now current on `cpu`: any other CPU that had it as its current task has an
/// unknown one (0) from here. True if one did.
fn vacate(cpu_cur: &mut BTreeMap<u32, u32>, cpu: u32, pid: u32) -> bool {
    let mut found = false;
    for (c, p) in cpu_cur.iter_mut() {
        if *c != cpu && *p == pid {
            *p = 0;
            found = true;
        }
    }
    found
}

/// Reads a trace's text: the selected tasks' programs.
pub fn parse(
    file: &str,
    src: &str,
    fmt: TraceFormat,
    sel: &Selection,
) -> Result<Trace, ScenarioError> {
    let mut other = BTreeMap::new();
    let mut lines = Vec::new();
    let mut lost = 0u64;
    for (i, l) in src.lines().enumerate() {
        if l.contains("LOST") && l.contains("EVENTS") {
            lost += 1;
            continue;
        }
        if let Some(x) = parse_line(file, i + 1, l, fmt, &mut other)? {
            lines.push(x);
        }
    }
    let Some(start) = lines
        .iter()
        .find(|l| l.ev.is_some())
        .and(lines.first())
        .map(|l| l.ts)
    else {
        return Err(error(
            file,
            None,
            "",
            "has no sched_switch or sched_waking/sched_wakeup event (record with `perf sched \
             record`, or enable events/sched/sched_switch and sched_wakeup in tracefs)",
        ));
    };
    let mut notes = Vec::new();
    // Times never go backwards: a line earlier than the one before it is taken at that time.
    let mut back = 0u64;
    let mut prev = start;
    for l in &mut lines {
        if l.ts < prev {
            back += 1;
            l.ts = prev;
        }
        prev = l.ts;
    }
    let end = prev;
    let has_waking = lines.iter().any(|l| {
        matches!(
            l.ev,
            Some(Ev::Wake {
                kind: WakeKind::Waking,
                ..
            })
        )
    });

    // Pass 1: every task and the comms it had, in order of first appearance.
    let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
    let mut order: Vec<(u32, BTreeSet<String>)> = Vec::new();
    let mut saw = |pid: u32, comm: &str| {
        if pid == 0 {
            return;
        }
        let k = *seen.entry(pid).or_insert_with(|| {
            order.push((pid, BTreeSet::new()));
            order.len() - 1
        });
        if !is_unknown_comm(comm) {
            order[k].1.insert(comm.to_string());
        }
    };
    let mut cpus = 0u32;
    for l in &lines {
        cpus = cpus.max(l.cpu + 1);
        saw(l.cur, &l.cur_comm);
        match &l.ev {
            None => {}
            Some(Ev::Switch {
                prev,
                prev_comm,
                next,
                next_comm,
                ..
            }) => {
                saw(*prev, prev_comm);
                saw(*next, next_comm);
            }
            Some(Ev::Wake { pid, comm, .. }) => saw(*pid, comm),
        }
    }
    let all = sel.pids.is_empty() && sel.comms.is_empty();
    let mut idx: BTreeMap<u32, usize> = BTreeMap::new();
    let mut live: Vec<Live> = Vec::new();
    for (pid, comms) in &order {
        if all || sel.pids.contains(pid) || comms.iter().any(|c| sel.comms.contains(c)) {
            idx.insert(*pid, live.len());
            live.push(Live {
                st: St::Unknown,
                pending: 0,
                t: TracedTask {
                    pid: *pid,
                    comm: comms
                        .iter()
                        .next()
                        .cloned()
                        .unwrap_or_else(|| "<...>".into()),
                    prio: 120,
                    cpus: BTreeSet::new(),
                    toks: Vec::new(),
                },
            });
        }
    }
    if live.is_empty() {
        return Err(error(
            file,
            None,
            "",
            format!(
                "no task of the trace matches the selection (pids {:?}, comms {:?})",
                sel.pids, sel.comms
            ),
        ));
    }

    // Pass 2: the state machine of each selected task.
    let (mut inconsistent, mut not_asleep, mut unwoken, mut unseen) = (0u64, 0u64, 0u64, 0u64);
    // Per CPU: its current task (the one last switched in, or a line's current task).
    let mut cpu_cur: BTreeMap<u32, u32> = BTreeMap::new();
    for l in &lines {
        let t = l.ts;
        // The line's current task is not the one last switched in on its CPU: the CPU
        // switched without a traced switch (the trace is filtered by pid, as tracefs's
        // `set_event_pid` filters, or the switch was lost). The CPU ran one task at a time,
        // so the last one's run ends here and this one's starts here. The idle task (and
        // perf's `-1`, a task it lost track of) is not evidence of anything.
        let last = cpu_cur.get(&l.cpu).copied();
        if l.cur != 0 && last.is_none() {
            // The first that is seen of this CPU: its current task ran since the start.
            cpu_cur.insert(l.cpu, l.cur);
        } else if l.cur != 0 && last.is_some_and(|o| o != l.cur) {
            unseen += 1;
            cpu_cur.insert(l.cpu, l.cur);
            vacate(&mut cpu_cur, l.cpu, l.cur);
            if let Some(&o) = last.and_then(|o| idx.get(&o)) {
                if let St::Running(since) = live[o].st {
                    live[o].pending += t - since;
                    live[o].st = St::Runnable;
                }
            }
            if let Some(&c) = idx.get(&l.cur) {
                let x = &mut live[c];
                match x.st {
                    St::Unknown | St::Runnable => x.st = St::Running(t),
                    St::Sleeping(since) => {
                        unwoken += 1;
                        x.t.toks.push(Tok::Sleep(t - since));
                        x.st = St::Running(t);
                    }
                    St::Running(_) | St::Dead => {}
                }
            }
        }
        if let Some(&c) = idx.get(&l.cur) {
            let x = &mut live[c];
            if !is_unknown_comm(&l.cur_comm) {
                x.t.comm.clone_from(&l.cur_comm);
            }
            x.t.cpus.insert(l.cpu);
            // Current before any switch of this CPU: running since the start.
            if x.st == St::Unknown && last.is_none() {
                x.st = St::Running(start);
            }
        }
        match &l.ev {
            None => {}
            Some(Ev::Switch {
                prev,
                prev_comm,
                prev_prio,
                prev_state,
                next,
                next_comm,
                next_prio,
            }) => {
                // A CPU runs one task at a time: the task last switched in here ran until
                // now, whatever this switch names as prev (a switch-out lost, or a task perf
                // names otherwise); its run ends here, as a preemption.
                let last = cpu_cur.insert(l.cpu, *next);
                // Switched in here while another CPU had it as current: it migrated there
                // unseen (a filtered trace); its run goes on here.
                let moved = *next != 0 && vacate(&mut cpu_cur, l.cpu, *next);
                if let Some(&o) = last.filter(|o| o != prev).and_then(|o| idx.get(&o)) {
                    if let St::Running(since) = live[o].st {
                        live[o].pending += t - since;
                        live[o].st = St::Runnable;
                        inconsistent += 1;
                    }
                }
                if let Some(&p) = idx.get(prev) {
                    let x = &mut live[p];
                    x.t.comm.clone_from(prev_comm);
                    x.t.prio = *prev_prio;
                    match x.st {
                        St::Running(since) => x.pending += t - since,
                        // Running here since the start, unless another task was switched in
                        // here before (then this switch-out is all that is seen of it).
                        St::Unknown if last.is_none() => x.pending += t - start,
                        St::Unknown => {}
                        St::Dead => continue,
                        _ => inconsistent += 1,
                    }
                    if prev_state.starts_with('R') {
                        x.st = St::Runnable;
                    } else if prev_state.contains('X') || prev_state.contains('Z') {
                        x.flush();
                        x.t.toks.push(Tok::Exit);
                        x.st = St::Dead;
                    } else {
                        x.flush();
                        x.st = St::Sleeping(t);
                    }
                }
                if let Some(&n) = idx.get(next) {
                    let x = &mut live[n];
                    x.t.comm.clone_from(next_comm);
                    x.t.prio = *next_prio;
                    x.t.cpus.insert(l.cpu);
                    match x.st {
                        St::Sleeping(since) => {
                            // Switched in without a wake-up: the sleep ends here, timer-like.
                            unwoken += 1;
                            x.t.toks.push(Tok::Sleep(t - since));
                            x.st = St::Running(t);
                        }
                        St::Unknown | St::Runnable => x.st = St::Running(t),
                        St::Running(_) if moved => {}
                        St::Running(_) => inconsistent += 1,
                        St::Dead => {}
                    }
                }
            }
            Some(Ev::Wake {
                kind, pid, prio, ..
            }) => {
                if has_waking && *kind == WakeKind::Wakeup {
                    continue;
                }
                let Some(&w) = idx.get(pid) else { continue };
                live[w].t.prio = *prio;
                let since = match live[w].st {
                    St::Sleeping(s) => s,
                    St::Unknown => start,
                    St::Dead => continue,
                    _ => {
                        not_asleep += 1;
                        continue;
                    }
                };
                let waker = idx
                    .get(&l.cur)
                    .copied()
                    .filter(|&k| k != w && !l.irq && matches!(live[k].st, St::Running(_)));
                match waker {
                    Some(k) => {
                        let y = &mut live[k];
                        if let St::Running(s) = y.st {
                            y.pending += t - s;
                        }
                        y.st = St::Running(t);
                        y.flush();
                        y.t.toks.push(Tok::Wake(w as u32));
                        live[w].t.toks.push(Tok::WaitFor(k as u32));
                    }
                    None => live[w].t.toks.push(Tok::Sleep(t - since)),
                }
                live[w].st = St::Runnable;
            }
        }
    }
    for x in &mut live {
        match x.st {
            St::Running(since) => x.pending += end - since,
            St::Unknown => x.pending += end - start,
            _ => {}
        }
        x.flush();
    }
    let mut note = |key: &str, n: u64, m: &str| {
        if n > 0 {
            notes.push(Note {
                line: None,
                key: key.into(),
                message: format!("{n} {m}"),
            });
        }
    };
    note(
        "LOST EVENTS",
        lost,
        "lines report lost events: runs and wakes are missing there",
    );
    note(
        "timestamps",
        back,
        "lines earlier than the line before them, taken at that line's time",
    );
    note(
        "sched_switch",
        inconsistent,
        "switches that disagree with the task's state (an event missing before them); taken \
         as they come",
    );
    note(
        "sched_switch",
        unseen,
        "lines whose current task is not the one last switched in on their CPU (a trace \
         filtered by pid, or a switch lost): the CPU is taken to have switched there",
    );
    note(
        "sched_switch",
        unwoken,
        "switch-ins of a sleeping task without a wake-up event: the sleep ends there, \
         timer-like",
    );
    note(
        if has_waking {
            "sched_waking"
        } else {
            "sched_wakeup"
        },
        not_asleep,
        "wake-ups of a task that was not asleep (running or preempted): no sleep to end",
    );
    for (name, n) in &other {
        note(name, *n, "events not used by the replay");
    }
    // A task that neither ran nor woke in the trace (switched out at its first event) has
    // nothing to replay; no token names it, and the others' indices close up.
    let mut new_index = Vec::with_capacity(live.len());
    let mut n = 0u32;
    for x in &live {
        new_index.push(n);
        n += u32::from(!x.t.toks.is_empty());
    }
    let mut tasks: Vec<TracedTask> = live
        .into_iter()
        .map(|x| x.t)
        .filter(|t| !t.toks.is_empty())
        .collect();
    for t in &mut tasks {
        for tok in &mut t.toks {
            if let Tok::WaitFor(k) | Tok::Wake(k) = tok {
                *k = new_index[*k as usize];
            }
        }
    }
    Ok(Trace {
        tasks,
        cpus: cpus.max(1),
        start_ns: start,
        end_ns: end,
        notes,
    })
}

/// How the scenario is made.
#[derive(Clone, Debug)]
pub struct ScenarioOptions {
    /// `[domain.sched]`: `scheduler` and, for EEVDF, `kernel`.
    pub scheduler: String,
    pub kernel: Option<String>,
    /// The machine's CPUs (default: the trace's).
    pub cpus: Option<u32>,
    /// Each task only on the CPUs it ran on in the trace.
    pub observed_affinity: bool,
    /// What the description names as the source.
    pub source: String,
    /// The level as a guest of the `pinned` host (one vCPU per CPU, each owning its pCPU)
    /// instead of bare metal (a KVM host's Linux with the tasks as `[[host.process]]`): for a
    /// trace recorded inside a VM, or to compare with scenarios of that form.
    pub pinned_guest: bool,
}

impl Default for ScenarioOptions {
    fn default() -> Self {
        ScenarioOptions {
            scheduler: "eevdf".into(),
            kernel: Some("6.18".into()),
            cpus: None,
            observed_affinity: true,
            source: "a trace".into(),
            pinned_guest: false,
        }
    }
}

/// A `prio` of the trace as (policy, nice, rt_priority): 100..=139 normal with nice
/// `prio - 120`; 0..=98 FIFO with `99 - prio` (RR cannot be told from FIFO); else normal.
fn policy(prio: i32) -> (&'static str, i64, i64) {
    match prio {
        100..=139 => ("normal", i64::from(prio - 120), 0),
        0..=98 => ("fifo", 0, i64::from(99 - prio)),
        _ => ("normal", 0, 0),
    }
}

/// A whole runnable scenario replaying `trace`: a bare-metal Linux level (`hypervisor =
/// "kvm"`, `[host] scheduler = "linux"` and the tasks as a `[[host.process]]`, as `vmsched
/// validate` models this machine; or with `pinned_guest` a guest of the `pinned` host, one
/// vCPU per CPU, each owning its pCPU), the kernel's scheduler and the replay workload; the
/// run lasts the trace's span (rounded up to a millisecond).
pub fn scenario(trace: &Trace, o: &ScenarioOptions) -> toml::Table {
    let cpus = o.cpus.unwrap_or(trace.cpus).max(1);
    let span = trace.end_ns - trace.start_ns;
    let mut tasks = Vec::new();
    for t in &trace.tasks {
        let mut x = toml::Table::new();
        x.insert("name".into(), t.name().into());
        let (pol, nice, rt) = policy(t.prio);
        if pol != "normal" {
            x.insert("policy".into(), pol.into());
            x.insert("rt_priority".into(), rt.into());
        } else if nice != 0 {
            x.insert("nice".into(), nice.into());
        }
        if o.observed_affinity && !t.cpus.is_empty() && t.cpus.iter().all(|c| *c < cpus) {
            x.insert(
                "affinity".into(),
                toml::Value::Array(t.cpus.iter().map(|c| i64::from(*c).into()).collect()),
            );
        }
        x.insert("steps".into(), format_steps(&t.toks).into());
        tasks.push(toml::Value::Table(x));
    }
    let tbl = |kv: Vec<(&str, toml::Value)>| {
        toml::Value::Table(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    };
    let mut sched = vec![("scheduler", o.scheduler.clone().into())];
    if let Some(k) = &o.kernel {
        sched.push(("kernel", k.clone().into()));
    }
    let workload = tbl(vec![
        ("kind", "replay".into()),
        ("name", "trace".into()),
        ("tasks", toml::Value::Array(tasks)),
    ]);
    let mut out = toml::Table::new();
    out.insert("name".into(), "replay".into());
    out.insert(
        "description".into(),
        format!(
            "{} replayed: {} tasks over {:.3} ms on {cpus} CPUs",
            o.source,
            trace.tasks.len(),
            span as f64 / 1e6
        )
        .into(),
    );
    out.insert(
        "run".into(),
        tbl(vec![
            (
                "duration_ms",
                i64::try_from(span.div_ceil(1_000_000).max(1))
                    .unwrap_or(i64::MAX)
                    .into(),
            ),
            ("warmup_ms", 0.into()),
            ("seed", 1.into()),
            // The recording fixes every start and phase: the seeded variation (docs/design.md,
            // "Variation") would move the replayed tasks off their recorded times.
            ("vary", false.into()),
        ]),
    );
    if o.pinned_guest {
        let domain = tbl(vec![
            ("name", "machine".into()),
            ("vcpus", i64::from(cpus).into()),
            ("sched", tbl(sched)),
            ("workload", toml::Value::Array(vec![workload])),
        ]);
        out.insert(
            "machine".into(),
            tbl(vec![("pcpus", i64::from(cpus).into())]),
        );
        out.insert("host".into(), tbl(vec![("scheduler", "pinned".into())]));
        out.insert("domain".into(), toml::Value::Array(vec![domain]));
    } else {
        out.insert(
            "machine".into(),
            tbl(vec![
                ("pcpus", i64::from(cpus).into()),
                ("hypervisor", "kvm".into()),
            ]),
        );
        out.insert(
            "host".into(),
            tbl(vec![
                ("scheduler", "linux".into()),
                ("sched", tbl(sched)),
                ("process", toml::Value::Array(vec![workload])),
            ]),
        );
    }
    out
}

#[cfg(test)]
mod tests;
