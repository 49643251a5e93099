//! The I/O path through a driver domain (issue 11 item 3; docs/io.md): event-channel
//! notifications and their upcalls, kernel work on a vCPU, and the network path of a ping
//! (NIC → driver domain → netback → guest netfront → echo reply → netback → NIC).
//!
//! **Notify** (Xen `evtchn_send` / `evtchn_2l_set_pending`, spec/xen-schedulers.md §1.9 with
//! ERRATA X5): the port becomes pending ([`Evtchn::set_pending`]); if that newly marks the
//! target vCPU's upcall, the vCPU is kicked: halted → woken through the host scheduler's wake
//! path (`vcpu_kick` → `vcpu_unblock` → the scheduler's wake hook; the exit model's `kick_ns`
//! applies, as for guest timers and IPIs); runnable but descheduled → the upcall is held in its
//! [`PendingIrqs`] until it runs; running → the upcall starts at once, or after the host's IPI
//! latency when the notifier runs on another CPU.
//!
//! **Upcall** (the guest's `evtchn_do_upcall`): the vCPU serves its pending ports one at a
//! time in the guest's order ([`ScanOrder`]); each port's handler is *kernel work on the vCPU,
//! not a task*: while it runs, the task current on that guest CPU makes no progress (it is not
//! preempted in its scheduler's eyes, and the scheduler's clock keeps charging it, as Linux
//! without `CONFIG_IRQ_TIME_ACCOUNTING` charges interrupt time to the interrupted task), the
//! guest CPU does not halt, and the work is paused while the vCPU is descheduled. The handler
//! takes the packets queued for it when it starts (a batch), costs a per-packet time, and
//! passes them on when it ends (netback notifies once per batch).
//!
//! **Network path** (spec/workloads.md §7.1): a request arrives at the NIC (the workload's
//! schedule) → the NIC's receive ring and the driver domain's NIC port → `nic_rx_ns +
//! rx_copy_ns` per packet in the driver domain (the NIC driver, the bridge, netback's copy
//! into the guest's ring) → the guest's netfront port → `echo_ns` per packet in the guest
//! kernel (the echo reply, queued on netfront's transmit ring) → the guest's backend port in
//! the driver domain → `tx_ns` per packet (netback, bridge, NIC transmit): the reply leaves,
//! and its round-trip time is recorded. A packet that finds its ring full is dropped.
//!
//! **HVM device-model round trip** (ERRATA X9; Xen 3.3 `hvm_send_assist_req` in
//! `xen/arch/x86/hvm/hvm.c`, `prepare_wait_on_xen_event_channel` in `xen/include/xen/event.h`,
//! `evtchn_send` in `xen/common/event_channel.c`; 4.20 `ioreq_send` in `xen/common/ioreq.c`):
//! an `ioreq` step of a task on an HVM vCPU sets the vCPU "blocked in Xen" (not runnable, and
//! `offline`, not `blocked`, when it is switched out), notifies the device model's port in the
//! driver domain (an ordinary event: pending bit, upcall, kick; the wake goes through the host
//! scheduler's wake hook) and reschedules the vCPU's pCPU. dom0's handler (kernel work of
//! `device_model.notify_ns + emulate_ns`: the evtchn driver, qemu-dm's emulation and its
//! notify) completes the request with a *direct* wake of the vCPU: Xen's send on a port whose
//! consumer is Xen clears `_VPF_blocked_in_xen` and calls `vcpu_wake`, with no pending bit and
//! no upcall in the guest. Guest events meanwhile stay pending: they do not wake a vCPU
//! blocked in Xen.

use super::evtchn::{Evtchn, PortFn};
use super::*;
use crate::cpuset::CpuSet;
use crate::scenario::io::NetbackConfig;
use crate::workload::ping::{self, PingTimes};
use crate::workload::stream::{self, StreamParams};

/// The I/O configuration the builder adds (crates/vmsched-sched/src/build.rs fills it).
#[derive(Clone, Debug)]
pub struct IoSpec {
    /// The driver domain's guest level and its netback costs.
    pub driver: LevelId,
    pub netback: NetbackConfig,
    /// Every guest level with event channels (the driver domain and each pinged guest): its
    /// scan order and word width.
    pub evtchn: Vec<(LevelId, ScanOrder, u32)>,
    /// Network flows, in the order their backends are bound in the driver domain (creation
    /// order).
    pub flows: Vec<NetFlow>,
    /// HVM guests whose programs make emulated I/O accesses, in creation order: each vCPU gets
    /// an ioreq port in the driver domain, bound when its device model starts (at the domain's
    /// creation, before its flows' backends).
    pub device_models: Vec<DeviceModel>,
    /// Guests with ranks of a parallel job across domains, in creation order: each gets a vif
    /// for the job's messages (sim/job.rs), bound after the flows' ports, netfront on vCPU 0.
    pub vifs: Vec<LevelId>,
}

/// One HVM guest's device model (qemu-dm in the driver domain).
#[derive(Clone, Copy, Debug)]
pub struct DeviceModel {
    pub guest: LevelId,
    /// Its ports are bound just before flow `before_flow`'s backend (the guest's first flow, or
    /// the number of flows of the domains declared before it).
    pub before_flow: usize,
    /// dom0's work per ioreq (`notify_ns + emulate_ns`).
    pub cost: Nanos,
    /// The driver domain's vCPU its ports are bound to.
    pub vcpu: u32,
}

/// One HVM vCPU's ioreq channel.
#[derive(Clone, Copy, Debug)]
struct Ioreq {
    /// The guest CPU (the vCPU's guest side).
    cpu: GCpu,
    /// Its port in the driver domain.
    port: u32,
    cost: Nanos,
    /// A request is waiting for the device model.
    pending: bool,
}

/// One guest's network workload: a vif with its netfront and backend ports.
#[derive(Clone, Copy, Debug)]
pub struct NetFlow {
    pub guest: LevelId,
    /// The workload's index among all workloads of the simulation (its metrics).
    pub workload: usize,
    pub kind: FlowKind,
    /// The guest vCPU netfront's port is bound to.
    pub vcpu: u32,
}

/// What comes in from outside, and what the guest's kernel does with it.
#[derive(Clone, Copy, Debug)]
pub enum FlowKind {
    /// ICMP echo requests at an interval, answered by the guest (workload/ping.rs).
    Ping(PingTimes),
    /// A windowed stream of packets, each acknowledged by the guest (workload/stream.rs).
    Stream(StreamParams),
}

/// A packet in flight: its arrival at the NIC, (a stream's) its sequence number, and whether
/// its arrival was counted in the measured phase. The flag, not `born >= warmup`, decides
/// whether its reply, ACK or drop is counted: a packet that arrives at the very instant the
/// warm-up ends may be handled before the reset that zeroes its arrival's count, and its reply
/// would then count without its request (`io_reset_metrics` clears the flag of every packet in
/// flight at the reset).
#[derive(Clone, Copy, Debug)]
struct Packet {
    born: SimTime,
    seq: u64,
    measured: bool,
}

/// A stream's loss the sender has not recovered yet (workload/stream.rs): a data packet dropped
/// on a full ring, or (`ack`) the ACK of a received one dropped on the guest's transmit ring.
#[derive(Clone, Copy, Debug)]
struct Hole {
    seq: u64,
    /// Duplicate ACKs seen for it so far (ACKs of later packets that reached the sender).
    dups: u32,
    /// When the retransmission timeout sends it again (its packet then reaches the NIC).
    rto_at: SimTime,
    ack: bool,
}

/// Kernel work of one guest CPU (the event-channel upcall in progress).
#[derive(Clone, Copy, Debug, Default)]
struct KWork {
    /// The end of the current port's handler; the IPI that starts an upcall.
    slot: Option<SlotId>,
    upcall_slot: Option<SlotId>,
    /// The port being served (0: none).
    port: u32,
    /// Packets the handler took.
    batch: u32,
    remaining: Nanos,
    since: Option<SimTime>,
    /// This upcall's notifications woke a vCPU (whose scheduler learns, at the upcall's end,
    /// that the batch is over: `Scheduler::wake_batch_end`).
    woke: bool,
}

struct Flow {
    wl: usize,
    guest: LevelId,
    /// netfront's port in the guest; netback's port for this guest in the driver domain.
    guest_port: u32,
    back_port: u32,
    kind: FlowKind,
    arrive_slot: SlotId,
    /// Requests in the guest's receive ring; replies in its transmit ring.
    rx: VecDeque<Packet>,
    tx: VecDeque<Packet>,
    /// Stream: when the packets the window allows will reach the NIC, in time order (one
    /// entry per window slot not in flight), and the last arrival (the line rate spaces them).
    ready: VecDeque<SimTime>,
    last_arrival: Option<SimTime>,
    /// Stream: the next packet's sequence number, and the losses not recovered yet (each holds
    /// its window slot until fast retransmit or the timeout gives it back).
    next_seq: u64,
    holes: Vec<Hole>,
    /// The workload's `dropped` counter.
    dropped: usize,
}

pub(super) struct IoState {
    /// Per level index: its event channels (None: no I/O there).
    doms: Vec<Option<Evtchn>>,
    /// Per global CPU.
    kcpu: Vec<KWork>,
    flows: Vec<Flow>,
    pub(super) driver: LevelId,
    nic_port: u32,
    /// The NIC's receive ring: (flow, packet).
    nic: VecDeque<(u32, Packet)>,
    net: NetbackConfig,
    /// HVM vCPUs' ioreq channels, and per global CPU the index of its own (None: no device
    /// model).
    ioreqs: Vec<Ioreq>,
    ioreq_of: Vec<Option<u32>>,
    /// Parallel jobs' vifs (sim/job.rs), and per level index its vif.
    pub(super) vifs: Vec<super::job::Vif>,
    pub(super) vif_of: Vec<Option<u32>>,
}

impl SimBuilder {
    /// Workloads added so far (the index the next one gets).
    pub fn nr_workloads(&self) -> usize {
        self.sim.wls.len()
    }

    /// Adds the I/O path: event channels on the levels named, the driver domain's NIC port
    /// (after its reserved ports), then per ping flow a backend port in the driver domain
    /// (lowest free, so in the order given) and a netfront port in the guest, and the flow's
    /// arrival schedule. Call after every level, vCPU and workload is added.
    pub fn add_io(&mut self, spec: IoSpec) {
        let nl = self.sim.levels.len();
        let mut doms: Vec<Option<Evtchn>> = (0..nl).map(|_| None).collect();
        let mut kcpu = vec![KWork::default(); self.sim.cpus.len()];
        for &(l, order, bits) in &spec.evtchn {
            let n = self.sim.levels[l.idx()].cpu_g.len() as u32;
            doms[l.idx()] = Some(Evtchn::new(order, bits, n));
            for i in 0..n as usize {
                let g = self.sim.levels[l.idx()].cpu_g[i];
                kcpu[g.idx()].slot = Some(self.slot(SlotKind::Kwork(g)));
                kcpu[g.idx()].upcall_slot = Some(self.slot(SlotKind::Upcall(g)));
            }
        }
        let bind = |doms: &mut Vec<Option<Evtchn>>, l: LevelId, v: u32, f: PortFn| -> u32 {
            doms[l.idx()]
                .as_mut()
                .expect("invariant: an I/O level has event channels")
                .bind(v, f)
                .unwrap_or_else(|e| panic!("invariant: ports validated, but {e}"))
        };
        let dv = spec.netback.vcpu;
        for _ in 0..spec.netback.reserved_ports {
            bind(&mut doms, spec.driver, dv, PortFn::Idle);
        }
        let nic_port = bind(&mut doms, spec.driver, dv, PortFn::NicRx);
        let ring = spec.netback.ring as usize;
        let mut flows = Vec::with_capacity(spec.flows.len());
        let mut ioreqs = Vec::new();
        let mut ioreq_of = vec![None; self.sim.cpus.len()];
        let mut dms = spec.device_models.iter().peekable();
        for f in 0..=spec.flows.len() {
            // Device models start with their domains, before those domains' netfronts connect.
            while let Some(dm) = dms.next_if(|d| d.before_flow <= f) {
                for &g in &self.sim.levels[dm.guest.idx()].cpu_g {
                    let k = ioreqs.len() as u32;
                    let port = bind(&mut doms, spec.driver, dm.vcpu, PortFn::Ioreq(k));
                    ioreq_of[g.idx()] = Some(k);
                    ioreqs.push(Ioreq {
                        cpu: g,
                        port,
                        cost: dm.cost,
                        pending: false,
                    });
                }
            }
            let Some(p) = spec.flows.get(f) else { break };
            let back_port = bind(&mut doms, spec.driver, dv, PortFn::NetbackTx(f as u32));
            let guest_port = bind(&mut doms, p.guest, p.vcpu, PortFn::NetfrontRx(f as u32));
            let arrive_slot = self.slot(SlotKind::Packet(f as u32));
            let (start, ready, dropped) = match p.kind {
                FlowKind::Ping(t) => (t.start, VecDeque::new(), ping::DROPPED),
                FlowKind::Stream(s) => (
                    s.start,
                    std::iter::repeat_n(s.start, s.window as usize).collect(),
                    stream::DROPPED,
                ),
            };
            self.sim.q.arm(arrive_slot, start);
            flows.push(Flow {
                wl: p.workload,
                guest: p.guest,
                guest_port,
                back_port,
                kind: p.kind,
                arrive_slot,
                rx: VecDeque::with_capacity(ring.min(1024)),
                tx: VecDeque::with_capacity(ring.min(1024)),
                ready,
                last_arrival: None,
                next_seq: 0,
                // Each hole holds a window slot: at most `window` of them.
                holes: Vec::with_capacity(match p.kind {
                    FlowKind::Stream(s) => (s.window as usize).min(1024),
                    FlowKind::Ping(_) => 0,
                }),
                dropped: dropped as usize,
            });
        }
        let mut vifs = Vec::with_capacity(spec.vifs.len());
        let mut vif_of = vec![None; nl];
        for &g in &spec.vifs {
            let k = vifs.len() as u32;
            let back_port = bind(&mut doms, spec.driver, dv, PortFn::VifTx(k));
            let guest_port = bind(&mut doms, g, 0, PortFn::VifRx(k));
            vif_of[g.idx()] = Some(k);
            vifs.push(super::job::Vif::new(g, guest_port, back_port));
        }
        self.sim.io = Some(Box::new(IoState {
            doms,
            kcpu,
            flows,
            driver: spec.driver,
            nic_port,
            nic: VecDeque::with_capacity(ring.min(4096)),
            net: spec.netback,
            ioreqs,
            ioreq_of,
            vifs,
            vif_of,
        }));
    }
}

impl Simulation {
    #[inline]
    fn io(&mut self) -> &mut IoState {
        self.io
            .as_mut()
            .expect("invariant: an I/O event with the I/O path built")
    }

    fn evt(&mut self, l: LevelId) -> &mut Evtchn {
        self.io().doms[l.idx()]
            .as_mut()
            .expect("invariant: a port of a level with event channels")
    }

    /// The event-channel port numbers of a level's ports of the given kinds, for tests and
    /// reports: (the driver domain's NIC port, per flow (backend port, netfront port)).
    pub fn io_ports(&self) -> Option<(u32, Vec<(u32, u32)>)> {
        let io = self.io.as_ref()?;
        Some((
            io.nic_port,
            io.flows
                .iter()
                .map(|f| (f.back_port, f.guest_port))
                .collect(),
        ))
    }

    /// The warm-up ends: the ports' figures start again, and the packets in flight (their
    /// arrivals counted before the reset, if at all) no longer count.
    pub(super) fn io_reset_metrics(&mut self) {
        let now = self.now;
        if let Some(io) = self.io.as_mut() {
            io.doms
                .iter_mut()
                .flatten()
                .for_each(|d| d.reset_figures(now));
            io.nic.iter_mut().for_each(|(_, p)| p.measured = false);
            for fl in &mut io.flows {
                fl.rx.iter_mut().for_each(|p| p.measured = false);
                fl.tx.iter_mut().for_each(|p| p.measured = false);
            }
        }
    }

    /// Every event-channel port, by level and port number (for the results).
    pub(crate) fn port_rows(&self) -> Vec<crate::report::PortResult> {
        let Some(io) = self.io.as_ref() else {
            return Vec::new();
        };
        let mut rows = Vec::new();
        for (l, d) in io.doms.iter().enumerate() {
            let Some(d) = d else { continue };
            for (n, p) in d.ports.iter().enumerate() {
                let Some(p) = p else { continue };
                let wl = |f: u32| {
                    let w = &self.wls[io.flows[f as usize].wl];
                    (&self.levels[w.level.idx()].name, &w.spec.name)
                };
                let handler = match p.func {
                    PortFn::Idle => "reserved".to_string(),
                    PortFn::NicRx => "nic".to_string(),
                    PortFn::NetbackTx(f) => {
                        let (dom, name) = wl(f);
                        format!("netback:{dom}/{name}")
                    }
                    PortFn::NetfrontRx(f) => format!("netfront:{}", wl(f).1),
                    PortFn::VifTx(k) => format!(
                        "netback:{}/job",
                        self.levels[io.vifs[k as usize].level.idx()].name
                    ),
                    PortFn::VifRx(_) => "netfront:job".to_string(),
                    PortFn::Ioreq(k) => {
                        let g = io.ioreqs[k as usize].cpu;
                        let cs = &self.cpus[g.idx()];
                        format!("ioreq:{}.v{}", self.levels[cs.level.idx()].name, cs.local.0)
                    }
                };
                rows.push(crate::report::PortResult {
                    level: self.levels[l].name.clone(),
                    port: n as u32,
                    vcpu: p.vcpu,
                    handler,
                    served: p.served,
                    max_wait_ns: p.max_wait,
                    pending_ns: d.pending_for(n as u32, self.now),
                });
            }
        }
        rows
    }

    /// `port` of level `l` is notified (Xen `evtchn_send`, or a physical interrupt bound to it).
    pub(super) fn evtchn_notify(&mut self, l: LevelId, port: u32) {
        let now = self.now;
        if self.trace.is_some() {
            let d = self.evt(l);
            let (already, v) = (
                d.is_pending(port),
                d.ports[port as usize].map_or(0, |p| p.vcpu),
            );
            let c = self.levels[l.idx()].cpu_g[v as usize];
            self.trace_notify(c, port, already);
        }
        if let Some(v) = self.evt(l).set_pending(port, now) {
            let c = self.levels[l.idx()].cpu_g[v as usize];
            self.upcall_kick(c);
        }
    }

    /// The vCPU sending an event from its upcall (the code running is guest CPU `l`'s port
    /// handler), as the waker of the wake the event causes at the level of `b`: the sender's
    /// own vCPU entity if it is at that level. None: the event comes from outside (a physical
    /// interrupt, Xen itself) or from a task.
    fn event_waker(&self, b: GEnt) -> Option<(GCpu, EntityId)> {
        let l = self.local_cpu.filter(|l| self.cpus[l.idx()].kwork)?;
        let w = self.cpus[l.idx()].backing?;
        let hl = self.ents[b.idx()].level;
        // Only at a host level (physical CPUs): a guest scheduler's waker is a task.
        let host = self.cpus[self.levels[hl.idx()].cpu_g[0].idx()]
            .backing
            .is_none();
        (host && self.ents[w.idx()].level == hl).then(|| (l, self.ents[w.idx()].local))
    }

    /// Wakes the halted vCPU `b` for an event, naming the vCPU whose upcall sent it as the
    /// waker (`WakeInfo::waker`), and remembers that that upcall woke someone.
    fn wake_for_event(&mut self, b: GEnt, cause: WakeCause) {
        let mut info = WakeInfo::of(cause);
        if let Some((l, w)) = self.event_waker(b) {
            info.waker = Some(w);
            self.io().kcpu[l.idx()].woke = true;
        }
        self.wake_entity(b, info);
    }

    /// The upcall of guest CPU `c` became pending: start it, or get the vCPU to run.
    fn upcall_kick(&mut self, c: GCpu) {
        let cs = &self.cpus[c.idx()];
        if !self.levels[cs.level.idx()].alive {
            return;
        }
        if !cs.executing {
            let (level, backing) = (cs.level, cs.backing);
            self.cpus[c.idx()].pending.raise(PendingIrqs::EVTCHN);
            // A halted vCPU woken at once (no kick latency): the wake names its sender.
            let halted = |sim: &Self, b: GEnt| {
                let (l, e) = (sim.ents[b.idx()].level, sim.ents[b.idx()].local);
                !sim.ents[b.idx()].in_xen && !sim.levels[l.idx()].ent_info[e.idx()].runnable
            };
            match backing {
                Some(b) if self.levels[level.idx()].opts.exit.kick_ns == 0 && halted(self, b) => {
                    self.wake_for_event(b, WakeCause::Event)
                }
                _ => self.kick_backing(c, WakeCause::Event),
            }
            return;
        }
        if cs.kwork {
            // Inside the upcall handler: its scan sees the new port.
            return;
        }
        let b = cs.backing.expect("invariant: event channels are on vCPUs");
        let lat = self.levels[self.ents[b.idx()].level.idx()].opts.ipi_latency;
        if lat == 0 || self.local_cpu.is_none_or(|l| l == c) {
            self.actions.push_back(Action::Upcall(c));
        } else {
            let s = self.io().kcpu[c.idx()]
                .upcall_slot
                .expect("invariant: an upcall slot");
            self.q.arm_min(s, self.now + lat);
        }
    }

    /// The upcall reaches guest CPU `c` (its IPI, or its vCPU running again).
    pub(super) fn upcall(&mut self, c: GCpu) {
        let (l, v) = (self.cpus[c.idx()].level, self.cpus[c.idx()].local.0);
        if !self.evt(l).vcpus[v as usize].upcall || self.cpus[c.idx()].kwork {
            return;
        }
        if !self.cpus[c.idx()].executing {
            self.cpus[c.idx()].pending.raise(PendingIrqs::EVTCHN);
            self.kick_backing(c, WakeCause::Event);
            return;
        }
        self.cpus[c.idx()].kwork = true;
        // The interrupted task stops making progress.
        if let Some(g) = self.curr_of(c) {
            match self.ents[g.idx()].kind {
                EntKind::Task(t) => self.stop_progress(t),
                EntKind::Vcpu(x) => self.stop_executing(x),
            }
        }
        self.kwork_next(c);
    }

    /// Starts the handler of the next port `c`'s upcall serves, or ends the upcall.
    fn kwork_next(&mut self, c: GCpu) {
        let (l, v) = (self.cpus[c.idx()].level, self.cpus[c.idx()].local.0);
        let now = self.now;
        // Handlers that cost nothing run at once; a bound keeps a port that re-notifies itself
        // at no cost from hanging the run.
        for _ in 0..1_000_000 {
            let d = self.evt(l);
            let Some(p) = d.next_port(v) else {
                self.kwork_end(c);
                return;
            };
            d.ack(p, now);
            let func = d.ports[p as usize].expect("invariant: bound").func;
            let (cost, batch) = self.port_cost(func);
            emit!(self.trace_handler(c, p, false));
            let k = &mut self.io().kcpu[c.idx()];
            k.port = p;
            k.batch = batch;
            if cost > 0 {
                k.remaining = cost;
                k.since = Some(now);
                let s = k.slot.expect("invariant: a kernel-work slot");
                self.q.arm(s, now + cost);
                return;
            }
            self.port_done(c);
        }
        panic!("invariant: an event-channel upcall served a million ports at one instant");
    }

    /// The cost of serving a port now, and the packets its handler takes.
    fn port_cost(&mut self, func: PortFn) -> (Nanos, u32) {
        let io = self.io();
        let (n, per) = match func {
            PortFn::Idle => (0, 0),
            PortFn::NicRx => (io.nic.len(), io.net.nic_rx_ns + io.net.rx_copy_ns),
            PortFn::NetfrontRx(f) => {
                let fl = &io.flows[f as usize];
                let per = match fl.kind {
                    FlowKind::Ping(t) => t.echo,
                    FlowKind::Stream(s) => s.rx,
                };
                (fl.rx.len(), per)
            }
            PortFn::NetbackTx(f) => (io.flows[f as usize].tx.len(), io.net.tx_ns),
            PortFn::Ioreq(k) => {
                let r = &io.ioreqs[k as usize];
                (r.pending as usize, r.cost)
            }
            PortFn::VifTx(k) => return io.vifs[k as usize].back_cost(&io.net),
            PortFn::VifRx(k) => return io.vifs[k as usize].rx_cost(),
        };
        (n as Nanos * per, n as u32)
    }

    /// The current port's handler on `c` ran to its end (slot `Kwork`).
    pub(super) fn kwork_done(&mut self, c: GCpu) {
        let k = &mut self.io().kcpu[c.idx()];
        k.remaining = 0;
        k.since = None;
        self.port_done(c);
        self.kwork_next(c);
    }

    /// The handler of the port `c` serves ends: its packets move on, the port is unmasked.
    fn port_done(&mut self, c: GCpu) {
        let l = self.cpus[c.idx()].level;
        let k = self.io().kcpu[c.idx()];
        let func = self.evt(l).ports[k.port as usize]
            .expect("invariant: bound")
            .func;
        emit!(self.trace_handler(c, k.port, true));
        self.on_cpu(c, |sim| {
            match func {
                PortFn::Idle => {}
                PortFn::NicRx => sim.nic_rx_done(k.batch),
                PortFn::NetfrontRx(f) => sim.netfront_done(f, k.batch),
                PortFn::NetbackTx(f) => sim.netback_tx_done(f, k.batch),
                PortFn::Ioreq(r) => sim.ioreq_done(r, k.batch),
                PortFn::VifTx(v) => sim.vif_tx_done(v, k.batch),
                PortFn::VifRx(v) => sim.vif_rx_done(v, k.batch, c),
            }
            if let Some(v) = sim.evt(l).unmask(k.port) {
                let t = sim.levels[l.idx()].cpu_g[v as usize];
                if t != c {
                    sim.upcall_kick(t);
                }
            }
        });
        self.io().kcpu[c.idx()].port = 0;
    }

    /// The upcall on `c` has nothing left: the interrupted work goes on, or the CPU idles; if
    /// its notifications woke vCPUs, their scheduler learns that the batch is over (after the
    /// idle check is queued, so a sender with nothing left halts first).
    fn kwork_end(&mut self, c: GCpu) {
        self.cpus[c.idx()].kwork = false;
        let woke = std::mem::take(&mut self.io().kcpu[c.idx()].woke);
        if self.cpus[c.idx()].executing {
            match self.curr_of(c) {
                Some(g) => match self.ents[g.idx()].kind {
                    EntKind::Task(t) => self.start_progress(t),
                    EntKind::Vcpu(x) => self.start_executing(x),
                },
                None => self.actions.push_back(Action::IdleCheck(c)),
            }
        }
        if woke {
            let b = self.cpus[c.idx()]
                .backing
                .expect("invariant: an upcall runs on a vCPU");
            let (l, e) = (self.ents[b.idx()].level, self.ents[b.idx()].local);
            self.on_cpu(c, |sim| {
                sim.with_sched(l, |s, ctx| s.wake_batch_end(ctx, e))
            });
        }
    }

    /// `c`'s vCPU is switched out in the middle of a handler: the handler waits.
    pub(super) fn kwork_pause(&mut self, c: GCpu) {
        let now = self.now;
        let k = &mut self.io().kcpu[c.idx()];
        if let Some(s) = k.since.take() {
            k.remaining = k.remaining.saturating_sub(now - s);
            let slot = k.slot.expect("invariant: a kernel-work slot");
            self.q.cancel(slot);
        }
    }

    /// `c`'s vCPU runs again in the middle of a handler: it goes on.
    pub(super) fn kwork_resume(&mut self, c: GCpu) {
        let now = self.now;
        let k = &mut self.io().kcpu[c.idx()];
        if k.port != 0 && k.since.is_none() {
            k.since = Some(now);
            let at = now + k.remaining;
            let slot = k.slot.expect("invariant: a kernel-work slot");
            self.q.arm(slot, at);
        }
    }

    /// Guest CPU `lc` of level `l` goes offline (already marked offline; cold path, from
    /// [`Self::cpu_offline`]): its event channels follow Linux's CPU offline.
    ///
    /// 1. Kernel work in progress there completes first, at the offline's instant: Linux takes
    ///    a CPU down from its stopper task (`take_cpu_down` under `stop_machine`), which runs
    ///    only once the CPU has left the interrupt handler it was in, so a handler is never
    ///    cut off. The model does not delay the offline by the handler's remaining cost: the
    ///    handler's effects (its packets move on, the port is unmasked) happen now, and the
    ///    rest of its cost is not charged (at most one port's batch, docs/io.md).
    /// 2. Every port bound to that vCPU moves to an online vCPU ([`Evtchn::rebind_off`]: the
    ///    lowest online vCPU of the port's affinity, else the affinity is broken to every
    ///    online vCPU and logged, as Linux's "IRQ no longer affine to CPU" warning); a pending
    ///    event moves with its port and kicks its new vCPU.
    /// 3. The upcall on the dying CPU ends: nothing is bound there any more.
    ///
    /// Ports stay where they moved when the CPU comes back (Linux does not move them back;
    /// irqbalance in the guest might, which is not modelled).
    #[cold]
    #[inline(never)]
    pub(super) fn evtchn_cpu_offline(&mut self, l: LevelId, lc: CpuId) {
        if self.io.as_ref().is_none_or(|io| io.doms[l.idx()].is_none()) {
            return;
        }
        let c = self.levels[l.idx()].cpu_g[lc.idx()];
        if self.io().kcpu[c.idx()].port != 0 {
            let k = &mut self.io().kcpu[c.idx()];
            k.remaining = 0;
            k.since = None;
            let s = k.slot.expect("invariant: a kernel-work slot");
            self.q.cancel(s);
            self.port_done(c);
        }
        if let Some(s) = self.io().kcpu[c.idx()].upcall_slot {
            self.q.cancel(s);
        }
        let mut online = CpuSet::empty();
        for (i, ci) in self.levels[l.idx()].cpu_info.iter().enumerate() {
            if ci.online {
                online.insert(CpuId(i as u32));
            }
        }
        let (kicks, broken) = self.evt(l).rebind_off(lc.0, &online);
        for (port, to) in broken {
            self.log.push(format!(
                "t={} ns {}: CPU {} offline: event-channel port {} no longer affine to it \
                 (now every online CPU; bound to CPU {})",
                self.now,
                self.levels[l.idx()].name,
                lc.0,
                port,
                to
            ));
        }
        self.cpus[c.idx()].pending.clear(PendingIrqs::EVTCHN);
        if self.cpus[c.idx()].kwork {
            self.kwork_end(c);
        }
        for v in kicks {
            let t = self.levels[l.idx()].cpu_g[v as usize];
            self.upcall_kick(t);
        }
    }

    /// Guest CPU `c`'s task makes an emulated I/O access (an `ioreq` step; ERRATA X9): its vCPU
    /// is blocked in Xen (Xen `prepare_wait_on_xen_event_channel`: the pause flag, then a
    /// reschedule), the device model's port in the driver domain is notified (Xen
    /// `hvm_send_assist_req` → `notify_via_xen_event_channel`; dom0's wake goes through the host
    /// scheduler's wake hook first, as in Xen, where the softirq runs after the send), and the
    /// vCPU's pCPU reschedules.
    pub(super) fn ioreq_send(&mut self, c: GCpu) {
        let k = self
            .io
            .as_ref()
            .and_then(|io| io.ioreq_of[c.idx()])
            .unwrap_or_else(|| {
                panic!("invariant: an ioreq step runs only on an HVM vCPU with a device model")
            });
        let b = self.cpus[c.idx()]
            .backing
            .expect("invariant: an ioreq comes from a vCPU");
        let (hl, he) = (self.ents[b.idx()].level, self.ents[b.idx()].local);
        let p = self
            .cpu_of_ent(b)
            .expect("invariant: an executing vCPU runs on a pCPU");
        emit!(self.trace_block(b));
        self.ents[b.idx()].in_xen = true;
        self.levels[hl.idx()].ent_info[he.idx()].runnable = false;
        self.with_sched(hl, |s, ctx| s.block(ctx, he));
        let io = self.io();
        let r = &mut io.ioreqs[k as usize];
        r.pending = true;
        let (driver, port) = (io.driver, r.port);
        self.evtchn_notify(driver, port);
        self.do_schedule(p);
    }

    /// The device model completed `n` (0 or 1) ioreqs of HVM vCPU `k`: the vCPU leaves Xen's
    /// wait and is woken directly (Xen's send on a Xen-consumed port: clear
    /// `_VPF_blocked_in_xen`, `vcpu_wake`; no pending bit, no upcall).
    fn ioreq_done(&mut self, k: u32, n: u32) {
        if n == 0 {
            return;
        }
        let r = &mut self.io().ioreqs[k as usize];
        r.pending = false;
        let c = r.cpu;
        let b = self.cpus[c.idx()]
            .backing
            .expect("invariant: an ioreq comes from a vCPU");
        if !std::mem::take(&mut self.ents[b.idx()].in_xen) {
            return;
        }
        let (hl, he) = (self.ents[b.idx()].level, self.ents[b.idx()].local);
        let alive = self.levels[self.cpus[c.idx()].level.idx()].alive;
        if alive && !self.levels[hl.idx()].ent_info[he.idx()].runnable {
            // qemu-dm's notify is dom0's event send: dom0's vCPU is the waker.
            self.wake_for_event(b, WakeCause::Io);
        }
    }

    /// A packet of flow `f` arrives at the NIC (slot `Packet`); the next one is scheduled: a
    /// ping's after its interval, a stream's when its window and the line rate allow.
    pub(super) fn packet_arrives(&mut self, f: u32) {
        let now = self.now;
        let measuring = now >= self.warmup;
        let io = self.io.as_mut().expect("invariant: I/O built");
        let fl = &mut io.flows[f as usize];
        let (wl, guest, dropped) = (fl.wl, fl.guest, fl.dropped);
        match fl.kind {
            FlowKind::Ping(t) => {
                self.q.arm(fl.arrive_slot, now + t.interval);
                if measuring {
                    self.wls[wl].counters[ping::REQUESTS as usize] += 1;
                }
            }
            FlowKind::Stream(_) => {
                // The earliest due slot sends this packet: a window slot, or a hole whose
                // timeout expired (the retransmission).
                match Self::stream_next(fl) {
                    Some((_, Some(h))) => {
                        fl.holes.swap_remove(h);
                        if measuring {
                            self.wls[wl].counters[stream::TIMEOUTS as usize] += 1;
                        }
                    }
                    _ => {
                        fl.ready.pop_front();
                    }
                }
                fl.last_arrival = Some(now);
            }
        }
        let seq = fl.next_seq;
        fl.next_seq += 1;
        // A guest that does not exist (not created yet, or destroyed) has no route: its
        // packets are dropped at the NIC, and its ports never become pending meanwhile.
        let full = io.nic.len() >= io.net.ring as usize || !self.levels[guest.idx()].alive;
        if full {
            if measuring {
                self.wls[wl].counters[dropped] += 1;
            }
            self.stream_lost(f, seq, false);
        } else {
            io.nic.push_back((
                f,
                Packet {
                    born: now,
                    seq,
                    measured: measuring,
                },
            ));
            let (driver, port) = (io.driver, io.nic_port);
            // The NIC's interrupt, bound to the driver domain's port (Xen's PIRQ path).
            self.evtchn_notify(driver, port);
        }
        self.stream_arm(f);
    }

    /// Stream flow `f`: a window slot comes back at `at` (the next packet reaches the NIC then),
    /// kept in time order.
    fn stream_credit(&mut self, f: u32, at: SimTime) {
        let fl = &mut self.io().flows[f as usize];
        if !matches!(fl.kind, FlowKind::Stream(_)) {
            return;
        }
        let i = fl.ready.iter().rposition(|&t| t <= at).map_or(0, |i| i + 1);
        fl.ready.insert(i, at);
        self.stream_arm(f);
    }

    /// Packet `seq` of stream flow `f` (or, `ack`, its ACK) is lost on a full ring: a hole that
    /// keeps its window slot until duplicate ACKs or the retransmission timeout recover it.
    /// Nothing for a ping (the request or reply is just lost).
    fn stream_lost(&mut self, f: u32, seq: u64, ack: bool) {
        let now = self.now;
        let fl = &mut self.io().flows[f as usize];
        if let FlowKind::Stream(s) = fl.kind {
            fl.holes.push(Hole {
                seq,
                dups: 0,
                rto_at: now + s.rto,
                ack,
            });
            self.stream_arm(f);
        }
    }

    /// The ACK of packet `seq` of stream flow `f` reaches the sender (after the wire): its own
    /// slot comes back, and it is a duplicate ACK for every older hole (RFC 5681 §3.2; with
    /// SACK, Linux counts each later packet acknowledged). A data hole with `dupacks` of them
    /// is retransmitted at once (fast retransmit); a lost ACK is covered by any later ACK
    /// (ACKs are cumulative). Either way its slot comes back now, the packet reaching the NIC
    /// after the wire.
    fn stream_acked(&mut self, f: u32, seq: u64, at: SimTime, measuring: bool) {
        self.stream_credit(f, at);
        let fl = &mut self.io().flows[f as usize];
        let FlowKind::Stream(s) = fl.kind else { return };
        if s.dupacks == 0 || fl.holes.is_empty() {
            return;
        }
        let (mut fast, mut i) = (0u64, 0);
        let mut back = 0u32;
        while i < fl.holes.len() {
            let h = &mut fl.holes[i];
            if h.seq < seq {
                h.dups += 1;
                if h.ack || h.dups >= s.dupacks {
                    fast += u64::from(!h.ack);
                    back += 1;
                    fl.holes.remove(i);
                    continue;
                }
            }
            i += 1;
        }
        let wl = fl.wl;
        if measuring {
            self.wls[wl].counters[stream::FAST_RETRANSMITS as usize] += fast;
        }
        for _ in 0..back {
            self.stream_credit(f, at);
        }
    }

    /// Stream flow `f`'s next due slot: (its time, Some(hole index) if it is a hole's timeout).
    /// The earliest of the window's next slot and the holes' timeouts (a window slot first at a
    /// tie).
    fn stream_next(fl: &Flow) -> Option<(SimTime, Option<usize>)> {
        let hole = fl
            .holes
            .iter()
            .enumerate()
            .min_by_key(|(i, h)| (h.rto_at, *i))
            .map(|(i, h)| (h.rto_at, Some(i)));
        match (fl.ready.front(), hole) {
            (Some(&t), Some(h)) if h.0 < t => Some(h),
            (Some(&t), _) => Some((t, None)),
            (None, h) => h,
        }
    }

    /// Arms stream flow `f`'s next arrival if its window has a slot (or a hole's timeout is
    /// due): at that time, no sooner than the line rate allows after the last one, and earlier
    /// than an arrival already armed for a later slot.
    fn stream_arm(&mut self, f: u32) {
        let now = self.now;
        let fl = &self.io.as_ref().expect("invariant: I/O built").flows[f as usize];
        let FlowKind::Stream(s) = fl.kind else { return };
        let slot = fl.arrive_slot;
        if let Some((t, _)) = Self::stream_next(fl) {
            let at = fl.last_arrival.map_or(t, |l| t.max(l + s.gap)).max(now);
            self.q.arm_min(slot, at);
        }
    }

    /// The driver domain's NIC handler: `n` packets copied into their guests' receive rings.
    fn nic_rx_done(&mut self, n: u32) {
        for _ in 0..n {
            let io = self.io.as_mut().expect("invariant: I/O built");
            let (f, p) = io.nic.pop_front().expect("invariant: the batch is queued");
            let ring = io.net.ring as usize;
            let fl = &mut io.flows[f as usize];
            let (wl, guest, port, dropped) = (fl.wl, fl.guest, fl.guest_port, fl.dropped);
            if fl.rx.len() >= ring || !self.levels[guest.idx()].alive {
                if p.measured {
                    self.wls[wl].counters[dropped] += 1;
                }
                self.stream_lost(f, p.seq, false);
                continue;
            }
            fl.rx.push_back(p);
            self.evtchn_notify(guest, port);
        }
    }

    /// The guest's netfront handler of flow `f`: `n` packets received (a ping's requests
    /// answered, a stream's packets acknowledged), the replies or ACKs queued for netback.
    fn netfront_done(&mut self, f: u32, n: u32) {
        let (now, warmup) = (self.now, self.warmup);
        let mut queued = 0;
        for _ in 0..n {
            let io = self.io.as_mut().expect("invariant: I/O built");
            let ring = io.net.ring as usize;
            let fl = &mut io.flows[f as usize];
            let (dropped, kind) = (fl.dropped, fl.kind);
            let wl = &mut self.wls[fl.wl];
            let p = fl.rx.pop_front().expect("invariant: the batch is queued");
            if let FlowKind::Stream(s) = kind {
                if now >= warmup {
                    wl.counters[stream::PACKETS as usize] += 1;
                    wl.counters[stream::BYTES as usize] += s.bytes as u64;
                }
            }
            if fl.tx.len() >= ring {
                // A reply, or a stream's ACK, lost on the full transmit ring.
                wl.counters[dropped] += p.measured as u64;
                self.stream_lost(f, p.seq, true);
                continue;
            }
            fl.tx.push_back(p);
            queued += 1;
        }
        if queued > 0 {
            let io = self.io.as_ref().expect("invariant: I/O built");
            let (driver, port) = (io.driver, io.flows[f as usize].back_port);
            self.evtchn_notify(driver, port);
        }
    }

    /// netback's transmit handler of flow `f`: `n` replies or ACKs leave the NIC.
    fn netback_tx_done(&mut self, f: u32, n: u32) {
        let (now, warmup) = (self.now, self.warmup);
        for _ in 0..n {
            let io = self.io.as_mut().expect("invariant: I/O built");
            let fl = &mut io.flows[f as usize];
            let wl = &mut self.wls[fl.wl];
            let p = fl.tx.pop_front().expect("invariant: the batch is queued");
            let rtt = now - p.born;
            match fl.kind {
                FlowKind::Ping(t) => {
                    if !p.measured {
                        continue;
                    }
                    if rtt > t.timeout {
                        wl.counters[ping::LATE as usize] += 1;
                    } else {
                        wl.counters[ping::REPLIES as usize] += 1;
                        wl.hists[ping::RTT as usize].record(rtt);
                    }
                }
                FlowKind::Stream(s) => {
                    if p.measured {
                        wl.hists[stream::ACK_RTT as usize].record(rtt);
                    }
                    // The ACK reaches the sender after the wire, its next packet the NIC
                    // after it again.
                    self.stream_acked(f, p.seq, now + 2 * s.wire, now >= warmup);
                }
            }
        }
    }
}
