//! The pod workers against the real API semantics in process (LocalClient on a temp redb
//! file) with the OS edges faked: the scripted runtime, cgroups, network and image store.
//! Covers the lifecycle rules: Running and Ready, restartPolicy with back-off and
//! restartCount, init containers in order, RunContainerError, images that cannot be pulled,
//! and graceful deletion (SIGTERM, the grace period, SIGKILL, then the final delete).

use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, DeleteParams, ResourceRef, WriteParams};
use k1s_apiserver::local_client::LocalClient;
use k1s_apiserver::server::{ApiConfig, ApiState};
use k1s_kubelet::cgroups::FakeCgroupManager;
use k1s_kubelet::images::fake::FakeImageService;
use k1s_kubelet::network::FakePodNetwork;
use k1s_kubelet::runtime::fake::FakeRuntime;
use k1s_kubelet::{Config, Deps};
use k1s_store::redb::{RedbConfig, RedbStore};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

struct Env {
    client: Arc<dyn Client>,
    runtime: Arc<FakeRuntime>,
    cancel: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

async fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(RedbConfig::new(dir.path().join("state.redb"))).unwrap();
    let state = ApiState::new(Arc::new(store), &ApiConfig::default()).unwrap();
    k1s_apiserver::bootstrap::run(&state.rest, "127.0.0.1".parse().unwrap(), 6443)
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let client: Arc<dyn Client> = Arc::new(
        LocalClient::new(state.rest.clone(), "kubelet-test", cancel.clone())
            .with_tokens(state.tokens.clone()),
    );
    let sa = ResourceRef::new("", "v1", "serviceaccounts", Some("default"));
    client
        .create(
            &sa,
            json!({"metadata": {"name": "default"}}),
            &WriteParams::default(),
        )
        .await
        .unwrap();
    // What the root-CA controller publishes in a cluster; the projected SA volume needs it.
    let cms = ResourceRef::new("", "v1", "configmaps", Some("default"));
    client
        .create(
            &cms,
            json!({"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "test CA"}}),
            &WriteParams::default(),
        )
        .await
        .unwrap();
    let mut config = Config::new("n1", dir.path().join("agent"), "10.0.0.1".parse().unwrap());
    config.backoff_initial = Duration::from_millis(200);
    config.backoff_max = Duration::from_secs(1);
    let images = FakeImageService::new(dir.path().join("layers"));
    images.add_local("busybox", Default::default()).unwrap();
    images.add_remote("busybox", Default::default()).unwrap();
    let runtime = Arc::new(FakeRuntime::default());
    let volumes = Arc::new(k1s_kubelet::volumes::VolumeManager::new(
        client.clone(),
        config.pods_dir(),
    ));
    let deps = Arc::new(Deps {
        client: client.clone(),
        volumes,
        config: Arc::new(config),
        images: Arc::new(images),
        runtime: runtime.clone(),
        cgroups: Arc::new(FakeCgroupManager::default()),
        network: Arc::new(FakePodNetwork::new()),
        event_source: k1s_api::events::Source {
            component: "kubelet".into(),
            host: Some("n1".into()),
        },
    });
    tokio::spawn(k1s_kubelet::run(deps, cancel.clone()));
    Env {
        client,
        runtime,
        cancel,
        _dir: dir,
    }
}

fn pods() -> ResourceRef {
    ResourceRef::new("", "v1", "pods", Some("default"))
}

async fn create_pod(env: &Env, pod: Value) {
    env.client
        .create(&pods(), pod, &WriteParams::default())
        .await
        .unwrap();
}

async fn eventually<F, Fut>(what: &str, mut f: F) -> Value
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<Value>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn pod_where(env: &Env, name: &str, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || async {
        let p = env.client.get(&pods(), name).await.ok()?;
        f(&p).then_some(p)
    })
    .await
}

fn pod(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["nodeName"] = json!("n1");
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn runs_restarts_and_terminates() {
    let env = env().await;
    create_pod(
        &env,
        pod(
            "web",
            json!({"containers": [{"name": "c", "image": "busybox",
        "imagePullPolicy": "IfNotPresent", "command": ["serve"]}],
        "terminationGracePeriodSeconds": 1}),
        ),
    )
    .await;
    let p = pod_where(&env, "web", "Running and Ready", |p| {
        p["status"]["phase"] == "Running" && p["status"]["containerStatuses"][0]["ready"] == true
    })
    .await;
    assert_eq!(
        p["status"]["podIP"].as_str().map(|s| s.starts_with("10.")),
        Some(true),
        "{p}"
    );
    // The container exits 1: it is restarted (restartPolicy Always) after a back-off.
    let first = env.runtime.bundles_of("serve");
    assert_eq!(first.len(), 1);
    env.runtime.finish(&first[0], 1);
    let p = pod_where(&env, "web", "a restart", |p| {
        p["status"]["containerStatuses"][0]["restartCount"] == 1
            && p["status"]["containerStatuses"][0]["state"]["running"].is_object()
    })
    .await;
    assert_eq!(
        p["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
        1
    );
    // Deletion: SIGTERM, then SIGKILL after the 1 s grace period, then the pod is gone.
    env.client
        .delete(&pods(), "web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the pod to be deleted", || async {
        match env.client.get(&pods(), "web").await {
            Err(e) if e.is_not_found() => Some(Value::Null),
            _ => None,
        }
    })
    .await;
    let signals: Vec<i32> = env
        .runtime
        .signals
        .lock()
        .unwrap()
        .iter()
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(signals, vec![libc::SIGTERM, libc::SIGKILL]);
}

#[tokio::test]
async fn init_containers_run_in_order_and_never_policy_fails() {
    let env = env().await;
    create_pod(
        &env,
        pod(
            "init",
            json!({"restartPolicy": "Never",
        "initContainers": [{"name": "i1", "image": "busybox", "command": ["first"]},
                           {"name": "i2", "image": "busybox", "command": ["second"]}],
        "containers": [{"name": "c", "image": "busybox", "command": ["main"]}]}),
        ),
    )
    .await;
    let b1 = eventually("the first init container", || async {
        env.runtime
            .bundles_of("first")
            .first()
            .cloned()
            .map(|b| json!(b))
    })
    .await;
    assert!(
        env.runtime.bundles_of("second").is_empty(),
        "i2 started before i1 ended"
    );
    env.runtime
        .finish(std::path::Path::new(b1.as_str().unwrap()), 0);
    let b2 = eventually("the second init container", || async {
        env.runtime
            .bundles_of("second")
            .first()
            .cloned()
            .map(|b| json!(b))
    })
    .await;
    assert!(env.runtime.bundles_of("main").is_empty());
    env.runtime
        .finish(std::path::Path::new(b2.as_str().unwrap()), 0);
    let bm = eventually("the main container", || async {
        env.runtime
            .bundles_of("main")
            .first()
            .cloned()
            .map(|b| json!(b))
    })
    .await;
    pod_where(&env, "init", "Initialized and Running", |p| {
        p["status"]["phase"] == "Running"
    })
    .await;
    env.runtime
        .finish(std::path::Path::new(bm.as_str().unwrap()), 2);
    let p = pod_where(&env, "init", "Failed", |p| p["status"]["phase"] == "Failed").await;
    assert_eq!(
        p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        2
    );
    assert_eq!(
        env.runtime.bundles_of("main").len(),
        1,
        "restarted under restartPolicy Never"
    );
}

#[tokio::test]
async fn start_and_pull_failures_are_reported() {
    let env = env().await;
    env.runtime.fail_start("nope");
    create_pod(
        &env,
        pod(
            "bad",
            json!({"containers": [
        {"name": "c", "image": "busybox", "command": ["nope"]}]}),
        ),
    )
    .await;
    let p = pod_where(&env, "bad", "RunContainerError", |p| {
        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "RunContainerError"
    })
    .await;
    let msg = p["status"]["containerStatuses"][0]["state"]["waiting"]["message"].to_string();
    assert!(msg.contains("executable file not found"), "{msg}");
    create_pod(
        &env,
        pod(
            "missing",
            json!({"containers": [
        {"name": "c", "image": "example.invalid/none:1", "imagePullPolicy": "Never"}]}),
        ),
    )
    .await;
    pod_where(&env, "missing", "ErrImageNeverPull", |p| {
        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ErrImageNeverPull"
    })
    .await;
    assert_eq!(
        pod_where(&env, "missing", "Pending", |p| p["status"]["phase"]
            == "Pending")
        .await["status"]["phase"],
        "Pending"
    );
}
