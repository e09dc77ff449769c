//! Re-dispatch: a vanished mirror, the bound on re-dispatches, a lost worker waited for and left,
//! a returning worker's fenced mirror.

use super::*;

#[test]
fn a_vanished_mirror_is_redispatched_with_the_next_epoch() {
    let w = World::new().with_intent("a", 1, 0).reported("a", 1);
    let d = w.decide();
    assert_eq!(
        kinds(&d),
        [
            "WriteIntent(a,2,1)",
            "Event(Redispatched)",
            "CreateMirror(a,2)"
        ]
    );
    assert_eq!(
        event_message(&d, "Redispatched"),
        "the mirror on a (epoch 1) was deleted before the Job finished: re-dispatched to a as epoch 2 (re-dispatch 1 of 3)"
    );
}

#[test]
fn redispatch_is_bounded_then_the_origin_fails() {
    let w = World::new().with_intent("a", 4, 3).reported("a", 4);
    let d = w.decide();
    assert_eq!(kinds(&d), ["WriteOriginStatus", "Event(DispatchFailed)"]);
    let status = written_status(&d);
    assert_eq!(finished(&status), Some(crate::job::Finished::Failed));
    let failed = crate::job::find_condition(&status, "Failed").expect("Failed");
    assert_eq!(failed.reason.as_deref(), Some("DispatchFailed"));
    assert_eq!(
        failed.message.as_deref(),
        Some(
            "the mirror on a (epoch 4) was deleted before the Job finished; not re-dispatched: the limit of 3 re-dispatches is reached"
        )
    );
    assert!(crate::job::is_true(&status, "FailureTarget"));
    assert!(status.start_time.is_some());
    let mut w = World::new().with_intent("a", 1, 0).reported("a", 1);
    w.config.max_redispatch = 0;
    assert!(
        event_message(&w.decide(), "DispatchFailed")
            .ends_with("re-dispatch is disabled (max-redispatch 0)")
    );
}

#[test]
fn a_lost_worker_is_waited_for_then_left() {
    let mut w = World::new().with_intent("a", 1, 0).reported("a", 1);
    w.mirrors.insert("a".into(), MirrorObservation::Unknown);
    w.clusters[0].ready = false;
    w.clusters[0].not_ready_since = Some(ts("2026-05-01T09:58:00Z"));
    let d = w.decide();
    // Nobody can see its pods meanwhile: the origin shows none.
    assert_eq!(kinds(&d), ["WriteOriginStatus", "Requeue(180s)"]);
    let s = written_status(&d);
    assert_eq!(
        (s.active, s.ready, s.terminating),
        (Some(0), Some(0), Some(0))
    );
    assert_eq!(
        d.wait,
        Some(Wait::ClusterNotReady {
            cluster: "a".into(),
            lost_at: Some(ts("2026-05-01T10:03:00Z"))
        })
    );
    w.now = ts("2026-05-01T10:03:00Z");
    let d = w.decide();
    assert_eq!(
        kinds(&d),
        [
            "WriteIntent(b,2,1)",
            "Event(Redispatched)",
            "CreateMirror(b,2)"
        ]
    );
    assert!(
        event_message(&d, "Redispatched")
            .starts_with("WorkerCluster a has not been Ready since 2026-05-01T09:58:00Z")
    );
    w.config.redispatch_on_worker_loss = false;
    let d = w.decide();
    assert_eq!(
        d.wait,
        Some(Wait::WorkerLost {
            cluster: "a".into()
        })
    );
    assert!(!kinds(&d).iter().any(|k| k.starts_with("WriteIntent")));
}

#[test]
fn a_worker_lost_before_its_mirror_reported_is_left_without_counting() {
    let mut w = World::new().with_intent("a", 1, 0);
    w.mirrors.insert("a".into(), MirrorObservation::Unknown);
    w.clusters.remove(0); // unregistered
    let d = w.decide();
    assert_eq!(kinds(&d)[0], "WriteIntent(b,2,0)");
    assert!(event_message(&d, "Redispatched").contains("not counted"));
}

#[test]
fn a_lost_worker_with_a_cached_mirror_is_still_lost_unless_it_finished() {
    let mut w = World::new()
        .with_intent("a", 1, 0)
        .reported("a", 1)
        .mirror("a", 1, running());
    w.clusters[0].ready = false;
    w.clusters[0].not_ready_since = Some(ts("2026-05-01T09:00:00Z"));
    assert_eq!(kinds(&w.decide())[0], "WriteIntent(b,2,1)");
    let w = w.mirror("a", 1, complete());
    let d = w.decide();
    assert_eq!(
        finished(&written_status(&d)),
        Some(crate::job::Finished::Complete)
    );
}

#[test]
fn a_returning_worker_has_its_fenced_mirror_deleted() {
    let w = World::new()
        .with_intent("b", 2, 1)
        .reported("b", 2)
        .mirror("b", 2, running())
        .mirror("a", 1, running());
    let d = w.decide();
    assert_eq!(kinds(&d)[0], "DeleteMirror(a,mirror-uid-1)");
    assert!(
        !kinds(&d)
            .iter()
            .any(|k| k.starts_with("WriteIntent") || k.starts_with("CreateMirror"))
    );
}

#[test]
fn intent_cluster_holding_a_stale_mirror_waits_for_its_deletion() {
    let w = World::new()
        .with_intent("a", 3, 1)
        .reported("b", 2)
        .mirror("a", 1, running());
    let d = w.decide();
    assert_eq!(
        kinds(&d),
        [
            "DeleteMirror(a,mirror-uid-1)",
            "WriteOriginStatus",
            "Requeue(5s)"
        ]
    );
    assert_eq!(d.chains.len(), 2, "the delete stands alone");
    assert_eq!(
        d.wait,
        Some(Wait::StaleMirrorInTheWay {
            cluster: "a".into()
        })
    );
}
