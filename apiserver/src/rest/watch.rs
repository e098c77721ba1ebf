//! Watch: store events turned into Kubernetes watch events, with selectors (an object that
//! stops matching is DELETED, one that starts matching is ADDED), initial events, bookmarks
//! and 410 Expired when the requested history is gone.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k1s_api::selector::{FieldSelector, LabelSelector};
use k1s_store::{EventKind, Revision, StoreError, WatchItem, WatchOptions};
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{ListOptions, Rest, fields, is_direct_child, meta};
use crate::registry::ResourceType;
use crate::status::ApiError;

/// How often an idle watch that asked for bookmarks gets one.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(10);
/// Events buffered between the store and a slow client; beyond it the store ends the watch
/// (WatcherTooSlow → 410), so a stuck client never holds memory or writers back.
const CHANNEL_DEPTH: usize = 256;
/// Page size of the initial list.
const INITIAL_PAGE: usize = 500;
/// Upstream's `--min-request-timeout`: watches without `timeoutSeconds` end after 1–2 times it.
const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);

/// The parameters of a WATCH request.
#[derive(Debug, Clone, Default)]
pub struct WatchRequest {
    pub label_selector: LabelSelector,
    pub field_selector: FieldSelector,
    pub resource_version: Option<String>,
    pub send_initial_events: Option<bool>,
    pub allow_bookmarks: bool,
    pub timeout: Option<Duration>,
}

/// One event of a watch.
#[derive(Debug, Clone)]
pub enum WatchEvent {
    /// The object is shared with the other watches of the same change (see `decoded`).
    Added(Arc<Value>),
    Modified(Arc<Value>),
    Deleted(Arc<Value>),
    /// A bookmark at a revision; `true` marks the end of the initial events.
    Bookmark(Revision, bool),
    /// The last event of a watch that failed (410 Expired and the like).
    Error(ApiError),
}

impl WatchEvent {
    /// The `type` of the event on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(..) => "BOOKMARK",
            WatchEvent::Error(_) => "ERROR",
        }
    }

    /// The event's `object` (a Status for errors, a stub carrying the revision for bookmarks).
    pub fn object(&self, res: &ResourceType) -> Value {
        match self {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                Value::clone(o)
            }
            WatchEvent::Bookmark(rev, initial_end) => {
                let mut m = json!({"resourceVersion": rev.to_string(), "creationTimestamp": null});
                if *initial_end {
                    m["annotations"] = json!({"k8s.io/initial-events-end": "true"});
                }
                json!({"kind": res.kind, "apiVersion": res.api_version(), "metadata": m})
            }
            WatchEvent::Error(e) => serde_json::to_value(e.to_status()).unwrap_or_default(),
        }
    }
}

impl Rest {
    /// Starts a watch; events arrive on the returned channel until it ends (timeout, error,
    /// `cancel`, or the receiver being dropped).
    pub fn watch(
        self: &Arc<Self>,
        res: Arc<ResourceType>,
        ns: Option<String>,
        req: WatchRequest,
        cancel: CancellationToken,
    ) -> Result<mpsc::Receiver<WatchEvent>, ApiError> {
        fields::check(&res, &req.field_selector)?;
        let rv = meta::parse_resource_version(req.resource_version.as_deref().unwrap_or(""))?;
        let initial = req
            .send_initial_events
            .unwrap_or(matches!(rv, None | Some(0)));
        if req.send_initial_events == Some(true) && !req.allow_bookmarks {
            return Err(ApiError::invalid(
                "ListOptions",
                "",
                vec![(
                    "allowWatchBookmarks".into(),
                    "Required value: allowWatchBookmarks must be set to true when sendInitialEvents is set".into(),
                )],
            ));
        }
        let timeout = req
            .timeout
            .unwrap_or_else(|| MIN_REQUEST_TIMEOUT.mul_f64(1.0 + rand::rng().random::<f64>()));
        let (tx, rx) = mpsc::channel(CHANNEL_DEPTH);
        let rest = self.clone();
        tokio::spawn(async move {
            let run = rest.run_watch(&res, ns.as_deref(), &req, rv, initial, &tx);
            tokio::select! {
                () = cancel.cancelled() => {}
                () = tokio::time::sleep(timeout) => {}
                () = tx.closed() => {}
                result = run => {
                    if let Err(e) = result {
                        let _ = tx.send(WatchEvent::Error(e)).await;
                    }
                }
            }
        });
        Ok(rx)
    }

    async fn run_watch(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        req: &WatchRequest,
        rv: Option<Revision>,
        initial: bool,
        tx: &mpsc::Sender<WatchEvent>,
    ) -> Result<(), ApiError> {
        let mut after = rv.unwrap_or(0);
        if initial {
            let mut opts = ListOptions {
                label_selector: req.label_selector.clone(),
                field_selector: req.field_selector.clone(),
                limit: INITIAL_PAGE,
                ..Default::default()
            };
            if let Some(rv) = rv.filter(|r| *r > 0) {
                self.wait_for_revision(rv).await?;
            }
            loop {
                let page = self.list(res, ns, &opts).await?;
                after = page.resource_version;
                for item in page.items {
                    if tx.send(WatchEvent::Added(Arc::new(item))).await.is_err() {
                        return Ok(());
                    }
                }
                match page.continue_token {
                    Some(t) => opts.continue_token = Some(t),
                    None => break,
                }
            }
            if req.send_initial_events == Some(true)
                && tx.send(WatchEvent::Bookmark(after, true)).await.is_err()
            {
                return Ok(());
            }
        }
        let prefix = res.namespace_prefix(ns);
        let mut stream = self.store.watch(
            &prefix,
            after,
            WatchOptions {
                progress_interval: req.allow_bookmarks.then_some(BOOKMARK_INTERVAL),
            },
        );
        while let Some(item) = stream.next().await {
            let event = match item {
                Ok(WatchItem::Progress(rev)) if req.allow_bookmarks => {
                    Some(WatchEvent::Bookmark(rev, false))
                }
                Ok(WatchItem::Progress(_)) => None,
                Ok(WatchItem::Event(e)) => {
                    if !is_direct_child(&prefix, &e.kv.key, res, ns) {
                        continue;
                    }
                    let rev = e.revision();
                    let matches = |o: &Value| {
                        req.label_selector.matches_json(o)
                            && fields::matches(res, &req.field_selector, o)
                    };
                    let new = match e.kind {
                        EventKind::Put => Some(self.decoded.get_or_decode(
                            rev,
                            &e.kv.key,
                            &res.group,
                            &res.version,
                            || self.decode_stored(res, &e.kv.key, &e.kv.value, rev),
                        )?),
                        EventKind::Delete => None,
                    };
                    // The previous value matters for selectors and for deletes; an update
                    // seen without selectors needs only to know that one existed.
                    let unfiltered = req.label_selector.is_empty() && req.field_selector.is_empty();
                    let old = match &e.prev {
                        Some(_) if unfiltered && new.is_some() => None,
                        Some(p) => {
                            Some(self.decode_stored(res, &p.key, &p.value, p.mod_revision)?)
                        }
                        None => None,
                    };
                    let old_match = if unfiltered {
                        e.prev.is_some()
                    } else {
                        old.as_ref().is_some_and(matches)
                    };
                    match (new, old) {
                        (Some(n), _) if matches(&n) => Some(if old_match {
                            WatchEvent::Modified(n)
                        } else {
                            WatchEvent::Added(n)
                        }),
                        (Some(n), _) if old_match => Some(WatchEvent::Deleted(n)),
                        (None, Some(mut o)) if old_match => {
                            meta::set_resource_version(&mut o, rev);
                            Some(WatchEvent::Deleted(Arc::new(o)))
                        }
                        _ => None,
                    }
                }
                Err(StoreError::Compacted {
                    requested,
                    compacted,
                }) => {
                    return Err(ApiError::new(
                        410,
                        "Expired",
                        format!("too old resource version: {requested} ({compacted})"),
                    ));
                }
                Err(e) => return Err(e.into()),
            };
            let event = match event {
                Some(ev) if super::conversion::by_webhook(res) => {
                    Some(self.served_event(res, ev).await?)
                }
                other => other,
            };
            if let Some(ev) = event
                && tx.send(ev).await.is_err()
            {
                return Ok(());
            }
        }
        Ok(())
    }
}
