//! `decide`: the whole controller brain for one origin Job. Given what the caches show (the origin,
//! every worker's view of its mirror, the registered clusters) it returns the ordered API calls the
//! I/O shell should make. No I/O, no clock: `now` is an input.
//!
//! # Contract with the I/O shell
//! - A [`Decision`] is a set of independent **chains** of actions. Perform each chain's actions in
//!   order; a failure stops the rest of *that* chain only. Every other chain still runs (a stale
//!   mirror that cannot be deleted blocks neither the status copy from the current mirror nor the
//!   finalizer removal). If any chain failed, retry the reconcile with backoff. Within a chain the
//!   order is what makes a crash or failure at any point safe: the intent is written on the origin
//!   before any mirror for it is created (intent -> namespace -> create is one chain), an event
//!   follows the write it announces, and on deletion the current mirror's delete precedes the
//!   finalizer removal. Every stale-mirror delete is a chain of its own.
//! - [`Decision::needs_fresh_origin`]: nothing may be done on the cached origin; read the origin
//!   from the API server (its full JSON) and decide again with it as `origin_json`. Asked for when
//!   a mirror must be built or its template patched, and before deleting a mirror whose epoch is
//!   ahead of the cached intent (the cache may lag a placement written elsewhere). `origin_json` is
//!   taken to be that fresh read.
//! - [`Decision::requeue`] asks for another reconcile after the duration even if nothing changes.
//! - Origin writes carry `metadata.resourceVersion` (merge patches), so a decision made from a stale
//!   cache fails with 409 Conflict instead of acting on old data. Each decision writes the origin at
//!   most once; when something follows the write ([`Decision::after_write`]) the write triggers the
//!   next reconcile, which continues from the new state.
//! - `CreateMirror` answered 409 AlreadyExists: read the existing Job and
//!   [`classify`](crate::ownership::classify) it. `Current`: it is ours (a retried create) — adopt it
//!   and carry on. `Stale`: an older mirror of ours holds the name — stop and requeue (the next
//!   decision deletes it first). `Foreign`/`OtherOrigin`: record [`AvoidKind::Foreign`] in the
//!   origin's [`Hints`] and requeue (the next decision moves on).
//! - `EnsureNamespace`/`CreateMirror` refused by the worker (400, 403, 422, an admission denial):
//!   record [`AvoidKind::Refused`] with the server's message and requeue at once. No answer
//!   (timeout, connection failure, circuit open) on a cluster that is then stalled or not answering:
//!   record [`AvoidKind::Unanswered`] and requeue at once. `CreateMirror` answered 404 (the
//!   namespace does not exist) or 403 `NamespaceTerminating`: record [`AvoidKind::NamespaceMissing`]
//!   with [`crate::namespaces::missing_message`] and requeue at once. 429 and 5xx: plain retries.
//! - `PatchMirrorSpec` with a `template`: read the live mirror and merge-patch its template into the
//!   given one ([`crate::drift::template_patch`]) in the same request. Refused (400, 403, 422):
//!   record [`OutOfSync`] for that mirror and origin generation and requeue; mark it announced once
//!   a `MirrorOutOfSync` event for it was recorded.
//! - `DeleteMirror` answered 404, or 409 on the UID precondition (the name now belongs to another
//!   Job): done.
//!
//! # Rules (DESIGN.md invariants 1-10)
//! - Only origins with `spec.managedBy: courier.dev/dispatcher`; only remote Jobs whose labels make
//!   them this origin's mirrors (`Current` or `Stale`) are patched or deleted.
//! - A suspended origin that was never dispatched is not dispatched (it shows `Suspended=True`).
//! - First placement: intent (cluster label, epoch and re-dispatch annotations, finalizer) in one
//!   origin patch, then the namespace (only with `--create-worker-namespaces`), then mirror.
//! - A worker without the Job's namespace (or with it being deleted) is skipped like a refusal, with
//!   a `NamespaceMissing` Warning naming the cluster, the namespace and the fix; with none left the
//!   Placed condition's reason is `NamespaceMissing`.
//! - **Stale before new.** A new epoch's mirror is created only once every unfinished mirror of
//!   ours that a readable cache shows elsewhere is deleted and gone: two runs can only overlap on a
//!   worker that cannot be seen (a partition), where fencing deletes the old one when it answers.
//! - A Job with our name but not ours on the intent cluster: `MirrorConflict`, and the next cluster
//!   gets a new epoch — not counted as a re-dispatch unless our mirror had already reported there.
//!   The verdict expires (backoff) and the name is checked again.
//! - A worker that refused the mirror, or did not answer its create, is skipped for this Job for a
//!   backoff period: `MirrorRejected` quoting the server, and the next eligible cluster gets a new
//!   epoch (not counted: nothing ran). With none left the origin's `courier.dev/Placed` condition
//!   says why, and the refusing cluster is tried again when its backoff expires.
//! - Stale mirrors (older epochs, other clusters) are deleted whenever their cluster is reachable,
//!   whatever the origin's state, and their status is never read; one ahead of the cached intent only
//!   on a fresh read of the origin.
//! - The current mirror vanished after reporting (the `courier.dev/Dispatched` marker names its
//!   epoch) while the origin is unfinished: re-dispatch with the next epoch (`Redispatched`), at most
//!   `max_redispatch` times, then fail the origin (`FailureTarget`+`Failed`, reason `DispatchFailed`).
//!   A mirror that never reported is simply (re-)created: nothing was lost. Suspending is the
//!   user's choice: a mirror lost while the origin is suspended is re-created without counting, and
//!   a suspended origin is never failed with `DispatchFailed`.
//! - The intent cluster not Ready for longer than `worker_lost_timeout` (or no longer registered):
//!   re-dispatch elsewhere, counted if the mirror had reported, unless `redispatch_on_worker_loss` is
//!   off. When that worker comes back its mirror is stale and deleted.
//! - The intent cluster is being removed (its WorkerCluster has a deletionTimestamp): re-dispatch
//!   elsewhere, not counted (`Redispatched` naming the removal). With no other cluster the Job waits
//!   (`Placed=False`, `ClusterRemoved`) and its mirror there is deleted.
//! - An origin that already carries `SuccessCriteriaMet`/`FailureTarget` is never re-dispatched: if
//!   its mirror is lost it is finished from that condition (`MirrorLost`).
//! - Terminal origins are final: no re-dispatch, no re-create, no status writes. Their finished
//!   mirror is deleted `finished_mirror_ttl` after the origin's terminal condition (at once on a
//!   cluster being removed; never with no TTL); a mirror still running under a finished origin
//!   (e.g. after a `DispatchFailed`) is deleted.
//! - Deletion: every reachable mirror of ours is deleted (Background), then the finalizer is dropped.
//!   If the intent cluster is unreachable the finalizer is held for at most `worker_lost_timeout`
//!   after the deletion started, then dropped anyway (`MirrorOrphaned`): an unreachable worker must
//!   not block deleting Jobs forever; the controller's garbage collection removes the orphan when the
//!   worker returns (its origin UID no longer exists).
//! - Spec drift ([`crate::drift`]: suspend, parallelism, completions, ..., and the pod template)
//!   flows down to an unfinished current mirror; a change the worker refuses is applied by creating
//!   the mirror again when nothing runs (suspended, no active pods: `MirrorRecreated`), otherwise
//!   announced once per origin generation (`MirrorOutOfSync`). Status flows up through
//!   [`translate_status`], written only when it changes.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use crate::batch_job::BatchJob;
use crate::compact::{SmallMap, SpecFields};
use crate::namespaces::WorkerNamespaces;
use crate::placement::ClusterView;
use crate::workload::Workload;

pub use crate::hints::{Avoid, AvoidKind, Hints, OutOfSync};

mod paths;
mod plan;
mod quiet;
pub mod view;

pub use quiet::mirror_change_matters;

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

/// The origin, its mirrors, the input and the decision for `batch/v1` Jobs (the one
/// [`Workload`] so far; everything below is generic over it).
pub type OriginView = OriginOf<BatchJob>;
pub type MirrorView = MirrorOf<BatchJob>;
pub type MirrorObservation = ObservationOf<BatchJob>;
pub type ReconcileInput<'a> = InputOf<'a, BatchJob>;
pub type Action = ActionOf<BatchJob>;
pub type Decision = DecisionOf<BatchJob>;

/// What decide needs to know about the origin.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OriginOf<W: Workload> {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `spec.managedBy` (Courier's own value is not copied).
    pub managed_by: Option<Cow<'static, str>>,
    pub deletion_timestamp: Option<Timestamp>,
    pub finalizers: Vec<String>,
    /// The labels decisions read ([`view::ORIGIN_LABEL_KEYS`]).
    pub labels: SmallMap,
    /// The annotations decisions read ([`view::ORIGIN_ANNOTATION_KEYS`]).
    pub annotations: SmallMap,
    /// Keys of those labels and annotations whose value was longer than
    /// [`view::MAX_ORIGIN_VALUE`]: treated as absent (an over-long cluster selector as invalid).
    pub oversized: Vec<String>,
    pub spec: W::Spec,
    /// The origin's spec fields decisions read ([`Workload::SPEC_FIELDS`]; the source of
    /// spec drift).
    pub spec_fields: SpecFields,
    pub status: W::Status,
    pub generation: Option<i64>,
    pub resource_version: Option<String>,
    /// Hash of the template the mirror gets ([`Workload::template_hash`]; a Job's pod template,
    /// [`crate::drift::template_hash`]); `None` when the view was read without the template.
    pub template_hash: Option<String>,
}

/// What decide needs to know about one remote object with the origin's namespace/name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MirrorOf<W: Workload> {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: SmallMap,
    /// Courier's `courier.dev/*` annotations (what was last sent, see [`crate::drift`]).
    pub annotations: SmallMap,
    /// The spec fields that drift ([`Workload::SPEC_FIELDS`]).
    pub spec: SpecFields,
    pub status: W::Status,
    /// It has a deletionTimestamp.
    pub deleting: bool,
    /// The worker has pods that finished and are not counted yet ([`Workload::uncounted`]): its
    /// gauges already dropped them, its counters do not show them yet.
    pub counting: bool,
}

/// One cluster's view of the origin's namespace/name.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ObservationOf<W: Workload> {
    /// The cluster's cache is not synced or the cluster is unreachable: nothing is known.
    #[default]
    Unknown,
    /// The synced cache has no Job with that name.
    Absent,
    /// A Job with that name (whoever's it is).
    Present(Arc<MirrorOf<W>>),
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
    /// How long a finished mirror stays once the origin is terminal (`None`: until the origin goes).
    pub finished_mirror_ttl: Option<Duration>,
    /// Backoff of a worker that refused (or did not answer) a Job's mirror: skipped for that Job for
    /// this long, doubling per refusal up to the max; name conflicts up to `foreign_backoff_max`.
    pub refusal_backoff_min: Duration,
    pub refusal_backoff_max: Duration,
    pub foreign_backoff_max: Duration,
    /// Whether a Job's namespace may be created on a worker (`--create-worker-namespaces`).
    pub worker_namespaces: WorkerNamespaces,
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
            finished_mirror_ttl: Some(Duration::from_secs(600)),
            refusal_backoff_min: Duration::from_secs(30),
            refusal_backoff_max: Duration::from_secs(600),
            foreign_backoff_max: Duration::from_secs(300),
            worker_namespaces: WorkerNamespaces::MustExist,
        }
    }
}

/// Everything decide looks at.
#[derive(Debug, Clone, Copy)]
pub struct InputOf<'a, W: Workload> {
    pub origin: &'a OriginOf<W>,
    /// The origin as JSON, read fresh from the API server (needed to build a mirror); `None` if the
    /// caller only has the cached view.
    pub origin_json: Option<&'a Value>,
    /// Per cluster name; a registered cluster missing here is `Unknown`.
    /// Keyed by the clusters' shared names ([`ClusterView::name`]): no copy per cluster.
    pub mirrors: &'a BTreeMap<Arc<str>, ObservationOf<W>>,
    /// Every registered WorkerCluster.
    pub clusters: &'a [ClusterView],
    /// The labels of the origin's namespace in the management cluster (what WorkerClusters'
    /// `spec.namespaceSelector` match; see [`crate::placement::namespace_labels`]).
    pub namespace_labels: &'a BTreeMap<String, String>,
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

/// One API call (or request) for the I/O shell.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionOf<W: Workload> {
    /// Patch the origin's metadata with the placement intent (and the finalizer) before any mirror
    /// for it exists. `patch` is the JSON merge patch to send, with a resourceVersion precondition.
    WriteIntent {
        cluster: String,
        epoch: u64,
        redispatches: u32,
        add_finalizer: bool,
        patch: Value,
    },
    /// Create the namespace on the worker, with these labels, if it does not exist (only with
    /// [`WorkerNamespaces::Create`]; an existing namespace is left as it is).
    EnsureNamespace {
        cluster: String,
        namespace: String,
        labels: BTreeMap<String, String>,
    },
    /// Create the mirror (AlreadyExists: see the module docs).
    CreateMirror {
        cluster: String,
        epoch: u64,
        mirror: Value,
    },
    /// JSON merge patch on the mirror (mutable spec fields and the `courier.dev/*-hash`
    /// annotations recording what was sent), with a UID precondition. `template`: the pod template
    /// the mirror must get; the shell diffs it against the live mirror's in the same patch.
    PatchMirrorSpec {
        cluster: String,
        namespace: String,
        name: String,
        uid: String,
        patch: Value,
        template: Option<Value>,
    },
    /// Delete the mirror with a UID precondition and Background propagation (deleting a Job
    /// through batch/v1 without a propagation policy orphans its pods).
    DeleteMirror {
        cluster: String,
        namespace: String,
        name: String,
        uid: String,
    },
    /// Write the origin's status (`patch`: JSON merge patch for `/status`, with a resourceVersion
    /// precondition and explicit nulls for cleared fields; `status`: the complete new status).
    WriteOriginStatus { status: W::Status, patch: Value },
    /// Remove Courier's finalizer from the origin (`patch`: JSON merge patch with a resourceVersion
    /// precondition).
    RemoveFinalizer { patch: Value },
    /// Record an event on the origin.
    Event {
        reason: &'static str,
        type_: EventType,
        message: String,
    },
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
    /// Older, unfinished mirrors of ours on these clusters must be gone before epoch `epoch` starts.
    StaleMirrorsFirst { clusters: Vec<String>, epoch: u64 },
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
            Wait::StaleMirrorsFirst { clusters, epoch } => write!(
                f,
                "waiting for older mirrors on {} to be deleted before epoch {epoch} starts",
                clusters.join(", ")
            ),
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
pub struct DecisionOf<W: Workload> {
    /// Independent chains of API calls; within a chain, in the order they must be made (a failure
    /// stops the rest of its chain only).
    pub chains: Vec<Vec<ActionOf<W>>>,
    /// Reconcile again after this long even if nothing changes.
    pub requeue: Option<Duration>,
    /// What is still pending, if anything.
    pub wait: Option<Wait>,
    /// Nothing may be done on the cached origin: decide again on a fresh read of it.
    pub needs_fresh_origin: bool,
    /// Decide again once this decision's origin write succeeded: something follows the write that
    /// this decision could not plan (another origin write, a finished mirror's delete, a status
    /// copy from the mirror it creates). Otherwise the written origin (written through to the
    /// cache) needs no further decision: re-deciding would plan nothing, and mirror changes queue
    /// the origin themselves.
    pub after_write: bool,
}

impl<W: Workload> DecisionOf<W> {
    /// Every action, chain after chain.
    pub fn actions(&self) -> impl Iterator<Item = &ActionOf<W>> {
        self.chains.iter().flatten()
    }
}

/// Decides what to do for one origin. Idempotent: repeating it on the state its actions produce
/// converges without duplicate effects. Generic over the [`Workload`] kind: everything the kind
/// decides goes through it.
pub fn decide<W: Workload>(input: &InputOf<'_, W>) -> DecisionOf<W> {
    if !input.origin.is_ours() {
        return DecisionOf::default();
    }
    let mut plan = plan::Plan::new(input);
    if input.origin.deletion_timestamp.is_some() {
        plan.delete_everything();
        return plan.finish();
    }
    plan.fence_stale();
    if W::finished(&input.origin.status).is_some() {
        plan.keep_terminal();
    } else {
        match plan.intent.clone() {
            None => plan.first_placement(),
            Some(intent) => plan.follow(&intent),
        }
    }
    plan.finish()
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

#[cfg(test)]
mod tests;
