//! Printers of the `apps` group.

use jiff::Timestamp;
use serde_json::Value;

use super::format::{
    age, arr_at, format_label_selector, format_labels, get, int_at, layout_containers, name,
    opt_int, selector_string, str_at,
};
use super::{Column, Printer};

fn selector_col(desc: &str) -> Column {
    Column::s("Selector", desc).wide()
}

const SELECTOR_DESC: &str = "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.";

pub(crate) struct Deployments;

impl Printer for Deployments {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s("Ready", "Number of the pod with ready state"),
            Column::s(
                "Up-to-date",
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            Column::s(
                "Available",
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            Column::age(),
            Column::containers(),
            Column::images(),
            selector_col(SELECTOR_DESC),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let (names, images) = layout_containers(arr_at(obj, "/spec/template/spec/containers"));
        // Deployments print the bare selector text ("" when empty).
        let selector =
            selector_string(get(obj, "/spec/selector")).unwrap_or_else(|()| "<invalid>".to_owned());
        vec![
            name(obj).into(),
            format!(
                "{}/{}",
                int_at(obj, "/status/readyReplicas"),
                opt_int(obj, "/spec/replicas").unwrap_or(1)
            )
            .into(),
            int_at(obj, "/status/updatedReplicas").into(),
            int_at(obj, "/status/availableReplicas").into(),
            age(obj, now),
            names,
            images,
            selector.into(),
        ]
    }
}

pub(crate) struct ReplicaSets;

impl Printer for ReplicaSets {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::int("Desired", "Replicas is the number of desired replicas."),
            Column::int(
                "Current",
                "Replicas is the most recently observed number of replicas.",
            ),
            Column::int(
                "Ready",
                "The number of ready replicas for this replica set.",
            ),
            Column::age(),
            Column::containers(),
            Column::images(),
            selector_col(
                "Selector is a label query over pods that should match the replica count.",
            ),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let (names, images) = layout_containers(arr_at(obj, "/spec/template/spec/containers"));
        vec![
            name(obj).into(),
            opt_int(obj, "/spec/replicas").unwrap_or(1).into(),
            int_at(obj, "/status/replicas").into(),
            int_at(obj, "/status/readyReplicas").into(),
            age(obj, now),
            names,
            images,
            format_label_selector(get(obj, "/spec/selector")).into(),
        ]
    }
}

pub(crate) struct StatefulSets;

impl Printer for StatefulSets {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s("Ready", "Number of the pod with ready state"),
            Column::age(),
            Column::containers(),
            Column::images(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let (names, images) = layout_containers(arr_at(obj, "/spec/template/spec/containers"));
        vec![
            name(obj).into(),
            format!(
                "{}/{}",
                int_at(obj, "/status/readyReplicas"),
                opt_int(obj, "/spec/replicas").unwrap_or(1)
            )
            .into(),
            age(obj, now),
            names,
            images,
        ]
    }
}

pub(crate) struct DaemonSets;

impl Printer for DaemonSets {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::int(
                "Desired",
                "The total number of nodes that should be running the daemon pod.",
            ),
            Column::int(
                "Current",
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
            ),
            Column::int(
                "Ready",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
            ),
            Column::int(
                "Up-to-date",
                "The total number of nodes that are running updated daemon pod",
            ),
            Column::int(
                "Available",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
            ),
            Column::s(
                "Node Selector",
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            Column::age(),
            Column::containers(),
            Column::images(),
            selector_col("A label query over pods that are managed by the daemon set."),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let (names, images) = layout_containers(arr_at(obj, "/spec/template/spec/containers"));
        vec![
            name(obj).into(),
            int_at(obj, "/status/desiredNumberScheduled").into(),
            int_at(obj, "/status/currentNumberScheduled").into(),
            int_at(obj, "/status/numberReady").into(),
            int_at(obj, "/status/updatedNumberScheduled").into(),
            int_at(obj, "/status/numberAvailable").into(),
            format_labels(get(obj, "/spec/template/spec/nodeSelector")).into(),
            age(obj, now),
            names,
            images,
            format_label_selector(get(obj, "/spec/selector")).into(),
        ]
    }
}

pub(crate) struct ControllerRevisions;

/// `kind.group/name` (lower-case kind and group) of an object's controller.
pub(crate) fn controller_of(obj: &Value) -> String {
    let Some(owner) = arr_at(obj, "/metadata/ownerReferences")
        .iter()
        .find(|o| get(o, "/controller").and_then(Value::as_bool) == Some(true))
    else {
        return "<none>".to_owned();
    };
    let api_version = str_at(owner, "/apiVersion");
    let group = match api_version.split_once('/') {
        Some((g, _)) => g,
        None => "",
    };
    let kind = str_at(owner, "/kind");
    let owner_name = str_at(owner, "/name");
    if kind.is_empty() && group.is_empty() {
        return owner_name.to_owned();
    }
    let gk = if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    };
    format!("{}/{owner_name}", gk.to_lowercase())
}

impl Printer for ControllerRevisions {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s("Controller", "Controller of the object"),
            Column::s(
                "Revision",
                "Revision indicates the revision of the state represented by Data.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            name(obj).into(),
            controller_of(obj).into(),
            int_at(obj, "/revision").into(),
            age(obj, now),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::testutil::*;
    use serde_json::json;

    fn template() -> Value {
        json!({"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}, {"name": "sidecar", "image": "envoy:v1"}]}})
    }

    #[test]
    fn deployments() {
        assert_eq!(
            names(&Deployments),
            [
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        let d = json!({
            "metadata": {"name": "web", "creationTimestamp": ago(125)},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template()},
            "status": {"replicas": 3, "readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1}
        });
        assert_eq!(
            row(&Deployments, &d),
            [
                "web",
                "1/3",
                "2",
                "1",
                "2m5s",
                "nginx,sidecar",
                "nginx:1.27,envoy:v1",
                "app=web"
            ]
        );
        let cells = Deployments.cells(&d, now());
        assert_eq!((cells[2].clone(), cells[3].clone()), (json!(2), json!(1)));
        // Fresh deployment: no status yet.
        let fresh = json!({"metadata": {"name": "new"}, "spec": {"template": {"spec": {"containers": []}}}});
        assert_eq!(row(&Deployments, &fresh)[1..4], ["0/1", "0", "0"]);
        assert_eq!(row(&Deployments, &fresh)[7], "");
    }

    #[test]
    fn replica_sets() {
        let rs = json!({
            "metadata": {"name": "web-5d8f", "creationTimestamp": ago(86400 * 9)},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d8f"}}, "template": template()},
            "status": {"replicas": 2, "readyReplicas": 2}
        });
        assert_eq!(
            row(&ReplicaSets, &rs),
            [
                "web-5d8f",
                "2",
                "2",
                "2",
                "9d",
                "nginx,sidecar",
                "nginx:1.27,envoy:v1",
                "app=web,pod-template-hash=5d8f"
            ]
        );
        assert_eq!(ReplicaSets.cells(&rs, now())[1], json!(2));
    }

    #[test]
    fn stateful_and_daemon_sets() {
        let ss = json!({"metadata": {"name": "db"}, "spec": {"replicas": 3, "template": template()}, "status": {"readyReplicas": 2}});
        assert_eq!(
            row(&StatefulSets, &ss),
            [
                "db",
                "2/3",
                "<unknown>",
                "nginx,sidecar",
                "nginx:1.27,envoy:v1"
            ]
        );
        let ds = json!({
            "metadata": {"name": "kube-proxy", "creationTimestamp": ago(7 * 3600 + 59 * 60)},
            "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
                     "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": [{"name": "kube-proxy", "image": "kp:v1.33"}]}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2}
        });
        assert_eq!(
            row(&DaemonSets, &ds),
            [
                "kube-proxy",
                "3",
                "3",
                "2",
                "3",
                "2",
                "kubernetes.io/os=linux",
                "7h59m",
                "kube-proxy",
                "kp:v1.33",
                "k8s-app=kube-proxy"
            ]
        );
    }

    #[test]
    fn controller_revisions() {
        let cr = json!({
            "metadata": {"name": "db-7c9", "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "x"},
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "controller": true}
            ]},
            "revision": 4
        });
        assert_eq!(
            row(&ControllerRevisions, &cr)[1..3],
            ["statefulset.apps/db", "4"]
        );
        let core_owner = json!({"metadata": {"name": "r", "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "controller": true}]}});
        assert_eq!(controller_of(&core_owner), "node/n");
        assert_eq!(controller_of(&json!({})), "<none>");
    }
}
