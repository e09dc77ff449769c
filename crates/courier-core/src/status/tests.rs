use super::*;
use crate::ownership::Intent;
use serde_json::json;

fn status(v: serde_json::Value) -> JobStatus {
    serde_json::from_value(v).expect("status json")
}

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

const NOW: &str = "2026-05-01T10:00:00.750Z";

fn plain() -> JobSpecEssentials {
    JobSpecEssentials {
        completions: Some(3),
        parallelism: Some(2),
        ..Default::default()
    }
}

fn at(cluster: &str, epoch: u64) -> Intent {
    Intent {
        cluster: cluster.into(),
        epoch,
    }
}

fn translate(
    spec: &JobSpecEssentials,
    old: &JobStatus,
    mirror: Option<(&JobStatus, &Intent)>,
    redispatch_possible: bool,
) -> Option<JobStatus> {
    translate_status(&TranslateInput {
        origin_spec: spec,
        origin_status: old,
        mirror: mirror.map(|(status, placement)| MirrorReport { status, placement }),
        redispatch_possible,
        now: ts(NOW),
    })
}

fn types(s: &JobStatus) -> Vec<(String, String)> {
    s.conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone()))
        .collect()
}

fn cond<'a>(s: &'a JobStatus, t: &str) -> &'a JobCondition {
    find_condition(s, t).unwrap_or_else(|| panic!("no {t} condition in {s:?}"))
}

fn running(active: i32, ready: i32, succeeded: i32, failed: i32) -> JobStatus {
    status(json!({
        "startTime": "2026-05-01T09:00:00Z", "active": active, "ready": ready, "terminating": 0,
        "succeeded": succeeded, "failed": failed, "uncountedTerminatedPods": {}
    }))
}

#[test]
fn first_report_copies_progress_and_records_the_epoch() {
    let old = JobStatus::default();
    let m = running(2, 1, 0, 0);
    let new = translate(&plain(), &old, Some((&m, &at("eu", 1))), true).expect("changed");
    assert_eq!(new.active, Some(2));
    assert_eq!(new.ready, Some(1));
    assert_eq!(new.start_time, Some(Time(ts("2026-05-01T09:00:00Z"))));
    assert_eq!(
        cond(&new, "courier.dev/Dispatched").message.as_deref(),
        Some("dispatched to eu (epoch 1)")
    );
    // Stamped with whole seconds so a round trip through the API compares equal.
    assert_eq!(
        cond(&new, "courier.dev/Dispatched").last_transition_time,
        Some(Time(ts("2026-05-01T10:00:00Z")))
    );
    assert_eq!(new.uncounted_terminated_pods, None);
    // Same input again: nothing to write.
    assert_eq!(
        translate(&plain(), &new, Some((&m, &at("eu", 1))), true),
        None
    );
}

#[test]
fn uncounted_pods_are_never_copied() {
    let m = status(
        json!({"startTime": "2026-05-01T09:00:00Z", "active": 1, "ready": 0, "terminating": 0,
        "uncountedTerminatedPods": {"succeeded": ["pod-uid-1"]}}),
    );
    let new = translate(
        &plain(),
        &JobStatus::default(),
        Some((&m, &at("eu", 1))),
        true,
    )
    .expect("changed");
    assert_eq!(new.uncounted_terminated_pods, None);
    let old = status(json!({"uncountedTerminatedPods": {"failed": ["x"]}}));
    let new = translate(&plain(), &old, Some((&m, &at("eu", 1))), true).expect("changed");
    assert_eq!(new.uncounted_terminated_pods, None);
}

#[test]
fn counters_never_go_back_across_a_redispatch() {
    let old = translate(
        &plain(),
        &JobStatus::default(),
        Some((&running(1, 1, 2, 3), &at("eu", 1))),
        true,
    )
    .expect("epoch 1");
    let fresh = status(
        json!({"startTime": "2026-05-01T09:30:00Z", "active": 2, "ready": 0, "terminating": 0}),
    );
    let new = translate(&plain(), &old, Some((&fresh, &at("us", 2))), true).expect("epoch 2");
    assert_eq!((new.succeeded, new.failed), (Some(2), Some(3)));
    assert_eq!((new.active, new.ready), (Some(2), Some(0)));
    // The origin's startTime is kept as first set (the origin is unsuspended).
    assert_eq!(new.start_time, Some(Time(ts("2026-05-01T09:00:00Z"))));
    assert_eq!(
        cond(&new, "courier.dev/Dispatched").message.as_deref(),
        Some("dispatched to us (epoch 2)")
    );
    let later = translate(
        &plain(),
        &new,
        Some((&running(0, 0, 3, 1), &at("us", 2))),
        true,
    )
    .expect("more");
    assert_eq!((later.succeeded, later.failed), (Some(3), Some(3)));
}

#[test]
fn ready_never_exceeds_active_and_negatives_are_clamped() {
    let m = status(
        json!({"startTime": "2026-05-01T09:00:00Z", "active": 0, "ready": 2, "terminating": -1,
        "succeeded": -4}),
    );
    let new = translate(
        &plain(),
        &JobStatus::default(),
        Some((&m, &at("eu", 1))),
        true,
    )
    .expect("changed");
    assert_eq!(
        (new.active, new.ready, new.terminating, new.succeeded),
        (Some(0), Some(0), Some(0), Some(0))
    );
}

fn indexed(completions: i32, per_index: bool) -> JobSpecEssentials {
    JobSpecEssentials {
        completions: Some(completions),
        parallelism: Some(completions),
        indexed: true,
        backoff_limit_per_index: per_index.then_some(1),
        ..Default::default()
    }
}

#[test]
fn index_lists_move_as_a_pair_with_their_epoch() {
    let spec = indexed(4, true);
    let e1 = status(
        json!({"startTime": "2026-05-01T09:00:00Z", "active": 1, "ready": 1, "terminating": 0,
        "succeeded": 2, "failed": 2, "completedIndexes": "0,2", "failedIndexes": "1"}),
    );
    let old = translate(
        &spec,
        &JobStatus::default(),
        Some((&e1, &at("eu", 1))),
        true,
    )
    .expect("e1");
    assert_eq!(old.completed_indexes.as_deref(), Some("0,2"));
    assert_eq!(old.failed_indexes.as_deref(), Some("1"));
    // Epoch 2 has completed index 1 (failed in epoch 1) but has not caught up: keep epoch 1's pair.
    let e2 = status(
        json!({"startTime": "2026-05-01T09:30:00Z", "active": 3, "ready": 0, "terminating": 0,
        "succeeded": 1, "completedIndexes": "1", "failedIndexes": ""}),
    );
    let new = translate(&spec, &old, Some((&e2, &at("us", 2))), true).expect("e2");
    assert_eq!(new.completed_indexes.as_deref(), Some("0,2"));
    assert_eq!(new.failed_indexes.as_deref(), Some("1"));
    // Caught up on both counters: epoch 2's pair.
    let e2b = status(
        json!({"startTime": "2026-05-01T09:30:00Z", "active": 0, "ready": 0, "terminating": 0,
        "succeeded": 3, "failed": 2, "completedIndexes": "0-2", "failedIndexes": "3"}),
    );
    let new = translate(&spec, &new, Some((&e2b, &at("us", 2))), true).expect("caught up");
    assert_eq!(new.completed_indexes.as_deref(), Some("0-2"));
    assert_eq!(new.failed_indexes.as_deref(), Some("3"));
}

#[test]
fn index_lists_only_where_the_spec_allows_and_only_if_valid() {
    let m = status(
        json!({"startTime": "2026-05-01T09:00:00Z", "succeeded": 1, "completedIndexes": "0",
        "failedIndexes": "1"}),
    );
    let new = translate(
        &plain(),
        &JobStatus::default(),
        Some((&m, &at("eu", 1))),
        true,
    )
    .expect("changed");
    assert_eq!((new.completed_indexes, new.failed_indexes), (None, None));
    let new = translate(
        &indexed(2, false),
        &JobStatus::default(),
        Some((&m, &at("eu", 1))),
        true,
    )
    .expect("c");
    assert_eq!(
        (new.completed_indexes.as_deref(), new.failed_indexes),
        (Some("0"), None)
    );
    for bad in ["5", "1,1", "x", "2-1"] {
        let m = status(json!({"succeeded": 2, "completedIndexes": bad}));
        let old = status(json!({"succeeded": 1, "completedIndexes": "0"}));
        let new = translate(&indexed(3, false), &old, Some((&m, &at("eu", 1))), true).expect("c");
        assert_eq!(
            new.completed_indexes.as_deref(),
            Some("0"),
            "{bad:?} must not be copied"
        );
    }
    let overlapping =
        status(json!({"succeeded": 1, "failed": 1, "completedIndexes": "1", "failedIndexes": "1"}));
    let new = translate(
        &indexed(3, true),
        &JobStatus::default(),
        Some((&overlapping, &at("eu", 1))),
        true,
    )
    .expect("c");
    assert_eq!((new.completed_indexes, new.failed_indexes), (None, None));
}

fn scm_then_complete() -> (JobStatus, JobStatus) {
    let scm = status(json!({
        "startTime": "2026-05-01T09:00:00Z", "ready": 0, "terminating": 0, "succeeded": 2,
        "uncountedTerminatedPods": {"succeeded": ["p3"]},
        "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
            "message": "Reached expected number of succeeded pods",
            "lastProbeTime": "2026-05-01T09:05:00Z", "lastTransitionTime": "2026-05-01T09:05:00Z"}]
    }));
    let mut complete = scm.clone();
    complete.succeeded = Some(3);
    complete.uncounted_terminated_pods = Some(Default::default());
    complete.completion_time = Some(Time(ts("2026-05-01T09:05:00Z")));
    let mut c = cond(&scm, "SuccessCriteriaMet").clone();
    c.type_ = "Complete".into();
    complete.conditions.as_mut().expect("conditions").push(c);
    (scm, complete)
}

#[test]
fn interim_conditions_wait_for_the_terminal_one_while_a_redispatch_is_possible() {
    let (scm, complete) = scm_then_complete();
    let old = translate(
        &plain(),
        &JobStatus::default(),
        Some((&running(1, 1, 2, 0), &at("eu", 1))),
        true,
    )
    .expect("running");
    let new = translate(&plain(), &old, Some((&scm, &at("eu", 1))), true).expect("gauges change");
    assert!(find_condition(&new, "SuccessCriteriaMet").is_none());
    let done = translate(&plain(), &new, Some((&complete, &at("eu", 1))), true).expect("complete");
    assert_eq!(
        types(&done),
        vec![
            ("courier.dev/Dispatched".into(), "True".into()),
            ("SuccessCriteriaMet".into(), "True".into()),
            ("Complete".into(), "True".into())
        ]
    );
    assert_eq!(done.succeeded, Some(3));
    assert_eq!(done.completion_time, Some(Time(ts("2026-05-01T09:05:00Z"))));
    assert_eq!(
        (done.active, done.ready, done.terminating),
        (None, Some(0), Some(0))
    );
    // Terminal is final.
    assert_eq!(
        translate(
            &plain(),
            &done,
            Some((&running(2, 2, 0, 0), &at("us", 2))),
            true
        ),
        None
    );
}

#[test]
fn interim_conditions_are_copied_early_when_no_redispatch_is_possible() {
    let (scm, complete) = scm_then_complete();
    let new = translate(
        &plain(),
        &JobStatus::default(),
        Some((&scm, &at("eu", 1))),
        false,
    )
    .expect("scm");
    assert_eq!(
        cond(&new, "SuccessCriteriaMet").reason.as_deref(),
        Some("CompletionsReached")
    );
    assert!(find_condition(&new, "Complete").is_none());
    let done = translate(&plain(), &new, Some((&complete, &at("eu", 1))), false).expect("complete");
    assert_eq!(cond(&done, "Complete").status, "True");
    assert_eq!(
        types(&done)
            .iter()
            .filter(|(t, _)| t == "SuccessCriteriaMet")
            .count(),
        1
    );
}

#[test]
fn old_workers_get_the_interim_condition_added() {
    // A 1.30 worker: Complete without SuccessCriteriaMet (and without a reason).
    let m = status(json!({"startTime": "2026-05-01T09:00:00Z", "succeeded": 1,
        "completionTime": "2026-05-01T09:01:00Z",
        "conditions": [{"type": "Complete", "status": "True", "lastProbeTime": "2026-05-01T09:01:00Z",
            "lastTransitionTime": "2026-05-01T09:01:00Z"}]}));
    let done = translate(
        &plain(),
        &JobStatus::default(),
        Some((&m, &at("old", 1))),
        true,
    )
    .expect("done");
    let scm = cond(&done, "SuccessCriteriaMet");
    assert_eq!(
        (scm.status.as_str(), scm.reason.as_deref()),
        ("True", Some("CompletionsReached"))
    );
    assert_eq!(
        cond(&done, "Complete").reason.as_deref(),
        Some("CompletionsReached")
    );
    let m = status(json!({"startTime": "2026-05-01T09:00:00Z", "failed": 2,
        "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
            "lastTransitionTime": "2026-05-01T09:01:00Z"}]}));
    let failed = translate(
        &plain(),
        &JobStatus::default(),
        Some((&m, &at("old", 1))),
        true,
    )
    .expect("failed");
    let ft = cond(&failed, "FailureTarget");
    assert_eq!(ft.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(failed.completion_time, None);
    assert_eq!(failed.start_time, Some(Time(ts("2026-05-01T09:00:00Z"))));
}

#[test]
fn a_finished_mirror_contradicting_the_origins_interim_is_not_copied() {
    let old = status(json!({"startTime": "2026-05-01T09:00:00Z",
        "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached"}]}));
    let m = status(
        json!({"startTime": "2026-05-01T09:00:00Z", "failed": 1, "conditions": [
        {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded"},
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}),
    );
    let new = translate(&plain(), &old, Some((&m, &at("eu", 1))), false).expect("counters");
    assert!(finished(&new).is_none());
    assert!(find_condition(&new, "FailureTarget").is_none());
}

#[test]
fn completion_time_is_clamped_to_start_time() {
    let old = status(json!({"startTime": "2026-05-01T09:00:10Z"}));
    let m = status(json!({"startTime": "2026-05-01T09:00:00Z", "succeeded": 1,
        "completionTime": "2026-05-01T09:00:05Z",
        "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached"},
                       {"type": "Complete", "status": "True", "reason": "CompletionsReached"}]}));
    let done = translate(&plain(), &old, Some((&m, &at("eu", 1))), true).expect("done");
    assert_eq!(done.start_time, Some(Time(ts("2026-05-01T09:00:10Z"))));
    assert_eq!(done.completion_time, Some(Time(ts("2026-05-01T09:00:10Z"))));
}

#[test]
fn a_finished_origin_always_has_a_start_time() {
    let m = status(json!({"failed": 1, "conditions": [
        {"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded"},
        {"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}));
    let failed = translate(
        &plain(),
        &JobStatus::default(),
        Some((&m, &at("eu", 1))),
        true,
    )
    .expect("failed");
    assert_eq!(failed.start_time, Some(Time(ts("2026-05-01T10:00:00Z"))));
}

#[test]
fn worker_side_suspend_does_not_touch_an_unsuspended_origins_start_time() {
    let old = translate(
        &plain(),
        &JobStatus::default(),
        Some((&running(2, 2, 0, 0), &at("eu", 1))),
        true,
    )
    .expect("running");
    let suspended_mirror = status(json!({"active": 0, "ready": 0, "terminating": 2,
        "conditions": [{"type": "Suspended", "status": "True", "reason": "JobSuspended"}]}));
    let new = translate(
        &plain(),
        &old,
        Some((&suspended_mirror, &at("eu", 1))),
        true,
    )
    .expect("gauges");
    assert_eq!(new.start_time, old.start_time);
    assert!(
        find_condition(&new, "Suspended").is_none(),
        "the origin is not suspended"
    );
    let resumed = status(
        json!({"startTime": "2026-05-01T09:40:00Z", "active": 2, "ready": 0, "terminating": 0}),
    );
    let new = translate(&plain(), &new, Some((&resumed, &at("eu", 1))), true).expect("gauges");
    assert_eq!(new.start_time, old.start_time);
}

#[test]
fn suspended_condition_follows_the_origin() {
    let mut spec = plain();
    spec.suspend = true;
    // Created suspended, never dispatched.
    let new = translate(&spec, &JobStatus::default(), None, true).expect("suspended");
    let s = cond(&new, "Suspended");
    assert_eq!(
        (s.status.as_str(), s.reason.as_deref(), s.message.as_deref()),
        ("True", Some("JobSuspended"), Some("Job suspended"))
    );
    assert_eq!(new.start_time, None);
    assert_eq!(translate(&spec, &new, None, true), None);
    // Resumed: flips to False.
    spec.suspend = false;
    let resumed = translate(&spec, &new, None, true).expect("resumed");
    let s = cond(&resumed, "Suspended");
    assert_eq!(
        (s.status.as_str(), s.reason.as_deref()),
        ("False", Some("JobResumed"))
    );
    assert_eq!(translate(&spec, &resumed, None, true), None);
    // Never added to a Job that was never suspended.
    assert_eq!(translate(&plain(), &JobStatus::default(), None, true), None);
}

#[test]
fn a_suspended_origin_follows_the_mirrors_start_time() {
    let mut spec = plain();
    let old = translate(
        &spec,
        &JobStatus::default(),
        Some((&running(2, 2, 0, 0), &at("eu", 1))),
        true,
    )
    .expect("running");
    spec.suspend = true;
    let cleared = status(json!({"active": 0, "ready": 0, "terminating": 2}));
    let new = translate(&spec, &old, Some((&cleared, &at("eu", 1))), true).expect("suspended");
    assert_eq!(new.start_time, None);
    assert_eq!(cond(&new, "Suspended").status, "True");
    spec.suspend = false;
    let flipped = translate(&spec, &new, Some((&cleared, &at("eu", 1))), true).expect("resumed");
    assert_eq!(cond(&flipped, "Suspended").status, "False");
    let restarted = status(
        json!({"startTime": "2026-05-01T09:50:00Z", "active": 2, "ready": 0, "terminating": 0}),
    );
    let new =
        translate(&spec, &flipped, Some((&restarted, &at("eu", 1))), true).expect("restarted");
    assert_eq!(new.start_time, Some(Time(ts("2026-05-01T09:50:00Z"))));
}

#[test]
fn unknown_worker_conditions_are_copied_and_managed_ones_are_not() {
    let m = status(json!({"startTime": "2026-05-01T09:00:00Z", "conditions": [
        {"type": "example.com/Preempted", "status": "True", "reason": "Quota"},
        {"type": "Suspended", "status": "False", "reason": "JobResumed"},
        {"type": "courier.dev/Dispatched", "status": "True", "reason": "MirrorCreated",
         "message": "dispatched to evil (epoch 99)"}]}));
    let new = translate(
        &plain(),
        &JobStatus::default(),
        Some((&m, &at("eu", 1))),
        true,
    )
    .expect("changed");
    assert_eq!(
        cond(&new, "example.com/Preempted").reason.as_deref(),
        Some("Quota")
    );
    assert!(find_condition(&new, "Suspended").is_none());
    assert_eq!(crate::dispatched::recorded(&new), Some(at("eu", 1)));
}

#[test]
fn fail_origin_when_dispatch_gives_up() {
    let old = status(json!({"active": 2, "ready": 1, "terminating": 0, "succeeded": 1}));
    let failed = fail_origin(&old, "DispatchFailed", "gave up", ts(NOW)).expect("failed");
    assert_eq!(
        cond(&failed, "FailureTarget").reason.as_deref(),
        Some("DispatchFailed")
    );
    assert_eq!(cond(&failed, "Failed").message.as_deref(), Some("gave up"));
    assert_eq!(failed.start_time, Some(Time(ts("2026-05-01T10:00:00Z"))));
    assert_eq!(
        (failed.active, failed.ready, failed.terminating),
        (None, Some(0), Some(0))
    );
    assert_eq!(failed.succeeded, Some(1));
    assert_eq!(
        fail_origin(&failed, "DispatchFailed", "again", ts(NOW)),
        None
    );
    let committed =
        status(json!({"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}));
    assert_eq!(
        fail_origin(&committed, "DispatchFailed", "x", ts(NOW)),
        None
    );
    // An origin that already has FailureTarget ends Failed with that reason.
    let ft = status(json!({"startTime": "2026-05-01T09:00:00Z",
        "conditions": [{"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded", "message": "m"}]}));
    let failed = fail_origin(&ft, "DispatchFailed", "x", ts(NOW)).expect("failed");
    assert_eq!(
        cond(&failed, "Failed").reason.as_deref(),
        Some("DeadlineExceeded")
    );
}

#[test]
fn finish_from_interim_repeats_the_interim_reason() {
    let scm = status(
        json!({"startTime": "2026-05-01T11:00:00Z", "active": 1, "succeeded": 3,
        "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "reason": "SuccessPolicy",
            "message": "Matched rules at index 0"}]}),
    );
    let done = finish_from_interim(&scm, ts(NOW)).expect("complete");
    let c = cond(&done, "Complete");
    assert_eq!(
        (c.reason.as_deref(), c.message.as_deref()),
        (Some("SuccessPolicy"), Some("Matched rules at index 0"))
    );
    // completionTime never before startTime, even if our clock is behind.
    assert_eq!(done.completion_time, Some(Time(ts("2026-05-01T11:00:00Z"))));
    assert_eq!(done.active, None);
    assert_eq!(finish_from_interim(&JobStatus::default(), ts(NOW)), None);
    assert_eq!(finish_from_interim(&done, ts(NOW)), None);
}

/// Point 11: no pods nobody can see, and no time from a worker clock that runs ahead.
#[test]
fn gauges_drop_to_zero_without_a_mirror_and_worker_times_are_clamped() {
    let old = running(2, 1, 0, 0);
    let new = translate(&plain(), &old, None, true).expect("changed");
    assert_eq!(
        (new.active, new.ready, new.terminating),
        (Some(0), Some(0), Some(0))
    );
    assert_eq!(new.start_time, old.start_time, "startTime stays");
    assert_eq!(translate(&plain(), &new, None, true), None, "said once");

    let future = "2026-05-01T11:00:00Z";
    let now = whole_seconds(ts(NOW));
    let fresh = JobStatus::default();
    let m = status(
        json!({"startTime": future, "active": 1, "ready": 1, "terminating": 0,
        "conditions": [{"type": "Custom", "status": "True", "lastTransitionTime": future,
                        "lastProbeTime": future}]}),
    );
    let here = at("w1", 1);
    let first = translate(&plain(), &fresh, Some((&m, &here)), true).expect("changed");
    assert_eq!(first.start_time, Some(Time(now)));
    assert_eq!(cond(&first, "Custom").last_transition_time, Some(Time(now)));
    assert_eq!(
        translate(&plain(), &first, Some((&m, &here)), true),
        None,
        "clamping does not churn"
    );
    let done = status(
        json!({"startTime": future, "succeeded": 3, "completionTime": future,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
             "lastTransitionTime": future},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached",
             "lastTransitionTime": future}]}),
    );
    let end = translate(&plain(), &first, Some((&done, &here)), true).expect("finished");
    assert_eq!(end.completion_time, Some(Time(now)));
    assert_eq!(end.start_time, Some(Time(now)));
    for c in end.conditions.as_deref().unwrap_or_default() {
        assert!(
            c.last_transition_time.as_ref().is_none_or(|t| t.0 <= now),
            "{c:?}"
        );
    }
}

/// A Placed=False condition flips True with the first status copied from a mirror.
#[test]
fn the_first_report_marks_a_waiting_job_placed() {
    let mut conditions = Vec::new();
    crate::placed::set_not_placed(&mut conditions, "MirrorRejected", "w1: quota", ts(NOW));
    let old = JobStatus {
        conditions: Some(conditions),
        ..Default::default()
    };
    let here = at("w2", 2);
    let new = translate(&plain(), &old, Some((&running(1, 0, 0, 0), &here)), true).expect("x");
    let c = cond(&new, courier_api::CONDITION_PLACED);
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("True", Some("Placed"))
    );
    assert_eq!(c.message.as_deref(), Some("placed on w2 (epoch 2)"));
}
