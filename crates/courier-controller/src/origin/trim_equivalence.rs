//! The watch's path to an origin entry ([`trim_job`]: a [`SlimJob`], its typed metadata and only
//! the spec fields it reads) against the JSON path ([`trim`]: `OriginView::from_json` of the whole
//! object): the same entry, or the same error, for every Job recorded from a real API server
//! (crates/kubesim/testdata) and for the edge cases.

use std::path::Path;

use courier_core::reconcile::ViewError;
use serde_json::{Value, json};

use super::store::{OriginEntry, trim, trim_job};
use crate::watch::SlimJob;

/// Every Job-shaped object (metadata, and a spec with a pod template) in the JSON files under
/// `dir`, depth first; the recordings' `<time>` placeholders become a time.
fn recorded_jobs(dir: &Path, out: &mut Vec<Value>) {
    fn times(v: &mut Value) {
        match v {
            Value::String(s) if s == "<time>" => *s = "2026-01-01T00:00:00Z".into(),
            Value::Object(m) => m.values_mut().for_each(times),
            Value::Array(a) => a.iter_mut().for_each(times),
            _ => {}
        }
    }
    fn collect(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Object(m) => {
                if m.get("metadata").is_some_and(Value::is_object)
                    && m.get("spec").and_then(|s| s.get("template")).is_some()
                {
                    let mut job = v.clone();
                    times(&mut job);
                    out.push(job);
                }
                m.values().for_each(|c| collect(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| collect(c, out)),
            _ => {}
        }
    }
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                collect(&v, out);
            }
        }
    }
}

/// An error as far as both paths must agree on it: the variant and the field (a malformed
/// status's reason quotes the parser, which reads a tree on one path and text on the other).
fn agreed(e: &ViewError) -> String {
    match e {
        ViewError::Malformed { field, .. } => format!("Malformed({field})"),
        other => format!("{other:?}"),
    }
}

/// Asserts that both paths read `job` alike; true when it is a managed, readable origin.
fn assert_same(job: &Value) -> bool {
    let slim: SlimJob =
        serde_json::from_str(&job.to_string()).unwrap_or_else(|e| panic!("SlimJob: {e}\n{job}"));
    match (trim_job(&slim), trim(job)) {
        (Ok(Some(typed)), Ok(Some(tree))) => {
            let OriginEntry {
                view,
                created,
                source,
            } = typed;
            assert_eq!(view, tree.view, "{job}");
            assert_eq!(created, tree.created, "{job}");
            let parse = |s: Option<&str>| s.map(|s| serde_json::from_str::<Value>(s).ok());
            assert_eq!(
                parse(source.as_deref()),
                parse(tree.source.as_deref()),
                "{job}"
            );
            true
        }
        (Ok(None), Ok(None)) => false,
        (Err(a), Err(b)) => {
            assert_eq!(agreed(&a), agreed(&b), "{job}");
            false
        }
        (a, b) => panic!(
            "the paths disagree: {:?} vs {:?}\n{job}",
            a.map(|e| e.is_some()),
            b.map(|e| e.is_some())
        ),
    }
}

fn ours(mut job: Value) -> Value {
    job["spec"]["managedBy"] = json!(courier_api::MANAGED_BY);
    job
}

#[test]
fn the_watch_path_reads_every_recorded_job_as_from_json_does() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kubesim/testdata");
    let mut jobs = Vec::new();
    for dir in ["apiserver", "job-traces"] {
        recorded_jobs(&root.join(dir), &mut jobs);
    }
    assert!(jobs.len() >= 50, "only {} recorded Jobs found", jobs.len());
    let mut compared = 0;
    for job in jobs {
        // As recorded (mostly not Courier's: both ignore them), then as Courier's.
        assert_same(&job);
        if assert_same(&ours(job)) {
            compared += 1;
        }
    }
    assert!(compared >= 50, "only {compared} managed Jobs compared");
}

/// A managed Job with Courier's metadata, a template whose labels the mirror loses, a
/// success policy and a status.
fn sample() -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "9",
            "generation": 3, "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "x", "courier.dev/cluster": "w1", "kueue.x-k8s.io/queue-name": "q"},
            "annotations": {"courier.dev/epoch": "2", "courier.dev/redispatches": "1", "other": "y"},
            "finalizers": ["courier.dev/mirror-cleanup", "other/f"],
            "managedFields": [{"manager": "kubectl"}]},
        "spec": {"managedBy": courier_api::MANAGED_BY, "parallelism": 2, "completions": null,
            "completionMode": "Indexed", "backoffLimitPerIndex": 1, "suspend": true,
            "successPolicy": {"rules": [{"succeededCount": 1}]}, "selector": {"matchLabels": {"k": "v"}},
            "template": {"metadata": {"labels": {"job-name": "a", "batch.kubernetes.io/job-name": "a", "k": "v"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}},
        "status": {"active": 1, "conditions": [{"type": "Suspended", "status": "True"}]}
    })
}

#[test]
fn the_watch_path_reads_the_edge_cases_as_from_json_does() {
    let mut cases = vec![sample()];
    let mut edit = |f: &dyn Fn(&mut Value)| {
        let mut j = sample();
        f(&mut j);
        cases.push(j);
    };
    edit(&|j| drop(j.as_object_mut().map(|o| o.remove("status"))));
    edit(&|j| j["status"] = Value::Null);
    edit(&|j| j["status"] = json!({"active": "one"}));
    edit(&|j| j["metadata"]["deletionTimestamp"] = json!("2026-01-02T00:00:00Z"));
    edit(&|j| drop(j["metadata"].as_object_mut().map(|m| m.remove("uid"))));
    edit(&|j| j["metadata"]["uid"] = json!(""));
    edit(&|j| drop(j["metadata"].as_object_mut().map(|m| m.remove("name"))));
    edit(&|j| {
        let m = &mut j["metadata"];
        m["labels"]["courier.dev/cluster"] = json!("w".repeat(2000));
        m["annotations"]["courier.dev/cluster-selector"] = json!("z".repeat(64 * 1024));
        for i in 0..64 {
            m["labels"][format!("courier.dev/l-{i}")] = json!("y");
        }
    });
    edit(&|j| {
        let m = &mut j["metadata"];
        for key in [
            "labels",
            "annotations",
            "finalizers",
            "generation",
            "resourceVersion",
        ] {
            m.as_object_mut().map(|m| m.remove(key));
        }
    });
    edit(&|j| j["spec"]["manualSelector"] = json!(true));
    edit(&|j| drop(j["spec"].as_object_mut().map(|s| s.remove("template"))));
    edit(&|j| j["spec"]["managedBy"] = json!("kueue.x-k8s.io/multikueue"));
    edit(&|j| drop(j["spec"].as_object_mut().map(|s| s.remove("managedBy"))));
    edit(&|j| {
        let c = &mut j["status"]["conditions"];
        *c = json!([{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]);
    });
    let managed = cases.iter().filter(|j| assert_same(j)).count();
    assert_eq!(managed, 9, "cases that make an entry");
    // Without metadata (no API server sends that) both refuse the Job; the slim decode cannot
    // tell absent metadata from empty, so it names the missing name.
    let mut bare = sample();
    bare.as_object_mut().map(|o| o.remove("metadata"));
    let slim: Option<SlimJob> = serde_json::from_value(bare.clone()).ok();
    assert!(slim.is_some_and(|s| trim_job(&s).is_err()));
    assert!(trim(&bare).is_err());
}
