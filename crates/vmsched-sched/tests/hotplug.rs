//! CPU offline and online from the `[[event]]` timeline, through whole scenarios, at both
//! levels: a host pCPU (`xen-hptool cpu-offline`, Credit2) and a guest vCPU (`echo 0 >
//! .../cpuN/online`, CFS 5.10, its vCPU down at the host). After an offline nothing runs on the
//! CPU (trace switch records, and the engine's invariants checked after every event); a task
//! or vCPU pinned only to it still runs (its affinity broken, and logged); an online brings the
//! CPU back into use; runstates still add up to the elapsed time; the run is deterministic; and
//! the timeline's validation names the field.

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;

use vmsched_core::report::Results;
use vmsched_core::trace::{Record, Trace};
use vmsched_core::NS_PER_MS;

/// Runs `src` traced with the engine's checks on; returns the results, the trace and the log.
fn run(src: &str) -> (Results, Trace, Vec<String>) {
    let s = vmsched_sched::load("test.toml", src, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.enable_trace(20_000_000);
    sim.run();
    let tr = sim.take_trace().expect("traced");
    assert_eq!(tr.dropped, 0);
    (sim.results(), tr, sim.log().to_vec())
}

fn load_err(src: &str) -> String {
    match vmsched_sched::load("test.toml", src, &[]) {
        Ok(_) => panic!("the scenario should be refused"),
        Err(e) => e.to_string(),
    }
}

/// The global id of CPU `local` of the level named `level`.
fn gcpu(tr: &Trace, level: &str, local: u32) -> u32 {
    let l = tr
        .meta
        .levels
        .iter()
        .position(|m| m.name == level)
        .unwrap_or_else(|| panic!("no level {level}"));
    tr.meta
        .cpus
        .iter()
        .position(|c| c.level.0 as usize == l && c.local == local)
        .unwrap() as u32
}

/// Switches onto CPU `cpu` (global) with something to run, in `[from, to)` ms.
fn runs_on(tr: &Trace, cpu: u32, from: u64, to: u64) -> usize {
    tr.records
        .iter()
        .filter(|r| {
            matches!(r, Record::Switch { t, cpu: c, next: Some(_), .. }
                if c.0 == cpu && *t >= from * NS_PER_MS && *t < to * NS_PER_MS)
        })
        .count()
}

/// What CPU `cpu` (global) runs at time `at` ms, by the last switch before it.
fn running_at(tr: &Trace, cpu: u32, at: u64) -> Option<u32> {
    let mut cur = None;
    for r in &tr.records {
        if let Record::Switch {
            t, cpu: c, next, ..
        } = r
        {
            if *t > at * NS_PER_MS {
                break;
            }
            if c.0 == cpu {
                cur = next.map(|e| e.0);
            }
        }
    }
    cur
}

use run::{assert_sums, ent};

/// Four pCPUs, one domain of four busy vCPUs (one loop pinned to each), Credit2.
const HOST4: &str = r#"
[run]
duration_ms = 3000
warmup_ms = 0
[machine]
pcpus = 4
[host]
scheduler = "credit2"
version = "4.20.2"
[[domain]]
name = "d"
vcpus = 4
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
copies = 4
pin_each = true
"#;

fn events(base: &str, ev: &[(u64, &str, u32, Option<&str>)]) -> String {
    let mut s = base.to_string();
    for (at, action, cpu, dom) in ev {
        s.push_str(&format!(
            "\n[[event]]\nat_ms = {at}\naction = \"{action}\"\ncpu = {cpu}\n"
        ));
        if let Some(d) = dom {
            s.push_str(&format!("domain = \"{d}\"\n"));
        }
    }
    s
}

#[test]
fn an_offline_pcpu_runs_nothing_until_it_is_online_again() {
    let src = events(
        HOST4,
        &[
            (1000, "cpu_offline", 3, None),
            (2000, "cpu_online", 3, None),
        ],
    );
    let (r, tr, _) = run(&src);
    let p3 = gcpu(&tr, "host", 3);
    assert!(runs_on(&tr, p3, 0, 1000) > 0, "pCPU 3 in use before");
    assert_eq!(
        running_at(&tr, p3, 1000),
        None,
        "pCPU 3 idles from the offline"
    );
    assert_eq!(
        runs_on(&tr, p3, 1000, 2000),
        0,
        "nothing runs on offline pCPU 3"
    );
    assert!(
        runs_on(&tr, p3, 2000, 3000) > 0,
        "pCPU 3 back in use after the online"
    );
    // Four busy vCPUs on three pCPUs for a second: they share, so each still runs and the
    // host's total running time is three pCPUs' worth in that window (work conserving).
    let total: u64 = (0..4).map(|v| ent(&r, &format!("d.v{v}")).running_ns).sum();
    assert!(
        total > 10_950 * NS_PER_MS,
        "3 pCPUs busy while one is offline, 4 otherwise: {total}"
    );
    for v in 0..4 {
        assert!(ent(&r, &format!("d.v{v}")).running_ns > 1500 * NS_PER_MS);
        assert_eq!(
            ent(&r, &format!("d.v{v}")).offline_ns,
            0,
            "no vCPU goes down"
        );
    }
    assert_sums(&r);
}

#[test]
fn a_vcpu_pinned_only_to_an_offlined_pcpu_still_runs_its_affinity_broken() {
    let src = HOST4.replace(
        "[[domain]]\nname = \"d\"\nvcpus = 4\n",
        "[[domain]]\nname = \"d\"\nvcpus = 4\nvcpu_pcpus = [[0], [1], [2], [3]]\n",
    );
    let src = events(&src, &[(1000, "cpu_offline", 3, None)]);
    let (r, tr, log) = run(&src);
    let p3 = gcpu(&tr, "host", 3);
    assert_eq!(runs_on(&tr, p3, 1000, 3000), 0);
    // d.v3 was pinned to pCPU 3: Xen breaks its affinity (to every CPU) and logs it.
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(log[0].contains("d.v3"), "{log:?}");
    let v3 = ent(&r, "d.v3");
    assert!(
        v3.running_ns > 1000 * NS_PER_MS + 300 * NS_PER_MS,
        "d.v3 keeps running after its pCPU left: {}",
        v3.running_ns
    );
    assert_sums(&r);
}

/// One domain of four vCPUs on four pCPUs, a busy loop pinned to each vCPU.
#[test]
fn an_offline_guest_cpu_runs_no_task_and_its_vcpu_is_offline_at_the_host() {
    let src = events(
        HOST4,
        &[
            (1000, "cpu_offline", 3, Some("d")),
            (2000, "cpu_online", 3, Some("d")),
        ],
    );
    let (r, tr, log) = run(&src);
    let g3 = gcpu(&tr, "d", 3);
    assert!(runs_on(&tr, g3, 0, 1000) > 0);
    assert_eq!(running_at(&tr, g3, 1000), None);
    assert_eq!(runs_on(&tr, g3, 1000, 2000), 0, "no task on offline vCPU 3");
    assert!(runs_on(&tr, g3, 2000, 3000) > 0, "vCPU 3 back in use");
    // loop.3 was pinned to vCPU 3: select_fallback_rq gives it every CPU, logged.
    assert!(log.iter().any(|l| l.contains("loop.3")), "{log:?}");
    // The vCPU is down for the second: offline at the host, not running.
    let v3 = ent(&r, "d.v3");
    assert_eq!(v3.offline_ns, 1000 * NS_PER_MS, "d.v3 down for 1 s");
    assert!(v3.running_ns > 1900 * NS_PER_MS);
    // Every loop keeps running: the fallback task shares the other three vCPUs.
    for k in 0..4 {
        let t = ent(&r, &format!("loop.{k}"));
        assert!(
            t.running_ns > 2000 * NS_PER_MS,
            "loop.{k}: {}",
            t.running_ns
        );
    }
    assert_sums(&r);
}

#[test]
fn a_guest_cpu_offline_while_its_vcpu_waits_for_a_pcpu() {
    // Two busy domains on two pCPUs with vCPUs that queue: some offlines find the vCPU
    // preempted, some running; the engine's invariants hold after every event.
    let src = r#"
[run]
duration_ms = 2000
warmup_ms = 0
[machine]
pcpus = 2
[host]
scheduler = "credit2"
[[domain]]
name = "a"
vcpus = 3
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
copies = 4
[[domain]]
name = "b"
vcpus = 2
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
copies = 2
"#;
    let mut ev = Vec::new();
    for k in 0..9u64 {
        let t = 100 + k * 97;
        ev.push((t, "cpu_offline", 1 + (k % 2) as u32, Some("a")));
        ev.push((t + 41, "cpu_online", 1 + (k % 2) as u32, Some("a")));
    }
    ev.push((1500, "cpu_offline", 1, None));
    ev.push((1800, "cpu_online", 1, None));
    let (r, tr, _) = run(&events(src, &ev));
    assert_eq!(runs_on(&tr, gcpu(&tr, "host", 1), 1500, 1800), 0);
    assert_sums(&r);
    for k in 0..4 {
        assert!(ent(&r, &format!("loop.{k}")).running_ns > 0);
    }
}

#[test]
fn hotplug_runs_are_deterministic() {
    let src = events(
        HOST4,
        &[
            (700, "cpu_offline", 2, None),
            (900, "cpu_offline", 3, Some("d")),
            (1600, "cpu_online", 2, None),
            (2100, "cpu_online", 3, Some("d")),
        ],
    );
    let a = serde_json::to_string(&run(&src).0).unwrap();
    let b = serde_json::to_string(&run(&src).0).unwrap();
    assert_eq!(a, b);
}

#[test]
fn hotplug_events_are_validated_naming_the_field() {
    let bad = |ev: &[(u64, &str, u32, Option<&str>)], field: &str, what: &str| {
        let e = load_err(&events(HOST4, ev));
        assert!(e.contains(field), "{e}");
        assert!(e.contains(what), "{e}");
    };
    bad(&[(100, "cpu_offline", 0, None)], "event.0.cpu", "pCPU 0");
    bad(&[(100, "cpu_offline", 4, None)], "event.0.cpu", "0..4");
    bad(
        &[(100, "cpu_offline", 0, Some("d"))],
        "event.0.cpu",
        "vCPU 0",
    );
    bad(&[(100, "cpu_offline", 9, Some("d"))], "event.0.cpu", "0..4");
    bad(
        &[(100, "cpu_online", 2, None)],
        "event.0.cpu",
        "already online",
    );
    bad(
        &[
            (100, "cpu_offline", 2, Some("d")),
            (50, "cpu_offline", 2, Some("d")),
        ],
        "event.0.cpu",
        "already offline",
    );
    bad(&[(100, "cpu_offline", 1, Some("x"))], "event.0.domain", "x");
    let e = load_err(&format!(
        "{HOST4}\n[[event]]\nat_ms = 1\naction = \"cpu_offline\"\n"
    ));
    assert!(e.contains("event.0.cpu"), "{e}");
    let e = load_err(&format!(
        "{HOST4}\n[[event]]\nat_ms = 1\naction = \"pause\"\ndomain = \"d\"\ncpu = 1\n"
    ));
    assert!(e.contains("event.0.cpu"), "{e}");
    // The pinned host takes no CPU offline.
    let pinned = HOST4.replace(
        "scheduler = \"credit2\"\nversion = \"4.20.2\"",
        "scheduler = \"pinned\"",
    );
    let e = load_err(&events(&pinned, &[(100, "cpu_offline", 1, None)]));
    assert!(e.contains("event.0.cpu"), "{e}");
}

/// Everything at once: Credit2 with one runqueue per pCPU (an offline frees one, an online
/// reuses it), a capped domain, a domain pinned to a pCPU that goes offline, one created after
/// its pCPUs went offline and destroyed later, a pause, sleeping tasks with timers on guest
/// CPUs that go offline, and periodic ticks. The engine's invariants hold after every event,
/// runstates add up, and two runs are equal.
#[test]
fn hotplug_mixed_with_every_other_lifecycle_event_keeps_the_invariants() {
    let src = r#"
[run]
duration_ms = 2000
warmup_ms = 0
seed = 7
[machine]
pcpus = 4
[host]
scheduler = "credit2"
version = "4.20.2"
runqueue = "cpu"
[[domain]]
name = "a"
vcpus = 3
cap = 150
[domain.kernel]
tick = "periodic"
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "hog"
copies = 2
[[domain.workload]]
kind = "program"
name = "req"
copies = 3
steps = [
  { op = "compute", exp_us = 300 },
  { op = "sleep", exp_us = 700 },
  { op = "loop", to = 0 },
]
[[domain]]
name = "b"
vcpus = 2
pcpus = [3]
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "program"
name = "req"
copies = 2
steps = [
  { op = "compute", exp_us = 200 },
  { op = "sleep", exp_us = 500 },
  { op = "loop", to = 0 },
]
[[domain]]
name = "c"
vcpus = 2
pcpus = [2]
create_at_ms = 700
destroy_at_ms = 1600
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "hog"
"#;
    let ev: &[(u64, &str, u32, Option<&str>)] = &[
        (150, "cpu_offline", 2, Some("a")),
        (200, "cpu_offline", 3, None),
        (250, "cpu_offline", 1, Some("a")),
        (300, "cpu_offline", 1, Some("b")),
        (400, "cpu_offline", 2, None),
        (450, "cpu_online", 2, Some("a")),
        (600, "cpu_online", 1, Some("b")),
        (900, "cpu_online", 3, None),
        (950, "cpu_offline", 1, None),
        (1000, "cpu_online", 1, Some("a")),
        (1100, "cpu_online", 2, None),
        (1200, "cpu_offline", 2, Some("a")),
        (1300, "cpu_online", 1, None),
        (1400, "cpu_offline", 1, Some("c")),
        (1700, "cpu_offline", 3, None),
    ];
    let mut src = events(src, ev);
    src.push_str(
        "\n[[event]]\nat_ms = 500\naction = \"pause\"\ndomain = \"b\"\n\
         [[event]]\nat_ms = 800\naction = \"unpause\"\ndomain = \"b\"\n",
    );
    let (r, tr, log) = run(&src);
    assert_sums(&r);
    // b's vCPUs were pinned to pCPU 3 (offline at 200 ms), c's to pCPU 2, offline when c was
    // created at 700 ms: both got every pCPU, logged.
    for v in ["b.v0", "b.v1", "c.v0", "c.v1"] {
        assert!(log.iter().any(|l| l.contains(v)), "{v}: {log:?}");
    }
    assert_eq!(runs_on(&tr, gcpu(&tr, "host", 3), 200, 900), 0);
    assert_eq!(runs_on(&tr, gcpu(&tr, "host", 2), 400, 1100), 0);
    assert_eq!(runs_on(&tr, gcpu(&tr, "a", 2), 150, 450), 0);
    assert!(ent(&r, "c.v0").running_ns > 0, "c ran on another pCPU");
    let again = run(&src).0;
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        serde_json::to_string(&again).unwrap()
    );
}

/// A random scenario with a valid hot-plug timeline at both levels (and pauses, caps, pinned
/// domains, created and destroyed domains, periodic ticks, Arm's untrapped WFI, every kind of
/// workload), drawn from the project's seeded stream so a failing case is a seed.
fn random_hotplug_scenario(seed: u64) -> String {
    let mut r = vmsched_core::rng::Stream::new(seed, "hotplug-fuzz");
    let mut pick = |n: u64| r.range(0, n - 1);
    let duration = 40 + pick(160);
    let pcpus = 2 + pick(6);
    let sockets = if pcpus % 2 == 0 { 1 + pick(2) } else { 1 };
    let (warmup, seed) = (pick(duration / 2), pick(1000));
    let arch = ["x86", "arm64"][pick(2) as usize];
    // vwfi = "native" is an Arm option (x86 draws it too, so every seed keeps its stream).
    let vwfi = ["trap", "native"][pick(2) as usize];
    let vwfi = if arch == "arm64" { vwfi } else { "trap" };
    let mut s = format!(
        "[run]\nduration_ms = {duration}\nwarmup_ms = {warmup}\nseed = {seed}\n\
         [machine]\npcpus = {pcpus}\nsockets = {sockets}\narch = \"{arch}\"\nvwfi = \"{vwfi}\"\n\
         ipi_latency_ns = {}\n\
         [host]\nscheduler = \"credit2\"\nversion = \"{}\"\nratelimit_us = {}\nrunqueue = \"{}\"\n",
        [0, 1000][pick(2) as usize],
        ["4.20.0", "4.20.2", "4.21"][pick(3) as usize],
        [0, 1000][pick(2) as usize],
        ["cpu", "core", "socket", "all"][pick(4) as usize],
    );
    let ndom = 1 + pick(3);
    let mut vcpus = Vec::new();
    let mut life = Vec::new();
    for d in 0..ndom {
        let v = 1 + pick(4);
        vcpus.push(v);
        s += &format!(
            "[[domain]]\nname = \"d{d}\"\nvcpus = {v}\ncap = {}\n",
            [0, 0, 50, 100 * v][pick(4) as usize]
        );
        if pick(3) == 0 {
            s += &format!("pcpus = [{}]\n", pick(pcpus));
        }
        // The last domain may be created late and destroyed early.
        let (mut born, mut dies) = (0, duration);
        if d == ndom - 1 && pick(3) == 0 {
            born = 1 + pick(duration / 2);
            s += &format!("create_at_ms = {born}\n");
            if pick(2) == 0 {
                dies = born + 1 + pick(duration - born - 1);
                s += &format!("destroy_at_ms = {dies}\n");
            }
        }
        life.push((born, dies));
        s += &format!(
            "[domain.kernel]\ntick = \"{}\"\npreempt = \"{}\"\n[domain.sched]\nscheduler = \"cfs\"\n",
            ["nohz_idle", "periodic"][pick(2) as usize],
            ["none", "full"][pick(2) as usize],
        );
        for w in 0..1 + pick(3) {
            let aff = if pick(3) == 0 {
                format!("affinity = [{}]\n", pick(v))
            } else {
                String::new()
            };
            s += "[[domain.workload]]\n";
            s += &match pick(4) {
                0 => format!(
                    "kind = \"cpu_loop\"\nname = \"w{w}\"\ncopies = {}\npin_each = {}\n{aff}",
                    1 + pick(3),
                    pick(2) == 1
                ),
                1 => format!("kind = \"context1\"\nname = \"w{w}\"\n{aff}"),
                2 => format!(
                    "kind = \"cyclictest\"\nname = \"w{w}\"\nthreads = {}\ninterval_us = {}\n{aff}",
                    1 + pick(3),
                    [100, 1000][pick(2) as usize]
                ),
                _ => format!(
                    "kind = \"program\"\nname = \"w{w}\"\ncopies = {}\nchannels = [\"c\"]\n\
                     steps = [{{ op = \"compute\", exp_us = 300 }}, {{ op = \"signal\", chan = \"c\" }}, \
                     {{ op = \"sleep\", exp_us = 500 }}, {{ op = \"wait\", chan = \"c\" }}, \
                     {{ op = \"loop\", to = 0 }}]\n{aff}",
                    1 + pick(3)
                ),
            };
        }
    }
    // The timeline: hot-plug at both levels and pauses, valid by construction.
    let mut host_on = vec![true; pcpus as usize];
    let mut guest_on: Vec<Vec<bool>> = vcpus.iter().map(|&v| vec![true; v as usize]).collect();
    let mut paused = vec![false; ndom as usize];
    let mut t = 0;
    for _ in 0..pick(12) {
        t += 1 + pick(duration / 6);
        if t >= duration {
            break;
        }
        let d = pick(ndom) as usize;
        let alive = life[d].0 <= t && t < life[d].1;
        match pick(3) {
            0 => {
                let c = 1 + pick(pcpus - 1) as usize;
                let action = if host_on[c] {
                    "cpu_offline"
                } else {
                    "cpu_online"
                };
                host_on[c] = !host_on[c];
                s += &format!("[[event]]\nat_ms = {t}\naction = \"{action}\"\ncpu = {c}\n");
            }
            1 if alive && vcpus[d] > 1 => {
                let c = 1 + pick(vcpus[d] - 1) as usize;
                let on = &mut guest_on[d][c];
                let action = if *on { "cpu_offline" } else { "cpu_online" };
                *on = !*on;
                s += &format!(
                    "[[event]]\nat_ms = {t}\naction = \"{action}\"\ndomain = \"d{d}\"\ncpu = {c}\n"
                );
            }
            2 if alive => {
                let action = if paused[d] { "unpause" } else { "pause" };
                paused[d] = !paused[d];
                s += &format!("[[event]]\nat_ms = {t}\naction = \"{action}\"\ndomain = \"d{d}\"\n");
            }
            _ => {}
        }
    }
    s
}

#[test]
fn random_hotplug_timelines_keep_the_invariants() {
    // VMSCHED_FUZZ_CASES raises the count.
    let cases: u64 = std::env::var("VMSCHED_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    let (mut ran, mut hotplugged) = (0, 0);
    for seed in 0..cases {
        let src = random_hotplug_scenario(seed);
        let s = vmsched_sched::load("fuzz.toml", &src, &[])
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}"));
        let run = std::panic::catch_unwind(|| {
            let mut sim = vmsched_sched::build(&s);
            sim.set_debug_checks(true);
            sim.run();
            sim.results()
        });
        let r = run.unwrap_or_else(|_| panic!("seed {seed} panicked; scenario:\n{src}"));
        assert_sums(&r);
        ran += 1;
        hotplugged += src.contains("cpu_offline") as u32;
    }
    assert!(ran == cases && hotplugged as u64 > cases / 2);
}

/// `src` with its `[host]` table replaced by Xen Credit1 of `version` (`3.3` or `4.20`).
fn on_credit1(src: &str, version: &str) -> String {
    let from = src.find("[host]\n").expect("a [host] table");
    let to = from + src[from..].find("[[domain]]").expect("a domain");
    format!(
        "{}[host]\nscheduler = \"credit\"\nversion = \"{version}\"\n{}",
        &src[..from],
        &src[to..]
    )
}

/// Credit1 (both eras) takes a pCPU offline and back (`csched_deinit_pdata`, `init_pdata`) and
/// a guest's `VCPUOP_down`: nothing runs on the offline pCPU, the four busy vCPUs share the
/// three left, the pCPU is used again after the online, a vCPU whose guest CPU is offline is
/// offline at the host; runstates add up and runs are deterministic.
#[test]
fn a_credit1_host_takes_pcpus_and_guest_cpus_offline_and_online() {
    for version in ["3.3", "4.20"] {
        let src = events(
            &on_credit1(HOST4, version),
            &[
                (1000, "cpu_offline", 3, None),
                (1500, "cpu_offline", 2, Some("d")),
                (2000, "cpu_online", 3, None),
                (2500, "cpu_online", 2, Some("d")),
            ],
        );
        let (r, tr, _) = run(&src);
        let p3 = gcpu(&tr, "host", 3);
        assert!(
            runs_on(&tr, p3, 0, 1000) > 0,
            "{version}: pCPU 3 in use before"
        );
        assert_eq!(running_at(&tr, p3, 1000), None, "{version}");
        assert_eq!(runs_on(&tr, p3, 1000, 2000), 0, "{version}: offline pCPU 3");
        assert!(runs_on(&tr, p3, 2000, 3000) > 0, "{version}: pCPU 3 back");
        // Three pCPUs busy for the second pCPU 3 is offline (one vCPU down for half of it),
        // four otherwise; the vCPU down for a second is not counted in that window.
        let total: u64 = (0..4).map(|v| ent(&r, &format!("d.v{v}")).running_ns).sum();
        assert!(
            total > 10_400 * NS_PER_MS,
            "{version}: the pCPUs stay busy: {total}"
        );
        for v in 0..4 {
            let e = ent(&r, &format!("d.v{v}"));
            assert!(
                e.running_ns > 1200 * NS_PER_MS,
                "{version}: d.v{v} {}",
                e.running_ns
            );
            let down = if v == 2 { 1000 * NS_PER_MS } else { 0 };
            assert_eq!(e.offline_ns, down, "{version}: d.v{v} down");
        }
        assert_sums(&r);
        let again = serde_json::to_string(&run(&src).0).unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), again, "{version}");
    }
}

/// The random hot-plug timelines of `random_hotplug_timelines_keep_the_invariants` on a
/// Credit1 host of either era.
#[test]
fn random_hotplug_timelines_on_a_credit1_host_keep_the_invariants() {
    let cases: u64 = std::env::var("VMSCHED_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    for seed in 0..cases {
        let version = ["3.3", "4.20"][(seed % 2) as usize];
        let src = on_credit1(&random_hotplug_scenario(seed), version);
        let s = vmsched_sched::load("fuzz.toml", &src, &[])
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}"));
        let run = std::panic::catch_unwind(|| {
            let mut sim = vmsched_sched::build(&s);
            sim.set_debug_checks(true);
            sim.run();
            sim.results()
        });
        let r = run.unwrap_or_else(|_| panic!("seed {seed} panicked; scenario:\n{src}"));
        assert_sums(&r);
    }
}
