//! redb-specific behaviour beyond the shared contract: disk use stays bounded under churn when
//! compaction runs, a slow watcher is ended (not stalled, not skipped) once its buffer is full,
//! state survives a clean restart, and every readable revision reads as a model of the history
//! says through compactions and reopens (what the log purge may and may not remove).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use k1s_store::compactor::{self, CompactionPolicy};
use k1s_store::redb::{RedbConfig, RedbStore};
use k1s_store::{
    EventKind, KeyValue, ListRequest, Revision, Store, StoreError, WatchItem, WatchOptions,
};
use rand::{Rng, SeedableRng};

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

/// The state after each revision, as a model: key → its `KeyValue`.
type States = BTreeMap<Revision, BTreeMap<String, KeyValue>>;

/// Checks a list at and a watch from `at` against the model.
async fn check_revision(store: &RedbStore, states: &States, at: Revision, head: Revision) {
    let want: Vec<KeyValue> = states[&at].values().cloned().collect();
    let got = store
        .list(ListRequest {
            prefix: "/m/".into(),
            revision: Some(at),
            ..Default::default()
        })
        .await
        .unwrap()
        .kvs;
    assert_eq!(got, want, "list at {at}");
    let mut w = store.watch(
        "/m/",
        at,
        WatchOptions {
            progress_interval: None,
        },
    );
    for rev in at + 1..=head {
        let e = match tokio::time::timeout(Duration::from_secs(10), w.next()).await {
            Ok(Some(Ok(WatchItem::Event(e)))) => e,
            other => panic!("watch from {at}, expecting {rev}: {other:?}"),
        };
        assert_eq!(e.revision(), rev, "watch from {at}");
        let (before, after) = (&states[&(rev - 1)], &states[&rev]);
        assert_eq!(e.prev.as_ref(), before.get(&e.kv.key), "prev at {rev}");
        match e.kind {
            EventKind::Put => assert_eq!(Some(&e.kv), after.get(&e.kv.key), "put at {rev}"),
            EventKind::Delete => assert!(!after.contains_key(&e.kv.key), "delete at {rev}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_readable_revision_matches_a_model_through_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let mut store = RedbStore::open(RedbConfig::new(&path)).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(20261124);
    let mut states = States::new();
    let mut head = store.current_revision().await.unwrap();
    states.insert(head, BTreeMap::new());
    let mut compacted = 0;
    for step in 0..600 {
        let mut state = states[&head].clone();
        let key = format!("/m/{}", rng.random_range(0..6));
        let value = Bytes::from(format!("{step}"));
        let put = |create_revision, mod_revision| KeyValue {
            key: key.clone(),
            value: value.clone(),
            create_revision,
            mod_revision,
        };
        let rev = match state.get(&key).cloned() {
            None => {
                let rev = store.create(&key, value.clone()).await.unwrap();
                state.insert(key.clone(), put(rev, rev));
                rev
            }
            // Deletes are rarer than updates, so keys live across several compactions.
            Some(cur) if rng.random_range(0..4) == 0 => {
                let (rev, prev) = store.delete(&key, Some(cur.mod_revision)).await.unwrap();
                assert_eq!(prev, cur);
                state.remove(&key);
                rev
            }
            Some(cur) => {
                let rev = store
                    .update(&key, value.clone(), cur.mod_revision)
                    .await
                    .unwrap();
                state.insert(key.clone(), put(cur.create_revision, rev));
                rev
            }
        };
        assert_eq!(rev, head + 1);
        head = rev;
        states.insert(head, state);
        if step % 40 == 39 {
            // Compact somewhere between the last compaction and the head, then check every
            // revision still readable (the purge runs with the next writes).
            compacted = rng.random_range(compacted + 1..=head);
            store.compact(compacted).await.unwrap();
        }
        if step % 40 == 0 && compacted > 0 {
            for at in (compacted..=head).step_by(7).chain([compacted, head]) {
                check_revision(&store, &states, at, head).await;
            }
        }
        if step % 150 == 149 {
            store.close();
            store = RedbStore::open(RedbConfig::new(&path)).unwrap();
        }
    }
    for at in (compacted..=head).step_by(3).chain([head]) {
        check_revision(&store, &states, at, head).await;
    }
}
