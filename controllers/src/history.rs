//! ControllerRevisions for StatefulSets and DaemonSets, as upstream's `controller/history`:
//! a snapshot of a set's pod template (stored as the strategic merge patch
//! `{"spec":{"template":{…,"$patch":"replace"}}}` that `kubectl rollout undo` applies), named
//! `<set>-<hash>`, numbered by `revision`, owned by the set, and trimmed to
//! `revisionHistoryLimit`.
//!
//! It owns ControllerRevisions (create, renumber, delete) and nothing else. The hash is FNV-1a
//! (32 bit) over canonical JSON, encoded with the alphabet of upstream's `SafeEncodeString`
//! (the Deployment controller's `rollout::template_hash` is the same idea over a template).

use k1s_api::client::{Client, ClientError, DeleteParams, ResourceRef, WriteParams};
use serde_json::{Value, json};

use k1s_runtime::Store;
use k1s_runtime::key;

/// The label StatefulSet revisions carry their hash in.
pub const STATEFULSET_HASH_LABEL: &str = "controller.kubernetes.io/hash";
/// The label DaemonSet revisions and both kinds' pods carry.
pub const REVISION_LABEL: &str = "controller-revision-hash";

pub fn revisions(ns: &str) -> ResourceRef {
    ResourceRef::new("apps", "v1", "controllerrevisions", Some(ns))
}

/// Writes `v` with object keys sorted, so equal values hash equally whatever their order.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// FNV-1a of `v` without its null members (and the collision count when non-zero),
/// safe-encoded.
pub fn hash(v: &Value, collision_count: i64) -> String {
    let mut v = v.clone();
    drop_nulls(&mut v);
    let mut text = String::new();
    canonical(&v, &mut text);
    let mut h: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= u32::from(*b);
            h = h.wrapping_mul(0x0100_0193);
        }
    };
    feed(text.as_bytes());
    if collision_count > 0 {
        feed(collision_count.to_string().as_bytes());
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    h.to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// Removes object members that are null, at every depth. Go's typed encoding never writes
/// them for the fields of a pod template (omitted pointers, slices and maps), so a template
/// with and without them is the same template.
pub(crate) fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// The revision data of a set: its template as a replacing strategic merge patch, shaped as
/// upstream's controller writes it (`getPatch`: Go's encoding of the typed template, keys
/// sorted): no null members, except `metadata.creationTimestamp: null`, which Go writes for
/// the template's zero time. Clients (the conformance suite) compare these bytes with their
/// own encoding of the set.
pub fn patch_of(set: &Value) -> Value {
    let mut template = set["spec"]["template"].clone();
    drop_nulls(&mut template);
    if let Some(m) = template.as_object_mut() {
        m.insert("$patch".into(), json!("replace"));
        let meta = m.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.entry("creationTimestamp").or_insert(Value::Null);
        }
    }
    json!({"spec": {"template": template}})
}

/// Whether two revisions' data hold the same template (nulls aside: revisions written
/// before [`patch_of`] dropped them still match).
pub fn same_data(a: &Value, b: &Value) -> bool {
    let (mut a, mut b) = (a.clone(), b.clone());
    drop_nulls(&mut a);
    drop_nulls(&mut b);
    a == b
}

/// The pod template a revision's data holds.
pub fn template_of(revision: &Value) -> Value {
    let mut t = revision["data"]["spec"]["template"].clone();
    drop_nulls(&mut t);
    if let Some(m) = t.as_object_mut() {
        m.remove("$patch");
    }
    t
}

pub fn number(revision: &Value) -> i64 {
    revision["revision"].as_i64().unwrap_or(0)
}

/// The next revision number after `revs`.
pub fn next_number(revs: &[Value]) -> i64 {
    revs.iter().map(number).max().unwrap_or(0) + 1
}

/// A new (unsaved) revision of `set` (kind `kind`) with `data`, labelled with the template's
/// labels and the hash under `hash_label`.
pub fn new_revision(
    set: &Value,
    kind: &str,
    data: Value,
    hash_label: &str,
    revision: i64,
    collision_count: i64,
) -> Value {
    let h = hash(&data, collision_count);
    let mut labels = set["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert(hash_label.into(), json!(h));
    let mut meta = json!({
        "name": format!("{}-{h}", key::name(set)),
        "namespace": set["metadata"]["namespace"],
        "labels": labels,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": set["metadata"]["name"],
            "uid": set["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}],
    });
    if let Some(a) = set["metadata"]["annotations"].as_object()
        && !a.is_empty()
    {
        meta["annotations"] = json!(a);
    }
    json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta,
           "data": data, "revision": revision})
}

/// Sorts revisions oldest first (by number, then creation, then name).
pub fn sort(revs: &mut [Value]) {
    revs.sort_by(|a, b| {
        number(a)
            .cmp(&number(b))
            .then_with(|| {
                a["metadata"]["creationTimestamp"]
                    .as_str()
                    .cmp(&b["metadata"]["creationTimestamp"].as_str())
            })
            .then_with(|| key::name(a).cmp(key::name(b)))
    });
}

/// What [`ensure`] found or made.
#[derive(Debug)]
pub struct Ensured {
    /// The revision of the set's current template.
    pub revision: Value,
    /// Every revision of the set after the call, oldest first.
    pub all: Vec<Value>,
}

/// Errors of [`ensure`].
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("controllerrevision: {0}")]
    Api(#[from] ClientError),
    /// A revision of that name with other data exists: the caller raises collisionCount.
    #[error("controllerrevision {0} collides with another template")]
    Collision(String),
}

/// Finds the revision equal to `wanted` among `owned` (oldest first) — renumbering it to be
/// the newest if it is not (a rollback) — or creates it.
pub async fn ensure(
    client: &dyn Client,
    ns: &str,
    owned: Vec<Value>,
    wanted: Value,
) -> Result<Ensured, HistoryError> {
    let mut all = owned;
    sort(&mut all);
    let next = next_number(&all);
    let equal: Vec<usize> = (0..all.len())
        .filter(|&i| same_data(&all[i]["data"], &wanted["data"]))
        .collect();
    if let Some(&i) = equal.last() {
        if i + 1 == all.len() {
            return Ok(Ensured {
                revision: all[i].clone(),
                all,
            });
        }
        // An older template came back: it becomes the newest revision.
        let mut r = all.remove(i);
        r["revision"] = json!(next);
        let r = client
            .update(&revisions(ns), r, None, &WriteParams::default())
            .await?;
        all.push(r.clone());
        return Ok(Ensured { revision: r, all });
    }
    let mut wanted = wanted;
    wanted["revision"] = json!(next);
    match client
        .create(&revisions(ns), wanted.clone(), &WriteParams::default())
        .await
    {
        Ok(r) => {
            all.push(r.clone());
            Ok(Ensured { revision: r, all })
        }
        Err(e) if e.is_already_exists() => {
            let name = key::name(&wanted).to_owned();
            let existing = client.get(&revisions(ns), &name).await?;
            let same_owner = key::controller_ref(&existing).map(|r| &r["uid"])
                == key::controller_ref(&wanted).map(|r| &r["uid"]);
            if same_owner && same_data(&existing["data"], &wanted["data"]) {
                // Our cache had not seen it yet.
                all.push(existing.clone());
                sort(&mut all);
                return Ok(Ensured {
                    revision: existing,
                    all,
                });
            }
            Err(HistoryError::Collision(name))
        }
        Err(e) => Err(e.into()),
    }
}

/// Deletes the oldest revisions beyond `limit` that are not in `live` (names of revisions
/// still in use: current, update, and those of existing pods).
pub async fn truncate(
    client: &dyn Client,
    ns: &str,
    all: &[Value],
    live: &[&str],
    limit: i64,
) -> Result<(), ClientError> {
    let idle: Vec<&Value> = all
        .iter()
        .filter(|r| !live.contains(&key::name(r)))
        .collect();
    let limit = usize::try_from(limit.max(0)).unwrap_or(0);
    if idle.len() <= limit {
        return Ok(());
    }
    for r in &idle[..idle.len() - limit] {
        let params = DeleteParams {
            precondition_uid: Some(key::uid(r).to_owned()),
            ..Default::default()
        };
        match client.delete(&revisions(ns), key::name(r), &params).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The revisions of `owner` (a DaemonSet or StatefulSet, from `revisions`, indexed by
/// `owner-uid`), with the one its current template wants made sure of ([`ensure`]). On a
/// hash collision ([`HistoryError::Collision`]) the caller bumps `status.collisionCount`.
pub async fn sync(
    client: &dyn Client,
    revisions: &Store,
    owner: &Value,
    kind: &str,
    hash_label: &str,
) -> Result<Ensured, HistoryError> {
    let uid = key::uid(owner);
    let owned: Vec<Value> = revisions
        .by_index("owner-uid", uid)
        .into_iter()
        .filter(|r| key::controller_ref(r).is_some_and(|c| c["uid"] == uid))
        .map(|r| (*r).clone())
        .collect();
    let collisions = owner["status"]["collisionCount"].as_i64().unwrap_or(0);
    let wanted = new_revision(owner, kind, patch_of(owner), hash_label, 0, collisions);
    ensure(client, key::namespace(owner).unwrap_or(""), owned, wanted).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_data_is_what_go_writes_for_the_template() {
        // A DaemonSet as stored (a null left by an older defaulting), its data byte for byte
        // as upstream's getPatch encodes the typed object (the conformance suite compares).
        let ds = json!({"spec": {"template": {"metadata": {"labels": {"app": "x"}},
            "spec": {"initContainers": null, "containers": [{"name": "app", "image": "i",
                "resources": {}, "ports": null}], "restartPolicy": "Always"}}}});
        let data = patch_of(&ds);
        assert_eq!(
            serde_json::to_string(&data).unwrap(),
            r#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"x"}},"spec":{"containers":[{"image":"i","name":"app","resources":{}}],"restartPolicy":"Always"}}}}"#
        );
        // Data written before (with the nulls, without creationTimestamp) is the same
        // revision, under the same hash.
        let mut old = ds["spec"]["template"].clone();
        old["$patch"] = json!("replace");
        let old = json!({"spec": {"template": old}});
        assert!(same_data(&old, &data));
        assert_eq!(hash(&old, 0), hash(&data, 0));
        assert!(template_of(&json!({ "data": data }))["spec"]["initContainers"].is_null());
    }

    #[test]
    fn hash_ignores_key_order_and_follows_collisions() {
        let a = json!({"spec": {"template": {"metadata": {"labels": {"a": "1", "b": "2"}}}}});
        let b: Value = serde_json::from_str(
            r#"{"spec": {"template": {"metadata": {"labels": {"b": "2", "a": "1"}}}}}"#,
        )
        .unwrap();
        assert_eq!(hash(&a, 0), hash(&b, 0));
        assert_ne!(hash(&a, 0), hash(&a, 1));
        let other = json!({"spec": {"template": {"metadata": {"labels": {"a": "2"}}}}});
        assert_ne!(hash(&a, 0), hash(&other, 0));
        assert!(
            hash(&a, 0)
                .chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
        );
    }

    #[test]
    fn patch_round_trips_the_template() {
        let set = json!({"metadata": {"name": "web", "namespace": "d", "uid": "u",
                "annotations": {"kubernetes.io/change-cause": "x"}},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let data = patch_of(&set);
        assert_eq!(data["spec"]["template"]["$patch"], "replace");
        let r = new_revision(&set, "StatefulSet", data, STATEFULSET_HASH_LABEL, 3, 0);
        assert_eq!(template_of(&r), set["spec"]["template"]);
        let h = r["metadata"]["labels"][STATEFULSET_HASH_LABEL]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(r["metadata"]["name"], format!("web-{h}"));
        assert_eq!(r["metadata"]["labels"]["app"], "web");
        assert_eq!(
            r["metadata"]["annotations"]["kubernetes.io/change-cause"],
            "x"
        );
        assert_eq!(r["revision"], 3);
        assert_eq!(r["metadata"]["ownerReferences"][0]["kind"], "StatefulSet");
    }

    #[test]
    fn revisions_sort_and_number() {
        let r = |n: &str, i: i64| json!({"metadata": {"name": n}, "revision": i});
        let mut revs = vec![r("c", 3), r("a", 1), r("b", 2)];
        sort(&mut revs);
        let names: Vec<&str> = revs.iter().map(key::name).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(next_number(&revs), 4);
        assert_eq!(next_number(&[]), 1);
    }
}
