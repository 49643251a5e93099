//! Guest schedulers (place tasks on vCPUs).
pub mod cfs;
