//! A worker's mirror watches and their trimmed cache.
//!
//! One cluster-wide watch, or, when the WorkerCluster lists its namespaces (`spec.namespaces`), one
//! watch per namespace ([`courier_core::namespaces::watch_scopes`]) feeding the same cache: then
//! nothing is listed or watched cluster-wide there, and the rights can be granted per namespace.
//! Each watch's re-list drops only the keys of its own namespace, and the cache is synced once
//! every running watch has listed.
//!
//! A watch selects `courier.dev/origin=<origin id>` (other management clusters' mirrors and
//! foreign Jobs are never seen), resumes from its last resourceVersion after a dropped connection,
//! re-lists after `410 Gone`, backs off with jitter on errors, and has a client-side idle timeout
//! (kube's watcher) plus a read timeout (the watch client's) so a silent dead connection is noticed.
//!
//! # Memory
//! An entry keeps what `decide` and status translation read: name, namespace, uid, the three
//! `courier.dev/*` ownership labels and Courier's `courier.dev/*` annotations (hashes of what was
//! sent) as short sorted lists (`courier_core::compact::SmallMap`, known keys not copied), the
//! spec fields that flow down (`SpecFields`, decoded alone: the pod template is skipped unread,
//! [`SlimJob::spec_fields`]), the status decoded straight from the event's
//! text into a `CachedStatus` (without `uncountedTerminatedPods`: worker pod UIDs mean nothing to
//! the origin; only whether it lists any, `MirrorView::counting`) and the deletion mark. No pod template, no managedFields, no other labels: about 1.5 KB of heap for a
//! finished mirror (`entry_memory.rs` bounds it).

use crate::locks::{MutexExt as _, RwLockExt as _};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use courier_api::{LABEL_EPOCH, LABEL_ORIGIN, LABEL_ORIGIN_UID};
use courier_core::batch_job::BatchJob;
use courier_core::compact::{SmallMap, SpecFields};
use courier_core::job_status::uncounted_pods;
use courier_core::namespaces::WatchScope;
use courier_core::reconcile::MirrorView;
use courier_core::workload::Workload;
use k8s_openapi::api::batch::v1::JobStatus;
use kube::Api;
use kube::runtime::watcher;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::Cluster;
use super::Ctx;
use crate::backoff::Backoff;
use crate::queue::{KeyMap, ObjectKey};
use crate::watch::{self, Cache, Change, SlimJob};

/// One cached mirror.
#[derive(Debug, Clone)]
pub struct MirrorEntry {
    pub view: Arc<MirrorView>,
    pub resource_version: String,
    /// When this version reached the cache (status-sync latency starts here).
    pub observed_at: Instant,
}

#[derive(Default)]
struct Inner {
    map: KeyMap<MirrorEntry>,
}

/// The mirrors of this origin id on one worker, by `namespace/name` (the origin's key).
#[derive(Default)]
pub struct MirrorCache {
    inner: RwLock<Inner>,
    /// The running watches (by scope) and whether each has completed a list.
    scopes: Mutex<BTreeMap<WatchScope, bool>>,
}

impl MirrorCache {
    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read_or_recover()
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write_or_recover()
    }

    fn scopes(&self) -> std::sync::MutexGuard<'_, BTreeMap<WatchScope, bool>> {
        self.scopes.lock_or_recover()
    }

    /// The cache reflects a complete list of the worker's mirrors: a watch runs, and every running
    /// watch has listed its scope (since it began).
    pub fn is_synced(&self) -> bool {
        let scopes = self.scopes();
        !scopes.is_empty() && scopes.values().all(|listed| *listed)
    }

    /// Whether the cache is synced and one of its watches covers `namespace` (cluster-wide, or that
    /// namespace): only then does a missing entry mean the worker has no such mirror. (A namespace
    /// not watched, e.g. a Job's that left `spec.namespaces` before its watch was started again after
    /// a restart, says nothing.)
    pub fn is_synced_for(&self, namespace: &str) -> bool {
        self.is_synced()
            && self
                .scopes()
                .keys()
                .any(|s| s.as_deref().is_none_or(|ns| ns == namespace))
    }

    /// No watch runs any more (all were stopped).
    pub fn set_unsynced(&self) {
        self.scopes().clear();
    }

    /// A watch of `scope` starts: the cache is not synced until it has listed.
    pub fn watching(&self, scope: WatchScope) {
        self.scopes().insert(scope, false);
    }

    /// The watch of `scope` stopped.
    pub fn unwatched(&self, scope: &WatchScope) {
        self.scopes().remove(scope);
    }

    /// The namespaces the cache holds mirrors in.
    pub fn namespaces(&self) -> BTreeSet<String> {
        self.read()
            .map
            .keys()
            .map(|k| k.namespace.clone())
            .collect()
    }

    /// The cached view of `key` and when it reached the cache (what a reconcile reads: no copy).
    pub fn view(&self, key: &ObjectKey) -> Option<(Arc<MirrorView>, Instant)> {
        let inner = self.read();
        let entry = inner.map.get(key)?;
        Some((entry.view.clone(), entry.observed_at))
    }

    pub fn len(&self) -> usize {
        self.read().map.len()
    }

    pub fn entries(&self) -> Vec<(ObjectKey, MirrorEntry)> {
        self.read()
            .map
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

impl MirrorCache {
    /// Puts the answer to our own create into the cache, unless the watch has shown a Job under
    /// that name already (the watch's version is then as new or newer). Without it, a reconcile
    /// before the watch delivers the mirror sees none and creates it again (AlreadyExists, a read
    /// and an adoption: three requests for nothing).
    pub fn created(&self, obj: &SlimJob) {
        let Some((key, entry)) = trim(obj) else {
            return;
        };
        self.write().map.entry(key).or_insert(entry);
    }
}

/// The part of a [`MirrorCache`] one watch fills: everything (`None`) or one namespace.
struct Scoped<'a, M> {
    cache: &'a MirrorCache,
    scope: WatchScope,
    /// Whether a new version may change its origin's decision (old, new).
    matters: M,
}

impl<M> Cache<SlimJob> for Scoped<'_, M>
where
    M: Fn(&ObjectKey, &MirrorView, &MirrorView) -> bool + Send + Sync,
{
    type Key = ObjectKey;

    fn key_of(&self, obj: &SlimJob) -> Option<ObjectKey> {
        self.cache.key_of(obj)
    }

    fn store(&self, key: &ObjectKey, obj: SlimJob) -> bool {
        self.cache
            .store(key, obj, |old, new| (self.matters)(key, old, new))
    }

    fn drop_key(&self, key: &ObjectKey) -> bool {
        self.cache.drop_key(key)
    }

    /// Only the keys of this watch's namespace: its re-list must not drop another watch's.
    fn cached_keys(&self) -> Vec<ObjectKey> {
        let mut keys = self.cache.cached_keys();
        if let Some(ns) = &self.scope {
            keys.retain(|k| &k.namespace == ns);
        }
        keys
    }

    fn mark_synced(&self) {
        // A watch stopped meanwhile does not come back as synced.
        if let Some(listed) = self.cache.scopes().get_mut(&self.scope) {
            *listed = true;
        }
    }
}

/// What the watches do to the cache, each through its [`Scoped`] part.
impl MirrorCache {
    fn key_of(&self, obj: &SlimJob) -> Option<ObjectKey> {
        Some(ObjectKey::new(
            obj.metadata.namespace.clone().unwrap_or_default(),
            obj.metadata.name.clone()?,
        ))
    }

    /// True if the entry is new, or changed in a way that may change its origin's decision
    /// (`matters(old, new)`, [`super::Hooks::mirror_change_matters`]). A change that does not is
    /// cached all the same (the next reconcile reads it), keeping the time the version it
    /// replaces arrived: that version's copy to the origin is what is still pending, if anything.
    fn store(
        &self,
        key: &ObjectKey,
        obj: SlimJob,
        matters: impl FnOnce(&MirrorView, &MirrorView) -> bool,
    ) -> bool {
        // A version cached already (the mirror we created, see `created`) is not trimmed again.
        let old = {
            let inner = self.read();
            let old = inner.map.get(key);
            if let Some(rv) = obj.metadata.resource_version.as_deref()
                && old.is_some_and(|old| old.resource_version == rv)
            {
                return false;
            }
            // The view (to judge against, shared) and its arrival time: no copy of the entry.
            old.map(|old| (old.view.clone(), old.observed_at))
        };
        let Some((_, mut entry)) = trim(&obj) else {
            // Unreadable now: what was cached under its name is no longer what is there.
            return self.write().map.remove(key).is_some();
        };
        // Judged outside the lock (it reads the origin cache).
        let quiet = old
            .as_ref()
            .is_some_and(|(view, _)| !matters(view, &entry.view));
        let mut inner = self.write();
        let cached = inner.map.get(key);
        if cached.is_some_and(|c| c.resource_version == entry.resource_version) {
            return false;
        }
        // Quiet only against the version it was judged against (`created` may have come between).
        let quiet = quiet
            && cached
                .zip(old.as_ref())
                .is_some_and(|(c, (view, _))| Arc::ptr_eq(&c.view, view));
        if quiet && let Some((_, observed_at)) = old {
            entry.observed_at = observed_at;
        }
        inner.map.insert(key.clone(), entry);
        !quiet
    }

    fn drop_key(&self, key: &ObjectKey) -> bool {
        self.write().map.remove(key).is_some()
    }

    fn cached_keys(&self) -> Vec<ObjectKey> {
        self.read().map.keys().cloned().collect()
    }
}

/// Trims a worker Job into a cache entry (None if it has no name/uid or is unreadable).
pub fn trim(obj: &SlimJob) -> Option<(ObjectKey, MirrorEntry)> {
    const KEPT: &[&str] = BatchJob::SPEC_FIELDS;
    let meta = &obj.metadata;
    let name = meta.name.clone()?;
    let namespace = meta.namespace.clone().unwrap_or_default();
    let unreadable = |e: &dyn std::fmt::Display| {
        debug!(job = %format!("{namespace}/{name}"), error = %e, "unreadable mirror ignored");
    };
    let uid = meta.uid.clone().filter(|u| !u.is_empty());
    let Some(uid) = uid else {
        unreadable(&"it has no metadata.uid");
        return None;
    };
    let labels: SmallMap = meta
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| [LABEL_ORIGIN, LABEL_ORIGIN_UID, LABEL_EPOCH].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let annotations: SmallMap = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("courier.dev/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut status: JobStatus = obj.status_as().map_err(|e| unreadable(&e)).ok()?;
    // Worker pod UIDs mean nothing to the origin; only whether there are any.
    let counting = status
        .uncounted_terminated_pods
        .take()
        .is_some_and(|u| uncounted_pods(&u));
    let view = MirrorView {
        labels,
        annotations,
        spec: SpecFields::keep(&obj.spec_fields(KEPT), KEPT),
        status: status.into(),
        deleting: meta.deletion_timestamp.is_some(),
        counting,
        uid,
        name: name.clone(),
        namespace: namespace.clone(),
    };
    Some((
        ObjectKey::new(namespace, name),
        MirrorEntry {
            view: Arc::new(view),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            observed_at: Instant::now(),
        },
    ))
}

/// Runs one watch of `cluster`'s mirrors in `scope` (a namespace, or cluster-wide) with `client`
/// until `token` is cancelled. Every change that may change a decision queues the origin with the
/// same `namespace/name` ([`MirrorCache::store`]).
pub async fn watch(
    shared: Arc<Ctx>,
    cluster: Arc<Cluster>,
    scope: WatchScope,
    client: kube::Client,
    token: CancellationToken,
) {
    let api: Api<SlimJob> = match &scope {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let timeout = u32::try_from(shared.tuning.watch_timeout.as_secs().max(1)).unwrap_or(290);
    let config = watcher::Config::default()
        .labels(&format!("{LABEL_ORIGIN}={}", shared.cfg.origin_id))
        .timeout(timeout);
    let backoff = Backoff::new(shared.tuning.backoff_min, shared.tuning.backoff_max);
    let cache = &cluster.mirrors;
    let scoped = Scoped {
        cache,
        scope: scope.clone(),
        matters: |key: &ObjectKey, old: &MirrorView, new: &MirrorView| {
            shared.hooks.mirror_change_matters(key, old, new)
        },
    };
    let place = scope.as_deref().unwrap_or("(all namespaces)");
    watch::run(api, config, backoff, &token, &scoped, |change| match change {
        // A mirror changed: copying its status must not wait behind new origins.
        Change::Stored(key) => shared.queue.add_urgent(key),
        Change::Deleted(key) => {
            shared.queue.add_urgent(key);
            super::lifecycle::mirror_gone(&cluster);
        }
        Change::Synced { gone, .. } => {
            for key in gone {
                shared.queue.add(key);
            }
            debug!(cluster = %cluster.name, namespace = place, mirrors = cache.len(), "mirror cache synced");
            // The cluster task turns Ready only once its cache is synced.
            cluster.wake.notify_one();
        }
        Change::Failed(e) => {
            warn!(cluster = %cluster.name, namespace = place, error = %e, "mirror watch failed; retrying with backoff");
            cluster.wake.notify_one();
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synced_for_a_namespace_needs_a_listed_watch_covering_it() {
        let cache = MirrorCache::default();
        assert!(!cache.is_synced() && !cache.is_synced_for("team-a"));
        cache.watching(Some("team-a".into()));
        assert!(!cache.is_synced_for("team-a"), "not listed yet");
        let scoped = Scoped {
            cache: &cache,
            scope: Some("team-a".into()),
            matters: |_: &ObjectKey, _: &MirrorView, _: &MirrorView| true,
        };
        scoped.mark_synced();
        assert!(cache.is_synced() && cache.is_synced_for("team-a"));
        assert!(!cache.is_synced_for("team-b"), "team-b is not watched");
        cache.watching(None);
        assert!(
            !cache.is_synced_for("team-b"),
            "the cluster-wide watch has not listed"
        );
        Scoped {
            cache: &cache,
            scope: None,
            matters: |_: &ObjectKey, _: &MirrorView, _: &MirrorView| true,
        }
        .mark_synced();
        assert!(cache.is_synced_for("team-b"));
        cache.unwatched(&None);
        assert!(!cache.is_synced_for("team-b") && cache.is_synced_for("team-a"));
        cache.set_unsynced();
        assert!(!cache.is_synced_for("team-a"));
        // A watch stopped meanwhile does not come back as synced.
        scoped.mark_synced();
        assert!(!cache.is_synced());
    }
}
