//! Micro-benchmarks of the pure functions on Courier's per-Job path:
//! `cargo bench -p courier-core --bench core`.
//! - mirror construction (`mirror_for`) from a realistic origin;
//! - status translation (`translate_status`) for a running and for a finishing mirror;
//! - placement (`choose_cluster`) over 100 clusters, with and without a cluster selector.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use courier_core::job::JobSpecEssentials;
use courier_core::mirror::mirror_for;
use courier_core::ownership::Intent;
use courier_core::placement::{ClusterView, choose_cluster};
use courier_core::status::{MirrorReport, TranslateInput, translate_status};
use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::JobStatus;
use serde_json::{Value, json};

fn origin() -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train-0001", "namespace": "team-a",
            "uid": "0b6c7c3e-5f43-4a8e-9b39-2f1c8d1d1a11", "resourceVersion": "12345",
            "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "train", "courier.dev/cluster": "worker-7",
                       "batch.kubernetes.io/controller-uid": "0b6c7c3e-5f43-4a8e-9b39-2f1c8d1d1a11",
                       "batch.kubernetes.io/job-name": "train-0001"},
            "annotations": {"courier.dev/epoch": "1", "team": "a"},
            "finalizers": ["courier.dev/mirror-cleanup"],
            "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "batch/v1",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
        },
        "spec": {
            "managedBy": "courier.dev/dispatcher",
            "parallelism": 4, "completions": 8, "backoffLimit": 3, "completionMode": "NonIndexed",
            "ttlSecondsAfterFinished": 600, "suspend": false, "podReplacementPolicy": "TerminatingOrFailed",
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "0b6c7c3e-5f43-4a8e-9b39-2f1c8d1d1a11"}},
            "template": {
                "metadata": {"labels": {"app": "train",
                                        "batch.kubernetes.io/controller-uid": "0b6c7c3e-5f43-4a8e-9b39-2f1c8d1d1a11",
                                        "batch.kubernetes.io/job-name": "train-0001",
                                        "controller-uid": "0b6c7c3e-5f43-4a8e-9b39-2f1c8d1d1a11",
                                        "job-name": "train-0001"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "main", "image": "registry.example/train:1.2.3",
                        "command": ["python", "train.py", "--epochs", "10"],
                        "env": [{"name": "BATCH", "value": "64"}, {"name": "LR", "value": "0.001"}],
                        "resources": {"requests": {"cpu": "2", "memory": "4Gi"},
                                      "limits": {"cpu": "2", "memory": "4Gi"}}
                    }]
                }
            }
        },
        "status": {}
    })
}

fn status(v: Value) -> JobStatus {
    serde_json::from_value(v).unwrap_or_default()
}

fn bench_mirror(c: &mut Criterion) {
    let origin = origin();
    c.bench_function("mirror_for", |b| {
        b.iter(|| mirror_for(black_box(&origin), black_box("courier"), black_box(1)))
    });
}

fn bench_status(c: &mut Criterion) {
    let spec = JobSpecEssentials::from_spec_json(&origin()["spec"]);
    let placement = Intent {
        cluster: "worker-7".into(),
        epoch: 1,
    };
    let now: Timestamp = "2026-01-01T00:01:00Z"
        .parse()
        .unwrap_or(Timestamp::UNIX_EPOCH);
    let origin_running = status(json!({
        "startTime": "2026-01-01T00:00:01Z", "active": 4, "ready": 3, "succeeded": 2,
        "terminating": 0, "uncountedTerminatedPods": {},
        "conditions": [{"type": "courier.dev/Dispatched", "status": "True", "reason": "MirrorCreated",
                        "message": "worker-7 epoch 1", "lastProbeTime": "2026-01-01T00:00:01Z",
                        "lastTransitionTime": "2026-01-01T00:00:01Z"}]
    }));
    let mirror_running = status(json!({
        "startTime": "2026-01-01T00:00:01Z", "active": 4, "ready": 4, "succeeded": 3,
        "terminating": 0, "uncountedTerminatedPods": {}
    }));
    let mirror_done = status(json!({
        "startTime": "2026-01-01T00:00:01Z", "completionTime": "2026-01-01T00:00:59Z",
        "active": 0, "ready": 0, "succeeded": 8, "terminating": 0, "uncountedTerminatedPods": {},
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
             "lastProbeTime": "2026-01-01T00:00:59Z", "lastTransitionTime": "2026-01-01T00:00:59Z"},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached",
             "lastProbeTime": "2026-01-01T00:00:59Z", "lastTransitionTime": "2026-01-01T00:00:59Z"}
        ]
    }));
    for (name, mirror) in [
        ("translate_status/running", &mirror_running),
        ("translate_status/complete", &mirror_done),
    ] {
        c.bench_function(name, |b| {
            b.iter(|| {
                translate_status(black_box(&TranslateInput {
                    origin_spec: &spec,
                    origin_status: &origin_running,
                    mirror: Some(MirrorReport {
                        status: mirror,
                        placement: &placement,
                    }),
                    redispatch_possible: true,
                    now,
                }))
            })
        });
    }
}

fn clusters(n: usize) -> Vec<ClusterView> {
    let regions = ["eu", "us", "ap", "sa"];
    (0..n)
        .map(|i| ClusterView {
            name: format!("worker-{i:03}").into(),
            labels: Arc::new(BTreeMap::from([
                ("region".to_string(), regions[i % regions.len()].to_string()),
                (
                    "gpu".to_string(),
                    if i % 3 == 0 { "a100" } else { "none" }.to_string(),
                ),
            ])),
            weight: 1 + (i % 3) as u32,
            paused: i % 17 == 0,
            ready: i % 23 != 0,
            not_ready_since: None,
            current_mirrors: (i * 37 % 101) as u32,
            degraded: false,
            draining: false,
            duplicate: false,
            namespace_selector: None,
            namespaces: None,
        })
        .collect()
}

fn bench_placement(c: &mut Criterion) {
    let clusters = clusters(100);
    let excluded = courier_core::placement::Exclusions::new();
    c.bench_function("choose_cluster/100_clusters", |b| {
        b.iter(|| choose_cluster(black_box(&clusters), None, &BTreeMap::new(), &excluded).is_ok())
    });
    c.bench_function("choose_cluster/100_clusters_selector", |b| {
        b.iter(|| {
            choose_cluster(
                black_box(&clusters),
                Some(black_box("region in (eu,us),gpu=a100")),
                &BTreeMap::new(),
                &excluded,
            )
            .is_ok()
        })
    });
}

criterion_group!(benches, bench_mirror, bench_status, bench_placement);
criterion_main!(benches);
