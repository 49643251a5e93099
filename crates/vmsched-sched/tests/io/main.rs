//! The I/O path through a driver domain (issue 11 item 3; docs/io.md): event-channel upcalls
//! as kernel work on a vCPU, kicks of halted vCPUs through the host, upcalls held while a vCPU
//! is away, the ping's round trip (NIC → dom0 netback → guest netfront → dom0 → NIC), and the
//! guest's scan order (ERRATA X5: lowest-first starves a high port, round-robin serves it).
//! This file holds the helpers and the ping's cases; beside it, by subject: `stream.rs`
//! (streams, windows and loss), `random.rs` (the invariants over random I/O scenarios) and
//! `rebind.rs` (event-channel rebinding at CPU hot-plug).

use vmsched_core::report::Results;

#[allow(dead_code)]
#[path = "../common/run.rs"]
mod run;
use run::{counter, ent};

mod random;
mod rebind;
mod stream;

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
