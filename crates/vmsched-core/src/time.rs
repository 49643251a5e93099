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

/// The longest time a scenario may configure anywhere (a duration, a start time, an interval, a
/// cost, a slack): 2^56 ns, about 834 days. Sums of a few such values (now + sleep + slack) stay
/// far below [`NEVER`], and a cost scaled by a percentage (`× 100`) cannot overflow.
pub const MAX_TIME_NS: Nanos = 1 << 56;

/// The largest mean of an exponential duration: a draw can reach about 37 × its mean (the
/// smallest uniform variate is 2^-53), which must stay below [`MAX_TIME_NS`].
pub const MAX_EXP_MEAN_NS: Nanos = MAX_TIME_NS / 64;

/// A configured time `v` in a unit of `per` nanoseconds (1, [`NS_PER_US`], [`NS_PER_MS`]),
/// converted with checked arithmetic and held to `limit` ns. `Err` is `(field, message)`, the
/// message stating the limit in the field's own unit.
pub fn config_ns(field: &str, v: u64, per: Nanos, limit: Nanos) -> Result<Nanos, (String, String)> {
    match v.checked_mul(per) {
        Some(ns) if ns <= limit => Ok(ns),
        _ => {
            let unit = match per {
                NS_PER_US => "µs",
                NS_PER_MS => "ms",
                NS_PER_S => "s",
                _ => "ns",
            };
            Err((
                field.to_string(),
                format!(
                    "{v} {unit} is too long: the limit is {} {unit} (2^{} ns, about {} days)",
                    limit / per,
                    limit.ilog2(),
                    (limit + 43_200 * NS_PER_S) / (86_400 * NS_PER_S)
                ),
            ))
        }
    }
}

/// [`config_ns`] with the general limit [`MAX_TIME_NS`].
pub fn time_ns(field: &str, v: u64, per: Nanos) -> Result<Nanos, (String, String)> {
    config_ns(field, v, per, MAX_TIME_NS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_are_checked_and_name_the_field() {
        assert_eq!(time_ns("a_ms", 5, NS_PER_MS), Ok(5_000_000));
        assert_eq!(
            time_ns("a_us", MAX_TIME_NS / NS_PER_US, NS_PER_US),
            Ok(MAX_TIME_NS / 1000 * 1000)
        );
        // 18446744073710 ms wraps to 0.448 ms with wrapping arithmetic.
        let (f, m) = time_ns("run.duration_ms", 18_446_744_073_710, NS_PER_MS).unwrap_err();
        assert_eq!(f, "run.duration_ms");
        assert!(m.contains("limit is 72057594037 ms"), "{m}");
        assert!(time_ns("x_us", (1 << 63) - 1, NS_PER_US).is_err());
        assert!(time_ns("x_ns", MAX_TIME_NS + 1, 1).is_err());
        assert!(config_ns("m", MAX_EXP_MEAN_NS / 1000 + 1, NS_PER_US, MAX_EXP_MEAN_NS).is_err());
    }
}
