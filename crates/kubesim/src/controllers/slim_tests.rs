//! `slim::view` against parsing the whole object: the view is [`pick`] of the parsed object (or the
//! parsed object itself), and the Job and TTL controllers' readers make of their views what they make
//! of the whole Job.

use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::job::{JOB_VIEW, origin_of, pod_source};
use super::slim::{Keep, pick, view};
use super::ttl::{TTL_VIEW, key_of};
use crate::jobctl::{JobSim, SimConfig, ttl_expiry};
use crate::json::{is_deleting, meta_str};
use crate::store::Stored;

/// A stored object whose bytes are `text`.
fn stored(text: String) -> Stored {
    let Ok(mut st) = Arc::try_unwrap(Stored::new(1, json!({}))) else {
        unreachable!("a fresh Arc is unique")
    };
    st.json = Bytes::from(text);
    st
}

/// A JSON document, its keys' characters written escaped or not as they come.
#[derive(Debug, Clone)]
enum Doc {
    Obj(Vec<(String, bool, Doc)>),
    Leaf(Value),
}

impl Doc {
    fn write(&self, out: &mut String) {
        match self {
            Doc::Leaf(v) => out.push_str(&v.to_string()),
            Doc::Obj(members) => {
                out.push('{');
                for (i, (k, escaped, v)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    if *escaped {
                        out.push('"');
                        for c in k.chars() {
                            out.push_str(&format!("\\u{:04x}", u32::from(c)));
                        }
                        out.push('"');
                    } else {
                        out.push_str(&Value::from(k.as_str()).to_string());
                    }
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// Keys of both plans, and others.
const KEYS: &[&str] = &[
    "metadata",
    "spec",
    "status",
    "name",
    "namespace",
    "uid",
    "generation",
    "deletionTimestamp",
    "finalizers",
    "labels",
    "conditions",
    "ttlSecondsAfterFinished",
    "managedFields",
    "x",
];

fn doc() -> impl Strategy<Value = Doc> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z\"\\\\é]{0,6}".prop_map(Value::from),
        Just(json!([1, "a", {"b": null}])),
    ]
    .prop_map(Doc::Leaf);
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop::collection::vec((prop::sample::select(KEYS), any::<bool>(), inner), 0..6).prop_map(
            |m| {
                // Each key once, as in the bytes of a stored object (serialised from a map).
                let mut seen = std::collections::HashSet::new();
                Doc::Obj(
                    m.into_iter()
                        .filter(|(k, ..)| seen.insert(*k))
                        .map(|(k, e, v)| (k.to_string(), e, v))
                        .collect(),
                )
            },
        )
    })
}

fn job() -> impl Strategy<Value = Value> {
    let time = prop::sample::select(vec!["2026-01-01T00:00:00Z", "2026-01-01T00:01:40Z"]);
    (
        (
            prop::option::of(prop::sample::select(vec![json!("2026-01-01T00:00:00Z"), Value::Null])),
            prop::option::of(prop::sample::select(vec![json!(["orphan"]), json!(["x", "orphan"]), json!([])])),
            prop::option::of(prop::sample::select(vec![
                json!({"courier.dev/origin-uid": "o", "courier.dev/epoch": "2"}),
                json!({"courier.dev/origin-uid": "o"}),
                json!({"a": "b"}),
            ])),
            prop::option::of(1..4i64),
            any::<bool>(),
        ),
        (
            prop::option::of(prop::sample::select(vec![
                json!("courier.dev/dispatcher"),
                json!("kubernetes.io/job-controller"),
            ])),
            prop::option::of(prop::sample::select(vec![json!(0), json!(100), Value::Null])),
            prop::option::of(0..3i64),
            prop::option::of(0..3i64),
            any::<bool>(),
        ),
        (
            prop::option::of(prop::sample::select(vec!["Complete", "Failed", "Suspended"])),
            any::<bool>(),
            time,
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (deletion, finalizers, labels, generation, managed_fields),
                (managed_by, ttl, per_index, completions, template),
                (condition, true_, at, other_status),
            )| {
                let mut j = json!({"metadata": {"name": "j", "namespace": "ns", "uid": "u",
                    "resourceVersion": "7", "annotations": {"a": "1"}},
                    "spec": {"parallelism": 1, "backoffLimit": 6}, "status": {}});
                let put = |v: &mut Value, k: &str, x: Option<Value>| {
                    if let Some(x) = x {
                        v[k] = x;
                    }
                };
                put(&mut j["metadata"], "deletionTimestamp", deletion);
                put(&mut j["metadata"], "finalizers", finalizers);
                put(&mut j["metadata"], "labels", labels);
                put(&mut j["metadata"], "generation", generation.map(Value::from));
                if managed_fields {
                    j["metadata"]["managedFields"] =
                        json!([{"manager": "m", "operation": "Update", "fieldsV1": {"f:spec": {}}}]);
                }
                put(&mut j["spec"], "managedBy", managed_by);
                put(&mut j["spec"], "ttlSecondsAfterFinished", ttl);
                put(&mut j["spec"], "backoffLimitPerIndex", per_index.map(Value::from));
                put(&mut j["spec"], "completions", completions.map(Value::from));
                if template {
                    j["spec"]["template"] = json!({"metadata": {"annotations": {"sim/run-seconds": "3"}},
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}});
                }
                if let Some(c) = condition {
                    j["status"]["conditions"] = json!([{"type": c,
                        "status": if true_ { "True" } else { "False" }, "lastTransitionTime": at}]);
                }
                if other_status {
                    j["status"]["active"] = json!(1);
                    j["status"]["startTime"] = json!(at);
                }
                j
            },
        )
}

const PLANS: &[&[(&str, Keep)]] = &[JOB_VIEW, TTL_VIEW];

proptest! {
    /// Escaped keys and members of the wrong type included: the view is what picking from the
    /// parsed object gives, or the parsed object where picking finds a non-object.
    #[test]
    fn a_view_is_the_parsed_object_picked(d in doc()) {
        let mut text = String::new();
        d.write(&mut text);
        let st = stored(text);
        let full = st.value();
        for plan in PLANS {
            prop_assert_eq!(view(&st, plan), pick(&full, plan).unwrap_or_else(|| full.clone()));
        }
    }

    /// Broken on purpose once (`finalizers` left out of `JOB_VIEW`, so an Orphan deletion went
    /// unseen): it fails.
    #[test]
    fn the_job_controller_reads_of_its_view_what_it_reads_of_the_whole_job(j in job()) {
        job_reads_alike(&j);
    }

    #[test]
    fn the_ttl_controller_reads_of_its_view_what_it_reads_of_the_whole_job(j in job()) {
        ttl_reads_alike(&j);
    }
}

/// What the Job controller reads of a Job (`observe` and what it calls) is the same in its
/// [`JOB_VIEW`] and in the whole Job.
pub(super) fn job_reads_alike(j: &Value) {
    let v = pick(j, JOB_VIEW).unwrap_or(Value::Null);
    let at = &j["metadata"]["resourceVersion"];
    assert_eq!(
        JobSim::is_managed_elsewhere(&v),
        JobSim::is_managed_elsewhere(j),
        "{at}"
    );
    for k in ["uid", "namespace", "name"] {
        assert_eq!(meta_str(&v, k), meta_str(j, k), "{at}: {k}");
    }
    let generation = "/metadata/generation";
    assert_eq!(v.pointer(generation), j.pointer(generation), "{at}");
    assert_eq!(is_deleting(&v), is_deleting(j), "{at}");
    assert_eq!(origin_of(&v), origin_of(j), "{at}");
    assert_eq!(pod_source(v.clone()), pod_source(j.clone()), "{at}");
    let (now, cfg) = (Timestamp::UNIX_EPOCH, SimConfig::default());
    let (mut a, mut b) = (JobSim::new(&v, now, &cfg), JobSim::new(j, now, &cfg));
    a.observe(&v, now);
    b.observe(j, now);
    assert_eq!(format!("{a:?}"), format!("{b:?}"), "{at}");
}

/// What the TTL controller reads of a Job ([`key_of`], `ttl_expiry`, whether it has a TTL) is the
/// same in its [`TTL_VIEW`] and in the whole Job.
pub(super) fn ttl_reads_alike(j: &Value) {
    let v = pick(j, TTL_VIEW).unwrap_or(Value::Null);
    let at = &j["metadata"]["resourceVersion"];
    let ttl = "/spec/ttlSecondsAfterFinished";
    assert_eq!(v.pointer(ttl).is_none(), j.pointer(ttl).is_none(), "{at}");
    assert_eq!(key_of(&v), key_of(j), "{at}");
    let cfg = SimConfig::default();
    assert_eq!(ttl_expiry(&v, &cfg), ttl_expiry(j, &cfg), "{at}");
}
