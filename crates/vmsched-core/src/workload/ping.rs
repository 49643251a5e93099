//! ping: ICMP echo requests from a remote host to a guest behind a Xen driver domain
//! (spec/workloads.md §7; Ongaro, Cox and Rixner, VEE 2008, seed 002).
//!
//! The requests come from outside the machine at a fixed interval (`ping -i`, 1 s by default)
//! and are answered by the guest's *kernel* (no task): the packet goes NIC → the driver
//! domain's NIC interrupt and netback (copied into the guest's receive ring) → an event to the
//! guest's netfront → the guest kernel builds the echo reply → an event to netback → the driver
//! domain transmits it. The path and its costs are the engine's (`sim/io.rs`, docs/io.md); this
//! file holds the workload's parameters and its figure.
//!
//! The figure: the round-trip time measured from the request's arrival at the NIC to the
//! reply leaving it, in µs (mean; the `rtt` histogram has p99 and max). A reply later than
//! `timeout_ms` is *late* and counts as lost (iputils' `-W` wait), as does a request dropped on
//! a full ring or still unanswered at the end of the run (`lost` = requests − replies). The mean
//! and the histogram count only the answered requests, so a report of the mean shows `lost` and
//! its parts beside it: `dropped`, `late` and `unanswered` (still pending at the end).

use serde::{Deserialize, Serialize};

use super::{WorkloadKind, WorkloadSpec};
use crate::time::{time_ns, Nanos, NS_PER_MS, NS_PER_US};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PingConfig {
    pub name: String,
    /// `ping -i`: time between two requests (default 1 s).
    #[serde(default = "d_interval")]
    pub interval_us: u64,
    /// When the first request arrives at the NIC (default 0).
    #[serde(default)]
    pub start_us: u64,
    /// A reply later than this after its request counts as lost (default 10 s).
    #[serde(default = "d_timeout")]
    pub timeout_ms: u64,
    /// The guest kernel's work per request: netfront receive, IP/ICMP, building the echo reply
    /// and queueing it on netfront's transmit ring (default 4 µs; a calibration parameter).
    #[serde(default = "d_echo")]
    pub echo_ns: u64,
    /// The guest vCPU netfront's event channel is bound to (default 0, where Linux binds it).
    #[serde(default)]
    pub vcpu: u32,
}

fn d_interval() -> u64 {
    1_000_000
}
fn d_timeout() -> u64 {
    10_000
}
fn d_echo() -> u64 {
    4_000
}

/// The checked times of a ping flow, in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PingTimes {
    pub interval: Nanos,
    pub start: Nanos,
    pub timeout: Nanos,
    pub echo: Nanos,
}

/// Counter indices of a ping workload.
pub const REQUESTS: u16 = 0;
pub const REPLIES: u16 = 1;
pub const LATE: u16 = 2;
pub const DROPPED: u16 = 3;
/// Its one histogram: round-trip times.
pub const RTT: u16 = 0;

impl PingConfig {
    pub fn times(&self) -> Result<PingTimes, (String, String)> {
        Ok(PingTimes {
            interval: time_ns("interval_us", self.interval_us, NS_PER_US)?,
            start: time_ns("start_us", self.start_us, NS_PER_US)?,
            timeout: time_ns("timeout_ms", self.timeout_ms, NS_PER_MS)?,
            echo: time_ns("echo_ns", self.echo_ns, 1)?,
        })
    }

    pub fn validate(&self, nr_vcpus: u32) -> Result<(), (String, String)> {
        let t = self.times()?;
        if t.interval == 0 {
            return Err(("interval_us".into(), "must be positive".into()));
        }
        if t.timeout == 0 {
            return Err(("timeout_ms".into(), "must be positive".into()));
        }
        if self.vcpu >= nr_vcpus {
            return Err((
                "vcpu".into(),
                format!(
                    "vCPU {} does not exist (the domain has {nr_vcpus} vCPUs)",
                    self.vcpu
                ),
            ));
        }
        Ok(())
    }

    /// A workload with no task: the engine's I/O path fills its counters and histogram.
    pub fn build(&self) -> WorkloadSpec {
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::Ping,
            tasks: vec![],
            channels: 0,
            counters: ["requests", "replies", "late", "dropped"]
                .map(String::from)
                .to_vec(),
            hists: vec!["rtt".into()],
            gap_pairs: vec![],
            tokens: vec![],
            hist_buckets: 0,
        }
    }
}

/// Derived counters: `lost` = requests − replies (late, dropped or unanswered at the end), and
/// `unanswered` = lost − late − dropped, the requests still pending when the run ended (their
/// reply was not back in the run; a timeout longer than what is left of the run lands here).
pub fn derived(counters: &[u64]) -> Vec<(String, u64)> {
    let (req, rep) = (counters[REQUESTS as usize], counters[REPLIES as usize]);
    let lost = req.saturating_sub(rep);
    let gone = counters[LATE as usize] + counters[DROPPED as usize];
    vec![
        ("lost".into(), lost),
        ("unanswered".into(), lost.saturating_sub(gone)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_splits_into_late_dropped_and_unanswered() {
        let mut c = [0u64; 4];
        c[REQUESTS as usize] = 10;
        c[REPLIES as usize] = 4;
        c[LATE as usize] = 1;
        c[DROPPED as usize] = 2;
        assert_eq!(
            derived(&c),
            vec![("lost".to_string(), 6), ("unanswered".to_string(), 3)]
        );
        c[REPLIES as usize] = 10;
        c[LATE as usize] = 0;
        c[DROPPED as usize] = 0;
        assert_eq!(
            derived(&c),
            vec![("lost".to_string(), 0), ("unanswered".to_string(), 0)]
        );
    }
}
