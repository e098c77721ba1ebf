//! Reads: `get` of one object (or its status or approval), `list`, and `watch` as a stream of
//! events in the representation asked for.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Call;
use super::encode::{encode, list_object, partial_metadata, single};
use super::options::list_options;
use crate::http::body::{self, Body};
use crate::http::negotiate::Output;
use crate::http::request::flag;
use crate::http::table_output;
use crate::registry::ResourceType;
use crate::rest::{Rest, WatchEvent, WatchRequest};
use crate::state::ApiState;
use crate::status::ApiError;

/// `GET` of one object, or of its `status` or `approval` (the same object).
pub(super) async fn get(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
    name: &str,
    out: Output,
) -> Result<Response<Body>, ApiError> {
    let obj = state
        .rest
        .get(res, call.target.namespace.as_deref(), name)
        .await?;
    Ok(encode(
        StatusCode::OK,
        out,
        &single(res, obj, out, call.query),
        &[],
    ))
}

/// `GET` of a collection.
pub(super) async fn list(
    state: &ApiState,
    res: &ResourceType,
    call: &Call<'_>,
    out: Output,
) -> Result<Response<Body>, ApiError> {
    let q = call.query;
    let page = state
        .rest
        .list(res, call.target.namespace.as_deref(), &list_options(q)?)
        .await?;
    Ok(encode(
        StatusCode::OK,
        out,
        &list_object(res, page, out, q),
        &[],
    ))
}

/// `GET ...?watch=1` (or `/watch/...`): the events of a collection as a stream.
pub(super) fn watch(
    state: &ApiState,
    res: Arc<ResourceType>,
    call: &Call<'_>,
    out: Output,
) -> Result<Response<Body>, ApiError> {
    let guard = state.metrics.watcher(&res.group, &res.version, &res.kind);
    watch_response(
        &state.rest,
        res,
        call.target.namespace.as_deref(),
        call.query,
        out,
        &state.cancel,
        guard,
    )
}

fn watch_response(
    rest: &Arc<Rest>,
    res: Arc<ResourceType>,
    ns: Option<&str>,
    q: &HashMap<String, String>,
    out: Output,
    cancel: &CancellationToken,
    guard: crate::metrics::WatcherGuard,
) -> Result<Response<Body>, ApiError> {
    let lo = list_options(q)?;
    let req = WatchRequest {
        label_selector: lo.label_selector,
        field_selector: lo.field_selector,
        resource_version: lo.resource_version,
        send_initial_events: flag(q, "sendInitialEvents"),
        allow_bookmarks: flag(q, "allowWatchBookmarks") == Some(true),
        timeout: q
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map(Duration::from_secs),
    };
    let rx = rest.watch(
        res.clone(),
        ns.map(str::to_owned),
        req,
        cancel.child_token(),
    )?;
    let q = q.clone();
    let mut first = true;
    let stream = tokio_stream_from(rx).map(move |ev| {
        // Counted in apiserver_registered_watchers until the stream is dropped.
        let _counted = &guard;
        // `{"type":T,"object":O}` written directly, without copying O into a wrapper value.
        let mut line = format!("{{\"type\":\"{}\",\"object\":", ev.type_name()).into_bytes();
        let written = match (&ev, out) {
            (
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o),
                Output::Table,
            ) => {
                let rv = o["metadata"]["resourceVersion"].clone();
                let t = table_output::table(
                    &res,
                    std::slice::from_ref(o.as_ref()),
                    json!({"resourceVersion": rv}),
                    &q,
                    first,
                );
                first = false;
                serde_json::to_writer(&mut line, &t)
            }
            (
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o),
                Output::Metadata,
            ) => serde_json::to_writer(&mut line, &partial_metadata(o)),
            (WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o), _) => {
                serde_json::to_writer(&mut line, o.as_ref())
            }
            _ => serde_json::to_writer(&mut line, &ev.object(&res)),
        };
        if written.is_err() {
            tracing::warn!("a watch event could not be encoded");
        }
        line.extend_from_slice(b"}\n");
        bytes::Bytes::from(line)
    });
    let mut resp = Response::new(body::streamed(stream));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// A stream over a channel receiver.
fn tokio_stream_from<T: Send + 'static>(
    rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) })
}
