//! What a reconcile reads of every registered cluster, kept ready for it: a reconcile views all
//! of them (4-5 reconciles per Job), so what changes only with the WorkerCluster is built once per
//! version of it and shared, and the health is read in place, not copied.

use std::collections::BTreeMap;
use std::sync::Arc;

use courier_api::WorkerCluster;
use courier_core::placement::namespace_selector;
use courier_core::selector::ClusterSelector;
use jiff::Timestamp;

use super::{Health, ProbeState};

/// The parts of a cluster's `ClusterView` its WorkerCluster decides (cloning it only counts
/// references).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub name: Arc<str>,
    pub labels: Arc<BTreeMap<String, String>>,
    pub weight: u32,
    pub paused: bool,
    /// The WorkerCluster is being deleted.
    pub draining: bool,
    pub namespace_selector: Option<Arc<Result<ClusterSelector, String>>>,
    pub namespaces: Option<Arc<[String]>>,
}

impl Registered {
    pub fn of(name: &str, wc: &WorkerCluster) -> Self {
        Self {
            name: Arc::from(name),
            labels: Arc::new(wc.metadata.labels.clone().unwrap_or_default()),
            weight: u32::try_from(wc.spec.weight).unwrap_or(0),
            paused: wc.spec.paused,
            draining: wc.metadata.deletion_timestamp.is_some(),
            namespace_selector: namespace_selector(wc),
            namespaces: wc.spec.namespaces.as_deref().map(Arc::from),
        }
    }
}

/// What placement reads of a cluster's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    /// Only a probed failure starts the worker-lost clock (a restart must probe first).
    pub not_ready_since: Option<Timestamp>,
}

impl Readiness {
    pub fn of(h: &Health) -> Self {
        Self {
            ready: h.ready(),
            not_ready_since: if h.state == ProbeState::NotReady {
                h.since
            } else {
                None
            },
        }
    }
}
