//! Label and field selectors: the string syntax of `?labelSelector=` and `?fieldSelector=`,
//! parsed and matched as apimachinery does (`k8s.io/apimachinery/pkg/labels` and `fields`).
//!
//! Label selectors: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>3`, `a<3`,
//! comma-separated (all must hold). Field selectors: `f=v`, `f==v`, `f!=v`, comma-separated;
//! which fields a resource supports is the caller's business.

use std::collections::BTreeMap;

/// A selector that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse requirement: {0}")]
pub struct SelectorError(pub String);

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<Requirement>);

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for term in split_terms(s)? {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(term)?);
        }
        Ok(Self(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0
            .iter()
            .all(|r| r.matches(|k| labels.get(k).map(String::as_str)))
    }

    /// Matches against the `metadata.labels` object of a JSON object.
    pub fn matches_json(&self, object: &serde_json::Value) -> bool {
        let labels = &object["metadata"]["labels"];
        self.0
            .iter()
            .all(|r| r.matches(|k| labels.get(k).and_then(serde_json::Value::as_str)))
    }
}

impl Requirement {
    fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        match self {
            Requirement::Equals(k, v) => get(k) == Some(v),
            Requirement::NotEquals(k, v) => get(k) != Some(v),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
            Requirement::GreaterThan(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            Requirement::LessThan(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        }
    }
}

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Result<Vec<&str>, SelectorError> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| SelectorError(format!("unbalanced ')' in {s:?}")))?;
            }
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError(format!("unbalanced '(' in {s:?}")));
    }
    out.push(&s[start..]);
    Ok(out)
}

fn parse_requirement(term: &str) -> Result<Requirement, SelectorError> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(label_key(key.trim())?));
    }
    for (op, make) in [
        (
            "!=",
            Requirement::NotEquals as fn(String, String) -> Requirement,
        ),
        ("==", Requirement::Equals),
        ("=", Requirement::Equals),
    ] {
        if let Some((k, v)) = term.split_once(op) {
            return Ok(make(label_key(k.trim())?, label_value(v.trim())?));
        }
    }
    for (op, gt) in [(">", true), ("<", false)] {
        if let Some((k, v)) = term.split_once(op) {
            let n = v.trim().parse::<i64>().map_err(|_| {
                SelectorError(format!(
                    "{term}: for 'gt', 'lt' operators, the value must be an integer"
                ))
            })?;
            let k = label_key(k.trim())?;
            return Ok(if gt {
                Requirement::GreaterThan(k, n)
            } else {
                Requirement::LessThan(k, n)
            });
        }
    }
    let mut words = term.splitn(2, char::is_whitespace);
    let key = label_key(words.next().unwrap_or_default())?;
    let Some(rest) = words.next().map(str::trim) else {
        return Ok(Requirement::Exists(key));
    };
    let (op, list) = rest
        .split_once(char::is_whitespace)
        .map(|(o, l)| (o, l.trim()))
        .or_else(|| rest.find('(').map(|i| (rest[..i].trim(), &rest[i..])))
        .ok_or_else(|| SelectorError(format!("{term}: expected an operator")))?;
    let inner = list
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
        .ok_or_else(|| SelectorError(format!("{term}: expected a '(' list ')'")))?;
    let values = inner
        .split(',')
        .map(|v| label_value(v.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    match op {
        "in" => Ok(Requirement::In(key, values)),
        "notin" => Ok(Requirement::NotIn(key, values)),
        other => Err(SelectorError(format!("{term}: unknown operator {other:?}"))),
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters of alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
pub fn label_key(k: &str) -> Result<String, SelectorError> {
    let name = match k.rsplit_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() || prefix.len() > 253 || !is_dns_subdomain(prefix) {
                return Err(SelectorError(format!(
                    "invalid label key {k:?}: prefix part must be a DNS subdomain"
                )));
            }
            name
        }
        None => k,
    };
    if !is_qualified_name_part(name) {
        return Err(SelectorError(format!(
            "invalid label key {k:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )));
    }
    Ok(k.to_owned())
}

/// A label value: empty, or like a key's name part.
pub fn label_value(v: &str) -> Result<String, SelectorError> {
    if v.is_empty() || is_qualified_name_part(v) {
        Ok(v.to_owned())
    } else {
        Err(SelectorError(format!(
            "invalid label value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )))
    }
}

fn is_qualified_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// RFC 1123 subdomain: dot-separated labels of lowercase alphanumerics and `-`.
pub fn is_dns_subdomain(s: &str) -> bool {
    // Upstream's IsDNS1123Subdomain limits the whole name, not each dot-separated part: the
    // 68-character `csi-<sha256>` VolumeAttachment names are valid.
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// RFC 1123 label: at most 63 lowercase alphanumerics or `-`, alphanumeric at both ends.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.as_bytes()[0] != b'-'
        && s.as_bytes()[s.len() - 1] != b'-'
}

/// The string form of a `metav1.LabelSelector` object (`matchLabels` and
/// `matchExpressions`), as `LabelSelectorAsSelector(sel).String()` writes it: requirements
/// sorted by key, values sorted and deduplicated. A missing or empty selector is `""`; an
/// expression with a bad operator or values is an error.
pub fn label_selector_text(sel: Option<&serde_json::Value>) -> Result<String, SelectorError> {
    use serde_json::Value;
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return Ok(String::new());
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(ml) = sel["matchLabels"].as_object() {
        for (k, v) in ml {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or("");
        let mut values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        values.dedup();
        let op = e["operator"].as_str().unwrap_or("");
        let text = match op {
            "In" | "NotIn" if values.is_empty() => None,
            "In" => Some(format!("{key} in ({})", values.join(","))),
            "NotIn" => Some(format!("{key} notin ({})", values.join(","))),
            "Exists" if values.is_empty() => Some(key.to_owned()),
            "DoesNotExist" if values.is_empty() => Some(format!("!{key}")),
            _ => None,
        }
        .ok_or_else(|| SelectorError(format!("{key}: invalid operator {op:?} or values")))?;
        reqs.push((key.to_owned(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(reqs
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(","))
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub value: String,
    pub equal: bool,
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldRequirement>);

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut out = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, true)
            } else {
                return Err(SelectorError(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                )));
            };
            out.push(FieldRequirement {
                field: field.trim().to_owned(),
                value: value.trim().to_owned(),
                equal,
            });
        }
        Ok(Self(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Matches with `get` giving a field's value as a string ("" when unset).
    pub fn matches(&self, get: impl Fn(&str) -> String) -> bool {
        self.0.iter().all(|r| (get(&r.field) == r.value) == r.equal)
    }

    /// The value an equality term requires of `field`, if any (to narrow a list).
    pub fn required(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|r| r.equal && r.field == field)
            .map(|r| r.value.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn label_selectors_match_as_upstream() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=web,tier=back", false),
            ("app in (web, db)", true),
            ("app in (db)", false),
            ("app notin (db)", true),
            ("missing notin (db)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("n>3", true),
            ("n<3", false),
            ("example.com/x", false),
            ("app in (web),tier notin (back),!gone", true),
        ];
        for (sel, want) in cases {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn bad_label_selectors_are_errors() {
        for sel in [
            "app in (web",
            "a=b)",
            "-app=x",
            "app=-x",
            "n>x",
            "app foo (x)",
            "/x",
        ] {
            assert!(LabelSelector::parse(sel).is_err(), "{sel}");
        }
    }

    #[test]
    fn field_selectors() {
        let s = FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed").unwrap();
        assert_eq!(s.required("spec.nodeName"), Some("n1"));
        let get = |f: &str| match f {
            "spec.nodeName" => "n1".to_owned(),
            "status.phase" => "Running".to_owned(),
            _ => String::new(),
        };
        assert!(s.matches(get));
        assert!(FieldSelector::parse("nonsense").is_err());
        assert!(
            FieldSelector::parse("spec.nodeName=")
                .unwrap()
                .matches(|_| String::new())
        );
    }

    #[test]
    fn dns_names() {
        assert!(is_dns_subdomain("a.b-c.d"));
        assert!(!is_dns_subdomain("A"));
        // A VolumeAttachment name: one 68-character part.
        assert!(is_dns_subdomain(&format!("csi-{}", "a1".repeat(32))));
        assert!(!is_dns_subdomain("a..b"));
        assert!(!is_dns_subdomain("a.-b"));
        assert!(!is_dns_label("a.b"));
        assert!(!is_dns_label(&"a".repeat(64)));
    }
}
