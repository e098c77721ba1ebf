//! CronJobs (upstream `pkg/registry/batch/cronjob`): defaults, the job template.

use serde_json::{Value, json};

use super::job::default_job_spec;
use crate::registry::strategy::{Causes, Strategy, set_default, spec_mut};

pub struct CronJob;

impl Strategy for CronJob {
    fn defaults(&self, obj: &mut Value) {
        let Some(spec) = spec_mut(obj) else {
            return;
        };
        set_default(spec, "concurrencyPolicy", json!("Allow"));
        set_default(spec, "suspend", json!(false));
        set_default(spec, "successfulJobsHistoryLimit", json!(3));
        set_default(spec, "failedJobsHistoryLimit", json!(1));
        default_job_spec(&mut spec["jobTemplate"]["spec"]);
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>, causes: &mut Causes) {
        super::validate_job_template(
            "spec.jobTemplate.spec.template.spec",
            &obj["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            causes,
        );
    }
}
