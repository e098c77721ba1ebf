//! `k1s bench pods`: pod start latency on a running server with the image already present
//! (N pods created at once; create → Running as seen on a watch, p50/p99), and, with
//! `--rootfs`, the container start time of the runtime itself (`k1s internal shim` running
//! `true`) beside `runc run` (or `crun run`) of the same rootfs as the peer figure. Cleans up after itself and
//! prints one JSON object as its last line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use futures::StreamExt;
use hdrhistogram::Histogram;
use k1s_api::client::{
    Client, DeleteParams, ListParams, ResourceRef, WatchEvent, WatchParams, WriteParams,
};
use k1s_api::http_client::HttpClient;
use k1s_kubelet::runtime::spec::{ContainerSpec, Process};
use k1s_kubelet::runtime::{Runtime, ShimRuntime};
use serde_json::{Value, json};

#[derive(Args, Debug, Clone)]
pub struct PodsBenchArgs {
    /// Kubeconfig of the server to measure.
    #[arg(long, default_value = "/etc/k1s/k1s.yaml")]
    pub kubeconfig: PathBuf,
    /// Image of the pods; it should already be on the node (pull policy IfNotPresent).
    #[arg(long)]
    pub image: String,
    /// Pods created at once.
    #[arg(long, default_value_t = 100)]
    pub pods: usize,
    /// Give each pod its own new PersistentVolumeClaim of this StorageClass (e.g.
    /// `local-path`), created just before the pod; latency then runs from the claim's
    /// creation to the pod's Running (provisioning, binding, staging, publishing).
    #[arg(long)]
    pub volume_class: Option<String>,
    /// Size of each claim with `--volume-class`.
    #[arg(long, default_value = "16Mi")]
    pub volume_size: String,
    /// A root filesystem (with `/bin/true` or busybox's `true`) to time container starts on.
    #[arg(long)]
    pub rootfs: Option<PathBuf>,
    /// Container starts to time on `--rootfs`, for k1s and for crun each.
    #[arg(long, default_value_t = 50)]
    pub starts: usize,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("constant bounds are valid")
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e6
}

fn summary(h: &Histogram<u64>) -> Value {
    json!({"count": h.len(), "p50_ms": ms(h, 0.5), "p99_ms": ms(h, 0.99), "max_ms": h.max() as f64 / 1e6})
}

pub async fn run(args: PodsBenchArgs) -> anyhow::Result<()> {
    let mut report = json!({"bench": "pods", "pods": args.pods, "image": args.image,
        "volume_class": args.volume_class});
    if args.pods > 0 {
        report["pod_start"] = pod_starts(&args).await?;
    }
    if let Some(rootfs) = &args.rootfs {
        report["container_start"] = container_starts(rootfs, args.starts).await?;
    }
    println!("{report}");
    Ok(())
}

async fn pod_starts(args: &PodsBenchArgs) -> anyhow::Result<Value> {
    let client = HttpClient::from_kubeconfig_with(&args.kubeconfig, None, Default::default())
        .with_context(|| format!("using kubeconfig {}", args.kubeconfig.display()))?;
    let ns = format!("k1s-bench-pods-{}", std::process::id());
    let nss = ResourceRef::new("", "v1", "namespaces", None);
    client
        .create(
            &nss,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            &WriteParams::default(),
        )
        .await
        .with_context(|| format!("creating namespace {ns}"))?;
    let result = measure_pods(&client, &ns, args).await;
    let pods = ResourceRef::new("", "v1", "pods", Some(&ns));
    if let Ok(list) = client.list(&pods, &ListParams::default()).await {
        for p in list.items {
            let name = p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let zero = DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            };
            let _ = client.delete(&pods, &name, &zero).await;
        }
    }
    let _ = client.delete(&nss, &ns, &DeleteParams::default()).await;
    result
}

async fn measure_pods(
    client: &HttpClient,
    ns: &str,
    args: &PodsBenchArgs,
) -> anyhow::Result<Value> {
    let pods = ResourceRef::new("", "v1", "pods", Some(ns));
    // The namespace's default ServiceAccount (admission needs it).
    let sas = ResourceRef::new("", "v1", "serviceaccounts", Some(ns));
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.get(&sas, "default").await.is_err() {
        if Instant::now() > deadline {
            bail!(
                "namespace {ns} got no default ServiceAccount (is the controller manager running?)"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let list = client.list(&pods, &ListParams::default()).await?;
    let mut watch = client
        .watch(
            &pods,
            &WatchParams {
                resource_version: Some(list.resource_version.clone()),
                ..Default::default()
            },
        )
        .await?;
    let started = Instant::now();
    let mut created: HashMap<String, Instant> = HashMap::new();
    let mut tasks = tokio::task::JoinSet::new();
    let pvcs = ResourceRef::new("", "v1", "persistentvolumeclaims", Some(ns));
    for i in 0..args.pods {
        let name = format!("bench-{i}");
        created.insert(name.clone(), Instant::now());
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 0, "automountServiceAccountToken": false,
                "containers": [{"name": "c", "image": args.image, "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "3600"]}]}});
        let claim = args.volume_class.as_ref().map(|class| {
            pod["spec"]["volumes"] =
                json!([{"name": "data", "persistentVolumeClaim": {"claimName": name}}]);
            pod["spec"]["containers"][0]["volumeMounts"] =
                json!([{"name": "data", "mountPath": "/data"}]);
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
                "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": args.volume_size}}}})
        });
        let (client, pods, pvcs) = (client.clone(), pods.clone(), pvcs.clone());
        tasks.spawn(async move {
            if let Some(claim) = claim {
                client.create(&pvcs, claim, &WriteParams::default()).await?;
            }
            client.create(&pods, pod, &WriteParams::default()).await
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.context("a create task failed")?
            .context("creating a pod (or its claim)")?;
    }
    let mut latency = histogram();
    let deadline = Instant::now() + Duration::from_secs(300);
    while !created.is_empty() {
        let ev = tokio::time::timeout_at(deadline.into(), watch.next())
            .await
            .map_err(|_| anyhow::anyhow!("{} pods not Running after 300 s", created.len()))?;
        let Some(ev) = ev else {
            bail!("the watch ended")
        };
        if let Ok(WatchEvent::Modified(p)) = ev
            && p["status"]["phase"] == "Running"
            && let Some(t) = created.remove(p["metadata"]["name"].as_str().unwrap_or_default())
        {
            latency.saturating_record(t.elapsed().as_nanos() as u64);
        }
    }
    Ok(
        json!({"latency": summary(&latency), "all_running_seconds": started.elapsed().as_secs_f64()}),
    )
}

/// Starts `true` on `rootfs` `n` times with the k1s shim and with runc (or crun), timing each
/// start to exit (create, namespaces, mounts, exec, exit, reap). The shim is given no cgroups
/// here; runc creates one per container, as it always does.
async fn container_starts(rootfs: &Path, n: usize) -> anyhow::Result<Value> {
    let dir = tempfile::tempdir()?;
    let exe = std::env::current_exe()?;
    let runtime = ShimRuntime::new(vec![exe, "internal".into(), "shim".into()]);
    let mut k1s = histogram();
    for i in 0..n {
        let bundle = dir.path().join(format!("k1s-{i}"));
        let spec = ContainerSpec {
            id: format!("bench{i}"),
            layers: vec![rootfs.to_path_buf()],
            upper: bundle.join("upper"),
            work: bundle.join("work"),
            rootfs: bundle.join("rootfs"),
            hostname: "bench".into(),
            process: Process {
                args: vec!["true".into()],
                env: vec!["PATH=/bin:/usr/bin".into()],
                cwd: "/".into(),
                capabilities: k1s_kubelet::runtime::spec::DEFAULT_CAPABILITIES
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                ..Default::default()
            },
            log_path: bundle.join("log"),
            ..Default::default()
        };
        let t = Instant::now();
        runtime
            .start(&bundle, &spec)
            .await
            .map_err(|e| anyhow::anyhow!("k1s start: {e}"))?;
        runtime.wait(&bundle).await;
        k1s.saturating_record(t.elapsed().as_nanos() as u64);
    }
    let mut out = json!({"k1s_shim": summary(&k1s)});
    // The peer: runc, else crun (crun 1.8 refuses hybrid v1/v2 hosts such as this one).
    let peer = ["runc", "crun"].into_iter().find(|p| {
        std::process::Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if let Some(peer) = peer {
        let bundle = dir.path().join("peer");
        std::fs::create_dir_all(&bundle)?;
        let status = std::process::Command::new(peer)
            .args(["spec", "--bundle"])
            .arg(&bundle)
            .status()?;
        if !status.success() {
            bail!("{peer} spec failed");
        }
        let path = bundle.join("config.json");
        let mut cfg: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
        cfg["root"] = json!({"path": rootfs, "readonly": true});
        cfg["process"]["args"] = json!(["true"]);
        cfg["process"]["terminal"] = json!(false);
        std::fs::write(&path, serde_json::to_vec(&cfg)?)?;
        let mut times = histogram();
        for i in 0..n {
            let t = Instant::now();
            let st = tokio::process::Command::new(peer)
                .args(["run", "--bundle"])
                .arg(&bundle)
                .arg(format!("k1s-bench-{}-{i}", std::process::id()))
                .stdin(std::process::Stdio::null())
                .status()
                .await?;
            if !st.success() {
                bail!("{peer} run failed: {st}");
            }
            times.saturating_record(t.elapsed().as_nanos() as u64);
        }
        out[peer] = summary(&times);
    }
    Ok(out)
}
