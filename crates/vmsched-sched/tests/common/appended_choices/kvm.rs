// The KVM host and parallel jobs of the appended choices: `[host] scheduler = "linux"`
// with its processes and vCPU-thread fields (docs/kvm.md), and a `kind = "parallel"` job over one
// to three domains (docs/parallel.md).
// Part of appended_choices.rs, `include!`d by it (a plain comment: `include!` takes items only).

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
