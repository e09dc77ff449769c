//! Helpers of the `decide` property test: reading labels, applying merge patches, and short names
//! of actions and decisions for its failure histories.

use std::collections::BTreeMap;

use courier_core::reconcile::{Action, Decision};
use serde_json::{Value, json};

pub fn labels_of(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// RFC 7386 merge-patch application.
pub fn apply_merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().expect("object");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    apply_merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

pub fn short(a: &Action) -> String {
    match a {
        Action::WriteIntent {
            cluster,
            epoch,
            redispatches,
            ..
        } => format!("WriteIntent({cluster},{epoch},{redispatches})"),
        Action::EnsureNamespace { cluster, .. } => format!("EnsureNamespace({cluster})"),
        Action::CreateMirror { cluster, epoch, .. } => format!("CreateMirror({cluster},{epoch})"),
        Action::PatchMirrorSpec { cluster, .. } => format!("PatchMirrorSpec({cluster})"),
        Action::DeleteMirror { cluster, uid, .. } => format!("DeleteMirror({cluster},{uid})"),
        Action::WriteOriginStatus { .. } => "WriteOriginStatus".into(),
        Action::RemoveFinalizer { .. } => "RemoveFinalizer".into(),
        Action::Event {
            reason, message, ..
        } => format!("Event({reason}: {message})"),
    }
}

pub fn summary(d: &Decision) -> Vec<String> {
    let mut out: Vec<String> = d
        .chains
        .iter()
        .map(|c| c.iter().map(short).collect::<Vec<_>>().join(" > "))
        .collect();
    if let Some(after) = d.requeue {
        out.push(format!("Requeue({}s)", after.as_secs()));
    }
    out
}
