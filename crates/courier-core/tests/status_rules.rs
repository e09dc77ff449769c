//! Status-translation rules written from the module's documented rules and the Job API contract
//! (docs/design: "Status translation"), one scenario per rule (issue #12 §11: these kill mutants of
//! `courier_core::status` that survived the unit and trace tests; docs/testing.md lists them).

use courier_core::job::JobSpecEssentials;
use courier_core::ownership::Intent;
use courier_core::status::{MirrorReport, TranslateInput, translate_status};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::JobStatus;
use serde_json::{Value, json};

const NOW: &str = "2026-05-01T10:00:00Z";

fn status(v: Value) -> JobStatus {
    serde_json::from_value(v).unwrap_or_else(|e| panic!("a JobStatus: {e}"))
}

fn translate(
    spec: &JobSpecEssentials,
    old: &JobStatus,
    mirror: &JobStatus,
    epoch: u64,
    redispatch_possible: bool,
) -> Option<JobStatus> {
    let placement = Intent {
        cluster: "w1".into(),
        epoch,
    };
    translate_status(&TranslateInput {
        origin_spec: spec,
        origin_status: old,
        mirror: Some(MirrorReport {
            status: mirror,
            placement: &placement,
        }),
        redispatch_possible,
        now: NOW.parse::<Timestamp>().unwrap_or_else(|e| panic!("{e}")),
    })
}

fn condition_types(s: &JobStatus) -> Vec<String> {
    s.conditions
        .iter()
        .flatten()
        .filter(|c| c.status == "True")
        .map(|c| c.type_.clone())
        .collect()
}

/// "Index lists move with their epoch": a re-dispatched mirror that has passed the origin's
/// `succeeded` but not yet its `failed` does not hand over its lists; the origin keeps the pair it
/// had (one epoch's lists), while its counters take the maximum of both.
#[test]
fn index_lists_wait_until_the_new_epoch_caught_up_with_both_counters() {
    let spec = JobSpecEssentials {
        completions: Some(4),
        parallelism: Some(4),
        indexed: true,
        backoff_limit_per_index: Some(0),
        ..Default::default()
    };
    let old = status(json!({
        "startTime": "2026-05-01T09:00:00Z", "active": 1, "succeeded": 2, "failed": 1,
        "completedIndexes": "0,1", "failedIndexes": "2",
    }));
    let m = status(json!({
        "startTime": "2026-05-01T09:30:00Z", "active": 1, "succeeded": 3, "failed": 0,
        "completedIndexes": "0,1,3",
    }));
    let new = translate(&spec, &old, &m, 2, true).unwrap_or_else(|| panic!("counters moved"));
    assert_eq!(new.succeeded, Some(3));
    assert_eq!(new.failed, Some(1));
    assert_eq!(new.completed_indexes.as_deref(), Some("0,1"));
    assert_eq!(new.failed_indexes.as_deref(), Some("2"));

    // Once the mirror has caught up with both, its pair is taken.
    let m = status(json!({
        "startTime": "2026-05-01T09:30:00Z", "active": 0, "succeeded": 3, "failed": 1,
        "completedIndexes": "0,1,3", "failedIndexes": "2",
    }));
    let new = translate(&spec, &old, &m, 2, true).unwrap_or_else(|| panic!("lists moved"));
    assert_eq!(new.completed_indexes.as_deref(), Some("0,1,3"));
    assert_eq!(new.failed_indexes.as_deref(), Some("2"));
}

/// "Interim conditions are a point of no return": an origin that already shows
/// `SuccessCriteriaMet` finishes `Complete` when its mirror does; one that shows `FailureTarget`
/// never takes a `Complete` (the API server would reject it) and stays unfinished.
#[test]
fn a_finished_mirror_is_copied_only_onto_a_matching_interim_condition() {
    let spec = JobSpecEssentials {
        completions: Some(1),
        parallelism: Some(1),
        ..Default::default()
    };
    let committed = |type_: &str, reason: &str| {
        status(json!({
            "startTime": "2026-05-01T09:00:00Z", "active": 1, "succeeded": 0, "failed": 0,
            "conditions": [{"type": type_, "status": "True", "reason": reason,
                            "lastTransitionTime": "2026-05-01T09:50:00Z"}],
        }))
    };
    let complete = status(json!({
        "startTime": "2026-05-01T09:00:00Z", "succeeded": 1, "failed": 0,
        "completionTime": "2026-05-01T09:55:00Z",
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
             "lastTransitionTime": "2026-05-01T09:50:00Z"},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached",
             "lastTransitionTime": "2026-05-01T09:55:00Z"},
        ],
    }));

    let old = committed("SuccessCriteriaMet", "CompletionsReached");
    let new = translate(&spec, &old, &complete, 1, false)
        .unwrap_or_else(|| panic!("the mirror finished"));
    let types = condition_types(&new);
    assert!(types.contains(&"Complete".to_string()), "{types:?}");
    assert_eq!(
        new.completion_time.map(|t| t.0.to_string()),
        Some("2026-05-01T09:55:00Z".to_string())
    );

    let old = committed("FailureTarget", "BackoffLimitExceeded");
    let new = translate(&spec, &old, &complete, 1, false);
    let types = new.as_ref().map(condition_types).unwrap_or_default();
    assert!(
        !types.contains(&"Complete".to_string()) && !types.contains(&"Failed".to_string()),
        "a Complete mirror was copied over FailureTarget: {types:?}"
    );
}

/// Fidelity: counters the mirror does not report stay absent on the origin (the Job controller
/// omits them; a zero appearing from nowhere is not what the worker said).
#[test]
fn counters_nobody_reported_stay_absent() {
    let spec = JobSpecEssentials {
        completions: Some(1),
        parallelism: Some(1),
        ..Default::default()
    };
    let new = translate(&spec, &JobStatus::default(), &JobStatus::default(), 1, true)
        .unwrap_or_else(|| panic!("the first report records the epoch"));
    assert_eq!((new.succeeded, new.failed), (None, None));
    assert_eq!(translate(&spec, &new, &JobStatus::default(), 1, true), None);
}

/// Other condition types from the worker are copied, upserted by type: a change of status, reason
/// or message reaches the origin; a change of times alone is no reason to write; times from a
/// worker whose clock runs ahead are clamped to the management cluster's `now`.
#[test]
fn worker_conditions_follow_their_meaning_not_their_times() {
    let spec = JobSpecEssentials {
        completions: Some(1),
        parallelism: Some(1),
        ..Default::default()
    };
    let with = |status_: &str, reason: &str, message: &str, time: &str| {
        status(json!({
            "startTime": "2026-05-01T09:00:00Z", "active": 1,
            "conditions": [{"type": "example.com/Quota", "status": status_, "reason": reason,
                            "message": message, "lastProbeTime": time,
                            "lastTransitionTime": time}],
        }))
    };
    let first = with("False", "Waiting", "queued", "2026-05-01T09:10:00Z");
    let origin = translate(&spec, &JobStatus::default(), &first, 1, true)
        .unwrap_or_else(|| panic!("the first report is written"));
    let quota = |s: &JobStatus| {
        s.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "example.com/Quota")
            .cloned()
            .unwrap_or_else(|| panic!("no copied condition in {s:?}"))
    };
    assert_eq!(quota(&origin).status, "False");

    // Only the times moved: nothing to write.
    let later = with("False", "Waiting", "queued", "2026-05-01T09:20:00Z");
    assert_eq!(translate(&spec, &origin, &later, 1, true), None);

    // Each of status, reason and message alone is a change the origin follows.
    for (s, r, m) in [
        ("True", "Waiting", "queued"),
        ("False", "Admitted", "queued"),
        ("False", "Waiting", "admitted"),
    ] {
        let changed = with(s, r, m, "2026-05-01T09:30:00Z");
        let new = translate(&spec, &origin, &changed, 1, true)
            .unwrap_or_else(|| panic!("{s}/{r}/{m} not copied"));
        let c = quota(&new);
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
            (s, Some(r), Some(m))
        );
    }

    // A worker clock an hour ahead: both times are clamped to now.
    let ahead = with("True", "Admitted", "admitted", "2026-05-01T11:00:00Z");
    let new = translate(&spec, &origin, &ahead, 1, true)
        .unwrap_or_else(|| panic!("the change is copied"));
    let c = quota(&new);
    let now: Timestamp = NOW.parse().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.last_transition_time.map(|t| t.0), Some(now));
    assert_eq!(c.last_probe_time.map(|t| t.0), Some(now));
}

/// startTime while the origin is suspended follows the mirror (which clears or resets it like
/// the real Job controller), except that a worker clock ahead of ours never moves it into the
/// future: then the origin keeps what it has.
#[test]
fn a_suspended_origin_follows_the_mirror_start_time_but_never_into_the_future() {
    let suspended = JobSpecEssentials {
        suspend: true,
        completions: Some(1),
        parallelism: Some(1),
        ..Default::default()
    };
    let old = status(json!({"startTime": "2026-05-01T08:00:00Z"}));
    let start_after = |mirror_start: &str| {
        let m = status(json!({"startTime": mirror_start}));
        translate(&suspended, &old, &m, 1, true)
            .unwrap_or(old.clone())
            .start_time
            .map(|t| t.0.to_string())
    };
    assert_eq!(
        start_after("2026-05-01T09:00:00Z").as_deref(),
        Some("2026-05-01T09:00:00Z"),
        "a suspended origin follows the mirror's startTime"
    );
    assert_eq!(
        start_after(NOW).as_deref(),
        Some(NOW),
        "a mirror startTime equal to now is not in the future"
    );
    assert_eq!(
        start_after("2026-05-01T11:00:00Z").as_deref(),
        Some("2026-05-01T08:00:00Z"),
        "a worker clock ahead: the origin keeps its startTime"
    );
    // Unsuspended, the origin's startTime never moves.
    let running = JobSpecEssentials {
        suspend: false,
        ..suspended
    };
    let m = status(json!({"startTime": "2026-05-01T09:00:00Z", "active": 1}));
    let new = translate(&running, &old, &m, 1, true).unwrap_or(old.clone());
    assert_eq!(
        new.start_time.map(|t| t.0.to_string()).as_deref(),
        Some("2026-05-01T08:00:00Z")
    );
}

/// "An index list with an index >= completions is not copied": the highest valid index is
/// completions - 1.
#[test]
fn index_lists_past_the_last_index_are_not_copied() {
    let spec = JobSpecEssentials {
        completions: Some(3),
        parallelism: Some(3),
        indexed: true,
        ..Default::default()
    };
    let old = status(json!({"startTime": "2026-05-01T09:00:00Z", "active": 3, "succeeded": 0}));
    let list_after = |completed: &str| {
        let m = status(json!({
            "startTime": "2026-05-01T09:00:00Z", "active": 1, "succeeded": 2,
            "completedIndexes": completed,
        }));
        translate(&spec, &old, &m, 1, true)
            .unwrap_or_else(|| panic!("progress is copied"))
            .completed_indexes
    };
    assert_eq!(list_after("0,2").as_deref(), Some("0,2"));
    assert_eq!(list_after("0,3"), None, "index 3 of 3 completions");
}

/// "Interim conditions are copied together with the mirror's terminal condition": the origin's
/// `SuccessCriteriaMet` is the mirror's own (its reason and time), not one made up from `Complete`.
#[test]
fn the_interim_condition_is_the_mirrors_own() {
    let spec = JobSpecEssentials {
        completions: Some(2),
        parallelism: Some(2),
        indexed: true,
        has_success_policy: true,
        ..Default::default()
    };
    let old = status(json!({"startTime": "2026-05-01T09:00:00Z", "active": 2, "succeeded": 0}));
    let m = status(json!({
        "startTime": "2026-05-01T09:00:00Z", "succeeded": 1, "completedIndexes": "0",
        "completionTime": "2026-05-01T09:40:00Z",
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "SuccessPolicy",
             "message": "Matched rules at index 0", "lastTransitionTime": "2026-05-01T09:30:00Z"},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached",
             "message": "Reached expected number of succeeded pods",
             "lastTransitionTime": "2026-05-01T09:40:00Z"},
        ],
    }));
    let new = translate(&spec, &old, &m, 1, true).unwrap_or_else(|| panic!("the mirror finished"));
    let scm = new
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "SuccessCriteriaMet")
        .unwrap_or_else(|| panic!("no SuccessCriteriaMet in {new:?}"));
    assert_eq!(scm.reason.as_deref(), Some("SuccessPolicy"));
    assert_eq!(scm.message.as_deref(), Some("Matched rules at index 0"));
    assert_eq!(
        scm.last_transition_time.as_ref().map(|t| t.0.to_string()),
        Some("2026-05-01T09:30:00Z".to_string())
    );
}
