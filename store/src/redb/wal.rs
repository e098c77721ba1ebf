//! The write-ahead log in front of redb: what makes a write durable.
//!
//! The committer appends one record per batch and `fdatasync`s it before it answers any caller
//! of the batch; redb itself commits without fsync and is made durable only at checkpoints,
//! after which the log is emptied. One sequential append per batch costs far less than redb's
//! fsync of scattered pages, which is what lets a single writer beat etcd (which does the same
//! with its own WAL).
//!
//! File layout (`K1SWAL02`): a 4 KiB header block holding the 8-byte magic, then records
//! `len u32 LE | crc32 u32 LE | payload`, where the payload is a sequence of entries
//! `tag u8 | revision u64 LE | [len u32 LE | log record]` (tag 1: a change, carrying the `log`
//! table record of that revision; tag 2: compaction to `revision`). Records follow each other
//! while writes are dense; a **sparse** append (the previous one [`SPARSE_GAP`] or more ago) is
//! padded with zeros to the next 4 KiB boundary, so that the next sparse one starts on a page
//! of its own: an idle node's Lease renewal then dirties one 4 KiB page instead of re-dirtying
//! the page (or, on kernels with large page-cache folios, the 8–24 KiB folio) an earlier record
//! shares (issue #31). Padding needs no marker: no record has length 0, so zeros where a
//! record would start mean "continue at the next boundary". Dense appends stay packed (a new
//! block for each would cost every sync a block allocation: ~15 % of single-writer puts/s).
//! The file grows by [`PREALLOCATE`] at a time (`fallocate`): an append inside the allocated
//! size leaves the inode's size alone, and what the kernel charges an isolated append is its
//! one block, where an append that grows the file was charged 4–20 KiB (the inode's block,
//! dirtied again for the new size, in a large folio) — measured on 6.18/ext4, direct 4 KiB
//! writes 10 s apart: 7 KiB on average appending, 4 KiB each inside a preallocated region
//! (issue #31). A record length of 0 where a record would start is the end of the log (no
//! record is empty), so the zeros of the unused preallocation read as the end.
//! Records are only ever appended, and each is synced before the next, so a crash can only
//! tear the last one; replay stops at the first record that is incomplete or fails its
//! checksum and cuts the file there. A log of the first format (`K1SWAL01`: an 8-byte magic,
//! records packed) is still read; emptying it after its replay rewrites it in this format.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::Revision;

const MAGIC: &[u8; 8] = b"K1SWAL02";
/// The first format: records packed after the magic.
const MAGIC_V1: &[u8; 8] = b"K1SWAL01";
/// The alignment of sparse records, and the size of the header block.
const BLOCK: usize = 4096;
/// An append this long after the previous one is sparse: padded to a block boundary.
const SPARSE_GAP: std::time::Duration = std::time::Duration::from_secs(1);
/// How much the file grows at a time.
const PREALLOCATE: u64 = 1 << 20;
const TAG_CHANGE: u8 = 1;
const TAG_COMPACT: u8 = 2;

/// One entry of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalEntry {
    /// The change written at `revision`: the `log` table record (see `codec::encode_log`).
    Change { revision: Revision, record: Vec<u8> },
    /// Compaction to `revision`.
    Compact { revision: Revision },
}

/// Errors of the log file.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{path} is not a k1s write-ahead log (bad magic)")]
    BadMagic { path: PathBuf },
    #[error("{path} has a damaged record at byte {offset} followed by intact ones")]
    Damaged { path: PathBuf, offset: usize },
}

pub struct Wal {
    file: File,
    path: PathBuf,
    /// Bytes of records (with their padding) after the header block.
    end: u64,
    /// Bytes of the records themselves (what checkpoint thresholds count).
    bytes: u64,
    /// The file is of the first format: [`Wal::reset`] rewrites it before any append.
    legacy: bool,
    /// When the last record was appended.
    last_append: Option<std::time::Instant>,
    /// [`SPARSE_GAP`] (tests change it).
    sparse_gap: std::time::Duration,
    /// The file opened for direct I/O, for sparse appends that start on a block boundary:
    /// they bypass the page cache, so what the kernel charges the process (and writes) is
    /// the one block, whatever page-cache folio the page would have been part of (6.x
    /// kernels charge a dirtied large folio whole: 16–20 KiB per 4 KiB append measured).
    /// `None` where the filesystem refuses `O_DIRECT` (tmpfs).
    direct: Option<File>,
    /// The file's size: records, padding and preallocated zeros.
    allocated: u64,
    /// Whether the filesystem takes `fallocate` (else appends grow the file).
    preallocates: bool,
}

/// `path` opened for direct I/O, if the filesystem allows it.
fn open_direct(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .ok()
}

/// Writes `data` (whole blocks) at `at` (a block boundary) through the direct-I/O `file`,
/// from a block-aligned copy (what `O_DIRECT` requires of the buffer), and syncs it.
fn write_direct(file: &File, data: &[u8], at: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut raw = vec![0u8; data.len() + BLOCK];
    let off = raw.as_ptr().align_offset(BLOCK);
    let Some(aligned) = raw.get_mut(off..off + data.len()) else {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    };
    aligned.copy_from_slice(data);
    file.write_all_at(aligned, at)?;
    file.sync_data()
}

/// Grows `file` from `from` to `to` bytes with allocated, zeroed blocks, durably (the new size
/// must survive a crash before a record is acknowledged inside it).
fn preallocate(file: &File, from: u64, to: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (
        libc::off_t::try_from(from),
        libc::off_t::try_from(to - from),
    ) else {
        return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
    };
    // SAFETY: fallocate on an open descriptor this function borrows; no memory is passed.
    if unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    file.sync_all()
}

fn align(n: usize) -> usize {
    n.div_ceil(BLOCK) * BLOCK
}

/// A header block of the current format.
fn header() -> Vec<u8> {
    let mut h = vec![0u8; BLOCK];
    h[..MAGIC.len()].copy_from_slice(MAGIC);
    h
}

/// What [`Wal::open`] found.
pub struct Recovered {
    pub wal: Wal,
    pub entries: Vec<WalEntry>,
    /// Bytes of a torn last record that were cut off.
    pub torn_bytes: u64,
}

impl Wal {
    /// Opens (or creates) the log and reads back every complete record.
    pub fn open(path: &Path) -> Result<Recovered, WalError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let mut data = Vec::new();
        file.read_to_end(&mut data)?;
        // A new log; or a crash while it was created left a prefix of its header.
        if data.len() < BLOCK && header().starts_with(&data) {
            file.set_len(0)?;
            file.rewind()?;
            file.write_all(&header())?;
            file.sync_all()?;
            sync_dir(path)?;
            let wal = Wal {
                file,
                path: path.to_owned(),
                end: 0,
                bytes: 0,
                legacy: false,
                last_append: None,
                sparse_gap: SPARSE_GAP,
                direct: open_direct(path),
                allocated: BLOCK as u64,
                preallocates: true,
            };
            return Ok(Recovered {
                wal,
                entries: Vec::new(),
                torn_bytes: 0,
            });
        }
        let legacy = data.get(..MAGIC_V1.len()) == Some(MAGIC_V1.as_slice());
        if !legacy && data.get(..MAGIC.len()) != Some(MAGIC.as_slice()) {
            return Err(WalError::BadMagic {
                path: path.to_owned(),
            });
        }
        // Where records start; where the next one starts after a record ending at `end`
        // (packed, or at the next boundary after zero padding).
        let first = if legacy { MAGIC_V1.len() } else { BLOCK };
        let step = |end: usize| {
            if !legacy && data.get(end..end + 4) == Some(&[0u8; 4][..]) {
                align(end)
            } else {
                end
            }
        };
        let mut entries = Vec::new();
        let mut pos = first;
        let mut bytes = 0;
        while let Some((payload, end)) = next_record(&data, pos) {
            match decode_payload(payload) {
                Some(batch) => entries.extend(batch),
                None => break,
            }
            bytes += (end - pos) as u64;
            pos = step(end);
        }
        // A crash tears only the last record. A bad record with an intact one after it is
        // damage, not a crash: refuse rather than drop acknowledged writes.
        if let Some(len) = data.get(pos..pos + 4) {
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            let after = step(pos.saturating_add(8).saturating_add(len));
            if after < data.len() && next_record(&data, after).is_some() {
                return Err(WalError::Damaged {
                    path: path.to_owned(),
                    offset: pos,
                });
            }
        }
        // The last record may lack (part of) its padding: restore it, so that the next
        // append starts on a boundary. What follows the last record is cut: unused
        // preallocation (zeros), or a torn record (counted).
        let torn_bytes = data
            .get(pos..)
            .and_then(|rest| rest.iter().rposition(|b| *b != 0))
            .map_or(0, |last| last as u64 + 1);
        if data.len() != pos {
            file.set_len(pos as u64)?;
            file.sync_all()?;
        }
        file.seek(SeekFrom::Start(pos as u64))?;
        let wal = Wal {
            file,
            path: path.to_owned(),
            end: (pos - first) as u64,
            bytes,
            legacy,
            last_append: None,
            sparse_gap: SPARSE_GAP,
            direct: (!legacy).then(|| open_direct(path)).flatten(),
            allocated: pos as u64,
            preallocates: !legacy,
        };
        Ok(Recovered {
            wal,
            entries,
            torn_bytes,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of records in the log (their padding not counted).
    pub fn len(&self) -> u64 {
        self.bytes
    }

    /// Appends one batch and waits until it is on stable storage.
    pub fn append(&mut self, entries: &[WalEntry]) -> std::io::Result<()> {
        if self.legacy {
            return Err(std::io::Error::other(
                "the write-ahead log is of the first format: replay and reset it before appending",
            ));
        }
        if entries.is_empty() {
            return Ok(());
        }
        let mut payload = Vec::new();
        for e in entries {
            match e {
                WalEntry::Change { revision, record } => {
                    payload.push(TAG_CHANGE);
                    payload.extend_from_slice(&revision.to_le_bytes());
                    payload.extend_from_slice(&(record.len() as u32).to_le_bytes());
                    payload.extend_from_slice(record);
                }
                WalEntry::Compact { revision } => {
                    payload.push(TAG_COMPACT);
                    payload.extend_from_slice(&revision.to_le_bytes());
                }
            }
        }
        let record_len = 8 + payload.len() as u64;
        let sparse = self
            .last_append
            .is_none_or(|t| t.elapsed() >= self.sparse_gap);
        let mut buf = Vec::with_capacity(8 + payload.len() + BLOCK);
        buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        buf.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        buf.extend_from_slice(&payload);
        if sparse {
            // Offsets after the header block align as file offsets do.
            let end = self.end as usize + buf.len();
            buf.resize(buf.len() + (align(end) - end), 0);
        }
        let start = BLOCK as u64 + self.end;
        let needed = start + buf.len() as u64;
        if self.preallocates && needed > self.allocated {
            let to = needed.div_ceil(PREALLOCATE) * PREALLOCATE;
            match preallocate(&self.file, self.allocated, to) {
                Ok(()) => self.allocated = to,
                // Not on this filesystem: appends grow the file.
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => self.preallocates = false,
                Err(e) => return Err(e),
            }
        }
        let aligned = start.is_multiple_of(BLOCK as u64) && buf.len().is_multiple_of(BLOCK);
        let mut result = match &self.direct {
            Some(d) if sparse && aligned => Some(write_direct(d, &buf, start)),
            _ => None,
        };
        if result.as_ref().is_some_and(|r| {
            r.as_ref()
                .is_err_and(|e| e.raw_os_error() == Some(libc::EINVAL))
        }) {
            // The filesystem took the open but not the write: buffered from now on.
            self.direct = None;
            result = None;
        }
        let result = result.unwrap_or_else(|| {
            use std::os::unix::fs::FileExt;
            self.file
                .write_all_at(&buf, start)
                .and_then(|()| self.file.sync_data())
        });
        if let Err(e) = result {
            // Leave no partial record behind for the next append to follow.
            let _ = self.file.set_len(start);
            self.allocated = start;
            return Err(e);
        }
        self.end += buf.len() as u64;
        self.bytes += record_len;
        self.last_append = Some(std::time::Instant::now());
        Ok(())
    }

    /// Empties the log, once everything in it is durable in redb. A log of the first format
    /// is replaced by an empty one of the current format (written aside, then renamed over
    /// it, so a crash leaves one or the other).
    pub fn reset(&mut self) -> std::io::Result<()> {
        if self.legacy {
            let aside = self.path.with_extension("new");
            let mut f = File::create(&aside)?;
            f.write_all(&header())?;
            f.sync_all()?;
            std::fs::rename(&aside, &self.path)?;
            sync_dir(&self.path)?;
            self.file = OpenOptions::new().read(true).write(true).open(&self.path)?;
            self.direct = open_direct(&self.path);
            self.legacy = false;
            self.preallocates = true;
        } else {
            self.file.set_len(BLOCK as u64)?;
            self.file.sync_data()?;
        }
        self.allocated = BLOCK as u64;
        self.file.seek(SeekFrom::Start(BLOCK as u64))?;
        self.end = 0;
        self.bytes = 0;
        self.last_append = None;
        Ok(())
    }
}

/// The payload of the record at `pos` and the offset after it, if the record is complete and
/// its checksum matches.
fn next_record(data: &[u8], pos: usize) -> Option<(&[u8], usize)> {
    let header = data.get(pos..pos + 8)?;
    let len = u32::from_le_bytes(header[..4].try_into().ok()?) as usize;
    if len == 0 {
        // No record is empty: the end of the log (unused preallocation).
        return None;
    }
    let crc = u32::from_le_bytes(header[4..].try_into().ok()?);
    let start = pos + 8;
    let payload = data.get(start..start.checked_add(len)?)?;
    (crc32fast::hash(payload) == crc).then_some((payload, start + len))
}

fn decode_payload(mut p: &[u8]) -> Option<Vec<WalEntry>> {
    let mut out = Vec::new();
    while let Some((&tag, rest)) = p.split_first() {
        let revision = Revision::from_le_bytes(rest.get(..8)?.try_into().ok()?);
        p = &rest[8..];
        match tag {
            TAG_CHANGE => {
                let len = u32::from_le_bytes(p.get(..4)?.try_into().ok()?) as usize;
                let record = p.get(4..4 + len)?.to_vec();
                p = &p[4 + len..];
                out.push(WalEntry::Change { revision, record });
            }
            TAG_COMPACT => out.push(WalEntry::Compact { revision }),
            _ => return None,
        }
    }
    Some(out)
}

/// Makes a newly created file's directory entry durable.
fn sync_dir(path: &Path) -> std::io::Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(rev: Revision) -> WalEntry {
        WalEntry::Change {
            revision: rev,
            record: format!("record-{rev}").into_bytes(),
        }
    }

    /// A log whose every append is sparse (padded to a block boundary).
    fn sparse(path: &Path) -> Wal {
        let mut wal = Wal::open(path).unwrap().wal;
        wal.sparse_gap = std::time::Duration::ZERO;
        wal
    }

    /// A log holding the batches [2] and [3], each sparse.
    fn two_records() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let mut wal = sparse(&path);
        wal.append(&[change(2)]).unwrap();
        wal.append(&[change(3)]).unwrap();
        drop(wal);
        // Opening cuts the unused preallocation: the file is its records.
        drop(Wal::open(&path).unwrap());
        (dir, path)
    }

    /// The file's size once opened (which cuts the unused preallocation).
    fn opened_len(path: &Path) -> usize {
        drop(Wal::open(path).unwrap());
        std::fs::metadata(path).unwrap().len() as usize
    }

    #[test]
    fn appends_survive_reopen_and_reset_empties() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let mut wal = Wal::open(&path).unwrap().wal;
        wal.append(&[change(2), change(3)]).unwrap();
        wal.append(&[WalEntry::Compact { revision: 3 }, change(4)])
            .unwrap();
        drop(wal);
        let rec = Wal::open(&path).unwrap();
        assert_eq!(
            rec.entries,
            vec![
                change(2),
                change(3),
                WalEntry::Compact { revision: 3 },
                change(4)
            ]
        );
        assert_eq!(rec.torn_bytes, 0);
        let mut wal = rec.wal;
        wal.reset().unwrap();
        wal.append(&[change(5)]).unwrap();
        drop(wal);
        assert_eq!(Wal::open(&path).unwrap().entries, vec![change(5)]);
    }

    #[test]
    fn dense_appends_are_packed_and_sparse_ones_padded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let mut wal = Wal::open(&path).unwrap().wal;
        wal.sparse_gap = std::time::Duration::from_secs(3600);
        // The first append of a log is sparse; the ones right after it are dense.
        for rev in 2..6 {
            wal.append(&[change(rev)]).unwrap();
        }
        let one = 8 + 21;
        assert_eq!(BLOCK + wal.end as usize, 2 * BLOCK + 3 * one);
        // A sparse one after dense ones ends on a boundary.
        wal.sparse_gap = std::time::Duration::ZERO;
        wal.append(&[change(6)]).unwrap();
        wal.append(&[change(7)]).unwrap();
        drop(wal);
        assert_eq!(opened_len(&path), 4 * BLOCK);
        assert_eq!(
            Wal::open(&path).unwrap().entries,
            (2..8).map(change).collect::<Vec<_>>()
        );
    }

    #[test]
    fn records_start_on_block_boundaries() {
        let (_dir, path) = two_records();
        let data = std::fs::read(&path).unwrap();
        // Header block, then one block per small record.
        assert_eq!(data.len(), 3 * BLOCK);
        assert_eq!(&data[..MAGIC.len()], MAGIC);
        for start in [BLOCK, 2 * BLOCK] {
            assert!(next_record(&data, start).is_some(), "a record at {start}");
        }
        // A record longer than a block takes whole blocks, and the next starts after them.
        let mut wal = sparse(&path);
        let big = WalEntry::Change {
            revision: 4,
            record: vec![7u8; BLOCK + 100],
        };
        wal.append(std::slice::from_ref(&big)).unwrap();
        wal.append(&[change(5)]).unwrap();
        drop(wal);
        assert_eq!(opened_len(&path), 6 * BLOCK);
        assert_eq!(
            Wal::open(&path).unwrap().entries,
            vec![change(2), change(3), big, change(5)]
        );
    }

    #[test]
    fn a_torn_or_damaged_tail_is_cut_off() {
        let (_dir, path) = two_records();
        let full = std::fs::read(&path).unwrap();
        let last = 2 * BLOCK;
        let record_end = last + 8 + 9 + 4 + "record-3".len();
        // Cut anywhere inside the last record: it is gone, the first stays.
        for cut in [last + 1, last + 7, last + 12, record_end - 1] {
            std::fs::write(&path, &full[..cut]).unwrap();
            let rec = Wal::open(&path).unwrap();
            assert_eq!(rec.entries, vec![change(2)], "cut at {cut}");
            assert!(rec.torn_bytes > 0);
            // The cut-off file takes appends again, on a boundary.
            let mut wal = rec.wal;
            wal.sparse_gap = std::time::Duration::ZERO;
            wal.append(&[change(3)]).unwrap();
            drop(wal);
            assert_eq!(
                Wal::open(&path).unwrap().entries,
                vec![change(2), change(3)]
            );
        }
        // The record whole but its padding lost: it counts, and the padding comes back.
        std::fs::write(&path, &full[..record_end]).unwrap();
        let rec = Wal::open(&path).unwrap();
        assert_eq!(rec.entries, vec![change(2), change(3)]);
        let mut wal = rec.wal;
        wal.sparse_gap = std::time::Duration::ZERO;
        wal.append(&[change(4)]).unwrap();
        drop(wal);
        assert_eq!(
            Wal::open(&path).unwrap().entries,
            vec![change(2), change(3), change(4)]
        );
        let mut flipped = full.clone();
        flipped[record_end - 2] ^= 0xff;
        std::fs::write(&path, &flipped).unwrap();
        assert_eq!(Wal::open(&path).unwrap().entries, vec![change(2)]);
    }

    #[test]
    fn the_file_grows_by_preallocation_and_its_zeros_read_as_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let mut wal = Wal::open(&path).unwrap().wal;
        wal.sparse_gap = std::time::Duration::ZERO;
        for rev in 2..5 {
            wal.append(&[change(rev)]).unwrap();
        }
        let len = std::fs::metadata(&path).unwrap().len();
        if wal.preallocates {
            // Three sparse records and the header: four blocks used of one allocation.
            assert_eq!(len, PREALLOCATE);
        }
        // Records past the first allocation take the next one.
        let big = WalEntry::Change {
            revision: 5,
            record: vec![7u8; PREALLOCATE as usize],
        };
        wal.append(std::slice::from_ref(&big)).unwrap();
        if wal.preallocates {
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * PREALLOCATE);
        }
        drop(wal);
        let rec = Wal::open(&path).unwrap();
        let mut expected: Vec<_> = (2..5).map(change).collect();
        expected.push(big);
        assert_eq!(rec.entries, expected);
        assert_eq!(
            rec.torn_bytes, 0,
            "unused preallocation is not a torn record"
        );
        // A torn record inside the preallocated zeros is cut off and counted.
        let mut wal = rec.wal;
        wal.append(&[change(6)]).unwrap();
        let end = BLOCK + wal.end as usize;
        drop(wal);
        let mut data = std::fs::read(&path).unwrap();
        data[end..end + 4].copy_from_slice(&100u32.to_le_bytes());
        data[end + 4..end + 12].copy_from_slice(&[9u8; 8]);
        std::fs::write(&path, &data).unwrap();
        let rec = Wal::open(&path).unwrap();
        assert_eq!(rec.entries.last(), Some(&change(6)));
        assert_eq!(rec.torn_bytes, 12);
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, end);
    }

    #[test]
    fn damage_before_intact_records_is_an_error() {
        let (_dir, path) = two_records();
        let mut data = std::fs::read(&path).unwrap();
        data[BLOCK + 10] ^= 0xff; // inside the first record's payload
        std::fs::write(&path, &data).unwrap();
        assert!(matches!(Wal::open(&path), Err(WalError::Damaged { .. })));
    }

    #[test]
    fn a_foreign_file_is_refused_and_a_torn_header_started_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        std::fs::write(&path, b"hello world, not a wal").unwrap();
        assert!(matches!(Wal::open(&path), Err(WalError::BadMagic { .. })));
        std::fs::write(&path, &MAGIC[..5]).unwrap();
        let rec = Wal::open(&path).unwrap();
        assert!(rec.entries.is_empty());
        let mut wal = rec.wal;
        wal.append(&[change(2)]).unwrap();
        drop(wal);
        assert_eq!(Wal::open(&path).unwrap().entries, vec![change(2)]);
    }

    /// A log of the first format (packed records after `K1SWAL01`), as k1s wrote it before.
    fn legacy_log(path: &Path, batches: &[&[WalEntry]]) {
        let mut data = MAGIC_V1.to_vec();
        for batch in batches {
            let mut payload = Vec::new();
            for e in *batch {
                if let WalEntry::Change { revision, record } = e {
                    payload.push(TAG_CHANGE);
                    payload.extend_from_slice(&revision.to_le_bytes());
                    payload.extend_from_slice(&(record.len() as u32).to_le_bytes());
                    payload.extend_from_slice(record);
                }
            }
            data.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            data.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
            data.extend_from_slice(&payload);
        }
        std::fs::write(path, data).unwrap();
    }

    #[test]
    fn a_first_format_log_is_read_then_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        legacy_log(&path, &[&[change(2)], &[change(3), change(4)]]);
        let rec = Wal::open(&path).unwrap();
        assert_eq!(rec.entries, vec![change(2), change(3), change(4)]);
        let mut wal = rec.wal;
        // No append before the replay's reset.
        assert!(wal.append(&[change(5)]).is_err());
        wal.reset().unwrap();
        wal.append(&[change(5)]).unwrap();
        drop(wal);
        let data = std::fs::read(&path).unwrap();
        assert_eq!(&data[..MAGIC.len()], MAGIC);
        assert_eq!(Wal::open(&path).unwrap().entries, vec![change(5)]);
    }
}
