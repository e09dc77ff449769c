//! `mirror_for` copies only what the mirror keeps; this is the earlier version, which copied the
//! spec whole, removed fields and copied it again, and must build the same mirror from any origin.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::*;

fn mirror_by_copies(origin: &Value, origin_id: &str, epoch: u64) -> Result<Value, MirrorError> {
    if epoch == 0 {
        return Err(MirrorError::ZeroEpoch);
    }
    let origin = origin.as_object().ok_or(MirrorError::NotAnObject)?;
    let metadata = origin
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or(MirrorError::MissingField { field: "metadata" })?;
    let field = |f: &'static str, key: &str| {
        metadata
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or(MirrorError::MissingField { field: f })
    };
    let name = field("metadata.name", "name")?;
    let namespace = field("metadata.namespace", "namespace")?;
    let uid = field("metadata.uid", "uid")?;
    let mut spec = origin
        .get("spec")
        .and_then(Value::as_object)
        .cloned()
        .ok_or(MirrorError::MissingField { field: "spec" })?;
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
    spec.remove("managedBy");
    spec.remove("ttlSecondsAfterFinished");
    if spec.get("manualSelector").and_then(Value::as_bool) != Some(true) {
        spec.remove("selector");
    }
    let origin_spec = Value::Object(spec.clone());
    if let Some(template) = mirror_template(&origin_spec) {
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
        json!(spec_hash(&origin_spec, kueue)),
    );
    if kueue {
        spec.insert("suspend".into(), json!(true));
    }
    let mut meta = Map::new();
    meta.insert("name".into(), json!(name));
    meta.insert("namespace".into(), json!(namespace));
    meta.insert("labels".into(), Value::Object(labels));
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    Ok(json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}))
}

/// A value for a spec field: the kinds an origin's spec may hold (or a malformed one).
fn field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (0u32..4).prop_map(Value::from),
        "[a-z]{0,3}".prop_map(Value::from),
        Just(json!({"matchLabels": {"a": "b"}})),
    ]
}

fn template() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("not an object")),
        Just(json!({"spec": {"containers": [{"name": "c"}]}})),
        Just(
            json!({"metadata": {"labels": {"job-name": "j", "batch.kubernetes.io/controller-uid": "u", "app": "x"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}})
        ),
        Just(
            json!({"metadata": {"labels": {"controller-uid": "u"}, "annotations": {"a": "1"}}, "spec": {}})
        ),
    ]
}

fn origin() -> impl Strategy<Value = Value> {
    let keys = [
        "template",
        "managedBy",
        "ttlSecondsAfterFinished",
        "selector",
        "manualSelector",
        "suspend",
        "parallelism",
        "completions",
        "backoffLimit",
        "completionMode",
    ];
    let spec = proptest::collection::vec((0..keys.len(), field_value(), template()), 0..8)
        .prop_map(move |fields| {
            let mut spec = Map::new();
            for (i, v, t) in fields {
                let v = if keys[i] == "template" { t } else { v };
                spec.insert(keys[i].to_string(), v);
            }
            Value::Object(spec)
        });
    let queued = prop_oneof![Just(None), Just(Some("")), Just(Some("q"))];
    (spec, queued, any::<bool>()).prop_map(|(spec, queue, own_labels)| {
        let mut labels = json!({"team": "a", "courier.dev/cluster": "eu-1"});
        if let Some(q) = queue {
            labels[LABEL_KUEUE_QUEUE_NAME] = json!(q);
        }
        if own_labels {
            labels["controller-uid"] = json!("u-1");
        }
        json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": "u-1", "labels": labels,
                         "annotations": {"courier.dev/epoch": "2", "note": "n"}},
            "spec": spec,
        })
    })
}

proptest! {
    #[test]
    fn builds_what_the_copying_version_built(o in origin(), epoch in 0u64..3) {
        let fast = mirror_for(&o, "courier", epoch).map_err(|e| e.to_string());
        let slow = mirror_by_copies(&o, "courier", epoch).map_err(|e| e.to_string());
        prop_assert_eq!(fast, slow);
    }
}
