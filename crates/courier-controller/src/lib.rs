//! Courier's runtime: the I/O shell around `courier-core`'s decisions. One task per worker cluster
//! (client, mirror watch, backoff, health), the origin Job controller (watch, queue keyed by origin
//! `namespace/name`, reconcile = read caches -> `courier_core::reconcile::decide` -> perform actions),
//! garbage collection, leader election, Prometheus metrics and the HTTP endpoints.

use std::net::SocketAddr;
use std::time::Duration;

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
    /// Origins reconciled at once.
    pub concurrency: usize,
    pub max_redispatch: u32,
    pub worker_lost_timeout: Duration,
    pub redispatch_on_worker_loss: bool,
    pub gc_interval: Duration,
    pub leader_elect: bool,
    /// Leader-election identity (defaults to the pod/host name plus a random suffix).
    pub identity: String,
    pub credentials: CredentialPolicy,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            origin_id: "courier".into(),
            namespace: "courier-system".into(),
            metrics_addr: None,
            concurrency: 16,
            max_redispatch: 3,
            worker_lost_timeout: Duration::from_secs(15 * 60),
            redispatch_on_worker_loss: true,
            gc_interval: Duration::from_secs(60),
            leader_elect: false,
            identity: String::new(),
            credentials: CredentialPolicy::default(),
        }
    }
}
