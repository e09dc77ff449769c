use super::*;
use crate::dispatched;
use crate::job::finished;
use crate::ownership::{Intent, epoch_label};
use crate::placement::ClusterView;
use k8s_openapi::api::batch::v1::JobStatus;
use serde_json::json;

const T0: &str = "2026-05-01T10:00:00Z";

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn t0() -> Timestamp {
    ts(T0)
}

/// The origin as the management API server would store it.
fn origin_json() -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "uid": "uid-1", "resourceVersion": "10",
                     "generation": 1, "labels": {"team": "a"}},
        "spec": {"managedBy": "courier.dev/dispatcher", "parallelism": 2, "completions": 3,
                 "backoffLimit": 6, "suspend": false, "completionMode": "NonIndexed",
                 "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}},
        "status": {}
    })
}

struct World {
    origin: Value,
    clusters: Vec<ClusterView>,
    /// Labels of the origin's namespace (`ml`).
    namespace_labels: BTreeMap<String, String>,
    mirrors: BTreeMap<Arc<str>, MirrorObservation>,
    config: DispatchConfig,
    hints: Hints,
    now: Timestamp,
}

fn cluster(name: &str) -> ClusterView {
    crate::placement::tests::cluster(name, &[("region", "eu")])
}

impl World {
    fn new() -> Self {
        let clusters = vec![cluster("a"), cluster("b")];
        let mirrors = clusters
            .iter()
            .map(|c| (c.name.clone(), MirrorObservation::Absent))
            .collect();
        Self {
            origin: origin_json(),
            clusters,
            namespace_labels: crate::placement::namespace_labels("ml", None),
            mirrors,
            config: DispatchConfig {
                origin_id: "mgmt".into(),
                ..Default::default()
            },
            hints: Hints::default(),
            now: t0(),
        }
    }

    fn decide(&self) -> Decision {
        let view = OriginView::from_json(&self.origin).expect("origin view");
        decide(&ReconcileInput {
            origin: &view,
            origin_json: Some(&self.origin),
            mirrors: &self.mirrors,
            clusters: &self.clusters,
            namespace_labels: &self.namespace_labels,
            config: &self.config,
            hints: &self.hints,
            now: self.now,
        })
    }

    /// Decides on the cached view only (no fresh origin JSON at hand).
    fn decide_cached(&self) -> Decision {
        let view = OriginView::from_json(&self.origin).expect("origin view");
        decide(&ReconcileInput {
            origin: &view,
            origin_json: None,
            mirrors: &self.mirrors,
            clusters: &self.clusters,
            namespace_labels: &self.namespace_labels,
            config: &self.config,
            hints: &self.hints,
            now: self.now,
        })
    }

    /// Marks the origin as dispatched to `cluster` at `epoch` (intent written).
    fn with_intent(mut self, cluster: &str, epoch: u64, redispatches: u32) -> Self {
        let meta = &mut self.origin["metadata"];
        meta["labels"]["courier.dev/cluster"] = json!(cluster);
        meta["annotations"] = json!({"courier.dev/epoch": epoch.to_string(),
                                     "courier.dev/redispatches": redispatches.to_string()});
        meta["finalizers"] = json!(["courier.dev/mirror-cleanup"]);
        self
    }

    /// The origin's status also records that `cluster`/`epoch` reported.
    fn reported(mut self, cluster: &str, epoch: u64) -> Self {
        let mut conditions = Vec::new();
        dispatched::record(
            &mut conditions,
            &Intent {
                cluster: cluster.into(),
                epoch,
            },
            t0(),
        );
        self.origin["status"] = json!({
            "startTime": "2026-05-01T09:00:00Z", "active": 2, "ready": 2, "terminating": 0,
            "conditions": serde_json::to_value(conditions).expect("conditions")
        });
        self
    }

    /// `cluster` answered a create with someone else's Job (a hint in force now).
    fn foreign(&mut self, cluster: &str) {
        let now = self.now;
        let config = self.config.clone();
        self.hints
            .avoid(cluster, AvoidKind::Foreign, "AlreadyExists", now, &config);
    }

    fn mirror(mut self, cluster: &str, epoch: u64, status: Value) -> Self {
        let m = mirror_json(epoch, status);
        self.mirrors.insert(
            cluster.into(),
            MirrorObservation::Present(std::sync::Arc::new(
                MirrorView::from_json(&m).expect("mirror view"),
            )),
        );
        self
    }
}

fn mirror_json(epoch: u64, status: Value) -> Value {
    let mut m = crate::mirror::mirror_for(&origin_json(), "mgmt", epoch).expect("mirror");
    m["metadata"]["uid"] = json!(format!("mirror-uid-{epoch}"));
    m["status"] = status;
    m
}

fn running() -> Value {
    json!({"startTime": "2026-05-01T09:00:00Z", "active": 2, "ready": 2, "terminating": 0,
           "uncountedTerminatedPods": {}})
}

fn complete() -> Value {
    json!({"startTime": "2026-05-01T09:00:00Z", "ready": 0, "terminating": 0, "succeeded": 3,
           "completionTime": "2026-05-01T09:10:00Z", "uncountedTerminatedPods": {},
           "conditions": [
               {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                "lastTransitionTime": "2026-05-01T09:10:00Z"},
               {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                "lastTransitionTime": "2026-05-01T09:10:00Z"}]})
}

fn foreign_job() -> MirrorObservation {
    MirrorObservation::Present(std::sync::Arc::new(
        MirrorView::from_json(
            &json!({"metadata": {"name": "train", "namespace": "ml", "uid": "theirs",
            "labels": {"app": "theirs"}}, "spec": {}}),
        )
        .expect("foreign view"),
    ))
}

/// Short names of the actions, for order assertions.
fn kinds(d: &Decision) -> Vec<String> {
    let mut out: Vec<String> = d
        .actions()
        .map(|a| match a {
            Action::WriteIntent {
                cluster,
                epoch,
                redispatches,
                ..
            } => {
                format!("WriteIntent({cluster},{epoch},{redispatches})")
            }
            Action::EnsureNamespace { cluster, .. } => format!("EnsureNamespace({cluster})"),
            Action::CreateMirror { cluster, epoch, .. } => {
                format!("CreateMirror({cluster},{epoch})")
            }
            Action::PatchMirrorSpec { cluster, .. } => format!("PatchMirrorSpec({cluster})"),
            Action::DeleteMirror { cluster, uid, .. } => format!("DeleteMirror({cluster},{uid})"),
            Action::WriteOriginStatus { .. } => "WriteOriginStatus".into(),
            Action::RemoveFinalizer { .. } => "RemoveFinalizer".into(),
            Action::Event { reason, .. } => format!("Event({reason})"),
        })
        .collect();
    if let Some(after) = d.requeue {
        out.push(format!("Requeue({}s)", after.as_secs()));
    }
    out
}

/// Every action, chain after chain.
fn acts(d: &Decision) -> Vec<Action> {
    d.actions().cloned().collect()
}

/// The `courier.dev/Placed` condition the decision writes, as (status, reason, message).
fn placed(d: &Decision) -> Option<(String, String, String)> {
    let s = d.actions().find_map(|a| match a {
        Action::WriteOriginStatus { status, .. } => Some(status.expand()),
        _ => None,
    })?;
    let c = s
        .conditions?
        .into_iter()
        .find(|c| c.type_ == courier_api::CONDITION_PLACED)?;
    Some((
        c.status,
        c.reason.unwrap_or_default(),
        c.message.unwrap_or_default(),
    ))
}

fn written_status(d: &Decision) -> JobStatus {
    d.actions()
        .find_map(|a| match a {
            Action::WriteOriginStatus { status, .. } => Some(status.expand()),
            _ => None,
        })
        .expect("a status write")
}

fn event_message(d: &Decision, reason: &str) -> String {
    d.actions()
        .find_map(|a| match a {
            Action::Event {
                reason: r, message, ..
            } if *r == reason => Some(message.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {reason} event in {:?}", kinds(d)))
}

#[test]
fn not_ours_is_ignored() {
    let mut w = World::new();
    w.origin["spec"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");
    assert_eq!(w.decide(), Decision::default());
    w.origin["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("managedBy");
    assert_eq!(w.decide(), Decision::default());
}

#[test]
fn first_placement_writes_the_intent_before_the_mirror() {
    let w = World::new();
    let d = w.decide();
    assert_eq!(kinds(&d), ["WriteIntent(a,1,0)", "CreateMirror(a,1)"]);
    assert_eq!(d.wait, None);
    let Action::WriteIntent {
        patch,
        add_finalizer,
        ..
    } = &acts(&d)[0]
    else {
        panic!("intent first")
    };
    assert!(add_finalizer);
    assert_eq!(
        patch,
        &json!({"metadata": {"resourceVersion": "10",
            "labels": {"courier.dev/cluster": "a"},
            "annotations": {"courier.dev/epoch": "1", "courier.dev/redispatches": "0"},
            "finalizers": ["courier.dev/mirror-cleanup"]}})
    );
    let Action::CreateMirror { mirror, .. } = &acts(&d)[1] else {
        panic!("create second")
    };
    assert_eq!(
        mirror["metadata"]["labels"]["courier.dev/epoch"],
        json!("1")
    );
    assert_eq!(
        mirror["metadata"]["labels"]["courier.dev/origin"],
        json!("mgmt")
    );
    assert!(mirror["spec"].get("managedBy").is_none());
}

#[test]
fn placement_honours_the_selector_and_load() {
    let mut w = World::new();
    w.clusters[0].current_mirrors = 5;
    assert_eq!(kinds(&w.decide())[0], "WriteIntent(b,1,0)");
    Arc::make_mut(&mut w.clusters[1].labels).insert("gpu".into(), "t4".into());
    w.origin["metadata"]["annotations"] =
        json!({"courier.dev/cluster-selector": "gpu in (a100,h100)"});
    let d = w.decide();
    assert_eq!(
        kinds(&d),
        [
            "WriteOriginStatus",
            "Event(NoEligibleCluster)",
            "Requeue(30s)"
        ]
    );
    let why = "cluster selector \"gpu in (a100,h100)\" matched none of the 2 WorkerClusters";
    assert_eq!(event_message(&d, "NoEligibleCluster"), why);
    let placed = written_status(&d)
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "courier.dev/Placed")
        .expect("Placed condition");
    assert_eq!(
        (
            placed.status.as_str(),
            placed.reason.as_deref(),
            placed.message.as_deref()
        ),
        ("False", Some("NoEligibleCluster"), Some(why))
    );
    assert!(matches!(d.wait, Some(Wait::NoEligibleCluster { .. })));
    // Said once: the same decision on the written status writes and announces nothing.
    w.origin["status"] = serde_json::to_value(written_status(&d)).expect("status");
    assert_eq!(kinds(&w.decide()), ["Requeue(30s)"]);
    w.origin["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": "gpu in (a100"});
    let msg = event_message(&w.decide(), "NoEligibleCluster");
    assert!(msg.contains("missing closing ')'"), "{msg}");
}

#[test]
fn no_clusters_at_all() {
    let mut w = World::new();
    w.clusters.clear();
    w.mirrors.clear();
    let d = w.decide();
    assert_eq!(
        event_message(&d, "NoEligibleCluster"),
        "no WorkerCluster is registered"
    );
}

#[test]
fn a_suspended_job_that_was_never_dispatched_stays_home() {
    let mut w = World::new();
    w.origin["spec"]["suspend"] = json!(true);
    let d = w.decide();
    assert_eq!(kinds(&d), ["WriteOriginStatus"]);
    assert_eq!(d.wait, Some(Wait::Suspended));
    let status = written_status(&d);
    let c = crate::job::find_condition(&status, "Suspended").expect("Suspended");
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("True", Some("JobSuspended"))
    );
    w.origin["status"] = serde_json::to_value(&status).expect("status");
    let again = w.decide();
    assert!(again.chains.is_empty(), "{:?}", kinds(&again));
    // Resume: dispatched (the Suspended flip follows with the first mirror status).
    w.origin["spec"]["suspend"] = json!(false);
    assert_eq!(kinds(&w.decide())[0], "WriteIntent(a,1,0)");
}

#[test]
fn intent_without_a_mirror_creates_it_again() {
    let w = World::new().with_intent("b", 1, 0);
    let d = w.decide();
    assert_eq!(kinds(&d), ["CreateMirror(b,1)"]);
}

#[test]
fn first_report_writes_status_marker_and_dispatched_event() {
    let w = World::new()
        .with_intent("a", 1, 0)
        .mirror("a", 1, running());
    let d = w.decide();
    assert_eq!(kinds(&d), ["WriteOriginStatus", "Event(Dispatched)"]);
    assert_eq!(
        event_message(&d, "Dispatched"),
        "mirror ml/train created on a (epoch 1)"
    );
    let status = written_status(&d);
    assert_eq!(
        dispatched::recorded(&status),
        Some(Intent {
            cluster: "a".into(),
            epoch: 1
        })
    );
    let Action::WriteOriginStatus { patch, .. } = &acts(&d)[0] else {
        panic!("status write")
    };
    assert_eq!(patch["metadata"]["resourceVersion"], json!("10"));
    assert_eq!(patch["status"]["active"], json!(2));
    // Applied: steady state.
    let mut w = w;
    w.origin["status"] = serde_json::to_value(&status).expect("status");
    assert!(w.decide().chains.is_empty());
}

/// A worker that took a finished pod out of `active` and has not counted it yet (it lists the
/// pod in `uncountedTerminatedPods`) writes the count next: the gauges alone wait for it (one
/// origin write instead of two); the counted version is copied whole, and any other change in a
/// transitional version is copied at once.
#[test]
fn gauges_of_uncounted_pods_wait_for_the_count() {
    let w = World::new().with_intent("a", 1, 0).reported("a", 1);
    let mut finishing = running();
    finishing["active"] = json!(1);
    finishing["ready"] = json!(1);
    finishing["uncountedTerminatedPods"] = json!({"succeeded": ["pod-uid-1"]});
    let d = w.mirror("a", 1, finishing.clone()).decide();
    assert!(d.chains.is_empty(), "{:?}", kinds(&d));

    // Counted: one write with the gauges and the counter together.
    let w = World::new().with_intent("a", 1, 0).reported("a", 1);
    let mut counted = finishing.clone();
    counted["succeeded"] = json!(1);
    counted["uncountedTerminatedPods"] = json!({});
    let status = written_status(&w.mirror("a", 1, counted).decide());
    assert_eq!(
        (status.active, status.ready, status.succeeded),
        (Some(1), Some(1), Some(1))
    );

    // Something else changed as well (a failure counted meanwhile): copied at once.
    let w = World::new().with_intent("a", 1, 0).reported("a", 1);
    let mut mixed = finishing;
    mixed["failed"] = json!(1);
    let status = written_status(&w.mirror("a", 1, mixed).decide());
    assert_eq!((status.active, status.failed), (Some(1), Some(1)));

    // The first report of a transitional status is written (the Dispatched marker).
    let mut first = running();
    first["active"] = json!(0);
    first["uncountedTerminatedPods"] = json!({"failed": ["pod-uid-2"]});
    let w = World::new().with_intent("a", 1, 0).mirror("a", 1, first);
    assert_eq!(
        kinds(&w.decide()),
        ["WriteOriginStatus", "Event(Dispatched)"]
    );
}

#[test]
fn spec_drift_flows_down() {
    let mut w = World::new()
        .with_intent("a", 1, 0)
        .reported("a", 1)
        .mirror("a", 1, running());
    w.origin["spec"]["parallelism"] = json!(1);
    w.origin["spec"]["suspend"] = json!(true);
    let d = w.decide();
    let patch = d
        .actions()
        .find_map(|a| match a {
            Action::PatchMirrorSpec { patch, uid, .. } => {
                Some((patch["spec"].clone(), uid.clone()))
            }
            _ => None,
        })
        .expect("drift patch");
    assert_eq!(
        patch,
        (
            json!({"parallelism": 1, "suspend": true}),
            "mirror-uid-1".to_string()
        )
    );
}

#[test]
fn foreign_job_on_the_chosen_cluster_moves_placement_on() {
    let mut w = World::new().with_intent("a", 1, 0);
    w.mirrors.insert("a".into(), foreign_job());
    let d = w.decide();
    assert_eq!(
        kinds(&d),
        [
            "Event(MirrorConflict)",
            "WriteIntent(b,2,0)",
            "Event(MirrorConflict)",
            "CreateMirror(b,2)"
        ]
    );
    // The same through a hint (the worker answered AlreadyExists; caches do not show foreign Jobs).
    let mut w = World::new().with_intent("a", 1, 0);
    w.foreign("a");
    assert_eq!(kinds(&w.decide())[1], "WriteIntent(b,2,0)");
    // Both clusters conflict: nowhere to go, nothing deleted.
    w.foreign("b");
    let d = w.decide();
    assert!(
        d.actions()
            .all(|a| !matches!(a, Action::DeleteMirror { .. } | Action::CreateMirror { .. }))
    );
    assert!(event_message(&d, "NoEligibleCluster").contains("holding another Job of that name"));
}

#[test]
fn first_placement_avoids_known_conflicts() {
    let mut w = World::new();
    w.foreign("a");
    assert_eq!(kinds(&w.decide())[0], "WriteIntent(b,1,0)");
}

#[test]
fn stale_mirrors_are_deleted_and_never_read() {
    let w = World::new()
        .with_intent("b", 2, 1)
        .reported("b", 2)
        .mirror("a", 1, complete())
        .mirror("b", 2, running());
    let d = w.decide();
    assert!(
        kinds(&d).contains(&"DeleteMirror(a,mirror-uid-1)".to_string()),
        "{:?}",
        kinds(&d)
    );
    for a in d.actions() {
        if let Action::WriteOriginStatus { status, .. } = a {
            assert!(
                finished(status).is_none(),
                "the stale mirror's Complete must not reach the origin"
            );
        }
    }
    assert!(
        matches!(d.actions().next(), Some(Action::DeleteMirror { .. })),
        "delete first"
    );
}

#[test]
fn a_committed_origin_is_finished_not_redispatched() {
    let mut w = World::new().with_intent("a", 1, 3).reported("a", 1);
    let mut status: JobStatus = serde_json::from_value(w.origin["status"].clone()).expect("status");
    status
        .conditions
        .get_or_insert_default()
        .push(k8s_openapi::api::batch::v1::JobCondition {
            type_: "SuccessCriteriaMet".into(),
            status: "True".into(),
            reason: Some("CompletionsReached".into()),
            message: Some("Reached expected number of succeeded pods".into()),
            ..Default::default()
        });
    w.origin["status"] = serde_json::to_value(&status).expect("status");
    let d = w.decide();
    assert_eq!(kinds(&d), ["WriteOriginStatus", "Event(MirrorLost)"]);
    assert_eq!(
        finished(&written_status(&d)),
        Some(crate::job::Finished::Complete)
    );
}

#[test]
fn terminal_origins_are_final() {
    let mut w = World::new()
        .with_intent("a", 1, 0)
        .reported("a", 1)
        .mirror("a", 1, complete());
    let done = written_status(&w.decide());
    w.origin["status"] = serde_json::to_value(&done).expect("status");
    // The origin finished at 09:10 (the mirror's time); the mirror goes 10 min later.
    w.now = ts("2026-05-01T09:15:00Z");
    let d = w.decide();
    assert!(d.chains.is_empty(), "the finished mirror stays for the TTL");
    assert_eq!(d.requeue, Some(Duration::from_secs(300)));
    w.now = ts("2026-05-01T09:20:00Z");
    assert_eq!(kinds(&w.decide()), ["DeleteMirror(a,mirror-uid-1)"]);
    w.config.finished_mirror_ttl = None;
    assert_eq!(w.decide(), Decision::default(), "never: kept");
    // A cluster being removed takes its finished mirrors along at once.
    w.clusters[0].draining = true;
    assert_eq!(kinds(&w.decide()), ["DeleteMirror(a,mirror-uid-1)"]);
    w.clusters[0].draining = false;
    // Mirror gone: nothing re-created, nothing re-dispatched.
    w.mirrors.insert("a".into(), MirrorObservation::Absent);
    assert!(w.decide().chains.is_empty());
    // A mirror still running under a finished origin (failed by Courier) is removed.
    let w = w.mirror("a", 1, running());
    assert_eq!(kinds(&w.decide()), ["DeleteMirror(a,mirror-uid-1)"]);
}

#[test]
fn deletion_removes_our_mirrors_then_the_finalizer() {
    let mut w = World::new()
        .with_intent("b", 2, 1)
        .reported("b", 2)
        .mirror("a", 1, running())
        .mirror("b", 2, running());
    w.mirrors.insert("c".into(), foreign_job());
    w.origin["metadata"]["deletionTimestamp"] = json!("2026-05-01T09:59:00Z");
    w.origin["metadata"]["finalizers"] = json!(["other/keep", "courier.dev/mirror-cleanup"]);
    let d = w.decide();
    assert_eq!(
        kinds(&d),
        [
            "DeleteMirror(a,mirror-uid-1)",
            "DeleteMirror(b,mirror-uid-2)",
            "RemoveFinalizer"
        ]
    );
    let Some(Action::RemoveFinalizer { patch }) = d.actions().last() else {
        panic!("finalizer last")
    };
    assert_eq!(
        patch,
        &json!({"metadata": {"resourceVersion": "10", "finalizers": ["other/keep"]}})
    );
}

#[test]
fn deletion_waits_for_an_unreachable_intent_cluster_but_not_forever() {
    let mut w = World::new().with_intent("a", 1, 0).reported("a", 1);
    w.mirrors.insert("a".into(), MirrorObservation::Unknown);
    w.clusters[0].ready = false;
    w.origin["metadata"]["deletionTimestamp"] = json!("2026-05-01T09:59:00Z");
    let d = w.decide();
    assert_eq!(kinds(&d), ["Requeue(30s)"]);
    assert!(matches!(d.wait, Some(Wait::DeletionBlocked { .. })));
    w.now = ts("2026-05-01T10:04:00Z");
    let d = w.decide();
    assert_eq!(kinds(&d), ["Event(MirrorOrphaned)", "RemoveFinalizer"]);
    // Without our finalizer there is nothing to hold.
    w.origin["metadata"]["finalizers"] = json!([]);
    w.now = t0();
    assert!(w.decide().chains.is_empty());
}

#[test]
fn a_missing_finalizer_is_restored() {
    let mut w = World::new()
        .with_intent("a", 1, 0)
        .reported("a", 1)
        .mirror("a", 1, running());
    w.origin["metadata"]["finalizers"] = json!([]);
    let d = w.decide();
    assert_eq!(kinds(&d)[0], "WriteIntent(a,1,0)");
    assert!(matches!(
        &acts(&d)[0],
        Action::WriteIntent {
            add_finalizer: true,
            ..
        }
    ));
}

#[test]
fn damaged_intent_metadata_falls_back_to_the_marker() {
    let mut w = World::new()
        .with_intent("a", 1, 0)
        .reported("a", 1)
        .mirror("a", 1, running());
    w.origin["metadata"]["annotations"]["courier.dev/epoch"] = json!("garbage");
    let d = w.decide();
    assert_eq!(kinds(&d)[0], "WriteIntent(a,1,0)", "repaired, mirror kept");
    assert!(!kinds(&d).iter().any(|k| k.starts_with("DeleteMirror")));
}

#[test]
fn one_origin_write_per_decision() {
    // Finalizer repair and a status change both pending: the status waits for the next reconcile.
    let mut w = World::new()
        .with_intent("a", 1, 0)
        .mirror("a", 1, running());
    w.origin["metadata"]["finalizers"] = json!([]);
    let d = w.decide();
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
    assert_eq!(origin_writes, 1);
    assert_eq!(d.wait, Some(Wait::OriginWriteDeferred));
}

#[test]
fn missing_origin_json_or_unbuildable_mirror_waits() {
    let w = World::new().with_intent("a", 1, 0);
    let d = w.decide_cached();
    assert!(d.needs_fresh_origin && d.chains.is_empty());
    let mut w = w;
    w.config.origin_id = "not a label".into();
    let d = w.decide();
    assert!(event_message(&d, "DispatchFailed").contains("cannot build the mirror"));
    assert!(matches!(d.wait, Some(Wait::MirrorUnbuildable { .. })));
}

#[test]
fn the_intent_cluster_cache_not_synced_is_waited_for() {
    let mut w = World::new().with_intent("a", 1, 0).reported("a", 1);
    w.mirrors.remove("a");
    let d = w.decide();
    assert_eq!(kinds(&d), ["WriteOriginStatus", "Requeue(5s)"]);
    assert_eq!(
        d.wait,
        Some(Wait::ClusterSyncing {
            cluster: "a".into()
        })
    );
}

mod lifecycle;
mod redispatch;
mod tenancy;
mod views;

mod after_write;
mod intent;
mod quiet;
