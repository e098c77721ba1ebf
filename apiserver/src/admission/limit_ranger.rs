//! LimitRanger: default requests and limits from a namespace's LimitRanges, then the
//! min/max/maxLimitRequestRatio checks, with upstream's semantics and messages
//! (`plugin/pkg/admission/limitranger`).
//!
//! Owns the decision and the mutation of the object being admitted; the write path lists the
//! namespace's LimitRanges and calls [`admit`] on pod creates (not updates: containers are
//! immutable) and on PVC creates and updates. It never reads or writes the store.
//!
//! Upstream iterates Go maps, so when several constraints fail its message order varies; here
//! limit items are taken in order and resources by name.

use std::borrow::Borrow;

use k1s_api::quantity::{Quantity, ResourceList};
use k1s_api::resource::{Options, SpecJson, pod_limits, pod_requests};
use serde_json::{Map, Value};

/// The annotation recording what was defaulted.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[][..], Vec::as_slice)
}

fn lenient(v: &Value) -> ResourceList {
    ResourceList::from_json_lenient(v)
}

/// Applies upstream's LimitRangeItem defaulting in place (done when a LimitRange is stored):
/// for `Container` items, `default` falls back to `max`, and `defaultRequest` to `default`,
/// then to `min`. Idempotent; call it on the LimitRange write path.
pub fn default_limit_range(lr: &mut Value) {
    let Some(items) = lr
        .get_mut("spec")
        .and_then(|s| s.get_mut("limits"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        let fill = |item: &mut Map<String, Value>, to: &str, from: &str| {
            let src = item
                .get(from)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let dst = item.entry(to).or_insert_with(|| Value::Object(Map::new()));
            if !dst.is_object() {
                *dst = Value::Object(Map::new());
            }
            if let Some(dst) = dst.as_object_mut() {
                for (k, v) in src {
                    dst.entry(k).or_insert(v);
                }
            }
        };
        fill(item, "default", "max");
        fill(item, "defaultRequest", "default");
        fill(item, "defaultRequest", "min");
    }
}

/// The default requests and limits of all `Container` items (later items win).
fn container_defaults(lr: &Value) -> (ResourceList, ResourceList) {
    let mut lr = lr.clone();
    default_limit_range(&mut lr);
    let mut requests = ResourceList::new();
    let mut limits = ResourceList::new();
    for item in list(&lr["spec"]["limits"]) {
        if item["type"] == "Container" {
            requests.0.extend(lenient(&item["defaultRequest"]).0);
            limits.0.extend(lenient(&item["default"]).0);
        }
    }
    (requests, limits)
}

/// Sets missing requests and limits of every container and init container from one
/// LimitRange; returns the annotation phrases (`cpu, memory request for container c`).
fn apply_defaults(pod: &mut Value, lr: &Value) -> Vec<String> {
    let (requests, limits) = container_defaults(lr);
    if requests.is_empty() && limits.is_empty() {
        return Vec::new();
    }
    let mut notes = Vec::new();
    for (field, what) in [
        ("containers", "container"),
        ("initContainers", "init container"),
    ] {
        let Some(cs) = pod
            .get_mut("spec")
            .and_then(|s| s.get_mut(field))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in cs.iter_mut().filter(|c| c.is_object()) {
            let name = c["name"].as_str().unwrap_or("").to_string();
            let mut set = |kind: &str, defaults: &ResourceList| -> Vec<String> {
                let res = &mut c["resources"];
                if !res.is_object() {
                    *res = Value::Object(Map::new());
                }
                let slot = &mut res[kind];
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                let mut added = Vec::new();
                if let Some(m) = slot.as_object_mut() {
                    for (k, q) in &defaults.0 {
                        if !m.contains_key(k) {
                            m.insert(k.clone(), Value::String(q.to_string()));
                            added.push(k.clone());
                        }
                    }
                }
                added
            };
            let set_limits = set("limits", &limits);
            let set_requests = set("requests", &requests);
            // Names come from a BTreeMap: already sorted, as upstream sorts them.
            if !set_requests.is_empty() {
                notes.push(format!(
                    "{} request for {what} {name}",
                    set_requests.join(", ")
                ));
            }
            if !set_limits.is_empty() {
                notes.push(format!("{} limit for {what} {name}", set_limits.join(", ")));
            }
        }
    }
    notes
}

fn min_constraint(
    kind: &'static str,
    res: &str,
    enforced: &Quantity,
    req: Option<&Quantity>,
    lim: Option<&Quantity>,
) -> Option<Violation> {
    let (resource, min) = (res.to_owned(), *enforced);
    let Some(&request) = req else {
        return Some(Violation::MinNoRequest {
            kind,
            resource,
            min,
        });
    };
    if request < min {
        return Some(Violation::MinRequest {
            kind,
            resource,
            min,
            request,
        });
    }
    if let Some(&limit) = lim
        && limit < min
    {
        return Some(Violation::MinLimit {
            kind,
            resource,
            min,
            limit,
        });
    }
    None
}

fn max_constraint(
    kind: &'static str,
    res: &str,
    enforced: &Quantity,
    req: Option<&Quantity>,
    lim: Option<&Quantity>,
) -> Option<Violation> {
    let (resource, max) = (res.to_owned(), *enforced);
    let Some(&limit) = lim else {
        return Some(Violation::MaxNoLimit {
            kind,
            resource,
            max,
        });
    };
    if limit > max {
        return Some(Violation::MaxLimit {
            kind,
            resource,
            max,
            limit,
        });
    }
    if let Some(&request) = req
        && request > max
    {
        return Some(Violation::MaxRequest {
            kind,
            resource,
            max,
            request,
        });
    }
    None
}

/// The PVC form of the max check: only the request counts.
fn max_request_constraint(
    kind: &'static str,
    res: &str,
    enforced: &Quantity,
    req: Option<&Quantity>,
) -> Option<Violation> {
    let (resource, max) = (res.to_owned(), *enforced);
    let Some(&request) = req else {
        return Some(Violation::MaxNoRequest {
            kind,
            resource,
            max,
        });
    };
    (request > max).then_some(Violation::MaxRequest {
        kind,
        resource,
        max,
        request,
    })
}

fn ratio_constraint(
    kind: &'static str,
    res: &str,
    enforced: &Quantity,
    req: Option<&Quantity>,
    lim: Option<&Quantity>,
) -> Option<Violation> {
    // Upstream compares milli-values when none overflows, whole values otherwise.
    let max_milli = i64::MAX / 1000;
    let vals = [req, lim, Some(enforced)].map(|q| q.map_or(0, Quantity::value));
    let milli = vals.iter().all(|&v| v <= max_milli);
    let val =
        |q: Option<&Quantity>| q.map_or(0, |q| if milli { q.milli_value() } else { q.value() });
    let (r, l) = (val(req), val(lim));
    let (resource, max) = (res.to_owned(), *enforced);
    if req.is_none() || r == 0 {
        return Some(Violation::RatioNoRequest {
            kind,
            resource,
            max,
        });
    }
    if lim.is_none() || l == 0 {
        return Some(Violation::RatioNoLimit {
            kind,
            resource,
            max,
        });
    }
    // observed = l / r; over the maximum when l * 1000 > max_milli * r (exact, no floats).
    let over = if enforced.value() <= max_milli {
        i128::from(l) * 1000 > i128::from(enforced.milli_value()) * i128::from(r)
    } else {
        i128::from(l) > i128::from(enforced.value()) * i128::from(r)
    };
    // Only the displayed ratio is a float, as upstream prints it with %f.
    over.then(|| Violation::Ratio {
        kind,
        resource,
        max,
        ratio: l as f64 / r as f64,
    })
}

/// Runs the min, max and ratio checks of one item against requests and limits.
fn check_item(
    item: &Value,
    kind: &'static str,
    requests: &ResourceList,
    limits: &ResourceList,
    errs: &mut Vec<Violation>,
) {
    for (res, q) in &lenient(&item["min"]).0 {
        errs.extend(min_constraint(
            kind,
            res,
            q,
            requests.get(res),
            limits.get(res),
        ));
    }
    for (res, q) in &lenient(&item["max"]).0 {
        errs.extend(max_constraint(
            kind,
            res,
            q,
            requests.get(res),
            limits.get(res),
        ));
    }
    for (res, q) in &lenient(&item["maxLimitRequestRatio"]).0 {
        errs.extend(ratio_constraint(
            kind,
            res,
            q,
            requests.get(res),
            limits.get(res),
        ));
    }
}

fn validate_pod(pod: &Value, lr: &Value, errs: &mut Vec<Violation>) {
    let spec = &pod["spec"];
    for item in list(&lr["spec"]["limits"]) {
        match item["type"].as_str() {
            Some("Container") => {
                for c in list(&spec["containers"])
                    .iter()
                    .chain(list(&spec["initContainers"]))
                {
                    let requests = lenient(&c["resources"]["requests"]);
                    let limits = lenient(&c["resources"]["limits"]);
                    check_item(item, "Container", &requests, &limits, errs);
                }
            }
            Some("Pod") => {
                let no_overhead = Options {
                    exclude_overhead: true,
                    ..Options::default()
                };
                let requests = pod_requests(&SpecJson(spec), &no_overhead);
                let limits = pod_limits(&SpecJson(spec), &no_overhead);
                check_item(item, "Pod", &requests, &limits, errs);
            }
            _ => {}
        }
    }
}

fn validate_pvc(pvc: &Value, lr: &Value, errs: &mut Vec<Violation>) {
    let requests = lenient(&pvc["spec"]["resources"]["requests"]);
    for item in list(&lr["spec"]["limits"]) {
        if item["type"] != "PersistentVolumeClaim" {
            continue;
        }
        for (res, q) in &lenient(&item["min"]).0 {
            errs.extend(min_constraint(
                "PersistentVolumeClaim",
                res,
                q,
                requests.get(res),
                None,
            ));
        }
        for (res, q) in &lenient(&item["max"]).0 {
            errs.extend(max_request_constraint(
                "PersistentVolumeClaim",
                res,
                q,
                requests.get(res),
            ));
        }
    }
}

/// The violations, each message once (as upstream's aggregate drops duplicates).
fn aggregate(errs: Vec<Violation>) -> Result<(), LimitsExceeded> {
    let mut seen: Vec<Violation> = Vec::new();
    for e in errs {
        // By text: quantities compare by value, but "1" and "1000m" read differently.
        let text = e.to_string();
        if !seen.iter().any(|s| s.to_string() == text) {
            seen.push(e);
        }
    }
    if seen.is_empty() {
        Ok(())
    } else {
        Err(LimitsExceeded(seen))
    }
}

/// One LimitRange constraint an object breaks, with upstream's text (`kind` is `Container`,
/// `Pod` or `PersistentVolumeClaim`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Violation {
    #[error("minimum {resource} usage per {kind} is {min}.  No request is specified")]
    MinNoRequest {
        kind: &'static str,
        resource: String,
        min: Quantity,
    },
    #[error("minimum {resource} usage per {kind} is {min}, but request is {request}")]
    MinRequest {
        kind: &'static str,
        resource: String,
        min: Quantity,
        request: Quantity,
    },
    #[error("minimum {resource} usage per {kind} is {min}, but limit is {limit}")]
    MinLimit {
        kind: &'static str,
        resource: String,
        min: Quantity,
        limit: Quantity,
    },
    #[error("maximum {resource} usage per {kind} is {max}.  No limit is specified")]
    MaxNoLimit {
        kind: &'static str,
        resource: String,
        max: Quantity,
    },
    /// The PVC form: only the request counts.
    #[error("maximum {resource} usage per {kind} is {max}.  No request is specified")]
    MaxNoRequest {
        kind: &'static str,
        resource: String,
        max: Quantity,
    },
    #[error("maximum {resource} usage per {kind} is {max}, but limit is {limit}")]
    MaxLimit {
        kind: &'static str,
        resource: String,
        max: Quantity,
        limit: Quantity,
    },
    #[error("maximum {resource} usage per {kind} is {max}, but request is {request}")]
    MaxRequest {
        kind: &'static str,
        resource: String,
        max: Quantity,
        request: Quantity,
    },
    #[error(
        "{resource} max limit to request ratio per {kind} is {max}, but no request is specified or request is 0"
    )]
    RatioNoRequest {
        kind: &'static str,
        resource: String,
        max: Quantity,
    },
    #[error(
        "{resource} max limit to request ratio per {kind} is {max}, but no limit is specified or limit is 0"
    )]
    RatioNoLimit {
        kind: &'static str,
        resource: String,
        max: Quantity,
    },
    /// `ratio` is limit / request, printed as upstream's `%f`.
    #[error(
        "{resource} max limit to request ratio per {kind} is {max}, but provided ratio is {ratio:.6}"
    )]
    Ratio {
        kind: &'static str,
        resource: String,
        max: Quantity,
        ratio: f64,
    },
}

/// What [`admit`] refuses: the violations, each message once, in order. Reads as upstream's
/// aggregate error: one message alone, several as `[a, b]`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", aggregate_text(.0))]
pub struct LimitsExceeded(pub Vec<Violation>);

fn aggregate_text(violations: &[Violation]) -> String {
    let texts: Vec<String> = violations.iter().map(ToString::to_string).collect();
    match texts.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", texts.join(", ")),
    }
}

/// Admits a pod (`resource` = `"pods"`) or a PVC (`"persistentvolumeclaims"`) against the
/// namespace's LimitRanges: for pods, sets default requests and limits (and the
/// `kubernetes.io/limit-ranger` annotation), then checks every range. Objects being deleted
/// and other resources pass untouched. The error ([`LimitsExceeded`]) reads as upstream's
/// message; the caller answers 403 with `<resource> "<name>" is forbidden: <message>`.
pub fn admit<R: Borrow<Value>>(
    resource: &str,
    obj: &mut Value,
    ranges: &[R],
) -> Result<(), LimitsExceeded> {
    let ranges = || ranges.iter().map(Borrow::borrow);
    if !obj["metadata"]["deletionTimestamp"].is_null() {
        return Ok(());
    }
    match resource {
        "pods" => {
            for lr in ranges() {
                let notes = apply_defaults(obj, lr);
                if notes.is_empty() {
                    continue;
                }
                if let Some(meta) = obj.as_object_mut().map(|o| {
                    o.entry("metadata")
                        .or_insert_with(|| Value::Object(Map::new()))
                }) {
                    if !meta.is_object() {
                        *meta = Value::Object(Map::new());
                    }
                    let ann = &mut meta["annotations"];
                    if !ann.is_object() {
                        *ann = Value::Object(Map::new());
                    }
                    ann[ANNOTATION] =
                        Value::String(format!("LimitRanger plugin set: {}", notes.join("; ")));
                }
            }
            let mut errs = Vec::new();
            for lr in ranges() {
                validate_pod(obj, lr, &mut errs);
            }
            aggregate(errs)
        }
        "persistentvolumeclaims" => {
            let mut errs = Vec::new();
            for lr in ranges() {
                validate_pvc(obj, lr, &mut errs);
            }
            aggregate(errs)
        }
        _ => Ok(()),
    }
}

/// Validates a LimitRange as upstream's `ValidateLimitRange` does for quantities: per
/// resource, `min <= defaultRequest <= default <= max`, `defaultRequest`/`default` only on
/// `Container` items, `maxLimitRequestRatio >= 1`, and every quantity well formed. Returns
/// `(field, message)` pairs for a 422 Invalid.
pub fn validate_limit_range(lr: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, item) in list(&lr["spec"]["limits"]).iter().enumerate() {
        let at = format!("spec.limits[{i}]");
        let ty = item["type"].as_str().unwrap_or("");
        let mut lists: Vec<(&str, ResourceList)> = Vec::new();
        for f in [
            "max",
            "min",
            "default",
            "defaultRequest",
            "maxLimitRequestRatio",
        ] {
            let mut rl = ResourceList::new();
            for (k, v) in item[f].as_object().into_iter().flatten() {
                let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                match Quantity::parse(text.trim()) {
                    Ok(q) => rl.insert(k.clone(), q),
                    Err(e) => out.push((
                        format!("{at}.{f}[{k}]"),
                        format!("Invalid value: {text:?}: {e}"),
                    )),
                }
            }
            lists.push((f, rl));
        }
        let get = |f: &str| lists.iter().find(|(n, _)| *n == f).map(|(_, l)| l);
        let (Some(max), Some(min), Some(def), Some(def_req), Some(ratio)) = (
            get("max"),
            get("min"),
            get("default"),
            get("defaultRequest"),
            get("maxLimitRequestRatio"),
        ) else {
            continue;
        };
        if ty != "Container" {
            for (f, l) in [("default", def), ("defaultRequest", def_req)] {
                for k in l.names() {
                    out.push((
                        format!("{at}.{f}[{k}]"),
                        format!("Forbidden: may not be specified when `type` is '{ty}'"),
                    ));
                }
            }
        }
        for (k, mx) in &max.0 {
            if let Some(mn) = min.get(k)
                && mn > mx
            {
                out.push((
                    format!("{at}.min[{k}]"),
                    format!(
                        "Invalid value: \"{mn}\": min value {mn} is greater than max value {mx}"
                    ),
                ));
            }
        }
        for (k, d) in &def.0 {
            if let Some(mn) = min.get(k)
                && mn > d
            {
                out.push((
                    format!("{at}.default[{k}]"),
                    format!(
                        "Invalid value: \"{d}\": min value {mn} is greater than default value {d}"
                    ),
                ));
            }
            if let Some(mx) = max.get(k)
                && d > mx
            {
                out.push((
                    format!("{at}.default[{k}]"),
                    format!(
                        "Invalid value: \"{d}\": default value {d} is greater than max value {mx}"
                    ),
                ));
            }
        }
        for (k, dr) in &def_req.0 {
            if let Some(mn) = min.get(k)
                && mn > dr
            {
                out.push((
                    format!("{at}.defaultRequest[{k}]"),
                    format!("Invalid value: \"{dr}\": min value {mn} is greater than default request value {dr}"),
                ));
            }
            if let Some(mx) = max.get(k)
                && dr > mx
            {
                out.push((
                    format!("{at}.defaultRequest[{k}]"),
                    format!("Invalid value: \"{dr}\": default request value {dr} is greater than max value {mx}"),
                ));
            }
            if let Some(d) = def.get(k)
                && dr > d
            {
                out.push((
                    format!("{at}.defaultRequest[{k}]"),
                    format!("Invalid value: \"{dr}\": default request value {dr} is greater than default limit value {d}"),
                ));
            }
        }
        for (k, r) in &ratio.0 {
            if *r < Quantity::from_value(1, k1s_api::quantity::Format::DecimalSI) {
                out.push((
                    format!("{at}.maxLimitRequestRatio[{k}]"),
                    format!("Invalid value: \"{r}\": ratio {r} is less than 1"),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn range(items: Value) -> Value {
        json!({"metadata": {"name": "lr"}, "spec": {"limits": items}})
    }

    #[test]
    fn defaults_are_applied_and_annotated() {
        let lr = range(
            json!([{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"}}]),
        );
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {
            "initContainers": [{"name": "i"}],
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "200m"}}}, {"name": "b", "resources": {"limits": {"cpu": "1"}}}]}});
        assert_eq!(admit("pods", &mut pod, &[lr]), Ok(()));
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}})
        );
        assert_eq!(
            pod["spec"]["containers"][1]["resources"],
            json!({"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}})
        );
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: memory request for container a; cpu, memory limit for container a; \
             cpu, memory request for container b; memory limit for container b; \
             cpu, memory request for init container i; cpu, memory limit for init container i"
        );
    }

    #[test]
    fn max_falls_back_to_default_limit() {
        let lr =
            range(json!([{"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "1Mi"}}]));
        let mut pod = json!({"spec": {"containers": [{"name": "c"}]}});
        assert_eq!(admit("pods", &mut pod, &[lr]), Ok(()));
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"requests": {"cpu": "1", "memory": "1Mi"}, "limits": {"cpu": "1"}})
        );
    }

    #[test]
    fn constraint_messages() {
        let c = |res: Value| json!({"spec": {"containers": [{"name": "c", "resources": res}]}});
        let cases: Vec<(Value, Value, Result<(), &str>)> = vec![
            (
                json!([{"type": "Container", "max": {"cpu": "1"}, "default": {"cpu": "1"}}]),
                c(json!({"limits": {"cpu": "2"}})),
                Err("maximum cpu usage per Container is 1, but limit is 2"),
            ),
            (
                json!([{"type": "Container", "max": {"cpu": "1"}}]),
                c(json!({"requests": {"cpu": "1500m"}, "limits": {"cpu": "1"}})),
                Err("maximum cpu usage per Container is 1, but request is 1500m"),
            ),
            (
                json!([{"type": "Container", "min": {"memory": "64Mi"}, "defaultRequest": {"memory": "64Mi"}}]),
                c(json!({"requests": {"memory": "32Mi"}})),
                Err("minimum memory usage per Container is 64Mi, but request is 32Mi"),
            ),
            (
                json!([{"type": "Container", "min": {"memory": "64Mi"}}]),
                c(json!({"requests": {"memory": "64Mi"}, "limits": {"memory": "32Mi"}})),
                Err("minimum memory usage per Container is 64Mi, but limit is 32Mi"),
            ),
            (
                json!([{"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}]),
                c(json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}})),
                Err(
                    "cpu max limit to request ratio per Container is 2, but provided ratio is 10.000000",
                ),
            ),
            (
                json!([{"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}]),
                c(json!({"limits": {"cpu": "1"}})),
                Err(
                    "cpu max limit to request ratio per Container is 2, but no request is specified or request is 0",
                ),
            ),
            (
                json!([{"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}]),
                c(json!({"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}})),
                Ok(()),
            ),
            (
                json!([{"type": "Pod", "max": {"cpu": "1"}}]),
                json!({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "600m"}}}, {"name": "b", "resources": {"limits": {"cpu": "600m"}}}]}}),
                Err("maximum cpu usage per Pod is 1, but limit is 1200m"),
            ),
            (
                json!([{"type": "Pod", "max": {"memory": "1Gi"}, "min": {"cpu": "1"}}]),
                c(json!({})),
                Err(
                    "[minimum cpu usage per Pod is 1.  No request is specified, maximum memory usage per Pod is 1Gi.  No limit is specified]",
                ),
            ),
            (json!("garbage"), c(json!({"limits": {"cpu": "x"}})), Ok(())),
        ];
        for (i, (items, mut pod, want)) in cases.into_iter().enumerate() {
            let got = admit("pods", &mut pod, &[range(items)]).map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(String::from), "case {i}");
        }
    }

    #[test]
    fn violations_are_typed_and_reported_once() {
        let q = |s: &str| s.parse::<Quantity>().unwrap();
        let lr = range(json!([{"type": "Container", "max": {"cpu": "1"}}]));
        let mut pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "2"}}},
            {"name": "b", "resources": {"limits": {"cpu": "2"}}}]}});
        let e = admit("pods", &mut pod, &[lr]).unwrap_err();
        assert_eq!(
            e,
            LimitsExceeded(vec![Violation::MaxLimit {
                kind: "Container",
                resource: "cpu".into(),
                max: q("1"),
                limit: q("2"),
            }])
        );
        assert_eq!(
            e.to_string(),
            "maximum cpu usage per Container is 1, but limit is 2"
        );
        let two = LimitsExceeded(vec![
            Violation::RatioNoLimit {
                kind: "Pod",
                resource: "cpu".into(),
                max: q("2"),
            },
            Violation::MaxNoRequest {
                kind: "PersistentVolumeClaim",
                resource: "storage".into(),
                max: q("1Gi"),
            },
        ]);
        assert_eq!(
            two.to_string(),
            "[cpu max limit to request ratio per Pod is 2, but no limit is specified or limit is 0, maximum storage usage per PersistentVolumeClaim is 1Gi.  No request is specified]"
        );
    }

    #[test]
    fn pvc_limits() {
        let lr = range(
            json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "10Gi"}}]),
        );
        let pvc = |s: &str| json!({"spec": {"resources": {"requests": {"storage": s}}}});
        assert_eq!(
            admit(
                "persistentvolumeclaims",
                &mut pvc("5Gi"),
                std::slice::from_ref(&lr)
            ),
            Ok(())
        );
        assert_eq!(
            admit(
                "persistentvolumeclaims",
                &mut pvc("20Gi"),
                std::slice::from_ref(&lr)
            )
            .map_err(|e| e.to_string()),
            Err(
                "maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi"
                    .into()
            )
        );
        assert_eq!(
            admit(
                "persistentvolumeclaims",
                &mut pvc("500Mi"),
                std::slice::from_ref(&lr)
            )
            .map_err(|e| e.to_string()),
            Err(
                "minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"
                    .into()
            )
        );
        assert_eq!(admit("configmaps", &mut json!({}), &[lr]), Ok(()));
    }

    #[test]
    fn limit_range_validation() {
        let lr = range(json!([
            {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}, "maxLimitRequestRatio": {"cpu": "500m"}},
            {"type": "Pod", "default": {"cpu": "1"}, "max": {"memory": "lots"}}
        ]));
        let errs = validate_limit_range(&lr);
        let fields: Vec<&str> = errs.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "spec.limits[0].min[cpu]",
                "spec.limits[0].maxLimitRequestRatio[cpu]",
                "spec.limits[1].max[memory]",
                "spec.limits[1].default[cpu]"
            ]
        );
        assert_eq!(
            errs[0].1,
            "Invalid value: \"2\": min value 2 is greater than max value 1"
        );
        assert!(validate_limit_range(&json!(null)).is_empty());
    }
}
