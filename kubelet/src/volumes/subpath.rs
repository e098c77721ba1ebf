//! `volumeMounts[].subPath` and `subPathExpr`: expansion of `$(VAR)` from the container's
//! environment, upstream's checks (no absolute path, no `..`), creation of a missing sub path,
//! and the refusal of a sub path that resolves (through symlinks) outside its volume.
//!
//! Gap: the check resolves the path once and hands the resolved path to the runtime; upstream
//! additionally pins it by bind-mounting an open file descriptor (`/proc/self/fd/N`), which
//! closes the window in which a container writing to the volume could swap a directory for a
//! symlink between the check and the mount.

use std::collections::HashMap;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use super::FsError;

/// Why a sub path was refused or could not be provisioned; the messages are upstream's.
#[derive(Debug, thiserror::Error)]
pub enum SubPathError {
    #[error("error SubPath `{0}` must not be an absolute path")]
    Absolute(String),
    #[error("unable to provision SubPath `{0}`: must not contain '..'")]
    ParentDir(String),
    #[error("cannot resolve volume path {}: {source}", volume.display())]
    VolumePath {
        volume: PathBuf,
        source: std::io::Error,
    },
    /// The sub path resolves (through a symlink, or a dangling one) outside the volume.
    #[error("subpath {path:?} not within volume path {volume:?}")]
    Outside { path: String, volume: String },
    #[error("unable to provision SubPath `{sub_path}`: {} is not a directory", parent.display())]
    NotADirectory { sub_path: String, parent: PathBuf },
    #[error("unable to provision SubPath `{sub_path}`: creating {}: {source}", path.display())]
    Create {
        sub_path: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Fs(#[from] FsError),
}

/// Expands `$(VAR)` as upstream's `expansion.Expand`: `$$` is a literal `$`, an unknown
/// variable stays as written. Also returns the names that were unknown or empty (upstream's
/// `ExpandContainerVolumeMounts` refuses a subPathExpr with any).
pub(crate) fn expand(input: &str, env: &HashMap<String, String>) -> (String, Vec<String>) {
    let mut missing = Vec::new();
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(a) = after.strip_prefix('$') {
            out.push('$');
            rest = a;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match env.get(name) {
                        Some(v) => {
                            if v.is_empty() {
                                missing.push(name.to_string());
                            }
                            out.push_str(v);
                        }
                        None => {
                            missing.push(name.to_string());
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    missing.sort();
    missing.dedup();
    (out, missing)
}

/// Upstream's checks of a sub path, with its messages.
pub(crate) fn check(sub_path: &str) -> Result<(), SubPathError> {
    if Path::new(sub_path).is_absolute() {
        return Err(SubPathError::Absolute(sub_path.to_string()));
    }
    if sub_path.split('/').any(|p| p == "..") {
        return Err(SubPathError::ParentDir(sub_path.to_string()));
    }
    Ok(())
}

/// Resolves `sub_path` inside `volume`, creating missing directories (with the volume
/// directory's mode), and refuses any path whose resolution leaves the volume.
pub(crate) fn resolve(volume: &Path, sub_path: &str) -> Result<PathBuf, SubPathError> {
    check(sub_path)?;
    let base = std::fs::canonicalize(volume).map_err(|source| SubPathError::VolumePath {
        volume: volume.to_path_buf(),
        source,
    })?;
    let outside = || SubPathError::Outside {
        path: volume.join(sub_path).display().to_string(),
        volume: volume.display().to_string(),
    };
    let mode = std::fs::metadata(&base)
        .map_err(FsError::at("reading", &base))?
        .permissions()
        .mode()
        & 0o7777;
    let mut cur = base.clone();
    for c in Path::new(sub_path).components() {
        let name = match c {
            Component::Normal(n) => n,
            Component::CurDir => continue,
            _ => return Err(outside()),
        };
        let next = cur.join(name);
        match std::fs::symlink_metadata(&next) {
            Ok(_) => {
                // Follows every symlink: a dangling one cannot be checked, so it is refused.
                let real = std::fs::canonicalize(&next).map_err(|_| outside())?;
                if !real.starts_with(&base) {
                    return Err(outside());
                }
                cur = real;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !cur.is_dir() {
                    return Err(SubPathError::NotADirectory {
                        sub_path: sub_path.to_string(),
                        parent: cur,
                    });
                }
                match std::fs::DirBuilder::new().mode(mode & 0o777).create(&next) {
                    Ok(()) => {
                        std::fs::set_permissions(&next, std::fs::Permissions::from_mode(mode))
                            .map_err(FsError::at("chmod", &next))?;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(source) => {
                        return Err(SubPathError::Create {
                            sub_path: sub_path.to_string(),
                            path: next,
                            source,
                        });
                    }
                }
                // Created by us, but check again as the volume may be shared.
                let real = std::fs::canonicalize(&next).map_err(|_| outside())?;
                if !real.starts_with(&base) {
                    return Err(outside());
                }
                cur = real;
            }
            Err(e) => return Err(FsError::new("reading", &next, e).into()),
        }
    }
    Ok(cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_like_upstream() {
        let env: HashMap<String, String> = [("POD", "web-0"), ("NS", "prod")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let ok = |s: &str| (s.to_string(), Vec::<String>::new());
        assert_eq!(expand("logs/$(POD)", &env), ok("logs/web-0"));
        assert_eq!(expand("$(NS)/$(POD)", &env), ok("prod/web-0"));
        assert_eq!(
            expand("$(NOPE)/x", &env),
            ("$(NOPE)/x".to_string(), vec!["NOPE".to_string()])
        );
        assert_eq!(expand("$$(POD)", &env), ok("$(POD)"));
        assert_eq!(expand("a$b$(", &env), ok("a$b$("));
    }

    #[test]
    fn traversal_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let vol = d.path().join("vol");
        std::fs::create_dir(&vol).unwrap();
        let e = resolve(&vol, "/etc").unwrap_err();
        assert!(matches!(e, SubPathError::Absolute(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "error SubPath `/etc` must not be an absolute path"
        );
        let e = resolve(&vol, "a/../../x").unwrap_err();
        assert!(matches!(e, SubPathError::ParentDir(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "unable to provision SubPath `a/../../x`: must not contain '..'"
        );
        // A symlink escaping the volume, absolute or relative, directly or as a parent.
        std::os::unix::fs::symlink("/etc", vol.join("abs")).unwrap();
        std::os::unix::fs::symlink("../", vol.join("rel")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/x", vol.join("dangling")).unwrap();
        for sp in ["abs", "rel", "abs/passwd", "rel/vol", "dangling"] {
            let e = resolve(&vol, sp).unwrap_err();
            assert!(matches!(e, SubPathError::Outside { .. }), "{sp}: {e:?}");
            assert_eq!(
                e.to_string(),
                format!(
                    "subpath {:?} not within volume path {:?}",
                    vol.join(sp).display().to_string(),
                    vol.display().to_string()
                )
            );
        }
        assert!(!d.path().join("x").exists());
    }

    #[test]
    fn inside_paths_resolve_and_are_created() {
        let d = tempfile::tempdir().unwrap();
        let vol = d.path().join("vol");
        std::fs::create_dir(&vol).unwrap();
        std::fs::set_permissions(&vol, std::fs::Permissions::from_mode(0o750)).unwrap();
        let p = resolve(&vol, "a/b").unwrap();
        assert!(p.is_dir());
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o750
        );
        // A symlink that stays inside is fine (the configMap key layout).
        std::fs::create_dir(vol.join("..data")).unwrap();
        std::fs::write(vol.join("..data/key"), "v").unwrap();
        std::os::unix::fs::symlink("..data/key", vol.join("key")).unwrap();
        let f = resolve(&vol, "key").unwrap();
        assert_eq!(f, std::fs::canonicalize(vol.join("..data/key")).unwrap());
        // Below a file: refused.
        let e = resolve(&vol, "key/x").unwrap_err();
        assert!(matches!(e, SubPathError::Fs(_)), "{e:?}");
    }
}
