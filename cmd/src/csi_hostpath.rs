//! `k1s csi-hostpath`: run the hostpath CSI plugin (`hostpath.csi.k1s.io`) as its own process:
//! serve CSI on `--endpoint` and, with `--registry-dir`, register with the kubelet the way
//! node-driver-registrar does. Stops on SIGTERM/SIGINT; exits non-zero if the kubelet rejects
//! the registration, so a supervisor restarts it and registration is tried again.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use k1s_csi::hostpath::{Config, DRIVER_NAME, Driver};
use k1s_csi::registrar::Registrar;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct CsiHostpathArgs {
    /// The CSI endpoint to serve, `unix:///path/csi.sock`.
    #[arg(
        long,
        default_value = "unix:///var/lib/kubelet/plugins/hostpath.csi.k1s.io/csi.sock"
    )]
    pub endpoint: String,
    /// This node's id (the Kubernetes node name); defaults to the host name.
    #[arg(long)]
    pub node_id: Option<String>,
    /// Volumes and their metadata go under DATA_DIR/storage/hostpath.
    #[arg(long, default_value = "/var/lib/k1s", env = "K1S_DATA_DIR")]
    pub data_dir: PathBuf,
    /// The kubelet's plugin registry directory; register there when given.
    #[arg(long)]
    pub registry_dir: Option<PathBuf>,
    /// Total bytes the plugin may hand out (e.g. 100Gi); defaults to the data dir's free space.
    #[arg(long, value_parser = parse_bytes)]
    pub capacity: Option<u64>,
    /// Volumes this node can hold (NodeGetInfo.max_volumes_per_node); 0 means no limit.
    #[arg(long, default_value_t = 0)]
    pub max_volumes_per_node: i64,
}

/// Bytes as a plain number or with a binary (Ki, Mi, Gi, Ti) or decimal (k, M, G, T) suffix.
fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a byte count"))?;
    let multiplier: u64 = match unit {
        "" => 1,
        "k" => 1000,
        "M" => 1000u64.pow(2),
        "G" => 1000u64.pow(3),
        "T" => 1000u64.pow(4),
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return Err(format!("{s:?}: unknown unit {unit:?}")),
    };
    n.checked_mul(multiplier)
        .ok_or_else(|| format!("{s:?} is too large"))
}

fn host_name() -> anyhow::Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .context("reading the host name for --node-id")?;
    Ok(name.trim().to_owned())
}

pub async fn run(args: CsiHostpathArgs) -> anyhow::Result<()> {
    let stop = crate::host::shutdown_signal()?;
    let socket = k1s_csi::connect::socket_path(&args.endpoint).context("--endpoint")?;
    let node_id = match args.node_id {
        Some(id) => id,
        None => host_name()?,
    };
    let driver = Driver::new(Config {
        node_id,
        data_dir: args.data_dir,
        capacity: args.capacity,
        max_volumes_per_node: args.max_volumes_per_node,
    })?;
    let cancel = CancellationToken::new();
    let tracker = tokio_util::task::TaskTracker::new();
    let serving = tracker.spawn({
        let cancel = cancel.clone();
        let socket = socket.clone();
        async move { driver.serve(&socket, cancel).await }
    });
    let registering = args.registry_dir.map(|registry_dir| {
        let registrar = Registrar {
            registry_dir,
            driver: DRIVER_NAME.to_owned(),
            endpoint: socket,
        };
        tracker.spawn(registrar.run(cancel.clone()))
    });
    tracker.close();
    let registered = async {
        match registering {
            Some(task) => task.await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(serving, registered);
    let result: anyhow::Result<()> = tokio::select! {
        _ = stop => {
            tracing::info!("stopping");
            Ok(())
        }
        r = &mut serving => r.context("CSI server task")?.context("serving CSI"),
        r = &mut registered => r.context("registrar task")?.context("registration"),
    };
    cancel.cancel();
    tracker.wait().await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("10Gi"), Ok(10 << 30));
        assert_eq!(parse_bytes("2G"), Ok(2_000_000_000));
        assert!(parse_bytes("10 GB").is_err());
        assert!(parse_bytes("Gi").is_err());
        assert!(parse_bytes("99999999999Ti").is_err());
    }
}
