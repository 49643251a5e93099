//! Seeded random streams, one per named consumer.
//!
//! A run has one seed. Each consumer (a task drawing compute times, say) gets its own PCG stream
//! derived from the seed and a stable name, so adding a domain does not change what another
//! domain draws, and the same seed gives the same run on every machine.

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// FNV-1a, stable across platforms and Rust versions (unlike `std`'s hashers).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[derive(Clone, Debug)]
pub struct Stream(Pcg64Mcg);

impl Stream {
    pub fn new(seed: u64, name: &str) -> Stream {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&seed.to_le_bytes());
        k[8..].copy_from_slice(&fnv1a(name.as_bytes()).to_le_bytes());
        Stream(Pcg64Mcg::from_seed(k))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [lo, hi].
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Exponential with the given mean, rounded to an integer.
    pub fn exp(&mut self, mean: f64) -> u64 {
        let u = 1.0 - self.unit();
        (-u.ln() * mean).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_independent_and_reproducible() {
        let a1: Vec<_> = (0..4)
            .map({
                let mut s = Stream::new(7, "a");
                move |_| s.next_u64()
            })
            .collect();
        let a2: Vec<_> = (0..4)
            .map({
                let mut s = Stream::new(7, "a");
                move |_| s.next_u64()
            })
            .collect();
        let b: Vec<_> = (0..4)
            .map({
                let mut s = Stream::new(7, "b");
                move |_| s.next_u64()
            })
            .collect();
        let a8: Vec<_> = (0..4)
            .map({
                let mut s = Stream::new(8, "a");
                move |_| s.next_u64()
            })
            .collect();
        assert_eq!(a1, a2);
        assert_ne!(a1, b);
        assert_ne!(a1, a8);
    }

    #[test]
    fn exp_mean_is_close() {
        let mut s = Stream::new(1, "x");
        let n = 20000;
        let m: f64 = (0..n).map(|_| s.exp(1000.0) as f64).sum::<f64>() / n as f64;
        assert!((m - 1000.0).abs() < 30.0, "mean {m}");
    }
}
