//! `hostpath.csi.k1s.io` driven over a real unix socket with the generated CSI clients: the
//! plugin runs in-process on a temporary data dir, and its volumes are real loop devices and
//! ext4 mounts (these tests need root, `losetup`, `mkfs.ext4`, `resize2fs`).
//!
//! Each test's `Host` guard unmounts everything under its directory and detaches its loop
//! devices when the test ends, also when it fails.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k1s_csi::hostpath::{Config, DRIVER_NAME, Driver, TOPOLOGY_KEY};
use k1s_csi::proto::registration::registration_client::RegistrationClient;
use k1s_csi::proto::registration::{InfoRequest, RegistrationStatus};
use k1s_csi::proto::v1::controller_client::ControllerClient;
use k1s_csi::proto::v1::identity_client::IdentityClient;
use k1s_csi::proto::v1::node_client::NodeClient;
use k1s_csi::proto::v1::volume_capability::access_mode::Mode;
use k1s_csi::proto::v1::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
use k1s_csi::proto::v1::volume_content_source::{self, SnapshotSource, VolumeSource};
use k1s_csi::proto::v1::volume_usage::Unit;
use k1s_csi::proto::v1::*;
use k1s_csi::registrar::{Registrar, RegistrarError};
use k1s_csi::serve::Socket;
use tokio_util::sync::CancellationToken;
use tonic::Code;
use tonic::transport::Channel;

const MI: i64 = 1 << 20;

/// Connects a gRPC channel to a unix socket (the client side's dialer).
async fn connect(path: &Path) -> Channel {
    k1s_csi::connect::connect(path, Duration::from_secs(30))
        .await
        .unwrap()
}

/// Undoes what the plugin did on the host under `root` when dropped: unmounts (deepest first)
/// and detaches the loop devices of every image.
struct Host {
    root: PathBuf,
}

impl Drop for Host {
    fn drop(&mut self) {
        let root = std::fs::canonicalize(&self.root).unwrap_or(self.root.clone());
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut mounts: Vec<PathBuf> = table
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .map(PathBuf::from)
            .filter(|p| p.starts_with(&root))
            .collect();
        mounts.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for m in mounts {
            let _ = nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH);
        }
        for dir in ["volumes", "snapshots"] {
            let dir = root.join("data/storage/hostpath").join(dir);
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                for dev in all_loops(&entry.path()) {
                    let _ = std::process::Command::new("losetup")
                        .arg("-d")
                        .arg(dev)
                        .status();
                }
            }
        }
    }
}

/// The loop devices backed by `image` that are still staged: a device the plugin detached
/// while another process's mount namespace (cloned meanwhile by a test running beside this
/// one) still held it is only being released, which the plugin treats as detached.
fn staged_loops(image: &Path) -> Vec<String> {
    all_loops(image)
        .into_iter()
        .filter(|d| !k1s_csi::hostpath::loop_releasing(Path::new(d)))
        .collect()
}

/// The loop devices backed by `image`.
fn all_loops(image: &Path) -> Vec<String> {
    let out = std::process::Command::new("losetup")
        .args(["--noheadings", "--output", "NAME", "--associated"])
        .arg(image)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

/// A running plugin and clients for it.
struct Plugin {
    identity: IdentityClient<Channel>,
    controller: ControllerClient<Channel>,
    node: NodeClient<Channel>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    dir: PathBuf,
}

impl Plugin {
    async fn start(dir: &Path, capacity: u64) -> Self {
        let driver = Driver::new(Config {
            node_id: "node-a".into(),
            data_dir: dir.join("data"),
            capacity: Some(capacity),
            max_volumes_per_node: 16,
        })
        .unwrap();
        let path = dir.join("csi.sock");
        let socket = Socket::bind(&path).await.unwrap();
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let cancel = cancel.clone();
            async move { socket.serve(driver.routes(), cancel).await.unwrap() }
        });
        let channel = connect(&path).await;
        Plugin {
            identity: IdentityClient::new(channel.clone()),
            controller: ControllerClient::new(channel.clone()),
            node: NodeClient::new(channel),
            cancel,
            task,
            dir: dir.to_owned(),
        }
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.unwrap();
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    async fn create(&mut self, name: &str, bytes: i64, cap: VolumeCapability) -> Volume {
        self.create_from(name, bytes, cap, None).await.unwrap()
    }

    async fn create_from(
        &mut self,
        name: &str,
        bytes: i64,
        cap: VolumeCapability,
        source: Option<volume_content_source::Type>,
    ) -> Result<Volume, tonic::Status> {
        let resp = self
            .controller
            .create_volume(CreateVolumeRequest {
                name: name.into(),
                capacity_range: Some(CapacityRange {
                    required_bytes: bytes,
                    limit_bytes: 0,
                }),
                volume_capabilities: vec![cap],
                volume_content_source: source.map(|t| VolumeContentSource { r#type: Some(t) }),
                ..Default::default()
            })
            .await?;
        Ok(resp.into_inner().volume.unwrap())
    }

    async fn stage(&mut self, id: &str, cap: VolumeCapability) -> PathBuf {
        let staging = self.path(&format!("staging/{id}"));
        std::fs::create_dir_all(&staging).unwrap();
        self.node
            .node_stage_volume(NodeStageVolumeRequest {
                volume_id: id.into(),
                staging_target_path: staging.display().to_string(),
                volume_capability: Some(cap),
                ..Default::default()
            })
            .await
            .unwrap();
        staging
    }

    async fn publish(
        &mut self,
        id: &str,
        staging: &Path,
        target: &Path,
        cap: VolumeCapability,
        readonly: bool,
    ) -> Result<(), tonic::Status> {
        self.node
            .node_publish_volume(NodePublishVolumeRequest {
                volume_id: id.into(),
                staging_target_path: staging.display().to_string(),
                target_path: target.display().to_string(),
                volume_capability: Some(cap),
                readonly,
                ..Default::default()
            })
            .await
            .map(drop)
    }

    async fn unpublish(&mut self, id: &str, target: &Path) {
        self.node
            .node_unpublish_volume(NodeUnpublishVolumeRequest {
                volume_id: id.into(),
                target_path: target.display().to_string(),
            })
            .await
            .unwrap();
    }

    async fn unstage(&mut self, id: &str, staging: &Path) {
        self.node
            .node_unstage_volume(NodeUnstageVolumeRequest {
                volume_id: id.into(),
                staging_target_path: staging.display().to_string(),
            })
            .await
            .unwrap();
    }

    async fn delete(&mut self, id: &str) -> Result<(), tonic::Status> {
        self.controller
            .delete_volume(DeleteVolumeRequest {
                volume_id: id.into(),
                ..Default::default()
            })
            .await
            .map(drop)
    }

    async fn usage(&mut self, id: &str, path: &Path) -> HashMap<i32, VolumeUsage> {
        self.node
            .node_get_volume_stats(NodeGetVolumeStatsRequest {
                volume_id: id.into(),
                volume_path: path.display().to_string(),
                staging_target_path: String::new(),
            })
            .await
            .unwrap()
            .into_inner()
            .usage
            .into_iter()
            .map(|u| (u.unit, u))
            .collect()
    }
}

fn mount_cap(mode: Mode) -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    }
}

fn block_cap() -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Block(BlockVolume {})),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}

fn rw() -> VolumeCapability {
    mount_cap(Mode::SingleNodeWriter)
}

/// Total bytes of the file system at `path`, as a container's `df` would see it.
fn fs_bytes(path: &Path) -> u64 {
    let s = nix::sys::statvfs::statvfs(path).unwrap();
    s.blocks() * s.fragment_size()
}

fn write_synced(path: &Path, content: &[u8]) {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(content).unwrap();
    f.sync_all().unwrap();
}

/// Whether the plugin says volumes grow while in use (it needs CAP_SYS_RESOURCE for that).
async fn online_expansion(p: &mut Plugin) -> bool {
    use k1s_csi::proto::v1::plugin_capability::{Type, volume_expansion};
    let caps = p
        .identity
        .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities;
    let expansion = caps
        .iter()
        .find_map(|c| match &c.r#type {
            Some(Type::VolumeExpansion(e)) => Some(e.r#type),
            _ => None,
        })
        .expect("the plugin supports expansion");
    expansion == volume_expansion::Type::Online as i32
}

fn setup() -> (tempfile::TempDir, Host) {
    let dir = tempfile::tempdir().unwrap();
    let host = Host {
        root: dir.path().to_owned(),
    };
    (dir, host)
}

#[tokio::test]
async fn identity_and_node_info() {
    let (dir, _host) = setup();
    let mut p = Plugin::start(dir.path(), 1 << 30).await;
    let info = p
        .identity
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, DRIVER_NAME);
    let probe = p
        .identity
        .probe(ProbeRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(probe.ready, Some(true));
    let node = p
        .node
        .node_get_info(NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(node.node_id, "node-a");
    assert_eq!(node.max_volumes_per_node, 16);
    assert_eq!(
        node.accessible_topology.unwrap().segments.get(TOPOLOGY_KEY),
        Some(&"node-a".to_owned())
    );
    p.stop().await;
}

#[tokio::test]
async fn create_and_delete_are_idempotent() {
    let (dir, _host) = setup();
    let mut p = Plugin::start(dir.path(), 1 << 30).await;
    let v1 = p.create("pvc-1", 64 * MI, rw()).await;
    assert_eq!(v1.capacity_bytes, 64 * MI);
    assert_eq!(
        v1.accessible_topology[0].segments.get(TOPOLOGY_KEY),
        Some(&"node-a".to_owned())
    );
    let again = p.create("pvc-1", 64 * MI, rw()).await;
    assert_eq!(again.volume_id, v1.volume_id);
    let err = p
        .create_from("pvc-1", 128 * MI, rw(), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    let err = p.create_from("", 64 * MI, rw(), None).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    // The byte budget: 1 GiB in all, 64 MiB given out.
    let err = p
        .create_from("huge", 2 << 30, rw(), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange);
    p.create("big", 900 * MI, rw()).await;
    let err = p
        .create_from("one-more", 64 * MI, rw(), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    let capacity = p
        .controller
        .get_capacity(GetCapacityRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(capacity.available_capacity, (1 << 30) - 964 * MI);

    p.delete(&v1.volume_id).await.unwrap();
    p.delete(&v1.volume_id).await.unwrap();
    p.delete("no-such-volume").await.unwrap();
    let listed = p
        .controller
        .list_volumes(ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.entries.len(), 1);
    p.stop().await;
}

#[tokio::test]
async fn a_filesystem_volume_is_staged_published_written_and_expanded() {
    let (dir, _host) = setup();
    let mut p = Plugin::start(dir.path(), 1 << 30).await;
    let id = p.create("fs", 64 * MI, rw()).await.volume_id;
    let staging = p.stage(&id, rw()).await;
    // Staging twice is fine.
    p.stage(&id, rw()).await;
    let target = p.path("pods/a/volumes/fs");
    p.publish(&id, &staging, &target, rw(), false)
        .await
        .unwrap();
    p.publish(&id, &staging, &target, rw(), false)
        .await
        .unwrap();
    // The same target read-only is a conflict.
    let err = p
        .publish(&id, &staging, &target, rw(), true)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);

    write_synced(&target.join("hello.txt"), b"written through the target");
    assert_eq!(
        std::fs::read(staging.join("hello.txt")).unwrap(),
        b"written through the target"
    );
    let before = fs_bytes(&target);
    assert!(
        before > 50 * MI as u64 && before <= 64 * MI as u64,
        "{before}"
    );
    let usage = p.usage(&id, &target).await;
    assert_eq!(usage[&(Unit::Bytes as i32)].total as u64, before);
    assert!(usage[&(Unit::Inodes as i32)].used > 0);

    // A volume in use cannot be deleted.
    assert_eq!(
        p.delete(&id).await.unwrap_err().code(),
        Code::FailedPrecondition
    );

    // Online expansion: the controller grows the image, the node the file system.
    let expanded = p
        .controller
        .controller_expand_volume(ControllerExpandVolumeRequest {
            volume_id: id.clone(),
            capacity_range: Some(CapacityRange {
                required_bytes: 128 * MI,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(expanded.capacity_bytes, 128 * MI);
    assert!(expanded.node_expansion_required);
    let node_expand = NodeExpandVolumeRequest {
        volume_id: id.clone(),
        volume_path: target.display().to_string(),
        capacity_range: Some(CapacityRange {
            required_bytes: 128 * MI,
            limit_bytes: 0,
        }),
        ..Default::default()
    };
    if online_expansion(&mut p).await {
        let node = p
            .node
            .node_expand_volume(node_expand)
            .await
            .unwrap()
            .into_inner();
        assert_eq!(node.capacity_bytes, 128 * MI);
    } else {
        // Without CAP_SYS_RESOURCE the kernel refuses to grow a mounted ext4: the plugin says
        // so (and advertised OFFLINE expansion), and the file system grows on the next stage.
        let err = p.node.node_expand_volume(node_expand).await.unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
        assert_eq!(fs_bytes(&target), before);
        p.unpublish(&id, &target).await;
        p.unstage(&id, &staging).await;
        p.stage(&id, rw()).await;
        p.publish(&id, &staging, &target, rw(), false)
            .await
            .unwrap();
    }
    let after = fs_bytes(&target);
    assert!(after > before + 50 * MI as u64, "{before} -> {after}");
    let usage = p.usage(&id, &target).await;
    assert_eq!(usage[&(Unit::Bytes as i32)].total as u64, after);
    assert_eq!(
        std::fs::read(target.join("hello.txt")).unwrap(),
        b"written through the target"
    );

    // A second, read-only publication.
    let ro_target = p.path("pods/b/volumes/fs");
    p.publish(&id, &staging, &ro_target, rw(), true)
        .await
        .unwrap();
    let err = std::fs::File::create(ro_target.join("nope")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS));
    assert!(ro_target.join("hello.txt").exists());

    for t in [&target, &ro_target] {
        p.unpublish(&id, t).await;
        assert!(!t.exists(), "unpublish removes {}", t.display());
        p.unpublish(&id, t).await;
    }
    p.unstage(&id, &staging).await;
    p.unstage(&id, &staging).await;
    assert!(
        staged_loops(
            &dir.path()
                .join(format!("data/storage/hostpath/volumes/{id}.img"))
        )
        .is_empty()
    );
    p.delete(&id).await.unwrap();
    p.stop().await;
}

/// A process in a mount namespace of its own that keeps the file system mounted at `path`
/// alive (it holds the directory open) and lets go of every other mount at once (it detaches
/// its copies), so it holds no other test's file systems: what a container does to the
/// plugin's mounts between its clone and its pivot_root. Killed when dropped.
struct MountHolder(nix::unistd::Pid);

impl MountHolder {
    fn start(path: &Path) -> Self {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        // Everything the child needs is made before the fork: it may only make system calls.
        let dir = CString::new(path.as_os_str().as_bytes()).unwrap();
        let root = CString::new("/").unwrap();
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mut points: Vec<&str> = table.lines().filter_map(|l| l.split(' ').nth(4)).collect();
        points.sort_by_key(|p| std::cmp::Reverse(p.len()));
        let points: Vec<CString> = points
            .into_iter()
            .filter(|p| *p != "/")
            .map(|p| CString::new(p).unwrap())
            .collect();
        let (ready_r, ready_w) = nix::unistd::pipe().unwrap();
        // SAFETY: the child makes only async-signal-safe system calls on memory prepared above,
        // and never returns.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => unsafe {
                if libc::unshare(libc::CLONE_NEWNS) != 0 {
                    libc::_exit(1);
                }
                let private = libc::MS_REC | libc::MS_PRIVATE;
                if libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    private,
                    std::ptr::null(),
                ) != 0
                {
                    libc::_exit(2);
                }
                // The fork copied every descriptor this test process had open, other tests'
                // files among them: close them, or their file systems stay busy.
                use std::os::fd::AsRawFd;
                let keep = ready_w.as_raw_fd();
                for fd in 3..4096 {
                    if fd != keep {
                        libc::close(fd);
                    }
                }
                if libc::open(dir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) < 0 {
                    libc::_exit(3);
                }
                for p in &points {
                    libc::umount2(p.as_ptr(), libc::MNT_DETACH);
                }
                libc::write(keep, b"r".as_ptr().cast(), 1);
                loop {
                    libc::pause();
                }
            },
            nix::unistd::ForkResult::Parent { child } => {
                drop(ready_w);
                let mut byte = [0u8; 1];
                let n = nix::unistd::read(&ready_r, &mut byte).unwrap();
                assert_eq!(n, 1, "the mount holder failed to start");
                MountHolder(child)
            }
        }
    }
}

impl Drop for MountHolder {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(self.0, None);
    }
}

/// A process that clones the mount namespace while a volume is staged (a container starting,
/// `unshare -m`) keeps the file system mounted in its copy after the plugin unmounts it, so
/// the loop device cannot be freed yet. Unstage still succeeds, the volume can be staged
/// again (on the same device: one superblock), and it can be deleted; the kernel frees the
/// device when the holder goes.
#[tokio::test]
async fn a_volume_held_by_a_cloned_mount_namespace_is_restaged_and_deleted() {
    let (dir, _host) = setup();
    let mut p = Plugin::start(dir.path(), 1 << 30).await;
    let id = p.create("held", 32 * MI, rw()).await.volume_id;
    let image = dir
        .path()
        .join(format!("data/storage/hostpath/volumes/{id}.img"));
    let staging = p.stage(&id, rw()).await;
    write_synced(&staging.join("data"), b"before");
    let holder = MountHolder::start(&staging);

    std::fs::write(staging.join("data"), b"after").unwrap();
    p.unstage(&id, &staging).await;
    let devices = all_loops(&image);
    assert_eq!(devices.len(), 1, "the holder keeps the device: {devices:?}");
    assert!(staged_loops(&image).is_empty());

    // Staged again: the same device, taken back, with the last write.
    let staging = p.stage(&id, rw()).await;
    assert_eq!(staged_loops(&image), devices);
    assert_eq!(std::fs::read(staging.join("data")).unwrap(), b"after");
    // While staged it is in use.
    assert_eq!(
        p.delete(&id).await.unwrap_err().code(),
        Code::FailedPrecondition
    );
    p.unstage(&id, &staging).await;
    // Unstaged but still held elsewhere: deletable.
    p.delete(&id).await.unwrap();
    assert!(!image.exists());

    drop(holder);
    let device = Path::new(&devices[0]).file_name().unwrap().to_owned();
    let backing = Path::new("/sys/class/block").join(device).join("loop");
    for _ in 0..500 {
        if !backing.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !backing.exists(),
        "the kernel frees the device after the holder"
    );
    p.stop().await;
}

#[tokio::test]
async fn snapshots_and_clones_carry_the_content() {
    let (dir, _host) = setup();
    let mut p = Plugin::start(dir.path(), 1 << 30).await;
    let src = p.create("src", 32 * MI, rw()).await.volume_id;
    let staging = p.stage(&src, rw()).await;
    let target = p.path("pods/src");
    p.publish(&src, &staging, &target, rw(), false)
        .await
        .unwrap();
    write_synced(&target.join("data"), b"version 1");

    // Snapshot while the volume is in use.
    let snap = p
        .controller
        .create_snapshot(CreateSnapshotRequest {
            source_volume_id: src.clone(),
            name: "snap-1".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert!(snap.ready_to_use);
    assert_eq!(snap.size_bytes, 32 * MI);
    std::fs::write(target.join("data"), b"version 2").unwrap();
    p.unpublish(&src, &target).await;
    p.unstage(&src, &staging).await;

    // Restored bigger than the snapshot: the content and the new size.
    let restored = p
        .create_from(
            "restored",
            64 * MI,
            rw(),
            Some(volume_content_source::Type::Snapshot(SnapshotSource {
                snapshot_id: snap.snapshot_id.clone(),
            })),
        )
        .await
        .unwrap();
    assert_eq!(restored.capacity_bytes, 64 * MI);
    // A clone of the source has its latest content.
    let clone = p
        .create_from(
            "clone",
            0,
            rw(),
            Some(volume_content_source::Type::Volume(VolumeSource {
                volume_id: src.clone(),
            })),
        )
        .await
        .unwrap();
    assert_eq!(clone.capacity_bytes, 32 * MI);
    // Smaller than the source is out of range; unknown sources are not found.
    let err = p
        .create_from(
            "too-small",
            16 * MI,
            rw(),
            Some(volume_content_source::Type::Snapshot(SnapshotSource {
                snapshot_id: snap.snapshot_id.clone(),
            })),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange);
    let err = p
        .create_from(
            "lost",
            0,
            rw(),
            Some(volume_content_source::Type::Volume(VolumeSource {
                volume_id: "gone".into(),
            })),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    // Snapshots are independent copies: the source can go first.
    p.delete(&src).await.unwrap();

    for (volume, want) in [
        (&restored.volume_id, "version 1"),
        (&clone.volume_id, "version 2"),
    ] {
        let staging = p.stage(volume, rw()).await;
        let target = p.path(&format!("pods/{volume}"));
        p.publish(volume, &staging, &target, rw(), false)
            .await
            .unwrap();
        assert_eq!(std::fs::read_to_string(target.join("data")).unwrap(), want);
        if volume == &restored.volume_id {
            // Staging grew the file system to the volume's size.
            assert!(fs_bytes(&target) > 50 * MI as u64);
        }
        p.unpublish(volume, &target).await;
        p.unstage(volume, &staging).await;
    }

    let listed = p
        .controller
        .list_snapshots(ListSnapshotsRequest {
            source_volume_id: src.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.entries.len(), 1);
    p.controller
        .delete_snapshot(DeleteSnapshotRequest {
            snapshot_id: snap.snapshot_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    p.stop().await;
}

#[tokio::test]
async fn a_block_volume_is_a_device_on_a_target_file() {
    let (dir, _host) = setup();
    let mut p = Plugin::start(dir.path(), 1 << 30).await;
    let id = p.create("raw", 8 * MI, block_cap()).await.volume_id;
    let staging = p.stage(&id, block_cap()).await;
    // Staging it as a file system would mean formatting the workload's data: refused.
    let err = p
        .node
        .node_stage_volume(NodeStageVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: p.path("staging/as-fs").display().to_string(),
            volume_capability: Some(rw()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let target = p.path("pods/raw/dev");
    p.publish(&id, &staging, &target, block_cap(), false)
        .await
        .unwrap();
    p.publish(&id, &staging, &target, block_cap(), false)
        .await
        .unwrap();
    assert!(
        std::fs::metadata(&target)
            .unwrap()
            .file_type()
            .is_block_device()
    );

    let mut dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&target)
        .unwrap();
    assert_eq!(dev.seek(SeekFrom::End(0)).unwrap(), 8 * MI as u64);
    dev.seek(SeekFrom::Start(4096)).unwrap();
    dev.write_all(b"raw bytes").unwrap();
    dev.sync_all().unwrap();
    drop(dev);
    let usage = p.usage(&id, &target).await;
    assert_eq!(usage[&(Unit::Bytes as i32)].total, 8 * MI);

    p.unpublish(&id, &target).await;
    assert!(!target.exists());
    p.unstage(&id, &staging).await;
    let image = dir
        .path()
        .join(format!("data/storage/hostpath/volumes/{id}.img"));
    assert!(staged_loops(&image).is_empty());
    let mut content = vec![0u8; 9];
    let mut file = std::fs::File::open(&image).unwrap();
    file.seek(SeekFrom::Start(4096)).unwrap();
    file.read_exact(&mut content).unwrap();
    assert_eq!(&content, b"raw bytes");
    p.stop().await;
}

#[tokio::test]
async fn volumes_and_snapshots_survive_a_restart() {
    let (dir, _host) = setup();
    let mut p = Plugin::start(dir.path(), 1 << 30).await;
    let v = p.create("kept", 16 * MI, rw()).await;
    p.controller
        .create_snapshot(CreateSnapshotRequest {
            source_volume_id: v.volume_id.clone(),
            name: "kept-snap".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    p.stop().await;

    let mut p = Plugin::start(dir.path(), 1 << 30).await;
    let again = p.create("kept", 16 * MI, rw()).await;
    assert_eq!(again.volume_id, v.volume_id);
    let snaps = p
        .controller
        .list_snapshots(ListSnapshotsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(snaps.entries.len(), 1);
    let capacity = p
        .controller
        .get_capacity(GetCapacityRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(capacity.available_capacity, (1 << 30) - 16 * MI);
    p.stop().await;
}

#[tokio::test]
async fn registration_answers_get_info_and_stops_when_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let registrar = Registrar {
        registry_dir: dir.path().join("plugins_registry"),
        driver: DRIVER_NAME.into(),
        endpoint: PathBuf::from("/var/lib/kubelet/plugins/hostpath.csi.k1s.io/csi.sock"),
    };
    let socket = registrar.socket_path();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(registrar.run(cancel.clone()));
    // The registrar binds before serving; wait for the file the kubelet would watch for.
    let mut client = loop {
        if socket.exists()
            && let Ok(stream) = tokio::net::UnixStream::connect(&socket).await
        {
            drop(stream);
            break RegistrationClient::new(connect(&socket).await);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    let info = client.get_info(InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.r#type, "CSIPlugin");
    assert_eq!(info.name, DRIVER_NAME);
    assert_eq!(
        info.endpoint,
        "/var/lib/kubelet/plugins/hostpath.csi.k1s.io/csi.sock"
    );
    assert_eq!(info.supported_versions, vec!["1.0.0".to_owned()]);
    client
        .notify_registration_status(RegistrationStatus {
            plugin_registered: true,
            error: String::new(),
        })
        .await
        .unwrap();
    client
        .notify_registration_status(RegistrationStatus {
            plugin_registered: false,
            error: "no such version".into(),
        })
        .await
        .unwrap();
    match run.await.unwrap() {
        Err(RegistrarError::Rejected { message, .. }) => assert_eq!(message, "no such version"),
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert!(!socket.exists(), "the registration socket is removed");
}

/// What the kubelet's watcher saw.
#[derive(Debug, PartialEq)]
enum Seen {
    Registered {
        name: String,
        endpoint: PathBuf,
        versions: Vec<String>,
    },
    Deregistered(String),
}

struct Recorder(tokio::sync::mpsc::UnboundedSender<Seen>);

#[async_trait::async_trait]
impl k1s_csi::watcher::RegistrationHandler for Recorder {
    async fn register(
        &self,
        name: &str,
        endpoint: &Path,
        versions: &[String],
    ) -> Result<(), String> {
        let _ = self.0.send(Seen::Registered {
            name: name.into(),
            endpoint: endpoint.into(),
            versions: versions.to_vec(),
        });
        Ok(())
    }

    async fn deregister(&self, name: &str) {
        let _ = self.0.send(Seen::Deregistered(name.into()));
    }
}

#[tokio::test]
async fn the_kubelets_watcher_finds_the_plugin_and_its_client_talks_to_it() {
    let (dir, _host) = setup();
    let p = Plugin::start(dir.path(), 1 << 30).await;
    let registry = dir.path().join("plugins_registry");
    let registrar = Registrar {
        registry_dir: registry.clone(),
        driver: DRIVER_NAME.into(),
        endpoint: dir.path().join("csi.sock"),
    };
    let stop_registrar = CancellationToken::new();
    let registrar = tokio::spawn(registrar.run(stop_registrar.clone()));
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let stop_watcher = CancellationToken::new();
    let watcher = tokio::spawn(k1s_csi::watcher::run(
        registry,
        Arc::new(Recorder(tx)),
        stop_watcher.clone(),
    ));

    let Some(Seen::Registered {
        name,
        endpoint,
        versions,
    }) = seen.recv().await
    else {
        panic!("expected a registration");
    };
    assert_eq!(name, DRIVER_NAME);
    assert_eq!(versions, vec!["1.0.0".to_owned()]);
    let client = k1s_csi::CsiClient::connect(&endpoint).await.unwrap();
    assert_eq!(client.plugin_info().await.unwrap().name, DRIVER_NAME);
    assert_eq!(client.node_info().await.unwrap().node_id, "node-a");

    // The registrar stops and removes its socket: the watcher deregisters the driver.
    stop_registrar.cancel();
    registrar.await.unwrap().unwrap();
    assert_eq!(
        seen.recv().await,
        Some(Seen::Deregistered(DRIVER_NAME.into()))
    );
    stop_watcher.cancel();
    watcher.await.unwrap();
    p.stop().await;
}
