//! Prometheus metrics of the API server, served as text at `/metrics`.
//!
//! - `apiserver_request_total{verb,group,version,resource,subresource,code}` and
//!   `apiserver_request_duration_seconds{verb,group,version,resource,subresource}` (WATCH
//!   excluded, as upstream excludes long-running requests), named and labelled as
//!   kube-apiserver does, so existing dashboards find them;
//! - `apiserver_registered_watchers{group,version,kind}`: open watches;
//! - `k1s_store_request_duration_seconds{operation,result}`: every datastore call the API
//!   server makes, through [`InstrumentedStore`], a decorator over any `Store`.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use k1s_store::{
    KeyValue, ListRequest, ListResponse, Result, Revision, Store, WatchOptions, WatchStream,
};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// What a request was about, for the request metrics.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestInfo {
    /// Upstream's metric verbs: GET, LIST, WATCH, POST, PUT, PATCH, DELETE.
    pub verb: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    #[prometheus(flatten)]
    info: RequestInfo,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatcherLabels {
    group: String,
    version: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    operation: &'static str,
    result: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 50 µs .. ~52 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 21))
}

/// Keeps a watch counted in `apiserver_registered_watchers` while it lives.
pub struct WatcherGuard {
    metrics: Arc<Metrics>,
    labels: WatcherLabels,
}

impl Drop for WatcherGuard {
    fn drop(&mut self) {
        self.metrics.watchers.get_or_create(&self.labels).dec();
    }
}

/// The metrics registry and its families.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_duration: Histograms<RequestInfo>,
    watchers: Family<WatcherLabels, Gauge>,
    store_duration: Histograms<StoreLabels>,
    /// Text from other components of the process (the kubelet's volume stats), appended.
    sources: std::sync::RwLock<Vec<MetricsSource>>,
}

/// Produces Prometheus text (without `# EOF`) for `/metrics`.
pub type MetricsSource = Arc<dyn Fn() -> String + Send + Sync>;

impl Metrics {
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let request_duration: Histograms<RequestInfo> =
            Family::new_with_constructor(latency_histogram);
        let watchers = Family::<WatcherLabels, Gauge>::default();
        let store_duration: Histograms<StoreLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "apiserver_request",
            "Counter of API requests, by verb, resource and HTTP response code",
            requests.clone(),
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "API request latency, by verb and resource (watches excluded)",
            request_duration.clone(),
        );
        registry.register(
            "apiserver_registered_watchers",
            "Open watches, by group, version and kind",
            watchers.clone(),
        );
        registry.register(
            "k1s_store_request_duration_seconds",
            "Datastore call latency, by operation and result",
            store_duration.clone(),
        );
        Arc::new(Self {
            registry,
            requests,
            request_duration,
            watchers,
            store_duration,
            sources: Default::default(),
        })
    }

    /// Records one finished API request.
    pub fn observe_request(&self, info: RequestInfo, code: u16, started: Instant) {
        if info.verb != "WATCH" {
            self.request_duration
                .get_or_create(&info)
                .observe(started.elapsed().as_secs_f64());
        }
        self.requests
            .get_or_create(&RequestLabels {
                info,
                code: code.to_string(),
            })
            .inc();
    }

    /// Counts an open watch until the returned guard is dropped.
    pub fn watcher(self: &Arc<Self>, group: &str, version: &str, kind: &str) -> WatcherGuard {
        let labels = WatcherLabels {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        };
        self.watchers.get_or_create(&labels).inc();
        WatcherGuard {
            metrics: self.clone(),
            labels,
        }
    }

    fn observe_store<T>(&self, operation: &'static str, started: Instant, res: &Result<T>) {
        let result = if res.is_ok() { "ok" } else { "error" };
        self.store_duration
            .get_or_create(&StoreLabels { operation, result })
            .observe(started.elapsed().as_secs_f64());
    }

    /// Adds the metrics of another component of this process to `/metrics`.
    pub fn add_source(&self, source: MetricsSource) {
        self.sources
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(source);
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        use prometheus_client::encoding::text;
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = text::encode_registry(&mut out, &self.registry);
        for source in self
            .sources
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            out.push_str(&source());
        }
        let _ = text::encode_eof(&mut out);
        out
    }
}

/// A [`Store`] that times every call into [`Metrics`].
pub struct InstrumentedStore {
    inner: Arc<dyn Store>,
    metrics: Arc<Metrics>,
}

impl InstrumentedStore {
    pub fn new(inner: Arc<dyn Store>, metrics: Arc<Metrics>) -> Self {
        Self { inner, metrics }
    }

    async fn timed<T>(
        &self,
        operation: &'static str,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let started = Instant::now();
        let res = call.await;
        self.metrics.observe_store(operation, started, &res);
        res
    }
}

#[async_trait::async_trait]
impl Store for InstrumentedStore {
    async fn current_revision(&self) -> Result<Revision> {
        self.timed("current_revision", self.inner.current_revision())
            .await
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.timed("get", self.inner.get(key)).await
    }

    async fn list(&self, req: ListRequest) -> Result<ListResponse> {
        self.timed("list", self.inner.list(req)).await
    }

    async fn count(&self, prefix: &str) -> Result<(u64, Revision)> {
        self.timed("count", self.inner.count(prefix)).await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        self.timed("create", self.inner.create(key, value)).await
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision> {
        self.timed("update", self.inner.update(key, value, expected))
            .await
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)> {
        self.timed("delete", self.inner.delete(key, expected)).await
    }

    fn watch(&self, prefix: &str, after: Revision, opts: WatchOptions) -> WatchStream {
        self.inner.watch(prefix, after, opts)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.timed("compact", self.inner.compact(revision)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k1s_store::redb::{RedbConfig, RedbStore};

    #[tokio::test]
    async fn store_calls_and_requests_show_up_in_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let inner = RedbStore::open(RedbConfig::new(dir.path().join("s.redb"))).unwrap();
        let metrics = Metrics::new();
        let store = InstrumentedStore::new(Arc::new(inner), metrics.clone());
        store.create("/a", Bytes::from_static(b"1")).await.unwrap();
        assert!(store.create("/a", Bytes::from_static(b"1")).await.is_err());
        metrics.observe_request(
            RequestInfo {
                verb: "GET".into(),
                ..Default::default()
            },
            200,
            Instant::now(),
        );
        let guard = metrics.watcher("apps", "v1", "Deployment");
        assert!(metrics.encode().contains(
            "apiserver_registered_watchers{group=\"apps\",version=\"v1\",kind=\"Deployment\"} 1"
        ));
        drop(guard);
        assert!(metrics.encode().contains(
            "apiserver_registered_watchers{group=\"apps\",version=\"v1\",kind=\"Deployment\"} 0"
        ));
        let text = metrics.encode();
        for needle in [
            "k1s_store_request_duration_seconds_count{operation=\"create\",result=\"ok\"} 1",
            "k1s_store_request_duration_seconds_count{operation=\"create\",result=\"error\"} 1",
            "apiserver_request_total{verb=\"GET\",group=\"\",version=\"\",resource=\"\",subresource=\"\",code=\"200\"} 1",
            "# TYPE apiserver_request_duration_seconds histogram",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
    }

    #[test]
    fn other_sources_are_appended_before_eof() {
        let metrics = Metrics::new();
        metrics.add_source(Arc::new(|| "# TYPE kubelet_x gauge\nkubelet_x 1\n".into()));
        let text = metrics.encode();
        assert!(text.ends_with("kubelet_x 1\n# EOF\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1);
    }
}
