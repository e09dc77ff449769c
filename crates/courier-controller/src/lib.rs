//! Courier's runtime: the I/O shell around `courier-core`'s decisions. One task per worker cluster
//! (client, mirror watch, backoff, health), the origin Job controller (watch, queue keyed by origin
//! `namespace/name`, reconcile = read caches -> `courier_core::reconcile::decide` -> perform actions),
//! garbage collection, leader election, Prometheus metrics and the HTTP endpoints.
//!
//! # Entry points
//! - [`run`]: everything `courier run` needs, until `shutdown` is cancelled.
//! - [`Controller`]: the same, plus a [`ControllerHandle`] (readiness, leadership, and snapshots of
//!   clusters and Jobs for `courier jobs` / `courier explain` and the in-process demo), and
//!   [`Tuning`] for the knobs that are not `courier run` flags (probe interval, timeouts, lease
//!   timings; tests make them short).
//!
//! # Modules
//! Each uses only the ones listed after it (`tests/module_graph.rs` fails on an import cycle):
//! - `runtime`: starts every task and runs until shutdown.
//! - `http`: `/metrics`, `/healthz`, `/readyz`; `ui`: the read-only web view (`--ui-addr`).
//! - `shared`: builds the parts below from the configuration and joins them.
//! - `snapshot`: read-only views of clusters and Jobs (the handle, the web view).
//! - `gc`: periodic and on-reconnect sweeps of orphaned and stale mirrors.
//! - `origin`: the origin Job cache, the work queue's workers, reconcile and the actions it performs.
//! - `registry`: WorkerClusters + their kubeconfig Secrets -> one task per cluster (client, probe,
//!   health condition, mirror watch and cache, backoff); asks the layers above through its hooks.
//! - `leader`: Lease-based leader election.
//! - the leaves: `events` (and `recent`, the events kept for the web view), [`metrics`] (public:
//!   its catalogue is checked against the docs and the chart's alerts and dashboard), `queue`,
//!   [`credentials`] (kubeconfig policy checks and client building; public: `courier cluster add`
//!   applies the same checks), [`api_calls`] (every API call the controller makes: rights probes,
//!   RBAC tests of the charts), `errors`, [`backoff`], `locks`, `config` ([`ControllerConfig`],
//!   [`Tuning`]).

use std::sync::Arc;

use kube::Client;
use tokio_util::sync::CancellationToken;

pub mod api_calls;
pub mod backoff;
mod config;
pub mod credentials;
#[cfg(test)]
mod entry_memory;
mod errors;
mod events;
mod gc;
mod http;
mod leader;
mod locks;
pub mod metrics;
mod origin;
mod queue;
mod recent;
mod registry;
mod runtime;
pub mod server_wait;
mod shared;
mod snapshot;
mod ui;
mod watch;

pub use config::{
    ControllerConfig, ControllerError, CredentialPolicy, DEFAULT_LEASE_NAME, FIELD_MANAGER,
    LeaseTimings, Tuning,
};
pub use courier_core::namespaces::{PodSecurityLevel, WorkerNamespaces};
pub use queue::ObjectKey;
pub use recent::EventSnapshot;
pub use snapshot::{
    ClusterSnapshot, ConditionSnapshot, Explanation, JobPhase, JobSnapshot, MirrorSnapshot,
};

/// Runs the controller until `shutdown` is cancelled (then releases the leader Lease, if held).
pub async fn run(
    client: Client,
    cfg: ControllerConfig,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    Controller::new(client, cfg)?.run(shutdown).await
}

/// A controller ready to run, with a handle to observe it.
pub struct Controller {
    shared: Arc<shared::Shared>,
}

impl Controller {
    /// Validates `cfg` and builds the controller with the default [`Tuning`].
    pub fn new(client: Client, cfg: ControllerConfig) -> Result<Self, ControllerError> {
        Self::with_tuning(client, cfg, Tuning::default())
    }

    pub fn with_tuning(
        client: Client,
        cfg: ControllerConfig,
        tuning: Tuning,
    ) -> Result<Self, ControllerError> {
        let shared = shared::Shared::new(client, cfg, tuning)?;
        Ok(Self {
            shared: Arc::new(shared),
        })
    }

    /// A cheap, clonable handle (readiness, leadership, snapshots); valid before and after `run`.
    pub fn handle(&self) -> ControllerHandle {
        ControllerHandle {
            shared: self.shared.clone(),
        }
    }

    /// Runs until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ControllerError> {
        runtime::run(self.shared, shutdown).await
    }
}

/// Observes a running controller. All methods read in-memory state only (no API calls).
#[derive(Clone)]
pub struct ControllerHandle {
    shared: Arc<shared::Shared>,
}

impl ControllerHandle {
    /// Caches synced (origins, WorkerClusters, Secrets) and, with leader election, either leading or
    /// standing by with a working Lease loop: what `/readyz` answers.
    pub fn is_ready(&self) -> bool {
        self.shared.is_ready()
    }

    /// Waits until [`Self::is_ready`].
    pub async fn ready(&self) {
        self.shared.wait_ready().await;
    }

    /// Whether this replica currently holds the leader Lease (always true without leader election,
    /// once running).
    pub fn is_leader(&self) -> bool {
        self.shared.is_leader()
    }

    /// Every registered WorkerCluster as this replica sees it.
    pub fn clusters(&self) -> Vec<ClusterSnapshot> {
        snapshot::clusters(&self.shared.origin)
    }

    /// Every origin Job Courier manages, with where it runs and what it waits for.
    pub fn jobs(&self) -> Vec<JobSnapshot> {
        snapshot::jobs(&self.shared.origin)
    }

    /// What the controller knows and would do about one origin (a dry run of `decide` on the
    /// current caches); `None` if no managed origin has that name.
    pub fn explain(&self, namespace: &str, name: &str) -> Option<Explanation> {
        snapshot::explain(&self.shared.origin, &ObjectKey::new(namespace, name))
    }

    /// The Prometheus text exposition (what `/metrics` serves).
    pub fn metrics_text(&self) -> String {
        self.shared.metrics_text()
    }
}
