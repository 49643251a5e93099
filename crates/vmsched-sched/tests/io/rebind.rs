//! Event-channel rebinding at CPU hot-plug (docs/io.md): a guest CPU going offline moves its
//! ports and their pending events to an online vCPU, they stay there when it comes back, a
//! driver domain's CPU takes the NIC and backend ports along, and all of it is deterministic.

use super::*;

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
