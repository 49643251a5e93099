//! The conformance suite every scheduler instantiates (`host_conformance!`, `guest_conformance!`).
//!
//! Each test drives one level through `vmsched_core::testkit::Harness`, which also asserts on
//! every pick that the entity is runnable, inside its hard affinity and not running elsewhere,
//! that a present slice is positive, and that every timer a policy arms has a key below
//! `nr_timers()` and a deadline not in the past.
//!
//! Common cases: a lone entity, progress, idle CPUs taking wake-ups, affinity, work conservation,
//! block and wake, a wake-up rescheduling a CPU in the entity's affinity, yield, CPU offline
//! and online (and their determinism). Per level:
//! parameter change (weight at a host level, nice at a guest level), removal, timers and
//! determinism over a scripted run of every hook (with the level's own parameter change), and at
//! a host level pause. The Linux KVM host (`linux_host_conformance!`) takes the guest cases plus
//! its run-queue length and directed yield.
//!
//! `cases.rs` holds the suite and its macros; `host.rs`, `guest.rs` and `kvm.rs` instantiate it
//! for each policy at that level.

// `cases` first: its macros are in scope for the level files after it.
#[macro_use]
mod cases;
mod guest;
mod host;
mod kvm;
