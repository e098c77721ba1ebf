//! Serializing an object with a few fields laid over it, without copying it first.
//!
//! A write that changes two fields of a large object (a pod's binding sets `spec.nodeName`
//! and one condition) can encode the shared decoded object with the changes laid over it
//! instead of copying the whole object, changing the copy, encoding it and dropping it.
//! Entries come out in the order a `serde_json::Value` object would write them (sorted keys),
//! so the bytes are those of the changed copy.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

/// A value laid over (or put into) an object.
pub(crate) enum Put<'a> {
    /// A string.
    Str(&'a str),
    /// A JSON value as it is.
    Value(&'a Value),
    /// An object: [`Overlay`].
    Object(Overlay<'a>),
    /// A list: the items of `base` that `keep` accepts, then `last`.
    Items {
        base: &'a [Value],
        keep: &'a dyn Fn(&Value) -> bool,
        last: &'a Value,
    },
}

/// Entries laid over an object, sorted by key, each key once.
pub(crate) type Puts<'a> = Vec<(&'a str, Put<'a>)>;

/// An object written as `base` (none: an empty object) without the keys in `skip`, with the
/// entries of `puts` laid over: each replaces the entry of `base` with its key, or is added.
pub(crate) struct Overlay<'a> {
    pub base: Option<&'a Map<String, Value>>,
    pub skip: &'a [&'a str],
    pub puts: Puts<'a>,
}

impl Serialize for Put<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Put::Str(v) => s.serialize_str(v),
            Put::Value(v) => v.serialize(s),
            Put::Object(o) => o.serialize(s),
            Put::Items { base, keep, last } => {
                let mut seq = s.serialize_seq(None)?;
                for item in base.iter().filter(|i| keep(i)) {
                    seq.serialize_element(item)?;
                }
                seq.serialize_element(last)?;
                seq.end()
            }
        }
    }
}

impl Serialize for Overlay<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        debug_assert!(
            self.puts.windows(2).all(|w| w[0].0 < w[1].0),
            "puts out of order"
        );
        let mut map = s.serialize_map(None)?;
        let mut puts = self.puts.iter().peekable();
        for (k, v) in self.base.into_iter().flatten() {
            // The puts that sort before this key, or replace it.
            while let Some((key, put)) = puts.next_if(|(key, _)| *key <= k.as_str()) {
                map.serialize_entry(key, put)?;
                if *key == k.as_str() {
                    break;
                }
            }
            let replaced = self.puts.iter().any(|(key, _)| *key == k.as_str());
            if !replaced && !self.skip.contains(&k.as_str()) {
                map.serialize_entry(k, v)?;
            }
        }
        for (key, put) in puts {
            map.serialize_entry(key, put)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn written(o: &Overlay<'_>) -> String {
        serde_json::to_string(o).unwrap()
    }

    #[test]
    fn puts_replace_or_join_in_key_order() {
        let base = json!({"b": 1, "d": {"x": 1}, "f": [1], "h": "keep"});
        let base = base.as_object().unwrap();
        let inner = json!({"y": 2});
        let o = Overlay {
            base: Some(base),
            skip: &["f"],
            puts: vec![
                ("a", Put::Str("first")),
                ("d", Put::Value(&inner)),
                ("e", Put::Str("between")),
                ("z", Put::Str("last")),
            ],
        };
        // As the changed copy would be written.
        let mut want = Value::Object(base.clone());
        want["a"] = json!("first");
        want["d"] = inner.clone();
        want["e"] = json!("between");
        want["z"] = json!("last");
        want.as_object_mut().unwrap().remove("f");
        assert_eq!(written(&o), serde_json::to_string(&want).unwrap());
    }

    #[test]
    fn empty_base_and_items() {
        let last = json!({"type": "New"});
        let keep = |v: &Value| v["type"] != "Old";
        let items = [json!({"type": "Old"}), json!({"type": "Other"})];
        let o = Overlay {
            base: None,
            skip: &[],
            puts: vec![(
                "conditions",
                Put::Items {
                    base: &items,
                    keep: &keep,
                    last: &last,
                },
            )],
        };
        assert_eq!(
            written(&o),
            r#"{"conditions":[{"type":"Other"},{"type":"New"}]}"#
        );
        let nested = Overlay {
            base: None,
            skip: &[],
            puts: vec![("status", Put::Object(o))],
        };
        assert_eq!(
            written(&nested),
            r#"{"status":{"conditions":[{"type":"Other"},{"type":"New"}]}}"#
        );
    }
}
