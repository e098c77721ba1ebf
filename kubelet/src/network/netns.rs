//! Persistent network namespaces bound to files, the way `ip netns add` makes them, and
//! running code inside one.
//!
//! This file owns every `unshare`/`setns`/`mount` the pod network does. The rule it keeps:
//! a thread that switches network namespace is always a fresh `std::thread` made for that one
//! job and joined right after, never a tokio worker or blocking-pool thread (those are reused,
//! and a task scheduled there later would silently run in a pod's namespace).
//!
//! * [`create_netns`]: a dedicated thread does `unshare(CLONE_NEWNET)` and bind-mounts its
//!   `/proc/self/task/<tid>/ns/net` onto an empty file at the given path; the namespace then
//!   lives as long as the bind mount, independent of any process.
//! * [`remove_netns`]: `umount2(MNT_DETACH)` and unlink. The namespace itself goes away once
//!   the last process in it exits.
//! * [`prepare_netns_dir`]: makes the dir holding the namespace files a shared mount point
//!   (bind-mounting it onto itself first if it is not a mount point), as iproute2 does for
//!   `/run/netns`, so that unmounting a namespace file also unmounts the copies that mount
//!   namespaces cloned later (containers) hold, instead of keeping the namespace alive.
//! * [`run_in_netns`]: runs a closure on a dedicated thread switched into a namespace.

use std::fs;
use std::path::{Component, Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;

use super::NetworkError;

fn os(context: String) -> impl FnOnce(std::io::Error) -> NetworkError {
    move |source| NetworkError::Os { context, source }
}

fn errno(context: String) -> impl FnOnce(nix::errno::Errno) -> NetworkError {
    move |e| NetworkError::Os {
        context,
        source: std::io::Error::from(e),
    }
}

/// Checks that `path` can name a namespace file: absolute, ends in a file name, no `..`.
pub fn check_netns_path(path: &Path) -> Result<(), NetworkError> {
    let bad = |why: &str| {
        Err(NetworkError::Invalid(format!(
            "network namespace path {}: {why}",
            path.display()
        )))
    };
    if !path.is_absolute() {
        return bad("must be absolute");
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return bad("must not contain ..");
    }
    match path.components().next_back() {
        Some(Component::Normal(_)) => Ok(()),
        _ => bad("must end in a file name"),
    }
}

/// The namespace file of a pod under `dir`: `dir/<pod_uid>`. The UID must be a single
/// path component of letters, digits, `-`, `_` and `.` (Kubernetes UIDs are).
pub fn pod_netns_path(dir: &Path, pod_uid: &str) -> Result<PathBuf, NetworkError> {
    let ok = !pod_uid.is_empty()
        && pod_uid.len() <= 255
        && pod_uid != "."
        && pod_uid != ".."
        && pod_uid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(NetworkError::Invalid(format!(
            "pod UID {pod_uid:?} cannot name a network namespace file"
        )));
    }
    let path = dir.join(pod_uid);
    check_netns_path(&path)?;
    Ok(path)
}

/// Whether `path` is a mounted namespace file (nsfs).
pub fn is_netns_mount(path: &Path) -> bool {
    crate::runtime::nsfile::is_bound(path)
}

/// Runs `f` on a fresh OS thread that first joins the network namespace at `netns`, and
/// joins that thread. `f` runs with no tokio runtime; build a current-thread one inside if
/// needed. Sockets `f` opens belong to the namespace for their whole life.
pub fn run_in_netns<T, F>(netns: &Path, f: F) -> Result<T, NetworkError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let file = fs::File::open(netns).map_err(os(format!(
        "opening the network namespace {}",
        netns.display()
    )))?;
    let shown = netns.display().to_string();
    let thread = std::thread::Builder::new()
        .name("k1s-netns".into())
        .spawn(move || -> Result<T, NetworkError> {
            nix::sched::setns(&file, CloneFlags::CLONE_NEWNET)
                .map_err(errno(format!("entering the network namespace {shown}")))?;
            drop(file);
            Ok(f())
        })
        .map_err(os("spawning a network namespace thread".into()))?;
    thread.join().map_err(|_| {
        NetworkError::Netlink(format!(
            "the thread working in network namespace {} panicked",
            netns.display()
        ))
    })?
}

/// Creates a persistent network namespace bound at `path`, like `ip netns add` does with
/// `/run/netns/<name>` (see [`crate::runtime::nsfile::create`]). Idempotent. Blocking (spawns
/// and joins one thread).
pub fn create_netns(path: &Path) -> Result<(), NetworkError> {
    check_netns_path(path)?;
    crate::runtime::nsfile::create(path, CloneFlags::CLONE_NEWNET).map_err(os(format!(
        "creating the network namespace {}",
        path.display()
    )))
}

/// Removes a namespace made by [`create_netns`]: unmounts (lazily) and unlinks `path`.
/// Missing or never-mounted paths are fine. Returns what went wrong, if anything.
pub fn try_remove_netns(path: &Path) -> Result<(), NetworkError> {
    check_netns_path(path)?;
    match nix::mount::umount2(path, MntFlags::MNT_DETACH) {
        // EINVAL: not a mount point; ENOENT: gone already.
        Ok(()) | Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOENT) => {}
        Err(e) => return Err(errno(format!("unmounting {}", path.display()))(e)),
    }
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(os(format!("removing {}", path.display()))(e)),
    }
}

/// [`try_remove_netns`], logging a failure instead of returning it (teardown paths).
pub fn remove_netns(path: &Path) {
    if let Err(e) = try_remove_netns(path) {
        tracing::warn!(path = %path.display(), error = %e, "removing a network namespace");
    }
}

/// Makes `dir` (created if missing) a mount point with shared propagation, like iproute2
/// does for `/run/netns`: `mount --make-rshared dir`, and if `dir` is not a mount point yet,
/// `mount --rbind dir dir` first. Call once before creating namespaces under `dir`; undo
/// with `umount2(dir, MNT_DETACH)` ([`unprepare_netns_dir`]).
pub fn prepare_netns_dir(dir: &Path) -> Result<(), NetworkError> {
    check_netns_path(dir)?;
    fs::create_dir_all(dir).map_err(os(format!("creating {}", dir.display())))?;
    let make_shared = || {
        nix::mount::mount(
            None::<&str>,
            dir,
            None::<&str>,
            MsFlags::MS_SHARED | MsFlags::MS_REC,
            None::<&str>,
        )
    };
    match make_shared() {
        Ok(()) => return Ok(()),
        // EINVAL: not a mount point.
        Err(nix::errno::Errno::EINVAL) => {}
        Err(e) => return Err(errno(format!("making {} shared", dir.display()))(e)),
    }
    nix::mount::mount(
        Some(dir),
        dir,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(errno(format!(
        "bind-mounting {} onto itself",
        dir.display()
    )))?;
    make_shared().map_err(errno(format!("making {} shared", dir.display())))
}

/// Undoes [`prepare_netns_dir`]: unmounts `dir` lazily (a dir that is not a mount point is
/// fine).
pub fn unprepare_netns_dir(dir: &Path) -> Result<(), NetworkError> {
    match nix::mount::umount2(dir, MntFlags::MNT_DETACH) {
        Ok(()) | Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOENT) => Ok(()),
        Err(e) => Err(errno(format!("unmounting {}", dir.display()))(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netns_paths() {
        let cases = [
            ("/run/k1s/netns/abc", true),
            ("/a", true),
            ("relative/ns", false),
            ("ns", false),
            ("/", false),
            ("/run/../etc/passwd", false),
            ("/run/netns/..", false),
            ("/run/netns/.", true), // normalised by Path to /run/netns
            ("", false),
        ];
        for (path, ok) in cases {
            assert_eq!(
                check_netns_path(Path::new(path)).is_ok(),
                ok,
                "{path:?}: {:?}",
                check_netns_path(Path::new(path))
            );
        }
    }

    #[test]
    fn pod_paths() {
        let dir = Path::new("/run/k1s/netns");
        let cases: [(&str, Option<&str>); 9] = [
            (
                "0b6c6b0e-4f6a-4a43-9a8c-1d2e3f405162",
                Some("/run/k1s/netns/0b6c6b0e-4f6a-4a43-9a8c-1d2e3f405162"),
            ),
            ("pod_1.x", Some("/run/k1s/netns/pod_1.x")),
            ("", None),
            (".", None),
            ("..", None),
            ("a/b", None),
            ("../../etc", None),
            ("a b", None),
            ("ü", None),
        ];
        for (uid, want) in cases {
            let got = pod_netns_path(dir, uid).ok();
            assert_eq!(got.as_deref(), want.map(Path::new), "{uid:?}");
        }
        assert!(pod_netns_path(Path::new("rel"), "abc").is_err());
    }

    #[test]
    fn removing_missing_or_plain_files_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        try_remove_netns(&missing).unwrap();
        remove_netns(&missing);
        let plain = dir.path().join("plain");
        fs::write(&plain, b"").unwrap();
        assert!(!is_netns_mount(&plain));
        try_remove_netns(&plain).unwrap();
        assert!(!plain.exists());
        assert!(try_remove_netns(Path::new("relative")).is_err());
    }

    #[test]
    fn bad_paths_are_refused_before_touching_anything() {
        assert!(matches!(
            create_netns(Path::new("relative/ns")),
            Err(NetworkError::Invalid(_))
        ));
        assert!(matches!(
            run_in_netns(Path::new("/nonexistent/k1s/ns"), || ()),
            Err(NetworkError::Os { .. })
        ));
    }

    #[test]
    fn run_in_a_plain_file_fails_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        fs::write(&plain, b"").unwrap();
        // setns on a file that is not a namespace: EINVAL, reported, no panic.
        let err = run_in_netns(&plain, || ()).unwrap_err();
        assert!(matches!(err, NetworkError::Os { .. }), "{err}");
    }
}
