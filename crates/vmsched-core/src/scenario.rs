//! The scenario file schema (TOML) and its validation.
//!
//! The schema is generic over the host and guest scheduler configurations, which live with the
//! policies in `vmsched-sched` as serde-tagged enums (`scheduler = "credit2"`): that enum is the
//! registry. Every table denies unknown fields. A bad file gets one error naming the file, the
//! line, the field and what was expected; nothing runs on a scenario that did not validate.
//!
//! `--set key=value` overrides are applied to the parsed document before validation, with dotted
//! keys (`host.ratelimit_us=20000`, `domain.1.weight=512`, `run.seed=3`).

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::cpuset::MAX_CPUS;
use crate::sched::CpuTopo;
use crate::workload::WorkloadConfig;

/// Checks a scheduler configuration beyond its types.
pub trait ConfigCheck {
    /// Err((field, message)).
    fn check(&self) -> Result<(), (String, String)>;
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario<H, G> {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub run: RunConfig,
    pub machine: MachineConfig,
    pub host: H,
    #[serde(rename = "domain")]
    pub domains: Vec<DomainConfig<G>>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Simulated time, including the warm-up.
    #[serde(default = "d_duration")]
    pub duration_ms: u64,
    /// Metrics are reset at this time.
    #[serde(default)]
    pub warmup_ms: u64,
    #[serde(default = "d_seed")]
    pub seed: u64,
    /// Sample traced per-workload series (e.g. Context1's vruntime gap) this often; 0: off.
    #[serde(default)]
    pub sample_interval_us: u64,
}

fn d_duration() -> u64 {
    1000
}
fn d_seed() -> u64 {
    1
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            duration_ms: d_duration(),
            warmup_ms: 0,
            seed: d_seed(),
            sample_interval_us: 0,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    #[default]
    X86,
    /// Every CPU reports socket 0, core 0, no SMT (ERRATA X4).
    Arm64,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    pub pcpus: u32,
    #[serde(default)]
    pub arch: Arch,
    #[serde(default = "one")]
    pub sockets: u32,
    #[serde(default = "one")]
    pub threads_per_core: u32,
    /// Delay of a reschedule IPI between physical CPUs.
    #[serde(default)]
    pub ipi_latency_ns: u64,
    /// Cost of a vCPU context switch (default 0; Xen adds none to accounting).
    #[serde(default)]
    pub ctxsw_cost_ns: u64,
    /// Xen's `vwfi=` on Arm: "trap" (default: WFI blocks the vCPU, WFE yields it) or "native".
    #[serde(default)]
    pub vwfi: Vwfi,
    /// Round trip of a trapped WFE (guest exit, yield, re-entry).
    #[serde(default = "d_wfe_trap")]
    pub wfe_trap_ns: u64,
}

fn d_wfe_trap() -> u64 {
    2000
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Vwfi {
    #[default]
    Trap,
    Native,
}

fn one() -> u32 {
    1
}

impl MachineConfig {
    /// The physical CPUs' topology.
    pub fn topology(&self) -> Vec<CpuTopo> {
        let n = self.pcpus;
        let per_socket = n.div_ceil(self.sockets.max(1)).max(1);
        (0..n)
            .map(|i| match self.arch {
                Arch::Arm64 => CpuTopo::default(),
                Arch::X86 => {
                    let socket = i / per_socket;
                    CpuTopo {
                        node: socket,
                        socket,
                        core: i / self.threads_per_core.max(1),
                        thread: i % self.threads_per_core.max(1),
                        llc: socket,
                    }
                }
            })
            .collect()
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DomainConfig<G> {
    pub name: String,
    pub vcpus: u32,
    /// Xen weight (xl sched-credit2 -w).
    #[serde(default = "d_weight")]
    pub weight: u32,
    /// Xen cap in percent of one pCPU, 0 = none (xl sched-credit2 -c).
    #[serde(default)]
    pub cap: u32,
    /// Hard affinity of every vCPU (pCPU ids); default all.
    #[serde(default)]
    pub pcpus: Option<Vec<u32>>,
    /// Hard affinity per vCPU; overrides `pcpus`.
    #[serde(default)]
    pub vcpu_pcpus: Option<Vec<Vec<u32>>>,
    /// Soft affinity of every vCPU; default all.
    #[serde(default)]
    pub soft_pcpus: Option<Vec<u32>>,
    #[serde(default)]
    pub kernel: KernelConfig,
    pub sched: G,
    #[serde(default, rename = "workload")]
    pub workloads: Vec<WorkloadConfig>,
}

fn d_weight() -> u32 {
    256
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Preempt {
    /// PREEMPT_NONE / VOLUNTARY: a reschedule inside a system call waits for its exit.
    #[default]
    None,
    /// CONFIG_PREEMPT.
    Full,
}

/// The guest kernel's settings that are not its scheduler's.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KernelConfig {
    /// CONFIG_PARAVIRT_TIME_ACCOUNTING (with a steal clock available).
    #[serde(default)]
    pub paravirt_time_accounting: bool,
    #[serde(default)]
    pub preempt: Preempt,
    /// Delay of a reschedule IPI between the guest's vCPUs.
    #[serde(default)]
    pub ipi_latency_ns: u64,
    /// Cost of a task context switch.
    #[serde(default)]
    pub ctxsw_cost_ns: u64,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            paravirt_time_accounting: false,
            preempt: Preempt::None,
            ipi_latency_ns: 0,
            ctxsw_cost_ns: 0,
        }
    }
}

/// A scenario that failed to load: where and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub line: Option<usize>,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ScenarioError {}

fn line_of(src: &str, offset: usize) -> usize {
    src[..offset.min(src.len())]
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

/// Line of the value at a dotted path (`domain.1.vcpus`) in the source, if it is there.
fn locate(src: &str, path: &str) -> Option<usize> {
    let root = toml::de::DeTable::parse(src).ok()?;
    let mut cur = toml::de::DeValue::Table(root.into_inner());
    let mut span = None;
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        let next = match seg.parse::<usize>() {
            Ok(i) => cur.get(i),
            Err(_) => cur.get(seg),
        };
        match next {
            Some(v) => {
                span = Some(v.span());
                cur = v.get_ref().clone();
            }
            None => break,
        }
    }
    span.map(|s| line_of(src, s.start))
}

/// Serde reports an unknown field inside a tagged table (`[host]`, `[[domain.workload]]`) at the
/// table's header; point at the field's own line when it follows in that table.
fn refine_line(src: &str, line: Option<usize>, msg: &str) -> Option<usize> {
    let line = line?;
    let Some(rest) = msg.strip_prefix("unknown field `") else {
        return Some(line);
    };
    let Some(field) = rest.split('`').next() else {
        return Some(line);
    };
    for (i, l) in src.lines().enumerate().skip(line - 1) {
        let t = l.trim_start();
        if i + 1 > line && t.starts_with('[') {
            break;
        }
        if let Some(after) = t.strip_prefix(field) {
            if after.trim_start().starts_with('=') {
                return Some(i + 1);
            }
        }
    }
    Some(line)
}

/// Parses a `--set` value: a TOML value if it parses as one, else a string. A number that would
/// lose digits as a float (`5.10`) stays a string.
fn parse_value(v: &str) -> toml::Value {
    let doc = format!("v = {v}");
    match toml::from_str::<toml::Table>(&doc) {
        // "5.10" is a version, not the float 5.1: keep text whose float form reads differently.
        Ok(t) if matches!(t.get("v"), Some(toml::Value::Float(f)) if f.to_string() != v.trim()) => {
            toml::Value::String(v.into())
        }
        Ok(mut t) => t.remove("v").unwrap_or(toml::Value::String(v.into())),
        Err(_) => toml::Value::String(v.into()),
    }
}

fn set_path(doc: &mut toml::Value, key: &str, v: toml::Value) -> Result<(), String> {
    let segs: Vec<&str> = key.split('.').collect();
    let mut cur = doc;
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        cur = match cur {
            toml::Value::Table(t) => {
                if last {
                    t.insert(seg.to_string(), v);
                    return Ok(());
                }
                t.entry(seg.to_string())
                    .or_insert_with(|| toml::Value::Table(Default::default()))
            }
            toml::Value::Array(a) => {
                let idx: usize = seg.parse().map_err(|_| {
                    format!("'{seg}' must be an index into the array at this point")
                })?;
                let n = a.len();
                let slot = a
                    .get_mut(idx)
                    .ok_or_else(|| format!("index {idx} out of range (there are {n})"))?;
                if last {
                    *slot = v;
                    return Ok(());
                }
                slot
            }
            _ => return Err(format!("'{}' is not a table", segs[..i].join("."))),
        };
    }
    Err("empty key".into())
}

impl<H, G> Scenario<H, G>
where
    H: DeserializeOwned + ConfigCheck,
    G: DeserializeOwned + ConfigCheck,
{
    /// Parses and validates a scenario. `file` names the source in errors.
    pub fn parse(
        file: &str,
        src: &str,
        overrides: &[(String, String)],
    ) -> Result<Self, ScenarioError> {
        let err = |line, field: &str, message: String| ScenarioError {
            file: file.to_string(),
            line,
            field: field.to_string(),
            message,
        };
        // First the file as written, so errors point at its lines.
        let scenario: Self = toml::from_str(src).map_err(|e| {
            let msg = e.message().trim().to_string();
            let line = e.span().map(|s| line_of(src, s.start));
            err(refine_line(src, line, &msg), "", msg)
        })?;
        if let Err((field, msg)) = scenario.validate() {
            return Err(err(locate(src, &field), &field, msg));
        }
        if overrides.is_empty() {
            return Ok(scenario);
        }
        let mut doc: toml::Value = toml::from_str(src).map_err(|e| err(None, "", e.to_string()))?;
        for (k, v) in overrides {
            set_path(&mut doc, k, parse_value(v))
                .map_err(|m| err(None, k, format!("--set {k}={v}: {m}")))?;
        }
        let text = toml::to_string(&doc).map_err(|e| err(None, "", e.to_string()))?;
        let names = overrides
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let scenario: Self = toml::from_str(&text).map_err(|e| {
            err(
                None,
                "",
                format!("after --set {names}: {}", e.message().trim()),
            )
        })?;
        scenario
            .validate()
            .map_err(|(field, msg)| err(None, &field, format!("after --set {names}: {msg}")))?;
        Ok(scenario)
    }

    /// Checks what types cannot. Err((dotted field path, message)).
    pub fn validate(&self) -> Result<(), (String, String)> {
        let m = &self.machine;
        if m.pcpus == 0 || m.pcpus as usize > MAX_CPUS {
            return Err((
                "machine.pcpus".into(),
                format!("must be 1..={MAX_CPUS}, got {}", m.pcpus),
            ));
        }
        if m.sockets == 0 || m.threads_per_core == 0 {
            return Err((
                "machine.sockets".into(),
                "sockets and threads_per_core must be ≥ 1".into(),
            ));
        }
        if self.run.duration_ms == 0 {
            return Err(("run.duration_ms".into(), "must be positive".into()));
        }
        if self.run.warmup_ms >= self.run.duration_ms {
            return Err((
                "run.warmup_ms".into(),
                "must be shorter than run.duration_ms".into(),
            ));
        }
        self.host
            .check()
            .map_err(|(f, m)| (format!("host.{f}"), m))?;
        if self.domains.is_empty() {
            return Err((
                "domain".into(),
                "a scenario needs at least one [[domain]]".into(),
            ));
        }
        for (i, d) in self.domains.iter().enumerate() {
            let at = |f: &str| format!("domain.{i}.{f}");
            if self.domains[..i].iter().any(|o| o.name == d.name) {
                return Err((
                    at("name"),
                    format!("domain name '{}' is used twice", d.name),
                ));
            }
            if d.vcpus == 0 || d.vcpus as usize > MAX_CPUS {
                return Err((
                    at("vcpus"),
                    format!("must be 1..={MAX_CPUS}, got {}", d.vcpus),
                ));
            }
            if d.weight == 0 || d.weight > 65535 {
                return Err((
                    at("weight"),
                    format!("must be 1..=65535 (xl sched-credit2 -w), got {}", d.weight),
                ));
            }
            if d.cap > 100 * d.vcpus {
                return Err((
                    at("cap"),
                    format!(
                        "must be at most 100 × vcpus = {}, got {}",
                        100 * d.vcpus,
                        d.cap
                    ),
                ));
            }
            let check_set = |f: &str, s: &[u32]| -> Result<(), (String, String)> {
                if s.is_empty() {
                    return Err((at(f), "an affinity must name at least one pCPU".into()));
                }
                if let Some(c) = s.iter().find(|c| **c >= m.pcpus) {
                    return Err((
                        at(f),
                        format!("pCPU {c} does not exist (the machine has {})", m.pcpus),
                    ));
                }
                Ok(())
            };
            if let Some(p) = &d.pcpus {
                check_set("pcpus", p)?;
            }
            if let Some(p) = &d.soft_pcpus {
                check_set("soft_pcpus", p)?;
            }
            if let Some(v) = &d.vcpu_pcpus {
                if v.len() != d.vcpus as usize {
                    return Err((
                        at("vcpu_pcpus"),
                        format!("needs one list per vCPU ({}), got {}", d.vcpus, v.len()),
                    ));
                }
                for s in v {
                    check_set("vcpu_pcpus", s)?;
                }
            }
            d.sched
                .check()
                .map_err(|(f, m)| (at(&format!("sched.{f}")), m))?;
            for (j, w) in d.workloads.iter().enumerate() {
                if d.workloads[..j].iter().any(|o| o.name() == w.name()) {
                    return Err((
                        format!("domain.{i}.workload.{j}.name"),
                        format!("workload name '{}' is used twice", w.name()),
                    ));
                }
                w.validate(d.vcpus)
                    .map_err(|(f, m)| (format!("domain.{i}.workload.{j}.{f}"), m))?;
            }
        }
        Ok(())
    }
}

impl<G> DomainConfig<G> {
    /// Hard affinity of vCPU `v` as pCPU ids.
    pub fn hard_affinity(&self, v: u32, pcpus: u32) -> Vec<u32> {
        if let Some(per) = &self.vcpu_pcpus {
            return per[v as usize].clone();
        }
        self.pcpus.clone().unwrap_or_else(|| (0..pcpus).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_values_keep_versions_as_text() {
        assert_eq!(parse_value("5.10"), toml::Value::String("5.10".into()));
        assert_eq!(parse_value("4.20.2"), toml::Value::String("4.20.2".into()));
        assert_eq!(parse_value("0.5"), toml::Value::Float(0.5));
        assert_eq!(parse_value("20000"), toml::Value::Integer(20000));
        assert_eq!(parse_value("true"), toml::Value::Boolean(true));
        assert_eq!(
            parse_value("[0, 1]"),
            toml::Value::Array(vec![0.into(), 1.into()])
        );
        assert_eq!(parse_value("native"), toml::Value::String("native".into()));
    }

    #[test]
    fn set_path_walks_tables_and_arrays() {
        let mut doc: toml::Value = toml::from_str("[a]\nb = 1\n[[d]]\nw = 2\n").unwrap();
        set_path(&mut doc, "a.b", 5.into()).unwrap();
        set_path(&mut doc, "d.0.w", 7.into()).unwrap();
        assert_eq!(doc["a"]["b"].as_integer(), Some(5));
        assert_eq!(doc["d"][0]["w"].as_integer(), Some(7));
        assert!(set_path(&mut doc, "d.3.w", 1.into())
            .unwrap_err()
            .contains("out of range"));
    }
}
