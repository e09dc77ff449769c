//! The Job controller: one `jobctl::JobSim` per Job the built-in controller manages, driven at its
//! `next_wakeup` from a single timer wheel (a `BTreeSet` of `(when, uid)`), its status writes made
//! through `/status` as `kube-controller-manager`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::gc::GcNote;
use super::pods::{PodCtx, PodObjects};
use super::slim::{Keep, view};
use super::{
    CONTROLLER_MANAGER, Change, Follower, debug_assert_decodes_to_itself, instant_at, obj_key,
    status_over, write_opts,
};
use crate::api::{Api, Part, Served};
use crate::instrument::{EPOCH_LABEL, ORIGIN_UID_LABEL, PodStart};
use crate::jobctl::{JobSim, SimConfig};
use crate::json::{is_deleting, meta_str};
use crate::store::{EventType, Stored};

/// Due simulations driven per turn of the loop, so events keep flowing under load.
const MAX_DUE_PER_TURN: usize = 2000;
/// Attempts at one status write that keeps losing optimistic-concurrency races.
const CONFLICT_RETRIES: usize = 8;

struct Entry {
    sim: JobSim,
    ns: String,
    name: String,
    generation: i64,
    deleting: bool,
    wake: Option<Timestamp>,
    reported_gone: bool,
    /// What of the Job as last seen shapes the pod objects (`pod_source`); `Null` when pods are off.
    job: Value,
    objects: PodObjects,
    /// `courier.dev/origin-uid` and `courier.dev/epoch` labels: its pod starts are counted.
    origin: Option<(String, String)>,
    /// Creation ordinals of the pods whose start was counted.
    counted: HashSet<u32>,
}

/// What the controller reads of a stored Job (`observe` and what it calls: `JobSpec::parse`,
/// `JobSim::new`, [`origin_of`], [`pod_source`]); its managedFields and most of its status are not
/// built (`walk_tests` and `slim_tests` compare what each reader makes of the view and of the whole).
pub(super) const JOB_VIEW: &[(&str, Keep)] = &[
    (
        "metadata",
        Keep::Only(&[
            ("name", Keep::Whole),
            ("namespace", Keep::Whole),
            ("uid", Keep::Whole),
            ("generation", Keep::Whole),
            ("deletionTimestamp", Keep::Whole),
            ("finalizers", Keep::Whole),
            ("labels", Keep::Whole),
        ]),
    ),
    ("spec", Keep::Whole),
    ("status", Keep::Only(&[("conditions", Keep::Whole)])),
];

/// The origin UID and epoch labels of a Job, when it has the first.
pub(super) fn origin_of(job: &Value) -> Option<(String, String)> {
    let label = |k: &str| {
        job.pointer("/metadata/labels")
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
    };
    let uid = label(ORIGIN_UID_LABEL)?;
    Some((
        uid.to_string(),
        label(EPOCH_LABEL).unwrap_or("").to_string(),
    ))
}

/// What `podshape::new_pod` reads of a Job (its name, namespace, uid, pod template and
/// `backoffLimitPerIndex`), moved out of the parsed Job. An entry lives as long as its Job: the
/// rest of the tree (managedFields, the status, the rest of the spec) is freed now, while warm,
/// instead of being held until then (the bulk of what an entry would hold).
pub(super) fn pod_source(mut job: Value) -> Value {
    let mut take = |part: &str, keys: &[&str]| {
        let mut out = serde_json::Map::new();
        if let Some(m) = job.get_mut(part).and_then(Value::as_object_mut) {
            for k in keys {
                if let Some(v) = m.remove(*k) {
                    out.insert((*k).to_string(), v);
                }
            }
        }
        Value::Object(out)
    };
    let mut out = serde_json::Map::new();
    out.insert(
        "metadata".into(),
        take("metadata", &["name", "namespace", "uid"]),
    );
    out.insert(
        "spec".into(),
        take("spec", &["template", "backoffLimitPerIndex"]),
    );
    Value::Object(out)
}

impl Entry {
    /// Records the starts of pods not counted yet (a pod counts once, restarts included). Reads the
    /// model's pods in place: most calls find nothing new, so nothing is copied for them.
    fn count_starts(&mut self, instruments: &crate::instrument::Instruments) {
        let Some((uid, epoch)) = &self.origin else {
            return;
        };
        for p in &self.sim.pods {
            if let Some(at) = p.started_at
                && self.counted.insert(p.ordinal)
            {
                instruments.record_start(PodStart {
                    origin_uid: uid.clone(),
                    epoch: epoch.clone(),
                    namespace: self.ns.clone(),
                    job: self.name.clone(),
                    pod: p.name.clone(),
                    index: p.index,
                    time: crate::time::format_nano(at),
                });
            }
        }
    }
}

struct JobController {
    api: Arc<Api>,
    served: Arc<Served>,
    cfg: SimConfig,
    sims: HashMap<Arc<str>, Entry>,
    wheel: BTreeSet<(Timestamp, Arc<str>)>,
    gc: Option<UnboundedSender<GcNote>>,
    /// The pods resource, when pod objects are written.
    pods: Option<Arc<Served>>,
}

/// How a status write ended.
enum Outcome {
    Accepted,
    /// The API server refused it (422, or anything else that is not a race): the controller retries.
    Rejected,
    /// The Job no longer exists (or is another Job with the same name).
    Gone,
}

pub(super) async fn run(
    api: Arc<Api>,
    cfg: SimConfig,
    gc: Option<UnboundedSender<GcNote>>,
    pod_objects: bool,
    shutdown: CancellationToken,
) {
    let Some(served) = api.registry.get("batch", "v1", "jobs") else {
        tracing::error!(
            controller = "job",
            "batch/v1 jobs are not served; not starting"
        );
        return;
    };
    let mut follower = Follower::new(api.store.clone(), served.table.clone(), "job");
    let pods = if pod_objects {
        api.registry.get("", "v1", "pods")
    } else {
        None
    };
    let mut pod_follower = pods
        .as_ref()
        .map(|p| Follower::new(api.store.clone(), p.table.clone(), "job"));
    let mut c = JobController {
        api,
        served,
        cfg,
        sims: HashMap::new(),
        wheel: BTreeSet::new(),
        gc,
        pods,
    };
    loop {
        let next = c.wheel.first().map(|(t, _)| *t);
        let sleep =
            tokio::time::sleep_until(next.map_or_else(tokio::time::Instant::now, instant_at));
        let pod_change = async {
            match &mut pod_follower {
                Some(f) => f.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            change = follower.next() => c.apply(change),
            change = pod_change => c.pod_changed(change),
            _ = sleep, if next.is_some() => c.run_due(),
        }
    }
}

impl JobController {
    fn apply(&mut self, change: Change) {
        let now = Timestamp::now();
        match change {
            Change::Resync(items) => {
                let mut seen = HashSet::new();
                for st in items {
                    self.observe(view(&st, JOB_VIEW), now);
                    seen.insert(st.uid().to_string());
                }
                let stale: Vec<Arc<str>> = self
                    .sims
                    .keys()
                    .filter(|u| !seen.contains(&***u))
                    .cloned()
                    .collect();
                for uid in stale {
                    self.job_removed(&uid, now);
                }
            }
            Change::Event(ev) => {
                if ev.kind == EventType::Deleted {
                    self.job_removed(ev.obj.uid(), now);
                } else if !self.unchanged(&ev.obj) {
                    self.observe(view(&ev.obj, JOB_VIEW), now);
                }
            }
        }
    }

    /// Whether `observe` would find nothing new in this stored Job (our own status writes and
    /// metadata-only changes of a simulated Job), told without parsing it.
    fn unchanged(&self, job: &Stored) -> bool {
        self.sims
            .get(job.uid())
            .is_some_and(|e| e.generation == job.generation() && e.deleting == job.is_deleting())
    }

    /// A pod object changed: a deletion by someone else concerns its Job's simulation.
    fn pod_changed(&mut self, change: Change) {
        let Change::Event(ev) = change else {
            return;
        };
        // Only a deletion concerns the simulation; told from the stored metadata, so the kubelet's
        // status writes (most pod events) need no parse.
        if ev.kind != EventType::Deleted && !ev.obj.is_deleting() {
            return;
        }
        let pod = ev.obj.value();
        let Some(owner) = super::pods::controller_uid(&pod) else {
            return;
        };
        if let Some((k, _)) = self.sims.get_key_value(owner.as_str()) {
            let k = k.clone();
            self.drive(&k, Timestamp::now());
        }
    }

    /// The Job object is gone: with pod objects its pods live on (orphaned, or until the garbage
    /// collector's deletions complete); without, the simulation ends here.
    fn job_removed(&mut self, uid: &str, now: Timestamp) {
        let Some((k, e)) = self.sims.get_key_value(uid) else {
            return;
        };
        if self.pods.is_none() || (e.sim.dependents_gone() && e.objects.is_empty()) {
            self.forget(uid);
            return;
        }
        let k = k.clone();
        if let Some(e) = self.sims.get_mut(&k) {
            if e.sim.job_gone {
                return;
            }
            e.sim.job_deleted(now);
        }
        self.drive(&k, now);
    }

    /// A Job as stored now ([`JOB_VIEW`] of it): start simulating it, or pass on a spec change /
    /// deletion. Takes the parsed Job over: the entry keeps it (for the pods' shape) without a copy.
    fn observe(&mut self, job: Value, now: Timestamp) {
        if JobSim::is_managed_elsewhere(&job) {
            return;
        }
        let uid = meta_str(&job, "uid");
        if uid.is_empty() {
            return;
        }
        let generation = job
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let deleting = is_deleting(&job);
        let keep = |job: Value| {
            if self.pods.is_some() {
                pod_source(job)
            } else {
                Value::Null
            }
        };
        let uid: Arc<str> = match self.sims.get_key_value(uid) {
            Some((k, e)) => {
                if e.generation == generation && e.deleting == deleting {
                    // Our own status writes and metadata-only changes: nothing for the controller.
                    return;
                }
                let k = k.clone();
                if let Some(e) = self.sims.get_mut(&k) {
                    e.sim.observe(&job, now);
                    e.generation = generation;
                    e.deleting = deleting;
                    e.job = keep(job);
                }
                k
            }
            None => {
                let k: Arc<str> = Arc::from(uid);
                let entry = Entry {
                    sim: JobSim::new(&job, now, &self.cfg),
                    ns: meta_str(&job, "namespace").to_string(),
                    name: meta_str(&job, "name").to_string(),
                    generation,
                    deleting,
                    wake: None,
                    reported_gone: false,
                    origin: origin_of(&job),
                    job: keep(job),
                    objects: PodObjects::default(),
                    counted: HashSet::new(),
                };
                self.sims.insert(k.clone(), entry);
                k
            }
        };
        self.drive(&uid, now);
    }

    fn forget(&mut self, uid: &str) {
        if let Some(e) = self.sims.remove(uid)
            && let Some(w) = e.wake
        {
            self.wheel.remove(&(w, Arc::from(uid)));
        }
    }

    fn run_due(&mut self) {
        let now = Timestamp::now();
        let mut due = Vec::new();
        while due.len() < MAX_DUE_PER_TURN {
            match self.wheel.first() {
                Some((t, _)) if *t <= now => {}
                _ => break,
            }
            let Some((_, uid)) = self.wheel.pop_first() else {
                break;
            };
            if let Some(e) = self.sims.get_mut(&uid) {
                e.wake = None;
            }
            due.push(uid);
        }
        for uid in due {
            self.drive(&uid, now);
        }
    }

    /// Runs one simulation up to `now`, writing every status it produces, then re-arms its timer.
    fn drive(&mut self, uid: &Arc<str>, now: Timestamp) {
        let Some(e) = self.sims.get_mut(uid) else {
            return;
        };
        let pods = self.pods.as_ref().map(|served| PodCtx {
            api: &self.api,
            served,
        });
        let mut gone = false;
        while let Some(w) = e.sim.advance(now) {
            e.count_starts(&self.api.instruments);
            // The pods' changes land before the Job status that counts them.
            if let Some(cx) = &pods {
                e.objects.sync(cx, &e.ns, &e.job, &mut e.sim, now);
            }
            match write_status(&self.api, &self.served, &e.ns, &e.name, uid, w.status) {
                Outcome::Accepted => {}
                Outcome::Rejected => e.sim.write_rejected(),
                Outcome::Gone => {
                    gone = true;
                    break;
                }
            }
        }
        e.count_starts(&self.api.instruments);
        if let Some(cx) = &pods {
            e.objects.sync(cx, &e.ns, &e.job, &mut e.sim, now);
            if gone && !e.sim.job_gone {
                // The Job vanished under a write: its pods go on without it.
                e.sim.job_deleted(now);
                e.objects.sync(cx, &e.ns, &e.job, &mut e.sim, now);
                gone = false;
            }
            if e.sim.job_gone && e.sim.settled() {
                gone = true;
            }
        }
        if gone {
            self.forget(uid);
            return;
        }
        if e.deleting
            && !e.reported_gone
            && e.sim.dependents_gone()
            && let Some(tx) = &self.gc
        {
            e.reported_gone = true;
            // The garbage collector may have stopped (shutdown): nothing left to tell.
            let _ = tx.send(GcNote {
                ns: e.ns.clone(),
                name: e.name.clone(),
                uid: uid.to_string(),
            });
        }
        let next = e.sim.next_wakeup();
        if e.wake != next {
            if let Some(old) = e.wake.take() {
                self.wheel.remove(&(old, uid.clone()));
            }
            if let Some(t) = next {
                self.wheel.insert((t, uid.clone()));
            }
            e.wake = next;
        }
    }
}

/// PUT `/status` with the simulator's full `.status`, re-reading on conflicts.
fn write_status(
    api: &Api,
    served: &Served,
    ns: &str,
    name: &str,
    uid: &str,
    status: Value,
) -> Outcome {
    let key = obj_key(ns, name);
    let opts = write_opts(CONTROLLER_MANAGER);
    debug_assert_decodes_to_itself(served, &status);
    for _ in 0..CONFLICT_RETRIES {
        let Some(cur) = api.store.get(&served.table, ns, name) else {
            return Outcome::Gone;
        };
        if cur.uid() != uid {
            return Outcome::Gone;
        }
        let current = api.served_value(served, &cur);
        let obj = status_over(&current, Some(&status));
        match api.update_over(
            served,
            ns,
            name,
            obj,
            Part::Status,
            &opts,
            Some((cur, current)),
        ) {
            Ok(_) => return Outcome::Accepted,
            Err(e) if e.code == 409 => continue,
            Err(e) if e.code == 404 => return Outcome::Gone,
            Err(e) => {
                tracing::warn!(
                    controller = "job",
                    job = %key,
                    code = e.code,
                    error = %e.message,
                    "status update rejected; retrying with backoff"
                );
                return Outcome::Rejected;
            }
        }
    }
    tracing::warn!(controller = "job", job = %key, "status update kept conflicting; retrying with backoff");
    Outcome::Rejected
}
