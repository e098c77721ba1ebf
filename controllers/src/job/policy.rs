//! `spec.podFailurePolicy` matching, as upstream's `pod_failure_policy.go`: the first rule
//! whose `onExitCodes` or `onPodConditions` requirement a failed pod meets decides what its
//! failure does (fail the job, be ignored, count against the backoff limit, fail its index).

use serde_json::Value;

/// What a pod's failure does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The job fails at once; the message names the pod and the rule.
    FailJob(String),
    /// Not counted against the backoff limit; the pod is replaced.
    Ignore,
    /// Counted against the backoff limit (also when no rule matches).
    Count,
    /// The pod's index fails (Indexed jobs with backoffLimitPerIndex).
    FailIndex,
}

/// Judges a failed `pod` of `job` by the job's pod failure policy.
pub fn judge(job: &Value, pod: &Value) -> Verdict {
    let Some(rules) = job["spec"]["podFailurePolicy"]["rules"].as_array() else {
        return Verdict::Count;
    };
    let pod_name = format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or(""),
        pod["metadata"]["name"].as_str().unwrap_or("")
    );
    for (i, rule) in rules.iter().enumerate() {
        let action = rule["action"].as_str().unwrap_or("");
        let why = if !rule["onExitCodes"].is_null() {
            matching_container(pod, &rule["onExitCodes"]).map(|(name, code)| {
                format!(
                    "Container {name} for pod {pod_name} failed with exit code {code} matching {action} rule at index {i}"
                )
            })
        } else if let Some(conds) = rule["onPodConditions"].as_array() {
            matching_condition(pod, conds).map(|t| {
                format!("Pod {pod_name} has condition {t} matching {action} rule at index {i}")
            })
        } else {
            None
        };
        let Some(message) = why else { continue };
        return match action {
            "FailJob" => Verdict::FailJob(message),
            "Ignore" => Verdict::Ignore,
            "FailIndex" => Verdict::FailIndex,
            _ => Verdict::Count,
        };
    }
    Verdict::Count
}

/// The first (init containers first) terminated container with a non-zero exit code the
/// requirement matches: its name and code.
fn matching_container(pod: &Value, req: &Value) -> Option<(String, i64)> {
    let values: Vec<i64> = req["values"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    let not_in = req["operator"] == "NotIn";
    let only = req["containerName"].as_str();
    ["initContainerStatuses", "containerStatuses"]
        .iter()
        .flat_map(|f| pod["status"][f].as_array().into_iter().flatten())
        .filter(|c| only.is_none_or(|n| c["name"].as_str() == Some(n)))
        .find_map(|c| {
            let code = c["state"]["terminated"]["exitCode"].as_i64()?;
            (code != 0 && values.contains(&code) != not_in)
                .then(|| (c["name"].as_str().unwrap_or("").to_owned(), code))
        })
}

/// The type of the first pod condition a requirement (type, status — default `True`) matches.
fn matching_condition(pod: &Value, reqs: &[Value]) -> Option<String> {
    let conds = pod["status"]["conditions"].as_array()?;
    reqs.iter().find_map(|r| {
        let status = r["status"].as_str().unwrap_or("True");
        conds
            .iter()
            .find(|c| c["type"] == r["type"] && c["status"] == status)
            .and_then(|c| c["type"].as_str().map(str::to_owned))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(rules: Value) -> Value {
        json!({"spec": {"podFailurePolicy": {"rules": rules}}})
    }

    fn failed_pod(code: i64, conditions: Value) -> Value {
        json!({"metadata": {"namespace": "d", "name": "p"}, "status": {"phase": "Failed",
            "conditions": conditions,
            "containerStatuses": [{"name": "ok", "state": {"terminated": {"exitCode": 0}}},
                                  {"name": "main", "state": {"terminated": {"exitCode": code}}}]}})
    }

    #[test]
    fn rules_match_in_order() {
        let rules = json!([
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}},
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [2]}},
        ]);
        let j = job(rules);
        let cases = [
            (
                failed_pod(42, json!([])),
                Verdict::FailJob(
                    "Container main for pod d/p failed with exit code 42 matching FailJob rule at index 1"
                        .into(),
                ),
            ),
            (
                failed_pod(
                    42,
                    json!([{"type": "DisruptionTarget", "status": "True"}]),
                ),
                Verdict::Ignore,
            ),
            // A condition with another status does not match.
            (
                failed_pod(2, json!([{"type": "DisruptionTarget", "status": "False"}])),
                Verdict::FailIndex,
            ),
            (failed_pod(7, json!([])), Verdict::Count),
            // Nothing matches: counted.
            (failed_pod(1, json!([])), Verdict::Count),
        ];
        for (pod, want) in cases {
            assert_eq!(judge(&j, &pod), want, "{pod}");
        }
    }

    #[test]
    fn condition_messages_and_no_policy() {
        let j = job(json!([{"action": "FailJob", "onPodConditions": [{"type": "ConfigIssue"}]}]));
        let pod = failed_pod(1, json!([{"type": "ConfigIssue", "status": "True"}]));
        assert_eq!(
            judge(&j, &pod),
            Verdict::FailJob(
                "Pod d/p has condition ConfigIssue matching FailJob rule at index 0".into()
            )
        );
        assert_eq!(judge(&json!({"spec": {}}), &pod), Verdict::Count);
        // Exit code 0 never matches, even NotIn.
        let j = job(
            json!([{"action": "FailJob", "onExitCodes": {"containerName": "ok", "operator": "NotIn", "values": [5]}}]),
        );
        assert_eq!(judge(&j, &failed_pod(1, json!([]))), Verdict::Count);
    }
}
