//! A VM boot burst (`kind = "vmboot"`): what a booting HVM guest does to the host's CPUs for a
//! while after `xl create` (seed 001, Fujitsu, Xen Summit 2008: "start HVM2 and HVM3 at the
//! same time" while a video plays on HVM1).
//!
//! Put it in a domain with `create_at_ms` (docs/scenarios.md, Domains created and destroyed):
//! its tasks start at the creation. One task per vCPU, pinned to it (the booting kernel keeps
//! every vCPU it has brought up busy): vCPU 0 from the start, the others `ap_start_ms` later
//! (the BIOS and boot loader run on the boot processor only; the OS starts the others). Each
//! alternates a CPU burst (`burst_us`, exponential) and a wait for emulated I/O (`io_us`,
//! exponential: the disk read or port access the device model in dom0 completes), until the
//! boot's `duration_ms` is over (on average: the number of rounds is the phase's length over
//! the mean round), then exits: the guest sits at its desktop, idle.
//!
//! Where the shape comes from: the talk shows the booting guests as "abrupt increase of CPU
//! utilization", and its `xm debug-keys r` dump during the boots has their four vCPUs almost
//! never leaving the active list (a/i 18..108 against 6595 for dom0 and 15495 for the video
//! guest) while one of them is BOOST: CPU-heavy, and blocking and waking now and then. The
//! durations are not in the document: the defaults (bursts of 20 ms, 1 ms I/O waits, 20 s) are
//! assumptions, written down in docs/seed001.md.
//!
//! **The I/O wait**, `io = "sleep"` (the default): a guest sleep whose expiry kicks the halted
//! vCPU through the host's wake hook (BOOST if UNDER); the vCPU is `blocked` while it waits and
//! nothing runs in dom0 for it (a scenario adds the device model's work as dom0 work of its own).
//!
//! `io = "ioreq"`: an emulated disk read as an HVM guest makes it, over the device-model round
//! trip of ERRATA X9 (sim/io.rs, docs/io.md; the domain must be an HVM guest with a driver
//! domain, its `[domain.device_model]` gives dom0's cost per access). The guest's IDE driver
//! writes the command (one port access: an `ioreq` step, the vCPU `offline` "blocked in Xen"
//! until qemu-dm in dom0 completes it with a direct wake), the disk serves the read while the
//! guest halts waiting for the completion interrupt (`io_us`, exponential: a guest sleep, the
//! vCPU `blocked`, woken by the kick as the injected interrupt is), and the driver then reads the
//! status and acknowledges it (`ioreqs - 1` more accesses). So `io_us` is the disk's (and
//! qemu-dm's asynchronous read's) service time, not the round trip's, which the device model's
//! costs and the host's scheduling add on top. Assumed: qemu-dm reads the disk asynchronously
//! (its IDE DMA path), so dom0 does not run and the vCPU is not in Xen during the disk's time;
//! the dom0 work that raises the completion interrupt is not modelled (it is folded into the
//! status read's round trip that follows it).
//!
//! Figure: `boot_cpu`, the CPU time the boot used in the measured window, in seconds; counters
//! `rounds` (bursts run) and `done` (vCPUs whose boot work ended in the window).

use serde::{Deserialize, Serialize};

use super::{Dist, Figure, Step, TaskSpec, WorkloadKind, WorkloadSpec};
use crate::sched::Policy;
use crate::time::{time_ns, Nanos, NS_PER_MS, NS_PER_US};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VmBootConfig {
    pub name: String,
    /// How long the boot keeps its vCPUs busy, from the start (default 20000 ms).
    #[serde(default = "d_duration")]
    pub duration_ms: u64,
    /// Mean CPU burst between two I/O waits (exponential; default 20000 µs).
    #[serde(default = "d_burst")]
    pub burst_us: u64,
    /// Mean wait for one emulated I/O (exponential; default 1000 µs; 0: no waits, the vCPUs
    /// compute for the whole boot, or with `io = "ioreq"` make only the accesses). With
    /// `io = "ioreq"` it is the disk's service time between the accesses, not the round trip.
    #[serde(default = "d_io")]
    pub io_us: u64,
    /// How an I/O is made: `"sleep"` (default: a guest sleep of `io_us`) or `"ioreq"` (the
    /// HVM device-model round trip, ERRATA X9: `ioreqs` emulated accesses around a disk wait of
    /// `io_us`; needs an HVM guest and a driver domain).
    #[serde(default)]
    pub io: BootIo,
    /// Emulated accesses per I/O with `io = "ioreq"`: the command before the disk's wait, the
    /// others after it (1..=16; default 2).
    #[serde(default = "d_ioreqs")]
    pub ioreqs: u32,
    /// When the vCPUs other than vCPU 0 join, after the start (default 0 ms).
    #[serde(default)]
    pub ap_start_ms: u64,
    /// When the boot starts, after the domain's creation (default 0).
    #[serde(default)]
    pub start_us: u64,
}

/// How a boot's I/O waits are made (`io`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BootIo {
    /// A guest sleep: the vCPU blocked, woken by a kick; no dom0 work.
    #[default]
    Sleep,
    /// The HVM device-model round trip (`ioreq` steps) around the disk's wait.
    Ioreq,
}

/// Most emulated accesses per I/O.
pub const MAX_IOREQS: u32 = 16;

fn d_ioreqs() -> u32 {
    2
}
fn d_duration() -> u64 {
    20_000
}
fn d_burst() -> u64 {
    20_000
}
fn d_io() -> u64 {
    1000
}

/// Counter indices of a boot.
pub const ROUNDS: u16 = 0;
pub const DONE: u16 = 1;

/// The checked times of a boot, in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootTimes {
    pub duration: Nanos,
    pub burst: Nanos,
    pub io: Nanos,
    pub ap_start: Nanos,
    pub start: Nanos,
}

impl VmBootConfig {
    pub fn times(&self) -> Result<BootTimes, (String, String)> {
        let t = BootTimes {
            duration: time_ns("duration_ms", self.duration_ms, NS_PER_MS)?,
            burst: time_ns("burst_us", self.burst_us, NS_PER_US)?,
            io: time_ns("io_us", self.io_us, NS_PER_US)?,
            ap_start: time_ns("ap_start_ms", self.ap_start_ms, NS_PER_MS)?,
            start: time_ns("start_us", self.start_us, NS_PER_US)?,
        };
        for (f, v) in [("duration_ms", t.duration), ("burst_us", t.burst)] {
            if v == 0 {
                return Err((f.into(), "must be positive".into()));
            }
        }
        if t.io > crate::time::MAX_EXP_MEAN_NS {
            return Err((
                "io_us".into(),
                format!(
                    "must be at most {} µs",
                    crate::time::MAX_EXP_MEAN_NS / NS_PER_US
                ),
            ));
        }
        if t.burst > crate::time::MAX_EXP_MEAN_NS {
            return Err((
                "burst_us".into(),
                format!(
                    "must be at most {} µs",
                    crate::time::MAX_EXP_MEAN_NS / NS_PER_US
                ),
            ));
        }
        if self.io == BootIo::Ioreq && !(1..=MAX_IOREQS).contains(&self.ioreqs) {
            return Err((
                "ioreqs".into(),
                format!("must be 1..={MAX_IOREQS}, got {}", self.ioreqs),
            ));
        }
        if t.ap_start >= t.duration {
            return Err((
                "ap_start_ms".into(),
                format!(
                    "must be less than duration_ms ({}), got {}",
                    self.duration_ms, self.ap_start_ms
                ),
            ));
        }
        Ok(t)
    }

    pub fn validate(&self) -> Result<(), (String, String)> {
        self.times().map(|_| ())
    }

    /// Rounds of burst + I/O that fill `phase` on average (at least one).
    pub fn rounds(t: &BootTimes, phase: Nanos) -> u32 {
        (phase / (t.burst + t.io)).clamp(1, u32::MAX as u64) as u32
    }

    pub fn build(&self, nr_vcpus: u32) -> WorkloadSpec {
        let t = self.times().expect("validated before build");
        let tasks = (0..nr_vcpus)
            .map(|v| {
                let start = if v == 0 { 0 } else { t.ap_start };
                let n = Self::rounds(&t, t.duration - start);
                let mut program = vec![
                    Step::Compute {
                        dur: Dist::Exp(t.burst),
                        kernel: false,
                    },
                    Step::Count { counter: ROUNDS },
                ];
                let ioreq = self.io == BootIo::Ioreq;
                if ioreq {
                    // The command's port access, before the disk serves it.
                    program.push(Step::Ioreq);
                }
                if t.io > 0 {
                    program.push(Step::Sleep {
                        dur: Dist::Exp(t.io),
                        slack: 0,
                    });
                }
                if ioreq {
                    // The status read and acknowledgement after the completion interrupt.
                    program.extend((1..self.ioreqs).map(|_| Step::Ioreq));
                }
                program.extend([
                    // The first round plus n - 1 more.
                    Step::Goto {
                        to: 0,
                        times: Some(n - 1),
                    },
                    Step::Count { counter: DONE },
                    Step::Exit,
                ]);
                TaskSpec {
                    name: format!("{}.v{v}", self.name),
                    program,
                    nice: 0,
                    policy: Policy::Normal,
                    rt_prio: 0,
                    times: Default::default(),
                    affinity: Some(vec![v]),
                    start: t.start + start,
                }
            })
            .collect();
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::VmBoot,
            tasks,
            channels: 0,
            counters: vec!["rounds".into(), "done".into()],
            hists: vec![],
            gap_pairs: vec![],
            tokens: vec![],
            hist_buckets: 0,
        }
    }
}

/// The boot's figure: CPU seconds used in the measured window.
pub fn figure(executed_ns: u64) -> Figure {
    Figure {
        name: "boot_cpu".into(),
        value: executed_ns as f64 / 1e9,
        unit: "s".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(toml: &str) -> VmBootConfig {
        toml::from_str(&format!("name = \"boot\"\n{toml}")).unwrap()
    }

    #[test]
    fn one_pinned_task_per_vcpu_the_others_joining_at_ap_start() {
        let s = cfg("ap_start_ms = 3000\nstart_us = 10").build(2);
        assert_eq!(s.kind, WorkloadKind::VmBoot);
        assert_eq!(s.tasks.len(), 2);
        assert_eq!(s.tasks[0].affinity, Some(vec![0]));
        assert_eq!(s.tasks[1].affinity, Some(vec![1]));
        assert_eq!(s.tasks[0].start, 10_000);
        assert_eq!(s.tasks[1].start, 10_000 + 3000 * NS_PER_MS);
    }

    #[test]
    fn the_rounds_fill_the_boot_on_average_and_the_task_then_exits() {
        // 20 s of 21 ms rounds: 952 rounds on vCPU 0; vCPU 1 joins at 3 s: 809.
        let s = cfg("ap_start_ms = 3000").build(2);
        let times = |k: usize| match s.tasks[k].program[3] {
            Step::Goto { to: 0, times } => times,
            ref o => panic!("{o:?}"),
        };
        assert_eq!(times(0), Some(951));
        assert_eq!(times(1), Some(808));
        assert_eq!(*s.tasks[0].program.last().unwrap(), Step::Exit);
        // A boot shorter than one round still runs one.
        let t = cfg("duration_ms = 1").times().unwrap();
        assert_eq!(VmBootConfig::rounds(&t, t.duration), 1);
    }

    #[test]
    fn bursts_and_io_waits_are_exponential_and_the_wait_has_no_slack() {
        let s = cfg("burst_us = 5000\nio_us = 300").build(1);
        assert_eq!(
            s.tasks[0].program[0],
            Step::Compute {
                dur: Dist::Exp(5 * NS_PER_MS),
                kernel: false
            }
        );
        assert_eq!(
            s.tasks[0].program[2],
            Step::Sleep {
                dur: Dist::Exp(300 * NS_PER_US),
                slack: 0
            }
        );
    }

    #[test]
    fn without_io_waits_the_vcpus_only_compute() {
        let s = cfg("io_us = 0").build(1);
        assert!(!s.tasks[0]
            .program
            .iter()
            .any(|p| matches!(p, Step::Sleep { .. })));
        assert_eq!(
            s.tasks[0].program[2],
            Step::Goto {
                to: 0,
                times: Some(999)
            }
        );
    }

    #[test]
    fn ioreq_io_is_the_command_access_the_disks_wait_then_the_other_accesses() {
        let s = cfg("io = \"ioreq\"\nioreqs = 3\nio_us = 300").build(1);
        let p = &s.tasks[0].program;
        assert_eq!(p[2], Step::Ioreq);
        assert_eq!(
            p[3],
            Step::Sleep {
                dur: Dist::Exp(300 * NS_PER_US),
                slack: 0
            }
        );
        assert_eq!(&p[4..6], &[Step::Ioreq, Step::Ioreq]);
        assert!(matches!(p[6], Step::Goto { to: 0, .. }));
        // Without a disk wait the accesses follow each other; the default is two.
        let p = cfg("io = \"ioreq\"\nio_us = 0").build(1).tasks[0]
            .program
            .clone();
        assert_eq!(&p[2..4], &[Step::Ioreq, Step::Ioreq]);
        assert!(matches!(p[4], Step::Goto { to: 0, .. }));
        // The default stays a plain sleep, with no access.
        assert!(!cfg("").build(1).tasks[0].program.contains(&Step::Ioreq));
    }

    #[test]
    fn bad_values_name_their_field() {
        for (toml, field) in [
            ("duration_ms = 0", "duration_ms"),
            ("burst_us = 0", "burst_us"),
            ("ap_start_ms = 20000", "ap_start_ms"),
            ("io_us = 18446744073709551615", "io_us"),
            ("io = \"ioreq\"\nioreqs = 0", "ioreqs"),
            ("io = \"ioreq\"\nioreqs = 17", "ioreqs"),
        ] {
            assert_eq!(cfg(toml).validate().unwrap_err().0, field, "{toml}");
        }
        assert!(toml::from_str::<VmBootConfig>("name = \"b\"\nboot_ms = 1").is_err());
    }

    #[test]
    fn the_figure_is_the_cpu_time_in_seconds() {
        let f = figure(1_500_000_000);
        assert_eq!(
            (f.name.as_str(), f.value, f.unit.as_str()),
            ("boot_cpu", 1.5, "s")
        );
    }
}
