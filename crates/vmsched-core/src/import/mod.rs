//! Readers of real configuration files, turned into scenario fragments (issue 18 item 8).
//!
//! Three formats are read, each by its own small parser in this module (no external format
//! crate, so every error can name the file, the line and the key, and so each reader can be
//! fuzzed on its own):
//!
//! * **xl.cfg** ([`xlcfg`]): a Xen domain configuration file as `xl create` reads it; its syntax
//!   and keys are those of the xl.cfg(5) manual page (Xen's `docs/man/xl.cfg.5.pod.in`). One file
//!   gives one `[[domain]]`: name, vCPUs, hard and soft affinity, weight and cap.
//! * **sysctl dumps** ([`sysctl`]): `sysctl -a` output or `name = value` lines of a Linux 5.10
//!   guest (`kernel.sched_*`, the files of `/proc/sys/kernel/sched_*`), the file-per-knob layout of
//!   `/sys/kernel/debug/sched/` (`latency_ns: 24000000`), and the `sched_features` line of
//!   debugfs. This module only reads the file into names and values; which knobs a guest
//!   scheduler has is that scheduler's business (`vmsched-sched`, `guest/cfs/sysctl.rs`).
//! * **rt-app JSON** ([`rtapp`]): a workload description of rt-app (github
//!   scheduler-tools/rt-app, `doc/tutorial.txt`), whose tasks become `kind = "program"`
//!   workloads.
//!
//! A reader produces a [`Fragment`]: a TOML table rooted at the scenario (`domain = [ {...} ]`),
//! made only of the scenario's existing fields, plus [`Note`]s for what was read but not used
//! (unknown keys, parameters the model does not have). Nothing new enters the scenario's
//! semantics here. Input errors are [`ScenarioError`]s naming the file, the line and the key;
//! bytes that are not UTF-8 text are refused with their byte offset ([`decode`]), and files are
//! read with a size limit ([`read_file`]).

pub mod json;
pub mod rtapp;
pub mod schedtrace;
pub mod sysctl;
pub mod xlcfg;

use crate::scenario::ScenarioError;

/// The largest configuration file read (bytes): real ones are a few KiB.
pub const MAX_IMPORT_BYTES: u64 = 4 * 1024 * 1024;

/// Something the reader saw and did not carry into the scenario, or carried approximately.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub line: Option<usize>,
    /// The key in the source file (`maxvcpus`, `kernel.sched_child_runs_first`, `HRTICK`).
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(l) = self.line {
            write!(f, "line {l}: ")?;
        }
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// What one file gives: a scenario fragment and notes.
#[derive(Clone, Debug)]
pub struct Fragment {
    /// A table rooted at the scenario: `{ domain = [ { ... } ] }`, and `run` for an rt-app
    /// global duration.
    pub table: toml::Table,
    pub notes: Vec<Note>,
}

impl Fragment {
    /// The fragment as TOML text (`[[domain]]` tables; see [`write_toml`]).
    pub fn to_toml(&self) -> String {
        write_toml(&self.table)
    }
}

/// Options a reader may need beyond the file.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The host's pCPU count: needed to expand xl's `"all"` and `^N` exclusions.
    pub pcpus: Option<u32>,
}

/// An error at `line` of `file` about `field`.
pub(crate) fn error(
    file: &str,
    line: Option<usize>,
    field: &str,
    message: impl Into<String>,
) -> ScenarioError {
    ScenarioError {
        file: file.to_string(),
        line,
        field: printable(field),
        message: printable(&message.into()),
    }
}

/// Text from the input as it may appear in a one-line error: control characters (a newline
/// inside a JSON key or an xl string) escaped.
pub(crate) fn printable(key: &str) -> String {
    if !key.chars().any(char::is_control) {
        return key.to_string();
    }
    key.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn line_at(data: &[u8], offset: usize) -> usize {
    data[..offset.min(data.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The text of a file's bytes. Accepted: UTF-8, with or without a byte-order mark (dropped).
/// Refused, naming the byte offset: UTF-16/32 (by their byte-order marks), NUL bytes (a binary,
/// or UTF-16 without a mark), invalid UTF-8.
pub fn decode<'a>(file: &str, data: &'a [u8]) -> Result<&'a str, ScenarioError> {
    for (bom, name) in [
        (&b"\xff\xfe\x00\x00"[..], "UTF-32"),
        (&b"\x00\x00\xfe\xff"[..], "UTF-32"),
        (&b"\xff\xfe"[..], "UTF-16"),
        (&b"\xfe\xff"[..], "UTF-16"),
    ] {
        if data.starts_with(bom) {
            return Err(error(
                file,
                Some(1),
                "",
                format!("is {name} text (byte-order mark at byte offset 0); save it as UTF-8"),
            ));
        }
    }
    let skip = if data.starts_with(b"\xef\xbb\xbf") {
        3
    } else {
        0
    };
    if let Some(nul) = data.iter().position(|b| *b == 0) {
        return Err(error(
            file,
            Some(line_at(data, nul)),
            "",
            format!(
                "is a binary file (or UTF-16/32 text without a byte-order mark): a NUL byte at \
                 byte offset {nul}"
            ),
        ));
    }
    std::str::from_utf8(&data[skip..]).map_err(|e| {
        let off = skip + e.valid_up_to();
        error(
            file,
            Some(line_at(data, off)),
            "",
            format!(
                "is not UTF-8 text: invalid byte 0x{:02x} at byte offset {off}",
                data[off]
            ),
        )
    })
}

/// Reads a file whole, refusing a missing path, a directory, a non-regular file, one that
/// cannot be read and one over [`MAX_IMPORT_BYTES`], each as a one-line error.
pub fn read_file(path: &std::path::Path) -> Result<Vec<u8>, ScenarioError> {
    use std::io::Read;
    let file = path.display().to_string();
    let fail = |m: String| error(&file, None, "", m);
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => fail("no such file".into()),
        std::io::ErrorKind::PermissionDenied => fail("cannot be read: permission denied".into()),
        _ => fail(format!("cannot be read: {e}")),
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        return Err(fail("is a directory, not a file".into()));
    }
    if !meta.is_file() {
        return Err(fail(
            "is not a regular file (a device, pipe or socket)".into(),
        ));
    }
    if meta.len() > MAX_IMPORT_BYTES {
        return Err(fail(format!(
            "is larger than the {} MiB limit for a configuration file",
            MAX_IMPORT_BYTES >> 20
        )));
    }
    let mut data = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(MAX_IMPORT_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(io)?;
    if data.len() as u64 > MAX_IMPORT_BYTES {
        return Err(fail(format!(
            "is larger than the {} MiB limit for a configuration file",
            MAX_IMPORT_BYTES >> 20
        )));
    }
    Ok(data)
}

/// A whole scenario from fragments: `[machine] pcpus`, `[host] scheduler = host`, and one
/// `[[domain]]` per fragment domain. Fragments that describe a guest's inside (a sysctl dump's
/// `[domain.sched]`, rt-app's workloads) are merged into the domain `into` names (by index),
/// which gets `name`/`vcpus` defaults when no xl.cfg gave it. Domains without a guest scheduler
/// get `scheduler = "cfs"`. The result still has to be validated by the loader.
pub fn skeleton(host: &str, pcpus: u32, fragments: &[Fragment]) -> toml::Table {
    let mut domains: Vec<toml::Table> = Vec::new();
    let mut inside: Vec<toml::Table> = Vec::new();
    let mut run = toml::Table::new();
    for f in fragments {
        if let Some(r) = f.table.get("run").and_then(|r| r.as_table()) {
            run.extend(r.clone());
        }
        for d in f
            .table
            .get("domain")
            .and_then(|d| d.as_array())
            .into_iter()
            .flatten()
            .filter_map(|d| d.as_table())
        {
            if d.contains_key("name") {
                domains.push(d.clone());
            } else {
                inside.push(d.clone());
            }
        }
    }
    if domains.is_empty() {
        let mut d = toml::Table::new();
        d.insert("name".into(), "guest".into());
        d.insert("vcpus".into(), i64::from(pcpus.max(1)).into());
        domains.push(d);
    }
    // Guest insides go into the first domain (the usual case: one guest described by several
    // files); workloads accumulate, the sched table's keys merge.
    for part in inside {
        let d = &mut domains[0];
        for (k, v) in part {
            match (k.as_str(), d.get_mut(&k), v) {
                ("workload", Some(toml::Value::Array(a)), toml::Value::Array(b)) => a.extend(b),
                ("sched", Some(toml::Value::Table(a)), toml::Value::Table(b)) => a.extend(b),
                (_, _, v) => {
                    d.insert(k, v);
                }
            }
        }
    }
    for d in &mut domains {
        d.entry("sched").or_insert_with(|| {
            let mut s = toml::Table::new();
            s.insert("scheduler".into(), "cfs".into());
            s.into()
        });
    }
    let mut out = toml::Table::new();
    out.insert("name".into(), "imported".into());
    if !run.is_empty() {
        out.insert("run".into(), run.into());
    }
    let mut m = toml::Table::new();
    m.insert("pcpus".into(), i64::from(pcpus).into());
    out.insert("machine".into(), m.into());
    let mut h = toml::Table::new();
    h.insert("scheduler".into(), host.into());
    out.insert("host".into(), h.into());
    out.insert(
        "domain".into(),
        toml::Value::Array(domains.into_iter().map(toml::Value::Table).collect()),
    );
    out
}

/// Keys written first, in this order, wherever they appear; the others follow alphabetically.
const FIRST_KEYS: [&str; 11] = [
    "kind",
    "scheduler",
    "op",
    "name",
    "description",
    "vcpus",
    "pcpus",
    "copies",
    "run",
    "machine",
    "host",
];

/// Arrays of tables written inline, one element a line (`steps = [ { op = ... }, ... ]`).
const INLINE_ARRAYS: [&str; 1] = ["steps"];

fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        k.to_string()
    } else {
        toml::Value::String(k.to_string()).to_string()
    }
}

fn ordered(t: &toml::Table) -> Vec<(&String, &toml::Value)> {
    let mut v: Vec<_> = t.iter().collect();
    v.sort_by_key(|(k, _)| {
        (
            FIRST_KEYS
                .iter()
                .position(|f| f == k)
                .unwrap_or(FIRST_KEYS.len()),
            k.to_string(),
        )
    });
    v
}

fn is_table_array(v: &toml::Value) -> bool {
    matches!(v, toml::Value::Array(a) if !a.is_empty() && a.iter().all(|x| x.is_table()))
}

fn write_table(out: &mut String, path: &str, t: &toml::Table) {
    let items = ordered(t);
    for (k, v) in &items {
        if INLINE_ARRAYS.contains(&k.as_str()) && is_table_array(v) {
            out.push_str(&format!("{} = [\n", toml_key(k)));
            for x in v.as_array().into_iter().flatten() {
                let inline: Vec<String> = x
                    .as_table()
                    .map(ordered)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| format!("{} = {v}", toml_key(k)))
                    .collect();
                out.push_str(&format!("  {{ {} }},\n", inline.join(", ")));
            }
            out.push_str("]\n");
        } else if !v.is_table() && !is_table_array(v) {
            out.push_str(&format!("{} = {v}\n", toml_key(k)));
        }
    }
    let sub = |k: &str| {
        if path.is_empty() {
            toml_key(k)
        } else {
            format!("{path}.{}", toml_key(k))
        }
    };
    for (k, v) in &items {
        if let toml::Value::Table(st) = v {
            out.push_str(&format!("\n[{}]\n", sub(k)));
            write_table(out, &sub(k), st);
        }
    }
    for (k, v) in &items {
        if is_table_array(v) && !INLINE_ARRAYS.contains(&k.as_str()) {
            for x in v.as_array().into_iter().flatten() {
                out.push_str(&format!("\n[[{}]]\n", sub(k)));
                write_table(out, &sub(k), x.as_table().expect("an array of tables"));
            }
        }
    }
}

/// A table as TOML text laid out for reading: scalars first (`name`, `kind`, `scheduler`, `op`
/// leading), then sub-tables, then arrays of tables; program steps inline, one a line.
pub fn write_toml(t: &toml::Table) -> String {
    let mut out = String::new();
    write_table(&mut out, "", t);
    out.trim_start_matches('\n').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_toml_reads_back_and_is_laid_out_for_reading() {
        let src = r#"
name = "s"
[machine]
pcpus = 2
[[domain]]
name = "d \"q\" [/x]"
vcpus = 1
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "program"
name = "w"
steps = [{ op = "compute", us = 5 }, { op = "loop", to = 0 }]
"#;
        let t: toml::Table = toml::from_str(src).unwrap();
        let text = write_toml(&t);
        let back: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(back, t);
        assert!(text.starts_with("name = \"s\"\n\n[machine]"), "{text}");
        assert!(
            text.contains(
                "steps = [\n  { op = \"compute\", us = 5 },\n  { op = \"loop\", to = 0 },\n]"
            ),
            "{text}"
        );
        assert!(text.contains("[[domain]]\nname = "), "{text}");
        assert!(
            text.contains("[domain.sched]\nscheduler = \"cfs\""),
            "{text}"
        );
    }

    #[test]
    fn decode_accepts_utf8_with_or_without_bom() {
        assert_eq!(decode("f", b"a = 1\n").unwrap(), "a = 1\n");
        assert_eq!(decode("f", b"\xef\xbb\xbfa = 1\n").unwrap(), "a = 1\n");
    }

    #[test]
    fn decode_refuses_other_encodings_with_the_offset() {
        let e = decode("f.cfg", b"\xff\xfea\x00").unwrap_err();
        assert!(e.message.contains("UTF-16"), "{e}");
        let e = decode("f.cfg", b"a = 1\nb = \"\xe9\"\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("byte offset 11"), "{e}");
        assert!(e.message.contains("0xe9"), "{e}");
        let e = decode("f.cfg", b"ab\x00").unwrap_err();
        assert!(e.message.contains("NUL byte at byte offset 2"), "{e}");
        assert_eq!(e.to_string().lines().count(), 1);
    }

    #[test]
    fn read_file_names_what_is_wrong() {
        let dir = std::env::temp_dir().join(format!("vmsched-import-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = read_file(&dir).unwrap_err();
        assert!(e.message.contains("directory"), "{e}");
        let e = read_file(&dir.join("missing.cfg")).unwrap_err();
        assert_eq!(e.message, "no such file");
        let big = dir.join("big.cfg");
        std::fs::write(&big, vec![b'#'; MAX_IMPORT_BYTES as usize + 1]).unwrap();
        let e = read_file(&big).unwrap_err();
        assert!(e.message.contains("limit"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
