//! Building a mirror Job from an origin Job, and the spec changes that flow down to it afterwards.
//!
//! Mirrors are built from the origin's JSON, never from a typed `Job`: typed structs drop fields newer
//! than the compiled API version, and a mirror must carry every field the user wrote.

use serde_json::{Map, Value, json};

use courier_api::{
    ANNOTATION_EPOCH, ANNOTATION_REDISPATCHES, JOB_CONTROLLER_TEMPLATE_LABELS,
    JOB_CONTROLLER_UID_LABELS, LABEL_CLUSTER, LABEL_EPOCH, LABEL_ORIGIN, LABEL_ORIGIN_UID,
};

use crate::selector::label_value_problem;

/// Why a mirror cannot be built from an origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    #[error("the origin Job is not a JSON object")]
    NotAnObject,
    #[error("the origin Job has no {field}")]
    MissingField { field: &'static str },
    #[error("origin id {origin_id:?} cannot be a label value: {reason}")]
    InvalidOriginId { origin_id: String, reason: String },
    #[error("epoch 0 is not a placement epoch (epochs start at 1)")]
    ZeroEpoch,
}

/// Origin metadata Courier writes for its own bookkeeping; it means nothing on a worker.
const ORIGIN_BOOKKEEPING_LABELS: [&str; 1] = [LABEL_CLUSTER];
const ORIGIN_BOOKKEEPING_ANNOTATIONS: [&str; 2] = [ANNOTATION_EPOCH, ANNOTATION_REDISPATCHES];

/// Spec fields that are mutable on a running Job and flow from the origin down to its mirror.
pub const DRIFTING_SPEC_FIELDS: [&str; 6] = [
    "suspend",
    "parallelism",
    "activeDeadlineSeconds",
    "backoffLimit",
    "maxFailedIndexes",
    "podReplacementPolicy",
];

/// Drifting fields the API server defaults on create: an origin without one has no opinion, so its
/// absence is never propagated as a removal (which the worker would only default back).
const SERVER_DEFAULTED_FIELDS: [&str; 3] = ["parallelism", "backoffLimit", "podReplacementPolicy"];

/// Builds the mirror of `origin` (a batch/v1 Job as JSON) for placement epoch `epoch`.
///
/// Keeps name, namespace, labels, annotations and the whole spec, minus: every other metadata field
/// (uid, resourceVersion, generation, creationTimestamp, managedFields, finalizers, ownerReferences,
/// deletion fields, ...), `status`, `spec.managedBy` (so the worker's own controller runs it) and
/// `spec.ttlSecondsAfterFinished` (the origin's TTL drives cleanup). Unless `spec.manualSelector` is
/// true, also `spec.selector` and the four controller-generated template labels (the worker generates
/// its own; a copied selector is rejected). Courier's origin bookkeeping (`courier.dev/cluster`,
/// `courier.dev/epoch`, `courier.dev/redispatches`) and metadata labels carrying the origin's UID as
/// `controller-uid` (copied from the template by the server's defaulting) are removed; the mirror
/// labels `courier.dev/origin`, `courier.dev/origin-uid` and `courier.dev/epoch` are set.
pub fn mirror_for(origin: &Value, origin_id: &str, epoch: u64) -> Result<Value, MirrorError> {
    if epoch == 0 {
        return Err(MirrorError::ZeroEpoch);
    }
    if let Some(reason) = label_value_problem(origin_id).or_else(|| {
        origin_id
            .is_empty()
            .then(|| "it must be non-empty".to_string())
    }) {
        return Err(MirrorError::InvalidOriginId {
            origin_id: origin_id.to_string(),
            reason,
        });
    }
    let origin = origin.as_object().ok_or(MirrorError::NotAnObject)?;
    let metadata = origin
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or(MirrorError::MissingField { field: "metadata" })?;
    let non_empty_str = |field: &'static str, key: &str| {
        metadata
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or(MirrorError::MissingField { field })
    };
    let name = non_empty_str("metadata.name", "name")?;
    let namespace = non_empty_str("metadata.namespace", "namespace")?;
    let uid = non_empty_str("metadata.uid", "uid")?;
    let mut spec = origin
        .get("spec")
        .and_then(Value::as_object)
        .cloned()
        .ok_or(MirrorError::MissingField { field: "spec" })?;

    let mut labels = string_map(metadata.get("labels"));
    for key in ORIGIN_BOOKKEEPING_LABELS {
        labels.remove(key);
    }
    for key in JOB_CONTROLLER_UID_LABELS {
        if labels.get(key).and_then(Value::as_str) == Some(uid) {
            labels.remove(key);
        }
    }
    labels.insert(LABEL_ORIGIN.into(), json!(origin_id));
    labels.insert(LABEL_ORIGIN_UID.into(), json!(uid));
    labels.insert(LABEL_EPOCH.into(), json!(epoch.to_string()));

    let mut annotations = string_map(metadata.get("annotations"));
    for key in ORIGIN_BOOKKEEPING_ANNOTATIONS {
        annotations.remove(key);
    }

    spec.remove("managedBy");
    spec.remove("ttlSecondsAfterFinished");
    let manual_selector = spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
    if !manual_selector {
        spec.remove("selector");
        strip_template_controller_labels(&mut spec);
    }

    let mut mirror_meta = Map::new();
    mirror_meta.insert("name".into(), json!(name));
    mirror_meta.insert("namespace".into(), json!(namespace));
    mirror_meta.insert("labels".into(), Value::Object(labels));
    if !annotations.is_empty() {
        mirror_meta.insert("annotations".into(), Value::Object(annotations));
    }
    Ok(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": mirror_meta,
        "spec": spec,
    }))
}

fn string_map(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(Value::as_object).cloned().unwrap_or_default()
}

fn strip_template_controller_labels(spec: &mut Map<String, Value>) {
    let Some(template_meta) = spec
        .get_mut("template")
        .and_then(|t| t.get_mut("metadata"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let now_empty = match template_meta
        .get_mut("labels")
        .and_then(Value::as_object_mut)
    {
        Some(labels) => {
            for key in JOB_CONTROLLER_TEMPLATE_LABELS {
                labels.remove(key);
            }
            labels.is_empty()
        }
        None => false,
    };
    if now_empty {
        template_meta.remove("labels");
    }
}

/// The JSON merge patch (`{"spec": {...}}`) that brings the mirror's mutable spec fields
/// ([`DRIFTING_SPEC_FIELDS`]) in line with the origin's, or `None` when they agree.
///
/// A field the origin no longer has is removed on the mirror (`null`), except for the fields the
/// API server defaults (`parallelism`, `backoffLimit`, `podReplacementPolicy`), where absence means
/// "no opinion". `suspend` absent reads as false on both sides.
pub fn mirror_spec_drift(origin_spec: &Value, mirror_spec: &Value) -> Option<Value> {
    let field = |spec: &Value, key: &str| spec.get(key).filter(|v| !v.is_null()).cloned();
    let mut patch = Map::new();
    for key in DRIFTING_SPEC_FIELDS {
        let (mut want, mut have) = (field(origin_spec, key), field(mirror_spec, key));
        if key == "suspend" {
            want = Some(want.unwrap_or(json!(false)));
            have = Some(have.unwrap_or(json!(false)));
        }
        if want == have || (want.is_none() && SERVER_DEFAULTED_FIELDS.contains(&key)) {
            continue;
        }
        patch.insert(key.to_string(), want.unwrap_or(Value::Null));
    }
    (!patch.is_empty()).then(|| json!({ "spec": patch }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An origin as the management API server stores it (defaulted, with our bookkeeping).
    fn origin() -> Value {
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "train", "namespace": "ml", "uid": "u-1", "resourceVersion": "42", "generation": 3,
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "kubectl"}],
                "finalizers": ["courier.dev/mirror-cleanup"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "o"}],
                "deletionTimestamp": "2026-01-01T00:00:09Z", "deletionGracePeriodSeconds": 0,
                "selfLink": "/x",
                "labels": {
                    "team": "a", "courier.dev/cluster": "eu-1",
                    "controller-uid": "u-1", "batch.kubernetes.io/controller-uid": "u-1",
                    "job-name": "train", "batch.kubernetes.io/job-name": "train"
                },
                "annotations": {"note": "n", "courier.dev/epoch": "2", "courier.dev/redispatches": "1",
                                "courier.dev/cluster-selector": "region=eu"}
            },
            "spec": {
                "managedBy": "courier.dev/dispatcher", "ttlSecondsAfterFinished": 100,
                "parallelism": 2, "completions": 3, "backoffLimit": 6, "completionMode": "NonIndexed",
                "suspend": false, "manualSelector": false, "podReplacementPolicy": "TerminatingOrFailed",
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}},
                "futureField": {"from": "v1.99"},
                "template": {
                    "metadata": {"labels": {
                        "app": "t", "controller-uid": "u-1", "batch.kubernetes.io/controller-uid": "u-1",
                        "job-name": "train", "batch.kubernetes.io/job-name": "train"
                    }},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
                }
            },
            "status": {"active": 1}
        })
    }

    #[test]
    fn builds_the_contract_shape() {
        let mirror = mirror_for(&origin(), "mgmt-a", 2).expect("mirror");
        assert_eq!(
            mirror,
            json!({
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": "train", "namespace": "ml",
                    "labels": {
                        "team": "a", "job-name": "train", "batch.kubernetes.io/job-name": "train",
                        "courier.dev/origin": "mgmt-a", "courier.dev/origin-uid": "u-1",
                        "courier.dev/epoch": "2"
                    },
                    "annotations": {"note": "n", "courier.dev/cluster-selector": "region=eu"}
                },
                "spec": {
                    "parallelism": 2, "completions": 3, "backoffLimit": 6, "completionMode": "NonIndexed",
                    "suspend": false, "manualSelector": false,
                    "podReplacementPolicy": "TerminatingOrFailed",
                    "futureField": {"from": "v1.99"},
                    "template": {
                        "metadata": {"labels": {"app": "t"}},
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
                    }
                }
            })
        );
    }

    #[test]
    fn manual_selector_keeps_selector_and_template_labels() {
        let mut o = origin();
        o["spec"]["manualSelector"] = json!(true);
        o["spec"]["selector"] = json!({"matchLabels": {"app": "t"}});
        let mirror = mirror_for(&o, "c", 1).expect("mirror");
        assert_eq!(
            mirror["spec"]["selector"],
            json!({"matchLabels": {"app": "t"}})
        );
        assert_eq!(
            mirror["spec"]["template"]["metadata"]["labels"]["job-name"],
            json!("train")
        );
        assert_eq!(mirror["spec"]["manualSelector"], json!(true));
    }

    #[test]
    fn template_without_other_labels_loses_the_labels_map() {
        let mut o = origin();
        o["spec"]["template"]["metadata"]["labels"]
            .as_object_mut()
            .expect("labels")
            .remove("app");
        let mirror = mirror_for(&o, "c", 1).expect("mirror");
        assert_eq!(mirror["spec"]["template"]["metadata"], json!({}));
    }

    #[test]
    fn minimal_origin() {
        let o = json!({"metadata": {"name": "j", "namespace": "d", "uid": "u"}, "spec": {"template": {}}});
        let m = mirror_for(&o, "c", 7).expect("mirror");
        assert_eq!(
            m["metadata"],
            json!({"name": "j", "namespace": "d", "labels": {
                "courier.dev/origin": "c", "courier.dev/origin-uid": "u", "courier.dev/epoch": "7"}})
        );
    }

    #[test]
    fn mirror_labels_cannot_be_spoofed_by_the_origin() {
        let mut o = origin();
        o["metadata"]["labels"]["courier.dev/origin"] = json!("someone-else");
        o["metadata"]["labels"]["courier.dev/epoch"] = json!("99");
        let m = mirror_for(&o, "mine", 3).expect("mirror");
        assert_eq!(m["metadata"]["labels"]["courier.dev/origin"], json!("mine"));
        assert_eq!(m["metadata"]["labels"]["courier.dev/epoch"], json!("3"));
    }

    #[test]
    fn errors() {
        assert_eq!(
            mirror_for(&json!([]), "c", 1),
            Err(MirrorError::NotAnObject)
        );
        assert_eq!(mirror_for(&origin(), "c", 0), Err(MirrorError::ZeroEpoch));
        let mut o = origin();
        o["metadata"]["uid"] = json!("");
        assert_eq!(
            mirror_for(&o, "c", 1),
            Err(MirrorError::MissingField {
                field: "metadata.uid"
            })
        );
        let mut o = origin();
        o["metadata"]
            .as_object_mut()
            .expect("meta")
            .remove("namespace");
        assert_eq!(
            mirror_for(&o, "c", 1),
            Err(MirrorError::MissingField {
                field: "metadata.namespace"
            })
        );
        let mut o = origin();
        o.as_object_mut().expect("obj").remove("spec");
        assert_eq!(
            mirror_for(&o, "c", 1),
            Err(MirrorError::MissingField { field: "spec" })
        );
        for bad in ["", "not valid!", &"x".repeat(64)] {
            assert!(matches!(
                mirror_for(&origin(), bad, 1),
                Err(MirrorError::InvalidOriginId { .. })
            ));
        }
        let msg = mirror_for(&origin(), "a b", 1)
            .expect_err("bad id")
            .to_string();
        assert!(msg.contains("\"a b\""), "{msg}");
    }

    #[test]
    fn drift_patches_only_mutable_fields() {
        let mirror = mirror_for(&origin(), "c", 1).expect("mirror")["spec"].clone();
        assert_eq!(mirror_spec_drift(&origin()["spec"], &mirror), None);

        let mut o = origin()["spec"].clone();
        o["suspend"] = json!(true);
        o["parallelism"] = json!(5);
        o["activeDeadlineSeconds"] = json!(60);
        o["completions"] = json!(9); // immutable: never patched
        o["template"]["spec"]["restartPolicy"] = json!("OnFailure");
        assert_eq!(
            mirror_spec_drift(&o, &mirror),
            Some(json!({"spec": {"suspend": true, "parallelism": 5, "activeDeadlineSeconds": 60}}))
        );
    }

    #[test]
    fn drift_removal_and_defaults() {
        let origin = json!({"suspend": null, "parallelism": null});
        let mirror = json!({"suspend": false, "parallelism": 1, "backoffLimit": 6,
                            "activeDeadlineSeconds": 5, "maxFailedIndexes": 2});
        assert_eq!(
            mirror_spec_drift(&origin, &mirror),
            Some(json!({"spec": {"activeDeadlineSeconds": null, "maxFailedIndexes": null}}))
        );
        assert_eq!(
            mirror_spec_drift(&json!({}), &json!({"suspend": true})),
            Some(json!({"spec": {"suspend": false}}))
        );
        assert_eq!(
            mirror_spec_drift(&json!({"suspend": false}), &json!({})),
            None
        );
    }

    proptest! {
        /// Applying the drift patch makes the drift disappear (the patch is a fixed point).
        #[test]
        fn drift_patch_converges(
            o_susp in proptest::option::of(any::<bool>()), m_susp in proptest::option::of(any::<bool>()),
            o_par in proptest::option::of(0i32..4), m_par in proptest::option::of(0i32..4),
            o_ads in proptest::option::of(1i64..4), m_ads in proptest::option::of(1i64..4),
        ) {
            let obj = |s: Option<bool>, p: Option<i32>, a: Option<i64>| {
                let mut m = Map::new();
                if let Some(s) = s { m.insert("suspend".into(), json!(s)); }
                if let Some(p) = p { m.insert("parallelism".into(), json!(p)); }
                if let Some(a) = a { m.insert("activeDeadlineSeconds".into(), json!(a)); }
                Value::Object(m)
            };
            let origin = obj(o_susp, o_par, o_ads);
            let mut mirror = obj(m_susp, m_par, m_ads);
            if let Some(patch) = mirror_spec_drift(&origin, &mirror) {
                for (k, v) in patch["spec"].as_object().expect("spec patch") {
                    let m = mirror.as_object_mut().expect("object");
                    if v.is_null() { m.remove(k); } else { m.insert(k.clone(), v.clone()); }
                }
            }
            prop_assert_eq!(mirror_spec_drift(&origin, &mirror), None);
        }
    }
}
