//! A CPU-bound loop: `while (1);`, one task per copy (seed 003's "infinite loop" load, seed 000's
//! competing guest).

use serde::{Deserialize, Serialize};

use super::{Dist, Step, TaskSpec, WorkloadKind, WorkloadSpec};
use crate::sched::Policy;
use crate::time::NS_PER_S;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CpuLoopConfig {
    pub name: String,
    /// Number of looping tasks.
    #[serde(default = "super::one")]
    pub copies: u32,
    #[serde(default)]
    pub nice: i32,
    /// vCPUs the tasks may run on (default: all).
    #[serde(default)]
    pub affinity: Option<Vec<u32>>,
    /// Pin copy k to vCPU k (modulo the affinity list or the vCPU count).
    #[serde(default)]
    pub pin_each: bool,
}

impl CpuLoopConfig {
    pub fn build(&self, nr_vcpus: u32) -> WorkloadSpec {
        let mut tasks = super::task_vec("copies", self.copies.into());
        tasks.extend((0..self.copies).map(|k| TaskSpec {
            name: format!("{}.{k}", self.name),
            // An hour-long compute step, repeated: the loop never blocks.
            program: vec![
                Step::Compute {
                    dur: Dist::Fixed(3600 * NS_PER_S),
                    kernel: false,
                },
                Step::Goto { to: 0, times: None },
            ],
            nice: self.nice,
            policy: Policy::Normal,
            rt_prio: 0,
            times: Default::default(),
            affinity: if self.pin_each {
                Some(vec![match &self.affinity {
                    Some(a) => a[k as usize % a.len()],
                    None => k % nr_vcpus.max(1),
                }])
            } else {
                self.affinity.clone()
            },
            start: 0,
        }));
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::CpuLoop,
            tasks,
            channels: 0,
            counters: vec![],
            hists: vec![],
            gap_pairs: vec![],
            tokens: vec![],
            hist_buckets: 0,
        }
    }
}
