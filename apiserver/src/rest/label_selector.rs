//! Upstream's `ValidateLabelSelector` (apimachinery `meta/v1/validation`) over the JSON form
//! of a `metav1.LabelSelector`: `matchLabels` keys and values are label keys and values, each
//! of `matchExpressions` has a known operator, values exactly when the operator takes them,
//! and a label key. Returns `(field path, message)` causes like the other validation modules.
//!
//! Only the checks; matching objects against a selector is `k1s_api::selector`'s job.

use serde_json::Value;

use k1s_apimachinery::crd_schema::{is_label_value, is_qualified_name};

type Causes = Vec<(String, String)>;

/// Upstream's `LabelSelectorValidationOptions`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Skip the label value check of `matchExpressions` values: an update keeps accepting
    /// selectors that were stored before that check existed.
    pub allow_invalid_values: bool,
}

fn invalid(path: String, value: &str, msg: &str, out: &mut Causes) {
    out.push((
        path,
        format!("Invalid value: {}: {msg}", Value::from(value)),
    ));
}

/// The selector at `path`; a missing (null) selector is valid.
pub fn validate(path: &str, sel: &Value, opts: Options, out: &mut Causes) {
    if let Some(labels) = sel["matchLabels"].as_object() {
        let at = format!("{path}.matchLabels");
        for (key, value) in labels {
            for msg in is_qualified_name(key) {
                invalid(at.clone(), key, &msg, out);
            }
            let value = value.as_str().unwrap_or_default();
            for msg in is_label_value(value) {
                invalid(at.clone(), value, &msg, out);
            }
        }
    }
    let exprs = sel["matchExpressions"].as_array().into_iter().flatten();
    for (i, expr) in exprs.enumerate() {
        requirement(&format!("{path}.matchExpressions[{i}]"), expr, opts, out);
    }
}

/// Upstream's `ValidateLabelSelectorRequirement`.
fn requirement(at: &str, expr: &Value, opts: Options, out: &mut Causes) {
    let values = expr["values"].as_array().map_or(&[][..], Vec::as_slice);
    match expr["operator"].as_str().unwrap_or_default() {
        "In" | "NotIn" if values.is_empty() => out.push((
            format!("{at}.values"),
            "Required value: must be specified when `operator` is 'In' or 'NotIn'".into(),
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => out.push((
            format!("{at}.values"),
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'".into(),
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
        op => invalid(
            format!("{at}.operator"),
            op,
            "not a valid selector operator",
            out,
        ),
    }
    let key = expr["key"].as_str().unwrap_or_default();
    for msg in is_qualified_name(key) {
        invalid(format!("{at}.key"), key, &msg, out);
    }
    if opts.allow_invalid_values {
        return;
    }
    for (j, v) in values.iter().enumerate() {
        let v = v.as_str().unwrap_or_default();
        for msg in is_label_value(v) {
            invalid(format!("{at}.values[{j}]"), v, &msg, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn causes(sel: Value, opts: Options) -> Causes {
        let mut out = Vec::new();
        validate("s", &sel, opts, &mut out);
        out
    }

    #[test]
    fn valid_selectors_pass() {
        for sel in [
            json!(null),
            json!({}),
            json!({"matchLabels": {"app": "web", "example.com/tier": ""}}),
            json!({"matchExpressions": [
                {"key": "a", "operator": "In", "values": ["x", "y"]},
                {"key": "b", "operator": "DoesNotExist"}]}),
        ] {
            assert!(causes(sel.clone(), Options::default()).is_empty(), "{sel}");
        }
    }

    #[test]
    fn each_problem_has_its_path() {
        let c = causes(
            json!({"matchLabels": {"bad key!": "ok", "k": "bad value!"},
                "matchExpressions": [
                    {"key": "a", "operator": "In"},
                    {"key": "b", "operator": "Exists", "values": ["x"]},
                    {"key": "-c", "operator": "Near", "values": ["x", "no good"]}]}),
            Options::default(),
        );
        let fields: Vec<&str> = c.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "s.matchLabels",
                "s.matchLabels",
                "s.matchExpressions[0].values",
                "s.matchExpressions[1].values",
                "s.matchExpressions[2].operator",
                "s.matchExpressions[2].key",
                "s.matchExpressions[2].values[1]",
            ]
        );
        assert!(
            c[0].1
                .starts_with("Invalid value: \"bad key!\": name part must consist of")
        );
        assert!(
            c[1].1
                .starts_with("Invalid value: \"bad value!\": a valid label must be")
        );
        assert_eq!(
            c[2].1,
            "Required value: must be specified when `operator` is 'In' or 'NotIn'"
        );
        assert_eq!(
            c[3].1,
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        );
        assert_eq!(
            c[4].1,
            "Invalid value: \"Near\": not a valid selector operator"
        );
    }

    #[test]
    fn invalid_values_allowed_on_request() {
        let sel =
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["no good"]}]});
        assert_eq!(causes(sel.clone(), Options::default()).len(), 1);
        let lenient = Options {
            allow_invalid_values: true,
        };
        assert!(causes(sel, lenient).is_empty());
    }
}
