//! A test's scratch directory and the mounts a kubelet leaves under it. A kubelet that is
//! killed (or a test kubelet that is only cancelled) keeps its pods' namespace files, volumes
//! and root filesystems mounted; the pods' network namespaces, and their host-side veths,
//! then live on after the test. [`ScratchDir`] unmounts everything below it when it goes.
//! Standard library and `tempfile` only: the kubelet's tests include this file by path.

use std::path::Path;
use std::process::Command;

/// Lazily unmounts every mount below `dir`, deepest first.
pub fn unmount_under(dir: &Path) {
    let dir = dir.to_string_lossy().into_owned();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut mounts: Vec<String> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| m.replace("\\040", " "))
        .filter(|m| m.starts_with(&dir))
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in mounts {
        let _ = Command::new("umount").args(["-l", &m]).status();
    }
}

/// A temporary directory that unmounts what is mounted below it before it is removed.
pub struct ScratchDir(tempfile::TempDir);

impl ScratchDir {
    pub fn new() -> Self {
        ScratchDir(tempfile::tempdir().expect("a temporary directory"))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Default for ScratchDir {
    fn default() -> Self {
        Self::new()
    }
}

impl From<tempfile::TempDir> for ScratchDir {
    fn from(dir: tempfile::TempDir) -> Self {
        ScratchDir(dir)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        unmount_under(self.0.path());
    }
}
