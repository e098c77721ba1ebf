//! Timestamps as the API writes them (RFC 3339, seconds, UTC).

/// Now, as `metav1.Time` (`2006-01-02T15:04:05Z`).
pub fn now() -> String {
    let fmt = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    time::OffsetDateTime::now_utc()
        .format(&fmt)
        .unwrap_or_default()
}

/// `t` as `metav1.Time` (RFC 3339, seconds, UTC).
pub fn format(t: time::OffsetDateTime) -> String {
    let fmt = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    t.to_offset(time::UtcOffset::UTC)
        .format(&fmt)
        .unwrap_or_default()
}

/// A `metav1.Time` string, parsed.
pub fn parse(t: &serde_json::Value) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(t.as_str()?, &time::format_description::well_known::Rfc3339).ok()
}

/// The time source of controllers that act on the wall clock (CronJob, TTL), injectable so
/// tests need not wait for minutes to pass.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> time::OffsetDateTime;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> time::OffsetDateTime {
        time::OffsetDateTime::now_utc()
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct FakeClock(std::sync::Mutex<time::OffsetDateTime>);

impl FakeClock {
    pub fn new(at: time::OffsetDateTime) -> Self {
        Self(std::sync::Mutex::new(at))
    }

    pub fn set(&self, at: time::OffsetDateTime) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = at;
    }

    pub fn advance(&self, by: time::Duration) {
        let mut t = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *t += by;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> time::OffsetDateTime {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
