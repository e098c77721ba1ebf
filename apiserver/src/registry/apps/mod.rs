//! The apps group's workloads (upstream `pkg/registry/apps`): defaults, and the validation
//! they share — the pod template is a valid pod spec, the selector is required and matches
//! the template's labels.

pub mod daemon_set;
pub mod deployment;
pub mod replica_set;
pub mod stateful_set;

use serde_json::Value;

use crate::registry::strategy::Causes;
use crate::rest::validation;

/// `spec.template.spec` as a pod spec, then the selector against the template's labels.
fn validate_template(obj: &Value, template_spec: &Value, causes: &mut Causes) {
    validation::pod_spec("spec.template.spec", template_spec, causes);
    let selector = &obj["spec"]["selector"];
    let labels = &obj["spec"]["template"]["metadata"]["labels"];
    let match_labels = selector["matchLabels"].as_object();
    if selector.is_null() {
        causes.push(("spec.selector".into(), "Required value".into()));
    } else if let Some(ml) = match_labels
        && ml.iter().any(|(k, v)| labels.get(k) != Some(v))
    {
        causes.push((
            "spec.template.metadata.labels".into(),
            format!(
                "Invalid value: {}: `selector` does not match template `labels`",
                serde_json::to_string(labels).unwrap_or_default()
            ),
        ));
    }
}
