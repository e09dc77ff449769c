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

mod crd;
mod gc;
mod job;
mod replay;

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
