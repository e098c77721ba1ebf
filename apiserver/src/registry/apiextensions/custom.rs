//! What a CustomResourceDefinition makes served: one resource type per served version, with
//! what custom resources need beyond the generic [`ResourceType`] fields (schema, printer
//! columns, scale paths, conversion), built from the CRD alone.

use std::sync::Arc;

use serde_json::Value;

use crate::registry::{ALL_VERBS, ResourceType, Subresource};
use k1s_apimachinery::crd_schema;

/// What a custom resource needs beyond the generic [`ResourceType`] fields.
pub struct CustomInfo {
    /// The CRD version's compiled `openAPIV3Schema` (None: everything is accepted).
    pub schema: Option<crd_schema::Schema>,
    /// The `openAPIV3Schema` as written (for the OpenAPI documents).
    pub openapi_schema: Value,
    /// List and map semantics for server-side apply, from the schema's extensions.
    pub apply_schema: k1s_apimachinery::apply::Schema,
    /// The version's `additionalPrinterColumns` (JSON array or null).
    pub printer_columns: Value,
    /// JSON paths (`.spec.replicas`) of the scale subresource.
    pub scale: Option<ScalePaths>,
    /// The CRD's storage version and conversion webhook.
    pub conversion: Conversion,
}

impl std::fmt::Debug for CustomInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomInfo")
            .field("schema", &self.schema.is_some())
            .field("scale", &self.scale)
            .finish_non_exhaustive()
    }
}

/// The paths of a custom resource's scale subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// Reads a simple JSON path (`.spec.replicas`).
pub fn get_path<'a>(obj: &'a Value, path: &str) -> &'a Value {
    path.trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .fold(obj, |v, k| &v[k])
}

/// Writes a simple JSON path, creating objects on the way.
pub fn set_path(obj: &mut Value, path: &str, value: Value) {
    let mut cur = obj;
    for k in path
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
    {
        cur = &mut cur[k];
    }
    *cur = value;
}

/// The served resources a CRD defines (one per served version). Schemas that do not compile
/// leave the version unserved (the CRD's validation refused them on write).
pub fn resource_types(crd: &Value) -> Vec<ResourceType> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let (Some(group), Some(plural), Some(kind)) = (
        spec["group"].as_str(),
        names["plural"].as_str(),
        names["kind"].as_str(),
    ) else {
        return Vec::new();
    };
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let conversion = Conversion::of(crd);
    let mut out = Vec::new();
    for v in spec["versions"].as_array().into_iter().flatten() {
        if v["served"] != true {
            continue;
        }
        let Some(version) = v["name"].as_str() else {
            continue;
        };
        let has_status = v["subresources"].get("status").is_some();
        let raw_schema = v["schema"]["openAPIV3Schema"].clone();
        let schema = if raw_schema.is_null() {
            None
        } else {
            let opts = crd_schema::CompileOptions {
                status_subresource: has_status,
                ..Default::default()
            };
            match crd_schema::Schema::compile_with(&raw_schema, &opts) {
                Ok(s) => Some(s),
                Err(_) => continue,
            }
        };
        let apply_schema = if raw_schema.is_null() {
            k1s_apimachinery::apply::Schema::untyped()
        } else {
            k1s_apimachinery::apply::schema_from_openapi(&raw_schema)
        }
        .with_status_subresource(has_status);
        let mut subresources = Vec::new();
        if has_status {
            subresources.push(Subresource {
                name: "status",
                verbs: &["get", "patch", "update"],
                kind: None,
            });
        }
        let scale = v["subresources"].get("scale").map(|s| ScalePaths {
            spec_replicas: s["specReplicasPath"]
                .as_str()
                .unwrap_or(".spec.replicas")
                .to_owned(),
            status_replicas: s["statusReplicasPath"]
                .as_str()
                .unwrap_or(".status.replicas")
                .to_owned(),
            label_selector: s["labelSelectorPath"].as_str().map(str::to_owned),
        });
        if scale.is_some() {
            subresources.push(Subresource {
                name: "scale",
                verbs: &["get", "patch", "update"],
                kind: Some(("autoscaling", "v1", "Scale")),
            });
        }
        out.push(ResourceType {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            list_kind: names["listKind"]
                .as_str()
                .map_or_else(|| format!("{kind}List"), str::to_owned),
            plural: plural.to_owned(),
            singular: names["singular"]
                .as_str()
                .map_or_else(|| kind.to_ascii_lowercase(), str::to_owned),
            namespaced: spec["scope"] == "Namespaced",
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            subresources,
            verbs: ALL_VERBS.to_vec(),
            decode: None,
            schema: None,
            generation: true,
            custom: Some(Arc::new(CustomInfo {
                schema,
                openapi_schema: raw_schema,
                apply_schema,
                printer_columns: v["additionalPrinterColumns"].clone(),
                scale,
                conversion: conversion.clone(),
            })),
        });
    }
    out
}

/// The conversion a CRD asks for, for its served resources.
#[derive(Debug, Clone, Default)]
pub struct Conversion {
    /// `group/version` of the CRD's storage version.
    pub storage_version: String,
    /// `spec.conversion.webhook` when the strategy is `Webhook`.
    pub webhook: Option<Value>,
}

impl Conversion {
    /// The conversion of `crd` (its storage version and webhook, if any).
    pub fn of(crd: &Value) -> Self {
        let spec = &crd["spec"];
        let group = spec["group"].as_str().unwrap_or("");
        let storage = spec["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["storage"] == true)
            .and_then(|v| v["name"].as_str())
            .unwrap_or("");
        let webhook = (spec["conversion"]["strategy"] == "Webhook")
            .then(|| spec["conversion"]["webhook"].clone())
            .filter(Value::is_object);
        Conversion {
            storage_version: format!("{group}/{storage}"),
            webhook,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::registry::apiextensions::validate;
    use serde_json::json;

    pub(crate) fn crontab() -> Value {
        json!({
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {
                "group": "stable.example.com",
                "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "cronSpec": {"type": "string"}, "replicas": {"type": "integer"}}}}}},
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                    "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"}],
                }],
            },
        })
    }

    #[test]
    fn a_crd_defines_its_resource() {
        let types = resource_types(&crontab());
        assert_eq!(types.len(), 1);
        let t = &types[0];
        assert_eq!(
            (t.group.as_str(), t.version.as_str(), t.plural.as_str()),
            ("stable.example.com", "v1", "crontabs")
        );
        assert!(t.namespaced && t.has_status() && t.subresource("scale").is_some());
        assert_eq!(t.list_kind, "CronTabList");
        assert!(t.custom.as_ref().unwrap().schema.is_some());
        assert!(
            validate(&crontab()).is_empty(),
            "{:?}",
            validate(&crontab())
        );
    }

    #[test]
    fn paths() {
        let mut o = json!({});
        set_path(&mut o, ".spec.replicas", json!(3));
        assert_eq!(get_path(&o, ".spec.replicas"), 3);
    }
}
