//! Scenarios as `kubectl apply --server-side`, `kubectl scale`, `kubectl edit` and client-side
//! apply produce them.

use serde_json::{Value, json};

use super::*;

const T1: &str = "2024-01-01T00:00:01Z";
const T2: &str = "2024-01-01T00:00:02Z";
const T3: &str = "2024-01-01T00:00:03Z";
const T4: &str = "2024-01-01T00:00:04Z";

fn deployment_schema() -> &'static Schema {
    schema_for(TypeKey {
        group: "apps",
        kind: "Deployment",
    })
    .unwrap()
}

fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": image, "ports": [{"containerPort": 80}]}]}
            }
        }
    })
}

fn entries(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn entry<'a>(obj: &'a Value, manager: &str, operation: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|e| e["manager"] == manager && e["operation"] == operation)
        })
        .unwrap_or_else(|| panic!("no {operation} entry for {manager} in {obj}"))
}

fn fields_text(obj: &Value, manager: &str, operation: &str) -> String {
    FieldSet::from_fields_v1(&entry(obj, manager, operation)["fieldsV1"])
        .unwrap()
        .to_fields_v1_string()
}

fn conflicts(r: Result<Value, ApplyError>) -> (Vec<Conflict>, String) {
    match r {
        Err(e @ ApplyError::Conflicts(_)) => {
            let msg = e.to_string();
            let ApplyError::Conflicts(c) = e else {
                unreachable!()
            };
            (c, msg)
        }
        other => panic!("expected conflicts, got {other:?}"),
    }
}

fn ssa(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, ApplyError> {
    apply(
        deployment_schema(),
        live,
        config,
        manager,
        "apps/v1",
        None,
        force,
        now,
    )
}

#[test]
fn create_by_apply_records_one_apply_entry() {
    let obj = ssa(None, &deployment(2, "nginx:1.14"), "kubectl", false, T1).unwrap();
    let mf = entries(&obj);
    assert_eq!(mf.len(), 1);
    assert_eq!(
        mf[0],
        json!({
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": mf[0]["fieldsV1"].clone(),
        })
    );
    assert_eq!(
        fields_text(&obj, "kubectl", "Apply"),
        r#"{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:replicas":{},"f:selector":{},"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}}}}"#
    );
    assert_eq!(obj["spec"]["replicas"], json!(2));
    assert_eq!(obj["metadata"]["name"], json!("nginx"));
}

#[test]
fn reapply_unchanged_is_a_no_op() {
    let cfg = deployment(2, "nginx:1.14");
    let obj = ssa(None, &cfg, "kubectl", false, T1).unwrap();
    let again = ssa(Some(&obj), &cfg, "kubectl", false, T2).unwrap();
    assert_eq!(again, obj);
    assert_eq!(entry(&again, "kubectl", "Apply")["time"], json!(T1));
}

#[test]
fn apply_changing_image() {
    let obj = ssa(None, &deployment(2, "nginx:1.14"), "kubectl", false, T1).unwrap();
    let obj2 = ssa(
        Some(&obj),
        &deployment(2, "nginx:1.16"),
        "kubectl",
        false,
        T2,
    )
    .unwrap();
    assert_eq!(
        obj2["spec"]["template"]["spec"]["containers"][0]["image"],
        json!("nginx:1.16")
    );
    assert_eq!(entries(&obj2).len(), 1);
    assert_eq!(entry(&obj2, "kubectl", "Apply")["time"], json!(T2));
    assert_eq!(
        entry(&obj2, "kubectl", "Apply")["fieldsV1"],
        entry(&obj, "kubectl", "Apply")["fieldsV1"]
    );
}

#[test]
fn apply_removing_label_and_container_removes_them() {
    let mut cfg = deployment(2, "nginx:1.14");
    cfg["metadata"]["labels"]["tier"] = json!("web");
    cfg["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "sidecar", "image": "busybox"}));
    let mut live = ssa(None, &cfg, "kubectl", false, T1).unwrap();
    // Server-side defaults nobody owns stay with the container that is removed.
    live["spec"]["template"]["spec"]["containers"][1]["imagePullPolicy"] = json!("Always");
    live["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
    let obj = ssa(
        Some(&live),
        &deployment(2, "nginx:1.14"),
        "kubectl",
        false,
        T2,
    )
    .unwrap();
    assert_eq!(obj["metadata"]["labels"], json!({"app": "nginx"}));
    let containers = obj["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0]["name"], json!("nginx"));
    // The unowned default on a kept container stays.
    assert_eq!(containers[0]["imagePullPolicy"], json!("IfNotPresent"));
    assert!(!fields_text(&obj, "kubectl", "Apply").contains("sidecar"));
}

#[test]
fn apply_removing_all_labels_drops_the_map() {
    let mut cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"k": "v"}});
    let s = schema_for(TypeKey {
        group: "",
        kind: "ConfigMap",
    })
    .unwrap();
    let live = apply(s, None, &cfg, "m", "v1", None, false, T1).unwrap();
    cfg["metadata"].as_object_mut().unwrap().remove("labels");
    let obj = apply(s, Some(&live), &cfg, "m", "v1", None, false, T2).unwrap();
    assert!(obj["metadata"].get("labels").is_none(), "{obj}");
    assert_eq!(obj["data"], json!({"k": "v"}));
}

#[test]
fn field_shared_with_another_applier_is_not_removed() {
    let mut cfg_a = deployment(2, "nginx:1.14");
    cfg_a["metadata"]["labels"]["tier"] = json!("web");
    let live = ssa(None, &cfg_a, "a", false, T1).unwrap();
    // b applies the same value: no conflict, shared ownership.
    let cfg_b = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx", "labels": {"tier": "web"}}});
    let live = ssa(Some(&live), &cfg_b, "b", false, T2).unwrap();
    assert_eq!(
        fields_text(&live, "b", "Apply"),
        r#"{"f:metadata":{"f:labels":{"f:tier":{}}}}"#
    );
    let obj = ssa(Some(&live), &deployment(2, "nginx:1.14"), "a", false, T3).unwrap();
    assert_eq!(obj["metadata"]["labels"]["tier"], json!("web"));
    assert!(!fields_text(&obj, "a", "Apply").contains("tier"));
}

#[test]
fn two_appliers_conflict_and_force_moves_ownership() {
    let live = ssa(None, &deployment(2, "nginx:1.14"), "a", false, T1).unwrap();
    let cfg_b = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx"}, "spec": {"replicas": 3}});
    let (c, msg) = conflicts(ssa(Some(&live), &cfg_b, "b", false, T2));
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].manager, "a");
    assert_eq!(c[0].field, ".spec.replicas");
    assert_eq!(c[0].cause_message(), r#"conflict with "a""#);
    assert_eq!(
        msg,
        r#"Apply failed with 1 conflict: conflict with "a": .spec.replicas"#
    );

    let forced = ssa(Some(&live), &cfg_b, "b", true, T2).unwrap();
    assert_eq!(forced["spec"]["replicas"], json!(3));
    assert_eq!(
        fields_text(&forced, "b", "Apply"),
        r#"{"f:spec":{"f:replicas":{}}}"#
    );
    assert!(!fields_text(&forced, "a", "Apply").contains("replicas"));
    // Entries sorted: Apply entries by time.
    let names: Vec<Value> = entries(&forced)
        .iter()
        .map(|e| e["manager"].clone())
        .collect();
    assert_eq!(names, [json!("a"), json!("b")]);

    // a re-applying its replicas now conflicts with b.
    let (c, msg) = conflicts(ssa(
        Some(&forced),
        &deployment(2, "nginx:1.14"),
        "a",
        false,
        T3,
    ));
    assert_eq!(
        (c[0].manager.as_str(), c[0].field.as_str()),
        ("b", ".spec.replicas")
    );
    assert_eq!(
        msg,
        r#"Apply failed with 1 conflict: conflict with "b": .spec.replicas"#
    );
    // ...but a dropping replicas from its config is fine and leaves b's value.
    let mut cfg = deployment(2, "nginx:1.14");
    cfg["spec"].as_object_mut().unwrap().remove("replicas");
    let obj = ssa(Some(&forced), &cfg, "a", false, T3).unwrap();
    assert_eq!(obj["spec"]["replicas"], json!(3));
}

#[test]
fn multiple_conflicts_message() {
    let live = ssa(None, &deployment(2, "nginx:1.14"), "a", false, T1).unwrap();
    let cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx", "labels": {"app": "x"}}, "spec": {"replicas": 3}});
    let (c, msg) = conflicts(ssa(Some(&live), &cfg, "b", false, T2));
    assert_eq!(c.len(), 2);
    assert_eq!(
        msg,
        "Apply failed with 2 conflicts: conflicts with \"a\":\n- .metadata.labels.app\n- .spec.replicas"
    );
}

#[test]
fn scale_then_apply_conflicts_with_the_update_manager() {
    let live = ssa(None, &deployment(2, "nginx:1.14"), "kubectl", false, T1).unwrap();
    // kubectl scale --replicas=5: an Update through the scale subresource.
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(5);
    record_update(
        deployment_schema(),
        Some(&live),
        &mut scaled,
        "kubectl",
        "apps/v1",
        Some("scale"),
        T2,
    )
    .unwrap();
    let e = entry(&scaled, "kubectl", "Update");
    assert_eq!(e["subresource"], json!("scale"));
    assert_eq!(e["apiVersion"], json!("apps/v1"));
    assert_eq!(e["time"], json!(T2));
    assert_eq!(
        fields_text(&scaled, "kubectl", "Update"),
        r#"{"f:spec":{"f:replicas":{}}}"#
    );
    assert!(!fields_text(&scaled, "kubectl", "Apply").contains("replicas"));

    let (c, msg) = conflicts(ssa(
        Some(&scaled),
        &deployment(3, "nginx:1.14"),
        "kubectl",
        false,
        T3,
    ));
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].operation.as_str(), c[0].subresource.as_str()),
        ("Update", "scale")
    );
    assert_eq!(
        msg,
        r#"Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps/v1: .spec.replicas"#
    );
    // Applying the current value is no conflict: ownership is shared.
    let shared = ssa(
        Some(&scaled),
        &deployment(5, "nginx:1.14"),
        "kubectl",
        false,
        T3,
    )
    .unwrap();
    assert!(fields_text(&shared, "kubectl", "Apply").contains("f:replicas"));
    assert!(fields_text(&shared, "kubectl", "Update").contains("f:replicas"));
}

#[test]
fn client_side_apply_then_server_side_apply() {
    // kubectl apply (client-side) creates the object: an Update by kubectl-client-side-apply.
    let mut created = deployment(2, "nginx:1.14");
    record_update(
        deployment_schema(),
        None,
        &mut created,
        "kubectl-client-side-apply",
        "apps/v1",
        None,
        T1,
    )
    .unwrap();
    assert_eq!(
        fields_text(&created, "kubectl-client-side-apply", "Update"),
        // As upstream: no "." on containers Go always has (spec, template, containers), and
        // `resources: {}` owned because every typed container has it.
        r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:replicas":{},"f:selector":{},"f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}},"f:resources":{}}}}}}}"#
    );
    let (c, msg) = conflicts(ssa(
        Some(&created),
        &deployment(3, "nginx:1.14"),
        "kubectl",
        false,
        T2,
    ));
    assert_eq!(c.len(), 1);
    assert_eq!(
        msg,
        r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas"#
    );
    // Same values: the server-side applier shares everything.
    let obj = ssa(
        Some(&created),
        &deployment(2, "nginx:1.14"),
        "kubectl",
        false,
        T2,
    )
    .unwrap();
    assert_eq!(entries(&obj).len(), 2);
    assert_eq!(entries(&obj)[0]["operation"], json!("Apply"));
}

#[test]
fn kubectl_migrates_from_client_side_apply() {
    let cfg = deployment(2, "nginx:1.14");
    let mut created = cfg.clone();
    created["metadata"]["annotations"] =
        json!({LAST_APPLIED_ANNOTATION: serde_json::to_string(&cfg).unwrap()});
    record_update(
        deployment_schema(),
        None,
        &mut created,
        "kubectl-client-side-apply",
        "apps/v1",
        None,
        T1,
    )
    .unwrap();
    // Fields still as last applied client-side may be taken over by kubectl.
    let obj = ssa(
        Some(&created),
        &deployment(3, "nginx:1.15"),
        "kubectl",
        false,
        T2,
    )
    .unwrap();
    assert_eq!(obj["spec"]["replicas"], json!(3));
    assert!(fields_text(&obj, "kubectl", "Apply").contains("f:replicas"));
    assert!(!fields_text(&obj, "kubectl-client-side-apply", "Update").contains("f:replicas"));
    // Other managers may not.
    assert!(matches!(
        ssa(
            Some(&created),
            &deployment(3, "nginx:1.15"),
            "other",
            false,
            T2
        ),
        Err(ApplyError::Conflicts(_))
    ));
    // A field changed since (kubectl scale) still conflicts.
    let mut scaled = created.clone();
    scaled["spec"]["replicas"] = json!(5);
    record_update(
        deployment_schema(),
        Some(&created),
        &mut scaled,
        "kubectl",
        "apps/v1",
        Some("scale"),
        T2,
    )
    .unwrap();
    let (c, _) = conflicts(ssa(
        Some(&scaled),
        &deployment(3, "nginx:1.15"),
        "kubectl",
        false,
        T3,
    ));
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].manager.as_str(), c[0].field.as_str()),
        ("kubectl", ".spec.replicas")
    );
}

#[test]
fn last_applied_annotation_follows_kubectl_server_side_apply() {
    let mut created = deployment(2, "nginx:1.14");
    created["metadata"]["annotations"] = json!({LAST_APPLIED_ANNOTATION: "{}"});
    record_update(
        deployment_schema(),
        None,
        &mut created,
        "kubectl-client-side-apply",
        "apps/v1",
        None,
        T1,
    )
    .unwrap();
    let cfg = deployment(2, "nginx:1.15");
    let obj = ssa(Some(&created), &cfg, "kubectl", true, T2).unwrap();
    let text = obj["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
        .as_str()
        .unwrap();
    let v: Value = serde_json::from_str(text).unwrap();
    assert_eq!(v, cfg);
}

#[test]
fn finalizers_are_a_set() {
    let s = schema_for(TypeKey {
        group: "",
        kind: "ConfigMap",
    })
    .unwrap();
    let cm = |f: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": f}});
    let live = apply(s, None, &cm(json!(["a", "b"])), "x", "v1", None, false, T1).unwrap();
    assert_eq!(
        fields_text(&live, "x", "Apply"),
        r#"{"f:metadata":{"f:finalizers":{"v:\"a\"":{},"v:\"b\"":{}}}}"#
    );
    let live = apply(
        s,
        Some(&live),
        &cm(json!(["c"])),
        "y",
        "v1",
        None,
        false,
        T2,
    )
    .unwrap();
    assert_eq!(live["metadata"]["finalizers"], json!(["a", "b", "c"]));
    let live = apply(
        s,
        Some(&live),
        &cm(json!(["a"])),
        "x",
        "v1",
        None,
        false,
        T3,
    )
    .unwrap();
    assert_eq!(live["metadata"]["finalizers"], json!(["a", "c"]));
    // Duplicates in an applied set are invalid.
    assert!(matches!(
        apply(
            s,
            Some(&live),
            &cm(json!(["a", "a"])),
            "x",
            "v1",
            None,
            false,
            T3
        ),
        Err(ApplyError::Schema(MergeError::Duplicate { .. }))
    ));
}

#[test]
fn container_ports_have_composite_keys() {
    let s = schema_for(TypeKey {
        group: "",
        kind: "Pod",
    })
    .unwrap();
    let pod = |ports: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "i", "ports": ports}]}})
    };
    let live = apply(
        s,
        None,
        &pod(json!([{"containerPort": 53, "protocol": "UDP"}, {"containerPort": 53}])),
        "a",
        "v1",
        None,
        false,
        T1,
    )
    .unwrap();
    let text = fields_text(&live, "a", "Apply");
    assert!(
        text.contains(r#"k:{\"containerPort\":53,\"protocol\":\"TCP\"}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"k:{\"containerPort\":53,\"protocol\":\"UDP\"}"#),
        "{text}"
    );
    // Another applier changes the TCP port's name only: it merges into the same item.
    let other = pod(json!([{"containerPort": 53, "protocol": "TCP", "name": "dns-tcp"}]));
    let live = apply(s, Some(&live), &other, "b", "v1", None, false, T2).unwrap();
    let ports = live["spec"]["containers"][0]["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 2);
    assert_eq!(
        ports[1],
        json!({"containerPort": 53, "protocol": "TCP", "name": "dns-tcp"})
    );
    // A duplicated key is invalid.
    let dup = pod(json!([{"containerPort": 53}, {"containerPort": 53, "protocol": "TCP"}]));
    match apply(s, Some(&live), &dup, "a", "v1", None, false, T3) {
        Err(e @ ApplyError::Schema(MergeError::Duplicate { .. })) => {
            assert_eq!(
                e.to_string(),
                r#".spec.containers[name="c"].ports: duplicate entries for key [containerPort=53,protocol="TCP"]"#
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn atomic_lists_are_replaced_wholesale() {
    let s = schema_for(TypeKey {
        group: "",
        kind: "Pod",
    })
    .unwrap();
    let pod = |tol: Value, args: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"tolerations": tol, "containers": [{"name": "c", "args": args}]}})
    };
    let live = apply(
        s,
        None,
        &pod(
            json!([{"key": "a", "operator": "Exists"}]),
            json!(["x", "y"]),
        ),
        "a",
        "v1",
        None,
        false,
        T1,
    )
    .unwrap();
    assert!(fields_text(&live, "a", "Apply").contains(r#""f:tolerations":{}"#));
    assert!(fields_text(&live, "a", "Apply").contains(r#""f:args":{}"#));
    let other = pod(json!([{"key": "b", "operator": "Exists"}]), json!(["z"]));
    let (c, _) = conflicts(apply(s, Some(&live), &other, "b", "v1", None, false, T2));
    let fields: Vec<&str> = c.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        [".spec.tolerations", r#".spec.containers[name="c"].args"#]
    );
    let forced = apply(s, Some(&live), &other, "b", "v1", None, true, T2).unwrap();
    assert_eq!(
        forced["spec"]["tolerations"],
        json!([{"key": "b", "operator": "Exists"}])
    );
    assert_eq!(forced["spec"]["containers"][0]["args"], json!(["z"]));
}

#[test]
fn atomic_structs_and_maps() {
    let live = ssa(None, &deployment(2, "nginx:1.14"), "a", false, T1).unwrap();
    // selector is an atomic struct: a different selector conflicts as a whole.
    let cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx"},
                     "spec": {"selector": {"matchLabels": {"app": "nginx", "x": "y"}}}});
    let (c, _) = conflicts(ssa(Some(&live), &cfg, "b", false, T2));
    assert_eq!(c[0].field, ".spec.selector");
    let forced = ssa(Some(&live), &cfg, "b", true, T2).unwrap();
    assert_eq!(
        forced["spec"]["selector"],
        json!({"matchLabels": {"app": "nginx", "x": "y"}})
    );
}

#[test]
fn owner_references_are_keyed_by_uid() {
    let s = schema_for(TypeKey {
        group: "apps",
        kind: "ReplicaSet",
    })
    .unwrap();
    let cfg = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u1", "controller": true}]}});
    let obj = apply(s, None, &cfg, "m", "apps/v1", None, false, T1).unwrap();
    assert_eq!(
        fields_text(&obj, "m", "Apply"),
        r#"{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"u1\"}":{}}}}"#
    );
}

#[test]
fn create_by_update_and_merging_updates() {
    let s = schema_for(TypeKey {
        group: "",
        kind: "ConfigMap",
    })
    .unwrap();
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "uid": "x", "resourceVersion": "1"}, "data": {"a": "1"}});
    record_update(s, None, &mut cm, "kubectl-create", "v1", None, T1).unwrap();
    assert_eq!(
        fields_text(&cm, "kubectl-create", "Update"),
        r#"{"f:data":{".":{},"f:a":{}}}"#
    );

    // kubectl edit changes a, then b: one merged entry whose time moves.
    let mut e1 = cm.clone();
    e1["data"]["a"] = json!("2");
    record_update(s, Some(&cm), &mut e1, "kubectl-edit", "v1", None, T2).unwrap();
    let mut e2 = e1.clone();
    e2["data"]["b"] = json!("1");
    record_update(s, Some(&e1), &mut e2, "kubectl-edit", "v1", None, T3).unwrap();
    assert_eq!(
        fields_text(&e2, "kubectl-edit", "Update"),
        r#"{"f:data":{"f:a":{},"f:b":{}}}"#
    );
    assert_eq!(entry(&e2, "kubectl-edit", "Update")["time"], json!(T3));
    // kubectl-create still owns the map itself.
    assert_eq!(
        fields_text(&e2, "kubectl-create", "Update"),
        r#"{"f:data":{}}"#
    );
    let names: Vec<Value> = entries(&e2).iter().map(|e| e["manager"].clone()).collect();
    assert_eq!(names, [json!("kubectl-create"), json!("kubectl-edit")]);

    // A no-op update changes nothing.
    let mut same = e2.clone();
    record_update(s, Some(&e2), &mut same, "other", "v1", None, T4).unwrap();
    assert_eq!(same, e2);

    // Removing a field takes it from every manager.
    let mut removed = e2.clone();
    removed["data"].as_object_mut().unwrap().remove("a");
    record_update(s, Some(&e2), &mut removed, "other", "v1", None, T4).unwrap();
    assert_eq!(
        fields_text(&removed, "kubectl-edit", "Update"),
        r#"{"f:data":{"f:b":{}}}"#
    );
    assert!(entries(&removed).iter().all(|e| e["manager"] != "other"));
}

#[test]
fn empty_managed_fields_in_an_update_clear_them() {
    let s = schema_for(TypeKey {
        group: "",
        kind: "ConfigMap",
    })
    .unwrap();
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    record_update(s, None, &mut cm, "creator", "v1", None, T1).unwrap();
    for reset in [json!([]), json!([{}])] {
        let mut cleared = cm.clone();
        cleared["metadata"]["managedFields"] = reset;
        record_update(s, Some(&cm), &mut cleared, "patcher", "v1", None, T2).unwrap();
        assert!(
            cleared["metadata"].get("managedFields").is_none(),
            "{cleared}"
        );
    }
    // The reset write's own changes are not recorded for an existing object (it has a uid)...
    cm["metadata"]["uid"] = json!("u");
    let mut changed = cm.clone();
    changed["metadata"]["managedFields"] = json!([]);
    changed["data"]["b"] = json!("2");
    record_update(s, Some(&cm), &mut changed, "patcher", "v1", None, T2).unwrap();
    assert!(
        changed["metadata"].get("managedFields").is_none(),
        "{changed}"
    );
    // ...nor later updates, until someone applies.
    let mut later = changed.clone();
    later["data"]["c"] = json!("3");
    record_update(s, Some(&changed), &mut later, "patcher", "v1", None, T3).unwrap();
    assert!(later["metadata"].get("managedFields").is_none(), "{later}");
}

#[test]
fn first_apply_to_an_unmanaged_object() {
    let mut live = deployment(1, "nginx:1.14");
    live["metadata"]["uid"] = json!("u");
    let (c, msg) = conflicts(ssa(
        Some(&live),
        &deployment(2, "nginx:1.14"),
        "kubectl",
        false,
        T1,
    ));
    assert_eq!(c.len(), 1);
    assert_eq!(
        msg,
        r#"Apply failed with 1 conflict: conflict with "before-first-apply" using apps/v1: .spec.replicas"#
    );
    let obj = ssa(
        Some(&live),
        &deployment(1, "nginx:1.14"),
        "kubectl",
        false,
        T1,
    )
    .unwrap();
    assert_eq!(entries(&obj).len(), 2);
    let before = fields_text(&obj, BEFORE_FIRST_APPLY, "Update");
    assert!(
        before.contains("f:replicas") && before.contains("f:image"),
        "{before}"
    );
    assert_eq!(entry(&obj, BEFORE_FIRST_APPLY, "Update")["time"], json!(T1));
}

#[test]
fn managed_fields_from_the_client_are_honored_if_valid() {
    let s = schema_for(TypeKey {
        group: "",
        kind: "ConfigMap",
    })
    .unwrap();
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    record_update(s, None, &mut cm, "creator", "v1", None, T1).unwrap();
    let custom = json!([{"manager": "someone", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]);
    let mut upd = cm.clone();
    upd["metadata"]["managedFields"] = custom.clone();
    record_update(s, Some(&cm), &mut upd, "writer", "v1", None, T2).unwrap();
    assert_eq!(upd["metadata"]["managedFields"], custom);
    // Invalid ones are replaced by the live object's.
    let mut bad = cm.clone();
    bad["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Bogus"}]);
    record_update(s, Some(&cm), &mut bad, "writer", "v1", None, T2).unwrap();
    assert_eq!(
        bad["metadata"]["managedFields"],
        cm["metadata"]["managedFields"]
    );
    // On a subresource the body's managedFields are ignored.
    let mut sub = cm.clone();
    sub["metadata"]["managedFields"] = custom;
    record_update(s, Some(&cm), &mut sub, "writer", "v1", Some("status"), T2).unwrap();
    assert_eq!(
        sub["metadata"]["managedFields"],
        cm["metadata"]["managedFields"]
    );
}

#[test]
fn status_is_not_owned_through_the_main_resource() {
    let mut cfg = deployment(2, "nginx:1.14");
    cfg["status"] = json!({"replicas": 7});
    let obj = ssa(None, &cfg, "kubectl", false, T1).unwrap();
    assert!(!fields_text(&obj, "kubectl", "Apply").contains("status"));
    // The status subresource records status fields under its own entry.
    let mut with_status = obj.clone();
    with_status["status"] = json!({"replicas": 2, "readyReplicas": 2});
    record_update(
        deployment_schema(),
        Some(&obj),
        &mut with_status,
        "kube-controller-manager",
        "apps/v1",
        Some("status"),
        T2,
    )
    .unwrap();
    let e = entry(&with_status, "kube-controller-manager", "Update");
    assert_eq!(e["subresource"], json!("status"));
    assert_eq!(
        FieldSet::from_fields_v1(&e["fieldsV1"])
            .unwrap()
            .to_fields_v1_string(),
        r#"{"f:status":{"f:readyReplicas":{},"f:replicas":{}}}"#
    );
    // A spec change sneaking through /status is not owned.
    let mut sneaky = with_status.clone();
    sneaky["spec"]["replicas"] = json!(9);
    record_update(
        deployment_schema(),
        Some(&with_status),
        &mut sneaky,
        "kube-controller-manager",
        "apps/v1",
        Some("status"),
        T3,
    )
    .unwrap();
    assert!(!fields_text(&sneaky, "kube-controller-manager", "Update").contains("spec"));
}

#[test]
fn the_same_manager_on_a_subresource_is_a_separate_entry() {
    let live = ssa(None, &deployment(2, "nginx:1.14"), "m", false, T1).unwrap();
    let status_cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx"}, "status": {"replicas": 1}});
    let obj = apply(
        deployment_schema(),
        Some(&live),
        &status_cfg,
        "m",
        "apps/v1",
        Some("status"),
        false,
        T2,
    )
    .unwrap();
    let mf = entries(&obj);
    assert_eq!(mf.len(), 2);
    assert_eq!(mf[1]["subresource"], json!("status"));
    assert_eq!(
        FieldSet::from_fields_v1(&mf[1]["fieldsV1"])
            .unwrap()
            .to_fields_v1_string(),
        r#"{"f:status":{"f:replicas":{}}}"#
    );
    // Applying status without spec on /status does not prune the main entry's fields.
    assert_eq!(obj["spec"]["replicas"], json!(2));
}

#[test]
fn invalid_configurations() {
    let mut cfg = deployment(2, "nginx:1.14");
    cfg["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("name");
    match ssa(None, &cfg, "m", false, T1) {
        Err(
            e @ ApplyError::Schema(MergeError::Element {
                index: 0,
                source: ItemError::NoKeyFields { .. },
                ..
            }),
        ) => assert_eq!(
            e.to_string(),
            r#".spec.template.spec.containers: element 0: associative list with keys has an element that omits all key fields ["name"] (and doesn't have default values for any key fields)"#
        ),
        other => panic!("{other:?}"),
    }
    let mut cfg = deployment(2, "nginx:1.14");
    cfg["metadata"]["managedFields"] = json!([]);
    assert!(
        matches!(ssa(None, &cfg, "m", false, T1), Err(e @ ApplyError::ManagedFieldsSet) if e.to_string() == "metadata.managedFields must be nil")
    );
    let e = ssa(None, &json!([1]), "m", false, T1).unwrap_err();
    assert!(matches!(e, ApplyError::ConfigNotObject));
    assert_eq!(
        e.to_string(),
        "the applied configuration must be a JSON object"
    );
}

#[test]
fn null_in_config_removes_the_value_but_is_owned() {
    let live = ssa(None, &deployment(2, "nginx:1.14"), "a", false, T1).unwrap();
    let mut cfg = deployment(2, "nginx:1.14");
    cfg["spec"]["replicas"] = Value::Null;
    let obj = ssa(Some(&live), &cfg, "a", false, T2).unwrap();
    assert!(obj["spec"].get("replicas").is_none());
    assert!(fields_text(&obj, "a", "Apply").contains("f:replicas"));
}

#[test]
fn custom_resource_schema() {
    let s = schema_from_openapi(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "hosts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
            "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }}}
    }))
    .with_status_subresource(true);
    let cr = |hosts: Value, config: Value| json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"hosts": hosts, "config": config}});
    let live = apply(
        &s,
        None,
        &cr(json!([{"name": "a", "port": 1}]), json!({"x": {"y": 1}})),
        "a",
        "example.com/v1",
        None,
        false,
        T1,
    )
    .unwrap();
    assert_eq!(
        fields_text(&live, "a", "Apply"),
        r#"{"f:spec":{"f:config":{"f:x":{".":{},"f:y":{}}},"f:hosts":{"k:{\"name\":\"a\"}":{".":{},"f:name":{},"f:port":{}}}}}"#
    );
    let live = apply(
        &s,
        Some(&live),
        &cr(json!([{"name": "b"}]), json!({"z": 1})),
        "b",
        "example.com/v1",
        None,
        false,
        T2,
    )
    .unwrap();
    assert_eq!(
        live["spec"]["hosts"],
        json!([{"name": "a", "port": 1}, {"name": "b"}])
    );
    assert_eq!(live["spec"]["config"], json!({"x": {"y": 1}, "z": 1}));
    let (c, _) = conflicts(apply(
        &s,
        Some(&live),
        &cr(json!([{"name": "a", "port": 2}]), json!({})),
        "b",
        "example.com/v1",
        None,
        false,
        T3,
    ));
    assert_eq!(c[0].field, r#".spec.hosts[name="a"].port"#);
}

#[test]
fn untyped_schema_for_unknown_kinds() {
    let s = Schema::untyped();
    let cfg = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {"list": [1, 2], "m": {"k": "v"}}});
    let obj = apply(&s, None, &cfg, "m", "x/v1", None, false, T1).unwrap();
    assert_eq!(
        fields_text(&obj, "m", "Apply"),
        r#"{"f:metadata":{"f:labels":{"f:a":{}}},"f:spec":{".":{},"f:list":{},"f:m":{".":{},"f:k":{}}}}"#
    );
}

#[test]
fn update_managers_are_capped() {
    let s = schema_for(TypeKey {
        group: "",
        kind: "ConfigMap",
    })
    .unwrap();
    let mut obj =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}});
    for i in 0..12 {
        let mut next = obj.clone();
        next["data"][format!("k{i}")] = json!("v");
        record_update(
            s,
            Some(&obj),
            &mut next,
            &format!("m{i:02}"),
            "v1",
            None,
            &format!("2024-01-01T00:00:{i:02}Z"),
        )
        .unwrap();
        obj = next;
    }
    let mf = entries(&obj);
    assert_eq!(mf.len(), 10);
    assert_eq!(mf[0]["manager"], json!("ancient-changes"));
    assert_eq!(
        FieldSet::from_fields_v1(&mf[0]["fieldsV1"]).unwrap().len(),
        3
    );
}

#[test]
fn empty_manager_is_unknown() {
    let s = schema_for(TypeKey {
        group: "",
        kind: "ConfigMap",
    })
    .unwrap();
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    record_update(s, None, &mut cm, "", "v1", None, T1).unwrap();
    assert_eq!(entries(&cm)[0]["manager"], json!("unknown"));
}

/// A small deterministic generator of arbitrary JSON shaped like Kubernetes objects.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }

    fn value(&mut self, depth: u32) -> Value {
        const KEYS: &[&str] = &[
            "metadata",
            "spec",
            "status",
            "labels",
            "finalizers",
            "containers",
            "name",
            "image",
            "ports",
            "containerPort",
            "protocol",
            "template",
            "replicas",
            "selector",
            "managedFields",
            "tolerations",
            "ownerReferences",
            "uid",
            "data",
            "fieldsV1",
            "operation",
            "manager",
            "apiVersion",
            "fieldsType",
            "f:spec",
            "k:{\"name\":1}",
            "v:3",
            ".",
        ];
        let choice = if depth == 0 {
            self.next() % 5
        } else {
            self.next() % 8
        };
        match choice {
            0 => Value::Null,
            1 => json!(self.next().is_multiple_of(3)),
            2 => json!(self.next() % 100),
            3 => json!(self.pick(&["a", "b", "TCP", "Apply", "Update", "FieldsV1", "v1", ""])),
            4 => json!(-1.5),
            5 | 6 => {
                let n = self.next() % 4;
                let mut m = serde_json::Map::new();
                for _ in 0..n {
                    m.insert(self.pick(KEYS).to_string(), self.value(depth - 1));
                }
                Value::Object(m)
            }
            _ => Value::Array(
                (0..self.next() % 4)
                    .map(|_| self.value(depth - 1))
                    .collect(),
            ),
        }
    }
}

#[test]
fn no_panics_on_arbitrary_input() {
    let mut g = Gen(0x9E3779B97F4A7C15);
    let schemas: Vec<&Schema> = [("", "Pod"), ("apps", "Deployment"), ("", "ConfigMap")]
        .iter()
        .map(|(g, k)| schema_for(TypeKey { group: g, kind: k }).unwrap())
        .collect();
    let untyped = Schema::untyped();
    for i in 0..3000 {
        let s = if i % 4 == 3 { &untyped } else { schemas[i % 3] };
        let live = g.value(6);
        let mut cfg = g.value(6);
        if i % 2 == 0 {
            cfg = json!({"metadata": {"name": "x"}, "spec": cfg});
        }
        let live_opt = if i % 5 == 0 { None } else { Some(&live) };
        let r = apply(s, live_opt, &cfg, "m", "v1", None, i % 3 == 0, T1);
        if let Ok(obj) = &r {
            let _ = apply(
                s,
                Some(obj),
                &g.value(5),
                "n",
                "v1",
                Some("status"),
                false,
                T2,
            );
        }
        let mut new = g.value(6);
        let _ = record_update(s, live_opt, &mut new, "u", "v1", None, T2);
        let mut new2 = live.clone();
        if let Some(m) = new2.as_object_mut() {
            m.insert("spec".into(), g.value(4));
        }
        let _ = record_update(s, Some(&live), &mut new2, "u", "v1", Some("scale"), T3);
        let _ = FieldSet::from_fields_v1(&g.value(5));
        let _ = schema_from_openapi(&g.value(5));
    }
}

#[test]
fn server_defaults_survive_reapply() {
    let mut live = ssa(None, &deployment(2, "nginx:1.14"), "kubectl", false, T1).unwrap();
    // Defaults the server added after the first apply are owned by nobody.
    live["spec"]["strategy"] = json!({"type": "RollingUpdate"});
    live["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] =
        json!("/dev/termination-log");
    live["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = json!("TCP");
    let obj = ssa(
        Some(&live),
        &deployment(2, "nginx:1.16"),
        "kubectl",
        false,
        T2,
    )
    .unwrap();
    assert_eq!(obj["spec"]["strategy"], json!({"type": "RollingUpdate"}));
    let c = &obj["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["terminationMessagePath"], json!("/dev/termination-log"));
    assert_eq!(
        c["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );
    assert_eq!(c["image"], json!("nginx:1.16"));
}
