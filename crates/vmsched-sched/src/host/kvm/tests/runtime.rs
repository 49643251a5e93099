//! Run-time changes at a KVM host (`sched_vcpu` events on vCPU threads, `sched_task` events
//! without `domain` on host processes): the host core's `prio_changed` within a class and its
//! class switch between the fair and the RT class (`guest/linux_core.rs`).

use super::*;

/// The worst latency of cyclictest `ct`.
fn ct_max(r: &Results) -> u64 {
    let w = r.workloads.iter().find(|w| w.name == "ct").expect("ct");
    assert!(w.histograms[0].1.count > 0, "cyclictest measured nothing");
    w.histograms[0].1.max_ns
}

/// `[[event]]` text.
fn event(at_ms: u64, body: &str) -> String {
    format!("[[event]]\nat_ms = {at_ms}\n{body}\n")
}

/// Measured from the event on (warm-up = event time): a reniced vCPU thread's share of its
/// pCPU against another one changes at the event, from 1:1 to nice 0 vs nice 5 (1024:335).
#[test]
fn reniced_vcpu_thread_share_changes_at_the_event() {
    for class in CLASSES {
        let base = looping_guest("a", "") + &looping_guest("b", "");
        let ev = event(500, "action = \"sched_vcpu\"\ndomain = \"b\"\nnice = 5");
        let src = scenario(1, class, &(base.clone() + &ev));
        let before = run(&scenario(1, class, &base), &[("run.duration_ms", "500")]);
        let r1 = ent(&before, "host", "a.v0").running_ns as f64
            / ent(&before, "host", "b.v0").running_ns as f64;
        assert!(
            (r1 - 1.0).abs() < 0.05,
            "{class}: before the event {r1:.3}:1"
        );
        let after = run(&src, &[("run.warmup_ms", "500")]);
        let r2 = ent(&after, "host", "a.v0").running_ns as f64
            / ent(&after, "host", "b.v0").running_ns as f64;
        assert!(
            (r2 - 1024.0 / 335.0).abs() < 0.15,
            "{class}: after renice 5 the shares are {r2:.3}:1, not 3.06:1"
        );
    }
}

/// `chrt -f` of a vCPU thread at run time moves it into the host's RT class (a class switch
/// while it runs or waits): from then on it takes its pCPU from two host loops (RT
/// throttling aside), and `chrt -o` brings it back to a fair share.
#[test]
fn chrt_fifo_and_back_moves_the_vcpu_thread_between_classes() {
    let rest = "[[host.process]]\nkind = \"cpu_loop\"\nname = \"hog\"\ncopies = 2\n".to_string()
        + &looping_guest("g", "");
    let to_fifo = event(
        300,
        "action = \"sched_vcpu\"\ndomain = \"g\"\npolicy = \"fifo\"\nrt_priority = 10",
    );
    let back = event(
        600,
        "action = \"sched_vcpu\"\ndomain = \"g\"\npolicy = \"normal\"",
    );
    for class in CLASSES {
        let share = |src: &str, from: &str, to: &str| {
            let r = run(src, &[("run.warmup_ms", from), ("run.duration_ms", to)]);
            ent(&r, "host", "g.v0").cpu_share
        };
        let fair = share(&scenario(1, class, &rest), "100", "300");
        let fifo = share(
            &scenario(1, class, &(rest.clone() + &to_fifo)),
            "300",
            "600",
        );
        let full = scenario(1, class, &(rest.clone() + &to_fifo + &back));
        let again = share(&full, "700", "1000");
        assert!(
            (fair - 1.0 / 3.0).abs() < 0.05,
            "{class}: a nice-0 vCPU thread beside 2 loops got {fair:.3}"
        );
        assert!(fifo > 0.99, "{class}: the FIFO vCPU thread got {fifo:.3}");
        assert!(
            (again - 1.0 / 3.0).abs() < 0.08,
            "{class}: back to normal it got {again:.3}"
        );
    }
}

/// A class switch of a halted (blocked) vCPU thread takes effect at its next wake-up: the
/// guest's cyclictest, idle between periods, wakes its vCPU thread as an RR task after the
/// event, which preempts a host loop at once (a higher class), where a CFS host without
/// WAKEUP_PREEMPTION makes the nice-0 thread wait for the loop's tick.
#[test]
fn chrt_of_a_halted_vcpu_thread_applies_at_its_wake_up() {
    let rest = "[[host.process]]\nkind = \"cpu_loop\"\nname = \"hog\"\n\
                [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
                [[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\nthreads = 1\n\
                interval_us = 1000\npriority = 90\n";
    let ev = event(
        300,
        "action = \"sched_vcpu\"\ndomain = \"g\"\ncpu = 0\npolicy = \"rr\"\nrt_priority = 5",
    );
    let set = [
        ("run.warmup_ms", "300"),
        ("host.sched.wakeup_preemption", "false"),
    ];
    let max = ct_max(&run(&scenario(1, "cfs", &(rest.to_string() + &ev)), &set));
    let max0 = ct_max(&run(&scenario(1, "cfs", rest), &set));
    assert_eq!(
        max, 0,
        "an RR vCPU thread preempts the loop at each wake-up"
    );
    assert!(max0 > 100_000, "a nice-0 one waits for a tick ({max0} ns)");
}

/// A host process is reniced by a `sched_task` event without `domain`: two host loops on one
/// pCPU share it 1:1 before and 1024:335 after.
#[test]
fn reniced_host_process_share_changes() {
    let rest = "[[host.process]]\nkind = \"cpu_loop\"\nname = \"a\"\n\
                [[host.process]]\nkind = \"cpu_loop\"\nname = \"b\"\n"
        .to_string()
        + &looping_guest("g", "vcpu_policy = \"idle\"")
        + &event(300, "action = \"sched_task\"\nworkload = \"b\"\nnice = 5");
    for class in CLASSES {
        let r = run(&scenario(1, class, &rest), &[("run.warmup_ms", "300")]);
        let ratio =
            ent(&r, "host", "a.0").running_ns as f64 / ent(&r, "host", "b.0").running_ns as f64;
        assert!(
            (ratio - 1024.0 / 335.0).abs() < 0.2,
            "{class}: host processes after renice share {ratio:.3}:1"
        );
    }
}

/// Errors name the field: a vCPU that does not exist, an RT policy without a priority, a
/// deadline move, a host process that does not exist, and `sched_vcpu` under a Xen host.
#[test]
fn runtime_errors_name_the_field() {
    let base = scenario(1, "cfs", &looping_guest("g", ""));
    let cases = [
        (
            "action = \"sched_vcpu\"\ndomain = \"g\"\ncpu = 1\nnice = 1",
            "event.0.cpu",
        ),
        (
            "action = \"sched_vcpu\"\ndomain = \"g\"\npolicy = \"fifo\"",
            "event.0.policy",
        ),
        (
            "action = \"sched_vcpu\"\ndomain = \"g\"\npolicy = \"fifo\"\nrt_priority = 100",
            "event.0.rt_priority",
        ),
        (
            "action = \"sched_vcpu\"\ndomain = \"g\"\nnice = 20",
            "event.0.nice",
        ),
        ("action = \"sched_vcpu\"\ndomain = \"g\"", "event.0.nice"),
        (
            "action = \"sched_vcpu\"\ndomain = \"g\"\nworkload = \"loop\"\nnice = 1",
            "event.0.workload",
        ),
        (
            "action = \"sched_task\"\nworkload = \"nope\"\nnice = 1",
            "event.0.workload",
        ),
    ];
    for (body, field) in cases {
        let e = load_err(&(base.clone() + &event(10, body)), &[]);
        assert_eq!(e.field, field, "{body}: {}", e.message);
    }
    let xen = "[machine]\npcpus = 1\n[host]\nscheduler = \"credit2\"\n".to_string()
        + &looping_guest("g", "")
        + &event(10, "action = \"sched_vcpu\"\ndomain = \"g\"\nnice = 1");
    let e = load_err(&xen, &[]);
    assert_eq!(e.field, "event.0.nice", "{}", e.message);
}

/// The engine's invariants hold across run-time class switches of vCPU threads (running,
/// queued and halted ones) and host processes, under CFS and EEVDF hosts.
#[test]
fn invariants_hold_across_class_switches() {
    let evs = [
        (100, "action = \"sched_vcpu\"\ndomain = \"guest\"\npolicy = \"fifo\"\nrt_priority = 20"),
        (150, "action = \"sched_task\"\nworkload = \"hostloop\"\ntask = \"hostloop.1\"\npolicy = \"rr\"\nrt_priority = 30"),
        (200, "action = \"sched_vcpu\"\ndomain = \"guest\"\npolicy = \"batch\"\nnice = 3"),
        (250, "action = \"sched_task\"\nworkload = \"hostloop\"\npolicy = \"normal\"\nnice = -5"),
        (300, "action = \"sched_vcpu\"\ndomain = \"guest\"\ncpu = 0\npolicy = \"rr\"\nrt_priority = 1"),
        (400, "action = \"sched_vcpu\"\ndomain = \"guest\"\npolicy = \"idle\""),
    ];
    let src = evs
        .iter()
        .fold(SHIPPED.to_string(), |s, (t, b)| s + "\n" + &event(*t, b));
    for sched in ["eevdf", "cfs", "bfs"] {
        let set: &[(&str, &str)] = match sched {
            "eevdf" => &[],
            _ => &[("host.sched.scheduler", sched)],
        };
        let s = build::load("t.toml", &src, &sets(set)).unwrap_or_else(|e| panic!("{sched}: {e}"));
        let mut sim = build::build(&s);
        sim.set_debug_checks(true);
        sim.run();
        let r = sim.results();
        for e in &r.entities {
            let sum = e.running_ns + e.runnable_ns + e.blocked_ns + e.offline_ns;
            assert_eq!(sum, r.measured_ns, "{sched}: {} runstates", e.name);
        }
    }
}
