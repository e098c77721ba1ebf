//! CustomResourceDefinitions: turning CRDs into served resources, their status (names
//! accepted, established), and the cleanup of a deleted CRD's custom resources.
//!
//! The catalog is rebuilt from the stored CRDs after every CRD write through this server and
//! on every CRD change another server makes (a watch), so a custom resource is served as soon
//! as the create of its CRD returns.

use std::sync::Arc;

use k1s_store::ListRequest;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::registry::{ALL_VERBS, ResourceType, Subresource};
use crate::rest::{Rest, WriteOptions, meta};
use crate::status::ApiError;
use k1s_apimachinery::crd_schema;

/// The finalizer that makes a CRD's deletion wait until its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

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
    pub conversion: crate::rest::conversion::Conversion,
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
    let conversion = crate::rest::conversion::Conversion::of(crd);
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

/// Validation of a CRD beyond its typing, with upstream's messages.
pub fn validate(crd: &Value) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or("");
    let plural = spec["names"]["plural"].as_str().unwrap_or("");
    let name = meta::name(crd);
    if group.is_empty() {
        causes.push(("spec.group".into(), "Required value".into()));
    } else if !group.contains('.') {
        causes.push((
            "spec.group".into(),
            format!("Invalid value: {group:?}: should be a domain with at least one dot"),
        ));
    }
    if plural.is_empty() {
        causes.push(("spec.names.plural".into(), "Required value".into()));
    }
    if spec["names"]["kind"].as_str().unwrap_or("").is_empty() {
        causes.push(("spec.names.kind".into(), "Required value".into()));
    }
    if name != format!("{plural}.{group}") {
        causes.push((
            "metadata.name".into(),
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if !matches!(spec["scope"].as_str(), Some("Namespaced" | "Cluster")) {
        causes.push((
            "spec.scope".into(),
            format!(
                "Unsupported value: {}: supported values: \"Cluster\", \"Namespaced\"",
                spec["scope"]
            ),
        ));
    }
    let versions = spec["versions"].as_array().map_or(&[][..], Vec::as_slice);
    if versions.is_empty() {
        causes.push((
            "spec.versions".into(),
            "Invalid value: null: must have exactly one version marked as storage version".into(),
        ));
    } else if versions.iter().filter(|v| v["storage"] == true).count() != 1 {
        causes.push((
            "spec.versions".into(),
            "Invalid value: []apiextensions.CustomResourceDefinitionVersion(nil): must have exactly one version marked as storage version".into(),
        ));
    }
    validate_conversion(&spec["conversion"], &mut causes);
    for (i, v) in versions.iter().enumerate() {
        let opts = crd_schema::CompileOptions {
            field_path: format!("spec.versions[{i}].schema.openAPIV3Schema"),
            status_subresource: v["subresources"].get("status").is_some(),
        };
        if let Some(s) = v["schema"].get("openAPIV3Schema")
            && let Err(errors) = crd_schema::Schema::compile_with(s, &opts)
        {
            causes.extend(
                errors
                    .into_iter()
                    .map(|e| (e.field.clone(), e.message.clone())),
            );
        }
    }
    causes
}

/// `spec.conversion` as upstream's validation checks it (after defaulting).
fn validate_conversion(conv: &Value, causes: &mut Vec<(String, String)>) {
    let strategy = conv["strategy"].as_str().unwrap_or("None");
    let webhook = &conv["webhook"];
    match strategy {
        "None" if !webhook.is_null() => causes.push((
            "spec.conversion.webhook".into(),
            "Forbidden: should be null if strategy is not set to Webhook".into(),
        )),
        "None" => {}
        "Webhook" if webhook.is_null() => causes.push((
            "spec.conversion.webhook".into(),
            "Required value: required when strategy is set to Webhook".into(),
        )),
        "Webhook" => {
            let versions = webhook["conversionReviewVersions"].as_array();
            let known = versions
                .into_iter()
                .flatten()
                .any(|v| v == "v1" || v == "v1beta1");
            if !known {
                causes.push((
                    "spec.conversion.webhook.conversionReviewVersions".into(),
                    "Required value: must include at least one of v1, v1beta1".into(),
                ));
            }
            let cc = &webhook["clientConfig"];
            if cc["url"].is_null() == cc["service"].is_null() {
                causes.push((
                    "spec.conversion.webhook.clientConfig".into(),
                    "Required value: exactly one of url or service is required".into(),
                ));
            }
        }
        other => causes.push((
            "spec.conversion.strategy".into(),
            format!("Unsupported value: {other:?}: supported values: \"None\", \"Webhook\""),
        )),
    }
}

/// Upstream's CRD defaults: `spec.conversion.strategy: None`, a webhook Service's port 443.
pub fn default(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let conv = spec.entry("conversion").or_insert_with(|| json!({}));
    if conv.is_null() {
        *conv = json!({});
    }
    if let Some(c) = conv.as_object_mut() {
        c.entry("strategy").or_insert_with(|| json!("None"));
        if let Some(svc) = c
            .get_mut("webhook")
            .and_then(|w| w.get_mut("clientConfig"))
            .and_then(|cc| cc.get_mut("service"))
            .and_then(Value::as_object_mut)
        {
            svc.entry("port").or_insert_with(|| json!(443));
        }
    }
}

/// An updated CRD's `status.storedVersions` gains its new storage version (upstream's
/// strategy): objects may now be stored in it.
pub fn prepare_update(crd: &mut Value) {
    let storage = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["storage"] == true)
        .and_then(|v| v["name"].as_str())
        .map(str::to_owned);
    let Some(storage) = storage else { return };
    let Some(status) = crd.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let stored = status.entry("storedVersions").or_insert_with(|| json!([]));
    if let Some(list) = stored.as_array_mut()
        && !list.iter().any(|v| v == storage.as_str())
    {
        list.push(json!(storage));
    }
}

/// The status a CRD gets when its names are accepted: conditions, acceptedNames and
/// storedVersions.
pub fn prepare_create(crd: &mut Value) {
    let now = meta::now();
    let names = &crd["spec"]["names"];
    let kind = names["kind"].as_str().unwrap_or("");
    let mut accepted = names.clone();
    if accepted["singular"].is_null() {
        accepted["singular"] = json!(kind.to_ascii_lowercase());
    }
    if accepted["listKind"].is_null() {
        accepted["listKind"] = json!(format!("{kind}List"));
    }
    let storage: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"] == true)
        .map(|v| v["name"].clone())
        .collect();
    crd["status"] = json!({
        "acceptedNames": accepted,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": storage,
    });
    let m = meta::metadata_mut(crd);
    let mut finalizers: Vec<Value> = m
        .get("finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
        finalizers.push(json!(CLEANUP_FINALIZER));
    }
    m.insert("finalizers".into(), Value::Array(finalizers));
}

impl Rest {
    /// Rebuilds the catalog's custom resources from the stored CRDs.
    pub async fn refresh_custom_resources(&self) -> Result<(), ApiError> {
        let Some(crds) = self
            .registry
            .builtin_kind("apiextensions.k8s.io", "CustomResourceDefinition")
        else {
            return Ok(());
        };
        let resp = self
            .store
            .list(ListRequest {
                prefix: crds.prefix(),
                ..Default::default()
            })
            .await?;
        let mut custom = Vec::new();
        for kv in resp.kvs {
            match self.decode_stored(&crds, &kv.key, &kv.value, kv.mod_revision) {
                Ok(crd) => custom.extend(resource_types(&crd)),
                Err(e) => tracing::warn!(key = %kv.key, error = %e.message, "cannot read a CRD"),
            }
        }
        self.registry.set_custom(custom);
        Ok(())
    }

    /// Deletes every custom resource of a deleted CRD, then lets the CRD go.
    async fn clean_up_crd(&self, crd: &Value) -> Result<(), ApiError> {
        let (Some(group), Some(plural)) = (
            crd["spec"]["group"].as_str(),
            crd["spec"]["names"]["plural"].as_str(),
        ) else {
            return Ok(());
        };
        let prefix = format!("/registry/{group}/{plural}/");
        loop {
            let resp = self
                .store
                .list(ListRequest {
                    prefix: prefix.clone(),
                    limit: 500,
                    ..Default::default()
                })
                .await?;
            for kv in &resp.kvs {
                let _ = self.store.delete(&kv.key, None).await;
            }
            if !resp.more {
                break;
            }
        }
        let Some(res) = self
            .registry
            .builtin_kind("apiextensions.k8s.io", "CustomResourceDefinition")
        else {
            return Ok(());
        };
        let name = meta::name(crd).to_owned();
        self.read_modify_write(&res, None, &name, None, &WriteOptions::default(), |cur| {
            let mut c = cur.clone();
            if let Some(f) = c["metadata"]["finalizers"].as_array_mut() {
                f.retain(|x| x != CLEANUP_FINALIZER);
            }
            Ok(c)
        })
        .await
        .map(|_| ())
    }
}

/// Keeps the catalog in step with CRD changes made anywhere, and finishes CRD deletions.
pub async fn run(rest: Arc<Rest>, cancel: CancellationToken) {
    let Some(res) = rest
        .registry
        .builtin_kind("apiextensions.k8s.io", "CustomResourceDefinition")
    else {
        return;
    };
    let store = rest.store.clone();
    crate::mirror::follow(store, res.prefix(), cancel, || async {
        if let Err(e) = rest.refresh_custom_resources().await {
            tracing::warn!(error = %e.message, "CRD watcher: cannot rebuild the catalog");
        }
        finish_deletions(&rest, &res).await;
    })
    .await;
}

async fn finish_deletions(rest: &Rest, res: &ResourceType) {
    let Ok(page) = rest.list(res, None, &Default::default()).await else {
        return;
    };
    for crd in page.items {
        if meta::is_deleting(&crd)
            && meta::finalizers(&crd)
                .iter()
                .any(|f| f == CLEANUP_FINALIZER)
            && let Err(e) = rest.clean_up_crd(&crd).await
        {
            tracing::warn!(crd = meta::name(&crd), error = %e.message, "cleaning up a deleted CRD failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crontab() -> Value {
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
    fn bad_crds_are_refused() {
        let mut c = crontab();
        c["metadata"]["name"] = json!("wrong");
        c["spec"]["versions"][0]["storage"] = json!(false);
        let causes = validate(&c);
        let fields: Vec<&str> = causes.iter().map(|(f, _)| f.as_str()).collect();
        assert!(
            fields.contains(&"metadata.name") && fields.contains(&"spec.versions"),
            "{causes:?}"
        );
    }

    #[test]
    fn new_crds_are_established_and_get_the_cleanup_finalizer() {
        let mut c = crontab();
        prepare_create(&mut c);
        assert_eq!(c["status"]["conditions"][1]["type"], "Established");
        assert_eq!(c["status"]["acceptedNames"]["listKind"], "CronTabList");
        assert_eq!(c["metadata"]["finalizers"][0], CLEANUP_FINALIZER);
        assert_eq!(c["status"]["storedVersions"][0], "v1");
    }

    #[test]
    fn paths() {
        let mut o = json!({});
        set_path(&mut o, ".spec.replicas", json!(3));
        assert_eq!(get_path(&o, ".spec.replicas"), 3);
    }
}
