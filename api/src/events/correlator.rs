//! What to do with an event before it is written, as client-go's `EventCorrelator`:
//!
//! - **spam filter**: a token bucket per source and involved object (burst 25, then one token
//!   every 5 minutes); events beyond it are dropped.
//! - **aggregation**: events that differ only in their message (same source, object, type and
//!   reason) are counted per 10-minute window; from the 10th distinct message on, the event is
//!   rewritten as `(combined from similar events): MESSAGE` and shares one key, so it
//!   becomes a single Event whose count grows.
//! - **deduplication**: an event whose key (everything but the timestamps) was written before
//!   is not created again: the existing Event's `count` and `lastTimestamp` are patched.
//!
//! Pure bookkeeping on an injected clock; [`super::record`] does the writing. The caches are
//! bounded ([`MAX_KEYS`]): the least recently seen entries go first, as client-go's LRUs.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Entries kept per cache (client-go's `maxLruCacheEntries`).
pub const MAX_KEYS: usize = 4096;
/// Distinct messages per aggregation key and window before events are combined.
pub const MAX_SIMILAR: usize = 10;
/// The aggregation window.
pub const AGGREGATE_WINDOW: Duration = Duration::from_secs(600);
/// Spam filter: burst, and the time one token takes to come back.
pub const SPAM_BURST: f64 = 25.0;
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
/// The prefix of a combined event's message.
pub const COMBINED: &str = "(combined from similar events): ";

/// The fields of an event that decide its fate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventKey {
    pub component: String,
    pub host: String,
    /// kind, namespace, name, uid, apiVersion, fieldPath of the involved object.
    pub object: [String; 6],
    pub type_: String,
    pub reason: String,
    pub message: String,
}

impl EventKey {
    fn spam_key(&self) -> String {
        let [kind, ns, name, uid, api_version, _] = &self.object;
        [
            self.component.as_str(),
            &self.host,
            kind,
            ns,
            name,
            uid,
            api_version,
        ]
        .join("\u{0}")
    }

    fn aggregate_key(&self) -> String {
        let mut parts: Vec<&str> = vec![&self.component, &self.host];
        parts.extend(self.object.iter().map(String::as_str));
        parts.extend([self.type_.as_str(), &self.reason]);
        parts.join("\u{0}")
    }
}

/// What [`Correlator::observe`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Over the spam limit: write nothing.
    Drop,
    /// Create a new Event with this message and count 1, then call [`Correlator::created`]
    /// with `key`.
    Create { key: String, message: String },
    /// Patch the Event `name` to this count, message and the current time.
    Patch {
        key: String,
        name: String,
        count: i64,
        message: String,
    },
}

struct Bucket {
    tokens: f64,
    at: Instant,
    seen: Instant,
}

struct Similar {
    messages: HashSet<String>,
    since: Instant,
    seen: Instant,
}

struct Written {
    name: String,
    count: i64,
    seen: Instant,
}

/// The correlator's caches.
#[derive(Default)]
pub struct Correlator {
    spam: HashMap<String, Bucket>,
    similar: HashMap<String, Similar>,
    written: HashMap<String, Written>,
}

impl Correlator {
    /// Decides what to do with an event seen at `now`.
    pub fn observe(&mut self, ev: &EventKey, now: Instant) -> Decision {
        if !self.take_token(ev.spam_key(), now) {
            return Decision::Drop;
        }
        let aggregate = ev.aggregate_key();
        let similar = self.similar.entry(aggregate.clone()).or_insert(Similar {
            messages: HashSet::new(),
            since: now,
            seen: now,
        });
        if now.duration_since(similar.since) > AGGREGATE_WINDOW {
            similar.messages.clear();
            similar.since = now;
        }
        similar.seen = now;
        similar.messages.insert(ev.message.clone());
        let (key, message) = if similar.messages.len() >= MAX_SIMILAR {
            (aggregate, format!("{COMBINED}{}", ev.message))
        } else {
            (
                format!("{aggregate}\u{0}{}", ev.message),
                ev.message.clone(),
            )
        };
        trim(&mut self.similar, |s| s.seen);
        match self.written.get_mut(&key) {
            Some(w) => {
                w.count += 1;
                w.seen = now;
                Decision::Patch {
                    key,
                    name: w.name.clone(),
                    count: w.count,
                    message,
                }
            }
            None => Decision::Create { key, message },
        }
    }

    /// Records that the Event for `key` was created as `name` (count 1).
    pub fn created(&mut self, key: String, name: String, now: Instant) {
        self.written.insert(
            key,
            Written {
                name,
                count: 1,
                seen: now,
            },
        );
        trim(&mut self.written, |w| w.seen);
    }

    /// Forgets the Event for `key` (its patch failed: it expired or was deleted).
    pub fn forget(&mut self, key: &str) {
        self.written.remove(key);
    }

    fn take_token(&mut self, key: String, now: Instant) -> bool {
        let b = self.spam.entry(key).or_insert(Bucket {
            tokens: SPAM_BURST,
            at: now,
            seen: now,
        });
        let refill = now.duration_since(b.at).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        b.tokens = (b.tokens + refill).min(SPAM_BURST);
        b.at = now;
        b.seen = now;
        let allowed = b.tokens >= 1.0;
        if allowed {
            b.tokens -= 1.0;
        }
        trim(&mut self.spam, |b| b.seen);
        allowed
    }
}

/// Drops the least recently seen entries beyond [`MAX_KEYS`] (a quarter at a time, so the
/// scan is rare).
fn trim<V>(map: &mut HashMap<String, V>, seen: impl Fn(&V) -> Instant) {
    if map.len() <= MAX_KEYS {
        return;
    }
    let mut by_age: Vec<(Instant, String)> =
        map.iter().map(|(k, v)| (seen(v), k.clone())).collect();
    by_age.sort();
    for (_, k) in by_age.into_iter().take(MAX_KEYS / 4) {
        map.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(reason: &str, message: &str) -> EventKey {
        EventKey {
            component: "kubelet".into(),
            host: "n1".into(),
            object: [
                "Pod".into(),
                "default".into(),
                "p".into(),
                "uid-1".into(),
                "v1".into(),
                String::new(),
            ],
            type_: "Warning".into(),
            reason: reason.into(),
            message: message.into(),
        }
    }

    fn create(c: &mut Correlator, e: &EventKey, now: Instant, name: &str) -> String {
        match c.observe(e, now) {
            Decision::Create { key, message } => {
                c.created(key, name.into(), now);
                message
            }
            other => panic!("expected a create, got {other:?}"),
        }
    }

    #[test]
    fn repeats_patch_the_first_event() {
        let mut c = Correlator::default();
        let t = Instant::now();
        let e = ev("BackOff", "Back-off restarting failed container");
        create(&mut c, &e, t, "p.1");
        for n in 2..=4 {
            assert_eq!(
                c.observe(&e, t + Duration::from_secs(n)),
                Decision::Patch {
                    key: e.aggregate_key() + "\u{0}" + &e.message,
                    name: "p.1".into(),
                    count: n as i64,
                    message: e.message.clone(),
                }
            );
        }
        // Another reason is another event.
        create(&mut c, &ev("Unhealthy", "probe failed"), t, "p.2");
        // A forgotten (expired) event is created again.
        c.forget(&(e.aggregate_key() + "\u{0}" + &e.message));
        create(&mut c, &e, t, "p.3");
    }

    #[test]
    fn the_tenth_distinct_message_is_combined() {
        let mut c = Correlator::default();
        let t = Instant::now();
        for i in 0..9 {
            let m = create(
                &mut c,
                &ev("Failed", &format!("error {i}")),
                t,
                &format!("p.{i}"),
            );
            assert_eq!(m, format!("error {i}"));
        }
        let m = create(&mut c, &ev("Failed", "error 9"), t, "p.combined");
        assert_eq!(m, format!("{COMBINED}error 9"));
        match c.observe(&ev("Failed", "error 10"), t) {
            Decision::Patch {
                name,
                count,
                message,
                ..
            } => {
                assert_eq!((name.as_str(), count), ("p.combined", 2));
                assert_eq!(message, format!("{COMBINED}error 10"));
            }
            other => panic!("{other:?}"),
        }
        // After the window, messages count from zero again.
        let later = t + AGGREGATE_WINDOW + Duration::from_secs(1);
        let m = create(&mut c, &ev("Failed", "error 11"), later, "p.new");
        assert_eq!(m, "error 11");
    }

    #[test]
    fn spam_is_dropped_past_the_burst_and_refills_slowly() {
        let mut c = Correlator::default();
        let t = Instant::now();
        let mut passed = 0;
        for i in 0..40 {
            if c.observe(&ev(&format!("R{i}"), "m"), t) != Decision::Drop {
                passed += 1;
            }
        }
        assert_eq!(passed, 25);
        assert_eq!(
            c.observe(&ev("R", "m"), t + Duration::from_secs(60)),
            Decision::Drop
        );
        assert_ne!(
            c.observe(&ev("R", "m"), t + SPAM_REFILL + Duration::from_secs(1)),
            Decision::Drop
        );
        // Another object has its own bucket.
        let mut other = ev("R", "m");
        other.object[2] = "q".into();
        assert_ne!(c.observe(&other, t), Decision::Drop);
    }

    #[test]
    fn caches_stay_bounded() {
        let mut c = Correlator::default();
        let t = Instant::now();
        for i in 0..(MAX_KEYS + 10) {
            let mut e = ev("R", "m");
            e.object[2] = format!("p{i}");
            if let Decision::Create { key, .. } = c.observe(&e, t + Duration::from_millis(i as u64))
            {
                c.created(key, format!("p{i}.1"), t);
            }
        }
        assert!(c.spam.len() <= MAX_KEYS);
        assert!(c.similar.len() <= MAX_KEYS);
        assert!(c.written.len() <= MAX_KEYS);
    }
}
