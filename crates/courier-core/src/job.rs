//! The facts about a batch/v1 Job that Courier's decisions need: spec essentials read from JSON (so a
//! Job from any API version is understood) and condition helpers over the typed status.

use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};

use crate::job_status::CachedStatus;
use serde_json::Value;

/// Job condition types (`status.conditions[].type`).
pub mod condition {
    pub const SUSPENDED: &str = "Suspended";
    pub const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
    pub const FAILURE_TARGET: &str = "FailureTarget";
    pub const COMPLETE: &str = "Complete";
    pub const FAILED: &str = "Failed";

    /// The types whose True status can never be taken back.
    pub const IRREVERSIBLE: [&str; 4] = [SUCCESS_CRITERIA_MET, FAILURE_TARGET, COMPLETE, FAILED];
}

/// The spec fields that status translation and placement decisions depend on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobSpecEssentials {
    /// `spec.suspend` (absent = false).
    pub suspend: bool,
    pub completions: Option<i32>,
    pub parallelism: Option<i32>,
    /// `spec.completionMode == Indexed`.
    pub indexed: bool,
    pub backoff_limit_per_index: Option<i32>,
    /// `spec.successPolicy` is set (then `Complete` requires `SuccessCriteriaMet`).
    pub has_success_policy: bool,
    pub manual_selector: bool,
}

impl JobSpecEssentials {
    /// Reads the essentials from a Job's `spec` JSON. Missing or mistyped fields read as unset.
    pub fn from_spec_json(spec: &Value) -> Self {
        let int = |key: &str| {
            spec.get(key)
                .and_then(Value::as_i64)
                .and_then(|v| i32::try_from(v).ok())
        };
        let flag = |key: &str| spec.get(key).and_then(Value::as_bool).unwrap_or(false);
        Self {
            suspend: flag("suspend"),
            completions: int("completions"),
            parallelism: int("parallelism"),
            indexed: spec.get("completionMode").and_then(Value::as_str) == Some("Indexed"),
            backoff_limit_per_index: int("backoffLimitPerIndex"),
            has_success_policy: spec.get("successPolicy").is_some_and(|p| !p.is_null()),
            manual_selector: flag("manualSelector"),
        }
    }
}

/// The condition of type `type_`, if present.
pub fn find_condition<'a>(status: &'a JobStatus, type_: &str) -> Option<&'a JobCondition> {
    status
        .conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_ == type_)
}

/// What decisions and phases read of a status, whichever form holds it: the full [`JobStatus`] or
/// the cached one ([`CachedStatus`]).
pub trait StatusFacts: std::fmt::Debug {
    /// Whether a condition of type `type_` is present with status True.
    fn condition_is_true(&self, type_: &str) -> bool;
    /// Whether any pod ran: active, succeeded or failed above zero.
    fn started(&self) -> bool;
}

fn any_pod(counts: [Option<i32>; 3]) -> bool {
    counts.iter().any(|c| c.unwrap_or(0) > 0)
}

impl StatusFacts for JobStatus {
    fn condition_is_true(&self, type_: &str) -> bool {
        find_condition(self, type_).is_some_and(|c| c.status == "True")
    }

    fn started(&self) -> bool {
        any_pod([self.active, self.succeeded, self.failed])
    }
}

impl StatusFacts for CachedStatus {
    fn condition_is_true(&self, type_: &str) -> bool {
        CachedStatus::condition_is_true(self, type_)
    }

    fn started(&self) -> bool {
        any_pod([self.active, self.succeeded, self.failed])
    }
}

/// Whether a condition of type `type_` is present with status True.
pub fn is_true(status: &(impl StatusFacts + ?Sized), type_: &str) -> bool {
    status.condition_is_true(type_)
}

/// How a Job ended (its terminal condition) and its point of no return (its interim condition): the
/// outcome vocabulary of every [`Workload`](crate::workload::Workload), here with the Job's
/// condition types.
pub use crate::workload::{Finished, Interim};

impl Finished {
    /// The terminal condition type.
    pub fn condition_type(self) -> &'static str {
        match self {
            Finished::Complete => condition::COMPLETE,
            Finished::Failed => condition::FAILED,
        }
    }

    /// The interim condition that must precede (or accompany) this terminal one.
    pub fn interim(self) -> Interim {
        match self {
            Finished::Complete => Interim::SuccessCriteriaMet,
            Finished::Failed => Interim::FailureTarget,
        }
    }
}

impl Interim {
    /// The interim condition type.
    pub fn condition_type(self) -> &'static str {
        match self {
            Interim::SuccessCriteriaMet => condition::SUCCESS_CRITERIA_MET,
            Interim::FailureTarget => condition::FAILURE_TARGET,
        }
    }

    /// The terminal state this interim condition commits to.
    pub fn finished(self) -> Finished {
        match self {
            Interim::SuccessCriteriaMet => Finished::Complete,
            Interim::FailureTarget => Finished::Failed,
        }
    }
}

/// `Complete` or `Failed` if either is True. (A valid status never has both; `Failed` wins if a
/// malformed one does, since claiming success that did not happen is the worse lie.)
pub fn finished(status: &(impl StatusFacts + ?Sized)) -> Option<Finished> {
    if is_true(status, condition::FAILED) {
        Some(Finished::Failed)
    } else if is_true(status, condition::COMPLETE) {
        Some(Finished::Complete)
    } else {
        None
    }
}

/// `SuccessCriteriaMet` or `FailureTarget` if either is True (`FailureTarget` wins on a malformed
/// status with both).
pub fn interim(status: &(impl StatusFacts + ?Sized)) -> Option<Interim> {
    if is_true(status, condition::FAILURE_TARGET) {
        Some(Interim::FailureTarget)
    } else if is_true(status, condition::SUCCESS_CRITERIA_MET) {
        Some(Interim::SuccessCriteriaMet)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn essentials_from_json() {
        let e = JobSpecEssentials::from_spec_json(&json!({
            "suspend": true, "completions": 4, "parallelism": 2, "completionMode": "Indexed",
            "backoffLimitPerIndex": 1, "successPolicy": {"rules": [{"succeededCount": 1}]},
            "manualSelector": false, "template": {}
        }));
        assert_eq!(
            e,
            JobSpecEssentials {
                suspend: true,
                completions: Some(4),
                parallelism: Some(2),
                indexed: true,
                backoff_limit_per_index: Some(1),
                has_success_policy: true,
                manual_selector: false,
            }
        );
        assert_eq!(
            JobSpecEssentials::from_spec_json(&json!(null)),
            JobSpecEssentials::default()
        );
        let odd =
            JobSpecEssentials::from_spec_json(&json!({"suspend": "yes", "completions": 1e12}));
        assert!(!odd.suspend);
        assert_eq!(odd.completions, None);
    }

    #[test]
    fn finished_and_interim() {
        let status: JobStatus = serde_json::from_value(json!({"conditions": [
            {"type": "FailureTarget", "status": "True"},
            {"type": "Complete", "status": "False"}
        ]}))
        .expect("status");
        assert_eq!(finished(&status), None);
        assert_eq!(interim(&status), Some(Interim::FailureTarget));
        assert_eq!(Interim::FailureTarget.finished(), Finished::Failed);
        assert_eq!(
            Finished::Complete.interim().condition_type(),
            "SuccessCriteriaMet"
        );
    }
}
