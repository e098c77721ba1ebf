//! The [`Store`] contract on a real etcd v3 cluster, for an HA control plane.
//!
//! This module owns the mapping of the store contract onto etcd's API: keys are used verbatim
//! as etcd keys, a prefix is the etcd range `[prefix, prefix_end)`, writes are etcd
//! transactions that compare revisions (so a failed write never moves the revision counter),
//! and etcd's revision counter *is* the store's revision counter (a fresh etcd is at revision
//! 1, like an empty store). etcd errors are mapped onto [`StoreError`]: "required revision has
//! been compacted" becomes [`StoreError::Compacted`], "required revision is a future revision"
//! [`StoreError::FutureRevision`], everything else (unreachable endpoints, no leader, ...)
//! [`StoreError::Backend`] naming the endpoints.
//!
//! # Watches and progress
//! A watch opens its own etcd watch stream (one gRPC stream per [`Store::watch`]) on first poll
//! and closes it when dropped. It asks etcd for history from revision `after` itself (one
//! earlier than needed, the event at `after` is dropped) so that etcd refuses the watch exactly
//! when `after` is older than the compacted revision, as the contract says.
//!
//! Progress is requested with etcd's `WatchProgressRequest`. Before etcd 3.4.25/3.5.8 the
//! answer to such a request is not ordered with the watch's events (etcd issue #15220): it can
//! overtake events that are already queued on the server. To keep [`WatchItem::Progress`]
//! truthful the stream only reports a revision that a *second* progress request, sent after the
//! first answer arrived, has confirmed; a watch that started behind the head reports progress
//! only once etcd should have sent it all history (etcd sends history every 100 ms, up to 1000
//! revisions at a time: a short history needs a few hundred milliseconds, a long one a quiet
//! spell without events); and progress never goes backwards. Should
//! etcd still deliver an event at or below a reported progress revision, the stream ends with
//! [`StoreError::WatcherTooSlow`] (list again) rather than deliver it out of order.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, GetResponse, KvClient,
    MaintenanceClient, PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse, WatchClient,
    WatchOptions as EtcdWatchOptions, WatchResponse as EtcdWatchResponse,
    WatchStream as EtcdWatchStream,
};
use futures::StreamExt;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::{
    Event, EventKind, KeyValue, ListRequest, ListResponse, Result, Revision, Store, StoreError,
    WatchItem, WatchOptions, WatchStream, check_key,
};

/// Largest gRPC message the client accepts: a list page or a batch of watch events can be much
/// larger than tonic's 4 MiB default (etcd itself sends up to 2 GiB).
const MAX_DECODING_MESSAGE_SIZE: usize = i32::MAX as usize;

/// How long to wait for etcd to say which revision it has compacted to, when it only said that
/// a revision is compacted.
const COMPACTED_LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

/// A watch that has to catch up on history reports progress only this long after etcd created
/// it: etcd sends history every 100 ms, up to [`HISTORY_BATCH_REVISIONS`] at a time. A longer
/// history has to be followed by this long without events. See the module docs.
const CATCH_UP_QUIET: Duration = Duration::from_millis(300);

/// etcd sends a catching-up watch at most this many revisions of history at a time.
const HISTORY_BATCH_REVISIONS: Revision = 1000;

/// A progress request without an answer for this many progress intervals is sent again.
const PROGRESS_RETRY_TICKS: u32 = 3;

/// The shortest progress interval honoured; shorter ones (including zero) are raised to it.
const MIN_PROGRESS_INTERVAL: Duration = Duration::from_millis(10);

/// Splits a comma-separated endpoint list (as in k3s' `--datastore-endpoint`) into endpoints,
/// trimming blanks and dropping empty entries.
pub fn parse_endpoints(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Client TLS files for etcd, as k3s' `--datastore-cafile`, `--datastore-certfile` and
/// `--datastore-keyfile`.
#[derive(Clone, Debug, Default)]
pub struct EtcdTls {
    pub ca_file: Option<std::path::PathBuf>,
    pub cert_file: Option<std::path::PathBuf>,
    pub key_file: Option<std::path::PathBuf>,
}

impl EtcdTls {
    fn is_empty(&self) -> bool {
        self.ca_file.is_none() && self.cert_file.is_none() && self.key_file.is_none()
    }

    fn options(&self) -> Result<etcd_client::TlsOptions> {
        let read = |path: &std::path::Path, what: &str| {
            std::fs::read(path).map_err(|e| {
                StoreError::InvalidArgument(format!(
                    "cannot read the etcd {what} {}: {e}",
                    path.display()
                ))
            })
        };
        let ca = self.ca_file.as_deref().ok_or_else(|| {
            StoreError::InvalidArgument(
                "https:// etcd endpoints need the CA that signed etcd's certificate (--datastore-cafile)"
                    .into(),
            )
        })?;
        let mut options = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(read(ca, "CA file")?));
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                options = options.identity(etcd_client::Identity::from_pem(
                    read(cert, "client certificate")?,
                    read(key, "client key")?,
                ));
            }
            (None, None) => {}
            _ => {
                return Err(StoreError::InvalidArgument(
                    "give both --datastore-certfile and --datastore-keyfile, or neither".into(),
                ));
            }
        }
        Ok(options)
    }
}

/// A store backed by etcd. Cheap to share: every call clones a handle onto one multiplexed
/// gRPC channel.
pub struct EtcdStore {
    kv: KvClient,
    watch: WatchClient,
    maintenance: MaintenanceClient,
    /// The endpoints, comma-separated, for error messages.
    endpoints: Arc<str>,
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl EtcdStore {
    /// Connects to an etcd cluster, e.g. `["http://127.0.0.1:2379"]`. An entry may itself be a
    /// comma-separated list. Fails with [`StoreError::Backend`] if no endpoint answers.
    pub async fn connect(endpoints: &[String]) -> Result<EtcdStore> {
        Self::connect_with_tls(endpoints, &EtcdTls::default()).await
    }

    /// Like [`EtcdStore::connect`], with client TLS for `https://` endpoints: the CA that
    /// signed etcd's serving certificate and, for etcd's `--client-cert-auth`, a client
    /// certificate and key (all PEM files).
    pub async fn connect_with_tls(endpoints: &[String], tls: &EtcdTls) -> Result<EtcdStore> {
        let endpoints: Vec<String> = endpoints.iter().flat_map(|e| parse_endpoints(e)).collect();
        if endpoints.is_empty() {
            return Err(StoreError::InvalidArgument(
                "no etcd endpoints given (expected e.g. http://127.0.0.1:2379)".into(),
            ));
        }
        let joined: Arc<str> = endpoints.join(",").into();
        let https = endpoints.iter().any(|e| e.starts_with("https://"));
        let mut options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
            .with_keep_alive_while_idle(true)
            .with_require_leader(true);
        if https {
            options = options.with_tls(tls.options()?);
        } else if !tls.is_empty() {
            return Err(StoreError::InvalidArgument(format!(
                "etcd TLS files were given but the endpoints {joined} are not https://"
            )));
        }
        let client = Client::connect(&endpoints, Some(options))
            .await
            .map_err(|e| match e {
                etcd_client::Error::InvalidArgs(_) | etcd_client::Error::InvalidUri(_) => {
                    StoreError::InvalidArgument(format!("etcd endpoints {joined}: {e}"))
                }
                e => backend_error(&joined, &e),
            })?;
        let store = EtcdStore {
            kv: client
                .kv_client()
                .max_decoding_message_size(MAX_DECODING_MESSAGE_SIZE),
            watch: client
                .watch_client()
                .max_decoding_message_size(MAX_DECODING_MESSAGE_SIZE),
            maintenance: client.maintenance_client(),
            endpoints: joined,
        };
        // The client connects lazily; make sure the cluster answers now, so that a wrong
        // endpoint is reported at startup rather than on the first request.
        store.current_revision().await?;
        Ok(store)
    }

    /// Writes etcd's own snapshot to `out` — its database file with the checksum etcd appends,
    /// what `etcdctl snapshot save` writes, restored with `etcdctl snapshot restore` — taken
    /// by the member the client reaches. Returns its size.
    pub async fn save_native_snapshot(&self, out: &mut (dyn std::io::Write + Send)) -> Result<u64> {
        let mut stream = self
            .maintenance
            .clone()
            .snapshot()
            .await
            .map_err(|e| self.err(&e))?;
        let mut size = 0u64;
        while let Some(chunk) = stream.message().await.map_err(|e| self.err(&e))? {
            out.write_all(chunk.blob())
                .map_err(|e| StoreError::Backend(format!("writing the etcd snapshot: {e}")))?;
            size += chunk.blob().len() as u64;
        }
        if size == 0 {
            return Err(StoreError::Backend(format!(
                "etcd at {}: the snapshot came back empty",
                self.endpoints
            )));
        }
        Ok(size)
    }

    /// The endpoints this store talks to, comma-separated.
    pub fn endpoints(&self) -> &str {
        &self.endpoints
    }

    fn err(&self, e: &etcd_client::Error) -> StoreError {
        backend_error(&self.endpoints, e)
    }

    async fn txn(&self, txn: Txn) -> Result<(Revision, TxnResponse)> {
        // A write is sent again only when it reached no member (never applied).
        let resp = retry(Unreached::Member, || {
            let (mut kv, txn) = (self.kv.clone(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await
        .map_err(|e| self.err(&e))?;
        Ok((header_revision(resp.header(), &self.endpoints)?, resp))
    }

    /// Turns an etcd error of a read or compaction at `requested` into the store's error.
    /// `compacted_at_least` is what is known of the compacted revision should etcd not say
    /// (a compacted read is below it, a refused compaction at or below it).
    async fn revision_error(
        &self,
        requested: Revision,
        compacted_at_least: Revision,
        e: etcd_client::Error,
    ) -> StoreError {
        match classify(&e) {
            ErrorKind::Compacted => {
                let compacted = compacted_revision(self.watch.clone()).await;
                StoreError::Compacted {
                    requested,
                    compacted: compacted.unwrap_or(compacted_at_least),
                }
            }
            ErrorKind::Future => {
                let current = self
                    .current_revision()
                    .await
                    .unwrap_or(requested.saturating_sub(1));
                StoreError::FutureRevision { requested, current }
            }
            ErrorKind::Other => self.err(&e),
        }
    }

    async fn range(&self, key: Vec<u8>, options: GetOptions) -> Result<GetResponse> {
        retry(Unreached::Answer, || {
            let (mut kv, key, options) = (self.kv.clone(), key.clone(), options.clone());
            async move { kv.get(key, Some(options)).await }
        })
        .await
        .map_err(|e| self.err(&e))
    }
}

#[async_trait::async_trait]
impl Store for EtcdStore {
    async fn current_revision(&self) -> Result<Revision> {
        // Any key will do: the header carries the store's revision.
        let resp = self
            .range(vec![0], GetOptions::new().with_count_only())
            .await?;
        header_revision(resp.header(), &self.endpoints)
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        check_key(key)?;
        let mut resp = self
            .range(key.as_bytes().to_vec(), GetOptions::new())
            .await?;
        match resp.take_kvs().into_iter().next() {
            Some(kv) => Ok(Some(convert_kv(kv, &self.endpoints)?)),
            None => Ok(None),
        }
    }

    async fn list(&self, req: ListRequest) -> Result<ListResponse> {
        let at = match req.revision {
            None | Some(0) => None,
            Some(r) if r < 0 => {
                return Err(StoreError::InvalidArgument(format!(
                    "list at negative revision {r}"
                )));
            }
            Some(r) => Some(r),
        };
        let (prefix_start, end) = prefix_range(&req.prefix);
        let mut start = prefix_start.clone();
        if let Some(after) = &req.start_after {
            // The smallest key greater than `after` is `after` followed by a NUL byte.
            let mut next = after.as_bytes().to_vec();
            next.push(0);
            if next > start {
                start = next;
            }
        }
        let exhausted = end != [0] && start >= end;

        let mut options = GetOptions::new().with_range(end.clone());
        if let Some(r) = at {
            options = options.with_revision(r);
        }
        let key = if exhausted {
            // Nothing is left after `start_after`; still read the range (only its count) so
            // that the revision is checked and reported like for any other page.
            options = options.with_count_only();
            prefix_start
        } else {
            if req.limit > 0 {
                options = options.with_limit(i64::try_from(req.limit).unwrap_or(i64::MAX));
            }
            start
        };
        let read = retry(Unreached::Answer, || {
            let (mut kv, key, options) = (self.kv.clone(), key.clone(), options.clone());
            async move { kv.get(key, Some(options)).await }
        });
        let mut resp = match read.await {
            Ok(resp) => resp,
            Err(e) => {
                let requested = at.unwrap_or(0);
                return Err(self.revision_error(requested, requested + 1, e).await);
            }
        };
        let revision = match at {
            Some(r) => r,
            None => header_revision(resp.header(), &self.endpoints)?,
        };
        if exhausted {
            return Ok(ListResponse {
                kvs: Vec::new(),
                revision,
                more: false,
            });
        }
        let more = resp.more();
        let kvs = resp
            .take_kvs()
            .into_iter()
            .map(|kv| convert_kv(kv, &self.endpoints))
            .collect::<Result<Vec<_>>>()?;
        Ok(ListResponse {
            kvs,
            revision,
            more,
        })
    }

    async fn count(&self, prefix: &str) -> Result<(u64, Revision)> {
        let (start, end) = prefix_range(prefix);
        let resp = self
            .range(start, GetOptions::new().with_range(end).with_count_only())
            .await?;
        let revision = header_revision(resp.header(), &self.endpoints)?;
        Ok((u64::try_from(resp.count()).unwrap_or(0), revision))
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        check_key(key)?;
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value, None::<PutOptions>)]);
        let (revision, resp) = self.txn(txn).await?;
        if resp.succeeded() {
            Ok(revision)
        } else {
            Err(StoreError::AlreadyExists { key: key.into() })
        }
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision> {
        check_key(key)?;
        let txn = Txn::new()
            .when([
                // A missing key compares as mod revision 0; it must exist.
                Compare::version(key, CompareOp::Greater, 0),
                Compare::mod_revision(key, CompareOp::Equal, expected),
            ])
            .and_then([TxnOp::put(key, value, None::<PutOptions>)])
            .or_else([TxnOp::get(key, None)]);
        let (revision, resp) = self.txn(txn).await?;
        if resp.succeeded() {
            Ok(revision)
        } else {
            Err(precondition_failed(key, expected, &resp))
        }
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)> {
        check_key(key)?;
        let mut when = vec![Compare::version(key, CompareOp::Greater, 0)];
        if let Some(expected) = expected {
            when.push(Compare::mod_revision(key, CompareOp::Equal, expected));
        }
        let txn = Txn::new()
            .when(when)
            .and_then([TxnOp::delete(
                key,
                Some(DeleteOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key, None)]);
        let (revision, resp) = self.txn(txn).await?;
        if !resp.succeeded() {
            return Err(match expected {
                Some(expected) => precondition_failed(key, expected, &resp),
                None => StoreError::NotFound { key: key.into() },
            });
        }
        let prev = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Delete(mut d) => d.take_prev_kvs().into_iter().next(),
            _ => None,
        });
        match prev {
            Some(prev) => Ok((revision, convert_kv(prev, &self.endpoints)?)),
            None => Err(StoreError::Backend(format!(
                "etcd at {}: delete of {key:?} at revision {revision} returned no previous value",
                self.endpoints
            ))),
        }
    }

    fn watch(&self, prefix: &str, after: Revision, opts: WatchOptions) -> WatchStream {
        let (key, range_end) = prefix_range(prefix);
        let state = WatchState {
            client: self.watch.clone(),
            endpoints: self.endpoints.clone(),
            key,
            range_end,
            after,
            progress_interval: opts.progress_interval.map(|d| d.max(MIN_PROGRESS_INTERVAL)),
            phase: Phase::Start,
        };
        Box::pin(futures::stream::unfold(state, WatchState::next_item))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        if revision < 1 {
            // Nothing at or below revision 0 was ever written; etcd would accept this as a
            // no-op compaction, the contract calls it already compacted.
            let compacted = compacted_revision(self.watch.clone()).await.unwrap_or(0);
            return Err(StoreError::Compacted {
                requested: revision,
                compacted,
            });
        }
        match self.kv.clone().compact(revision, None).await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.revision_error(revision, revision, e).await),
        }
    }
}

/// The update or delete precondition failed: say whether the key is missing or modified, from
/// the `get` in the transaction's failure branch.
fn precondition_failed(key: &str, expected: Revision, resp: &TxnResponse) -> StoreError {
    let actual = resp.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.mod_revision()),
        _ => None,
    });
    match actual {
        Some(actual) => StoreError::Conflict {
            key: key.into(),
            expected,
            actual,
        },
        None => StoreError::NotFound { key: key.into() },
    }
}

/// The etcd range `[start, end)` of every key under `prefix`. The empty prefix is the whole
/// keyspace, `["\0", "\0")` in etcd's notation (an end of `"\0"` means "no end").
fn prefix_range(prefix: &str) -> (Vec<u8>, Vec<u8>) {
    let start = prefix.as_bytes().to_vec();
    if start.is_empty() {
        return (vec![0], vec![0]);
    }
    let mut end = start.clone();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return (start, end);
        }
    }
    // The prefix is all 0xff bytes: every key from it onwards.
    (start, vec![0])
}

fn header_revision(
    header: Option<&etcd_client::ResponseHeader>,
    endpoints: &str,
) -> Result<Revision> {
    header.map(|h| h.revision()).ok_or_else(|| {
        StoreError::Backend(format!("etcd at {endpoints}: response without a header"))
    })
}

fn convert_kv(kv: etcd_client::KeyValue, endpoints: &str) -> Result<KeyValue> {
    let create_revision = kv.create_revision();
    let mod_revision = kv.mod_revision();
    let (key, value) = kv.into_key_value();
    let key = String::from_utf8(key).map_err(|e| {
        StoreError::Backend(format!(
            "etcd at {endpoints}: key {:?} is not UTF-8",
            String::from_utf8_lossy(e.as_bytes())
        ))
    })?;
    Ok(KeyValue {
        key,
        value: Bytes::from(value),
        create_revision,
        mod_revision,
    })
}

/// Which failures [`retry`] sends a request again after.
#[derive(Clone, Copy)]
enum Unreached {
    /// The request reached no member: the connection to the one the client's balancer picked
    /// could not be made (that member is down). Safe for writes: nothing was applied.
    Member,
    /// No answer came (reads: asking again changes nothing).
    Answer,
}

/// How often a request is sent again: with one of three members down, the balancer picks the
/// dead one about one time in three, so six more tries miss about once in a thousand.
const RETRIES: u32 = 6;

/// Runs `op`, and again (up to [`RETRIES`] times, 20 ms apart and more) after a failure of
/// the kind `when`. etcd-client's channel balances over every endpoint and does not set a
/// dead one aside, so without this a member down fails a share of all requests.
async fn retry<T, F, Fut>(when: Unreached, mut op: F) -> std::result::Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Err(e) if attempt < RETRIES && is_unreached(&e, when) => {
                attempt += 1;
                tracing::debug!(attempt, error = %e, "etcd member unreachable; trying again");
                tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt))).await;
            }
            other => return other,
        }
    }
}

fn is_unreached(e: &etcd_client::Error, when: Unreached) -> bool {
    let etcd_client::Error::GRpcStatus(status) = e else {
        return matches!(e, etcd_client::Error::TransportError(_))
            && matches!(when, Unreached::Answer);
    };
    if status.code() != tonic::Code::Unavailable {
        return false;
    }
    match when {
        Unreached::Answer => true,
        Unreached::Member => connect_failed(status),
    }
}

/// Whether the status is a connection that could not be made (tonic's "tcp connect error"
/// or a `ConnectError` in its sources), as opposed to one lost after sending.
fn connect_failed(status: &tonic::Status) -> bool {
    if status.message().contains("tcp connect error") {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(s) = source {
        if format!("{s:?}").starts_with("ConnectError") {
            return true;
        }
        source = s.source();
    }
    false
}

fn backend_error(endpoints: &str, e: &etcd_client::Error) -> StoreError {
    let msg = e.to_string();
    if msg.contains("request is too large") {
        return StoreError::InvalidArgument(format!("etcd at {endpoints}: {msg}"));
    }
    StoreError::Backend(format!("etcd at {endpoints}: {msg}"))
}

enum ErrorKind {
    Compacted,
    Future,
    Other,
}

fn classify_message(msg: &str) -> ErrorKind {
    if msg.contains("required revision has been compacted") {
        ErrorKind::Compacted
    } else if msg.contains("required revision is a future revision") {
        ErrorKind::Future
    } else {
        ErrorKind::Other
    }
}

fn classify(e: &etcd_client::Error) -> ErrorKind {
    match e {
        etcd_client::Error::GRpcStatus(status) => classify_message(status.message()),
        _ => ErrorKind::Other,
    }
}

/// Asks etcd for its compacted revision: a watch from revision 1 is refused with it. `None`
/// if etcd does not say in time (e.g. because nothing was compacted).
async fn compacted_revision(mut client: WatchClient) -> Option<Revision> {
    let lookup = async move {
        let options = EtcdWatchOptions::new().with_start_revision(1);
        let mut stream = client.watch(vec![0u8], Some(options)).await.ok()?;
        while let Some(resp) = stream.message().await.ok()? {
            if resp.compact_revision() > 0 {
                return Some(resp.compact_revision());
            }
            if resp.canceled() {
                return None;
            }
        }
        None
    };
    tokio::time::timeout(COMPACTED_LOOKUP_TIMEOUT, lookup)
        .await
        .ok()
        .flatten()
}

/// The state of one [`Store::watch`] stream.
struct WatchState {
    client: WatchClient,
    endpoints: Arc<str>,
    key: Vec<u8>,
    range_end: Vec<u8>,
    after: Revision,
    progress_interval: Option<Duration>,
    phase: Phase,
}

enum Phase {
    /// Not polled yet: the etcd watch is opened on first poll.
    Start,
    Live(Box<LiveWatch>),
    /// The error (or the end) has been delivered.
    Finished,
}

/// An open etcd watch.
struct LiveWatch {
    stream: EtcdWatchStream,
    /// For looking up the compacted revision.
    client: WatchClient,
    endpoints: Arc<str>,
    after: Revision,
    /// Set by etcd's "created" answer.
    watch_id: Option<i64>,
    /// When etcd created the watch.
    created_at: Instant,
    /// When etcd last sent events (or created the watch).
    last_batch_at: Instant,
    /// Whether the history to catch up on is longer than etcd sends at once.
    long_history: bool,
    /// The watch must catch up on history before it may report progress (see module docs).
    catching_up: bool,
    ticker: Option<Interval>,
    probe: Probe,
    /// Items ready to be delivered. An `Err` is always the last.
    queue: VecDeque<Result<WatchItem>>,
    /// The revision of the last event delivered (`after` before the first).
    last_event: Revision,
    /// The last progress revision delivered (0 before the first).
    last_progress: Revision,
    /// Set once an error is queued: nothing more may be queued.
    failed: bool,
}

/// Where the current progress confirmation stands.
#[derive(Clone, Copy, Debug)]
enum Probe {
    Idle,
    /// The first request is out.
    First {
        sent_at: Instant,
        ticks: u32,
    },
    /// The first answer said `candidate`; the confirming request is out.
    Second {
        sent_at: Instant,
        candidate: Revision,
        ticks: u32,
    },
}

impl WatchState {
    async fn next_item(mut self) -> Option<(Result<WatchItem>, WatchState)> {
        loop {
            match &mut self.phase {
                Phase::Finished => return None,
                Phase::Start => match self.open().await {
                    Ok(live) => self.phase = Phase::Live(Box::new(live)),
                    Err(e) => {
                        self.phase = Phase::Finished;
                        return Some((Err(e), self));
                    }
                },
                Phase::Live(live) => {
                    if let Some(item) = live.queue.pop_front() {
                        if item.is_err() {
                            self.phase = Phase::Finished;
                        }
                        return Some((item, self));
                    }
                    live.step().await;
                }
            }
        }
    }

    async fn open(&mut self) -> Result<LiveWatch> {
        if self.after < 0 {
            return Err(StoreError::InvalidArgument(format!(
                "watch after negative revision {}",
                self.after
            )));
        }
        // Start at `after` rather than `after + 1`: etcd then refuses the watch exactly when
        // `after` is older than the compacted revision. The event at `after` is dropped.
        // (Revision 0 would mean "from now" to etcd.)
        let mut options = EtcdWatchOptions::new()
            .with_range(self.range_end.clone())
            .with_start_revision(self.after.max(1))
            .with_prev_key();
        if self.progress_interval.is_some() {
            // etcd's own periodic progress notifications are ordered with the events; take them
            // too (every 10 minutes unless the server is configured otherwise).
            options = options.with_progress_notify();
        }
        let stream = retry(Unreached::Answer, || {
            let (mut client, key, options) =
                (self.client.clone(), self.key.clone(), options.clone());
            async move { client.watch(key, Some(options)).await }
        })
        .await
        .map_err(|e| backend_error(&self.endpoints, &e))?;
        let ticker = self.progress_interval.map(|d| {
            let mut t = tokio::time::interval_at(Instant::now() + d, d);
            t.set_missed_tick_behavior(MissedTickBehavior::Delay);
            t
        });
        Ok(LiveWatch {
            stream,
            client: self.client.clone(),
            endpoints: self.endpoints.clone(),
            after: self.after,
            watch_id: None,
            created_at: Instant::now(),
            last_batch_at: Instant::now(),
            long_history: false,
            catching_up: false,
            ticker,
            probe: Probe::Idle,
            queue: VecDeque::new(),
            last_event: self.after,
            last_progress: 0,
            failed: false,
        })
    }
}

async fn tick(ticker: &mut Option<Interval>) {
    match ticker {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending::<()>().await,
    }
}

impl LiveWatch {
    /// Waits for the next etcd answer or progress tick and queues what it yields.
    async fn step(&mut self) {
        tokio::select! {
            biased;
            msg = self.stream.next() => match msg {
                Some(Ok(resp)) => self.on_response(resp).await,
                Some(Err(e)) => self.fail(backend_error(&self.endpoints, &e)),
                None => self.fail(StoreError::Backend(format!(
                    "etcd at {}: the watch stream was closed by the server",
                    self.endpoints
                ))),
            },
            () = tick(&mut self.ticker) => self.on_tick().await,
        }
    }

    fn fail(&mut self, e: StoreError) {
        if !self.failed {
            self.failed = true;
            self.queue.push_back(Err(e));
        }
    }

    fn push(&mut self, item: WatchItem) {
        if !self.failed {
            self.queue.push_back(Ok(item));
        }
    }

    /// The revision the watch has caught up to, as far as the consumer knows.
    fn position(&self) -> Revision {
        self.last_event.max(self.last_progress)
    }

    async fn on_response(&mut self, resp: EtcdWatchResponse) {
        if resp.compact_revision() > 0 {
            self.fail(StoreError::Compacted {
                requested: self.last_event,
                compacted: resp.compact_revision(),
            });
            return;
        }
        if resp.created() {
            if resp.canceled() {
                self.fail(self.cancel_error(&resp).await);
                return;
            }
            let revision = resp.header().map_or(0, |h| h.revision());
            self.watch_id = Some(resp.watch_id());
            // etcd holds the watch as "synced" only if it starts after its current revision;
            // otherwise it first sends history in the background.
            let start = self.after.max(1);
            self.catching_up = start <= revision;
            self.long_history = revision - start >= HISTORY_BATCH_REVISIONS;
            self.created_at = Instant::now();
            self.last_batch_at = self.created_at;
            return;
        }
        if resp.canceled() {
            self.fail(self.cancel_error(&resp).await);
            return;
        }
        if resp.events().is_empty() {
            let revision = resp.header().map_or(0, |h| h.revision());
            if self.watch_id.is_some() && Some(resp.watch_id()) == self.watch_id {
                // etcd's own periodic notification, sent in order with the events.
                self.emit_progress(revision);
            } else {
                self.on_progress_answer(revision).await;
            }
            return;
        }
        self.last_batch_at = Instant::now();
        for ev in resp.events() {
            if self.failed {
                return;
            }
            match self.convert_event(ev).await {
                Ok(Some(event)) => {
                    self.last_event = event.revision();
                    self.push(WatchItem::Event(event));
                }
                Ok(None) => {}
                Err(e) => self.fail(e),
            }
        }
    }

    async fn cancel_error(&self, resp: &EtcdWatchResponse) -> StoreError {
        let reason = resp.cancel_reason();
        match classify_message(reason) {
            ErrorKind::Compacted => StoreError::Compacted {
                requested: self.last_event,
                compacted: compacted_revision(self.client.clone())
                    .await
                    .unwrap_or(self.last_event + 1),
            },
            ErrorKind::Future => StoreError::FutureRevision {
                requested: self.last_event + 1,
                current: resp.header().map_or(0, |h| h.revision()),
            },
            ErrorKind::Other if reason.is_empty() => StoreError::Backend(format!(
                "etcd at {}: the watch was canceled by the server",
                self.endpoints
            )),
            ErrorKind::Other => StoreError::Backend(format!(
                "etcd at {}: watch canceled: {reason}",
                self.endpoints
            )),
        }
    }

    /// Converts one etcd event; `None` for an event this watch must not deliver (the one at
    /// `after`, see [`WatchState::open`]).
    async fn convert_event(&self, ev: &etcd_client::Event) -> Result<Option<Event>> {
        let endpoints = &*self.endpoints;
        let Some(kv) = ev.kv() else {
            return Err(StoreError::Backend(format!(
                "etcd at {endpoints}: watch event without a key"
            )));
        };
        let revision = kv.mod_revision();
        if revision <= self.after {
            return Ok(None);
        }
        if revision < self.last_event {
            return Err(StoreError::Backend(format!(
                "etcd at {endpoints}: watch event at revision {revision} after one at {}",
                self.last_event
            )));
        }
        if revision <= self.last_progress {
            tracing::warn!(
                endpoints,
                revision,
                progress = self.last_progress,
                "etcd delivered a watch event after a progress notification that covered it \
                 (etcd issue #15220, fixed in etcd 3.4.25/3.5.8); ending the watch so the \
                 watcher lists again"
            );
            return Err(StoreError::WatcherTooSlow { buffered: 0 });
        }
        // etcd marks a deletion by a zero create revision (the event type says the same).
        let kind = if kv.create_revision() == 0 {
            EventKind::Delete
        } else {
            EventKind::Put
        };
        let prev = match ev.prev_kv() {
            Some(p) => Some(convert_kv(p.clone(), endpoints)?),
            None => None,
        };
        // A deletion always has a previous value, and so does a put that is not the key's
        // first (version 1). etcd leaves it out only when revision - 1 has been compacted.
        if prev.is_none() && (kind == EventKind::Delete || kv.version() > 1) {
            return Err(StoreError::Compacted {
                requested: revision - 1,
                compacted: compacted_revision(self.client.clone())
                    .await
                    .unwrap_or(revision),
            });
        }
        let key = convert_kv(kv.clone(), endpoints)?;
        let kv = match kind {
            EventKind::Put => key,
            EventKind::Delete => KeyValue {
                key: key.key,
                value: Bytes::new(),
                create_revision: 0,
                mod_revision: revision,
            },
        };
        Ok(Some(Event { kind, kv, prev }))
    }

    fn emit_progress(&mut self, revision: Revision) {
        if revision >= self.position() && revision >= self.after {
            self.last_progress = revision;
            self.push(WatchItem::Progress(revision));
        }
    }

    async fn on_tick(&mut self) {
        if self.watch_id.is_none() || self.failed {
            return;
        }
        match &mut self.probe {
            Probe::Idle => self.request_progress().await,
            Probe::First { ticks, .. } | Probe::Second { ticks, .. } => {
                *ticks += 1;
                if *ticks >= PROGRESS_RETRY_TICKS {
                    // The answer is overdue (newer etcd answers only once the watch has caught
                    // up); ask again from the start.
                    self.request_progress().await;
                }
            }
        }
    }

    async fn request_progress(&mut self) {
        match self.stream.request_progress().await {
            Ok(()) => {
                self.probe = Probe::First {
                    sent_at: Instant::now(),
                    ticks: 0,
                }
            }
            Err(e) => self.fail(backend_error(&self.endpoints, &e)),
        }
    }

    /// An answer to a progress request: confirm it with a second request, report it when that
    /// is answered (see the module docs).
    async fn on_progress_answer(&mut self, revision: Revision) {
        match self.probe {
            // An answer to a request given up on; the new one is still out.
            Probe::Idle => {}
            Probe::First { sent_at, .. } => match self.stream.request_progress().await {
                Ok(()) => {
                    self.probe = Probe::Second {
                        sent_at,
                        candidate: revision,
                        ticks: 0,
                    }
                }
                Err(e) => self.fail(backend_error(&self.endpoints, &e)),
            },
            Probe::Second {
                sent_at, candidate, ..
            } => {
                self.probe = Probe::Idle;
                if self.catching_up {
                    // A short history has been sent within a few of etcd's 100 ms rounds; a
                    // long one only when etcd has gone quiet (no events since either).
                    let since = if self.long_history {
                        self.last_batch_at
                    } else {
                        self.created_at
                    };
                    if sent_at < since + CATCH_UP_QUIET {
                        return;
                    }
                    self.catching_up = false;
                }
                self.emit_progress(candidate);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_that_reached_no_member_are_written_again() {
        let e = |s: tonic::Status| etcd_client::Error::GRpcStatus(s);
        let refused = e(tonic::Status::unavailable("tcp connect error"));
        let timed_out = e(tonic::Status::unavailable("etcdserver: request timed out"));
        let missing = e(tonic::Status::not_found("nope"));
        assert!(is_unreached(&refused, Unreached::Member));
        assert!(is_unreached(&refused, Unreached::Answer));
        assert!(
            !is_unreached(&timed_out, Unreached::Member),
            "may have been applied"
        );
        assert!(is_unreached(&timed_out, Unreached::Answer));
        assert!(!is_unreached(&missing, Unreached::Answer));
    }

    #[test]
    fn endpoints_are_split_and_trimmed() {
        assert_eq!(
            parse_endpoints(" http://a:2379, http://b:2379,,"),
            vec!["http://a:2379".to_string(), "http://b:2379".to_string()]
        );
        assert!(parse_endpoints("").is_empty());
    }

    #[test]
    fn prefix_ranges() {
        assert_eq!(prefix_range(""), (vec![0], vec![0]));
        assert_eq!(prefix_range("/a/"), (b"/a/".to_vec(), b"/a0".to_vec()));
        assert_eq!(prefix_range("ab"), (b"ab".to_vec(), b"ac".to_vec()));
    }

    #[test]
    fn etcd_messages_are_classified() {
        assert!(matches!(
            classify_message("etcdserver: mvcc: required revision has been compacted"),
            ErrorKind::Compacted
        ));
        assert!(matches!(
            classify_message("etcdserver: mvcc: required revision is a future revision"),
            ErrorKind::Future
        ));
        assert!(matches!(classify_message("no leader"), ErrorKind::Other));
    }
}
