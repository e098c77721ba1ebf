//! Cron schedules as upstream's CronJob controller parses them (robfig/cron's standard
//! parser): five fields (minute, hour, day of month, month, day of week) with `*`, `?`,
//! ranges, steps, lists and month/weekday names; the `@yearly`, `@annually`, `@monthly`,
//! `@weekly`, `@daily`, `@midnight`, `@hourly` and `@every <duration>` descriptors; and an
//! optional `CRON_TZ=`/`TZ=` prefix. Times are computed on the wall clock of an IANA time
//! zone read from the system tz database (`/usr/share/zoneinfo`), as Go's
//! `time.LoadLocation` does.
//!
//! Day matching follows robfig/cron: when either day field is `*`, `?` or `*/1`, both must
//! match, otherwise either may.

use std::path::{Component, Path, PathBuf};

use jiff::Timestamp;
use jiff::tz::{Offset, TimeZone};

/// The system tz database.
const ZONEINFO: &str = "/usr/share/zoneinfo";
/// Set on a field written as `*` or `?` (or with step 1).
const STAR: u64 = 1 << 63;
/// How far ahead a schedule is searched (robfig gives up after five years).
const HORIZON_YEARS: i64 = 5;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("expected exactly 5 fields, found {0}: {1}")]
    FieldCount(usize, String),
    #[error("{0}")]
    Field(String),
    #[error("unrecognized descriptor: {0}")]
    Descriptor(String),
    #[error("unknown time zone {0}")]
    TimeZone(String),
}

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    Spec {
        minute: u64,
        hour: u64,
        dom: u64,
        month: u64,
        dow: u64,
        /// A `CRON_TZ=`/`TZ=` prefix.
        zone: Option<String>,
    },
    /// `@every <duration>`, whole seconds.
    Every(i64),
}

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

fn bits(lo: u32, hi: u32, step: u32) -> u64 {
    (lo..=hi)
        .step_by(step as usize)
        .fold(0, |acc, i| acc | (1u64 << i))
}

fn value(text: &str, b: &Bounds) -> Result<u32, ScheduleError> {
    let lower = text.to_ascii_lowercase();
    if let Some(i) = b.names.iter().position(|n| *n == lower) {
        return Ok(u32::try_from(i).unwrap_or(0) + b.min);
    }
    text.parse::<u32>()
        .map_err(|_| ScheduleError::Field(format!("failed to parse int from {text}")))
}

/// One comma-separated part of a field: `*`, `?`, `a`, `a-b`, each optionally `/step`.
fn range(expr: &str, b: &Bounds) -> Result<u64, ScheduleError> {
    let (span, step) = match expr.split_once('/') {
        Some((s, st)) => (s, Some(st)),
        None => (expr, None),
    };
    let (mut lo, mut hi, mut extra) = if span == "*" || span == "?" {
        (b.min, b.max, STAR)
    } else {
        match span.split_once('-') {
            Some((a, z)) => (value(a, b)?, value(z, b)?, 0),
            None => {
                let v = value(span, b)?;
                (v, v, 0)
            }
        }
    };
    if let Some(st) = step {
        let n = st
            .parse::<u32>()
            .map_err(|_| ScheduleError::Field(format!("failed to parse int from {st}")))?;
        if n == 0 {
            return Err(ScheduleError::Field(format!(
                "step of range should be a positive number: {expr}"
            )));
        }
        // `N/step` means `N-max/step`.
        if !span.contains('-') && span != "*" && span != "?" {
            hi = b.max;
        }
        if n > 1 {
            extra = 0;
        }
        if lo < b.min {
            lo = b.min;
        }
        return check(lo, hi, b, expr).map(|()| bits(lo, hi, n) | extra);
    }
    check(lo, hi, b, expr).map(|()| bits(lo, hi, 1) | extra)
}

fn check(lo: u32, hi: u32, b: &Bounds, expr: &str) -> Result<(), ScheduleError> {
    if lo < b.min {
        return Err(ScheduleError::Field(format!(
            "beginning of range ({lo}) below minimum ({}): {expr}",
            b.min
        )));
    }
    if hi > b.max {
        return Err(ScheduleError::Field(format!(
            "end of range ({hi}) above maximum ({}): {expr}",
            b.max
        )));
    }
    if lo > hi {
        return Err(ScheduleError::Field(format!(
            "beginning of range ({lo}) beyond end of range ({hi}): {expr}"
        )));
    }
    Ok(())
}

fn field(text: &str, b: &Bounds) -> Result<u64, ScheduleError> {
    text.split(',')
        .try_fold(0, |acc, part| Ok(acc | range(part, b)?))
}

/// A Go duration (`1h30m`, `90s`, `1.5h`) in whole seconds.
fn go_duration(text: &str) -> Option<i64> {
    let mut total = 0f64;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "us" | "µs" => 0.000_001,
            "ns" => 0.000_000_001,
            _ => return None,
        };
        total += num * scale;
        rest = &rest[u..];
    }
    #[allow(clippy::cast_possible_truncation)]
    Some(total as i64)
}

impl Schedule {
    /// Parses a schedule as upstream's `cron.ParseStandard`.
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        let mut spec = text.trim();
        let mut zone = None;
        for prefix in ["CRON_TZ=", "TZ="] {
            if let Some(rest) = spec.strip_prefix(prefix) {
                let (z, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                load_zone(z)?;
                zone = Some(z.to_owned());
                spec = tail.trim();
            }
        }
        if let Some(d) = spec.strip_prefix('@') {
            let five = match d {
                "yearly" | "annually" => "0 0 1 1 *",
                "monthly" => "0 0 1 * *",
                "weekly" => "0 0 * * 0",
                "daily" | "midnight" => "0 0 * * *",
                "hourly" => "0 * * * *",
                _ => {
                    if let Some(every) = d.strip_prefix("every ") {
                        let secs = go_duration(every).ok_or_else(|| {
                            ScheduleError::Descriptor(format!("failed to parse duration {spec}"))
                        })?;
                        return Ok(Schedule::Every(secs.max(1)));
                    }
                    return Err(ScheduleError::Descriptor(spec.to_owned()));
                }
            };
            return Self::parse_fields(five, zone);
        }
        Self::parse_fields(spec, zone)
    }

    fn parse_fields(spec: &str, zone: Option<String>) -> Result<Self, ScheduleError> {
        let f: Vec<&str> = spec.split_whitespace().collect();
        if f.len() != 5 {
            return Err(ScheduleError::FieldCount(f.len(), spec.to_owned()));
        }
        Ok(Schedule::Spec {
            minute: field(f[0], &MINUTES)?,
            hour: field(f[1], &HOURS)?,
            dom: field(f[2], &DOM)?,
            month: field(f[3], &MONTHS)?,
            dow: field(f[4], &DOW)?,
            zone,
        })
    }

    /// The zone of a `CRON_TZ=` prefix, if any.
    pub fn zone(&self) -> Option<&str> {
        match self {
            Schedule::Spec { zone, .. } => zone.as_deref(),
            Schedule::Every(_) => None,
        }
    }

    /// The first activation strictly after `after`, on the wall clock of `tz`; `None` if there
    /// is none within five years.
    pub fn next(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let (minute, hour, dom, month, dow) = match self {
            Schedule::Every(secs) => {
                let t = Timestamp::from_second(after.as_second()).ok()?;
                return Some(t + jiff::SignedDuration::from_secs(*secs));
            }
            Schedule::Spec {
                minute,
                hour,
                dom,
                month,
                dow,
                ..
            } => (*minute, *hour, *dom, *month, *dow),
        };
        let has = |set: u64, v: i8| set & (1u64 << v) != 0;
        let start = after.as_second().div_euclid(60) * 60 + 60;
        let limit = after.as_second() + HORIZON_YEARS * 366 * 86_400;
        let mut t = start;
        while t <= limit {
            let local = Offset::UTC.to_datetime(Timestamp::from_second(t + offset_at(tz, t)).ok()?);
            let (m, h) = (i64::from(local.minute()), i64::from(local.hour()));
            let dom_ok = has(dom, local.day());
            let dow_ok = has(dow, local.weekday().to_sunday_zero_offset());
            let day_ok = if dom & STAR != 0 || dow & STAR != 0 {
                dom_ok && dow_ok
            } else {
                dom_ok || dow_ok
            };
            if !has(month, local.month()) || !day_ok {
                // To the next local midnight; an hour short, in case the day is short (DST).
                let left = 24 * 60 - (h * 60 + m);
                t += 60 * if left > 60 { left - 60 } else { left };
                continue;
            }
            if !has(hour, local.hour()) {
                t += 60 * (60 - m);
                continue;
            }
            if !has(minute, local.minute()) {
                t += 60;
                continue;
            }
            return Timestamp::from_second(t).ok();
        }
        None
    }
}

/// Loads an IANA time zone from the system database (`None`/empty: UTC, as upstream's
/// controller uses when `timeZone` is unset).
pub fn load_zone(name: &str) -> Result<TimeZone, ScheduleError> {
    if name.is_empty() || name == "UTC" {
        return Ok(TimeZone::UTC);
    }
    let err = || ScheduleError::TimeZone(name.to_owned());
    let rel = Path::new(name);
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(err());
    }
    let path: PathBuf = Path::new(ZONEINFO).join(rel);
    let bytes = std::fs::read(&path).map_err(|_| err())?;
    TimeZone::tzif(name, &bytes).map_err(|_| err())
}

/// The zone's offset from UTC at `unix` seconds, in seconds (0 outside jiff's range).
pub fn offset_at(tz: &TimeZone, unix: i64) -> i64 {
    jiff::Timestamp::from_second(unix).map_or(0, |ts| i64::from(tz.to_offset(ts).seconds()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        k1s_api::time::parse(text).unwrap()
    }

    fn next(spec: &str, after: &str, zone: &str) -> String {
        let s = Schedule::parse(spec).unwrap();
        let tz = load_zone(zone).unwrap();
        k1s_runtime::clock::format(s.next(at(after), &tz).unwrap())
    }

    #[test]
    fn next_times_utc() {
        let cases = [
            (
                "*/1 * * * *",
                "2024-01-01T00:00:00Z",
                "2024-01-01T00:01:00Z",
            ),
            (
                "*/1 * * * *",
                "2024-01-01T00:00:30Z",
                "2024-01-01T00:01:00Z",
            ),
            (
                "*/15 * * * *",
                "2024-01-01T00:16:00Z",
                "2024-01-01T00:30:00Z",
            ),
            (
                "0 */2 * * *",
                "2024-01-01T01:00:00Z",
                "2024-01-01T02:00:00Z",
            ),
            (
                "30 9 * * mon-fri",
                "2024-01-06T00:00:00Z",
                "2024-01-08T09:30:00Z",
            ),
            ("0 0 29 2 *", "2024-03-01T00:00:00Z", "2028-02-29T00:00:00Z"),
            (
                "0 0 1,15 * *",
                "2024-01-02T00:00:00Z",
                "2024-01-15T00:00:00Z",
            ),
            (
                "5 4 * jan,JUL *",
                "2024-02-01T00:00:00Z",
                "2024-07-01T04:05:00Z",
            ),
            (
                "0 12 1-7/2 * *",
                "2024-01-02T00:00:00Z",
                "2024-01-03T12:00:00Z",
            ),
            (
                "10/20 * * * *",
                "2024-01-01T00:11:00Z",
                "2024-01-01T00:30:00Z",
            ),
            ("@hourly", "2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z"),
            ("@daily", "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"),
            ("@weekly", "2024-01-01T00:00:00Z", "2024-01-07T00:00:00Z"),
            ("@monthly", "2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z"),
            ("@yearly", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"),
            ("@every 90s", "2024-01-01T00:00:00Z", "2024-01-01T00:01:30Z"),
        ];
        for (spec, after, want) in cases {
            assert_eq!(next(spec, after, "UTC"), want, "{spec} after {after}");
        }
    }

    #[test]
    fn day_of_month_or_day_of_week() {
        // Neither is `*`: either may match (the 13th, or a Friday).
        assert_eq!(
            next("0 0 13 * 5", "2024-01-01T00:00:00Z", "UTC"),
            "2024-01-05T00:00:00Z"
        );
        // `*` in one of them: both must match.
        assert_eq!(
            next("0 0 * * 5", "2024-01-01T00:00:00Z", "UTC"),
            "2024-01-05T00:00:00Z"
        );
        assert_eq!(
            next("0 0 13 * ?", "2024-01-01T00:00:00Z", "UTC"),
            "2024-01-13T00:00:00Z"
        );
        // `*/1` still counts as a star, `*/2` does not (robfig/cron).
        assert_eq!(
            next("0 0 20 * */1", "2024-01-01T00:00:00Z", "UTC"),
            "2024-01-20T00:00:00Z"
        );
        assert_eq!(
            next("0 0 20 * */2", "2024-01-01T00:00:00Z", "UTC"),
            "2024-01-02T00:00:00Z"
        );
    }

    #[test]
    fn time_zones_and_dst() {
        // 09:00 in New York is 14:00 UTC in winter and 13:00 UTC in summer.
        assert_eq!(
            next("0 9 * * *", "2024-01-10T00:00:00Z", "America/New_York"),
            "2024-01-10T14:00:00Z"
        );
        assert_eq!(
            next("0 9 * * *", "2024-07-10T00:00:00Z", "America/New_York"),
            "2024-07-10T13:00:00Z"
        );
        // 02:30 does not exist on 2024-03-10 there: the next is the day after.
        assert_eq!(
            next("30 2 * * *", "2024-03-10T00:00:00Z", "America/New_York"),
            "2024-03-11T06:30:00Z"
        );
        // Midnight right after a spring-forward day is not skipped.
        assert_eq!(
            next("0 0 * * *", "2024-03-10T05:00:00Z", "America/New_York"),
            "2024-03-11T04:00:00Z"
        );
        assert_eq!(
            next("0 0 * * *", "2024-01-01T00:00:00Z", "Asia/Kolkata"),
            "2024-01-01T18:30:00Z"
        );
        // A CRON_TZ prefix names the zone the caller computes in.
        let s = Schedule::parse("CRON_TZ=Asia/Tokyo 0 9 * * *").unwrap();
        assert_eq!(s.zone(), Some("Asia/Tokyo"));
        let tokyo = load_zone("Asia/Tokyo").unwrap();
        let t = s.next(at("2024-01-01T01:00:00Z"), &tokyo).unwrap();
        assert_eq!(k1s_runtime::clock::format(t), "2024-01-02T00:00:00Z");
        assert!(matches!(
            load_zone("Mars/Olympus"),
            Err(ScheduleError::TimeZone(_))
        ));
        assert!(load_zone("../etc/passwd").is_err());
        assert!(load_zone("/etc/localtime").is_err());
    }

    #[test]
    fn bad_schedules() {
        for bad in [
            "* * * *",
            "* * * * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 7",
            "5-1 * * * *",
            "*/0 * * * *",
            "a * * * *",
            "@fortnightly",
            "@every xyz",
        ] {
            assert!(Schedule::parse(bad).is_err(), "{bad}");
        }
    }
}
