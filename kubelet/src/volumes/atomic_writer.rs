//! Upstream's atomic writer (`pkg/volume/util/atomic_writer.go`): how configMap, secret,
//! downwardAPI and projected volumes are written so that a container never sees a half-updated
//! set of files.
//!
//! Layout of a volume directory:
//!
//! ```text
//! ..2026_11_22_10_00_00.123456789/   the payload, written once, never changed
//! ..data -> ..2026_11_22_10_00_00.123456789
//! key -> ..data/key                  one symlink per top-level path of the payload
//! ```
//!
//! An update writes a new timestamped directory, points `..data_tmp` at it and renames that
//! over `..data` (one atomic `rename(2)`), then removes the top-level symlinks of paths that
//! left the payload, and the old directory. Nothing is written when the payload did not change.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path};

use super::FsError;

/// Why a payload could not be written; the path checks are upstream's `validatePath`.
#[derive(Debug, thiserror::Error)]
pub enum AtomicWriteError {
    #[error("invalid path: must not be empty")]
    EmptyPath,
    #[error("invalid path: must be less than or equal to 4096 characters: {0:?}")]
    PathTooLong(String),
    #[error("invalid path: must be relative path: {0}")]
    AbsolutePath(String),
    #[error("invalid path: a component exceeds 255 characters: {0}")]
    ComponentTooLong(String),
    #[error("invalid path: must not contain '..': {0}")]
    ParentDir(String),
    #[error("invalid path: must not start with '..': {0}")]
    DotDotPrefix(String),
    /// Not UTF-8, or nothing left once cleaned (`.`).
    #[error("invalid path: {0:?}")]
    InvalidPath(String),
    /// A root or prefix component.
    #[error("invalid path: {0}")]
    BadComponent(String),
    #[error("invalid payload: {0} is both a file and a directory")]
    FileAndDirectory(String),
    #[error(transparent)]
    Fs(#[from] FsError),
}

const DATA: &str = "..data";
const DATA_TMP: &str = "..data_tmp";

/// One file of a payload.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct FileProjection {
    pub data: Vec<u8>,
    /// Permission bits (`0644`).
    pub mode: u32,
}

// Payloads hold secrets: never print their contents.
impl std::fmt::Debug for FileProjection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileProjection")
            .field("len", &self.data.len())
            .field("mode", &format_args!("{:o}", self.mode))
            .finish()
    }
}

/// Relative path (as written in the pod spec) → file.
pub(crate) type Payload = BTreeMap<String, FileProjection>;

/// Checks a payload path as upstream's `validatePath` does and returns its clean form.
pub(crate) fn clean_path(p: &str) -> Result<String, AtomicWriteError> {
    if p.is_empty() {
        return Err(AtomicWriteError::EmptyPath);
    }
    if p.len() > 4096 {
        return Err(AtomicWriteError::PathTooLong(p.to_string()));
    }
    let path = Path::new(p);
    if path.is_absolute() {
        return Err(AtomicWriteError::AbsolutePath(p.to_string()));
    }
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => {
                let n = n
                    .to_str()
                    .ok_or_else(|| AtomicWriteError::InvalidPath(p.to_string()))?;
                if n.len() > 255 {
                    return Err(AtomicWriteError::ComponentTooLong(p.to_string()));
                }
                parts.push(n);
            }
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(AtomicWriteError::ParentDir(p.to_string()));
            }
            _ => return Err(AtomicWriteError::BadComponent(p.to_string())),
        }
    }
    if parts.is_empty() {
        return Err(AtomicWriteError::InvalidPath(p.to_string()));
    }
    if parts[0].starts_with("..") {
        return Err(AtomicWriteError::DotDotPrefix(p.to_string()));
    }
    Ok(parts.join("/"))
}

/// The files under `dir`, relative, with their contents and permission bits. Symlinks inside
/// a timestamped directory are never written by us and are reported as unreadable.
fn read_tree(dir: &Path) -> std::io::Result<BTreeMap<String, FileProjection>> {
    fn walk(
        base: &Path,
        rel: &str,
        out: &mut BTreeMap<String, FileProjection>,
    ) -> std::io::Result<()> {
        let here = if rel.is_empty() {
            base.to_path_buf()
        } else {
            base.join(rel)
        };
        for entry in std::fs::read_dir(&here)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let meta = std::fs::symlink_metadata(entry.path())?;
            if meta.is_dir() {
                walk(base, &child, out)?;
            } else if meta.is_file() {
                out.insert(
                    child,
                    FileProjection {
                        data: std::fs::read(entry.path())?,
                        mode: meta.permissions().mode() & 0o7777,
                    },
                );
            } else {
                // Anything else never matches a payload: forces a rewrite.
                out.insert(
                    child,
                    FileProjection {
                        data: Vec::new(),
                        mode: u32::MAX,
                    },
                );
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(dir, "", &mut out)?;
    Ok(out)
}

fn top_level(p: &str) -> &str {
    p.split('/').next().unwrap_or(p)
}

/// The name of a new timestamped directory (`..2026_11_22_10_00_00.123456789`).
fn timestamp_name() -> String {
    let now = jiff::tz::Offset::UTC.to_datetime(jiff::Timestamp::now());
    format!(
        "..{:04}_{:02}_{:02}_{:02}_{:02}_{:02}.{:09}",
        now.year(),
        now.month(),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.subsec_nanosecond()
    )
}

/// Writes `payload` into `target` (an existing directory). Returns whether anything was
/// written. `gid`: the pod's fsGroup, applied as upstream's `SetVolumeOwnership` does for a
/// read-only volume (group ownership, `g+r`, setgid directories).
pub(crate) fn write(
    target: &Path,
    payload: &Payload,
    gid: Option<u32>,
) -> Result<bool, AtomicWriteError> {
    let mut clean: Payload = BTreeMap::new();
    for (p, f) in payload {
        clean.insert(clean_path(p)?, f.clone());
    }
    // A path may not be both a file and a directory.
    for p in clean.keys() {
        let mut prefix = String::new();
        for part in p.split('/') {
            if !prefix.is_empty() {
                if clean.contains_key(&prefix) {
                    return Err(AtomicWriteError::FileAndDirectory(prefix));
                }
                prefix.push('/');
            }
            prefix.push_str(part);
        }
    }

    let data_link = target.join(DATA);
    let old_ts = match std::fs::read_link(&data_link) {
        Ok(t) => {
            let t = t.to_string_lossy().into_owned();
            // Only ever a sibling name we wrote; anything else is ignored (and replaced).
            (t.starts_with("..") && !t.contains('/') && t != DATA && t != DATA_TMP).then_some(t)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(FsError::new("reading", &data_link, e).into()),
    };
    let old_files = match &old_ts {
        Some(ts) => read_tree(&target.join(ts)).ok(),
        None => None,
    };

    let effective = |m: u32| (if gid.is_some() { m | 0o440 } else { m }) & 0o777;
    if let Some(old) = &old_files {
        let unchanged = old.len() == clean.len()
            && clean.iter().all(|(p, f)| {
                old.get(p)
                    .is_some_and(|o| o.data == f.data && o.mode & 0o777 == effective(f.mode))
            })
            && clean
                .keys()
                .all(|p| std::fs::symlink_metadata(target.join(top_level(p))).is_ok());
        if unchanged {
            return Ok(false);
        }
    }

    // 1. The new timestamped directory.
    let mut ts = timestamp_name();
    let mut n = 0;
    let ts_dir = loop {
        let d = target.join(&ts);
        match std::fs::DirBuilder::new().mode(0o755).create(&d) {
            Ok(()) => break d,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => {
                n += 1;
                ts = format!("{}{n}", timestamp_name());
            }
            Err(e) => return Err(FsError::new("creating", &d, e).into()),
        }
    };
    set_mode(&ts_dir, 0o755, gid, true)?;

    // 2. The files.
    for (p, f) in &clean {
        let full = ts_dir.join(p);
        if let Some(parent) = full.parent()
            && parent != ts_dir
        {
            let mut dir = ts_dir.clone();
            for part in Path::new(p)
                .parent()
                .into_iter()
                .flat_map(|p| p.components())
            {
                dir.push(part);
                match std::fs::DirBuilder::new().mode(0o755).create(&dir) {
                    Ok(()) => set_mode(&dir, 0o755, gid, true)?,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(FsError::new("creating", &dir, e).into()),
                }
            }
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(f.mode & 0o777)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&full)
            .map_err(FsError::at("writing", &full))?;
        file.write_all(&f.data)
            .map_err(FsError::at("writing", &full))?;
        drop(file);
        set_mode(&full, f.mode & 0o777, gid, false)?;
    }

    // 3. The user-visible top-level symlinks.
    let tops: BTreeSet<&str> = clean.keys().map(|p| top_level(p)).collect();
    for top in &tops {
        let visible = target.join(top);
        match std::fs::symlink_metadata(&visible) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::os::unix::fs::symlink(Path::new(DATA).join(top), &visible)
                    .map_err(FsError::at("creating symlink", &visible))?;
            }
            Err(e) => return Err(FsError::new("reading", &visible, e).into()),
        }
    }

    // 4. The atomic swap of ..data.
    let tmp_link = target.join(DATA_TMP);
    match std::fs::remove_file(&tmp_link) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(FsError::new("removing", &tmp_link, e).into()),
    }
    std::os::unix::fs::symlink(&ts, &tmp_link)
        .map_err(FsError::at("creating symlink", &tmp_link))?;
    std::fs::rename(&tmp_link, &data_link).map_err(FsError::at("renaming to", &data_link))?;

    // 5. Top-level symlinks of paths that left the payload.
    if let Some(old) = &old_files {
        for top in old.keys().map(|p| top_level(p)).collect::<BTreeSet<_>>() {
            if tops.contains(top) {
                continue;
            }
            let visible = target.join(top);
            if std::fs::symlink_metadata(&visible).is_ok_and(|m| m.file_type().is_symlink()) {
                std::fs::remove_file(&visible).map_err(FsError::at("removing", &visible))?;
            }
        }
    }

    // 6. The old timestamped directory, and any left by an interrupted write.
    let entries = std::fs::read_dir(target).map_err(FsError::at("reading", target))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("..")
            && name != ts
            && name != DATA
            && name != DATA_TMP
            && entry.file_type().is_ok_and(|t| t.is_dir())
        {
            std::fs::remove_dir_all(entry.path())
                .map_err(FsError::at("removing", &entry.path()))?;
        }
    }
    Ok(true)
}

/// Sets the permission bits of a file we just created (ignoring the umask), and with an
/// fsGroup its group and the bits upstream's `SetVolumeOwnership` adds for read-only volumes
/// (`0440`, and `0110` plus setgid on directories).
fn set_mode(p: &Path, mode: u32, gid: Option<u32>, dir: bool) -> Result<(), FsError> {
    let mut mode = mode;
    if let Some(g) = gid {
        std::os::unix::fs::lchown(p, None, Some(g)).map_err(FsError::at("chown", p))?;
        mode |= 0o440;
        if dir {
            mode |= 0o2110;
        }
    }
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .map_err(FsError::at("chmod", p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(s: &str, mode: u32) -> FileProjection {
        FileProjection {
            data: s.as_bytes().to_vec(),
            mode,
        }
    }

    #[test]
    fn paths_are_checked_like_upstream() {
        assert_eq!(clean_path("a/./b").unwrap(), "a/b");
        let err = |p: &str| clean_path(p).unwrap_err();
        let e = err("/abs");
        assert!(matches!(e, AtomicWriteError::AbsolutePath(_)), "{e:?}");
        assert_eq!(e.to_string(), "invalid path: must be relative path: /abs");
        let e = err("a/../b");
        assert!(matches!(e, AtomicWriteError::ParentDir(_)), "{e:?}");
        assert_eq!(e.to_string(), "invalid path: must not contain '..': a/../b");
        let e = err("..data");
        assert!(matches!(e, AtomicWriteError::DotDotPrefix(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "invalid path: must not start with '..': ..data"
        );
        let e = err("");
        assert!(matches!(e, AtomicWriteError::EmptyPath), "{e:?}");
        assert_eq!(e.to_string(), "invalid path: must not be empty");
        assert_eq!(err(".").to_string(), "invalid path: \".\"");
        let long = "x".repeat(256);
        assert_eq!(
            err(&long).to_string(),
            format!("invalid path: a component exceeds 255 characters: {long}")
        );
        let longer = "a/".repeat(2049);
        assert!(matches!(err(&longer), AtomicWriteError::PathTooLong(_)));
    }

    #[test]
    fn layout_update_and_no_op() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path();
        let mut p = Payload::new();
        p.insert("a".into(), file("1", 0o644));
        p.insert("dir/b".into(), file("2", 0o600));
        assert!(write(t, &p, None).unwrap());
        let ts1 = std::fs::read_link(t.join(DATA)).unwrap();
        assert!(ts1.to_string_lossy().starts_with("..20"));
        assert_eq!(
            std::fs::read_link(t.join("a")).unwrap(),
            Path::new("..data/a")
        );
        assert_eq!(
            std::fs::read_link(t.join("dir")).unwrap(),
            Path::new("..data/dir")
        );
        assert_eq!(std::fs::read_to_string(t.join("dir/b")).unwrap(), "2");
        let mode = std::fs::metadata(t.join("dir/b"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);

        // Same payload: nothing written.
        assert!(!write(t, &p, None).unwrap());
        assert_eq!(std::fs::read_link(t.join(DATA)).unwrap(), ts1);

        // "a" leaves, "c" arrives.
        p.remove("a");
        p.insert("c".into(), file("3", 0o644));
        assert!(write(t, &p, None).unwrap());
        let ts2 = std::fs::read_link(t.join(DATA)).unwrap();
        assert_ne!(ts1, ts2);
        assert!(!t.join(&ts1).exists());
        assert!(std::fs::symlink_metadata(t.join("a")).is_err());
        assert_eq!(std::fs::read_to_string(t.join("c")).unwrap(), "3");
        assert!(!t.join(DATA_TMP).exists());
    }

    #[test]
    fn file_and_directory_conflict_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let mut p = Payload::new();
        p.insert("a".into(), file("1", 0o644));
        p.insert("a/b".into(), file("2", 0o644));
        let e = write(d.path(), &p, None).unwrap_err();
        assert!(matches!(e, AtomicWriteError::FileAndDirectory(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "invalid payload: a is both a file and a directory"
        );
    }
}
