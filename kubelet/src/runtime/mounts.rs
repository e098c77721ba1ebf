//! The container's filesystem, built inside its own mount namespace before `pivot_root`:
//! the overlayfs rootfs, /proc, /dev (device nodes, pts, shm, mqueue), /sys, the pod's volume
//! mounts, then the masked and read-only paths as runc applies them.
//!
//! Mount destinations come from the image's filesystem, which may hold symlinks pointing
//! anywhere; every destination is resolved inside the rootfs ([`resolve_in_root`]) so that a
//! symlink can never make a mount land on the host.
//!
//! A step that fails is a [`MountSetupError`]; the init reports it as the start error.

use std::path::{Component, Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::stat::{Mode, SFlag, makedev, mknod};

use super::spec::{ContainerSpec, Mount};

/// Paths hidden from unprivileged containers (runc's and containerd's defaults).
pub const MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// Paths read-only in unprivileged containers.
pub const READONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// A step of [`setup`] that failed.
#[derive(Debug, thiserror::Error)]
pub enum MountSetupError {
    /// `what`: the filesystem type, else the source, else `?`.
    #[error("mounting {what} on {}: {source}", target.display())]
    Mount {
        what: String,
        target: PathBuf,
        #[source]
        source: nix::Error,
    },
    /// A directory, or an empty file to mount a file onto.
    #[error("creating {}: {source}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("mknod {}: {source}", path.display())]
    Mknod {
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error("chmod {}: {source}", path.display())]
    Chmod {
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error("chown {}: {source}", path.display())]
    Chown {
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error("the image has no layers")]
    NoLayers,
    #[error("mount destination {0:?} is not absolute")]
    RelativeDestination(String),
    #[error("chdir {}: {source}", path.display())]
    Chdir {
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error("pivot_root: {0}")]
    PivotRoot(#[source] nix::Error),
    #[error("detaching the old root: {0}")]
    DetachOldRoot(#[source] nix::Error),
}

type R<T> = Result<T, MountSetupError>;

/// Resolves `path` (absolute, as seen inside the container) against `root`, following
/// symlinks as the container would see them: absolute link targets restart at `root`, and
/// `..` never climbs above it.
pub fn resolve_in_root(root: &Path, path: &str) -> PathBuf {
    let mut parts: Vec<std::ffi::OsString> = Vec::new();
    let mut pending: Vec<std::ffi::OsString> = Path::new(path)
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut hops = 0;
    while let Some(next) = pending.pop() {
        if next == ".." {
            parts.pop();
            continue;
        }
        let mut candidate = root.to_path_buf();
        candidate.extend(&parts);
        candidate.push(&next);
        match std::fs::read_link(&candidate) {
            Ok(target) if hops < 40 => {
                hops += 1;
                if target.is_absolute() {
                    parts.clear();
                }
                for c in target.components().rev() {
                    match c {
                        Component::Normal(n) => pending.push(n.to_os_string()),
                        Component::ParentDir => pending.push("..".into()),
                        _ => {}
                    }
                }
            }
            _ => parts.push(next),
        }
    }
    let mut out = root.to_path_buf();
    out.extend(parts);
    out
}

fn mnt(
    source: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: MsFlags,
    data: Option<&str>,
) -> R<()> {
    mount(source, target, fstype, flags, data).map_err(|e| MountSetupError::Mount {
        what: fstype.or(source).unwrap_or("?").to_string(),
        target: target.to_path_buf(),
        source: e,
    })
}

fn create_error(p: &Path) -> impl FnOnce(std::io::Error) -> MountSetupError {
    let path = p.to_path_buf();
    move |source| MountSetupError::Create { path, source }
}

fn mkdir_p(p: &Path) -> R<()> {
    std::fs::create_dir_all(p).map_err(create_error(p))
}

/// Creates an empty file (and its parents) to mount a file onto.
fn touch(p: &Path) -> R<()> {
    if let Some(parent) = p.parent() {
        mkdir_p(parent)?;
    }
    if !p.exists() {
        std::fs::File::create(p).map_err(create_error(p))?;
    }
    Ok(())
}

/// Creates device node `d` in the rootfs, with the host node's numbers, mode and owner.
fn device_node(root: &Path, d: &super::spec::DeviceNode) -> R<()> {
    let p = resolve_in_root(root, &d.path);
    if let Some(parent) = p.parent() {
        mkdir_p(parent)?;
    }
    let kind = if d.block {
        SFlag::S_IFBLK
    } else {
        SFlag::S_IFCHR
    };
    let mode = Mode::from_bits_truncate(d.mode);
    match mknod(&p, kind, mode, makedev(d.major, d.minor)) {
        Ok(()) => {}
        // Listed twice (two plugins, or one device under one path): the first one stays.
        Err(nix::errno::Errno::EEXIST) => return Ok(()),
        Err(source) => return Err(MountSetupError::Mknod { path: p, source }),
    }
    nix::sys::stat::fchmodat(
        nix::fcntl::AT_FDCWD,
        &p,
        mode,
        nix::sys::stat::FchmodatFlags::FollowSymlink,
    )
    .map_err(|source| MountSetupError::Chmod {
        path: p.clone(),
        source,
    })?;
    nix::unistd::chown(
        &p,
        Some(nix::unistd::Uid::from_raw(d.uid)),
        Some(nix::unistd::Gid::from_raw(d.gid)),
    )
    .map_err(|source| MountSetupError::Chown { path: p, source })
}

/// Assembles the rootfs and everything under it, then pivots into it. On return the process
/// runs in the container's filesystem with `/` as the rootfs.
pub fn setup(spec: &ContainerSpec) -> R<()> {
    let nodev_noexec = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC | MsFlags::MS_NODEV;
    // Nothing mounted from here on propagates back to the host.
    mnt(
        None,
        Path::new("/"),
        None,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None,
    )?;
    let root = &spec.rootfs;
    mkdir_p(root)?;
    mkdir_p(&spec.upper)?;
    mkdir_p(&spec.work)?;
    if spec.layers.is_empty() {
        return Err(MountSetupError::NoLayers);
    }
    let lower: Vec<String> = spec
        .layers
        .iter()
        .rev()
        .map(|l| l.display().to_string())
        .collect();
    let data = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.join(":"),
        spec.upper.display(),
        spec.work.display()
    );
    mnt(
        Some("overlay"),
        root,
        Some("overlay"),
        MsFlags::empty(),
        Some(&data),
    )?;

    let proc_ = resolve_in_root(root, "/proc");
    mkdir_p(&proc_)?;
    mnt(Some("proc"), &proc_, Some("proc"), nodev_noexec, None)?;

    let dev = resolve_in_root(root, "/dev");
    mkdir_p(&dev)?;
    if spec.privileged {
        mnt(
            Some("/dev"),
            &dev,
            None,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None,
        )?;
    } else {
        mnt(
            Some("tmpfs"),
            &dev,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_STRICTATIME,
            Some("mode=755,size=65536k"),
        )?;
        for (name, major, minor) in [
            ("null", 1, 3),
            ("zero", 1, 5),
            ("full", 1, 7),
            ("random", 1, 8),
            ("urandom", 1, 9),
            ("tty", 5, 0),
        ] {
            let p = dev.join(name);
            mknod(
                &p,
                SFlag::S_IFCHR,
                Mode::from_bits_truncate(0o666),
                makedev(major, minor),
            )
            .map_err(|source| MountSetupError::Mknod {
                path: p.clone(),
                source,
            })?;
            // mknod honours the umask; the nodes must be world-usable.
            let _ = nix::sys::stat::fchmodat(
                nix::fcntl::AT_FDCWD,
                &p,
                Mode::from_bits_truncate(0o666),
                nix::sys::stat::FchmodatFlags::FollowSymlink,
            );
        }
        let pts = dev.join("pts");
        mkdir_p(&pts)?;
        mnt(
            Some("devpts"),
            &pts,
            Some("devpts"),
            MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            Some("newinstance,ptmxmode=0666,mode=0620,gid=5"),
        )?;
        for (link, target) in [
            ("ptmx", "pts/ptmx"),
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
            ("core", "/proc/kcore"),
        ] {
            let _ = std::os::unix::fs::symlink(target, dev.join(link));
        }
        // Device plugins' devices. (A privileged container has the host's /dev already.)
        for d in &spec.devices {
            device_node(root, d)?;
        }
    }
    let shm = dev.join("shm");
    mkdir_p(&shm)?;
    mnt(
        Some("shm"),
        &shm,
        Some("tmpfs"),
        nodev_noexec,
        Some("mode=1777,size=65536k"),
    )?;
    let mqueue = dev.join("mqueue");
    mkdir_p(&mqueue)?;
    // An mqueue mount needs an IPC namespace of the container's own; skip it quietly if the
    // pod shares the host's.
    let _ = mnt(Some("mqueue"), &mqueue, Some("mqueue"), nodev_noexec, None);

    let sys = resolve_in_root(root, "/sys");
    mkdir_p(&sys)?;
    let sys_flags = if spec.privileged {
        nodev_noexec
    } else {
        nodev_noexec | MsFlags::MS_RDONLY
    };
    if mnt(Some("sysfs"), &sys, Some("sysfs"), sys_flags, None).is_err() {
        // sysfs cannot be mounted from the host's network namespace in some setups: bind it.
        mnt(
            Some("/sys"),
            &sys,
            None,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None,
        )?;
        if !spec.privileged {
            remount_ro(&sys)?;
        }
    }

    for m in &spec.mounts {
        apply_mount(root, m)?;
    }

    pivot(root)?;

    if !spec.privileged {
        for p in MASKED_PATHS {
            mask(Path::new(p))?;
        }
        for p in READONLY_PATHS {
            let p = Path::new(p);
            if p.exists() {
                mnt(
                    Some(&p.display().to_string()),
                    p,
                    None,
                    MsFlags::MS_BIND | MsFlags::MS_REC,
                    None,
                )?;
                remount_ro(p)?;
            }
        }
    }
    if spec.readonly_rootfs {
        mnt(
            None,
            Path::new("/"),
            None,
            MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY,
            None,
        )?;
    }
    Ok(())
}

fn remount_ro(p: &Path) -> R<()> {
    mnt(
        None,
        p,
        None,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        None,
    )
    .or_else(|_| {
        mnt(
            None,
            p,
            None,
            MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY,
            None,
        )
    })
}

fn apply_mount(root: &Path, m: &Mount) -> R<()> {
    if !m.destination.starts_with('/') {
        return Err(MountSetupError::RelativeDestination(m.destination.clone()));
    }
    let target = resolve_in_root(root, &m.destination);
    if m.file {
        touch(&target)?;
    } else {
        mkdir_p(&target)?;
    }
    if m.kind == "bind" {
        let src = m.source.display().to_string();
        mnt(
            Some(&src),
            &target,
            None,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None,
        )?;
        if m.readonly {
            remount_ro(&target)?;
        }
    } else {
        let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
        if m.readonly {
            flags |= MsFlags::MS_RDONLY;
        }
        let data = (!m.data.is_empty()).then_some(m.data.as_str());
        mnt(Some(&m.kind), &target, Some(&m.kind), flags, data)?;
    }
    Ok(())
}

/// Makes `root` the process's `/` and detaches the old root (runc's `pivot_root(".", ".")`).
fn pivot(root: &Path) -> R<()> {
    let chdir = |path: &Path| {
        nix::unistd::chdir(path).map_err(|source| MountSetupError::Chdir {
            path: path.to_path_buf(),
            source,
        })
    };
    chdir(root)?;
    nix::unistd::pivot_root(".", ".").map_err(MountSetupError::PivotRoot)?;
    umount2(".", MntFlags::MNT_DETACH).map_err(MountSetupError::DetachOldRoot)?;
    chdir(Path::new("/"))
}

fn mask(p: &Path) -> R<()> {
    match std::fs::metadata(p) {
        Err(_) => Ok(()),
        Ok(md) if md.is_dir() => mnt(Some("tmpfs"), p, Some("tmpfs"), MsFlags::MS_RDONLY, None),
        Ok(_) => mnt(Some("/dev/null"), p, None, MsFlags::MS_BIND, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_resolve_inside_the_root() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("real/dir")).unwrap();
        std::os::unix::fs::symlink("/real", root.join("abs")).unwrap();
        std::os::unix::fs::symlink("../../../../etc", root.join("real/escape")).unwrap();
        std::os::unix::fs::symlink("dir", root.join("real/rel")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        let cases = [
            ("/abs/dir", root.join("real/dir")),
            ("/real/escape/passwd", root.join("etc/passwd")),
            ("/real/rel/x", root.join("real/dir/x")),
            ("/../../x", root.join("x")),
            ("/new/path", root.join("new/path")),
            ("/loop", root.join("loop")),
        ];
        for (input, want) in cases {
            assert_eq!(resolve_in_root(root, input), want, "{input}");
        }
    }

    #[test]
    fn error_texts() {
        let e = apply_mount(
            Path::new("/nonexistent-root"),
            &Mount::bind("/host/data", "data", false),
        )
        .unwrap_err();
        assert!(
            matches!(e, MountSetupError::RelativeDestination(_)),
            "{e:?}"
        );
        assert_eq!(e.to_string(), r#"mount destination "data" is not absolute"#);
        let e = MountSetupError::Mount {
            what: "tmpfs".into(),
            target: "/r/dev".into(),
            source: nix::Error::EPERM,
        };
        assert_eq!(
            e.to_string(),
            format!("mounting tmpfs on /r/dev: {}", nix::Error::EPERM)
        );
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, "").unwrap();
        let e = mkdir_p(&file.join("sub")).unwrap_err();
        assert!(matches!(e, MountSetupError::Create { .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with(&format!("creating {}: ", file.join("sub").display())),
            "{e}"
        );
    }
}
