//! Time as the Kubernetes API writes it, in one place: `metav1.Time` (RFC 3339, whole seconds,
//! UTC: `2006-01-02T15:04:05Z`), `metav1.MicroTime` (six fractional digits: Leases, events'
//! `eventTime`), and parsing of any RFC 3339 time a client wrote. Every component formats and
//! parses timestamps through here; injectable clocks (`k1s_runtime::clock`) build on it.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::Offset;

/// Now.
pub fn now() -> Timestamp {
    Timestamp::now()
}

/// `t` as `metav1.Time`: RFC 3339 in UTC, fractional seconds dropped (truncated).
pub fn format(t: Timestamp) -> String {
    format!("{t:.0}")
}

/// Now as `metav1.Time`.
pub fn now_text() -> String {
    format(now())
}

/// `t` as `metav1.MicroTime`: RFC 3339 in UTC with six fractional digits (truncated).
pub fn format_micro(t: Timestamp) -> String {
    format!("{t:.6}")
}

/// Now as `metav1.MicroTime`.
pub fn now_micro_text() -> String {
    format_micro(now())
}

/// `t` as RFC 3339 in UTC with as many fractional digits as it has, trailing zeros trimmed
/// (container log lines, the CRI's RFC3339Nano).
pub fn format_nano(t: Timestamp) -> String {
    t.to_string()
}

/// Seconds since the epoch as `metav1.Time`; empty when out of range.
pub fn format_unix(secs: i64) -> String {
    Timestamp::from_second(secs).map(format).unwrap_or_default()
}

/// Any RFC 3339 time (with or without fractional seconds, any offset):
/// `YYYY-MM-DD?hh:mm:ss[.f…](Z|±hh:mm)`, the separator any one byte, `Z` either case,
/// fractional digits past the ninth dropped, a leap second (`:60`) only where one can be
/// (the last second of a month in UTC), read as the nanosecond before the next second.
/// This is what `time`'s RFC 3339 parser took before k1s moved to jiff; jiff's own parser
/// (Temporal/ISO 8601) would also take `±hh`, `±hhmm`, no seconds, the basic format and time
/// zone annotations, and not the separators other than `T`, `t` and space.
pub fn parse(s: &str) -> Option<Timestamp> {
    let b = s.trim().as_bytes();
    let num = |at: usize, n: usize| -> Option<i64> {
        let d = b.get(at..at + n)?;
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0i64, |acc, c| acc * 10 + i64::from(c - b'0')))
    };
    let lit = |at: usize, c: u8| b.get(at) == Some(&c);
    if !(lit(4, b'-') && lit(7, b'-') && b.len() > 10 && lit(13, b':') && lit(16, b':')) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, mut second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let mut at = 19;
    let mut nanos = 0i64;
    if lit(at, b'.') {
        at += 1;
        let digits = b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        let mut scale = 100_000_000;
        for c in &b[at..at + digits] {
            nanos += i64::from(c - b'0') * scale;
            scale /= 10;
        }
        at += digits;
    }
    let offset = match b.get(at)? {
        b'Z' | b'z' if b.len() == at + 1 => 0,
        sign @ (b'+' | b'-') if b.len() == at + 6 && lit(at + 3, b':') => {
            let (h, m) = (num(at + 1, 2)?, num(at + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let secs = h * 3600 + m * 60;
            if *sign == b'-' { -secs } else { secs }
        }
        _ => return None,
    };
    let leap = second == 60;
    if leap {
        (second, nanos) = (59, 999_999_999);
    }
    let dt = DateTime::new(
        i16::try_from(year).ok()?,
        i8::try_from(month).ok()?,
        i8::try_from(day).ok()?,
        i8::try_from(hour).ok()?,
        i8::try_from(minute).ok()?,
        i8::try_from(second).ok()?,
        i32::try_from(nanos).ok()?,
    )
    .ok()?;
    let offset = Offset::from_seconds(i32::try_from(offset).ok()?).ok()?;
    let t = offset.to_timestamp(dt).ok()?;
    if leap {
        // Only where a leap second can be: 23:59:60 UTC on the last day of a month.
        let utc = Offset::UTC.to_datetime(t);
        if (utc.hour(), utc.minute()) != (23, 59) || utc.day() != utc.days_in_month() {
            return None;
        }
    }
    Some(t)
}

/// A JSON string holding an RFC 3339 time; anything else is `None`.
pub fn parse_json(v: &serde_json::Value) -> Option<Timestamp> {
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
            parse(&format(t)).map(|p| p.as_second()),
            Some(t.as_second())
        );
        assert_eq!(
            parse_json(&serde_json::json!("2024-01-01T00:00:00Z"))
                .map(|p| Offset::UTC.to_datetime(p).year()),
            Some(2024)
        );
        for bad in ["", "yesterday", "2024-01-01", "2024-01-01T00:00:00"] {
            assert!(parse(bad).is_none(), "{bad}");
        }
        assert!(parse_json(&serde_json::json!(5)).is_none());
        let n = now();
        assert!(now_text().ends_with('Z') && now_micro_text().len() == 27);
        assert!(
            n.duration_since(Timestamp::try_from(std::time::SystemTime::now()).unwrap())
                .abs()
                < jiff::SignedDuration::from_secs(5)
        );
    }

    /// What `time`'s RFC 3339 parser and formats did, which these kept when moving to jiff.
    #[test]
    fn rfc3339_as_before() {
        let at = |s: &str| parse(s).map(format_nano);
        // Offsets, lower-case `z`, any separator, any number of fractional digits (past nine
        // dropped), a leap second only at the end of a month in UTC.
        assert_eq!(
            at("2024-01-01T00:00:00-05:30").unwrap(),
            "2024-01-01T05:30:00Z"
        );
        assert_eq!(at("2024-01-01t00:00:00z").unwrap(), "2024-01-01T00:00:00Z");
        assert_eq!(
            at("2024-01-01 00:00:00.5Z").unwrap(),
            "2024-01-01T00:00:00.5Z"
        );
        assert_eq!(
            at(" 2024-01-01T00:00:00.1234567891234Z\n").unwrap(),
            "2024-01-01T00:00:00.123456789Z"
        );
        assert_eq!(
            at("2016-12-31T23:59:60Z").unwrap(),
            "2016-12-31T23:59:59.999999999Z"
        );
        assert_eq!(
            at("2017-01-01T00:59:60+01:00").unwrap(),
            "2016-12-31T23:59:59.999999999Z"
        );
        assert_eq!(
            at("2000-01-01T00:00:00+23:59").unwrap(),
            "1999-12-31T00:01:00Z"
        );
        assert_eq!(at("0000-01-01T00:00:00Z").unwrap(), "0000-01-01T00:00:00Z");
        for bad in [
            "2016-12-30T23:59:60Z",
            "2024-01-01T00:00:00+24:00",
            "2024-01-01T00:00:00+01:60",
            "2024-01-01T00:00:00+01",
            "2024-01-01T00:00:00+0100",
            "2024-01-01T00:00Z",
            "20240101T000000Z",
            "2024-01-01T00:00:00Z[UTC]",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00,5Z",
            "2024-02-30T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "+2024-01-01T00:00:00Z",
            "2024-01-01T00:00:00Zx",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
        // Formats truncate, never round; before the epoch too.
        let t = parse("1969-12-31T23:59:59.9999999Z").unwrap();
        assert_eq!(format(t), "1969-12-31T23:59:59Z");
        assert_eq!(format_micro(t), "1969-12-31T23:59:59.999999Z");
        assert_eq!(format_nano(t), "1969-12-31T23:59:59.9999999Z");
        assert_eq!(
            format_micro(parse("2024-01-01T00:00:00Z").unwrap()),
            "2024-01-01T00:00:00.000000Z"
        );
        assert_eq!(format_unix(-1), "1969-12-31T23:59:59Z");
        assert_eq!(format_unix(253_402_300_800), "");
    }
}
