//! redb-specific behaviour beyond the shared contract: disk use stays bounded under churn when
//! compaction runs, a slow watcher is ended (not stalled, not skipped) once its buffer is full,
//! and state survives a clean restart.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use k1s_store::compactor::{self, CompactionPolicy};
use k1s_store::redb::{RedbConfig, RedbStore};
use k1s_store::{Store, StoreError, WatchItem, WatchOptions};

/// Updates `keys` keys round-robin `rounds` times with 1 KiB values.
async fn churn(store: &Arc<dyn Store>, keys: usize, rounds: usize) {
    let value = Bytes::from(vec![b'c'; 1024]);
    let mut tasks = Vec::new();
    for w in 0..8 {
        let (store, value) = (store.clone(), value.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                for k in (w..keys).step_by(8) {
                    let key = format!("/churn/{k:04}");
                    match store.get(&key).await.unwrap() {
                        None => store.create(&key, value.clone()).await.unwrap(),
                        Some(kv) => store
                            .update(&key, value.clone(), kv.mod_revision)
                            .await
                            .unwrap(),
                    };
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_keeps_disk_use_bounded_under_churn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let store: Arc<dyn Store> = Arc::new(RedbStore::open(RedbConfig::new(&path)).unwrap());
    let cancel = tokio_util::sync::CancellationToken::new();
    let policy = CompactionPolicy {
        keep_revisions: 2_000,
        keep_for: Duration::ZERO,
        interval: Duration::from_millis(50),
    };
    let compactor = tokio::spawn(compactor::run(store.clone(), policy, cancel.clone()));

    let size = || std::fs::metadata(&path).unwrap().len();
    // 200 live keys of 1 KiB; every round rewrites all of them (200 writes, ~600 KiB logged).
    let mut sizes = Vec::new();
    for _ in 0..6 {
        churn(&store, 200, 50).await;
        sizes.push(size());
    }
    cancel.cancel();
    compactor.await.unwrap();
    let head = store.current_revision().await.unwrap();
    eprintln!("file size after each 10k writes (of {head}): {sizes:?}");
    assert!(head > 60_000);
    // Without compaction this run leaves a 269 MB file (measured: 67, 135, 135, 269, 269, 269
    // MB after each 10k writes). With it, the file holds the live keys plus the 2,000 kept
    // revisions and redb reuses freed pages: 17 MB, or 34 MB when a loaded machine delays the
    // compactor and checkpoints (freed pages are reusable only after a durable commit), and
    // redb grows its file in doubling steps. So the bound is on size, not on "no growth".
    let last = sizes[5];
    assert!(
        last < 64 << 20,
        "file is {last} bytes after 60k writes under compaction: {sizes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_watcher_is_ended_without_blocking_writers() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RedbConfig::new(dir.path().join("state.redb"));
    cfg.watch_buffer = 4;
    let store = Arc::new(RedbStore::open(cfg).unwrap());
    let from = store.current_revision().await.unwrap();
    let opts = WatchOptions {
        progress_interval: None,
    };
    let mut slow = store.watch("/s/", from, opts.clone());
    // Let it go live (it subscribes on its first poll).
    assert!(
        tokio::time::timeout(Duration::from_millis(100), slow.next())
            .await
            .is_err()
    );
    // A reading watcher beside it: with the same tiny buffer it may also fall behind on a
    // loaded machine; like a client, it then resumes from the last revision it saw.
    let reader = {
        let store = store.clone();
        tokio::spawn(async move {
            let (mut last, mut n, mut resumed) = (from, 0, 0);
            let mut fast = store.watch("/s/", last, opts.clone());
            while n < 500 {
                match fast.next().await {
                    Some(Ok(WatchItem::Event(e))) => {
                        assert_eq!(e.revision(), last + 1, "gap");
                        last = e.revision();
                        n += 1;
                    }
                    Some(Ok(WatchItem::Progress(_))) => {}
                    Some(Err(StoreError::WatcherTooSlow { .. })) => {
                        resumed += 1;
                        fast = store.watch("/s/", last, opts.clone());
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            eprintln!("reading watcher resumed {resumed} times");
            n
        })
    };
    for i in 0..500 {
        store
            .create(&format!("/s/{i:04}"), Bytes::from_static(b"v"))
            .await
            .unwrap();
    }
    assert_eq!(
        reader.await.unwrap(),
        500,
        "a fast watcher beside a slow one gets everything"
    );
    // The slow one gets exactly the first batches, in order, then the error, then the end.
    let mut last = from;
    let err = loop {
        match slow.next().await {
            Some(Ok(WatchItem::Event(e))) => {
                assert_eq!(e.revision(), last + 1, "gap");
                last = e.revision();
            }
            Some(Err(e)) => break e,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert!(matches!(err, StoreError::WatcherTooSlow { .. }), "{err:?}");
    assert!(last > from, "it got its buffered events first");
    assert!(slow.next().await.is_none());
    assert_eq!(store.watchers(), 0);
}

#[tokio::test]
async fn state_and_revision_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let store = RedbStore::open(RedbConfig::new(&path)).unwrap();
    let r = store.create("/a", Bytes::from_static(b"1")).await.unwrap();
    store.compact(r).await.unwrap();
    let r2 = store
        .update("/a", Bytes::from_static(b"2"), r)
        .await
        .unwrap();
    store.close();
    let store = RedbStore::open(RedbConfig::new(&path)).unwrap();
    assert_eq!(store.current_revision().await.unwrap(), r2);
    assert_eq!(store.compacted_revision().await.unwrap(), r);
    let kv = store.get("/a").await.unwrap().unwrap();
    assert_eq!((kv.create_revision, kv.mod_revision), (r, r2));
    let r3 = store.create("/b", Bytes::from_static(b"x")).await.unwrap();
    assert_eq!(r3, r2 + 1);
}
