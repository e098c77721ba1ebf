//! The real image service against a real local registry (`docker-registry`), with a busybox
//! image built by umoci and pushed by skopeo: pull policies, unpacked layers, image config,
//! repo digest, errors for a missing image and a stopped registry, concurrent pulls, and a
//! corrupted blob in the registry's storage.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::sync::Mutex;

use k1s_kubelet::images::ContentStore;
use k1s_kubelet::images::{
    ImageError, ImageService, PullPolicy, PullProgress, RegistriesConfig, RegistryImageService,
};
use support::registry::{
    Registry, build_busybox_layout, ensure_tools, layout_digests, push, run, save_archive,
};

fn service(dir: &std::path::Path, registries_yaml: &str) -> RegistryImageService {
    let registries = RegistriesConfig::parse(registries_yaml).unwrap();
    RegistryImageService::open(dir, registries).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_from_a_real_registry() {
    if !ensure_tools() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let layout = build_busybox_layout(&tmp.path().join("oci")).unwrap();
    let (manifest_digest, layer_digests) = layout_digests(&layout, "latest").unwrap();
    let mut registry = Registry::start(&tmp.path().join("registry")).unwrap();
    let host = registry.host();
    push(&layout, "latest", &format!("{host}/busybox:latest")).unwrap();
    let yaml = registry.registries_yaml();
    let reference = format!("{host}/busybox");
    let normalised = format!("{host}/busybox:latest");

    // Always: pulled, unpacked, configured.
    let svc = service(&tmp.path().join("store"), &yaml);
    let events = Mutex::new(Vec::new());
    let record = |p: PullProgress| events.lock().unwrap().push(p);
    let image = svc
        .ensure(&reference, PullPolicy::Always, &[], &record)
        .await
        .unwrap();
    assert_eq!(image.reference, normalised);
    assert_eq!(
        image.repo_digest,
        format!("{host}/busybox@{manifest_digest}")
    );
    assert_eq!(image.config.cmd, vec!["/bin/sh"]);
    assert!(image.id.starts_with("sha256:"));
    let busybox = image
        .layers
        .iter()
        .map(|l| l.join("bin/busybox"))
        .find(|p| p.is_file())
        .expect("bin/busybox in a layer");
    let mode = std::fs::metadata(&busybox).unwrap().permissions().mode();
    assert!(mode & 0o111 != 0, "busybox is executable: {mode:o}");
    assert!(image.size > 100_000, "size {}", image.size);
    {
        let events = events.lock().unwrap();
        assert!(matches!(events.first(), Some(PullProgress::Pulling { .. })));
        assert!(
            events
                .iter()
                .any(|e| matches!(e, PullProgress::Layer { done: 1, .. }))
        );
        assert!(
            matches!(events.last(), Some(PullProgress::Pulled { bytes, .. }) if *bytes > 0),
            "{events:?}"
        );
    }
    assert_eq!(svc.list().len(), 1);
    assert!(
        svc.get(&format!("{host}/busybox@{manifest_digest}"))
            .is_some()
    );

    // Always again: the manifest did not change, nothing is downloaded.
    events.lock().unwrap().clear();
    svc.ensure(&reference, PullPolicy::Always, &[], &record)
        .await
        .unwrap();
    assert!(
        matches!(
            events.lock().unwrap().last(),
            Some(PullProgress::Pulled { bytes: 0, .. })
        ),
        "{:?}",
        events.lock().unwrap()
    );

    // Concurrent ensures of one reference on a fresh store pull once.
    let svc2 = service(&tmp.path().join("store2"), &yaml);
    let pulls = Mutex::new(0);
    let count = |p: PullProgress| {
        if matches!(p, PullProgress::Pulling { .. }) {
            *pulls.lock().unwrap() += 1;
        }
    };
    let (a, b) = tokio::join!(
        svc2.ensure(&reference, PullPolicy::IfNotPresent, &[], &count),
        svc2.ensure(&normalised, PullPolicy::IfNotPresent, &[], &count),
    );
    assert_eq!(a.unwrap(), b.unwrap());
    assert_eq!(*pulls.lock().unwrap(), 1);

    // A missing image: a pull error naming the reference.
    let err = svc
        .ensure(
            &format!("{host}/nope:latest"),
            PullPolicy::Always,
            &[],
            &record,
        )
        .await
        .unwrap_err();
    println!("missing image: {err}");
    assert!(matches!(err, ImageError::Pull { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("failed to pull image \"{host}/nope:latest\": ")),
        "{message}"
    );
    assert!(message.contains("unknown"), "{message}");

    // Without registries.yaml the registry is HTTPS, which it does not speak.
    let https = service(&tmp.path().join("store-https"), "");
    let err = https
        .ensure(&reference, PullPolicy::IfNotPresent, &[], &record)
        .await
        .unwrap_err();
    println!("https to an http registry: {err}");
    assert!(matches!(err, ImageError::Pull { .. }), "{err:?}");

    // A corrupted layer blob in the registry: DigestMismatch, nothing kept.
    let data = registry.blob_data_path(&layer_digests[layer_digests.len() - 1]);
    let mut bytes = std::fs::read(&data).unwrap();
    for b in bytes.iter_mut().skip(100).take(64) {
        *b ^= 0x5a;
    }
    std::fs::write(&data, &bytes).unwrap();
    let fresh_dir = tmp.path().join("store-fresh");
    let fresh = service(&fresh_dir, &yaml);
    let err = fresh
        .ensure(&reference, PullPolicy::Always, &[], &record)
        .await
        .unwrap_err();
    println!("corrupted blob: {err}");
    assert!(
        matches!(&err, ImageError::DigestMismatch { digest, .. } if *digest == layer_digests[layer_digests.len() - 1]),
        "{err:?}"
    );
    assert!(fresh.get(&reference).is_none());
    for sub in ["layers/sha256", "blobs/.tmp", "layers/.tmp"] {
        assert_eq!(
            std::fs::read_dir(fresh_dir.join(sub)).unwrap().count(),
            0,
            "{sub} is empty"
        );
    }

    // The registry goes away: IfNotPresent and Never need no network; Always says why it fails.
    registry.stop();
    svc.ensure(&reference, PullPolicy::IfNotPresent, &[], &record)
        .await
        .unwrap();
    svc.ensure(&reference, PullPolicy::Never, &[], &record)
        .await
        .unwrap();
    let err = svc
        .ensure(&reference, PullPolicy::Always, &[], &record)
        .await
        .unwrap_err();
    println!("registry down: {err}");
    let message = err.to_string().to_lowercase();
    assert!(message.contains("connection refused"), "{message}");
    assert!(message.contains(&normalised), "{message}");
    let err = fresh
        .ensure(&reference, PullPolicy::Never, &[], &record)
        .await
        .unwrap_err();
    assert!(matches!(err, ImageError::NotPresent(_)), "{err:?}");

    // The store survives a restart.
    drop(svc);
    let reopened = service(&tmp.path().join("store"), &yaml);
    let again = reopened
        .ensure(&reference, PullPolicy::IfNotPresent, &[], &record)
        .await
        .unwrap();
    assert_eq!(again, image);
}

/// Airgap archives as skopeo writes them: `docker save` format (here gzipped) and an OCI layout
/// tarball, imported from a directory, once.
#[tokio::test]
async fn imports_skopeo_archives() {
    if !ensure_tools() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let layout = build_busybox_layout(&tmp.path().join("oci")).unwrap();
    let (manifest_digest, _) = layout_digests(&layout, "latest").unwrap();
    let images = tmp.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let docker = images.join("bb-docker.tar");
    save_archive(
        &layout,
        "latest",
        "docker-archive",
        &docker,
        "example.com/bb:docker",
    )
    .unwrap();
    run(std::process::Command::new("gzip").arg(&docker)).unwrap();
    save_archive(
        &layout,
        "latest",
        "oci-archive",
        &images.join("bb-oci.tar"),
        "example.com/bb:oci",
    )
    .unwrap();

    let svc = service(&tmp.path().join("store"), "");
    let report = svc.import_dir(&images).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let mut imported = report.imported.clone();
    imported.sort();
    assert_eq!(
        imported,
        vec!["example.com/bb:docker", "example.com/bb:oci"]
    );

    let oci = svc.get("example.com/bb:oci").unwrap();
    let docker = svc.get("example.com/bb:docker").unwrap();
    assert_eq!(oci.repo_digest, format!("example.com/bb@{manifest_digest}"));
    assert_eq!(oci.id, docker.id, "same config");
    assert_eq!(oci.layers, docker.layers, "layers shared by diff_id");
    assert_eq!(oci.config.cmd, vec!["/bin/sh"]);
    assert!(oci.layers.iter().any(|l| l.join("bin/busybox").is_file()));

    // Pull policy Never finds imported images.
    let none = |_: PullProgress| {};
    svc.ensure("example.com/bb:oci", PullPolicy::Never, &[], &none)
        .await
        .unwrap();

    // At the next start nothing is imported again.
    drop(svc);
    let svc = service(&tmp.path().join("store"), "");
    let report = svc.import_dir(&images).await;
    assert!(report.imported.is_empty());
    assert_eq!(report.unchanged.len(), 2);
    let store: &ContentStore = svc.store();
    assert_eq!(store.list().len(), 2);
}
