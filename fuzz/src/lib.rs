//! Shared pieces of vmsched's fuzz targets (docs/fuzzing.md): the shipped scenarios, the keys an
//! override may name, a structure-aware scenario generator driven by the fuzzer's bytes (the
//! grammar of `random_scenario` in crates/vmsched-sched/tests/hardening.rs), and the checks
//! every target makes on an outcome.

use arbitrary::{Arbitrary, Unstructured};
use vmsched_core::scenario::{ScenarioError, SetValue};

/// The scenarios shipped in python/vmsched/scenarios, as (file name, text).
pub const SHIPPED: [(&str, &str); 3] = [
    (
        "seed000_context1_ratelimit.toml",
        include_str!("../../python/vmsched/scenarios/seed000_context1_ratelimit.toml"),
    ),
    (
        "seed000_ncopy.toml",
        include_str!("../../python/vmsched/scenarios/seed000_ncopy.toml"),
    ),
    (
        "seed000_unpinned.toml",
        include_str!("../../python/vmsched/scenarios/seed000_unpinned.toml"),
    ),
];

/// Keys an override may name (the shipped scenarios' fields and their neighbours); the
/// `overrides` target also draws keys as free text.
pub const KEYS: &[&str] = &[
    "name",
    "description",
    "run.duration_ms",
    "run.warmup_ms",
    "run.seed",
    "run.sample_interval_us",
    "machine.pcpus",
    "machine.arch",
    "machine.sockets",
    "machine.threads_per_core",
    "machine.ipi_latency_ns",
    "machine.ctxsw_cost_ns",
    "machine.vwfi",
    "machine.wfe_trap_ns",
    "host.scheduler",
    "host.version",
    "host.ratelimit_us",
    "host.runqueue",
    "host.migrate_resist_us",
    "host.cap_period_ms",
    "host.smt_power_savings",
    "domain.0.name",
    "domain.0.vcpus",
    "domain.0.weight",
    "domain.0.cap",
    "domain.0.pcpus",
    "domain.0.vcpu_pcpus",
    "domain.0.soft_pcpus",
    "domain.0.kernel.preempt",
    "domain.0.kernel.paravirt_time_accounting",
    "domain.0.kernel.ipi_latency_ns",
    "domain.0.kernel.ctxsw_cost_ns",
    "domain.0.sched.scheduler",
    "domain.0.sched.hz",
    "domain.0.sched.sched_latency_ns",
    "domain.0.sched.sched_min_granularity_ns",
    "domain.0.sched.sched_wakeup_granularity_ns",
    "domain.0.sched.sched_migration_cost_ns",
    "domain.0.sched.sched_tunable_scaling",
    "domain.0.sched.next_buddy",
    "domain.0.sched.last_buddy",
    "domain.0.sched.wakeup_preemption",
    "domain.0.sched.vcpu_is_preempted",
    "domain.0.workload.0.kind",
    "domain.0.workload.0.name",
    "domain.0.workload.0.copies",
    "domain.0.workload.0.nice",
    "domain.0.workload.0.affinity",
    "domain.0.workload.0.pin_each",
    "domain.0.workload.0.jitter_pct",
    "domain.0.workload.0.c_syscall_ns",
    "domain.0.workload.0.c_user_ns",
    "domain.0.workload.1.kind",
    "domain.0.workload.1.copies",
    "domain.1.vcpus",
    "domain.1.pcpus",
    "domain.1.workload.0.copies",
    "domain.1.workload.0.pin_each",
    "domain.1.sched.hz",
    "domain.2.vcpus",
    "domain.0.workload.0.steps",
    "domain.0.workload.0.threads",
    "domain.0.workload.0.interval_us",
    "domain.0.workload.0.histogram_us",
];

/// An override value as the Python front passes it (typed) or the CLI does (text).
#[derive(Arbitrary, Debug)]
pub enum Value {
    Text(String),
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
}

impl Value {
    pub fn into_set(self, depth: u32) -> SetValue {
        match self {
            Value::Text(s) => SetValue::Text(s),
            Value::Bool(b) => SetValue::Bool(b),
            Value::Int(i) => SetValue::Int(i),
            Value::Float(f) => SetValue::Float(f),
            Value::Str(s) => SetValue::Str(s),
            Value::List(v) if depth < 3 => {
                SetValue::List(v.into_iter().take(8).map(|x| x.into_set(depth + 1)).collect())
            }
            Value::List(_) => SetValue::List(vec![]),
        }
    }
}

/// A load error must have a message, and its text must print. (Whether it also names a field
/// or a line is item 1 of issue 18, owned elsewhere; `VMSCHED_FUZZ_LOCATED=1` makes an unlocated
/// error fail too, to find them: docs/fuzzing.md.)
pub fn check_error(e: &ScenarioError, src: &str) {
    assert!(!e.message.is_empty(), "an error without a message: {e:?}\nscenario:\n{src}");
    let _ = e.to_string();
    if located_errors() {
        assert!(
            !e.field.is_empty() || e.line.is_some(),
            "an error names neither field nor line: {e:?}\nscenario:\n{src}"
        );
    }
}

fn located_errors() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("VMSCHED_FUZZ_LOCATED").is_some_and(|v| v == "1"))
}

/// A scenario that fits the `run` target's budget: small enough that a few simulated
/// milliseconds cost milliseconds of fuzzing. (The run length is fixed by override.)
pub fn small_enough(s: &vmsched_sched::Scenario) -> bool {
    use vmsched_core::workload::WorkloadConfig as W;
    s.machine.pcpus <= 16
        && s.domains.len() <= 4
        && s.domains.iter().all(|d| {
            d.vcpus <= 16
                && d.workloads.len() <= 4
                && d.workloads.iter().all(|w| match w {
                    W::CpuLoop(c) => c.copies <= 8,
                    W::Context1(_) => true,
                    W::Cyclictest(c) => c.threads <= 8 && c.histogram_us <= 100_000,
                    W::Program(c) => c.copies <= 8,
                })
        })
}

/// A random scenario over every table, each choice drawn from the fuzzer's bytes: the grammar of
/// `random_scenario` in crates/vmsched-sched/tests/hardening.rs, with values at and past the
/// edges of their ranges. When the bytes run out every further choice is the first option.
pub fn generate(u: &mut Unstructured) -> String {
    let mut pick = |n: u64| -> u64 { u.int_in_range(0..=n - 1).unwrap_or(0) };
    let mut s = String::new();
    let duration = 1 + pick(3);
    s += &format!(
        "[run]\nduration_ms = {duration}\nwarmup_ms = {}\nseed = {}\nsample_interval_us = {}\n",
        pick(duration + 1),
        pick(1 << 40),
        [0, 0, 1, 100, 1000][pick(5) as usize]
    );
    let pcpus = [1, 2, 3, 4, 8, 0, 5][pick(7) as usize];
    let sockets = match pick(8) {
        0 => [2, 3, 64, 0][pick(4) as usize],
        _ if pcpus % 2 == 0 => 1 + pick(2),
        _ => 1,
    };
    let threads = match pick(8) {
        0 => [2, 0, 3][pick(3) as usize],
        _ if sockets > 0 && (pcpus / sockets) % 2 == 0 => 1 + pick(2),
        _ => 1,
    };
    s += &format!(
        "[machine]\npcpus = {pcpus}\narch = \"{}\"\nsockets = {}\nthreads_per_core = {}\n\
         ipi_latency_ns = {}\nctxsw_cost_ns = {}\nvwfi = \"{}\"\nwfe_trap_ns = {}\n",
        ["x86", "arm64"][pick(2) as usize],
        sockets,
        threads,
        [0, 0, 1, 1000, 50_000, 10_000_000][pick(6) as usize],
        [0, 0, 1, 2000, 5_000_000][pick(5) as usize],
        ["trap", "native"][pick(2) as usize],
        [0, 1, 2000][pick(3) as usize],
    );
    if pick(4) == 0 {
        s += "[host]\nscheduler = \"pinned\"\n";
    } else {
        s += &format!(
            "[host]\nscheduler = \"credit2\"\nversion = \"{}\"\nratelimit_us = {}\n\
             runqueue = \"{}\"\nmigrate_resist_us = {}\ncap_period_ms = {}\nsmt_power_savings = {}\n",
            ["4.20.0", "4.20.2", "4.20.4", "4.21", "4.19"][pick(5) as usize],
            [0, 1, 100, 1000, 5000, 500_000][pick(6) as usize],
            ["cpu", "core", "socket", "node", "all"][pick(5) as usize],
            [0, 500, 1_000_000][pick(3) as usize],
            [1, 10, 1000, 0][pick(4) as usize],
            pick(2) == 1,
        );
    }
    for d in 0..1 + pick(3) {
        let vcpus = [1, 2, 3, 4, 0][pick(5) as usize];
        s += &format!(
            "[[domain]]\nname = \"d{d}\"\nvcpus = {vcpus}\nweight = {}\ncap = {}\n",
            [1, 256, 512, 65535, 0][pick(5) as usize],
            [0, 0, 1, 50, 100 * vcpus, 100 * vcpus + 1][pick(6) as usize],
        );
        match pick(5) {
            0 => s += &format!("pcpus = [{}]\n", pick(pcpus.max(1) + 1)),
            1 => s += &format!("soft_pcpus = [{}]\n", pick(pcpus.max(1) + 1)),
            2 if vcpus > 0 => {
                let each: Vec<String> = (0..vcpus)
                    .map(|_| format!("[{}]", pick(pcpus.max(1) + 1)))
                    .collect();
                s += &format!("vcpu_pcpus = [{}]\n", each.join(", "));
            }
            _ => {}
        }
        s += &format!(
            "[domain.kernel]\nparavirt_time_accounting = {}\npreempt = \"{}\"\n\
             ipi_latency_ns = {}\nctxsw_cost_ns = {}\n",
            pick(2) == 1,
            ["none", "full"][pick(2) as usize],
            [0, 1000][pick(2) as usize],
            [0, 1, 3000][pick(3) as usize],
        );
        s += &format!(
            "[domain.sched]\nscheduler = \"cfs\"\nhz = {}\nsched_tunable_scaling = {}\n\
             next_buddy = {}\nlast_buddy = {}\nwakeup_preemption = {}\nvcpu_is_preempted = {}\n\
             sched_migration_cost_ns = {}\n",
            [100, 250, 1000, 10_000, 300][pick(5) as usize],
            pick(4),
            pick(2) == 1,
            pick(2) == 1,
            pick(2) == 1,
            pick(2) == 1,
            [0, 500_000, 4_294_967_295u64][pick(3) as usize],
        );
        if pick(3) == 0 {
            s += &format!(
                "sched_latency_ns = {}\n",
                [100_000, 6_000_000, 1_000_000_000, 1][pick(4) as usize]
            );
        }
        if pick(4) == 0 {
            s += &format!(
                "sched_min_granularity_ns = {}\nsched_wakeup_granularity_ns = {}\n",
                [100_000, 750_000, 1][pick(3) as usize],
                [0, 1_000_000, 1_000_000_000][pick(3) as usize]
            );
        }
        for w in 0..pick(4) {
            let aff = if pick(3) == 0 {
                format!("affinity = [{}]\n", pick(vcpus as u64 + 1))
            } else {
                String::new()
            };
            s += "[[domain.workload]]\n";
            s += &match pick(4) {
                0 => format!(
                    "kind = \"cpu_loop\"\nname = \"w{w}\"\ncopies = {}\nnice = {}\npin_each = {}\n{aff}",
                    pick(4),
                    pick(42) as i64 - 21,
                    pick(2) == 1
                ),
                1 => format!(
                    "kind = \"context1\"\nname = \"w{w}\"\nnice = {}\njitter_pct = {}\n\
                     c_syscall_ns = {}\nc_pipe_rw_ns = {}\nc_wakeup_ns = {}\nc_block_ns = {}\nc_user_ns = {}\n{aff}",
                    pick(40) as i64 - 20,
                    [0, 10, 100, 101][pick(4) as usize],
                    [0, 1, 400][pick(3) as usize],
                    [0, 1000][pick(2) as usize],
                    [0, 2000][pick(2) as usize],
                    [0, 2000][pick(2) as usize],
                    [0, 1, 100][pick(3) as usize],
                ),
                2 => format!(
                    "kind = \"cyclictest\"\nname = \"w{w}\"\nthreads = {}\ninterval_us = {}\n\
                     priority = {}\nhistogram_us = {}\ntimer_slack_ns = {}\nmain_thread = {}\n{aff}",
                    pick(4),
                    [1, 100, 1000, 5000, 0][pick(5) as usize],
                    [0, 1, 99, 100][pick(4) as usize],
                    [1, 100, 5000, 0][pick(4) as usize],
                    [0, 50_000][pick(2) as usize],
                    pick(2) == 1,
                ),
                _ => {
                    let n = 1 + pick(6) as usize;
                    let mut steps: Vec<String> = (0..n)
                        .map(|_| match pick(11) {
                            0 => format!("{{ op = \"compute\", us = {} }}", pick(200)),
                            1 => format!("{{ op = \"compute\", exp_us = {}, kernel = true }}", pick(100)),
                            2 => format!("{{ op = \"sleep\", uniform_us = [{}, {}], slack_ns = {} }}", pick(3), pick(300), [0, 50_000][pick(2) as usize]),
                            3 => format!("{{ op = \"wait\", chan = \"{}\", block_cost_ns = {} }}", ["c", "d", "e"][pick(3) as usize], pick(3000)),
                            4 => format!("{{ op = \"signal\", chan = \"{}\", sync = {}, wake_cost_ns = {} }}", ["c", "d"][pick(2) as usize], pick(2) == 1, pick(3000)),
                            5 => format!("{{ op = \"spin\", chan = \"{}\", wfe = {} }}", ["c", "d"][pick(2) as usize], pick(2) == 1),
                            6 => "{ op = \"yield\" }".to_string(),
                            7 => format!("{{ op = \"count\", counter = \"{}\" }}", ["n", "m"][pick(2) as usize]),
                            8 => format!("{{ op = \"compute\", ns = {} }}", pick(2000)),
                            9 => format!("{{ op = \"sleep\", us = {} }}", pick(50)),
                            _ => format!("{{ op = \"loop\", to = {}, times = {} }}", pick(n as u64 + 1), pick(4)),
                        })
                        .collect();
                    steps.push(match pick(4) {
                        0 => "{ op = \"exit\" }".to_string(),
                        1 => "{ op = \"yield\" }".to_string(),
                        _ => format!("{{ op = \"loop\", to = {} }}", pick(n as u64)),
                    });
                    let policy = ["normal", "batch", "idle", "fifo", "rr"][pick(5) as usize];
                    let prio = match pick(6) {
                        0 => pick(101),
                        _ if matches!(policy, "fifo" | "rr") => 1 + pick(99),
                        _ => 0,
                    };
                    format!(
                        "kind = \"program\"\nname = \"w{w}\"\ncopies = {}\npolicy = \"{policy}\"\n\
                         rt_priority = {prio}\nnice = {}\nchannels = [\"c\", \"d\"]\ntokens = [{}]\n\
                         counters = [\"n\"]\nstart_us = {}\nsteps = [{}]\n{aff}",
                        pick(4),
                        pick(40) as i64 - 20,
                        pick(3),
                        [0, 0, 100, 100_000][pick(4) as usize],
                        steps.join(", ")
                    )
                }
            };
        }
    }
    s
}

/// Loads `src` with the run shortened to `ms` simulated milliseconds (no warm-up); if it
/// validates and is small enough, runs it with the engine's invariant checks on after every
/// event. Panics if the run panics or does not reach its end.
pub fn load_and_run(src: &str, ms: u64) {
    let o = vec![
        ("run.duration_ms".to_string(), ms.to_string()),
        ("run.warmup_ms".to_string(), "0".to_string()),
    ];
    match vmsched_sched::load("fuzz.toml", src, &o) {
        Err(e) => check_error(&e, src),
        Ok(s) => {
            if !small_enough(&s) {
                return;
            }
            let mut sim = vmsched_sched::build(&s);
            sim.set_debug_checks(true);
            sim.run();
            let r = sim.results();
            assert_eq!(r.duration_ns, ms * 1_000_000, "the run stopped early:\n{src}");
        }
    }
}
