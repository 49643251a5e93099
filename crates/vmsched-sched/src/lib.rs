//! vmsched-sched: every scheduling policy of vmsched, one file each.
pub mod guest;
pub mod host;
