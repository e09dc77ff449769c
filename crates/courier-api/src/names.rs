//! Fixed names (DESIGN.md "Names"). Tests and charts depend on them.

/// The product, binary and default field manager / event reporting component.
pub const PRODUCT: &str = "courier";

/// `spec.managedBy` of origin Jobs Courier owns. The management cluster's Job controller skips them.
pub const MANAGED_BY: &str = "courier.dev/dispatcher";

/// API group of Courier's own resources.
pub const GROUP: &str = "courier.dev";
/// API version of Courier's own resources.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of Courier's own resources.
pub const API_VERSION: &str = "courier.dev/v1alpha1";

/// Kind of the (cluster-scoped) worker registration.
pub const WORKER_CLUSTER_KIND: &str = "WorkerCluster";
/// Plural resource name of [`WORKER_CLUSTER_KIND`].
pub const WORKER_CLUSTER_PLURAL: &str = "workerclusters";

/// Label on mirrors: the `--origin` id of the management cluster that owns the mirror.
pub const LABEL_ORIGIN: &str = "courier.dev/origin";
/// Label on mirrors: UID of the origin Job.
pub const LABEL_ORIGIN_UID: &str = "courier.dev/origin-uid";
/// Label on mirrors and annotation on origins: the placement epoch (decimal, starts at 1).
pub const EPOCH: &str = "courier.dev/epoch";
/// Label on mirrors carrying the epoch (same key as [`ANNOTATION_EPOCH`]).
pub const LABEL_EPOCH: &str = EPOCH;
/// Annotation on origins carrying the epoch of the current placement intent.
pub const ANNOTATION_EPOCH: &str = EPOCH;
/// Label on origins: the WorkerCluster the origin is placed on (the intent).
pub const LABEL_CLUSTER: &str = "courier.dev/cluster";
/// Annotation on origins: how many times the origin was re-dispatched after losing its mirror.
pub const ANNOTATION_REDISPATCHES: &str = "courier.dev/redispatches";
/// Annotation a user may set on an origin: a label selector over WorkerCluster labels.
pub const ANNOTATION_CLUSTER_SELECTOR: &str = "courier.dev/cluster-selector";
/// Finalizer on origins that have (or may have) a mirror.
pub const FINALIZER: &str = "courier.dev/mirror-cleanup";
/// Finalizer on WorkerClusters: a deleted WorkerCluster stays (draining) until Courier's mirrors on
/// that worker are gone, or the worker stayed unreachable for the worker-lost timeout.
pub const FINALIZER_DRAIN: &str = "courier.dev/drain-mirrors";
/// Annotation on mirrors: hash of the pod template Courier last sent (drift is judged against what
/// was sent, never against what the worker echoes, which may drop fields it does not know).
pub const ANNOTATION_TEMPLATE_HASH: &str = "courier.dev/template-hash";
/// Annotation on mirrors: hash of the mutable spec fields Courier last sent.
pub const ANNOTATION_SPEC_HASH: &str = "courier.dev/spec-hash";
/// Label of Jobs queued by Kueue. On an origin it is kept on the mirror; the mirror is then created
/// suspended and only the worker's Kueue unsuspends it.
pub const LABEL_KUEUE_QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";

/// Label a Secret in Courier's namespace must carry (value `true`) for the controller to read it as
/// a worker kubeconfig: the controller lists and watches only Secrets with it.
pub const LABEL_KUBECONFIG_SECRET: &str = "courier.dev/kubeconfig";
/// WorkerCluster names become label values (`courier.dev/cluster`), which are at most 63 characters.
pub const MAX_WORKER_CLUSTER_NAME: usize = 63;

/// Default key of the kubeconfig in a WorkerCluster's Secret.
pub const DEFAULT_KUBECONFIG_KEY: &str = "kubeconfig";
/// Default `--origin` id.
pub const DEFAULT_ORIGIN_ID: &str = "courier";
/// Default namespace Courier runs in (and reads kubeconfig Secrets from).
pub const DEFAULT_NAMESPACE: &str = "courier-system";
/// ConfigMap on each worker, in the namespace of Courier's ServiceAccount there (the worker chart's),
/// where every management cluster claims its `--origin` id: key = origin id, value = the UID of that
/// management cluster's `kube-system` namespace.
pub const ORIGIN_CLAIMS_CONFIGMAP: &str = "courier-origins";
/// The ValidatingAdmissionPolicy (and binding) of the courier-worker chart installed as release
/// `courier-worker`; the probe reads it by this name (`get` by `resourceNames` in the chart).
pub const WORKER_POLICY_NAME: &str = "courier-worker-mirror-ownership";

/// Origin Job condition type recording which epoch's mirror has reported (see `courier-core`'s
/// `dispatched` module). Job condition types are not validated, so a domain-prefixed type is safe.
pub const CONDITION_DISPATCHED: &str = "courier.dev/Dispatched";
/// Reason of the [`CONDITION_DISPATCHED`] condition.
pub const REASON_MIRROR_CREATED: &str = "MirrorCreated";

/// Origin Job condition type saying whether Courier could place the Job: written False (reason
/// `NoEligibleCluster`, `MirrorRejected` or `ClusterRemoved`, message listing each cluster and why)
/// while it cannot, and flipped True (`Placed`) with the first status copied from a mirror. Never
/// written on a Job that was placed at once.
pub const CONDITION_PLACED: &str = "courier.dev/Placed";

/// The four template labels the Job controller generates (stripped from mirrors unless
/// `manualSelector` is true, or the worker rejects the copied selector).
pub const JOB_CONTROLLER_TEMPLATE_LABELS: [&str; 4] = [
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
];

/// The two template labels that carry the Job's UID.
pub const JOB_CONTROLLER_UID_LABELS: [&str; 2] =
    ["controller-uid", "batch.kubernetes.io/controller-uid"];

#[cfg(test)]
mod tests {
    use super::*;

    /// The names DESIGN.md fixes, written out: users' Jobs, installed CRDs, charts and mirrors on
    /// running workers depend on them, so a change here must fail a test.
    #[test]
    fn fixed_names_are_the_documented_ones() {
        let fixed = [
            (MANAGED_BY, "courier.dev/dispatcher"),
            (GROUP, "courier.dev"),
            (VERSION, "v1alpha1"),
            (API_VERSION, "courier.dev/v1alpha1"),
            (WORKER_CLUSTER_KIND, "WorkerCluster"),
            (WORKER_CLUSTER_PLURAL, "workerclusters"),
            (LABEL_ORIGIN, "courier.dev/origin"),
            (LABEL_ORIGIN_UID, "courier.dev/origin-uid"),
            (LABEL_EPOCH, "courier.dev/epoch"),
            (ANNOTATION_EPOCH, "courier.dev/epoch"),
            (LABEL_CLUSTER, "courier.dev/cluster"),
            (ANNOTATION_CLUSTER_SELECTOR, "courier.dev/cluster-selector"),
            (FINALIZER, "courier.dev/mirror-cleanup"),
            (DEFAULT_KUBECONFIG_KEY, "kubeconfig"),
            (DEFAULT_ORIGIN_ID, "courier"),
            (DEFAULT_NAMESPACE, "courier-system"),
            (LABEL_KUEUE_QUEUE_NAME, "kueue.x-k8s.io/queue-name"),
        ];
        for (value, documented) in fixed {
            assert_eq!(value, documented);
        }
    }
}
