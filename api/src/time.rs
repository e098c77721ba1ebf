//! Time as the Kubernetes API writes it, in one place: `metav1.Time` (RFC 3339, whole seconds,
//! UTC: `2006-01-02T15:04:05Z`), `metav1.MicroTime` (six fractional digits: Leases, events'
//! `eventTime`), and parsing of any RFC 3339 time a client wrote. Every component formats and
//! parses timestamps through here; injectable clocks (`k1s_runtime::clock`) build on it.

use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// Now, in UTC.
pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// `t` as `metav1.Time`: RFC 3339 in UTC, fractional seconds dropped.
pub fn format(t: OffsetDateTime) -> String {
    let fmt = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    t.to_offset(UtcOffset::UTC).format(&fmt).unwrap_or_default()
}

/// Now as `metav1.Time`.
pub fn now_text() -> String {
    format(now())
}

/// `t` as `metav1.MicroTime`: RFC 3339 in UTC with six fractional digits.
pub fn format_micro(t: OffsetDateTime) -> String {
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
    );
    t.to_offset(UtcOffset::UTC).format(&fmt).unwrap_or_default()
}

/// Now as `metav1.MicroTime`.
pub fn now_micro_text() -> String {
    format_micro(now())
}

/// `t` as RFC 3339 with as many fractional digits as it has (container log lines, the CRI's
/// RFC3339Nano).
pub fn format_nano(t: OffsetDateTime) -> String {
    t.to_offset(UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_default()
}

/// Seconds since the epoch as `metav1.Time`; empty when out of range.
pub fn format_unix(secs: i64) -> String {
    OffsetDateTime::from_unix_timestamp(secs)
        .map(format)
        .unwrap_or_default()
}

/// Any RFC 3339 time (with or without fractional seconds, any offset).
pub fn parse(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s.trim(), &Rfc3339).ok()
}

/// A JSON string holding an RFC 3339 time; anything else is `None`.
pub fn parse_json(v: &serde_json::Value) -> Option<OffsetDateTime> {
    parse(v.as_str()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_as_the_api() {
        let t = parse("2024-02-29T23:59:58.123456789+01:00").unwrap();
        assert_eq!(format(t), "2024-02-29T22:59:58Z");
        assert_eq!(format_micro(t), "2024-02-29T22:59:58.123456Z");
        assert_eq!(format_nano(t), "2024-02-29T22:59:58.123456789Z");
        assert_eq!(format_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_unix(i64::MAX), "");
        assert_eq!(
            parse(&format(t)).map(|p| p.unix_timestamp()),
            Some(t.unix_timestamp())
        );
        assert_eq!(
            parse_json(&serde_json::json!("2024-01-01T00:00:00Z")).map(|p| p.year()),
            Some(2024)
        );
        for bad in ["", "yesterday", "2024-01-01", "2024-01-01T00:00:00"] {
            assert!(parse(bad).is_none(), "{bad}");
        }
        assert!(parse_json(&serde_json::json!(5)).is_none());
        let n = now();
        assert!(now_text().ends_with('Z') && now_micro_text().len() == 27);
        assert_eq!(n.offset(), UtcOffset::UTC);
    }
}
