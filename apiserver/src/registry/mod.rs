//! The resource catalog: which group/version/resources exist, their kinds, scope, verbs,
//! subresources and short names, and how their objects are decoded.
//!
//! Built-in types come from k8s-openapi (one line per type in [`builtin`]); the decoder of each
//! is the k8s-openapi struct, so type errors and unknown fields are found exactly where the
//! upstream Go structs would find them. Custom resources (CRDs) are added at run time by
//! [`Registry::set_custom`].
//!
//! This module owns no storage: the storage key of an object is derived here
//! ([`ResourceType::key`]), everything else is in [`crate::rest`].
//!
//! Each kind's rules (defaults, validation, what creates, updates and deletes do) are its
//! [`strategy::Strategy`], in a file per kind under a folder per API group, as upstream's
//! `pkg/registry`: [`core`], [`apps`], [`batch`], [`storage`], [`scheduling`],
//! [`networking`], [`node`], [`admissionregistration`], [`certificates`], [`apiextensions`],
//! [`apiregistration`].

pub mod admissionregistration;
pub mod apiextensions;
pub mod apiregistration;
pub mod apps;
pub mod batch;
pub mod certificates;
pub mod core;
mod errors;
pub mod networking;
pub mod node;
pub mod scheduling;
pub mod side_effects;
pub mod storage;
pub mod strategy;

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::{NamespaceResourceScope, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why an object could not be decoded as its kind: the JSON does not fit the type (upstream:
/// 400 `cannot be handled as a ...`). Absent fields are not errors: like Go's decoder,
/// k8s-openapi's fills them with zero values, and validation reports required ones.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeError {
    Malformed(String),
}

/// Decodes an object as its kind: returns the normalized object (unknown fields dropped, as
/// upstream's typed decoding does) and the JSON paths of the unknown fields.
pub type DecodeFn = fn(&Value) -> Result<(Value, Vec<String>), DecodeError>;

/// Writes the JSON schema of a built-in kind (k8s-openapi's schemars impls) into a generator;
/// referenced types land in the generator's definitions.
pub type SchemaFn = fn(&mut schemars::SchemaGenerator) -> schemars::Schema;

/// A subresource and the verbs it serves.
#[derive(Debug, Clone)]
pub struct Subresource {
    pub name: &'static str,
    pub verbs: &'static [&'static str],
    /// The kind it answers with, as (group, version, kind); `None` means the parent's kind.
    pub kind: Option<(&'static str, &'static str, &'static str)>,
}

/// One served resource (one group/version/plural).
#[derive(Debug, Clone)]
pub struct ResourceType {
    /// "" for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub subresources: Vec<Subresource>,
    /// The verbs of the resource itself.
    pub verbs: Vec<&'static str>,
    /// `None` for custom resources (their schema lives in the CRD).
    pub decode: Option<DecodeFn>,
    /// The kind's schema; `None` for custom resources (their schema lives in the CRD).
    pub schema: Option<SchemaFn>,
    /// Schema, printer columns and scale paths of a custom resource.
    pub custom: Option<Arc<apiextensions::custom::CustomInfo>>,
    /// Whether `metadata.generation` is kept (bumped on changes outside metadata and status).
    pub generation: bool,
}

/// All verbs of an ordinary resource, in upstream's discovery order.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

const STATUS: Subresource = Subresource {
    name: "status",
    verbs: &["get", "patch", "update"],
    kind: None,
};
/// CertificateSigningRequests' `approval`: writes `status.conditions` only (see
/// [`crate::rest::strategy`]).
const APPROVAL: Subresource = Subresource {
    name: "approval",
    verbs: &["get", "patch", "update"],
    kind: None,
};
const SCALE: Subresource = Subresource {
    name: "scale",
    verbs: &["get", "patch", "update"],
    kind: Some(("autoscaling", "v1", "Scale")),
};

impl ResourceType {
    /// `apiVersion` as objects carry it: `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural` or `plural.group`, as in messages (`deployments.apps "x" not found`).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The storage prefix of every object of this resource, ending in `/`.
    /// `/registry/<group>/<plural>/`, where the core group is spelled `core`.
    pub fn prefix(&self) -> String {
        // events.k8s.io Events share the core group's storage (see rest::events).
        let group = match (self.group.as_str(), self.plural.as_str()) {
            ("", _) | ("events.k8s.io", "events") => "core",
            (g, _) => g,
        };
        format!("/registry/{group}/{}/", self.plural)
    }

    /// The storage prefix of one namespace's objects (or of all objects when `ns` is `None`).
    pub fn namespace_prefix(&self, ns: Option<&str>) -> String {
        match (self.namespaced, ns) {
            (true, Some(ns)) => format!("{}{ns}/", self.prefix()),
            _ => self.prefix(),
        }
    }

    /// The storage key of one object.
    pub fn key(&self, ns: Option<&str>, name: &str) -> String {
        match (self.namespaced, ns) {
            (true, Some(ns)) => format!("{}{ns}/{name}", self.prefix()),
            _ => format!("{}{name}", self.prefix()),
        }
    }

    pub fn subresource(&self, name: &str) -> Option<&Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// The list/map semantics server-side apply and field tracking use for this kind.
    pub fn apply_schema(&self) -> &k1s_apimachinery::apply::Schema {
        static UNTYPED: std::sync::OnceLock<k1s_apimachinery::apply::Schema> =
            std::sync::OnceLock::new();
        if let Some(c) = &self.custom {
            return &c.apply_schema;
        }
        k1s_apimachinery::apply::schema_for(k1s_apimachinery::apply::TypeKey {
            group: &self.group,
            kind: &self.kind,
        })
        .unwrap_or_else(|| UNTYPED.get_or_init(k1s_apimachinery::apply::Schema::untyped))
    }

    /// Whether this is the CustomResourceDefinition resource itself.
    pub fn is_crd(&self) -> bool {
        self.group == "apiextensions.k8s.io" && self.kind == "CustomResourceDefinition"
    }

    pub fn has_status(&self) -> bool {
        self.subresource("status").is_some()
    }

    /// The kind's rules ([`strategy::for_kind`]).
    pub fn strategy(&self) -> &'static dyn strategy::Strategy {
        strategy::for_kind(&self.group, &self.kind)
    }
}

/// Decodes `value` as `T`, reporting fields `T` does not have.
fn decode_as<T: DeserializeOwned + Serialize>(
    value: &Value,
) -> Result<(Value, Vec<String>), DecodeError> {
    // Decoded from the borrowed body: no copy of it first.
    let typed = T::deserialize(value).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    let normalized =
        serde_json::to_value(&typed).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    let mut unknown = Vec::new();
    unknown_fields(value, &normalized, &mut String::new(), &mut unknown);
    Ok((normalized, unknown))
}

/// Collects the paths of fields present (and not null) in `input` but absent from `typed`.
fn unknown_fields(input: &Value, typed: &Value, path: &mut String, out: &mut Vec<String>) {
    match (input, typed) {
        (Value::Object(i), Value::Object(t)) => {
            for (k, v) in i {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                match t.get(k) {
                    Some(tv) => unknown_fields(v, tv, path, out),
                    None if !v.is_null() => out.push(path.clone()),
                    None => {}
                }
                path.truncate(len);
            }
        }
        (Value::Array(i), Value::Array(t)) => {
            for (n, (iv, tv)) in i.iter().zip(t).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{n}]"));
                unknown_fields(iv, tv, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// One built-in resource entry.
fn res<T>(
    short_names: &[&str],
    categories: &[&str],
    subresources: &[Subresource],
    generation: bool,
) -> ResourceType
where
    T: Resource + DeserializeOwned + Serialize + schemars::JsonSchema + 'static,
{
    let plural = T::URL_PATH_SEGMENT.to_owned();
    ResourceType {
        group: T::GROUP.to_owned(),
        version: T::VERSION.to_owned(),
        kind: T::KIND.to_owned(),
        list_kind: format!("{}List", T::KIND),
        singular: T::KIND.to_ascii_lowercase(),
        plural,
        namespaced: TypeId::of::<T::Scope>() == TypeId::of::<NamespaceResourceScope>(),
        short_names: short_names.iter().map(|s| (*s).to_owned()).collect(),
        categories: categories.iter().map(|s| (*s).to_owned()).collect(),
        subresources: subresources.to_vec(),
        verbs: ALL_VERBS.to_vec(),
        decode: Some(decode_as::<T>),
        schema: Some(<T as schemars::JsonSchema>::json_schema),
        custom: None,
        generation,
    }
}

/// A create-only resource (reviews): no storage, only `create`.
fn review<T>() -> ResourceType
where
    T: Resource + DeserializeOwned + Serialize + schemars::JsonSchema + 'static,
{
    let mut r = res::<T>(&[], &[], &[], false);
    r.verbs = vec!["create"];
    r
}

/// The verbs of the `proxy` subresources, as upstream's discovery lists them.
const PROXY_VERBS: &[&str] = &["create", "delete", "get", "patch", "update"];

/// Every built-in resource k1s serves, in discovery order.
pub fn builtin() -> Vec<ResourceType> {
    use k8s_openapi::api::{
        admissionregistration, apps, authentication, authorization, batch, certificates,
        coordination, core, discovery, events, networking, node, policy, rbac, scheduling, storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration;
    let pod_subresources = [
        STATUS,
        Subresource {
            name: "binding",
            verbs: &["create"],
            kind: Some(("", "v1", "Binding")),
        },
        Subresource {
            name: "eviction",
            verbs: &["create"],
            kind: Some(("policy", "v1", "Eviction")),
        },
        Subresource {
            name: "log",
            verbs: &["get"],
            kind: Some(("", "v1", "Pod")),
        },
        Subresource {
            name: "exec",
            verbs: &["create", "get"],
            kind: Some(("", "v1", "PodExecOptions")),
        },
        Subresource {
            name: "attach",
            verbs: &["create", "get"],
            kind: Some(("", "v1", "PodAttachOptions")),
        },
        Subresource {
            name: "portforward",
            verbs: &["create", "get"],
            kind: Some(("", "v1", "PodPortForwardOptions")),
        },
        Subresource {
            name: "proxy",
            verbs: PROXY_VERBS,
            kind: Some(("", "v1", "PodProxyOptions")),
        },
    ];
    let service_proxy = Subresource {
        name: "proxy",
        verbs: PROXY_VERBS,
        kind: Some(("", "v1", "ServiceProxyOptions")),
    };
    let sa_token = Subresource {
        name: "token",
        verbs: &["create"],
        kind: Some(("authentication.k8s.io", "v1", "TokenRequest")),
    };
    let node_proxy = Subresource {
        name: "proxy",
        verbs: &["create", "delete", "get", "patch", "update"],
        kind: Some(("", "v1", "NodeProxyOptions")),
    };
    let finalize = Subresource {
        name: "finalize",
        verbs: &["update"],
        kind: None,
    };
    vec![
        // core/v1
        res::<core::v1::ConfigMap>(&["cm"], &[], &[], false),
        res::<core::v1::Endpoints>(&["ep"], &[], &[], false),
        res::<core::v1::Event>(&["ev"], &[], &[], false),
        res::<core::v1::LimitRange>(&["limits"], &[], &[], false),
        res::<core::v1::Namespace>(&["ns"], &[], &[STATUS, finalize], false),
        res::<core::v1::Node>(&["no"], &[], &[node_proxy, STATUS], false),
        res::<core::v1::PersistentVolumeClaim>(&["pvc"], &[], &[STATUS], false),
        res::<core::v1::PersistentVolume>(&["pv"], &[], &[STATUS], false),
        res::<core::v1::Pod>(&["po"], &["all"], &pod_subresources, true),
        res::<core::v1::PodTemplate>(&[], &[], &[], false),
        res::<core::v1::ReplicationController>(&["rc"], &["all"], &[SCALE, STATUS], true),
        res::<core::v1::ResourceQuota>(&["quota"], &[], &[STATUS], false),
        res::<core::v1::Secret>(&[], &[], &[], false),
        res::<core::v1::ServiceAccount>(&["sa"], &[], &[sa_token], false),
        res::<core::v1::Service>(&["svc"], &["all"], &[service_proxy, STATUS], false),
        // apps/v1
        res::<apps::v1::ControllerRevision>(&[], &[], &[], false),
        res::<apps::v1::DaemonSet>(&["ds"], &["all"], &[STATUS], true),
        res::<apps::v1::Deployment>(&["deploy"], &["all"], &[SCALE, STATUS], true),
        res::<apps::v1::ReplicaSet>(&["rs"], &["all"], &[SCALE, STATUS], true),
        res::<apps::v1::StatefulSet>(&["sts"], &["all"], &[SCALE, STATUS], true),
        // events.k8s.io/v1
        res::<events::v1::Event>(&["ev"], &[], &[], false),
        // admissionregistration.k8s.io/v1
        res::<admissionregistration::v1::MutatingWebhookConfiguration>(
            &[],
            &["api-extensions"],
            &[],
            true,
        ),
        res::<admissionregistration::v1::ValidatingWebhookConfiguration>(
            &[],
            &["api-extensions"],
            &[],
            true,
        ),
        // authorization.k8s.io/v1
        review::<authorization::v1::LocalSubjectAccessReview>(),
        review::<authorization::v1::SelfSubjectAccessReview>(),
        review::<authorization::v1::SelfSubjectRulesReview>(),
        review::<authorization::v1::SubjectAccessReview>(),
        // authentication.k8s.io/v1
        review::<authentication::v1::SelfSubjectReview>(),
        review::<authentication::v1::TokenReview>(),
        // batch/v1
        res::<batch::v1::CronJob>(&["cj"], &["all"], &[STATUS], true),
        res::<batch::v1::Job>(&[], &["all"], &[STATUS], true),
        // certificates.k8s.io/v1
        res::<certificates::v1::CertificateSigningRequest>(
            &["csr"],
            &[],
            &[APPROVAL, STATUS],
            false,
        ),
        // networking.k8s.io/v1
        res::<networking::v1::IngressClass>(&[], &[], &[], true),
        res::<networking::v1::Ingress>(&["ing"], &[], &[STATUS], true),
        res::<networking::v1::NetworkPolicy>(&["netpol"], &[], &[], true),
        // policy/v1
        res::<policy::v1::PodDisruptionBudget>(&["pdb"], &[], &[STATUS], true),
        // rbac.authorization.k8s.io/v1
        res::<rbac::v1::ClusterRoleBinding>(&[], &[], &[], false),
        res::<rbac::v1::ClusterRole>(&[], &[], &[], false),
        res::<rbac::v1::RoleBinding>(&[], &[], &[], false),
        res::<rbac::v1::Role>(&[], &[], &[], false),
        // storage.k8s.io/v1
        res::<storage::v1::CSIDriver>(&[], &[], &[], false),
        res::<storage::v1::CSINode>(&[], &[], &[], false),
        res::<storage::v1::CSIStorageCapacity>(&[], &[], &[], false),
        res::<storage::v1::StorageClass>(&["sc"], &[], &[], false),
        res::<storage::v1::VolumeAttachment>(&[], &[], &[STATUS], false),
        // apiextensions.k8s.io/v1
        res::<apiextensions::v1::CustomResourceDefinition>(
            &["crd", "crds"],
            &["api-extensions"],
            &[STATUS],
            true,
        ),
        // scheduling.k8s.io/v1
        res::<scheduling::v1::PriorityClass>(&["pc"], &[], &[], false),
        // coordination.k8s.io/v1
        res::<coordination::v1::Lease>(&[], &[], &[], false),
        // node.k8s.io/v1
        res::<node::v1::RuntimeClass>(&[], &[], &[], false),
        // discovery.k8s.io/v1
        res::<discovery::v1::EndpointSlice>(&[], &[], &[], false),
        // apiregistration.k8s.io/v1
        res::<apiregistration::v1::APIService>(&[], &["api-extensions"], &[STATUS], false),
    ]
}

/// The live catalog: built-in resources plus the custom resources of established CRDs.
pub struct Registry {
    /// (group, version, plural) → resource. Replaced wholesale on CRD changes.
    by_path: RwLock<Arc<Catalog>>,
}

/// An immutable snapshot of the catalog.
#[derive(Default)]
pub struct Catalog {
    /// In discovery order.
    pub resources: Vec<Arc<ResourceType>>,
    /// The positions in `resources` of each plural, in discovery order. Every request looks
    /// its resource up (and admission a few more per create): one hash of the plural, then
    /// group and version compared over the few resources that share it (`events` is served
    /// by two groups), with nothing allocated.
    by_plural: HashMap<String, Vec<usize>>,
    /// The same by kind.
    by_kind: HashMap<String, Vec<usize>>,
}

impl Catalog {
    fn new(resources: Vec<ResourceType>) -> Self {
        let resources: Vec<_> = resources.into_iter().map(Arc::new).collect();
        let mut by_plural: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_kind: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, r) in resources.iter().enumerate() {
            by_plural.entry(r.plural.clone()).or_default().push(i);
            by_kind.entry(r.kind.clone()).or_default().push(i);
        }
        Self {
            resources,
            by_plural,
            by_kind,
        }
    }

    fn named<'a>(
        &'a self,
        index: &'a HashMap<String, Vec<usize>>,
        name: &str,
    ) -> impl DoubleEndedIterator<Item = &'a Arc<ResourceType>> {
        index
            .get(name)
            .into_iter()
            .flatten()
            .map(|&i| &self.resources[i])
    }

    /// The resource served at `group`/`version`/`plural` (a custom resource registered
    /// after a built-in one at the same path wins, as the later registration).
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<ResourceType>> {
        self.named(&self.by_plural, plural)
            .rev()
            .find(|r| r.group == group && r.version == version)
    }

    /// The resource `group`/`plural` at its first version in discovery order.
    pub fn served(&self, group: &str, plural: &str) -> Option<&Arc<ResourceType>> {
        self.named(&self.by_plural, plural)
            .find(|r| r.group == group)
    }

    /// The built-in resource of `group`/`kind`, at its first version in discovery order.
    pub fn builtin_kind(&self, group: &str, kind: &str) -> Option<&Arc<ResourceType>> {
        self.named(&self.by_kind, kind)
            .find(|r| r.group == group && r.decode.is_some())
    }

    /// The groups in discovery order, each with its versions in order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for r in &self.resources {
            match out.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, versions)) if !versions.contains(&r.version) => {
                    versions.push(r.version.clone());
                }
                Some(_) => {}
                None => out.push((r.group.clone(), vec![r.version.clone()])),
            }
        }
        out
    }

    /// The resources of one group version.
    /// Whether any resource here is served at `group`/`version`.
    pub fn serves(&self, group: &str, version: &str) -> bool {
        self.of(group, version).next().is_some()
    }

    pub fn of(&self, group: &str, version: &str) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.resources
            .iter()
            .filter(move |r| r.group == group && r.version == version)
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    pub fn new() -> Self {
        Self {
            by_path: RwLock::new(Arc::new(Catalog::new(builtin()))),
        }
    }

    /// The current catalog.
    /// The resources the controllers watch and delete: every served resource that can be
    /// listed, watched and deleted (so not the reviews), each once (events under core only).
    pub fn collectable(&self) -> Vec<Arc<ResourceType>> {
        self.catalog()
            .resources
            .iter()
            .filter(|r| {
                ["list", "watch", "delete"]
                    .iter()
                    .all(|v| r.verbs.contains(v))
            })
            .filter(|r| !(r.group == "events.k8s.io" && r.plural == "events"))
            .cloned()
            .collect()
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.by_path
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.catalog().get(group, version, plural).cloned()
    }

    /// The built-in resource of a kind (for kinds such as `Namespace` that other code needs).
    pub fn builtin_kind(&self, group: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.catalog().builtin_kind(group, kind).cloned()
    }

    /// Replaces the set of custom resources.
    pub fn set_custom(&self, custom: Vec<ResourceType>) {
        let mut all = builtin();
        all.extend(custom);
        *self
            .by_path
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(Catalog::new(all));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_kinds_have_patch_and_apply_tables() {
        use k1s_apimachinery::apply::{TypeKey, schema_for};
        use k1s_apimachinery::patch::PatchKey;
        use k1s_apimachinery::patch::merge_keys::{Field, lookup};
        // Every stored kind the API serves, and the Scale of the scale subresources.
        let served = builtin();
        let kinds = served
            .iter()
            .filter(|r| r.verbs.len() > 1)
            .map(|r| (r.group.as_str(), r.kind.as_str()))
            .chain([("autoscaling", "Scale")]);
        for (group, kind) in kinds {
            let info = lookup(PatchKey { group, kind })
                .unwrap_or_else(|| panic!("{group}/{kind}: no merge keys"));
            assert!(
                matches!(
                    info.field_at(&["metadata", "ownerReferences"]),
                    Some(Field::MergeList { key: "uid", .. })
                ),
                "{group}/{kind}"
            );
            assert!(
                matches!(info.field_at(&["metadata", "finalizers"]), Some(Field::Set)),
                "{group}/{kind}"
            );
            assert!(
                schema_for(TypeKey { group, kind }).is_some(),
                "{group}/{kind}: no apply schema"
            );
        }
    }

    #[test]
    fn builtin_catalog_has_scopes_and_keys() {
        let reg = Registry::new();
        let pods = reg.get("", "v1", "pods").unwrap();
        assert!(pods.namespaced);
        assert_eq!(pods.kind, "Pod");
        assert_eq!(pods.key(Some("ns"), "p"), "/registry/core/pods/ns/p");
        let nodes = reg.get("", "v1", "nodes").unwrap();
        assert!(!nodes.namespaced);
        assert_eq!(nodes.key(None, "n"), "/registry/core/nodes/n");
        let deploy = reg.get("apps", "v1", "deployments").unwrap();
        assert_eq!(deploy.api_version(), "apps/v1");
        assert_eq!(deploy.qualified(), "deployments.apps");
        assert!(deploy.subresource("scale").is_some());
        let groups = reg.catalog().groups();
        assert_eq!(groups[0], ("".to_owned(), vec!["v1".to_owned()]));
    }

    #[test]
    fn lookups_answer_as_a_scan_of_the_catalog_would() {
        let cat = Registry::new().catalog();
        assert!(cat.resources.len() > 40);
        for r in &cat.resources {
            let by_path = cat.get(&r.group, &r.version, &r.plural).unwrap();
            assert!(Arc::ptr_eq(by_path, r), "{}", r.qualified());
            let first = cat
                .resources
                .iter()
                .find(|x| x.group == r.group && x.plural == r.plural);
            assert!(Arc::ptr_eq(
                cat.served(&r.group, &r.plural).unwrap(),
                first.unwrap()
            ));
            let kind = cat
                .resources
                .iter()
                .find(|x| x.group == r.group && x.kind == r.kind && x.decode.is_some());
            match (cat.builtin_kind(&r.group, &r.kind), kind) {
                (Some(a), Some(b)) => assert!(Arc::ptr_eq(a, b)),
                (None, None) => {}
                (a, b) => panic!("{}: {:?} vs {:?}", r.kind, a.is_some(), b.is_some()),
            }
        }
        // one plural served by two groups
        assert_eq!(cat.served("", "events").unwrap().group, "");
        assert_eq!(
            cat.served("events.k8s.io", "events").unwrap().group,
            "events.k8s.io"
        );
        assert!(cat.get("", "v2", "pods").is_none());
        assert!(cat.served("apps", "pods").is_none());
        assert!(cat.builtin_kind("", "Deployment").is_none());
        assert_eq!(
            cat.builtin_kind("apps", "Deployment").unwrap().plural,
            "deployments"
        );
    }

    #[test]
    fn decode_reports_unknown_fields_and_type_errors() {
        let cm = ResourceType::clone(&Registry::new().get("", "v1", "configmaps").unwrap());
        let decode = cm.decode.unwrap();
        let (norm, unknown) = decode(&serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "bogus": 1, "labels": null},
            "data": {"k": "v"}, "extra": true
        }))
        .unwrap();
        assert_eq!(unknown, vec![".extra", ".metadata.bogus"]);
        assert!(norm.get("extra").is_none());
        let pods = Registry::new().get("", "v1", "pods").unwrap();
        let err = (pods.decode.unwrap())(&serde_json::json!({"metadata": {"name": 3}}));
        assert!(matches!(err.unwrap_err(), DecodeError::Malformed(_)));
    }
}
