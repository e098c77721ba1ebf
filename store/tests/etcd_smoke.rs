//! Direct tests of the etcd backend against a throwaway etcd server (see `support/etcd.rs`).
//! The shared conformance suite runs the full contract; these check the etcd mapping itself.

#[path = "support/etcd.rs"]
mod etcd_support;

use std::time::Duration;

use bytes::Bytes;
use etcd_support::EtcdServer;
use futures::StreamExt;
use k1s_store::etcd::{EtcdStore, parse_endpoints};
use k1s_store::{
    EventKind, ListRequest, Revision, Store, StoreError, WatchItem, WatchOptions, WatchStream,
};

const WAIT: Duration = Duration::from_secs(10);

async fn setup() -> Option<(EtcdServer, EtcdStore)> {
    let server = EtcdServer::start_or_skip()?;
    let store = EtcdStore::connect(&[server.endpoint()])
        .await
        .expect("connect to etcd");
    Some((server, store))
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

async fn next(w: &mut WatchStream) -> k1s_store::Result<WatchItem> {
    tokio::time::timeout(WAIT, w.next())
        .await
        .expect("watch item in time")
        .expect("watch stream not ended")
}

/// The next event, skipping progress notifications.
async fn next_event(w: &mut WatchStream) -> k1s_store::Event {
    loop {
        match next(w).await.expect("watch item") {
            WatchItem::Event(e) => return e,
            WatchItem::Progress(_) => continue,
        }
    }
}

fn no_progress() -> WatchOptions {
    WatchOptions {
        progress_interval: None,
    }
}

#[test]
fn endpoints_parse() {
    assert_eq!(
        parse_endpoints("http://127.0.0.1:2379,http://127.0.0.2:2379"),
        vec!["http://127.0.0.1:2379", "http://127.0.0.2:2379"]
    );
}

#[tokio::test]
async fn connect_errors_are_values() {
    assert!(matches!(
        EtcdStore::connect(&[]).await,
        Err(StoreError::InvalidArgument(_))
    ));
    // Nothing listens on port 1.
    match EtcdStore::connect(&["http://127.0.0.1:1".to_string()]).await {
        Err(StoreError::Backend(msg)) => assert!(msg.contains("127.0.0.1:1"), "{msg}"),
        other => panic!("expected a backend error, got {other:?}"),
    }
}

#[tokio::test]
async fn writes_and_preconditions() {
    let Some((_server, store)) = setup().await else {
        return;
    };
    assert_eq!(store.current_revision().await.unwrap(), 1);
    assert_eq!(store.get("/a").await.unwrap(), None);

    let r1 = store.create("/a", b("1")).await.unwrap();
    assert_eq!(r1, 2);
    assert!(matches!(
        store.create("/a", b("x")).await,
        Err(StoreError::AlreadyExists { key }) if key == "/a"
    ));
    assert!(matches!(
        store.update("/a", b("x"), r1 + 7).await,
        Err(StoreError::Conflict { expected, actual, .. }) if expected == r1 + 7 && actual == r1
    ));
    assert!(matches!(
        store.update("/missing", b("x"), 0).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.update("/missing", b("x"), r1).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.update("/a", b("x"), 0).await,
        Err(StoreError::Conflict { actual, .. }) if actual == r1
    ));
    // Failed writes did not move the revision.
    assert_eq!(store.current_revision().await.unwrap(), r1);

    let r2 = store.update("/a", b("2"), r1).await.unwrap();
    assert_eq!(r2, r1 + 1);
    let kv = store.get("/a").await.unwrap().unwrap();
    assert_eq!(
        (kv.value, kv.create_revision, kv.mod_revision),
        (b("2"), r1, r2)
    );

    assert!(matches!(
        store.delete("/a", Some(r1)).await,
        Err(StoreError::Conflict { actual, .. }) if actual == r2
    ));
    assert!(matches!(
        store.delete("/missing", None).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.delete("/missing", Some(5)).await,
        Err(StoreError::NotFound { .. })
    ));
    let (r3, prev) = store.delete("/a", Some(r2)).await.unwrap();
    assert_eq!(r3, r2 + 1);
    assert_eq!(
        (prev.key.as_str(), prev.value, prev.mod_revision),
        ("/a", b("2"), r2)
    );
    assert_eq!(store.get("/a").await.unwrap(), None);

    let r4 = store.create("/a", b("again")).await.unwrap();
    let (r5, prev) = store.delete("/a", None).await.unwrap();
    assert_eq!(
        (r5, prev.create_revision, prev.value),
        (r4 + 1, r4, b("again"))
    );
    assert_eq!(store.current_revision().await.unwrap(), r5);

    assert!(matches!(
        store.create("", b("x")).await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert!(matches!(
        store.get("a\0b").await,
        Err(StoreError::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn list_pages_from_one_snapshot() {
    let Some((_server, store)) = setup().await else {
        return;
    };
    for k in ["/p/a", "/p/b", "/p/c", "/p/d", "/p/e", "/q/a", "/p"] {
        store.create(k, b(k)).await.unwrap();
    }
    let (count, count_rev) = store.count("/p/").await.unwrap();
    assert_eq!(count, 5);
    assert_eq!(count_rev, store.current_revision().await.unwrap());

    let first = store
        .list(ListRequest {
            prefix: "/p/".into(),
            limit: 2,
            ..Default::default()
        })
        .await
        .unwrap();
    let keys: Vec<_> = first.kvs.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["/p/a", "/p/b"]);
    assert!(first.more);
    assert_eq!(first.revision, count_rev);

    // Changes after the first page do not show on later pages of the same snapshot.
    store.create("/p/bb", b("new")).await.unwrap();
    let kv_c = store.get("/p/c").await.unwrap().unwrap();
    store
        .update("/p/c", b("changed"), kv_c.mod_revision)
        .await
        .unwrap();

    let mut all = keys.iter().map(|k| k.to_string()).collect::<Vec<_>>();
    let mut after = first.kvs.last().map(|kv| kv.key.clone());
    loop {
        let page = store
            .list(ListRequest {
                prefix: "/p/".into(),
                start_after: after.clone(),
                limit: 2,
                revision: Some(first.revision),
            })
            .await
            .unwrap();
        assert_eq!(page.revision, first.revision);
        for kv in &page.kvs {
            if kv.key == "/p/c" {
                assert_eq!(kv.value, b("/p/c"));
            }
            all.push(kv.key.clone());
        }
        after = page.kvs.last().map(|kv| kv.key.clone());
        if !page.more {
            break;
        }
    }
    assert_eq!(all, ["/p/a", "/p/b", "/p/c", "/p/d", "/p/e"]);

    // At head, without a limit: the new key is there.
    let head = store
        .list(ListRequest {
            prefix: "/p/".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(head.kvs.len(), 6);
    assert!(!head.more);
    assert_eq!(head.revision, store.current_revision().await.unwrap());

    // The empty prefix is everything.
    let everything = store.list(ListRequest::default()).await.unwrap();
    assert_eq!(everything.kvs.len(), 8);

    // Starting after the end of the range, or exactly at the last key.
    for start in ["/p/zzz", "/p/e", "/z"] {
        let page = store
            .list(ListRequest {
                prefix: "/p/".into(),
                start_after: Some(start.into()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(page.kvs.is_empty(), "{start}: {:?}", page.kvs);
        assert!(!page.more);
        assert_eq!(page.revision, head.revision);
    }
    // Starting before the range is starting at the prefix.
    let page = store
        .list(ListRequest {
            prefix: "/p/".into(),
            start_after: Some("/a".into()),
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.kvs[0].key, "/p/a");

    let future = head.revision + 10;
    assert!(matches!(
        store
            .list(ListRequest {
                revision: Some(future),
                ..Default::default()
            })
            .await,
        Err(StoreError::FutureRevision { requested, current })
            if requested == future && current == head.revision
    ));
}

#[tokio::test]
async fn compaction() {
    let Some((_server, store)) = setup().await else {
        return;
    };
    let r1 = store.create("/c/a", b("1")).await.unwrap();
    let r2 = store.update("/c/a", b("2"), r1).await.unwrap();
    let r3 = store.create("/c/b", b("3")).await.unwrap();
    store.compact(r2).await.unwrap();

    let at = |revision| ListRequest {
        prefix: "/c/".into(),
        revision: Some(revision),
        ..Default::default()
    };
    match store.list(at(r1)).await {
        Err(StoreError::Compacted {
            requested,
            compacted,
        }) => assert_eq!((requested, compacted), (r1, r2)),
        other => panic!("expected Compacted, got {other:?}"),
    }
    // The compacted revision itself is readable.
    let page = store.list(at(r2)).await.unwrap();
    assert_eq!(page.kvs.len(), 1);
    assert_eq!(page.kvs[0].value, b("2"));

    assert!(matches!(
        store.compact(r2).await,
        Err(StoreError::Compacted { requested, compacted }) if requested == r2 && compacted == r2
    ));
    assert!(matches!(
        store.compact(r1).await,
        Err(StoreError::Compacted { requested, compacted }) if requested == r1 && compacted == r2
    ));
    assert!(matches!(
        store.compact(r3 + 1).await,
        Err(StoreError::FutureRevision { requested, current })
            if requested == r3 + 1 && current == r3
    ));
    store.compact(r3).await.unwrap();
}

#[tokio::test]
async fn watch_events_with_previous_values() {
    let Some((_server, store)) = setup().await else {
        return;
    };
    store.create("/w/old", b("old")).await.unwrap();
    let list = store
        .list(ListRequest {
            prefix: "/w/".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut w = store.watch("/w/", list.revision, no_progress());

    let r1 = store.create("/w/a", b("1")).await.unwrap();
    store.create("/x/outside", b("x")).await.unwrap();
    let r2 = store.update("/w/a", b("2"), r1).await.unwrap();
    let (r3, _) = store.delete("/w/a", Some(r2)).await.unwrap();

    let e = next_event(&mut w).await;
    assert_eq!(
        (e.kind, e.kv.key.as_str(), e.revision()),
        (EventKind::Put, "/w/a", r1)
    );
    assert_eq!(e.kv.create_revision, r1);
    assert_eq!(e.prev, None);

    let e = next_event(&mut w).await;
    assert_eq!(
        (e.kind, e.revision(), e.kv.value.clone()),
        (EventKind::Put, r2, b("2"))
    );
    assert_eq!(e.prev.as_ref().map(|p| p.value.clone()), Some(b("1")));

    let e = next_event(&mut w).await;
    assert_eq!(e.kind, EventKind::Delete);
    assert_eq!((e.kv.key.as_str(), e.kv.mod_revision), ("/w/a", r3));
    assert_eq!((e.kv.create_revision, e.kv.value.is_empty()), (0, true));
    let prev = e.prev.expect("delete has the previous value");
    assert_eq!((prev.value, prev.mod_revision), (b("2"), r2));

    // Watching again from an earlier revision replays the same events, from r2 on.
    let mut w2 = store.watch("/w/", r1, no_progress());
    assert_eq!(next_event(&mut w2).await.revision(), r2);
    assert_eq!(next_event(&mut w2).await.revision(), r3);

    // A watch from the future waits for its revision.
    let now = store.current_revision().await.unwrap();
    let mut w3 = store.watch("", now + 2, no_progress());
    store.create("/f/1", b("1")).await.unwrap();
    store.create("/f/2", b("2")).await.unwrap();
    let r = store.create("/f/3", b("3")).await.unwrap();
    assert_eq!(r, now + 3);
    let e = next_event(&mut w3).await;
    assert_eq!((e.kv.key.as_str(), e.revision()), ("/f/3", now + 3));
}

#[tokio::test]
async fn watch_after_compaction_fails_first() {
    let Some((_server, store)) = setup().await else {
        return;
    };
    let r1 = store.create("/k", b("1")).await.unwrap();
    let r2 = store.update("/k", b("2"), r1).await.unwrap();
    let r3 = store.update("/k", b("3"), r2).await.unwrap();
    store.compact(r2).await.unwrap();

    for after in [0, r1 - 1, r1, r2 - 1] {
        let mut w = store.watch("/", after, no_progress());
        match next(&mut w).await {
            Err(StoreError::Compacted {
                requested,
                compacted,
            }) => assert_eq!((requested, compacted), (after, r2), "after {after}"),
            other => panic!("after {after}: expected Compacted, got {other:?}"),
        }
        assert!(
            tokio::time::timeout(WAIT, w.next())
                .await
                .unwrap()
                .is_none(),
            "the stream ends after the error"
        );
    }

    // From the compacted revision itself every later event is there, with its previous value.
    let mut w = store.watch("/", r2, no_progress());
    let e = next_event(&mut w).await;
    assert_eq!(e.revision(), r3);
    assert_eq!(e.prev.map(|p| p.value), Some(b("2")));
}

#[tokio::test]
async fn watch_reports_progress_while_idle() {
    let Some((_server, store)) = setup().await else {
        return;
    };
    let r1 = store.create("/idle/a", b("1")).await.unwrap();
    let opts = WatchOptions {
        progress_interval: Some(Duration::from_millis(100)),
    };
    let mut w = store.watch("/idle/", r1, opts.clone());
    match next(&mut w).await.unwrap() {
        WatchItem::Progress(r) => assert_eq!(r, r1),
        other => panic!("expected progress, got {other:?}"),
    }

    // Writes elsewhere move the revision; progress follows.
    let r2 = store.create("/elsewhere", b("x")).await.unwrap();
    let mut seen = 0;
    while seen < r2 {
        match next(&mut w).await.unwrap() {
            WatchItem::Progress(r) => {
                assert!(r >= seen, "progress went backwards: {r} after {seen}");
                seen = r;
            }
            other => panic!("expected progress, got {other:?}"),
        }
    }

    // An event, then progress at or after it, never before it.
    let r3 = store.update("/idle/a", b("2"), r1).await.unwrap();
    let mut got_event = false;
    loop {
        match next(&mut w).await.unwrap() {
            WatchItem::Event(e) => {
                assert_eq!(e.revision(), r3);
                got_event = true;
            }
            WatchItem::Progress(r) => {
                assert!(r >= seen);
                seen = r;
                if r >= r3 {
                    assert!(got_event, "progress {r} before the event at {r3}");
                    break;
                }
            }
        }
    }

    // A watch that starts in the past reports progress too, once caught up.
    let mut w = store.watch("/idle/", 0, opts);
    let mut events: Vec<Revision> = Vec::new();
    loop {
        match next(&mut w).await.unwrap() {
            WatchItem::Event(e) => events.push(e.revision()),
            WatchItem::Progress(r) => {
                assert_eq!(events, [r1, r3]);
                assert!(r >= r3);
                break;
            }
        }
    }
}

#[tokio::test]
async fn survives_an_etcd_crash() {
    let Some((mut server, store)) = setup().await else {
        return;
    };
    let r1 = store.create("/d/a", b("1")).await.unwrap();
    server.kill_and_restart();
    // The client reconnects; acknowledged writes and the revision survive.
    let mut revision = Err(StoreError::Closed);
    for _ in 0..100 {
        revision = store.current_revision().await;
        if revision.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(revision.unwrap(), r1);
    assert_eq!(store.get("/d/a").await.unwrap().unwrap().value, b("1"));
    let r2 = store.create("/d/b", b("2")).await.unwrap();
    assert_eq!(r2, r1 + 1);
}

/// Polls an etcd metric until it has the wanted value.
async fn wait_for_metric(server: &EtcdServer, name: &str, want: f64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let value = server.metric(name);
        if value == Some(want) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} is {value:?}, expected {want}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn watch_opens_on_first_poll_and_closes_on_drop() {
    let Some((server, store)) = setup().await else {
        return;
    };
    const WATCHERS: &str = "etcd_debugging_mvcc_watcher_total";
    let now = store.current_revision().await.unwrap();
    let mut w = store.watch("/lazy/", now, no_progress());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.metric(WATCHERS), Some(0.0), "not polled yet");

    let r = store.create("/lazy/a", b("1")).await.unwrap();
    assert_eq!(next_event(&mut w).await.revision(), r);
    wait_for_metric(&server, WATCHERS, 1.0).await;
    drop(w);
    wait_for_metric(&server, WATCHERS, 0.0).await;
}

/// Progress under a steady stream of writes, inside and outside the watched prefix: events
/// arrive complete and in order, and progress never claims a revision before an event that
/// is still to come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_never_ahead_of_events() {
    let Some((_server, store)) = setup().await else {
        return;
    };
    let store = std::sync::Arc::new(store);
    let start = store.current_revision().await.unwrap();
    let mut w = store.watch(
        "/s/",
        start,
        WatchOptions {
            progress_interval: Some(Duration::from_millis(10)),
        },
    );
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut mine = Vec::new();
            let mut last = 0;
            for i in 0..600 {
                let prefix = if i % 3 == 0 { "/s/" } else { "/other/" };
                last = store
                    .create(&format!("{prefix}{i}"), Bytes::from_static(b"v"))
                    .await
                    .unwrap();
                if prefix == "/s/" {
                    mine.push(last);
                }
                if i % 20 == 0 {
                    tokio::time::sleep(Duration::from_millis(15)).await;
                }
            }
            (mine, last)
        })
    };
    let mut events = Vec::new();
    let mut progress = 0;
    let mut progress_count = 0;
    let mut done: Option<(Vec<Revision>, Revision)> = None;
    loop {
        if done.is_none() && writer.is_finished() {
            done = Some(writer.await.unwrap());
            break;
        }
        let item = next(&mut w).await;
        record(item, start, &mut events, &mut progress, &mut progress_count);
    }
    let (expected, last) = done.unwrap();
    // Once idle, progress reaches the last write, after every event.
    while progress < last {
        let item = next(&mut w).await;
        record(item, start, &mut events, &mut progress, &mut progress_count);
    }
    assert_eq!(events, expected);
    eprintln!("{progress_count} progress notifications");
}

/// A watch that starts far behind (etcd sends history in batches of 1000 revisions every
/// 100 ms) reports progress only once it has delivered that history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_waits_for_history() {
    let Some((_server, store)) = setup().await else {
        return;
    };
    let store = std::sync::Arc::new(store);
    let mut tasks = Vec::new();
    for t in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..300 {
                store
                    .create(&format!("/h/{t}/{i}"), Bytes::from_static(b"v"))
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let last = store.current_revision().await.unwrap();
    let mut w = store.watch(
        "/h/",
        1,
        WatchOptions {
            progress_interval: Some(Duration::from_millis(10)),
        },
    );
    let mut events = 0;
    loop {
        match next(&mut w).await {
            Ok(WatchItem::Event(_)) => events += 1,
            Ok(WatchItem::Progress(r)) => {
                assert_eq!(events, 2400, "progress {r} after {events} events");
                assert_eq!(r, last);
                break;
            }
            Err(e) => panic!("watch failed: {e}"),
        }
    }
}

/// Checks one watch item against the progress seen so far and records it: events must come
/// after the last progress, progress never goes back nor below the last event.
fn record(
    item: Result<WatchItem, StoreError>,
    start: Revision,
    events: &mut Vec<Revision>,
    progress: &mut Revision,
    progress_count: &mut usize,
) {
    match item {
        Ok(WatchItem::Event(e)) => {
            assert!(
                e.revision() > *progress,
                "event {} after progress {progress}",
                e.revision()
            );
            events.push(e.revision());
        }
        Ok(WatchItem::Progress(r)) => {
            assert!(r >= *progress);
            assert!(r >= events.last().copied().unwrap_or(start));
            *progress = r;
            *progress_count += 1;
        }
        Err(e) => panic!("watch failed: {e}"),
    }
}

#[tokio::test]
async fn a_native_snapshot_restores_with_etcdctl() {
    let Some((_server, store)) = setup().await else {
        return;
    };
    let a = store.create("/registry/a", b("one")).await.unwrap();
    let bb = store.create("/registry/b", b("two")).await.unwrap();
    store.delete("/registry/a", None).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snap.db");
    let mut file = std::fs::File::create(&path).unwrap();
    let size = store.save_native_snapshot(&mut file).await.unwrap();
    drop(file);
    assert!(size > 0);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    let restored = EtcdServer::start_restored(&path);
    let again = EtcdStore::connect(&[restored.endpoint()]).await.unwrap();
    let kv = again.get("/registry/b").await.unwrap().unwrap();
    assert_eq!((&kv.value[..], kv.mod_revision), (&b"two"[..], bb));
    assert!(again.get("/registry/a").await.unwrap().is_none());
    assert!(again.current_revision().await.unwrap() > a);
}
