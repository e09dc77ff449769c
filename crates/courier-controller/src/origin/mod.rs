//! The origin Job controller: a watch of every Job on the management cluster (kept only when
//! `spec.managedBy` is Courier's, trimmed: see [`store`]), the work queue's workers, and reconcile
//! ([`reconcile`]).
//!
//! Keys come from origin events (only when the resourceVersion changed; during a write of the key,
//! only if not just its own answer: [`echo`]), mirror events on any worker that may change a
//! decision (a mirror and its origin share `namespace/name`), cluster changes (readiness, add/remove,
//! labels/weight/paused: see `Ctx::on_cluster_changed`), decisions' own requeues, retries with
//! backoff, and a periodic resync.

mod answer;
mod context;
mod echo;
mod execute;
mod placing;
pub mod reconcile;
mod request;
pub mod store;
#[cfg(test)]
mod trim_equivalence;

use std::sync::Arc;

use kube::Api;
use kube::api::DynamicObject;
use kube::runtime::watcher;
use serde_json::Value;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::backoff::Backoff;
use crate::errors::{CallError, with_timeout};
use crate::queue::ObjectKey;
use crate::watch::{self, Change, SlimJob};
pub use context::{Ctx, Memory};

/// Watches Jobs in every namespace of the management cluster.
pub async fn watch_origins(shared: Arc<Ctx>) {
    let api: Api<SlimJob> = Api::all(shared.mgmt.clone());
    let backoff = Backoff::new(shared.tuning.backoff_min, shared.tuning.backoff_max);
    let config = watcher::Config::default();
    let origins = &*shared.origins;
    watch::run(
        api,
        config,
        backoff,
        &shared.token,
        origins,
        |change| match change {
            // A change while our write of the key is in flight waits for its end (`echo`).
            Change::Stored(key) => {
                if !shared.writes.hold(&key) {
                    shared.queue.add(key);
                }
            }
            Change::Deleted(key) => {
                debug!(origin = %key, "origin gone");
                shared.forget_origin(&key);
            }
            Change::Synced { gone, .. } => {
                for key in gone {
                    debug!(origin = %key, "origin gone");
                    shared.forget_origin(&key);
                }
                info!(origins = origins.len(), "origin Job cache synced");
                shared.ready_changed();
            }
            Change::Failed(e) => warn!(error = %e, "origin Job watch failed; retrying"),
        },
    )
    .await;
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
        let handed = tokio::select! {
            _ = shared.token.cancelled() => return,
            h = shared.queue.next_handed() => h,
        };
        let lane = if handed.urgent { "urgent" } else { "normal" };
        shared
            .metrics
            .queue_wait_seconds
            .with_label_values(&[lane])
            .observe(handed.waited.as_secs_f64());
        let key = handed.key;
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
