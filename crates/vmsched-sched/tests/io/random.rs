//! The I/O path keeps the engine's invariants (`set_debug_checks`): beside the engine's other
//! features, and over random I/O scenarios with and without guest CPU hot-plug.

use super::*;

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
