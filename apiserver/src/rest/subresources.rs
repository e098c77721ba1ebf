//! Subresources that are views or actions on their parent object: `scale` (an
//! `autoscaling/v1 Scale` over `spec.replicas`), pod `binding` and pod `eviction`.

use k1s_store::StoreError;
use serde_json::{Value, json};

use k1s_api::selector::{LabelSelector, label_selector_text};

use super::{DeleteOptions, Overlay, Put, Puts, Rest, WriteOptions, Written, meta};
use crate::registry::ResourceType;
use crate::registry::apiextensions::custom::{ScalePaths, get_path, set_path};
use crate::status::ApiError;

/// A label selector object rendered as its string form (`a=b,c in (d)`), as Scale carries
/// it; an invalid selector renders as nothing.
pub fn selector_string(sel: &Value) -> String {
    label_selector_text(Some(sel)).unwrap_or_default()
}

/// Where a resource keeps what its Scale shows.
fn scale_paths(res: &ResourceType) -> ScalePaths {
    res.custom
        .as_ref()
        .and_then(|c| c.scale.clone())
        .unwrap_or_else(|| ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        })
}

/// The Scale view of a scalable object.
pub fn scale_of(res: &ResourceType, parent: &Value) -> Value {
    let paths = scale_paths(res);
    let selector = match &paths.label_selector {
        // Custom resources keep the selector as a string at the given path.
        Some(p) => get_path(parent, p).as_str().unwrap_or_default().to_owned(),
        // A ReplicationController's selector is a plain label map.
        None if res.kind == "ReplicationController" => {
            selector_string(&json!({"matchLabels": parent["spec"]["selector"]}))
        }
        None => selector_string(&parent["spec"]["selector"]),
    };
    let m = &parent["metadata"];
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
            "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"],
        },
        "spec": {"replicas": get_path(parent, &paths.spec_replicas).as_i64().unwrap_or(0)},
        "status": {
            "replicas": get_path(parent, &paths.status_replicas).as_i64().unwrap_or(0),
            "selector": selector,
        },
    })
}

impl Rest {
    /// Changes the Scale of a scalable object: `change` gets the current Scale and returns the
    /// new one; its `spec.replicas` is written to the parent.
    pub async fn update_scale<F>(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &WriteOptions,
        mut change: F,
    ) -> Result<Value, ApiError>
    where
        F: FnMut(&Value) -> Result<Value, ApiError>,
    {
        let w: Written = self
            .read_modify_write(res, ns, name, Some("scale"), opts, |parent| {
                let current = scale_of(res, parent);
                let new = change(&current)?;
                if new["kind"].as_str().is_some_and(|k| k != "Scale") {
                    return Err(ApiError::bad_request(format!(
                        "the kind in the data ({}) does not match the expected kind (Scale)",
                        new["kind"].as_str().unwrap_or_default()
                    )));
                }
                let precondition = new["metadata"]["resourceVersion"].as_str().unwrap_or("");
                if !precondition.is_empty()
                    && precondition != parent["metadata"]["resourceVersion"].as_str().unwrap_or("")
                {
                    return Err(ApiError::conflict(res, name));
                }
                let replicas = match &new["spec"]["replicas"] {
                    Value::Null => 0,
                    v => v.as_i64().filter(|r| *r >= 0).ok_or_else(|| {
                        ApiError::invalid(
                            "Scale",
                            name,
                            vec![(
                                "spec.replicas".into(),
                                format!("Invalid value: {v}: must be greater than or equal to 0"),
                            )],
                        )
                    })?,
                };
                let mut p = parent.clone();
                set_path(&mut p, &scale_paths(res).spec_replicas, json!(replicas));
                Ok(p)
            })
            .await?;
        Ok(scale_of(res, &w.object))
    }

    /// `pods/binding`: assigns an unbound pod to a node.
    ///
    /// As upstream's binding storage (`assignPod`), this is a guaranteed update of the pod
    /// itself: `spec.nodeName`, the Binding's annotations and the PodScheduled condition in one
    /// write, after the Binding's UID/resourceVersion preconditions. Like upstream it does not
    /// run the pod's update path (admission, validation, managedFields): admission applies to
    /// the Binding, and a binding never appears as a field manager of the pod.
    pub async fn bind_pod(
        &self,
        res: &ResourceType,
        ns: &str,
        name: &str,
        binding: &Value,
        opts: &WriteOptions,
    ) -> Result<(), ApiError> {
        let node = binding["target"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if node.is_empty() {
            return Err(ApiError::invalid(
                "Binding",
                name,
                vec![("target.name".into(), "Required value".into())],
            ));
        }
        if let Some(kind) = binding["target"]["kind"]
            .as_str()
            .filter(|k| !k.is_empty() && *k != "Node")
        {
            return Err(ApiError::invalid(
                "Binding",
                name,
                vec![(
                    "target.kind".into(),
                    format!("Invalid value: {kind:?}: must be empty or 'Node'"),
                )],
            ));
        }
        let want_uid = binding["metadata"]["uid"]
            .as_str()
            .filter(|u| !u.is_empty());
        let want_rv = binding["metadata"]["resourceVersion"]
            .as_str()
            .filter(|v| !v.is_empty());
        let annotations = binding["metadata"]["annotations"].as_object();
        let key = res.key(Some(ns), name);
        let keep = |c: &Value| c["type"] != "PodScheduled";
        for _ in 0..super::write::MAX_RETRIES {
            // The change is encoded over the shared pod: no copy of it is made.
            let (pod, rev) = self.get_shared_with_rev(res, Some(ns), name).await?;
            if meta::is_deleting(&pod) {
                return Err(ApiError::conflict(res, name));
            }
            let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
            if let Some(want) = want_uid.filter(|w| *w != uid) {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on pods/binding \"{name}\": Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                    ),
                ));
            }
            if let Some(want) = want_rv.filter(|w| *w != rev.to_string()) {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on pods/binding \"{name}\": Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rev}"
                    ),
                ));
            }
            if let Some(current) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned to node \"{current}\""
                    ),
                ));
            }
            if opts.dry_run {
                return Ok(());
            }
            let Some(obj) = pod.as_object() else {
                return Err(ApiError::new(
                    500,
                    "InternalError",
                    format!("the stored pod {name} is not an object"),
                ));
            };
            let cond = json!({"type": "PodScheduled", "status": "True",
                "lastProbeTime": null, "lastTransitionTime": meta::now()});
            let (meta_puts, puts) = binding_puts(&pod, &node, annotations, &cond, &keep);
            let bytes = self.encode_stored_with(&key, obj, meta_puts, puts)?;
            match self.store.update(&key, bytes, rev).await {
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(self.write_error(res, name, e)),
                Ok(_) => return Ok(()),
            }
        }
        Err(ApiError::conflict(res, name))
    }

    /// `pods/eviction`: deletes a pod with the eviction's delete options, if no
    /// PodDisruptionBudget forbids it (a budget's allowed disruptions are taken one at a time,
    /// as upstream's eviction REST does; the disruption controller refills them).
    pub async fn evict_pod(
        &self,
        res: &ResourceType,
        ns: &str,
        name: &str,
        eviction: &Value,
    ) -> Result<(), ApiError> {
        let mut opts = DeleteOptions::default();
        if let Some(d) = eviction.get("deleteOptions").filter(|d| d.is_object()) {
            opts.merge_body(d)?;
        }
        let pod = self.get(res, Some(ns), name).await?;
        let terminal = matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
        if !terminal && !meta::is_deleting(&pod) {
            self.take_disruption(ns, &pod).await?;
        }
        self.delete(res, Some(ns), name, &opts).await.map(|_| ())
    }

    /// Takes one allowed disruption from the budget covering `pod`, or refuses (429).
    async fn take_disruption(&self, ns: &str, pod: &Value) -> Result<(), ApiError> {
        let Some(pdbs) = self.registry.builtin_kind("policy", "PodDisruptionBudget") else {
            return Ok(());
        };
        let all = self.list(&pdbs, Some(ns), &Default::default()).await?.items;
        let covering: Vec<&Value> = all
            .iter()
            .filter(|pdb| {
                // A missing or invalid selector covers no pod.
                !pdb["spec"]["selector"].is_null()
                    && label_selector_text(Some(&pdb["spec"]["selector"]))
                        .and_then(|s| LabelSelector::parse(&s))
                        .is_ok_and(|s| s.matches_json(pod))
            })
            .collect();
        let pdb = match covering.as_slice() {
            [] => return Ok(()),
            [one] => *one,
            _ => {
                return Err(ApiError::new(
                    500,
                    "InternalError",
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                ));
            }
        };
        let pdb_name = meta::name(pdb).to_owned();
        let pod_name = meta::name(pod).to_owned();
        let too_many = |why: String| {
            ApiError::new(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
            )
            .with_cause("DisruptionBudget", why)
        };
        self.read_modify_write(&pdbs, Some(ns), &pdb_name, Some("status"), &WriteOptions::default(), |cur| {
            let status = &cur["status"];
            let generation = cur["metadata"]["generation"].as_i64().unwrap_or(0);
            if status["observedGeneration"].as_i64().unwrap_or(0) < generation {
                return Err(too_many(format!(
                    "The disruption budget {pdb_name} is still being processed by the server."
                )));
            }
            let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
            if allowed < 1 {
                return Err(too_many(format!(
                    "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                    status["desiredHealthy"].as_i64().unwrap_or(0),
                    status["currentHealthy"].as_i64().unwrap_or(0)
                )));
            }
            let mut next = cur.clone();
            next["status"]["disruptionsAllowed"] = json!(allowed - 1);
            next["status"]["disruptedPods"][&pod_name] = json!(meta::now());
            Ok(next)
        })
        .await
        .map(|_| ())
    }
}

/// `obj` (an object, or an empty one in its place) with `puts` laid over it.
fn put_in<'a>(obj: &'a Value, puts: Puts<'a>) -> Put<'a> {
    Put::Object(Overlay {
        base: obj.as_object(),
        skip: &[],
        puts,
    })
}

/// What a binding lays over the pod: the Binding's annotations merged into the pod's (an
/// annotations value that is not an object is replaced), `spec.nodeName`, and `cond` in
/// place of the conditions `keep` refuses (the PodScheduled ones).
fn binding_puts<'a>(
    pod: &'a Value,
    node: &'a str,
    annotations: Option<&'a serde_json::Map<String, Value>>,
    cond: &'a Value,
    keep: &'a dyn Fn(&Value) -> bool,
) -> (Puts<'a>, Puts<'a>) {
    let meta_puts = match annotations.filter(|a| !a.is_empty()) {
        Some(extra) => {
            let puts = extra
                .iter()
                .map(|(k, v)| (k.as_str(), Put::Value(v)))
                .collect();
            vec![("annotations", put_in(&pod["metadata"]["annotations"], puts))]
        }
        None => Vec::new(),
    };
    let conditions = Put::Items {
        base: pod["status"]["conditions"]
            .as_array()
            .map_or(&[][..], Vec::as_slice),
        keep,
        last: cond,
    };
    let puts = vec![
        (
            "spec",
            put_in(&pod["spec"], vec![("nodeName", Put::Str(node))]),
        ),
        (
            "status",
            put_in(&pod["status"], vec![("conditions", conditions)]),
        ),
    ];
    (meta_puts, puts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pod as the binding wrote it before it encoded over the shared object: a copy,
    /// changed in place (kept as the reference the encoding must match byte for byte).
    fn bound_copy(
        pod: &Value,
        node: &str,
        extra: Option<&serde_json::Map<String, Value>>,
        cond: &Value,
    ) -> Value {
        let mut pod = pod.clone();
        pod["spec"]["nodeName"] = json!(node);
        let m = meta::metadata_mut(&mut pod);
        m.remove("resourceVersion");
        if let Some(extra) = extra.filter(|a| !a.is_empty()) {
            let a = m.entry("annotations").or_insert_with(|| json!({}));
            if !a.is_object() {
                *a = json!({});
            }
            if let Some(a) = a.as_object_mut() {
                a.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        match pod["status"]["conditions"].as_array_mut() {
            Some(c) => {
                c.retain(|x| x["type"] != "PodScheduled");
                c.push(cond.clone());
            }
            None => pod["status"]["conditions"] = json!([cond]),
        }
        pod
    }

    #[test]
    fn binding_encodes_the_changed_pod_without_copying_it() {
        let pods = [
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "resourceVersion": "5", "annotations": {"a": "1", "z": "2"}},
                "spec": {"containers": [{"name": "c"}], "schedulerName": "default-scheduler"},
                "status": {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
                    {"type": "Other", "status": "True"}]}}),
            json!({"metadata": {"name": "p", "annotations": "not a map"}, "spec": {"nodeName": ""}}),
            json!({"metadata": {"name": "p"}, "spec": {}, "status": {}}),
            json!({"metadata": {"name": "p"}, "spec": null, "status": {"conditions": "x"}}),
            // No spec or status. (Stored pods always have metadata: not a case to cover.)
            json!({"kind": "Pod", "metadata": {"name": "p", "selfLink": "/x"}}),
        ];
        let extras = [
            None,
            Some(json!({})),
            Some(json!({"b": "new", "z": "replaced"})),
        ];
        let cond = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
            "lastTransitionTime": "2026-01-01T00:00:00Z"});
        let keep = |c: &Value| c["type"] != "PodScheduled";
        for pod in &pods {
            for extra in &extras {
                let extra = extra.as_ref().and_then(Value::as_object);
                let (meta_puts, puts) = binding_puts(pod, "n1", extra, &cond, &keep);
                let obj = pod.as_object().unwrap();
                let got = serde_json::to_vec(&crate::rest::stored(obj, meta_puts, puts)).unwrap();
                let want = bound_copy(pod, "n1", extra, &cond);
                let want = crate::rest::stored(want.as_object().unwrap(), Vec::new(), Vec::new());
                assert_eq!(
                    String::from_utf8(got).unwrap(),
                    serde_json::to_string(&want).unwrap(),
                    "{pod} {extra:?}"
                );
            }
        }
    }

    #[test]
    fn selector_strings() {
        let sel = json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                 {"key": "x", "operator": "DoesNotExist"}]});
        assert_eq!(selector_string(&sel), "app=web,tier in (a,b),!x");
    }

    #[test]
    fn scale_view() {
        let d = json!({"metadata": {"name": "d", "namespace": "n", "resourceVersion": "5"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "d"}}},
            "status": {"replicas": 2}});
        let deploy = crate::registry::Registry::new()
            .get("apps", "v1", "deployments")
            .unwrap();
        let s = scale_of(&deploy, &d);
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(s["status"]["replicas"], 2);
        assert_eq!(s["status"]["selector"], "app=d");
        assert_eq!(s["metadata"]["resourceVersion"], "5");
    }
}
