//! The restart back-off of a pod's containers, per container key (`init/NAME`, `main/NAME`).
//! The only place that writes it: the worker reports what happened (an instance started,
//! exited, failed to be created) with the instant it happened, and asks until when a
//! container must wait. Pure: no clock reads.
//!
//! As upstream's kubelet: the first restart comes at once, each later one waits a step longer
//! (the initial delay, then doubling, up to the maximum: 10 s, 20 s, … 5 min with the default
//! [`crate::Config`]), counted from the container's exit; an instance that ran for the reset
//! time (10 min by default) starts the sequence over. A failed creation (image pull, config,
//! start) waits one step longer each time.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// The back-off of every container of one pod.
#[derive(Debug, Clone)]
pub struct BackOff {
    initial: Duration,
    max: Duration,
    reset: Duration,
    entries: HashMap<String, Entry>,
}

#[derive(Debug, Clone, Default)]
struct Entry {
    /// The delay the next wait lasts (zero: the next restart comes at once).
    delay: Duration,
    /// Not before this instant may it (re)start.
    not_before: Option<Instant>,
    /// When the last instance started, to start over after a long run.
    since: Option<Instant>,
}

impl BackOff {
    pub fn new(initial: Duration, max: Duration, reset: Duration) -> Self {
        Self {
            initial,
            max,
            reset,
            entries: HashMap::new(),
        }
    }

    pub fn from_config(cfg: &crate::Config) -> Self {
        Self::new(cfg.backoff_initial, cfg.backoff_max, cfg.backoff_reset)
    }

    /// Until when `key` must wait before it (re)starts, if it must.
    pub fn until(&self, key: &str) -> Option<Instant> {
        self.entries.get(key)?.not_before
    }

    /// The delay of `key`'s current wait (what CrashLoopBackOff's message shows).
    pub fn delay(&self, key: &str) -> Duration {
        self.entries.get(key).map(|e| e.delay).unwrap_or_default()
    }

    /// The delay after `current`: the initial one, then doubling up to the maximum.
    fn step(&self, current: Duration) -> Duration {
        if current.is_zero() {
            self.initial
        } else {
            (current * 2).min(self.max)
        }
    }

    /// An instance of `key` started at `now`; `restart` when an earlier instance ran: the
    /// next exit then waits one step longer.
    pub fn started(&mut self, key: &str, restart: bool, now: Instant) {
        let delay = self.delay(key);
        let next = if restart { self.step(delay) } else { delay };
        let e = self.entries.entry(key.to_string()).or_default();
        e.delay = next;
        e.since = Some(now);
        // The wait runs from the exit, not the start.
        e.not_before = None;
    }

    /// The instance of `key` exited at `now`: the next start waits the current delay from
    /// now (upstream's `IsInBackOffSince(finishedAt)`), or comes at once after a long run.
    pub fn exited(&mut self, key: &str, now: Instant) {
        let reset = self.reset;
        let e = self.entries.entry(key.to_string()).or_default();
        if e.since
            .is_some_and(|t| now.saturating_duration_since(t) >= reset)
        {
            e.delay = Duration::ZERO;
        }
        e.not_before = Some(now + e.delay);
    }

    /// Creating an instance of `key` failed at `now`: it waits one step longer.
    pub fn failed(&mut self, key: &str, now: Instant) {
        let delay = self.step(self.delay(key));
        let e = self.entries.entry(key.to_string()).or_default();
        e.delay = delay;
        e.not_before = Some(now + delay);
    }

    /// `key` waits the initial delay from `now` without stepping (its pod's sandbox could
    /// not be created).
    pub fn hold(&mut self, key: &str, now: Instant) {
        let until = now + self.initial;
        self.entries.entry(key.to_string()).or_default().not_before = Some(until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn backoff() -> BackOff {
        BackOff::new(10 * S, 300 * S, 600 * S)
    }

    #[test]
    fn first_restart_at_once_then_doubling_up_to_the_cap() {
        let mut b = backoff();
        let t0 = Instant::now();
        assert_eq!(b.until("main/a"), None);
        b.started("main/a", false, t0);
        let mut t = t0 + S;
        b.exited("main/a", t);
        assert_eq!(
            b.until("main/a"),
            Some(t),
            "the first restart comes at once"
        );
        let mut waits = Vec::new();
        for _ in 0..7 {
            b.started("main/a", true, t);
            t += S;
            b.exited("main/a", t);
            let until = b.until("main/a").unwrap();
            waits.push((until - t).as_secs());
            t = until;
        }
        assert_eq!(waits, [10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(b.delay("main/a"), 300 * S);
    }

    #[test]
    fn a_start_clears_the_wait() {
        let mut b = backoff();
        let t0 = Instant::now();
        b.started("main/a", false, t0);
        b.started("main/a", true, t0);
        b.exited("main/a", t0 + S);
        assert_eq!(b.until("main/a"), Some(t0 + 11 * S));
        b.started("main/a", true, t0 + 11 * S);
        assert_eq!(b.until("main/a"), None);
    }

    #[test]
    fn a_long_run_starts_over() {
        let mut b = backoff();
        let t0 = Instant::now();
        b.started("main/a", false, t0);
        for _ in 0..3 {
            b.started("main/a", true, t0);
        }
        assert_eq!(b.delay("main/a"), 40 * S);
        // Shorter than the reset time: the wait stays.
        b.exited("main/a", t0 + 599 * S);
        assert_eq!(b.until("main/a"), Some(t0 + 639 * S));
        // Ran the reset time: restarts at once, then 10 s again.
        let t1 = t0 + 700 * S;
        b.started("main/a", true, t1);
        assert_eq!(b.delay("main/a"), 80 * S);
        b.exited("main/a", t1 + 600 * S);
        assert_eq!(b.until("main/a"), Some(t1 + 600 * S));
        b.started("main/a", true, t1 + 600 * S);
        assert_eq!(b.delay("main/a"), 10 * S);
    }

    #[test]
    fn failed_creations_step_and_hold_does_not() {
        let mut b = backoff();
        let t0 = Instant::now();
        b.failed("main/a", t0);
        assert_eq!(b.until("main/a"), Some(t0 + 10 * S));
        b.failed("main/a", t0 + 10 * S);
        assert_eq!(b.until("main/a"), Some(t0 + 30 * S));
        b.hold("main/b", t0);
        b.hold("main/b", t0 + S);
        assert_eq!(b.until("main/b"), Some(t0 + 11 * S));
        assert_eq!(b.delay("main/b"), Duration::ZERO);
        // Containers are independent.
        assert_eq!(b.until("main/c"), None);
    }
}
