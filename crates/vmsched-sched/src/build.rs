//! From a scenario to a ready-to-run simulation: the scheduler registries and the assembly.
//!
//! `HostSchedConfig` and `GuestSchedConfig` are the registries: serde-tagged enums whose tag is
//! the `scheduler` field of `[host]` and `[domain.sched]`. Adding a policy is one variant here,
//! one arm in `make_host`/`make_guest`, and its file.

use serde::{Deserialize, Serialize};
use vmsched_core::report::Results;
use vmsched_core::scenario::{Arch, ConfigCheck, Preempt, ScenarioError, SetValue, TickMode, Vwfi};
use vmsched_core::sim::{LevelOpts, SimBuilder, Simulation};
use vmsched_core::{CpuId, CpuSet, CpuTopo, EntityParams, LevelClock, LinuxAttr, XenAttr};

use crate::guest::cfs::{Cfs, CfsParams};
use crate::host::credit2::{Credit2, Credit2Params};
use crate::host::pinned::{Pinned, PinnedParams};

/// `[host] scheduler = "..."`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "scheduler", rename_all = "lowercase")]
pub enum HostSchedConfig {
    Credit2(Credit2Params),
    Pinned(PinnedParams),
}

/// `[domain.sched] scheduler = "..."`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "scheduler", rename_all = "lowercase")]
pub enum GuestSchedConfig {
    Cfs(CfsParams),
}

impl ConfigCheck for HostSchedConfig {
    fn check(&self) -> Result<(), (String, String)> {
        match self {
            HostSchedConfig::Credit2(p) => p.validate().map_err(split_field),
            HostSchedConfig::Pinned(_) => Ok(()),
        }
    }
}

impl ConfigCheck for GuestSchedConfig {
    fn check(&self) -> Result<(), (String, String)> {
        match self {
            GuestSchedConfig::Cfs(p) => p.validate().map_err(split_field),
        }
    }
}

/// Policy `validate()` messages start with the field name (`ratelimit_us: ...`) when they can.
fn split_field(msg: String) -> (String, String) {
    match msg.split_once(": ") {
        Some((f, m)) if !f.contains(' ') => (f.to_string(), m.to_string()),
        _ => (String::new(), msg),
    }
}

pub type Scenario = vmsched_core::scenario::Scenario<HostSchedConfig, GuestSchedConfig>;

/// Parses and validates a scenario file's text with command-line `--set` overrides.
pub fn load(
    file: &str,
    src: &str,
    overrides: &[(String, String)],
) -> Result<Scenario, ScenarioError> {
    let typed: Vec<(String, SetValue)> = overrides
        .iter()
        .map(|(k, v)| (k.clone(), SetValue::Text(v.clone())))
        .collect();
    load_with(file, src, &typed)
}

/// Parses and validates a scenario file's text with typed overrides.
pub fn load_with(
    file: &str,
    src: &str,
    overrides: &[(String, SetValue)],
) -> Result<Scenario, ScenarioError> {
    let s = Scenario::parse_with(file, src, overrides)?;
    check_layout(&s).map_err(|(field, message)| ScenarioError {
        file: file.to_string(),
        line: None,
        field,
        message,
    })?;
    Ok(s)
}

/// Checks that need the host policy and the whole machine together.
fn check_layout(s: &Scenario) -> Result<(), (String, String)> {
    match &s.host {
        HostSchedConfig::Credit2(_) => Ok(()),
        HostSchedConfig::Pinned(_) => crate::host::pinned::check_layout(s),
    }
}

/// How a host configuration places vCPUs at build time.
#[derive(Clone, Copy, PartialEq, Eq)]
enum VcpuPlacement {
    /// Hard affinity and first CPU from the scenario (Xen 4.20's `sched_init_vcpu`).
    Affinity,
    /// vCPU k of the machine, in domain order, owns pCPU k.
    OwnPcpu,
}

impl HostSchedConfig {
    fn placement(&self) -> VcpuPlacement {
        match self {
            HostSchedConfig::Credit2(_) => VcpuPlacement::Affinity,
            HostSchedConfig::Pinned(_) => VcpuPlacement::OwnPcpu,
        }
    }

    /// The per-vCPU attributes this host takes from a domain's scheduling parameters
    /// (`[[domain]]` `weight`, `cap`): the host configuration owns what they mean.
    fn vcpu_attr(&self, d: &vmsched_core::scenario::DomainConfig<GuestSchedConfig>) -> XenAttr {
        match self {
            HostSchedConfig::Credit2(_) => XenAttr {
                weight: d.weight,
                cap_pct: d.cap,
                ..Default::default()
            },
            HostSchedConfig::Pinned(_) => XenAttr::default(),
        }
    }
}

fn make_host(
    cfg: &HostSchedConfig,
    topo: &[CpuTopo],
    nr_domains: u32,
) -> Box<dyn vmsched_core::Scheduler> {
    match cfg {
        HostSchedConfig::Credit2(p) => Box::new(Credit2::sched(p.clone(), topo, nr_domains)),
        HostSchedConfig::Pinned(_) => Box::new(Pinned::new(topo.len())),
    }
}

fn make_guest(cfg: &GuestSchedConfig, topo: &[CpuTopo]) -> Box<dyn vmsched_core::Scheduler> {
    match cfg {
        GuestSchedConfig::Cfs(p) => Box::new(Cfs::sched(p.clone(), topo)),
    }
}

/// Builds the simulation of a validated scenario.
pub fn build(s: &Scenario) -> Simulation {
    let mut b = SimBuilder::new(s.run.seed);
    let ptopo = s.machine.topology();
    let host = b.add_level(
        "host",
        make_host(&s.host, &ptopo, s.domains.len() as u32),
        LevelOpts {
            clock: LevelClock::default(),
            preempt_full: true,
            ipi_latency: s.machine.ipi_latency_ns,
            ctxsw_cost: s.machine.ctxsw_cost_ns,
            vwfi_native: false,
            wfe_trap: 0,
            tick_periodic: false,
            skew_tick: false,
            tick_phase: None,
        },
    );
    let native = s.machine.vwfi == Vwfi::Native;
    // WFE traps only on Arm (x86 PAUSE-loop exits are not modelled yet).
    let wfe_trap = if s.machine.arch == Arch::Arm64 && !native {
        s.machine.wfe_trap_ns
    } else {
        0
    };
    b.add_pcpus(host, &ptopo);
    let placement = s.host.placement();
    let all_p = CpuSet::first_n(s.machine.pcpus as usize);
    let mut next_pcpu = 0u32;
    let mut prev_cpu: Option<u32> = None;
    for (di, d) in s.domains.iter().enumerate() {
        let gtopo: Vec<CpuTopo> = (0..d.vcpus)
            .map(|v| CpuTopo {
                core: v,
                ..Default::default()
            })
            .collect();
        let guest = b.add_level(
            &d.name,
            make_guest(&d.sched, &gtopo),
            LevelOpts {
                clock: LevelClock {
                    steal_accounting: d.kernel.paravirt_time_accounting,
                },
                preempt_full: d.kernel.preempt == Preempt::Full,
                ipi_latency: d.kernel.ipi_latency_ns,
                ctxsw_cost: d.kernel.ctxsw_cost_ns,
                vwfi_native: native,
                wfe_trap,
                tick_periodic: d.kernel.tick == TickMode::Periodic,
                skew_tick: d.kernel.skew_tick,
                tick_phase: d.kernel.tick_phase_ns,
            },
        );
        for v in 0..d.vcpus {
            let (hard, initial) = if placement == VcpuPlacement::OwnPcpu {
                let c = next_pcpu;
                next_pcpu += 1;
                (CpuSet::single(CpuId(c)), c)
            } else {
                let hard = CpuSet::from_ids(d.hard_affinity(v, s.machine.pcpus));
                // Xen 4.20: vCPU 0 on the first allowed CPU, vCPU k after vCPU k-1's.
                let initial = match prev_cpu {
                    Some(p) if v > 0 => hard.cycle(CpuId(p)).unwrap().0,
                    _ => hard.first().unwrap().0,
                };
                (hard, initial)
            };
            prev_cpu = Some(initial);
            let soft = d
                .soft_pcpus
                .as_ref()
                .map(|p| CpuSet::from_ids(p.iter().copied()))
                .unwrap_or(all_p);
            b.add_vcpu(
                host,
                guest,
                EntityParams {
                    name: format!("{}.v{v}", d.name),
                    group: di as u32,
                    xen: s.host.vcpu_attr(d),
                    linux: LinuxAttr::default(),
                    hard_affinity: hard,
                    soft_affinity: soft,
                    initial_cpu: CpuId(initial),
                },
                gtopo[v as usize],
            );
        }
        let all_v = CpuSet::first_n(d.vcpus as usize);
        for (wi, w) in d.workloads.iter().enumerate() {
            let spec = w.build(d.vcpus);
            let tasks = spec.tasks.clone();
            b.add_workload(guest, spec, |i| {
                let t = &tasks[i];
                let aff = t
                    .affinity
                    .as_ref()
                    .map(|a| CpuSet::from_ids(a.iter().copied()))
                    .unwrap_or(all_v);
                EntityParams {
                    name: t.name.clone(),
                    group: wi as u32,
                    xen: XenAttr::default(),
                    linux: LinuxAttr {
                        policy: t.policy,
                        nice: t.nice,
                        rt_priority: t.rt_prio,
                        ..Default::default()
                    },
                    hard_affinity: aff,
                    soft_affinity: aff,
                    initial_cpu: aff.first().unwrap_or(CpuId(0)),
                }
            });
        }
    }
    // Converted with checked arithmetic; `load` refused a scenario where they overflow.
    let ns = |v: Result<u64, (String, String)>| {
        v.unwrap_or_else(|(f, m)| panic!("invariant: a built scenario validated, but {f}: {m}"))
    };
    b.build(
        ns(s.run.duration_ns()),
        ns(s.run.warmup_ns()),
        ns(s.run.sample_interval_ns()),
    )
}

/// Loads, builds and runs a scenario.
pub fn run(
    file: &str,
    src: &str,
    overrides: &[(String, String)],
) -> Result<Results, ScenarioError> {
    let s = load(file, src, overrides)?;
    let mut sim = build(&s);
    sim.run();
    Ok(sim.results())
}
