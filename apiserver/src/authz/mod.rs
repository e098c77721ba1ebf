//! Authorization: may this user do this?
//!
//! Owns the request attributes upstream's authorizers see ([`Attributes`], built from the HTTP
//! request as kube-apiserver's RequestInfo does) and the chain k3s configures
//! (`--authorization-mode=Node,RBAC`): the [`node`] authorizer for kubelet identities, then
//! [`rbac`]. The bootstrap policy is in [`policy`], ClusterRole aggregation in
//! [`aggregation`], the escalation checks on RBAC writes in [`escalation`], and the review APIs
//! (SubjectAccessReview and friends, `kubectl auth can-i`) in [`reviews`].

pub mod aggregation;
pub mod escalation;
pub mod node;
pub mod policy;
pub mod rbac;
pub mod reviews;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k1s_store::Store;
use tokio_util::sync::CancellationToken;

use crate::http::request::{ApiPath, flag, parse};
use crate::status::ApiError;
use crate::user::UserInfo;

/// What a request asks to do, as authorizers see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    pub user: UserInfo,
    pub verb: String,
    /// True for requests under `/api` and `/apis` that address a resource.
    pub resource_request: bool,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// For non-resource requests.
    pub path: String,
    /// `fieldSelector` of list and watch requests, as sent.
    pub field_selector: Option<String>,
}

impl Attributes {
    /// The attributes of an HTTP request (upstream's RequestInfo rules).
    pub fn from_request(
        user: &UserInfo,
        method: &http::Method,
        path: &str,
        query: &HashMap<String, String>,
    ) -> Self {
        let lower = method.as_str().to_ascii_lowercase();
        let mut a = Self {
            user: user.clone(),
            path: path.to_owned(),
            ..Default::default()
        };
        let t = match parse(path) {
            ApiPath::Resource(t) if !t.resource.is_empty() => t,
            _ => {
                a.verb = lower;
                return a;
            }
        };
        a.resource_request = true;
        a.api_group = t.group;
        a.api_version = t.version;
        a.resource = t.resource;
        a.subresource = t.subresource.unwrap_or_default();
        a.namespace = t.namespace.unwrap_or_default();
        a.name = t.name.unwrap_or_default();
        let watch = t.watch_path || flag(query, "watch") == Some(true);
        a.verb = match *method {
            http::Method::GET | http::Method::HEAD if watch => "watch",
            http::Method::GET | http::Method::HEAD if a.name.is_empty() => "list",
            http::Method::GET | http::Method::HEAD => "get",
            http::Method::POST => "create",
            http::Method::PUT => "update",
            http::Method::PATCH => "patch",
            http::Method::DELETE if a.name.is_empty() => "deletecollection",
            http::Method::DELETE => "delete",
            _ => lower.as_str(),
        }
        .to_owned();
        // A namespace is in itself.
        if a.api_group.is_empty() && a.resource == "namespaces" && !a.name.is_empty() {
            a.namespace = a.name.clone();
        }
        if matches!(a.verb.as_str(), "list" | "watch") {
            a.field_selector = query.get("fieldSelector").cloned();
            // A list or watch of one object by name is authorized as for that name.
            if let Some(name) = a
                .field_selector
                .as_deref()
                .and_then(|fs| single_name(fs, "metadata.name"))
            {
                a.name = name.to_owned();
            }
        }
        a
    }

    /// `pods` or `pods/status`.
    pub fn full_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// The value of a field selector that requires exactly `field == value` (possibly among
/// other requirements).
pub fn single_name<'a>(selector: &'a str, field: &str) -> Option<&'a str> {
    selector.split(',').find_map(|req| {
        let (k, v) = req
            .split_once("==")
            .or_else(|| req.split_once('=').filter(|(k, _)| !k.ends_with('!')))?;
        (k.trim() == field).then(|| v.trim())
    })
}

/// An authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(String),
    /// No opinion, with a reason to show if nobody allows.
    NoOpinion(String),
}

/// The authorizer chain.
pub struct Authorizer {
    pub rbac: Arc<rbac::Rbac>,
    pub node: Arc<node::NodeAuthorizer>,
    store: Arc<dyn Store>,
    /// How the mirrors read stored objects.
    encryption: Arc<crate::encryption::Transformer>,
}

/// How long a refusal waits for the mirrors to catch up with writes just made.
const SYNC_TIMEOUT: Duration = Duration::from_secs(2);

impl Authorizer {
    /// The chain over `store` (its values read through `encryption`); its mirrors are kept
    /// current by the tasks [`Self::run`] starts.
    pub fn new(
        store: Arc<dyn Store>,
        encryption: Arc<crate::encryption::Transformer>,
    ) -> Arc<Self> {
        Arc::new(Self {
            rbac: rbac::Rbac::new(),
            node: node::NodeAuthorizer::new(),
            store,
            encryption,
        })
    }

    /// Runs the mirrors until `cancel`; the node graph's pods are read as `rest` decodes them.
    pub fn run(
        &self,
        tasks: &tokio_util::task::TaskTracker,
        rest: &Arc<crate::rest::Rest>,
        cancel: &CancellationToken,
    ) {
        self.rbac
            .spawn(tasks, self.store.clone(), self.encryption.clone(), cancel);
        self.node.spawn(
            tasks,
            self.store.clone(),
            self.encryption.clone(),
            rest,
            cancel,
        );
    }

    /// The decision on `a`, with the reason of a refusal. A refusal is only given once the
    /// mirrors reflect the store as of the request (so a binding created just before counts).
    pub async fn authorize(&self, a: &Attributes) -> Decision {
        let d = self.decide(a);
        if d == Decision::Allow {
            return d;
        }
        let (rbac, node) = tokio::join!(
            self.rbac.sync(self.store.as_ref(), SYNC_TIMEOUT),
            self.node.sync(self.store.as_ref(), SYNC_TIMEOUT),
        );
        if !rbac || !node {
            tracing::warn!("authorization: the policy mirrors lag behind the store");
        }
        self.decide(a)
    }

    /// The decision from the mirrors as they are.
    pub fn decide(&self, a: &Attributes) -> Decision {
        let mut reason = String::new();
        if a.user.node_name().is_some() {
            match self.node.authorize(a) {
                Decision::Allow => return Decision::Allow,
                Decision::Deny(r) => return Decision::Deny(r),
                Decision::NoOpinion(r) => reason = r,
            }
        }
        match self.rbac.authorize(a) {
            Decision::Allow => Decision::Allow,
            Decision::Deny(r) => Decision::Deny(r),
            Decision::NoOpinion(r) => {
                Decision::NoOpinion(if reason.is_empty() { r } else { reason })
            }
        }
    }

    /// Authorizes `a` or returns upstream's 403.
    pub async fn check(&self, a: &Attributes) -> Result<(), ApiError> {
        match self.authorize(a).await {
            Decision::Allow => Ok(()),
            Decision::Deny(r) | Decision::NoOpinion(r) => Err(forbidden(a, &r)),
        }
    }
}

/// Upstream's 403 for a refused request: `pods "x" is forbidden: User "u" cannot get resource
/// "pods" in API group "" in the namespace "d"[: reason]`.
pub fn forbidden(a: &Attributes, reason: &str) -> ApiError {
    let suffix = if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    };
    if !a.resource_request {
        return ApiError::new(
            403,
            "Forbidden",
            format!(
                "forbidden: User {:?} cannot {} path {:?}{suffix}",
                a.user.name, a.verb, a.path
            ),
        );
    }
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_owned()
    } else {
        format!("in the namespace {:?}", a.namespace)
    };
    let what = format!(
        "User {:?} cannot {} resource {:?} in API group {:?} {scope}{suffix}",
        a.user.name,
        a.verb,
        a.full_resource(),
        a.api_group
    );
    let qualified = if a.api_group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.api_group)
    };
    let message = if a.name.is_empty() {
        format!("{qualified} is forbidden: {what}")
    } else {
        format!("{qualified} {:?} is forbidden: {what}", a.name)
    };
    let mut e = ApiError::new(403, "Forbidden", message);
    e.details = Some(Box::new(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusDetails {
            name: (!a.name.is_empty()).then(|| a.name.clone()),
            group: Some(a.api_group.clone()),
            kind: Some(a.resource.clone()),
            ..Default::default()
        },
    ));
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: http::Method, path: &str, q: &str) -> Attributes {
        let q = crate::http::request::query(Some(q));
        Attributes::from_request(&UserInfo::new("u", []), &method, path, &q)
    }

    #[test]
    fn request_info_verbs() {
        use http::Method as M;
        let a = attrs(M::GET, "/api/v1/namespaces/d/pods", "");
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("list", "d"));
        assert_eq!(attrs(M::GET, "/api/v1/pods", "watch=true").verb, "watch");
        assert_eq!(attrs(M::GET, "/api/v1/watch/pods", "").verb, "watch");
        assert_eq!(attrs(M::GET, "/api/v1/namespaces/d/pods/p", "").verb, "get");
        assert_eq!(
            attrs(M::DELETE, "/api/v1/namespaces/d/pods", "").verb,
            "deletecollection"
        );
        let a = attrs(M::POST, "/api/v1/namespaces/d/pods/p/eviction", "");
        assert_eq!(
            (a.verb.as_str(), a.full_resource().as_str()),
            ("create", "pods/eviction")
        );
        let a = attrs(M::GET, "/api/v1/namespaces/d", "");
        assert_eq!((a.namespace.as_str(), a.name.as_str()), ("d", "d"));
        let a = attrs(M::GET, "/healthz", "");
        assert!(!a.resource_request);
        assert_eq!(a.verb, "get");
        let a = attrs(M::GET, "/apis/apps/v1", "");
        assert!(!a.resource_request);
        let a = attrs(
            M::GET,
            "/api/v1/namespaces/d/secrets",
            "fieldSelector=metadata.name%3Ds1",
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("list", "s1"));
    }

    #[test]
    fn forbidden_messages_match_upstream() {
        let a = attrs(http::Method::GET, "/api/v1/namespaces/d/pods/p", "");
        let e = forbidden(&a, "");
        assert_eq!(
            e.message,
            r#"pods "p" is forbidden: User "u" cannot get resource "pods" in API group "" in the namespace "d""#
        );
        let a = attrs(http::Method::GET, "/apis/apps/v1/deployments", "");
        assert_eq!(
            forbidden(&a, "").message,
            r#"deployments.apps is forbidden: User "u" cannot list resource "deployments" in API group "apps" at the cluster scope"#
        );
        let a = attrs(http::Method::GET, "/metrics", "");
        assert_eq!(
            forbidden(&a, "").message,
            r#"forbidden: User "u" cannot get path "/metrics""#
        );
    }

    #[test]
    fn field_selector_names() {
        assert_eq!(single_name("metadata.name=a", "metadata.name"), Some("a"));
        assert_eq!(
            single_name("x=1,metadata.name==b", "metadata.name"),
            Some("b")
        );
        assert_eq!(single_name("metadata.name!=a", "metadata.name"), None);
        assert_eq!(single_name("spec.nodeName=n", "metadata.name"), None);
    }
}
