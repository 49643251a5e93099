//! Host schedulers (place vCPUs on physical CPUs).
pub mod credit2;
pub mod pinned;
pub mod xen_core;
