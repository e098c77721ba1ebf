//! Crash safety of the redb store: a write storm in a child process is killed with SIGKILL at
//! random moments, many times over; after each kill the store is reopened and checked:
//! - every acknowledged write is there (creates, updates and deletes);
//! - revisions never go backwards;
//! - a watch resumed from any acknowledged revision sees every later event exactly once, with
//!   the value each acknowledged write wrote, and with previous values that are the values of
//!   the revisions they name (what compaction and recovery must keep).
//!
//! The child is this same test binary, re-run with `--ignored --exact crash_child`. It prints
//! `I <op> <key>` before each write (intent) and `A <op> <key> <rev> [<value>]` once the write
//! returned, so the parent knows exactly what was acknowledged before the kill.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use k1s_store::redb::{RedbConfig, RedbStore};
use k1s_store::{Revision, Store, StoreError, WatchItem, WatchOptions};
use rand::Rng;

const DIR_ENV: &str = "K1S_CRASH_DIR";
const RUN_ENV: &str = "K1S_CRASH_RUN";
const WRITERS: usize = 24;

/// The child: writes until killed. Not a test on its own (ignored unless run by the parent).
#[test]
#[ignore = "run by crash_storm as its child process"]
fn crash_child() {
    let Ok(dir) = std::env::var(DIR_ENV) else {
        return;
    };
    let run: u32 = std::env::var(RUN_ENV).unwrap().parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let store = RedbStore::open(RedbConfig::new(format!("{dir}/state.redb"))).unwrap();
        let store: Arc<dyn Store> = Arc::new(store);
        say("READY".into());
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let store = store.clone();
            tasks.push(tokio::spawn(async move { writer(store, run, w).await }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

/// Prints one line to the parent. If the parent is gone (its end of the pipe is closed), the
/// child has no reason to live: it exits instead of writing forever.
fn say(line: String) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        std::process::exit(1);
    }
}

/// Kills the child when dropped, so a failing parent never leaves a writer behind.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn writer(store: Arc<dyn Store>, run: u32, w: usize) {
    let hot = format!("/hot/{w}");
    let mut hot_rev = match store.get(&hot).await.unwrap() {
        Some(kv) => Some(kv.mod_revision),
        None => None,
    };
    let mut mine: Vec<String> = Vec::new();
    for seq in 0u64.. {
        let pick = (seq * 7 + w as u64) % 10;
        if pick < 5 {
            let key = format!("/crash/{run}/{w}/{seq}");
            say(format!("I C {key}"));
            let rev = store.create(&key, Bytes::from(key.clone())).await.unwrap();
            say(format!("A C {key} {rev} {key}"));
            mine.push(key);
        } else if pick < 8 {
            let text = format!("{run}-{seq}");
            let value = Bytes::from(text.clone());
            say(format!("I U {hot}"));
            let rev = match hot_rev {
                None => store.create(&hot, value).await.unwrap(),
                Some(r) => store.update(&hot, value, r).await.unwrap(),
            };
            say(format!("A U {hot} {rev} {text}"));
            hot_rev = Some(rev);
        } else if let Some(key) = mine.pop() {
            say(format!("I D {key}"));
            let (rev, _) = store.delete(&key, None).await.unwrap();
            say(format!("A D {key} {rev}"));
        }
        if w == 0 && seq % 150 == 149 {
            let head = store.current_revision().await.unwrap();
            match store.compact(head - 400).await {
                Ok(()) | Err(StoreError::Compacted { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Acked {
    Created(Revision),
    Updated(Revision),
    Deleted(Revision),
}

#[test]
fn crash_storm() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut rng = rand::rng();
    // Per key: the last acknowledged write, and whether a later write was in flight.
    let mut acked: HashMap<String, Acked> = HashMap::new();
    let mut in_flight: HashMap<String, bool> = HashMap::new();
    let mut all_acks: BTreeMap<Revision, (char, String)> = BTreeMap::new();
    // The value each acknowledged put wrote, by revision.
    let mut values: HashMap<Revision, String> = HashMap::new();
    let mut floor: Revision = 0;
    let iterations = std::env::var("K1S_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20u32);
    for run in 0..iterations {
        let mut child = KillOnDrop(
            Command::new(&exe)
                .args([
                    "--ignored",
                    "--exact",
                    "crash_child",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(DIR_ENV, dir.path())
                .env(RUN_ENV, run.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let stdout = child.0.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.ends_with("READY") {
                    let _ = tx.send(());
                }
                lines.push(line);
            }
            lines
        });
        // Mostly kill mid-storm; sometimes during start-up (recovery of the previous crash).
        if run % 5 == 4 {
            std::thread::sleep(Duration::from_millis(rng.random_range(0..40)));
        } else {
            rx.recv_timeout(Duration::from_secs(60))
                .expect("child did not open the store");
            std::thread::sleep(Duration::from_millis(rng.random_range(50..400)));
        }
        child.0.kill().unwrap(); // SIGKILL
        child.0.wait().unwrap();
        let lines = reader.join().unwrap();

        for line in &lines {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts.as_slice() {
                ["I", _, key] => {
                    in_flight.insert((*key).to_owned(), true);
                }
                ["A", op, key, rev, rest @ ..] => {
                    let rev: Revision = rev.parse().unwrap();
                    if let [value] = rest {
                        values.insert(rev, (*value).to_owned());
                    }
                    let state = match *op {
                        "C" => Acked::Created(rev),
                        "U" => Acked::Updated(rev),
                        _ => Acked::Deleted(rev),
                    };
                    acked.insert((*key).to_owned(), state);
                    in_flight.insert((*key).to_owned(), false);
                    let kind = op.chars().next().unwrap();
                    assert!(
                        all_acks.insert(rev, (kind, (*key).to_owned())).is_none(),
                        "revision {rev} acknowledged twice"
                    );
                }
                _ => {}
            }
        }

        floor = rt.block_on(verify(
            dir.path(),
            &acked,
            &in_flight,
            &all_acks,
            &values,
            floor,
            &mut rng,
        ));
    }
    assert!(
        all_acks.len() > 1000,
        "the storm acknowledged only {} writes",
        all_acks.len()
    );
    eprintln!(
        "crash_storm: {iterations} kills, {} acknowledged writes checked, final revision {floor}",
        all_acks.len()
    );
}

async fn verify(
    dir: &std::path::Path,
    acked: &HashMap<String, Acked>,
    in_flight: &HashMap<String, bool>,
    all_acks: &BTreeMap<Revision, (char, String)>,
    values: &HashMap<Revision, String>,
    floor: Revision,
    rng: &mut impl Rng,
) -> Revision {
    let store = RedbStore::open(RedbConfig::new(dir.join("state.redb"))).unwrap();
    let head = store.current_revision().await.unwrap();
    let max_acked = all_acks.keys().next_back().copied().unwrap_or(0);
    assert!(
        head >= max_acked,
        "revision {head} is behind acknowledged {max_acked}"
    );
    assert!(head >= floor, "revision went backwards: {head} < {floor}");

    for (key, state) in acked {
        let uncertain = in_flight.get(key).copied().unwrap_or(false);
        let got = store.get(key).await.unwrap();
        match (state, &got) {
            (Acked::Created(r) | Acked::Updated(r), Some(kv)) => {
                assert!(
                    kv.mod_revision >= *r,
                    "{key}: at {} < acked {r}",
                    kv.mod_revision
                );
                if !uncertain {
                    assert_eq!(kv.mod_revision, *r, "{key} changed without a write");
                }
            }
            (Acked::Created(_) | Acked::Updated(_), None) => {
                assert!(uncertain, "{key}: acknowledged write lost");
            }
            (Acked::Deleted(_), None) => {}
            (Acked::Deleted(r), Some(kv)) => panic!("{key}: deleted at {r} but present: {kv:?}"),
        }
    }

    // Watches resumed from acknowledged revisions see every later revision exactly once.
    let compacted = store.compacted_revision().await.unwrap();
    let candidates: Vec<Revision> = all_acks.range(compacted..).map(|(r, _)| *r).collect();
    for _ in 0..3 {
        if candidates.is_empty() {
            break;
        }
        let from = candidates[rng.random_range(0..candidates.len())];
        let mut w = store.watch(
            "",
            from,
            WatchOptions {
                progress_interval: None,
            },
        );
        let mut expect = from + 1;
        // What this watch saw each key hold, by revision: a previous value the watch names
        // must be the value it saw at that revision.
        let mut seen: HashMap<Revision, (String, Bytes)> = HashMap::new();
        // The keys this watch saw live, at their last revision: their next event must name it.
        let mut live: HashMap<String, Revision> = HashMap::new();
        while expect <= head {
            let item = tokio::time::timeout(Duration::from_secs(30), w.next())
                .await
                .expect("watch stalled");
            let Some(Ok(WatchItem::Event(e))) = item else {
                panic!("watch from {from} failed at {expect}: {item:?}");
            };
            assert_eq!(e.revision(), expect, "watch from {from}: gap or repeat");
            let is_delete = e.kind == k1s_store::EventKind::Delete;
            if let Some((kind, key)) = all_acks.get(&expect) {
                assert_eq!(&e.kv.key, key);
                assert_eq!(is_delete, *kind == 'D', "wrong event kind at {expect}");
                if let Some(v) = values.get(&expect) {
                    assert_eq!(e.kv.value, v.as_bytes(), "value written at {expect}");
                }
            }
            match &e.prev {
                Some(p) => {
                    assert_eq!(p.key, e.kv.key, "previous of another key at {expect}");
                    assert!(
                        p.mod_revision < expect,
                        "previous from the future at {expect}"
                    );
                    if let Some(v) = values.get(&p.mod_revision) {
                        assert_eq!(p.value, v.as_bytes(), "previous value at {expect}");
                    }
                    if let Some((key, value)) = seen.get(&p.mod_revision) {
                        assert_eq!((key, value), (&p.key, &p.value), "previous at {expect}");
                    }
                }
                // A delete always names what it deleted.
                None => assert!(!is_delete, "delete at {expect} without its previous value"),
            }
            if let Some(before) = live.get(&e.kv.key) {
                assert_eq!(
                    e.prev.as_ref().map(|p| p.mod_revision),
                    Some(*before),
                    "{} at {expect}: not the previous revision the watch saw",
                    e.kv.key
                );
            }
            if is_delete {
                live.remove(&e.kv.key);
            } else {
                seen.insert(expect, (e.kv.key.clone(), e.kv.value.clone()));
                live.insert(e.kv.key.clone(), expect);
            }
            expect += 1;
        }
    }
    store.close();
    head
}
