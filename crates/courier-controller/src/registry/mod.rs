//! The cluster registry: WorkerClusters and their kubeconfig Secrets, watched on the management
//! cluster, become one [`Cluster`] each with its own task ([`cluster::run`]): client built from the
//! Secret under the credential policy, probes with timeouts and jittered backoff, the `Ready`
//! condition, and a mirror watch feeding a trimmed cache ([`mirrors`]).
//!
//! Nothing here is shared across clusters except short-held maps: a cluster that hangs, refuses or
//! storms 500s only slows its own task, its own watch and the (bounded, see [`calls`]) reconciles
//! that talk to it. Clusters are added and removed at run time by the WorkerCluster watch; a Secret
//! change wakes only the clusters that reference it.

pub mod calls;
pub mod claim;
pub mod cluster;
mod context;
pub mod lifecycle;
pub mod mirrors;
pub mod namespaces;
pub mod status;
pub mod view;

use crate::credentials::probe::{Reviews, RightsScope};
use crate::errors::CallError;
use crate::locks::{MutexExt as _, RwLockExt as _};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use courier_api::reasons::CONDITION_READY;
use courier_api::{LABEL_KUBECONFIG_SECRET, WorkerCluster};
use courier_core::placement::ClusterView;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::runtime::watcher;
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::backoff::Backoff;
use crate::watch::{self, Cache, Change, NamedValues};
pub use context::{Ctx, Hooks};
use mirrors::MirrorCache;

/// How a cluster's last probe went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeState {
    /// Not probed yet (or connected but its mirror cache is not synced yet).
    Pending,
    Ready,
    NotReady,
}

/// A cluster's health, as the `Ready` condition shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    pub state: ProbeState,
    /// A `courier_api::reasons::REASON_*` value.
    pub reason: &'static str,
    pub message: String,
    /// When `state` last changed between Ready and not Ready (the condition's lastTransitionTime).
    pub since: Option<Timestamp>,
    pub server_version: Option<String>,
    pub last_probe: Option<Timestamp>,
    /// Whether the worker chart's admission policy is installed (None: not known).
    pub policy: Option<bool>,
}

impl Health {
    pub fn ready(&self) -> bool {
        self.state == ProbeState::Ready
    }
}

/// Calls in flight on one worker and the last sign of life from it.
#[derive(Debug, Default)]
struct Progress {
    pending: usize,
    last: Option<Instant>,
}

/// A live client pair for one worker (built from one version of its kubeconfig).
pub struct Connection {
    /// Every non-watch request (each with its own deadline); its idle pooled connection outlives
    /// the probe interval, so the checks between full probes need no TLS handshake.
    pub request: kube::Client,
    /// Read timeout longer than the server-side watch timeout: the mirror watches.
    pub watch: kube::Client,
    pub fingerprint: u64,
    pub server: String,
}

/// One registered worker cluster.
pub struct Cluster {
    pub name: String,
    /// The WorkerCluster and what placement reads of it, replaced together.
    wc: RwLock<(Arc<WorkerCluster>, ClusterView)>,
    health: RwLock<Health>,
    conn: RwLock<Option<Arc<Connection>>>,
    pub mirrors: MirrorCache,
    inflight: Semaphore,
    /// Calls fail fast until then (after a timeout or connection failure).
    circuit: Mutex<Option<Instant>>,
    /// Calls in flight and when one last completed (or the first started): a worker whose calls
    /// stop completing is taken out of placement before its probe times out.
    progress: Mutex<Progress>,
    /// Wakes the cluster's task (Secret changed, call failed, leadership gained, ...).
    pub wake: Notify,
    /// Namespaces known to exist on the worker (EnsureNamespace skips them).
    namespaces: Mutex<HashSet<String>>,
    /// What identifies the API server behind it (duplicate registrations).
    identity: RwLock<lifecycle::Identity>,
    /// The server its Secret's kubeconfig names, for that version of the Secret's data and that key:
    /// other registrations compare with it before it connects (parsed once, not once per peer).
    kubeconfig_server: Mutex<Option<(SecretData, String, Option<String>)>>,
    /// The version of the Secret's data, and the key, the connection was last found to match:
    /// while they stay the same, a cycle neither copies nor hashes the kubeconfig again.
    connection_source: Mutex<Option<(SecretData, String)>>,
    /// The older WorkerCluster registering the same API server, while this one is a duplicate.
    duplicate_of: RwLock<Option<String>>,
    /// Where the origin id is claimed on the worker, for the connection with this fingerprint.
    claim_namespace: Mutex<Option<(u64, String)>>,
    pub cancel: CancellationToken,
    request_timeout: std::time::Duration,
}

impl Cluster {
    fn new(wc: WorkerCluster, shared: &Ctx, cancel: CancellationToken) -> Self {
        Self::with_limits(
            wc,
            shared.cluster_inflight(),
            shared.tuning.request_timeout,
            cancel,
        )
    }

    fn with_limits(
        wc: WorkerCluster,
        inflight: usize,
        request_timeout: std::time::Duration,
        cancel: CancellationToken,
    ) -> Self {
        let name = wc.metadata.name.clone().unwrap_or_default();
        // Seed from the status a previous leader wrote, so "not Ready since" survives restarts.
        let ready_cond = wc
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == CONDITION_READY));
        let health = Health {
            state: ProbeState::Pending,
            reason: "Pending",
            message: "not probed yet".into(),
            since: ready_cond
                .filter(|c| c.status != "True")
                .map(|c| c.last_transition_time.0),
            server_version: wc.status.as_ref().and_then(|s| s.server_version.clone()),
            last_probe: None,
            policy: None,
        };
        let registered = view::registered(&name, &wc);
        Self {
            name,
            wc: RwLock::new((Arc::new(wc), registered)),
            health: RwLock::new(health),
            conn: RwLock::new(None),
            mirrors: MirrorCache::default(),
            inflight: Semaphore::new(inflight),
            circuit: Mutex::new(None),
            progress: Mutex::new(Progress::default()),
            wake: Notify::new(),
            namespaces: Mutex::new(HashSet::new()),
            identity: RwLock::new(lifecycle::Identity::default()),
            kubeconfig_server: Mutex::new(None),
            connection_source: Mutex::new(None),
            duplicate_of: RwLock::new(None),
            claim_namespace: Mutex::new(None),
            cancel,
            request_timeout,
        }
    }

    pub fn worker_cluster(&self) -> Arc<WorkerCluster> {
        self.wc.read_or_recover().0.clone()
    }

    /// What placement reads of the WorkerCluster (shared, see [`view`]).
    pub fn registered(&self) -> ClusterView {
        self.wc.read_or_recover().1.clone()
    }

    fn set_worker_cluster(&self, wc: WorkerCluster) {
        let registered = view::registered(&self.name, &wc);
        *self.wc.write_or_recover() = (Arc::new(wc), registered);
    }

    pub fn identity(&self) -> lifecycle::Identity {
        self.identity.read_or_recover().clone()
    }

    fn set_identity(&self, f: impl FnOnce(&mut lifecycle::Identity)) {
        f(&mut self.identity.write_or_recover());
    }

    /// The older registration of the same API server, while this one is a duplicate.
    pub fn duplicate_of(&self) -> Option<String> {
        self.duplicate_of.read_or_recover().clone()
    }

    fn set_duplicate_of(&self, other: Option<String>) {
        *self.duplicate_of.write_or_recover() = other;
    }

    /// The WorkerCluster is being deleted (its mirrors are drained, no new placements).
    pub fn draining(&self) -> bool {
        self.wc.read_or_recover().1.draining
    }

    pub fn health(&self) -> Health {
        self.health.read_or_recover().clone()
    }

    /// What placement reads of the health, without copying it.
    pub fn readiness(&self) -> view::Readiness {
        view::Readiness::of(&self.health.read_or_recover())
    }

    fn set_health(&self, h: Health) {
        *self.health.write_or_recover() = h;
    }

    /// A check passed: when the worker is Ready and `Connected` already, only `last_probe` moves
    /// (to `at`) and this returns true; in any other state nothing is recorded.
    fn still_connected(&self, at: Timestamp) -> bool {
        let mut h = self.health.write_or_recover();
        let same = h.ready() && h.reason == courier_api::reasons::REASON_CONNECTED;
        if same {
            h.last_probe = Some(at);
        }
        same
    }

    pub fn is_ready(&self) -> bool {
        self.health.read_or_recover().ready()
    }

    pub fn connection(&self) -> Option<Arc<Connection>> {
        self.conn.read_or_recover().clone()
    }

    fn set_connection(&self, c: Option<Arc<Connection>>) {
        *self.conn.write_or_recover() = c;
    }
}

/// A Secret's `data`: key -> decoded bytes.
pub type SecretData = Arc<BTreeMap<String, Vec<u8>>>;

/// Kubeconfig Secrets in Courier's namespace: name -> data.
#[derive(Default)]
pub struct Secrets {
    values: NamedValues<BTreeMap<String, Vec<u8>>>,
}

impl Secrets {
    pub fn is_synced(&self) -> bool {
        self.values.is_synced()
    }

    pub fn get(&self, name: &str) -> Option<SecretData> {
        self.values.get(name)
    }
}

impl Cache<Secret> for Secrets {
    type Key = String;

    fn key_of(&self, s: &Secret) -> Option<String> {
        s.metadata.name.clone()
    }

    /// Stores a Secret's data (nothing else of it); true if the data changed.
    fn store(&self, name: &String, s: Secret) -> bool {
        let data = s
            .data
            .into_iter()
            .flatten()
            .map(|(k, v)| (k, v.0))
            .collect();
        self.values.put(name, data)
    }

    fn drop_key(&self, name: &String) -> bool {
        self.values.remove(name)
    }

    fn cached_keys(&self) -> Vec<String> {
        self.values.names()
    }

    fn mark_synced(&self) {
        self.values.mark_synced();
    }
}

/// Every registered cluster.
#[derive(Default)]
pub struct Registry {
    clusters: RwLock<BTreeMap<String, Arc<Cluster>>>,
    synced: AtomicBool,
    pub secrets: Secrets,
    /// The management cluster's namespaces: labels, and the `kube-system` UID.
    pub namespaces: namespaces::NamespaceLabels,
    /// The checks' encoded access reviews, one per rights scope in use ([`Registry::reviews`]).
    reviews: Mutex<Vec<Weak<Reviews>>>,
}

impl Registry {
    /// The WorkerCluster list has been read at least once (decide must not run before: an empty
    /// list would mean "no cluster exists").
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub fn get(&self, name: &str) -> Option<Arc<Cluster>> {
        self.clusters.read_or_recover().get(name).cloned()
    }

    pub fn all(&self) -> Vec<Arc<Cluster>> {
        self.clusters.read_or_recover().values().cloned().collect()
    }

    /// The checks' access reviews for `scope`, shared by every worker with that scope (most
    /// workers have the same one: 1,000 copies were ~4 MB): built on first use, dropped with the
    /// last worker using them.
    pub fn reviews(&self, scope: RightsScope<'_>) -> Result<Arc<Reviews>, CallError> {
        let mut known = self.reviews.lock_or_recover();
        known.retain(|r| r.strong_count() > 0);
        if let Some(r) = known
            .iter()
            .filter_map(Weak::upgrade)
            .find(|r| r.fit(scope))
        {
            return Ok(r);
        }
        let r = Arc::new(Reviews::new(scope)?);
        known.push(Arc::downgrade(&r));
        Ok(r)
    }

    fn remove(&self, name: &str) -> Option<Arc<Cluster>> {
        self.clusters.write_or_recover().remove(name)
    }

    /// Later registrations of the same API server as `name` (duplicates of it).
    pub fn aliases_of(&self, name: &str) -> Vec<String> {
        self.all()
            .into_iter()
            .filter(|c| c.duplicate_of().as_deref() == Some(name))
            .map(|c| c.name.clone())
            .collect()
    }

    /// Wakes every cluster task (e.g. after gaining leadership: status must be written).
    pub fn wake_all(&self) {
        for c in self.all() {
            c.wake.notify_one();
        }
    }
}

/// Adds or updates a cluster from its WorkerCluster; spawns the task of a new one.
fn apply_worker_cluster(shared: &Arc<Ctx>, wc: WorkerCluster) {
    let Some(name) = wc.metadata.name.clone().filter(|n| !n.is_empty()) else {
        return;
    };
    if let Some(existing) = shared.registry.get(&name) {
        let old = existing.worker_cluster();
        let removal = old.metadata.deletion_timestamp != wc.metadata.deletion_timestamp;
        let placement_changed =
            old.metadata.labels != wc.metadata.labels || old.spec != wc.spec || removal;
        let secret_changed = old.spec.kubeconfig_secret_ref != wc.spec.kubeconfig_secret_ref;
        let recreated = old.metadata.uid != wc.metadata.uid;
        existing.set_worker_cluster(wc);
        if removal {
            info!(cluster = %name, "WorkerCluster is being removed: draining its mirrors");
            shared.requeue_placed_on(&name);
        }
        if secret_changed || recreated || removal {
            existing.wake.notify_one();
        }
        if placement_changed {
            shared.on_cluster_changed(&name);
        }
        return;
    }
    let cancel = shared.token.child_token();
    let cluster = Arc::new(Cluster::new(wc, shared, cancel));
    shared
        .registry
        .clusters
        .write_or_recover()
        .insert(name.clone(), cluster.clone());
    info!(cluster = %name, "WorkerCluster registered");
    shared.tasks.spawn(cluster::run(shared.clone(), cluster));
    shared.on_cluster_changed(&name);
}

/// Removes a cluster (and stops its task); false if it was not registered.
fn remove_worker_cluster(shared: &Arc<Ctx>, name: &str) -> bool {
    let Some(c) = shared.registry.remove(name) else {
        return false;
    };
    info!(cluster = %name, "WorkerCluster removed");
    c.cancel.cancel();
    shared.metrics.forget_cluster(name);
    shared.on_cluster_changed(name);
    // A later registration of the same server may be usable now (a Ready one is no duplicate:
    // waking it would only cost it a full probe).
    for other in shared.registry.all() {
        if !other.is_ready() {
            other.wake.notify_one();
        }
    }
    true
}

/// The registry as the cache of the WorkerCluster watch: each WorkerCluster is one [`Cluster`]
/// (with its task), kept in step by [`apply_worker_cluster`] and [`remove_worker_cluster`].
struct WorkerClusters<'a>(&'a Arc<Ctx>);

impl Cache<WorkerCluster> for WorkerClusters<'_> {
    type Key = String;

    fn key_of(&self, wc: &WorkerCluster) -> Option<String> {
        wc.metadata.name.clone().filter(|n| !n.is_empty())
    }

    fn store(&self, _: &String, wc: WorkerCluster) -> bool {
        apply_worker_cluster(self.0, wc);
        true
    }

    fn drop_key(&self, name: &String) -> bool {
        remove_worker_cluster(self.0, name)
    }

    fn cached_keys(&self) -> Vec<String> {
        self.0
            .registry
            .clusters
            .read_or_recover()
            .keys()
            .cloned()
            .collect()
    }

    fn mark_synced(&self) {
        self.0.registry.synced.store(true, Ordering::Release);
    }
}

/// Watches WorkerClusters (cluster-scoped) and keeps the registry in step.
pub async fn watch_worker_clusters(shared: Arc<Ctx>) {
    let api: Api<WorkerCluster> = Api::all(shared.mgmt.clone());
    let backoff = Backoff::new(shared.tuning.backoff_min, shared.tuning.backoff_max);
    let cache = WorkerClusters(&shared);
    let config = watcher::Config::default();
    watch::run(
        api,
        config,
        backoff,
        &shared.token,
        &cache,
        |change| match change {
            Change::Stored(_) | Change::Deleted(_) => {}
            Change::Synced { first, .. } => {
                if first {
                    let clusters = shared.registry.clusters.read_or_recover().len();
                    info!(clusters, "WorkerCluster list synced");
                    shared.ready_changed();
                }
            }
            Change::Failed(e) => warn!(error = %e, "WorkerCluster watch failed; retrying"),
        },
    )
    .await;
}

/// The label selector of the Secrets the controller reads: only those labelled for it, so other
/// Secrets in its namespace (Helm release Secrets, anything else) never enter its memory.
pub fn kubeconfig_secret_selector() -> String {
    format!("{LABEL_KUBECONFIG_SECRET}=true")
}

/// Watches the Secrets in Courier's namespace labelled `courier.dev/kubeconfig=true`; a change
/// wakes the clusters that reference it.
pub async fn watch_secrets(shared: Arc<Ctx>) {
    let api: Api<Secret> = Api::namespaced(shared.mgmt.clone(), &shared.cfg.namespace);
    let config = watcher::Config::default().labels(&kubeconfig_secret_selector());
    let backoff = Backoff::new(shared.tuning.backoff_min, shared.tuning.backoff_max);
    let cache = &shared.registry.secrets;
    let wake_users = |name: &str| {
        for c in shared.registry.all() {
            if c.worker_cluster().spec.kubeconfig_secret_ref.name == name {
                c.wake.notify_one();
            }
        }
    };
    watch::run(
        api,
        config,
        backoff,
        &shared.token,
        cache,
        |change| match change {
            Change::Stored(name) | Change::Deleted(name) => wake_users(&name),
            Change::Synced { gone, first } => {
                for name in gone {
                    wake_users(&name);
                }
                if first {
                    shared.registry.wake_all();
                    shared.ready_changed();
                }
            }
            // The error names the namespace and the HTTP status, never Secret contents.
            Change::Failed(e) => warn!(error = %e, "Secret watch failed; retrying"),
        },
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Workers with the same rights scope share one set of encoded reviews; another scope gets
    /// its own, and a set nobody holds any more is built anew.
    #[test]
    fn workers_with_one_scope_share_their_reviews() {
        let registry = Registry::default();
        let list = ["team-a".to_string()];
        let wide = RightsScope {
            creating_namespaces: false,
            namespaces: None,
        };
        let listed = RightsScope {
            namespaces: Some(&list),
            ..wide
        };
        let reviews = |scope| registry.reviews(scope).unwrap_or_else(|e| panic!("{e}"));
        let (a, b, c) = (reviews(wide), reviews(wide), reviews(listed));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c) && c.fit(listed));
        drop((a, b));
        assert!(reviews(wide).fit(wide));
        assert_eq!(registry.reviews.lock_or_recover().len(), 2);
    }

    /// What a reconcile reads of a cluster (built once per WorkerCluster version, not per
    /// reconcile) follows every WorkerCluster edit and every health change at once.
    #[test]
    fn the_placement_view_follows_edits_and_health() {
        let wc = |labels: serde_json::Value, spec: serde_json::Value| -> WorkerCluster {
            let mut spec_json = serde_json::json!({
                "kubeconfigSecretRef": {"name": "w1-kubeconfig", "key": "kubeconfig"},
                "weight": 1,
            });
            if let (Some(all), Some(more)) = (spec_json.as_object_mut(), spec.as_object()) {
                all.extend(more.clone());
            }
            serde_json::from_value(serde_json::json!({
                "apiVersion": "courier.dev/v1alpha1", "kind": "WorkerCluster",
                "metadata": {"name": "w1", "labels": labels},
                "spec": spec_json,
            }))
            .unwrap_or_else(|e| panic!("{e}"))
        };
        let first = wc(serde_json::json!({"region": "eu"}), serde_json::json!({}));
        let c = Cluster::with_limits(
            first.clone(),
            2,
            std::time::Duration::from_secs(5),
            CancellationToken::new(),
        );
        let seen = c.registered();
        assert_eq!(seen, view::registered("w1", &first));
        assert_eq!(&*seen.name, "w1");
        assert_eq!(seen.labels.get("region").map(String::as_str), Some("eu"));
        assert_eq!((seen.weight, seen.paused, seen.draining), (1, false, false));
        assert!(seen.namespace_selector.is_none() && seen.namespaces.is_none());

        let edited = wc(
            serde_json::json!({"region": "us"}),
            serde_json::json!({
                "weight": 3, "paused": true, "namespaces": ["team-a"],
                "namespaceSelector": {"matchLabels": {"team": "a"}},
            }),
        );
        c.set_worker_cluster(edited.clone());
        let seen = c.registered();
        assert_eq!(seen, view::registered("w1", &edited));
        assert_eq!(seen.labels.get("region").map(String::as_str), Some("us"));
        assert_eq!((seen.weight, seen.paused), (3, true));
        assert_eq!(
            seen.namespaces.as_deref(),
            Some(&["team-a".to_string()][..])
        );
        assert!(matches!(seen.namespace_selector.as_deref(), Some(Ok(_))));

        let mut deleting = edited;
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()),
        );
        c.set_worker_cluster(deleting);
        assert!(c.registered().draining && c.draining());

        assert_eq!(
            c.readiness(),
            view::Readiness {
                ready: false,
                not_ready_since: None
            },
            "pending: no worker-lost clock"
        );
        let health = |state, since| Health {
            state,
            reason: "Test",
            message: String::new(),
            since,
            server_version: None,
            last_probe: None,
            policy: None,
        };
        let t = Timestamp::now();
        c.set_health(health(ProbeState::Ready, Some(t)));
        assert_eq!(
            c.readiness(),
            view::Readiness {
                ready: true,
                not_ready_since: None
            }
        );
        c.set_health(health(ProbeState::NotReady, Some(t)));
        assert_eq!(
            c.readiness(),
            view::Readiness {
                ready: false,
                not_ready_since: Some(t)
            }
        );
    }
}
