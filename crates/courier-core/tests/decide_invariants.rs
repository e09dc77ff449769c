//! Property (b): `decide` driven against a simulated management cluster and simulated workers, with
//! crashes between any two actions, failing and unreachable workers, mirrors deleted behind Courier's
//! back, foreign Jobs taking the name, stale caches, suspends, deletions and controller restarts.
//!
//! Checked on every action as it is applied: the intent is on the origin before a mirror for it is
//! created, and an epoch whose mirror has reported is never created again (a lost mirror gets a new
//! epoch); no two mirrors of the origin ever share an epoch (so at most one can be current); nothing
//! is dispatched for a finished origin or a suspended one that was never dispatched; Jobs that are not
//! the origin's mirrors are never patched or deleted; a stale mirror's status never reaches the origin;
//! re-dispatches stay within the bound; every origin status write is accepted by the API server's Job
//! status rules (kubesim's); each decision writes the origin at most once; a new epoch's mirror is
//! created only once no other unfinished mirror of ours is visible (stale before new); a suspended
//! origin is never failed with `DispatchFailed`. Decisions are chains: a crash stops everything, a
//! failed action (an unreachable or refusing worker) only its chain. At the end, with every
//! worker reachable and frozen, repeated reconciles converge to a decision with no API writes, leaving
//! no stale mirror behind (after the origin's deletion, only on workers that were blind at that moment,
//! which the controller's garbage collection handles).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use serde_json::{Value, json};

use courier_core::job::finished;
use courier_core::ownership::{Intent, OriginIdentity, Ownership, classify, epoch_label};
use courier_core::placement::ClusterView;
use courier_core::reconcile::{
    Action, AvoidKind, Decision, DispatchConfig, Hints, MirrorObservation, MirrorView, OriginView,
    ReconcileInput, decide,
};
use support::actions::{apply_merge, labels_of, short, summary};
use support::{Walker, cluster_view, status_errors};

const ORIGIN_ID: &str = "mgmt";
const ORIGIN_UID: &str = "origin-uid";
const EPOCH_TAG: &str = "sim.test/Epoch";

struct SimJob {
    uid: String,
    labels: BTreeMap<String, String>,
    walker: Walker,
}

struct SimCluster {
    view: ClusterView,
    reachable: bool,
    /// Creates of the origin's mirror are refused (quota, policy).
    refuses: bool,
    /// The controller's cache of this cluster has synced.
    synced: bool,
    /// Jobs named like the origin (one namespace, one name: at most one).
    job: Option<SimJob>,
}

struct Sim {
    origin: Value,
    origin_gone: bool,
    rv: u64,
    clusters: Vec<SimCluster>,
    hints: Hints,
    config: DispatchConfig,
    now: Timestamp,
    next_uid: u64,
    /// UIDs of foreign Jobs the simulation created (they must survive).
    foreign: BTreeSet<String>,
    /// Clusters whose cache was blind when the origin went away: mirrors left there are garbage
    /// collection's job (Courier cannot know about stale mirrors it cannot see, and holds the
    /// finalizer only for the intent cluster, and only up to the worker-lost timeout).
    left_to_gc: BTreeSet<String>,
    log: Vec<String>,
}

impl Sim {
    fn new(n_clusters: usize, suspended: bool, config: DispatchConfig) -> Self {
        let mut spec = support::spec(false, false, 2, 2, suspended);
        spec["managedBy"] = json!("courier.dev/dispatcher");
        let origin = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "job", "namespace": "default", "uid": ORIGIN_UID, "resourceVersion": "1"},
            "spec": spec, "status": {}
        });
        let clusters = (0..n_clusters)
            .map(|i| SimCluster {
                view: cluster_view(
                    &format!("w{i}"),
                    &[("region", if i % 2 == 0 { "eu" } else { "us" })],
                ),
                reachable: true,
                refuses: false,
                synced: true,
                job: None,
            })
            .collect();
        Self {
            origin,
            origin_gone: false,
            rv: 1,
            clusters,
            hints: Hints::default(),
            config,
            now: support::ts("2026-05-01T10:00:00Z"),
            next_uid: 0,
            foreign: BTreeSet::new(),
            left_to_gc: BTreeSet::new(),
            log: Vec::new(),
        }
    }

    fn fail(&self, msg: &str) -> ! {
        panic!("{msg}\nhistory:\n  {}", self.log.join("\n  "))
    }

    fn check(&self, ok: bool, msg: &str) {
        if !ok {
            self.fail(msg);
        }
    }

    fn origin_view(&self) -> OriginView {
        OriginView::from_json(&self.origin)
            .unwrap_or_else(|e| self.fail(&format!("origin view: {e}")))
    }

    fn identity(&self) -> OriginIdentity<'static> {
        OriginIdentity {
            origin_id: ORIGIN_ID,
            origin_uid: ORIGIN_UID,
        }
    }

    fn is_ours(&self, job: &SimJob, cluster: &str) -> bool {
        classify(&job.labels, cluster, self.identity(), None).is_ours()
    }

    fn observation(&self, c: &SimCluster) -> MirrorObservation {
        if !c.reachable || !c.synced {
            return MirrorObservation::Unknown;
        }
        match &c.job {
            None => MirrorObservation::Absent,
            Some(job) => {
                let mut status = job.walker.job["status"].clone();
                // Tag every mirror status with its epoch, to catch any stale status reaching the origin.
                let tag = json!({"type": EPOCH_TAG, "status": "True",
                                 "message": job.labels.get("courier.dev/epoch").cloned().unwrap_or_default()});
                match status.get_mut("conditions").and_then(Value::as_array_mut) {
                    Some(list) => list.push(tag),
                    None => status["conditions"] = json!([tag]),
                }
                let view = json!({
                    "metadata": {"name": "job", "namespace": "default", "uid": job.uid, "labels": job.labels},
                    "spec": job.walker.job["spec"], "status": status
                });
                MirrorObservation::Present(std::sync::Arc::new(
                    MirrorView::from_json(&view).unwrap_or_else(|e| self.fail(&e.to_string())),
                ))
            }
        }
    }

    fn blind_clusters(&self) -> BTreeSet<String> {
        self.clusters
            .iter()
            .filter(|c| !c.reachable || !c.synced)
            .map(|c| c.view.name.to_string())
            .collect()
    }

    fn decide(&self) -> Decision {
        let origin = self.origin_view();
        let mirrors: BTreeMap<Arc<str>, MirrorObservation> = self
            .clusters
            .iter()
            .map(|c| (c.view.name.clone(), self.observation(c)))
            .collect();
        let clusters: Vec<ClusterView> = self
            .clusters
            .iter()
            .map(|c| {
                let mut v = c.view.clone();
                v.current_mirrors = u32::from(
                    c.job
                        .as_ref()
                        .is_some_and(|j| self.is_ours(j, &c.view.name)),
                );
                v
            })
            .collect();
        decide(&ReconcileInput {
            origin: &origin,
            origin_json: Some(&self.origin),
            mirrors: &mirrors,
            clusters: &clusters,
            namespace_labels: &BTreeMap::new(),
            config: &self.config,
            hints: &self.hints,
            now: self.now,
        })
    }

    fn intent(&self) -> Option<Intent> {
        self.origin_view().intent()
    }

    fn cluster(&self, name: &str) -> &SimCluster {
        match self.clusters.iter().find(|c| &*c.view.name == name) {
            Some(c) => c,
            None => self.fail(&format!("unknown cluster {name}")),
        }
    }

    fn cluster_mut(&mut self, name: &str) -> &mut SimCluster {
        let i = self.clusters.iter().position(|c| &*c.view.name == name);
        match i {
            Some(i) => &mut self.clusters[i],
            None => self.fail(&format!("unknown cluster {name}")),
        }
    }

    fn rv_matches(&self, patch: &Value) -> bool {
        patch["metadata"]["resourceVersion"] == json!(self.rv.to_string())
    }

    fn bump_rv(&mut self) {
        self.rv += 1;
        self.origin["metadata"]["resourceVersion"] = json!(self.rv.to_string());
    }

    /// Runs one reconcile, applying the first `crash_after` actions (a crash or failure stops there).
    fn reconcile(&mut self, crash_after: usize) -> Decision {
        let before = self.origin_view();
        let was_finished = finished(&before.status).is_some();
        let intent_before = before.intent();
        let d = self.decide();
        self.log
            .push(format!("reconcile at {} -> {:?}", self.now, summary(&d)));

        let origin_writes = d
            .actions()
            .filter(|a| {
                matches!(
                    a,
                    Action::WriteIntent { .. }
                        | Action::WriteOriginStatus { .. }
                        | Action::RemoveFinalizer { .. }
                )
            })
            .count();
        self.check(
            origin_writes <= 1,
            "more than one origin write in one decision",
        );
        for a in d.actions() {
            match a {
                Action::CreateMirror { .. } => {
                    self.check(!was_finished, "a mirror created for a finished origin");
                }
                Action::WriteIntent { cluster, epoch, .. } => {
                    let same = intent_before.as_ref()
                        == Some(&Intent {
                            cluster: cluster.clone(),
                            epoch: *epoch,
                        });
                    self.check(!was_finished || same, "a finished origin was re-dispatched");
                    self.check(
                        intent_before.is_some() || !before.spec.suspend,
                        "a suspended, never dispatched origin was dispatched",
                    );
                }
                _ => {}
            }
        }

        // A crash stops everything; a failed action stops the rest of its chain only.
        let mut budget = crash_after;
        'chains: for chain in &d.chains {
            for a in chain {
                if budget == 0 {
                    self.log.push("  crashed".into());
                    break 'chains;
                }
                budget -= 1;
                if !self.apply(a) {
                    self.log.push(format!("  stopped at {}", short(a)));
                    break;
                }
            }
        }
        self.check_state();
        d
    }

    /// Applies one action; false = it failed (the shell stops there).
    fn apply(&mut self, action: &Action) -> bool {
        // Once the origin is gone its writes fail, but the shell still performs the decision's
        // other chains (`origin::execute`): a stale mirror's DELETE goes to its worker, which does
        // not care about the origin.
        if self.origin_gone && !matches!(action, Action::DeleteMirror { .. }) {
            return false;
        }
        match action {
            Action::WriteIntent { patch, .. } => {
                if !self.rv_matches(patch) {
                    return false;
                }
                let mut meta = patch["metadata"].clone();
                meta.as_object_mut()
                    .expect("meta")
                    .remove("resourceVersion");
                apply_merge(&mut self.origin["metadata"], &meta);
                self.bump_rv();
                let r = self.origin_view().redispatches();
                self.check(
                    r <= self.config.max_redispatch,
                    "re-dispatch bound exceeded",
                );
                true
            }
            Action::EnsureNamespace { cluster, .. } => self.cluster_mut(cluster).reachable,
            Action::CreateMirror {
                cluster,
                epoch,
                mirror,
            } => {
                let intent = self.intent();
                self.check(
                    intent == Some(Intent { cluster: cluster.clone(), epoch: *epoch }),
                    &format!("CreateMirror({cluster},{epoch}) without that intent on the origin (intent {intent:?})"),
                );
                let reported =
                    courier_core::dispatched::recorded(&self.origin_view().status.expand());
                self.check(
                    reported != intent,
                    "a mirror whose epoch had already reported was created again instead of re-dispatched",
                );
                let labels = labels_of(&mirror["metadata"]["labels"]);
                self.check(
                    epoch_label(&labels) == Some(*epoch),
                    "mirror epoch label differs from the create",
                );
                let identity = self.identity();
                let now = self.now;
                let c = self.cluster_mut(cluster);
                if !c.reachable {
                    return false;
                }
                if let Some(existing) = &c.job {
                    let verdict = classify(&existing.labels, cluster, identity, intent.as_ref());
                    if verdict == Ownership::Current {
                        return true; // adopt
                    }
                    if !verdict.is_ours() {
                        let config = self.config.clone();
                        self.hints.avoid(
                            cluster,
                            AvoidKind::Foreign,
                            "AlreadyExists",
                            now,
                            &config,
                        );
                    }
                    return false;
                }
                if c.refuses {
                    let config = self.config.clone();
                    self.hints
                        .avoid(cluster, AvoidKind::Refused, "exceeded quota", now, &config);
                    return false;
                }
                // Stale before new: no other unfinished mirror of ours where the caches can see.
                let running_elsewhere: Vec<String> = self
                    .clusters
                    .iter()
                    .filter(|o| o.reachable && o.synced && *o.view.name != **cluster)
                    .filter(|o| {
                        o.job
                            .as_ref()
                            .is_some_and(|j| self.is_ours(j, &o.view.name) && !j.walker.finished())
                    })
                    .map(|o| o.view.name.to_string())
                    .collect();
                self.check(
                    running_elsewhere.is_empty(),
                    &format!("epoch {epoch} created on {cluster} while mirrors of ours still run on {running_elsewhere:?}"),
                );
                self.next_uid += 1;
                let uid = format!("m{}", self.next_uid);
                let walker = Walker::new(mirror["spec"].clone(), false);
                self.cluster_mut(cluster).job = Some(SimJob {
                    uid,
                    labels,
                    walker,
                });
                true
            }
            Action::PatchMirrorSpec {
                cluster,
                uid,
                patch,
                ..
            } => {
                let now = self.now;
                let reachable = self.cluster_mut(cluster).reachable;
                if !reachable {
                    return false;
                }
                let ours = self
                    .cluster(cluster)
                    .job
                    .as_ref()
                    .filter(|j| &j.uid == uid)
                    .map(|j| self.is_ours(j, cluster));
                match ours {
                    None => true,
                    Some(false) => self.fail("a Job that is not the origin's mirror was patched"),
                    Some(true) => {
                        let c = self.cluster_mut(cluster);
                        if let Some(job) = c.job.as_mut() {
                            for (k, v) in patch["spec"].as_object().into_iter().flatten() {
                                if k == "suspend" {
                                    job.walker.set_suspend(v.as_bool().unwrap_or(false), now);
                                } else if v.is_null() {
                                    job.walker.job["spec"].as_object_mut().map(|s| s.remove(k));
                                } else {
                                    job.walker.job["spec"][k] = v.clone();
                                }
                            }
                        }
                        true
                    }
                }
            }
            Action::DeleteMirror { cluster, uid, .. } => {
                let reachable = self.cluster_mut(cluster).reachable;
                if !reachable {
                    return false;
                }
                let ours = self
                    .cluster(cluster)
                    .job
                    .as_ref()
                    .filter(|j| &j.uid == uid)
                    .map(|j| self.is_ours(j, cluster));
                match ours {
                    None => true, // 404 / UID precondition: done
                    Some(false) => self.fail("a Job that is not the origin's mirror was deleted"),
                    Some(true) => {
                        self.cluster_mut(cluster).job = None;
                        true
                    }
                }
            }
            Action::WriteOriginStatus { status, patch } => {
                if !self.rv_matches(patch) {
                    return false;
                }
                let new_status = serde_json::to_value(status).expect("status json");
                let mut patched = self.origin["status"].clone();
                apply_merge(&mut patched, &patch["status"]);
                self.check(
                    patched == new_status,
                    "the status merge patch does not produce the status",
                );
                let mut next = self.origin.clone();
                next["status"] = new_status.clone();
                let errors = status_errors(&self.origin, &next);
                self.check(
                    errors.is_empty(),
                    &format!("origin status write rejected: {errors:?}"),
                );
                let dispatch_failed = new_status["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Failed" && c["reason"] == "DispatchFailed")
                });
                self.check(
                    !(dispatch_failed && self.origin["spec"]["suspend"] == json!(true)),
                    "a suspended origin was failed with DispatchFailed",
                );
                let intent_epoch = self.intent().map(|i| i.epoch.to_string());
                let tag = |s: &Value| {
                    s["conditions"].as_array().and_then(|cs| {
                        cs.iter()
                            .find(|c| c["type"] == EPOCH_TAG)
                            .map(|c| c["message"].as_str().unwrap_or("").to_string())
                    })
                };
                let (old_tag, new_tag) = (tag(&self.origin["status"]), tag(&new_status));
                if new_tag != old_tag {
                    self.check(new_tag == intent_epoch, &format!(
                        "status from epoch {new_tag:?} reached the origin whose epoch is {intent_epoch:?}"));
                }
                self.origin["status"] = new_status;
                self.bump_rv();
                true
            }
            Action::RemoveFinalizer { patch } => {
                if !self.rv_matches(patch) {
                    return false;
                }
                self.origin["metadata"]["finalizers"] = patch["metadata"]["finalizers"].clone();
                self.bump_rv();
                let deleting = self.origin["metadata"].get("deletionTimestamp").is_some();
                if deleting && self.origin_view().finalizers.is_empty() {
                    self.origin_gone = true;
                    self.left_to_gc = self.blind_clusters();
                    self.log.push(format!(
                        "  origin deleted; left to GC: {:?}",
                        self.left_to_gc
                    ));
                }
                true
            }
            Action::Event { .. } => true,
        }
    }

    fn check_state(&self) {
        let mut epochs: BTreeMap<u64, &str> = BTreeMap::new();
        for c in &self.clusters {
            if let Some(job) = &c.job
                && self.is_ours(job, &c.view.name)
            {
                let e = epoch_label(&job.labels).unwrap_or(0);
                if let Some(other) = epochs.insert(e, &c.view.name) {
                    self.fail(&format!(
                        "epoch {e} has mirrors on {other} and {}",
                        c.view.name
                    ));
                }
            }
        }
        let alive: BTreeSet<String> = self
            .clusters
            .iter()
            .filter_map(|c| c.job.as_ref().map(|j| j.uid.clone()))
            .collect();
        self.check(self.foreign.is_subset(&alive), "a foreign Job disappeared");
        if !self.origin_gone {
            let r = self.origin_view().redispatches();
            self.check(
                r <= self.config.max_redispatch,
                "re-dispatch bound exceeded",
            );
        }
    }

    /// One random perturbation of the world.
    fn perturb(&mut self, op: u8, pick: usize, arg: u8) {
        let n = self.clusters.len();
        let i = pick % n;
        let name = self.clusters[i].view.name.clone();
        match op {
            // Workers make progress (reachable or not).
            0..=3 => {
                let now = self.now;
                if let Some(job) = self.clusters[i].job.as_mut() {
                    job.walker.step(arg % 10, arg / 10, now);
                }
                self.log.push(format!("worker {name} steps"));
            }
            // Someone deletes the mirror behind Courier's back.
            4 => {
                let ours = self.clusters[i]
                    .job
                    .as_ref()
                    .is_some_and(|j| self.is_ours(j, &name));
                if ours {
                    self.clusters[i].job = None;
                    self.log
                        .push(format!("mirror on {name} deleted behind our back"));
                }
            }
            // The worker goes away or comes back.
            5 => {
                let c = &mut self.clusters[i];
                if c.view.ready {
                    c.view.ready = false;
                    c.view.not_ready_since = Some(self.now);
                    // Mostly unreachable; sometimes reachable but failing its probe (e.g. Forbidden).
                    c.reachable = arg.is_multiple_of(4);
                } else {
                    c.view.ready = true;
                    c.view.not_ready_since = None;
                    c.reachable = true;
                }
                self.log.push(format!("{name} ready={}", c.view.ready));
            }
            // Someone else's Job takes the name.
            6 => {
                if self.clusters[i].job.is_none() {
                    self.next_uid += 1;
                    let uid = format!("foreign{}", self.next_uid);
                    let mut labels = BTreeMap::from([("app".to_string(), "theirs".to_string())]);
                    if arg.is_multiple_of(2) {
                        // Another management cluster's mirror.
                        labels.insert("courier.dev/origin".into(), "other-mgmt".into());
                    }
                    self.foreign.insert(uid.clone());
                    let walker = Walker::new(support::spec(false, false, 1, 1, false), false);
                    self.clusters[i].job = Some(SimJob {
                        uid,
                        labels,
                        walker,
                    });
                    self.log.push(format!("foreign Job on {name}"));
                }
            }
            7 => {
                let secs = 30 + u64::from(arg) * 5;
                self.now = self
                    .now
                    .checked_add(SignedDuration::from_secs(secs as i64))
                    .expect("time");
                self.log.push(format!("time +{secs}s"));
            }
            8 => {
                if !self.origin_gone {
                    let s = self.origin["spec"]["suspend"] == json!(true);
                    self.origin["spec"]["suspend"] = json!(!s);
                    self.bump_rv();
                    self.log.push(format!("origin suspend={}", !s));
                }
            }
            9 => {
                if !self.origin_gone
                    && arg.is_multiple_of(4)
                    && self.origin["metadata"].get("deletionTimestamp").is_none()
                {
                    self.origin["metadata"]["deletionTimestamp"] = json!(self.now.to_string());
                    self.bump_rv();
                    self.log.push("origin deletion requested".into());
                    if self.origin_view().finalizers.is_empty() {
                        self.origin_gone = true;
                        self.left_to_gc = self.blind_clusters();
                    }
                }
            }
            10 => {
                self.clusters[i].synced = !self.clusters[i].synced;
                self.log
                    .push(format!("{name} cache synced={}", self.clusters[i].synced));
            }
            11 => {
                self.clusters[i].view.paused = !self.clusters[i].view.paused;
                self.log
                    .push(format!("{name} paused={}", self.clusters[i].view.paused));
            }
            // A worker starts or stops refusing the mirror (quota, policy).
            14 => {
                self.clusters[i].refuses = !self.clusters[i].refuses;
                self.log
                    .push(format!("{name} refuses={}", self.clusters[i].refuses));
            }
            // Its WorkerCluster is deleted (draining), or the deletion is undone (a re-registration).
            15 => {
                self.clusters[i].view.draining = !self.clusters[i].view.draining;
                self.log.push(format!(
                    "{name} draining={}",
                    self.clusters[i].view.draining
                ));
            }
            _ => {
                self.hints = Hints::default();
                self.log.push("controller restart".into());
            }
        }
    }
}

fn mutates(a: &Action) -> bool {
    !matches!(a, Action::Event { .. })
}

/// Perturbations weighted so that long stories (dispatch, report, loss, re-dispatch) are common.
fn op_strategy() -> impl Strategy<Value = u8> {
    prop_oneof![
        30 => Just(13u8),   // reconcile
        20 => 0u8..4,       // worker progress
        8 => Just(4u8),     // mirror deleted behind our back
        8 => Just(5u8),     // worker lost / back
        4 => Just(6u8),     // foreign Job
        10 => Just(7u8),    // time passes
        4 => Just(8u8),     // origin suspend toggle
        2 => Just(9u8),     // origin deletion (1 in 4 of these)
        4 => Just(10u8),    // cache sync toggle
        4 => Just(11u8),    // pause toggle
        3 => Just(12u8),    // controller restart (hints lost)
        3 => Just(14u8),    // a worker refuses / accepts the mirror
        2 => Just(15u8),    // a WorkerCluster is being removed / re-registered
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))),
        cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn decide_keeps_its_invariants(
        n_clusters in 1usize..4,
        suspended in any::<bool>(),
        max_redispatch in 0u32..3,
        redispatch_on_worker_loss in any::<bool>(),
        selector in prop_oneof![4 => Just(None), 2 => Just(Some("region=eu")), 1 => Just(Some("region in (eu"))],
        steps in proptest::collection::vec((op_strategy(), any::<usize>(), any::<u8>(), 0usize..8), 1..160),
    ) {
        let config = DispatchConfig {
            origin_id: ORIGIN_ID.into(),
            max_redispatch,
            worker_lost_timeout: Duration::from_secs(300),
            redispatch_on_worker_loss,
            ..Default::default()
        };
        let mut sim = Sim::new(n_clusters, suspended, config);
        if let Some(s) = selector {
            sim.origin["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": s});
        }
        for (op, pick, arg, crash_after) in steps {
            if sim.origin_gone {
                break;
            }
            if op == 13 {
                // Reconcile, sometimes crashing part-way.
                let crash_after = if crash_after >= 5 { usize::MAX } else { crash_after };
                sim.reconcile(crash_after);
            } else {
                sim.perturb(op, pick, arg);
            }
        }

        // Every worker back, caches synced, workers frozen: reconciles converge without API writes.
        for c in &mut sim.clusters {
            c.reachable = true;
            c.synced = true;
            c.refuses = false;
            c.view.ready = true;
            c.view.not_ready_since = None;
        }
        let mut converged = sim.origin_gone;
        for _ in 0..24 {
            if sim.origin_gone {
                converged = true;
                break;
            }
            let d = sim.reconcile(usize::MAX);
            if !d.actions().any(mutates) {
                converged = true;
                break;
            }
        }
        prop_assert!(converged, "no convergence:\n  {}", sim.log.join("\n  "));
        // Nothing stale is left; after deletion nothing of ours is left, except on clusters that were
        // blind when the origin went away (garbage collection's job).
        let intent = if sim.origin_gone { None } else { sim.intent() };
        for c in &sim.clusters {
            if let Some(job) = &c.job
                && sim.is_ours(job, &c.view.name)
                && !sim.left_to_gc.contains(&*c.view.name)
            {
                let verdict = classify(&job.labels, &c.view.name, sim.identity(), intent.as_ref());
                prop_assert_eq!(
                    verdict,
                    Ownership::Current,
                    "left behind on {}:\n  {}",
                    c.view.name,
                    sim.log.join("\n  ")
                );
            }
        }
    }
}
