//! `k1s bench api`: measures a running API server over HTTPS through the HTTP client
//! (`k1s_api::http_client`), as agents and tools reach it: concurrent creates, full LISTs of
//! many pods, and watch fan-out to many watchers. It works in a fresh namespace, removes every
//! object it made (and the namespace) afterwards, and prints one JSON object as its last line.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use futures::StreamExt;
use hdrhistogram::Histogram;
use k1s_api::client::{
    Client, ClientError, DeleteParams, ListParams, ResourceRef, WatchEvent, WatchParams,
    WriteParams,
};
use k1s_api::http_client::{HttpClient, HttpOptions};
use serde_json::{Value, json};
use tokio::task::JoinSet;

#[derive(Args, Debug, Clone)]
pub struct ApiBenchArgs {
    /// Kubeconfig of the server to measure (its current context).
    #[arg(long, default_value = "/etc/k1s/k1s.yaml")]
    pub kubeconfig: PathBuf,
    /// ConfigMaps to create.
    #[arg(long, default_value_t = 10_000)]
    pub creates: usize,
    /// Concurrent clients (each with its own connection) that share the creates.
    #[arg(long, default_value_t = 32)]
    pub clients: usize,
    /// Pods that each LIST returns (created first; they stay Pending).
    #[arg(long, default_value_t = 10_000)]
    pub list_pods: usize,
    /// Timed full LISTs (after one untimed warm-up).
    #[arg(long, default_value_t = 20)]
    pub list_rounds: usize,
    /// Concurrent watchers, each on its own connection.
    #[arg(long, default_value_t = 100)]
    pub watchers: usize,
    /// Writes (ConfigMap creates) that every watcher must receive.
    #[arg(long, default_value_t = 10_000)]
    pub watch_events: usize,
    /// Concurrent writers making the watched writes.
    #[arg(long, default_value_t = 1)]
    pub watch_writers: usize,
    /// Offer only HTTP/1.1 (default: h2 when the server offers it).
    #[arg(long)]
    pub http1: bool,
    /// Namespace to work in; it must not exist (default `k1s-bench-api-<pid>`).
    #[arg(long)]
    pub namespace: Option<String>,
}

/// Latencies in nanoseconds, up to an hour.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
        .expect("constant bounds and precision are valid")
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e6
}

fn ns_of(r: &ResourceRef) -> &str {
    r.namespace.as_deref().unwrap_or_default()
}

/// Throughput and latency of one batch of concurrent requests.
struct Batch {
    ops: usize,
    seconds: f64,
    latency: Histogram<u64>,
}

impl Batch {
    fn json(&self, clients: usize) -> Value {
        json!({
            "objects": self.ops,
            "clients": clients,
            "seconds": self.seconds,
            "objects_per_sec": self.ops as f64 / self.seconds,
            "p50_ms": ms(&self.latency, 0.5),
            "p99_ms": ms(&self.latency, 0.99),
        })
    }
}

pub async fn run(args: ApiBenchArgs) -> anyhow::Result<()> {
    if args.clients == 0 || args.watch_writers == 0 {
        bail!("--clients and --watch-writers must be at least 1");
    }
    let options = HttpOptions {
        http1_only: args.http1,
        // A full LIST of many pods on a busy machine can take a while.
        request_timeout: Duration::from_secs(300),
        ..HttpOptions::default()
    };
    let kubeconfig = args.kubeconfig.clone();
    let connect = move || {
        HttpClient::from_kubeconfig_with(&kubeconfig, None, options.clone())
            .with_context(|| format!("using kubeconfig {}", kubeconfig.display()))
    };
    let admin = connect()?;
    let version = admin
        .get_path("/version")
        .await
        .with_context(|| format!("reaching the API server at {}", admin.server_url()))?;
    let ns = args
        .namespace
        .clone()
        .unwrap_or_else(|| format!("k1s-bench-api-{}", std::process::id()));
    admin
        .create(
            &ResourceRef::new("", "v1", "namespaces", None),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            &WriteParams::default(),
        )
        .await
        .with_context(|| format!("creating namespace {ns} (it must not exist)"))?;
    eprintln!(
        "API server {} ({}), namespace {ns}, {} ...",
        admin.server_url(),
        version["gitVersion"].as_str().unwrap_or("?"),
        if args.http1 {
            "HTTP/1.1"
        } else {
            "h2 if offered"
        }
    );
    let clients: Vec<HttpClient> = (0..args.clients)
        .map(|_| connect())
        .collect::<anyhow::Result<_>>()?;
    let measured = measure(&args, &admin, &clients, &ns, &connect).await;
    eprintln!("removing the benchmark's objects and namespace {ns} ...");
    let cleaned = cleanup(&clients, &ns).await;
    let report = measured?;
    if let Err(e) = &cleaned {
        eprintln!("warning: cleanup of namespace {ns} failed: {e:#}");
    }
    print_summary(&report);
    println!("{}", serde_json::to_string(&report)?);
    cleaned.map(|_| ())
}

async fn measure(
    args: &ApiBenchArgs,
    admin: &HttpClient,
    clients: &[HttpClient],
    ns: &str,
    connect: &(dyn Fn() -> anyhow::Result<HttpClient> + Sync),
) -> anyhow::Result<Value> {
    // Connections first (TLS handshakes are not part of the figures).
    warm_up(clients, ns).await?;

    let configmaps = ResourceRef::new("", "v1", "configmaps", Some(ns));
    eprintln!(
        "creating {} ConfigMaps with {} clients ...",
        args.creates, args.clients
    );
    let creates = create_many(clients, &configmaps, args.creates, |i| {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("c-{i}"), "labels": {"app": "k1s-bench"}},
            "data": {"key": format!("value-{i:0>64}")}
        })
    })
    .await?;

    let pods = ResourceRef::new("", "v1", "pods", Some(ns));
    eprintln!("creating {} pods ...", args.list_pods);
    let pod_creates = create_many(clients, &pods, args.list_pods, |i| {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("p-{i}"), "labels": {"app": "k1s-bench"}},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}
        })
    })
    .await?;
    eprintln!("{} LISTs of {} pods ...", args.list_rounds, args.list_pods);
    let list = lists(admin, &pods, args.list_pods, args.list_rounds).await?;

    eprintln!(
        "{} watchers, {} writes by {} writer(s) ...",
        args.watchers, args.watch_events, args.watch_writers
    );
    let watch = watch_fan_out(args, admin, clients, &configmaps, connect).await?;

    Ok(json!({
        "server": admin.server_url(),
        "protocol": if args.http1 { "http/1.1" } else { "h2" },
        "create": creates.json(args.clients),
        "pod_create": pod_creates.json(args.clients),
        "list": list,
        "watch": watch,
    }))
}

async fn warm_up(clients: &[HttpClient], ns: &str) -> anyhow::Result<()> {
    let r = ResourceRef::new("", "v1", "namespaces", None);
    for c in clients {
        c.get(&r, ns).await.context("warming up a connection")?;
    }
    Ok(())
}

/// Creates `n` objects made by `make` with all `clients` at once, each taking the next index.
async fn create_many(
    clients: &[HttpClient],
    r: &ResourceRef,
    n: usize,
    make: impl Fn(usize) -> Value + Send + Sync + 'static,
) -> anyhow::Result<Batch> {
    let next = Arc::new(AtomicUsize::new(0));
    let make = Arc::new(make);
    let mut tasks = JoinSet::new();
    let started = Instant::now();
    for c in clients {
        let (c, r, next, make) = (c.clone(), r.clone(), next.clone(), make.clone());
        tasks.spawn(async move {
            let mut h = histogram();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, ClientError>(h);
                }
                let obj = make(i);
                let t = Instant::now();
                c.create(&r, obj, &WriteParams::default()).await?;
                record(&mut h, t.elapsed());
            }
        });
    }
    let mut latency = histogram();
    while let Some(done) = tasks.join_next().await {
        let h = done
            .context("a client task failed")?
            .with_context(|| format!("creating {} in {}", r.resource, ns_of(r)))?;
        latency.add(&h).context("merging histograms")?;
    }
    Ok(Batch {
        ops: n,
        seconds: started.elapsed().as_secs_f64(),
        latency,
    })
}

/// Full LISTs of the pods: decoded through `Client::list`, and the bytes alone.
async fn lists(
    admin: &HttpClient,
    pods: &ResourceRef,
    expected: usize,
    rounds: usize,
) -> anyhow::Result<Value> {
    let mut decoded = histogram();
    for round in 0..=rounds {
        let t = Instant::now();
        let list = admin
            .list(pods, &ListParams::default())
            .await
            .context("listing pods")?;
        let took = t.elapsed();
        if list.items.len() != expected {
            bail!("a LIST returned {} pods, not {expected}", list.items.len());
        }
        if round > 0 {
            record(&mut decoded, took);
        }
    }
    let path = pods.path(None, None);
    let mut transfer = histogram();
    let mut bytes = 0;
    for round in 0..=rounds {
        let t = Instant::now();
        let body = admin.get_bytes(&path).await.context("listing pods")?;
        if round > 0 {
            record(&mut transfer, t.elapsed());
        }
        bytes = body.len();
    }
    Ok(json!({
        "pods": expected,
        "rounds": rounds,
        "response_bytes": bytes,
        "decoded_p50_ms": ms(&decoded, 0.5),
        "decoded_p99_ms": ms(&decoded, 0.99),
        "transfer_p50_ms": ms(&transfer, 0.5),
        "transfer_p99_ms": ms(&transfer, 0.99),
    }))
}

/// `watchers` watches open on the namespace's ConfigMaps while writers create `watch_events`
/// more; every watcher must see every write.
async fn watch_fan_out(
    args: &ApiBenchArgs,
    admin: &HttpClient,
    clients: &[HttpClient],
    configmaps: &ResourceRef,
    connect: &(dyn Fn() -> anyhow::Result<HttpClient> + Sync),
) -> anyhow::Result<Value> {
    let events = args.watch_events;
    let from = admin
        .list(
            configmaps,
            &ListParams {
                limit: Some(1),
                ..Default::default()
            },
        )
        .await
        .context("listing for a watch start")?
        .resource_version;
    let params = WatchParams {
        resource_version: Some(from),
        timeout_seconds: Some(3600),
        ..Default::default()
    };
    let mut watchers = JoinSet::new();
    for _ in 0..args.watchers {
        let c = connect()?;
        let mut stream = c
            .watch(configmaps, &params)
            .await
            .context("opening a watch")?;
        // Each watcher returns what it received, (write index, when), and why it stopped early.
        watchers.spawn(async move {
            let _keep = c;
            let mut got = Vec::with_capacity(events);
            while got.len() < events {
                let item = tokio::time::timeout(Duration::from_secs(60), stream.next()).await;
                let now = Instant::now();
                match item {
                    Err(_) => return (got, Some("no event for 60 s".to_owned())),
                    Ok(None) => return (got, Some("the watch ended".to_owned())),
                    Ok(Some(Err(e))) => return (got, Some(e.to_string())),
                    Ok(Some(Ok(WatchEvent::Added(o)))) => {
                        if let Some(i) = o["metadata"]["name"]
                            .as_str()
                            .and_then(|n| n.strip_prefix("w-"))
                            .and_then(|i| i.parse::<usize>().ok())
                        {
                            got.push((i, now));
                        }
                    }
                    Ok(Some(Ok(_))) => {}
                }
            }
            (got, None)
        });
    }

    // Writers: each write's start and acknowledgement.
    let next = Arc::new(AtomicUsize::new(0));
    let mut writers = JoinSet::new();
    for c in clients.iter().cycle().take(args.watch_writers) {
        let (c, r, next) = (c.clone(), configmaps.clone(), next.clone());
        writers.spawn(async move {
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= events {
                    return Ok::<_, ClientError>(done);
                }
                let obj = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("w-{i}"), "labels": {"app": "k1s-bench"}},
                    "data": {"key": format!("value-{i:0>64}")}
                });
                let start = Instant::now();
                c.create(&r, obj, &WriteParams::default()).await?;
                done.push((i, start, Instant::now()));
            }
        });
    }
    let mut writes: Vec<Option<(Instant, Instant)>> = vec![None; events];
    while let Some(w) = writers.join_next().await {
        for (i, start, ack) in w
            .context("a writer task failed")?
            .context("creating watched ConfigMaps")?
        {
            writes[i] = Some((start, ack));
        }
    }
    let first_write = writes.iter().flatten().map(|w| w.0).min();
    let last_ack = writes.iter().flatten().map(|w| w.1).max();

    let mut after_ack = histogram();
    let mut write_to_event = histogram();
    let mut deliveries = 0usize;
    let mut last_receipt = None;
    let mut failures = Vec::new();
    while let Some(w) = watchers.join_next().await {
        let (got, failure) = w.context("a watcher task failed")?;
        if let Some(f) = failure {
            failures.push(f);
        }
        for (i, at) in got {
            let Some(Some((start, ack))) = writes.get(i) else {
                continue;
            };
            deliveries += 1;
            record(&mut after_ack, at.saturating_duration_since(*ack));
            record(&mut write_to_event, at.saturating_duration_since(*start));
            last_receipt = Some(last_receipt.map_or(at, |l: Instant| l.max(at)));
        }
    }
    let expected = events * args.watchers;
    if !failures.is_empty() {
        eprintln!(
            "warning: {} of {} watchers stopped early; first reason: {}",
            failures.len(),
            args.watchers,
            failures[0]
        );
    }
    let (Some(first_write), Some(last_ack), Some(last_receipt)) =
        (first_write, last_ack, last_receipt)
    else {
        bail!("no watch event was delivered");
    };
    let write_secs = last_ack.duration_since(first_write).as_secs_f64();
    let deliver_secs = last_receipt.duration_since(first_write).as_secs_f64();
    Ok(json!({
        "watchers": args.watchers,
        "writes": events,
        "writers": args.watch_writers,
        "writes_per_sec": events as f64 / write_secs,
        "deliveries": deliveries,
        "missing": expected - deliveries,
        "watchers_failed": failures.len(),
        "events_per_sec": deliveries as f64 / deliver_secs,
        "after_ack_p50_ms": ms(&after_ack, 0.5),
        "after_ack_p99_ms": ms(&after_ack, 0.99),
        "write_to_event_p50_ms": ms(&write_to_event, 0.5),
        "write_to_event_p99_ms": ms(&write_to_event, 0.99),
    }))
}

/// Deletes every ConfigMap and pod in `ns`, then the namespace, and finalizes it as the
/// namespace controller would (there is none yet), so nothing of the run stays behind.
async fn cleanup(clients: &[HttpClient], ns: &str) -> anyhow::Result<usize> {
    let mut removed = 0;
    for (resource, grace) in [("configmaps", None), ("pods", Some(0))] {
        let r = ResourceRef::new("", "v1", resource, Some(ns));
        let names: Vec<String> = clients[0]
            .list(&r, &ListParams::default())
            .await
            .with_context(|| format!("listing {resource} to delete"))?
            .items
            .iter()
            .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
            .collect();
        let names = Arc::new(names);
        let next = Arc::new(AtomicUsize::new(0));
        let params = DeleteParams {
            grace_period_seconds: grace,
            ..Default::default()
        };
        let mut tasks = JoinSet::new();
        for c in clients {
            let (c, r, names, next, params) = (
                c.clone(),
                r.clone(),
                names.clone(),
                next.clone(),
                params.clone(),
            );
            tasks.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(name) = names.get(i) else {
                        return Ok::<_, ClientError>(());
                    };
                    match c.delete(&r, name, &params).await {
                        Ok(_) => {}
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(e),
                    }
                }
            });
        }
        while let Some(t) = tasks.join_next().await {
            t.context("a delete task failed")?
                .with_context(|| format!("deleting {resource}"))?;
        }
        removed += names.len();
    }
    let namespaces = ResourceRef::new("", "v1", "namespaces", None);
    let c = &clients[0];
    match c.delete(&namespaces, ns, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(e) if e.is_not_found() => return Ok(removed),
        Err(e) => return Err(e).context("deleting the namespace"),
    }
    match c.get(&namespaces, ns).await {
        Ok(mut obj) => {
            obj["spec"]["finalizers"] = json!([]);
            match c
                .update(&namespaces, obj, Some("finalize"), &WriteParams::default())
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e).context("finalizing the namespace"),
            }
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e).context("reading the deleted namespace"),
    }
    Ok(removed)
}

fn print_summary(r: &Value) {
    let f = |v: &Value| v.as_f64().unwrap_or_default();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    println!(
        "API server {} ({}):",
        text(&r["server"]),
        text(&r["protocol"])
    );
    for (label, key) in [
        ("create ConfigMaps", "create"),
        ("create pods", "pod_create"),
    ] {
        let c = &r[key];
        println!(
            "  {label:<18} {:>6} by {:>3} clients: {:>8.0} objects/s  p50 {:>7.3} ms  p99 {:>7.3} ms",
            c["objects"],
            c["clients"],
            f(&c["objects_per_sec"]),
            f(&c["p50_ms"]),
            f(&c["p99_ms"]),
        );
    }
    let l = &r["list"];
    println!(
        "  LIST {} pods ({:.1} MB), {} rounds: decoded p50 {:.1} ms p99 {:.1} ms; \
         bytes only p50 {:.1} ms p99 {:.1} ms",
        l["pods"],
        f(&l["response_bytes"]) / 1e6,
        l["rounds"],
        f(&l["decoded_p50_ms"]),
        f(&l["decoded_p99_ms"]),
        f(&l["transfer_p50_ms"]),
        f(&l["transfer_p99_ms"]),
    );
    let w = &r["watch"];
    println!(
        "  watch: {} watchers x {} writes ({} writer(s), {:.0} writes/s): {:.0} events/s delivered, \
         {} missing",
        w["watchers"],
        w["writes"],
        w["writers"],
        f(&w["writes_per_sec"]),
        f(&w["events_per_sec"]),
        w["missing"],
    );
    println!(
        "         after ack p50 {:.3} ms p99 {:.3} ms; write start→event p50 {:.3} ms p99 {:.3} ms",
        f(&w["after_ack_p50_ms"]),
        f(&w["after_ack_p99_ms"]),
        f(&w["write_to_event_p50_ms"]),
        f(&w["write_to_event_p99_ms"]),
    );
}
