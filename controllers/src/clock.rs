//! Timestamps as the API writes them (RFC 3339, seconds, UTC).

/// Now, as `metav1.Time` (`2006-01-02T15:04:05Z`).
pub fn now() -> String {
    let fmt = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    time::OffsetDateTime::now_utc()
        .format(&fmt)
        .unwrap_or_default()
}
