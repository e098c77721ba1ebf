//! Which webhooks a request goes to: the `rules` of a webhook (operations, API groups,
//! versions, resources with their subresources, scope), its `namespaceSelector` and
//! `objectSelector`, as upstream's webhook admission matches them. Pure functions over the
//! webhook's JSON and what the request is.

use k1s_api::selector::{LabelSelector, label_selector_text};
use serde_json::Value;

/// What a request is, as the rules see it.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: &'a str,
    pub group: &'a str,
    pub version: &'a str,
    /// The plural, e.g. `pods`.
    pub resource: &'a str,
    /// `""` for the object itself.
    pub subresource: &'a str,
    /// `""` for cluster-scoped resources.
    pub namespace: &'a str,
}

fn has(list: &Value, want: &str) -> bool {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|v| v == "*" || v == want)
}

/// Whether `resources` (`pods`, `pods/status`, `*`, `*/status`, `pods/*`, `*/*`) names the
/// resource and subresource.
fn resource_listed(resources: &Value, resource: &str, subresource: &str) -> bool {
    resources
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|r| match r.split_once('/') {
            Some((res, sub)) => {
                (res == "*" || res == resource) && (sub == "*" || sub == subresource)
            }
            None => subresource.is_empty() && (r == "*" || r == resource),
        })
}

/// Whether one rule (`operations`, `apiGroups`, `apiVersions`, `resources`, `scope`) covers the
/// request.
pub fn rule_matches(rule: &Value, t: &Target<'_>) -> bool {
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => t.namespace.is_empty(),
        "Namespaced" => !t.namespace.is_empty(),
        _ => true,
    };
    scope_ok
        && has(&rule["operations"], t.operation)
        && has(&rule["apiGroups"], t.group)
        && has(&rule["apiVersions"], t.version)
        && resource_listed(&rule["resources"], t.resource, t.subresource)
}

/// Whether any rule of `webhook` covers the request.
pub fn rules_match(webhook: &Value, t: &Target<'_>) -> bool {
    webhook["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| rule_matches(r, t))
}

/// A `metav1.LabelSelector` object parsed; `None` when it does not parse (the configuration's
/// validation refuses those, so this only guards against stored garbage).
pub fn selector(sel: &Value) -> Option<LabelSelector> {
    let text = label_selector_text(Some(sel)).ok()?;
    LabelSelector::parse(&text).ok()
}

/// `objectSelector`: the new object's labels or the old one's (a delete has only the old).
pub fn object_selected(webhook: &Value, obj: Option<&Value>, old: Option<&Value>) -> bool {
    let sel = &webhook["objectSelector"];
    if sel.is_null() {
        return true;
    }
    let Some(sel) = selector(sel) else {
        return false;
    };
    if sel.is_empty() {
        return true;
    }
    [obj, old]
        .into_iter()
        .flatten()
        .any(|o| sel.matches_json(o))
}

/// `namespaceSelector` over the labels of the request's namespace (or of the Namespace
/// object itself). `labels` is `None` for cluster-scoped objects other than Namespaces, which
/// every namespace selector lets through, as upstream.
pub fn namespace_selected(webhook: &Value, namespace: Option<&Value>) -> bool {
    let sel = &webhook["namespaceSelector"];
    if sel.is_null() {
        return true;
    }
    let Some(sel) = selector(sel) else {
        return false;
    };
    match namespace {
        None => true,
        Some(ns) => sel.is_empty() || sel.matches_json(ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target<'a>(op: &'a str, resource: &'a str, sub: &'a str, ns: &'a str) -> Target<'a> {
        Target {
            operation: op,
            group: "",
            version: "v1",
            resource,
            subresource: sub,
            namespace: ns,
        }
    }

    #[test]
    fn rules_by_operation_resource_subresource_and_scope() {
        let rule = json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                          "resources": ["pods"], "scope": "*"});
        assert!(rule_matches(&rule, &target("CREATE", "pods", "", "ns")));
        assert!(!rule_matches(&rule, &target("UPDATE", "pods", "", "ns")));
        assert!(!rule_matches(
            &rule,
            &target("CREATE", "pods", "status", "ns")
        ));
        assert!(!rule_matches(
            &rule,
            &target("CREATE", "configmaps", "", "ns")
        ));
        let mut apps = target("CREATE", "pods", "", "ns");
        apps.group = "apps";
        assert!(!rule_matches(&rule, &apps));

        let subs = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                          "resources": ["pods/attach", "*/status"]});
        assert!(rule_matches(
            &subs,
            &target("CONNECT", "pods", "attach", "ns")
        ));
        assert!(rule_matches(
            &subs,
            &target("UPDATE", "deployments", "status", "ns")
        ));
        assert!(!rule_matches(&subs, &target("CREATE", "pods", "", "ns")));
        let all = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                         "resources": ["*/*"]});
        assert!(rule_matches(&all, &target("DELETE", "pods", "", "ns")));
        assert!(rule_matches(
            &all,
            &target("CREATE", "pods", "binding", "ns")
        ));
        let star = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                          "resources": ["*"]});
        assert!(rule_matches(&star, &target("CREATE", "pods", "", "ns")));
        assert!(!rule_matches(
            &star,
            &target("CREATE", "pods", "status", "ns")
        ));

        let cluster = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                             "resources": ["*"], "scope": "Cluster"});
        assert!(rule_matches(
            &cluster,
            &target("CREATE", "namespaces", "", "")
        ));
        assert!(!rule_matches(&cluster, &target("CREATE", "pods", "", "ns")));
        let namespaced = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                                "resources": ["*"], "scope": "Namespaced"});
        assert!(!rule_matches(
            &namespaced,
            &target("CREATE", "namespaces", "", "")
        ));
        assert!(rules_match(
            &json!({"rules": [rule, namespaced]}),
            &target("UPDATE", "pods", "", "ns")
        ));
        assert!(!rules_match(
            &json!({}),
            &target("UPDATE", "pods", "", "ns")
        ));
    }

    #[test]
    fn selectors_on_objects_and_namespaces() {
        let hook = json!({
            "objectSelector": {"matchLabels": {"webhook": "yes"}},
            "namespaceSelector": {"matchExpressions": [
                {"key": "skip-webhooks", "operator": "DoesNotExist"}]},
        });
        let labelled = json!({"metadata": {"labels": {"webhook": "yes"}}});
        let plain = json!({"metadata": {}});
        assert!(object_selected(&hook, Some(&labelled), None));
        assert!(!object_selected(&hook, Some(&plain), None));
        // An update that removes the label is still seen (the old object matches).
        assert!(object_selected(&hook, Some(&plain), Some(&labelled)));
        assert!(object_selected(
            &json!({"objectSelector": {}}),
            Some(&plain),
            None
        ));

        let skipped = json!({"metadata": {"labels": {"skip-webhooks": "1"}}});
        assert!(namespace_selected(&hook, Some(&plain)));
        assert!(!namespace_selected(&hook, Some(&skipped)));
        // Cluster-scoped objects other than namespaces pass any namespace selector.
        assert!(namespace_selected(&hook, None));
        assert!(namespace_selected(&json!({}), Some(&skipped)));
    }
}
