//! The HVM device-model round trip (ERRATA X9; docs/io.md): an `ioreq` step blocks the HVM
//! vCPU "in Xen" (offline, not blocked), dom0's device model handles it as kernel work behind
//! an event-channel port, and the completion wakes the vCPU directly through the host
//! scheduler's wake hook; guest events meanwhile do not wake it.

use vmsched_core::report::Results;

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;
use run::ent;

fn load(src: &str, ov: &[(&str, &str)]) -> Result<vmsched_sched::Scenario, String> {
    let ov: Vec<(String, String)> = ov
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vmsched_sched::load("hvm.toml", src, &ov).map_err(|e| e.to_string())
}

fn run(src: &str, ov: &[(&str, &str)]) -> Results {
    let s = load(src, ov).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.run();
    sim.results()
}

fn served(r: &Results, handler: &str) -> u64 {
    r.ports
        .iter()
        .find(|p| p.handler == handler)
        .unwrap_or_else(|| panic!("no port {handler}: {:?}", r.ports))
        .served
}

/// dom0 (driver domain) and an HVM guest `hvm` whose task computes `compute_us` then makes an
/// emulated I/O access, forever; `extra_steps` go before the loop's end, `extra` after the
/// domains.
fn src(host: &str, pcpus: u32, compute_us: u64, extra_steps: &str, extra: &str) -> String {
    format!(
        "[run]\nvary = false\nduration_ms = 100\n[machine]\npcpus = {pcpus}\nkick_ns = 1500\n\
         [host]\n{host}\n\
         [[domain]]\nname = \"dom0\"\nvcpus = 1\ndriver = true\n\
         [domain.sched]\nscheduler = \"cfs\"\n\
         [[domain]]\nname = \"hvm\"\nvcpus = 1\nguest_type = \"hvm\"\n\
         [domain.device_model]\nnotify_ns = 1700\nemulate_ns = 8300\n\
         [domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"program\"\nname = \"io\"\n\
         steps = [{{ op = \"compute\", us = {compute_us} }}, {{ op = \"ioreq\" }}, {extra_steps}\
         {{ op = \"loop\", to = 0 }}]\n{extra}"
    )
}

const CREDIT2: &str = "scheduler = \"credit2\"";
const CREDIT33: &str = "scheduler = \"credit\"\nversion = \"3.3\"";

#[test]
fn an_ioreq_keeps_the_vcpu_offline_in_xen_for_the_device_models_round_trip() {
    for host in [CREDIT2, CREDIT33] {
        let r = run(&src(host, 1, 1000, "", ""), &[]);
        let n = served(&r, "ioreq:hvm.v0");
        assert!(n > 90, "{host}: about one ioreq per ms, got {n}");
        let v = ent(&r, "hvm.v0");
        // Per ioreq: dom0's kick, then its notify + emulate work; the completion's direct wake
        // finds the pCPU free at once (dom0 halts when its upcall ends).
        assert_eq!(v.offline_ns, n * (1500 + 1700 + 8300), "{host}: {v:?}");
        assert_eq!(
            v.blocked_ns, 1500,
            "{host}: blocked only until its first kick at the start, never halted: {v:?}"
        );
        assert_eq!(v.runnable_ns, 0, "{host}: {v:?}");
        let d0 = ent(&r, "dom0.v0");
        assert_eq!(d0.running_ns, n * (1700 + 8300), "{host}: {d0:?}");
        assert_eq!(d0.runs, n, "{host}: dom0 runs once per ioreq");
    }
}

#[test]
fn guest_events_do_not_wake_a_vcpu_blocked_in_xen() {
    // A second task sleeps 300 µs at a time: its timer often expires while the vCPU waits in
    // Xen. The timer is held (the engine's invariant check would catch a runnable vCPU that is
    // blocked in Xen), and every ioreq still takes exactly the device model's round trip.
    let sleeper = "[[domain.workload]]\nkind = \"program\"\nname = \"sleeper\"\n\
                   steps = [{ op = \"sleep\", us = 300, slack_ns = 0 }, \
                   { op = \"compute\", us = 20 }, { op = \"loop\", to = 0 }]\n";
    let s = src(CREDIT2, 1, 200, "", "").replace(
        "{ op = \"loop\", to = 0 }]\n",
        &format!("{{ op = \"loop\", to = 0 }}]\n{sleeper}"),
    );
    let r = run(&s, &[]);
    let n = served(&r, "ioreq:hvm.v0");
    assert!(n > 100, "{n}");
    let v = ent(&r, "hvm.v0");
    assert_eq!(v.offline_ns, n * (1500 + 1700 + 8300), "{v:?}");
    assert_eq!(v.blocked_ns, 1500, "only the start's kick: {v:?}");
}

#[test]
fn the_completion_wake_goes_through_credit1s_wake_hook_boost_then_tickle() {
    // Credit1 3.3, one pCPU, a hog beside dom0 and the HVM guest, which computes 200 µs, makes an
    // emulated access and sleeps 10 ms. With BOOST every wake of the HVM vCPU (its timer and
    // the device model's completion) and of dom0 preempts the hog at once; without it they
    // wait behind the hog's 30 ms slices. The warm-up skips the start, where every vCPU wakes
    // BOOSTed and the hog's first BOOSTed slice holds the pCPU (ERRATA X8).
    let hog = "[[domain]]\nname = \"hog\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
               [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"hog\"\n";
    let s = src(
        CREDIT33,
        1,
        200,
        "{ op = \"sleep\", ms = 10, slack_ns = 0 },",
        hog,
    )
    .replace("duration_ms = 100", "duration_ms = 1000\nwarmup_ms = 100");
    let boost = run(&s, &[]);
    let n = served(&boost, "ioreq:hvm.v0");
    assert!(n > 80, "{n}");
    let v = ent(&boost, "hvm.v0");
    assert_eq!(v.wait_max_ns, 0, "BOOSTed wakes preempt the hog: {v:?}");
    assert_eq!(ent(&boost, "dom0.v0").wait_max_ns, 0);
    assert_eq!(v.offline_ns, n * (1500 + 1700 + 8300), "{v:?}");
    let plain = run(&s, &[("host.boost_on_wake", "false")]);
    let v = ent(&plain, "hvm.v0");
    assert!(
        v.wait_max_ns > 5_000_000,
        "without BOOST the wakes wait behind the hog: {v:?}"
    );
    assert!(
        v.offline_ns > served(&plain, "ioreq:hvm.v0") * (1500 + 1700 + 8300),
        "dom0 waits too, so the vCPU stays offline longer: {v:?}"
    );
}

#[test]
fn ioreq_ports_are_bound_at_the_guests_creation_before_its_backends() {
    // dom0's ports: the NIC (1), then per domain in creation order its vCPUs' ioreq ports and
    // its flows' backends: g1's ping (2), hvm's two ioreq ports (3, 4), then hvm's ping (5).
    let ping = |n: &str| format!("[[domain.workload]]\nkind = \"ping\"\nname = \"{n}\"\n");
    let s = format!(
        "[run]\nvary = false\nduration_ms = 50\n[machine]\npcpus = 2\n[host]\n{CREDIT2}\n\
         [[domain]]\nname = \"dom0\"\nvcpus = 1\ndriver = true\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain]]\nname = \"g1\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n{}\
         [[domain]]\nname = \"hvm\"\nvcpus = 2\nguest_type = \"hvm\"\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"program\"\nname = \"io\"\ncopies = 2\n\
         steps = [{{ op = \"compute\", us = 500 }}, {{ op = \"ioreq\" }}, {{ op = \"loop\", to = 0 }}]\n{}",
        ping("p1"),
        ping("p2")
    );
    let r = run(&s, &[]);
    let dom0: Vec<(u32, &str)> = r
        .ports
        .iter()
        .filter(|p| p.level == "dom0")
        .map(|p| (p.port, p.handler.as_str()))
        .collect();
    assert_eq!(
        dom0,
        vec![
            (1, "nic"),
            (2, "netback:g1/p1"),
            (3, "ioreq:hvm.v0"),
            (4, "ioreq:hvm.v1"),
            (5, "netback:hvm/p2"),
        ]
    );
    assert!(served(&r, "ioreq:hvm.v1") > 50);
}

#[test]
fn an_ioreq_needs_an_hvm_guest_on_xen_x86_and_a_driver_domain() {
    let s = src(CREDIT2, 1, 1000, "", "");
    let err = |s: &str, ov: &[(&str, &str)]| load(s, ov).expect_err("must be refused");
    let e = err(&s.replace("guest_type = \"hvm\"\n", ""), &[]);
    assert!(
        e.contains("domain.1.workload.0.steps") && e.contains("hvm"),
        "{e}"
    );
    let e = err(&s.replace("driver = true\n", ""), &[]);
    assert!(
        e.contains("domain.1.workload.0.steps") && e.contains("driver"),
        "{e}"
    );
    let e = err(&s, &[("domain.1.device_model.emulate_ns", "0")]);
    assert!(e.contains("domain.1.device_model.emulate_ns"), "{e}");
    let e = err(&s, &[("domain.1.device_model.vcpu", "1")]);
    assert!(e.contains("domain.1.device_model.vcpu"), "{e}");
    let e = err(&s, &[("machine.hypervisor", "kvm")]);
    assert!(e.contains("domain.1.workload.0.steps"), "{e}");
}
