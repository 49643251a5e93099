//! Build script of `vmsched._core`: a hash of the simulation's source code, exported as
//! `vmsched._core.__build__`, so that a sweep's point files (python/vmsched/sweep_runner.py)
//! are reused only by the very code that computed them. Every `.rs` file of the core, the
//! policies and this binding, in path order, with its path, goes into a 64-bit FNV-1a hash;
//! any change to them (a comment too) gives a new hash. No dependencies: the hash need not be
//! cryptographic, only change when the code does.

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let dirs = [
        here.join("../vmsched-core/src"),
        here.join("../vmsched-sched/src"),
        here.join("src"),
    ];
    let mut files = Vec::new();
    for d in &dirs {
        println!("cargo:rerun-if-changed={}", d.display());
        rust_files(d, &mut files);
    }
    let base = here.join("..");
    let mut rel: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|p| {
            let name = p
                .strip_prefix(&base)
                .unwrap_or(&p)
                .to_string_lossy()
                .replace('\\', "/");
            (name, p)
        })
        .collect();
    rel.sort();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for (name, p) in &rel {
        h = fnv1a(h, name.as_bytes());
        h = fnv1a(h, &fs::read(p).unwrap_or_default());
    }
    println!("cargo:rustc-env=VMSCHED_SOURCE_HASH={h:016x}");
}
