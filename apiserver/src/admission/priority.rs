//! Priority: a pod's `priorityClassName` becomes its `priority` (and `preemptionPolicy`); a
//! pod without one gets the global default class's value, or 0.

use serde_json::{Value, json};

use super::{Request, forbidden};
use crate::reader::Reader;
use crate::status::ApiError;

pub async fn admit(rest: &dyn Reader, req: &Request<'_>, pod: &mut Value) -> Result<(), ApiError> {
    let Some(res) = rest.builtin_kind("scheduling.k8s.io", "PriorityClass") else {
        return Ok(());
    };
    let name = pod["spec"]["priorityClassName"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let class = if name.is_empty() {
        let classes = super::list_in(rest, "scheduling.k8s.io", "priorityclasses", None).await?;
        classes
            .into_iter()
            .filter(|c| c["globalDefault"] == true)
            .min_by_key(|c| c["value"].as_i64().unwrap_or(0))
    } else {
        match rest.get_remembered(&res, None, &name).await {
            Ok(c) => Some(c),
            Err(e) if e.code == 404 => {
                return Err(forbidden(
                    req.res,
                    pod,
                    format!("no PriorityClass with name {name} was found"),
                ));
            }
            Err(e) => return Err(e),
        }
    };
    let (value, policy) = match &class {
        Some(c) => (
            c["value"].as_i64().unwrap_or(0),
            c["preemptionPolicy"]
                .as_str()
                .unwrap_or("PreemptLowerPriority")
                .to_owned(),
        ),
        None => (0, "PreemptLowerPriority".to_owned()),
    };
    if let Some(given) = pod["spec"]["priority"].as_i64()
        && given != value
    {
        return Err(forbidden(
            req.res,
            pod,
            format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"
            ),
        ));
    }
    pod["spec"]["priority"] = json!(value);
    if pod["spec"]["preemptionPolicy"].is_null() {
        pod["spec"]["preemptionPolicy"] = json!(policy);
    }
    if let Some(c) = class
        && name.is_empty()
        && let Some(n) = c["metadata"]["name"].as_str()
    {
        pod["spec"]["priorityClassName"] = json!(n);
    }
    Ok(())
}
