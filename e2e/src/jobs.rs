//! Job manifests and what the tests read from Jobs: labels, placement, conditions, the origins
//! and mirrors of a namespace.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use courier_api::{ANNOTATION_EPOCH, LABEL_CLUSTER, LABEL_EPOCH, LABEL_ORIGIN_UID, MANAGED_BY};
use k8s_openapi::api::batch::v1::Job;
use kube::api::ListParams;
use serde_json::{Value, json};

use crate::*;

pub fn label<'a>(j: &'a Job, key: &str) -> Option<&'a str> {
    j.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

pub fn annotation<'a>(j: &'a Job, key: &str) -> Option<&'a str> {
    j.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The origin's placement: (cluster, epoch).
pub fn placement(j: &Job) -> Option<(String, u64)> {
    let c = label(j, LABEL_CLUSTER)?.to_string();
    let e = annotation(j, ANNOTATION_EPOCH)?.parse().ok()?;
    Some((c, e))
}

/// A mirror's epoch label.
pub fn mirror_epoch(j: &Job) -> Option<u64> {
    label(j, LABEL_EPOCH)?.parse().ok()
}

pub fn condition_true(j: &Job, type_: &str) -> bool {
    j.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

pub fn condition_reason(j: &Job, type_: &str) -> Option<String> {
    j.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .and_then(|c| c.reason.clone())
}

/// `Complete` or `Failed`, if the Job finished.
pub fn finished(j: &Job) -> Option<&'static str> {
    if condition_true(j, "Complete") {
        Some("Complete")
    } else if condition_true(j, "Failed") {
        Some("Failed")
    } else {
        None
    }
}

/// A one-line state of a Job for failure messages.
pub fn summary(j: &Job) -> String {
    let s = j.status.clone().unwrap_or_default();
    let conds: Vec<String> = s
        .conditions
        .unwrap_or_default()
        .iter()
        .map(|c| {
            format!(
                "{}={}({})",
                c.type_,
                c.status,
                c.reason.clone().unwrap_or_default()
            )
        })
        .collect();
    format!(
        "placement {:?} suspend {:?} active {:?} ready {:?} succeeded {:?} failed {:?} conditions [{}]",
        placement(j),
        j.spec.as_ref().and_then(|s| s.suspend),
        s.active,
        s.ready,
        s.succeeded,
        s.failed,
        conds.join(", ")
    )
}

/// An origin Job (`managedBy` Courier) whose simulated pods follow `sim` annotations.
pub fn job(name: &str, sim: &[(&str, &str)]) -> Value {
    let annotations: serde_json::Map<String, Value> = sim
        .iter()
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": MANAGED_BY,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}]
                }
            }
        }
    })
}

/// Sets `spec.<key>` of a Job manifest.
pub fn with_spec(mut j: Value, key: &str, v: Value) -> Value {
    j["spec"][key] = v;
    j
}

/// Adds an annotation to a Job manifest's metadata.
pub fn with_annotation(mut j: Value, key: &str, v: &str) -> Value {
    j["metadata"]["annotations"][key] = json!(v);
    j
}

/// Creates many Jobs with up to `parallel` requests in flight.
pub async fn create_many(
    env: &Env,
    ns: &str,
    jobs: Vec<Value>,
    parallel: usize,
) -> anyhow::Result<Vec<Job>> {
    use futures::StreamExt as _;
    let results: Vec<anyhow::Result<Job>> = futures::stream::iter(jobs)
        .map(|j| env.create_job(ns, j))
        .buffer_unordered(parallel)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Invariant 2 on a snapshot: every mirror belongs to a live origin, is never ahead of the origin's
/// intent (epoch <= origin epoch), and a mirror of the origin's current epoch is on the origin's
/// cluster (so at most one is current). Returns the number of mirrors and of current ones.
pub async fn check_mirrors(env: &Env, ns: &str) -> anyhow::Result<(usize, usize)> {
    let origins: BTreeMap<String, Job> = origins(env, ns)
        .await?
        .into_iter()
        .filter_map(|j| j.metadata.uid.clone().map(|u| (u, j)))
        .collect();
    let mirrors = env.mirrors().await?;
    let mut current: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (wi, m) in &mirrors {
        let wname = &env.workers[*wi].name;
        let mname = m.metadata.name.clone().unwrap_or_default();
        let uid = label(m, LABEL_ORIGIN_UID).unwrap_or_default();
        let Some(origin) = origins.get(uid) else {
            bail!("mirror {wname}/{mname} belongs to no origin (uid {uid})");
        };
        let m_epoch = mirror_epoch(m).context("mirror without epoch")?;
        let Some((cluster, epoch)) = placement(origin) else {
            bail!("mirror {wname}/{mname} (epoch {m_epoch}) exists but its origin has no intent");
        };
        ensure!(
            m_epoch <= epoch,
            "mirror {wname}/{mname} has epoch {m_epoch}, ahead of the origin's {epoch}"
        );
        if m_epoch == epoch {
            ensure!(
                *wname == cluster,
                "mirror {wname}/{mname} has the current epoch {epoch} but the origin is placed on {cluster}"
            );
            current
                .entry(uid.to_string())
                .or_default()
                .push(wname.clone());
        }
    }
    if let Some((uid, where_)) = current.iter().find(|(_, v)| v.len() > 1) {
        bail!("origin {uid} has two current mirrors: {where_:?}");
    }
    Ok((mirrors.len(), current.len()))
}

/// Waits until every origin in `ns` has finished as expected; returns them.
pub async fn wait_all_finished(
    env: &Env,
    ns: &str,
    n: usize,
    timeout: Duration,
    expected_end: fn(&str) -> &'static str,
) -> anyhow::Result<Vec<Job>> {
    let jobs = wait_for(&format!("{n} origins finished"), timeout, || async move {
        let all = origins(env, ns).await.map_err(|e| e.to_string())?;
        let done = all.iter().filter(|j| finished(j).is_some()).count();
        if all.len() == n && done == n {
            Ok(all)
        } else {
            Err(format!("{done} of {} finished", all.len()))
        }
    })
    .await?;
    for j in &jobs {
        let name = j.metadata.name.clone().unwrap_or_default();
        let want = expected_end(&name);
        ensure!(
            finished(j) == Some(want),
            "{name} ended {:?}, expected {want}",
            finished(j)
        );
    }
    Ok(jobs)
}

/// Every origin has exactly one mirror, the current one (stale ones were collected).
pub async fn wait_one_mirror_each(env: &Env, ns: &str, n: usize) -> anyhow::Result<()> {
    wait_for(
        "exactly one (current) mirror per origin",
        Duration::from_secs(60),
        || async move {
            let (total, current) = check_mirrors(env, ns).await.map_err(|e| format!("{e:#}"))?;
            if total == n && current == n {
                Ok(())
            } else {
                Err(format!("{total} mirrors, {current} current, {n} origins"))
            }
        },
    )
    .await
}

/// Every origin Job in `ns`.
pub async fn origins(env: &Env, ns: &str) -> anyhow::Result<Vec<Job>> {
    Ok(env.jobs(ns).list(&ListParams::default()).await?.items)
}
