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
    // A billion tasks: about 6 TB, over any machine's default limit.
    let e = vmsched_sched::run("big.toml", &scenario(1_000_000_000, None), &[]).unwrap_err();
    assert_eq!(e.field, "domain.0.workload.0.copies");
    assert!(e.message.contains("1000000000 tasks"), "{e}");
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
