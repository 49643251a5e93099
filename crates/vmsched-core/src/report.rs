//! Results of a run: per entity at every level (xenmon's figures) and per workload (its
//! benchmark's figure), serialisable to JSON. The Python layer turns them into tables.

use serde::Serialize;

use crate::metrics::HistSummary;
use crate::sched::RunState;
use crate::sim::{Series, Simulation};
use crate::time::Nanos;
use crate::workload::{Figure, WorkloadKind};

#[derive(Clone, Debug, Serialize)]
pub struct EntityResult {
    pub level: String,
    pub name: String,
    /// "vcpu" or "task".
    pub kind: &'static str,
    pub group: u32,
    pub running_ns: Nanos,
    /// CPU time really executed: for a task, only while its vCPU ran it (running_ns also counts
    /// the time its vCPU was descheduled, as the guest sees it).
    pub executed_ns: Nanos,
    pub runnable_ns: Nanos,
    pub blocked_ns: Nanos,
    pub offline_ns: Nanos,
    /// Running time over the measured window.
    pub cpu_share: f64,
    pub runs: u64,
    pub preemptions: u64,
    pub migrations: u64,
    pub wait_count: u64,
    pub wait_mean_ns: f64,
    pub wait_p99_ns: u64,
    pub wait_max_ns: u64,
    pub final_state: RunState,
    /// If runnable at the end: how long it has been waiting (a lost wake-up shows here).
    pub open_wait_ns: Nanos,
}

#[derive(Clone, Debug, Serialize)]
pub struct WorkloadResult {
    pub level: String,
    pub name: String,
    pub kind: WorkloadKind,
    pub figure: Figure,
    pub counters: Vec<(String, u64)>,
    pub histograms: Vec<(String, HistSummary)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Results {
    pub duration_ns: Nanos,
    pub warmup_ns: Nanos,
    pub measured_ns: Nanos,
    pub events: u64,
    pub entities: Vec<EntityResult>,
    pub workloads: Vec<WorkloadResult>,
    pub series: Vec<Series>,
}

pub(crate) fn collect(sim: &Simulation) -> Results {
    let measured = sim.now().saturating_sub(sim.warmup()).max(1);
    let entities = sim
        .ent_rows()
        .map(|r| {
            let t = &r.stats.time;
            let w = r.stats.wait.summary();
            EntityResult {
                level: r.level.to_string(),
                name: r.name.to_string(),
                kind: if r.is_vcpu { "vcpu" } else { "task" },
                group: r.group,
                running_ns: t[RunState::Running as usize],
                executed_ns: r.executed,
                runnable_ns: t[RunState::Runnable as usize],
                blocked_ns: t[RunState::Blocked as usize],
                offline_ns: t[RunState::Offline as usize],
                cpu_share: t[RunState::Running as usize] as f64 / measured as f64,
                runs: r.stats.runs,
                preemptions: r.stats.preemptions,
                migrations: r.stats.migrations,
                wait_count: w.count,
                wait_mean_ns: w.mean_ns,
                wait_p99_ns: w.p99_ns,
                wait_max_ns: w.max_ns,
                final_state: r.state,
                open_wait_ns: r.open_wait,
            }
        })
        .collect();
    let secs = measured as f64 / 1e9;
    let workloads = sim
        .wl_rows()
        .map(|w| {
            let hs: Vec<HistSummary> = w.hists.iter().map(|h| h.summary()).collect();
            let means: Vec<f64> = hs.iter().map(|h| h.avg_us).collect();
            WorkloadResult {
                level: w.level.to_string(),
                name: w.spec.name.clone(),
                kind: w.spec.kind,
                figure: w.spec.kind.figure(w.counters, &means, secs, w.executed_ns),
                counters: w
                    .spec
                    .counters
                    .iter()
                    .cloned()
                    .zip(w.counters.iter().copied())
                    .chain(w.spec.kind.derived(w.counters))
                    .collect(),
                histograms: w.spec.hists.iter().cloned().zip(hs).collect(),
            }
        })
        .collect();
    Results {
        duration_ns: sim.now(),
        warmup_ns: sim.warmup(),
        measured_ns: measured,
        events: sim.events(),
        entities,
        workloads,
        series: sim.series().to_vec(),
    }
}
