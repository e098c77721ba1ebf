//! Exact Kubernetes quantities (`resource.Quantity`) and resource lists.
//!
//! Owns parsing, arithmetic, rounding and canonical formatting of quantities with upstream's
//! semantics (`k8s.io/apimachinery/pkg/api/resource`), so that admission (LimitRanger,
//! ResourceQuota), validation and controllers compare and print `100m`, `1Gi` or `2e3` exactly
//! as kube-apiserver does. It does no I/O and knows nothing of the objects quantities live in.
//!
//! A quantity is held as an `i128` count of nano units (10^-9), which covers upstream's whole
//! range exactly: upstream rounds every parsed value up to nano precision and caps its magnitude
//! at 2^63-1 units, both of which [`Quantity::parse`] does too. Sums are saturating.
//!
//! Differences from upstream, all invisible to clients that do not compare strings byte by byte:
//! upstream remembers the input text when it is already canonical (so `+1` or `01` print back
//! unchanged); here printing is always canonical (`1`).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Add, Neg, Sub};
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Nano units per unit.
const NANO: i128 = 1_000_000_000;
/// The largest magnitude upstream keeps: 2^63-1 units, in nano units.
const MAX_NANOS: i128 = (i64::MAX as i128) * NANO;
/// Bounds kept during arithmetic so that nothing can overflow an `i128`.
const ARITH_LIMIT: i128 = i128::MAX / 4;

/// Why a string is not a quantity; messages are upstream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantityError {
    /// Not of the form `<sign><digits>[.<digits>]<suffix>`.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    FormatWrong,
    /// The numeric part cannot be represented.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// The suffix is none of the known ones.
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// How a quantity prints, as upstream's `resource.Format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `1`, `100m`, `2k`, `3G`.
    DecimalSI,
    /// `1Ki`, `5Mi`, `2Gi`.
    BinarySI,
    /// `1e3`, `5e-3`.
    DecimalExponent,
}

/// An exact Kubernetes quantity. Equality and ordering compare the value only, not the format.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}
impl Eq for Quantity {}
impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}
impl std::hash::Hash for Quantity {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

impl Default for Quantity {
    fn default() -> Self {
        Self::zero()
    }
}

/// `(base, exponent, format)` for a suffix, as upstream's suffixer interprets it.
fn interpret_suffix(s: &str) -> Option<(u32, i64, Format)> {
    let dec = |e: i64| Some((10, e, Format::DecimalSI));
    let bin = |e: i64| Some((2, e, Format::BinarySI));
    match s {
        "" => dec(0),
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        _ => {
            let rest = s.strip_prefix(['e', 'E'])?;
            let e: i32 = rest.parse().ok()?;
            Some((10, i64::from(e), Format::DecimalExponent))
        }
    }
}

/// `ceil(D * 10^exp10)` for the decimal digits `D`, capped at [`MAX_NANOS`].
fn scale_digits(digits: &[u8], exp10: i64) -> i128 {
    let first = digits.iter().position(|&d| d != 0).unwrap_or(digits.len());
    let d = &digits[first..];
    if d.is_empty() {
        return 0;
    }
    let to_int = |ds: &[u8]| ds.iter().fold(0i128, |v, &x| v * 10 + i128::from(x));
    // MAX_NANOS has 28 digits: anything longer than 30 is over the cap.
    if exp10 >= 0 {
        if d.len() as i64 + exp10 > 30 {
            return MAX_NANOS;
        }
        let v = (0..exp10).fold(to_int(d), |v, _| v * 10);
        v.min(MAX_NANOS)
    } else {
        let cut = exp10.unsigned_abs();
        if cut >= d.len() as u64 {
            return 1; // non-zero and below one nano unit: rounds up
        }
        let (int, frac) = d.split_at(d.len() - cut as usize);
        if int.len() > 30 {
            return MAX_NANOS;
        }
        let mut v = to_int(int);
        if frac.iter().any(|&x| x != 0) {
            v += 1;
        }
        v.min(MAX_NANOS)
    }
}

/// Multiplies decimal digits (most significant first) by 2^e.
fn times_pow2(digits: &mut Vec<u8>, e: i64) {
    for _ in 0..e {
        let mut carry = 0u8;
        for d in digits.iter_mut().rev() {
            let v = *d * 2 + carry;
            *d = v % 10;
            carry = v / 10;
        }
        if carry > 0 {
            digits.insert(0, carry);
        }
    }
}

impl Quantity {
    /// Zero, printed `0`.
    pub const fn zero() -> Self {
        Self {
            nanos: 0,
            format: Format::DecimalSI,
        }
    }

    /// Parses a quantity as upstream's `resource.ParseQuantity` (no surrounding spaces).
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        let b = s.as_bytes();
        if b.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        let mut pos = 0;
        let mut negative = false;
        match b[0] {
            b'-' => {
                negative = true;
                pos = 1;
            }
            b'+' => pos = 1,
            _ => {}
        }
        while pos < b.len() && b[pos] == b'0' {
            pos += 1;
        }
        if pos == b.len() {
            // Only a sign and zeros: upstream's zero.
            return Ok(Self::zero());
        }
        let num_start = pos;
        while pos < b.len() && b[pos].is_ascii_digit() {
            pos += 1;
        }
        let num = &b[num_start..pos];
        let mut denom: &[u8] = &[];
        if pos < b.len() && b[pos] == b'.' {
            pos += 1;
            let start = pos;
            while pos < b.len() && b[pos].is_ascii_digit() {
                pos += 1;
            }
            denom = &b[start..pos];
        }
        let suffix_start = pos;
        while pos < b.len() && b"eEinumkKMGTP".contains(&b[pos]) {
            pos += 1;
        }
        if pos < b.len() && (b[pos] == b'-' || b[pos] == b'+') {
            pos += 1;
        }
        while pos < b.len() && b[pos].is_ascii_digit() {
            pos += 1;
        }
        if pos != b.len() {
            return Err(QuantityError::FormatWrong);
        }
        // Everything after the number is ASCII by construction.
        let suffix = &s[suffix_start..];
        let (base, exponent, mut format) = interpret_suffix(suffix).ok_or(QuantityError::Suffix)?;

        let mut digits: Vec<u8> = num.iter().chain(denom).map(|d| d - b'0').collect();
        let exp10 = if base == 2 {
            times_pow2(&mut digits, exponent);
            9 - denom.len() as i64
        } else {
            exponent
                .saturating_sub(denom.len() as i64)
                .saturating_add(9)
        };
        let magnitude = scale_digits(&digits, exp10);
        if format == Format::BinarySI && magnitude > 0 && magnitude < NANO {
            format = Format::DecimalSI;
        }
        Ok(Self {
            nanos: if negative { -magnitude } else { magnitude },
            format,
        })
    }

    /// A whole number of units in the given format.
    pub fn from_value(value: i64, format: Format) -> Self {
        Self {
            nanos: i128::from(value) * NANO,
            format,
        }
    }

    /// Thousandths of a unit (`DecimalSI`), as upstream's `NewMilliQuantity`.
    pub fn from_milli(milli: i64) -> Self {
        Self {
            nanos: i128::from(milli) * 1_000_000,
            format: Format::DecimalSI,
        }
    }

    /// The value in nano units (10^-9), exact.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The print format.
    pub fn format(&self) -> Format {
        self.format
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// -1, 0 or 1.
    pub fn sign(&self) -> i32 {
        self.nanos.signum() as i32
    }

    /// The value rounded away from zero to a whole unit, as upstream's `Value()`; saturates at
    /// the `i64` range.
    pub fn value(&self) -> i64 {
        round_away(self.nanos, NANO)
    }

    /// The value in thousandths rounded away from zero, as upstream's `MilliValue()`;
    /// saturates at the `i64` range.
    pub fn milli_value(&self) -> i64 {
        round_away(self.nanos, 1_000_000)
    }

    /// Rounded away from zero to a whole unit, keeping the format (upstream's `RoundUp(0)`).
    pub fn round_up_units(&self) -> Self {
        let whole = self.nanos / NANO;
        let whole = if self.nanos % NANO != 0 {
            whole + self.nanos.signum()
        } else {
            whole
        };
        Self {
            nanos: whole * NANO,
            format: self.format,
        }
    }

    /// The sum; takes `other`'s format when `self` is zero (as upstream's `Add`).
    pub fn checked_add(&self, other: &Self) -> Self {
        Self {
            nanos: (self.nanos + other.nanos).clamp(-ARITH_LIMIT, ARITH_LIMIT),
            format: if self.is_zero() {
                other.format
            } else {
                self.format
            },
        }
    }

    /// The difference; takes `other`'s format when `self` is zero (as upstream's `Sub`).
    pub fn checked_sub(&self, other: &Self) -> Self {
        self.checked_add(&-*other)
    }

    /// Canonical text, as upstream's `String()`.
    pub fn to_canonical(&self) -> String {
        if self.nanos == 0 {
            return "0".into();
        }
        let mut format = self.format;
        if format == Format::BinarySI && (self.nanos.abs() < 1024 * NANO || self.nanos % NANO != 0)
        {
            format = Format::DecimalSI;
        }
        if format == Format::BinarySI {
            let mut v = self.nanos / NANO;
            let mut exp = 0;
            while v.abs() >= 1024 && v % 1024 == 0 && exp < 6 {
                v /= 1024;
                exp += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exp];
            return format!("{v}{suffix}");
        }
        let mut mantissa = self.nanos;
        let mut exp: i32 = -9;
        while mantissa % 10 == 0 {
            mantissa /= 10;
            exp += 1;
        }
        while exp % 3 != 0 {
            mantissa *= 10;
            exp -= 1;
        }
        let suffix = match (format, exp) {
            (Format::DecimalExponent, 0) => String::new(),
            (Format::DecimalExponent, e) => format!("e{e}"),
            (_, -9) => "n".into(),
            (_, -6) => "u".into(),
            (_, -3) => "m".into(),
            (_, 0) => String::new(),
            (_, 3) => "k".into(),
            (_, 6) => "M".into(),
            (_, 9) => "G".into(),
            (_, 12) => "T".into(),
            (_, 15) => "P".into(),
            (_, 18) => "E".into(),
            (_, e) => format!("e{e}"),
        };
        format!("{mantissa}{suffix}")
    }
}

fn round_away(nanos: i128, unit: i128) -> i64 {
    let q = nanos / unit;
    let q = if nanos % unit != 0 {
        q + nanos.signum()
    } else {
        q
    };
    q.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

impl Neg for Quantity {
    type Output = Quantity;
    fn neg(self) -> Quantity {
        Quantity {
            nanos: -self.nanos,
            format: self.format,
        }
    }
}

impl Add for Quantity {
    type Output = Quantity;
    fn add(self, rhs: Quantity) -> Quantity {
        self.checked_add(&rhs)
    }
}

impl Sub for Quantity {
    type Output = Quantity;
    fn sub(self, rhs: Quantity) -> Quantity {
        self.checked_sub(&rhs)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_canonical())
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_canonical())
    }
}

impl<'de> Deserialize<'de> for Quantity {
    /// A string or a bare JSON number, trimmed, as upstream's `UnmarshalJSON`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity string or number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
                Quantity::parse(v.trim()).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity::from_value(v, Format::DecimalSI))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
                Quantity::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
                Quantity::parse(&v.to_string()).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A quantity in a resource list that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {value:?} for {name}: {source}")]
pub struct ResourceListError {
    pub name: String,
    pub value: String,
    pub source: QuantityError,
}

/// A `ResourceList` (`{"cpu": "100m", "memory": "1Gi"}`), ordered by resource name, with the
/// set arithmetic of upstream's `pkg/quota/v1` helpers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceList(pub BTreeMap<String, Quantity>);

impl ResourceList {
    pub fn new() -> Self {
        Self::default()
    }

    /// From a JSON object of quantities; `null` or a missing value is an empty list. Each value
    /// may be a string or a number.
    pub fn from_json(v: &serde_json::Value) -> Result<Self, ResourceListError> {
        let mut out = Self::new();
        let Some(m) = v.as_object() else {
            return Ok(out);
        };
        for (name, q) in m {
            let text = match q {
                serde_json::Value::String(s) => s.trim().to_string(),
                other => other.to_string(),
            };
            let parsed = Quantity::parse(&text).map_err(|source| ResourceListError {
                name: name.clone(),
                value: text.clone(),
                source,
            })?;
            out.0.insert(name.clone(), parsed);
        }
        Ok(out)
    }

    /// [`ResourceList::from_json`] keeping only the entries that parse: for values validation
    /// already checked, where one bad stored entry must not fail (or panic) the rest.
    pub fn from_json_lenient(v: &serde_json::Value) -> Self {
        v.as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, q)| {
                let text = match q {
                    serde_json::Value::String(s) => s.trim().to_string(),
                    other => other.to_string(),
                };
                Quantity::parse(&text).ok().map(|q| (k.clone(), q))
            })
            .collect()
    }

    /// A JSON object of canonical quantity strings.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.to_canonical())))
                .collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<&Quantity> {
        self.0.get(name)
    }

    pub fn insert(&mut self, name: impl Into<String>, q: Quantity) {
        self.0.insert(name.into(), q);
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Adds `q` to the named entry (absent counts as zero).
    pub fn add_to(&mut self, name: &str, q: Quantity) {
        match self.0.get_mut(name) {
            Some(e) => *e = e.checked_add(&q),
            None => {
                self.0
                    .insert(name.to_string(), Quantity::zero().checked_add(&q));
            }
        }
    }

    /// Adds every entry of `other` in place (upstream `quota.Add` into `self`).
    pub fn add_assign(&mut self, other: &Self) {
        for (k, v) in &other.0 {
            self.add_to(k, *v);
        }
    }

    /// Raises every entry to `other`'s where that is larger, in place (upstream `quota.Max`
    /// into `self`).
    pub fn max_assign(&mut self, other: &Self) {
        for (k, v) in &other.0 {
            match self.0.get_mut(k) {
                Some(e) if v > e => *e = *v,
                Some(_) => {}
                None => {
                    self.0.insert(k.clone(), *v);
                }
            }
        }
    }

    /// The sum over the union of names (upstream `quota.Add`).
    pub fn add(&self, other: &Self) -> Self {
        let mut out = self.clone();
        for (k, v) in &other.0 {
            out.add_to(k, *v);
        }
        out
    }

    /// `self - other` over the union of names; names only in `other` become negative
    /// (upstream `quota.Subtract`).
    pub fn sub(&self, other: &Self) -> Self {
        let mut out = self.clone();
        for (k, v) in &other.0 {
            out.add_to(k, -*v);
        }
        out
    }

    /// For each name in both lists, whether `self <= other`; returns the names where it is not
    /// (upstream `quota.LessThanOrEqual`).
    pub fn less_or_equal(&self, other: &Self) -> (bool, Vec<String>) {
        let over: Vec<String> = other
            .0
            .iter()
            .filter(|(k, lim)| self.0.get(*k).is_some_and(|v| v > lim))
            .map(|(k, _)| k.clone())
            .collect();
        (over.is_empty(), over)
    }

    /// The entries whose names are in `names` (upstream `quota.Mask`).
    pub fn mask<S: AsRef<str>>(&self, names: &[S]) -> Self {
        Self(
            self.0
                .iter()
                .filter(|(k, _)| names.iter().any(|n| n.as_ref() == k.as_str()))
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
        )
    }

    /// The element-wise maximum over the union of names (upstream `quota.Max`).
    pub fn max(&self, other: &Self) -> Self {
        let mut out = self.clone();
        for (k, v) in &other.0 {
            let e = out.0.entry(k.clone()).or_insert(*v);
            if v > e {
                *e = *v;
            }
        }
        out
    }

    /// Whether every value is zero.
    pub fn is_zero(&self) -> bool {
        self.0.values().all(Quantity::is_zero)
    }

    /// `name=value` pairs joined by `,`, as upstream prints lists in quota messages.
    pub fn to_pairs(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl FromIterator<(String, Quantity)> for ResourceList {
    fn from_iter<I: IntoIterator<Item = (String, Quantity)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn canonical_forms() {
        let cases = [
            ("0", "0"),
            ("-0", "0"),
            ("0Ki", "0"),
            ("000", "0"),
            ("1", "1"),
            ("+1", "1"),
            ("01", "1"),
            ("100m", "100m"),
            ("0.1", "100m"),
            ("1500m", "1500m"),
            ("1.5", "1500m"),
            ("1000m", "1"),
            ("2000", "2k"),
            ("2k", "2k"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1.5Ki", "1536"),
            ("100Ki", "100Ki"),
            ("1023", "1023"),
            ("512", "512"),
            ("0.5Ki", "512"),
            ("1e3", "1e3"),
            ("1E3", "1e3"),
            ("10e3", "10e3"),
            ("1e-3", "1e-3"),
            ("1.5e3", "1500"),
            ("12e-1", "1200e-3"),
            ("1n", "1n"),
            ("1u", "1u"),
            ("0.0000000001", "1n"),
            ("1.0000000001", "1000000001n"),
            ("-1.0000000001", "-1000000001n"),
            ("-100m", "-100m"),
            ("-1Gi", "-1Gi"),
            ("5M", "5M"),
            ("1E", "1E"),
            ("1.", "1"),
            (".5", "500m"),
            ("1e100", "9223372036854775807"),
            ("-1e100", "-9223372036854775807"),
            ("1e-100", "1e-9"),
            (
                "99999999999999999999999999999999999999999999",
                "9223372036854775807",
            ),
            ("8Ei", "9223372036854775807"),
            ("7Ei", "7Ei"),
            ("0.00000000000000000000000000000000000001", "1n"),
        ];
        for (input, want) in cases {
            assert_eq!(q(input).to_string(), want, "input {input:?}");
        }
    }

    #[test]
    fn invalid_inputs() {
        let cases = [
            ("", QuantityError::FormatWrong),
            (" 1", QuantityError::FormatWrong),
            ("1 ", QuantityError::FormatWrong),
            ("abc", QuantityError::FormatWrong),
            ("1Kib", QuantityError::FormatWrong),
            ("1.2.3", QuantityError::FormatWrong),
            ("--1", QuantityError::Suffix),
            ("1e", QuantityError::Suffix),
            ("1Qi", QuantityError::FormatWrong),
            ("1ki", QuantityError::Suffix),
            ("1mm", QuantityError::Suffix),
            ("1e99999999999", QuantityError::Suffix),
            ("1K", QuantityError::Suffix),
        ];
        for (input, want) in cases {
            assert_eq!(Quantity::parse(input), Err(want), "input {input:?}");
        }
    }

    #[test]
    fn values_round_away_from_zero() {
        let cases = [
            ("100m", 1, 100),
            ("1", 1, 1000),
            ("1.5", 2, 1500),
            ("-1.5", -2, -1500),
            ("1n", 1, 1),
            ("-1n", -1, -1),
            ("1Gi", 1 << 30, 1000 << 30),
            ("0", 0, 0),
            ("1e100", i64::MAX, i64::MAX),
        ];
        for (input, value, milli) in cases {
            assert_eq!(q(input).value(), value, "value of {input}");
            assert_eq!(q(input).milli_value(), milli, "milli of {input}");
        }
    }

    #[test]
    fn arithmetic_and_order() {
        assert_eq!((q("100m") + q("900m")).to_string(), "1");
        assert_eq!((q("1Gi") + q("1Gi")).to_string(), "2Gi");
        assert_eq!((q("1Gi") - q("512Mi")).to_string(), "512Mi");
        assert_eq!((Quantity::zero() + q("1Gi")).to_string(), "1Gi");
        assert_eq!((q("1") - q("1500m")).to_string(), "-500m");
        assert!(q("1") > q("999m"));
        assert!(q("1Ki") == q("1024"));
        assert!(q("1k") < q("1Ki"));
        assert_eq!(
            q("1e100") + q("1e100"),
            Quantity {
                nanos: 2 * MAX_NANOS,
                format: Format::DecimalExponent
            }
        );
        assert_eq!(Quantity::from_milli(1500).to_string(), "1500m");
        assert_eq!(q("1500m").round_up_units().to_string(), "2");
        assert_eq!(q("1.5Gi").round_up_units().to_string(), "1536Mi");
        assert_eq!(q("-0.5").round_up_units().to_string(), "-1");
        assert_eq!(Quantity::from_value(3, Format::BinarySI).to_string(), "3");
        assert_eq!(
            Quantity::from_value(2048, Format::BinarySI).to_string(),
            "2Ki"
        );
    }

    #[test]
    fn serde_round_trip() {
        let v: Quantity = serde_json::from_str("\" 250m \"").unwrap();
        assert_eq!(v, q("250m"));
        let n: Quantity = serde_json::from_str("2").unwrap();
        assert_eq!(n.to_string(), "2");
        let f: Quantity = serde_json::from_str("0.5").unwrap();
        assert_eq!(f.to_string(), "500m");
        assert_eq!(serde_json::to_string(&q("1.5Gi")).unwrap(), "\"1536Mi\"");
        assert!(serde_json::from_str::<Quantity>("\"x\"").is_err());
        assert!(serde_json::from_str::<Quantity>("true").is_err());
    }

    #[test]
    fn resource_lists() {
        let a = ResourceList::from_json(&serde_json::json!({"cpu": "1", "memory": "1Gi"})).unwrap();
        let b = ResourceList::from_json(&serde_json::json!({"cpu": "500m", "pods": 2})).unwrap();
        assert_eq!(a.add(&b).to_pairs(), "cpu=1500m,memory=1Gi,pods=2");
        assert_eq!(a.sub(&b).to_pairs(), "cpu=500m,memory=1Gi,pods=-2");
        assert_eq!(a.less_or_equal(&b), (false, vec!["cpu".to_string()]));
        assert_eq!(b.less_or_equal(&a), (true, vec![]));
        assert_eq!(a.mask(&["memory"]).to_pairs(), "memory=1Gi");
        assert_eq!(a.max(&b).to_pairs(), "cpu=1,memory=1Gi,pods=2");
        assert_eq!(
            a.to_json(),
            serde_json::json!({"cpu": "1", "memory": "1Gi"})
        );
        assert!(
            ResourceList::from_json(&serde_json::Value::Null)
                .unwrap()
                .is_empty()
        );
        let err = ResourceList::from_json(&serde_json::json!({"cpu": "lots"})).unwrap_err();
        assert_eq!(err.name, "cpu");
        assert_eq!(err.source, QuantityError::FormatWrong);
    }
}
