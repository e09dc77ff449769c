//! The one vocabulary for where a Job is in its life, used by the CLI (`courier jobs`, `describe`), the
//! web view, the controller's snapshots and the metrics' `state` label alike.
//!
//! A phase is read from facts any side has: whether the Job is being deleted, its `spec.suspend`, its
//! status, and whether Courier has placed it (an origin with a placement intent; a mirror always is).

use std::fmt;

use serde::Serialize;

use crate::job::{Finished, StatusFacts, condition, finished, is_true};

/// Where a Job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum JobPhase {
    /// Not placed on a worker yet (no cluster could take it, or not reconciled yet).
    Pending,
    /// Placed (a mirror is or is being created) but no pod has started yet.
    Dispatched,
    /// Pods have started and the Job has not finished. Between pods (one finished, the next not yet
    /// started) it is still running as far as its owner is concerned.
    Running,
    /// Suspended by its owner (`spec.suspend`), or shown suspended by its controller.
    Suspended,
    /// Its success or failure criteria are met (`SuccessCriteriaMet`/`FailureTarget`); the terminal
    /// condition follows once its pods have stopped.
    Finishing,
    Complete,
    Failed,
    /// Being deleted (Courier is cleaning up its mirror).
    Deleting,
}

/// Every phase, in life order.
pub const ALL_PHASES: [JobPhase; 8] = [
    JobPhase::Pending,
    JobPhase::Dispatched,
    JobPhase::Running,
    JobPhase::Suspended,
    JobPhase::Finishing,
    JobPhase::Complete,
    JobPhase::Failed,
    JobPhase::Deleting,
];

/// The facts a phase is read from.
#[derive(Debug, Clone, Copy)]
pub struct PhaseFacts<'a> {
    /// The Job has a deletionTimestamp.
    pub deleting: bool,
    /// `spec.suspend` is true.
    pub suspend: bool,
    /// The status, full or cached.
    pub status: &'a dyn StatusFacts,
    /// Courier has placed it (origin: a placement intent exists; mirror: always true).
    pub placed: bool,
}

impl JobPhase {
    /// The phase the facts show.
    pub fn of(facts: PhaseFacts<'_>) -> JobPhase {
        let s = facts.status;
        if facts.deleting {
            return JobPhase::Deleting;
        }
        match finished(s) {
            Some(Finished::Complete) => return JobPhase::Complete,
            Some(Finished::Failed) => return JobPhase::Failed,
            None => {}
        }
        if is_true(s, condition::SUCCESS_CRITERIA_MET) || is_true(s, condition::FAILURE_TARGET) {
            return JobPhase::Finishing;
        }
        if facts.suspend || is_true(s, condition::SUSPENDED) {
            return JobPhase::Suspended;
        }
        if s.started() {
            JobPhase::Running
        } else if facts.placed {
            JobPhase::Dispatched
        } else {
            JobPhase::Pending
        }
    }

    /// The name shown to users (`Running`).
    pub fn as_str(self) -> &'static str {
        match self {
            JobPhase::Pending => "Pending",
            JobPhase::Dispatched => "Dispatched",
            JobPhase::Running => "Running",
            JobPhase::Suspended => "Suspended",
            JobPhase::Finishing => "Finishing",
            JobPhase::Complete => "Complete",
            JobPhase::Failed => "Failed",
            JobPhase::Deleting => "Deleting",
        }
    }

    /// The Prometheus label value (`running`).
    pub fn label(self) -> &'static str {
        match self {
            JobPhase::Pending => "pending",
            JobPhase::Dispatched => "dispatched",
            JobPhase::Running => "running",
            JobPhase::Suspended => "suspended",
            JobPhase::Finishing => "finishing",
            JobPhase::Complete => "complete",
            JobPhase::Failed => "failed",
            JobPhase::Deleting => "deleting",
        }
    }

    /// Parses a user-given phase name, case-insensitively (`--phase running`).
    pub fn parse(s: &str) -> Option<JobPhase> {
        ALL_PHASES
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s))
    }

    /// The Job will not change any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, JobPhase::Complete | JobPhase::Failed)
    }
}

impl fmt::Display for JobPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn status(v: Value) -> k8s_openapi::api::batch::v1::JobStatus {
        serde_json::from_value(v).expect("status")
    }

    fn phase(deleting: bool, suspend: bool, placed: bool, s: Value) -> JobPhase {
        JobPhase::of(PhaseFacts {
            deleting,
            suspend,
            status: &status(s),
            placed,
        })
    }

    fn cond(t: &str) -> Value {
        json!({"type": t, "status": "True"})
    }

    /// A status with these condition types True.
    fn with(types: &[&str]) -> Value {
        json!({"conditions": types.iter().map(|t| cond(t)).collect::<Vec<_>>()})
    }

    #[test]
    fn life_of_a_job() {
        assert_eq!(phase(false, false, false, json!({})), JobPhase::Pending);
        let placed = [
            (json!({}), JobPhase::Dispatched),
            (json!({"active": 1}), JobPhase::Running),
            // Between pods: one succeeded, the next not started yet.
            (json!({"active": 0, "succeeded": 1}), JobPhase::Running),
            (json!({"failed": 1}), JobPhase::Running),
            (with(&["SuccessCriteriaMet"]), JobPhase::Finishing),
            (with(&["FailureTarget"]), JobPhase::Finishing),
            (
                with(&["SuccessCriteriaMet", "Complete"]),
                JobPhase::Complete,
            ),
            (with(&["FailureTarget", "Failed"]), JobPhase::Failed),
        ];
        for (s, want) in placed {
            assert_eq!(phase(false, false, true, s.clone()), want, "{s}");
        }
    }

    #[test]
    fn suspension_and_deletion() {
        assert_eq!(phase(false, true, false, json!({})), JobPhase::Suspended);
        assert_eq!(
            phase(false, false, true, with(&["Suspended"])),
            JobPhase::Suspended,
            "a controller showing Suspended=True"
        );
        assert_eq!(
            phase(
                false,
                false,
                true,
                json!({"conditions": [{"type": "Suspended", "status": "False"}], "active": 1})
            ),
            JobPhase::Running,
            "resumed"
        );
        // Finished beats suspended; deletion beats everything.
        assert_eq!(
            phase(false, true, true, with(&["FailureTarget", "Failed"])),
            JobPhase::Failed
        );
        assert_eq!(
            phase(true, false, true, with(&["SuccessCriteriaMet", "Complete"])),
            JobPhase::Deleting
        );
    }

    #[test]
    fn names_labels_and_parsing_agree() {
        for p in ALL_PHASES {
            assert_eq!(p.label(), p.as_str().to_ascii_lowercase());
            assert_eq!(JobPhase::parse(p.label()), Some(p));
            assert_eq!(JobPhase::parse(&p.as_str().to_ascii_uppercase()), Some(p));
            assert_eq!(p.to_string(), p.as_str());
        }
        assert_eq!(JobPhase::parse("Succeeded"), None);
        let terminal: Vec<JobPhase> = ALL_PHASES.into_iter().filter(|p| p.is_terminal()).collect();
        assert_eq!(terminal, vec![JobPhase::Complete, JobPhase::Failed]);
    }
}
