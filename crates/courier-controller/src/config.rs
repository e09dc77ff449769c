//! What configures the controller: [`ControllerConfig`] (the `courier run` flags), [`Tuning`] (the
//! knobs that are not flags), and the names every write uses. Plain values; every other module may
//! use this one and it uses none of them.

use std::net::SocketAddr;
use std::time::Duration;

use courier_core::namespaces::WorkerNamespaces;

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
    /// Origins reconciled at once (new origins, resyncs, retries); as many workers more copy statuses
    /// only (`runtime::urgent_only_workers`).
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
    /// How often a healthy worker is checked between full probes (jittered, at most this): one
    /// access review over a kept-alive connection, the next of the required rights in turn, and
    /// at every other check a TCP connect showing the server still takes new connections.
    pub probe_interval: Duration,
    /// How often a healthy worker gets the full probe (`/version`, every access review, the
    /// `kube-system` UID, the origin id claim, the admission policy), jittered to between half
    /// and all of it. It also runs on start, when the kubeconfig changes, when a call to the
    /// worker or its watch fails, and whenever a check fails.
    pub rights_interval: Duration,
    /// TCP/TLS connect timeout of worker clients.
    pub connect_timeout: Duration,
    /// Deadline of every single request to a worker (its request client's read timeout, which
    /// also closes idle pooled connections, is this plus `probe_interval`: see `registry::cluster`).
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
    /// WorkerCluster status is written on change; and a full probe refreshes `lastProbeTime`
    /// when the stored one is older than this (so at least every `rights_interval` or this,
    /// whichever is longer; the checks between full probes do not).
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
            rights_interval: Duration::from_secs(300),
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

/// A ticker whose first tick is one `period` from now (the loops that use it have just started
/// fresh) and which, after a slow round, waits a whole period again instead of catching up.
pub fn every(period: Duration) -> tokio::time::Interval {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}
