//! The benchmark's fixed scenario set: every scenario has a stable name (the key a later run is
//! compared by, `--compare`), a scenario source written inline (or a shipped scenario file), the
//! overrides it runs with and a default simulated length.
//!
//! The size family (issue 15 item 1): four workload mixes at 8, 64, 256, 1,024 and 4,096 pCPUs,
//! named `<mix>-p<pcpus>`: `ctx1` (Context1 pairs with CPU hogs), `cyclic` (cyclictest-heavy),
//! `mixed` (the four-way mix of the former `large`/`x1024`/`x4096`), and `vm1000-p256` (a
//! consolidation host: 1,000 domains of 2 vCPUs on 256 pCPUs). Every one is a Credit2 host over
//! CFS guests with 2 vCPUs per pCPU (vm1000: about 7.8).
//!
//! The scheduler family (issue 12 item 10, issue 17 item 9): `eevdf-p64` (the mixed scenario
//! with EEVDF 6.12 guests), `seed003like` (a 2-pCPU KVM host, one 1-vCPU guest with cyclictest
//! and a loop, two host loops; CFS at both levels as in seed 003's document), `kvm64` (a KVM
//! host of 16 pCPUs with EEVDF, 16 guests of 4 vCPUs with the mixed workloads), `deadline-p64`
//! (SCHED_DEADLINE reservations beside fair work in every guest), `bfs-p64` (the mixed workloads
//! under BFS 0.458 guests), `nas` (the shipped NAS-shaped parallel job) and `rtds` (the mixed
//! workloads under Xen RTDS, 256 vCPUs on 64 pCPUs).
//!
//! The shipped seed scenarios (`seed000`, `seed001`, `seed002`) and the former names `large`,
//! `x1024`, `x4096` stay, so figures recorded under them in docs/performance.md can be re-run.

const SEED000: &str =
    include_str!("../../../python/vmsched/scenarios/seed000_context1_ratelimit.toml");
const SEED001: &str =
    include_str!("../../../python/vmsched/scenarios/seed001_video_boost_credit.toml");
const SEED002: &str = include_str!("../../../python/vmsched/scenarios/seed002_io_ping.toml");
const NAS: &str = include_str!("../../../python/vmsched/scenarios/nas_parallel.toml");

/// One benchmark scenario.
pub struct Bench {
    pub name: String,
    /// What it models, one line (printed by `--list`).
    pub what: String,
    pub src: String,
    /// `--set`-style overrides applied on top of `src` (besides the run length).
    pub overrides: Vec<(String, String)>,
    /// Simulated seconds when `--seconds` is not given: long enough to be past the start-up of
    /// the small hosts, short enough that the 4,096-pCPU rows run in seconds of wall time.
    pub default_seconds: f64,
}

/// The sizes of the size family.
pub const SIZES: [u32; 5] = [8, 64, 256, 1024, 4096];
/// The workload mixes of the size family.
pub const MIXES: [&str; 3] = ["ctx1", "cyclic", "mixed"];
/// The scheduler family's names, in the order `set` runs them.
pub const EXTRAS: [&str; 7] = [
    "eevdf-p64",
    "seed003like",
    "kvm64",
    "deadline-p64",
    "bfs-p64",
    "nas",
    "rtds",
];
/// The names kept from before the set existed.
pub const LEGACY: [&str; 6] = ["seed000", "seed001", "seed002", "large", "x1024", "x4096"];

/// Sockets for a generated host of `pcpus` pCPUs (Credit2 splits sockets into runqueues of at
/// most 16 CPUs).
fn sockets_for(pcpus: u32) -> u32 {
    match pcpus {
        0..=8 => 1,
        9..=256 => 2,
        257..=1024 => 8,
        _ => 16,
    }
}

fn default_seconds_for(pcpus: u32) -> f64 {
    match pcpus {
        0..=8 => 1.0,
        9..=64 => 0.2,
        65..=256 => 0.1,
        257..=1024 => 0.02,
        _ => 0.01,
    }
}

/// The header of a generated Xen host scenario.
fn xen_host(name: &str, pcpus: u32, sockets: u32, host: &str) -> String {
    format!(
        "name = \"{name}\"\n[run]\nduration_ms = 1000\n[machine]\npcpus = {pcpus}\n\
         sockets = {sockets}\n[host]\nscheduler = \"{host}\"\n",
    )
}

/// A domain of `vcpus` vCPUs whose guest runs `sched` (a `[domain.sched]` body).
fn domain(name: &str, vcpus: u32, sched: &str) -> String {
    format!("[[domain]]\nname = \"{name}\"\nvcpus = {vcpus}\n[domain.sched]\n{sched}")
}

const CFS: &str = "scheduler = \"cfs\"\n";
const EEVDF: &str = "scheduler = \"eevdf\"\nkernel = \"6.12\"\n";
const BFS: &str = "scheduler = \"bfs\"\nversion = \"0.458\"\n";

/// The workloads of the mixed mix's domain `d` (4 vCPUs): Context1 pinned to vCPU 0 with two
/// hogs; cyclictest (4 threads) with a hog; 4 hogs; 4 × (300 µs compute, 700 µs sleep).
fn mixed_workloads(d: u32) -> &'static str {
    match d % 4 {
        0 => CTX1_WL,
        1 => CYCLIC_WL,
        2 => "[[domain.workload]]\nkind = \"cpu_loop\"\nname = \"hog\"\ncopies = 4\n",
        _ => {
            "[[domain.workload]]\nkind = \"program\"\nname = \"io\"\ncopies = 4\nsteps = [\n\
              { op = \"compute\", exp_us = 300 },\n{ op = \"sleep\", exp_us = 700 },\n\
              { op = \"loop\", to = 0 },\n]\n"
        }
    }
}

const CTX1_WL: &str = "[[domain.workload]]\nkind = \"context1\"\nname = \"ctx\"\naffinity = [0]\n\
                       [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"hog\"\ncopies = 2\n";
const CYCLIC_WL: &str = "[[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\nthreads = 4\n\
                         [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"hog\"\ncopies = 1\n";

/// A Xen host (`host`) of `pcpus` pCPUs with `domains` guests of 4 vCPUs running `sched`, domain
/// `d` running `wl(d)`.
fn four_vcpu_host(
    name: &str,
    pcpus: u32,
    host: &str,
    domains: u32,
    sched: &str,
    wl: impl Fn(u32) -> &'static str,
) -> String {
    let mut s = xen_host(name, pcpus, sockets_for(pcpus), host);
    for d in 0..domains {
        s += &domain(&format!("d{d}"), 4, sched);
        s += wl(d);
    }
    s
}

/// The mixed mix on `pcpus` pCPUs under Credit2 over CFS (the former `large`, `x1024`, `x4096`
/// at 64, 1,024 and 4,096 pCPUs).
pub fn mixed_scenario(name: &str, pcpus: u32) -> String {
    mixed_on(name, pcpus, "credit2", pcpus / 2)
}

/// The mixed mix under host scheduler `host` with `domains` domains of 4 vCPUs over CFS.
pub fn mixed_on(name: &str, pcpus: u32, host: &str, domains: u32) -> String {
    four_vcpu_host(name, pcpus, host, domains, CFS, mixed_workloads)
}

/// 1,000 domains of 2 vCPUs on 256 pCPUs (Credit2 over CFS), cycling through: Context1 on
/// vCPU 0; cyclictest with 2 threads; one hog; 2 × (300 µs compute, 700 µs sleep).
fn vm1000(name: &str) -> String {
    let mut s = xen_host(name, 256, 2, "credit2");
    for d in 0..1000 {
        s += &domain(&format!("vm{d}"), 2, CFS);
        s += match d % 4 {
            0 => "[[domain.workload]]\nkind = \"context1\"\nname = \"ctx\"\naffinity = [0]\n",
            1 => "[[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\nthreads = 2\n",
            2 => "[[domain.workload]]\nkind = \"cpu_loop\"\nname = \"hog\"\n",
            _ => {
                "[[domain.workload]]\nkind = \"program\"\nname = \"io\"\ncopies = 2\nsteps = [\n\
                  { op = \"compute\", exp_us = 300 },\n{ op = \"sleep\", exp_us = 700 },\n\
                  { op = \"loop\", to = 0 },\n]\n"
            }
        };
    }
    s
}

/// Every guest: a SCHED_DEADLINE control loop (1 ms every 5 ms, deadline 4 ms: 0.8 ms of
/// work), a deadline reservation (3 ms every 10 ms of a CPU-bound loop), a fair hog and a
/// fair sleep/compute program, on 4 vCPUs; Credit2 over CFS (with its RT and deadline classes).
const DEADLINE_WL: &str = "[[domain.workload]]\nkind = \"program\"\nname = \"control\"\n\
    policy = \"deadline\"\nsched_runtime_ns = 1000000\nsched_deadline_ns = 4000000\n\
    sched_period_ns = 5000000\nsteps = [\n{ op = \"compute\", us = 800 },\n\
    { op = \"sleep\", us = 4200 },\n{ op = \"loop\", to = 0 },\n]\n\
    [[domain.workload]]\nkind = \"program\"\nname = \"reserve\"\npolicy = \"deadline\"\n\
    sched_runtime_ns = 3000000\nsched_deadline_ns = 10000000\nsched_period_ns = 10000000\n\
    steps = [{ op = \"compute\", ms = 10 }, { op = \"loop\", to = 0 }]\n\
    [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"hog\"\n\
    [[domain.workload]]\nkind = \"program\"\nname = \"io\"\ncopies = 2\nsteps = [\n\
    { op = \"compute\", exp_us = 300 },\n{ op = \"sleep\", exp_us = 700 },\n\
    { op = \"loop\", to = 0 },\n]\n";

/// The seed-003-like KVM host: 2 pCPUs, Linux CFS (5.10) on the host and in a 1-vCPU guest
/// that runs cyclictest (`-n`, 1 ms, a normal task as in the document's command line) beside
/// an infinite loop; two infinite loops on the host.
fn seed003like(name: &str) -> String {
    format!(
        "name = \"{name}\"\n[run]\nduration_ms = 1000\nseed = 1\n[machine]\npcpus = 2\n\
         hypervisor = \"kvm\"\n[host]\nscheduler = \"linux\"\n[host.sched]\n{CFS}\
         [[host.process]]\nkind = \"cpu_loop\"\nname = \"hostloop\"\ncopies = 2\n{}\
         [[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\nthreads = 1\n\
         interval_us = 1000\nhistogram_us = 5000\n\
         [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"loop\"\n",
        domain("guest", 1, CFS)
    )
}

/// A 64-vCPU KVM host: 16 pCPUs with the host kernel's default (EEVDF 6.12), 16 guests of 4
/// vCPUs under EEVDF 6.12 with the mixed mix's workloads.
fn kvm64(name: &str) -> String {
    let mut s = format!(
        "name = \"{name}\"\n[run]\nduration_ms = 1000\n[machine]\npcpus = 16\n\
         hypervisor = \"kvm\"\n[host]\nscheduler = \"linux\"\n"
    );
    for d in 0..16 {
        s += &domain(&format!("g{d}"), 4, EEVDF);
        s += mixed_workloads(d);
    }
    s
}

fn bench(name: &str, what: &str, src: String, default_seconds: f64) -> Bench {
    Bench {
        name: name.to_string(),
        what: what.to_string(),
        src,
        overrides: Vec::new(),
        default_seconds,
    }
}

/// The scenario named `name`, or None.
pub fn get(name: &str) -> Option<Bench> {
    let b = match name {
        "seed000" => bench(
            "seed000",
            "the shipped seed-000 scenario (8 pCPUs, Context1 + hogs, Credit2 over CFS)",
            SEED000.to_string(),
            1.0,
        ),
        "seed001" => bench(
            "seed001",
            "the shipped seed-001 scenario (4 pCPUs, Xen 3.3 Credit1, video and booting guests; \
             its own length: guests are created at 1 s)",
            SEED001.to_string(),
            26.0,
        ),
        "seed002" => Bench {
            overrides: vec![(
                "domain.0.kernel.evtchn_order".to_string(),
                "round_robin".to_string(),
            )],
            ..bench(
                "seed002",
                "the shipped seed-002 scenario (1 pCPU, 16 domains, I/O through dom0), \
                 round-robin fix on",
                SEED002.to_string(),
                1.0,
            )
        },
        "large" => bench(
            "large",
            "= mixed-p64 (the former name)",
            mixed_scenario("bench_large", 64),
            1.0,
        ),
        "x1024" => bench(
            "x1024",
            "= mixed-p1024 (the former name)",
            mixed_scenario("bench_x1024", 1024),
            0.1,
        ),
        "x4096" => bench(
            "x4096",
            "= mixed-p4096 (the former name)",
            mixed_scenario("bench_x4096", 4096),
            0.02,
        ),
        "vm1000-p256" => bench(
            name,
            "1,000 domains x 2 vCPUs on 256 pCPUs, Credit2 over CFS, mixed workloads",
            vm1000(name),
            0.1,
        ),
        "eevdf-p64" => bench(
            name,
            "mixed-p64 with EEVDF 6.12 guests",
            four_vcpu_host(name, 64, "credit2", 32, EEVDF, mixed_workloads),
            0.2,
        ),
        "seed003like" => bench(
            name,
            "KVM host, 2 pCPUs, CFS at both levels: a 1-vCPU guest with cyclictest and a loop, \
             2 host loops",
            seed003like(name),
            10.0,
        ),
        "kvm64" => bench(
            name,
            "KVM host, 16 pCPUs, EEVDF 6.12 at both levels: 16 guests x 4 vCPUs, mixed workloads",
            kvm64(name),
            0.2,
        ),
        "deadline-p64" => bench(
            name,
            "64 pCPUs, 32 guests x 4 vCPUs, Credit2 over CFS: 2 SCHED_DEADLINE tasks, a hog, \
             2 sleep/compute",
            four_vcpu_host(name, 64, "credit2", 32, CFS, |_| DEADLINE_WL),
            1.0,
        ),
        "bfs-p64" => bench(
            name,
            "mixed-p64 with BFS 0.458 guests",
            four_vcpu_host(name, 64, "credit2", 32, BFS, mixed_workloads),
            0.2,
        ),
        "nas" => bench(
            name,
            "the shipped nas_parallel scenario (LU class A, 16 ranks, 8 pCPUs, Credit2): 1 s \
             holds the whole job, which ends just before",
            NAS.to_string(),
            1.0,
        ),
        "rtds" => bench(
            name,
            "mixed workloads under Xen RTDS: 64 domains x 4 vCPUs on 64 pCPUs",
            mixed_on("bench_rtds", 64, "rtds", 64),
            0.2,
        ),
        _ => return sized(name),
    };
    Some(b)
}

/// A `<mix>-p<pcpus>` scenario of the size family.
fn sized(name: &str) -> Option<Bench> {
    let (mix, p) = name.split_once("-p")?;
    let pcpus: u32 = p.parse().ok()?;
    if !SIZES.contains(&pcpus) {
        return None;
    }
    let domains = pcpus / 2;
    let (what, src) = match mix {
        "ctx1" => (
            "Context1 pinned to vCPU 0 + 2 hogs in every guest",
            four_vcpu_host(name, pcpus, "credit2", domains, CFS, |_| CTX1_WL),
        ),
        "cyclic" => (
            "cyclictest (4 threads, 1 ms) + 1 hog in every guest",
            four_vcpu_host(name, pcpus, "credit2", domains, CFS, |_| CYCLIC_WL),
        ),
        "mixed" => (
            "guests cycle: Context1 + 2 hogs; cyclictest + hog; 4 hogs; 4 x sleep/compute",
            mixed_scenario(name, pcpus),
        ),
        _ => return None,
    };
    let what = format!("{pcpus} pCPUs, {domains} guests x 4 vCPUs, Credit2 over CFS: {what}");
    // cyclictest's events are few and heavy (about 2.4 actions each): five times the length
    // gives its rows a run of comparable CPU time.
    let scale = if mix == "cyclic" { 5.0 } else { 1.0 };
    Some(bench(name, &what, src, scale * default_seconds_for(pcpus)))
}

/// The size family's names: every mix at every size, then vm1000-p256.
pub fn size_family() -> Vec<String> {
    let mut v: Vec<String> = MIXES
        .iter()
        .flat_map(|m| SIZES.iter().map(move |p| format!("{m}-p{p}")))
        .collect();
    v.push("vm1000-p256".to_string());
    v
}

/// Expands a name or a group name into scenario names: `all` (seed000 + large, as before the
/// set existed), `scale` (x1024 + x4096), `sizes` (the size family), `extra` (the scheduler
/// family), `set` (sizes + extra: the set `bench/baseline.json` records), `small` (the set
/// without the 1,024- and 4,096-pCPU rows).
pub fn expand(name: &str) -> Option<Vec<String>> {
    let v = match name {
        "all" => vec!["seed000".to_string(), "large".to_string()],
        "scale" => vec!["x1024".to_string(), "x4096".to_string()],
        "sizes" => size_family(),
        "extra" => EXTRAS.iter().map(|s| s.to_string()).collect(),
        "set" => {
            let mut v = size_family();
            v.extend(EXTRAS.iter().map(|s| s.to_string()));
            v
        }
        "small" => expand("set")?
            .into_iter()
            .filter(|n| !n.ends_with("-p1024") && !n.ends_with("-p4096"))
            .collect(),
        n => {
            get(n)?;
            vec![n.to_string()]
        }
    };
    Some(v)
}

/// Every name `get` knows, in listing order.
pub fn all_names() -> Vec<String> {
    let mut v = expand("set").expect("set");
    v.extend(LEGACY.iter().map(|s| s.to_string()));
    v
}
