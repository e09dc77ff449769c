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
mod named;
pub use job::SlimJob;
pub(crate) use job::batch_v1_job_resource;
pub use named::NamedValues;

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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::PostParams;
    use kube::config::{KubeConfigOptions, Kubeconfig};

    use super::*;

    /// Name -> resourceVersion.
    #[derive(Default)]
    struct Versions(Mutex<HashMap<String, String>>);

    impl Cache<ConfigMap> for Versions {
        type Key = String;
        fn key_of(&self, cm: &ConfigMap) -> Option<String> {
            cm.metadata.name.clone()
        }
        fn store(&self, key: &String, cm: ConfigMap) -> bool {
            let rv = cm.metadata.resource_version.unwrap_or_default();
            let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
            map.insert(key.clone(), rv.clone()) != Some(rv)
        }
        fn drop_key(&self, key: &String) -> bool {
            let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
            map.remove(key).is_some()
        }
        fn cached_keys(&self) -> Vec<String> {
            let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
            map.keys().cloned().collect()
        }
        fn mark_synced(&self) {}
    }

    async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// A list drops what it does not show and says so; then watch events flow.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_list_drops_what_it_did_not_show_then_the_watch_reports_changes() {
        let sim = kubesim::Sim::start(kubesim::SimOptions {
            role: kubesim::Role::Management,
            name: "watch-test".into(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("sim: {e}"));
        let kc = Kubeconfig::from_yaml(&sim.kubeconfig()).unwrap_or_else(|e| panic!("{e}"));
        let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let client = kube::Client::try_from(cfg).unwrap_or_else(|e| panic!("{e}"));
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let cm = |name: &str| ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &cm("listed"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let cache = Versions::default();
        cache.store(&"stale".to_string(), cm("stale"));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let token = CancellationToken::new();
        let backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(100));
        let run = run(
            api.clone(),
            watcher::Config::default(),
            backoff,
            &token,
            &cache,
            |c| {
                let text = match c {
                    Change::Stored(k) => format!("stored {k}"),
                    Change::Deleted(k) => format!("deleted {k}"),
                    Change::Synced { gone, first } => format!("synced {gone:?} {first}"),
                    Change::Failed(e) => format!("failed {e}"),
                };
                let _ = tx.send(text);
            },
        );
        let script = async {
            assert_eq!(next(&mut rx).await, "stored listed");
            assert_eq!(next(&mut rx).await, r#"synced ["stale"] true"#);
            api.create(&PostParams::default(), &cm("new"))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(next(&mut rx).await, "stored new");
            api.delete("listed", &Default::default())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(next(&mut rx).await, "deleted listed");
            token.cancel();
        };
        tokio::join!(run, script);
        let mut keys = cache.cached_keys();
        keys.sort();
        assert_eq!(keys, ["new"]);
    }
}
