//! Behaviour tests of the Job controller model on a virtual clock (no sleeping).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::clock::{scaled, shift};
use super::pods::{Outcome, PlanEntry, parse_entry};
use super::policy::{BackoffParams, BackoffRecord, remaining};
use super::traces::{run as replay, scenarios};
use super::*;

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

#[test]
fn suspend_and_resume_move_start_time_and_never_count_deleted_pods() {
    let mut h = Host::new(
        job(
            json!({"suspend": true, "parallelism": 2, "completions": 2}),
            json!({"sim/run-seconds": "4"}),
        ),
        &SimConfig::default(),
    );
    h.run_until(2.0);
    assert_eq!(
        h.conditions(),
        vec![("Suspended".into(), "True".into(), "JobSuspended".into())]
    );
    assert!(h.status.get("startTime").is_none());
    assert!(h.sim.pods().is_empty());
    h.patch(2.0, json!({"suspend": false}));
    h.run_until(4.0);
    assert_eq!(
        h.conditions(),
        vec![("Suspended".into(), "False".into(), "JobResumed".into())]
    );
    assert_eq!(h.status["startTime"], "2030-01-01T00:00:02Z");
    assert_eq!(h.message("Suspended"), "Job resumed");
    h.patch(4.0, json!({"suspend": true}));
    h.run_until(4.2);
    assert!(
        h.status.get("startTime").is_none(),
        "startTime removed on suspend"
    );
    assert_eq!(
        (n(&h.status, "active"), n(&h.status, "terminating")),
        (0, 2)
    );
    h.run_until(8.0);
    assert_eq!(n(&h.status, "terminating"), 0);
    assert!(h.sim.pods().is_empty(), "suspended pods are gone");
    h.patch(8.0, json!({"suspend": false}));
    h.run_until(30.0);
    assert!(has(&h.status, "Complete"));
    assert_eq!((n(&h.status, "succeeded"), n(&h.status, "failed")), (2, 0));
    assert_eq!(
        h.status["startTime"], "2030-01-01T00:00:08Z",
        "fresh startTime on the second resume"
    );
}

#[test]
fn scale_down_deletes_without_counting() {
    let mut h = Host::new(
        job(
            json!({"parallelism": 3, "completions": 3}),
            json!({"sim/run-seconds": "4"}),
        ),
        &SimConfig::default(),
    );
    h.patch(1.5, json!({"parallelism": 1}));
    h.run_until(1.7);
    assert_eq!(
        (
            n(&h.status, "active"),
            n(&h.status, "ready"),
            n(&h.status, "terminating")
        ),
        (1, 1, 2)
    );
    h.run_until(40.0);
    assert!(has(&h.status, "Complete"));
    assert_eq!((n(&h.status, "succeeded"), n(&h.status, "failed")), (3, 0));
    assert_eq!(h.sim.next_ordinal, 5);
}

#[test]
fn success_policy_rules_in_order_and_cut_off_pods_not_counted() {
    let spec = json!({"completionMode": "Indexed", "completions": 4, "parallelism": 4,
        "successPolicy": {"rules": [{"succeededIndexes": "3"}, {"succeededIndexes": "0-2", "succeededCount": 2}]}});
    let plan = r#"{"i0": "succeed@1", "i2": "succeed@2"}"#;
    let mut h = Host::new(
        job(spec, json!({"sim/plan": plan, "sim/outcome": "hang"})),
        &SimConfig::default(),
    );
    h.run_until(20.0);
    let scm = h
        .writes
        .iter()
        .find(|(_, s)| has(s, "SuccessCriteriaMet"))
        .unwrap();
    assert_eq!(scm.1["completedIndexes"], "0,2");
    assert_eq!((n(&scm.1, "active"), n(&scm.1, "terminating")), (0, 2));
    assert_eq!(h.message("SuccessCriteriaMet"), "Matched rules at index 1");
    assert_eq!(h.message("Complete"), "Matched rules at index 1");
    assert!(has(&h.status, "Complete"));
    assert_eq!((n(&h.status, "succeeded"), n(&h.status, "failed")), (2, 0));
    // Complete only once the cut-off pods stopped (term 1.5 s), with its own time.
    let complete = h.when(|s| has(s, "Complete")).unwrap();
    assert!(complete - scm.0 > 1.5);
}

#[test]
fn completions_unset_completes_when_one_succeeds_and_the_rest_finish() {
    let spec = json!({"completions": null, "parallelism": 2});
    let mut h = Host::new(
        job(
            spec,
            json!({"sim/plan": r#"{"n0": "succeed@1", "n1": "succeed@3"}"#}),
        ),
        &SimConfig::default(),
    );
    h.run_until(3.0);
    assert!(
        !has(&h.status, "SuccessCriteriaMet"),
        "waits for the other pod"
    );
    h.run_until(10.0);
    assert!(has(&h.status, "Complete"));
    assert_eq!(n(&h.status, "succeeded"), 2);
    assert_eq!(h.sim.next_ordinal, 2, "no replacement after a success");
}

#[test]
fn failure_backoff_doubles_from_ten_seconds_and_success_resets_it() {
    let p = BackoffParams {
        base: 10.0,
        max: 600.0,
        speed: 1.0,
    };
    let now = at(0.0);
    let waits: Vec<f64> = (1..=8)
        .map(|f| remaining(p, f, Some(now), now) as f64 / 1e9)
        .collect();
    assert_eq!(
        waits,
        vec![10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 600.0, 600.0]
    );
    assert_eq!(remaining(p, 1, Some(now), at(4.0)), scaled(6.0, 1.0));
    assert_eq!(remaining(p, 1, Some(now), at(11.0)), 0);
    let r = BackoffRecord::default().next(&[], &[at(1.0), at(2.0)]);
    assert_eq!(
        (r.failures_after_last_success, r.last_failure),
        (2, Some(at(2.0)))
    );
    let r = r.next(&[at(3.0)], &[at(2.5), at(4.0)]);
    assert_eq!(
        (r.failures_after_last_success, r.last_failure),
        (1, Some(at(4.0))),
        "only failures after the success"
    );
    assert_eq!(r.next(&[at(5.0)], &[]), BackoffRecord::default());

    // In a Job: replacements come 10 s, then 20 s after the failures (second resolution).
    let mut h = Host::new(
        job(
            json!({"backoffLimit": 3}),
            json!({"sim/outcome": "fail:1", "sim/run-seconds": "1"}),
        ),
        &SimConfig::default(),
    );
    h.run_until(120.0);
    let created: Vec<f64> = h
        .writes
        .iter()
        .filter(|(_, s)| n(s, "active") == 1 && n(s, "ready") == 0)
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(created.len(), 4, "{created:?}");
    let gap1 = created[1] - created[0];
    let gap2 = created[2] - created[1];
    let gap3 = created[3] - created[2];
    assert!(
        (10.0..=11.7).contains(&gap1)
            && (20.0..=21.7).contains(&gap2)
            && (40.0..=41.7).contains(&gap3),
        "{created:?}"
    );
    assert_eq!(h.status["conditions"][0]["reason"], "BackoffLimitExceeded");
    assert_eq!(
        h.message("Failed"),
        "Job has reached the specified backoff limit"
    );
}

#[test]
fn success_resets_backoff_so_the_replacement_comes_at_once() {
    // Trace 14's shape with the pods swapped in time: p1 fails, p2 succeeds 0.5 s later.
    let plan = r#"{"n0": "fail:1@1", "n1": "succeed@1.5", "n2": "succeed@1"}"#;
    let mut h = Host::new(
        job(
            json!({"completions": 2, "parallelism": 2}),
            json!({"sim/plan": plan}),
        ),
        &SimConfig::default(),
    );
    h.run_until(30.0);
    assert!(has(&h.status, "Complete"));
    let third = h.sim.pods().into_iter().find(|p| p.ordinal == 2).unwrap();
    assert_eq!(third.phase, "Succeeded");
    let done = h.when(|s| has(s, "Complete")).unwrap();
    assert!(done < 8.0, "no 10 s backoff after a success: {done}");
}

#[test]
fn per_index_backoff_and_fail_index_policy() {
    let spec = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 2,
        "backoffLimit": 2147483647,
        "podFailurePolicy": {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [7]}}]}});
    let plan = r#"{"i1": "fail:7@1"}"#;
    let mut h = Host::new(
        job(spec, json!({"sim/plan": plan, "sim/run-seconds": "2"})),
        &SimConfig::default(),
    );
    h.run_until(0.2);
    assert_eq!(
        h.status["failedIndexes"], "",
        "failedIndexes present and empty from the first write"
    );
    h.run_until(30.0);
    // FailIndex marks the index failed at once (no retry within the per-index limit).
    assert_eq!(h.sim.next_ordinal, 3);
    assert_eq!(h.status["failedIndexes"], "1");
    assert_eq!(h.status["completedIndexes"], "0,2");
    assert_eq!(h.status["conditions"][1]["reason"], "FailedIndexes");
    assert_eq!(h.message("Failed"), "Job has failed indexes");
}

#[test]
fn per_index_retries_carry_the_failure_count_and_max_failed_indexes_fails_the_job() {
    let spec = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 1,
        "maxFailedIndexes": 0, "backoffLimit": 2147483647});
    let mut h = Host::new(
        job(
            spec,
            json!({"sim/plan": r#"{"i2": "fail:1@1"}"#, "sim/outcome": "hang"}),
        ),
        &SimConfig::default(),
    );
    h.run_until(60.0);
    let pods = h.sim.pods();
    assert_eq!(h.sim.next_ordinal, 4, "index 2 retried once");
    assert!(pods.iter().all(|p| p.index.is_some()));
    assert!(pods.iter().any(|p| p.name.starts_with("job-2-")));
    assert_eq!(h.status["failedIndexes"], "2");
    assert_eq!(
        h.status["conditions"][0]["reason"],
        "MaxFailedIndexesExceeded"
    );
    // Both attempts of index 2 and the two hanging indexes count as failed.
    assert_eq!(n(&h.status, "failed"), 4);
}

#[test]
fn active_deadline_counts_from_the_truncated_start_time_and_follows_updates() {
    let mut h = Host::new(
        job(
            json!({"parallelism": 2, "completions": 2, "activeDeadlineSeconds": 5}),
            json!({"sim/outcome": "hang"}),
        ),
        &SimConfig::default(),
    );
    h.run_until(20.0);
    let ft = h.when(|s| has(s, "FailureTarget")).unwrap();
    // startTime is 00:00:00 (created at .5): the deadline fires 4.5 s after creation.
    assert!((ft - 4.5).abs() < 0.01, "{ft}");
    assert_eq!(
        h.message("FailureTarget"),
        "Job was active longer than specified deadline"
    );
    assert_eq!(n(&h.status, "failed"), 2);

    let mut h = Host::new(
        job(
            json!({"activeDeadlineSeconds": 100}),
            json!({"sim/outcome": "hang"}),
        ),
        &SimConfig::default(),
    );
    h.patch(2.0, json!({"activeDeadlineSeconds": 3}));
    h.run_until(10.0);
    let ft = h.when(|s| has(s, "FailureTarget")).unwrap();
    assert!((ft - 2.5).abs() < 0.01, "{ft}");
}

#[test]
fn pod_failure_policy_fail_job_message_names_container_and_pod() {
    let spec = json!({"completions": 2, "parallelism": 2, "podReplacementPolicy": "Failed",
        "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In", "values": [42]}}]}});
    let mut h = Host::new(
        job(
            spec,
            json!({"sim/plan": r#"{"n0": "fail:42@2"}"#, "sim/outcome": "hang"}),
        ),
        &SimConfig::default(),
    );
    h.run_until(20.0);
    let name = h
        .sim
        .pods()
        .into_iter()
        .find(|p| p.ordinal == 0)
        .unwrap()
        .name;
    assert_eq!(
        h.message("Failed"),
        format!(
            "Container c for pod default/{name} failed with exit code 42 matching FailJob rule at index 0"
        )
    );
    assert_eq!(n(&h.status, "failed"), 2);
}

#[test]
fn pod_failure_policy_ignore_and_count() {
    let spec = json!({"backoffLimit": 0, "podReplacementPolicy": "Failed",
        "podFailurePolicy": {"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [5]}},
                                        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [5]}}]}});
    // Ignored failure: not counted, the pod is replaced (after the backoff, which still applies).
    let mut h = Host::new(
        job(
            spec.clone(),
            json!({"sim/plan": r#"{"n0": "fail:5@1"}"#, "sim/run-seconds": "1"}),
        ),
        &SimConfig::default(),
    );
    h.run_until(30.0);
    assert!(has(&h.status, "Complete"));
    assert_eq!((n(&h.status, "failed"), n(&h.status, "succeeded")), (0, 1));
    assert_eq!(h.sim.next_ordinal, 2);
    // Counted failure with backoffLimit 0 fails the Job.
    let mut h = Host::new(
        job(spec, json!({"sim/plan": r#"{"n0": "fail:6@1"}"#})),
        &SimConfig::default(),
    );
    h.run_until(30.0);
    assert_eq!(h.status["conditions"][0]["reason"], "BackoffLimitExceeded");
    assert_eq!(n(&h.status, "failed"), 1);
}

#[test]
fn pod_failure_policy_on_pod_conditions_sees_evictions() {
    let spec = json!({"podReplacementPolicy": "Failed",
        "podFailurePolicy": {"rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}});
    let mut h = Host::new(
        job(spec, json!({"sim/outcome": "evict@1"})),
        &SimConfig::default(),
    );
    h.run_until(2.0);
    let pod = h.sim.pods()[0].clone();
    assert_eq!(
        (pod.phase, pod.deleting, pod.tracking_finalizer),
        ("Running", true, true)
    );
    // Evicted at ~1.55, stopped 1.5 s later; with podReplacementPolicy Failed it is judged once Failed.
    h.run_until(3.5);
    let pod = h.sim.pods()[0].clone();
    assert_eq!((pod.phase, pod.exit_code), ("Failed", Some(EXIT_SIGTERM)));
    h.run_until(5.0);
    assert_eq!(
        h.message("FailureTarget"),
        format!(
            "Pod default/{} has condition DisruptionTarget matching FailJob rule at index 0",
            pod.name
        )
    );
    h.run_until(10.0);
    assert!(has(&h.status, "Failed"));
}

#[test]
fn termination_grace_period_caps_term_seconds() {
    // Evicted at ~1.55; SIGKILL at the 2 s grace period instead of the 9 s the workload would take.
    let mut j = job(
        json!({"podReplacementPolicy": "Failed"}),
        json!({"sim/outcome": "evict@1", "sim/term-seconds": "9"}),
    );
    j["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(2);
    let mut h = Host::new(j, &SimConfig::default());
    h.run_until(3.5);
    assert_eq!(h.sim.pods()[0].phase, "Running");
    h.run_until(4.0);
    let pod = h.sim.pods()[0].clone();
    assert_eq!((pod.phase, pod.exit_code), ("Failed", Some(EXIT_SIGKILL)));
}

#[test]
fn restart_policy_on_failure_counts_restarts_against_backoff_limit() {
    let mut j = job(
        json!({"backoffLimit": 2}),
        json!({"sim/outcome": "fail:1", "sim/run-seconds": "1"}),
    );
    j["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    let mut h = Host::new(j, &SimConfig::default());
    h.run_until(60.0);
    assert_eq!(h.sim.next_ordinal, 1, "restarted in place, never replaced");
    assert_eq!(h.status["conditions"][0]["reason"], "BackoffLimitExceeded");
    // Crash-loop: first failure ~1.6, restart 10 s later, second failure ~12.6 -> limit 2 reached.
    let ft = h.when(|s| has(s, "FailureTarget")).unwrap();
    assert!((12.0..15.0).contains(&ft), "{ft}");
}

#[test]
fn managed_elsewhere_jobs_get_no_writes_and_no_pods() {
    let mut j = job(json!({}), json!({}));
    j["spec"]["managedBy"] = json!("courier.dev/dispatcher");
    assert!(JobSim::is_managed_elsewhere(&j));
    let mut h = Host::new(j.clone(), &SimConfig::default());
    assert_eq!(h.sim.next_wakeup(), None);
    h.patch(1.0, json!({"suspend": true}));
    h.run_until(30.0);
    assert!(h.writes.is_empty() && h.sim.pods().is_empty());
    j["spec"]["managedBy"] = json!(BUILTIN_MANAGER);
    assert!(!is_managed_elsewhere(&j));
}

#[test]
fn ttl_expiry_is_terminal_transition_plus_ttl() {
    let mut h = Host::new(
        job(
            json!({"ttlSecondsAfterFinished": 3}),
            json!({"sim/run-seconds": "1"}),
        ),
        &SimConfig::default(),
    );
    assert_eq!(
        ttl_expiry(&h.job, &SimConfig::default()),
        None,
        "not finished"
    );
    h.run_until(10.0);
    let ltt: Timestamp = h.status["conditions"][1]["lastTransitionTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        ttl_expiry(&h.job, &SimConfig::default()),
        Some(shift(ltt, scaled(3.0, 1.0)))
    );
    assert_eq!(
        ttl_expiry(&h.job, &SimConfig::with_speed(10.0)),
        Some(shift(ltt, scaled(0.3, 1.0)))
    );
    let mut deleting = h.job.clone();
    deleting["metadata"]["deletionTimestamp"] = json!("2030-01-01T00:00:09Z");
    assert_eq!(ttl_expiry(&deleting, &SimConfig::default()), None);
    let mut no_ttl = h.job.clone();
    no_ttl["spec"]
        .as_object_mut()
        .unwrap()
        .remove("ttlSecondsAfterFinished");
    assert_eq!(ttl_expiry(&no_ttl, &SimConfig::default()), None);
    assert_eq!(TTL_PROPAGATION, "Foreground");
}

#[test]
fn deleting_a_running_job_deletes_its_pods_until_none_is_left() {
    let mut h = Host::new(
        job(
            json!({"parallelism": 2, "completions": 2}),
            json!({"sim/outcome": "hang"}),
        ),
        &SimConfig::default(),
    );
    h.run_until(2.0);
    assert!(!h.sim.dependents_gone());
    let mut j = h.job.clone();
    j["metadata"]["deletionTimestamp"] = json!("2030-01-01T00:00:02Z");
    j["metadata"]["generation"] = json!(2);
    h.sim.observe(&j, at(2.0));
    h.run_until(10.0);
    assert!(h.sim.dependents_gone());
    assert_eq!(h.sim.next_wakeup(), None, "nothing left to do");
}

#[test]
fn a_rejected_write_is_retried_with_the_rate_limit_and_the_view_kept() {
    let mut sim = JobSim::new(&job(json!({}), json!({})), t0(), &SimConfig::default());
    let w = sim.advance(at(1.0)).unwrap();
    assert_eq!(w.status["active"], 1);
    sim.write_rejected();
    assert_eq!(
        sim.status(),
        json!({}),
        "the controller keeps its previous view"
    );
    assert!(
        sim.next_wakeup()
            .is_some_and(|n| n <= shift(w.at, scaled(1.0, 1.0)))
    );
    let retry = sim.advance(at(5.0)).unwrap();
    assert!((secs(retry.at) - secs(w.at) - 1.0).abs() < 1e-6);
    assert_eq!(
        retry.status["active"], 1,
        "the pod created by the failed sync is still counted"
    );
    sim.write_rejected();
    let again = sim.advance(at(10.0)).unwrap();
    assert!(
        (secs(again.at) - secs(retry.at) - 2.0).abs() < 1e-6,
        "doubling rate limit"
    );
    assert_eq!(sim.rejected_writes(), 2);
    assert_eq!(sim.next_ordinal, 1, "no duplicate pod");
}

#[test]
fn plan_and_outcome_grammar() {
    assert_eq!(
        parse_entry("succeed@2"),
        Some(PlanEntry {
            outcome: Outcome::Succeed,
            at: Some(2.0)
        })
    );
    assert_eq!(
        parse_entry("fail:42@1.5"),
        Some(PlanEntry {
            outcome: Outcome::Fail(42),
            at: Some(1.5)
        })
    );
    assert_eq!(
        parse_entry("fail:1"),
        Some(PlanEntry {
            outcome: Outcome::Fail(1),
            at: None
        })
    );
    assert_eq!(
        parse_entry("fail"),
        Some(PlanEntry {
            outcome: Outcome::Fail(1),
            at: None
        })
    );
    assert_eq!(
        parse_entry("hang"),
        Some(PlanEntry {
            outcome: Outcome::Hang,
            at: None
        })
    );
    assert_eq!(
        parse_entry("evict@3"),
        Some(PlanEntry {
            outcome: Outcome::Evict,
            at: Some(3.0)
        })
    );
    for bad in ["", "explode", "fail:x", "succeed@-1", "succeed@soon"] {
        assert_eq!(parse_entry(bad), None, "{bad}");
    }
    // Malformed annotations fall back to the defaults.
    let b = super::pods::Behaviour::from_annotations(
        Some(&json!({"sim/run-seconds": "abc", "sim/plan": "{not json"})),
        None,
    );
    assert_eq!(
        (b.run, b.outcome.outcome, b.plan.len()),
        (DEFAULT_RUN_SECONDS, Outcome::Succeed, 0)
    );
    let b = super::pods::Behaviour::from_annotations(
        Some(&json!({"sim/plan": r#"{"i1": "hang", "n1": "fail:2"}"#})),
        None,
    );
    assert_eq!(b.resolve(Some(1), 1).0, Outcome::Hang, "index key wins");
    assert_eq!(b.resolve(Some(0), 1).0, Outcome::Fail(2));
    assert_eq!(b.resolve(None, 0), (Outcome::Succeed, DEFAULT_RUN_SECONDS));
}

#[test]
fn speed_scales_every_duration() {
    for name in [
        "02-nonindexed-backoff-limit",
        "06-suspend-resume",
        "07-active-deadline",
    ] {
        let sc = scenarios().into_iter().find(|s| s.name == name).unwrap();
        // Phase 0.5 keeps second boundaries away from every event at both speeds.
        let slow = replay(&sc, 0.5, &SimConfig::default());
        let fast_sc = super::traces::Scenario {
            name: sc.name.clone(),
            inputs: {
                let mut i = sc.inputs.clone();
                for a in i["actions"].as_array_mut().unwrap() {
                    a["t"] = json!(a["t"].as_f64().unwrap() / 10.0);
                }
                i
            },
            events: {
                let mut e = sc.events.clone();
                for ev in &mut e {
                    ev["t"] = json!(ev["t"].as_f64().unwrap() / 10.0);
                }
                e
            },
        };
        let fast = replay(&fast_sc, 0.05, &SimConfig::with_speed(10.0));
        assert_eq!(slow.states.len(), fast.states.len(), "{name}");
        for (a, b) in slow.states.iter().zip(&fast.states) {
            assert_eq!(a.state, b.state, "{name}");
            assert!(
                (a.t / 10.0 - b.t).abs() < 0.002,
                "{name}: {} vs {}",
                a.t,
                b.t
            );
        }
    }
    // Degenerate speeds fall back to real time.
    assert_eq!(SimConfig::with_speed(0.0).normalized().speed, 1.0);
    assert_eq!(SimConfig::with_speed(f64::NAN).normalized().speed, 1.0);
}

#[test]
fn fixed_139428_shows_the_intermediate_states_the_recording_lacks() {
    let sc = scenarios()
        .into_iter()
        .find(|s| s.name.starts_with("14-"))
        .unwrap();
    let cfg = SimConfig {
        issue_139428: false,
        ..SimConfig::default()
    };
    let r = replay(&sc, 0.5, &cfg);
    assert_eq!(r.rejected, 0);
    // testdata/README.md, job traces point 7: with the fix, act=1 rdy=1 unc.f=[p1], then fail=1 at ~2.6 s.
    let i = r
        .states
        .iter()
        .position(|s| {
            s.state["active"] == 1
                && s.state["ready"] == 1
                && s.state["uncountedTerminatedPods"] == json!({"failed": 1})
        })
        .expect("act=1 rdy=1 unc.f=[p1]");
    assert!(r.states[i].t < 3.1, "{}", r.states[i].t);
    assert_eq!(r.states[i + 1].state["failed"], 1);
    assert!(has(&r.states.last().unwrap().raw, "Complete"));

    let sc = scenarios()
        .into_iter()
        .find(|s| s.name.starts_with("05b-"))
        .unwrap();
    let r = replay(&sc, 0.44, &cfg);
    assert_eq!(r.rejected, 0);
    let actives: Vec<(i64, i64)> = r
        .states
        .iter()
        .map(|s| (n(&s.state, "active"), n(&s.state, "ready")))
        .collect();
    assert!(
        actives.contains(&(3, 3)) && actives.contains(&(2, 2)),
        "{actives:?}"
    );
}

#[test]
fn large_jobs_respect_the_per_sync_caps_and_stay_fast() {
    let spec = json!({"completions": 1200, "parallelism": 1200});
    let mut h = Host::new(
        job(spec, json!({"sim/run-seconds": "1"})),
        &SimConfig::default(),
    );
    h.run_until(120.0);
    assert!(has(&h.status, "Complete"));
    assert_eq!(n(&h.status, "succeeded"), 1200);
    assert_eq!(h.sim.next_ordinal, 1200);
    assert_eq!(
        n(&h.writes[0].1, "active"),
        500,
        "MaxPodCreateDeletePerSync"
    );
    assert!(
        h.writes
            .iter()
            .all(|(_, s)| uncounted(s, "succeeded") <= 500),
        "MaxUncountedPods"
    );
}
