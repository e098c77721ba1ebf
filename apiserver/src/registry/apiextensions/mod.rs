//! CustomResourceDefinitions as a kind: defaults, validation, what a create and an update
//! set (names accepted, established, the cleanup finalizer). What a CRD serves is built in
//! [`custom`]; following CRD changes and cleaning up a deleted CRD's objects is
//! [`crate::crds`]'s work.

pub mod custom;

use serde_json::{Value, json};

use super::side_effects::{Claims, Context, Outcome, SideEffects};
use super::strategy::{Causes, Strategy};
use crate::rest::meta;
use k1s_apimachinery::crd_schema;

pub struct CustomResourceDefinition;

impl Strategy for CustomResourceDefinition {
    fn side_effects(&self) -> Option<&dyn SideEffects> {
        Some(&CatalogRefresh)
    }

    fn prepare_create(&self, obj: &mut Value) {
        prepare_create(obj);
    }

    fn defaults(&self, obj: &mut Value) {
        default(obj);
    }

    fn prepare_update(&self, _old: &Value, new: &mut Value, _subresource: Option<&str>) {
        prepare_update(new);
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>, causes: &mut Causes) {
        causes.extend(validate(obj));
    }
}

/// A CRD write changes the catalog: it is rebuilt after every CRD write through this server,
/// so a custom resource is served as soon as the create of its CRD returns (writes through
/// other servers reach the catalog through `crate::crds`'s watch).
struct CatalogRefresh;

async fn refresh(cx: &dyn Context) {
    if let Err(e) = cx.refresh_custom_resources().await {
        tracing::warn!(error = %e.message, "rebuilding the custom resources failed");
    }
}

#[async_trait::async_trait]
impl SideEffects for CatalogRefresh {
    async fn finish(
        &self,
        cx: &dyn Context,
        _claims: Claims,
        _old: Option<&Value>,
        outcome: Outcome<'_>,
    ) {
        if !matches!(outcome, Outcome::Failed) {
            refresh(cx).await;
        }
    }

    async fn after_delete(&self, cx: &dyn Context, _old: &Value) {
        refresh(cx).await;
    }
}

/// The finalizer that makes a CRD's deletion wait until its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

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

#[cfg(test)]
mod tests {
    use super::*;
    use custom::tests::crontab;

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
}
