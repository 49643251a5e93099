//! Guest schedulers (place tasks on vCPUs).
pub mod bfs;
pub mod cfs;
pub mod deadline;
pub mod eevdf;
pub mod linux_core;
pub mod rt;
