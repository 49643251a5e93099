//! The validation pass of a scenario: what its types cannot check (machine, domains, workloads,
//! cpupools and the `[[event]]` timeline), run after parsing and after `--set` overrides. Each
//! error is a dotted field path and a message ([`Scenario::validate`]).

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{check_ns, cpupool, events, io, ConfigCheck, EventAction, Scenario};
use crate::cpuset::MAX_CPUS;
use crate::sched::Policy;
use crate::time::{time_ns, NS_PER_MS};
use crate::workload::WorkloadConfig;

impl<H, G> Scenario<H, G>
where
    H: DeserializeOwned + Serialize + ConfigCheck,
    G: DeserializeOwned + Serialize + ConfigCheck,
{
    /// Checks what types cannot. Err((dotted field path, message)).
    pub fn validate(&self) -> Result<(), (String, String)> {
        let m = &self.machine;
        if m.pcpus == 0 || m.pcpus as usize > MAX_CPUS {
            return Err((
                "machine.pcpus".into(),
                format!("must be 1..={MAX_CPUS}, got {}", m.pcpus),
            ));
        }
        m.validate_topology()?;
        check_ns("machine.ipi_latency_ns", m.ipi_latency_ns)?;
        check_ns("machine.ctxsw_cost_ns", m.ctxsw_cost_ns)?;
        check_ns("machine.vcpu_refill_ns", m.vcpu_refill_ns)?;
        check_ns("machine.timer_expiry_ns", m.timer_expiry_ns)?;
        check_ns("machine.wfe_trap_ns", m.wfe_trap_ns)?;
        m.validate_hv()?;
        self.run.validate()?;
        self.host
            .check()
            .map_err(|(f, m)| (format!("host.{f}"), m))?;
        if self.domains.is_empty() && self.host.host_processes().is_empty() {
            return Err((
                "domain".into(),
                "a scenario needs at least one [[domain]] (or, bare metal, a KVM host's \
                 [[host.process]])"
                    .into(),
            ));
        }
        for (i, d) in self.domains.iter().enumerate() {
            let at = |f: &str| format!("domain.{i}.{f}");
            if let Some(c) = &d.chaos {
                c.validate()
                    .map_err(|(f, e)| (at(&format!("chaos.{f}")), e))?;
            }
            m.guest_type(d.guest_type)
                .map_err(|e| (at("guest_type"), e))?;
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
                    format!(
                        "must be 1..=65535 (xl sched-credit -w, xl sched-credit2 -w), got {}",
                        d.weight
                    ),
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
            check_ns(&at("kernel.ipi_latency_ns"), d.kernel.ipi_latency_ns)?;
            check_ns(&at("kernel.ctxsw_cost_ns"), d.kernel.ctxsw_cost_ns)?;
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
            // Each workload is valid on its own (its counts and times in range): now their
            // tasks together, before anything below counts them one by one.
            crate::workload::check_task_ceiling(
                &d.workloads,
                d.vcpus,
                &format!("domain.{i}.workload"),
            )?;
            // SCHED_DEADLINE admission over the guest's deadline tasks.
            let mut dl = Vec::new();
            let mut owner = Vec::new();
            for (j, w) in d.workloads.iter().enumerate() {
                if let WorkloadConfig::Program(p) = w {
                    if p.policy == Policy::Deadline {
                        for k in 0..p.copies {
                            dl.push((format!("{}.{k}", p.name), p.times()));
                            owner.push(j);
                        }
                    }
                }
            }
            if !dl.is_empty() {
                d.sched
                    .check_dl_tasks(d.vcpus, &dl)
                    .map_err(|(k, f, m)| (format!("domain.{i}.workload.{}.{f}", owner[k]), m))?;
            }
        }
        io::validate(&self.machine, &self.domains)?;
        let doms: Vec<(&str, bool, bool)> = self
            .domains
            .iter()
            .map(|d| {
                let lives = d.create_at_ms.is_some() || d.destroy_at_ms.is_some();
                (d.name.as_str(), d.driver, lives)
            })
            .collect();
        for (i, d) in self.domains.iter().enumerate() {
            for (j, w) in d.workloads.iter().enumerate() {
                if let WorkloadConfig::Parallel(c) = w {
                    crate::workload::parallel::check_placement(c, &doms)
                        .map_err(|(f, m)| (format!("domain.{i}.workload.{j}.{f}"), m))?;
                }
            }
        }
        self.validate_events()
    }

    /// The `[[event]]` timeline: each event on its own, then pauses and unpauses in time
    /// order (a domain is paused at most once at a time: Xen's `domain_unpause` of a domain
    /// that is not paused is a bug).
    fn validate_events(&self) -> Result<(), (String, String)> {
        let end = self.run.duration_ns()?;
        // Domain lifetimes.
        let mut last_create: Option<u64> = None;
        for (i, d) in self.domains.iter().enumerate() {
            let at = |f: &str| format!("domain.{i}.{f}");
            for (f, v) in [
                ("create_at_ms", d.create_at_ms),
                ("destroy_at_ms", d.destroy_at_ms),
            ] {
                let Some(v) = v else { continue };
                let t = time_ns(&at(f), v, NS_PER_MS)?;
                if t >= end {
                    return Err((
                        at(f),
                        format!(
                            "must be before the run's end ({} ms), got {v}",
                            end / NS_PER_MS
                        ),
                    ));
                }
                self.host
                    .check_adjust(f, v as i64)
                    .map_err(|m| (at(f), m))?;
            }
            if let (Some(c), Some(x)) = (d.create_at_ms, d.destroy_at_ms) {
                if x <= c {
                    return Err((
                        at("destroy_at_ms"),
                        format!("must be after create_at_ms ({c}), got {x}"),
                    ));
                }
            }
            match (d.create_at_ms, last_create) {
                (None, Some(_)) => {
                    return Err((
                        at("create_at_ms"),
                        "domains created during the run (create_at_ms) must come after the \
                         others in the file: the host inserts vCPUs in id order"
                            .into(),
                    ))
                }
                (Some(c), Some(p)) if c < p => {
                    return Err((
                        at("create_at_ms"),
                        format!(
                            "domains created during the run must be declared in creation order \
                             ({c} ms comes after a domain created at {p} ms)"
                        ),
                    ))
                }
                (Some(c), _) => last_create = Some(c),
                (None, None) => {}
            }
        }
        let pooled = !self.cpupools.is_empty();
        for (i, e) in self.events.iter().enumerate() {
            e.validate(
                i,
                end,
                &self.host,
                self.machine.pcpus,
                &self.domains,
                pooled,
            )?;
        }
        cpupool::check(self)?;
        events::check_hotplug(&self.events, self.machine.pcpus, &self.domains)?;
        // An event on a domain falls within its life.
        for (i, e) in self.events.iter().enumerate() {
            let Some(d) = self
                .domains
                .iter()
                .find(|d| Some(&d.name) == e.domain.as_ref())
            else {
                continue;
            };
            let born = d.create_at_ms.unwrap_or(0);
            if e.at_ms < born || d.destroy_at_ms.is_some_and(|x| e.at_ms >= x) {
                return Err((
                    format!("event.{i}.at_ms"),
                    format!(
                        "domain '{}' does not exist at {} ms (it lives from {born} ms{})",
                        d.name,
                        e.at_ms,
                        d.destroy_at_ms
                            .map(|x| format!(" to {x} ms"))
                            .unwrap_or_default()
                    ),
                ));
            }
        }
        let mut order: Vec<usize> = (0..self.events.len()).collect();
        order.sort_by_key(|&i| self.events[i].at_ms);
        let mut paused = vec![false; self.domains.len()];
        for i in order {
            let e = &self.events[i];
            let pause = match e.action {
                EventAction::Pause => true,
                EventAction::Unpause => false,
                _ => continue,
            };
            let name = e.domain.as_deref().unwrap_or_default();
            let Some(d) = self.domains.iter().position(|d| d.name == name) else {
                continue;
            };
            if paused[d] == pause {
                return Err((
                    format!("event.{i}.action"),
                    format!(
                        "domain '{name}' is {} at {} ms",
                        if pause {
                            "already paused"
                        } else {
                            "not paused"
                        },
                        e.at_ms
                    ),
                ));
            }
            paused[d] = pause;
        }
        Ok(())
    }
}
