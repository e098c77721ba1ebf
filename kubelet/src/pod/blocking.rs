//! The pod worker's way to make blocking calls (cgroupfs reads and writes, directory walks,
//! file writes in bundles and pod directories) without holding up an async worker thread:
//! [`run`] moves them to tokio's blocking pool, as [`crate::cgroups`] asks of its callers.

/// Runs `f` on the blocking pool and returns what it returned; a panic in `f` goes on in the
/// caller.
pub async fn run<T, F>(f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => v,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only a runtime shutting down cancels a blocking task; the caller is being dropped
        // with it.
        Err(_) => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn returns_the_value_and_propagates_panics() {
        assert_eq!(super::run(|| 41 + 1).await, 42);
        let task = tokio::spawn(super::run(|| -> i32 { panic!("boom") }));
        assert!(task.await.unwrap_err().is_panic());
    }
}
