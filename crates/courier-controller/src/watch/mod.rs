//! The one watch-and-cache driver every watch of the controller runs on (origin Jobs, each worker's
//! mirrors, WorkerClusters, kubeconfig Secrets, Namespaces).
//!
//! [`run`] lists and watches one [`Api`] (cluster-wide or namespaced, with any selector in its
//! `watcher::Config`) through kube's watcher, which resumes a dropped watch from its last
//! resourceVersion and re-lists after `410 Gone`. Each object is handed to a [`Cache`], which keeps
//! its own compact projection of it (the fields decisions read, never the whole object) and says
//! whether the cached value changed; the driver tells its caller what changed ([`Change`]).
//!
//! A re-list is tracked here, once for every kind: the keys listed between the watcher's `Init`
//! and `InitDone` are the ones that exist; every other cached key is dropped then and reported as
//! gone, and the cache is marked synced.
//!
//! Errors are retried after a capped, jittered [`Backoff`]. The backoff is reset only by progress
//! (a completed list or a watch event), never by the watcher's `Init`: kube's watcher emits `Init`
//! before every list attempt, so a stream backoff reset by any `Ok` event would retry a dead
//! server at the minimum delay forever (issue #12 §8).

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;

use futures::StreamExt;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::errors::chain;

pub mod job;
pub use job::SlimJob;

/// A compact cache of one watched kind.
pub trait Cache<K>: Send + Sync {
    type Key: Clone + Eq + Hash + Send;

    /// The key of a watched object; `None`: the object is ignored.
    fn key_of(&self, obj: &K) -> Option<Self::Key>;

    /// Projects `obj` and stores it under `key`; true when the cached value is new or changed.
    /// An object the projection rejects is not stored (false); a re-list then drops its key.
    fn store(&self, key: &Self::Key, obj: K) -> bool;

    /// Drops `key`; true if it was cached.
    fn drop_key(&self, key: &Self::Key) -> bool;

    /// Every cached key.
    fn cached_keys(&self) -> Vec<Self::Key>;

    /// A re-list started (`true`) or ended (`false`), for caches that treat listed objects
    /// differently from watched ones.
    fn relisting(&self, _on: bool) {}

    /// A complete list has been stored.
    fn mark_synced(&self);
}

/// What changed in a cache.
#[derive(Debug)]
pub enum Change<Key> {
    /// An object was stored and its cached value is new or changed.
    Stored(Key),
    /// A cached object was deleted.
    Deleted(Key),
    /// A (re-)list completed: the keys it did not show were dropped (`gone`). `first`: the first
    /// list of this run.
    Synced { gone: Vec<Key>, first: bool },
    /// The list or watch failed (the error chain, as text); retried after the backoff.
    Failed(String),
}

/// Runs one list-and-watch of `api` into `cache` until `token` is cancelled (or the stream ends),
/// telling `tell` what changed.
pub async fn run<K, C>(
    api: Api<K>,
    config: watcher::Config,
    mut backoff: Backoff,
    token: &CancellationToken,
    cache: &C,
    mut tell: impl FnMut(Change<C::Key>),
) where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    C: Cache<K>,
{
    let stream = watcher::watcher(api, config);
    let mut stream = std::pin::pin!(stream);
    let mut seen: Option<HashSet<C::Key>> = None;
    let mut first = true;
    loop {
        let event = tokio::select! {
            _ = token.cancelled() => return,
            e = stream.next() => e,
        };
        match event {
            None => return,
            Some(Ok(Event::Init)) => {
                seen = Some(HashSet::new());
                cache.relisting(true);
            }
            Some(Ok(Event::InitApply(obj))) => {
                let Some(key) = cache.key_of(&obj) else {
                    continue;
                };
                if let Some(seen) = seen.as_mut() {
                    seen.insert(key.clone());
                }
                if cache.store(&key, obj) {
                    tell(Change::Stored(key));
                }
            }
            Some(Ok(Event::Apply(obj))) => {
                backoff.reset();
                if let Some(key) = cache.key_of(&obj)
                    && cache.store(&key, obj)
                {
                    tell(Change::Stored(key));
                }
            }
            Some(Ok(Event::Delete(obj))) => {
                backoff.reset();
                if let Some(key) = cache.key_of(&obj)
                    && cache.drop_key(&key)
                {
                    tell(Change::Deleted(key));
                }
            }
            Some(Ok(Event::InitDone)) => {
                backoff.reset();
                let seen = seen.take().unwrap_or_default();
                let gone: Vec<C::Key> = cache
                    .cached_keys()
                    .into_iter()
                    .filter(|k| !seen.contains(k))
                    .filter(|k| cache.drop_key(k))
                    .collect();
                cache.relisting(false);
                cache.mark_synced();
                tell(Change::Synced { gone, first });
                first = false;
            }
            Some(Err(e)) => {
                tell(Change::Failed(chain(&e)));
                let delay = backoff.next_delay();
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}
