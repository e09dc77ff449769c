//! Job simulator tests of failures: pod backoff, per-index backoff, pod failure policies,
//! restart policy and grace periods.

use super::*;

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
