//! Simulated time: one global wall clock counted in integer nanoseconds.
//!
//! `SimTime` is an instant, `Nanos` a duration. No floating point ever orders events.

/// An instant of simulated wall time, in nanoseconds since the start of the run.
pub type SimTime = u64;
/// A duration in nanoseconds.
pub type Nanos = u64;

pub const NS_PER_US: Nanos = 1_000;
pub const NS_PER_MS: Nanos = 1_000_000;
pub const NS_PER_S: Nanos = 1_000_000_000;

/// A deadline far enough away to mean "never" without overflowing additions of a few hours.
pub const NEVER: SimTime = u64::MAX / 4;

/// Microseconds to nanoseconds.
pub const fn us(v: u64) -> Nanos {
    v * NS_PER_US
}

/// Milliseconds to nanoseconds.
pub const fn ms(v: u64) -> Nanos {
    v * NS_PER_MS
}
