//! Custom resources across the versions of their CRD, as upstream's apiextensions-apiserver
//! converts them: stored in the CRD's storage version, served in the version a request
//! names. Strategy `None` changes `apiVersion` only (done as objects are decoded, in
//! [`Rest::decode_stored`]); strategy `Webhook` sends the objects that are in another version
//! to the CRD's conversion webhook in one `ConversionReview` (per object read or written, per
//! list page, per watch event) and checks the answer as upstream does: as many objects as
//! sent, each of the desired `apiVersion` and the same kind, metadata unchanged but for labels
//! and annotations (the rest is put back).
//!
//! Owns the conversion of custom resources. The webhook is reached as admission webhooks are
//! ([`crate::admission::webhook`]: a URL or a Service's ready endpoint, TLS against the
//! `caBundle`). In-process readers that mirror the store (the controllers' client) see
//! webhook-converted resources in their stored version; k1s's own controllers read none.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::admission::webhook;
use crate::registry::ResourceType;
pub use crate::registry::apiextensions::custom::Conversion;
use crate::rest::Rest;
use crate::rest::watch::WatchEvent;
use crate::status::ApiError;

/// The `ConversionReview` versions k1s speaks, most preferred first.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// Upstream's limit on one conversion call.
const TIMEOUT: Duration = Duration::from_secs(30);

fn webhook_of(res: &ResourceType) -> Option<&Value> {
    res.custom.as_ref()?.conversion.webhook.as_ref()
}

/// Whether objects of `res` are converted by a webhook (and so keep their stored
/// `apiVersion` when decoded).
pub fn by_webhook(res: &ResourceType) -> bool {
    webhook_of(res).is_some()
}

/// Why a conversion webhook did not convert (the `why` of upstream's "conversion webhook for
/// CRD failed").
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    #[error("the webhook accepts no ConversionReview version k1s speaks (v1, v1beta1)")]
    NoReviewVersion,
    /// Finding the endpoint took the whole time limit.
    #[error("context deadline exceeded")]
    Timeout,
    #[error(transparent)]
    Endpoint(#[from] webhook::call::EndpointError),
    #[error(transparent)]
    CaBundle(#[from] webhook::InvalidCaBundle),
    #[error(transparent)]
    Post(#[from] webhook::call::PostError),
    #[error("invalid ConversionReview: {0}")]
    InvalidReview(#[source] serde_json::Error),
    #[error("no response provided")]
    NoResponse,
    #[error("expected response.uid={expected:?}, got {got:?}")]
    Uid { expected: String, got: String },
    /// `response.result.status` is not `Success`; the webhook's message, if it gave one.
    #[error("{}", .message.as_deref().unwrap_or("the webhook did not report success"))]
    Failed { message: Option<String> },
    #[error("expected {sent} converted objects, got {got}")]
    Count { sent: usize, got: usize },
    #[error("invalid converted object: expected apiVersion {desired:?}, got {got:?}")]
    ApiVersion { desired: String, got: String },
    /// The kinds as JSON (`"Widget"`, or `null`).
    #[error("invalid converted object: expected kind {expected}, got {got}")]
    Kind { expected: Value, got: Value },
    /// `metadata.labels` or `metadata.annotations` with a value that is not a string.
    #[error("invalid metadata.{field} in a converted object")]
    Metadata { field: &'static str },
}

fn conversion_error(res: &ResourceType, why: &ConversionError) -> ApiError {
    let crd = format!("{}.{}", res.plural, res.group);
    ApiError::new(
        500,
        "InternalError",
        format!("conversion webhook for {crd} failed: {why}"),
    )
}

impl Rest {
    /// An object of `res` as served: converted from its stored version by the CRD's webhook
    /// and defaulted by the served version's schema. Objects of other resources, and those
    /// converted without a webhook, are returned as they are.
    pub(crate) async fn to_served(
        &self,
        res: &ResourceType,
        obj: Value,
    ) -> Result<Value, ApiError> {
        if !by_webhook(res) {
            return Ok(obj);
        }
        let mut out = self.to_served_all(res, vec![obj]).await?;
        Ok(out.pop().unwrap_or(Value::Null))
    }

    /// [`Rest::to_served`] of many objects, in one webhook call.
    pub(crate) async fn to_served_all(
        &self,
        res: &ResourceType,
        objs: Vec<Value>,
    ) -> Result<Vec<Value>, ApiError> {
        let Some(custom) = res.custom.as_ref().filter(|_| by_webhook(res)) else {
            return Ok(objs);
        };
        let mut objs = self.convert(res, objs, &res.api_version()).await?;
        if let Some(schema) = &custom.schema {
            objs.iter_mut().for_each(|o| schema.default(o));
        }
        Ok(objs)
    }

    /// A watch event of `res` with its object as served.
    pub(crate) async fn served_event(
        &self,
        res: &ResourceType,
        ev: WatchEvent,
    ) -> Result<WatchEvent, ApiError> {
        let served = |o: Arc<Value>| self.to_served(res, Value::clone(&o));
        Ok(match ev {
            WatchEvent::Added(o) => WatchEvent::Added(Arc::new(served(o).await?)),
            WatchEvent::Modified(o) => WatchEvent::Modified(Arc::new(served(o).await?)),
            WatchEvent::Deleted(o) => WatchEvent::Deleted(Arc::new(served(o).await?)),
            other => other,
        })
    }

    /// An object of `res` as it is stored: in the CRD's storage version (other resources'
    /// objects as they are, not copied).
    pub(crate) async fn to_storage<'a>(
        &self,
        res: &ResourceType,
        obj: &'a Value,
    ) -> Result<Cow<'a, Value>, ApiError> {
        let Some(custom) = &res.custom else {
            return Ok(Cow::Borrowed(obj));
        };
        let storage = custom.conversion.storage_version.clone();
        if storage == "/" || storage.is_empty() || obj["apiVersion"] == storage.as_str() {
            return Ok(Cow::Borrowed(obj));
        }
        let mut out = self.convert(res, vec![obj.clone()], &storage).await?;
        Ok(Cow::Owned(out.pop().unwrap_or(Value::Null)))
    }

    /// `objs` in `desired` (`group/version`): the webhook converts those in another version;
    /// without a webhook only `apiVersion` changes.
    async fn convert(
        &self,
        res: &ResourceType,
        mut objs: Vec<Value>,
        desired: &str,
    ) -> Result<Vec<Value>, ApiError> {
        let todo: Vec<usize> = (0..objs.len())
            .filter(|&i| objs[i]["apiVersion"].as_str() != Some(desired))
            .collect();
        if todo.is_empty() {
            return Ok(objs);
        }
        let Some(hook) = webhook_of(res) else {
            for i in todo {
                objs[i]["apiVersion"] = json!(desired);
            }
            return Ok(objs);
        };
        let sent: Vec<Value> = todo.iter().map(|&i| objs[i].clone()).collect();
        // Boxed: reaching the webhook reads its Service, through the read path that calls
        // this.
        let converted = Box::pin(self.call_conversion_webhook(hook, &sent, desired))
            .await
            .map_err(|why| conversion_error(res, &why))?;
        for (&i, mut c) in todo.iter().zip(converted) {
            check_converted(&objs[i], &mut c, desired)
                .map_err(|why| conversion_error(res, &why))?;
            objs[i] = c;
        }
        Ok(objs)
    }

    /// One `ConversionReview` round trip; the converted objects, in order.
    async fn call_conversion_webhook(
        &self,
        hook: &Value,
        objects: &[Value],
        desired: &str,
    ) -> Result<Vec<Value>, ConversionError> {
        let version = hook["conversionReviewVersions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find_map(|v| REVIEW_VERSIONS.iter().copied().find(|k| *k == v))
            .ok_or(ConversionError::NoReviewVersion)?;
        let started = tokio::time::Instant::now();
        let endpoint = tokio::time::timeout(TIMEOUT, webhook::endpoint(self, hook, TIMEOUT))
            .await
            .map_err(|_| ConversionError::Timeout)??;
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({
            "apiVersion": format!("apiextensions.k8s.io/{version}"),
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
        });
        let ca = hook["clientConfig"]["caBundle"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(webhook::decode_ca)
            .transpose()?;
        let left = TIMEOUT.saturating_sub(started.elapsed());
        let body = webhook::call::post(&endpoint, ca.as_deref(), &review, left).await?;
        parse_answer(&uid, objects.len(), &body)
    }
}

/// The converted objects of a `ConversionReview` answer, checked as upstream does.
fn parse_answer(uid: &str, sent: usize, body: &[u8]) -> Result<Vec<Value>, ConversionError> {
    let answer: Value = serde_json::from_slice(body).map_err(ConversionError::InvalidReview)?;
    let response = &answer["response"];
    if !response.is_object() {
        return Err(ConversionError::NoResponse);
    }
    if response["uid"].as_str() != Some(uid) {
        return Err(ConversionError::Uid {
            expected: uid.to_owned(),
            got: response["uid"].as_str().unwrap_or("").to_owned(),
        });
    }
    if response["result"]["status"] != "Success" {
        return Err(ConversionError::Failed {
            message: response["result"]["message"]
                .as_str()
                .filter(|m| !m.is_empty())
                .map(str::to_owned),
        });
    }
    let converted = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if converted.len() != sent {
        return Err(ConversionError::Count {
            sent,
            got: converted.len(),
        });
    }
    Ok(converted)
}

/// Upstream's checks of one converted object: the desired apiVersion, the original kind, and
/// metadata as it was but for labels and annotations (the rest is restored).
fn check_converted(
    original: &Value,
    converted: &mut Value,
    desired: &str,
) -> Result<(), ConversionError> {
    if converted["apiVersion"].as_str() != Some(desired) {
        return Err(ConversionError::ApiVersion {
            desired: desired.to_owned(),
            got: converted["apiVersion"].as_str().unwrap_or("").to_owned(),
        });
    }
    if converted["kind"] != original["kind"] {
        return Err(ConversionError::Kind {
            expected: original["kind"].clone(),
            got: converted["kind"].clone(),
        });
    }
    let mut meta = original["metadata"].clone();
    for k in ["labels", "annotations"] {
        match converted["metadata"].get(k) {
            Some(v) if v.is_object() => {
                if v.as_object()
                    .is_some_and(|m| m.values().any(|x| !x.is_string()))
                {
                    return Err(ConversionError::Metadata { field: k });
                }
                meta[k] = v.clone();
            }
            _ => {
                if let Some(m) = meta.as_object_mut() {
                    m.remove(k);
                }
            }
        }
    }
    converted["metadata"] = meta;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(version: &str) -> Value {
        json!({"apiVersion": format!("stable.example.com/{version}"), "kind": "Widget",
            "metadata": {"name": "w", "uid": "u1", "labels": {"a": "1"}}, "hostPort": "h:1"})
    }

    #[test]
    fn the_crd_says_storage_and_webhook() {
        let crd = json!({"spec": {"group": "stable.example.com", "versions": [
            {"name": "v1", "served": true, "storage": false},
            {"name": "v2", "served": true, "storage": true}],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://x/"}}}}});
        let c = Conversion::of(&crd);
        assert_eq!(c.storage_version, "stable.example.com/v2");
        assert!(c.webhook.is_some());
        let mut none = crd.clone();
        none["spec"]["conversion"] = json!({"strategy": "None"});
        assert!(Conversion::of(&none).webhook.is_none());
    }

    #[test]
    fn answers_are_checked_as_upstream() {
        let ok = json!({"response": {"uid": "x", "result": {"status": "Success"},
            "convertedObjects": [obj("v2")]}});
        let got = parse_answer("x", 1, ok.to_string().as_bytes()).unwrap();
        assert_eq!(got.len(), 1);
        let e = parse_answer("y", 1, ok.to_string().as_bytes()).unwrap_err();
        assert!(matches!(e, ConversionError::Uid { .. }));
        assert_eq!(e.to_string(), r#"expected response.uid="y", got "x""#);
        let e = parse_answer("x", 2, ok.to_string().as_bytes()).unwrap_err();
        assert!(matches!(e, ConversionError::Count { sent: 2, got: 1 }));
        assert_eq!(e.to_string(), "expected 2 converted objects, got 1");
        let failed = json!({"response": {"uid": "x", "result": {"status": "Failure",
            "message": "cannot convert"}}});
        let e = parse_answer("x", 1, failed.to_string().as_bytes()).unwrap_err();
        assert!(matches!(e, ConversionError::Failed { message: Some(_) }));
        assert_eq!(e.to_string(), "cannot convert");
        let silent = json!({"response": {"uid": "x", "result": {"status": "Failure"}}});
        let e = parse_answer("x", 1, silent.to_string().as_bytes()).unwrap_err();
        assert_eq!(e.to_string(), "the webhook did not report success");
        let e = parse_answer("x", 1, b"{}").unwrap_err();
        assert!(matches!(e, ConversionError::NoResponse));
        assert_eq!(e.to_string(), "no response provided");
        let e = parse_answer("x", 1, b"nope").unwrap_err();
        assert!(matches!(e, ConversionError::InvalidReview(_)));
        assert!(
            e.to_string().starts_with("invalid ConversionReview: "),
            "{e}"
        );
        assert_eq!(
            ConversionError::NoReviewVersion.to_string(),
            "the webhook accepts no ConversionReview version k1s speaks (v1, v1beta1)"
        );
    }

    #[test]
    fn converted_metadata_keeps_all_but_labels_and_annotations() {
        let original = obj("v1");
        let mut c = obj("v2");
        c["metadata"]["uid"] = json!("changed");
        c["metadata"]["labels"] = json!({"b": "2"});
        c["metadata"]["annotations"] = json!({"n": "x"});
        check_converted(&original, &mut c, "stable.example.com/v2").unwrap();
        assert_eq!(c["metadata"]["uid"], "u1");
        assert_eq!(c["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(c["metadata"]["annotations"], json!({"n": "x"}));
        let mut wrong = obj("v1");
        let e = check_converted(&original, &mut wrong, "stable.example.com/v2").unwrap_err();
        assert!(matches!(e, ConversionError::ApiVersion { .. }));
        assert_eq!(
            e.to_string(),
            r#"invalid converted object: expected apiVersion "stable.example.com/v2", got "stable.example.com/v1""#
        );
        let mut kind = obj("v2");
        kind["kind"] = json!("Other");
        let e = check_converted(&original, &mut kind, "stable.example.com/v2").unwrap_err();
        assert!(matches!(e, ConversionError::Kind { .. }));
        assert_eq!(
            e.to_string(),
            r#"invalid converted object: expected kind "Widget", got "Other""#
        );
        let mut labels = obj("v2");
        labels["metadata"]["labels"] = json!({"a": 1});
        let e = check_converted(&original, &mut labels, "stable.example.com/v2").unwrap_err();
        assert!(matches!(e, ConversionError::Metadata { field: "labels" }));
        assert_eq!(
            e.to_string(),
            "invalid metadata.labels in a converted object"
        );
    }
}
