//! Building a mirror Job from an origin Job, and the spec changes that flow down to it afterwards.
//!
//! Mirrors are built from the origin's JSON, never from a typed `Job`: typed structs drop fields newer
//! than the compiled API version, and a mirror must carry every field the user wrote.

use serde_json::{Map, Value, json};

use courier_api::{
    ANNOTATION_EPOCH, ANNOTATION_REDISPATCHES, ANNOTATION_SPEC_HASH, ANNOTATION_TEMPLATE_HASH,
    JOB_CONTROLLER_UID_LABELS, LABEL_CLUSTER, LABEL_EPOCH, LABEL_KUEUE_QUEUE_NAME, LABEL_ORIGIN,
    LABEL_ORIGIN_UID,
};

use crate::drift::{hash_value, mirror_template, spec_hash};
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
const ORIGIN_BOOKKEEPING_ANNOTATIONS: [&str; 4] = [
    ANNOTATION_EPOCH,
    ANNOTATION_REDISPATCHES,
    ANNOTATION_TEMPLATE_HASH,
    ANNOTATION_SPEC_HASH,
];

/// Whether an origin label is Courier's own bookkeeping, which [`mirror_for`] leaves out.
pub fn is_bookkeeping_label(key: &str) -> bool {
    ORIGIN_BOOKKEEPING_LABELS.contains(&key)
}

/// Whether an origin annotation is Courier's own bookkeeping, which [`mirror_for`] leaves out.
pub fn is_bookkeeping_annotation(key: &str) -> bool {
    ORIGIN_BOOKKEEPING_ANNOTATIONS.contains(&key)
}

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
/// labels `courier.dev/origin`, `courier.dev/origin-uid` and `courier.dev/epoch` are set, and the
/// annotations `courier.dev/template-hash` / `courier.dev/spec-hash` record what was sent (see
/// [`crate::drift`]). An origin queued by Kueue (`kueue.x-k8s.io/queue-name`) gets a suspended
/// mirror: the worker's Kueue admits it.
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
    let origin_spec = origin
        .get("spec")
        .filter(|s| s.is_object())
        .ok_or(MirrorError::MissingField { field: "spec" })?;
    let manual_selector = origin_spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
    // The fields left out never reach the mirror, and the pod template is copied once, by
    // `mirror_template` (the largest part of an origin: copying the spec whole and the template
    // again was most of this function's time).
    let mut spec: Map<String, Value> = origin_spec
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| match k.as_str() {
            "managedBy" | "ttlSecondsAfterFinished" => false,
            // Built by `mirror_template` (when it is an object, the only template it reads).
            "template" => !v.is_object(),
            "selector" => manual_selector,
            _ => true,
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();

    let mut labels = string_map(metadata.get("labels"));
    labels.retain(|k, _| !is_bookkeeping_label(k));
    for key in JOB_CONTROLLER_UID_LABELS {
        if labels.get(key).and_then(Value::as_str) == Some(uid) {
            labels.remove(key);
        }
    }
    labels.insert(LABEL_ORIGIN.into(), json!(origin_id));
    labels.insert(LABEL_ORIGIN_UID.into(), json!(uid));
    labels.insert(LABEL_EPOCH.into(), json!(epoch.to_string()));

    let mut annotations = string_map(metadata.get("annotations"));
    annotations.retain(|k, _| !is_bookkeeping_annotation(k));

    // The template and the drifting fields read here are none of the fields left out above.
    if let Some(template) = mirror_template(origin_spec) {
        annotations.insert(
            ANNOTATION_TEMPLATE_HASH.into(),
            json!(hash_value(&template)),
        );
        spec.insert("template".into(), template);
    }
    let kueue = labels
        .get(LABEL_KUEUE_QUEUE_NAME)
        .and_then(Value::as_str)
        .is_some_and(|q| !q.is_empty());
    annotations.insert(
        ANNOTATION_SPEC_HASH.into(),
        json!(spec_hash(origin_spec, kueue)),
    );
    if kueue {
        spec.insert("suspend".into(), json!(true));
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

#[cfg(test)]
mod equivalence;

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The mirror without the two hash annotations (tested on their own).
    fn without_hashes(mut m: Value) -> Value {
        if let Some(a) = m["metadata"]["annotations"].as_object_mut() {
            a.remove(ANNOTATION_TEMPLATE_HASH);
            a.remove(ANNOTATION_SPEC_HASH);
            if a.is_empty() {
                m["metadata"]
                    .as_object_mut()
                    .expect("meta")
                    .remove("annotations");
            }
        }
        m
    }

    #[test]
    fn builds_the_contract_shape() {
        let mirror = without_hashes(mirror_for(&origin(), "mgmt-a", 2).expect("mirror"));
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
        let m = without_hashes(mirror_for(&o, "c", 7).expect("mirror"));
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
    fn records_what_was_sent_and_queues_kueue_jobs_suspended() {
        let o = origin();
        let m = mirror_for(&o, "c", 1).expect("mirror");
        let annotations = &m["metadata"]["annotations"];
        assert_eq!(
            annotations[ANNOTATION_TEMPLATE_HASH],
            json!(crate::drift::template_hash(&o["spec"]).expect("template"))
        );
        assert_eq!(
            annotations[ANNOTATION_SPEC_HASH],
            json!(spec_hash(&o["spec"], false))
        );
        // What the origin's view computes from the same spec (the drift baseline).
        let view = crate::reconcile::OriginView::from_json(&o).expect("view");
        assert_eq!(
            view.template_hash.as_deref(),
            annotations[ANNOTATION_TEMPLATE_HASH].as_str()
        );
        // An origin cannot smuggle hashes onto its mirror.
        let mut spoofed = origin();
        spoofed["metadata"]["annotations"][ANNOTATION_TEMPLATE_HASH] = json!("0");
        let m2 = mirror_for(&spoofed, "c", 1).expect("mirror");
        assert_eq!(m2["metadata"]["annotations"], m["metadata"]["annotations"]);

        let mut queued = origin();
        queued["metadata"]["labels"][LABEL_KUEUE_QUEUE_NAME] = json!("q");
        let m = mirror_for(&queued, "c", 1).expect("mirror");
        assert_eq!(m["spec"]["suspend"], json!(true), "Kueue admits it");
        assert_eq!(m["metadata"]["labels"][LABEL_KUEUE_QUEUE_NAME], json!("q"));
        assert_eq!(
            m["metadata"]["annotations"][ANNOTATION_SPEC_HASH],
            json!(spec_hash(&queued["spec"], true))
        );
    }
}
