//! Parallel jobs in the engine (workload/parallel.rs; docs/parallel.md): a job's parts (one
//! workload per domain of its placement), its bookkeeping marks, and its messages between
//! domains through the driver domain's virtual switch.
//!
//! **Messages** (spec/workloads.md §5.2 step 5): TCP between guests through the driver
//! domain's bridge, on the event-channel path of docs/io.md. Each guest with ranks has a *vif*:
//! a netfront port in the guest (on its vCPU 0) and a netback port in the driver domain. A
//! `NetSend` step (after the sender kernel's cost, a compute step of its program) queues the
//! message on the sender's vif and notifies its netback port; netback's handler (kernel work on
//! the driver domain's vCPU: `netback.tx_ns + rx_copy_ns` plus the message's copy, per message,
//! a batch per upcall as for a ping) moves each message to its receiver's vif and notifies its
//! netfront port; netfront's handler (kernel work on the receiver's vCPU 0: the message's
//! `rx_ns`) hands it to the rank: a token in the channel the rank waits on (a spinning rank
//! sees it at once; a blocked one is woken). TCP does not lose messages: the vif queues are
//! unbounded (no ring drops, no retransmissions).

use std::collections::VecDeque;

use super::*;
use crate::scenario::io::NetbackConfig;
use crate::workload::parallel::{self, JobMark};

/// One message on its way.
#[derive(Clone, Copy, Debug)]
struct Msg {
    /// The receiving part's workload and the channel its rank waits on.
    wl: u32,
    chan: Chan,
    /// The receiver's vif.
    to: u32,
    copy: Nanos,
    rx: Nanos,
}

/// A guest's virtual interface for parallel jobs' messages.
pub(super) struct Vif {
    pub(super) level: LevelId,
    guest_port: u32,
    back_port: u32,
    /// Sent by this guest, waiting for netback; delivered to it, waiting for netfront.
    tx: VecDeque<Msg>,
    rx: VecDeque<Msg>,
}

impl Vif {
    pub(super) fn new(level: LevelId, guest_port: u32, back_port: u32) -> Vif {
        Vif {
            level,
            guest_port,
            back_port,
            tx: VecDeque::with_capacity(256),
            rx: VecDeque::with_capacity(256),
        }
    }

    /// netback's work for the messages queued now, and their number.
    pub(super) fn back_cost(&self, net: &NetbackConfig) -> (Nanos, u32) {
        let per = net.tx_ns + net.rx_copy_ns;
        let cost = self.tx.iter().map(|m| per + m.copy).sum();
        (cost, self.tx.len() as u32)
    }

    /// netfront's work for the messages delivered now, and their number.
    pub(super) fn rx_cost(&self) -> (Nanos, u32) {
        (self.rx.iter().map(|m| m.rx).sum(), self.rx.len() as u32)
    }
}

impl SimBuilder {
    /// Links `parts` workloads added in a row, from `first` on, as one parallel job's parts.
    pub fn add_job(&mut self, first: usize, parts: usize) {
        self.sim.jobs.push((first, parts));
    }
}

impl Simulation {
    /// The job workload `wl` is a part of: (its first workload, its number of parts).
    fn job_of(&self, wl: usize) -> (usize, usize) {
        *self
            .jobs
            .iter()
            .find(|&&(f, n)| (f..f + n).contains(&wl))
            .expect("invariant: a job step runs in a job's part")
    }

    /// Task `t` of part `wl` passes a bookkeeping mark.
    pub(super) fn job_mark(&mut self, t: usize, wl: usize, mark: JobMark) {
        let (first, n) = self.job_of(wl);
        let now = self.now;
        match mark {
            JobMark::Start(at) => {
                for w in &mut self.wls[first..first + n] {
                    w.counters[parallel::STARTED as usize] += 1;
                    w.counters[parallel::START_NS as usize] = at;
                }
            }
            JobMark::Lap => {
                // A job's task has no periodic step: its `periodic_next` keeps its last lap.
                let start = self.wls[wl].counters[parallel::START_NS as usize];
                let last = self.tasks[t].periodic_next.unwrap_or(start);
                self.wls[wl].hists[parallel::ITERATION as usize].record(now - last);
                self.tasks[t].periodic_next = Some(now);
            }
            JobMark::Finish => {
                for w in &mut self.wls[first..first + n] {
                    w.counters[parallel::DONE as usize] += 1;
                    let e = &mut w.counters[parallel::END_NS as usize];
                    *e = (*e).max(now);
                }
                let c = &mut self.wls[wl].counters;
                c[parallel::PART_DONE as usize] += 1;
                c[parallel::PART_END_NS as usize] = now;
            }
        }
    }

    /// Task `t` of part `wl` sends a message to channel `chan` of the job's part `part`, in
    /// another domain: queued on its vif, netback notified.
    pub(super) fn net_send(&mut self, wl: usize, part: u16, chan: Chan, copy: Nanos, rx: Nanos) {
        let (first, n) = self.job_of(wl);
        let to_wl = first + part as usize;
        for w in &mut self.wls[first..first + n] {
            w.counters[parallel::NET_MSGS as usize] += 1;
        }
        let (from_l, to_l) = (self.wls[wl].level, self.wls[to_wl].level);
        let io = self
            .io
            .as_mut()
            .expect("invariant: a job across domains has the I/O path");
        let (Some(v), Some(to)) = (io.vif_of[from_l.idx()], io.vif_of[to_l.idx()]) else {
            panic!("invariant: every part of a job across domains has a vif");
        };
        let vif = &mut io.vifs[v as usize];
        vif.tx.push_back(Msg {
            wl: to_wl as u32,
            chan,
            to,
            copy,
            rx,
        });
        let (driver, port) = (io.driver, vif.back_port);
        self.evtchn_notify(driver, port);
    }

    /// netback's handler of vif `v` ends: its `n` messages reach their receivers' vifs.
    pub(super) fn vif_tx_done(&mut self, v: u32, n: u32) {
        for _ in 0..n {
            let io = self.io.as_mut().expect("invariant: I/O built");
            let m = io.vifs[v as usize]
                .tx
                .pop_front()
                .expect("invariant: the batch is queued");
            let to = &mut io.vifs[m.to as usize];
            let (level, port) = (to.level, to.guest_port);
            if !self.levels[level.idx()].alive {
                // A guest that does not exist has no route: the message is lost.
                continue;
            }
            to.rx.push_back(m);
            self.evtchn_notify(level, port);
        }
    }

    /// netfront's handler of vif `v` (on guest CPU `c`) ends: its `n` messages reach their
    /// ranks.
    pub(super) fn vif_rx_done(&mut self, v: u32, n: u32, c: GCpu) {
        for _ in 0..n {
            let m = self.io.as_mut().expect("invariant: I/O built").vifs[v as usize]
                .rx
                .pop_front()
                .expect("invariant: the batch is queued");
            self.signal(m.wl as usize, m.chan, None, c, false);
        }
    }
}
