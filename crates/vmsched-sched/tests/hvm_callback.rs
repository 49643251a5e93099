//! Where an HVM guest's event-channel callback is delivered (ERRATA X9, docs/io.md): Xen 3.3
//! has only the GSI / PCI INTx callback, raised for vCPU 0 alone, so every port of an HVM guest
//! is served on vCPU 0; from Xen 4.1 the per-vCPU vector callback serves a port on the vCPU it
//! is bound to. A PV guest binds where it asks in both eras.

use vmsched_core::report::Results;

/// dom0 and a two-vCPU guest `g` of `guest_type`, whose ping's netfront port asks for vCPU 1;
/// vCPU 0 of the guest runs a hog task pinned to it.
fn src(host: &str, guest_type: &str) -> String {
    format!(
        "[run]\nduration_ms = 300\n[machine]\npcpus = 4\n[host]\n{host}\n\
         [[domain]]\nname = \"dom0\"\nvcpus = 1\ndriver = true\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain]]\nname = \"g\"\nvcpus = 2\nguest_type = \"{guest_type}\"\n\
         [domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"ping\"\nname = \"ping\"\ninterval_us = 10000\nstart_us = 500\nvcpu = 1\n\
         [[domain.workload]]\nkind = \"program\"\nname = \"hog\"\naffinity = [0]\n\
         steps = [{{ op = \"compute\", ms = 1 }}, {{ op = \"loop\", to = 0 }}]\n"
    )
}

fn run(src: &str) -> (Results, Vec<String>) {
    let s = vmsched_sched::load("cb.toml", src, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.run();
    (sim.results(), sim.log().to_vec())
}

fn netfront_vcpu(r: &Results) -> u32 {
    r.ports
        .iter()
        .find(|p| p.level == "g" && p.handler == "netfront:ping")
        .expect("netfront's port")
        .vcpu
}

fn counter(r: &Results, c: &str) -> u64 {
    let w = r.workloads.iter().find(|w| w.name == "ping").unwrap();
    w.counters.iter().find(|(k, _)| k == c).unwrap().1
}

fn running(r: &Results, e: &str) -> u64 {
    r.entities.iter().find(|x| x.name == e).unwrap().running_ns
}

const V3_3: &str = "scheduler = \"credit\"\nversion = \"3.3\"";
const V4_20: &str = "scheduler = \"credit\"\nversion = \"4.20\"";

#[test]
fn xen_3_3_delivers_an_hvm_guests_callback_to_vcpu_0_only() {
    let (r, log) = run(&src(V3_3, "hvm"));
    assert_eq!(netfront_vcpu(&r), 0, "bound to vCPU 0 whatever it asked");
    assert!(
        log.iter()
            .any(|l| l.contains("vCPU 0") && l.contains("Xen 3.3") && l.contains("'ping'")),
        "the run's log says so: {log:?}"
    );
    assert_eq!(counter(&r, "replies"), counter(&r, "requests"));
    assert_eq!(
        running(&r, "g.v1"),
        0,
        "vCPU 1 has nothing to do: the pings are answered on vCPU 0"
    );
}

#[test]
fn xen_4_x_vector_callbacks_and_pv_guests_serve_the_port_on_its_own_vcpu() {
    for (host, ty) in [(V4_20, "hvm"), (V3_3, "pv"), (V4_20, "pv")] {
        let (r, log) = run(&src(host, ty));
        assert_eq!(netfront_vcpu(&r), 1, "{host} {ty}");
        assert!(log.is_empty(), "{host} {ty}: {log:?}");
        assert_eq!(
            counter(&r, "replies"),
            counter(&r, "requests"),
            "{host} {ty}"
        );
        assert!(
            running(&r, "g.v1") > 0,
            "{host} {ty}: vCPU 1 is woken to answer"
        );
    }
    let (r, _) = run(&src("scheduler = \"credit2\"", "hvm"));
    assert_eq!(netfront_vcpu(&r), 1, "credit2 models 4.x");
}
