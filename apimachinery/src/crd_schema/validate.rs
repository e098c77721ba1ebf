//! Value validation with kube-openapi's semantics (validator order, anyOf/oneOf
//! best-failure selection, error de-duplication, Go typing of JSON numbers) and
//! apiextensions' conversion of its errors to field errors; plus the
//! x-kubernetes-list-type set/map uniqueness checks.

use super::format;
use super::gofmt::{self, Num};
use super::props::{AdditionalProps, Props};
use super::{BadValue, FieldError, MAX_OBJECT_DEPTH, index, key, nil_path};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    InvalidType,
    Required,
    TooLong,
    TooShort,
    Pattern,
    Enum,
    MultipleOf,
    Max,
    Min,
    Unique,
    MaxItems,
    MinItems,
    TooFewProperties,
    TooManyProperties,
    UnallowedProperty,
    MultipleOfMustBePositive,
}

#[derive(Debug, Clone)]
enum VErr {
    /// kube-openapi's *errors.Validation
    V {
        code: Code,
        name: String,
        value: Option<BadValue>,
        valid: Option<i64>,
        values: Vec<Value>,
        message: String,
    },
    /// Composite / plain errors (no path of their own).
    Plain(String),
}

impl VErr {
    fn message(&self) -> &str {
        match self {
            VErr::V { message, .. } => message,
            VErr::Plain(m) => m,
        }
    }
}

fn v(code: Code, name: &str, value: Option<BadValue>, message: String) -> VErr {
    VErr::V {
        code,
        name: name.to_string(),
        value,
        valid: None,
        values: Vec::new(),
        message,
    }
}

#[derive(Debug, Default)]
struct VResult {
    errs: Vec<VErr>,
    seen: HashSet<String>,
    count: usize,
}

impl VResult {
    fn with_count(count: usize) -> Self {
        VResult {
            count,
            ..Default::default()
        }
    }
    fn err(e: VErr) -> Self {
        let mut r = VResult::default();
        r.add(e);
        r
    }
    fn add(&mut self, e: VErr) {
        if self.seen.insert(e.message().to_string()) {
            self.errs.push(e);
        }
    }
    fn merge(&mut self, other: VResult) {
        for e in other.errs {
            self.add(e);
        }
        self.count += other.count;
    }
    fn is_valid(&self) -> bool {
        self.errs.is_empty()
    }
    fn inc(&mut self) {
        self.count += 1;
    }
}

fn body(name: &str, tail: &str) -> String {
    format!("{name} in body {tail}")
}

fn invalid_type(name: &str, type_name: &str, value: &str) -> VErr {
    v(
        Code::InvalidType,
        name,
        Some(BadValue::Str(value.to_string())),
        format!(
            "{name} in body must be of type {type_name}: {}",
            gofmt::quote(value)
        ),
    )
}

fn go_num_str(n: Num) -> String {
    match n {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => gofmt::float_v(f),
    }
}

fn num_bad(n: Num) -> BadValue {
    match n {
        Num::Int(i) => BadValue::Int(i),
        Num::Float(f) => BadValue::Float(f),
    }
}

/// Go's type name and format for a JSON value (validate.typeValidator.schemaInfoForType).
fn schema_info(data: &Value) -> (&'static str, &'static str) {
    match data {
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(_) => match gofmt::num(data) {
            Some(Num::Int(_)) => ("integer", "int64"),
            _ => ("number", "float64"),
        },
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
        Value::Null => ("", ""),
    }
}

struct Validator;

impl Validator {
    /// `old` is the correlated old value (ratcheting, updates only); `ratchet`
    /// marks nodes whose errors are dropped when unchanged (upstream's ratcheting
    /// validators: the root, correlated properties and list-map items).
    fn schema(
        &self,
        s: &Props,
        data: &Value,
        old: Option<&Value>,
        ratchet: bool,
        path: &str,
        depth: usize,
    ) -> VResult {
        let mut r = self.schema_inner(s, data, old, path, depth);
        if ratchet && !r.is_valid() && old.is_some_and(|o| gofmt::deep_equal(o, data)) {
            r.errs.clear();
            r.seen.clear();
        }
        r
    }

    fn schema_inner(
        &self,
        s: &Props,
        data: &Value,
        old: Option<&Value>,
        path: &str,
        depth: usize,
    ) -> VResult {
        let mut r = VResult::default();
        if depth > MAX_OBJECT_DEPTH {
            r.add(VErr::Plain(format!(
                "{} exceeds the maximum nesting depth of {MAX_OBJECT_DEPTH}",
                gofmt::quote(path)
            )));
            return r;
        }
        if data.is_null() {
            r.merge(self.type_check(s, data, path));
            r.merge(self.common(s, data, path));
            return r;
        }
        if !s.vtypes.is_empty() || !s.vformat.is_empty() {
            r.merge(self.type_check(s, data, path));
            r.inc();
        }
        r.merge(self.props(s, data, old, path, depth));
        r.inc();
        if let Value::String(st) = data {
            r.merge(self.string(s, st, path));
            r.inc();
            if format::is_known(&s.vformat) {
                if !format::validates(&s.vformat, st) {
                    r.merge(VResult::err(v(
                        Code::InvalidType,
                        path,
                        Some(BadValue::Str(st.clone())),
                        format!(
                            "{path} in body must be of type {}: {}",
                            s.vformat,
                            gofmt::quote(st)
                        ),
                    )));
                }
                r.inc();
            }
        }
        if let Some(n) = gofmt::num(data) {
            r.merge(self.number(s, n, path));
            r.inc();
        }
        if let Value::Array(a) = data {
            r.merge(self.slice(s, a, old, path, depth));
            r.inc();
        }
        r.merge(self.common(s, data, path));
        r.inc();
        if let Value::Object(m) = data {
            r.merge(self.object(s, m, old, path, depth));
            r.inc();
        }
        r.inc();
        r
    }

    fn type_check(&self, s: &Props, data: &Value, path: &str) -> VResult {
        let has = |t: &str| s.vtypes.iter().any(|x| x == t);
        if data.is_null() {
            if !s.vtypes.is_empty() && !has("null") && !s.nullable {
                return VResult::err(invalid_type(path, &s.vtypes.join(","), "null"));
            }
            return VResult::with_count(1);
        }
        let (sch_type, fmt) = schema_info(data);
        let str_or_slice = data.is_string() || data.is_array();
        let is_float_int = sch_type == "number"
            && gofmt::is_float64_json_integer(data.as_f64().unwrap_or(0.5))
            && has("integer");
        let is_int_float = sch_type == "integer" && has("number");
        let f = s.vformat.as_str();
        if !(str_or_slice
            || f.is_empty()
            || has(sch_type)
            || fmt == f
            || is_float_int
            || is_int_float)
        {
            return VResult::err(invalid_type(path, f, fmt));
        }
        if !(has("number") || has("integer") || f.is_empty()) && str_or_slice {
            return VResult::with_count(1);
        }
        if !(has(sch_type) || is_float_int || is_int_float) {
            return VResult::err(invalid_type(path, &s.vtypes.join(","), sch_type));
        }
        VResult::with_count(1)
    }

    fn props(
        &self,
        s: &Props,
        data: &Value,
        old: Option<&Value>,
        path: &str,
        depth: usize,
    ) -> VResult {
        let mut main = VResult::default();
        let q = gofmt::quote(path);
        if !s.any_of.is_empty() {
            let mut best: Option<VResult> = None;
            let mut first_success: Option<VResult> = None;
            let mut succeeded = false;
            for alt in &s.any_of {
                let r = self.schema(alt, data, old, false, path, depth + 1);
                if r.is_valid() {
                    best = None;
                    succeeded = true;
                    first_success = Some(r);
                    break;
                }
                if best.as_ref().is_none_or(|b| r.count > b.count) {
                    best = Some(r);
                }
            }
            if !succeeded {
                main.add(VErr::Plain(format!(
                    "{q} must validate at least one schema (anyOf)"
                )));
            }
            if let Some(b) = best {
                main.merge(b);
            } else if let Some(f) = first_success {
                main.merge(f);
            }
        }
        if !s.one_of.is_empty() {
            let mut best: Option<VResult> = None;
            let mut first_success: Option<VResult> = None;
            let mut validated = 0usize;
            for alt in &s.one_of {
                let r = self.schema(alt, data, old, false, path, depth + 1);
                if r.is_valid() {
                    validated += 1;
                    best = None;
                    if first_success.is_none() {
                        first_success = Some(r);
                    }
                    continue;
                }
                if validated == 0 && best.as_ref().is_none_or(|b| r.count > b.count) {
                    best = Some(r);
                }
            }
            if validated != 1 {
                let extra = if validated == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {validated} valid alternatives")
                };
                main.add(VErr::Plain(format!(
                    "{q} must validate one and only one schema (oneOf). {extra}"
                )));
                if let Some(b) = best {
                    main.merge(b);
                }
            } else if let Some(f) = first_success {
                main.merge(f);
            }
        }
        if !s.all_of.is_empty() {
            let mut validated = 0usize;
            for alt in &s.all_of {
                let r = self.schema(alt, data, old, false, path, depth + 1);
                if r.is_valid() {
                    validated += 1;
                }
                main.merge(r);
            }
            if validated != s.all_of.len() {
                let extra = if validated == 0 {
                    ". None validated"
                } else {
                    ""
                };
                main.add(VErr::Plain(format!(
                    "{q} must validate all the schemas (allOf){extra}"
                )));
            }
        }
        if let Some(not) = &s.not {
            let r = self.schema(not, data, old, false, path, depth + 1);
            if r.is_valid() {
                main.add(VErr::Plain(format!(
                    "{q} must not validate the schema (not)"
                )));
            }
        }
        main.inc();
        main
    }

    fn string(&self, s: &Props, st: &str, path: &str) -> VResult {
        let len = || st.chars().count() as i64;
        if let Some(max) = s.max_length
            && len() > max
        {
            let mut e = v(
                Code::TooLong,
                path,
                Some(BadValue::Str(st.to_string())),
                body(path, &format!("should be at most {max} chars long")),
            );
            if let VErr::V { valid, .. } = &mut e {
                *valid = Some(max);
            }
            return VResult::err(e);
        }
        if let Some(min) = s.min_length
            && len() < min
        {
            return VResult::err(v(
                Code::TooShort,
                path,
                Some(BadValue::Str(st.to_string())),
                body(path, &format!("should be at least {min} chars long")),
            ));
        }
        if !s.pattern.is_empty() {
            let shown = match &s.regex {
                Some(Ok(re)) if re.is_match(st) => return VResult::default(),
                Some(Ok(_)) | None => s.pattern.clone(),
                Some(Err(e)) => format!("{}, but pattern is invalid: {e}", s.pattern),
            };
            return VResult::err(v(
                Code::Pattern,
                path,
                Some(BadValue::Str(st.to_string())),
                body(path, &format!("should match '{shown}'")),
            ));
        }
        VResult::default()
    }

    fn number(&self, s: &Props, n: Num, path: &str) -> VResult {
        let (type_name, fmt) = if s.vtypes.len() == 1 {
            match s.vtypes[0].as_str() {
                "integer" => (
                    "integer",
                    if s.vformat == "int32" || s.vformat == "int64" {
                        s.vformat.as_str()
                    } else {
                        ""
                    },
                ),
                "number" => (
                    "number",
                    if s.vformat == "float" || s.vformat == "double" {
                        s.vformat.as_str()
                    } else {
                        ""
                    },
                ),
                _ => ("", ""),
            }
        } else {
            ("", "")
        };
        let data = n.as_f64();
        let mut res = VResult::default();
        if let Some(e) = range_check(n, type_name, fmt, "Checked", path) {
            res.add(e);
        }
        let mut res_mult = VResult::default();
        let mut res_min = VResult::default();
        let mut res_max = VResult::default();
        if let Some(m) = s.multiple_of {
            match range_check(Num::Float(m), type_name, fmt, "MultipleOf", path) {
                None => {
                    if let Some(e) = multiple_of_native(path, n, m) {
                        res_mult.add(e);
                    }
                }
                Some(re) => {
                    res_mult.add(re);
                    if let Some(e) = multiple_of_float(path, data, m) {
                        res_mult.add(e);
                    }
                }
            }
        }
        if let Some(max) = s.maximum {
            let e = match range_check(Num::Float(max), type_name, fmt, "Maximum boundary", path) {
                None => bound_native(path, n, max, s.exclusive_maximum, true),
                Some(re) => {
                    res_max.add(re);
                    bound_native(path, Num::Float(data), max, s.exclusive_maximum, true)
                }
            };
            if let Some(e) = e {
                res_max.add(e);
            }
        }
        if let Some(min) = s.minimum {
            let e = match range_check(Num::Float(min), type_name, fmt, "Minimum boundary", path) {
                None => bound_native(path, n, min, s.exclusive_minimum, false),
                Some(re) => {
                    res_min.add(re);
                    bound_native(path, Num::Float(data), min, s.exclusive_minimum, false)
                }
            };
            if let Some(e) = e {
                res_min.add(e);
            }
        }
        res.merge(res_mult);
        res.merge(res_min);
        res.merge(res_max);
        res.inc();
        res
    }

    fn slice(
        &self,
        s: &Props,
        a: &[Value],
        old: Option<&Value>,
        path: &str,
        depth: usize,
    ) -> VResult {
        let mut r = VResult::default();
        if let Some(items) = &s.items {
            // only list-type=map items correlate with old items (by key)
            let old_items = match (old, s.x_list_type.as_deref()) {
                (Some(Value::Array(o)), Some("map")) => Some(o),
                _ => None,
            };
            for (i, x) in a.iter().enumerate() {
                let ox = old_items.and_then(|o| {
                    o.iter().find(|y| {
                        s.x_list_map_keys
                            .iter()
                            .all(|k| match (x.get(k), y.get(k)) {
                                (Some(p), Some(q)) => gofmt::deep_equal(p, q),
                                (None, None) => true,
                                _ => false,
                            })
                    })
                });
                r.merge(self.schema(items, x, ox, ox.is_some(), &index(path, i), depth + 1));
            }
        }
        let size = a.len() as i64;
        if let Some(min) = s.min_items
            && size < min
        {
            let mut e = v(
                Code::MinItems,
                path,
                Some(BadValue::Int(size)),
                body(path, &format!("should have at least {min} items")),
            );
            if let VErr::V { valid, .. } = &mut e {
                *valid = Some(min);
            }
            r.add(e);
        }
        if let Some(max) = s.max_items
            && size > max
        {
            let mut e = v(
                Code::MaxItems,
                path,
                Some(BadValue::Int(size)),
                body(path, &format!("should have at most {max} items")),
            );
            if let VErr::V { valid, .. } = &mut e {
                *valid = Some(max);
            }
            r.add(e);
        }
        if s.unique_items {
            let mut seen = HashSet::new();
            if !a.iter().all(|x| seen.insert(gofmt::canonical_key(x))) {
                r.add(v(
                    Code::Unique,
                    path,
                    None,
                    body(path, "shouldn't contain duplicates"),
                ));
            }
        }
        r.inc();
        r
    }

    fn common(&self, s: &Props, data: &Value, path: &str) -> VResult {
        if s.enum_.is_empty() || s.enum_.iter().any(|e| enum_match(data, e)) {
            return VResult::default();
        }
        let shown: Vec<String> = s.enum_.iter().map(go_v).collect();
        VResult::err(VErr::V {
            code: Code::Enum,
            name: path.to_string(),
            value: Some(BadValue::from_json(data)),
            valid: None,
            values: s.enum_.clone(),
            message: body(path, &format!("should be one of [{}]", shown.join(" "))),
        })
    }

    fn object(
        &self,
        s: &Props,
        m: &Map<String, Value>,
        old: Option<&Value>,
        path: &str,
        depth: usize,
    ) -> VResult {
        let old_child = |k: &str| -> Option<&Value> {
            // TypeMeta at the root is never ratcheted
            if path.is_empty() && (k == "kind" || k == "apiVersion") {
                return None;
            }
            old.and_then(|o| o.as_object()).and_then(|o| o.get(k))
        };
        let mut r = VResult::default();
        let n = m.len() as i64;
        if let Some(min) = s.min_properties
            && n < min
        {
            r.add(v(
                Code::TooFewProperties,
                path,
                Some(BadValue::Int(n)),
                body(path, &format!("should have at least {min} properties")),
            ));
        }
        if let Some(max) = s.max_properties
            && n > max
        {
            let mut e = v(
                Code::TooManyProperties,
                path,
                Some(BadValue::Int(n)),
                body(path, &format!("should have at most {max} properties")),
            );
            if let VErr::V { valid, .. } = &mut e {
                *valid = Some(max);
            }
            r.add(e);
        }
        let mut keys: Vec<&String> = m.keys().collect();
        keys.sort();
        match &s.additional_properties {
            Some(AdditionalProps::Bool(false)) => {
                for k in &keys {
                    if !s.properties.contains_key(k.as_str()) {
                        r.add(v(
                            Code::UnallowedProperty,
                            path,
                            Some(BadValue::Str(k.to_string())),
                            format!("{path}.{k} in body is a forbidden property"),
                        ));
                    }
                }
            }
            Some(AdditionalProps::Schema(ap)) => {
                for k in &keys {
                    if !s.properties.contains_key(k.as_str()) {
                        let oc = old_child(k);
                        r.merge(self.schema(
                            ap,
                            &m[k.as_str()],
                            oc,
                            oc.is_some(),
                            &format!("{path}.{k}"),
                            depth + 1,
                        ));
                    }
                }
            }
            _ => {}
        }
        for (pname, ps) in &s.properties {
            if let Some(x) = m.get(pname) {
                let rname = if path.is_empty() {
                    pname.clone()
                } else {
                    format!("{path}.{pname}")
                };
                let oc = old_child(pname);
                r.merge(self.schema(ps, x, oc, oc.is_some(), &rname, depth + 1));
            }
        }
        for k in &s.required {
            if !m.contains_key(k) {
                let name = format!("{path}.{k}");
                r.add(v(
                    Code::Required,
                    &name,
                    None,
                    format!("{name} in body is required"),
                ));
            }
        }
        r
    }
}

/// IsValueValidAgainstRange.
fn range_check(val: Num, type_name: &str, fmt: &str, prefix: &str, path: &str) -> Option<VErr> {
    let rep = match val {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => gofmt::float_f(f),
    };
    let bad = match type_name {
        "integer" => match fmt {
            "int32" => rep.parse::<i32>().is_err(),
            _ => rep.parse::<i64>().is_err(),
        },
        _ => match fmt {
            "float" => rep
                .parse::<f64>()
                .map(|f| (f as f32).is_infinite())
                .unwrap_or(true),
            _ => false,
        },
    };
    if !bad {
        return None;
    }
    Some(VErr::Plain(if fmt.is_empty() {
        format!("{prefix} value must be of type {type_name} (default format) in {path}")
    } else {
        format!("{prefix} value must be of type {type_name} with format {fmt} in {path}")
    }))
}

fn multiple_of_native(path: &str, n: Num, m: f64) -> Option<VErr> {
    match n {
        Num::Int(i) => {
            let factor = m as i64;
            if factor <= 0 {
                return Some(must_be_positive(path, Num::Int(factor)));
            }
            if i.wrapping_div(factor).wrapping_mul(factor) != i {
                return Some(not_multiple(path, Num::Int(factor), n));
            }
            None
        }
        Num::Float(f) => multiple_of_float(path, f, m),
    }
}

fn multiple_of_float(path: &str, data: f64, factor: f64) -> Option<VErr> {
    if factor <= 0.0 {
        return Some(must_be_positive(path, Num::Float(factor)));
    }
    let mult = if factor < 1.0 {
        1.0 / factor * data
    } else {
        data / factor
    };
    if !gofmt::is_float64_json_integer(mult) {
        return Some(not_multiple(path, Num::Float(factor), Num::Float(data)));
    }
    None
}

fn must_be_positive(path: &str, factor: Num) -> VErr {
    v(
        Code::MultipleOfMustBePositive,
        path,
        Some(num_bad(factor)),
        format!(
            "factor MultipleOf declared for {path} must be positive: {}",
            go_num_str(factor)
        ),
    )
}

fn not_multiple(path: &str, factor: Num, data: Num) -> VErr {
    v(
        Code::MultipleOf,
        path,
        Some(num_bad(data)),
        body(
            path,
            &format!("should be a multiple of {}", go_num_str(factor)),
        ),
    )
}

/// Maximum/MinimumNativeType (is_max selects the direction).
fn bound_native(path: &str, n: Num, bound: f64, exclusive: bool, is_max: bool) -> Option<VErr> {
    let (fails, shown) = match n {
        Num::Int(i) => {
            let b = bound as i64;
            let fails = if is_max {
                (!exclusive && i > b) || (exclusive && i >= b)
            } else {
                (!exclusive && i < b) || (exclusive && i <= b)
            };
            (fails, b.to_string())
        }
        Num::Float(f) => {
            let fails = if is_max {
                (!exclusive && f > bound) || (exclusive && f >= bound)
            } else {
                (!exclusive && f < bound) || (exclusive && f <= bound)
            };
            (fails, gofmt::float_v(bound))
        }
    };
    if !fails {
        return None;
    }
    let tail = match (is_max, exclusive) {
        (true, false) => format!("should be less than or equal to {shown}"),
        (true, true) => format!("should be less than {shown}"),
        (false, false) => format!("should be greater than or equal to {shown}"),
        (false, true) => format!("should be greater than {shown}"),
    };
    Some(v(
        if is_max { Code::Max } else { Code::Min },
        path,
        Some(num_bad(n)),
        body(path, &tail),
    ))
}

/// Go's ConvertibleTo + DeepEqual enum check.
fn enum_match(data: &Value, e: &Value) -> bool {
    match (data, e) {
        (Value::Null, _) | (_, Value::Null) => false,
        (Value::Number(_), Value::Number(_)) => match (gofmt::num(data), gofmt::num(e)) {
            (Some(Num::Int(a)), Some(Num::Int(b))) => a == b,
            (Some(Num::Float(a)), Some(Num::Float(b))) => a == b,
            (Some(Num::Int(a)), Some(Num::Float(b))) => a as f64 == b,
            (Some(Num::Float(a)), Some(Num::Int(b))) => a as i64 == b,
            _ => false,
        },
        (Value::Number(_), Value::String(s)) => match gofmt::num(data) {
            // Go converts an integer to the string of that rune
            Some(Num::Int(i)) => {
                let c = u32::try_from(i)
                    .ok()
                    .and_then(char::from_u32)
                    .unwrap_or('\u{FFFD}');
                s.chars().count() == 1 && s.starts_with(c)
            }
            _ => false,
        },
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Array(_), Value::Array(_)) | (Value::Object(_), Value::Object(_)) => {
            gofmt::deep_equal(data, e)
        }
        _ => false,
    }
}

/// `%v` of a Go value (used only in the enum message, which is not exposed).
fn go_v(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".into(),
        other => match gofmt::num(other) {
            Some(n) => go_num_str(n),
            None => gofmt::json(other),
        },
    }
}

/// kubeOpenAPIResultToFieldErrors.
fn to_field_errors(base: &str, r: VResult) -> Vec<FieldError> {
    let mut out = Vec::with_capacity(r.errs.len());
    for e in r.errs {
        match e {
            VErr::V {
                code,
                name,
                value,
                valid,
                values,
                message,
            } => {
                let err_path = if !name.is_empty() && name != "." {
                    let n = name.strip_prefix('.').unwrap_or(&name);
                    if base.is_empty() {
                        n.to_string()
                    } else {
                        format!("{base}.{n}")
                    }
                } else {
                    nil_path(base)
                };
                let value_or_empty = value.clone().unwrap_or(BadValue::Str(String::new()));
                let fe = match code {
                    Code::Required => FieldError::required(err_path, ""),
                    Code::Enum => {
                        let vals: Vec<String> = values
                            .iter()
                            .map(|x| match x {
                                Value::String(s) => s.clone(),
                                other => gofmt::json(other),
                            })
                            .collect();
                        let bad = value.unwrap_or(BadValue::Json(Value::Null));
                        FieldError::not_supported(err_path, bad, &vals)
                    }
                    Code::TooLong => FieldError::too_long(err_path, valid.unwrap_or(-1)),
                    Code::MaxItems | Code::TooManyProperties => {
                        let actual = match value {
                            Some(BadValue::Int(i)) => i,
                            _ => -1,
                        };
                        FieldError::too_many(err_path, actual, valid.unwrap_or(-1))
                    }
                    Code::InvalidType => {
                        FieldError::type_invalid(err_path, value_or_empty, message)
                    }
                    _ => FieldError::invalid(err_path, value_or_empty, message),
                };
                out.push(fe);
            }
            VErr::Plain(m) => out.push(FieldError::invalid(
                nil_path(base),
                BadValue::Str(String::new()),
                m,
            )),
        }
    }
    out
}

/// Validates `data` against schema `s`; `base` is the field path the schema is
/// rooted at ("" for a whole object, "status" for the status subresource).
pub(crate) fn validate_value(s: &Props, data: &Value, base: &str) -> Vec<FieldError> {
    let r = Validator.schema(s, data, None, false, "", 0);
    to_field_errors(base, r)
}

/// Like [`validate_value`] for an update, with upstream's validation ratcheting:
/// errors of values unchanged from `old` (correlated through object keys and
/// list-type=map keys) are dropped.
pub(crate) fn validate_value_update(
    s: &Props,
    data: &Value,
    old: &Value,
    base: &str,
) -> Vec<FieldError> {
    let r = Validator.schema(s, data, Some(old), true, "", 0);
    to_field_errors(base, r)
}

// ---------------------------------------------------------------------------
// x-kubernetes-list-type uniqueness
// ---------------------------------------------------------------------------

pub(crate) fn validate_list_types(obj: &Value, s: &Props, base: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Value::Object(m) = obj {
        lsm_object(base, s, m, &mut errs, 0);
    }
    errs
}

fn lsm_object(
    path: &str,
    s: &Props,
    m: &Map<String, Value>,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > MAX_OBJECT_DEPTH {
        return;
    }
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    if let Some(ap) = s.additional_schema() {
        for k in &keys {
            lsm(&key(path, k), ap, &m[k.as_str()], errs, depth + 1);
        }
    }
    for k in &keys {
        if let Some(sub) = s.properties.get(k.as_str()) {
            lsm(&super::child(path, k), sub, &m[k.as_str()], errs, depth + 1);
        }
    }
}

fn lsm(path: &str, s: &Props, v: &Value, errs: &mut Vec<FieldError>, depth: usize) {
    match v {
        Value::Array(a) => lsm_array(path, s, a, errs, depth),
        Value::Object(m) => lsm_object(path, s, m, errs, depth),
        _ => {}
    }
}

fn lsm_array(path: &str, s: &Props, a: &[Value], errs: &mut Vec<FieldError>, depth: usize) {
    match s.x_list_type.as_deref() {
        Some("set") => {
            for i in non_unique(a.iter().map(gofmt::canonical_key)) {
                errs.push(FieldError::duplicate(
                    index(path, i),
                    BadValue::from_json(&a[i]),
                ));
            }
        }
        Some("map") => errs.extend(validate_list_map(path, s, a)),
        _ => {}
    }
    if let Some(items) = &s.items {
        for (i, x) in a.iter().enumerate() {
            lsm(&index(path, i), items, x, errs, depth + 1);
        }
    }
}

/// Indices of the second occurrence of each duplicated key.
fn non_unique(keys: impl Iterator<Item = String>) -> Vec<usize> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, k) in keys.enumerate() {
        let c = seen.entry(k).or_insert(0);
        *c += 1;
        if *c == 2 {
            out.push(i);
        }
    }
    out
}

fn validate_list_map(path: &str, s: &Props, a: &[Value]) -> Vec<FieldError> {
    for (i, x) in a.iter().enumerate() {
        if !x.is_null() && !x.is_object() {
            return vec![FieldError::invalid(
                index(path, i),
                BadValue::from_json(x),
                "must be an object for an array of list-type map",
            )];
        }
    }
    if a.len() <= 1 {
        return Vec::new();
    }
    const UNSPECIFIED: &str = "\u{0}unspecified";
    if s.x_list_map_keys.len() == 1 {
        let kf = &s.x_list_map_keys[0];
        let keys: Vec<Option<&Value>> = a.iter().map(|x| x.get(kf)).collect();
        let idx = non_unique(keys.iter().map(|k| match k {
            None => UNSPECIFIED.to_string(),
            Some(v) => gofmt::canonical_key(v),
        }));
        return idx
            .into_iter()
            .map(|i| {
                let shown = match keys[i] {
                    None => Value::Object(Map::new()),
                    Some(v) => {
                        let mut m = Map::new();
                        m.insert(kf.clone(), v.clone());
                        Value::Object(m)
                    }
                };
                FieldError::duplicate(index(path, i), BadValue::Json(shown))
            })
            .collect();
    }
    let keys: Vec<Value> = a
        .iter()
        .map(|x| {
            let mut m = Map::new();
            for kf in &s.x_list_map_keys {
                if let Some(v) = x.get(kf) {
                    m.insert(kf.clone(), v.clone());
                }
            }
            Value::Object(m)
        })
        .collect();
    non_unique(keys.iter().map(gofmt::canonical_key))
        .into_iter()
        .map(|i| FieldError::duplicate(index(path, i), BadValue::Json(keys[i].clone())))
        .collect()
}
