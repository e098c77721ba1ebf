//! CertificateSigningRequests (`certificates.k8s.io/v1`): upstream's registry strategies for
//! the object and its `status` and `approval` subresources, and `ValidateCertificateSigningRequest`
//! with its field paths and messages.
//!
//! Owns: the requestor fields a create sets from the requesting user, which parts of a request
//! each write path may change (spec never, `approval` the conditions, `status` everything
//! else but the Approved/Denied decision), the conditions' timestamps, and the checks of spec and status. It does
//! not sign anything (signers are controllers), and whether a user may approve for a signer is
//! admission's check ([`crate::admission::certificate_approval`]).

use serde_json::{Value, json};
use x509_parser::prelude::FromDer;

use crate::user::UserInfo;
use k1s_apimachinery::crd_schema::{is_dns1123_label, is_dns1123_subdomain};

type Causes = Vec<(String, String)>;

/// The key usages upstream accepts (`allValidUsages`).
const USAGES: &[&str] = &[
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

/// The condition types only the `approval` subresource sets.
const DECISIONS: &[&str] = &["Approved", "Denied"];
/// The condition types that, once set, stay.
const PERMANENT: &[&str] = &["Approved", "Denied", "Failed"];

/// Upstream's shortest accepted `expirationSeconds` (ten minutes).
const MIN_EXPIRATION_SECONDS: i64 = 600;

/// The requestor of a new request is whoever creates it: what the client put in `spec.username`,
/// `uid`, `groups` and `extra` is replaced (and left empty for the server's own writes).
pub fn set_requestor(csr: &mut Value, user: Option<&UserInfo>) {
    if !csr["spec"].is_object() {
        csr["spec"] = json!({});
    }
    let Some(spec) = csr["spec"].as_object_mut() else {
        return;
    };
    for k in ["username", "uid", "groups", "extra"] {
        spec.remove(k);
    }
    let Some(user) = user else {
        return;
    };
    if !user.name.is_empty() {
        spec.insert("username".into(), json!(user.name));
    }
    if !user.uid.is_empty() {
        spec.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        spec.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        spec.insert("extra".into(), json!(user.extra));
    }
}

fn conditions(csr: &Value) -> &[Value] {
    csr["status"]["conditions"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
}

/// The update rules of the three write paths, after the generic ones (which already keep
/// `status` on the main resource and everything but status on `status`):
/// * every path keeps `spec`;
/// * `approval` changes only the conditions (all of them, as written);
/// * `status` changes everything in status but the decision.
///
/// Then conditions get upstream's defaults: status `True`, `lastUpdateTime` now, and
/// `lastTransitionTime` kept from a stored condition of the same type and status, else now.
pub fn prepare_update(old: &Value, new: &mut Value, subresource: Option<&str>, now: &str) {
    new["spec"] = old["spec"].clone();
    let merged: Option<Vec<Value>> = match subresource {
        // Upstream's approval strategy takes the conditions as written (validation then
        // forbids taking a decision or failure back).
        Some("approval") => None,
        Some("status") => Some(keep_decisions(conditions(new), conditions(old))),
        _ => None,
    };
    if subresource == Some("approval") {
        let written = new["status"].get("conditions").cloned();
        new["status"] = match &old["status"] {
            s @ Value::Object(_) => s.clone(),
            _ => json!({}),
        };
        if let Some(s) = new["status"].as_object_mut() {
            match written.filter(|c| !c.is_null()) {
                Some(c) => s.insert("conditions".into(), c),
                None => s.remove("conditions"),
            };
        }
    }
    if let Some(merged) = merged {
        if merged.is_empty() {
            if let Some(s) = new["status"].as_object_mut() {
                s.remove("conditions");
            }
        } else {
            new["status"]["conditions"] = Value::Array(merged);
        }
    }
    default_conditions(new, Some(old), now);
}

/// A status write's conditions in the order written, with the Approved/Denied instances
/// as stored (upstream's `preserveConditionInstances`, in place). A write that adds or drops a
/// decision keeps the stored ones instead (appended): only the approval subresource decides.
fn keep_decisions(written: &[Value], stored: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = written.to_vec();
    for t in DECISIONS {
        let of = |list: &[Value]| -> Vec<usize> {
            (0..list.len()).filter(|&i| list[i]["type"] == *t).collect()
        };
        let (at_new, at_old) = (of(&out), of(stored));
        if at_new.len() == at_old.len() {
            for (n, o) in at_new.into_iter().zip(at_old) {
                out[n] = stored[o].clone();
            }
        } else {
            out.retain(|c| c["type"] != *t);
            out.extend(at_old.into_iter().map(|o| stored[o].clone()));
        }
    }
    out
}

/// Upstream's condition defaults (`SetDefaults_CertificateSigningRequestCondition` and
/// `populateConditionTimestamps`).
fn default_conditions(csr: &mut Value, old: Option<&Value>, now: &str) {
    let old = old.map_or(&[][..], conditions);
    let Some(list) = csr["status"]["conditions"].as_array_mut() else {
        return;
    };
    for c in list.iter_mut().filter(|c| c.is_object()) {
        if c["status"].as_str().is_none_or(str::is_empty) {
            c["status"] = json!("True");
        }
        if c["lastUpdateTime"].as_str().is_none_or(str::is_empty) {
            c["lastUpdateTime"] = json!(now);
        }
        if c["lastTransitionTime"].as_str().is_none_or(str::is_empty) {
            let kept = old.iter().find_map(|o| {
                (o["type"] == c["type"] && o["status"] == c["status"])
                    .then(|| o["lastTransitionTime"].as_str())
                    .flatten()
                    .filter(|t| !t.is_empty())
            });
            c["lastTransitionTime"] = json!(kept.unwrap_or(now));
        }
    }
}

fn invalid(path: &str, value: &Value, msg: &str) -> (String, String) {
    (
        path.to_owned(),
        format!(
            "Invalid value: {}: {msg}",
            serde_json::to_string(value).unwrap_or_default()
        ),
    )
}

/// `ValidateCertificateSigningRequest{Create,Update}`: the spec on create (it cannot change
/// afterwards), the conditions and the certificate always, and on update that no decision or
/// failure is taken back and an issued certificate stays.
pub fn validate(csr: &Value, old: Option<&Value>, out: &mut Causes) {
    if old.is_none() {
        validate_spec(&csr["spec"], out);
    }
    validate_conditions(conditions(csr), out);
    let cert = csr["status"]["certificate"].as_str().unwrap_or("");
    if let Err(msg) = certificate_ok(cert) {
        out.push((
            "status.certificate".into(),
            format!("Invalid value: \"<certificate data>\": {msg}"),
        ));
    }
    let Some(old) = old else {
        return;
    };
    for t in PERMANENT {
        let count = |v: &Value| conditions(v).iter().filter(|c| c["type"] == *t).count();
        if count(csr) < count(old) {
            out.push((
                "status.conditions".into(),
                format!("Forbidden: updates may not remove a condition of type \"{t}\""),
            ));
        }
    }
    let old_cert = old["status"]["certificate"].as_str().unwrap_or("");
    if !old_cert.is_empty() && old_cert != cert {
        out.push((
            "status.certificate".into(),
            "Forbidden: updates may not modify existing certificate content".into(),
        ));
    }
}

fn validate_spec(spec: &Value, out: &mut Causes) {
    if let Err(msg) = request_ok(spec["request"].as_str().unwrap_or("")) {
        out.push((
            "spec.request".into(),
            format!("Invalid value: []byte{{...}}: {msg}"),
        ));
    }
    let usages = spec["usages"].as_array().map_or(&[][..], Vec::as_slice);
    if usages.is_empty() {
        out.push((
            "spec.usages".into(),
            "Required value: usages must be provided".into(),
        ));
    }
    for (i, u) in usages.iter().enumerate() {
        let at = format!("spec.usages[{i}]");
        if !u.as_str().is_some_and(|u| USAGES.contains(&u)) {
            let mut allowed: Vec<&str> = USAGES.to_vec();
            allowed.sort_unstable();
            let list: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
            out.push((
                at,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    serde_json::to_string(u).unwrap_or_default(),
                    list.join(", ")
                ),
            ));
        } else if usages[..i].contains(u) {
            out.push((
                at,
                format!(
                    "Duplicate value: {}",
                    serde_json::to_string(u).unwrap_or_default()
                ),
            ));
        }
    }
    let signer = spec["signerName"].as_str().unwrap_or("");
    if signer == "kubernetes.io/legacy-unknown" {
        out.push(invalid(
            "spec.signerName",
            &json!(signer),
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        signer_name("spec.signerName", signer, out);
    }
    if let Some(s) = spec["expirationSeconds"].as_i64()
        && s < MIN_EXPIRATION_SECONDS
    {
        out.push((
            "spec.expirationSeconds".into(),
            format!(
                "Invalid value: {s}: may not specify a duration less than 600 seconds (10 minutes)"
            ),
        ));
    }
}

/// Upstream's `ValidateSignerName`: `<domain>/<path>`, the domain of at least two DNS-1123
/// labels, the path a DNS-1123 subdomain.
pub fn signer_name(path: &str, name: &str, out: &mut Causes) {
    if name.is_empty() {
        out.push((path.to_owned(), "Required value".into()));
        return;
    }
    let Some((domain, rest)) = name.split_once('/').filter(|(_, r)| !r.contains('/')) else {
        out.push(invalid(
            path,
            &json!(name),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return;
    };
    if domain.len() > 253 {
        out.push((
            path.to_owned(),
            "Too long: may not be more than 253 bytes".into(),
        ));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if let Some((label, errs)) = labels
        .iter()
        .map(|l| (l, is_dns1123_label(l)))
        .find(|(_, e)| !e.is_empty())
    {
        for e in errs {
            out.push(invalid(
                path,
                &json!(domain),
                &format!("validating label \"{label}\": {e}"),
            ));
        }
    }
    if labels.len() < 2 {
        out.push(invalid(
            path,
            &json!(domain),
            "should be a domain with at least two segments separated by dots",
        ));
    }
    // A path segment may be as long as a subdomain plus a label and the dot between.
    let max_path = 253 + 63 + 1;
    if rest.len() > max_path {
        out.push((
            path.to_owned(),
            format!("Too long: may not be more than {max_path} bytes"),
        ));
    } else {
        for e in is_dns1123_subdomain(rest) {
            out.push(invalid(
                path,
                &json!(rest),
                &format!("validating path segment: {e}"),
            ));
        }
    }
}

/// Why `spec.request` is not a usable certificate request (upstream's texts).
#[derive(Debug, thiserror::Error)]
enum RequestError {
    /// Not base64, not PEM, or a PEM block of another type.
    #[error("PEM block type must be CERTIFICATE REQUEST")]
    NotRequestPem,
    #[error("x509: malformed certificate request: {0}")]
    Malformed(#[source] x509_parser::nom::Err<x509_parser::error::X509Error>),
    #[error("x509: invalid signature: {0}")]
    Signature(#[source] x509_parser::error::X509Error),
}

/// Why `status.certificate` is not a list of certificates (upstream's texts).
#[derive(Debug, thiserror::Error)]
enum CertificateError {
    /// Not base64, or no PEM block.
    #[error("must contain at least one CERTIFICATE PEM block")]
    NoCertificate,
    #[error("only CERTIFICATE PEM blocks are allowed, found {label:?}")]
    OtherBlock { label: String },
    #[error("invalid certificate: {0}")]
    Invalid(#[source] x509_parser::nom::Err<x509_parser::error::X509Error>),
}

/// `spec.request`: base64 in JSON; a PEM `CERTIFICATE REQUEST` whose signature checks.
fn request_ok(b64: &str) -> Result<(), RequestError> {
    use base64::Engine;
    let pem_bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| RequestError::NotRequestPem)?;
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(&pem_bytes).map_err(|_| RequestError::NotRequestPem)?;
    if pem.label != "CERTIFICATE REQUEST" {
        return Err(RequestError::NotRequestPem);
    }
    let (_, req) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
            .map_err(RequestError::Malformed)?;
    req.verify_signature().map_err(RequestError::Signature)
}

/// `status.certificate`: empty, or PEM `CERTIFICATE` blocks that parse.
fn certificate_ok(b64: &str) -> Result<(), CertificateError> {
    use base64::Engine;
    if b64.is_empty() {
        return Ok(());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| CertificateError::NoCertificate)?;
    let mut rest = &bytes[..];
    let mut found = 0;
    while rest.iter().any(|b| !b.is_ascii_whitespace()) {
        let Ok((next, pem)) = x509_parser::pem::parse_x509_pem(rest) else {
            break;
        };
        if pem.label != "CERTIFICATE" {
            return Err(CertificateError::OtherBlock { label: pem.label });
        }
        pem.parse_x509().map_err(CertificateError::Invalid)?;
        found += 1;
        rest = next;
    }
    if found == 0 {
        return Err(CertificateError::NoCertificate);
    }
    Ok(())
}

fn validate_conditions(list: &[Value], out: &mut Causes) {
    let mut seen: Vec<&str> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in list.iter().enumerate() {
        let at = format!("status.conditions[{i}]");
        let t = c["type"].as_str().unwrap_or("");
        if t.is_empty() {
            out.push((format!("{at}.type"), "Required value".into()));
        }
        let status = c["status"].as_str().unwrap_or("");
        if !matches!(status, "True" | "False" | "Unknown") {
            out.push((
                format!("{at}.status"),
                format!(
                    "Unsupported value: {}: supported values: \"True\", \"False\", \"Unknown\"",
                    serde_json::to_string(&c["status"]).unwrap_or_default()
                ),
            ));
        }
        if PERMANENT.contains(&t) && status != "True" {
            out.push(invalid(
                &format!("{at}.status"),
                &c["status"],
                &format!("{t} condition may only be set to True"),
            ));
        }
        approved |= t == "Approved";
        denied |= t == "Denied";
        if seen.contains(&t) {
            out.push((format!("{at}.type"), format!("Duplicate value: \"{t}\"")));
        }
        seen.push(t);
    }
    if approved && denied {
        out.push((
            "status.conditions".into(),
            "Invalid value: \"...\": Approved and Denied conditions are mutually exclusive".into(),
        ));
    }
}

pub struct CertificateSigningRequest;

impl crate::registry::strategy::Strategy for CertificateSigningRequest {
    fn update_base(
        &self,
        res: &crate::registry::ResourceType,
        old: &Value,
        new: Value,
        subresource: Option<&str>,
    ) -> Value {
        if subresource != Some("approval") {
            return crate::registry::strategy::update_base(res, old, new, subresource);
        }
        // Approvals write the conditions (and metadata) only; `prepare_update` checks which
        // conditions may change.
        let mut o = old.clone();
        if !o["status"].is_object() {
            o["status"] = json!({});
        }
        o["status"]["conditions"] = new["status"]["conditions"].clone();
        if let Some(m) = new.get("metadata") {
            o["metadata"] = m.clone();
        }
        o
    }

    fn set_requestor(&self, obj: &mut Value, user: Option<&UserInfo>) {
        set_requestor(obj, user);
    }

    fn prepare_update(&self, old: &Value, new: &mut Value, subresource: Option<&str>) {
        prepare_update(old, new, subresource, &crate::rest::meta::now());
    }

    fn validate(&self, obj: &Value, old: Option<&Value>, causes: &mut Causes) {
        validate(obj, old, causes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    const NOW: &str = "2026-01-02T03:04:05Z";

    fn request_b64() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["e2e.example.com".into()]).unwrap();
        let csr = params.serialize_request(&key).unwrap();
        base64::engine::general_purpose::STANDARD.encode(csr.pem().unwrap())
    }

    fn csr() -> Value {
        json!({"metadata": {"name": "c"}, "spec": {
            "request": request_b64(), "signerName": "k8s.io/e2e-test",
            "usages": ["digital signature", "key encipherment", "server auth"]}})
    }

    fn messages(v: &Value, old: Option<&Value>) -> Vec<String> {
        let mut out = Vec::new();
        validate(v, old, &mut out);
        out.into_iter().map(|(f, m)| format!("{f}: {m}")).collect()
    }

    #[test]
    fn request_and_certificate_errors() {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        assert!(request_ok(&request_b64()).is_ok());
        let e = request_ok("%%").unwrap_err();
        assert!(matches!(e, RequestError::NotRequestPem));
        assert_eq!(e.to_string(), "PEM block type must be CERTIFICATE REQUEST");
        let e = request_ok(&b64(
            "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
        ))
        .unwrap_err();
        assert!(matches!(e, RequestError::Malformed(_)));
        assert!(
            e.to_string()
                .starts_with("x509: malformed certificate request: "),
            "{e}"
        );
        assert!(certificate_ok("").is_ok());
        let e = certificate_ok("%%").unwrap_err();
        assert!(matches!(e, CertificateError::NoCertificate));
        assert_eq!(
            e.to_string(),
            "must contain at least one CERTIFICATE PEM block"
        );
        let e =
            certificate_ok(&b64("-----BEGIN THING-----\nAAAA\n-----END THING-----\n")).unwrap_err();
        assert!(matches!(e, CertificateError::OtherBlock { .. }));
        assert_eq!(
            e.to_string(),
            "only CERTIFICATE PEM blocks are allowed, found \"THING\""
        );
        let e = certificate_ok(&b64(
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        ))
        .unwrap_err();
        assert!(matches!(e, CertificateError::Invalid(_)));
        assert!(e.to_string().starts_with("invalid certificate: "), "{e}");
    }

    #[test]
    fn requestor_comes_from_the_user() {
        let mut c = csr();
        c["spec"]["username"] = json!("mallory");
        c["spec"]["groups"] = json!(["system:masters"]);
        let mut user = UserInfo::new("alice", ["dev".to_owned()]);
        user.uid = "u-1".into();
        set_requestor(&mut c, Some(&user));
        assert_eq!(c["spec"]["username"], "alice");
        assert_eq!(c["spec"]["uid"], "u-1");
        assert_eq!(c["spec"]["groups"], json!(["dev", "system:authenticated"]));
        assert!(c["spec"].get("extra").is_none());
        set_requestor(&mut c, None);
        assert!(c["spec"].get("username").is_none());
    }

    #[test]
    fn spec_checks() {
        assert_eq!(messages(&csr(), None), Vec::<String>::new());
        let table: &[(&str, Value, &str)] = &[
            (
                "request",
                json!("bm90IGEgcGVt"),
                "spec.request: Invalid value: []byte{...}: PEM block type must be CERTIFICATE REQUEST",
            ),
            ("signerName", json!(""), "spec.signerName: Required value"),
            (
                "signerName",
                json!("nodomain"),
                "must be a fully qualified domain and path",
            ),
            (
                "signerName",
                json!("example/x"),
                "should be a domain with at least two segments",
            ),
            (
                "signerName",
                json!("Example.com/x"),
                "validating label \"Example\"",
            ),
            (
                "signerName",
                json!("example.com/X_Y"),
                "validating path segment",
            ),
            (
                "usages",
                json!([]),
                "spec.usages: Required value: usages must be provided",
            ),
            (
                "usages",
                json!(["bogus"]),
                "spec.usages[0]: Unsupported value: \"bogus\"",
            ),
            (
                "usages",
                json!(["any", "any"]),
                "spec.usages[1]: Duplicate value: \"any\"",
            ),
            (
                "expirationSeconds",
                json!(599),
                "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds",
            ),
        ];
        for (field, value, want) in table {
            let mut c = csr();
            c["spec"][*field] = value.clone();
            let got = messages(&c, None);
            assert!(
                got.iter().any(|m| m.contains(want)),
                "{field}={value}: {got:?}"
            );
        }
        let mut ok = csr();
        ok["spec"]["expirationSeconds"] = json!(600);
        assert!(messages(&ok, None).is_empty());
    }

    #[test]
    fn condition_checks() {
        let table: &[(Value, &str)] = &[
            (
                json!([{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]),
                "Approved and Denied conditions are mutually exclusive",
            ),
            (
                json!([{"type": "Approved", "status": "False"}]),
                "Approved condition may only be set to True",
            ),
            (
                json!([{"type": "X", "status": "True"}, {"type": "X", "status": "True"}]),
                "status.conditions[1].type: Duplicate value: \"X\"",
            ),
            (
                json!([{"type": "", "status": "True"}]),
                "status.conditions[0].type: Required value",
            ),
            (
                json!([{"type": "X", "status": "Maybe"}]),
                "status.conditions[0].status: Unsupported value",
            ),
        ];
        for (conds, want) in table {
            let mut c = csr();
            c["status"]["conditions"] = conds.clone();
            let got = messages(&c, None);
            assert!(got.iter().any(|m| m.contains(want)), "{conds}: {got:?}");
        }
    }

    #[test]
    fn each_path_changes_only_its_part() {
        let mut old = csr();
        old["spec"]["username"] = json!("alice");
        old["status"]["conditions"] = json!([{"type": "Failed", "status": "True",
            "lastTransitionTime": "2020-01-01T00:00:00Z", "lastUpdateTime": "2020-01-01T00:00:00Z"}]);
        // approval: the conditions as written (a custom one too); spec and the rest of
        // status stay.
        let mut new = old.clone();
        new["spec"]["signerName"] = json!("example.com/other");
        new["status"]["certificate"] = json!("eA==");
        let failed = old["status"]["conditions"][0].clone();
        new["status"]["conditions"] = json!([{"type": "Approved", "reason": "E2E"}, failed,
            {"type": "ApprovalPatch", "status": "True", "reason": "e2e"}]);
        prepare_update(&old, &mut new, Some("approval"), NOW);
        assert_eq!(new["spec"], old["spec"]);
        assert!(new["status"].get("certificate").is_none());
        let conds = conditions(&new);
        assert_eq!(conds.len(), 3, "{conds:?}");
        assert_eq!(conds[0]["type"], "Approved");
        assert_eq!(conds[0]["status"], "True");
        assert_eq!(conds[0]["lastUpdateTime"], NOW);
        assert_eq!(conds[0]["lastTransitionTime"], NOW);
        assert_eq!(conds[1]["type"], "Failed");
        assert_eq!(conds[2]["type"], "ApprovalPatch");
        assert!(messages(&new, Some(&old)).is_empty());
        // status: a decision cannot be made or taken back there.
        let approved = new.clone();
        let mut new = approved.clone();
        new["status"]["conditions"] =
            json!([{"type": "Denied"}, {"type": "Failed", "status": "True"}]);
        prepare_update(&approved, &mut new, Some("status"), NOW);
        let types: Vec<&Value> = conditions(&new).iter().map(|c| &c["type"]).collect();
        assert_eq!(types, [&json!("Failed"), &json!("Approved")]);
        // Failed kept its transition time (same type and status as stored).
        assert_eq!(
            conditions(&new)[0]["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
        // A status write keeps the written order, the decision as stored in its place.
        let stored = json!([{"type": "ApprovalPatch"}, {"type": "Approved", "reason": "kept"}]);
        let written = json!([{"type": "ApprovalPatch"}, {"type": "Approved", "reason": "changed"},
            {"type": "StatusUpdate"}]);
        let kept = keep_decisions(written.as_array().unwrap(), stored.as_array().unwrap());
        let types: Vec<&Value> = kept.iter().map(|c| &c["type"]).collect();
        assert_eq!(
            types,
            [
                &json!("ApprovalPatch"),
                &json!("Approved"),
                &json!("StatusUpdate")
            ]
        );
        assert_eq!(kept[1]["reason"], "kept");
        // Removing a permanent condition is refused.
        let mut gone = approved.clone();
        gone["status"]["conditions"] = json!([]);
        let got = messages(&gone, Some(&approved));
        assert!(
            got.iter()
                .any(|m| m.contains("may not remove a condition of type \"Approved\"")),
            "{got:?}"
        );
    }
}
