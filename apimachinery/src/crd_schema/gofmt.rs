//! Go-compatible printing helpers: `%q`, `%v` of float64, `encoding/json`
//! marshaling, and Go's view of JSON numbers (int64 or float64).

use super::MAX_OBJECT_DEPTH;
use serde_json::Value;
use std::fmt::Write;

/// A JSON number as Go's unstructured decoder types it: int64 when it fits,
/// float64 otherwise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

pub(crate) fn num(v: &Value) -> Option<Num> {
    let n = v.as_number()?;
    if let Some(i) = n.as_i64() {
        Some(Num::Int(i))
    } else if let Some(u) = n.as_u64() {
        Some(Num::Float(u as f64))
    } else {
        n.as_f64().map(Num::Float)
    }
}

/// strconv.Quote.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if !is_print(c) => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Approximation of unicode.IsPrint for non-ASCII characters: everything except
/// C1 controls, format characters commonly met, separators other than space,
/// private use and noncharacters.
fn is_print(c: char) -> bool {
    let u = c as u32;
    if u < 0x80 {
        return (0x20..0x7f).contains(&u);
    }
    !(c.is_control()
        || matches!(u, 0xa0 | 0xad | 0x1680 | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x2064 | 0x2066..=0x206f | 0x3000 | 0xfeff | 0xfff9..=0xfffb)
        || (0xe000..=0xf8ff).contains(&u)
        || (0xf0000..=0x10ffff).contains(&u)
        || (u & 0xfffe) == 0xfffe
        || (0xfdd0..=0xfdef).contains(&u))
}

/// Splits a finite, non-zero f64 into its shortest decimal digits and the
/// decimal exponent `dp` such that value = 0.d1d2d3... * 10^dp.
fn shortest_digits(f: f64) -> (String, i32) {
    // `{:e}` prints the shortest round-tripping representation, e.g. "1.2345e6".
    let s = format!("{:e}", f.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    (digits.to_string(), exp + 1)
}

fn fmt_e(neg: bool, digits: &str, dp: i32) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    out.push_str(&digits[..1]);
    if digits.len() > 1 {
        out.push('.');
        out.push_str(&digits[1..]);
    }
    let e = dp - 1;
    out.push('e');
    out.push(if e < 0 { '-' } else { '+' });
    let _ = write!(out, "{:02}", e.abs());
    out
}

fn fmt_f(neg: bool, digits: &str, dp: i32) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if dp <= 0 {
        out.push_str("0.");
        for _ in 0..(-dp) {
            out.push('0');
        }
        out.push_str(digits);
    } else {
        let dp = dp as usize;
        if digits.len() <= dp {
            out.push_str(digits);
            for _ in digits.len()..dp {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..dp]);
            out.push('.');
            out.push_str(&digits[dp..]);
        }
    }
    out
}

/// fmt's `%v` for a float64 (strconv 'g' with shortest precision, exponent
/// threshold 6... as Go does: `1e+06`, `123456`, `1e-05`).
pub(crate) fn float_v(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let (digits, dp) = shortest_digits(f);
    let exp = dp - 1;
    // %e when the exponent is < -4 or >= the precision (6 for shortest).
    if !(-4..6).contains(&exp) {
        return fmt_e(f < 0.0, &digits, dp);
    }
    fmt_f(f < 0.0, &digits, dp)
}

/// strconv.FormatFloat(f, 'f', -1, 64).
pub(crate) fn float_f(f: f64) -> String {
    if !f.is_finite() {
        return float_v(f);
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let (digits, dp) = shortest_digits(f);
    fmt_f(f < 0.0, &digits, dp)
}

/// encoding/json's float64 encoding.
fn json_float(f: f64) -> String {
    if !f.is_finite() {
        return "null".into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let abs = f.abs();
    if !(1e-6..1e21).contains(&abs) {
        let (digits, dp) = shortest_digits(f);
        let mut s = fmt_e(f < 0.0, &digits, dp);
        // clean up e-09 to e-9
        let n = s.len();
        let b = s.as_bytes();
        if n >= 4 && b[n - 4] == b'e' && b[n - 3] == b'-' && b[n - 2] == b'0' {
            s.remove(n - 2);
        }
        s
    } else {
        float_f(f)
    }
}

fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_into(v: &Value, out: &mut String, depth: usize) {
    if depth > MAX_OBJECT_DEPTH {
        out.push_str("null");
        return;
    }
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(_) => match num(v) {
            Some(Num::Int(i)) => {
                let _ = write!(out, "{i}");
            }
            Some(Num::Float(f)) => out.push_str(&json_float(f)),
            None => out.push_str("null"),
        },
        Value::String(s) => json_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_into(x, out, depth + 1);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_string(k, out);
                out.push(':');
                json_into(&m[k.as_str()], out, depth + 1);
            }
            out.push('}');
        }
    }
}

/// encoding/json.Marshal (sorted keys, HTML-escaped, Go float formatting).
pub(crate) fn json(v: &Value) -> String {
    let mut out = String::new();
    json_into(v, &mut out, 0);
    out
}

/// swag.IsFloat64AJSONInteger.
pub(crate) fn is_float64_json_integer(f: f64) -> bool {
    const MAX_JSON_FLOAT: f64 = 9007199254740991.0; // 1<<53 - 1
    if f.is_nan() || f.is_infinite() || !(-MAX_JSON_FLOAT..=MAX_JSON_FLOAT).contains(&f) {
        return false;
    }
    if f == f.trunc() {
        return true;
    }
    if f < 0.0 {
        return false;
    }
    let g = f.trunc();
    let diff = (f - g).abs();
    if g == 0.0 || diff < f64::MIN_POSITIVE {
        return diff < 1e-9 * f64::from_bits(1); // SmallestNonzeroFloat64
    }
    diff / (f + g).min(f64::MAX) < 1e-9
}

/// Canonical Go-typed JSON encoding used as a hash key for uniqueness checks
/// (int64 and float64 of equal value stay distinct, as with Go's map keys).
pub(crate) fn canonical_key(v: &Value) -> String {
    let mut out = String::new();
    canonical_into(v, &mut out, 0);
    out
}

fn canonical_into(v: &Value, out: &mut String, depth: usize) {
    if depth > MAX_OBJECT_DEPTH {
        out.push('~');
        return;
    }
    match v {
        Value::Number(_) => match num(v) {
            Some(Num::Int(i)) => {
                let _ = write!(out, "i{i}");
            }
            Some(Num::Float(f)) => {
                let _ = write!(out, "f{:?}", f);
            }
            None => out.push_str("null"),
        },
        Value::Array(a) => {
            out.push('[');
            for x in a {
                canonical_into(x, out, depth + 1);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                json_string(k, out);
                out.push(':');
                canonical_into(&m[k.as_str()], out, depth + 1);
                out.push(',');
            }
            out.push('}');
        }
        other => json_into(other, out, 0),
    }
}

/// reflect.DeepEqual over Go-typed JSON (int64 vs float64 are different types).
pub(crate) fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => num(a) == num(b),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| deep_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| deep_equal(v, w)))
        }
        _ => a == b,
    }
}
