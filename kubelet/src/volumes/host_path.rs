//! The hostPath volume plugin: the host's path used in place (never under the pod's volumes
//! directory, so teardown can never remove it), after upstream's `type` checks.

use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::HostPathVolumeSource;

/// Checks (and for the `*OrCreate` types, creates) the host path; returns it.
pub(crate) fn setup(src: &HostPathVolumeSource) -> Result<PathBuf, String> {
    let path = Path::new(&src.path);
    if !path.is_absolute() {
        return Err(format!("hostPath {:?} is not an absolute path", src.path));
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(format!("hostPath {:?} must not contain '..'", src.path));
    }
    check_type(path, src.type_.as_deref().unwrap_or_default())?;
    Ok(path.to_path_buf())
}

/// Upstream's `checkTypeInternal`, with its messages.
pub(crate) fn check_type(path: &Path, kind: &str) -> Result<(), String> {
    let p = path.display();
    // Like Go's os.Stat: symlinks are followed.
    let meta = std::fs::metadata(path).ok();
    let ft = meta.as_ref().map(|m| m.file_type());
    let is = |f: fn(&std::fs::FileType) -> bool| ft.as_ref().is_some_and(f);
    match kind {
        // No check; a missing path becomes a directory when the container is created, as
        // containerd's CRI plugin does.
        "" if meta.is_none() && std::fs::symlink_metadata(path).is_err() => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(path)
                .map_err(|e| format!("creating hostPath directory {p}: {e}"))
        }
        "" => Ok(()),
        "DirectoryOrCreate" if meta.is_none() => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(path)
            .map_err(|e| {
                format!("hostPath type check failed: could not create directory {p}: {e}")
            }),
        "DirectoryOrCreate" | "Directory" => {
            if is(|t| t.is_dir()) {
                Ok(())
            } else {
                Err(format!(
                    "hostPath type check failed: {p} is not a directory"
                ))
            }
        }
        "FileOrCreate" if meta.is_none() => std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .map(drop)
            .map_err(|e| format!("hostPath type check failed: could not create file {p}: {e}")),
        "FileOrCreate" | "File" => {
            if is(|t| t.is_file()) {
                Ok(())
            } else {
                Err(format!("hostPath type check failed: {p} is not a file"))
            }
        }
        "Socket" => {
            if is(|t| t.is_socket()) {
                Ok(())
            } else {
                Err(format!(
                    "hostPath type check failed: {p} is not a socket file"
                ))
            }
        }
        "CharDevice" => {
            if is(|t| t.is_char_device()) {
                Ok(())
            } else {
                Err(format!(
                    "hostPath type check failed: {p} is not a character device"
                ))
            }
        }
        "BlockDevice" => {
            if is(|t| t.is_block_device()) {
                Ok(())
            } else {
                Err(format!(
                    "hostPath type check failed: {p} is not a block device"
                ))
            }
        }
        other => Err(format!("{other} is an invalid volume type")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn src(path: &Path, kind: &str) -> HostPathVolumeSource {
        HostPathVolumeSource {
            path: path.display().to_string(),
            type_: (!kind.is_empty()).then(|| kind.to_string()),
        }
    }

    #[test]
    fn type_checks_table() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("dir");
        std::fs::create_dir(&dir).unwrap();
        let file = d.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let sock = d.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let missing = d.path().join("missing");
        let null = Path::new("/dev/null");

        let ok: &[(&Path, &str)] = &[
            (&file, ""),
            (&dir, "Directory"),
            (&dir, "DirectoryOrCreate"),
            (&file, "File"),
            (&file, "FileOrCreate"),
            (&sock, "Socket"),
            (null, "CharDevice"),
        ];
        for (p, kind) in ok {
            setup(&src(p, kind)).unwrap_or_else(|e| panic!("{kind} {}: {e}", p.display()));
        }
        let bad: &[(&Path, &str, &str)] = &[
            (&file, "Directory", "is not a directory"),
            (&missing, "Directory", "is not a directory"),
            (&file, "DirectoryOrCreate", "is not a directory"),
            (&dir, "File", "is not a file"),
            (&missing, "File", "is not a file"),
            (&dir, "FileOrCreate", "is not a file"),
            (&file, "Socket", "is not a socket file"),
            (&file, "CharDevice", "is not a character device"),
            (null, "BlockDevice", "is not a block device"),
            (&dir, "Weird", "Weird is an invalid volume type"),
        ];
        for (p, kind, want) in bad {
            let e = setup(&src(p, kind)).unwrap_err();
            assert!(e.contains(want), "{kind} {}: {e}", p.display());
            if *kind != "Weird" {
                assert!(e.starts_with("hostPath type check failed: "), "{e}");
            }
        }
        assert_eq!(
            setup(&src(&file, "Directory")).unwrap_err(),
            format!(
                "hostPath type check failed: {} is not a directory",
                file.display()
            )
        );
        assert!(setup(&src(Path::new("rel/path"), "")).is_err());
        // No type: a missing path becomes a directory.
        setup(&src(&missing, "")).unwrap();
        assert!(missing.is_dir());
    }

    #[test]
    fn or_create_types_create() {
        let d = tempfile::tempdir().unwrap();
        let newdir = d.path().join("a/b");
        setup(&src(&newdir, "DirectoryOrCreate")).unwrap();
        assert!(newdir.is_dir());
        let newfile = d.path().join("f");
        setup(&src(&newfile, "FileOrCreate")).unwrap();
        assert!(newfile.is_file());
        let mode = std::fs::metadata(&newfile).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & !0o022, 0o644 & !0o022);
        // The parent of a FileOrCreate must exist.
        let e = setup(&src(&d.path().join("no/f"), "FileOrCreate")).unwrap_err();
        assert!(e.contains("could not create file"), "{e}");
    }
}
