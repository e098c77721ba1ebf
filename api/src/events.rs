//! Event recording: core/v1 Events about an object, as `kubectl describe` lists them. Shared by
//! every component that reports (scheduler, kubelet, controllers); a failed write is logged at
//! debug level and dropped, as client-go's recorder does.
//!
//! Every event goes through one process-wide [`correlator::Correlator`] first, as client-go's
//! broadcaster does: repeats patch the first Event's `count` and `lastTimestamp` instead of
//! creating new ones, similar events are combined, and spam is dropped.

pub mod correlator;

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use serde_json::json;

use crate::client::{Client, Patch, ResourceRef, WriteParams};
use correlator::{Correlator, Decision, EventKey};

fn correlator() -> &'static Mutex<Correlator> {
    static C: OnceLock<Mutex<Correlator>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// Who reports.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// `default-scheduler`, `kubelet`, ...
    pub component: String,
    /// The node, for node components.
    pub host: Option<String>,
}

/// The object an event is about.
#[derive(Debug, Clone, Default)]
pub struct Involved {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    /// `spec.containers{NAME}` for events about one container.
    pub field_path: Option<String>,
}

impl Involved {
    /// The pod `pod` (a Pod's metadata).
    pub fn pod(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        Self {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            field_path: None,
        }
    }

    pub fn with_field_path(mut self, path: impl Into<String>) -> Self {
        self.field_path = Some(path.into());
        self
    }
}

/// The time now as Events carry it (`metav1.Time`: RFC 3339, seconds).
pub use crate::time::now_text as now_rfc3339;

/// At most this many events wait to be written by [`record_detached`]; more are dropped, as
/// client-go's broadcaster drops events when its queue (1000) is full.
const DETACHED_LIMIT: usize = 1000;

/// Records an Event without waiting for the API: the write runs as its own task, as
/// client-go's recorder hands events to its broadcaster. For callers on a latency path (a
/// pod worker starting containers), so that three Event writes do not hold up every start.
/// Must be called within a tokio runtime.
#[allow(clippy::too_many_arguments)]
pub fn record_detached(
    client: std::sync::Arc<dyn Client>,
    source: &Source,
    about: &Involved,
    type_: &str,
    reason: &str,
    action: &str,
    message: &str,
) {
    static SLOTS: OnceLock<std::sync::Arc<tokio::sync::Semaphore>> = OnceLock::new();
    let slots =
        SLOTS.get_or_init(|| std::sync::Arc::new(tokio::sync::Semaphore::new(DETACHED_LIMIT)));
    let Ok(permit) = slots.clone().try_acquire_owned() else {
        tracing::debug!(%reason, object = %about.name, "event dropped: too many waiting");
        return;
    };
    let (source, about) = (source.clone(), about.clone());
    let (type_, reason, action, message) = (
        type_.to_owned(),
        reason.to_owned(),
        action.to_owned(),
        message.to_owned(),
    );
    tokio::spawn(async move {
        record(
            client.as_ref(),
            &source,
            &about,
            &type_,
            &reason,
            &action,
            &message,
        )
        .await;
        drop(permit);
    });
}

/// Creates an Event (`type_` is `Normal` or `Warning`).
pub async fn record(
    client: &dyn Client,
    source: &Source,
    about: &Involved,
    type_: &str,
    reason: &str,
    action: &str,
    message: &str,
) {
    let now = now_rfc3339();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut involved = json!({
        "apiVersion": about.api_version,
        "kind": about.kind,
        "name": about.name,
        "uid": about.uid,
        "resourceVersion": about.resource_version,
    });
    if !about.namespace.is_empty() {
        involved["namespace"] = json!(about.namespace);
    }
    if let Some(f) = &about.field_path {
        involved["fieldPath"] = json!(f);
    }
    let mut src = json!({"component": source.component});
    if let Some(h) = &source.host {
        src["host"] = json!(h);
    }
    let ns = if about.namespace.is_empty() {
        "default"
    } else {
        &about.namespace
    };
    let r = ResourceRef::new("", "v1", "events", Some(ns));
    let key = EventKey {
        component: source.component.clone(),
        host: source.host.clone().unwrap_or_default(),
        object: [
            about.kind.clone(),
            about.namespace.clone(),
            about.name.clone(),
            about.uid.clone(),
            about.api_version.clone(),
            about.field_path.clone().unwrap_or_default(),
        ],
        type_: type_.into(),
        reason: reason.into(),
        message: message.into(),
    };
    let decision = correlator()
        .lock()
        .map(|mut c| c.observe(&key, Instant::now()))
        .unwrap_or(Decision::Drop);
    let (key, message) = match decision {
        Decision::Drop => {
            tracing::debug!(%reason, object = %about.name, "event dropped by the spam filter");
            return;
        }
        Decision::Patch {
            key,
            name,
            count,
            message,
        } => {
            let patch = Patch::Merge(json!({
                "count": count,
                "lastTimestamp": now,
                "message": message,
            }));
            match client
                .patch(&r, &name, &patch, None, &WriteParams::default())
                .await
            {
                Ok(_) => return,
                Err(e) => {
                    // Expired or deleted: start over with a new Event.
                    tracing::debug!(error = %e, %reason, "updating a repeated event");
                    if let Ok(mut c) = correlator().lock() {
                        c.forget(&key);
                    }
                    (key, message)
                }
            }
        }
        Decision::Create { key, message } => (key, message),
    };
    let name = format!("{}.{:x}", about.name, nanos);
    let ev = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": type_,
        "source": src,
        "reportingComponent": source.component,
        "reportingInstance": source.host.clone().unwrap_or_else(|| source.component.clone()),
        "action": action,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    });
    match client.create(&r, ev, &WriteParams::default()).await {
        Ok(_) => {
            if let Ok(mut c) = correlator().lock() {
                c.created(key, name, Instant::now());
            }
        }
        Err(e) => tracing::debug!(error = %e, %reason, "recording event"),
    }
}
