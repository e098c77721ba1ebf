//! PATCH: JSON patch, merge patch, strategic merge patch and server-side apply, applied to the
//! current object and written with the usual update rules (retrying when it loses a race).

use serde_json::Value;

use super::{Rest, WriteOptions, Written, meta};
use crate::registry::ResourceType;
use crate::status::ApiError;
use k1s_apimachinery::patch::{self, PatchKey, PatchType};

/// The kind of patch a request carries (its Content-Type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply {
        force: bool,
    },
}

impl PatchKind {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let essence = ct.split(';').next().unwrap_or("").trim();
        match essence {
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(Self::Apply { force: false })
            }
            _ => PatchType::from_content_type(essence).map(|t| match t {
                PatchType::Json => Self::Json,
                PatchType::Merge => Self::Merge,
                PatchType::StrategicMerge => Self::Strategic,
            }),
        }
    }
}

/// A patch failure as the Status upstream answers with.
fn patch_error(e: &patch::PatchError) -> ApiError {
    let err = ApiError::new(e.http_status(), e.reason(), e.status_message());
    match e.cause() {
        Some(cause) => err.with_cause("UnexpectedServerResponse", cause),
        None => err,
    }
}

impl Rest {
    /// Applies a patch to an object (or its `status`/`scale`... subresource view).
    #[allow(clippy::too_many_arguments)]
    pub async fn patch(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        kind: PatchKind,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let key = PatchKey {
            group: &res.group,
            kind: &res.kind,
        };
        if let PatchKind::Apply { force } = kind {
            return self
                .apply(res, ns, name, subresource, force, body, opts)
                .await;
        }
        let ptype = match kind {
            PatchKind::Json => PatchType::Json,
            PatchKind::Merge => PatchType::Merge,
            _ => PatchType::StrategicMerge,
        };
        if res.decode.is_none() && ptype == PatchType::StrategicMerge {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        if subresource == Some("scale") {
            let scale_key = PatchKey {
                group: "autoscaling",
                kind: "Scale",
            };
            let object = self
                .update_scale(res, ns, name, opts, |scale| {
                    patch::apply(scale_key, ptype, scale, body).map_err(|e| patch_error(&e))
                })
                .await?;
            return Ok(Written {
                object,
                created: false,
                warnings: Vec::new(),
            });
        }
        let mut warnings = Vec::new();
        let mut w = self
            .read_modify_write(res, ns, name, subresource, opts, |current| {
                let mut cur = current.clone();
                let patched = patch::apply(key, ptype, &cur, body).map_err(|e| patch_error(&e))?;
                // Keep the precondition a patch may carry (metadata.resourceVersion).
                cur = self.decode_body(res, patched, opts.field_validation, &mut warnings)?;
                let want = cur["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned();
                if !want.is_empty()
                    && want
                        != current["metadata"]["resourceVersion"]
                            .as_str()
                            .unwrap_or("")
                {
                    return Err(ApiError::conflict(res, name));
                }
                Ok(cur)
            })
            .await?;
        warnings.dedup();
        w.warnings = warnings;
        Ok(w)
    }

    /// Server-side apply: the configuration is merged into the live object by the kind's
    /// list and map semantics, the applier owns what it applied, and fields owned by other
    /// managers conflict (409) unless `force`.
    #[allow(clippy::too_many_arguments)]
    async fn apply(
        &self,
        res: &ResourceType,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        force: bool,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let config: Value = serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
        if !config.is_object() {
            return Err(ApiError::bad_request(
                "the applied configuration must be an object",
            ));
        }
        if meta::name(&config) != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta::name(&config)
            )));
        }
        let manager = opts
            .field_manager
            .clone()
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                ApiError::bad_request(
                    "PATCH request is not valid: fieldManager is required for apply requests",
                )
            })?;
        let mut opts = opts.clone();
        opts.fields_tracked = true;
        let schema = res.apply_schema();
        let sub = subresource.filter(|s| matches!(*s, "status" | "approval"));
        let merge = |live: Option<&Value>| {
            k1s_apimachinery::apply::apply(
                schema,
                live,
                &config,
                &manager,
                &res.api_version(),
                sub,
                force,
                &meta::now(),
            )
            .map_err(|e| super::write::apply_error(res, e))
        };
        match self.get(res, ns, name).await {
            Err(e) if e.code == 404 && subresource.is_none() => {
                let obj = merge(None)?;
                self.create(res, ns, obj, &opts).await
            }
            Err(e) => Err(e),
            Ok(_) => {
                let mut warnings = Vec::new();
                let mut w = self
                    .read_modify_write(res, ns, name, subresource, &opts, |current| {
                        let merged = merge(Some(current))?;
                        self.decode_body(res, merged, opts.field_validation, &mut warnings)
                    })
                    .await?;
                warnings.dedup();
                w.warnings = warnings;
                Ok(w)
            }
        }
    }
}
