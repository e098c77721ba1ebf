//! Defaulting: dropping non-nullable nulls without default, then applying
//! `default`s where the parent exists (properties, additionalProperties, items).

use super::MAX_OBJECT_DEPTH;
use super::props::Props;
use serde_json::Value;

fn schema_for_field<'a>(k: &str, s: Option<&'a Props>) -> Option<&'a Props> {
    let s = s?;
    s.properties.get(k).or_else(|| s.additional_schema())
}

fn is_non_nullable_non_defaultable_null(x: &Value, s: Option<&Props>) -> bool {
    x.is_null() && s.is_some_and(|s| !s.nullable && s.default.is_none())
}

/// PruneNonNullableNullsWithoutDefaults.
pub(crate) fn prune_non_nullable_nulls(x: &mut Value, s: Option<&Props>, depth: usize) {
    if depth > MAX_OBJECT_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let schema = schema_for_field(&k, s);
                if m.get(&k)
                    .is_some_and(|v| is_non_nullable_non_defaultable_null(v, schema))
                {
                    m.remove(&k);
                } else if let Some(v) = m.get_mut(&k) {
                    prune_non_nullable_nulls(v, schema, depth + 1);
                }
            }
        }
        Value::Array(a) => {
            let items = s.and_then(|s| s.items.as_deref());
            for v in a.iter_mut() {
                prune_non_nullable_nulls(v, items, depth + 1);
            }
        }
        _ => {}
    }
}

fn is_non_nullable_null(x: &Value, s: &Props) -> bool {
    x.is_null() && !s.nullable
}

/// Default.
pub(crate) fn apply_defaults(x: &mut Value, s: &Props, depth: usize) {
    if depth > MAX_OBJECT_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else { continue };
                let missing = match m.get(k) {
                    None => true,
                    Some(v) => is_non_nullable_null(v, prop),
                };
                if missing {
                    m.insert(k.clone(), d.clone());
                }
            }
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let Some(v) = m.get_mut(&k) else { continue };
                if let Some(prop) = s.properties.get(&k) {
                    apply_defaults(v, prop, depth + 1);
                } else if let Some(ap) = s.additional_schema() {
                    if is_non_nullable_null(v, ap)
                        && let Some(d) = &ap.default
                    {
                        *v = d.clone();
                    }
                    apply_defaults(v, ap, depth + 1);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.items.as_deref() {
                for v in a.iter_mut() {
                    if is_non_nullable_null(v, items)
                        && let Some(d) = &items.default
                    {
                        *v = d.clone();
                    }
                    apply_defaults(v, items, depth + 1);
                }
            }
        }
        _ => {}
    }
}
