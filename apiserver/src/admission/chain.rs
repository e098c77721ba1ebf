//! The admission chain: upstream's default plugins as an ordered list of [`Step`]s behind one
//! trait, built once from the configuration (a disabled plugin is not in the list). Each step
//! says which requests it handles (upstream's `Handles`) and admits them; the chain runs the
//! handling steps in order and collects their warnings. The order is upstream's
//! (`kube-apiserver`'s recommended plugin order), written once in [`Chain::new`].
//!
//! The steps are thin: each calls its plugin's module ([`super::limit_ranger`],
//! [`super::service_account`], ...), which owns the plugin's rules.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use super::plugins::Plugin;
use super::{
    Admission, Operation, Request, certificate_approval, config, default_storage_class,
    default_tolerations, forbidden, limit_ranger, list_in, node_restriction, pod_security_check,
    priority, pvc_resize, quota_check, service_account, storage_protection, webhook,
};
use crate::authz::Authorizer;
use crate::reader::Reader;
use crate::status::ApiError;

/// What every step sees besides the request and the object.
pub struct Context<'a> {
    pub rest: &'a dyn Reader,
    /// The object's namespace as the request named it (empty: cluster-scoped).
    pub ns: &'a str,
}

/// One mutating (or validating-before-storage) plugin of the chain.
#[async_trait::async_trait]
pub trait Step: Send + Sync {
    /// The plugin's name for `--disable-admission-plugins`; `None`: always on.
    fn plugin(&self) -> Option<Plugin>;

    /// Whether the plugin looks at this request at all.
    fn handles(&self, req: &Request<'_>, ns: &str) -> bool;

    /// Admits `obj` (changing it), or refuses it; returns warnings for the client.
    async fn admit(
        &self,
        cx: &Context<'_>,
        req: &Request<'_>,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError>;
}

/// The default chain.
pub struct Chain {
    steps: Vec<Box<dyn Step>>,
    disabled: BTreeSet<Plugin>,
}

impl Chain {
    /// Upstream's order, without the plugins `config` disables. NamespaceLifecycle runs
    /// before admission, in [`crate::rest`]; ValidatingAdmissionWebhook runs from
    /// [`Admission::validate`].
    pub fn new(authz: Arc<Authorizer>, config: config::AdmissionConfig) -> Self {
        let steps: Vec<Box<dyn Step>> = vec![
            Box::new(LimitRanger),
            Box::new(ServiceAccount),
            Box::new(NodeRestriction),
            Box::new(CertificateApproval(authz.clone())),
            Box::new(Priority),
            Box::new(DefaultTolerationSeconds),
            Box::new(DefaultStorageClass),
            Box::new(PersistentVolumeClaimResize),
            Box::new(StorageObjectInUseProtection),
            Box::new(MutatingAdmissionWebhook),
            Box::new(RbacEscalation(authz)),
            Box::new(PodSecurity(config.pod_security.clone())),
            Box::new(ResourceQuota),
        ];
        let disabled = config.disabled;
        Self {
            steps: steps
                .into_iter()
                .filter(|s| s.plugin().is_none_or(|p| !disabled.contains(&p)))
                .collect(),
            disabled,
        }
    }

    /// The plugins in the chain, in order (`None`: the RBAC escalation checks).
    pub fn plugins(&self) -> Vec<Option<Plugin>> {
        self.steps.iter().map(|s| s.plugin()).collect()
    }
}

#[async_trait::async_trait]
impl Admission for Chain {
    fn enabled(&self, plugin: Plugin) -> bool {
        !self.disabled.contains(&plugin)
    }

    async fn validate(
        &self,
        rest: &dyn Reader,
        attributes: &webhook::Attributes<'_>,
        obj: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        if !self.enabled(Plugin::ValidatingAdmissionWebhook) {
            return Ok(Vec::new());
        }
        webhook::validate(rest, attributes, obj, old).await
    }

    async fn admit(
        &self,
        rest: &dyn Reader,
        req: &Request<'_>,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let cx = Context { rest, ns: &ns };
        let mut warnings = Vec::new();
        for step in &self.steps {
            if step.handles(req, &ns) {
                warnings.extend(step.admit(&cx, req, obj, old).await?);
            }
        }
        Ok(warnings)
    }
}

fn pod_create(req: &Request<'_>) -> bool {
    req.creating() && req.is("", "Pod")
}

struct LimitRanger;

#[async_trait::async_trait]
impl Step for LimitRanger {
    fn plugin(&self) -> Option<Plugin> {
        Some(Plugin::LimitRanger)
    }

    fn handles(&self, req: &Request<'_>, ns: &str) -> bool {
        let pvc_write = req.is("", "PersistentVolumeClaim") && req.subresource.is_none();
        (pod_create(req) || pvc_write) && !ns.is_empty()
    }

    async fn admit(
        &self,
        cx: &Context<'_>,
        req: &Request<'_>,
        obj: &mut Value,
        _old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        let ranges = list_in(cx.rest, "", "limitranges", Some(cx.ns)).await?;
        if !ranges.is_empty() {
            limit_ranger::admit(&req.res.plural, obj, &ranges)
                .map_err(|m| forbidden(req.res, obj, m))?;
            if pod_create(req) {
                // Defaulted resources can change the class.
                obj["status"]["qosClass"] =
                    serde_json::json!(crate::registry::core::pod::qos_class(obj));
            }
        }
        Ok(Vec::new())
    }
}

struct ServiceAccount;

#[async_trait::async_trait]
impl Step for ServiceAccount {
    fn plugin(&self) -> Option<Plugin> {
        Some(Plugin::ServiceAccount)
    }

    fn handles(&self, req: &Request<'_>, _ns: &str) -> bool {
        pod_create(req)
    }

    async fn admit(
        &self,
        cx: &Context<'_>,
        req: &Request<'_>,
        obj: &mut Value,
        _old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        service_account::admit(cx.rest, req, obj).await?;
        Ok(Vec::new())
    }
}

struct NodeRestriction;

#[async_trait::async_trait]
impl Step for NodeRestriction {
    fn plugin(&self) -> Option<Plugin> {
        Some(Plugin::NodeRestriction)
    }

    fn handles(&self, req: &Request<'_>, _ns: &str) -> bool {
        req.user.is_some()
    }

    async fn admit(
        &self,
        _cx: &Context<'_>,
        req: &Request<'_>,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        if let Some(user) = req.user {
            node_restriction::admit(req, user, obj, old)?;
        }
        Ok(Vec::new())
    }
}

struct CertificateApproval(Arc<Authorizer>);

#[async_trait::async_trait]
impl Step for CertificateApproval {
    fn plugin(&self) -> Option<Plugin> {
        Some(Plugin::CertificateApproval)
    }

    fn handles(&self, req: &Request<'_>, _ns: &str) -> bool {
        req.user.is_some()
    }

    async fn admit(
        &self,
        _cx: &Context<'_>,
        req: &Request<'_>,
        obj: &mut Value,
        _old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        if let Some(user) = req.user {
            certificate_approval::admit(&self.0, req, user, obj).await?;
        }
        Ok(Vec::new())
    }
}

struct Priority;

#[async_trait::async_trait]
impl Step for Priority {
    fn plugin(&self) -> Option<Plugin> {
        Some(Plugin::Priority)
    }

    fn handles(&self, req: &Request<'_>, _ns: &str) -> bool {
        pod_create(req)
    }

    async fn admit(
        &self,
        cx: &Context<'_>,
        req: &Request<'_>,
        obj: &mut Value,
        _old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        priority::admit(cx.rest, req, obj).await?;
        Ok(Vec::new())
    }
}

struct DefaultTolerationSeconds;

#[async_trait::async_trait]
impl Step for DefaultTolerationSeconds {
    fn plugin(&self) -> Option<Plugin> {
        Some(Plugin::DefaultTolerationSeconds)
    }

    fn handles(&self, req: &Request<'_>, _ns: &str) -> bool {
        pod_create(req)
    }

    async fn admit(
        &self,
        _cx: &Context<'_>,
        _req: &Request<'_>,
        obj: &mut Value,
        _old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        default_tolerations::admit(obj);
        Ok(Vec::new())
    }
}

struct DefaultStorageClass;

#[async_trait::async_trait]
impl Step for DefaultStorageClass {
    fn plugin(&self) -> Option<Plugin> {
        Some(Plugin::DefaultStorageClass)
    }

    fn handles(&self, req: &Request<'_>, _ns: &str) -> bool {
        req.creating() && req.is("", "PersistentVolumeClaim")
    }

    async fn admit(
        &self,
        cx: &Context<'_>,
        _req: &Request<'_>,
        obj: &mut Value,
        _old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        default_storage_class::admit(cx.rest, obj).await?;
        Ok(Vec::new())
    }
}

struct PersistentVolumeClaimResize;

#[async_trait::async_trait]
impl Step for PersistentVolumeClaimResize {
    fn plugin(&self) -> Option<Plugin> {
        Some(Plugin::PersistentVolumeClaimResize)
    }

    fn handles(&self, req: &Request<'_>, _ns: &str) -> bool {
        req.operation == Operation::Update
            && req.subresource.is_none()
            && req.is("", "PersistentVolumeClaim")
    }

    async fn admit(
        &self,
        cx: &Context<'_>,
        req: &Request<'_>,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        if let Some(old) = old {
            pvc_resize::admit(cx.rest, req, obj, old).await?;
        }
        Ok(Vec::new())
    }
}

struct StorageObjectInUseProtection;

#[async_trait::async_trait]
impl Step for StorageObjectInUseProtection {
    fn plugin(&self) -> Option<Plugin> {
        Some(Plugin::StorageObjectInUseProtection)
    }

    fn handles(&self, req: &Request<'_>, _ns: &str) -> bool {
        req.creating() && (req.is("", "PersistentVolumeClaim") || req.is("", "PersistentVolume"))
    }

    async fn admit(
        &self,
        _cx: &Context<'_>,
        req: &Request<'_>,
        obj: &mut Value,
        _old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        storage_protection::admit(&req.res.kind, obj);
        Ok(Vec::new())
    }
}

struct MutatingAdmissionWebhook;

#[async_trait::async_trait]
impl Step for MutatingAdmissionWebhook {
    fn plugin(&self) -> Option<Plugin> {
        Some(Plugin::MutatingAdmissionWebhook)
    }

    fn handles(&self, _req: &Request<'_>, _ns: &str) -> bool {
        true
    }

    async fn admit(
        &self,
        cx: &Context<'_>,
        req: &Request<'_>,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_owned();
        let attributes = req.webhook_attributes(cx.ns, &name);
        let (said, changed) = webhook::mutate(cx.rest, &attributes, obj, old).await?;
        if changed {
            // What a webhook added is decoded as a client's body would be (unknown fields
            // dropped, custom resources pruned) and defaulted again, as upstream does.
            *obj = cx.rest.decode(req.res, obj.take())?;
            req.res.strategy().defaults(obj);
        }
        Ok(said)
    }
}

/// RBAC's escalation checks: upstream does them in the RBAC storage, k1s here; always on.
struct RbacEscalation(Arc<Authorizer>);

#[async_trait::async_trait]
impl Step for RbacEscalation {
    fn plugin(&self) -> Option<Plugin> {
        None
    }

    fn handles(&self, req: &Request<'_>, _ns: &str) -> bool {
        req.user.is_some_and(|u| !u.in_group(crate::auth::MASTERS))
            && req.res.group == "rbac.authorization.k8s.io"
            && req.subresource.is_none()
    }

    async fn admit(
        &self,
        _cx: &Context<'_>,
        req: &Request<'_>,
        obj: &mut Value,
        _old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        if let Some(user) = req.user {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
            crate::authz::escalation::check(&self.0, user, &req.res.plural, ns, obj)?;
        }
        Ok(Vec::new())
    }
}

struct PodSecurity(config::PodSecurityConfig);

#[async_trait::async_trait]
impl Step for PodSecurity {
    fn plugin(&self) -> Option<Plugin> {
        Some(Plugin::PodSecurity)
    }

    fn handles(&self, req: &Request<'_>, ns: &str) -> bool {
        !ns.is_empty() && req.subresource.is_none()
    }

    async fn admit(
        &self,
        cx: &Context<'_>,
        req: &Request<'_>,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        pod_security_check(cx.rest, req, &self.0, cx.ns, obj, old).await
    }
}

struct ResourceQuota;

#[async_trait::async_trait]
impl Step for ResourceQuota {
    fn plugin(&self) -> Option<Plugin> {
        Some(Plugin::ResourceQuota)
    }

    fn handles(&self, req: &Request<'_>, ns: &str) -> bool {
        !ns.is_empty() && req.subresource.is_none()
    }

    async fn admit(
        &self,
        cx: &Context<'_>,
        req: &Request<'_>,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        quota_check(cx.rest, req, cx.ns, obj, old).await?;
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_runs_upstreams_order_without_disabled_plugins() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn k1s_store::Store> = Arc::new(
            k1s_store::redb::RedbStore::open(k1s_store::redb::RedbConfig::new(
                dir.path().join("s.redb"),
            ))
            .unwrap(),
        );
        let authz = Authorizer::new(store, Arc::new(crate::encryption::Transformer::identity()));
        let all = Chain::new(authz.clone(), config::AdmissionConfig::default());
        // Upstream's order (NamespaceLifecycle runs in rest; ValidatingAdmissionWebhook from
        // `validate`), the RBAC checks after the mutating webhooks.
        let mut want: Vec<Option<Plugin>> = Plugin::ALL
            .into_iter()
            .filter(|p| {
                !matches!(
                    p,
                    Plugin::NamespaceLifecycle | Plugin::ValidatingAdmissionWebhook
                )
            })
            .map(Some)
            .collect();
        let webhook = want
            .iter()
            .position(|p| *p == Some(Plugin::MutatingAdmissionWebhook))
            .unwrap();
        want.insert(webhook + 1, None);
        assert_eq!(all.plugins(), want);
        assert!(all.enabled(Plugin::ValidatingAdmissionWebhook));
        assert!(all.enabled(Plugin::NamespaceLifecycle));

        let config = config::AdmissionConfig {
            disabled: [Plugin::LimitRanger, Plugin::ValidatingAdmissionWebhook]
                .into_iter()
                .collect(),
            ..config::AdmissionConfig::default()
        };
        let some = Chain::new(authz, config);
        assert!(!some.enabled(Plugin::LimitRanger));
        assert!(!some.enabled(Plugin::ValidatingAdmissionWebhook));
        assert!(some.enabled(Plugin::ResourceQuota));
        assert_eq!(some.plugins().len(), want.len() - 1);
    }
}
