//! The batch group's kinds (upstream `pkg/registry/batch`): Jobs and CronJobs, whose pod
//! templates may restart only `OnFailure` or `Never`.

pub mod cron_job;
pub mod job;

use serde_json::Value;

use crate::registry::strategy::Causes;
use crate::rest::validation;

/// The template at `path` as a pod spec that runs to completion.
fn validate_job_template(path: &str, spec: &Value, causes: &mut Causes) {
    validation::pod_spec(path, spec, causes);
    if !matches!(spec["restartPolicy"].as_str(), Some("OnFailure" | "Never")) {
        causes.push((
            format!("{path}.restartPolicy"),
            format!(
                "Unsupported value: {}: supported values: \"OnFailure\", \"Never\"",
                spec["restartPolicy"]
            ),
        ));
    }
}
