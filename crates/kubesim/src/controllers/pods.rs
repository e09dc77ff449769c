//! The Pod objects of a Job's simulated pods: the Job controller's, the kubelet's and the garbage
//! collector's writes, made through the request flow (so they are validated, watched and listed
//! like any client's). `jobctl::JobSim` stays the model; this module projects its pods onto objects
//! after every step of the simulation, before the Job status write that reflects them:
//!
//! | when the simulated pod ... | write | as |
//! |---|---|---|
//! | is created | `POST pods` (shape in `podshape`) | `kube-controller-manager` (job controller) |
//! | changes state | `PUT pods/<p>/status` | `kubelet` |
//! | is deleted by the controller or the GC | `DELETE` (graceful, the pod's grace period) | `kube-controller-manager` |
//! | loses its tracking finalizer | `PUT pods/<p>` without `batch.kubernetes.io/job-tracking` | `kube-controller-manager` |
//! | is orphaned (Job deleted with Orphan propagation) | `PUT pods/<p>` without ownerReferences | `kube-controller-manager` (GC) |
//! | has stopped and is removed | `DELETE` with `gracePeriodSeconds: 0` | `kubelet` |
//!
//! A pod object deleted by someone else is deleted in the model too (`JobSim::delete_pod`); a pod
//! object that cannot be created (a quota, a policy) is logged and left out of the model's
//! projection (the model still counts it).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;

use super::podshape::{new_pod, pod_status, same_status_inputs};
use super::{
    CONTROLLER_MANAGER, debug_assert_decodes_to_itself, decoded, obj_key, status_over, write_opts,
};
use crate::api::{Api, DeleteOpts, ObjOut, Part, Served};
use crate::jobctl::{JobSim, PodInfo};
use crate::json::meta_str;
use crate::kinds::pod::TRACKING_FINALIZER;
use crate::store::Stored;

/// Field manager of the simulated kubelet's status writes.
pub const KUBELET: &str = "kubelet";
const CONFLICT_RETRIES: usize = 8;

/// What the host knows of one pod object.
#[derive(Debug, Clone)]
struct Known {
    name: String,
    /// The last status written.
    status: Value,
    /// The object version and the model's pod that `status` was last derived from: while neither
    /// changed (the pod in what `pod_status` reads of it, see `same_status_inputs`), deriving it
    /// again gives the same status, so the object is not read again.
    derived: Option<(u64, PodInfo)>,
    finalizer: bool,
    owned: bool,
    delete_sent: bool,
    /// The object could not be created, or vanished: nothing more is written for it.
    dead: bool,
}

/// The objects of one Job's pods.
#[derive(Debug, Default)]
pub(super) struct PodObjects {
    known: HashMap<String, Known>,
}

/// Where pod objects are written.
pub(super) struct PodCtx<'a> {
    pub api: &'a Api,
    pub served: &'a Served,
}

fn uid_of(w: &ObjOut) -> String {
    match w {
        ObjOut::Stored(st) => st.uid().to_string(),
        ObjOut::Value(v) => meta_str(v, "uid").to_string(),
    }
}

impl PodObjects {
    /// Brings the objects in line with the simulation (see the module table): `job` as stored in
    /// namespace `ns`.
    pub(super) fn sync(
        &mut self,
        cx: &PodCtx<'_>,
        ns: &str,
        job: &Value,
        sim: &mut JobSim,
        now: Timestamp,
    ) {
        let orphaned = sim.job_gone && sim.spec.orphaning;
        let mut present = HashSet::new();
        for mut info in sim.pods() {
            if !self.known.contains_key(&info.uid) {
                match self.create(cx, job, ns, &info) {
                    Some(uid) => {
                        sim.set_pod_uid(&info.uid, &uid);
                        info.uid = uid;
                    }
                    None => {
                        present.insert(info.uid.clone());
                        continue;
                    }
                }
            }
            present.insert(info.uid.clone());
            self.update(cx, ns, &info, sim, orphaned, now);
        }
        let gone: Vec<String> = self
            .known
            .keys()
            .filter(|u| !present.contains(*u))
            .cloned()
            .collect();
        for uid in gone {
            if let Some(k) = self.known.remove(&uid)
                && !k.dead
            {
                if k.finalizer {
                    edit_meta(cx, ns, &k.name, &uid, drop_finalizer);
                }
                let d = DeleteOpts {
                    grace_period: Some(0),
                    precondition_uid: Some(uid.clone()),
                    ..DeleteOpts::default()
                };
                if let Err(e) = cx.api.delete(cx.served, ns, &k.name, &d)
                    && e.code != 404
                    && e.code != 409
                {
                    tracing::warn!(controller = "job", pod = %obj_key(ns, &k.name), code = e.code, error = %e.message, "removing a stopped pod failed");
                }
            }
        }
    }

    /// The objects of pods that no longer exist in the model, forgotten.
    pub(super) fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    fn create(&mut self, cx: &PodCtx<'_>, job: &Value, ns: &str, info: &PodInfo) -> Option<String> {
        let body = new_pod(job, info);
        let made = decoded(cx.served, body).and_then(|obj| {
            cx.api
                .create(cx.served, ns, obj, &write_opts(CONTROLLER_MANAGER))
        });
        match made {
            Ok(w) => {
                let uid = uid_of(&w.obj);
                self.known.insert(
                    uid.clone(),
                    Known {
                        name: info.name.clone(),
                        status: Value::Null,
                        derived: None,
                        finalizer: true,
                        owned: true,
                        delete_sent: false,
                        dead: false,
                    },
                );
                Some(uid)
            }
            Err(e) => {
                tracing::warn!(controller = "job", pod = %obj_key(ns, &info.name), code = e.code, error = %e.message, "creating the pod object failed; the pod runs in the model only");
                self.known.insert(
                    info.uid.clone(),
                    Known {
                        name: info.name.clone(),
                        status: Value::Null,
                        derived: None,
                        finalizer: false,
                        owned: false,
                        delete_sent: true,
                        dead: true,
                    },
                );
                None
            }
        }
    }

    fn update(
        &mut self,
        cx: &PodCtx<'_>,
        ns: &str,
        info: &PodInfo,
        sim: &mut JobSim,
        orphaned: bool,
        now: Timestamp,
    ) {
        let Some(k) = self.known.get_mut(&info.uid) else {
            return;
        };
        if k.dead {
            return;
        }
        let Some(cur) = cx.api.store.get(&cx.served.table, ns, &k.name) else {
            // Removed behind our back (a force delete): the pod stops in the model too.
            k.dead = true;
            sim.delete_pod(&info.uid, now);
            return;
        };
        if cur.uid() != info.uid {
            k.dead = true;
            return;
        }
        if cur.is_deleting() && info.deleted_at.is_none() {
            // Someone deleted the object: the pod terminates like one the controller deletes.
            k.delete_sent = true;
            sim.delete_pod(&info.uid, now);
            return;
        }
        let current = k
            .derived
            .as_ref()
            .is_some_and(|(rv, was)| *rv == cur.rv && same_status_inputs(was, info));
        if !current {
            // Parsed once: the derivation reads it and the write goes over it (unless it loses a race).
            let served = cx.api.served_value(cx.served, &cur);
            let status = pod_status(&served, info);
            k.derived = Some((cur.rv, info.clone()));
            if status != k.status {
                // Our own write changes only the status, which the derivation does not read: the
                // written version is as current as the one read.
                let base = cur.rv;
                let read = Some((cur, served));
                if let Some(rv) = write_status(cx, (ns, &k.name, &info.uid), &status, base, read) {
                    k.derived = Some((rv, info.clone()));
                }
                k.status = status;
            }
        }
        if info.deleted_at.is_some() && !k.delete_sent {
            k.delete_sent = true;
            let d = DeleteOpts {
                propagation: Some("Background".into()),
                precondition_uid: Some(info.uid.clone()),
                ..DeleteOpts::default()
            };
            if let Err(e) = cx.api.delete(cx.served, ns, &k.name, &d)
                && e.code != 404
            {
                tracing::warn!(controller = "job", pod = %obj_key(ns, &k.name), code = e.code, error = %e.message, "deleting a pod failed");
            }
        }
        if k.finalizer && !info.tracking_finalizer {
            k.finalizer = false;
            let edited = edit_meta(cx, ns, &k.name, &info.uid, drop_finalizer);
            k.carry_derivation(edited);
        }
        if orphaned && k.owned {
            k.owned = false;
            let edited = edit_meta(cx, ns, &k.name, &info.uid, drop_owners);
            k.carry_derivation(edited);
        }
    }
}

impl Known {
    /// After our metadata edit of the pod (the version edited and the version written): the
    /// derivation reads the pod's spec, namespace and generation, none of which a metadata edit
    /// changes (a pod's generation moves with its spec only), so a status derived from the edited
    /// version holds for the written one, and the object need not be read again to find that out.
    fn carry_derivation(&mut self, edited: Option<(u64, u64)>) {
        if let (Some((over, written)), Some((rv, _))) = (edited, self.derived.as_mut())
            && *rv == over
        {
            *rv = written;
        }
    }
}

/// Takes the Job controller's tracking finalizer out of a pod's metadata (false: it had none).
pub(super) fn drop_finalizer(m: &mut serde_json::Map<String, Value>) -> bool {
    let Some(f) = m.get_mut("finalizers").and_then(Value::as_array_mut) else {
        return false;
    };
    let before = f.len();
    f.retain(|x| x != TRACKING_FINALIZER);
    let changed = f.len() != before;
    if f.is_empty() {
        m.remove("finalizers");
    }
    changed
}

/// Takes a pod's ownerReferences out of its metadata (false: it had none).
pub(super) fn drop_owners(m: &mut serde_json::Map<String, Value>) -> bool {
    m.remove("ownerReferences").is_some()
}

/// Re-reads the pod, applies `change` to its metadata and writes it (retrying conflicts). When it
/// wrote: the version edited and the version written (as [`rewrite`]).
fn edit_meta(
    cx: &PodCtx<'_>,
    ns: &str,
    name: &str,
    uid: &str,
    change: impl Fn(&mut serde_json::Map<String, Value>) -> bool,
) -> Option<(u64, u64)> {
    let edit = |current: &Value| {
        let mut obj = current.clone();
        obj.get_mut("metadata")
            .and_then(Value::as_object_mut)
            .is_some_and(&change)
            .then_some(obj)
    };
    rewrite(cx, (ns, name, uid), Writer::JOB_CONTROLLER, edit, None)
}

/// `PUT pods/<name>/status` as the kubelet, first over `read` (the stored pod and its served form,
/// when the caller has them). The version written, when it was written over version `base` (not
/// over a newer one after a conflict).
fn write_status(
    cx: &PodCtx<'_>,
    pod: (&str, &str, &str),
    status: &Value,
    base: u64,
    read: Option<(Arc<Stored>, Value)>,
) -> Option<u64> {
    debug_assert_decodes_to_itself(cx.served, status);
    let edit = |current: &Value| Some(status_over(current, Some(status)));
    let (over, written) = rewrite(cx, pod, Writer::KUBELET, edit, read)?;
    (over == base).then_some(written)
}

/// Who writes a pod, through which part, as whom (for the write's field manager and the logs).
struct Writer {
    controller: &'static str,
    manager: &'static str,
    part: Part,
    what: &'static str,
}

impl Writer {
    const JOB_CONTROLLER: Writer = Writer {
        controller: "job",
        manager: CONTROLLER_MANAGER,
        part: Part::Main,
        what: "pod",
    };
    const KUBELET: Writer = Writer {
        controller: "kubelet",
        manager: KUBELET,
        part: Part::Status,
        what: "pod status",
    };
}

/// Re-reads the pod `(namespace, name, uid)` (the first attempt takes `read`, the stored pod and its
/// served form, when the caller already has them), makes the object to write with `edit` (from the
/// served form; `None`: nothing to write) and
/// writes it, retrying conflicts; a pod that is gone or was replaced (another UID) is left alone.
/// On success: the version edited and the version written.
fn rewrite(
    cx: &PodCtx<'_>,
    (ns, name, uid): (&str, &str, &str),
    w: Writer,
    edit: impl Fn(&Value) -> Option<Value>,
    mut read: Option<(Arc<Stored>, Value)>,
) -> Option<(u64, u64)> {
    let opts = write_opts(w.manager);
    for _ in 0..CONFLICT_RETRIES {
        let (cur, current) = match read.take() {
            Some(r) => r,
            None => {
                let cur = cx.api.store.get(&cx.served.table, ns, name)?;
                if cur.uid() != uid {
                    return None;
                }
                let current = cx.api.served_value(cx.served, &cur);
                (cur, current)
            }
        };
        if cur.uid() != uid {
            return None;
        }
        let obj = edit(&current)?;
        // Not decoded again: a status writer sets a status that decodes to itself on the
        // stored form, and the metadata edits (`drop_finalizer`, `drop_owners`) only take entries
        // out of it; the stored form decodes to itself, and so does it with those taken out
        // (`walk_tests` proves both on every version of every pod of a worker's run).
        let base = cur.rv;
        match cx.api.update_over(
            cx.served,
            ns,
            name,
            obj,
            w.part,
            &opts,
            Some((cur, current)),
        ) {
            Ok(written) => {
                let rv = match &written.obj {
                    ObjOut::Stored(st) => st.rv,
                    ObjOut::Value(_) => base,
                };
                return Some((base, rv));
            }
            Err(e) if e.code == 409 => continue,
            Err(e) if e.code == 404 => return None,
            Err(e) => {
                tracing::warn!(controller = w.controller, pod = %obj_key(ns, name), code = e.code, error = %e.message, "{} update rejected", w.what);
                return None;
            }
        }
    }
    None
}

/// The Job whose simulation a pod belongs to: the UID of its controller owner, or (an orphan has
/// none) of its `batch.kubernetes.io/controller-uid` label.
pub(super) fn controller_uid(pod: &Value) -> Option<String> {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| {
            refs.iter()
                .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|r| r.get("uid")?.as_str().map(str::to_string))
        .or_else(|| {
            crate::json::get_str(
                pod,
                &[
                    "metadata",
                    "labels",
                    crate::kinds::job::CONTROLLER_UID_LABEL,
                ],
            )
            .map(str::to_string)
        })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::controllers::Controllers;
    use crate::controllers::tests::{cluster, create, served};

    /// The pod without what differs between two pods written alike: name, UID, version, creation
    /// time and the managedFields timestamps.
    fn comparable(mut pod: Value) -> Value {
        let meta = pod["metadata"].as_object_mut().unwrap();
        for k in ["name", "uid", "resourceVersion", "creationTimestamp"] {
            meta.remove(k);
        }
        for e in meta["managedFields"].as_array_mut().unwrap() {
            e["time"] = json!("");
        }
        pod
    }

    /// A kubelet status write over the pod its caller already read (the read parsed once) stores
    /// what the write that reads the pod itself stores; over a stale read it loses the race, reads
    /// again and reports that it did not write over the caller's version.
    #[tokio::test]
    async fn a_status_write_over_the_callers_read_stores_what_a_fresh_read_does() {
        let c = cluster(Controllers::none());
        let api = &c.api;
        let s = served(api, ("", "v1", "pods"));
        let cx = PodCtx { api, served: &s };
        for name in ["given", "fresh", "stale"] {
            create(
                api,
                ("", "v1", "pods"),
                "default",
                json!({"metadata": {"name": name, "labels": {"app": "x"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
            )
            .unwrap();
        }
        let stored = |name: &str| api.store.get(&s.table, "default", name).unwrap();
        let status = json!({"phase": "Running", "qosClass": "BestEffort",
            "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": true, "lastState": {},
                "restartCount": 0, "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]});

        let given = stored("given");
        let read = Some((given.clone(), api.served_value(&s, &given)));
        let by_read = write_status(
            &cx,
            ("default", "given", given.uid()),
            &status,
            given.rv,
            read,
        );
        let fresh = stored("fresh");
        let by_fresh = write_status(
            &cx,
            ("default", "fresh", fresh.uid()),
            &status,
            fresh.rv,
            None,
        );
        assert_eq!(by_read, Some(stored("given").rv));
        assert_eq!(by_fresh, Some(stored("fresh").rv));
        let (a, b) = (stored("given").value(), stored("fresh").value());
        assert_eq!(a["status"]["phase"], "Running");
        assert_eq!(comparable(a), comparable(b));

        let old = stored("stale");
        let read = Some((old.clone(), api.served_value(&s, &old)));
        let other = json!({"phase": "Pending", "qosClass": "BestEffort", "message": "waiting"});
        assert!(write_status(&cx, ("default", "stale", old.uid()), &other, old.rv, None).is_some());
        let newer = stored("stale").rv;
        assert!(newer > old.rv, "the read is stale");
        assert_eq!(
            write_status(&cx, ("default", "stale", old.uid()), &status, old.rv, read),
            None,
            "written over a newer version than the caller's"
        );
        let now = stored("stale");
        assert!(now.rv > newer);
        assert_eq!(now.value()["status"]["phase"], "Running");
    }
}
