//! Unpacking one layer tarball (plain, gzip or zstd, told apart by magic bytes) into a directory
//! that overlayfs can use as a lower dir.
//!
//! - OCI whiteouts become overlayfs whiteouts: `.wh.<name>` is a character device 0:0 named
//!   `<name>`, and `.wh..wh..opq` marks its directory opaque with `trusted.overlay.opaque=y`.
//! - Owner, mode (with setuid/setgid/sticky), mtime, `SCHILY.xattr.*` extended attributes,
//!   symlinks, hardlinks, devices and fifos are kept.
//! - A path that would leave the layer directory is refused: `..` above the root, a hardlink to
//!   outside it, or a path whose parent is a symlink (a symlink planted by an earlier entry could
//!   otherwise redirect a write anywhere on the host). Absolute paths are taken as relative to
//!   the layer root, as Docker does.
//! - The uncompressed stream is hashed so the caller can check it against the image config's
//!   `diff_id`.
//!
//! This file does blocking IO; callers run it in `spawn_blocking`.

use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use nix::sys::stat::{Mode, SFlag, UtimensatFlags, makedev, mknod, utimensat};
use nix::sys::time::TimeSpec;
use tar::EntryType;

use super::digest::HashingReader;

/// The xattr overlayfs reads to treat a directory as opaque.
pub const OPAQUE_XATTR: &str = "trusted.overlay.opaque";
const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_MARKER: &str = ".wh..wh..opq";
const PAX_XATTR_PREFIX: &str = "SCHILY.xattr.";

/// What unpacking a layer found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked {
    /// `sha256:` of the uncompressed tar stream (the layer's `diff_id`).
    pub diff_id: String,
    /// Bytes of regular file content written.
    pub size: u64,
}

/// The compression of a layer blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

/// Tells the compression from the first bytes of a blob.
pub fn detect_compression(head: &[u8]) -> Compression {
    if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// A reader of the uncompressed content of a blob, whatever its compression.
pub fn decompressed<'a, R: Read + 'a>(blob: R) -> io::Result<Box<dyn Read + 'a>> {
    let mut buffered = BufReader::with_capacity(256 * 1024, blob);
    Ok(match detect_compression(buffered.fill_buf()?) {
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
        Compression::Zstd => Box::new(ZstdReader::new(buffered)),
        Compression::None => Box::new(buffered),
    })
}

/// Unpacks the layer blob read from `blob` into `dest`, an existing empty directory.
///
/// Errors name the entry that failed; a refused path is `io::ErrorKind::InvalidData`.
pub fn unpack_layer<R: Read>(blob: R, dest: &Path) -> io::Result<Unpacked> {
    let mut hashing = HashingReader::new(decompressed(blob)?);
    let mut size = 0;
    let mut dir_times = Vec::new();
    {
        let mut archive = tar::Archive::new(&mut hashing);
        for entry in archive.entries()? {
            let mut entry = entry?;
            size += unpack_entry(&mut entry, dest, &mut dir_times)?;
        }
    }
    let diff_id = hashing.drain_and_finish()?;
    // Directories last, deepest first: creating their children changed their mtimes.
    for (dir, mtime) in dir_times.iter().rev() {
        set_mtime(dir, *mtime)?;
    }
    Ok(Unpacked { diff_id, size })
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

fn with_path(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// `path` made relative to the layer root, with `.` and `..` resolved lexically; `None` if it
/// climbs above the root.
pub fn clean_relative(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Prefix(_) => return None,
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(s) => out.push(s),
        }
    }
    Some(out)
}

/// Makes every parent directory of `rel` exist under `root`, refusing symlinks and
/// non-directories on the way.
fn ensure_parents(root: &Path, rel: &Path) -> io::Result<()> {
    let Some(parent) = rel.parent() else {
        return Ok(());
    };
    let mut current = root.to_path_buf();
    for c in parent.components() {
        current.push(c);
        match fs::symlink_metadata(&current) {
            Ok(m) if m.is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(invalid(format!(
                    "refusing {}: its parent {} is a symlink",
                    rel.display(),
                    current.strip_prefix(root).unwrap_or(&current).display()
                )));
            }
            Ok(_) => {
                return Err(invalid(format!(
                    "refusing {}: its parent {} is not a directory",
                    rel.display(),
                    current.strip_prefix(root).unwrap_or(&current).display()
                )));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => fs::DirBuilder::new()
                .mode(0o755)
                .create(&current)
                .map_err(|e| with_path(e, "creating directory", &current))?,
            Err(e) => return Err(with_path(e, "inspecting", &current)),
        }
    }
    Ok(())
}

/// Removes whatever is at `path` (a directory with its content), if anything.
fn remove_existing(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
    .map_err(|e| with_path(e, "replacing", path))
}

/// Unpacks one entry; returns the bytes of file content written.
fn unpack_entry<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    root: &Path,
    dir_times: &mut Vec<(PathBuf, i64)>,
) -> io::Result<u64> {
    let raw_path = entry.path()?.into_owned();
    let rel = clean_relative(&raw_path).ok_or_else(|| {
        invalid(format!(
            "refusing {}: it escapes the layer directory",
            raw_path.display()
        ))
    })?;
    let Some(name) = rel.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        // The root itself (`./`): the layer directory already exists.
        return Ok(0);
    };
    ensure_parents(root, &rel)?;
    let full = root.join(&rel);
    let header = entry.header().clone();
    let uid = header.uid()?;
    let gid = header.gid()?;
    let mode = header.mode()? & 0o7777;
    let mtime = i64::try_from(header.mtime()?).unwrap_or(0);

    if let Some(hidden) = name.strip_prefix(WHITEOUT_PREFIX) {
        let parent = full.parent().unwrap_or(root);
        if name == OPAQUE_MARKER {
            set_xattr(parent, OPAQUE_XATTR, b"y")
                .map_err(|e| with_path(e, "marking opaque", parent))?;
        } else if !hidden.starts_with(WHITEOUT_PREFIX) && !hidden.is_empty() {
            // `.wh..wh.*` other than the opaque marker are AUFS bookkeeping: ignored.
            let target = parent.join(hidden);
            remove_existing(&target)?;
            mknod(&target, SFlag::S_IFCHR, Mode::empty(), makedev(0, 0))
                .map_err(|e| with_path(e.into(), "creating whiteout", &target))?;
            chown(&target, uid, gid)?;
        }
        return Ok(0);
    }

    let xattrs = pax_xattrs(entry)?;
    let kind = header.entry_type();
    let mut written = 0;
    match kind {
        EntryType::Directory => {
            match fs::symlink_metadata(&full) {
                Ok(m) if m.is_dir() => {}
                _ => {
                    remove_existing(&full)?;
                    fs::DirBuilder::new()
                        .mode(0o700)
                        .create(&full)
                        .map_err(|e| with_path(e, "creating directory", &full))?;
                }
            }
            chown(&full, uid, gid)?;
            chmod(&full, mode)?;
            dir_times.push((full.clone(), mtime));
        }
        EntryType::Symlink => {
            let target = entry
                .link_name()?
                .ok_or_else(|| invalid(format!("symlink {} has no target", rel.display())))?
                .into_owned();
            remove_existing(&full)?;
            std::os::unix::fs::symlink(&target, &full)
                .map_err(|e| with_path(e, "creating symlink", &full))?;
            chown(&full, uid, gid)?;
            set_mtime(&full, mtime)?;
        }
        EntryType::Link => {
            let target = entry
                .link_name()?
                .ok_or_else(|| invalid(format!("hardlink {} has no target", rel.display())))?
                .into_owned();
            let target_rel = clean_relative(&target)
                .filter(|t| t.file_name().is_some())
                .ok_or_else(|| {
                    invalid(format!(
                        "refusing hardlink {} to {}: it escapes the layer directory",
                        rel.display(),
                        target.display()
                    ))
                })?;
            ensure_parents(root, &target_rel)?;
            let target_full = root.join(&target_rel);
            let meta = fs::symlink_metadata(&target_full)
                .map_err(|e| with_path(e, "hardlink target", &target_full))?;
            if meta.is_dir() {
                return Err(invalid(format!(
                    "refusing hardlink {} to directory {}",
                    rel.display(),
                    target_rel.display()
                )));
            }
            if target_full != full {
                remove_existing(&full)?;
                fs::hard_link(&target_full, &full)
                    .map_err(|e| with_path(e, "creating hardlink", &full))?;
            }
        }
        EntryType::Char | EntryType::Block | EntryType::Fifo => {
            let sflag = match kind {
                EntryType::Char => SFlag::S_IFCHR,
                EntryType::Block => SFlag::S_IFBLK,
                _ => SFlag::S_IFIFO,
            };
            let major = u64::from(header.device_major()?.unwrap_or(0));
            let minor = u64::from(header.device_minor()?.unwrap_or(0));
            remove_existing(&full)?;
            mknod(&full, sflag, Mode::empty(), makedev(major, minor))
                .map_err(|e| with_path(e.into(), "creating device", &full))?;
            chown(&full, uid, gid)?;
            chmod(&full, mode)?;
            set_mtime(&full, mtime)?;
        }
        EntryType::XGlobalHeader
        | EntryType::XHeader
        | EntryType::GNULongName
        | EntryType::GNULongLink => return Ok(0),
        // Regular files, and per POSIX any type we do not know.
        _ => {
            remove_existing(&full)?;
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&full)
                .map_err(|e| with_path(e, "creating", &full))?;
            written = io::copy(entry, &mut file).map_err(|e| with_path(e, "writing", &full))?;
            drop(file);
            chown(&full, uid, gid)?;
            chmod(&full, mode)?;
            set_mtime(&full, mtime)?;
        }
    }
    for (name, value) in xattrs {
        set_xattr(&full, &name, &value).map_err(|e| with_path(e, "setting xattr on", &full))?;
    }
    Ok(written)
}

fn pax_xattrs<R: Read>(entry: &mut tar::Entry<'_, R>) -> io::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    if let Some(exts) = entry.pax_extensions()? {
        for ext in exts {
            let ext = ext?;
            if let Ok(key) = ext.key()
                && let Some(name) = key.strip_prefix(PAX_XATTR_PREFIX)
            {
                out.push((name.to_string(), ext.value_bytes().to_vec()));
            }
        }
    }
    Ok(out)
}

fn chown(path: &Path, uid: u64, gid: u64) -> io::Result<()> {
    let uid = u32::try_from(uid).map_err(|_| invalid(format!("uid {uid} out of range")))?;
    let gid = u32::try_from(gid).map_err(|_| invalid(format!("gid {gid} out of range")))?;
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
        .map_err(|e| with_path(e, "changing owner of", path))
}

fn chmod(path: &Path, mode: u32) -> io::Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| with_path(e, "changing mode of", path))
}

fn set_mtime(path: &Path, mtime: i64) -> io::Result<()> {
    let t = TimeSpec::new(mtime, 0);
    utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &t,
        &t,
        UtimensatFlags::NoFollowSymlink,
    )
    .map_err(|e| with_path(e.into(), "setting mtime of", path))
}

/// `lsetxattr(2)`.
pub fn set_xattr(path: &Path, name: &str, value: &[u8]) -> io::Result<()> {
    let c_path = CString::new(path.as_os_str().as_bytes())?;
    let c_name = CString::new(name)?;
    // SAFETY: both strings are NUL-terminated and live across the call; `value` is valid for
    // `value.len()` bytes; lsetxattr does not keep any of the pointers.
    let rc = unsafe {
        libc::lsetxattr(
            c_path.as_ptr(),
            c_name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `lgetxattr(2)`, `None` if the attribute is absent.
pub fn get_xattr(path: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    let c_path = CString::new(path.as_os_str().as_bytes())?;
    let c_name = CString::new(name)?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: both strings are NUL-terminated; `buf` is writable for `buf.len()` bytes.
    let rc = unsafe {
        libc::lgetxattr(
            c_path.as_ptr(),
            c_name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if rc >= 0 {
        buf.truncate(usize::try_from(rc).unwrap_or(0));
        return Ok(Some(buf));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENODATA) {
        Ok(None)
    } else {
        Err(e)
    }
}

/// A zstd decoder over any number of concatenated frames, skipping skippable frames.
struct ZstdReader<R: BufRead> {
    state: Option<ZstdState<R>>,
}

enum ZstdState<R: BufRead> {
    Between(R, ruzstd::decoding::FrameDecoder),
    InFrame(ruzstd::decoding::StreamingDecoder<R, ruzstd::decoding::FrameDecoder>),
}

impl<R: BufRead> ZstdReader<R> {
    fn new(source: R) -> Self {
        Self {
            state: Some(ZstdState::Between(
                source,
                ruzstd::decoding::FrameDecoder::new(),
            )),
        }
    }
}

impl<R: BufRead> Read for ZstdReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.state.take() {
                None => return Ok(0),
                Some(ZstdState::InFrame(mut dec)) => {
                    let n = dec.read(buf)?;
                    if n > 0 || buf.is_empty() {
                        self.state = Some(ZstdState::InFrame(dec));
                        return Ok(n);
                    }
                    let (source, decoder) = dec.into_parts();
                    self.state = Some(ZstdState::Between(source, decoder));
                }
                Some(ZstdState::Between(mut source, decoder)) => {
                    let head = source.fill_buf()?;
                    if head.is_empty() {
                        return Ok(0);
                    }
                    if head.len() >= 4 && head[0] & 0xf0 == 0x50 && head[1..4] == [0x2a, 0x4d, 0x18]
                    {
                        // A skippable frame (metadata such as zstd:chunked tables).
                        let mut frame_header = [0u8; 8];
                        source.read_exact(&mut frame_header)?;
                        let len = u32::from_le_bytes([
                            frame_header[4],
                            frame_header[5],
                            frame_header[6],
                            frame_header[7],
                        ]);
                        io::copy(&mut (&mut source).take(u64::from(len)), &mut io::sink())?;
                        self.state = Some(ZstdState::Between(source, decoder));
                        continue;
                    }
                    let dec = ruzstd::decoding::StreamingDecoder::new_with_decoder(source, decoder)
                        .map_err(io::Error::other)?;
                    self.state = Some(ZstdState::InFrame(dec));
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};

    /// Builds a layer tar in memory.
    pub(crate) struct TarBuilder {
        builder: tar::Builder<Vec<u8>>,
    }

    impl TarBuilder {
        pub(crate) fn new() -> Self {
            Self {
                builder: tar::Builder::new(Vec::new()),
            }
        }

        fn header(kind: EntryType, mode: u32) -> tar::Header {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_mode(mode);
            h.set_uid(1000);
            h.set_gid(2000);
            h.set_mtime(1_600_000_000);
            h.set_size(0);
            h
        }

        pub(crate) fn dir(mut self, path: &str) -> Self {
            let mut h = Self::header(EntryType::Directory, 0o755);
            self.builder.append_data(&mut h, path, io::empty()).unwrap();
            self
        }

        pub(crate) fn file(mut self, path: &str, data: &[u8], mode: u32) -> Self {
            let mut h = Self::header(EntryType::Regular, mode);
            h.set_size(data.len() as u64);
            self.builder.append_data(&mut h, path, data).unwrap();
            self
        }

        pub(crate) fn symlink(mut self, path: &str, target: &str) -> Self {
            let mut h = Self::header(EntryType::Symlink, 0o777);
            self.builder.append_link(&mut h, path, target).unwrap();
            self
        }

        pub(crate) fn hardlink(mut self, path: &str, target: &str) -> Self {
            let mut h = Self::header(EntryType::Link, 0o644);
            self.builder.append_link(&mut h, path, target).unwrap();
            self
        }

        /// An entry whose raw name is written as is (no validation by the `tar` crate).
        pub(crate) fn raw_file(mut self, raw_name: &[u8], data: &[u8]) -> Self {
            let mut h = Self::header(EntryType::Regular, 0o644);
            h.as_old_mut().name[..raw_name.len()].copy_from_slice(raw_name);
            h.set_size(data.len() as u64);
            h.set_cksum();
            self.builder.append(&h, data).unwrap();
            self
        }

        pub(crate) fn finish(self) -> Vec<u8> {
            self.builder.into_inner().unwrap()
        }
    }

    pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn files_links_and_attributes() {
        let tar = TarBuilder::new()
            .dir("bin")
            .file("bin/busybox", b"#!binary", 0o4755)
            .symlink("bin/sh", "busybox")
            .hardlink("bin/ls", "bin/busybox")
            .raw_file(b"/etc/hostname", b"abs")
            .finish();
        let dir = tempfile::tempdir().unwrap();
        let out = unpack_layer(&gzip(&tar)[..], dir.path()).unwrap();
        assert_eq!(out.diff_id, super::super::digest::sha256_of(&tar));
        assert_eq!(out.size, 8 + 3);
        let bb = dir.path().join("bin/busybox");
        let m = fs::metadata(&bb).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o4755);
        assert_eq!((m.uid(), m.gid()), (1000, 2000));
        assert_eq!(m.mtime(), 1_600_000_000);
        assert_eq!(m.nlink(), 2);
        assert_eq!(
            fs::read_link(dir.path().join("bin/sh")).unwrap(),
            Path::new("busybox")
        );
        assert_eq!(fs::read(dir.path().join("bin/ls")).unwrap(), b"#!binary");
        assert_eq!(fs::read(dir.path().join("etc/hostname")).unwrap(), b"abs");
        assert_eq!(
            fs::metadata(dir.path().join("bin")).unwrap().mtime(),
            1_600_000_000
        );
    }

    #[test]
    fn whiteouts_and_opaque_dirs() {
        let tar = TarBuilder::new()
            .dir("etc")
            .file("etc/.wh.passwd", b"", 0o644)
            .dir("var/cache")
            .file("var/cache/.wh..wh..opq", b"", 0o644)
            .file("var/cache/kept", b"k", 0o644)
            .file("etc/.wh..wh.plnk", b"", 0o644)
            .finish();
        let dir = tempfile::tempdir().unwrap();
        unpack_layer(&tar[..], dir.path()).unwrap();
        let wh = fs::symlink_metadata(dir.path().join("etc/passwd")).unwrap();
        assert!(wh.file_type().is_char_device());
        assert_eq!(wh.rdev(), 0);
        assert!(!dir.path().join("etc/.wh.passwd").exists());
        assert!(!dir.path().join("etc/.wh..wh.plnk").exists());
        assert_eq!(
            get_xattr(&dir.path().join("var/cache"), OPAQUE_XATTR).unwrap(),
            Some(b"y".to_vec())
        );
        assert!(!dir.path().join("var/cache/.wh..wh..opq").exists());
        assert!(dir.path().join("var/cache/kept").exists());
        assert_eq!(
            get_xattr(&dir.path().join("etc"), OPAQUE_XATTR).unwrap(),
            None
        );
    }

    #[test]
    fn refuses_escapes() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "dotdot",
                TarBuilder::new().raw_file(b"../escape", b"x").finish(),
            ),
            (
                "nested dotdot",
                TarBuilder::new().raw_file(b"a/../../escape", b"x").finish(),
            ),
            (
                "through symlink",
                TarBuilder::new()
                    .symlink("link", "/tmp")
                    .file("link/escape", b"x", 0o644)
                    .finish(),
            ),
            (
                "hardlink outside",
                TarBuilder::new().hardlink("h", "../../etc/passwd").finish(),
            ),
        ];
        for (what, tar) in cases {
            let parent = tempfile::tempdir().unwrap();
            let dest = parent.path().join("layer");
            fs::create_dir(&dest).unwrap();
            let err = unpack_layer(&tar[..], &dest).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{what}: {err}");
            assert!(!parent.path().join("escape").exists(), "{what}");
            assert!(err.to_string().contains("refusing"), "{what}: {err}");
        }
    }

    #[test]
    fn later_entries_replace_earlier_ones() {
        let tar = TarBuilder::new()
            .file("x", b"file", 0o644)
            .dir("x")
            .file("x/y", b"y", 0o600)
            .dir("d")
            .file("d/z", b"z", 0o644)
            .file("d", b"now a file", 0o644)
            .finish();
        let dir = tempfile::tempdir().unwrap();
        unpack_layer(&tar[..], dir.path()).unwrap();
        assert!(dir.path().join("x").is_dir());
        assert_eq!(fs::read(dir.path().join("d")).unwrap(), b"now a file");
    }

    #[test]
    fn compression_detection() {
        assert_eq!(detect_compression(&[0x1f, 0x8b, 8]), Compression::Gzip);
        assert_eq!(
            detect_compression(&[0x28, 0xb5, 0x2f, 0xfd]),
            Compression::Zstd
        );
        assert_eq!(detect_compression(b"bin/\0\0"), Compression::None);
    }

    #[test]
    fn zstd_layer() {
        let tar = TarBuilder::new().file("a", b"zstd content", 0o644).finish();
        let mut compressed = Vec::new();
        // Two frames: a real layer compressor may emit several.
        let (first, second) = tar.split_at(tar.len() / 2);
        for part in [first, second] {
            compressed.extend(ruzstd::encoding::compress_to_vec(
                part,
                ruzstd::encoding::CompressionLevel::Fastest,
            ));
        }
        let dir = tempfile::tempdir().unwrap();
        let out = unpack_layer(&compressed[..], dir.path()).unwrap();
        assert_eq!(out.diff_id, super::super::digest::sha256_of(&tar));
        assert_eq!(fs::read(dir.path().join("a")).unwrap(), b"zstd content");
    }
}
