//! The single writer of the redb file: group commit.
//!
//! Every write request goes through one channel to one thread. The thread takes everything that
//! is queued (up to `max_batch`), applies the requests in order inside **one** write transaction,
//! appends the batch to the write-ahead log with one `fdatasync`, commits the transaction
//! (without fsync: the log made it durable), then answers every caller and publishes the batch's
//! events to the watch hub. While it waits on the disk, new requests queue up and form the next
//! batch, so the number of syncs per write falls as concurrency grows.
//!
//! Checkpoints make redb itself durable (a commit with fsync) and empty the log: when the log
//! passes [`CHECKPOINT_BYTES`]; every [`CHECKPOINT_INTERVAL`] while writes keep coming (at
//! least [`BUSY_BATCHES`] batches logged, one per [`BUSY_RATE`] or faster); when the writer falls idle after a burst (the log
//! holds [`IDLE_CHECKPOINT_BYTES`]); when the oldest logged batch is [`CHECKPOINT_MAX_AGE`]
//! old; and on shutdown. A checkpoint's own batch skips the log. Sparse writes (an idle
//! node's lease every 10 s) thus cost one small log append each, not a durable redb commit of
//! every page they touch: what keeps an idle server's disk writes low (issue #31).
//!
//! A request whose precondition fails (exists, conflict, not found) fails alone; the others in
//! the batch still commit. A failure of the transaction itself (I/O, full disk) fails every
//! request of the batch, and none of them is acknowledged or published.
//!
//! The thread also purges the log below the compacted revision, a chunk per transaction, so a
//! large compaction never stalls writers.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use redb::{Database, Durability, ReadableTable, Table, WriteTransaction};
use tokio::sync::oneshot;

use super::codec::{LogRecord, encode_kv, encode_log};
use super::hub::{Batch, Hub};
use super::values;
use super::wal::{Wal, WalEntry};
use super::{
    KV, LOG, META, META_COMPACT, META_PURGED, META_REVISION, RedbResultExt, io_error, map_redb,
};
use crate::{Event, EventKind, KeyValue, Result, Revision, StoreError, check_key};

/// Log entries removed per transaction while purging compacted history.
const PURGE_CHUNK: usize = 4096;

/// The longest a batch waits for the writers of the previous batch to come back.
const LINGER: Duration = Duration::from_micros(250);

/// Checkpoint once the write-ahead log holds this much.
const CHECKPOINT_BYTES: u64 = 16 << 20;
/// Checkpoint at least this often while writes keep coming.
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(500);
/// Writes "keep coming" once this many batches went to the log since the last checkpoint, at
/// [`BUSY_RATE`] or faster.
const BUSY_BATCHES: u64 = 32;
/// At least one batch per this long, on average since the oldest logged one. Slower writers
/// (an idle node's Lease every 10 s: 32 batches in 5 minutes) are left to
/// [`CHECKPOINT_MAX_AGE`]; without this bound they checkpointed every 32 batches, ~170 KiB of
/// redb pages each time (issue #31).
const BUSY_RATE: Duration = Duration::from_secs(1);
/// How long the writer must be idle before it checkpoints a burst.
const CHECKPOINT_IDLE: Duration = Duration::from_millis(50);
/// A log this large is checkpointed once the writer is idle.
const IDLE_CHECKPOINT_BYTES: u64 = 256 << 10;
/// Nothing stays in the log longer than this. An idle node's heartbeats fill the log by
/// ~8 KiB a minute and each checkpoint writes ~150 KiB of redb pages (strace): ~30 KB a
/// minute at 5 minutes beside the heartbeats' ~45–65 KB of log appends (issue #31), ~10 KB at
/// 15; recovery replays at most ~120 KiB of log. redb cannot reuse pages freed between
/// checkpoints; at idle the data directory still stayed at 0.7 MiB over 30 minutes
/// (`k1s bench idle --kubelet`).
const CHECKPOINT_MAX_AGE: Duration = Duration::from_secs(15 * 60);

pub enum Op {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Revision,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
    Compact {
        revision: Revision,
    },
}

pub enum Done {
    Written(Revision),
    Deleted(Revision, KeyValue),
    Compacted,
}

pub struct Request {
    pub op: Op,
    pub reply: oneshot::Sender<Result<Done>>,
}

pub struct Committer {
    pub db: Arc<Database>,
    pub path: PathBuf,
    pub hub: Arc<Hub>,
    pub rx: Receiver<Request>,
    pub max_batch: usize,
    /// The last committed revision.
    pub revision: Revision,
    /// The committed compacted revision.
    pub compacted: Revision,
    /// The log records up to this revision have been purged (see [`Committer::purge`]).
    pub purged: Revision,
    /// True while `purged` is below `compacted`.
    pub purge_pending: bool,
    /// The first fatal error (I/O, full disk). redb refuses further writes after one, so every
    /// later write gets this error until k1s restarts.
    pub failed: Option<StoreError>,
    /// The size of the previous batch: how many writers are likely to send again soon.
    pub last_batch: usize,
    pub wal: Wal,
    /// When the first batch since the last checkpoint went to the log, and how many did.
    pub logged_since: Option<Instant>,
    pub logged_batches: u64,
    /// Called before the thread blocks with nothing queued ([`super::RedbConfig::on_idle`]).
    pub on_idle: Option<fn()>,
}

impl Committer {
    pub fn run(mut self) {
        loop {
            let first = match self.rx.try_recv() {
                Ok(r) => Some(r),
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {
                    if let Some(on_idle) = self.on_idle {
                        on_idle();
                    }
                    if let Some(wait) = self.idle_wait() {
                        match self.rx.recv_timeout(wait) {
                            Ok(r) => Some(r),
                            Err(RecvTimeoutError::Timeout) => None,
                            Err(RecvTimeoutError::Disconnected) => break,
                        }
                    } else {
                        match self.rx.recv() {
                            Ok(r) => Some(r),
                            Err(_) => break,
                        }
                    }
                }
            };
            let mut batch: Vec<Request> = first.into_iter().collect();
            self.gather(&mut batch);
            self.last_batch = batch.len();
            self.commit_batch(batch);
        }
        if self.failed.is_none() && self.wal.len() > 0 {
            self.commit_batch(Vec::new());
        }
        tracing::debug!(path = %self.path.display(), "store committer stopped");
    }

    /// How long to wait for a write before the idle checkpoint (or purge) is due; `None`:
    /// nothing to do until a write comes.
    fn idle_wait(&self) -> Option<Duration> {
        if self.failed.is_some() {
            return None;
        }
        if self.purge_pending {
            return Some(CHECKPOINT_IDLE);
        }
        let since = self.logged_since?;
        if self.wal.len() >= IDLE_CHECKPOINT_BYTES {
            return Some(CHECKPOINT_IDLE);
        }
        Some(
            CHECKPOINT_MAX_AGE
                .saturating_sub(since.elapsed())
                .max(CHECKPOINT_IDLE),
        )
    }

    /// Fills `batch` with what is queued. The callers answered by the previous commit are
    /// usually about to send their next write, so when that batch had more than one request
    /// this waits up to [`LINGER`] for as many to arrive: without it the woken writers miss the
    /// next transaction and batches stay small under load.
    fn gather(&mut self, batch: &mut Vec<Request>) {
        let target = self.last_batch.min(self.max_batch);
        let deadline = Instant::now() + LINGER;
        while batch.len() < self.max_batch {
            match self.rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) if batch.is_empty() || batch.len() >= target => return,
                Err(_) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return;
                    }
                    match self.rx.recv_timeout(deadline - now) {
                        Ok(r) => batch.push(r),
                        Err(_) => return,
                    }
                }
            }
        }
    }

    fn commit_batch(&mut self, batch: Vec<Request>) {
        if let Some(err) = &self.failed {
            for req in batch {
                let _ = req.reply.send(Err(err.duplicate()));
            }
            return;
        }
        let (revision, compacted, purged) = (self.revision, self.compacted, self.purged);
        let mut events = Vec::new();
        let mut results = Vec::with_capacity(batch.len());
        let mut logged = Vec::new();
        // An empty batch is the idle (or shutdown) checkpoint.
        let checkpoint = batch.is_empty()
            || self.wal.len() >= CHECKPOINT_BYTES
            || self
                .logged_since
                .is_some_and(|t| checkpoint_due(t.elapsed(), self.logged_batches));
        let outcome = self.begin(checkpoint).and_then(|txn| {
            self.apply_all(&txn, &batch, &mut events, &mut results, &mut logged)?;
            if !checkpoint && !logged.is_empty() {
                self.wal
                    .append(&logged)
                    .map_err(|e| io_error(self.wal.path(), e))?;
                self.logged_since.get_or_insert_with(Instant::now);
                self.logged_batches += 1;
            }
            txn.commit().map_err(|e| map_redb(&self.path, e))?;
            if checkpoint {
                self.wal.reset().map_err(|e| io_error(self.wal.path(), e))?;
                self.logged_since = None;
                self.logged_batches = 0;
            }
            Ok(())
        });
        match outcome {
            Ok(()) => {
                if let Some(last) = events.last() {
                    let revision = last.revision();
                    self.hub.publish(Batch { events, revision });
                }
                for (req, res) in batch.into_iter().zip(results) {
                    let _ = req.reply.send(res);
                }
            }
            Err(err) => {
                // Nothing of this batch is on disk: roll the counters back and fail every caller.
                self.revision = revision;
                self.compacted = compacted;
                self.purged = purged;
                self.purge_pending = purged < compacted;
                tracing::error!(error = %err, "store write transaction failed");
                for req in batch {
                    let _ = req.reply.send(Err(err.duplicate()));
                }
                if matches!(err, StoreError::DiskFull { .. } | StoreError::Io { .. }) {
                    self.failed = Some(err);
                }
            }
        }
    }

    fn begin(&self, durable: bool) -> Result<WriteTransaction> {
        let mut txn = self.db.begin_write().map_err(|e| map_redb(&self.path, e))?;
        let durability = if durable {
            Durability::Immediate
        } else {
            Durability::None
        };
        txn.set_durability(durability)
            .map_err(|e| map_redb(&self.path, e))?;
        Ok(txn)
    }

    fn apply_all(
        &mut self,
        txn: &WriteTransaction,
        batch: &[Request],
        events: &mut Vec<Event>,
        results: &mut Vec<Result<Done>>,
        logged: &mut Vec<WalEntry>,
    ) -> Result<()> {
        let path = self.path.clone();
        let mut kv = txn.open_table(KV).at(&path)?;
        let mut log = txn.open_table(LOG).at(&path)?;
        for req in batch {
            let res = self.apply(&mut kv, &mut log, &req.op, events, logged)?;
            results.push(res);
        }
        if self.purge_pending {
            self.purge(&mut log)?;
        }
        let mut meta = txn.open_table(META).at(&path)?;
        meta.insert(META_REVISION, self.revision as u64).at(&path)?;
        meta.insert(META_COMPACT, self.compacted as u64).at(&path)?;
        meta.insert(META_PURGED, self.purged as u64).at(&path)?;
        Ok(())
    }

    /// Applies one request. The outer `Result` is a failure of the transaction; the inner one
    /// is this request's own answer.
    fn apply(
        &mut self,
        kv: &mut Table<'_, &'static str, &'static [u8]>,
        log: &mut Table<'_, u64, &'static [u8]>,
        op: &Op,
        events: &mut Vec<Event>,
        logged: &mut Vec<WalEntry>,
    ) -> Result<Result<Done>> {
        let path = &self.path;
        // `put`: the new value, or `None` for a delete.
        let (key, expected, put) = match op {
            Op::Compact { revision } => {
                let res = self.compact(*revision);
                if res.is_ok() {
                    logged.push(WalEntry::Compact {
                        revision: *revision,
                    });
                }
                return Ok(res);
            }
            Op::Create { key, value } => (key, None, Some(value)),
            Op::Update {
                key,
                value,
                expected,
            } => (key, Some(*expected), Some(value)),
            Op::Delete { key, expected } => (key, *expected, None),
        };
        if let Err(e) = check_key(key) {
            return Ok(Err(e));
        }
        // `(create, mod)` of the key's current revision.
        let current = values::revisions(&*kv, path, key)?;
        let precondition = match (op, current) {
            (Op::Create { .. }, Some(_)) => Err(StoreError::AlreadyExists { key: key.clone() }),
            (Op::Create { .. }, None) => Ok(()),
            (_, None) => Err(StoreError::NotFound { key: key.clone() }),
            (_, Some((_, modified))) => match expected {
                Some(exp) if exp != modified => Err(StoreError::Conflict {
                    key: key.clone(),
                    expected: exp,
                    actual: modified,
                }),
                _ => Ok(()),
            },
        };
        if let Err(e) = precondition {
            return Ok(Err(e));
        }
        // The previous state, for the event and a delete's answer.
        let prev = match current {
            Some((create_revision, mod_revision)) => Some(KeyValue {
                key: key.clone(),
                value: values::value_at(&*log, path, key, mod_revision)?,
                create_revision,
                mod_revision,
            }),
            None => None,
        };
        let rev = self.revision + 1;
        let (event, done) = match (put, prev) {
            (Some(value), prev) => {
                let create = current.map_or(rev, |(c, _)| c);
                kv.insert(key.as_str(), encode_kv(create, rev).as_slice())
                    .at(path)?;
                let rec = encode_log(EventKind::Put, key, create, value, current);
                log.insert(rev as u64, rec.as_slice()).at(path)?;
                logged.push(WalEntry::Change {
                    revision: rev,
                    record: rec,
                });
                let event = Event {
                    kind: EventKind::Put,
                    kv: KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                        create_revision: create,
                        mod_revision: rev,
                    },
                    prev,
                };
                (event, Done::Written(rev))
            }
            (None, Some(prev)) => {
                kv.remove(key.as_str()).at(path)?;
                let rec = encode_log(EventKind::Delete, key, 0, b"", current);
                log.insert(rev as u64, rec.as_slice()).at(path)?;
                logged.push(WalEntry::Change {
                    revision: rev,
                    record: rec,
                });
                let event = Event {
                    kind: EventKind::Delete,
                    kv: KeyValue {
                        key: key.clone(),
                        value: Bytes::new(),
                        create_revision: 0,
                        mod_revision: rev,
                    },
                    prev: Some(prev.clone()),
                };
                (event, Done::Deleted(rev, prev))
            }
            // Ruled out by the precondition above.
            (None, None) => return Ok(Err(StoreError::NotFound { key: key.clone() })),
        };
        self.revision = rev;
        events.push(event);
        Ok(Ok(done))
    }

    fn compact(&mut self, revision: Revision) -> Result<Done> {
        if revision <= self.compacted {
            return Err(StoreError::Compacted {
                requested: revision,
                compacted: self.compacted,
            });
        }
        if revision > self.revision {
            return Err(StoreError::FutureRevision {
                requested: revision,
                current: self.revision,
            });
        }
        self.compacted = revision;
        self.purge_pending = true;
        Ok(Done::Compacted)
    }

    /// Purges the log up to the compacted revision R, [`PURGE_CHUNK`] records per transaction,
    /// by etcd's rule: what remains of each key at or below R is its latest revision there,
    /// unless that is a delete. So for each record r ≤ R in order, the revision it superseded
    /// goes (r names it), and r itself goes if it is a delete. A put that is the latest at or
    /// below R stays: it is the key's current value, or the previous value of a change after R
    /// that a watch or a list at R may still read.
    fn purge(&mut self, log: &mut Table<'_, u64, &'static [u8]>) -> Result<()> {
        let path = self.path.clone();
        let upto = self.compacted as u64;
        let mut gone: Vec<u64> = Vec::new();
        let (mut seen, mut last) = (0, self.purged as u64);
        for entry in log
            .range(self.purged as u64 + 1..=upto)
            .at(&path)?
            .take(PURGE_CHUNK)
        {
            let (rev, rec) = entry.at(&path)?;
            let rec = LogRecord::parse(rec.value()).map_err(|e| values::malformed(&path, e))?;
            gone.extend(rec.prev.revision().map(|p| p as u64));
            if rec.kind == EventKind::Delete {
                gone.push(rev.value());
            }
            (seen, last) = (seen + 1, rev.value());
        }
        for rev in gone {
            log.remove(rev).at(&path)?;
        }
        // A full chunk may have more after it; otherwise every record up to R was seen.
        self.purged = if seen == PURGE_CHUNK && last < upto {
            last as Revision
        } else {
            self.compacted
        };
        self.purge_pending = self.purged < self.compacted;
        Ok(())
    }
}

/// Whether the log's oldest batch, `age` old, with `batches` logged since the last
/// checkpoint, calls for a checkpoint now (the size thresholds aside).
fn checkpoint_due(age: Duration, batches: u64) -> bool {
    let busy = batches >= BUSY_BATCHES
        && age <= BUSY_RATE.saturating_mul(u32::try_from(batches).unwrap_or(u32::MAX));
    age >= CHECKPOINT_MAX_AGE || (busy && age >= CHECKPOINT_INTERVAL)
}

#[cfg(test)]
mod policy_tests {
    use super::*;

    #[test]
    fn checkpoints_while_busy_or_when_old_not_every_32_heartbeats() {
        let ms = Duration::from_millis;
        // Sustained writes: every 500 ms.
        assert!(checkpoint_due(ms(500), 400));
        assert!(!checkpoint_due(ms(400), 400));
        // Few batches: not busy yet.
        assert!(!checkpoint_due(ms(600), 10));
        // An idle node's Lease every 10 s: 32 batches in 320 s is not busy.
        assert!(!checkpoint_due(Duration::from_secs(320), 32));
        assert!(!checkpoint_due(Duration::from_secs(14 * 60), 84));
        assert!(checkpoint_due(CHECKPOINT_MAX_AGE, 90));
        // A steady batch a second still counts as busy.
        assert!(checkpoint_due(Duration::from_secs(40), 40));
    }
}
