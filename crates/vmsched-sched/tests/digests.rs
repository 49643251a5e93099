//! Stored digests of every shipped scenario's results (issue 15 item 5): an optimisation must
//! keep the outputs byte-identical, and this test says when it did not.
//!
//! Each scenario of `python/vmsched/scenarios/` runs for [`DURATION_MS`] (warm-up
//! [`WARMUP_MS`]) through the path the determinism tests use (load, build, debug checks, run,
//! results). Its results, serialised as the JSON summary plus xenmon's rows (which the JSON
//! skips), are hashed per part (FNV-1a, 64 bits) and compared with the line stored for it in
//! `tests/digests.txt`. A change that moves outputs on purpose regenerates the file with
//!
//! ```text
//! VMSCHED_BLESS=1 cargo test -p vmsched-sched --test digests
//! ```
//!
//! and says in its commit message why the outputs moved.

use std::fmt::Write as _;

use vmsched_core::report::Results;

#[path = "common/run.rs"]
#[allow(dead_code)]
mod run;

/// Simulated length of each run: long enough for every scenario's workloads to start and loop,
/// short enough that the whole set costs seconds.
const DURATION_MS: &str = "1500";
const WARMUP_MS: &str = "100";

const STORED: &str = "tests/digests.txt";
const BLESS: &str = "VMSCHED_BLESS=1 cargo test -p vmsched-sched --test digests";

/// FNV-1a over `bytes`, 64 bits: stable across machines and releases, no dependency.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The digest line of one run: the scenario, its event count, the digest of everything, then
/// one digest per part, so a failure says which part moved.
fn line(name: &str, r: &Results) -> String {
    let json = serde_json::to_string(r).expect("results serialise");
    let xenmon = format!("{:?}", r.xenmon);
    let all = fnv1a(format!("{json}\n{xenmon}").as_bytes());
    let other = serde_json::json!({
        "duration_ns": r.duration_ns,
        "warmup_ns": r.warmup_ns,
        "measured_ns": r.measured_ns,
        "events": r.events,
        "ports": r.ports,
        "coord": r.coord,
    });
    let mut s = format!("{name} events={} all={all:016x}", r.events);
    for (k, v) in [
        ("entities", part(&r.entities)),
        ("workloads", part(&r.workloads)),
        ("series", part(&r.series)),
        ("other", part(&other)),
        ("xenmon", format!("{:016x}", fnv1a(xenmon.as_bytes()))),
    ] {
        write!(s, " {k}={v}").unwrap();
    }
    s
}

/// The digest of one part of the results, as JSON.
fn part<T: serde::Serialize>(v: &T) -> String {
    let json = serde_json::to_string(v).expect("results serialise");
    format!("{:016x}", fnv1a(json.as_bytes()))
}

/// Every shipped scenario, by file name, in name order.
fn shipped() -> Vec<(String, String)> {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/vmsched/scenarios");
    let mut v: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|f| f.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn every_shipped_scenario_matches_its_stored_digest() {
    let ov = [
        ("run.duration_ms", DURATION_MS),
        ("run.warmup_ms", WARMUP_MS),
    ];
    let mut got = String::from(
        "# Digests of every shipped scenario's results (crates/vmsched-sched/tests/digests.rs).\n",
    );
    writeln!(got, "# Regenerate: {BLESS}").unwrap();
    let scenarios = shipped();
    assert!(scenarios.len() >= 20, "the shipped scenarios were found");
    for (name, src) in &scenarios {
        let r = run::run(name, src, &ov);
        got += &line(name, &r);
        got.push('\n');
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(STORED);
    if std::env::var_os("VMSCHED_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    let want: Vec<&str> = stored.lines().filter(|l| !l.starts_with('#')).collect();
    let have: Vec<&str> = got.lines().filter(|l| !l.starts_with('#')).collect();
    if want == have {
        return;
    }
    let key = |l: &str| l.split(' ').next().unwrap_or("").to_string();
    let mut report = String::new();
    for h in &have {
        match want.iter().find(|w| key(w) == key(h)) {
            None => writeln!(report, "  {}: no stored digest", key(h)).unwrap(),
            Some(w) if w != h => {
                let moved: Vec<&str> = h
                    .split(' ')
                    .zip(w.split(' '))
                    .filter(|(a, b)| a != b)
                    .map(|(a, _)| a.split('=').next().unwrap_or(a))
                    .collect();
                writeln!(report, "  {}: {} moved", key(h), moved.join(", ")).unwrap();
            }
            Some(_) => {}
        }
    }
    for w in &want {
        if !have.iter().any(|h| key(h) == key(w)) {
            writeln!(report, "  {}: stored but no longer shipped", key(w)).unwrap();
        }
    }
    panic!(
        "the shipped scenarios' outputs differ from the digests stored in \
         crates/vmsched-sched/{STORED}:\n{report}\
         An optimisation must keep them byte-identical. If the outputs moved on purpose, \
         regenerate the file with\n    {BLESS}\nand say why in the commit message."
    );
}

/// The digest is the published FNV-1a: a change to it would move every stored line.
#[test]
fn fnv1a_is_the_reference_function() {
    assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
}
