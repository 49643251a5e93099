//! Host schedulers (place vCPUs on physical CPUs).
pub mod credit2;
pub mod pinned;
