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

/// The value of the first line `key = N` of `s`, if any.
fn int_field(s: &str, key: &str) -> Option<u64> {
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(" = ")?.trim().parse().ok())
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

// The choices, by subject (paths relative to this file, so both generators include the same).
include!("appended_choices/linux.rs");
include!("appended_choices/xen.rs");
include!("appended_choices/kvm.rs");
include!("appended_choices/session24.rs");
