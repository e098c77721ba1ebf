//! core/v1 and events.k8s.io/v1 Events are one resource in two shapes, as upstream stores
//! them: both groups read and write the keys under `/registry/core/events/`, each object is
//! stored in the shape of the group that wrote it, and a read through the other group
//! converts it.

use serde_json::{Map, Value};

/// Field renames between the two shapes: (core/v1, events.k8s.io/v1).
const RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// Whether `res_api_version` reads Events stored by the other group.
pub fn needs_conversion(obj: &Value, kind: &str, res_api_version: &str) -> bool {
    kind == "Event"
        && obj["apiVersion"]
            .as_str()
            .is_some_and(|v| v != res_api_version)
}

/// Converts an Event to the shape of `api_version` (`v1` or `events.k8s.io/v1`); fields the
/// two shapes share (reason, type, action, eventTime, series, related, reportingInstance,
/// metadata) pass through.
pub fn convert(obj: Value, api_version: &str) -> Value {
    let Value::Object(fields) = obj else {
        return obj;
    };
    let to_events = api_version == "events.k8s.io/v1";
    let mut out = Map::new();
    for (k, v) in fields {
        let renamed = RENAMES.iter().find_map(|(core, ev)| match to_events {
            true if k == *core => Some(*ev),
            false if k == *ev => Some(*core),
            _ => None,
        });
        out.insert(renamed.map_or(k, str::to_owned), v);
    }
    out.insert("apiVersion".into(), Value::String(api_version.to_owned()));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip() {
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "involvedObject": {"kind": "Pod", "name": "p"}, "message": "hi", "reason": "Started",
            "source": {"component": "kubelet"}, "count": 2, "type": "Normal"});
        assert!(needs_conversion(&core, "Event", "events.k8s.io/v1"));
        let ev = convert(core.clone(), "events.k8s.io/v1");
        assert_eq!(ev["regarding"]["name"], "p");
        assert_eq!(ev["note"], "hi");
        assert_eq!(ev["deprecatedCount"], 2);
        assert_eq!(ev["deprecatedSource"]["component"], "kubelet");
        assert_eq!(ev["reason"], "Started");
        assert_eq!(convert(ev, "v1"), core);
    }
}
