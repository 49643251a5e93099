// The Linux guest classes of the appended choices: EEVDF guests with their release's
// `features`, the RT class's sysctls and fair server with a FIFO/RR program (issue 12), BFS guests
// and SCHED_DEADLINE tasks (docs/eevdf.md, docs/rt.md, docs/bfs.md, docs/deadline.md).
// Part of appended_choices.rs, `include!`d by it (a plain comment: `include!` takes items only).

/// EEVDF's `sched_features` and the first release (of 6.6, 6.12, 6.18) that has each
/// (docs/eevdf.md).
const EEVDF_FEATURES: [(&str, &str); 11] = [
    ("PLACE_LAG", "6.6"),
    ("PLACE_DEADLINE_INITIAL", "6.6"),
    ("PLACE_REL_DEADLINE", "6.12"),
    ("RUN_TO_PARITY", "6.6"),
    ("PREEMPT_SHORT", "6.12"),
    ("NEXT_BUDDY", "6.6"),
    ("PICK_BUDDY", "6.12"),
    ("CACHE_HOT_BUDDY", "6.6"),
    ("DELAY_DEQUEUE", "6.12"),
    ("DELAY_ZERO", "6.12"),
    ("WAKEUP_PREEMPTION", "6.6"),
];

/// Appended choices, per domain in order: its fair class (first option: the CFS guest drawn
/// before; else EEVDF of 6.6, 6.12 or 6.18 with some of that release's `features`), then the
/// RT class (first option: nothing; else `[domain.sched.rt]`'s sysctls, the fair server now and
/// then, and a SCHED_FIFO or SCHED_RR program). One time in 32 a field takes an edge value, to
/// be refused (docs/eevdf.md, docs/rt.md).
fn linux_classes(p: &mut Pick, s: &mut String, ndoms: usize) {
    for d in 0..ndoms {
        let eevdf = p.pick(2) == 1;
        let rt = p.pick(2) == 1;
        if !eevdf && !rt {
            continue;
        }
        let Some((a, b)) = nth_table(s, "[domain.sched]\n", d) else {
            continue;
        };
        let mut t = if eevdf {
            eevdf_sched(p)
        } else {
            s[a..b].to_string()
        };
        if rt {
            t += &rt_class(p, d);
        }
        s.replace_range(a..b, &t);
    }
}

/// `[domain.sched]` of an EEVDF guest (docs/eevdf.md).
fn eevdf_sched(p: &mut Pick) -> String {
    let kernel = p.rare(&["6.6", "6.12", "6.18"], &["6.1", "6.13"]);
    let mut t = format!(
        "[domain.sched]\nscheduler = \"eevdf\"\nkernel = \"{kernel}\"\nhz = {}\n\
         sched_tunable_scaling = {}\nsched_migration_cost_ns = {}\nvcpu_is_preempted = {}\n\
         steal_carry_over = {}\n",
        p.rare(&[100, 250, 1000, 300], &[0, 200]),
        p.rare(&[0, 1, 2], &[3]),
        [0, 500_000, 4_294_967_295u64][p.pick(3) as usize],
        p.pick(2) == 1,
        p.pick(4) == 0,
    );
    if p.pick(3) == 0 {
        t += &format!(
            "base_slice_ns = {}\n",
            p.rare(&[100_000, 750_000, 3_000_000], &[0, 1_000_000_001])
        );
    }
    let mut f = Vec::new();
    for (name, since) in EEVDF_FEATURES {
        if p.pick(4) == 0 && (since == "6.6" || kernel != "6.6") {
            f.push(format!("{name} = {}", p.pick(2) == 1));
        }
    }
    // The edge: a feature 6.6 does not have.
    if kernel == "6.6" && p.rare(&[false], &[true]) {
        f.push("PREEMPT_SHORT = true".to_string());
    }
    t += &format!("features = {{ {} }}\n", f.join(", "));
    t
}

/// `[domain.sched.rt]` (periods short enough to throttle within a short run) and a SCHED_FIFO
/// or SCHED_RR program, a hog or a periodic task, in domain `d` (docs/rt.md).
fn rt_class(p: &mut Pick, d: usize) -> String {
    let period = p.rare(&[1000u64, 200_000, 1_000_000], &[0, 1u64 << 31]);
    let runtime = p.rare(
        &[
            -1,
            0,
            (period / 2) as i64,
            (period * 95 / 100) as i64,
            period as i64,
        ],
        &[period as i64 + 1, -2],
    );
    let mut t = format!(
        "[domain.sched.rt]\nsched_rr_timeslice_ms = {}\nsched_rt_period_us = {period}\n\
         sched_rt_runtime_us = {runtime}\n",
        p.rare(&[1u64, 10, 100], &[0, 1 << 31]),
    );
    match p.pick(3) {
        0 => {}
        1 => t += "fair_server = false\n",
        _ => {
            t += "fair_server = true\n";
            if p.pick(2) == 0 {
                let fp = p.rare(
                    &[100_000u64, 1_000_000, 1_000_000_000],
                    &[99_999, (1 << 22) * 1000 + 1],
                );
                t += &format!(
                    "fair_server_period_ns = {fp}\nfair_server_runtime_ns = {}\n",
                    p.rare(&[0, fp / 20, fp / 2, fp], &[fp + 1])
                );
            }
        }
    }
    let policy = ["fifo", "rr"][p.pick(2) as usize];
    let steps = match p.pick(2) {
        0 => format!(
            "{{ op = \"compute\", us = {} }}, {{ op = \"loop\", to = 0 }}",
            p.rare(&[100, 1000], &[0])
        ),
        _ => format!(
            "{{ op = \"compute\", us = {} }}, {{ op = \"sleep\", us = {} }}, {{ op = \"loop\", to = 0 }}",
            1 + p.pick(200),
            p.rare(&[10, 100, 500], &[0])
        ),
    };
    t += &format!(
        "[[domain.workload]]\nkind = \"program\"\nname = \"rt{d}\"\ncopies = {}\n\
         policy = \"{policy}\"\nrt_priority = {}\nsteps = [{steps}]\n",
        p.rare(&[1, 2], &[0]),
        p.rare(&[1, 50, 99], &[0, 100]),
    );
    t
}

/// Appended choice (issue 12, BFS; first option no change): one domain in four runs BFS as its
/// guest scheduler
/// (docs/bfs.md) in place of the CFS or EEVDF table drawn before, whose RT-class sysctls
/// (`[domain.sched.rt]`) go with it: BFS has none, and runs the FIFO/RR programs drawn with
/// them at its own RT levels. One time in 32 a field takes an edge value, to be refused.
fn bfs_guests(p: &mut Pick, s: &mut String, ndoms: usize) {
    for d in 0..ndoms {
        if p.pick(4) != 1 {
            continue;
        }
        let Some((a, mut b)) = nth_table(s, "[domain.sched]\n", d) else {
            continue;
        };
        if let Some(&(_, end)) = table_ranges(s)
            .iter()
            .find(|&&(x, _)| x == b && s[x..].starts_with("[domain.sched.rt]\n"))
        {
            b = end;
        }
        let t = format!(
            "[domain.sched]\nscheduler = \"bfs\"\nversion = \"{}\"\nhz = {}\nrr_interval = {}\n",
            p.rare(&["0.458"], &["0.512"]),
            p.rare(&[100, 200, 250, 1000], &[0, 150]),
            p.rare(&[1, 6, 100], &[0, 1001]),
        );
        s.replace_range(a..b, &t);
    }
}

/// Appended choice, drawn after every other one: per domain (one time in 8; first option:
/// nothing), the
/// deadline class (docs/deadline.md) — now and then `[domain.sched.deadline]` with its period
/// bounds and HRTICK, and a SCHED_DEADLINE program (a hog or a periodic task) of one or two
/// copies whose parameters usually pass `__checkparam_dl` and admission control; one time in
/// 256 a field takes an edge value (runtime above the deadline, below 1024 ns, a deadline of 0,
/// a period below the deadline or beyond the bounds, a bandwidth of 1), to be refused.
fn deadline_tasks(p: &mut Pick, s: &mut String, ndoms: usize) {
    for d in 0..ndoms {
        if p.pick(8) != 1 {
            continue;
        }
        let Some((a, b)) = nth_table(s, "[domain.sched]\n", d) else {
            continue;
        };
        // BFS has no deadline class: in a BFS domain the task is drawn as before (so later
        // choices keep their bytes) but not written (3 % of the cases were refused so).
        let bfs = s[a..b].contains("scheduler = \"bfs\"");
        let mut t = String::new();
        if p.pick(3) == 0 {
            t += &format!(
                "[domain.sched.deadline]\nhrtick = {}\nsched_deadline_period_min_us = {}\n\
                 sched_deadline_period_max_us = {}\n",
                p.pick(2) == 1,
                p.rare(&[100u64, 1000], &[5_000_000]),
                p.rare(&[4_194_304u64, 1_000_000], &[0, 1 << 31]),
            );
        }
        let period = p.rare(
            &[1_000_000u64, 2_000_000, 10_000_000],
            &[50_000, 5_000_000_000],
        );
        let deadline = p.rare(&[period, period / 2], &[0, period + 1]);
        let runtime = p.rare(
            &[deadline / 10, deadline / 4, 1024],
            &[deadline + 1, 1000, period],
        );
        let steps = match p.pick(2) {
            0 => "{ op = \"compute\", us = 500 }, { op = \"loop\", to = 0 }".to_string(),
            _ => format!(
                "{{ op = \"compute\", us = {} }}, {{ op = \"sleep\", us = {} }}, \
                 {{ op = \"loop\", to = 0 }}",
                1 + p.pick(200),
                [10, 100, 500][p.pick(3) as usize],
            ),
        };
        t += &format!(
            "[[domain.workload]]\nkind = \"program\"\nname = \"dl{d}\"\ncopies = {}\n\
             policy = \"deadline\"\nsched_runtime_ns = {runtime}\nsched_deadline_ns = {deadline}\n\
             sched_period_ns = {period}\nsteps = [{steps}]\n",
            1 + p.pick(2),
        );
        if !bfs {
            s.insert_str(b, &t);
        }
    }
}
