//! PersistentVolumeClaimResize: a claim may grow only when its StorageClass has
//! `allowVolumeExpansion: true`; otherwise the update is refused with upstream's 403.
//! Shrinking below the claim's current capacity is refused by validation, not here.

use serde_json::Value;

use super::{Request, forbidden};
use crate::reader::Reader;
use crate::rest::validation::parse_quantity;
use crate::status::ApiError;

const REFUSAL: &str = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";

/// The claim's storage request.
fn request(pvc: &Value) -> Option<k1s_api::quantity::Quantity> {
    pvc["spec"]["resources"]["requests"]["storage"]
        .as_str()
        .and_then(parse_quantity)
}

/// Whether `new` asks for more storage than `old`.
pub fn grows(new: &Value, old: &Value) -> bool {
    match (request(new), request(old)) {
        (Some(n), Some(o)) => n > o,
        _ => false,
    }
}

pub async fn admit(
    rest: &dyn Reader,
    req: &Request<'_>,
    pvc: &Value,
    old: &Value,
) -> Result<(), ApiError> {
    if !grows(pvc, old) {
        return Ok(());
    }
    let class = pvc["spec"]["storageClassName"].as_str().unwrap_or("");
    if class.is_empty() {
        return Err(forbidden(req.res, pvc, REFUSAL));
    }
    let Some(res) = rest.builtin_kind("storage.k8s.io", "StorageClass") else {
        return Err(forbidden(req.res, pvc, REFUSAL));
    };
    let allowed = match rest.get(&res, None, class).await {
        Ok(sc) => sc["allowVolumeExpansion"] == true,
        Err(e) if e.code == 404 => false,
        Err(e) => return Err(e),
    };
    if allowed {
        Ok(())
    } else {
        Err(forbidden(req.res, pvc, REFUSAL))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pvc(size: &str) -> Value {
        json!({"spec": {"resources": {"requests": {"storage": size}}}})
    }

    #[test]
    fn growth_compares_quantities_not_strings() {
        assert!(grows(&pvc("2Gi"), &pvc("1Gi")));
        assert!(grows(&pvc("1100Mi"), &pvc("1Gi")));
        assert!(!grows(&pvc("1024Mi"), &pvc("1Gi")));
        assert!(!grows(&pvc("500Mi"), &pvc("1Gi")));
    }
}
