//! Completion-index bookkeeping of Indexed Jobs, as upstream's `indexed_job_utils.go`: the
//! `status.completedIndexes` / `status.failedIndexes` interval text (`1,3-5,7`), a pod's index
//! (annotation, else label), which indexes still need a pod, and what an indexed pod gets
//! (annotation, label, hostname, `JOB_COMPLETION_INDEX`, name prefix).

use std::collections::BTreeSet;

use serde_json::{Value, json};

/// The annotation (and label) carrying a pod's completion index.
pub const INDEX_KEY: &str = "batch.kubernetes.io/job-completion-index";
/// The env var every container of an indexed pod gets.
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// Parses interval text (`1,3-5`) into indexes below `completions`; malformed parts are
/// skipped, as upstream does.
pub fn parse(text: &str, completions: i64) -> BTreeSet<i64> {
    let mut set = BTreeSet::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<i64>(), b.parse::<i64>()),
            None => (part.parse::<i64>(), part.parse::<i64>()),
        };
        let (Ok(lo), Ok(hi)) = (lo, hi) else { continue };
        if lo < 0 || hi < lo {
            continue;
        }
        set.extend(lo..=hi.min(completions - 1));
    }
    set
}

/// Formats indexes as interval text (`1,3-5,7`); ranges of two are written `3,4`, as
/// upstream does.
pub fn format(set: &BTreeSet<i64>) -> String {
    let mut parts = Vec::new();
    let mut it = set.iter().copied().peekable();
    while let Some(lo) = it.next() {
        let mut hi = lo;
        while it.peek() == Some(&(hi + 1)) {
            hi += 1;
            it.next();
        }
        match hi - lo {
            0 => parts.push(lo.to_string()),
            1 => parts.push(format!("{lo},{hi}")),
            _ => parts.push(format!("{lo}-{hi}")),
        }
    }
    parts.join(",")
}

/// A pod's completion index (annotation first, then label); `None` if absent or malformed.
pub fn of_pod(pod: &Value) -> Option<i64> {
    let m = &pod["metadata"];
    let text = m["annotations"][INDEX_KEY]
        .as_str()
        .or_else(|| m["labels"][INDEX_KEY].as_str())?;
    text.parse::<i64>().ok().filter(|i| *i >= 0)
}

/// The first `n` indexes below `completions` that are neither done nor taken.
pub fn missing(
    completions: i64,
    done: &BTreeSet<i64>,
    taken: &BTreeSet<i64>,
    n: usize,
) -> Vec<i64> {
    (0..completions)
        .filter(|i| !done.contains(i) && !taken.contains(i))
        .take(n)
        .collect()
}

/// Makes `pod` (built from the template) the pod of `index` of job `job_name`: annotation and
/// label, hostname `<job>-<index>` (unless the template sets one), the
/// `JOB_COMPLETION_INDEX` env var from the annotation in every container and init
/// container, and the `<job>-<index>-` name prefix.
pub fn make_indexed(pod: &mut Value, job_name: &str, index: i64) {
    let ix = index.to_string();
    for f in ["annotations", "labels"] {
        if !pod["metadata"][f].is_object() {
            pod["metadata"][f] = json!({});
        }
        pod["metadata"][f][INDEX_KEY] = json!(ix);
    }
    let prefix = format!("{job_name}-{ix}-");
    // Upstream keeps the plain prefix when the indexed one would make too long a name.
    if prefix.len() <= 63 - 5 {
        pod["metadata"]["generateName"] = json!(prefix);
    }
    let spec = &mut pod["spec"];
    if spec["hostname"].as_str().is_none_or(str::is_empty) {
        spec["hostname"] = json!(format!("{job_name}-{ix}"));
    }
    for list in ["initContainers", "containers"] {
        for c in spec[list].as_array_mut().into_iter().flatten() {
            if !c["env"].is_array() {
                c["env"] = json!([]);
            }
            let env = c["env"].as_array_mut().expect("set above");
            if !env.iter().any(|e| e["name"] == INDEX_ENV) {
                env.push(json!({"name": INDEX_ENV, "valueFrom": {"fieldRef": {
                    "apiVersion": "v1",
                    "fieldPath": format!("metadata.annotations['{INDEX_KEY}']")}}}));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_text_round_trips() {
        for (text, want) in [
            ("", vec![]),
            ("0", vec![0]),
            ("1,3-5,7", vec![1, 3, 4, 5, 7]),
            ("0,1", vec![0, 1]),
            ("2-3", vec![2, 3]),
        ] {
            let set = parse(text, 100);
            assert_eq!(set.iter().copied().collect::<Vec<_>>(), want, "{text}");
        }
        let set: BTreeSet<i64> = [0, 1, 3, 4, 5, 9].into();
        assert_eq!(format(&set), "0,1,3-5,9");
        assert_eq!(parse(&format(&set), 100), set);
    }

    #[test]
    fn parsing_drops_out_of_range_and_malformed_parts() {
        let set = parse("x,1,5-2,3-9,-1", 5);
        assert_eq!(set.into_iter().collect::<Vec<_>>(), vec![1, 3, 4]);
    }

    #[test]
    fn missing_skips_done_and_taken() {
        let done: BTreeSet<i64> = [0, 2].into();
        let taken: BTreeSet<i64> = [1].into();
        assert_eq!(missing(6, &done, &taken, 2), vec![3, 4]);
        assert_eq!(missing(3, &done, &taken, 5), Vec::<i64>::new());
    }

    #[test]
    fn indexed_pods_get_annotation_label_hostname_env() {
        let mut pod = json!({"metadata": {"generateName": "pi-", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"},
                                    {"name": "d", "image": "i", "env": [{"name": "X", "value": "1"}]}]}});
        make_indexed(&mut pod, "pi", 3);
        assert_eq!(pod["metadata"]["annotations"][INDEX_KEY], "3");
        assert_eq!(pod["metadata"]["labels"][INDEX_KEY], "3");
        assert_eq!(pod["metadata"]["labels"]["a"], "b");
        assert_eq!(pod["metadata"]["generateName"], "pi-3-");
        assert_eq!(pod["spec"]["hostname"], "pi-3");
        assert_eq!(pod["spec"]["containers"][1]["env"][1]["name"], INDEX_ENV);
        assert_eq!(
            pod["spec"]["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        );
        assert_eq!(of_pod(&pod), Some(3));
        assert_eq!(of_pod(&json!({"metadata": {}})), None);
    }
}
