//! The parts of a Job object the simulated controller reads, parsed leniently: a missing or malformed
//! field takes the value the API server would have defaulted (Jobs reaching the simulator were
//! admitted by kubesim's validation, so this only matters for hand-built test objects).

use serde_json::Value;

use super::pods::Behaviour;
use crate::json::{get_i64, get_str};
use crate::kinds::job::indexes::IndexSet;

/// The reserved `spec.managedBy` value meaning "the built-in Job controller".
pub const BUILTIN_MANAGER: &str = "kubernetes.io/job-controller";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PfpAction {
    FailJob,
    FailIndex,
    Ignore,
    Count,
    /// An action this model does not know: the rule never applies (as in the real controller).
    Unknown,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PfpMatch {
    ExitCodes {
        container: Option<String>,
        not_in: bool,
        values: Vec<i64>,
    },
    Conditions(Vec<(String, String)>),
    Nothing,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PfpRule {
    pub action: PfpAction,
    pub on: PfpMatch,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SuccessRule {
    /// `None` when the rule has no `succeededIndexes`; `Some(empty)` when the list did not parse
    /// (the controller then skips the rule).
    pub indexes: Option<IndexSet>,
    pub count: Option<i64>,
}

#[derive(Debug, Clone)]
pub(crate) struct JobSpec {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub generation: i64,
    pub deleting: bool,
    /// Deleted with `propagationPolicy: Orphan` (the `orphan` finalizer): the garbage collector
    /// leaves the pods running.
    pub orphaning: bool,
    pub managed_elsewhere: bool,
    pub completions: Option<i32>,
    pub parallelism: i32,
    pub indexed: bool,
    pub backoff_limit: i32,
    pub backoff_limit_per_index: Option<i32>,
    pub max_failed_indexes: Option<i32>,
    pub active_deadline: Option<i64>,
    pub suspend: bool,
    pub pod_failure_policy: Option<Vec<PfpRule>>,
    pub success_policy: Option<Vec<SuccessRule>>,
    /// `podReplacementPolicy: Failed` (or a pod failure policy): terminating pods are not replaced
    /// and are not considered failed until they reach phase Failed.
    pub only_replace_failed: bool,
    pub restart_on_failure: bool,
    pub containers: Vec<String>,
    pub behaviour: Behaviour,
}

fn clamp_i32(v: i64) -> i32 {
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

/// Whether another controller owns this Job (`spec.managedBy` set to anything but the reserved value).
pub fn is_managed_elsewhere(job: &Value) -> bool {
    match job.pointer("/spec/managedBy") {
        Some(Value::String(s)) => s != BUILTIN_MANAGER,
        _ => false,
    }
}

impl JobSpec {
    pub fn parse(job: &Value) -> Self {
        let spec = job.get("spec").unwrap_or(&Value::Null);
        let completions = get_i64(spec, &["completions"]).map(clamp_i32);
        let parallelism = get_i64(spec, &["parallelism"]).map_or(1, clamp_i32).max(0);
        let per_index = get_i64(spec, &["backoffLimitPerIndex"]).map(clamp_i32);
        let default_backoff = if per_index.is_some() { i32::MAX } else { 6 };
        let pod_failure_policy = spec
            .pointer("/podFailurePolicy/rules")
            .and_then(Value::as_array)
            .map(|rules| rules.iter().map(parse_pfp_rule).collect::<Vec<_>>());
        let success_policy =
            spec.pointer("/successPolicy/rules")
                .and_then(Value::as_array)
                .map(|rules| {
                    rules
                        .iter()
                        .map(|r| SuccessRule {
                            indexes: r.get("succeededIndexes").and_then(Value::as_str).map(|s| {
                                parse_indexes_like_controller(s, completions.unwrap_or(0))
                            }),
                            count: r.get("succeededCount").and_then(Value::as_i64),
                        })
                        .collect()
                });
        let only_replace_failed = get_str(spec, &["podReplacementPolicy"]) == Some("Failed")
            || pod_failure_policy.is_some();
        let template = spec.get("template").unwrap_or(&Value::Null);
        let containers = template
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_owned))
                    .collect::<Vec<_>>()
            })
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| vec!["main".to_owned()]);
        let grace = template
            .pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64);
        Self {
            name: get_str(job, &["metadata", "name"])
                .unwrap_or("job")
                .to_owned(),
            namespace: get_str(job, &["metadata", "namespace"])
                .unwrap_or("default")
                .to_owned(),
            uid: get_str(job, &["metadata", "uid"]).unwrap_or("").to_owned(),
            generation: get_i64(job, &["metadata", "generation"]).unwrap_or(1),
            deleting: job
                .pointer("/metadata/deletionTimestamp")
                .is_some_and(|v| !v.is_null()),
            orphaning: crate::json::finalizers(job).iter().any(|f| f == "orphan"),
            managed_elsewhere: is_managed_elsewhere(job),
            completions,
            parallelism,
            indexed: get_str(spec, &["completionMode"]) == Some("Indexed") && completions.is_some(),
            backoff_limit: get_i64(spec, &["backoffLimit"]).map_or(default_backoff, clamp_i32),
            backoff_limit_per_index: per_index,
            max_failed_indexes: get_i64(spec, &["maxFailedIndexes"]).map(clamp_i32),
            active_deadline: get_i64(spec, &["activeDeadlineSeconds"]),
            suspend: spec
                .get("suspend")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            pod_failure_policy,
            success_policy,
            only_replace_failed,
            restart_on_failure: template
                .pointer("/spec/restartPolicy")
                .and_then(Value::as_str)
                == Some("OnFailure"),
            containers,
            behaviour: Behaviour::from_annotations(
                template.pointer("/metadata/annotations"),
                grace,
            ),
        }
    }

    pub fn per_index(&self) -> bool {
        self.backoff_limit_per_index.is_some()
    }

    /// Completions of an Indexed Job (0 otherwise, which makes every index invalid).
    pub fn index_limit(&self) -> i32 {
        if self.indexed {
            self.completions.unwrap_or(0)
        } else {
            0
        }
    }
}

fn parse_pfp_rule(r: &Value) -> PfpRule {
    let action = match r.get("action").and_then(Value::as_str) {
        Some("FailJob") => PfpAction::FailJob,
        Some("FailIndex") => PfpAction::FailIndex,
        Some("Ignore") => PfpAction::Ignore,
        Some("Count") => PfpAction::Count,
        _ => PfpAction::Unknown,
    };
    let on = if let Some(ec) = r.get("onExitCodes").filter(|v| !v.is_null()) {
        PfpMatch::ExitCodes {
            container: ec
                .get("containerName")
                .and_then(Value::as_str)
                .map(str::to_owned),
            not_in: ec.get("operator").and_then(Value::as_str) == Some("NotIn"),
            values: ec
                .get("values")
                .and_then(Value::as_array)
                .map(|vs| vs.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default(),
        }
    } else if let Some(pcs) = r.get("onPodConditions").and_then(Value::as_array) {
        PfpMatch::Conditions(
            pcs.iter()
                .map(|p| {
                    (
                        p.get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        p.get("status")
                            .and_then(Value::as_str)
                            .unwrap_or("True")
                            .to_owned(),
                    )
                })
                .collect(),
        )
    } else {
        PfpMatch::Nothing
    };
    PfpRule { action, on }
}

/// The controller's lenient parse of an index list (`parseIndexesFromString`): corrupt fragments are
/// skipped, parsing stops at the first index >= completions and an interval's end is clamped to it.
pub(crate) fn parse_indexes_like_controller(s: &str, completions: i32) -> IndexSet {
    let mut set = IndexSet::new();
    if s.is_empty() {
        return set;
    }
    for fragment in s.split(',') {
        let mut parts = fragment.split('-');
        let Some(Ok(first)) = parts.next().map(str::parse::<i64>) else {
            continue;
        };
        if first >= i64::from(completions) {
            break;
        }
        let last = match parts.next() {
            Some(p) => match p.parse::<i64>() {
                Ok(v) => v.min(i64::from(completions) - 1),
                Err(_) => continue,
            },
            None => first,
        };
        if first < 0 || last < first {
            continue;
        }
        set.insert_range(first as i32, last as i32);
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_managed_by() {
        let j = JobSpec::parse(
            &json!({"metadata": {"name": "a"}, "spec": {"backoffLimitPerIndex": 1}}),
        );
        assert_eq!(j.backoff_limit, i32::MAX);
        assert_eq!(j.parallelism, 1);
        assert!(!j.indexed);
        assert!(!is_managed_elsewhere(
            &json!({"spec": {"managedBy": BUILTIN_MANAGER}})
        ));
        assert!(is_managed_elsewhere(
            &json!({"spec": {"managedBy": "courier.dev/dispatcher"}})
        ));
        assert!(!is_managed_elsewhere(&json!({"spec": {}})));
    }

    #[test]
    fn controller_index_parse_is_lenient() {
        assert_eq!(
            parse_indexes_like_controller("0,x,2-9", 4).to_string(),
            "0,2,3"
        );
        assert_eq!(parse_indexes_like_controller("5,1", 4).to_string(), "");
    }
}
