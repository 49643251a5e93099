//! The I/O path through a driver domain (issue 11 item 3; docs/io.md): event-channel upcalls
//! as kernel work on a vCPU, kicks of halted vCPUs through the host, upcalls held while a vCPU
//! is away, the ping's round trip (NIC → dom0 netback → guest netfront → dom0 → NIC), and the
//! guest's scan order (ERRATA X5: lowest-first starves a high port, round-robin serves it).

use vmsched_core::report::Results;

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;
use run::{counter, ent};

fn load(src: &str, ov: &[(&str, &str)]) -> vmsched_sched::Scenario {
    let ov: Vec<(String, String)> = ov
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vmsched_sched::load("io.toml", src, &ov).unwrap_or_else(|e| panic!("{e}"))
}

fn run(src: &str, ov: &[(&str, &str)]) -> Results {
    let s = load(src, ov);
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.run();
    sim.results()
}

fn rtt(r: &Results, w: &str) -> vmsched_core::metrics::HistSummary {
    let wl = r.workloads.iter().find(|x| x.name == w).unwrap();
    assert_eq!(wl.histograms[0].0, "rtt");
    wl.histograms[0].1.clone()
}

/// dom0 (the driver domain) and a guest `g` answering pings every `interval_us`, one vCPU
/// each, on `pcpus` pCPUs under Credit2, then `extra` (more domains).
fn ping_src(pcpus: u32, interval_us: u64, extra: &str) -> String {
    format!(
        "[run]\nduration_ms = 200\n[machine]\npcpus = {pcpus}\nkick_ns = 1500\n\
         [host]\nscheduler = \"credit2\"\n\
         [[domain]]\nname = \"dom0\"\nvcpus = 1\ndriver = true\n\
         [domain.netback]\nnic_rx_ns = 2100\nrx_copy_ns = 3300\ntx_ns = 2700\n\
         [domain.sched]\nscheduler = \"cfs\"\n\
         [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"ping\"\nname = \"ping\"\ninterval_us = {interval_us}\n\
         start_us = 500\necho_ns = 4700\n{extra}"
    )
}

fn hog(name: &str, vcpus: u32) -> String {
    format!(
        "[[domain]]\nname = \"{name}\"\nvcpus = {vcpus}\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"{name}\"\ncopies = {vcpus}\n"
    )
}

/// The sum of the path's costs and latencies on an idle host, from the scenario's parameters:
/// three kicks of halted vCPUs (dom0 for the request, the guest, dom0 for the reply), the
/// driver domain's receive and transmit work and the guest's echo.
fn idle_rtt(s: &vmsched_sched::Scenario) -> u64 {
    let nb = &s.domains[0].netback;
    let echo = match &s.domains[1].workloads[0] {
        vmsched_core::workload::WorkloadConfig::Ping(p) => p.echo_ns,
        _ => unreachable!(),
    };
    3 * s.machine.kick_ns + nb.nic_rx_ns + nb.rx_copy_ns + echo + nb.tx_ns
}

#[test]
fn ping_rtt_on_an_idle_host_is_the_sum_of_the_path() {
    let src = ping_src(2, 10_000, "");
    let s = load(&src, &[]);
    let want = idle_rtt(&s);
    let r = run(&src, &[]);
    let h = rtt(&r, "ping");
    let req = counter(&r, "ping", "requests");
    assert_eq!(req, 20, "one request every 10 ms from 0.5 ms over 200 ms");
    assert_eq!(counter(&r, "ping", "replies"), req);
    assert_eq!(counter(&r, "ping", "lost"), 0);
    assert_eq!(h.count, req);
    assert_eq!(h.min_ns, want, "every round trip is the path's sum");
    assert_eq!(h.max_ns, want);
    let fig = &r
        .workloads
        .iter()
        .find(|w| w.name == "ping")
        .unwrap()
        .figure;
    assert_eq!((fig.name.as_str(), fig.unit.as_str()), ("avg_rtt", "us"));
    assert!((fig.value * 1000.0 - want as f64).abs() < 1e-6, "{fig:?}");
    // Each request woke the halted guest through the host: one run per request, and the guest
    // is halted the rest of the time.
    let g = ent(&r, "g.v0");
    assert_eq!(g.runs, req);
    assert_eq!(
        g.running_ns,
        req * 4700,
        "the guest's vCPU runs only its echoes"
    );
    let d0 = ent(&r, "dom0.v0");
    assert_eq!(d0.runs, 2 * req, "dom0 runs twice per ping");
    assert_eq!(d0.running_ns, req * (2100 + 3300 + 2700));
}

#[test]
fn the_kick_latency_and_the_costs_each_count_once() {
    // Changing one parameter moves the round trip by exactly its share of the path.
    let src = ping_src(2, 10_000, "");
    let base = rtt(&run(&src, &[]), "ping").max_ns;
    let more_kick = rtt(&run(&src, &[("machine.kick_ns", "11500")]), "ping").max_ns;
    assert_eq!(more_kick - base, 30_000, "three kicks of 10 us more");
    let more_echo = rtt(
        &run(&src, &[("domain.1.workload.0.echo_ns", "24700")]),
        "ping",
    )
    .max_ns;
    assert_eq!(more_echo - base, 20_000);
    let more_tx = rtt(&run(&src, &[("domain.0.netback.tx_ns", "12700")]), "ping").max_ns;
    assert_eq!(more_tx - base, 10_000);
}

#[test]
fn the_upcall_is_kernel_work_held_while_the_vcpu_is_away_and_not_charged_to_the_task() {
    // The pinged guest also runs a CPU hog, and shares the only pCPU with dom0: its vCPU is
    // never halted, often preempted by dom0, so upcalls arrive while it is away and are held
    // until it runs. Every request is still answered, and the handler's time is the vCPU's,
    // not the hog task's.
    let extra = "[[domain.workload]]\nkind = \"cpu_loop\"\nname = \"bg\"\n";
    let src = ping_src(1, 1_000, extra);
    // Fixed phases: the vCPU's only halt is the exact kick at boot (no start offset).
    let r = run(&src, &[("run.vary", "false")]);
    let req = counter(&r, "ping", "requests");
    let rep = counter(&r, "ping", "replies");
    assert_eq!(req, 200);
    assert_eq!(
        counter(&r, "ping", "late") + counter(&r, "ping", "dropped"),
        0
    );
    // Only the requests of the last round trip can still be in flight at the end.
    let in_flight = rtt(&r, "ping").max_ns.div_ceil(1_000_000) + 1;
    assert!(
        rep > 0 && rep + in_flight >= req,
        "held upcalls are delivered: {rep} of {req}"
    );
    let g = ent(&r, "g.v0");
    let bg = ent(&r, "bg.0");
    let kernel = g.running_ns - bg.executed_ns;
    assert!(
        kernel >= rep * 4700 && kernel <= req * 4700,
        "the vCPU ran {kernel} ns of kernel work for {rep}..{req} echoes of 4700 ns"
    );
    assert_eq!(
        g.blocked_ns, 1500,
        "a vCPU with a hog halts only at boot, until the kick that starts its hog"
    );
}

#[test]
fn ping_rtt_grows_when_dom0_and_the_guest_wait_behind_hogs_under_credit2() {
    let idle_src = ping_src(2, 1_000, "");
    let idle = rtt(&run(&idle_src, &[]), "ping");
    let busy_src = ping_src(2, 1_000, &(hog("h1", 2) + &hog("h2", 2)));
    let r = run(&busy_src, &[]);
    let busy = rtt(&r, "ping");
    assert!(
        busy.avg_us > 2.0 * idle.avg_us,
        "hogs make the pinged path wait: {} us vs {} us idle",
        busy.avg_us,
        idle.avg_us
    );
    assert!(busy.max_us > 10 * idle.max_us, "{busy:?} vs {idle:?}");
    assert!(ent(&r, "dom0.v0").wait_max_ns > 0);
    assert!(ent(&r, "g.v0").wait_max_ns > 0);
}

/// dom0 with two guests: `a` flooded (a request every 4 us, more than dom0's 5.4 us of receive
/// work per packet can take), then `b` pinged every ms; `b`'s backend port in dom0 is bound
/// after `a`'s, so it is higher. dom0's scan order is `order`.
fn flood_src(order: &str) -> String {
    format!(
        "[run]\nduration_ms = 100\n[machine]\npcpus = 3\n\
         [host]\nscheduler = \"credit2\"\n\
         [[domain]]\nname = \"dom0\"\nvcpus = 1\ndriver = true\n\
         [domain.kernel]\nevtchn_order = \"{order}\"\n\
         [domain.netback]\nnic_rx_ns = 2100\nrx_copy_ns = 3300\ntx_ns = 2700\n\
         [domain.sched]\nscheduler = \"cfs\"\n\
         [[domain]]\nname = \"a\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"ping\"\nname = \"flood\"\ninterval_us = 4\necho_ns = 1000\n\
         [[domain]]\nname = \"b\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"ping\"\nname = \"ping\"\ninterval_us = 1000\n"
    )
}

#[test]
fn lowest_first_in_dom0_starves_a_later_guests_port_round_robin_serves_it() {
    let s = load(&flood_src("lowest_first"), &[]);
    let sim = vmsched_sched::build(&s);
    let (nic, flows) = sim.io_ports().unwrap();
    assert_eq!(nic, 1, "the NIC is dom0's first port");
    assert_eq!(
        flows,
        vec![(2, 1), (3, 1)],
        "backends bound lowest-free-first in creation order; netfront is each guest's port 1"
    );
    let lf = run(&flood_src("lowest_first"), &[]);
    let rr = run(&flood_src("round_robin"), &[]);
    // Under lowest-first, the NIC's port keeps firing: dom0 never gets past it.
    assert!(counter(&lf, "ping", "requests") >= 99);
    assert_eq!(
        counter(&lf, "ping", "replies"),
        0,
        "b's backend port starves"
    );
    assert_eq!(counter(&lf, "flood", "replies"), 0);
    assert!(
        counter(&lf, "flood", "dropped") > 0,
        "the NIC ring overflows"
    );
    // Round-robin serves every pending port in turn: b is answered.
    assert!(counter(&rr, "ping", "replies") > 0);
    assert!(counter(&rr, "flood", "replies") > 0);
    // The ports' figures show which port starved: b's backend (dom0 port 3) was never served
    // under lowest-first and has been pending since shortly after b's first reply was queued,
    // while the NIC's port kept being served.
    let port = |r: &Results, n: u32| {
        r.ports
            .iter()
            .find(|p| p.level == "dom0" && p.port == n)
            .unwrap()
            .clone()
    };
    let (lf_nic, lf_b) = (port(&lf, 1), port(&lf, 3));
    assert_eq!(
        (lf_nic.handler.as_str(), lf_b.handler.as_str()),
        ("nic", "netback:b/ping")
    );
    // Each service takes at most a full ring (256 packets of 5.4 us): it was served all along.
    assert!(
        lf_nic.served >= 100_000_000 / (256 * 5400) - 1,
        "{lf_nic:?}"
    );
    assert_eq!(lf_b.served, 0);
    assert!(lf_b.pending_ns > 90_000_000, "{lf_b:?}");
    let rr_b = port(&rr, 3);
    assert!(rr_b.served > 0 && rr_b.pending_ns < 10_000_000, "{rr_b:?}");
    let rows: Vec<(String, u32, String)> = rr
        .ports
        .iter()
        .map(|p| (p.level.clone(), p.port, p.handler.clone()))
        .collect();
    assert_eq!(
        rows,
        [
            ("dom0", 1, "nic"),
            ("dom0", 2, "netback:a/flood"),
            ("dom0", 3, "netback:b/ping"),
            ("a", 1, "netfront:flood"),
            ("b", 1, "netfront:ping"),
        ]
        .map(|(l, n, h)| (l.to_string(), n, h.to_string()))
    );
}

#[test]
fn ping_needs_a_driver_domain_other_than_its_own() {
    let src = ping_src(2, 1000, "");
    let e = vmsched_sched::load(
        "io.toml",
        &src,
        &[("domain.0.driver".into(), "false".into())],
    )
    .unwrap_err();
    assert_eq!(e.field, "domain.1.workload.0.kind", "{e}");
    let bad_bits = vmsched_sched::load(
        "io.toml",
        &src,
        &[("domain.1.kernel.evtchn_word_bits".into(), "48".into())],
    )
    .unwrap_err();
    assert_eq!(
        bad_bits.field, "domain.1.kernel.evtchn_word_bits",
        "{bad_bits}"
    );
    let no_vcpu = vmsched_sched::load(
        "io.toml",
        &src,
        &[("domain.1.workload.0.vcpu".into(), "1".into())],
    )
    .unwrap_err();
    assert_eq!(no_vcpu.field, "domain.1.workload.0.vcpu", "{no_vcpu}");
    let stream_alone = "[machine]\npcpus = 1\n[host]\nscheduler = \"credit2\"\n\
                        [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
                        [[domain.workload]]\nkind = \"stream\"\nname = \"st\"\n";
    let e = vmsched_sched::load("io.toml", stream_alone, &[]).unwrap_err();
    assert_eq!(e.field, "domain.0.workload.0.kind", "{e}");
    assert!(e.message.contains("stream needs a driver domain"), "{e}");
    let e = vmsched_sched::load(
        "io.toml",
        &stream_src(""),
        &[("domain.1.workload.0.window".into(), "0".into())],
    )
    .unwrap_err();
    assert_eq!(e.field, "domain.1.workload.0.window", "{e}");
}

#[test]
fn a_guest_created_during_the_run_is_unreachable_until_it_exists() {
    // `late` is created at 50 ms: its backend is bound after g's (a higher port), and the
    // requests that reach the NIC before it exists are dropped; the others are answered.
    let extra = "[[domain]]\nname = \"late\"\nvcpus = 1\ncreate_at_ms = 50\n\
                 [domain.sched]\nscheduler = \"cfs\"\n\
                 [[domain.workload]]\nkind = \"ping\"\nname = \"ping2\"\ninterval_us = 10000\n\
                 start_us = 500\n";
    let src = ping_src(2, 10_000, extra);
    let s = load(&src, &[]);
    let (_, flows) = vmsched_sched::build(&s).io_ports().unwrap();
    assert!(flows[1].0 > flows[0].0, "{flows:?}");
    let r = run(&src, &[]);
    let before = (0..)
        .take_while(|k| 500_000 + k * 10_000_000 < 50_000_000)
        .count() as u64;
    assert_eq!(counter(&r, "ping2", "requests"), 20);
    assert_eq!(counter(&r, "ping2", "dropped"), before);
    assert_eq!(counter(&r, "ping2", "replies"), 20 - before);
    assert_eq!(counter(&r, "ping", "replies"), 20, "g is not disturbed");
}

// ---- stream ---------------------------------------------------------------------------------

/// dom0 and a guest `s` receiving a stream (1500-byte packets), with `opts` for the workload.
fn stream_src(opts: &str) -> String {
    format!(
        "[run]\nduration_ms = 100\n[machine]\npcpus = 2\nkick_ns = 1500\n\
         [host]\nscheduler = \"credit2\"\n\
         [[domain]]\nname = \"dom0\"\nvcpus = 1\ndriver = true\n\
         [domain.netback]\nnic_rx_ns = 2100\nrx_copy_ns = 3300\ntx_ns = 2700\n\
         [domain.sched]\nscheduler = \"cfs\"\n\
         [[domain]]\nname = \"s\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"stream\"\nname = \"st\"\nrx_ns = 2900\n{opts}"
    )
}

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

#[test]
fn the_io_path_keeps_the_invariants_with_the_engines_other_features() {
    // KVM halt-polling and hypercall costs, a 2-vCPU dom0 with the NIC on vCPU 1, a guest
    // with its netfront on vCPU 1 next to a task that sleeps and computes, dom0 paused for a
    // while, the pinged guest destroyed before the end, periodic ticks, lowest-first in a
    // 32-bit dom0 with reserved ports: the run keeps every engine invariant (debug checks).
    let src = "[run]\nduration_ms = 300\nwarmup_ms = 20\n\
               [machine]\npcpus = 3\nhypervisor = \"kvm\"\nhalt_poll_ns = 20000\nhypercall_ns = 700\n\
               kick_ns = 900\nipi_latency_ns = 300\n\
               [host]\nscheduler = \"credit2\"\n\
               [[domain]]\nname = \"dom0\"\nvcpus = 2\ndriver = true\n\
               [domain.kernel]\nevtchn_order = \"lowest_first\"\nevtchn_word_bits = 32\n\
               tick = \"periodic\"\n\
               [domain.netback]\nvcpu = 1\nreserved_ports = 40\nring = 8\n\
               [domain.sched]\nscheduler = \"cfs\"\n\
               [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"d0hog\"\n\
               [[domain]]\nname = \"g\"\nvcpus = 2\ndestroy_at_ms = 250\n\
               [domain.kernel]\npreempt = \"full\"\n\
               [domain.sched]\nscheduler = \"cfs\"\n\
               [[domain.workload]]\nkind = \"ping\"\nname = \"ping\"\ninterval_us = 700\nvcpu = 1\n\
               [[domain.workload]]\nkind = \"program\"\nname = \"p\"\ncopies = 2\n\
               steps = [{ op = \"compute\", us = 300 }, { op = \"sleep\", us = 200 }, \
               { op = \"loop\", to = 0 }]\n\
               [[domain]]\nname = \"s\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
               [[domain.workload]]\nkind = \"stream\"\nname = \"st\"\nwindow = 16\n\
               [[event]]\nat_ms = 100\naction = \"pause\"\ndomain = \"dom0\"\n\
               [[event]]\nat_ms = 130\naction = \"unpause\"\ndomain = \"dom0\"\n";
    let r = run(src, &[]);
    for e in &r.entities {
        let sum = e.running_ns + e.runnable_ns + e.blocked_ns + e.offline_ns;
        assert_eq!(sum, r.duration_ns - r.warmup_ns, "{}", e.name);
    }
    assert!(counter(&r, "ping", "replies") > 0);
    assert!(counter(&r, "st", "packets") > 0);
    let s = load(src, &[]);
    let (nic, flows) = vmsched_sched::build(&s).io_ports().unwrap();
    assert_eq!(
        nic, 41,
        "after 40 reserved ports: in dom0's second 32-bit word"
    );
    assert_eq!(flows, vec![(42, 1), (43, 1)]);
}

/// A random I/O scenario from `seed`: host, machine and exit model, a driver domain, guests
/// with pings, streams and hogs, some created or destroyed during the run.
fn random_io(seed: u64) -> String {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut r = |n: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    let pcpus = 1 + r(4);
    let pinned = r(4) == 0;
    let host = if pinned {
        "scheduler = \"pinned\"".to_string()
    } else {
        format!(
            "scheduler = \"credit2\"\nratelimit_us = {}",
            [0, 100, 1000][r(3) as usize]
        )
    };
    let guests = 1 + r(3);
    let d0v = 1 + r(2);
    let mut nvcpus = d0v;
    let mut s = format!(
        "[run]\nduration_ms = 60\nwarmup_ms = {}\nseed = {seed}\n[machine]\npcpus = {pcpus}\n\
         kick_ns = {}\nhypercall_ns = {}\nipi_latency_ns = {}\n{}[host]\n{host}\n\
         [[domain]]\nname = \"dom0\"\nvcpus = {d0v}\ndriver = true\n\
         [domain.kernel]\nevtchn_order = \"{}\"\nevtchn_word_bits = {}\n\
         [domain.netback]\nvcpu = {}\nring = {}\nreserved_ports = {}\nnic_rx_ns = {}\n\
         [domain.sched]\nscheduler = \"cfs\"\n",
        r(2) * 10,
        r(3) * 1000,
        r(2) * 500,
        r(2) * 300,
        if r(3) == 0 {
            "hypervisor = \"kvm\"\nhalt_poll_ns = 30000\n"
        } else {
            ""
        },
        ["lowest_first", "round_robin"][r(2) as usize],
        [32, 64][r(2) as usize],
        r(d0v),
        1 + r(300),
        r(70),
        r(5000),
    );
    if r(2) == 0 {
        s += "[[domain.workload]]\nkind = \"cpu_loop\"\nname = \"d0hog\"\n";
    }
    for g in 0..guests {
        let v = 1 + r(2);
        nvcpus += v;
        s += &format!("[[domain]]\nname = \"g{g}\"\nvcpus = {v}\n");
        // The pinned host takes no domain creation or destruction.
        if !pinned && g == guests - 1 && r(2) == 0 {
            s += &format!("create_at_ms = {}\n", 5 + r(20));
        }
        if !pinned && r(4) == 0 {
            s += &format!("destroy_at_ms = {}\n", 30 + r(20));
        }
        s += "[domain.sched]\nscheduler = \"cfs\"\n";
        s += &match r(3) {
            0 => format!(
                "[[domain.workload]]\nkind = \"ping\"\nname = \"w\"\ninterval_us = {}\nvcpu = {}\n",
                10 + r(2000),
                r(v)
            ),
            1 => format!(
                "[[domain.workload]]\nkind = \"stream\"\nname = \"w\"\nwindow = {}\n\
                 rate_mbps = {}\nwire_us = {}\nrto_ms = 5\nvcpu = {}\n",
                1 + r(100),
                [100, 1000, 10000][r(3) as usize],
                r(100),
                r(v)
            ),
            _ => format!(
                "[[domain.workload]]\nkind = \"ping\"\nname = \"w\"\ninterval_us = {}\n\
                 [[domain.workload]]\nkind = \"program\"\nname = \"p\"\n\
                 steps = [{{ op = \"compute\", us = {} }}, {{ op = \"sleep\", us = {} }}, \
                 {{ op = \"loop\", to = 0 }}]\n",
                50 + r(1000),
                1 + r(500),
                1 + r(500)
            ),
        };
    }
    if pinned && nvcpus > pcpus {
        // The pinned host needs a pCPU per vCPU.
        s = s.replacen(
            &format!("pcpus = {pcpus}\n"),
            &format!("pcpus = {nvcpus}\n"),
            1,
        );
    }
    s
}

#[test]
fn random_io_scenarios_keep_the_invariants() {
    for seed in 0..60 {
        let src = random_io(seed);
        let s = vmsched_sched::load("random.toml", &src, &[])
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}"));
        let mut sim = vmsched_sched::build(&s);
        sim.set_debug_checks(true);
        sim.run();
        let r = sim.results();
        for e in &r.entities {
            let sum = e.running_ns + e.runnable_ns + e.blocked_ns + e.offline_ns;
            assert_eq!(sum, r.measured_ns, "seed {seed}: {}\n{src}", e.name);
        }
        for w in &r.workloads {
            let c = |k: &str| w.counters.iter().find(|(n, _)| n == k).map(|x| x.1);
            if let (Some(req), Some(rep)) = (c("requests"), c("replies")) {
                assert!(
                    rep <= req,
                    "seed {seed}: {}: {rep} replies to {req}",
                    w.name
                );
            }
        }
    }
}

#[test]
fn random_io_scenarios_with_guest_cpu_hotplug_keep_the_invariants() {
    // The random I/O scenarios, with vCPU 1 of each two-vCPU domain that lives the whole run
    // (the driver domain included) offlined mid-run and sometimes onlined again, on the hosts
    // that take it (not the pinned one): its ports move with their events and handlers in
    // progress (debug checks on).
    let mut with_events = 0;
    for seed in 0..60u64 {
        let mut src = random_io(seed);
        if src.contains("scheduler = \"pinned\"") {
            // The pinned host takes no guest CPU hot-plug.
            continue;
        }
        let mut ev = String::new();
        for (k, block) in src.split("[[domain]]\n").skip(1).enumerate() {
            if !block.contains("vcpus = 2\n") || block.contains("_at_ms") {
                continue;
            }
            let name = block
                .strip_prefix("name = \"")
                .and_then(|b| b.split('"').next())
                .unwrap();
            let off = 5 + (seed * 7 + k as u64 * 13) % 40;
            ev += &format!(
                "\n[[event]]\nat_ms = {off}\naction = \"cpu_offline\"\ndomain = \"{name}\"\ncpu = 1\n"
            );
            if (seed + k as u64).is_multiple_of(2) {
                ev += &format!(
                    "\n[[event]]\nat_ms = {}\naction = \"cpu_online\"\ndomain = \"{name}\"\ncpu = 1\n",
                    off + 3 + seed % 10
                );
            }
        }
        if ev.is_empty() {
            continue;
        }
        with_events += 1;
        src += &ev;
        let s = vmsched_sched::load("random.toml", &src, &[])
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}"));
        let mut sim = vmsched_sched::build(&s);
        sim.set_debug_checks(true);
        sim.run();
        let r = sim.results();
        for e in &r.entities {
            let sum = e.running_ns + e.runnable_ns + e.blocked_ns + e.offline_ns;
            assert_eq!(sum, r.measured_ns, "seed {seed}: {}\n{src}", e.name);
        }
        for p in &r.ports {
            let offline_now = src.contains(&format!("domain = \"{}\"\ncpu = 1", p.level))
                && !src.contains(&format!("\"cpu_online\"\ndomain = \"{}\"", p.level));
            assert!(
                !(offline_now && p.vcpu == 1),
                "seed {seed}: port {} of {} left on offline vCPU 1\n{src}",
                p.port,
                p.level
            );
        }
    }
    assert!(with_events >= 20, "{with_events} scenarios with hot-plug");
}

#[test]
fn the_shipped_io_scenario_is_deterministic_and_pings_behind_the_hogs() {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/vmsched/scenarios/io_ping.toml"
    );
    let src = std::fs::read_to_string(p).unwrap();
    let ov = [("run.duration_ms", "600"), ("run.warmup_ms", "100")];
    let a = serde_json::to_string(&run(&src, &ov)).unwrap();
    let b = serde_json::to_string(&run(&src, &ov)).unwrap();
    assert_eq!(a, b, "same scenario and seed, same bytes");
    let r = run(&src, &ov);
    let s = load(&src, &ov);
    assert!(counter(&r, "ping", "replies") >= 49);
    assert!(
        rtt(&r, "ping").mean_ns > 10.0 * idle_rtt(&s) as f64,
        "the hogs make each ping wait for dom0 and web"
    );
}

#[test]
fn the_trace_shows_each_notification_and_handler_of_a_ping() {
    use vmsched_core::trace::Record;
    let src = ping_src(2, 10_000, "");
    let s = load(&src, &[("run.duration_ms", "5")]);
    let mut sim = vmsched_sched::build(&s);
    sim.enable_trace(100_000);
    sim.run();
    let tr = sim.take_trace().unwrap();
    let level = |l: vmsched_core::LevelId| tr.meta.levels[l.idx()].name.clone();
    let steps: Vec<(String, u32, &str)> = tr
        .records
        .iter()
        .filter_map(|r| match *r {
            Record::Notify { level: l, port, .. } => Some((level(l), port, "notify")),
            Record::Handler {
                level: l,
                port,
                end,
                ..
            } => Some((level(l), port, if end { "end" } else { "handler" })),
            _ => None,
        })
        .collect();
    let want = [
        ("dom0", 1, "notify"),
        ("dom0", 1, "handler"),
        ("dom0", 1, "end"),
        ("g", 1, "notify"),
        ("g", 1, "handler"),
        ("g", 1, "end"),
        ("dom0", 2, "notify"),
        ("dom0", 2, "handler"),
        ("dom0", 2, "end"),
    ]
    .map(|(l, p, k)| (l.to_string(), p, k));
    assert_eq!(steps, want, "one ping: NIC port, netfront, backend port");
    // The handlers take the path's costs, in order.
    let times: Vec<u64> = tr
        .records
        .iter()
        .filter(|r| matches!(r, Record::Handler { .. }))
        .map(|r| r.t())
        .collect();
    assert_eq!(times[1] - times[0], 2100 + 3300, "dom0's receive work");
    assert_eq!(times[3] - times[2], 4700, "the guest's echo");
    assert_eq!(times[5] - times[4], 2700, "dom0's transmit work");
}

#[test]
fn a_driver_domain_out_of_ports_is_refused() {
    let src = ping_src(2, 1000, "");
    let e = vmsched_sched::load(
        "io.toml",
        &src,
        &[
            ("domain.0.kernel.evtchn_word_bits".into(), "32".into()),
            ("domain.0.netback.reserved_ports".into(), "1023".into()),
        ],
    );
    assert!(e.is_ok(), "1 + 1023 + 1 + 1 ports fit in 2048");
    let mut many = src.clone();
    for k in 0..30 {
        many += &format!(
            "[[domain]]\nname = \"x{k}\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
             [[domain.workload]]\nkind = \"ping\"\nname = \"p\"\n\
             [[domain.workload]]\nkind = \"stream\"\nname = \"s\"\n"
        );
    }
    let e = vmsched_sched::load(
        "io.toml",
        &many,
        &[
            ("domain.0.kernel.evtchn_word_bits".into(), "32".into()),
            ("domain.0.netback.reserved_ports".into(), "1000".into()),
        ],
    );
    assert!(e.is_ok(), "1 + 1000 + 1 + 61 ports fit");
    let mut more = many.clone();
    for k in 0..500 {
        more += &format!(
            "[[domain]]\nname = \"y{k}\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
             [[domain.workload]]\nkind = \"ping\"\nname = \"p\"\n\
             [[domain.workload]]\nkind = \"stream\"\nname = \"s\"\n"
        );
    }
    let e = vmsched_sched::load(
        "io.toml",
        &more,
        &[
            ("domain.0.kernel.evtchn_word_bits".into(), "32".into()),
            ("domain.0.netback.reserved_ports".into(), "1000".into()),
        ],
    )
    .unwrap_err();
    assert_eq!(e.field, "domain.0.netback.reserved_ports", "{e}");
    assert!(e.message.contains("2048"), "{e}");
}

/// dom0 and a two-vCPU guest `g` whose netfront port is on vCPU 1, with a loop on each guest
/// vCPU (the upcalls interrupt a task), pinged every ms; the echo costs 300 µs, so the request
/// of 49.9 ms is in the guest's handler on vCPU 1 at 50 ms; then `events`.
fn rebind_src(events: &str) -> String {
    format!(
        "[run]\nduration_ms = 200\n[machine]\npcpus = 4\nkick_ns = 1500\n\
         [host]\nscheduler = \"credit2\"\n\
         [[domain]]\nname = \"dom0\"\nvcpus = 1\ndriver = true\n\
         [domain.netback]\nnic_rx_ns = 2100\nrx_copy_ns = 3300\ntx_ns = 2700\n\
         [domain.sched]\nscheduler = \"cfs\"\n\
         [[domain]]\nname = \"g\"\nvcpus = 2\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"ping\"\nname = \"ping\"\ninterval_us = 1000\nvcpu = 1\n\
         start_us = 900\necho_ns = 300000\n\
         [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"loop\"\ncopies = 2\n{events}"
    )
}

fn hotplug_event(at_ms: u64, action: &str) -> String {
    format!("\n[[event]]\nat_ms = {at_ms}\naction = \"{action}\"\ndomain = \"g\"\ncpu = 1\n")
}

/// The vCPU a level's port of the given handler is bound to at the end of the run.
fn port_vcpu(r: &Results, level: &str, handler: &str) -> u32 {
    r.ports
        .iter()
        .find(|p| p.level == level && p.handler == handler)
        .unwrap_or_else(|| panic!("no port {handler} in {level}"))
        .vcpu
}

#[test]
fn a_guest_cpu_offline_moves_its_ports_and_their_events_to_an_online_vcpu() {
    // Linux (irq_migrate_all_off_this_cpu → xen_rebind_evtchn_to_cpu): the netfront port of the
    // dying vCPU 1 goes to vCPU 0 (its affinity {1} has no online vCPU left: broken to every
    // online vCPU, the lowest taken); the handler in progress completes; every later ping is
    // answered on vCPU 0. Without the rebinding every ping after 50 ms stays pending on the
    // offline vCPU 1 (about 150 lost).
    let src = rebind_src(&hotplug_event(50, "cpu_offline"));
    let s = load(&src, &[]);
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.run();
    let r = sim.results();
    let req = counter(&r, "ping", "requests");
    assert_eq!(req, 200, "one request every ms from 0.9 ms over 200 ms");
    // The in-flight window: at most the request still in the path at the end of the run.
    let rep = counter(&r, "ping", "replies");
    assert!(rep + 1 >= req, "{rep} replies to {req} requests");
    assert_eq!(counter(&r, "ping", "dropped"), 0);
    assert_eq!(port_vcpu(&r, "g", "netfront:ping"), 0);
    assert!(
        sim.log()
            .iter()
            .any(|l| l.contains("g: CPU 1 offline: event-channel port")
                && l.contains("bound to CPU 0")),
        "{:?}",
        sim.log()
    );
    // After the offline every echo runs on vCPU 0: g.v1 is offline at the host.
    let v1 = ent(&r, "g.v1");
    assert!(v1.offline_ns > 0, "{v1:?}");
}

#[test]
fn ports_stay_on_their_new_vcpu_when_the_cpu_comes_back_online() {
    let ev = hotplug_event(50, "cpu_offline") + &hotplug_event(100, "cpu_online");
    let src = rebind_src(&ev);
    let r = run(&src, &[]);
    assert_eq!(
        port_vcpu(&r, "g", "netfront:ping"),
        0,
        "Linux does not move an IRQ back when a CPU comes online"
    );
    let (req, rep) = (
        counter(&r, "ping", "requests"),
        counter(&r, "ping", "replies"),
    );
    assert!(rep + 1 >= req, "{rep} replies to {req} requests");
}

#[test]
fn a_driver_domain_cpu_offline_moves_the_nic_and_backend_ports() {
    // dom0 with two vCPUs, its NIC and backend ports on vCPU 1, offlined mid-run.
    let src = ping_src(4, 1000, "").replace(
        "name = \"dom0\"\nvcpus = 1\ndriver = true\n[domain.netback]\n",
        "name = \"dom0\"\nvcpus = 2\ndriver = true\n[domain.netback]\nvcpu = 1\n",
    ) + "\n[[event]]\nat_ms = 80\naction = \"cpu_offline\"\ndomain = \"dom0\"\ncpu = 1\n";
    assert!(src.contains("vcpu = 1"));
    let r = run(&src, &[]);
    let (req, rep) = (
        counter(&r, "ping", "requests"),
        counter(&r, "ping", "replies"),
    );
    assert_eq!(req, 200);
    assert!(rep + 1 >= req, "{rep} replies to {req} requests");
    assert_eq!(port_vcpu(&r, "dom0", "nic"), 0);
    assert_eq!(port_vcpu(&r, "dom0", "netback:g/ping"), 0);
}

#[test]
fn event_channel_rebinding_is_deterministic() {
    let ev = hotplug_event(50, "cpu_offline") + &hotplug_event(120, "cpu_online");
    let src = rebind_src(&ev);
    let a = serde_json::to_string(&run(&src, &[])).unwrap();
    let b = serde_json::to_string(&run(&src, &[])).unwrap();
    assert_eq!(a, b, "same scenario and seed, same bytes");
}

/// Seed 002's deferred tickle (Credit1 3.3 `deferred_tickle`, docs/credit1.md): one pCPU, a hog
/// guest, a guest pinged every 10 ms and `streams` streaming guests behind dom0.
fn deferred_src(streams: u32) -> String {
    let mut s = String::from(
        "[run]\nduration_ms = 2000\nwarmup_ms = 200\n[machine]\npcpus = 1\n\
         [host]\nscheduler = \"credit\"\nversion = \"3.3\"\n\
         [[domain]]\nname = \"dom0\"\nvcpus = 1\ndriver = true\n\
         [domain.sched]\nscheduler = \"cfs\"\n",
    );
    s += &hog("hog", 1);
    for i in 0..streams {
        s += &format!(
            "[[domain]]\nname = \"s{i}\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
             [[domain.workload]]\nkind = \"stream\"\nname = \"st{i}\"\nrate_mbps = 300\n"
        );
    }
    s + "[[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"ping\"\nname = \"ping\"\ninterval_us = 10000\n\
         start_us = 500\n"
}

#[test]
fn a_deferred_tickle_answers_a_lone_ping_at_once_where_no_tickle_waits_for_the_slice() {
    // dom0 idle between pings: the NIC's interrupt wakes dom0 outside any batch, so the
    // deferred tickle preempts the hog at once, as the plain tickle does; without a tickle dom0
    // and the guest wait for the hog's slice to end.
    let src = deferred_src(0);
    let tickle = rtt(&run(&src, &[]), "ping");
    let deferred = rtt(&run(&src, &[("host.deferred_tickle", "true")]), "ping");
    let none = rtt(&run(&src, &[("host.tickle_on_wake", "false")]), "ping");
    assert!(tickle.max_ns < 100_000, "{tickle:?}");
    assert_eq!(deferred.max_ns, tickle.max_ns, "{deferred:?}");
    assert!(none.max_ns > 1_000_000, "{none:?}");
}

#[test]
fn a_deferred_tickle_lets_dom0_finish_its_upcall() {
    // Streams keep dom0 notifying BOOSTed guests: with a tickle per wake a woken guest can
    // preempt dom0 in the middle of its upcall; deferred, the tickles wait for its end, so dom0
    // is never preempted, and every ping that is not dropped on the streams' full NIC ring
    // is answered.
    let src = deferred_src(2);
    let tickle = run(&src, &[]);
    let deferred = run(&src, &[("host.deferred_tickle", "true")]);
    assert!(ent(&tickle, "dom0.v0").preemptions > 0);
    assert_eq!(ent(&deferred, "dom0.v0").preemptions, 0);
    let c = |k| counter(&deferred, "ping", k);
    // Requests within the worst round trip of the end may be in flight (one per 10 ms).
    let in_flight = rtt(&deferred, "ping").max_ns / 10_000_000 + 1;
    assert!(c("replies") + c("dropped") + in_flight >= c("requests"));
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

#[test]
fn a_ping_arriving_as_the_warmup_ends_counts_its_reply_only_with_its_request() {
    // The first request arrives at the very instant the warm-up ends. Whichever of the two is
    // handled first, the request and its reply are counted together or not at all: every
    // request counted is answered on this idle host, and no reply is counted without one.
    let src = ping_src(2, 10_000, "").replace("start_us = 500", "start_us = 10000");
    let r = run(&src, &[("run.warmup_ms", "10"), ("run.duration_ms", "205")]);
    let (req, rep) = (
        counter(&r, "ping", "requests"),
        counter(&r, "ping", "replies"),
    );
    assert!(req >= 18, "{req} requests");
    assert_eq!(rep, req);
    assert_eq!(rtt(&r, "ping").count, req);
    assert_eq!(counter(&r, "ping", "lost"), 0);
    assert_eq!(counter(&r, "ping", "unanswered"), 0);
}
