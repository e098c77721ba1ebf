//! The subset of Kubernetes JSONPath used by CRD `additionalPrinterColumns`
//! (and `kubectl -o jsonpath`): `.a.b`, `['a.b']`, `[0]`, `[-1]`, `[1:3]`,
//! `[*]`, `.*`, `..name`, and filters `[?(@.type=="Ready")]` with `==`,
//! `!=`, `<`, `<=`, `>`, `>=` or a bare existence test `[?(@.x)]`.
//! An optional surrounding `{...}` and a leading `$` are accepted.
//! Missing keys and out-of-range indices yield no result (upstream runs the
//! CRD columns with `AllowMissingKeys(true)`).

use std::num::{ParseFloatError, ParseIntError};

use serde_json::Value;

/// Why a JSONPath expression cannot be parsed. Positions are byte offsets
/// into the expression (after the surrounding `{...}` and `$` are removed).
#[derive(Debug, thiserror::Error)]
pub enum JsonPathError {
    /// A `{` without its closing `}`.
    #[error("unclosed action")]
    UnclosedAction,
    /// Text left over after the expression.
    #[error("unexpected {rest:?} at {at}")]
    Trailing { rest: String, at: usize },
    /// A character that starts no step.
    #[error("unexpected {ch:?} at {at}")]
    UnexpectedChar { ch: char, at: usize },
    /// A `.` followed by no field name.
    #[error("empty field name at {at}")]
    EmptyFieldName { at: usize },
    /// `[?` not followed by `(`.
    #[error("expected ( after ?")]
    FilterParen,
    /// A filter without its closing `)`.
    #[error("unclosed filter")]
    UnclosedFilter,
    /// A bracket holding neither an index nor a slice.
    #[error("invalid array index at {at}")]
    InvalidIndex { at: usize },
    /// A `[` without its closing `]`.
    #[error("unclosed [ at {at}")]
    UnclosedBracket { at: usize },
    /// An index or slice bound that is not an `i64`.
    #[error("invalid number {text:?}")]
    InvalidNumber {
        text: String,
        #[source]
        source: ParseIntError,
    },
    /// A quoted key or literal without its closing quote.
    #[error("unterminated string")]
    UnterminatedString,
    /// A filter whose path does not start at `@`.
    #[error("filter must start with @")]
    FilterStart,
    /// A lone `=` in a filter.
    #[error("expected ==")]
    ExpectedEq,
    /// A lone `!` in a filter.
    #[error("expected !=")]
    ExpectedNe,
    /// A filter literal that is neither a string, a boolean nor a number.
    #[error("invalid filter literal {text:?}")]
    InvalidLiteral {
        text: String,
        #[source]
        source: ParseFloatError,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Wildcard,
    Recursive,
    Index(i64),
    Slice(Option<i64>, Option<i64>, Option<i64>),
    Filter(Filter),
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    /// Path relative to `@`.
    left: Vec<Step>,
    /// `None` for an existence test.
    cmp: Option<(Op, Literal)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Str(String),
    Num(f64),
    Bool(bool),
}

/// A parsed JSONPath expression.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

impl JsonPath {
    /// Parses an expression such as `.status.conditions[?(@.type=="Ready")].status`.
    pub fn parse(text: &str) -> Result<JsonPath, JsonPathError> {
        let mut t = text.trim();
        if let Some(inner) = t.strip_prefix('{') {
            t = inner
                .strip_suffix('}')
                .ok_or(JsonPathError::UnclosedAction)?
                .trim();
        }
        let t = t.strip_prefix('$').unwrap_or(t);
        let mut p = Parser {
            s: t.as_bytes(),
            src: t,
            i: 0,
        };
        let steps = p.steps(false)?;
        if p.i != p.s.len() {
            return Err(JsonPathError::Trailing {
                rest: t[p.i..].to_owned(),
                at: p.i,
            });
        }
        Ok(JsonPath { steps })
    }

    /// All values the path selects in `root`, in document order.
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        eval(&self.steps, vec![root])
    }
}

struct Parser<'a> {
    s: &'a [u8],
    src: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// Steps until the end, or (in a filter) until a comparison or `)`.
    fn steps(&mut self, in_filter: bool) -> Result<Vec<Step>, JsonPathError> {
        let mut steps = Vec::new();
        loop {
            match self.peek() {
                None => break,
                Some(b'.') => {
                    self.i += 1;
                    if self.eat(b'.') {
                        steps.push(Step::Recursive);
                    }
                    if self.peek() == Some(b'[') {
                        continue;
                    }
                    if self.eat(b'*') {
                        steps.push(Step::Wildcard);
                        continue;
                    }
                    let name = self.field_name();
                    if name.is_empty() {
                        if self.i == self.s.len() && steps.is_empty() {
                            // A lone "." selects the root.
                            break;
                        }
                        return Err(JsonPathError::EmptyFieldName { at: self.i });
                    }
                    steps.push(Step::Field(name));
                }
                Some(b'[') => {
                    self.i += 1;
                    steps.push(self.bracket()?);
                }
                Some(_) if in_filter => break,
                Some(c) => {
                    return Err(JsonPathError::UnexpectedChar {
                        ch: c as char,
                        at: self.i,
                    });
                }
            }
        }
        Ok(steps)
    }

    fn field_name(&mut self) -> String {
        let mut name = String::new();
        while let Some(c) = self.peek() {
            match c {
                b'\\' if self.i + 1 < self.s.len() => {
                    name.push(self.s[self.i + 1] as char);
                    self.i += 2;
                }
                b'.' | b'[' | b']' | b'(' | b')' | b' ' | b'\t' | b'=' | b'!' | b'<' | b'>'
                | b',' | b'{' | b'}' | b'$' | b'@' => break,
                _ => {
                    // Copy a whole UTF-8 character.
                    let ch = self.src[self.i..].chars().next().unwrap_or('\0');
                    name.push(ch);
                    self.i += ch.len_utf8();
                }
            }
        }
        name
    }

    /// After `[`: a quoted key, `*`, an index or slice, or a filter.
    fn bracket(&mut self) -> Result<Step, JsonPathError> {
        self.skip_ws();
        let step = match self.peek() {
            Some(q @ (b'\'' | b'"')) => {
                self.i += 1;
                Step::Field(self.quoted(q)?)
            }
            Some(b'*') => {
                self.i += 1;
                Step::Wildcard
            }
            Some(b'?') => {
                self.i += 1;
                self.skip_ws();
                if !self.eat(b'(') {
                    return Err(JsonPathError::FilterParen);
                }
                let f = self.filter()?;
                self.skip_ws();
                if !self.eat(b')') {
                    return Err(JsonPathError::UnclosedFilter);
                }
                Step::Filter(f)
            }
            _ => {
                let mut parts: Vec<Option<i64>> = vec![self.int()?];
                while self.eat(b':') {
                    parts.push(self.int()?);
                }
                match parts.as_slice() {
                    [Some(i)] => Step::Index(*i),
                    [a, b] => Step::Slice(*a, *b, None),
                    [a, b, c] => Step::Slice(*a, *b, *c),
                    _ => return Err(JsonPathError::InvalidIndex { at: self.i }),
                }
            }
        };
        self.skip_ws();
        if !self.eat(b']') {
            return Err(JsonPathError::UnclosedBracket { at: self.i });
        }
        Ok(step)
    }

    fn int(&mut self) -> Result<Option<i64>, JsonPathError> {
        self.skip_ws();
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        let t = &self.src[start..self.i];
        self.skip_ws();
        if t.is_empty() {
            return Ok(None);
        }
        t.parse()
            .map(Some)
            .map_err(|source| JsonPathError::InvalidNumber {
                text: t.to_owned(),
                source,
            })
    }

    fn quoted(&mut self, q: u8) -> Result<String, JsonPathError> {
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err(JsonPathError::UnterminatedString),
                Some(c) if c == q => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') if self.i + 1 < self.s.len() => {
                    out.push(self.s[self.i + 1] as char);
                    self.i += 2;
                }
                Some(_) => {
                    let ch = self.src[self.i..].chars().next().unwrap_or('\0');
                    out.push(ch);
                    self.i += ch.len_utf8();
                }
            }
        }
    }

    fn filter(&mut self) -> Result<Filter, JsonPathError> {
        self.skip_ws();
        if !self.eat(b'@') {
            return Err(JsonPathError::FilterStart);
        }
        let left = self.steps(true)?;
        self.skip_ws();
        let op = if self.eat(b'=') {
            if !self.eat(b'=') {
                return Err(JsonPathError::ExpectedEq);
            }
            Some(Op::Eq)
        } else if self.eat(b'!') {
            if !self.eat(b'=') {
                return Err(JsonPathError::ExpectedNe);
            }
            Some(Op::Ne)
        } else if self.eat(b'<') {
            Some(if self.eat(b'=') { Op::Le } else { Op::Lt })
        } else if self.eat(b'>') {
            Some(if self.eat(b'=') { Op::Ge } else { Op::Gt })
        } else {
            None
        };
        let Some(op) = op else {
            return Ok(Filter { left, cmp: None });
        };
        self.skip_ws();
        let lit = match self.peek() {
            Some(q @ (b'\'' | b'"')) => {
                self.i += 1;
                Literal::Str(self.quoted(q)?)
            }
            _ => {
                let start = self.i;
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'+'))
                {
                    self.i += 1;
                }
                match &self.src[start..self.i] {
                    "true" => Literal::Bool(true),
                    "false" => Literal::Bool(false),
                    t => {
                        Literal::Num(t.parse().map_err(|source| JsonPathError::InvalidLiteral {
                            text: t.to_owned(),
                            source,
                        })?)
                    }
                }
            }
        };
        Ok(Filter {
            left,
            cmp: Some((op, lit)),
        })
    }
}

fn eval<'a>(steps: &[Step], mut cur: Vec<&'a Value>) -> Vec<&'a Value> {
    for step in steps {
        let mut next = Vec::new();
        for v in cur {
            apply(step, v, &mut next);
        }
        cur = next;
    }
    cur
}

fn apply<'a>(step: &Step, v: &'a Value, out: &mut Vec<&'a Value>) {
    match step {
        Step::Field(name) => {
            if let Some(x) = v.as_object().and_then(|m| m.get(name)) {
                out.push(x);
            }
        }
        Step::Wildcard => match v {
            Value::Object(m) => out.extend(m.values()),
            Value::Array(a) => out.extend(a.iter()),
            _ => {}
        },
        Step::Recursive => descend(v, out),
        Step::Index(i) => {
            if let Some(a) = v.as_array() {
                let len = a.len() as i64;
                let i = if *i < 0 { i + len } else { *i };
                if (0..len).contains(&i) {
                    out.push(&a[i as usize]);
                }
            }
        }
        Step::Slice(start, end, step) => {
            if let Some(a) = v.as_array() {
                let len = a.len() as i64;
                let norm = |x: i64| if x < 0 { (x + len).max(0) } else { x.min(len) };
                let s = norm(start.unwrap_or(0));
                let e = norm(end.unwrap_or(len));
                let st = step.unwrap_or(1).max(1);
                let mut i = s;
                while i < e {
                    out.push(&a[i as usize]);
                    i += st;
                }
            }
        }
        Step::Filter(f) => {
            let items: Vec<&Value> = match v {
                Value::Array(a) => a.iter().collect(),
                _ => Vec::new(),
            };
            for item in items {
                if matches(f, item) {
                    out.push(item);
                }
            }
        }
    }
}

fn descend<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    out.push(v);
    match v {
        Value::Object(m) => m.values().for_each(|x| descend(x, out)),
        Value::Array(a) => a.iter().for_each(|x| descend(x, out)),
        _ => {}
    }
}

fn matches(f: &Filter, item: &Value) -> bool {
    let found = eval(&f.left, vec![item]);
    let Some((op, lit)) = &f.cmp else {
        return !found.is_empty();
    };
    found.iter().any(|v| compare(v, *op, lit))
}

fn compare(v: &Value, op: Op, lit: &Literal) -> bool {
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match (v, lit) {
        (Value::String(s), Literal::Str(l)) => Some(s.as_str().cmp(l.as_str())),
        (Value::Number(n), Literal::Num(l)) => n.as_f64().and_then(|f| f.partial_cmp(l)),
        (Value::Bool(b), Literal::Bool(l)) => {
            return match op {
                Op::Eq => b == l,
                Op::Ne => b != l,
                _ => false,
            };
        }
        _ => None,
    };
    match ord {
        None => op == Op::Ne,
        Some(o) => match op {
            Op::Eq => o == Ordering::Equal,
            Op::Ne => o != Ordering::Equal,
            Op::Lt => o == Ordering::Less,
            Op::Le => o != Ordering::Greater,
            Op::Gt => o == Ordering::Greater,
            Op::Ge => o != Ordering::Less,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "metadata": {"name": "a", "labels": {"foo": "bar", "app.kubernetes.io/name": "web"}},
            "spec": {"replicas": 3, "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]},
            "status": {"conditions": [
                {"type": "Synced", "status": "True", "priority": 1},
                {"type": "Ready", "status": "False", "priority": 2}
            ]},
            "items": ["x", "y", "z"]
        })
    }

    fn find(path: &str) -> Vec<Value> {
        let d = doc();
        JsonPath::parse(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .find(&d)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn simple_paths() {
        assert_eq!(find(".spec.replicas"), [json!(3)]);
        assert_eq!(find("{.spec.replicas}"), [json!(3)]);
        assert_eq!(find("$.spec.replicas"), [json!(3)]);
        assert_eq!(find(".metadata.labels.foo"), [json!("bar")]);
        assert_eq!(
            find(".metadata.labels['app.kubernetes.io/name']"),
            [json!("web")]
        );
        assert_eq!(
            find(r".metadata.labels.app\.kubernetes\.io/name"),
            [json!("web")]
        );
        assert_eq!(find(".items[0]"), [json!("x")]);
        assert_eq!(find(".items[-1]"), [json!("z")]);
        assert_eq!(find(".items[1:]"), [json!("y"), json!("z")]);
        assert_eq!(find(".items[0:3:2]"), [json!("x"), json!("z")]);
        assert_eq!(find(".items[*]").len(), 3);
        assert_eq!(find(".spec.ports[*].port"), [json!(80), json!(443)]);
        assert_eq!(find(".spec.ports[1].name"), [json!("https")]);
        assert_eq!(find("..port"), [json!(80), json!(443)]);
        assert_eq!(find(".metadata.*").len(), 2);
        assert_eq!(find("."), [doc()]);
    }

    #[test]
    fn missing_is_empty() {
        assert!(find(".spec.nothing").is_empty());
        assert!(find(".items[7]").is_empty());
        assert!(find(".items.foo").is_empty());
        assert!(find(".spec.replicas[0]").is_empty());
    }

    #[test]
    fn filters() {
        assert_eq!(
            find(r#".status.conditions[?(@.type=="Ready")].status"#),
            [json!("False")]
        );
        assert_eq!(
            find(".status.conditions[?(@.type == 'Synced')].status"),
            [json!("True")]
        );
        assert_eq!(
            find(r#".status.conditions[?(@.type!="Ready")].type"#),
            [json!("Synced")]
        );
        assert_eq!(
            find(".status.conditions[?(@.priority>1)].type"),
            [json!("Ready")]
        );
        assert_eq!(
            find(".status.conditions[?(@.priority<=1)].type"),
            [json!("Synced")]
        );
        assert_eq!(find(".spec.ports[?(@.name)].port").len(), 2);
        assert!(find(r#".status.conditions[?(@.type=="Gone")].status"#).is_empty());
        assert!(find(r#".spec[?(@.type=="x")]"#).is_empty());
    }

    #[test]
    fn parse_errors() {
        for bad in [
            ".a[",
            ".a[?(@.b==",
            ".a[?(@.b=1)]",
            "{.a",
            ".a..",
            "a.b",
            ".a[x]",
            ".a['b]",
        ] {
            assert!(JsonPath::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parse_error_text() {
        let err = |text: &str| JsonPath::parse(text).unwrap_err();
        let e = err("{.a");
        assert!(matches!(e, JsonPathError::UnclosedAction));
        assert_eq!(e.to_string(), "unclosed action");
        let e = err("a.b");
        assert!(matches!(
            e,
            JsonPathError::UnexpectedChar { ch: 'a', at: 0 }
        ));
        assert_eq!(e.to_string(), "unexpected 'a' at 0");
        let e = err(".a[0]]");
        assert!(matches!(
            e,
            JsonPathError::UnexpectedChar { ch: ']', at: 5 }
        ));
        let e = err("{.a}x}");
        assert_eq!(e.to_string(), "unexpected '}' at 2");
        let e = err(".a..");
        assert!(matches!(e, JsonPathError::EmptyFieldName { at: 4 }));
        assert_eq!(e.to_string(), "empty field name at 4");
        let e = err(".a[?x]");
        assert!(matches!(e, JsonPathError::FilterParen));
        assert_eq!(e.to_string(), "expected ( after ?");
        let e = err(".a[?(@.b]");
        assert!(matches!(e, JsonPathError::UnclosedFilter));
        assert_eq!(e.to_string(), "unclosed filter");
        let e = err(".a[1:2:3:4]");
        assert!(matches!(e, JsonPathError::InvalidIndex { at: 10 }));
        assert_eq!(e.to_string(), "invalid array index at 10");
        let e = err(".a[x]");
        assert!(matches!(e, JsonPathError::InvalidIndex { at: 3 }));
        let e = err(".a[0 x");
        assert!(matches!(e, JsonPathError::UnclosedBracket { at: 5 }));
        assert_eq!(e.to_string(), "unclosed [ at 5");
        let e = err(".a[-]");
        assert!(matches!(e, JsonPathError::InvalidNumber { .. }));
        assert_eq!(e.to_string(), r#"invalid number "-""#);
        let e = err(".a['b]");
        assert!(matches!(e, JsonPathError::UnterminatedString));
        assert_eq!(e.to_string(), "unterminated string");
        let e = err(".a[?(b)]");
        assert!(matches!(e, JsonPathError::FilterStart));
        assert_eq!(e.to_string(), "filter must start with @");
        let e = err(".a[?(@.b=1)]");
        assert!(matches!(e, JsonPathError::ExpectedEq));
        assert_eq!(e.to_string(), "expected ==");
        let e = err(".a[?(@.b!1)]");
        assert!(matches!(e, JsonPathError::ExpectedNe));
        assert_eq!(e.to_string(), "expected !=");
        let e = err(".a[?(@.b==x)]");
        assert!(matches!(e, JsonPathError::InvalidLiteral { .. }));
        assert_eq!(e.to_string(), r#"invalid filter literal "x""#);
    }
}
