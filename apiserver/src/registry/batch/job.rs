//! Jobs (upstream `pkg/registry/batch/job`): the generated selector, defaults.

use serde_json::{Value, json};

use crate::registry::core::pod::default_pod_spec;
use crate::registry::strategy::{Causes, Strategy, set_default, spec_mut};

pub struct Job;

impl Strategy for Job {
    fn prepare_create(&self, obj: &mut Value) {
        generate_job_selector(obj);
    }

    fn defaults(&self, obj: &mut Value) {
        if let Some(spec) = spec_mut(obj) {
            default_job_spec(spec);
        }
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>, causes: &mut Causes) {
        super::validate_job_template(
            "spec.template.spec",
            &obj["spec"]["template"]["spec"],
            causes,
        );
    }
}

/// Upstream's job `generateSelector`: unless `spec.manualSelector`, the selector is the new
/// UID's `batch.kubernetes.io/controller-uid` label, and the template carries that label, the
/// job name label and their legacy unprefixed forms.
fn generate_job_selector(job: &mut Value) {
    if job["spec"]["manualSelector"] == true || !job["spec"].is_object() {
        return;
    }
    let (uid, name) = (
        job["metadata"]["uid"].clone(),
        job["metadata"]["name"].clone(),
    );
    let labels = [
        ("batch.kubernetes.io/controller-uid", &uid),
        ("batch.kubernetes.io/job-name", &name),
        ("controller-uid", &uid),
        ("job-name", &name),
    ];
    let template_labels = &mut job["spec"]["template"]["metadata"]["labels"];
    if !template_labels.is_object() {
        *template_labels = json!({});
    }
    for (k, v) in labels {
        template_labels[k] = v.clone();
    }
    job["spec"]["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
}

/// `SetDefaults_Job`: one completion, one pod at a time, six retries, NonIndexed, and the pod
/// template's defaults.
pub fn default_job_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    let indexed = spec["completionMode"] == "Indexed";
    if spec["completions"].is_null() && spec["parallelism"].is_null() {
        spec["completions"] = json!(1);
        spec["parallelism"] = json!(1);
    }
    set_default(spec, "parallelism", json!(1));
    // With backoffLimitPerIndex the job-wide limit is effectively unlimited.
    let per_index = indexed && !spec["backoffLimitPerIndex"].is_null();
    set_default(
        spec,
        "backoffLimit",
        json!(if per_index { i32::MAX } else { 6 }),
    );
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    default_pod_spec(&mut spec["template"]["spec"]);
}
