//! Cgroupfs file work shared by the v1 and v2 managers: reads and writes with the path in the
//! error, flat-keyed file parsing, group creation, bottom-up removal with retries on `EBUSY`,
//! and killing the processes left in a group.

use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::CgroupError;

/// How long one removal (of a container's groups, or of a pod's tree) keeps retrying busy
/// groups, and the pauses between tries (doubling from the first up to the last).
pub(crate) const REMOVE_PATIENCE: Duration = Duration::from_secs(1);
const RMDIR_FIRST_PAUSE: Duration = Duration::from_millis(10);
const RMDIR_MAX_PAUSE: Duration = Duration::from_millis(200);

pub(crate) fn io_err(path: &Path, source: std::io::Error) -> CgroupError {
    CgroupError::Io {
        path: path.display().to_string(),
        source,
    }
}

pub(crate) fn parse_err(path: &Path, reason: impl Into<String>) -> CgroupError {
    CgroupError::Parse {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

pub(crate) fn read(path: &Path) -> Result<String, CgroupError> {
    std::fs::read_to_string(path).map_err(|e| io_err(path, e))
}

/// Writes `value` in one `write(2)`, as cgroupfs wants. The file is created if missing, which
/// only happens in fixture trees (cgroupfs refuses to create files).
pub(crate) fn write_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| io_err(path, e))?;
    f.write_all(value.as_bytes()).map_err(|e| io_err(path, e))
}

/// A file holding one unsigned number (`cpuacct.usage`, `memory.current`, `pids.current`).
pub(crate) fn read_u64(path: &Path) -> Result<u64, CgroupError> {
    let s = read(path)?;
    s.trim()
        .parse()
        .map_err(|_| parse_err(path, format!("not a number: {:?}", s.trim())))
}

/// The value of `key` in a flat-keyed file (`key value` lines: `memory.stat`, `cpu.stat`,
/// `memory.events`, `memory.oom_control`).
pub(crate) fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key))
            .then(|| it.next()?.parse().ok())
            .flatten()
    })
}

/// Creates `dir` (one level; its parent must exist). Returns whether it was created.
pub(crate) fn mkdir(dir: &Path) -> Result<bool, CgroupError> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io_err(dir, e)),
    }
}

/// The deadline of a removal starting now.
pub(crate) fn remove_deadline() -> Instant {
    Instant::now() + REMOVE_PATIENCE
}

/// `rmdir(2)` of one group, retried while it is busy (processes still exiting) until
/// `deadline` (shared by all the groups of one removal, so that a stuck process costs one
/// wait, not one per hierarchy). A missing group is fine.
pub(crate) fn rmdir_retry(dir: &Path, deadline: Instant) -> Result<(), CgroupError> {
    let mut pause = RMDIR_FIRST_PAUSE;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
                pause = (pause * 2).min(RMDIR_MAX_PAUSE);
            }
            Err(e) => return Err(io_err(dir, e)),
        }
    }
}

/// `dir` and every directory below it, deepest first (the order to remove them in). A
/// missing `dir` gives an empty list.
pub(crate) fn subtree_bottom_up(dir: &Path) -> Result<Vec<PathBuf>, CgroupError> {
    let mut out = Vec::new();
    walk(dir, &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), CgroupError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let ft = entry.file_type().map_err(|e| io_err(&entry.path(), e))?;
        if ft.is_dir() {
            walk(&entry.path(), out)?;
        }
    }
    out.push(dir.to_path_buf());
    Ok(())
}

/// The PIDs in a group's `cgroup.procs` (none if the group is gone).
pub(crate) fn procs(dir: &Path) -> Result<Vec<i32>, CgroupError> {
    let path = dir.join("cgroup.procs");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(&path, e)),
    };
    Ok(text
        .lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
        .collect())
}

/// Sends SIGKILL to every process in the group `dir` (not below it). Never signals PID 1 or
/// this process, whatever the file says. Processes already gone are fine.
pub(crate) fn kill_procs(dir: &Path) -> Result<(), CgroupError> {
    let me = std::process::id() as i32;
    for pid in procs(dir)? {
        if pid <= 1 || pid == me {
            continue;
        }
        // SAFETY: kill(2) has no memory-safety preconditions.
        let rc = unsafe { libc::kill(pid, libc::SIGKILL) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(io_err(&dir.join("cgroup.procs"), e));
            }
        }
    }
    Ok(())
}

/// Kills what is left in `dir` and below, then removes the groups bottom-up, retrying busy
/// ones until `deadline`.
pub(crate) fn kill_and_remove_tree(dir: &Path, deadline: Instant) -> Result<(), CgroupError> {
    let groups = subtree_bottom_up(dir)?;
    for g in &groups {
        kill_procs(g)?;
    }
    for g in &groups {
        rmdir_retry(g, deadline)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_values() {
        let t = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(keyed(t, "oom_kill"), Some(3));
        assert_eq!(keyed(t, "oom"), None);
        assert_eq!(keyed("oom_kill x\n", "oom_kill"), None);
        assert_eq!(keyed("", "oom_kill"), None);
    }

    #[test]
    fn tree_order_and_removal() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::create_dir_all(a.join("b/c")).unwrap();
        std::fs::create_dir_all(a.join("d")).unwrap();
        let order = subtree_bottom_up(&a).unwrap();
        assert_eq!(order.last().unwrap(), &a);
        let pos = |p: &Path| order.iter().position(|x| x == p).unwrap();
        assert!(pos(&a.join("b/c")) < pos(&a.join("b")));
        assert_eq!(order.len(), 4);
        kill_and_remove_tree(&a, remove_deadline()).unwrap();
        assert!(!a.exists());
        assert!(subtree_bottom_up(&a).unwrap().is_empty());
        rmdir_retry(&a, remove_deadline()).unwrap();
    }

    #[test]
    fn read_errors_name_the_path() {
        let e = read_u64(Path::new("/nonexistent/k1s/x")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/k1s/x"));
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("n");
        std::fs::write(&p, "abc\n").unwrap();
        let e = read_u64(&p).unwrap_err();
        assert!(matches!(e, CgroupError::Parse { .. }), "{e}");
    }
}
