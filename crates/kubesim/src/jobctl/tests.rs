//! Behaviour tests of the Job controller model on a virtual clock (no sleeping).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::clock::{scaled, shift};
use super::pods::{Outcome, PlanEntry, parse_entry};
use super::policy::{BackoffParams, BackoffRecord, remaining};
use super::traces::{run as replay, scenarios};
use super::*;

mod failures;
mod lifecycle;
mod plans;

fn t0() -> Timestamp {
    // Half a second past a second boundary: truncation effects are visible but not at the edge.
    "2030-01-01T00:00:00.5Z".parse().unwrap()
}

fn at(secs: f64) -> Timestamp {
    shift(t0(), scaled(secs, 1.0))
}

fn secs(t: Timestamp) -> f64 {
    (t.as_nanosecond() - t0().as_nanosecond()) as f64 / 1e9
}

/// A Job as the API server stores it (defaults applied), with `spec` fields and template annotations.
fn job(spec: Value, annotations: Value) -> Value {
    let mut j = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job", "namespace": "default", "uid": "7d5d2c1e-0000-4000-8000-000000000001", "generation": 1},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 6,
            "completionMode": "NonIndexed",
            "suspend": false,
            "podReplacementPolicy": "TerminatingOrFailed",
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
                         "containers": [{"name": "c", "image": "busybox"}]}
            }
        }
    });
    for (k, v) in spec.as_object().unwrap() {
        j["spec"][k] = v.clone();
    }
    j
}

/// Drives a `JobSim` like a host backed by an API server that enforces `ready <= active`.
struct Host {
    sim: JobSim,
    job: Value,
    writes: Vec<(f64, Value)>,
    status: Value,
    now: f64,
}

impl Host {
    fn new(job: Value, cfg: &SimConfig) -> Self {
        Self {
            sim: JobSim::new(&job, t0(), cfg),
            job,
            writes: Vec::new(),
            status: json!({}),
            now: 0.0,
        }
    }

    fn run_until(&mut self, until: f64) {
        while let Some(w) = self.sim.next_wakeup().filter(|w| secs(*w) <= until) {
            self.step(secs(w));
        }
        self.step(until);
    }

    fn step(&mut self, t: f64) {
        self.now = self.now.max(t);
        while let Some(w) = self.sim.advance(at(self.now)) {
            let n = |k: &str| w.status[k].as_i64().unwrap_or(0);
            if n("ready") > n("active") {
                self.sim.write_rejected();
            } else {
                self.status = w.status.clone();
                self.job["status"] = w.status.clone();
                self.writes.push((secs(w.at), w.status));
            }
        }
    }

    fn patch(&mut self, t: f64, spec: Value) {
        self.run_until(t);
        for (k, v) in spec.as_object().unwrap() {
            self.job["spec"][k] = v.clone();
        }
        let g = self.job["metadata"]["generation"].as_i64().unwrap();
        self.job["metadata"]["generation"] = json!(g + 1);
        self.sim.observe(&self.job, at(t));
    }

    fn conditions(&self) -> Vec<(String, String, String)> {
        self.status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["type"].as_str().unwrap().to_owned(),
                    c["status"].as_str().unwrap().to_owned(),
                    c["reason"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    fn message(&self, kind: &str) -> String {
        self.status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .map(|c| c["message"].as_str().unwrap().to_owned())
            .unwrap_or_default()
    }

    /// Time of the first write satisfying `pred`.
    fn when(&self, pred: impl Fn(&Value) -> bool) -> Option<f64> {
        self.writes.iter().find(|(_, s)| pred(s)).map(|(t, _)| *t)
    }
}

fn n(s: &Value, k: &str) -> i64 {
    s[k].as_i64().unwrap_or(0)
}

fn has(s: &Value, kind: &str) -> bool {
    s["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

fn uncounted(s: &Value, k: &str) -> usize {
    s["uncountedTerminatedPods"][k]
        .as_array()
        .map_or(0, Vec::len)
}

#[test]
fn defaults_without_annotations_pending_half_second_run_two_succeed() {
    let mut h = Host::new(job(json!({}), json!({})), &SimConfig::default());
    h.run_until(1.0);
    let pod = &h.sim.pods()[0];
    assert_eq!((pod.phase, pod.ready), ("Running", true));
    h.run_until(20.0);
    assert!(has(&h.status, "Complete"));
    // Created at ~0.05, Running at ~0.6, Succeeded at ~2.6, counted by the sync 1 s later.
    let scm = h.when(|s| has(s, "SuccessCriteriaMet")).unwrap();
    assert!((scm - 3.6).abs() < 0.1, "{scm}");
    assert_eq!(h.sim.pods()[0].exit_code, Some(0));
}

#[test]
fn first_write_field_presence_and_conditions_shape() {
    let mut h = Host::new(
        job(json!({}), json!({"sim/run-seconds": "1"})),
        &SimConfig::default(),
    );
    h.run_until(0.2);
    let first = &h.writes[0].1;
    assert_eq!(first["active"], 1);
    assert_eq!(first["ready"], 0);
    assert_eq!(first["terminating"], 0);
    assert_eq!(first["uncountedTerminatedPods"], json!({}));
    assert!(first.get("succeeded").is_none() && first.get("failed").is_none());
    assert!(first.get("failedIndexes").is_none() && first.get("completedIndexes").is_none());
    // startTime is truncated to the second.
    assert_eq!(first["startTime"], "2030-01-01T00:00:00Z");
    h.run_until(10.0);
    let last = &h.status;
    assert!(last.get("active").is_none());
    for c in last["conditions"].as_array().unwrap() {
        assert_eq!(c["lastProbeTime"], c["lastTransitionTime"]);
    }
    assert_eq!(
        last["completionTime"],
        last["conditions"][1]["lastTransitionTime"]
    );
    assert_eq!(
        h.message("Complete"),
        "Reached expected number of succeeded pods"
    );
}

#[test]
fn pod_events_are_batched_one_second_and_spec_changes_are_immediate() {
    let mut h = Host::new(
        job(
            json!({"parallelism": 2, "completions": 2}),
            json!({"sim/run-seconds": "30"}),
        ),
        &SimConfig::default(),
    );
    h.run_until(5.0);
    let first = h.writes[0].0;
    assert!(first < 0.1, "creation synced at once: {first}");
    let ready = h.when(|s| n(s, "ready") == 2).unwrap();
    assert!(
        (ready - (first + 1.0)).abs() < 0.05,
        "ready reported with the 1 s batching: {ready}"
    );
    h.patch(5.0, json!({"parallelism": 1}));
    h.run_until(5.5);
    let scaled_down = h.when(|s| n(s, "terminating") == 1).unwrap();
    assert!(
        scaled_down - 5.0 < 0.1,
        "spec change acted on within 0.1 s: {scaled_down}"
    );
}

#[test]
fn nonindexed_counts_in_two_phases() {
    let mut h = Host::new(
        job(
            json!({"completions": 2, "parallelism": 2}),
            json!({"sim/run-seconds": "1"}),
        ),
        &SimConfig::default(),
    );
    h.run_until(10.0);
    let i = h
        .writes
        .iter()
        .position(|(_, s)| uncounted(s, "succeeded") == 2)
        .unwrap();
    let (t1, w1) = &h.writes[i];
    let (t2, w2) = &h.writes[i + 1];
    assert_eq!(n(w1, "succeeded"), 0, "UIDs first, counters unchanged");
    assert!(has(w1, "SuccessCriteriaMet") && !has(w1, "Complete"));
    assert_eq!(n(w2, "succeeded"), 2);
    assert_eq!(uncounted(w2, "succeeded"), 0);
    assert!(has(w2, "Complete"));
    assert!((t2 - t1 - 0.02).abs() < 1e-6, "second write 20 ms later");
    let uids: Vec<&str> = w1["uncountedTerminatedPods"]["succeeded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    for u in &uids {
        assert!(uuid::Uuid::parse_str(u).is_ok(), "{u} is UUID-shaped");
    }
    assert_ne!(uids[0], uids[1]);
}

#[test]
fn pod_uids_are_deterministic() {
    let run = || {
        let mut h = Host::new(
            job(json!({"completions": 3, "parallelism": 3}), json!({})),
            &SimConfig::default(),
        );
        h.run_until(1.0);
        h.sim
            .pods()
            .into_iter()
            .map(|p| (p.uid, p.name))
            .collect::<Vec<_>>()
    };
    let a = run();
    assert_eq!(a, run());
    assert!(
        a.iter()
            .all(|(_, name)| name.starts_with("job-") && name.len() == 9)
    );
}

#[test]
fn indexed_moves_completed_indexes_and_succeeded_together_and_fails_through_uncounted() {
    let spec =
        json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimit": 0});
    let mut h = Host::new(
        job(
            spec,
            json!({"sim/plan": r#"{"i0": "succeed@1", "i2": "fail:3@2"}"#, "sim/outcome": "hang"}),
        ),
        &SimConfig::default(),
    );
    h.run_until(20.0);
    let ci = h
        .writes
        .iter()
        .find(|(_, s)| s["completedIndexes"] == "0")
        .unwrap();
    assert_eq!(n(&ci.1, "succeeded"), 1);
    assert_eq!(
        uncounted(&ci.1, "succeeded"),
        0,
        "Indexed Jobs never list succeeded UIDs"
    );
    let ft = h
        .writes
        .iter()
        .find(|(_, s)| has(s, "FailureTarget"))
        .unwrap();
    // The failed pod and the hanging one (index 1, being deleted) count as failed.
    assert_eq!(uncounted(&ft.1, "failed"), 2);
    assert_eq!(n(&ft.1, "terminating"), 1);
    assert_eq!(ft.1["conditions"][0]["reason"], "BackoffLimitExceeded");
    assert!(
        ft.1.get("failedIndexes").is_none(),
        "failedIndexes only with backoffLimitPerIndex"
    );
    assert!(has(&h.status, "Failed"));
    assert_eq!(n(&h.status, "failed"), 2);
}

#[test]
fn completed_indexes_use_the_controllers_format() {
    let spec = json!({"completionMode": "Indexed", "completions": 4, "parallelism": 4});
    let plan = r#"{"i0": "succeed@1", "i1": "succeed@1", "i2": "succeed@1", "i3": "succeed@3"}"#;
    let mut h = Host::new(job(spec, json!({"sim/plan": plan})), &SimConfig::default());
    h.run_until(20.0);
    let seen: Vec<&str> = h
        .writes
        .iter()
        .filter_map(|(_, s)| s["completedIndexes"].as_str())
        .collect();
    assert!(seen.contains(&"0-2") && seen.contains(&"0-3"), "{seen:?}");
}
