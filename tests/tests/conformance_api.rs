//! End to end: the APIs behind upstream v1.20 conformance tests that k1s failed (issue #29),
//! driven with stock kubectl (its protobuf creates included) and raw requests against the real
//! `k1s server`: `/version`'s build fields, RuntimeClass and CertificateSigningRequest CRUD with
//! CSR approval and status, and the 406 of a Table asked of a review.

use k1s_tests::{API_ONLY, Cluster, test_tools};
use serde_json::{Value, json};

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn is_hex(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// The resources a discovery document lists, by name.
fn resource<'a>(doc: &'a Value, name: &str) -> Option<&'a Value> {
    doc["resources"]
        .as_array()?
        .iter()
        .find(|r| r["name"] == name)
}

/// The lines of a kubectl watch answer (one event each).
fn events(body: &str) -> Vec<(String, Value)> {
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let ev = parse(l);
            (
                ev["type"].as_str().unwrap_or("").to_owned(),
                ev["object"].clone(),
            )
        })
        .collect()
}

#[test]
fn version_reports_the_git_commit() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    let v = c.raw("GET", "/version", None, None).json();
    let commit = v["gitCommit"].as_str().unwrap();
    assert!(is_hex(commit), "gitCommit {commit:?}");
    assert!(
        ["clean", "dirty"].contains(&v["gitTreeState"].as_str().unwrap()),
        "{v}"
    );
    let date = v["buildDate"].as_str().unwrap();
    assert!(
        k1s_api::time::parse(date).is_some() && date.ends_with('Z'),
        "buildDate {date:?}"
    );
    // What the conformance test reads: kubectl 1.20's `version` output.
    let old = test_tools().join("kubectl-1.20");
    if old.is_file() {
        let out = c.ok_with("1.20", &old, &["version"], None);
        let server = out
            .lines()
            .find(|l| l.starts_with("Server Version:"))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(
            server.contains(&format!("GitCommit:\"{commit}\"")),
            "{server}"
        );
    }
}

#[test]
fn runtime_classes_are_served() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    // Discovery, at every level.
    let groups = c.raw("GET", "/apis", None, None).json();
    let node = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "node.k8s.io")
        .unwrap_or_else(|| panic!("no node.k8s.io in {groups}"));
    assert_eq!(node["preferredVersion"]["groupVersion"], "node.k8s.io/v1");
    let group = c.raw("GET", "/apis/node.k8s.io", None, None);
    assert_eq!(group.code, 200, "{}", group.body);
    let doc = c.raw("GET", "/apis/node.k8s.io/v1", None, None).json();
    let rc = resource(&doc, "runtimeclasses").unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(rc["kind"], "RuntimeClass");
    assert_eq!(rc["namespaced"], false);
    assert!(
        rc.get("shortNames")
            .is_none_or(|s| s.as_array().unwrap().is_empty())
    );
    for verb in [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ] {
        assert!(
            rc["verbs"].as_array().unwrap().contains(&json!(verb)),
            "{rc}"
        );
    }
    let openapi = c.raw("GET", "/openapi/v3/apis/node.k8s.io/v1", None, None);
    assert_eq!(openapi.code, 200, "{}", openapi.body);
    assert!(openapi.body.contains("io.k8s.api.node.v1.RuntimeClass"));

    let before = c
        .raw("GET", "/apis/node.k8s.io/v1/runtimeclasses", None, None)
        .json();
    let rv = before["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    // kubectl 1.32+ creates with protobuf.
    let manifest = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "e2e-rc", "labels": {"e2e": "yes"}}, "handler": "runc",
        "overhead": {"podFixed": {"cpu": "100m"}},
        "scheduling": {"nodeSelector": {"runtime": "runc"},
            "tolerations": [{"key": "runtime", "operator": "Exists", "effect": "NoSchedule"}]}});
    c.ok_stdin(&["create", "-f", "-"], &manifest.to_string());
    let got = parse(&c.ok(&["get", "runtimeclass", "e2e-rc", "-o", "json"]));
    assert_eq!(got["handler"], "runc");
    assert_eq!(got["overhead"]["podFixed"]["cpu"], "100m");
    let table = c.ok(&["get", "runtimeclasses"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "HANDLER", "AGE"], "{table}");
    assert!(
        table.contains("e2e-rc") && table.contains("runc"),
        "{table}"
    );

    // Patch and update.
    c.ok(&[
        "patch",
        "runtimeclass",
        "e2e-rc",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"annotations":{"patched":"true"}}}"#,
    ]);
    let mut cur = parse(&c.ok(&["get", "runtimeclass", "e2e-rc", "-o", "json"]));
    assert_eq!(cur["metadata"]["annotations"]["patched"], "true");
    cur["metadata"]["annotations"]["updated"] = json!("true");
    c.ok_stdin(&["replace", "-f", "-"], &cur.to_string());
    // Validation: the handler is fixed, and must be a DNS label.
    let mut changed = parse(&c.ok(&["get", "runtimeclass", "e2e-rc", "-o", "json"]));
    assert_eq!(changed["metadata"]["annotations"]["updated"], "true");
    changed["handler"] = json!("kata");
    let err = c.fails_stdin(&["replace", "-f", "-"], &changed.to_string());
    assert!(
        err.contains("handler: Invalid value: \"kata\": field is immutable"),
        "{err}"
    );
    let mut bad = manifest.clone();
    bad["metadata"]["name"] = json!("bad-rc");
    bad["handler"] = json!("Not_A_Label");
    let err = c.fails_stdin(&["create", "-f", "-"], &bad.to_string());
    assert!(
        err.contains("handler: Invalid value: \"Not_A_Label\""),
        "{err}"
    );

    // Watch from before the create: ADDED, then the two changes.
    let watched = c.raw(
        "GET",
        &format!(
            "/apis/node.k8s.io/v1/runtimeclasses?watch=1&timeoutSeconds=1&resourceVersion={rv}"
        ),
        None,
        None,
    );
    let types: Vec<String> = events(&watched.body).into_iter().map(|(t, _)| t).collect();
    assert_eq!(types, ["ADDED", "MODIFIED", "MODIFIED"], "{}", watched.body);

    // Delete one, then the collection.
    let mut second = manifest.clone();
    second["metadata"]["name"] = json!("e2e-rc-2");
    c.ok_stdin(&["create", "-f", "-"], &second.to_string());
    c.ok(&["delete", "runtimeclass", "e2e-rc"]);
    let gone = c.raw(
        "DELETE",
        "/apis/node.k8s.io/v1/runtimeclasses?labelSelector=e2e%3Dyes",
        None,
        None,
    );
    assert_eq!(gone.code, 200, "{}", gone.body);
    let left = c
        .raw("GET", "/apis/node.k8s.io/v1/runtimeclasses", None, None)
        .json();
    assert_eq!(left["items"], json!([]), "{left}");
}

/// A PEM certificate request, base64 as `spec.request` carries it.
fn csr_request() -> String {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["e2e.example.com".into()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "e2e");
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    base64::engine::general_purpose::STANDARD.encode(pem)
}

fn csr_manifest(name: &str) -> Value {
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name, "labels": {"e2e": "yes"}},
        "spec": {"request": csr_request(), "signerName": "k8s.io/e2e-test",
            "usages": ["digital signature", "key encipherment", "server auth"],
            "expirationSeconds": 3600, "username": "mallory", "groups": ["system:masters"]},
        "status": {"conditions": [{"type": "Approved", "status": "True"}]}})
}

fn condition_types(csr: &Value) -> Vec<String> {
    csr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["type"].as_str().unwrap_or("").to_owned())
        .collect()
}

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

#[test]
fn certificate_signing_requests_are_served() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    let doc = c
        .raw("GET", "/apis/certificates.k8s.io/v1", None, None)
        .json();
    let csrs = resource(&doc, "certificatesigningrequests").unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(csrs["shortNames"], json!(["csr"]));
    for sub in [
        "certificatesigningrequests/approval",
        "certificatesigningrequests/status",
    ] {
        let s = resource(&doc, sub).unwrap_or_else(|| panic!("no {sub} in {doc}"));
        assert_eq!(s["verbs"], json!(["get", "patch", "update"]), "{s}");
    }

    // Create (protobuf from kubectl 1.32+): status cleared, the requestor is the caller.
    c.ok_stdin(&["create", "-f", "-"], &csr_manifest("e2e-csr").to_string());
    let got = parse(&c.ok(&["get", "csr", "e2e-csr", "-o", "json"]));
    let me = got["spec"]["username"].as_str().unwrap().to_owned();
    assert!(!me.is_empty() && me != "mallory", "{got}");
    assert!(
        !got["spec"]["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("mallory")),
        "{got}"
    );
    assert!(condition_types(&got).is_empty(), "{got}");
    let table = c.ok(&["get", "csr"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "AGE",
            "SIGNERNAME",
            "REQUESTOR",
            "REQUESTEDDURATION",
            "CONDITION"
        ],
        "{table}"
    );
    assert!(
        table.contains("k8s.io/e2e-test") && table.contains("Pending"),
        "{table}"
    );

    // Lists by signer (the field selector the suite lists with).
    let by_signer = c.get_json(&["csr", "--field-selector", "spec.signerName=k8s.io/e2e-test"]);
    assert!(
        !by_signer["items"].as_array().unwrap().is_empty(),
        "{by_signer}"
    );
    let other = c.get_json(&[
        "csr",
        "--field-selector",
        "spec.signerName=example.com/none",
    ]);
    assert_eq!(other["items"], json!([]), "{other}");

    // Spec validation on create.
    let mut short = csr_manifest("short");
    short["spec"]["expirationSeconds"] = json!(599);
    let err = c.fails_stdin(&["create", "-f", "-"], &short.to_string());
    assert!(
        err.contains("may not specify a duration less than 600 seconds"),
        "{err}"
    );
    let mut garbage = csr_manifest("garbage");
    garbage["spec"]["request"] = json!("bm90IGEgcmVxdWVzdA==");
    garbage["spec"]["signerName"] = json!("no-slash");
    let err = c.fails_stdin(&["create", "-f", "-"], &garbage.to_string());
    assert!(
        err.contains("PEM block type must be CERTIFICATE REQUEST"),
        "{err}"
    );
    assert!(err.contains("spec.signerName"), "{err}");

    // Patch and update change metadata, never the spec.
    c.ok(&["patch", "csr", "e2e-csr", "--type", "merge", "-p",
        r#"{"metadata":{"annotations":{"patched":"true"}},"spec":{"signerName":"example.com/other"}}"#]);
    let mut cur = parse(&c.ok(&["get", "csr", "e2e-csr", "-o", "json"]));
    assert_eq!(cur["metadata"]["annotations"]["patched"], "true");
    assert_eq!(cur["spec"]["signerName"], "k8s.io/e2e-test");
    cur["metadata"]["annotations"]["updated"] = json!("true");
    cur["spec"]["usages"] = json!(["client auth"]);
    c.ok_stdin(&["replace", "-f", "-"], &cur.to_string());
    let cur = parse(&c.ok(&["get", "csr", "e2e-csr", "-o", "json"]));
    assert_eq!(cur["metadata"]["annotations"]["updated"], "true");
    assert_eq!(cur["spec"]["usages"][0], "digital signature");

    // Approval needs `approve` on the signer, beyond the right to write the subresource.
    c.ok(&[
        "create",
        "clusterrole",
        "csr-approver",
        "--verb=get,list,update",
        "--resource=certificatesigningrequests,certificatesigningrequests/approval",
    ]);
    c.ok(&[
        "create",
        "clusterrolebinding",
        "csr-approver",
        "--clusterrole=csr-approver",
        "--user=approver",
    ]);
    let err = c.fails(&["--as=approver", "certificate", "approve", "e2e-csr"]);
    assert!(
        err.contains("user not permitted to approve requests with signerName \"k8s.io/e2e-test\""),
        "{err}"
    );
    let signer_role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "e2e-signer-approver"},
        "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
            "resourceNames": ["k8s.io/*"], "verbs": ["approve"]}]});
    c.ok_stdin(&["create", "-f", "-"], &signer_role.to_string());
    c.ok(&[
        "create",
        "clusterrolebinding",
        "e2e-signer-approver",
        "--clusterrole=e2e-signer-approver",
        "--user=approver",
    ]);
    c.ok(&["--as=approver", "certificate", "approve", "e2e-csr"]);
    let approved = parse(&c.ok(&["get", "csr", "e2e-csr", "-o", "json"]));
    assert_eq!(condition_types(&approved), ["Approved"], "{approved}");
    let cond = &approved["status"]["conditions"][0];
    assert_eq!(cond["status"], "True");
    assert!(cond["lastUpdateTime"].is_string() && cond["lastTransitionTime"].is_string());
    assert!(c.ok(&["get", "csr", "e2e-csr"]).contains("Approved"));
    let approval = c
        .raw("GET", &format!("{CSRS}/e2e-csr/approval"), None, None)
        .json();
    assert_eq!(condition_types(&approval), ["Approved"]);

    // Approved and Denied exclude each other; a decision cannot be taken back.
    let deny = c.raw(
        "PATCH",
        &format!("{CSRS}/e2e-csr/approval"),
        Some("application/merge-patch+json"),
        Some(br#"{"status":{"conditions":[{"type":"Denied","status":"True"}]}}"#),
    );
    assert_eq!(deny.code, 422, "{}", deny.body);
    assert!(
        deny.body
            .contains("may not remove a condition of type \\\"Approved\\\""),
        "{}",
        deny.body
    );
    let mut both = approved.clone();
    both["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "Denied", "status": "True"}));
    let put = c.raw(
        "PUT",
        &format!("{CSRS}/e2e-csr/approval"),
        Some("application/json"),
        Some(both.to_string().as_bytes()),
    );
    assert_eq!(put.code, 422, "{}", put.body);
    assert!(
        put.body
            .contains("Approved and Denied conditions are mutually exclusive"),
        "{}",
        put.body
    );

    // Status: Failed goes in there; a decision does not.
    let mut status = approved.clone();
    status["spec"]["signerName"] = json!("example.com/other");
    status["status"]["conditions"] = json!([
        {"type": "Approved", "status": "True"},
        {"type": "Denied", "status": "True"},
        {"type": "Failed", "status": "True", "reason": "E2E", "message": "no signer"}]);
    let put = c.raw(
        "PUT",
        &format!("{CSRS}/e2e-csr/status"),
        Some("application/json"),
        Some(status.to_string().as_bytes()),
    );
    assert_eq!(put.code, 200, "{}", put.body);
    let after = parse(&c.ok(&["get", "csr", "e2e-csr", "-o", "json"]));
    let mut types = condition_types(&after);
    types.sort();
    assert_eq!(types, ["Approved", "Failed"], "{after}");
    assert_eq!(after["spec"]["signerName"], "k8s.io/e2e-test");
    // Approval writes the conditions as given: dropping Failed is refused; a condition of
    // another type is kept, and so is an annotation written with it (the conformance case).
    let mut via_approval = after.clone();
    via_approval["status"]["conditions"] = json!([{"type": "Approved", "status": "True"}]);
    let put = c.raw(
        "PUT",
        &format!("{CSRS}/e2e-csr/approval"),
        Some("application/json"),
        Some(via_approval.to_string().as_bytes()),
    );
    assert_eq!(put.code, 422, "{}", put.body);
    assert!(
        put.body
            .contains("may not remove a condition of type \\\"Failed\\\""),
        "{}",
        put.body
    );
    let mut conditions = after["status"]["conditions"].clone();
    conditions
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "ApprovalPatch", "status": "True", "reason": "e2e"}));
    let patch = json!({"metadata": {"annotations": {"patchedapproval": "true"}},
        "status": {"conditions": conditions}});
    let patched = c.raw(
        "PATCH",
        &format!("{CSRS}/e2e-csr/approval"),
        Some("application/merge-patch+json"),
        Some(patch.to_string().as_bytes()),
    );
    assert_eq!(patched.code, 200, "{}", patched.body);
    let patched = patched.json();
    let mut types = condition_types(&patched);
    types.sort();
    assert_eq!(types, ["ApprovalPatch", "Approved", "Failed"], "{patched}");
    assert_eq!(
        patched["metadata"]["annotations"]["patchedapproval"],
        "true"
    );

    // Watch, delete, deletecollection.
    let list = c.raw("GET", CSRS, None, None).json();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    c.ok_stdin(
        &["create", "-f", "-"],
        &csr_manifest("e2e-csr-2").to_string(),
    );
    let watched = c.raw(
        "GET",
        &format!("{CSRS}?watch=1&timeoutSeconds=1&resourceVersion={rv}"),
        None,
        None,
    );
    let seen = events(&watched.body);
    assert_eq!(seen.len(), 1, "{}", watched.body);
    assert_eq!(seen[0].0, "ADDED");
    assert_eq!(seen[0].1["metadata"]["name"], "e2e-csr-2");
    c.ok(&["delete", "csr", "e2e-csr"]);
    let gone = c.raw(
        "DELETE",
        &format!("{CSRS}?labelSelector=e2e%3Dyes"),
        None,
        None,
    );
    assert_eq!(gone.code, 200, "{}", gone.body);
    assert_eq!(c.raw("GET", CSRS, None, None).json()["items"], json!([]));
}

/// A built-in kind's status subresource (upstream's status strategies): status and the
/// metadata written with it change, spec does not (the Ingress API conformance case); a
/// Deployment's labels do not either.
#[test]
fn status_writes_keep_metadata_but_not_spec() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    let ing = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}});
    c.ok_stdin(&["create", "-f", "-"], &ing.to_string());
    let path = "/apis/networking.k8s.io/v1/namespaces/default/ingresses/web/status";
    let patch = json!({"metadata": {"annotations": {"patchedstatus": "true"}},
        "spec": {"defaultBackend": {"service": {"name": "other", "port": {"number": 81}}}},
        "status": {"loadBalancer": {"ingress": [{"ip": "169.1.1.1"}]}}});
    let reply = c.raw(
        "PATCH",
        path,
        Some("application/merge-patch+json"),
        Some(patch.to_string().as_bytes()),
    );
    assert_eq!(reply.code, 200, "{}", reply.body);
    let got = parse(&c.ok(&["get", "ingress", "web", "-o", "json"]));
    assert_eq!(
        got["metadata"]["annotations"]["patchedstatus"], "true",
        "{got}"
    );
    assert_eq!(
        got["status"]["loadBalancer"]["ingress"][0]["ip"],
        "169.1.1.1"
    );
    assert_eq!(got["spec"], ing["spec"], "{got}");
    // And a PUT of the status with a label.
    let mut put = got.clone();
    put["metadata"]["labels"] = json!({"updated": "status"});
    put["status"]["loadBalancer"]["ingress"][0]["ip"] = json!("169.1.1.2");
    let reply = c.raw(
        "PUT",
        path,
        Some("application/json"),
        Some(put.to_string().as_bytes()),
    );
    assert_eq!(reply.code, 200, "{}", reply.body);
    let got = reply.json();
    assert_eq!(got["metadata"]["labels"]["updated"], "status", "{got}");
    assert_eq!(got["metadata"]["annotations"]["patchedstatus"], "true");
    assert_eq!(
        got["status"]["loadBalancer"]["ingress"][0]["ip"],
        "169.1.1.2"
    );

    // A Deployment's status write keeps its labels (upstream's deployment status strategy,
    // the "lifecycle of a Deployment" conformance case); annotations change.
    c.ok(&["create", "deployment", "web", "--image=busybox"]);
    c.ok(&["label", "deployment", "web", "test-deployment=updated"]);
    let patch = json!({"metadata": {"labels": {"test-deployment": "patched-status"},
        "annotations": {"patchedstatus": "true"}}, "status": {"readyReplicas": 0}});
    let reply = c.raw(
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web/status",
        Some("application/strategic-merge-patch+json"),
        Some(patch.to_string().as_bytes()),
    );
    assert_eq!(reply.code, 200, "{}", reply.body);
    let got = reply.json();
    assert_eq!(
        got["metadata"]["labels"]["test-deployment"], "updated",
        "{got}"
    );
    assert_eq!(
        got["metadata"]["annotations"]["patchedstatus"], "true",
        "{got}"
    );
}

#[test]
fn reviews_refuse_tables() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}});
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let reply = c.raw_accept(
        "POST",
        path,
        Some("application/json"),
        Some(table),
        Some(sar.to_string().as_bytes()),
    );
    assert_eq!(reply.code, 406, "{}", reply.body);
    let status = reply.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "NotAcceptable");
    assert_eq!(status["code"], 406);
    assert_eq!(
        status["message"],
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    );
    // With a fallback offered, the fallback is answered.
    let reply = c.raw_accept(
        "POST",
        path,
        Some("application/json"),
        Some(&format!("{table}, application/json")),
        Some(sar.to_string().as_bytes()),
    );
    assert_eq!(reply.code, 201, "{}", reply.body);
    assert_eq!(reply.json()["status"]["allowed"], true);
}

/// A CRD whose version `v1` has `spec.b` defaulted by its schema when `with_default`.
fn defaulting_crd(with_default: bool) -> String {
    let mut b = json!({"type": "string"});
    if with_default {
        b["default"] = json!("B");
    }
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.defaults.example.com"},
        "spec": {"group": "defaults.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"a": {"type": "string"}, "b": b}}}}}}]}})
    .to_string()
}

#[test]
fn custom_resources_are_defaulted_on_read_from_storage() {
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    c.ok_stdin(&["create", "-f", "-"], &defaulting_crd(false));
    k1s_tests::eventually("the CRD to be served", 30, || {
        c.run(&["get", "widgets"]).status.success()
    });
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "defaults.example.com/v1", "kind": "Widget",
            "metadata": {"name": "w1", "namespace": "default"}, "spec": {"a": "A"}}"#,
    );
    assert!(c.get_json(&["widget", "w1"])["spec"].get("b").is_none());
    // The schema gains a default: the stored object (written without it) reads with it, in
    // gets and lists alike, as upstream defaults objects read from storage.
    c.ok_stdin(&["apply", "-f", "-"], &defaulting_crd(true));
    k1s_tests::eventually("the stored widget to read with the new default", 30, || {
        c.get_json(&["widget", "w1"])["spec"]["b"] == "B"
    });
    assert_eq!(c.get_json(&["widgets"])["items"][0]["spec"]["b"], "B");
    assert_eq!(c.get_json(&["widget", "w1"])["spec"]["a"], "A");
}
