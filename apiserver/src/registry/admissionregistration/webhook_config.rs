//! `MutatingWebhookConfiguration` and `ValidatingWebhookConfiguration`
//! (`admissionregistration.k8s.io/v1`): upstream's v1 defaults and the checks of its
//! `ValidateMutatingWebhookConfiguration`/`ValidateValidatingWebhookConfiguration` that keep
//! a configuration callable — names, client config, rules, policies, review versions and
//! side effects — with its field paths. What the webhooks do is [`crate::admission::webhook`].

use serde_json::{Value, json};

use k1s_apimachinery::crd_schema::is_dns1123_subdomain;

type Causes = Vec<(String, String)>;

fn set_default(obj: &mut Value, key: &str, value: Value) {
    if obj.get(key).is_none_or(Value::is_null) {
        obj[key] = value;
    }
}

/// The v1 defaults of every webhook of the configuration.
pub fn apply_defaults(obj: &mut Value, mutating: bool) {
    let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for h in hooks.iter_mut().filter(|h| h.is_object()) {
        set_default(h, "failurePolicy", json!("Fail"));
        set_default(h, "matchPolicy", json!("Equivalent"));
        set_default(h, "namespaceSelector", json!({}));
        set_default(h, "objectSelector", json!({}));
        set_default(h, "timeoutSeconds", json!(10));
        if mutating {
            set_default(h, "reinvocationPolicy", json!("Never"));
        }
        if let Some(svc) = h["clientConfig"]
            .get_mut("service")
            .filter(|s| s.is_object())
        {
            set_default(svc, "port", json!(443));
        }
        if let Some(rules) = h.get_mut("rules").and_then(Value::as_array_mut) {
            for r in rules.iter_mut().filter(|r| r.is_object()) {
                set_default(r, "scope", json!("*"));
            }
        }
    }
}

fn quoted(v: &Value) -> String {
    match v {
        Value::Null => "\"\"".into(),
        other => other.to_string(),
    }
}

fn one_of(out: &mut Causes, at: String, v: &Value, allowed: &[&str]) {
    match v.as_str() {
        None if v.is_null() => out.push((at, "Required value".into())),
        Some(s) if allowed.contains(&s) => {}
        _ => out.push((
            at,
            format!(
                "Unsupported value: {}: supported values: {}",
                quoted(v),
                allowed
                    .iter()
                    .map(|a| format!("\"{a}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// A webhook's name: a DNS subdomain of at least three segments (`name.example.com`).
fn webhook_name(at: &str, name: &Value, out: &mut Causes) {
    let Some(n) = name.as_str().filter(|n| !n.is_empty()) else {
        out.push((at.into(), "Required value".into()));
        return;
    };
    for msg in is_dns1123_subdomain(n) {
        out.push((at.into(), format!("Invalid value: {}: {msg}", quoted(name))));
    }
    if n.split('.').count() < 3 {
        out.push((
            at.into(),
            format!(
                "Invalid value: {}: should be a domain with at least three segments separated by dots",
                quoted(name)
            ),
        ));
    }
}

fn client_config(at: &str, cc: &Value, out: &mut Causes) {
    let url = cc["url"].as_str();
    let service = cc.get("service").filter(|s| !s.is_null());
    match (url, service) {
        (Some(_), Some(_)) => out.push((
            at.into(),
            "Required value: exactly one of url or service is required".into(),
        )),
        (None, None) => out.push((
            at.into(),
            "Required value: exactly one of url or service is required".into(),
        )),
        (Some(u), None) => {
            let uat = format!("{at}.url");
            match u.parse::<http::Uri>() {
                Ok(uri) if uri.scheme_str() == Some("https") && uri.host().is_some() => {
                    if u.contains('#') {
                        out.push((
                            uat,
                            "Invalid value: \"#...\": fragments are not permitted".into(),
                        ));
                    } else if uri.query().is_some() {
                        out.push((
                            uat,
                            "Invalid value: \"?...\": query parameters are not allowed".into(),
                        ));
                    }
                }
                Ok(uri) if uri.scheme_str() != Some("https") => out.push((
                    uat,
                    format!(
                        "Invalid value: {}: 'https' is the only allowed URL scheme",
                        quoted(&json!(uri.scheme_str().unwrap_or("")))
                    ),
                )),
                _ => out.push((uat, "Invalid value: host must be specified".into())),
            }
        }
        (None, Some(s)) => {
            let sat = format!("{at}.service");
            if s["name"].as_str().is_none_or(str::is_empty) {
                out.push((
                    format!("{sat}.name"),
                    "Required value: service name is required".into(),
                ));
            }
            if s["namespace"].as_str().is_none_or(str::is_empty) {
                out.push((
                    format!("{sat}.namespace"),
                    "Required value: service namespace is required".into(),
                ));
            }
            if let Some(p) = s["path"].as_str()
                && !p.is_empty()
                && !p.starts_with('/')
            {
                out.push((
                    format!("{sat}.path"),
                    format!(
                        "Invalid value: {}: must start with a '/'",
                        quoted(&s["path"])
                    ),
                ));
            }
            if let Some(port) = s["port"].as_i64()
                && !(1..=65535).contains(&port)
            {
                out.push((
                    format!("{sat}.port"),
                    format!("Invalid value: {port}: port is not valid: must be between 1 and 65535, inclusive"),
                ));
            }
        }
    }
}

fn rule(at: &str, r: &Value, out: &mut Causes) {
    for (key, what) in [
        ("operations", "operations"),
        ("apiGroups", "apiGroups"),
        ("apiVersions", "apiVersions"),
        ("resources", "resources"),
    ] {
        if r[key].as_array().is_none_or(Vec::is_empty) {
            out.push((format!("{at}.{what}"), "Required value".into()));
        }
    }
    for (i, op) in r["operations"].as_array().into_iter().flatten().enumerate() {
        one_of(
            out,
            format!("{at}.operations[{i}]"),
            op,
            &["*", "CREATE", "UPDATE", "DELETE", "CONNECT"],
        );
    }
    for (i, v) in r["apiVersions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if v.as_str().is_none_or(str::is_empty) {
            out.push((format!("{at}.apiVersions[{i}]"), "Required value".into()));
        }
    }
    for (i, res) in r["resources"].as_array().into_iter().flatten().enumerate() {
        let text = res.as_str().unwrap_or("");
        if text.is_empty() {
            out.push((format!("{at}.resources[{i}]"), "Required value".into()));
        } else if text.split('/').count() > 2 {
            out.push((
                format!("{at}.resources[{i}]"),
                format!(
                    "Invalid value: {}: a resource is 'resource' or 'resource/subresource'",
                    quoted(res)
                ),
            ));
        }
    }
    if !r["scope"].is_null() {
        one_of(
            out,
            format!("{at}.scope"),
            &r["scope"],
            &["*", "Cluster", "Namespaced"],
        );
    }
}

/// The configuration's webhooks (names unique, each callable and well-formed).
pub fn validate(obj: &Value, mutating: bool, out: &mut Causes) {
    let hooks = obj["webhooks"].as_array().cloned().unwrap_or_default();
    let mut seen = std::collections::BTreeSet::new();
    for (i, h) in hooks.iter().enumerate() {
        let at = format!("webhooks[{i}]");
        webhook_name(&format!("{at}.name"), &h["name"], out);
        if let Some(n) = h["name"].as_str()
            && !seen.insert(n.to_owned())
        {
            out.push((
                format!("{at}.name"),
                format!("Duplicate value: {}", quoted(&h["name"])),
            ));
        }
        client_config(&format!("{at}.clientConfig"), &h["clientConfig"], out);
        for (j, r) in h["rules"].as_array().into_iter().flatten().enumerate() {
            rule(&format!("{at}.rules[{j}]"), r, out);
        }
        one_of(
            out,
            format!("{at}.failurePolicy"),
            &h["failurePolicy"],
            &["Fail", "Ignore"],
        );
        one_of(
            out,
            format!("{at}.matchPolicy"),
            &h["matchPolicy"],
            &["Equivalent", "Exact"],
        );
        one_of(
            out,
            format!("{at}.sideEffects"),
            &h["sideEffects"],
            &["None", "NoneOnDryRun"],
        );
        if mutating {
            one_of(
                out,
                format!("{at}.reinvocationPolicy"),
                &h["reinvocationPolicy"],
                &["IfNeeded", "Never"],
            );
        }
        if let Some(t) = h["timeoutSeconds"].as_i64()
            && !(1..=30).contains(&t)
        {
            out.push((
                format!("{at}.timeoutSeconds"),
                format!("Invalid value: {t}: the timeout value must be between 1 and 30 seconds"),
            ));
        }
        let versions: Vec<&str> = h["admissionReviewVersions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if versions.is_empty() {
            out.push((
                format!("{at}.admissionReviewVersions"),
                "Required value: must specify one of v1, v1beta1".into(),
            ));
        } else if !versions.iter().any(|v| matches!(*v, "v1" | "v1beta1")) {
            out.push((
                format!("{at}.admissionReviewVersions"),
                format!(
                    "Invalid value: {}: must include at least one of v1, v1beta1",
                    json!(versions)
                ),
            ));
        }
        for key in ["namespaceSelector", "objectSelector"] {
            if !h[key].is_null() && k1s_api::selector::label_selector_text(Some(&h[key])).is_err() {
                out.push((format!("{at}.{key}"), format!("Invalid value: {}", h[key])));
            }
        }
    }
}

/// Mutating or validating webhook configurations.
pub struct WebhookConfiguration {
    mutating: bool,
}

pub static MUTATING: WebhookConfiguration = WebhookConfiguration { mutating: true };
pub static VALIDATING: WebhookConfiguration = WebhookConfiguration { mutating: false };

impl crate::registry::strategy::Strategy for WebhookConfiguration {
    fn defaults(&self, obj: &mut Value) {
        apply_defaults(obj, self.mutating);
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>, causes: &mut Causes) {
        validate(obj, self.mutating, causes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook() -> Value {
        json!({"name": "deny.example.com", "sideEffects": "None",
               "admissionReviewVersions": ["v1"],
               "clientConfig": {"service": {"namespace": "ns", "name": "hook", "path": "/v"}},
               "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                          "resources": ["pods"]}]})
    }

    #[test]
    fn defaults_then_a_valid_configuration() {
        let mut c = json!({"webhooks": [hook()]});
        apply_defaults(&mut c, true);
        let h = &c["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["reinvocationPolicy"], "Never");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["namespaceSelector"], json!({}));
        let mut out = Vec::new();
        validate(&c, true, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn what_upstream_refuses() {
        let mut bad = hook();
        bad["name"] = json!("deny");
        bad["sideEffects"] = json!("Unknown");
        bad["admissionReviewVersions"] = json!([]);
        bad["timeoutSeconds"] = json!(31);
        bad["clientConfig"] = json!({"url": "http://x.example.com/"});
        bad["rules"][0]["operations"] = json!(["PATCH"]);
        let mut c = json!({"webhooks": [bad, hook(), hook()]});
        apply_defaults(&mut c, false);
        let mut out = Vec::new();
        validate(&c, false, &mut out);
        let fields: Vec<&str> = out.iter().map(|(f, _)| f.as_str()).collect();
        for want in [
            "webhooks[0].name",
            "webhooks[0].sideEffects",
            "webhooks[0].admissionReviewVersions",
            "webhooks[0].timeoutSeconds",
            "webhooks[0].clientConfig.url",
            "webhooks[0].rules[0].operations[0]",
            "webhooks[2].name",
        ] {
            assert!(fields.contains(&want), "{want} missing in {out:?}");
        }
        let mut both = hook();
        both["clientConfig"]["url"] = json!("https://x.example.com/");
        let mut out = Vec::new();
        validate(&json!({"webhooks": [both]}), false, &mut out);
        assert_eq!(out[0].0, "webhooks[0].clientConfig");
    }
}
