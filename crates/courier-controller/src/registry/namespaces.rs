//! The management cluster's namespaces, compactly: name -> labels (what WorkerClusters'
//! `spec.namespaceSelector` match), and the `kube-system` namespace's UID (this management
//! cluster's identity in origin id claims). Fed by a metadata-only watch of Namespaces.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use tracing::{info, warn};

use super::Ctx;
use crate::backoff::Backoff;
use crate::locks::RwLockExt as _;
use crate::watch::{self, Cache, Change, NamedValues};

type Labels = Arc<BTreeMap<String, String>>;

/// Labels of every management namespace.
#[derive(Default)]
pub struct NamespaceLabels {
    values: NamedValues<BTreeMap<String, String>>,
    kube_system_uid: RwLock<Option<String>>,
}

impl NamespaceLabels {
    /// The namespace list has been read at least once.
    pub fn is_synced(&self) -> bool {
        self.values.is_synced()
    }

    /// The labels of namespace `name`, if the cache has it.
    pub fn get(&self, name: &str) -> Option<Labels> {
        self.values.get(name)
    }

    /// The UID of the management cluster's `kube-system` namespace, once seen.
    pub fn kube_system_uid(&self) -> Option<String> {
        self.kube_system_uid.read_or_recover().clone()
    }
}

impl Cache<PartialObjectMeta<Namespace>> for NamespaceLabels {
    type Key = String;

    fn key_of(&self, ns: &PartialObjectMeta<Namespace>) -> Option<String> {
        ns.metadata.name.clone()
    }

    /// Stores a namespace's labels; true if they changed.
    fn store(&self, name: &String, ns: PartialObjectMeta<Namespace>) -> bool {
        if name == "kube-system" {
            *self.kube_system_uid.write_or_recover() = ns.metadata.uid.clone();
        }
        self.values
            .put(name, ns.metadata.labels.unwrap_or_default())
    }

    fn drop_key(&self, name: &String) -> bool {
        self.values.remove(name)
    }

    fn cached_keys(&self) -> Vec<String> {
        self.values.names()
    }

    fn mark_synced(&self) {
        self.values.mark_synced();
    }
}

/// Watches the management cluster's Namespaces (metadata only). A change of a namespace's labels
/// re-examines the origins in it (a WorkerCluster may take them now, or no longer).
pub async fn watch(shared: Arc<Ctx>) {
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(shared.mgmt.clone());
    let backoff = Backoff::new(shared.tuning.backoff_min, shared.tuning.backoff_max);
    let cache = &shared.registry.namespaces;
    let config = watcher::Config::default();
    watch::run(
        api,
        config,
        backoff,
        &shared.token,
        cache,
        |change| match change {
            Change::Stored(name) => {
                if cache.is_synced() {
                    shared.hooks.namespace_changed(&name);
                }
            }
            Change::Deleted(_) => {}
            Change::Synced { first, .. } => {
                if first {
                    info!("namespace list synced");
                    shared.registry.wake_all();
                }
            }
            Change::Failed(e) => warn!(error = %e, "Namespace watch failed; retrying"),
        },
    )
    .await;
}
