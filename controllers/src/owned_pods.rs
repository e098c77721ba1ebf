//! Which workload objects a pod event concerns, for the controllers that own pods through a
//! selector (ReplicaSet, DaemonSet, StatefulSet, Job): the pod's controller when it has one, else
//! every object of the kind in its namespace whose selector matches and that may adopt it.
//! Controllers that keep expectations have them met here as the events arrive. Also the
//! claiming of pods (adopt matching orphans, release what no longer matches).

use k1s_api::client::{Client, ClientError, ResourceRef, WriteParams};
use k1s_api::selector::{LabelSelector, SelectorError, label_selector_text};
use serde_json::{Value, json};

use crate::expectations::Expectations;
use k1s_runtime::key::{self, ObjectKey};
use k1s_runtime::{Seen, Store};

/// The object's `spec.selector`; `None` for an empty one (which selects nothing).
pub fn spec_selector(obj: &Value) -> Result<Option<LabelSelector>, SelectorError> {
    let selector = &obj["spec"]["selector"];
    // A ReplicationController's selector is a plain label map (equality only).
    let map_form;
    let selector = if obj["kind"] == "ReplicationController" || is_label_map(selector) {
        map_form = serde_json::json!({"matchLabels": selector});
        &map_form
    } else {
        selector
    };
    let text = label_selector_text(Some(selector))?;
    if text.is_empty() {
        return Ok(None);
    }
    LabelSelector::parse(&text).map(Some)
}

/// Whether `selector` is a plain label map (a ReplicationController's) rather than a
/// LabelSelector: a non-empty object of strings without `matchLabels`/`matchExpressions`.
fn is_label_map(selector: &Value) -> bool {
    selector.as_object().is_some_and(|m| {
        !m.is_empty()
            && !m.contains_key("matchLabels")
            && !m.contains_key("matchExpressions")
            && m.values().all(Value::is_string)
    })
}

/// The objects of `kind` (`apps/v1`, or `v1` ReplicationControllers) in `sets` that an event of a dependent (a pod, or a
/// Deployment's ReplicaSet) concerns. A controlled pod's creation or deletion meets its
/// controller's expectations in `exp`; an orphan concerns every object that selects it and
/// for which `may_adopt` holds.
pub fn owner_keys(
    kind: &str,
    pod: &Value,
    seen: Seen,
    sets: &Store,
    exp: Option<&Expectations>,
    may_adopt: impl Fn(&Value) -> bool,
) -> Vec<ObjectKey> {
    let ns = key::namespace(pod);
    if let Some(r) = key::controller_ref(pod) {
        // The apps/v1 kinds, or the core ReplicationController.
        let group = if kind == "ReplicationController" {
            ""
        } else {
            "apps"
        };
        if r["kind"] != kind || key::group_of(r["apiVersion"].as_str().unwrap_or("")) != group {
            return Vec::new();
        }
        let k = ObjectKey::new(ns, r["name"].as_str().unwrap_or(""));
        if let Some(exp) = exp {
            exp.observe(&k, pod, seen);
        }
        return vec![k];
    }
    let Some(ns) = ns else { return Vec::new() };
    sets.list_namespace(ns)
        .iter()
        .filter(|s| may_adopt(s))
        .filter(|s| spec_selector(s).is_ok_and(|sel| sel.is_some_and(|sel| sel.matches_json(pod))))
        .filter_map(|s| ObjectKey::of(s))
        .collect()
}

/// The controller whose pods [`claim`] sorts out.
pub struct Claimant<'a> {
    pub client: &'a dyn Client,
    /// The controller object (a ReplicaSet, DaemonSet, StatefulSet or Job).
    pub owner: &'a Value,
    /// Its resource, for the fresh read before adopting.
    pub resource: ResourceRef,
    /// Its `kind`, for the controller reference written on adopted pods.
    pub kind: &'a str,
    /// A finalizer adopted pods get and released ones lose (a Job's tracking finalizer).
    pub finalizer: Option<&'a str>,
}

/// The reference a controller (`apps/v1`, a `v1` ReplicationController or a `batch/v1`
/// Job) puts on the pods it controls.
pub fn controller_ref_to(kind: &str, owner: &Value) -> Value {
    let api_version = match kind {
        "ReplicationController" => "v1",
        "Job" => "batch/v1",
        _ => "apps/v1",
    };
    json!({"apiVersion": api_version, "kind": kind, "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true})
}

/// The pods in `pods` the owner controls, after adopting matching orphans (those for which
/// `may_adopt` holds, and only while the owner, read afresh, is live) and releasing owned
/// pods that no longer match its selector; as upstream's `ClaimPods`. An owner being
/// deleted keeps what it has and adopts nothing.
pub async fn claim(
    c: &Claimant<'_>,
    pods: &Store,
    sel: Option<&LabelSelector>,
    ns: &str,
    may_adopt: impl Fn(&Value) -> bool,
) -> Result<Vec<Value>, ClientError> {
    let pods_in = ResourceRef::new("", "v1", "pods", Some(ns));
    let uid = key::uid(c.owner);
    let deleting = key::is_deleting(c.owner);
    let mut owned = Vec::new();
    let mut adoption_checked = false;
    for pod in pods.list_namespace(ns) {
        let matches = sel.is_some_and(|s| s.matches_json(&pod));
        match key::controller_ref(&pod) {
            Some(r) if r["uid"].as_str() == Some(uid) => {
                if matches || deleting {
                    owned.push((*pod).clone());
                    continue;
                }
                // Release: drop our reference.
                let mut p = (*pod).clone();
                if let Some(refs) = p["metadata"]["ownerReferences"].as_array_mut() {
                    refs.retain(|r| r["uid"].as_str() != Some(uid));
                }
                if let Some(f) = c.finalizer
                    && let Some(fs) = p["metadata"]["finalizers"].as_array_mut()
                {
                    fs.retain(|x| x.as_str() != Some(f));
                }
                match c
                    .client
                    .update(&pods_in, p, None, &WriteParams::default())
                    .await
                {
                    Err(e) if !e.is_not_found() => return Err(e),
                    _ => {}
                }
            }
            Some(_) => {}
            None if matches && !deleting && !key::is_deleting(&pod) && may_adopt(&pod) => {
                if !adoption_checked {
                    let fresh = c.client.get(&c.resource, key::name(c.owner)).await?;
                    if key::uid(&fresh) != uid || key::is_deleting(&fresh) {
                        return Ok(owned);
                    }
                    adoption_checked = true;
                }
                let mut p = (*pod).clone();
                let mut refs = p["metadata"]["ownerReferences"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                refs.push(controller_ref_to(c.kind, c.owner));
                p["metadata"]["ownerReferences"] = json!(refs);
                if let Some(f) = c.finalizer {
                    let mut fs = p["metadata"]["finalizers"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    if !fs.iter().any(|x| x.as_str() == Some(f)) {
                        fs.push(json!(f));
                    }
                    p["metadata"]["finalizers"] = json!(fs);
                }
                match c
                    .client
                    .update(&pods_in, p, None, &WriteParams::default())
                    .await
                {
                    Ok(adopted) => owned.push(adopted),
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e),
                }
            }
            None => {}
        }
    }
    Ok(owned)
}
