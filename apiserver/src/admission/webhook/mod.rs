//! Dynamic admission: the webhooks of `MutatingWebhookConfiguration`s and
//! `ValidatingWebhookConfiguration`s (`admissionregistration.k8s.io/v1`), called as
//! kube-apiserver's MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins call them.
//!
//! - **Which**: configurations in name order, webhooks in their order; a webhook is called
//!   when one of its rules covers the request ([`rules`]) and its namespace and object
//!   selectors select it. Writes of the webhook configurations themselves never go to
//!   webhooks (a broken webhook could otherwise never be removed).
//! - **Mutating** webhooks run one after another on creates and updates, after the built-in
//!   mutating plugins; each may answer with a JSON patch, applied before the next is called.
//!   A webhook with `reinvocationPolicy: IfNeeded` is called once more when a later webhook
//!   changed the object.
//! - **Validating** webhooks run concurrently, after the object passed the kind's own
//!   validation, on creates, updates, deletes and connects (`pods/exec`, `attach`, ...); any
//!   refusal refuses the request.
//! - **Failures** (unreachable, `timeoutSeconds` passed, an answer that does not parse): with
//!   `failurePolicy: Fail` (the default) the request fails with 500 InternalError "failed
//!   calling webhook"; with `Ignore` the webhook is skipped. A refusal becomes the webhook's
//!   status (at least 400) with upstream's "admission webhook "NAME" denied the request".
//! - A `dryRun` request only goes to webhooks that declare `sideEffects: None` or
//!   `NoneOnDryRun`; for any other it is refused (400), as upstream.
//!
//! Not done: `matchPolicy: Equivalent` calls a webhook only for the version it names (k1s
//! serves one version of each built-in resource, so the equivalent requests upstream
//! converts do not arise for them), and mutating webhooks are not called on deletes and
//! connects (upstream calls them, but nothing they change is used).

pub mod call;
pub mod rules;

use std::time::Duration;

use serde_json::{Value, json};

use crate::reader::Reader;
use crate::registry::ResourceType;
use crate::status::ApiError;
use crate::user::UserInfo;

const GROUP: &str = "admissionregistration.k8s.io";
const MUTATING: &str = "mutatingwebhookconfigurations";
const VALIDATING: &str = "validatingwebhookconfigurations";

/// One request as the webhooks see it.
pub struct Attributes<'a> {
    pub res: &'a ResourceType,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: &'static str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    /// `None` for the server's own components.
    pub user: Option<&'a UserInfo>,
    pub dry_run: bool,
}

impl Attributes<'_> {
    fn target(&self) -> rules::Target<'_> {
        rules::Target {
            operation: self.operation,
            group: &self.res.group,
            version: &self.res.version,
            resource: &self.res.plural,
            subresource: self.subresource,
            namespace: self.namespace,
        }
    }

    /// Webhook configurations are never sent to webhooks.
    fn exempt(&self) -> bool {
        self.res.group == GROUP && (self.res.plural == MUTATING || self.res.plural == VALIDATING)
    }

    /// The `kind` of what is written: a subresource's own kind (`PodAttachOptions`) or the
    /// resource's.
    fn kind(&self) -> Value {
        match self
            .res
            .subresource(self.subresource)
            .and_then(|s| s.kind)
            .filter(|_| !self.subresource.is_empty())
        {
            Some((group, version, kind)) => {
                json!({"group": group, "version": version, "kind": kind})
            }
            None => json!({"group": self.res.group, "version": self.res.version,
                           "kind": self.res.kind}),
        }
    }

    /// The `request` of the review sent to a webhook.
    fn request(&self, uid: &str, obj: Option<&Value>, old: Option<&Value>) -> Value {
        let resource = json!({"group": self.res.group, "version": self.res.version,
                              "resource": self.res.plural});
        let kind = self.kind();
        let user = match self.user {
            Some(u) => json!({"username": u.name, "uid": u.uid, "groups": u.groups,
                              "extra": u.extra}),
            // In-process components act as kube-apiserver's loopback client does.
            None => json!({"username": "system:apiserver",
                           "groups": ["system:masters", "system:authenticated"]}),
        };
        let options = match self.operation {
            "CREATE" => json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}),
            "UPDATE" => json!({"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"}),
            "DELETE" => json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"}),
            _ => Value::Null,
        };
        let mut r = json!({
            "uid": uid,
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "operation": self.operation,
            "userInfo": user,
            "dryRun": self.dry_run,
        });
        let mut set = |k: &str, v: Value| {
            if !v.is_null() && v != json!("") {
                r[k] = v;
            }
        };
        set("subResource", json!(self.subresource));
        set("requestSubResource", json!(self.subresource));
        set("name", json!(self.name));
        set("namespace", json!(self.namespace));
        set("object", obj.cloned().unwrap_or(Value::Null));
        set("oldObject", old.cloned().unwrap_or(Value::Null));
        set("options", options);
        r
    }
}

/// The webhooks of every configuration of `plural`, in configuration name order.
async fn webhooks(rest: &dyn Reader, plural: &str) -> Result<Vec<Value>, ApiError> {
    let Some(res) = rest.served(GROUP, plural) else {
        return Ok(Vec::new());
    };
    let mut configs = rest.list_shared(&res, None).await?;
    if configs.is_empty() {
        return Ok(Vec::new());
    }
    configs.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    Ok(configs
        .iter()
        .flat_map(|c| c["webhooks"].as_array().cloned().unwrap_or_default())
        .collect())
}

/// The labels a namespace selector is matched against: the Namespace being written, else the
/// request's namespace (`None` for other cluster-scoped objects).
async fn namespace_object(
    rest: &dyn Reader,
    a: &Attributes<'_>,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> Result<Option<Value>, ApiError> {
    if a.res.group.is_empty() && a.res.kind == "Namespace" && a.subresource.is_empty() {
        return Ok(obj.or(old).cloned());
    }
    if a.namespace.is_empty() {
        return Ok(None);
    }
    let Some(nsres) = rest.builtin_kind("", "Namespace") else {
        return Ok(None);
    };
    match rest.get_remembered(&nsres, None, a.namespace).await {
        Ok(ns) => Ok(Some(Value::clone(&ns))),
        Err(e) if e.code == 404 => Ok(Some(json!({"metadata": {}}))),
        Err(e) => Err(e),
    }
}

/// The webhooks of `plural` the request goes to.
async fn matching(
    rest: &dyn Reader,
    a: &Attributes<'_>,
    plural: &str,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> Result<Vec<Value>, ApiError> {
    if a.exempt() {
        return Ok(Vec::new());
    }
    let all = webhooks(rest, plural).await?;
    let target = a.target();
    let candidates: Vec<Value> = all
        .into_iter()
        .filter(|w| rules::rules_match(w, &target) && rules::object_selected(w, obj, old))
        .collect();
    if candidates.is_empty() {
        return Ok(candidates);
    }
    let ns = namespace_object(rest, a, obj, old).await?;
    Ok(candidates
        .into_iter()
        .filter(|w| rules::namespace_selected(w, ns.as_ref()))
        .collect())
}

fn name_of(webhook: &Value) -> &str {
    webhook["name"].as_str().unwrap_or("")
}

fn ignores_failures(webhook: &Value) -> bool {
    webhook["failurePolicy"].as_str() == Some("Ignore")
}

/// Upstream's error for a webhook that could not be called under `failurePolicy: Fail`.
fn calling_error(webhook: &Value, why: &CallError) -> ApiError {
    let message = format!("failed calling webhook {:?}: {why}", name_of(webhook));
    ApiError::new(
        500,
        "InternalError",
        format!("Internal error occurred: {message}"),
    )
    .with_cause("", message)
}

/// The `StatusReason`s a webhook may give, as the `'static` names [`ApiError`] carries.
fn known_reason(reason: &str) -> &'static str {
    const REASONS: [&str; 18] = [
        "BadRequest",
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "Timeout",
        "TooManyRequests",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    REASONS.iter().copied().find(|r| *r == reason).unwrap_or("")
}

/// A refusal: the webhook's status, code at least 400, with upstream's "denied the request".
fn denial(webhook: &Value, status: &Value) -> ApiError {
    let denied = format!(
        "admission webhook {:?} denied the request",
        name_of(webhook)
    );
    let message = status["message"].as_str().filter(|m| !m.is_empty());
    let reason = status["reason"].as_str().filter(|r| !r.is_empty());
    let message = match (message, reason) {
        (Some(m), _) => format!("{denied}: {m}"),
        (None, Some(r)) => format!("{denied}: {r}"),
        (None, None) => format!("{denied} without explanation"),
    };
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let mut e = ApiError::new(code, known_reason(reason.unwrap_or("")), message);
    if let Ok(details) = serde_json::from_value(status["details"].clone()) {
        e.details = Some(Box::new(details));
    }
    e
}

/// Where a webhook (anything with a `clientConfig`: also a CRD's conversion webhook) is
/// reached now: its URL, or one ready endpoint of its Service (else the Service's cluster IP).
pub(crate) async fn endpoint(
    rest: &dyn Reader,
    webhook: &Value,
    timeout: Duration,
) -> Result<call::Endpoint, call::EndpointError> {
    let cc = &webhook["clientConfig"];
    if let Some(url) = cc["url"].as_str() {
        return call::url_endpoint(url, timeout);
    }
    let svc_ref = &cc["service"];
    let (ns, name) = (
        svc_ref["namespace"].as_str().unwrap_or(""),
        svc_ref["name"].as_str().unwrap_or(""),
    );
    let port = svc_ref["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(443);
    let path = svc_ref["path"].as_str();
    let svc_type = rest
        .builtin_kind("", "Service")
        .ok_or(call::EndpointError::NoResource("Service"))?;
    let svc = rest
        .get(&svc_type, Some(ns), name)
        .await
        .map_err(call::EndpointError::Service)?;
    let port_name =
        crate::http::upstream::service_port_name(&svc, &port.to_string()).ok_or_else(|| {
            call::EndpointError::NoPort {
                name: name.to_owned(),
                port,
            }
        })?;
    let eps_type = rest
        .builtin_kind("", "Endpoints")
        .ok_or(call::EndpointError::NoResource("Endpoints"))?;
    let picked = match rest.get(&eps_type, Some(ns), name).await {
        Ok(eps) => crate::http::upstream::pick_endpoint(&eps, &port_name, &mut rand::rng()),
        Err(_) => None,
    };
    let (ip, target_port) = match picked {
        Some(p) => p,
        None => match svc["spec"]["clusterIP"].as_str() {
            Some(ip) if !ip.is_empty() && ip != "None" => (ip.to_owned(), port),
            _ => {
                return Err(call::EndpointError::NoReadyEndpoints {
                    name: name.to_owned(),
                });
            }
        },
    };
    Ok(call::service_endpoint(
        ns,
        name,
        path,
        port,
        &ip,
        target_port,
        timeout,
    ))
}

/// Calls one webhook. `Ok(None)`: a failure that its `failurePolicy: Ignore` skips.
async fn call_one(
    rest: &dyn Reader,
    a: &Attributes<'_>,
    webhook: &Value,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> Result<Option<call::Answer>, ApiError> {
    if a.dry_run
        && !matches!(
            webhook["sideEffects"].as_str(),
            Some("None" | "NoneOnDryRun")
        )
    {
        return Err(ApiError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            name_of(webhook)
        )));
    }
    let outcome = async {
        let version = call::review_version(webhook).ok_or(CallError::NoReviewVersion)?;
        let secs = webhook["timeoutSeconds"]
            .as_u64()
            .unwrap_or(10)
            .clamp(1, 30);
        let timeout = Duration::from_secs(secs);
        let started = tokio::time::Instant::now();
        let endpoint = tokio::time::timeout(timeout, endpoint(rest, webhook, timeout))
            .await
            .map_err(|_| CallError::Timeout)??;
        let uid = uuid::Uuid::new_v4().to_string();
        let review = call::review(version, a.request(&uid, obj, old));
        let ca = webhook["clientConfig"]["caBundle"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(decode_ca)
            .transpose()?;
        let left = timeout.saturating_sub(started.elapsed());
        let body = call::post(&endpoint, ca.as_deref(), &review, left)
            .await
            .map_err(CallError::Post)?;
        Ok::<_, CallError>(call::parse_answer(version, &uid, &body)?)
    }
    .await;
    match outcome {
        Ok(answer) => Ok(Some(answer)),
        Err(why) if ignores_failures(webhook) => {
            tracing::warn!(webhook = name_of(webhook), error = %why, "webhook failed; ignored (failurePolicy: Ignore)");
            Ok(None)
        }
        Err(why) => Err(calling_error(webhook, &why)),
    }
}

/// A `caBundle` that is not base64.
#[derive(Debug, thiserror::Error)]
#[error("invalid caBundle: {0}")]
pub struct InvalidCaBundle(#[source] pub base64::DecodeError);

/// Why a webhook could not be called (the `why` of upstream's "failed calling webhook").
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("webhook does not accept known AdmissionReview versions (v1, v1beta1)")]
    NoReviewVersion,
    /// Finding the endpoint took the whole `timeoutSeconds`.
    #[error("context deadline exceeded")]
    Timeout,
    #[error(transparent)]
    Endpoint(#[from] call::EndpointError),
    #[error(transparent)]
    CaBundle(#[from] InvalidCaBundle),
    #[error("failed to call webhook: {0}")]
    Post(#[source] call::PostError),
    #[error(transparent)]
    Answer(#[from] call::AnswerError),
}

/// `caBundle` is base64 of PEM in JSON.
pub(crate) fn decode_ca(b64: &str) -> Result<Vec<u8>, InvalidCaBundle> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(InvalidCaBundle)
}

/// Runs the mutating webhooks over a create or update; returns their warnings and whether
/// any changed the object (which the caller then decodes and defaults again, as upstream).
pub async fn mutate(
    rest: &dyn Reader,
    a: &Attributes<'_>,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<(Vec<String>, bool), ApiError> {
    let hooks = matching(rest, a, MUTATING, Some(obj), old).await?;
    let mut warnings = Vec::new();
    // Index of the webhook that changed the object last.
    let mut last_change: Option<usize> = None;
    for (i, hook) in hooks.iter().enumerate() {
        if mutate_one(rest, a, hook, obj, old, &mut warnings).await? {
            last_change = Some(i);
        }
    }
    // IfNeeded webhooks that ran before a later change see the object once more.
    if let Some(last) = last_change {
        for hook in hooks[..last].iter() {
            if hook["reinvocationPolicy"].as_str() == Some("IfNeeded") {
                mutate_one(rest, a, hook, obj, old, &mut warnings).await?;
            }
        }
    }
    Ok((warnings, last_change.is_some()))
}

/// One mutating webhook; whether it changed the object.
async fn mutate_one(
    rest: &dyn Reader,
    a: &Attributes<'_>,
    hook: &Value,
    obj: &mut Value,
    old: Option<&Value>,
    warnings: &mut Vec<String>,
) -> Result<bool, ApiError> {
    let Some(answer) = call_one(rest, a, hook, Some(obj), old).await? else {
        return Ok(false);
    };
    warnings.extend(answer.warnings);
    if !answer.allowed {
        return Err(denial(hook, &answer.status));
    }
    let Some(patch) = answer.patch else {
        return Ok(false);
    };
    let patched = k1s_apimachinery::patch::json_patch::apply(obj, &patch).map_err(|e| {
        ApiError::new(
            500,
            "InternalError",
            format!(
                "Internal error occurred: admission webhook {:?} returned a patch that cannot be applied: {e}",
                name_of(hook)
            ),
        )
    })?;
    let changed = patched != *obj;
    *obj = patched;
    Ok(changed)
}

/// Runs the validating webhooks, concurrently; returns their warnings.
pub async fn validate(
    rest: &dyn Reader,
    a: &Attributes<'_>,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    let hooks = matching(rest, a, VALIDATING, obj, old).await?;
    if hooks.is_empty() {
        return Ok(Vec::new());
    }
    let calls = hooks.iter().map(|h| call_one(rest, a, h, obj, old));
    let answers = futures::future::join_all(calls).await;
    let mut warnings = Vec::new();
    let mut refusal = None;
    for (hook, answer) in hooks.iter().zip(answers) {
        match answer {
            Ok(Some(answer)) => {
                warnings.extend(answer.warnings);
                if !answer.allowed && refusal.is_none() {
                    refusal = Some(denial(hook, &answer.status));
                }
            }
            Ok(None) => {}
            Err(e) if refusal.is_none() => refusal = Some(e),
            Err(_) => {}
        }
    }
    match refusal {
        Some(e) => Err(e),
        None => Ok(warnings),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_and_failures_read_as_upstream() {
        let hook = json!({"name": "deny.k8s.io"});
        let e = denial(
            &hook,
            &json!({"message": "the pod contains unwanted label", "code": 403, "reason": "Forbidden"}),
        );
        assert_eq!(e.code, 403);
        assert_eq!(e.reason, "Forbidden");
        assert_eq!(
            e.message,
            "admission webhook \"deny.k8s.io\" denied the request: the pod contains unwanted label"
        );
        let e = denial(&hook, &Value::Null);
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "admission webhook \"deny.k8s.io\" denied the request without explanation"
        );
        let e = denial(&hook, &json!({"reason": "NoWay", "code": 200}));
        assert_eq!((e.code, e.reason), (400, ""));
        assert!(e.message.ends_with("denied the request: NoWay"));
        let why = CallError::Post(call::PostError {
            url: "x".into(),
            reason: call::PostFailure::Timeout,
        });
        assert_eq!(
            why.to_string(),
            "failed to call webhook: Post \"x\": context deadline exceeded"
        );
        let e = calling_error(&hook, &why);
        assert_eq!((e.code, e.reason), (500, "InternalError"));
        assert_eq!(
            e.message,
            "Internal error occurred: failed calling webhook \"deny.k8s.io\": failed to call webhook: Post \"x\": context deadline exceeded"
        );
    }

    #[test]
    fn call_errors_keep_upstream_wording() {
        assert_eq!(
            CallError::NoReviewVersion.to_string(),
            "webhook does not accept known AdmissionReview versions (v1, v1beta1)"
        );
        assert_eq!(CallError::Timeout.to_string(), "context deadline exceeded");
        let e = decode_ca("not base64!").unwrap_err();
        assert!(e.to_string().starts_with("invalid caBundle: "), "{e}");
        assert!(matches!(CallError::from(e), CallError::CaBundle(_)));
        assert_eq!(decode_ca("aGk=").unwrap(), b"hi");
        let e = CallError::from(call::EndpointError::NoReadyEndpoints {
            name: "hook".into(),
        });
        assert_eq!(e.to_string(), "service \"hook\" has no ready endpoints");
        let e = call::EndpointError::NoPort {
            name: "hook".into(),
            port: 8443,
        };
        assert_eq!(e.to_string(), "service \"hook\" has no port 8443");
        assert_eq!(
            call::EndpointError::NoResource("Endpoints").to_string(),
            "no Endpoints resource"
        );
        let e = call::EndpointError::Service(ApiError::new(
            404,
            "NotFound",
            "services \"hook\" not found",
        ));
        assert_eq!(e.to_string(), "services \"hook\" not found");
    }
}
