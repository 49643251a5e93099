//! `--set` overrides: the values a command line or the Python API gives, and how each is read by
//! the type its field has in the validated scenario before it is written into the document.

use std::fmt;

/// One `--set` value: text as typed on a command line, or a typed value (from the Python API).
///
/// Text is parsed by the type the target field has in the validated scenario (defaults filled
/// in): for a string field it is the string itself (`--set host.version=4.21` is the version
/// "4.21", not a float), for a number field a number, and so on. A typed value must fit the
/// field's type (an integer widens to a float field); nothing goes through TOML text.
#[derive(Clone, Debug, PartialEq)]
pub enum SetValue {
    Text(String),
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<SetValue>),
}

impl fmt::Display for SetValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetValue::Text(s) => write!(f, "{s}"),
            SetValue::Bool(b) => write!(f, "{b}"),
            SetValue::Int(i) => write!(f, "{i}"),
            SetValue::Float(x) => write!(f, "{x:?}"),
            SetValue::Str(s) => write!(f, "{s:?}"),
            SetValue::List(l) => {
                write!(f, "[")?;
                for (i, v) in l.iter().enumerate() {
                    write!(f, "{}{v}", if i == 0 { "" } else { ", " })?;
                }
                write!(f, "]")
            }
        }
    }
}

impl SetValue {
    pub(super) fn describe(&self) -> String {
        match self {
            SetValue::Text(s) => format!("'{s}'"),
            SetValue::Bool(b) => format!("the boolean {b}"),
            SetValue::Int(i) => format!("the integer {i}"),
            SetValue::Float(x) => format!("the float {x:?}"),
            SetValue::Str(s) => format!("the string {s:?}"),
            SetValue::List(_) => format!("the list {self}"),
        }
    }
}

/// What a field of this (serialised) value's type expects, for error messages.
pub(super) fn expected(target: &toml::Value) -> &'static str {
    match target {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a number",
        toml::Value::Boolean(_) => "a boolean (true or false)",
        toml::Value::Array(_) => "a list",
        toml::Value::Table(_) => "a table",
        toml::Value::Datetime(_) => "a date",
    }
}

/// Text read as one TOML value, if it is one.
pub(super) fn toml_literal(v: &str) -> Option<toml::Value> {
    let mut t = toml::from_str::<toml::Table>(&format!("v = {v}")).ok()?;
    t.remove("v")
}

/// A value for a field whose type is not known (absent from the validated scenario, such as an
/// unset optional field): text is a TOML value if it parses as one, else a string; a number that
/// would lose digits as a float (`5.10`) stays a string.
pub(super) fn parse_value(v: &str) -> toml::Value {
    match toml_literal(v) {
        // "5.10" is a version, not the float 5.1: keep text whose float form reads differently.
        Some(toml::Value::Float(f)) if f.to_string() != v.trim() => toml::Value::String(v.into()),
        Some(x) => x,
        None => toml::Value::String(v.into()),
    }
}

pub(super) fn untyped(v: &SetValue) -> toml::Value {
    match v {
        SetValue::Text(s) => parse_value(s),
        SetValue::Bool(b) => toml::Value::Boolean(*b),
        SetValue::Int(i) => toml::Value::Integer(*i),
        SetValue::Float(x) => toml::Value::Float(*x),
        SetValue::Str(s) => toml::Value::String(s.clone()),
        SetValue::List(l) => toml::Value::Array(l.iter().map(untyped).collect()),
    }
}

/// The value to store for `v` in a field whose current (serialised) value is `target`;
/// Err(message) names the expected type.
pub(super) fn typed_value(
    v: &SetValue,
    target: Option<&toml::Value>,
) -> Result<toml::Value, String> {
    use toml::Value as T;
    let Some(target) = target else {
        return Ok(untyped(v));
    };
    let text = match v {
        SetValue::Text(s) => Some(s.trim()),
        _ => None,
    };
    let got = match (target, v) {
        (T::Table(_), _) => {
            return Err("this is a table: set one of its fields (key.field=value)".into())
        }
        (T::Datetime(_), _) => Some(untyped(v)),
        (T::String(_), SetValue::Str(s)) => Some(T::String(s.clone())),
        // A quoted string (as older command lines wrote versions) is unquoted.
        (T::String(_), SetValue::Text(_)) => match text.and_then(toml_literal) {
            Some(T::String(s)) if text.is_some_and(|t| t.starts_with(['"', '\''])) => {
                Some(T::String(s))
            }
            _ => text.map(|t| T::String(t.to_string())),
        },
        (T::Integer(_), SetValue::Int(i)) => Some(T::Integer(*i)),
        (T::Float(_), SetValue::Int(i)) => Some(T::Float(*i as f64)),
        (T::Float(_), SetValue::Float(x)) => Some(T::Float(*x)),
        (T::Boolean(_), SetValue::Bool(b)) => Some(T::Boolean(*b)),
        (T::Array(_), SetValue::List(_)) => Some(untyped(v)),
        (_, SetValue::Text(_)) => match (target, text.and_then(toml_literal)) {
            (T::Integer(_), Some(T::Integer(i))) => Some(T::Integer(i)),
            (T::Float(_), Some(T::Integer(i))) => Some(T::Float(i as f64)),
            (T::Float(_), Some(T::Float(x))) => Some(T::Float(x)),
            (T::Boolean(_), Some(T::Boolean(b))) => Some(T::Boolean(b)),
            // Python spells them so.
            (T::Boolean(_), _) if text == Some("True") => Some(T::Boolean(true)),
            (T::Boolean(_), _) if text == Some("False") => Some(T::Boolean(false)),
            (T::Array(_), Some(a @ T::Array(_))) => Some(a),
            _ => None,
        },
        _ => None,
    };
    got.ok_or_else(|| format!("expected {}, got {}", expected(target), v.describe()))
}

/// The value at a dotted path in a (serialised) scenario, if there is one.
pub(super) fn lookup<'a>(doc: &'a toml::Value, key: &str) -> Option<&'a toml::Value> {
    key.split('.').try_fold(doc, |cur, seg| match cur {
        toml::Value::Table(t) => t.get(seg),
        toml::Value::Array(a) => a.get(seg.parse::<usize>().ok()?),
        _ => None,
    })
}

pub(super) fn set_path(doc: &mut toml::Value, key: &str, v: toml::Value) -> Result<(), String> {
    let segs: Vec<&str> = key.split('.').collect();
    let mut cur = doc;
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        cur = match cur {
            toml::Value::Table(t) => {
                if last {
                    t.insert(seg.to_string(), v);
                    return Ok(());
                }
                t.entry(seg.to_string())
                    .or_insert_with(|| toml::Value::Table(Default::default()))
            }
            toml::Value::Array(a) => {
                let idx: usize = seg.parse().map_err(|_| {
                    format!("'{seg}' must be an index into the array at this point")
                })?;
                let n = a.len();
                let slot = a
                    .get_mut(idx)
                    .ok_or_else(|| format!("index {idx} out of range (there are {n})"))?;
                if last {
                    *slot = v;
                    return Ok(());
                }
                slot
            }
            _ => return Err(format!("'{}' is not a table", segs[..i].join("."))),
        };
    }
    Err("empty key".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_values_keep_versions_as_text() {
        assert_eq!(parse_value("5.10"), toml::Value::String("5.10".into()));
        assert_eq!(parse_value("4.20.2"), toml::Value::String("4.20.2".into()));
        assert_eq!(parse_value("0.5"), toml::Value::Float(0.5));
        assert_eq!(parse_value("20000"), toml::Value::Integer(20000));
        assert_eq!(parse_value("true"), toml::Value::Boolean(true));
        assert_eq!(
            parse_value("[0, 1]"),
            toml::Value::Array(vec![0.into(), 1.into()])
        );
        assert_eq!(parse_value("native"), toml::Value::String("native".into()));
    }

    #[test]
    fn text_is_read_by_the_fields_type() {
        use toml::Value as T;
        let s = T::String("4.20.2".into());
        // A string field keeps what was typed, numbers and versions alike; quotes are removed.
        for (given, want) in [("4.21", "4.21"), ("5.10", "5.10"), ("\"4.21\"", "4.21")] {
            assert_eq!(
                typed_value(&text(given), Some(&s)),
                Ok(T::String(want.into()))
            );
        }
        assert_eq!(
            typed_value(&text("20000"), Some(&T::Integer(1))),
            Ok(T::Integer(20000))
        );
        assert_eq!(
            typed_value(&text("2"), Some(&T::Float(1.0))),
            Ok(T::Float(2.0))
        );
        assert_eq!(
            typed_value(&text("0.25"), Some(&T::Float(1.0))),
            Ok(T::Float(0.25))
        );
        for (given, want) in [("true", true), ("False", false)] {
            assert_eq!(
                typed_value(&text(given), Some(&T::Boolean(false))),
                Ok(T::Boolean(want))
            );
        }
        let list = T::Array(vec![]);
        assert_eq!(
            typed_value(&text("[0, 1]"), Some(&list)),
            Ok(T::Array(vec![0.into(), 1.into()]))
        );
    }

    #[test]
    fn typed_values_must_fit_the_field() {
        use toml::Value as T;
        assert_eq!(
            typed_value(&SetValue::Int(3), Some(&T::Float(1.0))),
            Ok(T::Float(3.0))
        );
        assert_eq!(
            typed_value(&SetValue::Str("x".into()), Some(&T::String(String::new()))),
            Ok(T::String("x".into()))
        );
        let e = typed_value(&SetValue::Float(4.21), Some(&T::String(String::new()))).unwrap_err();
        assert_eq!(e, "expected a string, got the float 4.21");
        let e = typed_value(&SetValue::Float(0.5), Some(&T::Integer(1))).unwrap_err();
        assert_eq!(e, "expected an integer, got the float 0.5");
        let e = typed_value(&SetValue::Bool(true), Some(&T::Integer(1))).unwrap_err();
        assert!(e.starts_with("expected an integer"), "{e}");
        let e = typed_value(&text("fast"), Some(&T::Integer(1))).unwrap_err();
        assert_eq!(e, "expected an integer, got 'fast'");
        let e = typed_value(&text("yes"), Some(&T::Boolean(true))).unwrap_err();
        assert!(e.starts_with("expected a boolean"), "{e}");
        let e = typed_value(&SetValue::Int(1), Some(&T::Table(Default::default()))).unwrap_err();
        assert!(e.contains("table"), "{e}");
        // No known type (an unset optional field): the value as given, text inferred.
        assert_eq!(
            typed_value(&text("[3]"), None),
            Ok(T::Array(vec![3.into()]))
        );
        assert_eq!(typed_value(&SetValue::Int(7), None), Ok(T::Integer(7)));
    }

    #[test]
    fn set_path_walks_tables_and_arrays() {
        let mut doc: toml::Value = toml::from_str("[a]\nb = 1\n[[d]]\nw = 2\n").unwrap();
        set_path(&mut doc, "a.b", 5.into()).unwrap();
        set_path(&mut doc, "d.0.w", 7.into()).unwrap();
        assert_eq!(doc["a"]["b"].as_integer(), Some(5));
        assert_eq!(doc["d"][0]["w"].as_integer(), Some(7));
        assert!(set_path(&mut doc, "d.3.w", 1.into())
            .unwrap_err()
            .contains("out of range"));
    }

    fn text(s: &str) -> SetValue {
        SetValue::Text(s.into())
    }
}
