//! Typed decoding of a JSON object without its `metadata.managedFields`.
//!
//! Informers of components that never read field ownership (the scheduler) decode every
//! watched object into its type; `managedFields` is a large part of a pod and of no use to
//! them, so kube-scheduler's informers drop it too (a transform on its informer factory).
//! [`WithoutManagedFields`] is a serde [`Deserializer`] over a borrowed [`Value`] that hides
//! that one field while the type decodes, without copying the object first.

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// Decodes `T` from `value` as `T::deserialize(value)` would, except that
/// `metadata.managedFields` is left out (`T` sees an object without it).
pub fn decode_without_managed_fields<'de, T: de::Deserialize<'de>>(
    value: &'de Value,
) -> Result<T, serde_json::Error> {
    T::deserialize(WithoutManagedFields::new(value))
}

/// Where in the object a value sits: only the root's `metadata` has a field to hide.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Metadata,
}

/// A [`Deserializer`] over a borrowed object that hides `metadata.managedFields`.
#[derive(Clone, Copy)]
pub struct WithoutManagedFields<'de> {
    value: &'de Value,
    level: Level,
}

impl<'de> WithoutManagedFields<'de> {
    pub fn new(value: &'de Value) -> Self {
        Self {
            value,
            level: Level::Root,
        }
    }

    /// The object's entries with the hidden field skipped, or `None` if it is not an object.
    fn entries(self) -> Option<Entries<'de>> {
        match self.value {
            Value::Object(m) => Some(Entries {
                iter: m.iter(),
                pending: None,
                level: self.level,
            }),
            _ => None,
        }
    }
}

/// Forwards a `deserialize_*` method to the wrapped value.
macro_rules! forward {
    ($($method:ident),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
                self.value.$method(visitor)
            }
        )*
    };
}

impl<'de> Deserializer<'de> for WithoutManagedFields<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.entries() {
            Some(entries) => visitor.visit_map(entries),
            None => self.value.deserialize_any(visitor),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.entries() {
            Some(entries) => visitor.visit_map(entries),
            None => self.value.deserialize_map(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.entries() {
            Some(entries) => visitor.visit_map(entries),
            None => self.value.deserialize_struct(name, fields, visitor),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.value.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.value.deserialize_tuple(len, visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.value.deserialize_tuple_struct(name, len, visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.value.deserialize_unit_struct(name, visitor)
    }

    forward!(
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_unit,
        deserialize_seq,
        deserialize_identifier,
        deserialize_ignored_any,
    );
}

/// The entries of an object, without `managedFields` in `metadata`.
struct Entries<'de> {
    iter: serde_json::map::Iter<'de>,
    /// The value of the key last returned, and whether it is the root's `metadata`.
    pending: Option<(&'de Value, bool)>,
    level: Level,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        for (key, value) in self.iter.by_ref() {
            if self.level == Level::Metadata && key == "managedFields" {
                continue;
            }
            let metadata = self.level == Level::Root && key == "metadata";
            self.pending = Some((value, metadata));
            return seed
                .deserialize(BorrowedStrDeserializer::<Self::Error>::new(key))
                .map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        match self.pending.take() {
            Some((value, true)) => seed.deserialize(WithoutManagedFields {
                value,
                level: Level::Metadata,
            }),
            Some((value, false)) => seed.deserialize(value),
            None => Err(de::Error::custom(
                "a map value was asked for before its key",
            )),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use serde::Deserialize;
    use serde_json::json;

    fn pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u0", "controller": true}],
                "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {}}}}]
            },
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        })
    }

    /// The object as the decoder should show it: everything but `metadata.managedFields`.
    fn trimmed(v: &Value) -> Value {
        let mut t = v.clone();
        if let Some(m) = t["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
        t
    }

    #[test]
    fn decodes_everything_but_managed_fields() {
        let v = pod();
        let got: Pod = decode_without_managed_fields(&v).unwrap();
        let want: Pod = serde_json::from_value(trimmed(&v)).unwrap();
        assert_eq!(got, want);
        assert!(got.metadata.managed_fields.is_none());
        assert_eq!(got.spec.unwrap().node_name.as_deref(), Some("n1"));
        // Decoded in full, the same object keeps them: the difference is the trimming alone.
        let full: Pod = serde_json::from_value(v).unwrap();
        assert_eq!(full.metadata.managed_fields.map(|m| m.len()), Some(1));
    }

    #[test]
    fn managed_fields_elsewhere_are_kept() {
        // Only metadata's field is hidden: a same-named key in a label map or spec stays.
        let v = json!({
            "metadata": {"name": "n", "labels": {"managedFields": "x"}},
            "spec": {"podCIDR": "10.0.0.0/24"}
        });
        let got: Node = decode_without_managed_fields(&v).unwrap();
        assert_eq!(
            got.metadata
                .labels
                .unwrap()
                .get("managedFields")
                .map(String::as_str),
            Some("x")
        );
        let want: Node = serde_json::from_value(v).unwrap();
        assert_eq!(got.spec, want.spec);
    }

    #[test]
    fn errors_are_those_of_a_plain_decode() {
        for bad in [
            json!("not an object"),
            json!({"metadata": {"name": 5}}),
            json!({"spec": {"containers": "none"}}),
        ] {
            let got = decode_without_managed_fields::<Pod>(&bad)
                .unwrap_err()
                .to_string();
            let want = Pod::deserialize(&bad).unwrap_err().to_string();
            assert_eq!(got, want, "{bad}");
        }
    }

    #[test]
    fn plain_values_decode_as_they_are() {
        let v = json!({"a": [1, 2], "b": null, "metadata": {"managedFields": [], "name": "x"}});
        let got: Value = decode_without_managed_fields(&v).unwrap();
        assert_eq!(
            got,
            json!({"a": [1, 2], "b": null, "metadata": {"name": "x"}})
        );
        let n: Option<u32> = decode_without_managed_fields(&json!(null)).unwrap();
        assert_eq!(n, None);
    }
}
