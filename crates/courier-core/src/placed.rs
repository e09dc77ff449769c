//! The `courier.dev/Placed` condition on an origin's status: why Courier cannot place the Job right
//! now (status False, reason `NoEligibleCluster`, `MirrorRejected` or `ClusterRemoved`, a message
//! naming each cluster and why), flipped True (`Placed`, naming cluster and epoch) in the same write
//! that copies the first status of a mirror. A Job that was placed at once never gets it, so the
//! happy path costs no write. Job condition types are not validated by the API server, so a
//! domain-prefixed type is safe (the `courier.dev/Dispatched` marker relies on the same rule).

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use courier_api::CONDITION_PLACED;
use courier_api::reasons::{REASON_CLUSTER_REMOVED, REASON_PLACED};

use crate::ownership::Intent;

fn position(conditions: &[JobCondition]) -> Option<usize> {
    conditions.iter().position(|c| c.type_ == CONDITION_PLACED)
}

/// Records that the Job cannot be placed (`reason`, `message`); returns whether anything changed.
/// The transition time moves only when the status flips.
pub fn set_not_placed(
    conditions: &mut Vec<JobCondition>,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let existing = position(conditions);
    if let Some(i) = existing {
        let c = &conditions[i];
        if c.status == "False"
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message)
        {
            return false;
        }
    }
    let since = existing
        .map(|i| &conditions[i])
        .filter(|c| c.status == "False")
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    let c = JobCondition {
        type_: CONDITION_PLACED.to_string(),
        status: "False".to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(since),
    };
    match existing {
        Some(i) => conditions[i] = c,
        None => conditions.push(c),
    }
    true
}

/// Flips a False Placed condition to True for `intent`; a Job that never had one gets none.
/// Returns whether anything changed.
pub fn mark_placed(conditions: &mut [JobCondition], intent: &Intent, now: Timestamp) -> bool {
    let Some(i) = position(conditions) else {
        return false;
    };
    if conditions[i].status == "True" {
        return false;
    }
    conditions[i] = JobCondition {
        type_: CONDITION_PLACED.to_string(),
        status: "True".to_string(),
        reason: Some(REASON_PLACED.to_string()),
        message: Some(format!(
            "placed on {} (epoch {})",
            intent.cluster, intent.epoch
        )),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    };
    true
}

/// The reason of a False Placed condition, if the origin has one.
pub fn not_placed_reason(status: &JobStatus) -> Option<&str> {
    status
        .conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_ == CONDITION_PLACED && c.status == "False")
        .and_then(|c| c.reason.as_deref())
}

/// Whether the origin records that its cluster was removed under it (then losing the mirror there
/// is not counted as a re-dispatch).
pub fn removed_from_cluster(status: &JobStatus) -> bool {
    not_placed_reason(status) == Some(REASON_CLUSTER_REMOVED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use courier_api::reasons::REASON_MIRROR_REJECTED;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).expect("ts")
    }

    #[test]
    fn false_then_true_and_never_added_by_placing() {
        let intent = Intent {
            cluster: "w2".into(),
            epoch: 2,
        };
        let mut none: Vec<JobCondition> = Vec::new();
        assert!(!mark_placed(&mut none, &intent, t(0)));
        assert!(none.is_empty(), "the happy path has no condition");

        let mut c = Vec::new();
        assert!(set_not_placed(
            &mut c,
            REASON_MIRROR_REJECTED,
            "w1: quota",
            t(0)
        ));
        assert!(!set_not_placed(
            &mut c,
            REASON_MIRROR_REJECTED,
            "w1: quota",
            t(5)
        ));
        assert!(set_not_placed(
            &mut c,
            REASON_MIRROR_REJECTED,
            "w1: quota, w2: down",
            t(9)
        ));
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].last_transition_time,
            Some(Time(t(0))),
            "still False since t0"
        );
        let status = JobStatus {
            conditions: Some(c.clone()),
            ..Default::default()
        };
        assert_eq!(not_placed_reason(&status), Some(REASON_MIRROR_REJECTED));
        assert!(!removed_from_cluster(&status));
        assert!(mark_placed(&mut c, &intent, t(10)));
        assert!(!mark_placed(&mut c, &intent, t(11)));
        assert_eq!(c[0].status, "True");
        assert_eq!(c[0].message.as_deref(), Some("placed on w2 (epoch 2)"));
        assert_eq!(c[0].last_transition_time, Some(Time(t(10))));
        assert!(set_not_placed(
            &mut c,
            REASON_CLUSTER_REMOVED,
            "w2 removed",
            t(20)
        ));
        assert_eq!(c[0].last_transition_time, Some(Time(t(20))));
        let status = JobStatus {
            conditions: Some(c),
            ..Default::default()
        };
        assert!(removed_from_cluster(&status));
    }
}
