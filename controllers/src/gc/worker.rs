//! What the garbage collector's workers do with a node: decide whether an object whose
//! owners are gone must be deleted, finish a foreground deletion, or orphan dependents —
//! upstream's `attemptToDeleteItem`, `processDeletingDependentsItem` and
//! `attemptToOrphanWorker`. Every decision rests on live GETs (with UID checks), never on the
//! graph alone; the graph only says which objects to look at.

use std::sync::{Arc, Mutex, PoisonError};

use k1s_api::client::{Client, ClientError, DeleteParams, ResourceRef, WriteParams};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::GcError;
use super::graph::{Change, FOREGROUND, Graph, Identity, Node, ORPHAN, OwnerRef};
use crate::catalog::ResourceCatalog;
use k1s_runtime::key;
use k1s_runtime::queue::WorkQueue;

/// How often a read-modify-write retries after a conflict.
const RETRIES: usize = 8;

pub struct Workers {
    pub client: Arc<dyn Client>,
    pub catalog: Arc<dyn ResourceCatalog>,
    pub graph: Arc<Mutex<Graph>>,
    /// Changes back to the graph builder (verified absences).
    pub changes: mpsc::Sender<Change>,
    /// The attempt-to-delete queue (dependents to delete before their owner go on it).
    pub delete_queue: WorkQueue<String>,
}

/// How an owner reference resolves.
enum OwnerState {
    /// The owner exists and is not waiting for its dependents.
    Solid,
    /// The owner is gone (or was replaced by another object of the same name).
    Dangling,
    /// The owner is being deleted in the foreground.
    Waiting,
}

impl Workers {
    fn node(&self, uid: &str) -> Option<Node> {
        self.graph
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uid)
            .cloned()
    }

    /// Where an object of `identity` lives, or `None` if its kind is not served.
    fn resource_of(&self, id: &Identity) -> Result<ResourceRef, GcError> {
        let entry = self
            .catalog
            .find_kind(&id.api_version, &id.kind)
            .ok_or_else(|| GcError::UnknownKind {
                api_version: id.api_version.clone(),
                kind: id.kind.clone(),
            })?;
        let ns = if entry.namespaced {
            id.namespace.as_deref()
        } else {
            None
        };
        Ok(entry.at(ns))
    }

    /// The live object, `None` if it is gone or has another UID.
    async fn live(&self, id: &Identity) -> Result<Option<Value>, GcError> {
        let r = self.resource_of(id)?;
        match self.client.get(&r, &id.name).await {
            Ok(o) if key::uid(&o) == id.uid => Ok(Some(o)),
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(api(id, e)),
        }
    }

    async fn absent(&self, uid: &str) {
        let _ = self.changes.send(Change::Absent(uid.to_owned())).await;
    }

    pub async fn attempt_to_delete(&self, uid: &str) -> Result<(), GcError> {
        let Some(node) = self.node(uid) else {
            return Ok(());
        };
        if node.being_deleted && !node.deleting_dependents {
            return Ok(());
        }
        let Some(latest) = self.live(&node.identity).await? else {
            self.absent(uid).await;
            return Ok(());
        };
        if node.virtual_node {
            // It exists; its watch will bring it into the graph.
            return Ok(());
        }
        if node.deleting_dependents {
            return self.process_deleting_dependents(&node).await;
        }
        let refs = OwnerRef::parse_all(&latest);
        if refs.is_empty() {
            return Ok(());
        }
        let (mut solid, mut dangling, mut waiting) = (Vec::new(), Vec::new(), Vec::new());
        for r in refs {
            match self.classify(&node.identity, &r).await? {
                OwnerState::Solid => solid.push(r),
                OwnerState::Dangling => dangling.push(r),
                OwnerState::Waiting => waiting.push(r),
            }
        }
        let id = &node.identity;
        if !solid.is_empty() {
            if dangling.is_empty() && waiting.is_empty() {
                return Ok(());
            }
            // Other owners remain: only the references to gone or leaving owners go.
            let drop: Vec<String> = dangling
                .iter()
                .chain(waiting.iter())
                .map(|r| r.uid.clone())
                .collect();
            return self
                .modify(id, |o| {
                    remove_owner_refs(o, &drop);
                })
                .await;
        }
        if !waiting.is_empty() && !node.dependents.is_empty() {
            // This object has dependents of its own: it goes in the foreground too, so its
            // dependents go first and the waiting owners wait for all of them (a Deployment
            // deleted in the foreground outlives its ReplicaSets' pods). Only when one of its
            // dependents is itself waiting for dependents (a possible cycle) do the
            // references to the waiting owners stop blocking them, as upstream does.
            let cycle = node
                .dependents
                .iter()
                .any(|d| self.node(d).is_some_and(|n| n.deleting_dependents));
            if cycle {
                let unblock: Vec<String> = waiting.iter().map(|r| r.uid.clone()).collect();
                self.modify(id, |o| unblock_owner_refs(o, &unblock)).await?;
            }
            return self.delete(id, "Foreground").await;
        }
        let policy = if key::has_finalizer(&latest, ORPHAN) {
            "Orphan"
        } else if key::has_finalizer(&latest, FOREGROUND) {
            "Foreground"
        } else {
            "Background"
        };
        self.delete(id, policy).await
    }

    async fn classify(&self, dependent: &Identity, r: &OwnerRef) -> Result<OwnerState, GcError> {
        let entry = self
            .catalog
            .find_kind(&r.api_version, &r.kind)
            .ok_or_else(|| GcError::UnknownKind {
                api_version: r.api_version.clone(),
                kind: r.kind.clone(),
            })?;
        if entry.namespaced && dependent.namespace.is_none() {
            // A cluster-scoped object cannot be owned by a namespaced one: the reference is
            // unresolvable and the object is never collected (upstream since 1.20).
            return Ok(OwnerState::Solid);
        }
        let owner = Identity {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: dependent.namespace.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
        };
        Ok(match self.live(&owner).await? {
            None => OwnerState::Dangling,
            Some(o) if key::is_deleting(&o) && key::has_finalizer(&o, FOREGROUND) => {
                OwnerState::Waiting
            }
            Some(_) => OwnerState::Solid,
        })
    }

    /// An owner deleted in the foreground: when no dependent blocks it any more, its
    /// `foregroundDeletion` finalizer goes; until then its blocking dependents are deleted.
    async fn process_deleting_dependents(&self, node: &Node) -> Result<(), GcError> {
        let blocking = self
            .graph
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .blocking_dependents(&node.identity.uid);
        if blocking.is_empty() {
            return self
                .modify(&node.identity, |o| remove_finalizer(o, FOREGROUND))
                .await;
        }
        for d in blocking {
            if !d.being_deleted {
                self.delete_queue.add(d.identity.uid.clone());
            }
        }
        Ok(())
    }

    /// An owner deleted with `orphan`: its dependents lose their references to it, then it
    /// loses the finalizer.
    pub async fn attempt_to_orphan(&self, uid: &str) -> Result<(), GcError> {
        let Some(node) = self.node(uid) else {
            return Ok(());
        };
        let dependents: Vec<Node> = {
            let g = self.graph.lock().unwrap_or_else(PoisonError::into_inner);
            node.dependents
                .iter()
                .filter_map(|d| g.get(d).cloned())
                .collect()
        };
        let drop = [uid.to_owned()];
        for d in dependents.iter().filter(|d| !d.virtual_node) {
            self.modify(&d.identity, |o| remove_owner_refs(o, &drop))
                .await?;
        }
        self.modify(&node.identity, |o| remove_finalizer(o, ORPHAN))
            .await
    }

    /// Deletes the object (if it is still the same object) with `policy`.
    async fn delete(&self, id: &Identity, policy: &str) -> Result<(), GcError> {
        let r = self.resource_of(id)?;
        let params = DeleteParams {
            propagation_policy: Some(policy.into()),
            precondition_uid: Some(id.uid.clone()),
            ..Default::default()
        };
        tracing::debug!(kind = %id.kind, name = %id.name, policy, "garbage collecting");
        match self.client.delete(&r, &id.name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) if e.is_conflict() => {
                // Another object of that name now: this one is gone.
                self.absent(&id.uid).await;
                Ok(())
            }
            Err(e) => Err(api(id, e)),
        }
    }

    /// Reads, changes and writes the object, retrying on conflicts; nothing if it is gone or
    /// the change changes nothing.
    async fn modify<F>(&self, id: &Identity, change: F) -> Result<(), GcError>
    where
        F: Fn(&mut Value),
    {
        let r = self.resource_of(id)?;
        for _ in 0..RETRIES {
            let Some(mut o) = self.live(id).await? else {
                return Ok(());
            };
            let before = o.clone();
            change(&mut o);
            if o == before {
                return Ok(());
            }
            match self
                .client
                .update(&r, o, None, &WriteParams::default())
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Err(api(id, e)),
            }
        }
        Err(api(
            id,
            ClientError {
                code: 409,
                reason: "Conflict".into(),
                message: "still conflicting after retries".into(),
            },
        ))
    }
}

fn api(id: &Identity, source: ClientError) -> GcError {
    GcError::Api {
        kind: id.kind.clone(),
        namespace: id.namespace.clone().unwrap_or_default(),
        name: id.name.clone(),
        source: Box::new(source),
    }
}

fn remove_owner_refs(o: &mut Value, uids: &[String]) {
    if let Some(refs) = o["metadata"]["ownerReferences"].as_array_mut() {
        refs.retain(|r| !uids.iter().any(|u| r["uid"].as_str() == Some(u.as_str())));
        if refs.is_empty()
            && let Some(m) = o["metadata"].as_object_mut()
        {
            m.remove("ownerReferences");
        }
    }
}

fn unblock_owner_refs(o: &mut Value, uids: &[String]) {
    if let Some(refs) = o["metadata"]["ownerReferences"].as_array_mut() {
        for r in refs {
            if uids.iter().any(|u| r["uid"].as_str() == Some(u.as_str())) {
                r["blockOwnerDeletion"] = json!(false);
            }
        }
    }
}

fn remove_finalizer(o: &mut Value, f: &str) {
    if let Some(fs) = o["metadata"]["finalizers"].as_array_mut() {
        fs.retain(|x| x.as_str() != Some(f));
        if fs.is_empty()
            && let Some(m) = o["metadata"].as_object_mut()
        {
            m.remove("finalizers");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits() {
        let mut o = json!({"metadata": {"finalizers": ["a", "orphan"],
            "ownerReferences": [{"uid": "1"}, {"uid": "2"}]}});
        remove_finalizer(&mut o, "orphan");
        assert_eq!(o["metadata"]["finalizers"], json!(["a"]));
        remove_finalizer(&mut o, "a");
        assert!(o["metadata"].get("finalizers").is_none());
        unblock_owner_refs(&mut o, &["2".into()]);
        assert_eq!(
            o["metadata"]["ownerReferences"][1]["blockOwnerDeletion"],
            false
        );
        remove_owner_refs(&mut o, &["1".into()]);
        assert_eq!(
            o["metadata"]["ownerReferences"],
            json!([{"uid": "2", "blockOwnerDeletion": false}])
        );
        remove_owner_refs(&mut o, &["2".into()]);
        assert!(o["metadata"].get("ownerReferences").is_none());
    }
}
