//! Pod failure policy, success policy and the pod-failure backoff, as the v1.36 Job controller
//! evaluates them.

use jiff::Timestamp;

use super::clock::{Nanos, quantize, scaled, since};
use super::pods::{Phase, Pod};
use super::spec::{JobSpec, PfpAction, PfpMatch, PfpRule, SuccessRule};
use crate::kinds::job::indexes::IndexSet;

/// Result of matching a failed pod against `spec.podFailurePolicy`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PfpVerdict {
    /// The Job failure message when a FailJob rule matched.
    pub fail_job: Option<String>,
    /// Whether the failure counts towards backoffLimit / backoffLimitPerIndex (false for Ignore).
    pub counts: bool,
    pub action: Option<PfpAction>,
}

const NO_MATCH: PfpVerdict = PfpVerdict {
    fail_job: None,
    counts: true,
    action: None,
};

/// Pod conditions a failed simulated pod reports, in the order the kubelet lists them.
fn pod_conditions(pod: &Pod) -> Vec<(String, String)> {
    let ready = if pod.ready { "True" } else { "False" };
    let mut out = pod.conditions.clone();
    for (k, v) in [
        (
            "PodReadyToStartContainers",
            if pod.is_terminal() { "False" } else { "True" },
        ),
        ("Initialized", "True"),
        ("Ready", ready),
        ("ContainersReady", ready),
        ("PodScheduled", "True"),
    ] {
        out.push((k.to_owned(), v.to_owned()));
    }
    out
}

/// `matchPodFailurePolicy`: rules in order, the first match decides.
pub(crate) fn match_pod_failure_policy(spec: &JobSpec, rules: &[PfpRule], pod: &Pod) -> PfpVerdict {
    for (i, rule) in rules.iter().enumerate() {
        let matched: Option<String> = match &rule.on {
            PfpMatch::ExitCodes { container, not_in, values } => pod
                .exit_code
                .filter(|code| *code != 0)
                .filter(|code| values.contains(&i64::from(*code)) != *not_in)
                .and_then(|code| {
                    spec.containers
                        .iter()
                        .find(|c| container.as_ref().is_none_or(|want| want == *c))
                        .map(|c| {
                            format!(
                                "Container {c} for pod {}/{} failed with exit code {code} matching FailJob rule at index {i}",
                                spec.namespace, pod.name
                            )
                        })
                }),
            PfpMatch::Conditions(patterns) => pod_conditions(pod)
                .into_iter()
                .find(|(t, s)| patterns.iter().any(|(pt, ps)| pt == t && ps == s))
                .map(|(t, _)| {
                    format!(
                        "Pod {}/{} has condition {t} matching FailJob rule at index {i}",
                        spec.namespace, pod.name
                    )
                }),
            PfpMatch::Nothing => None,
        };
        let Some(msg) = matched else { continue };
        match rule.action {
            PfpAction::Ignore => {
                return PfpVerdict {
                    fail_job: None,
                    counts: false,
                    action: Some(PfpAction::Ignore),
                };
            }
            PfpAction::FailIndex => {
                return PfpVerdict {
                    fail_job: None,
                    counts: true,
                    action: Some(PfpAction::FailIndex),
                };
            }
            PfpAction::Count => {
                return PfpVerdict {
                    fail_job: None,
                    counts: true,
                    action: Some(PfpAction::Count),
                };
            }
            PfpAction::FailJob => {
                return PfpVerdict {
                    fail_job: Some(msg),
                    counts: true,
                    action: Some(PfpAction::FailJob),
                };
            }
            PfpAction::Unknown => {}
        }
    }
    NO_MATCH
}

/// `isPodFailed`: phase Failed, or (unless only failed pods are replaced) deleted and not Succeeded.
pub(crate) fn is_pod_failed(spec: &JobSpec, pod: &Pod) -> bool {
    if pod.phase == Phase::Failed {
        return true;
    }
    !spec.only_replace_failed && pod.deletion.is_some() && pod.phase != Phase::Succeeded
}

/// Whether a failed pod's failure counts (no policy, or a policy that does not Ignore it).
pub(crate) fn failure_counts(spec: &JobSpec, pod: &Pod) -> bool {
    spec.pod_failure_policy
        .as_deref()
        .is_none_or(|rules| match_pod_failure_policy(spec, rules, pod).counts)
}

/// `matchSuccessPolicy`: the message of the first matching rule.
pub(crate) fn match_success_policy(rules: &[SuccessRule], succeeded: &IndexSet) -> Option<String> {
    if succeeded.is_empty() {
        return None;
    }
    for (i, rule) in rules.iter().enumerate() {
        let matched = match &rule.indexes {
            Some(required) => {
                if required.is_empty() {
                    continue;
                }
                let contains = required.iter().filter(|ix| succeeded.contains(*ix)).count() as i64;
                contains == required.len() || rule.count.is_some_and(|c| contains >= c)
            }
            None => rule.count.is_some_and(|c| succeeded.len() >= c),
        };
        if matched {
            return Some(format!("Matched rules at index {i}"));
        }
    }
    None
}

/// `getFinishedTime`, with API (quantized) resolution: container finish, else the deletion request,
/// else creation.
pub(crate) fn finished_time(pod: &Pod, speed: f64) -> Timestamp {
    quantize(
        pod.finished_at.or(pod.deletion).unwrap_or(pod.created),
        speed,
    )
}

/// Pod-failure backoff parameters (model seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BackoffParams {
    pub base: f64,
    pub max: f64,
    pub speed: f64,
}

/// `getRemainingTimeForFailuresCount`: base * 2^(n-1), capped, minus the time since the last failure.
pub(crate) fn remaining(
    p: BackoffParams,
    failures: i32,
    last: Option<Timestamp>,
    now: Timestamp,
) -> Nanos {
    let Some(last) = last else { return 0 };
    if failures <= 0 {
        return 0;
    }
    let mut secs = p.base;
    for _ in 1..failures {
        secs *= 2.0;
        if secs >= p.max {
            secs = p.max;
            break;
        }
    }
    let wait = scaled(secs, p.speed);
    let elapsed = since(now, last);
    if wait < elapsed { 0 } else { wait - elapsed }
}

/// The Job-level backoff record (`backoffRecord`): failures since the last success.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct BackoffRecord {
    pub failures_after_last_success: i32,
    pub last_failure: Option<Timestamp>,
}

impl BackoffRecord {
    /// `newBackoffRecord`: folds in the pods that finished since the last recorded sync.
    pub fn next(&self, succeeded: &[Timestamp], failed: &[Timestamp]) -> Self {
        let mut succ = succeeded.to_vec();
        let mut fail = failed.to_vec();
        succ.sort();
        fail.sort();
        let Some(&last_success) = succ.last() else {
            let Some(&last_fail) = fail.last() else {
                return *self;
            };
            return Self {
                failures_after_last_success: self.failures_after_last_success + fail.len() as i32,
                last_failure: Some(last_fail),
            };
        };
        let mut out = Self::default();
        for &f in fail.iter().rev() {
            if f <= last_success {
                break;
            }
            if out.last_failure.is_none() {
                out.last_failure = Some(f);
            }
            out.failures_after_last_success += 1;
        }
        out
    }

    pub fn remaining(&self, p: BackoffParams, now: Timestamp) -> Nanos {
        remaining(p, self.failures_after_last_success, self.last_failure, now)
    }
}
