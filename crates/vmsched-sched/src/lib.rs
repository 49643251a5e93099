//! vmsched-sched: every scheduling policy of vmsched, one file each, and the registries that
//! turn a scenario into a simulation.
pub mod build;
pub mod cpupool;
pub mod guest;
pub mod host;
pub mod import;

pub use build::{build, load, load_with, run, GuestSchedConfig, HostSchedConfig, Scenario};
