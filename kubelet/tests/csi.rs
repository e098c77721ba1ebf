//! The kubelet's CSI side against a real gRPC plugin: the recording fixture
//! (`support/csi_fixture.rs`) registers through `ROOT/plugins_registry`, the kubelet installs
//! it on its Node and CSINode, and pods with claims get their volumes staged and published by
//! real CSI calls (real bind mounts), then unpublished and unstaged when they go. The API is
//! in process (LocalClient on a temp redb file); the container runtime, cgroups and network
//! are the fakes. Needs root (the fixture mounts).

#[path = "../../tests/src/mounts.rs"]
mod mounts;
mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k1s_api::client::{Client, DeleteParams, Patch, ResourceRef, WriteParams};
use k1s_apiserver::local_client::LocalClient;
use k1s_apiserver::server::{ApiConfig, ApiState};
use k1s_kubelet::cgroups::FakeCgroupManager;
use k1s_kubelet::images::fake::FakeImageService;
use k1s_kubelet::network::FakePodNetwork;
use k1s_kubelet::runtime::fake::FakeRuntime;
use k1s_kubelet::{Config, Deps};
use k1s_store::redb::{RedbConfig, RedbStore};
use serde_json::{Value, json};
use support::csi_fixture::{CsiFixture, FixtureOptions};
use tokio_util::sync::CancellationToken;

const DRIVER: &str = "fixture.csi.k1s.io";

struct Env {
    client: Arc<dyn Client>,
    runtime: Arc<FakeRuntime>,
    volumes: Arc<k1s_kubelet::volumes::VolumeManager>,
    root: PathBuf,
    cancel: CancellationToken,
    deps: Arc<Deps>,
    kubelet: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
    /// Unmounts whatever a failed test left mounted below it when the test ends.
    dir: mounts::ScratchDir,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

async fn env() -> Env {
    let dir = mounts::ScratchDir::new();
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
    client
        .create(
            &ResourceRef::new("", "v1", "configmaps", Some("default")),
            json!({"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "test CA"}}),
            &WriteParams::default(),
        )
        .await
        .unwrap();
    let root = dir.path().join("agent");
    let mut config = Config::new("n1", root.clone(), "10.0.0.1".parse().unwrap());
    config.status_report_interval = Duration::from_millis(300);
    // The host's own disk must not put the test node under pressure (it refuses pods then).
    config.eviction_hard = k1s_kubelet::pressure::Thresholds::parse(
        "memory.available<1Mi,nodefs.available<1%,imagefs.available<1%",
    )
    .unwrap();
    let images = FakeImageService::new(dir.path().join("layers"));
    images.add_local("busybox", Default::default()).unwrap();
    let runtime = Arc::new(FakeRuntime::default());
    let volumes = Arc::new(k1s_kubelet::volumes::VolumeManager::new(
        client.clone(),
        config.pods_dir(),
    ));
    let deps = Arc::new(Deps {
        client: client.clone(),
        volumes: volumes.clone(),
        devices: k1s_kubelet::devices::DeviceManager::new(config.device_plugins_dir()),
        admitted: Arc::new(k1s_kubelet::admission::Admitted::new(&config.node_name)),
        config: Arc::new(config),
        images: Arc::new(images),
        runtime: runtime.clone(),
        cgroups: Arc::new(FakeCgroupManager::default()),
        network: Arc::new(FakePodNetwork::new()),
        event_source: k1s_api::events::Source {
            component: "kubelet".into(),
            host: Some("n1".into()),
        },
        start_slots: k1s_kubelet::start_slots(),
    });
    let kubelet_cancel = cancel.child_token();
    let handle = tokio::spawn(k1s_kubelet::run(deps.clone(), kubelet_cancel.clone()));
    Env {
        client,
        runtime,
        volumes,
        root,
        cancel,
        deps,
        kubelet: Some((kubelet_cancel, handle)),
        dir,
    }
}

impl Env {
    /// Stops the kubelet and starts a new one on the same root, with a new volume manager
    /// (the runtime, whose containers keep running, is the same).
    async fn restart_kubelet(&mut self) {
        if let Some((cancel, handle)) = self.kubelet.take() {
            cancel.cancel();
            handle.await.unwrap();
        }
        let d = &self.deps;
        self.volumes = Arc::new(k1s_kubelet::volumes::VolumeManager::new(
            d.client.clone(),
            d.config.pods_dir(),
        ));
        let deps = Arc::new(Deps {
            client: d.client.clone(),
            volumes: self.volumes.clone(),
            devices: k1s_kubelet::devices::DeviceManager::new(d.config.device_plugins_dir()),
            admitted: Arc::new(k1s_kubelet::admission::Admitted::new(&d.config.node_name)),
            config: d.config.clone(),
            images: d.images.clone(),
            runtime: d.runtime.clone(),
            cgroups: d.cgroups.clone(),
            network: d.network.clone(),
            event_source: d.event_source.clone(),
            start_slots: k1s_kubelet::start_slots(),
        });
        let cancel = self.cancel.child_token();
        let handle = tokio::spawn(k1s_kubelet::run(deps, cancel.clone()));
        self.kubelet = Some((cancel, handle));
    }

    async fn plugin(&self, opts: FixtureOptions) -> CsiFixture {
        CsiFixture::start(
            &self.dir.path().join("plugin"),
            &self.root.join("plugins_registry"),
            opts,
        )
        .await
    }
}

async fn eventually<F, Fut, T>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
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

fn r(group: &str, resource: &str, ns: Option<&str>) -> ResourceRef {
    let version = "v1";
    ResourceRef::new(group, version, resource, ns)
}

fn nodes() -> ResourceRef {
    r("", "nodes", None)
}

fn csinodes() -> ResourceRef {
    r("storage.k8s.io", "csinodes", None)
}

fn pods() -> ResourceRef {
    r("", "pods", Some("default"))
}

async fn create(env: &Env, res: &ResourceRef, obj: Value) -> Value {
    env.client
        .create(res, obj, &WriteParams::default())
        .await
        .unwrap()
}

/// A CSI PV `pv-1` (handle `vol-1`) bound to claim `data` in `default`.
async fn bound_claim(env: &Env) {
    let pvc = create(
        env,
        &r("", "persistentvolumeclaims", Some("default")),
        json!({"metadata": {"name": "data"},
               "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-1",
                        "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    create(
        env,
        &r("", "persistentvolumes", None),
        json!({"metadata": {"name": "pv-1"},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "claimRef": {"namespace": "default", "name": "data",
                                     "uid": pvc["metadata"]["uid"]},
                        "csi": {"driver": DRIVER, "volumeHandle": "vol-1",
                                "volumeAttributes": {"color": "blue"}}}}),
    )
    .await;
    env.client
        .patch(
            &r("", "persistentvolumeclaims", Some("default")),
            "data",
            &Patch::Merge(json!({"status": {"phase": "Bound",
                "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}})),
            Some("status"),
            &WriteParams::default(),
        )
        .await
        .unwrap();
}

fn claim_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "busybox",
                                    "imagePullPolicy": "IfNotPresent", "command": ["serve"],
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}})
}

async fn running(env: &Env, name: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let p = env.client.get(&pods(), name).await.unwrap();
        if p["status"]["phase"] == "Running" {
            return p;
        }
        if tokio::time::Instant::now() > deadline {
            let evs = env
                .client
                .list(&r("", "events", Some("default")), &Default::default())
                .await
                .unwrap();
            let msgs: Vec<&Value> = evs.items.iter().map(|e| &e["message"]).collect();
            panic!(
                "pod {name} is not Running: {}\nevents: {msgs:?}",
                p["status"]
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn is_mount_point(path: &std::path::Path) -> bool {
    let p = path.display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(4) == Some(p.as_str()))
}

#[tokio::test]
async fn registration_installs_the_driver_on_the_node_and_csinode_and_deregistration_removes_it() {
    let env = env().await;
    let plugin = env.plugin(FixtureOptions::default()).await;
    let csinode = eventually("the CSINode entry", || async {
        let c = env.client.get(&csinodes(), "n1").await.ok()?;
        (c["spec"]["drivers"].as_array()?.len() == 1).then_some(c)
    })
    .await;
    assert_eq!(
        csinode["spec"]["drivers"][0],
        json!({"name": DRIVER, "nodeID": "fixture-node-1",
               "topologyKeys": ["topology.fixture.csi.k1s.io/zone"],
               "allocatable": {"count": 5}})
    );
    let node = env.client.get(&nodes(), "n1").await.unwrap();
    let owner = &csinode["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Node");
    assert_eq!(owner["uid"], node["metadata"]["uid"]);
    let ids: Value = serde_json::from_str(
        node["metadata"]["annotations"]["csi.volume.kubernetes.io/nodeid"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(ids, json!({DRIVER: "fixture-node-1"}));
    assert_eq!(
        node["metadata"]["labels"]["topology.fixture.csi.k1s.io/zone"],
        "z1"
    );
    let key = format!("attachable-volumes-csi-{DRIVER}");
    assert_eq!(node["status"]["capacity"][&key], "5");
    assert_eq!(node["status"]["allocatable"][&key], "5");
    assert!(plugin.registrations().iter().any(|r| r.plugin_registered));

    // The kubelet's own status reports keep the attach limit.
    let beat = |n: &Value| {
        n["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .map(|c| c["lastHeartbeatTime"].clone())
    };
    let first = beat(&node);
    let later = eventually("a later status report", || async {
        let n = env.client.get(&nodes(), "n1").await.ok()?;
        (beat(&n) != first).then_some(n)
    })
    .await;
    assert_eq!(later["status"]["allocatable"][&key], "5", "{later}");

    // The plugin goes away: everything it put on the node goes too.
    plugin.unregister();
    let node = eventually("the driver uninstalled", || async {
        let c = env.client.get(&csinodes(), "n1").await.ok()?;
        if !c["spec"]["drivers"].as_array()?.is_empty() {
            return None;
        }
        let n = env.client.get(&nodes(), "n1").await.ok()?;
        n["status"]["capacity"][&key].is_null().then_some(n)
    })
    .await;
    assert!(
        node["metadata"]["annotations"]["csi.volume.kubernetes.io/nodeid"].is_null(),
        "{node}"
    );
    assert!(node["metadata"]["labels"]["topology.fixture.csi.k1s.io/zone"].is_null());
    assert!(node["status"]["allocatable"][&key].is_null());
}

#[tokio::test]
async fn a_claim_is_staged_once_published_per_pod_and_cleaned_up_after_the_last_pod() {
    let env = env().await;
    let plugin = env.plugin(FixtureOptions::default()).await;
    create(
        &env,
        &r("storage.k8s.io", "csidrivers", None),
        json!({"metadata": {"name": DRIVER},
               "spec": {"attachRequired": false, "podInfoOnMount": true}}),
    )
    .await;
    bound_claim(&env).await;
    std::fs::create_dir_all(plugin.volume_dir("vol-1")).unwrap();
    std::fs::write(plugin.volume_dir("vol-1").join("hello"), "from the plugin").unwrap();

    create(&env, &pods(), claim_pod("one")).await;
    let one = running(&env, "one").await;
    create(&env, &pods(), claim_pod("two")).await;
    let two = running(&env, "two").await;
    assert_eq!(
        plugin.methods(),
        [
            "NodeGetInfo",
            "NodeStageVolume",
            "NodePublishVolume",
            "NodePublishVolume"
        ]
    );
    let calls = plugin.calls();
    let stage = calls
        .iter()
        .find(|c| c.method == "NodeStageVolume")
        .unwrap();
    assert!(
        stage.path.starts_with(
            &env.root
                .join("plugins/kubernetes.io/csi")
                .join(DRIVER)
                .display()
                .to_string()
        ) && stage.path.ends_with("/globalmount"),
        "{}",
        stage.path
    );
    let publish = calls
        .iter()
        .find(|c| c.method == "NodePublishVolume")
        .unwrap();
    assert_eq!(publish.volume_context["color"], "blue");
    assert_eq!(publish.volume_context["csi.storage.k8s.io/pod.name"], "one");
    assert_eq!(
        publish.volume_context["csi.storage.k8s.io/pod.namespace"],
        "default"
    );

    // Volume stats from NodeGetVolumeStats on the published path.
    env.volumes.csi().refresh_metrics().await;
    let text = env.volumes.csi().metrics().encode();
    for gauge in [
        "capacity_bytes",
        "used_bytes",
        "available_bytes",
        "inodes",
        "inodes_used",
        "inodes_free",
    ] {
        let prefix = format!(
            "kubelet_volume_stats_{gauge}{{namespace=\"default\",persistentvolumeclaim=\"data\"}} "
        );
        let line = text
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("{prefix} not in\n{text}"));
        let v: i64 = line[prefix.len()..].parse().unwrap();
        assert!(v > 0 || gauge.ends_with("used"), "{line}");
    }
    assert!(plugin.methods().contains(&"NodeGetVolumeStats"));

    // A real bind mount: the plugin's file is at the target, which is the container's /data.
    let uid = one["metadata"]["uid"].as_str().unwrap();
    let target = env
        .root
        .join("pods")
        .join(uid)
        .join("volumes/kubernetes.io~csi/data/mount");
    assert_eq!(
        std::fs::read_to_string(target.join("hello")).unwrap(),
        "from the plugin"
    );
    let bundle = env.runtime.bundles_of("serve")[0].clone();
    let spec = env.runtime.spec(&bundle).unwrap();
    let data_mounts: Vec<_> = env
        .runtime
        .bundles_of("serve")
        .iter()
        .filter_map(|b| env.runtime.spec(b))
        .flat_map(|s| s.mounts)
        .filter(|m| m.destination == "/data")
        .map(|m| m.source)
        .collect();
    assert!(data_mounts.contains(&target), "{data_mounts:?} {spec:?}");

    // The first pod goes: unpublished, still staged for the second.
    plugin.clear();
    env.client
        .delete(&pods(), "one", &DeleteParams::default())
        .await
        .unwrap();
    eventually("pod one unpublished", || async {
        plugin
            .methods()
            .contains(&"NodeUnpublishVolume")
            .then_some(())
    })
    .await;
    assert!(!is_mount_point(&target));
    assert_eq!(plugin.methods(), ["NodeUnpublishVolume"]);

    // The last pod goes: unpublished and unstaged.
    env.client
        .delete(&pods(), "two", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the volume unstaged", || async {
        plugin
            .methods()
            .contains(&"NodeUnstageVolume")
            .then_some(())
    })
    .await;
    assert_eq!(
        plugin.methods(),
        [
            "NodeUnpublishVolume",
            "NodeUnpublishVolume",
            "NodeUnstageVolume"
        ]
    );
    assert!(!is_mount_point(std::path::Path::new(&stage.path)));
    let _ = two;
}

#[tokio::test]
async fn without_a_csidriver_the_pod_waits_for_its_volume_attachment() {
    let env = env().await;
    let plugin = env
        .plugin(FixtureOptions {
            stage_unstage: false,
            ..Default::default()
        })
        .await;
    eventually("the driver registered", || async {
        let c = env.client.get(&csinodes(), "n1").await.ok()?;
        (c["spec"]["drivers"].as_array()?.len() == 1).then_some(())
    })
    .await;
    bound_claim(&env).await;
    create(&env, &pods(), claim_pod("web")).await;
    // The pod's volume waits for the attachment: a FailedMount event names it.
    let va = {
        use sha2::{Digest, Sha256};
        let d = Sha256::digest(format!("vol-1{DRIVER}n1").as_bytes());
        format!(
            "csi-{}",
            d.iter().map(|b| format!("{b:02x}")).collect::<String>()
        )
    };
    eventually("a FailedMount event naming the attachment", || async {
        let evs = env
            .client
            .list(&r("", "events", Some("default")), &Default::default())
            .await
            .ok()?;
        evs.items
            .iter()
            .any(|e| {
                e["reason"] == "FailedMount"
                    && e["message"].as_str().is_some_and(|m| m.contains(&va))
            })
            .then_some(())
    })
    .await;
    let p = env.client.get(&pods(), "web").await.unwrap();
    assert_ne!(p["status"]["phase"], "Running");
    assert!(!plugin.methods().contains(&"NodePublishVolume"));

    // What the attach/detach controller would do.
    create(
        &env,
        &r("storage.k8s.io", "volumeattachments", None),
        json!({"metadata": {"name": va},
               "spec": {"attacher": DRIVER, "nodeName": "n1",
                        "source": {"persistentVolumeName": "pv-1"}}}),
    )
    .await;
    env.client
        .patch(
            &r("storage.k8s.io", "volumeattachments", None),
            &va,
            &Patch::Merge(json!({"status": {"attached": true,
                "attachmentMetadata": {"lun": "7"}}})),
            Some("status"),
            &WriteParams::default(),
        )
        .await
        .unwrap();
    running(&env, "web").await;
    let publish = plugin
        .calls()
        .into_iter()
        .find(|c| c.method == "NodePublishVolume")
        .unwrap();
    assert_eq!(publish.publish_context["lun"], "7");
    assert!(
        publish.path.starts_with(" -> "),
        "not staged: {}",
        publish.path
    );
    env.client
        .delete(&pods(), "web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("unpublished", || async {
        plugin
            .methods()
            .contains(&"NodeUnpublishVolume")
            .then_some(())
    })
    .await;
    assert!(!plugin.methods().contains(&"NodeUnstageVolume"));
}

#[tokio::test]
async fn an_unhealthy_plugin_gets_a_warning_event_on_the_node() {
    let env = env().await;
    let plugin = env.plugin(FixtureOptions::default()).await;
    eventually("the driver registered", || async {
        env.volumes.csi().drivers().get(DRIVER).map(|_| ())
    })
    .await;
    plugin.set_ready(false);
    tokio::spawn(k1s_kubelet::csi::probe_loop(
        env.volumes.csi().drivers(),
        env.client.clone(),
        k1s_api::events::Source {
            component: "kubelet".into(),
            host: Some("n1".into()),
        },
        "n1".into(),
        Duration::from_millis(100),
        env.cancel.clone(),
    ));
    let ev = eventually("a CSIPluginUnhealthy event", || async {
        let evs = env
            .client
            .list(&r("", "events", Some("default")), &Default::default())
            .await
            .ok()?;
        evs.items
            .into_iter()
            .find(|e| e["reason"] == "CSIPluginUnhealthy")
    })
    .await;
    assert_eq!(ev["type"], "Warning");
    assert_eq!(ev["involvedObject"]["kind"], "Node");
    assert_eq!(ev["involvedObject"]["name"], "n1");
    assert!(ev["message"].as_str().unwrap().contains(DRIVER), "{ev}");
}

#[tokio::test]
async fn a_restarted_kubelet_neither_stages_nor_publishes_again_and_still_cleans_up() {
    let mut env = env().await;
    let plugin = env.plugin(FixtureOptions::default()).await;
    create(
        &env,
        &r("storage.k8s.io", "csidrivers", None),
        json!({"metadata": {"name": DRIVER}, "spec": {"attachRequired": false}}),
    )
    .await;
    bound_claim(&env).await;
    create(&env, &pods(), claim_pod("web")).await;
    let web = running(&env, "web").await;
    assert_eq!(
        plugin.methods(),
        ["NodeGetInfo", "NodeStageVolume", "NodePublishVolume"]
    );
    let uid = web["metadata"]["uid"].as_str().unwrap().to_string();
    let target = env
        .root
        .join("pods")
        .join(&uid)
        .join("volumes/kubernetes.io~csi/data/mount");
    assert!(is_mount_point(&target));

    plugin.clear();
    env.restart_kubelet().await;
    // The new kubelet registers the plugin again and syncs the pod.
    eventually("the driver registered again", || async {
        env.volumes.csi().drivers().get(DRIVER).map(|_| ())
    })
    .await;
    eventually("the pod's volumes known again", || async {
        let (_, published) = env.volumes.csi().actual();
        published
            .contains(&(uid.clone(), "data".to_string()))
            .then_some(())
    })
    .await;
    running(&env, "web").await;
    let (staged, _) = env.volumes.csi().actual();
    assert_eq!(staged, [(DRIVER.to_string(), "vol-1".to_string())]);
    assert!(
        !plugin
            .methods()
            .iter()
            .any(|m| *m == "NodeStageVolume" || *m == "NodePublishVolume"),
        "{:?}",
        plugin.methods()
    );

    env.client
        .delete(&pods(), "web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the volume unstaged", || async {
        plugin
            .methods()
            .contains(&"NodeUnstageVolume")
            .then_some(())
    })
    .await;
    assert_eq!(
        plugin.methods(),
        ["NodeGetInfo", "NodeUnpublishVolume", "NodeUnstageVolume"]
    );
    assert!(!is_mount_point(&target));
}
