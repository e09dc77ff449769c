//! Condition reasons (WorkerCluster `Ready`) and event reasons (on origin Jobs).

/// WorkerCluster condition type saying whether Courier can talk to the worker.
pub const CONDITION_READY: &str = "Ready";

/// `Ready=True`: the worker answered with the configured credentials.
pub const REASON_CONNECTED: &str = "Connected";
/// `Ready=False`: the kubeconfig Secret (or its key) does not exist.
pub const REASON_SECRET_NOT_FOUND: &str = "SecretNotFound";
/// `Ready=False`: the Secret's kubeconfig could not be parsed or used.
pub const REASON_INVALID_KUBECONFIG: &str = "InvalidKubeconfig";
/// `Ready=False`: connection failed or timed out.
pub const REASON_UNREACHABLE: &str = "Unreachable";
/// `Ready=False`: the worker answered 401.
pub const REASON_UNAUTHORIZED: &str = "Unauthorized";
/// `Ready=False`: the worker answered 403.
pub const REASON_FORBIDDEN: &str = "Forbidden";
/// `Ready=False`: another, older WorkerCluster resolves to the same API server (same server URL or
/// same `kube-system` namespace UID); this one is never used.
pub const REASON_DUPLICATE_CLUSTER: &str = "DuplicateCluster";
/// `Ready=False`: another management cluster has claimed this controller's `--origin` id on the
/// worker; nothing is placed, garbage-collected or deleted there until the ids differ.
pub const REASON_ORIGIN_ID_IN_USE: &str = "OriginIdInUse";

/// `Ready=False`: the kubeconfig Secret exists but lacks the label `courier.dev/kubeconfig=true`,
/// so the controller does not read it (it reads only Secrets labelled for it).
pub const REASON_SECRET_NOT_LABELLED: &str = "SecretNotLabelled";
/// `Ready=False`: the worker runs a Kubernetes version older than Courier supports (1.30).
pub const REASON_UNSUPPORTED_VERSION: &str = "UnsupportedVersion";

/// WorkerCluster condition type saying whether the worker chart's admission policy (and its
/// binding) exists on the worker: without it nothing stops a worker user from changing mirrors, nor
/// Courier's account from running privileged pods there.
pub const CONDITION_POLICY_INSTALLED: &str = "PolicyInstalled";
/// `PolicyInstalled=True`: the policy and its binding exist.
pub const REASON_WORKER_POLICY_INSTALLED: &str = "WorkerPolicyInstalled";
/// `PolicyInstalled=False`: the policy or its binding is missing.
pub const REASON_WORKER_POLICY_MISSING: &str = "WorkerPolicyMissing";

/// All `Ready` condition reasons, `Connected` first.
pub const READY_REASONS: [&str; 10] = [
    REASON_CONNECTED,
    REASON_SECRET_NOT_FOUND,
    REASON_SECRET_NOT_LABELLED,
    REASON_INVALID_KUBECONFIG,
    REASON_UNREACHABLE,
    REASON_UNAUTHORIZED,
    REASON_FORBIDDEN,
    REASON_UNSUPPORTED_VERSION,
    REASON_DUPLICATE_CLUSTER,
    REASON_ORIGIN_ID_IN_USE,
];

/// `courier.dev/Placed=True`: a mirror of the Job has reported.
pub const REASON_PLACED: &str = "Placed";
/// `courier.dev/Placed=False`: no WorkerCluster can take the Job (the message lists each and why).
pub const REASON_NO_ELIGIBLE_CLUSTER: &str = "NoEligibleCluster";
/// `courier.dev/Placed=False`: every eligible worker refused the mirror (quota, policy,
/// validation) or did not answer; Courier retries with backoff.
pub const REASON_MIRROR_REJECTED: &str = "MirrorRejected";
/// `courier.dev/Placed=False`: the Job's namespace does not exist (or is being deleted) on every
/// worker that could take it, and Courier does not create namespaces there
/// (`--create-worker-namespaces` is off); Courier retries with backoff.
pub const REASON_NAMESPACE_MISSING: &str = "NamespaceMissing";
/// `courier.dev/Placed=False`: the Job's WorkerCluster is being removed and no other one can take it.
pub const REASON_CLUSTER_REMOVED: &str = "ClusterRemoved";

/// Event: a mirror of this epoch exists on a worker (emitted once per epoch, when it first reports).
pub const EVENT_DISPATCHED: &str = "Dispatched";
/// Event: the chosen worker already has someone else's Job with this name; placement moved on.
pub const EVENT_MIRROR_CONFLICT: &str = "MirrorConflict";
/// Event: the mirror or its worker was lost before the Job finished; a new epoch was placed elsewhere.
pub const EVENT_REDISPATCHED: &str = "Redispatched";
/// Event: no WorkerCluster can take the Job right now (the message says why).
pub const EVENT_NO_ELIGIBLE_CLUSTER: &str = "NoEligibleCluster";
/// Event: copying the mirror's status onto the origin failed (emitted by the controller).
pub const EVENT_STATUS_SYNC_FAILED: &str = "StatusSyncFailed";
/// Event (and Job condition reason): the Job could not be dispatched and was failed, or a mirror
/// could not be built.
pub const EVENT_DISPATCH_FAILED: &str = "DispatchFailed";
/// Event: the mirror was lost after the Job had already met its success or failure criteria, so the
/// origin was finished from those criteria instead of being re-dispatched.
pub const EVENT_MIRROR_LOST: &str = "MirrorLost";
/// Event: the origin was deleted while its worker was unreachable past the worker-lost timeout; the
/// mirror there is left to Courier's garbage collection.
pub const EVENT_MIRROR_ORPHANED: &str = "MirrorOrphaned";

/// Event (Warning): a worker refused to create the mirror (403 quota or policy, 422 validation, an
/// admission webhook) or did not answer; the message quotes the server. The cluster is skipped for
/// this Job for a backoff period.
pub const EVENT_MIRROR_REJECTED: &str = "MirrorRejected";
/// Event (Warning): the Job's namespace does not exist (or is being deleted) on a worker; the message
/// names the cluster, the namespace and the fix. The cluster is skipped for this Job for a backoff
/// period.
pub const EVENT_NAMESPACE_MISSING: &str = "NamespaceMissing";
/// Event (Warning): a change of the origin's spec cannot be applied to its running mirror (the
/// worker refused it); the mirror keeps the old spec.
pub const EVENT_MIRROR_OUT_OF_SYNC: &str = "MirrorOutOfSync";
/// Event: the mirror was deleted and created again with a new epoch on the same cluster (a change
/// the worker refused in place, applied while nothing ran).
pub const EVENT_MIRROR_RECREATED: &str = "MirrorRecreated";

/// Job condition reason Courier uses when it fails an origin it could not keep dispatched.
pub const JOB_REASON_DISPATCH_FAILED: &str = EVENT_DISPATCH_FAILED;
