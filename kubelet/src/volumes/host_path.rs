//! The hostPath volume plugin: the host's path used in place (never under the pod's volumes
//! directory, so teardown can never remove it), after upstream's `type` checks.

use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::HostPathVolumeSource;

/// Why a hostPath volume was refused; the type check messages are upstream's.
#[derive(Debug, thiserror::Error)]
pub enum HostPathError {
    #[error("hostPath {0:?} is not an absolute path")]
    NotAbsolute(String),
    #[error("hostPath {0:?} must not contain '..'")]
    ParentDir(String),
    /// A missing path of no type could not be created as a directory.
    #[error("creating hostPath directory {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("hostPath type check failed: could not create directory {}: {source}", path.display())]
    CreateDirectory {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("hostPath type check failed: could not create file {}: {source}", path.display())]
    CreateFile {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The path is not of the `type` (`what`: "a directory", "a socket file", ...).
    #[error("hostPath type check failed: {} is not {what}", path.display())]
    WrongType { path: PathBuf, what: &'static str },
    #[error("{0} is an invalid volume type")]
    InvalidType(String),
}

/// Checks (and for the `*OrCreate` types, creates) the host path; returns it.
pub(crate) fn setup(src: &HostPathVolumeSource) -> Result<PathBuf, HostPathError> {
    let path = Path::new(&src.path);
    if !path.is_absolute() {
        return Err(HostPathError::NotAbsolute(src.path.clone()));
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(HostPathError::ParentDir(src.path.clone()));
    }
    check_type(path, src.type_.as_deref().unwrap_or_default())?;
    Ok(path.to_path_buf())
}

/// Upstream's `checkTypeInternal`, with its messages.
pub(crate) fn check_type(path: &Path, kind: &str) -> Result<(), HostPathError> {
    let owned = || path.to_path_buf();
    // Like Go's os.Stat: symlinks are followed.
    let meta = std::fs::metadata(path).ok();
    let ft = meta.as_ref().map(|m| m.file_type());
    let is = |f: fn(&std::fs::FileType) -> bool| ft.as_ref().is_some_and(f);
    let must_be = |ok: bool, what: &'static str| {
        if ok {
            Ok(())
        } else {
            Err(HostPathError::WrongType {
                path: owned(),
                what,
            })
        }
    };
    match kind {
        // No check; a missing path becomes a directory when the container is created, as
        // containerd's CRI plugin does.
        "" if meta.is_none() && std::fs::symlink_metadata(path).is_err() => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(path)
                .map_err(|source| HostPathError::Create {
                    path: owned(),
                    source,
                })
        }
        "" => Ok(()),
        "DirectoryOrCreate" if meta.is_none() => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(path)
            .map_err(|source| HostPathError::CreateDirectory {
                path: owned(),
                source,
            }),
        "DirectoryOrCreate" | "Directory" => must_be(is(|t| t.is_dir()), "a directory"),
        "FileOrCreate" if meta.is_none() => std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .map(drop)
            .map_err(|source| HostPathError::CreateFile {
                path: owned(),
                source,
            }),
        "FileOrCreate" | "File" => must_be(is(|t| t.is_file()), "a file"),
        "Socket" => must_be(is(|t| t.is_socket()), "a socket file"),
        "CharDevice" => must_be(is(|t| t.is_char_device()), "a character device"),
        "BlockDevice" => must_be(is(|t| t.is_block_device()), "a block device"),
        other => Err(HostPathError::InvalidType(other.to_string())),
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
            let e = setup(&src(p, kind)).unwrap_err().to_string();
            assert!(e.contains(want), "{kind} {}: {e}", p.display());
            if *kind != "Weird" {
                assert!(e.starts_with("hostPath type check failed: "), "{e}");
            }
        }
        assert_eq!(
            setup(&src(&file, "Directory")).unwrap_err().to_string(),
            format!(
                "hostPath type check failed: {} is not a directory",
                file.display()
            )
        );
        let e = setup(&src(Path::new("rel/path"), "")).unwrap_err();
        assert!(matches!(e, HostPathError::NotAbsolute(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "hostPath \"rel/path\" is not an absolute path"
        );
        let e = setup(&src(Path::new("/a/../b"), "")).unwrap_err();
        assert!(matches!(e, HostPathError::ParentDir(_)), "{e:?}");
        assert_eq!(e.to_string(), "hostPath \"/a/../b\" must not contain '..'");
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
        assert!(matches!(e, HostPathError::CreateFile { .. }), "{e:?}");
        assert!(e.to_string().contains("could not create file"), "{e}");
    }
}
