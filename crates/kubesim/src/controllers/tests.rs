//! The controllers in-process against `Api` + `Store` (no HTTP), at 20–50x speed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::api::decode::decode_body;
use crate::api::{
    DeleteOpts, FieldValidation, ObjOut, Part, PatchKind, Registry, Served, WriteOpts,
};
use crate::errors::ApiError;
use crate::json::is_deleting;
use crate::kinds::testutil::{fixture, step};
use crate::store::{Event, EventType, Retention, Store};

pub(super) const JOBS: (&str, &str, &str) = ("batch", "v1", "jobs");
pub(super) const NAMESPACES: (&str, &str, &str) = ("", "v1", "namespaces");
pub(super) const CONFIGMAPS: (&str, &str, &str) = ("", "v1", "configmaps");
const SECRETS: (&str, &str, &str) = ("", "v1", "secrets");
const CRDS: (&str, &str, &str) = ("apiextensions.k8s.io", "v1", "customresourcedefinitions");
const WORKERCLUSTERS: (&str, &str, &str) = ("courier.dev", "v1alpha1", "workerclusters");

pub(super) type Gvr = (&'static str, &'static str, &'static str);

pub(super) struct Cluster {
    pub(super) api: Arc<Api>,
    shutdown: CancellationToken,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A fresh API server with the `default` namespace and the given controllers running.
pub(super) fn cluster(c: Controllers) -> Cluster {
    let api = Arc::new(Api::new(
        Arc::new(Store::new(Retention::default())),
        Registry::with_builtins(),
    ));
    create(
        &api,
        NAMESPACES,
        "",
        json!({"metadata": {"name": "default"}}),
    )
    .unwrap();
    let shutdown = CancellationToken::new();
    spawn(api.clone(), c, shutdown.clone());
    Cluster { api, shutdown }
}

pub(super) fn worker(speed: f64) -> Cluster {
    cluster(Controllers::for_role(Role::Worker).with_speed(speed))
}

pub(super) fn served(api: &Api, gvr: Gvr) -> Arc<Served> {
    api.registry
        .get(gvr.0, gvr.1, gvr.2)
        .unwrap_or_else(|| panic!("{gvr:?} not served"))
}

pub(super) fn value(api: &Api, s: &Served, o: &ObjOut) -> Value {
    match o {
        ObjOut::Stored(st) => api.served_value(s, st),
        ObjOut::Value(v) => v.clone(),
    }
}

pub(super) fn opts() -> WriteOpts {
    WriteOpts {
        manager: "test".into(),
        ..WriteOpts::default()
    }
}

/// POST as a client would: decode the body, then create.
pub(super) fn create(api: &Api, gvr: Gvr, ns: &str, body: Value) -> Result<Value, ApiError> {
    let s = served(api, gvr);
    let raw = serde_json::to_vec(&body).unwrap();
    let (obj, _) = decode_body(&s, &raw, FieldValidation::Strict)?;
    let w = api.create(&s, ns, obj, &opts())?;
    Ok(value(api, &s, &w.obj))
}

pub(super) fn get(api: &Api, gvr: Gvr, ns: &str, name: &str) -> Option<Value> {
    let s = api.registry.get(gvr.0, gvr.1, gvr.2)?;
    api.get(&s, ns, name)
        .ok()
        .map(|st| api.served_value(&s, &st))
}

pub(super) fn merge_patch(api: &Api, gvr: Gvr, ns: &str, name: &str, patch: Value) -> Value {
    let s = served(api, gvr);
    let raw = serde_json::to_vec(&patch).unwrap();
    let w = api
        .patch(&s, ns, name, PatchKind::Merge, &raw, Part::Main, &opts())
        .unwrap();
    value(api, &s, &w.obj)
}

pub(super) fn delete(api: &Api, gvr: Gvr, ns: &str, name: &str, propagation: Option<&str>) {
    let s = served(api, gvr);
    let d = DeleteOpts {
        propagation: propagation.map(str::to_string),
        ..DeleteOpts::default()
    };
    api.delete(&s, ns, name, &d).unwrap();
}

/// Polls `f` every 2 ms until it answers `Some`, failing the test after `timeout`.
pub(super) async fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

pub(super) const WAIT: Duration = Duration::from_secs(10);

/// A Job manifest: `spec` fields merged over a one-container template with `annotations`.
pub(super) fn job(name: &str, spec: Value, annotations: Value) -> Value {
    let mut j = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
            }
        }
    });
    for (k, v) in spec.as_object().unwrap() {
        j["spec"][k] = v.clone();
    }
    j
}

pub(super) fn cond<'a>(status: &'a Value, t: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t && c["status"] == "True")
}

pub(super) fn has(status: &Value, t: &str) -> bool {
    cond(status, t).is_some()
}

pub(super) fn n(status: &Value, k: &str) -> i64 {
    status[k].as_i64().unwrap_or(0)
}

/// Every event of a table from now on, read back when the test wants them.
pub(super) struct Log {
    rx: broadcast::Receiver<Arc<Event>>,
    seen: Vec<Arc<Event>>,
}

impl Log {
    pub(super) fn new(api: &Api, gvr: Gvr) -> Self {
        let table = served(api, gvr).table.clone();
        Self {
            rx: api.store.subscribe(&table),
            seen: Vec::new(),
        }
    }

    pub(super) fn events(&mut self, name: &str) -> Vec<Arc<Event>> {
        while let Ok(ev) = self.rx.try_recv() {
            self.seen.push(ev);
        }
        self.seen
            .iter()
            .filter(|e| e.obj.name() == name)
            .cloned()
            .collect()
    }

    /// The distinct `.status` values of `name`, in order.
    fn statuses(&mut self, name: &str) -> Vec<Value> {
        let mut out: Vec<Value> = Vec::new();
        for e in self.events(name) {
            if e.kind == EventType::Deleted {
                continue;
            }
            let s = e.obj.value().get("status").cloned().unwrap_or(json!({}));
            if out.last() != Some(&s) {
                out.push(s);
            }
        }
        out
    }
}

pub(super) async fn wait_job(
    api: &Api,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    eventually(&format!("job {name}: {what}"), WAIT, || {
        get(api, JOBS, "default", name).filter(|j| pred(&j["status"]))
    })
    .await
}

// ------------------------------------------------------------------------------------------------
// Roles.

#[test]
fn role_presets() {
    let w = Controllers::for_role(Role::Worker);
    assert!(w.job && w.ttl && w.gc && w.namespace && w.crd);
    let m = Controllers::for_role(Role::Management);
    assert!(!m.job && !m.ttl && m.gc && m.namespace && m.crd);
    let a = Controllers::for_role(Role::ApiServer);
    assert!(!a.job && !a.ttl && !a.gc && !a.namespace && a.crd);
    assert_eq!(w.speed, 1.0);
    assert_eq!(w.clone().with_speed(20.0).speed, 20.0);
    let n = Controllers::none();
    assert!(!n.job && !n.ttl && !n.gc && !n.namespace && !n.crd);
}

#[tokio::test]
async fn api_server_role_runs_no_controller_manager() {
    let c = cluster(Controllers::for_role(Role::ApiServer).with_speed(50.0));
    let api = &c.api;
    let created = create(api, JOBS, "default", job("j", json!({}), json!({}))).unwrap();
    create(api, NAMESPACES, "", json!({"metadata": {"name": "gone"}})).unwrap();
    delete(api, NAMESPACES, "", "gone", None);
    // The CRD controller runs (it is part of the API server)...
    let crd = step(&fixture("crd.json"), "create CRD")["request"]["body"].clone();
    create(api, CRDS, "", crd).unwrap();
    eventually("CRD served", WAIT, || {
        api.registry
            .get("courier.dev", "v1alpha1", "workerclusters")
    })
    .await;
    // ...nothing else: 10 s of model time later the Job has no status and the namespace stays.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let j = get(api, JOBS, "default", "j").unwrap();
    assert_eq!(j["status"], json!({}));
    assert_eq!(
        j["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let ns = get(api, NAMESPACES, "", "gone").expect("no namespace controller");
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert!(ns["status"].get("conditions").is_none());
}

// ------------------------------------------------------------------------------------------------
// Job controller.

#[tokio::test]
async fn job_runs_to_completion_in_two_phase_writes() {
    let c = worker(50.0);
    let api = &c.api;
    let mut log = Log::new(api, JOBS);
    create(
        api,
        JOBS,
        "default",
        job(
            "ok",
            json!({"completions": 2, "parallelism": 2}),
            json!({"sim/run-seconds": "1"}),
        ),
    )
    .unwrap();
    let done = wait_job(api, "ok", "Complete", |s| has(s, "Complete")).await;
    let st = &done["status"];
    assert_eq!(n(st, "succeeded"), 2);
    assert_eq!(n(st, "active"), 0);
    assert_eq!(
        (st["ready"].clone(), st["terminating"].clone()),
        (json!(0), json!(0))
    );
    assert!(st["startTime"].is_string() && st["completionTime"].is_string());
    assert_eq!(
        cond(st, "Complete").unwrap()["reason"],
        "CompletionsReached"
    );
    let states = log.statuses("ok");
    assert_eq!(states[0], json!({}), "created with an empty status");
    assert!(
        states
            .iter()
            .any(|s| n(s, "active") == 2 && n(s, "ready") == 0)
    );
    assert!(
        states
            .iter()
            .any(|s| n(s, "active") == 2 && n(s, "ready") == 2)
    );
    // Two-phase: finished pods first as uncounted UIDs, with SuccessCriteriaMet before Complete.
    let uncounted = states
        .iter()
        .position(|s| {
            s["uncountedTerminatedPods"]["succeeded"]
                .as_array()
                .is_some_and(|a| a.len() == 2)
        })
        .expect("uncounted succeeded pods");
    assert_eq!(n(&states[uncounted], "succeeded"), 0);
    assert!(has(&states[uncounted], "SuccessCriteriaMet"));
    assert!(!has(&states[uncounted], "Complete"));
    assert_eq!(states.last().unwrap(), st);
    // Written by the controller manager through /status.
    let mf = done["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        mf.iter()
            .any(|m| m["manager"] == CONTROLLER_MANAGER && m["subresource"] == "status"),
        "{mf:?}"
    );
}

#[tokio::test]
async fn backoff_limit_fails_the_job() {
    let c = worker(50.0);
    let api = &c.api;
    let mut log = Log::new(api, JOBS);
    create(
        api,
        JOBS,
        "default",
        job(
            "bad",
            json!({"backoffLimit": 1}),
            json!({"sim/outcome": "fail:3", "sim/run-seconds": "0.5"}),
        ),
    )
    .unwrap();
    let done = wait_job(api, "bad", "Failed", |s| has(s, "Failed")).await;
    let st = &done["status"];
    assert_eq!(n(st, "failed"), 2);
    assert_eq!(
        cond(st, "Failed").unwrap()["reason"],
        "BackoffLimitExceeded"
    );
    assert_eq!(
        cond(st, "FailureTarget").unwrap()["message"],
        "Job has reached the specified backoff limit"
    );
    assert!(st.get("completionTime").is_none());
    let states = log.statuses("bad");
    let ft = states.iter().position(|s| has(s, "FailureTarget")).unwrap();
    assert!(!has(&states[ft], "Failed"), "FailureTarget precedes Failed");
    // The first failure was counted (failed=1) while a replacement was still to come.
    assert!(
        states
            .iter()
            .any(|s| n(s, "failed") == 1 && !has(s, "FailureTarget"))
    );
}

#[tokio::test]
async fn indexed_job_with_success_policy() {
    let c = worker(50.0);
    let api = &c.api;
    let mut log = Log::new(api, JOBS);
    create(
        api,
        JOBS,
        "default",
        job(
            "idx",
            json!({
                "completionMode": "Indexed", "completions": 4, "parallelism": 4,
                "successPolicy": {"rules": [{"succeededCount": 2}]}
            }),
            json!({"sim/plan": r#"{"i0": "succeed@1", "i1": "succeed@2", "i2": "hang", "i3": "hang"}"#}),
        ),
    )
    .unwrap();
    let done = wait_job(api, "idx", "Complete", |s| has(s, "Complete")).await;
    let st = &done["status"];
    assert_eq!(st["completedIndexes"], "0,1");
    assert_eq!(n(st, "succeeded"), 2);
    assert_eq!(n(st, "failed"), 0, "cut-off pods are not counted");
    assert_eq!(cond(st, "Complete").unwrap()["reason"], "SuccessPolicy");
    let states = log.statuses("idx");
    let scm = states
        .iter()
        .find(|s| has(s, "SuccessCriteriaMet"))
        .unwrap();
    assert_eq!(
        n(scm, "terminating"),
        2,
        "the other indexes are deleted: {scm}"
    );
    assert!(!has(scm, "Complete"));
}

#[tokio::test]
async fn suspend_and_resume_through_patches() {
    let c = worker(50.0);
    let api = &c.api;
    create(
        api,
        JOBS,
        "default",
        job(
            "s",
            json!({"suspend": true}),
            json!({"sim/run-seconds": "1"}),
        ),
    )
    .unwrap();
    let j = wait_job(api, "s", "Suspended", |s| has(s, "Suspended")).await;
    assert_eq!(
        cond(&j["status"], "Suspended").unwrap()["reason"],
        "JobSuspended"
    );
    assert!(j["status"].get("startTime").is_none());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        n(&get(api, JOBS, "default", "s").unwrap()["status"], "active"),
        0
    );
    merge_patch(
        api,
        JOBS,
        "default",
        "s",
        json!({"spec": {"suspend": false}}),
    );
    let j = wait_job(api, "s", "resumed", |s| n(s, "active") == 1).await;
    let resumed = j["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Suspended")
        .unwrap();
    assert_eq!(
        (resumed["status"].as_str(), resumed["reason"].as_str()),
        (Some("False"), Some("JobResumed"))
    );
    assert!(j["status"]["startTime"].is_string());
    wait_job(api, "s", "Complete", |s| has(s, "Complete")).await;
}

#[tokio::test]
async fn parallelism_scale_down_deletes_pods_without_counting_them() {
    let c = worker(20.0);
    let api = &c.api;
    let mut log = Log::new(api, JOBS);
    create(
        api,
        JOBS,
        "default",
        job(
            "p",
            json!({"completions": 3, "parallelism": 3}),
            json!({"sim/run-seconds": "4"}),
        ),
    )
    .unwrap();
    wait_job(api, "p", "3 ready", |s| n(s, "ready") == 3).await;
    merge_patch(
        api,
        JOBS,
        "default",
        "p",
        json!({"spec": {"parallelism": 1}}),
    );
    wait_job(api, "p", "scaled down", |s| {
        n(s, "active") == 1 && n(s, "terminating") == 2
    })
    .await;
    let done = wait_job(api, "p", "Complete", |s| has(s, "Complete")).await;
    assert_eq!(n(&done["status"], "succeeded"), 3);
    assert_eq!(n(&done["status"], "failed"), 0);
    assert!(
        log.statuses("p")
            .iter()
            .all(|s| n(s, "active") <= 3 && n(s, "failed") == 0)
    );
}

#[tokio::test]
async fn managed_by_jobs_are_left_alone() {
    let c = worker(50.0);
    let api = &c.api;
    let created = create(
        api,
        JOBS,
        "default",
        job(
            "mine",
            json!({"managedBy": "courier.dev/dispatcher"}),
            json!({}),
        ),
    )
    .unwrap();
    create(
        api,
        JOBS,
        "default",
        job("theirs", json!({}), json!({"sim/run-seconds": "1"})),
    )
    .unwrap();
    // The controller is running: the ordinary Job finishes...
    wait_job(api, "theirs", "Complete", |s| has(s, "Complete")).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // ...while the managedBy one was never written to.
    let j = get(api, JOBS, "default", "mine").unwrap();
    assert_eq!(j["status"], json!({}));
    assert_eq!(
        j["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn ttl_deletes_finished_jobs_in_the_foreground() {
    let c = worker(50.0);
    let api = &c.api;
    let mut log = Log::new(api, JOBS);
    create(
        api,
        JOBS,
        "default",
        job(
            "ttl",
            json!({"ttlSecondsAfterFinished": 2}),
            json!({"sim/run-seconds": "1"}),
        ),
    )
    .unwrap();
    // A managedBy Job finished by its own controller (here: the test) is deleted too.
    create(
        api,
        JOBS,
        "default",
        job(
            "ext",
            json!({"managedBy": "courier.dev/dispatcher", "ttlSecondsAfterFinished": 1}),
            json!({}),
        ),
    )
    .unwrap();
    finish(api, "ext");
    eventually("both Jobs deleted", WAIT, || {
        (get(api, JOBS, "default", "ttl").is_none() && get(api, JOBS, "default", "ext").is_none())
            .then_some(())
    })
    .await;
    for name in ["ttl", "ext"] {
        let evs = log.events(name);
        let deleting = evs
            .iter()
            .find(|e| e.kind == EventType::Modified && is_deleting(&e.obj.value()))
            .unwrap_or_else(|| panic!("{name}: no deletionTimestamp before DELETED"));
        let v = &deleting.obj.value();
        assert_eq!(
            v["metadata"]["finalizers"],
            json!(["foregroundDeletion"]),
            "{name}"
        );
        assert_eq!(v["metadata"]["generation"], 2, "{name}");
        assert!(has(&v["status"], "Complete"), "{name}: finished first");
        assert_eq!(evs.last().unwrap().kind, EventType::Deleted, "{name}");
    }
}

/// A finished status as Courier copies it onto an origin Job.
fn finish(api: &Api, name: &str) {
    let s = served(api, JOBS);
    let mut j = get(api, JOBS, "default", name).unwrap();
    let now = crate::time::now_string();
    j["status"] = json!({
        "startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "m", "lastTransitionTime": now, "lastProbeTime": now},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "m", "lastTransitionTime": now, "lastProbeTime": now}
        ]
    });
    api.update(&s, "default", name, j, Part::Status, &opts())
        .unwrap();
}

#[tokio::test]
async fn management_cluster_runs_no_job_controller_but_gc() {
    let c = cluster(Controllers::for_role(Role::Management).with_speed(50.0));
    let api = &c.api;
    let origin = json!({"managedBy": "courier.dev/dispatcher"});
    create(api, JOBS, "default", job("origin", origin, json!({}))).unwrap();
    create(api, JOBS, "default", job("plain", json!({}), json!({}))).unwrap();
    finish(api, "origin");
    // Foreground deletion of a Job: no simulated pods here, so the gc lets it go at once.
    delete(api, JOBS, "default", "origin", Some("Foreground"));
    eventually("origin gone", WAIT, || {
        get(api, JOBS, "default", "origin").is_none().then_some(())
    })
    .await;
    assert_eq!(
        get(api, JOBS, "default", "plain").unwrap()["status"],
        json!({})
    );
}

// ------------------------------------------------------------------------------------------------
// Garbage collector.

#[tokio::test]
async fn gc_removes_orphan_and_foreground_finalizers() {
    let c = worker(20.0);
    let api = &c.api;
    for (name, policy) in [("orphaned", "Orphan"), ("fg", "Foreground")] {
        create(
            api,
            CONFIGMAPS,
            "default",
            json!({"metadata": {"name": name}}),
        )
        .unwrap();
        delete(api, CONFIGMAPS, "default", name, Some(policy));
    }
    // Jobs default to Orphan.
    create(
        api,
        JOBS,
        "default",
        job("orphan-job", json!({}), json!({"sim/outcome": "hang"})),
    )
    .unwrap();
    wait_job(api, "orphan-job", "running", |s| n(s, "ready") == 1).await;
    delete(api, JOBS, "default", "orphan-job", None);
    // A running Job deleted in the foreground waits for its pods (2 s to terminate).
    create(
        api,
        JOBS,
        "default",
        job(
            "fg-job",
            json!({}),
            json!({"sim/outcome": "hang", "sim/term-seconds": "2"}),
        ),
    )
    .unwrap();
    wait_job(api, "fg-job", "running", |s| n(s, "ready") == 1).await;
    let t0 = tokio::time::Instant::now();
    delete(api, JOBS, "default", "fg-job", Some("Foreground"));
    eventually("configmaps and the orphaned Job gone", WAIT, || {
        (get(api, CONFIGMAPS, "default", "orphaned").is_none()
            && get(api, CONFIGMAPS, "default", "fg").is_none()
            && get(api, JOBS, "default", "orphan-job").is_none())
        .then_some(())
    })
    .await;
    let j = get(api, JOBS, "default", "fg-job").expect("held while its pods terminate");
    assert_eq!(j["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    eventually("fg-job gone", WAIT, || {
        get(api, JOBS, "default", "fg-job").is_none().then_some(())
    })
    .await;
    // 2 s of pod termination at 20x.
    assert!(
        t0.elapsed() >= Duration::from_millis(90),
        "{:?}",
        t0.elapsed()
    );
}

#[tokio::test]
async fn without_gc_finalizers_stay() {
    let c = cluster(Controllers {
        gc: false,
        ..Controllers::for_role(Role::Worker).with_speed(50.0)
    });
    let api = &c.api;
    create(
        api,
        CONFIGMAPS,
        "default",
        json!({"metadata": {"name": "cm"}}),
    )
    .unwrap();
    delete(api, CONFIGMAPS, "default", "cm", Some("Foreground"));
    create(
        api,
        JOBS,
        "default",
        job("j", json!({}), json!({"sim/run-seconds": "1"})),
    )
    .unwrap();
    wait_job(api, "j", "Complete", |s| has(s, "Complete")).await;
    delete(api, JOBS, "default", "j", None);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let cm = get(api, CONFIGMAPS, "default", "cm").unwrap();
    assert_eq!(cm["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    let j = get(api, JOBS, "default", "j").unwrap();
    assert_eq!(j["metadata"]["finalizers"], json!(["orphan"]));
}

// ------------------------------------------------------------------------------------------------
// Namespace controller.

#[tokio::test]
async fn namespace_deletion_cascades() {
    let c = worker(50.0);
    let api = &c.api;
    let mut log = Log::new(api, NAMESPACES);
    create(api, NAMESPACES, "", json!({"metadata": {"name": "team"}})).unwrap();
    create(api, CONFIGMAPS, "team", json!({"metadata": {"name": "a"}})).unwrap();
    create(
        api,
        CONFIGMAPS,
        "team",
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .unwrap();
    create(
        api,
        SECRETS,
        "team",
        json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}}),
    )
    .unwrap();
    create(
        api,
        JOBS,
        "team",
        job("run", json!({}), json!({"sim/outcome": "hang"})),
    )
    .unwrap();
    create(
        api,
        CONFIGMAPS,
        "default",
        json!({"metadata": {"name": "elsewhere"}}),
    )
    .unwrap();
    eventually("job running", WAIT, || {
        get(api, JOBS, "team", "run").filter(|j| n(&j["status"], "ready") == 1)
    })
    .await;

    delete(api, NAMESPACES, "", "team", None);
    // The Job's pod terminates (its grace period) before only the held ConfigMap is left.
    let ns = eventually("content remaining reported", WAIT, || {
        get(api, NAMESPACES, "", "team").filter(|ns| {
            cond(&ns["status"], "NamespaceContentRemaining").is_some_and(|c| {
                c["message"] == "Some resources are remaining: configmaps. has 1 resource instances"
            })
        })
    })
    .await;
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert_eq!(
        cond(&ns["status"], "NamespaceContentRemaining").unwrap()["message"],
        "Some resources are remaining: configmaps. has 1 resource instances"
    );
    assert_eq!(
        cond(&ns["status"], "NamespaceFinalizersRemaining").unwrap()["message"],
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    );
    let types: Vec<&str> = ns["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types.len(), 5, "{types:?}");
    assert!(get(api, CONFIGMAPS, "team", "a").is_none());
    assert!(get(api, SECRETS, "team", "s").is_none());
    assert!(get(api, JOBS, "team", "run").is_none());
    assert!(get(api, CONFIGMAPS, "default", "elsewhere").is_some());
    // Nothing new may be created meanwhile.
    let e = create(
        api,
        CONFIGMAPS,
        "team",
        json!({"metadata": {"name": "late"}}),
    )
    .unwrap_err();
    assert_eq!(e.code, 403);
    // Releasing the last object lets the namespace go.
    merge_patch(
        api,
        CONFIGMAPS,
        "team",
        "held",
        json!({"metadata": {"finalizers": null}}),
    );
    eventually("namespace gone", WAIT, || {
        get(api, NAMESPACES, "", "team").is_none().then_some(())
    })
    .await;
    let evs = log.events("team");
    assert_eq!(evs.last().unwrap().kind, EventType::Deleted);
    // The last state before removal had every condition in its "ok" form.
    let last = &evs[evs.len() - 2].obj.value();
    assert!(
        last["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] == "False"),
        "{last}"
    );
    assert_eq!(
        last["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["manager"] == CONTROLLER_MANAGER)
            .count(),
        1
    );
}

// ------------------------------------------------------------------------------------------------
// CRD controllers.

#[tokio::test]
async fn crd_lifecycle() {
    let c = cluster(Controllers::for_role(Role::Management));
    let api = &c.api;
    let f = fixture("crd.json");
    let mut log = Log::new(api, CRDS);
    let t0 = tokio::time::Instant::now();
    create(
        api,
        CRDS,
        "",
        step(&f, "create CRD")["request"]["body"].clone(),
    )
    .unwrap();
    let crd = eventually("Established", WAIT, || {
        get(api, CRDS, "", "workerclusters.courier.dev").filter(crate::kinds::crd::is_established)
    })
    .await;
    let wc = api
        .registry
        .get("courier.dev", "v1alpha1", "workerclusters")
        .expect("served once Established");
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    // Served as the CRD says: cluster-scoped, short names, the /status subresource.
    assert_eq!(
        crd["spec"]["versions"][0]["subresources"],
        json!({"status": {}})
    );
    assert!(wc.info().status_subresource);
    assert!(!wc.info().namespaced);
    assert_eq!(wc.info().short_names, ["wc"]);
    let want = &step(&f, "wait until Established")["response"]["body"];
    let strip = |s: &Value| {
        let mut s = s.clone();
        for c in s["conditions"].as_array_mut().unwrap() {
            c["lastTransitionTime"] = json!("<time>");
        }
        s
    };
    assert_eq!(strip(&crd["status"]), want["status"]);
    let mut managers: Vec<(String, String)> = crd["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["manager"].as_str().unwrap().to_string(),
                m["subresource"].to_string(),
            )
        })
        .collect();
    managers.sort();
    assert_eq!(
        managers,
        [
            (APISERVER.to_string(), "\"status\"".to_string()),
            ("test".to_string(), "null".to_string())
        ]
    );
    // One status write: created, then Established (as the recording's <rv:2>).
    assert_eq!(
        log.events("workerclusters.courier.dev")
            .iter()
            .map(|e| e.kind)
            .collect::<Vec<_>>(),
        [EventType::Added, EventType::Modified]
    );

    let body = |name: &str, fins: Value| {
        json!({"apiVersion": "courier.dev/v1alpha1", "kind": "WorkerCluster",
               "metadata": {"name": name, "finalizers": fins},
               "spec": {"kubeconfigSecretRef": {"name": "k", "namespace": "courier-system"}}})
    };
    let mut with_status = body("w1", json!([]));
    with_status["status"] = json!({"phase": "Ready"});
    let w1 = create(api, WORKERCLUSTERS, "", with_status).unwrap();
    assert!(
        w1.get("status").is_none(),
        "status is dropped on create: {w1}"
    );
    let mut st = w1.clone();
    st["status"] = json!({"phase": "Ready"});
    api.update(&wc, "", "w1", st, Part::Status, &opts())
        .unwrap();
    assert_eq!(
        get(api, WORKERCLUSTERS, "", "w1").unwrap()["status"]["phase"],
        "Ready"
    );
    assert_eq!(
        w1["spec"]["kubeconfigSecretRef"]["key"], "kubeconfig",
        "schema defaults"
    );
    create(
        api,
        WORKERCLUSTERS,
        "",
        body("w2", json!(["example.com/keep"])),
    )
    .unwrap();

    delete(api, CRDS, "", "workerclusters.courier.dev", None);
    let w2 = eventually("w1 deleted, w2 held", WAIT, || {
        (get(api, WORKERCLUSTERS, "", "w1").is_none())
            .then(|| get(api, WORKERCLUSTERS, "", "w2"))
            .flatten()
    })
    .await;
    assert!(is_deleting(&w2));
    let crd = get(api, CRDS, "", "workerclusters.courier.dev").expect("held by w2");
    let terminating = cond(&crd["status"], "Terminating").unwrap();
    assert_eq!(terminating["reason"], "InstanceDeletionInProgress");
    assert!(
        api.registry
            .get("courier.dev", "v1alpha1", "workerclusters")
            .is_some()
    );
    merge_patch(
        api,
        WORKERCLUSTERS,
        "",
        "w2",
        json!({"metadata": {"finalizers": null}}),
    );
    eventually("CRD gone", WAIT, || {
        get(api, CRDS, "", "workerclusters.courier.dev")
            .is_none()
            .then_some(())
    })
    .await;
    // Gone means no longer served, at once.
    assert!(
        api.registry
            .get("courier.dev", "v1alpha1", "workerclusters")
            .is_none()
    );
    let last = log.events("workerclusters.courier.dev");
    let before_gone = &last[last.len() - 2].obj.value();
    assert_eq!(before_gone["metadata"]["finalizers"], json!([CLEANUP]));
    let deleted = &last[last.len() - 1];
    assert_eq!(deleted.kind, EventType::Deleted);
    // The finishing status write empties the finalizers, so the object is deleted during that update
    // and the DELETED event carries the last *stored* state, as etcd-backed watches do.
    assert_eq!(
        cond(&deleted.obj.value()["status"], "Terminating").unwrap()["reason"],
        "InstanceDeletionInProgress"
    );

    // Re-created, it is served again.
    create(
        api,
        CRDS,
        "",
        step(&f, "create CRD")["request"]["body"].clone(),
    )
    .unwrap();
    eventually("served again", WAIT, || {
        api.registry
            .get("courier.dev", "v1alpha1", "workerclusters")
    })
    .await;
    assert!(get(api, WORKERCLUSTERS, "", "w2").is_none());
}

const CLEANUP: &str = crate::kinds::crd::CLEANUP_FINALIZER;

#[tokio::test]
async fn conflicting_crd_names_wait_until_free() {
    let c = cluster(Controllers::for_role(Role::ApiServer));
    let api = &c.api;
    let f = fixture("crd.json");
    let first = step(&f, "create CRD")["request"]["body"].clone();
    create(api, CRDS, "", first).unwrap();
    eventually("first established", WAIT, || {
        get(api, CRDS, "", "workerclusters.courier.dev").filter(crate::kinds::crd::is_established)
    })
    .await;
    let mut second = step(&f, "create CRD")["request"]["body"].clone();
    second["metadata"]["name"] = json!("others.courier.dev");
    second["spec"]["names"]["plural"] = json!("others");
    second["spec"]["names"]["singular"] = json!("other");
    second["spec"]["names"]["shortNames"] = json!([]);
    create(api, CRDS, "", second).unwrap();
    let o = eventually("second judged", WAIT, || {
        get(api, CRDS, "", "others.courier.dev").filter(|c| {
            c["status"]["conditions"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        })
    })
    .await;
    let names = o["status"]["conditions"].as_array().unwrap();
    assert_eq!(names[0]["reason"], "ListKindConflict", "{names:?}");
    assert!(
        api.registry
            .get("courier.dev", "v1alpha1", "others")
            .is_none()
    );
    delete(api, CRDS, "", "workerclusters.courier.dev", None);
    eventually("second established once the kind is free", WAIT, || {
        get(api, CRDS, "", "others.courier.dev").filter(crate::kinds::crd::is_established)
    })
    .await;
    assert!(
        api.registry
            .get("courier.dev", "v1alpha1", "others")
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_jobs_run_on_one_timer_wheel() {
    const N: usize = 200;
    let c = worker(20.0);
    let api = &c.api;
    for i in 0..N {
        let name = format!("j{i}");
        let ann = json!({"sim/run-seconds": format!("{}", 1 + i % 3)});
        create(api, JOBS, "default", job(&name, json!({}), ann)).unwrap();
    }
    let s = served(api, JOBS);
    // Each Job also makes a Pod object and its status writes: a loaded machine needs the margin.
    eventually("every Job complete", Duration::from_secs(30), || {
        let page = api.list(&s, Some("default"), &Default::default()).unwrap();
        let done = page
            .items
            .iter()
            .filter(|st| {
                has(&st.value()["status"], "Complete") && n(&st.value()["status"], "succeeded") == 1
            })
            .count();
        (done == N).then_some(())
    })
    .await;
}

// ------------------------------------------------------------------------------------------------
// Resynchronisation.

#[tokio::test]
async fn controllers_resync_after_watches_are_dropped() {
    let c = worker(20.0);
    let api = &c.api;
    create(
        api,
        JOBS,
        "default",
        job("a", json!({}), json!({"sim/run-seconds": "2"})),
    )
    .unwrap();
    wait_job(api, "a", "running", |s| n(s, "active") == 1).await;
    api.store.drop_watches();
    create(
        api,
        JOBS,
        "default",
        job("b", json!({}), json!({"sim/run-seconds": "1"})),
    )
    .unwrap();
    api.store.drop_watches();
    wait_job(api, "a", "Complete", |s| has(s, "Complete")).await;
    wait_job(api, "b", "Complete", |s| has(s, "Complete")).await;
    create(api, NAMESPACES, "", json!({"metadata": {"name": "later"}})).unwrap();
    api.store.drop_watches();
    delete(api, NAMESPACES, "", "later", None);
    eventually("namespace gone", WAIT, || {
        get(api, NAMESPACES, "", "later").is_none().then_some(())
    })
    .await;
}

// ------------------------------------------------------------------------------------------------
// The recorded Job traces, through the Api and the controllers.

const REPLAY_SPEED: f64 = 10.0;

/// Pod names -> the recorder's labels (`p1`, `p2[i0]`...), for condition messages.
fn pod_labels(job: &Value) -> HashMap<String, String> {
    let name = job["metadata"]["name"].as_str().unwrap();
    let uid = job["metadata"]["uid"].as_str().unwrap();
    let mut out = HashMap::new();
    for ordinal in 0..64u32 {
        out.insert(
            crate::jobctl::pod_name(name, uid, ordinal, None),
            format!("p{}", ordinal + 1),
        );
        for i in 0..8 {
            out.insert(
                crate::jobctl::pod_name(name, uid, ordinal, Some(i)),
                format!("p{}[i{i}]", ordinal + 1),
            );
        }
    }
    out
}

/// Waits until the wall clock sits at fraction `phase` of the simulator's 1/speed timestamp grid,
/// the creation phase the recording's timestamps allow (see `jobctl::traces`).
async fn align_to_phase(phase: f64, speed: f64) {
    let grid = 1e9 / speed;
    let now = jiff::Timestamp::now().as_nanosecond() as f64;
    let at = (now / grid).fract();
    let wait = (phase - at).rem_euclid(1.0) * grid;
    tokio::time::sleep(Duration::from_nanos(wait as u64)).await;
}

/// One scenario's Job events as they arrive, stamped with the model time of their arrival.
struct Stamped {
    rx: broadcast::Receiver<Arc<Event>>,
    start: tokio::time::Instant,
    t0: f64,
    seen: Vec<(f64, Arc<Event>)>,
}

impl Stamped {
    fn poll(&mut self) {
        while let Ok(ev) = self.rx.try_recv() {
            let t = self.t0 + self.start.elapsed().as_secs_f64() * REPLAY_SPEED;
            self.seen.push((t, ev));
        }
    }

    /// Distinct normalized states so far (DELETED left out, as in the recordings).
    fn states(&self, names: &HashMap<String, String>) -> Vec<crate::jobctl::traces::State> {
        crate::jobctl::traces::fold(
            self.seen
                .iter()
                .filter(|(_, e)| e.kind != EventType::Deleted)
                .map(|(t, e)| {
                    let status = e.obj.value().get("status").cloned().unwrap_or(json!({}));
                    crate::jobctl::traces::State {
                        t: *t,
                        state: crate::jobctl::traces::normalize(&status, names),
                        raw: status,
                    }
                }),
        )
    }

    /// Polls until `n` distinct states were seen; the model time the `n`-th arrived.
    async fn until_states(
        &mut self,
        n: usize,
        names: &HashMap<String, String>,
        deadline: tokio::time::Instant,
    ) -> Option<f64> {
        loop {
            self.poll();
            if let Some(s) = self.states(names).get(n.saturating_sub(1)) {
                return Some(s.t);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Replays one recorded scenario: the Job as submitted, created through the Api on a worker; each
/// recorded test action (a spec patch) applied at its recorded offset from the state the recording
/// showed just before it (anchoring to the simulation's progress rather than to the wall clock, so a
/// scheduler hiccup on a loaded machine cannot move an action across a state change).
async fn replay(sc: &crate::jobctl::traces::Scenario) -> Result<(), String> {
    use crate::jobctl::traces::{describe, phase_bounds, recorded};
    let c = worker(REPLAY_SPEED);
    let api = &c.api;
    let want = recorded(sc);
    let t0 = sc.events[0]["t"].as_f64().unwrap();
    let model = |secs: f64| Duration::from_secs_f64(secs.max(0.0) / REPLAY_SPEED);
    let (lo, hi) = phase_bounds(sc);
    let rx = api.store.subscribe(&served(api, JOBS).table);
    align_to_phase((lo + hi) / 2.0 + t0, REPLAY_SPEED).await;
    let start = tokio::time::Instant::now();
    let mut log = Stamped {
        rx,
        start,
        t0,
        seen: Vec::new(),
    };
    let created = create(api, JOBS, "default", sc.inputs["job"].clone())
        .map_err(|e| format!("{}: create: {}", sc.name, e.message))?;
    let names = pod_labels(&created);
    let deadline = start + model(want.last().unwrap().t - t0) + WAIT;
    let differ = |log: &Stamped, why: &str| {
        format!(
            "{}: {why}\nrecorded:\n{}through the Api:\n{}",
            sc.name,
            describe(&want),
            describe(&log.states(&names))
        )
    };
    for a in sc.inputs["actions"].as_array().unwrap() {
        let at = a["t"].as_f64().unwrap();
        let anchor = want.iter().rposition(|s| s.t <= at).unwrap_or(0);
        let Some(seen_at) = log.until_states(anchor + 1, &names, deadline).await else {
            return Err(differ(&log, "the state before a test action never came"));
        };
        let due = start + model(seen_at - t0 + (at - want[anchor].t));
        tokio::time::sleep_until(due).await;
        merge_patch(api, JOBS, "default", "job", a["patch"].clone());
    }
    if log
        .until_states(want.len(), &names, deadline)
        .await
        .is_none()
    {
        return Err(differ(&log, "states missing"));
    }
    // A little longer, for states the recording does not have.
    tokio::time::sleep(model(3.0)).await;
    let ttl = sc.events.iter().any(|e| e["type"] == "DELETED");
    if ttl {
        eventually(&format!("{}: TTL deletion", sc.name), WAIT, || {
            get(api, JOBS, "default", "job").is_none().then_some(())
        })
        .await;
    }
    log.poll();
    let got = log.states(&names);
    let same = got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| a.state == b.state);
    if !same {
        return Err(differ(&log, "states differ"));
    }
    if ttl {
        let deleting = log
            .seen
            .iter()
            .map(|(_, e)| e)
            .find(|e| is_deleting(&e.obj.value()))
            .ok_or_else(|| format!("{}: no deletionTimestamp", sc.name))?;
        let m = &deleting.obj.value()["metadata"];
        if m["finalizers"] != json!(["foregroundDeletion"]) || m["generation"] != 2 {
            return Err(format!("{}: TTL deletion shape: {m}", sc.name));
        }
        if log.seen.last().map(|(_, e)| e.kind) != Some(EventType::Deleted) {
            return Err(format!("{}: not DELETED at the end", sc.name));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recorded_trace_is_reproduced_through_the_api() {
    let all = crate::jobctl::traces::scenarios();
    assert!(all.len() >= 15, "found {} scenarios", all.len());
    // Each scenario on its own cluster, all at once.
    let results = futures::future::join_all(all.iter().map(replay)).await;
    // Simulated time is the wall clock: on a machine shared with other builds a thread can stall
    // for longer than the margin (0.5 model s = 50 ms) between a test action and the state before
    // it. A scenario that differs is run once more, alone; a real difference fails both times.
    let mut failures = Vec::new();
    for (sc, r) in all.iter().zip(results) {
        if let Err(first) = r {
            eprintln!("retrying {} after:\n{first}", sc.name);
            if let Err(e) = replay(sc).await {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
