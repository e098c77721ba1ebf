//! The host operations the node service needs: loop devices (`losetup`), file systems
//! (`blkid`, `mkfs.ext4`, `resize2fs`), mounts (`mount`, umount(2), `/proc/self/mountinfo`)
//! and statvfs. Each is a small synchronous function; the driver calls them on a blocking
//! thread. Nothing here knows about CSI requests or the store.

use std::ffi::OsStr;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    #[error("running {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("{command} failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SystemError + '_ {
    move |source| SystemError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Runs `program args…`, returning stdout, or the exit status and stderr on failure.
fn run<I, S>(program: &str, args: I) -> Result<String, SystemError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let output = Command::new(program)
        .args(&args)
        .output()
        .map_err(|source| SystemError::Spawn {
            program: program.to_owned(),
            source,
        })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let command = std::iter::once(program.to_owned())
            .chain(args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect::<Vec<_>>()
            .join(" ");
        Err(SystemError::Failed {
            command,
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

// ---- loop devices ----------------------------------------------------------------------

/// The loop devices backed by `image` (a canonical path).
pub fn loop_devices(image: &Path) -> Result<Vec<PathBuf>, SystemError> {
    let out = run(
        "losetup",
        [
            OsStr::new("--noheadings"),
            OsStr::new("--output"),
            OsStr::new("NAME"),
            OsStr::new("--associated"),
            image.as_os_str(),
        ],
    )?;
    Ok(out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect())
}

/// The loop device for `image`: the one already attached, else a new one.
///
/// A device that an unstage detached while something else still held it (see
/// [`loop_releasing`]) is given a few seconds to be freed (the holder is usually a container
/// on its way to pivot_root); if it is still held, it is taken back rather than a second one
/// attached: the file system on it is alive, and two superblocks over one image would
/// corrupt it.
pub fn attach_loop(image: &Path) -> Result<PathBuf, SystemError> {
    let mut devices = loop_devices(image)?;
    if !devices.is_empty() && devices.iter().all(|d| loop_releasing(d)) {
        devices = wait_released(image, TAKE_BACK_WAIT)?;
    }
    for dev in devices {
        if !loop_releasing(&dev) {
            return Ok(dev);
        }
        match keep_loop(&dev) {
            Ok(()) => {
                tracing::info!(image = %image.display(), device = %dev.display(), "took back a loop device that was being released");
                return Ok(dev);
            }
            // Released meanwhile: attach a new one.
            Err(e) => tracing::debug!(device = %dev.display(), error = %e, "loop device gone"),
        }
    }
    let out = run(
        "losetup",
        [
            OsStr::new("--find"),
            OsStr::new("--show"),
            image.as_os_str(),
        ],
    )?;
    let dev = PathBuf::from(out.trim());
    tracing::info!(image = %image.display(), device = %dev.display(), "attached loop device");
    Ok(dev)
}

/// How long an unstage waits for a detached loop device to be freed before it leaves that
/// to the kernel.
const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// How long a stage waits for a device being released before it takes it back.
const TAKE_BACK_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Waits up to `timeout` for the loop devices of `image` to be freed; returns those left.
fn wait_released(image: &Path, timeout: std::time::Duration) -> Result<Vec<PathBuf>, SystemError> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = loop_devices(image)?;
        if left.is_empty() || std::time::Instant::now() >= deadline {
            return Ok(left);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Detaches every loop device backed by `image`, and returns those the kernel has not freed
/// yet. A device that something else still holds is only marked to be freed on its last
/// close (autoclear): typically a mount namespace cloned while the volume was staged (a
/// container starting, `unshare -m`), which keeps the file system mounted until it goes.
pub fn detach_loops(image: &Path) -> Result<Vec<PathBuf>, SystemError> {
    for dev in loop_devices(image)? {
        if loop_releasing(&dev) {
            continue;
        }
        run("losetup", [OsStr::new("--detach"), dev.as_os_str()])?;
        tracing::info!(image = %image.display(), device = %dev.display(), "detached loop device");
    }
    wait_released(image, RELEASE_WAIT)
}

/// Whether loop device `dev` is detached but still held, so the kernel frees it on its last
/// close (its autoclear flag, which only a detach of a busy device sets here).
pub fn loop_releasing(dev: &Path) -> bool {
    let name = dev.file_name().unwrap_or_default();
    let flag = Path::new("/sys/class/block")
        .join(name)
        .join("loop/autoclear");
    std::fs::read_to_string(flag).is_ok_and(|v| v.trim() == "1")
}

/// The loop devices of `image` that a stage holds: every one not being released.
pub fn staged_loops(image: &Path) -> Result<Vec<PathBuf>, SystemError> {
    Ok(loop_devices(image)?
        .into_iter()
        .filter(|d| !loop_releasing(d))
        .collect())
}

/// `struct loop_info64` of `<linux/loop.h>`, for LOOP_GET_STATUS64/LOOP_SET_STATUS64.
#[repr(C)]
struct LoopInfo64 {
    device: u64,
    inode: u64,
    rdevice: u64,
    offset: u64,
    sizelimit: u64,
    number: u32,
    encrypt_type: u32,
    encrypt_key_size: u32,
    flags: u32,
    file_name: [u8; 64],
    crypt_name: [u8; 64],
    encrypt_key: [u8; 32],
    init: [u64; 2],
}

const LO_FLAGS_AUTOCLEAR: u32 = 4;
nix::ioctl_read_bad!(loop_get_status64, 0x4C05, LoopInfo64);
nix::ioctl_write_ptr_bad!(loop_set_status64, 0x4C04, LoopInfo64);

/// Clears `dev`'s autoclear flag, so it stays attached after its current holders close it.
/// Fails (ENXIO) if the kernel freed it meanwhile.
fn keep_loop(dev: &Path) -> Result<(), SystemError> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(dev).map_err(io_err(dev))?;
    // SAFETY: the kernel fills a `loop_info64`, which `LoopInfo64` lays out exactly; all-zero
    // bytes are a valid value of it.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    unsafe { loop_get_status64(file.as_raw_fd(), &mut info) }.map_err(|e| io_err(dev)(e.into()))?;
    info.flags &= !LO_FLAGS_AUTOCLEAR;
    // SAFETY: as above; the kernel only reads the struct.
    unsafe { loop_set_status64(file.as_raw_fd(), &info) }.map_err(|e| io_err(dev)(e.into()))?;
    Ok(())
}

/// How long a device or mount may stay busy before the plugin takes it as held.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether `dev` stays [`mounted_anywhere`] for `wait`.
fn busy_for(dev: &Path, wait: std::time::Duration) -> Result<bool, SystemError> {
    let deadline = std::time::Instant::now() + wait;
    while mounted_anywhere(dev)? {
        if std::time::Instant::now() >= deadline {
            return Ok(true);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(false)
}

/// Whether a file system on `dev` is mounted anywhere, in any mount namespace: the kernel
/// then holds the device exclusively, so an exclusive open fails with EBUSY.
pub fn mounted_anywhere(dev: &Path) -> Result<bool, SystemError> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(dev)
    {
        Ok(_) => Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(true),
        Err(e) => Err(io_err(dev)(e)),
    }
}

/// Makes the loop device see its backing file's current size (after the file grew).
pub fn refresh_loop_capacity(dev: &Path) -> Result<(), SystemError> {
    run("losetup", [OsStr::new("--set-capacity"), dev.as_os_str()]).map(drop)
}

/// A block device's size in bytes (from sysfs).
pub fn device_size(dev: &Path) -> Result<u64, SystemError> {
    let name = dev.file_name().unwrap_or_default();
    let path = Path::new("/sys/class/block").join(name).join("size");
    let sectors = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    sectors
        .trim()
        .parse::<u64>()
        .map(|s| s * 512)
        .map_err(|e| io_err(&path)(io::Error::new(io::ErrorKind::InvalidData, e)))
}

/// A device node's device number (`st_rdev`).
pub fn device_number(dev: &Path) -> Result<u64, SystemError> {
    Ok(std::fs::metadata(dev).map_err(io_err(dev))?.rdev())
}

// ---- file systems ----------------------------------------------------------------------

/// The file system on `dev`, or `None` if it holds none `blkid` recognises.
pub fn fs_type(dev: &Path) -> Result<Option<String>, SystemError> {
    match run(
        "blkid",
        [
            OsStr::new("-p"),
            OsStr::new("-o"),
            OsStr::new("value"),
            OsStr::new("-s"),
            OsStr::new("TYPE"),
            dev.as_os_str(),
        ],
    ) {
        Ok(out) => Ok(Some(out.trim().to_owned()).filter(|t| !t.is_empty())),
        // blkid exits 2 when it finds nothing.
        Err(SystemError::Failed { status, .. }) if status.code() == Some(2) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Makes an ext4 file system on `dev`.
pub fn mkfs_ext4(dev: &Path) -> Result<(), SystemError> {
    tracing::info!(device = %dev.display(), "making ext4 file system");
    run(
        "mkfs.ext4",
        [OsStr::new("-F"), OsStr::new("-q"), dev.as_os_str()],
    )
    .map(drop)
}

/// Grows the ext2/3/4 file system on `dev` to the device's size. On a mounted file system
/// this is an online resize, which the kernel allows only with CAP_SYS_RESOURCE.
pub fn resize_ext(dev: &Path) -> Result<(), SystemError> {
    run("resize2fs", [dev]).map(drop)
}

/// The size in bytes of the ext2/3/4 file system on `dev` (from its superblock).
pub fn ext_size(dev: &Path) -> Result<u64, SystemError> {
    let out = run("dumpe2fs", [OsStr::new("-h"), dev.as_os_str()])?;
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    match (field("Block count:"), field("Block size:")) {
        (Some(count), Some(size)) => Ok(count * size),
        _ => Err(io_err(dev)(io::Error::new(
            io::ErrorKind::InvalidData,
            "dumpe2fs shows no block count and size",
        ))),
    }
}

/// Grows the unmounted ext2/3/4 file system on `dev` to the device's size if it is smaller:
/// checks it first (`e2fsck -f -p`, as resize2fs demands), then resizes it offline.
/// A file system still mounted elsewhere (see [`detach_loops`]) is left as it is: it grows
/// on a later stage.
pub fn grow_ext_offline(dev: &Path) -> Result<bool, SystemError> {
    if ext_size(dev)? >= device_size(dev)? {
        return Ok(false);
    }
    // Briefly busy is usual (a process forked meanwhile holds a copy of a descriptor until it
    // execs); still mounted elsewhere after a while means a holder of the file system.
    if busy_for(dev, BUSY_WAIT)? {
        tracing::info!(device = %dev.display(), "not growing a file system that is still mounted elsewhere");
        return Ok(false);
    }
    match run(
        "e2fsck",
        [OsStr::new("-f"), OsStr::new("-p"), dev.as_os_str()],
    ) {
        Ok(_) => {}
        // 1: errors were corrected, which is fine to go on with.
        Err(SystemError::Failed { status, .. }) if status.code() == Some(1) => {}
        Err(e) => return Err(e),
    }
    resize_ext(dev)?;
    Ok(true)
}

/// Whether this process may resize mounted ext4 file systems: the kernel requires
/// CAP_SYS_RESOURCE, which some containers drop even for root.
pub fn can_resize_online() -> bool {
    const CAP_SYS_RESOURCE: u32 = 24;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_RESOURCE) != 0)
}

// ---- mounts ----------------------------------------------------------------------------

/// Mounts the file system on `dev` at `target`.
pub fn mount_fs(
    dev: &Path,
    target: &Path,
    fs_type: &str,
    options: &[String],
) -> Result<(), SystemError> {
    let mut args: Vec<&OsStr> = vec![OsStr::new("-t"), OsStr::new(fs_type)];
    let opts = options.join(",");
    if !opts.is_empty() {
        args.extend([OsStr::new("-o"), OsStr::new(&opts)]);
    }
    args.extend([dev.as_os_str(), target.as_os_str()]);
    run("mount", args).map(drop)
}

/// Bind-mounts `source` onto `target`, then applies `ro` and `options` (a bind mount ignores
/// them on the first call, so they are set by a remount).
pub fn bind_mount(
    source: &Path,
    target: &Path,
    readonly: bool,
    options: &[String],
) -> Result<(), SystemError> {
    run(
        "mount",
        [OsStr::new("--bind"), source.as_os_str(), target.as_os_str()],
    )?;
    let mut opts = vec!["remount".to_owned(), "bind".to_owned()];
    if readonly {
        opts.push("ro".to_owned());
    }
    opts.extend(options.iter().filter(|o| !o.is_empty()).cloned());
    if opts.len() > 2 {
        let remount = run(
            "mount",
            [
                OsStr::new("-o"),
                OsStr::new(&opts.join(",")),
                target.as_os_str(),
            ],
        );
        if let Err(e) = remount {
            let _ = unmount(target);
            return Err(e);
        }
    }
    Ok(())
}

/// Writes the dirty data of the file system mounted at `target` to its device (syncfs(2)), so
/// the image holds it even if the file system outlives the unmount: a mount namespace cloned
/// meanwhile (a container starting) keeps its own reference to the superblock.
pub fn flush_fs(target: &Path) -> Result<(), SystemError> {
    let dir = std::fs::File::open(target).map_err(io_err(target))?;
    nix::unistd::syncfs(&dir).map_err(|e| io_err(target)(e.into()))
}

/// Unmounts `target`; a path that is not a mount point is fine. EBUSY is retried for a
/// while: a process forked meanwhile holds copies of descriptors (some on this file system)
/// until it execs.
pub fn unmount(target: &Path) -> Result<(), SystemError> {
    let deadline = std::time::Instant::now() + BUSY_WAIT;
    loop {
        match nix::mount::umount2(target, nix::mount::MntFlags::empty()) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT) => return Ok(()),
            Err(nix::errno::Errno::EBUSY) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => return Err(io_err(target)(e.into())),
        }
    }
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// `st_dev` of files in the mount (major:minor as one number).
    pub dev: u64,
    /// The path inside the mounted file system that is mounted here.
    pub root: String,
    pub mount_point: PathBuf,
    pub options: String,
    pub fs_type: String,
    pub source: String,
}

impl MountEntry {
    pub fn read_only(&self) -> bool {
        self.options.split(',').any(|o| o == "ro")
    }
}

/// The mount at `path` (the topmost, if several are stacked), if `path` is a mount point.
pub fn mount_at(path: &Path) -> Result<Option<MountEntry>, SystemError> {
    let path = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path)(e)),
    };
    let table = Path::new("/proc/self/mountinfo");
    let text = std::fs::read_to_string(table).map_err(io_err(table))?;
    Ok(parse_mountinfo(&text)
        .into_iter()
        .rev()
        .find(|m| m.mount_point == path))
}

fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let f: Vec<&str> = left.split(' ').collect();
            let r: Vec<&str> = right.split(' ').collect();
            let (major, minor) = f.get(2)?.split_once(':')?;
            let dev = libc::makedev(major.parse().ok()?, minor.parse().ok()?);
            Some(MountEntry {
                dev,
                root: unescape(f.get(3)?),
                mount_point: PathBuf::from(unescape(f.get(4)?)),
                options: (*f.get(5)?).to_owned(),
                fs_type: (*r.first()?).to_owned(),
                source: unescape(r.get(1)?),
            })
        })
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(digits) = bytes.get(i + 1..i + 4)
            && let Ok(v) = u8::from_str_radix(std::str::from_utf8(digits).unwrap_or("x"), 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Is `path` a block device node?
pub fn is_block_device(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

/// Bytes and inodes of the file system at `path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    pub bytes_total: u64,
    pub bytes_available: u64,
    pub bytes_used: u64,
    pub inodes_total: u64,
    pub inodes_free: u64,
    pub inodes_used: u64,
}

pub fn fs_stats(path: &Path) -> Result<FsStats, SystemError> {
    let s = nix::sys::statvfs::statvfs(path).map_err(|e| io_err(path)(e.into()))?;
    let frsize = s.fragment_size();
    let total = s.blocks() * frsize;
    let free = s.blocks_free() * frsize;
    Ok(FsStats {
        bytes_total: total,
        bytes_available: s.blocks_available() * frsize,
        bytes_used: total.saturating_sub(free),
        inodes_total: s.files(),
        inodes_free: s.files_free(),
        inodes_used: s.files().saturating_sub(s.files_free()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_parse() {
        let text = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
560 27 7:0 / /var/lib/k1s/staging\\040dir rw,relatime - ext4 /dev/loop0 rw
561 27 0:6 /loop0 /tmp/blk ro,relatime - devtmpfs devtmpfs rw,size=1k
garbage line
";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].dev, libc::makedev(7, 0));
        assert_eq!(m[1].mount_point, PathBuf::from("/var/lib/k1s/staging dir"));
        assert_eq!(m[1].fs_type, "ext4");
        assert_eq!(m[1].source, "/dev/loop0");
        assert!(!m[1].read_only());
        assert_eq!(m[2].root, "/loop0");
        assert!(m[2].read_only());
    }

    #[test]
    fn unescape_leaves_plain_text_and_short_escapes_alone() {
        assert_eq!(unescape("a\\011b"), "a\tb");
        assert_eq!(unescape("plain"), "plain");
        assert_eq!(unescape("end\\04"), "end\\04");
    }

    #[test]
    fn root_is_mounted_and_a_missing_path_is_not() {
        assert!(mount_at(Path::new("/")).unwrap().is_some());
        assert!(mount_at(Path::new("/no/such/path")).unwrap().is_none());
    }

    #[test]
    fn a_failing_command_reports_its_stderr() {
        match run("losetup", ["--detach", "/dev/definitely-not-a-loop"]) {
            Err(SystemError::Failed {
                command, stderr, ..
            }) => {
                assert!(command.starts_with("losetup --detach"));
                assert!(!stderr.is_empty());
            }
            other => panic!("expected a failure, got {other:?}"),
        }
    }
}
