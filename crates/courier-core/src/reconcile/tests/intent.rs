//! Placement is Courier's decision (issue #17 §5): intent metadata Courier did not write is
//! discarded and replaced, and the cluster it names is judged like any other.

use super::*;

/// An origin as a user may create it: Courier's intent keys set by hand, no finalizer.
fn forged(cluster: &str, epoch: &str, redispatches: &str) -> World {
    let mut w = World::new();
    let meta = &mut w.origin["metadata"];
    meta["labels"]["courier.dev/cluster"] = json!(cluster);
    meta["annotations"] = json!({"courier.dev/epoch": epoch,
                                 "courier.dev/redispatches": redispatches});
    w
}

#[test]
fn forged_intent_on_a_paused_cluster_is_replaced_by_a_placement() {
    let mut w = forged("b", "7", "0");
    w.clusters[1].paused = true;
    let d = w.decide();
    // Namespaces must exist on workers by default: no EnsureNamespace.
    assert_eq!(kinds(&d), ["WriteIntent(a,1,0)", "CreateMirror(a,1)"]);
    assert!(matches!(
        &acts(&d)[0],
        Action::WriteIntent {
            add_finalizer: true,
            ..
        }
    ));
    // Not even on the cached view does it create anything on b.
    assert!(!kinds(&w.decide_cached()).iter().any(|k| k.contains("(b")));
}

#[test]
fn forged_intent_naming_an_unknown_cluster_is_not_followed() {
    let w = forged("nowhere", "1", "0");
    let k = kinds(&w.decide());
    assert!(
        k[0].starts_with("WriteIntent(a,1,") || k[0].starts_with("WriteIntent(b,1,"),
        "{k:?}"
    );
    assert!(!k.iter().any(|k| k.contains("nowhere")), "{k:?}");
}

#[test]
fn a_forged_redispatch_count_is_not_adopted() {
    // A high count would fail the Job at the next loss; a reset one would lift the budget. Neither
    // is Courier's: the first placement writes 0.
    for count in ["0", "99"] {
        let mut w = forged("a", "3", count);
        w.clusters[1].paused = true;
        assert_eq!(kinds(&w.decide())[0], "WriteIntent(a,1,0)", "count {count}");
    }
}

#[test]
fn intent_vouched_for_by_our_mirror_keeps_its_mirror_when_the_finalizer_is_gone() {
    // Courier wrote it (the mirror at that cluster and epoch is ours) and someone removed the
    // finalizer: the finalizer is restored, nothing is re-placed.
    let mut w = World::new()
        .with_intent("b", 2, 1)
        .mirror("b", 2, running());
    w.origin["metadata"]["finalizers"] = json!([]);
    let d = w.decide();
    assert_eq!(kinds(&d)[0], "WriteIntent(b,2,1)");
    assert!(!kinds(&d).iter().any(|k| k.starts_with("DeleteMirror")));
}

/// §6: an over-long selector is dropped from the view (memory) and not guessed at: no placement, a
/// Warning naming the annotation.
#[test]
fn an_over_long_cluster_selector_is_named_not_guessed_at() {
    let mut w = World::new();
    let long = format!("region in ({})", vec!["eu"; 400].join(","));
    w.origin["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": long});
    let view = OriginView::from_json(&w.origin).expect("view");
    assert!(view.annotations.is_empty());
    assert_eq!(view.oversized, ["courier.dev/cluster-selector"]);
    let d = w.decide();
    assert!(
        !kinds(&d).iter().any(|k| k.starts_with("WriteIntent")),
        "{:?}",
        kinds(&d)
    );
    let warned = acts(&d).into_iter().any(|a| {
        matches!(a, Action::Event { reason, type_: EventType::Warning, message }
            if reason == "NoEligibleCluster"
                && message.contains("courier.dev/cluster-selector annotation is longer than 1024 bytes"))
    });
    assert!(warned, "{:?}", acts(&d));
}

#[test]
fn the_view_keeps_only_the_keys_decisions_read() {
    let mut w = World::new().with_intent("a", 1, 0);
    let meta = &mut w.origin["metadata"];
    meta["labels"]["courier.dev/anything"] = json!("x");
    meta["annotations"]["courier.dev/padding"] = json!("y".repeat(1 << 20));
    meta["annotations"]["courier.dev/epoch"] = json!("1");
    let view = OriginView::from_json(&w.origin).expect("view");
    assert_eq!(
        view.labels.keys().collect::<Vec<_>>(),
        ["courier.dev/cluster"]
    );
    assert_eq!(
        view.annotations.keys().collect::<Vec<_>>(),
        ["courier.dev/epoch", "courier.dev/redispatches"]
    );
    assert!(
        view.oversized.is_empty(),
        "an unread key is not even measured"
    );
}

/// The controller decides on the origin's JSON at once for a Job not placed yet (no intent, no
/// mirror in sight) instead of deciding on the cached view first and again with the JSON when
/// asked: that only holds if the JSON changes nothing but what the view alone asks it for.
/// Each variant of an unplaced origin: decided on the view alone, either the JSON is asked for or
/// the decision is the one taken with it.
#[test]
fn an_unplaced_origin_decides_alike_with_its_json_at_hand() {
    type Variant = (&'static str, fn(&mut World));
    let variants: Vec<Variant> = vec![
        ("placeable", |_| {}),
        ("no eligible cluster", |w| {
            for c in &mut w.clusters {
                c.paused = true;
            }
        }),
        ("finished before placement", |w| {
            w.origin["status"] = json!({"conditions": [
                {"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]});
        }),
        ("being deleted", |w| {
            w.origin["metadata"]["deletionTimestamp"] = json!("2026-05-01T09:59:00Z");
        }),
        ("someone else's Job holds the name", |w| {
            let (now, config) = (w.now, w.config.clone());
            w.hints.avoid("a", AvoidKind::Foreign, "x", now, &config);
        }),
        ("caches unknown", |w| {
            for m in w.mirrors.values_mut() {
                *m = MirrorObservation::Unknown;
            }
        }),
    ];
    for (what, change) in variants {
        let mut w = World::new();
        change(&mut w);
        let cached = w.decide_cached();
        if !cached.needs_fresh_origin {
            assert_eq!(cached, w.decide(), "{what}");
        }
    }
}
