//! The `courier.dev/Dispatched` condition on an origin's status: which cluster and epoch has a mirror
//! that has reported. Written together with the first status copied from that epoch's mirror, so after
//! a crash "the mirror vanished" (marker names the intent's epoch) can be told apart from "the mirror
//! was never created" (marker names an older epoch, or is absent) without an extra API write.
//!
//! Shape: status True, reason `MirrorCreated`, message `dispatched to <cluster> (epoch <n>)`.
//! Writing and parsing live here together so they cannot drift apart.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use courier_api::{CONDITION_DISPATCHED, REASON_MIRROR_CREATED};

use crate::ownership::{Intent, parse_epoch};

/// The marker's message for `intent`.
pub fn message(intent: &Intent) -> String {
    format!("dispatched to {} (epoch {})", intent.cluster, intent.epoch)
}

/// Parses a marker message back into the intent it records.
pub fn parse_message(message: &str) -> Option<Intent> {
    let rest = message.strip_prefix("dispatched to ")?.strip_suffix(')')?;
    let (cluster, epoch) = rest.rsplit_once(" (epoch ")?;
    if cluster.is_empty() || cluster.contains(char::is_whitespace) {
        return None;
    }
    Some(Intent {
        cluster: cluster.to_string(),
        epoch: parse_epoch(epoch)?,
    })
}

/// The intent recorded by the origin status' marker, if it has a well-formed one.
pub fn recorded(status: &JobStatus) -> Option<Intent> {
    let c = status
        .conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_ == CONDITION_DISPATCHED)?;
    if c.status != "True" || c.reason.as_deref() != Some(REASON_MIRROR_CREATED) {
        return None;
    }
    parse_message(c.message.as_deref()?)
}

/// The marker condition for `intent`, stamped `now`.
pub fn condition(intent: &Intent, now: Timestamp) -> JobCondition {
    JobCondition {
        type_: CONDITION_DISPATCHED.to_string(),
        status: "True".to_string(),
        reason: Some(REASON_MIRROR_CREATED.to_string()),
        message: Some(message(intent)),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// Records `intent` in `conditions` (replacing an older marker in place, appending otherwise).
/// Never moves the marker back to an older epoch. Returns whether anything changed.
pub fn record(conditions: &mut Vec<JobCondition>, intent: &Intent, now: Timestamp) -> bool {
    let existing = conditions
        .iter()
        .position(|c| c.type_ == CONDITION_DISPATCHED);
    if let Some(i) = existing {
        let current = parse_message(conditions[i].message.as_deref().unwrap_or_default());
        let well_formed = conditions[i].status == "True"
            && conditions[i].reason.as_deref() == Some(REASON_MIRROR_CREATED);
        match current {
            Some(ref c) if well_formed && c == intent => return false,
            Some(ref c) if well_formed && c.epoch > intent.epoch => return false,
            _ => {}
        }
        conditions[i] = condition(intent, now);
    } else {
        conditions.push(condition(intent, now));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn intent(cluster: &str, epoch: u64) -> Intent {
        Intent {
            cluster: cluster.into(),
            epoch,
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).expect("ts")
    }

    #[test]
    fn write_then_read() {
        let mut conditions = Vec::new();
        assert!(record(&mut conditions, &intent("eu-1", 2), now()));
        assert_eq!(
            conditions[0].message.as_deref(),
            Some("dispatched to eu-1 (epoch 2)")
        );
        assert_eq!(conditions[0].reason.as_deref(), Some("MirrorCreated"));
        assert_eq!(conditions[0].type_, "courier.dev/Dispatched");
        let status = JobStatus {
            conditions: Some(conditions.clone()),
            ..Default::default()
        };
        assert_eq!(recorded(&status), Some(intent("eu-1", 2)));
        // Idempotent, and never goes back to an older epoch.
        assert!(!record(&mut conditions, &intent("eu-1", 2), now()));
        assert!(!record(&mut conditions, &intent("us-1", 1), now()));
        assert!(record(&mut conditions, &intent("us-1", 3), now()));
        assert_eq!(conditions.len(), 1);
        assert_eq!(
            parse_message(conditions[0].message.as_deref().unwrap_or_default()),
            Some(intent("us-1", 3))
        );
    }

    #[test]
    fn malformed_markers_are_not_trusted() {
        for msg in [
            "dispatched to eu-1 (epoch 0)",
            "dispatched to eu-1 (epoch x)",
            "dispatched to  (epoch 1)",
            "dispatched to a b (epoch 1)",
            "sent to eu-1 (epoch 1)",
            "dispatched to eu-1 (epoch 1",
        ] {
            assert_eq!(parse_message(msg), None, "{msg:?}");
        }
        let mut c = condition(&intent("eu", 1), now());
        c.status = "False".into();
        let status = JobStatus {
            conditions: Some(vec![c]),
            ..Default::default()
        };
        assert_eq!(recorded(&status), None);
    }

    proptest! {
        #[test]
        fn message_round_trip(cluster in "[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?", epoch in 1u64..u64::MAX) {
            let i = Intent { cluster, epoch };
            prop_assert_eq!(parse_message(&message(&i)), Some(i));
        }
    }
}
