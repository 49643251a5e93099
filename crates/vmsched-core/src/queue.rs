//! The event queue: an indexed 4-ary heap of timer *slots*, ordered by (time, sequence).
//!
//! Every event source in the engine is a slot allocated once at build time (a CPU's scheduler
//! timer, a vCPU's guest tick, a task's wake-up, ...). Arming a slot that is already armed moves
//! it; cancelling removes it. The queue therefore never holds a stale event, and its size is
//! bounded by the number of slots. Ties at equal time break by the sequence number taken when the
//! slot was (re-)armed, i.e. by insertion order, never by address or hash order (the ns-3 /
//! SimPy rule), so the same scenario and seed give the same run on every machine.

use crate::time::SimTime;

/// A timer slot, allocated by [`EventQueue::add_slot`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlotId(pub u32);

const NOT_QUEUED: u32 = u32::MAX;

/// Heap arity: a 4-ary heap is shallower than a binary one and keeps a node's children in one
/// cache line, which matters because every event is one pop and usually one arm.
const ARITY: usize = 4;
// `sift_down`'s tournament is written for four children.
const _: () = assert!(ARITY == 4);

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// (time << 64) | seq: one integer comparison orders by time, then by insertion.
    key: u128,
    slot: SlotId,
}

impl Entry {
    #[inline]
    fn time(&self) -> SimTime {
        (self.key >> 64) as SimTime
    }
}

#[derive(Default)]
pub struct EventQueue {
    heap: Vec<Entry>,
    /// Position of each slot in `heap`, or NOT_QUEUED.
    pos: Vec<u32>,
    seq: u64,
}

impl EventQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Allocates a new, disarmed slot.
    pub fn add_slot(&mut self) -> SlotId {
        self.pos.push(NOT_QUEUED);
        self.heap.reserve(1);
        SlotId(self.pos.len() as u32 - 1)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    #[inline]
    pub fn is_armed(&self, s: SlotId) -> bool {
        self.pos[s.0 as usize] != NOT_QUEUED
    }

    /// Deadline of an armed slot.
    #[inline]
    pub fn deadline(&self, s: SlotId) -> Option<SimTime> {
        let p = self.pos[s.0 as usize];
        (p != NOT_QUEUED).then(|| self.heap[p as usize].time())
    }

    /// Arms `s` at `time`, replacing any earlier deadline. The slot takes a fresh sequence number,
    /// so among events at the same time it now comes last.
    pub fn arm(&mut self, s: SlotId, time: SimTime) {
        self.seq += 1;
        let e = Entry {
            key: ((time as u128) << 64) | self.seq as u128,
            slot: s,
        };
        let p = self.pos[s.0 as usize];
        if p == NOT_QUEUED {
            self.heap.push(e);
            let i = self.heap.len() - 1;
            self.sift_up(i, e);
        } else {
            let i = p as usize;
            let old = self.heap[i].key;
            if e.key < old {
                self.sift_up(i, e);
            } else {
                self.sift_down(i, e);
            }
        }
    }

    /// Arms `s` at `time` unless it is already armed no later than that.
    pub fn arm_min(&mut self, s: SlotId, time: SimTime) {
        match self.deadline(s) {
            Some(t) if t <= time => {}
            _ => self.arm(s, time),
        }
    }

    pub fn cancel(&mut self, s: SlotId) {
        let p = self.pos[s.0 as usize];
        if p == NOT_QUEUED {
            return;
        }
        self.remove_at(p as usize);
    }

    /// Time of the next event.
    #[inline]
    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.first().map(|e| e.time())
    }

    /// Removes and returns the next event.
    pub fn pop(&mut self) -> Option<(SimTime, SlotId)> {
        let e = *self.heap.first()?;
        self.remove_at(0);
        Some((e.time(), e.slot))
    }

    fn remove_at(&mut self, i: usize) {
        let removed = self.heap[i].slot;
        self.pos[removed.0 as usize] = NOT_QUEUED;
        let last = self.heap.pop().expect("remove_at on an empty heap");
        if i < self.heap.len() {
            if i > 0 && last.key < self.heap[(i - 1) / ARITY].key {
                self.sift_up(i, last);
            } else {
                self.sift_down(i, last);
            }
        }
    }

    /// Places `e` at or above hole `i`.
    fn sift_up(&mut self, mut i: usize, e: Entry) {
        while i > 0 {
            let parent = (i - 1) / ARITY;
            let p = self.heap[parent];
            if e.key >= p.key {
                break;
            }
            self.heap[i] = p;
            self.pos[p.slot.0 as usize] = i as u32;
            i = parent;
        }
        self.heap[i] = e;
        self.pos[e.slot.0 as usize] = i as u32;
    }

    /// Places `e` at or below hole `i`.
    fn sift_down(&mut self, mut i: usize, e: Entry) {
        let n = self.heap.len();
        loop {
            let first = ARITY * i + 1;
            let (c, ck) = if first + ARITY <= n {
                // A full node (the common case): the least of four keys by a tournament, with
                // no loop and one bounds check. Keys are unique (the sequence number), so the
                // least child is the one a scan would find.
                let ch: &[Entry; ARITY] = self.heap[first..first + ARITY]
                    .try_into()
                    .expect("a full node has ARITY children");
                let (a, ak) = least(0, ch[0].key, 1, ch[1].key);
                let (b, bk) = least(2, ch[2].key, 3, ch[3].key);
                let (m, mk) = least(a, ak, b, bk);
                (first + m, mk)
            } else if first < n {
                let mut c = first;
                let mut ck = self.heap[first].key;
                for j in first + 1..n {
                    let k = self.heap[j].key;
                    if k < ck {
                        c = j;
                        ck = k;
                    }
                }
                (c, ck)
            } else {
                break;
            };
            if ck >= e.key {
                break;
            }
            let child = self.heap[c];
            self.heap[i] = child;
            self.pos[child.slot.0 as usize] = i as u32;
            i = c;
        }
        self.heap[i] = e;
        self.pos[e.slot.0 as usize] = i as u32;
    }
}

/// The smaller of two (index, key) pairs.
#[inline(always)]
fn least(a: usize, ak: u128, b: usize, bk: u128) -> (usize, u128) {
    if bk < ak {
        (b, bk)
    } else {
        (a, ak)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ties_break_by_insertion_order() {
        let mut q = EventQueue::new();
        let s: Vec<_> = (0..4).map(|_| q.add_slot()).collect();
        q.arm(s[2], 10);
        q.arm(s[0], 10);
        q.arm(s[3], 5);
        q.arm(s[1], 10);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, s)| s.0).collect();
        assert_eq!(order, vec![3, 2, 0, 1]);
    }

    #[test]
    fn rearm_replaces_and_cancel_removes() {
        let mut q = EventQueue::new();
        let a = q.add_slot();
        let b = q.add_slot();
        q.arm(a, 100);
        q.arm(b, 50);
        q.arm(a, 10);
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop(), Some((10, a)));
        q.cancel(b);
        assert_eq!(q.pop(), None);
        q.arm(b, 7);
        q.arm_min(b, 9);
        assert_eq!(q.deadline(b), Some(7));
        q.arm_min(b, 3);
        assert_eq!(q.deadline(b), Some(3));
    }

    proptest! {
        /// Against a reference model: a map slot -> (time, seq), popped in (time, seq) order.
        #[test]
        fn matches_reference(ops in proptest::collection::vec((0u8..3, 0usize..16, 0u64..50), 0..300)) {
            let mut q = EventQueue::new();
            let slots: Vec<_> = (0..16).map(|_| q.add_slot()).collect();
            let mut model: Vec<Option<(u64, u64)>> = vec![None; 16];
            let mut seq = 0u64;
            for (op, s, t) in ops {
                match op {
                    0 => { seq += 1; q.arm(slots[s], t); model[s] = Some((t, seq)); }
                    1 => { q.cancel(slots[s]); model[s] = None; }
                    _ => {
                        let want = model.iter().enumerate().filter_map(|(i, m)| m.map(|m| (m, i))).min();
                        let got = q.pop();
                        match want {
                            None => prop_assert_eq!(got, None),
                            Some(((t, _), i)) => { prop_assert_eq!(got, Some((t, slots[i]))); model[i] = None; }
                        }
                    }
                }
            }
        }

        /// Against the same model with many slots (deep heaps, partial last nodes), long
        /// horizons (times up to 2^61) or only a few distinct times (re-arms at equal times tie
        /// by their fresh sequence number), `arm_min`, and `peek_time`/`deadline`/`is_armed`/`len`
        /// checked after every operation.
        #[test]
        fn matches_reference_many_slots(
            n in 1usize..300,
            wide in any::<bool>(),
            ops in proptest::collection::vec((0u8..5, any::<u16>(), any::<u64>()), 0..2000),
        ) {
            let mut q = EventQueue::new();
            let slots: Vec<_> = (0..n).map(|_| q.add_slot()).collect();
            let mut model: Vec<Option<(u64, u64)>> = vec![None; n];
            let mut seq = 0u64;
            for (op, s, t) in ops {
                let s = s as usize % n;
                let t = if wide { t >> 3 } else { t % 4 };
                match op {
                    0 | 1 => { seq += 1; q.arm(slots[s], t); model[s] = Some((t, seq)); }
                    2 => {
                        if !matches!(model[s], Some((m, _)) if m <= t) {
                            seq += 1;
                            model[s] = Some((t, seq));
                        }
                        q.arm_min(slots[s], t);
                    }
                    3 => { q.cancel(slots[s]); model[s] = None; }
                    _ => {
                        let want = model.iter().enumerate().filter_map(|(i, m)| m.map(|m| (m, i))).min();
                        let got = q.pop();
                        match want {
                            None => prop_assert_eq!(got, None),
                            Some(((t, _), i)) => { prop_assert_eq!(got, Some((t, slots[i]))); model[i] = None; }
                        }
                    }
                }
                let min = model.iter().filter_map(|m| m.map(|(t, _)| t)).min();
                prop_assert_eq!(q.peek_time(), min);
                prop_assert_eq!(q.len(), model.iter().filter(|m| m.is_some()).count());
                prop_assert_eq!(q.deadline(slots[s]), model[s].map(|(t, _)| t));
                prop_assert_eq!(q.is_armed(slots[s]), model[s].is_some());
            }
            // Drains in exact (time, seq) order.
            let mut rest: Vec<_> = model.iter().enumerate().filter_map(|(i, m)| m.map(|m| (m, i))).collect();
            rest.sort();
            let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
            let want: Vec<_> = rest.iter().map(|&((t, _), i)| (t, slots[i])).collect();
            prop_assert_eq!(got, want);
        }
    }
}
