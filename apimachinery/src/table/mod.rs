//! Server-side printers: turn stored objects (the JSON form of Kubernetes
//! v1.33 objects) into the columns and cells of a `meta.k8s.io/v1` Table,
//! the way kube-apiserver prints them for `kubectl get`.
//!
//! * [`builtin`] gives the printer of a built-in resource, or `None` when
//!   kube-apiserver has no dedicated printer for it; such resources use
//!   [`default_printer`] (columns `Name` and `Created At`).
//! * [`custom`] builds the printer of a CustomResourceDefinition version
//!   from its `additionalPrinterColumns`.
//! * [`column_definitions_json`] renders the `columnDefinitions` array.
//!
//! The server always prints the "wide" cells (like kube-apiserver does); the
//! client hides the columns with `priority` > 0 unless `-o wide` is given.
//! Column names are spelled as upstream sends them (`Name`, `Ready`, ...);
//! kubectl upper-cases them for display.

mod apps;
mod batch;
mod core;
mod format;
pub mod jsonpath;
mod networking;
mod others;
mod rbac;
mod storage;

use jiff::Timestamp;
use serde_json::{Value, json};

pub use format::{human_duration, parse_timestamp};

/// One column as in `meta.k8s.io/v1` `TableColumnDefinition`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Column title as sent by the server, e.g. `Name`, `Ready`, `Age`.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    /// `name` for the column holding the object name, empty otherwise.
    pub format: String,
    pub description: String,
    /// 0 for normal columns, 1 for those only shown with `-o wide`.
    pub priority: i32,
}

impl Column {
    fn new(name: &str, type_: &str, description: &str) -> Self {
        Column {
            name: name.to_owned(),
            type_: type_.to_owned(),
            format: String::new(),
            description: description.to_owned(),
            priority: 0,
        }
    }

    /// A column of type `string`.
    pub(crate) fn s(name: &str, description: &str) -> Self {
        Self::new(name, "string", description)
    }

    /// A column of type `integer`.
    pub(crate) fn int(name: &str, description: &str) -> Self {
        Self::new(name, "integer", description)
    }

    /// A column of type `boolean`.
    pub(crate) fn bool(name: &str, description: &str) -> Self {
        Self::new(name, "boolean", description)
    }

    /// Shown only with `-o wide`.
    pub(crate) fn wide(mut self) -> Self {
        self.priority = 1;
        self
    }

    /// The usual first column: `Name`, format `name`.
    pub(crate) fn name() -> Self {
        let mut c = Self::s("Name", DESC_NAME);
        c.format = "name".to_owned();
        c
    }

    /// The usual `Age` column (a human duration since creation).
    pub(crate) fn age() -> Self {
        Self::s("Age", DESC_CREATION_TIMESTAMP)
    }

    pub(crate) fn containers() -> Self {
        Self::s("Containers", "Names of each container in the template.").wide()
    }

    pub(crate) fn images() -> Self {
        Self::s(
            "Images",
            "Images referenced by each container in the template.",
        )
        .wide()
    }
}

/// `ObjectMeta.name` documentation, the description upstream uses for `Name`.
pub(crate) const DESC_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// `ObjectMeta.creationTimestamp` documentation, used for `Age`/`Created At`.
pub(crate) const DESC_CREATION_TIMESTAMP: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// Turns one object into the cells of one table row.
pub trait Printer: Send + Sync {
    /// All columns, wide ones (priority 1) included.
    fn columns(&self) -> Vec<Column>;
    /// One cell per column of [`Printer::columns`], in the same order.
    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value>;
    /// The row's `conditions` (`meta.k8s.io/v1` `TableRowCondition`s), if
    /// any. Upstream only sets them for pods that have completed
    /// (`{"type":"Completed","status":"True","reason":"Succeeded",...}`).
    fn row_conditions(&self, _obj: &Value) -> Option<Value> {
        None
    }
}

/// Errors building a printer.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// `additionalPrinterColumns` is not an array of column objects.
    #[error("invalid additionalPrinterColumns: {0}")]
    InvalidColumns(String),
    /// A column's `jsonPath` cannot be parsed.
    #[error("unrecognized column definition {path:?}: {reason}")]
    InvalidJsonPath {
        path: String,
        #[source]
        reason: jsonpath::JsonPathError,
    },
}

/// The printer of a built-in resource: `group` is `""` for the core group,
/// `resource` the lower-case plural (e.g. `pods`, `deployments`).
///
/// Returns `None` when kube-apiserver has no dedicated printer for the
/// resource (e.g. `roles`, `clusterroles`, `limitranges`,
/// `customresourcedefinitions`), or when the resource is unknown; use
/// [`default_printer`] then. The printers are stateless statics.
pub fn builtin(group: &str, resource: &str) -> Option<&'static dyn Printer> {
    let p: &'static dyn Printer = match (group, resource) {
        ("", "pods") => &core::Pods,
        ("", "podtemplates") => &core::PodTemplates,
        ("", "replicationcontrollers") => &core::ReplicationControllers,
        ("", "services") => &core::Services,
        ("", "endpoints") => &core::Endpoints,
        ("", "nodes") => &core::Nodes,
        ("", "events") => &core::CORE_EVENTS,
        ("events.k8s.io", "events") => &core::EVENTS_V1,
        ("", "namespaces") => &core::Namespaces,
        ("", "secrets") => &core::Secrets,
        ("", "serviceaccounts") => &core::ServiceAccounts,
        ("", "persistentvolumes") => &core::PersistentVolumes,
        ("", "persistentvolumeclaims") => &core::PersistentVolumeClaims,
        ("", "componentstatuses") => &core::ComponentStatuses,
        ("", "configmaps") => &core::ConfigMaps,
        ("", "resourcequotas") => &core::ResourceQuotas,
        ("apps", "deployments") => &apps::Deployments,
        ("apps", "replicasets") => &apps::ReplicaSets,
        ("apps", "statefulsets") => &apps::StatefulSets,
        ("apps", "daemonsets") => &apps::DaemonSets,
        ("apps", "controllerrevisions") => &apps::ControllerRevisions,
        ("batch", "jobs") => &batch::Jobs,
        ("batch", "cronjobs") => &batch::CronJobs,
        ("autoscaling", "horizontalpodautoscalers") => &others::HorizontalPodAutoscalers,
        ("policy", "poddisruptionbudgets") => &others::PodDisruptionBudgets,
        ("scheduling.k8s.io", "priorityclasses") => &others::PriorityClasses,
        ("node.k8s.io", "runtimeclasses") => &others::RuntimeClasses,
        ("apiregistration.k8s.io", "apiservices") => &others::ApiServices,
        ("coordination.k8s.io", "leases") => &others::Leases,
        ("coordination.k8s.io", "leasecandidates") => &others::LeaseCandidates,
        ("certificates.k8s.io", "certificatesigningrequests") => {
            &others::CertificateSigningRequests
        }
        ("certificates.k8s.io", "clustertrustbundles") => &others::ClusterTrustBundles,
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations")
        | ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            &others::WebhookConfigurations
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
            &others::VALIDATING_ADMISSION_POLICIES
        }
        ("admissionregistration.k8s.io", "mutatingadmissionpolicies") => {
            &others::MUTATING_ADMISSION_POLICIES
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings")
        | ("admissionregistration.k8s.io", "mutatingadmissionpolicybindings") => {
            &others::AdmissionPolicyBindings
        }
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => &others::FlowSchemas,
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => {
            &others::PriorityLevelConfigurations
        }
        ("storage.k8s.io", "storageclasses") => &storage::StorageClasses,
        ("storage.k8s.io", "volumeattachments") => &storage::VolumeAttachments,
        ("storage.k8s.io", "csinodes") => &storage::CsiNodes,
        ("storage.k8s.io", "csidrivers") => &storage::CsiDrivers,
        ("storage.k8s.io", "csistoragecapacities") => &storage::CsiStorageCapacities,
        ("networking.k8s.io", "ingresses") => &networking::Ingresses,
        ("networking.k8s.io", "ingressclasses") => &networking::IngressClasses,
        ("networking.k8s.io", "networkpolicies") => &networking::NetworkPolicies,
        ("networking.k8s.io", "servicecidrs") => &networking::ServiceCidrs,
        ("networking.k8s.io", "ipaddresses") => &networking::IpAddresses,
        ("discovery.k8s.io", "endpointslices") => &networking::EndpointSlices,
        ("rbac.authorization.k8s.io", "rolebindings") => &rbac::ROLE_BINDINGS,
        ("rbac.authorization.k8s.io", "clusterrolebindings") => &rbac::CLUSTER_ROLE_BINDINGS,
        _ => return None,
    };
    Some(p)
}

/// What kube-apiserver prints for resources without a dedicated printer
/// (its default table convertor): `Name`, and `Created At` (type `date`)
/// whose cell is the RFC 3339 creation timestamp in UTC.
pub fn default_printer() -> &'static dyn Printer {
    &DefaultPrinter
}

struct DefaultPrinter;

impl Printer for DefaultPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Created At", "date", DESC_CREATION_TIMESTAMP),
        ]
    }

    fn cells(&self, obj: &Value, _now: Timestamp) -> Vec<Value> {
        let created = format::str_at(obj, "/metadata/creationTimestamp");
        // Go formats the zero time when the timestamp is missing.
        let created = parse_timestamp(created)
            .map(format::rfc3339_utc)
            .unwrap_or_else(|| "0001-01-01T00:00:00Z".to_owned());
        vec![format::name(obj).into(), created.into()]
    }
}

/// The printer of a CustomResourceDefinition version, built from its
/// `additionalPrinterColumns` (a JSON array of
/// `{name, type, format, description, priority, jsonPath}`; `null` or a
/// missing field is treated as empty).
///
/// The first column is always `Name`; then come the given columns. When none
/// are given, a single `Age` column (`.metadata.creationTimestamp`, type
/// `date`) is used, as kube-apiserver does.
///
/// Cells follow the upstream CRD table convertor: the first JSONPath result
/// is used; `string` columns print it (objects/arrays as JSON), `integer`,
/// `number` and `boolean` columns convert it, `date` columns show the age
/// (`5m`, `<invalid>` for a bad timestamp), and anything missing or
/// mismatched is `null`.
pub fn custom(columns: &Value) -> Result<Box<dyn Printer>, TableError> {
    let empty = Vec::new();
    let list = match columns {
        Value::Null => &empty,
        Value::Array(a) => a,
        _ => {
            return Err(TableError::InvalidColumns(
                "additionalPrinterColumns must be an array".to_owned(),
            ));
        }
    };
    let mut cols = Vec::new();
    for (i, c) in list.iter().enumerate() {
        if !c.is_object() {
            return Err(TableError::InvalidColumns(format!(
                "column {i} is not an object"
            )));
        }
        let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
        let name = field("name");
        let path_text = field("jsonPath");
        if name.is_empty() {
            return Err(TableError::InvalidColumns(format!(
                "column {i} has no name"
            )));
        }
        let path =
            jsonpath::JsonPath::parse(path_text).map_err(|reason| TableError::InvalidJsonPath {
                path: path_text.to_owned(),
                reason,
            })?;
        let description = match field("description") {
            "" => format!("Custom resource definition column (in JSONPath format): {path_text}"),
            d => d.to_owned(),
        };
        let priority = c.get("priority").and_then(Value::as_i64).unwrap_or(0);
        cols.push((
            Column {
                name: name.to_owned(),
                type_: field("type").to_owned(),
                format: field("format").to_owned(),
                description,
                priority: i32::try_from(priority).unwrap_or(0),
            },
            path,
        ));
    }
    if cols.is_empty() {
        cols.push((
            Column::new("Age", "date", DESC_CREATION_TIMESTAMP),
            jsonpath::JsonPath::parse(".metadata.creationTimestamp").map_err(|reason| {
                TableError::InvalidJsonPath {
                    path: ".metadata.creationTimestamp".to_owned(),
                    reason,
                }
            })?,
        ));
    }
    Ok(Box::new(CustomPrinter { cols }))
}

struct CustomPrinter {
    cols: Vec<(Column, jsonpath::JsonPath)>,
}

impl Printer for CustomPrinter {
    fn columns(&self) -> Vec<Column> {
        let mut v = vec![Column::name()];
        v.extend(self.cols.iter().map(|(c, _)| c.clone()));
        v
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let mut cells = vec![Value::from(format::name(obj))];
        for (col, path) in &self.cols {
            let found = path.find(obj);
            let cell = match found.first() {
                None => Value::Null,
                Some(v) => format::custom_cell(&col.type_, v, now),
            };
            cells.push(cell);
        }
        cells
    }
}

/// The `columnDefinitions` array of a Table.
pub fn column_definitions_json(cols: &[Column]) -> Value {
    Value::Array(
        cols.iter()
            .map(|c| {
                json!({
                    "name": c.name,
                    "type": c.type_,
                    "format": c.format,
                    "description": c.description,
                    "priority": c.priority,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;

    /// The "now" of all tests: 2025-06-01T12:00:00Z.
    pub fn now() -> Timestamp {
        parse_timestamp("2025-06-01T12:00:00Z").unwrap()
    }

    /// The RFC 3339 text of `now - secs`.
    pub fn ago(secs: i64) -> String {
        format::rfc3339_utc(now() - jiff::SignedDuration::from_secs(secs))
    }

    pub fn names(p: &dyn Printer) -> Vec<String> {
        p.columns().into_iter().map(|c| c.name).collect()
    }

    /// Cells as display strings (strings bare, others as JSON).
    pub fn row(p: &dyn Printer, obj: &Value) -> Vec<String> {
        let cells = p.cells(obj, now());
        assert_eq!(cells.len(), p.columns().len(), "cells/columns mismatch");
        cells
            .iter()
            .map(|c| match c {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn default_printer_prints_name_and_created_at() {
        let p = default_printer();
        assert_eq!(names(p), ["Name", "Created At"]);
        assert_eq!(p.columns()[1].type_, "date");
        let obj =
            json!({"metadata": {"name": "admin", "creationTimestamp": "2024-03-01T10:00:00Z"}});
        assert_eq!(row(p, &obj), ["admin", "2024-03-01T10:00:00Z"]);
        let obj =
            json!({"metadata": {"name": "x", "creationTimestamp": "2024-03-01T12:00:00+02:00"}});
        assert_eq!(row(p, &obj), ["x", "2024-03-01T10:00:00Z"]);
        assert_eq!(
            row(p, &json!({"metadata": {"name": "y"}})),
            ["y", "0001-01-01T00:00:00Z"]
        );
    }

    #[test]
    fn builtin_lookup() {
        assert!(builtin("", "pods").is_some());
        assert!(builtin("apps", "deployments").is_some());
        assert!(builtin("rbac.authorization.k8s.io", "clusterroles").is_none());
        assert!(builtin("apiextensions.k8s.io", "customresourcedefinitions").is_none());
        assert!(builtin("", "limitranges").is_none());
        assert!(builtin("example.com", "widgets").is_none());
        // Every printer yields one cell per column, even for an empty object.
        let all = [
            ("", "pods"),
            ("", "podtemplates"),
            ("", "replicationcontrollers"),
            ("", "services"),
            ("", "endpoints"),
            ("", "nodes"),
            ("", "events"),
            ("events.k8s.io", "events"),
            ("", "namespaces"),
            ("", "secrets"),
            ("", "serviceaccounts"),
            ("", "persistentvolumes"),
            ("", "persistentvolumeclaims"),
            ("", "componentstatuses"),
            ("", "configmaps"),
            ("", "resourcequotas"),
            ("apps", "deployments"),
            ("apps", "replicasets"),
            ("apps", "statefulsets"),
            ("apps", "daemonsets"),
            ("apps", "controllerrevisions"),
            ("batch", "jobs"),
            ("batch", "cronjobs"),
            ("autoscaling", "horizontalpodautoscalers"),
            ("policy", "poddisruptionbudgets"),
            ("scheduling.k8s.io", "priorityclasses"),
            ("node.k8s.io", "runtimeclasses"),
            ("coordination.k8s.io", "leases"),
            ("coordination.k8s.io", "leasecandidates"),
            ("certificates.k8s.io", "certificatesigningrequests"),
            ("certificates.k8s.io", "clustertrustbundles"),
            (
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations",
            ),
            (
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
            ),
            (
                "admissionregistration.k8s.io",
                "validatingadmissionpolicies",
            ),
            ("admissionregistration.k8s.io", "mutatingadmissionpolicies"),
            (
                "admissionregistration.k8s.io",
                "validatingadmissionpolicybindings",
            ),
            (
                "admissionregistration.k8s.io",
                "mutatingadmissionpolicybindings",
            ),
            ("flowcontrol.apiserver.k8s.io", "flowschemas"),
            (
                "flowcontrol.apiserver.k8s.io",
                "prioritylevelconfigurations",
            ),
            ("storage.k8s.io", "storageclasses"),
            ("storage.k8s.io", "volumeattachments"),
            ("storage.k8s.io", "csinodes"),
            ("storage.k8s.io", "csidrivers"),
            ("storage.k8s.io", "csistoragecapacities"),
            ("networking.k8s.io", "ingresses"),
            ("networking.k8s.io", "ingressclasses"),
            ("networking.k8s.io", "networkpolicies"),
            ("networking.k8s.io", "servicecidrs"),
            ("networking.k8s.io", "ipaddresses"),
            ("discovery.k8s.io", "endpointslices"),
            ("rbac.authorization.k8s.io", "rolebindings"),
            ("rbac.authorization.k8s.io", "clusterrolebindings"),
        ];
        for (g, r) in all {
            let p = builtin(g, r).unwrap_or_else(|| panic!("{g}/{r}"));
            let cols = p.columns();
            assert!(
                cols.iter().any(|c| c.name == "Name" && c.format == "name"),
                "{g}/{r}"
            );
            for obj in [
                json!({}),
                json!({"metadata": {"name": "a"}, "spec": {}, "status": {}}),
            ] {
                assert_eq!(p.cells(&obj, now()).len(), cols.len(), "{g}/{r}");
            }
        }
    }

    #[test]
    fn column_definitions_render() {
        let cols = vec![Column::name(), Column::s("IP", "ip").wide()];
        let v = column_definitions_json(&cols);
        assert_eq!(v[0]["name"], "Name");
        assert_eq!(v[0]["format"], "name");
        assert_eq!(v[0]["priority"], 0);
        assert_eq!(
            v[1],
            json!({"name": "IP", "type": "string", "format": "", "description": "ip", "priority": 1})
        );
    }

    #[test]
    fn custom_without_columns_prints_age() {
        for cols in [json!([]), Value::Null] {
            let p = custom(&cols).unwrap();
            assert_eq!(names(&*p), ["Name", "Age"]);
            assert_eq!(p.columns()[1].type_, "date");
            let obj = json!({"metadata": {"name": "w", "creationTimestamp": ago(310)}});
            assert_eq!(row(&*p, &obj), ["w", "5m10s"]);
        }
    }

    #[test]
    fn custom_columns() {
        let cols = json!([
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status", "description": "ready?"},
            {"name": "App", "type": "string", "jsonPath": ".metadata.labels.app", "priority": 1},
            {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
            {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"},
            {"name": "Ports", "type": "string", "jsonPath": ".spec.ports"},
            {"name": "First", "type": "string", "jsonPath": ".spec.ports[0].port"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            {"name": "Bad", "type": "date", "jsonPath": ".spec.when"},
            {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"},
            {"name": "Mismatch", "type": "integer", "jsonPath": ".metadata.name"},
        ]);
        let p = custom(&cols).unwrap();
        let c = p.columns();
        assert_eq!(c[0].name, "Name");
        assert_eq!(
            c[1].description,
            "Custom resource definition column (in JSONPath format): .spec.replicas"
        );
        assert_eq!(c[2].description, "ready?");
        assert_eq!(c[3].priority, 1);
        let obj = json!({
            "metadata": {"name": "w1", "creationTimestamp": ago(3 * 86400), "labels": {"app": "web"}},
            "spec": {"replicas": 3, "ratio": 1.5, "paused": false, "ports": [{"port": 80}, {"port": 443}], "when": "yesterday"},
            "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}
        });
        let cells = p.cells(&obj, now());
        assert_eq!(
            cells,
            vec![
                json!("w1"),
                json!(3),
                json!("True"),
                json!("web"),
                json!(1.5),
                json!(false),
                json!("[{\"port\":80},{\"port\":443}]"),
                json!("80"),
                json!("3d"),
                json!("<invalid>"),
                Value::Null,
                Value::Null,
            ]
        );
    }

    #[test]
    fn custom_rejects_bad_input() {
        assert!(custom(&json!({"name": "x"})).is_err());
        assert!(
            custom(&json!([{"name": "x", "type": "string", "jsonPath": ".spec[?(@.a=="}])).is_err()
        );
        assert!(custom(&json!([{"type": "string", "jsonPath": ".spec"}])).is_err());
    }
}
