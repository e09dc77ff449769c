//! What the registry's tasks (the WorkerCluster and Secret watches, one task per cluster) need from
//! the rest of the controller: values, and [`Hooks`] for what only the layers above know (the
//! origins placed on a cluster and their namespaces, which origins a cluster or namespace change
//! affects, whether a mirror change can change a decision, the sweep of stale mirrors, readiness).
//! The registry never reaches into those layers itself.

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Client;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Cluster, Registry};
use crate::config::{ControllerConfig, Tuning};
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::queue::{ObjectKey, WorkQueue};
use courier_core::reconcile::MirrorView;

/// What the registry asks of the layers above it.
pub trait Hooks: Send + Sync {
    /// Unfinished origins placed on `cluster` (the WorkerCluster's `status.currentMirrors`).
    fn placed_on(&self, cluster: &str) -> u32;
    /// A change of `cluster` that can affect placement (readiness, registration, labels, weight,
    /// paused): re-examine the origins it can affect.
    fn cluster_changed(&self, cluster: &str);
    /// Re-examine every origin placed on `cluster` (it is drained, or now a duplicate).
    fn requeue_placed_on(&self, cluster: &str);
    /// The namespaces of the unfinished origins placed on `cluster` (their mirrors' namespaces
    /// there stay watched when its `spec.namespaces` no longer lists them).
    fn namespaces_placed_on(&self, cluster: &str) -> Vec<String>;
    /// The labels of management namespace `namespace` changed: re-examine its origins (a
    /// WorkerCluster's `namespaceSelector` may take them now, or no longer).
    fn namespace_changed(&self, namespace: &str);
    /// A cache the registry keeps has synced: readiness may have changed.
    fn ready_changed(&self);
    /// Whether the new version `new` of the mirror of origin `key` (cached as `old`) may change
    /// its decision ([`courier_core::reconcile::mirror_change_matters`] on the cached origin;
    /// true without one): only then does the mirror watch queue the origin.
    fn mirror_change_matters(&self, key: &ObjectKey, old: &MirrorView, new: &MirrorView) -> bool;
    /// Sweeps `cluster`'s stale and orphaned mirrors before it turns Ready; resolves to how many
    /// were deleted.
    fn sweep(&self, cluster: Arc<Cluster>) -> BoxFuture<'static, usize>;
}

/// The registry's view of the controller.
pub struct Ctx {
    pub cfg: ControllerConfig,
    pub tuning: Tuning,
    pub mgmt: Client,
    pub registry: Arc<Registry>,
    /// Mirror changes queue their origin.
    pub queue: Arc<WorkQueue>,
    pub metrics: Arc<Metrics>,
    pub leader: Arc<Leadership>,
    /// Cancelled when the controller stops; parent of every cluster's token.
    pub token: CancellationToken,
    /// Where cluster tasks are spawned (the controller waits for them on shutdown).
    pub tasks: TaskTracker,
    pub hooks: Arc<dyn Hooks>,
}

impl Ctx {
    /// Whether this replica may write now (see `Leadership::is_leading`).
    pub fn is_leader(&self) -> bool {
        self.leader.is_leading()
    }

    /// Calls in flight to one worker at once.
    pub fn cluster_inflight(&self) -> usize {
        match self.tuning.cluster_inflight {
            // A hung worker holds at most this many reconcile workers for one request timeout.
            0 => (self.cfg.concurrency / 4).max(2),
            n => n,
        }
    }

    pub fn on_cluster_changed(&self, cluster: &str) {
        self.hooks.cluster_changed(cluster);
    }

    pub fn requeue_placed_on(&self, cluster: &str) {
        self.hooks.requeue_placed_on(cluster);
    }

    pub fn ready_changed(&self) {
        self.hooks.ready_changed();
    }
}
