//! Dispatch end to end: the real `courier run` against a management and two worker kubesim
//! processes (w1 region=eu, w2 region=us, speed 10). One environment per test.

use std::time::Duration;

use anyhow::{Context as _, anyhow, ensure};
use courier_api::{FINALIZER, LABEL_ORIGIN, MANAGED_BY};
use courier_e2e::{
    Env, EnvOptions, ORIGIN, condition_reason, condition_true, finished, job, label, mirror_epoch,
    placement, summary, wait_for, with_annotation, with_spec,
};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;

const NS: &str = "default";
const T: Duration = Duration::from_secs(60);

async fn env(test: &str) -> anyhow::Result<Env> {
    Env::start(test, EnvOptions::default()).await
}

fn active(j: &Job) -> i32 {
    j.status.as_ref().and_then(|s| s.active).unwrap_or(0)
}

fn uid(j: &Job) -> anyhow::Result<String> {
    j.metadata
        .uid
        .clone()
        .ok_or_else(|| anyhow!("Job has no uid"))
}

/// The origin's current mirror: on the cluster its label names, with its epoch.
async fn current_mirror(env: &Env, origin: &Job) -> anyhow::Result<Job> {
    let (cluster, epoch) = placement(origin).context("origin has no placement")?;
    let i = env.worker_index(&cluster)?;
    let name = origin.metadata.name.clone().unwrap_or_default();
    let m = env.worker_jobs(i, NS).get(&name).await?;
    ensure!(
        label(&m, courier_api::LABEL_ORIGIN_UID) == origin.metadata.uid.as_deref(),
        "mirror on {cluster} has another origin uid"
    );
    ensure!(
        mirror_epoch(&m) == Some(epoch),
        "mirror epoch {:?} != {epoch}",
        mirror_epoch(&m)
    );
    Ok(m)
}

/// What a user reads off a finished Job's status: the terminal condition (type, reason, transition
/// time), the interim one, counters, start/completion times and index sets. Zero counters count
/// as absent.
fn outcome(j: &Job) -> serde_json::Value {
    let s = serde_json::to_value(j.status.clone().unwrap_or_default()).unwrap_or_default();
    let cond = |types: &[&str]| {
        s["conditions"].as_array().and_then(|cs| {
            cs.iter()
                .find(|c| {
                    types.contains(&c["type"].as_str().unwrap_or("")) && c["status"] == "True"
                })
                .map(|c| json!([c["type"], c["reason"], c["lastTransitionTime"]]))
        })
    };
    let count = |k: &str| match s.get(k) {
        Some(v) if v != &json!(0) => v.clone(),
        _ => serde_json::Value::Null,
    };
    json!({
        "terminal": cond(&["Complete", "Failed"]),
        "interim": cond(&["SuccessCriteriaMet", "FailureTarget"]),
        "succeeded": count("succeeded"), "failed": count("failed"), "active": count("active"),
        "ready": count("ready"), "terminating": count("terminating"),
        "startTime": s.get("startTime"), "completionTime": s.get("completionTime"),
        "completedIndexes": s.get("completedIndexes"), "failedIndexes": s.get("failedIndexes"),
    })
}

/// The finished origin reads exactly as its finished mirror does (issue #12 §5: times equal, not
/// merely present; counters exact).
async fn ends_as_its_mirror(env: &Env, origin: &Job) -> anyhow::Result<()> {
    let m = current_mirror(env, origin).await?;
    let (o, w) = (outcome(origin), outcome(&m));
    ensure!(o == w, "the origin ended\n  {o}\nbut its mirror\n  {w}");
    Ok(())
}

/// A plain Job: dispatched with epoch 1, runs on one worker, Complete with both completions; the
/// mirror carries the ownership labels and no managedBy/TTL; CLI views and endpoints agree; the
/// controller stops cleanly on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success() -> anyhow::Result<()> {
    let mut env = env("success").await?;
    let r = success_body(&env).await;
    let r = match r {
        Ok(()) => {
            let status = env
                .controller
                .as_mut()
                .and_then(|p| p.terminate(Duration::from_secs(10)));
            match status {
                Some(s) if s.success() => Ok(()),
                other => Err(anyhow!(
                    "courier run did not exit cleanly on SIGTERM: {other:?}"
                )),
            }
        }
        Err(e) => Err(e),
    };
    env.finish(r)
}

async fn success_body(env: &Env) -> anyhow::Result<()> {
    let j = job("hello", &[("sim/run-seconds", "5")]);
    let j = with_spec(
        with_spec(j, "completions", json!(2)),
        "parallelism",
        json!(2),
    );
    let j = with_spec(j, "ttlSecondsAfterFinished", json!(3600));
    let created = env.create_job(NS, j).await?;
    let uid = uid(&created)?;
    let done = env.wait_finished(NS, "hello", T).await?;
    ensure!(finished(&done) == Some("Complete"), "{}", summary(&done));
    ensure!(
        done.status.as_ref().and_then(|s| s.succeeded) == Some(2),
        "{}",
        summary(&done)
    );
    let (cluster, epoch) = placement(&done).context("no placement")?;
    ensure!(epoch == 1, "epoch {epoch}");
    ensure!(
        done.metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .iter()
            .any(|f| f == FINALIZER),
        "origin has no {FINALIZER} finalizer"
    );
    let mirrors = env.mirrors_of(&uid).await?;
    ensure!(mirrors.len() == 1, "{} mirrors", mirrors.len());
    let m = current_mirror(env, &done).await?;
    ensure!(label(&m, LABEL_ORIGIN) == Some(ORIGIN));
    let spec = m.spec.clone().unwrap_or_default();
    ensure!(spec.managed_by.is_none(), "mirror keeps managedBy");
    ensure!(
        spec.ttl_seconds_after_finished.is_none(),
        "mirror carries a TTL"
    );
    ensure!(finished(&m) == Some("Complete"));
    ends_as_its_mirror(env, &done).await?;
    let msg = env.wait_event(NS, "hello", "Dispatched", T).await?;
    ensure!(
        msg.contains(&cluster),
        "Dispatched event {msg:?} does not name {cluster}"
    );

    let out = env.courier(&["jobs"]).await?.ok()?;
    ensure!(
        out.stdout.contains("hello")
            && out.stdout.contains(&cluster)
            && out.stdout.contains("Complete"),
        "{}",
        out.stdout
    );
    let out = env.courier(&["explain", "default/hello"]).await?.ok()?;
    ensure!(
        out.stdout
            .contains(&format!("placed on: {cluster}, epoch 1")),
        "{}",
        out.stdout
    );
    ensure!(out.stdout.contains("Dispatched"), "{}", out.stdout);
    let out = env.courier(&["cluster", "list"]).await?.ok()?;
    ensure!(
        out.stdout.matches("Connected").count() == 2,
        "{}",
        out.stdout
    );

    for path in ["/healthz", "/readyz", "/metrics"] {
        let (code, body) = env.http_get(path).await?;
        ensure!(code == 200, "{path} answered {code}: {body}");
    }
    Ok(())
}

/// Indexed Job with a successPolicy: index 0 succeeds, the others are stopped; the origin shows
/// SuccessCriteriaMet (SuccessPolicy) then Complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_with_success_policy() -> anyhow::Result<()> {
    let mut env = env("indexed").await?;
    let r = async {
        let j = job(
            "leader",
            &[
                ("sim/outcome", "hang"),
                ("sim/plan", r#"{"i0": "succeed@3"}"#),
            ],
        );
        let j = with_spec(j, "completionMode", json!("Indexed"));
        let j = with_spec(j, "completions", json!(4));
        let j = with_spec(j, "parallelism", json!(4));
        let j = with_spec(
            j,
            "successPolicy",
            json!({"rules": [{"succeededIndexes": "0"}]}),
        );
        env.create_job(NS, j).await?;
        let done = env.wait_finished(NS, "leader", T).await?;
        ensure!(finished(&done) == Some("Complete"), "{}", summary(&done));
        ensure!(
            condition_reason(&done, "SuccessCriteriaMet").as_deref() == Some("SuccessPolicy"),
            "{}",
            summary(&done)
        );
        let st = done.status.clone().unwrap_or_default();
        ensure!(
            st.completed_indexes.as_deref() == Some("0"),
            "completedIndexes {:?}",
            st.completed_indexes
        );
        ensure!(st.active.unwrap_or(0) == 0);
        ends_as_its_mirror(&env, &done).await?;
        Ok(())
    }
    .await;
    env.finish(r)
}

/// Every pod fails: Failed with BackoffLimitExceeded after backoffLimit+1 failures, and a finished
/// origin is never re-dispatched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_by_backoff_limit() -> anyhow::Result<()> {
    let mut env = env("failure").await?;
    let r = async {
        let j = job(
            "fails",
            &[("sim/outcome", "fail:3"), ("sim/run-seconds", "1")],
        );
        let created = env
            .create_job(NS, with_spec(j, "backoffLimit", json!(1)))
            .await?;
        let done = env.wait_finished(NS, "fails", T).await?;
        ensure!(finished(&done) == Some("Failed"), "{}", summary(&done));
        ensure!(
            condition_reason(&done, "Failed").as_deref() == Some("BackoffLimitExceeded"),
            "{}",
            summary(&done)
        );
        ensure!(condition_true(&done, "FailureTarget"), "{}", summary(&done));
        ensure!(
            done.status.as_ref().and_then(|s| s.failed) == Some(2),
            "{}",
            summary(&done)
        );
        ends_as_its_mirror(&env, &done).await?;
        // Terminal is final: nothing happens to it afterwards (a negative check, so it has to wait;
        // a GC sweep (2s) and a resync run in this window).
        tokio::time::sleep(Duration::from_secs(4)).await;
        let later = env.get_job(NS, "fails").await?;
        ensure!(
            placement(&later).map(|p| p.1) == Some(1),
            "re-dispatched: {}",
            summary(&later)
        );
        ensure!(env.mirrors_of(&uid(&created)?).await?.len() == 1);
        Ok(())
    }
    .await;
    env.finish(r)
}

/// Suspend mid-run: the mirror is suspended and the origin shows Suspended=True with no active
/// pods; resume: it runs to Complete on the same placement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume_mid_run() -> anyhow::Result<()> {
    let mut env = env("suspend").await?;
    let r = async {
        env.create_job(NS, job("pausable", &[("sim/run-seconds", "30")]))
            .await?;
        let running = env
            .wait_job(NS, "pausable", "running", T, |j| active(j) >= 1)
            .await?;
        let (cluster, _) = placement(&running).context("no placement")?;
        let wi = env.worker_index(&cluster)?;
        env.patch_job(NS, "pausable", json!({"spec": {"suspend": true}}))
            .await?;
        let wj = env.worker_jobs(wi, NS);
        wait_for("mirror suspended", T, || {
            let wj = wj.clone();
            async move {
                let m = wj.get("pausable").await.map_err(|e| e.to_string())?;
                if m.spec.as_ref().and_then(|s| s.suspend) == Some(true) {
                    Ok(())
                } else {
                    Err(summary(&m))
                }
            }
        })
        .await?;
        env.wait_job(
            NS,
            "pausable",
            "Suspended=True and no active pods",
            T,
            |j| condition_true(j, "Suspended") && active(j) == 0,
        )
        .await?;
        env.patch_job(NS, "pausable", json!({"spec": {"suspend": false}}))
            .await?;
        wait_for("mirror resumed", T, || {
            let wj = wj.clone();
            async move {
                let m = wj.get("pausable").await.map_err(|e| e.to_string())?;
                if m.spec.as_ref().and_then(|s| s.suspend) == Some(false) {
                    Ok(())
                } else {
                    Err(summary(&m))
                }
            }
        })
        .await?;
        let done = env.wait_finished(NS, "pausable", T).await?;
        ensure!(finished(&done) == Some("Complete"), "{}", summary(&done));
        ensure!(placement(&done) == Some((cluster, 1)), "{}", summary(&done));
        ensure!(!condition_true(&done, "Suspended"));
        Ok(())
    }
    .await;
    env.finish(r)
}

/// Raising parallelism on the origin reaches the mirror, and more pods run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallelism_change() -> anyhow::Result<()> {
    let mut env = env("parallelism").await?;
    let r = async {
        let j = job("widen", &[("sim/run-seconds", "20")]);
        let j = with_spec(
            with_spec(j, "completions", json!(4)),
            "parallelism",
            json!(1),
        );
        env.create_job(NS, j).await?;
        let running = env
            .wait_job(NS, "widen", "running", T, |j| active(j) == 1)
            .await?;
        let (cluster, _) = placement(&running).context("no placement")?;
        let wj = env.worker_jobs(env.worker_index(&cluster)?, NS);
        env.patch_job(NS, "widen", json!({"spec": {"parallelism": 4}}))
            .await?;
        wait_for("mirror parallelism 4", T, || {
            let wj = wj.clone();
            async move {
                let m = wj.get("widen").await.map_err(|e| e.to_string())?;
                let p = m.spec.as_ref().and_then(|s| s.parallelism);
                if p == Some(4) {
                    Ok(())
                } else {
                    Err(format!("parallelism {p:?}"))
                }
            }
        })
        .await?;
        env.wait_job(NS, "widen", "more than one active pod", T, |j| {
            active(j) >= 2
        })
        .await?;
        let done = env.wait_finished(NS, "widen", T).await?;
        ensure!(finished(&done) == Some("Complete"), "{}", summary(&done));
        ensure!(done.status.as_ref().and_then(|s| s.succeeded) == Some(4));
        Ok(())
    }
    .await;
    env.finish(r)
}

/// Deleting the origin mid-run deletes the mirror (and nothing is left on the worker), then the
/// finalizer goes and the origin is gone. The controller's garbage collector is off
/// (`--gc-interval 1h`: it sweeps once at start), so only the finalizer path can remove the mirror,
/// and the two servers' request logs show the order: the mirror's DELETE on the worker was answered
/// before the write that released the origin's finalizer.
///
/// To see it fail: in `courier_core::reconcile::paths::delete_everything` skip the current
/// mirror's delete (or make it a side action, so the release does not wait for it); with the
/// garbage collector off the mirror outlives the origin (not yet run on such a build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_origin_mid_run() -> anyhow::Result<()> {
    let mut env = Env::start(
        "delete-origin",
        EnvOptions {
            controller_args: vec!["--gc-interval".into(), "1h".into()],
            ..Default::default()
        },
    )
    .await?;
    let r = async {
        let created = env
            .create_job(NS, job("doomed", &[("sim/outcome", "hang")]))
            .await?;
        let uid = uid(&created)?;
        let running = env
            .wait_job(NS, "doomed", "running", T, |j| active(j) >= 1)
            .await?;
        let (cluster, _) = placement(&running).context("no placement")?;
        current_mirror(&env, &running).await?;
        let worker = &env.workers[env.worker_index(&cluster)?];
        worker.admin("POST", "/record/start", None).await?;
        env.mgmt.admin("POST", "/record/start", None).await?;
        env.delete_job(NS, "doomed").await?;
        let jobs = env.jobs(NS);
        wait_for("origin gone", T, || {
            let jobs = jobs.clone();
            async move {
                match jobs.get_opt("doomed").await.map_err(|e| e.to_string())? {
                    None => Ok(()),
                    Some(j) => Err(format!(
                        "still there, finalizers {:?}",
                        j.metadata.finalizers
                    )),
                }
            }
        })
        .await?;
        // No waiting: the mirror must already be gone when the origin is.
        let left = env.mirrors_of(&uid).await?;
        ensure!(
            left.is_empty(),
            "the origin's finalizer was released while its mirror still exists on {cluster}"
        );
        let mirror_deleted = request_time(&worker.recorded().await?, "delete", "doomed")
            .with_context(|| format!("no answered DELETE of the mirror on {cluster}"))?;
        let released = env
            .mgmt
            .recorded()
            .await?
            .iter()
            .filter(|r| {
                matches!(r["verb"].as_str(), Some("patch" | "update"))
                    && r["resource"] == "jobs"
                    && r["subresource"] == ""
                    && r["name"] == "doomed"
            })
            .filter_map(|r| r["time"].as_str().map(str::to_string))
            .next_back()
            .context("no write on the origin after its deletion (the finalizer release)")?;
        ensure!(
            mirror_deleted < released,
            "the finalizer was released at {released}, before the mirror's DELETE at {mirror_deleted}"
        );
        wait_for("no Job left on the workers", T, || {
            let env = &env;
            async move {
                let mut left = Vec::new();
                for i in 0..env.workers.len() {
                    let all = env
                        .worker_jobs(i, NS)
                        .list(&ListParams::default())
                        .await
                        .map_err(|e| e.to_string())?;
                    left.extend(all.items.into_iter().filter_map(|j| j.metadata.name));
                }
                if left.is_empty() {
                    Ok(())
                } else {
                    Err(format!("jobs {left:?}"))
                }
            }
        })
        .await
        .with_context(|| format!("mirror was on {cluster}"))?;
        Ok(())
    }
    .await;
    env.finish(r)
}

/// When a recorded, successful (2xx) `verb` on the Job `name` was answered.
fn request_time(records: &[serde_json::Value], verb: &str, name: &str) -> Option<String> {
    records
        .iter()
        .find(|r| {
            r["verb"] == verb
                && r["resource"] == "jobs"
                && r["name"] == name
                && r["code"].as_u64().is_some_and(|c| (200..300).contains(&c))
        })
        .and_then(|r| r["time"].as_str().map(str::to_string))
}

/// A foreign Job with the origin's name on the first-choice worker: left untouched, MirrorConflict
/// event, the Job runs on the other worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_job_with_same_name() -> anyhow::Result<()> {
    let mut env = env("foreign").await?;
    let r = async {
        // A long-running Job takes one worker, so the other (fewest mirrors) is the first choice.
        env.create_job(NS, job("filler", &[("sim/outcome", "hang")]))
            .await?;
        let filler = env
            .wait_job(NS, "filler", "running", T, |j| active(j) >= 1)
            .await?;
        let (busy, _) = placement(&filler).context("no placement")?;
        let first_choice = env
            .workers
            .iter()
            .map(|w| w.name.clone())
            .find(|n| *n != busy)
            .context("no second worker")?;
        let fi = env.worker_index(&first_choice)?;
        let foreign: Job = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "shared-name", "labels": {"app": "someone-else"}},
            "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox:1.36"}]}}}
        }))?;
        let foreign = env
            .worker_jobs(fi, NS)
            .create(&PostParams::default(), &foreign)
            .await?;
        env.create_job(NS, job("shared-name", &[("sim/run-seconds", "3")]))
            .await?;
        let done = env.wait_finished(NS, "shared-name", T).await?;
        ensure!(finished(&done) == Some("Complete"), "{}", summary(&done));
        let (ran_on, _) = placement(&done).context("no placement")?;
        ensure!(ran_on == busy, "ran on {ran_on}, where the foreign Job is");
        current_mirror(&env, &done).await?;
        let msg = env
            .wait_event(NS, "shared-name", "MirrorConflict", T)
            .await?;
        ensure!(
            msg.contains(&first_choice),
            "MirrorConflict message {msg:?} does not name {first_choice}"
        );
        let after = env.worker_jobs(fi, NS).get("shared-name").await?;
        ensure!(
            after.metadata.uid == foreign.metadata.uid,
            "foreign Job was replaced"
        );
        ensure!(
            after.metadata.labels == foreign.metadata.labels,
            "foreign Job's labels changed: {:?}",
            after.metadata.labels
        );
        ensure!(
            after.metadata.generation == foreign.metadata.generation,
            "foreign Job's spec changed"
        );
        ensure!(after.spec.as_ref().and_then(|s| s.suspend) == Some(true));
        Ok(())
    }
    .await;
    env.finish(r)
}

/// `courier.dev/cluster-selector` places Jobs only on matching workers; a Job no worker matches
/// waits with NoEligibleCluster and is placed once a worker's labels change to match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_selector_placement() -> anyhow::Result<()> {
    let mut env = env("selector").await?;
    let r = async {
        let sel = courier_api::ANNOTATION_CLUSTER_SELECTOR;
        let mut expected = Vec::new();
        for i in 0..3 {
            let name = format!("us-{i}");
            env.create_job(
                NS,
                with_annotation(job(&name, &[("sim/run-seconds", "2")]), sel, "region=us"),
            )
            .await?;
            expected.push((name, "w2"));
        }
        for i in 0..2 {
            let name = format!("eu-{i}");
            env.create_job(
                NS,
                with_annotation(
                    job(&name, &[("sim/run-seconds", "2")]),
                    sel,
                    "region in (eu)",
                ),
            )
            .await?;
            expected.push((name, "w1"));
        }
        env.create_job(
            NS,
            with_annotation(job("asia", &[("sim/run-seconds", "2")]), sel, "region=asia"),
        )
        .await?;
        for (name, cluster) in &expected {
            let done = env.wait_finished(NS, name, T).await?;
            ensure!(
                finished(&done) == Some("Complete"),
                "{name}: {}",
                summary(&done)
            );
            ensure!(
                placement(&done).map(|p| p.0).as_deref() == Some(*cluster),
                "{name}: {}",
                summary(&done)
            );
        }
        let msg = env.wait_event(NS, "asia", "NoEligibleCluster", T).await?;
        ensure!(
            msg.contains("region=asia") || msg.contains("selector"),
            "NoEligibleCluster message {msg:?}"
        );
        let asia = env.get_job(NS, "asia").await?;
        ensure!(
            placement(&asia).is_none(),
            "placed although nothing matches: {}",
            summary(&asia)
        );
        // Clusters change: w1 becomes region=asia, and the waiting Job is placed there.
        let wcs: Api<courier_api::WorkerCluster> = Api::all(env.mgmt_client.clone());
        wcs.patch(
            "w1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"region": "asia"}}})),
        )
        .await?;
        let done = env.wait_finished(NS, "asia", T).await?;
        ensure!(
            placement(&done).map(|p| p.0).as_deref() == Some("w1"),
            "{}",
            summary(&done)
        );
        Ok(())
    }
    .await;
    env.finish(r)
}

/// A mirror deleted behind Courier's back before the Job finished is re-dispatched with epoch 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_deleted_is_redispatched() -> anyhow::Result<()> {
    let mut env = env("redispatch").await?;
    let r = async {
        let created = env
            .create_job(NS, job("phoenix", &[("sim/run-seconds", "30")]))
            .await?;
        let uid = uid(&created)?;
        let running = env
            .wait_job(NS, "phoenix", "running", T, |j| active(j) >= 1)
            .await?;
        let (cluster, epoch) = placement(&running).context("no placement")?;
        ensure!(epoch == 1);
        let wi = env.worker_index(&cluster)?;
        env.worker_jobs(wi, NS)
            .delete("phoenix", &DeleteParams::background())
            .await?;
        let moved = env
            .wait_job(NS, "phoenix", "epoch 2", T, |j| {
                placement(j).map(|p| p.1) == Some(2)
            })
            .await?;
        env.wait_event(NS, "phoenix", "Redispatched", T).await?;
        // The placement (epoch 2) is written to the origin before the mirror is created
        // (write-ahead intent), so the new mirror may not exist yet when the origin shows it.
        let m = wait_for("the epoch-2 mirror", T, || async {
            current_mirror(&env, &moved)
                .await
                .map_err(|e| e.to_string())
        })
        .await?;
        ensure!(mirror_epoch(&m) == Some(2));
        let done = env.wait_finished(NS, "phoenix", T).await?;
        ensure!(finished(&done) == Some("Complete"), "{}", summary(&done));
        ensure!(placement(&done).map(|p| p.1) == Some(2));
        let mirrors = env.mirrors_of(&uid).await?;
        ensure!(
            mirrors.iter().all(|(_, m)| mirror_epoch(m) == Some(2)),
            "an epoch-1 mirror is still there"
        );
        ensure!(done.spec.as_ref().and_then(|s| s.managed_by.as_deref()) == Some(MANAGED_BY));
        Ok(())
    }
    .await;
    env.finish(r)
}
