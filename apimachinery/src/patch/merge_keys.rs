//! Strategic-merge-patch metadata of the built-in kinds k1s serves
//! (Kubernetes v1.33): which lists merge and by which key, which primitive
//! lists merge as sets, which objects carry `retainKeys` or are replaced.
//!
//! The facts are the Go struct tags `patchStrategy` / `patchMergeKey` of
//! `k8s.io/api` v0.33 (the OpenAPI `x-kubernetes-patch-strategy` /
//! `x-kubernetes-patch-merge-key`), which is what kube-apiserver's strategic
//! merge patch reads. They differ from the server-side-apply list types in
//! places: e.g. `Service.spec.ports` merges on `port` alone although its
//! list-map keys are `port`+`protocol`, and `tolerations`, `resizePolicy`,
//! `envFrom` or `readinessGates` have no patch strategy and are replaced.
//!
//! Only the paths leading to a field with a strategy are listed: anything not
//! in the table gets upstream's default for a field without tags (objects
//! merge recursively, lists are replaced), so a type without any tagged
//! field is just its `metadata`.

use super::PatchKey;

/// Patch metadata of one object type: its fields that deviate from the
/// default (objects merge, lists replace).
#[derive(Debug)]
pub struct TypeInfo {
    /// Go type name, for error messages and debugging.
    pub name: &'static str,
    pub fields: &'static [(&'static str, Field)],
}

impl TypeInfo {
    /// The metadata of field `name`, if it deviates from the default.
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.fields.iter().find(|(n, _)| *n == name).map(|(_, f)| f)
    }

    /// The metadata of the field at `path` (field names; list fields step into their
    /// items), if it and every field on the way deviate from the default.
    pub fn field_at(&self, path: &[&str]) -> Option<&'static Field> {
        let (last, parents) = path.split_last()?;
        let mut ty = self;
        for name in parents {
            ty = match ty.field(name)? {
                Field::Object(t) | Field::RetainKeysObject(t) => t,
                Field::MergeList { item: Some(t), .. } => t,
                _ => return None,
            };
        }
        ty.field(last)
    }
}

/// How strategic merge patch treats one field.
///
/// The `retainKeys` markers record upstream's tags for completeness (they
/// matter when *computing* a patch, as kubectl does); applying a patch
/// honours a `$retainKeys` directive wherever it appears, as upstream does.
#[derive(Debug)]
pub enum Field {
    /// An object merged recursively, whose own fields are described.
    Object(&'static TypeInfo),
    /// Like [`Field::Object`], tagged `patchStrategy:"retainKeys"` (a union
    /// such as Deployment `strategy`; clients send `$retainKeys` in it).
    RetainKeysObject(&'static TypeInfo),
    /// An object replaced wholesale (`patchStrategy:"replace"`).
    ReplaceObject,
    /// A list of objects merged element-wise by `key`
    /// (`patchStrategy:"merge"`, `patchMergeKey:key`). `item` describes the
    /// elements when they themselves hold tagged fields; `retain_keys` marks
    /// elements that are unions (clients send `$retainKeys` in them).
    MergeList {
        key: &'static str,
        item: Option<&'static TypeInfo>,
        retain_keys: bool,
    },
    /// A list of primitives merged as a set (`patchStrategy:"merge"`, no key).
    Set,
}

const fn keyed(key: &'static str) -> Field {
    Field::MergeList {
        key,
        item: None,
        retain_keys: false,
    }
}

const fn keyed_of(key: &'static str, item: &'static TypeInfo) -> Field {
    Field::MergeList {
        key,
        item: Some(item),
        retain_keys: false,
    }
}

const fn keyed_union(key: &'static str) -> Field {
    Field::MergeList {
        key,
        item: None,
        retain_keys: true,
    }
}

/// A type with nothing but untagged fields.
static PLAIN: TypeInfo = TypeInfo {
    name: "(no tagged fields)",
    fields: &[],
};

// ---- meta/v1 ---------------------------------------------------------------

static OBJECT_META: TypeInfo = TypeInfo {
    name: "ObjectMeta",
    fields: &[
        ("finalizers", Field::Set),
        ("ownerReferences", keyed("uid")),
    ],
};

/// Kinds whose only tagged fields are in `metadata`.
static META_ONLY: TypeInfo = TypeInfo {
    name: "(metadata only)",
    fields: &[("metadata", Field::Object(&OBJECT_META))],
};

/// The many `XxxStatus` types whose only tagged field is `conditions` by `type`.
static CONDITIONS_STATUS: TypeInfo = TypeInfo {
    name: "(status with conditions)",
    fields: &[("conditions", keyed("type"))],
};

/// Kinds whose only tagged fields are `metadata` and `status.conditions`.
static STATUS_CONDITIONS_ONLY: TypeInfo = TypeInfo {
    name: "(metadata and status.conditions)",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("status", Field::Object(&CONDITIONS_STATUS)),
    ],
};

// ---- core/v1 pods ----------------------------------------------------------

/// `Container`; `EphemeralContainer` has the same tagged fields.
static CONTAINER: TypeInfo = TypeInfo {
    name: "Container",
    fields: &[
        ("ports", keyed("containerPort")),
        ("env", keyed("name")),
        ("volumeMounts", keyed("mountPath")),
        ("volumeDevices", keyed("devicePath")),
    ],
};

static POD_SPEC: TypeInfo = TypeInfo {
    name: "PodSpec",
    fields: &[
        ("volumes", keyed_union("name")),
        ("initContainers", keyed_of("name", &CONTAINER)),
        ("containers", keyed_of("name", &CONTAINER)),
        ("ephemeralContainers", keyed_of("name", &CONTAINER)),
        ("imagePullSecrets", keyed("name")),
        ("hostAliases", keyed("ip")),
        ("topologySpreadConstraints", keyed("topologyKey")),
        ("schedulingGates", keyed("name")),
        ("resourceClaims", keyed_union("name")),
    ],
};

static POD_STATUS: TypeInfo = TypeInfo {
    name: "PodStatus",
    fields: &[
        ("conditions", keyed("type")),
        ("hostIPs", keyed("ip")),
        ("podIPs", keyed("ip")),
        ("resourceClaimStatuses", keyed_union("name")),
    ],
};

static POD: TypeInfo = TypeInfo {
    name: "Pod",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("spec", Field::Object(&POD_SPEC)),
        ("status", Field::Object(&POD_STATUS)),
    ],
};

static POD_TEMPLATE_SPEC: TypeInfo = TypeInfo {
    name: "PodTemplateSpec",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("spec", Field::Object(&POD_SPEC)),
    ],
};

static POD_TEMPLATE: TypeInfo = TypeInfo {
    name: "PodTemplate",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("template", Field::Object(&POD_TEMPLATE_SPEC)),
    ],
};

// ---- workloads: core/v1 ReplicationController, apps/v1, batch/v1 -----------

/// The spec of every controller that only embeds a pod `template`
/// (ReplicationController, ReplicaSet, StatefulSet, DaemonSet, Job).
static TEMPLATE_SPEC: TypeInfo = TypeInfo {
    name: "(spec with pod template)",
    fields: &[("template", Field::Object(&POD_TEMPLATE_SPEC))],
};

/// ReplicationController, ReplicaSet, StatefulSet, DaemonSet, Job.
static TEMPLATED_WORKLOAD: TypeInfo = TypeInfo {
    name: "(workload with pod template)",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("spec", Field::Object(&TEMPLATE_SPEC)),
        ("status", Field::Object(&CONDITIONS_STATUS)),
    ],
};

static DEPLOYMENT_SPEC: TypeInfo = TypeInfo {
    name: "DeploymentSpec",
    fields: &[
        ("template", Field::Object(&POD_TEMPLATE_SPEC)),
        ("strategy", Field::RetainKeysObject(&PLAIN)),
    ],
};

static DEPLOYMENT: TypeInfo = TypeInfo {
    name: "Deployment",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("spec", Field::Object(&DEPLOYMENT_SPEC)),
        ("status", Field::Object(&CONDITIONS_STATUS)),
    ],
};

static JOB_TEMPLATE_SPEC: TypeInfo = TypeInfo {
    name: "JobTemplateSpec",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("spec", Field::Object(&TEMPLATE_SPEC)),
    ],
};

static CRON_JOB_SPEC: TypeInfo = TypeInfo {
    name: "CronJobSpec",
    fields: &[("jobTemplate", Field::Object(&JOB_TEMPLATE_SPEC))],
};

static CRON_JOB: TypeInfo = TypeInfo {
    name: "CronJob",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("spec", Field::Object(&CRON_JOB_SPEC)),
    ],
};

// ---- other core/v1 ---------------------------------------------------------

static SERVICE_SPEC: TypeInfo = TypeInfo {
    name: "ServiceSpec",
    fields: &[("ports", keyed("port"))],
};

static SERVICE: TypeInfo = TypeInfo {
    name: "Service",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("spec", Field::Object(&SERVICE_SPEC)),
        ("status", Field::Object(&CONDITIONS_STATUS)),
    ],
};

static SERVICE_ACCOUNT: TypeInfo = TypeInfo {
    name: "ServiceAccount",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("secrets", keyed("name")),
    ],
};

static NODE_SPEC: TypeInfo = TypeInfo {
    name: "NodeSpec",
    fields: &[("podCIDRs", Field::Set)],
};

static NODE_STATUS: TypeInfo = TypeInfo {
    name: "NodeStatus",
    fields: &[("conditions", keyed("type")), ("addresses", keyed("type"))],
};

static NODE: TypeInfo = TypeInfo {
    name: "Node",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("spec", Field::Object(&NODE_SPEC)),
        ("status", Field::Object(&NODE_STATUS)),
    ],
};

// ---- policy, storage, admissionregistration ---------------------------------

static PDB_SPEC: TypeInfo = TypeInfo {
    name: "PodDisruptionBudgetSpec",
    fields: &[("selector", Field::ReplaceObject)],
};

static POD_DISRUPTION_BUDGET: TypeInfo = TypeInfo {
    name: "PodDisruptionBudget",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("spec", Field::Object(&PDB_SPEC)),
        ("status", Field::Object(&CONDITIONS_STATUS)),
    ],
};

static CSI_NODE_SPEC: TypeInfo = TypeInfo {
    name: "CSINodeSpec",
    fields: &[("drivers", keyed("name"))],
};

static CSI_NODE: TypeInfo = TypeInfo {
    name: "CSINode",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("spec", Field::Object(&CSI_NODE_SPEC)),
    ],
};

static WEBHOOK: TypeInfo = TypeInfo {
    name: "(Validating|Mutating)Webhook",
    fields: &[("matchConditions", keyed("name"))],
};

static WEBHOOK_CONFIGURATION: TypeInfo = TypeInfo {
    name: "(Validating|Mutating)WebhookConfiguration",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("webhooks", keyed_of("name", &WEBHOOK)),
    ],
};

static VALIDATING_ADMISSION_POLICY_SPEC: TypeInfo = TypeInfo {
    name: "ValidatingAdmissionPolicySpec",
    fields: &[
        ("matchConditions", keyed("name")),
        ("variables", keyed("name")),
    ],
};

static VALIDATING_ADMISSION_POLICY: TypeInfo = TypeInfo {
    name: "ValidatingAdmissionPolicy",
    fields: &[
        ("metadata", Field::Object(&OBJECT_META)),
        ("spec", Field::Object(&VALIDATING_ADMISSION_POLICY_SPEC)),
    ],
};

/// Patch metadata of the root type of `key`, or `None` when strategic merge
/// patch is not supported for it (custom resources and kinds k1s does not
/// know; upstream answers 415 for those).
pub fn lookup(key: PatchKey<'_>) -> Option<&'static TypeInfo> {
    let info = match (key.group, key.kind) {
        ("", "Pod") => &POD,
        ("", "PodTemplate") => &POD_TEMPLATE,
        ("", "ReplicationController") => &TEMPLATED_WORKLOAD,
        ("", "Service") => &SERVICE,
        ("", "ServiceAccount") => &SERVICE_ACCOUNT,
        ("", "Node") => &NODE,
        ("", "Namespace" | "PersistentVolumeClaim") | ("apiregistration.k8s.io", "APIService") => {
            &STATUS_CONDITIONS_ONLY
        }
        (
            "",
            "Endpoints" | "ConfigMap" | "Secret" | "Event" | "PersistentVolume" | "LimitRange"
            | "ResourceQuota",
        ) => &META_ONLY,
        ("apps", "Deployment") => &DEPLOYMENT,
        ("apps", "ReplicaSet" | "StatefulSet" | "DaemonSet") | ("batch", "Job") => {
            &TEMPLATED_WORKLOAD
        }
        ("apps", "ControllerRevision") => &META_ONLY,
        ("batch", "CronJob") => &CRON_JOB,
        ("coordination.k8s.io", "Lease")
        | ("discovery.k8s.io", "EndpointSlice")
        | ("events.k8s.io", "Event")
        | ("scheduling.k8s.io", "PriorityClass")
        | ("node.k8s.io", "RuntimeClass")
        | ("certificates.k8s.io", "CertificateSigningRequest")
        | ("apiextensions.k8s.io", "CustomResourceDefinition") => &META_ONLY,
        ("policy", "PodDisruptionBudget") => &POD_DISRUPTION_BUDGET,
        ("storage.k8s.io", "CSINode") => &CSI_NODE,
        (
            "storage.k8s.io",
            "StorageClass" | "CSIDriver" | "VolumeAttachment" | "CSIStorageCapacity",
        ) => &META_ONLY,
        ("networking.k8s.io", "NetworkPolicy" | "Ingress" | "IngressClass" | "IPAddress") => {
            &META_ONLY
        }
        ("networking.k8s.io", "ServiceCIDR") => &STATUS_CONDITIONS_ONLY,
        (
            "rbac.authorization.k8s.io",
            "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding",
        ) => &META_ONLY,
        // Scale (the /scale subresource) and HorizontalPodAutoscaler; only
        // autoscaling/v2's HPA status has tagged conditions.
        ("autoscaling", "Scale") => &META_ONLY,
        ("autoscaling", "HorizontalPodAutoscaler") => &STATUS_CONDITIONS_ONLY,
        ("flowcontrol.apiserver.k8s.io", "FlowSchema" | "PriorityLevelConfiguration") => {
            &STATUS_CONDITIONS_ONLY
        }
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
        ) => &WEBHOOK_CONFIGURATION,
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            &VALIDATING_ADMISSION_POLICY
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => &META_ONLY,
        _ => return None,
    };
    Some(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key<'a>(group: &'a str, kind: &'a str) -> PatchKey<'a> {
        PatchKey { group, kind }
    }

    fn field_at(root: &'static TypeInfo, path: &[&str]) -> Option<&'static Field> {
        root.field_at(path)
    }

    fn merge_key(f: Option<&Field>) -> Option<&'static str> {
        match f {
            Some(Field::MergeList { key, .. }) => Some(key),
            _ => None,
        }
    }

    /// Every kind the API server serves is covered: its own test
    /// (`k1s_apiserver::registry`, `served_kinds_have_patch_and_apply_tables`).
    #[test]
    fn unknown_kinds_are_not_covered() {
        assert!(lookup(key("example.com", "Widget")).is_none());
        assert!(lookup(key("apps", "Pod")).is_none());
    }

    #[test]
    fn upstream_patch_tags() {
        let deploy = lookup(key("apps", "Deployment")).unwrap();
        let pod_spec = ["spec", "template", "spec"];
        let at = |tail: &[&str]| field_at(deploy, &[&pod_spec[..], tail].concat());
        assert_eq!(merge_key(at(&["containers"])), Some("name"));
        assert_eq!(merge_key(at(&["initContainers", "env"])), Some("name"));
        assert_eq!(
            merge_key(at(&["containers", "ports"])),
            Some("containerPort")
        );
        assert_eq!(
            merge_key(at(&["containers", "volumeMounts"])),
            Some("mountPath")
        );
        assert_eq!(
            merge_key(at(&["containers", "volumeDevices"])),
            Some("devicePath")
        );
        assert_eq!(merge_key(at(&["imagePullSecrets"])), Some("name"));
        assert_eq!(merge_key(at(&["hostAliases"])), Some("ip"));
        assert_eq!(
            merge_key(at(&["topologySpreadConstraints"])),
            Some("topologyKey")
        );
        assert!(matches!(
            at(&["volumes"]),
            Some(Field::MergeList {
                key: "name",
                retain_keys: true,
                ..
            })
        ));
        // No patch strategy upstream: replaced.
        assert!(at(&["tolerations"]).is_none());
        assert!(at(&["containers", "resizePolicy"]).is_none());
        assert!(at(&["containers", "envFrom"]).is_none());
        assert!(matches!(
            field_at(deploy, &["spec", "strategy"]),
            Some(Field::RetainKeysObject(_))
        ));
        assert_eq!(
            merge_key(field_at(deploy, &["status", "conditions"])),
            Some("type")
        );

        let svc = lookup(key("", "Service")).unwrap();
        assert_eq!(merge_key(field_at(svc, &["spec", "ports"])), Some("port"));
        let node = lookup(key("", "Node")).unwrap();
        assert!(matches!(
            field_at(node, &["spec", "podCIDRs"]),
            Some(Field::Set)
        ));
        assert!(field_at(node, &["spec", "taints"]).is_none());
        assert_eq!(
            merge_key(field_at(node, &["status", "addresses"])),
            Some("type")
        );
        let cron = lookup(key("batch", "CronJob")).unwrap();
        let path = [
            "spec",
            "jobTemplate",
            "spec",
            "template",
            "spec",
            "containers",
            "env",
        ];
        assert_eq!(merge_key(field_at(cron, &path)), Some("name"));
        let pdb = lookup(key("policy", "PodDisruptionBudget")).unwrap();
        assert!(matches!(
            field_at(pdb, &["spec", "selector"]),
            Some(Field::ReplaceObject)
        ));
    }
}
