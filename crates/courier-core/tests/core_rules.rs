//! Rules of the smaller courier-core modules a user can see, written from their docs rather than
//! the code (issue #12 §11):
//! - the `courier.dev/Dispatched` marker (what tells "the mirror vanished" from "never created"):
//!   one Courier cannot trust (not `True`, or another reason) is rewritten when the epoch reports;
//!   a trusted one never moves back to an older epoch, but moves to another cluster at the same or
//!   a newer one;
//! - the `courier.dev/Placed` reason is read from the False Placed condition only;
//! - a Pod Security level prints as it is written;
//! - index lists merge touching intervals whichever order they are added in.
//!
//! They kill the mutants cargo-mutants found surviving in `dispatched::record`,
//! `placed::not_placed_reason`, `PodSecurityLevel`'s `Display` and `IndexList` (docs/testing.md).

use courier_api::{CONDITION_DISPATCHED, REASON_MIRROR_CREATED};
use courier_core::dispatched::{condition, record, recorded};
use courier_core::ownership::Intent;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};

fn intent(cluster: &str, epoch: u64) -> Intent {
    Intent {
        cluster: cluster.into(),
        epoch,
    }
}

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).expect("timestamp")
}

fn marker(conditions: &[JobCondition]) -> Option<Intent> {
    recorded(&JobStatus {
        conditions: Some(conditions.to_vec()),
        ..JobStatus::default()
    })
}

/// A marker naming this very intent but not trustworthy (status not `True`, or another reason) is
/// rewritten, so "the mirror vanished after reporting" can be told again.
#[test]
fn an_untrusted_marker_for_the_same_intent_is_rewritten() {
    let i = intent("a", 2);
    for (status, reason) in [("False", REASON_MIRROR_CREATED), ("True", "SomethingElse")] {
        let mut untrusted = condition(&i, t(0));
        untrusted.status = status.into();
        untrusted.reason = Some(reason.into());
        let mut conditions = vec![untrusted];
        assert_eq!(
            marker(&conditions),
            None,
            "{status}/{reason} is not trusted"
        );
        assert!(record(&mut conditions, &i, t(10)), "{status}/{reason}");
        assert_eq!(marker(&conditions), Some(i.clone()), "{status}/{reason}");
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].type_, CONDITION_DISPATCHED);
    }
}

/// An untrusted marker naming a newer epoch does not hold the marker back either.
#[test]
fn an_untrusted_newer_marker_does_not_block_the_report() {
    let mut newer = condition(&intent("b", 5), t(0));
    newer.status = "False".into();
    let mut conditions = vec![newer];
    assert!(record(&mut conditions, &intent("a", 2), t(10)));
    assert_eq!(marker(&conditions), Some(intent("a", 2)));
}

/// Never back to an older epoch; the same epoch on another cluster, or a newer one, is recorded.
#[test]
fn the_marker_moves_forward_or_sideways_never_back() {
    let mut conditions = Vec::new();
    assert!(record(&mut conditions, &intent("a", 2), t(0)));
    assert!(!record(&mut conditions, &intent("a", 2), t(5)), "unchanged");
    assert!(
        !record(&mut conditions, &intent("b", 1), t(10)),
        "older epoch"
    );
    assert_eq!(marker(&conditions), Some(intent("a", 2)));
    assert!(
        record(&mut conditions, &intent("b", 2), t(20)),
        "same epoch, other cluster"
    );
    assert_eq!(marker(&conditions), Some(intent("b", 2)));
    assert!(
        record(&mut conditions, &intent("c", 3), t(30)),
        "newer epoch"
    );
    assert_eq!(marker(&conditions), Some(intent("c", 3)));
    assert_eq!(conditions.len(), 1);
}

/// The Placed reason is read from the False `courier.dev/Placed` condition only, wherever it
/// stands among the Job's conditions: a resumed Job (`Suspended=False`, listed first) whose
/// cluster was removed still counts as removed, so losing its mirror there is not counted as a
/// re-dispatch.
#[test]
fn the_placed_reason_comes_from_the_false_placed_condition_only() {
    use courier_api::reasons::{REASON_CLUSTER_REMOVED, REASON_PLACED};
    use courier_core::placed::{not_placed_reason, removed_from_cluster};
    let cond = |type_: &str, status: &str, reason: &str| JobCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        ..JobCondition::default()
    };
    let status = |conditions: Vec<JobCondition>| JobStatus {
        conditions: Some(conditions),
        ..JobStatus::default()
    };
    let resumed_then_removed = status(vec![
        cond("Suspended", "False", "JobResumed"),
        cond(
            courier_api::CONDITION_PLACED,
            "False",
            REASON_CLUSTER_REMOVED,
        ),
    ]);
    assert_eq!(
        not_placed_reason(&resumed_then_removed),
        Some(REASON_CLUSTER_REMOVED)
    );
    assert!(removed_from_cluster(&resumed_then_removed));
    let placed = status(vec![
        cond("Suspended", "False", "JobResumed"),
        cond(courier_api::CONDITION_PLACED, "True", REASON_PLACED),
    ]);
    assert_eq!(not_placed_reason(&placed), None);
    assert!(!removed_from_cluster(&placed));
}

/// `--worker-namespace-pod-security` shows its default with `Display` and reads it back with
/// `FromStr`: each level's text is the Pod Security Standard's name and round-trips.
#[test]
fn pod_security_levels_print_as_they_are_written() {
    use courier_core::namespaces::PodSecurityLevel;
    for (level, text) in [
        (PodSecurityLevel::Privileged, "privileged"),
        (PodSecurityLevel::Baseline, "baseline"),
        (PodSecurityLevel::Restricted, "restricted"),
    ] {
        assert_eq!(level.to_string(), text);
        assert_eq!(text.parse::<PodSecurityLevel>(), Ok(level));
    }
}

/// An index list (`completedIndexes`, `failedIndexes`) is written the way the Job controller writes
/// it: increasing intervals, touching ones merged, whichever order they are added in (a pair is
/// written `1,2`, longer runs `1-3`).
#[test]
fn index_lists_merge_touching_intervals_in_any_order() {
    use courier_core::indexes::IndexList;
    let mut list = IndexList::new();
    assert!(list.is_empty());
    list.insert_range(10, 12);
    assert!(!list.is_empty());
    list.insert_range(1, 2);
    assert_eq!(list.to_string(), "1,2,10-12");
    list.insert_range(8, 9);
    assert_eq!(list.to_string(), "1,2,8-12");
    list.insert_range(3, 3);
    assert_eq!(list.to_string(), "1-3,8-12");
    list.insert_range(4, 7);
    assert_eq!(list.to_string(), "1-12");
    assert_eq!(list.len(), 12);
    assert!(IndexList::parse("").is_ok_and(|l| l.is_empty()));
    assert!(IndexList::parse("0").is_ok_and(|l| !l.is_empty()));
}
