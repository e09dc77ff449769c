//! The state every task shares (caches, queue, registry, metrics, leadership) and the top-level run
//! loop that starts the tasks.
//!
//! Tasks: the leader election loop (or "always leading"), the Secret and WorkerCluster watches
//! (which start one task per cluster, each with its own mirror watch), the origin Job watch,
//! `concurrency` queue workers, the periodic resync, the GC loop, the leadership reactor and the
//! HTTP server. Locks are `std` locks held for map operations only, never across an await.

use crate::locks::MutexExt as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use courier_api::{LABEL_CLUSTER, MANAGED_BY};
use courier_core::job::finished;
use courier_core::phase::{JobPhase, PhaseFacts};
use courier_core::reconcile::{AvoidKind, DispatchConfig, Hints, Wait};
use kube::Client;
use kube::api::{ApiResource, GroupVersionKind};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::events::EventRecorder;
use crate::leader::{LeaderState, Leadership};
use crate::metrics::{MIRROR_STATES, Metrics, STALE};
use crate::origin::store::OriginStore;
use crate::queue::{ObjectKey, WorkQueue};
use crate::registry::Registry;
use crate::{ControllerConfig, ControllerError, Tuning, gc, http, leader, origin, registry};

/// batch/v1 Jobs as a dynamic resource (mirrors are built from and read as JSON).
pub fn jobs_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("batch", "v1", "Job"), "jobs")
}

/// What the last decision for an origin waits for.
struct WaitNote {
    message: String,
    /// No cluster could take it: cluster changes re-examine it.
    no_eligible: bool,
}

pub struct Shared {
    pub cfg: ControllerConfig,
    pub tuning: Tuning,
    pub dispatch: DispatchConfig,
    pub identity: String,
    pub mgmt: Client,
    pub jobs_ar: ApiResource,
    pub queue: WorkQueue,
    pub origins: OriginStore,
    pub registry: Registry,
    pub metrics: Metrics,
    pub leader: Leadership,
    pub recorder: EventRecorder,
    /// Cancelled when the controller stops; parent of every task's token.
    pub token: CancellationToken,
    pub tasks: TaskTracker,
    /// Asks the GC loop for a sweep now.
    pub gc_now: Notify,
    hints: Mutex<HashMap<ObjectKey, (String, Hints)>>,
    waits: Mutex<HashMap<ObjectKey, WaitNote>>,
    ready: watch::Sender<bool>,
}

impl Shared {
    pub fn new(
        client: Client,
        cfg: ControllerConfig,
        mut tuning: Tuning,
    ) -> Result<Self, ControllerError> {
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
        Ok(Self {
            queue: WorkQueue::new(tuning.retry_min, tuning.retry_max),
            dispatch,
            identity,
            mgmt: client,
            jobs_ar: jobs_resource(),
            origins: OriginStore::default(),
            registry: Registry::default(),
            metrics: Metrics::new(),
            leader: Leadership::new(cfg.leader_elect.then_some(tuning.lease_renew_deadline)),
            recorder,
            token: CancellationToken::new(),
            tasks: TaskTracker::new(),
            gc_now: Notify::new(),
            hints: Mutex::new(HashMap::new()),
            waits: Mutex::new(HashMap::new()),
            ready: watch::Sender::new(false),
            cfg,
            tuning,
        })
    }

    pub fn cluster_inflight(&self) -> usize {
        match self.tuning.cluster_inflight {
            // A hung worker holds at most this many reconcile workers for one request timeout.
            0 => (self.cfg.concurrency / 4).max(2),
            n => n,
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
        if !self.origins.is_synced() {
            missing.push("origin Job cache not synced");
        }
        if !self.registry.is_synced() {
            missing.push("WorkerCluster list not synced");
        }
        if !self.registry.secrets.is_synced() {
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

    /// Re-examines the origins a change of `cluster` (readiness, registration, labels, weight,
    /// paused) can affect: those placed there, those not placed yet, and those waiting for any
    /// cluster.
    pub fn on_cluster_changed(&self, cluster: &str) {
        let mut keys = self.origins.keys_where(|e| {
            let placed = e.view.labels.get(LABEL_CLUSTER);
            let live = finished(&e.view.status).is_none() || e.view.deletion_timestamp.is_some();
            live && placed.is_none_or(|p| p == cluster)
        });
        keys.extend(
            self.waits
                .lock_or_recover()
                .iter()
                .filter(|(_, w)| w.no_eligible)
                .map(|(k, _)| k.clone()),
        );
        for k in keys {
            self.queue.add(k);
        }
    }

    /// Re-examines every origin placed on `cluster`, finished ones too (a cluster being removed
    /// takes their finished mirrors along).
    pub fn requeue_placed_on(&self, cluster: &str) {
        let keys = self.origins.keys_where(|e| {
            e.view
                .labels
                .get(LABEL_CLUSTER)
                .is_some_and(|c| c == cluster)
        });
        for k in keys {
            self.queue.add(k);
        }
    }

    /// Drops what is remembered about an origin that is gone.
    pub fn forget_origin(&self, key: &ObjectKey) {
        self.hints.lock_or_recover().remove(key);
        self.waits.lock_or_recover().remove(key);
        self.queue.remove(key);
        self.recorder.log.forget(key);
    }

    /// In-memory hints for the origin with this UID (reset when the UID changes).
    pub fn hints_for(&self, key: &ObjectKey, uid: &str) -> Hints {
        let mut h = self.hints.lock_or_recover();
        match h.get(key) {
            Some((u, hints)) if u == uid => hints.clone(),
            Some(_) => {
                h.remove(key);
                Hints::default()
            }
            None => Hints::default(),
        }
    }

    /// Updates the in-memory hints of the origin with this UID (reset when the UID changes).
    pub fn update_hints(&self, key: &ObjectKey, uid: &str, f: impl FnOnce(&mut Hints)) {
        let mut h = self.hints.lock_or_recover();
        let entry = h
            .entry(key.clone())
            .or_insert_with(|| (uid.to_string(), Hints::default()));
        if entry.0 != uid {
            *entry = (uid.to_string(), Hints::default());
        }
        f(&mut entry.1);
    }

    /// Records what `cluster` answered (or did not) to a create of this origin's mirror.
    pub fn avoid(&self, key: &ObjectKey, uid: &str, cluster: &str, kind: AvoidKind, message: &str) {
        let now = jiff::Timestamp::now();
        self.update_hints(key, uid, |h| {
            h.avoid(cluster, kind, message, now, &self.dispatch);
        });
    }

    pub fn record_wait(&self, key: &ObjectKey, wait: Option<&Wait>) {
        let mut w = self.waits.lock_or_recover();
        match wait {
            None => {
                w.remove(key);
            }
            Some(wait) => {
                w.insert(
                    key.clone(),
                    WaitNote {
                        message: wait.to_string(),
                        no_eligible: matches!(wait, Wait::NoEligibleCluster { .. }),
                    },
                );
            }
        }
    }

    pub fn wait_of(&self, key: &ObjectKey) -> Option<String> {
        self.waits
            .lock_or_recover()
            .get(key)
            .map(|w| w.message.clone())
    }

    /// Refreshes the cache-derived gauges and renders every metric.
    pub fn metrics_text(&self) -> String {
        let m = &self.metrics;
        m.origins
            .set(i64::try_from(self.origins.len()).unwrap_or(i64::MAX));
        m.queue_depth
            .set(i64::try_from(self.queue.len()).unwrap_or(i64::MAX));
        m.leader.set(i64::from(self.is_leader()));
        for c in self.registry.all() {
            m.cluster_ready
                .with_label_values(&[&c.name])
                .set(i64::from(c.is_ready()));
            m.cluster_current_mirrors
                .with_label_values(&[&c.name])
                .set(i64::from(self.origins.placed_on(&c.name)));
            let mut counts: HashMap<&str, i64> = MIRROR_STATES.iter().map(|s| (*s, 0)).collect();
            let aliases = self.registry.aliases_of(&c.name);
            for (key, e) in c.mirrors.entries() {
                let origin = self.origins.get(&key);
                let state = if gc::verdict(
                    &self.cfg.origin_id,
                    &c.name,
                    &aliases,
                    &e.view,
                    origin.as_deref(),
                )
                .is_some()
                {
                    STALE
                } else {
                    JobPhase::of(PhaseFacts {
                        deleting: e.view.deleting,
                        suspend: e.view.spec.get("suspend").and_then(|s| s.as_bool()) == Some(true),
                        status: &e.view.status,
                        placed: true,
                    })
                    .label()
                };
                *counts.entry(state).or_insert(0) += 1;
            }
            for (state, n) in counts {
                m.mirrors.with_label_values(&[&c.name, state]).set(n);
            }
        }
        m.render()
    }
}

/// Reacts to leadership changes: a new leader re-examines every origin, writes every cluster's
/// status and sweeps for garbage.
async fn leadership_reactor(shared: Arc<Shared>) {
    let mut rx = shared.leader.subscribe();
    let mut was = rx.borrow_and_update().leading;
    loop {
        tokio::select! {
            _ = shared.token.cancelled() => return,
            r = rx.changed() => if r.is_err() { return },
        }
        let now = rx.borrow_and_update().leading;
        shared.metrics.leader.set(i64::from(now));
        shared.ready_changed();
        if now && !was {
            for k in shared.origins.keys() {
                shared.queue.add(k);
            }
            shared.registry.wake_all();
            shared.gc_now.notify_one();
        }
        was = now;
    }
}

/// Starts every task and runs until `shutdown` is cancelled.
pub async fn run(shared: Arc<Shared>, shutdown: CancellationToken) -> Result<(), ControllerError> {
    let listener = match shared.cfg.metrics_addr {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|source| ControllerError::Bind { addr, source })?,
        ),
        None => None,
    };
    let ui_listener = match shared.cfg.ui_addr {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|source| ControllerError::BindUi { addr, source })?,
        ),
        None => None,
    };
    info!(
        origin = %shared.cfg.origin_id,
        namespace = %shared.cfg.namespace,
        identity = %shared.identity,
        concurrency = shared.cfg.concurrency,
        leader_elect = shared.cfg.leader_elect,
        metrics = ?listener.as_ref().and_then(|l| l.local_addr().ok()),
        ui = ?ui_listener.as_ref().and_then(|l| l.local_addr().ok()),
        "courier controller starting"
    );
    let t = &shared.tasks;
    t.spawn(leadership_reactor(shared.clone()));
    if shared.cfg.leader_elect {
        t.spawn(leader::run(shared.clone()));
    } else {
        shared.leader.set(LeaderState {
            leading: true,
            healthy: true,
        });
    }
    t.spawn(registry::watch_secrets(shared.clone()));
    t.spawn(registry::watch_worker_clusters(shared.clone()));
    t.spawn(registry::namespaces::watch(shared.clone()));
    t.spawn(origin::watch_origins(shared.clone()));
    for _ in 0..shared.cfg.concurrency {
        t.spawn(origin::worker(shared.clone()));
    }
    t.spawn(origin::resync(shared.clone()));
    t.spawn(gc::run(shared.clone()));
    if let Some(l) = listener {
        t.spawn(http::serve(l, shared.clone()));
    }
    if let Some(l) = ui_listener {
        t.spawn(crate::ui::serve(l, shared.clone()));
    }
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = shared.token.cancelled() => {}
    }
    info!("courier controller stopping");
    shared.token.cancel();
    shared.tasks.close();
    if tokio::time::timeout(Duration::from_secs(10), shared.tasks.wait())
        .await
        .is_err()
    {
        warn!("some controller tasks did not stop within 10s");
    }
    Ok(())
}

/// A ticker whose first tick is one `period` from now (the loops that use it have just started
/// fresh) and which, after a slow round, waits a whole period again instead of catching up.
pub fn every(period: std::time::Duration) -> tokio::time::Interval {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}
