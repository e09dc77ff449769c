//! The floor: a raw client that performs exactly the API calls Courier needs to dispatch a Job —
//! write the origin's metadata (finalizer, cluster label, epoch annotation), create the mirror on
//! a worker, write the origin's status (the `courier.dev/Dispatched` marker) — with the same
//! concurrency, and no decisions: workers are taken in turn, nothing is cached or checked.
//! Courier's dispatch time divided by the floor's is the price of its decisions and bookkeeping.

use std::collections::HashSet;
use std::sync::Arc;

use anyhow::{Context as _, anyhow};
use courier_api::{ANNOTATION_EPOCH, DEFAULT_ORIGIN_ID, FINALIZER, LABEL_CLUSTER};
use courier_core::dispatched;
use courier_core::mirror::mirror_for;
use courier_core::ownership::Intent;
use courier_core::status::whole_seconds;
use futures::{StreamExt as _, TryStreamExt as _};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Field manager of the floor's writes (Courier's is `courier`).
const FIELD_MANAGER: &str = "courier-bench-floor";

/// Watches origins in `namespace` on `management` and dispatches each new one to `workers` in turn
/// with `concurrency` Jobs in flight, until `stop` is cancelled. The first failed call ends it.
pub async fn serve(
    management: Client,
    workers: Vec<(String, Client)>,
    namespace: String,
    concurrency: usize,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    if workers.is_empty() {
        anyhow::bail!("the floor needs at least one worker");
    }
    let (tx, rx) = mpsc::unbounded_channel::<Job>();
    let origins: Api<Job> = Api::namespaced(management.clone(), &namespace);
    // The watch feeds new origins in the order they appear, like Courier's origin watch.
    let feeder = tokio::spawn(async move {
        let stream = watcher::watcher(origins, watcher::Config::default());
        futures::pin_mut!(stream);
        let mut seen = HashSet::new();
        while let Ok(Some(event)) = stream.try_next().await {
            if let watcher::Event::Apply(job) | watcher::Event::InitApply(job) = event
                && let Some(name) = job.metadata.name.clone()
                && seen.insert(name)
                && tx.send(job).is_err()
            {
                return;
            }
        }
    });
    let jobs_ar = ApiResource::erase::<Job>(&());
    let workers = Arc::new(workers);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let stream =
        futures::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|job| (job, rx)) },
        );
    let work = stream
        .map(|job| {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % workers.len();
            let (cluster, worker) = workers[i].clone();
            let management = management.clone();
            let jobs_ar = jobs_ar.clone();
            async move { dispatch_one(&management, &cluster, &worker, &jobs_ar, job).await }
        })
        .buffer_unordered(concurrency.max(1))
        .try_for_each(|()| async { Ok(()) });
    let result = tokio::select! {
        r = work => r,
        _ = stop.cancelled() => Ok(()),
    };
    feeder.abort();
    result
}

/// The three calls for one Job.
async fn dispatch_one(
    management: &Client,
    cluster: &str,
    worker: &Client,
    jobs_ar: &ApiResource,
    origin: Job,
) -> anyhow::Result<()> {
    let name = origin
        .metadata
        .name
        .clone()
        .ok_or_else(|| anyhow!("an origin without a name"))?;
    let namespace = origin.metadata.namespace.clone().unwrap_or_default();
    let origin_json = serde_json::to_value(&origin).context("serialising an origin")?;
    let origins: Api<DynamicObject> = Api::namespaced_with(management.clone(), &namespace, jobs_ar);
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let intent = Intent {
        cluster: cluster.to_string(),
        epoch: 1,
    };
    let metadata = json!({"metadata": {
        "resourceVersion": origin.metadata.resource_version,
        "finalizers": [FINALIZER],
        "labels": {LABEL_CLUSTER: cluster},
        "annotations": {ANNOTATION_EPOCH: intent.epoch.to_string()},
    }});
    origins
        .patch(&name, &pp, &Patch::Merge(&metadata))
        .await
        .with_context(|| format!("floor: writing the metadata of {namespace}/{name}"))?;
    let mirror: Value = mirror_for(&origin_json, DEFAULT_ORIGIN_ID, intent.epoch)
        .with_context(|| format!("floor: building the mirror of {namespace}/{name}"))?;
    let mirror: DynamicObject =
        serde_json::from_value(mirror).context("floor: the mirror is not an object")?;
    let mirrors: Api<DynamicObject> = Api::namespaced_with(worker.clone(), &namespace, jobs_ar);
    let post = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    mirrors.create(&post, &mirror).await.with_context(|| {
        format!("floor: creating the mirror of {namespace}/{name} on {cluster}")
    })?;
    let condition = dispatched::condition(&intent, whole_seconds(Timestamp::now()));
    let status = json!({"status": {"conditions": [condition]}});
    origins
        .patch_status(&name, &pp, &Patch::Merge(&status))
        .await
        .with_context(|| format!("floor: writing the status of {namespace}/{name}"))?;
    Ok(())
}
