//! The agent's API servers: it joins through one `--server`, then learns every server of the
//! cluster from the `default/kubernetes` Endpoints (one address per live API server when
//! several share a datastore) into the [`ServerPool`] its clients fail over with, and keeps
//! the list in `DATA_DIR/agent/servers.json` so that a restarted agent whose `--server` is
//! down still reaches the others. The file is written only when the list changes.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use k1s_api::client::{Client, ResourceRef};
use k1s_api::server_pool::ServerPool;
use k1s_runtime::watcher::{Config, Event, watcher};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Where the learned servers are kept.
pub fn list_path(data_dir: &Path) -> PathBuf {
    data_dir.join("agent/servers.json")
}

/// The servers saved by an earlier run (none when the file is missing or unreadable: the
/// `--server` address alone then, as on a first start).
pub fn load(path: &Path) -> Vec<SocketAddr> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let parsed: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "ignoring an unreadable server list");
            return Vec::new();
        }
    };
    parsed["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str()?.parse().ok())
        .collect()
}

fn save(path: &Path, servers: &[SocketAddr]) -> anyhow::Result<()> {
    let list: Vec<String> = servers.iter().map(SocketAddr::to_string).collect();
    let body = serde_json::to_vec_pretty(&json!({ "servers": list }))?;
    crate::host::write_atomic(path, &body)
}

/// The API server addresses of the `kubernetes` Endpoints: every address with the `https`
/// port of its subset (the only port when it has no name).
pub fn addresses(endpoints: &Value) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for subset in endpoints["subsets"].as_array().into_iter().flatten() {
        let ports: Vec<&Value> = subset["ports"].as_array().into_iter().flatten().collect();
        let port = ports
            .iter()
            .find(|p| p["name"] == "https")
            .or_else(|| (ports.len() == 1).then(|| &ports[0]))
            .and_then(|p| p["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok());
        let Some(port) = port else { continue };
        for a in subset["addresses"].as_array().into_iter().flatten() {
            if let Some(ip) = a["ip"].as_str().and_then(|ip| ip.parse::<IpAddr>().ok()) {
                out.push(SocketAddr::new(ip, port));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Watches the `kubernetes` Endpoints until `cancel`, feeding `pool` and the saved list.
pub fn spawn(
    client: Arc<dyn Client>,
    pool: Arc<ServerPool>,
    path: PathBuf,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
) {
    let cancel = cancel.clone();
    tasks.spawn(async move {
        let resource = ResourceRef::new("", "v1", "endpoints", Some("default"));
        let config = Config::default().fields("metadata.name=kubernetes");
        let mut events = std::pin::pin!(watcher(client, resource, config));
        loop {
            let event = tokio::select! {
                () = cancel.cancelled() => return,
                e = events.next() => e,
            };
            let obj = match event {
                Some(Event::Apply(o) | Event::InitApply(o)) => o,
                Some(_) => continue,
                None => return,
            };
            let servers = addresses(&obj);
            if pool.set(servers.clone()) {
                tracing::info!(servers = ?servers, "API servers of the cluster");
                if let Err(e) = save(&path, &servers) {
                    tracing::warn!(path = %path.display(), error = %format!("{e:#}"), "cannot save the server list");
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_take_the_https_port_of_each_subset() {
        let eps = json!({"subsets": [
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
             "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]},
            {"addresses": [{"ip": "10.0.0.3"}], "ports": [{"port": 7443}]},
            {"addresses": [{"ip": "10.0.0.4"}], "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]},
            {"addresses": [{"ip": "not an ip"}], "ports": [{"name": "https", "port": 6443}]}
        ]});
        let got: Vec<String> = addresses(&eps).iter().map(|a| a.to_string()).collect();
        assert_eq!(got, ["10.0.0.1:6443", "10.0.0.2:6443", "10.0.0.3:7443"]);
        assert!(addresses(&json!({})).is_empty());
    }

    #[test]
    fn the_list_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("servers.json");
        assert!(load(&path).is_empty());
        let servers: Vec<SocketAddr> = vec!["10.0.0.1:6443".parse().unwrap()];
        save(&path, &servers).unwrap();
        assert_eq!(load(&path), servers);
        std::fs::write(&path, "{not json").unwrap();
        assert!(load(&path).is_empty());
    }
}
