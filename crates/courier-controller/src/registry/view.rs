//! What a reconcile reads of every registered cluster, kept ready for it: a reconcile views all
//! of them (4-5 reconciles per Job), so what changes only with the WorkerCluster is built once per
//! version of it and shared, and the health is read in place, not copied.

use std::sync::Arc;

use courier_api::WorkerCluster;
use courier_core::placement::{ClusterView, namespace_selector};
use jiff::Timestamp;

use super::{Health, ProbeState};

/// A cluster's `ClusterView` as its WorkerCluster decides it (name, labels, weight, paused,
/// draining, selectors), built once per WorkerCluster version; cloning it only counts references.
/// What a reconcile decides (readiness, mirrors counted, stalled, duplicate) is left neutral here
/// and filled in by `gather`.
pub fn registered(name: &str, wc: &WorkerCluster) -> ClusterView {
    ClusterView {
        name: Arc::from(name),
        labels: Arc::new(wc.metadata.labels.clone().unwrap_or_default()),
        weight: u32::try_from(wc.spec.weight).unwrap_or(0),
        paused: wc.spec.paused,
        ready: false,
        not_ready_since: None,
        current_mirrors: 0,
        degraded: false,
        draining: wc.metadata.deletion_timestamp.is_some(),
        duplicate: false,
        namespace_selector: namespace_selector(wc),
        namespaces: wc.spec.namespaces.as_deref().map(Arc::from),
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
