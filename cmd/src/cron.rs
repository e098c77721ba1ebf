//! Five-field cron expressions (`minute hour day-of-month month day-of-week`) for
//! `--snapshot-schedule`, as k3s's `--etcd-snapshot-schedule-cron` takes them, evaluated in
//! UTC. Each field is `*`, `N`, `A-B`, any of those with `/STEP`, or a comma list of them;
//! day of week 0–7 (0 and 7 are Sunday). When both day fields are restricted, a day matching
//! either runs, as in cron.

use jiff::civil::DateTime;
use jiff::tz::Offset;
use jiff::{SignedDuration, Timestamp};

const MINUTE: SignedDuration = SignedDuration::from_mins(1);
const HOUR: SignedDuration = SignedDuration::from_hours(1);
const DAY: SignedDuration = SignedDuration::from_hours(24);

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    days_any: bool,
    weekdays_any: bool,
}

/// Parses one field into a bit set over `min..=max`.
fn field(text: &str, min: u32, max: u32, name: &str) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("{name}: step {s:?} is not a positive number"))?;
                (r, step)
            }
            None => (part, 1),
        };
        let num = |s: &str| -> Result<u32, String> {
            s.parse::<u32>()
                .ok()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| format!("{name}: {s:?} is not a number from {min} to {max}"))
        };
        let (lo, hi) = match range {
            "*" => (min, max),
            r => match r.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None if step > 1 => (num(r)?, max),
                None => (num(r)?, num(r)?),
            },
        };
        if lo > hi {
            return Err(format!("{name}: range {range:?} runs backwards"));
        }
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, text == "*"))
}

impl Cron {
    /// Parses `minute hour day-of-month month day-of-week`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [m, h, dom, mon, dow] = fields[..] else {
            return Err(format!(
                "{text:?} is not a cron schedule: give five fields, minute hour day-of-month \
                 month day-of-week, e.g. \"0 */12 * * *\""
            ));
        };
        let (minutes, _) = field(m, 0, 59, "minute")?;
        let (hours, _) = field(h, 0, 23, "hour")?;
        let (days, days_any) = field(dom, 1, 31, "day of month")?;
        let (months, _) = field(mon, 1, 12, "month")?;
        let (mut weekdays, weekdays_any) = field(dow, 0, 7, "day of week")?;
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1;
        }
        Ok(Self {
            minutes,
            hours,
            days,
            months,
            weekdays,
            days_any,
            weekdays_any,
        })
    }

    fn day_matches(&self, t: DateTime) -> bool {
        let dom = self.days & (1 << t.day()) != 0;
        let dow = self.weekdays & (1 << t.weekday().to_sunday_zero_offset()) != 0;
        match (self.days_any, self.weekdays_any) {
            (true, true) => true,
            (false, true) => dom,
            (true, false) => dow,
            (false, false) => dom || dow,
        }
    }

    /// The first minute strictly after `after` that the schedule names (within five years).
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let after = Offset::UTC.to_datetime(after);
        let start = after.date().at(after.hour(), after.minute(), 0, 0) + MINUTE;
        let limit = start + DAY * (366 * 5);
        let mut t = start;
        while t < limit {
            if self.months & (1 << t.month()) == 0 || !self.day_matches(t) {
                t = t.date().at(0, 0, 0, 0) + DAY;
            } else if self.hours & (1 << t.hour()) == 0 {
                t = t.date().at(t.hour(), 0, 0, 0) + HOUR;
            } else if self.minutes & (1 << t.minute()) == 0 {
                t += MINUTE;
            } else {
                return Offset::UTC.to_timestamp(t).ok();
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> Timestamp {
        k1s_api::time::parse(text).unwrap()
    }

    fn next(expr: &str, after: Timestamp) -> Timestamp {
        Cron::parse(expr).unwrap().next_after(after).unwrap()
    }

    #[test]
    fn common_schedules() {
        let t = utc("2026-11-27T23:49:14Z");
        assert_eq!(next("0 */12 * * *", t), utc("2026-11-28T00:00:00Z"));
        assert_eq!(
            next("0 */12 * * *", utc("2026-11-28T00:00:00Z")),
            utc("2026-11-28T12:00:00Z")
        );
        assert_eq!(next("*/5 * * * *", t), utc("2026-11-27T23:50:00Z"));
        assert_eq!(next("30 2 1 * *", t), utc("2026-12-01T02:30:00Z"));
        // Sundays (0 or 7): 2026-11-29 is a Sunday.
        assert_eq!(next("0 3 * * 0", t), utc("2026-11-29T03:00:00Z"));
        assert_eq!(next("0 3 * * 7", t), utc("2026-11-29T03:00:00Z"));
        // Both day fields: either matches (the 1st, or a Monday).
        assert_eq!(next("0 0 1 * 1", t), utc("2026-11-30T00:00:00Z"));
        assert_eq!(next("15,45 9-10 * 2 *", t), utc("2027-02-01T09:15:00Z"));
    }

    #[test]
    fn bad_schedules_say_what_is_wrong() {
        for (expr, says) in [
            ("0 */12 * *", "five fields"),
            ("60 * * * *", "minute"),
            ("* 24 * * *", "hour"),
            ("* * 0 * *", "day of month"),
            ("* * * * 8", "day of week"),
            ("*/0 * * * *", "step"),
            ("5-1 * * * *", "backwards"),
        ] {
            let err = Cron::parse(expr).unwrap_err();
            assert!(err.contains(says), "{expr}: {err}");
        }
        // February 30th never comes.
        assert!(
            Cron::parse("0 0 30 2 *")
                .unwrap()
                .next_after(utc("2026-01-01T00:00:00Z"))
                .is_none()
        );
    }
}
