//! View models: pure functions from the controller's snapshots to what each page shows. No I/O,
//! no clock (the caller passes `now`), no HTML (see `html.rs`); the JSON endpoints serve them as
//! they are.

use std::collections::BTreeSet;

use courier_core::phase::{ALL_PHASES, JobPhase};
use jiff::Timestamp;
use serde::Serialize;

use crate::snapshot::{ClusterSnapshot, ConditionSnapshot, Explanation, JobSnapshot};

/// At most this many Jobs are listed on one page (the count of the rest is shown): a page view
/// costs the same whatever the number of Jobs.
pub const MAX_ROWS: usize = 500;

/// `45s`, `12m`, `5h`, `3d` between `t` (RFC 3339) and `now`; `-` when unknown.
pub fn age(now: Timestamp, t: Option<&str>) -> String {
    let Some(t) = t.and_then(|t| t.parse::<Timestamp>().ok()) else {
        return "-".into();
    };
    let secs = now.as_second().saturating_sub(t.as_second()).max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 120 * 60 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// `Ready`, `Not Ready`, or `Pending` before the first probe.
pub fn readiness(ready: bool, reason: &str) -> &'static str {
    match (ready, reason) {
        (true, _) => "Ready",
        (false, "Pending") => "Pending",
        (false, _) => "Not Ready",
    }
}

// ------------------------------------------------------------------------------- clusters

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRow {
    pub name: String,
    pub ready: bool,
    /// `Ready`, `Not Ready` or `Pending`.
    pub state: &'static str,
    pub reason: String,
    pub message: String,
    /// Since the last Ready/not-Ready change.
    pub since: String,
    pub server_version: Option<String>,
    pub current_mirrors: u32,
    /// `key=value`, sorted by key.
    pub labels: Vec<String>,
    pub weight: i32,
    pub paused: bool,
    /// The worker's namespaces Courier may use, sorted (`spec.namespaces`); empty: every one.
    pub namespaces: Vec<String>,
    pub last_probe: Option<String>,
    /// `12s ago`, or `never`.
    pub last_probe_ago: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClustersView {
    pub rows: Vec<ClusterRow>,
    pub ready: usize,
    pub total: usize,
}

pub fn clusters_view(clusters: &[ClusterSnapshot], now: Timestamp) -> ClustersView {
    let mut rows: Vec<ClusterRow> = clusters
        .iter()
        .map(|c| ClusterRow {
            name: c.name.clone(),
            ready: c.ready,
            state: readiness(c.ready, &c.reason),
            reason: c.reason.clone(),
            message: c.message.clone(),
            since: age(now, c.since.as_deref()),
            server_version: c.server_version.clone(),
            current_mirrors: c.current_mirrors,
            labels: c.labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            weight: c.weight,
            paused: c.paused,
            namespaces: {
                let mut ns = c.namespaces.clone().unwrap_or_default();
                ns.sort();
                ns
            },
            last_probe: c.last_probe.clone(),
            last_probe_ago: match c.last_probe.as_deref() {
                Some(t) => format!("{} ago", age(now, Some(t))),
                None => "never".into(),
            },
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    ClustersView {
        ready: rows.iter().filter(|r| r.ready).count(),
        total: rows.len(),
        rows,
    }
}

// ------------------------------------------------------------------------------- Jobs

/// The Jobs page's filters and order, as in its URL (`?namespace=a&cluster=w1&phase=Running&sort=oldest`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobFilter {
    pub namespace: Option<String>,
    pub cluster: Option<String>,
    pub phase: Option<JobPhase>,
    /// Oldest first (default: newest first).
    pub oldest_first: bool,
}

/// Decodes one `application/x-www-form-urlencoded` component (`+` is a space); `None` when the
/// escapes do not make UTF-8.
pub fn form_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b'%' => return None,
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Encodes a query value or path segment (everything but unreserved characters is escaped).
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `(key, value)` pairs of a query string, decoded; malformed pairs are skipped.
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((form_decode(k)?, form_decode(v)?))
        })
        .collect()
}

impl JobFilter {
    /// The filter a query string asks for. Empty values mean "any"; an unknown phase is ignored.
    pub fn from_query(query: &str) -> Self {
        let mut f = JobFilter::default();
        for (k, v) in query_pairs(query) {
            let v = v.trim().to_string();
            match k.as_str() {
                "namespace" if !v.is_empty() => f.namespace = Some(v),
                "cluster" if !v.is_empty() => f.cluster = Some(v),
                "phase" => f.phase = JobPhase::parse(&v),
                "sort" => f.oldest_first = v == "oldest",
                _ => {}
            }
        }
        f
    }

    /// The query string of this filter (empty for the default view), without `?`.
    pub fn to_query(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = &self.namespace {
            parts.push(format!("namespace={}", url_encode(n)));
        }
        if let Some(c) = &self.cluster {
            parts.push(format!("cluster={}", url_encode(c)));
        }
        if let Some(p) = self.phase {
            parts.push(format!("phase={}", p.as_str()));
        }
        if self.oldest_first {
            parts.push("sort=oldest".into());
        }
        parts.join("&")
    }

    fn matches(&self, j: &JobSnapshot) -> bool {
        self.namespace.as_ref().is_none_or(|n| *n == j.namespace)
            && self
                .cluster
                .as_ref()
                .is_none_or(|c| j.cluster.as_ref() == Some(c))
            && self.phase.is_none_or(|p| p == j.phase)
    }
}

/// The link to one Job's page.
pub fn job_href(namespace: &str, name: &str) -> String {
    format!("/jobs/{}/{}", url_encode(namespace), url_encode(name))
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobRow {
    pub namespace: String,
    pub name: String,
    pub href: String,
    pub cluster: Option<String>,
    pub phase: JobPhase,
    pub succeeded: i32,
    pub failed: i32,
    pub active: i32,
    pub completions: Option<i32>,
    pub created: Option<String>,
    pub age: String,
    pub redispatches: u32,
    /// What Courier waits for (why a Job is still Pending).
    pub waiting: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobsView {
    pub filter: JobFilter,
    /// The matching Jobs in the asked order, at most [`MAX_ROWS`].
    pub rows: Vec<JobRow>,
    /// How many Jobs match the filter (`rows` may be fewer).
    pub matching: usize,
    /// How many Jobs the caller may see at all.
    pub total: usize,
    /// The choices of the filters: namespaces and clusters of the visible Jobs (plus `clusters`
    /// given), sorted; the filter's own values are always among them.
    pub namespaces: Vec<String>,
    pub clusters: Vec<String>,
    /// How many visible Jobs are in each phase (phases with none left out), in life order.
    pub phases: Vec<(JobPhase, usize)>,
}

/// The Jobs page for `jobs` (already limited to what the caller may see) and the registered
/// `clusters` the caller may see.
pub fn jobs_view(
    jobs: &[JobSnapshot],
    clusters: &[String],
    filter: &JobFilter,
    now: Timestamp,
) -> JobsView {
    let mut matching: Vec<&JobSnapshot> = jobs.iter().filter(|j| filter.matches(j)).collect();
    // By age: RFC 3339 times of one server sort as strings; unknown creation times go last.
    matching.sort_by(|a, b| {
        let by_time = match (&a.created, &b.created) {
            (Some(x), Some(y)) if filter.oldest_first => x.cmp(y),
            (Some(x), Some(y)) => y.cmp(x),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        };
        by_time.then_with(|| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)))
    });
    let rows = matching
        .iter()
        .take(MAX_ROWS)
        .map(|j| JobRow {
            namespace: j.namespace.clone(),
            name: j.name.clone(),
            href: job_href(&j.namespace, &j.name),
            cluster: j.cluster.clone(),
            phase: j.phase,
            succeeded: j.succeeded,
            failed: j.failed,
            active: j.active,
            completions: j.completions,
            created: j.created.clone(),
            age: age(now, j.created.as_deref()),
            redispatches: j.redispatches,
            waiting: j.waiting.clone(),
        })
        .collect();
    let mut namespaces: BTreeSet<String> = jobs.iter().map(|j| j.namespace.clone()).collect();
    namespaces.extend(filter.namespace.clone());
    let mut cluster_names: BTreeSet<String> = clusters.iter().cloned().collect();
    cluster_names.extend(jobs.iter().filter_map(|j| j.cluster.clone()));
    cluster_names.extend(filter.cluster.clone());
    let phases = ALL_PHASES
        .into_iter()
        .map(|p| (p, jobs.iter().filter(|j| j.phase == p).count()))
        .filter(|(_, n)| *n > 0)
        .collect();
    JobsView {
        filter: filter.clone(),
        rows,
        matching: matching.len(),
        total: jobs.len(),
        namespaces: namespaces.into_iter().collect(),
        clusters: cluster_names.into_iter().collect(),
        phases,
    }
}

// ------------------------------------------------------------------------------- one Job

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionRow {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    pub age: String,
}

fn condition_rows(cs: &[ConditionSnapshot], now: Timestamp) -> Vec<ConditionRow> {
    cs.iter()
        .map(|c| ConditionRow {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            age: age(now, c.last_transition_time.as_deref()),
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MirrorRow {
    pub cluster: String,
    pub current: bool,
    pub observation: String,
    pub conditions: Vec<ConditionRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRow {
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub note: String,
    pub count: u32,
    /// Since the latest occurrence.
    pub age: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub namespace: String,
    pub name: String,
    pub phase: JobPhase,
    pub age: String,
    pub created: Option<String>,
    pub succeeded: i32,
    pub failed: i32,
    pub active: i32,
    pub completions: Option<i32>,
    /// Where it runs (the placement intent), its epoch and re-dispatches.
    pub cluster: Option<String>,
    pub epoch: Option<u64>,
    pub redispatches: u32,
    /// The placed cluster's state as this replica sees it (`Ready (Connected)`, `Not Ready
    /// (Unreachable): ...`, or that it is not registered).
    pub cluster_state: Option<String>,
    /// The cluster selector, or `any worker cluster`.
    pub selector: String,
    /// Why it is where it is: what Courier waits for and what it would do next.
    pub waiting: Option<String>,
    pub plan: Vec<String>,
    pub conditions: Vec<ConditionRow>,
    pub mirrors: Vec<MirrorRow>,
    /// Newest first.
    pub events: Vec<EventRow>,
}

pub fn job_view(e: &Explanation, clusters: &[ClusterSnapshot], now: Timestamp) -> JobView {
    let j = &e.job;
    let cluster_state =
        j.cluster
            .as_ref()
            .map(|name| match clusters.iter().find(|c| &c.name == name) {
                Some(c) if c.ready => format!("Ready ({})", c.reason),
                Some(c) => {
                    let state = readiness(c.ready, &c.reason);
                    if c.message.is_empty() {
                        format!("{state} ({})", c.reason)
                    } else {
                        format!("{state} ({}): {}", c.reason, c.message)
                    }
                }
                None => "not registered: Courier cannot reach this cluster".into(),
            });
    let mut mirrors: Vec<MirrorRow> = e
        .mirrors
        .iter()
        .map(|m| MirrorRow {
            cluster: m.cluster.clone(),
            current: m.current,
            observation: m.observation.clone(),
            conditions: condition_rows(&m.conditions, now),
        })
        .collect();
    // The current mirror first, then by cluster name.
    mirrors.sort_by(|a, b| b.current.cmp(&a.current).then(a.cluster.cmp(&b.cluster)));
    JobView {
        namespace: j.namespace.clone(),
        name: j.name.clone(),
        phase: j.phase,
        age: age(now, j.created.as_deref()),
        created: j.created.clone(),
        succeeded: j.succeeded,
        failed: j.failed,
        active: j.active,
        completions: j.completions,
        cluster: j.cluster.clone(),
        epoch: j.epoch,
        redispatches: j.redispatches,
        cluster_state,
        selector: j
            .cluster_selector
            .clone()
            .unwrap_or_else(|| "any worker cluster".into()),
        waiting: e.waiting.clone().or_else(|| j.waiting.clone()),
        plan: e.plan.clone(),
        conditions: condition_rows(&j.conditions, now),
        mirrors,
        events: e
            .events
            .iter()
            .rev()
            .map(|ev| EventRow {
                type_: ev.type_.clone(),
                reason: ev.reason.clone(),
                note: ev.note.clone(),
                count: ev.count,
                age: age(now, Some(&ev.last)),
            })
            .collect(),
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
