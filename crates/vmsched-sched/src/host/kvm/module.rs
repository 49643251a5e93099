//! `[host.kvm]`: the KVM host's module parameters that shape a vCPU's exits, named as the
//! modules name them (`kvm`: `halt_poll_ns_grow`, `halt_poll_ns_grow_start`,
//! `halt_poll_ns_shrink`; `kvm_intel`: `ple_gap`, `ple_window`, `ple_window_grow`,
//! `ple_window_shrink`, `ple_window_max`; `kvm_amd`: `pause_filter_thresh`,
//! `pause_filter_count`, `pause_filter_count_grow`, `pause_filter_count_shrink`,
//! `pause_filter_count_max`), with the defaults of the host kernel's version
//! ([`KvmVersion`], from `[host.sched]`). `machine.halt_poll_ns` stays the cap.
//!
//! Sources (read for facts): `virt/kvm/kvm_main.c` (the three `halt_poll_ns_*` parameters;
//! `halt_poll_ns_shrink` is 0 in 5.10 and 6.6 and 2 from the 2023 change "KVM: enable halt
//! polling shrink parameter by default", posted after 6.6's release, in 6.12);
//! `arch/x86/kvm/x86.h` (`KVM_DEFAULT_PLE_GAP` 128, `KVM_VMX_DEFAULT_PLE_WINDOW` 4096,
//! `KVM_DEFAULT_PLE_WINDOW_GROW` 2, `KVM_DEFAULT_PLE_WINDOW_SHRINK` 0,
//! `KVM_VMX_DEFAULT_PLE_WINDOW_MAX` UINT_MAX, `KVM_SVM_DEFAULT_PLE_WINDOW` 3000,
//! `KVM_SVM_DEFAULT_PLE_WINDOW_MAX` USHRT_MAX), `arch/x86/kvm/vmx/vmx.c` and `svm/svm.c`
//! (a `ple_gap` / `pause_filter_thresh` of 0 leaves PAUSE in the guest: no exits). Linux 3.17
//! has neither halt polling (4.0) nor a growing PLE window (3.18): its `ple_window` is fixed.
//! arm64 traps WFE without any window (`kvm_handle_wfx`).

use serde::{Deserialize, Serialize};
use vmsched_core::hv::{ExitModel, HaltPoll, KvmKnobs, PleWindow};
use vmsched_core::scenario::Arch;

/// The x86 vendor's KVM module: `kvm_intel` (VMX's PLE) or `kvm_amd` (SVM's pause filter).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    #[default]
    Intel,
    Amd,
}

/// The KVM release of the host kernel (`[host.sched]`'s version).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KvmVersion {
    V3_17,
    V5_10,
    V6_6,
    V6_12,
    V6_18,
}

/// `[host.kvm]`: every field optional; absent = the version's default.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct KvmModuleParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halt_poll_ns_grow: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halt_poll_ns_grow_start: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halt_poll_ns_shrink: Option<u32>,
    /// Which x86 module's parameters apply (default "intel").
    #[serde(default)]
    pub vendor: Vendor,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ple_gap: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ple_window: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ple_window_grow: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ple_window_shrink: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ple_window_max: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_filter_thresh: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_filter_count: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_filter_count_grow: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_filter_count_shrink: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_filter_count_max: Option<u16>,
}

impl KvmModuleParams {
    /// The names of the fields that are given, per module.
    fn given(&self) -> [(&'static str, bool); 10] {
        [
            ("ple_gap", self.ple_gap.is_some()),
            ("ple_window", self.ple_window.is_some()),
            ("ple_window_grow", self.ple_window_grow.is_some()),
            ("ple_window_shrink", self.ple_window_shrink.is_some()),
            ("ple_window_max", self.ple_window_max.is_some()),
            ("pause_filter_thresh", self.pause_filter_thresh.is_some()),
            ("pause_filter_count", self.pause_filter_count.is_some()),
            (
                "pause_filter_count_grow",
                self.pause_filter_count_grow.is_some(),
            ),
            (
                "pause_filter_count_shrink",
                self.pause_filter_count_shrink.is_some(),
            ),
            (
                "pause_filter_count_max",
                self.pause_filter_count_max.is_some(),
            ),
        ]
    }

    /// Refuses a parameter the host does not have: x86 PAUSE-loop parameters on arm64, the
    /// other vendor's, the growing window's and halt polling's on 3.17, a zero window. The
    /// field is relative to `[host.kvm]`.
    pub fn check(&self, arch: Arch, v: KvmVersion) -> Result<(), (String, String)> {
        let given = self.given();
        for (i, (name, set)) in given.iter().enumerate() {
            if !set {
                continue;
            }
            if arch == Arch::Arm64 {
                return Err((
                    (*name).into(),
                    "is an x86 KVM parameter: arm64 traps every WFE, with no window".into(),
                ));
            }
            let intel = i < 5;
            if intel != (self.vendor == Vendor::Intel) {
                return Err((
                    (*name).into(),
                    format!(
                        "is a parameter of {}: set vendor = \"{}\"",
                        if intel { "kvm_intel" } else { "kvm_amd" },
                        if intel { "intel" } else { "amd" }
                    ),
                ));
            }
            if v == KvmVersion::V3_17 && !matches!(*name, "ple_gap" | "ple_window") {
                return Err((
                    (*name).into(),
                    "Linux 3.17's PAUSE-loop window is fixed (the growing window came with \
                     3.18)"
                        .into(),
                ));
            }
        }
        if v == KvmVersion::V3_17 {
            for (name, set) in [
                ("halt_poll_ns_grow", self.halt_poll_ns_grow.is_some()),
                (
                    "halt_poll_ns_grow_start",
                    self.halt_poll_ns_grow_start.is_some(),
                ),
                ("halt_poll_ns_shrink", self.halt_poll_ns_shrink.is_some()),
            ] {
                if set {
                    return Err((
                        name.into(),
                        "Linux 3.17 has no halt polling (it came with 4.0)".into(),
                    ));
                }
            }
        }
        if self.ple_window == Some(0) {
            return Err(("ple_window".into(), "must be at least 1 (cycles)".into()));
        }
        if self.pause_filter_count == Some(0) {
            return Err((
                "pause_filter_count".into(),
                "must be at least 1 (PAUSE instructions)".into(),
            ));
        }
        if self
            .halt_poll_ns_grow_start
            .is_some_and(|g| g > vmsched_core::time::MAX_TIME_NS)
        {
            return Err(("halt_poll_ns_grow_start".into(), "too long".into()));
        }
        Ok(())
    }

    /// The knobs of KVM `v` on `arch` with these parameters; `halt_poll_ns` the machine's cap
    /// (None: `KVM_HALT_POLL_NS_DEFAULT` of the arch, 0 on 3.17).
    pub fn knobs(&self, arch: Arch, v: KvmVersion, halt_poll_ns: Option<u64>) -> KvmKnobs {
        let max_ns = halt_poll_ns.unwrap_or(match v {
            KvmVersion::V3_17 => 0,
            _ => ExitModel::kvm_halt_poll_default(arch),
        });
        let halt_poll = HaltPoll {
            max_ns,
            grow: self.halt_poll_ns_grow.unwrap_or(2),
            grow_start: self.halt_poll_ns_grow_start.unwrap_or(10_000),
            shrink: self.halt_poll_ns_shrink.unwrap_or(match v {
                KvmVersion::V3_17 | KvmVersion::V5_10 | KvmVersion::V6_6 => 0,
                KvmVersion::V6_12 | KvmVersion::V6_18 => 2,
            }),
        };
        let fixed = v == KvmVersion::V3_17;
        let ple = match (arch, self.vendor) {
            (Arch::Arm64, _) => None,
            (Arch::X86, Vendor::Intel) if self.ple_gap == Some(0) => None,
            (Arch::X86, Vendor::Intel) => Some(PleWindow {
                base: self.ple_window.unwrap_or(4096) as u64,
                grow: if fixed {
                    0
                } else {
                    self.ple_window_grow.unwrap_or(2) as u64
                },
                shrink: self.ple_window_shrink.unwrap_or(0) as u64,
                max: self.ple_window_max.unwrap_or(u32::MAX) as u64,
            }),
            (Arch::X86, Vendor::Amd) if self.pause_filter_thresh == Some(0) => None,
            (Arch::X86, Vendor::Amd) => Some(PleWindow {
                base: self.pause_filter_count.unwrap_or(3000) as u64,
                grow: self.pause_filter_count_grow.unwrap_or(2) as u64,
                shrink: self.pause_filter_count_shrink.unwrap_or(0) as u64,
                max: self.pause_filter_count_max.unwrap_or(u16::MAX) as u64,
            }),
        };
        KvmKnobs { halt_poll, ple }
    }

    /// PAUSE is left to the guest (`ple_gap = 0`, `pause_filter_thresh = 0`): no PAUSE-loop
    /// exits at all (`kvm_pause_in_guest`).
    pub fn pause_in_guest(&self, arch: Arch) -> bool {
        arch == Arch::X86
            && match self.vendor {
                Vendor::Intel => self.ple_gap == Some(0),
                Vendor::Amd => self.pause_filter_thresh == Some(0),
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_version_and_the_vendor() {
        let p = KvmModuleParams::default();
        let k = p.knobs(Arch::X86, KvmVersion::V5_10, None);
        assert_eq!(
            (
                k.halt_poll.max_ns,
                k.halt_poll.grow,
                k.halt_poll.grow_start,
                k.halt_poll.shrink
            ),
            (200_000, 2, 10_000, 0)
        );
        assert_eq!(
            p.knobs(Arch::X86, KvmVersion::V6_6, None).halt_poll.shrink,
            0
        );
        assert_eq!(
            p.knobs(Arch::X86, KvmVersion::V6_12, None).halt_poll.shrink,
            2
        );
        assert_eq!(
            p.knobs(Arch::Arm64, KvmVersion::V6_18, None)
                .halt_poll
                .max_ns,
            500_000
        );
        assert_eq!(
            p.knobs(Arch::Arm64, KvmVersion::V3_17, None)
                .halt_poll
                .max_ns,
            0
        );
        let vmx = k.ple.unwrap();
        assert_eq!(
            (vmx.base, vmx.grow, vmx.shrink, vmx.max),
            (4096, 2, 0, u32::MAX as u64)
        );
        let amd = KvmModuleParams {
            vendor: Vendor::Amd,
            ..Default::default()
        };
        let svm = amd.knobs(Arch::X86, KvmVersion::V6_12, None).ple.unwrap();
        assert_eq!(
            (svm.base, svm.grow, svm.shrink, svm.max),
            (3000, 2, 0, 65535)
        );
        assert!(p.knobs(Arch::Arm64, KvmVersion::V6_12, None).ple.is_none());
        assert_eq!(
            p.knobs(Arch::X86, KvmVersion::V3_17, None)
                .ple
                .unwrap()
                .grow,
            0
        );
        let gap0 = KvmModuleParams {
            ple_gap: Some(0),
            ..Default::default()
        };
        assert!(gap0.pause_in_guest(Arch::X86));
    }

    #[test]
    fn parameters_the_host_lacks_are_refused_by_name() {
        let ple = KvmModuleParams {
            ple_window_grow: Some(4),
            ..Default::default()
        };
        let field = |r: Result<(), (String, String)>| r.unwrap_err().0;
        assert_eq!(
            field(ple.check(Arch::Arm64, KvmVersion::V6_12)),
            "ple_window_grow"
        );
        assert_eq!(
            field(ple.check(Arch::X86, KvmVersion::V3_17)),
            "ple_window_grow"
        );
        let amd = KvmModuleParams {
            vendor: Vendor::Amd,
            ..ple.clone()
        };
        assert_eq!(
            field(amd.check(Arch::X86, KvmVersion::V6_12)),
            "ple_window_grow"
        );
        assert!(ple.check(Arch::X86, KvmVersion::V5_10).is_ok());
        let hp = KvmModuleParams {
            halt_poll_ns_shrink: Some(2),
            ..Default::default()
        };
        assert_eq!(
            field(hp.check(Arch::X86, KvmVersion::V3_17)),
            "halt_poll_ns_shrink"
        );
    }
}
