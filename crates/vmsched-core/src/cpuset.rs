//! A fixed-capacity CPU bit set of one scheduling level (up to [`MAX_CPUS`] = 4,096 CPUs), used
//! for affinity masks and the schedulers' idle/tickled/active masks (Xen's and Linux's `cpumask`).
//!
//! The set is `Copy` (the policies pass masks by value, as Xen's code does with `cpumask_t`), so it
//! is a plain array of 64-bit words with no heap part. To keep the common small case cheap, it
//! also records `nw`, an upper bound on the words in use: every word at index `nw` and above is
//! zero. All operations run word loops over `nw` words only (membership tests, `and`, `or`,
//! `minus`, counting, the first member, the next member after a CPU, iteration with
//! `trailing_zeros`), so a set of 8 or 64 CPUs costs one word per loop however large the
//! capacity. The array itself is 512 bytes: copying a set copies it whole (see
//! docs/performance.md for the measured cost against the former 256-CPU set).

use crate::ids::CpuId;

/// The largest number of CPUs of one level (pCPUs of the host, vCPUs of one guest).
pub const MAX_CPUS: usize = 4096;

const WORDS: usize = MAX_CPUS / 64;

#[derive(Clone, Copy)]
pub struct CpuSet {
    /// Words `nw..` are zero (an upper bound on the words in use, not necessarily tight).
    nw: u32,
    w: [u64; WORDS],
}

impl Default for CpuSet {
    fn default() -> Self {
        Self::empty()
    }
}

impl PartialEq for CpuSet {
    fn eq(&self, o: &CpuSet) -> bool {
        let n = self.nw.max(o.nw) as usize;
        self.w[..n] == o.w[..n]
    }
}

impl Eq for CpuSet {}

impl std::hash::Hash for CpuSet {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // Equal sets may differ in `nw`: hash the words up to the last non-zero one.
        let n = self.w[..self.nw as usize]
            .iter()
            .rposition(|w| *w != 0)
            .map_or(0, |i| i + 1);
        self.w[..n].hash(h);
    }
}

#[inline]
fn split(c: CpuId) -> (usize, u64) {
    let i = c.idx();
    (i / 64, 1u64 << (i % 64))
}

impl CpuSet {
    pub const fn empty() -> Self {
        CpuSet {
            nw: 0,
            w: [0; WORDS],
        }
    }

    /// CPUs 0..n.
    pub fn first_n(n: usize) -> Self {
        assert!(
            n <= MAX_CPUS,
            "CpuSet: {n} CPUs exceed MAX_CPUS = {MAX_CPUS}"
        );
        let mut s = Self::empty();
        let full = n / 64;
        for i in 0..full {
            s.w[i] = !0;
        }
        let tail = n % 64;
        if tail > 0 {
            s.w[full] = (1u64 << tail) - 1;
        }
        s.nw = n.div_ceil(64) as u32;
        s
    }

    pub fn single(c: CpuId) -> Self {
        let mut s = Self::empty();
        s.insert(c);
        s
    }

    pub fn from_ids(ids: impl IntoIterator<Item = u32>) -> Self {
        let mut s = Self::empty();
        for c in ids {
            s.insert(CpuId(c));
        }
        s
    }

    /// Panics if `c` is not below [`MAX_CPUS`].
    #[inline]
    pub fn insert(&mut self, c: CpuId) {
        let (i, b) = split(c);
        self.w[i] |= b;
        if i as u32 >= self.nw {
            self.nw = i as u32 + 1;
        }
    }

    /// Removing a CPU that is not a member (or beyond [`MAX_CPUS`]) does nothing.
    #[inline]
    pub fn remove(&mut self, c: CpuId) {
        let (i, b) = split(c);
        // Words at `nw` and above are zero already: no need to look at `nw`.
        if let Some(w) = self.w.get_mut(i) {
            *w &= !b;
        }
    }

    /// Whether `c` is a member (never for a CPU beyond [`MAX_CPUS`]).
    #[inline]
    pub fn contains(&self, c: CpuId) -> bool {
        let (i, b) = split(c);
        self.w.get(i).is_some_and(|w| w & b != 0)
    }

    /// The words in use (the rest are zero).
    #[inline]
    fn words(&self) -> &[u64] {
        &self.w[..self.nw as usize]
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words().iter().all(|w| *w == 0)
    }

    /// Number of members.
    #[inline]
    pub fn len(&self) -> usize {
        self.words().iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Number of members (same as [`CpuSet::len`]; Linux's `cpumask_weight`).
    #[inline]
    pub fn count(&self) -> usize {
        self.len()
    }

    /// `self ∩ o`.
    #[inline]
    pub fn and(&self, o: &CpuSet) -> CpuSet {
        let n = self.nw.min(o.nw);
        let mut r = CpuSet::empty();
        for i in 0..n as usize {
            r.w[i] = self.w[i] & o.w[i];
        }
        r.nw = n;
        r
    }

    /// `self ∪ o`.
    #[inline]
    pub fn or(&self, o: &CpuSet) -> CpuSet {
        let (a, b) = if self.nw >= o.nw {
            (self, o)
        } else {
            (o, self)
        };
        let mut r = CpuSet::empty();
        for i in 0..b.nw as usize {
            r.w[i] = a.w[i] | b.w[i];
        }
        for i in b.nw as usize..a.nw as usize {
            r.w[i] = a.w[i];
        }
        r.nw = a.nw;
        r
    }

    /// `self \ o` (Linux's `cpumask_andnot`).
    #[inline]
    pub fn minus(&self, o: &CpuSet) -> CpuSet {
        // Zeroing a fresh set and writing `nw` words is cheaper than copying the whole array.
        let n = self.nw.min(o.nw) as usize;
        let mut r = CpuSet::empty();
        for i in 0..n {
            r.w[i] = self.w[i] & !o.w[i];
        }
        for i in n..self.nw as usize {
            r.w[i] = self.w[i];
        }
        r.nw = self.nw;
        r
    }

    /// `self ← self ∩ o`.
    #[inline]
    pub fn and_with(&mut self, o: &CpuSet) {
        let n = self.nw.min(o.nw) as usize;
        for i in 0..n {
            self.w[i] &= o.w[i];
        }
        for i in n..self.nw as usize {
            self.w[i] = 0;
        }
        self.nw = n as u32;
    }

    /// `self ← self ∪ o`.
    #[inline]
    pub fn or_with(&mut self, o: &CpuSet) {
        for i in 0..o.nw as usize {
            self.w[i] |= o.w[i];
        }
        self.nw = self.nw.max(o.nw);
    }

    /// `self ← self \ o`.
    #[inline]
    pub fn minus_with(&mut self, o: &CpuSet) {
        let n = self.nw.min(o.nw) as usize;
        for i in 0..n {
            self.w[i] &= !o.w[i];
        }
    }

    /// `self ← a ∩ b`, writing only the words in use (this set's and the result's): a set
    /// kept for reuse is refilled without zeroing its whole array, as a fresh set is.
    #[inline]
    pub fn assign_and(&mut self, a: &CpuSet, b: &CpuSet) {
        let n = a.nw.min(b.nw) as usize;
        for i in 0..n {
            self.w[i] = a.w[i] & b.w[i];
        }
        for i in n..self.nw as usize {
            self.w[i] = 0;
        }
        self.nw = n as u32;
    }

    /// `self ← a \ b`, writing only the words in use (see [`CpuSet::assign_and`]).
    #[inline]
    pub fn assign_minus(&mut self, a: &CpuSet, b: &CpuSet) {
        let n = a.nw.min(b.nw) as usize;
        for i in 0..n {
            self.w[i] = a.w[i] & !b.w[i];
        }
        for i in n..a.nw as usize {
            self.w[i] = a.w[i];
        }
        for i in a.nw as usize..self.nw as usize {
            self.w[i] = 0;
        }
        self.nw = a.nw;
    }

    /// `self ⊆ a \ b`, without building `a \ b`.
    #[inline]
    pub fn is_subset_of_minus(&self, a: &CpuSet, b: &CpuSet) -> bool {
        // Words at `nw` and above are zero in every set, so indexing below `self.nw` reads
        // `a`'s and `b`'s true words.
        (0..self.nw as usize).all(|i| self.w[i] & !(a.w[i] & !b.w[i]) == 0)
    }

    /// Whether the sets share a member (Linux's `cpumask_intersects`).
    #[inline]
    pub fn intersects(&self, o: &CpuSet) -> bool {
        let n = self.nw.min(o.nw) as usize;
        (0..n).any(|i| self.w[i] & o.w[i] != 0)
    }

    /// `self ⊆ o`.
    #[inline]
    pub fn is_subset(&self, o: &CpuSet) -> bool {
        let n = self.nw.min(o.nw) as usize;
        (0..n).all(|i| self.w[i] & !o.w[i] == 0)
            && self.w[n..self.nw as usize].iter().all(|w| *w == 0)
    }

    /// Lowest member.
    #[inline]
    pub fn first(&self) -> Option<CpuId> {
        self.first_from(0, 0)
    }

    /// The lowest member at or above word `wi`, whose first word is masked with `mask`.
    #[inline]
    fn first_from(&self, wi: usize, mask: u64) -> Option<CpuId> {
        let ws = self.words();
        if wi >= ws.len() {
            return None;
        }
        let head = ws[wi] & !mask;
        if head != 0 {
            return Some(CpuId((wi * 64) as u32 + head.trailing_zeros()));
        }
        for (k, w) in ws[wi + 1..].iter().enumerate() {
            if *w != 0 {
                return Some(CpuId(((wi + 1 + k) * 64) as u32 + w.trailing_zeros()));
            }
        }
        None
    }

    /// Lowest member strictly above `c`, without wrapping (Linux's `cpumask_next`).
    #[inline]
    pub fn next_after(&self, c: CpuId) -> Option<CpuId> {
        let n = c.idx() + 1;
        if n >= MAX_CPUS {
            return None;
        }
        // Mask off bits 0..=c%64 of c's word.
        self.first_from(n / 64, (1u64 << (n % 64)).wrapping_sub(1))
    }

    /// Next member strictly after `c`, wrapping to the lowest; `c` itself if it is the only
    /// member (Xen's `cpumask_cycle`). Out of line: it keeps `test_or_cycle`'s common case
    /// (`c` is a member) small enough to inline.
    #[inline(never)]
    pub fn cycle(&self, c: CpuId) -> Option<CpuId> {
        self.next_after(c).or_else(|| self.first())
    }

    /// `c` if it is a member, else `cycle(c)` (Xen's `cpumask_test_or_cycle`).
    #[inline]
    pub fn test_or_cycle(&self, c: CpuId) -> Option<CpuId> {
        if self.contains(c) {
            Some(c)
        } else {
            self.cycle(c)
        }
    }

    /// Members in increasing order (word by word, `trailing_zeros` within a word).
    #[inline]
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            words: self.words(),
            base: 0,
            cur: self.words().first().copied().unwrap_or(0),
        }
    }
}

/// Iterator over the members of a [`CpuSet`], lowest first.
pub struct Iter<'a> {
    /// The remaining words; `words[0]` is the one `cur` came from.
    words: &'a [u64],
    /// CPU number of bit 0 of `words[0]`.
    base: u32,
    /// Unvisited members of `words[0]`.
    cur: u64,
}

impl Iterator for Iter<'_> {
    type Item = CpuId;

    #[inline]
    fn next(&mut self) -> Option<CpuId> {
        while self.cur == 0 {
            if self.words.len() <= 1 {
                self.words = &[];
                return None;
            }
            self.words = &self.words[1..];
            self.base += 64;
            self.cur = self.words[0];
        }
        let b = self.cur.trailing_zeros();
        self.cur &= self.cur - 1;
        Some(CpuId(self.base + b))
    }
}

impl std::fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter().map(|c| c.0)).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn cycle_wraps_and_returns_self_when_alone() {
        let s = CpuSet::from_ids([1, 3, 5]);
        assert_eq!(s.cycle(CpuId(3)), Some(CpuId(5)));
        assert_eq!(s.cycle(CpuId(5)), Some(CpuId(1)));
        assert_eq!(s.test_or_cycle(CpuId(3)), Some(CpuId(3)));
        assert_eq!(s.test_or_cycle(CpuId(4)), Some(CpuId(5)));
        let one = CpuSet::single(CpuId(2));
        assert_eq!(one.cycle(CpuId(2)), Some(CpuId(2)));
        assert_eq!(CpuSet::empty().cycle(CpuId(0)), None);
    }

    #[test]
    fn set_algebra() {
        let a = CpuSet::first_n(4);
        let b = CpuSet::from_ids([2, 3, 9]);
        assert_eq!(a.and(&b), CpuSet::from_ids([2, 3]));
        assert_eq!(a.minus(&b), CpuSet::from_ids([0, 1]));
        assert_eq!(b.len(), 3);
        assert!(CpuSet::from_ids([2]).is_subset(&a));
    }

    #[test]
    fn holds_4096_cpus_at_word_edges() {
        let top = CpuId(MAX_CPUS as u32 - 1);
        let s = CpuSet::from_ids([0, 63, 64, 1023, 1024, 4095]);
        assert_eq!(s.len(), 6);
        assert!(s.contains(top));
        assert_eq!(
            s.iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![0, 63, 64, 1023, 1024, 4095]
        );
        assert_eq!(s.next_after(CpuId(63)), Some(CpuId(64)));
        assert_eq!(s.next_after(CpuId(1024)), Some(top));
        assert_eq!(s.next_after(top), None);
        assert_eq!(s.cycle(top), Some(CpuId(0)));
        assert_eq!(CpuSet::first_n(MAX_CPUS).len(), MAX_CPUS);
        assert_eq!(CpuSet::first_n(65), CpuSet::from_ids(0..65));
        // Equal sets compare (and hash) equal whatever their history.
        let mut t = CpuSet::from_ids([5, 4000]);
        t.remove(CpuId(4000));
        assert_eq!(t, CpuSet::single(CpuId(5)));
        assert_eq!(format!("{t:?}"), "{5}");
    }

    #[test]
    #[should_panic]
    fn a_cpu_beyond_the_capacity_cannot_be_inserted() {
        assert!(!CpuSet::first_n(MAX_CPUS).contains(CpuId(MAX_CPUS as u32)));
        CpuSet::single(CpuId(MAX_CPUS as u32));
    }

    fn model(s: &CpuSet) -> BTreeSet<u32> {
        s.iter().map(|c| c.0).collect()
    }

    fn hash_of(s: &CpuSet) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        s.hash(&mut h);
        h.finish()
    }

    /// CPU numbers clustered on word edges and spread over the whole capacity.
    fn cpu() -> impl Strategy<Value = u32> {
        prop_oneof![
            0u32..130,
            (0u32..64).prop_map(|w| w * 64 + 63),
            (0u32..64).prop_map(|w| w * 64),
            0u32..MAX_CPUS as u32,
        ]
    }

    fn set() -> impl Strategy<Value = BTreeSet<u32>> {
        proptest::collection::btree_set(cpu(), 0..40)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn matches_a_btreeset_model(a in set(), b in set(), probe in cpu(), rm in set()) {
            let mut sa = CpuSet::from_ids(a.iter().copied());
            let sb = CpuSet::from_ids(b.iter().copied());
            let mut ma = a.clone();
            for c in &rm {
                sa.remove(CpuId(*c));
                ma.remove(c);
            }
            prop_assert_eq!(model(&sa), ma.clone());
            prop_assert_eq!(sa.len(), ma.len());
            prop_assert_eq!(sa.count(), ma.len());
            prop_assert_eq!(sa.is_empty(), ma.is_empty());
            prop_assert_eq!(sa.first().map(|c| c.0), ma.first().copied());
            prop_assert_eq!(sa.contains(CpuId(probe)), ma.contains(&probe));

            let and: BTreeSet<u32> = ma.intersection(&b).copied().collect();
            let or: BTreeSet<u32> = ma.union(&b).copied().collect();
            let minus: BTreeSet<u32> = ma.difference(&b).copied().collect();
            prop_assert_eq!(model(&sa.and(&sb)), and.clone());
            prop_assert_eq!(model(&sa.or(&sb)), or.clone());
            prop_assert_eq!(model(&sa.minus(&sb)), minus.clone());
            let (mut x, mut y, mut z) = (sa, sa, sa);
            x.and_with(&sb);
            y.or_with(&sb);
            z.minus_with(&sb);
            prop_assert_eq!(model(&x), and.clone());
            prop_assert_eq!(model(&y), or);
            prop_assert_eq!(model(&z), minus.clone());
            prop_assert_eq!(sa.intersects(&sb), !and.is_empty());
            prop_assert_eq!(sa.is_subset(&sb), ma.is_subset(&b));
            // Refilling a reused set (holding stale members of any size) in place.
            let stale = CpuSet::from_ids(rm.iter().copied());
            let (mut p, mut q) = (stale, stale);
            p.assign_and(&sa, &sb);
            q.assign_minus(&sa, &sb);
            prop_assert_eq!(model(&p), and.clone());
            prop_assert_eq!(model(&q), minus.clone());
            prop_assert_eq!(p, sa.and(&sb));
            prop_assert_eq!(q, sa.minus(&sb));
            let ms = model(&stale);
            prop_assert_eq!(stale.is_subset_of_minus(&sa, &sb), ms.is_subset(&minus));
            prop_assert_eq!(sb.is_subset_of_minus(&sa, &stale), b.is_subset(&ma.difference(&ms).copied().collect()));

            let after = ma.range(probe + 1..).next().copied();
            prop_assert_eq!(sa.next_after(CpuId(probe)).map(|c| c.0), after);
            let cyc = after.or_else(|| ma.first().copied());
            prop_assert_eq!(sa.cycle(CpuId(probe)).map(|c| c.0), cyc);
            let toc = if ma.contains(&probe) { Some(probe) } else { cyc };
            prop_assert_eq!(sa.test_or_cycle(CpuId(probe)).map(|c| c.0), toc);

            // Equality and hashing do not depend on how a set was built.
            let rebuilt = CpuSet::from_ids(ma.iter().copied());
            prop_assert_eq!(sa, rebuilt);
            prop_assert_eq!(hash_of(&sa), hash_of(&rebuilt));
            prop_assert_eq!(sa == sb, ma == b);
        }
    }
}
