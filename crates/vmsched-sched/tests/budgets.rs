//! The memory budget from Rust (issue 18 item 2; docs/limits.md): `vmsched_sched::run` refuses a
//! scenario whose estimate exceeds its limit before building anything, naming the field; the
//! estimate's parts name the fields that set them.

use vmsched_core::budget::{Estimate, Limit, LimitSource, ENTITY_BYTES, WAIT_HIST_BYTES};

fn scenario(copies: u64, limit_mb: Option<u64>) -> String {
    let limit = limit_mb.map_or(String::new(), |m| format!("memory_limit_mb = {m}\n"));
    format!(
        "[run]\nduration_ms = 2\n{limit}[machine]\npcpus = 2\n[host]\nscheduler = \"credit2\"\n\
         [[domain]]\nname = \"d\"\nvcpus = 2\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"l\"\ncopies = {copies}\n"
    )
}

#[test]
fn run_refuses_a_scenario_over_its_limit_naming_the_field() {
    // As many tasks as a Linux kernel can hold: about 20 GB, over a 16 GB limit.
    let n = vmsched_core::workload::PID_MAX_LIMIT;
    let e = vmsched_sched::run("big.toml", &scenario(n, Some(16_000)), &[]).unwrap_err();
    assert_eq!(e.field, "domain.0.workload.0.copies");
    assert!(e.message.contains(&format!("{n} tasks")), "{e}");
    // The scenario's own limit, lowered below a small run's needs.
    let e = vmsched_sched::run("s.toml", &scenario(1000, Some(1)), &[]).unwrap_err();
    assert!(
        e.message
            .contains("the limit of 1 MB (run.memory_limit_mb)"),
        "{e}"
    );
    // And raised, the same run goes.
    assert!(vmsched_sched::run("s.toml", &scenario(1000, Some(1000)), &[]).is_ok());
}

#[test]
fn the_estimate_grows_with_the_field_it_names() {
    let est = |copies| {
        let s = vmsched_sched::load("s.toml", &scenario(copies, None), &[]).unwrap();
        Estimate::of(&s, None)
    };
    let (small, big) = (est(10), est(10_000));
    assert_eq!(big.largest.field, "domain.0.workload.0.copies");
    let grew = big.memory_bytes - small.memory_bytes;
    // 9,990 more tasks, each an entity with its wait histogram (about 6 KB).
    assert!(
        (9_990 * (WAIT_HIST_BYTES + ENTITY_BYTES)..9_990 * 8 * 1024).contains(&grew),
        "{grew}"
    );
    let limit = Limit {
        bytes: big.memory_bytes - 1,
        source: LimitSource::Option,
    };
    let (field, msg) = big.check(&limit).unwrap_err();
    assert_eq!(field, "domain.0.workload.0.copies");
    assert!(msg.contains("memory_limit_mb option"), "{msg}");
}

#[test]
fn a_kernel_holds_at_most_pid_max_limit_tasks() {
    // Refused when loaded, before the budget and before any task is built: a billion copies
    // fail at once (building them to check an event's task name once took 20 GB).
    let n = vmsched_core::workload::PID_MAX_LIMIT;
    let e = vmsched_sched::load("big.toml", &scenario(1_000_000_000, None), &[]).unwrap_err();
    assert_eq!(e.field, "domain.0.workload.0.copies");
    assert!(e.message.contains("PID_MAX_LIMIT"), "{e}");
    assert!(vmsched_sched::load("s.toml", &scenario(n, None), &[]).is_ok());
    let e = vmsched_sched::load("s.toml", &scenario(n + 1, None), &[]).unwrap_err();
    assert_eq!(e.field, "domain.0.workload.0.copies");
    // The limit is per kernel: the workloads of one guest add up, and the error names the one
    // that declares the most.
    let two = format!(
        "{}[[domain.workload]]\nkind = \"cpu_loop\"\nname = \"m\"\ncopies = {}\n",
        scenario(n / 4, None),
        n
    );
    let e = vmsched_sched::load("s.toml", &two, &[]).unwrap_err();
    assert_eq!(e.field, "domain.0.workload.1.copies");
    assert!(e.message.contains(&format!("{} tasks", n + n / 4)), "{e}");
    // A KVM host's processes are one kernel too.
    let host = format!(
        "[run]\nduration_ms = 2\n[machine]\npcpus = 2\nhypervisor = \"kvm\"\n[host]\nscheduler = \"linux\"\n\
         [[host.process]]\nkind = \"cpu_loop\"\nname = \"p\"\ncopies = {}\n",
        n + 1
    );
    let e = vmsched_sched::load("h.toml", &host, &[]).unwrap_err();
    assert_eq!(e.field, "host.process.0.copies", "{e}");
}
