//! The in-place set operations ([`FieldSet::remove_all`], [`FieldSet::remove_all_below`],
//! [`FieldSet::add_all`]) against the copying ones they stand in for on every write.

use proptest::prelude::*;
use serde_json::json;

use super::FieldSet;

const KEYS: [&str; 5] = ["f:a", "f:b", "k:{\"name\":\"x\"}", "v:1", "i:0"];

/// Sets built from up to eight paths over a small alphabet, so that the two sets share nodes, members
/// with children (`"."` markers) and leaves.
fn sets() -> impl Strategy<Value = FieldSet> {
    prop::collection::vec(prop::collection::vec(0..KEYS.len(), 1..4), 0..8).prop_map(|paths| {
        let mut s = FieldSet::new();
        for p in paths {
            let p: Vec<String> = p.into_iter().map(|i| KEYS[i].to_string()).collect();
            s.insert(&p);
        }
        s
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn remove_all_is_difference(a in sets(), b in sets()) {
        let mut d = a.clone();
        d.remove_all(&b);
        prop_assert_eq!(d, a.difference(&b));
    }

    #[test]
    fn remove_all_below_is_recursive_difference(a in sets(), b in sets()) {
        let mut d = a.clone();
        d.remove_all_below(&b);
        prop_assert_eq!(d, a.recursive_difference(&b));
    }

    #[test]
    fn add_all_is_union(a in sets(), b in sets()) {
        let mut u = a.clone();
        u.add_all(&b);
        prop_assert_eq!(&u, &b.union(&a));
        prop_assert_eq!(&u, &a.union(&b));
        // Either side may be the one added to (update_entries takes `added` when nothing was modified).
        let mut v = b.clone();
        v.add_all(&a);
        prop_assert_eq!(&v, &u);
    }
}

#[test]
fn in_place_operations_keep_member_markers() {
    // `f:spec` is a member with children: removing its child keeps it as a leaf member; removing it
    // keeps its children.
    let a = FieldSet::from_fields_v1(&json!({"f:spec": {".": {}, "f:x": {}}, "f:status": {}}));
    let mut d = a.clone();
    d.remove_all(&FieldSet::from_fields_v1(&json!({"f:spec": {"f:x": {}}})));
    assert_eq!(d.to_fields_v1(), json!({"f:spec": {}, "f:status": {}}));
    let mut d = a.clone();
    d.remove_all(&FieldSet::from_fields_v1(&json!({"f:spec": {}})));
    assert_eq!(
        d.to_fields_v1(),
        json!({"f:spec": {"f:x": {}}, "f:status": {}})
    );
    // A leaf member that gets children through a union becomes a member with children.
    let mut u = FieldSet::from_fields_v1(&json!({"f:status": {}}));
    u.add_all(&FieldSet::from_fields_v1(
        &json!({"f:status": {"f:ready": {}}}),
    ));
    assert_eq!(
        u.to_fields_v1(),
        json!({"f:status": {".": {}, "f:ready": {}}})
    );
}
