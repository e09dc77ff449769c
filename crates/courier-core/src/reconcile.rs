//! `decide`: the whole controller brain for one origin Job. Given what the caches show (the origin,
//! every worker's view of its mirror, the registered clusters) it returns the ordered API calls the
//! I/O shell should make. No I/O, no clock: `now` is an input.
//!
//! # Contract with the I/O shell
//! - Perform [`Decision::actions`] in order; **stop at the first failure** and requeue with backoff.
//!   The order is what makes a crash or failure at any point safe: the intent is written on the
//!   origin before any mirror for it is created, and an event announcing a step follows the write
//!   that commits it.
//! - Origin writes carry `metadata.resourceVersion` (merge patches), so a decision made from a stale
//!   cache fails with 409 Conflict instead of acting on old data. Each decision writes the origin at
//!   most once; the write triggers the next reconcile, which continues from the new state.
//! - `CreateMirror` answered 409 AlreadyExists: read the existing Job and
//!   [`classify`](crate::ownership::classify) it. `Current`: it is ours (a retried create) — adopt it
//!   and carry on. `Stale`: an older mirror of ours holds the name — stop and requeue (the next
//!   decision deletes it first). `Foreign`/`OtherOrigin`: remember the cluster in
//!   [`Hints::foreign_on`] for this origin and requeue (the next decision moves on).
//! - `DeleteMirror` answered 404, or 409 on the UID precondition (the name now belongs to another
//!   Job): done.
//! - `Requeue` asks for another reconcile after the duration even if nothing changes.
//!
//! # Rules (DESIGN.md invariants 1-7)
//! - Only origins with `spec.managedBy: courier.dev/dispatcher`; only remote Jobs whose labels make
//!   them this origin's mirrors (`Current` or `Stale`) are patched or deleted.
//! - A suspended origin that was never dispatched is not dispatched (it shows `Suspended=True`).
//! - First placement: intent (cluster label, epoch and re-dispatch annotations, finalizer) in one
//!   origin patch, then namespace, then mirror.
//! - A Job with our name but not ours on the intent cluster: `MirrorConflict`, and the next cluster
//!   gets a new epoch — not counted as a re-dispatch unless our mirror had already reported there.
//! - Stale mirrors (older epochs, other clusters) are deleted whenever their cluster is reachable,
//!   whatever the origin's state, and their status is never read.
//! - The current mirror vanished after reporting (the `courier.dev/Dispatched` marker names its
//!   epoch) while the origin is unfinished: re-dispatch with the next epoch (`Redispatched`), at most
//!   `max_redispatch` times, then fail the origin (`FailureTarget`+`Failed`, reason `DispatchFailed`).
//!   A mirror that never reported is simply (re-)created: nothing was lost.
//! - The intent cluster not Ready for longer than `worker_lost_timeout` (or no longer registered):
//!   re-dispatch elsewhere, counted if the mirror had reported, unless `redispatch_on_worker_loss` is
//!   off. When that worker comes back its mirror is stale and deleted.
//! - An origin that already carries `SuccessCriteriaMet`/`FailureTarget` is never re-dispatched: if
//!   its mirror is lost it is finished from that condition (`MirrorLost`).
//! - Terminal origins are final: no re-dispatch, no re-create, no status writes. Their finished
//!   mirror stays until the origin is deleted (the origin's TTL drives cleanup); a mirror still
//!   running under a finished origin (e.g. after a `DispatchFailed`) is deleted.
//! - Deletion: every reachable mirror of ours is deleted (Background), then the finalizer is dropped.
//!   If the intent cluster is unreachable the finalizer is held for at most `worker_lost_timeout`
//!   after the deletion started, then dropped anyway (`MirrorOrphaned`): an unreachable worker must
//!   not block deleting Jobs forever; the controller's garbage collection removes the orphan when the
//!   worker returns (its origin UID no longer exists).
//! - Spec drift (suspend, parallelism, ...) flows down to an unfinished current mirror; status flows
//!   up through [`translate_status`], written only when it changes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::JobStatus;
use serde_json::{Map, Value, json};

use courier_api::reasons::{
    EVENT_DISPATCH_FAILED, EVENT_DISPATCHED, EVENT_MIRROR_CONFLICT, EVENT_MIRROR_LOST,
    EVENT_MIRROR_ORPHANED, EVENT_NO_ELIGIBLE_CLUSTER, EVENT_REDISPATCHED,
    JOB_REASON_DISPATCH_FAILED,
};
use courier_api::{
    ANNOTATION_CLUSTER_SELECTOR, ANNOTATION_EPOCH, ANNOTATION_REDISPATCHES, FINALIZER,
    LABEL_CLUSTER, MANAGED_BY,
};

use crate::dispatched;
use crate::job::{Interim, JobSpecEssentials, finished, interim};
use crate::mirror::{mirror_for, mirror_spec_drift};
use crate::ownership::{Intent, OriginIdentity, Ownership, classify, epoch_label, parse_epoch};
use crate::placement::{ClusterView, choose_cluster};
use crate::status::{
    MirrorReport, TranslateInput, fail_origin, finish_from_interim, translate_status,
};

/// Why a Job object could not be read into a view.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    #[error("the Job is not a JSON object")]
    NotAnObject,
    #[error("the Job has no {field}")]
    MissingField { field: &'static str },
    #[error("the Job's {field} is malformed: {reason}")]
    Malformed { field: &'static str, reason: String },
}

/// What decide needs to know about the origin Job.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OriginView {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub managed_by: Option<String>,
    pub deletion_timestamp: Option<Timestamp>,
    pub finalizers: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub spec: JobSpecEssentials,
    /// The origin's `spec` as JSON (the source of spec drift).
    pub spec_json: Value,
    pub status: JobStatus,
    pub generation: Option<i64>,
    pub resource_version: Option<String>,
}

/// What decide needs to know about one remote Job with the origin's namespace/name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MirrorView {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub spec: Value,
    pub status: JobStatus,
    /// It has a deletionTimestamp.
    pub deleting: bool,
}

/// One cluster's view of the origin's namespace/name.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum MirrorObservation {
    /// The cluster's cache is not synced or the cluster is unreachable: nothing is known.
    #[default]
    Unknown,
    /// The synced cache has no Job with that name.
    Absent,
    /// A Job with that name (whoever's it is).
    Present(Box<MirrorView>),
}

/// Controller settings decide depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchConfig {
    /// This management cluster's `--origin` id.
    pub origin_id: String,
    /// How often an origin may be re-dispatched after losing its mirror (`--max-redispatch`).
    pub max_redispatch: u32,
    /// How long the intent cluster may be not Ready before its mirror counts as lost
    /// (`--worker-lost-timeout`); also how long an unreachable cluster may hold up a deletion.
    pub worker_lost_timeout: Duration,
    /// Re-dispatch away from a lost worker (off: wait for it to come back).
    pub redispatch_on_worker_loss: bool,
    /// Retry interval while no cluster is eligible or the mirror cannot be built.
    pub retry_interval: Duration,
    /// Requeue interval while waiting for a cache to sync or a deletion to finish.
    pub short_retry: Duration,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        Self {
            origin_id: courier_api::DEFAULT_ORIGIN_ID.to_string(),
            max_redispatch: 3,
            worker_lost_timeout: Duration::from_secs(300),
            redispatch_on_worker_loss: true,
            retry_interval: Duration::from_secs(30),
            short_retry: Duration::from_secs(5),
        }
    }
}

/// In-memory knowledge of the controller about this origin that no cache shows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hints {
    /// Clusters that answered a create of this origin's mirror with AlreadyExists for a Job that is
    /// not ours (workers' caches only watch Courier's labels, so such Jobs are otherwise invisible).
    pub foreign_on: BTreeSet<String>,
}

/// Everything decide looks at.
#[derive(Debug, Clone, Copy)]
pub struct ReconcileInput<'a> {
    pub origin: &'a OriginView,
    /// The origin as JSON (needed to build a mirror); `None` if the caller only has the view.
    pub origin_json: Option<&'a Value>,
    /// Per cluster name; a registered cluster missing here is `Unknown`.
    pub mirrors: &'a BTreeMap<String, MirrorObservation>,
    /// Every registered WorkerCluster.
    pub clusters: &'a [ClusterView],
    pub config: &'a DispatchConfig,
    pub hints: &'a Hints,
    pub now: Timestamp,
}

/// Event severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Deletion propagation for mirrors. Deleting a Job through batch/v1 without one orphans its pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
}

/// One API call (or request) for the I/O shell.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Patch the origin's metadata with the placement intent (and the finalizer) before any mirror
    /// for it exists. `patch` is the JSON merge patch to send, with a resourceVersion precondition.
    WriteIntent {
        cluster: String,
        epoch: u64,
        redispatches: u32,
        add_finalizer: bool,
        patch: Value,
    },
    /// Create the namespace on the worker if it does not exist.
    EnsureNamespace { cluster: String, namespace: String },
    /// Create the mirror (AlreadyExists: see the module docs).
    CreateMirror {
        cluster: String,
        epoch: u64,
        mirror: Value,
    },
    /// JSON merge patch on the mirror's spec (mutable fields only).
    PatchMirrorSpec {
        cluster: String,
        namespace: String,
        name: String,
        uid: String,
        patch: Value,
    },
    /// Delete the mirror with a UID precondition.
    DeleteMirror {
        cluster: String,
        namespace: String,
        name: String,
        uid: String,
        propagation: Propagation,
    },
    /// Write the origin's status (`patch`: JSON merge patch for `/status`, with a resourceVersion
    /// precondition and explicit nulls for cleared fields; `status`: the complete new status).
    WriteOriginStatus { status: JobStatus, patch: Value },
    /// Remove Courier's finalizer from the origin (`patch`: JSON merge patch with a resourceVersion
    /// precondition).
    RemoveFinalizer { patch: Value },
    /// Record an event on the origin.
    Event {
        reason: &'static str,
        type_: EventType,
        message: String,
    },
    /// Reconcile again after this long even if nothing changes.
    Requeue { after: Duration },
}

/// What decide is waiting for, if anything (for logs and `courier explain`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// Created suspended and never dispatched.
    Suspended,
    /// No cluster can take the Job (message says why).
    NoEligibleCluster { message: String },
    /// The intent cluster is not Ready; its mirror counts as lost at `lost_at` (if known).
    ClusterNotReady {
        cluster: String,
        lost_at: Option<Timestamp>,
    },
    /// The intent cluster is Ready but its cache has not synced.
    ClusterSyncing { cluster: String },
    /// The intent cluster is lost but re-dispatch on worker loss is off.
    WorkerLost { cluster: String },
    /// The current mirror is being deleted by someone; waiting for it to go.
    MirrorDeleting { cluster: String },
    /// One of our stale mirrors holds the name on the intent cluster; waiting for its deletion.
    StaleMirrorInTheWay { cluster: String },
    /// A mirror must be created but the origin's JSON was not provided.
    OriginJsonMissing,
    /// The mirror cannot be built from the origin.
    MirrorUnbuildable { message: String },
    /// Deletion holds the finalizer while the intent cluster is unreachable, until `until`.
    DeletionBlocked { cluster: String, until: Timestamp },
    /// A second origin write was needed; it follows in the next reconcile.
    OriginWriteDeferred,
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wait::Suspended => write!(f, "the Job is suspended and has not been dispatched"),
            Wait::NoEligibleCluster { message } => write!(f, "{message}"),
            Wait::ClusterNotReady {
                cluster,
                lost_at: Some(t),
            } => write!(
                f,
                "WorkerCluster {cluster} is not Ready; its mirror counts as lost at {t}"
            ),
            Wait::ClusterNotReady {
                cluster,
                lost_at: None,
            } => write!(f, "WorkerCluster {cluster} is not Ready"),
            Wait::ClusterSyncing { cluster } => {
                write!(
                    f,
                    "waiting for the Job cache of WorkerCluster {cluster} to sync"
                )
            }
            Wait::WorkerLost { cluster } => write!(
                f,
                "WorkerCluster {cluster} is lost and re-dispatch on worker loss is disabled; waiting for it"
            ),
            Wait::MirrorDeleting { cluster } => {
                write!(f, "the mirror on {cluster} is being deleted")
            }
            Wait::StaleMirrorInTheWay { cluster } => {
                write!(f, "an older mirror on {cluster} is being deleted first")
            }
            Wait::OriginJsonMissing => {
                write!(f, "the origin Job's JSON is needed to build its mirror")
            }
            Wait::MirrorUnbuildable { message } => write!(f, "cannot build the mirror: {message}"),
            Wait::DeletionBlocked { cluster, until } => write!(
                f,
                "deleting: WorkerCluster {cluster} is unreachable; the finalizer is held until {until}"
            ),
            Wait::OriginWriteDeferred => write!(f, "another origin write follows"),
        }
    }
}

/// The outcome of one reconcile.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// API calls in the order they must be made.
    pub actions: Vec<Action>,
    /// What is still pending, if anything.
    pub wait: Option<Wait>,
}

impl OriginView {
    /// Reads an origin Job (as JSON: a typed `Job` or `DynamicObject` serialized) into a view.
    pub fn from_json(job: &Value) -> Result<Self, ViewError> {
        let meta = Meta::read(job)?;
        let spec_json = job.get("spec").cloned().unwrap_or(Value::Null);
        Ok(Self {
            uid: meta.uid.ok_or(ViewError::MissingField {
                field: "metadata.uid",
            })?,
            namespace: meta.namespace,
            name: meta.name,
            managed_by: spec_json
                .get("managedBy")
                .and_then(Value::as_str)
                .map(str::to_string),
            deletion_timestamp: meta.deletion_timestamp,
            finalizers: meta.finalizers,
            labels: meta.labels,
            annotations: meta.annotations,
            spec: JobSpecEssentials::from_spec_json(&spec_json),
            spec_json,
            status: read_status(job)?,
            generation: job.pointer("/metadata/generation").and_then(Value::as_i64),
            resource_version: job
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }

    /// Whether Courier owns this origin (`spec.managedBy`).
    pub fn is_ours(&self) -> bool {
        self.managed_by.as_deref() == Some(MANAGED_BY)
    }

    /// The placement intent recorded in the metadata (cluster label and epoch annotation), if both
    /// are present and well-formed.
    pub fn intent(&self) -> Option<Intent> {
        let cluster = self.labels.get(LABEL_CLUSTER).filter(|c| !c.is_empty())?;
        let epoch = parse_epoch(self.annotations.get(ANNOTATION_EPOCH)?)?;
        Some(Intent {
            cluster: cluster.clone(),
            epoch,
        })
    }

    /// Re-dispatches so far (annotation; absent or malformed = 0).
    pub fn redispatches(&self) -> u32 {
        self.annotations
            .get(ANNOTATION_REDISPATCHES)
            .and_then(|r| r.parse().ok())
            .unwrap_or(0)
    }

    /// The user's cluster selector, if set.
    pub fn cluster_selector(&self) -> Option<&str> {
        self.annotations
            .get(ANNOTATION_CLUSTER_SELECTOR)
            .map(String::as_str)
    }

    pub fn has_finalizer(&self) -> bool {
        self.finalizers.iter().any(|f| f == FINALIZER)
    }
}

impl MirrorView {
    /// Reads a remote Job (as JSON) into a view.
    pub fn from_json(job: &Value) -> Result<Self, ViewError> {
        let meta = Meta::read(job)?;
        Ok(Self {
            namespace: meta.namespace,
            name: meta.name,
            uid: meta.uid.ok_or(ViewError::MissingField {
                field: "metadata.uid",
            })?,
            labels: meta.labels,
            spec: job.get("spec").cloned().unwrap_or(Value::Null),
            status: read_status(job)?,
            deleting: meta.deletion_timestamp.is_some(),
        })
    }
}

struct Meta {
    name: String,
    namespace: String,
    uid: Option<String>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    finalizers: Vec<String>,
    deletion_timestamp: Option<Timestamp>,
}

impl Meta {
    fn read(job: &Value) -> Result<Self, ViewError> {
        let obj = job.as_object().ok_or(ViewError::NotAnObject)?;
        let meta = obj
            .get("metadata")
            .and_then(Value::as_object)
            .ok_or(ViewError::MissingField { field: "metadata" })?;
        let text = |key: &str| meta.get(key).and_then(Value::as_str).map(str::to_string);
        let map = |key: &str| -> BTreeMap<String, String> {
            meta.get(key)
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default()
        };
        let deletion_timestamp = match meta.get("deletionTimestamp") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_str()
                    .and_then(|s| s.parse::<Timestamp>().ok())
                    .ok_or_else(|| ViewError::Malformed {
                        field: "metadata.deletionTimestamp",
                        reason: v.to_string(),
                    })?,
            ),
        };
        Ok(Self {
            name: text("name").ok_or(ViewError::MissingField {
                field: "metadata.name",
            })?,
            namespace: text("namespace").unwrap_or_default(),
            uid: text("uid").filter(|u| !u.is_empty()),
            labels: map("labels"),
            annotations: map("annotations"),
            finalizers: meta
                .get("finalizers")
                .and_then(Value::as_array)
                .map(|f| {
                    f.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            deletion_timestamp,
        })
    }
}

fn read_status(job: &Value) -> Result<JobStatus, ViewError> {
    match job.get("status") {
        None | Some(Value::Null) => Ok(JobStatus::default()),
        Some(s) => serde_json::from_value(s.clone()).map_err(|e| ViewError::Malformed {
            field: "status",
            reason: e.to_string(),
        }),
    }
}

/// Decides what to do for one origin Job. Idempotent: repeating it on the state its actions produce
/// converges without duplicate effects.
pub fn decide(input: &ReconcileInput<'_>) -> Decision {
    if !input.origin.is_ours() {
        return Decision::default();
    }
    let mut plan = Plan::new(input);
    if input.origin.deletion_timestamp.is_some() {
        plan.delete_everything();
        return plan.finish();
    }
    plan.fence_stale();
    if finished(&input.origin.status).is_some() {
        plan.keep_terminal();
    } else {
        match plan.intent.clone() {
            None => plan.first_placement(),
            Some(intent) => plan.follow(&intent),
        }
    }
    plan.finish()
}

/// How the intent cluster is doing.
enum Health {
    Ready,
    /// Not Ready; lost at the deadline (if the transition time is known).
    NotReady {
        lost_at: Option<Timestamp>,
    },
    /// Gone for good as far as this origin is concerned.
    Lost {
        why: String,
    },
}

/// Why a new placement is made.
enum Cause {
    First,
    /// The intent cluster has someone else's Job with our name; nothing of ours ran there.
    ConflictBeforeStart {
        cluster: String,
    },
    /// The current mirror or its worker was lost; `counted` = it counts as a re-dispatch.
    Lost {
        what: String,
        counted: bool,
    },
}

struct Plan<'a> {
    input: &'a ReconcileInput<'a>,
    identity: OriginIdentity<'a>,
    /// The intent on the origin (metadata, or the Dispatched marker if the metadata was damaged).
    intent: Option<Intent>,
    /// The intent metadata (or finalizer) must be rewritten.
    intent_needs_repair: bool,
    marker: Option<Intent>,
    redispatches: u32,
    /// Our mirrors with their verdicts, by cluster.
    ours: Vec<(&'a str, &'a MirrorView, Ownership)>,
    /// Clusters where a Job with our name is someone else's.
    foreign_on: BTreeSet<String>,
    next_epoch: u64,
    actions: Vec<Action>,
    wait: Option<Wait>,
    origin_written: bool,
    requeue: Option<Duration>,
}

impl<'a> Plan<'a> {
    fn new(input: &'a ReconcileInput<'a>) -> Self {
        let origin = input.origin;
        let identity = OriginIdentity {
            origin_id: &input.config.origin_id,
            origin_uid: &origin.uid,
        };
        let marker = dispatched::recorded(&origin.status);
        let from_metadata = origin.intent();
        let intent = from_metadata.clone().or_else(|| marker.clone());
        let intent_needs_repair =
            intent.is_some() && (from_metadata != intent || !origin.has_finalizer());
        let mut ours = Vec::new();
        let mut foreign_on = input.hints.foreign_on.clone();
        let mut highest_epoch = intent.as_ref().map_or(0, |i| i.epoch);
        highest_epoch = highest_epoch.max(marker.as_ref().map_or(0, |m| m.epoch));
        for (cluster, observation) in input.mirrors {
            if let MirrorObservation::Present(m) = observation {
                let verdict = classify(&m.labels, cluster, identity, intent.as_ref());
                if verdict.is_ours() {
                    highest_epoch = highest_epoch.max(epoch_label(&m.labels).unwrap_or(0));
                    ours.push((cluster.as_str(), m.as_ref(), verdict));
                } else {
                    foreign_on.insert(cluster.clone());
                }
            }
        }
        Self {
            input,
            identity,
            intent,
            intent_needs_repair,
            marker,
            redispatches: origin.redispatches(),
            ours,
            foreign_on,
            next_epoch: highest_epoch.saturating_add(1),
            actions: Vec::new(),
            wait: None,
            origin_written: false,
            requeue: None,
        }
    }

    fn finish(mut self) -> Decision {
        if let Some(after) = self.requeue {
            self.actions.push(Action::Requeue { after });
        }
        Decision {
            actions: self.actions,
            wait: self.wait,
        }
    }

    fn origin(&self) -> &'a OriginView {
        self.input.origin
    }

    fn config(&self) -> &'a DispatchConfig {
        self.input.config
    }

    fn observation(&self, cluster: &str) -> &'a MirrorObservation {
        static UNKNOWN: MirrorObservation = MirrorObservation::Unknown;
        self.input.mirrors.get(cluster).unwrap_or(&UNKNOWN)
    }

    fn requeue_after(&mut self, after: Duration) {
        let after = after.max(Duration::from_secs(1));
        self.requeue = Some(self.requeue.map_or(after, |r| r.min(after)));
    }

    fn wait(&mut self, wait: Wait) {
        if self.wait.is_none() {
            self.wait = Some(wait);
        }
    }

    fn event(&mut self, reason: &'static str, type_: EventType, message: String) {
        self.actions.push(Action::Event {
            reason,
            type_,
            message,
        });
    }

    fn job_ref(&self) -> String {
        format!("{}/{}", self.origin().namespace, self.origin().name)
    }

    // ---- origin writes (at most one per decision) ----

    fn claim_origin_write(&mut self) -> bool {
        if self.origin_written {
            self.wait(Wait::OriginWriteDeferred);
            self.requeue_after(Duration::from_secs(1));
            return false;
        }
        self.origin_written = true;
        true
    }

    fn precondition(&self) -> Map<String, Value> {
        let mut meta = Map::new();
        if let Some(rv) = &self.origin().resource_version {
            meta.insert("resourceVersion".into(), json!(rv));
        }
        meta
    }

    fn write_intent(&mut self, intent: &Intent, redispatches: u32) -> bool {
        if !self.claim_origin_write() {
            return false;
        }
        let add_finalizer = !self.origin().has_finalizer();
        let mut meta = self.precondition();
        meta.insert("labels".into(), json!({ LABEL_CLUSTER: intent.cluster }));
        meta.insert(
            "annotations".into(),
            json!({ ANNOTATION_EPOCH: intent.epoch.to_string(), ANNOTATION_REDISPATCHES: redispatches.to_string() }),
        );
        if add_finalizer {
            let mut finalizers = self.origin().finalizers.clone();
            finalizers.push(FINALIZER.to_string());
            meta.insert("finalizers".into(), json!(finalizers));
        }
        self.actions.push(Action::WriteIntent {
            cluster: intent.cluster.clone(),
            epoch: intent.epoch,
            redispatches,
            add_finalizer,
            patch: json!({ "metadata": meta }),
        });
        true
    }

    fn write_status(&mut self, status: JobStatus) -> bool {
        if !self.claim_origin_write() {
            return false;
        }
        let old = serde_json::to_value(&self.origin().status).unwrap_or(Value::Null);
        let new = serde_json::to_value(&status).unwrap_or(Value::Null);
        let status_patch = merge_patch(&old, &new).unwrap_or_else(|| json!({}));
        let patch = json!({ "metadata": self.precondition(), "status": status_patch });
        self.actions
            .push(Action::WriteOriginStatus { status, patch });
        true
    }

    fn remove_finalizer(&mut self) {
        if !self.claim_origin_write() {
            return;
        }
        let mut meta = self.precondition();
        let rest: Vec<&String> = self
            .origin()
            .finalizers
            .iter()
            .filter(|f| *f != FINALIZER)
            .collect();
        meta.insert("finalizers".into(), json!(rest));
        self.actions.push(Action::RemoveFinalizer {
            patch: json!({ "metadata": meta }),
        });
    }

    /// Maintains the origin's own status (the Suspended condition) when no mirror is read.
    fn status_without_mirror(&mut self) {
        if self.origin_written {
            return;
        }
        if let Some(status) = translate_status(&TranslateInput {
            origin_spec: &self.origin().spec,
            origin_status: &self.origin().status,
            mirror: None,
            redispatch_possible: self.redispatch_possible(),
            now: self.input.now,
        }) {
            self.write_status(status);
        }
    }

    fn redispatch_possible(&self) -> bool {
        self.redispatches < self.config().max_redispatch
    }

    // ---- mirror calls ----

    fn delete_mirror(&mut self, cluster: &str, m: &MirrorView) {
        self.actions.push(Action::DeleteMirror {
            cluster: cluster.to_string(),
            namespace: m.namespace.clone(),
            name: m.name.clone(),
            uid: m.uid.clone(),
            propagation: Propagation::Background,
        });
    }

    fn create_mirror(&mut self, intent: &Intent) {
        let Some(origin_json) = self.input.origin_json else {
            self.wait(Wait::OriginJsonMissing);
            self.requeue_after(self.config().short_retry);
            return;
        };
        match mirror_for(origin_json, &self.config().origin_id, intent.epoch) {
            Ok(mirror) => {
                self.actions.push(Action::EnsureNamespace {
                    cluster: intent.cluster.clone(),
                    namespace: self.origin().namespace.clone(),
                });
                self.actions.push(Action::CreateMirror {
                    cluster: intent.cluster.clone(),
                    epoch: intent.epoch,
                    mirror,
                });
            }
            Err(e) => {
                let message = e.to_string();
                self.event(
                    EVENT_DISPATCH_FAILED,
                    EventType::Warning,
                    format!("cannot build the mirror for {}: {message}", intent.cluster),
                );
                self.wait(Wait::MirrorUnbuildable { message });
                self.requeue_after(self.config().retry_interval);
            }
        }
    }

    // ---- the paths ----

    fn delete_everything(&mut self) {
        for (cluster, m, _) in self.ours.clone() {
            if !m.deleting {
                self.delete_mirror(cluster, m);
            }
        }
        if !self.origin().has_finalizer() {
            return;
        }
        if let Some(intent) = self.intent.clone()
            && matches!(
                self.observation(&intent.cluster),
                MirrorObservation::Unknown
            )
            && self.cluster_view(&intent.cluster).is_some()
        {
            let started = self.origin().deletion_timestamp.unwrap_or(self.input.now);
            let until = add(started, self.config().worker_lost_timeout);
            if self.input.now < until {
                self.wait(Wait::DeletionBlocked {
                    cluster: intent.cluster.clone(),
                    until,
                });
                self.requeue_after(
                    until_duration(self.input.now, until).min(self.config().retry_interval),
                );
                return;
            }
            self.event(
                EVENT_MIRROR_ORPHANED,
                EventType::Warning,
                format!(
                    "WorkerCluster {} stayed unreachable for {} after deletion started; its mirror (epoch {}), if any, is left to garbage collection",
                    intent.cluster,
                    human(self.config().worker_lost_timeout),
                    intent.epoch
                ),
            );
        }
        self.remove_finalizer();
    }

    fn fence_stale(&mut self) {
        for (cluster, m, verdict) in self.ours.clone() {
            if matches!(verdict, Ownership::Stale { .. }) && !m.deleting {
                self.delete_mirror(cluster, m);
            }
        }
    }

    fn current_mirror(&self) -> Option<(&'a str, &'a MirrorView)> {
        self.ours
            .iter()
            .find(|(_, _, v)| *v == Ownership::Current)
            .map(|(c, m, _)| (*c, *m))
    }

    fn keep_terminal(&mut self) {
        if let Some((cluster, m)) = self.current_mirror()
            && finished(&m.status).is_none()
            && !m.deleting
        {
            self.delete_mirror(cluster, m);
        }
        self.repair_intent();
    }

    fn repair_intent(&mut self) -> bool {
        match self.intent.clone() {
            Some(intent) if self.intent_needs_repair => {
                self.write_intent(&intent, self.redispatches)
            }
            _ => false,
        }
    }

    fn first_placement(&mut self) {
        if self.origin().spec.suspend {
            self.status_without_mirror();
            self.wait(Wait::Suspended);
            return;
        }
        self.place(Cause::First, BTreeSet::new());
    }

    fn place(&mut self, cause: Cause, mut exclude: BTreeSet<String>) {
        exclude.extend(self.foreign_on.iter().cloned());
        let selector = self.origin().cluster_selector();
        let chosen =
            choose_cluster(self.input.clusters, selector, &exclude).map(|c| c.name.clone());
        let cluster = match chosen {
            Ok(cluster) => cluster,
            Err(e) => {
                let message = match &cause {
                    Cause::First => e.to_string(),
                    Cause::ConflictBeforeStart { cluster } => {
                        format!("cannot move away from {cluster}: {e}")
                    }
                    Cause::Lost { what, .. } => format!("{what}; cannot re-dispatch: {e}"),
                };
                self.event(
                    EVENT_NO_ELIGIBLE_CLUSTER,
                    EventType::Warning,
                    message.clone(),
                );
                self.status_without_mirror();
                self.wait(Wait::NoEligibleCluster { message });
                self.requeue_after(self.config().retry_interval);
                return;
            }
        };
        let counted = matches!(cause, Cause::Lost { counted: true, .. });
        let redispatches = self.redispatches + u32::from(counted);
        let intent = Intent {
            cluster,
            epoch: self.next_epoch,
        };
        if !self.write_intent(&intent, redispatches) {
            return;
        }
        match cause {
            Cause::First => {}
            Cause::ConflictBeforeStart { cluster } => self.event(
                EVENT_MIRROR_CONFLICT,
                EventType::Normal,
                format!(
                    "moved from {cluster} to {} (epoch {}) because of the name conflict",
                    intent.cluster, intent.epoch
                ),
            ),
            Cause::Lost { what, counted } => {
                let tally = if counted {
                    format!(
                        "re-dispatch {redispatches} of {}",
                        self.config().max_redispatch
                    )
                } else {
                    "not counted: the mirror had not reported".to_string()
                };
                self.event(
                    EVENT_REDISPATCHED,
                    EventType::Warning,
                    format!(
                        "{what}: re-dispatched to {} as epoch {} ({tally})",
                        intent.cluster, intent.epoch
                    ),
                );
            }
        }
        self.create_mirror(&intent);
    }

    fn cluster_view(&self, name: &str) -> Option<&'a ClusterView> {
        self.input.clusters.iter().find(|c| c.name == name)
    }

    fn health(&self, cluster: &str) -> Health {
        let Some(view) = self.cluster_view(cluster) else {
            return Health::Lost {
                why: format!("WorkerCluster {cluster} is no longer registered"),
            };
        };
        if view.ready {
            return Health::Ready;
        }
        let Some(since) = view.not_ready_since else {
            return Health::NotReady { lost_at: None };
        };
        let lost_at = add(since, self.config().worker_lost_timeout);
        if self.input.now >= lost_at {
            Health::Lost {
                why: format!(
                    "WorkerCluster {cluster} has not been Ready since {since} (worker-lost timeout {})",
                    human(self.config().worker_lost_timeout)
                ),
            }
        } else {
            Health::NotReady {
                lost_at: Some(lost_at),
            }
        }
    }

    fn follow(&mut self, intent: &Intent) {
        self.repair_intent();
        let existed = self.marker.as_ref() == Some(intent);
        let health = self.health(&intent.cluster);
        let conflict_hint = self.input.hints.foreign_on.contains(&intent.cluster);
        match self.observation(&intent.cluster) {
            MirrorObservation::Present(m) => {
                match classify(&m.labels, &intent.cluster, self.identity, Some(intent)) {
                    Ownership::Current => self.follow_current(intent, m.as_ref(), health),
                    Ownership::Stale { .. } => {
                        // Deleted by fence_stale; the new epoch's mirror is created once it is gone.
                        self.status_without_mirror();
                        self.wait(Wait::StaleMirrorInTheWay {
                            cluster: intent.cluster.clone(),
                        });
                        self.requeue_after(self.config().short_retry);
                    }
                    Ownership::Foreign | Ownership::OtherOrigin { .. } => {
                        self.conflict_on_intent(intent, existed);
                    }
                }
            }
            // The worker itself answered our create with someone else's Job (caches only show ours).
            _ if conflict_hint => self.conflict_on_intent(intent, existed),
            MirrorObservation::Absent if existed => self.mirror_lost(
                format!(
                    "the mirror on {} (epoch {}) was deleted before the Job finished",
                    intent.cluster, intent.epoch
                ),
                true,
                BTreeSet::new(),
            ),
            MirrorObservation::Absent => {
                // Intent written but the mirror never reported: create it (idempotent).
                self.status_without_mirror();
                self.create_mirror(intent);
            }
            MirrorObservation::Unknown => self.intent_cluster_unknown(intent, existed, health),
        }
    }

    fn follow_current(&mut self, intent: &Intent, m: &'a MirrorView, health: Health) {
        let mirror_finished = finished(&m.status).is_some();
        if let Health::Lost { why } = &health
            && !mirror_finished
            && self.config().redispatch_on_worker_loss
        {
            let why = why.clone();
            self.mirror_lost(why, true, BTreeSet::from([intent.cluster.clone()]));
            return;
        }
        let translated = translate_status(&TranslateInput {
            origin_spec: &self.origin().spec,
            origin_status: &self.origin().status,
            mirror: Some(MirrorReport {
                status: &m.status,
                placement: intent,
            }),
            redispatch_possible: self.redispatch_possible(),
            now: self.input.now,
        });
        if let Some(status) = translated {
            let first_report = self.marker.as_ref() != Some(intent)
                && dispatched::recorded(&status).as_ref() == Some(intent);
            if self.write_status(status) && first_report {
                self.event(
                    EVENT_DISPATCHED,
                    EventType::Normal,
                    format!(
                        "mirror {} created on {} (epoch {})",
                        self.job_ref(),
                        intent.cluster,
                        intent.epoch
                    ),
                );
            }
        }
        if !mirror_finished
            && !m.deleting
            && let Some(patch) = mirror_spec_drift(&self.origin().spec_json, &m.spec)
        {
            self.actions.push(Action::PatchMirrorSpec {
                cluster: intent.cluster.clone(),
                namespace: m.namespace.clone(),
                name: m.name.clone(),
                uid: m.uid.clone(),
                patch,
            });
        }
        if m.deleting && !mirror_finished {
            self.wait(Wait::MirrorDeleting {
                cluster: intent.cluster.clone(),
            });
            self.requeue_after(self.config().short_retry);
        }
        match health {
            Health::NotReady {
                lost_at: Some(lost_at),
            } => self.requeue_after(until_duration(self.input.now, lost_at)),
            Health::Lost { .. } if !mirror_finished => self.wait(Wait::WorkerLost {
                cluster: intent.cluster.clone(),
            }),
            _ => {}
        }
    }

    fn conflict_on_intent(&mut self, intent: &Intent, existed: bool) {
        self.event(
            EVENT_MIRROR_CONFLICT,
            EventType::Warning,
            format!(
                "WorkerCluster {} has a Job {} that is not this Job's mirror; it is left alone",
                intent.cluster,
                self.job_ref()
            ),
        );
        let exclude = BTreeSet::from([intent.cluster.clone()]);
        if existed {
            let what = format!(
                "the mirror on {} (epoch {}) was replaced by a Job that is not Courier's",
                intent.cluster, intent.epoch
            );
            self.mirror_lost(what, true, exclude);
        } else {
            self.place(
                Cause::ConflictBeforeStart {
                    cluster: intent.cluster.clone(),
                },
                exclude,
            );
        }
    }

    fn intent_cluster_unknown(&mut self, intent: &Intent, existed: bool, health: Health) {
        match health {
            Health::Lost { why } if self.config().redispatch_on_worker_loss => {
                self.mirror_lost(why, existed, BTreeSet::from([intent.cluster.clone()]));
            }
            Health::Lost { .. } => {
                self.status_without_mirror();
                self.wait(Wait::WorkerLost {
                    cluster: intent.cluster.clone(),
                });
                self.requeue_after(self.config().retry_interval);
            }
            Health::NotReady { lost_at } => {
                self.status_without_mirror();
                self.wait(Wait::ClusterNotReady {
                    cluster: intent.cluster.clone(),
                    lost_at,
                });
                let after = lost_at.map_or(self.config().retry_interval, |t| {
                    until_duration(self.input.now, t)
                });
                self.requeue_after(after);
            }
            Health::Ready => {
                self.status_without_mirror();
                self.wait(Wait::ClusterSyncing {
                    cluster: intent.cluster.clone(),
                });
                self.requeue_after(self.config().short_retry);
            }
        }
    }

    /// The current mirror (or its worker) is gone. `counted`: the mirror had reported, so work may
    /// have been lost and this counts against `max_redispatch`.
    fn mirror_lost(&mut self, what: String, counted: bool, exclude: BTreeSet<String>) {
        let status = &self.origin().status;
        if let Some(committed) = interim(status) {
            if let Some(done) = finish_from_interim(status, self.input.now)
                && self.write_status(done)
            {
                let (condition, outcome) = match committed {
                    Interim::SuccessCriteriaMet => ("SuccessCriteriaMet", "Complete"),
                    Interim::FailureTarget => ("FailureTarget", "Failed"),
                };
                self.event(
                    EVENT_MIRROR_LOST,
                    EventType::Warning,
                    format!("{what}; the Job had already reached {condition}, so it is finished as {outcome}"),
                );
            }
            return;
        }
        if counted && !self.redispatch_possible() {
            let max = self.config().max_redispatch;
            let message = if max == 0 {
                format!("{what}; re-dispatch is disabled (max-redispatch 0)")
            } else {
                format!("{what}; not re-dispatched: the limit of {max} re-dispatches is reached")
            };
            if let Some(failed) =
                fail_origin(status, JOB_REASON_DISPATCH_FAILED, &message, self.input.now)
                && self.write_status(failed)
            {
                self.event(EVENT_DISPATCH_FAILED, EventType::Warning, message);
            }
            return;
        }
        self.place(Cause::Lost { what, counted }, exclude);
    }
}

fn add(t: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

fn until_duration(now: Timestamp, then: Timestamp) -> Duration {
    Duration::try_from(then.duration_since(now)).unwrap_or(Duration::ZERO)
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, sec) => format!("{h}h{m}m{sec}s"),
    }
}

/// The RFC 7386 JSON merge patch turning `old` into `new` (`None` when equal): changed keys, removed
/// keys as `null`; arrays and scalars are replaced whole.
pub fn merge_patch(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for (key, new_value) in n {
                match o.get(key) {
                    Some(old_value) => {
                        if let Some(d) = merge_patch(old_value, new_value) {
                            patch.insert(key.clone(), d);
                        }
                    }
                    None => {
                        patch.insert(key.clone(), new_value.clone());
                    }
                }
            }
            for key in o.keys().filter(|k| !n.contains_key(*k)) {
                patch.insert(key.clone(), Value::Null);
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ if old == new => None,
        _ => Some(new.clone()),
    }
}

#[cfg(test)]
mod tests;
