//! The write-ahead log in front of redb: what makes a write durable.
//!
//! The committer appends one record per batch and `fdatasync`s it before it answers any caller
//! of the batch; redb itself commits without fsync and is made durable only at checkpoints,
//! after which the log is emptied. One sequential append per batch costs far less than redb's
//! fsync of scattered pages, which is what lets a single writer beat etcd (which does the same
//! with its own WAL).
//!
//! File layout: an 8-byte magic, then records `len u32 LE | crc32 u32 LE | payload`, where the
//! payload is a sequence of entries `tag u8 | revision u64 LE | [len u32 LE | log record]`
//! (tag 1: a change, carrying the `log` table record of that revision; tag 2: compaction to
//! `revision`). Records are only ever appended, and each is synced before the next, so a crash
//! can only tear the last one; replay stops at the first record that is incomplete or fails its
//! checksum and cuts the file there.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::Revision;

const MAGIC: &[u8; 8] = b"K1SWAL01";
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
    /// Bytes of records after the magic.
    len: u64,
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
        if data.is_empty() {
            file.write_all(MAGIC)?;
            file.sync_all()?;
            sync_dir(path)?;
            let wal = Wal {
                file,
                path: path.to_owned(),
                len: 0,
            };
            return Ok(Recovered {
                wal,
                entries: Vec::new(),
                torn_bytes: 0,
            });
        }
        if data.len() < MAGIC.len() || &data[..MAGIC.len()] != MAGIC {
            return Err(WalError::BadMagic {
                path: path.to_owned(),
            });
        }
        let mut entries = Vec::new();
        let mut pos = MAGIC.len();
        while let Some((payload, next)) = next_record(&data, pos) {
            match decode_payload(payload) {
                Some(batch) => entries.extend(batch),
                None => break,
            }
            pos = next;
        }
        // A crash tears only the last record. A bad record with an intact one after it is
        // damage, not a crash: refuse rather than drop acknowledged writes.
        if let Some(len) = data.get(pos..pos + 4) {
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            let after = pos.saturating_add(8).saturating_add(len);
            if after < data.len() && next_record(&data, after).is_some() {
                return Err(WalError::Damaged {
                    path: path.to_owned(),
                    offset: pos,
                });
            }
        }
        let torn_bytes = (data.len() - pos) as u64;
        if torn_bytes > 0 {
            file.set_len(pos as u64)?;
            file.sync_all()?;
        }
        file.seek(SeekFrom::Start(pos as u64))?;
        let wal = Wal {
            file,
            path: path.to_owned(),
            len: (pos - MAGIC.len()) as u64,
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

    /// Bytes of records in the log.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Appends one batch and waits until it is on stable storage.
    pub fn append(&mut self, entries: &[WalEntry]) -> std::io::Result<()> {
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
        let mut buf = Vec::with_capacity(8 + payload.len());
        buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        buf.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        buf.extend_from_slice(&payload);
        if let Err(e) = self
            .file
            .write_all(&buf)
            .and_then(|()| self.file.sync_data())
        {
            // Leave no partial record behind for the next append to follow.
            let _ = self.file.set_len(MAGIC.len() as u64 + self.len);
            let _ = self
                .file
                .seek(SeekFrom::Start(MAGIC.len() as u64 + self.len));
            return Err(e);
        }
        self.len += buf.len() as u64;
        Ok(())
    }

    /// Empties the log, once everything in it is durable in redb.
    pub fn reset(&mut self) -> std::io::Result<()> {
        self.file.set_len(MAGIC.len() as u64)?;
        self.file.seek(SeekFrom::Start(MAGIC.len() as u64))?;
        self.file.sync_data()?;
        self.len = 0;
        Ok(())
    }
}

/// The payload of the record at `pos` and the offset after it, if the record is complete and
/// its checksum matches.
fn next_record(data: &[u8], pos: usize) -> Option<(&[u8], usize)> {
    let header = data.get(pos..pos + 8)?;
    let len = u32::from_le_bytes(header[..4].try_into().ok()?) as usize;
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

    /// A log holding the batches [2] and [3].
    fn two_records() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let mut wal = Wal::open(&path).unwrap().wal;
        wal.append(&[change(2)]).unwrap();
        wal.append(&[change(3)]).unwrap();
        (dir, path)
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
    fn a_torn_or_damaged_tail_is_cut_off() {
        let (_dir, path) = two_records();
        let full = std::fs::read(&path).unwrap();
        for cut in 1..12 {
            std::fs::write(&path, &full[..full.len() - cut]).unwrap();
            let rec = Wal::open(&path).unwrap();
            assert_eq!(rec.entries, vec![change(2)], "cut {cut}");
            assert!(rec.torn_bytes > 0);
            // The cut-off file takes appends again.
            let mut wal = rec.wal;
            wal.append(&[change(3)]).unwrap();
            drop(wal);
            assert_eq!(
                Wal::open(&path).unwrap().entries,
                vec![change(2), change(3)]
            );
        }
        let mut flipped = full.clone();
        let last = flipped.len() - 2;
        flipped[last] ^= 0xff;
        std::fs::write(&path, &flipped).unwrap();
        assert_eq!(Wal::open(&path).unwrap().entries, vec![change(2)]);
    }

    #[test]
    fn damage_before_intact_records_is_an_error() {
        let (_dir, path) = two_records();
        let mut data = std::fs::read(&path).unwrap();
        data[MAGIC.len() + 10] ^= 0xff; // inside the first record's payload
        std::fs::write(&path, &data).unwrap();
        assert!(matches!(Wal::open(&path), Err(WalError::Damaged { .. })));
    }

    #[test]
    fn a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        std::fs::write(&path, b"hello world, not a wal").unwrap();
        assert!(matches!(Wal::open(&path), Err(WalError::BadMagic { .. })));
    }
}
