//! Exponential backoff with jitter, for retry loops that must not hammer a failing server
//! (the watcher, leader election). Work-queue requeues have their own per-key limiter.

use std::time::Duration;

/// Exponential backoff: `initial`, doubling up to `max`, with up to 20% jitter added.
#[derive(Debug, Clone)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    current: Option<Duration>,
}

impl Default for Backoff {
    /// kube-runtime's watcher default: 800 ms doubling to 30 s.
    fn default() -> Self {
        Self::new(Duration::from_millis(800), Duration::from_secs(30))
    }
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            current: None,
        }
    }

    /// The next delay; grows on every call until [`Backoff::reset`].
    pub fn next_delay(&mut self) -> Duration {
        let d = match self.current {
            None => self.initial,
            Some(c) => (c * 2).min(self.max),
        };
        self.current = Some(d);
        let jitter = rand::random_range(0.0..0.2);
        d.mul_f64(1.0 + jitter).min(self.max.max(self.initial))
    }

    /// Back to `initial` after a success.
    pub fn reset(&mut self) {
        self.current = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_caps_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let first = b.next_delay();
        assert!(first >= Duration::from_millis(100) && first < Duration::from_millis(121));
        let second = b.next_delay();
        assert!(second >= Duration::from_millis(200));
        for _ in 0..10 {
            assert!(b.next_delay() <= Duration::from_millis(500));
        }
        b.reset();
        assert!(b.next_delay() < Duration::from_millis(121));
    }
}
