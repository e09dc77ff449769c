//! Reconcile rules a user can see, written from the module docs of `courier_core::reconcile` (the
//! rules list, DESIGN.md invariants 1-10), docs/architecture.md and docs/placement.md, not from the
//! code (issue #12 §11: these kill mutants of `reconcile.rs` and `reconcile/{paths,plan}.rs` that
//! cargo-mutants found surviving; docs/testing.md lists them). Each test names the rule it holds.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use courier_api::CONDITION_PLACED;
use courier_api::reasons::{
    EVENT_DISPATCHED, EVENT_MIRROR_ORPHANED, EVENT_REDISPATCHED, REASON_MIRROR_REJECTED,
    REASON_NAMESPACE_MISSING, REASON_NO_ELIGIBLE_CLUSTER,
};
use courier_core::dispatched;
use courier_core::ownership::Intent;
use courier_core::placement::ClusterView;
use courier_core::reconcile::{
    Action, AvoidKind, Decision, DispatchConfig, EventType, Hints, MirrorObservation, MirrorView,
    OriginView, ReconcileInput, Wait, decide,
};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::JobStatus;
use serde_json::{Value, json};

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn t0() -> Timestamp {
    ts("2026-05-01T10:00:00Z")
}

fn origin_json() -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "uid": "uid-1", "resourceVersion": "10",
                     "generation": 1},
        "spec": {"managedBy": "courier.dev/dispatcher", "parallelism": 2, "completions": 3,
                 "backoffLimit": 6, "suspend": false, "completionMode": "NonIndexed",
                 "template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "i"}]}}},
        "status": {}
    })
}

fn cluster(name: &str) -> ClusterView {
    support::cluster_view(name, &[("region", "eu")])
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

/// The management cluster's origin, the workers' caches and the controller's settings.
struct World {
    origin: Value,
    clusters: Vec<ClusterView>,
    mirrors: BTreeMap<Arc<str>, MirrorObservation>,
    config: DispatchConfig,
    hints: Hints,
    now: Timestamp,
}

impl World {
    fn new(clusters: &[&str]) -> Self {
        Self {
            origin: origin_json(),
            clusters: clusters.iter().map(|c| cluster(c)).collect(),
            mirrors: clusters
                .iter()
                .map(|c| (Arc::from(*c), MirrorObservation::Absent))
                .collect(),
            config: DispatchConfig {
                origin_id: "mgmt".into(),
                ..DispatchConfig::default()
            },
            hints: Hints::default(),
            now: t0(),
        }
    }

    /// Decides on a fresh read of the origin (`fresh`) or on the cached view only.
    fn decide_with(&self, fresh: bool) -> Decision {
        let view = OriginView::from_json(&self.origin).expect("origin view");
        let labels = courier_core::placement::namespace_labels("ml", None);
        decide(&ReconcileInput {
            origin: &view,
            origin_json: fresh.then_some(&self.origin),
            mirrors: &self.mirrors,
            clusters: &self.clusters,
            namespace_labels: &labels,
            config: &self.config,
            hints: &self.hints,
            now: self.now,
        })
    }

    fn decide(&self) -> Decision {
        self.decide_with(true)
    }

    /// Courier placed the origin on `cluster` as `epoch` (intent and finalizer written).
    fn intent(mut self, cluster: &str, epoch: u64) -> Self {
        let meta = &mut self.origin["metadata"];
        meta["labels"] = json!({"courier.dev/cluster": cluster});
        meta["annotations"] =
            json!({"courier.dev/epoch": epoch.to_string(), "courier.dev/redispatches": "0"});
        meta["finalizers"] = json!(["courier.dev/mirror-cleanup"]);
        self
    }

    /// The origin's status records that `cluster`/`epoch` reported (the Dispatched marker).
    fn reported(mut self, cluster: &str, epoch: u64) -> Self {
        let mut conditions = Vec::new();
        let intent = Intent {
            cluster: cluster.into(),
            epoch,
        };
        dispatched::record(&mut conditions, &intent, t0());
        self.origin["status"] = json!({
            "startTime": "2026-05-01T09:00:00Z", "active": 2, "ready": 2, "terminating": 0,
            "conditions": serde_json::to_value(conditions).expect("conditions")
        });
        self
    }

    /// Our mirror of `epoch` on `cluster`, as its worker's cache shows it.
    fn mirror(mut self, cluster: &str, epoch: u64, status: Value) -> Self {
        let mut m =
            courier_core::mirror::mirror_for(&origin_json(), "mgmt", epoch).expect("mirror");
        m["metadata"]["uid"] = json!(format!("uid-{cluster}-{epoch}"));
        m["status"] = status;
        self.mirrors.insert(
            cluster.into(),
            MirrorObservation::Present(std::sync::Arc::new(
                MirrorView::from_json(&m).expect("mirror view"),
            )),
        );
        self
    }

    /// The mirror on `cluster` has a deletionTimestamp.
    fn deleting(mut self, cluster: &str) -> Self {
        if let Some(MirrorObservation::Present(m)) = self.mirrors.get_mut(cluster) {
            std::sync::Arc::make_mut(m).deleting = true;
        }
        self
    }

    fn avoid(&mut self, cluster: &str, kind: AvoidKind, message: &str) {
        let (now, config) = (self.now, self.config.clone());
        self.hints.avoid(cluster, kind, message, now, &config);
    }

    fn view(&mut self, name: &str) -> &mut ClusterView {
        self.clusters
            .iter_mut()
            .find(|c| &*c.name == name)
            .expect("a registered cluster")
    }

    /// `cluster` has not been Ready since `ago` before now.
    fn not_ready_for(&mut self, cluster: &str, ago: Duration) {
        let since = self.now - SignedDuration::try_from(ago).expect("duration");
        let view = self.view(cluster);
        view.ready = false;
        view.not_ready_since = Some(since);
    }
}

fn deletes(d: &Decision) -> Vec<String> {
    d.actions()
        .filter_map(|a| match a {
            Action::DeleteMirror { cluster, uid, .. } => Some(format!("{cluster}:{uid}")),
            _ => None,
        })
        .collect()
}

fn creates(d: &Decision) -> Vec<String> {
    d.actions()
        .filter_map(|a| match a {
            Action::CreateMirror { cluster, epoch, .. } => Some(format!("{cluster}:{epoch}")),
            _ => None,
        })
        .collect()
}

fn events(d: &Decision) -> Vec<(&'static str, EventType, String)> {
    d.actions()
        .filter_map(|a| match a {
            Action::Event {
                reason,
                type_,
                message,
            } => Some((*reason, *type_, message.clone())),
            _ => None,
        })
        .collect()
}

fn event(d: &Decision, reason: &str) -> String {
    events(d)
        .into_iter()
        .find(|(r, _, _)| *r == reason)
        .map(|(_, _, m)| m)
        .unwrap_or_else(|| panic!("no {reason} event in {:?}", d.chains))
}

fn written_status(d: &Decision) -> Option<JobStatus> {
    d.actions().find_map(|a| match a {
        Action::WriteOriginStatus { status, .. } => Some(status.expand()),
        _ => None,
    })
}

/// The `courier.dev/Placed` condition written, as (status, reason, message).
fn placed(d: &Decision) -> (String, String, String) {
    let c = written_status(d)
        .and_then(|s| s.conditions)
        .and_then(|cs| cs.into_iter().find(|c| c.type_ == CONDITION_PLACED))
        .unwrap_or_else(|| panic!("no Placed condition written: {:?}", d.chains));
    (
        c.status,
        c.reason.unwrap_or_default(),
        c.message.unwrap_or_default(),
    )
}

// ---- fencing: stale mirrors ----

/// "Stale mirrors (older epochs, other clusters) are deleted whenever their cluster is reachable
/// ...; one ahead of the cached intent only on a fresh read of the origin." A stale mirror of an
/// older or the same epoch is deleted on the cached view; only one ahead of it waits for a fresh
/// read.
#[test]
fn stale_mirrors_are_deleted_on_the_cached_view_unless_ahead_of_it() {
    for (epoch, ahead) in [(1, false), (2, false), (3, true)] {
        let w = World::new(&["a", "b"])
            .intent("b", 2)
            .reported("b", 2)
            .mirror("b", 2, running())
            .mirror("a", epoch, running());
        let cached = w.decide_with(false);
        let stale = format!("a:uid-a-{epoch}");
        if ahead {
            assert!(
                cached.needs_fresh_origin && cached.chains.is_empty(),
                "epoch {epoch} is ahead of the cached intent (2): {cached:?}"
            );
        } else {
            assert!(
                !cached.needs_fresh_origin,
                "epoch {epoch} is not ahead of the cached intent (2): {cached:?}"
            );
            assert_eq!(
                deletes(&cached),
                std::slice::from_ref(&stale),
                "epoch {epoch}"
            );
        }
        // A fresh read may condemn any of them.
        assert_eq!(deletes(&w.decide()), [stale], "epoch {epoch}, fresh read");
    }
}

/// "Stale before new": the new epoch's mirror waits while an unfinished mirror of ours is seen
/// elsewhere, whatever its epoch (here the same number on another cluster).
#[test]
fn a_new_epoch_waits_for_an_unfinished_mirror_elsewhere_even_of_the_same_epoch() {
    let w = World::new(&["a", "b"])
        .intent("b", 2)
        .mirror("a", 2, running());
    let d = w.decide();
    assert_eq!(creates(&d), Vec::<String>::new(), "{d:?}");
    assert_eq!(deletes(&d), ["a:uid-a-2"]);
    assert_eq!(
        d.wait,
        Some(Wait::StaleMirrorsFirst {
            clusters: vec!["a".into()],
            epoch: 2
        })
    );
}

// ---- no cluster can take the Job: the Placed condition's reason and message ----

/// docs/placement.md and the reconcile rules: with no cluster left, `Placed=False` says why:
/// `MirrorRejected` when every cluster that could take the Job refused it (clusters the selector
/// or namespace selector exclude do not count), `NamespaceMissing` when every one lacks the Job's
/// namespace, `NoEligibleCluster` otherwise.
#[test]
fn the_placed_reason_names_the_refusal_only_when_every_candidate_refused() {
    let reason = |w: &World| {
        let d = w.decide();
        assert!(creates(&d).is_empty(), "{d:?}");
        placed(&d).1
    };
    // Both refused.
    let mut w = World::new(&["a", "b"]);
    w.avoid("a", AvoidKind::Refused, "quota");
    w.avoid("b", AvoidKind::Refused, "denied");
    assert_eq!(reason(&w), REASON_MIRROR_REJECTED);
    // One refused, the other outside the selector: still only refusals.
    let mut w = World::new(&["a", "b"]);
    w.origin["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": "region=eu"});
    Arc::make_mut(&mut w.view("b").labels).insert("region".into(), "us".into());
    w.avoid("a", AvoidKind::Refused, "quota");
    assert_eq!(reason(&w), REASON_MIRROR_REJECTED);
    // One refused, the other not Ready: not only refusals.
    let mut w = World::new(&["a", "b"]);
    w.avoid("a", AvoidKind::Refused, "quota");
    w.view("b").ready = false;
    assert_eq!(reason(&w), REASON_NO_ELIGIBLE_CLUSTER);
    // Only the selector excludes them: no refusal at all.
    let mut w = World::new(&["a", "b"]);
    w.origin["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": "region=us"});
    assert_eq!(reason(&w), REASON_NO_ELIGIBLE_CLUSTER);
    // Every candidate lacks the namespace.
    let mut w = World::new(&["a", "b"]);
    w.avoid(
        "a",
        AvoidKind::NamespaceMissing,
        "namespace ml is missing on a",
    );
    w.avoid(
        "b",
        AvoidKind::NamespaceMissing,
        "namespace ml is missing on b",
    );
    assert_eq!(reason(&w), REASON_NAMESPACE_MISSING);
    // One lacks it, the other refused: a refusal, not a missing namespace.
    let mut w = World::new(&["a", "b"]);
    w.avoid(
        "a",
        AvoidKind::NamespaceMissing,
        "namespace ml is missing on a",
    );
    w.avoid("b", AvoidKind::Refused, "denied");
    assert_eq!(reason(&w), REASON_MIRROR_REJECTED);
}

/// The intent cluster refused the mirror and no other can take the Job: the message quotes that
/// refusal once, adds every other refusal in force, and leaves name conflicts to the per-cluster
/// list (they are not refusals).
#[test]
fn a_refusal_with_nowhere_to_go_quotes_each_refusal_once() {
    let mut w = World::new(&["a", "b", "c"]).intent("a", 1);
    w.avoid("a", AvoidKind::Refused, "exceeded quota");
    w.avoid("b", AvoidKind::Foreign, "AlreadyExists: another train");
    w.avoid("c", AvoidKind::Refused, "admission denied");
    let d = w.decide();
    assert!(creates(&d).is_empty(), "{d:?}");
    let (status, reason, message) = placed(&d);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "MirrorRejected")
    );
    assert_eq!(
        message
            .matches("WorkerCluster a refused the mirror: exceeded quota")
            .count(),
        1,
        "{message}"
    );
    assert!(
        message.contains("WorkerCluster c refused the mirror: admission denied"),
        "{message}"
    );
    assert!(!message.contains("AlreadyExists"), "{message}");
    assert!(
        message.contains("holding another Job of that name: b"),
        "{message}"
    );
}

/// A create the intent cluster did not answer, or answered "no such namespace", with nowhere else
/// to go: the per-cluster list says what happened there (not "refused").
#[test]
fn an_unanswered_or_namespace_less_intent_cluster_is_described_as_such() {
    for (kind, said, words) in [
        (
            AvoidKind::Unanswered,
            "no answer within 10s",
            "did not answer: a",
        ),
        (
            AvoidKind::NamespaceMissing,
            "namespace ml does not exist on a",
            "lacking the Job's namespace: a",
        ),
    ] {
        let mut w = World::new(&["a", "b"]).intent("a", 1);
        w.origin["metadata"]["annotations"]["courier.dev/cluster-selector"] = json!("region=eu");
        Arc::make_mut(&mut w.view("b").labels).insert("region".into(), "us".into());
        w.view("a").degraded = true;
        w.mirrors.insert("a".into(), MirrorObservation::Unknown);
        w.avoid("a", kind, said);
        let d = w.decide();
        assert!(creates(&d).is_empty(), "{kind:?}: {d:?}");
        let message = placed(&d).2;
        assert!(message.contains(words), "{kind:?}: {message}");
        assert!(!message.contains("refused"), "{kind:?}: {message}");
        if kind == AvoidKind::NamespaceMissing {
            // The controller's own message names the cluster, the namespace and the fix.
            assert!(message.starts_with(said), "{message}");
        }
    }
}

// ---- following the current mirror ----

/// "`Dispatched`" is the first report of an epoch: later status copies are not announced again.
#[test]
fn the_dispatched_event_announces_only_the_first_report() {
    let first = World::new(&["a", "b"])
        .intent("a", 1)
        .mirror("a", 1, running());
    let d = first.decide();
    assert!(event(&d, EVENT_DISPATCHED).contains("ml/train"), "{d:?}");
    let later = World::new(&["a", "b"])
        .intent("a", 1)
        .reported("a", 1)
        .mirror("a", 1, complete());
    let d = later.decide();
    assert!(written_status(&d).is_some(), "the finish is copied: {d:?}");
    assert!(
        events(&d).iter().all(|(r, _, _)| *r != EVENT_DISPATCHED),
        "{d:?}"
    );
}

/// "The intent cluster not Ready for longer than `worker_lost_timeout` ...: re-dispatch elsewhere
/// ... unless `redispatch_on_worker_loss` is off": then the Job waits for it (and says so), and a
/// finished mirror there is simply copied.
#[test]
fn a_lost_worker_is_waited_for_when_redispatch_on_loss_is_off() {
    let mut w = World::new(&["a", "b"])
        .intent("a", 1)
        .reported("a", 1)
        .mirror("a", 1, running());
    w.config.redispatch_on_worker_loss = false;
    w.not_ready_for("a", Duration::from_secs(600));
    let d = w.decide();
    assert!(creates(&d).is_empty(), "{d:?}");
    assert!(
        !d.actions().any(|a| matches!(a, Action::WriteIntent { .. })),
        "{d:?}"
    );
    assert_eq!(
        d.wait,
        Some(Wait::WorkerLost {
            cluster: "a".into()
        })
    );
    // Its mirror finished: the outcome is copied and nothing is waited for.
    for redispatch in [false, true] {
        let mut w = World::new(&["a", "b"])
            .intent("a", 1)
            .reported("a", 1)
            .mirror("a", 1, complete());
        w.config.redispatch_on_worker_loss = redispatch;
        w.not_ready_for("a", Duration::from_secs(600));
        let d = w.decide();
        let status = written_status(&d).expect("the finish is copied");
        assert_eq!(status.succeeded, Some(3));
        assert_eq!(d.wait, None, "redispatch {redispatch}: {d:?}");
        assert!(creates(&d).is_empty(), "{d:?}");
    }
}

/// A not-Ready intent cluster: the mirror counts as lost at `not_ready_since +
/// worker_lost_timeout`, so the Job is looked at again then, not only at the next event.
#[test]
fn a_not_ready_worker_is_looked_at_again_when_its_mirror_counts_as_lost() {
    let mut w = World::new(&["a", "b"])
        .intent("a", 1)
        .reported("a", 1)
        .mirror("a", 1, running());
    w.not_ready_for("a", Duration::from_secs(200));
    let d = w.decide();
    assert_eq!(d.requeue, Some(Duration::from_secs(100)), "{d:?}");
}

/// Spec changes flow down to an *unfinished* current mirror that is not being deleted; a mirror
/// being deleted by someone else is waited for, a finished one is left alone.
#[test]
fn spec_changes_reach_only_a_running_mirror_and_a_deleted_one_is_waited_for() {
    let changed = |w: World| {
        let mut w = w;
        w.origin["spec"]["parallelism"] = json!(1);
        w.origin["metadata"]["generation"] = json!(2);
        w
    };
    let patches = |d: &Decision| {
        d.actions()
            .filter(|a| matches!(a, Action::PatchMirrorSpec { .. }))
            .count()
    };
    let base = || World::new(&["a", "b"]).intent("a", 1).reported("a", 1);
    // Running: patched, nothing waited for.
    let d = changed(base().mirror("a", 1, running())).decide();
    assert_eq!(patches(&d), 1, "{d:?}");
    assert_eq!(d.wait, None);
    // Running but being deleted: not patched; waited for.
    let d = changed(base().mirror("a", 1, running()).deleting("a")).decide();
    assert_eq!(patches(&d), 0, "{d:?}");
    assert_eq!(
        d.wait,
        Some(Wait::MirrorDeleting {
            cluster: "a".into()
        })
    );
    assert_eq!(d.requeue, Some(Duration::from_secs(5)));
    // Finished: not patched (its run is over).
    let d = changed(base().mirror("a", 1, complete())).decide();
    assert_eq!(patches(&d), 0, "{d:?}");
    // Finished and being deleted: the outcome is copied, nothing is waited for.
    let d = changed(base().mirror("a", 1, complete()).deleting("a")).decide();
    assert_eq!(patches(&d), 0, "{d:?}");
    assert_eq!(d.wait, None, "{d:?}");
    assert!(written_status(&d).is_some());
}

// ---- texts a user reads: Events, waits, durations ----

/// The re-dispatch Event of a lost worker names the worker, since when, and the timeout in the
/// units a user wrote it in (`--worker-lost-timeout 90s` reads "1m30s").
#[test]
fn a_lost_worker_redispatch_names_the_worker_and_the_timeout() {
    for (secs, words) in [
        (45, "45s"),
        (90, "1m30s"),
        (300, "5m"),
        (7200, "2h"),
        (3661, "1h1m1s"),
    ] {
        let timeout = Duration::from_secs(secs);
        let mut w = World::new(&["a", "b"]).intent("a", 1).reported("a", 1);
        w.mirrors.insert("a".into(), MirrorObservation::Unknown);
        w.config.worker_lost_timeout = timeout;
        w.not_ready_for("a", timeout + Duration::from_secs(1));
        let since = w.now - SignedDuration::from_secs(i64::try_from(secs + 1).expect("secs"));
        let d = w.decide();
        let (reason, type_, message) = events(&d)
            .into_iter()
            .find(|(r, _, _)| *r == EVENT_REDISPATCHED)
            .unwrap_or_else(|| panic!("{secs}s: no Redispatched event: {d:?}"));
        assert_eq!((reason, type_.as_str()), (EVENT_REDISPATCHED, "Warning"));
        assert_eq!(
            message,
            format!(
                "WorkerCluster a has not been Ready since {since} (worker-lost timeout {words}): \
                 re-dispatched to b as epoch 2 (re-dispatch 1 of 3)"
            )
        );
    }
}

/// Deletion with the intent cluster unreachable past the timeout: `MirrorOrphaned` names the
/// cluster, how long it was waited for and the epoch left to garbage collection.
#[test]
fn an_orphaned_mirror_event_names_cluster_wait_and_epoch() {
    let mut w = World::new(&["a", "b"]).intent("a", 3);
    w.mirrors.insert("a".into(), MirrorObservation::Unknown);
    w.origin["metadata"]["deletionTimestamp"] = json!("2026-05-01T09:00:00Z");
    let d = w.decide();
    let (_, type_, message) = events(&d)
        .into_iter()
        .find(|(r, _, _)| *r == EVENT_MIRROR_ORPHANED)
        .unwrap_or_else(|| panic!("no MirrorOrphaned: {d:?}"));
    assert_eq!(type_.as_str(), "Warning");
    assert_eq!(EventType::Normal.as_str(), "Normal");
    assert_eq!(
        message,
        "WorkerCluster a stayed unreachable for 5m after deletion started; its mirror (epoch 3), \
         if any, is left to garbage collection"
    );
}

/// What `courier explain` and the logs print for each wait names the cluster (and the time) it
/// is about.
#[test]
fn every_wait_names_what_it_waits_for() {
    let t = ts("2026-05-01T10:05:00Z");
    let cases = [
        (
            Wait::Suspended,
            "the Job is suspended and has not been dispatched",
        ),
        (
            Wait::NoEligibleCluster {
                message: "no WorkerCluster is registered".into(),
            },
            "no WorkerCluster is registered",
        ),
        (
            Wait::ClusterNotReady {
                cluster: "w1".into(),
                lost_at: Some(t),
            },
            "WorkerCluster w1 is not Ready; its mirror counts as lost at 2026-05-01T10:05:00Z",
        ),
        (
            Wait::ClusterNotReady {
                cluster: "w1".into(),
                lost_at: None,
            },
            "WorkerCluster w1 is not Ready",
        ),
        (
            Wait::ClusterSyncing {
                cluster: "w1".into(),
            },
            "waiting for the Job cache of WorkerCluster w1 to sync",
        ),
        (
            Wait::WorkerLost {
                cluster: "w1".into(),
            },
            "WorkerCluster w1 is lost and re-dispatch on worker loss is disabled; waiting for it",
        ),
        (
            Wait::MirrorDeleting {
                cluster: "w1".into(),
            },
            "the mirror on w1 is being deleted",
        ),
        (
            Wait::StaleMirrorInTheWay {
                cluster: "w1".into(),
            },
            "an older mirror on w1 is being deleted first",
        ),
        (
            Wait::StaleMirrorsFirst {
                clusters: vec!["w1".into(), "w2".into()],
                epoch: 4,
            },
            "waiting for older mirrors on w1, w2 to be deleted before epoch 4 starts",
        ),
        (
            Wait::MirrorUnbuildable {
                message: "bad template".into(),
            },
            "cannot build the mirror: bad template",
        ),
        (
            Wait::DeletionBlocked {
                cluster: "w1".into(),
                until: t,
            },
            "deleting: WorkerCluster w1 is unreachable; the finalizer is held until 2026-05-01T10:05:00Z",
        ),
        (Wait::OriginWriteDeferred, "another origin write follows"),
    ];
    for (wait, text) in cases {
        assert_eq!(wait.to_string(), text);
    }
}

/// A decision that needs a fresh read of the origin still says what it waits for (the stale
/// mirror ahead of the cache is not deleted on the cached view; the intent cluster's cache is not
/// synced).
#[test]
fn a_decision_asking_for_a_fresh_read_keeps_its_wait() {
    let mut w = World::new(&["a", "b"])
        .intent("a", 1)
        .mirror("b", 2, running());
    w.mirrors.insert("a".into(), MirrorObservation::Unknown);
    let d = w.decide_with(false);
    assert!(d.needs_fresh_origin, "{d:?}");
    assert_eq!(
        d.wait,
        Some(Wait::ClusterSyncing {
            cluster: "a".into()
        })
    );
}

/// An unanswered create counts only against a worker that does not answer (not Ready, or its
/// calls stall): a Ready worker that dropped one connection is chosen again at once; a stalled
/// one is skipped, and with nowhere else to go the Job says it did not answer.
#[test]
fn an_unanswered_create_excludes_only_a_worker_that_does_not_answer() {
    let mut w = World::new(&["a", "b"]);
    w.avoid("a", AvoidKind::Unanswered, "connection reset");
    assert_eq!(creates(&w.decide()), ["a:1"]);
    let mut w = World::new(&["a", "b"]);
    w.origin["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": "region=eu"});
    Arc::make_mut(&mut w.view("b").labels).insert("region".into(), "us".into());
    w.view("a").degraded = true;
    w.avoid("a", AvoidKind::Unanswered, "no answer within 10s");
    let d = w.decide();
    assert!(creates(&d).is_empty(), "{d:?}");
    let message = placed(&d).2;
    assert!(message.contains("did not answer: a"), "{message}");
}

/// An origin's label or annotation is read only up to `MAX_ORIGIN_VALUE` bytes: a value of exactly
/// that length is read, a longer one is treated as absent and named as over-long (a cluster selector
/// then is not guessed at).
#[test]
fn origin_values_are_read_up_to_the_documented_length() {
    use courier_core::reconcile::view::MAX_ORIGIN_VALUE;
    for (len, read) in [(MAX_ORIGIN_VALUE, true), (MAX_ORIGIN_VALUE + 1, false)] {
        let mut origin = origin_json();
        let value = "x".repeat(len);
        origin["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": value});
        let view = OriginView::from_json(&origin).expect("origin view");
        assert_eq!(
            view.annotations.get("courier.dev/cluster-selector"),
            read.then_some(&value),
            "{len} bytes"
        );
        assert_eq!(
            view.oversized,
            if read {
                Vec::<String>::new()
            } else {
                vec!["courier.dev/cluster-selector".to_string()]
            },
            "{len} bytes"
        );
    }
}

/// A refusal verdict is in force for its backoff period and no longer: at its expiry the cluster
/// takes the Job again, on a first placement as on the intent cluster (`refusal-backoff-min` 30 s).
#[test]
fn a_refusal_verdict_ends_at_its_expiry() {
    let mut w = World::new(&["a", "b"]);
    w.avoid("a", AvoidKind::Refused, "quota");
    assert_eq!(creates(&w.decide()), ["b:1"], "in force");
    w.now = ts("2026-05-01T10:00:30Z");
    assert_eq!(creates(&w.decide()), ["a:1"], "expired");
}

/// "A change the worker refuses is applied by creating the mirror again when nothing runs
/// (suspended, no active pods), otherwise announced once": a mirror that is not suspended, or
/// suspended with pods still active, is not recreated.
#[test]
fn a_refused_change_recreates_only_a_suspended_mirror_without_active_pods() {
    use courier_api::reasons::{EVENT_MIRROR_OUT_OF_SYNC, EVENT_MIRROR_RECREATED};
    use courier_core::reconcile::OutOfSync;
    for (suspended, active, recreated) in [(true, 0, true), (false, 0, false), (true, 1, false)] {
        let mut w = World::new(&["a", "b"])
            .intent("a", 1)
            .reported("a", 1)
            .mirror("a", 1, json!({"active": active}));
        if let Some(MirrorObservation::Present(m)) = w.mirrors.get_mut("a") {
            std::sync::Arc::make_mut(m)
                .spec
                .set("suspend", json!(suspended));
        }
        w.origin["spec"]["suspend"] = json!(suspended);
        w.origin["spec"]["parallelism"] = json!(4);
        w.origin["metadata"]["generation"] = json!(2);
        w.hints.out_of_sync = Some(OutOfSync {
            mirror_uid: "uid-a-1".into(),
            generation: Some(2),
            message: "denied by policy".into(),
            announced: false,
        });
        let d = w.decide();
        let reasons: Vec<&str> = events(&d).iter().map(|(r, _, _)| *r).collect();
        let case = format!(
            "suspended {suspended}, active {active}: {reasons:?} {:?}",
            d.wait
        );
        if recreated {
            assert!(
                reasons.contains(&EVENT_MIRROR_RECREATED)
                    || d.wait == Some(Wait::OriginWriteDeferred),
                "{case}"
            );
        } else {
            assert!(reasons.contains(&EVENT_MIRROR_OUT_OF_SYNC), "{case}");
            assert!(!reasons.contains(&EVENT_MIRROR_RECREATED), "{case}");
        }
    }
}
