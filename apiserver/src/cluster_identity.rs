//! One cluster identity for every server on a datastore: the files that make a cluster what
//! it is (the cluster CA, the ServiceAccount signing key, the front proxy's CA) kept in the datastore, encrypted
//! with a key derived from the join token, as k3s keeps its bootstrap data.
//!
//! The encryption-at-rest configuration is shared the same way, but kept in step both ways
//! (a rotation on any server's disk is published): `crate::encryption::shared`.
//!
//! The first server to start on a datastore writes its files there ([`publish`], create-only,
//! so two servers starting at once cannot both win); every later one — on etcd, another
//! machine — reads them and writes them into its own data directory before loading its PKI
//! ([`fetch`]), so a token, a client certificate or a kubeconfig made by one server is good on
//! every other. A server started with another token cannot decrypt them and stops with a
//! message saying so ([`IdentityError::WrongToken`]). Leaf certificates (serving, admin,
//! kubelet) stay per server, issued from the shared CA.
//!
//! Encryption: the key is Argon2id (memory-hard: 19 MiB, 2 passes, a random 16-byte salt
//! stored beside the data) of the token's password, the cipher ChaCha20-Poly1305 (ring) with
//! a random nonce; the record is versioned JSON. Nothing of it is ever logged.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use k1s_store::{Store, StoreError};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

/// Where the record lives in the datastore (beside, never inside, the API's `/registry/`).
pub const KEY: &str = "/k1s/bootstrap/identity";

/// The files of the identity, relative to the data directory, with their modes. Those that
/// do not exist when a server publishes are not part of it.
pub const FILES: [(&str, u32); 5] = [
    ("tls/ca.crt", 0o644),
    ("tls/ca.key", 0o600),
    ("tls/service-account.key", 0o600),
    ("tls/request-header-ca.crt", 0o644),
    ("tls/request-header-ca.key", 0o600),
];

/// Argon2id parameters (OWASP's minimum for Argon2id: 19 MiB, 2 passes, 1 lane).
const ARGON_MEMORY_KIB: u32 = 19 * 1024;
const ARGON_PASSES: u32 = 2;
const ARGON_LANES: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(
        "the datastore holds the identity of a cluster whose join token is not this server's: \
         start it with the first server's token (its DATA_DIR/server/token, or the --token it \
         was given)"
    )]
    WrongToken,
    #[error("the cluster identity in the datastore is unreadable: {0}")]
    Corrupt(String),
    #[error("the datastore: {0}")]
    Store(#[from] StoreError),
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("deriving the key from the token: {0}")]
    Kdf(String),
}

/// The record as stored.
#[derive(Serialize, Deserialize)]
struct Sealed {
    version: u32,
    kdf: String,
    memory_kib: u32,
    passes: u32,
    lanes: u32,
    salt: String,
    nonce: String,
    ciphertext: String,
}

/// What is sealed: file contents by relative path.
#[derive(Serialize, Deserialize, Default, PartialEq, Debug)]
struct Files {
    files: BTreeMap<String, String>,
}

fn derive(password: &str, salt: &[u8], s: &Sealed) -> Result<LessSafeKey, IdentityError> {
    let params = argon2::Params::new(s.memory_kib, s.passes, s.lanes, Some(32))
        .map_err(|e| IdentityError::Kdf(e.to_string()))?;
    let argon = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
    let mut key = [0u8; 32];
    argon
        .hash_password_into(password.as_bytes(), salt, &mut key)
        .map_err(|e| IdentityError::Kdf(e.to_string()))?;
    let unbound = UnboundKey::new(&CHACHA20_POLY1305, &key)
        .map_err(|_| IdentityError::Kdf("bad key length".into()))?;
    Ok(LessSafeKey::new(unbound))
}

fn seal(files: &Files, password: &str) -> Result<Vec<u8>, IdentityError> {
    let data = serde_json::to_vec(files).map_err(|e| IdentityError::Corrupt(e.to_string()))?;
    seal_record(KEY, &data, password)
}

fn open(bytes: &[u8], password: &str) -> Result<Files, IdentityError> {
    let plain = open_record(KEY, bytes, password)?;
    serde_json::from_slice(&plain).map_err(|e| IdentityError::Corrupt(e.to_string()))
}

/// Seals `plain` for the datastore key `name` (the associated data: a record cannot be moved
/// to another key) with a key derived from `password`. Slow on purpose (Argon2id): call it
/// off the async threads.
pub(crate) fn seal_record(
    name: &str,
    plain: &[u8],
    password: &str,
) -> Result<Vec<u8>, IdentityError> {
    let rng = SystemRandom::new();
    let mut salt = [0u8; 16];
    let mut nonce = [0u8; 12];
    rng.fill(&mut salt)
        .and_then(|()| rng.fill(&mut nonce))
        .map_err(|_| IdentityError::Kdf("no randomness".into()))?;
    let mut sealed = Sealed {
        version: 1,
        kdf: "argon2id".into(),
        memory_kib: ARGON_MEMORY_KIB,
        passes: ARGON_PASSES,
        lanes: ARGON_LANES,
        salt: B64.encode(salt),
        nonce: B64.encode(nonce),
        ciphertext: String::new(),
    };
    let key = derive(password, &salt, &sealed)?;
    let mut data = plain.to_vec();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(name.as_bytes()),
        &mut data,
    )
    .map_err(|_| IdentityError::Kdf("sealing failed".into()))?;
    sealed.ciphertext = B64.encode(&data);
    serde_json::to_vec(&sealed).map_err(|e| IdentityError::Corrupt(e.to_string()))
}

/// Opens a record [`seal_record`] made for `name`: [`IdentityError::WrongToken`] when
/// `password` is not the one it was sealed with.
pub(crate) fn open_record(
    name: &str,
    bytes: &[u8],
    password: &str,
) -> Result<Vec<u8>, IdentityError> {
    let corrupt = |what: &str| IdentityError::Corrupt(what.to_string());
    let sealed: Sealed = serde_json::from_slice(bytes).map_err(|e| corrupt(&e.to_string()))?;
    if sealed.version != 1 || sealed.kdf != "argon2id" {
        return Err(corrupt(&format!(
            "version {} with {} is not known to this k1s (written by a newer one?)",
            sealed.version, sealed.kdf
        )));
    }
    if sealed.memory_kib > 1024 * 1024 || sealed.passes > 16 || sealed.lanes > 16 {
        return Err(corrupt("KDF parameters out of range"));
    }
    let salt = B64.decode(&sealed.salt).map_err(|_| corrupt("salt"))?;
    let nonce: [u8; 12] = B64
        .decode(&sealed.nonce)
        .ok()
        .and_then(|n| n.try_into().ok())
        .ok_or_else(|| corrupt("nonce"))?;
    let mut data = B64
        .decode(&sealed.ciphertext)
        .map_err(|_| corrupt("ciphertext"))?;
    let key = derive(password, &salt, &sealed)?;
    let plain = key
        .open_in_place(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(name.as_bytes()),
            &mut data,
        )
        .map_err(|_| IdentityError::WrongToken)?;
    Ok(plain.to_vec())
}

pub(crate) fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), IdentityError> {
    crate::files::write_atomic(path, contents, mode).map_err(|e| IdentityError::Io {
        op: e.op,
        path: e.path,
        source: e.source,
    })
}

/// What [`fetch`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Fetched {
    /// No identity in the datastore yet: this server's own becomes the cluster's
    /// ([`publish`]).
    Absent,
    /// The cluster's identity, now in the data directory; the paths it changed (a server
    /// that had an identity of its own).
    Written(Vec<String>),
}

/// Reads the cluster's identity from `store` and writes its files into `data_dir` (those
/// that differ). Fails with [`IdentityError::WrongToken`] when `password` is not the
/// cluster's token's.
pub async fn fetch(
    store: &dyn Store,
    data_dir: &Path,
    password: &str,
) -> Result<Fetched, IdentityError> {
    let Some(kv) = store.get(KEY).await? else {
        return Ok(Fetched::Absent);
    };
    let password = password.to_owned();
    let files = tokio::task::spawn_blocking(move || open(&kv.value, &password))
        .await
        .map_err(|e| IdentityError::Kdf(e.to_string()))??;
    let mut changed = Vec::new();
    for (rel, contents) in &files.files {
        let Some((_, mode)) = FILES.iter().find(|(f, _)| f == rel) else {
            // Only the files this module knows go to disk, whatever the record says.
            return Err(IdentityError::Corrupt(format!("unexpected file {rel:?}")));
        };
        let path = data_dir.join(rel);
        if fs::read(&path).ok().as_deref() == Some(contents.as_bytes()) {
            continue;
        }
        write_atomic(&path, contents.as_bytes(), *mode)?;
        changed.push(rel.clone());
    }
    Ok(Fetched::Written(changed))
}

/// Publishes this server's identity files (those of [`FILES`] that exist) as the cluster's.
/// `Ok(false)` when another server published first (then [`fetch`] it).
pub async fn publish(
    store: &dyn Store,
    data_dir: &Path,
    password: &str,
) -> Result<bool, IdentityError> {
    let files = local_files(data_dir)?;
    let password = password.to_owned();
    let sealed = tokio::task::spawn_blocking(move || seal(&files, &password))
        .await
        .map_err(|e| IdentityError::Kdf(e.to_string()))??;
    match store.create(KEY, sealed.into()).await {
        Ok(_) => Ok(true),
        Err(StoreError::AlreadyExists { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The files of [`FILES`] this server has.
fn local_files(data_dir: &Path) -> Result<Files, IdentityError> {
    let mut files = Files::default();
    for (rel, _) in FILES {
        let path = data_dir.join(rel);
        match fs::read_to_string(&path) {
            Ok(text) => {
                files.files.insert(rel.to_string(), text);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(IdentityError::Io {
                    op: "read",
                    path,
                    source,
                });
            }
        }
    }
    Ok(files)
}

/// Adds to the cluster's identity the files of [`FILES`] it lacks and this server has: a
/// cluster published before a file joined the identity (the front proxy CA) gets the first
/// upgraded server's, and every other server takes it with [`fetch`] (the record is
/// replaced by a compare-and-swap: of two servers extending at once one wins).
pub async fn extend(
    store: &dyn Store,
    data_dir: &Path,
    password: &str,
) -> Result<Extended, IdentityError> {
    let Some(kv) = store.get(KEY).await? else {
        return Ok(Extended::Complete);
    };
    let local = local_files(data_dir)?;
    let pw = password.to_owned();
    let bytes = kv.value.clone();
    let mut record = tokio::task::spawn_blocking(move || open(&bytes, &pw))
        .await
        .map_err(|e| IdentityError::Kdf(e.to_string()))??;
    // Files this server has that the record holds otherwise: another server extended the
    // record after this one's fetch.
    let differs = local
        .files
        .iter()
        .any(|(rel, text)| record.files.get(rel).is_some_and(|r| r != text));
    let mut added = false;
    for (rel, text) in local.files {
        if let std::collections::btree_map::Entry::Vacant(e) = record.files.entry(rel) {
            e.insert(text);
            added = true;
        }
    }
    if !added {
        return Ok(if differs {
            Extended::Raced
        } else {
            Extended::Complete
        });
    }
    let pw = password.to_owned();
    let sealed = tokio::task::spawn_blocking(move || seal(&record, &pw))
        .await
        .map_err(|e| IdentityError::Kdf(e.to_string()))??;
    match store.update(KEY, sealed.into(), kv.mod_revision).await {
        Ok(_) => Ok(Extended::Added),
        Err(StoreError::Conflict { .. }) => Ok(Extended::Raced),
        Err(e) => Err(e.into()),
    }
}

/// What [`extend`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Extended {
    /// This server's files that the record lacked are in it now.
    Added,
    /// The record lacked nothing this server has (or there is none).
    Complete,
    /// Another server changed the record first (it holds other files than this server's):
    /// [`fetch`] it.
    Raced,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn files() -> Files {
        Files {
            files: BTreeMap::from([
                ("tls/ca.crt".to_string(), "CERT".to_string()),
                ("tls/ca.key".to_string(), "KEY".to_string()),
            ]),
        }
    }

    #[test]
    fn sealed_with_one_password_opens_with_it_only() {
        let sealed = seal(&files(), "s3cret-password").unwrap();
        assert_eq!(open(&sealed, "s3cret-password").unwrap(), files());
        assert!(matches!(
            open(&sealed, "another-password"),
            Err(IdentityError::WrongToken)
        ));
        // No plaintext in the record.
        let text = String::from_utf8_lossy(&sealed);
        assert!(!text.contains("CERT") && !text.contains("KEY\""), "{text}");
        // A damaged record is corrupt, not a wrong token.
        assert!(matches!(
            open(b"{}", "s3cret-password"),
            Err(IdentityError::Corrupt(_))
        ));
        let mut s: Sealed = serde_json::from_slice(&sealed).unwrap();
        s.memory_kib = u32::MAX;
        assert!(matches!(
            open(&serde_json::to_vec(&s).unwrap(), "s3cret-password"),
            Err(IdentityError::Corrupt(_))
        ));
    }

    #[tokio::test]
    async fn the_first_server_publishes_later_ones_take_its_files() {
        let db = tempfile::tempdir().unwrap();
        let store = k1s_store::redb::RedbStore::open(k1s_store::redb::RedbConfig::new(
            db.path().join("db"),
        ))
        .unwrap();
        let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for (rel, text) in [("tls/ca.crt", "CA-1"), ("tls/ca.key", "KEY-1")] {
            write_atomic(&first.path().join(rel), text.as_bytes(), 0o600).unwrap();
        }
        write_atomic(&second.path().join("tls/ca.crt"), b"CA-2", 0o644).unwrap();

        assert_eq!(
            fetch(&store, first.path(), "password-1").await.unwrap(),
            Fetched::Absent
        );
        assert!(publish(&store, first.path(), "password-1").await.unwrap());
        // A second publish loses: the first identity stays.
        assert!(!publish(&store, second.path(), "password-1").await.unwrap());

        assert!(matches!(
            fetch(&store, second.path(), "password-2").await,
            Err(IdentityError::WrongToken)
        ));
        assert_eq!(
            fetch(&store, second.path(), "password-1").await.unwrap(),
            Fetched::Written(vec!["tls/ca.crt".into(), "tls/ca.key".into()])
        );
        assert_eq!(
            fs::read_to_string(second.path().join("tls/ca.crt")).unwrap(),
            "CA-1"
        );
        let mode = fs::metadata(second.path().join("tls/ca.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Nothing to change the second time.
        assert_eq!(
            fetch(&store, second.path(), "password-1").await.unwrap(),
            Fetched::Written(vec![])
        );
        // A file that joined the identity later (the front proxy CA): the first server to
        // have it adds its own, once; the others take that one.
        let rh = "tls/request-header-ca.crt";
        write_atomic(&first.path().join(rh), b"RH-1", 0o644).unwrap();
        write_atomic(&second.path().join(rh), b"RH-2", 0o644).unwrap();
        assert_eq!(
            extend(&store, first.path(), "password-1").await.unwrap(),
            Extended::Added
        );
        assert_eq!(
            extend(&store, second.path(), "password-1").await.unwrap(),
            Extended::Raced
        );
        assert_eq!(
            fetch(&store, second.path(), "password-1").await.unwrap(),
            Fetched::Written(vec![rh.into()])
        );
        assert_eq!(fs::read_to_string(second.path().join(rh)).unwrap(), "RH-1");
        assert_eq!(
            extend(&store, second.path(), "password-1").await.unwrap(),
            Extended::Complete
        );
        assert!(store.get(KEY).await.unwrap().is_some());
    }
}
