//! The workload behind `k1s bench store`: durable puts with 1 and N concurrent writers, range
//! reads and watch delivery, run the same way against any [`Store`] so that two backends (the
//! local redb file and an etcd) can be compared in one run on the same disk.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::{ListRequest, Result, Store, StoreError, WatchItem, WatchOptions};

/// Sizes of the workload.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Puts by the single writer.
    pub single_ops: usize,
    /// Puts shared by the concurrent writers.
    pub concurrent_ops: usize,
    /// The number of concurrent writers.
    pub writers: usize,
    /// Bytes per value.
    pub value_size: usize,
    /// Keys in the range that the range reads list.
    pub range_keys: usize,
    /// Range reads to time.
    pub range_ops: usize,
    /// Puts whose watch delivery is timed.
    pub watch_ops: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            single_ops: 2_000,
            concurrent_ops: 40_000,
            writers: 64,
            value_size: 256,
            range_keys: 1_000,
            range_ops: 500,
            watch_ops: 2_000,
        }
    }
}

/// Throughput and latency of one put workload.
#[derive(Clone, Debug, Serialize)]
pub struct PutFigures {
    pub writers: usize,
    pub ops: usize,
    pub ops_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// Range read figures: each read lists `keys_per_read` keys.
#[derive(Clone, Debug, Serialize)]
pub struct RangeFigures {
    pub keys_per_read: usize,
    pub reads_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// Watch delivery: `put_to_event` runs from the start of the put to the event reaching the
/// watcher (it includes the durable commit); `after_ack` is how long after the writer saw its
/// acknowledgement the watcher had the event (0 when it arrived first).
#[derive(Clone, Debug, Serialize)]
pub struct WatchFigures {
    pub events: usize,
    pub put_to_event_p50_ms: f64,
    pub put_to_event_p99_ms: f64,
    pub after_ack_p50_ms: f64,
    pub after_ack_p99_ms: f64,
}

/// All figures of one backend.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub backend: String,
    pub put_1: PutFigures,
    pub put_n: PutFigures,
    pub range: RangeFigures,
    pub watch: WatchFigures,
}

fn histogram() -> Histogram<u64> {
    // Microseconds, up to one minute, 3 significant digits; the bounds are constants.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record(d.as_micros().max(1) as u64);
}

/// Runs the whole workload under `prefix` (which should be unique to this run).
pub async fn run(
    store: Arc<dyn Store>,
    backend: &str,
    prefix: &str,
    cfg: &BenchConfig,
) -> Result<BenchReport> {
    let value = Bytes::from(vec![b'x'; cfg.value_size]);
    let put_1 = puts(&store, &format!("{prefix}p1/"), &value, cfg.single_ops, 1).await?;
    let put_n = puts(
        &store,
        &format!("{prefix}pn/"),
        &value,
        cfg.concurrent_ops,
        cfg.writers,
    )
    .await?;
    let range = ranges(&store, &format!("{prefix}r/"), &value, cfg).await?;
    let watch = watch_delivery(&store, &format!("{prefix}w/"), &value, cfg.watch_ops).await?;
    Ok(BenchReport {
        backend: backend.to_owned(),
        put_1,
        put_n,
        range,
        watch,
    })
}

async fn puts(
    store: &Arc<dyn Store>,
    prefix: &str,
    value: &Bytes,
    ops: usize,
    writers: usize,
) -> Result<PutFigures> {
    let writers = writers.max(1);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (store, value) = (store.clone(), value.clone());
        let keys: Vec<String> = (w..ops)
            .step_by(writers)
            .map(|i| format!("{prefix}{i:08}"))
            .collect();
        tasks.push(tokio::spawn(async move {
            let mut h = histogram();
            for key in keys {
                let t = Instant::now();
                store.create(&key, value.clone()).await?;
                record(&mut h, t.elapsed());
            }
            Ok::<_, StoreError>(h)
        }));
    }
    let mut h = histogram();
    for t in tasks {
        let part = t
            .await
            .map_err(|e| StoreError::Backend(format!("bench writer failed: {e}")))??;
        h.add(part)
            .map_err(|e| StoreError::Backend(e.to_string()))?;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(PutFigures {
        writers,
        ops,
        ops_per_sec: ops as f64 / secs,
        p50_ms: ms(&h, 0.5),
        p99_ms: ms(&h, 0.99),
    })
}

async fn ranges(
    store: &Arc<dyn Store>,
    prefix: &str,
    value: &Bytes,
    cfg: &BenchConfig,
) -> Result<RangeFigures> {
    puts(store, prefix, value, cfg.range_keys, cfg.writers).await?;
    let mut h = histogram();
    let start = Instant::now();
    for _ in 0..cfg.range_ops {
        let t = Instant::now();
        let page = store
            .list(ListRequest {
                prefix: prefix.to_owned(),
                ..Default::default()
            })
            .await?;
        record(&mut h, t.elapsed());
        if page.kvs.len() != cfg.range_keys {
            return Err(StoreError::Backend(format!(
                "range read returned {} keys, expected {}",
                page.kvs.len(),
                cfg.range_keys
            )));
        }
    }
    Ok(RangeFigures {
        keys_per_read: cfg.range_keys,
        reads_per_sec: cfg.range_ops as f64 / start.elapsed().as_secs_f64(),
        p50_ms: ms(&h, 0.5),
        p99_ms: ms(&h, 0.99),
    })
}

async fn watch_delivery(
    store: &Arc<dyn Store>,
    prefix: &str,
    value: &Bytes,
    ops: usize,
) -> Result<WatchFigures> {
    let after = store.current_revision().await?;
    let mut stream = store.watch(prefix, after, WatchOptions::default());
    let watcher = tokio::spawn(async move {
        let mut arrivals = Vec::with_capacity(ops);
        while arrivals.len() < ops {
            match stream.next().await {
                Some(Ok(WatchItem::Event(_))) => arrivals.push(Instant::now()),
                Some(Ok(WatchItem::Progress(_))) => {}
                Some(Err(e)) => return Err(e),
                None => return Err(StoreError::Closed),
            }
        }
        Ok(arrivals)
    });
    let mut sent = Vec::with_capacity(ops);
    for i in 0..ops {
        let t = Instant::now();
        store
            .create(&format!("{prefix}{i:08}"), value.clone())
            .await?;
        sent.push((t, Instant::now()));
    }
    let arrivals = tokio::time::timeout(Duration::from_secs(60), watcher)
        .await
        .map_err(|_| StoreError::Backend("watch events did not arrive within 60 s".into()))?
        .map_err(|e| StoreError::Backend(format!("bench watcher failed: {e}")))??;
    let (mut e2e, mut lag) = (histogram(), histogram());
    for ((start, ack), arrived) in sent.iter().zip(&arrivals) {
        record(&mut e2e, arrived.saturating_duration_since(*start));
        record(&mut lag, arrived.saturating_duration_since(*ack));
    }
    Ok(WatchFigures {
        events: ops,
        put_to_event_p50_ms: ms(&e2e, 0.5),
        put_to_event_p99_ms: ms(&e2e, 0.99),
        after_ack_p50_ms: ms(&lag, 0.5),
        after_ack_p99_ms: ms(&lag, 0.99),
    })
}

/// Deletes every key under `prefix` (used to leave a shared etcd as it was found).
pub async fn cleanup(store: &Arc<dyn Store>, prefix: &str) -> Result<usize> {
    let mut removed = 0;
    loop {
        let page = store
            .list(ListRequest {
                prefix: prefix.to_owned(),
                limit: 1000,
                ..Default::default()
            })
            .await?;
        if page.kvs.is_empty() {
            return Ok(removed);
        }
        let deletes = page.kvs.iter().map(|kv| store.delete(&kv.key, None));
        for res in futures::future::join_all(deletes).await {
            match res {
                Ok(_) | Err(StoreError::NotFound { .. }) => removed += 1,
                Err(e) => return Err(e),
            }
        }
    }
}
