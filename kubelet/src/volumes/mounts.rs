//! The host mounts the volume manager makes and inspects: tmpfs mounts for memory-backed
//! volumes (emptyDir `medium: Memory`, secrets, projected volumes), and the parser of
//! `/proc/self/mountinfo` that tells whether a directory is a mount point, used before any
//! mount (setup is idempotent) and before any removal (teardown never deletes through a mount).

use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags, mount, umount2};

/// A tmpfs mount or an unmount that failed.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// `/proc/self/mountinfo` (or the path to look up in it) could not be read.
    #[error("reading mounts of {}: {source}", path.display())]
    ReadMounts {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("mount -t tmpfs on {}: {source}", path.display())]
    Tmpfs { path: PathBuf, source: Errno },
    #[error("umount {}: {source}", path.display())]
    Unmount { path: PathBuf, source: Errno },
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MountEntry {
    pub mount_point: PathBuf,
    pub fs_type: String,
}

/// Parses mountinfo text; malformed lines are skipped.
pub(crate) fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let mount_point = pre.split(' ').nth(4)?;
            let fs_type = post.split(' ').next()?;
            Some(MountEntry {
                mount_point: PathBuf::from(crate::mountinfo::unescape(mount_point)),
                fs_type: fs_type.to_string(),
            })
        })
        .collect()
}

/// The mounts of this process's mount namespace, in mount order.
pub(crate) fn mounts() -> std::io::Result<Vec<MountEntry>> {
    Ok(parse_mountinfo(&std::fs::read_to_string(
        "/proc/self/mountinfo",
    )?))
}

/// The file system type mounted on top at `path` (canonicalized), or None if `path` is not a
/// mount point.
pub(crate) fn mounted_fs_type(path: &Path) -> std::io::Result<Option<String>> {
    let real = std::fs::canonicalize(path)?;
    Ok(mounts()?
        .into_iter()
        .rev()
        .find(|m| m.mount_point == real)
        .map(|m| m.fs_type))
}

/// Every mount at or below `dir` (canonicalized), deepest first.
pub(crate) fn mounts_under(dir: &Path) -> std::io::Result<Vec<MountEntry>> {
    let real = std::fs::canonicalize(dir)?;
    let mut found: Vec<MountEntry> = mounts()?
        .into_iter()
        .filter(|m| m.mount_point.starts_with(&real))
        .collect();
    // Later mounts may sit on top of earlier ones: unmount in reverse mount order, deepest
    // paths first.
    found.reverse();
    found.sort_by_key(|m| std::cmp::Reverse(m.mount_point.components().count()));
    Ok(found)
}

/// Mounts a tmpfs at `dir` unless one already is there. `size` in bytes, if any.
pub(crate) fn ensure_tmpfs(dir: &Path, size: Option<i64>) -> Result<bool, MountError> {
    let current = mounted_fs_type(dir).map_err(|source| MountError::ReadMounts {
        path: dir.to_path_buf(),
        source,
    })?;
    if current.as_deref() == Some("tmpfs") {
        return Ok(false);
    }
    let data = size.map(|s| format!("size={s}"));
    mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        data.as_deref(),
    )
    .map_err(|source| MountError::Tmpfs {
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(true)
}

/// Lazily unmounts `path` (`umount2(MNT_DETACH)`, as upstream's kubelet does).
pub(crate) fn unmount(path: &Path) -> Result<(), MountError> {
    umount2(path, MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW).map_err(|source| {
        MountError::Unmount {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Whether this process may mount (tests skip tmpfs checks without it).
#[cfg(test)]
pub(crate) fn can_mount() -> bool {
    nix::unistd::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_and_escapes() {
        let text = "36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw\n\
                    37 36 0:40 / /var/lib/k1s/pods/u/volumes/x rw shared:2 - tmpfs tmpfs rw,size=1024k\n\
                    garbage\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].mount_point, PathBuf::from("/mnt/with space"));
        assert_eq!(m[0].fs_type, "ext3");
        assert_eq!(m[1].fs_type, "tmpfs");
    }
}
