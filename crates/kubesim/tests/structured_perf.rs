//! Rough cost of the per-write field-manager work (run with `--ignored --nocapture`; numbers from a debug
//! build are pessimistic by an order of magnitude).

use std::time::Instant;

use kubesim::schema;
use kubesim::structured::{self, Manager};
use serde_json::json;

fn job() -> serde_json::Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u", "labels": {"app": "a"}},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 6, "manualSelector": false,
                 "completionMode": "NonIndexed", "suspend": false, "podReplacementPolicy": "TerminatingOrFailed",
                 "template": {"metadata": {}, "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
                     "dnsPolicy": "ClusterFirst", "securityContext": {}, "schedulerName": "default-scheduler",
                     "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "true"],
                         "resources": {}, "terminationMessagePath": "/dev/termination-log",
                         "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}]}}},
        "status": {}
    })
}

#[test]
#[ignore]
fn per_write_cost() {
    let t = schema::builtin("batch/v1", "Job").unwrap();
    let m = Manager {
        name: "apifixtures",
        api_version: "batch/v1",
        subresource: None,
        now: "2025-06-01T10:00:00Z",
    };
    let n = 2000;
    let start = Instant::now();
    let mut created = job();
    for _ in 0..n {
        created = job();
        structured::update_managed_fields(&t, None, &mut created, &m);
    }
    println!("create: {:?}/op", start.elapsed() / n);
    let sm = Manager {
        name: "courier",
        subresource: Some("status"),
        ..m
    };
    let mut live = created.clone();
    let start = Instant::now();
    for i in 0..n {
        // A patch: the new object is built from the stored one, managedFields included.
        let mut new = live.clone();
        new["status"] = json!({"active": 1 + (i % 3), "startTime": "2025-06-01T10:00:00Z"});
        structured::update_managed_fields(&t, Some(&live), &mut new, &sm);
        live = new;
    }
    println!(
        "status update: {:?}/op (includes one object clone)",
        start.elapsed() / n
    );
    let start = Instant::now();
    for _ in 0..n {
        let _ = live.clone();
    }
    println!("object clone alone: {:?}/op", start.elapsed() / n);
}
