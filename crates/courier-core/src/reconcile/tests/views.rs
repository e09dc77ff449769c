//! Reading Jobs into views, and the merge patches status writes send.

use super::*;
use crate::merge_patch::merge_patch;

#[test]
fn views_read_from_json() {
    let mut o = origin_json();
    o["metadata"]["deletionTimestamp"] = json!("2026-05-01T09:59:00Z");
    o["metadata"]["labels"]["weird"] = json!(5);
    let v = OriginView::from_json(&o).expect("view");
    assert_eq!(
        (v.namespace.as_str(), v.name.as_str(), v.uid.as_str()),
        ("ml", "train", "uid-1")
    );
    assert_eq!(v.deletion_timestamp, Some(ts("2026-05-01T09:59:00Z")));
    assert!(v.is_ours());
    assert!(!v.labels.contains_key("weird"));
    assert_eq!(v.spec.completions, Some(3));
    assert_eq!(v.generation, Some(1));
    assert_eq!(v.resource_version.as_deref(), Some("10"));
    assert_eq!(
        OriginView::from_json(&json!(1)),
        Err(ViewError::NotAnObject)
    );
    let mut o = origin_json();
    o["status"] = json!({"active": "many"});
    assert!(matches!(
        OriginView::from_json(&o),
        Err(ViewError::Malformed {
            field: "status",
            ..
        })
    ));
    let mut o = origin_json();
    o["metadata"]["deletionTimestamp"] = json!("yesterday");
    assert!(matches!(
        OriginView::from_json(&o),
        Err(ViewError::Malformed { .. })
    ));
    let m = MirrorView::from_json(&mirror_json(2, running())).expect("mirror");
    assert_eq!(m.uid, "mirror-uid-2");
    assert!(!m.deleting);
    assert_eq!(epoch_label(&m.labels), Some(2));
}

#[test]
fn merge_patch_diffs() {
    assert_eq!(merge_patch(&json!({"a": 1}), &json!({"a": 1})), None);
    assert_eq!(
        merge_patch(
            &json!({"a": 1, "b": {"c": 1, "d": 2}, "e": [1]}),
            &json!({"b": {"c": 1}, "e": [2], "f": 3})
        ),
        Some(json!({"a": null, "b": {"d": null}, "e": [2], "f": 3}))
    );
}
