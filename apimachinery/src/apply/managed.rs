//! `metadata.managedFields`: decoding entries into per-manager field sets and encoding them back,
//! sorted as upstream sorts them.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, FieldSetError};

pub(crate) const OP_APPLY: &str = "Apply";
pub(crate) const OP_UPDATE: &str = "Update";

/// What identifies a manager: its name, operation and subresource, plus the API version for
/// `Update` managers (an applier owns its fields whatever version it applied with).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ManagerId {
    pub manager: String,
    pub operation: &'static str,
    pub api_version: String,
    pub subresource: String,
}

impl ManagerId {
    pub fn new(
        manager: &str,
        operation: &'static str,
        api_version: &str,
        subresource: Option<&str>,
    ) -> ManagerId {
        ManagerId {
            manager: if manager.is_empty() {
                "unknown".to_string()
            } else {
                manager.to_string()
            },
            operation,
            api_version: if operation == OP_APPLY {
                String::new()
            } else {
                api_version.to_string()
            },
            subresource: subresource.unwrap_or_default().to_string(),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub set: FieldSet,
    pub api_version: String,
    pub applied: bool,
    pub time: Option<String>,
}

pub(crate) type Managed = BTreeMap<ManagerId, Entry>;

/// Why `metadata.managedFields` cannot be decoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ManagedFieldsError {
    #[error("managedFields must be a list")]
    NotAList,
    #[error("managed fields entry {index} must be an object")]
    EntryNotObject { index: usize },
    /// A field of an entry that is neither a string nor null.
    #[error("{key} must be a string")]
    NotAString { key: &'static str },
    #[error("operation must be `Apply` or `Update`")]
    InvalidOperation,
    #[error("apiVersion must not be empty")]
    EmptyApiVersion,
    #[error("missing fieldsType in managed fields entry {index}")]
    MissingFieldsType { index: usize },
    #[error("invalid fieldsType {fields_type:?} in managed fields entry {index}")]
    InvalidFieldsType { fields_type: String, index: usize },
    #[error("error decoding set: {0}")]
    FieldSet(#[source] FieldSetError),
}

fn str_field<'a>(
    e: &'a Map<String, Value>,
    key: &'static str,
) -> Result<&'a str, ManagedFieldsError> {
    match e.get(key) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(ManagedFieldsError::NotAString { key }),
    }
}

/// Decodes `managedFields` entries; any invalid entry makes the whole list invalid.
pub(crate) fn decode(entries: Option<&Value>) -> Result<Managed, ManagedFieldsError> {
    let mut out = Managed::new();
    let items = match entries {
        None | Some(Value::Null) => return Ok(out),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ManagedFieldsError::NotAList),
    };
    for (i, item) in items.iter().enumerate() {
        let Value::Object(e) = item else {
            return Err(ManagedFieldsError::EntryNotObject { index: i });
        };
        let operation = match str_field(e, "operation")? {
            "Apply" => OP_APPLY,
            "Update" => OP_UPDATE,
            _ => return Err(ManagedFieldsError::InvalidOperation),
        };
        let api_version = str_field(e, "apiVersion")?;
        if api_version.is_empty() {
            return Err(ManagedFieldsError::EmptyApiVersion);
        }
        match str_field(e, "fieldsType")? {
            "FieldsV1" => {}
            "" => return Err(ManagedFieldsError::MissingFieldsType { index: i }),
            other => {
                return Err(ManagedFieldsError::InvalidFieldsType {
                    fields_type: other.to_string(),
                    index: i,
                });
            }
        }
        let set = match e.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::new(),
            Some(v) => FieldSet::from_fields_v1(v).map_err(ManagedFieldsError::FieldSet)?,
        };
        let time = match e.get("time") {
            None | Some(Value::Null) => None,
            Some(Value::String(t)) => Some(t.clone()),
            Some(_) => return Err(ManagedFieldsError::NotAString { key: "time" }),
        };
        let subresource = str_field(e, "subresource")?;
        let manager = str_field(e, "manager")?;
        let id = ManagerId {
            manager: manager.to_string(),
            operation,
            api_version: if operation == OP_APPLY {
                String::new()
            } else {
                api_version.to_string()
            },
            subresource: subresource.to_string(),
        };
        out.insert(
            id,
            Entry {
                set,
                api_version: api_version.to_string(),
                applied: operation == OP_APPLY,
                time,
            },
        );
    }
    Ok(out)
}

/// Whether a client asked to clear managedFields: `[]` or `[{}]`.
pub(crate) fn is_reset(entries: Option<&Value>) -> bool {
    match entries {
        Some(Value::Array(items)) => match items.as_slice() {
            [] => true,
            [Value::Object(m)] => m.values().all(|v| match v {
                Value::Null => true,
                Value::String(s) => s.is_empty(),
                Value::Object(o) => o.is_empty(),
                _ => false,
            }),
            _ => false,
        },
        _ => false,
    }
}

/// Encodes the managers as `managedFields` entries, sorted by operation, time, manager,
/// apiVersion and subresource. `None` when there are none.
pub(crate) fn encode(managed: &Managed) -> Option<Value> {
    if managed.is_empty() {
        return None;
    }
    let mut entries: Vec<(&ManagerId, &Entry)> = managed.iter().collect();
    entries.sort_by(|(a, ea), (b, eb)| {
        let op = |id: &ManagerId, e: &Entry| if e.applied { OP_APPLY } else { id.operation };
        op(a, ea)
            .cmp(op(b, eb))
            .then_with(|| unix_seconds(ea.time.as_deref()).cmp(&unix_seconds(eb.time.as_deref())))
            .then_with(|| a.manager.cmp(&b.manager))
            .then_with(|| ea.api_version.cmp(&eb.api_version))
            .then_with(|| a.subresource.cmp(&b.subresource))
    });
    let items = entries
        .into_iter()
        .map(|(id, e)| {
            let mut m = Map::new();
            if !id.manager.is_empty() {
                m.insert("manager".into(), Value::String(id.manager.clone()));
            }
            let op = if e.applied { OP_APPLY } else { id.operation };
            m.insert("operation".into(), Value::String(op.to_string()));
            m.insert("apiVersion".into(), Value::String(e.api_version.clone()));
            if let Some(t) = &e.time {
                m.insert("time".into(), Value::String(t.clone()));
            }
            m.insert("fieldsType".into(), Value::String("FieldsV1".into()));
            m.insert("fieldsV1".into(), e.set.to_fields_v1());
            if !id.subresource.is_empty() {
                m.insert("subresource".into(), Value::String(id.subresource.clone()));
            }
            Value::Object(m)
        })
        .collect();
    Some(Value::Array(items))
}

/// Keeps at most `max` Update managers: the oldest are merged into `ancient-changes`
/// entries, one per API version.
pub(crate) fn cap_update_managers(managed: &mut Managed, max: usize) {
    let mut updaters: Vec<ManagerId> = managed
        .iter()
        .filter(|(_, e)| !e.applied)
        .map(|(id, _)| id.clone())
        .collect();
    if updaters.len() <= max {
        return;
    }
    updaters.sort_by(|a, b| {
        let ta = unix_seconds(managed[a].time.as_deref());
        let tb = unix_seconds(managed[b].time.as_deref());
        ta.cmp(&tb).then_with(|| a.cmp(b))
    });
    let mut first_of_version: BTreeMap<String, ManagerId> = BTreeMap::new();
    let mut length = updaters.len();
    for id in updaters {
        if length <= max {
            break;
        }
        let Some(entry) = managed.get(&id).cloned() else {
            continue;
        };
        let bucket = ManagerId::new("ancient-changes", OP_UPDATE, &entry.api_version, None);
        match first_of_version.get(&entry.api_version) {
            Some(first) => {
                if !managed.contains_key(&bucket)
                    && let Some(f) = managed.remove(first)
                {
                    managed.insert(bucket.clone(), f);
                }
                if let Some(b) = managed.get_mut(&bucket) {
                    b.set.union_with(&entry.set);
                    b.time = entry.time.clone();
                }
                if id != bucket {
                    managed.remove(&id);
                }
                length -= 1;
            }
            None => {
                first_of_version.insert(entry.api_version.clone(), id);
            }
        }
    }
}

/// Seconds since the epoch of an RFC 3339 timestamp; 0 if absent or unparsable.
pub(crate) fn unix_seconds(t: Option<&str>) -> i64 {
    t.and_then(parse_rfc3339).unwrap_or(0)
}

fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse::<i64>().ok() };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        rest = &frac[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let rb = rest.as_bytes();
            if rb.len() != 6 || rb[3] != b':' {
                return None;
            }
            let sign = match rb[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
    };
    // Days from civil (proleptic Gregorian).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    Some(days * 86400 + h * 3600 + mi * 60 + sec - offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps() {
        assert_eq!(unix_seconds(Some("1970-01-01T00:00:00Z")), 0);
        assert_eq!(unix_seconds(Some("2024-02-29T12:34:56Z")), 1709210096);
        assert_eq!(
            unix_seconds(Some("2024-02-29T14:34:56.123+02:00")),
            1709210096
        );
        assert_eq!(unix_seconds(Some("garbage")), 0);
        assert_eq!(unix_seconds(Some("2024-02-29T12:34:56")), 0);
        assert_eq!(unix_seconds(Some("2024-ü2-29T12:34:56Z")), 0);
    }

    #[test]
    fn decode_validates_and_reset() {
        assert!(decode(Some(&json!([{"manager": "a", "operation": "Bad", "apiVersion": "v1", "fieldsType": "FieldsV1"}]))).is_err());
        assert!(
            decode(Some(
                &json!([{"manager": "a", "operation": "Update", "fieldsType": "FieldsV1"}])
            ))
            .is_err()
        );
        assert!(
            decode(Some(
                &json!([{"manager": "a", "operation": "Update", "apiVersion": "v1"}])
            ))
            .is_err()
        );
        assert!(decode(Some(&json!([{"manager": "a", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV2"}]))).is_err());
        assert!(decode(Some(&json!({}))).is_err());
        let ok = decode(Some(&json!([{"manager": "a", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:x": {}}}}]))).unwrap();
        assert_eq!(ok.len(), 1);
        assert!(is_reset(Some(&json!([]))));
        assert!(is_reset(Some(&json!([{}]))));
        assert!(!is_reset(Some(&json!([{"manager": "x"}]))));
        assert!(!is_reset(None));
    }

    #[test]
    fn decode_error_text() {
        let err = |v: Value| decode(Some(&v)).unwrap_err();
        let e = err(json!({}));
        assert!(matches!(e, ManagedFieldsError::NotAList));
        assert_eq!(e.to_string(), "managedFields must be a list");
        let e = err(json!([1]));
        assert!(matches!(e, ManagedFieldsError::EntryNotObject { index: 0 }));
        assert_eq!(e.to_string(), "managed fields entry 0 must be an object");
        let e = err(json!([{"operation": 1}]));
        assert!(matches!(
            e,
            ManagedFieldsError::NotAString { key: "operation" }
        ));
        assert_eq!(e.to_string(), "operation must be a string");
        let e = err(json!([{"operation": "Bad"}]));
        assert!(matches!(e, ManagedFieldsError::InvalidOperation));
        assert_eq!(e.to_string(), "operation must be `Apply` or `Update`");
        let e = err(json!([{"operation": "Update"}]));
        assert!(matches!(e, ManagedFieldsError::EmptyApiVersion));
        assert_eq!(e.to_string(), "apiVersion must not be empty");
        let e = err(json!([{"operation": "Update", "apiVersion": "v1"}]));
        assert!(matches!(
            e,
            ManagedFieldsError::MissingFieldsType { index: 0 }
        ));
        assert_eq!(
            e.to_string(),
            "missing fieldsType in managed fields entry 0"
        );
        let e = err(json!([{"operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV2"}]));
        assert!(matches!(
            e,
            ManagedFieldsError::InvalidFieldsType { index: 0, .. }
        ));
        assert_eq!(
            e.to_string(),
            r#"invalid fieldsType "FieldsV2" in managed fields entry 0"#
        );
        let base = json!({"operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1"});
        let mut bad_set = base.clone();
        bad_set["fieldsV1"] = json!(1);
        let e = err(json!([bad_set]));
        assert!(matches!(e, ManagedFieldsError::FieldSet(_)));
        assert_eq!(
            e.to_string(),
            "error decoding set: fieldsV1 must be a JSON object"
        );
        let mut bad_time = base;
        bad_time["time"] = json!(1);
        let e = err(json!([bad_time]));
        assert!(matches!(e, ManagedFieldsError::NotAString { key: "time" }));
        assert_eq!(e.to_string(), "time must be a string");
    }

    #[test]
    fn cap_merges_oldest_updaters() {
        let mut m = Managed::new();
        for i in 0..12 {
            m.insert(
                ManagerId::new(&format!("m{i:02}"), OP_UPDATE, "v1", None),
                Entry {
                    set: FieldSet::from_fields_v1(&json!({format!("f:f{i}"): {}})).unwrap(),
                    api_version: "v1".into(),
                    applied: false,
                    time: Some(format!("2024-01-01T00:00:{i:02}Z")),
                },
            );
        }
        cap_update_managers(&mut m, 10);
        assert_eq!(m.len(), 10);
        let ancient = &m[&ManagerId::new("ancient-changes", OP_UPDATE, "v1", None)];
        assert_eq!(ancient.set.len(), 3);
        assert!(!m.contains_key(&ManagerId::new("m00", OP_UPDATE, "v1", None)));
        assert!(m.contains_key(&ManagerId::new("m03", OP_UPDATE, "v1", None)));
    }
}
