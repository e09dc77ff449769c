//! Garbage collection of mirrors: a periodic sweep (`gc_interval`) of every Ready worker, a sweep of
//! a worker each time it (re)connects (before it turns Ready, see `registry::cluster`), and a full
//! sweep when this replica becomes the leader.
//!
//! A sweep looks only at the worker's mirror cache, which holds only Jobs labelled
//! `courier.dev/origin=<this origin id>`; other origin ids and unlabelled Jobs are never seen, let
//! alone touched (and the label is checked again). A mirror is deleted when
//! - its origin is gone (`origin_gone`),
//! - the Job with the origin's name has another UID (`origin_uid_differs`: deleted and re-created),
//! - or its (cluster, epoch) is not the origin's current placement (`stale_epoch`).
//!
//! Every candidate is confirmed against a fresh GET of the origin before the delete (the cache may
//! lag a placement this controller just wrote), and deleted with a UID precondition and Background
//! propagation. Origins being deleted are left to their own reconcile (finalizer path).

use std::sync::Arc;

use courier_api::{LABEL_ORIGIN, LABEL_ORIGIN_UID};
use courier_core::batch_job::BatchJob;
use courier_core::ownership::{Intent, epoch_label};
use courier_core::reconcile::MirrorView;
use courier_core::workload::Workload;
use futures::future::join_all;
use tracing::{debug, info, warn};

use crate::origin::store::{OriginEntry, trim};
use crate::origin::{Ctx, get_origin_json};
use crate::registry::Cluster;

/// Why a mirror is garbage, or `None` if it must stay. `cluster` is the worker the mirror was seen
/// on; `aliases` are later registrations of the same API server (DuplicateCluster): a mirror placed
/// through one of them is the same Job, not a stale one.
pub fn verdict(
    origin_id: &str,
    cluster: &str,
    aliases: &[String],
    mirror: &MirrorView,
    origin: Option<&OriginEntry>,
) -> Option<&'static str> {
    if mirror.labels.get(LABEL_ORIGIN).map(String::as_str) != Some(origin_id) {
        return None;
    }
    if mirror.deleting {
        return None;
    }
    let Some(origin) = origin else {
        return Some("origin_gone");
    };
    let o = &origin.view;
    if mirror.labels.get(LABEL_ORIGIN_UID) != Some(&o.uid) {
        return Some("origin_uid_differs");
    }
    if o.deletion_timestamp.is_some() {
        return None;
    }
    let intent = o.intent().or_else(|| BatchJob::reported(&o.status));
    let epoch = epoch_label(&mirror.labels);
    let current = intent.is_some_and(|i: Intent| {
        Some(i.epoch) == epoch && (i.cluster == cluster || aliases.contains(&i.cluster))
    });
    if current { None } else { Some("stale_epoch") }
}

/// Sweeps one worker; returns how many mirrors were deleted. Leader only.
pub async fn sweep_cluster(shared: &Ctx, cluster: &Cluster) -> usize {
    if !shared.is_leader() || !shared.origins.is_synced() || !cluster.mirrors.is_synced() {
        return 0;
    }
    let origin_id = &shared.cfg.origin_id;
    let aliases = shared.registry.aliases_of(&cluster.name);
    let candidates: Vec<_> = cluster
        .mirrors
        .entries()
        .into_iter()
        .filter(|(key, m)| {
            verdict(
                origin_id,
                &cluster.name,
                &aliases,
                &m.view,
                shared.origins.get(key).as_deref(),
            )
            .is_some()
        })
        .collect();
    let mut deleted = 0;
    for (key, m) in candidates {
        if !shared.is_leader() {
            break;
        }
        let fresh = match get_origin_json(shared, &key).await {
            Ok(j) => j,
            Err(e) => {
                warn!(origin = %key, error = %e, "GC cannot read the origin; skipped this round");
                continue;
            }
        };
        let entry = fresh.as_ref().and_then(|j| trim(j).ok().flatten());
        let Some(reason) = verdict(origin_id, &cluster.name, &aliases, &m.view, entry.as_ref())
        else {
            continue;
        };
        // The fresh read took a while: still leading (and renewed) right before the delete?
        if !shared.is_leader() {
            break;
        }
        match cluster
            .delete_job(&key.namespace, &key.name, &m.view.uid)
            .await
        {
            Ok(()) => {
                deleted += 1;
                shared
                    .metrics
                    .gc_deleted
                    .with_label_values(&[&cluster.name, reason])
                    .inc();
                info!(cluster = %cluster.name, mirror = %key, uid = %m.view.uid, reason, "garbage-collected mirror");
            }
            Err(e) => {
                warn!(cluster = %cluster.name, mirror = %key, error = %e, "GC cannot delete mirror");
            }
        }
    }
    deleted
}

/// Sweeps every Ready worker at once (one slow worker does not hold up the others).
pub async fn sweep_all(shared: &Ctx) {
    let clusters: Vec<Arc<Cluster>> = shared
        .registry
        .all()
        .into_iter()
        .filter(|c| c.is_ready())
        .collect();
    let results = join_all(clusters.iter().map(|c| sweep_cluster(shared, c))).await;
    let total: usize = results.iter().sum();
    debug!(clusters = clusters.len(), deleted = total, "GC sweep done");
}

/// The periodic sweep, plus one whenever `now` is notified (leadership gained).
pub async fn run(shared: Arc<Ctx>, now: Arc<tokio::sync::Notify>) {
    let mut tick = crate::config::every(
        shared
            .cfg
            .gc_interval
            .max(std::time::Duration::from_secs(1)),
    );
    loop {
        tokio::select! {
            _ = shared.token.cancelled() => return,
            _ = tick.tick() => {}
            _ = now.notified() => {}
        }
        if shared.is_leader() && shared.origins.is_synced() {
            sweep_all(&shared).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mirror(origin: &str, uid: &str, epoch: &str) -> MirrorView {
        MirrorView {
            namespace: "ns".into(),
            name: "j".into(),
            uid: "m1".into(),
            labels: [
                ("courier.dev/origin", origin),
                ("courier.dev/origin-uid", uid),
                ("courier.dev/epoch", epoch),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            ..Default::default()
        }
    }

    fn origin(uid: &str, cluster: &str, epoch: &str) -> OriginEntry {
        let j = json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": uid, "resourceVersion": "1",
                "labels": {"courier.dev/cluster": cluster}, "annotations": {"courier.dev/epoch": epoch}},
            "spec": {"managedBy": "courier.dev/dispatcher"}
        });
        match trim(&j) {
            Ok(Some(e)) => e,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn verdicts() {
        let o = origin("u1", "w1", "2");
        let none: &[String] = &[];
        assert_eq!(
            verdict("c", "w1", none, &mirror("c", "u1", "2"), Some(&o)),
            None
        );
        // Seen through the older registration of the same server: the same Job, not stale.
        let alias = ["w1".to_string()];
        assert_eq!(
            verdict("c", "w0", &alias, &mirror("c", "u1", "2"), Some(&o)),
            None
        );
        assert_eq!(
            verdict("c", "w0", none, &mirror("c", "u1", "2"), Some(&o)),
            Some("stale_epoch")
        );
        assert_eq!(
            verdict("c", "w1", none, &mirror("c", "u1", "1"), Some(&o)),
            Some("stale_epoch")
        );
        assert_eq!(
            verdict("c", "w2", none, &mirror("c", "u1", "2"), Some(&o)),
            Some("stale_epoch")
        );
        assert_eq!(
            verdict("c", "w1", none, &mirror("c", "u0", "2"), Some(&o)),
            Some("origin_uid_differs")
        );
        assert_eq!(
            verdict("c", "w1", none, &mirror("c", "u1", "2"), None),
            Some("origin_gone")
        );
        assert_eq!(
            verdict("c", "w1", none, &mirror("other", "u1", "2"), None),
            None,
            "never another origin id's"
        );
    }
}
