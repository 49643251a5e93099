//! Load weights and scaled time (Linux v5.10: the weight tables of `kernel/sched/core.c`,
//! `struct load_weight` and `__calc_delta` of `kernel/sched/fair.c`): the nice-to-weight mapping
//! and the 32-bit fixed-point arithmetic that turns real time into virtual time and slices.

use vmsched_core::sched::Policy;

const NICE_0_LOAD: u64 = 1024;
const WMULT_CONST: u64 = 0xffff_ffff;
const WMULT_SHIFT: u32 = 32;
const WEIGHT_IDLEPRIO: u64 = 3;
const WMULT_IDLEPRIO: u64 = 1_431_655_765;

/// Linux v5.10: sched_prio_to_weight (index = nice + 20)
const SCHED_PRIO_TO_WEIGHT: [u32; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904,
    3906, 3121, 2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87,
    70, 56, 45, 36, 29, 23, 18, 15,
];

/// Linux v5.10: sched_prio_to_wmult (≈ 2^32 / weight, as tabulated)
const SCHED_PRIO_TO_WMULT: [u32; 40] = [
    48388, 59856, 76040, 92818, 118348, 147320, 184698, 229616, 287308, 360437, 449829, 563644,
    704093, 875809, 1099582, 1376151, 1717300, 2157191, 2708050, 3363326, 4194304, 5237765,
    6557202, 8165337, 10153587, 12820798, 15790321, 19976592, 24970740, 31350126, 39045157,
    49367440, 61356676, 76695844, 95443717, 119304647, 148102320, 186737708, 238609294, 286331153,
];

/// Linux v5.10: struct load_weight
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LoadWeight {
    pub(crate) weight: u64,
    pub(crate) inv_weight: u64,
}

impl LoadWeight {
    /// Linux v5.10: set_load_weight (table values; SCHED_IDLE weighs 3)
    pub(crate) fn of_task(nice: i32, policy: Policy) -> Self {
        if policy == Policy::Idle {
            return LoadWeight {
                weight: WEIGHT_IDLEPRIO,
                inv_weight: WMULT_IDLEPRIO,
            };
        }
        let i = (nice.clamp(-20, 19) + 20) as usize;
        LoadWeight {
            weight: SCHED_PRIO_TO_WEIGHT[i] as u64,
            inv_weight: SCHED_PRIO_TO_WMULT[i] as u64,
        }
    }

    /// A queue's weight with its lazily computed inverse. Linux v5.10: __update_inv_weight
    pub(crate) fn of_queue(weight: u64) -> Self {
        let inv_weight = match weight {
            0 => WMULT_CONST,
            w if w >= WMULT_CONST => 1,
            w => WMULT_CONST / w,
        };
        LoadWeight { weight, inv_weight }
    }
}

/// `delta × weight / lw.weight` in 32-bit fixed point. Linux v5.10: __calc_delta
pub(crate) fn calc_delta(delta: u64, weight: u64, lw: LoadWeight) -> u64 {
    let mut fact = weight;
    let mut shift = WMULT_SHIFT;
    while fact >> 32 != 0 {
        fact >>= 1;
        shift -= 1;
    }
    fact *= lw.inv_weight;
    while fact >> 32 != 0 {
        fact >>= 1;
        shift -= 1;
    }
    ((delta as u128 * fact as u128) >> shift) as u64
}

/// Linux v5.10: calc_delta_fair
pub(crate) fn calc_delta_fair(delta: u64, lw: LoadWeight) -> u64 {
    if lw.weight != NICE_0_LOAD {
        calc_delta(delta, NICE_0_LOAD, lw)
    } else {
        delta
    }
}
