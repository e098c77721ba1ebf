//! The volume manager against an in-memory API (a fake [`Client`] over a map of objects that
//! answers TokenRequests with `token-1`, `token-2`, ... and records patches); the CSI
//! volume tests use the same fake.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use k1s_api::client::{
    ClientError, DeleteParams, ListParams, ObjectList, Patch, ResourceRef, Result as CResult,
    WatchParams, WatchStream, WriteParams,
};
use serde_json::{Value, json};

use super::*;

#[derive(Default)]
pub(super) struct FakeClient {
    objects: Mutex<HashMap<(String, String, String), Value>>,
    tokens: AtomicUsize,
    token_requests: Mutex<Vec<(String, String, Value)>>,
    /// Patches received: (`resource/name`, body).
    pub(super) patches: Mutex<Vec<(String, Value)>>,
}

impl FakeClient {
    pub(super) fn put(&self, resource: &str, ns: &str, obj: Value) {
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        self.objects
            .lock()
            .unwrap()
            .insert((resource.into(), ns.into(), name), obj);
    }
}

fn unsupported() -> ClientError {
    ClientError::transport("not implemented by the fake")
}

#[async_trait::async_trait]
impl Client for FakeClient {
    async fn get(&self, r: &ResourceRef, name: &str) -> CResult<Value> {
        let key = (
            r.resource.clone(),
            r.namespace.clone().unwrap_or_default(),
            name.to_string(),
        );
        self.objects
            .lock()
            .unwrap()
            .get(&key)
            .cloned()
            .ok_or_else(|| ClientError {
                code: 404,
                reason: "NotFound".into(),
                message: format!("{} \"{name}\" not found", r.resource),
            })
    }
    async fn list(&self, _: &ResourceRef, _: &ListParams) -> CResult<ObjectList> {
        Err(unsupported())
    }
    async fn create(&self, _: &ResourceRef, _: Value, _: &WriteParams) -> CResult<Value> {
        Err(unsupported())
    }
    async fn update(
        &self,
        _: &ResourceRef,
        _: Value,
        _: Option<&str>,
        _: &WriteParams,
    ) -> CResult<Value> {
        Err(unsupported())
    }
    async fn patch(
        &self,
        r: &ResourceRef,
        name: &str,
        p: &Patch,
        _: Option<&str>,
        _: &WriteParams,
    ) -> CResult<Value> {
        self.patches
            .lock()
            .unwrap()
            .push((format!("{}/{name}", r.resource), p.body().clone()));
        Ok(json!({}))
    }
    async fn delete(&self, _: &ResourceRef, _: &str, _: &DeleteParams) -> CResult<Value> {
        Err(unsupported())
    }
    async fn create_subresource(
        &self,
        r: &ResourceRef,
        name: &str,
        subresource: &str,
        body: Value,
    ) -> CResult<Value> {
        assert_eq!(
            (r.resource.as_str(), subresource),
            ("serviceaccounts", "token")
        );
        let n = self.tokens.fetch_add(1, Ordering::SeqCst) + 1;
        let secs = body["spec"]["expirationSeconds"].as_i64().unwrap();
        let exp = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(secs);
        let exp = k1s_api::time::format_nano(exp);
        self.token_requests.lock().unwrap().push((
            r.namespace.clone().unwrap_or_default(),
            name.to_string(),
            body.clone(),
        ));
        Ok(json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": body["spec"],
            "status": {"token": format!("token-{n}"), "expirationTimestamp": exp},
        }))
    }
    async fn watch(&self, _: &ResourceRef, _: &WatchParams) -> CResult<WatchStream> {
        Err(unsupported())
    }
}

struct Env {
    dir: tempfile::TempDir,
    client: Arc<FakeClient>,
    vm: VolumeManager,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let client = Arc::new(FakeClient::default());
    let vm = VolumeManager::new(client.clone(), dir.path().join("pods"));
    Env { dir, client, vm }
}

fn pod(uid: &str, volumes: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": uid,
                     "labels": {"app": "web", "tier": "front"}},
        "spec": {
            "serviceAccountName": "builder",
            "containers": [{"name": "main", "image": "x",
                            "resources": {"limits": {"memory": "64Mi"}}}],
            "volumes": volumes,
        },
    }))
    .unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn data_target(dir: &Path) -> std::path::PathBuf {
    std::fs::read_link(dir.join("..data")).unwrap()
}

fn mount_line(dir: &Path) -> Option<String> {
    let real = std::fs::canonicalize(dir).ok()?;
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines()
        .rfind(|l| {
            mounts::parse_mountinfo(l)
                .first()
                .is_some_and(|m| m.mount_point == real)
        })
        .map(str::to_string)
}

macro_rules! require_root {
    () => {
        if !mounts::can_mount() {
            eprintln!("SKIPPED: not root, cannot mount tmpfs");
            return;
        }
    };
}

#[tokio::test]
async fn configmap_with_items_and_modes() {
    let e = env();
    e.client.put(
        "configmaps",
        "ns",
        json!({"metadata": {"name": "cfg"}, "data": {"a": "one", "b": "two"},
               "binaryData": {"bin": "AAEC"}}),
    );
    let p = pod(
        "u1",
        json!([{"name": "c", "configMap": {"name": "cfg", "defaultMode": 0o640,
            "items": [{"key": "a", "path": "sub/a.txt", "mode": 0o600}, {"key": "bin", "path": "bin"}]}}]),
    );
    let vols = e.vm.setup(&p).await.unwrap();
    let v = vols.get("c").unwrap();
    assert!(v.read_only);
    assert_eq!(
        v.path,
        e.vm.volumes_dir("u1").join("kubernetes.io~configmap/c")
    );
    assert_eq!(read(&v.path.join("sub/a.txt")), "one");
    assert_eq!(mode(&v.path.join("sub/a.txt")), 0o600);
    assert_eq!(std::fs::read(v.path.join("bin")).unwrap(), [0, 1, 2]);
    assert_eq!(mode(&v.path.join("bin")), 0o640);
    assert!(!v.path.join("b").exists());
    assert_eq!(
        std::fs::read_link(v.path.join("sub")).unwrap(),
        Path::new("..data/sub")
    );
}

#[tokio::test]
async fn configmap_update_swaps_data_and_drops_keys() {
    let e = env();
    let cm = |data: Value| json!({"metadata": {"name": "cfg"}, "data": data});
    e.client
        .put("configmaps", "ns", cm(json!({"a": "1", "b": "2"})));
    let p = pod("u1", json!([{"name": "c", "configMap": {"name": "cfg"}}]));
    let dir = e.vm.setup(&p).await.unwrap().get("c").unwrap().path.clone();
    let ts1 = data_target(&dir);
    assert_eq!(mode(&dir.join("a")), 0o644);
    // No change: nothing rewritten.
    e.vm.setup(&p).await.unwrap();
    assert_eq!(data_target(&dir), ts1);

    e.client.put("configmaps", "ns", cm(json!({"a": "1b"})));
    e.vm.setup(&p).await.unwrap();
    let ts2 = data_target(&dir);
    assert_ne!(ts1, ts2);
    assert_eq!(read(&dir.join("a")), "1b");
    assert!(std::fs::symlink_metadata(dir.join("b")).is_err());
    assert!(!dir.join(&ts1).exists());
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}"); // a, ..data, the timestamped dir
}

#[tokio::test]
async fn missing_configmap_optional_or_required() {
    let e = env();
    let p = pod(
        "u1",
        json!([{"name": "opt", "configMap": {"name": "missing", "optional": true}}]),
    );
    let dir =
        e.vm.setup(&p)
            .await
            .unwrap()
            .get("opt")
            .unwrap()
            .path
            .clone();
    assert!(dir.join("..data").is_dir());

    let p = pod(
        "u2",
        json!([{"name": "cfg", "configMap": {"name": "missing"}}]),
    );
    let err = e.vm.setup(&p).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "MountVolume.SetUp failed for volume \"cfg\" : configmap \"missing\" not found"
    );
    assert_eq!(err.volume(), Some("cfg"));

    e.client.put(
        "configmaps",
        "ns",
        json!({"metadata": {"name": "cm"}, "data": {"a": "1"}}),
    );
    let p = pod(
        "u3",
        json!([{"name": "cfg", "configMap": {"name": "cm", "items": [{"key": "zz", "path": "zz"}]}}]),
    );
    assert_eq!(
        e.vm.setup(&p).await.unwrap_err().to_string(),
        "MountVolume.SetUp failed for volume \"cfg\" : configmap references non-existent config key: zz"
    );
    assert_eq!(
        e.vm.setup(&pod(
            "u4",
            json!([{"name": "s", "secret": {"secretName": "nope"}}])
        ))
        .await
        .unwrap_err()
        .to_string(),
        "MountVolume.SetUp failed for volume \"s\" : secret \"nope\" not found"
    );
}

#[tokio::test]
async fn secret_on_tmpfs() {
    require_root!();
    let e = env();
    e.client.put(
        "secrets",
        "ns",
        json!({"metadata": {"name": "creds"}, "type": "Opaque",
               "data": {"password": "aHVudGVyMg==", "raw": "/wA="}}),
    );
    let p = pod(
        "u1",
        json!([{"name": "s", "secret": {"secretName": "creds"}}]),
    );
    let v = e.vm.setup(&p).await.unwrap().get("s").unwrap().clone();
    assert!(v.read_only);
    assert!(v.path.ends_with("volumes/kubernetes.io~secret/s"));
    assert_eq!(read(&v.path.join("password")), "hunter2");
    assert_eq!(std::fs::read(v.path.join("raw")).unwrap(), [0xff, 0]);
    let line = mount_line(&v.path).expect("the secret volume is a mount point");
    assert!(line.contains(" - tmpfs "), "{line}");
    // Idempotent: no second tmpfs on top.
    e.vm.setup(&p).await.unwrap();
    let real = std::fs::canonicalize(&v.path).unwrap();
    let count = mounts::mounts()
        .unwrap()
        .iter()
        .filter(|m| m.mount_point == real)
        .count();
    assert_eq!(count, 1);
    e.vm.teardown("u1").await.unwrap();
    assert!(mount_line(&v.path).is_none());
}

fn kube_api_access() -> Value {
    json!([{
        "name": "kube-api-access-x7k2p",
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    }])
}

#[tokio::test]
async fn projected_kube_api_access_layout() {
    require_root!();
    let e = env();
    e.client.put(
        "configmaps",
        "ns",
        json!({"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "PEM"}}),
    );
    let p = pod("u1", kube_api_access());
    let v =
        e.vm.setup(&p)
            .await
            .unwrap()
            .get("kube-api-access-x7k2p")
            .unwrap()
            .clone();
    assert!(v.read_only);
    assert!(
        v.path
            .ends_with("kubernetes.io~projected/kube-api-access-x7k2p")
    );
    assert_eq!(read(&v.path.join("token")), "token-1");
    assert_eq!(read(&v.path.join("ca.crt")), "PEM");
    assert_eq!(read(&v.path.join("namespace")), "ns");
    for f in ["token", "ca.crt", "namespace"] {
        assert_eq!(mode(&v.path.join(f)), 0o644, "{f}");
        assert_eq!(
            std::fs::read_link(v.path.join(f)).unwrap(),
            Path::new("..data").join(f)
        );
    }
    assert!(mount_line(&v.path).unwrap().contains(" - tmpfs "));

    let reqs = e.client.token_requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1);
    let (ns, sa, body) = &reqs[0];
    assert_eq!((ns.as_str(), sa.as_str()), ("ns", "builder"));
    assert_eq!(
        body,
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"audiences": [], "expirationSeconds": 3607,
                         "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": "u1"}}})
    );

    // The container's mount of it is read-only even without readOnly in the volumeMount.
    let c: Container = serde_json::from_value(json!({"name": "main",
        "volumeMounts": [{"name": "kube-api-access-x7k2p",
                          "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}))
    .unwrap();
    let mounts = container_mounts(&p, &c, &e.vm.setup(&p).await.unwrap()).unwrap();
    assert_eq!(mounts.len(), 1);
    assert!(mounts[0].readonly && !mounts[0].file && mounts[0].kind == "bind");
    assert_eq!(mounts[0].source, v.path);
    e.vm.teardown("u1").await.unwrap();
}

#[tokio::test]
async fn token_refreshed_after_80_percent_of_its_life() {
    require_root!();
    let e = env();
    e.client.put(
        "configmaps",
        "ns",
        json!({"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "PEM"}}),
    );
    let p = pod("u1", kube_api_access());
    let start = e.vm.now();
    let dir = e.vm.setup(&p).await.unwrap().volumes["kube-api-access-x7k2p"]
        .path
        .clone();
    assert_eq!(read(&dir.join("token")), "token-1");
    let next = e.vm.next_refresh("u1").unwrap();
    let expected = Duration::from_secs(3607 * 4 / 5);
    let got = next.duration_since(start);
    assert!(got.abs_diff(expected) < Duration::from_secs(3), "{got:?}");
    assert_eq!(e.vm.next_refresh("other"), None);

    // At 79 % nothing is requested and nothing is rewritten.
    let ts = data_target(&dir);
    e.vm.advance_clock(Duration::from_secs(3607 * 79 / 100));
    e.vm.setup(&p).await.unwrap();
    assert_eq!(read(&dir.join("token")), "token-1");
    assert_eq!(data_target(&dir), ts);
    assert_eq!(e.client.tokens.load(Ordering::SeqCst), 1);

    // Past 80 %: a new token, written atomically.
    e.vm.advance_clock(Duration::from_secs(3607 * 2 / 100));
    e.vm.setup(&p).await.unwrap();
    assert_eq!(read(&dir.join("token")), "token-2");
    assert_ne!(data_target(&dir), ts);
    assert!(e.vm.next_refresh("u1").unwrap() > e.vm.now());

    e.vm.teardown("u1").await.unwrap();
    assert_eq!(e.vm.next_refresh("u1"), None);
}

#[tokio::test]
async fn downward_api_labels_and_resources() {
    let e = env();
    let p = pod(
        "u1",
        json!([{"name": "info", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 0o400},
            {"path": "mem", "resourceFieldRef": {"containerName": "main",
                "resource": "limits.memory", "divisor": "1Mi"}},
        ]}}]),
    );
    let v = e.vm.setup(&p).await.unwrap().volumes["info"].clone();
    assert!(v.read_only);
    assert!(v.path.ends_with("kubernetes.io~downward-api/info"));
    assert_eq!(read(&v.path.join("labels")), "app=\"web\"\ntier=\"front\"");
    assert_eq!(read(&v.path.join("name")), "web");
    assert_eq!(mode(&v.path.join("name")), 0o400);
    assert_eq!(read(&v.path.join("mem")), "64");
}

/// Issue #29: a limit the container does not set reads the allocatable its Node reports, in
/// downwardAPI and projected volumes alike.
#[tokio::test]
async fn downward_api_limits_default_to_node_allocatable() {
    let e = env();
    e.client.put(
        "nodes",
        "",
        json!({"metadata": {"name": "n1"},
               "status": {"allocatable": {"cpu": "3", "memory": "2Gi"}}}),
    );
    let items = json!([
        {"path": "cpu", "resourceFieldRef": {"containerName": "main",
            "resource": "limits.cpu", "divisor": "1m"}},
        {"path": "mem", "resourceFieldRef": {"containerName": "main",
            "resource": "limits.memory", "divisor": "1Mi"}},
    ]);
    let mut p = pod(
        "u1",
        json!([{"name": "d", "downwardAPI": {"items": items}},
               {"name": "p", "projected": {"sources": [{"downwardAPI": {"items": items}}]}}]),
    );
    p.spec.as_mut().unwrap().node_name = Some("n1".into());
    let vols = e.vm.setup(&p).await.unwrap();
    for v in ["d", "p"] {
        let path = &vols.volumes[v].path;
        assert_eq!(read(&path.join("cpu")), "3000", "{v}");
        // The container's own memory limit wins.
        assert_eq!(read(&path.join("mem")), "64", "{v}");
    }
    // The projected volume is a tmpfs (as root): it goes with the pod.
    e.vm.teardown("u1").await.unwrap();
}

#[tokio::test]
async fn empty_dirs_on_disk_and_in_memory() {
    let e = env();
    let p = pod(
        "u1",
        json!([{"name": "disk", "emptyDir": {"sizeLimit": "1Gi"}}, {"name": "dflt"}]),
    );
    let vols = e.vm.setup(&p).await.unwrap();
    let disk = &vols.volumes["disk"];
    assert!(!disk.read_only);
    assert_eq!(disk.size_limit, Some(1 << 30));
    assert!(disk.path.ends_with("kubernetes.io~empty-dir/disk"));
    assert_eq!(mode(&disk.path), 0o777);
    assert!(vols.volumes["dflt"].path.is_dir());

    require_root!();
    let p = pod(
        "u2",
        json!([{"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}]),
    );
    let v = e.vm.setup(&p).await.unwrap().volumes["mem"].clone();
    assert_eq!(v.size_limit, None);
    let line = mount_line(&v.path).unwrap();
    assert!(
        line.contains(" - tmpfs ") && line.contains("size=1024k"),
        "{line}"
    );
    std::fs::write(v.path.join("f"), "kept").unwrap();
    e.vm.setup(&p).await.unwrap();
    assert_eq!(read(&v.path.join("f")), "kept");
    e.vm.teardown("u2").await.unwrap();
}

#[tokio::test]
async fn unsupported_and_invalid() {
    let e = env();
    let p = pod(
        "u1",
        json!([{"name": "data", "nfs": {"server": "s", "path": "/"}}]),
    );
    let err = e.vm.setup(&p).await.unwrap_err();
    assert!(matches!(err, VolumeError::Unsupported { .. }));
    assert_eq!(
        err.to_string(),
        "MountVolume.SetUp failed for volume \"data\" : volume type nfs is not supported by k1s yet"
    );
    let p = pod("../x", json!([{"name": "a", "emptyDir": {}}]));
    assert!(matches!(
        e.vm.setup(&p).await,
        Err(VolumeError::InvalidPod(_))
    ));
    assert!(e.vm.teardown("..").await.is_err());
    assert!(e.vm.teardown("").await.is_err());
    let p = pod(
        "u2",
        json!([{"name": "a", "hostPath": {"path": "/nonexistent-k1s", "type": "Directory"}}]),
    );
    assert_eq!(
        e.vm.setup(&p).await.unwrap_err().to_string(),
        "MountVolume.SetUp failed for volume \"a\" : hostPath type check failed: /nonexistent-k1s is not a directory"
    );
}

#[tokio::test]
async fn container_mounts_with_sub_paths() {
    let e = env();
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("f.conf"), "x").unwrap();
    e.client.put(
        "configmaps",
        "ns",
        json!({"metadata": {"name": "cm"}, "data": {"app.conf": "v"}}),
    );
    let p = pod(
        "u1",
        json!([{"name": "scratch", "emptyDir": {}},
               {"name": "cfg", "configMap": {"name": "cm"}},
               {"name": "host", "hostPath": {"path": host.path()}}]),
    );
    let vols = e.vm.setup(&p).await.unwrap();
    let scratch = vols.volumes["scratch"].path.clone();
    std::os::unix::fs::symlink("/etc", scratch.join("escape")).unwrap();
    std::os::unix::fs::symlink("../../..", scratch.join("up")).unwrap();

    let container = |mounts: Value| -> Container {
        serde_json::from_value(json!({"name": "main",
            "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "DIR", "value": "logs-$(POD)"}],
            "volumeMounts": mounts}))
        .unwrap()
    };
    let ok = container(json!([
        {"name": "scratch", "mountPath": "/data"},
        {"name": "scratch", "mountPath": "/logs", "subPathExpr": "$(DIR)/x", "readOnly": true},
        {"name": "cfg", "mountPath": "/etc/app.conf", "subPath": "app.conf"},
        {"name": "host", "mountPath": "/h", "subPath": "f.conf"},
    ]));
    let m = container_mounts(&p, &ok, &vols).unwrap();
    assert_eq!(m.len(), 4);
    assert_eq!(
        (m[0].source.clone(), m[0].readonly, m[0].file),
        (scratch.clone(), false, false)
    );
    assert_eq!(m[0].destination, "/data");
    let logs = std::fs::canonicalize(&scratch).unwrap().join("logs-web/x");
    assert_eq!((m[1].source.clone(), m[1].readonly), (logs.clone(), true));
    assert!(logs.is_dir());
    assert!(m[2].readonly && m[2].file);
    assert_eq!(read(&m[2].source), "v");
    assert!(!m[3].readonly && m[3].file);

    let refused = [
        (
            json!({"name": "scratch", "mountPath": "/x", "subPath": "a/../../b"}),
            "unable to provision SubPath `a/../../b`: must not contain '..'",
        ),
        (
            json!({"name": "scratch", "mountPath": "/x", "subPath": "/etc"}),
            "error SubPath `/etc` must not be an absolute path",
        ),
        (
            json!({"name": "scratch", "mountPath": "/x", "subPath": "escape"}),
            "not within volume path",
        ),
        (
            json!({"name": "scratch", "mountPath": "/x", "subPath": "up/x"}),
            "not within volume path",
        ),
        (
            json!({"name": "scratch", "mountPath": "/x", "subPathExpr": "$(NOPE)"}),
            "missing value for NOPE",
        ),
        (
            json!({"name": "ghost", "mountPath": "/x"}),
            "cannot find volume \"ghost\" to mount into container \"main\"",
        ),
    ];
    for (vm, want) in refused {
        let err = container_mounts(&p, &container(json!([vm])), &vols).unwrap_err();
        assert!(err.to_string().contains(want), "{vm}: {err}");
        assert!(matches!(err, VolumeError::Mount { .. }));
    }
    assert!(!scratch.join("x").exists());
}

#[tokio::test]
async fn teardown_unmounts_removes_and_spares_host_paths() {
    let e = env();
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("precious"), "keep").unwrap();
    e.client.put(
        "configmaps",
        "ns",
        json!({"metadata": {"name": "cm"}, "data": {"k": "v"}}),
    );
    let mut vols = json!([
        {"name": "host", "hostPath": {"path": host.path(), "type": "Directory"}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "cfg", "configMap": {"name": "cm"}},
    ]);
    let root = mounts::can_mount();
    if root {
        e.client.put(
            "secrets",
            "ns",
            json!({"metadata": {"name": "s"}, "data": {"k": "dg=="}}),
        );
        let more = json!([
            {"name": "mem", "emptyDir": {"medium": "Memory"}},
            {"name": "sec", "secret": {"secretName": "s"}},
        ]);
        vols.as_array_mut()
            .unwrap()
            .extend(more.as_array().unwrap().clone());
    } else {
        eprintln!("SKIPPED (partly): not root, no tmpfs volumes");
    }
    let p = pod("u1", vols);
    let set = e.vm.setup(&p).await.unwrap();
    assert_eq!(set.volumes["host"].path, host.path());
    // Links out of the volumes must not be followed by the removal.
    let scratch = &set.volumes["scratch"].path;
    std::os::unix::fs::symlink(host.path(), scratch.join("to-host")).unwrap();
    std::os::unix::fs::symlink(host.path().join("precious"), scratch.join("to-file")).unwrap();
    if root {
        std::os::unix::fs::symlink(host.path(), set.volumes["mem"].path.join("to-host")).unwrap();
    }
    let vdir = e.vm.volumes_dir("u1");
    let tmp = std::fs::canonicalize(e.dir.path()).unwrap();
    e.vm.teardown("u1").await.unwrap();
    assert!(!vdir.exists());
    assert!(
        mounts::mounts()
            .unwrap()
            .iter()
            .all(|m| !m.mount_point.starts_with(&tmp))
    );
    assert_eq!(read(&host.path().join("precious")), "keep");
    // Idempotent.
    e.vm.teardown("u1").await.unwrap();
}

#[tokio::test]
async fn teardown_refuses_foreign_mounts() {
    require_root!();
    let e = env();
    let p = pod("u1", json!([{"name": "scratch", "emptyDir": {}}]));
    let dir = e.vm.setup(&p).await.unwrap().volumes["scratch"]
        .path
        .clone();
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("precious"), "keep").unwrap();
    let target = dir.join("bound");
    std::fs::create_dir(&target).unwrap();
    nix::mount::mount(
        Some(host.path()),
        &target,
        None::<&str>,
        nix::mount::MsFlags::MS_BIND,
        None::<&str>,
    )
    .unwrap();
    // A bind of a tmpfs-backed directory (a /tmp on tmpfs) is merely unmounted; anything else
    // is refused. Either way nothing behind the mount is removed.
    match e.vm.teardown("u1").await {
        Err(err) => {
            assert!(err.to_string().contains("refusing to remove"), "{err}");
            assert_eq!(read(&host.path().join("precious")), "keep");
            mounts::unmount(&target).unwrap();
        }
        Ok(()) => assert!(!target.exists()),
    }
    e.vm.teardown("u1").await.unwrap();
    assert_eq!(read(&host.path().join("precious")), "keep");
}
