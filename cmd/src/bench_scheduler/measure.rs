//! Timing a batch of pods as scheduler_perf does: a watch of the batch's namespace records
//! when each pod is first seen and when it is first seen bound (`spec.nodeName` set); a few
//! concurrent creators create the pods, recording when each create started. The batch is
//! done when every pod is bound.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::StreamExt;
use k1s_api::client::{Client, ResourceRef, WriteParams};
use k1s_runtime::watcher::{self, Event};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::verify::percentile;

/// When the pods of one namespace were first seen, and first seen bound.
#[derive(Debug, Clone, Default)]
pub struct Sightings {
    pub seen: HashMap<String, Instant>,
    pub bound: HashMap<String, Instant>,
}

impl Sightings {
    fn record(&mut self, pod: &Value, now: Instant) {
        let Some(name) = pod["metadata"]["name"].as_str() else {
            return;
        };
        self.seen.entry(name.to_string()).or_insert(now);
        if pod["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
        {
            self.bound.entry(name.to_string()).or_insert(now);
        }
    }
}

/// Watches the pods of one namespace until dropped.
pub struct Tracker {
    sightings: Arc<Mutex<Sightings>>,
    bound: watch::Receiver<usize>,
    stop: CancellationToken,
}

impl Tracker {
    /// Returns once the watch has listed the namespace, so that no later pod is missed.
    pub async fn start(client: Arc<dyn Client>, namespace: &str) -> anyhow::Result<Self> {
        let sightings = Arc::new(Mutex::new(Sightings::default()));
        let (bound_tx, bound) = watch::channel(0);
        let (ready_tx, ready) = oneshot::channel();
        let stop = CancellationToken::new();
        let r = ResourceRef::new("", "v1", "pods", Some(namespace));
        let (s, cancel) = (sightings.clone(), stop.clone());
        tokio::spawn(async move {
            let stream = watcher::watcher(client, r, watcher::Config::default());
            futures::pin_mut!(stream);
            let mut ready_tx = Some(ready_tx);
            loop {
                let ev = tokio::select! {
                    () = cancel.cancelled() => return,
                    ev = stream.next() => match ev { Some(ev) => ev, None => return },
                };
                match ev {
                    Event::InitDone => {
                        if let Some(tx) = ready_tx.take() {
                            let _ = tx.send(());
                        }
                    }
                    Event::InitApply(pod) | Event::Apply(pod) => {
                        let now = Instant::now();
                        let mut s = s.lock().unwrap_or_else(|p| p.into_inner());
                        s.record(&pod, now);
                        bound_tx.send_replace(s.bound.len());
                    }
                    Event::Init | Event::Delete(_) => {}
                }
            }
        });
        match tokio::time::timeout(Duration::from_secs(30), ready).await {
            Ok(Ok(())) => Ok(Self {
                sightings,
                bound,
                stop,
            }),
            _ => {
                stop.cancel();
                bail!("could not list the pods of namespace {namespace} within 30 s")
            }
        }
    }

    /// Waits until `n` pods have been seen bound.
    pub async fn wait_bound(&self, n: usize, timeout: Duration) -> anyhow::Result<()> {
        let mut rx = self.bound.clone();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|b| *b >= n)).await;
        if !matches!(waited, Ok(Ok(_))) {
            bail!(
                "only {} of {n} pods were bound after {} s",
                *self.bound.borrow(),
                timeout.as_secs()
            );
        }
        Ok(())
    }

    pub fn sightings(&self) -> Sightings {
        self.sightings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The figures of one timed batch.
#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    pub pods: usize,
    /// From the first create to the last create's answer.
    pub create_seconds: f64,
    pub created_per_second: f64,
    /// From the first create to the last pod seen bound.
    pub seconds: f64,
    pub bound_per_second: f64,
    /// Per pod: create (or first sighting) → seen bound.
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    pub latency_max_ms: f64,
    /// CPU time (user + system, every thread of the process: API server, store, scheduler and
    /// the bench's own clients) over the same span as `seconds`.
    pub cpu_seconds: f64,
    /// `cpu_seconds` per pod: less disturbed than the rates by how fast the machine is at the
    /// moment (it still moves with the machine's speed, but not with time stolen from it).
    pub cpu_ms_per_pod: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn rate(n: usize, d: Duration) -> f64 {
    if d.is_zero() {
        0.0
    } else {
        n as f64 / d.as_secs_f64()
    }
}

impl Timing {
    /// `start`: when the batch began; `created`: when the last pod was created (or first
    /// seen); `from`: per pod, where its latency starts; `bound`: when each was seen bound.
    pub fn new(
        start: Instant,
        created: Instant,
        from: &HashMap<String, Instant>,
        bound: &HashMap<String, Instant>,
    ) -> Self {
        let mut latencies: Vec<Duration> = from
            .iter()
            .filter_map(|(name, t)| bound.get(name).map(|b| b.saturating_duration_since(*t)))
            .collect();
        latencies.sort();
        let last = from
            .keys()
            .filter_map(|n| bound.get(n))
            .max()
            .copied()
            .unwrap_or(start);
        let create = created.saturating_duration_since(start);
        let total = last.saturating_duration_since(start);
        Self {
            pods: from.len(),
            create_seconds: create.as_secs_f64(),
            created_per_second: rate(from.len(), create),
            seconds: total.as_secs_f64(),
            bound_per_second: rate(latencies.len(), total),
            latency_p50_ms: ms(percentile(&latencies, 0.5)),
            latency_p99_ms: ms(percentile(&latencies, 0.99)),
            latency_max_ms: ms(latencies.last().copied().unwrap_or_default()),
            cpu_seconds: 0.0,
            cpu_ms_per_pod: 0.0,
        }
    }

    /// Records the CPU time the process used over the batch.
    pub fn with_cpu(mut self, cpu: Duration) -> Self {
        self.cpu_seconds = cpu.as_secs_f64();
        self.cpu_ms_per_pod = if self.pods == 0 {
            0.0
        } else {
            ms(cpu) / self.pods as f64
        };
        self
    }
}

/// The CPU time (user + system, all threads) this process has used so far, from
/// `/proc/self/stat` (clock-tick resolution); zero where that cannot be read.
pub fn process_cpu() -> Duration {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|t| *t > 0)
        .unwrap_or(100) as f64;
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| cpu_ticks(&s))
        .map(|t| Duration::from_secs_f64(t as f64 / ticks))
        .unwrap_or_default()
}

/// utime + stime of a `/proc/PID/stat` line (fields 14 and 15; the command name, field 2,
/// may hold spaces and parentheses, so fields are counted after its last `)`).
fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
}

/// Creates `pods` (each with a `metadata.name`) in `namespace` with `creators` concurrent
/// clients; returns when each create started, and when the last one finished.
pub async fn create_pods(
    client: &Arc<dyn Client>,
    namespace: &str,
    pods: Vec<Value>,
    creators: usize,
) -> anyhow::Result<(HashMap<String, Instant>, Instant)> {
    let pods = Arc::new(pods);
    let next = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for _ in 0..creators.max(1) {
        let (client, pods, next) = (client.clone(), pods.clone(), next.clone());
        let r = ResourceRef::new("", "v1", "pods", Some(namespace));
        handles.push(tokio::spawn(async move {
            let mut started = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(pod) = pods.get(i) else {
                    return Ok::<_, anyhow::Error>(started);
                };
                let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
                let t = Instant::now();
                client
                    .create(&r, pod.clone(), &WriteParams::default())
                    .await
                    .map_err(|e| anyhow::anyhow!("creating pod {name}: {e}"))?;
                started.push((name, t));
            }
        }));
    }
    let mut all = HashMap::new();
    for h in handles {
        all.extend(h.await??);
    }
    Ok((all, Instant::now()))
}

/// Creates `pods` in `namespace` and waits until all are bound; returns the timing.
pub async fn run_batch(
    client: &Arc<dyn Client>,
    namespace: &str,
    pods: Vec<Value>,
    creators: usize,
    timeout: Duration,
) -> anyhow::Result<Timing> {
    let n = pods.len();
    let tracker = Tracker::start(client.clone(), namespace).await?;
    let start = Instant::now();
    let cpu = process_cpu();
    let (started, created) = create_pods(client, namespace, pods, creators).await?;
    tracker.wait_bound(n, timeout).await?;
    let cpu = process_cpu().saturating_sub(cpu);
    Ok(Timing::new(start, created, &started, &tracker.sightings().bound).with_cpu(cpu))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cpu_ticks_are_fields_14_and_15_after_the_command_name() {
        let stat = "4242 (k1s (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9";
        assert_eq!(cpu_ticks(stat), Some(325));
        assert_eq!(cpu_ticks("4242 (k1s) S 1 2"), None);
        assert_eq!(cpu_ticks("no command name"), None);
    }

    #[test]
    fn sightings_keep_the_first_times() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(5);
        let t2 = t0 + Duration::from_millis(9);
        let mut s = Sightings::default();
        s.record(&json!({"metadata": {"name": "a"}, "spec": {}}), t0);
        s.record(
            &json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n"}}),
            t1,
        );
        s.record(
            &json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n"}}),
            t2,
        );
        s.record(
            &json!({"metadata": {"name": "b"}, "spec": {"nodeName": ""}}),
            t2,
        );
        assert_eq!(s.seen["a"], t0);
        assert_eq!(s.bound["a"], t1);
        assert!(!s.bound.contains_key("b"));
    }

    #[test]
    fn timing_runs_from_the_start_to_the_last_binding() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let from: HashMap<String, Instant> =
            [("a".to_string(), at(0)), ("b".to_string(), at(100))].into();
        let bound: HashMap<String, Instant> = [
            ("a".to_string(), at(50)),
            ("b".to_string(), at(400)),
            ("other".to_string(), at(900)),
        ]
        .into();
        let t = Timing::new(t0, at(200), &from, &bound);
        assert_eq!(t.pods, 2);
        assert!((t.seconds - 0.4).abs() < 1e-9, "{t:?}");
        assert!((t.bound_per_second - 5.0).abs() < 1e-6, "{t:?}");
        assert!((t.created_per_second - 10.0).abs() < 1e-6, "{t:?}");
        assert!((t.latency_p50_ms - 50.0).abs() < 1e-6, "{t:?}");
        assert!((t.latency_max_ms - 300.0).abs() < 1e-6, "{t:?}");
    }
}
