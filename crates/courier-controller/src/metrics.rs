//! Prometheus metrics. Counters and histograms are updated where things happen; the gauges that
//! describe caches (mirrors by cluster and state, cluster readiness, queue depth, leadership) are
//! computed from the caches at scrape time, so they can never drift from what the controller sees.
//!
//! | metric | labels |
//! |---|---|
//! | `courier_dispatch_total` | cluster, result (created, adopted, conflict, refused, unanswered, error) |
//! | `courier_dispatch_duration_seconds` | cluster, result: origin creation -> first mirror created |
//! | `courier_status_sync_duration_seconds` | cluster: mirror change seen -> origin status written |
//! | `courier_status_sync_total` | cluster, result (ok, error) |
//! | `courier_reconcile_total` | result (ok, error) |
//! | `courier_reconcile_errors_total` | reason (conflict, not_found, timeout, unreachable, forbidden, ...) |
//! | `courier_mirrors` | cluster, state (a `courier_core::phase` label: dispatched, running, suspended, finishing, complete, failed, deleting; or stale) |
//! | `courier_cluster_ready` | cluster (1 Ready, 0 not) |
//! | `courier_cluster_current_mirrors` | cluster (unfinished origins placed there) |
//! | `courier_gc_deleted_total` | cluster, reason (origin_gone, origin_uid_differs, stale_epoch) |
//! | `courier_cluster_drains_total` | cluster, outcome (drained: no mirror left; unreachable: released after the worker-lost timeout) |
//! | `courier_origins` | - (managed origins cached) |
//! | `courier_queue_depth` | - |
//! | `courier_leader` | - (1 while this replica leads) |

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    pub dispatch_total: IntCounterVec,
    pub dispatch_seconds: HistogramVec,
    pub status_sync_seconds: HistogramVec,
    pub status_sync_total: IntCounterVec,
    pub reconcile_total: IntCounterVec,
    pub reconcile_errors: IntCounterVec,
    pub mirrors: IntGaugeVec,
    pub cluster_ready: IntGaugeVec,
    pub cluster_current_mirrors: IntGaugeVec,
    pub gc_deleted: IntCounterVec,
    pub cluster_drains: IntCounterVec,
    pub origins: IntGauge,
    pub queue_depth: IntGauge,
    pub leader: IntGauge,
}

const LATENCY_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

fn counter(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name} is malformed: {e}"));
    // Names are unique constants: registration cannot collide.
    let _ = r.register(Box::new(c.clone()));
    c
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name} is malformed: {e}"));
    let _ = r.register(Box::new(g.clone()));
    g
}

fn gauge(r: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).unwrap_or_else(|e| panic!("metric {name} is malformed: {e}"));
    let _ = r.register(Box::new(g.clone()));
    g
}

fn histogram(r: &Registry, name: &str, help: &str, labels: &[&str]) -> HistogramVec {
    let h = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec()),
        labels,
    )
    .unwrap_or_else(|e| panic!("metric {name} is malformed: {e}"));
    let _ = r.register(Box::new(h.clone()));
    h
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// The metric definitions are constants; a malformed one is a programming error caught by the
    /// unit test below, hence the panics in the helpers.
    pub fn new() -> Self {
        let r = Registry::new();
        Self {
            dispatch_total: counter(
                &r,
                "courier_dispatch_total",
                "Mirror creations by worker cluster and result.",
                &["cluster", "result"],
            ),
            dispatch_seconds: histogram(
                &r,
                "courier_dispatch_duration_seconds",
                "Time from an origin Job's creation to its first mirror being created.",
                &["cluster", "result"],
            ),
            status_sync_seconds: histogram(
                &r,
                "courier_status_sync_duration_seconds",
                "Time from a mirror status change reaching the cache to the origin status write.",
                &["cluster"],
            ),
            status_sync_total: counter(
                &r,
                "courier_status_sync_total",
                "Origin status writes by worker cluster and result.",
                &["cluster", "result"],
            ),
            reconcile_total: counter(
                &r,
                "courier_reconcile_total",
                "Origin reconciles by result.",
                &["result"],
            ),
            reconcile_errors: counter(
                &r,
                "courier_reconcile_errors_total",
                "Failed origin reconciles by reason.",
                &["reason"],
            ),
            mirrors: gauge_vec(
                &r,
                "courier_mirrors",
                "Mirrors in the worker caches by cluster and state.",
                &["cluster", "state"],
            ),
            cluster_ready: gauge_vec(
                &r,
                "courier_cluster_ready",
                "1 if the WorkerCluster is Ready.",
                &["cluster"],
            ),
            cluster_current_mirrors: gauge_vec(
                &r,
                "courier_cluster_current_mirrors",
                "Unfinished origin Jobs placed on the WorkerCluster.",
                &["cluster"],
            ),
            gc_deleted: counter(
                &r,
                "courier_gc_deleted_total",
                "Mirrors deleted by garbage collection by cluster and reason.",
                &["cluster", "reason"],
            ),
            cluster_drains: counter(
                &r,
                "courier_cluster_drains_total",
                "Removed WorkerClusters whose drain finalizer was released, by outcome.",
                &["cluster", "outcome"],
            ),
            origins: gauge(&r, "courier_origins", "Managed origin Jobs in the cache."),
            queue_depth: gauge(
                &r,
                "courier_queue_depth",
                "Origins waiting to be reconciled.",
            ),
            leader: gauge(&r, "courier_leader", "1 while this replica is the leader."),
            registry: r,
        }
    }

    /// Drops a removed cluster's cache gauges.
    pub fn forget_cluster(&self, cluster: &str) {
        let _ = self.cluster_ready.remove_label_values(&[cluster]);
        let _ = self.cluster_current_mirrors.remove_label_values(&[cluster]);
        for state in MIRROR_STATES {
            let _ = self.mirrors.remove_label_values(&[cluster, state]);
        }
    }

    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let families = self.registry.gather();
        if TextEncoder::new().encode(&families, &mut buf).is_err() {
            return String::new();
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}

/// `state` of a mirror that is not its origin's current one (deleted as soon as its cluster answers).
pub const STALE: &str = "stale";

/// Values of the `state` label of `courier_mirrors`: the phase labels of `courier_core::phase`, plus
/// [`STALE`].
pub const MIRROR_STATES: [&str; 9] = [
    "pending",
    "dispatched",
    "running",
    "suspended",
    "finishing",
    "complete",
    "failed",
    "deleting",
    STALE,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_states_are_the_phase_labels_and_stale() {
        let mut want: Vec<&str> = courier_core::phase::ALL_PHASES
            .iter()
            .map(|p| p.label())
            .collect();
        want.push(STALE);
        assert_eq!(MIRROR_STATES.to_vec(), want);
    }

    #[test]
    fn every_metric_registers_and_renders() {
        let m = Metrics::new();
        m.dispatch_total.with_label_values(&["w1", "created"]).inc();
        m.dispatch_seconds
            .with_label_values(&["w1", "created"])
            .observe(0.2);
        m.reconcile_errors.with_label_values(&["conflict"]).inc();
        m.cluster_ready.with_label_values(&["w1"]).set(1);
        let text = m.render();
        for name in [
            "courier_dispatch_total",
            "courier_dispatch_duration_seconds_bucket",
            "courier_reconcile_errors_total",
            "courier_cluster_ready",
            "courier_leader",
        ] {
            assert!(text.contains(name), "{name} missing:\n{text}");
        }
        m.forget_cluster("w1");
        assert!(!m.render().contains("courier_cluster_ready{"));
    }
}
