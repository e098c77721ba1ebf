//! Test helpers: builders for pods and nodes, and [`FakeClient`], an in-memory
//! [`Client`] that records every write.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k1s_api::client::{
    Client, ClientError, DeleteParams, ListParams, ObjectList, Patch, ResourceRef, Result,
    WatchParams, WatchStream, WriteParams,
};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerImage, ContainerPort, Node, NodeSpec, NodeStatus, Pod, PodSpec,
    ResourceRequirements, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::framework::node_info::{NodeInfo, PodInfo};

pub fn res(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
        .collect()
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

pub struct PodBuilder(Pod);

impl PodBuilder {
    pub fn new(name: &str) -> Self {
        Self(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            status: None,
        })
    }
    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }
    pub fn namespace(mut self, ns: &str) -> Self {
        self.0.metadata.namespace = Some(ns.into());
        self
    }
    pub fn container(mut self, requests: &[(&str, &str)]) -> Self {
        let n = self.spec().containers.len();
        self.spec().containers.push(Container {
            name: format!("c{n}"),
            image: Some("busybox".into()),
            resources: Some(ResourceRequirements {
                requests: Some(res(requests)),
                ..Default::default()
            }),
            ..Default::default()
        });
        self
    }
    pub fn image(mut self, image: &str) -> Self {
        let n = self.spec().containers.len();
        self.spec().containers.push(Container {
            name: format!("c{n}"),
            image: Some(image.into()),
            ..Default::default()
        });
        self
    }
    pub fn init_container(mut self, requests: &[(&str, &str)], sidecar: bool) -> Self {
        let list = self.spec().init_containers.get_or_insert_with(Vec::new);
        let n = list.len();
        list.push(Container {
            name: format!("i{n}"),
            restart_policy: sidecar.then(|| "Always".to_owned()),
            resources: Some(ResourceRequirements {
                requests: Some(res(requests)),
                ..Default::default()
            }),
            ..Default::default()
        });
        self
    }
    pub fn overhead(mut self, o: &[(&str, &str)]) -> Self {
        self.spec().overhead = Some(res(o));
        self
    }
    pub fn host_port(mut self, port: i32, protocol: &str, ip: &str) -> Self {
        let mut c = Container {
            name: format!("p{port}"),
            ..Default::default()
        };
        c.ports = Some(vec![ContainerPort {
            container_port: port,
            host_port: Some(port),
            protocol: Some(protocol.into()),
            host_ip: (!ip.is_empty()).then(|| ip.to_owned()),
            ..Default::default()
        }]);
        self.spec().containers.push(c);
        self
    }
    pub fn node(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.into());
        self
    }
    pub fn labels(mut self, l: &[(&str, &str)]) -> Self {
        self.0.metadata.labels = Some(labels(l));
        self
    }
    pub fn priority(mut self, p: i32) -> Self {
        self.spec().priority = Some(p);
        self
    }
    pub fn toleration(mut self, key: &str, op: &str, value: &str, effect: &str) -> Self {
        self.spec()
            .tolerations
            .get_or_insert_with(Vec::new)
            .push(Toleration {
                key: (!key.is_empty()).then(|| key.to_owned()),
                operator: Some(op.into()),
                value: (!value.is_empty()).then(|| value.to_owned()),
                effect: (!effect.is_empty()).then(|| effect.to_owned()),
                ..Default::default()
            });
        self
    }
    pub fn node_selector(mut self, l: &[(&str, &str)]) -> Self {
        self.spec().node_selector = Some(labels(l));
        self
    }
    pub fn affinity(mut self, a: Affinity) -> Self {
        self.spec().affinity = Some(a);
        self
    }
    pub fn scheduler_name(mut self, n: &str) -> Self {
        self.spec().scheduler_name = Some(n.into());
        self
    }
    pub fn spec_with(mut self, f: impl FnOnce(&mut PodSpec)) -> Self {
        f(self.spec());
        self
    }
    pub fn build(self) -> Pod {
        self.0
    }
    pub fn info(self) -> PodInfo {
        PodInfo::new(Arc::new(self.0))
    }
}

pub struct NodeBuilder(Node);

impl NodeBuilder {
    pub fn new(name: &str) -> Self {
        Self(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                allocatable: Some(res(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])),
                ..Default::default()
            }),
        })
    }
    pub fn allocatable(mut self, a: &[(&str, &str)]) -> Self {
        self.0
            .status
            .get_or_insert_with(Default::default)
            .allocatable = Some(res(a));
        self
    }
    pub fn labels(mut self, l: &[(&str, &str)]) -> Self {
        self.0.metadata.labels = Some(labels(l));
        self
    }
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.0
            .spec
            .get_or_insert_with(Default::default)
            .taints
            .get_or_insert_with(Vec::new)
            .push(Taint {
                key: key.into(),
                value: (!value.is_empty()).then(|| value.to_owned()),
                effect: effect.into(),
                ..Default::default()
            });
        self
    }
    pub fn unschedulable(mut self) -> Self {
        self.0
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        self
    }
    pub fn image(mut self, name: &str, size: i64) -> Self {
        self.0
            .status
            .get_or_insert_with(Default::default)
            .images
            .get_or_insert_with(Vec::new)
            .push(ContainerImage {
                names: Some(vec![name.into()]),
                size_bytes: Some(size),
            });
        self
    }
    pub fn build(self) -> Node {
        self.0
    }
}

/// A NodeInfo of `node` with `pods` on it.
pub fn node_info(node: Node, pods: Vec<Pod>) -> NodeInfo {
    let mut ni = NodeInfo::new(Some(Arc::new(node)));
    for p in pods {
        ni.add_pod(Arc::new(PodInfo::new(Arc::new(p))));
    }
    ni
}

/// One recorded write.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub verb: &'static str,
    pub path: String,
    pub body: Value,
}

/// An in-memory client that records writes and answers them with their body.
#[derive(Default)]
pub struct FakeClient {
    pub calls: Mutex<Vec<Call>>,
    /// Writes whose path contains one of these fail with a 500.
    pub fail_paths: Mutex<Vec<String>>,
}

impl FakeClient {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    pub fn calls_to(&self, suffix: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.path.ends_with(suffix))
            .collect()
    }

    fn record(&self, verb: &'static str, path: String, body: Value) -> Result<Value> {
        if self
            .fail_paths
            .lock()
            .unwrap()
            .iter()
            .any(|f| path.contains(f.as_str()))
        {
            return Err(ClientError {
                code: 500,
                reason: "InternalError".into(),
                message: format!("injected failure for {path}"),
            });
        }
        self.calls.lock().unwrap().push(Call {
            verb,
            path,
            body: body.clone(),
        });
        Ok(body)
    }
}

#[async_trait::async_trait]
impl Client for FakeClient {
    async fn get(&self, r: &ResourceRef, name: &str) -> Result<Value> {
        Err(ClientError {
            code: 404,
            reason: "NotFound".into(),
            message: r.path(Some(name), None),
        })
    }
    async fn list(&self, _r: &ResourceRef, _p: &ListParams) -> Result<ObjectList> {
        Ok(ObjectList::default())
    }
    async fn create(&self, r: &ResourceRef, obj: Value, _p: &WriteParams) -> Result<Value> {
        self.record("create", r.path(None, None), obj)
    }
    async fn update(
        &self,
        r: &ResourceRef,
        obj: Value,
        sub: Option<&str>,
        _p: &WriteParams,
    ) -> Result<Value> {
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_owned();
        self.record("update", r.path(Some(&name), sub), obj)
    }
    async fn patch(
        &self,
        r: &ResourceRef,
        name: &str,
        patch: &Patch,
        sub: Option<&str>,
        _p: &WriteParams,
    ) -> Result<Value> {
        self.record("patch", r.path(Some(name), sub), patch.body().clone())
    }
    async fn delete(&self, r: &ResourceRef, name: &str, _p: &DeleteParams) -> Result<Value> {
        self.record("delete", r.path(Some(name), None), Value::Null)
    }
    async fn create_subresource(
        &self,
        r: &ResourceRef,
        name: &str,
        sub: &str,
        body: Value,
    ) -> Result<Value> {
        self.record("create", r.path(Some(name), Some(sub)), body)
    }
    async fn watch(&self, _r: &ResourceRef, _p: &WatchParams) -> Result<WatchStream> {
        Ok(Box::pin(futures::stream::empty()))
    }
}
