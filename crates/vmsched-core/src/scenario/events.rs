//! The `[[event]]` timeline of a scenario: run-time changes delivered at given times (Xen `xl
//! sched-credit -d/-s` and `xl sched-credit2 -d/-s`, `xl pause`/`xl unpause`, `xen-hptool cpu-offline/cpu-online`; Linux
//! nice, `sched_setattr` and CPU hot-plug through `/sys/devices/system/cpu/cpuN/online`), and
//! their validation. The engine side is `sim::TimelineAction`; docs/scenarios.md lists the actions.

use serde::{Deserialize, Serialize};

use super::{ConfigCheck, DomainConfig};
use crate::sched::Policy;
use crate::time::{time_ns, Nanos, NS_PER_MS};

/// What a timeline event does.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EventAction {
    /// `xl sched-credit -d NAME -w W -c C` (`xl sched-credit2 -d ...`): a domain's weight
    /// and/or cap.
    SchedDomain,
    /// `xl sched-credit -s -t T -r R` (Credit1 4.2+) or `xl sched-credit2 -s -r R`:
    /// scheduler-wide parameters.
    SchedHost,
    /// `renice` / `sched_setattr` of a workload's tasks (one task with `task`); without
    /// `domain`, of a KVM host's process (`workload` names a `[[host.process]]`).
    SchedTask,
    /// `renice` / `chrt` of a domain's QEMU vCPU threads under a KVM host (one with `cpu`).
    SchedVcpu,
    /// `xl pause NAME`: every vCPU of the domain stops running (accounted `offline`).
    Pause,
    /// `xl unpause NAME`.
    Unpause,
    /// `xen-hptool cpu-offline N` (no `domain`: pCPU `cpu` of the host) or `echo 0 >
    /// /sys/devices/system/cpu/cpuN/online` in `domain` (its vCPU `cpu`, which then goes down
    /// at the host, `VCPUOP_down`).
    CpuOffline,
    /// `xen-hptool cpu-online N`, or `echo 1 > .../cpuN/online` in `domain` (`VCPUOP_up`).
    CpuOnline,
    /// `xl cpupool-cpu-add POOL CPU`: the free pCPU `cpu` joins `pool` (docs/cpupools.md).
    CpupoolCpuAdd,
    /// `xl cpupool-cpu-remove POOL CPU`: pCPU `cpu` leaves `pool` and is free.
    CpupoolCpuRemove,
    /// `xl cpupool-migrate DOMAIN POOL`: `domain` moves to `pool`; its vCPUs take the new
    /// scheduler's defaults, or the `weight`, `cap`, `budget_us`, `period_us`, `extratime`
    /// given.
    CpupoolMigrate,
    /// `xl cpupool-create`: the `[[cpupool]]` named `pool` (declared with no pCPU) exists from
    /// now on, empty, with its scheduler; `cpupool_cpu_add` then gives it pCPUs.
    CpupoolCreate,
    /// `xl cpupool-destroy POOL`: the pool, which has neither a pCPU nor a domain, is gone.
    CpupoolDestroy,
}

impl EventAction {
    pub(crate) fn name(self) -> &'static str {
        match self {
            EventAction::SchedDomain => "sched_domain",
            EventAction::SchedHost => "sched_host",
            EventAction::SchedTask => "sched_task",
            EventAction::SchedVcpu => "sched_vcpu",
            EventAction::Pause => "pause",
            EventAction::Unpause => "unpause",
            EventAction::CpuOffline => "cpu_offline",
            EventAction::CpuOnline => "cpu_online",
            EventAction::CpupoolCpuAdd => "cpupool_cpu_add",
            EventAction::CpupoolCpuRemove => "cpupool_cpu_remove",
            EventAction::CpupoolMigrate => "cpupool_migrate",
            EventAction::CpupoolCreate => "cpupool_create",
            EventAction::CpupoolDestroy => "cpupool_destroy",
        }
    }

    /// The fields the action takes (besides `at_ms` and `action`), and whether at least one
    /// of the optional ones must be given.
    fn fields(self) -> &'static [&'static str] {
        match self {
            EventAction::SchedDomain => &[
                "domain",
                "weight",
                "cap",
                "budget_us",
                "period_us",
                "extratime",
            ],
            EventAction::SchedHost => &["ratelimit_us", "tslice_ms", "pool"],
            EventAction::SchedTask => &[
                "domain",
                "workload",
                "task",
                "nice",
                "policy",
                "rt_priority",
            ],
            EventAction::SchedVcpu => &["domain", "cpu", "nice", "policy", "rt_priority"],
            EventAction::Pause | EventAction::Unpause => &["domain"],
            EventAction::CpuOffline | EventAction::CpuOnline => &["cpu", "domain"],
            EventAction::CpupoolCpuAdd | EventAction::CpupoolCpuRemove => &["pool", "cpu"],
            EventAction::CpupoolCreate | EventAction::CpupoolDestroy => &["pool"],
            EventAction::CpupoolMigrate => &[
                "domain",
                "pool",
                "weight",
                "cap",
                "budget_us",
                "period_us",
                "extratime",
            ],
        }
    }
}

/// One `[[event]]`: at `at_ms`, one action on one target.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EventConfig {
    /// When the change happens (ms after the start of the run; before its end).
    pub at_ms: u64,
    pub action: EventAction,
    /// The target domain (`sched_domain`, `sched_task`, `pause`, `unpause`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// The target workload of `domain` (`sched_task`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// One task of `workload` (`sched_task`); default: all its tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// New domain weight (1..=65535).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// New domain cap (% of one pCPU, 0 = none; at most 100 × vcpus).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<u32>,
    /// New RTDS budget of every vCPU of the domain (µs; `xl sched-rtds -d D -v all -b`; with
    /// `period_us` and `extratime`, as xl wants all three).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_us: Option<u64>,
    /// New RTDS period (µs; `-p`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_us: Option<u64>,
    /// New RTDS extratime (`-e 1` / `-e 0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extratime: Option<bool>,
    /// New scheduler rate limit (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratelimit_us: Option<u64>,
    /// New scheduler time slice (ms; Credit1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tslice_ms: Option<u64>,
    /// New nice value (-20..=19).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
    /// New scheduling policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// New `sched_priority` (1..=99 for fifo/rr).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt_priority: Option<u32>,
    /// The CPU of `cpu_offline`/`cpu_online`: a pCPU of the host, or a vCPU of `domain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// The cpupool of `cpupool_*` and of `sched_host` (default: Pool-0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

impl EventConfig {
    /// `at_ms` in ns, checked.
    pub fn at_ns(&self, field: &str) -> Result<Nanos, (String, String)> {
        time_ns(field, self.at_ms, NS_PER_MS)
    }

    /// The optional fields given, by name.
    fn given(&self) -> [(&'static str, bool); 15] {
        [
            ("domain", self.domain.is_some()),
            ("workload", self.workload.is_some()),
            ("task", self.task.is_some()),
            ("weight", self.weight.is_some()),
            ("cap", self.cap.is_some()),
            ("budget_us", self.budget_us.is_some()),
            ("period_us", self.period_us.is_some()),
            ("extratime", self.extratime.is_some()),
            ("ratelimit_us", self.ratelimit_us.is_some()),
            ("tslice_ms", self.tslice_ms.is_some()),
            ("nice", self.nice.is_some()),
            ("policy", self.policy.is_some()),
            ("rt_priority", self.rt_priority.is_some()),
            ("cpu", self.cpu.is_some()),
            ("pool", self.pool.is_some()),
        ]
    }

    /// `nice`, `policy`, `rt_priority` of a `sched_task` or `sched_vcpu` event `i`: one at
    /// least, in range, and taken by the scheduler `sched` of the level it changes.
    fn check_attrs<C: ConfigCheck>(&self, i: usize, sched: &C) -> Result<(), (String, String)> {
        let at = |f: &str| format!("event.{i}.{f}");
        let a = self.action.name();
        if self.nice.is_none() && self.policy.is_none() && self.rt_priority.is_none() {
            return Err((
                at("nice"),
                format!("{a} needs `nice`, `policy` or `rt_priority`"),
            ));
        }
        if let Some(n) = self.nice {
            if !(-20..=19).contains(&n) {
                return Err((at("nice"), format!("must be in -20..=19, got {n}")));
            }
            sched
                .check_adjust("nice", n.into())
                .map_err(|m| (at("nice"), m))?;
        }
        if let Some(p) = self.policy {
            sched
                .check_adjust("policy", p as i64)
                .map_err(|m| (at("policy"), m))?;
        }
        if let Some(r) = self.rt_priority {
            if r > 99 {
                return Err((at("rt_priority"), format!("must be 0..=99, got {r}")));
            }
            sched
                .check_adjust("rt_priority", r.into())
                .map_err(|m| (at("rt_priority"), m))?;
        }
        Ok(())
    }

    /// A `sched_task` event `i` on workload `w` (of `ncpus` CPUs) of a level scheduled by
    /// `sched`: the task it names exists, and what each task becomes is a policy move the
    /// scheduler models, with an RT priority in 1..=99 for an RT policy (`sched_setattr`).
    fn check_task_change<C: ConfigCheck>(
        &self,
        i: usize,
        w: &crate::workload::WorkloadConfig,
        ncpus: u32,
        sched: &C,
    ) -> Result<(), (String, String)> {
        let at = |f: &str| format!("event.{i}.{f}");
        let spec = w.build(ncpus);
        if let Some(tn) = &self.task {
            if !spec.tasks.iter().any(|t| &t.name == tn) {
                let names: Vec<&str> = spec.tasks.iter().map(|t| t.name.as_str()).collect();
                return Err((
                    at("task"),
                    format!(
                        "workload '{}' has no task '{tn}' (its tasks: {})",
                        w.name(),
                        names.join(", ")
                    ),
                ));
            }
        }
        self.check_attrs(i, sched)?;
        let targets = spec
            .tasks
            .iter()
            .filter(|t| self.task.as_ref().is_none_or(|tn| &t.name == tn));
        for t in targets {
            let policy = self.policy.unwrap_or(t.policy);
            let prio = self.rt_priority.unwrap_or(t.rt_prio);
            let what = format!("task '{}'", t.name);
            check_rt_prio(policy, prio, &what, self.rt_priority.is_some())
                .map_err(|(f, m)| (at(f), m))?;
            sched
                .check_policy_change(t.policy, policy)
                .map_err(|m| (at("policy"), format!("task '{}': {m}", t.name)))?;
        }
        Ok(())
    }

    /// Checks event `i` against the scenario. Err((dotted field path, message)).
    pub(crate) fn validate<H: ConfigCheck, G: ConfigCheck>(
        &self,
        i: usize,
        end: Nanos,
        host: &H,
        pcpus: u32,
        domains: &[DomainConfig<G>],
        pooled: bool,
    ) -> Result<(), (String, String)> {
        let at = |f: &str| format!("event.{i}.{f}");
        let a = self.action;
        let t = self.at_ns(&at("at_ms"))?;
        if t >= end {
            return Err((
                at("at_ms"),
                format!(
                    "must be before the run's end ({} ms), got {}",
                    end / NS_PER_MS,
                    self.at_ms
                ),
            ));
        }
        for (f, given) in self.given() {
            if given && !a.fields().contains(&f) {
                return Err((
                    at(f),
                    format!(
                        "does not apply to action '{}' (it takes {})",
                        a.name(),
                        a.fields().join(", ")
                    ),
                ));
            }
        }
        let need = |f: &str, v: bool| -> Result<(), (String, String)> {
            if v {
                Ok(())
            } else {
                Err((at(f), format!("action '{}' needs `{f}`", a.name())))
            }
        };
        let domain = || -> Result<(usize, &DomainConfig<G>), (String, String)> {
            let name = self.domain.as_deref().unwrap_or_default();
            domains
                .iter()
                .enumerate()
                .find(|(_, d)| d.name == name)
                .ok_or_else(|| (at("domain"), format!("no domain is named '{name}'")))
        };
        // With cpupools the scheduler a change reaches depends on the pool and the time:
        // scenario/cpupool.rs checks it.
        let host_takes = |f: &str, v: i64| -> Result<(), (String, String)> {
            if pooled {
                return Ok(());
            }
            host.check_adjust(f, v).map_err(|m| (at(f), m))
        };
        match a {
            EventAction::SchedDomain => {
                need("domain", self.domain.is_some())?;
                let (_, d) = domain()?;
                let rtds = [
                    ("budget_us", self.budget_us.is_some()),
                    ("period_us", self.period_us.is_some()),
                    ("extratime", self.extratime.is_some()),
                ];
                if self.weight.is_none() && self.cap.is_none() && !rtds.iter().any(|r| r.1) {
                    return Err((
                        at("weight"),
                        "sched_domain needs `weight` or `cap` (or RTDS's `budget_us`, \
                         `period_us` and `extratime`)"
                            .into(),
                    ));
                }
                if rtds.iter().any(|r| r.1) {
                    // xl sched-rtds -v all wants a period, a budget and extratime together.
                    if let Some((f, _)) = rtds.iter().find(|r| !r.1) {
                        return Err((
                            at(f),
                            "xl sched-rtds -v all sets `budget_us`, `period_us` and `extratime` \
                             together: give all three"
                                .into(),
                        ));
                    }
                    let (b, p) = (self.budget_us.unwrap_or(0), self.period_us.unwrap_or(0));
                    if !(10..=u32::MAX as u64).contains(&p) {
                        return Err((
                            at("period_us"),
                            format!("must be in 10..={} (µs), got {p}", u32::MAX),
                        ));
                    }
                    if b < 10 || b > p {
                        return Err((
                            at("budget_us"),
                            format!("must be in 10..=period_us ({p} µs), got {b}"),
                        ));
                    }
                    host_takes("budget_us", b as i64)?;
                }
                if let Some(w) = self.weight {
                    if w == 0 || w > 65535 {
                        return Err((
                            at("weight"),
                            format!("must be 1..=65535 (xl sched-credit -w, xl sched-credit2 -w), got {w}"),
                        ));
                    }
                    host_takes("weight", w.into())?;
                }
                if let Some(c) = self.cap {
                    if c > 100 * d.vcpus {
                        return Err((
                            at("cap"),
                            format!("must be at most 100 × vcpus = {}, got {c}", 100 * d.vcpus),
                        ));
                    }
                    host_takes("cap", c.into())?;
                }
            }
            EventAction::SchedHost => {
                if self.ratelimit_us.is_none() && self.tslice_ms.is_none() {
                    return Err((
                        at("ratelimit_us"),
                        "sched_host needs `ratelimit_us` or `tslice_ms`".into(),
                    ));
                }
                let int = |f: &str, v: u64| -> Result<i64, (String, String)> {
                    i64::try_from(v).map_err(|_| (at(f), format!("{v} is too large")))
                };
                if let Some(r) = self.ratelimit_us {
                    host_takes("ratelimit_us", int("ratelimit_us", r)?)?;
                }
                if let Some(s) = self.tslice_ms {
                    host_takes("tslice_ms", int("tslice_ms", s)?)?;
                }
            }
            EventAction::SchedTask => {
                need("workload", self.workload.is_some())?;
                let wname = self.workload.as_deref().unwrap_or_default();
                if self.domain.is_none() {
                    // A KVM host's process.
                    let w = host
                        .host_processes()
                        .iter()
                        .find(|w| w.name() == wname)
                        .ok_or_else(|| {
                            (
                                at("workload"),
                                format!(
                                    "the host has no process '{wname}' (a sched_task without \
                                     `domain` changes a [[host.process]] of a KVM host)"
                                ),
                            )
                        })?;
                    return self.check_task_change(i, w, pcpus, host);
                }
                let (_, d) = domain()?;
                let w = d
                    .workloads
                    .iter()
                    .find(|w| w.name() == wname)
                    .ok_or_else(|| {
                        (
                            at("workload"),
                            format!("domain '{}' has no workload '{wname}'", d.name),
                        )
                    })?;
                self.check_task_change(i, w, d.vcpus, &d.sched)?;
            }
            EventAction::SchedVcpu => {
                need("domain", self.domain.is_some())?;
                let (_, d) = domain()?;
                if let Some(c) = self.cpu {
                    if c >= d.vcpus {
                        return Err((
                            at("cpu"),
                            format!("domain '{}' has vCPUs 0..{}, got {c}", d.name, d.vcpus),
                        ));
                    }
                }
                self.check_attrs(i, host)?;
                let from = d.vcpu_policy.unwrap_or_default();
                let policy = self.policy.unwrap_or(from);
                let prio = self.rt_priority.unwrap_or(d.vcpu_rt_priority.unwrap_or(0));
                let what = format!("the vCPU threads of domain '{}'", d.name);
                check_rt_prio(policy, prio, &what, self.rt_priority.is_some())
                    .map_err(|(f, m)| (at(f), m))?;
                host.check_policy_change(from, policy)
                    .map_err(|m| (at("policy"), format!("{what}: {m}")))?;
            }
            EventAction::Pause | EventAction::Unpause => {
                need("domain", self.domain.is_some())?;
                domain()?;
                host_takes("pause", 0)?;
            }
            EventAction::CpupoolCpuAdd
            | EventAction::CpupoolCpuRemove
            | EventAction::CpupoolMigrate
            | EventAction::CpupoolCreate
            | EventAction::CpupoolDestroy => {
                // Checked in time order with the pools (scenario/cpupool.rs).
            }
            EventAction::CpuOffline | EventAction::CpuOnline => {
                need("cpu", self.cpu.is_some())?;
                let c = self.cpu.unwrap_or_default();
                let field = a.name();
                match &self.domain {
                    None => {
                        if c >= pcpus {
                            return Err((
                                at("cpu"),
                                format!("the machine has pCPUs 0..{pcpus}, got {c}"),
                            ));
                        }
                        if c == 0 {
                            // Xen cpu_down: CPU 0 never goes down (-EINVAL), and
                            // cpupool_unassign_cpu keeps it in Pool-0.
                            return Err((
                                at("cpu"),
                                "pCPU 0 cannot go offline (Xen's cpu_down refuses CPU 0)".into(),
                            ));
                        }
                        host_takes(field, c.into())?;
                    }
                    Some(_) => {
                        let (_, d) = domain()?;
                        if c >= d.vcpus {
                            return Err((
                                at("cpu"),
                                format!("domain '{}' has vCPUs 0..{}, got {c}", d.name, d.vcpus),
                            ));
                        }
                        if c == 0 {
                            // Linux 5.10 x86: CPU 0 has no `online` file unless the kernel is
                            // built with BOOTPARAM_HOTPLUG_CPU0 or booted with cpu0_hotplug.
                            return Err((
                                at("cpu"),
                                format!(
                                    "vCPU 0 of domain '{}' cannot go offline (Linux 5.10 x86 \
                                     does not hot-unplug CPU 0 by default)",
                                    d.name
                                ),
                            ));
                        }
                        d.sched
                            .check_adjust(field, c.into())
                            .map_err(|m| (at("cpu"), m))?;
                        host_takes("vcpu_down", c.into())?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// `sched_setattr` takes an RT policy only with a priority in 1..=99. `what` names the
/// target; `given`: the event sets `rt_priority` (else the field at fault is `policy`).
fn check_rt_prio(
    policy: Policy,
    prio: u32,
    what: &str,
    given: bool,
) -> Result<(), (&'static str, String)> {
    let rt = matches!(policy, Policy::Fifo | Policy::Rr);
    if rt && !(1..=99).contains(&prio) {
        let f = if given { "rt_priority" } else { "policy" };
        return Err((
            f,
            format!(
                "{what} would be {policy:?} with rt_priority {prio}: an RT policy needs \
                 rt_priority in 1..=99"
            ),
        ));
    }
    Ok(())
}

/// Checks the CPU offline/online events in time order (declaration order at one instant):
/// a CPU goes offline only when it is online and comes online only when it is offline, and
/// the host keeps an online pCPU (Xen: `cpupool_unassign_cpu_start` refuses the pool's last
/// CPU while it has domains, -EBUSY). Err((dotted field path, message)).
pub(crate) fn check_hotplug<G>(
    events: &[EventConfig],
    pcpus: u32,
    domains: &[DomainConfig<G>],
) -> Result<(), (String, String)> {
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| events[i].at_ms);
    let mut host = vec![true; pcpus as usize];
    let mut guests: Vec<Vec<bool>> = domains
        .iter()
        .map(|d| vec![true; d.vcpus as usize])
        .collect();
    for i in order {
        let e = &events[i];
        let on = match e.action {
            EventAction::CpuOffline => false,
            EventAction::CpuOnline => true,
            _ => continue,
        };
        let (Some(c), set, what) = (
            e.cpu,
            match &e.domain {
                None => Some(&mut host),
                Some(n) => domains
                    .iter()
                    .position(|d| &d.name == n)
                    .map(|d| &mut guests[d]),
            },
            match &e.domain {
                None => "pCPU".to_string(),
                Some(n) => format!("vCPU of domain '{n}'"),
            },
        ) else {
            continue;
        };
        let Some(set) = set else { continue };
        let Some(state) = set.get(c as usize).copied() else {
            continue;
        };
        if state == on {
            return Err((
                format!("event.{i}.cpu"),
                format!(
                    "{what} {c} is already {} at {} ms",
                    if on { "online" } else { "offline" },
                    e.at_ms
                ),
            ));
        }
        if !on && set.iter().filter(|x| **x).count() == 1 {
            return Err((
                format!("event.{i}.cpu"),
                format!(
                    "{what} {c} is the last one online at {} ms{}",
                    e.at_ms,
                    if e.domain.is_none() {
                        " (Xen refuses with EBUSY)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        set[c as usize] = on;
    }
    Ok(())
}
