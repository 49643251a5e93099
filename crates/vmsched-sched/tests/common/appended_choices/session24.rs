// The last appended choice, session 24's features: `vcpu_refill_ns`, `startup` and
// `spinlock` workloads, `[domain.pv]`, `[domain.coord]`, `sched_task`/`sched_vcpu` events
// (docs/pvops.md, docs/kvm.md) and a `[[cpupool]]` with its events (docs/cpupools.md).
// Part of appended_choices.rs, `include!`d by it (a plain comment: `include!` takes items only).

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
