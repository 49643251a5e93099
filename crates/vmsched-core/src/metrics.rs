//! Streamed metrics: counters and bounded histograms, never per-event vectors.
//!
//! Memory grows with the number of entities and metrics, not with simulated time. The only
//! time-proportional data is the optional sampled series, and only when a scenario asks for it.
//! Histogram counts are allocated in chunks on first use (`lazy`), so an entity pays for the
//! ranges its samples fall in, not for the whole 1 ns .. 1 h range.

use std::mem::size_of;

use serde::Serialize;

pub mod lazy;

use lazy::{Counts, LogHist};

use crate::time::Nanos;

/// A latency histogram: HDR (3 significant digits, 1 ns .. 1 h) for percentiles, plus optional
/// fixed 1-µs buckets in cyclictest's style (`-h N`). Both are [`lazy`]: HdrHistogram's layout
/// and figures, counts allocated per range on first use.
#[derive(Clone)]
pub struct LatHist {
    hdr: LogHist,
    /// The fixed 1-µs buckets, if any (boxed: a per-entity wait histogram has none, and pays
    /// one pointer for them rather than their bookkeeping).
    fixed: Option<Box<Fixed>>,
    count: u64,
    sum_ns: u128,
    /// Sum of the squared samples (each clamped to the HDR range), for the standard deviation.
    sum_sq_ns: u128,
    sum_us_trunc: u64,
    min: Nanos,
    max: Nanos,
}

/// cyclictest's fixed 1-µs buckets (`-h N`) and their overflows.
#[derive(Clone)]
struct Fixed {
    buckets: Counts,
    overflows: u64,
    /// Sample index (cycle number) of each overflow, the first 1000 (cyclictest lists them).
    overflow_cycles: Vec<u64>,
}

const HDR_MAX: u64 = 3_600_000_000_000;
/// The fixed 1-µs buckets are allocated 64 µs at a time.
const BUCKET_CHUNK_SHIFT: u8 = 6;

impl LatHist {
    /// A histogram with `buckets_us` fixed buckets and 3 significant digits.
    pub fn new(buckets_us: u32) -> LatHist {
        Self::with_precision(buckets_us, 3)
    }

    /// `sigfig` significant digits (2 for per-entity waits: 4,608 counts, 128 per
    /// power-of-two range, against 33,792 and 1,024 with 3).
    pub fn with_precision(buckets_us: u32, sigfig: u8) -> LatHist {
        LatHist {
            hdr: LogHist::new(HDR_MAX, sigfig),
            fixed: (buckets_us > 0).then(|| {
                Box::new(Fixed {
                    buckets: Counts::new(buckets_us as usize, BUCKET_CHUNK_SHIFT),
                    overflows: 0,
                    overflow_cycles: Vec::new(),
                })
            }),
            count: 0,
            sum_ns: 0,
            sum_sq_ns: 0,
            sum_us_trunc: 0,
            min: Nanos::MAX,
            max: 0,
        }
    }

    /// Bytes on the heap now (the HDR counts allocated so far, the fixed buckets', the
    /// overflow list).
    pub fn heap_bytes(&self) -> u64 {
        let fixed = self.fixed.as_ref().map_or(0, |f| {
            size_of::<Fixed>() + f.buckets.heap_bytes() + f.overflow_cycles.capacity() * 8
        });
        (self.hdr.heap_bytes() + fixed) as u64
    }

    /// Bytes on the heap with every range of the HDR counts and every fixed bucket allocated:
    /// the most a histogram holds, whatever it records (the overflow list aside).
    pub fn full_bytes(&self) -> u64 {
        let fixed = self
            .fixed
            .as_ref()
            .map_or(0, |f| size_of::<Fixed>() + f.buckets.full_bytes());
        (self.hdr.full_bytes() + fixed) as u64
    }

    #[inline]
    pub fn record(&mut self, v: Nanos) {
        self.hdr.record(v);
        let us = v / 1000;
        if let Some(f) = &mut self.fixed {
            if us >= f.buckets.len() as u64 {
                f.overflows += 1;
                if f.overflow_cycles.len() < 1000 {
                    f.overflow_cycles.push(self.count);
                }
            } else {
                f.buckets.incr(us as usize);
            }
        }
        self.count += 1;
        self.sum_ns += v as u128;
        let c = v.min(HDR_MAX) as u128;
        self.sum_sq_ns = self.sum_sq_ns.saturating_add(c * c);
        self.sum_us_trunc += us;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }

    /// The population standard deviation of the samples (ns); 0 with fewer than two.
    pub fn stdev_ns(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let n = self.count as f64;
        let mean = self.sum_ns as f64 / n;
        (self.sum_sq_ns as f64 / n - mean * mean).max(0.0).sqrt()
    }

    pub fn max(&self) -> Nanos {
        self.max
    }

    pub fn reset(&mut self) {
        self.hdr.reset();
        if let Some(f) = &mut self.fixed {
            f.buckets.reset();
            f.overflows = 0;
            f.overflow_cycles.clear();
        }
        self.count = 0;
        self.sum_ns = 0;
        self.sum_sq_ns = 0;
        self.sum_us_trunc = 0;
        self.min = Nanos::MAX;
        self.max = 0;
    }

    pub fn summary(&self) -> HistSummary {
        let q = |p: f64| {
            if self.count == 0 {
                0
            } else {
                self.hdr.value_at_quantile(p)
            }
        };
        HistSummary {
            count: self.count,
            min_ns: if self.count == 0 { 0 } else { self.min },
            mean_ns: self.mean_ns(),
            stdev_ns: self.stdev_ns(),
            p50_ns: q(0.5),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            max_ns: self.max,
            // cyclictest's own figures work on truncated microseconds.
            min_us: if self.count == 0 { 0 } else { self.min / 1000 },
            avg_us: if self.count == 0 {
                0.0
            } else {
                self.sum_us_trunc as f64 / self.count as f64
            },
            max_us: self.max / 1000,
            buckets_us: self
                .fixed
                .as_ref()
                .map_or(Vec::new(), |f| f.buckets.to_vec()),
            overflows: self.fixed.as_ref().map_or(0, |f| f.overflows),
            overflow_cycles: self
                .fixed
                .as_ref()
                .map_or(Vec::new(), |f| f.overflow_cycles.clone()),
        }
    }
}

/// What a histogram reports.
#[derive(Clone, Debug, Serialize)]
pub struct HistSummary {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    /// Population standard deviation of the samples.
    pub stdev_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub min_us: u64,
    pub avg_us: f64,
    pub max_us: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub buckets_us: Vec<u64>,
    pub overflows: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overflow_cycles: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_overflow_and_cyclictest_avg() {
        let mut h = LatHist::new(10);
        for v in [1500, 2999, 9_999, 10_000, 55_000] {
            h.record(v);
        }
        let s = h.summary();
        assert_eq!(s.buckets_us[1], 1);
        assert_eq!(s.buckets_us[2], 1);
        assert_eq!(s.buckets_us[9], 1);
        assert_eq!(s.overflows, 2);
        assert_eq!(s.overflow_cycles, vec![3, 4]);
        assert_eq!(s.min_us, 1);
        assert_eq!(s.max_us, 55);
        // (1 + 2 + 9 + 10 + 55) / 5 in truncated µs
        assert!((s.avg_us - 15.4).abs() < 1e-9);
    }

    #[test]
    fn stdev_is_the_population_deviation() {
        let mut h = LatHist::new(0);
        assert_eq!(h.stdev_ns(), 0.0);
        for v in [2_000, 4_000, 4_000, 4_000, 5_000, 5_000, 7_000, 9_000] {
            h.record(v);
        }
        // mean 5000, variance 4e6
        assert!((h.summary().stdev_ns - 2_000.0).abs() < 1e-6);
        h.reset();
        h.record(1_000);
        assert_eq!(h.summary().stdev_ns, 0.0);
    }
}
