//! Prometheus metrics. Counters and histograms are updated where things happen; the gauges that
//! describe caches (mirrors by cluster and state, cluster readiness, queue depth, leadership) are
//! computed from the caches at scrape time, so they can never drift from what the controller sees.
//! `courier_build_info` and the standard `process_*` families complete the set.
//!
//! The catalogue of every family (name, type, labels, help) is [`Metrics::catalogue`]; the table in
//! docs/operations.md is checked against it in both directions (crates/courier/tests/metrics_catalogue.rs),
//! so a family added here must be added there too.

mod process;

use std::sync::Mutex;

use prometheus::core::Collector;
use prometheus::proto::MetricType;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use process::ProcessCollector;
pub use process::{ProcError, ProcStat};

use crate::locks::MutexExt;

pub struct Metrics {
    registry: Families,
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
    pub redispatches: IntCounterVec,
    pub cluster_drains: IntCounterVec,
    pub origins: IntGauge,
    pub queue_depth: IntGauge,
    pub queue_wait_seconds: HistogramVec,
    pub leader: IntGauge,
}

const LATENCY_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The registry, plus every collector registered in it: a family with no sample yet is absent from
/// a scrape but present in the [catalogue](Metrics::catalogue).
struct Families {
    registry: Registry,
    collectors: Mutex<Vec<Box<dyn Collector>>>,
}

impl Families {
    fn new() -> Self {
        Self {
            registry: Registry::new(),
            collectors: Mutex::new(Vec::new()),
        }
    }

    fn add<C: Collector + Clone + 'static>(&self, c: &C) {
        let name = c
            .desc()
            .first()
            .map(|d| d.fq_name.clone())
            .unwrap_or_default();
        // Names are unique constants; a duplicate is a programming error the unit tests catch.
        if let Err(e) = self.registry.register(Box::new(c.clone())) {
            panic!("metric {name} cannot be registered: {e}");
        }
        self.collectors.lock_or_recover().push(Box::new(c.clone()));
    }
}

fn counter(r: &Families, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name} is malformed: {e}"));
    r.add(&c);
    c
}

fn gauge_vec(r: &Families, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name} is malformed: {e}"));
    r.add(&g);
    g
}

fn gauge(r: &Families, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).unwrap_or_else(|e| panic!("metric {name} is malformed: {e}"));
    r.add(&g);
    g
}

fn histogram(r: &Families, name: &str, help: &str, labels: &[&str]) -> HistogramVec {
    let h = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec()),
        labels,
    )
    .unwrap_or_else(|e| panic!("metric {name} is malformed: {e}"));
    r.add(&h);
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
        let r = Families::new();
        build_info(&r);
        r.add(&ProcessCollector::new());
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
            redispatches: counter(
                &r,
                "courier_redispatch_total",
                "Mirrors created for a re-dispatch (epoch 2 and later) by the cluster they landed on.",
                &["cluster"],
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
            queue_wait_seconds: histogram(
                &r,
                "courier_queue_wait_duration_seconds",
                "Time an origin waited in the work queue before a worker took it, by lane (urgent: a mirror changed; normal: new origins, resyncs, retries).",
                &["lane"],
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

    /// Sets the cache gauges from `caches` and renders every family.
    pub fn render_with(&self, caches: &CacheGauges) -> String {
        self.origins.set(saturating_i64(caches.origins));
        self.queue_depth.set(saturating_i64(caches.queue_depth));
        self.leader.set(i64::from(caches.leader));
        for c in &caches.clusters {
            self.cluster_ready
                .with_label_values(&[&c.name])
                .set(i64::from(c.ready));
            self.cluster_current_mirrors
                .with_label_values(&[&c.name])
                .set(i64::from(c.current_mirrors));
            let zero = MIRROR_STATES.iter().filter(|s| !c.mirrors.contains_key(*s));
            for state in zero {
                self.mirrors
                    .with_label_values(&[c.name.as_str(), state])
                    .set(0);
            }
            for (state, n) in &c.mirrors {
                self.mirrors
                    .with_label_values(&[c.name.as_str(), state])
                    .set(saturating_i64(*n));
            }
        }
        self.render()
    }

    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let families = self.registry.registry.gather();
        if TextEncoder::new().encode(&families, &mut buf).is_err() {
            return String::new();
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}

fn saturating_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// What the cache gauges show, read from the caches at scrape time.
#[derive(Debug, Default)]
pub struct CacheGauges {
    pub origins: usize,
    pub queue_depth: usize,
    pub leader: bool,
    pub clusters: Vec<ClusterGauges>,
}

/// One cluster's cache gauges.
#[derive(Debug)]
pub struct ClusterGauges {
    pub name: String,
    pub ready: bool,
    pub current_mirrors: u32,
    /// Cached mirrors by state (a [`MIRROR_STATES`] entry); absent states count 0.
    pub mirrors: std::collections::HashMap<&'static str, usize>,
}

/// The version of this build (the workspace version).
pub const BUILD_VERSION: &str = env!("CARGO_PKG_VERSION");
/// The commit of this build: `$COURIER_COMMIT` at build time, else `git rev-parse --short=12 HEAD`,
/// else `unknown` (see build.rs).
pub const BUILD_COMMIT: &str = env!("COURIER_BUILD_COMMIT");

/// `courier_build_info{version,commit} 1`: which build runs, for joins and upgrade dashboards.
fn build_info(r: &Families) {
    gauge_vec(
        r,
        "courier_build_info",
        "Always 1; its labels name the version and commit of the running build.",
        &["version", "commit"],
    )
    .with_label_values(&[BUILD_VERSION, BUILD_COMMIT])
    .set(1);
}

/// How Prometheus types a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

impl Kind {
    /// The word of the exposition format's `# TYPE` line.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
            Kind::Untyped => "untyped",
        }
    }

    fn of(t: MetricType) -> Self {
        match t {
            MetricType::COUNTER => Kind::Counter,
            MetricType::GAUGE => Kind::Gauge,
            MetricType::HISTOGRAM => Kind::Histogram,
            MetricType::SUMMARY => Kind::Summary,
            MetricType::UNTYPED => Kind::Untyped,
        }
    }
}

/// One metric family of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    pub name: String,
    pub kind: Kind,
    /// Label names, in declaration order.
    pub labels: Vec<String>,
    pub help: String,
}

impl Family {
    /// The series names a scrape shows for this family: a histogram's `_bucket`, `_sum` and
    /// `_count`, a summary's samples plus `_sum` and `_count`, otherwise the name itself.
    pub fn series(&self) -> Vec<String> {
        let suffixed = |s: &[&str]| s.iter().map(|x| format!("{}{x}", self.name)).collect();
        match self.kind {
            Kind::Histogram => suffixed(&["_bucket", "_sum", "_count"]),
            Kind::Summary => suffixed(&["", "_sum", "_count"]),
            _ => vec![self.name.clone()],
        }
    }
}

impl Metrics {
    /// Every family this controller can expose, sorted by name, whether or not it has a sample yet
    /// (a labelled family appears in a scrape only once some label set was used).
    pub fn catalogue(&self) -> Vec<Family> {
        let collectors = self.registry.collectors.lock_or_recover();
        let mut out = Vec::new();
        for c in collectors.iter() {
            let descs = c.desc();
            for mf in c.collect() {
                let labels = descs
                    .iter()
                    .find(|d| d.fq_name == mf.name())
                    .map(|d| {
                        let constant = d.const_label_pairs.iter().map(|p| p.name().to_string());
                        d.variable_labels.iter().cloned().chain(constant).collect()
                    })
                    .unwrap_or_default();
                out.push(Family {
                    name: mf.name().to_string(),
                    kind: Kind::of(mf.get_field_type()),
                    labels,
                    help: mf.help().to_string(),
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

/// `state` of a mirror that is not its origin's current one (deleted as soon as its cluster answers).
pub const STALE: &str = "stale";

/// The `cluster` label value of a name that is no registered WorkerCluster (a user may write any
/// `courier.dev/cluster` value on an origin; it must not mint a series).
pub const UNKNOWN_CLUSTER: &str = "unknown";

/// The `cluster` label value for `name`: itself when it is a registered WorkerCluster (or empty:
/// no cluster), else [`UNKNOWN_CLUSTER`].
pub fn cluster_label(name: &str, registered: bool) -> &str {
    if registered || name.is_empty() {
        name
    } else {
        UNKNOWN_CLUSTER
    }
}

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

    #[test]
    fn build_info_is_always_rendered_with_version_and_commit() {
        let text = Metrics::new().render();
        let line = format!(
            "courier_build_info{{commit=\"{BUILD_COMMIT}\",version=\"{BUILD_VERSION}\"}} 1"
        );
        assert!(text.contains(&line), "{line} missing:\n{text}");
        assert!(!BUILD_COMMIT.is_empty() && !BUILD_VERSION.is_empty());
    }

    /// The catalogue lists families before they have samples, with their type and labels, and a
    /// scrape shows exactly the catalogue's series once every family has one.
    /// (Checked by breaking it: dropping `r.add` from `gauge` loses courier_leader here.)
    #[test]
    fn catalogue_lists_every_family_a_scrape_can_show() {
        let m = Metrics::new();
        let cat = m.catalogue();
        let find = |n: &str| {
            cat.iter()
                .find(|f| f.name == n)
                .unwrap_or_else(|| panic!("{n} not in the catalogue: {cat:#?}"))
        };
        let d = find("courier_dispatch_duration_seconds");
        assert_eq!(
            (d.kind, d.labels.clone()),
            (Kind::Histogram, vec!["cluster".into(), "result".into()])
        );
        assert_eq!(
            d.series(),
            [
                "courier_dispatch_duration_seconds_bucket",
                "courier_dispatch_duration_seconds_sum",
                "courier_dispatch_duration_seconds_count"
            ]
        );
        assert_eq!(find("courier_redispatch_total").kind, Kind::Counter);
        assert_eq!(find("courier_leader").kind, Kind::Gauge);
        assert_eq!(find("process_cpu_seconds_total").kind, Kind::Counter);
        assert_eq!(find("courier_build_info").labels, ["version", "commit"]);
        let mut names: Vec<&str> = cat.iter().map(|f| f.name.as_str()).collect();
        names.dedup();
        assert_eq!(names.len(), cat.len(), "unique names");

        // Give every labelled family a sample through the public fields, then compare the
        // scrape's `# TYPE` lines with the catalogue.
        m.dispatch_total.with_label_values(&["w1", "created"]).inc();
        m.dispatch_seconds
            .with_label_values(&["w1", "created"])
            .observe(0.1);
        m.status_sync_seconds
            .with_label_values(&["w1"])
            .observe(0.1);
        m.status_sync_total.with_label_values(&["w1", "ok"]).inc();
        m.reconcile_total.with_label_values(&["ok"]).inc();
        m.reconcile_errors.with_label_values(&["conflict"]).inc();
        m.mirrors.with_label_values(&["w1", STALE]).set(1);
        m.cluster_ready.with_label_values(&["w1"]).set(1);
        m.cluster_current_mirrors.with_label_values(&["w1"]).set(1);
        m.gc_deleted.with_label_values(&["w1", "stale_epoch"]).inc();
        m.redispatches.with_label_values(&["w1"]).inc();
        m.cluster_drains.with_label_values(&["w1", "drained"]).inc();
        m.queue_wait_seconds
            .with_label_values(&["urgent"])
            .observe(0.01);
        let text = m.render();
        let mut typed: Vec<(String, String)> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_once(' '))
            .map(|(n, k)| (n.to_string(), k.to_string()))
            .collect();
        typed.sort();
        let want: Vec<(String, String)> = cat
            .iter()
            .filter(|f| cfg!(target_os = "linux") || !f.name.starts_with("process_"))
            .map(|f| (f.name.clone(), f.kind.as_str().to_string()))
            .collect();
        assert_eq!(typed, want, "{text}");
    }
}
