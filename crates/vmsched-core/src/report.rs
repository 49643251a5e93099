//! Results of a run: per entity at every level (xenmon's figures) and per workload (its
//! benchmark's figure), serialisable to JSON, and exported as columnar tables ([`Results::tables`])
//! that the Python binding hands over as Arrow record batches, so nothing is flattened twice.

use serde::Serialize;

use crate::metrics::HistSummary;
use crate::sched::RunState;
use crate::sim::{ChaosResult, Series, Simulation, XenmonWindowRow};
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
    /// The cpupool its domain is in at the end of the run (docs/cpupools.md); only on a
    /// machine with `[[cpupool]]` tables.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
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

/// One event-channel port of the I/O path (docs/io.md): who it belongs to, what serves it and
/// how long it waited to be served (the starvation a lowest-first scan causes).
#[derive(Clone, Debug, Serialize)]
pub struct PortResult {
    /// The domain (guest level) the port is in.
    pub level: String,
    pub port: u32,
    /// The vCPU it is bound to.
    pub vcpu: u32,
    /// `nic`, `netback:<domain>/<workload>`, `netfront:<workload>` or `reserved`.
    pub handler: String,
    /// Times its handler took it, and the longest it stayed pending before that.
    pub served: u64,
    pub max_wait_ns: u64,
    /// How long it has been pending at the end (0 if it is not).
    pub pending_ns: u64,
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
    /// Event-channel ports, when the scenario has I/O.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortResult>,
    /// xenmon's figures (docs/xenmon.md): per domain and vCPU, over the measured window and
    /// over each `run.xenmon_window_ms` window. In the `xenmon` table, not in the JSON.
    #[serde(skip)]
    pub xenmon: Vec<XenmonRow>,
    /// Coordinated scheduling's hypercalls per coordinated domain (docs/kvm.md), over the
    /// measured window.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub coord: Vec<CoordResult>,
    /// Chaos mode's stalls per stalled vCPU (docs/chaos.md), over the measured window.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chaos: Vec<ChaosResult>,
}

/// One coordinated domain's hypercalls (sim/coord.rs): boosts asked, unboosts told, and boosts
/// the host ended at its bound.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct CoordResult {
    pub domain: String,
    pub boost_hypercalls: u64,
    pub unboost_hypercalls: u64,
    pub bound_expiries: u64,
}

/// One row of xenmon's figures: a vCPU or a domain (the sum of its vCPUs), over the measured
/// window (`window` None) or one fixed window.
#[derive(Clone, Debug, PartialEq)]
pub struct XenmonRow {
    pub window: Option<u64>,
    pub start_ns: Nanos,
    pub passed_ns: Nanos,
    /// The scheduling level (the host) and the domain (the guest level the vCPU runs).
    pub level: String,
    pub domain: String,
    /// "domain" or "vcpu".
    pub kind: &'static str,
    pub name: String,
    pub vcpus: u32,
    pub gotten_ns: Nanos,
    pub waited_ns: Nanos,
    pub blocked_ns: Nanos,
    pub offline_ns: Nanos,
    /// Switch-ins (xenmon's execution count).
    pub exec_count: u64,
    /// Slices granted at those switch-ins, and how many had one.
    pub allocated_ns: Nanos,
    pub allocated_n: u64,
    pub wait_max_wake_ns: Nanos,
    pub wait_max_preempt_ns: Nanos,
}

impl XenmonRow {
    /// A figure as a percentage of the row's window (a domain's can pass 100: one CPU is 100).
    pub fn pct(&self, ns: Nanos) -> f64 {
        100.0 * ns as f64 / self.passed_ns.max(1) as f64
    }

    /// Nanoseconds per execution (0 without one).
    pub fn per_ex(&self, ns: Nanos) -> f64 {
        if self.exec_count == 0 {
            0.0
        } else {
            ns as f64 / self.exec_count as f64
        }
    }

    /// The mean slice granted per execution that had one.
    pub fn allocated_per_ex(&self) -> f64 {
        if self.allocated_n == 0 {
            0.0
        } else {
            self.allocated_ns as f64 / self.allocated_n as f64
        }
    }

    fn add(&mut self, o: &XenmonRow) {
        self.vcpus += o.vcpus;
        self.gotten_ns += o.gotten_ns;
        self.waited_ns += o.waited_ns;
        self.blocked_ns += o.blocked_ns;
        self.offline_ns += o.offline_ns;
        self.exec_count += o.exec_count;
        self.allocated_ns += o.allocated_ns;
        self.allocated_n += o.allocated_n;
        self.wait_max_wake_ns = self.wait_max_wake_ns.max(o.wait_max_wake_ns);
        self.wait_max_preempt_ns = self.wait_max_preempt_ns.max(o.wait_max_preempt_ns);
    }
}

/// Per vCPU of a scope (the run or one window), in entity order, to rows: each domain's sum
/// first, then its vCPUs. `groups`: each domain's vCPUs as positions in `vcpus`, domains in the
/// order of their first vCPU (the same for every scope).
fn xenmon_scope(vcpus: Vec<XenmonRow>, groups: &[Vec<usize>], out: &mut Vec<XenmonRow>) {
    for members in groups {
        let first = &vcpus[members[0]];
        let mut d = XenmonRow {
            kind: "domain",
            name: first.domain.clone(),
            vcpus: 0,
            gotten_ns: 0,
            waited_ns: 0,
            blocked_ns: 0,
            offline_ns: 0,
            exec_count: 0,
            allocated_ns: 0,
            allocated_n: 0,
            wait_max_wake_ns: 0,
            wait_max_preempt_ns: 0,
            ..first.clone()
        };
        for &m in members {
            d.add(&vcpus[m]);
        }
        out.push(d);
        out.extend(members.iter().map(|&m| vcpus[m].clone()));
    }
}

fn xenmon_rows(sim: &Simulation, measured: Nanos) -> Vec<XenmonRow> {
    let ents: Vec<_> = sim.ent_rows().collect();
    let row = |g: usize, window: Option<u64>, start: Nanos, passed: Nanos| {
        let e = &ents[g];
        XenmonRow {
            window,
            start_ns: start,
            passed_ns: passed,
            level: e.level.to_string(),
            domain: e.domain.unwrap_or_default().to_string(),
            kind: "vcpu",
            name: e.name.to_string(),
            vcpus: 1,
            gotten_ns: 0,
            waited_ns: 0,
            blocked_ns: 0,
            offline_ns: 0,
            exec_count: 0,
            allocated_ns: 0,
            allocated_n: 0,
            wait_max_wake_ns: 0,
            wait_max_preempt_ns: 0,
        }
    };
    let vcpu_ents: Vec<usize> = (0..ents.len()).filter(|&g| ents[g].is_vcpu).collect();
    // Each domain's vCPUs (positions among the vCPUs), domains by their first vCPU.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut index = std::collections::BTreeMap::new();
    for (pos, &g) in vcpu_ents.iter().enumerate() {
        let key = (ents[g].level, ents[g].domain.unwrap_or_default());
        let d = *index.entry(key).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[d].push(pos);
    }
    let mut out = Vec::new();
    let run: Vec<XenmonRow> = vcpu_ents
        .iter()
        .map(|&g| {
            let st = ents[g].stats;
            XenmonRow {
                gotten_ns: st.time[RunState::Running as usize],
                waited_ns: st.time[RunState::Runnable as usize],
                blocked_ns: st.time[RunState::Blocked as usize],
                offline_ns: st.time[RunState::Offline as usize],
                exec_count: st.runs,
                allocated_ns: st.xm.allocated,
                allocated_n: st.xm.allocated_n,
                wait_max_wake_ns: st.xm.wait_max_wake,
                wait_max_preempt_ns: st.xm.wait_max_preempt,
                ..row(g, None, sim.warmup(), measured)
            }
        })
        .collect();
    xenmon_scope(run, &groups, &mut out);
    let windows = sim.xenmon_rows();
    for w in windows.chunk_by(|a, b| a.window == b.window) {
        // A window's rows are every vCPU's, in entity order (sim/xenmon.rs).
        assert_eq!(w.len(), vcpu_ents.len(), "invariant: a window row per vCPU");
        let scope = w
            .iter()
            .map(|r: &XenmonWindowRow| XenmonRow {
                gotten_ns: r.time[RunState::Running as usize],
                waited_ns: r.time[RunState::Runnable as usize],
                blocked_ns: r.time[RunState::Blocked as usize],
                offline_ns: r.time[RunState::Offline as usize],
                exec_count: r.runs,
                allocated_ns: r.allocated,
                allocated_n: r.allocated_n,
                wait_max_wake_ns: r.wait_max_wake,
                wait_max_preempt_ns: r.wait_max_preempt,
                ..row(r.ent as usize, Some(r.window), r.start_ns, r.passed_ns)
            })
            .collect();
        xenmon_scope(scope, &groups, &mut out);
    }
    out
}

pub(crate) fn collect(sim: &Simulation) -> Results {
    let measured = sim.now().saturating_sub(sim.warmup()).max(1);
    let entities = sim
        .ent_rows()
        .enumerate()
        .map(|(i, r)| {
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
                pool: sim
                    .pool_name_of(crate::ids::GEnt(i as u32))
                    .map(str::to_string),
            }
        })
        .collect();
    let secs = measured as f64 / 1e9;
    let workloads = sim
        .wl_rows()
        .map(|w| {
            let hs: Vec<HistSummary> = w.hists.iter().map(|h| h.summary()).collect();
            // cyclictest's mean is of truncated microseconds; a ping's RTT, a start-up time and
            // a Context1 pass's elapsed time (the "unixbench" driver) are exact.
            let means: Vec<f64> = hs
                .iter()
                .map(|h| match w.spec.kind {
                    WorkloadKind::Ping | WorkloadKind::Startup | WorkloadKind::Context1 => {
                        h.mean_ns / 1000.0
                    }
                    _ => h.avg_us,
                })
                .collect();
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
        ports: sim.port_rows(),
        coord: sim
            .coord_rows()
            .into_iter()
            .map(|(domain, c)| CoordResult {
                domain,
                boost_hypercalls: c.boosts,
                unboost_hypercalls: c.unboosts,
                bound_expiries: c.expired,
            })
            .collect(),
        chaos: sim.chaos_rows(),
        xenmon: xenmon_rows(sim, measured),
    }
}

/// One column of an exported results table. The binding maps each variant to one Arrow type.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    Str(Vec<String>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    /// Null where a row has no such value (a counter of another kind of workload).
    OptU64(Vec<Option<u64>>),
    OptF64(Vec<Option<f64>>),
    /// One list per row (a histogram's buckets).
    ListU64(Vec<Vec<u64>>),
}

/// A named table of equally long columns.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub name: &'static str,
    pub columns: Vec<(String, Column)>,
}

impl Table {
    fn new(name: &'static str) -> Self {
        Table {
            name,
            columns: Vec::new(),
        }
    }

    fn col(&mut self, name: impl Into<String>, c: Column) {
        self.columns.push((name.into(), c));
    }
}

/// The histogram figures that the per-workload table repeats as `<histogram>_<figure>` columns
/// (`avg_us` is a float, the others integers).
const HIST_WIDE: [&str; 8] = [
    "count",
    "min_us",
    "avg_us",
    "max_us",
    "p50_ns",
    "p99_ns",
    "p999_ns",
    "overflows",
];

fn hist_int(h: &HistSummary, m: &str) -> u64 {
    match m {
        "count" => h.count,
        "min_us" => h.min_us,
        "max_us" => h.max_us,
        "p50_ns" => h.p50_ns,
        "p99_ns" => h.p99_ns,
        "p999_ns" => h.p999_ns,
        "overflows" => h.overflows,
        _ => unreachable!("not an integer histogram figure: {m}"),
    }
}

fn hist_of<'a>(r: &'a WorkloadResult, k: &str) -> Option<&'a HistSummary> {
    r.histograms.iter().find(|(n, _)| n == k).map(|h| &h.1)
}

/// The name a value serialises to (an enum's `rename_all` spelling, as in the JSON results).
fn serde_name<T: Serialize>(x: &T) -> String {
    match serde_json::to_value(x) {
        Ok(serde_json::Value::String(s)) => s,
        other => format!("{other:?}"),
    }
}

impl Results {
    /// The results as tables: `entities` (one row per entity at every level), `workloads` (one
    /// row per workload: its figure, `count_<counter>` and `<histogram>_<figure>` columns, null
    /// where a workload has no such counter or histogram), `counters` (long: one row per
    /// workload and counter, in the workload's order), `histograms` (one row per histogram, with
    /// its buckets as a list) and `series` (long: name, t_ns, value).
    /// With I/O, a sixth table `ports` (one row per event-channel port); with chaos mode, a
    /// table `chaos` (one row per stalled vCPU: its stalls); with coordinated scheduling, a
    /// table `coord` (one row per coordinated domain: its hypercalls).
    pub fn tables(&self) -> Vec<Table> {
        let mut v = vec![
            self.entity_table(),
            self.workload_table(),
            self.counter_table(),
            self.histogram_table(),
            self.series_table(),
        ];
        if !self.ports.is_empty() {
            v.push(self.port_table());
        }
        if !self.chaos.is_empty() {
            v.push(self.chaos_table());
        }
        if !self.coord.is_empty() {
            v.push(self.coord_table());
        }
        v.push(self.xenmon_table());
        v
    }

    /// xenmon's figures (docs/xenmon.md): one row per domain and per vCPU, over the measured
    /// window (`window` null) and over each fixed window; xenmon's derived figures as columns.
    fn xenmon_table(&self) -> Table {
        let x = &self.xenmon;
        let s = |f: fn(&XenmonRow) -> String| Column::Str(x.iter().map(f).collect());
        let u = |f: fn(&XenmonRow) -> u64| Column::U64(x.iter().map(f).collect());
        let f = |f: fn(&XenmonRow) -> f64| Column::F64(x.iter().map(f).collect());
        let mut t = Table::new("xenmon");
        t.col(
            "window",
            Column::OptU64(x.iter().map(|r| r.window).collect()),
        );
        t.col("start_ns", u(|r| r.start_ns));
        t.col("passed_ns", u(|r| r.passed_ns));
        t.col("level", s(|r| r.level.clone()));
        t.col("domain", s(|r| r.domain.clone()));
        t.col("kind", s(|r| r.kind.to_string()));
        t.col("name", s(|r| r.name.clone()));
        t.col("vcpus", Column::U32(x.iter().map(|r| r.vcpus).collect()));
        t.col("gotten_ns", u(|r| r.gotten_ns));
        t.col("gotten_pct", f(|r| r.pct(r.gotten_ns)));
        t.col("gotten_per_ex_ns", f(|r| r.per_ex(r.gotten_ns)));
        t.col("allocated_per_ex_ns", f(|r| r.allocated_per_ex()));
        t.col("blocked_ns", u(|r| r.blocked_ns));
        t.col("blocked_pct", f(|r| r.pct(r.blocked_ns)));
        t.col("waited_ns", u(|r| r.waited_ns));
        t.col("waited_pct", f(|r| r.pct(r.waited_ns)));
        t.col("waited_per_ex_ns", f(|r| r.per_ex(r.waited_ns)));
        t.col("offline_ns", u(|r| r.offline_ns));
        t.col("offline_pct", f(|r| r.pct(r.offline_ns)));
        t.col("exec_count", u(|r| r.exec_count));
        t.col(
            "exec_per_s",
            f(|r| r.exec_count as f64 * 1e9 / r.passed_ns.max(1) as f64),
        );
        t.col(
            "wait_max_ns",
            u(|r| r.wait_max_wake_ns.max(r.wait_max_preempt_ns)),
        );
        t.col("wait_max_wake_ns", u(|r| r.wait_max_wake_ns));
        t.col("wait_max_preempt_ns", u(|r| r.wait_max_preempt_ns));
        t
    }

    fn coord_table(&self) -> Table {
        let c = &self.coord;
        let u = |f: fn(&CoordResult) -> u64| Column::U64(c.iter().map(f).collect());
        let mut t = Table::new("coord");
        t.col(
            "domain",
            Column::Str(c.iter().map(|r| r.domain.clone()).collect()),
        );
        t.col("boost_hypercalls", u(|r| r.boost_hypercalls));
        t.col("unboost_hypercalls", u(|r| r.unboost_hypercalls));
        t.col("bound_expiries", u(|r| r.bound_expiries));
        t
    }

    fn chaos_table(&self) -> Table {
        let c = &self.chaos;
        let s = |f: fn(&ChaosResult) -> String| Column::Str(c.iter().map(f).collect());
        let f = |f: fn(&ChaosResult) -> f64| Column::F64(c.iter().map(f).collect());
        let mut t = Table::new("chaos");
        t.col("domain", s(|r| r.domain.clone()));
        t.col("vcpu", Column::U32(c.iter().map(|r| r.vcpu).collect()));
        t.col("name", s(|r| r.name.clone()));
        t.col("stalls", Column::U64(c.iter().map(|r| r.stalls).collect()));
        t.col(
            "stalled_ns",
            Column::U64(c.iter().map(|r| r.stalled_ns).collect()),
        );
        t.col("rate", f(|r| r.rate));
        t.col("mean_us", f(|r| r.mean_us));
        t
    }

    fn port_table(&self) -> Table {
        let p = &self.ports;
        let s = |f: fn(&PortResult) -> String| Column::Str(p.iter().map(f).collect());
        let u = |f: fn(&PortResult) -> u64| Column::U64(p.iter().map(f).collect());
        let mut t = Table::new("ports");
        t.col("level", s(|r| r.level.clone()));
        t.col("port", Column::U32(p.iter().map(|r| r.port).collect()));
        t.col("vcpu", Column::U32(p.iter().map(|r| r.vcpu).collect()));
        t.col("handler", s(|r| r.handler.clone()));
        t.col("served", u(|r| r.served));
        t.col("max_wait_ns", u(|r| r.max_wait_ns));
        t.col("pending_ns", u(|r| r.pending_ns));
        t
    }

    fn entity_table(&self) -> Table {
        let e = &self.entities;
        let s = |f: fn(&EntityResult) -> String| Column::Str(e.iter().map(f).collect());
        let u = |f: fn(&EntityResult) -> u64| Column::U64(e.iter().map(f).collect());
        let x = |f: fn(&EntityResult) -> f64| Column::F64(e.iter().map(f).collect());
        let mut t = Table::new("entities");
        t.col("level", s(|r| r.level.clone()));
        t.col("name", s(|r| r.name.clone()));
        t.col("kind", s(|r| r.kind.to_string()));
        t.col("group", Column::U32(e.iter().map(|r| r.group).collect()));
        t.col("running_ns", u(|r| r.running_ns));
        t.col("executed_ns", u(|r| r.executed_ns));
        t.col("runnable_ns", u(|r| r.runnable_ns));
        t.col("blocked_ns", u(|r| r.blocked_ns));
        t.col("offline_ns", u(|r| r.offline_ns));
        t.col("cpu_share", x(|r| r.cpu_share));
        t.col("runs", u(|r| r.runs));
        t.col("preemptions", u(|r| r.preemptions));
        t.col("migrations", u(|r| r.migrations));
        t.col("wait_count", u(|r| r.wait_count));
        t.col("wait_mean_ns", x(|r| r.wait_mean_ns));
        t.col("wait_p99_ns", u(|r| r.wait_p99_ns));
        t.col("wait_max_ns", u(|r| r.wait_max_ns));
        t.col("final_state", s(|r| serde_name(&r.final_state)));
        t.col("open_wait_ns", u(|r| r.open_wait_ns));
        // Only with cpupools, so that a machine without them has the table it always had.
        if e.iter().any(|r| r.pool.is_some()) {
            t.col("pool", s(|r| r.pool.clone().unwrap_or_default()));
        }
        t
    }

    fn workload_table(&self) -> Table {
        let w = &self.workloads;
        let s = |f: fn(&WorkloadResult) -> String| Column::Str(w.iter().map(f).collect());
        let mut t = Table::new("workloads");
        t.col("level", s(|r| r.level.clone()));
        t.col("workload", s(|r| r.name.clone()));
        t.col("kind", s(|r| serde_name(&r.kind)));
        t.col("figure", s(|r| r.figure.name.clone()));
        t.col(
            "value",
            Column::F64(w.iter().map(|r| r.figure.value).collect()),
        );
        t.col("unit", s(|r| r.figure.unit.clone()));
        // Counter and histogram names in first-seen order, so the columns are deterministic.
        let mut counters: Vec<&str> = Vec::new();
        let mut hists: Vec<&str> = Vec::new();
        for r in w {
            for (k, _) in &r.counters {
                if !counters.contains(&k.as_str()) {
                    counters.push(k);
                }
            }
            for (k, _) in &r.histograms {
                if !hists.contains(&k.as_str()) {
                    hists.push(k);
                }
            }
        }
        for k in counters {
            let vals = w
                .iter()
                .map(|r| r.counters.iter().find(|(n, _)| n == k).map(|(_, v)| *v))
                .collect();
            t.col(format!("count_{k}"), Column::OptU64(vals));
        }
        for k in hists {
            for m in HIST_WIDE {
                let col = if m == "avg_us" {
                    Column::OptF64(w.iter().map(|r| hist_of(r, k).map(|h| h.avg_us)).collect())
                } else {
                    Column::OptU64(
                        w.iter()
                            .map(|r| hist_of(r, k).map(|h| hist_int(h, m)))
                            .collect(),
                    )
                };
                t.col(format!("{k}_{m}"), col);
            }
        }
        t
    }

    fn counter_table(&self) -> Table {
        let rows: Vec<(&WorkloadResult, &(String, u64))> = self
            .workloads
            .iter()
            .flat_map(|w| w.counters.iter().map(move |c| (w, c)))
            .collect();
        let s = |f: fn(&(&WorkloadResult, &(String, u64))) -> String| {
            Column::Str(rows.iter().map(f).collect())
        };
        let mut t = Table::new("counters");
        t.col("level", s(|r| r.0.level.clone()));
        t.col("workload", s(|r| r.0.name.clone()));
        t.col("counter", s(|r| r.1 .0.clone()));
        t.col("value", Column::U64(rows.iter().map(|r| r.1 .1).collect()));
        t
    }

    fn histogram_table(&self) -> Table {
        let rows: Vec<(&WorkloadResult, &String, &HistSummary)> = self
            .workloads
            .iter()
            .flat_map(|w| w.histograms.iter().map(move |(n, h)| (w, n, h)))
            .collect();
        let u = |f: fn(&HistSummary) -> u64| Column::U64(rows.iter().map(|r| f(r.2)).collect());
        let x = |f: fn(&HistSummary) -> f64| Column::F64(rows.iter().map(|r| f(r.2)).collect());
        let mut t = Table::new("histograms");
        t.col(
            "level",
            Column::Str(rows.iter().map(|r| r.0.level.clone()).collect()),
        );
        t.col(
            "workload",
            Column::Str(rows.iter().map(|r| r.0.name.clone()).collect()),
        );
        t.col(
            "histogram",
            Column::Str(rows.iter().map(|r| r.1.clone()).collect()),
        );
        t.col("count", u(|h| h.count));
        t.col("min_ns", u(|h| h.min_ns));
        t.col("mean_ns", x(|h| h.mean_ns));
        t.col("stdev_ns", x(|h| h.stdev_ns));
        t.col("p50_ns", u(|h| h.p50_ns));
        t.col("p99_ns", u(|h| h.p99_ns));
        t.col("p999_ns", u(|h| h.p999_ns));
        t.col("max_ns", u(|h| h.max_ns));
        t.col("min_us", u(|h| h.min_us));
        t.col("avg_us", x(|h| h.avg_us));
        t.col("max_us", u(|h| h.max_us));
        t.col("overflows", u(|h| h.overflows));
        t.col(
            "buckets_us",
            Column::ListU64(rows.iter().map(|r| r.2.buckets_us.clone()).collect()),
        );
        t.col(
            "overflow_cycles",
            Column::ListU64(rows.iter().map(|r| r.2.overflow_cycles.clone()).collect()),
        );
        t
    }

    fn series_table(&self) -> Table {
        let mut t = Table::new("series");
        t.col(
            "name",
            Column::Str(
                self.series
                    .iter()
                    .flat_map(|s| std::iter::repeat_n(s.name.clone(), s.t_ns.len()))
                    .collect(),
            ),
        );
        t.col(
            "t_ns",
            Column::U64(self.series.iter().flat_map(|s| s.t_ns.clone()).collect()),
        );
        t.col(
            "value",
            Column::I64(self.series.iter().flat_map(|s| s.values.clone()).collect()),
        );
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(count: u64, buckets: Vec<u64>) -> HistSummary {
        HistSummary {
            count,
            min_ns: 1000,
            mean_ns: 1500.0,
            stdev_ns: 0.0,
            p50_ns: 1400,
            p99_ns: 2000,
            p999_ns: 2000,
            max_ns: 2100,
            min_us: 1,
            avg_us: 1.5,
            max_us: 2,
            buckets_us: buckets,
            overflows: 0,
            overflow_cycles: vec![],
        }
    }

    fn workload(name: &str, kind: WorkloadKind, counters: &[(&str, u64)]) -> WorkloadResult {
        WorkloadResult {
            level: "g".into(),
            name: name.into(),
            kind,
            figure: Figure {
                name: "score".into(),
                value: 2.5,
                unit: "lps".into(),
            },
            counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            histograms: vec![],
        }
    }

    fn results() -> Results {
        let mut ct = workload("ct", WorkloadKind::Cyclictest, &[]);
        ct.histograms = vec![("t0".into(), hist(3, vec![0, 2, 1]))];
        Results {
            duration_ns: 10,
            warmup_ns: 0,
            measured_ns: 10,
            events: 1,
            entities: vec![],
            workloads: vec![
                workload("c1", WorkloadKind::Context1, &[("fast", 4), ("slow", 1)]),
                ct,
                workload("hog", WorkloadKind::CpuLoop, &[("slow", 7)]),
            ],
            series: vec![
                Series {
                    name: "a".into(),
                    t_ns: vec![1, 2],
                    values: vec![-1, 1],
                },
                Series {
                    name: "b".into(),
                    t_ns: vec![1],
                    values: vec![5],
                },
            ],
            ports: vec![],
            coord: vec![],
            chaos: vec![],
            xenmon: vec![],
        }
    }

    fn col<'a>(t: &'a Table, name: &str) -> &'a Column {
        &t.columns.iter().find(|(n, _)| n == name).unwrap().1
    }

    fn len(c: &Column) -> usize {
        match c {
            Column::Str(v) => v.len(),
            Column::U32(v) => v.len(),
            Column::U64(v) => v.len(),
            Column::I64(v) => v.len(),
            Column::F64(v) => v.len(),
            Column::OptU64(v) => v.len(),
            Column::OptF64(v) => v.len(),
            Column::ListU64(v) => v.len(),
        }
    }

    #[test]
    fn every_table_has_equal_columns() {
        let tables = results().tables();
        let names: Vec<&str> = tables.iter().map(|t| t.name).collect();
        assert_eq!(
            names,
            [
                "entities",
                "workloads",
                "counters",
                "histograms",
                "series",
                "xenmon"
            ]
        );
        for t in &tables {
            let n = len(&t.columns[0].1);
            assert!(t.columns.iter().all(|(_, c)| len(c) == n), "{}", t.name);
        }
    }

    #[test]
    fn workload_table_has_a_column_per_counter_null_where_absent() {
        let t = &results().tables()[1];
        assert_eq!(
            col(t, "kind"),
            &Column::Str(vec![
                "context1".into(),
                "cyclictest".into(),
                "cpu_loop".into()
            ])
        );
        assert_eq!(
            col(t, "count_fast"),
            &Column::OptU64(vec![Some(4), None, None])
        );
        assert_eq!(
            col(t, "count_slow"),
            &Column::OptU64(vec![Some(1), None, Some(7)])
        );
        assert_eq!(
            col(t, "t0_count"),
            &Column::OptU64(vec![None, Some(3), None])
        );
        assert_eq!(
            col(t, "t0_avg_us"),
            &Column::OptF64(vec![None, Some(1.5), None])
        );
    }

    #[test]
    fn long_tables_keep_the_order_of_the_results() {
        let tables = results().tables();
        let counters = &tables[2];
        assert_eq!(
            col(counters, "counter"),
            &Column::Str(vec!["fast".into(), "slow".into(), "slow".into()])
        );
        assert_eq!(col(counters, "value"), &Column::U64(vec![4, 1, 7]));
        let h = &tables[3];
        assert_eq!(col(h, "buckets_us"), &Column::ListU64(vec![vec![0, 2, 1]]));
        let s = &tables[4];
        assert_eq!(
            col(s, "name"),
            &Column::Str(vec!["a".into(), "a".into(), "b".into()])
        );
        assert_eq!(col(s, "value"), &Column::I64(vec![-1, 1, 5]));
    }
}
