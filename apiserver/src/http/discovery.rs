//! Discovery documents built from the resource catalog: the legacy `APIVersions`,
//! `APIGroupList`, `APIGroup` and `APIResourceList`, and aggregated discovery
//! (`apidiscovery.k8s.io` v2 and v2beta1 `APIGroupDiscoveryList`) that kubectl 1.30+ asks for.

use serde_json::{Value, json};

use crate::registry::{Catalog, ResourceType};

fn group_versions(catalog: &Catalog, group: &str) -> Option<Value> {
    let (name, versions) = catalog.groups().into_iter().find(|(g, _)| g == group)?;
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    Some(json!({"name": name, "versions": gvs, "preferredVersion": gvs[0]}))
}

/// `/api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// `/apis`.
pub fn group_list(catalog: &Catalog) -> Value {
    let groups: Vec<Value> = catalog
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .filter_map(|(g, _)| group_versions(catalog, g))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub fn group(catalog: &Catalog, group: &str) -> Option<Value> {
    if group.is_empty() {
        return None;
    }
    let mut g = group_versions(catalog, group)?;
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub fn resource_list(catalog: &Catalog, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in catalog.of(group, version) {
        let mut entry = json!({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
            "kind": r.kind, "verbs": r.verbs,
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        resources.push(entry);
        for s in &r.subresources {
            let mut sub = json!({
                "name": format!("{}/{}", r.plural, s.name), "singularName": "",
                "namespaced": r.namespaced, "kind": r.kind, "verbs": s.verbs,
            });
            if let Some((g, v, k)) = s.kind {
                sub["kind"] = json!(k);
                if g != r.group || v != r.version {
                    sub["group"] = json!(g);
                    sub["version"] = json!(v);
                }
            }
            resources.push(sub);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn aggregated_resource(r: &ResourceType) -> Value {
    let mut entry = json!({
        "resource": r.plural,
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        entry["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        entry["categories"] = json!(r.categories);
    }
    if !r.subresources.is_empty() {
        let subs: Vec<Value> = r
            .subresources
            .iter()
            .map(|s| {
                let (g, v, k) = s.kind.unwrap_or((&r.group, &r.version, &r.kind));
                json!({"subresource": s.name, "responseKind": {"group": g, "version": v, "kind": k}, "verbs": s.verbs})
            })
            .collect();
        entry["subresources"] = json!(subs);
    }
    entry
}

/// The aggregated discovery document of `/api` (`core`) or `/apis`, in `version` (`v2` or
/// `v2beta1`; the two have the same shape).
pub fn aggregated(catalog: &Catalog, core: bool, version: &str) -> Value {
    let items: Vec<Value> = catalog
        .groups()
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> =
                        catalog.of(&g, v).map(|r| aggregated_resource(r)).collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let mut metadata = json!({"creationTimestamp": null});
            if !g.is_empty() {
                metadata["name"] = json!(g);
            }
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn documents() {
        let cat = Registry::new().catalog();
        let core = resource_list(&cat, "", "v1").unwrap();
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"pods")
                && names.contains(&"pods/status")
                && names.contains(&"namespaces/finalize")
        );
        let apps = resource_list(&cat, "apps", "v1").unwrap();
        let scale = apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .unwrap();
        assert_eq!(
            (scale["group"].as_str(), scale["kind"].as_str()),
            (Some("autoscaling"), Some("Scale"))
        );
        let groups = group_list(&cat);
        assert!(
            groups["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == "apps")
        );
        assert!(group(&cat, "apps").is_some() && group(&cat, "nope").is_none());
        let agg = aggregated(&cat, false, "v2");
        let apps = agg["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["metadata"]["name"] == "apps")
            .unwrap();
        let deploy = apps["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        assert_eq!(deploy["scope"], "Namespaced");
        assert_eq!(deploy["shortNames"][0], "deploy");
        let core = aggregated(&cat, true, "v2");
        assert_eq!(core["items"].as_array().unwrap().len(), 1);
    }
}
