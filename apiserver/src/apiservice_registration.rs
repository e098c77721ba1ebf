//! Local APIServices, as kube-apiserver's autoregistration keeps them: one per group version
//! this server serves itself (`spec.service` unset), so `kubectl get apiservices` lists every
//! API as upstream's does, with upstream's priorities for the built-in groups and 1000/100 for
//! CRD groups. Those it made carry `kube-aggregator.kubernetes.io/automanaged` (`onstart` for
//! built-in groups, `true` for CRD groups) and go when their group version is no longer served.

use serde_json::{Value, json};

use crate::rest::{Rest, WriteOptions, meta};

const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// Upstream's (group, groupPriorityMinimum) of the built-in groups, with the versionPriority
/// of their GA versions (15; the core group's v1 is 1).
const BUILT_IN: &[(&str, i64)] = &[
    ("", 18000),
    ("apps", 17800),
    ("events.k8s.io", 17750),
    ("authentication.k8s.io", 17700),
    ("authorization.k8s.io", 17600),
    ("autoscaling", 17500),
    ("batch", 17400),
    ("certificates.k8s.io", 17300),
    ("networking.k8s.io", 17200),
    ("policy", 17100),
    ("rbac.authorization.k8s.io", 17000),
    ("storage.k8s.io", 16800),
    ("apiextensions.k8s.io", 16700),
    ("admissionregistration.k8s.io", 16700),
    ("scheduling.k8s.io", 16600),
    ("coordination.k8s.io", 16500),
    ("node.k8s.io", 16300),
    ("discovery.k8s.io", 16200),
    ("flowcontrol.apiserver.k8s.io", 16100),
];

/// The local APIService of `group`/`version`, if it gets one; `crd` for a CRD's group.
fn local(group: &str, version: &str, crd: bool) -> Option<Value> {
    let (group_priority, version_priority, managed) = if crd {
        (1000, 100, "true")
    } else {
        let (_, p) = BUILT_IN.iter().find(|(g, _)| *g == group)?;
        (*p, if group.is_empty() { 1 } else { 15 }, "onstart")
    };
    Some(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": format!("{version}.{group}"), "labels": {AUTOMANAGED: managed}},
        "spec": {"group": group, "version": version,
            "groupPriorityMinimum": group_priority, "versionPriority": version_priority},
    }))
}

/// Creates the missing local APIServices and deletes the automanaged ones of group versions
/// no longer served (a deleted CRD's).
pub async fn sync(rest: &Rest) {
    let Some(res) = rest
        .registry
        .builtin_kind("apiregistration.k8s.io", "APIService")
    else {
        return;
    };
    let catalog = rest.registry.catalog();
    let mut wanted: Vec<Value> = Vec::new();
    for (group, versions) in catalog.groups() {
        for version in versions {
            let crd = catalog.of(&group, &version).any(|r| r.custom.is_some());
            wanted.extend(local(&group, &version, crd));
        }
    }
    let Ok(page) = rest.list(&res, None, &Default::default()).await else {
        return;
    };
    let opts = WriteOptions {
        field_manager: Some("k1s-apiservice-registration".into()),
        ..Default::default()
    };
    for w in &wanted {
        let name = meta::name(w);
        if page.items.iter().any(|a| meta::name(a) == name) {
            continue;
        }
        if let Err(e) = rest.create(&res, None, w.clone(), &opts).await
            && e.code != 409
        {
            tracing::warn!(apiservice = name, error = %e.message, "registering a local APIService");
        }
    }
    for a in &page.items {
        let managed = a["metadata"]["labels"][AUTOMANAGED].is_string();
        let name = meta::name(a);
        if managed
            && a["spec"]["service"].is_null()
            && !wanted.iter().any(|w| meta::name(w) == name)
            && let Err(e) = rest.delete(&res, None, name, &Default::default()).await
            && e.code != 404
        {
            tracing::warn!(apiservice = name, error = %e.message, "removing a local APIService");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_as_upstream() {
        let core = local("", "v1", false).unwrap();
        assert_eq!(core["metadata"]["name"], "v1.");
        assert_eq!(core["spec"]["groupPriorityMinimum"], 18000);
        assert_eq!(core["spec"]["versionPriority"], 1);
        let apps = local("apps", "v1", false).unwrap();
        assert_eq!(apps["spec"]["versionPriority"], 15);
        assert_eq!(apps["metadata"]["labels"][AUTOMANAGED], "onstart");
        let crd = local("example.com", "v1", true).unwrap();
        assert_eq!(crd["spec"]["groupPriorityMinimum"], 1000);
        assert_eq!(crd["metadata"]["labels"][AUTOMANAGED], "true");
        // A built-in group upstream has no priority for gets none.
        assert!(local("apiregistration.k8s.io", "v1", false).is_none());
    }
}
