//! Pruning of unknown fields (structural pruning), plus coercion of embedded
//! resources' metadata.

use super::MAX_OBJECT_DEPTH;
use super::meta::{META_FIELDS, coerce_embedded_metadata};
use super::props::{AdditionalProps, Props};
use serde_json::Value;

struct Pruner {
    unknown: Vec<String>,
    record: bool,
    coerce: bool,
}

fn join_key(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

fn ap_schema(s: &Props) -> Option<&Props> {
    match &s.additional_properties {
        Some(AdditionalProps::Schema(p)) => Some(p),
        _ => None,
    }
}

impl Pruner {
    fn record(&mut self, p: String) {
        if self.record {
            self.unknown.push(p);
        }
    }

    /// `root` marks the resource root (treated as an embedded resource).
    fn prune(&mut self, x: &mut Value, s: Option<&Props>, root: bool, path: &str, depth: usize) {
        if depth > MAX_OBJECT_DEPTH {
            return;
        }
        if let Some(s) = s
            && s.preserve_unknown()
        {
            self.skip_prune(x, s, root, path, depth);
            return;
        }
        match x {
            Value::Object(m) => {
                let Some(s) = s else {
                    let mut keys: Vec<String> = m.keys().cloned().collect();
                    keys.sort();
                    for k in keys {
                        self.record(join_key(path, &k));
                    }
                    m.clear();
                    return;
                };
                let embedded = root || s.x_embedded_resource;
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        continue;
                    }
                    if let Some(prop) = s.properties.get(&k) {
                        if let Some(v) = m.get_mut(&k) {
                            self.prune(v, Some(prop), false, &join_key(path, &k), depth + 1);
                        }
                    } else if s.additional_properties.is_some() {
                        if let Some(v) = m.get_mut(&k) {
                            self.prune(v, ap_schema(s), false, &join_key(path, &k), depth + 1);
                        }
                    } else {
                        if !META_FIELDS.contains(&k.as_str()) || !path.is_empty() {
                            self.record(join_key(path, &k));
                        }
                        m.remove(&k);
                    }
                }
                if embedded && !root && self.coerce {
                    self.coerce_meta(m, path);
                }
            }
            Value::Array(a) => {
                let items = s.and_then(|s| s.items.as_deref());
                for (i, v) in a.iter_mut().enumerate() {
                    self.prune(v, items, false, &format!("{path}[{i}]"), depth + 1);
                }
            }
            _ => {}
        }
    }

    fn skip_prune(&mut self, x: &mut Value, s: &Props, root: bool, path: &str, depth: usize) {
        if depth > MAX_OBJECT_DEPTH {
            return;
        }
        match x {
            Value::Object(m) => {
                let embedded = root || s.x_embedded_resource;
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        continue;
                    }
                    let Some(v) = m.get_mut(&k) else { continue };
                    if let Some(prop) = s.properties.get(&k) {
                        self.prune(v, Some(prop), false, &join_key(path, &k), depth + 1);
                    } else if s.additional_properties.is_some() {
                        self.prune(v, ap_schema(s), false, &join_key(path, &k), depth + 1);
                    }
                }
                if embedded && !root && self.coerce {
                    self.coerce_meta(m, path);
                }
            }
            Value::Array(a) => {
                if let Some(items) = s.items.as_deref() {
                    for (i, v) in a.iter_mut().enumerate() {
                        self.skip_prune(v, items, false, &format!("{path}[{i}]"), depth + 1);
                    }
                }
            }
            _ => {}
        }
    }

    fn coerce_meta(&mut self, m: &mut serde_json::Map<String, Value>, path: &str) {
        if let Some(meta) = m.get_mut("metadata") {
            let mp = join_key(path, "metadata");
            for f in coerce_embedded_metadata(meta) {
                self.record(format!("{mp}.{f}"));
            }
        }
    }
}

/// Prunes a whole resource; returns the sorted unknown-field paths.
pub(crate) fn prune_root(obj: &mut Value, s: &Props) -> Vec<String> {
    let mut p = Pruner {
        unknown: Vec::new(),
        record: true,
        coerce: true,
    };
    p.prune(obj, Some(s), true, "", 0);
    p.unknown.sort();
    p.unknown
}

/// Prunes a value (e.g. a default) against `s`; `is_resource_root` keeps
/// apiVersion/kind/metadata at the top.
pub(crate) fn prune_value(v: &mut Value, s: &Props, is_resource_root: bool) {
    let mut p = Pruner {
        unknown: Vec::new(),
        record: false,
        coerce: false,
    };
    p.prune(v, Some(s), is_resource_root, "", 0);
}
