//! Printers of the smaller groups: autoscaling, policy, scheduling, node,
//! coordination, certificates, admissionregistration, flowcontrol.

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::format::{
    age, arr_at, get, human_duration, int_at, int_or_string, len_at, name, opt_bool, opt_int,
    opt_str, str_at,
};
use super::{Column, Printer};

// ---------------------------------------------------------------------------
// HorizontalPodAutoscalers

pub(crate) struct HorizontalPodAutoscalers;

/// A quantity behind a pointer, printed like Go's `(*Quantity).String()`.
fn qty(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "<nil>".to_owned(),
    }
}

fn percent(v: Option<i64>) -> Option<String> {
    v.map(|p| format!("{p}%"))
}

/// The metrics and their current values; autoscaling/v1 objects carry a
/// CPU target percentage instead of `metrics`.
fn hpa_metrics(hpa: &Value) -> (Vec<Value>, Vec<Value>) {
    let specs = arr_at(hpa, "/spec/metrics").to_vec();
    let statuses = arr_at(hpa, "/status/currentMetrics").to_vec();
    if specs.is_empty()
        && let Some(target) = opt_int(hpa, "/spec/targetCPUUtilizationPercentage")
    {
        let spec = json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}});
        let status = match opt_int(hpa, "/status/currentCPUUtilizationPercentage") {
            Some(c) => vec![
                json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": c}}}),
            ],
            None => Vec::new(),
        };
        return (vec![spec], status);
    }
    (specs, statuses)
}

fn format_hpa_metrics(hpa: &Value) -> String {
    let (specs, statuses) = hpa_metrics(hpa);
    if specs.is_empty() {
        return "<none>".to_owned();
    }
    let status_of = |i: usize, key: &str| statuses.get(i).and_then(|s| get(s, &format!("/{key}")));
    let mut list: Vec<String> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let text = match str_at(spec, "/type") {
            t @ ("External" | "Object") => {
                let key = if t == "External" {
                    "external"
                } else {
                    "object"
                };
                let target = get(spec, &format!("/{key}/target"));
                let st = status_of(i, key);
                if let Some(avg) = target.and_then(|t| get(t, "/averageValue")) {
                    let current = st
                        .and_then(|s| get(s, "/current/averageValue"))
                        .map(|q| qty(Some(q)))
                        .unwrap_or_else(|| "<unknown>".to_owned());
                    format!("{current}/{} (avg)", qty(Some(avg)))
                } else {
                    let current = match st {
                        Some(s) => qty(get(s, "/current/value")),
                        None => "<unknown>".to_owned(),
                    };
                    format!("{current}/{}", qty(target.and_then(|t| get(t, "/value"))))
                }
            }
            "Pods" => {
                let current = match status_of(i, "pods") {
                    Some(s) => qty(get(s, "/current/averageValue")),
                    None => "<unknown>".to_owned(),
                };
                format!("{current}/{}", qty(get(spec, "/pods/target/averageValue")))
            }
            t @ ("Resource" | "ContainerResource") => {
                let key = if t == "Resource" {
                    "resource"
                } else {
                    "containerResource"
                };
                let rname = str_at(spec, &format!("/{key}/name"));
                let st = status_of(i, key);
                if let Some(avg) = get(spec, &format!("/{key}/target/averageValue")) {
                    let current = match st {
                        Some(s) => qty(get(s, "/current/averageValue")),
                        None => "<unknown>".to_owned(),
                    };
                    format!("{rname}: {current}/{}", qty(Some(avg)))
                } else {
                    let current = st
                        .and_then(|s| percent(opt_int(s, "/current/averageUtilization")))
                        .unwrap_or_else(|| "<unknown>".to_owned());
                    let target =
                        percent(opt_int(spec, &format!("/{key}/target/averageUtilization")))
                            .unwrap_or_else(|| "<auto>".to_owned());
                    format!("{rname}: {current}/{target}")
                }
            }
            _ => "<unknown type>".to_owned(),
        };
        list.push(text);
    }
    const MAX: usize = 2;
    let count = list.len();
    if count > MAX {
        list.truncate(MAX);
        return format!("{} + {} more...", list.join(", "), count - MAX);
    }
    list.join(", ")
}

impl Printer for HorizontalPodAutoscalers {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Reference",
                "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
            ),
            Column::s(
                "Targets",
                "metrics contains the specifications for which to use to calculate the desired replica count.",
            ),
            Column::s(
                "MinPods",
                "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
            ),
            Column::s(
                "MaxPods",
                "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
            ),
            Column::s(
                "Replicas",
                "currentReplicas is current number of replicas of pods managed by this autoscaler.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, hpa: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(hpa).into(),
            format!(
                "{}/{}",
                str_at(hpa, "/spec/scaleTargetRef/kind"),
                str_at(hpa, "/spec/scaleTargetRef/name")
            )
            .into(),
            format_hpa_metrics(hpa).into(),
            opt_int(hpa, "/spec/minReplicas")
                .map(|m| m.to_string())
                .unwrap_or_else(|| "<unset>".to_owned())
                .into(),
            int_at(hpa, "/spec/maxReplicas").into(),
            int_at(hpa, "/status/currentReplicas").into(),
            age(hpa, now),
        ]
    }
}

// ---------------------------------------------------------------------------
// PodDisruptionBudgets, PriorityClasses, RuntimeClasses

pub(crate) struct PodDisruptionBudgets;

impl Printer for PodDisruptionBudgets {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Min Available",
                "The minimum number of pods that must be available.",
            ),
            Column::s(
                "Max Unavailable",
                "The maximum number of pods that may be unavailable.",
            ),
            Column::int(
                "Allowed Disruptions",
                "Calculated number of pods that may be disrupted at this time.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let ios = |p: &str| {
            get(obj, p)
                .map(int_or_string)
                .unwrap_or_else(|| "N/A".to_owned())
        };
        vec![
            name(obj).into(),
            ios("/spec/minAvailable").into(),
            ios("/spec/maxUnavailable").into(),
            int_at(obj, "/status/disruptionsAllowed").into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct PriorityClasses;

impl Printer for PriorityClasses {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::int(
                "Value",
                "value represents the integer value of this priority class.",
            ),
            Column::bool(
                "Global-Default",
                "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class.",
            ),
            Column::age(),
            Column::s(
                "PreemptionPolicy",
                "preemptionPolicy is the Policy for preempting pods with lower priority.",
            ),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            int_at(obj, "/value").into(),
            opt_bool(obj, "/globalDefault").unwrap_or(false).into(),
            age(obj, now),
            str_at(obj, "/preemptionPolicy").into(),
        ]
    }
}

pub(crate) struct RuntimeClasses;

impl Printer for RuntimeClasses {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Handler",
                "handler specifies the underlying runtime and configuration that the CRI implementation will use to handle pods of this class.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            str_at(obj, "/handler").into(),
            age(obj, now),
        ]
    }
}

// ---------------------------------------------------------------------------
// APIServices

pub(crate) struct ApiServices;

impl Printer for ApiServices {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Service",
                "The reference to the service that hosts this API endpoint.",
            ),
            Column::s("Available", "Whether this service is available."),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let svc = &obj["spec"]["service"];
        let service = if svc.is_object() {
            format!(
                "{}/{}",
                svc["namespace"].as_str().unwrap_or(""),
                svc["name"].as_str().unwrap_or("")
            )
        } else {
            "Local".to_owned()
        };
        let available = obj["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
            .map_or_else(
                || "Unknown".to_owned(),
                |c| match c["status"].as_str().unwrap_or("") {
                    "True" => "True".to_owned(),
                    other => format!("{other} ({})", c["reason"].as_str().unwrap_or("")),
                },
            );
        vec![
            name(obj).into(),
            service.into(),
            available.into(),
            age(obj, now),
        ]
    }
}

// ---------------------------------------------------------------------------
// Leases

pub(crate) struct Leases;

impl Printer for Leases {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Holder",
                "holderIdentity contains the identity of the holder of a current lease.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            str_at(obj, "/spec/holderIdentity").into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct LeaseCandidates;

impl Printer for LeaseCandidates {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "LeaseName",
                "LeaseName is the name of the lease for which this candidate is contending.",
            ),
            Column::s("BinaryVersion", "BinaryVersion is the binary version."),
            Column::s(
                "EmulationVersion",
                "EmulationVersion is the emulation version.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            str_at(obj, "/spec/leaseName").into(),
            str_at(obj, "/spec/binaryVersion").into(),
            str_at(obj, "/spec/emulationVersion").into(),
            age(obj, now),
        ]
    }
}

// ---------------------------------------------------------------------------
// Certificates

pub(crate) struct CertificateSigningRequests;

fn csr_condition(obj: &Value) -> String {
    let conds = arr_at(obj, "/status/conditions");
    let has = |t: &str| conds.iter().any(|c| str_at(c, "/type") == t);
    let mut s = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_owned();
    if has("Failed") {
        s.push_str(",Failed");
    }
    if !str_at(obj, "/status/certificate").is_empty() {
        s.push_str(",Issued");
    }
    s
}

impl Printer for CertificateSigningRequests {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::age(),
            Column::s(
                "SignerName",
                "signerName indicates the requested signer, and is a qualified name.",
            ),
            Column::s("Requestor", "The user that created the request."),
            Column::s(
                "RequestedDuration",
                "expirationSeconds is the requested duration of validity of the issued certificate.",
            ),
            Column::s("Condition", "conditions applied to the request."),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let signer = match str_at(obj, "/spec/signerName") {
            "" => "<none>",
            s => s,
        };
        let duration = opt_int(obj, "/spec/expirationSeconds")
            .map(|s| human_duration(SignedDuration::from_secs(s)))
            .unwrap_or_else(|| "<none>".to_owned());
        vec![
            name(obj).into(),
            age(obj, now),
            signer.into(),
            str_at(obj, "/spec/username").into(),
            duration.into(),
            csr_condition(obj).into(),
        ]
    }
}

pub(crate) struct ClusterTrustBundles;

impl Printer for ClusterTrustBundles {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "SignerName",
                "signerName indicates the associated signer, if any.",
            ),
        ]
    }

    fn cells(&self, obj: &Value, _now: Timestamp) -> Vec<Value> {
        let signer = match str_at(obj, "/spec/signerName") {
            "" => "<none>",
            s => s,
        };
        vec![name(obj).into(), signer.into()]
    }
}

// ---------------------------------------------------------------------------
// Admission registration

pub(crate) struct WebhookConfigurations;

impl Printer for WebhookConfigurations {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::int(
                "Webhooks",
                "Webhooks indicates the number of webhooks registered in this configuration",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            len_at(obj, "/webhooks").into(),
            age(obj, now),
        ]
    }
}

/// Validating (`validations`) and mutating (`mutations`) admission policies.
pub(crate) struct AdmissionPolicies {
    mutating: bool,
}

pub(crate) const VALIDATING_ADMISSION_POLICIES: AdmissionPolicies =
    AdmissionPolicies { mutating: false };
pub(crate) const MUTATING_ADMISSION_POLICIES: AdmissionPolicies =
    AdmissionPolicies { mutating: true };

impl Printer for AdmissionPolicies {
    fn columns(&self) -> Vec<Column> {
        let count = if self.mutating {
            Column::int(
                "Mutations",
                "Mutation indicates the number of mutations rules defined in this configuration",
            )
        } else {
            Column::int(
                "Validations",
                "Validations indicates the number of validation rules defined in this configuration",
            )
        };
        vec![
            Column::name(),
            count,
            Column::s(
                "ParamKind",
                "ParamKind specifies the kind of resources used to parameterize this policy",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let rules = if self.mutating {
            "/spec/mutations"
        } else {
            "/spec/validations"
        };
        let param_kind = match get(obj, "/spec/paramKind") {
            Some(p) => format!("{}/{}", str_at(p, "/apiVersion"), str_at(p, "/kind")),
            None => "<unset>".to_owned(),
        };
        vec![
            name(obj).into(),
            len_at(obj, rules).into(),
            param_kind.into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct AdmissionPolicyBindings;

/// Go's generated `(*LabelSelector).String()`, which upstream prints for a
/// binding's `paramRef.selector`.
fn go_label_selector_struct(sel: &Value) -> String {
    let mut labels = String::from("map[string]string{");
    if let Some(m) = get(sel, "/matchLabels").and_then(Value::as_object) {
        let mut keys: Vec<&String> = m.keys().collect();
        keys.sort();
        for k in keys {
            labels.push_str(&format!("{k}: {},", m[k.as_str()].as_str().unwrap_or("")));
        }
    }
    labels.push('}');
    let mut exprs = String::from("[]LabelSelectorRequirement{");
    for e in arr_at(sel, "/matchExpressions") {
        let values: Vec<&str> = arr_at(e, "/values")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        exprs.push_str(&format!(
            "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
            str_at(e, "/key"),
            str_at(e, "/operator"),
            values.join(" ")
        ));
    }
    exprs.push('}');
    format!("&LabelSelector{{MatchLabels:{labels},MatchExpressions:{exprs},}}")
}

impl Printer for AdmissionPolicyBindings {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "PolicyName",
                "PolicyName indicates the policy definition which the policy binding binded to",
            ),
            Column::s(
                "ParamRef",
                "ParamRef indicates the param resource which sets the configration param",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let param = match get(obj, "/spec/paramRef") {
            None => "<unset>".to_owned(),
            Some(p) => {
                let n = str_at(p, "/name");
                if !n.is_empty() {
                    match str_at(p, "/namespace") {
                        "" => format!("*/{n}"),
                        ns => format!("{ns}/{n}"),
                    }
                } else if let Some(sel) = get(p, "/selector") {
                    go_label_selector_struct(sel)
                } else {
                    "<unset>".to_owned()
                }
            }
        };
        vec![
            name(obj).into(),
            str_at(obj, "/spec/policyName").into(),
            param.into(),
            age(obj, now),
        ]
    }
}

// ---------------------------------------------------------------------------
// Flow control

pub(crate) struct FlowSchemas;

impl Printer for FlowSchemas {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "PriorityLevel",
                "`name` is the name of the priority level configuration being referenced Required.",
            ),
            Column::s(
                "MatchingPrecedence",
                "`matchingPrecedence` is used to choose among the FlowSchemas that match a given request.",
            ),
            Column::s(
                "DistinguisherMethod",
                "`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema.",
            ),
            Column::age(),
            Column::s(
                "MissingPL",
                "references a broken or non-existent PriorityLevelConfiguration",
            ),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let missing = arr_at(obj, "/status/conditions")
            .iter()
            .find(|c| str_at(c, "/type") == "Dangling")
            .map(|c| str_at(c, "/status"))
            .unwrap_or("?");
        vec![
            name(obj).into(),
            str_at(obj, "/spec/priorityLevelConfiguration/name").into(),
            int_at(obj, "/spec/matchingPrecedence").into(),
            opt_str(obj, "/spec/distinguisherMethod/type")
                .unwrap_or("<none>")
                .into(),
            age(obj, now),
            missing.into(),
        ]
    }
}

pub(crate) struct PriorityLevelConfigurations;

impl Printer for PriorityLevelConfigurations {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Type",
                "`type` indicates whether this priority level is subject to limitation on request execution.",
            ),
            Column::s(
                "NominalConcurrencyShares",
                "`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level.",
            ),
            Column::s(
                "Queues",
                "`queues` is the number of queues for this priority level.",
            ),
            Column::s(
                "HandSize",
                "`handSize` is a small positive number that configures the shuffle sharding of requests into queues.",
            ),
            Column::s(
                "QueueLengthLimit",
                "`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let none = || Value::from("<none>");
        let (mut ncs, mut queues, mut hand, mut limit) = (none(), none(), none(), none());
        if let Some(l) = get(obj, "/spec/limited") {
            ncs = int_at(l, "/nominalConcurrencyShares").into();
            if let Some(q) = get(l, "/limitResponse/queuing") {
                queues = int_at(q, "/queues").into();
                hand = int_at(q, "/handSize").into();
                limit = int_at(q, "/queueLengthLimit").into();
            }
        }
        vec![
            name(obj).into(),
            str_at(obj, "/spec/type").into(),
            ncs,
            queues,
            hand,
            limit,
            age(obj, now),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::testutil::*;

    #[test]
    fn hpas() {
        assert_eq!(
            names(&HorizontalPodAutoscalers),
            [
                "Name",
                "Reference",
                "Targets",
                "MinPods",
                "MaxPods",
                "Replicas",
                "Age"
            ]
        );
        let hpa = json!({
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 2, "maxReplicas": 10,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                    {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}}
                ]},
            "status": {"currentReplicas": 3, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 45, "averageValue": "450m"}}}
            ]}
        });
        assert_eq!(
            row(&HorizontalPodAutoscalers, &hpa)[1..6],
            [
                "Deployment/web",
                "cpu: 45%/80%, memory: <unknown>/500Mi + 1 more...",
                "2",
                "10",
                "3"
            ]
        );
        let v1 = json!({"metadata": {"name": "old"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "x"}, "maxReplicas": 5, "targetCPUUtilizationPercentage": 50}});
        assert_eq!(
            row(&HorizontalPodAutoscalers, &v1)[2..4],
            ["cpu: <unknown>/50%", "<unset>"]
        );
        let none = json!({"metadata": {"name": "n"}, "spec": {"maxReplicas": 1}});
        assert_eq!(row(&HorizontalPodAutoscalers, &none)[2], "<none>");
        let ext = json!({"metadata": {"name": "e"}, "spec": {"metrics": [
            {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "30"}}},
            {"type": "Object", "object": {"target": {"type": "AverageValue", "averageValue": "2"}}}
        ]}, "status": {"currentMetrics": [{"type": "External", "external": {"current": {"value": "12"}}}]}});
        assert_eq!(
            row(&HorizontalPodAutoscalers, &ext)[2],
            "12/30, <unknown>/2 (avg)"
        );
    }

    #[test]
    fn pdbs_priority_runtime_leases() {
        let pdb = json!({"metadata": {"name": "zk"}, "spec": {"minAvailable": 2}, "status": {"disruptionsAllowed": 1}});
        assert_eq!(row(&PodDisruptionBudgets, &pdb)[1..4], ["2", "N/A", "1"]);
        let pdb2 = json!({"metadata": {"name": "zk"}, "spec": {"maxUnavailable": "25%"}});
        assert_eq!(row(&PodDisruptionBudgets, &pdb2)[1..4], ["N/A", "25%", "0"]);
        let pc = json!({"metadata": {"name": "system-node-critical"}, "value": 2000001000, "preemptionPolicy": "PreemptLowerPriority"});
        assert_eq!(
            PriorityClasses.cells(&pc, now()),
            vec![
                json!("system-node-critical"),
                json!(2000001000),
                json!(false),
                json!("<unknown>"),
                json!("PreemptLowerPriority")
            ]
        );
        let rc = json!({"metadata": {"name": "gvisor"}, "handler": "runsc"});
        assert_eq!(row(&RuntimeClasses, &rc)[1], "runsc");
        let lease = json!({"metadata": {"name": "kube-scheduler", "creationTimestamp": ago(3600 * 20)}, "spec": {"holderIdentity": "cp_1234"}});
        assert_eq!(row(&Leases, &lease), ["kube-scheduler", "cp_1234", "20h"]);
        let lc = json!({"metadata": {"name": "c"}, "spec": {"leaseName": "kube-scheduler", "binaryVersion": "1.33.0", "emulationVersion": "1.33"}});
        assert_eq!(
            row(&LeaseCandidates, &lc)[1..4],
            ["kube-scheduler", "1.33.0", "1.33"]
        );
    }

    #[test]
    fn csrs() {
        assert_eq!(
            names(&CertificateSigningRequests),
            [
                "Name",
                "Age",
                "SignerName",
                "Requestor",
                "RequestedDuration",
                "Condition"
            ]
        );
        let csr = json!({
            "metadata": {"name": "csr-1", "creationTimestamp": ago(30)},
            "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet", "username": "system:node:n1", "expirationSeconds": 86400},
            "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "LS0t"}
        });
        assert_eq!(
            row(&CertificateSigningRequests, &csr),
            [
                "csr-1",
                "30s",
                "kubernetes.io/kube-apiserver-client-kubelet",
                "system:node:n1",
                "24h",
                "Approved,Issued"
            ]
        );
        let pending = json!({"metadata": {"name": "p"}, "spec": {}});
        assert_eq!(
            row(&CertificateSigningRequests, &pending)[2..],
            ["<none>", "", "<none>", "Pending"]
        );
        let denied = json!({"metadata": {"name": "d"}, "status": {"conditions": [{"type": "Approved"}, {"type": "Denied"}, {"type": "Failed"}]}});
        assert_eq!(
            row(&CertificateSigningRequests, &denied)[5],
            "Denied,Failed"
        );
        let ctb = json!({"metadata": {"name": "b"}, "spec": {"trustBundle": "..."}});
        assert_eq!(row(&ClusterTrustBundles, &ctb), ["b", "<none>"]);
    }

    #[test]
    fn admission() {
        let wh = json!({"metadata": {"name": "w"}, "webhooks": [{"name": "a"}, {"name": "b"}]});
        assert_eq!(WebhookConfigurations.cells(&wh, now())[1], json!(2));
        let vap = json!({"metadata": {"name": "v"}, "spec": {"validations": [{"expression": "true"}], "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}});
        assert_eq!(
            row(&VALIDATING_ADMISSION_POLICIES, &vap)[1..3],
            ["1", "v1/ConfigMap"]
        );
        assert_eq!(names(&MUTATING_ADMISSION_POLICIES)[1], "Mutations");
        let map = json!({"metadata": {"name": "m"}, "spec": {"mutations": [{}, {}]}});
        assert_eq!(
            row(&MUTATING_ADMISSION_POLICIES, &map)[1..3],
            ["2", "<unset>"]
        );
        let b = |p: Value| json!({"metadata": {"name": "b"}, "spec": {"policyName": "pol", "paramRef": p}});
        assert_eq!(
            row(
                &AdmissionPolicyBindings,
                &b(json!({"name": "cfg", "namespace": "ns"}))
            )[1..3],
            ["pol", "ns/cfg"]
        );
        assert_eq!(
            row(&AdmissionPolicyBindings, &b(json!({"name": "cfg"})))[2],
            "*/cfg"
        );
        assert_eq!(
            row(
                &AdmissionPolicyBindings,
                &b(
                    json!({"selector": {"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [{"key": "k", "operator": "In", "values": ["x", "y"]}]}})
                )
            )[2],
            "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:k,Operator:In,Values:[x y],},},}"
        );
        let nb = json!({"metadata": {"name": "b"}, "spec": {"policyName": "pol"}});
        assert_eq!(row(&AdmissionPolicyBindings, &nb)[2], "<unset>");
    }

    #[test]
    fn flow_control() {
        let fs = json!({"metadata": {"name": "exempt"}, "spec": {"priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 1},
            "status": {"conditions": [{"type": "Dangling", "status": "False"}]}});
        assert_eq!(
            row(&FlowSchemas, &fs)[1..6],
            ["exempt", "1", "<none>", "<unknown>", "False"]
        );
        let fs2 =
            json!({"metadata": {"name": "x"}, "spec": {"distinguisherMethod": {"type": "ByUser"}}});
        assert_eq!(row(&FlowSchemas, &fs2)[3..6], ["ByUser", "<unknown>", "?"]);
        let plc = json!({"metadata": {"name": "workload-low"}, "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 100,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}});
        assert_eq!(
            PriorityLevelConfigurations.cells(&plc, now())[1..6],
            [
                json!("Limited"),
                json!(100),
                json!(128),
                json!(6),
                json!(50)
            ]
        );
        let exempt = json!({"metadata": {"name": "exempt"}, "spec": {"type": "Exempt"}});
        assert_eq!(
            row(&PriorityLevelConfigurations, &exempt)[1..6],
            ["Exempt", "<none>", "<none>", "<none>", "<none>"]
        );
    }
}
