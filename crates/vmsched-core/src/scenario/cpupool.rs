//! The `[[cpupool]]` tables of a scenario and the cpupool events' validation (docs/cpupools.md),
//! after Xen 4.20 `xen/common/sched/cpupool.c` and what `xl cpupool-*` refuse.
//!
//! `[host]` is Pool-0 (the boot scheduler, `sched=`): it holds dom0 and every pCPU no
//! `[[cpupool]]` names. Each `[[cpupool]]` is one more pool (`xl cpupool-create name=..
//! sched=.. cpus=[..]`) with its own scheduler in `[cpupool.sched]`, numbered 1, 2, ... in
//! file order as Xen numbers pools it creates. A domain names its pool with `pool`. The
//! events `cpupool_cpu_add`, `cpupool_cpu_remove` and `cpupool_migrate`, and `sched_host`
//! with `pool`, are checked here in time order against the pools as they are then.
//! `cpupool_create` makes a `[[cpupool]]` declared with no pCPU exist at its time (it is not
//! there before), `cpupool_destroy` makes an empty one go.

use serde::{Deserialize, Serialize};

use super::{ConfigCheck, EventAction, Hypervisor, Scenario};
use crate::cpuset::CpuSet;
use crate::ids::CpuId;

/// Pool-0's name (Xen's).
pub const POOL0: &str = "Pool-0";

/// One `[[cpupool]]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CpupoolConfig<H> {
    /// The pool's name (`xl cpupool-create name=...`), unique, not "Pool-0".
    pub name: String,
    /// Its pCPUs at boot (`cpus=[...]`), taken from Pool-0; at least one, or none for a
    /// pool a `cpupool_create` event makes during the run.
    #[serde(default)]
    pub pcpus: Vec<u32>,
    /// Its scheduler and parameters (`sched=...`), as `[host]`.
    pub sched: H,
}

/// The pools of a scenario as they are at one time of its timeline.
struct State {
    names: Vec<String>,
    cpu_pool: Vec<Option<usize>>,
    dom_pool: Vec<usize>,
    /// Whether each pool exists then (a pool made by `cpupool_create` does not before it, nor
    /// after its `cpupool_destroy`).
    exists: Vec<bool>,
}

impl State {
    /// The pool named `name` (Pool-0 without), if it exists then.
    fn pool(&self, name: Option<&str>) -> Option<usize> {
        let name = name.unwrap_or(POOL0);
        self.names
            .iter()
            .position(|n| n == name)
            .filter(|&p| self.exists[p])
    }

    /// The names of the pools that exist then.
    fn live(&self) -> String {
        let live: Vec<&str> = (0..self.names.len())
            .filter(|&p| self.exists[p])
            .map(|p| self.names[p].as_str())
            .collect();
        live.join(", ")
    }

    fn ncpus(&self, p: usize) -> usize {
        self.cpu_pool.iter().filter(|c| **c == Some(p)).count()
    }

    fn cpus(&self, p: usize) -> CpuSet {
        let mut s = CpuSet::empty();
        for (c, q) in self.cpu_pool.iter().enumerate() {
            if *q == Some(p) {
                s.insert(CpuId(c as u32));
            }
        }
        s
    }
}

/// Checks the pools, the domains' pools and the cpupool events. Err((dotted field, message)).
pub(crate) fn check<H, G>(s: &Scenario<H, G>) -> Result<(), (String, String)>
where
    H: ConfigCheck,
{
    let pooled = !s.cpupools.is_empty();
    if !pooled {
        for (i, d) in s.domains.iter().enumerate() {
            if let Some(p) = &d.pool {
                if p != POOL0 {
                    return Err((
                        format!("domain.{i}.pool"),
                        format!("no cpupool is named '{p}' (the machine has only {POOL0})"),
                    ));
                }
            }
        }
        for (i, e) in s.events.iter().enumerate() {
            let cp = matches!(
                e.action,
                EventAction::CpupoolCpuAdd
                    | EventAction::CpupoolCpuRemove
                    | EventAction::CpupoolMigrate
                    | EventAction::CpupoolCreate
                    | EventAction::CpupoolDestroy
            );
            if cp || e.pool.as_deref().is_some_and(|p| p != POOL0) {
                return Err((
                    format!("event.{i}.{}", if cp { "action" } else { "pool" }),
                    "the machine has no [[cpupool]] (only Pool-0)".into(),
                ));
            }
        }
        return Ok(());
    }
    if s.machine.hypervisor == Hypervisor::Kvm {
        return Err((
            "cpupool".into(),
            "cpupools are Xen's: a KVM host has none".into(),
        ));
    }
    s.host
        .check_cpupool()
        .map_err(|m| ("host.scheduler".to_string(), m))?;
    let n = s.machine.pcpus as usize;
    let mut st = State {
        names: vec![POOL0.to_string()],
        cpu_pool: vec![Some(0); n],
        dom_pool: vec![0; s.domains.len()],
        exists: vec![true],
    };
    for (i, c) in s.cpupools.iter().enumerate() {
        // Made during the run by a `cpupool_create` event, or at boot.
        let later = s.events.iter().any(|e| {
            e.action == EventAction::CpupoolCreate && e.pool.as_deref() == Some(c.name.as_str())
        });
        let at = |f: &str| format!("cpupool.{i}.{f}");
        if c.name.is_empty() || st.names.contains(&c.name) {
            return Err((
                at("name"),
                format!("cpupool name '{}' is empty or used twice", c.name),
            ));
        }
        c.sched
            .check()
            .map_err(|(f, m)| (at(&format!("sched.{f}")), m))?;
        c.sched
            .check_cpupool()
            .map_err(|m| (at("sched.scheduler"), m))?;
        if later && !c.pcpus.is_empty() {
            return Err((
                at("pcpus"),
                format!(
                    "cpupool '{}' is made by a cpupool_create event: it has no pCPU at boot \
                     (xl cpupool-create makes it empty; give it pCPUs with cpupool_cpu_add)",
                    c.name
                ),
            ));
        }
        if !later && c.pcpus.is_empty() {
            return Err((
                at("pcpus"),
                "a cpupool made at boot needs at least one pCPU (an empty one is made by a \
                 cpupool_create event)"
                    .into(),
            ));
        }
        for &p in &c.pcpus {
            let Some(slot) = st.cpu_pool.get_mut(p as usize) else {
                return Err((
                    at("pcpus"),
                    format!("pCPU {p} does not exist (the machine has {n})"),
                ));
            };
            if *slot != Some(0) {
                let other = slot.map(|q| st.names[q].clone()).unwrap_or_default();
                return Err((
                    at("pcpus"),
                    format!("pCPU {p} is already in cpupool '{other}' (a pCPU is in one pool)"),
                ));
            }
            *slot = Some(i + 1);
        }
        st.names.push(c.name.clone());
        st.exists.push(!later);
    }
    if st.ncpus(0) == 0 {
        return Err((
            "cpupool".into(),
            format!("{POOL0} keeps no pCPU: it holds dom0 and needs at least one"),
        ));
    }
    for (i, d) in s.domains.iter().enumerate() {
        let Some(p) = st.pool(d.pool.as_deref()) else {
            let name = d.pool.as_deref().unwrap_or_default();
            return Err((
                format!("domain.{i}.pool"),
                if st.names.iter().any(|n| n == name) {
                    format!(
                        "cpupool '{name}' is made during the run (cpupool_create): a domain \
                         is in a pool at boot only if the pool is; cpupool_migrate it there"
                    )
                } else {
                    format!("no cpupool is named '{name}' (pools: {})", st.live())
                },
            ));
        };
        st.dom_pool[i] = p;
        let cpus = st.cpus(p);
        let mut sets: Vec<(&str, &Vec<u32>)> = Vec::new();
        if let Some(v) = &d.pcpus {
            sets.push(("pcpus", v));
        }
        for v in d.vcpu_pcpus.iter().flatten() {
            sets.push(("vcpu_pcpus", v));
        }
        for (f, set) in sets {
            if !set.iter().any(|&c| cpus.contains(CpuId(c))) {
                return Err((
                    format!("domain.{i}.{f}"),
                    format!(
                        "no pCPU of {set:?} is in cpupool '{}' (Xen refuses a hard affinity \
                         outside the domain's pool, -EINVAL)",
                        st.names[p]
                    ),
                ));
            }
        }
    }
    let sched_of = |p: usize| -> &H {
        if p == 0 {
            &s.host
        } else {
            &s.cpupools[p - 1].sched
        }
    };
    let mut order: Vec<usize> = (0..s.events.len()).collect();
    order.sort_by_key(|&i| s.events[i].at_ms);
    let mut paused = vec![false; s.domains.len()];
    let mut created = vec![false; st.names.len()];
    for i in order {
        let e = &s.events[i];
        let at = |f: &str| format!("event.{i}.{f}");
        let dom = || {
            s.domains
                .iter()
                .position(|d| Some(&d.name) == e.domain.as_ref())
        };
        let pool = || -> Result<usize, (String, String)> {
            st.pool(e.pool.as_deref()).ok_or_else(|| {
                (
                    at("pool"),
                    format!(
                        "no cpupool named '{}' exists at {} ms (pools then: {})",
                        e.pool.as_deref().unwrap_or_default(),
                        e.at_ms,
                        st.live()
                    ),
                )
            })
        };
        let need = |f: &str, v: bool| -> Result<(), (String, String)> {
            match v {
                true => Ok(()),
                false => Err((at(f), format!("action '{}' needs `{f}`", e.action.name()))),
            }
        };
        match e.action {
            EventAction::Pause | EventAction::Unpause => {
                if let Some(d) = dom() {
                    paused[d] = e.action == EventAction::Pause;
                    sched_of(st.dom_pool[d])
                        .check_adjust("pause", 0)
                        .map_err(|m| (at("action"), m))?;
                }
            }
            EventAction::SchedHost => {
                let p = pool()?;
                for (f, v) in [("ratelimit_us", e.ratelimit_us), ("tslice_ms", e.tslice_ms)] {
                    if let Some(v) = v {
                        let v =
                            i64::try_from(v).map_err(|_| (at(f), format!("{v} is too large")))?;
                        sched_of(p)
                            .check_adjust(f, v)
                            .map_err(|m| (at(f), format!("cpupool '{}': {m}", st.names[p])))?;
                    }
                }
            }
            EventAction::SchedDomain => {
                if let Some(d) = dom() {
                    attrs_taken(sched_of(st.dom_pool[d]), e, &st.names[st.dom_pool[d]], &at)?;
                }
            }
            EventAction::CpuOffline | EventAction::CpuOnline if e.domain.is_none() => {
                return Err((
                    at("action"),
                    "xen-hptool cpu-offline/cpu-online beside cpupools is not modelled: use \
                     cpupool_cpu_remove / cpupool_cpu_add"
                        .into(),
                ));
            }
            EventAction::CpupoolCpuAdd | EventAction::CpupoolCpuRemove => {
                need("pool", e.pool.is_some())?;
                need("cpu", e.cpu.is_some())?;
                let p = pool()?;
                let c = e.cpu.unwrap_or_default() as usize;
                if c >= n {
                    return Err((at("cpu"), format!("the machine has pCPUs 0..{n}, got {c}")));
                }
                if e.action == EventAction::CpupoolCpuAdd {
                    if let Some(q) = st.cpu_pool[c] {
                        return Err((
                            at("cpu"),
                            format!(
                                "pCPU {c} is in cpupool '{}' at {} ms: only a free pCPU can be \
                                 added (xl cpupool-cpu-remove it first; Xen -EBUSY)",
                                st.names[q], e.at_ms
                            ),
                        ));
                    }
                    sched_of(p)
                        .check_adjust("cpu_online", c as i64)
                        .map_err(|m| (at("pool"), m))?;
                    st.cpu_pool[c] = Some(p);
                } else {
                    if st.cpu_pool[c] != Some(p) {
                        return Err((
                            at("cpu"),
                            format!(
                                "pCPU {c} is not in cpupool '{}' at {} ms (Xen -EADDRNOTAVAIL)",
                                st.names[p], e.at_ms
                            ),
                        ));
                    }
                    if st.ncpus(p) == 1 && st.dom_pool.contains(&p) {
                        return Err((
                            at("cpu"),
                            format!(
                                "pCPU {c} is the last of cpupool '{}', which has domains \
                                 (Xen -EBUSY: migrate them first)",
                                st.names[p]
                            ),
                        ));
                    }
                    if p == 0 && c == 0 {
                        return Err((
                            at("cpu"),
                            format!("pCPU 0 stays in {POOL0} (it runs dom0's boot work)"),
                        ));
                    }
                    sched_of(p)
                        .check_adjust("cpu_offline", c as i64)
                        .map_err(|m| (at("pool"), m))?;
                    st.cpu_pool[c] = None;
                }
            }
            EventAction::CpupoolMigrate => {
                need("domain", e.domain.is_some())?;
                need("pool", e.pool.is_some())?;
                let Some(d) = dom() else {
                    return Err((
                        at("domain"),
                        format!(
                            "no domain is named '{}'",
                            e.domain.as_deref().unwrap_or_default()
                        ),
                    ));
                };
                let p = pool()?;
                if st.ncpus(p) == 0 {
                    return Err((
                        at("pool"),
                        format!(
                            "cpupool '{}' has no pCPU at {} ms (Xen moves a domain only into a \
                             pool with CPUs: cpupool_cpu_add one first)",
                            st.names[p], e.at_ms
                        ),
                    ));
                }
                if st.dom_pool[d] == p {
                    return Err((
                        at("pool"),
                        format!(
                            "domain '{}' is already in cpupool '{}' at {} ms",
                            s.domains[d].name, st.names[p], e.at_ms
                        ),
                    ));
                }
                if paused[d] {
                    return Err((
                        at("domain"),
                        format!(
                            "domain '{}' is paused at {} ms: moving a paused domain is not \
                             modelled",
                            s.domains[d].name, e.at_ms
                        ),
                    ));
                }
                if let Some(c) = e.cap {
                    if c > 100 * s.domains[d].vcpus {
                        return Err((
                            at("cap"),
                            format!(
                                "must be at most 100 × vcpus = {}, got {c}",
                                100 * s.domains[d].vcpus
                            ),
                        ));
                    }
                }
                attrs_taken(sched_of(p), e, &st.names[p], &at)?;
                st.dom_pool[d] = p;
            }
            EventAction::CpupoolCreate => {
                need("pool", e.pool.is_some())?;
                let name = e.pool.as_deref().unwrap_or_default();
                let Some(p) = st.names.iter().position(|n| n == name).filter(|&p| p > 0) else {
                    return Err((
                        at("pool"),
                        format!(
                            "no [[cpupool]] is named '{name}' (cpupool_create makes a pool \
                             declared there, with its scheduler, and no pCPU)"
                        ),
                    ));
                };
                if created[p] {
                    return Err((
                        at("pool"),
                        format!(
                            "cpupool '{name}' is created twice (a second cpupool_create at {} \
                             ms; creating a destroyed pool again is not modelled)",
                            e.at_ms
                        ),
                    ));
                }
                created[p] = true;
                st.exists[p] = true;
            }
            EventAction::CpupoolDestroy => {
                need("pool", e.pool.is_some())?;
                let p = pool()?;
                if p == 0 {
                    return Err((at("pool"), format!("{POOL0} cannot be destroyed")));
                }
                let busy = if st.ncpus(p) > 0 {
                    Some(format!(
                        "has pCPUs {:?}",
                        st.cpus(p).iter().map(|c| c.0).collect::<Vec<_>>()
                    ))
                } else {
                    let d = st.dom_pool.iter().position(|&q| q == p);
                    d.map(|d| format!("has domain '{}'", s.domains[d].name))
                };
                if let Some(why) = busy {
                    return Err((
                        at("pool"),
                        format!(
                            "cpupool '{}' {why} at {} ms (Xen -EBUSY: cpupool_cpu_remove its \
                             pCPUs and cpupool_migrate its domains first)",
                            st.names[p], e.at_ms
                        ),
                    ));
                }
                st.exists[p] = false;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The domain attributes an event gives (`weight`, `cap`, RTDS's three), as the scheduler
/// they reach takes them.
fn attrs_taken<H: ConfigCheck>(
    sched: &H,
    e: &super::EventConfig,
    pool: &str,
    at: &dyn Fn(&str) -> String,
) -> Result<(), (String, String)> {
    let rtds = e.budget_us.is_some() || e.period_us.is_some() || e.extratime.is_some();
    if rtds {
        let given = [
            ("budget_us", e.budget_us.is_some()),
            ("period_us", e.period_us.is_some()),
            ("extratime", e.extratime.is_some()),
        ];
        if let Some((f, _)) = given.iter().find(|g| !g.1) {
            return Err((
                at(f),
                "xl sched-rtds -v all sets `budget_us`, `period_us` and `extratime` together: \
                 give all three"
                    .into(),
            ));
        }
        let (b, p) = (e.budget_us.unwrap_or(0), e.period_us.unwrap_or(0));
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
    }
    let fields = [
        ("weight", e.weight.map(i64::from)),
        ("cap", e.cap.map(i64::from)),
        ("budget_us", e.budget_us.map(|b| b as i64)),
    ];
    for (f, v) in fields {
        if let Some(v) = v {
            if f == "weight" && !(1..=65535).contains(&v) {
                return Err((at(f), format!("must be 1..=65535, got {v}")));
            }
            sched
                .check_adjust(f, v)
                .map_err(|m| (at(f), format!("cpupool '{pool}': {m}")))?;
        }
    }
    Ok(())
}
