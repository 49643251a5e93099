// The Xen hosts of the appended choices (issue 17): RTDS, null and ARINC653 in place of
// Credit2 or Credit1 with the timeline made the host's, Credit2 4.2.1, and the historic SEDF and
// BVT (docs/rtds.md, docs/null.md, docs/arinc653.md, docs/sedf.md, docs/bvt.md).
// Part of appended_choices.rs, `include!`d by it (a plain comment: `include!` takes items only).

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
