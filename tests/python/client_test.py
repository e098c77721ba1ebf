"""Drives k1s with the official Python client (PyPI `kubernetes`): CRUD, selectors, paging,
watch, the patch types, scale and status subresources, custom objects and error statuses.
Run by tests/tests/python_client.rs as: python client_test.py KUBECONFIG"""
import sys
import threading
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
apps = client.AppsV1Api()
ext = client.ApiextensionsV1Api()
custom = client.CustomObjectsApi()
NS = "py"


def expect_status(fn, code, reason):
    try:
        fn()
    except ApiException as e:
        assert e.status == code, (e.status, e.body)
        assert f'"reason":"{reason}"' in e.body.replace(" ", ""), e.body
        return
    raise AssertionError(f"expected {code} {reason}")


core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
assert NS in [n.metadata.name for n in core.list_namespace().items]

# ConfigMaps: create, read, label selectors, pagination.
for i in range(25):
    core.create_namespaced_config_map(NS, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=f"cm-{i:02}", labels={"parity": "even" if i % 2 == 0 else "odd"}),
        data={"i": str(i)}))
cm = core.read_namespaced_config_map("cm-03", NS)
assert cm.data == {"i": "3"} and cm.metadata.uid and cm.metadata.resource_version
odd = core.list_namespaced_config_map(NS, label_selector="parity=odd")
assert len(odd.items) == 12, len(odd.items)
names, cont = [], None
while True:
    page = core.list_namespaced_config_map(NS, limit=10, _continue=cont)
    names += [i.metadata.name for i in page.items]
    cont = page.metadata._continue
    if not cont:
        break
assert names == sorted(names) and len(names) == 25, names

# Watch: events for changes made after the list.
rv = core.list_namespaced_config_map(NS).metadata.resource_version
seen = []


def watcher():
    w = watch.Watch()
    for ev in w.stream(core.list_namespaced_config_map, NS, resource_version=rv, timeout_seconds=10):
        seen.append((ev["type"], ev["object"].metadata.name))
        if ev["type"] == "DELETED":
            w.stop()


t = threading.Thread(target=watcher)
t.start()
time.sleep(0.5)
core.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="watched")))
core.patch_namespaced_config_map("watched", NS, {"data": {"k": "v"}})
core.delete_namespaced_config_map("watched", NS)
t.join(15)
assert seen == [("ADDED", "watched"), ("MODIFIED", "watched"), ("DELETED", "watched")], seen

# Deployments: strategic merge patch, scale subresource, status subresource.
dep = client.V1Deployment(
    metadata=client.V1ObjectMeta(name="web"),
    spec=client.V1DeploymentSpec(
        replicas=2,
        selector=client.V1LabelSelector(match_labels={"app": "web"}),
        template=client.V1PodTemplateSpec(
            metadata=client.V1ObjectMeta(labels={"app": "web"}),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox:1.36")]))))
apps.create_namespaced_deployment(NS, dep)
apps.patch_namespaced_deployment("web", NS, {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}}})
d = apps.read_namespaced_deployment("web", NS)
assert d.spec.template.spec.containers[0].image == "busybox:1.37"
assert d.metadata.generation == 2
apps.patch_namespaced_deployment_scale("web", NS, {"spec": {"replicas": 4}})
assert apps.read_namespaced_deployment_scale("web", NS).spec.replicas == 4
d.status = client.V1DeploymentStatus(replicas=4, ready_replicas=4, observed_generation=3)
d.metadata.resource_version = None
apps.replace_namespaced_deployment_status("web", NS, d)
d = apps.read_namespaced_deployment("web", NS)
assert d.status.ready_replicas == 4 and d.spec.replicas == 4

# Errors come back as Status objects.
expect_status(lambda: core.read_namespaced_config_map("missing", NS), 404, "NotFound")
expect_status(lambda: core.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm-00"))), 409, "AlreadyExists")
stale = core.read_namespaced_config_map("cm-00", NS)
core.patch_namespaced_config_map("cm-00", NS, {"data": {"changed": "yes"}})
expect_status(lambda: core.replace_namespaced_config_map("cm-00", NS, stale), 409, "Conflict")
expect_status(lambda: core.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="Bad_Name"))), 422, "Invalid")

# Custom resources through CustomObjectsApi.
ext.create_custom_resource_definition({
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}})
custom.create_namespaced_custom_object("example.com", "v1", NS, "widgets",
    {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}})
w = custom.get_namespaced_custom_object("example.com", "v1", NS, "widgets", "w1")
assert w["spec"]["size"] == 3
expect_status(lambda: custom.create_namespaced_custom_object("example.com", "v1", NS, "widgets",
    {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": "big"}}), 422, "Invalid")
custom.patch_namespaced_custom_object("example.com", "v1", NS, "widgets", "w1", {"spec": {"size": 5}})
assert custom.get_namespaced_custom_object("example.com", "v1", NS, "widgets", "w1")["spec"]["size"] == 5
assert len(custom.list_namespaced_custom_object("example.com", "v1", NS, "widgets")["items"]) == 1

apps.delete_namespaced_deployment("web", NS)
expect_status(lambda: apps.read_namespaced_deployment("web", NS), 404, "NotFound")
print("python client: all checks passed")
