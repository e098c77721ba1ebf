//! The container spec: everything the shim needs to start one container, computed by the
//! kubelet from the pod and the image and written as `config.json` into the container's bundle
//! directory. It is k1s's own format (the shim is the only reader), closer to what the kernel
//! needs than an OCI runtime spec.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One mount inside the container, applied in order after the rootfs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// Host path for binds; ignored for other types.
    pub source: PathBuf,
    /// Absolute path inside the container.
    pub destination: String,
    /// `bind`, `tmpfs`, ...
    pub kind: String,
    /// Data options for non-bind mounts (`size=64m,mode=1777`).
    #[serde(default)]
    pub data: String,
    #[serde(default)]
    pub readonly: bool,
    /// Whether the source is a file (the mount point is then created as an empty file).
    #[serde(default)]
    pub file: bool,
}

impl Mount {
    pub fn bind(source: impl Into<PathBuf>, destination: &str, readonly: bool) -> Self {
        let source = source.into();
        let file = source.is_file();
        Self {
            source,
            destination: destination.into(),
            kind: "bind".into(),
            data: String::new(),
            readonly,
            file,
        }
    }
}

/// A host device node to create in the container (a device plugin's or a raw block
/// volume's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostDevice {
    pub container_path: String,
    pub host_path: String,
    /// Cgroup device permissions (`rwm`).
    pub permissions: String,
}

/// A device node in the container: the type, numbers and mode of a host device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceNode {
    /// Absolute path inside the container.
    pub path: String,
    /// A block device (else a character device).
    pub block: bool,
    pub major: u64,
    pub minor: u64,
    /// Permission bits, as the host node has them.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Why a device handed to a container cannot be given to it.
#[derive(Debug, thiserror::Error)]
pub enum DeviceNodeError {
    #[error("device {host}: the container path {container:?} is not absolute")]
    RelativePath { host: String, container: String },
    #[error("device {host}: {source}")]
    Stat {
        host: String,
        source: std::io::Error,
    },
    #[error("device {host}: not a device node")]
    NotADevice { host: String },
}

/// The device nodes for what device plugins handed a container: each host path must be a
/// character or block device, and each container path absolute.
pub fn device_nodes(devices: &[HostDevice]) -> Result<Vec<DeviceNode>, DeviceNodeError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    devices
        .iter()
        .map(|d| {
            let host = || d.host_path.clone();
            if !d.container_path.starts_with('/') {
                return Err(DeviceNodeError::RelativePath {
                    host: host(),
                    container: d.container_path.clone(),
                });
            }
            let meta = std::fs::metadata(&d.host_path).map_err(|source| DeviceNodeError::Stat {
                host: host(),
                source,
            })?;
            let kind = meta.file_type();
            if !kind.is_char_device() && !kind.is_block_device() {
                return Err(DeviceNodeError::NotADevice { host: host() });
            }
            let rdev = meta.rdev();
            Ok(DeviceNode {
                path: d.container_path.clone(),
                block: kind.is_block_device(),
                major: nix::sys::stat::major(rdev),
                minor: nix::sys::stat::minor(rdev),
                mode: meta.mode() & 0o7777,
                uid: meta.uid(),
                gid: meta.gid(),
            })
        })
        .collect()
}

/// The process the container runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    /// argv; `args[0]` is looked up in the container's `PATH` unless it contains a `/`.
    pub args: Vec<String>,
    /// `KEY=VALUE`.
    pub env: Vec<String>,
    pub cwd: String,
    pub uid: u32,
    pub gid: u32,
    #[serde(default)]
    pub additional_gids: Vec<u32>,
    /// Capability names (`CAP_CHOWN`, ...) kept in the bounding, permitted, effective and
    /// inheritable sets.
    pub capabilities: Vec<String>,
    pub no_new_privileges: bool,
    /// `stdin: true`: the container gets a stdin that the shim keeps open for attachers.
    #[serde(default)]
    pub stdin: bool,
    /// `stdinOnce: true`: that stdin closes when the first attach session that used it ends.
    #[serde(default)]
    pub stdin_once: bool,
    /// `tty: true`: the container's stdin, stdout and stderr are a pseudo-terminal.
    #[serde(default)]
    pub tty: bool,
}

/// What the shim is told to run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSpec {
    pub id: String,
    /// Image layer directories, lowest first (overlayfs lower dirs).
    pub layers: Vec<PathBuf>,
    /// The container's writable layer and overlayfs work dir.
    pub upper: PathBuf,
    pub work: PathBuf,
    /// Where the rootfs is assembled (inside the container's own mount namespace).
    pub rootfs: PathBuf,
    pub readonly_rootfs: bool,
    pub hostname: String,
    /// Network namespace to join (a bind-mounted nsfs file); None = the host's.
    pub netns: Option<PathBuf>,
    /// IPC namespace to join; None = the host's.
    pub ipcns: Option<PathBuf>,
    /// `privileged: true`: all capabilities, no masked or read-only paths, host devices.
    pub privileged: bool,
    pub process: Process,
    pub mounts: Vec<Mount>,
    /// Device nodes to create in the container's `/dev` (from device plugins).
    #[serde(default)]
    pub devices: Vec<DeviceNode>,
    /// `cgroup.procs` files the container's init joins before it runs.
    pub cgroup_procs: Vec<PathBuf>,
    /// The CRI-format log file the shim writes stdout and stderr to.
    pub log_path: PathBuf,
    /// Log rotation: size of one file, and how many files to keep.
    pub log_max_bytes: u64,
    pub log_max_files: u32,
}

/// Bundle file names.
pub const CONFIG: &str = "config.json";
/// Written by the shim once the container runs: [`State`].
pub const STATE: &str = "state.json";
/// Written by the shim when the container exits: [`Exit`].
pub const EXIT: &str = "exit.json";
/// The shim's unix socket for attach sessions (see [`super::attach`]).
pub const ATTACH: &str = "attach.sock";

/// A running container, as the shim reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The container's init, in the host's pid namespace.
    pub pid: i32,
    /// Its start time in clock ticks since boot (`/proc/PID/stat` field 22), so that a reused
    /// pid is never mistaken for it.
    pub pid_start: u64,
    pub shim_pid: i32,
    pub shim_start: u64,
    /// RFC 3339.
    pub started_at: String,
}

/// How a container ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// 128 + signal for a signalled process, as a shell reports it.
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub finished_at: String,
}

/// Writes `value` as JSON to `dir/name` atomically (temp file, fsync, rename).
pub fn write_json<T: Serialize>(dir: &Path, name: &str, value: &T) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&serde_json::to_vec(value).map_err(std::io::Error::other)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))
}

/// Reads `dir/name` as JSON; None if missing.
pub fn read_json<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
) -> std::io::Result<Option<T>> {
    match std::fs::read(dir.join(name)) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The start time of `pid` in clock ticks since boot, or None if it does not exist.
pub fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // Fields after the command start at field 3; starttime is field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Upstream's default capability set for containers (containerd's default spec).
pub const DEFAULT_CAPABILITIES: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_of_self_and_of_nothing() {
        let me = std::process::id() as i32;
        assert!(process_start_time(me).is_some());
        assert_eq!(process_start_time(i32::MAX), None);
    }

    #[test]
    fn json_round_trip_is_atomic_and_missing_is_none() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_json::<Exit>(d.path(), EXIT).unwrap(), None);
        let e = Exit {
            exit_code: 137,
            signal: Some(9),
            finished_at: "2026-11-22T00:00:00Z".into(),
        };
        write_json(d.path(), EXIT, &e).unwrap();
        assert_eq!(read_json::<Exit>(d.path(), EXIT).unwrap(), Some(e));
        assert!(!d.path().join(".exit.json.tmp").exists());
    }
}
