//! Xen's ARINC 653 scheduler, as in Xen 4.20 (`xen/common/sched/arinc653.c`, tag
//! RELEASE-4.20.0; the schedule structure of `xen/include/public/sysctl.h`) and
//! xen-schedulers.md §5. Facts only; the code is our own.
//!
//! # What it models
//!
//! A fixed cyclic schedule: a *major frame* divided into *minor frames* (slots), each giving one
//! named vCPU a fixed run time, in table order; the rest of the major frame, if the slots do not
//! fill it, is idle. A slot runs its vCPU only if that vCPU exists, is awake (woken and not
//! put to sleep since), runnable and on this CPU; otherwise the CPU idles for the whole slot
//! (no slack is given to anyone else). There are no priorities, budgets or yields. The CPU's
//! timer fires at every slot boundary whether a vCPU runs or not.
//!
//! `a653sched_do_schedule`: when the current major frame has ended, a new one starts *at the
//! time the CPU happened to reschedule* (so frames drift by the timer's latency, one timer
//! entry per frame); otherwise the slot index advances past every slot whose end has passed,
//! slot ends being counted from the frame's start. The slice runs to the slot's end.
//!
//! Default table (no `schedule` given, Xen 4.20): empty, and every vCPU of domain 0 (here the
//! first `[[domain]]`) appends a 10 ms slot when it is created, the major frame growing by as
//! much. With no slot at all the CPU idles and re-checks every 10 ms.
//!
//! # Engine mapping
//!
//! ARINC653 implements the Xen ops ([`XenOps`]) and runs on the Xen core (`host/xen_core.rs`):
//! `Arinc653::sched` builds the pair. `insert_unit` is `a653sched_alloc_udata` (with
//! `update_schedule_units`), `remove_unit` is `a653sched_free_udata`, `wake` is
//! `a653sched_unit_wake`, `sleep` is `a653sched_unit_sleep`, `do_schedule` is
//! `a653sched_do_schedule`, `pick_resource` is `a653sched_pick_resource`. A slot names a domain
//! (by its `[[domain]]` name, standing for Xen's UUID handle) and a vCPU id; a slot whose vCPU
//! does not exist (yet) idles.
//!
//! # CPUs
//!
//! Upstream intends ARINC653 for a cpupool of one CPU. With more CPUs its code keeps one slot
//! index and one frame for the whole pool (static variables), and each CPU runs the slot's vCPU
//! only if that vCPU's `processor` is this CPU: at any instant at most one vCPU of the pool
//! runs, on its own CPU, and the other CPUs idle. vCPUs stay where they were placed
//! (`a653sched_pick_resource` keeps a vCPU's CPU while it is in the pool). This model does
//! the same. Every CPU of the pool reschedules at every slot boundary.
//!
//! # Simplifications
//!
//! * The table is set at build (`xl`-less: `xc_sched_arinc653_schedule_set` before the domains
//!   start); run-time table changes (`adjust_global`) are not modelled.
//! * No tasklets. Timer slop and entry latency are the Xen core's (`timer_slop_ns`,
//!   `timer_entry_ns`); a slot shorter than the slop is stretched to it, as on hardware.

use crate::host::xen_core::{
    put_unit, XenCore, XenCtx, XenOps, TIMER_ENTRY_DEFAULT_NS, TIMER_SLOP_DEFAULT_NS,
};
use vmsched_core::cpuset::{CpuSet, MAX_CPUS};
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{Pick, WakeInfo};
use vmsched_core::time::Nanos;

/// `ARINC653_MAX_DOMAINS_PER_SCHEDULE`.
pub const MAX_SLOTS: usize = 64;
/// `DEFAULT_TIMESLICE`: a dom0 vCPU's automatic slot, and the idle re-check of an empty table.
pub const DEFAULT_TIMESLICE_NS: i64 = 10_000_000;

/// One minor frame of the table (`struct xen_sysctl_arinc653_schedule` entry).
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SlotConfig {
    /// The domain's `[[domain]]` name (Xen: its UUID handle).
    pub domain: String,
    /// The vCPU id within the domain.
    pub vcpu: u32,
    /// The slot's length (µs).
    pub runtime_us: u64,
}

/// `[host] scheduler = "arinc653"`: the schedule table and the Xen core's timer settings.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Arinc653Params {
    /// The minor frames in order (1..=64); absent: Xen 4.20's default (a 10 ms slot per vCPU of
    /// the first domain).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Vec<SlotConfig>>,
    /// The major frame (µs), at least the sum of the slots; absent: that sum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major_frame_us: Option<u64>,
    /// Xen's `timer_slop` boot parameter (ns), applied by the Xen core (§1.8).
    pub timer_slop_ns: Nanos,
    /// Timer entry latency (ns), applied by the Xen core (host/xen_core.rs).
    pub timer_entry_ns: Nanos,
}

impl Default for Arinc653Params {
    fn default() -> Self {
        Arinc653Params {
            schedule: None,
            major_frame_us: None,
            timer_slop_ns: TIMER_SLOP_DEFAULT_NS,
            timer_entry_ns: TIMER_ENTRY_DEFAULT_NS,
        }
    }
}

impl Arinc653Params {
    /// Checks the table as `arinc653_sched_set` does (1..=64 slots, every runtime > 0, their sum
    /// within a major frame > 0) and the core's timer settings. Messages start with the field.
    pub fn validate(&self) -> Result<(), String> {
        let t = self.timer_entry_ns;
        if t > 1_000_000 {
            return Err(format!("timer_entry_ns: {t} must be in 0..=1000000 (ns)"));
        }
        let s = self.timer_slop_ns;
        if s > 1_000_000_000 {
            return Err(format!("timer_slop_ns: {s} must be in 0..=1000000000 (ns)"));
        }
        let Some(slots) = &self.schedule else {
            if self.major_frame_us.is_some() {
                return Err(
                    "major_frame_us: needs a `schedule` (the default table sets its own)".into(),
                );
            }
            return Ok(());
        };
        if slots.is_empty() || slots.len() > MAX_SLOTS {
            return Err(format!(
                "schedule: {} slots, must be 1..={MAX_SLOTS}",
                slots.len()
            ));
        }
        let mut sum: u64 = 0;
        for (i, s) in slots.iter().enumerate() {
            if s.runtime_us == 0 || s.runtime_us > u32::MAX as u64 {
                return Err(format!(
                    "schedule.{i}.runtime_us: {} must be in 1..=4294967295 (µs)",
                    s.runtime_us
                ));
            }
            sum += s.runtime_us;
        }
        if let Some(m) = self.major_frame_us {
            if m == 0 || m < sum {
                return Err(format!(
                    "major_frame_us: {m} must be at least the slots' sum, {sum} µs"
                ));
            }
        }
        Ok(())
    }

    /// The major frame (ns) of a given table.
    pub fn major_frame_ns(&self) -> Option<i64> {
        let slots = self.schedule.as_ref()?;
        let sum: u64 = slots.iter().map(|s| s.runtime_us).sum();
        Some(self.major_frame_us.unwrap_or(sum) as i64 * 1000)
    }
}

/// A slot of the table as the policy holds it (`sched_entry_t`).
#[derive(Clone, Debug)]
pub struct Slot {
    /// Domain index (the entity group) and vCPU id.
    pub domain: u32,
    pub vcpu: u32,
    pub runtime: i64,
    /// The vCPU, once it exists.
    unit: Option<EntityId>,
}

impl Slot {
    /// A slot of `runtime` ns for vCPU `vcpu` of domain `domain`.
    pub fn new(domain: u32, vcpu: u32, runtime: i64) -> Slot {
        Slot {
            domain,
            vcpu,
            runtime,
            unit: None,
        }
    }
}

/// Per-vCPU state (`arinc653_unit_t` and `processor(v)`).
#[derive(Clone, Debug)]
struct Unit {
    domain: u32,
    vcpu: u32,
    awake: bool,
    gone: bool,
    processor: CpuId,
}

/// ARINC653 as the engine runs it: the policy on the Xen core.
pub type Arinc653Sched = XenCore<Arinc653>;

/// The ARINC653 scheduler of one pool holding every CPU of the level.
pub struct Arinc653 {
    online: CpuSet,
    /// The table, and whether it is Xen's default (dom0 vCPUs append their slots).
    slots: Vec<Slot>,
    default_table: bool,
    major_frame: i64,
    next_major_frame: i64,
    /// The pool-wide slot index and slot end (upstream's static variables).
    sched_index: usize,
    next_switch_time: i64,
    units: Vec<Unit>,
}

impl Arinc653 {
    /// ARINC653 on `ncpus` CPUs with `table` as (slots, major frame ns), or Xen's default
    /// table if None.
    pub fn new(ncpus: usize, table: Option<(Vec<Slot>, i64)>) -> Arinc653 {
        assert!(
            (1..=MAX_CPUS).contains(&ncpus),
            "arinc653: needs 1..={MAX_CPUS} CPUs, got {ncpus}"
        );
        let default_table = table.is_none();
        let (slots, major_frame) = table.unwrap_or_default();
        assert!(
            slots.len() <= MAX_SLOTS,
            "arinc653: at most {MAX_SLOTS} slots"
        );
        assert!(
            slots.iter().map(|s| s.runtime).sum::<i64>() <= major_frame,
            "arinc653: the slots exceed the major frame"
        );
        Arinc653 {
            online: CpuSet::first_n(ncpus),
            slots,
            default_table,
            major_frame,
            next_major_frame: 0,
            sched_index: 0,
            next_switch_time: 0,
            units: Vec::new(),
        }
    }

    /// ARINC653 on the Xen core, with the timer settings of `params` and the table resolved
    /// to domain indices (`table`: as for [`Arinc653::new`]).
    pub fn sched(
        params: &Arinc653Params,
        ncpus: usize,
        table: Option<(Vec<Slot>, i64)>,
    ) -> Arinc653Sched {
        XenCore::with_timers(
            Arinc653::new(ncpus, table),
            params.timer_slop_ns,
            params.timer_entry_ns,
        )
    }

    /// The table (slots in order) and the major frame (ns).
    pub fn table(&self) -> (&[Slot], i64) {
        (&self.slots, self.major_frame)
    }

    /// Xen: update_schedule_units. Each slot's vCPU, if it exists.
    fn update_schedule_units(&mut self) {
        for s in &mut self.slots {
            s.unit = self
                .units
                .iter()
                .position(|u| !u.gone && u.domain == s.domain && u.vcpu == s.vcpu)
                .map(|i| EntityId(i as u32));
        }
    }
}

impl XenOps for Arinc653 {
    fn name(&self) -> &'static str {
        "arinc653"
    }

    /// Xen: a653sched_alloc_udata. With the default table a vCPU of domain 0 appends a 10 ms
    /// slot; the slots find their vCPUs. The vCPU starts asleep on its initial CPU.
    fn insert_unit(&mut self, x: &mut XenCtx, e: EntityId) {
        let p = &x.ent(e).params;
        let domain = p.group;
        // Its number in its domain: the domain's vCPUs before it (with cpupools one may come
        // again after a migration, and then keeps its number and its default slot).
        let before = e.idx().min(self.units.len());
        let vcpu = self.units[..before]
            .iter()
            .filter(|u| u.domain == domain)
            .count() as u32;
        let again = e.idx() < self.units.len();
        if self.default_table && domain == 0 && !again && self.slots.len() < MAX_SLOTS {
            self.slots.push(Slot::new(0, vcpu, DEFAULT_TIMESLICE_NS));
            self.major_frame += DEFAULT_TIMESLICE_NS;
        }
        let processor = if self.online.contains(p.initial_cpu) {
            p.initial_cpu
        } else {
            self.online.first().expect("arinc653: an online CPU")
        };
        put_unit(
            &mut self.units,
            e,
            Unit {
                domain,
                vcpu,
                awake: false,
                gone: false,
                processor,
            },
            |u| Unit {
                domain: u32::MAX,
                gone: true,
                ..u.clone()
            },
        );
        self.update_schedule_units();
    }

    /// Xen: a653sched_free_udata. Its slot no longer has a vCPU (it idles).
    fn remove_unit(&mut self, _x: &mut XenCtx, e: EntityId) {
        self.units[e.idx()].gone = true;
        self.update_schedule_units();
    }

    /// Xen: a653sched_unit_wake. Awake, and its CPU reschedules.
    fn wake(&mut self, x: &mut XenCtx, e: EntityId, _info: WakeInfo) {
        self.units[e.idx()].awake = true;
        x.resched(self.units[e.idx()].processor);
    }

    /// Xen: a653sched_unit_sleep. Asleep; its CPU reschedules if it runs it.
    fn sleep(&mut self, x: &mut XenCtx, e: EntityId) {
        self.units[e.idx()].awake = false;
        let cpu = self.units[e.idx()].processor;
        if x.cpu(cpu).curr == Some(e) {
            x.resched(cpu);
        }
    }

    /// ARINC653 has no yield hook: SCHEDOP_yield only reschedules.
    fn yield_(&mut self, _x: &mut XenCtx, _e: EntityId) {}

    /// Xen: a653sched_do_schedule. Starts a new major frame at `now` if the last has ended,
    /// else advances past the slots that have ended; runs the slot's vCPU if it exists, is
    /// awake, runnable and on this CPU, else idles; the slice runs to the slot's end (to the
    /// frame's end past the last slot; 10 ms with no slot).
    fn do_schedule(&mut self, x: &mut XenCtx, cpu: CpuId) -> Pick {
        let now = x.now() as i64;
        let n = self.slots.len();
        if n == 0 {
            self.next_major_frame = now + DEFAULT_TIMESLICE_NS;
        } else if now >= self.next_major_frame {
            self.sched_index = 0;
            self.next_major_frame = now + self.major_frame;
            self.next_switch_time = now + self.slots[0].runtime;
        } else {
            while now >= self.next_switch_time && self.sched_index < n {
                self.sched_index += 1;
                if self.sched_index < n {
                    self.next_switch_time += self.slots[self.sched_index].runtime;
                }
            }
        }
        if self.sched_index >= n {
            self.next_switch_time = self.next_major_frame;
        }
        let next = self
            .slots
            .get(self.sched_index)
            .and_then(|s| s.unit)
            .filter(|&e| {
                let u = &self.units[e.idx()];
                u.awake && x.unit_runnable(e) && u.processor == cpu
            });
        let slice = self.next_switch_time - now;
        assert!(slice > 0, "arinc653: the slot ends after now");
        Pick {
            next,
            slice: Some(slice as u64),
        }
    }

    /// Xen: a653sched_pick_resource. Its CPU while that is in the pool, else the pool's first.
    fn pick_resource(&mut self, _x: &mut XenCtx, e: EntityId) -> CpuId {
        let cpu = self.units[e.idx()].processor;
        if self.online.contains(cpu) {
            cpu
        } else {
            self.online.first().unwrap_or(cpu)
        }
    }

    /// No migrate hook upstream: the core's `sched_set_res` moves `processor(v)`.
    fn migrate(&mut self, _x: &mut XenCtx, e: EntityId, cpu: CpuId) {
        self.units[e.idx()].processor = cpu;
    }

    /// Xen `processor(v)`.
    fn processor(&self, e: EntityId) -> CpuId {
        self.units[e.idx()].processor
    }

    /// The pCPU left the pool (no per-CPU data upstream).
    fn remove_cpu(&mut self, _x: &mut XenCtx, cpu: CpuId) {
        self.online.remove(cpu);
    }

    /// Xen: a653_switch_sched (the pCPU joined the pool).
    fn add_cpu(&mut self, _x: &mut XenCtx, cpu: CpuId) {
        self.online.insert(cpu);
    }
}

#[cfg(test)]
mod tests;
