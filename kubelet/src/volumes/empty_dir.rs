//! The emptyDir volume plugin (`kubernetes.io~empty-dir`): a directory under the pod's
//! volumes directory, mode 0777 as upstream; with `medium: Memory` a tmpfs mounted on it
//! (`size=` the sizeLimit when one is set, else the kernel's default of half the RAM).
//!
//! Also the wrapper of secret and projected volumes (a tmpfs each, so that their contents
//! never reach a disk), and of configMap and downwardAPI volumes (a plain directory).
//!
//! Gap: the sizeLimit of a disk-backed emptyDir is only reported ([`super::PodVolume::size_limit`]);
//! eviction on exceeding it comes with the eviction manager.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use k1s_api::quantity::Quantity;

use super::{FsError, mounts};

/// Why an emptyDir (or the directory of another plugin) could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EmptyDirError {
    #[error("{} exists and is not a directory", .0.display())]
    NotADirectory(std::path::PathBuf),
    #[error("emptyDir medium {0} is not supported by k1s")]
    UnsupportedMedium(String),
    #[error("unknown storage medium {0:?}")]
    UnknownMedium(String),
    #[error("invalid sizeLimit {quantity:?}: {source}")]
    SizeLimit {
        quantity: String,
        source: k1s_api::quantity::QuantityError,
    },
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error(transparent)]
    Mount(#[from] mounts::MountError),
}

/// Creates `dir` (and its parents) if missing; the volume directory itself gets `mode`
/// regardless of the umask. Returns whether it was created.
pub(crate) fn ensure_dir(dir: &Path, mode: u32) -> Result<bool, EmptyDirError> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => return Ok(false),
        Ok(_) => return Err(EmptyDirError::NotADirectory(dir.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(FsError::new("reading", dir, e).into()),
    }
    std::fs::create_dir_all(dir).map_err(FsError::at("creating", dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
        .map_err(FsError::at("chmod", dir))?;
    Ok(true)
}

/// The storage medium of an emptyDir.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Medium {
    Disk,
    Memory,
}

/// Parses `medium`; HugePages and unknown media are refused.
pub(crate) fn medium(m: Option<&str>) -> Result<Medium, EmptyDirError> {
    match m.unwrap_or_default() {
        "" => Ok(Medium::Disk),
        "Memory" => Ok(Medium::Memory),
        h if h.starts_with("HugePages") => Err(EmptyDirError::UnsupportedMedium(h.to_string())),
        other => Err(EmptyDirError::UnknownMedium(other.to_string())),
    }
}

/// A `sizeLimit` in bytes; None when unset or not positive.
pub(crate) fn size_limit(q: Option<&str>) -> Result<Option<i64>, EmptyDirError> {
    let Some(q) = q.filter(|q| !q.is_empty()) else {
        return Ok(None);
    };
    let v = Quantity::parse(q)
        .map_err(|source| EmptyDirError::SizeLimit {
            quantity: q.to_string(),
            source,
        })?
        .value();
    Ok((v > 0).then_some(v))
}

/// Sets up an emptyDir at `dir`. `gid`: the pod's fsGroup, applied to the new directory
/// (group, setgid, `g+rwx`) as upstream's `SetVolumeOwnership`.
pub(crate) fn setup(
    dir: &Path,
    medium: Medium,
    size: Option<i64>,
    gid: Option<u32>,
) -> Result<(), EmptyDirError> {
    let created = ensure_dir(dir, 0o777)?;
    let mut fresh = created;
    if medium == Medium::Memory {
        fresh |= mounts::ensure_tmpfs(dir, size)?;
    }
    if fresh && let Some(g) = gid {
        std::os::unix::fs::lchown(dir, None, Some(g)).map_err(FsError::at("chown", dir))?;
        let mode = std::fs::symlink_metadata(dir)
            .map_err(FsError::at("reading", dir))?
            .permissions()
            .mode();
        std::fs::set_permissions(
            dir,
            std::fs::Permissions::from_mode((mode & 0o7777) | 0o2770),
        )
        .map_err(FsError::at("chmod", dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_and_limits() {
        assert_eq!(medium(None).unwrap(), Medium::Disk);
        assert_eq!(medium(Some("Memory")).unwrap(), Medium::Memory);
        let e = medium(Some("HugePages-2Mi")).unwrap_err();
        assert!(matches!(e, EmptyDirError::UnsupportedMedium(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "emptyDir medium HugePages-2Mi is not supported by k1s"
        );
        let e = medium(Some("Tape")).unwrap_err();
        assert_eq!(e.to_string(), "unknown storage medium \"Tape\"");
        assert_eq!(size_limit(Some("1Mi")).unwrap(), Some(1 << 20));
        assert_eq!(size_limit(Some("0")).unwrap(), None);
        assert_eq!(size_limit(None).unwrap(), None);
        let e = size_limit(Some("lots")).unwrap_err();
        assert!(matches!(e, EmptyDirError::SizeLimit { .. }), "{e:?}");
        assert!(
            e.to_string().starts_with("invalid sizeLimit \"lots\": "),
            "{e}"
        );
    }

    #[test]
    fn disk_dir_is_0777_and_idempotent() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("a/b");
        setup(&dir, Medium::Disk, None, None).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o777);
        std::fs::write(dir.join("f"), "x").unwrap();
        setup(&dir, Medium::Disk, None, None).unwrap();
        assert!(dir.join("f").exists());
    }
}
