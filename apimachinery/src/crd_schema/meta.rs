//! Embedded resources (`x-kubernetes-embedded-resource`): TypeMeta/ObjectMeta
//! validation and metadata coercion.

use super::gofmt;
use super::props::Props;
use super::{BadValue, FieldError, MAX_OBJECT_DEPTH, child, index, key};
use regex::Regex;
use serde_json::{Map, Value};
use std::sync::OnceLock;

pub(crate) const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// ObjectMeta's JSON fields and the JSON type each must have.
#[derive(Clone, Copy, PartialEq)]
enum MetaType {
    Str,
    Int,
    Time,
    StrMap,
    StrList,
    ObjList,
}

const OBJECT_META_FIELDS: &[(&str, MetaType, &str)] = &[
    ("name", MetaType::Str, "string"),
    ("generateName", MetaType::Str, "string"),
    ("namespace", MetaType::Str, "string"),
    ("selfLink", MetaType::Str, "string"),
    ("uid", MetaType::Str, "types.UID"),
    ("resourceVersion", MetaType::Str, "string"),
    ("generation", MetaType::Int, "int64"),
    ("creationTimestamp", MetaType::Time, "v1.Time"),
    ("deletionTimestamp", MetaType::Time, "v1.Time"),
    ("deletionGracePeriodSeconds", MetaType::Int, "int64"),
    ("labels", MetaType::StrMap, "map[string]string"),
    ("annotations", MetaType::StrMap, "map[string]string"),
    ("ownerReferences", MetaType::ObjList, "[]v1.OwnerReference"),
    ("finalizers", MetaType::StrList, "[]string"),
    (
        "managedFields",
        MetaType::ObjList,
        "[]v1.ManagedFieldsEntry",
    ),
];

use crate::patch::type_name as json_kind;

/// Why embedded metadata does not decode into metav1.ObjectMeta, worded like
/// Go's `json.Unmarshal` errors.
#[derive(Debug, thiserror::Error)]
enum ObjectMetaError {
    /// `metadata` is not an object (`kind` is the JSON type it is).
    #[error("json: cannot unmarshal {kind} into Go value of type v1.ObjectMeta")]
    NotAnObject { kind: &'static str },
    /// A timestamp field holds a string that is not RFC 3339.
    #[error(
        "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse",
        gofmt::quote(.value)
    )]
    BadTime { value: String },
    /// A field of the wrong JSON type.
    #[error(
        "json: cannot unmarshal {kind} into Go struct field ObjectMeta.{field} of type {go_type}"
    )]
    FieldType {
        kind: &'static str,
        field: &'static str,
        go_type: &'static str,
    },
}

/// Type-checks metadata like json.Unmarshal into metav1.ObjectMeta would.
fn check_object_meta(v: &Value) -> Result<(), ObjectMetaError> {
    let Value::Object(m) = v else {
        if v.is_null() {
            return Ok(());
        }
        return Err(ObjectMetaError::NotAnObject { kind: json_kind(v) });
    };
    for (name, ty, go_ty) in OBJECT_META_FIELDS {
        let Some(x) = m.get(*name) else { continue };
        if x.is_null() {
            continue;
        }
        let ok = match ty {
            MetaType::Str => x.is_string(),
            MetaType::Int => x.is_i64(),
            MetaType::Time => x.as_str().is_some_and(is_rfc3339),
            MetaType::StrMap => x
                .as_object()
                .is_some_and(|o| o.values().all(|y| y.is_string() || y.is_null())),
            MetaType::StrList => x
                .as_array()
                .is_some_and(|a| a.iter().all(|y| y.is_string() || y.is_null())),
            MetaType::ObjList => x
                .as_array()
                .is_some_and(|a| a.iter().all(|y| y.is_object() || y.is_null())),
        };
        if !ok {
            if *ty == MetaType::Time
                && let Some(value) = x.as_str()
            {
                return Err(ObjectMetaError::BadTime {
                    value: value.to_string(),
                });
            }
            return Err(ObjectMetaError::FieldType {
                kind: json_kind(x),
                field: name,
                go_type: go_ty,
            });
        }
    }
    Ok(())
}

fn is_rfc3339(s: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$")
            .expect("static regex")
    })
    .is_match(s)
}

/// Coerces embedded metadata like the ObjectMeta round trip: drops unknown and
/// empty (omitempty) fields. Returns the dropped unknown field names.
pub(crate) fn coerce_embedded_metadata(meta: &mut Value) -> Vec<String> {
    let Value::Object(m) = meta else {
        return Vec::new();
    };
    if check_object_meta(&Value::Object(m.clone())).is_err() {
        // left for validation to report
        return Vec::new();
    }
    let mut unknown = Vec::new();
    let keys: Vec<String> = m.keys().cloned().collect();
    for k in keys {
        if !OBJECT_META_FIELDS.iter().any(|(n, _, _)| *n == k) {
            m.remove(&k);
            unknown.push(k);
            continue;
        }
        let empty = match &m[&k] {
            Value::Null => true,
            Value::String(s) => s.is_empty(),
            Value::Object(o) => o.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Number(n) => k == "generation" && n.as_i64() == Some(0),
            Value::Bool(_) => false,
        };
        if empty {
            m.remove(&k);
        }
    }
    unknown.sort();
    unknown
}

// ---------------------------------------------------------------------------
// validation (objectmeta.Validate with isResourceRoot=false)
// ---------------------------------------------------------------------------

pub(crate) fn validate_embedded(obj: &Value, s: &Props, base: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk(base, obj, s, false, &mut errs, 0);
    errs
}

/// Validates `obj` against `s`, treating `s` as a resource root if `as_root`.
pub(crate) fn validate_embedded_as(
    obj: &Value,
    s: &Props,
    base: &str,
    as_root: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk(base, obj, s, as_root, &mut errs, 0);
    errs
}

fn walk(path: &str, x: &Value, s: &Props, as_root: bool, errs: &mut Vec<FieldError>, depth: usize) {
    if depth > MAX_OBJECT_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            if s.x_embedded_resource || as_root {
                validate_embedded_resource(path, m, errs);
            }
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for k in keys {
                let v = &m[k.as_str()];
                if let Some(p) = s.properties.get(k.as_str()) {
                    walk(&child(path, k), v, p, false, errs, depth + 1);
                } else if let Some(ap) = s.additional_schema() {
                    walk(&key(path, k), v, ap, false, errs, depth + 1);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &s.items {
                for (i, v) in a.iter().enumerate() {
                    walk(&index(path, i), v, items, false, errs, depth + 1);
                }
            }
        }
        _ => {}
    }
}

fn validate_embedded_resource(path: &str, m: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    if !m.contains_key("apiVersion") {
        errs.push(FieldError::required(child(path, "apiVersion"), ""));
    }
    if !m.contains_key("kind") {
        errs.push(FieldError::required(child(path, "kind"), ""));
    }
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for k in keys {
        let v = &m[k.as_str()];
        match k.as_str() {
            "apiVersion" => {
                let p = child(path, "apiVersion");
                match v.as_str() {
                    None => errs.push(FieldError::invalid(
                        p,
                        BadValue::from_json(v),
                        "must be a string",
                    )),
                    Some("") => errs.push(FieldError::invalid(
                        p,
                        BadValue::Str(String::new()),
                        "must not be empty",
                    )),
                    Some(av) => {
                        if av != "/" && av.matches('/').count() > 1 {
                            errs.push(FieldError::invalid(
                                p,
                                BadValue::Str(av.to_string()),
                                format!("unexpected GroupVersion string: {av}"),
                            ));
                        }
                    }
                }
            }
            "kind" => {
                let p = child(path, "kind");
                match v.as_str() {
                    None => errs.push(FieldError::invalid(
                        p,
                        BadValue::from_json(v),
                        "must be a string",
                    )),
                    Some("") => errs.push(FieldError::invalid(
                        p,
                        BadValue::Str(String::new()),
                        "must not be empty",
                    )),
                    Some(kind) => {
                        let msgs = is_dns1035_label(&kind.to_lowercase());
                        if !msgs.is_empty() {
                            errs.push(FieldError::invalid(
                                p,
                                BadValue::Str(kind.to_string()),
                                format!(
                                    "may have mixed case, but should otherwise match: {}",
                                    msgs.join(",")
                                ),
                            ));
                        }
                    }
                }
            }
            "metadata" => {
                let p = child(path, "metadata");
                if let Err(e) = check_object_meta(v) {
                    errs.push(FieldError::invalid(
                        p,
                        BadValue::from_json(v),
                        e.to_string(),
                    ));
                } else if let Value::Object(meta) = v {
                    validate_object_meta(&p, meta, errs);
                }
            }
            _ => {}
        }
    }
}

fn validate_object_meta(path: &str, meta: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    let s = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or("");
    let gen_name = s("generateName");
    if !gen_name.is_empty() {
        for msg in path_segment(gen_name, true) {
            errs.push(FieldError::invalid(
                child(path, "generateName"),
                BadValue::Str(gen_name.to_string()),
                msg,
            ));
        }
    }
    let name = if s("name").is_empty() {
        "fakename"
    } else {
        s("name")
    };
    for msg in path_segment(name, false) {
        errs.push(FieldError::invalid(
            child(path, "name"),
            BadValue::Str(name.to_string()),
            msg,
        ));
    }
    let ns = s("namespace");
    if !ns.is_empty() {
        for msg in is_dns1123_label(ns) {
            errs.push(FieldError::invalid(
                child(path, "namespace"),
                BadValue::Str(ns.to_string()),
                msg,
            ));
        }
    }
    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
        && g < 0
    {
        errs.push(FieldError::invalid(
            child(path, "generation"),
            BadValue::Int(g),
            "must be greater than or equal to 0",
        ));
    }
    if let Some(Value::Object(labels)) = meta.get("labels") {
        let lp = child(path, "labels");
        let mut keys: Vec<&String> = labels.keys().collect();
        keys.sort();
        for k in keys {
            for msg in is_qualified_name(k) {
                errs.push(FieldError::invalid(&lp, BadValue::Str(k.clone()), msg));
            }
            let val = labels[k.as_str()].as_str().unwrap_or("");
            for msg in is_label_value(val) {
                errs.push(FieldError::invalid(
                    &lp,
                    BadValue::Str(val.to_string()),
                    msg,
                ));
            }
        }
    }
    if let Some(Value::Object(ann)) = meta.get("annotations") {
        let ap = child(path, "annotations");
        let mut keys: Vec<&String> = ann.keys().collect();
        keys.sort();
        let mut total = 0usize;
        for k in keys {
            for msg in is_qualified_name(&k.to_lowercase()) {
                errs.push(FieldError::invalid(&ap, BadValue::Str(k.clone()), msg));
            }
            total += k.len() + ann[k.as_str()].as_str().map_or(0, str::len);
        }
        const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
        if total > TOTAL_ANNOTATION_SIZE_LIMIT {
            errs.push(FieldError::too_long(ap, TOTAL_ANNOTATION_SIZE_LIMIT as i64));
        }
    }
}

fn path_segment(name: &str, prefix: bool) -> Vec<String> {
    if !prefix {
        for bad in [".", ".."] {
            if name == bad {
                return vec![format!("may not be '{bad}'")];
            }
        }
    }
    ["/", "%"]
        .iter()
        .filter(|c| name.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let ex: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        ex.join(" or ")
    )
}

macro_rules! re {
    ($name:ident, $pat:expr) => {
        fn $name() -> &'static Regex {
            static R: OnceLock<Regex> = OnceLock::new();
            R.get_or_init(|| Regex::new($pat).expect("static regex"))
        }
    };
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
re!(rx_dns1123_label, r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
re!(
    rx_dns1123_subdomain,
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
);
re!(rx_dns1035_label, r"^[a-z]([-a-z0-9]*[a-z0-9])?$");
re!(rx_label_key, r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$");
re!(
    rx_label_value,
    r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
);

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

pub(crate) fn is_dns1035_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !rx_dns1035_label().is_match(v) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

pub fn is_dns1123_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !rx_dns1123_label().is_match(v) {
        errs.push(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

pub fn is_dns1123_subdomain(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !rx_dns1123_subdomain().is_match(v) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            &format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*"),
            &["example.com"],
        ));
    }
    errs
}

const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// Upstream's `IsQualifiedName`: the problems with `v` as a label key, empty when valid.
pub fn is_qualified_name(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = v.split('/').collect();
    let name = match parts.len() {
        1 => parts[0],
        2 => {
            let prefix = parts[0];
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                for m in is_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {m}"));
                }
            }
            parts[1]
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !rx_label_key().is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Upstream's `IsValidLabelValue`: the problems with `v` as a label value, empty when valid.
pub fn is_label_value(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !rx_label_value().is_match(v) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_meta_errors() {
        assert!(check_object_meta(&Value::Null).is_ok());
        let e = check_object_meta(&json!([])).unwrap_err();
        assert!(matches!(e, ObjectMetaError::NotAnObject { kind: "array" }));
        assert_eq!(
            e.to_string(),
            "json: cannot unmarshal array into Go value of type v1.ObjectMeta"
        );
        let e = check_object_meta(&json!({"creationTimestamp": "yesterday"})).unwrap_err();
        assert!(matches!(e, ObjectMetaError::BadTime { .. }));
        assert_eq!(
            e.to_string(),
            r#"parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse"#
        );
        let e = check_object_meta(&json!({"generation": "1"})).unwrap_err();
        assert!(matches!(
            e,
            ObjectMetaError::FieldType {
                field: "generation",
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "json: cannot unmarshal string into Go struct field ObjectMeta.generation of type int64"
        );
    }
}
