//! vmsched-core: the engine of vmsched, a deterministic discrete-event simulator of CPU
//! scheduling in virtualized systems.
//!
//! It knows time, ids, the machine, the event queue, the recursive CPU/entity model, the
//! [`sched::Scheduler`] trait, workloads, metrics and the scenario schema. It knows no policy:
//! schedulers live in `vmsched-sched`. It has no Python in it.

pub mod cpupool;
pub mod cpuset;
pub mod hv;
pub mod ids;
pub mod import;
pub mod pv;
pub mod queue;
pub mod sched;
pub mod testkit;
pub mod time;

pub use cpuset::CpuSet;
pub use ids::*;
pub use sched::*;
pub use time::*;
pub mod budget;
pub mod metrics;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod sim;
pub mod trace;
pub mod workload;
