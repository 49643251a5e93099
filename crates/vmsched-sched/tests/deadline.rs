//! The deadline class (SCHED_DEADLINE; guest/deadline.rs) through whole scenarios: the shipped
//! `deadline_guest` scenario, class order against RT and fair, the runtime bound, validation
//! and admission control with errors naming the field and the task.

use vmsched_core::report::Results;

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;

fn load(src: &str, ov: &[(&str, &str)]) -> Result<vmsched_sched::Scenario, String> {
    run::load("dl.toml", src, ov).map_err(|e| e.to_string())
}

fn run_src(src: &str, ov: &[(&str, &str)]) -> Results {
    run::run("dl.toml", src, ov)
}

fn share(r: &Results, name: &str) -> f64 {
    r.entities
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no entity {name}"))
        .cpu_share
}

const SHIPPED: &str = include_str!("../../../python/vmsched/scenarios/deadline_guest.toml");

/// One guest vCPU on its own pCPU (a pinned host): the guest's scheduler alone decides.
const ONE_VCPU: &str = r#"
[run]
duration_ms = 2000
[machine]
pcpus = 1
[host]
scheduler = "pinned"
[[domain]]
name = "g"
vcpus = 1
[domain.sched]
scheduler = "cfs"
"#;

fn dl_hog(name: &str, q: u64, d: u64, p: u64) -> String {
    format!(
        "\n[[domain.workload]]\nkind = \"program\"\nname = \"{name}\"\npolicy = \"deadline\"\n\
         sched_runtime_ns = {q}\nsched_deadline_ns = {d}\nsched_period_ns = {p}\n\
         steps = [{{ op = \"compute\", ms = 10 }}, {{ op = \"loop\", to = 0 }}]\n"
    )
}

const FIFO_HOG: &str = "\n[[domain.workload]]\nkind = \"program\"\nname = \"rt\"\npolicy = \
                        \"fifo\"\nrt_priority = 99\nsteps = [{ op = \"compute\", ms = 10 }, { op \
                        = \"loop\", to = 0 }]\n";
const FAIR_LOOP: &str = "\n[[domain.workload]]\nkind = \"cpu_loop\"\nname = \"loop\"\n";

/// §3.1 and §3.4.2: a CPU-bound deadline task of 3 ms every 10 ms gets its 30 % above a
/// FIFO-99 hog, and no more (tick enforcement costs at most a tick over the whole run; with
/// HRTICK, exactly); its run time counts against RT throttling's 95 % (Linux v5.10
/// `update_curr_dl`), so the hog gets about 65 % and the fair loop about 5 % (less by the
/// deadline run time of the last throttled window, which is charged to a period the 2 s run
/// does not reach).
#[test]
fn a_reservation_gets_its_bandwidth_above_rt_and_fair() {
    let src = format!(
        "{ONE_VCPU}{}{FIFO_HOG}{FAIR_LOOP}",
        dl_hog("res", 3_000_000, 10_000_000, 10_000_000)
    );
    for hrtick in ["false", "true"] {
        let r = run_src(&src, &[("domain.0.sched.deadline.hrtick", hrtick)]);
        let (d, rt, fair) = (share(&r, "res.0"), share(&r, "rt.0"), share(&r, "loop.0"));
        assert!(
            (0.297..=0.302).contains(&d),
            "hrtick {hrtick}: deadline share {d}"
        );
        assert!(
            (0.645..=0.665).contains(&rt),
            "hrtick {hrtick}: RT share {rt}"
        );
        assert!(
            (0.035..=0.055).contains(&fair),
            "hrtick {hrtick}: fair share {fair}"
        );
    }
}

/// The shipped scenario loads and runs: the reservation gets its 30 %, the periodic task its
/// 0.8 ms of every 5 ms, the FIFO hog is below the deadline tasks and the fair loops run.
#[test]
fn the_shipped_scenario_runs() {
    let r = run_src(SHIPPED, &[]);
    let res = share(&r, "reserve.0");
    let ctl = share(&r, "control.0");
    assert!((0.29..=0.31).contains(&res), "reserve {res}");
    assert!((0.15..=0.16).contains(&ctl), "control {ctl}");
    assert!(share(&r, "rthog.0") > 0.5);
    assert!(share(&r, "loop.0") + share(&r, "loop.1") > 0.0);
}

/// §3.4.1: admission control refuses a set over 95 % of the guest's CPUs, naming the task;
/// with `sched_rt_runtime_us = -1` there is no limit.
#[test]
fn admission_refuses_an_overflowing_set() {
    let src = format!(
        "{ONE_VCPU}{}{}",
        dl_hog("a", 5_000_000, 10_000_000, 10_000_000),
        dl_hog("b", 5_000_000, 10_000_000, 10_000_000)
    );
    let e = load(&src, &[]).unwrap_err();
    assert!(e.contains("domain.0.workload.1.sched_runtime_ns"), "{e}");
    assert!(e.contains("'b.0'"), "{e}");
    assert!(load(&src, &[("domain.0.sched.rt.sched_rt_runtime_us", "-1")]).is_ok());
    let e = load(
        SHIPPED,
        &[
            ("domain.0.vcpus", "1"),
            ("domain.0.workload.1.sched_runtime_ns", "9000000"),
        ],
    )
    .unwrap_err();
    assert!(e.contains("reserve.0"), "{e}");
}

/// `__checkparam_dl`: each bad parameter is refused, naming its field.
#[test]
fn bad_parameters_name_the_field() {
    for (q, d, p, field) in [
        (2_000_000, 1_000_000, 10_000_000, "sched_runtime_ns"),
        (1000, 1_000_000, 10_000_000, "sched_runtime_ns"),
        (1_000_000, 0, 10_000_000, "sched_deadline_ns"),
        (1_000_000, 5_000_000, 4_000_000, "sched_period_ns"),
        (10_000, 50_000, 50_000, "sched_period_ns"),
        (1_000_000, 5_000_000, 5_000_000_000, "sched_period_ns"),
    ] {
        let e = load(&format!("{ONE_VCPU}{}", dl_hog("x", q, d, p)), &[]).unwrap_err();
        assert!(
            e.contains(&format!("domain.0.workload.0.{field}")),
            "({q}, {d}, {p}): {e}"
        );
    }
    // Deadline and period belong to deadline tasks only; a fifo task takes no runtime.
    let e = load(&format!("{ONE_VCPU}{FAIR_LOOP}"), &[]).map(|_| ());
    assert!(e.is_ok());
    let src = format!("{ONE_VCPU}{FIFO_HOG}");
    let e = load(&src, &[("domain.0.workload.0.sched_runtime_ns", "1000000")]).unwrap_err();
    assert!(e.contains("sched_runtime_ns"), "{e}");
    let e = load(&src, &[("domain.0.workload.0.sched_period_ns", "1000000")]).unwrap_err();
    assert!(e.contains("sched_period_ns"), "{e}");
    // A change of class at run time is refused.
    let ev = format!(
        "{ONE_VCPU}{FIFO_HOG}\n[[event]]\nat_ms = 1\naction = \"sched_task\"\ndomain = \"g\"\n\
         workload = \"rt\"\npolicy = \"deadline\"\nrt_priority = 0\n"
    );
    let e = load(&ev, &[]).unwrap_err();
    assert!(e.contains("policy"), "{e}");
}

/// The deadline class sits above RT under EEVDF too: on a 6.12 guest (the fair server instead
/// of RT throttling) the reservation still gets its 30 %, and the fair server, which does not
/// count deadline run time as fair work, gives the fair loop its 5 % from what RT leaves.
#[test]
fn under_eevdf_6_12_with_the_fair_server() {
    let src = format!(
        "{ONE_VCPU}{}{FIFO_HOG}{FAIR_LOOP}",
        dl_hog("res", 3_000_000, 10_000_000, 10_000_000)
    )
    .replace(
        "scheduler = \"cfs\"",
        "scheduler = \"eevdf\"\nkernel = \"6.12\"",
    );
    let r = run_src(&src, &[("domain.0.sched.deadline.hrtick", "true")]);
    let (d, rt, fair) = (share(&r, "res.0"), share(&r, "rt.0"), share(&r, "loop.0"));
    assert!((0.297..=0.302).contains(&d), "deadline share {d}");
    assert!((0.04..=0.06).contains(&fair), "fair share {fair}");
    assert!((0.64..=0.665).contains(&rt), "RT share {rt}");
}
