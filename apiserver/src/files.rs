//! Files that must never be seen half-written (keys, certificates, kubeconfigs, the
//! identity, snapshots, saved join state): one way to write them, shared by the server's
//! parts and the `k1s` commands.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A write that failed: what was being done, to which path.
#[derive(Debug, thiserror::Error)]
#[error("cannot {op} {}: {source}", path.display())]
pub struct WriteError {
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Writes `contents` to `path` with exactly `mode` (whatever the umask): its directory
/// created if missing, a temporary file beside it, fsync, rename, fsync of the directory.
/// Readers see the old file or the new one, never a torn one.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), WriteError> {
    let err = |op, path: &Path| {
        let path = path.to_owned();
        move |source| WriteError { op, path, source }
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(err("create directory", dir))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".k1s-")
        .tempfile_in(dir)
        .map_err(err("create a temporary file in", dir))?;
    let file = tmp.as_file_mut();
    file.set_permissions(fs::Permissions::from_mode(mode))
        .and_then(|()| file.write_all(contents))
        .and_then(|()| file.sync_all())
        .map_err(err("write", path))?;
    tmp.persist(path)
        .map_err(|e| err("rename into place", path)(e.error))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(err("fsync directory", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_with_the_mode_into_a_new_directory_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/key");
        write_atomic(&path, b"one", 0o600).unwrap();
        write_atomic(&path, b"two", 0o640).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        // No temporary file left beside it.
        assert_eq!(fs::read_dir(dir.path().join("a/b")).unwrap().count(), 1);
    }
}
