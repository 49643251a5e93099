//! Shared pieces of vmsched's fuzz targets (docs/fuzzing.md): the shipped scenarios, the keys an
//! override may name, a structure-aware scenario generator driven by the fuzzer's bytes (the
//! grammar of `random_scenario` in crates/vmsched-sched/tests/hardening.rs), and the checks
//! every target makes on an outcome.

use arbitrary::{Arbitrary, Unstructured};
use vmsched_core::scenario::{ScenarioError, SetValue};

mod inputs;
pub use inputs::{KEYS, SHIPPED};

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
            Value::List(v) if depth < 3 => SetValue::List(
                v.into_iter()
                    .take(8)
                    .map(|x| x.into_set(depth + 1))
                    .collect(),
            ),
            Value::List(_) => SetValue::List(vec![]),
        }
    }
}

/// A load error must have a message, and its text must print. (Whether it also names a field
/// or a line is item 1 of issue 18, owned elsewhere; `VMSCHED_FUZZ_LOCATED=1` makes an unlocated
/// error fail too, to find them: docs/fuzzing.md.)
pub fn check_error(e: &ScenarioError, src: &str) {
    assert!(
        !e.message.is_empty(),
        "an error without a message: {e:?}\nscenario:\n{src}"
    );
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
                    // A flood of requests is a packet per interval: keep it to a few thousand.
                    W::Ping(p) => p.interval_us >= 10,
                    W::Stream(p) => p.rate_mbps <= 10_000,
                    // At most 1000 frames and 1000 sound periods a second.
                    W::Video(_) => true,
                    // Bursts of a few µs are a round per few µs per vCPU.
                    W::VmBoot(b) => b.burst_us >= 10,
                    // A job's ranks run through a finite program; its compute phases bound
                    // its message rate (a few ranks, phases of at least 10 µs).
                    W::Parallel(j) => {
                        j.placement.iter().map(|p| p.ranks).sum::<u32>() <= 16
                            && j.compute_us.is_none_or(|c| c >= 10)
                    }
                    // A launch is `reads` chunks of at least a µs; a few launches in a row.
                    W::Startup(c) => c.reads <= 10_000 && c.work_us >= 10,
                    // One acquisition per critical section: keep it to a µs or more.
                    W::Spinlock(c) => c.threads.is_none_or(|t| t <= 16) && c.cs_ns >= 1_000,
                    // A recorded program ends: its length is its steps, a few thousand here.
                    W::Replay(r) => r.tasks.len() <= 16 && r.step_count() <= 100_000,
                })
        })
}

/// A random scenario over every table, each choice drawn from the fuzzer's bytes: the grammar of
/// `random_scenario` in crates/vmsched-sched/tests/hardening.rs, with values at and past the
/// edges of their ranges. When the bytes run out every further choice is the first option. The
/// Credit1 host (either era), the `[[event]]` timeline, the hypervisor seam, seed 001's workloads,
/// the Linux classes (EEVDF, RT) and the RTDS/null/ARINC653 hosts are drawn last, in that order,
/// after the domains, so inputs written before each was added keep their scenario.
pub fn generate(u: &mut Unstructured) -> String {
    let mut p = Pick(u);
    let mut s = String::new();
    let duration = 1 + p.pick(3);
    let warm = p.pick(duration);
    s += &format!(
        "[run]\nduration_ms = {duration}\nwarmup_ms = {}\nseed = {}\nsample_interval_us = {}\n",
        p.among(&[0, warm], &[duration]),
        p.pick(1 << 40),
        [0, 0, 1, 100, 1000][p.pick(5) as usize]
    );
    let pcpus = p.among(&[1, 2, 3, 4, 8], &[0, 5]);
    let sockets = match p.pick(8) {
        7 => p.among(&[2, 3], &[64, 0]),
        _ if pcpus % 2 == 0 => 1 + p.pick(2),
        _ => 1,
    };
    let threads = match p.pick(8) {
        7 => p.among(&[2], &[0, 3]),
        _ if sockets > 0 && (pcpus / sockets) % 2 == 0 => 1 + p.pick(2),
        _ => 1,
    };
    let arch = ["x86", "arm64"][p.pick(2) as usize];
    let (ipi, ctxsw) = (
        p.among(&[0, 0, 1, 1000, 50_000], &[10_000_000]),
        p.among(&[0, 0, 1, 2000], &[5_000_000]),
    );
    // "native" is an Arm option (refused on x86 since the hypervisor seam): x86 keeps the draw,
    // so later choices keep their bytes, and traps.
    let vwfi = match (arch, p.pick(2)) {
        ("arm64", 1) => "native",
        _ => "trap",
    };
    s += &format!(
        "[machine]\npcpus = {pcpus}\narch = \"{arch}\"\nsockets = {}\nthreads_per_core = {}\n\
         ipi_latency_ns = {ipi}\nctxsw_cost_ns = {ctxsw}\nvwfi = \"{vwfi}\"\nwfe_trap_ns = {}\n",
        sockets,
        threads,
        [0, 1, 2000][p.pick(3) as usize],
    );
    let host_at = s.len();
    let pinned = p.pick(4) == 0;
    if pinned {
        s += "[host]\nscheduler = \"pinned\"\n";
    } else {
        s += &format!(
            "[host]\nscheduler = \"credit2\"\nversion = \"{}\"\nratelimit_us = {}\n\
             runqueue = \"{}\"\nmigrate_resist_us = {}\ncap_period_ms = {}\nsmt_power_savings = {}\n",
            p.among(&["4.20.0", "4.20.2", "4.20.4", "4.21"], &["4.19"]),
            p.among(&[0, 100, 1000, 5000], &[1, 500_000]),
            ["cpu", "core", "socket", "node", "all"][p.pick(5) as usize],
            [0, 500, 1_000_000][p.pick(3) as usize],
            p.among(&[1, 10, 1000], &[0]),
            p.pick(2) == 1,
        );
    }
    let host_end = s.len();
    let mut doms = Vec::new();
    for d in 0..1 + p.pick(3) {
        let vcpus = p.among(&[1, 2, 3, 4], &[0]);
        doms.push(vcpus);
        s += &format!(
            "[[domain]]\nname = \"d{d}\"\nvcpus = {vcpus}\nweight = {}\ncap = {}\n",
            p.among(&[1, 256, 512, 65535], &[0]),
            p.among(&[0, 0, 1, 50, 100 * vcpus], &[100 * vcpus + 1]),
        );
        match p.pick(5) {
            0 => s += &format!("pcpus = [{}]\n", p.index(pcpus)),
            1 => s += &format!("soft_pcpus = [{}]\n", p.index(pcpus)),
            2 if vcpus > 0 => {
                let each: Vec<String> = (0..vcpus)
                    .map(|_| format!("[{}]", p.index(pcpus)))
                    .collect();
                s += &format!("vcpu_pcpus = [{}]\n", each.join(", "));
            }
            _ => {}
        }
        s += &format!(
            "[domain.kernel]\nparavirt_time_accounting = {}\npreempt = \"{}\"\n\
             ipi_latency_ns = {}\nctxsw_cost_ns = {}\n",
            p.pick(2) == 1,
            ["none", "full"][p.pick(2) as usize],
            [0, 1000][p.pick(2) as usize],
            [0, 1, 3000][p.pick(3) as usize],
        );
        s += &format!(
            "[domain.sched]\nscheduler = \"cfs\"\nhz = {}\nsched_tunable_scaling = {}\n\
             next_buddy = {}\nlast_buddy = {}\nwakeup_preemption = {}\nvcpu_is_preempted = {}\n\
             sched_migration_cost_ns = {}\n",
            p.among(&[100, 250, 1000, 300], &[24]),
            p.among(&[0, 1, 2], &[3]),
            p.pick(2) == 1,
            p.pick(2) == 1,
            p.pick(2) == 1,
            p.pick(2) == 1,
            [0, 500_000, 4_294_967_295u64][p.pick(3) as usize],
        );
        if p.pick(3) == 0 {
            s += &format!(
                "sched_latency_ns = {}\n",
                p.among(&[100_000, 6_000_000, 1_000_000_000], &[1])
            );
        }
        if p.pick(4) == 0 {
            s += &format!(
                "sched_min_granularity_ns = {}\nsched_wakeup_granularity_ns = {}\n",
                p.among(&[100_000, 750_000], &[1]),
                [0, 1_000_000, 1_000_000_000][p.pick(3) as usize]
            );
        }
        for w in 0..p.pick(4) {
            let aff = if p.pick(3) == 0 {
                format!("affinity = [{}]\n", p.index(vcpus))
            } else {
                String::new()
            };
            s += "[[domain.workload]]\n";
            s += &match p.pick(4) {
                0 => format!(
                    "kind = \"cpu_loop\"\nname = \"w{w}\"\ncopies = {}\nnice = {}\npin_each = {}\n{aff}",
                    p.among(&[1, 2, 3], &[0]),
                    p.pick(42) as i64 - 21,
                    p.pick(2) == 1
                ),
                1 => format!(
                    "kind = \"context1\"\nname = \"w{w}\"\nnice = {}\njitter_pct = {}\n\
                     c_syscall_ns = {}\nc_pipe_rw_ns = {}\nc_wakeup_ns = {}\nc_block_ns = {}\nc_user_ns = {}\n{aff}",
                    p.pick(40) as i64 - 20,
                    p.among(&[0, 10, 100], &[101]),
                    [0, 1, 400][p.pick(3) as usize],
                    [0, 1000][p.pick(2) as usize],
                    [0, 2000][p.pick(2) as usize],
                    [0, 2000][p.pick(2) as usize],
                    p.among(&[1, 100], &[0]),
                ),
                2 => format!(
                    "kind = \"cyclictest\"\nname = \"w{w}\"\nthreads = {}\ninterval_us = {}\n\
                     priority = {}\nhistogram_us = {}\ntimer_slack_ns = {}\nmain_thread = {}\n{aff}",
                    p.among(&[1, 2, 3], &[0]),
                    p.among(&[1, 100, 1000, 5000], &[0]),
                    p.among(&[0, 1, 99], &[100]),
                    p.among(&[1, 100, 5000], &[0]),
                    [0, 50_000][p.pick(2) as usize],
                    p.pick(2) == 1,
                ),
                _ => {
                    let n = 1 + p.pick(6) as usize;
                    let mut steps: Vec<String> = (0..n)
                        .map(|_| match p.pick(11) {
                            0 => format!("{{ op = \"compute\", us = {} }}", p.pick(200)),
                            1 => format!("{{ op = \"compute\", exp_us = {}, kernel = true }}", p.pick(100)),
                            2 => format!("{{ op = \"sleep\", uniform_us = [{}, {}], slack_ns = {} }}", p.pick(3), p.pick(300), [0, 50_000][p.pick(2) as usize]),
                            3 => format!("{{ op = \"wait\", chan = \"{}\", block_cost_ns = {} }}", ["c", "d", "e"][p.pick(3) as usize], p.pick(3000)),
                            4 => format!("{{ op = \"signal\", chan = \"{}\", sync = {}, wake_cost_ns = {} }}", ["c", "d"][p.pick(2) as usize], p.pick(2) == 1, p.pick(3000)),
                            5 => format!("{{ op = \"spin\", chan = \"{}\", wfe = {} }}", ["c", "d"][p.pick(2) as usize], p.pick(2) == 1),
                            6 => "{ op = \"yield\" }".to_string(),
                            7 => format!("{{ op = \"count\", counter = \"{}\" }}", ["n", "m"][p.pick(2) as usize]),
                            8 => format!("{{ op = \"compute\", ns = {} }}", p.pick(2000)),
                            9 => format!("{{ op = \"sleep\", us = {} }}", p.pick(50)),
                            _ => format!("{{ op = \"loop\", to = {}, times = {} }}", p.pick(n as u64 + 1), p.pick(4)),
                        })
                        .collect();
                    steps.push(match p.pick(4) {
                        0 => "{ op = \"exit\" }".to_string(),
                        1 => "{ op = \"yield\" }".to_string(),
                        _ => format!("{{ op = \"loop\", to = {} }}", p.pick(n as u64)),
                    });
                    let policy = ["normal", "batch", "idle", "fifo", "rr"][p.pick(5) as usize];
                    let prio = match p.pick(6) {
                        0 => p.pick(101),
                        _ if matches!(policy, "fifo" | "rr") => 1 + p.pick(99),
                        _ => 0,
                    };
                    format!(
                        "kind = \"program\"\nname = \"w{w}\"\ncopies = {}\npolicy = \"{policy}\"\n\
                         rt_priority = {prio}\nnice = {}\nchannels = [\"c\", \"d\"]\ntokens = [{}]\n\
                         counters = [\"n\"]\nstart_us = {}\nsteps = [{}]\n{aff}",
                        p.among(&[1, 2, 3], &[0]),
                        p.pick(40) as i64 - 20,
                        p.pick(3),
                        [0, 0, 100, 100_000][p.pick(4) as usize],
                        steps.join(", ")
                    )
                }
            };
        }
    }
    // Appended choices: drawn after every earlier one, so an input written for the generator
    // before them keeps its scenario (with no bytes left each is its first option: no change).
    let mut host = if pinned { Host::Pinned } else { Host::Credit2 };
    if !pinned {
        if let Some((h, text)) = credit1_host(&mut p) {
            s.replace_range(host_at..host_end, &text);
            host = h;
        }
    }
    timeline(&mut p, &mut s, host, duration, pcpus, &doms);
    hypervisor(&mut p, &mut s, host_at, doms.len());
    seed001_workload(&mut p, &mut s);
    linux_classes(&mut p, &mut s, doms.len());
    xen_family(&mut p, &mut s, pinned, &doms);
    credit2_4_2(&mut p, &mut s);
    historic_host(&mut p, &mut s, &doms);
    bfs_guests(&mut p, &mut s, doms.len());
    deadline_tasks(&mut p, &mut s, doms.len());
    kvm_host(&mut p, &mut s, doms.len());
    parallel_job(&mut p, &mut s, &doms);
    session24(&mut p, &mut s, &doms);
    s
}

/// The hypervisor seam as `hardening.rs` draws it: `[machine] hypervisor` (Xen or KVM) with its
/// kick and hypercall costs and KVM's halt-polling window, and now and then a domain's
/// `guest_type` (PV is refused outside Xen on x86). `machine_end`: where `[machine]` ends. First
/// option: nothing added.
fn hypervisor(p: &mut Pick, s: &mut String, machine_end: usize, ndoms: usize) {
    if p.pick(2) == 0 {
        return;
    }
    let kvm = p.pick(2) == 1;
    let mut m = format!(
        "hypervisor = \"{}\"\nkick_ns = {}\nhypercall_ns = {}\n",
        if kvm { "kvm" } else { "xen" },
        p.among(&[0, 1, 20_000], &[u64::MAX]),
        p.among(&[0, 1, 5_000], &[u64::MAX]),
    );
    if kvm && p.pick(2) == 0 {
        m += &format!(
            "halt_poll_ns = {}\n",
            p.among(&[0, 1, 50_000, 1_000_000], &[u64::MAX])
        );
    }
    for d in 0..ndoms {
        if p.pick(3) == 0 {
            let name = format!("name = \"d{d}\"\n");
            let typed = format!(
                "{name}guest_type = \"{}\"\n",
                ["pv", "hvm"][p.pick(2) as usize]
            );
            *s = s.replacen(&name, &typed, 1);
        }
    }
    s.insert_str(machine_end, &m);
}

/// Appended choice: a video player (with or without sound) or a boot in the last domain (seed
/// 001's workloads, workload/video.rs and vmboot.rs), with periods short enough to act within
/// the target's 2 ms. `[[domain.workload]]` after the timeline's tables belongs to the last
/// `[[domain]]`.
fn seed001_workload(p: &mut Pick, s: &mut String) {
    match p.pick(3) {
        0 => {}
        1 => {
            *s += &format!(
                "[[domain.workload]]\nkind = \"video\"\nname = \"fuzz_video\"\nfps = {}\n\
                 decode_us = {}\ndecode_spread_pct = {}\nlate = \"{}\"\nmax_lateness_us = {}\n\
                 audio_period_us = {}\naudio_us = {}\n",
                p.among(&[1000u64, 500, 30], &[0, 1, 1001]),
                p.among(&[1, 500, 3000], &[0]),
                p.among(&[0, 40, 100], &[101]),
                ["drop", "show"][p.pick(2) as usize],
                p.among(&[0, 100, 20_000], &[1u64 << 40]),
                p.among(&[0, 1000, 1500], &[1, 999]),
                p.among(&[200, 900], &[0]),
            )
        }
        _ => {
            *s += &format!(
                "[[domain.workload]]\nkind = \"vmboot\"\nname = \"fuzz_boot\"\n\
                 duration_ms = {}\nburst_us = {}\nio_us = {}\nap_start_ms = {}\n",
                p.among(&[1, 2, 20_000], &[0]),
                p.among(&[100, 1000, 20_000], &[0]),
                p.among(&[0, 50, 1000], &[1u64 << 50]),
                p.among(&[0], &[1, 5]),
            )
        }
    }
}

/// The host scheduler drawn, for the timeline's choices.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Host {
    Pinned,
    Credit2,
    Credit33,
    Credit4,
}

/// `[host]` of Xen Credit1, or None (first option: keep the Credit2 host drawn before). One time
/// in 32 one field takes an edge value (past its range, or an option the release lacks), to be
/// refused.
fn credit1_host(p: &mut Pick) -> Option<(Host, String)> {
    let (host, version) = match p.pick(3) {
        0 => return None,
        1 => (Host::Credit33, "3.3"),
        _ => (Host::Credit4, ["4.20", "4.18", "4.19"][p.pick(3) as usize]),
    };
    let bad = (p.pick(32) == 31).then(|| p.pick(6));
    // Field `f`'s value: one of `usual`, or of `edge` if `f` is the broken one.
    let mut or = |f: u64, usual: &[u64], edge: &[u64]| {
        let v = if bad == Some(f) { edge } else { usual };
        v[p.pick(v.len() as u64) as usize]
    };
    let mut s = format!(
        "[host]\nscheduler = \"credit\"\nversion = \"{}\"\nsmt_power_savings = {}\n",
        if bad == Some(0) { "4.17" } else { version },
        or(9, &[0, 1], &[]) == 1,
    );
    if host == Host::Credit33 && bad.is_some() {
        s += "tslice_ms = 10\n";
    }
    if host == Host::Credit4 {
        s += &format!(
            "tslice_ms = {}\nratelimit_us = {}\ntickle_one_idle_cpu = {}\n\
             vcpu_migration_delay_us = {}\nload_balance_ratelimit_us = {}\n",
            or(1, &[30, 1, 5, 1000], &[0, 1001]),
            or(2, &[1000, 0, 100, 5000], &[1, 500_001]),
            or(9, &[1, 0], &[]) == 1,
            or(3, &[0, 1000, 100_000], &[100_001]),
            or(4, &[1000, 0, 1_000_000], &[1_000_001]),
        );
    }
    s += &format!(
        "timer_slop_ns = {}\ntimer_entry_ns = {}\n",
        or(9, &[50_000, 0, 1], &[]),
        or(5, &[1000, 0], &[1_000_001]),
    );
    Some((host, s))
}

/// Up to four `[[event]]`s at 0 or 1 ms (the `run` target's runs last 2 ms; only 0 if the file
/// says 1 ms, which the events are checked against): a domain's weight and cap, a pause or
/// unpause, a pCPU or a guest CPU offline or back online, a scheduler-wide change the host takes. A valid timeline by construction, but one time in 32 one of its
/// events takes edge values (a CPU 0 or past the last one, a domain that does not exist, a time
/// past the end, values past their ranges), and one time in 32 the pinned host, which takes no
/// event, gets events too.
fn timeline(p: &mut Pick, s: &mut String, host: Host, duration: u64, pcpus: u64, doms: &[u64]) {
    let n = p.pick(5);
    if host == Host::Pinned && !p.among(&[false], &[true]) {
        return;
    }
    let bad = (p.pick(32) == 31).then(|| p.pick(n.max(1)));
    let mut t = 0;
    let mut host_on = vec![true; pcpus as usize];
    let mut guest_on: Vec<Vec<bool>> = doms.iter().map(|&v| vec![true; v as usize]).collect();
    let mut paused = vec![false; doms.len()];
    for k in 0..n {
        let e = bad == Some(k);
        // One of `usual`, or of `edge` in the edge event.
        let mut or = |usual: &[u64], edge: &[u64]| {
            let v = if e { edge } else { usual };
            v[p.pick(v.len() as u64) as usize]
        };
        let last = duration.clamp(1, 2) - 1;
        t = (t + or(&[0, 1], &[2])).min(if e { 2 } else { last });
        let at = t;
        let all: Vec<u64> = (0..doms.len() as u64).collect();
        let d = or(&all, &[doms.len() as u64]) as usize;
        let dom = format!("d{d}");
        let ev = match or(&[0, 1, 2, 3, 4], &[0, 1, 2, 3, 4]) {
            0 => {
                let mut ev = format!("action = \"sched_domain\"\ndomain = \"{dom}\"\n");
                match or(&[0, 1, 2], &[0, 1, 2]) {
                    0 => ev += &format!("weight = {}\n", or(&[128, 256, 1024], &[0, 65536])),
                    1 => ev += &format!("cap = {}\n", or(&[0, 10, 50, 100], &[100_000])),
                    _ => ev += "weight = 512\ncap = 0\n",
                }
                ev
            }
            1 => {
                let on = paused.get_mut(d).is_some_and(|x| {
                    *x = !*x;
                    *x
                });
                let action = if on { "pause" } else { "unpause" };
                format!("action = \"{action}\"\ndomain = \"{dom}\"\n")
            }
            2 if e || pcpus > 1 => {
                let cpus: Vec<u64> = (1..pcpus.max(2)).collect();
                let c = or(&cpus, &[0, pcpus]);
                let action = match host_on.get_mut(c as usize) {
                    Some(on) if !e => {
                        *on = !*on;
                        if *on {
                            "cpu_online"
                        } else {
                            "cpu_offline"
                        }
                    }
                    _ => "cpu_offline",
                };
                format!("action = \"{action}\"\ncpu = {c}\n")
            }
            3 if e || doms.get(d).is_some_and(|&v| v > 1) => {
                let v = doms.get(d).copied().unwrap_or(1);
                let cpus: Vec<u64> = (1..v.max(2)).collect();
                let c = or(&cpus, &[0, v]);
                let on = guest_on
                    .get_mut(d)
                    .and_then(|g| g.get_mut(c as usize))
                    .is_some_and(|on| {
                        *on = !*on;
                        *on
                    });
                let action = if on { "cpu_online" } else { "cpu_offline" };
                format!("action = \"{action}\"\ndomain = \"{dom}\"\ncpu = {c}\n")
            }
            2 | 3 => continue,
            _ if host == Host::Credit33 && !e => continue,
            _ => match or(&[0, 1], &[0, 1]) {
                0 => format!(
                    "action = \"sched_host\"\nratelimit_us = {}\n",
                    or(&[0, 100, 1000], &[1, 500_001])
                ),
                _ if host == Host::Credit2 && !e => continue,
                _ => format!(
                    "action = \"sched_host\"\ntslice_ms = {}\n",
                    or(&[1, 10, 30], &[0, 1001])
                ),
            },
        };
        *s += &format!("[[event]]\nat_ms = {at}\n{ev}");
    }
}

/// The fuzzer's choices. `among` takes an edge value (one the validator should refuse, or one at
/// the limit) one time in 32, so most scenarios validate and run.
struct Pick<'a, 'b>(&'a mut Unstructured<'b>);

impl Pick<'_, '_> {
    fn pick(&mut self, n: u64) -> u64 {
        self.0.int_in_range(0..=n - 1).unwrap_or(0)
    }
    /// An index below `n`, or (the edge) `n` itself.
    fn index(&mut self, n: u64) -> u64 {
        let i = self.pick(n.max(1));
        self.among(&[i], &[n])
    }
    fn among<T: Copy>(&mut self, usual: &[T], edge: &[T]) -> T {
        if !edge.is_empty() && self.pick(32) == 31 {
            edge[self.pick(edge.len() as u64) as usize]
        } else {
            usual[self.pick(usual.len() as u64) as usize]
        }
    }
    /// As `among`, but the edge one time in 256: the appended tables (`linux_classes`,
    /// `xen_family`) have about eight such fields each, so one of them is at an edge about one
    /// time in 32, as `credit1_host` breaks one field of its table.
    fn rare<T: Copy>(&mut self, usual: &[T], edge: &[T]) -> T {
        if !edge.is_empty() && self.pick(256) == 255 {
            edge[self.pick(edge.len() as u64) as usize]
        } else {
            usual[self.pick(usual.len() as u64) as usize]
        }
    }
}

/// The overrides that cut a run to `ms` simulated milliseconds with no warm-up.
pub fn short(ms: u64) -> Vec<(String, String)> {
    vec![
        ("run.warmup_ms".to_string(), "0".to_string()),
        ("run.duration_ms".to_string(), ms.to_string()),
    ]
}

/// The `run` target's budget of events for one input.
pub const MAX_EVENTS: u64 = 200_000;

/// Loads `src` with the run shortened to `ms` simulated milliseconds (no warm-up); if it
/// validates and is small enough, runs it with the engine's invariant checks on after every
/// event, for at most [`MAX_EVENTS`] events. Panics if the run panics or, within the budget,
/// does not reach its end.
pub fn load_and_run(src: &str, ms: u64) -> Outcome {
    match vmsched_sched::load("fuzz.toml", src, &short(ms)) {
        Err(e) => {
            check_error(&e, src);
            Outcome::Refused
        }
        Ok(s) => {
            if !small_enough(&s) {
                return Outcome::TooLarge;
            }
            let mut sim = vmsched_sched::build(&s);
            sim.set_debug_checks(true);
            // In 20 µs steps, stopping after MAX_EVENTS: a scenario whose loops cost a
            // nanosecond or two a round holds millions of events a simulated millisecond
            // (docs/fuzzing.md), and the fuzzer's time is better spent on other inputs.
            let end = sim.end();
            while sim.now() < end {
                sim.run_until((sim.now() + 20_000).min(end));
                if sim.events() > MAX_EVENTS {
                    return Outcome::OverBudget;
                }
            }
            sim.run();
            let r = sim.results();
            assert_eq!(
                r.duration_ns,
                ms * 1_000_000,
                "the run stopped early:\n{src}"
            );
            Outcome::Ran
        }
    }
}

/// What `load_and_run` did with a scenario.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Refused,
    TooLarge,
    OverBudget,
    Ran,
}

/// The import targets (`xlcfg`, `sysctl`, `rtapp`): any bytes as a file of `format`. The reader
/// returns a fragment or an error that has a message and names a line or a key (issue 18 item
/// 1, always on here: the readers are new); a fragment made into a whole scenario either loads
/// or fails with an error naming its field (budgets may refuse a large one), never panics.
pub fn import_case(format: vmsched_sched::import::Format, data: &[u8]) {
    use vmsched_core::import::Options;
    use vmsched_sched::import::{import_bytes, skeleton};
    for pcpus in [None, Some(64)] {
        let opts = Options { pcpus };
        match import_bytes(format, "fuzz.in", data, &opts) {
            Err(e) => {
                assert!(!e.message.is_empty(), "an error without a message: {e:?}");
                assert!(
                    !e.field.is_empty() || e.line.is_some(),
                    "an import error names neither key nor line: {e:?}"
                );
                assert!(
                    !e.to_string().contains('\n'),
                    "an import error of more than one line: {e:?}"
                );
            }
            Ok(f) => {
                let _ = f.to_toml();
                for n in &f.notes {
                    let _ = n.to_string();
                }
                // The host is large enough for every pCPU and vCPU the fragment names.
                let n = pcpus.unwrap_or_else(|| max_cpu(&toml::Value::Table(f.table.clone())) + 1);
                if let Err(e) = skeleton("credit2", n, &[f]) {
                    assert!(
                        !e.field.is_empty() && !e.message.is_empty(),
                        "a skeleton error names no field: {e:?}"
                    );
                }
            }
        }
    }
}

/// The largest CPU number in a fragment's affinities (`pcpus`, `vcpu_pcpus`, `soft_pcpus`,
/// `affinity`), and its vCPU count less one, at least 0.
fn max_cpu(v: &toml::Value) -> u32 {
    match v {
        toml::Value::Table(t) => t
            .iter()
            .map(|(k, v)| match (k.as_str(), v) {
                ("pcpus" | "vcpu_pcpus" | "soft_pcpus" | "affinity", v) => max_int(v),
                ("vcpus", toml::Value::Integer(n)) => (*n as u32).saturating_sub(1),
                (_, v) => max_cpu(v),
            })
            .max()
            .unwrap_or(0),
        toml::Value::Array(a) => a.iter().map(max_cpu).max().unwrap_or(0),
        _ => 0,
    }
}

fn max_int(v: &toml::Value) -> u32 {
    match v {
        toml::Value::Integer(n) => *n as u32,
        toml::Value::Array(a) => a.iter().map(max_int).max().unwrap_or(0),
        _ => 0,
    }
}

// The appended choices (EEVDF, the RT class, RTDS, null, ARINC653), shared with
// `random_scenario` in crates/vmsched-sched/tests/hardening.rs.
include!("../../crates/vmsched-sched/tests/common/appended_choices.rs");

#[cfg(test)]
mod tests {
    /// SHIPPED holds every scenario of python/vmsched/scenarios, each once.
    #[test]
    fn every_shipped_scenario_is_listed() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../python/vmsched/scenarios");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".toml"))
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = super::SHIPPED.iter().map(|(n, _)| n.to_string()).collect();
        listed.sort();
        assert_eq!(listed, on_disk);
    }

    /// Prints the scenario behind a `run` input: `VMSCHED_FUZZ_INPUT=artifacts/run/<file> cargo
    /// test --release --lib -- --ignored --nocapture show_run_input`.
    #[test]
    #[ignore = "a tool: prints the scenario of VMSCHED_FUZZ_INPUT"]
    fn show_run_input() {
        let data = std::fs::read(std::env::var("VMSCHED_FUZZ_INPUT").unwrap()).unwrap();
        let Some((&head, rest)) = data.split_first() else {
            return;
        };
        let src = if head == 0 {
            String::from_utf8_lossy(rest).into_owned()
        } else {
            super::generate(&mut arbitrary::Unstructured::new(rest))
        };
        println!("{src}");
        let t = std::time::Instant::now();
        let o = super::load_and_run(&src, 2);
        println!("# {o:?} in {:?}", t.elapsed());
    }

    /// Runs the scenario file VMSCHED_FUZZ_FILE as it is (its own duration) with the engine's
    /// invariant checks after every event: `cargo test --release --lib -- --ignored
    /// --nocapture run_file` (to replay a seed of `random_scenarios_validate_or_run`).
    #[test]
    #[ignore = "a tool: runs the scenario of VMSCHED_FUZZ_FILE with the checks on"]
    fn run_file() {
        let src = std::fs::read_to_string(std::env::var("VMSCHED_FUZZ_FILE").unwrap()).unwrap();
        match vmsched_sched::load("fuzz.toml", &src, &[]) {
            Err(e) => println!("refused: {e}"),
            Ok(s) => {
                let mut sim = vmsched_sched::build(&s);
                sim.set_debug_checks(true);
                sim.run();
                println!("ran: {} ns", sim.results().duration_ns);
            }
        }
    }

    /// The errors of `generated_scenarios_mostly_validate`'s 300 cases, counted by field and
    /// message head: `cargo test --release --lib -- --ignored --nocapture refusal_histogram`.
    #[test]
    #[ignore = "a tool: prints why generated scenarios are refused"]
    fn refusal_histogram() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut h = std::collections::BTreeMap::new();
        let mut feats = std::collections::BTreeMap::new();
        for _ in 0..300 {
            let bytes: Vec<u8> = (0..400)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let src = super::generate(&mut arbitrary::Unstructured::new(&bytes));
            let key = match vmsched_sched::load("fuzz.toml", &src, &super::short(2)) {
                Err(e) => {
                    if std::env::var("SHOW").is_ok_and(|v| e.to_string().contains(&v)) {
                        println!("{e}\n{src}\n-----");
                    }
                    let f: String = e.field.chars().filter(|c| !c.is_ascii_digit()).collect();
                    let m: String = e.message.chars().take(50).collect();
                    format!("{f}: {m}")
                }
                Ok(_) => format!("{:?}", super::load_and_run(&src, 2)),
            };
            let ran = key == "Ran";
            *h.entry(key).or_insert(0) += 1;
            for f in [
                "kind = \"startup\"",
                "kind = \"spinlock\"",
                "[domain.pv]",
                "[domain.coord]",
                "\"sched_vcpu\"",
                "\"sched_task\"",
                "[[cpupool]]",
                "pool = \"p1\"\n",
                "\"cpupool_",
                "\"cpupool_create\"",
                "vcpu_refill_ns",
            ] {
                if src.contains(f) {
                    let e = feats.entry(f).or_insert((0, 0));
                    e.0 += 1;
                    e.1 += usize::from(ran);
                }
            }
        }
        for (f, (n, r)) in &feats {
            println!("feature {f}: in {n}, ran {r}");
        }
        let mut v: Vec<_> = h.into_iter().collect();
        v.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        for (k, n) in v {
            println!("{n:4} {k}");
        }
    }

    /// The generator is worth fuzzing with: from random bytes, a fair share of its scenarios
    /// validate and run to their end within the event budget.
    #[test]
    fn generated_scenarios_mostly_validate() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let (mut ran, mut cases) = (0, 0);
        for _ in 0..300 {
            let bytes: Vec<u8> = (0..400)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let src = super::generate(&mut arbitrary::Unstructured::new(&bytes));
            cases += 1;
            if super::load_and_run(&src, 2) == super::Outcome::Ran {
                ran += 1;
            }
        }
        eprintln!("{ran} of {cases} generated scenarios ran");
        assert!(
            ran * 6 > cases,
            "only {ran} of {cases} generated scenarios validate"
        );
    }
}
