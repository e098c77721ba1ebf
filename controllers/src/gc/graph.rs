//! The ownership graph of the garbage collector: one node per object UID (or per owner UID
//! only referenced so far: a virtual node), its owner references and its dependents.
//!
//! [`Graph::process`] applies one change (a watch event, or a verified absence) and returns
//! the work it makes due; it does no I/O. Only the graph builder task calls it; workers read.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::catalog::CatalogEntry;
use k1s_runtime::key;
use k1s_runtime::watcher::Event;

pub const FOREGROUND: &str = "foregroundDeletion";
pub const ORPHAN: &str = "orphan";

/// Who an object is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub api_version: String,
    pub kind: String,
    /// The object's namespace; for a virtual node, its first dependent's namespace.
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
}

/// One owner reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub block_owner_deletion: bool,
}

impl OwnerRef {
    pub fn parse_all(obj: &Value) -> Vec<OwnerRef> {
        obj["metadata"]["ownerReferences"]
            .as_array()
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| {
                        Some(OwnerRef {
                            api_version: r["apiVersion"].as_str()?.to_owned(),
                            kind: r["kind"].as_str()?.to_owned(),
                            name: r["name"].as_str()?.to_owned(),
                            uid: r["uid"].as_str().filter(|u| !u.is_empty())?.to_owned(),
                            block_owner_deletion: r["blockOwnerDeletion"].as_bool() == Some(true),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// One object of the graph.
#[derive(Debug, Clone)]
pub struct Node {
    pub identity: Identity,
    pub owners: Vec<OwnerRef>,
    /// UIDs of the objects that name this one as an owner.
    pub dependents: HashSet<String>,
    /// Known only from references; not (yet) seen by a watch.
    pub virtual_node: bool,
    pub being_deleted: bool,
    /// Being deleted in the foreground: waits for its blocking dependents.
    pub deleting_dependents: bool,
}

/// Work the graph makes due.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Work {
    /// Check whether the object (by UID) should be deleted, or its foreground deletion done.
    AttemptToDelete(String),
    /// Remove references to the owner (by UID) from its dependents, then its `orphan`
    /// finalizer.
    AttemptToOrphan(String),
}

/// A change to the graph.
#[derive(Debug, Clone)]
pub enum Change {
    /// A watch event of one resource.
    Watch(CatalogEntry, Event),
    /// A worker found the object of this UID absent: treat it as deleted.
    Absent(String),
}

#[derive(Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
    /// Per resource being relisted: the UIDs seen so far.
    relisting: HashMap<(String, String), HashSet<String>>,
}

impl Graph {
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The dependents of `uid` whose reference to it has `blockOwnerDeletion`.
    pub fn blocking_dependents(&self, uid: &str) -> Vec<Node> {
        let Some(owner) = self.nodes.get(uid) else {
            return Vec::new();
        };
        owner
            .dependents
            .iter()
            .filter_map(|d| self.nodes.get(d))
            .filter(|d| {
                d.owners
                    .iter()
                    .any(|r| r.uid == uid && r.block_owner_deletion)
            })
            .cloned()
            .collect()
    }

    /// Applies one change; returns the work it makes due.
    pub fn process(&mut self, change: Change) -> Vec<Work> {
        let mut work = Vec::new();
        match change {
            Change::Absent(uid) => self.remove(&uid, &mut work),
            Change::Watch(entry, ev) => {
                let kind = (entry.api_version(), entry.kind.clone());
                match ev {
                    Event::Init => {
                        self.relisting.insert(kind, HashSet::new());
                    }
                    Event::InitApply(o) => {
                        if let Some(seen) = self.relisting.get_mut(&kind) {
                            seen.insert(key::uid(&o).to_owned());
                        }
                        self.upsert(&entry, &o, &mut work);
                    }
                    Event::InitDone => {
                        // Objects of this resource that the relist no longer has were deleted
                        // while the watch was down.
                        let seen = self.relisting.remove(&kind).unwrap_or_default();
                        let gone: Vec<String> = self
                            .nodes
                            .values()
                            .filter(|n| {
                                !n.virtual_node
                                    && n.identity.api_version == kind.0
                                    && n.identity.kind == kind.1
                                    && !seen.contains(&n.identity.uid)
                            })
                            .map(|n| n.identity.uid.clone())
                            .collect();
                        for uid in gone {
                            self.remove(&uid, &mut work);
                        }
                    }
                    Event::Apply(o) => self.upsert(&entry, &o, &mut work),
                    Event::Delete(o) => self.remove(key::uid(&o), &mut work),
                }
            }
        }
        work
    }

    fn upsert(&mut self, entry: &CatalogEntry, obj: &Value, work: &mut Vec<Work>) {
        let uid = key::uid(obj).to_owned();
        if uid.is_empty() {
            return;
        }
        let identity = Identity {
            api_version: entry.api_version(),
            kind: entry.kind.clone(),
            namespace: key::namespace(obj).map(str::to_owned),
            name: key::name(obj).to_owned(),
            uid: uid.clone(),
        };
        let owners = OwnerRef::parse_all(obj);
        let being_deleted = key::is_deleting(obj);
        let old_owners = match self.nodes.get_mut(&uid) {
            Some(n) => {
                n.identity = identity;
                n.virtual_node = false;
                n.being_deleted = being_deleted;
                std::mem::replace(&mut n.owners, owners.clone())
            }
            None => {
                self.nodes.insert(
                    uid.clone(),
                    Node {
                        identity,
                        owners: owners.clone(),
                        dependents: HashSet::new(),
                        virtual_node: false,
                        being_deleted,
                        deleting_dependents: false,
                    },
                );
                Vec::new()
            }
        };
        // References removed (or changed): owners waiting on their dependents may be done.
        for old in &old_owners {
            if owners.contains(old) {
                continue;
            }
            let still = owners.iter().any(|r| r.uid == old.uid);
            if let Some(owner) = self.nodes.get_mut(&old.uid) {
                if !still {
                    owner.dependents.remove(&uid);
                }
                if owner.deleting_dependents {
                    work.push(Work::AttemptToDelete(old.uid.clone()));
                }
            }
        }
        // References added: an owner not seen yet is a virtual node whose existence is
        // checked.
        for r in &owners {
            if old_owners.iter().any(|o| o.uid == r.uid) {
                continue;
            }
            match self.nodes.get_mut(&r.uid) {
                Some(owner) => {
                    owner.dependents.insert(uid.clone());
                    if owner.deleting_dependents {
                        // A new dependent of an owner deleted in the foreground goes first.
                        work.push(Work::AttemptToDelete(uid.clone()));
                    }
                }
                None => {
                    self.nodes.insert(
                        r.uid.clone(),
                        Node {
                            identity: Identity {
                                api_version: r.api_version.clone(),
                                kind: r.kind.clone(),
                                namespace: key::namespace(obj).map(str::to_owned),
                                name: r.name.clone(),
                                uid: r.uid.clone(),
                            },
                            owners: Vec::new(),
                            dependents: HashSet::from([uid.clone()]),
                            virtual_node: true,
                            being_deleted: false,
                            deleting_dependents: false,
                        },
                    );
                    work.push(Work::AttemptToDelete(r.uid.clone()));
                }
            }
        }
        // Deletion transitions.
        if being_deleted && key::has_finalizer(obj, ORPHAN) {
            work.push(Work::AttemptToOrphan(uid.clone()));
        }
        if being_deleted && key::has_finalizer(obj, FOREGROUND) {
            let n = self.nodes.get_mut(&uid);
            if let Some(n) = n {
                n.deleting_dependents = true;
                work.extend(n.dependents.iter().cloned().map(Work::AttemptToDelete));
            }
            work.push(Work::AttemptToDelete(uid.clone()));
        } else if let Some(n) = self.nodes.get_mut(&uid) {
            n.deleting_dependents = false;
        }
    }

    fn remove(&mut self, uid: &str, work: &mut Vec<Work>) {
        let Some(node) = self.nodes.remove(uid) else {
            return;
        };
        work.extend(node.dependents.iter().cloned().map(Work::AttemptToDelete));
        for r in &node.owners {
            if let Some(owner) = self.nodes.get_mut(&r.uid) {
                owner.dependents.remove(uid);
                if owner.deleting_dependents {
                    work.push(Work::AttemptToDelete(r.uid.clone()));
                }
            }
        }
        // Dependents keep their references; a later change to one re-creates the owner as
        // a virtual node, whose absence is then verified again.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn rs() -> CatalogEntry {
        CatalogEntry::new("apps", "v1", "replicasets", "ReplicaSet", true)
    }
    fn pods() -> CatalogEntry {
        CatalogEntry::new("", "v1", "pods", "Pod", true)
    }
    fn owner(uid: &str, extra: Value) -> Arc<Value> {
        let mut o = json!({"metadata": {"name": "rs", "namespace": "d", "uid": uid}});
        if let Some(m) = extra.as_object() {
            for (k, v) in m {
                o["metadata"][k] = v.clone();
            }
        }
        Arc::new(o)
    }
    fn pod(name: &str, uid: &str, owner_uid: &str, block: bool) -> Arc<Value> {
        Arc::new(
            json!({"metadata": {"name": name, "namespace": "d", "uid": uid,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                 "uid": owner_uid, "blockOwnerDeletion": block}]}}),
        )
    }

    #[test]
    fn unseen_owners_are_virtual_and_checked() {
        let mut g = Graph::default();
        let w = g.process(Change::Watch(
            pods(),
            Event::Apply(pod("p", "p1", "o1", true)),
        ));
        assert_eq!(w, vec![Work::AttemptToDelete("o1".into())]);
        let o = g.get("o1").unwrap();
        assert!(o.virtual_node);
        assert_eq!(o.identity.namespace.as_deref(), Some("d"));
        // The owner shows up: no longer virtual, dependents kept.
        let w = g.process(Change::Watch(rs(), Event::Apply(owner("o1", json!({})))));
        assert!(w.is_empty());
        assert!(!g.get("o1").unwrap().virtual_node);
        assert_eq!(g.blocking_dependents("o1").len(), 1);
        // The owner is found absent: its dependents are checked.
        let w = g.process(Change::Absent("o1".into()));
        assert_eq!(w, vec![Work::AttemptToDelete("p1".into())]);
        assert!(g.get("o1").is_none());
    }

    #[test]
    fn foreground_and_orphan_transitions() {
        let mut g = Graph::default();
        g.process(Change::Watch(rs(), Event::Apply(owner("o1", json!({})))));
        g.process(Change::Watch(
            pods(),
            Event::Apply(pod("a", "a1", "o1", true)),
        ));
        g.process(Change::Watch(
            pods(),
            Event::Apply(pod("b", "b1", "o1", false)),
        ));
        let deleting =
            json!({"deletionTimestamp": "2020-01-01T00:00:00Z", "finalizers": [FOREGROUND]});
        let mut w = g.process(Change::Watch(rs(), Event::Apply(owner("o1", deleting))));
        w.sort_by_key(|w| format!("{w:?}"));
        assert_eq!(
            w,
            vec![
                Work::AttemptToDelete("a1".into()),
                Work::AttemptToDelete("b1".into()),
                Work::AttemptToDelete("o1".into()),
            ]
        );
        assert!(g.get("o1").unwrap().deleting_dependents);
        // A dependent goes: the waiting owner is checked again.
        let w = g.process(Change::Watch(
            pods(),
            Event::Delete(pod("a", "a1", "o1", true)),
        ));
        assert_eq!(w, vec![Work::AttemptToDelete("o1".into())]);
        assert!(g.blocking_dependents("o1").is_empty());

        let orphaning =
            json!({"deletionTimestamp": "2020-01-01T00:00:00Z", "finalizers": [ORPHAN]});
        let w = g.process(Change::Watch(rs(), Event::Apply(owner("o1", orphaning))));
        assert_eq!(w, vec![Work::AttemptToOrphan("o1".into())]);
        assert!(!g.get("o1").unwrap().deleting_dependents);
    }

    #[test]
    fn a_relist_deletes_what_it_no_longer_has() {
        let mut g = Graph::default();
        g.process(Change::Watch(rs(), Event::Apply(owner("o1", json!({})))));
        g.process(Change::Watch(
            pods(),
            Event::Apply(pod("a", "a1", "o1", true)),
        ));
        g.process(Change::Watch(rs(), Event::Init));
        let w = g.process(Change::Watch(rs(), Event::InitDone));
        assert_eq!(w, vec![Work::AttemptToDelete("a1".into())]);
        assert!(g.get("o1").is_none());
        assert!(g.get("a1").is_some());
    }

    #[test]
    fn dropping_a_reference_wakes_a_waiting_owner() {
        let mut g = Graph::default();
        let deleting =
            json!({"deletionTimestamp": "2020-01-01T00:00:00Z", "finalizers": [FOREGROUND]});
        g.process(Change::Watch(rs(), Event::Apply(owner("o1", deleting))));
        let w = g.process(Change::Watch(
            pods(),
            Event::Apply(pod("a", "a1", "o1", true)),
        ));
        assert_eq!(w, vec![Work::AttemptToDelete("a1".into())]);
        let mut freed = (*pod("a", "a1", "o1", true)).clone();
        freed["metadata"]["ownerReferences"] = json!([]);
        let w = g.process(Change::Watch(pods(), Event::Apply(Arc::new(freed))));
        assert_eq!(w, vec![Work::AttemptToDelete("o1".into())]);
        assert!(g.get("o1").unwrap().dependents.is_empty());
    }
}
