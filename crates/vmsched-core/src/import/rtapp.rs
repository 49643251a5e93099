//! rt-app JSON: each task of an rt-app workload file becomes a `kind = "program"` workload.
//!
//! The format is rt-app's (github scheduler-tools/rt-app, `doc/tutorial.txt`): a `tasks` object
//! of thread objects; a thread has `instance`, `delay`, `loop`, scheduling properties and either
//! `phases` (an object of phase objects, run in order) or its events directly (one phase). A
//! phase has a `loop` count and events, run in key order; an event is named by its key's prefix
//! (`run0`, `sleep_long`: rt-app matches keys by prefix), and a key may repeat (kept in order).
//!
//! | rt-app | program workload |
//! |---|---|
//! | task name | `name` (so tasks of one file share no channel: each is its own workload) |
//! | `instance` | `copies` (0: no thread, left out with a note) |
//! | `delay` (µs) | `start_us` |
//! | `policy` / `global.default_policy` | `policy` (`SCHED_OTHER` normal, `SCHED_BATCH`, `SCHED_IDLE`, `SCHED_FIFO`, `SCHED_RR`, `SCHED_DEADLINE`) |
//! | `priority` | `nice` for OTHER/BATCH/IDLE, `rt_priority` for FIFO/RR (default 10, as rt-app); ignored with a note for DEADLINE |
//! | `dl-runtime`, `dl-period`, `dl-deadline` (µs) of a DEADLINE task | `sched_runtime_ns`, `sched_period_ns`, `sched_deadline_ns`; as rt-app, the period defaults to the runtime and the deadline to the period; with `phases`, the legacy thread keys `runtime`, `period`, `deadline` stand in for those left at 0 |
//! | `cpus` | `affinity` (vCPUs of the guest) |
//! | `run`, `runtime` (µs) | `compute` (`run` counts calibrated loops in rt-app: here its duration at full speed) |
//! | `sleep` (µs) | `sleep`, timer slack 50 µs (0 for FIFO/RR/DEADLINE, as Linux gives RT and deadline tasks none) |
//! | `timer` `{period}` | approximated: a `sleep` of `period` minus the run and sleep time since the phase's start or the previous timer (exact when the task is never delayed; rt-app's timer keeps an absolute grid) |
//! | `yield` | `yield` |
//! | phase `loop` n | `loop` back to the phase's first step n − 1 times (−1: forever) |
//! | thread `loop` n | a `count` of the counter `loops`, then `loop` to step 0 n − 1 times (−1, the default with `phases`: forever), then `exit` |
//! | `global.duration` (s) | `run.duration_ms` when positive |
//!
//! Refused, naming the key and line: events between tasks (`lock`, `unlock`, `wait`, `signal`,
//! `broad`, `sync`, `barrier`, `suspend`, `resume`, `sem_post`, `sem_wait`, `fork`: the tasks
//! become separate workloads, which share no channel), memory and I/O events (`mem`, `memrun`,
//! `iorun`), `taskgroup` (no group scheduling in the guest model) and per-phase changes of
//! policy, priority, deadline parameters or CPUs (a workload has one); deadline parameters that
//! `sched_setattr` would refuse are refused as the program workload refuses them (naming the
//! task). Noted and ignored: logging and
//! calibration settings, `util_min`/`util_max`, `nodes_membind`, deadline parameters of a
//! non-deadline task, keys rt-app does not know.

use super::json::{self, Json, Node};
use super::{error, Fragment, Note};
use crate::scenario::ScenarioError;
use crate::sched::Policy;
use crate::workload::program::{ProgramConfig, StepConfig, MAX_TASKS};
use crate::workload::WorkloadConfig;

/// rt-app's event names, matched as key prefixes in this order (`runtime` before `run`,
/// `memrun` before `mem`).
const EVENTS: [&str; 20] = [
    "lock", "unlock", "wait", "signal", "broad", "sync", "sleep", "runtime", "run", "timer",
    "suspend", "resume", "memrun", "mem", "iorun", "yield", "barrier", "fork", "sem_post",
    "sem_wait",
];

fn event_of(key: &str) -> Option<&'static str> {
    EVENTS.iter().copied().find(|e| key.starts_with(e))
}

/// Thread and phase properties that are not events.
const SCHED_KEYS: [&str; 6] = [
    "policy",
    "priority",
    "cpus",
    "dl-runtime",
    "dl-period",
    "dl-deadline",
];
const IGNORED_KEYS: [&str; 5] = [
    "util_min",
    "util_max",
    "nodes_membind",
    "dl-runtime",
    "dl-period",
];

struct Ctx<'a> {
    file: &'a str,
    notes: Vec<Note>,
}

impl Ctx<'_> {
    fn err(&self, node: &Node, key: &str, msg: impl Into<String>) -> ScenarioError {
        error(self.file, Some(node.line), key, msg)
    }

    fn note(&mut self, node: &Node, key: &str, msg: impl Into<String>) {
        self.notes.push(Note {
            line: Some(node.line),
            key: key.to_string(),
            message: msg.into(),
        });
    }

    fn int(&self, node: &Node, key: &str, lo: i64, hi: i64) -> Result<i64, ScenarioError> {
        match node.value {
            Json::Int(v) if (lo..=hi).contains(&v) => Ok(v),
            Json::Int(v) => Err(self.err(node, key, format!("must be in {lo}..={hi}, got {v}"))),
            _ => Err(self.err(
                node,
                key,
                format!("expected an integer, got {}", node.kind()),
            )),
        }
    }

    /// A duration in µs (rt-app's unit), at most 2^40 µs (about 12.7 days), below the scenario's
    /// time limit (2^56 ns) so that its conversion cannot fail; the loader checks it again.
    fn us(&self, node: &Node, key: &str) -> Result<u64, ScenarioError> {
        self.int(node, key, 0, 1 << 40).map(|v| v as u64)
    }
}

/// The scheduling properties of a thread (`dl` in µs: runtime, period, deadline; zero unless
/// the policy is SCHED_DEADLINE).
#[derive(Clone, Copy, PartialEq)]
struct Sched {
    policy: Policy,
    prio: i64,
    dl: [u64; 3],
}

fn policy_of(ctx: &Ctx, node: &Node, key: &str) -> Result<Policy, ScenarioError> {
    let Json::Str(s) = &node.value else {
        return Err(ctx.err(node, key, format!("expected a string, got {}", node.kind())));
    };
    Ok(match s.as_str() {
        "SCHED_OTHER" => Policy::Normal,
        "SCHED_BATCH" => Policy::Batch,
        "SCHED_IDLE" => Policy::Idle,
        "SCHED_FIFO" => Policy::Fifo,
        "SCHED_RR" => Policy::Rr,
        "SCHED_DEADLINE" => Policy::Deadline,
        other => {
            return Err(ctx.err(
                node,
                key,
                format!(
                    "unknown policy '{other}' (SCHED_OTHER, SCHED_BATCH, SCHED_IDLE, SCHED_FIFO, \
                     SCHED_RR, SCHED_DEADLINE)"
                ),
            ))
        }
    })
}

fn sched_of(ctx: &Ctx, obj: &Node, default: Policy) -> Result<Sched, ScenarioError> {
    let policy = match obj.get("policy") {
        Some(p) => policy_of(ctx, p, "policy")?,
        None => default,
    };
    let rt = matches!(policy, Policy::Fifo | Policy::Rr);
    let dl = policy == Policy::Deadline;
    let prio = match obj.get("priority") {
        Some(_) if dl => 0,
        Some(p) if rt => ctx.int(p, "priority", 1, 99)?,
        Some(p) => ctx.int(p, "priority", -20, 19)?,
        None if rt => 10,
        None => 0,
    };
    let mut params = [0u64; 3];
    if dl {
        // rt-app: the period defaults to the runtime, the deadline to the period.
        for (i, k) in ["dl-runtime", "dl-period", "dl-deadline"]
            .iter()
            .enumerate()
        {
            params[i] = match obj.get(k) {
                Some(v) => ctx.us(v, k)?,
                None => 0,
            };
        }
        if params[1] == 0 {
            params[1] = params[0];
        }
        if params[2] == 0 {
            params[2] = params[1];
        }
    }
    Ok(Sched {
        policy,
        prio,
        dl: params,
    })
}

/// rt-app's legacy thread keys `runtime`, `period`, `deadline` of a deadline task with `phases`
/// (without `phases`, `runtime` is an event of the thread's one phase): each stands in for a
/// `dl-*` parameter left at 0, with the same defaults.
fn legacy_dl(ctx: &mut Ctx, obj: &Node, sched: &mut Sched) -> Result<(), ScenarioError> {
    let given = |k: &str| obj.get(k).is_some();
    let mut legacy = [0u64; 3];
    for (i, k) in ["runtime", "period", "deadline"].iter().enumerate() {
        if let Some(v) = obj.get(k) {
            legacy[i] = ctx.us(v, k)?;
        }
    }
    if given("dl-runtime") || legacy[0] == 0 {
        legacy[0] = sched.dl[0];
    }
    let period = if given("dl-period") {
        sched.dl[1]
    } else if legacy[1] != 0 {
        legacy[1]
    } else {
        legacy[0]
    };
    let deadline = if given("dl-deadline") {
        sched.dl[2]
    } else if legacy[2] != 0 {
        legacy[2]
    } else {
        period
    };
    sched.dl = [legacy[0], period, deadline];
    Ok(())
}

fn cpus_of(ctx: &Ctx, node: &Node) -> Result<Vec<u32>, ScenarioError> {
    let Json::Array(items) = &node.value else {
        return Err(ctx.err(
            node,
            "cpus",
            format!("expected an array, got {}", node.kind()),
        ));
    };
    let mut out: Vec<u32> = items
        .iter()
        .map(|c| {
            ctx.int(c, "cpus", 0, crate::cpuset::MAX_CPUS as i64 - 1)
                .map(|v| v as u32)
        })
        .collect::<Result<_, _>>()?;
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        return Err(ctx.err(node, "cpus", "an affinity needs at least one CPU"));
    }
    Ok(out)
}

/// The steps of one phase (its events, in order) appended to `steps`.
fn phase(
    ctx: &mut Ctx,
    task: &str,
    obj: &Node,
    sched: Sched,
    affinity: &Option<Vec<u32>>,
    steps: &mut Vec<StepConfig>,
) -> Result<(), ScenarioError> {
    let Json::Object(members) = &obj.value else {
        return Err(ctx.err(
            obj,
            task,
            format!("a phase must be an object, got {}", obj.kind()),
        ));
    };
    let start = steps.len();
    let slack_ns = if matches!(sched.policy, Policy::Fifo | Policy::Rr | Policy::Deadline) {
        0
    } else {
        50_000
    };
    let dl = sched.policy == Policy::Deadline;
    // Run and sleep time since the phase's start or the last timer (for the timer approximation).
    let mut since_timer: u64 = 0;
    let mut events = 0;
    for (key, v) in members {
        let Some(ev) = event_of(key) else {
            match key.as_str() {
                "loop" | "policy" | "priority" | "cpus" | "phases" | "instance" | "delay" => {}
                "dl-runtime" | "dl-period" | "dl-deadline" if dl => {}
                "taskgroup" => match &v.value {
                    Json::Str(s) if s.is_empty() => {}
                    _ => {
                        return Err(ctx.err(
                            v,
                            key,
                            "task groups are not modelled (the guest's CFS has no group \
                             scheduling)",
                        ))
                    }
                },
                k if IGNORED_KEYS.contains(&k) || k == "dl-deadline" => {
                    let what = if k.starts_with("dl-") {
                        "a SCHED_DEADLINE parameter, and the task is not a deadline task"
                    } else if k == "nodes_membind" {
                        "memory placement is not modelled"
                    } else {
                        "utilisation clamping acts on frequency and energy-aware placement, \
                         which the model has not"
                    };
                    ctx.note(v, key, format!("ignored: {what}"));
                }
                "period" | "deadline" => ctx.note(
                    v,
                    key,
                    "ignored: a SCHED_DEADLINE parameter (legacy name), and the task is not a \
                     deadline task",
                ),
                _ => ctx.note(v, key, "ignored: not an rt-app event or property"),
            }
            continue;
        };
        events += 1;
        match ev {
            "run" | "runtime" => {
                let us = ctx.us(v, key)?;
                since_timer = since_timer.saturating_add(us);
                steps.push(StepConfig::Compute {
                    ns: None,
                    us: Some(us),
                    ms: None,
                    exp_us: None,
                    uniform_us: None,
                    kernel: false,
                });
            }
            "sleep" => {
                let us = ctx.us(v, key)?;
                since_timer = since_timer.saturating_add(us);
                steps.push(StepConfig::Sleep {
                    ns: None,
                    us: Some(us),
                    ms: None,
                    exp_us: None,
                    uniform_us: None,
                    slack_ns,
                });
            }
            "timer" => {
                let Some(p) = v.get("period") else {
                    return Err(ctx.err(
                        v,
                        key,
                        if matches!(v.value, Json::Object(_)) {
                            "a timer needs a \"period\" (µs)".to_string()
                        } else {
                            format!(
                                "a timer is an object {{\"ref\": ..., \"period\": µs}}, got {}",
                                v.kind()
                            )
                        },
                    ));
                };
                let period = ctx.us(p, &format!("{key}.period"))?;
                if period == 0 {
                    return Err(ctx.err(p, &format!("{key}.period"), "must be positive"));
                }
                if let Some(m) = v.get("mode") {
                    if !matches!(&m.value, Json::Str(s) if s == "relative" || s == "absolute") {
                        return Err(ctx.err(
                            m,
                            &format!("{key}.mode"),
                            "must be \"relative\" or \"absolute\"",
                        ));
                    }
                }
                let rest = period.saturating_sub(since_timer);
                ctx.note(
                    v,
                    key,
                    format!(
                        "approximated by a sleep of {rest} µs (period {period} µs minus the \
                         {since_timer} µs of run and sleep before it)"
                    ),
                );
                since_timer = 0;
                steps.push(StepConfig::Sleep {
                    ns: None,
                    us: Some(rest),
                    ms: None,
                    exp_us: None,
                    uniform_us: None,
                    slack_ns,
                });
            }
            "yield" => steps.push(StepConfig::Yield),
            "mem" | "memrun" | "iorun" => {
                return Err(ctx.err(
                    v,
                    key,
                    format!("rt-app `{ev}` events are not modelled (memory and I/O traffic)"),
                ))
            }
            _ => {
                return Err(ctx.err(
                    v,
                    key,
                    format!(
                        "rt-app `{ev}` events synchronise tasks, which are separate workloads \
                         here and share no channel; write the scenario's program by hand \
                         (channels, wait, signal)"
                    ),
                ))
            }
        }
    }
    if events == 0 {
        return Err(ctx.err(
            obj,
            task,
            "a phase needs at least one event (rt-app refuses it too)",
        ));
    }
    // Per-phase changes of the task's scheduling (a workload has one policy and affinity).
    for k in SCHED_KEYS {
        let Some(v) = obj.get(k) else { continue };
        let same = match k {
            "cpus" => Some(cpus_of(ctx, v)?) == *affinity,
            "dl-runtime" | "dl-period" | "dl-deadline" if !dl => continue,
            "dl-runtime" | "dl-period" | "dl-deadline" => {
                let i = ["dl-runtime", "dl-period", "dl-deadline"]
                    .iter()
                    .position(|x| x == &k)
                    .expect("a dl key");
                ctx.us(v, k)? == sched.dl[i]
            }
            _ => {
                let here = sched_of(ctx, obj, sched.policy)?;
                here.policy == sched.policy && (dl || here.prio == sched.prio)
            }
        };
        if !same {
            return Err(ctx.err(
                v,
                k,
                "a change of policy, priority, deadline parameters or CPUs between phases is \
                 not modelled (a workload has one)",
            ));
        }
    }
    let loops = match obj.get("loop") {
        Some(l) => ctx.int(l, "loop", -1, u32::MAX as i64 + 1)?,
        None => 1,
    };
    match loops {
        0 => {
            return Err(ctx.err(
                obj.get("loop").unwrap_or(obj),
                "loop",
                "must be -1 or at least 1",
            ))
        }
        1 => {}
        -1 => steps.push(StepConfig::Loop {
            to: start as u16,
            times: None,
        }),
        n => steps.push(StepConfig::Loop {
            to: start as u16,
            times: Some((n - 1) as u32),
        }),
    }
    Ok(())
}

fn task(
    ctx: &mut Ctx,
    name: &str,
    obj: &Node,
    default_policy: Policy,
) -> Result<Option<ProgramConfig>, ScenarioError> {
    if !matches!(obj.value, Json::Object(_)) {
        return Err(ctx.err(
            obj,
            name,
            format!("a task must be an object, got {}", obj.kind()),
        ));
    }
    let copies = match obj.get("instance") {
        Some(i) => ctx.int(i, "instance", 0, MAX_TASKS as i64)? as u32,
        None => 1,
    };
    if copies == 0 {
        ctx.note(
            obj,
            name,
            "instance = 0: rt-app creates no thread; left out",
        );
        return Ok(None);
    }
    let start_us = match obj.get("delay") {
        Some(d) => ctx.us(d, "delay")?,
        None => 0,
    };
    let mut sched = sched_of(ctx, obj, default_policy)?;
    if sched.policy == Policy::Deadline {
        if let Some(p) = obj.get("priority") {
            ctx.note(
                p,
                "priority",
                "ignored: a SCHED_DEADLINE task has no priority (its runtime, deadline and \
                 period schedule it)",
            );
        }
        if obj.get("phases").is_some() {
            legacy_dl(ctx, obj, &mut sched)?;
        }
    }
    let affinity = obj.get("cpus").map(|c| cpus_of(ctx, c)).transpose()?;
    let mut steps = Vec::new();
    let phases = obj.get("phases");
    match phases {
        Some(p) => {
            let Json::Object(list) = &p.value else {
                return Err(ctx.err(p, "phases", format!("expected an object, got {}", p.kind())));
            };
            if list.is_empty() {
                return Err(ctx.err(p, "phases", "needs at least one phase"));
            }
            for (pname, ph) in list {
                if steps.len() > u16::MAX as usize {
                    return Err(ctx.err(ph, pname, "the program has too many steps"));
                }
                if matches!(steps.last(), Some(StepConfig::Loop { times: None, .. })) {
                    ctx.note(ph, pname, "never runs: the phase before it loops forever");
                }
                phase(ctx, pname, ph, sched, &affinity, &mut steps)?;
            }
            for k in [
                "runtime",
                "period",
                "deadline",
                "dl-runtime",
                "dl-period",
                "dl-deadline",
            ] {
                if sched.policy == Policy::Deadline {
                    break;
                }
                if let Some(v) = obj.get(k) {
                    ctx.note(
                        v,
                        k,
                        "ignored: a SCHED_DEADLINE parameter of a task that is not one",
                    );
                }
            }
        }
        None => phase(ctx, name, obj, sched, &affinity, &mut steps)?,
    }
    // The thread loop: -1 (forever) by default with `phases`; without `phases`, a `loop` key
    // was the phase's, and the thread runs once.
    let loops = match (phases, obj.get("loop")) {
        (Some(_), Some(l)) => ctx.int(l, "loop", -1, u32::MAX as i64 + 1)?,
        (Some(_), None) => -1,
        (None, Some(_)) => 1,
        (None, None) => -1,
    };
    if loops == 0 {
        return Err(ctx.err(
            obj.get("loop").unwrap_or(obj),
            "loop",
            "must be -1 or at least 1",
        ));
    }
    steps.push(StepConfig::Count {
        counter: "loops".into(),
    });
    match loops {
        -1 => steps.push(StepConfig::Loop { to: 0, times: None }),
        1 => steps.push(StepConfig::Exit),
        n => {
            steps.push(StepConfig::Loop {
                to: 0,
                times: Some((n - 1) as u32),
            });
            steps.push(StepConfig::Exit);
        }
    }
    let rt = matches!(sched.policy, Policy::Fifo | Policy::Rr);
    let cfg = ProgramConfig {
        name: name.to_string(),
        copies,
        nice: if rt { 0 } else { sched.prio as i32 },
        policy: sched.policy,
        rt_priority: if rt { sched.prio as u32 } else { 0 },
        sched_runtime_ns: sched.dl[0] * 1000,
        sched_deadline_ns: sched.dl[2] * 1000,
        sched_period_ns: sched.dl[1] * 1000,
        affinity,
        channels: vec![],
        tokens: vec![],
        counters: vec!["loops".into()],
        start_us,
        max_tasks: None,
        steps,
    };
    cfg.validate().map_err(|(field, msg)| {
        ctx.err(obj, name, format!("as a program workload, {field}: {msg}"))
    })?;
    Ok(Some(cfg))
}

/// Reads an rt-app JSON file into workloads of one domain.
pub fn import(file: &str, src: &str) -> Result<Fragment, ScenarioError> {
    let root = json::parse(file, src)?;
    let mut ctx = Ctx {
        file,
        notes: Vec::new(),
    };
    let Json::Object(top) = &root.value else {
        return Err(ctx.err(
            &root,
            "",
            format!("expected an object, got {}", root.kind()),
        ));
    };
    let mut default_policy = Policy::Normal;
    let mut run = toml::Table::new();
    if let Some(g) = root.get("global") {
        let Json::Object(members) = &g.value else {
            return Err(ctx.err(g, "global", format!("expected an object, got {}", g.kind())));
        };
        for (k, v) in members {
            match k.as_str() {
                "default_policy" => default_policy = policy_of(&ctx, v, "global.default_policy")?,
                "duration" => {
                    let d = ctx.int(
                        v,
                        "global.duration",
                        -1,
                        (crate::time::MAX_TIME_NS / crate::time::NS_PER_S) as i64,
                    )?;
                    if d > 0 {
                        run.insert("duration_ms".into(), (d * 1000).into());
                    } else {
                        ctx.note(
                            v,
                            "global.duration",
                            format!("{d}: the scenario's run.duration_ms decides"),
                        );
                    }
                }
                "pi_enabled" => ctx.note(v, "global.pi_enabled", "ignored: no mutexes are read"),
                _ => ctx.note(
                    v,
                    &format!("global.{k}"),
                    "ignored: a logging, calibration or host setting",
                ),
            }
        }
    }
    for (k, v) in top {
        if k != "tasks" && k != "global" {
            ctx.note(v, k, "ignored");
        }
    }
    let Some(tasks) = root.get("tasks") else {
        return Err(ctx.err(&root, "tasks", "missing: rt-app needs a \"tasks\" object"));
    };
    let Json::Object(list) = &tasks.value else {
        return Err(ctx.err(
            tasks,
            "tasks",
            format!("expected an object, got {}", tasks.kind()),
        ));
    };
    let mut workloads: Vec<ProgramConfig> = Vec::new();
    for (name, t) in list {
        if workloads.iter().any(|w| w.name == *name) {
            return Err(ctx.err(
                t,
                &format!("tasks.{name}"),
                "a task of this name is defined twice",
            ));
        }
        let key = format!("tasks.{}", super::printable(name));
        if let Some(w) = task(&mut ctx, name, t, default_policy).map_err(|mut e| {
            if !e.field.starts_with("tasks.") {
                e.field = if e.field.is_empty() || e.field == *name {
                    key.clone()
                } else {
                    format!("{key}.{}", e.field)
                };
            }
            e
        })? {
            workloads.push(w);
        }
    }
    if workloads.is_empty() {
        return Err(ctx.err(tasks, "tasks", "no task creates a thread"));
    }
    let mut notes = ctx.notes;
    if list.iter().any(|(_, t)| has_run(t)) {
        notes.push(Note {
            line: None,
            key: "run".into(),
            message: "rt-app's `run` counts calibrated loops; it is taken as its duration at \
                      full speed (as `runtime`)"
                .into(),
        });
    }
    let ws: Vec<toml::Value> = workloads
        .into_iter()
        .map(|w| {
            let mut v =
                toml::Value::try_from(WorkloadConfig::Program(w)).expect("a program serialises");
            if let Some(t) = v.as_table_mut() {
                prune_defaults(t);
            }
            v
        })
        .collect();
    let mut d = toml::Table::new();
    d.insert("workload".into(), toml::Value::Array(ws));
    let mut table = toml::Table::new();
    if !run.is_empty() {
        table.insert("run".into(), run.into());
    }
    table.insert("domain".into(), toml::Value::Array(vec![d.into()]));
    Ok(Fragment { table, notes })
}

/// Leaves out of a serialised program the fields at their defaults (empty channel lists, nice 0,
/// `kernel = false`, the default sleep slack), so the TOML reads like a hand-written one.
fn prune_defaults(t: &mut toml::Table) {
    let default = |k: &str, v: &toml::Value| match (k, v) {
        ("channels" | "tokens", toml::Value::Array(a)) => a.is_empty(),
        ("nice" | "rt_priority" | "start_us", toml::Value::Integer(0)) => true,
        ("copies", toml::Value::Integer(1)) => true,
        ("policy", toml::Value::String(p)) => p == "normal",
        _ => false,
    };
    t.retain(|k, v| !default(k, v));
    for step in t
        .get_mut("steps")
        .and_then(|s| s.as_array_mut())
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_table_mut())
    {
        step.retain(|k, v| {
            !matches!(
                (k, &*v),
                ("kernel", toml::Value::Boolean(false))
                    | ("slack_ns", toml::Value::Integer(50_000))
            )
        });
    }
}

fn has_run(n: &Node) -> bool {
    match &n.value {
        Json::Object(m) => m
            .iter()
            .any(|(k, v)| (k.starts_with("run") && !k.starts_with("runtime")) || has_run(v)),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
