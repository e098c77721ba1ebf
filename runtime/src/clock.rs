//! Time for controllers: timestamps as the API writes them (RFC 3339, seconds, UTC), and the
//! injectable [`Clock`] every controller reads the time from (`k1s_controllers::Options::clock`:
//! availability and `minReadySeconds`, progress deadlines, Job deadlines and back-off, node
//! lifecycle, pod GC, disruption budgets, CronJob, TTL), so tests can move time instead of
//! waiting for it. Timestamps written into conditions and events still take the system's time.

use std::sync::{Arc, Mutex};

use jiff::Timestamp;

/// `format(t)`: `t` as `metav1.Time`; `now()`: now as `metav1.Time`; `parse(v)`: a JSON
/// `metav1.Time` (any RFC 3339 time). The one implementation is [`k1s_api::time`].
pub use k1s_api::time::{format, now_text as now, parse_json as parse};

/// What time it is.
pub trait Clock: std::fmt::Debug + Send + Sync + 'static {
    fn now(&self) -> Timestamp;

    /// [`Clock::now`] as `metav1.Time`.
    fn now_text(&self) -> String {
        format(self.now())
    }
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug, Clone)]
pub struct FakeClock(Arc<Mutex<Timestamp>>);

impl FakeClock {
    /// A fake clock at the system's current time (seconds), so objects the API server stamps
    /// compare sensibly with it.
    pub fn new() -> Self {
        let now = Timestamp::now();
        let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
        Self(Arc::new(Mutex::new(now)))
    }

    /// A fake clock at `at`.
    pub fn at(at: Timestamp) -> Self {
        Self(Arc::new(Mutex::new(at)))
    }

    pub fn set(&self, at: Timestamp) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = at;
    }

    pub fn advance(&self, by: std::time::Duration) {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *t += by;
    }
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_moves_when_told_and_formats_as_the_api_does() {
        let c = FakeClock::new();
        let t0 = c.now();
        c.advance(std::time::Duration::from_secs(41));
        assert_eq!(
            c.now().duration_since(t0),
            jiff::SignedDuration::from_secs(41)
        );
        let text = c.now_text();
        assert!(text.ends_with('Z') && text.len() == 20, "{text}");
        assert_eq!(parse(&serde_json::json!(text)), Some(c.now()));
    }
}
