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
//! - `registry`: WorkerClusters + their kubeconfig Secrets -> one task per cluster (client, probe,
//!   health condition, mirror watch and cache, backoff).
//! - `origin`: the origin Job cache, the work queue's workers, reconcile and the actions it performs.
//! - `gc`: periodic and on-reconnect sweeps of orphaned and stale mirrors.
//! - `leader`: Lease-based leader election.
//! - [`metrics`] (public: its catalogue is checked against the docs and the chart's alerts and
//!   dashboard), `http`: Prometheus metrics and `/metrics`, `/healthz`, `/readyz`.
//! - `ui`: the read-only web view (`--ui-addr`).
//! - [`api_calls`]: every API call the controller makes (rights probes, RBAC tests of the charts).
//! - [`credentials`]: kubeconfig policy checks and client building (public: `courier cluster add`
//!   can apply the same checks before storing a kubeconfig).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio_util::sync::CancellationToken;

pub mod api_calls;
pub mod backoff;
pub mod credentials;
mod errors;
mod events;
mod gc;
mod http;
mod leader;
mod locks;
pub mod metrics;
mod origin;
mod queue;
mod registry;
mod shared;
mod snapshot;
mod ui;

pub use courier_core::namespaces::{PodSecurityLevel, WorkerNamespaces};
pub use queue::ObjectKey;
pub use snapshot::{
    ClusterSnapshot, ConditionSnapshot, Explanation, JobPhase, JobSnapshot, MirrorSnapshot,
};
pub use ui::recent::EventSnapshot;

/// Which classes of kubeconfig credentials a WorkerCluster may use. Everything is refused by default:
/// kubeconfigs that run programs (exec plugins, auth-provider), read local files (tokenFile, certificate
/// or key paths) or skip TLS verification.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CredentialPolicy {
    pub allow_exec: bool,
    pub allow_file_references: bool,
    pub allow_insecure_tls: bool,
}

/// Everything `courier run` configures.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// This management cluster's id (`courier.dev/origin` on mirrors).
    pub origin_id: String,
    /// Courier's own namespace (kubeconfig Secrets, the leader Lease).
    pub namespace: String,
    /// `/metrics`, `/healthz`, `/readyz`; `None` = no HTTP endpoint (in-process demo may disable it).
    pub metrics_addr: Option<SocketAddr>,
    /// The read-only web view; `None` = off. A loopback address serves everyone; any other address
    /// requires a bearer token (TokenReview) and shows only what the caller may list.
    pub ui_addr: Option<SocketAddr>,
    /// Origins reconciled at once.
    pub concurrency: usize,
    pub max_redispatch: u32,
    pub worker_lost_timeout: Duration,
    pub redispatch_on_worker_loss: bool,
    pub gc_interval: Duration,
    /// How long a finished mirror stays on its worker once the origin holds its final status
    /// (`--finished-mirror-ttl`); `None` keeps finished mirrors until the origin is deleted.
    pub finished_mirror_ttl: Option<Duration>,
    pub leader_elect: bool,
    /// Lease timings (`--leader-elect-*`); `None` keeps [`Tuning`]'s.
    pub lease: Option<LeaseTimings>,
    /// Leader-election identity (defaults to the pod/host name plus a random suffix).
    pub identity: String,
    pub credentials: CredentialPolicy,
    /// Whether a Job's namespace is created on a worker that lacks it (`--create-worker-namespaces`,
    /// with `--worker-namespace-pod-security`); by default it must exist there.
    pub worker_namespaces: WorkerNamespaces,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            origin_id: "courier".into(),
            namespace: "courier-system".into(),
            metrics_addr: None,
            ui_addr: None,
            concurrency: 16,
            max_redispatch: 3,
            worker_lost_timeout: Duration::from_secs(15 * 60),
            redispatch_on_worker_loss: true,
            gc_interval: Duration::from_secs(60),
            finished_mirror_ttl: Some(Duration::from_secs(600)),
            leader_elect: false,
            lease: None,
            identity: String::new(),
            credentials: CredentialPolicy::default(),
            worker_namespaces: WorkerNamespaces::MustExist,
        }
    }
}

/// Leader-election timings: a leader that cannot renew within `renew_deadline` stops writing;
/// the others take over once the Lease is unchanged for `duration`; rounds every `retry_period`.
/// `renew_deadline` must be at most 2/3 of `duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimings {
    pub duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

/// Runtime knobs that are not `courier run` flags. The defaults suit production; tests shorten them.
#[derive(Debug, Clone)]
pub struct Tuning {
    /// How often a healthy worker is probed (`/version` + access reviews).
    pub probe_interval: Duration,
    /// TCP/TLS connect timeout of worker clients.
    pub connect_timeout: Duration,
    /// Deadline of every single request to a worker (and the read timeout of its request client).
    pub request_timeout: Duration,
    /// Server-side timeout of mirror watches; their client's read timeout is this plus a margin, so
    /// a silent dead connection is noticed without cutting healthy watches.
    pub watch_timeout: Duration,
    /// Backoff of per-cluster probes and watches after failures: `min * 2^n`, jittered, capped.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Per-origin retry backoff after a failed reconcile.
    pub retry_min: Duration,
    pub retry_max: Duration,
    /// `courier-core`'s retry interval while no cluster can take a Job.
    pub retry_interval: Duration,
    /// `courier-core`'s requeue while waiting for a cache to sync or a deletion to finish.
    pub short_retry: Duration,
    /// A worker that refused (or did not answer) a Job's mirror is skipped for that Job for this
    /// long, doubling on each refusal up to `refusal_backoff_max`.
    pub refusal_backoff_min: Duration,
    pub refusal_backoff_max: Duration,
    /// A worker holding someone else's Job under the origin's name is skipped for the same initial
    /// time, doubling up to this; then the name is checked again.
    pub foreign_backoff_max: Duration,
    /// WorkerCluster status is written only on change, and at least this often (lastProbeTime).
    pub status_heartbeat: Duration,
    /// Every origin is reconciled at least this often (missed events cannot stall a Job).
    pub resync_interval: Duration,
    /// Calls in flight to one worker at once (0 = a quarter of `concurrency`, at least 2). A worker that
    /// hangs can hold at most this many reconciles; the rest serve other workers.
    pub cluster_inflight: usize,
    /// Leader election: the Lease's name in the controller's namespace and its timings.
    pub lease_name: String,
    pub lease_duration: Duration,
    pub lease_renew_deadline: Duration,
    pub lease_retry_period: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            probe_interval: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            watch_timeout: Duration::from_secs(60),
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(60),
            retry_min: Duration::from_millis(100),
            retry_max: Duration::from_secs(60),
            retry_interval: Duration::from_secs(30),
            short_retry: Duration::from_secs(2),
            refusal_backoff_min: Duration::from_secs(30),
            refusal_backoff_max: Duration::from_secs(600),
            foreign_backoff_max: Duration::from_secs(300),
            status_heartbeat: Duration::from_secs(60),
            resync_interval: Duration::from_secs(300),
            cluster_inflight: 0,
            lease_name: DEFAULT_LEASE_NAME.into(),
            lease_duration: Duration::from_secs(15),
            lease_renew_deadline: Duration::from_secs(10),
            lease_retry_period: Duration::from_secs(2),
        }
    }
}

/// Name of the leader-election Lease in Courier's namespace.
pub const DEFAULT_LEASE_NAME: &str = "courier-leader";
/// Field manager of every write Courier makes.
pub const FIELD_MANAGER: &str = "courier";

/// Why the controller could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("cannot serve metrics on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot serve the web view on {addr}: {source}")]
    BindUi {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("controller task {task} failed: {message}")]
    Task { task: &'static str, message: String },
}

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
        shared::run(self.shared, shutdown).await
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
        snapshot::clusters(&self.shared)
    }

    /// Every origin Job Courier manages, with where it runs and what it waits for.
    pub fn jobs(&self) -> Vec<JobSnapshot> {
        snapshot::jobs(&self.shared)
    }

    /// What the controller knows and would do about one origin (a dry run of `decide` on the
    /// current caches); `None` if no managed origin has that name.
    pub fn explain(&self, namespace: &str, name: &str) -> Option<Explanation> {
        snapshot::explain(&self.shared, &ObjectKey::new(namespace, name))
    }

    /// The Prometheus text exposition (what `/metrics` serves).
    pub fn metrics_text(&self) -> String {
        self.shared.metrics_text()
    }
}
