//! Validation of the core types beyond what typing catches, with kube-apiserver's field
//! paths and messages: pod specs (also inside workload templates), pod update rules,
//! deployments, services and persistent volume claims. Each check returns
//! `(field path, message)` causes for a 422 Invalid.

use serde_json::Value;

use k1s_api::quantity::Quantity;
use k1s_api::selector::is_dns_label;

type Causes = Vec<(String, String)>;

const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];

fn quoted(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn unsupported(v: &Value, allowed: &[&str]) -> String {
    let list: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "Unsupported value: {}: supported values: {}",
        quoted(v),
        list.join(", ")
    )
}

/// An IANA service name as ports carry them: at most 15 lowercase alphanumerics or `-`, at
/// least one letter, no `--`, not starting or ending with `-`.
pub fn is_port_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().any(|b| b.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

fn port_number_ok(v: &Value) -> bool {
    v.as_i64().is_some_and(|p| (1..=65535).contains(&p))
}

/// A Kubernetes quantity (`100m`, `1.5Gi`, `2e3`), exact, for comparisons.
pub fn parse_quantity(s: &str) -> Option<Quantity> {
    Quantity::parse(s.trim()).ok()
}

/// A pod spec at `path` (`spec`, or `spec.template.spec` of a workload).
pub fn pod_spec(path: &str, spec: &Value, out: &mut Causes) {
    let containers = spec["containers"].as_array().map_or(&[][..], Vec::as_slice);
    if containers.is_empty() {
        out.push((format!("{path}.containers"), "Required value".into()));
    }
    let volumes: Vec<&str> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for (i, name) in volumes.iter().enumerate() {
        if !is_dns_label(name) {
            out.push((format!("{path}.volumes[{i}].name"), format!("Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character")));
        } else if volumes[..i].contains(name) {
            out.push((
                format!("{path}.volumes[{i}].name"),
                format!("Duplicate value: \"{name}\""),
            ));
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for list in ["initContainers", "containers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            let at = format!("{path}.{list}[{i}]");
            container(&at, c, &volumes, &mut names, out);
        }
    }
    for (field, allowed) in [
        ("restartPolicy", &["Always", "OnFailure", "Never"][..]),
        (
            "dnsPolicy",
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"][..],
        ),
    ] {
        let v = &spec[field];
        if !v.is_null() && !v.as_str().is_some_and(|s| allowed.contains(&s)) {
            out.push((format!("{path}.{field}"), unsupported(v, allowed)));
        }
    }
}

fn container<'a>(
    at: &str,
    c: &'a Value,
    volumes: &[&str],
    names: &mut Vec<&'a str>,
    out: &mut Causes,
) {
    match c["name"].as_str().unwrap_or("") {
        "" => out.push((format!("{at}.name"), "Required value".into())),
        n if !is_dns_label(n) => out.push((format!("{at}.name"), format!("Invalid value: \"{n}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"))),
        n if names.contains(&n) => out.push((format!("{at}.name"), format!("Duplicate value: \"{n}\""))),
        n => names.push(n),
    }
    if c["image"].as_str().unwrap_or("").trim().is_empty() {
        out.push((format!("{at}.image"), "Required value".into()));
    }
    let mut port_names = Vec::new();
    for (j, p) in c["ports"].as_array().into_iter().flatten().enumerate() {
        let pat = format!("{at}.ports[{j}]");
        if !port_number_ok(&p["containerPort"]) {
            out.push((
                format!("{pat}.containerPort"),
                format!(
                    "Invalid value: {}: must be between 1 and 65535, inclusive",
                    p["containerPort"]
                ),
            ));
        }
        if !p["hostPort"].is_null() && !port_number_ok(&p["hostPort"]) {
            out.push((
                format!("{pat}.hostPort"),
                format!(
                    "Invalid value: {}: must be between 1 and 65535, inclusive",
                    p["hostPort"]
                ),
            ));
        }
        if !p["protocol"].is_null()
            && !p["protocol"]
                .as_str()
                .is_some_and(|s| PROTOCOLS.contains(&s))
        {
            out.push((
                format!("{pat}.protocol"),
                unsupported(&p["protocol"], PROTOCOLS),
            ));
        }
        if let Some(n) = p["name"].as_str() {
            if !is_port_name(n) {
                out.push((format!("{pat}.name"), format!("Invalid value: \"{n}\": must be no more than 15 characters, contain only lowercase alphanumeric characters or '-', contain at least one letter, and not start or end with '-' or contain '--'")));
            } else if port_names.contains(&n) {
                out.push((format!("{pat}.name"), format!("Duplicate value: \"{n}\"")));
            }
            port_names.push(n);
        }
    }
    for (j, e) in c["env"].as_array().into_iter().flatten().enumerate() {
        let n = e["name"].as_str().unwrap_or("");
        let ok = !n.is_empty() && !n.contains('=') && n.bytes().all(|b| (0x20..0x7f).contains(&b));
        if !ok {
            out.push((format!("{at}.env[{j}].name"), format!("Invalid value: \"{n}\": a valid environment variable name must consist only of printable ASCII characters other than '='")));
        }
    }
    for (j, m) in c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let n = m["name"].as_str().unwrap_or("");
        if !volumes.contains(&n) {
            out.push((
                format!("{at}.volumeMounts[{j}].name"),
                format!("Not found: \"{n}\""),
            ));
        }
        if m["mountPath"].as_str().unwrap_or("").is_empty() {
            out.push((
                format!("{at}.volumeMounts[{j}].mountPath"),
                "Required value".into(),
            ));
        }
    }
    let res = &c["resources"];
    for (r, req) in res["requests"].as_object().into_iter().flatten() {
        let (Some(rq), Some(lim)) = (
            req.as_str().and_then(parse_quantity),
            res["limits"][r].as_str().and_then(parse_quantity),
        ) else {
            continue;
        };
        if rq > lim {
            out.push((
                format!("{at}.resources.requests"),
                format!(
                    "Invalid value: \"{}\": must be less than or equal to {r} limit of {}",
                    req.as_str().unwrap_or(""),
                    res["limits"][r].as_str().unwrap_or("")
                ),
            ));
        }
    }
    for kind in ["requests", "limits"] {
        for (r, q) in res[kind].as_object().into_iter().flatten() {
            if q.as_str()
                .and_then(parse_quantity)
                .is_none_or(|v| v.sign() < 0)
            {
                out.push((
                    format!("{at}.resources.{kind}[{r}]"),
                    format!(
                        "Invalid value: {}: must be a valid non-negative quantity",
                        quoted(q)
                    ),
                ));
            }
        }
    }
}

/// Pod updates may change only images, activeDeadlineSeconds, tolerations (additions) and the
/// grace period, as upstream allows.
pub fn pod_update(old: &Value, new: &Value, out: &mut Causes) {
    let mut a = old["spec"].clone();
    let b = &new["spec"];
    for list in ["initContainers", "containers"] {
        if let (Some(ac), Some(bc)) = (
            a.get_mut(list).and_then(Value::as_array_mut),
            b[list].as_array(),
        ) && ac.len() == bc.len()
        {
            for (x, y) in ac.iter_mut().zip(bc) {
                x["image"] = y["image"].clone();
            }
        }
    }
    for f in [
        "activeDeadlineSeconds",
        "tolerations",
        "terminationGracePeriodSeconds",
        "schedulingGates",
        "nodeName",
    ] {
        a[f] = b[f].clone();
    }
    if without_nulls(&a) != without_nulls(b) {
        out.push(("spec".into(), "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)".into()));
    }
}

/// `v` without object keys whose value is null (absent and null mean the same here).
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// `spec.F: Invalid value: N: must be greater than or equal to 0` for each negative field.
fn non_negative(spec: &Value, fields: &[&str], out: &mut Causes) {
    for f in fields {
        if spec[f].as_i64().is_some_and(|n| n < 0) {
            out.push((
                format!("spec.{f}"),
                format!(
                    "Invalid value: {}: must be greater than or equal to 0",
                    spec[f]
                ),
            ));
        }
    }
}

/// A ReplicationController, as upstream's `ValidateReplicationControllerSpec`: a non-empty
/// selector the template's labels match, a template whose pods restart `Always`, and
/// non-negative counts; the template's pod spec as any pod's.
pub fn replication_controller(obj: &Value, out: &mut Causes) {
    let spec = &obj["spec"];
    non_negative(spec, &["replicas", "minReadySeconds"], out);
    let selector = spec["selector"].as_object().filter(|s| !s.is_empty());
    let Some(selector) = selector else {
        out.push(("spec.selector".into(), "Required value".into()));
        return;
    };
    let template = &spec["template"];
    if !template.is_object() {
        out.push(("spec.template".into(), "Required value".into()));
        return;
    }
    let labels = &template["metadata"]["labels"];
    if selector.iter().any(|(k, v)| labels.get(k) != Some(v)) {
        out.push((
            "spec.template.metadata.labels".into(),
            format!(
                "Invalid value: {}: `selector` does not match template `labels`",
                serde_json::to_string(labels).unwrap_or_default()
            ),
        ));
    }
    let restart = &template["spec"]["restartPolicy"];
    if !restart.is_null() && restart != "Always" {
        out.push((
            "spec.template.spec.restartPolicy".into(),
            unsupported(restart, &["Always"]),
        ));
    }
    pod_spec("spec.template.spec", &template["spec"], out);
}

pub fn deployment(obj: &Value, old: Option<&Value>, out: &mut Causes) {
    let spec = &obj["spec"];
    non_negative(
        spec,
        &[
            "replicas",
            "revisionHistoryLimit",
            "minReadySeconds",
            "progressDeadlineSeconds",
        ],
        out,
    );
    let ty = &spec["strategy"]["type"];
    if !ty.is_null() && !matches!(ty.as_str(), Some("RollingUpdate" | "Recreate")) {
        out.push((
            "spec.strategy.type".into(),
            unsupported(ty, &["Recreate", "RollingUpdate"]),
        ));
    }
    let ru = &spec["strategy"]["rollingUpdate"];
    let zero =
        |v: &Value| v.as_i64() == Some(0) || v.as_str() == Some("0%") || v.as_str() == Some("0");
    if ty == "RollingUpdate" && zero(&ru["maxUnavailable"]) && zero(&ru["maxSurge"]) {
        out.push((
            "spec.strategy.rollingUpdate.maxUnavailable".into(),
            "Invalid value: 0: may not be 0 when `maxSurge` is 0".into(),
        ));
    }
    if ty == "Recreate" && !ru.is_null() {
        out.push((
            "spec.strategy.rollingUpdate".into(),
            "Forbidden: may not be specified when strategy `type` is 'Recreate'".into(),
        ));
    }
    selector_immutable(obj, old, out);
}

/// A PriorityClass's `value` and `preemptionPolicy` cannot change (upstream's
/// `ValidatePriorityClassUpdate`).
pub fn priority_class(obj: &Value, old: Option<&Value>, out: &mut Causes) {
    let Some(old) = old else {
        return;
    };
    if old["value"] != obj["value"] {
        out.push((
            "value".into(),
            "Forbidden: may not be changed in an update.".into(),
        ));
    }
    if old["preemptionPolicy"] != obj["preemptionPolicy"] {
        out.push((
            "preemptionPolicy".into(),
            format!(
                "Invalid value: {}: field is immutable",
                quoted(&obj["preemptionPolicy"])
            ),
        ));
    }
}

/// apps/v1 selectors cannot change.
pub fn selector_immutable(obj: &Value, old: Option<&Value>, out: &mut Causes) {
    if let Some(old) = old
        && old["spec"]["selector"] != obj["spec"]["selector"]
    {
        out.push((
            "spec.selector".into(),
            format!(
                "Invalid value: {}: field is immutable",
                quoted(&obj["spec"]["selector"])
            ),
        ));
    }
}

pub fn service(obj: &Value, out: &mut Causes) {
    let spec = &obj["spec"];
    let ty = spec["type"].as_str().unwrap_or("ClusterIP");
    const TYPES: &[&str] = &["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];
    if !TYPES.contains(&ty) {
        out.push(("spec.type".into(), unsupported(&spec["type"], TYPES)));
    }
    let ports = spec["ports"].as_array().map_or(&[][..], Vec::as_slice);
    let headless = spec["clusterIP"] == "None";
    if ty == "ExternalName" {
        if spec["externalName"].as_str().unwrap_or("").is_empty() {
            out.push(("spec.externalName".into(), "Required value".into()));
        }
    } else if ports.is_empty() && !headless {
        out.push(("spec.ports".into(), "Required value".into()));
    }
    let mut names = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let at = format!("spec.ports[{i}]");
        match p["name"].as_str() {
            None | Some("") if ports.len() > 1 => out.push((format!("{at}.name"), "Required value".into())),
            Some(n) if !n.is_empty() && !is_dns_label(n) => out.push((format!("{at}.name"), format!("Invalid value: \"{n}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"))),
            Some(n) if names.contains(&n) => out.push((format!("{at}.name"), format!("Duplicate value: \"{n}\""))),
            Some(n) => names.push(n),
            None => {}
        }
        if !port_number_ok(&p["port"]) {
            out.push((
                format!("{at}.port"),
                format!(
                    "Invalid value: {}: must be between 1 and 65535, inclusive",
                    p["port"]
                ),
            ));
        }
        if !p["protocol"].is_null()
            && !p["protocol"]
                .as_str()
                .is_some_and(|s| PROTOCOLS.contains(&s))
        {
            out.push((
                format!("{at}.protocol"),
                unsupported(&p["protocol"], PROTOCOLS),
            ));
        }
        let tp = &p["targetPort"];
        let tp_ok = tp.is_null() || port_number_ok(tp) || tp.as_str().is_some_and(is_port_name);
        if !tp_ok {
            out.push((
                format!("{at}.targetPort"),
                format!(
                    "Invalid value: {}: must be between 1 and 65535, inclusive, or a port name",
                    quoted(tp)
                ),
            ));
        }
    }
}

const ACCESS_MODES: &[&str] = &[
    "ReadWriteOnce",
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOncePod",
];

pub fn pvc(obj: &Value, old: Option<&Value>, out: &mut Causes) {
    let spec = &obj["spec"];
    let modes = spec["accessModes"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if modes.is_empty() {
        out.push((
            "spec.accessModes".into(),
            "Required value: at least 1 access mode is required".into(),
        ));
    }
    for m in modes {
        if !m.as_str().is_some_and(|s| ACCESS_MODES.contains(&s)) {
            out.push(("spec.accessModes".into(), unsupported(m, ACCESS_MODES)));
        }
    }
    if spec["resources"]["requests"]["storage"].is_null() && spec["dataSourceRef"].is_null() {
        out.push(("spec.resources[storage]".into(), "Required value".into()));
    }
    if let Some(old) = old {
        let mut a = old["spec"].clone();
        let b = &spec;
        // Requests may change only once the claim is bound; a decrease not below what it has
        // (a request smaller than a bigger bound volume is fine while it does not shrink).
        if !a["volumeName"].as_str().unwrap_or("").is_empty() {
            a["resources"]["requests"] = b["resources"]["requests"].clone();
            let size = |v: &Value| v.as_str().and_then(parse_quantity);
            if let (Some(new), Some(prev), Some(cap)) = (
                size(&b["resources"]["requests"]["storage"]),
                size(&old["spec"]["resources"]["requests"]["storage"]),
                size(&old["status"]["capacity"]["storage"]),
            ) && new < prev
                && new < cap
            {
                out.push((
                    "spec.resources.requests.storage".into(),
                    "Forbidden: field can not be less than status.capacity".into(),
                ));
            }
        }
        a["volumeAttributesClassName"] = b["volumeAttributesClassName"].clone();
        if a["volumeName"].as_str().unwrap_or("").is_empty() {
            a["volumeName"] = b["volumeName"].clone();
        }
        if without_nulls(&a) != without_nulls(b) {
            out.push(("spec".into(), "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims".into()));
        }
    }
}

/// Upstream's `ValidateTolerations`: a key is a label name, an empty key needs `Exists`,
/// `tolerationSeconds` only with `NoExecute`, values are label values and empty under
/// `Exists`, and operator and effect are known ones.
pub fn tolerations(path: &str, list: &Value, out: &mut Causes) {
    for (i, t) in list.as_array().into_iter().flatten().enumerate() {
        let at = format!("{path}[{i}]");
        let key = t["key"].as_str().unwrap_or("");
        if !key.is_empty() {
            for msg in k1s_apimachinery::crd_schema::is_qualified_name(key) {
                out.push((
                    format!("{at}.key"),
                    format!("Invalid value: {}: {msg}", quoted(&t["key"])),
                ));
            }
        }
        let op = t["operator"].as_str().unwrap_or("");
        if key.is_empty() && op != "Exists" {
            out.push((
                format!("{at}.operator"),
                format!("Invalid value: {}: operator must be Exists when `key` is empty, which means \"match all values and all keys\"", quoted(&Value::from(op))),
            ));
        }
        let effect = t["effect"].as_str().unwrap_or("");
        if !t["tolerationSeconds"].is_null() && effect != "NoExecute" {
            out.push((
                format!("{at}.effect"),
                format!(
                    "Invalid value: {}: effect must be 'NoExecute' when `tolerationSeconds` is set",
                    quoted(&Value::from(effect))
                ),
            ));
        }
        let value = t["value"].as_str().unwrap_or("");
        match op {
            "Equal" | "" => {
                let errs = k1s_apimachinery::crd_schema::is_label_value(value);
                if !errs.is_empty() {
                    out.push((
                        format!("{at}.operator"),
                        format!(
                            "Invalid value: {}: {}",
                            quoted(&Value::from(value)),
                            errs.join(";")
                        ),
                    ));
                }
            }
            "Exists" if !value.is_empty() => out.push((
                format!("{at}.operator"),
                format!(
                    "Invalid value: {}: value must be empty when `operator` is 'Exists'",
                    quoted(t)
                ),
            )),
            "Exists" => {}
            _ => out.push((
                format!("{at}.operator"),
                unsupported(&t["operator"], &["Equal", "Exists"]),
            )),
        }
        if !effect.is_empty() && !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute")
        {
            out.push((
                format!("{at}.effect"),
                unsupported(
                    &t["effect"],
                    &["NoSchedule", "PreferNoSchedule", "NoExecute"],
                ),
            ));
        }
    }
}

/// An APIService, as upstream's `ValidateAPIService`: named `VERSION.GROUP`, priorities in
/// range, and TLS settings only for one backed by a Service (and not both a CA and no check).
pub fn api_service(obj: &Value, out: &mut Causes) {
    let spec = &obj["spec"];
    let group = spec["group"].as_str().unwrap_or("");
    let version = spec["version"].as_str().unwrap_or("");
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    if version.is_empty() {
        out.push(("spec.version".into(), "Required value".into()));
    }
    let want = format!("{version}.{group}");
    if name != want {
        out.push((
            "metadata.name".into(),
            format!("Invalid value: {name:?}: must be {want}"),
        ));
    }
    let in_range = |field: &str, max: i64, msg: &str, out: &mut Causes| {
        let v = spec[field].as_i64().unwrap_or(0);
        if v <= 0 || v > max {
            out.push((
                format!("spec.{field}"),
                format!("Invalid value: {v}: {msg}"),
            ));
        }
    };
    in_range(
        "groupPriorityMinimum",
        20000,
        "must be positive and less than 20000",
        out,
    );
    in_range(
        "versionPriority",
        1000,
        "must be positive and less than 1000",
        out,
    );
    let ca = spec["caBundle"].as_str().is_some_and(|c| !c.is_empty());
    let insecure = spec["insecureSkipTLSVerify"] == true;
    if spec["service"].is_object() {
        if insecure && ca {
            out.push((
                "spec.insecureSkipTLSVerify".into(),
                "Invalid value: true: may not be true if caBundle is present".into(),
            ));
        }
        if spec["service"]["name"].as_str().unwrap_or("").is_empty() {
            out.push(("spec.service.name".into(), "Required value".into()));
        }
        if spec["service"]["namespace"]
            .as_str()
            .unwrap_or("")
            .is_empty()
        {
            out.push(("spec.service.namespace".into(), "Required value".into()));
        }
    } else {
        if ca {
            out.push((
                "spec.caBundle".into(),
                "Invalid value: \"<ca bundle>\": local APIServices may not have a caBundle".into(),
            ));
        }
        if insecure {
            out.push((
                "spec.insecureSkipTLSVerify".into(),
                "Invalid value: true: local APIServices may not have insecureSkipTLSVerify".into(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(c: &Causes) -> Vec<&str> {
        c.iter().map(|(f, _)| f.as_str()).collect()
    }

    #[test]
    fn quantities() {
        let q = |s: &str| parse_quantity(s).map(|q| q.nanos());
        assert_eq!(q("100m"), Some(100_000_000));
        assert_eq!(q("1Gi"), Some(1i128 << 30).map(|v| v * 1_000_000_000));
        assert_eq!(q("2e3"), Some(2_000_000_000_000));
        assert_eq!(q("1.5"), Some(1_500_000_000));
        assert_eq!(q("abc"), None);
        assert_eq!(q("1Qi"), None);
        assert!(parse_quantity("1500m") > parse_quantity("1"));
    }

    #[test]
    fn pod_specs() {
        let mut c = Vec::new();
        pod_spec(
            "spec",
            &json!({"containers": [
            {"name": "a", "image": "i", "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 70000, "name": "http", "protocol": "XTP"}],
             "volumeMounts": [{"name": "missing", "mountPath": "/x"}],
             "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1", "memory": "lots"}}},
            {"name": "a", "image": ""}],
            "restartPolicy": "Sometimes"}),
            &mut c,
        );
        let f = fields(&c);
        for want in [
            "spec.containers[0].ports[1].containerPort",
            "spec.containers[0].ports[1].protocol",
            "spec.containers[0].ports[1].name",
            "spec.containers[0].volumeMounts[0].name",
            "spec.containers[0].resources.requests",
            "spec.containers[0].resources.limits[memory]",
            "spec.containers[1].name",
            "spec.containers[1].image",
            "spec.restartPolicy",
        ] {
            assert!(f.contains(&want), "{want} missing from {c:?}");
        }
        let mut ok = Vec::new();
        pod_spec(
            "spec",
            &json!({"containers": [{"name": "a", "image": "i", "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "2Gi"}}}]}),
            &mut ok,
        );
        assert!(ok.is_empty(), "{ok:?}");
    }

    #[test]
    fn pod_updates() {
        let old = json!({"spec": {"containers": [{"name": "a", "image": "i"}], "nodeName": "n"}});
        let mut c = Vec::new();
        pod_update(
            &old,
            &json!({"spec": {"containers": [{"name": "a", "image": "j"}], "nodeName": "n"}}),
            &mut c,
        );
        assert!(c.is_empty());
        pod_update(
            &old,
            &json!({"spec": {"containers": [{"name": "b", "image": "i"}], "nodeName": "n"}}),
            &mut c,
        );
        assert_eq!(fields(&c), ["spec"]);
    }

    #[test]
    fn deployments_services_claims() {
        let mut c = Vec::new();
        deployment(
            &json!({"spec": {"replicas": -1, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}}, "selector": {"matchLabels": {"a": "b"}}}}),
            Some(&json!({"spec": {"selector": {"matchLabels": {"a": "c"}}}})),
            &mut c,
        );
        assert_eq!(
            fields(&c),
            [
                "spec.replicas",
                "spec.strategy.rollingUpdate.maxUnavailable",
                "spec.selector"
            ]
        );
        let mut c = Vec::new();
        service(
            &json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80}, {"port": 0, "name": "x", "targetPort": "--bad"}]}}),
            &mut c,
        );
        assert_eq!(
            fields(&c),
            [
                "spec.ports[0].name",
                "spec.ports[1].port",
                "spec.ports[1].targetPort"
            ]
        );
        let mut c = Vec::new();
        service(&json!({"spec": {"type": "ExternalName"}}), &mut c);
        assert_eq!(fields(&c), ["spec.externalName"]);
        let mut c = Vec::new();
        let claim = json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        pvc(&claim, None, &mut c);
        assert!(c.is_empty());
        let mut grown = claim.clone();
        grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        // Not before binding.
        pvc(&grown, Some(&claim), &mut c);
        assert_eq!(fields(&c), ["spec"]);
        c.clear();
        let mut bound = claim.clone();
        bound["spec"]["volumeName"] = json!("pv");
        bound["status"]["capacity"]["storage"] = json!("1Gi");
        grown["spec"]["volumeName"] = json!("pv");
        pvc(&grown, Some(&bound), &mut c);
        assert!(c.is_empty(), "{c:?}");
        let mut shrunk = bound.clone();
        shrunk["spec"]["resources"]["requests"]["storage"] = json!("1Mi");
        pvc(&shrunk, Some(&bound), &mut c);
        assert_eq!(fields(&c), ["spec.resources.requests.storage"]);
        c.clear();
        let mut changed = claim.clone();
        changed["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        pvc(&changed, Some(&claim), &mut c);
        assert_eq!(fields(&c), ["spec"]);
    }

    #[test]
    fn priority_class_value_and_policy_are_immutable() {
        let old = json!({"value": 10, "preemptionPolicy": "PreemptLowerPriority"});
        let mut out = Vec::new();
        priority_class(
            &json!({"value": 10, "preemptionPolicy": "PreemptLowerPriority", "description": "x"}),
            Some(&old),
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
        priority_class(
            &json!({"value": 11, "preemptionPolicy": "Never"}),
            Some(&old),
            &mut out,
        );
        let fields: Vec<_> = out.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(fields, ["value", "preemptionPolicy"]);
        assert!(out[0].1.contains("may not be changed in an update"));
    }
}
