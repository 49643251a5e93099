//! Xen event channels, 2-level ABI: one domain's ports with their pending and mask bits, each
//! vCPU's selector and upcall-pending flag, and the order in which the guest's upcall handler
//! serves pending ports. Plain data: the engine glue (kicks, kernel work) is in `sim/io.rs`.
//!
//! Facts, read from Xen 4.20 `xen/common/event_channel.c` and `event_2l.c` (the same logic since
//! 3.x) and spec/xen-schedulers.md §1.9 with ERRATA X5 (the erratum wins):
//! - A port is allocated lowest-free-first when it is bound (`get_free_port`); port 0 is never
//!   handed out. A guest created later therefore gets higher backend ports in dom0.
//! - Setting a port pending (`evtchn_2l_set_pending`): if it was pending already, nothing more.
//!   If it is not masked and its word's bit in the target vCPU's selector was newly set, the
//!   vCPU's upcall becomes pending (`vcpu_mark_events_pending`); only a *newly* pending upcall
//!   kicks the vCPU (the engine's part).
//! - Unmasking a pending port re-does the selector and upcall step (`evtchn_2l_unmask`).
//! - The order in which pending ports are served is the guest's (ERRATA X5), per guest:
//!   [`ScanOrder::LowestFirst`], XenLinux up to 3.1 (`evtchn_do_upcall`): while the upcall is
//!   pending, clear it and take the selector; for each taken word from the lowest, serve the
//!   lowest pending unmasked port of that word, re-reading the word after every port, until the
//!   word is empty; every upcall starts again at port 0, so busy low ports can starve a high one.
//!   [`ScanOrder::RoundRobin`], PV-on-HVM drivers from 2008 and upstream Linux `events_2l`
//!   (`xen_evtchn_handle_events`): resume after the last port served on this vCPU and wrap, so
//!   every pending port is served once before any is served twice.
//! - A word is the guest's `long`: 64 ports on a 64-bit guest, 32 on a 32-bit one.
//!
//! Simplified (docs/io.md): round-robin looks at every port's current pending bit when it picks
//! the next one (upstream reads a word's bits once per visit); FIFO event channels (4.4+) are
//! not modelled; a port moves only when its vCPU goes offline ([`Evtchn::rebind`], driven by
//! `sim/io.rs` from the guest CPU's offline), never at the guest's or irqbalance's wish.

use crate::cpuset::CpuSet;
use crate::ids::CpuId;

/// The guest's order of serving pending ports (`[domain.kernel] evtchn_order`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScanOrder {
    /// XenLinux up to 3.1: every upcall restarts at port 0 (ERRATA X5).
    LowestFirst,
    /// Upstream Linux `events_2l` and PV-on-HVM drivers: resume after the last port served.
    #[default]
    RoundRobin,
}

/// What serving a port does (the engine's handlers in `sim/io.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortFn {
    /// Bound, nothing to do (a port reserved for the domain's other channels).
    Idle,
    /// The driver domain's physical NIC interrupt (a PIRQ bound to an event channel).
    NicRx,
    /// netback's port for flow `f` in the driver domain (the guest's transmit notifications).
    NetbackTx(u32),
    /// netfront's port for flow `f` in the guest (the backend's receive notifications).
    NetfrontRx(u32),
    /// The device model's ioreq port for HVM vCPU `k` of the I/O path's list, in the driver
    /// domain (qemu-dm's `xc_evtchn_bind_interdomain` to the vCPU's Xen-consumed port).
    Ioreq(u32),
    /// A parallel job's vif `k` (sim/job.rs): netback's port for its guest's messages, in the
    /// driver domain; netfront's port for the messages to it, in the guest.
    VifTx(u32),
    VifRx(u32),
}

/// One bound port.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Port {
    /// The local vCPU the port notifies (`EVTCHNOP_bind_vcpu`; vCPU 0 by default).
    pub vcpu: u32,
    pub func: PortFn,
    /// When it last became pending (meaningful while pending).
    pub since: u64,
    /// Figures since the start or the warm-up: times served, and the longest time it stayed
    /// pending before its handler took it (the starvation the scan order causes).
    pub served: u64,
    pub max_wait: u64,
}

/// One vCPU's event-channel state: Xen's `evtchn_upcall_pending` and `evtchn_pending_sel`, and
/// the guest handler's place in its scan.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct VcpuEvt {
    /// `evtchn_upcall_pending`.
    pub upcall: bool,
    /// `evtchn_pending_sel`: a bit per word with a pending port.
    pub sel: u64,
    /// Lowest-first: the words taken from the selector in this pass, not yet visited.
    snap: u64,
    /// Lowest-first: the word being served, if any.
    word: Option<u32>,
    /// Round-robin: the last port served (the next scan starts after it).
    last: u32,
}

/// One domain's event channels.
#[derive(Clone, Debug)]
pub(crate) struct Evtchn {
    pub order: ScanOrder,
    word_bits: u32,
    pending: Vec<u64>,
    masked: Vec<u64>,
    pub ports: Vec<Option<Port>>,
    pub vcpus: Vec<VcpuEvt>,
    /// Per vCPU, the ports bound to it, as words (Linux's `cpu_evtchn_mask`).
    cpu_mask: Vec<Vec<u64>>,
    /// The ports whose affinity an offline has broken, with their affinity now (every vCPU
    /// online at the time). Any other port's affinity (Linux's IRQ affinity mask) is its bound
    /// vCPU: the scenario pins it there. Cold: read and written only at an offline
    /// ([`Evtchn::rebind_off`]), and kept out of [`Port`] (a `CpuSet` is large).
    broken: std::collections::BTreeMap<u32, CpuSet>,
}

impl Evtchn {
    /// A domain with `nr_vcpus` vCPUs, words of `word_bits` ports (32 or 64) and room for
    /// `word_bits * 64` ports (a 64-bit selector).
    pub fn new(order: ScanOrder, word_bits: u32, nr_vcpus: u32) -> Evtchn {
        assert!(
            (1..=64).contains(&word_bits),
            "invariant: an event-channel word holds 1..=64 ports"
        );
        Evtchn {
            order,
            word_bits,
            pending: vec![0; 64],
            masked: vec![0; 64],
            // Port 0 is reserved (Xen never allocates it).
            ports: vec![None],
            vcpus: vec![VcpuEvt::default(); nr_vcpus as usize],
            cpu_mask: vec![vec![0; 64]; nr_vcpus as usize],
            broken: std::collections::BTreeMap::new(),
        }
    }

    /// The most ports a domain can have here.
    pub fn max_ports(&self) -> u32 {
        self.word_bits * 64
    }

    /// Binds the lowest free port to `func` on `vcpu` (Xen `get_free_port`). Err: no port left.
    pub fn bind(&mut self, vcpu: u32, func: PortFn) -> Result<u32, String> {
        let port = match self.ports.iter().skip(1).position(|p| p.is_none()) {
            Some(i) => i + 1,
            None => {
                self.ports.push(None);
                self.ports.len() - 1
            }
        };
        if port as u32 >= self.max_ports() {
            return Err(format!(
                "no free event-channel port: {} ports of {} bits each are taken",
                self.max_ports(),
                self.word_bits
            ));
        }
        self.ports[port] = Some(Port {
            vcpu,
            func,
            since: 0,
            served: 0,
            max_wait: 0,
        });
        self.broken.remove(&(port as u32));
        let (w, b) = self.at(port as u32);
        self.cpu_mask[vcpu as usize][w] |= b;
        Ok(port as u32)
    }

    #[inline]
    fn at(&self, port: u32) -> (usize, u64) {
        (
            (port / self.word_bits) as usize,
            1u64 << (port % self.word_bits),
        )
    }

    pub fn is_pending(&self, port: u32) -> bool {
        let (w, b) = self.at(port);
        self.pending[w] & b != 0
    }

    /// Xen `evtchn_2l_set_pending` at time `now`: Some(vCPU) when that vCPU's upcall became
    /// newly pending (the engine kicks it), None otherwise.
    pub fn set_pending(&mut self, port: u32, now: u64) -> Option<u32> {
        let (w, b) = self.at(port);
        if self.pending[w] & b != 0 {
            return None;
        }
        self.pending[w] |= b;
        if let Some(p) = self.ports[port as usize].as_mut() {
            p.since = now;
        }
        if self.masked[w] & b != 0 {
            return None;
        }
        self.mark(port, w)
    }

    /// The selector and upcall step for a pending unmasked port in word `w`.
    fn mark(&mut self, port: u32, w: usize) -> Option<u32> {
        let v = self.ports[port as usize]
            .expect("invariant: a pending port is bound")
            .vcpu;
        let ve = &mut self.vcpus[v as usize];
        let sb = 1u64 << w;
        if ve.sel & sb != 0 {
            return None;
        }
        ve.sel |= sb;
        if ve.upcall {
            return None;
        }
        ve.upcall = true;
        Some(v)
    }

    /// The handler takes a port at time `now`: clear its pending bit and mask it while it
    /// runs (Linux's mask-and-ack of an event-channel interrupt).
    pub fn ack(&mut self, port: u32, now: u64) {
        let (w, b) = self.at(port);
        self.pending[w] &= !b;
        self.masked[w] |= b;
        if let Some(p) = self.ports[port as usize].as_mut() {
            p.served += 1;
            p.max_wait = p.max_wait.max(now.saturating_sub(p.since));
        }
    }

    /// How long `port` has been pending at `now` (0 if it is not).
    pub fn pending_for(&self, port: u32, now: u64) -> u64 {
        let (w, b) = self.at(port);
        match self.ports[port as usize] {
            Some(p) if self.pending[w] & b != 0 => now.saturating_sub(p.since),
            _ => 0,
        }
    }

    /// Starts the figures again (the warm-up's end): a port pending now counts from now.
    pub fn reset_figures(&mut self, now: u64) {
        for p in self.ports.iter_mut().flatten() {
            p.served = 0;
            p.max_wait = 0;
            p.since = p.since.max(now);
        }
    }

    /// Xen `evtchn_2l_unmask`: Some(vCPU) when the port was pending meanwhile and the vCPU's
    /// upcall became newly pending.
    pub fn unmask(&mut self, port: u32) -> Option<u32> {
        let (w, b) = self.at(port);
        self.masked[w] &= !b;
        if self.pending[w] & b != 0 {
            self.mark(port, w)
        } else {
            None
        }
    }

    /// vCPU `v` goes offline, `online` being the domain's vCPUs still online: every port bound
    /// to it moves to another one, in port order. Returns the vCPUs whose upcall became newly
    /// pending (to kick), and the ports whose affinity was broken (to log).
    ///
    /// The target, as Linux v5.10 picks it (`irq_migrate_all_off_this_cpu` → `migrate_one_irq`,
    /// then the Xen IRQ chip's `set_affinity_irq`): the lowest online vCPU of the port's
    /// affinity; if none is online, the affinity becomes every online vCPU (the kernel's "no
    /// longer affine to CPU" case) and the target is the lowest of them.
    ///
    /// Each move is Linux `xen_rebind_evtchn_to_cpu`: mask the port, `EVTCHNOP_bind_vcpu` (Xen
    /// `evtchn_bind_vcpu` only changes an interdomain port's notified vCPU: it raises nothing
    /// itself), move the port in the guest's per-vCPU masks (`bind_evtchn_to_cpu`), unmask.
    /// The unmask (Xen `evtchn_2l_unmask`) re-raises a port that is still pending on the *new*
    /// vCPU's selector and upcall, so a pending event moves with its port. A port masked by a handler in progress stays masked
    /// (the engine completes that handler first; its unmask then marks the new vCPU).
    ///
    /// Afterwards vCPU `v` has no port: its selector, upcall flag and scan state are cleared,
    /// so a port bound there again later starts from a clean upcall.
    pub fn rebind_off(&mut self, v: u32, online: &CpuSet) -> (Vec<u32>, Vec<(u32, u32)>) {
        assert!(
            !online.contains(CpuId(v)),
            "invariant: the vCPU going offline is not in the online set"
        );
        let (mut kicks, mut broken) = (Vec::new(), Vec::new());
        for port in 1..self.ports.len() as u32 {
            let Some(p) = self.ports[port as usize] else {
                continue;
            };
            if p.vcpu != v {
                continue;
            }
            let aff = self.affinity(port);
            let to = match aff.and(online).first() {
                Some(c) => c.0,
                None => {
                    self.broken.insert(port, *online);
                    let c = online
                        .first()
                        .expect("invariant: a domain keeps an online vCPU");
                    broken.push((port, c.0));
                    c.0
                }
            };
            if let Some(k) = self.rebind(port, to) {
                kicks.push(k);
            }
        }
        let keep = self.vcpus[v as usize].last;
        self.vcpus[v as usize] = VcpuEvt {
            last: keep,
            ..VcpuEvt::default()
        };
        (kicks, broken)
    }

    /// `port`'s affinity (Linux's IRQ affinity mask): its bound vCPU, or what an offline that
    /// broke it left.
    pub fn affinity(&self, port: u32) -> CpuSet {
        match self.broken.get(&port) {
            Some(a) => *a,
            None => {
                let p = self.ports[port as usize].expect("invariant: a bound port");
                CpuSet::single(CpuId(p.vcpu))
            }
        }
    }

    /// Moves `port` to vCPU `to` (Xen `evtchn_bind_vcpu` inside Linux's mask/unmask): Some(vCPU)
    /// when its pending event newly marked `to`'s upcall.
    fn rebind(&mut self, port: u32, to: u32) -> Option<u32> {
        let (w, b) = self.at(port);
        let p = self.ports[port as usize]
            .as_mut()
            .expect("invariant: a rebound port is bound");
        let from = p.vcpu;
        p.vcpu = to;
        self.cpu_mask[from as usize][w] &= !b;
        self.cpu_mask[to as usize][w] |= b;
        if self.pending[w] & b != 0 && self.masked[w] & b == 0 {
            self.mark(port, w)
        } else {
            None
        }
    }

    /// Lowest pending unmasked port of word `w` bound to vCPU `v`.
    #[inline]
    fn lowest_in(&self, v: u32, w: u32) -> Option<u32> {
        let w_ = w as usize;
        let bits = self.pending[w_] & !self.masked[w_] & self.cpu_mask[v as usize][w_];
        (bits != 0).then(|| w * self.word_bits + bits.trailing_zeros())
    }

    /// The next port vCPU `v`'s upcall handler serves, in the guest's order; None: the upcall
    /// is over (nothing pending for it). Consumes the upcall flag and the selector as the guest
    /// does.
    pub fn next_port(&mut self, v: u32) -> Option<u32> {
        match self.order {
            ScanOrder::LowestFirst => self.next_lowest_first(v),
            ScanOrder::RoundRobin => self.next_round_robin(v),
        }
    }

    /// XenLinux ≤ 3.1 `evtchn_do_upcall`.
    fn next_lowest_first(&mut self, v: u32) -> Option<u32> {
        loop {
            let ve = self.vcpus[v as usize];
            if let Some(w) = ve.word {
                if let Some(p) = self.lowest_in(v, w) {
                    return Some(p);
                }
                self.vcpus[v as usize].word = None;
                continue;
            }
            let ve = &mut self.vcpus[v as usize];
            if ve.snap != 0 {
                let w = ve.snap.trailing_zeros();
                ve.snap &= !(1u64 << w);
                ve.word = Some(w);
                continue;
            }
            if ve.upcall {
                ve.upcall = false;
                ve.snap = std::mem::take(&mut ve.sel);
                continue;
            }
            return None;
        }
    }

    /// Upstream Linux `events_2l`: the first pending unmasked port of this vCPU after the last
    /// one served, wrapping.
    fn next_round_robin(&mut self, v: u32) -> Option<u32> {
        let ve = &mut self.vcpus[v as usize];
        ve.upcall = false;
        ve.sel = 0;
        let n = self.ports.len() as u32;
        let start = ve.last;
        for k in 1..=n {
            let p = (start + k) % n;
            let (w, b) = self.at(p);
            let ok = self.pending[w] & !self.masked[w] & self.cpu_mask[v as usize][w] & b != 0;
            if ok {
                self.vcpus[v as usize].last = p;
                return Some(p);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dom(order: ScanOrder, ports: u32) -> Evtchn {
        let mut d = Evtchn::new(order, 64, 1);
        for _ in 0..ports {
            d.bind(0, PortFn::Idle).unwrap();
        }
        d
    }

    /// Serves `n` ports; after serving port `p`, `refire(p)` says whether it is pending again
    /// at once (a busy device). Returns the ports served in order.
    fn serve(d: &mut Evtchn, n: usize, refire: impl Fn(u32) -> bool) -> Vec<u32> {
        let mut out = Vec::new();
        for _ in 0..n {
            let Some(p) = d.next_port(0) else { break };
            d.ack(p, 0);
            out.push(p);
            d.unmask(p);
            if refire(p) {
                d.set_pending(p, 0);
            }
        }
        out
    }

    #[test]
    fn ports_are_bound_lowest_free_first_from_one() {
        let mut d = Evtchn::new(ScanOrder::RoundRobin, 64, 2);
        assert_eq!(d.bind(0, PortFn::Idle), Ok(1));
        assert_eq!(d.bind(1, PortFn::NicRx), Ok(2));
        assert_eq!(d.bind(0, PortFn::NetbackTx(0)), Ok(3));
        d.ports[2] = None;
        d.cpu_mask[1][0] = 0;
        assert_eq!(
            d.bind(0, PortFn::NetbackTx(1)),
            Ok(2),
            "a freed port is reused first"
        );
        let mut tiny = Evtchn::new(ScanOrder::RoundRobin, 1, 1);
        for _ in 1..64 {
            tiny.bind(0, PortFn::Idle).unwrap();
        }
        assert!(tiny.bind(0, PortFn::Idle).is_err(), "64 ports of 1 bit");
    }

    #[test]
    fn only_a_newly_pending_unmasked_port_marks_the_upcall() {
        let mut d = dom(ScanOrder::LowestFirst, 3);
        assert_eq!(d.set_pending(2, 0), Some(0), "first event: kick vCPU 0");
        assert_eq!(d.set_pending(2, 0), None, "already pending");
        assert_eq!(
            d.set_pending(3, 0),
            None,
            "same word: selector bit already set"
        );
        d.ack(1, 0);
        assert_eq!(d.set_pending(1, 0), None, "masked: pending but no upcall");
        assert!(d.is_pending(1));
        // The handler runs and clears everything; unmasking the pending port re-marks.
        while let Some(p) = d.next_port(0) {
            d.ack(p, 0);
        }
        assert!(!d.vcpus[0].upcall);
        d.set_pending(1, 0);
        assert_eq!(d.unmask(1), Some(0), "unmask of a pending port kicks");
    }

    #[test]
    fn lowest_first_starves_a_high_port_while_lower_ports_keep_firing() {
        let mut d = dom(ScanOrder::LowestFirst, 3);
        for p in 1..=3 {
            d.set_pending(p, 0);
        }
        // Ports 1 and 2 are busy devices: pending again as soon as served.
        let served = serve(&mut d, 100, |p| p <= 2);
        assert_eq!(served.len(), 100);
        assert!(!served.contains(&3), "port 3 starves: {served:?}");
        assert!(d.is_pending(3));
    }

    #[test]
    fn lowest_first_starves_across_words_too() {
        let mut d = Evtchn::new(ScanOrder::LowestFirst, 32, 1);
        for _ in 0..40 {
            d.bind(0, PortFn::Idle).unwrap();
        }
        d.set_pending(1, 0);
        d.set_pending(35, 0);
        let served = serve(&mut d, 50, |p| p == 1);
        assert!(!served.contains(&35), "word 1 is never reached: {served:?}");
        // Once port 1 stops firing the upcall reaches word 1.
        let rest = serve(&mut d, 10, |_| false);
        assert_eq!(rest, vec![1, 35]);
    }

    #[test]
    fn round_robin_serves_every_pending_port_before_any_twice() {
        let mut d = dom(ScanOrder::RoundRobin, 3);
        for p in 1..=3 {
            d.set_pending(p, 0);
        }
        let served = serve(&mut d, 9, |p| p <= 2);
        assert_eq!(served, vec![1, 2, 3, 1, 2, 1, 2, 1, 2]);
        let mut d = dom(ScanOrder::RoundRobin, 3);
        d.set_pending(2, 0);
        assert_eq!(serve(&mut d, 5, |_| false), vec![2]);
        d.set_pending(1, 0);
        d.set_pending(3, 0);
        assert_eq!(
            serve(&mut d, 5, |_| false),
            vec![3, 1],
            "resumes after the last port served, then wraps"
        );
    }

    #[test]
    fn a_port_records_its_longest_pending_time_and_its_services() {
        let mut d = dom(ScanOrder::LowestFirst, 2);
        d.set_pending(2, 100);
        d.set_pending(1, 150);
        assert_eq!(d.pending_for(2, 400), 300);
        let p = d.next_port(0).unwrap();
        assert_eq!(p, 1);
        d.ack(p, 400);
        d.unmask(p);
        let p = d.next_port(0).unwrap();
        d.ack(p, 900);
        let fig = |d: &Evtchn, i: usize| (d.ports[i].unwrap().served, d.ports[i].unwrap().max_wait);
        assert_eq!(fig(&d, 1), (1, 250));
        assert_eq!(fig(&d, 2), (1, 800));
        assert_eq!(d.pending_for(2, 1000), 0);
        d.set_pending(2, 1000);
        d.reset_figures(1500);
        assert_eq!(fig(&d, 2), (0, 0));
        assert_eq!(d.pending_for(2, 1700), 200, "counted from the reset");
    }

    #[test]
    fn ports_of_another_vcpu_are_not_served() {
        let mut d = Evtchn::new(ScanOrder::RoundRobin, 64, 2);
        d.bind(0, PortFn::Idle).unwrap();
        d.bind(1, PortFn::Idle).unwrap();
        assert_eq!(d.set_pending(2, 0), Some(1));
        assert_eq!(d.next_port(0), None);
        assert_eq!(d.next_port(1), Some(2));
        let mut l = Evtchn::new(ScanOrder::LowestFirst, 64, 2);
        l.bind(0, PortFn::Idle).unwrap();
        l.bind(1, PortFn::Idle).unwrap();
        assert_eq!(l.set_pending(2, 0), Some(1));
        assert_eq!(l.next_port(0), None);
        assert_eq!(l.next_port(1), Some(2));
    }

    #[test]
    fn offline_rebinds_to_the_lowest_online_vcpu_of_the_affinity_and_moves_the_pending_event() {
        let mut d = Evtchn::new(ScanOrder::RoundRobin, 64, 4);
        let a = d.bind(1, PortFn::Idle).unwrap();
        let b = d.bind(2, PortFn::Idle).unwrap();
        assert_eq!(d.set_pending(a, 0), Some(1));
        // vCPU 1 goes offline with 0, 2 and 3 online: the port's affinity {1} has no online
        // vCPU, so it is broken to every online vCPU and the port goes to the lowest, 0.
        let online = CpuSet::from_ids([0, 2, 3]);
        let (kicks, broken) = d.rebind_off(1, &online);
        assert_eq!(kicks, vec![0], "the pending event marks vCPU 0's upcall");
        assert_eq!(broken, vec![(a, 0)]);
        assert_eq!(d.ports[a as usize].unwrap().vcpu, 0);
        assert!(d.affinity(a) == online, "broken to the online vCPUs");
        assert!(
            d.affinity(b) == CpuSet::single(CpuId(2)),
            "unbroken: its vCPU"
        );
        assert!(
            !d.vcpus[1].upcall && d.vcpus[1].sel == 0,
            "vCPU 1 is left clean"
        );
        assert_eq!(d.next_port(1), None);
        assert_eq!(d.next_port(0), Some(a), "served on vCPU 0");
        d.ack(a, 0);
        assert_eq!(
            d.ports[b as usize].unwrap().vcpu,
            2,
            "another vCPU's port stays"
        );
        // vCPU 0 goes offline next: the port's (broken) affinity {0, 2, 3} still holds online
        // vCPUs, so it goes to the lowest of them, 2, without breaking again. It is masked (its
        // handler runs): it moves, but marks nothing until the unmask, which marks vCPU 2.
        d.set_pending(a, 0);
        let (kicks, broken) = d.rebind_off(0, &CpuSet::from_ids([2, 3]));
        assert!(
            kicks.is_empty() && broken.is_empty(),
            "{kicks:?} {broken:?}"
        );
        assert_eq!(d.ports[a as usize].unwrap().vcpu, 2);
        assert_eq!(d.unmask(a), Some(2));
        assert_eq!(d.next_port(2), Some(a));
    }

    #[test]
    fn offline_rebinds_in_lowest_first_order_too() {
        let mut d = Evtchn::new(ScanOrder::LowestFirst, 64, 2);
        d.bind(0, PortFn::Idle).unwrap();
        let p = d.bind(1, PortFn::Idle).unwrap();
        assert_eq!(d.set_pending(p, 0), Some(1));
        let (kicks, _) = d.rebind_off(1, &CpuSet::from_ids([0]));
        assert_eq!(kicks, vec![0]);
        assert_eq!(d.next_port(0), Some(p));
    }
}
