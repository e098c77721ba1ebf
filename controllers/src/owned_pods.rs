//! Which workload objects a pod event concerns, for the controllers that own pods through a
//! selector (ReplicaSet, DaemonSet, StatefulSet): the pod's controller when it has one, else
//! every object of the kind in its namespace whose selector matches and that may adopt it.
//! Controllers that keep expectations have them met here as the events arrive.

use k1s_api::selector::{LabelSelector, label_selector_text};
use serde_json::Value;

use crate::expectations::Expectations;
use crate::runtime::key::{self, ObjectKey};
use crate::runtime::{Seen, Store};

/// The object's `spec.selector`; `None` for an empty one (which selects nothing).
pub fn spec_selector(obj: &Value) -> Result<Option<LabelSelector>, String> {
    let text = label_selector_text(Some(&obj["spec"]["selector"])).map_err(|e| e.to_string())?;
    if text.is_empty() {
        return Ok(None);
    }
    LabelSelector::parse(&text)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The `apps` objects of `kind` in `sets` that a pod event concerns. A controlled pod's
/// creation or deletion meets its controller's expectations in `exp`; an orphan concerns
/// every object that selects it and for which `may_adopt` holds.
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
        if r["kind"] != kind || key::group_of(r["apiVersion"].as_str().unwrap_or("")) != "apps" {
            return Vec::new();
        }
        let k = ObjectKey::new(ns, r["name"].as_str().unwrap_or(""));
        if let Some(exp) = exp {
            let uid = key::uid(pod);
            // Deletion counts when it is marked, and again (harmlessly) when it goes.
            match seen {
                Seen::Deleted => exp.deletion_observed(&k, uid),
                _ if key::is_deleting(pod) => exp.deletion_observed(&k, uid),
                Seen::Applied => exp.creation_observed(&k, uid),
                // Listed again after a relist: already counted when first seen.
                Seen::Listed => {}
            }
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
