//! The Job status as the controller holds it, and its JSON form (field presence as the real
//! controller's writes: see point 1 of the job traces in `testdata/README.md`).

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::clock::api_time;

pub(crate) const SUSPENDED: &str = "Suspended";
pub(crate) const FAILURE_TARGET: &str = "FailureTarget";
pub(crate) const FAILED: &str = "Failed";
pub(crate) const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
pub(crate) const COMPLETE: &str = "Complete";

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Condition {
    pub kind: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
    /// lastProbeTime == lastTransitionTime (the controller sets both from one clock read).
    pub time: Timestamp,
}

impl Condition {
    pub fn new(kind: &str, status: bool, reason: &str, message: &str, time: Timestamp) -> Self {
        Self {
            kind: kind.to_owned(),
            status,
            reason: reason.to_owned(),
            message: message.to_owned(),
            time,
        }
    }

    fn to_json(&self) -> Value {
        let t = api_time(self.time);
        json!({
            "type": self.kind,
            "status": if self.status { "True" } else { "False" },
            "lastProbeTime": t,
            "lastTransitionTime": t,
            "reason": self.reason,
            "message": self.message,
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Status {
    /// False until the controller's first write (the created object has `status: {}`).
    pub written: bool,
    pub conditions: Vec<Condition>,
    /// Model value (quantized, see `clock::quantize`); written truncated to the second.
    pub start_time: Option<Timestamp>,
    pub completion_time: Option<Timestamp>,
    pub active: i32,
    pub succeeded: i32,
    pub failed: i32,
    pub terminating: i32,
    pub ready: i32,
    pub completed_indexes: String,
    pub failed_indexes: Option<String>,
    pub unc_succeeded: Vec<String>,
    pub unc_failed: Vec<String>,
}

impl Status {
    pub fn condition(&self, kind: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.kind == kind)
    }

    pub fn has_true(&self, kind: &str) -> bool {
        self.condition(kind).is_some_and(|c| c.status)
    }

    /// `util.IsJobFinished`.
    pub fn is_finished(&self) -> bool {
        self.has_true(COMPLETE) || self.has_true(FAILED)
    }

    /// `ensureJobConditionStatus`: updates a condition of that type (new transition time) when status,
    /// reason or message differ, appends it when absent unless it would be False. Returns whether the
    /// list changed.
    pub fn ensure_condition(
        &mut self,
        kind: &str,
        status: bool,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) -> bool {
        if let Some(c) = self.conditions.iter_mut().find(|c| c.kind == kind) {
            if c.status != status || c.reason != reason || c.message != message {
                *c = Condition::new(kind, status, reason, message, now);
                return true;
            }
            return false;
        }
        if status {
            self.conditions
                .push(Condition::new(kind, status, reason, message, now));
            return true;
        }
        false
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        if !self.written {
            return Value::Object(m);
        }
        if !self.conditions.is_empty() {
            m.insert(
                "conditions".into(),
                self.conditions.iter().map(Condition::to_json).collect(),
            );
        }
        if let Some(t) = self.start_time {
            m.insert("startTime".into(), api_time(t).into());
        }
        if let Some(t) = self.completion_time {
            m.insert("completionTime".into(), api_time(t).into());
        }
        for (k, v) in [
            ("active", self.active),
            ("succeeded", self.succeeded),
            ("failed", self.failed),
        ] {
            if v != 0 {
                m.insert(k.into(), v.into());
            }
        }
        m.insert("terminating".into(), self.terminating.into());
        if !self.completed_indexes.is_empty() {
            m.insert(
                "completedIndexes".into(),
                self.completed_indexes.clone().into(),
            );
        }
        if let Some(fi) = &self.failed_indexes {
            m.insert("failedIndexes".into(), fi.clone().into());
        }
        let mut unc = Map::new();
        if !self.unc_succeeded.is_empty() {
            unc.insert("succeeded".into(), self.unc_succeeded.clone().into());
        }
        if !self.unc_failed.is_empty() {
            unc.insert("failed".into(), self.unc_failed.clone().into());
        }
        m.insert("uncountedTerminatedPods".into(), Value::Object(unc));
        m.insert("ready".into(), self.ready.into());
        Value::Object(m)
    }
}
