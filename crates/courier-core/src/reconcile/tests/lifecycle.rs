//! The rules added for issue #11 (lifecycle on real clusters), one test each.

use super::*;

fn refuse(w: &mut World, cluster: &str, kind: AvoidKind, message: &str) {
    let (now, config) = (w.now, w.config.clone());
    w.hints.avoid(cluster, kind, message, now, &config);
}

/// Point 7: a stale mirror's delete is a chain of its own; the status copy and its event are
/// another; a failure of one does not stop the other.
#[test]
fn stale_deletes_are_independent_of_the_status_copy() {
    let w = World::new()
        .with_intent("b", 2, 1)
        .reported("b", 2)
        .mirror("a", 1, running())
        .mirror("b", 2, complete());
    let d = w.decide();
    assert_eq!(d.chains.len(), 2, "{:?}", kinds(&d));
    assert_eq!(
        d.chains[0],
        vec![Action::DeleteMirror {
            cluster: "a".into(),
            namespace: "ml".into(),
            name: "train".into(),
            uid: "mirror-uid-1".into(),
        }]
    );
    assert!(matches!(d.chains[1][0], Action::WriteOriginStatus { .. }));
    // Deletion: the stale delete stands alone; the current delete precedes the finalizer removal.
    let mut w = World::new()
        .with_intent("b", 2, 1)
        .mirror("a", 1, running())
        .mirror("b", 2, running());
    w.origin["metadata"]["deletionTimestamp"] = json!(T0);
    let d = w.decide();
    let chains: Vec<Vec<String>> = d
        .chains
        .iter()
        .map(|c| {
            kinds(&Decision {
                chains: vec![c.clone()],
                ..Default::default()
            })
        })
        .collect();
    assert_eq!(
        chains,
        [
            vec!["DeleteMirror(a,mirror-uid-1)".to_string()],
            vec![
                "DeleteMirror(b,mirror-uid-2)".to_string(),
                "RemoveFinalizer".to_string()
            ]
        ]
    );
}

/// Points 4 and 17: a refusal moves the Job on with a new epoch, not counted, quoting the server.
#[test]
fn a_refusing_cluster_is_skipped_and_the_job_moves_on() {
    let mut w = World::new().with_intent("a", 1, 0);
    refuse(&mut w, "a", AvoidKind::Refused, "exceeded quota: jobs=0");
    let d = w.decide();
    assert_eq!(
        kinds(&d),
        [
            "WriteIntent(b,2,0)",
            "Event(MirrorRejected)",
            "CreateMirror(b,2)"
        ]
    );
    let note = event_message(&d, "MirrorRejected");
    assert!(
        note.contains("exceeded quota: jobs=0") && note.contains("b as epoch 2"),
        "{note}"
    );
    // Nowhere else to go: the origin says why, and the retry comes at the hint's expiry.
    w.origin["metadata"]["annotations"]["courier.dev/cluster-selector"] = json!("region=eu");
    Arc::make_mut(&mut w.clusters[1].labels).insert("region".into(), "us".into());
    let d = w.decide();
    assert_eq!(
        kinds(&d),
        ["WriteOriginStatus", "Event(MirrorRejected)", "Requeue(30s)"]
    );
    let (status, reason, message) = placed(&d).expect("Placed");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "MirrorRejected")
    );
    assert!(
        message.contains("a refused the mirror: exceeded quota"),
        "{message}"
    );
    // After the backoff the cluster is tried again (the create answers again).
    w.now = ts("2026-05-01T10:00:30Z");
    assert_eq!(kinds(&w.decide()), ["CreateMirror(a,1)"]);
    // A cluster that refused once is skipped for first placements of this Job too.
    let mut fresh = World::new();
    refuse(&mut fresh, "a", AvoidKind::Refused, "denied");
    assert_eq!(kinds(&fresh.decide())[0], "WriteIntent(b,1,0)");
}

/// Point 5: a create that got no answer moves the Job on; the possible mirror there is stale.
#[test]
fn an_unanswered_create_moves_the_job_on() {
    let mut w = World::new().with_intent("a", 1, 0);
    w.mirrors.insert("a".into(), MirrorObservation::Unknown);
    w.clusters[0].ready = false;
    refuse(&mut w, "a", AvoidKind::Unanswered, "no answer within 10s");
    let d = w.decide();
    assert_eq!(kinds(&d)[0], "WriteIntent(b,2,0)");
    let note = event_message(&d, "MirrorRejected");
    assert!(
        note.contains("did not answer") && note.contains("deleted once it answers"),
        "{note}"
    );
    // A worker that answers again (a dropped connection, not an outage) is simply retried.
    let mut w = World::new().with_intent("a", 1, 0);
    refuse(&mut w, "a", AvoidKind::Unanswered, "connection reset");
    assert_eq!(kinds(&w.decide()), ["CreateMirror(a,1)"]);
    // Calls to it stall: that counts as not answering.
    w.clusters[0].degraded = true;
    assert_eq!(kinds(&w.decide())[0], "WriteIntent(b,2,0)");
    // Once it answers, the epoch-1 mirror it created late is fenced.
    let mut w = World::new()
        .with_intent("b", 2, 0)
        .mirror("a", 1, running());
    w.mirrors.insert("b".into(), MirrorObservation::Absent);
    let d = w.decide();
    assert!(kinds(&d).contains(&"DeleteMirror(a,mirror-uid-1)".to_string()));
    assert!(
        !kinds(&d).iter().any(|k| k.starts_with("CreateMirror")),
        "stale before new"
    );
}

/// Stale before new: the new epoch waits until every unfinished mirror of ours that can be seen
/// is gone; finished ones and unreadable clusters do not hold it up.
#[test]
fn a_new_epoch_starts_only_once_older_running_mirrors_are_gone() {
    let w = World::new()
        .with_intent("b", 2, 1)
        .reported("a", 1)
        .mirror("a", 1, running());
    let d = w.decide();
    assert_eq!(
        d.wait,
        Some(Wait::StaleMirrorsFirst {
            clusters: vec!["a".into()],
            epoch: 2
        })
    );
    assert!(!kinds(&d).iter().any(|k| k.starts_with("CreateMirror")));
    let w = w.mirror("a", 1, complete());
    assert!(kinds(&w.decide()).contains(&"CreateMirror(b,2)".to_string()));
    let mut w = World::new().with_intent("b", 2, 1).reported("a", 1);
    w.mirrors.insert("a".into(), MirrorObservation::Unknown);
    assert!(kinds(&w.decide()).contains(&"CreateMirror(b,2)".to_string()));
}

/// Point 8: suspending is the user's choice.
#[test]
fn a_mirror_lost_while_suspended_is_recreated_without_counting() {
    let mut w = World::new().with_intent("a", 1, 3).reported("a", 1);
    w.config.max_redispatch = 3;
    w.origin["spec"]["suspend"] = json!(true);
    let d = w.decide();
    assert_eq!(kinds(&d)[0], "WriteIntent(a,2,3)", "{:?}", kinds(&d));
    assert!(event_message(&d, "Redispatched").contains("not counted: the Job is suspended"));
    // Lost worker while suspended: moved, not counted, never DispatchFailed.
    let mut w = World::new().with_intent("a", 1, 3).reported("a", 1);
    w.origin["spec"]["suspend"] = json!(true);
    w.mirrors.insert("a".into(), MirrorObservation::Unknown);
    w.clusters[0].ready = false;
    w.clusters[0].not_ready_since = Some(ts("2026-05-01T09:00:00Z"));
    let d = w.decide();
    assert_eq!(kinds(&d)[0], "WriteIntent(b,2,3)", "{:?}", kinds(&d));
}

/// Points 2 and 16: a cluster being removed sends its Jobs elsewhere without counting, or holds
/// them (Placed=False, ClusterRemoved) while their mirrors there are deleted.
#[test]
fn a_cluster_being_removed_drains() {
    let mut w = World::new()
        .with_intent("a", 1, 0)
        .reported("a", 1)
        .mirror("a", 1, running());
    w.config.max_redispatch = 0;
    w.clusters[0].draining = true;
    let d = w.decide();
    assert_eq!(
        kinds(&d)[..2],
        ["WriteIntent(b,2,0)", "Event(Redispatched)"]
    );
    let note = event_message(&d, "Redispatched");
    assert!(
        note.contains("a is being removed") && note.contains("not counted"),
        "{note}"
    );
    // Nowhere to go: it waits and its mirror there goes.
    w.clusters[1].paused = true;
    let d = w.decide();
    let (status, reason, _) = placed(&d).expect("Placed");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ClusterRemoved")
    );
    assert!(kinds(&d).contains(&"DeleteMirror(a,mirror-uid-1)".to_string()));
    // The WorkerCluster is gone afterwards: the loss is not counted (the origin says why).
    let removed = written_status(&d);
    w.origin["status"] = serde_json::to_value(&removed).expect("status");
    w.clusters.remove(0);
    w.mirrors.remove("a");
    let d = w.decide();
    let (status, reason, _) = placed(&d).expect("Placed");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ClusterRemoved"),
        "still the reason once the WorkerCluster is gone"
    );
    w.origin["status"] = serde_json::to_value(written_status(&d)).expect("status");
    w.clusters[0].paused = false;
    let d = w.decide();
    assert_eq!(kinds(&d)[0], "WriteIntent(b,2,0)", "{:?}", kinds(&d));
    // Placement never picks a cluster being removed.
    let mut fresh = World::new();
    fresh.clusters[0].draining = true;
    assert_eq!(kinds(&fresh.decide())[0], "WriteIntent(b,1,0)");
}

/// Point 12: a mirror ahead of the cached intent is only deleted on a fresh read of the origin.
#[test]
fn a_mirror_ahead_of_the_cache_needs_a_fresh_origin() {
    let w = World::new()
        .with_intent("a", 1, 0)
        .reported("a", 1)
        .mirror("a", 1, running())
        .mirror("b", 2, running());
    let cached = w.decide_cached();
    assert!(cached.needs_fresh_origin);
    assert!(
        cached.chains.is_empty(),
        "nothing is done on the cached origin"
    );
    // The fresh origin still says (a, 1): the epoch-2 mirror is really stale.
    assert!(kinds(&w.decide()).contains(&"DeleteMirror(b,mirror-uid-2)".to_string()));
    // Older stale mirrors need no fresh read.
    let w = World::new()
        .with_intent("b", 2, 1)
        .reported("b", 2)
        .mirror("a", 1, running())
        .mirror("b", 2, running());
    let cached = w.decide_cached();
    assert!(!cached.needs_fresh_origin);
    assert!(kinds(&cached).contains(&"DeleteMirror(a,mirror-uid-1)".to_string()));
}

/// Point 9: a refused change is applied by recreating an idle mirror, else announced once.
#[test]
fn a_refused_change_recreates_an_idle_mirror_or_is_announced_once() {
    let mut w = World::new()
        .with_intent("a", 1, 0)
        .reported("a", 1)
        .mirror("a", 1, running());
    w.origin["metadata"]["generation"] = json!(2);
    w.origin["spec"]["parallelism"] = json!(4);
    assert!(kinds(&w.decide()).contains(&"PatchMirrorSpec(a)".to_string()));
    w.hints.out_of_sync = Some(OutOfSync {
        mirror_uid: "mirror-uid-1".into(),
        generation: Some(2),
        message: "denied by policy".into(),
        announced: false,
    });
    let d = w.decide();
    assert!(
        !kinds(&d).contains(&"PatchMirrorSpec(a)".to_string()),
        "no patch per reconcile"
    );
    let note = event_message(&d, "MirrorOutOfSync");
    assert!(
        note.contains("parallelism") && note.contains("denied by policy"),
        "{note}"
    );
    if let Some(o) = w.hints.out_of_sync.as_mut() {
        o.announced = true;
    }
    assert!(
        !kinds(&w.decide())
            .iter()
            .any(|k| k.contains("MirrorOutOfSync")),
        "once"
    );
    // A newer generation is tried again.
    w.origin["metadata"]["generation"] = json!(3);
    assert!(kinds(&w.decide()).contains(&"PatchMirrorSpec(a)".to_string()));
    // Suspended with no active pods: nothing runs, so it is created again (same cluster, new epoch).
    w.origin["metadata"]["generation"] = json!(2);
    let mut idle = mirror_json(1, json!({"active": 0}));
    idle["spec"]["suspend"] = json!(true);
    w.mirrors.insert(
        "a".into(),
        MirrorObservation::Present(std::sync::Arc::new(
            MirrorView::from_json(&idle).expect("view"),
        )),
    );
    w.origin["spec"]["suspend"] = json!(true);
    // One origin write per decision: the status (Suspended) first, then the new intent.
    let d = w.decide();
    assert_eq!(d.wait, Some(Wait::OriginWriteDeferred));
    w.origin["status"] = serde_json::to_value(written_status(&d)).expect("status");
    let d = w.decide();
    assert_eq!(
        kinds(&d)[..2],
        ["WriteIntent(a,2,0)", "Event(MirrorRecreated)"]
    );
    assert!(event_message(&d, "MirrorRecreated").contains("epoch 2"));
    // Stale before new: the epoch-1 mirror still holds the name on `a`, so epoch 2 is not
    // created in this decision (the next one deletes epoch 1 first).
    assert!(
        !kinds(&d).iter().any(|k| k.starts_with("CreateMirror")),
        "{:?}",
        kinds(&d)
    );
    assert_eq!(
        d.wait,
        Some(Wait::StaleMirrorsFirst {
            clusters: vec!["a".into()],
            epoch: 2
        })
    );
}

/// Point 9: the pod template flows while suspended, judged by the hash of what was sent.
#[test]
fn a_changed_template_is_patched_with_its_hash() {
    let mut w = World::new()
        .with_intent("a", 1, 0)
        .reported("a", 1)
        .mirror("a", 1, running());
    w.origin["spec"]["template"]["spec"]["nodeSelector"] = json!({"disk": "ssd"});
    let d = w.decide();
    let (patch, template) = d
        .actions()
        .find_map(|a| match a {
            Action::PatchMirrorSpec {
                patch, template, ..
            } => Some((patch.clone(), template.clone())),
            _ => None,
        })
        .expect("patch");
    let want = crate::drift::template_hash(&w.origin["spec"]).expect("hash");
    assert_eq!(
        patch["metadata"]["annotations"]["courier.dev/template-hash"],
        json!(want)
    );
    assert_eq!(
        template.and_then(|t| t.pointer("/spec/nodeSelector/disk").cloned()),
        Some(json!("ssd"))
    );
    // Without the origin's template at hand, decide asks for a fresh read.
    let d = w.decide_cached();
    assert!(d.needs_fresh_origin);
}

/// Point 14: a name-conflict verdict expires, and the cluster is tried again.
#[test]
fn a_name_conflict_verdict_expires() {
    let mut w = World::new().with_intent("a", 1, 0);
    w.origin["metadata"]["annotations"]["courier.dev/cluster-selector"] = json!("region=eu");
    Arc::make_mut(&mut w.clusters[1].labels).insert("region".into(), "us".into());
    w.foreign("a");
    let d = w.decide();
    assert!(!kinds(&d).iter().any(|k| k.starts_with("CreateMirror")));
    assert_eq!(
        d.requeue,
        Some(Duration::from_secs(30)),
        "retried at the expiry"
    );
    w.now = ts("2026-05-01T10:00:30Z");
    assert_eq!(kinds(&w.decide()), ["CreateMirror(a,1)"]);
}

/// Point 18: a Kueue-queued origin's mirror is never unsuspended by Courier.
#[test]
fn kueue_mirrors_are_left_to_kueue() {
    let mut w = World::new().with_intent("a", 1, 0);
    w.origin["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = json!("q");
    let d = w.decide();
    let mirror = d
        .actions()
        .find_map(|a| match a {
            Action::CreateMirror { mirror, .. } => Some(mirror.clone()),
            _ => None,
        })
        .expect("create");
    assert_eq!(mirror["spec"]["suspend"], json!(true));
    let mut queued = mirror.clone();
    queued["metadata"]["uid"] = json!("m1");
    queued["status"] = json!({"conditions": [{"type": "Suspended", "status": "True",
                                "reason": "JobSuspended"}]});
    w.mirrors.insert(
        "a".into(),
        MirrorObservation::Present(std::sync::Arc::new(
            MirrorView::from_json(&queued).expect("view"),
        )),
    );
    let d = w.decide();
    assert!(
        !kinds(&d).iter().any(|k| k.starts_with("PatchMirrorSpec")),
        "{:?}",
        kinds(&d)
    );
    let s = written_status(&d);
    assert_eq!(s.start_time, None, "a queued Job did not start");
    assert!(
        s.conditions
            .unwrap_or_default()
            .iter()
            .all(|c| c.type_ != "Suspended"),
        "the origin is not suspended by its user"
    );
}
