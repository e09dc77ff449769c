//! Read-only views of the controller's state for `courier jobs`, `courier explain`, `courier
//! cluster list`-style output and the in-process demo. Everything comes from the caches; nothing
//! here calls an API server. The types serialize to JSON for `-o json` style output.

use std::collections::BTreeMap;

use courier_core::ownership::{OriginIdentity, Ownership, classify};
use courier_core::phase::PhaseFacts;
use courier_core::reconcile::{Action, MirrorObservation};
use serde::Serialize;

use k8s_openapi::api::batch::v1::JobStatus;

use crate::origin::Ctx;
use crate::origin::reconcile::dry_run;
use crate::origin::store::OriginEntry;
use crate::queue::ObjectKey;
use crate::recent::EventSnapshot;

/// One WorkerCluster as this replica sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSnapshot {
    pub name: String,
    pub ready: bool,
    /// `Connected`, `SecretNotFound`, `InvalidKubeconfig`, `Unreachable`, `Unauthorized`,
    /// `Forbidden`, or `Pending` before the first probe.
    pub reason: String,
    pub message: String,
    /// RFC 3339 time of the last Ready/not-Ready transition.
    pub since: Option<String>,
    pub server_version: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub weight: i32,
    pub paused: bool,
    /// `spec.namespaces`: the worker's namespaces Courier may use (`None`: every one).
    pub namespaces: Option<Vec<String>>,
    /// RFC 3339 time of the last probe that got an answer or an error (`None` before the first).
    pub last_probe: Option<String>,
    /// Unfinished origins placed on the cluster.
    pub current_mirrors: u32,
    /// Mirrors of this origin id in the cluster's cache (any state, stale ones included).
    pub cached_mirrors: usize,
    pub cache_synced: bool,
}

pub use courier_core::phase::JobPhase;

/// One condition of a Job's status.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionSnapshot {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    /// RFC 3339.
    pub last_transition_time: Option<String>,
}

/// The conditions of a Job status, in the order the Job controller wrote them.
pub fn conditions_of(status: &JobStatus) -> Vec<ConditionSnapshot> {
    status
        .conditions
        .iter()
        .flatten()
        .map(|c| ConditionSnapshot {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone().filter(|r| !r.is_empty()),
            message: c.message.clone().filter(|m| !m.is_empty()),
            last_transition_time: c.last_transition_time.as_ref().map(|t| t.0.to_string()),
        })
        .collect()
}

/// One origin Job.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSnapshot {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub phase: JobPhase,
    /// The placement intent: cluster and epoch.
    pub cluster: Option<String>,
    pub epoch: Option<u64>,
    pub redispatches: u32,
    pub active: i32,
    pub succeeded: i32,
    pub failed: i32,
    pub completions: Option<i32>,
    /// What the last reconcile is waiting for, if anything.
    pub waiting: Option<String>,
    /// RFC 3339 creation time of the origin.
    pub created: Option<String>,
    /// The origin's `courier.dev/cluster-selector` annotation, if any.
    pub cluster_selector: Option<String>,
    /// The origin's status conditions.
    pub conditions: Vec<ConditionSnapshot>,
}

/// One cluster's view of an origin's name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MirrorSnapshot {
    pub cluster: String,
    pub observation: String,
    /// This is the current mirror (ours, on the intent cluster, with the current epoch).
    pub current: bool,
    /// The remote Job's status conditions (empty when there is none).
    pub conditions: Vec<ConditionSnapshot>,
}

/// What the controller knows and would do about one origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    pub job: JobSnapshot,
    pub mirrors: Vec<MirrorSnapshot>,
    /// The actions `decide` plans right now on the current caches (a dry run: nothing is done).
    pub plan: Vec<String>,
    /// What the plan is waiting for.
    pub waiting: Option<String>,
    /// The latest events Courier recorded about this origin, oldest first (kept in memory; events
    /// from the worker's own controllers are not among them).
    pub events: Vec<EventSnapshot>,
}

pub fn clusters(shared: &Ctx) -> Vec<ClusterSnapshot> {
    shared
        .registry
        .all()
        .into_iter()
        .map(|c| {
            let h = c.health();
            let wc = c.worker_cluster();
            ClusterSnapshot {
                name: c.name.clone(),
                ready: h.ready(),
                reason: h.reason.to_string(),
                message: h.message.clone(),
                since: h.since.map(|t| t.to_string()),
                server_version: h.server_version.clone(),
                labels: wc.metadata.labels.clone().unwrap_or_default(),
                weight: wc.spec.weight,
                paused: wc.spec.paused,
                namespaces: wc.spec.namespaces.clone(),
                last_probe: h.last_probe.map(|t| t.to_string()),
                current_mirrors: shared.origins.placed_on(&c.name),
                cached_mirrors: c.mirrors.len(),
                cache_synced: c.mirrors.is_synced(),
            }
        })
        .collect()
}

fn job(shared: &Ctx, key: &ObjectKey, e: &OriginEntry) -> JobSnapshot {
    let v = &e.view;
    let intent = v.intent();
    let phase = JobPhase::of(PhaseFacts {
        deleting: v.deletion_timestamp.is_some(),
        suspend: v.spec.suspend,
        status: &v.status,
        placed: intent.is_some(),
    });
    JobSnapshot {
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        uid: v.uid.clone(),
        phase,
        cluster: intent.as_ref().map(|i| i.cluster.clone()),
        epoch: intent.map(|i| i.epoch),
        redispatches: v.redispatches(),
        active: v.status.active.unwrap_or(0),
        succeeded: v.status.succeeded.unwrap_or(0),
        failed: v.status.failed.unwrap_or(0),
        completions: v.spec.completions,
        waiting: shared.wait_of(key),
        created: e.created.map(|t| t.to_string()),
        cluster_selector: v
            .annotations
            .get(courier_api::ANNOTATION_CLUSTER_SELECTOR)
            .cloned(),
        conditions: conditions_of(&v.status.expand()),
    }
}

pub fn jobs(shared: &Ctx) -> Vec<JobSnapshot> {
    let mut out: Vec<JobSnapshot> = shared
        .origins
        .entries()
        .iter()
        .map(|(k, e)| job(shared, k, e))
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

fn describe(action: &Action) -> String {
    match action {
        Action::WriteIntent {
            cluster,
            epoch,
            redispatches,
            add_finalizer,
            ..
        } => format!(
            "write the placement intent: cluster {cluster}, epoch {epoch}, re-dispatches {redispatches}{}",
            if *add_finalizer {
                ", add the finalizer"
            } else {
                ""
            }
        ),
        Action::EnsureNamespace {
            cluster, namespace, ..
        } => {
            format!("create namespace {namespace} on {cluster} if missing")
        }
        Action::CreateMirror { cluster, epoch, .. } => {
            format!("create the mirror on {cluster} (epoch {epoch})")
        }
        Action::PatchMirrorSpec { cluster, patch, .. } => {
            format!("update the mirror on {cluster}: {patch}")
        }
        Action::DeleteMirror { cluster, uid, .. } => {
            format!("delete the mirror on {cluster} (uid {uid}, Background)")
        }
        Action::WriteOriginStatus { patch, .. } => {
            format!(
                "write the origin status: {}",
                patch.get("status").unwrap_or(patch)
            )
        }
        Action::RemoveFinalizer { .. } => "remove the finalizer".to_string(),
        Action::Event {
            reason,
            type_,
            message,
        } => format!("event {} {reason}: {message}", type_.as_str()),
    }
}

pub fn explain(shared: &Ctx, key: &ObjectKey) -> Option<Explanation> {
    let (inputs, decision) = dry_run(shared, key)?;
    let v = &inputs.entry.view;
    let identity = OriginIdentity {
        origin_id: &shared.cfg.origin_id,
        origin_uid: &v.uid,
    };
    let intent = v.intent();
    let mirrors = inputs
        .mirrors
        .iter()
        .map(|(cluster, o)| match o {
            MirrorObservation::Unknown => MirrorSnapshot {
                cluster: cluster.to_string(),
                observation: "unknown (cluster not Ready or its cache not synced)".into(),
                current: false,
                conditions: Vec::new(),
            },
            MirrorObservation::Absent => MirrorSnapshot {
                cluster: cluster.to_string(),
                observation: "no Job with this name".into(),
                current: false,
                conditions: Vec::new(),
            },
            MirrorObservation::Present(m) => {
                let verdict = classify(&m.labels, cluster, identity, intent.as_ref());
                let phase = JobPhase::of(PhaseFacts {
                    deleting: m.deleting,
                    suspend: m.spec.get("suspend").and_then(|s| s.as_bool()) == Some(true),
                    status: &m.status,
                    placed: true,
                });
                let state = format!(
                    "{phase}: active {}, succeeded {}, failed {}",
                    m.status.active.unwrap_or(0),
                    m.status.succeeded.unwrap_or(0),
                    m.status.failed.unwrap_or(0)
                );
                MirrorSnapshot {
                    cluster: cluster.to_string(),
                    observation: format!(
                        "{} (epoch label {}): {state}",
                        match &verdict {
                            Ownership::Current => "current mirror".to_string(),
                            Ownership::Stale { .. } => "stale mirror (fenced)".to_string(),
                            Ownership::Foreign => "someone else's Job (never touched)".to_string(),
                            Ownership::OtherOrigin { origin_id } =>
                                format!("a mirror of management cluster {origin_id}"),
                        },
                        m.labels
                            .get(courier_api::LABEL_EPOCH)
                            .map(String::as_str)
                            .unwrap_or("missing")
                    ),
                    current: verdict == Ownership::Current,
                    conditions: conditions_of(&m.status.expand()),
                }
            }
        })
        .collect();
    Some(Explanation {
        job: job(shared, key, &inputs.entry),
        mirrors,
        plan: decision
            .actions()
            .map(describe)
            .chain(
                decision
                    .requeue
                    .map(|after| format!("look again in {}", crate::errors::human(after))),
            )
            .collect(),
        waiting: decision.wait.map(|w| w.to_string()),
        events: shared.recorder.log.of(key, &v.uid),
    })
}
