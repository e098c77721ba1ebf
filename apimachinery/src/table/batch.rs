//! Printers of the `batch` group.

use jiff::Timestamp;
use serde_json::Value;

use super::format::{
    age, arr_at, bool_ptr, deleting, format_label_selector, get, human_duration, int_at,
    layout_containers, name, opt_bool, opt_int, opt_str, since, str_at, time_at,
};
use super::{Column, Printer};

pub(crate) struct Jobs;

/// Whether the job has a condition of this type, judged by the first one.
fn has_condition(job: &Value, type_: &str) -> bool {
    arr_at(job, "/status/conditions")
        .iter()
        .find(|c| str_at(c, "/type") == type_)
        .is_some_and(|c| str_at(c, "/status") == "True")
}

fn job_status(job: &Value) -> &'static str {
    if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if deleting(job) {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

impl Printer for Jobs {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s("Status", "Status of the job."),
            Column::s(
                "Completions",
                "The number of pods which reached phase Succeeded.",
            ),
            Column::s("Duration", "Time required to complete the job."),
            Column::age(),
            Column::containers(),
            Column::images(),
            Column::s(
                "Selector",
                "A label query over pods that should match the pod count.",
            )
            .wide(),
        ]
    }

    fn cells(&self, job: &Value, now: Timestamp) -> Vec<Value> {
        let succeeded = int_at(job, "/status/succeeded");
        let completions = match opt_int(job, "/spec/completions") {
            Some(c) => format!("{succeeded}/{c}"),
            None => match opt_int(job, "/spec/parallelism").unwrap_or(0) {
                p if p > 1 => format!("{succeeded}/1 of {p}"),
                _ => format!("{succeeded}/1"),
            },
        };
        let duration = match (
            time_at(job, "/status/startTime"),
            time_at(job, "/status/completionTime"),
        ) {
            (None, _) => String::new(),
            (Some(start), None) => since(Some(start), now),
            (Some(start), Some(done)) => human_duration(done.duration_since(start)),
        };
        let (names, images) = layout_containers(arr_at(job, "/spec/template/spec/containers"));
        vec![
            name(job).into(),
            job_status(job).into(),
            completions.into(),
            duration.into(),
            age(job, now),
            names,
            images,
            format_label_selector(get(job, "/spec/selector")).into(),
        ]
    }
}

pub(crate) struct CronJobs;

impl Printer for CronJobs {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Schedule",
                "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
            ),
            Column::s(
                "Timezone",
                "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
            ),
            Column::bool(
                "Suspend",
                "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.",
            ),
            Column::int("Active", "A list of pointers to currently running jobs."),
            Column::s(
                "Last Schedule",
                "Information when was the last time the job was successfully scheduled.",
            ),
            Column::age(),
            Column::containers(),
            Column::images(),
            Column::s(
                "Selector",
                "A label query over pods that should match the pod count.",
            )
            .wide(),
        ]
    }

    fn cells(&self, cj: &Value, now: Timestamp) -> Vec<Value> {
        let last = match get(cj, "/status/lastScheduleTime") {
            Some(_) => since(time_at(cj, "/status/lastScheduleTime"), now),
            None => "<none>".to_owned(),
        };
        let (names, images) = layout_containers(arr_at(
            cj,
            "/spec/jobTemplate/spec/template/spec/containers",
        ));
        vec![
            name(cj).into(),
            str_at(cj, "/spec/schedule").into(),
            opt_str(cj, "/spec/timeZone").unwrap_or("<none>").into(),
            bool_ptr(opt_bool(cj, "/spec/suspend")),
            (arr_at(cj, "/status/active").len() as i64).into(),
            last.into(),
            age(cj, now),
            names,
            images,
            format_label_selector(get(cj, "/spec/jobTemplate/spec/selector")).into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::testutil::*;
    use serde_json::json;

    fn job(spec: Value, status: Value) -> Value {
        let mut spec = spec;
        spec["template"] = json!({"spec": {"containers": [{"name": "pi", "image": "perl:5.34"}]}});
        spec["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "abc"}});
        json!({"metadata": {"name": "pi", "creationTimestamp": ago(600)}, "spec": spec, "status": status})
    }

    #[test]
    fn jobs() {
        assert_eq!(
            names(&Jobs),
            [
                "Name",
                "Status",
                "Completions",
                "Duration",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        let cases: Vec<(Value, [&str; 3])> = vec![
            (
                job(json!({"completions": 1, "parallelism": 1}), json!({})),
                ["Running", "0/1", ""],
            ),
            (
                job(
                    json!({"completions": 1}),
                    json!({"startTime": ago(590), "active": 1}),
                ),
                ["Running", "0/1", "9m50s"],
            ),
            (
                job(
                    json!({"completions": 1}),
                    json!({
                        "startTime": ago(590), "completionTime": ago(547), "succeeded": 1,
                        "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]
                    }),
                ),
                ["Complete", "1/1", "43s"],
            ),
            (
                job(
                    json!({"completions": 5, "parallelism": 2}),
                    json!({
                        "startTime": ago(600), "succeeded": 2,
                        "conditions": [{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}]
                    }),
                ),
                ["Failed", "2/5", "10m"],
            ),
            (
                job(json!({"parallelism": 3}), json!({"startTime": ago(30)})),
                ["Running", "0/1 of 3", "30s"],
            ),
            (
                job(
                    json!({"completions": 3, "suspend": true}),
                    json!({
                        "conditions": [{"type": "Suspended", "status": "True"}]
                    }),
                ),
                ["Suspended", "0/3", ""],
            ),
            (
                job(
                    json!({"completions": 3}),
                    json!({
                        "startTime": ago(100),
                        "conditions": [{"type": "FailureTarget", "status": "True"}]
                    }),
                ),
                ["FailureTarget", "0/3", "100s"],
            ),
        ];
        for (j, want) in cases {
            let r = row(&Jobs, &j);
            assert_eq!(r[1..4], want);
            assert_eq!(r[4], "10m");
            assert_eq!(
                r[5..],
                ["pi", "perl:5.34", "batch.kubernetes.io/controller-uid=abc"]
            );
        }
        let mut deleting = job(json!({"completions": 1}), json!({}));
        deleting["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(row(&Jobs, &deleting)[1], "Terminating");
        // A long job: duration from start to completion.
        let long = job(
            json!({"completions": 1}),
            json!({
                "startTime": ago(86400 * 3), "completionTime": ago(86400),
                "conditions": [{"type": "Complete", "status": "True"}]
            }),
        );
        assert_eq!(row(&Jobs, &long)[3], "2d");
    }

    #[test]
    fn cronjobs() {
        assert_eq!(
            names(&CronJobs),
            [
                "Name",
                "Schedule",
                "Timezone",
                "Suspend",
                "Active",
                "Last Schedule",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        let cj = json!({
            "metadata": {"name": "hello", "creationTimestamp": ago(3 * 3600)},
            "spec": {"schedule": "*/5 * * * *", "suspend": false,
                     "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "hello", "image": "busybox"}]}}}}},
            "status": {"active": [{"name": "hello-1"}], "lastScheduleTime": ago(170)}
        });
        assert_eq!(
            row(&CronJobs, &cj),
            [
                "hello",
                "*/5 * * * *",
                "<none>",
                "False",
                "1",
                "2m50s",
                "3h",
                "hello",
                "busybox",
                "<none>"
            ]
        );
        let tz = json!({"metadata": {"name": "tz"}, "spec": {"schedule": "@daily", "timeZone": "Etc/UTC", "suspend": true}});
        assert_eq!(
            row(&CronJobs, &tz)[1..6],
            ["@daily", "Etc/UTC", "True", "0", "<none>"]
        );
        let unset = json!({"metadata": {"name": "u"}, "spec": {"schedule": "@hourly"}});
        assert_eq!(row(&CronJobs, &unset)[3], "<unset>");
    }
}
