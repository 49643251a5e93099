//! From a scenario to a ready-to-run simulation: the scheduler registries and the assembly.
//!
//! `HostSchedConfig` and `GuestSchedConfig` are the registries: serde-tagged enums whose tag is
//! the `scheduler` field of `[host]` and `[domain.sched]` (build/host.rs, build/guest.rs).
//! Adding a policy is one variant there, one arm in `make_host`/`make_guest`, and its file.
//! build/layout.rs holds the checks that need the host policy and the whole machine; this file
//! loads a scenario (`load`, `load_with`) and assembles the simulation (`build`, `run`).

mod guest;
mod host;
mod layout;

pub use guest::GuestSchedConfig;
pub use host::HostSchedConfig;

use guest::make_guest;
use host::{make_host, VcpuPlacement};
use layout::{check_layout, pv_model};

use vmsched_core::hv::ExitModel;
use vmsched_core::pv::PvModel;
use vmsched_core::report::Results;
use vmsched_core::scenario::{
    Arch, EventAction, GuestType, Hypervisor, Preempt, ScenarioError, SetValue, TickMode,
};
use vmsched_core::sim::{
    DeviceModel, FlowKind, IoSpec, LevelOpts, NetFlow, SimBuilder, Simulation, TimelineAction,
};
use vmsched_core::workload::WorkloadConfig;
use vmsched_core::{
    CpuId, CpuSet, CpuTopo, EntityParams, GlobalParam, LevelClock, LevelId, LinuxAttr, XenAttr,
};

use crate::host::kvm::KvmHostParams;

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
    let names_ratelimit = overrides.iter().any(|(k, _)| k == "host.ratelimit_us")
        || toml::from_str::<toml::Table>(src)
            .ok()
            .and_then(|t| t.get("host")?.get("ratelimit_us").cloned())
            .is_some();
    check_layout(&s, names_ratelimit).map_err(|(field, message)| ScenarioError {
        file: file.to_string(),
        line: None,
        field,
        message,
    })?;
    Ok(s)
}

/// The exit model of a guest of scenario `s` (crate::hv presets; validation has refused the
/// guest types that do not exist on it). Under the Linux KVM host, KVM's module parameters
/// (`[host.kvm]`) with the defaults of the host kernel's version; else 6.12's. `halt_poll_ns`:
/// the domain's `KVM_CAP_HALT_POLL` cap, which replaces the module parameter for its vCPUs.
fn exit_model(s: &Scenario, guest_type: Option<GuestType>, halt_poll_ns: Option<u64>) -> ExitModel {
    let m = &s.machine;
    let poll = halt_poll_ns.or(m.halt_poll_ns);
    let guest = m
        .guest_type(guest_type)
        .expect("invariant: guest_type validated");
    let (knobs, trap_ns) = match &s.host {
        HostSchedConfig::Linux(p) => (
            p.kvm.knobs(m.arch, p.kvm_version(), poll),
            if p.kvm.pause_in_guest(m.arch) {
                0
            } else {
                m.wfe_trap_ns
            },
        ),
        _ => (
            crate::host::kvm::KvmModuleParams::default().knobs(
                m.arch,
                crate::host::kvm::KvmVersion::V6_12,
                poll,
            ),
            m.wfe_trap_ns,
        ),
    };
    ExitModel::for_guest(
        m.hypervisor,
        m.arch,
        m.vwfi,
        guest,
        trap_ns,
        Some(knobs),
        m.kick_ns,
        m.hypercall_ns,
    )
}

/// Builds the simulation of a validated scenario.
pub fn build(s: &Scenario) -> Simulation {
    let mut b = SimBuilder::new(s.run.seed);
    b.vary(s.run.variation());
    let ptopo = s.machine.topology();
    let host = b.add_level(
        "host",
        crate::cpupool::make_host_level(
            s,
            &ptopo,
            &s.domains
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>(),
            make_host,
        ),
        LevelOpts {
            clock: LevelClock::default(),
            preempt_full: true,
            ipi_latency: s.machine.ipi_latency_ns,
            ctxsw_cost: s.machine.ctxsw_cost_ns,
            vcpu_refill: s.machine.vcpu_refill_ns,
            timer_expiry: s.machine.timer_expiry_ns,
            exit: ExitModel::default(),
            tick_periodic: false,
            skew_tick: false,
            tick_phase: None,
            pv: PvModel::default(),
        },
    );
    b.add_pcpus(host, &ptopo);
    let placement = s.host.placement();
    let all_p = CpuSet::first_n(s.machine.pcpus as usize);
    let mut next_pcpu = 0u32;
    let mut prev_cpu: Option<u32> = None;
    let mut flows: Vec<NetFlow> = Vec::new();
    let mut dms: Vec<DeviceModel> = Vec::new();
    for (di, d) in s.domains.iter().enumerate() {
        let gtopo: Vec<CpuTopo> = (0..d.vcpus)
            .map(|v| CpuTopo {
                core: v,
                ..Default::default()
            })
            .collect();
        let pv = pv_model(s, d).expect("invariant: [domain.pv] validated");
        let mut guest_sched = d.sched.clone();
        if s.machine.hypervisor == Hypervisor::Kvm {
            // Under KVM the PV flag is what the guest scheduler reads (`[domain.pv]`).
            guest_sched.set_reads_preempted(pv.vcpu_is_preempted);
        }
        let guest = b.add_level(
            &d.name,
            make_guest(&guest_sched, &gtopo),
            LevelOpts {
                clock: LevelClock {
                    steal_accounting: d.kernel.paravirt_time_accounting && s.host.steal_clock(),
                    ..Default::default()
                },
                preempt_full: d.kernel.preempt == Preempt::Full,
                ipi_latency: d.kernel.ipi_latency_ns,
                ctxsw_cost: d.kernel.ctxsw_cost_ns,
                vcpu_refill: 0,
                timer_expiry: 0,
                exit: match pv.haltpoll {
                    // cpuidle-haltpoll turns host polling off (MSR_KVM_POLL_CONTROL).
                    Some(_) => ExitModel {
                        halt: vmsched_core::hv::Halt::Block,
                        ..exit_model(s, d.guest_type, d.halt_poll_ns)
                    },
                    None => exit_model(s, d.guest_type, d.halt_poll_ns),
                },
                tick_periodic: d.kernel.tick == TickMode::Periodic,
                skew_tick: d.kernel.skew_tick,
                tick_phase: d.kernel.tick_phase_ns,
                pv,
            },
        );
        for v in 0..d.vcpus {
            let (hard, initial) = if placement == VcpuPlacement::OwnPcpu {
                let c = next_pcpu;
                next_pcpu += 1;
                (CpuSet::single(CpuId(c)), c)
            } else {
                let hard = CpuSet::from_ids(d.hard_affinity(v, s.machine.pcpus));
                // Xen 4.20: vCPU 0 on the first allowed CPU, vCPU k after vCPU k-1's (of
                // its cpupool's: all of them without pools).
                let allowed = hard.and(&crate::cpupool::boot_cpus(s, di));
                let initial = match prev_cpu {
                    Some(p) if v > 0 => allowed.cycle(CpuId(p)).unwrap().0,
                    _ => allowed.first().unwrap().0,
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
                    xen: crate::cpupool::host_of(s, di).vcpu_attr(d),
                    linux: s.host.vcpu_linux_attr(d),
                    hard_affinity: hard,
                    soft_affinity: soft,
                    initial_cpu: CpuId(initial),
                },
                gtopo[v as usize],
            );
        }
        if let Some(spec) = d.chaos.as_ref().and_then(|c| c.spec(&d.name)) {
            // Chaos mode (docs/chaos.md); rate 0 adds nothing, not even a slot.
            b.add_chaos(guest, &spec);
        }
        if vmsched_core::scenario::io::uses_ioreq(d) {
            dms.push(DeviceModel {
                guest,
                before_flow: flows.len(),
                cost: d.device_model.cost_ns(),
                vcpu: d.device_model.vcpu,
            });
        }
        let all_v = CpuSet::first_n(d.vcpus as usize);
        for (wi, w) in d.workloads.iter().enumerate() {
            if matches!(w, WorkloadConfig::Parallel(_)) {
                // Its ranks run in the domains of its placement: added below, once they exist.
                continue;
            }
            let valid = "invariant: a built scenario validated";
            let net = match w {
                WorkloadConfig::Ping(p) => Some((FlowKind::Ping(p.times().expect(valid)), p.vcpu)),
                WorkloadConfig::Stream(p) => {
                    Some((FlowKind::Stream(p.params().expect(valid)), p.vcpu))
                }
                _ => None,
            };
            if let Some((kind, mut vcpu)) = net {
                // Xen 3.3, HVM guest: the callback reaches vCPU 0 only, so netfront's port is
                // bound there whatever the workload asks.
                let hvm_x86 = s.machine.hypervisor == Hypervisor::Xen
                    && s.machine.arch == Arch::X86
                    && s.machine.guest_type(d.guest_type) == Ok(GuestType::Hvm);
                if vcpu != 0 && hvm_x86 && s.host.hvm_callback_vcpu0_only() {
                    b.note(format!(
                        "{}: workload '{}': netfront's event channel is bound to vCPU 0, not \
                         vCPU {vcpu}: Xen 3.3 delivers an HVM guest's event-channel callback \
                         (GSI / PCI INTx) to vCPU 0 only",
                        d.name,
                        w.name()
                    ));
                    vcpu = 0;
                }
                flows.push(NetFlow {
                    guest,
                    workload: b.nr_workloads(),
                    kind,
                    vcpu,
                });
            }
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
                        times: t.times,
                    },
                    hard_affinity: aff,
                    soft_affinity: aff,
                    initial_cpu: aff.first().unwrap_or(CpuId(0)),
                }
            });
        }
        if let (HostSchedConfig::Linux(_), true) = (&s.host, d.coord.enable) {
            let (spec, flag) = crate::host::kvm::coord_spec(d);
            b.add_coord(guest, spec, flag);
        }
    }
    if let HostSchedConfig::Linux(p) = &s.host {
        add_host_processes(&mut b, host, p, s.domains.len() as u32, s.machine.pcpus);
        if p.timer_kworker {
            // An unbound nice-0 kworker (ERRATA L9), after the host processes.
            let all = CpuSet::first_n(s.machine.pcpus as usize);
            let params = EntityParams {
                name: "kworker/kvm-arch-timer".into(),
                group: (s.domains.len() + p.processes.len()) as u32,
                xen: XenAttr::default(),
                linux: LinuxAttr::default(),
                hard_affinity: all,
                soft_affinity: all,
                initial_cpu: CpuId(0),
            };
            b.add_timer_worker(host, params, p.timer_kworker_ns);
        }
    }
    // Converted with checked arithmetic; `load` refused a scenario where they overflow.
    let ns = |v: Result<u64, (String, String)>| {
        v.unwrap_or_else(|(f, m)| panic!("invariant: a built scenario validated, but {f}: {m}"))
    };
    let vifs = add_jobs(&mut b, s);
    add_io(&mut b, s, flows, dms, vifs);
    add_events(&mut b, s, host);
    b.xenmon_window(ns(s.run.xenmon_window_ns()));
    b.build(
        ns(s.run.duration_ns()),
        ns(s.run.warmup_ns()),
        ns(s.run.sample_interval_ns()),
    )
}

/// A KVM host's `[[host.process]]` workloads, as tasks of the host level: process `i` is group
/// `nr_domains + i` there (after the domains' vCPUs), its affinity names pCPUs.
fn add_host_processes(
    b: &mut SimBuilder,
    host: LevelId,
    p: &KvmHostParams,
    nr_domains: u32,
    pcpus: u32,
) {
    let all_p = CpuSet::first_n(pcpus as usize);
    for (wi, w) in p.processes.iter().enumerate() {
        let spec = w.build(pcpus);
        let tasks = spec.tasks.clone();
        b.add_workload(host, spec, |i| {
            let t = &tasks[i];
            let aff = t
                .affinity
                .as_ref()
                .map(|a| CpuSet::from_ids(a.iter().copied()))
                .unwrap_or(all_p);
            EntityParams {
                name: t.name.clone(),
                group: nr_domains + wi as u32,
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

/// The I/O path (docs/io.md), if a domain runs an I/O workload: the driver domain (the first
/// with `driver = true`; validation refused an I/O workload without one) and the pinged guests
/// get event channels; their backends are bound in the driver domain in declaration order,
/// which is creation order (domains created during the run are declared last, in order).
/// HVM guests with emulated I/O get ioreq ports in the driver domain (ERRATA X9).
fn add_io(
    b: &mut SimBuilder,
    s: &Scenario,
    flows: Vec<NetFlow>,
    device_models: Vec<DeviceModel>,
    vifs: Vec<LevelId>,
) {
    if flows.is_empty() && device_models.is_empty() && vifs.is_empty() {
        return;
    }
    let di = s
        .domains
        .iter()
        .position(|d| d.driver)
        .expect("invariant: validation found a driver domain");
    let level = |i: usize| LevelId(i as u32 + 1);
    let ev = |i: usize| {
        let k = &s.domains[i].kernel;
        (level(i), k.evtchn_order, k.evtchn_word_bits)
    };
    let mut evtchn = vec![ev(di)];
    for g in flows.iter().map(|p| p.guest).chain(vifs.iter().copied()) {
        let i = g.0 as usize - 1;
        if !evtchn.iter().any(|e| e.0 == g) {
            evtchn.push(ev(i));
        }
    }
    b.add_io(IoSpec {
        driver: level(di),
        netback: s.domains[di].netback.clone(),
        evtchn,
        flows,
        device_models,
        vifs,
    });
}

/// Parallel jobs (workload/parallel.rs; docs/parallel.md): each job's parts, one workload per
/// domain of its placement (in its order, a group of that domain after its own workloads and
/// the parts placed there before), linked as one job. Returns the guests that need a vif for
/// jobs across domains, in creation (declaration) order.
fn add_jobs(b: &mut SimBuilder, s: &Scenario) -> Vec<LevelId> {
    let mut vif_doms: Vec<usize> = Vec::new();
    let mut extra = vec![0u32; s.domains.len()];
    for d in &s.domains {
        for w in &d.workloads {
            let WorkloadConfig::Parallel(job) = w else {
                continue;
            };
            let idx: Vec<usize> = job
                .placement
                .iter()
                .map(|p| {
                    s.domains
                        .iter()
                        .position(|o| o.name == p.domain)
                        .expect("invariant: a validated placement names a domain")
                })
                .collect();
            let vcpus: Vec<u32> = idx.iter().map(|&i| s.domains[i].vcpus).collect();
            let first = b.nr_workloads();
            let parts = job.build_parts(&vcpus);
            let nparts = parts.len();
            for (spec, &i) in parts.into_iter().zip(&idx) {
                let level = LevelId(i as u32 + 1);
                let group = s.domains[i].workloads.len() as u32 + extra[i];
                extra[i] += 1;
                let all_v = CpuSet::first_n(s.domains[i].vcpus as usize);
                let tasks = spec.tasks.clone();
                b.add_workload(level, spec, |k| {
                    let aff = tasks[k]
                        .affinity
                        .as_ref()
                        .map(|a| CpuSet::from_ids(a.iter().copied()))
                        .unwrap_or(all_v);
                    EntityParams {
                        name: tasks[k].name.clone(),
                        group,
                        xen: XenAttr::default(),
                        linux: LinuxAttr {
                            nice: tasks[k].nice,
                            ..Default::default()
                        },
                        hard_affinity: aff,
                        soft_affinity: aff,
                        initial_cpu: aff.first().unwrap_or(CpuId(0)),
                    }
                });
                if nparts > 1 && !vif_doms.contains(&i) {
                    vif_doms.push(i);
                }
            }
            b.add_job(first, nparts);
        }
    }
    vif_doms.sort_unstable();
    vif_doms
        .into_iter()
        .map(|i| LevelId(i as u32 + 1))
        .collect()
}

/// The `[[event]]` timeline, with names resolved: domain `i` is guest level `i + 1` and group
/// `i` at the host; a workload is a group of its guest level.
fn add_events(b: &mut SimBuilder, s: &Scenario, host: LevelId) {
    let dom = |n: &Option<String>| {
        s.domains
            .iter()
            .position(|d| Some(&d.name) == n.as_ref())
            .expect("invariant: a validated event names a domain")
    };
    let ms = |f: &str, v: u64| {
        vmsched_core::time::time_ns(f, v, vmsched_core::NS_PER_MS)
            .expect("invariant: a validated domain time fits")
    };
    for (di, d) in s.domains.iter().enumerate() {
        if let Some(c) = d.create_at_ms {
            let action = TimelineAction::CreateDomain {
                level: host,
                group: di as u32,
                guest: LevelId(di as u32 + 1),
            };
            b.add_event(ms("create_at_ms", c), action);
        }
        if let Some(x) = d.destroy_at_ms {
            let action = TimelineAction::DestroyDomain {
                level: host,
                group: di as u32,
                guest: LevelId(di as u32 + 1),
            };
            b.add_event(ms("destroy_at_ms", x), action);
        }
    }
    let mut order: Vec<usize> = (0..s.events.len()).collect();
    order.sort_by_key(|&i| s.events[i].at_ms);
    for i in order {
        let e = &s.events[i];
        let at = e
            .at_ns("at_ms")
            .expect("invariant: a validated event time fits");
        // Cpupool events, and `sched_host` on a machine with pools (docs/cpupools.md).
        if let Some(actions) = crate::cpupool::event_actions(s, e, host) {
            for a in actions {
                b.add_event(at, a);
            }
            continue;
        }
        let action = match e.action {
            EventAction::SchedDomain => TimelineAction::DomainAttr {
                level: host,
                group: dom(&e.domain) as u32,
                weight: e.weight,
                cap_pct: e.cap,
                rtds: match (e.budget_us, e.period_us, e.extratime) {
                    (Some(b), Some(p), Some(x)) => Some((b, p, x)),
                    _ => None,
                },
            },
            EventAction::SchedHost => {
                // One action per parameter given (`-t` before `-r`, as xl passes both at once).
                if let Some(t) = e.tslice_ms {
                    let param = GlobalParam::TsliceMs(t);
                    b.add_event(at, TimelineAction::Global { level: host, param });
                }
                let Some(r) = e.ratelimit_us else { continue };
                let param = GlobalParam::RatelimitUs(r);
                TimelineAction::Global { level: host, param }
            }
            EventAction::SchedTask if e.domain.is_none() => {
                // A host process: group `nr_domains + i` of the host level.
                let HostSchedConfig::Linux(p) = &s.host else {
                    unreachable!("invariant: only a KVM host has processes to change")
                };
                let wl = p
                    .processes
                    .iter()
                    .position(|w| Some(w.name()) == e.workload.as_deref())
                    .expect("invariant: a validated event names a host process");
                let group = (s.domains.len() + wl) as u32;
                let task = e.task.as_ref().map(|t| {
                    b.entity_named(host, group, t)
                        .expect("invariant: a validated event names a task")
                });
                TimelineAction::TaskAttr {
                    level: host,
                    group,
                    task,
                    nice: e.nice,
                    policy: e.policy,
                    rt_priority: e.rt_priority,
                }
            }
            EventAction::SchedVcpu => {
                // The vCPU threads: group `d` of the host level, thread `k` named `<domain>.vk`.
                let d = dom(&e.domain);
                let task = e.cpu.map(|k| {
                    let name = format!("{}.v{k}", s.domains[d].name);
                    b.entity_named(host, d as u32, &name)
                        .expect("invariant: a validated event names a vCPU")
                });
                TimelineAction::TaskAttr {
                    level: host,
                    group: d as u32,
                    task,
                    nice: e.nice,
                    policy: e.policy,
                    rt_priority: e.rt_priority,
                }
            }
            EventAction::SchedTask => {
                let d = dom(&e.domain);
                let level = LevelId(d as u32 + 1);
                let wl = s.domains[d]
                    .workloads
                    .iter()
                    .position(|w| Some(w.name()) == e.workload.as_deref())
                    .expect("invariant: a validated event names a workload")
                    as u32;
                let task = e.task.as_ref().map(|t| {
                    b.entity_named(level, wl, t)
                        .expect("invariant: a validated event names a task")
                });
                TimelineAction::TaskAttr {
                    level,
                    group: wl,
                    task,
                    nice: e.nice,
                    policy: e.policy,
                    rt_priority: e.rt_priority,
                }
            }
            EventAction::Pause | EventAction::Unpause => TimelineAction::Pause {
                level: host,
                group: dom(&e.domain) as u32,
                paused: e.action == EventAction::Pause,
            },
            EventAction::CpuOffline | EventAction::CpuOnline => TimelineAction::CpuHotplug {
                // No domain: a pCPU of the host; else a vCPU of the domain's guest.
                level: match e.domain {
                    None => host,
                    Some(_) => LevelId(dom(&e.domain) as u32 + 1),
                },
                cpu: CpuId(
                    e.cpu
                        .expect("invariant: a validated cpu event names its CPU"),
                ),
                online: e.action == EventAction::CpuOnline,
            },
            EventAction::CpupoolCpuAdd
            | EventAction::CpupoolCpuRemove
            | EventAction::CpupoolMigrate
            | EventAction::CpupoolCreate
            | EventAction::CpupoolDestroy => unreachable!("cpupool events are handled above"),
        };
        b.add_event(at, action);
    }
}

/// Loads, builds and runs a scenario; refuses one whose memory estimate exceeds the limit in
/// force (`run.memory_limit_mb`, else a share of the available memory: docs/limits.md).
pub fn run(
    file: &str,
    src: &str,
    overrides: &[(String, String)],
) -> Result<Results, ScenarioError> {
    let s = load(file, src, overrides)?;
    let limit = vmsched_core::budget::Limit::resolve(None, s.run.memory_limit_mb);
    vmsched_core::budget::Estimate::of(&s, None)
        .check(&limit)
        .map_err(|(field, message)| ScenarioError {
            file: file.to_string(),
            line: None,
            field,
            message,
        })?;
    let mut sim = build(&s);
    sim.run();
    Ok(sim.results())
}
