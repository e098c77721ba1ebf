//! A scripted [`Client`] for unit tests of the runtime: lists and watches answer from queues
//! the test fills; every request is recorded.

use std::collections::VecDeque;
use std::sync::Mutex;

use k1s_api::client::{
    Client, ClientError, DeleteParams, ListParams, ObjectList, Patch, ResourceRef, Result,
    WatchEvent, WatchParams, WatchStream, WriteParams,
};
use serde_json::Value;

/// One scripted watch: events then the end of the stream, or an error opening it.
pub enum ScriptedWatch {
    Events(Vec<Result<WatchEvent>>),
    /// The stream stays open after these events (the test ends first).
    Open(Vec<Result<WatchEvent>>),
    Fail(ClientError),
}

#[derive(Default)]
pub struct Scripted {
    pub lists: Mutex<VecDeque<Result<ObjectList>>>,
    pub watches: Mutex<VecDeque<ScriptedWatch>>,
    pub list_calls: Mutex<Vec<ListParams>>,
    pub watch_calls: Mutex<Vec<WatchParams>>,
}

pub fn expired() -> ClientError {
    ClientError {
        code: 410,
        reason: "Expired".into(),
        message: "too old resource version".into(),
    }
}

pub fn unavailable() -> ClientError {
    ClientError::transport("connection refused")
}

fn unsupported() -> ClientError {
    ClientError::transport("not scripted")
}

#[async_trait::async_trait]
impl Client for Scripted {
    async fn get(&self, _: &ResourceRef, _: &str) -> Result<Value> {
        Err(unsupported())
    }
    async fn list(&self, _: &ResourceRef, p: &ListParams) -> Result<ObjectList> {
        self.list_calls.lock().unwrap().push(p.clone());
        self.lists
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| Err(unsupported()))
    }
    async fn create(&self, _: &ResourceRef, _: Value, _: &WriteParams) -> Result<Value> {
        Err(unsupported())
    }
    async fn update(
        &self,
        _: &ResourceRef,
        _: Value,
        _: Option<&str>,
        _: &WriteParams,
    ) -> Result<Value> {
        Err(unsupported())
    }
    async fn patch(
        &self,
        _: &ResourceRef,
        _: &str,
        _: &Patch,
        _: Option<&str>,
        _: &WriteParams,
    ) -> Result<Value> {
        Err(unsupported())
    }
    async fn delete(&self, _: &ResourceRef, _: &str, _: &DeleteParams) -> Result<Value> {
        Err(unsupported())
    }
    async fn create_subresource(
        &self,
        _: &ResourceRef,
        _: &str,
        _: &str,
        _: Value,
    ) -> Result<Value> {
        Err(unsupported())
    }
    async fn watch(&self, _: &ResourceRef, p: &WatchParams) -> Result<WatchStream> {
        self.watch_calls.lock().unwrap().push(p.clone());
        let next = self.watches.lock().unwrap().pop_front();
        match next {
            Some(ScriptedWatch::Events(evs)) => Ok(Box::pin(futures::stream::iter(evs))),
            Some(ScriptedWatch::Open(evs)) => {
                use futures::StreamExt;
                Ok(Box::pin(
                    futures::stream::iter(evs).chain(futures::stream::pending()),
                ))
            }
            Some(ScriptedWatch::Fail(e)) => Err(e),
            None => Ok(Box::pin(futures::stream::pending())),
        }
    }
}
