//! Streams through the driver domain (docs/io.md "Streams"): the line rate under a wide
//! window, a window of one waiting for each ack, streams delaying a ping through dom0, and loss
//! on a full ring: fast retransmit, the timeout, a window slot freed early.

use super::*;

fn bandwidth(r: &Results, w: &str) -> f64 {
    let f = &r.workloads.iter().find(|x| x.name == w).unwrap().figure;
    assert_eq!((f.name.as_str(), f.unit.as_str()), ("bandwidth", "Mbit/s"));
    f.value
}

#[test]
fn a_stream_with_a_wide_window_runs_at_the_line_rate() {
    // 1500 bytes at 100 Mbit/s: a packet every 120 us, far more than the path's work, and a
    // window of 64 never closes: the guest receives at the line rate.
    let r = run(&stream_src("rate_mbps = 100\nwindow = 64\n"), &[]);
    let gap = 1500 * 8 * 1000 / 100;
    let sent = (100_000_000 - 1) / gap + 1;
    let got = counter(&r, "st", "packets");
    assert!(got <= sent && got + 2 >= sent, "{got} of {sent} packets");
    assert_eq!(counter(&r, "st", "bytes"), got * 1500);
    assert_eq!(counter(&r, "st", "dropped"), 0);
    let bw = bandwidth(&r, "st");
    assert!((bw - got as f64 * 1500.0 * 8.0 / 1e6 / 0.1).abs() < 1e-6);
    // The fence post: `sent` packets start within the 100 ms.
    let most = sent as f64 * 1500.0 * 8.0 / 1e6 / 0.1;
    assert!(bw > 95.0 && bw <= most, "{bw} Mbit/s, at most {most}");
}

#[test]
fn a_stream_with_a_window_of_one_waits_for_each_ack() {
    // One packet in flight: each round trip is the path on an idle host (three kicks, dom0's
    // receive and transmit, the guest's receive) plus the wire both ways.
    let src = stream_src("window = 1\nwire_us = 50\n");
    let r = run(&src, &[]);
    let path = 3 * 1500 + 2100 + 3300 + 2900 + 2700;
    let ack = {
        let wl = r.workloads.iter().find(|x| x.name == "st").unwrap();
        assert_eq!(wl.histograms[0].0, "ack_rtt");
        wl.histograms[0].1.clone()
    };
    assert_eq!((ack.min_ns, ack.max_ns), (path, path));
    let period = path + 2 * 50_000;
    let got = counter(&r, "st", "packets");
    let want = 100_000_000 / period;
    assert!(got.abs_diff(want) <= 1, "{got} packets, {want} expected");
}

#[test]
fn streams_into_other_guests_delay_a_ping_through_dom0() {
    // Two guests streaming at 1 Gbit/s keep dom0 busy with netback work: the pinged guest's
    // requests queue behind theirs in dom0.
    let quiet = ping_src(4, 1_000, "");
    let streams = "[[domain]]\nname = \"s1\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
                   [[domain.workload]]\nkind = \"stream\"\nname = \"st1\"\n\
                   [[domain]]\nname = \"s2\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
                   [[domain.workload]]\nkind = \"stream\"\nname = \"st2\"\n";
    let busy = ping_src(4, 1_000, streams);
    let q = rtt(&run(&quiet, &[]), "ping");
    let r = run(&busy, &[]);
    let b = rtt(&r, "ping");
    assert!(b.mean_ns > q.mean_ns, "{} vs {}", b.mean_ns, q.mean_ns);
    assert!(bandwidth(&r, "st1") > 0.0 && bandwidth(&r, "st2") > 0.0);
    let d0 = ent(&r, "dom0.v0");
    assert!(
        d0.cpu_share > 0.5,
        "dom0 is busy with netback: {}",
        d0.cpu_share
    );
}

/// One pCPU under Credit2: dom0, a hog guest that keeps dom0 waiting (its NIC ring of `ring`
/// slots overflows meanwhile) and a guest receiving a stream at 1 Gbit/s.
fn lossy_stream_src(ring: u32, opts: &str) -> String {
    format!(
        "[run]\nduration_ms = 2000\nwarmup_ms = 100\n[machine]\npcpus = 1\n\
         [host]\nscheduler = \"credit2\"\n\
         [[domain]]\nname = \"dom0\"\nvcpus = 1\ndriver = true\n\
         [domain.netback]\nring = {ring}\n[domain.sched]\nscheduler = \"cfs\"\n{}\
         [[domain]]\nname = \"s\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"stream\"\nname = \"st\"\n{opts}",
        hog("hog", 1)
    )
}

#[test]
fn fast_retransmit_recovers_ring_drops_without_waiting_for_the_timeout() {
    let src = lossy_stream_src(16, "");
    let fr = run(&src, &[]);
    let rto = run(&src, &[("domain.2.workload.0.dupack_threshold", "0")]);
    let c = |r: &Results, k| counter(r, "st", k);
    assert!(c(&fr, "dropped") > 0, "the ring overflows while dom0 waits");
    assert!(c(&fr, "fast_retransmits") > 0);
    assert_eq!(c(&rto, "fast_retransmits"), 0);
    assert!(c(&rto, "timeouts") > 0);
    // Every loss is recovered once, by one or the other (some may still be open at the end).
    for r in [&fr, &rto] {
        let recovered = c(r, "fast_retransmits") + c(r, "timeouts");
        assert!(
            recovered <= c(r, "dropped") + 64,
            "{recovered} of {}",
            c(r, "dropped")
        );
    }
    assert!(
        c(&fr, "timeouts") < c(&rto, "timeouts"),
        "most losses no longer wait for the timeout"
    );
}

#[test]
fn a_window_of_one_has_no_duplicate_acks_and_waits_for_the_timeout() {
    // Nothing follows a lost packet when it is the only one in flight: fast retransmit never
    // triggers, and the flow stalls for the timeout each time.
    let src = lossy_stream_src(1, "window = 1\n");
    let r = run(&src, &[]);
    assert_eq!(counter(&r, "st", "fast_retransmits"), 0);
}

#[test]
fn a_window_slot_freed_early_is_not_held_behind_a_later_timeout() {
    // 10 Gbit/s into a one-slot NIC ring: packets that arrive while dom0 copies the previous
    // one are dropped, and without fast retransmit each waits 200 ms. The ACKs of the others
    // free their slots within microseconds: the sender keeps sending with them instead of
    // stalling until the first timeout (the flow's arrival is moved earlier, not kept).
    let src = stream_src("rate_mbps = 10000\nwindow = 8\ndupack_threshold = 0\n")
        .replace("tx_ns = 2700\n", "tx_ns = 2700\nring = 1\n");
    let r = run(&src, &[]);
    assert!(counter(&r, "st", "dropped") > 0);
    assert_eq!(
        counter(&r, "st", "timeouts"),
        0,
        "none is due within 100 ms"
    );
    assert!(
        counter(&r, "st", "packets") > 500,
        "{} packets",
        counter(&r, "st", "packets")
    );
}
