//! Tests of the KVM host (host/kvm.rs): the Linux core at the host level over vCPU threads and
//! host processes, halt polling beside other host tasks, directed yield, static prioritising,
//! and the scenario checks. Each runs a small scenario and asserts what the rule implies.
//! Topics: run-time changes (`tests/runtime.rs`).

use vmsched_core::report::{EntityResult, Results};

use crate::build;

const SHIPPED: &str = include_str!("../../../../../python/vmsched/scenarios/kvm_host.toml");

fn sets(set: &[(&str, &str)]) -> Vec<(String, String)> {
    set.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn run(src: &str, set: &[(&str, &str)]) -> Results {
    build::run("t.toml", src, &sets(set)).unwrap_or_else(|e| panic!("{e}"))
}

fn load_err(src: &str, set: &[(&str, &str)]) -> vmsched_core::scenario::ScenarioError {
    match build::load("t.toml", src, &sets(set)) {
        Ok(_) => panic!("{set:?} was accepted"),
        Err(e) => e,
    }
}

fn ent<'a>(r: &'a Results, level: &str, name: &str) -> &'a EntityResult {
    r.entities
        .iter()
        .find(|e| e.level == level && e.name == name)
        .unwrap_or_else(|| panic!("no entity {level}/{name}"))
}

/// A KVM host of `pcpus` pCPUs running the Linux `class` (`cfs` or `eevdf`), then `rest`
/// (host processes and domains).
/// Fixed phases (`run.vary = false`): these tests count boosts and bound waits exactly.
fn scenario(pcpus: u32, class: &str, rest: &str) -> String {
    let kernel = if class == "eevdf" {
        "kernel = \"6.12\"\n"
    } else {
        ""
    };
    format!(
        "name = \"t\"\n[run]\nduration_ms = 1000\nwarmup_ms = 100\nseed = 1\nvary = false\n\
         [machine]\npcpus = {pcpus}\nhypervisor = \"kvm\"\n\
         [host]\nscheduler = \"linux\"\n[host.sched]\nscheduler = \"{class}\"\n{kernel}{rest}"
    )
}

/// A guest `name` with one vCPU whose tasks loop forever, with `extra` domain fields.
fn looping_guest(name: &str, extra: &str) -> String {
    format!(
        "[[domain]]\nname = \"{name}\"\nvcpus = 1\n{extra}\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"loop\"\n"
    )
}

const CLASSES: [&str; 2] = ["cfs", "eevdf"];

/// Two always-busy vCPU threads on one pCPU share it by their host weights (nice 0: 1024,
/// nice 5: 335), under either fair class.
#[test]
fn vcpu_threads_share_by_weight() {
    for class in CLASSES {
        let src = scenario(
            1,
            class,
            &(looping_guest("a", "") + &looping_guest("b", "vcpu_nice = 5")),
        );
        let r = run(&src, &[]);
        let (a, b) = (ent(&r, "host", "a.v0"), ent(&r, "host", "b.v0"));
        let ratio = a.running_ns as f64 / b.running_ns as f64;
        assert!(
            (ratio - 1024.0 / 335.0).abs() < 0.1,
            "{class}: nice 0 vs nice 5 ran {ratio:.3}:1, not 3.06:1"
        );
        assert!(a.running_ns + b.running_ns >= r.measured_ns - 1_000_000);
    }
}

/// A guest that sleeps 100 µs at a time: alone on its pCPU the vCPU thread halt-polls
/// (200 µs on x86) and never sleeps at the host, so the pCPU stays busy; with polling off, or
/// with a host loop queued on the same pCPU (KVM polls only while the vCPU thread is the only
/// runnable task there), it sleeps at every guest idle.
#[test]
fn halt_poll_keeps_the_pcpu_busy_only_when_alone() {
    let guest = "[[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
                 [[domain.workload]]\nkind = \"program\"\nname = \"p\"\n\
                 steps = [{ op = \"compute\", us = 20 }, { op = \"sleep\", us = 100, slack_ns = 0 }, \
                 { op = \"loop\", to = 0 }]\n";
    let host_loop = "[[host.process]]\nkind = \"cpu_loop\"\nname = \"hog\"\n";
    for class in CLASSES {
        let alone = run(&scenario(1, class, guest), &[]);
        let v = ent(&alone, "host", "g.v0");
        assert_eq!(v.blocked_ns, 0, "{class}: a polling vCPU never blocks");
        assert!(v.running_ns >= alone.measured_ns - 1000);
        let off = run(&scenario(1, class, guest), &[("machine.halt_poll_ns", "0")]);
        let v = ent(&off, "host", "g.v0");
        assert!(
            v.blocked_ns > off.measured_ns / 2,
            "{class}: without polling the vCPU sleeps most of the time ({} ns)",
            v.blocked_ns
        );
        let shared = run(&scenario(1, class, &format!("{host_loop}{guest}")), &[]);
        let v = ent(&shared, "host", "g.v0");
        assert!(
            v.blocked_ns > shared.measured_ns / 2,
            "{class}: beside a host loop the vCPU does not poll ({} ns blocked)",
            v.blocked_ns
        );
    }
}

/// A guest timer wakes the halted vCPU thread, which preempts a host loop by the class's
/// wakeup rule: CFS 5.10 places the sleeper half a latency behind and preempts at once (no
/// wait); with WAKEUP_PREEMPTION off it waits for the loop's tick.
#[test]
fn woken_vcpu_thread_preempts_a_host_loop() {
    let rest = "[[host.process]]\nkind = \"cpu_loop\"\nname = \"hog\"\n\
                [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
                [[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\ninterval_us = 1000\n\
                priority = 90\n";
    for class in CLASSES {
        let r = run(&scenario(1, class, rest), &[]);
        let v = ent(&r, "host", "g.v0");
        assert!(
            v.runs > 500,
            "{class}: the vCPU thread ran {} times",
            v.runs
        );
        assert_eq!(
            v.wait_max_ns, 0,
            "{class}: it preempts the loop at each wake-up"
        );
    }
    let r = run(
        &scenario(1, "cfs", rest),
        &[("host.sched.wakeup_preemption", "false")],
    );
    let v = ent(&r, "host", "g.v0");
    assert!(
        v.wait_mean_ns > 100_000.0,
        "without wakeup preemption it waits for a tick ({} ns)",
        v.wait_mean_ns
    );
}

/// Static prioritising: a SCHED_FIFO vCPU thread runs whenever its guest wants, ahead of any
/// number of nice-0 host loops (which keep only what RT throttling leaves: 5 %).
#[test]
fn fifo_vcpu_thread_beats_host_loops() {
    let rest = "[[host.process]]\nkind = \"cpu_loop\"\nname = \"hog\"\ncopies = 2\n".to_string()
        + &looping_guest("g", "vcpu_policy = \"fifo\"\nvcpu_rt_priority = 10");
    for class in CLASSES {
        let r = run(&scenario(1, class, &rest), &[]);
        let v = ent(&r, "host", "g.v0");
        assert!(
            v.cpu_share > 0.94 && v.cpu_share < 0.96,
            "{class}: the FIFO vCPU thread got {:.3} of the pCPU (RT throttling leaves 5 %)",
            v.cpu_share
        );
        let hogs = ent(&r, "host", "hog.0").running_ns + ent(&r, "host", "hog.1").running_ns;
        assert!(hogs > 0, "{class}: throttling lets the loops run");
    }
}

/// kvm_vcpu_on_spin: a guest of 2 vCPUs on one pCPU whose two tasks take turns at a spinlock.
/// When the holder's vCPU is preempted at the host, the waiter spins; with PAUSE-loop exits the
/// spinner yields to the preempted holder (directed yield), so more critical sections complete
/// than when the spin is not trapped.
#[test]
fn directed_yield_helps_a_preempted_lock_holder() {
    let rest = "[[domain]]\nname = \"g\"\nvcpus = 2\n[domain.sched]\nscheduler = \"cfs\"\n\
                [[domain.workload]]\nkind = \"program\"\nname = \"lock\"\ncopies = 2\n\
                channels = [\"l\"]\ntokens = [1]\ncounters = [\"cs\"]\n\
                steps = [{ op = \"spin\", chan = \"l\", wfe = true }, { op = \"compute\", us = 500 }, \
                { op = \"count\", counter = \"cs\" }, { op = \"signal\", chan = \"l\" }, \
                { op = \"compute\", uniform_us = [200, 800] }, { op = \"loop\", to = 0 }]\n";
    let count = |r: &Results| {
        r.workloads
            .iter()
            .find(|w| w.name == "lock")
            .and_then(|w| w.counters.iter().find(|(n, _)| n == "cs"))
            .map(|(_, v)| *v)
            .expect("the lock workload counts")
    };
    for class in CLASSES {
        let trapped = count(&run(&scenario(1, class, rest), &[]));
        let untrapped = count(&run(
            &scenario(1, class, rest),
            &[("machine.wfe_trap_ns", "0")],
        ));
        assert!(
            trapped as f64 > 1.2 * untrapped as f64,
            "{class}: {trapped} critical sections with directed yield, {untrapped} without"
        );
    }
}

/// The shipped scenario: host processes are reported as tasks of level "host", the vCPU
/// thread as a vCPU there; the run is deterministic.
#[test]
fn shipped_scenario_reports_host_processes() {
    let r = run(SHIPPED, &[]);
    let v = ent(&r, "host", "guest.v0");
    assert_eq!(v.kind, "vcpu");
    for k in 0..2 {
        let h = ent(&r, "host", &format!("hostloop.{k}"));
        assert_eq!(h.kind, "task");
        assert!(h.running_ns > r.measured_ns / 2);
    }
    let w = r
        .workloads
        .iter()
        .find(|w| w.name == "hostloop")
        .expect("the host loops are a workload");
    assert_eq!(w.level, "host");
    let again = run(SHIPPED, &[]);
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        serde_json::to_string(&again).unwrap()
    );
}

/// Bad input: each error names its field.
#[test]
fn errors_name_the_field() {
    let xen = load_err(SHIPPED, &[("machine.hypervisor", "xen")]);
    assert_eq!(xen.field, "host.scheduler", "{xen}");
    let credit2 = "name = \"t\"\n[machine]\npcpus = 2\nhypervisor = \"kvm\"\n\
                   [host]\nscheduler = \"credit2\"\n"
        .to_string()
        + &looping_guest("g", "");
    assert!(
        build::load("t.toml", &credit2, &[]).is_ok(),
        "KVM exits under Xen's Credit2"
    );
    for (f, v) in [
        ("vcpu_nice", "1"),
        ("vcpu_policy", "fifo"),
        ("vcpu_rt_priority", "1"),
    ] {
        let key = format!("domain.0.{f}");
        let e = load_err(&credit2, &[(&key, v)]);
        assert_eq!(e.field, key, "{e}");
    }
    let no_kernel = SHIPPED.replace(
        "scheduler = \"linux\"\n",
        "scheduler = \"linux\"\n[host.sched]\nscheduler = \"eevdf\"\n",
    );
    let e = load_err(&no_kernel, &[]);
    assert_eq!(e.field, "host.sched.kernel", "{e}");
    // A missing top-level table stays the top level's, even beside a nested tagged table.
    let with_sched = no_kernel.replace(
        "scheduler = \"eevdf\"\n#",
        "scheduler = \"eevdf\"\nkernel = \"6.12\"\n#",
    );
    assert!(build::load("t.toml", &with_sched, &[]).is_ok());
    // With its host processes and no domain it is bare metal (docs/validation.md); with
    // neither, the missing table is named.
    let no_domain = &with_sched[..with_sched.find("[[domain]]").expect("a domain")];
    assert!(build::load("t.toml", no_domain, &[]).is_ok());
    let nothing = &with_sched[..with_sched.find("[[host.process]]").expect("a process")];
    assert_eq!(load_err(nothing, &[]).field, "domain");
    let e = load_err(SHIPPED, &[("host.process.0.affinity", "[2]")]);
    assert!(
        e.message.contains("pCPU 2") && e.message.contains("machine has 2 pCPUs"),
        "{e}"
    );
    for (set, field) in [
        (vec![("domain.0.vcpu_nice", "20")], "domain.0.vcpu_nice"),
        (
            vec![("domain.0.vcpu_policy", "fifo")],
            "domain.0.vcpu_rt_priority",
        ),
        (
            vec![("domain.0.vcpu_rt_priority", "5")],
            "domain.0.vcpu_rt_priority",
        ),
        (
            vec![("domain.0.vcpu_policy", "deadline")],
            "domain.0.vcpu_policy",
        ),
        (
            vec![("host.process.0.affinity", "[2]")],
            "host.process.0.affinity",
        ),
        (vec![("host.process.0.nice", "-21")], "host.process.0.nice"),
        (vec![("host.sched.hz", "200")], "host.sched.hz"),
    ] {
        let e = load_err(SHIPPED, &set);
        assert_eq!(e.field, field, "{set:?}: {e}");
    }
}

/// Only a KVM host answers the engine's run-queue length and directed yield: a guest kernel
/// (the same core) answers neither, so the engine asks nothing of guests.
#[test]
fn guest_kernels_answer_no_kvm_hook() {
    use vmsched_core::testkit::{flat, pinned, Harness};
    use vmsched_core::{CpuId, Scheduler, WakeCause, WakeInfo};
    let guest = crate::guest::cfs::Cfs::sched(Default::default(), &flat(1));
    assert_eq!(Scheduler::nr_running(&guest, CpuId(0)), None);
    let mut h = Harness::new(guest, 1, vec![pinned(0, 1, 0), pinned(1, 1, 0)]);
    for e in 0..2 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    let x = h.curr(0).expect("runs");
    assert_eq!(h.yield_to(x, 1 - x), None);
    let host = crate::guest::cfs::Cfs::sched(Default::default(), &flat(1)).into_kvm_host("k");
    assert_eq!(Scheduler::nr_running(&host, CpuId(0)), Some(0));
}

/// The engine's invariants (checked after every event) hold under the KVM host across its
/// options: both classes, static prioritising, an idle host (polling), polling off, PV steal time
/// off with steal accounting on, the KVM/ARM 3.x timer kworker, a host cyclictest and context1
/// as host processes, and a
/// 2-vCPU guest with a spinlock (directed yield) beside host loops on 2 pCPUs with periodic
/// guest ticks.
#[test]
fn invariants_hold_across_options() {
    let lock = "[[domain]]\nname = \"s\"\nvcpus = 2\n[domain.kernel]\ntick = \"periodic\"\n\
                paravirt_time_accounting = true\n[domain.sched]\nscheduler = \"eevdf\"\nkernel = \"6.18\"\n\
                [[domain.workload]]\nkind = \"program\"\nname = \"lock\"\ncopies = 3\n\
                channels = [\"l\"]\ntokens = [1]\n\
                steps = [{ op = \"spin\", chan = \"l\", wfe = true }, { op = \"compute\", us = 300 }, \
                { op = \"signal\", chan = \"l\" }, { op = \"sleep\", exp_us = 400 }, { op = \"loop\", to = 0 }]\n";
    let procs = "[[host.process]]\nkind = \"cyclictest\"\nname = \"hct\"\ninterval_us = 700\n\
                 priority = 5\n[[host.process]]\nkind = \"context1\"\nname = \"hc1\"\n";
    let cases: Vec<(String, Vec<(&str, &str)>)> = vec![
        (SHIPPED.to_string(), vec![]),
        (SHIPPED.to_string(), vec![("host.sched.scheduler", "cfs")]),
        (
            SHIPPED.to_string(),
            vec![
                ("domain.0.vcpu_policy", "rr"),
                ("domain.0.vcpu_rt_priority", "3"),
            ],
        ),
        (SHIPPED.to_string(), vec![("host.process", "[]")]),
        (
            SHIPPED.to_string(),
            vec![("host.process", "[]"), ("machine.halt_poll_ns", "0")],
        ),
        (
            SHIPPED.to_string(),
            vec![
                ("host.steal_time", "false"),
                ("domain.0.kernel.paravirt_time_accounting", "true"),
            ],
        ),
        (SHIPPED.to_string() + lock, vec![]),
        (
            SHIPPED.to_string() + lock,
            vec![("host.sched.scheduler", "cfs"), ("machine.arch", "arm64")],
        ),
        (
            SHIPPED.to_string() + lock,
            vec![
                ("machine.arch", "arm64"),
                ("host.timer_kworker", "true"),
                ("host.timer_kworker_ns", "3000"),
                ("machine.kick_ns", "1000"),
            ],
        ),
        (scenario(2, "cfs", &format!("{procs}{lock}")), vec![]),
        (scenario(2, "eevdf", &format!("{procs}{lock}")), vec![]),
    ];
    for (i, (src, set)) in cases.iter().enumerate() {
        let s = build::load("t.toml", src, &sets(set)).unwrap_or_else(|e| panic!("{i}: {e}"));
        let mut sim = build::build(&s);
        sim.set_debug_checks(true);
        sim.run();
        let r = sim.results();
        for e in &r.entities {
            let sum = e.running_ns + e.runnable_ns + e.blocked_ns + e.offline_ns;
            assert_eq!(sum, r.measured_ns, "case {i}: {} runstates", e.name);
        }
    }
}

/// ERRATA L9 (KVM/ARM 3.x): a guest timer firing while the vCPU is out of guest mode is handed
/// to a nice-0 kworker, which the host must run before the vCPU is kicked. A SCHED_FIFO vCPU
/// thread beside a lower-priority SCHED_FIFO host hog is woken by its timers at once without
/// the kworker (it waits only while RT throttling holds both, at most 50 ms a second); with it,
/// each wake waits for the fair-class kworker, which runs only in those throttled 50 ms, so
/// cyclictest gets about one sample a second, after most of a second.
#[test]
fn timer_kworker_puts_the_host_scheduler_on_the_guest_timer_path() {
    let rest = "[[host.process]]\nkind = \"program\"\nname = \"rthog\"\npolicy = \"fifo\"\n\
                rt_priority = 5\nsteps = [{ op = \"compute\", ms = 10 }, { op = \"loop\", to = 0 }]\n\
                [[domain]]\nname = \"g\"\nvcpus = 1\nvcpu_policy = \"fifo\"\nvcpu_rt_priority = 10\n\
                [domain.sched]\nscheduler = \"cfs\"\n\
                [[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\ninterval_us = 1000\n\
                priority = 90\n";
    let src = scenario(1, "cfs", rest);
    let ct = |r: &Results| {
        let w = r.workloads.iter().find(|w| w.name == "ct").expect("ct");
        (w.histograms[0].1.count, w.histograms[0].1.max_ns)
    };
    let set = |kworker: &'static str| {
        [
            ("machine.arch", "arm64"),
            ("run.duration_ms", "3000"),
            ("host.timer_kworker", kworker),
        ]
    };
    let direct = run(&src, &set("false"));
    let worker = run(&src, &set("true"));
    let ((n_direct, max_direct), (n_worker, max_worker)) = (ct(&direct), ct(&worker));
    assert!(
        max_direct <= 50_000_000 && n_direct > 2000,
        "without the kworker: {n_direct} samples, worst {max_direct} ns"
    );
    assert!(
        n_worker < 10 && max_worker > 500_000_000,
        "with the kworker: {n_worker} samples, worst {max_worker} ns"
    );
    let kw = ent(&worker, "host", "kworker/kvm-arch-timer");
    assert!(kw.runs >= 2, "the kworker ran {} times", kw.runs);
    let e = load_err(&src, &[("host.timer_kworker", "true")]);
    assert_eq!(e.field, "host.timer_kworker", "{e}");
    let e = load_err(
        &src,
        &[("machine.arch", "arm64"), ("host.timer_kworker_ns", "5")],
    );
    assert_eq!(e.field, "host.timer_kworker_ns", "{e}");
}

/// ERRATA L9, one soft timer per exit: KVM/ARM 3.x arms one host hrtimer when the vCPU leaves
/// guest mode, for the guest's compare value (its earliest timer); it queues the kworker's work
/// once and is not re-armed until the vCPU has entered again. A vCPU thread that never halts (a
/// guest loop) and is preempted by a host loop exits only by those preemptions, so the kworker
/// runs at most once per preemption, however many guest timers (cyclictest's 1 ms period, its
/// main thread, the guest's tick) fall in each 10 ms wait.
#[test]
fn timer_kworker_runs_once_per_exit() {
    let src = format!(
        "name = \"t\"\n[run]\nduration_ms = 2000\nwarmup_ms = 100\nseed = 1\nvary = false\n\
         [machine]\npcpus = 1\nhypervisor = \"kvm\"\narch = \"arm64\"\nhalt_poll_ns = 0\n\
         [host]\nscheduler = \"linux\"\nsteal_time = false\ntimer_kworker = true\n\
         [host.sched]\nscheduler = \"cfs\"\nkernel = \"3.17\"\nhz = 200\n\
         [[host.process]]\nkind = \"cpu_loop\"\nname = \"hostloop\"\n\
         {}[domain.kernel]\ntick = \"periodic\"\n\
         [[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\ninterval_us = 1000\n",
        looping_guest("g", "").replace(
            "scheduler = \"cfs\"\n",
            "scheduler = \"cfs\"\nkernel = \"3.17\"\nhz = 200\n"
        )
    );
    let r = run(&src, &[]);
    let v = ent(&r, "host", "g.v0");
    let kw = ent(&r, "host", "kworker/kvm-arch-timer");
    assert!(
        v.preemptions > 50,
        "the vCPU thread was preempted {} times",
        v.preemptions
    );
    assert_eq!(
        v.blocked_ns, 0,
        "a guest loop keeps the vCPU thread runnable"
    );
    assert!(
        kw.runs <= v.preemptions + 1,
        "the kworker ran {} times for {} exits",
        kw.runs,
        v.preemptions
    );
    assert!(
        kw.runs * 10 >= v.preemptions * 9,
        "each wait has a guest timer in it: the kworker ran {} times for {} exits",
        kw.runs,
        v.preemptions
    );
}

mod coord;
mod runtime;
