//! Field paths and sets of them, with the `FieldsV1` JSON encoding used in
//! `metadata.managedFields[].fieldsV1`.
//!
//! A set is a trie: `members` are the path elements that end a path at this node, `children`
//! hold the longer paths. Path elements and JSON values are ordered the way
//! structured-merge-diff orders them, so iteration and encoding follow upstream.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::num::ParseIntError;

use serde_json::{Map, Value};

/// Why a `FieldsV1` key cannot be parsed as a [`PathElement`].
#[derive(Debug, thiserror::Error)]
pub enum PathElementError {
    /// Shorter than a type letter and a colon.
    #[error("key must be 2 characters long: {0:?}")]
    TooShort(String),
    /// The type letter is not followed by `:`.
    #[error("missing colon: {0}")]
    MissingColon(String),
    /// A `v:` or `k:` key whose JSON does not parse (or is not an object for `k:`).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// An `i:` key whose index is not an integer.
    #[error(transparent)]
    Index(#[from] ParseIntError),
}

/// Why a `fieldsV1` value cannot be decoded into a [`FieldSet`].
#[derive(Debug, thiserror::Error)]
pub enum FieldSetError {
    /// The value is neither an object nor null.
    #[error("fieldsV1 must be a JSON object")]
    NotAnObject,
    /// The text is not JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Deeper than 512 levels.
    #[error("fieldsV1 nested too deeply")]
    TooDeep,
    /// A key that is not a path element.
    #[error("parsing key as path element: {0}")]
    Key(#[source] PathElementError),
    /// A key whose value is not an object.
    #[error("value of {key:?} must be a JSON object")]
    ChildNotObject { key: String },
}

/// One step of a field path.
#[derive(Clone, Debug)]
pub enum PathElement {
    /// A field of a struct or a key of a map: `.name`, encoded `f:name`.
    Field(String),
    /// An item of a list with map semantics, by its key fields (sorted by name):
    /// `[name="c"]`, encoded `k:{"name":"c"}`.
    Key(Vec<(String, Value)>),
    /// An item of a set, by value: `[="a"]`, encoded `v:"a"`.
    Value(Value),
    /// An item of a list by index: `[0]`, encoded `i:0`.
    Index(i64),
}

/// A field path from the root of an object.
pub type Path = Vec<PathElement>;

impl PathElement {
    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The `FieldsV1` key for this element (`f:`, `k:`, `v:` or `i:` prefixed).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        match self {
            PathElement::Field(name) => {
                out.push_str("f:");
                out.push_str(name);
            }
            PathElement::Key(fields) => {
                out.push_str("k:{");
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_go_json_string(&mut out, name);
                    out.push(':');
                    write_go_json(&mut out, value);
                }
                out.push('}');
            }
            PathElement::Value(value) => {
                out.push_str("v:");
                write_go_json(&mut out, value);
            }
            PathElement::Index(i) => {
                out.push_str("i:");
                out.push_str(&i.to_string());
            }
        }
        out
    }

    /// Parses a `FieldsV1` key. `Ok(None)` for an unknown element type (skipped, as upstream).
    pub fn decode(s: &str) -> Result<Option<PathElement>, PathElementError> {
        let bytes = s.as_bytes();
        if bytes.len() < 2 {
            return Err(PathElementError::TooShort(s.to_string()));
        }
        if bytes[1] != b':' {
            return Err(PathElementError::MissingColon(s.to_string()));
        }
        let rest = &s[2..];
        match bytes[0] {
            b'f' => Ok(Some(PathElement::Field(rest.to_string()))),
            b'v' => {
                let v: Value = serde_json::from_str(rest)?;
                Ok(Some(PathElement::Value(v)))
            }
            b'k' => {
                let m: Map<String, Value> = serde_json::from_str(rest)?;
                let mut fields: Vec<(String, Value)> = m.into_iter().collect();
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(Some(PathElement::Key(fields)))
            }
            b'i' => rest
                .parse::<i64>()
                .map(|i| Some(PathElement::Index(i)))
                .map_err(PathElementError::from),
            _ => Ok(None),
        }
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for (x, y) in a.iter().zip(b.iter()) {
                    let c = x.0.cmp(&y.0).then_with(|| compare_values(&x.1, &y.1));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl fmt::Display for PathElement {
    /// Human-readable form as upstream prints it in conflicts: `.name`, `[name="c"]`,
    /// `[="v"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                f.write_str("[")?;
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{name}={}", value_to_string(value))?;
                }
                f.write_str("]")
            }
            PathElement::Value(v) => write!(f, "[={}]", value_to_string(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// Formats a path as upstream does, e.g. `.spec.containers[name="c"].image`.
pub fn path_to_string(path: &[PathElement]) -> String {
    path.iter().map(|pe| pe.to_string()).collect()
}

/// Orders JSON values like structured-merge-diff: numbers, strings, booleans, lists, maps, null.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                let c = compare_values(p, q);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            // serde_json maps iterate in key order.
            for ((ka, va), (kb, vb)) in x.iter().zip(y.iter()) {
                let c = ka.cmp(kb).then_with(|| compare_values(va, vb));
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

fn compare_numbers(x: &serde_json::Number, y: &serde_json::Number) -> Ordering {
    if x.is_f64() || y.is_f64() {
        let a = x.as_f64().unwrap_or(0.0);
        let b = y.as_f64().unwrap_or(0.0);
        return a.partial_cmp(&b).unwrap_or(Ordering::Equal);
    }
    match (x.as_i64(), y.as_i64()) {
        (Some(a), Some(b)) => a.cmp(&b),
        (Some(_), None) => Ordering::Less, // y is a u64 above i64::MAX
        (None, Some(_)) => Ordering::Greater,
        (None, None) => x.as_u64().cmp(&y.as_u64()),
    }
}

/// Deep equality with numbers compared by value (`1` equals `1.0`), as upstream.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| values_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Upstream's `value.ToString`: Go `%q` for strings, `%v` for numbers and booleans.
fn value_to_string(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(value_to_string).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={}", value_to_string(v)))
            .collect(),
    }
}

/// Go's `%q` quoting of a string.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => {
                let n = c as u32;
                if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A number formatted as Go formats an `int64` or `float64` (`%v` and `encoding/json`).
fn go_number(n: &serde_json::Number) -> String {
    if n.is_f64() {
        let f = n.as_f64().unwrap_or(0.0);
        let abs = f.abs();
        if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
            // Go switches to exponent form here: 1e+21, 1e-07.
            let s = format!("{f:e}");
            let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            let digits = if digits.len() < 2 {
                format!("0{digits}")
            } else {
                digits.to_string()
            };
            return format!("{mantissa}e{sign}{digits}");
        }
        format!("{f}")
    } else {
        n.to_string()
    }
}

/// Writes `v` as Go's `encoding/json` would (HTML-safe escaping, no spaces, sorted map keys).
fn write_go_json(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_number(n)),
        Value::String(s) => write_go_json_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(out, item);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json_string(out, k);
                out.push(':');
                write_go_json(out, v);
            }
            out.push('}');
        }
    }
}

fn write_go_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A set of field paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

static EMPTY: FieldSet = FieldSet {
    members: BTreeSet::new(),
    children: BTreeMap::new(),
};

impl FieldSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a set from paths.
    pub fn from_paths<'a>(paths: impl IntoIterator<Item = &'a [PathElement]>) -> Self {
        let mut s = Self::new();
        for p in paths {
            s.insert(p);
        }
        s
    }

    /// Adds a path; the empty path is ignored.
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => match self.children.get_mut(first) {
                Some(child) => child.insert(rest),
                // The element is copied only where the trie grows.
                None => self.children.entry(first.clone()).or_default().insert(rest),
            },
        }
    }

    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(|c| c.is_empty())
    }

    /// The number of paths in the set.
    pub fn len(&self) -> usize {
        self.members.len() + self.children.values().map(|c| c.len()).sum::<usize>()
    }

    pub(crate) fn members(&self) -> &BTreeSet<PathElement> {
        &self.members
    }

    pub(crate) fn children(&self) -> &BTreeMap<PathElement, FieldSet> {
        &self.children
    }

    pub(crate) fn add_member(&mut self, pe: PathElement) {
        self.members.insert(pe);
    }

    pub(crate) fn set_child(&mut self, pe: PathElement, child: FieldSet) {
        if child.is_empty() {
            self.children.remove(&pe);
        } else {
            self.children.insert(pe, child);
        }
    }

    /// The paths below `pe` (with `pe` stripped).
    pub fn with_prefix(&self, pe: &PathElement) -> &FieldSet {
        self.children.get(pe).unwrap_or(&EMPTY)
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    pub fn union_with(&mut self, other: &FieldSet) {
        self.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            match self.children.get_mut(pe) {
                Some(mine) => mine.union_with(child),
                None => {
                    if !child.is_empty() {
                        self.children.insert(pe.clone(), child.clone());
                    }
                }
            }
        }
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            if let Some(theirs) = other.children.get(pe) {
                let i = child.intersection(theirs);
                if !i.is_empty() {
                    children.insert(pe.clone(), i);
                }
            }
        }
        FieldSet { members, children }
    }

    /// Paths of `self` not in `other` (a member of `other` does not remove longer paths).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            let d = match other.children.get(pe) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !d.is_empty() {
                children.insert(pe.clone(), d);
            }
        }
        FieldSet { members, children }
    }

    /// `self = self.difference(other)`, without copying what stays.
    pub fn subtract(&mut self, other: &FieldSet) {
        if other.members.is_empty() && other.children.is_empty() {
            return;
        }
        self.members.retain(|m| !other.members.contains(m));
        self.children.retain(|pe, child| {
            if let Some(theirs) = other.children.get(pe) {
                child.subtract(theirs);
            }
            !child.is_empty()
        });
    }

    /// `self = self.recursive_difference(other)`, without copying what stays.
    pub fn subtract_recursive(&mut self, other: &FieldSet) {
        if other.members.is_empty() && other.children.is_empty() {
            return;
        }
        self.members.retain(|m| !other.members.contains(m));
        self.children.retain(|pe, child| {
            if other.members.contains(pe) {
                return false;
            }
            if let Some(theirs) = other.children.get(pe) {
                child.subtract_recursive(theirs);
            }
            !child.is_empty()
        });
    }

    /// Like `difference`, but a member of `other` also removes every path below it.
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            if other.members.contains(pe) {
                continue;
            }
            let d = match other.children.get(pe) {
                Some(theirs) => child.recursive_difference(theirs),
                None => child.clone(),
            };
            if !d.is_empty() {
                children.insert(pe.clone(), d);
            }
        }
        FieldSet { members, children }
    }

    /// All paths, in upstream's iteration order (members of a node before its children).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_paths(&mut prefix, &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(p);
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// Encodes the set as the `fieldsV1` JSON value.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.to_json_map(false))
    }

    fn to_json_map(&self, include_self: bool) -> Map<String, Value> {
        let mut m = Map::new();
        if include_self {
            m.insert(".".to_string(), Value::Object(Map::new()));
        }
        for pe in &self.members {
            if !self.children.contains_key(pe) {
                m.insert(pe.encode(), Value::Object(Map::new()));
            }
        }
        for (pe, child) in &self.children {
            let is_member = self.members.contains(pe);
            m.insert(pe.encode(), Value::Object(child.to_json_map(is_member)));
        }
        m
    }

    /// Encodes the set as `fieldsV1` JSON text, byte for byte as upstream writes it (entries in
    /// path-element order, Go string escaping).
    pub fn to_fields_v1_string(&self) -> String {
        let mut out = String::from("{");
        self.write_json(&mut out, false);
        out.push('}');
        out
    }

    fn write_json(&self, out: &mut String, include_self: bool) {
        let mut first = true;
        let mut sep = |out: &mut String| {
            if !std::mem::take(&mut first) {
                out.push(',');
            }
        };
        if include_self && !(self.members.is_empty() && self.children.is_empty()) {
            sep(out);
            out.push_str("\".\":{}");
        }
        // Members and children merged in element order; an element in both is written once
        // with a "." entry.
        let mut members = self.members.iter().peekable();
        let mut children = self.children.iter().peekable();
        loop {
            let take_member = match (members.peek(), children.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(m), Some((c, _))) => *m < *c,
            };
            sep(out);
            if take_member {
                let m = members.next().unwrap_or_else(|| unreachable!());
                write_go_json_string(out, &m.encode());
                out.push_str(":{}");
            } else {
                let (pe, child) = children.next().unwrap_or_else(|| unreachable!());
                let is_member = members.peek().is_some_and(|m| *m == pe);
                if is_member {
                    members.next();
                }
                write_go_json_string(out, &pe.encode());
                out.push_str(":{");
                child.write_json(out, is_member);
                out.push('}');
            }
        }
    }

    /// Decodes a `fieldsV1` JSON value.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, FieldSetError> {
        match v {
            Value::Object(m) => {
                let (set, _) = Self::read_node(m, 0)?;
                Ok(set)
            }
            Value::Null => Ok(FieldSet::new()),
            _ => Err(FieldSetError::NotAnObject),
        }
    }

    /// Decodes `fieldsV1` JSON text.
    pub fn from_fields_v1_str(s: &str) -> Result<FieldSet, FieldSetError> {
        let v: Value = serde_json::from_str(s)?;
        Self::from_fields_v1(&v)
    }

    /// Returns the children of a node and whether the node itself is a member.
    fn read_node(m: &Map<String, Value>, depth: usize) -> Result<(FieldSet, bool), FieldSetError> {
        if depth > 512 {
            return Err(FieldSetError::TooDeep);
        }
        let mut set = FieldSet::new();
        let mut is_member = false;
        let mut any = false;
        for (key, value) in m {
            if key == "." {
                is_member = true;
                continue;
            }
            let Some(pe) = PathElement::decode(key).map_err(FieldSetError::Key)? else {
                continue;
            };
            let Value::Object(child) = value else {
                return Err(FieldSetError::ChildNotObject { key: key.clone() });
            };
            let (grand, child_member) = Self::read_node(child, depth + 1)?;
            if child_member {
                set.members.insert(pe.clone());
                any = true;
            }
            if !grand.is_empty() {
                set.children.insert(pe, grand);
                any = true;
            }
        }
        if !any {
            is_member = true;
        }
        Ok((set, is_member))
    }
}

impl fmt::Display for FieldSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let paths: Vec<String> = self.paths().iter().map(|p| path_to_string(p)).collect();
        f.write_str(&paths.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(s: &str) -> PathElement {
        PathElement::Field(s.to_string())
    }

    #[test]
    fn decode_errors() {
        let e = PathElement::decode("f").unwrap_err();
        assert!(matches!(e, PathElementError::TooShort(_)));
        assert_eq!(e.to_string(), r#"key must be 2 characters long: "f""#);
        let e = PathElement::decode("f-x").unwrap_err();
        assert!(matches!(e, PathElementError::MissingColon(_)));
        assert_eq!(e.to_string(), "missing colon: f-x");
        let e = PathElement::decode("v:{").unwrap_err();
        let json = serde_json::from_str::<Value>("{").unwrap_err().to_string();
        assert!(matches!(e, PathElementError::Json(_)));
        assert_eq!(e.to_string(), json);
        let e = PathElement::decode("i:x").unwrap_err();
        assert!(matches!(e, PathElementError::Index(_)));
        assert_eq!(e.to_string(), "invalid digit found in string");
        assert!(PathElement::decode("z:x").unwrap().is_none());

        let e = FieldSet::from_fields_v1(&json!([])).unwrap_err();
        assert!(matches!(e, FieldSetError::NotAnObject));
        assert_eq!(e.to_string(), "fieldsV1 must be a JSON object");
        let e = FieldSet::from_fields_v1_str("{").unwrap_err();
        assert!(matches!(e, FieldSetError::Json(_)));
        assert_eq!(e.to_string(), json);
        let e = FieldSet::from_fields_v1(&json!({"i:x": {}})).unwrap_err();
        assert!(matches!(e, FieldSetError::Key(PathElementError::Index(_))));
        assert_eq!(
            e.to_string(),
            "parsing key as path element: invalid digit found in string"
        );
        let e = FieldSet::from_fields_v1(&json!({"f:a": 1})).unwrap_err();
        assert!(matches!(e, FieldSetError::ChildNotObject { .. }));
        assert_eq!(e.to_string(), r#"value of "f:a" must be a JSON object"#);
        let mut deep = json!({});
        for _ in 0..520 {
            deep = json!({ "f:a": deep });
        }
        let e = FieldSet::from_fields_v1(&deep).unwrap_err();
        assert!(matches!(e, FieldSetError::TooDeep));
        assert_eq!(e.to_string(), "fieldsV1 nested too deeply");
    }

    #[test]
    fn encode_matches_upstream_bytes() {
        let mut s = FieldSet::new();
        s.insert(&[f("metadata"), f("labels"), f("app")]);
        let c = PathElement::Key(vec![("name".into(), json!("c"))]);
        s.insert(&[f("spec"), f("containers"), c.clone()]);
        s.insert(&[f("spec"), f("containers"), c.clone(), f("image")]);
        s.insert(&[f("spec"), f("containers"), c, f("name")]);
        let text = s.to_fields_v1_string();
        assert_eq!(
            text,
            r#"{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{},"f:name":{}}}}}"#
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(s.to_fields_v1(), v);
        assert_eq!(FieldSet::from_fields_v1(&v).unwrap(), s);
        assert_eq!(FieldSet::from_fields_v1_str(&text).unwrap(), s);
    }

    #[test]
    fn composite_keys_values_and_escaping() {
        let mut s = FieldSet::new();
        let port = PathElement::Key(vec![
            ("containerPort".into(), json!(80)),
            ("protocol".into(), json!("TCP")),
        ]);
        s.insert(&[f("ports"), port.clone()]);
        s.insert(&[f("finalizers"), PathElement::Value(json!("a<b"))]);
        s.insert(&[f("x"), PathElement::Index(3)]);
        let text = s.to_fields_v1_string();
        assert_eq!(
            text,
            r#"{"f:finalizers":{"v:\"a\\u003cb\"":{}},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{}},"f:x":{"i:3":{}}}"#
        );
        assert_eq!(FieldSet::from_fields_v1_str(&text).unwrap(), s);
        assert_eq!(
            path_to_string(&[f("spec"), f("ports"), port]),
            r#".spec.ports[containerPort=80,protocol="TCP"]"#
        );
        assert_eq!(
            path_to_string(&[f("finalizers"), PathElement::Value(json!("x"))]),
            r#".finalizers[="x"]"#
        );
    }

    #[test]
    fn element_order_follows_upstream() {
        let mut s = FieldSet::new();
        s.insert(&[PathElement::Index(0)]);
        s.insert(&[PathElement::Value(json!(1))]);
        s.insert(&[PathElement::Key(vec![("a".into(), json!(10))])]);
        s.insert(&[PathElement::Key(vec![("a".into(), json!(9))])]);
        s.insert(&[f("z")]);
        assert_eq!(
            s.to_fields_v1_string(),
            r#"{"f:z":{},"k:{\"a\":9}":{},"k:{\"a\":10}":{},"v:1":{},"i:0":{}}"#
        );
    }

    #[test]
    fn set_operations() {
        let a = FieldSet::from_paths([&[f("a"), f("b")][..], &[f("a")][..], &[f("c")][..]]);
        let b = FieldSet::from_paths([&[f("a")][..]]);
        assert_eq!(
            a.difference(&b),
            FieldSet::from_paths([&[f("a"), f("b")][..], &[f("c")][..]])
        );
        assert_eq!(
            a.recursive_difference(&b),
            FieldSet::from_paths([&[f("c")][..]])
        );
        assert_eq!(a.intersection(&b), b);
        assert_eq!(b.union(&a), a);
        assert_eq!(a.len(), 3);
        assert!(a.difference(&a).is_empty());
        let mut d = a.clone();
        d.subtract(&b);
        assert_eq!(d, a.difference(&b));
        let mut r = a.clone();
        r.subtract_recursive(&b);
        assert_eq!(r, a.recursive_difference(&b));
    }

    #[test]
    fn decode_rejects_garbage_without_panicking() {
        for bad in [
            r#"{"f:a":1}"#,
            r#"{"k:{":{}}"#,
            r#"{"x":{}}"#,
            r#"[]"#,
            r#"{"i:x":{}}"#,
            r#"{"v:":{}}"#,
        ] {
            let _ = FieldSet::from_fields_v1_str(bad);
        }
        assert!(FieldSet::from_fields_v1_str(r#"{"f:a":1}"#).is_err());
        // Unknown element types are skipped.
        assert_eq!(
            FieldSet::from_fields_v1_str(r#"{"z:a":{},"f:b":{}}"#).unwrap(),
            FieldSet::from_paths([&[f("b")][..]])
        );
    }
}
