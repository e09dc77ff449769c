//! The origin Job controller: a watch of every Job on the management cluster (kept only when
//! `spec.managedBy` is Courier's, trimmed: see [`store`]), the work queue's workers, and reconcile
//! ([`reconcile`]).
//!
//! Keys come from origin events (only when the resourceVersion changed), mirror events on any
//! worker (a mirror and its origin share `namespace/name`), cluster changes (readiness, add/remove,
//! labels/weight/paused: see `Ctx::on_cluster_changed`), decisions' own requeues, retries with
//! backoff, and a periodic resync.

mod context;
mod execute;
pub mod reconcile;
pub mod store;

use std::sync::Arc;

use futures::StreamExt;
use kube::Api;
use kube::api::DynamicObject;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::backoff::Backoff;
use crate::errors::{CallError, chain, with_timeout};
use crate::queue::ObjectKey;
pub use context::{Ctx, Memory};
use store::Upsert;

fn key_of(obj: &DynamicObject) -> Option<ObjectKey> {
    Some(ObjectKey::new(
        obj.metadata.namespace.clone()?,
        obj.metadata.name.clone()?,
    ))
}

fn apply(shared: &Ctx, obj: &DynamicObject) {
    let Some(key) = key_of(obj) else { return };
    let json = match serde_json::to_value(obj) {
        Ok(v) => v,
        Err(e) => {
            warn!(origin = %key, error = %e, "cannot read Job; ignored");
            return;
        }
    };
    match store::trim(&json) {
        Ok(Some(entry)) => {
            if shared.origins.upsert(key.clone(), entry) == Upsert::Changed {
                shared.queue.add(key);
            }
        }
        // Not Courier's (managedBy is immutable, so it never was).
        Ok(None) => {}
        Err(e) => warn!(origin = %key, error = %e, "managed Job is malformed; ignored"),
    }
}

fn forget(shared: &Ctx, key: &ObjectKey) {
    if shared.origins.remove(key).is_some() {
        debug!(origin = %key, "origin gone");
    }
    shared.forget_origin(key);
}

/// Watches Jobs in every namespace of the management cluster.
pub async fn watch_origins(shared: Arc<Ctx>) {
    let api: Api<DynamicObject> = Api::all_with(shared.mgmt.clone(), &shared.jobs_ar);
    let stream = watcher::watcher(api, watcher::Config::default()).backoff(Backoff::new(
        shared.tuning.backoff_min,
        shared.tuning.backoff_max,
    ));
    let mut stream = std::pin::pin!(stream);
    loop {
        let event = tokio::select! {
            _ = shared.token.cancelled() => return,
            e = stream.next() => e,
        };
        match event {
            None => return,
            Some(Ok(Event::Init)) => shared.origins.relist_started(),
            Some(Ok(Event::InitApply(obj) | Event::Apply(obj))) => apply(&shared, &obj),
            Some(Ok(Event::Delete(obj))) => {
                if let Some(key) = key_of(&obj) {
                    forget(&shared, &key);
                }
            }
            Some(Ok(Event::InitDone)) => {
                for key in shared.origins.relist_done() {
                    forget(&shared, &key);
                }
                info!(origins = shared.origins.len(), "origin Job cache synced");
                shared.ready_changed();
            }
            Some(Err(e)) => warn!(error = %chain(&e), "origin Job watch failed; retrying"),
        }
    }
}

/// The full origin Job as JSON (what a mirror is built from), `None` if it is gone.
pub async fn get_origin_json(shared: &Ctx, key: &ObjectKey) -> Result<Option<Value>, CallError> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(shared.mgmt.clone(), &key.namespace, &shared.jobs_ar);
    let obj = with_timeout(shared.tuning.request_timeout, api.get_opt(&key.name)).await?;
    obj.map(|o| serde_json::to_value(o).map_err(|e| CallError::Other(e.to_string())))
        .transpose()
}

/// One queue worker: reconciles keys while this replica leads.
pub async fn worker(shared: Arc<Ctx>) {
    let mut leader = shared.leader.subscribe();
    loop {
        // Standbys keep caches warm but never reconcile.
        let leading = tokio::select! {
            _ = shared.token.cancelled() => return,
            r = leader.wait_for(|s| s.leading) => r.is_ok(),
        };
        if !leading {
            return;
        }
        let key = tokio::select! {
            _ = shared.token.cancelled() => return,
            k = shared.queue.next() => k,
        };
        if !shared.is_leader() {
            // Leading on paper, but the lease is not renewed in time: write nothing meanwhile.
            shared.queue.done(&key);
            shared.queue.add(key);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        }
        let span = info_span!("reconcile", origin = %key);
        reconcile::run(&shared, &key).instrument(span).await;
        shared.queue.done(&key);
    }
}

/// Re-queues every origin that still needs attention every `resync_interval`.
pub async fn resync(shared: Arc<Ctx>) {
    let mut tick = crate::config::every(shared.tuning.resync_interval);
    loop {
        tokio::select! {
            _ = shared.token.cancelled() => return,
            _ = tick.tick() => {}
        }
        if shared.is_leader() {
            let keys = shared.origins.keys_where(|e| {
                courier_core::job::finished(&e.view.status).is_none()
                    || e.view.deletion_timestamp.is_some()
            });
            debug!(origins = keys.len(), "periodic resync");
            for k in keys {
                shared.queue.add(k);
            }
        }
    }
}
