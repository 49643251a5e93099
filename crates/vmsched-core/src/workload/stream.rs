//! stream: a windowed packet flow from a remote sender into a guest behind a Xen driver domain
//! (spec/workloads.md §7.2: the seed-002 "network-streaming guests"; issue 11 item 5).
//!
//! The sender keeps at most `window` packets unacknowledged, and puts them on the wire no faster
//! than the line rate (`rate_mbps`, `packet_bytes`). Each packet takes the receive path of
//! docs/io.md (NIC → driver domain → netback copy → the guest's netfront port); the guest
//! kernel's receive (`rx_ns` per packet, kernel work like a ping's echo) queues an ACK on
//! netfront's transmit ring, which netback transmits. The sender sees an ACK `wire_us` after it
//! leaves the NIC, and its next packet arrives `wire_us` after it is sent.
//!
//! Losses, as TCP recovers from them (Linux with SACK, RFC 5681 §3.2 and RFC 6675): a packet
//! dropped on a full ring (the NIC's receive ring, or the guest's) leaves a hole; every ACK of a
//! packet sent after it that reaches the sender is a duplicate ACK for it, and at the
//! `dupack_threshold`-th (3, Linux's `tcp_reordering`) the sender retransmits it at once (fast
//! retransmit); without enough later packets (a tail loss, a tiny window) it is sent again after
//! `rto_ms` (Linux's minimum retransmission timeout). An ACK dropped on the guest's full
//! transmit ring is covered by the next ACK that gets through (ACKs are cumulative), or by the
//! timeout. `dupack_threshold = 0` turns both rules off (every loss, data or ACK, waits for
//! `rto_ms`).
//! Like ping, the workload has no task: the engine's I/O path (`sim/io.rs`) fills its metrics.
//!
//! The figure: the achieved bandwidth, the bytes the guest received over the measured window in
//! Mbit/s. Counters: `packets` and `bytes` received, `dropped`; histogram `ack_rtt`: from a
//! packet's arrival at the NIC to its ACK leaving it.

use serde::{Deserialize, Serialize};

use super::{Figure, WorkloadKind, WorkloadSpec};
use crate::time::{time_ns, Nanos, NS_PER_MS, NS_PER_US};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    pub name: String,
    /// Packets in flight, unacknowledged, at most (default 64).
    #[serde(default = "d_window")]
    pub window: u32,
    /// Bytes per packet (default 1500, an Ethernet frame).
    #[serde(default = "d_bytes")]
    pub packet_bytes: u32,
    /// The line rate the sender puts packets on the wire at (default 1000 Mbit/s).
    #[serde(default = "d_rate")]
    pub rate_mbps: u32,
    /// One-way wire latency between the sender and the NIC (default 50 µs).
    #[serde(default = "d_wire")]
    pub wire_us: u64,
    /// When the first packets arrive at the NIC (default 0).
    #[serde(default)]
    pub start_us: u64,
    /// The guest kernel's receive work per packet: netfront, IP, TCP, the ACK (default 3 µs).
    #[serde(default = "d_rx")]
    pub rx_ns: u64,
    /// A dropped packet not recovered by fast retransmit is sent again this long after
    /// (default 200 ms, `TCP_RTO_MIN`).
    #[serde(default = "d_rto")]
    pub rto_ms: u64,
    /// Duplicate ACKs that make the sender retransmit a dropped packet at once (default 3,
    /// Linux's `tcp_reordering`; 0: no fast retransmit, every loss waits for `rto_ms`).
    #[serde(default = "d_dupack")]
    pub dupack_threshold: u32,
    /// The guest vCPU netfront's event channel is bound to (default 0).
    #[serde(default)]
    pub vcpu: u32,
}

fn d_window() -> u32 {
    64
}
fn d_bytes() -> u32 {
    1500
}
fn d_rate() -> u32 {
    1000
}
fn d_wire() -> u64 {
    50
}
fn d_rx() -> u64 {
    3_000
}
fn d_rto() -> u64 {
    200
}
fn d_dupack() -> u32 {
    3
}

/// A stream flow's checked parameters, in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamParams {
    pub window: u32,
    pub bytes: u32,
    /// Time between two packets on the wire at the line rate.
    pub gap: Nanos,
    pub wire: Nanos,
    pub start: Nanos,
    pub rx: Nanos,
    pub rto: Nanos,
    /// Fast retransmit after this many duplicate ACKs (0: off).
    pub dupacks: u32,
}

/// Counter indices of a stream workload.
pub const PACKETS: u16 = 0;
pub const BYTES: u16 = 1;
pub const DROPPED: u16 = 2;
/// Losses recovered by fast retransmit, and by the retransmission timeout (dropped ACKs
/// included when the timeout covers them).
pub const FAST_RETRANSMITS: u16 = 3;
pub const TIMEOUTS: u16 = 4;
/// Its histogram: from arrival at the NIC to the ACK leaving it.
pub const ACK_RTT: u16 = 0;

impl StreamConfig {
    pub fn params(&self) -> Result<StreamParams, (String, String)> {
        Ok(StreamParams {
            window: self.window,
            bytes: self.packet_bytes,
            // bits / (Mbit/s) = µs; × 1000 in ns.
            gap: (self.packet_bytes as u64 * 8 * 1000).div_ceil(self.rate_mbps.max(1) as u64),
            wire: time_ns("wire_us", self.wire_us, NS_PER_US)?,
            start: time_ns("start_us", self.start_us, NS_PER_US)?,
            rx: time_ns("rx_ns", self.rx_ns, 1)?,
            rto: time_ns("rto_ms", self.rto_ms, NS_PER_MS)?,
            dupacks: self.dupack_threshold,
        })
    }

    pub fn validate(&self, nr_vcpus: u32) -> Result<(), (String, String)> {
        if self.window == 0 || self.window > 1 << 16 {
            return Err(("window".into(), "must be 1..=65536 packets".into()));
        }
        if !(64..=65536).contains(&self.packet_bytes) {
            return Err(("packet_bytes".into(), "must be 64..=65536".into()));
        }
        if self.rate_mbps == 0 {
            return Err(("rate_mbps".into(), "must be positive".into()));
        }
        if self.rto_ms == 0 {
            return Err(("rto_ms".into(), "must be positive".into()));
        }
        self.params()?;
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

    pub fn build(&self) -> WorkloadSpec {
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::Stream,
            tasks: vec![],
            channels: 0,
            counters: [
                "packets",
                "bytes",
                "dropped",
                "fast_retransmits",
                "timeouts",
            ]
            .map(String::from)
            .to_vec(),
            hists: vec!["ack_rtt".into()],
            gap_pairs: vec![],
            tokens: vec![],
            hist_buckets: 0,
        }
    }
}

/// The achieved bandwidth over `secs` of measured time.
pub fn figure(counters: &[u64], secs: f64) -> Figure {
    Figure {
        name: "bandwidth".into(),
        value: counters[BYTES as usize] as f64 * 8.0 / 1e6 / secs.max(1e-9),
        unit: "Mbit/s".into(),
    }
}
