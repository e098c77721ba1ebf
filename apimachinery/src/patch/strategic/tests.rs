//! Strategic merge patch cases modelled on what kubectl and controllers send.

use serde_json::{Value, json};

use super::super::merge_keys::lookup;
use super::super::{PatchError, PatchKey};
use super::apply;

fn smp(group: &str, kind: &str, original: &Value, patch: &Value) -> Result<Value, PatchError> {
    let schema = lookup(PatchKey { group, kind }).expect("kind has patch metadata");
    apply(schema, original, patch)
}

/// Wraps a pod spec into a Deployment as the server stores it.
fn deployment(pod_spec: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "default", "uid": "u-1", "resourceVersion": "7",
            "labels": {"app": "web"},
            "annotations": {"deployment.kubernetes.io/revision": "3"}
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec}
        },
        "status": {"replicas": 2, "conditions": [{"type": "Available", "status": "True"}]}
    })
}

/// A server-defaulted container.
fn container(name: &str, image: &str) -> Value {
    json!({
        "name": name, "image": image, "imagePullPolicy": "IfNotPresent", "resources": {},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
    })
}

fn with(mut v: Value, pairs: Value) -> Value {
    if let (Value::Object(m), Value::Object(extra)) = (&mut v, pairs) {
        m.extend(extra);
    }
    v
}

fn pod_spec_of(v: &Value) -> &Value {
    &v["spec"]["template"]["spec"]
}

fn template_patch(pod_spec_patch: Value) -> Value {
    json!({"spec": {"template": {"spec": pod_spec_patch}}})
}

#[test]
fn kubectl_set_image() {
    let live = deployment(
        json!({"containers": [container("c", "a:1"), container("d", "b:1")], "dnsPolicy": "ClusterFirst"}),
    );
    let patch = template_patch(json!({"containers": [{"name": "d", "image": "x"}]}));
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    let mut want = live.clone();
    want["spec"]["template"]["spec"]["containers"][1]["image"] = json!("x");
    assert_eq!(got, want);
}

#[test]
fn kubectl_rollout_restart_and_label() {
    let live = deployment(json!({"containers": [container("c", "a")]}));
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": "2025-05-01T10:00:00Z"}}}}});
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    assert_eq!(
        got["spec"]["template"]["metadata"],
        json!({"labels": {"app": "web"}, "annotations": {"kubectl.kubernetes.io/restartedAt": "2025-05-01T10:00:00Z"}})
    );
    assert_eq!(
        got["spec"]["template"]["spec"],
        live["spec"]["template"]["spec"]
    );

    // `kubectl label deploy web env=prod app-`
    let patch = json!({"metadata": {"labels": {"app": null, "env": "prod"}}});
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    assert_eq!(got["metadata"]["labels"], json!({"env": "prod"}));
    assert_eq!(
        got["metadata"]["annotations"],
        live["metadata"]["annotations"]
    );
}

/// `kubectl apply` of an edited manifest. Last applied: container `app`
/// (nginx:1.0, port 80, env A) and `sidecar`. Edited: image nginx:1.1, env B
/// added, port 80 -> 8080, sidecar removed, `logger` added. The live object
/// also has server defaults and an env var injected by a webhook.
#[test]
fn kubectl_client_side_apply_of_edited_deployment() {
    let app = with(
        container("app", "nginx:1.0"),
        json!({
            "ports": [{"containerPort": 80, "protocol": "TCP"}],
            "env": [{"name": "A", "value": "1"}, {"name": "INJECTED", "value": "w"}]
        }),
    );
    let live = deployment(json!({
        "containers": [app, with(container("sidecar", "busybox"), json!({"args": ["sleep", "1d"]}))],
        "restartPolicy": "Always"
    }));
    // What kubectl (CreateThreeWayMergePatch) sends for that edit.
    let patch = json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"new\":true}\n"}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "logger"}],
            "containers": [
                {
                    "$setElementOrder/env": [{"name": "A"}, {"name": "B"}],
                    "$setElementOrder/ports": [{"containerPort": 8080}],
                    "env": [{"name": "B", "value": "2"}],
                    "image": "nginx:1.1",
                    "name": "app",
                    "ports": [{"containerPort": 8080}, {"$patch": "delete", "containerPort": 80}]
                },
                {"image": "fluentd", "name": "logger"},
                {"$patch": "delete", "name": "sidecar"}
            ]
        }}}
    });
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    let want_app = with(
        container("app", "nginx:1.1"),
        json!({
            "ports": [{"containerPort": 8080}],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "INJECTED", "value": "w"}]
        }),
    );
    assert_eq!(
        pod_spec_of(&got),
        &json!({"containers": [want_app, {"name": "logger", "image": "fluentd"}], "restartPolicy": "Always"})
    );
    assert_eq!(
        got["metadata"]["annotations"],
        json!({
            "deployment.kubernetes.io/revision": "3",
            "kubectl.kubernetes.io/last-applied-configuration": "{\"new\":true}\n"
        })
    );
    assert_eq!(got["spec"]["strategy"], live["spec"]["strategy"]);
}

/// kubectl apply reordering containers without changing them sends only the
/// order directive.
#[test]
fn set_element_order_alone_reorders() {
    let live = deployment(
        json!({"containers": [container("a", "1"), container("b", "2"), container("c", "3")]}),
    );
    let patch =
        template_patch(json!({"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}]}));
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    let names: Vec<&str> = pod_spec_of(&got)["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    // `b` is server-only: it goes before `c`, which followed it on the server.
    assert_eq!(names, ["b", "c", "a"]);
    // With every element listed the order is exactly the directive's.
    let patch = template_patch(
        json!({"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}]}),
    );
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    assert_eq!(
        pod_spec_of(&got)["containers"],
        json!([
            container("c", "3"),
            container("a", "1"),
            container("b", "2")
        ])
    );
}

#[test]
fn list_directives() {
    let live =
        deployment(json!({"containers": [container("app", "x"), container("sidecar", "y")]}));

    // `$patch: delete` of a container.
    let patch = template_patch(json!({"containers": [{"$patch": "delete", "name": "sidecar"}]}));
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    assert_eq!(
        pod_spec_of(&got),
        &json!({"containers": [container("app", "x")]})
    );

    // `$patch: replace` element: the patch list replaces the list.
    let patch = template_patch(
        json!({"containers": [{"name": "only", "image": "z", "env": null}, {"$patch": "replace"}]}),
    );
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    assert_eq!(
        pod_spec_of(&got),
        &json!({"containers": [{"name": "only", "image": "z"}]})
    );

    // `$patch: merge` in a list is not implemented upstream.
    let patch = template_patch(json!({"containers": [{"$patch": "merge"}]}));
    let err = smp("apps", "Deployment", &live, &patch).unwrap_err();
    assert_eq!(
        err.to_string(),
        "merging lists cannot yet be specified in the patch"
    );
    assert_eq!(err.http_status(), 500);

    // A deletion without the merge key.
    let patch = template_patch(json!({"containers": [{"$patch": "delete", "image": "y"}]}));
    assert_eq!(
        smp("apps", "Deployment", &live, &patch)
            .unwrap_err()
            .http_status(),
        500
    );
}

#[test]
fn map_directives() {
    let live = deployment(
        json!({"containers": [container("app", "x")], "nodeSelector": {"a": "1", "b": "2"}}),
    );

    let patch = json!({"metadata": {"labels": {"$patch": "replace", "only": "this"}}});
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    assert_eq!(got["metadata"]["labels"], json!({"only": "this"}));

    let patch = template_patch(json!({"nodeSelector": {"$patch": "delete"}}));
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    assert_eq!(pod_spec_of(&got)["nodeSelector"], json!({}));

    // A new map carrying `$patch` is dropped entirely (upstream removeDirectives).
    let patch =
        template_patch(json!({"tolerations": null, "affinity": {"$patch": "replace", "x": 1}}));
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    assert!(pod_spec_of(&got).get("affinity").is_none());

    // `$patch: replace` at the top replaces the whole object.
    let got = smp(
        "",
        "ConfigMap",
        &json!({"data": {"a": "1"}}),
        &json!({"$patch": "replace", "data": {"b": "2"}}),
    )
    .unwrap();
    assert_eq!(got, json!({"data": {"b": "2"}}));

    for bad in ["merge", "frobnicate"] {
        let patch = json!({"metadata": {"labels": {"$patch": bad}}});
        let err = smp("apps", "Deployment", &live, &patch).unwrap_err();
        assert_eq!(err.http_status(), 500, "{bad}");
        assert!(
            err.to_string()
                .starts_with(&format!("unknown patch type: {bad} in map:")),
            "{err}"
        );
    }
}

#[test]
fn retain_keys_switches_volume_source() {
    let live = deployment(json!({
        "containers": [container("app", "x")],
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c", "defaultMode": 420}}]
    }));
    let patch = template_patch(json!({
        "$setElementOrder/volumes": [{"name": "data"}, {"name": "cfg"}],
        "volumes": [{"$retainKeys": ["hostPath", "name"], "emptyDir": null, "hostPath": {"path": "/data"}, "name": "data"}]
    }));
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    assert_eq!(
        pod_spec_of(&got)["volumes"],
        json!([{"name": "data", "hostPath": {"path": "/data"}}, {"name": "cfg", "configMap": {"name": "c", "defaultMode": 420}}])
    );
}

#[test]
fn retain_keys_switches_deployment_strategy() {
    let live = deployment(json!({"containers": [container("app", "x")]}));
    for patch in [
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": null, "type": "Recreate"}}}),
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
    ] {
        let got = smp("apps", "Deployment", &live, &patch).unwrap();
        assert_eq!(
            got["spec"]["strategy"],
            json!({"type": "Recreate"}),
            "{patch}"
        );
        assert_eq!(got["spec"]["replicas"], json!(2));
    }
    // Without $retainKeys the old rollingUpdate stays (plain map merge).
    let patch = json!({"spec": {"strategy": {"type": "Recreate"}}});
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    assert_eq!(
        got["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
        json!("25%")
    );

    // Patch keys must all be retained; the list must be a list.
    for patch in [
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 1}, "type": "Recreate"}}}),
        json!({"spec": {"strategy": {"$retainKeys": "type", "type": "Recreate"}}}),
    ] {
        let err = smp("apps", "Deployment", &live, &patch).unwrap_err();
        assert_eq!(err.to_string(), "invalid patch format of retainKeys");
        assert_eq!(err.http_status(), 400);
    }
}

#[test]
fn finalizers_are_a_set() {
    let live = json!({"metadata": {"name": "n", "finalizers": ["a", "b"]}});
    let cases = [
        // Union; patch elements first in patch order, server-only `b` after
        // `a`, its predecessor on the server.
        (
            json!({"metadata": {"finalizers": ["c", "a"]}}),
            json!(["c", "a", "b"]),
        ),
        (
            json!({"metadata": {"finalizers": ["b", "b"]}}),
            json!(["a", "b"]),
        ),
        (
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "zz"]}}),
            json!(["a"]),
        ),
        // kubectl apply removing `b` and appending `c`.
        (
            json!({"metadata": {
                "$setElementOrder/finalizers": ["a", "c"],
                "$deleteFromPrimitiveList/finalizers": ["b"],
                "finalizers": ["c"]
            }}),
            json!(["a", "c"]),
        ),
        // Order directive alone, on a primitive list.
        (
            json!({"metadata": {"$setElementOrder/finalizers": ["b", "a"]}}),
            json!(["b", "a"]),
        ),
        (json!({"metadata": {"finalizers": null}}), Value::Null),
    ];
    for (patch, want) in cases {
        let got = smp("", "Namespace", &live, &patch).unwrap();
        assert_eq!(got["metadata"]["finalizers"], want, "{patch}");
        assert_eq!(got["metadata"]["name"], json!("n"));
    }
    // Deleting from a list that does not exist is a no-op.
    let got = smp(
        "",
        "Namespace",
        &json!({"metadata": {}}),
        &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
    )
    .unwrap();
    assert_eq!(got, json!({"metadata": {}}));
}

#[test]
fn lists_without_merge_strategy_are_replaced() {
    let live = deployment(json!({
        "containers": [with(container("app", "x"), json!({
            "args": ["a", "b"],
            "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]
        }))],
        "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]
    }));
    let patch = template_patch(json!({
        "tolerations": [{"key": "c", "operator": "Exists"}],
        "containers": [{"name": "app", "args": ["c"], "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]}]
    }));
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    let spec = pod_spec_of(&got);
    assert_eq!(
        spec["tolerations"],
        json!([{"key": "c", "operator": "Exists"}])
    );
    assert_eq!(spec["containers"][0]["args"], json!(["c"]));
    assert_eq!(
        spec["containers"][0]["resizePolicy"],
        json!([{"resourceName": "memory", "restartPolicy": "RestartContainer"}])
    );
    assert_eq!(spec["containers"][0]["image"], json!("x"));

    // Unknown fields: objects merge, lists replace (custom data in a ConfigMap-like kind).
    let got = smp(
        "",
        "ConfigMap",
        &json!({"x": {"a": 1, "l": [1, 2]}}),
        &json!({"x": {"b": 2, "l": [3]}}),
    )
    .unwrap();
    assert_eq!(got, json!({"x": {"a": 1, "b": 2, "l": [3]}}));
}

#[test]
fn service_ports_merge_on_port_only() {
    let live = json!({"spec": {"ports": [
        {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443}
    ], "externalIPs": ["1.1.1.1"]}});
    let patch = json!({"spec": {"ports": [{"port": 443, "targetPort": 9443}, {"port": 53, "protocol": "UDP"}], "externalIPs": ["2.2.2.2"]}});
    let got = smp("", "Service", &live, &patch).unwrap();
    assert_eq!(
        got,
        json!({"spec": {"ports": [
        {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 9443},
        {"port": 53, "protocol": "UDP"}
    ], "externalIPs": ["2.2.2.2"]}})
    );

    // Upstream's known limitation: the SMP key is `port` alone, so a UDP
    // entry merges into the TCP entry with the same port number.
    let live = json!({"spec": {"ports": [{"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}});
    let patch = json!({"spec": {"ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}});
    let got = smp("", "Service", &live, &patch).unwrap();
    assert_eq!(
        got,
        json!({"spec": {"ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}})
    );
}

#[test]
fn node_status_and_spec() {
    let live = json!({
        "metadata": {"name": "n1"},
        "spec": {"podCIDRs": ["10.0.0.0/24"], "taints": [{"key": "a", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "t0"},
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "t0"}
            ],
            "addresses": [{"type": "InternalIP", "address": "10.1.1.1"}, {"type": "Hostname", "address": "n1"}],
            "images": [{"names": ["a"]}]
        }
    });
    // What the kubelet sends when updating a heartbeat.
    let patch = json!({"status": {
        "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
        "conditions": [{"type": "Ready", "lastHeartbeatTime": "t1"}],
        "addresses": [{"type": "ExternalIP", "address": "1.2.3.4"}],
        "images": [{"names": ["b"]}]
    }, "spec": {"podCIDRs": ["fd00::/64"], "taints": []}});
    let got = smp("", "Node", &live, &patch).unwrap();
    assert_eq!(
        got,
        json!({
            "metadata": {"name": "n1"},
            "spec": {"podCIDRs": ["fd00::/64", "10.0.0.0/24"], "taints": []},
            "status": {
                "conditions": [
                    {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "t0"},
                    {"type": "Ready", "status": "True", "lastHeartbeatTime": "t1"}
                ],
                "addresses": [
                    {"type": "ExternalIP", "address": "1.2.3.4"},
                    {"type": "InternalIP", "address": "10.1.1.1"},
                    {"type": "Hostname", "address": "n1"}
                ],
                "images": [{"names": ["b"]}]
            }
        })
    );
}

#[test]
fn configmap_data_and_owner_references() {
    let live = json!({
        "metadata": {"name": "c", "ownerReferences": [{"uid": "1", "name": "a", "kind": "X", "apiVersion": "v1"}]},
        "data": {"k1": "v1", "k2": "v2"}
    });
    let patch = json!({
        "metadata": {"ownerReferences": [{"uid": "2", "name": "b", "kind": "X", "apiVersion": "v1"}, {"uid": "1", "controller": true}]},
        "data": {"k1": null, "k3": "v3", "absent": null}
    });
    let got = smp("", "ConfigMap", &live, &patch).unwrap();
    assert_eq!(
        got,
        json!({
            "metadata": {"name": "c", "ownerReferences": [
                {"uid": "2", "name": "b", "kind": "X", "apiVersion": "v1"},
                {"uid": "1", "name": "a", "kind": "X", "apiVersion": "v1", "controller": true}
            ]},
            "data": {"k2": "v2", "k3": "v3"}
        })
    );
}

#[test]
fn pods_and_cronjobs_walk_nested_types() {
    // `kubectl debug` adds an ephemeral container (pods/ephemeralcontainers).
    let live = json!({"metadata": {"name": "p"}, "spec": {"containers": [container("app", "x")]},
        "status": {"conditions": [{"type": "Ready", "status": "False"}], "podIPs": [{"ip": "10.0.0.5"}]}});
    let patch = json!({"spec": {"ephemeralContainers": [{"name": "dbg", "image": "busybox", "targetContainerName": "app", "env": [{"name": "A", "value": null}]}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}], "podIPs": [{"ip": "fd00::5"}]}});
    let got = smp("", "Pod", &live, &patch).unwrap();
    assert_eq!(
        got["spec"]["ephemeralContainers"],
        json!([{"name": "dbg", "image": "busybox", "targetContainerName": "app", "env": [{"name": "A"}]}])
    );
    assert_eq!(got["spec"]["containers"], live["spec"]["containers"]);
    assert_eq!(
        got["status"]["conditions"],
        json!([{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}])
    );
    assert_eq!(
        got["status"]["podIPs"],
        json!([{"ip": "fd00::5"}, {"ip": "10.0.0.5"}])
    );

    let live = json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
        "containers": [with(container("c", "x"), json!({"env": [{"name": "A", "value": "1"}]}))]}}}}}});
    let patch = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "env": [{"name": "B", "value": "2"}]}]}}}}}});
    let got = smp("batch", "CronJob", &live, &patch).unwrap();
    assert_eq!(
        got["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"],
        // Without `$setElementOrder`, elements new to the server go first
        // (upstream's ordering: patch items lead unless the server had them).
        json!([{"name": "B", "value": "2"}, {"name": "A", "value": "1"}])
    );
}

#[test]
fn values_taken_from_the_patch_lose_directives_and_nulls() {
    let live = deployment(json!({"containers": [container("app", "x")]}));
    let patch = template_patch(json!({
        "nodeSelector": {"a": "1", "b": null},
        "containers": [{"name": "new", "image": "y", "$setElementOrder/env": [{"name": "A"}], "env": [{"name": "A", "value": "1"}],
                        "securityContext": {"$retainKeys": ["x"], "runAsUser": null}}]
    }));
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    let spec = pod_spec_of(&got);
    assert_eq!(spec["nodeSelector"], json!({"a": "1"}));
    assert_eq!(spec["containers"][1]["name"], json!("app"));
    assert_eq!(
        spec["containers"][0],
        json!({"name": "new", "image": "y", "env": [{"name": "A", "value": "1"}], "securityContext": {}})
    );
}

#[test]
fn types_replace_each_other() {
    let live = json!({"spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}}, "minReadySeconds": 1}});
    let patch = json!({"spec": {"replicas": "3", "selector": "x", "minReadySeconds": [1]}});
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    assert_eq!(got, patch);
}

#[test]
fn pdb_selector_is_replaced() {
    let live = json!({"spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "1"}, "matchExpressions": []}}});
    let patch = json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}});
    let got = smp("policy", "PodDisruptionBudget", &live, &patch).unwrap();
    assert_eq!(
        got,
        json!({"spec": {"minAvailable": 1, "selector": {"matchLabels": {"b": "2"}}}})
    );
}

#[test]
fn malformed_patches() {
    let mut live = deployment(
        json!({"containers": [container("app", "x")], "volumes": [{"name": "v", "emptyDir": {}}]}),
    );
    live["metadata"]["finalizers"] = json!([]);
    live["metadata"]["ownerReferences"] = json!([{"uid": "1"}]);
    let cases: Vec<(Value, u16)> = vec![
        (json!([]), 400),
        (json!("x"), 400),
        (json!(null), 400),
        (json!({"metadata": {"$retainKeys": {"a": 1}}}), 400),
        (
            template_patch(json!({"$setElementOrder/containers": "app"})),
            400,
        ),
        (
            template_patch(json!({"$setElementOrder": [{"name": "app"}]})),
            400,
        ),
        (
            template_patch(json!({"$setElementOrderX/containers": []})),
            400,
        ),
        (
            json!({"metadata": {"$deleteFromPrimitiveList": ["a"]}}),
            400,
        ),
        // Lists of lists.
        (json!({"metadata": {"finalizers": [["a"]]}}), 422),
        // Mixed element types in a merge list.
        (json!({"metadata": {"finalizers": [{"a": 1}]}}), 500),
        // Merge-list element without its key.
        (template_patch(json!({"containers": [{"image": "y"}]})), 500),
        // Order directive contradicting the patch list.
        (
            template_patch(json!({
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "b"}, {"name": "a"}]
            })),
            500,
        ),
        (
            template_patch(json!({"$setElementOrder/containers": ["app"]})),
            500,
        ),
        // A set of objects has no merge key.
        (
            json!({"metadata": {"finalizers": ["a"], "$deleteFromPrimitiveList/ownerReferences": [{"x": 1}]}}),
            500,
        ),
    ];
    for (patch, code) in cases {
        let got = smp("apps", "Deployment", &live, &patch);
        assert_eq!(
            got.as_ref().map_err(PatchError::http_status).err(),
            Some(code),
            "{patch} -> {got:?}"
        );
    }
}

#[test]
fn deep_patch_is_rejected() {
    let mut patch = json!("leaf");
    for _ in 0..120 {
        patch = json!({"a": patch});
    }
    let err = smp("", "ConfigMap", &json!({}), &patch).unwrap_err();
    assert_eq!(
        err,
        PatchError::TooDeep {
            max: super::super::MAX_DEPTH
        }
    );
}

#[test]
fn large_lists_are_not_quadratic() {
    // 50k finalizers merged with 50k more: hashing keeps this fast.
    let live = json!({"metadata": {"finalizers": (0..50_000).map(|i| format!("f{i}")).collect::<Vec<_>>()}});
    let patch = json!({"metadata": {"finalizers": (25_000..75_000).map(|i| format!("f{i}")).collect::<Vec<_>>()}});
    let got = smp("", "Namespace", &live, &patch).unwrap();
    assert_eq!(
        got["metadata"]["finalizers"].as_array().map(Vec::len),
        Some(75_000)
    );
}

/// kubectl apply replacing a container (`old` -> `new`) while a webhook-added
/// `injected` container exists only on the server. Upstream's in-place
/// deletion makes `injected` land before `new` (see
/// `upstream_original_view`); this pins that order.
#[test]
fn set_element_order_with_delete_and_add_follows_upstream_order() {
    let live = deployment(
        json!({"containers": [container("app", "1"), container("old", "2"), container("injected", "3")]}),
    );
    let patch = template_patch(json!({
        "$setElementOrder/containers": [{"name": "app"}, {"name": "new"}],
        "containers": [{"name": "new", "image": "4"}, {"$patch": "delete", "name": "old"}]
    }));
    let got = smp("apps", "Deployment", &live, &patch).unwrap();
    assert_eq!(
        pod_spec_of(&got)["containers"],
        json!([container("app", "1"), container("injected", "3"), {"name": "new", "image": "4"}])
    );
}

#[test]
fn upstream_original_view_models_go_slices() {
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let full = ids(&["a", "b", "c", "d"]);
    // No change.
    assert_eq!(super::upstream_original_view(&full, &[], &[]), full);
    // Deleting `b` shifts left and leaves a stale copy of `d` at the end.
    assert_eq!(
        super::upstream_original_view(&full, &[1], &[]),
        ids(&["a", "c", "d", "d"])
    );
    // An append fills the freed slot.
    assert_eq!(
        super::upstream_original_view(&full, &[1], &ids(&["x", "y"])),
        ids(&["a", "c", "d", "x"])
    );
    // Deleting the last element leaves it in place; then `a` goes.
    assert_eq!(
        super::upstream_original_view(&full, &[3, 0], &[]),
        ids(&["b", "c", "c", "d"])
    );
    // Appends beyond the original length are invisible.
    assert_eq!(
        super::upstream_original_view(&full, &[], &ids(&["x"])),
        full
    );
}
