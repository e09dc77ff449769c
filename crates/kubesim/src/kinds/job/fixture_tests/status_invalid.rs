//! The recorded `job_status_invalid` scenario: each rejected status write replayed on a Job built
//! by its unrecorded setup (spec additions and the valid status writes before it).

use super::*;

fn managed_job(name: &str, spec: Value) -> Value {
    let mut sp = json!({"template": {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "registry.k8s.io/busybox:1.36", "command": ["sh", "-c", "true"]}]}},
        "managedBy": "courier.dev/dispatcher"});
    if let (Some(dst), Some(src)) = (sp.as_object_mut(), spec.as_object()) {
        for (k, v) in src {
            dst.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": sp})
}

fn cond(t: &str) -> Value {
    json!({"type": t, "status": "True", "lastProbeTime": "2025-06-01T10:05:00Z",
           "lastTransitionTime": "2025-06-01T10:05:00Z", "reason": format!("{t}Reason"),
           "message": format!("set by apifixtures: {t}")})
}

/// The unrecorded setup of `job_status_invalid` (steps.py `invalid(...)`): job name, spec additions and
/// the valid status writes made before the recorded one.
fn status_invalid_setups() -> Vec<(&'static str, &'static str, Value, Vec<Value>)> {
    let t0 = "2025-06-01T10:00:00Z";
    let started = json!({"startTime": t0, "active": 1});
    let complete = json!({"active": 0, "succeeded": 1, "completionTime": "2025-06-01T10:05:00Z",
                          "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]});
    let idx = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 2});
    let idx_bl = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 2, "backoffLimitPerIndex": 1});
    let started2 = json!({"startTime": t0, "active": 2});
    vec![
        (
            "Complete without SuccessCriteriaMet",
            "no-scm",
            json!({}),
            vec![started.clone()],
        ),
        (
            "Complete without completionTime",
            "no-ctime",
            json!({}),
            vec![started.clone()],
        ),
        (
            "completionTime without Complete",
            "ctime-only",
            json!({}),
            vec![started.clone()],
        ),
        (
            "Failed without FailureTarget",
            "no-ft",
            json!({}),
            vec![started.clone()],
        ),
        ("Complete without startTime", "no-start", json!({}), vec![]),
        (
            "decreasing failed",
            "dec-failed",
            json!({}),
            vec![json!({"startTime": t0, "active": 1, "failed": 2})],
        ),
        (
            "decreasing succeeded (NonIndexed)",
            "dec-succ",
            json!({"completions": 3}),
            vec![json!({"startTime": t0, "active": 1, "succeeded": 2})],
        ),
        (
            "negative active",
            "neg-active",
            json!({}),
            vec![json!({"startTime": t0})],
        ),
        (
            "ready > active",
            "ready-gt",
            json!({}),
            vec![started.clone()],
        ),
        (
            "completedIndexes out of range",
            "ci-range",
            idx.clone(),
            vec![started2.clone()],
        ),
        (
            "completedIndexes bad format",
            "ci-format",
            idx.clone(),
            vec![started2.clone()],
        ),
        (
            "completedIndexes on NonIndexed job",
            "ci-nonidx",
            json!({}),
            vec![started.clone()],
        ),
        (
            "failedIndexes without backoffLimitPerIndex",
            "fi-nobl",
            idx.clone(),
            vec![started2.clone()],
        ),
        (
            "failedIndexes with backoffLimitPerIndex (valid)",
            "fi-bl",
            idx_bl.clone(),
            vec![started2.clone()],
        ),
        (
            "failedIndexes overlapping completedIndexes",
            "fi-overlap",
            idx_bl,
            vec![json!({"startTime": t0, "active": 2, "completedIndexes": "1", "succeeded": 1})],
        ),
        (
            "completionTime before startTime",
            "ctime-before",
            json!({}),
            vec![started.clone()],
        ),
        (
            "active>0 on finished job (in the same write)",
            "active-finish",
            json!({}),
            vec![started.clone()],
        ),
        (
            "active>0 after finished",
            "active-after",
            json!({}),
            vec![started.clone(), complete.clone()],
        ),
        (
            "startTime change while unsuspended",
            "start-change",
            json!({}),
            vec![started.clone()],
        ),
        (
            "startTime removed while unsuspended",
            "start-remove",
            json!({}),
            vec![started.clone()],
        ),
        (
            "removing a True Complete condition",
            "remove-complete",
            json!({}),
            vec![started.clone(), complete.clone()],
        ),
        (
            "flipping Complete to False",
            "flip-complete",
            json!({}),
            vec![started.clone(), complete.clone()],
        ),
        (
            "changing completionTime of a complete job",
            "ctime-mutate",
            json!({}),
            vec![started.clone(), complete],
        ),
        (
            "Complete and Failed together",
            "both",
            json!({}),
            vec![started.clone()],
        ),
        (
            "SuccessCriteriaMet without successPolicy",
            "scm-nopolicy",
            json!({}),
            vec![started.clone()],
        ),
        (
            "uncountedTerminatedPods on finished job",
            "uncounted",
            json!({}),
            vec![started.clone()],
        ),
        (
            "unknown condition type (allowed?)",
            "custom-cond",
            json!({}),
            vec![started],
        ),
    ]
}

#[test]
fn job_status_invalid_scenario() {
    let fx = load("apiserver", "job_status_invalid.json");
    let setups = status_invalid_setups();
    let mut handled = 0;
    for (i, step) in fx["steps"].as_array().unwrap().iter().enumerate() {
        let name = step["name"].as_str().unwrap();
        if name == "create namespace" {
            continue;
        }
        let (_, job, spec, writes) = setups
            .iter()
            .find(|(n, ..)| *n == name)
            .unwrap_or_else(|| panic!("no setup for {name:?}"));
        let mut stored = create(
            &managed_job(job, spec.clone()),
            None,
            &uuid(uid_for(step, 100 + i as u64)),
        )
        .unwrap_or_else(|e| panic!("{name}: setup create: {}", e.message));
        for w in writes {
            stored = update_status(merge(&stored, &json!({"status": w})), &stored)
                .unwrap_or_else(|e| panic!("{name}: setup write: {}", e.message));
        }
        let patch = denorm(&step["request"]["body"]);
        let outcome = update_status(merge(&stored, &patch), &stored);
        check(step, &outcome, "<gen:1>");
        handled += 1;
    }
    assert_eq!(handled, 27);
}
