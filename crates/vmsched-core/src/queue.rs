//! The event queue: an indexed 4-ary heap of timer *slots*, ordered by (time, sequence).
//!
//! Every event source in the engine is a slot allocated once at build time (a CPU's scheduler
//! timer, a vCPU's guest tick, a task's wake-up, ...). Arming a slot that is already armed moves
//! it; cancelling removes it. The queue therefore never holds a stale event, and its size is
//! bounded by the number of slots. Ties at equal time break by the sequence number taken when the
//! slot was (re-)armed, i.e. by insertion order, never by address or hash order (the ns-3 /
//! SimPy rule), so the same scenario and seed give the same run on every machine.
//!
//! **Layout.** An entry is one `u128`: time in the high 64 bits, then a `u32` sequence number,
//! then the `u32` slot, so one integer comparison orders by (time, sequence) (sequence numbers
//! of queued entries are unique, so the slot never decides) and a moved entry carries its slot.
//! Entries live in 64-byte lines with the root at the last place of the first line, so the four
//! children of node `i` are exactly line `i + 1`: one cache line per level of a sift.
//!
//! **Sequence wrap.** The sequence is 32 bits. When it would pass its limit, the queued entries
//! are renumbered 1, 2, ... in their sequence order (a sort of at most one entry per slot, into
//! a buffer reserved with the slots): every comparison between queued entries, and with those
//! armed later, comes out as before, so the order is exactly that of an unbounded counter.

use crate::time::SimTime;

/// A timer slot, allocated by [`EventQueue::add_slot`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlotId(pub u32);

const NOT_QUEUED: u32 = u32::MAX;

/// Heap arity: a 4-ary heap is shallower than a binary one, and four 16-byte entries fill one
/// cache line.
const ARITY: usize = 4;
// `sift_down`'s tournament is written for four children.
const _: () = assert!(ARITY == 4);
/// Places before the root in the first line, so that children start a line.
const SKEW: usize = ARITY - 1;

/// (time << 64) | (seq << 32) | slot.
type Entry = u128;

/// Four entries, aligned to a cache line.
#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct Line([Entry; ARITY]);

#[inline(always)]
fn entry(time: SimTime, seq: u32, slot: u32) -> Entry {
    ((time as u128) << 64) | ((seq as u128) << 32) | slot as u128
}

#[inline(always)]
fn time_of(e: Entry) -> SimTime {
    (e >> 64) as SimTime
}

#[inline(always)]
fn seq_of(e: Entry) -> u32 {
    (e >> 32) as u32
}

#[inline(always)]
fn slot_of(e: Entry) -> u32 {
    e as u32
}

pub struct EventQueue {
    /// The heap: entry `i` is at place `i + SKEW` (line `(i + SKEW) / ARITY`). Sized for every
    /// slot at `add_slot`, so arming never allocates.
    lines: Vec<Line>,
    len: usize,
    /// Position of each slot in the heap, or NOT_QUEUED.
    pos: Vec<u32>,
    /// The last sequence number taken.
    seq: u32,
    /// The sequence number after which the queued entries are renumbered (`u32::MAX`; lower in
    /// tests, to exercise the renumbering).
    seq_limit: u32,
    /// The renumbering's buffer, (sequence, position), reserved with the slots.
    scratch: Vec<(u32, u32)>,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl EventQueue {
    pub fn new() -> Self {
        Self::with_seq_limit(u32::MAX)
    }

    /// A queue that renumbers its entries when the sequence would pass `limit` (tests).
    fn with_seq_limit(limit: u32) -> Self {
        EventQueue {
            lines: Vec::new(),
            len: 0,
            pos: Vec::new(),
            seq: 0,
            seq_limit: limit,
            scratch: Vec::new(),
        }
    }

    /// Allocates a new, disarmed slot.
    pub fn add_slot(&mut self) -> SlotId {
        let id = self.pos.len();
        assert!(id < NOT_QUEUED as usize, "too many event slots");
        self.pos.push(NOT_QUEUED);
        let lines = (self.pos.len() + SKEW).div_ceil(ARITY);
        if self.lines.len() < lines {
            self.lines.resize(lines, Line::default());
        }
        self.scratch.reserve(self.pos.len());
        SlotId(id as u32)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn get(&self, i: usize) -> Entry {
        let j = i + SKEW;
        self.lines[j / ARITY].0[j % ARITY]
    }

    /// Writes `e` at position `i` and records the position of its slot.
    #[inline(always)]
    fn put(&mut self, i: usize, e: Entry) {
        let j = i + SKEW;
        self.lines[j / ARITY].0[j % ARITY] = e;
        self.pos[slot_of(e) as usize] = i as u32;
    }

    #[inline]
    pub fn is_armed(&self, s: SlotId) -> bool {
        self.pos[s.0 as usize] != NOT_QUEUED
    }

    /// Deadline of an armed slot.
    #[inline]
    pub fn deadline(&self, s: SlotId) -> Option<SimTime> {
        let p = self.pos[s.0 as usize];
        (p != NOT_QUEUED).then(|| time_of(self.get(p as usize)))
    }

    /// The next sequence number, renumbering the queued entries first if the counter is at its
    /// limit.
    #[inline]
    fn next_seq(&mut self) -> u32 {
        if self.seq >= self.seq_limit {
            self.renumber();
        }
        self.seq += 1;
        self.seq
    }

    /// Gives the queued entries the sequence numbers 1, 2, ... in their present sequence order:
    /// no comparison between two entries changes, so the heap stays valid where it is.
    #[cold]
    fn renumber(&mut self) {
        self.scratch.clear();
        for i in 0..self.len {
            self.scratch.push((seq_of(self.get(i)), i as u32));
        }
        self.scratch.sort_unstable();
        for r in 0..self.scratch.len() {
            let i = self.scratch[r].1 as usize;
            let e = self.get(i);
            self.put(i, entry(time_of(e), r as u32 + 1, slot_of(e)));
        }
        self.seq = self.len as u32;
    }

    /// Arms `s` at `time`, replacing any earlier deadline. The slot takes a fresh sequence number,
    /// so among events at the same time it now comes last.
    pub fn arm(&mut self, s: SlotId, time: SimTime) {
        let seq = self.next_seq();
        let e = entry(time, seq, s.0);
        let p = self.pos[s.0 as usize];
        if p == NOT_QUEUED {
            let i = self.len;
            self.len += 1;
            self.sift_up(i, e);
        } else {
            let i = p as usize;
            if e < self.get(i) {
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
        (self.len > 0).then(|| time_of(self.get(0)))
    }

    /// Removes and returns the next event.
    pub fn pop(&mut self) -> Option<(SimTime, SlotId)> {
        if self.len == 0 {
            return None;
        }
        let e = self.get(0);
        self.remove_at(0);
        Some((time_of(e), SlotId(slot_of(e))))
    }

    fn remove_at(&mut self, i: usize) {
        let removed = self.get(i);
        self.pos[slot_of(removed) as usize] = NOT_QUEUED;
        self.len -= 1;
        let n = self.len;
        if i < n {
            let last = self.get(n);
            if i > 0 && last < self.get((i - 1) / ARITY) {
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
            let p = self.get(parent);
            if e >= p {
                break;
            }
            self.put(i, p);
            i = parent;
        }
        self.put(i, e);
    }

    /// Places `e` at or below hole `i`.
    fn sift_down(&mut self, mut i: usize, e: Entry) {
        let n = self.len;
        loop {
            let first = ARITY * i + 1;
            let (c, ck) = if first + ARITY <= n {
                // A full node (the common case): its children are line `i + 1`; the least of
                // the four by a tournament, with no loop. Entries are unique (the sequence
                // number), so the least child is the one a scan would find.
                let ch = &self.lines[i + 1].0;
                let (a, ak) = least(0, ch[0], 1, ch[1]);
                let (b, bk) = least(2, ch[2], 3, ch[3]);
                let (m, mk) = least(a, ak, b, bk);
                (first + m, mk)
            } else if first < n {
                let mut c = first;
                let mut ck = self.get(first);
                for j in first + 1..n {
                    let k = self.get(j);
                    if k < ck {
                        c = j;
                        ck = k;
                    }
                }
                (c, ck)
            } else {
                break;
            };
            if ck >= e {
                break;
            }
            self.put(i, ck);
            i = c;
        }
        self.put(i, e);
    }
}

/// The smaller of two (index, entry) pairs.
#[inline(always)]
fn least(a: usize, ak: Entry, b: usize, bk: Entry) -> (usize, Entry) {
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

    /// Renumbering at the sequence limit keeps insertion order among equal times, also for
    /// entries armed before it against those armed after.
    #[test]
    fn renumbering_keeps_insertion_order() {
        let mut q = EventQueue::with_seq_limit(5);
        let s: Vec<_> = (0..6).map(|_| q.add_slot()).collect();
        // Many re-arms at one time: the slot re-armed last comes last.
        for round in 0..20 {
            for &x in &s {
                q.arm(x, 100 + (round % 2));
            }
        }
        for &x in s.iter().rev().take(3) {
            q.arm(x, 100);
        }
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        // Slots 0..3 last armed at 101 (round 19), in slot order; 5, 4, 3 re-armed at 100 after.
        let want: Vec<_> = [(100, 5), (100, 4), (100, 3), (101, 0), (101, 1), (101, 2)]
            .iter()
            .map(|&(t, i)| (t, s[i]))
            .collect();
        assert_eq!(order, want);
        assert!(q.seq < 10, "the sequence was renumbered (123 arms)");
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
        /// checked after every operation; with the sequence renumbered often (a low limit) or
        /// never.
        #[test]
        fn matches_reference_many_slots(
            n in 1usize..300,
            wide in any::<bool>(),
            limit in prop_oneof![Just(u32::MAX), 1u32..600],
            ops in proptest::collection::vec((0u8..5, any::<u16>(), any::<u64>()), 0..2000),
        ) {
            // `limit`: the sequence number at which the queued entries are renumbered; small
            // ones renumber many times in a run, some below the number of queued entries.
            let mut q = EventQueue::with_seq_limit(limit);
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
