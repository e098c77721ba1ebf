//! The `k1s` binary under test, built on demand. Also used by `kubelet/tests/exec.rs` (through
//! `#[path]`, as the kubelet crate cannot depend on this one).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The `k1s` binary of this workspace: `$K1S_BIN`, or `target/<profile>/k1s` beside the
/// running test's executable, built first with `cargo build -p k1s` (a no-op when current).
///
/// The inner cargo runs without the variables cargo sets for a test process
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, ...): build scripts such as ring's rerun when those
/// change, so inheriting them rebuilt ring and everything above it on every switch between
/// a test run and a plain `cargo build`.
pub fn k1s_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = std::env::var("K1S_BIN") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(|d| d.parent()).unwrap().to_owned();
        let release: &[&str] = if profile_dir.ends_with("release") {
            &["--release"]
        } else {
            &[]
        };
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-p", "k1s"]).args(release);
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            let set_for_tests = k.starts_with("CARGO_PKG_")
                || k.starts_with("CARGO_BIN_")
                || k.starts_with("CARGO_CFG_")
                || matches!(
                    k.as_ref(),
                    "CARGO_MANIFEST_DIR"
                        | "CARGO_MANIFEST_PATH"
                        | "CARGO_MANIFEST_LINKS"
                        | "CARGO_CRATE_NAME"
                        | "CARGO_PRIMARY_PACKAGE"
                        | "CARGO_TARGET_TMPDIR"
                        | "CARGO_RUSTC_CURRENT_DIR"
                        | "OUT_DIR"
                );
            if set_for_tests {
                cmd.env_remove(&key);
            }
        }
        let status = cmd.status().unwrap();
        assert!(status.success(), "cargo build -p k1s failed");
        let bin = profile_dir.join("k1s");
        assert!(bin.exists(), "{} missing after build", bin.display());
        bin
    })
    .clone()
}

/// The binary agents run: `$K1S_AGENT_BIN` (`scripts/test.sh` sets it to the node-only build,
/// `cargo build -p k1s --no-default-features`, as a worker would run), else [`k1s_bin`].
pub fn agent_bin() -> PathBuf {
    match std::env::var_os("K1S_AGENT_BIN") {
        Some(p) => PathBuf::from(p),
        None => k1s_bin(),
    }
}
