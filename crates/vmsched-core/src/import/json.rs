//! A small JSON reader that keeps what rt-app files need and serde_json's `Value` drops: the
//! order of an object's keys, keys that repeat (rt-app's `workgen` accepts a repeated event key
//! and numbers it; here the copies are kept in order) and the line of every key and value, so
//! that errors name their line. Also accepted, as json-c (which rt-app links) and rt-app's
//! `workgen` accept them: `//` and `/* */` comments, a trailing comma in an object or array, and
//! a key without a value (`"suspend",`: read as null). Nesting is bounded ([`MAX_DEPTH`]) so that no input overflows the
//! stack.

use super::error;
use crate::scenario::ScenarioError;

/// The deepest nesting of arrays and objects read.
pub const MAX_DEPTH: usize = 64;

#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// An integer as written (no fraction, no exponent).
    Int(i64),
    /// Any other number.
    Float(f64),
    Str(String),
    Array(Vec<Node>),
    /// Members in file order, repeats kept.
    Object(Vec<(String, Node)>),
}

/// A value and the line it starts on.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub line: usize,
    pub value: Json,
}

impl Node {
    pub fn kind(&self) -> &'static str {
        match self.value {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Int(_) | Json::Float(_) => "a number",
            Json::Str(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }

    /// The last member named `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Json::Object(m) => m.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

struct Reader<'a> {
    file: &'a str,
    src: &'a str,
    s: &'a [u8],
    i: usize,
    line: usize,
}

impl Reader<'_> {
    fn err(&self, msg: impl Into<String>) -> ScenarioError {
        error(self.file, Some(self.line), "", msg)
    }

    fn skip(&mut self) -> Result<(), ScenarioError> {
        loop {
            match self.s.get(self.i) {
                Some(b' ' | b'\t' | b'\r') => self.i += 1,
                Some(b'\n') => {
                    self.line += 1;
                    self.i += 1;
                }
                Some(b'/') if self.s.get(self.i + 1) == Some(&b'/') => {
                    while self.s.get(self.i).is_some_and(|c| *c != b'\n') {
                        self.i += 1;
                    }
                }
                Some(b'/') if self.s.get(self.i + 1) == Some(&b'*') => {
                    let start = self.line;
                    self.i += 2;
                    loop {
                        match self.s.get(self.i) {
                            None => {
                                return Err(error(
                                    self.file,
                                    Some(start),
                                    "",
                                    "a /* comment is not closed",
                                ))
                            }
                            Some(b'*') if self.s.get(self.i + 1) == Some(&b'/') => {
                                self.i += 2;
                                break;
                            }
                            Some(c) => {
                                self.line += usize::from(*c == b'\n');
                                self.i += 1;
                            }
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn found(&self) -> String {
        match self.src[self.i..].chars().next() {
            Some(c) => format!("'{c}'"),
            None => "the end of the file".into(),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, ScenarioError> {
        self.skip()?;
        let line = self.line;
        if depth > MAX_DEPTH {
            return Err(self.err(format!("arrays and objects nest deeper than {MAX_DEPTH}")));
        }
        let value = match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                self.skip()?;
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                } else {
                    loop {
                        self.skip()?;
                        // A trailing comma (json-c takes it).
                        if self.s.get(self.i) == Some(&b'}') && !members.is_empty() {
                            self.i += 1;
                            break;
                        }
                        if self.s.get(self.i) != Some(&b'"') {
                            return Err(self.err(format!(
                                "expected a \"key\" in the object, found {}",
                                self.found()
                            )));
                        }
                        let key_line = self.line;
                        let key = self.string()?;
                        self.skip()?;
                        let v = match self.s.get(self.i) {
                            Some(b':') => {
                                self.i += 1;
                                self.value(depth + 1)?
                            }
                            // A key without a value (rt-app's workgen fills one in): null.
                            Some(b',' | b'}') => Node {
                                line: key_line,
                                value: Json::Null,
                            },
                            _ => {
                                return Err(self.err(format!(
                                    "expected ':' after \"{key}\", found {}",
                                    self.found()
                                )))
                            }
                        };
                        members.push((key, v));
                        self.skip()?;
                        match self.s.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                break;
                            }
                            _ => {
                                return Err(self.err(format!(
                                    "expected ',' or '}}' in the object, found {}",
                                    self.found()
                                )))
                            }
                        }
                    }
                }
                Json::Object(members)
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.skip()?;
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                } else {
                    loop {
                        // A trailing comma (json-c takes it).
                        self.skip()?;
                        if self.s.get(self.i) == Some(&b']') && !items.is_empty() {
                            self.i += 1;
                            break;
                        }
                        items.push(self.value(depth + 1)?);
                        self.skip()?;
                        match self.s.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                break;
                            }
                            _ => {
                                return Err(self.err(format!(
                                    "expected ',' or ']' in the array, found {}",
                                    self.found()
                                )))
                            }
                        }
                    }
                }
                Json::Array(items)
            }
            Some(b'"') => Json::Str(self.string()?),
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(_) => {
                let word: String = self.src[self.i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphabetic())
                    .collect();
                let v = match word.as_str() {
                    "true" => Json::Bool(true),
                    "false" => Json::Bool(false),
                    "null" => Json::Null,
                    _ => return Err(self.err(format!("expected a value, found {}", self.found()))),
                };
                self.i += word.len();
                v
            }
            None => return Err(self.err("expected a value, found the end of the file")),
        };
        Ok(Node { line, value })
    }

    fn string(&mut self) -> Result<String, ScenarioError> {
        self.i += 1; // the opening quote
        let mut out = String::new();
        loop {
            let Some(c) = self.src[self.i..].chars().next() else {
                return Err(self.err("a string is not closed"));
            };
            self.i += c.len_utf8();
            match c {
                '"' => return Ok(out),
                '\n' => return Err(self.err("a string is not closed on its line")),
                '\\' => {
                    let e = self.s.get(self.i).copied();
                    self.i += 1;
                    match e {
                        Some(b'"') => out.push('"'),
                        Some(b'\\') => out.push('\\'),
                        Some(b'/') => out.push('/'),
                        Some(b'b') => out.push('\u{8}'),
                        Some(b'f') => out.push('\u{c}'),
                        Some(b'n') => out.push('\n'),
                        Some(b'r') => out.push('\r'),
                        Some(b't') => out.push('\t'),
                        Some(b'u') => {
                            let hex = self.src.get(self.i..self.i + 4).unwrap_or("");
                            let code = u32::from_str_radix(hex, 16)
                                .ok()
                                .filter(|_| hex.len() == 4 && hex.is_ascii());
                            let Some(code) = code else {
                                return Err(self.err("\\u needs four hexadecimal digits"));
                            };
                            self.i += 4;
                            // Surrogates (pairs included) are not needed by rt-app: U+FFFD.
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        }
                        _ => return Err(self.err("unknown escape in a string")),
                    }
                }
                c => out.push(c),
            }
        }
    }

    fn number(&mut self) -> Result<Json, ScenarioError> {
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|c| c.is_ascii_digit() || b"+-.eE".contains(c))
        {
            self.i += 1;
        }
        let text = &self.src[start..self.i];
        if let Ok(v) = text.parse::<i64>() {
            return Ok(Json::Int(v));
        }
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() && !text.ends_with('.') && !text.starts_with('.') => {
                Ok(Json::Float(v))
            }
            _ => Err(self.err(format!("'{text}' is not a number"))),
        }
    }
}

/// Parses a JSON document (one value, then only blanks and comments).
pub fn parse(file: &str, src: &str) -> Result<Node, ScenarioError> {
    let mut r = Reader {
        file,
        src,
        s: src.as_bytes(),
        i: 0,
        line: 1,
    };
    let v = r.value(0)?;
    r.skip()?;
    if r.i < r.s.len() {
        return Err(r.err(format!("unexpected {} after the document", r.found())));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_repeats_and_lines() {
        let v = parse(
            "t.json",
            "{\n \"run\": 10, // a comment\n \"sleep\": 5,\n \"run\": -2.5e1, /* x\n */ \"s\": \"a\\u00e9\\n\"}",
        )
        .unwrap();
        let Json::Object(m) = &v.value else { panic!() };
        let keys: Vec<(&str, usize)> = m.iter().map(|(k, n)| (k.as_str(), n.line)).collect();
        assert_eq!(keys, [("run", 2), ("sleep", 3), ("run", 4), ("s", 5)]);
        assert_eq!(m[2].1.value, Json::Float(-25.0));
        assert_eq!(m[3].1.value, Json::Str("aé\n".into()));
        assert_eq!(v.get("run").unwrap().line, 4);
        // Trailing commas and a key without a value, as in rt-app's own examples.
        let v = parse("t.json", "{\"a\": [1, 2,],\n \"suspend\",\n \"b\": {},}").unwrap();
        assert_eq!(v.get("suspend").unwrap().value, Json::Null);
        assert_eq!(v.get("suspend").unwrap().line, 2);
        assert!(matches!(&v.get("a").unwrap().value, Json::Array(x) if x.len() == 2));
        assert!(parse("t.json", "[,]").is_err());
        assert!(parse("t.json", "{,}").is_err());
    }

    #[test]
    fn errors_name_the_line() {
        for (src, line, says) in [
            ("{\n\"a\": 1\n\"b\": 2}", 3, "expected ',' or '}'"),
            ("{\"a\": tru}", 1, "expected a value"),
            ("[1,\n2,\n", 3, "end of the file"),
            ("{\"a\": 1} x", 1, "after the document"),
            ("{\"a\": \"b}", 1, "not closed"),
            ("{\n/* open", 2, "not closed"),
            ("{\"a\": 1.}", 1, "not a number"),
        ] {
            let e = parse("t.json", src).unwrap_err();
            assert_eq!(e.line, Some(line), "{src:?}: {e}");
            assert!(e.message.contains(says), "{src:?}: {e}");
        }
        let deep = "[".repeat(200);
        assert!(parse("t.json", &deep).unwrap_err().message.contains("nest"));
    }
}
