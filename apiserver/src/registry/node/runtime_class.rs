//! RuntimeClasses (`node.k8s.io/v1`): upstream's `ValidateRuntimeClass` and
//! `ValidateRuntimeClassUpdate` with their field paths and messages. The name is checked by
//! the generic write path (a DNS-1123 subdomain, as for most kinds); which runtime a handler
//! names is the kubelet's business, not the API's.

use serde_json::Value;

use crate::rest::validation;
use k1s_apimachinery::crd_schema::{is_dns1123_label, is_label_value, is_qualified_name};

type Causes = Vec<(String, String)>;

fn quoted(v: &str) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The handler (a DNS-1123 label, fixed once created), the pod overhead's quantities, and the
/// scheduling constraints (node selector labels, tolerations, no toleration twice).
pub fn validate(rc: &Value, old: Option<&Value>, out: &mut Causes) {
    let handler = rc["handler"].as_str().unwrap_or("");
    if handler.is_empty() {
        out.push(("handler".into(), "Required value".into()));
    } else {
        for msg in is_dns1123_label(handler) {
            out.push((
                "handler".into(),
                format!("Invalid value: {}: {msg}", quoted(handler)),
            ));
        }
    }
    if let Some(old) = old
        && old["handler"] != rc["handler"]
    {
        out.push((
            "handler".into(),
            format!("Invalid value: {}: field is immutable", quoted(handler)),
        ));
    }
    for (name, q) in rc["overhead"]["podFixed"].as_object().into_iter().flatten() {
        let at = format!("overhead.podFixed[{name}]");
        for msg in is_qualified_name(name) {
            out.push((
                at.clone(),
                format!("Invalid value: {}: {msg}", quoted(name)),
            ));
        }
        let text = q
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| q.to_string());
        match validation::parse_quantity(&text) {
            None => out.push((
                at,
                format!(
                    "Invalid value: {}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                    quoted(&text)
                ),
            )),
            Some(v) if v.sign() < 0 => out.push((
                at,
                format!(
                    "Invalid value: {}: must be greater than or equal to 0",
                    quoted(&text)
                ),
            )),
            Some(_) => {}
        }
    }
    let scheduling = &rc["scheduling"];
    for (k, v) in scheduling["nodeSelector"].as_object().into_iter().flatten() {
        for msg in is_qualified_name(k) {
            out.push((
                "scheduling.nodeSelector".into(),
                format!("Invalid value: {}: {msg}", quoted(k)),
            ));
        }
        let v = v.as_str().unwrap_or("");
        for msg in is_label_value(v) {
            out.push((
                "scheduling.nodeSelector".into(),
                format!("Invalid value: {}: {msg}", quoted(v)),
            ));
        }
    }
    let tolerations = &scheduling["tolerations"];
    validation::tolerations("scheduling.tolerations", tolerations, out);
    let list = tolerations.as_array().map_or(&[][..], Vec::as_slice);
    let identity = |t: &Value| {
        ["key", "operator", "value", "effect"].map(|f| t[f].as_str().unwrap_or("").to_owned())
    };
    for (i, t) in list.iter().enumerate() {
        if list[..i].iter().any(|p| identity(p) == identity(t)) {
            out.push((
                format!("scheduling.tolerations[{i}]"),
                format!(
                    "Duplicate value: {}",
                    serde_json::to_string(t).unwrap_or_default()
                ),
            ));
        }
    }
}

pub struct RuntimeClass;

impl crate::registry::strategy::Strategy for RuntimeClass {
    fn validate(&self, obj: &Value, old: Option<&Value>, causes: &mut Causes) {
        validate(obj, old, causes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(rc: &Value, old: Option<&Value>) -> Vec<String> {
        let mut out = Vec::new();
        validate(rc, old, &mut out);
        out.into_iter().map(|(f, m)| format!("{f}: {m}")).collect()
    }

    #[test]
    fn upstream_rules() {
        let ok = json!({"metadata": {"name": "gvisor"}, "handler": "runsc",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}},
            "scheduling": {"nodeSelector": {"runtime": "gvisor"},
                "tolerations": [{"key": "runtime", "operator": "Equal", "value": "gvisor", "effect": "NoSchedule"}]}});
        assert!(fields(&ok, None).is_empty(), "{:?}", fields(&ok, None));
        let table: &[(&str, Value, &str)] = &[
            ("/handler", json!(""), "handler: Required value"),
            (
                "/handler",
                json!("Run_SC"),
                "handler: Invalid value: \"Run_SC\": a lowercase RFC 1123 label",
            ),
            (
                "/overhead/podFixed/cpu",
                json!("-1"),
                "overhead.podFixed[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
            ),
            (
                "/overhead/podFixed/cpu",
                json!("lots"),
                "quantities must match",
            ),
            (
                "/scheduling/nodeSelector/runtime",
                json!("a b"),
                "scheduling.nodeSelector: Invalid value: \"a b\"",
            ),
            (
                "/scheduling/tolerations/0/operator",
                json!("Maybe"),
                "scheduling.tolerations[0].operator: Unsupported value: \"Maybe\"",
            ),
            (
                "/scheduling/tolerations/0/effect",
                json!("Sometimes"),
                "scheduling.tolerations[0].effect: Unsupported value",
            ),
            (
                "/scheduling/tolerations/0/key",
                json!(""),
                "operator must be Exists when `key` is empty",
            ),
        ];
        for (ptr, value, want) in table {
            let mut rc = ok.clone();
            *rc.pointer_mut(ptr).unwrap() = value.clone();
            let got = fields(&rc, None);
            assert!(
                got.iter().any(|m| m.contains(want)),
                "{ptr}={value}: {got:?}"
            );
        }
        let mut twice = ok.clone();
        let t = twice["scheduling"]["tolerations"][0].clone();
        twice["scheduling"]["tolerations"] = json!([t.clone(), t]);
        assert!(fields(&twice, None)[0].starts_with("scheduling.tolerations[1]: Duplicate value"));
        let mut changed = ok.clone();
        changed["handler"] = json!("kata");
        assert_eq!(
            fields(&changed, Some(&ok)),
            ["handler: Invalid value: \"kata\": field is immutable"]
        );
    }
}
