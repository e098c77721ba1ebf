//! The process's memory allocator: mimalloc, and when it returns freed memory to the system.
//!
//! mimalloc because with glibc's malloc a quarter of the API server's and scheduler's CPU went
//! to malloc/free under load (README "Dependencies and why", docs/benchmarks.md).
//!
//! mimalloc 3 keeps pages that fall empty in the thread that used them, and gives memory back
//! to the system (purges it) only after a delay (1 s for pages, 10 s for arena ranges) and only
//! when some thread calls into it again and notices the delay has passed. A thread that goes
//! idle after a burst never does: an idle k1s, whose threads sleep between heartbeats, kept
//! ~11 MiB of freed memory resident that way (issue #31: 19–23 MiB anonymous memory, 8–9 MiB
//! with immediate purging). Immediate purging (`MIMALLOC_PURGE_DELAY=0`) costs 4 % more CPU
//! in `k1s bench scheduler` (more `madvise` and page faults under load), so instead every
//! runtime thread, when it parks (has nothing to run), lets mimalloc collect what it holds
//! at most once a [`COLLECT_EVERY`]: under load that is a cheap pass once a second per thread,
//! and an idle thread hands back what its last burst freed.

use std::cell::Cell;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The least time between two collections by one thread.
const COLLECT_EVERY: Duration = Duration::from_secs(1);

unsafe extern "C" {
    /// mimalloc's `mi_collect`: frees the calling thread's empty pages to the arenas and
    /// purges arena memory whose purge delay has passed (`force`: all of it, now).
    fn mi_collect(force: bool);
}

thread_local! {
    static LAST_COLLECT: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// For tokio's `on_thread_park`: collects the parking thread's freed memory, at most once a
/// [`COLLECT_EVERY`] per thread.
pub fn on_park() {
    LAST_COLLECT.with(|last| {
        let now = Instant::now();
        if last
            .get()
            .is_some_and(|t| now.duration_since(t) < COLLECT_EVERY)
        {
            return;
        }
        last.set(Some(now));
        // SAFETY: mi_collect takes no pointers; it only walks the calling thread's own heap
        // and the process's arenas under mimalloc's locks.
        unsafe { mi_collect(false) };
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn collecting_twice_in_a_row_is_harmless() {
        let v: Vec<u8> = vec![1; 1 << 20];
        drop(v);
        super::on_park();
        super::on_park();
    }
}
