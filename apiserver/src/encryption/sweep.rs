//! The re-encryption sweep: after a start, a key rotation or a change of providers, rewrites
//! every stored object of a configured resource that is not in the form a write would give it
//! now (under an older key, or still plaintext), so the old key can then be removed from the
//! configuration.
//!
//! Each rewrite is a compare-and-swap on the object's modify revision with the same object
//! bytes: a user write that lands in between wins (it was written with the current key
//! anyway) and the sweep looks at the key again. Like upstream's storage version migration, a
//! rewrite is a new revision, so watchers see a MODIFIED event with unchanged content. Logs
//! carry counts and store keys, never values.
//!
//! [`run`] also follows the configuration file: when its content changes, the new rules are
//! loaded (a file that does not validate is logged and ignored) and the sweep runs again.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k1s_store::{ListRequest, Store, StoreError};
use tokio_util::sync::CancellationToken;

use super::Transformer;
use super::config::EncryptionConfig;
use crate::rest::Rest;

/// How many keys one store read of the sweep fetches.
const PAGE: usize = 200;
/// How many times one key is retried when user writes keep racing the sweep.
const RETRIES: usize = 5;
/// How often the configuration file is checked for changes.
const RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// What one sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SweepStats {
    /// Objects looked at.
    pub checked: u64,
    /// Objects rewritten under the current write key (or as plaintext).
    pub rewritten: u64,
    /// Objects that could not be read (unknown key, damaged value) and were left alone.
    pub failed: u64,
}

/// The store prefixes of every served resource the configuration covers.
pub fn covered_prefixes(rest: &Rest) -> Vec<String> {
    let mut prefixes: Vec<String> = rest
        .registry
        .catalog()
        .resources
        .iter()
        .map(|r| r.prefix())
        .filter(|p| rest.encryption.covers(p))
        .collect();
    prefixes.sort();
    prefixes.dedup();
    prefixes
}

/// Rewrites the stale objects under `prefixes`. Stops early (with what it did so far) on
/// `cancel`; a store error ends it.
pub async fn sweep(
    store: &dyn Store,
    encryption: &Transformer,
    prefixes: &[String],
    cancel: &CancellationToken,
) -> Result<SweepStats, StoreError> {
    let mut total = SweepStats::default();
    for prefix in prefixes {
        let mut stats = SweepStats::default();
        let mut start_after = None;
        loop {
            if cancel.is_cancelled() {
                return Ok(total);
            }
            let page = store
                .list(ListRequest {
                    prefix: prefix.clone(),
                    start_after: start_after.clone(),
                    limit: PAGE,
                    revision: None,
                })
                .await?;
            for kv in &page.kvs {
                stats.checked += 1;
                match rewrite(
                    store,
                    encryption,
                    &kv.key,
                    kv.value.clone(),
                    kv.mod_revision,
                )
                .await?
                {
                    Outcome::Rewritten => stats.rewritten += 1,
                    Outcome::Current => {}
                    Outcome::Failed => stats.failed += 1,
                }
            }
            start_after = page.kvs.last().map(|kv| kv.key.clone());
            if !page.more || start_after.is_none() {
                break;
            }
        }
        if stats.rewritten > 0 || stats.failed > 0 {
            tracing::info!(
                %prefix,
                checked = stats.checked,
                rewritten = stats.rewritten,
                failed = stats.failed,
                "re-encrypted stored objects"
            );
        }
        total.checked += stats.checked;
        total.rewritten += stats.rewritten;
        total.failed += stats.failed;
    }
    Ok(total)
}

enum Outcome {
    Rewritten,
    Current,
    Failed,
}

/// Brings one key to the current form, retrying when a concurrent write moved it on.
async fn rewrite(
    store: &dyn Store,
    encryption: &Transformer,
    key: &str,
    mut value: bytes::Bytes,
    mut rev: k1s_store::Revision,
) -> Result<Outcome, StoreError> {
    for _ in 0..RETRIES {
        if !encryption.is_stale(key, &value) {
            return Ok(Outcome::Current);
        }
        let fresh = match encryption
            .transform_from_storage(key, &value)
            .and_then(|plain| encryption.transform_to_storage(key, plain.into_owned()))
        {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(%key, error = %e, "re-encryption: cannot rewrite this object");
                return Ok(Outcome::Failed);
            }
        };
        match store.update(key, fresh.into(), rev).await {
            Ok(_) => return Ok(Outcome::Rewritten),
            Err(StoreError::NotFound { .. }) => return Ok(Outcome::Current),
            Err(StoreError::Conflict { .. }) => match store.get(key).await? {
                Some(kv) => (value, rev) = (kv.value, kv.mod_revision),
                None => return Ok(Outcome::Current),
            },
            Err(e) => return Err(e),
        }
    }
    tracing::warn!(%key, "re-encryption: the object kept changing; it is rewritten by its next write");
    Ok(Outcome::Failed)
}

/// Sweeps once now, then (with `config_path`) reloads the configuration whenever the file
/// changes and sweeps again, until `cancel`.
pub async fn run(rest: Arc<Rest>, config_path: Option<PathBuf>, cancel: CancellationToken) {
    let mut last = config_path
        .as_ref()
        .and_then(|p| std::fs::read(p).ok())
        .unwrap_or_default();
    loop {
        if rest.encryption.is_configured() {
            run_once(&rest, &cancel).await;
        }
        let Some(path) = &config_path else {
            return;
        };
        // Wait for a valid change of the file.
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(RELOAD_INTERVAL) => {}
            }
            let Ok(now) = std::fs::read(path) else {
                continue;
            };
            if now == last {
                continue;
            }
            last = now;
            match EncryptionConfig::load(path) {
                Ok(config) => {
                    rest.encryption.reload(config);
                    tracing::info!(path = %path.display(), "reloaded the encryption configuration");
                    break;
                }
                Err(e) => tracing::error!(
                    error = %e,
                    "the changed encryption configuration is not valid; still using the previous one"
                ),
            }
        }
    }
}

async fn run_once(rest: &Rest, cancel: &CancellationToken) {
    let prefixes = covered_prefixes(rest);
    loop {
        match sweep(rest.store.as_ref(), &rest.encryption, &prefixes, cancel).await {
            Ok(s) => {
                tracing::info!(
                    resources = prefixes.len(),
                    checked = s.checked,
                    rewritten = s.rewritten,
                    failed = s.failed,
                    "re-encryption sweep done"
                );
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "re-encryption sweep failed; retrying");
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k1s_store::redb::{RedbConfig, RedbStore};
    use std::path::Path;

    const K1: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    const K2: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

    fn config(keys: &[(&str, &str)]) -> EncryptionConfig {
        let keys: Vec<String> = keys
            .iter()
            .map(|(n, s)| format!("{{name: {n}, secret: {s}}}"))
            .collect();
        EncryptionConfig::parse(
            Path::new("t"),
            &format!(
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{}]}}\n  - identity: {{}}\n",
                keys.join(", ")
            ),
        )
        .unwrap()
    }

    fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
        let dir = tempfile::tempdir().unwrap();
        let s = RedbStore::open(RedbConfig::new(dir.path().join("s.redb"))).unwrap();
        (dir, Arc::new(s))
    }

    const P: &str = "/registry/core/secrets/";

    #[tokio::test]
    async fn rewrites_plaintext_and_old_keys_and_leaves_current_values() {
        let (_d, store) = store();
        let old = Transformer::new(config(&[("k1", K1)]));
        let k = |n: usize| format!("{P}d/s{n}");
        // s0: plaintext, s1..=300: under k1 (more than a page).
        store
            .create(&k(0), b"{\"n\":0}".to_vec().into())
            .await
            .unwrap();
        for n in 1..=300 {
            let v = old
                .transform_to_storage(&k(n), format!("{{\"n\":{n}}}").into_bytes())
                .unwrap();
            store.create(&k(n), v.into()).await.unwrap();
        }
        // Something else under the registry that is not covered stays as it is.
        store
            .create("/registry/core/configmaps/d/c", b"{}".to_vec().into())
            .await
            .unwrap();
        let t = Transformer::new(config(&[("k2", K2), ("k1", K1)]));
        let cancel = CancellationToken::new();
        let stats = sweep(store.as_ref(), &t, &[P.to_owned()], &cancel)
            .await
            .unwrap();
        assert_eq!(
            stats,
            SweepStats {
                checked: 301,
                rewritten: 301,
                failed: 0
            }
        );
        let pruned = Transformer::new(config(&[("k2", K2)]));
        for n in 0..=300 {
            let kv = store.get(&k(n)).await.unwrap().unwrap();
            assert!(kv.value.starts_with(b"k8s:enc:aesgcm:v1:k2:"), "{n}");
            let plain = pruned.transform_from_storage(&k(n), &kv.value).unwrap();
            assert_eq!(plain.as_ref(), format!("{{\"n\":{n}}}").as_bytes());
        }
        let cm = store
            .get("/registry/core/configmaps/d/c")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(cm.value.as_ref(), b"{}");
        // A second sweep finds nothing to do.
        let again = sweep(store.as_ref(), &t, &[P.to_owned()], &cancel)
            .await
            .unwrap();
        assert_eq!((again.checked, again.rewritten), (301, 0));
    }

    #[tokio::test]
    async fn unreadable_values_are_counted_and_left_alone() {
        let (_d, store) = store();
        let key = format!("{P}d/bad");
        store
            .create(
                &key,
                b"k8s:enc:aesgcm:v1:gone:0123456789abcdefghijklmnopq"
                    .to_vec()
                    .into(),
            )
            .await
            .unwrap();
        let t = Transformer::new(config(&[("k1", K1)]));
        let stats = sweep(
            store.as_ref(),
            &t,
            &[P.to_owned()],
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!((stats.rewritten, stats.failed), (0, 1));
        let kv = store.get(&key).await.unwrap().unwrap();
        assert!(kv.value.starts_with(b"k8s:enc:aesgcm:v1:gone:"));
    }

    #[tokio::test]
    async fn a_concurrent_write_is_never_lost() {
        let (_d, store) = store();
        let old = Transformer::new(config(&[("k1", K1)]));
        let key = format!("{P}d/s");
        let v = old
            .transform_to_storage(&key, b"{\"v\":1}".to_vec())
            .unwrap();
        let rev = store.create(&key, v.into()).await.unwrap();
        let stale = store.get(&key).await.unwrap().unwrap().value;
        let t = Transformer::new(config(&[("k2", K2), ("k1", K1)]));
        // A user write lands after the sweep read the old value.
        let user = t.transform_to_storage(&key, b"{\"v\":2}".to_vec()).unwrap();
        store.update(&key, user.into(), rev).await.unwrap();
        let out = rewrite(store.as_ref(), &t, &key, stale, rev).await.unwrap();
        assert!(matches!(out, Outcome::Current));
        let kv = store.get(&key).await.unwrap().unwrap();
        assert_eq!(
            t.transform_from_storage(&key, &kv.value).unwrap().as_ref(),
            b"{\"v\":2}"
        );
        // A user write with the old configuration (another server): the sweep re-reads and
        // rewrites the new content, not the content it first saw.
        let older = old
            .transform_to_storage(&key, b"{\"v\":3}".to_vec())
            .unwrap();
        let seen = kv.value.clone();
        let rev3 = store
            .update(&key, older.into(), kv.mod_revision)
            .await
            .unwrap();
        let stale3 = store.get(&key).await.unwrap().unwrap().value;
        let user4 = old
            .transform_to_storage(&key, b"{\"v\":4}".to_vec())
            .unwrap();
        store.update(&key, user4.into(), rev3).await.unwrap();
        let out = rewrite(store.as_ref(), &t, &key, stale3, rev3)
            .await
            .unwrap();
        assert!(matches!(out, Outcome::Rewritten));
        let kv = store.get(&key).await.unwrap().unwrap();
        assert_ne!(kv.value, seen);
        assert!(kv.value.starts_with(b"k8s:enc:aesgcm:v1:k2:"));
        assert_eq!(
            t.transform_from_storage(&key, &kv.value).unwrap().as_ref(),
            b"{\"v\":4}"
        );
    }
}
