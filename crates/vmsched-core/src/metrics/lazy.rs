//! Compact histograms (issue 15 items 2 and 3): counters allocated in chunks on first use.
//!
//! [`LogHist`] keeps HdrHistogram's bucket layout exactly (the `hdrhistogram` crate 7.x, itself
//! after Gil Tene's HdrHistogram: lowest discernible value 1, a highest trackable value, `sigfig`
//! significant decimal digits; power-of-two buckets of `2^m` sub-buckets of which the upper half
//! is used past the first), and reports the same percentiles, but stores its counts in
//! [`Counts`]: one small table of chunk slots (a byte each), and the counts of only the chunks that have been
//! recorded into. A per-entity wait histogram (2 digits over 1 ns .. 1 h) is 4,608 counts, 36 KB
//! as hdrhistogram allocates it; here it is a 144-entry slot table plus 128 bytes for each
//! quarter of a power-of-two range that holds a sample.
//!
//! The counts are `u32` cells; a cell that wraps carries 2^32 into a sorted side list, so every
//! count is exact (hdrhistogram's are `u64`, saturating). Recording is O(1): an index from the
//! value's leading zeros, a slot lookup, an increment. It allocates only when the value is the
//! first of its chunk (the chunk's counts are appended) and, past 2^32 samples in one cell,
//! when that cell first carries. `tests` checks every figure against `hdrhistogram` on random
//! samples.

/// Counters `0..len`, allocated `2^shift` at a time on the first increment of a chunk.
#[derive(Clone, Debug)]
pub struct Counts {
    len: usize,
    shift: u8,
    /// Per chunk: 0 while not allocated, else 1 + its position in `cells` (in chunks). A byte
    /// each: the tables are per entity, and every default layout has at most 255 chunks (a
    /// wait histogram 144, a cyclictest one 132, 5,000 1-µs buckets 79).
    slots: Box<[u8]>,
    cells: Vec<u32>,
    /// `(index, high)`: multiples of 2^32 a cell has wrapped past, sorted by index.
    carries: Vec<(usize, u64)>,
}

impl Counts {
    /// `len` counters in chunks of `2^shift` (the shift is raised so that the slots fit `u8`:
    /// at most 255 chunks).
    pub fn new(len: usize, shift: u8) -> Counts {
        let mut shift = shift;
        while len.div_ceil(1 << shift) > usize::from(u8::MAX) {
            shift += 1;
        }
        Counts {
            len,
            shift,
            slots: vec![0; len.div_ceil(1 << shift)].into_boxed_slice(),
            cells: Vec::new(),
            carries: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds one to counter `i` (`i < len`).
    #[inline]
    pub fn incr(&mut self, i: usize) {
        let c = i >> self.shift;
        let slot = self.slots[c];
        let base = if slot == 0 {
            self.open(c)
        } else {
            usize::from(slot - 1) << self.shift
        };
        let cell = &mut self.cells[base | (i & ((1 << self.shift) - 1))];
        *cell = cell.wrapping_add(1);
        if *cell == 0 {
            self.carry(i);
        }
    }

    /// Allocates chunk `c`'s counts; returns their first position in `cells`.
    #[cold]
    fn open(&mut self, c: usize) -> usize {
        let n = 1usize << self.shift;
        let base = self.cells.len();
        self.cells.reserve_exact(n);
        self.cells.resize(base + n, 0);
        self.slots[c] = u8::try_from((base >> self.shift) + 1).expect("chunks fit u8");
        base
    }

    /// Counter `i`'s cell wrapped: 2^32 more in its carry.
    #[cold]
    fn carry(&mut self, i: usize) {
        match self.carries.binary_search_by_key(&i, |&(j, _)| j) {
            Ok(k) => self.carries[k].1 += 1 << 32,
            Err(k) => self.carries.insert(k, (i, 1 << 32)),
        }
    }

    /// Counter `i` (0 in a chunk never recorded into).
    pub fn get(&self, i: usize) -> u64 {
        let slot = self.slots[i >> self.shift];
        if slot == 0 {
            return 0;
        }
        let cell =
            self.cells[(usize::from(slot - 1) << self.shift) | (i & ((1 << self.shift) - 1))];
        let high = self
            .carries
            .binary_search_by_key(&i, |&(j, _)| j)
            .map_or(0, |k| self.carries[k].1);
        u64::from(cell) + high
    }

    /// The first counter, in index order, at which the running sum reaches `target`.
    pub fn index_reaching(&self, target: u64) -> Option<usize> {
        let n = 1usize << self.shift;
        let mut sum = 0u64;
        let mut carries = self.carries.iter().peekable();
        for (c, &slot) in self.slots.iter().enumerate() {
            if slot == 0 {
                continue;
            }
            let cells = &self.cells[usize::from(slot - 1) << self.shift..][..n];
            for (j, &cell) in cells.iter().enumerate() {
                let i = (c << self.shift) | j;
                sum += u64::from(cell);
                while let Some(&&(k, high)) = carries.peek() {
                    if k > i {
                        break;
                    }
                    if k == i {
                        sum += high;
                    }
                    carries.next();
                }
                if sum >= target {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Every counter, allocated or not.
    pub fn to_vec(&self) -> Vec<u64> {
        (0..self.len).map(|i| self.get(i)).collect()
    }

    /// All counters to 0, keeping the chunks (recording into them again allocates nothing).
    pub fn reset(&mut self) {
        self.cells.iter_mut().for_each(|c| *c = 0);
        self.carries.clear();
    }

    /// Bytes on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.slots.len() + self.cells.capacity() * 4 + self.carries.capacity() * 16
    }

    /// Bytes on the heap once every chunk is allocated.
    pub fn full_bytes(&self) -> usize {
        self.slots.len() + (self.slots.len() << self.shift) * 4
    }

    #[cfg(test)]
    fn set(&mut self, i: usize, v: u32) {
        self.incr(i);
        let slot = self.slots[i >> self.shift];
        self.cells[(usize::from(slot - 1) << self.shift) | (i & ((1 << self.shift) - 1))] = v;
    }

    /// Sets a counter not yet recorded into to `n` (a cell and a carry, as `n` increments
    /// would leave them).
    #[cfg(test)]
    fn add(&mut self, i: usize, n: u64) {
        assert_eq!(self.get(i), 0);
        self.set(i, n as u32);
        if n >> 32 > 0 {
            let k = self.carries.partition_point(|&(j, _)| j < i);
            self.carries.insert(k, (i, n & !0xffff_ffff));
        }
    }
}

/// HdrHistogram's layout over `1 ..= high` with `sigfig` digits, its counts in [`Counts`].
#[derive(Clone, Debug)]
pub struct LogHist {
    high: u64,
    /// log2 of the sub-buckets per bucket (`sub_bucket_count_magnitude`).
    sub_mag: u8,
    counts: Counts,
    total: u64,
}

impl LogHist {
    /// Over `1 ..= high` (at least 2) with `sigfig` (0 to 5) significant digits.
    pub fn new(high: u64, sigfig: u8) -> LogHist {
        assert!(
            high >= 2 && sigfig <= 5,
            "LogHist bounds: high >= 2, sigfig <= 5"
        );
        // Unit resolution up to 2 * 10^sigfig, rounded up to a power of two (as HdrHistogram).
        let largest = 2 * 10u32.pow(u32::from(sigfig));
        let sub_mag = (f64::from(largest)).log2().ceil() as u8;
        // Buckets to cover `high`: bucket k holds values below 2^(sub_mag + k).
        let mut buckets = 1u32;
        let mut untrackable = 1u64 << sub_mag;
        while untrackable <= high {
            if untrackable > u64::MAX / 2 {
                buckets += 1;
                break;
            }
            untrackable <<= 1;
            buckets += 1;
        }
        let half_mag = sub_mag - 1;
        let len = ((buckets + 1) as usize) << half_mag;
        // Four chunks per power-of-two range (the lower half of bucket 0 is one range).
        let shift = half_mag.saturating_sub(2);
        LogHist {
            high,
            sub_mag,
            counts: Counts::new(len, shift),
            total: 0,
        }
    }

    /// Records `v`, clamped to `1 ..= high`.
    #[inline]
    pub fn record(&mut self, v: u64) {
        let v = v.clamp(1, self.high);
        self.counts.incr(self.index_of(v));
        self.total += 1;
    }

    /// Samples recorded.
    pub fn len(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// HdrHistogram's `bucket_for`: how many powers of two `v` is past bucket 0.
    #[inline]
    fn bucket_of(&self, v: u64) -> u32 {
        let mask = (1u64 << self.sub_mag) - 1;
        (64 - u32::from(self.sub_mag)) - (v | mask).leading_zeros()
    }

    /// HdrHistogram's `index_for`.
    #[inline]
    fn index_of(&self, v: u64) -> usize {
        let b = self.bucket_of(v);
        let half_mag = u32::from(self.sub_mag) - 1;
        let sub = (v >> b) as usize;
        (((b as usize) + 1) << half_mag) - (1 << half_mag) + sub
    }

    /// HdrHistogram's `value_for`: the lowest value counted at index `i`.
    fn value_at_index(&self, i: usize) -> u64 {
        let half_mag = u32::from(self.sub_mag) - 1;
        let half = 1usize << half_mag;
        let bucket = (i >> half_mag) as i64 - 1;
        let sub = (i & (half - 1)) + half;
        if bucket < 0 {
            (sub - half) as u64
        } else {
            (sub as u64) << bucket
        }
    }

    /// HdrHistogram's `lowest_equivalent` and `highest_equivalent`.
    fn lowest_equivalent(&self, v: u64) -> u64 {
        let b = self.bucket_of(v);
        (v >> b) << b
    }

    fn highest_equivalent(&self, v: u64) -> u64 {
        if v == u64::MAX {
            return u64::MAX;
        }
        let b = self.bucket_of(v);
        self.lowest_equivalent(v).saturating_add(1 << b) - 1
    }

    /// HdrHistogram's `value_at_quantile`: the highest value equivalent to the sample at rank
    /// ceil(q × n) (at least 1); the lowest equivalent value for q = 0; 0 when empty.
    pub fn value_at_quantile(&self, q: f64) -> u64 {
        let q = if q > 1.0 { 1.0 } else { q };
        let target = ((q * self.total as f64).ceil() as u64).max(1);
        match self.counts.index_reaching(target) {
            None => 0,
            Some(i) => {
                let v = self.value_at_index(i);
                if q == 0.0 {
                    self.lowest_equivalent(v)
                } else {
                    self.highest_equivalent(v)
                }
            }
        }
    }

    pub fn reset(&mut self) {
        self.counts.reset();
        self.total = 0;
    }

    /// Bytes on the heap now.
    pub fn heap_bytes(&self) -> usize {
        self.counts.heap_bytes()
    }

    /// Bytes on the heap once every range holds a sample.
    pub fn full_bytes(&self) -> usize {
        self.counts.full_bytes()
    }

    /// Counters in the layout (hdrhistogram's `distinct_values`).
    pub fn distinct_values(&self) -> usize {
        self.counts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::Histogram;
    use proptest::prelude::*;

    const HIGH: u64 = 3_600_000_000_000;

    fn both(sigfig: u8, samples: &[u64]) -> (LogHist, Histogram<u64>) {
        let mut a = LogHist::new(HIGH, sigfig);
        let mut b = Histogram::<u64>::new_with_bounds(1, HIGH, sigfig).unwrap();
        for &v in samples {
            a.record(v);
            b.saturating_record(v.clamp(1, HIGH));
        }
        (a, b)
    }

    const QUANTILES: [f64; 10] = [0.0, 1e-9, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0, 1.5];

    fn same(a: &LogHist, b: &Histogram<u64>) {
        assert_eq!(a.len(), b.len());
        assert_eq!(a.distinct_values(), b.distinct_values());
        for q in QUANTILES {
            assert_eq!(
                a.value_at_quantile(q),
                b.value_at_quantile(q),
                "quantile {q}"
            );
        }
    }

    #[test]
    fn the_layout_is_hdrhistograms() {
        // 2 digits: 36 half-buckets of 128; 3 digits: 33 of 1024.
        assert_eq!(LogHist::new(HIGH, 2).distinct_values(), 36 * 128);
        assert_eq!(LogHist::new(HIGH, 3).distinct_values(), 33 * 1024);
        for sigfig in 0..=5 {
            let (a, b) = both(sigfig, &[]);
            assert_eq!(a.distinct_values(), b.distinct_values(), "sigfig {sigfig}");
        }
    }

    #[test]
    fn empty_and_edges() {
        let (a, b) = both(2, &[]);
        same(&a, &b);
        assert_eq!(a.value_at_quantile(0.99), 0);
        // 0 counts as 1, past `high` as `high`, and the largest value lands in the last bucket.
        let (a, b) = both(3, &[0, 1, 2, HIGH, HIGH + 1, u64::MAX]);
        same(&a, &b);
        for sigfig in 0..=5 {
            let (a, b) = both(sigfig, &[0, 1, 3, 1023, 1024, 2047, 2048, 99_999, HIGH]);
            same(&a, &b);
        }
    }

    #[test]
    fn memory_grows_with_the_ranges_recorded_into() {
        let mut h = LogHist::new(HIGH, 2);
        let table = h.heap_bytes();
        assert_eq!(table, 144);
        assert_eq!(h.full_bytes(), 144 + 36 * 128 * 4);
        h.record(5_000);
        h.record(5_001);
        assert_eq!(h.heap_bytes(), table + 32 * 4);
        h.record(10_000_000);
        assert_eq!(h.heap_bytes(), table + 2 * 32 * 4);
        // Resetting keeps the chunks: recording there again allocates nothing.
        h.reset();
        h.record(5_000);
        assert_eq!(h.heap_bytes(), table + 2 * 32 * 4);
        assert_eq!(h.value_at_quantile(1.0), 5_023);
    }

    #[test]
    fn a_cell_past_u32_carries() {
        let mut c = Counts::new(1000, 4);
        c.set(7, u32::MAX - 1);
        c.incr(7);
        assert_eq!(c.get(7), u64::from(u32::MAX));
        c.incr(7);
        assert_eq!(c.get(7), 1 << 32);
        c.incr(7);
        c.set(900, u32::MAX);
        c.incr(900);
        assert_eq!((c.get(7), c.get(900)), ((1 << 32) + 1, 1 << 32));
        assert_eq!(c.index_reaching(1 << 32), Some(7));
        assert_eq!(c.index_reaching((1 << 32) + 2), Some(900));
        assert_eq!(c.index_reaching((2 << 32) + 2), None);
        // The same counts in hdrhistogram (u64 cells) give the same percentiles.
        let mut a = LogHist::new(HIGH, 2);
        let mut b = Histogram::<u64>::new_with_bounds(1, HIGH, 2).unwrap();
        for (v, n) in [
            (40u64, (1u64 << 32) + 5),
            (9_000, 3),
            (70_000, u64::from(u32::MAX)),
        ] {
            a.counts.add(a.index_of(v), n);
            a.total += n;
            b.record_n(v, n).unwrap();
        }
        same(&a, &b);
        a.reset();
        assert_eq!((a.len(), a.value_at_quantile(0.5)), (0, 0));
    }

    #[test]
    fn chunks_stay_within_u8_slots() {
        let mut c = Counts::new(10_000_000, 6);
        c.incr(9_999_999);
        c.incr(0);
        assert_eq!(c.get(9_999_999), 1);
        assert!(c.slots.len() <= usize::from(u8::MAX));
        assert_eq!(c.to_vec().iter().sum::<u64>(), 2);
        // Every chunk opened: the last slot holds the largest position.
        let mut d = Counts::new(255 * 4, 2);
        for i in (0..255 * 4).rev() {
            d.incr(i);
        }
        assert_eq!(d.slots.len(), 255);
        assert!((0..255 * 4).all(|i| d.get(i) == 1));
        let mut c = Counts::new(10_000_000, 6);
        c.incr(9_999_999);
        assert_eq!(c.to_vec().iter().sum::<u64>(), 1);
    }

    /// Samples spread over many decades: mostly small (a wait of 0, a few µs), some large.
    fn samples() -> impl Strategy<Value = Vec<u64>> {
        let one = prop_oneof![
            3 => 0u64..2_000,
            3 => 0u64..200_000,
            2 => 0u64..50_000_000,
            1 => any::<u64>(),
            1 => Just(0u64),
        ];
        prop::collection::vec(one, 0..400)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// On random samples the compact histogram reports exactly what hdrhistogram reports.
        #[test]
        fn reports_what_hdrhistogram_reports(s in samples(), sigfig in 0u8..=4) {
            let (a, b) = both(sigfig, &s);
            same(&a, &b);
        }

        /// And after a reset and new samples (the warm-up boundary).
        #[test]
        fn after_a_reset_too(s in samples(), t in samples()) {
            let (mut a, mut b) = both(2, &s);
            a.reset();
            b.reset();
            for &v in &t {
                a.record(v);
                b.saturating_record(v.clamp(1, HIGH));
            }
            same(&a, &b);
        }
    }
}
