//! The management cluster's namespaces, compactly: name -> labels (what WorkerClusters'
//! `spec.namespaceSelector` match), and the `kube-system` namespace's UID (this management
//! cluster's identity in origin id claims). Fed by a metadata-only watch of Namespaces.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tracing::{info, warn};

use super::Ctx;
use crate::backoff::Backoff;
use crate::errors::chain;
use crate::locks::RwLockExt as _;

type Labels = Arc<BTreeMap<String, String>>;

/// Labels of every management namespace.
#[derive(Default)]
pub struct NamespaceLabels {
    map: RwLock<HashMap<String, Labels>>,
    kube_system_uid: RwLock<Option<String>>,
    synced: AtomicBool,
}

impl NamespaceLabels {
    /// The namespace list has been read at least once.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// The labels of namespace `name`, if the cache has it.
    pub fn get(&self, name: &str) -> Option<Labels> {
        self.map.read_or_recover().get(name).cloned()
    }

    /// The UID of the management cluster's `kube-system` namespace, once seen.
    pub fn kube_system_uid(&self) -> Option<String> {
        self.kube_system_uid.read_or_recover().clone()
    }

    /// Stores a namespace; true if its labels changed.
    fn put(&self, ns: &PartialObjectMeta<Namespace>) -> bool {
        let Some(name) = ns.metadata.name.clone() else {
            return false;
        };
        if name == "kube-system" {
            *self.kube_system_uid.write_or_recover() = ns.metadata.uid.clone();
        }
        let labels = ns.metadata.labels.clone().unwrap_or_default();
        let mut map = self.map.write_or_recover();
        if map.get(&name).is_some_and(|old| **old == labels) {
            return false;
        }
        map.insert(name, Arc::new(labels));
        true
    }

    fn remove(&self, name: &str) {
        self.map.write_or_recover().remove(name);
    }

    fn retain(&self, keep: &HashSet<String>) {
        self.map.write_or_recover().retain(|k, _| keep.contains(k));
    }
}

/// Watches the management cluster's Namespaces (metadata only). A change of a namespace's labels
/// re-examines the origins in it (a WorkerCluster may take them now, or no longer).
pub async fn watch(shared: Arc<Ctx>) {
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(shared.mgmt.clone());
    let stream = watcher::watcher(api, watcher::Config::default()).backoff(Backoff::new(
        shared.tuning.backoff_min,
        shared.tuning.backoff_max,
    ));
    let mut stream = std::pin::pin!(stream);
    let cache = &shared.registry.namespaces;
    let mut relist: Option<HashSet<String>> = None;
    loop {
        let event = tokio::select! {
            _ = shared.token.cancelled() => return,
            e = stream.next() => e,
        };
        match event {
            None => return,
            Some(Ok(Event::Init)) => relist = Some(HashSet::new()),
            Some(Ok(Event::InitApply(ns) | Event::Apply(ns))) => {
                let name = ns.metadata.name.clone().unwrap_or_default();
                if let Some(seen) = relist.as_mut() {
                    seen.insert(name.clone());
                }
                if cache.put(&ns) && cache.is_synced() {
                    shared.hooks.namespace_changed(&name);
                }
            }
            Some(Ok(Event::Delete(ns))) => {
                if let Some(name) = ns.metadata.name.as_deref() {
                    cache.remove(name);
                }
            }
            Some(Ok(Event::InitDone)) => {
                cache.retain(&relist.take().unwrap_or_default());
                if !cache.synced.swap(true, Ordering::AcqRel) {
                    info!("namespace list synced");
                    shared.registry.wake_all();
                }
            }
            Some(Err(e)) => warn!(error = %chain(&e), "Namespace watch failed; retrying"),
        }
    }
}
