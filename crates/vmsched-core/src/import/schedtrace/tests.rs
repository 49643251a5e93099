//! The trace readers on small hand-written traces: the same story in ftrace's and perf
//! script's text, the rules of docs/replay.md (runs summed over preemptions, dependency and
//! timer-like sleeps, interrupts, selection), and errors naming the line.

use super::*;

/// A pinger (pid 10) and a ponger (pid 11) on CPU 0, a looping hog (pid 12) on CPU 1, and a
/// timer wake-up of the pinger from the idle task. Times in µs from 100.000000 s:
///   0  ping runs (running since the start)      ping: c10 k1
///  10  ping wakes pong, 20 ping sleeps          ping: c10 (10..20)
///  20  pong runs, 25 preempted by kworker, 30 back, 40 wakes ping, 50 sleeps
///  60  idle's timer interrupt wakes ping (timer-like sleep of 40)
///  70  ping runs until the end (100).
const FTRACE: &str = "\
# tracer: nop
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
            ping-10      [000] d..2.   100.000000: sched_switch: prev_comm=sh prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=ping next_pid=10 next_prio=120
             hog-12      [001] d.h2.   100.000005: sched_wakeup: comm=kworker/0:1 pid=13 prio=120 target_cpu=000
            ping-10      [000] d..3.   100.000010: sched_wakeup: comm=pong pid=11 prio=120 target_cpu=000
            ping-10      [000] d..2.   100.000020: sched_switch: prev_comm=ping prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=pong next_pid=11 next_prio=120
            pong-11      [000] d..2.   100.000025: sched_switch: prev_comm=pong prev_pid=11 prev_prio=120 prev_state=R+ ==> next_comm=kworker/0:1 next_pid=13 next_prio=120
     kworker/0:1-13      [000] d..2.   100.000030: sched_switch: prev_comm=kworker/0:1 prev_pid=13 prev_prio=120 prev_state=I ==> next_comm=pong next_pid=11 next_prio=120
            pong-11      [000] d..3.   100.000040: sched_wakeup: comm=ping pid=10 prio=120 target_cpu=000
            pong-11      [000] d..2.   100.000050: sched_switch: prev_comm=pong prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
          <idle>-0       [000] d.h3.   100.000060: sched_wakeup: comm=ping pid=10 prio=120 target_cpu=000
          <idle>-0       [000] d..2.   100.000070: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=ping next_pid=10 next_prio=120
             hog-12      [001] d..2.   100.000100: sched_stat_runtime: comm=hog pid=12 runtime=100000 [ns]
";

fn toks(tr: &Trace, comm: &str) -> String {
    let t = tr
        .tasks
        .iter()
        .find(|t| t.comm == comm)
        .unwrap_or_else(|| panic!("no {comm}"));
    format_steps(&t.toks)
}

fn idx(tr: &Trace, comm: &str) -> usize {
    tr.tasks.iter().position(|t| t.comm == comm).unwrap()
}

#[test]
fn ftrace_runs_sleeps_and_wakers() {
    let tr = parse("t", FTRACE, TraceFormat::Ftrace, &Selection::default()).unwrap();
    assert_eq!(tr.cpus, 2);
    assert_eq!(tr.end_ns - tr.start_ns, 100_000);
    let (ping, pong) = (idx(&tr, "ping"), idx(&tr, "pong"));
    // ping: ran 0..20 (waking pong at 10), slept; pong's wake at 40 was not asleep for ping?
    // it was: ping slept at 20, so pong's wake-up at 40 is a dependency; idle's at 60 then
    // finds ping runnable (no sleep to end).
    assert_eq!(
        toks(&tr, "ping"),
        format!("c10000 k{pong} c10000 w{pong} c30000")
    );
    // pong: asleep since the start, woken by ping; ran 20..25 and 30..40 (the preemption
    // is not a sleep), woke ping at 40, ran to 50.
    assert_eq!(toks(&tr, "pong"), format!("w{ping} c15000 k{ping} c10000"));
    // The kworker was woken in the hog's interrupt: timer-like, 5 µs after the start.
    assert_eq!(toks(&tr, "kworker/0:1"), "s5000 c5000");
    // The hog never switched: it ran the whole trace on CPU 1.
    let hog = &tr.tasks[idx(&tr, "hog")];
    assert_eq!(format_steps(&hog.toks), "c100000");
    assert_eq!(hog.cpus, BTreeSet::from([1]));
    assert_eq!(
        tr.tasks[ping].recorded(),
        Recorded {
            cpu_ns: 50_000,
            wakes: 1
        }
    );
    // idle's wake-up of a runnable ping is noted, as is the unused event.
    assert!(
        tr.notes.iter().any(|n| n.message.contains("not asleep")),
        "{:?}",
        tr.notes
    );
    assert!(tr.notes.iter().any(|n| n.key == "sched_stat_runtime"));
}

/// The same story as perf script prints it (`sched_waking`, emitted by the waker; the wake-up
/// from idle has no irq flag, but its waker is the idle task: timer-like all the same).
const PERF: &str = "\
            ping    10 [000] 100.000000000:       sched:sched_switch: prev_comm=sh prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=ping next_pid=10 next_prio=120
            ping    10 [000] 100.000010000:       sched:sched_waking: comm=pong pid=11 prio=120 target_cpu=000
            ping    10 [000] 100.000010500:       sched:sched_wakeup: comm=pong pid=11 prio=120 target_cpu=000
            ping    10 [000] 100.000020000:       sched:sched_switch: prev_comm=ping prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=pong next_pid=11 next_prio=120
            pong    11 [000] 100.000040000:       sched:sched_waking: comm=ping pid=10 prio=120 target_cpu=000
            pong    11 [000] 100.000050000:       sched:sched_switch: prev_comm=pong prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
        swapper     0 [000] 100.000070000:       sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=ping next_pid=10 next_prio=120
 Web Content   12 [001] 100.000100000: sched:sched_stat_runtime: comm=Web Content pid=12 runtime=100000 [ns]
             :-1    -1 [000] 100.000100000: sched:sched_stat_runtime: comm=gone pid=14 runtime=1000 [ns]
";

#[test]
fn perf_script_reads_the_same_and_prefers_waking() {
    let tr = parse("p", PERF, TraceFormat::Perf, &Selection::default()).unwrap();
    let (ping, pong) = (idx(&tr, "ping"), idx(&tr, "pong"));
    assert_eq!(
        toks(&tr, "ping"),
        format!("c10000 k{pong} c10000 w{pong} c30000")
    );
    assert_eq!(toks(&tr, "pong"), format!("w{ping} c20000 k{ping} c10000"));
    // A comm with a space, seen only as a line's current task: it ran all along.
    assert_eq!(toks(&tr, "Web Content"), "c100000");
    assert_eq!(tr.tasks[idx(&tr, "Web Content")].name(), "Web Content:12");
}

#[test]
fn unselected_wakers_make_timer_like_sleeps() {
    let sel = Selection {
        pids: vec![10],
        comms: vec![],
    };
    let tr = parse("t", FTRACE, TraceFormat::Ftrace, &sel).unwrap();
    assert_eq!(tr.tasks.len(), 1);
    // pong is not replayed: ping's sleep from 20 to 40 lasts its recorded 20 µs.
    assert_eq!(toks(&tr, "ping"), "c20000 s20000 c30000");
    let sel = Selection {
        pids: vec![],
        comms: vec!["pong".into()],
    };
    let tr = parse("t", FTRACE, TraceFormat::Ftrace, &sel).unwrap();
    assert_eq!(
        toks(&tr, "pong"),
        "s10000 c15000 c10000".replace("c15000 c10000", "c25000")
    );
    let e = parse(
        "t",
        FTRACE,
        TraceFormat::Ftrace,
        &Selection {
            pids: vec![99],
            comms: vec![],
        },
    )
    .unwrap_err();
    assert!(e.message.contains("no task"), "{e}");
}

#[test]
fn exit_and_priorities() {
    let src = "\
 a-5 [000] d..2. 1.000000: sched_switch: prev_comm=a prev_pid=5 prev_prio=110 prev_state=X ==> next_comm=rt next_pid=6 next_prio=9
 rt-6 [000] d..2. 1.000004: sched_switch: prev_comm=rt prev_pid=6 prev_prio=9 prev_state=R+ ==> next_comm=swapper/0 next_pid=0 next_prio=120
";
    let tr = parse("t", src, TraceFormat::Ftrace, &Selection::default()).unwrap();
    assert_eq!(toks(&tr, "a"), "x");
    assert_eq!(toks(&tr, "rt"), "c4000");
    let s = scenario(&tr, &ScenarioOptions::default());
    let text = crate::import::write_toml(&s);
    assert!(text.contains("nice = -10"), "{text}");
    assert!(
        text.contains("policy = \"fifo\"\nrt_priority = 90"),
        "{text}"
    );
    // Bare metal by default: the KVM host's Linux, the tasks its processes.
    assert!(text.contains("hypervisor = \"kvm\""), "{text}");
    assert!(
        text.contains("[host.sched]\nscheduler = \"eevdf\""),
        "{text}"
    );
    assert!(
        text.contains("[[host.process]]\nkind = \"replay\""),
        "{text}"
    );
    assert!(!text.contains("[[domain]]"), "{text}");
    assert!(text.contains("kernel = \"6.18\""), "{text}");
    assert!(text.contains("duration_ms = 1\n"), "{text}");
    let guest = ScenarioOptions {
        pinned_guest: true,
        ..Default::default()
    };
    let text = crate::import::write_toml(&scenario(&tr, &guest));
    assert!(text.contains("scheduler = \"pinned\""), "{text}");
    assert!(
        text.contains("[[domain.workload]]\nkind = \"replay\""),
        "{text}"
    );
    assert!(!text.contains("hypervisor"), "{text}");
}

#[test]
fn errors_name_the_line() {
    let e = parse(
        "t.txt",
        "# header\n a-5 [000] d..2. 1.0: sched_switch: prev_comm=a prev_pid=x\n",
        TraceFormat::Ftrace,
        &Selection::default(),
    )
    .unwrap_err();
    assert_eq!(e.line, Some(2));
    assert_eq!(e.field, "sched_switch");
    assert!(e.message.contains("cannot read the payload"), "{e}");
    let e = parse(
        "t.txt",
        "\n\nhello world\n",
        TraceFormat::Perf,
        &Selection::default(),
    )
    .unwrap_err();
    assert_eq!(e.line, Some(3));
    assert!(e.message.contains("[CPU]"), "{e}");
    let e = parse(
        "t.txt",
        " a 5 [000] noon: sched:sched_switch: x\n",
        TraceFormat::Perf,
        &Selection::default(),
    )
    .unwrap_err();
    assert!(e.message.contains("timestamp"), "{e}");
    let e = parse(
        "t.txt",
        "# only a header\n",
        TraceFormat::Ftrace,
        &Selection::default(),
    )
    .unwrap_err();
    assert!(e.message.contains("no sched_switch"), "{e}");
}

#[test]
fn timestamps_are_exact() {
    assert_eq!(parse_ts("51988.638955"), Some(51_988_638_955_000));
    assert_eq!(parse_ts("1.000000001"), Some(1_000_000_001));
    assert_eq!(parse_ts("1.0000000001"), None);
    assert_eq!(parse_ts("x.5"), None);
}

#[test]
fn a_run_ends_at_the_next_switch_of_its_cpu() {
    // b is switched in on CPU 0, and the next switch there names c as prev (b's switch-out
    // is lost): b ran 0..10 µs, not to the end of the trace.
    let src = "\
 a-5 [000] d..2. 1.000000: sched_switch: prev_comm=a prev_pid=5 prev_prio=120 prev_state=S ==> next_comm=b next_pid=6 next_prio=120
 c-7 [000] d..2. 1.000010: sched_switch: prev_comm=c prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=a next_pid=5 next_prio=120
 a-5 [000] d..2. 1.000030: sched_stat_runtime: comm=a pid=5 runtime=20000 [ns]
";
    let tr = parse("t", src, TraceFormat::Ftrace, &Selection::default()).unwrap();
    assert_eq!(toks(&tr, "b"), "c10000");
    // c, seen only switching out after b came in, ran nothing here.
    assert!(tr.tasks.iter().all(|t| t.comm != "c"));
    assert_eq!(toks(&tr, "a"), "s10000 c20000");
    // The switch line's current task (c) is not the one switched in (b): noted as a switch
    // the trace does not show.
    assert!(
        tr.notes.iter().any(|n| n.message.contains("a switch lost")),
        "{:?}",
        tr.notes
    );
}

/// Real lines of a tracefs instance filtered by pid (`set_event_pid` with `options/event-fork`)
/// while a workload pinned to CPU 0 ran on a machine busy with builds (Linux 6.18): switches
/// between two tasks outside the filter are not traced, so other tasks appear as a line's
/// current task without a switch-in, and CPU 1 shows no switch at all. Comms hold spaces, and
/// `<...>` is a pid the saved-cmdlines cache had lost.
const FILTERED: &str = "\
# tracer: nop
#
# entries-in-buffer/entries-written: 5843/5843   #P:2
           <...>-23018   [000] d..2. 64812.484072: sched_switch: prev_comm=opt 9xbndkyxlrq prev_pid=23018 prev_prio=120 prev_state=R ==> next_comm=bash next_pid=23016 next_prio=120
            bash-23016   [000] d..2. 64812.484365: sched_switch: prev_comm=bash prev_pid=23016 prev_prio=120 prev_state=S ==> next_comm=bash next_pid=23019 next_prio=120
           <...>-22819   [001] d.s3. 64812.904438: sched_waking: comm=bash pid=23012 prio=120 target_cpu=000
         python3-23000   [000] d..2. 64812.910081: sched_switch: prev_comm=python3 prev_pid=23000 prev_prio=120 prev_state=D ==> next_comm=lto 4dc6yggwf6s next_pid=22819 next_prio=120
 lto 5dvq2tu02vc-23040   [001] dNs3. 64812.910814: sched_waking: comm=python3 pid=23000 prio=120 target_cpu=000
 lto 5dvq2tu02vc-23040   [001] dNs4. 64812.910819: sched_wakeup: comm=python3 pid=23000 prio=120 target_cpu=000
 lto 4dc6yggwf6s-22819   [000] d..2. 64812.912065: sched_switch: prev_comm=lto 4dc6yggwf6s prev_pid=22819 prev_prio=120 prev_state=R ==> next_comm=python3 next_pid=23000 next_prio=120
         python3-23000   [000] d..2. 64812.916071: sched_switch: prev_comm=python3 prev_pid=23000 prev_prio=120 prev_state=R ==> next_comm=rcu_preempt next_pid=15 next_prio=120
";

#[test]
fn a_trace_filtered_by_pid_keeps_one_task_per_cpu() {
    let tr = parse("t", FILTERED, TraceFormat::Ftrace, &Selection::default()).unwrap();
    // µs after 64812 s, as ns.
    let us = |a: u64, b: u64| -> u64 { (b - a) * 1000 };
    // CPU 1 shows no switch: lto 4dc6 (`<...>` there) is its current task at .904438, so it ran there since
    // the start (.484072); it is switched in on CPU 0 at .910081 (a migration the filter
    // hid) and preempted there at .912065: one run, not two overlapping ones.
    assert_eq!(
        toks(&tr, "lto 4dc6yggwf6s"),
        format!("c{}", us(484_072, 912_065))
    );
    // lto 5dvq is CPU 1's current task at .910814, after 4dc6 left it: it ran from there to
    // the end (.916071), not the whole trace.
    assert_eq!(
        toks(&tr, "lto 5dvq2tu02vc"),
        format!("c{}", us(910_814, 916_071))
    );
    // bash 23019 was switched in at .484365 and python3 is CPU 0's current at .910081
    // without a traced switch: 23019's run ends there.
    let b = &tr.tasks[tr.tasks.iter().position(|t| t.pid == 23019).unwrap()];
    assert_eq!(format_steps(&b.toks), format!("c{}", us(484_365, 910_081)));
    // python3 slept at .910081 (D) and was woken in a softirq on CPU 1 (timer-like), then
    // switched in at .912065 and preempted at the end.
    assert_eq!(
        toks(&tr, "python3"),
        format!("s{} c{}", us(910_081, 910_814), us(912_065, 916_071))
    );
    // A pid the cmdlines cache had lost is named by its payload comm, and selected by it.
    assert!(tr.tasks.iter().all(|t| !t.comm.contains("<...>")));
    let sel = Selection {
        pids: vec![],
        comms: vec!["opt 9xbndkyxlrq".into(), "lto 4dc6yggwf6s".into()],
    };
    let only = parse("t", FILTERED, TraceFormat::Ftrace, &sel).unwrap();
    // 23018 was switched out at the trace's first event: nothing of it to replay.
    assert_eq!(only.tasks.len(), 1);
    assert_eq!(only.tasks[0].name(), "lto 4dc6yggwf6s:22819");
    assert!(
        tr.notes
            .iter()
            .any(|n| n.message.contains("filtered by pid")),
        "{:?}",
        tr.notes
    );
    // No CPU runs two tasks at once: the tasks' CPU time fits in the two CPUs' time.
    let total: u64 = tr.tasks.iter().map(|t| t.recorded().cpu_ns).sum();
    assert!(total <= 2 * (tr.end_ns - tr.start_ns), "{total}");
}
