//! The field a scenario file's parse error is about, as a dotted path (`domain.0.workload.1.copies`).
//!
//! The TOML deserializer reports type and value errors with a span, and, inside internally tagged
//! tables (`[host]`, `[domain.sched]`, `[[domain.workload]]`, program steps), only the table's
//! span: serde buffers a tagged table's content and loses the positions of its fields. So the path
//! comes from the deepest key or value whose span holds the error's start, then, inside a table,
//! from the message: the field it names (`unknown field`, `missing field`), or the one field whose
//! value is the one the message quotes (`invalid type: string "two"`, `unknown variant `x``).
//! A file that does not parse at all is read line by line: the table headers above the error and
//! the key on its line.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// A located field: its dotted path and the byte offset of its key or value.
pub(super) struct Located {
    pub path: String,
    pub at: Option<usize>,
}

/// The field a deserialization error (message `msg`, span `span`) in `src` is about.
pub(super) fn locate_error(src: &str, span: Option<Range<usize>>, msg: &str) -> Located {
    let Ok(root) = DeTable::parse(src) else {
        return Located {
            path: by_lines(src, span.map(|s| s.start)),
            at: None,
        };
    };
    let root = DeValue::Table(root.into_inner());
    let (mut path, mut at) = match span.and_then(|s| deepest(&root, s.start)) {
        Some((p, _, a)) => (p, Some(a)),
        None => (Vec::new(), None),
    };
    if let Some(f) = quoted(msg, "missing field `") {
        // The span is the table's: name the field in it (no line of its own).
        while !path.is_empty() && !matches!(get(&root, &path), Some(DeValue::Table(_))) {
            path.pop();
        }
        // A tagged table nested in a tagged one (`[host.sched]` of the KVM host) is buffered
        // with it: the field is the inner table's if that is the only tagged one without it.
        // (Never from the top level: a missing top-level table is the top level's.)
        while let Some(inner) = (!path.is_empty())
            .then(|| nested_tagged_without(&root, &path, &f))
            .flatten()
        {
            path.push(inner);
        }
        path.push(f);
        return Located {
            path: path.join("."),
            at,
        };
    }
    let unknown = quoted(msg, "unknown field `");
    if unknown
        .as_deref()
        .is_some_and(|f| path.last().is_some_and(|l| l == f))
    {
        return Located {
            path: path.join("."),
            at,
        };
    }
    // The located value itself, then (a tagged table's error carries the span of its whole
    // array of tables) the nearest array around it, then the whole file.
    let mut scopes = vec![path.len()];
    scopes.extend(
        (0..path.len())
            .rev()
            .filter(|&k| matches!(get(&root, &path[..k]), Some(DeValue::Array(_)))),
    );
    scopes.push(0);
    for k in scopes {
        let Some(node) = get(&root, &path[..k]) else {
            continue;
        };
        let found = match &unknown {
            Some(f) => find(node, &|key, _| key == f),
            None => find(node, &|_, v| quotes(msg, v)),
        };
        if let Some((p, a)) = found {
            path.truncate(k);
            path.extend(p);
            at = Some(a);
            break;
        }
    }
    if let Some(f) = unknown {
        if path.last() != Some(&f) {
            path.push(f);
        }
    }
    Located {
        path: path.join("."),
        at,
    }
}

/// The value at `path` below `root`.
fn get<'a, 'i>(root: Node<'a, 'i>, path: &[String]) -> Option<Node<'a, 'i>> {
    let mut cur = root;
    for seg in path {
        cur = children(cur)
            .into_iter()
            .find(|(s, _, _)| s == seg)?
            .2
            .get_ref();
    }
    Some(cur)
}

/// The one sub-table of the table at `path` that is itself tagged (has a `scheduler` or `kind`
/// key) and lacks `field`, if there is exactly one and the table at `path` has `field` neither.
fn nested_tagged_without(root: Node, path: &[String], field: &str) -> Option<String> {
    let table = get(root, path)?;
    let has = |v: Node, k: &str| children(v).iter().any(|(s, _, _)| s == k);
    if has(table, field) {
        return None;
    }
    let mut tagged = children(table).into_iter().filter(|(_, _, v)| {
        let v = v.get_ref();
        matches!(v, DeValue::Table(_)) && (has(v, "scheduler") || has(v, "kind")) && !has(v, field)
    });
    let (seg, _, _) = tagged.next()?;
    tagged.next().is_none().then_some(seg)
}

/// The text between `prefix` and the next backquote in `msg`.
fn quoted(msg: &str, prefix: &str) -> Option<String> {
    let rest = &msg[msg.find(prefix)? + prefix.len()..];
    Some(rest.split('`').next()?.to_string())
}

type Node<'a, 'i> = &'a DeValue<'i>;

/// The children of a table or array: (path segment, key span, value).
fn children<'a, 'i>(v: Node<'a, 'i>) -> Vec<(String, Range<usize>, &'a Spanned<DeValue<'i>>)> {
    match v {
        DeValue::Table(t) => t
            .iter()
            .map(|(k, v)| (k.get_ref().to_string(), k.span(), v))
            .collect(),
        DeValue::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v.span(), v))
            .collect(),
        _ => Vec::new(),
    }
}

/// The deepest key or value whose span holds `at`: its path, value and start.
fn deepest<'a, 'i>(v: Node<'a, 'i>, at: usize) -> Option<(Vec<String>, Node<'a, 'i>, usize)> {
    for (seg, key, child) in children(v) {
        if let Some((mut p, n, a)) = deepest(child.get_ref(), at) {
            p.insert(0, seg);
            return Some((p, n, a));
        }
        if key.contains(&at) || child.span().contains(&at) {
            return Some((
                vec![seg],
                child.get_ref(),
                key.start.min(child.span().start),
            ));
        }
    }
    None
}

/// Does the message quote this value (`string "x"`, `integer `3``, `unknown variant `x``, ...)?
fn quotes(msg: &str, v: &DeValue<'_>) -> bool {
    let Some(what) = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "))
        .or_else(|| msg.strip_prefix("unknown variant "))
        .map(|m| m.split(", expected").next().unwrap_or(m))
    else {
        return false;
    };
    match v {
        DeValue::String(s) => what == format!("string {s:?}") || what == format!("`{s}`"),
        DeValue::Integer(i) => {
            let n = i64::from_str_radix(&i.as_str().replace('_', ""), i.radix());
            n.is_ok_and(|n| what == format!("integer `{n}`"))
        }
        DeValue::Float(f) => {
            what.starts_with("floating point `") && {
                let t = f.as_str().replace('_', "");
                t.parse::<f64>()
                    .is_ok_and(|x| what == format!("floating point `{x}`"))
            }
        }
        DeValue::Boolean(b) => what == format!("boolean `{b}`"),
        DeValue::Array(_) => what == "sequence",
        DeValue::Table(_) => what == "map",
        DeValue::Datetime(_) => false,
    }
}

/// The first field (depth first) below `v` for which `hit(key, value)` holds: its path below
/// `v` and the start of its key.
fn find(v: Node<'_, '_>, hit: &dyn Fn(&str, &DeValue<'_>) -> bool) -> Option<(Vec<String>, usize)> {
    for (seg, key, child) in children(v) {
        if hit(&seg, child.get_ref()) {
            return Some((vec![seg], key.start));
        }
        if let Some((mut p, a)) = find(child.get_ref(), hit) {
            p.insert(0, seg);
            return Some((p, a));
        }
    }
    None
}

/// For a file that does not parse: the table headers above offset `at` and the key at its line
/// (`[[domain]]` twice, then `[domain.sched]`, then `hz = = 1` → `domain.1.sched.hz`).
fn by_lines(src: &str, at: Option<usize>) -> String {
    let Some(at) = at else {
        return String::new();
    };
    let upto = &src[..at.min(src.len())];
    let line_start = upto.rfind('\n').map_or(0, |i| i + 1);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut table = String::new();
    for line in src[..line_start].lines() {
        let t = line.trim();
        if let Some(h) = t.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let h = h.trim().to_string();
            counts.retain(|k, _| !k.starts_with(&format!("{h}.")));
            *counts.entry(h.clone()).or_default() += 1;
            table = resolve(&counts, &h);
        } else if let Some(h) = t.strip_prefix('[').and_then(|r| r.split(']').next()) {
            table = resolve(&counts, h.trim());
        }
    }
    let line = src[line_start..].lines().next().unwrap_or("");
    let key = line.split_once('=').map(|(k, _)| k.trim()).filter(|k| {
        !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
    });
    match (table.is_empty(), key) {
        (_, None) => table,
        (true, Some(k)) => k.to_string(),
        (false, Some(k)) => format!("{table}.{k}"),
    }
}

/// A header path with the index of every array of tables along it (`domain.workload` →
/// `domain.1.workload.0`).
fn resolve(counts: &BTreeMap<String, usize>, header: &str) -> String {
    let mut out = Vec::new();
    let mut prefix = String::new();
    for seg in header.split('.') {
        let seg = seg.trim();
        if !prefix.is_empty() {
            prefix.push('.');
        }
        prefix.push_str(seg);
        out.push(seg.to_string());
        if let Some(n) = counts.get(&prefix) {
            out.push(n.saturating_sub(1).to_string());
        }
    }
    out.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The path for an error found by deserializing `src` as a table of tagged tables.
    fn path_of(src: &str) -> String {
        #[derive(serde::Deserialize, Debug)]
        #[serde(tag = "kind", deny_unknown_fields)]
        enum W {
            #[serde(rename = "a")]
            A {
                #[allow(dead_code)]
                n: u32,
            },
        }
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        struct Top {
            #[allow(dead_code)]
            x: u32,
            #[allow(dead_code)]
            w: Vec<W>,
        }
        let e = toml::from_str::<Top>(src).expect_err("must fail");
        locate_error(src, e.span(), e.message().trim()).path
    }

    #[test]
    fn a_value_error_is_located_by_its_span() {
        assert_eq!(path_of("x = \"one\"\n"), "x");
    }

    #[test]
    fn inside_a_tagged_array_the_quoted_value_names_the_field() {
        let src = "x = 1\n[[w]]\nkind = \"a\"\nn = 1\n[[w]]\nkind = \"a\"\nn = \"two\"\n";
        assert_eq!(path_of(src), "w.1.n");
        let src = "x = 1\n[[w]]\nkind = \"a\"\nn = 1\n[[w]]\nkind = \"b\"\nn = 1\n";
        assert_eq!(path_of(src), "w.1.kind");
    }

    #[test]
    fn unknown_and_missing_fields_are_named_in_their_table() {
        let src = "x = 1\n[[w]]\nkind = \"a\"\nn = 1\n[[w]]\nkind = \"a\"\nn = 1\nzz = 2\n";
        assert_eq!(path_of(src), "w.1.zz");
        assert_eq!(path_of("w = []\n"), "x");
    }

    #[test]
    fn a_file_that_does_not_parse_is_read_by_lines() {
        let src = "x = 1\n[[w]]\nkind = \"a\"\n[[w]]\nn = = 1\n";
        let e = toml::from_str::<toml::Table>(src).expect_err("syntax");
        assert_eq!(locate_error(src, e.span(), e.message()).path, "w.1.n");
    }
}
