//! Admission: the plugins kube-apiserver enables by default, run on every create and update
//! after authorization, before the object is validated and stored. Mutating plugins change
//! the object; validating ones refuse it with upstream's 403 message.
//!
//! Order, as upstream's: NamespaceLifecycle (in [`crate::rest`]), LimitRanger, ServiceAccount,
//! NodeRestriction, CertificateApproval, Priority, DefaultTolerationSeconds,
//! DefaultStorageClass, PersistentVolumeClaimResize, StorageObjectInUseProtection,
//! MutatingAdmissionWebhook ([`webhook`]), the RBAC escalation checks (upstream does them in
//! the RBAC storage), PodSecurity (defaults and exemptions from [`config`]), ResourceQuota.
//! ValidatingAdmissionWebhook runs later, from [`Admission::validate`]: after the kind's own
//! validation, as upstream's validating admission does, and on deletes and connects too.
//! Requests without a user (the server's own components) skip the user-based checks only.
//! Each plugin but the RBAC checks can be turned off by name ([`plugins`]). The chain is an
//! ordered list of steps behind one trait ([`chain`]).

pub mod certificate_approval;
pub mod chain;
pub mod config;
pub mod default_storage_class;
pub mod default_tolerations;
pub mod limit_ranger;
pub mod node_restriction;
pub mod plugins;
pub mod pod_security;
pub mod priority;
pub mod pvc_resize;

pub mod service_account;
pub mod storage_protection;
pub mod webhook;

use std::sync::Arc;

use k1s_api::quota;

use serde_json::Value;

use crate::reader::Reader;
use crate::registry::ResourceType;
use crate::status::ApiError;
use crate::user::UserInfo;
pub use chain::Chain;
use plugins::Plugin;

/// What is being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

/// One write, as admission sees it.
pub struct Request<'a> {
    pub res: &'a ResourceType,
    pub operation: Operation,
    /// `status`, `binding`, ... for subresource writes.
    pub subresource: Option<&'a str>,
    /// `None` for the server's own writes.
    pub user: Option<&'a UserInfo>,
    pub dry_run: bool,
    /// On creates in a namespace: the namespace, as NamespaceLifecycle just read it.
    pub namespace: Option<&'a Value>,
}

impl Request<'_> {
    /// `(group, kind)` of the object.
    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.res.group == group && self.res.kind == kind && self.res.custom.is_none()
    }

    /// The request as the webhooks see it.
    pub fn webhook_attributes<'b>(&'b self, ns: &'b str, name: &'b str) -> webhook::Attributes<'b> {
        webhook::Attributes {
            res: self.res,
            operation: match self.operation {
                Operation::Create => "CREATE",
                Operation::Update => "UPDATE",
            },
            subresource: self.subresource.unwrap_or(""),
            namespace: ns,
            name,
            user: self.user,
            dry_run: self.dry_run,
        }
    }

    /// A create of the object itself (not a subresource).
    pub fn creating(&self) -> bool {
        self.operation == Operation::Create && self.subresource.is_none()
    }
}

/// Runs the admission plugins over a write.
#[async_trait::async_trait]
pub trait Admission: Send + Sync {
    /// Admits `obj` (changing it), or refuses it. Returns warnings for the client.
    async fn admit(
        &self,
        rest: &dyn Reader,
        req: &Request<'_>,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError>;

    /// The validating admission that runs after the kind's own validation (creates and
    /// updates), and on deletes (`obj` absent) and connects (`obj`: the options). Returns
    /// warnings for the client.
    async fn validate(
        &self,
        _rest: &dyn Reader,
        _attributes: &webhook::Attributes<'_>,
        _obj: Option<&Value>,
        _old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        Ok(Vec::new())
    }

    /// Whether `plugin` is on (all are, unless configured otherwise).
    fn enabled(&self, _plugin: Plugin) -> bool {
        true
    }
}

/// Upstream's admission refusal: `pods "x" is forbidden: <why>`.
pub fn forbidden(res: &ResourceType, obj: &Value, why: impl std::fmt::Display) -> ApiError {
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let mut e = ApiError::new(
        403,
        "Forbidden",
        format!("{} {name:?} is forbidden: {why}", res.qualified()),
    );
    e.details = Some(Box::new(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusDetails {
            name: Some(name.into()),
            group: Some(res.group.clone()),
            kind: Some(res.plural.clone()),
            ..Default::default()
        },
    ));
    e
}

/// The objects of `group`/`resource` in `ns` (`None`: cluster-scoped), shared with every
/// other create that reads them (see `Rest::list_shared`): for the few objects of a kind that
/// admission reads on every create.
async fn list_in(
    rest: &dyn Reader,
    group: &str,
    resource: &str,
    ns: Option<&str>,
) -> Result<Vec<Arc<Value>>, ApiError> {
    match rest.served(group, resource) {
        Some(res) => rest.list_shared(&res, ns).await,
        None => Ok(Vec::new()),
    }
}

/// PodSecurity: enforce on pods (creates and significant updates), warn on workload
/// templates, by the namespace's labels.
async fn pod_security_check(
    rest: &dyn Reader,
    req: &Request<'_>,
    config: &config::PodSecurityConfig,
    ns: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    let is_pod = req.is("", "Pod");
    let template = pod_security::pod_template(&req.res.plural, obj);
    if !is_pod && template.is_none() {
        return Ok(Vec::new());
    }
    let spec = match template {
        Some(t) => &t["spec"],
        None => &obj["spec"],
    };
    if config.exempt(req.user.map(|u| u.name.as_str()), ns, spec) {
        return Ok(Vec::new());
    }
    if is_pod
        && let Some(old) = old
        && !pod_security::is_significant_pod_update(obj, old)
    {
        return Ok(Vec::new());
    }
    let Some(nsres) = rest.builtin_kind("", "Namespace") else {
        return Ok(Vec::new());
    };
    let read;
    let namespace = match req.namespace {
        Some(n) => n,
        None => match rest.get_remembered(&nsres, None, ns).await {
            Ok(n) => {
                read = n;
                &read
            }
            Err(e) if e.code == 404 => return Ok(Vec::new()),
            Err(e) => return Err(e),
        },
    };
    let labels = &namespace["metadata"]["labels"];
    if is_pod {
        pod_security::admit_pod(&config.defaults, labels, obj).map_err(|m| {
            let mut e = forbidden(req.res, obj, "");
            e.message = m.to_string();
            e
        })
    } else {
        Ok(pod_security::warn_template(
            &config.defaults,
            labels,
            &req.res.plural,
            obj,
        ))
    }
}

/// How often a charge is retried when another write charged the same quota first.
const QUOTA_RETRIES: usize = 10;

/// ResourceQuota, as upstream's admission plugin: every quota of the namespace that tracks
/// this write must have room for it, and the write is charged to the quota's `status.used`
/// *before* the object is stored, with a compare-and-swap on the quota's resourceVersion. Two
/// writes racing for the last unit cannot both win: the second one's swap fails, and it is
/// evaluated again against the usage that now includes the first. The ResourceQuota
/// controller lowers `status.used` after deletes (and corrects charges of writes that failed
/// later). A quota whose usage was never computed (new, or a new resource in `spec.hard`) is
/// computed here from the namespace's objects instead of refusing the write as upstream does
/// ("status unknown for quota") until the controller catches up.
async fn quota_check(
    rest: &dyn Reader,
    req: &Request<'_>,
    ns: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let (resource, group) = (req.res.plural.as_str(), req.res.group.as_str());
    let op = if req.operation == Operation::Create {
        "CREATE"
    } else {
        "UPDATE"
    };
    if !quota::handles(resource, group, op) {
        return Ok(());
    }
    let Some(qres) = rest.builtin_kind("", "ResourceQuota") else {
        return Ok(());
    };
    // Quotas charged already (a retry only re-evaluates the ones whose swap failed).
    let mut charged: Vec<String> = Vec::new();
    for _ in 0..QUOTA_RETRIES {
        let quotas = list_in(rest, "", "resourcequotas", Some(ns)).await?;
        let mut conflicted = false;
        for q in quotas {
            let name = q["metadata"]["name"].as_str().unwrap_or("").to_owned();
            if charged.contains(&name) {
                continue;
            }
            let mut current = Value::clone(&q);
            current["status"]["hard"] = q["spec"]["hard"].clone();
            if !quota::matches(&current, resource, group, obj) {
                continue;
            }
            if !quota::usage_known(&current, resource, group) {
                current["status"]["used"] = recompute_usage(rest, &q, ns).await?.to_json();
            }
            let used = match quota::admit(&current, resource, group, obj, old) {
                Ok(Some(used)) => used,
                Ok(None) => continue,
                Err(m) => return Err(forbidden(req.res, obj, m)),
            };
            if req.dry_run {
                continue;
            }
            let mut next = Value::clone(&q);
            next["status"] =
                serde_json::json!({"hard": current["status"]["hard"], "used": used.to_json()});
            match rest.update_status(&qres, Some(ns), &name, next).await {
                Ok(_) => charged.push(name),
                Err(e) if e.code == 409 => {
                    // Read again: the quota changed since it was listed.
                    rest.forget_shared_list(&qres, Some(ns));
                    conflicted = true;
                }
                // Deleted meanwhile: nothing to charge.
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        if !conflicted {
            return Ok(());
        }
    }
    let mut e = ApiError::new(
        409,
        "Conflict",
        "Operation cannot be fulfilled on resourcequotas: too many concurrent writes charged the same quota; try again",
    );
    e.details = None;
    Err(e)
}

/// A quota's usage from every object of the namespace it counts.
async fn recompute_usage(
    rest: &dyn Reader,
    q: &Value,
    ns: &str,
) -> Result<k1s_api::quantity::ResourceList, ApiError> {
    let mut lists = Vec::new();
    for (g, r) in quota::needed_resources(q) {
        // Not `list_in`: these can be many (every pod of the namespace), read once.
        let items = match rest.served(&g, &r) {
            Some(res) => rest.list(&res, Some(ns)).await?,
            None => Vec::new(),
        };
        lists.push((r.clone(), g.clone(), items));
    }
    let objects: Vec<(&str, &str, &[Value])> = lists
        .iter()
        .map(|(r, g, items)| (r.as_str(), g.as_str(), items.as_slice()))
        .collect();
    Ok(quota::recompute(q, &objects))
}
