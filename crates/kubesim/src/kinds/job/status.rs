//! Job status validation on `/status` writes: `validateJobStatus` and `ValidateJobStatusUpdate`
//! (`pkg/apis/batch/validation/validation.go`) with the options the v1.36 status strategy derives from
//! what changed (`getStatusValidationOptions` in `pkg/registry/batch/job/strategy.go`). Wording and order
//! follow the v1.36 recordings where they exist (`job_status_invalid.json`), else the sources.

use serde_json::Value;

use super::goprint;
use super::indexes::IndexSet;
use crate::errors::{BadValue, FieldError, FieldErrors};
use crate::json::{get, get_arr, get_bool, get_i64, get_str};
use crate::validation::{semantic_eq, time_bad_value, times_equal};

/// Whether the Job has a condition of this type with status `True`.
pub fn condition_true(job: &Value, ctype: &str) -> bool {
    get_arr(job, &["status", "conditions"]).is_some_and(|cs| {
        cs.iter().any(|c| {
            get_str(c, &["type"]) == Some(ctype) && get_str(c, &["status"]) == Some("True")
        })
    })
}

/// Whether the Job has a condition of this type with status `False`.
fn condition_false(job: &Value, ctype: &str) -> bool {
    get_arr(job, &["status", "conditions"]).is_some_and(|cs| {
        cs.iter().any(|c| {
            get_str(c, &["type"]) == Some(ctype) && get_str(c, &["status"]) == Some("False")
        })
    })
}

/// A view of one Job's status fields (absent counters read 0, like Go's value fields).
struct St<'a> {
    job: &'a Value,
    active: i64,
    succeeded: i64,
    failed: i64,
    ready: Option<i64>,
    terminating: Option<i64>,
    start: Option<&'a str>,
    completion: Option<&'a str>,
    completed_indexes: &'a str,
    failed_indexes: Option<&'a str>,
    uncounted: Option<&'a Value>,
    complete: bool,
    failed_cond: bool,
    failure_target: bool,
    success_criteria_met: bool,
}

impl<'a> St<'a> {
    fn new(job: &'a Value) -> Self {
        let st = |k: &str| get(job, &["status", k]).filter(|v| !v.is_null());
        Self {
            job,
            active: get_i64(job, &["status", "active"]).unwrap_or(0),
            succeeded: get_i64(job, &["status", "succeeded"]).unwrap_or(0),
            failed: get_i64(job, &["status", "failed"]).unwrap_or(0),
            ready: get_i64(job, &["status", "ready"]),
            terminating: get_i64(job, &["status", "terminating"]),
            start: get_str(job, &["status", "startTime"]),
            completion: get_str(job, &["status", "completionTime"]),
            completed_indexes: get_str(job, &["status", "completedIndexes"]).unwrap_or(""),
            failed_indexes: get_str(job, &["status", "failedIndexes"]),
            uncounted: st("uncountedTerminatedPods"),
            complete: condition_true(job, "Complete"),
            failed_cond: condition_true(job, "Failed"),
            failure_target: condition_true(job, "FailureTarget"),
            success_criteria_met: condition_true(job, "SuccessCriteriaMet"),
        }
    }

    fn finished(&self) -> bool {
        self.complete || self.failed_cond
    }

    fn uncounted_len(&self) -> usize {
        self.uncounted.map_or(0, |u| {
            ["succeeded", "failed"]
                .iter()
                .map(|k| get_arr(u, &[k]).map_or(0, Vec::len))
                .sum()
        })
    }
}

/// `JobStatusValidationOptions` as derived for a `/status` write of a Job (JobManagedBy locked on).
struct Opts {
    reject_decreasing_succeeded: bool,
    reject_invalid_completed_indexes: bool,
    reject_invalid_failed_indexes: bool,
    reject_completed_indexes_for_non_indexed: bool,
    reject_failed_indexes_without_per_index_limit: bool,
    reject_failed_indexes_overlapping_completed: bool,
    reject_failed_without_failure_target: bool,
    reject_complete_without_success_criteria_met: bool,
    reject_finished_with_active: bool,
    reject_finished_without_start_time: bool,
    reject_finished_with_uncounted: bool,
    reject_start_time_update_for_unsuspended: bool,
    reject_completion_time_before_start_time: bool,
    reject_not_complete_with_completion_time: bool,
    reject_complete_without_completion_time: bool,
    reject_complete_with_failed: bool,
    reject_complete_with_failure_target: bool,
    reject_more_ready_than_active: bool,
    reject_finished_with_terminating: bool,
}

impl Opts {
    fn derive(old: &St<'_>, new: &St<'_>) -> Self {
        let spec = |k: &str| get(new.job, &["spec", k]).filter(|v| !v.is_null());
        let indexed = get_str(new.job, &["spec", "completionMode"]) == Some("Indexed");
        let finished_changed = old.finished() != new.finished();
        let complete_changed = old.complete != new.complete;
        let failed_changed = old.failed_cond != new.failed_cond;
        let failure_target_changed = old.failure_target != new.failure_target;
        let completed_indexes_changed = old.completed_indexes != new.completed_indexes;
        let failed_indexes_changed = old.failed_indexes != new.failed_indexes;
        let active_changed = old.active != new.active;
        let start_changed = !times_equal(old.start, new.start);
        let completion_changed = !times_equal(old.completion, new.completion);
        let ready_changed = old.ready != new.ready;
        let terminating_changed = old.terminating != new.terminating;
        let uncounted_changed = !semantic_eq(old.uncounted, new.uncounted);
        let suspended = get_bool(new.job, &["spec", "suspend"]) == Some(true);
        let suspended_zero_completions =
            suspended && get_i64(new.job, &["spec", "completions"]) == Some(0);
        Self {
            // Elastic Indexed Jobs (completions == parallelism) may scale down their succeeded count.
            reject_decreasing_succeeded: !indexed || spec("completions") != spec("parallelism"),
            reject_invalid_completed_indexes: completed_indexes_changed,
            reject_invalid_failed_indexes: failed_indexes_changed,
            reject_completed_indexes_for_non_indexed: completed_indexes_changed,
            reject_failed_indexes_without_per_index_limit: failed_indexes_changed,
            reject_failed_indexes_overlapping_completed: failed_indexes_changed
                || completed_indexes_changed,
            reject_failed_without_failure_target: failed_changed || failed_indexes_changed,
            reject_complete_without_success_criteria_met: complete_changed,
            reject_finished_with_active: finished_changed || active_changed,
            reject_finished_without_start_time: (finished_changed || start_changed)
                && !suspended_zero_completions,
            reject_finished_with_uncounted: finished_changed || uncounted_changed,
            reject_start_time_update_for_unsuspended: start_changed,
            reject_completion_time_before_start_time: start_changed || completion_changed,
            reject_not_complete_with_completion_time: complete_changed || completion_changed,
            reject_complete_without_completion_time: complete_changed || completion_changed,
            reject_complete_with_failed: complete_changed || failed_changed,
            reject_complete_with_failure_target: complete_changed || failure_target_changed,
            reject_more_ready_than_active: ready_changed || active_changed,
            reject_finished_with_terminating: finished_changed || terminating_changed,
        }
    }
}

fn cond_err(msg: impl Into<String>) -> FieldError {
    FieldError::invalid("status.conditions", BadValue::Omit, msg)
}

fn nonnegative(errs: &mut FieldErrors, key: &str, v: i64) {
    if v < 0 {
        errs.push(FieldError::invalid(
            format!("status.{key}"),
            BadValue::Int(v),
            "must be greater than or equal to 0",
        ));
    }
}

/// A `types.UID` as Go prints it (JSON string).
fn uid_value(s: &str) -> BadValue {
    let mut out = String::new();
    crate::errors::write_go_string(s, &mut out);
    BadValue::Raw(out)
}

/// The parseable intervals of an index list, skipping malformed ones (as the overlap check does).
fn lenient_intervals(s: &str, completions: i32) -> IndexSet {
    let mut set = IndexSet::new();
    if s.is_empty() {
        return set;
    }
    for fragment in s.split(',') {
        if let Ok(part) = IndexSet::parse_checked(fragment, completions) {
            for i in part.iter() {
                set.insert(i);
            }
        }
    }
    set
}

/// `validateJobStatus`: rules on the new status alone (some only when the fields involved changed).
fn validate_job_status(new: &St<'_>, opts: &Opts) -> FieldErrors {
    let mut errs = Vec::new();
    nonnegative(&mut errs, "active", new.active);
    nonnegative(&mut errs, "succeeded", new.succeeded);
    nonnegative(&mut errs, "failed", new.failed);
    if let Some(r) = new.ready {
        nonnegative(&mut errs, "ready", r);
    }
    if let Some(t) = new.terminating {
        nonnegative(&mut errs, "terminating", t);
    }
    if let Some(u) = new.uncounted {
        let mut seen = std::collections::HashSet::new();
        for key in ["succeeded", "failed"] {
            for (i, uid) in get_arr(u, &[key])
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                let uid = uid.as_str().unwrap_or("");
                let p = format!("status.uncountedTerminatedPods.{key}[{i}]");
                if uid.is_empty() {
                    errs.push(FieldError::invalid(p, uid_value(uid), "must not be empty"));
                } else if !seen.insert(uid) {
                    errs.push(FieldError::duplicate(p, uid_value(uid)));
                }
            }
        }
    }
    if opts.reject_complete_with_failed && new.complete && new.failed_cond {
        errs.push(cond_err(
            "cannot set Complete=True and Failed=true conditions",
        ));
    }
    if opts.reject_complete_with_failure_target && new.complete && new.failure_target {
        errs.push(cond_err(
            "cannot set Complete=True and FailureTarget=true conditions",
        ));
    }
    if opts.reject_not_complete_with_completion_time
        && let Some(ct) = new.completion
        && !new.complete
    {
        errs.push(FieldError::invalid(
            "status.completionTime",
            time_bad_value(ct),
            "cannot set completionTime when there is no Complete=True condition",
        ));
    }
    if opts.reject_complete_without_completion_time && new.completion.is_none() && new.complete {
        errs.push(FieldError::required(
            "status.completionTime",
            "completionTime is required for Complete jobs",
        ));
    }
    if opts.reject_completion_time_before_start_time
        && let (Some(st), Some(ct)) = (new.start, new.completion)
        && let (Some(s), Some(c)) = (crate::time::parse(st), crate::time::parse(ct))
        && c < s
    {
        errs.push(FieldError::invalid(
            "status.completionTime",
            time_bad_value(ct),
            "must be equal to or after `startTime`",
        ));
    }
    if opts.reject_failed_without_failure_target && new.failed_cond && !new.failure_target {
        errs.push(cond_err(
            "cannot set Failed=True condition without the FailureTarget=true condition",
        ));
    }
    if opts.reject_complete_without_success_criteria_met
        && new.complete
        && !new.success_criteria_met
    {
        errs.push(cond_err(
            "cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
        ));
    }
    let finished = new.finished();
    if opts.reject_finished_with_active && new.active > 0 && finished {
        errs.push(FieldError::invalid(
            "status.active",
            BadValue::Int(new.active),
            "active>0 is invalid for finished job",
        ));
    }
    if opts.reject_finished_without_start_time && new.start.is_none() && finished {
        errs.push(FieldError::required(
            "status.startTime",
            "startTime is required for finished job",
        ));
    }
    if opts.reject_finished_with_uncounted && finished && new.uncounted_len() > 0 {
        errs.push(FieldError::invalid(
            "status.uncountedTerminatedPods",
            BadValue::Raw(goprint::uncounted_terminated_pods(new.uncounted)),
            "must be empty for finished job",
        ));
    }
    let completions = get_i64(new.job, &["spec", "completions"])
        .map(|c| i32::try_from(c).unwrap_or(if c < 0 { i32::MIN } else { i32::MAX }));
    let per_index = get(new.job, &["spec", "backoffLimitPerIndex"]).is_some_and(|v| !v.is_null());
    if opts.reject_invalid_completed_indexes
        && let Some(c) = completions
        && let Err(e) = IndexSet::parse_checked(new.completed_indexes, c)
    {
        errs.push(FieldError::invalid(
            "status.completedIndexes",
            BadValue::Str(new.completed_indexes.to_string()),
            format!("error parsing completedIndexes: {e}"),
        ));
    }
    if opts.reject_invalid_failed_indexes
        && let Some(c) = completions
        && per_index
        && let Some(fi) = new.failed_indexes
        && let Err(e) = IndexSet::parse_checked(fi, c)
    {
        errs.push(FieldError::invalid(
            "status.failedIndexes",
            BadValue::Str(fi.to_string()),
            format!("error parsing failedIndexes: {e}"),
        ));
    }
    let indexed = get_str(new.job, &["spec", "completionMode"]) == Some("Indexed");
    if opts.reject_completed_indexes_for_non_indexed
        && !new.completed_indexes.is_empty()
        && !indexed
    {
        errs.push(FieldError::invalid(
            "status.completedIndexes",
            BadValue::Str(new.completed_indexes.to_string()),
            "cannot set non-empty completedIndexes when non-indexed completion mode",
        ));
    }
    if opts.reject_failed_indexes_without_per_index_limit
        && !per_index
        && let Some(fi) = new.failed_indexes
    {
        errs.push(FieldError::invalid(
            "status.failedIndexes",
            BadValue::Str(fi.to_string()),
            "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
        ));
    }
    if opts.reject_failed_indexes_overlapping_completed
        && let Some(c) = completions
        && let Some(fi) = new.failed_indexes
        && let Some(at) =
            lenient_intervals(new.completed_indexes, c).first_overlap(&lenient_intervals(fi, c))
    {
        errs.push(FieldError::invalid(
            "status.failedIndexes",
            BadValue::Str(fi.to_string()),
            format!("failedIndexes and completedIndexes overlap at index: {at}"),
        ));
    }
    if opts.reject_finished_with_terminating
        && let Some(t) = new.terminating
        && t > 0
        && finished
    {
        errs.push(FieldError::invalid(
            "status.terminating",
            BadValue::Int(t),
            "terminating>0 is invalid for finished job",
        ));
    }
    if opts.reject_more_ready_than_active
        && let Some(r) = new.ready
        && r > new.active
    {
        errs.push(FieldError::invalid(
            "status.ready",
            BadValue::Int(r),
            "cannot set more ready pods than active",
        ));
    }
    if new.success_criteria_met && new.failed_cond {
        errs.push(cond_err(
            "cannot set SuccessCriteriaMet=True and Failed=true conditions",
        ));
    }
    if new.success_criteria_met && new.failure_target {
        errs.push(cond_err(
            "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
        ));
    }
    let has_success_policy = get(new.job, &["spec", "successPolicy"]).is_some_and(|v| !v.is_null());
    if has_success_policy && !new.success_criteria_met && new.complete {
        errs.push(cond_err(
            "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
        ));
    }
    errs
}

/// Every status rule a v1.36 server applies when `old_job`'s status is replaced by `new_job`'s through
/// the status subresource (both are whole Jobs; the spec read is `new_job`'s, which on `/status` writes
/// is the stored one). ObjectMeta rules are not included.
pub fn validate_job_status_transition(old_job: &Value, new_job: &Value) -> FieldErrors {
    let old = St::new(old_job);
    let new = St::new(new_job);
    let opts = Opts::derive(&old, &new);
    let mut errs = validate_job_status(&new, &opts);
    for (ctype, was, is) in [
        ("Failed", old.failed_cond, new.failed_cond),
        ("Complete", old.complete, new.complete),
        ("FailureTarget", old.failure_target, new.failure_target),
    ] {
        if was && !is {
            errs.push(cond_err(format!(
                "cannot disable the terminal {ctype}=True condition"
            )));
        }
    }
    if new.failed < old.failed {
        errs.push(FieldError::invalid(
            "status.failed",
            BadValue::Int(new.failed),
            "cannot decrease the failed counter",
        ));
    }
    if opts.reject_decreasing_succeeded && new.succeeded < old.succeeded {
        errs.push(FieldError::invalid(
            "status.succeeded",
            BadValue::Int(new.succeeded),
            "cannot decrease the succeeded counter",
        ));
    }
    // A completionTime may be cleared (caught above when the Job stays Complete), never changed.
    if let (Some(n), Some(o)) = (new.completion, old.completion)
        && !times_equal(Some(n), Some(o))
    {
        errs.push(FieldError::invalid(
            "status.completionTime",
            time_bad_value(n),
            "field is immutable",
        ));
    }
    if opts.reject_start_time_update_for_unsuspended
        && old.start.is_some()
        && get_bool(new_job, &["spec", "suspend"]) != Some(true)
    {
        // The write that resumes a Job (Suspended True -> False) may set a fresh startTime.
        let resuming =
            condition_true(old_job, "Suspended") && condition_false(new_job, "Suspended");
        if !resuming {
            errs.push(FieldError::invalid(
                "status.startTime",
                new.start.map_or(BadValue::Null, time_bad_value),
                "field is immutable for unsuspended job once set",
            ));
        }
    }
    if old.success_criteria_met && !new.success_criteria_met {
        errs.push(cond_err(
            "cannot disable the SuccessCriteriaMet=True condition",
        ));
    }
    if old.complete && !old.success_criteria_met && new.success_criteria_met {
        errs.push(cond_err(
            "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::job::test_job;
    use serde_json::json;

    const T0: &str = "2025-06-01T10:00:00Z";
    const T1: &str = "2025-06-01T10:05:00Z";

    fn c(t: &str, status: &str) -> Value {
        json!({"type": t, "status": status})
    }

    fn with_status(job: &Value, status: Value) -> Value {
        let mut j = job.clone();
        j["status"] = status;
        j
    }

    fn msgs(old: &Value, new_status: Value) -> Vec<String> {
        validate_job_status_transition(old, &with_status(old, new_status))
            .iter()
            .map(FieldError::message)
            .collect()
    }

    #[test]
    fn counters_are_non_negative_and_never_decrease() {
        let job = with_status(
            &test_job("j", json!({})),
            json!({"startTime": T0, "active": 1, "failed": 2, "succeeded": 1}),
        );
        assert_eq!(
            msgs(
                &job,
                json!({"startTime": T0, "active": 1, "ready": -1, "terminating": -1, "failed": 1})
            ),
            [
                "status.ready: Invalid value: -1: must be greater than or equal to 0",
                "status.terminating: Invalid value: -1: must be greater than or equal to 0",
                "status.failed: Invalid value: 1: cannot decrease the failed counter",
                "status.succeeded: Invalid value: 0: cannot decrease the succeeded counter",
            ]
        );
        // Elastic Indexed Jobs (completions == parallelism) may lose succeeded pods on scale-down.
        let elastic = with_status(
            &test_job(
                "e",
                json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3}),
            ),
            json!({"startTime": T0, "succeeded": 2, "completedIndexes": "0,1"}),
        );
        assert!(
            msgs(
                &elastic,
                json!({"startTime": T0, "succeeded": 1, "completedIndexes": "0"})
            )
            .is_empty()
        );
    }

    #[test]
    fn uncounted_uids_are_unique_and_non_empty() {
        let job = with_status(
            &test_job("j", json!({})),
            json!({"startTime": T0, "active": 1}),
        );
        assert_eq!(
            msgs(
                &job,
                json!({"startTime": T0, "active": 1, "uncountedTerminatedPods": {"succeeded": ["a", ""], "failed": ["a"]}})
            ),
            [
                "status.uncountedTerminatedPods.succeeded[1]: Invalid value: \"\": must not be empty",
                "status.uncountedTerminatedPods.failed[0]: Duplicate value: \"a\"",
            ]
        );
    }

    #[test]
    fn interim_conditions_are_points_of_no_return() {
        let job = test_job("j", json!({}));
        let scm = with_status(
            &job,
            json!({"startTime": T0, "active": 1, "conditions": [c("SuccessCriteriaMet", "True")]}),
        );
        assert_eq!(
            msgs(
                &scm,
                json!({"startTime": T0, "active": 1, "conditions": [c("SuccessCriteriaMet", "False")]})
            ),
            [
                "status.conditions: Invalid value: cannot disable the SuccessCriteriaMet=True condition"
            ]
        );
        let ft = with_status(
            &job,
            json!({"startTime": T0, "conditions": [c("FailureTarget", "True")]}),
        );
        assert_eq!(
            msgs(&ft, json!({"startTime": T0})),
            [
                "status.conditions: Invalid value: cannot disable the terminal FailureTarget=True condition"
            ]
        );
        // A Complete written without SuccessCriteriaMet (old servers) cannot get it afterwards.
        let old_complete = with_status(
            &job,
            json!({"startTime": T0, "completionTime": T1, "conditions": [c("Complete", "True")]}),
        );
        assert_eq!(
            msgs(
                &old_complete,
                json!({"startTime": T0, "completionTime": T1,
                                        "conditions": [c("Complete", "True"), c("SuccessCriteriaMet", "True")]})
            ),
            [
                "status.conditions: Invalid value: cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions"
            ]
        );
        let failed = with_status(
            &job,
            json!({"startTime": T0, "conditions": [c("FailureTarget", "True"), c("Failed", "True")]}),
        );
        assert_eq!(
            msgs(
                &failed,
                json!({"startTime": T0, "conditions": [c("FailureTarget", "True")]})
            ),
            ["status.conditions: Invalid value: cannot disable the terminal Failed=True condition"]
        );
    }

    #[test]
    fn success_policy_needs_success_criteria_met() {
        let sp = with_status(
            &test_job(
                "j",
                json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2,
                                   "successPolicy": {"rules": [{"succeededCount": 1}]}}),
            ),
            json!({"startTime": T0, "conditions": [c("SuccessCriteriaMet", "True")]}),
        );
        // Removing it is caught twice: as a disabled interim condition and by the success policy rule.
        assert_eq!(
            msgs(
                &sp,
                json!({"startTime": T0, "completionTime": T1, "conditions": [c("Complete", "True")]})
            ),
            [
                "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
                "status.conditions: Invalid value: cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
                "status.conditions: Invalid value: cannot disable the SuccessCriteriaMet=True condition",
            ]
        );
    }

    #[test]
    fn finished_jobs_have_no_running_pods() {
        let job = with_status(
            &test_job("j", json!({})),
            json!({"startTime": T0, "active": 1, "terminating": 1}),
        );
        assert_eq!(
            msgs(
                &job,
                json!({"startTime": T0, "terminating": 2, "failed": 1,
                              "conditions": [c("FailureTarget", "True"), c("Failed", "True")]})
            ),
            ["status.terminating: Invalid value: 2: terminating>0 is invalid for finished job"]
        );
        // Unchanged fields are not re-checked (old statuses written before a rule existed stay writable).
        let legacy = with_status(
            &test_job("j", json!({})),
            json!({"terminating": 1, "conditions": [c("FailureTarget", "True"), c("Failed", "True")]}),
        );
        assert!(msgs(&legacy, json!({"terminating": 1, "failed": 1, "conditions": [c("FailureTarget", "True"), c("Failed", "True")]})).is_empty());
        // A suspended Job with zero completions can finish without ever starting.
        let zero = test_job("z", json!({"suspend": true, "completions": 0}));
        assert!(msgs(&zero, json!({"succeeded": 0, "completionTime": T1,
                                   "conditions": [c("SuccessCriteriaMet", "True"), c("Complete", "True")]})).is_empty());
    }

    #[test]
    fn start_time_rules() {
        let job = with_status(
            &test_job("j", json!({})),
            json!({"startTime": T0, "active": 1}),
        );
        // The same instant written differently is not a change.
        assert!(
            msgs(
                &job,
                json!({"startTime": "2025-06-01T12:00:00+02:00", "active": 1})
            )
            .is_empty()
        );
        // Suspended Jobs may clear or move it; so may the write that resumes a Job.
        let mut suspended = job.clone();
        suspended["spec"]["suspend"] = json!(true);
        assert!(msgs(&suspended, json!({"conditions": [c("Suspended", "True")]})).is_empty());
        let resuming = with_status(
            &test_job("j", json!({})),
            json!({"startTime": T0, "conditions": [c("Suspended", "True")]}),
        );
        assert!(
            msgs(
                &resuming,
                json!({"startTime": T1, "active": 1, "conditions": [c("Suspended", "False")]})
            )
            .is_empty()
        );
        assert_eq!(
            msgs(
                &resuming,
                json!({"startTime": T1, "active": 1, "conditions": [c("Suspended", "True")]})
            ),
            [
                "status.startTime: Invalid value: \"2025-06-01T10:05:00Z\": field is immutable for unsuspended job once set"
            ]
        );
        // The first startTime is always welcome.
        let fresh = test_job("f", json!({}));
        assert!(msgs(&fresh, json!({"startTime": T0, "active": 1, "ready": 1})).is_empty());
    }

    #[test]
    fn index_lists() {
        let job = with_status(
            &test_job(
                "j",
                json!({"completionMode": "Indexed", "completions": 4, "parallelism": 4, "backoffLimitPerIndex": 1}),
            ),
            json!({"startTime": T0, "active": 4, "failedIndexes": ""}),
        );
        assert_eq!(
            msgs(
                &job,
                json!({"startTime": T0, "active": 4, "failedIndexes": "3,1", "completedIndexes": "0-2", "succeeded": 3})
            ),
            [
                "status.failedIndexes: Invalid value: \"3,1\": error parsing failedIndexes: non-increasing order, previous: 3, current: 1",
                "status.failedIndexes: Invalid value: \"3,1\": failedIndexes and completedIndexes overlap at index: 1",
            ]
        );
        assert!(msgs(&job, json!({"startTime": T0, "active": 2, "failedIndexes": "3", "completedIndexes": "0,1", "succeeded": 2, "failed": 1})).is_empty());
        assert_eq!(
            msgs(
                &job,
                json!({"startTime": T0, "active": 4, "completedIndexes": "0-3-4"})
            ),
            [
                "status.completedIndexes: Invalid value: \"0-3-4\": error parsing completedIndexes: the fragment \"0-3-4\" violates the requirement that an index interval can have at most two parts separated by '-'"
            ]
        );
    }

    #[test]
    fn completion_time_rules() {
        let job = with_status(
            &test_job("j", json!({})),
            json!({"startTime": T0, "active": 1}),
        );
        let done = json!({"startTime": T0, "succeeded": 1, "completionTime": T1,
                          "conditions": [c("SuccessCriteriaMet", "True"), c("Complete", "True")]});
        assert!(msgs(&job, done.clone()).is_empty());
        let finished = with_status(&job, done);
        // Clearing completionTime of a Complete Job is reported by the "required" rule.
        assert_eq!(
            msgs(
                &finished,
                json!({"startTime": T0, "succeeded": 1,
                                   "conditions": [c("SuccessCriteriaMet", "True"), c("Complete", "True")]})
            ),
            ["status.completionTime: Required value: completionTime is required for Complete jobs"]
        );
    }
}
