//! Generic REST storage: get, list, create, update, patch, delete and watch of any resource
//! in the [`Registry`], over the [`Store`] trait, with kube-apiserver's semantics (metadata,
//! resourceVersion rules, preconditions, finalizers, graceful deletion, status split).
//!
//! Objects are JSON (`serde_json::Value`) in the store, without `resourceVersion` (it is the
//! key's modify revision and is filled in on every read, as upstream's etcd3 storage does).
//! The JSON passes through the encryption [`Transformer`] on its way in and out
//! ([`Rest::encode_stored`], [`Rest::decode_stored`]), so resources the encryption
//! configuration names are stored encrypted.
//! This layer knows nothing of HTTP: the HTTP handlers in [`crate::http`] and the in-process
//! client both call it.

pub mod conversion;
mod decoded;
mod events;
pub mod fields;
pub(crate) mod label_selector;
pub mod meta;
mod overlay;
pub mod patch;
mod reader;
mod remembered;
mod side_effects;
pub(crate) mod strategy;
mod subresources;
pub mod validation;
mod watch;
mod write;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use k1s_api::selector::{FieldSelector, LabelSelector};
use k1s_store::{KeyValue, ListRequest, Revision, Store, StoreError};
use serde_json::Value;

use crate::encryption::Transformer;
use crate::registry::{Registry, ResourceType};
use crate::status::ApiError;
pub(crate) use overlay::{Overlay, Put, Puts};

pub use crate::registry::core::service::allocator::ServiceNetwork;
pub use subresources::scale_of;
pub use watch::{WatchEvent, WatchRequest};
pub use write::{DeleteOptions, Deleted, FieldValidation, WriteOptions, Written};

/// How many keys one store read fetches while filling a filtered page.
const LIST_BATCH: usize = 500;
/// How long a read for a future resourceVersion waits before answering 504.
const FUTURE_RV_WAIT: Duration = Duration::from_secs(3);

/// The generic storage of every resource.
pub struct Rest {
    pub store: Arc<dyn Store>,
    pub registry: Arc<Registry>,
    /// Where Service ClusterIPs and NodePorts come from.
    pub services: ServiceNetwork,
    /// The admission plugins, set once when the server is assembled (none: admit all).
    pub admission: std::sync::OnceLock<Arc<dyn crate::admission::Admission>>,
    /// The kubelet of this server's own node, for pods' log/exec/attach/portforward and the
    /// node proxy. Weak: the kubelet holds a client of this `Rest`, and a strong reference
    /// here would keep both (and the store) alive after shutdown.
    node_streams: std::sync::OnceLock<std::sync::Weak<dyn k1s_api::streams::NodeStreams>>,
    /// How remote nodes' kubelets are dialled (set when serving HTTPS with a cluster CA).
    kubelets: std::sync::OnceLock<crate::kubelet_client::KubeletDialer>,
    /// Encryption at rest: what stands between objects and stored bytes.
    pub encryption: Arc<Transformer>,
    /// Stored objects decoded once for the watches, reads and small lists that need them.
    decoded: decoded::Decoded,
    /// The lists admission reads on every create, between writes to them.
    remembered: Arc<remembered::Remembered>,
}

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RvMatch {
    NotOlderThan,
    Exact,
}

/// The options of a list (the query parameters of a LIST request).
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub label_selector: LabelSelector,
    pub field_selector: FieldSelector,
    /// 0: no limit.
    pub limit: usize,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<RvMatch>,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub items: Vec<Value>,
    pub resource_version: Revision,
    pub continue_token: Option<String>,
    /// Items left after this page, when known (unfiltered lists only).
    pub remaining: Option<i64>,
}

/// The position a continue token encodes.
#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: Revision,
    start: String,
    /// Objects after `start` at `rv` (unfiltered lists), carried so later pages need not
    /// count them again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    left: Option<i64>,
}

impl ContinueToken {
    fn encode(rv: Revision, start: &str, left: Option<i64>) -> String {
        let t = ContinueToken {
            v: "meta.k8s.io/v1".into(),
            rv,
            start: start.into(),
            left,
        };
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(serde_json::to_vec(&t).unwrap_or_default())
    }

    fn decode(s: &str, prefix: &str) -> Result<Self, ApiError> {
        let bad = || {
            ApiError::bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            )
        };
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s.trim_end_matches('='))
            .map_err(|_| bad())?;
        let t: ContinueToken = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        if t.v != "meta.k8s.io/v1" || t.rv <= 0 || !t.start.starts_with(prefix) {
            return Err(bad());
        }
        Ok(t)
    }
}

impl Rest {
    pub fn new(store: Arc<dyn Store>, registry: Arc<Registry>, services: ServiceNetwork) -> Self {
        let remembered = Arc::new(remembered::Remembered::new(
            [
                ("", "LimitRange"),
                ("", "ResourceQuota"),
                ("scheduling.k8s.io", "PriorityClass"),
                // Read by name on every pod create (NamespaceLifecycle, pod security; the
                // pod's ServiceAccount): see `get_remembered`.
                ("", "Namespace"),
                ("", "ServiceAccount"),
                // Read on every write by the webhook admission plugins.
                (
                    "admissionregistration.k8s.io",
                    "MutatingWebhookConfiguration",
                ),
                (
                    "admissionregistration.k8s.io",
                    "ValidatingWebhookConfiguration",
                ),
            ]
            .into_iter()
            .filter_map(|(group, kind)| registry.builtin_kind(group, kind))
            .map(|res| res.namespace_prefix(None))
            .collect(),
        ));
        let store = Arc::new(remembered::Noting {
            inner: store,
            remembered: remembered.clone(),
        });
        Self {
            store,
            registry,
            services,
            admission: std::sync::OnceLock::new(),
            node_streams: std::sync::OnceLock::new(),
            kubelets: std::sync::OnceLock::new(),
            encryption: Arc::new(Transformer::identity()),
            decoded: decoded::Decoded::default(),
            remembered,
        }
    }

    /// Routes pods' streams and the node proxy of `streams.node_name()` to `streams` (the
    /// server's own kubelet; set once). The caller keeps `streams` alive: only a weak
    /// reference is kept here.
    pub fn set_node_streams(&self, streams: &Arc<dyn k1s_api::streams::NodeStreams>) {
        let _ = self.node_streams.set(Arc::downgrade(streams));
    }

    /// Reaches the kubelets of other nodes with `dialer` (set once).
    pub fn set_kubelet_dialer(&self, dialer: crate::kubelet_client::KubeletDialer) {
        let _ = self.kubelets.set(dialer);
    }

    /// The kubelet of `node`: the in-process one if this server runs it, else the node's
    /// kubelet over HTTPS (`Err`: NotFound for an unknown node, else why it cannot be
    /// reached).
    pub async fn node_streams(
        &self,
        node: &str,
    ) -> Result<Arc<dyn k1s_api::streams::NodeStreams>, ApiError> {
        let no_route = |why: &dyn std::fmt::Display| {
            ApiError::new(
                503,
                "ServiceUnavailable",
                format!("no route to the kubelet of node {node:?}: {why}"),
            )
        };
        if let Some(local) = self
            .node_streams
            .get()
            .and_then(std::sync::Weak::upgrade)
            .filter(|k| k.node_name() == node)
        {
            return Ok(local);
        }
        let nodes = self
            .registry
            .builtin_kind("", "Node")
            .ok_or_else(ApiError::no_route)?;
        let obj = self.get(&nodes, None, node).await?;
        let Some(dialer) = self.kubelets.get() else {
            return Err(no_route(&"this server reaches no remote kubelets"));
        };
        dialer.kubelet(&obj).map_err(|e| no_route(&e))
    }

    /// The same storage, with objects stored through `encryption`.
    pub fn with_encryption(mut self, encryption: Arc<Transformer>) -> Self {
        self.encryption = encryption;
        self
    }

    /// Reads one object.
    pub async fn get(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let (obj, _) = self.get_with_rev(res, ns, name).await?;
        Ok(obj)
    }

    /// Reads one object and its modify revision, to change it: a copy of the decoded object
    /// where a watch or read already decoded this revision, decoded anew (and not kept) if not.
    pub(crate) async fn get_with_rev(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<(Value, Revision), ApiError> {
        let kv = self.get_stored(res, ns, name).await?;
        let obj = match self
            .decoded
            .get(kv.mod_revision, &kv.key, &res.group, &res.version)
        {
            Some(shared) => Value::clone(&shared),
            None => self.decode_stored(res, &kv.key, &kv.value, kv.mod_revision)?,
        };
        Ok((self.to_served(res, obj).await?, kv.mod_revision))
    }

    /// Reads one object to look at it, shared with every other reader of the same revision:
    /// for what the server reads on many requests (a pod's namespace, ServiceAccount and
    /// PriorityClass in admission).
    pub(crate) async fn get_shared(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Arc<Value>, ApiError> {
        Ok(self.get_shared_with_rev(res, ns, name).await?.0)
    }

    /// [`Rest::get_shared`] with the object's revision: for a write that encodes its change
    /// over the shared object (see [`Rest::encode_stored_with`]) instead of changing a copy.
    pub(crate) async fn get_shared_with_rev(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<(Arc<Value>, Revision), ApiError> {
        let kv = self.get_stored(res, ns, name).await?;
        Ok((self.decode_shared(res, &kv)?, kv.mod_revision))
    }

    /// The stored key and value of one object; 404 if there is none.
    async fn get_stored(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<KeyValue, ApiError> {
        self.store
            .get(&res.key(ns, name))
            .await?
            .ok_or_else(|| ApiError::not_found(res, name))
    }

    /// Every object of `res` (in `ns`) now, shared as [`Rest::get_shared`]'s are: for the few
    /// objects admission lists on every create (PriorityClasses, LimitRanges, quotas), which
    /// are remembered between writes to them (see [`remembered`]).
    pub(crate) async fn list_shared(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
    ) -> Result<Vec<Arc<Value>>, ApiError> {
        let prefix = res.namespace_prefix(ns);
        let reading = match self.remembered.get(&prefix) {
            Ok(items) => return Ok(items),
            Err(reading) => reading,
        };
        let items = self.read_shared(res, ns, &prefix).await?;
        if let Some(reading) = reading {
            self.remembered.keep(&prefix, reading, items.clone());
        }
        Ok(items)
    }

    /// One object of a remembered kind (namespaces, ServiceAccounts, PriorityClasses), shared
    /// as [`Rest::get_shared`]'s are, or 404; remembered, absence included, between writes to
    /// the kind as [`Rest::list_shared`]'s lists are (kept as a list of at most one object under
    /// the object's key). Other kinds are read from the store each time.
    pub(crate) async fn get_remembered(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Arc<Value>, ApiError> {
        let key = res.key(ns, name);
        let reading = match self.remembered.get(&key) {
            Ok(found) => {
                return found
                    .into_iter()
                    .next()
                    .ok_or_else(|| ApiError::not_found(res, name));
            }
            Err(reading) => reading,
        };
        let found = match self.get_shared(res, ns, name).await {
            Ok(o) => Some(o),
            Err(e) if e.code == 404 => None,
            Err(e) => return Err(e),
        };
        if let Some(reading) = reading {
            self.remembered
                .keep(&key, reading, found.iter().cloned().collect());
        }
        found.ok_or_else(|| ApiError::not_found(res, name))
    }

    /// Forgets the list of `res` in `ns` that [`Rest::list_shared`] remembers: the caller
    /// found it stale (a write it made conflicted).
    pub(crate) fn forget_shared_list(&self, res: &ResourceType, ns: Option<&str>) {
        self.remembered.forget(&res.namespace_prefix(ns));
    }

    /// Reads the list of [`Rest::list_shared`] from the store.
    async fn read_shared(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        prefix: &str,
    ) -> Result<Vec<Arc<Value>>, ApiError> {
        let mut req = ListRequest {
            prefix: prefix.to_owned(),
            // Small pages: a small read of the current state is served without a trip through
            // the store's blocking pool, and there are nearly always a few of these or none.
            limit: k1s_store::SMALL_LIST_LIMIT,
            ..Default::default()
        };
        let mut items = Vec::new();
        loop {
            let page = self.store.list(req.clone()).await?;
            for kv in &page.kvs {
                if is_direct_child(prefix, &kv.key, res, ns) {
                    items.push(self.decode_shared(res, kv)?);
                }
            }
            match page.kvs.last() {
                Some(last) if page.more => {
                    req.start_after = Some(last.key.clone());
                    req.revision = Some(page.revision);
                }
                _ => return Ok(items),
            }
        }
    }

    pub(crate) fn decode_shared(
        &self,
        res: &ResourceType,
        kv: &KeyValue,
    ) -> Result<Arc<Value>, ApiError> {
        self.decoded
            .get_or_decode(kv.mod_revision, &kv.key, &res.group, &res.version, || {
                self.decode_stored(res, &kv.key, &kv.value, kv.mod_revision)
            })
    }

    /// Lists objects with selectors, pagination and the resourceVersion rules of upstream.
    pub async fn list(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListPage, ApiError> {
        let mut page = self.list_stored(res, ns, opts).await?;
        if conversion::by_webhook(res) {
            page.items = self.to_served_all(res, page.items).await?;
        }
        Ok(page)
    }

    /// [`Rest::list`] of the objects as decoded from the store (before a conversion webhook).
    async fn list_stored(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListPage, ApiError> {
        fields::check(res, &opts.field_selector)?;
        // A cluster-wide list that pins the namespace reads only that namespace's keys.
        let ns = ns.or(if res.namespaced {
            opts.field_selector.required("metadata.namespace")
        } else {
            None
        });
        let prefix = res.namespace_prefix(ns);
        let mut left_before: Option<i64> = None;
        let (mut start_after, revision) = match &opts.continue_token {
            Some(token) => {
                if opts
                    .resource_version
                    .as_deref()
                    .is_some_and(|rv| !rv.is_empty())
                {
                    return Err(ApiError::bad_request(
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                let t = ContinueToken::decode(token, &prefix)?;
                left_before = t.left;
                (Some(t.start), Some(t.rv))
            }
            None => (None, self.list_revision(opts).await?),
        };
        let mut items = Vec::new();
        let mut revision = revision;
        let filtered = !opts.label_selector.is_empty() || !opts.field_selector.is_empty();
        loop {
            let want = if opts.limit == 0 {
                0
            } else if filtered {
                LIST_BATCH.max(opts.limit - items.len())
            } else {
                opts.limit - items.len()
            };
            let resp = self
                .store
                .list(ListRequest {
                    prefix: prefix.clone(),
                    start_after: start_after.clone(),
                    limit: want,
                    revision,
                })
                .await
                .map_err(|e| match e {
                    StoreError::Compacted { .. } if opts.continue_token.is_some() => ApiError::new(
                        410,
                        "Expired",
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    ),
                    StoreError::Compacted { .. } => ApiError::new(
                        410,
                        "Expired",
                        "The resourceVersion for the provided list is too old.",
                    ),
                    other => other.into(),
                })?;
            revision = Some(resp.revision);
            let n = resp.kvs.len();
            for (i, kv) in resp.kvs.into_iter().enumerate() {
                if !is_direct_child(&prefix, &kv.key, res, ns) {
                    continue;
                }
                let obj = self.decode_stored(res, &kv.key, &kv.value, kv.mod_revision)?;
                if opts.label_selector.matches_json(&obj)
                    && fields::matches(res, &opts.field_selector, &obj)
                {
                    items.push(obj);
                }
                if opts.limit > 0 && items.len() >= opts.limit {
                    let more = resp.more || i + 1 < n;
                    let remaining = if more && !filtered {
                        self.remaining(
                            &prefix,
                            left_before,
                            &opts.continue_token,
                            items.len(),
                            &kv.key,
                            resp.revision,
                        )
                        .await
                    } else {
                        None
                    };
                    let token =
                        more.then(|| ContinueToken::encode(resp.revision, &kv.key, remaining));
                    return Ok(ListPage {
                        items,
                        resource_version: resp.revision,
                        continue_token: token,
                        remaining,
                    });
                }
                start_after = Some(kv.key);
            }
            if !resp.more {
                return Ok(ListPage {
                    items,
                    resource_version: resp.revision,
                    continue_token: None,
                    remaining: None,
                });
            }
        }
    }

    /// `remainingItemCount` of an unfiltered page of `returned` objects ending at `after`:
    /// from the previous page's token; on a first page from the store's key count when it is
    /// at the page's revision; otherwise by reading the rest of the range.
    async fn remaining(
        &self,
        prefix: &str,
        left_before: Option<i64>,
        continued: &Option<String>,
        returned: usize,
        after: &str,
        rev: Revision,
    ) -> Option<i64> {
        let returned = i64::try_from(returned).ok()?;
        if let Some(left) = left_before {
            return Some(left - returned);
        }
        if continued.is_none()
            && let Ok((total, at)) = self.store.count(prefix).await
            && at == rev
        {
            return Some(i64::try_from(total).ok()? - returned);
        }
        let resp = self
            .store
            .list(ListRequest {
                prefix: prefix.to_owned(),
                start_after: Some(after.to_owned()),
                limit: 0,
                revision: Some(rev),
            })
            .await
            .ok()?;
        i64::try_from(resp.kvs.len()).ok()
    }

    /// The revision a list without a continue token reads at.
    async fn list_revision(&self, opts: &ListOptions) -> Result<Option<Revision>, ApiError> {
        let rv = opts.resource_version.as_deref().unwrap_or("");
        let parsed = meta::parse_resource_version(rv)?;
        match (parsed, opts.resource_version_match) {
            (None, Some(_)) => Err(ApiError::bad_request(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            )),
            (Some(0), Some(RvMatch::Exact)) => Err(ApiError::bad_request(
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            )),
            (None | Some(0), _) => Ok(None),
            (Some(rv), Some(RvMatch::Exact)) => Ok(Some(rv)),
            (Some(rv), _) => {
                self.wait_for_revision(rv).await?;
                Ok(None)
            }
        }
    }

    /// Waits (briefly) until the store has reached `rv`, as upstream's watch cache does for a
    /// "not older than" read of a resourceVersion it has not seen yet.
    pub(crate) async fn wait_for_revision(&self, rv: Revision) -> Result<(), ApiError> {
        let deadline = tokio::time::Instant::now() + FUTURE_RV_WAIT;
        loop {
            let current = self.store.current_revision().await?;
            if current >= rv {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ApiError::new(
                    504,
                    "Timeout",
                    format!("Too large resource version: {rv}, current: {current}"),
                )
                .with_cause("ResourceVersionTooLarge", "Too large resource version")
                .retry_after(1));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Whether `key` (under `prefix`) is an object of this listing: for a cluster-wide list of a
/// namespaced resource, `<ns>/<name>`; otherwise a bare name.
fn is_direct_child(prefix: &str, key: &str, res: &ResourceType, ns: Option<&str>) -> bool {
    let rest = &key[prefix.len().min(key.len())..];
    let slashes = rest.matches('/').count();
    if res.namespaced && ns.is_none() {
        slashes == 1
    } else {
        slashes == 0
    }
}

impl Rest {
    /// Decodes the value stored under `key` (decrypting it if it is encrypted) and stamps its
    /// resourceVersion. A custom resource read through another served version of its CRD gets
    /// that version's `apiVersion` (conversion `None`) and that version's schema defaults.
    pub(crate) fn decode_stored(
        &self,
        res: &ResourceType,
        key: &str,
        bytes: &[u8],
        rev: Revision,
    ) -> Result<Value, ApiError> {
        let plain = self.encryption.transform_from_storage(key, bytes)?;
        let mut obj: Value = serde_json::from_slice(&plain).map_err(|e| {
            ApiError::new(
                500,
                "InternalError",
                format!("stored object is not valid JSON: {e}"),
            )
        })?;
        meta::set_resource_version(&mut obj, rev);
        // A webhook-converted custom resource keeps its stored version here: the conversion
        // (and the defaults, which are the served version's) follow in `to_served`.
        if let Some(custom) = res.custom.as_ref().filter(|_| !conversion::by_webhook(res)) {
            obj["apiVersion"] = Value::String(res.api_version());
            // Defaults the schema gained after the object was written apply on read too, as
            // upstream's (an unstructured defaulter runs when objects come from storage).
            if let Some(schema) = &custom.schema {
                schema.default(&mut obj);
            }
        }
        if events::needs_conversion(&obj, &res.kind, &res.api_version()) {
            obj = events::convert(obj, &res.api_version());
        }
        Ok(obj)
    }

    /// Encodes an object for the store under `key`: without its resourceVersion, encrypted if
    /// the encryption configuration says so.
    pub(crate) fn encode_stored(&self, key: &str, obj: &Value) -> Result<bytes::Bytes, ApiError> {
        match obj.as_object() {
            Some(m) => self.encode_stored_with(key, m, Vec::new(), Vec::new()),
            None => self.encode_plain(key, obj),
        }
    }

    /// Encodes `obj` with `puts` laid over it and `meta_puts` over its metadata (see
    /// [`overlay`]) as [`Rest::encode_stored`] would encode the changed copy.
    pub(crate) fn encode_stored_with<'a>(
        &self,
        key: &str,
        obj: &'a serde_json::Map<String, Value>,
        meta_puts: Puts<'a>,
        puts: Puts<'a>,
    ) -> Result<bytes::Bytes, ApiError> {
        self.encode_plain(key, &stored(obj, meta_puts, puts))
    }

    fn encode_plain(&self, key: &str, v: &impl serde::Serialize) -> Result<bytes::Bytes, ApiError> {
        let plain = serde_json::to_vec(v).unwrap_or_default();
        Ok(bytes::Bytes::from(
            self.encryption.transform_to_storage(key, plain)?,
        ))
    }
}

/// Metadata fields the store does not keep.
const NOT_STORED: [&str; 2] = ["resourceVersion", "selfLink"];

/// An object as stored: without `metadata.resourceVersion` and `selfLink`, with `puts` laid
/// over it and `meta_puts` over its metadata, without copying it first. Metadata that is not
/// an object is written as it is (unless `meta_puts` replace it).
fn stored<'a>(
    obj: &'a serde_json::Map<String, Value>,
    meta_puts: Puts<'a>,
    mut puts: Puts<'a>,
) -> Overlay<'a> {
    let meta = obj.get("metadata").and_then(Value::as_object);
    if meta.is_some() || !meta_puts.is_empty() {
        let at = puts.partition_point(|(k, _)| *k < "metadata");
        let m = Overlay {
            base: meta,
            skip: &NOT_STORED,
            puts: meta_puts,
        };
        puts.insert(at, ("metadata", Put::Object(m)));
    }
    Overlay {
        base: Some(obj),
        skip: &[],
        puts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_foreign_prefixes() {
        let t = ContinueToken::encode(7, "/registry/core/configmaps/d/b", Some(3));
        let back = ContinueToken::decode(&t, "/registry/core/configmaps/").unwrap();
        assert_eq!(
            (back.rv, back.start.as_str()),
            (7, "/registry/core/configmaps/d/b")
        );
        assert!(ContinueToken::decode(&t, "/registry/core/secrets/").is_err());
        assert!(ContinueToken::decode("%%%", "/").is_err());
    }

    #[test]
    fn stored_objects_leave_out_resource_version_and_self_link_only() {
        let obj = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "12", "selfLink": "/x", "labels": {"resourceVersion": "kept"}},
            "data": {"selfLink": "kept"},
        });
        let written = |v: &Value| match v.as_object() {
            Some(m) => serde_json::to_vec(&stored(m, Vec::new(), Vec::new())).unwrap(),
            None => serde_json::to_vec(v).unwrap(),
        };
        let stored: Value = serde_json::from_slice(&written(&obj)).unwrap();
        let mut want = obj.clone();
        let m = want["metadata"].as_object_mut().unwrap();
        m.remove("resourceVersion");
        m.remove("selfLink");
        assert_eq!(stored, want);
        // Not an object, or metadata not an object: written as they are.
        for v in [serde_json::json!([1]), serde_json::json!({"metadata": "x"})] {
            assert_eq!(written(&v), serde_json::to_vec(&v).unwrap());
        }
    }

    #[test]
    fn direct_children_only() {
        let reg = Registry::new();
        let cm = reg.get("", "v1", "configmaps").unwrap();
        let p = cm.namespace_prefix(None);
        assert!(is_direct_child(&p, &format!("{p}ns/a"), &cm, None));
        assert!(!is_direct_child(&p, &format!("{p}a"), &cm, None));
        let p = cm.namespace_prefix(Some("ns"));
        assert!(is_direct_child(&p, &format!("{p}a"), &cm, Some("ns")));
    }
}
