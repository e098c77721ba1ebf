//! Persistent namespaces held by a bind-mounted nsfs file, as `ip netns add` makes them: the
//! pod sandbox's network and IPC namespaces live as files in the pod's directory, with no
//! process to keep them alive, so they outlive a kubelet restart.

use std::path::Path;

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};

/// Creates a new namespace of `kind` (`CLONE_NEWNET`, `CLONE_NEWIPC`) bound at `path`.
/// Idempotent: an existing binding is kept.
pub fn create(path: &Path, kind: CloneFlags) -> std::io::Result<()> {
    if is_bound(path) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    // The mount point: an empty file, as iproute2 makes it (a leftover from a crash between
    // creating the file and mounting is reused).
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o444)
            .open(path)?;
    }
    let name = match kind {
        CloneFlags::CLONE_NEWNET => "net",
        CloneFlags::CLONE_NEWIPC => "ipc",
        CloneFlags::CLONE_NEWUTS => "uts",
        _ => return Err(std::io::Error::other("unsupported namespace kind")),
    };
    let target = path.to_path_buf();
    // unshare changes the calling thread only: do it on a thread of its own that ends
    // right after, never on a runtime worker.
    std::thread::spawn(move || -> std::io::Result<()> {
        unshare(kind).map_err(std::io::Error::from)?;
        let src = format!("/proc/thread-self/ns/{name}");
        mount(
            Some(src.as_str()),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(std::io::Error::from)
    })
    .join()
    .map_err(|_| std::io::Error::other("namespace thread panicked"))?
}

/// Whether `path` is an nsfs binding.
pub fn is_bound(path: &Path) -> bool {
    nix::sys::statfs::statfs(path)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::NSFS_MAGIC)
}

/// Unbinds and removes the namespace file (the namespace goes when nothing else uses it).
pub fn remove(path: &Path) {
    let _ = umount2(path, MntFlags::MNT_DETACH);
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_bind_and_remove() {
        if !nix::unistd::Uid::effective().is_root() {
            eprintln!("SKIP: creating namespaces needs root");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("net");
        create(&p, CloneFlags::CLONE_NEWNET).unwrap();
        assert!(is_bound(&p));
        create(&p, CloneFlags::CLONE_NEWNET).unwrap();
        let mine = std::fs::metadata("/proc/self/ns/net").unwrap();
        let theirs = std::fs::metadata(&p).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_ne!(mine.ino(), theirs.ino());
        remove(&p);
        assert!(!p.exists());
    }
}
