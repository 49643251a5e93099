//! Cpupools from a scenario (docs/cpupools.md): which host schedulers can be a pool's, the
//! host level of a machine with `[[cpupool]]` tables (`vmsched_core::cpupool::PoolSched`
//! over one scheduler per pool), the pool a domain's parameters are read by, and the pool
//! events as timeline actions. The rules are Xen 4.20's (`xen/common/sched/cpupool.c`,
//! `core.c`: `sched_move_domain`, `schedule_cpu_add`/`schedule_cpu_rm`); the validation is
//! in `vmsched_core::scenario` (scenario/cpupool.rs).

use vmsched_core::cpupool::{PoolMap, PoolSched};
use vmsched_core::scenario::{EventAction, EventConfig};
use vmsched_core::sim::{PoolAction, TimelineAction};
use vmsched_core::{CpuId, CpuSet, CpuTopo, GlobalParam, LevelId, Scheduler, XenAttr};

use crate::build::{HostSchedConfig, Scenario};
use crate::host::DomainSchedParams;

/// Pool-0's name.
pub const POOL0: &str = "Pool-0";

/// Whether `cfg` can be a cpupool's scheduler. Cpupools came with Xen 4.1: Xen 3.x's BVT
/// and Credit1 3.3 had none; the 4.2.1 schedulers (SEDF, Credit2 4.2.1) would share one
/// machine with 4.20's, which no Xen does (and SEDF has no CPU hot-plug hooks here); the
/// pinned host is not Xen's; a KVM host has no pools.
pub(crate) fn check_cpupool(cfg: &HostSchedConfig) -> Result<(), String> {
    match cfg {
        HostSchedConfig::Credit(p) if !p.version.has_master_timer() => {
            Err("credit as in Xen 3.3 cannot run in a cpupool (cpupools came with Xen 4.1)".into())
        }
        HostSchedConfig::Credit2(p) if p.version.is_4_2() => Err(
            "credit2 as in Xen 4.2.1 in a cpupool is not modelled (pools run Xen 4.20's \
             schedulers)"
                .into(),
        ),
        HostSchedConfig::Credit(_)
        | HostSchedConfig::Credit2(_)
        | HostSchedConfig::Rtds(_)
        | HostSchedConfig::Null(_)
        | HostSchedConfig::Arinc653(_) => Ok(()),
        HostSchedConfig::Bvt(_) => Err(
            "bvt (historic, Xen 3.0) cannot run in a cpupool (cpupools came with Xen 4.1)".into(),
        ),
        HostSchedConfig::Sedf(_) => Err(
            "sedf (historic, Xen 4.2.1) in a cpupool is not modelled (pools run Xen 4.20's \
             schedulers)"
                .into(),
        ),
        HostSchedConfig::Pinned(_) => Err("the pinned host has no cpupools".into()),
        HostSchedConfig::Linux(_) => Err("a KVM host has no cpupools".into()),
    }
}

/// What a pool's scheduler configuration names of the machine, as `build::layout::check_layout`
/// checks `[host]`'s: an ARINC653 table's slots name domains and their vCPUs. (Credit1's
/// boost domains are Xen 3.3's, which no pool runs.)
pub(crate) fn check_layouts(s: &Scenario) -> Result<(), (String, String)> {
    for (i, c) in s.cpupools.iter().enumerate() {
        let HostSchedConfig::Arinc653(p) = &c.sched else {
            continue;
        };
        for (k, slot) in p.schedule.iter().flatten().enumerate() {
            let at = |f: &str| format!("cpupool.{i}.sched.schedule.{k}.{f}");
            let Some(d) = s.domains.iter().find(|d| d.name == slot.domain) else {
                return Err((
                    at("domain"),
                    format!("no [[domain]] is named {:?}", slot.domain),
                ));
            };
            if slot.vcpu >= d.vcpus {
                return Err((
                    at("vcpu"),
                    format!(
                        "domain {:?} has {} vCPUs (ids 0..{})",
                        d.name, d.vcpus, d.vcpus
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The pool number of domain `di` (0: Pool-0, then the `[[cpupool]]` tables in order).
pub(crate) fn pool_of(s: &Scenario, di: usize) -> u32 {
    pool_named(s, s.domains[di].pool.as_deref())
}

fn pool_named(s: &Scenario, name: Option<&str>) -> u32 {
    match name {
        None => 0,
        Some(n) if n == POOL0 => 0,
        Some(n) => {
            1 + s
                .cpupools
                .iter()
                .position(|c| c.name == n)
                .expect("invariant: a validated pool name") as u32
        }
    }
}

/// The scheduler configuration of pool `p`.
pub(crate) fn pool_config(s: &Scenario, p: u32) -> &HostSchedConfig {
    match p {
        0 => &s.host,
        _ => &s.cpupools[p as usize - 1].sched,
    }
}

/// The scheduler configuration that reads domain `di`'s parameters: its pool's (`[host]`
/// without pools).
pub(crate) fn host_of(s: &Scenario, di: usize) -> &HostSchedConfig {
    pool_config(s, pool_of(s, di))
}

/// The pCPUs of each pool at boot: Pool-0 has those no `[[cpupool]]` names.
fn boot_cpu_pool(s: &Scenario) -> Vec<u32> {
    let mut cpu_pool = vec![0u32; s.machine.pcpus as usize];
    for (i, c) in s.cpupools.iter().enumerate() {
        for &p in &c.pcpus {
            cpu_pool[p as usize] = i as u32 + 1;
        }
    }
    cpu_pool
}

/// The pCPUs domain `di`'s vCPUs are first placed on: its pool's at boot (all without
/// pools).
pub(crate) fn boot_cpus(s: &Scenario, di: usize) -> CpuSet {
    let p = pool_of(s, di);
    let mut set = CpuSet::empty();
    for (c, &q) in boot_cpu_pool(s).iter().enumerate() {
        if q == p {
            set.insert(CpuId(c as u32));
        }
    }
    set
}

/// The host level's scheduler: `make` of `[host]` without pools; with pools, a
/// [`PoolSched`] over `make` of each pool's configuration, each built for every pCPU.
pub(crate) fn make_host_level(
    s: &Scenario,
    topo: &[CpuTopo],
    domain_names: &[&str],
    make: impl Fn(&HostSchedConfig, &[CpuTopo], &[&str]) -> Box<dyn Scheduler>,
) -> Box<dyn Scheduler> {
    if s.cpupools.is_empty() {
        return make(&s.host, topo, domain_names);
    }
    let mut scheds = vec![make(&s.host, topo, domain_names)];
    let mut names = vec![POOL0.to_string()];
    for c in &s.cpupools {
        scheds.push(make(&c.sched, topo, domain_names));
        names.push(c.name.clone());
    }
    let map = PoolMap {
        names,
        cpu_pool: boot_cpu_pool(s),
        dom_pool: (0..s.domains.len()).map(|d| pool_of(s, d)).collect(),
    };
    Box::new(PoolSched::new(scheds, map))
}

/// The timeline actions of a cpupool event, or of a `sched_host` event on a machine with
/// pools (`-t` before `-r`, as xl passes both at once); None for any other event.
pub(crate) fn event_actions(
    s: &Scenario,
    e: &EventConfig,
    host: LevelId,
) -> Option<Vec<TimelineAction>> {
    if s.cpupools.is_empty() {
        return None;
    }
    let pool = pool_named(s, e.pool.as_deref());
    let ops = match e.action {
        EventAction::SchedHost => {
            let t = e.tslice_ms.map(GlobalParam::TsliceMs);
            let r = e.ratelimit_us.map(GlobalParam::RatelimitUs);
            t.into_iter()
                .chain(r)
                .map(|param| PoolAction::Global { pool, param })
                .collect()
        }
        EventAction::CpupoolCpuRemove => vec![PoolAction::CpuRemove {
            cpu: CpuId(e.cpu.expect("invariant: validated")),
        }],
        EventAction::CpupoolCpuAdd => vec![PoolAction::CpuAdd {
            cpu: CpuId(e.cpu.expect("invariant: validated")),
            pool,
        }],
        EventAction::CpupoolCreate => vec![PoolAction::Create { pool }],
        EventAction::CpupoolDestroy => vec![PoolAction::Destroy { pool }],
        EventAction::CpupoolMigrate => {
            let d = s
                .domains
                .iter()
                .position(|d| Some(&d.name) == e.domain.as_ref())
                .expect("invariant: a validated event names a domain");
            vec![PoolAction::Migrate {
                group: d as u32,
                pool,
                xen: migrate_attr(pool_config(s, pool), e),
            }]
        }
        _ => return None,
    };
    Some(
        ops.into_iter()
            .map(|op| TimelineAction::Cpupool { level: host, op })
            .collect(),
    )
}

/// A migrated domain's vCPU attributes: the new scheduler's defaults (Xen
/// `sched_alloc_udata`: weight 256, no cap, RTDS's default budget and period) unless the
/// event gives them.
fn migrate_attr(cfg: &HostSchedConfig, e: &EventConfig) -> XenAttr {
    let d = DomainSchedParams {
        weight: e.weight.unwrap_or(XenAttr::default().weight),
        cap: e.cap.unwrap_or(0),
        budget_us: e.budget_us,
        period_us: e.period_us,
        extratime: e.extratime,
    };
    cfg.config().vcpu_attr(&d)
}
