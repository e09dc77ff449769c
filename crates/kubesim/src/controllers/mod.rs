//! In-process controllers: what a real cluster's kube-apiserver (the apiextensions controllers) and
//! kube-controller-manager (Job, TTL-after-finished, garbage collector, namespace) do on their own.
//!
//! Every controller is one tokio task that follows the store's events (it subscribes before it lists,
//! atomically, with `Store::snapshot_and_watch`, and lists again whenever its receiver lagged or was
//! closed by `Store::drop_watches`) and writes only through [`Api`], so each of its writes is defaulted,
//! validated and recorded in managedFields exactly like a client's.
//!
//! | controller | role | what it does |
//! |---|---|---|
//! | `crd` | kube-apiserver | names accepted / Established, serving custom resources, instance cleanup on delete |
//! | `namespace` | kube-controller-manager | empties a Terminating namespace, then drops its `kubernetes` finalizer |
//! | `gc` | kube-controller-manager | drops `orphan`, and `foregroundDeletion` once dependents are gone |
//! | `job` | kube-controller-manager | runs `jobctl::JobSim` per Job and writes its `.status` |
//! | `ttl` | kube-controller-manager | deletes finished Jobs at `ttlSecondsAfterFinished` (Foreground) |
//!
//! Which ones run is chosen per [`Role`] (or field by field in [`Controllers`]):
//!
//! | role | crd | namespace | gc | ttl | job |
//! |---|---|---|---|---|---|
//! | `ApiServer` (bare kube-apiserver, as the `fixtures/apiserver` recordings) | yes | | | | |
//! | `Management` | yes | yes | yes | | |
//! | `Worker` | yes | yes | yes | yes | yes |
//!
//! Not modelled: ownerReference cascades between stored objects (kubesim's only dependents are a
//! Job's simulated pods), the namespace controller's pod grace-period estimates, and the CRD
//! finalizer controller's one-minute give-up (it keeps polling, at most once a second).

mod crd;
mod gc;
mod job;
mod namespace;
mod pods;
mod podshape;
mod slim;

pub use podshape::{COMPLETION_INDEX, NODE_NAME};
mod ttl;

#[cfg(test)]
mod follower_tests;
#[cfg(test)]
mod pod_tests;
#[cfg(test)]
mod slim_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod walk_tests;

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

use crate::api::{Api, Served, WriteOpts};
use crate::errors::ApiError;
use crate::store::{Event, Store, Stored, TableKey};

/// Field manager of the controllers that live in kube-controller-manager.
pub const CONTROLLER_MANAGER: &str = "kube-controller-manager";
/// Field manager of the apiextensions controllers (inside kube-apiserver).
pub const APISERVER: &str = "kube-apiserver";

/// What kind of cluster a kubesim instance stands in for (defined with `Sim`; the presets are
/// [`Controllers::for_role`]).
pub use crate::sim::Role;

/// Which controllers run, and how fast simulated time goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Controllers {
    /// The Job controller with simulated pods (`jobctl::JobSim`).
    pub job: bool,
    /// Whether the Job controller's simulated pods are also real `v1` Pod objects (see `pods`);
    /// off only for throughput benchmarks.
    pub pod_objects: bool,
    /// The TTL-after-finished controller.
    pub ttl: bool,
    /// The garbage collector's finalizer handling.
    pub gc: bool,
    /// The namespace controller.
    pub namespace: bool,
    /// The apiextensions controllers (CRD names, establishing, serving, cleanup).
    pub crd: bool,
    /// Simulation speed for the Job controller and TTLs (1.0 = real time; see `jobctl::SimConfig`).
    pub speed: f64,
}

impl Controllers {
    /// The preset for a role: `ApiServer` = crd (a bare kube-apiserver); `Management` = crd +
    /// namespace + gc (its Jobs are `managedBy` Courier); `Worker` = all.
    pub fn for_role(role: Role) -> Self {
        let none = Self::none();
        match role {
            Role::ApiServer => Self { crd: true, ..none },
            Role::Management => Self {
                crd: true,
                namespace: true,
                gc: true,
                ..none
            },
            Role::Worker => Self {
                job: true,
                pod_objects: true,
                ttl: true,
                gc: true,
                namespace: true,
                crd: true,
                ..none
            },
        }
    }

    /// No controller at all (speed 1).
    pub fn none() -> Self {
        Self {
            job: false,
            pod_objects: false,
            ttl: false,
            gc: false,
            namespace: false,
            crd: false,
            speed: 1.0,
        }
    }

    /// The same set at another speed.
    pub fn with_speed(self, speed: f64) -> Self {
        Self { speed, ..self }
    }

    fn sim_config(&self) -> crate::jobctl::SimConfig {
        crate::jobctl::SimConfig::with_speed(self.speed)
    }
}

/// Starts the selected controllers on the current tokio runtime. They stop when `shutdown` is
/// cancelled (await the handles to know they have).
pub fn spawn(
    api: Arc<Api>,
    c: Controllers,
    shutdown: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut handles = Vec::new();
    // The Job controller tells the garbage collector when a deleted Job's simulated pods are gone.
    let (gc_tx, gc_rx) = if c.job && c.gc {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    if c.crd {
        handles.push(tokio::spawn(crd::run(api.clone(), shutdown.clone())));
    }
    if c.namespace {
        handles.push(tokio::spawn(namespace::run(
            api.clone(),
            c.speed,
            shutdown.clone(),
        )));
    }
    if c.gc {
        handles.push(tokio::spawn(gc::run(
            api.clone(),
            c.job,
            gc_rx,
            shutdown.clone(),
        )));
    }
    if c.job {
        handles.push(tokio::spawn(job::run(
            api.clone(),
            c.sim_config(),
            gc_tx,
            c.pod_objects,
            shutdown.clone(),
        )));
    }
    if c.ttl {
        handles.push(tokio::spawn(ttl::run(api, c.sim_config(), shutdown)));
    }
    handles
}

// ------------------------------------------------------------------------------------------------
// Shared plumbing.

/// What a controller learns from its table.
pub(crate) enum Change {
    /// Every object of the table right now (first call, or after a lag / a closed stream).
    Resync(Vec<Arc<Stored>>),
    Event(Arc<Event>),
}

/// Follows one table: a snapshot plus the events after it, again after any gap.
pub(crate) struct Follower {
    store: Arc<Store>,
    table: TableKey,
    rx: Option<broadcast::Receiver<Arc<Event>>>,
    /// Retained events to hand out before `rx`'s (after falling behind the broadcast buffer).
    backlog: std::collections::VecDeque<Arc<Event>>,
    /// The version the changes handed out are complete up to.
    seen: u64,
    what: &'static str,
}

impl Follower {
    pub(crate) fn new(store: Arc<Store>, table: TableKey, what: &'static str) -> Self {
        Self {
            store,
            table,
            rx: None,
            backlog: Default::default(),
            seen: 0,
            what,
        }
    }

    /// The next change. Cancel-safe (usable in `select!`): the only await is `recv`.
    pub(crate) async fn next(&mut self) -> Change {
        loop {
            if let Some(ev) = self.backlog.pop_front() {
                self.seen = self.seen.max(ev.rv);
                return Change::Event(ev);
            }
            let Some(rx) = &mut self.rx else { break };
            match rx.recv().await {
                Ok(ev) => {
                    self.seen = self.seen.max(ev.rv);
                    return Change::Event(ev);
                }
                Err(RecvError::Lagged(n)) => {
                    // Behind the broadcast buffer: carry on from the retained events if they reach
                    // back far enough, else list again.
                    if let Ok(w) = self.store.watch(&self.table, Some(self.seen)) {
                        self.backlog = w.backlog.into();
                        self.rx = Some(w.rx);
                        continue;
                    }
                    tracing::warn!(
                        controller = self.what,
                        table = %format!("{}/{}", self.table.group, self.table.plural),
                        missed = n,
                        "event stream lagged; listing again"
                    );
                    break;
                }
                Err(RecvError::Closed) => {
                    tracing::debug!(
                        controller = self.what,
                        table = %format!("{}/{}", self.table.group, self.table.plural),
                        "event stream closed; listing again"
                    );
                    break;
                }
            }
        }
        let (snap, rx) = self.store.snapshot_and_watch(&self.table, None);
        self.rx = Some(rx);
        self.backlog.clear();
        self.seen = snap.rv;
        Change::Resync(snap.items)
    }
}

/// `namespace/name` (or `name`), for logs.
pub(crate) fn obj_key(ns: &str, name: &str) -> String {
    if ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}/{name}")
    }
}

/// Options of an in-process component's writes: its field manager, and the user it authenticates
/// as on a real cluster.
pub(crate) fn write_opts(manager: &str) -> WriteOpts {
    let user = match manager {
        CONTROLLER_MANAGER => "system:kube-controller-manager",
        APISERVER => "system:apiserver",
        pods::KUBELET => "system:node:kubesim-node",
        other => other,
    };
    WriteOpts {
        manager: manager.to_string(),
        user: Some(user.to_string()),
        ..WriteOpts::default()
    }
}

/// A controller-built object as a client's body would be after decoding (pruning, defaults,
/// normalisation), ready for `Api::update`.
pub(crate) fn decoded(s: &Served, obj: Value) -> Result<Value, ApiError> {
    let mut warnings = Vec::new();
    s.decode_object(obj, &mut warnings).map(|(v, _)| v)
}

/// A `.status` for [`with_status`], decoded alone: pruning, the codec, defaults and normalisation
/// work field by field and none of the kinds' reads `.status` to decode the rest, so this is the
/// status [`decoded`] makes of a whole object carrying it (`None`: the decoder drops it).
pub(crate) fn decoded_status(s: &Served, status: Value) -> Result<Option<Value>, ApiError> {
    let mut only = serde_json::Map::new();
    only.insert("status".into(), status);
    Ok(match decoded(s, Value::Object(only))? {
        Value::Object(mut m) => m.remove("status"),
        _ => None,
    })
}

/// A `.status` the simulated controllers (the Job controller, the kubelet) built is already what
/// [`decoded_status`] makes of it (schema fields only, in their canonical form), so they write it
/// undecoded; debug builds (every test) decode it anyway and check that it comes back unchanged.
pub(crate) fn debug_assert_decodes_to_itself(s: &Served, status: &Value) {
    debug_assert_eq!(
        decoded_status(s, status.clone()).ok().flatten().as_ref(),
        Some(status),
        "a simulated status that decoding changes"
    );
}

/// `current`, the served form of a stored object, with the status [`decoded_status`] made: what
/// [`decoded`] makes of `current` with that status set, since the rest of a stored object decodes to
/// itself (`walk_tests` proves both on every status write of a worker), without decoding the rest.
pub(crate) fn with_status(mut current: Value, status: Option<&Value>) -> Value {
    if let Value::Object(m) = &mut current {
        match status {
            Some(st) => m.insert("status".into(), st.clone()),
            None => m.remove("status"),
        };
    }
    current
}

/// [`with_status`] of a copy of `current`, made without copying `current`'s own status (the larger
/// part of a pod's object, replaced anyway): what a status writer sends over the object it read.
pub(crate) fn status_over(current: &Value, status: Option<&Value>) -> Value {
    let Value::Object(m) = current else {
        return with_status(current.clone(), status);
    };
    let mut out: serde_json::Map<String, Value> = m
        .iter()
        .filter(|(k, _)| k.as_str() != "status")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(st) = status {
        out.insert("status".into(), st.clone());
    }
    Value::Object(out)
}

/// The served resource to read and write a table's objects through: one that does not convert
/// (the storage version) when there is one.
pub(crate) fn served_for_table(api: &Api, table: &TableKey) -> Option<Arc<Served>> {
    let all = api.registry.all();
    let mut found: Option<Arc<Served>> = None;
    for s in all
        .into_iter()
        .filter(|s| &s.table == table && s.schema.is_some())
    {
        if !s.strategy.converts() {
            return Some(s);
        }
        found.get_or_insert(s);
    }
    found
}

/// The tokio instant of a wall-clock timestamp (now if it is in the past).
pub(crate) fn instant_at(t: Timestamp) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    let ns = t.as_nanosecond() - Timestamp::now().as_nanosecond();
    if ns <= 0 {
        now
    } else {
        now + std::time::Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

/// Retry delays of the workqueue rate limiters (5 ms doubling), capped at `cap`.
pub(crate) fn next_backoff(
    prev: Option<std::time::Duration>,
    cap: std::time::Duration,
) -> std::time::Duration {
    match prev {
        None => std::time::Duration::from_millis(5),
        Some(d) => (d * 2).min(cap),
    }
}

/// The cap of retry delays at `speed`: 1 s of model time (so a 20x run retries within 50 ms).
pub(crate) fn backoff_cap(speed: f64) -> std::time::Duration {
    let speed = if speed.is_finite() && speed > 0.0 {
        speed
    } else {
        1.0
    };
    std::time::Duration::from_secs_f64((1.0 / speed).max(0.005))
}
