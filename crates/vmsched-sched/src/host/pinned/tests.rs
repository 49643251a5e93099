//! Unit tests of the `pinned` host scheduler, driven through the engine's test [`Harness`].

use super::*;
use vmsched_core::testkit::{params, Harness};

#[test]
fn each_entity_runs_on_its_own_cpu_at_once() {
    let mut h = Harness::new(Pinned::new(2), 2, vec![params(0, 2), params(1, 2)]);
    h.wake(1, WakeInfo::default());
    assert_eq!(h.deliver_resched(), vec![1]);
    assert_eq!(h.curr(1), Some(1));
    assert_eq!(h.curr(0), None);
    assert_eq!(h.block(1).next, None);
}
