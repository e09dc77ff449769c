//! What the origin controller's tasks (watch, queue workers, resync) share: the caches they read,
//! the queue, the clients, and what reconciles remember between decisions (hints and waits). Built
//! in `shared`; the garbage collector, the snapshots and the web view read it too.

use std::sync::{Arc, Mutex};

use courier_api::LABEL_CLUSTER;
use courier_core::job::finished;
use courier_core::reconcile::{AvoidKind, DispatchConfig, Hints, Wait};
use kube::Client;
use kube::api::ApiResource;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::store::OriginStore;
use crate::config::{ControllerConfig, Tuning};
use crate::events::EventRecorder;
use crate::leader::Leadership;
use crate::locks::MutexExt as _;
use crate::metrics::Metrics;
use crate::queue::{KeyMap, ObjectKey, WorkQueue};
use crate::registry::Registry;

/// What the last decision for an origin waits for.
struct WaitNote {
    message: String,
    /// No cluster could take it: cluster changes re-examine it.
    no_eligible: bool,
}

/// The origin controller's state and its views of the rest.
pub struct Ctx {
    pub cfg: ControllerConfig,
    pub tuning: Tuning,
    pub dispatch: DispatchConfig,
    pub mgmt: Client,
    pub jobs_ar: ApiResource,
    pub queue: Arc<WorkQueue>,
    pub origins: Arc<OriginStore>,
    pub registry: Arc<Registry>,
    pub metrics: Arc<Metrics>,
    pub leader: Arc<Leadership>,
    pub recorder: EventRecorder,
    /// Cancelled when the controller stops.
    pub token: CancellationToken,
    /// Notified when a cache this controller keeps has synced (readiness may have changed).
    pub synced: Arc<Notify>,
    /// What reconciles remember between decisions (starts empty).
    pub memory: Memory,
    /// The origin writes in flight (their echo on the watch is not queued: [`super::echo`]).
    pub writes: super::echo::Writes,
    /// Placement intents being written, by cluster (placement counts them: [`super::placing`]).
    pub placing: super::placing::Placing,
}

/// Hints and waits per origin, in memory only.
#[derive(Default)]
pub struct Memory {
    hints: Mutex<KeyMap<(String, Hints)>>,
    waits: Mutex<KeyMap<WaitNote>>,
}

impl Ctx {
    /// Whether this replica may write now: see `Leadership::is_leading` (checked immediately
    /// before every write).
    pub fn is_leader(&self) -> bool {
        self.leader.is_leading()
    }

    /// The origin cache synced: readiness may have changed.
    pub fn ready_changed(&self) {
        self.synced.notify_one();
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
            self.memory
                .waits
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

    /// The namespaces of the unfinished origins placed on `cluster`.
    pub fn namespaces_placed_on(&self, cluster: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .origins
            .keys_where(|e| {
                courier_core::job::finished(&e.view.status).is_none()
                    && e.view
                        .labels
                        .get(LABEL_CLUSTER)
                        .is_some_and(|c| c == cluster)
            })
            .into_iter()
            .map(|k| k.namespace)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Re-examines every origin in management namespace `namespace`.
    pub fn requeue_namespace(&self, namespace: &str) {
        for key in self.origins.keys() {
            if key.namespace == namespace {
                self.queue.add(key);
            }
        }
    }

    /// Drops what is remembered about an origin that is gone.
    pub fn forget_origin(&self, key: &ObjectKey) {
        self.memory.hints.lock_or_recover().remove(key);
        self.memory.waits.lock_or_recover().remove(key);
        self.queue.remove(key);
        self.recorder.log.forget(key);
    }

    /// In-memory hints for the origin with this UID (reset when the UID changes).
    pub fn hints_for(&self, key: &ObjectKey, uid: &str) -> Hints {
        let mut h = self.memory.hints.lock_or_recover();
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
        let mut h = self.memory.hints.lock_or_recover();
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
        let mut w = self.memory.waits.lock_or_recover();
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
        self.memory
            .waits
            .lock_or_recover()
            .get(key)
            .map(|w| w.message.clone())
    }
}
