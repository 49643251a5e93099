//! The bare-heap floor (issue 15 item 1): what one event costs when an event is nothing but
//! one pop and one push on a binary heap ordered by (time, sequence), with as many live timers
//! as the scenario had. No simulator can dispatch events faster than its queue alone; the
//! ratio of the floor's events per second to a scenario's says how much of the scenario's time
//! is the scheduling model rather than the queue.
//!
//! Each event pops the earliest (time, seq) entry and pushes one new entry at that time plus a
//! delay drawn from a fixed xorshift stream, uniform in [1 µs, 8 ms] (the range of the engine's
//! ticks, slices and compute ends), with a fresh sequence number: a steady state of exactly
//! `live` entries, as a timer that re-arms itself.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// xorshift64: a fixed stream, so that every floor run does the same work.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

const MIN_DELAY_NS: u64 = 1_000;
const MAX_DELAY_NS: u64 = 8_000_000;

fn delay(x: &mut u64) -> u64 {
    MIN_DELAY_NS + next(x) % (MAX_DELAY_NS - MIN_DELAY_NS + 1)
}

/// Runs `events` pop-and-push events over a heap of `live` timers (at least 1); the caller
/// times it. Returns the time of the last event popped (so that the work cannot be optimised
/// away, and a test can check the order).
pub fn run(live: usize, events: u64) -> u64 {
    let live = live.max(1);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut seq = 0u64;
    let mut heap: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::with_capacity(live + 1);
    for _ in 0..live {
        seq += 1;
        heap.push(Reverse((delay(&mut x), seq)));
    }
    let mut last = 0;
    for _ in 0..events {
        let Reverse((t, _)) = heap.pop().expect("the floor's heap is never empty");
        debug_assert!(t >= last, "the floor's heap went back in time");
        last = t;
        seq += 1;
        heap.push(Reverse((t + delay(&mut x), seq)));
    }
    std::hint::black_box(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The floor pops in time order (the debug assertion in `run`) and keeps `live` timers
    /// within one maximum delay of each other, so after `n` events the last time popped lies
    /// between n * MIN / live - MAX and n * MAX / live + MAX.
    #[test]
    fn floor_pops_in_time_order_and_advances() {
        let n = 1_600_000;
        let last = run(16, n);
        assert!(last >= n / 16 * MIN_DELAY_NS - MAX_DELAY_NS, "{last}");
        assert!(last <= n / 16 * MAX_DELAY_NS + MAX_DELAY_NS, "{last}");
    }

    /// Zero live timers (a scenario whose queue was empty when sampled) runs one.
    #[test]
    fn floor_of_zero_live_timers_runs_one() {
        let last = run(0, 10);
        assert!(last >= 10 * MIN_DELAY_NS, "{last}");
    }
}
