//! The watcher: one resource listed (in pages, with limit/continue) and then watched from the
//! list's resourceVersion, forever.
//!
//! It owns the list/watch protocol and its recovery, not the cache: a watch that ends is
//! resumed from the last resourceVersion seen (bookmarks included); a 410 Expired (from the
//! watch or from a stale continue token) starts a full relist; any other error backs off
//! exponentially and retries. Every list is framed by [`Event::Init`] … [`Event::InitDone`] so
//! that a cache can build the new state aside and swap it in at once.
//!
//! The stream never ends on its own; drop it (or stop polling it) to stop watching.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k1s_api::client::{Client, ListParams, ResourceRef, WatchEvent, WatchParams, WatchStream};
use serde_json::Value;

use crate::backoff::Backoff;
use crate::key;

/// What a watcher reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A (re)list starts: the objects that follow until [`Event::InitDone`] are the whole state.
    Init,
    /// One object of the list.
    InitApply(Arc<Value>),
    /// The list is complete.
    InitDone,
    /// An object was added or changed.
    Apply(Arc<Value>),
    /// An object was deleted (its last state).
    Delete(Arc<Value>),
}

/// How to list and watch.
#[derive(Debug, Clone)]
pub struct Config {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    /// Page size of the list.
    pub page_size: u32,
    /// Asks the server to end each watch after this long (it is then resumed), as client-go
    /// does so that no watch lives forever behind a stuck connection.
    pub watch_timeout_seconds: Option<u32>,
    /// Backoff between failed attempts.
    pub backoff: Backoff,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            label_selector: None,
            field_selector: None,
            page_size: 500,
            watch_timeout_seconds: Some(290),
            backoff: Backoff::default(),
        }
    }
}

impl Config {
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.into());
        self
    }
}

enum Phase {
    /// Nothing listed yet, or a relist is due.
    Empty,
    /// A list in progress: the next page's continue token.
    Paging { continue_token: String },
    /// Listed (or watched) up to `rv`; a watch is to be opened.
    Resume,
    /// A watch is open.
    Watching { stream: WatchStream, seen: bool },
}

struct State {
    client: Arc<dyn Client>,
    resource: ResourceRef,
    config: Config,
    phase: Phase,
    rv: String,
    pending: VecDeque<Event>,
}

/// Lists and watches `resource` (a namespace in it, or all namespaces) as `config` says.
pub fn watcher(
    client: Arc<dyn Client>,
    resource: ResourceRef,
    config: Config,
) -> impl Stream<Item = Event> + Send {
    let state = State {
        client,
        resource,
        config,
        phase: Phase::Empty,
        rv: String::new(),
        pending: VecDeque::new(),
    };
    futures::stream::unfold(state, |mut s| async move {
        let ev = s.next_event().await;
        Some((ev, s))
    })
}

impl State {
    async fn next_event(&mut self) -> Event {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return ev;
            }
            self.step().await;
        }
    }

    async fn backoff(&mut self) {
        tokio::time::sleep(self.config.backoff.next_delay()).await;
    }

    /// Advances the state machine by one request (or one watch event).
    async fn step(&mut self) {
        match std::mem::replace(&mut self.phase, Phase::Empty) {
            Phase::Empty => self.list_page(None).await,
            Phase::Paging { continue_token } => self.list_page(Some(continue_token)).await,
            Phase::Resume => {
                let params = WatchParams {
                    label_selector: self.config.label_selector.clone(),
                    field_selector: self.config.field_selector.clone(),
                    resource_version: Some(self.rv.clone()),
                    allow_bookmarks: true,
                    timeout_seconds: self.config.watch_timeout_seconds,
                };
                match self.client.watch(&self.resource, &params).await {
                    Ok(stream) => {
                        self.phase = Phase::Watching {
                            stream,
                            seen: false,
                        }
                    }
                    Err(e) if e.is_expired() => {
                        tracing::debug!(resource = %self.resource.resource, "watch expired: relisting");
                        self.phase = Phase::Empty;
                    }
                    Err(e) => {
                        tracing::warn!(resource = %self.resource.resource, error = %e, "watch failed");
                        self.phase = Phase::Resume;
                        self.backoff().await;
                    }
                }
            }
            Phase::Watching { mut stream, seen } => match stream.next().await {
                Some(Ok(ev)) => {
                    self.config.backoff.reset();
                    let out = match ev {
                        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                            self.note_rv(&o);
                            Some(Event::Apply(o))
                        }
                        WatchEvent::Deleted(o) => {
                            self.note_rv(&o);
                            Some(Event::Delete(o))
                        }
                        WatchEvent::Bookmark(rv) => {
                            if !rv.is_empty() {
                                self.rv = rv;
                            }
                            None
                        }
                    };
                    self.pending.extend(out);
                    self.phase = Phase::Watching { stream, seen: true };
                }
                Some(Err(e)) if e.is_expired() => {
                    tracing::debug!(resource = %self.resource.resource, "watch expired: relisting");
                    self.phase = Phase::Empty;
                }
                Some(Err(e)) => {
                    tracing::warn!(resource = %self.resource.resource, error = %e, "watch error");
                    self.phase = Phase::Resume;
                    self.backoff().await;
                }
                None => {
                    self.phase = Phase::Resume;
                    if !seen {
                        // A watch that ends at once, again and again, must not spin.
                        self.backoff().await;
                    }
                }
            },
        }
    }

    fn note_rv(&mut self, obj: &Value) {
        if let Some(rv) = key::resource_version(obj) {
            self.rv = rv.to_owned();
        }
    }

    async fn list_page(&mut self, continue_token: Option<String>) {
        let first = continue_token.is_none();
        let params = ListParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            limit: Some(self.config.page_size),
            continue_token: continue_token.clone(),
            resource_version: None,
        };
        match self.client.list(&self.resource, &params).await {
            Ok(page) => {
                self.config.backoff.reset();
                if first {
                    self.pending.push_back(Event::Init);
                }
                self.pending.extend(
                    page.items
                        .into_iter()
                        .map(|o| Event::InitApply(Arc::new(o))),
                );
                match page.continue_token.filter(|t| !t.is_empty()) {
                    Some(t) => self.phase = Phase::Paging { continue_token: t },
                    None => {
                        self.rv = page.resource_version;
                        self.pending.push_back(Event::InitDone);
                        self.phase = Phase::Resume;
                    }
                }
            }
            Err(e) if e.is_expired() && !first => {
                // The continue token outlived the compaction window: list again from the top.
                // The consumer has seen an Init without InitDone; the next Init restarts it.
                tracing::debug!(resource = %self.resource.resource, "continue token expired: relisting");
                self.phase = Phase::Empty;
            }
            Err(e) => {
                tracing::warn!(resource = %self.resource.resource, error = %e, "list failed");
                self.phase = match continue_token {
                    // Retrying a page keeps the list consistent; if the token has expired by
                    // then, the 410 restarts the list.
                    Some(t) => Phase::Paging { continue_token: t },
                    None => Phase::Empty,
                };
                self.backoff().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Scripted, ScriptedWatch, expired, unavailable};
    use k1s_api::client::ObjectList;
    use serde_json::json;
    use std::time::Duration;

    fn obj(name: &str, rv: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "d", "resourceVersion": rv}})
    }

    fn page(items: Vec<Value>, rv: &str, cont: Option<&str>) -> ObjectList {
        ObjectList {
            items,
            resource_version: rv.into(),
            continue_token: cont.map(Into::into),
        }
    }

    fn names(evs: &[Event]) -> Vec<String> {
        evs.iter()
            .map(|e| match e {
                Event::Init => "init".into(),
                Event::InitApply(o) => format!("list {}", o["metadata"]["name"].as_str().unwrap()),
                Event::InitDone => "done".into(),
                Event::Apply(o) => format!("apply {}", o["metadata"]["name"].as_str().unwrap()),
                Event::Delete(o) => format!("delete {}", o["metadata"]["name"].as_str().unwrap()),
            })
            .collect()
    }

    fn config() -> Config {
        Config {
            page_size: 2,
            backoff: Backoff::new(Duration::from_millis(1), Duration::from_millis(2)),
            ..Config::default()
        }
    }

    #[tokio::test]
    async fn pages_then_watches_and_resumes_from_the_last_version() {
        let c = Arc::new(Scripted::default());
        c.lists.lock().unwrap().extend([
            Ok(page(vec![obj("a", "1"), obj("b", "2")], "5", Some("t1"))),
            Err(unavailable()),
            Ok(page(vec![obj("c", "3")], "5", None)),
        ]);
        c.watches.lock().unwrap().extend([
            ScriptedWatch::Events(vec![
                Ok(WatchEvent::Added(Arc::new(obj("d", "6")))),
                Ok(WatchEvent::Bookmark("9".into())),
            ]),
            ScriptedWatch::Fail(unavailable()),
            ScriptedWatch::Open(vec![Ok(WatchEvent::Deleted(Arc::new(obj("a", "10"))))]),
        ]);
        let evs: Vec<Event> = watcher(
            c.clone(),
            ResourceRef::new("", "v1", "pods", None),
            config(),
        )
        .take(7)
        .collect()
        .await;
        assert_eq!(
            names(&evs),
            [
                "init", "list a", "list b", "list c", "done", "apply d", "delete a"
            ]
        );
        let lists = c.list_calls.lock().unwrap().clone();
        assert_eq!(lists.len(), 3);
        assert_eq!(lists[0].limit, Some(2));
        assert_eq!(lists[0].continue_token, None);
        // The failed page is retried with the same token.
        assert_eq!(lists[1].continue_token.as_deref(), Some("t1"));
        assert_eq!(lists[2].continue_token.as_deref(), Some("t1"));
        let watches = c.watch_calls.lock().unwrap().clone();
        let rvs: Vec<_> = watches
            .iter()
            .map(|w| w.resource_version.clone().unwrap())
            .collect();
        // From the list, then from the bookmark (twice: the failed attempt and the retry).
        assert_eq!(rvs, ["5", "9", "9"]);
        assert!(watches.iter().all(|w| w.allow_bookmarks));
    }

    #[tokio::test]
    async fn expired_watch_relists_and_expired_continue_restarts_the_list() {
        let c = Arc::new(Scripted::default());
        c.lists.lock().unwrap().extend([
            Ok(page(vec![obj("a", "1")], "1", None)),
            Ok(page(vec![obj("b", "2")], "3", Some("t"))),
            Err(expired()),
            Ok(page(vec![obj("c", "4")], "4", None)),
        ]);
        c.watches
            .lock()
            .unwrap()
            .extend([ScriptedWatch::Events(vec![Err(expired())])]);
        let evs: Vec<Event> = watcher(
            c.clone(),
            ResourceRef::new("", "v1", "pods", None),
            config(),
        )
        .take(8)
        .collect()
        .await;
        assert_eq!(
            names(&evs),
            [
                "init", "list a", "done", "init", "list b", "init", "list c", "done"
            ]
        );
    }

    #[tokio::test]
    async fn a_watch_that_cannot_open_as_expired_relists() {
        let c = Arc::new(Scripted::default());
        c.lists.lock().unwrap().extend([
            Ok(page(vec![], "1", None)),
            Ok(page(vec![obj("x", "2")], "2", None)),
        ]);
        c.watches
            .lock()
            .unwrap()
            .extend([ScriptedWatch::Fail(expired())]);
        let evs: Vec<Event> = watcher(
            c.clone(),
            ResourceRef::new("", "v1", "pods", None),
            config(),
        )
        .take(5)
        .collect()
        .await;
        assert_eq!(names(&evs), ["init", "done", "init", "list x", "done"]);
    }
}
