//! The controller's parts, built once from the configuration and joined here: the origin
//! controller's context, the registry's context (with [`Joins`], its hooks into the origin
//! controller and the garbage collector), leadership and metrics. Only the top of the crate uses
//! this module (`runtime`, which starts the tasks, the HTTP endpoints and the public handle); the
//! modules it joins never import it back.
//!
//! Locks are `std` locks held for map operations only, never across an await.

use std::collections::HashMap;
use std::sync::Arc;

use courier_api::MANAGED_BY;
use courier_core::phase::{JobPhase, PhaseFacts};
use courier_core::reconcile::{DispatchConfig, MirrorView};
use futures::future::BoxFuture;
use kube::Client;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{ControllerConfig, ControllerError, Tuning};
use crate::events::EventRecorder;
use crate::leader::{Election, Leadership};
use crate::metrics::{CacheGauges, ClusterGauges, Metrics, STALE};
use crate::origin::store::OriginStore;
use crate::queue::{ObjectKey, WorkQueue};
use crate::registry::calls::jobs_resource;
use crate::registry::{Cluster, Registry};
use crate::{gc, origin, registry};

pub struct Shared {
    pub cfg: ControllerConfig,
    pub tuning: Tuning,
    pub identity: String,
    pub mgmt: Client,
    /// The origin controller: caches, queue, what reconciles remember.
    pub origin: Arc<origin::Ctx>,
    /// The registry's tasks' view of the controller.
    pub registry: Arc<registry::Ctx>,
    pub metrics: Arc<Metrics>,
    pub leader: Arc<Leadership>,
    /// Cancelled when the controller stops; parent of every task's token.
    pub token: CancellationToken,
    pub tasks: TaskTracker,
    /// Asks the GC loop for a sweep now.
    pub gc_now: Arc<Notify>,
    /// Notified when a cache syncs (readiness is recomputed then).
    pub synced: Arc<Notify>,
    ready: watch::Sender<bool>,
}

/// The registry's hooks, answered by the origin controller and the garbage collector.
struct Joins {
    origin: Arc<origin::Ctx>,
}

impl registry::Hooks for Joins {
    fn placed_on(&self, cluster: &str) -> u32 {
        self.origin.origins.placed_on(cluster)
    }

    fn cluster_changed(&self, cluster: &str) {
        self.origin.on_cluster_changed(cluster);
    }

    fn requeue_placed_on(&self, cluster: &str) {
        self.origin.requeue_placed_on(cluster);
    }

    fn namespaces_placed_on(&self, cluster: &str) -> Vec<String> {
        self.origin.namespaces_placed_on(cluster)
    }

    fn ready_changed(&self) {
        self.origin.ready_changed();
    }

    fn namespace_changed(&self, namespace: &str) {
        self.origin.requeue_namespace(namespace);
    }

    fn mirror_change_matters(&self, key: &ObjectKey, old: &MirrorView, new: &MirrorView) -> bool {
        let origin = &self.origin;
        origin.origins.get(key).is_none_or(|o| {
            courier_core::reconcile::mirror_change_matters(old, new, &o.view, &origin.dispatch)
        })
    }

    fn sweep(&self, cluster: Arc<Cluster>) -> BoxFuture<'static, usize> {
        let origin = self.origin.clone();
        Box::pin(async move { gc::sweep_cluster(&origin, &cluster).await })
    }
}

/// Checks `cfg` and applies its lease timings to `tuning`.
fn validate(cfg: &ControllerConfig, tuning: &mut Tuning) -> Result<(), ControllerError> {
    if let Some(l) = cfg.lease {
        tuning.lease_duration = l.duration;
        tuning.lease_renew_deadline = l.renew_deadline;
        tuning.lease_retry_period = l.retry_period;
    }
    if cfg.origin_id.is_empty() {
        return Err(ControllerError::Config(
            "the origin id must not be empty".into(),
        ));
    }
    if let Some(problem) = courier_core::selector::label_value_problem(&cfg.origin_id) {
        return Err(ControllerError::Config(format!(
            "origin id {:?} cannot be a label value: {problem}",
            cfg.origin_id
        )));
    }
    if cfg.namespace.is_empty() {
        return Err(ControllerError::Config(
            "the namespace must not be empty".into(),
        ));
    }
    if cfg.concurrency == 0 {
        return Err(ControllerError::Config(
            "concurrency must be at least 1".into(),
        ));
    }
    // A leader that cannot renew stops writing at the renew deadline; the others may take over
    // only at the lease duration. The margin covers a round trip and clock rates.
    if cfg.leader_elect && tuning.lease_renew_deadline * 3 > tuning.lease_duration * 2 {
        return Err(ControllerError::Config(format!(
            "the lease renew deadline ({:?}) must be at most 2/3 of the lease duration ({:?})",
            tuning.lease_renew_deadline, tuning.lease_duration
        )));
    }
    Ok(())
}

impl Shared {
    pub fn new(
        client: Client,
        cfg: ControllerConfig,
        mut tuning: Tuning,
    ) -> Result<Self, ControllerError> {
        validate(&cfg, &mut tuning)?;
        let identity = if cfg.identity.is_empty() {
            format!("courier-{:08x}", rand::random::<u32>())
        } else {
            cfg.identity.clone()
        };
        // events.k8s.io/v1 limits reportingInstance to 128 characters.
        let instance: String = identity.chars().take(128).collect();
        let recorder = EventRecorder::new(client.clone(), MANAGED_BY.into(), instance);
        let dispatch = DispatchConfig {
            origin_id: cfg.origin_id.clone(),
            max_redispatch: cfg.max_redispatch,
            worker_lost_timeout: cfg.worker_lost_timeout,
            redispatch_on_worker_loss: cfg.redispatch_on_worker_loss,
            retry_interval: tuning.retry_interval,
            short_retry: tuning.short_retry,
            finished_mirror_ttl: cfg.finished_mirror_ttl,
            refusal_backoff_min: tuning.refusal_backoff_min,
            refusal_backoff_max: tuning.refusal_backoff_max,
            foreign_backoff_max: tuning.foreign_backoff_max,
            worker_namespaces: cfg.worker_namespaces,
        };
        let token = CancellationToken::new();
        let tasks = TaskTracker::new();
        let queue = Arc::new(WorkQueue::new(tuning.retry_min, tuning.retry_max));
        let clusters = Arc::new(Registry::default());
        let metrics = Arc::new(Metrics::new());
        let leader = Arc::new(Leadership::new(
            cfg.leader_elect.then_some(tuning.lease_renew_deadline),
        ));
        let synced = Arc::new(Notify::new());
        let origin = Arc::new(origin::Ctx {
            cfg: cfg.clone(),
            tuning: tuning.clone(),
            dispatch,
            mgmt: client.clone(),
            jobs_ar: jobs_resource(),
            queue: queue.clone(),
            origins: Arc::new(OriginStore::default()),
            registry: clusters.clone(),
            metrics: metrics.clone(),
            leader: leader.clone(),
            recorder,
            token: token.clone(),
            synced: synced.clone(),
            memory: origin::Memory::default(),
            writes: Default::default(),
            placing: Default::default(),
        });
        let registry = Arc::new(registry::Ctx {
            cfg: cfg.clone(),
            tuning: tuning.clone(),
            mgmt: client.clone(),
            registry: clusters,
            queue,
            metrics: metrics.clone(),
            leader: leader.clone(),
            token: token.clone(),
            tasks: tasks.clone(),
            hooks: Arc::new(Joins {
                origin: origin.clone(),
            }),
        });
        Ok(Self {
            identity,
            mgmt: client,
            origin,
            registry,
            metrics,
            leader,
            token,
            tasks,
            gc_now: Arc::new(Notify::new()),
            synced,
            ready: watch::Sender::new(false),
            cfg,
            tuning,
        })
    }

    /// What the leader-election loop needs.
    pub fn election(&self) -> Election {
        Election {
            mgmt: self.mgmt.clone(),
            namespace: self.cfg.namespace.clone(),
            identity: self.identity.clone(),
            tuning: self.tuning.clone(),
            leader: self.leader.clone(),
            token: self.token.clone(),
        }
    }

    /// Whether this replica may write now: it leads, and (with leader election) its last successful
    /// renewal is younger than the renew deadline on the monotonic clock. Checked immediately
    /// before every write, so a replica paused past its lease writes nothing until it renews.
    pub fn is_leader(&self) -> bool {
        self.leader.is_leading()
    }

    /// Ready, and why (or why not).
    pub fn readiness(&self) -> (bool, String) {
        let mut missing = Vec::new();
        if !self.origin.origins.is_synced() {
            missing.push("origin Job cache not synced");
        }
        if !self.origin.registry.is_synced() {
            missing.push("WorkerCluster list not synced");
        }
        if !self.origin.registry.secrets.is_synced() {
            missing.push("Secret cache not synced");
        }
        let l = self.leader.state();
        if self.cfg.leader_elect && !l.leading && !l.healthy {
            missing.push("leader election cannot reach the Lease");
        }
        if !missing.is_empty() {
            return (false, missing.join("; "));
        }
        let role = if l.leading { "leading" } else { "standing by" };
        (true, format!("caches synced, {role}"))
    }

    pub fn is_ready(&self) -> bool {
        self.readiness().0
    }

    /// Recomputes readiness and wakes `wait_ready` callers.
    pub fn ready_changed(&self) {
        let ready = self.is_ready();
        self.ready.send_if_modified(|r| {
            let changed = *r != ready;
            *r = ready;
            changed
        });
    }

    pub async fn wait_ready(&self) {
        let mut rx = self.ready.subscribe();
        let _ = rx.wait_for(|r| *r).await;
    }

    /// Reads the cache gauges and renders every metric.
    pub fn metrics_text(&self) -> String {
        let o = &self.origin;
        let clusters = o
            .registry
            .all()
            .into_iter()
            .map(|c| {
                let aliases = o.registry.aliases_of(&c.name);
                let mut mirrors: HashMap<&'static str, usize> = HashMap::new();
                for (key, e) in c.mirrors.entries() {
                    let origin = o.origins.get(&key);
                    let verdict = gc::verdict(
                        &self.cfg.origin_id,
                        &c.name,
                        &aliases,
                        &e.view,
                        origin.as_deref(),
                    );
                    let state = if verdict.is_some() {
                        STALE
                    } else {
                        JobPhase::of(PhaseFacts {
                            deleting: e.view.deleting,
                            suspend: e.view.spec.get("suspend").and_then(|s| s.as_bool())
                                == Some(true),
                            status: &e.view.status,
                            placed: true,
                        })
                        .label()
                    };
                    *mirrors.entry(state).or_insert(0) += 1;
                }
                ClusterGauges {
                    ready: c.is_ready(),
                    current_mirrors: o.origins.placed_on(&c.name),
                    mirrors,
                    name: c.name.clone(),
                }
            })
            .collect();
        self.metrics.render_with(&CacheGauges {
            origins: o.origins.len(),
            queue_depth: o.queue.len(),
            leader: self.is_leader(),
            clusters,
        })
    }
}
