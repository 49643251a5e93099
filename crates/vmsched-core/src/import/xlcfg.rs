//! xl.cfg: a Xen domain configuration file, as `xl create` reads it, into one `[[domain]]`.
//!
//! Syntax (xl.cfg(5), Xen `docs/man/xl.cfg.5.pod.in`, section SYNTAX): `KEY = VALUE` settings
//! separated by newlines or `;`, `#` comments to the end of the line. A value is a string in
//! double or single quotes, a number (decimal, octal with a leading `0`, hexadecimal with `0x`),
//! or a list `[ VALUE, VALUE, ... ]` (nested, heterogeneous, spanning lines, a trailing comma
//! allowed). `KEY += VALUE` appends to a list. A key set twice keeps its last value (noted).
//! Double-quoted strings take the escapes `\\ \" \' \n \t \r`.
//!
//! Keys read (CPU Allocation and CPU Scheduling in xl.cfg(5)):
//!
//! | xl.cfg | `[[domain]]` |
//! |---|---|
//! | `name` (mandatory) | `name` |
//! | `vcpus` (default 1) | `vcpus` |
//! | `maxvcpus` | noted: the vCPUs above `vcpus` start offline and are not modelled |
//! | `cpus = "CPULIST"` | `pcpus` (omitted for "all") |
//! | `cpus = ["CPULIST", ...]` | `vcpu_pcpus`, one list per vCPU (vCPUs past the list: all) |
//! | `cpus_soft` | `soft_pcpus` (a per-vCPU list only if its entries are equal) |
//! | `cpu_weight` | `weight` (1..=65535) |
//! | `cap` | `cap` (percent of a pCPU, at most 100 × vcpus) |
//! | `pool` | noted: CPU pools are not modelled |
//! | `period`, `slice`, `latency`, `extratime`, `budget` | noted: RTDS/SEDF parameters, no host scheduler of vmsched reads them |
//!
//! A CPULIST is comma-separated items `N`, `N-M`, `all`, each optionally negated by `^`; NUMA
//! items (`nodes:`, `node:`) are refused (the scenario's machine has no node map of the real
//! host). Every other key is ignored with a note: xl.cfg has hundreds (disks, networks, memory,
//! devices) that do not bear on CPU scheduling.

use std::collections::BTreeSet;

use super::{error, Fragment, Note, Options};
use crate::cpuset::MAX_CPUS;
use crate::scenario::ScenarioError;

/// Lists nest at most this deep (xl's own configs nest two levels).
const MAX_DEPTH: usize = 32;

/// A parsed value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    Num(u64),
    List(Vec<Value>),
}

/// One `KEY = VALUE` setting.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    pub key: String,
    pub line: usize,
    pub value: Value,
    /// `+=`
    pub append: bool,
}

struct Lexer<'a> {
    file: &'a str,
    s: &'a [u8],
    src: &'a str,
    i: usize,
    line: usize,
}

impl<'a> Lexer<'a> {
    fn err(&self, key: &str, msg: impl Into<String>) -> ScenarioError {
        error(self.file, Some(self.line), key, msg)
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// Skips blanks and comments; with `newlines`, also line ends and `;`.
    fn skip(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\r' => self.i += 1,
                b'\n' if newlines => {
                    self.line += 1;
                    self.i += 1
                }
                b';' if newlines => self.i += 1,
                b'#' => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.i += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn key(&mut self) -> Result<String, ScenarioError> {
        let start = self.i;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            self.i += 1;
        }
        if self.i == start || self.s[start].is_ascii_digit() {
            let got = self.src[self.i..].chars().next().unwrap_or(' ');
            return Err(self.err("", format!("expected a KEY = VALUE setting, found '{got}'")));
        }
        Ok(self.src[start..self.i].to_string())
    }

    fn value(&mut self, key: &str, depth: usize) -> Result<Value, ScenarioError> {
        if depth > MAX_DEPTH {
            return Err(self.err(key, format!("lists nest deeper than {MAX_DEPTH} levels")));
        }
        match self.peek() {
            Some(q @ (b'"' | b'\'')) => self.string(key, q).map(Value::Str),
            Some(b'0'..=b'9') => self.number(key).map(Value::Num),
            Some(b'[') => {
                let open = self.line;
                let unclosed = |lx: &Self| {
                    error(
                        lx.file,
                        Some(open),
                        key,
                        format!("the list opened on line {open} is not closed by ']'"),
                    )
                };
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.skip(true);
                    if self.peek() == Some(b']') {
                        self.i += 1;
                        return Ok(Value::List(items));
                    }
                    if self.peek().is_none() {
                        return Err(unclosed(self));
                    }
                    items.push(self.value(key, depth + 1)?);
                    self.skip(true);
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {}
                        None => return Err(unclosed(self)),
                        _ => return Err(self.err(key, "expected ',' or ']' in the list")),
                    }
                }
            }
            None => Err(self.err(key, "the value is missing")),
            Some(_) => {
                let got = self.src[self.i..].chars().next().unwrap_or(' ');
                Err(self.err(
                    key,
                    format!(
                        "expected a value (\"string\", number or [list]), found '{got}' (strings \
                         need quotes)"
                    ),
                ))
            }
        }
    }

    fn string(&mut self, key: &str, quote: u8) -> Result<String, ScenarioError> {
        let line = self.line;
        self.i += 1;
        let mut out = String::new();
        loop {
            let rest = &self.src[self.i..];
            let Some(c) = rest.chars().next() else {
                return Err(error(
                    self.file,
                    Some(line),
                    key,
                    "the string is not closed",
                ));
            };
            self.i += c.len_utf8();
            match c {
                '\n' => {
                    return Err(error(
                        self.file,
                        Some(line),
                        key,
                        "the string is not closed on its line",
                    ))
                }
                c if c as u32 == quote as u32 => return Ok(out),
                '\\' if quote == b'"' => {
                    let e = self.src[self.i..].chars().next();
                    self.i += e.map_or(0, char::len_utf8);
                    out.push(match e {
                        Some('\\') => '\\',
                        Some('"') => '"',
                        Some('\'') => '\'',
                        Some('n') => '\n',
                        Some('t') => '\t',
                        Some('r') => '\r',
                        other => {
                            return Err(self.err(
                                key,
                                format!(
                                    "unknown escape '\\{}' in the string",
                                    other.unwrap_or(' ')
                                ),
                            ))
                        }
                    });
                }
                c => out.push(c),
            }
        }
    }

    fn number(&mut self, key: &str) -> Result<u64, ScenarioError> {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
            self.i += 1;
        }
        let text = &self.src[start..self.i];
        let parsed = if let Some(h) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            u64::from_str_radix(h, 16)
        } else if text.len() > 1 && text.starts_with('0') {
            u64::from_str_radix(&text[1..], 8)
        } else {
            text.parse()
        };
        parsed.map_err(|_| {
            self.err(
                key,
                format!(
                    "'{text}' is not a number (decimal, 0-prefixed octal or 0x hexadecimal, at \
                     most 2^64 - 1)"
                ),
            )
        })
    }
}

/// Parses the settings of an xl.cfg file, in file order.
pub fn parse(file: &str, src: &str) -> Result<Vec<Setting>, ScenarioError> {
    let mut lx = Lexer {
        file,
        s: src.as_bytes(),
        src,
        i: 0,
        line: 1,
    };
    let mut out = Vec::new();
    loop {
        lx.skip(true);
        if lx.peek().is_none() {
            return Ok(out);
        }
        let line = lx.line;
        let key = lx.key()?;
        lx.skip(false);
        let append = match lx.peek() {
            Some(b'=') => {
                lx.i += 1;
                false
            }
            Some(b'+') if lx.s.get(lx.i + 1) == Some(&b'=') => {
                lx.i += 2;
                true
            }
            _ => return Err(lx.err(&key, "expected '=' after the key")),
        };
        lx.skip(false);
        let value = lx.value(&key, 0)?;
        lx.skip(false);
        match lx.peek() {
            None | Some(b'\n' | b';') => {}
            Some(_) => {
                return Err(lx.err(
                    &key,
                    "unexpected text after the value (one setting per line or ';')",
                ))
            }
        }
        out.push(Setting {
            key,
            line,
            value,
            append,
        });
    }
}

/// A CPULIST as read: `all`, plus the pCPUs added and removed.
#[derive(Default)]
struct CpuList {
    all: bool,
    add: BTreeSet<u32>,
    sub: BTreeSet<u32>,
}

/// An affinity: every pCPU, or these.
#[derive(Clone, Debug, PartialEq)]
enum Affinity {
    All,
    Set(Vec<u32>),
}

fn cpu_list(text: &str, err: &dyn Fn(String) -> ScenarioError) -> Result<CpuList, ScenarioError> {
    let mut l = CpuList::default();
    let cpu = |t: &str| -> Result<u32, ScenarioError> {
        match t.trim().parse::<u32>() {
            Ok(c) if (c as usize) < MAX_CPUS => Ok(c),
            Ok(c) => Err(err(format!(
                "pCPU {c} is out of range (at most {})",
                MAX_CPUS - 1
            ))),
            Err(_) => Err(err(format!(
                "'{}' is not a CPU number, range N-M or \"all\"",
                t.trim()
            ))),
        }
    };
    for item in text.split(',') {
        let item = item.trim();
        let (neg, body) = match item.strip_prefix('^') {
            Some(b) => (true, b.trim()),
            None => (false, item),
        };
        if body.starts_with("node") {
            return Err(err(format!(
                "'{item}': NUMA node lists are not read (the scenario's machine has no map of the \
                 real host's nodes); list the pCPUs"
            )));
        }
        if body == "all" {
            if neg {
                return Err(err("'^all' excludes every pCPU".into()));
            }
            l.all = true;
            continue;
        }
        let (a, b) = match body.split_once('-') {
            Some((a, b)) => (cpu(a)?, cpu(b)?),
            None => {
                let c = cpu(body)?;
                (c, c)
            }
        };
        if a > b {
            return Err(err(format!("'{body}': a range N-M needs N ≤ M")));
        }
        let set = if neg { &mut l.sub } else { &mut l.add };
        set.extend(a..=b);
    }
    Ok(l)
}

impl CpuList {
    fn resolve(
        self,
        pcpus: Option<u32>,
        err: &dyn Fn(String) -> ScenarioError,
    ) -> Result<Affinity, ScenarioError> {
        if let Some(n) = pcpus {
            if let Some(c) = self.add.iter().chain(&self.sub).find(|c| **c >= n) {
                return Err(err(format!(
                    "pCPU {c} does not exist (the host has {n} pCPUs)"
                )));
            }
        }
        let set: BTreeSet<u32> = if self.all {
            if self.sub.is_empty() {
                return Ok(Affinity::All);
            }
            let Some(n) = pcpus else {
                return Err(err(
                    "\"all\" with exclusions needs the host's pCPU count (--pcpus N)".into(),
                ));
            };
            (0..n).filter(|c| !self.sub.contains(c)).collect()
        } else {
            self.add.difference(&self.sub).copied().collect()
        };
        if set.is_empty() {
            return Err(err("the CPU list names no pCPU".into()));
        }
        if pcpus.is_some_and(|n| set.len() as u32 == n) {
            return Ok(Affinity::All);
        }
        Ok(Affinity::Set(set.into_iter().collect()))
    }
}

/// The xl.cfg keys that set a scheduling parameter no host scheduler of vmsched reads.
const UNMODELLED_SCHED: [&str; 5] = ["period", "slice", "latency", "extratime", "budget"];

/// Reads an xl.cfg file into a `[[domain]]` fragment.
pub fn import(file: &str, src: &str, opts: &Options) -> Result<Fragment, ScenarioError> {
    let settings = parse(file, src)?;
    let mut notes = Vec::new();
    // The last value of each key, `+=` appended.
    let mut last: Vec<Setting> = Vec::new();
    for s in settings {
        match last.iter_mut().find(|o| o.key == s.key) {
            Some(o) if s.append => match (&mut o.value, s.value) {
                (Value::List(a), Value::List(b)) => a.extend(b),
                (Value::List(a), v) => a.push(v),
                _ => {
                    return Err(error(
                        file,
                        Some(s.line),
                        &s.key,
                        "'+=' appends to a list, but the key holds no list",
                    ))
                }
            },
            Some(o) => {
                notes.push(Note {
                    line: Some(s.line),
                    key: s.key.clone(),
                    message: format!("set again (line {} is overridden)", o.line),
                });
                *o = s;
            }
            None => last.push(s),
        }
    }
    let get = |k: &str| last.iter().find(|s| s.key == k);
    let num = |k: &str, lo: u64, hi: u64| -> Result<Option<(u64, usize)>, ScenarioError> {
        let Some(s) = get(k) else { return Ok(None) };
        match &s.value {
            Value::Num(v) if (lo..=hi).contains(v) => Ok(Some((*v, s.line))),
            Value::Num(v) => Err(error(
                file,
                Some(s.line),
                k,
                format!("must be in {lo}..={hi}, got {v}"),
            )),
            _ => Err(error(file, Some(s.line), k, "expected a number")),
        }
    };
    let name = match get("name") {
        Some(Setting {
            value: Value::Str(n),
            ..
        }) if !n.is_empty() => n.clone(),
        Some(s) => {
            return Err(error(
                file,
                Some(s.line),
                "name",
                "expected a non-empty string",
            ))
        }
        None => {
            return Err(error(
                file,
                None,
                "name",
                "missing: xl.cfg(5) makes `name` mandatory",
            ))
        }
    };
    let vcpus = match num("vcpus", 1, MAX_CPUS as u64)? {
        Some((v, _)) => v as u32,
        None => {
            notes.push(Note {
                line: None,
                key: "vcpus".into(),
                message: "not set: 1 vCPU, xl's default".into(),
            });
            1
        }
    };
    if let Some((m, line)) = num("maxvcpus", 1, MAX_CPUS as u64)? {
        if m < vcpus as u64 {
            return Err(error(
                file,
                Some(line),
                "maxvcpus",
                format!("must be at least vcpus ({vcpus}), got {m}"),
            ));
        }
        notes.push(Note {
            line: Some(line),
            key: "maxvcpus".into(),
            message: format!(
                "{m}: the {} vCPUs above vcpus = {vcpus} start offline and are left out",
                m - vcpus as u64
            ),
        });
    }
    let mut d = toml::Table::new();
    d.insert("name".into(), name.into());
    d.insert("vcpus".into(), i64::from(vcpus).into());
    if let Some((w, _)) = num("cpu_weight", 1, 65535)? {
        d.insert("weight".into(), (w as i64).into());
    }
    if let Some((c, _)) = num("cap", 0, 100 * vcpus as u64)? {
        if c > 0 {
            d.insert("cap".into(), (c as i64).into());
        }
    }
    let list_of =
        |set: Vec<u32>| toml::Value::Array(set.into_iter().map(|c| i64::from(c).into()).collect());
    for (key, soft) in [("cpus", false), ("cpus_soft", true)] {
        let Some(s) = get(key) else { continue };
        let err = |m: String| error(file, Some(s.line), key, m);
        let one = |v: &Value| -> Result<Affinity, ScenarioError> {
            match v {
                Value::Str(t) => cpu_list(t, &err)?.resolve(opts.pcpus, &err),
                Value::Num(n) => cpu_list(&n.to_string(), &err)?.resolve(opts.pcpus, &err),
                Value::List(_) => Err(err("a CPULIST is a string, not a nested list".into())),
            }
        };
        let per_vcpu: Vec<Affinity> = match &s.value {
            Value::List(items) => {
                if items.len() > vcpus as usize {
                    return Err(err(format!(
                        "{} per-vCPU entries for {vcpus} vCPUs",
                        items.len()
                    )));
                }
                let mut v = items.iter().map(one).collect::<Result<Vec<_>, _>>()?;
                v.resize(vcpus as usize, Affinity::All);
                v
            }
            v => vec![one(v)?],
        };
        let field = if soft { "soft_pcpus" } else { "pcpus" };
        if per_vcpu.iter().all(|a| *a == per_vcpu[0]) {
            if let Affinity::Set(set) = &per_vcpu[0] {
                d.insert(field.into(), list_of(set.clone()));
            }
            continue;
        }
        if soft {
            return Err(err(
                "per-vCPU soft affinities that differ are not modelled (the scenario has one soft \
                 affinity a domain)"
                    .into(),
            ));
        }
        let lists = per_vcpu
            .into_iter()
            .map(|a| match (a, opts.pcpus) {
                (Affinity::All, Some(n)) => Ok(list_of((0..n).collect())),
                (Affinity::All, None) => Err(err(
                    "a vCPU on every pCPU (\"all\", or past the list's end) beside pinned ones \
                     needs the host's pCPU count (--pcpus N)"
                        .into(),
                )),
                (Affinity::Set(s), _) => Ok(list_of(s)),
            })
            .collect::<Result<_, _>>()?;
        d.insert("vcpu_pcpus".into(), toml::Value::Array(lists));
    }
    let mut sched = toml::Table::new();
    sched.insert("scheduler".into(), "cfs".into());
    d.insert("sched".into(), sched.into());
    for s in &last {
        let message = match s.key.as_str() {
            "name" | "vcpus" | "maxvcpus" | "cpus" | "cpus_soft" | "cpu_weight" | "cap" => continue,
            "pool" => {
                "CPU pools are not modelled: the domain runs under the scenario's [host]".into()
            }
            k if UNMODELLED_SCHED.contains(&k) => format!(
                "`{k}` is an RTDS/SEDF scheduling parameter that no host scheduler of vmsched reads"
            ),
            _ => "ignored (no bearing on CPU scheduling in the model)".to_string(),
        };
        notes.push(Note {
            line: Some(s.line),
            key: s.key.clone(),
            message,
        });
    }
    notes.sort_by_key(|n| n.line.unwrap_or(usize::MAX));
    let mut table = toml::Table::new();
    table.insert("domain".into(), toml::Value::Array(vec![d.into()]));
    Ok(Fragment { table, notes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(f: &Fragment) -> &toml::Table {
        f.table["domain"][0].as_table().unwrap()
    }

    fn ints(v: &toml::Value) -> Vec<i64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_integer().unwrap())
            .collect()
    }

    const GUEST: &str = r#"
# A PV guest in the style of xl.cfg(5)'s examples.
name = "guest1"
type = "pvh"
memory = 1024
vcpus = 4
maxvcpus = 8
cpus = "0-3,5,^1"        # hard affinity
cpus_soft = "all"
cpu_weight = 512; cap = 150
disk = [ 'format=raw, vdev=xvda, access=w, target=/dev/vg/guest1',
         "vdev=xvdb, target=/data.img", ]
kernel = "/boot/vmlinuz"
"#;

    #[test]
    fn a_guest_becomes_a_domain() {
        let f = import("g.cfg", GUEST, &Options::default()).unwrap();
        let d = domain(&f);
        assert_eq!(d["name"].as_str(), Some("guest1"));
        assert_eq!(d["vcpus"].as_integer(), Some(4));
        assert_eq!(d["weight"].as_integer(), Some(512));
        assert_eq!(d["cap"].as_integer(), Some(150));
        assert_eq!(ints(&d["pcpus"]), [0, 2, 3, 5]);
        assert!(!d.contains_key("soft_pcpus"), "\"all\" is the default");
        assert_eq!(d["sched"]["scheduler"].as_str(), Some("cfs"));
        let keys: Vec<&str> = f.notes.iter().map(|n| n.key.as_str()).collect();
        assert_eq!(keys, ["type", "memory", "maxvcpus", "disk", "kernel"]);
        assert_eq!(f.notes[2].line, Some(7));
        assert!(
            f.notes[2].message.contains("4 vCPUs above"),
            "{}",
            f.notes[2]
        );
        // The fragment is TOML a scenario takes.
        let text = f.to_toml();
        assert!(text.contains("[[domain]]"), "{text}");
        assert!(text.contains("[domain.sched]"), "{text}");
    }

    #[test]
    fn per_vcpu_lists_and_all_with_exclusions() {
        let src = "name='a'\nvcpus=3\ncpus=[\"2\", \"3-8,^5\"]\ncpus_soft=\"all,^0\"\n";
        let opts = Options { pcpus: Some(10) };
        let f = import("a.cfg", src, &opts).unwrap();
        let d = domain(&f);
        // Pinned lists alone need no host size.
        let f2 = import(
            "b.cfg",
            "name='b'\nvcpus=2\ncpus=['0', '1-3,^2']\n",
            &Options::default(),
        )
        .unwrap();
        assert_eq!(domain(&f2)["vcpu_pcpus"].as_array().unwrap().len(), 2);
        let per: Vec<Vec<i64>> = d["vcpu_pcpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(ints)
            .collect();
        assert_eq!(per, [vec![2], vec![3, 4, 6, 7, 8], (0..10).collect()]);
        assert_eq!(ints(&d["soft_pcpus"]), (1..10).collect::<Vec<_>>());
        // Without the host's size, "all" with exclusions cannot be expanded.
        let e = import("a.cfg", src, &Options::default()).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(3), "cpus"));
        assert!(e.message.contains("--pcpus"), "{e}");
    }

    #[test]
    fn numbers_in_every_base_and_appends() {
        let src = "name=\"n\"\nvcpus=0x2\ncpu_weight=0400\nextra=[1]\nextra+=[2]\n";
        let f = import("n.cfg", src, &Options::default()).unwrap();
        let d = domain(&f);
        assert_eq!(d["vcpus"].as_integer(), Some(2));
        assert_eq!(d["weight"].as_integer(), Some(256));
        let settings = parse("n.cfg", "k = [1, [\"a\", 'b'], ]\n").unwrap();
        assert_eq!(
            settings[0].value,
            Value::List(vec![
                Value::Num(1),
                Value::List(vec![Value::Str("a".into()), Value::Str("b".into())])
            ])
        );
    }

    fn err(src: &str) -> ScenarioError {
        import("bad.cfg", src, &Options::default()).unwrap_err()
    }

    #[test]
    fn errors_name_the_key_and_the_line() {
        for (src, line, key, says) in [
            ("vcpus = 2\n", None, "name", "mandatory"),
            ("name = 'x'\nvcpus = 0\n", Some(2), "vcpus", "1..=4096"),
            (
                "name = 'x'\n\ncpu_weight = 70000\n",
                Some(3),
                "cpu_weight",
                "1..=65535",
            ),
            (
                "name = 'x'\nvcpus = 2\ncap = 201\n",
                Some(3),
                "cap",
                "0..=200",
            ),
            (
                "name = 'x'\ncpus = \"nodes:0-1\"\n",
                Some(2),
                "cpus",
                "NUMA",
            ),
            ("name = 'x'\ncpus = \"3-1\"\n", Some(2), "cpus", "N ≤ M"),
            (
                "name = 'x'\ncpus = \"0-99999\"\n",
                Some(2),
                "cpus",
                "out of range",
            ),
            (
                "name = 'x'\ncpus = \"1,^1\"\n",
                Some(2),
                "cpus",
                "names no pCPU",
            ),
            (
                "name = 'x'\ncpus = [\"1\", \"2\"]\n",
                Some(2),
                "cpus",
                "2 per-vCPU entries",
            ),
            (
                "name = 'x'\nvcpus = \"2\"\n",
                Some(2),
                "vcpus",
                "expected a number",
            ),
            ("name = x\n", Some(1), "name", "strings need quotes"),
            ("name = 'x\n", Some(1), "name", "not closed"),
            (
                "name = 'x'\nmemory = 12ab\n",
                Some(2),
                "memory",
                "not a number",
            ),
            ("name = 'x'\ndisk = [ 'a'\n", Some(2), "disk", "not closed"),
            ("name = 'x'\nvcpus 2\n", Some(2), "vcpus", "expected '='"),
            ("name = 'x' vcpus = 2\n", Some(1), "name", "after the value"),
            (
                "name = 'x'\nvcpus = 99999999999999999999\n",
                Some(2),
                "vcpus",
                "not a number",
            ),
            (
                "name = 'x'\nmaxvcpus = 1\nvcpus = 2\n",
                Some(2),
                "maxvcpus",
                "at least vcpus",
            ),
            (
                "name = 'x'\nvcpus = 1\nvcpus += 2\n",
                Some(3),
                "vcpus",
                "'+='",
            ),
            // Input text in a message stays on one line.
            (
                "name = 'x'\ncpus = \"0\\n1\"\n",
                Some(2),
                "cpus",
                "'0\\n1' is not",
            ),
        ] {
            let e = err(src);
            assert_eq!((e.line, e.field.as_str()), (line, key), "{src:?}: {e}");
            assert!(e.message.contains(says), "{src:?}: {e}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let src = format!("name = 'x'\nk = {}1{}\n", "[".repeat(100), "]".repeat(100));
        let e = err(&src);
        assert!(e.message.contains("nest deeper"), "{e}");
    }

    #[test]
    fn sched_params_without_a_model_are_noted() {
        let f = import(
            "r.cfg",
            "name='r'\npool='rt'\nperiod=10000\nbudget=4000\n",
            &Options::default(),
        )
        .unwrap();
        let msgs: Vec<String> = f.notes.iter().map(|n| n.to_string()).collect();
        assert!(msgs[0].starts_with("line 2: pool: CPU pools"), "{msgs:?}");
        assert!(msgs[1].contains("RTDS/SEDF"), "{msgs:?}");
        assert!(msgs[2].contains("RTDS/SEDF"), "{msgs:?}");
        assert!(msgs[3].contains("1 vCPU, xl's default"), "{msgs:?}");
    }
}
