//! Video playback (`kind = "video"`): a player that decodes one frame per frame period and must
//! have it ready by the frame's display time (seed 001, Fujitsu, Xen Summit 2008: a 1280x720,
//! 8 Mbit/s video played on an HVM guest whose graphics board, sound and USB controllers are
//! passed through; frames are dropped when other guests boot).
//!
//! **The player's loop** (one task, [`Step::Frame`] then a decode [`Step::Compute`]): the task
//! sleeps until the next frame boundary (`1 / fps`), is woken there by its device's interrupt,
//! decodes the frame (`decode_us`, drawn uniformly in `decode_us ± decode_spread_pct` % per
//! frame, from the task's own seeded stream) and hands it to the display, which shows it at the
//! *next* boundary (`due` = one frame period after the decode was due to start: the player
//! decodes one frame ahead, a queue of one frame). Then it sleeps until the next boundary again.
//!
//! **A late frame** (decoded after its display time) is handled as the real players with
//! audio as the master clock handle it (`late = "drop"`, the default): shown late if it is late
//! by at most `max_lateness_us`, dropped otherwise; and the frames whose display time passed
//! while the player was still decoding or waiting for a CPU are never decoded (they count as
//! dropped): the player goes on at once with the first frame whose display time is still to
//! come. Sources: GStreamer's video sinks drop
//! a buffer later than `max-lateness`, 20 ms by default for video sinks (`GstVideoSink`, on top
//! of `GstBaseSink`'s `max-lateness` and its QoS messages that make decoders skip frames);
//! ffplay (`framedrop`, on by default when the audio is the master clock) drops a decoded frame
//! at display time when the clock is already past the next frame's time, and drops frames at
//! the decoder that are already late against the audio clock. `late = "show"` is a player
//! without frame dropping (mplayer without `-framedrop`): every frame is decoded and shown, in
//! order, however late, and the player does not sleep until it has caught up. Which player the
//! talk used is not said (docs/seed001.md).
//!
//! **The device interrupt.** The frame clock is the passed-through device's interrupt (the
//! sound card's period or the display's vertical blank). Its delivery is modelled with the
//! engine's guest timer path, which is what a device interrupt to an HVM guest does at the host
//! level: Xen's `hvm_do_IRQ_dpci` injects it through the guest's virtual interrupt controller,
//! which kicks the vCPU (`vcpu_kick` → `vcpu_unblock` → the scheduler's wake hook: BOOST if
//! UNDER, then tickle; spec/xen-schedulers.md §1.9). So a halted vCPU is woken through the host
//! scheduler, and a preempted one handles the interrupt when it runs again. Assumed: the
//! interrupt has no timer slack and reaches the vCPU the player last ran on (the guest's IRQ
//! affinity and an IPI to another vCPU are not modelled); its handler's own cost is not
//! charged.
//!
//! **The sound** (`audio_period_us` > 0; the talk's "drop frames and tracks" are dropped frames
//! and sound skips): a second task, free to run on any vCPU, woken by the sound device's period
//! interrupt the same way, computes `audio_us` to refill the device's buffer with the next
//! period, which must be done before the device reaches it, one period later; a refill that
//! is late at all is an underrun (a skip: sound cannot be played late), and periods passed
//! meanwhile are underruns too. 10 ms is the usual device period (the Windows audio engine's
//! default period, `IAudioClient::GetDevicePeriod`); the buffer depth of one period ahead is
//! assumed.
//!
//! Figures: `dropped` frames (the headline, unit `frames`); counters `frames` (frames due in the
//! measured window: shown + late + dropped), `shown` (on time), `late` (shown late), `dropped`,
//! `skipped` (the part of `dropped` never decoded); histograms `lateness` (how late each
//! late or dropped decoded frame was) and `wake` (from the interrupt's time to the player
//! running, the wake-up latency the talk's worst wait time stands for). With sound, the same
//! five counters and two histograms again, prefixed `audio_` (`audio_dropped`: underruns).

use serde::{Deserialize, Serialize};

use super::{Dist, Figure, Step, TaskSpec, WorkloadKind, WorkloadSpec};
use crate::sched::Policy;
use crate::time::{time_ns, Nanos, NS_PER_S, NS_PER_US};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VideoConfig {
    pub name: String,
    /// Frames per second (default 30).
    #[serde(default = "d_fps")]
    pub fps: u32,
    /// Mean decode (and render) cost of one frame, in CPU time (default 5000 µs).
    #[serde(default = "d_decode")]
    pub decode_us: u64,
    /// Per-frame spread of the decode cost: uniform in `decode_us` ± this % (default 40).
    #[serde(default = "d_spread")]
    pub decode_spread_pct: u32,
    /// What a late frame becomes: "drop" (default) or "show".
    #[serde(default)]
    pub late: LatePolicy,
    /// With `late = "drop"`: a frame later than this is dropped (default 20000 µs, GStreamer's
    /// video sink `max-lateness`).
    #[serde(default = "d_lateness")]
    pub max_lateness_us: u64,
    /// When playback starts (its first frame boundary is one period later).
    #[serde(default)]
    pub start_us: u64,
    #[serde(default)]
    pub nice: i32,
    /// vCPUs the player may run on (default: all; not the sound thread).
    #[serde(default)]
    pub affinity: Option<Vec<u32>>,
    /// The sound device's period: a sound thread refills its buffer every period (default 0:
    /// no sound thread).
    #[serde(default)]
    pub audio_period_us: u64,
    /// CPU time of one refill (default 200 µs).
    #[serde(default = "d_audio")]
    pub audio_us: u64,
}

/// What the player does with a frame decoded after its display time.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LatePolicy {
    /// Show it if it is at most `max_lateness_us` late, else drop it; skip the frames whose
    /// display time passed meanwhile.
    #[default]
    Drop,
    /// Show every frame, in order, however late.
    Show,
}

fn d_fps() -> u32 {
    30
}
fn d_decode() -> u64 {
    5000
}
fn d_spread() -> u32 {
    40
}
fn d_lateness() -> u64 {
    20_000
}
fn d_audio() -> u64 {
    200
}

/// Counter indices of a video workload.
pub const FRAMES: u16 = 0;
pub const SHOWN: u16 = 1;
pub const LATE: u16 = 2;
pub const DROPPED: u16 = 3;
pub const SKIPPED: u16 = 4;
/// Its histograms.
pub const LATENESS: u16 = 0;
pub const WAKE: u16 = 1;
/// The sound thread's counters and histograms start after the player's.
pub const AUDIO_COUNTERS: u16 = 5;
pub const AUDIO_HISTS: u16 = 2;

/// The checked times of a player, in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VideoTimes {
    pub period: Nanos,
    pub decode_lo: Nanos,
    pub decode_hi: Nanos,
    pub max_lateness: Nanos,
    pub start: Nanos,
    /// The sound device's period (0: no sound thread) and a refill's CPU time.
    pub audio_period: Nanos,
    pub audio: Nanos,
}

impl VideoConfig {
    pub fn times(&self) -> Result<VideoTimes, (String, String)> {
        if self.fps == 0 || self.fps > 1000 {
            return Err(("fps".into(), format!("must be 1..=1000, got {}", self.fps)));
        }
        if self.decode_spread_pct > 100 {
            return Err((
                "decode_spread_pct".into(),
                format!("must be 0..=100, got {}", self.decode_spread_pct),
            ));
        }
        let decode = time_ns("decode_us", self.decode_us, NS_PER_US)?;
        if decode == 0 {
            return Err(("decode_us".into(), "must be positive".into()));
        }
        let spread = decode / 100 * u64::from(self.decode_spread_pct)
            + decode % 100 * u64::from(self.decode_spread_pct) / 100;
        Ok(VideoTimes {
            period: NS_PER_S / u64::from(self.fps),
            decode_lo: decode - spread,
            decode_hi: decode + spread,
            max_lateness: time_ns("max_lateness_us", self.max_lateness_us, NS_PER_US)?,
            start: time_ns("start_us", self.start_us, NS_PER_US)?,
            audio_period: time_ns("audio_period_us", self.audio_period_us, NS_PER_US)?,
            audio: time_ns("audio_us", self.audio_us, NS_PER_US)?,
        })
    }

    pub fn validate(&self) -> Result<(), (String, String)> {
        let t = self.times()?;
        if t.audio_period > 0 && t.audio_period < 1000 * NS_PER_US {
            return Err((
                "audio_period_us".into(),
                format!(
                    "must be 0 (no sound) or at least 1000, got {}",
                    self.audio_period_us
                ),
            ));
        }
        if t.audio_period > 0 && t.audio == 0 {
            return Err((
                "audio_us".into(),
                "must be positive with a sound thread".into(),
            ));
        }
        super::check_nice(self.nice)
    }

    pub fn build(&self) -> WorkloadSpec {
        let t = self.times().expect("validated before build");
        let names = ["frames", "shown", "late", "dropped", "skipped"];
        let mut tasks = vec![TaskSpec {
            name: format!("{}.player", self.name),
            program: vec![
                Step::Frame {
                    period: t.period,
                    max_lateness: t.max_lateness,
                    drop_late: self.late == LatePolicy::Drop,
                    counters: 0,
                    hists: 0,
                },
                Step::Compute {
                    dur: Dist::Uniform(t.decode_lo, t.decode_hi),
                    kernel: false,
                },
                Step::Goto { to: 0, times: None },
            ],
            nice: self.nice,
            policy: Policy::Normal,
            rt_prio: 0,
            times: Default::default(),
            affinity: self.affinity.clone(),
            start: t.start,
        }];
        let mut counters: Vec<String> = names.map(String::from).to_vec();
        let mut hists = vec!["lateness".to_string(), "wake".to_string()];
        if t.audio_period > 0 {
            tasks.push(TaskSpec {
                name: format!("{}.audio", self.name),
                program: vec![
                    // Sound cannot be late: any lateness is an underrun.
                    Step::Frame {
                        period: t.audio_period,
                        max_lateness: 0,
                        drop_late: true,
                        counters: AUDIO_COUNTERS,
                        hists: AUDIO_HISTS,
                    },
                    Step::Compute {
                        dur: Dist::Fixed(t.audio),
                        kernel: false,
                    },
                    Step::Goto { to: 0, times: None },
                ],
                nice: self.nice,
                policy: Policy::Normal,
                rt_prio: 0,
                times: Default::default(),
                affinity: None,
                start: t.start,
            });
            counters.extend(names.map(|n| format!("audio_{n}")));
            hists.extend(["audio_lateness".to_string(), "audio_wake".to_string()]);
        }
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::Video,
            tasks,
            channels: 0,
            counters,
            hists,
            gap_pairs: vec![],
            tokens: vec![],
            hist_buckets: 0,
        }
    }
}

/// The verdict on one decoded frame: its display time was `due`, it was ready at `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Shown,
    /// Shown this late.
    Late(Nanos),
    /// Dropped, this late.
    Dropped(Nanos),
}

/// The rule of a late frame (module doc): on time, shown late within `max_lateness` (or
/// always, when late frames are not dropped), else dropped.
pub fn verdict(due: Nanos, now: Nanos, max_lateness: Nanos, drop_late: bool) -> Verdict {
    match now.checked_sub(due) {
        None | Some(0) => Verdict::Shown,
        Some(l) if drop_late && l > max_lateness => Verdict::Dropped(l),
        Some(l) => Verdict::Late(l),
    }
}

/// The boundary at which the player next starts a decode, after finishing at `now` the frame
/// whose decode was due at `boundary` (and whose display time is `boundary + period`), and how
/// many frames it skips (never decodes) on the way. Showing every frame: the next boundary,
/// even if it has passed (the player then decodes at once), nothing skipped. Dropping: the
/// frames whose display time has already passed are skipped; the next one to decode is the
/// first whose display time is still to come, at once if its boundary has passed.
pub fn next_boundary(boundary: Nanos, period: Nanos, now: Nanos, drop_late: bool) -> (Nanos, u64) {
    let next = boundary + period;
    if !drop_late || next + period > now {
        return (next, 0);
    }
    // The frames due at boundary + (k + 1)·period ≤ now, k = 1..=n, are skipped.
    let n = (now - boundary) / period - 1;
    (boundary + (n + 1) * period, n)
}

/// The headline figure: frames dropped over the measured window.
pub fn figure(counters: &[u64]) -> Figure {
    Figure {
        name: "dropped".into(),
        value: counters[DROPPED as usize] as f64,
        unit: "frames".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS;

    fn cfg(toml: &str) -> VideoConfig {
        toml::from_str(&format!("name = \"v\"\n{toml}")).unwrap()
    }

    #[test]
    fn defaults_are_30_fps_and_a_5_ms_decode_within_40_percent() {
        let t = cfg("").times().unwrap();
        assert_eq!(t.period, 33_333_333);
        assert_eq!((t.decode_lo, t.decode_hi), (3 * NS_PER_MS, 7 * NS_PER_MS));
        assert_eq!(t.max_lateness, 20 * NS_PER_MS);
    }

    #[test]
    fn bad_values_name_their_field() {
        for (toml, field) in [
            ("fps = 0", "fps"),
            ("decode_us = 0", "decode_us"),
            ("decode_spread_pct = 101", "decode_spread_pct"),
            ("nice = 20", "nice"),
            ("max_lateness_us = 18446744073709551615", "max_lateness_us"),
        ] {
            assert_eq!(cfg(toml).validate().unwrap_err().0, field, "{toml}");
        }
        assert!(toml::from_str::<VideoConfig>("name = \"v\"\nlate = \"skip\"").is_err());
    }

    #[test]
    fn a_frame_ready_by_its_display_time_is_shown() {
        assert_eq!(verdict(100, 100, 20, true), Verdict::Shown);
        assert_eq!(verdict(100, 40, 20, true), Verdict::Shown);
    }

    #[test]
    fn a_late_frame_is_shown_within_the_lateness_and_dropped_beyond_it() {
        assert_eq!(verdict(100, 120, 20, true), Verdict::Late(20));
        assert_eq!(verdict(100, 121, 20, true), Verdict::Dropped(21));
        // A player that does not drop shows it however late.
        assert_eq!(verdict(100, 1000, 20, false), Verdict::Late(900));
    }

    #[test]
    fn a_dropping_player_skips_the_frames_whose_display_time_has_passed() {
        // On time: sleep until the next boundary, nothing skipped.
        assert_eq!(next_boundary(0, 10, 9, true), (10, 0));
        // Finished on the next boundary: the frame due at 20 can still be made, at once.
        assert_eq!(next_boundary(0, 10, 10, true), (10, 0));
        assert_eq!(next_boundary(0, 10, 19, true), (10, 0));
        // 35 after the boundary: the frames due at 20 and 30 have passed; decode the one due
        // at 40 at once (its boundary, 30, has passed too).
        assert_eq!(next_boundary(0, 10, 35, true), (30, 2));
        assert_eq!(next_boundary(0, 10, 20, true), (20, 1));
        // A player that shows every frame decodes the next one at once, skipping nothing.
        assert_eq!(next_boundary(0, 10, 35, false), (10, 0));
    }

    #[test]
    fn the_program_is_frame_decode_loop_starting_at_start_us() {
        let s = cfg("start_us = 500\nlate = \"show\"").build();
        assert_eq!(s.kind, WorkloadKind::Video);
        assert_eq!(s.tasks.len(), 1);
        assert_eq!(s.tasks[0].start, 500 * NS_PER_US);
        assert!(matches!(
            s.tasks[0].program[0],
            Step::Frame {
                drop_late: false,
                counters: 0,
                hists: 0,
                ..
            }
        ));
        assert_eq!(s.counters[DROPPED as usize], "dropped");
        assert_eq!(s.hists[WAKE as usize], "wake");
        assert_eq!(s.counters.len(), AUDIO_COUNTERS as usize);
    }

    #[test]
    fn a_sound_thread_refills_every_period_and_any_lateness_is_an_underrun() {
        let s = cfg("audio_period_us = 10000\naudio_us = 300\naffinity = [0]").build();
        assert_eq!(s.tasks.len(), 2);
        let a = &s.tasks[1];
        assert_eq!(a.affinity, None);
        assert_eq!(
            a.program[0],
            Step::Frame {
                period: 10 * NS_PER_MS,
                max_lateness: 0,
                drop_late: true,
                counters: AUDIO_COUNTERS,
                hists: AUDIO_HISTS,
            }
        );
        assert_eq!(
            a.program[1],
            Step::Compute {
                dur: Dist::Fixed(300 * NS_PER_US),
                kernel: false
            }
        );
        assert_eq!(
            s.counters[(AUDIO_COUNTERS + DROPPED) as usize],
            "audio_dropped"
        );
        assert_eq!(s.hists[(AUDIO_HISTS + WAKE) as usize], "audio_wake");
        for (toml, field) in [
            ("audio_period_us = 999", "audio_period_us"),
            ("audio_period_us = 10000\naudio_us = 0", "audio_us"),
        ] {
            assert_eq!(cfg(toml).validate().unwrap_err().0, field, "{toml}");
        }
    }
}
