//! One encryption-at-rest configuration for every server of a cluster: the generated
//! configuration of `--secrets-encryption` is kept in the datastore too
//! (`/k1s/bootstrap/encryption`), sealed with the join token like the cluster identity
//! (`crate::cluster_identity`), and kept in step with each server's file both ways:
//!
//! - every few seconds a server compares its file with the record; when only its file changed
//!   since they last agreed (`k1s secrets-encrypt rotate-keys` here, or old keys removed
//!   after a sweep), the record is written from it; when only the record changed (the same
//!   on another server), the file is written from it;
//! - at start, or when both changed, keys are compared as (rule, name, secret): a rotation
//!   only adds a key in front, so the side whose keys include the other's is newer (a
//!   rotation on a stopped server is published when it starts; keys removed from the file
//!   of a stopped server come back — remove them while it runs);
//! - two configurations that each have keys the other lacks (two servers that generated
//!   their own before they shared a datastore) are merged: the record's, with the other
//!   keys added after its own, so everything either wrote still reads and one key writes;
//! - the same key name with two secrets cannot be merged and stops the server with a message.
//!
//! A changed file is picked up by the re-encryption runner ([`super::sweep::run`]), which
//! reloads it and re-encrypts what is not under the new write key. Because the record is in
//! the datastore, a snapshot restored on a new machine with the original token brings the
//! keys back with the secrets they encrypt. A file given with `--encryption-provider-config`
//! is the operator's and is not shared: give every server the same one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k1s_store::{Store, StoreError};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::config::{ConfigError, EncryptionConfig};
use crate::cluster_identity::{IdentityError, open_record, seal_record, write_atomic};

/// Where the record lives in the datastore.
pub const KEY: &str = "/k1s/bootstrap/encryption";
/// How often a server compares its file with the record.
const SYNC_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    #[error(transparent)]
    Sealed(#[from] IdentityError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("the datastore: {0}")]
    Store(#[from] StoreError),
    #[error(
        "the encryption configuration in {path} and the cluster's both have a key named \
         {name:?} with different secrets; data written with one cannot be read with the other. \
         Keep the file of the server that wrote the secrets on every server"
    )]
    Conflict { path: PathBuf, name: String },
}

/// What [`reconcile`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reconciled {
    /// File and record agree.
    Unchanged,
    /// The record was written from the file (there was none, or the file is newer).
    Published,
    /// The file was written from the record.
    Took,
    /// Both were written with the merge of the two.
    Merged,
}

/// One key of a configuration: the rule it belongs to (its resources), name, secret.
type KeyId = (String, String, String);

fn keys(doc: &Value) -> BTreeSet<KeyId> {
    let mut out = BTreeSet::new();
    for rule in doc["resources"].as_array().into_iter().flatten() {
        let resources = rule["resources"].to_string();
        for p in rule["providers"].as_array().into_iter().flatten() {
            for k in p["aesgcm"]["keys"].as_array().into_iter().flatten() {
                let name = k["name"].as_str().unwrap_or_default().to_owned();
                let secret = k["secret"].as_str().unwrap_or_default().to_owned();
                out.insert((resources.clone(), name, secret));
            }
        }
    }
    out
}

/// Which side wins when file and record differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefer {
    /// The side whose keys include the other's (at start, or when both changed).
    Newer,
    /// The file (only it changed since they last agreed).
    Local,
    /// The record (only it changed).
    Shared,
}

/// What to do with a file's configuration `local` and the record's `shared`.
#[derive(Debug, PartialEq)]
enum Plan {
    Same,
    TakeShared,
    PublishLocal,
    Merge(Value),
    /// A key name with two secrets.
    Conflict(String),
}

fn plan(local: &Value, shared: &Value, prefer: Prefer) -> Plan {
    if local == shared {
        return Plan::Same;
    }
    let (l, s) = (keys(local), keys(shared));
    for (rule, name, secret) in &l {
        if s.iter()
            .any(|(r, n, sec)| r == rule && n == name && sec != secret)
        {
            return Plan::Conflict(name.clone());
        }
    }
    match prefer {
        Prefer::Local => return Plan::PublishLocal,
        Prefer::Shared => return Plan::TakeShared,
        Prefer::Newer => {}
    }
    if l.is_subset(&s) {
        return Plan::TakeShared;
    }
    if s.is_subset(&l) {
        return Plan::PublishLocal;
    }
    // Each has keys the other lacks: the record's, plus the file's others (read only).
    let mut merged = shared.clone();
    for rule in merged["resources"].as_array_mut().into_iter().flatten() {
        let resources = rule["resources"].to_string();
        let extra: Vec<Value> = l
            .difference(&s)
            .filter(|(r, _, _)| *r == resources)
            .map(|(_, name, secret)| serde_json::json!({"name": name, "secret": secret}))
            .collect();
        if let Some(list) = rule["providers"]
            .as_array_mut()
            .and_then(|ps| ps.iter_mut().find_map(|p| p.get_mut("aesgcm")))
            .and_then(|a| a.get_mut("keys"))
            .and_then(Value::as_array_mut)
        {
            list.extend(extra);
        }
    }
    Plan::Merge(merged)
}

fn document(path: &Path, text: &str) -> Result<Value, SharedError> {
    // Validate as the server would load it, then compare as data.
    EncryptionConfig::parse(path, text)?;
    serde_yaml::from_str::<Value>(text).map_err(|e| {
        SharedError::Config(ConfigError::Syntax {
            path: path.to_owned(),
            detail: e.to_string(),
        })
    })
}

fn pretty(doc: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(doc).unwrap_or_default();
    out.push(b'\n');
    out
}

async fn seal(plain: Vec<u8>, password: &str) -> Result<Vec<u8>, SharedError> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || seal_record(KEY, &plain, &password))
        .await
        .map_err(|e| IdentityError::Kdf(e.to_string()))?
        .map_err(SharedError::from)
}

async fn open(sealed: Vec<u8>, password: &str) -> Result<Vec<u8>, SharedError> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || open_record(KEY, &sealed, &password))
        .await
        .map_err(|e| IdentityError::Kdf(e.to_string()))?
        .map_err(SharedError::from)
}

/// A server that has no configuration file yet takes the cluster's, when there is one:
/// writes it to `path`. Returns whether it did.
pub async fn take_if_absent(
    store: &dyn Store,
    path: &Path,
    password: &str,
) -> Result<bool, SharedError> {
    if path.exists() {
        return Ok(false);
    }
    let Some(kv) = store.get(KEY).await? else {
        return Ok(false);
    };
    let text = open(kv.value.to_vec(), password).await?;
    document(path, &String::from_utf8_lossy(&text))?;
    write_atomic(path, &text, 0o600)?;
    Ok(true)
}

/// Brings the file at `path` and the record in step once, `prefer` saying which side wins.
pub async fn reconcile(
    store: &dyn Store,
    path: &Path,
    password: &str,
    prefer: Prefer,
) -> Result<Reconciled, SharedError> {
    for _ in 0..5 {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let local = document(path, &text)?;
        let Some(kv) = store.get(KEY).await? else {
            let sealed = seal(pretty(&local), password).await?;
            match store.create(KEY, sealed.into()).await {
                Ok(_) => return Ok(Reconciled::Published),
                Err(StoreError::AlreadyExists { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        };
        let shared_text = open(kv.value.to_vec(), password).await?;
        let shared = document(path, &String::from_utf8_lossy(&shared_text))?;
        let (write_file, publish, outcome) = match plan(&local, &shared, prefer) {
            Plan::Same => return Ok(Reconciled::Unchanged),
            Plan::Conflict(name) => {
                return Err(SharedError::Conflict {
                    path: path.to_owned(),
                    name,
                });
            }
            Plan::TakeShared => (Some(shared), None, Reconciled::Took),
            Plan::PublishLocal => (None, Some(local), Reconciled::Published),
            Plan::Merge(doc) => (Some(doc.clone()), Some(doc), Reconciled::Merged),
        };
        if let Some(doc) = publish {
            let sealed = seal(pretty(&doc), password).await?;
            match store.update(KEY, sealed.into(), kv.mod_revision).await {
                Ok(_) => {}
                // Another server changed it meanwhile: compare again.
                Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        if let Some(doc) = write_file {
            write_atomic(path, &pretty(&doc), 0o600)?;
        }
        return Ok(outcome);
    }
    Err(StoreError::Backend(format!("{KEY} kept changing while it was being compared")).into())
}

/// The file's bytes and the record's revision (0: none), or `None` if the store cannot say.
async fn state(store: &dyn Store, path: &Path) -> Option<(Vec<u8>, i64)> {
    let rev = match store.get(KEY).await {
        Ok(kv) => kv.map_or(0, |kv| kv.mod_revision),
        Err(e) => {
            tracing::debug!(error = %e, "reading the shared encryption configuration");
            return None;
        }
    };
    Some((std::fs::read(path).unwrap_or_default(), rev))
}

/// Keeps the file and the record in step until `cancel`, after a [`reconcile`] at start made
/// them agree: compares again whenever the file's bytes or the record's revision changed.
pub async fn run(
    store: std::sync::Arc<dyn Store>,
    path: PathBuf,
    password: String,
    cancel: CancellationToken,
) {
    let mut seen = state(&*store, &path).await;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(SYNC_INTERVAL) => {}
        }
        let Some((file, rev)) = state(&*store, &path).await else {
            continue;
        };
        let prefer = match &seen {
            Some((f, r)) if *f == file && *r == rev => continue,
            Some((f, _)) if *f == file => Prefer::Shared,
            Some((_, r)) if *r == rev => Prefer::Local,
            _ => Prefer::Newer,
        };
        match reconcile(&*store, &path, &password, prefer).await {
            Ok(done) => {
                if done != Reconciled::Unchanged {
                    tracing::info!(outcome = ?done, path = %path.display(), "encryption configuration shared with the cluster");
                }
                seen = state(&*store, &path).await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot keep the encryption configuration in step with the cluster")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k1s_store::redb::{RedbConfig, RedbStore};

    const PW: &str = "cluster-password";

    fn config(keys: &[(&str, &str)]) -> Vec<u8> {
        let keys: Vec<Value> = keys
            .iter()
            .map(|(n, s)| serde_json::json!({"name": n, "secret": s}))
            .collect();
        pretty(&serde_json::json!({
            "kind": "EncryptionConfiguration", "apiVersion": "apiserver.config.k8s.io/v1",
            "resources": [{"resources": ["secrets"],
                "providers": [{"aesgcm": {"keys": keys}}, {"identity": {}}]}]}))
    }

    const K1: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    const K2: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";
    const K3: &str = "YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE=";

    fn names(path: &Path) -> Vec<String> {
        let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        keys_in_order(&doc)
    }

    fn keys_in_order(doc: &Value) -> Vec<String> {
        doc["resources"][0]["providers"][0]["aesgcm"]["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["name"].as_str().unwrap().to_owned())
            .collect()
    }

    #[tokio::test]
    async fn servers_share_rotations_and_merge_what_they_generated_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(RedbConfig::new(dir.path().join("s.redb"))).unwrap();
        let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
        std::fs::write(&a, config(&[("k1", K1)])).unwrap();
        // The first server publishes; a second that generated its own merges.
        assert_eq!(
            reconcile(&store, &a, PW, Prefer::Newer).await.unwrap(),
            Reconciled::Published
        );
        std::fs::write(&b, config(&[("k2", K2)])).unwrap();
        assert_eq!(
            reconcile(&store, &b, PW, Prefer::Newer).await.unwrap(),
            Reconciled::Merged
        );
        assert_eq!(
            names(&b),
            ["k1", "k2"],
            "the cluster's key writes; k2 still reads"
        );
        assert_eq!(
            reconcile(&store, &a, PW, Prefer::Newer).await.unwrap(),
            Reconciled::Took
        );
        assert_eq!(names(&a), ["k1", "k2"]);
        // A server without a file takes the cluster's as it is.
        let c = dir.path().join("c.json");
        assert!(take_if_absent(&store, &c, PW).await.unwrap());
        assert_eq!(names(&c), ["k1", "k2"]);
        assert!(!take_if_absent(&store, &c, PW).await.unwrap());
        // A rotation on one server reaches the other.
        std::fs::write(&a, config(&[("k3", K3), ("k1", K1), ("k2", K2)])).unwrap();
        assert_eq!(
            reconcile(&store, &a, PW, Prefer::Newer).await.unwrap(),
            Reconciled::Published
        );
        assert_eq!(
            reconcile(&store, &b, PW, Prefer::Newer).await.unwrap(),
            Reconciled::Took
        );
        assert_eq!(names(&b), ["k3", "k1", "k2"]);
        assert_eq!(
            reconcile(&store, &b, PW, Prefer::Newer).await.unwrap(),
            Reconciled::Unchanged
        );
        // Another token cannot read it.
        assert!(matches!(
            reconcile(&store, &b, "other", Prefer::Newer).await,
            Err(SharedError::Sealed(IdentityError::WrongToken))
        ));
        // An old key removed on one server while it runs goes; at a start it would come back.
        std::fs::write(&a, config(&[("k3", K3), ("k2", K2)])).unwrap();
        assert_eq!(
            reconcile(&store, &a, PW, Prefer::Local).await.unwrap(),
            Reconciled::Published
        );
        assert_eq!(
            reconcile(&store, &b, PW, Prefer::Shared).await.unwrap(),
            Reconciled::Took
        );
        assert_eq!(names(&b), ["k3", "k2"]);
        // One name, two secrets: refused.
        std::fs::write(&b, config(&[("k2", K1)])).unwrap();
        assert!(matches!(
            reconcile(&store, &b, PW, Prefer::Newer).await,
            Err(SharedError::Conflict { name, .. }) if name == "k2"
        ));
        store.close();
    }
}
