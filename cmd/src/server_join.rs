//! `k1s server --server https://FIRST:6443 --token TOKEN`: a server joining a cluster on etcd
//! with two flags, as in k3s. It asks the running server for the shared datastore
//! (`GET /k1s/v1/server-join`, after checking that server's CA against the token's hash),
//! keeps the answer under `DATA_DIR/server/join/` so that later starts do not need that
//! server, and then starts as any server on that datastore: the cluster identity comes from
//! the datastore, unsealed with the same token.
//!
//! It also builds what this server tells servers that join through it
//! ([`k1s_apiserver::auth::join::ServerJoin`]).

use std::path::{Path, PathBuf};

use anyhow::Context;
use k1s_apiserver::auth::join::ServerJoin;
use k1s_apiserver::files::write_atomic;
use k1s_store::etcd::EtcdTls;
use serde_json::{Value, json};

use crate::server_args::ServerArgs;

/// Where the datastore a joining server was given is kept.
fn join_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("server/join")
}

/// The datastore this server uses: `--datastore-endpoint` and its TLS files; else, with
/// `--server`, the one saved when it joined, or the one the server at `--server` names.
pub async fn datastore(args: &ServerArgs) -> anyhow::Result<(Option<String>, EtcdTls)> {
    let given = EtcdTls {
        ca_file: args.datastore_cafile.clone(),
        cert_file: args.datastore_certfile.clone(),
        key_file: args.datastore_keyfile.clone(),
    };
    let Some(url) = &args.server else {
        return Ok((args.datastore_endpoint.clone(), given));
    };
    if args.datastore_endpoint.is_some() {
        tracing::info!(server = %url, "--datastore-endpoint given: not asking --server for it");
        return Ok((args.datastore_endpoint.clone(), given));
    }
    let dir = join_dir(&args.data_dir);
    if let Some((endpoint, tls)) = load(&dir)? {
        tracing::info!(%endpoint, "the cluster's datastore, as given when this server joined");
        return Ok((Some(endpoint), tls));
    }
    let token = args.token.as_deref().context(
        "--server needs --token: the full join token (K10…) from the first server's \
         DATA_DIR/server/token",
    )?;
    let answer = k1s_kubelet::bootstrap::server_join(url, token)
        .await
        .with_context(|| format!("joining the cluster at {url}"))?;
    save(&dir, &answer)?;
    tracing::info!(server = %url, "joined: took the cluster's datastore");
    let (endpoint, tls) = load(&dir)?.context("the joined datastore could not be read back")?;
    Ok((Some(endpoint), tls))
}

/// Writes the answer of `/k1s/v1/server-join`: `datastore.json` (the endpoint) and the TLS
/// files (the key `0600`), the endpoint last so that a crash midway leaves no half state.
fn save(dir: &Path, answer: &Value) -> anyhow::Result<()> {
    let endpoint = answer["datastoreEndpoint"]
        .as_str()
        .filter(|e| !e.is_empty())
        .context("the server's answer names no datastore")?;
    for (key, file, mode) in [
        ("datastoreCA", "etcd-ca.crt", 0o644),
        ("datastoreCert", "etcd-client.crt", 0o644),
        ("datastoreKey", "etcd-client.key", 0o600),
    ] {
        if let Some(pem) = answer[key].as_str() {
            write_atomic(&dir.join(file), pem.as_bytes(), mode)?;
        }
    }
    let body = serde_json::to_vec_pretty(&json!({ "datastoreEndpoint": endpoint }))?;
    Ok(write_atomic(&dir.join("datastore.json"), &body, 0o600)?)
}

fn load(dir: &Path) -> anyhow::Result<Option<(String, EtcdTls)>> {
    let path = dir.join("datastore.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let v: Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not JSON (delete it to ask --server again)",
            path.display()
        )
    })?;
    let endpoint = v["datastoreEndpoint"]
        .as_str()
        .with_context(|| format!("{} names no datastoreEndpoint", path.display()))?;
    let file = |name: &str| Some(dir.join(name)).filter(|p| p.exists());
    Ok(Some((
        endpoint.to_owned(),
        EtcdTls {
            ca_file: file("etcd-ca.crt"),
            cert_file: file("etcd-client.crt"),
            key_file: file("etcd-client.key"),
        },
    )))
}

/// What this server tells a joining one: its datastore, when it is a shared one.
pub fn answer(endpoint: Option<&str>, tls: &EtcdTls) -> anyhow::Result<Option<ServerJoin>> {
    let Some(endpoint) = endpoint else {
        return Ok(None);
    };
    let read = |p: &Option<PathBuf>| -> anyhow::Result<Option<String>> {
        p.as_ref()
            .map(|p| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display())))
            .transpose()
    };
    Ok(Some(ServerJoin {
        datastore_endpoint: endpoint.to_owned(),
        ca_pem: read(&tls.ca_file)?,
        cert_pem: read(&tls.cert_file)?,
        key_pem: read(&tls.key_file)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_saved_and_read_back_with_its_tls_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("join");
        assert!(load(&d).unwrap().is_none());
        let answer = json!({"datastoreEndpoint": "https://10.0.0.1:2379",
            "datastoreCA": "CA", "datastoreKey": "KEY"});
        save(&d, &answer).unwrap();
        let (endpoint, tls) = load(&d).unwrap().unwrap();
        assert_eq!(endpoint, "https://10.0.0.1:2379");
        assert_eq!(std::fs::read_to_string(tls.ca_file.unwrap()).unwrap(), "CA");
        assert!(tls.cert_file.is_none());
        let key = tls.key_file.unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // What this server would tell the next one is the same.
        let again = answer_of(&d);
        assert_eq!(again.datastore_endpoint, "https://10.0.0.1:2379");
        assert_eq!(again.key_pem.as_deref(), Some("KEY"));
        assert!(save(&d, &json!({"message": "no"})).is_err());
    }

    fn answer_of(d: &Path) -> ServerJoin {
        let (endpoint, tls) = load(d).unwrap().unwrap();
        answer(Some(&endpoint), &tls).unwrap().unwrap()
    }

    #[test]
    fn the_embedded_store_is_not_offered() {
        assert!(answer(None, &EtcdTls::default()).unwrap().is_none());
    }
}
