//! Cost profiles (`costs = "NAME"` or a path; vmsched_core::scenario::costs): the scenario's own
//! fields win, an unknown name is refused with the shipped ones listed, a profile file is found
//! beside the scenario, and seeds 000 and 003, whose figures moved into the shipped
//! `cortex-a55` and `chromebook-exynos5250` profiles, give the same bytes as with the figures
//! written in the scenario as before.

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;

use std::path::PathBuf;

fn shipped(name: &str) -> (String, String) {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../python/vmsched/scenarios")
        .join(format!("{name}.toml"));
    let src = std::fs::read_to_string(&p).unwrap();
    (p.display().to_string(), src)
}

/// The scenario as it was before its figures moved: no `costs` line, the figures as overrides.
fn without_profile(src: &str) -> String {
    let out: Vec<&str> = src.lines().filter(|l| !l.starts_with("costs = ")).collect();
    assert!(
        out.len() < src.lines().count(),
        "the scenario names a profile"
    );
    out.join("\n")
}

fn results_json(file: &str, src: &str, ov: &[(&str, &str)]) -> String {
    serde_json::to_string(&run::run(file, src, ov)).unwrap()
}

/// Equal bytes, or a panic showing where they part (the whole output is long).
fn assert_same(new: &str, old: &str, what: &str) {
    if let Some(i) = new.bytes().zip(old.bytes()).position(|(a, b)| a != b) {
        let at = |s: &str| s[i.saturating_sub(120)..(i + 80).min(s.len())].to_string();
        panic!(
            "{what} differs at byte {i}:\n new …{}\n old …{}",
            at(new),
            at(old)
        );
    }
    assert_eq!(new.len(), old.len(), "{what}");
}

const SRC: &str = r#"
costs = "cortex-a55"
[run]
duration_ms = 20
[machine]
pcpus = 1
[host]
scheduler = "credit2"
[[domain]]
name = "d"
vcpus = 1
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "context1"
name = "c1"
c_pipe_rw_ns = 777
"#;

#[test]
fn a_profile_fills_what_the_scenario_leaves_out() {
    let s = run::load("t.toml", SRC, &[]).unwrap();
    assert_eq!(
        s.domains[0].kernel.ctxsw_cost_ns, 3000,
        "from the profile's [kernel]"
    );
    let vmsched_core::workload::WorkloadConfig::Context1(c) = &s.domains[0].workloads[0] else {
        panic!("a context1 workload")
    };
    assert_eq!(c.c_pipe_rw_ns, 777, "the scenario's own figure wins");
    assert_eq!(c.c_syscall_ns, 400, "the profile's [workload.context1]");
    // A --set wins over both.
    let s = run::load("t.toml", SRC, &[("domain.0.kernel.ctxsw_cost_ns", "5")]).unwrap();
    assert_eq!(s.domains[0].kernel.ctxsw_cost_ns, 5);
    // And it runs as any scenario does.
    let r = run::run("t.toml", SRC, &[]);
    run::assert_sums(&r);
    assert!(run::ent(&r, "c1.parent").runs > 0);
}

#[test]
fn an_unknown_profile_is_refused_with_the_shipped_names() {
    let src = SRC.replace("\"cortex-a55\"", "\"pentium\"");
    let e = run::load("t.toml", &src, &[]).unwrap_err();
    assert_eq!((e.field.as_str(), e.line), ("costs", Some(2)));
    assert!(
        e.message.contains("unknown cost profile \"pentium\""),
        "{e}"
    );
    for (name, _) in vmsched_core::scenario::costs::SHIPPED {
        assert!(e.message.contains(name), "{e}");
    }
}

#[test]
fn a_profile_file_is_read_beside_the_scenario_and_checked() {
    let dir = std::env::temp_dir().join(format!("vmsched-costs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("here.toml"),
        "[machine]\nctxsw_cost_ns = 1234\n[measured]\ntimer_ns = 9\n",
    )
    .unwrap();
    let scen = dir.join("s.toml");
    let src = SRC.replace("\"cortex-a55\"", "\"here.toml\"");
    std::fs::write(&scen, &src).unwrap();
    let s = run::load(scen.to_str().unwrap(), &src, &[]).unwrap();
    assert_eq!(s.machine.ctxsw_cost_ns, 1234);
    assert_eq!(
        s.domains[0].kernel.ctxsw_cost_ns, 0,
        "this profile has no [kernel]"
    );
    // A field the scenario would refuse is refused from the profile too, naming it.
    std::fs::write(dir.join("here.toml"), "[machine]\nctxsw_cost_nz = 1\n").unwrap();
    let e = run::load(scen.to_str().unwrap(), &src, &[]).unwrap_err();
    assert_eq!(e.field, "costs");
    assert!(e.message.contains("ctxsw_cost_nz"), "{e}");
    std::fs::write(dir.join("here.toml"), "[cpu]\nx = 1\n").unwrap();
    let e = run::load(scen.to_str().unwrap(), &src, &[]).unwrap_err();
    assert!(e.message.contains("unknown table [cpu]"), "{e}");
    let e = run::load(
        "t.toml",
        &SRC.replace("\"cortex-a55\"", "\"nowhere/x.toml\""),
        &[],
    )
    .unwrap_err();
    assert!(e.message.contains("nowhere/x.toml"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Seed 000's scenarios with `costs = "cortex-a55"` run as they did with the figure written in
/// domU1's kernel (3 µs; the Context1 figures were and are the workload's defaults).
#[test]
fn seed000_outputs_are_unchanged_by_the_move_to_its_profile() {
    for name in [
        "seed000_context1_ratelimit",
        "seed000_ncopy",
        "seed000_unpinned",
        "seed000_pair_spinner",
    ] {
        let (file, src) = shipped(name);
        let short = [("run.duration_ms", "1500")];
        let new = results_json(&file, &src, &short);
        let old = results_json(
            &file,
            &without_profile(&src),
            &[short[0], ("domain.0.kernel.ctxsw_cost_ns", "3000")],
        );
        assert_same(&new, &old, name);
    }
}

/// Seed 003 with `costs = "chromebook-exynos5250"` runs as it did with the figures written in
/// its `[machine]` and guest kernel.
#[test]
fn seed003_outputs_are_unchanged_by_the_move_to_its_profile() {
    let (file, src) = shipped("seed003_kvm_latency");
    let short = [("run.duration_ms", "1500")];
    let new = results_json(&file, &src, &short);
    let old = results_json(
        &file,
        &without_profile(&src),
        &[
            short[0],
            ("machine.hypercall_ns", "3100"),
            ("machine.kick_ns", "7000"),
            ("machine.ctxsw_cost_ns", "3000"),
            ("domain.0.kernel.ctxsw_cost_ns", "3000"),
        ],
    );
    assert_same(&new, &old, "seed003_kvm_latency");
}

/// Seeds 001 and 002 name `core2-quad`, seed 004 `xeon-2x4-2.5ghz`; each gives the same bytes
/// as with the figures the scenario carried before the move written in it (seed 001: its HVM
/// guests' qemu-dm costs; seed 002: none, docs/io.md's defaults; seed 004: the 2 µs kick).
#[test]
fn seeds_001_002_004_name_their_profiles_and_are_unchanged_by_the_move() {
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);
    let cases: &[Case] = &[
        (
            "seed001_video_boost_credit",
            "core2-quad",
            &[
                ("domain.2.device_model.notify_ns", "2000"),
                ("domain.2.device_model.emulate_ns", "10000"),
                ("domain.3.device_model.notify_ns", "2000"),
                ("domain.3.device_model.emulate_ns", "10000"),
            ],
        ),
        ("seed002_io_ping", "core2-quad", &[]),
        (
            "seed004_nas_credit_vs_credit2",
            "xeon-2x4-2.5ghz",
            &[("machine.kick_ns", "2000")],
        ),
    ];
    for (name, profile, before) in cases {
        let (file, src) = shipped(name);
        assert!(
            src.contains(&format!("\ncosts = \"{profile}\"\n")),
            "{name} names {profile}"
        );
        let short = [("run.duration_ms", "1500")];
        let new = results_json(&file, &src, &short);
        let mut ov = vec![short[0]];
        ov.extend_from_slice(before);
        let old = results_json(&file, &without_profile(&src), &ov);
        assert_same(&new, &old, name);
    }
}

/// What each new profile puts where: seed 001's device models and seed 004's kick come from
/// the profile, and a field written in the scenario (or set) wins over it.
#[test]
fn the_seed_profiles_fill_their_fields_and_yield_to_the_scenarios() {
    let (file, src) = shipped("seed001_video_boost_credit");
    let s = run::load(&file, &src, &[]).unwrap();
    for d in &s.domains {
        assert_eq!(
            (d.device_model.notify_ns, d.device_model.emulate_ns),
            (2000, 10000),
            "{}",
            d.name
        );
        assert_eq!(
            (d.netback.nic_rx_ns, d.netback.rx_copy_ns, d.netback.tx_ns),
            (2000, 3000, 3000)
        );
    }
    // The scenario's own [domain.device_model] wins over the profile's, field by field.
    let mine = src.replacen(
        "create_at_ms = 1000\n",
        "create_at_ms = 1000\n[domain.device_model]\nemulate_ns = 4000\n",
        1,
    );
    let s = run::load(&file, &mine, &[]).unwrap();
    assert_eq!(s.domains[2].device_model.emulate_ns, 4000, "the scenario's");
    assert_eq!(s.domains[2].device_model.notify_ns, 2000, "the profile's");
    assert_eq!(s.domains[3].device_model.emulate_ns, 10000, "the profile's");

    let (file, src) = shipped("seed004_nas_credit_vs_credit2");
    let s = run::load(&file, &src, &[]).unwrap();
    assert_eq!(s.machine.kick_ns, 2000, "from xeon-2x4-2.5ghz");
    let mine = src.replace("sockets = 2\n", "sockets = 2\nkick_ns = 500\n");
    assert_eq!(run::load(&file, &mine, &[]).unwrap().machine.kick_ns, 500);
    let s = run::load(&file, &src, &[("machine.kick_ns", "7")]).unwrap();
    assert_eq!(s.machine.kick_ns, 7, "a --set wins over both");
    let vmsched_core::workload::WorkloadConfig::Parallel(p) = &s.domains[0].workloads[0] else {
        panic!("seed 004's job")
    };
    assert_eq!((p.send_ns, p.recv_ns, p.shm_ns), (5000, 5000, 1000));
}
