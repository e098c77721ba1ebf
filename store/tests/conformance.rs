//! The `Store` contract, checked the same way on every backend: the redb file and a real etcd
//! (Debian's etcd-server 3.4, started on a loopback port per test).
//!
//! Each case is a function over `Arc<dyn Store>`; the `suite!` macro instantiates all of them
//! for one backend factory.

#[path = "support/etcd.rs"]
mod etcd_support;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use k1s_store::{
    EventKind, KeyValue, ListRequest, Revision, Store, StoreError, WatchItem, WatchOptions,
    WatchStream,
};

/// A backend under test, kept alive for the duration of a case.
struct Harness {
    store: Arc<dyn Store>,
    _guard: Box<dyn std::any::Any + Send>,
}

async fn redb_backend() -> Option<Harness> {
    let dir = tempfile::tempdir().unwrap();
    let cfg = k1s_store::redb::RedbConfig::new(dir.path().join("state.redb"));
    let store = k1s_store::redb::RedbStore::open(cfg).unwrap();
    Some(Harness {
        store: Arc::new(store),
        _guard: Box::new(dir),
    })
}

async fn etcd_backend() -> Option<Harness> {
    let server = etcd_support::EtcdServer::start_or_skip()?;
    let store = k1s_store::etcd::EtcdStore::connect(&[server.endpoint()])
        .await
        .unwrap();
    Some(Harness {
        store: Arc::new(store),
        _guard: Box::new(server),
    })
}

macro_rules! suite {
    ($backend:ident, $factory:path, [$($case:ident),* $(,)?]) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(h) = $factory().await else { return };
                    super::cases::$case(h.store.clone()).await;
                }
            )*
        }
    };
}

macro_rules! all_cases {
    ($backend:ident, $factory:path) => {
        suite!(
            $backend,
            $factory,
            [
                revisions_and_writes,
                bad_keys,
                list_pages_from_one_snapshot,
                list_at_older_revisions,
                compaction,
                watch_resumes_exactly,
                watch_delete_and_prev_values,
                prev_values_across_compaction,
                watch_from_the_future,
                watch_progress_while_idle,
                slow_watcher_never_skips,
                concurrent_writers,
            ]
        );
    };
}

all_cases!(redb, super::redb_backend);
all_cases!(etcd, super::etcd_backend);

fn val(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Reads a watch until `n` events arrived (progress items are skipped), failing after 20 s.
async fn take_events(w: &mut WatchStream, n: usize) -> Vec<k1s_store::Event> {
    let mut out = Vec::new();
    while out.len() < n {
        let item = tokio::time::timeout(Duration::from_secs(20), w.next())
            .await
            .unwrap_or_else(|_| panic!("timed out after {} of {n} events", out.len()));
        match item {
            Some(Ok(WatchItem::Event(e))) => out.push(e),
            Some(Ok(WatchItem::Progress(_))) => {}
            Some(Err(e)) => panic!("watch failed after {} events: {e}", out.len()),
            None => panic!("watch ended after {} events", out.len()),
        }
    }
    out
}

/// Asserts no event arrives within `wait`.
async fn expect_quiet(w: &mut WatchStream, wait: Duration) {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, w.next()).await {
            Err(_) => return,
            Ok(Some(Ok(WatchItem::Progress(_)))) => {}
            Ok(other) => panic!("expected no event, got {other:?}"),
        }
    }
}

fn no_progress() -> WatchOptions {
    WatchOptions {
        progress_interval: None,
    }
}

mod cases {
    use super::*;

    pub async fn revisions_and_writes(s: Arc<dyn Store>) {
        let r0 = s.current_revision().await.unwrap();
        assert!(r0 >= 1, "an empty store is at revision 1");
        let r1 = s.create("/k/a", val("1")).await.unwrap();
        assert_eq!(r1, r0 + 1);
        let kv = s.get("/k/a").await.unwrap().unwrap();
        assert_eq!((kv.create_revision, kv.mod_revision), (r1, r1));
        assert_eq!(kv.value, val("1"));

        // Failed writes change nothing, including the revision.
        assert!(matches!(
            s.create("/k/a", val("x")).await,
            Err(StoreError::AlreadyExists { .. })
        ));
        match s.update("/k/a", val("x"), r1 - 1).await {
            Err(StoreError::Conflict {
                expected, actual, ..
            }) => assert_eq!((expected, actual), (r1 - 1, r1)),
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert!(matches!(
            s.update("/k/missing", val("x"), r1).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            s.delete("/k/missing", None).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            s.delete("/k/a", Some(r0)).await,
            Err(StoreError::Conflict { .. })
        ));
        assert_eq!(s.current_revision().await.unwrap(), r1);
        assert_eq!(s.get("/k/a").await.unwrap().unwrap().value, val("1"));

        let r2 = s.update("/k/a", val("2"), r1).await.unwrap();
        assert_eq!(r2, r1 + 1);
        let kv = s.get("/k/a").await.unwrap().unwrap();
        assert_eq!((kv.create_revision, kv.mod_revision), (r1, r2));

        let (r3, prev) = s.delete("/k/a", Some(r2)).await.unwrap();
        assert_eq!(r3, r2 + 1);
        assert_eq!(prev.value, val("2"));
        assert_eq!(prev.mod_revision, r2);
        assert_eq!(s.get("/k/a").await.unwrap(), None);

        // Created again: a new life with a new create revision.
        let r4 = s.create("/k/a", val("3")).await.unwrap();
        let kv = s.get("/k/a").await.unwrap().unwrap();
        assert_eq!((kv.create_revision, kv.mod_revision), (r4, r4));
        let (r5, _) = s.delete("/k/a", None).await.unwrap();
        assert_eq!(s.current_revision().await.unwrap(), r5);
    }

    pub async fn bad_keys(s: Arc<dyn Store>) {
        assert!(matches!(
            s.create("", val("x")).await,
            Err(StoreError::InvalidArgument(_))
        ));
        assert!(matches!(
            s.get("").await,
            Err(StoreError::InvalidArgument(_))
        ));
        let r = s.current_revision().await.unwrap();
        assert_eq!(
            s.list(ListRequest {
                revision: Some(r + 100),
                ..Default::default()
            })
            .await
            .err()
            .map(|e| matches!(e, StoreError::FutureRevision { .. })),
            Some(true)
        );
        // A big value round-trips.
        let big = Bytes::from(vec![7u8; 512 * 1024]);
        s.create("/big", big.clone()).await.unwrap();
        assert_eq!(s.get("/big").await.unwrap().unwrap().value, big);
    }

    pub async fn list_pages_from_one_snapshot(s: Arc<dyn Store>) {
        for i in 0..25 {
            s.create(&format!("/p/a/{i:02}"), val(&i.to_string()))
                .await
                .unwrap();
        }
        s.create("/p/ab/x", val("outside")).await.unwrap();
        s.create("/p/a", val("outside too")).await.unwrap();
        let (n, _) = s.count("/p/a/").await.unwrap();
        assert_eq!(n, 25);

        let first = s
            .list(ListRequest {
                prefix: "/p/a/".into(),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(first.kvs.len(), 10);
        assert!(first.more);
        let snapshot = first.revision;
        assert_eq!(snapshot, s.current_revision().await.unwrap());

        // The world moves on between pages...
        s.delete("/p/a/12", None).await.unwrap();
        let kv = s.get("/p/a/15").await.unwrap().unwrap();
        s.update("/p/a/15", val("changed"), kv.mod_revision)
            .await
            .unwrap();
        s.create("/p/a/99", val("new")).await.unwrap();

        // ...but the later pages, read at the first page's revision, do not see it.
        let mut all = first.kvs.clone();
        let mut last = first.kvs.last().unwrap().key.clone();
        loop {
            let page = s
                .list(ListRequest {
                    prefix: "/p/a/".into(),
                    start_after: Some(last.clone()),
                    limit: 10,
                    revision: Some(snapshot),
                })
                .await
                .unwrap();
            assert_eq!(page.revision, snapshot);
            all.extend(page.kvs.iter().cloned());
            if !page.more {
                break;
            }
            last = page.kvs.last().unwrap().key.clone();
        }
        let keys: Vec<_> = all.iter().map(|kv| kv.key.clone()).collect();
        let want: Vec<_> = (0..25).map(|i| format!("/p/a/{i:02}")).collect();
        assert_eq!(keys, want);
        assert_eq!(all[15].value, val("15"));

        let now = s
            .list(ListRequest {
                prefix: "/p/a/".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(now.kvs.len(), 25);
        assert!(!now.more);
        assert!(now.kvs.iter().all(|kv| kv.key != "/p/a/12"));
        assert!(now.kvs.iter().any(|kv| kv.key == "/p/a/99"));
        // A limit equal to the count: no more.
        let exact = s
            .list(ListRequest {
                prefix: "/p/a/".into(),
                limit: 25,
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(!exact.more);
    }

    pub async fn list_at_older_revisions(s: Arc<dyn Store>) {
        // A history of small changes; the expected state after each write is kept in a model.
        let mut model: BTreeMap<String, String> = BTreeMap::new();
        let mut states: Vec<(Revision, BTreeMap<String, String>)> = Vec::new();
        for step in 0..60u32 {
            let key = format!("/h/{}", step % 7);
            let rev = match s.get(&key).await.unwrap() {
                None => {
                    model.insert(key.clone(), step.to_string());
                    s.create(&key, val(&step.to_string())).await.unwrap()
                }
                Some(kv) if step % 3 == 0 => {
                    model.remove(&key);
                    s.delete(&key, Some(kv.mod_revision)).await.unwrap().0
                }
                Some(kv) => {
                    model.insert(key.clone(), step.to_string());
                    s.update(&key, val(&step.to_string()), kv.mod_revision)
                        .await
                        .unwrap()
                }
            };
            // Unrelated keys interleave.
            s.create(&format!("/other/{step}"), val("x")).await.unwrap();
            states.push((rev, model.clone()));
        }
        for (rev, want) in &states {
            for limit in [0, 2] {
                let mut got = BTreeMap::new();
                let mut start_after = None;
                loop {
                    let page = s
                        .list(ListRequest {
                            prefix: "/h/".into(),
                            start_after: start_after.clone(),
                            limit,
                            revision: Some(*rev),
                        })
                        .await
                        .unwrap();
                    for kv in &page.kvs {
                        assert!(kv.mod_revision <= *rev);
                        got.insert(
                            kv.key.clone(),
                            String::from_utf8_lossy(&kv.value).into_owned(),
                        );
                    }
                    if !page.more {
                        break;
                    }
                    start_after = page.kvs.last().map(|kv| kv.key.clone());
                }
                assert_eq!(&got, want, "state at revision {rev} (limit {limit})");
            }
        }
    }

    pub async fn compaction(s: Arc<dyn Store>) {
        let mut revs = Vec::new();
        for i in 0..10 {
            revs.push(s.create(&format!("/c/{i}"), val("v")).await.unwrap());
        }
        let kv = s.get("/c/0").await.unwrap().unwrap();
        let last = s.update("/c/0", val("v2"), kv.mod_revision).await.unwrap();
        let at = revs[5];
        s.compact(at).await.unwrap();

        // Before the compacted revision: Compacted, for lists and watches.
        let err = s
            .list(ListRequest {
                prefix: "/c/".into(),
                revision: Some(at - 1),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Compacted { .. }), "{err:?}");
        assert!(err.is_relist());
        let mut w = s.watch("/c/", at - 1, no_progress());
        match tokio::time::timeout(Duration::from_secs(10), w.next())
            .await
            .unwrap()
        {
            Some(Err(StoreError::Compacted { .. })) => {}
            other => panic!("expected Compacted, got {other:?}"),
        }
        // The compacted revision itself and later stay readable, and current values survive.
        let page = s
            .list(ListRequest {
                prefix: "/c/".into(),
                revision: Some(at),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(page.kvs.len(), 6);
        let mut w = s.watch("/c/", at, no_progress());
        let events = take_events(&mut w, 5).await;
        let got: Vec<_> = events.iter().map(|e| e.revision()).collect();
        let mut want: Vec<_> = revs[6..].to_vec();
        want.push(last);
        assert_eq!(got, want);
        assert_eq!(s.get("/c/1").await.unwrap().unwrap().value, val("v"));
        let (n, _) = s.count("/c/").await.unwrap();
        assert_eq!(n, 10);

        // Compacting backwards or into the future is refused.
        assert!(matches!(
            s.compact(at - 2).await,
            Err(StoreError::Compacted { .. })
        ));
        let head = s.current_revision().await.unwrap();
        assert!(matches!(
            s.compact(head + 10).await,
            Err(StoreError::FutureRevision { .. })
        ));
        s.compact(head).await.unwrap();
        assert_eq!(s.get("/c/0").await.unwrap().unwrap().value, val("v2"));
    }

    pub async fn watch_resumes_exactly(s: Arc<dyn Store>) {
        let start = s.current_revision().await.unwrap();
        let mut revs = Vec::new();
        for i in 0..40 {
            revs.push(
                s.create(&format!("/w/{i:02}"), val(&i.to_string()))
                    .await
                    .unwrap(),
            );
            s.create(&format!("/elsewhere/{i}"), val("x"))
                .await
                .unwrap();
        }
        // From several points in the history, a watch sees exactly the later events.
        for from in [start, revs[0], revs[7], revs[20] + 1, revs[38], revs[39]] {
            let mut w = s.watch("/w/", from, no_progress());
            let want: Vec<_> = revs.iter().copied().filter(|&r| r > from).collect();
            let got: Vec<_> = take_events(&mut w, want.len())
                .await
                .iter()
                .map(|e| {
                    assert!(e.kv.key.starts_with("/w/"));
                    assert_eq!(e.kind, EventKind::Put);
                    e.revision()
                })
                .collect();
            assert_eq!(got, want, "watch after {from}");
            // Then it follows live writes without a gap.
            let live = s
                .create(&format!("/w/live-{from}"), val("l"))
                .await
                .unwrap();
            let e = take_events(&mut w, 1).await;
            assert_eq!(e[0].revision(), live);
            revs.push(live);
            revs.sort();
            expect_quiet(&mut w, Duration::from_millis(100)).await;
        }
    }

    pub async fn watch_delete_and_prev_values(s: Arc<dyn Store>) {
        let from = s.current_revision().await.unwrap();
        let mut w = s.watch("/d/", from, no_progress());
        let r1 = s.create("/d/x", val("a")).await.unwrap();
        let r2 = s.update("/d/x", val("b"), r1).await.unwrap();
        let (r3, _) = s.delete("/d/x", Some(r2)).await.unwrap();
        let ev = take_events(&mut w, 3).await;
        assert_eq!(ev[0].kind, EventKind::Put);
        assert_eq!(ev[0].prev, None);
        assert_eq!(ev[0].kv.create_revision, r1);
        assert_eq!(ev[1].kind, EventKind::Put);
        assert_eq!(ev[1].kv.value, val("b"));
        assert_eq!(ev[1].kv.create_revision, r1);
        assert_eq!(
            ev[1].prev,
            Some(KeyValue {
                key: "/d/x".into(),
                value: val("a"),
                create_revision: r1,
                mod_revision: r1
            })
        );
        assert_eq!(ev[2].kind, EventKind::Delete);
        assert_eq!(ev[2].kv.key, "/d/x");
        assert_eq!(ev[2].revision(), r3);
        assert_eq!(ev[2].prev.as_ref().map(|p| p.value.clone()), Some(val("b")));
        // The same from history.
        let mut h = s.watch("/d/", from, no_progress());
        assert_eq!(take_events(&mut h, 3).await, ev);
    }

    /// A change after the compacted revision still carries the value it replaced, however
    /// old that value is: compaction keeps each key's latest revision at or below it.
    pub async fn prev_values_across_compaction(s: Arc<dyn Store>) {
        let x1 = s.create("/pc/x", val("x-old")).await.unwrap();
        let y1 = s.create("/pc/y", val("y-old")).await.unwrap();
        let z1 = s.create("/pc/z", val("z1")).await.unwrap();
        let z2 = s.update("/pc/z", val("z2"), z1).await.unwrap();
        let at = s.current_revision().await.unwrap();
        s.compact(at).await.unwrap();
        // Writes after the compaction, and time for the backend to purge what it may.
        let x2 = s.update("/pc/x", val("x-new"), x1).await.unwrap();
        let (y2, _) = s.delete("/pc/y", Some(y1)).await.unwrap();
        for i in 0..20 {
            s.create(&format!("/pc-other/{i}"), val("o")).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;

        let mut w = s.watch("/pc/", at, no_progress());
        let ev = take_events(&mut w, 2).await;
        assert_eq!(ev[0].revision(), x2);
        assert_eq!(
            ev[0].prev,
            Some(KeyValue {
                key: "/pc/x".into(),
                value: val("x-old"),
                create_revision: x1,
                mod_revision: x1
            })
        );
        assert_eq!((ev[1].kind, ev[1].revision()), (EventKind::Delete, y2));
        assert_eq!(ev[1].prev.as_ref().map(|p| &p.value), Some(&val("y-old")));
        // The state at the compacted revision, and now.
        let names = |kvs: &[KeyValue]| -> Vec<(String, Bytes)> {
            kvs.iter()
                .map(|kv| (kv.key.clone(), kv.value.clone()))
                .collect()
        };
        let list = |revision| ListRequest {
            prefix: "/pc/".into(),
            revision,
            ..Default::default()
        };
        let then = s.list(list(Some(at))).await.unwrap();
        assert_eq!(
            names(&then.kvs),
            [
                ("/pc/x".into(), val("x-old")),
                ("/pc/y".into(), val("y-old")),
                ("/pc/z".into(), val("z2")),
            ]
        );
        let now = s.list(list(None)).await.unwrap();
        assert_eq!(
            names(&now.kvs),
            [("/pc/x".into(), val("x-new")), ("/pc/z".into(), val("z2"))]
        );
        assert_eq!(s.get("/pc/z").await.unwrap().unwrap().mod_revision, z2);

        // A second compaction past those changes keeps the current values readable.
        let head = s.current_revision().await.unwrap();
        s.compact(head).await.unwrap();
        s.create("/pc-other/last", val("o")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            names(&s.list(list(None)).await.unwrap().kvs),
            names(&now.kvs)
        );
        assert_eq!(
            names(&s.list(list(Some(head))).await.unwrap().kvs),
            names(&now.kvs)
        );
        let x3 = s.update("/pc/x", val("x-newer"), x2).await.unwrap();
        let mut w = s.watch("/pc/", head, no_progress());
        let ev = take_events(&mut w, 1).await;
        assert_eq!(ev[0].revision(), x3);
        assert_eq!(ev[0].prev.as_ref().map(|p| &p.value), Some(&val("x-new")));
    }

    pub async fn watch_from_the_future(s: Arc<dyn Store>) {
        let head = s.current_revision().await.unwrap();
        let mut w = s.watch("/f/", head + 3, no_progress());
        let mut revs = Vec::new();
        for i in 0..6 {
            revs.push(s.create(&format!("/f/{i}"), val("v")).await.unwrap());
        }
        let got: Vec<_> = take_events(&mut w, 3)
            .await
            .iter()
            .map(|e| e.revision())
            .collect();
        assert_eq!(got, revs[3..].to_vec());
    }

    pub async fn watch_progress_while_idle(s: Arc<dyn Store>) {
        let r = s.create("/g/1", val("v")).await.unwrap();
        s.create("/unwatched/1", val("v")).await.unwrap();
        let head = s.current_revision().await.unwrap();
        let mut w = s.watch(
            "/g/",
            r - 1,
            WatchOptions {
                progress_interval: Some(Duration::from_millis(200)),
            },
        );
        let ev = take_events(&mut w, 1).await;
        assert_eq!(ev[0].revision(), r);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            match tokio::time::timeout_at(deadline, w.next()).await {
                Ok(Some(Ok(WatchItem::Progress(p)))) if p >= head => break,
                Ok(Some(Ok(WatchItem::Progress(p)))) => assert!(p >= r, "progress went back"),
                other => panic!("expected progress, got {other:?}"),
            }
        }
    }

    pub async fn slow_watcher_never_skips(s: Arc<dyn Store>) {
        let from = s.current_revision().await.unwrap();
        let mut w = s.watch("/s/", from, no_progress());
        // Writers go ahead while the watcher reads nothing; they must not be blocked.
        let total = 3000;
        let mut tasks = Vec::new();
        for t in 0..16 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let mut revs = Vec::new();
                for i in (t..total).step_by(16) {
                    revs.push(s.create(&format!("/s/{i:05}"), val("v")).await.unwrap());
                }
                revs
            }));
        }
        let writes =
            tokio::time::timeout(Duration::from_secs(120), futures::future::join_all(tasks))
                .await
                .expect("writers were blocked by an unread watcher");
        let mut revs: Vec<Revision> = writes.into_iter().flat_map(|r| r.unwrap()).collect();
        revs.sort();
        // Now read: either everything in order, or an unbroken prefix then WatcherTooSlow.
        let mut seen = 0;
        loop {
            if seen == revs.len() {
                break;
            }
            match tokio::time::timeout(Duration::from_secs(20), w.next())
                .await
                .unwrap()
            {
                Some(Ok(WatchItem::Event(e))) => {
                    assert_eq!(e.revision(), revs[seen], "gap or reorder at event {seen}");
                    seen += 1;
                }
                Some(Ok(WatchItem::Progress(_))) => {}
                Some(Err(e @ StoreError::WatcherTooSlow { .. })) => {
                    assert!(e.is_relist());
                    assert!(w.next().await.is_none(), "the stream ends after the error");
                    return;
                }
                other => panic!("unexpected {other:?} after {seen} events"),
            }
        }
    }

    pub async fn concurrent_writers(s: Arc<dyn Store>) {
        let start = s.current_revision().await.unwrap();
        let (writers, per_writer) = (64, 20);
        s.create("/cc/counter", val("0")).await.unwrap();
        let mut tasks = Vec::new();
        for t in 0..writers {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let mut revs = Vec::new();
                for i in 0..per_writer {
                    revs.push(s.create(&format!("/cc/{t}/{i}"), val("v")).await.unwrap());
                    // A contended read-modify-write: retried on conflict, never lost.
                    loop {
                        let kv = s.get("/cc/counter").await.unwrap().unwrap();
                        let n: u64 = std::str::from_utf8(&kv.value).unwrap().parse().unwrap();
                        match s
                            .update("/cc/counter", val(&(n + 1).to_string()), kv.mod_revision)
                            .await
                        {
                            Ok(r) => {
                                revs.push(r);
                                break;
                            }
                            Err(StoreError::Conflict { .. }) => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                revs
            }));
        }
        let mut all: Vec<Revision> = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let unique: HashSet<_> = all.iter().collect();
        assert_eq!(unique.len(), all.len(), "two writes share a revision");
        let head = s.current_revision().await.unwrap();
        assert_eq!(
            head,
            start + 1 + all.len() as Revision,
            "revisions are dense"
        );
        let counter = s.get("/cc/counter").await.unwrap().unwrap();
        assert_eq!(counter.value, val(&(writers * per_writer).to_string()));
        let (n, _) = s.count("/cc/").await.unwrap();
        assert_eq!(n, (writers * per_writer + 1) as u64);
    }
}
