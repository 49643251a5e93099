//! The hypervisor seam (issue 10 item 6; `vmsched_core::hv`, docs/design.md "Hypervisor seam"):
//! guest interrupts held while a vCPU is away and delivered when it runs, the halt decision of
//! each exit model (block, KVM halt-polling, stay), trapped spins, kick and hypercall costs,
//! and the presets chosen by `[machine] hypervisor`, `arch`, `vwfi` and `[[domain]] guest_type`.

use vmsched_core::hv::{ExitModel, Halt, KvmKnobs, Spin};
use vmsched_core::report::Results;
use vmsched_core::scenario::{Arch, GuestType, Hypervisor, Vwfi};

#[allow(dead_code)]
#[path = "common/run.rs"]
mod run;
use run::{counter, ent};

fn run_src(src: &str, ov: &[(&str, &str)]) -> Results {
    let ov: Vec<(String, String)> = ov
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let s = vmsched_sched::load("hv.toml", src, &ov).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.run();
    sim.results()
}

fn refused(src: &str, ov: &[(&str, &str)]) -> vmsched_core::scenario::ScenarioError {
    let ov: Vec<(String, String)> = ov
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match vmsched_sched::load("hv.toml", src, &ov) {
        Ok(_) => panic!("{ov:?} should be refused"),
        Err(e) => e,
    }
}

fn hist(r: &Results, w: &str) -> vmsched_core::metrics::HistSummary {
    let wl = r.workloads.iter().find(|x| x.name == w).unwrap();
    wl.histograms[0].1.clone()
}

/// One guest `g` of one vCPU owning pCPU 0 (the pinned host), running a task that computes
/// 10 µs and sleeps `sleep_us` (no slack) in a loop, counting its loops.
fn idle_guest(machine: &str, sleep_us: u64) -> String {
    format!(
        "[run]\nvary = false\nduration_ms = 100\n[machine]\npcpus = 1\n{machine}\n[host]\nscheduler = \"pinned\"\n\
         [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"program\"\nname = \"s\"\ncounters = [\"n\"]\n\
         steps = [{{ op = \"compute\", us = 10 }}, {{ op = \"sleep\", us = {sleep_us}, slack_ns = 0 }}, \
         {{ op = \"count\", counter = \"n\" }}, {{ op = \"loop\", to = 0 }}]\n"
    )
}

const MS100: u64 = 100_000_000;

// ---- pending interrupts ---------------------------------------------------------------------

#[test]
fn a_guest_timer_is_held_while_its_vcpu_is_away_and_delivered_when_it_runs() {
    // Two single-vCPU guests on one pCPU, both busy: the cyclictest thread's timer often expires
    // while its vCPU is preempted; it is held (the latency covers the other vCPU's slice) and
    // delivered when the vCPU runs again (the latency is never longer than the vCPU's longest
    // absence plus the timer slack).
    let src = "[run]\nvary = false\nduration_ms = 1000\n[machine]\npcpus = 1\n\
               [host]\nscheduler = \"credit2\"\nratelimit_us = 1000\n\
               [[domain]]\nname = \"rt\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
               [[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\nmain_thread = false\n\
               [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"bg\"\n\
               [[domain]]\nname = \"hog\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
               [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"h\"\n";
    let r = run_src(src, &[]);
    let h = hist(&r, "ct");
    let away = ent(&r, "rt.v0").wait_max_ns;
    assert!(
        h.max_us >= 500,
        "an expiry waits for the other vCPU's slice: max {} µs",
        h.max_us
    );
    assert!(
        h.max_ns <= away + 100_000,
        "delivered as soon as the vCPU runs again: latency {} ns, longest absence {away} ns",
        h.max_ns
    );
    assert!(h.count >= 500, "the thread keeps sampling: {}", h.count);
    assert!(ent(&r, "hog.v0").cpu_share > 0.3 && ent(&r, "rt.v0").cpu_share > 0.3);
}

#[test]
fn a_halted_vcpu_is_woken_for_its_pending_timer_and_blocks_again() {
    // Halt::Block (Xen x86 PV, the default): the idle vCPU blocks at the host, each timer
    // wakes it through the host scheduler, the task runs, and the vCPU blocks again.
    let r = run_src(&idle_guest("", 1000), &[]);
    let n = counter(&r, "s", "n");
    assert!((97..=100).contains(&n), "about 100/1.01 loops: {n}");
    let v = ent(&r, "g.v0");
    assert!(v.blocked_ns > 95 * MS100 / 100, "halted: {}", v.blocked_ns);
    assert!(v.runs >= n, "one host wake-up per loop: {} runs", v.runs);
}

// ---- the halt decision ------------------------------------------------------------------------

/// Runs `src` and returns the simulation (for the vCPUs' KVM windows) with its results.
fn run_sim(src: &str) -> (vmsched_core::sim::Simulation, Results) {
    let s = vmsched_sched::load("hv.toml", src, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = vmsched_sched::build(&s);
    sim.set_debug_checks(true);
    sim.run();
    let r = sim.results();
    (sim, r)
}

/// Guest `g`'s vCPU 0 KVM halt-poll window at the end of a run.
fn poll_window(sim: &vmsched_core::sim::Simulation) -> u64 {
    sim.kvm_halt_poll_ns(vmsched_core::LevelId(1), vmsched_core::CpuId(0))
}

#[test]
fn kvm_halt_polling_avoids_the_host_block_when_the_wake_comes_within_the_window() {
    // KVM x86 (cap halt_poll_ns = 200 µs); the task sleeps 100 µs. The vCPU's window starts at
    // 0 and grows after every halt that outlasted it but not the cap: 10, 20, 40, 80, 160 µs
    // (halt_poll_ns_grow_start, then doubling). From then on every wake-up lands in the
    // window: the vCPU never blocks again and the pCPU is busy.
    let (sim, r) = run_sim(&idle_guest("hypervisor = \"kvm\"", 100));
    assert_eq!(
        poll_window(&sim),
        160_000,
        "grown to the first window past the halt"
    );
    let v = ent(&r, "g.v0");
    assert!(
        (5..=7).contains(&v.runs),
        "blocked only while the window grew: {} runs",
        v.runs
    );
    assert!(
        v.cpu_share > 0.99,
        "the poll keeps the pCPU busy: {}",
        v.cpu_share
    );
    let n = counter(&r, "s", "n");
    assert!(n > 800, "the loop runs at its own pace: {n}");
    // Xen x86 blocks and is woken every time instead.
    let xen = run_src(&idle_guest("", 100), &[]);
    assert!(ent(&xen, "g.v0").runs >= 800);
    assert!(ent(&xen, "g.v0").cpu_share < 0.2);
}

#[test]
fn kvm_cap_halt_poll_sets_one_vms_cap_in_place_of_the_module_parameter() {
    // KVM_CAP_HALT_POLL (Linux 5.8 on): the VM's cap replaces `halt_poll_ns` for its vCPUs.
    let with_cap = |machine: &str, cap: u64| {
        idle_guest(machine, 100).replace(
            "name = \"g\"\nvcpus = 1\n",
            &format!("name = \"g\"\nvcpus = 1\nhalt_poll_ns = {cap}\n"),
        )
    };
    // A cap of 0 turns this VM's polling off under the default module parameter: the vCPU
    // blocks at every halt, as under Xen.
    let (sim, r) = run_sim(&with_cap("hypervisor = \"kvm\"", 0));
    assert_eq!(poll_window(&sim), 0, "no window opens under a cap of 0");
    assert!(ent(&r, "g.v0").runs >= 800, "{}", ent(&r, "g.v0").runs);
    assert!(ent(&r, "g.v0").cpu_share < 0.2);
    // The module parameter off, the VM's 200 µs cap on: it polls as under the default.
    let (sim, r) = run_sim(&with_cap("hypervisor = \"kvm\"\nhalt_poll_ns = 0", 200_000));
    assert_eq!(poll_window(&sim), 160_000, "grown under the VM's own cap");
    assert!(ent(&r, "g.v0").cpu_share > 0.99);
    // Refused on Xen and under a 3.17 host (no such capability), naming the field.
    let e = refused(&with_cap("", 1000), &[]);
    assert_eq!(e.field, "domain.0.halt_poll_ns", "{e}");
    let kvm = kvm_spinner(0, "").replace(
        "name = \"g\"\nvcpus = 1\n",
        "name = \"g\"\nvcpus = 1\nhalt_poll_ns = 1000\n",
    );
    assert!(kvm.contains("halt_poll_ns = 1000"), "{kvm}");
    assert!(vmsched_sched::load("hv.toml", &kvm, &[]).is_ok());
    let ov = [
        ("host.sched.scheduler", "cfs"),
        ("host.sched.kernel", "\"3.17\""),
    ];
    let e = refused(&kvm, &ov);
    assert_eq!(e.field, "domain.0.halt_poll_ns", "{e}");
    assert!(e.message.contains("5.8"), "{e}");
}

#[test]
fn kvm_halt_polling_never_starts_for_halts_longer_than_the_cap() {
    // The task sleeps 1 ms, longer than the 200 µs cap: no halt grows a window from 0, so the
    // vCPU blocks at once each time, exactly as with polling off (and as Xen).
    let (sim, r) = run_sim(&idle_guest("hypervisor = \"kvm\"", 1000));
    assert_eq!(poll_window(&sim), 0);
    let v = ent(&r, "g.v0");
    let n = counter(&r, "s", "n");
    assert!(
        v.runs >= n,
        "blocked and woken every loop: {} runs, {n} loops",
        v.runs
    );
    let off = run_src(
        &idle_guest("hypervisor = \"kvm\"\nhalt_poll_ns = 0", 1000),
        &[],
    );
    let xen = run_src(&idle_guest("", 1000), &[]);
    assert_eq!(v.running_ns, ent(&off, "g.v0").running_ns, "as polling off");
    assert_eq!(
        ent(&off, "g.v0").running_ns,
        ent(&xen, "g.v0").running_ns,
        "no poll: block at once"
    );
}

/// One guest `g` of one vCPU alone on pCPU 0 under a KVM host (EEVDF 6.12; `kvm` in its
/// `[host.kvm]`), whose task computes 10 µs and then sleeps 100 µs `short` times and 1 ms
/// once, in a loop.
fn mixed_sleeps(kvm: &str, short: u32) -> String {
    let mut steps = String::new();
    for _ in 0..short {
        steps.push_str(
            "{ op = \"compute\", us = 10 }, { op = \"sleep\", us = 100, slack_ns = 0 }, ",
        );
    }
    format!(
        "[run]\nduration_ms = 100\n[machine]\npcpus = 1\nhypervisor = \"kvm\"\n\
         [host]\nscheduler = \"linux\"\n[host.kvm]\n{kvm}\n\
         [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"program\"\nname = \"s\"\n\
         steps = [{steps}{{ op = \"compute\", us = 10 }}, {{ op = \"sleep\", us = 1000, slack_ns = 0 }}, \
         {{ op = \"loop\", to = 0 }}]\n"
    )
}

#[test]
fn kvm_halt_polling_polls_its_window_then_blocks_and_a_long_halt_shrinks_it() {
    // Eight 100 µs sleeps grow the window to 160 µs; the 1 ms sleep then polls 160 µs, blocks,
    // and its halt (longer than the cap) shrinks the window: with halt_poll_ns_shrink = 0 to
    // 0 (it grows again from 10 µs: the next short halts block), with 2 to 80 µs (the next
    // short halt still blocks once, 80 → 160).
    let shrink = |k: u32| run_sim(&mixed_sleeps(&format!("halt_poll_ns_shrink = {k}"), 8));
    let (s0, r0) = shrink(0);
    let (s2, r2) = shrink(2);
    // Each round (8 short + 1 long sleep) blocks: shrink 0, 5 times while the window grows
    // back and once for the long sleep; shrink 2, once for the long sleep and once at 80 µs.
    let loops0 = ent(&r0, "g.v0").runs;
    let loops2 = ent(&r2, "g.v0").runs;
    assert!(
        loops0 > 2 * loops2,
        "shrink 0 blocks far more often than shrink 2: {loops0} vs {loops2} runs"
    );
    // The long sleep's window is polled in full: the vCPU runs its work plus 160 µs per round.
    let round_ns = 9 * 10_000 + 8 * 100_000 + 1_000_000;
    let rounds = MS100 / round_ns;
    let polled = ent(&r2, "g.v0").running_ns;
    let per_round = polled / rounds;
    assert!(
        per_round > 90_000 + 8 * 80_000 + 150_000,
        "the short sleeps and the long sleep's window are polled: {per_round} ns per round"
    );
    // Windows at the end of a run (after a long sleep's shrink, then short sleeps' grows).
    assert!(poll_window(&s0) <= 160_000 && poll_window(&s2) <= 160_000);
    // A grow factor of 0 keeps the window at 0.
    let (off, _) = run_sim(&mixed_sleeps("halt_poll_ns_grow = 0", 8));
    assert_eq!(
        poll_window(&off),
        0,
        "halt_poll_ns_grow = 0: a window never opens"
    );
}

/// KVM on one pCPU: guest `g` computes 10 µs and sleeps 150 µs (its poll window grows to
/// 160 µs within the first millisecond: from then on it polls through every sleep); guest
/// `w` runs `w_workload`.
fn poller_and(w_workload: &str) -> String {
    format!(
        "[run]\nvary = false\nduration_ms = 100\n[machine]\npcpus = 1\nhypervisor = \"kvm\"\n\
         [host]\nscheduler = \"credit2\"\nratelimit_us = 0\n\
         [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"program\"\nname = \"s\"\n\
         steps = [{{ op = \"compute\", us = 10 }}, {{ op = \"sleep\", us = 150, slack_ns = 0 }}, {{ op = \"loop\", to = 0 }}]\n\
         [[domain]]\nname = \"w\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nname = \"t\"\n{w_workload}\n"
    )
}

#[test]
fn a_reschedule_of_the_pcpu_ends_a_poll_and_the_vcpu_blocks() {
    // `w` wakes every 3 ms for 10 µs: it has more credit than g, so Credit2 tickles the pCPU
    // when it wakes during one of g's polls (g polls almost all the time). The poll gives up
    // (need_resched) and g's vCPU blocks instead of being preempted: g is woken again about
    // once per w wake-up, and (almost) never preempted.
    let r = run_src(
        &poller_and("kind = \"program\"\nsteps = [{ op = \"compute\", us = 10 }, { op = \"sleep\", us = 3000, slack_ns = 0 }, { op = \"loop\", to = 0 }]"),
        &[],
    );
    let g = ent(&r, "g.v0");
    let w = ent(&r, "w.v0");
    assert!(w.runs >= 30, "w wakes every 3 ms");
    assert!(
        g.runs >= 25,
        "a cut poll blocks, and the next timer wakes the vCPU: {} runs",
        g.runs
    );
    assert!(
        g.preemptions <= 1,
        "a cut poll blocks: {} preemptions",
        g.preemptions
    );
}

#[test]
fn a_poll_without_a_reschedule_keeps_the_pcpu_from_a_waiting_vcpu() {
    // `w` is a CPU hog with less credit than g: Credit2 does not tickle for it, and it waits
    // while g polls (upstream KVM stops polling as soon as another task is runnable on the
    // pCPU, `single_task_running`, which a Xen host scheduler does not tell: docs/kvm.md).
    let r = run_src(&poller_and("kind = \"cpu_loop\""), &[]);
    let g = ent(&r, "g.v0");
    let w = ent(&r, "w.v0");
    // g's work is 10 µs in 160: its polls hold the pCPU far beyond it.
    assert!(g.cpu_share > 0.3, "g polls: {:.3}", g.cpu_share);
    assert!(
        w.runnable_ns as f64 > 0.3 * MS100 as f64,
        "the hog waits through g's work and polls: {}",
        w.runnable_ns
    );
}

#[test]
fn an_idle_vcpu_that_stays_never_blocks() {
    // Halt::Stay: Xen on Arm with vwfi=native, and KVM arm64 with wfi_trap_policy=notrap.
    for hv in ["xen", "kvm"] {
        let m = format!("arch = \"arm64\"\nvwfi = \"native\"\nhypervisor = \"{hv}\"");
        let r = run_src(&idle_guest(&m, 1000), &[]);
        let v = ent(&r, "g.v0");
        assert_eq!(v.runs, 1, "{hv}: the vCPU never leaves its pCPU");
        assert!(v.cpu_share > 0.999, "{hv}: the pCPU never idles");
        assert!((97..=100).contains(&counter(&r, "s", "n")));
    }
}

#[test]
fn a_block_hypercall_cost_keeps_the_vcpu_on_its_pcpu_that_long() {
    let r = run_src(&idle_guest("hypercall_ns = 20000", 1000), &[]);
    let busy = ent(&r, "g.v0").running_ns as f64 / MS100 as f64;
    assert!(
        (busy - 30.0 / 1010.0).abs() < 0.005,
        "10 µs of work and 20 µs in the block path per loop: {busy:.4}"
    );
}

#[test]
fn a_kick_cost_delays_the_wake_of_a_halted_vcpu() {
    // cyclictest in an idle guest: its vCPU is halted at every expiry; the kick latency adds to
    // every sample.
    let src = "[run]\nvary = false\nduration_ms = 200\n[machine]\npcpus = 1\n[host]\nscheduler = \"pinned\"\n\
               [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
               [[domain.workload]]\nkind = \"cyclictest\"\nname = \"ct\"\nmain_thread = false\n";
    let base = hist(&run_src(src, &[]), "ct");
    let kicked = hist(&run_src(src, &[("machine.kick_ns", "100000")]), "ct");
    assert_eq!(kicked.min_us, base.min_us + 100, "min");
    assert_eq!(kicked.max_us, base.max_us + 100, "max");
    assert_eq!(kicked.count, base.count);
}

// ---- spins --------------------------------------------------------------------------------------

/// A trappable spinner (`wfe = true`) in one guest and a CPU hog in another, one pCPU.
fn spin_shared(machine: &str, spinner_keys: &str) -> String {
    format!(
        "[run]\nvary = false\nduration_ms = 300\n[machine]\npcpus = 1\n{machine}\n[host]\nscheduler = \"credit2\"\n\
         [[domain]]\nname = \"g\"\nvcpus = 1\n{spinner_keys}\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"program\"\nname = \"p\"\nchannels = [\"never\"]\n\
         steps = [{{ op = \"spin\", chan = \"never\", wfe = true }}, {{ op = \"exit\" }}]\n\
         [[domain]]\nname = \"hog\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"cpu_loop\"\nname = \"h\"\n"
    )
}

#[test]
fn a_trapped_spin_yields_where_the_exit_model_traps_it() {
    // Xen x86 HVM: a PAUSE-loop exit yields (as a trapped WFE on Arm); KVM's directed yield is a
    // yield here too. Xen x86 PV does not intercept PAUSE: the spinner competes as a hog.
    for (m, keys) in [
        ("", "guest_type = \"hvm\""),
        ("arch = \"arm64\"", ""),
        ("hypervisor = \"kvm\"", ""),
        ("hypervisor = \"kvm\"\narch = \"arm64\"", ""),
    ] {
        let r = run_src(&spin_shared(m, keys), &[]);
        let s = ent(&r, "g.v0").cpu_share;
        assert!(s < 0.1, "{m} {keys}: the spinner yields: {s:.3}");
    }
    for (m, keys) in [
        ("", ""),
        ("", "guest_type = \"pv\""),
        ("arch = \"arm64\"\nvwfi = \"native\"", ""),
        ("arch = \"arm64\"\nwfe_trap_ns = 0", ""),
    ] {
        let r = run_src(&spin_shared(m, keys), &[]);
        let s = ent(&r, "g.v0").cpu_share;
        assert!((s - 0.5).abs() < 0.05, "{m} {keys}: not trapped: {s:.3}");
    }
}

// ---- presets and configuration --------------------------------------------------------------------

#[test]
fn presets_map_from_the_configuration() {
    let p = |hv, arch, vwfi, g, poll| ExitModel::for_guest(hv, arch, vwfi, g, 2000, poll, 0, 0);
    use GuestType::{Hvm, Pv};
    use Hypervisor::{Kvm, Xen};
    let yield2 = Spin::Yield { trap_ns: 2000 };
    let mut no_poll = KvmKnobs::defaults(Arch::X86);
    no_poll.halt_poll.max_ns = 0;
    let cases = [
        (
            p(Xen, Arch::X86, Vwfi::Trap, Pv, None),
            Halt::Block,
            Spin::Run,
        ),
        (
            p(Xen, Arch::X86, Vwfi::Trap, Hvm, None),
            Halt::Block,
            yield2,
        ),
        (
            p(Xen, Arch::Arm64, Vwfi::Trap, Hvm, None),
            Halt::Block,
            yield2,
        ),
        (
            p(Xen, Arch::Arm64, Vwfi::Native, Hvm, None),
            Halt::Stay,
            Spin::Run,
        ),
        (
            p(Kvm, Arch::X86, Vwfi::Trap, Hvm, None),
            Halt::Poll(KvmKnobs::defaults(Arch::X86).halt_poll),
            Spin::DirectedYield { trap_ns: 2000 },
        ),
        (
            p(Kvm, Arch::Arm64, Vwfi::Trap, Hvm, None),
            Halt::Poll(KvmKnobs::defaults(Arch::Arm64).halt_poll),
            Spin::DirectedYield { trap_ns: 2000 },
        ),
        (
            p(Kvm, Arch::X86, Vwfi::Trap, Hvm, Some(no_poll)),
            Halt::Block,
            Spin::DirectedYield { trap_ns: 2000 },
        ),
        (
            p(Kvm, Arch::Arm64, Vwfi::Native, Hvm, None),
            Halt::Stay,
            Spin::Run,
        ),
    ];
    for (i, (m, halt, spin)) in cases.into_iter().enumerate() {
        assert_eq!((m.halt, m.spin), (halt, spin), "case {i}");
    }
    // x86 KVM's PAUSE-loop exits have their growing window; arm64's WFE traps have none.
    assert_eq!(
        p(Kvm, Arch::X86, Vwfi::Trap, Hvm, None).ple,
        KvmKnobs::defaults(Arch::X86).ple
    );
    assert!(p(Kvm, Arch::Arm64, Vwfi::Trap, Hvm, None).ple.is_none());
    // The default is today's Xen x86 PV guest, and the engine's default.
    assert_eq!(
        p(Xen, Arch::X86, Vwfi::Trap, Pv, None),
        ExitModel::default()
    );
    let costs = ExitModel::for_guest(Xen, Arch::X86, Vwfi::Trap, Pv, 0, None, 7, 9);
    assert_eq!((costs.kick_ns, costs.hypercall_ns), (7, 9));
}

#[test]
fn guest_types_default_by_hypervisor_and_arch() {
    let load = |machine: &str, keys: &str| {
        let src = format!(
            "[machine]\npcpus = 1\n{machine}\n[host]\nscheduler = \"pinned\"\n\
             [[domain]]\nname = \"g\"\nvcpus = 1\n{keys}\n[domain.sched]\nscheduler = \"cfs\"\n"
        );
        let s = vmsched_sched::load("hv.toml", &src, &[]).unwrap_or_else(|e| panic!("{e}"));
        s.machine.guest_type(s.domains[0].guest_type).unwrap()
    };
    assert_eq!(load("", ""), GuestType::Pv, "xl's default type on x86");
    assert_eq!(load("", "guest_type = \"hvm\""), GuestType::Hvm);
    assert_eq!(load("arch = \"arm64\"", ""), GuestType::Hvm);
    assert_eq!(load("hypervisor = \"kvm\"", ""), GuestType::Hvm);
}

#[test]
fn configurations_that_do_not_exist_are_refused_naming_the_field() {
    let src = idle_guest("", 1000);
    for (ov, field) in [
        (("machine.vwfi", "\"native\""), "machine.vwfi"),
        (("machine.halt_poll_ns", "1000"), "machine.halt_poll_ns"),
        (("machine.hypervisor", "\"hyperv\""), "machine.hypervisor"),
        (
            ("machine.kick_ns", "9223372036854775807"),
            "machine.kick_ns",
        ),
        (
            ("machine.hypercall_ns", "9223372036854775807"),
            "machine.hypercall_ns",
        ),
    ] {
        let e = refused(&src, &[ov]);
        assert_eq!(e.field, field, "{ov:?}: {e}");
    }
    let arm_pv = idle_guest("arch = \"arm64\"", 1000)
        .replace("vcpus = 1\n", "vcpus = 1\nguest_type = \"pv\"\n");
    assert_eq!(refused(&arm_pv, &[]).field, "domain.0.guest_type");
    let kvm_pv = idle_guest("hypervisor = \"kvm\"", 1000)
        .replace("vcpus = 1\n", "vcpus = 1\nguest_type = \"pv\"\n");
    assert_eq!(refused(&kvm_pv, &[]).field, "domain.0.guest_type");
}

/// Found by the `run` fuzz target once it drew hypervisor costs: a guest CPU taken offline while
/// its domain is paused leaves that CPU with nothing to run though its vCPU is not running. A
/// vCPU that is not running cannot halt, so no halt window (here the block hypercall's cost)
/// may start; it starts when the vCPU runs again and finds nothing (engine invariant: a halt
/// window ends only while its vCPU runs).
#[test]
fn a_cpu_of_a_paused_domain_going_offline_starts_no_halt_window() {
    let src = r#"
[run]
vary = false
duration_ms = 3
warmup_ms = 0
[machine]
pcpus = 2
hypercall_ns = 1
[host]
scheduler = "credit2"
[[domain]]
name = "d0"
vcpus = 3
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "spin"
copies = 2
[[event]]
at_ms = 1
action = "pause"
domain = "d0"
[[event]]
at_ms = 1
action = "cpu_offline"
domain = "d0"
cpu = 1
[[event]]
at_ms = 2
action = "unpause"
domain = "d0"
"#;
    let r = run_src(src, &[]);
    // The run reaches its end; both spinners ran until the pause (2 vCPUs on 2 pCPUs for 1 ms)
    // and one runs again on the CPUs left after the unpause, for at least most of the last ms.
    assert_eq!(r.duration_ns, 3_000_000);
    let spun: u64 = r
        .entities
        .iter()
        .filter(|e| e.name.starts_with("spin."))
        .map(|e| e.executed_ns)
        .sum();
    assert!(spun > 2_500_000, "the spinners ran {spun} ns");
}

/// A 1-vCPU guest spinning forever with PAUSE on a 1-pCPU x86 KVM host (EEVDF 6.12), with
/// `procs` host CPU loops beside it and `kvm` in `[host.kvm]`.
fn kvm_spinner(procs: u32, kvm: &str) -> String {
    let host = if procs > 0 {
        format!("[[host.process]]\nkind = \"cpu_loop\"\nname = \"hl\"\ncopies = {procs}\n")
    } else {
        String::new()
    };
    format!(
        "[run]\nduration_ms = 100\n[machine]\npcpus = 1\nhypervisor = \"kvm\"\n\
         [host]\nscheduler = \"linux\"\n[host.kvm]\n{kvm}\n{host}\
         [[domain]]\nname = \"g\"\nvcpus = 1\n[domain.sched]\nscheduler = \"cfs\"\n\
         [[domain.workload]]\nkind = \"program\"\nname = \"p\"\nchannels = [\"never\"]\n\
         steps = [{{ op = \"spin\", chan = \"never\", wfe = true }}, {{ op = \"exit\" }}]\n"
    )
}

fn ple_window(sim: &vmsched_core::sim::Simulation) -> u64 {
    sim.kvm_ple_window(vmsched_core::LevelId(1), vmsched_core::CpuId(0))
}

#[test]
fn the_ple_window_grows_at_each_exit_and_resets_when_the_vcpu_thread_is_scheduled_in() {
    // Alone on its pCPU the spinner's directed yields find no other vCPU: it stays, and its
    // window doubles at every PAUSE-loop exit (toward ple_window_max, UINT_MAX cycles): the
    // k-th exit comes after 2 µs × (2^k − 1), so 100 ms see 15 doublings.
    let (sim, _) = run_sim(&kvm_spinner(0, ""));
    assert_eq!(ple_window(&sim), 4096 << 15);
    let (sim, _) = run_sim(&kvm_spinner(0, "ple_window_max = 100000"));
    assert_eq!(ple_window(&sim), 100_000);
    // ple_window_grow = 0 keeps the base window (4096), as Linux 3.17's fixed window.
    let (sim, _) = run_sim(&kvm_spinner(0, "ple_window_grow = 0"));
    assert_eq!(ple_window(&sim), 4096);
    // Beside a host loop the vCPU thread is scheduled out at every slice end: each schedule-in
    // resets the window (ple_window_shrink = 0), so it never gets near the cap; the spinner's
    // exits are ~2 µs apart after each schedule-in instead of one per 4 s at the cap.
    let (sim, r) = run_sim(&kvm_spinner(1, ""));
    assert!(ent(&r, "g.v0").runs > 10, "scheduled in again and again");
    assert!(
        ple_window(&sim) < 4096 << 16,
        "reset at every schedule-in: {}",
        ple_window(&sim)
    );
    // SVM's pause filter: pause_filter_count_max (USHRT_MAX) caps it.
    let (sim, _) = run_sim(&kvm_spinner(0, "vendor = \"amd\""));
    assert_eq!(ple_window(&sim), 65535);
    // ple_gap = 0 leaves PAUSE in the guest: no exits, no window; beside a host loop the
    // spinner then keeps its fair share instead of yielding at every exit.
    let (sim, _) = run_sim(&kvm_spinner(0, "ple_gap = 0"));
    assert_eq!(ple_window(&sim), 0);
    let (_, r) = run_sim(&kvm_spinner(1, "ple_gap = 0"));
    let share = ent(&r, "g.v0").cpu_share;
    assert!((share - 0.5).abs() < 0.05, "a plain CPU hog: {share:.3}");
}

#[test]
fn kvm_module_parameters_the_host_lacks_are_refused_naming_the_field() {
    let src = kvm_spinner(0, "");
    let e = refused(
        &src,
        &[
            ("host.kvm.ple_window_grow", "3"),
            ("machine.arch", "\"arm64\""),
        ],
    );
    assert_eq!(e.field, "host.kvm.ple_window_grow", "{e}");
    let e = refused(&src, &[("host.kvm.pause_filter_count", "100")]);
    assert_eq!(e.field, "host.kvm.pause_filter_count", "{e}");
    let e = refused(&src, &[("host.kvm.ple_window", "0")]);
    assert_eq!(e.field, "host.kvm.ple_window", "{e}");
    let k317 = [
        ("host.sched.scheduler", "cfs"),
        ("host.sched.kernel", "\"3.17\""),
    ];
    let e = refused(
        &src,
        &[k317[0], k317[1], ("host.kvm.halt_poll_ns_shrink", "2")],
    );
    assert_eq!(e.field, "host.kvm.halt_poll_ns_shrink", "{e}");
    let e = refused(&src, &[k317[0], k317[1], ("machine.halt_poll_ns", "1000")]);
    assert_eq!(e.field, "machine.halt_poll_ns", "{e}");
}
