//! Secrets and ConfigMaps: `stringData` folded into `data` (upstream does it when it
//! decodes a v1 Secret, so `stringData` is never stored or returned), and the validation of
//! upstream's `ValidateSecret`/`ValidateConfigMap` with their field paths and messages: key
//! syntax, the 1 MiB size limit, the keys each Secret type requires, and `immutable`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

type Causes = Vec<(String, String)>;

/// The most bytes a Secret's or ConfigMap's values may hold together.
pub const MAX_SIZE: usize = 1024 * 1024;

/// Folds `stringData` into `data` (a key in both takes the `stringData` value) and drops it.
/// Decoding has already checked that its values are strings.
pub fn fold_string_data(secret: &mut Value) {
    let Some(Value::Object(strings)) = secret.as_object_mut().and_then(|m| m.remove("stringData"))
    else {
        return;
    };
    if strings.is_empty() {
        return;
    }
    if !secret["data"].is_object() {
        secret["data"] = json!({});
    }
    let data = &mut secret["data"];
    for (k, v) in strings {
        data[k] = json!(STANDARD.encode(v.as_str().unwrap_or_default()));
    }
}

/// Upstream's `IsConfigMapKey`: the problems with `key` as a data key, empty when it is valid.
pub fn config_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > 253 {
        errs.push("must be no more than 253 characters".to_owned());
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        errs.push(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' \
             (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is \
             '[-._a-zA-Z0-9]+')"
                .to_owned(),
        );
    }
    match key {
        "." => errs.push("must not be '.'".to_owned()),
        ".." => errs.push("must not be '..'".to_owned()),
        k if k.starts_with("..") => errs.push("must not start with '..'".to_owned()),
        _ => {}
    }
    errs
}

fn check_keys(field: &str, map: &Map<String, Value>, out: &mut Causes) {
    for key in map.keys() {
        for e in config_key_errors(key) {
            out.push((
                format!("{field}[{key}]"),
                format!("Invalid value: {}: {e}", Value::from(key.as_str())),
            ));
        }
    }
}

fn too_long(field: &str, out: &mut Causes) {
    out.push((
        field.to_owned(),
        format!("Too long: may not be more than {MAX_SIZE} bytes"),
    ));
}

/// The decoded bytes of a base64 `data` value (typing has checked the encoding).
fn decoded(v: &Value) -> Vec<u8> {
    STANDARD
        .decode(v.as_str().unwrap_or_default())
        .unwrap_or_default()
}

fn object(v: &Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// `immutable: true` freezes the listed fields and itself.
fn check_immutable(obj: &Value, old: Option<&Value>, fields: &[&str], out: &mut Causes) {
    let Some(old) = old else { return };
    if old["immutable"] != true {
        return;
    }
    const FROZEN: &str = "Forbidden: field is immutable when `immutable` is set";
    if obj["immutable"] != true {
        out.push(("immutable".into(), FROZEN.into()));
    }
    for f in fields {
        if object(&old[*f]) != object(&obj[*f]) {
            out.push(((*f).into(), FROZEN.into()));
        }
    }
}

/// Upstream's `ValidateSecret` and, with `old`, `ValidateSecretUpdate`.
pub fn secret(obj: &Value, old: Option<&Value>, out: &mut Causes) {
    let data = object(&obj["data"]);
    check_keys("data", &data, out);
    let size: usize = data.values().map(|v| decoded(v).len()).sum();
    if size > MAX_SIZE {
        too_long("data", out);
    }
    let ty = obj["type"].as_str().unwrap_or("Opaque");
    let require = |key: &str, out: &mut Causes| {
        if !data.contains_key(key) {
            out.push((format!("data[{key}]"), "Required value".into()));
            return false;
        }
        true
    };
    let require_json = |key: &str, out: &mut Causes| {
        if require(key, out)
            && let Err(e) = serde_json::from_slice::<Value>(&decoded(&data[key]))
        {
            out.push((
                format!("data[{key}]"),
                format!("Invalid value: \"<secret contents redacted>\": {e}"),
            ));
        }
    };
    match ty {
        "kubernetes.io/service-account-token" => {
            const NAME: &str = "kubernetes.io/service-account.name";
            if obj["metadata"]["annotations"][NAME]
                .as_str()
                .is_none_or(str::is_empty)
            {
                out.push((
                    format!("metadata.annotations[{NAME}]"),
                    "Required value".into(),
                ));
            }
        }
        "kubernetes.io/dockercfg" => require_json(".dockercfg", out),
        "kubernetes.io/dockerconfigjson" => require_json(".dockerconfigjson", out),
        // Either may be empty, but one of them must be there.
        "kubernetes.io/basic-auth"
            if !data.contains_key("username") && !data.contains_key("password") =>
        {
            require("username", out);
            require("password", out);
        }
        "kubernetes.io/ssh-auth" => {
            require("ssh-privatekey", out);
        }
        "kubernetes.io/tls" => {
            require("tls.crt", out);
            require("tls.key", out);
        }
        _ => {}
    }
    if let Some(old) = old {
        if old["type"] != obj["type"] {
            out.push((
                "type".into(),
                format!("Invalid value: {}: field is immutable", obj["type"]),
            ));
        }
        check_immutable(obj, Some(old), &["data"], out);
    }
}

/// Upstream's `ValidateConfigMap` and, with `old`, `ValidateConfigMapUpdate`.
pub fn config_map(obj: &Value, old: Option<&Value>, out: &mut Causes) {
    let data = object(&obj["data"]);
    let binary = object(&obj["binaryData"]);
    check_keys("data", &data, out);
    check_keys("binaryData", &binary, out);
    for key in data.keys().filter(|k| binary.contains_key(*k)) {
        out.push((
            format!("data[{key}]"),
            format!(
                "Invalid value: {}: duplicate of key present in binaryData",
                Value::from(key.as_str())
            ),
        ));
    }
    let size: usize = data
        .values()
        .map(|v| v.as_str().map_or(0, str::len))
        .chain(binary.values().map(|v| decoded(v).len()))
        .sum();
    if size > MAX_SIZE {
        too_long("data", out);
    }
    check_immutable(obj, old, &["data", "binaryData"], out);
}

/// Secrets: `type` defaults to Opaque, `stringData` folds into `data`.
pub struct Secret;

impl crate::registry::strategy::Strategy for Secret {
    fn defaults(&self, obj: &mut Value) {
        crate::registry::strategy::set_default(obj, "type", json!("Opaque"));
        fold_string_data(obj);
    }

    fn validate(&self, obj: &Value, old: Option<&Value>, causes: &mut Causes) {
        secret(obj, old, causes);
    }
}

pub struct ConfigMap;

impl crate::registry::strategy::Strategy for ConfigMap {
    fn validate(&self, obj: &Value, old: Option<&Value>, causes: &mut Causes) {
        config_map(obj, old, causes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> Value {
        json!(STANDARD.encode(s))
    }

    fn paths(out: &Causes) -> Vec<&str> {
        out.iter().map(|(p, _)| p.as_str()).collect()
    }

    #[test]
    fn string_data_is_folded_over_data() {
        let mut s = json!({"data": {"a": b64("old"), "b": b64("kept")},
                           "stringData": {"a": "new", "c": "plain"}});
        fold_string_data(&mut s);
        assert_eq!(
            s,
            json!({"data": {"a": b64("new"), "b": b64("kept"), "c": b64("plain")}})
        );
        let mut only = json!({"stringData": {"x": "y"}});
        fold_string_data(&mut only);
        assert_eq!(only, json!({"data": {"x": b64("y")}}));
        let mut none = json!({"data": {}});
        fold_string_data(&mut none);
        assert_eq!(none, json!({"data": {}}));
    }

    #[test]
    fn config_keys() {
        for good in [
            "a", "key.name", "KEY_NAME", "key-name", ".dotfile", "tls.crt",
        ] {
            assert!(config_key_errors(good).is_empty(), "{good}");
        }
        for bad in ["", "a b", "a/b", ".", "..", "..x", &"k".repeat(254)] {
            assert!(!config_key_errors(bad).is_empty(), "{bad:?}");
        }
    }

    #[test]
    fn secret_types_require_their_keys() {
        let mut out = Vec::new();
        secret(
            &json!({"type": "kubernetes.io/tls", "data": {}}),
            None,
            &mut out,
        );
        assert_eq!(paths(&out), ["data[tls.crt]", "data[tls.key]"]);

        let mut out = Vec::new();
        let cfg = json!({"type": "kubernetes.io/dockerconfigjson",
                         "data": {".dockerconfigjson": b64("{not json")}});
        secret(&cfg, None, &mut out);
        assert_eq!(paths(&out), ["data[.dockerconfigjson]"]);
        assert!(out[0].1.contains("<secret contents redacted>"));

        let mut out = Vec::new();
        secret(
            &json!({"type": "kubernetes.io/basic-auth", "data": {"password": b64("")}}),
            None,
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");

        let mut out = Vec::new();
        secret(
            &json!({"type": "kubernetes.io/service-account-token", "metadata": {}}),
            None,
            &mut out,
        );
        assert_eq!(
            paths(&out),
            ["metadata.annotations[kubernetes.io/service-account.name]"]
        );
    }

    #[test]
    fn secret_keys_size_and_updates() {
        let mut out = Vec::new();
        let big = STANDARD.encode(vec![0u8; MAX_SIZE + 1]);
        secret(
            &json!({"type": "Opaque", "data": {"bad key": b64("x"), "big": big}}),
            None,
            &mut out,
        );
        assert_eq!(paths(&out), ["data[bad key]", "data"]);

        let old = json!({"type": "Opaque", "immutable": true, "data": {"a": b64("1")}});
        let mut out = Vec::new();
        secret(&old, Some(&old), &mut out);
        assert!(out.is_empty(), "{out:?}");
        let changed = json!({"type": "kubernetes.io/tls", "data": {"a": b64("2")}});
        let mut out = Vec::new();
        secret(&changed, Some(&old), &mut out);
        assert_eq!(
            paths(&out),
            [
                "data[tls.crt]",
                "data[tls.key]",
                "type",
                "immutable",
                "data"
            ]
        );
    }

    #[test]
    fn config_maps() {
        let mut out = Vec::new();
        config_map(
            &json!({"data": {"a": "1", "ok": "2"}, "binaryData": {"a": b64("x"), "b/c": b64("y")}}),
            None,
            &mut out,
        );
        assert_eq!(paths(&out), ["binaryData[b/c]", "data[a]"]);
        let old = json!({"immutable": true, "data": {"a": "1"}});
        let mut out = Vec::new();
        config_map(
            &json!({"immutable": true, "data": {"a": "2"}}),
            Some(&old),
            &mut out,
        );
        assert_eq!(paths(&out), ["data"]);
        let mut out = Vec::new();
        config_map(
            &json!({"data": {"big": "x".repeat(MAX_SIZE + 1)}}),
            None,
            &mut out,
        );
        assert_eq!(paths(&out), ["data"]);
    }
}
