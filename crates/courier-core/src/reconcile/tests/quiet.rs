//! `mirror_change_matters`: a mirror version it calls quiet is not queued, so it must change no
//! decision that planned nothing. Runs of outside events (`after_write`'s model of the servers)
//! bring the origin and its mirror into varied states; then the current mirror changes (gauges,
//! uncounted pods, interim and terminal conditions, counters, suspension, a refused spec change
//! in force); whenever the decision on the old version plans nothing and the rule calls the change
//! quiet, the decision on the new version must be the same.

use proptest::prelude::*;

use super::after_write::{Model, outside};
use super::*;

/// A change of the current mirror (each field: keep what is there, or set it).
#[derive(Debug, Clone)]
struct MirrorChange {
    active: Option<Option<i32>>,
    ready: Option<Option<i32>>,
    terminating: Option<Option<i32>>,
    /// 0 keep, 1 none, 2 empty, 3 a succeeded pod, 4 a failed pod.
    uncounted: u8,
    /// 0 keep, 1 SuccessCriteriaMet, 2 FailureTarget, 3 Complete, 4 remove them all.
    condition: u8,
    more_succeeded: bool,
    suspend: Option<bool>,
    new_uid: bool,
}

fn gauge() -> impl Strategy<Value = Option<Option<i32>>> {
    prop_oneof![
        3 => Just(None),
        1 => Just(Some(None)),
        2 => (0i32..3).prop_map(|n| Some(Some(n))),
    ]
}

fn mirror_change() -> impl Strategy<Value = MirrorChange> {
    (
        gauge(),
        gauge(),
        gauge(),
        0u8..5,
        prop_oneof![4 => Just(0u8), 1 => 1u8..5],
        proptest::bool::weighted(0.2),
        prop_oneof![4 => Just(None), 1 => any::<bool>().prop_map(Some)],
        proptest::bool::weighted(0.05),
    )
        .prop_map(
            |(active, ready, terminating, uncounted, condition, more, suspend, new_uid)| {
                MirrorChange {
                    active,
                    ready,
                    terminating,
                    uncounted,
                    condition,
                    more_succeeded: more,
                    suspend,
                    new_uid,
                }
            },
        )
}

impl MirrorChange {
    fn apply(&self, m: &Value) -> Value {
        let mut m = m.clone();
        let status = &mut m["status"];
        if !status.is_object() {
            *status = json!({});
        }
        for (field, v) in [
            ("active", self.active),
            ("ready", self.ready),
            ("terminating", self.terminating),
        ] {
            match v {
                None => {}
                Some(None) => {
                    status.as_object_mut().map(|o| o.remove(field));
                }
                Some(Some(n)) => status[field] = json!(n),
            }
        }
        match self.uncounted {
            1 => {
                status
                    .as_object_mut()
                    .map(|o| o.remove("uncountedTerminatedPods"));
            }
            2 => status["uncountedTerminatedPods"] = json!({}),
            3 => status["uncountedTerminatedPods"] = json!({"succeeded": ["p9"]}),
            4 => status["uncountedTerminatedPods"] = json!({"failed": ["p9"]}),
            _ => {}
        }
        let condition = |type_: &str| {
            json!({"type": type_, "status": "True", "reason": "R",
                   "lastTransitionTime": "2026-05-01T09:20:00Z",
                   "lastProbeTime": "2026-05-01T09:20:00Z"})
        };
        let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        match self.condition {
            1 => conditions.push(condition("SuccessCriteriaMet")),
            2 => conditions.push(condition("FailureTarget")),
            3 => conditions.push(condition("Complete")),
            4 => conditions.clear(),
            _ => {}
        }
        status["conditions"] = json!(conditions);
        if self.more_succeeded {
            status["succeeded"] = json!(status["succeeded"].as_i64().unwrap_or(0) + 1);
        }
        if let Some(s) = self.suspend {
            m["spec"]["suspend"] = json!(s);
        }
        if self.new_uid {
            m["metadata"]["uid"] = json!("another-uid");
        }
        m
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Seen failing: with the gauges let through while no pods wait to be counted, and with the
    /// interim conditions let through when no re-dispatch is left (a change that idles the
    /// mirror is the test below's).
    #[test]
    fn a_quiet_mirror_change_changes_no_decision(
        ttl in prop_oneof![Just(None), Just(Some(600u64))],
        max_redispatch in 0u32..3,
        suspended in proptest::bool::weighted(0.2),
        events in proptest::collection::vec(outside(), 0..10),
        refused in proptest::bool::weighted(0.2),
        change in mirror_change(),
    ) {
        let mut m = Model::run(ttl, max_redispatch, false, suspended, &events)?;
        let Some(cluster) = m.w.origin["metadata"]["labels"]["courier.dev/cluster"]
            .as_str()
            .map(str::to_string)
        else {
            return Ok(());
        };
        let Some(mut old) = m.mirrors.get(&cluster).cloned() else {
            return Ok(());
        };
        if refused {
            // A spec change the worker refused stands (the mirror is suspended there, so it is
            // recreated as soon as nothing runs).
            old["spec"]["suspend"] = json!(true);
            m.mirrors.insert(cluster.clone(), old.clone());
            m.sync(&cluster);
            m.w.origin["spec"]["parallelism"] = json!(7);
            m.w.hints.out_of_sync = Some(OutOfSync {
                mirror_uid: old["metadata"]["uid"].as_str().unwrap_or_default().to_string(),
                generation: m.w.origin["metadata"]["generation"].as_i64(),
                message: "refused".into(),
                announced: true,
            });
        }
        let before = m.w.decide();
        if !before.chains.is_empty() || before.needs_fresh_origin {
            return Ok(());
        }
        let new = change.apply(&old);
        let view = |j: &Value| MirrorView::from_json(j).expect("mirror view");
        let origin = OriginView::from_json(&m.w.origin).expect("origin view");
        if mirror_change_matters(&view(&old), &view(&new), &origin, &m.w.config) {
            return Ok(());
        }
        m.mirrors.insert(cluster.clone(), new.clone());
        m.sync(&cluster);
        let after = m.w.decide();
        prop_assert_eq!(&after, &before, "old {:#}\nnew {:#}\norigin {:#}", old, new, m.w.origin);
    }
}

/// The bench's Job: the worker takes the finished pod out of `active` and `ready`, lists it as
/// uncounted and sets `SuccessCriteriaMet` in one write; with a re-dispatch left that is quiet, and
/// the counted version after it is not.
#[test]
fn the_uncounted_version_is_quiet_while_a_redispatch_is_left() {
    let running = json!({"startTime": "2026-05-01T09:00:00Z", "active": 1, "ready": 1,
                         "terminating": 0});
    let uncounted = json!({"startTime": "2026-05-01T09:00:00Z", "ready": 0, "terminating": 0,
        "uncountedTerminatedPods": {"succeeded": ["p1"]},
        "conditions": [{"type": "SuccessCriteriaMet", "status": "True",
                        "reason": "CompletionsReached",
                        "lastTransitionTime": "2026-05-01T09:10:00Z",
                        "lastProbeTime": "2026-05-01T09:10:00Z"}]});
    let mut counted = uncounted.clone();
    counted["succeeded"] = json!(1);
    counted["uncountedTerminatedPods"] = json!({});
    let view = |s: &Value| MirrorView::from_json(&mirror_json(1, s.clone())).expect("view");
    let mut w = World::new().with_intent("a", 1, 0).reported("a", 1);
    w.config.max_redispatch = 1;
    let origin = OriginView::from_json(&w.origin).expect("origin view");
    let (running, uncounted, counted) = (view(&running), view(&uncounted), view(&counted));
    assert!(!mirror_change_matters(
        &running, &uncounted, &origin, &w.config
    ));
    assert!(mirror_change_matters(
        &uncounted, &counted, &origin, &w.config
    ));
    assert!(mirror_change_matters(
        &counted, &running, &origin, &w.config
    ));
    w.config.max_redispatch = 0;
    assert!(
        mirror_change_matters(&running, &uncounted, &origin, &w.config),
        "no re-dispatch left: SuccessCriteriaMet is copied at once"
    );
}

/// A refused spec change waits for the mirror to idle: the version that idles it matters even
/// when its only change is the gauges while a pod waits to be counted.
#[test]
fn a_change_that_idles_the_mirror_matters_while_a_refused_change_waits() {
    let running = json!({"startTime": "2026-05-01T09:00:00Z", "active": 2, "ready": 2,
                         "terminating": 0});
    let mut idle = running.clone();
    idle["active"] = json!(0);
    idle["ready"] = json!(0);
    idle["uncountedTerminatedPods"] = json!({"succeeded": ["p1"]});
    let mut w = World::new().with_intent("a", 1, 0).reported("a", 1);
    w.config.max_redispatch = 1;
    w = w.mirror("a", 1, running);
    let suspended = |w: &mut World| {
        if let Some(MirrorObservation::Present(m)) = w.mirrors.get_mut("a") {
            let mut v = (**m).clone();
            v.spec.set("suspend", json!(true));
            *m = std::sync::Arc::new(v);
        }
    };
    suspended(&mut w);
    w.origin["spec"]["parallelism"] = json!(7);
    let uid = match w.mirrors.get("a") {
        Some(MirrorObservation::Present(m)) => m.uid.clone(),
        _ => unreachable!(),
    };
    w.hints.out_of_sync = Some(OutOfSync {
        mirror_uid: uid,
        generation: Some(1),
        message: "refused".into(),
        announced: true,
    });
    let before = w.decide();
    let old = w.mirrors.get("a").cloned();
    w = w.mirror("a", 1, idle);
    suspended(&mut w);
    let after = w.decide();
    let (Some(MirrorObservation::Present(old)), Some(MirrorObservation::Present(new))) =
        (old, w.mirrors.get("a").cloned())
    else {
        unreachable!()
    };
    let origin = OriginView::from_json(&w.origin).expect("origin view");
    assert!(before.chains.is_empty(), "{:?}", kinds(&before));
    assert!(!after.chains.is_empty(), "{:?}", kinds(&after));
    assert!(mirror_change_matters(&old, &new, &origin, &w.config));
}

/// The origin `a`, dispatched and reported, with one re-dispatch allowed.
fn dispatched_with_a_redispatch_left() -> World {
    let mut w = World::new().with_intent("a", 1, 0).reported("a", 1);
    w.config.max_redispatch = 1;
    w
}

/// A mirror view as the mirror watch builds it (`registry::mirrors::trim`): the uncounted pods out
/// of the status, only whether there are any (`counting`) kept.
fn watched_view(status: &Value, counting: bool) -> MirrorView {
    let mut v = MirrorView::from_json(&mirror_json(1, status.clone())).expect("view");
    v.counting = counting;
    v
}

/// `counting` holds back the gauges only while pods wait to be counted (found by `cargo mutants`:
/// the property test above seldom reaches a mirror with uncounted pods). Gauges that move while
/// pods wait are quiet; the version that ends the wait matters even when nothing else changed (the
/// gauges held back are copied then); a change of the interim conditions alone is quiet while a
/// re-dispatch is left, with no pods to count as well. The views are built as the mirror watch
/// builds them (`registry::mirrors::trim`): the uncounted pods out of the status, only whether
/// there are any kept.
#[test]
fn counting_holds_back_the_gauges_only_while_pods_wait() {
    let running = json!({"startTime": "2026-05-01T09:00:00Z", "active": 2, "ready": 2,
                         "terminating": 0});
    let mut waiting = running.clone();
    waiting["active"] = json!(1);
    waiting["ready"] = json!(1);
    let mut still_waiting = waiting.clone();
    still_waiting["ready"] = json!(0);
    let mut interim = running.clone();
    interim["conditions"] = json!([{"type": "SuccessCriteriaMet", "status": "True",
        "reason": "CompletionsReached", "lastTransitionTime": "2026-05-01T09:10:00Z",
        "lastProbeTime": "2026-05-01T09:10:00Z"}]);
    let view = watched_view;
    let w = dispatched_with_a_redispatch_left();
    let origin = OriginView::from_json(&w.origin).expect("origin view");
    let matters =
        |old: &MirrorView, new: &MirrorView| mirror_change_matters(old, new, &origin, &w.config);
    let (running, interim) = (view(&running, false), view(&interim, false));
    let (waiting, waited) = (view(&waiting, true), view(&waiting, false));
    let still_waiting = view(&still_waiting, true);
    assert!(
        !matters(&running, &waiting),
        "gauges as a pod starts to wait"
    );
    assert!(!matters(&waiting, &still_waiting), "gauges while it waits");
    assert!(
        matters(&waiting, &waited),
        "the wait ends: the gauges go through"
    );
    assert!(
        !matters(&running, &interim),
        "interim conditions, no pod waiting"
    );
    assert!(matters(&running, &waited), "gauges, no pod waiting");
}

/// The indexes of an Indexed Job are copied to the origin: a version that changes only which
/// indexes completed or failed matters, whatever the pods waiting to be counted and the
/// re-dispatches left (found by `cargo mutants`: no other test changed them alone).
#[test]
fn a_change_of_the_indexes_alone_matters() {
    let base = json!({"startTime": "2026-05-01T09:00:00Z", "active": 1, "ready": 1,
                      "terminating": 0, "succeeded": 2, "failed": 1,
                      "completedIndexes": "0-1", "failedIndexes": "3"});
    let mut completed = base.clone();
    completed["completedIndexes"] = json!("0,2");
    let mut failed = base.clone();
    failed["failedIndexes"] = json!("4");
    let w = dispatched_with_a_redispatch_left();
    let origin = OriginView::from_json(&w.origin).expect("origin view");
    for counting in [false, true] {
        let view = |s: &Value| watched_view(s, counting);
        for (new, what) in [(&completed, "completedIndexes"), (&failed, "failedIndexes")] {
            assert!(
                mirror_change_matters(&view(&base), &view(new), &origin, &w.config),
                "{what} changed (counting: {counting})"
            );
        }
    }
}
