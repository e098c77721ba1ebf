//! Formatting helpers shared by the printers: JSON access, timestamps,
//! human durations, labels and label selectors.

use jiff::tz::Offset;
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

// ---------------------------------------------------------------------------
// JSON access

/// The value at a JSON pointer (`/spec/nodeName`), if any.
pub(crate) fn get<'a>(v: &'a Value, ptr: &str) -> Option<&'a Value> {
    v.pointer(ptr).filter(|v| !v.is_null())
}

/// The string at a JSON pointer, `""` when missing or not a string.
pub(crate) fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    get(v, ptr).and_then(Value::as_str).unwrap_or("")
}

/// The string at a JSON pointer, `None` when missing or not a string.
pub(crate) fn opt_str<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    get(v, ptr).and_then(Value::as_str)
}

/// The integer at a JSON pointer, `0` when missing.
pub(crate) fn int_at(v: &Value, ptr: &str) -> i64 {
    opt_int(v, ptr).unwrap_or(0)
}

/// The integer at a JSON pointer, `None` when missing.
pub(crate) fn opt_int(v: &Value, ptr: &str) -> Option<i64> {
    get(v, ptr).and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
}

/// The boolean at a JSON pointer, `None` when missing.
pub(crate) fn opt_bool(v: &Value, ptr: &str) -> Option<bool> {
    get(v, ptr).and_then(Value::as_bool)
}

/// The array at a JSON pointer, empty when missing.
pub(crate) fn arr_at<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    get(v, ptr)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The number of entries of the object or array at a JSON pointer.
pub(crate) fn len_at(v: &Value, ptr: &str) -> i64 {
    let n = match get(v, ptr) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    };
    n as i64
}

/// `metadata.name`.
pub(crate) fn name(obj: &Value) -> &str {
    str_at(obj, "/metadata/name")
}

/// Whether `metadata.deletionTimestamp` is set.
pub(crate) fn deleting(obj: &Value) -> bool {
    get(obj, "/metadata/deletionTimestamp").is_some()
}

/// A `resource.Quantity` as text (quantities are strings in JSON, but a
/// bare number is accepted too); `"0"` when missing, like Go's zero value.
pub(crate) fn quantity(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "0".to_owned(),
    }
}

/// An `IntOrString` as text.
pub(crate) fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

// ---------------------------------------------------------------------------
// Timestamps and durations

/// Parses an RFC 3339 timestamp (`2024-01-02T03:04:05Z`, with optional fractional seconds
/// and numeric offset), as every component does ([`k1s_api::time::parse`]). `None` for
/// anything else.
pub fn parse_timestamp(s: &str) -> Option<Timestamp> {
    k1s_api::time::parse(s)
}

/// Go's `time.RFC3339` rendering in UTC (seconds precision).
pub(crate) fn rfc3339_utc(t: Timestamp) -> String {
    let t = Offset::UTC.to_datetime(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Go's zero `time.Time` (0001-01-01T00:00:00Z), which `metav1.Time` treats
/// as unset.
fn is_zero(t: Timestamp) -> bool {
    t == Timestamp::constant(-62_135_596_800, 0)
}

/// A set, non-zero timestamp at a JSON pointer.
pub(crate) fn time_at(v: &Value, ptr: &str) -> Option<Timestamp> {
    parse_timestamp(str_at(v, ptr)).filter(|t| !is_zero(*t))
}

/// `duration.HumanDuration` of apimachinery: a succinct duration with
/// about two significant figures (`45s`, `2m5s`, `15m`, `3h5m`, `10h`,
/// `3d4h`, `400d`, `2y35d`, `10y`). Durations below -1s are `<invalid>`.
pub fn human_duration(d: SignedDuration) -> String {
    let seconds = d.as_secs();
    if seconds < -1 {
        return "<invalid>".to_owned();
    } else if seconds < 0 {
        return "0s".to_owned();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d.as_mins();
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d.as_hours();
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        format!("{hours}h{m}m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        format!("{}d{}h", hours / 24, h)
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        format!("{}y{}d", hours / 24 / 365, dy)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// Upstream `translateTimestampSince`: the human duration since a
/// timestamp, `<unknown>` when unset.
pub(crate) fn since(t: Option<Timestamp>, now: Timestamp) -> String {
    match t {
        Some(t) => human_duration(now.duration_since(t)),
        None => "<unknown>".to_owned(),
    }
}

/// The human duration since the timestamp at a JSON pointer.
pub(crate) fn since_at(v: &Value, ptr: &str, now: Timestamp) -> String {
    since(time_at(v, ptr), now)
}

/// The `Age` cell: time since `metadata.creationTimestamp`.
pub(crate) fn age(obj: &Value, now: Timestamp) -> Value {
    since_at(obj, "/metadata/creationTimestamp", now).into()
}

// ---------------------------------------------------------------------------
// Labels, selectors, containers

/// `labels.FormatLabels`: `k=v` pairs sorted by key, `<none>` when empty.
pub(crate) fn format_labels(v: Option<&Value>) -> String {
    let pairs: Vec<String> = match v.and_then(Value::as_object) {
        Some(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            keys.iter()
                .map(|k| format!("{k}={}", m[k.as_str()].as_str().unwrap_or("")))
                .collect()
        }
        None => Vec::new(),
    };
    if pairs.is_empty() {
        "<none>".to_owned()
    } else {
        pairs.join(",")
    }
}

/// The text of `metav1.LabelSelectorAsSelector(sel).String()`; `Err` for an
/// invalid selector. A missing or empty selector is `""`.
pub(crate) fn selector_string(sel: Option<&Value>) -> Result<String, ()> {
    k1s_api::selector::label_selector_text(sel).map_err(|_| ())
}

/// `metav1.FormatLabelSelector`: like [`selector_string`], but `<none>` when
/// empty and `<error>` when invalid.
pub(crate) fn format_label_selector(sel: Option<&Value>) -> String {
    match selector_string(sel) {
        Err(()) => "<error>".to_owned(),
        Ok(s) if s.is_empty() => "<none>".to_owned(),
        Ok(s) => s,
    }
}

/// Container names and images, each comma-joined.
pub(crate) fn layout_containers(containers: &[Value]) -> (Value, Value) {
    let names: Vec<&str> = containers
        .iter()
        .map(|c| c.get("name").and_then(Value::as_str).unwrap_or(""))
        .collect();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| c.get("image").and_then(Value::as_str).unwrap_or(""))
        .collect();
    (names.join(",").into(), images.join(",").into())
}

/// At most `max` items, then ` + N more...`; `<unset>` when empty.
pub(crate) fn list_with_more(items: &[String], max: usize) -> String {
    if items.is_empty() {
        return "<unset>".to_owned();
    }
    let shown = items[..items.len().min(max)].join(",");
    if items.len() > max {
        format!("{shown} + {} more...", items.len() - max)
    } else {
        shown
    }
}

/// `"True"`/`"False"`/`"<unset>"` (upstream `printBoolPtr`).
pub(crate) fn bool_ptr(v: Option<bool>) -> Value {
    match v {
        Some(true) => "True".into(),
        Some(false) => "False".into(),
        None => "<unset>".into(),
    }
}

/// `"<none>"` for an empty string.
pub(crate) fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".to_owned()
    } else {
        s.to_owned()
    }
}

// ---------------------------------------------------------------------------
// CRD cells

/// Go's `fmt.Print` text of a JSON scalar, and compact JSON for objects and
/// arrays (what `kubectl`'s JSONPath printer writes).
pub(crate) fn go_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => go_float(f),
            _ => n.to_string(),
        }),
        Value::Array(_) | Value::Object(_) => serde_json::to_string(v).ok(),
    }
}

/// Go's `%v` of a float64: shortest digits, exponent form when the
/// exponent is below -4 or at least 6 (e.g. `1.5`, `1e+06`, `1e-05`).
fn go_float(f: f64) -> String {
    if f == 0.0 {
        return "0".to_owned();
    }
    let exp = f.abs().log10().floor() as i32;
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    // Exponent form: shortest mantissa, two-digit exponent at least.
    let s = format!("{f:e}");
    let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let sign = if e < 0 { '-' } else { '+' };
    format!("{mant}e{sign}{:02}", e.abs())
}

/// The cell of a CRD column of the given type for a found JSON value.
pub(crate) fn custom_cell(type_: &str, v: &Value, now: Timestamp) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    match type_ {
        "string" => go_text(v).map(Value::from).unwrap_or(Value::Null),
        "integer" => match v {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .map(Value::from)
                .unwrap_or(Value::Null),
            _ => Value::Null,
        },
        "number" => match v {
            Value::Number(n) => n.as_f64().map(Value::from).unwrap_or(Value::Null),
            _ => Value::Null,
        },
        "boolean" => match v {
            Value::Bool(b) => Value::Bool(*b),
            _ => Value::Null,
        },
        "date" => match v {
            Value::String(s) if s.is_empty() || s == "null" => "<unknown>".into(),
            Value::String(s) => match parse_timestamp(s) {
                None => "<invalid>".into(),
                Some(t) if is_zero(t) => "<unknown>".into(),
                Some(t) => human_duration(now.duration_since(t)).into(),
            },
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn human_duration_boundaries() {
        let cases: &[(i64, &str)] = &[
            (-5, "<invalid>"),
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (59, "59s"),
            (60, "60s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (599, "9m59s"),
            (600, "10m"),
            (61 * 60, "61m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (8 * 3600 - 1, "7h59m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (2 * 86400 + 4 * 3600, "2d4h"),
            (8 * 86400 - 1, "7d23h"),
            (8 * 86400, "8d"),
            (400 * 86400, "400d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (765 * 86400, "2y35d"),
            (8 * 365 * 86400, "8y"),
            (10 * 365 * 86400 + 100 * 86400, "10y"),
        ];
        for (secs, want) in cases {
            assert_eq!(
                human_duration(SignedDuration::from_secs(*secs)),
                *want,
                "{secs}s"
            );
        }
        // Sub-second parts are truncated like Go's int(d.Seconds()).
        assert_eq!(human_duration(SignedDuration::from_millis(-1500)), "0s");
        assert_eq!(human_duration(SignedDuration::from_millis(59_999)), "59s");
    }

    #[test]
    fn timestamps() {
        let t = parse_timestamp("2024-02-29T23:59:58.123456Z").unwrap();
        assert_eq!(rfc3339_utc(t), "2024-02-29T23:59:58Z");
        assert_eq!(t.subsec_nanosecond(), 123_456_000);
        let t = parse_timestamp("2024-01-01T01:30:00+01:30").unwrap();
        assert_eq!(rfc3339_utc(t), "2024-01-01T00:00:00Z");
        let t = parse_timestamp("2024-01-01T00:00:00-05:00").unwrap();
        assert_eq!(rfc3339_utc(t), "2024-01-01T05:00:00Z");
        for bad in [
            "",
            "2024-01-01",
            "2024-13-01T00:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00ZZ",
            "2024-01-01T25:00:00Z",
            "2024-01-01T00:00:00.Z",
            "yesterday at noon!!",
        ] {
            assert!(parse_timestamp(bad).is_none(), "{bad}");
        }
        let v = json!({"t": "0001-01-01T00:00:00Z"});
        assert!(time_at(&v, "/t").is_none());
        let now = parse_timestamp("2025-01-01T00:00:00Z").unwrap();
        assert_eq!(since(None, now), "<unknown>");
        assert_eq!(
            since_at(&json!({"t": "2024-12-31T23:59:00Z"}), "/t", now),
            "60s"
        );
    }

    #[test]
    fn labels_and_selectors() {
        assert_eq!(format_labels(None), "<none>");
        assert_eq!(format_labels(Some(&json!({}))), "<none>");
        assert_eq!(format_labels(Some(&json!({"b": "2", "a": "1"}))), "a=1,b=2");
        assert_eq!(selector_string(None), Ok(String::new()));
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
        let sel = json!({
            "matchLabels": {"tier": "web", "app": "nginx"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                {"key": "zone", "operator": "NotIn", "values": ["b"]},
                {"key": "gpu", "operator": "Exists"},
                {"key": "spot", "operator": "DoesNotExist"},
            ]
        });
        assert_eq!(
            format_label_selector(Some(&sel)),
            "app=nginx,env in (dev,prod),gpu,!spot,tier=web,zone notin (b)"
        );
        let bad = json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]});
        assert_eq!(format_label_selector(Some(&bad)), "<error>");
        assert_eq!(selector_string(Some(&bad)), Err(()));
    }

    #[test]
    fn go_text_of_values() {
        assert_eq!(go_text(&json!(3)).unwrap(), "3");
        assert_eq!(go_text(&json!(1.5)).unwrap(), "1.5");
        assert_eq!(go_text(&json!(2.0)).unwrap(), "2");
        assert_eq!(go_text(&json!(1e21)).unwrap(), "1e+21");
        assert_eq!(go_text(&json!(1500000.0)).unwrap(), "1.5e+06");
        assert_eq!(go_text(&json!(123456.5)).unwrap(), "123456.5");
        assert_eq!(go_text(&json!(0.00001)).unwrap(), "1e-05");
        assert_eq!(go_text(&json!(true)).unwrap(), "true");
        assert_eq!(
            go_text(&json!({"b": 1, "a": [1]})).unwrap(),
            "{\"a\":[1],\"b\":1}"
        );
        assert!(go_text(&Value::Null).is_none());
    }

    #[test]
    fn lists() {
        let items: Vec<String> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(list_with_more(&items, 3), "a,b,c + 2 more...");
        assert_eq!(list_with_more(&items[..3], 3), "a,b,c");
        assert_eq!(list_with_more(&[], 3), "<unset>");
    }
}
