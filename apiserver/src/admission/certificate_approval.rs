//! CertificateApproval: a write to a CertificateSigningRequest's `approval` subresource needs
//! the `approve` verb on the `signers` resource (`certificates.k8s.io`) named by the request's
//! `signerName`, or on its domain's wildcard (`example.com/*`), as upstream's plugin checks.
//! cluster-admin (`*` on `*`) has it. Whether the decision itself is well-formed is the
//! strategy's check ([`crate::rest`]).

use serde_json::Value;

use super::{Request, forbidden};
use crate::authz::{Attributes, Authorizer, Decision};
use crate::status::ApiError;
use crate::user::UserInfo;

/// Whether `user` may `verb` for `signer` (or for every signer of its domain).
pub async fn authorized_for_signer(
    authz: &Authorizer,
    user: &UserInfo,
    verb: &str,
    signer: &str,
) -> bool {
    let attrs = |name: String| Attributes {
        user: user.clone(),
        verb: verb.to_owned(),
        resource_request: true,
        api_group: "certificates.k8s.io".into(),
        api_version: "*".into(),
        resource: "signers".into(),
        name,
        ..Default::default()
    };
    if authz.authorize(&attrs(signer.to_owned())).await == Decision::Allow {
        return true;
    }
    let domain = signer.split('/').next().unwrap_or("");
    authz.authorize(&attrs(format!("{domain}/*"))).await == Decision::Allow
}

/// Refuses an approval write by a user who may not approve for the request's signer.
pub async fn admit(
    authz: &Authorizer,
    req: &Request<'_>,
    user: &UserInfo,
    obj: &Value,
) -> Result<(), ApiError> {
    if req.subresource != Some("approval")
        || !req.is("certificates.k8s.io", "CertificateSigningRequest")
    {
        return Ok(());
    }
    let signer = obj["spec"]["signerName"].as_str().unwrap_or("");
    if authorized_for_signer(authz, user, "approve", signer).await {
        return Ok(());
    }
    Err(forbidden(
        req.res,
        obj,
        format!("user not permitted to approve requests with signerName {signer:?}"),
    ))
}
