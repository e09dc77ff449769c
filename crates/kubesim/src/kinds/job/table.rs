//! The server-side printer for Jobs (`printJob` in `pkg/printers/internalversion/printers.go`): what
//! `kubectl get jobs` receives with `as=Table`.

use serde_json::{Value, json};

use crate::json::{get_arr, get_i64, get_str};
use crate::kinds::TableSpec;
use crate::kinds::common::{AGE_DESCRIPTION, NAME_DESCRIPTION, human_duration};
use crate::validation::selector::format_label_selector;

/// Column definitions and the row printer. Columns include Name, like the real server's Table.
pub static JOB_TABLE: TableSpec = TableSpec {
    columns: &[
        ("Name", "string", "name", NAME_DESCRIPTION, 0),
        ("Status", "string", "", "Status of the job.", 0),
        (
            "Completions",
            "string",
            "",
            "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
            0,
        ),
        (
            "Duration",
            "string",
            "",
            "Time required to complete the job.",
            0,
        ),
        ("Age", "string", "", AGE_DESCRIPTION, 0),
        (
            "Containers",
            "string",
            "",
            "Names of each container in the template.",
            1,
        ),
        (
            "Images",
            "string",
            "",
            "Images referenced by each container in the template.",
            1,
        ),
        (
            "Selector",
            "string",
            "",
            "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
            1,
        ),
    ],
    cells: job_cells,
};

/// One row's cells, relative to the current time.
fn job_cells(job: &Value) -> Vec<Value> {
    job_cells_at(job, jiff::Timestamp::now())
}

fn has_condition(job: &Value, ctype: &str) -> bool {
    super::status::condition_true(job, ctype)
}

/// `printJob` with an explicit "now" (for tests).
pub fn job_cells_at(job: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let succeeded = get_i64(job, &["status", "succeeded"]).unwrap_or(0);
    let completions = match get_i64(job, &["spec", "completions"]) {
        Some(c) => format!("{succeeded}/{c}"),
        None => {
            let parallelism = get_i64(job, &["spec", "parallelism"]).unwrap_or(0);
            if parallelism > 1 {
                format!("{succeeded}/1 of {parallelism}")
            } else {
                format!("{succeeded}/1")
            }
        }
    };
    let start = get_str(job, &["status", "startTime"]).and_then(crate::time::parse);
    let end = get_str(job, &["status", "completionTime"]).and_then(crate::time::parse);
    let duration = match (start, end) {
        (None, _) => String::new(),
        (Some(s), None) => human_duration(now.as_second() - s.as_second()),
        (Some(s), Some(e)) => human_duration(e.as_second() - s.as_second()),
    };
    let deleting = job
        .get("metadata")
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null());
    let status = if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if deleting {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(job, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let age = match get_str(job, &["metadata", "creationTimestamp"]).and_then(crate::time::parse) {
        Some(t) => human_duration(now.as_second() - t.as_second()),
        None => "<unknown>".to_string(),
    };
    let containers = get_arr(job, &["spec", "template", "spec", "containers"])
        .map(Vec::as_slice)
        .unwrap_or_default();
    let names: Vec<&str> = containers
        .iter()
        .map(|c| get_str(c, &["name"]).unwrap_or(""))
        .collect();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| get_str(c, &["image"]).unwrap_or(""))
        .collect();
    let selector = format_label_selector(job.get("spec").and_then(|s| s.get("selector")));
    vec![
        json!(get_str(job, &["metadata", "name"]).unwrap_or("")),
        json!(status),
        json!(completions),
        json!(duration),
        json!(age),
        json!(names.join(",")),
        json!(images.join(",")),
        json!(selector),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows() {
        let now: jiff::Timestamp = "2025-06-01T10:10:00Z".parse().unwrap();
        let job = json!({
            "metadata": {"name": "b", "creationTimestamp": "2025-06-01T10:00:00Z"},
            "spec": {"completions": 1, "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
                     "template": {"spec": {"containers": [{"name": "main", "image": "registry.k8s.io/busybox:1.36"}, {"name": "side", "image": "x"}]}}},
            "status": {}
        });
        assert_eq!(
            job_cells_at(&job, now),
            vec![
                json!("b"),
                json!("Running"),
                json!("0/1"),
                json!(""),
                json!("10m"),
                json!("main,side"),
                json!("registry.k8s.io/busybox:1.36,x"),
                json!("batch.kubernetes.io/controller-uid=u")
            ]
        );
        let done = json!({
            "metadata": {"name": "d"},
            "spec": {"parallelism": 3},
            "status": {"succeeded": 2, "startTime": "2025-06-01T10:00:00Z", "completionTime": "2025-06-01T10:00:30Z",
                       "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}
        });
        let cells = job_cells_at(&done, now);
        assert_eq!(cells[1], "Complete");
        assert_eq!(cells[2], "2/1 of 3");
        assert_eq!(cells[3], "30s");
        assert_eq!(cells[4], "<unknown>");
        assert_eq!(cells[7], "<none>");
        let susp = json!({"metadata": {"name": "s", "deletionTimestamp": "x"}, "spec": {}, "status": {"conditions": [{"type": "Suspended", "status": "True"}]}});
        assert_eq!(job_cells_at(&susp, now)[1], "Terminating");
    }
}
