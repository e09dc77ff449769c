//! [`CachedStatus`]: a Job's status as the caches keep it (one per origin, one per mirror). It holds
//! exactly what a `k8s_openapi` [`JobStatus`] holds, in less memory: condition types, statuses,
//! reasons and messages the Job API (and Courier) fix are kept as references to static text, any
//! other value as a boxed `str`; condition times as whole seconds (what the API server stores and
//! sends: `metav1.Time` is RFC 3339 to the second); the fields a Job rarely sets (index lists,
//! uncounted pods with content) boxed apart.
//!
//! Nothing is lost: [`CachedStatus::expand`] gives back the very `JobStatus` it was made from (a
//! condition whose time has a fraction of a second is kept whole), so status translation, which
//! works on `JobStatus`, produces what it produced from the full form; encoding and decoding go
//! through `JobStatus` too, so what is written is byte-equal (a status write's patch encodes only
//! the members that changed, and compact conditions itself: property tests hold both to the
//! encoding of the whole `JobStatus`).

use std::fmt;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use courier_api::reasons::{
    JOB_REASON_DISPATCH_FAILED, REASON_CLUSTER_REMOVED, REASON_MIRROR_REJECTED,
    REASON_NAMESPACE_MISSING, REASON_NO_ELIGIBLE_CLUSTER, REASON_PLACED,
};
use courier_api::{CONDITION_DISPATCHED, CONDITION_PLACED, REASON_MIRROR_CREATED};

use crate::job::condition;
use crate::merge_patch::{merge_patch, status_patch};
use crate::status::{COMPLETIONS_REACHED, COMPLETIONS_REACHED_MESSAGE};

/// Values kept without allocating: condition types and statuses, the Job controller's reasons and
/// messages (see the Job API contract) and Courier's own.
const KNOWN: [&str; 33] = [
    // statuses
    "True",
    "False",
    "Unknown",
    // condition types
    condition::COMPLETE,
    condition::FAILED,
    condition::SUSPENDED,
    condition::SUCCESS_CRITERIA_MET,
    condition::FAILURE_TARGET,
    CONDITION_DISPATCHED,
    CONDITION_PLACED,
    // the Job controller's reasons
    COMPLETIONS_REACHED,
    "SuccessPolicy",
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "PodFailurePolicy",
    "MaxFailedIndexesExceeded",
    "FailedIndexes",
    "JobSuspended",
    "JobResumed",
    // Courier's reasons
    REASON_MIRROR_CREATED,
    REASON_PLACED,
    REASON_NO_ELIGIBLE_CLUSTER,
    REASON_MIRROR_REJECTED,
    REASON_NAMESPACE_MISSING,
    REASON_CLUSTER_REMOVED,
    JOB_REASON_DISPATCH_FAILED,
    // the Job controller's messages
    COMPLETIONS_REACHED_MESSAGE,
    "Job has reached the specified backoff limit",
    "Job was active longer than specified deadline",
    "Job has exceeded the specified maximal number of failed indexes",
    "Job suspended",
    "Job resumed",
    "Matched rules at index 0",
];

/// A text value: one of [`KNOWN`] (no allocation) or any other, boxed.
#[derive(Clone, PartialEq, Eq)]
enum Word {
    Known(&'static str),
    Other(Box<str>),
}

impl Word {
    fn new(text: String) -> Self {
        match KNOWN.iter().find(|k| **k == text) {
            Some(k) => Word::Known(k),
            None => Word::Other(text.into_boxed_str()),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            Word::Known(k) => k,
            Word::Other(s) => s,
        }
    }
}

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// No time (a condition time is `Option`al).
const NO_TIME: i64 = i64::MIN;

/// A condition time as whole seconds; `None` when it has a fraction of a second (the condition is
/// then kept whole).
fn seconds(time: Option<&Time>) -> Option<i64> {
    match time {
        None => Some(NO_TIME),
        Some(t) if t.0.subsec_nanosecond() == 0 => Some(t.0.as_second()),
        Some(_) => None,
    }
}

fn time(seconds: i64) -> Option<Time> {
    if seconds == NO_TIME {
        return None;
    }
    // Made from a valid `Timestamp`'s seconds, so always in range; the fallback is not reached.
    Some(Time(
        Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH),
    ))
}

/// A compact time (whole seconds) as `Time` encodes it (`None` for no time): RFC 3339 to the
/// second in UTC, written straight from the civil time for years 1000-9999 (jiff's `strtime`
/// parses its format string and goes through its general printer on every call), through `Time`
/// for any other year.
fn time_json(seconds: i64) -> Result<Option<Value>, serde_json::Error> {
    let Some(t) = time(seconds) else {
        return Ok(None);
    };
    let dt = jiff::tz::Offset::UTC.to_datetime(t.0);
    let year = dt.year();
    if !(1000..=9999).contains(&year) {
        return serde_json::to_value(&t).map(Some);
    }
    let mut out = String::with_capacity(20);
    let two = |out: &mut String, n: i8, sep: char| {
        out.push(char::from(b'0' + (n / 10) as u8));
        out.push(char::from(b'0' + (n % 10) as u8));
        out.push(sep);
    };
    for d in [1000, 100, 10, 1] {
        out.push(char::from(b'0' + ((year / d) % 10) as u8));
    }
    out.push('-');
    two(&mut out, dt.month(), '-');
    two(&mut out, dt.day(), 'T');
    two(&mut out, dt.hour(), ':');
    two(&mut out, dt.minute(), ':');
    two(&mut out, dt.second(), 'Z');
    Ok(Some(Value::String(out)))
}

/// One condition, compact.
#[derive(Clone, PartialEq, Eq)]
struct Small {
    type_: Word,
    status: Word,
    reason: Option<Word>,
    message: Option<Word>,
    probe: i64,
    transition: i64,
}

#[derive(Clone, PartialEq)]
enum Condition {
    Small(Small),
    /// A condition with a time finer than a second: kept as it is.
    Whole(Box<JobCondition>),
}

impl Condition {
    fn new(c: JobCondition) -> Self {
        match (
            seconds(c.last_probe_time.as_ref()),
            seconds(c.last_transition_time.as_ref()),
        ) {
            (Some(probe), Some(transition)) => Condition::Small(Small {
                type_: Word::new(c.type_),
                status: Word::new(c.status),
                reason: c.reason.map(Word::new),
                message: c.message.map(Word::new),
                probe,
                transition,
            }),
            _ => Condition::Whole(Box::new(c)),
        }
    }

    fn expand(&self) -> JobCondition {
        match self {
            Condition::Small(s) => JobCondition {
                type_: s.type_.as_str().to_string(),
                status: s.status.as_str().to_string(),
                reason: s.reason.as_ref().map(|r| r.as_str().to_string()),
                message: s.message.as_ref().map(|m| m.as_str().to_string()),
                last_probe_time: time(s.probe),
                last_transition_time: time(s.transition),
            },
            Condition::Whole(c) => (**c).clone(),
        }
    }

    /// `serde_json::to_value(self.expand())`, without the copy: a compact condition's text goes
    /// into the value once and its times are formatted by [`time_json`].
    fn to_json(&self) -> Result<Value, serde_json::Error> {
        let s = match self {
            Condition::Small(s) => s,
            Condition::Whole(c) => return serde_json::to_value(c),
        };
        let text = |w: &Word| Value::String(w.as_str().to_string());
        let mut m = Map::new();
        if let Some(t) = time_json(s.probe)? {
            m.insert("lastProbeTime".into(), t);
        }
        if let Some(t) = time_json(s.transition)? {
            m.insert("lastTransitionTime".into(), t);
        }
        if let Some(w) = &s.message {
            m.insert("message".into(), text(w));
        }
        if let Some(w) = &s.reason {
            m.insert("reason".into(), text(w));
        }
        m.insert("status".into(), text(&s.status));
        m.insert("type".into(), text(&s.type_));
        Ok(Value::Object(m))
    }

    fn type_(&self) -> &str {
        match self {
            Condition::Small(s) => s.type_.as_str(),
            Condition::Whole(c) => &c.type_,
        }
    }

    fn status(&self) -> &str {
        match self {
            Condition::Small(s) => s.status.as_str(),
            Condition::Whole(c) => &c.status,
        }
    }
}

/// What a Job rarely has.
#[derive(Clone, Debug, PartialEq, Default)]
struct Rare {
    completed_indexes: Option<String>,
    failed_indexes: Option<String>,
    uncounted_terminated_pods: Option<UncountedTerminatedPods>,
}

/// A Job's status as a cache keeps it (see the module docs). The counters are read directly;
/// conditions through [`CachedStatus::condition_is_true`] or the full form, [`CachedStatus::expand`].
#[derive(Clone, PartialEq, Default)]
pub struct CachedStatus {
    pub active: Option<i32>,
    pub ready: Option<i32>,
    pub succeeded: Option<i32>,
    pub failed: Option<i32>,
    pub terminating: Option<i32>,
    pub start_time: Option<Time>,
    pub completion_time: Option<Time>,
    conditions: Option<Box<[Condition]>>,
    /// `uncountedTerminatedPods: {}` (what the Job controller writes): kept without [`Rare`].
    uncounted_empty: bool,
    rare: Option<Box<Rare>>,
}

impl CachedStatus {
    /// The full status this was made from.
    pub fn expand(&self) -> JobStatus {
        JobStatus {
            conditions: self
                .conditions
                .as_deref()
                .map(|c| c.iter().map(Condition::expand).collect()),
            ..self.expand_but_conditions()
        }
    }

    /// [`Self::expand`] without the conditions.
    fn expand_but_conditions(&self) -> JobStatus {
        let rare = self.rare.as_deref();
        JobStatus {
            active: self.active,
            ready: self.ready,
            succeeded: self.succeeded,
            failed: self.failed,
            terminating: self.terminating,
            start_time: self.start_time.clone(),
            completion_time: self.completion_time.clone(),
            conditions: None,
            completed_indexes: rare.and_then(|r| r.completed_indexes.clone()),
            failed_indexes: rare.and_then(|r| r.failed_indexes.clone()),
            uncounted_terminated_pods: if self.uncounted_empty {
                Some(UncountedTerminatedPods::default())
            } else {
                rare.and_then(|r| r.uncounted_terminated_pods.clone())
            },
        }
    }

    /// `completedIndexes` and `failedIndexes`.
    fn indexes(&self) -> (Option<&String>, Option<&String>) {
        let rare = self.rare.as_deref();
        (
            rare.and_then(|r| r.completed_indexes.as_ref()),
            rare.and_then(|r| r.failed_indexes.as_ref()),
        )
    }

    /// Whether `self` equals `other` but for the gauges of running pods (`active`, `ready`,
    /// `terminating`; when `gauges`) and the interim conditions (`SuccessCriteriaMet`,
    /// `FailureTarget`, whatever their status; when `interim`), and whatever the uncounted pods
    /// (status translation does not copy them). No conditions and an empty list are alike (status
    /// translation reads both as none).
    pub fn equal_but(&self, other: &CachedStatus, gauges: bool, interim: bool) -> bool {
        let kept = |c: &&Condition| {
            !(interim
                && [condition::SUCCESS_CRITERIA_MET, condition::FAILURE_TARGET]
                    .contains(&c.type_()))
        };
        fn all(s: &CachedStatus) -> &[Condition] {
            s.conditions.as_deref().unwrap_or_default()
        }
        (gauges
            || (self.active == other.active
                && self.ready == other.ready
                && self.terminating == other.terminating))
            && self.succeeded == other.succeeded
            && self.failed == other.failed
            && self.start_time == other.start_time
            && self.completion_time == other.completion_time
            && self.indexes() == other.indexes()
            && all(self)
                .iter()
                .filter(kept)
                .eq(all(other).iter().filter(kept))
    }

    /// The JSON merge patch of `/status` from `old` to `self`: the same as
    /// [`crate::merge_patch::status_patch`] of the two, built member by member: a member equal on
    /// both sides encodes alike and is not encoded at all (the times above all: formatting them was
    /// most of a status write's patch), an absent one is `null`, the others are encoded and diffed
    /// alone. The old conditions are never encoded. A merge patch carries a list whole or not at all:
    /// - equal conditions here are equal encoded: not in the patch;
    /// - compact conditions (times in whole seconds, as `Time` encodes them) that differ here differ
    ///   encoded: the new list (or `null`) is the patch's;
    /// - with a time finer than a second on either side, two lists may differ here and encode
    ///   alike (the fraction is not encoded): both are encoded and compared, as before.
    pub fn patch_from(&self, old: &CachedStatus) -> Result<Value, serde_json::Error> {
        let same = self.conditions == old.conditions;
        if !same && (self.has_fine_times() || old.has_fine_times()) {
            return status_patch(old, self);
        }
        let mut patch = Map::new();
        let p = &mut patch;
        member(p, "active", old.active.as_ref(), self.active.as_ref())?;
        member(p, "ready", old.ready.as_ref(), self.ready.as_ref())?;
        member(
            p,
            "succeeded",
            old.succeeded.as_ref(),
            self.succeeded.as_ref(),
        )?;
        member(p, "failed", old.failed.as_ref(), self.failed.as_ref())?;
        member(
            p,
            "terminating",
            old.terminating.as_ref(),
            self.terminating.as_ref(),
        )?;
        member(
            p,
            "startTime",
            old.start_time.as_ref(),
            self.start_time.as_ref(),
        )?;
        let (o, n) = (old.completion_time.as_ref(), self.completion_time.as_ref());
        member(p, "completionTime", o, n)?;
        let (o, n) = (old.rare.as_deref(), self.rare.as_deref());
        let (oc, nc) = (
            o.and_then(|r| r.completed_indexes.as_ref()),
            n.and_then(|r| r.completed_indexes.as_ref()),
        );
        member(p, "completedIndexes", oc, nc)?;
        let (of, nf) = (
            o.and_then(|r| r.failed_indexes.as_ref()),
            n.and_then(|r| r.failed_indexes.as_ref()),
        );
        member(p, "failedIndexes", of, nf)?;
        member(
            p,
            "uncountedTerminatedPods",
            old.uncounted(),
            self.uncounted(),
        )?;
        if !same {
            let conditions = match self.conditions.as_deref() {
                Some(c) => {
                    Value::Array(c.iter().map(Condition::to_json).collect::<Result<_, _>>()?)
                }
                None => Value::Null,
            };
            patch.insert("conditions".into(), conditions);
        }
        Ok(Value::Object(patch))
    }

    /// `uncountedTerminatedPods` as [`Self::expand`] gives it, without a copy.
    fn uncounted(&self) -> Option<&UncountedTerminatedPods> {
        if self.uncounted_empty {
            return Some(&NO_UNCOUNTED_PODS);
        }
        self.rare
            .as_deref()
            .and_then(|r| r.uncounted_terminated_pods.as_ref())
    }

    /// A condition keeps a time finer than a second (kept whole).
    fn has_fine_times(&self) -> bool {
        self.conditions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|c| matches!(c, Condition::Whole(_)))
    }

    /// Whether a condition of type `type_` is present with status True.
    pub fn condition_is_true(&self, type_: &str) -> bool {
        self.conditions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|c| c.type_() == type_)
            .is_some_and(|c| c.status() == "True")
    }

    /// Pods that finished and are not counted yet (`uncountedTerminatedPods` lists a UID).
    pub fn uncounted_pods(&self) -> bool {
        self.rare
            .as_deref()
            .and_then(|r| r.uncounted_terminated_pods.as_ref())
            .is_some_and(uncounted_pods)
    }

    /// How many conditions it has.
    pub fn condition_count(&self) -> usize {
        self.conditions.as_deref().map_or(0, <[Condition]>::len)
    }
}

/// `uncountedTerminatedPods` lists a pod UID: the Job controller has taken finished pods out of
/// `active` and counts them in `succeeded`/`failed` in a later write.
pub fn uncounted_pods(u: &UncountedTerminatedPods) -> bool {
    u.succeeded.as_ref().is_some_and(|s| !s.is_empty())
        || u.failed.as_ref().is_some_and(|f| !f.is_empty())
}

/// `uncountedTerminatedPods: {}`.
static NO_UNCOUNTED_PODS: UncountedTerminatedPods = UncountedTerminatedPods {
    failed: None,
    succeeded: None,
};

/// Adds to `patch` the member `key` of the merge patch from `old` to `new` (one member of a status,
/// absent when `None`), as [`merge_patch`] of the two statuses encoded whole would have it. Equal
/// values encode alike (encoding is deterministic), so they are not encoded.
fn member<T: Serialize + PartialEq>(
    patch: &mut Map<String, Value>,
    key: &str,
    old: Option<&T>,
    new: Option<&T>,
) -> Result<(), serde_json::Error> {
    if old == new {
        return Ok(());
    }
    let diff = match (old, new) {
        (_, None) => Some(Value::Null),
        (None, Some(n)) => Some(serde_json::to_value(n)?),
        (Some(o), Some(n)) => merge_patch(&serde_json::to_value(o)?, &serde_json::to_value(n)?),
    };
    if let Some(diff) = diff {
        patch.insert(key.into(), diff);
    }
    Ok(())
}

impl From<JobStatus> for CachedStatus {
    fn from(s: JobStatus) -> Self {
        let uncounted_empty =
            s.uncounted_terminated_pods == Some(UncountedTerminatedPods::default());
        let rare = Rare {
            completed_indexes: s.completed_indexes,
            failed_indexes: s.failed_indexes,
            uncounted_terminated_pods: s.uncounted_terminated_pods.filter(|_| !uncounted_empty),
        };
        Self {
            active: s.active,
            ready: s.ready,
            succeeded: s.succeeded,
            failed: s.failed,
            terminating: s.terminating,
            start_time: s.start_time,
            completion_time: s.completion_time,
            conditions: s
                .conditions
                .map(|c| c.into_iter().map(Condition::new).collect()),
            uncounted_empty,
            rare: (rare != Rare::default()).then(|| Box::new(rare)),
        }
    }
}

impl From<&CachedStatus> for JobStatus {
    fn from(s: &CachedStatus) -> Self {
        s.expand()
    }
}

impl fmt::Debug for CachedStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.expand(), f)
    }
}

impl Serialize for CachedStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.expand().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for CachedStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        JobStatus::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests;
