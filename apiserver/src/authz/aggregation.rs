//! ClusterRole aggregation (upstream's clusterrole-aggregation controller): a ClusterRole with
//! an `aggregationRule` gets the union of the rules of every ClusterRole its selectors match,
//! so `admin`, `edit` and `view` grow with CRDs' `aggregate-to-*` roles.

use k1s_api::selector::{LabelSelector, label_selector_text};
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

use crate::rest::{Rest, WriteOptions};
use crate::status::ApiError;

/// The rules an aggregated role should have, given every ClusterRole.
pub fn aggregate(role: &Value, all: &[Value]) -> Option<Vec<Value>> {
    let selectors: Vec<LabelSelector> = role["aggregationRule"]["clusterRoleSelectors"]
        .as_array()?
        .iter()
        .filter_map(|s| label_selector_text(Some(s)).ok())
        .filter_map(|t| LabelSelector::parse(&t).ok())
        .collect();
    let mut sources: Vec<&Value> = all
        .iter()
        .filter(|r| r["metadata"]["name"] != role["metadata"]["name"])
        .filter(|r| selectors.iter().any(|s| s.matches_json(r)))
        .collect();
    sources.sort_by_key(|r| r["metadata"]["name"].as_str().unwrap_or("").to_owned());
    let mut rules: Vec<Value> = Vec::new();
    for r in sources {
        for rule in r["rules"].as_array().into_iter().flatten() {
            if !rules.contains(rule) {
                rules.push(rule.clone());
            }
        }
    }
    Some(rules)
}

/// Brings every aggregated ClusterRole up to date once.
pub async fn sync_all(rest: &Rest) -> Result<(), ApiError> {
    let res = rest
        .registry
        .builtin_kind("rbac.authorization.k8s.io", "ClusterRole")
        .ok_or_else(ApiError::no_route)?;
    let all = rest.list(&res, None, &Default::default()).await?.items;
    let opts = WriteOptions {
        field_manager: Some("clusterrole-aggregation-controller".into()),
        ..Default::default()
    };
    for role in &all {
        let Some(rules) = aggregate(role, &all) else {
            continue;
        };
        if role["rules"].as_array().is_some_and(|r| *r == rules) {
            continue;
        }
        let name = role["metadata"]["name"].as_str().unwrap_or("");
        let result = rest
            .read_modify_write(&res, None, name, None, &opts, |cur| {
                let mut next = cur.clone();
                next["rules"] = Value::Array(rules.clone());
                Ok(next)
            })
            .await;
        match result {
            Ok(_) => tracing::info!(role = name, "aggregated ClusterRole updated"),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Keeps aggregated ClusterRoles current until `cancel`.
pub async fn run(rest: Arc<Rest>, cancel: CancellationToken) {
    let Some(res) = rest
        .registry
        .builtin_kind("rbac.authorization.k8s.io", "ClusterRole")
    else {
        return;
    };
    let store = rest.store.clone();
    crate::mirror::follow(store, res.prefix(), cancel, || async {
        if let Err(e) = sync_all(&rest).await {
            tracing::warn!(error = %e.message, "ClusterRole aggregation failed");
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn union_of_matching_roles() {
        let agg = json!({"metadata": {"name": "view"}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]}});
        let a = json!({"metadata": {"name": "a", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]});
        let b = json!({"metadata": {"name": "b", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
                      {"verbs": ["list"], "apiGroups": ["x"], "resources": ["crons"]}]});
        let c = json!({"metadata": {"name": "c"}, "rules": [{"verbs": ["*"]}]});
        let rules = aggregate(&agg, &[agg.clone(), a, b, c]).unwrap();
        assert_eq!(rules.len(), 2);
        assert!(aggregate(&json!({"metadata": {"name": "x"}}), &[]).is_none());
    }
}
