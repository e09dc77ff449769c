//! The management chart's PrometheusRule and Grafana dashboard, rendered for real: every PromQL
//! expression parses (promql-parser), every metric it names is one the controller exposes
//! (`courier_controller::metrics::Metrics::catalogue`; a histogram as `_bucket`/`_sum`/`_count`),
//! every label it matches on exists on that metric, and each alert's runbook is a section of
//! docs/operations.md.
//!
//! Checked by breaking it: renaming `courier_redispatch_total` in the rule (to
//! `courier_redispatches_total`) fails `alert_rules_parse_and_use_only_metrics_the_controller_exposes`;
//! an unbalanced `(` in a dashboard query fails the dashboard test.

use std::collections::{BTreeMap, BTreeSet};

use courier_controller::metrics::{Family, Metrics};
use promql_parser::parser::{self, Expr};
use promql_parser::util::{ExprVisitor, walk_expr};
use serde_json::{Value, json};

mod support;
use support::{Rendered, render, repo};

/// Labels Prometheus (with the Prometheus Operator's ServiceMonitor) attaches to every scraped
/// series, on top of the metric's own.
const TARGET_LABELS: &[&str] = &[
    "job",
    "namespace",
    "pod",
    "instance",
    "service",
    "endpoint",
    "container",
];

/// Series Prometheus itself writes for each target.
const SYNTHETIC: &[&str] = &["up"];

/// Series name -> the labels it carries (its family's labels, plus `le` on a histogram bucket).
fn exposed() -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for f in Metrics::new().catalogue() {
        let Family { labels, .. } = &f;
        for series in f.series() {
            let mut l: BTreeSet<String> = labels.iter().cloned().collect();
            if series.ends_with("_bucket") {
                l.insert("le".into());
            }
            out.insert(series, l);
        }
    }
    for s in SYNTHETIC {
        out.insert(s.to_string(), BTreeSet::new());
    }
    out
}

/// (metric name, label names matched) of every selector in an expression.
struct Selectors(Vec<(String, Vec<String>)>);

impl ExprVisitor for Selectors {
    type Error = String;
    fn pre_visit(&mut self, e: &Expr) -> Result<bool, String> {
        let vs = match e {
            Expr::VectorSelector(vs) => vs,
            Expr::MatrixSelector(m) => &m.vs,
            _ => return Ok(true),
        };
        let name = vs
            .name
            .clone()
            .ok_or_else(|| format!("a selector without a metric name: {e}"))?;
        let labels = vs
            .matchers
            .matchers
            .iter()
            .chain(vs.matchers.or_matchers.iter().flatten())
            .map(|m| m.name.clone())
            .collect();
        self.0.push((name, labels));
        Ok(true)
    }
}

/// Parses `expr` and checks every selector against what the controller exposes; returns the
/// metric names used.
fn check_query(
    what: &str,
    expr: &str,
    exposed: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let ast = parser::parse(expr)
        .unwrap_or_else(|e| panic!("{what}: PromQL does not parse: {e}\n{expr}"));
    let mut sel = Selectors(Vec::new());
    walk_expr(&mut sel, &ast).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(!sel.0.is_empty(), "{what}: selects no metric: {expr}");
    for (name, labels) in &sel.0 {
        let Some(has) = exposed.get(name) else {
            panic!(
                "{what}: uses {name}, which the controller does not expose (crates/courier-controller/\
                 src/metrics.rs). Exposed: {:?}",
                exposed.keys().collect::<Vec<_>>()
            );
        };
        for l in labels {
            assert!(
                has.contains(l) || TARGET_LABELS.contains(&l.as_str()),
                "{what}: matches label {l} on {name}, which has only {has:?} (and target labels)"
            );
        }
    }
    sel.0.into_iter().map(|(n, _)| n).collect()
}

fn monitoring(values: Value) -> Rendered {
    render("courier", "courier", "courier-system", &values)
}

/// Headings of docs/operations.md as GitHub anchors (lower case, spaces to '-', punctuation
/// dropped).
fn anchors() -> BTreeSet<String> {
    let path = repo().join("docs/operations.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|l| {
            l.trim_start_matches('#')
                .strip_prefix(' ')
                .filter(|_| l.starts_with('#'))
        })
        .map(|h| {
            h.trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

#[test]
fn alert_rules_parse_and_use_only_metrics_the_controller_exposes() {
    let r =
        monitoring(json!({"prometheusRule": {"enabled": true, "alertLabels": {"team": "batch"}}}));
    let rule = r.one("PrometheusRule");
    let exposed = exposed();
    let anchors = anchors();
    let mut alerts = BTreeSet::new();
    let rules: Vec<&Value> = rule["spec"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .collect();
    assert!(!rules.is_empty(), "{rule:#}");
    for a in rules {
        let name = a["alert"]
            .as_str()
            .unwrap_or_else(|| panic!("not an alert: {a}"));
        assert!(alerts.insert(name.to_string()), "{name} twice");
        let expr = a["expr"].as_str().unwrap_or_default();
        let used = check_query(name, expr, &exposed);
        // Only this release's series: job = the metrics Service, in the release namespace.
        assert!(
            expr.contains(r#"job="courier-metrics", namespace="courier-system""#),
            "{name} selects this release's series: {expr}"
        );
        assert!(!used.is_empty());
        if let Some(f) = a["for"].as_str() {
            assert!(
                promql_parser::util::duration::parse_duration(f).is_ok(),
                "{name}: for {f}"
            );
        }
        let severity = a["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["critical", "warning"].contains(&severity),
            "{name}: severity {severity}"
        );
        assert_eq!(a["labels"]["team"], "batch", "{name}: alertLabels");
        for key in ["summary", "description", "runbook_url"] {
            assert!(
                a["annotations"][key]
                    .as_str()
                    .is_some_and(|s| !s.trim().is_empty()),
                "{name}: annotation {key}"
            );
        }
        let runbook = a["annotations"]["runbook_url"].as_str().unwrap_or_default();
        let (base, anchor) = runbook.split_once('#').unwrap_or_default();
        assert!(base.ends_with("docs/operations.md"), "{name}: {runbook}");
        assert!(
            anchors.contains(anchor),
            "{name}: runbook anchor #{anchor} is not a heading of docs/operations.md"
        );
    }
    for required in [
        "CourierDown",
        "CourierNoLeader",
        "CourierWorkerNotReady",
        "CourierDispatchFailures",
        "CourierStatusLagHigh",
        "CourierRedispatchStorm",
    ] {
        assert!(alerts.contains(required), "{required} missing: {alerts:?}");
    }
}

/// Grafana variables replaced by what Grafana would put there, so the query is plain PromQL.
fn grafana_to_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$__range", "1h")
}

/// Every panel, rows' nested panels included.
fn panels(dash: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in dash["panels"].as_array().into_iter().flatten() {
        out.push(p);
        out.extend(p["panels"].as_array().into_iter().flatten());
    }
    out
}

#[test]
fn dashboard_queries_parse_and_use_only_metrics_the_controller_exposes() {
    let r = monitoring(json!({"dashboards": {"enabled": true}}));
    let cm = r.one("ConfigMap");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let text = cm["data"]["courier.json"].as_str().unwrap_or_default();
    let file = repo().join("charts/courier/dashboards/courier.json");
    let committed =
        std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert_eq!(
        text,
        committed.trim_end(),
        "the ConfigMap carries the file as it is"
    );
    let dash: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("dashboard JSON: {e}"));
    assert_eq!(dash["uid"], "courier");

    let exposed = exposed();
    let mut used = BTreeSet::new();
    let mut ids = BTreeSet::new();
    let mut rows = Vec::new();
    for p in panels(&dash) {
        let title = p["title"].as_str().unwrap_or_default();
        assert!(
            ids.insert(p["id"].as_i64().unwrap_or(-1)),
            "panel ids are unique ({title})"
        );
        if p["type"] == "row" {
            rows.push(title.to_string());
            continue;
        }
        let targets = p["targets"].as_array().cloned().unwrap_or_default();
        assert!(!targets.is_empty(), "panel {title} has no query");
        for t in targets {
            assert_eq!(
                t["datasource"]["uid"], "${datasource}",
                "{title}: the datasource variable"
            );
            let expr = grafana_to_promql(t["expr"].as_str().unwrap_or_default());
            used.extend(check_query(&format!("panel {title:?}"), &expr, &exposed));
        }
    }
    // Template variables: label_values(<selector>, label).
    for v in dash["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] != "query" {
            continue;
        }
        let q = v["definition"].as_str().unwrap_or_default();
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|s| s.strip_suffix(')'))
            .and_then(|s| s.rsplit_once(','))
            .map(|(sel, _)| sel)
            .unwrap_or_else(|| panic!("variable {}: {q}", v["name"]));
        used.extend(check_query(
            &format!("variable {}", v["name"]),
            inner,
            &exposed,
        ));
    }
    for row in [
        "Dispatch",
        "Status sync",
        "Workers",
        "Re-dispatches and garbage collection",
        "Reconcile",
        "Leadership and process",
    ] {
        assert!(
            rows.iter().any(|r| r == row),
            "row {row:?} missing: {rows:?}"
        );
    }
    for family in [
        "courier_dispatch_total",
        "courier_dispatch_duration_seconds_bucket",
        "courier_status_sync_total",
        "courier_status_sync_duration_seconds_bucket",
        "courier_cluster_ready",
        "courier_cluster_current_mirrors",
        "courier_mirrors",
        "courier_redispatch_total",
        "courier_gc_deleted_total",
        "courier_reconcile_errors_total",
        "courier_queue_depth",
        "courier_leader",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    ] {
        assert!(used.contains(family), "no panel shows {family}");
    }
}
