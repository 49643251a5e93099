//! The I/O path's scenario fields (issue 11 item 3; docs/io.md): a driver domain's netback
//! costs (`[domain.netback]`, read only with `driver = true`), an HVM guest's device model
//! (`[domain.device_model]`, read when its programs make emulated I/O accesses: ERRATA X9), and
//! the checks that tie an I/O workload to a driver domain. The guest-side options
//! (`evtchn_order`, `evtchn_word_bits`) are in `[domain.kernel]`.

use serde::{Deserialize, Serialize};

use super::{check_ns, DomainConfig, GuestType, Hypervisor, MachineConfig};
use crate::workload::program::StepConfig;
use crate::workload::vmboot::BootIo;
use crate::workload::WorkloadConfig;

/// Per-packet costs of a driver domain's network path (calibration parameters: the defaults
/// are round figures for a few-GHz x86 dom0, not measurements).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NetbackConfig {
    /// The NIC driver's receive interrupt and the bridge, per packet (default 2 µs).
    #[serde(default = "d_nic_rx")]
    pub nic_rx_ns: u64,
    /// netback's grant copy of a received packet into the guest's ring (default 3 µs).
    #[serde(default = "d_rx_copy")]
    pub rx_copy_ns: u64,
    /// netback's transmit work per packet: take it from the guest's ring, the bridge and the
    /// NIC driver's transmit (default 3 µs).
    #[serde(default = "d_tx")]
    pub tx_ns: u64,
    /// Slots of the NIC's receive ring and of each guest's rings; a packet that finds its ring
    /// full is dropped (default 256, netback's ring size).
    #[serde(default = "d_ring")]
    pub ring: u32,
    /// The driver domain's vCPU the NIC interrupt and the backend ports are bound to (default 0).
    #[serde(default)]
    pub vcpu: u32,
    /// Ports the driver domain has bound before the NIC's (its own VIRQs, IPIs, xenstore,
    /// console): they push the NIC and the backends to higher port numbers (default 0: the NIC
    /// is port 1, the guests' backends follow in creation order).
    #[serde(default)]
    pub reserved_ports: u32,
}

fn d_nic_rx() -> u64 {
    2_000
}
fn d_rx_copy() -> u64 {
    3_000
}
fn d_tx() -> u64 {
    3_000
}
fn d_ring() -> u32 {
    256
}

impl Default for NetbackConfig {
    fn default() -> Self {
        NetbackConfig {
            nic_rx_ns: d_nic_rx(),
            rx_copy_ns: d_rx_copy(),
            tx_ns: d_tx(),
            ring: d_ring(),
            vcpu: 0,
            reserved_ports: 0,
        }
    }
}

/// An HVM guest's device model (qemu-dm in the driver domain, one per HVM guest; ERRATA X9):
/// what dom0 spends on one emulated I/O access (an ioreq) of the guest, from the notification
/// of its ioreq port to the completion that wakes the guest's vCPU. Calibration parameters:
/// the defaults are round figures for a few-GHz x86 dom0 of the Xen 3.x era, not measurements.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DeviceModelConfig {
    /// dom0's kernel side: the event-channel driver's interrupt (`/dev/xen/evtchn`) and the
    /// wake-up of qemu-dm blocked on it (default 2 µs).
    #[serde(default = "d_dm_notify")]
    pub notify_ns: u64,
    /// qemu-dm's side: read the ioreq from the shared page, emulate the access, write the
    /// result and notify the ioreq port back (`xc_evtchn_notify`) (default 10 µs; must be
    /// positive: an emulated access is never free, and a program looping on them must let time
    /// pass).
    #[serde(default = "d_dm_emulate")]
    pub emulate_ns: u64,
    /// The driver domain's vCPU the guest's ioreq ports are bound to (default 0).
    #[serde(default)]
    pub vcpu: u32,
}

fn d_dm_notify() -> u64 {
    2_000
}
fn d_dm_emulate() -> u64 {
    10_000
}

impl Default for DeviceModelConfig {
    fn default() -> Self {
        DeviceModelConfig {
            notify_ns: d_dm_notify(),
            emulate_ns: d_dm_emulate(),
            vcpu: 0,
        }
    }
}

impl DeviceModelConfig {
    /// dom0's work per ioreq.
    pub fn cost_ns(&self) -> u64 {
        self.notify_ns.saturating_add(self.emulate_ns)
    }
}

/// Does domain `d` make emulated I/O accesses (a program with an `ioreq` step, or a boot with
/// `io = "ioreq"`)?
pub fn uses_ioreq<G>(d: &DomainConfig<G>) -> bool {
    first_ioreq(d).is_some()
}

/// The first workload of `d` that makes emulated I/O accesses, and its field that does.
fn first_ioreq<G>(d: &DomainConfig<G>) -> Option<(usize, &'static str)> {
    d.workloads.iter().enumerate().find_map(|(j, w)| match w {
        WorkloadConfig::Program(p) if p.steps.iter().any(|s| matches!(s, StepConfig::Ioreq)) => {
            Some((j, "steps"))
        }
        WorkloadConfig::VmBoot(b) if b.io == BootIo::Ioreq => Some((j, "io")),
        _ => None,
    })
}

/// Checks the I/O fields of every domain: word widths, the netback table, and that each I/O
/// workload has a driver domain (the first with `driver = true`) other than its own; an
/// `ioreq` step also needs an HVM guest on Xen x86 (the device model is qemu-dm in dom0).
/// Err((dotted field, message)).
pub(crate) fn validate<G>(
    m: &MachineConfig,
    domains: &[DomainConfig<G>],
) -> Result<(), (String, String)> {
    let driver = domains.iter().position(|d| d.driver);
    if let Some(k) = driver {
        // The driver domain's ports: its reserved ones, the NIC's, and a backend per flow,
        // within what its selector can address (64 words of `evtchn_word_bits` ports; port 0
        // is never used).
        let d = &domains[k];
        let flows = domains
            .iter()
            .flat_map(|o| &o.workloads)
            .filter(|w| matches!(w, WorkloadConfig::Ping(_) | WorkloadConfig::Stream(_)))
            .count() as u64;
        let ioreqs: u64 = domains
            .iter()
            .filter(|o| uses_ioreq(o))
            .map(|o| u64::from(o.vcpus))
            .sum();
        let need = 1 + u64::from(d.netback.reserved_ports) + 1 + flows + ioreqs;
        let room = u64::from(d.kernel.evtchn_word_bits) * 64;
        if need > room && matches!(d.kernel.evtchn_word_bits, 32 | 64) {
            return Err((
                format!("domain.{k}.netback.reserved_ports"),
                format!(
                    "the driver domain needs {need} event-channel ports (port 0, {} reserved, \
                     the NIC's, {flows} backends, {ioreqs} ioreq ports) but {} bits per word \
                     give {room}",
                    d.netback.reserved_ports, d.kernel.evtchn_word_bits
                ),
            ));
        }
    }
    for (i, d) in domains.iter().enumerate() {
        let at = |f: &str| format!("domain.{i}.{f}");
        let bits = d.kernel.evtchn_word_bits;
        if bits != 32 && bits != 64 {
            return Err((
                at("kernel.evtchn_word_bits"),
                format!("must be 32 or 64 (the guest's long), got {bits}"),
            ));
        }
        let n = &d.netback;
        check_ns(&at("netback.nic_rx_ns"), n.nic_rx_ns)?;
        check_ns(&at("netback.rx_copy_ns"), n.rx_copy_ns)?;
        check_ns(&at("netback.tx_ns"), n.tx_ns)?;
        if n.ring == 0 || n.ring > 1 << 16 {
            return Err((at("netback.ring"), "must be 1..=65536 slots".into()));
        }
        if n.vcpu >= d.vcpus {
            return Err((
                at("netback.vcpu"),
                format!(
                    "vCPU {} does not exist (the domain has {} vCPUs)",
                    n.vcpu, d.vcpus
                ),
            ));
        }
        if n.reserved_ports >= 1024 {
            return Err((at("netback.reserved_ports"), "must be below 1024".into()));
        }
        let dm = &d.device_model;
        check_ns(&at("device_model.notify_ns"), dm.notify_ns)?;
        check_ns(&at("device_model.emulate_ns"), dm.emulate_ns)?;
        if dm.emulate_ns == 0 {
            return Err((
                at("device_model.emulate_ns"),
                "must be positive (qemu-dm's emulation of one access takes time)".into(),
            ));
        }
        if let Some((j, f)) = first_ioreq(d) {
            let field = format!("domain.{i}.workload.{j}.{f}");
            let what = if f == "io" {
                "a boot's io = \"ioreq\""
            } else {
                "an `ioreq` step"
            };
            let hvm = m.guest_type(d.guest_type) == Ok(GuestType::Hvm);
            if m.hypervisor != Hypervisor::Xen || m.arch != super::Arch::X86 || !hvm {
                return Err((
                    field,
                    format!(
                        "{what} is an HVM guest's emulated I/O access on Xen x86: set \
                         guest_type = \"hvm\" (machine.hypervisor = \"xen\", arch = \"x86\")"
                    ),
                ));
            }
            match driver {
                None => {
                    return Err((
                        field,
                        format!(
                            "{what} needs a driver domain running the device model: mark one \
                             [[domain]] with driver = true"
                        ),
                    ))
                }
                Some(k) if k == i => {
                    return Err((
                        field,
                        format!(
                            "{what} runs in an HVM guest served by the driver domain, not in the \
                             driver domain itself"
                        ),
                    ))
                }
                Some(k) => {
                    if dm.vcpu >= domains[k].vcpus {
                        return Err((
                            at("device_model.vcpu"),
                            format!(
                                "the driver domain's vCPU {} does not exist (it has {} vCPUs)",
                                dm.vcpu, domains[k].vcpus
                            ),
                        ));
                    }
                }
            }
        }
        for (j, w) in d.workloads.iter().enumerate() {
            let kind = match w {
                WorkloadConfig::Ping(_) => "ping",
                WorkloadConfig::Stream(_) => "stream",
                _ => continue,
            };
            let field = format!("domain.{i}.workload.{j}.kind");
            match driver {
                None => {
                    return Err((
                        field,
                        format!(
                            "{kind} needs a driver domain: mark one [[domain]] with driver = true"
                        ),
                    ))
                }
                Some(k) if k == i => {
                    return Err((
                        field,
                        format!(
                            "{kind} runs in a guest behind the driver domain, not in the driver \
                         domain itself"
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}
