//! Records what `/version` reports about the build: the git commit of the source tree, whether
//! the tree had uncommitted changes, and when it was built.
//!
//! The commit comes from `git rev-parse HEAD`, else from the environment variable
//! `K1S_GIT_COMMIT` (builds from a tarball), else it is empty. The tree state is `clean` or
//! `dirty` as upstream's `hack/lib/version.sh` decides it (`git status --porcelain` empty or
//! not), `K1S_GIT_TREE_STATE` when git is not there, else empty. The build date is RFC 3339
//! UTC to the second (`2006-01-02T15:04:05Z`), from `SOURCE_DATE_EPOCH` when it is set, so a
//! reproducible build reports the same date.
//!
//! The script reruns only when HEAD moves (`.git/HEAD`, the ref it points to, `packed-refs`)
//! or one of those variables changes, not on every build; the tree state is as of that run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    for var in ["K1S_GIT_COMMIT", "K1S_GIT_TREE_STATE", "SOURCE_DATE_EPOCH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let (commit, tree_state) = match git(&dir, &["rev-parse", "HEAD"]) {
        Some(commit) if is_hex(&commit) => {
            watch_head(&dir);
            let state = match git(&dir, &["status", "--porcelain"]) {
                Some(s) if s.is_empty() => "clean",
                _ => "dirty",
            };
            (commit, state.to_owned())
        }
        _ => (
            std::env::var("K1S_GIT_COMMIT").unwrap_or_default(),
            std::env::var("K1S_GIT_TREE_STATE").unwrap_or_default(),
        ),
    };
    let epoch = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0))
        });
    println!("cargo:rustc-env=K1S_BUILD_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=K1S_BUILD_GIT_TREE_STATE={tree_state}");
    println!("cargo:rustc-env=K1S_BUILD_DATE={}", rfc3339_utc(epoch));
}

/// The trimmed output of a successful git command run in `dir`.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Reruns the script when HEAD moves: HEAD itself, the ref it names, and `packed-refs` (where
/// the ref lives once git packs it).
fn watch_head(dir: &Path) {
    let Some(git_dir) = git(dir, &["rev-parse", "--absolute-git-dir"]) else {
        return;
    };
    let git_dir = PathBuf::from(git_dir);
    let head = git_dir.join("HEAD");
    println!("cargo:rerun-if-changed={}", head.display());
    // Worktrees keep their refs in the common directory.
    let common = git(dir, &["rev-parse", "--git-common-dir"])
        .map(|c| dir.join(c))
        .unwrap_or_else(|| git_dir.clone());
    if let Ok(text) = std::fs::read_to_string(&head)
        && let Some(name) = text.trim().strip_prefix("ref: ")
    {
        for base in [&git_dir, &common] {
            let r = base.join(name);
            if r.exists() {
                println!("cargo:rerun-if-changed={}", r.display());
            }
        }
    }
    let packed = common.join("packed-refs");
    if packed.exists() {
        println!("cargo:rerun-if-changed={}", packed.display());
    }
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (the civil date by the days-from-civil
/// inverse of the proleptic Gregorian calendar).
fn rfc3339_utc(epoch: i64) -> String {
    let days = epoch.div_euclid(86_400);
    let secs = epoch.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}
