//! DefaultTolerationSeconds: pods tolerate `node.kubernetes.io/not-ready` and
//! `node.kubernetes.io/unreachable` (NoExecute) for 300 s unless they say otherwise, so a
//! briefly unhealthy node does not evict everything at once.

use serde_json::{Value, json};

const SECONDS: i64 = 300;
const KEYS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// Adds the default tolerations a pod lacks.
pub fn admit(pod: &mut Value) {
    let spec = &mut pod["spec"];
    if !spec.is_object() {
        return;
    }
    let existing = spec["tolerations"].as_array().cloned().unwrap_or_default();
    let tolerates = |key: &str| {
        existing.iter().any(|t| {
            let effect = t["effect"].as_str().unwrap_or("");
            let k = t["key"].as_str().unwrap_or("");
            (effect.is_empty() || effect == "NoExecute")
                && (k == key || (k.is_empty() && t["operator"] == "Exists"))
        })
    };
    let mut add = Vec::new();
    for key in KEYS {
        if !tolerates(key) {
            add.push(json!({
                "key": key, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": SECONDS,
            }));
        }
    }
    if add.is_empty() {
        return;
    }
    match spec["tolerations"].as_array_mut() {
        Some(t) => t.extend(add),
        None => spec["tolerations"] = Value::Array(add),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_what_is_missing() {
        let mut p = json!({"spec": {}});
        admit(&mut p);
        assert_eq!(p["spec"]["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(p["spec"]["tolerations"][0]["tolerationSeconds"], 300);
        let mut p = json!({"spec": {"tolerations": [
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}]}});
        admit(&mut p);
        let t = p["spec"]["tolerations"].as_array().unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0]["tolerationSeconds"], 10);
        let mut p = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        admit(&mut p);
        assert_eq!(p["spec"]["tolerations"].as_array().unwrap().len(), 1);
    }
}
