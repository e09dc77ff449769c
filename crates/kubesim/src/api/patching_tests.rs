//! Decoding a merge patch's result over the object it patched equals decoding all of it.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::store::Retention;

const NS: &str = "default";

fn api() -> Api {
    let api = Api::new(
        Arc::new(Store::new(Retention::default())),
        Registry::with_builtins(),
    );
    let nss = api.registry.get("", "v1", "namespaces").unwrap();
    api.create(&nss, "", json!({"metadata": {"name": NS}}), &opts())
        .unwrap();
    api
}

fn opts() -> WriteOpts {
    WriteOpts {
        manager: "test".into(),
        ..WriteOpts::default()
    }
}

/// Stored objects of a few kinds, created as a client would (decoded first).
fn objects() -> Vec<((&'static str, &'static str, &'static str), Value)> {
    vec![
        (
            ("batch", "v1", "jobs"),
            json!({"metadata": {"name": "j", "labels": {"app": "a"}},
                "spec": {"template": {"metadata": {"labels": {"app": "a"}}, "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox",
                        "resources": {"requests": {"cpu": "1000m", "memory": "1Gi"}}}]}}}}),
        ),
        (
            ("batch", "v1", "jobs"),
            json!({"metadata": {"name": "m"},
                "spec": {"manualSelector": true, "selector": {"matchLabels": {"k": "v"}},
                    "template": {"metadata": {"labels": {"k": "v"}}, "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}]}}}}),
        ),
        (
            ("", "v1", "pods"),
            json!({"metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        ),
        (
            ("", "v1", "configmaps"),
            json!({"metadata": {"name": "c"}, "data": {"k": "v"}}),
        ),
        (
            ("", "v1", "secrets"),
            json!({"metadata": {"name": "s"}, "data": {"k": "dg=="}}),
        ),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(json!(0)),
        Just(json!(2)),
        Just(json!("")),
        Just(json!("v")),
        Just(json!("2000m")),
        Just(json!(true)),
        Just(json!(false)),
        Just(json!({})),
        Just(json!([])),
        Just(json!({"cpu": "0.5"})),
        Just(json!([{"type": "Complete", "status": "True"}])),
    ]
}

/// Paths a patch may set (declared or not, top-level members and deeper).
fn path() -> impl Strategy<Value = Vec<&'static str>> {
    prop::sample::select(vec![
        vec!["metadata"],
        vec!["metadata", "labels"],
        vec!["metadata", "labels", "app"],
        vec!["metadata", "annotations", "x"],
        vec!["metadata", "finalizers"],
        vec!["metadata", "unknown"],
        vec!["spec"],
        vec!["spec", "parallelism"],
        vec!["spec", "suspend"],
        vec!["spec", "unknown"],
        vec!["spec", "template", "metadata", "labels"],
        vec!["spec", "template", "metadata", "labels", "app"],
        vec!["spec", "template", "spec", "activeDeadlineSeconds"],
        vec!["status"],
        vec!["status", "active"],
        vec!["status", "ready"],
        vec!["status", "phase"],
        vec!["status", "conditions"],
        vec!["status", "unknown"],
        vec!["data"],
        vec!["data", "k"],
        vec!["kind"],
        vec!["unknown"],
    ])
}

fn patch() -> impl Strategy<Value = Value> {
    prop::collection::vec((path(), leaf()), 1..4).prop_map(|edits| {
        let mut p = json!({});
        for (path, v) in edits {
            let (last, init) = path.split_last().unwrap();
            let mut cur = &mut p;
            for k in init {
                if !cur[*k].is_object() {
                    cur[*k] = json!({});
                }
                cur = &mut cur[*k];
            }
            cur[*last] = v;
        }
        p
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Over stored objects that earlier patches (main and status) wrote, decoding each patch's
    /// result passing over the members it left gives what decoding all of it gives, warnings,
    /// pruned paths and errors included.
    #[test]
    fn decoding_over_the_unpatched_members_equals_decoding_all(
        which in 0..5usize,
        patches in prop::collection::vec((patch(), any::<bool>()), 1..6),
    ) {
        let api = api();
        let (gvr, obj) = objects().swap_remove(which);
        let s = api.registry.get(gvr.0, gvr.1, gvr.2).unwrap();
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        api.create(&s, NS, s.decode_object(obj, &mut Vec::new()).unwrap().0, &opts()).unwrap();
        for (p, status) in &patches {
            let current = api.served_value(&s, &api.get(&s, NS, &name).unwrap());
            let mut doc = current.clone();
            patch::merge_patch(&mut doc, p);
            let (mut w1, mut w2) = (Vec::new(), Vec::new());
            let over = s.decode_merge_patched(doc.clone(), &current, p, &mut w1);
            let full = s.decode_object(doc, &mut w2);
            match (&over, &full) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
                (Err(a), Err(b)) => prop_assert_eq!(&a.message, &b.message),
                _ => prop_assert!(false, "{:?} vs {:?}", over, full),
            }
            prop_assert_eq!(w1, w2);
            // Write it, so that the next patch starts from what this one stored.
            let part = if *status { Part::Status } else { Part::Main };
            let raw = serde_json::to_vec(p).unwrap();
            let _ = api.patch(&s, NS, &name, PatchKind::Merge, &raw, part, &opts());
        }
    }
}
