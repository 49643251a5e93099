//! A fixed-size CPU bit set (up to 256 CPUs of one level), used for affinity masks.

use crate::ids::CpuId;

pub const MAX_CPUS: usize = 256;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CpuSet([u64; MAX_CPUS / 64]);

impl CpuSet {
    pub const fn empty() -> Self {
        CpuSet([0; MAX_CPUS / 64])
    }

    /// CPUs 0..n.
    pub fn first_n(n: usize) -> Self {
        let mut s = Self::empty();
        for c in 0..n {
            s.insert(CpuId(c as u32));
        }
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

    #[inline]
    pub fn insert(&mut self, c: CpuId) {
        self.0[c.idx() / 64] |= 1 << (c.idx() % 64);
    }

    #[inline]
    pub fn remove(&mut self, c: CpuId) {
        self.0[c.idx() / 64] &= !(1 << (c.idx() % 64));
    }

    #[inline]
    pub fn contains(&self, c: CpuId) -> bool {
        self.0[c.idx() / 64] & (1 << (c.idx() % 64)) != 0
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn and(&self, o: &CpuSet) -> CpuSet {
        let mut r = *self;
        for i in 0..r.0.len() {
            r.0[i] &= o.0[i];
        }
        r
    }

    pub fn minus(&self, o: &CpuSet) -> CpuSet {
        let mut r = *self;
        for i in 0..r.0.len() {
            r.0[i] &= !o.0[i];
        }
        r
    }

    pub fn is_subset(&self, o: &CpuSet) -> bool {
        self.minus(o).is_empty()
    }

    /// Lowest member.
    pub fn first(&self) -> Option<CpuId> {
        for (i, w) in self.0.iter().enumerate() {
            if *w != 0 {
                return Some(CpuId((i * 64) as u32 + w.trailing_zeros()));
            }
        }
        None
    }

    /// Next member strictly after `c`, wrapping to the lowest; `c` itself if it is the only
    /// member (Xen's `cpumask_cycle`).
    pub fn cycle(&self, c: CpuId) -> Option<CpuId> {
        let n = c.idx();
        for k in n + 1..MAX_CPUS {
            if self.contains(CpuId(k as u32)) {
                return Some(CpuId(k as u32));
            }
        }
        self.first()
    }

    /// `c` if it is a member, else `cycle(c)` (Xen's `cpumask_test_or_cycle`).
    pub fn test_or_cycle(&self, c: CpuId) -> Option<CpuId> {
        if self.contains(c) {
            Some(c)
        } else {
            self.cycle(c)
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = CpuId> + '_ {
        (0..MAX_CPUS)
            .filter(|c| self.contains(CpuId(*c as u32)))
            .map(|c| CpuId(c as u32))
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
}
