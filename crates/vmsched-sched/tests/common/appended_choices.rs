// The appended choices of vmsched's two random-scenario generators: `random_scenario` in
// crates/vmsched-sched/tests/hardening.rs and `generate` in fuzz/src/lib.rs. Both `include!`
// this one file, so the choices are the same code (each defines a `Pick` with `pick` and
// `rare`). They add the Linux classes of issue 12 (EEVDF guests, the RT class's sysctls with a
// FIFO/RR program), the Xen hosts of issue 17 (RTDS, null, ARINC653, Credit2 4.2.1, SEDF, BVT),
// BFS guests, SCHED_DEADLINE tasks, the KVM host (docs/kvm.md) and parallel jobs
// (docs/parallel.md) to a drawn scenario, after every earlier choice, so that older inputs keep
// their scenario (docs/fuzzing.md).
// A plain comment, not a module doc: `include!` takes items only.

/// The byte ranges of the tables of `s`, each from its header line (`[..]` or `[[..]]`) to the
/// next header or the end. (No value line of the generators starts with `[`.)
fn table_ranges(s: &str) -> Vec<(usize, usize)> {
    let mut starts = Vec::new();
    let mut at = 0;
    for line in s.split_inclusive('\n') {
        if line.starts_with('[') {
            starts.push(at);
        }
        at += line.len();
    }
    let mut r: Vec<(usize, usize)> = starts.windows(2).map(|w| (w[0], w[1])).collect();
    if let Some(&last) = starts.last() {
        r.push((last, s.len()));
    }
    r
}

/// The range of the `n`-th table of `s` whose header line is `header`.
fn nth_table(s: &str, header: &str, n: usize) -> Option<(usize, usize)> {
    table_ranges(s)
        .into_iter()
        .filter(|&(a, _)| s[a..].starts_with(header))
        .nth(n)
}

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

/// Appended choice: a Xen 4.20 host of the RTDS/null/ARINC653 family in place of the Credit2 or
/// Credit1 host drawn before (never the pinned host's: first option and pinned, no change).
/// RTDS with each domain's `period_us`, `budget_us` and `extratime` now and then (docs/rtds.md);
/// null (docs/null.md); ARINC653 with a `schedule` table over the scenario's vCPUs and
/// `major_frame_us` (docs/arinc653.md). The timeline drawn before is made the host's (RTDS turns
/// a `sched_domain` weight or cap into a budget, period and extratime; what a host does not take
/// is dropped), but one time in 32 it is kept as drawn, and one time in 32 one field takes an
/// edge value, to be refused.
fn xen_family(p: &mut Pick, s: &mut String, pinned: bool, doms: &[u64]) {
    if pinned {
        return;
    }
    let which = p.pick(4);
    if which == 0 {
        return;
    }
    let keep_events = p.rare(&[false], &[true]);
    let host = match which {
        1 => {
            for d in 0..doms.len() {
                if p.pick(4) == 0 {
                    continue;
                }
                let period = p.rare(&[100u64, 1000, 10_000], &[9, 1 << 32]);
                let text = format!(
                    "period_us = {period}\nbudget_us = {}\nextratime = {}\n",
                    p.rare(&[10, period / 2, period], &[9, period + 1]),
                    p.pick(2) == 1
                );
                if let Some((_, b)) = nth_table(s, "[[domain]]\n", d) {
                    s.insert_str(b, &text);
                }
            }
            format!(
                "[host]\nscheduler = \"rtds\"\ntimer_slop_ns = {}\ntimer_entry_ns = {}\n",
                p.rare(&[50_000, 0, 1], &[]),
                p.rare(&[1000, 0], &[1_000_001]),
            )
        }
        2 => "[host]\nscheduler = \"null\"\n".to_string(),
        _ => arinc653_host(p, doms),
    };
    if let Some((a, b)) = nth_table(s, "[host]\n", 0) {
        s.replace_range(a..b, &host);
    }
    if !keep_events {
        host_events(p, s, which == 1);
    }
}

/// `[host]` of ARINC653: mostly a table of one to four slots naming the scenario's vCPUs, with
/// or without a major frame (at least the slots' sum); else Xen's default table. The edge: a
/// slot of no time, of a domain or vCPU that does not exist, or a frame shorter than its slots.
fn arinc653_host(p: &mut Pick, doms: &[u64]) -> String {
    let mut h = "[host]\nscheduler = \"arinc653\"\n".to_string();
    if p.pick(8) == 0 {
        return h;
    }
    let bad = (p.pick(32) == 31).then(|| p.pick(4));
    let mut sum = 0;
    let mut slots = Vec::new();
    for k in 0..1 + p.pick(4) {
        let d = p.pick(doms.len().max(1) as u64) as usize;
        let vcpus = doms.get(d).copied().unwrap_or(1);
        let mut v = p.pick(vcpus.max(1));
        let mut us = [100u64, 300, 1000, 10_000][p.pick(4) as usize];
        let mut dom = format!("d{d}");
        match bad {
            Some(0) if k == 0 => us = 0,
            Some(1) if k == 0 => dom = format!("d{}", doms.len()),
            Some(2) if k == 0 => v = vcpus,
            _ => {}
        }
        sum += us;
        slots.push(format!(
            "{{ domain = \"{dom}\", vcpu = {v}, runtime_us = {us} }}"
        ));
    }
    h += &format!("schedule = [{}]\n", slots.join(", "));
    match (bad, p.pick(3)) {
        (Some(3), _) => h += &format!("major_frame_us = {}\n", sum - 1),
        (_, 0) => {}
        (_, 1) => h += &format!("major_frame_us = {sum}\n"),
        _ => {
            h += &format!(
                "major_frame_us = {}\n",
                sum + [100, 5000][p.pick(2) as usize]
            )
        }
    }
    h
}

/// The timeline's `[[event]]`s made the new host's: `sched_host` dropped (none of the three
/// takes a run-time change of its own), `sched_domain` dropped, or under RTDS given a period,
/// a budget and extratime in place of its weight and cap (docs/rtds.md).
fn host_events(p: &mut Pick, s: &mut String, rtds: bool) {
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for (a, b) in table_ranges(s) {
        let t = &s[a..b];
        if !t.starts_with("[[event]]\n") {
            continue;
        }
        out += &s[last..a];
        last = b;
        let sched_domain = t.contains("action = \"sched_domain\"");
        if t.contains("action = \"sched_host\"") || (sched_domain && !rtds) {
            continue;
        }
        if sched_domain {
            let kept: String = t
                .split_inclusive('\n')
                .filter(|l| !l.starts_with("weight") && !l.starts_with("cap"))
                .collect();
            let period = p.rare(&[100u64, 1000, 10_000], &[9]);
            out += &format!(
                "{kept}period_us = {period}\nbudget_us = {}\nextratime = {}\n",
                p.rare(&[10, period / 2, period], &[period + 1]),
                p.pick(2) == 1
            );
        } else {
            out += t;
        }
    }
    out += &s[last..];
    *s = out;
}

/// Appended choice (after `xen_family`; the first option, no change): one time in four, a Credit2 host drawn before becomes
/// Credit2 as in Xen 4.2.1 (docs/credit2.md, "Xen 4.2.1"): `version = "4.2.1"` with its
/// `migrate_resist_us` kept and the parameters 4.2.1 lacks dropped; the domains' `cap` and
/// affinities (`pcpus`, `vcpu_pcpus`, `soft_pcpus`) and the timeline's `sched_host` events and
/// `sched_domain` caps removed, since 4.2.1 refuses them. One time in 32 one of them is kept,
/// to be refused.
fn credit2_4_2(p: &mut Pick, s: &mut String) {
    let Some((a, b)) = nth_table(s, "[host]\n", 0) else {
        return;
    };
    if !s[a..b].contains("scheduler = \"credit2\"") || p.pick(4) != 3 {
        return;
    }
    let keep = p.rare(&[None], &[Some("ratelimit_us"), Some("cap"), Some("pcpus")]);
    let host: String = s[a..b]
        .split_inclusive('\n')
        .filter(|l| {
            l.starts_with('[')
                || l.starts_with("scheduler")
                || l.starts_with("migrate_resist_us")
                || (keep == Some("ratelimit_us") && l.starts_with("ratelimit_us"))
        })
        .collect();
    let host = host.replacen('\n', "\nversion = \"4.2.1\"\n", 1);
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for (ta, tb) in table_ranges(s) {
        out += &s[last..ta];
        last = tb;
        let t = &s[ta..tb];
        if ta == a {
            out += &host;
            continue;
        }
        let (dom, event) = (t.starts_with("[[domain]]\n"), t.starts_with("[[event]]\n"));
        if event && t.contains("action = \"sched_host\"") && keep != Some("ratelimit_us") {
            continue;
        }
        let sched_domain = event && t.contains("action = \"sched_domain\"");
        out.extend(t.split_inclusive('\n').filter(|l| {
            let cap = l.starts_with("cap") && (dom || sched_domain);
            let aff = dom
                && (l.starts_with("pcpus")
                    || l.starts_with("vcpu_pcpus")
                    || l.starts_with("soft_pcpus"));
            !(cap && keep != Some("cap") || aff && keep != Some("pcpus"))
        }));
    }
    out += &s[last..];
    *s = out;
}

/// Appended choice (after `credit2_4_2`; the first option, no change): one time in eight, a
/// Credit2 or Credit1 host drawn before becomes a historic one: SEDF (docs/sedf.md), with each
/// domain given now and then a period and slice (`period_us`, `budget_us`) and `extratime`, or
/// BVT (docs/bvt.md), with `ctx_allow_us` and each domain now and then in `domains` with its
/// `mcu_advance` and warp. The domains' caps are removed, weights above 32767 lowered (SEDF) or
/// removed (BVT), and the timeline keeps only `pause`/`unpause` (what both take), but one time
/// in 256 one of them is kept, to be refused.
fn historic_host(p: &mut Pick, s: &mut String, doms: &[u64]) {
    let Some((a, b)) = nth_table(s, "[host]\n", 0) else {
        return;
    };
    let t = &s[a..b];
    let credit = t.contains("scheduler = \"credit2\"") || t.contains("scheduler = \"credit\"");
    if !credit || p.pick(8) != 7 {
        return;
    }
    let bvt = p.pick(2) == 1;
    let keep = p.rare(&[None], &[Some("cap"), Some("event"), Some("weight")]);
    let mut host = "[host]\nscheduler = \"sedf\"\n".to_string();
    if bvt {
        host = format!(
            "[host]\nscheduler = \"bvt\"\nctx_allow_us = {}\n",
            [5000, 10, 1000][p.pick(3) as usize]
        );
        let mut listed = Vec::new();
        for d in 0..doms.len() {
            if p.pick(2) == 1 {
                listed.push(format!(
                    "{{ domain = \"d{d}\", mcu_advance = {}, warpback = {}, warp_value = {}, \
                     warpl_ms = {}, warpu_ms = {} }}",
                    [10, 1, 20][p.pick(3) as usize],
                    p.pick(2) == 1,
                    [0, 1000, 100_000][p.pick(3) as usize],
                    [2000, 0, 1][p.pick(3) as usize],
                    [1000, 0, 5][p.pick(3) as usize],
                ));
            }
        }
        host += &format!("domains = [{}]\n", listed.join(", "));
    }
    let mut out = String::with_capacity(s.len() + 64);
    let mut last = 0;
    let mut d = 0;
    for (ta, tb) in table_ranges(s) {
        out += &s[last..ta];
        last = tb;
        let t = &s[ta..tb];
        if ta == a {
            out += &host;
            continue;
        }
        if t.starts_with("[[event]]\n") {
            let pause = t.contains("action = \"pause\"") || t.contains("action = \"unpause\"");
            if pause || keep == Some("event") {
                out += t;
            }
            continue;
        }
        if !t.starts_with("[[domain]]\n") {
            out += t;
            continue;
        }
        for l in t.split_inclusive('\n') {
            if l.starts_with("cap") && keep != Some("cap") {
                continue;
            }
            if let Some(w) = l.strip_prefix("weight = ") {
                let w: u64 = w.trim().parse().unwrap_or(256);
                if bvt && w != 256 && keep != Some("weight") {
                    continue;
                }
                if w > 32767 && keep != Some("weight") {
                    out += "weight = 32767\n";
                    continue;
                }
            }
            out += l;
        }
        if !bvt && d < doms.len() && p.pick(2) == 1 {
            let period = [1000u64, 10_000, 100_000][p.pick(3) as usize];
            out += &format!(
                "period_us = {period}\nbudget_us = {}\nextratime = {}\n",
                [period / 10, period / 2, period][p.pick(3) as usize],
                p.pick(2) == 1
            );
        }
        d += 1;
    }
    out += &s[last..];
    *s = out;
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

/// Appended choice (after `deadline_tasks`; first option: no change): one time in four a KVM
/// host (docs/kvm.md) in place of any host but the pinned one: `machine.hypervisor = "kvm"`,
/// `[host] scheduler = "linux"` with `steal_time`, the arm64 `timer_kworker` now and then,
/// `[host.sched]` (absent: EEVDF 6.12; or CFS 5.10, an EEVDF table as a guest's, BFS 0.458)
/// and up to two `[[host.process]]`es (a CPU loop or a compute/sleep program, fair or FIFO);
/// each domain now and then with `vcpu_nice`, `vcpu_policy` and `vcpu_rt_priority`. What the
/// linux host refuses is dropped: PV guests, the Xen-family domain fields (`period_us`,
/// `budget_us`, `extratime`), every event but a pCPU's `cpu_offline`/`cpu_online`, and a guest
/// scheduler's `vcpu_is_preempted = true` on arm64 or without steal time. One time in 32 one
/// of them is kept (or the timer kworker put on x86, or a priority on a fair vCPU thread), to be
/// refused.
fn kvm_host(p: &mut Pick, s: &mut String, ndoms: usize) {
    let Some((a, _)) = nth_table(s, "[host]\n", 0) else {
        return;
    };
    if s[a..].starts_with("[host]\nscheduler = \"pinned\"") || p.pick(4) != 3 {
        return;
    }
    let edge = (p.pick(32) == 31).then(|| p.pick(5));
    let arm64 = s.contains("arch = \"arm64\"");
    let kworker = (arm64 || edge == Some(1)) && p.pick(3) == 0;
    let steal = p.pick(4) != 0;
    let mut host = format!(
        "[host]\nscheduler = \"linux\"\nsteal_time = {steal}\ntimer_kworker = {kworker}\n"
    );
    if kworker && p.pick(2) == 0 {
        host += &format!(
            "timer_kworker_ns = {}\n",
            p.rare(&[1000u64, 20_000], &[u64::MAX])
        );
    }
    match p.pick(4) {
        0 => {}
        1 => {
            host += &format!(
                "[host.sched]\nscheduler = \"cfs\"\nhz = {}\nwakeup_preemption = {}\n",
                p.rare(&[100, 250, 1000], &[0]),
                p.pick(4) != 0
            )
        }
        2 => host += &eevdf_sched(p).replacen("[domain.sched]", "[host.sched]", 1),
        _ => host += &format!(
            "[host.sched]\nscheduler = \"bfs\"\nversion = \"0.458\"\nhz = {}\nrr_interval = {}\n",
            p.rare(&[100, 250, 1000], &[150]),
            p.rare(&[1, 6], &[0]),
        ),
    }
    for k in 0..p.pick(3) {
        host += &format!("[[host.process]]\nname = \"hp{k}\"\n");
        host += &match p.pick(2) {
            0 => format!(
                "kind = \"cpu_loop\"\ncopies = {}\nnice = {}\n",
                1 + p.pick(2),
                p.rare(&[0, 5, -5, 19], &[20]),
            ),
            _ => {
                let fifo = p.pick(3) == 0;
                format!(
                    "kind = \"program\"\npolicy = \"{}\"\nrt_priority = {}\n\
                     steps = [{{ op = \"compute\", us = {} }}, {{ op = \"sleep\", us = {} }}, \
                     {{ op = \"loop\", to = 0 }}]\n",
                    if fifo { "fifo" } else { "normal" },
                    if fifo {
                        p.rare(&[1, 50, 99], &[100])
                    } else {
                        0
                    },
                    1 + p.pick(300),
                    [10, 100, 500][p.pick(3) as usize],
                )
            }
        };
        if p.pick(4) == 0 {
            host += "affinity = [0]\n";
        }
    }
    // The machine: KVM (the linux host refuses Xen), unless kept as drawn, the edge.
    if edge != Some(0) {
        if s.contains("hypervisor = \"xen\"") {
            *s = s.replacen("hypervisor = \"xen\"", "hypervisor = \"kvm\"", 1);
        } else if !s.contains("hypervisor = \"kvm\"") {
            if let Some((_, mb)) = nth_table(s, "[machine]\n", 0) {
                s.insert_str(mb, "hypervisor = \"kvm\"\n");
            }
        }
    }
    let mut out = String::with_capacity(s.len() + host.len());
    let mut last = 0;
    let mut host_done = false;
    let mut d = 0;
    for (ta, tb) in table_ranges(s) {
        out += &s[last..ta];
        last = tb;
        let t = &s[ta..tb];
        if t.starts_with("[host]\n") || t.starts_with("[host.") || t.starts_with("[[host.") {
            if !host_done {
                out += &host;
                host_done = true;
            }
            continue;
        }
        if t.starts_with("[[event]]\n") {
            // pCPUs only: a guest CPU's (`domain = ..`) is a vCPU hot-unplug, which it refuses.
            let cpu = (t.contains("action = \"cpu_offline\"")
                || t.contains("action = \"cpu_online\""))
                && !t.contains("domain = ");
            if cpu || edge == Some(2) {
                out += t;
            }
            continue;
        }
        if !t.starts_with("[[domain]]\n") {
            out += t;
            continue;
        }
        for l in t.split_inclusive('\n') {
            let xen = l.starts_with("period_us")
                || l.starts_with("budget_us")
                || l.starts_with("extratime")
                || l.starts_with("guest_type = \"pv\"");
            if !xen || edge == Some(4) {
                out += l;
            }
        }
        if d < ndoms && p.pick(2) == 0 {
            let policy = p.rare(&["normal", "batch", "idle", "fifo", "rr"], &["deadline"]);
            let rt = matches!(policy, "fifo" | "rr");
            out += &format!(
                "vcpu_nice = {}\nvcpu_policy = \"{policy}\"\n",
                p.rare(&[0, -5, 5, 19, -20], &[20, -21])
            );
            if rt {
                out += &format!("vcpu_rt_priority = {}\n", p.rare(&[1, 10, 99], &[0, 100]));
            } else if edge == Some(3) {
                out += "vcpu_rt_priority = 10\n";
            }
        }
        d += 1;
    }
    out += &s[last..];
    // Under KVM the guest reads a preempted flag only on x86 with steal time (docs/pvops.md):
    // a guest scheduler's `vcpu_is_preempted = true` drawn earlier is refused there, so it is
    // turned off but at an edge.
    if (arm64 || !steal) && edge.is_none() && out.contains("hypervisor = \"kvm\"") {
        out = out.replace("vcpu_is_preempted = true", "vcpu_is_preempted = false");
    }
    *s = out;
}

/// Appended choice, after `kvm_host` (first option, two times in three: no change): a parallel
/// job (docs/parallel.md) declared in the first domain, over one to three domains; over more
/// than one, a domain that gets no rank is made the driver domain (`driver = true`) its messages
/// go through. A NAS preset (ranks a power of two or a square as the kernel needs) or a custom
/// shape, `poll` or `spin_block`, one to three iterations of a few hundred µs so that the job
/// acts within 2 ms. One time in 256 a field takes an edge value (no iterations, a rank count
/// the kernel refuses, a domain that does not exist), to be refused.
fn parallel_job(p: &mut Pick, s: &mut String, doms: &[u64]) {
    if p.pick(3) != 2 || doms.is_empty() {
        return;
    }
    let kernel = ["custom", "ep", "lu", "sp", "bt", "mg", "ft", "cg"][p.pick(8) as usize];
    // NAS's rank counts: a square (SP, BT) or a power of two (the others but EP): such a job
    // spans at most two domains, with equal shares.
    let free = kernel == "custom" || kernel == "ep";
    let most = if free { 3 } else { 2 };
    let mut parts = 1 + p.pick(doms.len().min(most) as u64) as usize;
    // Over several domains one more is needed, as the driver domain: the one after the parts.
    if parts > 1 && parts == doms.len() {
        parts -= 1;
    }
    let driver = (parts > 1).then_some(parts);
    let per = match kernel {
        "sp" | "bt" if parts == 1 => [1u64, 4][p.pick(2) as usize],
        "sp" | "bt" => 2,
        _ if free => 1 + p.pick(4),
        _ => [1u64, 2][p.pick(2) as usize],
    };
    let mut placement = Vec::new();
    for d in 0..parts {
        let ranks = if d == 0 { p.rare(&[per], &[0, 3]) } else { per };
        placement.push(format!("{{ domain = \"d{d}\", ranks = {ranks} }}"));
    }
    if p.rare(&[false], &[true]) {
        placement.push(format!("{{ domain = \"d{}\", ranks = 1 }}", doms.len()));
    }
    let wait = if p.pick(2) == 0 {
        "wait = \"poll\"\n".to_string()
    } else {
        format!(
            "wait = \"spin_block\"\nspin_us = {}\n",
            [10, 50, 200][p.pick(3) as usize]
        )
    };
    let mut t = format!(
        "[[domain.workload]]\nkind = \"parallel\"\nname = \"job\"\nkernel = \"{kernel}\"\n\
         placement = [{}]\nstart_ms = 0\niterations = {}\ncompute_us = {}\nspread = {}\n{wait}\
         pin = {}\n",
        placement.join(", "),
        p.rare(&[1u64, 2, 3], &[0]),
        p.rare(&[10u64, 100, 300], &[0]),
        [0.0, 0.02, 0.5][p.pick(3) as usize],
        p.pick(4) == 0,
    );
    if kernel == "custom" {
        t += &format!(
            "exchange = \"{}\"\nbytes = {}\n",
            ["none", "barrier", "all_reduce", "ring", "all_to_all"][p.pick(5) as usize],
            p.rare(&[8u64, 1024, 65536], &[0]),
        );
    }
    if let Some(dr) = driver {
        let name = format!("name = \"d{dr}\"\n");
        *s = s.replacen(&name, &format!("{name}driver = true\n"), 1);
    }
    let Some((_, b)) = nth_table(s, "[domain.sched]\n", 0) else {
        return;
    };
    s.insert_str(b, &t);
}

/// The value of the first line `key = N` of `s`, if any.
fn int_field(s: &str, key: &str) -> Option<u64> {
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(" = ")?.trim().parse().ok())
}

/// Appended choice, after `parallel_job`, drawn last (each first option: no change): the
/// features of session 24. `machine.vcpu_refill_ns` (docs/seed004.md); per domain a `startup`
/// workload (docs/scenarios.md), a `spinlock` workload of any lock kind and `[domain.pv]`
/// (docs/pvops.md), under a KVM host `[domain.coord]` (docs/kvm.md); a timeline of
/// `sched_task` events on the workloads drawn here or the KVM host's processes and, under KVM,
/// `sched_vcpu` events; and on a Xen 4.20 host of two pCPUs or more (Credit2, Credit1 4.x,
/// RTDS, null) a `[[cpupool]]` of the last pCPUs with its own scheduler, now and then a domain
/// in it and a `cpupool_*` event (docs/cpupools.md). What the platform refuses is not drawn
/// (a PV interface it lacks, `pv_qspinlock` without PV spinlocks, `[domain.coord]` under Xen or
/// beside a `sched_vcpu` event, a pool domain's affinity and scheduler fields, its events), but
/// one time in 32 one such thing is drawn, to be refused.
fn session24(p: &mut Pick, s: &mut String, doms: &[u64]) {
    let edge = (p.pick(32) == 31).then(|| p.pick(8));
    let kvm = s.contains("scheduler = \"linux\"") && s.contains("hypervisor = \"kvm\"");
    let arm64 = s.contains("arch = \"arm64\"");
    let steal = !s.contains("steal_time = false");
    let duration = int_field(s, "duration_ms").unwrap_or(1);
    let mut events = String::new();
    if p.pick(4) == 3 {
        let ns = if edge == Some(0) {
            i64::MAX as u64
        } else {
            [1, 1000, 20_000][p.pick(3) as usize]
        };
        if let Some((_, mb)) = nth_table(s, "[machine]\n", 0) {
            s.insert_str(mb, &format!("vcpu_refill_ns = {ns}\n"));
        }
    }
    for (d, &vcpus) in doms.iter().enumerate() {
        // The `run` target runs at most four workloads a domain (`small_enough`).
        let room = 4usize.saturating_sub(domain_workloads(s, d));
        let (startup, spinlock, pv) = (p.pick(6) == 5, p.pick(6) == 5, p.pick(4) == 3);
        let (startup, spinlock) = (startup && room > 0, spinlock && room > usize::from(startup));
        let coord = kvm && p.pick(4) == 3 || edge == Some(1) && d == 0;
        let mut t = String::new();
        let mut names = Vec::new();
        if startup {
            let work = [100u64, 300, 1000][p.pick(3) as usize];
            let random_gap = p.pick(4) == 0;
            t += &format!(
                "[[domain.workload]]\nkind = \"startup\"\nname = \"su{d}\"\niterations = {}\n\
                 interval_ms = {}\nrandom_gap = {random_gap}\nwork_us = {work}\nreads = {}\n\
                 read_us = {}\nstart_ms = 0\nnice = {}\n",
                1 + p.pick(3),
                if random_gap { 1 } else { p.pick(2) },
                if edge == Some(2) { 0 } else { [1, 5, 20][p.pick(3) as usize] },
                1 + p.pick(4),
                [0, 5, -5][p.pick(3) as usize],
            );
            if p.pick(4) == 0 {
                t += "affinity = [0]\n";
            }
            names.push(format!("su{d}"));
        }
        // Explicit `true` only where the platform has the interface (docs/pvops.md).
        let x86_multi = !arm64 && vcpus > 1;
        let mut pv_spin = x86_multi;
        if pv {
            let nopvspin = p.pick(4) == 0;
            let realtime = kvm && !arm64 && p.pick(4) == 0;
            pv_spin = x86_multi && !nopvspin && !realtime;
            let vip = if kvm && !arm64 && steal {
                p.pick(2) == 1
            } else {
                edge == Some(3)
            };
            let mut pvt = format!(
                "[domain.pv]\nnopvspin = {nopvspin}\nrealtime_hint = {realtime}\n\
                 spin_threshold_ns = {}\n",
                [327_680u64, 1000, 50_000][p.pick(3) as usize]
            );
            // Written only when `true` (allowed: x86 KVM with steal time) or at the edge: a
            // `false` would be refused beside the guest scheduler's `vcpu_is_preempted = true`.
            if p.pick(2) == 0 && vip {
                pvt += "vcpu_is_preempted = true\n";
            }
            if p.pick(2) == 0 {
                pvt += &format!("pv_spinlock = {}\n", pv_spin && p.pick(2) == 0);
                pv_spin = pv_spin && !pvt.contains("pv_spinlock = false");
            }
            if p.pick(2) == 0 {
                let ok = kvm && x86_multi && steal && !realtime;
                pvt += &format!("pv_sched_yield = {}\n", ok && p.pick(2) == 0);
            }
            if realtime && p.pick(2) == 0 {
                pvt += &format!(
                    "haltpoll = true\n[domain.pv.guest_halt_poll]\nguest_halt_poll_ns = {}\n\
                     guest_halt_poll_grow = {}\nguest_halt_poll_grow_start = {}\n\
                     guest_halt_poll_shrink = {}\nguest_halt_poll_allow_shrink = {}\n",
                    [200_000u64, 1000, 0][p.pick(3) as usize],
                    [2, 1, 0][p.pick(3) as usize],
                    [50_000u64, 1][p.pick(2) as usize],
                    [2, 0][p.pick(2) as usize],
                    p.pick(2) == 0,
                );
            }
            if let Some((a, _)) = nth_table(s, "[domain.sched]\n", d) {
                s.insert_str(a, &pvt);
            }
        }
        if spinlock {
            let kinds = ["spinlock", "ticket", "qspinlock", "tas", "mutex", "pv_qspinlock"];
            let n = if pv_spin || edge == Some(4) { 6 } else { 5 };
            t += &format!(
                "[[domain.workload]]\nkind = \"spinlock\"\nname = \"lk{d}\"\nlock = \"{}\"\n\
                 cs_ns = {}\nthink_ns = {}\n",
                kinds[p.pick(n) as usize],
                [1000u64, 2000, 10_000][p.pick(3) as usize],
                [20_000u64, 0, 5000][p.pick(3) as usize],
            );
            if p.pick(3) == 0 {
                t += &format!("threads = {}\n", 1 + p.pick(4));
            }
            names.push(format!("lk{d}"));
        }
        if coord {
            let policy = ["fifo", "rr", "normal"][p.pick(3) as usize];
            t += &format!(
                "[domain.coord]\nenable = true\nrt = {}\ntasks = [{}]\nboost_policy = \"{policy}\"\n\
                 pass_priority = {}\nhypercall_ns = {}\nbound_us = {}\n",
                p.pick(4) != 0 || names.is_empty(),
                names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", "),
                p.pick(2) == 0,
                [1000u64, 0, 20_000][p.pick(3) as usize],
                [10_000u64, 0, 200][p.pick(3) as usize],
            );
            t += &if policy == "normal" {
                format!("boost_nice = {}\n", [-20, 0, 19][p.pick(3) as usize])
            } else {
                format!("boost_rt_priority = {}\n", [1, 50, 99][p.pick(3) as usize])
            };
        }
        let at = p.pick(duration.min(2));
        for n in &names {
            if p.pick(3) == 0 {
                events += &format!(
                    "[[event]]\nat_ms = {at}\naction = \"sched_task\"\ndomain = \"d{d}\"\n\
                     workload = \"{n}\"\nnice = {}\n",
                    [10, -10, 0][p.pick(3) as usize]
                );
            }
        }
        if kvm && (!coord || edge == Some(5)) && p.pick(4) == 3 {
            let policy = ["fifo", "rr", "normal", "batch"][p.pick(4) as usize];
            events += &format!(
                "[[event]]\nat_ms = {at}\naction = \"sched_vcpu\"\ndomain = \"d{d}\"\npolicy = \"{policy}\"\n"
            );
            if p.pick(2) == 0 {
                events += &format!("cpu = {}\n", p.pick(vcpus.max(1)));
            }
            if matches!(policy, "fifo" | "rr") {
                events += &format!("rt_priority = {}\n", [1, 10, 99][p.pick(3) as usize]);
            } else {
                events += &format!("nice = {}\n", [0, 10, -20][p.pick(3) as usize]);
            }
        }
        if let Some((_, b)) = nth_table(s, "[domain.sched]\n", d) {
            s.insert_str(b, &t);
        }
    }
    if s.contains("[[host.process]]\nname = \"hp0\"\n") && p.pick(3) == 0 {
        events += &format!(
            "[[event]]\nat_ms = {}\naction = \"sched_task\"\nworkload = \"hp0\"\nnice = {}\n",
            p.pick(duration.min(2)),
            [5, -5, 19][p.pick(3) as usize]
        );
    }
    cpupool(p, s, doms, &mut events, edge == Some(6));
    *s += &events;
    // The hypervisor seam drawn first may be KVM under a Xen-family host: there, on arm64 or
    // without steal time, the guest scheduler's `vcpu_is_preempted = true` is refused (since
    // `[domain.pv]`; `kvm_host` does this for its own host). Turned off, but at an edge.
    if s.contains("hypervisor = \"kvm\"") && (arm64 || !steal) && edge.is_none() {
        *s = s.replace("vcpu_is_preempted = true", "vcpu_is_preempted = false");
    }
}

/// How many `[[domain.workload]]`s the `d`-th domain of `s` has.
fn domain_workloads(s: &str, d: usize) -> usize {
    let Some((a, _)) = nth_table(s, "[[domain]]\n", d) else {
        return 0;
    };
    let end = nth_table(s, "[[domain]]\n", d + 1)
        .map(|(b, _)| b)
        .or_else(|| nth_table(s, "[[event]]\n", 0).map(|(b, _)| b))
        .unwrap_or(s.len());
    s[a..end.max(a)].matches("[[domain.workload]]\n").count()
}

/// Part of `session24`: one time in four on a Xen 4.20 host (Credit2 4.20, Credit1 4.x, RTDS,
/// null) of two pCPUs or more, a `[[cpupool]]` "p1" of the last pCPU or two with a scheduler of
/// its own; now and then the last domain created in it (its affinity, scheduler fields and
/// events dropped, RTDS fields given if the pool is RTDS) and a `cpupool_cpu_remove` then
/// `cpupool_cpu_add` into Pool-0, or a `cpupool_migrate` of the first domain into the pool, or
/// (p1 of two pCPUs) the life of a pool "p2" made during the run: `cpupool_create`, p1's first
/// pCPU moved into it, then out again, `cpupool_destroy` and the pCPU back in Pool-0. The edge
/// (`bad`): the domain keeps its fields and events, p2 has no `cpupool_create`.
fn cpupool(p: &mut Pick, s: &mut String, doms: &[u64], events: &mut String, bad: bool) {
    let Some((ha, hb)) = nth_table(s, "[host]\n", 0) else {
        return;
    };
    let h = &s[ha..hb];
    let xen420 = h.contains("scheduler = \"rtds\"")
        || h.contains("scheduler = \"null\"")
        || h.contains("scheduler = \"credit2\"") && !h.contains("version = \"4.2.1\"")
        || h.contains("scheduler = \"credit\"") && !h.contains("version = \"3.3\"");
    let pcpus = int_field(s, "pcpus").unwrap_or(1);
    if !xen420 || s.contains("hypervisor = \"kvm\"") || pcpus < 2 || p.pick(4) != 3 {
        return;
    }
    let n = if pcpus > 2 { 1 + p.pick(2) } else { 1 };
    let first = pcpus - n;
    let list: Vec<String> = (first..pcpus).map(|c| c.to_string()).collect();
    let sched = ["credit2", "credit", "rtds", "null"][p.pick(4) as usize];
    let pool = format!(
        "[[cpupool]]\nname = \"p1\"\npcpus = [{}]\n[cpupool.sched]\nscheduler = \"{sched}\"\n",
        list.join(", ")
    );
    let Some((da, _)) = nth_table(s, "[[domain]]\n", 0) else {
        return;
    };
    s.insert_str(da, &pool);
    // Affinities (a domain's must hold a pCPU of its pool) and pCPU hot-plug events (refused
    // beside cpupools) are dropped, but at the edge.
    if !bad {
        let mut out = String::with_capacity(s.len());
        let mut prev = 0;
        for (a, b) in table_ranges(s) {
            out += &s[prev..a];
            prev = b;
            let t = &s[a..b];
            if t.starts_with("[[domain]]\n") {
                out.extend(t.split_inclusive('\n').filter(|l| {
                    !["pcpus", "vcpu_pcpus", "soft_pcpus"]
                        .iter()
                        .any(|k| l.starts_with(k))
                }));
            } else if !(t.starts_with("[[event]]\n")
                && (t.contains("action = \"cpu_offline\"") || t.contains("action = \"cpu_online\""))
                && !t.contains("domain = "))
            {
                out += t;
            }
        }
        out += &s[prev..];
        *s = out;
    }
    let last = doms.len().saturating_sub(1);
    let moved = doms.len() > 1 && p.pick(2) == 0;
    if moved {
        if let Some((a, b)) = nth_table(s, "[[domain]]\n", last) {
            let keep = |l: &&str| {
                bad || ![
                    "pcpus", "vcpu_pcpus", "soft_pcpus", "weight", "cap", "period_us",
                    "budget_us", "extratime", "driver",
                ]
                .iter()
                .any(|k| l.starts_with(k))
            };
            let mut t: String = s[a..b].split_inclusive('\n').filter(keep).collect();
            t += "pool = \"p1\"\n";
            if sched == "rtds" {
                t += "period_us = 1000\nbudget_us = 500\nextratime = true\n";
            }
            s.replace_range(a..b, &t);
        }
    }
    // The moved domain's events, and those of the pool's pCPUs, are dropped.
    {
        let name = format!("domain = \"d{last}\"\n");
        let mut out = String::with_capacity(s.len());
        let mut prev = 0;
        for (a, b) in table_ranges(s) {
            let t = &s[a..b];
            if t.starts_with("[[event]]\n") && !bad && moved && t.contains(&name) {
                out += &s[prev..a];
                prev = b;
            }
        }
        out += &s[prev..];
        *s = out;
    }
    let at = p.pick(int_field(s, "duration_ms").unwrap_or(1).min(2));
    match p.pick(3) {
        1 if n > 1 => {
            *events += &format!(
                "[[event]]\nat_ms = {at}\naction = \"cpupool_cpu_remove\"\npool = \"p1\"\ncpu = {first}\n\
                 [[event]]\nat_ms = {at}\naction = \"cpupool_cpu_add\"\npool = \"Pool-0\"\ncpu = {first}\n"
            );
        }
        2 if last > 0 => {
            *events += &format!(
                "[[event]]\nat_ms = {at}\naction = \"cpupool_migrate\"\ndomain = \"d0\"\npool = \"p1\"\n"
            );
        }
        0 if n > 1 => {
            let p2 = "[[cpupool]]\nname = \"p2\"\n[cpupool.sched]\nscheduler = \"credit\"\n";
            if let Some((da, _)) = nth_table(s, "[[domain]]\n", 0) {
                s.insert_str(da, p2);
            }
            let end = (at + 1).min(int_field(s, "duration_ms").unwrap_or(1).saturating_sub(1));
            let ev = |t: u64, rest: &str| format!("[[event]]\nat_ms = {t}\n{rest}");
            if !bad {
                *events += &ev(at, "action = \"cpupool_create\"\npool = \"p2\"\n");
            }
            for (t, action, pool) in [
                (at, "cpupool_cpu_remove", "p1"),
                (at, "cpupool_cpu_add", "p2"),
                (end, "cpupool_cpu_remove", "p2"),
            ] {
                *events += &ev(
                    t,
                    &format!("action = \"{action}\"\npool = \"{pool}\"\ncpu = {first}\n"),
                );
            }
            *events += &ev(end, "action = \"cpupool_destroy\"\npool = \"p2\"\n");
            *events += &ev(
                end,
                &format!("action = \"cpupool_cpu_add\"\npool = \"Pool-0\"\ncpu = {first}\n"),
            );
        }
        _ => {}
    }
}
