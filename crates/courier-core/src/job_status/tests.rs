//! The cached status is the full one in less memory: it expands to what it was made from, encodes
//! to the same JSON, and status translation through the cached form (`BatchJob`) produces what it
//! produces on the full form, over generated statuses and over every status in the recordings.

use std::path::Path;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;
use serde_json::Value;

use super::*;
use crate::batch_job::BatchJob;
use crate::job::JobSpecEssentials;
use crate::ownership::Intent;
use crate::reconcile::OriginOf;
use crate::status::{MirrorReport, TranslateInput, translate_status};
use crate::workload::Workload;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(KNOWN.to_vec()).prop_map(str::to_string),
        1 => "[a-zA-Z ./()0-9]{0,24}",
        1 => Just("dispatched to w1 (epoch 2)".to_string()),
    ]
}

/// A time as the API server sends it (whole seconds), now and then one with a fraction.
fn time() -> impl Strategy<Value = Option<Time>> {
    let base = 1_790_000_000i64;
    prop_oneof![
        1 => Just(None),
        6 => (0i64..400).prop_map(move |s| Timestamp::from_second(base + s).ok().map(Time)),
        1 => (0i64..400, 1i32..1_000_000_000).prop_map(move |(s, n)| {
            Timestamp::new(base + s, n).ok().map(Time)
        }),
    ]
}

fn condition() -> impl Strategy<Value = JobCondition> {
    let type_ = prop_oneof![
        4 => proptest::sample::select(vec![
            "Complete", "Failed", "Suspended", "SuccessCriteriaMet", "FailureTarget",
            "courier.dev/Dispatched", "courier.dev/Placed",
        ])
        .prop_map(str::to_string),
        1 => "[A-Za-z]{1,12}",
    ];
    let status = prop_oneof![
        4 => proptest::sample::select(vec!["True", "False", "Unknown"]).prop_map(str::to_string),
        1 => "[a-z]{0,5}",
    ];
    (
        type_,
        status,
        proptest::option::of(text()),
        proptest::option::of(text()),
        time(),
        time(),
    )
        .prop_map(
            |(type_, status, reason, message, last_probe_time, last_transition_time)| {
                JobCondition {
                    type_,
                    status,
                    reason,
                    message,
                    last_probe_time,
                    last_transition_time,
                }
            },
        )
}

fn count() -> impl Strategy<Value = Option<i32>> {
    proptest::option::of(0i32..4)
}

fn uncounted() -> impl Strategy<Value = Option<UncountedTerminatedPods>> {
    prop_oneof![
        Just(None),
        Just(Some(UncountedTerminatedPods::default())),
        proptest::collection::vec("[a-f0-9]{4}", 0..2).prop_map(|uids| {
            Some(UncountedTerminatedPods {
                succeeded: Some(uids),
                failed: None,
            })
        }),
    ]
}

fn status() -> impl Strategy<Value = JobStatus> {
    (
        (count(), count(), count(), count(), count()),
        (time(), time()),
        proptest::option::of(proptest::collection::vec(condition(), 0..5)),
        proptest::option::of("[0-9,-]{0,6}"),
        proptest::option::of("[0-9,-]{0,6}"),
        uncounted(),
    )
        .prop_map(
            |(
                (active, ready, succeeded, failed, terminating),
                (start_time, completion_time),
                conditions,
                completed_indexes,
                failed_indexes,
                uncounted_terminated_pods,
            )| JobStatus {
                active,
                ready,
                succeeded,
                failed,
                terminating,
                start_time,
                completion_time,
                conditions,
                completed_indexes,
                failed_indexes,
                uncounted_terminated_pods,
            },
        )
}

fn spec() -> impl Strategy<Value = JobSpecEssentials> {
    (
        any::<bool>(),
        proptest::option::of(1i32..4),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(suspend, completions, indexed, has_success_policy)| JobSpecEssentials {
                suspend,
                completions,
                parallelism: completions,
                indexed,
                has_success_policy,
                ..JobSpecEssentials::default()
            },
        )
}

/// Translation as it was (on the full statuses) and as `BatchJob` does it on the cached ones.
fn old_and_new(
    spec: &JobSpecEssentials,
    origin: &JobStatus,
    mirror: Option<&JobStatus>,
    redispatch_possible: bool,
    now: Timestamp,
) -> (Option<JobStatus>, Option<JobStatus>) {
    let placement = Intent {
        cluster: "w1".into(),
        epoch: 2,
    };
    let old = translate_status(&TranslateInput {
        origin_spec: spec,
        origin_status: origin,
        mirror: mirror.map(|status| MirrorReport {
            status,
            placement: &placement,
        }),
        redispatch_possible,
        now,
    });
    let view = OriginOf::<BatchJob> {
        spec: spec.clone(),
        status: CachedStatus::from(origin.clone()),
        ..OriginOf::default()
    };
    let cached_mirror = mirror.map(|m| CachedStatus::from(m.clone()));
    let new = BatchJob::translate(
        &view,
        cached_mirror
            .as_ref()
            .map(|status| crate::workload::MirrorReport {
                status,
                placement: &placement,
            }),
        redispatch_possible,
        now,
    );
    (old, new.map(|s| s.expand()))
}

fn same_everywhere(s: &JobStatus) {
    let cached = CachedStatus::from(s.clone());
    assert_eq!(
        &cached.expand(),
        s,
        "the cached form expands to what it was"
    );
    let full = serde_json::to_string(s).unwrap_or_else(|e| panic!("{e}"));
    let compact = serde_json::to_string(&cached).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        compact, full,
        "the cached form encodes byte for byte as the full one"
    );
    let back: CachedStatus = serde_json::from_str(&full).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.expand(), s.clone().expand_through_json());
    assert_eq!(
        crate::job::finished(&cached),
        crate::job::finished(s),
        "the run is over alike"
    );
    for t in [
        "Complete",
        "Failed",
        "Suspended",
        "SuccessCriteriaMet",
        "FailureTarget",
    ] {
        assert_eq!(
            crate::job::is_true(&cached, t),
            crate::job::is_true(s, t),
            "{t}"
        );
    }
}

/// `CachedStatus::patch_from` gives the patch of both statuses encoded whole and diffed.
fn same_patch(old: &JobStatus, new: &JobStatus) {
    let (o, n) = (
        CachedStatus::from(old.clone()),
        CachedStatus::from(new.clone()),
    );
    let whole = crate::merge_patch::status_patch(old, new).unwrap_or_else(|e| panic!("{e}"));
    let patch = n.patch_from(&o).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(patch, whole, "the patch from {old:?} to {new:?}");
}

#[test]
fn conditions_that_differ_only_below_a_second_are_not_in_the_patch() {
    let at = |nanos| {
        Some(Time(
            Timestamp::new(1_790_000_000, nanos).unwrap_or(Timestamp::UNIX_EPOCH),
        ))
    };
    let with = |nanos| JobStatus {
        active: Some(1),
        conditions: Some(vec![JobCondition {
            type_: "Complete".into(),
            status: "True".into(),
            last_transition_time: at(nanos),
            ..JobCondition::default()
        }]),
        ..JobStatus::default()
    };
    let (old, new) = (with(300_000_000), with(700_000_000));
    same_patch(&old, &new);
    let patch = CachedStatus::from(new)
        .patch_from(&CachedStatus::from(old))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(patch, serde_json::json!({}));
    let (old, new) = (with(0), JobStatus::default());
    same_patch(&old, &new);
    same_patch(&new, &old);
}

/// The full status as JSON decodes it again (times to the second, as `Time` encodes them).
trait ThroughJson {
    fn expand_through_json(self) -> JobStatus;
}

impl ThroughJson for JobStatus {
    fn expand_through_json(self) -> JobStatus {
        let text = serde_json::to_string(&self).unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_cached_form_loses_nothing(s in status()) {
        same_everywhere(&s);
    }

    /// A compact time is written as `Time` encodes it, over every second jiff can hold.
    #[test]
    fn a_compact_time_encodes_as_time_does(
        seconds in prop_oneof![
            Timestamp::MIN.as_second()..=Timestamp::MAX.as_second(),
            -30_610_224_000i64..253_402_300_800,
        ],
    ) {
        let t = Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH);
        let whole = serde_json::to_value(Time(t)).ok();
        prop_assert_eq!(time_json(t.as_second()).ok().flatten(), whole);
    }

    /// A condition is encoded as its full form encodes.
    #[test]
    fn a_condition_encodes_as_its_full_form(c in condition()) {
        let compact = Condition::new(c.clone());
        prop_assert_eq!(compact.to_json().ok(), serde_json::to_value(&c).ok());
    }

    #[test]
    fn the_status_patch_is_the_diff_of_the_whole_statuses(
        old in status(),
        new in status(),
        same_conditions in any::<bool>(),
    ) {
        let mut new = new;
        if same_conditions {
            new.conditions.clone_from(&old.conditions);
        }
        same_patch(&old, &new);
    }

    #[test]
    fn translation_through_the_cached_form_is_unchanged(
        spec in spec(),
        origin in status(),
        mirror in proptest::option::of(status()),
        redispatch_possible in any::<bool>(),
        now_offset in 0i64..1000,
        now_nanos in 0i32..1_000_000_000,
    ) {
        let now = Timestamp::new(1_790_000_000 + now_offset, now_nanos)
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let (old, new) = old_and_new(&spec, &origin, mirror.as_ref(), redispatch_possible, now);
        prop_assert_eq!(old, new);
    }
}

/// Every status object in the recordings of a real API server and in the Job traces
/// (crates/kubesim/testdata).
fn recorded_statuses() -> Vec<JobStatus> {
    fn walk(v: &Value, out: &mut Vec<JobStatus>) {
        match v {
            Value::Object(m) => {
                // A Job's, or a trace step's (those carry no kind); others decode as empty.
                let status = m.get("status").filter(|s| s.is_object());
                if let Some(Ok(s)) = status.map(|s| serde_json::from_value::<JobStatus>(s.clone()))
                {
                    out.push(s);
                }
                m.values().for_each(|v| walk(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kubesim/testdata");
    let mut out = Vec::new();
    for dir in ["apiserver", "job-traces"] {
        let entries = std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                walk(&v, &mut out);
            }
        }
    }
    out
}

#[test]
fn every_recorded_status_survives_and_translates_alike() {
    let statuses = recorded_statuses();
    let with_conditions = statuses
        .iter()
        .filter(|s| s.conditions.as_ref().is_some_and(|c| !c.is_empty()))
        .count();
    assert!(
        with_conditions >= 20,
        "the recordings hold Job statuses with conditions ({with_conditions} found)"
    );
    let now = Timestamp::from_second(1_790_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let spec = JobSpecEssentials {
        completions: Some(1),
        parallelism: Some(1),
        ..JobSpecEssentials::default()
    };
    for (s, next) in statuses.iter().zip(statuses.iter().skip(1)) {
        same_patch(s, next);
        same_patch(s, s);
    }
    for s in &statuses {
        same_everywhere(s);
        for origin in [JobStatus::default(), s.clone()] {
            for redispatch in [false, true] {
                let (old, new) = old_and_new(&spec, &origin, Some(s), redispatch, now);
                assert_eq!(old, new, "translating {s:?}");
                let (old, new) = old_and_new(&spec, s, None, redispatch, now);
                assert_eq!(old, new, "maintaining {s:?}");
            }
        }
    }
}

#[test]
fn the_benchmark_status_allocates_only_its_condition_list() {
    let s: JobStatus = serde_json::from_str(
        r#"{"conditions":[{"type":"SuccessCriteriaMet","status":"True","lastProbeTime":"2026-11-27T01:00:04Z","lastTransitionTime":"2026-11-27T01:00:04Z","reason":"CompletionsReached","message":"Reached expected number of succeeded pods"}],"startTime":"2026-11-27T01:00:02Z","succeeded":1,"terminating":0,"ready":0,"uncountedTerminatedPods":{}}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let cached = CachedStatus::from(s.clone());
    assert!(
        cached.rare.is_none(),
        "an empty uncounted list needs no box"
    );
    let Some([Condition::Small(c)]) = cached.conditions.as_deref() else {
        panic!("one compact condition: {cached:?}")
    };
    for word in [&c.type_, &c.status]
        .into_iter()
        .chain(c.reason.as_ref())
        .chain(c.message.as_ref())
    {
        assert!(
            matches!(word, Word::Known(_)),
            "{word:?} is kept as static text"
        );
    }
    assert_eq!(cached.expand(), s);
}
