//! Job simulator tests of a Job's life: suspend, scale-down, success policies, deadlines,
//! managedBy, TTL, deletion and rejected writes.

use super::*;

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
