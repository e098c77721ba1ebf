//! Create, update and delete: metadata rules, decoding with field validation, the status
//! split, preconditions, finalizers and graceful deletion.

use k1s_store::{Revision, StoreError};
use serde_json::{Value, json};

use std::sync::Arc;

use super::{Rest, meta, strategy};
use crate::admission::plugins::Plugin;
use crate::admission::{Operation, Request as AdmissionRequest};
use crate::registry::side_effects::{Claims, Outcome};
use crate::registry::strategy::keep_metadata;
use crate::registry::{DecodeError, ResourceType};
use crate::status::ApiError;

/// `fieldValidation`: what to do with unknown fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    Ignore,
    /// Upstream's default: accept, and warn.
    #[default]
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        match s {
            "Ignore" => Ok(Self::Ignore),
            "Warn" | "" => Ok(Self::Warn),
            "Strict" => Ok(Self::Strict),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\" or \"Strict\", got {other:?}"
            ))),
        }
    }
}

/// Options shared by create, update and patch.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer, but store nothing.
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    pub field_manager: Option<String>,
    /// Set by server-side apply, which computes `managedFields` itself.
    pub(crate) fields_tracked: bool,
    /// Who writes; `None` for the server's own components.
    pub user: Option<Arc<crate::user::UserInfo>>,
}

impl WriteOptions {
    fn manager(&self) -> &str {
        self.field_manager
            .as_deref()
            .filter(|m| !m.is_empty())
            .unwrap_or("unknown")
    }
}

/// The result of a write.
#[derive(Debug, Clone)]
pub struct Written {
    pub object: Value,
    /// True when the write created the object (201), false for an update (200).
    pub created: bool,
    /// `Warning` headers for the client (unknown fields under `fieldValidation=Warn`).
    pub warnings: Vec<String>,
}

/// `DeleteOptions` as they matter here.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    /// `Foreground`, `Background` or `Orphan`.
    pub propagation_policy: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub dry_run: bool,
    /// Who deletes; `None` for the server's own components.
    pub user: Option<Arc<crate::user::UserInfo>>,
}

impl DeleteOptions {
    /// Reads a `DeleteOptions` body (JSON), merged over query-parameter options.
    pub fn merge_body(&mut self, body: &Value) -> Result<(), ApiError> {
        if let Some(g) = body.get("gracePeriodSeconds").filter(|v| !v.is_null()) {
            self.grace_period_seconds =
                Some(g.as_i64().ok_or_else(|| {
                    ApiError::bad_request("gracePeriodSeconds must be an integer")
                })?);
        }
        if let Some(p) = body["propagationPolicy"].as_str() {
            self.propagation_policy = Some(p.to_owned());
        }
        if body.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
            self.propagation_policy = Some("Orphan".into());
        }
        if let Some(uid) = body["preconditions"]["uid"].as_str() {
            self.precondition_uid = Some(uid.to_owned());
        }
        if let Some(rv) = body["preconditions"]["resourceVersion"].as_str() {
            self.precondition_resource_version = Some(rv.to_owned());
        }
        if body["dryRun"].as_array().is_some_and(|a| !a.is_empty()) {
            self.dry_run = true;
        }
        Ok(())
    }
}

/// What a delete did.
#[derive(Debug, Clone)]
pub struct Deleted {
    /// The object as deleted, or as it is now while it waits for finalizers or its grace
    /// period.
    pub object: Value,
    /// True when the object is gone from the store.
    pub gone: bool,
}

/// How many times a read-modify-write retries after losing a race.
pub(super) const MAX_RETRIES: usize = 16;

impl Rest {
    /// Decodes a request body as the resource's kind and applies `fieldValidation`.
    pub(crate) fn decode_body(
        &self,
        res: &ResourceType,
        body: Value,
        validation: FieldValidation,
        warnings: &mut Vec<String>,
    ) -> Result<Value, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(format!(
                "{} in version {:?} cannot be handled as a {}: the body is not an object",
                res.kind, res.version, res.kind
            )));
        }
        check_type_meta(res, &body)?;
        let Some(decode) = res.decode else {
            return custom_resource(res, body, validation, warnings);
        };
        let (mut obj, unknown) = decode(&body).map_err(|e| match e {
            DecodeError::Malformed(msg) => ApiError::bad_request(format!(
                "{kind} in version \"{v}\" cannot be handled as a {kind}: {msg}",
                kind = res.kind,
                v = res.version
            )),
        })?;
        report_unknown(unknown, validation, warnings)?;
        // The typed round trip writes `apiVersion`/`kind` itself; keep the request's metadata
        // nulls out of the stored object.
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.retain(|_, v| !v.is_null());
        }
        Ok(obj)
    }

    /// Creates an object in `ns` (or cluster-wide).
    pub async fn create(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let mut warnings = Vec::new();
        let mut obj = self.decode_body(res, body, opts.field_validation, &mut warnings)?;
        self.prepare_create(res, ns, &mut obj)?;
        strategy::set_requestor(res, &mut obj, opts.user.as_deref());
        let lifecycle = self
            .admission
            .get()
            .is_none_or(|a| a.enabled(Plugin::NamespaceLifecycle));
        let namespace = if res.namespaced && lifecycle {
            self.check_namespace_open(meta::namespace(&obj).unwrap_or_default())
                .await?
        } else {
            None
        };
        let req = AdmissionRequest {
            res,
            operation: Operation::Create,
            subresource: None,
            user: opts.user.as_deref(),
            dry_run: opts.dry_run,
            namespace: namespace.as_deref(),
        };
        warnings.extend(self.admit(&req, &mut obj, None).await?);
        strategy::validate(res, &obj, None)?;
        warnings.extend(self.admit_validate(&req, &obj, None).await?);
        self.track_fields(res, None, &mut obj, None, opts)?;
        let name = meta::name(&obj).to_owned();
        if opts.dry_run {
            if self.store.get(&res.key(ns, &name)).await?.is_some() {
                return Err(ApiError::already_exists(res, &name));
            }
            return Ok(Written {
                object: obj,
                created: true,
                warnings,
            });
        }
        let claims = self.begin_side_effects(res, None, &mut obj).await?;
        let key = res.key(meta::namespace(&obj), &name);
        let stored = self.to_storage(res, &obj).await;
        let created = match stored.and_then(|o| self.encode_stored(&key, &o)) {
            Ok(value) => self.store.create(&key, value).await.map_err(|e| match e {
                StoreError::AlreadyExists { .. } => ApiError::already_exists(res, &name),
                other => other.into(),
            }),
            Err(e) => Err(e),
        };
        let outcome = match &created {
            Ok(_) => Outcome::Stored(&obj),
            Err(_) => Outcome::Failed,
        };
        self.finish_side_effects(res, claims, None, outcome).await;
        let rev = created?;
        meta::set_resource_version(&mut obj, rev);
        Ok(Written {
            object: obj,
            created: true,
            warnings,
        })
    }

    /// Records the write in `metadata.managedFields` (operation Update), unless server-side
    /// apply already did.
    pub(crate) fn track_fields(
        &self,
        res: &ResourceType,
        old: Option<&Value>,
        obj: &mut Value,
        subresource: Option<&str>,
        opts: &WriteOptions,
    ) -> Result<(), ApiError> {
        if opts.fields_tracked {
            return Ok(());
        }
        let sub = subresource.filter(|s| matches!(*s, "status" | "scale" | "approval"));
        k1s_apimachinery::apply::record_update(
            res.apply_schema(),
            old,
            obj,
            opts.manager(),
            &res.api_version(),
            sub,
            &meta::now(),
        )
        .map_err(|e| apply_error(res, e))
    }

    /// Fills in server-set metadata of a new object and checks its name and namespace.
    fn prepare_create(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        let kind = res.kind.clone();
        let m = meta::metadata_mut(obj);
        if res.namespaced {
            let body_ns = m.get("namespace").and_then(Value::as_str).unwrap_or("");
            match ns {
                Some(ns) if !body_ns.is_empty() && body_ns != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                Some(ns) => {
                    m.insert("namespace".into(), json!(ns));
                }
                None => {
                    return Err(ApiError::bad_request(format!(
                        "{} is namespaced: create it in a namespace",
                        res.qualified()
                    )));
                }
            }
        } else {
            m.remove("namespace");
        }
        let mut name = m
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if name.is_empty() {
            let prefix = m.get("generateName").and_then(Value::as_str).unwrap_or("");
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    &kind,
                    "",
                    vec![(
                        "metadata.name".into(),
                        "Required value: name or generateName is required".into(),
                    )],
                ));
            }
            name = meta::generate_name(prefix);
            m.insert("name".into(), json!(name));
        }
        if let Some(msg) = meta::validate_name(&res.group, &res.plural, &name) {
            return Err(ApiError::invalid(
                &kind,
                &name,
                vec![(
                    "metadata.name".into(),
                    format!("Invalid value: {name:?}: {msg}"),
                )],
            ));
        }
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert("creationTimestamp".into(), json!(meta::now()));
        for k in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            m.remove(k);
        }
        if res.generation || res.decode.is_none() {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
        strategy::prepare_create(res, obj);
        Ok(())
    }

    /// NamespaceLifecycle: no creates in a missing or terminating namespace. Returns the
    /// namespace, for the admission plugins that read it too.
    async fn check_namespace_open(&self, ns: &str) -> Result<Option<Arc<Value>>, ApiError> {
        let Some(nsres) = self.registry.builtin_kind("", "Namespace") else {
            return Ok(None);
        };
        match self.get_remembered(&nsres, None, ns).await {
            Ok(n) if meta::is_deleting(&n) || n["status"]["phase"] == "Terminating" => {
                Err(ApiError::new(
                    403,
                    "Forbidden",
                    format!(
                        "unable to create new content in namespace {ns} because it is being terminated"
                    ),
                ))
            }
            Ok(n) => Ok(Some(n)),
            Err(e) if e.code == 404 => Err(ApiError::not_found(&nsres, ns)),
            Err(e) => Err(e),
        }
    }

    /// Replaces an object (PUT), or its status (`subresource` = `status`).
    pub async fn update(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
        body: Value,
        subresource: Option<&str>,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let mut warnings = Vec::new();
        let new = self.decode_body(res, body, opts.field_validation, &mut warnings)?;
        let body_name = meta::name(&new);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if let (true, Some(ns), Some(body_ns)) = (res.namespaced, ns, meta::namespace(&new))
            && body_ns != ns
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let precondition = meta::parse_resource_version(
            new["metadata"]["resourceVersion"].as_str().unwrap_or(""),
        )?;
        // Without a resourceVersion the update is unconditional (upstream's
        // `AllowUnconditionalUpdate`): a concurrent writer makes it read again and retry,
        // instead of failing with a conflict the client never asked to be checked.
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (old, old_rev) = self.get_with_rev(res, ns, name).await?;
            if let Some(p) = precondition
                && p != old_rev
            {
                return Err(ApiError::conflict(res, name));
            }
            match self
                .replace(res, ns, name, &old, old_rev, new.clone(), subresource, opts)
                .await
            {
                Err(e) if e.code == 409 && precondition.is_none() && attempt < MAX_RETRIES => {}
                Err(e) => return Err(e),
                Ok(mut w) => {
                    w.warnings.extend(warnings);
                    return Ok(w);
                }
            }
        }
    }

    /// Writes `new` over `old` (read at `old_rev`), applying the update rules.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn replace(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
        old: &Value,
        old_rev: Revision,
        new: Value,
        subresource: Option<&str>,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let mut obj = res.strategy().update_base(res, old, new, subresource);
        // Server-owned metadata cannot be changed by clients.
        for k in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            keep_metadata(old, &mut obj, k);
        }
        meta::metadata_mut(&mut obj).remove("resourceVersion");
        // A deleting object may lose finalizers but gain none.
        if meta::is_deleting(old) {
            let before = meta::finalizers(old);
            let added = meta::finalizers(&obj)
                .into_iter()
                .any(|f| !before.contains(&f));
            if added {
                return Err(ApiError::invalid(
                    &res.kind,
                    name,
                    vec![(
                        "metadata.finalizers".into(),
                        "Forbidden: no new finalizers can be added if the object is being deleted"
                            .into(),
                    )],
                ));
            }
        }
        if (res.generation || res.decode.is_none())
            && subresource.is_none()
            && meta::spec_changed(old, &obj)
        {
            let g = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            meta::metadata_mut(&mut obj).insert("generation".into(), json!(g));
        }
        strategy::prepare_update(res, old, &mut obj, subresource);
        let req = AdmissionRequest {
            res,
            operation: Operation::Update,
            subresource,
            user: opts.user.as_deref(),
            dry_run: opts.dry_run,
            namespace: None,
        };
        let mut admission_warnings = self.admit(&req, &mut obj, Some(old)).await?;
        strategy::validate(res, &obj, Some(old))?;
        admission_warnings.extend(self.admit_validate(&req, &obj, Some(old)).await?);
        self.track_fields(res, Some(old), &mut obj, subresource, opts)?;
        let claims = if subresource.is_none() && !opts.dry_run {
            self.begin_side_effects(res, Some(old), &mut obj).await?
        } else {
            Claims::default()
        };
        let result = self
            .write_replacement(res, ns, name, old, old_rev, obj, opts)
            .await;
        let outcome = match &result {
            Ok(w)
                if w.object["metadata"]["deletionTimestamp"].is_string()
                    && meta::finalizers(&w.object).is_empty()
                    && !strategy::blocks_deletion(res, &w.object) =>
            {
                Outcome::Gone
            }
            Ok(w) => Outcome::Stored(&w.object),
            Err(_) => Outcome::Failed,
        };
        self.finish_side_effects(res, claims, Some(old), outcome)
            .await;
        result.map(|mut w| {
            w.warnings.extend(admission_warnings);
            w
        })
    }

    /// Runs the admission plugins, if any are installed.
    async fn admit(
        &self,
        req: &AdmissionRequest<'_>,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        let Some(admission) = self.admission.get() else {
            return Ok(Vec::new());
        };
        admission.admit(self, req, obj, old).await
    }

    /// The validating admission of a create or update, after the kind's own validation.
    async fn admit_validate(
        &self,
        req: &AdmissionRequest<'_>,
        obj: &Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        let Some(admission) = self.admission.get() else {
            return Ok(Vec::new());
        };
        let attributes =
            req.webhook_attributes(meta::namespace(obj).unwrap_or(""), meta::name(obj));
        admission.validate(self, &attributes, Some(obj), old).await
    }

    /// The validating admission of a delete (`old`: the object deleted) or of a connect
    /// (`options`: what the client asked for, e.g. a `PodExecOptions`).
    pub(crate) async fn admit_other(
        &self,
        attributes: &crate::admission::webhook::Attributes<'_>,
        options: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let Some(admission) = self.admission.get() else {
            return Ok(());
        };
        admission
            .validate(self, attributes, options, old)
            .await
            .map(|_| ())
    }

    /// The store write of [`Rest::replace`]: nothing on a no-op, a delete when the last
    /// finalizer went, an update otherwise.
    #[allow(clippy::too_many_arguments)]
    async fn write_replacement(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
        old: &Value,
        old_rev: Revision,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let mut unchanged = old.clone();
        meta::metadata_mut(&mut unchanged).remove("resourceVersion");
        if obj == unchanged {
            // A no-op write keeps the resourceVersion, as upstream does.
            return Ok(Written {
                object: old.clone(),
                created: false,
                warnings: Vec::new(),
            });
        }
        if opts.dry_run {
            meta::set_resource_version(&mut obj, old_rev);
            return Ok(Written {
                object: obj,
                created: false,
                warnings: Vec::new(),
            });
        }
        let key = res.key(ns, name);
        if meta::is_deleting(&obj)
            && meta::finalizers(&obj).is_empty()
            && !strategy::blocks_deletion(res, &obj)
        {
            // The last finalizer is gone: the object goes away now.
            let (rev, _) = self
                .store
                .delete(&key, Some(old_rev))
                .await
                .map_err(|e| self.write_error(res, name, e))?;
            meta::set_resource_version(&mut obj, rev);
            return Ok(Written {
                object: obj,
                created: false,
                warnings: Vec::new(),
            });
        }
        let stored = self.to_storage(res, &obj).await?;
        let rev = self
            .store
            .update(&key, self.encode_stored(&key, &stored)?, old_rev)
            .await
            .map_err(|e| self.write_error(res, name, e))?;
        meta::set_resource_version(&mut obj, rev);
        Ok(Written {
            object: obj,
            created: false,
            warnings: Vec::new(),
        })
    }

    pub(super) fn write_error(&self, res: &ResourceType, name: &str, e: StoreError) -> ApiError {
        match e {
            StoreError::Conflict { .. } => ApiError::conflict(res, name),
            StoreError::NotFound { .. } => ApiError::not_found(res, name),
            other => other.into(),
        }
    }

    /// Reads, changes and writes an object, retrying when another writer got there first.
    /// `change` gets the current object and returns the new one.
    pub(crate) async fn read_modify_write<F>(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        opts: &WriteOptions,
        mut change: F,
    ) -> Result<Written, ApiError>
    where
        F: FnMut(&Value) -> Result<Value, ApiError>,
    {
        for _ in 0..MAX_RETRIES {
            let (old, old_rev) = self.get_with_rev(res, ns, name).await?;
            let new = change(&old)?;
            match self
                .replace(res, ns, name, &old, old_rev, new, subresource, opts)
                .await
            {
                Err(e) if e.reason == "Conflict" => continue,
                other => return other,
            }
        }
        Err(ApiError::conflict(res, name))
    }

    /// Deletes an object: at once, or by marking it (finalizers, graceful pod deletion).
    pub async fn delete(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        for attempt in 0..MAX_RETRIES {
            let (old, old_rev) = self.get_with_rev(res, ns, name).await?;
            if attempt == 0 {
                let attributes = crate::admission::webhook::Attributes {
                    res,
                    operation: "DELETE",
                    subresource: "",
                    namespace: ns.unwrap_or(""),
                    name,
                    user: opts.user.as_deref(),
                    dry_run: opts.dry_run,
                };
                self.admit_other(&attributes, None, Some(&old)).await?;
            }
            if let Some(uid) = &opts.precondition_uid
                && old["metadata"]["uid"].as_str() != Some(uid.as_str())
            {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        res.qualified(),
                        old["metadata"]["uid"].as_str().unwrap_or("")
                    ),
                ));
            }
            if let Some(rv) = &opts.precondition_resource_version
                && meta::parse_resource_version(rv)? != Some(old_rev)
            {
                return Err(ApiError::conflict(res, name));
            }
            let mut obj = old.clone();
            let mut finalizers = meta::finalizers(&obj);
            match opts.propagation_policy.as_deref() {
                Some("Orphan") if !finalizers.iter().any(|f| f == "orphan") => {
                    finalizers.push("orphan".into());
                }
                Some("Foreground") if !finalizers.iter().any(|f| f == "foregroundDeletion") => {
                    finalizers.push("foregroundDeletion".into());
                }
                Some("Orphan" | "Foreground" | "Background") | None => {}
                Some(other) => {
                    return Err(ApiError::invalid(
                        "DeleteOptions",
                        "",
                        vec![(
                            "propagationPolicy".into(),
                            format!(
                                "Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                            ),
                        )],
                    ));
                }
            }
            let grace = strategy::grace_period(res, &old, opts.grace_period_seconds);
            let already = meta::is_deleting(&old);
            let needs_mark =
                !finalizers.is_empty() || grace > 0 || strategy::blocks_deletion(res, &old);
            if !needs_mark {
                if opts.dry_run {
                    return Ok(Deleted {
                        object: old,
                        gone: true,
                    });
                }
                match self.store.delete(&res.key(ns, name), Some(old_rev)).await {
                    Ok((rev, _)) => {
                        self.after_delete(res, &old).await;
                        meta::set_resource_version(&mut obj, rev);
                        return Ok(Deleted {
                            object: obj,
                            gone: true,
                        });
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(self.write_error(res, name, e)),
                }
            }
            let m = meta::metadata_mut(&mut obj);
            let old_grace = m.get("deletionGracePeriodSeconds").and_then(Value::as_i64);
            if already
                && old_grace.is_some_and(|g| g <= grace)
                && meta::finalizers(&old) == finalizers
            {
                // Already being deleted, no sooner than asked: nothing to change.
                return Ok(Deleted {
                    object: old,
                    gone: false,
                });
            }
            // Saturating: a client may ask for any int64 grace period.
            let deadline = jiff::Timestamp::now()
                .checked_add(jiff::SignedDuration::from_secs(grace))
                .unwrap_or(jiff::Timestamp::MAX);
            m.insert("deletionTimestamp".into(), json!(meta::timestamp(deadline)));
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
            m.insert("finalizers".into(), json!(finalizers));
            if finalizers.is_empty() {
                m.remove("finalizers");
            }
            m.remove("resourceVersion");
            strategy::prepare_delete(res, &mut obj);
            if opts.dry_run {
                return Ok(Deleted {
                    object: obj,
                    gone: false,
                });
            }
            let key = res.key(ns, name);
            let stored = self.to_storage(res, &obj).await?;
            match self
                .store
                .update(&key, self.encode_stored(&key, &stored)?, old_rev)
                .await
            {
                Ok(rev) => {
                    meta::set_resource_version(&mut obj, rev);
                    return Ok(Deleted {
                        object: obj,
                        gone: false,
                    });
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(self.write_error(res, name, e)),
            }
        }
        Err(ApiError::conflict(res, name))
    }

    /// Deletes every object a list selects; returns what was deleted or marked.
    pub async fn delete_collection(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        list: &super::ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        let page = self.list(res, ns, list).await?;
        let mut out = Vec::with_capacity(page.items.len());
        for item in page.items {
            let ns = meta::namespace(&item).map(str::to_owned);
            match self
                .delete(res, ns.as_deref(), meta::name(&item), opts)
                .await
            {
                Ok(d) => out.push(d.object),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// Checks `apiVersion` and `kind` of a body against the endpoint (absent ones are defaulted,
/// as upstream's decoder does).
fn check_type_meta(res: &ResourceType, body: &Value) -> Result<(), ApiError> {
    if let Some(av) = body["apiVersion"].as_str().filter(|s| !s.is_empty())
        && av != res.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            res.api_version()
        )));
    }
    if let Some(kind) = body["kind"].as_str().filter(|s| !s.is_empty())
        && kind != res.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            res.kind
        )));
    }
    Ok(())
}

/// Decodes a custom resource: the CRD version's schema prunes unknown fields (reported as
/// `fieldValidation` asks), fills in defaults and validates.
fn custom_resource(
    res: &ResourceType,
    mut body: Value,
    validation: FieldValidation,
    warnings: &mut Vec<String>,
) -> Result<Value, ApiError> {
    body["apiVersion"] = json!(res.api_version());
    body["kind"] = json!(res.kind);
    let Some(schema) = res.custom.as_ref().and_then(|c| c.schema.as_ref()) else {
        return Ok(body);
    };
    let pruned = schema.prune(&mut body);
    report_unknown(pruned, validation, warnings)?;
    schema.default(&mut body);
    let errors = schema.validate(&body);
    if errors.is_empty() {
        return Ok(body);
    }
    Err(ApiError::invalid(
        &res.kind,
        meta::name(&body),
        errors
            .into_iter()
            .map(|e| (e.field.clone(), e.message.clone()))
            .collect(),
    ))
}

/// Applies `fieldValidation` to the unknown fields of a request body.
fn report_unknown(
    unknown: Vec<String>,
    validation: FieldValidation,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let unknown: Vec<String> = unknown
        .into_iter()
        .map(|p| format!("unknown field \"{}\"", p.trim_start_matches('.')))
        .collect();
    match validation {
        FieldValidation::Strict if !unknown.is_empty() => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            unknown.join(", ")
        ))),
        FieldValidation::Warn => {
            warnings.extend(unknown);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A server-side apply failure as upstream answers it.
pub(crate) fn apply_error(res: &ResourceType, e: k1s_apimachinery::apply::ApplyError) -> ApiError {
    match e {
        k1s_apimachinery::apply::ApplyError::Conflicts(conflicts) => {
            let mut err = ApiError::new(
                409,
                "Conflict",
                k1s_apimachinery::apply::ApplyError::Conflicts(conflicts.clone()).to_string(),
            );
            let details = err.details.get_or_insert_with(Default::default);
            details.kind = Some(res.plural.clone());
            details.group = Some(res.group.clone());
            details.causes = Some(
                conflicts
                    .iter()
                    .map(
                        |c| k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause {
                            field: Some(c.field.clone()),
                            message: Some(c.cause_message()),
                            reason: Some("FieldManagerConflict".into()),
                        },
                    )
                    .collect(),
            );
            err
        }
        e => ApiError::bad_request(e.to_string()),
    }
}
