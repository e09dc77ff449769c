//! Translating a mirror's `.status` into the origin's, so that every write is a legal Job status
//! transition on the management cluster (DESIGN invariant 4, `job-api-contract.md`).
//!
//! Rules (the origin is `old`, the current epoch's mirror is `m`):
//!
//! - **Terminal is final.** A finished origin (Complete or Failed) is never rewritten.
//! - **Counters never go back.** `succeeded` and `failed` are the maximum of the origin's and the
//!   mirror's value. A re-dispatched mirror starts at 0; the origin keeps showing the furthest any
//!   epoch got until the new mirror passes it. (Cumulative sums would need per-epoch history the
//!   origin cannot hold without extra writes.)
//! - **Index lists move with their epoch.** `completedIndexes`/`failedIndexes` are taken from the
//!   mirror as a pair once it has caught up with both origin counters (always true within one epoch),
//!   or when the mirror is finished; until then the origin keeps its pair, so the two lists always come
//!   from one epoch and cannot overlap. A malformed list, or one with an index >= completions, is not
//!   copied. `completedIndexes` only on Indexed Jobs; `failedIndexes` only with `backoffLimitPerIndex`.
//! - **Gauges** (`active`, `ready`, `terminating`) are the current mirror's, `ready` clamped to
//!   `active`; zero on a finished origin, and zero whenever no current mirror is read (the worker is
//!   unreachable, the mirror is gone): the origin never shows pods nobody can see.
//!   `uncountedTerminatedPods` is never copied (worker pod UIDs mean nothing here).
//! - **The management cluster's clock rules.** Times copied from a worker (condition transition and
//!   probe times, startTime, completionTime) are clamped to `now`: a worker whose clock runs ahead
//!   never puts a time in the future on the origin.
//! - **Interim conditions are a point of no return.** `SuccessCriteriaMet`/`FailureTarget` are copied
//!   together with the mirror's terminal condition — or, when no re-dispatch is possible any more,
//!   as soon as the mirror has them (nothing could then give the Job another outcome). Workers older
//!   than 1.31 write `Complete`/`Failed` without the interim one: it is added in the same write
//!   (keyed on the status' shape, not the reported version, which vendors and dev builds garble).
//! - **startTime** stays as first set while the origin is unsuspended: re-dispatches and worker-side
//!   suspends never change it. While the origin itself is suspended it follows the mirror (which
//!   clears it on suspend, like the real controller). A finished origin always has one.
//! - **completionTime** only with `Complete`, from the mirror, clamped to [startTime, now].
//! - **Suspended** follows the origin's own `spec.suspend`: True/JobSuspended while suspended (also
//!   for a Job created suspended and never dispatched), flipped to False/JobResumed on resume; never
//!   added to a Job that was never suspended. The mirror's own Suspended condition is not copied.
//! - **Other condition types** from the worker are copied (upserted by type, never removed).
//! - **Dispatched marker**: the first status copied from an epoch's mirror also records
//!   `courier.dev/Dispatched` for that epoch (see [`crate::dispatched`]), and flips a False
//!   `courier.dev/Placed` condition to True (see [`crate::placed`]).

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use courier_api::{CONDITION_DISPATCHED, CONDITION_PLACED};

use crate::dispatched;
use crate::indexes::IndexList;
use crate::job::{
    Finished, Interim, JobSpecEssentials, condition, find_condition, finished, interim,
};

/// The current epoch's mirror status and the placement it belongs to.
pub type MirrorReport<'a> = crate::workload::MirrorReport<'a, JobStatus>;

/// Everything status translation depends on.
#[derive(Debug, Clone, Copy)]
pub struct TranslateInput<'a> {
    pub origin_spec: &'a JobSpecEssentials,
    pub origin_status: &'a JobStatus,
    /// The current mirror's status, or `None` when no current mirror is observed (then only the
    /// origin's own Suspended condition is maintained).
    pub mirror: Option<MirrorReport<'a>>,
    /// Whether the origin could still be re-dispatched if this mirror were lost.
    pub redispatch_possible: bool,
    pub now: Timestamp,
}

/// The origin's new status, or `None` when nothing changes.
pub fn translate_status(input: &TranslateInput<'_>) -> Option<JobStatus> {
    let old = input.origin_status;
    if finished(old).is_some() {
        return None;
    }
    let now = whole_seconds(input.now);
    let mut new = old.clone();
    let mut conditions = old.conditions.clone().unwrap_or_default();
    let mut finishing = None;

    if let Some(report) = input.mirror {
        let m = report.status;
        dispatched::record(&mut conditions, report.placement, now);
        crate::placed::mark_placed(&mut conditions, report.placement, now);

        new.succeeded = max_counter(old.succeeded, m.succeeded);
        new.failed = max_counter(old.failed, m.failed);
        new.active = m.active.map(|n| n.max(0));
        new.terminating = m.terminating.map(|n| n.max(0));
        new.ready = m.ready.map(|n| n.max(0).min(new.active.unwrap_or(0)));

        let mirror_finished = finished(m);
        let caught_up =
            count(m.succeeded) >= count(old.succeeded) && count(m.failed) >= count(old.failed);
        if caught_up || mirror_finished.is_some() {
            (new.completed_indexes, new.failed_indexes) = index_pair(input.origin_spec, old, m);
        }

        for c in m.conditions.as_deref().unwrap_or_default() {
            if !is_managed_condition(&c.type_) {
                upsert(&mut conditions, clamped(c, now));
            }
        }

        let origin_interim = interim(old);
        match mirror_finished {
            Some(end) if origin_interim.is_none_or(|i| i.finished() == end) => {
                let interim_condition = find_condition(m, end.interim().condition_type())
                    .filter(|c| c.status == "True")
                    .map(|c| clamped(c, now))
                    .unwrap_or_else(|| synthesized_interim(m, end, now));
                if origin_interim.is_none() {
                    upsert(&mut conditions, interim_condition);
                }
                upsert(&mut conditions, terminal_condition(m, end, now));
                finishing = Some(end);
            }
            // A finished mirror contradicting the origin's interim condition cannot be copied (the
            // API server would reject it); the origin keeps its interim and the reconciler finishes
            // it from there if the mirror goes away.
            Some(_) => {}
            None => {
                if !input.redispatch_possible
                    && origin_interim.is_none()
                    && let Some(i) = interim(m)
                    && let Some(c) = find_condition(m, i.condition_type())
                {
                    upsert(&mut conditions, clamped(c, now));
                }
            }
        }
    }

    if input.mirror.is_none() {
        // Nobody can see pods of this Job right now.
        new.active = old.active.map(|_| 0);
        new.ready = old.ready.map(|_| 0);
        new.terminating = old.terminating.map(|_| 0);
    }
    if finishing.is_none() {
        apply_suspended(&mut conditions, input.origin_spec.suspend, now);
    }

    new.start_time = start_time(input, old, now);
    new.uncounted_terminated_pods = old.uncounted_terminated_pods.clone().filter(|u| {
        u.succeeded.as_deref().unwrap_or_default().is_empty()
            && u.failed.as_deref().unwrap_or_default().is_empty()
    });
    new.conditions = (!conditions.is_empty()).then_some(conditions);

    if let Some(end) = finishing {
        let m = input.mirror.map(|r| r.status);
        finish_fields(&mut new, end, m, now);
    }
    (new != *old).then_some(new)
}

/// The failed origin's status when Courier gives up on it: `FailureTarget` and `Failed` with
/// `reason` and `message`, gauges zeroed, startTime set if absent. `None` if the origin is already
/// finished or has committed to success (`SuccessCriteriaMet`), which can only end `Complete`.
pub fn fail_origin(
    old: &JobStatus,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Option<JobStatus> {
    if finished(old).is_some() || interim(old) == Some(Interim::SuccessCriteriaMet) {
        return None;
    }
    let now = whole_seconds(now);
    let mut new = old.clone();
    let mut conditions = old.conditions.clone().unwrap_or_default();
    if interim(old).is_none() {
        upsert(
            &mut conditions,
            new_condition(condition::FAILURE_TARGET, reason, message, now),
        );
    }
    let (reason, message) = find_condition(old, condition::FAILURE_TARGET)
        .filter(|c| c.status == "True")
        .map(|c| (c.reason.clone(), c.message.clone()))
        .unwrap_or_else(|| (Some(reason.to_string()), Some(message.to_string())));
    upsert(
        &mut conditions,
        JobCondition {
            reason,
            message,
            ..new_condition(condition::FAILED, "", "", now)
        },
    );
    new.conditions = Some(conditions);
    finish_fields(&mut new, Finished::Failed, None, now);
    Some(new)
}

/// The origin's status finished from its own interim condition (the mirror was lost after the Job
/// met its success or failure criteria): `Complete` or `Failed` repeating the interim condition's
/// reason and message. `None` if the origin has no interim condition or is already finished.
pub fn finish_from_interim(old: &JobStatus, now: Timestamp) -> Option<JobStatus> {
    if finished(old).is_some() {
        return None;
    }
    let committed = interim(old)?;
    let now = whole_seconds(now);
    let source = find_condition(old, committed.condition_type())?;
    let end = committed.finished();
    let mut new = old.clone();
    let mut conditions = old.conditions.clone().unwrap_or_default();
    upsert(
        &mut conditions,
        JobCondition {
            reason: source.reason.clone(),
            message: source.message.clone(),
            ..new_condition(end.condition_type(), "", "", now)
        },
    );
    new.conditions = Some(conditions);
    finish_fields(&mut new, end, None, now);
    Some(new)
}

/// Kubernetes timestamps have whole-second resolution on the wire; stamping with the same precision
/// keeps "unchanged" comparisons exact after a round trip.
pub fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn count(v: Option<i32>) -> i32 {
    v.unwrap_or(0).max(0)
}

fn max_counter(old: Option<i32>, mirror: Option<i32>) -> Option<i32> {
    match (old, mirror) {
        (None, None) => None,
        _ => Some(count(old).max(count(mirror))),
    }
}

/// The condition types Courier computes itself instead of copying from the worker.
fn is_managed_condition(type_: &str) -> bool {
    type_ == condition::SUSPENDED
        || type_ == CONDITION_DISPATCHED
        || type_ == CONDITION_PLACED
        || condition::IRREVERSIBLE.contains(&type_)
}

/// `t`, or `now` when `t` is later (a worker's clock running ahead).
fn not_after(t: &Time, now: Timestamp) -> Time {
    if t.0 > now { Time(now) } else { t.clone() }
}

/// A worker's condition with its times clamped to `now`.
fn clamped(c: &JobCondition, now: Timestamp) -> JobCondition {
    JobCondition {
        last_probe_time: c.last_probe_time.as_ref().map(|t| not_after(t, now)),
        last_transition_time: c.last_transition_time.as_ref().map(|t| not_after(t, now)),
        ..c.clone()
    }
}

fn upsert(conditions: &mut Vec<JobCondition>, c: JobCondition) {
    match conditions.iter_mut().find(|e| e.type_ == c.type_) {
        Some(existing) if same_condition(existing, &c) => {}
        Some(existing) => *existing = c,
        None => conditions.push(c),
    }
}

/// Same meaning (times aside) — rewriting only the times would be a pointless write.
fn same_condition(a: &JobCondition, b: &JobCondition) -> bool {
    a.type_ == b.type_ && a.status == b.status && a.reason == b.reason && a.message == b.message
}

fn new_condition(type_: &str, reason: &str, message: &str, now: Timestamp) -> JobCondition {
    JobCondition {
        type_: type_.to_string(),
        status: "True".to_string(),
        reason: (!reason.is_empty()).then(|| reason.to_string()),
        message: (!message.is_empty()).then(|| message.to_string()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// The mirror's terminal condition; a pre-1.31 `Complete` without a reason gets the one a current
/// controller would write.
fn terminal_condition(m: &JobStatus, end: Finished, now: Timestamp) -> JobCondition {
    let mut c = find_condition(m, end.condition_type())
        .map(|c| clamped(c, now))
        .unwrap_or_else(|| new_condition(end.condition_type(), "", "", now));
    if end == Finished::Complete && c.reason.as_deref().unwrap_or_default().is_empty() {
        c.reason = Some(COMPLETIONS_REACHED.to_string());
        c.message = Some(COMPLETIONS_REACHED_MESSAGE.to_string());
    }
    if c.last_transition_time.is_none() {
        c.last_transition_time = Some(Time(now));
    }
    c
}

/// The Job controller's reason and message of a `Complete` condition (also kept unallocated by
/// `job_status::CachedStatus`).
pub(crate) const COMPLETIONS_REACHED: &str = "CompletionsReached";
pub(crate) const COMPLETIONS_REACHED_MESSAGE: &str = "Reached expected number of succeeded pods";

/// The interim condition an old worker did not write, repeating its terminal condition's reason.
fn synthesized_interim(m: &JobStatus, end: Finished, now: Timestamp) -> JobCondition {
    let terminal = terminal_condition(m, end, now);
    JobCondition {
        type_: end.interim().condition_type().to_string(),
        ..terminal
    }
}

fn apply_suspended(conditions: &mut Vec<JobCondition>, suspend: bool, now: Timestamp) {
    let existing = conditions
        .iter()
        .position(|c| c.type_ == condition::SUSPENDED);
    let is_true = existing.is_some_and(|i| conditions[i].status == "True");
    let replacement = if suspend && !is_true {
        Some(new_condition(
            condition::SUSPENDED,
            "JobSuspended",
            "Job suspended",
            now,
        ))
    } else if !suspend && is_true {
        Some(JobCondition {
            status: "False".to_string(),
            ..new_condition(condition::SUSPENDED, "JobResumed", "Job resumed", now)
        })
    } else {
        None
    };
    match (replacement, existing) {
        (Some(c), Some(i)) => conditions[i] = c,
        (Some(c), None) => conditions.push(c),
        (None, _) => {}
    }
}

fn start_time(input: &TranslateInput<'_>, old: &JobStatus, now: Timestamp) -> Option<Time> {
    let mirror_start = input.mirror.map(|r| r.status.start_time.clone());
    match (&old.start_time, mirror_start) {
        // A worker clock ahead of ours: keep what the origin has rather than chase `now`.
        (Some(kept), Some(Some(m))) if input.origin_spec.suspend && m.0 > now => Some(kept.clone()),
        // Only a suspended origin may lose or change its startTime; then it follows the mirror.
        (Some(_), Some(mirror_start)) if input.origin_spec.suspend => mirror_start,
        (Some(kept), _) => Some(kept.clone()),
        (None, Some(mirror_start)) => mirror_start.map(|t| not_after(&t, now)),
        (None, None) => None,
    }
}

/// The index lists to show, taken from the mirror as a pair; the origin's pair where the mirror's is
/// unusable.
fn index_pair(
    spec: &JobSpecEssentials,
    old: &JobStatus,
    m: &JobStatus,
) -> (Option<String>, Option<String>) {
    let completions = spec.completions.and_then(|c| u32::try_from(c).ok());
    let usable = |s: &Option<String>| -> Option<Option<IndexList>> {
        match s {
            None => Some(None),
            Some(text) => {
                let list = IndexList::parse(text).ok()?;
                let in_range = match (list.max(), completions) {
                    (Some(max), Some(c)) => max < c,
                    (Some(_), None) => false,
                    (None, _) => true,
                };
                in_range.then_some(Some(list))
            }
        }
    };
    let completed = if spec.indexed {
        usable(&m.completed_indexes)
    } else {
        Some(None)
    };
    let failed = if spec.backoff_limit_per_index.is_some() {
        usable(&m.failed_indexes)
    } else {
        Some(None)
    };
    match (completed, failed) {
        (Some(c), Some(f)) if !matches!((&c, &f), (Some(c), Some(f)) if c.overlaps(f)) => {
            (c.map(|l| l.to_string()), f.map(|l| l.to_string()))
        }
        _ => (old.completed_indexes.clone(), old.failed_indexes.clone()),
    }
}

/// Fields every finished origin must have: no pods, a startTime, completionTime only when Complete
/// (from the mirror, never before startTime).
fn finish_fields(new: &mut JobStatus, end: Finished, m: Option<&JobStatus>, now: Timestamp) {
    // The origin's own startTime is immutable (never moved, even if it were ahead of `now`); one
    // taken from the mirror is clamped to our clock.
    let start = new.start_time.clone().unwrap_or_else(|| {
        m.and_then(|m| m.start_time.clone().or_else(|| m.completion_time.clone()))
            .map_or(Time(now), |t| not_after(&t, now))
    });
    // The Job controller omits a zero `active`.
    new.active = None;
    new.ready = new.ready.map(|_| 0);
    new.terminating = new.terminating.map(|_| 0);
    new.uncounted_terminated_pods = None;
    new.completion_time = match end {
        Finished::Failed => None,
        Finished::Complete => {
            let reported = m
                .and_then(|m| m.completion_time.clone())
                .or_else(|| {
                    m.and_then(|m| find_condition(m, condition::COMPLETE))
                        .and_then(|c| c.last_transition_time.clone())
                })
                .unwrap_or(Time(now));
            let reported = not_after(&reported, now);
            Some(if reported < start {
                start.clone()
            } else {
                reported
            })
        }
    };
    new.start_time = Some(start);
}

#[cfg(test)]
mod tests;
