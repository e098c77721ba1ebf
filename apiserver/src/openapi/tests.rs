use std::collections::BTreeSet;

use serde_json::Value;

use super::schemas::{V3_PREFIX, collect_refs};
use super::v2::V2_PREFIX;
use super::*;
use crate::registry::{ALL_VERBS, Registry, ResourceType, Subresource};

fn builtin() -> std::sync::Arc<Catalog> {
    Registry::new().catalog()
}

/// The built-in catalog plus one namespaced custom resource with status and scale.
fn with_custom() -> std::sync::Arc<Catalog> {
    let reg = Registry::new();
    reg.set_custom(vec![ResourceType {
        group: "stable.example.com".into(),
        version: "v1".into(),
        kind: "CronTab".into(),
        list_kind: "CronTabList".into(),
        plural: "crontabs".into(),
        singular: "crontab".into(),
        namespaced: true,
        short_names: vec!["ct".into()],
        categories: Vec::new(),
        subresources: vec![
            Subresource {
                name: "status",
                verbs: &["get", "patch", "update"],
                kind: None,
            },
            Subresource {
                name: "scale",
                verbs: &["get", "patch", "update"],
                kind: Some(("autoscaling", "v1", "Scale")),
            },
        ],
        verbs: ALL_VERBS.to_vec(),
        decode: None,
        schema: None,
        custom: None,
        generation: true,
    }]);
    reg.catalog()
}

fn resolve<'a>(schemas: &'a serde_json::Map<String, Value>, r: &str, prefix: &str) -> &'a Value {
    let name = r
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("bad ref {r}"));
    schemas
        .get(name)
        .unwrap_or_else(|| panic!("unresolved ref {r}"))
}

fn assert_refs_resolve(doc: &Value, schemas: &serde_json::Map<String, Value>, prefix: &str) {
    let mut refs = Vec::new();
    collect_refs(doc, "", &mut refs);
    assert!(!refs.is_empty());
    for r in refs {
        resolve(schemas, &r, prefix);
    }
}

/// All operations of a document: (path, method, operation).
fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if method != "parameters" {
                out.push((path.clone(), method.clone(), op));
            }
        }
    }
    out
}

fn has_param(op: &Value, name: &str) -> bool {
    op["parameters"]
        .as_array()
        .is_some_and(|ps| ps.iter().any(|p| p["name"] == name && p["in"] == "query"))
}

/// The schema of a property.
fn property<'a>(schema: &'a Value, field: &str) -> &'a Value {
    let prop = &schema["properties"][field];
    assert!(!prop.is_null(), "no field {field}");
    prop
}

/// A property's schema, following a direct or `allOf` ref.
fn deref<'a>(
    schemas: &'a serde_json::Map<String, Value>,
    prop: &'a Value,
    prefix: &str,
) -> &'a Value {
    let r = prop["$ref"]
        .as_str()
        .or_else(|| prop["allOf"][0]["$ref"].as_str());
    match r {
        Some(r) => resolve(schemas, r, prefix),
        None => prop,
    }
}

#[test]
fn v3_refs_resolve_and_kinds_are_patchable() {
    let catalog = with_custom();
    let all = v3_all(&catalog);
    assert_eq!(
        all.documents.len(),
        catalog.groups().iter().map(|(_, v)| v.len()).sum::<usize>()
    );
    for (key, doc) in &all.documents {
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert_refs_resolve(doc, schemas, V3_PREFIX);
        assert_eq!(doc["openapi"], "3.0.0");
        let ops = operations(doc);
        let ids: BTreeSet<_> = ops
            .iter()
            .map(|(_, _, op)| op["operationId"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids.len(), ops.len(), "duplicate operation ids in {key}");
        for r in catalog
            .resources
            .iter()
            .filter(|r| v3_key(&r.group, &r.version) == *key)
        {
            let gvk = schemas::gvk_object(&r.group, &r.version, &r.kind);
            let of_kind = |method: &str| {
                ops.iter()
                    .find(|(_, m, op)| m == method && op["x-kubernetes-group-version-kind"] == gvk)
            };
            if r.verbs.contains(&"patch") {
                let (path, _, patch) =
                    of_kind("patch").unwrap_or_else(|| panic!("{}: no patch", r.kind));
                assert!(has_param(patch, "fieldValidation"), "{path}");
                assert!(has_param(patch, "dryRun") && has_param(patch, "fieldManager"));
                assert!(has_param(patch, "force"));
                let content = &patch["requestBody"]["content"];
                assert!(content["application/merge-patch+json"].is_object());
                assert_eq!(
                    content["application/strategic-merge-patch+json"].is_object(),
                    r.schema.is_some()
                );
                assert_eq!(patch["x-kubernetes-action"], "patch");
            }
            let (_, _, create) = of_kind("post").unwrap_or_else(|| panic!("{}: no create", r.kind));
            assert!(has_param(create, "fieldValidation"));
            // The kind's schema carries its GVK.
            let kind = &schemas[&schemas::kind_name(r)];
            assert_eq!(
                kind["x-kubernetes-group-version-kind"][0], gvk,
                "{}",
                r.kind
            );
            assert!(kind["description"].is_string());
        }
    }
    let cm = &all.documents["api/v1"]["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"];
    assert_eq!(cm["patch"]["operationId"], "patchCoreV1NamespacedConfigMap");
    assert_eq!(cm["get"]["operationId"], "readCoreV1NamespacedConfigMap");
    let scale = &all.documents["apis/apps/v1"]["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"];
    assert_eq!(
        scale["patch"]["operationId"],
        "patchAppsV1NamespacedDeploymentScale"
    );
    assert_eq!(
        scale["patch"]["x-kubernetes-group-version-kind"]["kind"],
        "Scale"
    );
    let status = &all.documents["apis/apps/v1"]["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status"];
    assert_eq!(
        status["put"]["operationId"],
        "replaceAppsV1NamespacedDeploymentStatus"
    );
    let ct = &all.documents["apis/stable.example.com/v1"];
    assert!(ct["components"]["schemas"]["com.example.stable.v1.CronTab"].is_object());
    assert!(ct["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/scale"]["patch"].is_object());
}

#[test]
fn index_hashes_match_documents() {
    let catalog = builtin();
    let index = v3_index(&catalog);
    let paths = index["paths"].as_object().unwrap();
    assert!(paths.contains_key("api/v1") && paths.contains_key("apis/apps/v1"));
    for (key, entry) in paths {
        let url = entry["serverRelativeURL"].as_str().unwrap();
        let (path, hash_part) = url.split_once("?hash=").unwrap();
        assert_eq!(path, format!("/openapi/v3/{key}"));
        let (group, version) = match key.strip_prefix("apis/") {
            Some(gv) => gv.rsplit_once('/').unwrap(),
            None => ("", key.strip_prefix("api/").unwrap()),
        };
        let doc = v3_group_version(&catalog, group, version).unwrap();
        assert_eq!(hash(&doc), hash_part, "{key}");
    }
    assert!(v3_group_version(&catalog, "nope.example.com", "v1").is_none());
    // Stable across generations.
    assert_eq!(v3_index(&catalog), index);
}

#[test]
fn explain_needs_descriptions() {
    let catalog = builtin();
    let doc = v3_group_version(&catalog, "apps", "v1").unwrap();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let deploy = &schemas["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deploy["x-kubernetes-group-version-kind"],
        serde_json::json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    assert!(
        deploy.get("required").is_none(),
        "metadata is not required upstream"
    );
    let spec_prop = property(deploy, "spec");
    assert!(spec_prop["description"].is_string());
    assert!(
        spec_prop["allOf"][0]["$ref"].is_string(),
        "v3 wraps refs with siblings"
    );
    let spec = deref(schemas, spec_prop, V3_PREFIX);
    let replicas = property(spec, "replicas");
    assert!(
        replicas["description"]
            .as_str()
            .unwrap()
            .contains("desired pods")
    );
    assert_eq!(replicas["type"], "integer");
    let list = &schemas["io.k8s.api.apps.v1.DeploymentList"];
    assert_eq!(
        list["x-kubernetes-group-version-kind"][0]["kind"],
        "DeploymentList"
    );
    assert_eq!(
        list["properties"]["items"]["items"]["$ref"],
        "#/components/schemas/io.k8s.api.apps.v1.Deployment"
    );
    let ios = &schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"];
    assert_eq!(ios["type"], "string");
    assert_eq!(ios["format"], "int-or-string");
    let core = v3_group_version(&catalog, "", "v1").unwrap();
    let quantity = &core["components"]["schemas"]["io.k8s.apimachinery.pkg.api.resource.Quantity"];
    assert_eq!(quantity["type"], "string");
    assert!(quantity.get("format").is_none());
}

#[test]
fn strategic_merge_patch_extensions() {
    let catalog = builtin();
    let doc = v3_group_version(&catalog, "", "v1").unwrap();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let pod_spec = &schemas["io.k8s.api.core.v1.PodSpec"];
    let containers = &pod_spec["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    assert_eq!(
        pod_spec["properties"]["volumes"]["x-kubernetes-patch-strategy"],
        "merge,retainKeys"
    );
    let container = &schemas["io.k8s.api.core.v1.Container"];
    assert_eq!(
        container["properties"]["env"]["x-kubernetes-patch-merge-key"],
        "name"
    );
    assert_eq!(
        container["properties"]["ports"]["x-kubernetes-patch-merge-key"],
        "containerPort"
    );
    assert!(
        container["properties"]["args"]
            .get("x-kubernetes-patch-strategy")
            .is_none()
    );
    let meta = &schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"];
    assert_eq!(
        meta["properties"]["finalizers"]["x-kubernetes-patch-strategy"],
        "merge"
    );
    let apps = v3_group_version(&catalog, "apps", "v1").unwrap();
    let spec = &apps["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentSpec"];
    assert_eq!(
        spec["properties"]["strategy"]["x-kubernetes-patch-strategy"],
        "retainKeys"
    );
}

#[test]
fn v2_document_is_swagger_2() {
    let catalog = with_custom();
    let doc = v2(&catalog);
    assert_eq!(doc["swagger"], "2.0");
    let defs = doc["definitions"].as_object().unwrap();
    assert_refs_resolve(&doc, defs, V2_PREFIX);
    let text = serde_json::to_string(&doc).unwrap();
    assert!(!text.contains("#/components/"));
    // Every kind with a patch verb has a patch operation with GVK and fieldValidation.
    let ops = operations(&doc);
    let ids: BTreeSet<_> = ops
        .iter()
        .map(|(_, _, op)| op["operationId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), ops.len(), "duplicate operation ids");
    for r in catalog
        .resources
        .iter()
        .filter(|r| r.verbs.contains(&"patch"))
    {
        let gvk = schemas::gvk_object(&r.group, &r.version, &r.kind);
        let (_, _, patch) = ops
            .iter()
            .find(|(_, m, op)| m == "patch" && op["x-kubernetes-group-version-kind"] == gvk)
            .unwrap_or_else(|| panic!("{}: no patch", r.kind));
        assert!(has_param(patch, "fieldValidation"));
        assert!(patch["parameters"][0]["in"] == "body");
    }
    // A custom resource whose CRD declares no schema is an object, nothing more.
    let crontab = defs
        .iter()
        .find(|(k, _)| k.ends_with(".v1.CronTab"))
        .map(|(_, v)| v)
        .unwrap();
    assert_eq!(crontab["type"], "object", "{crontab}");
    assert!(crontab.get("properties").is_none(), "{crontab}");
    assert!(
        crontab["x-kubernetes-group-version-kind"].is_array(),
        "{crontab}"
    );
    // Refs with siblings are plain refs again; arrays have one item schema; single types.
    let deploy = &defs["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deploy["properties"]["spec"]["$ref"],
        "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    );
    fn walk(s: &Value) {
        let Some(obj) = s.as_object() else { return };
        for keyword in ["allOf", "oneOf", "anyOf", "nullable"] {
            assert!(obj.get(keyword).is_none(), "{s}");
        }
        if obj.get("type") == Some(&Value::from("array")) {
            assert!(obj["items"].is_object(), "{s}");
        }
        if let Some(t) = obj.get("type") {
            assert!(t.is_string());
        }
        for key in ["items", "additionalProperties"] {
            if let Some(v) = obj.get(key) {
                walk(v);
            }
        }
        if let Some(Value::Object(props)) = obj.get("properties") {
            props.values().for_each(walk);
        }
    }
    defs.values().for_each(walk);
}

/// Reads one protobuf message: (field, wire type, payload for length-delimited fields).
fn decode(mut b: &[u8]) -> Vec<(u64, u64, Vec<u8>)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0;
        for shift in (0..64).step_by(7) {
            let byte = b[0];
            *b = &b[1..];
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                break;
            }
        }
        v
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 => {
                varint(&mut b);
                out.push((field, wire, Vec::new()));
            }
            1 => {
                b = &b[8..];
                out.push((field, wire, Vec::new()));
            }
            2 => {
                let len = varint(&mut b) as usize;
                out.push((field, wire, b[..len].to_vec()));
                b = &b[len..];
            }
            _ => panic!("unexpected wire type {wire}"),
        }
    }
    out
}

#[test]
fn v2_protobuf_is_well_formed() {
    let catalog = builtin();
    let doc = v2(&catalog);
    let bytes = v2_protobuf(&catalog);
    let top = decode(&bytes);
    let field = |n| {
        top.iter()
            .find(|(f, _, _)| *f == n)
            .map(|(_, _, b)| b.clone())
    };
    assert_eq!(field(1).unwrap(), b"2.0");
    let definitions = decode(&field(9).unwrap());
    assert_eq!(
        definitions.len(),
        doc["definitions"].as_object().unwrap().len()
    );
    let paths = decode(&field(8).unwrap());
    assert_eq!(paths.len(), doc["paths"].as_object().unwrap().len());
    // The first path item: name, then a PathItem whose operations decode.
    let named = decode(&paths[0].2);
    assert_eq!(
        named[0].2,
        doc["paths"]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap()
            .as_bytes()
    );
    for (_, wire, op) in decode(&named[1].2) {
        if wire == 2 {
            decode(&op);
        }
    }
}

#[test]
fn schema_closure_is_minimal() {
    let catalog = builtin();
    let doc = v3_group_version(&catalog, "coordination.k8s.io", "v1").unwrap();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    assert!(schemas.contains_key("io.k8s.api.coordination.v1.Lease"));
    assert!(schemas.contains_key(schemas::STATUS));
    assert!(schemas.contains_key(schemas::WATCH_EVENT));
    assert!(schemas.contains_key(schemas::DELETE_OPTIONS));
    assert!(schemas.contains_key(schemas::PATCH));
    assert!(!schemas.contains_key("io.k8s.api.core.v1.PodSpec"));
}
