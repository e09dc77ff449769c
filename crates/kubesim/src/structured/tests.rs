use serde_json::{Value, json};

use super::*;
use crate::schema::{self, builtin};

const T0: &str = "2025-06-01T10:00:00Z";
const T1: &str = "2025-06-01T11:00:00Z";

fn job_t() -> TypeRef {
    builtin("batch/v1", "Job").unwrap()
}

fn mgr<'a>(name: &'a str, sub: Option<&'a str>, now: &'a str) -> Manager<'a> {
    Manager {
        name,
        api_version: "batch/v1",
        subresource: sub,
        now,
    }
}

fn job(labels: Value) -> Value {
    let mut j = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"parallelism": 1, "template": {"metadata": {}, "spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "resources": {}}]}}},
        "status": {}
    });
    if !labels.is_null() {
        j["metadata"]["labels"] = labels;
    }
    j
}

fn entries(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn fields_of<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["manager"] == manager))
        .map(|e| &e["fieldsV1"])
        .unwrap_or(&Value::Null)
}

fn create(name: &str, obj: Value) -> Value {
    let mut o = obj;
    update_managed_fields(&job_t(), None, &mut o, &mgr(name, None, T0));
    o["metadata"]["uid"] = json!("u1");
    o
}

// ---- field sets ----------------------------------------------------------------------------------------

fn set(v: Value) -> FieldSet {
    FieldSet::from_fields_v1(&v)
}

fn p(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

#[test]
fn field_set_membership_follows_fields_v1() {
    let mut s = FieldSet::new();
    s.insert(&p(&["f:metadata", "f:labels"]));
    s.insert(&p(&["f:metadata", "f:labels", "f:a"]));
    s.insert(&p(&["f:spec", "f:x"]));
    assert_eq!(
        s.to_fields_v1(),
        json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:spec": {"f:x": {}}})
    );
    assert!(s.has(&p(&["f:metadata", "f:labels"])));
    assert!(!s.has(&p(&["f:metadata"])));
    assert!(!s.has(&[]));
    // Inserting under a leaf member keeps its membership.
    s.insert(&p(&["f:spec", "f:x", "f:y"]));
    assert_eq!(
        s.to_fields_v1()["f:spec"],
        json!({"f:x": {".": {}, "f:y": {}}})
    );
}

#[test]
fn field_set_algebra_matches_structured_merge_diff() {
    let a = set(json!({"f:labels": {".": {}, "f:a": {}, "f:b": {}}, "f:spec": {"f:x": {}}}));
    let b = set(json!({"f:labels": {"f:a": {}}, "f:spec": {}}));
    // `spec` is only a member in b: a's children of spec stay (parent - child = parent).
    assert_eq!(
        a.difference(&b).to_fields_v1(),
        json!({"f:labels": {".": {}, "f:b": {}}, "f:spec": {"f:x": {}}})
    );
    // A member of b removes the whole subtree with a recursive difference, only itself otherwise.
    let c = set(json!({"f:labels": {}}));
    assert_eq!(
        a.difference(&c).to_fields_v1()["f:labels"],
        json!({"f:a": {}, "f:b": {}})
    );
    assert_eq!(
        a.recursive_difference(&c).to_fields_v1(),
        json!({"f:spec": {"f:x": {}}})
    );
    assert_eq!(
        a.intersection(&b).to_fields_v1(),
        json!({"f:labels": {"f:a": {}}})
    );
    assert!(a.intersects(&b));
    assert!(!a.intersects(&set(json!({"f:status": {}}))));
    assert_eq!(
        b.union(&set(json!({"f:labels": {}}))).to_fields_v1(),
        json!({"f:labels": {".": {}, "f:a": {}}, "f:spec": {}})
    );
    assert!(set(json!({})).is_empty());
}

#[test]
fn field_set_paths_iterate_members_first_in_path_element_order() {
    let s = set(json!({"f:b": {}, "f:a": {"k:{\"n\":10}": {}, "k:{\"n\":9}": {}, "f:z": {}}}));
    let paths: Vec<String> = s.paths().iter().map(|p| value::path_string(p)).collect();
    assert_eq!(paths, vec![".b", ".a.z", ".a[n=9]", ".a[n=10]"]);
}

#[test]
fn named_struct_fields_become_members() {
    let t = job_t();
    let s = set(
        json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"m\"}": {"f:image": {}}}}}}}),
    );
    let e = s.ensure_named_fields_are_members(t.schema(), t.root());
    // labels is a struct field of ObjectMeta; `a` is a map key; container items are not named fields.
    assert_eq!(
        e.to_fields_v1(),
        json!({"f:metadata": {".": {}, "f:labels": {".": {}, "f:a": {}}},
               "f:spec": {".": {}, "f:template": {".": {}, "f:spec": {".": {}, "f:containers": {".": {},
                   "k:{\"name\":\"m\"}": {"f:image": {}}}}}}})
    );
}

#[test]
fn client_sent_keys_are_canonicalized() {
    let s = set(json!({"f:c": {"k:{\"protocol\":\"TCP\",  \"containerPort\":80}": {}}}));
    assert_eq!(
        s.canonicalize().to_fields_v1(),
        json!({"f:c": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {}}})
    );
}

// ---- update --------------------------------------------------------------------------------------------

#[test]
fn create_diffs_against_the_go_zero_value() {
    let o = create("alice", job(json!({"app": "a"})));
    let e = entries(&o);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0]["manager"], "alice");
    assert_eq!(e[0]["operation"], "Update");
    assert_eq!(e[0]["apiVersion"], "batch/v1");
    assert_eq!(e[0]["time"], T0);
    assert_eq!(
        e[0]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
               "f:spec": {"f:parallelism": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {
                   ".": {}, "f:image": {}, "f:name": {}, "f:resources": {}}}, "f:restartPolicy": {}}}}})
    );
    assert!(e[0].get("subresource").is_none());
}

#[test]
fn an_update_takes_changed_fields_from_other_managers() {
    let t = job_t();
    let live = create("alice", job(json!({"app": "a", "team": "x"})));
    let mut new = live.clone();
    new["metadata"]["labels"]["app"] = json!("b");
    new["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("team");
    new["metadata"]["annotations"] = json!({"n": "1"});
    update_managed_fields(&t, Some(&live), &mut new, &mgr("bob", None, T1));
    assert_eq!(
        fields_of(&new, "bob"),
        &json!({"f:metadata": {"f:annotations": {".": {}, "f:n": {}}, "f:labels": {"f:app": {}}}})
    );
    // alice lost `app` (taken) and `team` (removed).
    assert_eq!(
        fields_of(&new, "alice")["f:metadata"],
        json!({"f:labels": {}})
    );
    // The stored order: by operation, time, manager.
    let names: Vec<Value> = entries(&new).iter().map(|e| e["manager"].clone()).collect();
    assert_eq!(names, vec![json!("alice"), json!("bob")]);
}

#[test]
fn an_unchanged_update_keeps_time_and_entries() {
    let t = job_t();
    let live = create("alice", job(Value::Null));
    let mut new = live.clone();
    update_managed_fields(&t, Some(&live), &mut new, &mgr("alice", None, T1));
    assert_eq!(new, live);
}

#[test]
fn status_writes_own_only_status_and_ignore_sent_managed_fields() {
    let t = job_t();
    let live = create("alice", job(Value::Null));
    let mut new = live.clone();
    new["status"] = json!({"active": 1, "startTime": T0});
    new["spec"]["parallelism"] = json!(5);
    new["metadata"]["managedFields"] = json!([]);
    update_managed_fields(
        &t,
        Some(&live),
        &mut new,
        &mgr("courier", Some("status"), T1),
    );
    let e = entries(&new);
    let status = e.iter().find(|e| e["manager"] == "courier").unwrap();
    assert_eq!(status["subresource"], "status");
    assert_eq!(
        status["fieldsV1"],
        json!({"f:status": {"f:active": {}, "f:startTime": {}}})
    );
    assert!(e.iter().any(|e| e["manager"] == "alice"));
    // On the main resource, status changes are not owned.
    let mut new2 = live.clone();
    new2["status"] = json!({"active": 1});
    update_managed_fields(&t, Some(&live), &mut new2, &mgr("bob", None, T1));
    assert_eq!(entries(&new2).len(), 1);
}

#[test]
fn reset_managed_fields_stop_tracking_until_apply() {
    let t = job_t();
    let live = create("alice", job(Value::Null));
    for reset in [json!([]), json!([{}])] {
        let mut new = live.clone();
        new["metadata"]["managedFields"] = reset;
        update_managed_fields(&t, Some(&live), &mut new, &mgr("alice", None, T1));
        assert!(new["metadata"].get("managedFields").is_none());
        // skipNonApplied: the next update of an untracked object stays untracked.
        let mut next = new.clone();
        next["metadata"]["labels"] = json!({"x": "y"});
        update_managed_fields(&t, Some(&new), &mut next, &mgr("bob", None, T1));
        assert!(next["metadata"].get("managedFields").is_none());
    }
}

#[test]
fn a_put_may_replace_managed_fields_but_invalid_ones_fall_back_to_stored() {
    let t = job_t();
    let live = create("alice", job(Value::Null));
    let mut new = live.clone();
    new["metadata"]["managedFields"] = json!([{"manager": "carol", "operation": "Update", "apiVersion": "batch/v1",
        "time": "2025-06-01T10:00:00+02:00", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:parallelism": {}}}}]);
    update_managed_fields(&t, Some(&live), &mut new, &mgr("alice", None, T1));
    let e = entries(&new);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0]["manager"], "carol");
    assert_eq!(e[0]["time"], "2025-06-01T08:00:00Z");
    let mut bad = live.clone();
    bad["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Delete", "apiVersion": "v1", "fieldsType": "FieldsV1"}]);
    update_managed_fields(&t, Some(&live), &mut bad, &mgr("alice", None, T1));
    assert_eq!(entries(&bad), entries(&live));
}

#[test]
fn objects_outside_the_schema_lose_their_managed_fields() {
    let t = job_t();
    let live = create("alice", job(Value::Null));
    let mut new = live.clone();
    new["spec"]["notAField"] = json!(1);
    update_managed_fields(&t, Some(&live), &mut new, &mgr("alice", None, T1));
    assert!(new["metadata"].get("managedFields").is_none());
}

#[test]
fn update_entries_are_capped_into_ancient_changes() {
    let t = job_t();
    let mut obj = create("m0", job(json!({"l0": "v"})));
    for i in 1..=11 {
        let live = obj.clone();
        obj["metadata"]["labels"][format!("l{i}")] = json!("v");
        let name = format!("m{i}");
        let now = format!("2025-06-01T10:{i:02}:00Z");
        update_managed_fields(&t, Some(&live), &mut obj, &mgr(&name, None, &now));
    }
    let e = entries(&obj);
    assert_eq!(e.len(), 10);
    let ancient = e
        .iter()
        .find(|e| e["manager"] == "ancient-changes")
        .unwrap();
    assert_eq!(
        ancient["fieldsV1"]["f:metadata"]["f:labels"]["f:l2"],
        json!({})
    );
    assert!(
        e.iter()
            .all(|e| e["manager"] != "m0" && e["manager"] != "m1" && e["manager"] != "m2")
    );
}

#[test]
fn manager_names_come_from_the_user_agent() {
    assert_eq!(manager_name(Some("fm"), Some("kubectl/v1.36")), "fm");
    assert_eq!(manager_name(None, Some("apifixtures/v1")), "apifixtures");
    assert_eq!(
        manager_name(Some(""), Some("kube-controller-manager/v1.36 (linux)")),
        "kube-controller-manager"
    );
    assert_eq!(manager_name(None, None), "");
    let long = "x".repeat(200);
    assert_eq!(
        manager_name(None, Some(&long)).len(),
        FIELD_MANAGER_MAX_LENGTH
    );
    let err = validate_patch_options(true, None, false).unwrap_err();
    assert_eq!(
        err.message,
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let err = validate_patch_options(false, None, true).unwrap_err();
    assert_eq!(
        err.message,
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );
    assert!(validate_patch_options(true, Some("ok"), true).is_ok());
}

// ---- apply ---------------------------------------------------------------------------------------------

fn applied(spec: Value, labels: Value) -> Value {
    let mut a = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}});
    if !spec.is_null() {
        a["spec"] = spec;
    }
    if !labels.is_null() {
        a["metadata"]["labels"] = labels;
    }
    a
}

#[test]
fn apply_creates_owns_only_what_it_applies() {
    let t = job_t();
    let cfg = applied(json!({"parallelism": 2}), json!({"a": "1"}));
    let r = apply(&t, None, &cfg, &mgr("fm1", None, T0), false).unwrap();
    assert!(r.changed);
    assert_eq!(r.object["spec"]["parallelism"], 2);
    let e = entries(&r.object);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0]["operation"], "Apply");
    assert_eq!(e[0]["time"], T0);
    assert_eq!(
        e[0]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:parallelism": {}}})
    );
}

#[test]
fn apply_conflicts_name_every_manager_and_force_takes_over() {
    let t = job_t();
    let live = apply(
        &t,
        None,
        &applied(json!({"parallelism": 2}), json!({"a": "1", "b": "1"})),
        &mgr("fm1", None, T0),
        false,
    )
    .unwrap()
    .object;
    let mut live2 = live.clone();
    live2["metadata"]["labels"]["c"] = json!("1");
    update_managed_fields(&t, Some(&live), &mut live2, &mgr("editor", None, T0));
    let cfg = applied(json!({"parallelism": 3}), json!({"a": "2", "c": "2"}));
    let err = apply(&t, Some(&live2), &cfg, &mgr("fm2", None, T1), false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 3 conflicts: conflicts with \"editor\" using batch/v1:\n- .metadata.labels.c\nconflicts with \"fm1\":\n- .metadata.labels.a\n- .spec.parallelism"
    );
    let status = err.to_api_error().to_status();
    assert_eq!(status["code"], 409);
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["details"]["causes"][0],
        json!({"reason": "FieldManagerConflict", "message": "conflict with \"editor\" using batch/v1", "field": ".metadata.labels.c"})
    );
    let forced = apply(&t, Some(&live2), &cfg, &mgr("fm2", None, T1), true)
        .unwrap()
        .object;
    assert_eq!(
        forced["metadata"]["labels"],
        json!({"a": "2", "b": "1", "c": "2"})
    );
    assert_eq!(
        fields_of(&forced, "fm1"),
        &json!({"f:metadata": {"f:labels": {"f:b": {}}}})
    );
    assert!(fields_of(&forced, "editor").is_null());
}

#[test]
fn applying_the_same_value_shares_ownership_without_conflict() {
    let t = job_t();
    let live = apply(
        &t,
        None,
        &applied(Value::Null, json!({"a": "1"})),
        &mgr("fm1", None, T0),
        false,
    )
    .unwrap()
    .object;
    let r = apply(
        &t,
        Some(&live),
        &applied(Value::Null, json!({"a": "1"})),
        &mgr("fm2", None, T1),
        false,
    )
    .unwrap();
    assert!(!r.changed);
    // An unchanged object: the new entry has no time.
    let fm2 = entries(&r.object)
        .into_iter()
        .find(|e| e["manager"] == "fm2")
        .unwrap();
    assert!(fm2.get("time").is_none());
    // fm1 stops applying `a`: fm2 still owns it, so it stays.
    let r2 = apply(
        &t,
        Some(&r.object),
        &applied(Value::Null, Value::Null),
        &mgr("fm1", None, T1),
        false,
    )
    .unwrap();
    assert_eq!(r2.object["metadata"]["labels"], json!({"a": "1"}));
}

#[test]
fn fields_an_applier_stops_applying_are_removed() {
    let t = job_t();
    let spec = json!({"parallelism": 2, "template": {"spec": {"containers": [
        {"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}});
    let live = apply(
        &t,
        None,
        &applied(spec, json!({"keep": "1", "drop": "1"})),
        &mgr("fm1", None, T0),
        false,
    )
    .unwrap()
    .object;
    let spec2 = json!({"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}});
    let r = apply(
        &t,
        Some(&live),
        &applied(spec2, json!({"keep": "1"})),
        &mgr("fm1", None, T1),
        false,
    )
    .unwrap();
    assert!(r.changed);
    assert_eq!(r.object["metadata"]["labels"], json!({"keep": "1"}));
    assert!(r.object["spec"].get("parallelism").is_none());
    assert_eq!(
        r.object["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "image": "x"}])
    );
}

#[test]
fn first_apply_to_an_untracked_object_records_before_first_apply() {
    let t = job_t();
    let mut live = job(json!({"a": "1"}));
    live["metadata"]["uid"] = json!("u");
    let r = apply(
        &t,
        Some(&live),
        &applied(Value::Null, json!({"b": "1"})),
        &mgr("fm1", None, T1),
        false,
    )
    .unwrap();
    let before = fields_of(&r.object, "before-first-apply");
    assert_eq!(
        before["f:metadata"]["f:labels"],
        json!({".": {}, "f:a": {}})
    );
    assert_eq!(r.object["metadata"]["labels"], json!({"a": "1", "b": "1"}));
}

#[test]
fn apply_refuses_wrong_types_managed_fields_and_unknown_fields() {
    let t = job_t();
    let m = mgr("fm", None, T0);
    let err = apply(&t, None, &json!({"metadata": {"name": "j"}}), &m, false).unwrap_err();
    assert_eq!(
        err.to_api_error().to_status()["message"],
        "invalid object type: /, Kind="
    );
    let err = apply(
        &t,
        None,
        &json!({"apiVersion": "v1", "kind": "Secret"}),
        &m,
        false,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "invalid object type: /v1, Kind=Secret");
    let mut cfg = applied(Value::Null, Value::Null);
    cfg["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        apply(&t, None, &cfg, &m, false).unwrap_err(),
        ApplyError::ManagedFieldsNotNil
    );
    let mut cfg = applied(json!({"bogus": 1}), Value::Null);
    cfg["metadata"]["namespace"] = json!("ns");
    let err = apply(&t, None, &cfg, &m, false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to create typed patch object (ns/j; batch/v1, Kind=Job): .spec.bogus: field not declared in schema"
    );
    assert_eq!(err.to_api_error().code, 500);
    let dup = applied(
        json!({"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}}),
        Value::Null,
    );
    let err = apply(&t, None, &dup, &m, false).unwrap_err();
    assert!(
        err.to_string()
            .ends_with(".spec.template.spec.containers: duplicate entries for key [name=\"a\"]"),
        "{err}"
    );
}

#[test]
fn apply_bodies_are_yaml_or_json() {
    let y =
        parse_apply_body(b"apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  a: eA==\n")
            .unwrap();
    assert_eq!(
        y,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"a": "eA=="}})
    );
    let j = parse_apply_body(br#"{"kind":"Secret"}"#).unwrap();
    assert_eq!(j, json!({"kind": "Secret"}));
    assert!(matches!(
        parse_apply_body(b"a: [1"),
        Err(ApplyError::BadYaml(_))
    ));
}

#[test]
fn patched_names_must_match_the_url() {
    let o = json!({"metadata": {"name": "other", "namespace": "x"}});
    assert_eq!(
        check_patched_name(&o, "applied", None).unwrap_err().message,
        "the name of the object (other) does not match the name on the URL (applied)"
    );
    assert_eq!(
        check_patched_name(&o, "other", Some("y"))
            .unwrap_err()
            .message,
        "the namespace of the object (x) does not match the namespace on the URL (y)"
    );
    assert!(check_patched_name(&o, "other", Some("x")).is_ok());
}

// ---- strategic merge patch -----------------------------------------------------------------------------

fn pod_job() -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": {"a": "1", "b": "2"},
        "finalizers": ["x", "y"]},
        "spec": {"template": {"spec": {
            "containers": [{"name": "a", "image": "ia", "env": [{"name": "E1", "value": "1"}]}, {"name": "b", "image": "ib"}],
            "tolerations": [{"key": "k1"}, {"key": "k2"}],
            "volumes": [{"name": "v", "emptyDir": {}}]}}}})
}

fn smp(patch: Value) -> Result<Value, PatchError> {
    strategic_merge(&job_t(), &pod_job(), &patch)
}

#[test]
fn smp_merges_maps_and_lists_by_key() {
    let out = smp(json!({"metadata": {"labels": {"a": null, "c": "3"}, "finalizers": ["z", "x"]},
        "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "ib2"}, {"name": "c", "image": "ic"}],
            "tolerations": [{"key": "k3"}]}}}}))
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"b": "2", "c": "3"}));
    // Primitive merge lists are unioned; patch order first, server-only items where they were.
    assert_eq!(out["metadata"]["finalizers"], json!(["z", "x", "y"]));
    let containers = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        containers,
        &json!([{"name": "a", "image": "ia", "env": [{"name": "E1", "value": "1"}]}, {"name": "b", "image": "ib2"}, {"name": "c", "image": "ic"}])
    );
    // tolerations have no patch strategy: replaced.
    assert_eq!(
        out["spec"]["template"]["spec"]["tolerations"],
        json!([{"key": "k3"}])
    );
}

#[test]
fn smp_directives() {
    let del = smp(json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}}})).unwrap();
    assert_eq!(
        del["spec"]["template"]["spec"]["containers"],
        json!([{"name": "b", "image": "ib"}])
    );
    let rep = smp(json!({"spec": {"template": {"spec": {"containers": [{"name": "z", "image": "iz"}, {"$patch": "replace"}]}}}})).unwrap();
    assert_eq!(
        rep["spec"]["template"]["spec"]["containers"],
        json!([{"name": "z", "image": "iz"}])
    );
    let map_replace =
        smp(json!({"metadata": {"labels": {"$patch": "replace", "only": "1"}}})).unwrap();
    assert_eq!(map_replace["metadata"]["labels"], json!({"only": "1"}));
    let map_delete = smp(json!({"metadata": {"labels": {"$patch": "delete"}}})).unwrap();
    assert_eq!(map_delete["metadata"]["labels"], json!({}));
    let dfpl = smp(json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}})).unwrap();
    assert_eq!(dfpl["metadata"]["finalizers"], json!(["y"]));
    // A deletion list for a missing list is a no-op.
    let none = smp(json!({"spec": {"$deleteFromPrimitiveList/nothing": ["x"]}})).unwrap();
    assert!(none["spec"].get("nothing").is_none());
    let order = smp(json!({"metadata": {"$setElementOrder/finalizers": ["y", "x"]}})).unwrap();
    assert_eq!(order["metadata"]["finalizers"], json!(["y", "x"]));
    let corder = smp(json!({"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
        "containers": [{"name": "a", "image": "new"}]}}}}))
    .unwrap();
    assert_eq!(
        corder["spec"]["template"]["spec"]["containers"],
        json!([{"name": "b", "image": "ib"}, {"name": "a", "image": "new", "env": [{"name": "E1", "value": "1"}]}])
    );
    // retainKeys: a volume switched to another source drops the old one.
    let rk = smp(json!({"spec": {"template": {"spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "secret"], "secret": {"secretName": "s"}}]}}}})).unwrap();
    assert_eq!(
        rk["spec"]["template"]["spec"]["volumes"],
        json!([{"name": "v", "secret": {"secretName": "s"}}])
    );
    // Added values lose directives and nulls.
    let added = smp(json!({"metadata": {"annotations": {"x": "1", "y": null}}})).unwrap();
    assert_eq!(added["metadata"]["annotations"], json!({"x": "1"}));
}

#[test]
fn smp_errors_are_classified_like_the_server() {
    let missing_key =
        smp(json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}})).unwrap_err();
    assert_eq!(
        missing_key,
        PatchError::Internal("map: map[image:x] does not contain declared merge key: name".into())
    );
    assert_eq!(missing_key.to_api_error().code, 500);
    let rk = smp(json!({"spec": {"template": {"spec": {"volumes": [{"name": "v", "$retainKeys": ["name"], "secret": {}}]}}}})).unwrap_err();
    assert_eq!(rk.to_api_error().code, 400);
    assert_eq!(rk.to_string(), "invalid patch format of retainKeys");
    let bad_dfpl = smp(json!({"metadata": {"$deleteFromPrimitiveList": ["x"]}})).unwrap_err();
    assert_eq!(
        bad_dfpl.to_string(),
        "invalid patch format of primitive list"
    );
    let lol = strategic_merge(
        &job_t(),
        &json!({"metadata": {"finalizers": [["a"]]}}),
        &json!({"metadata": {"finalizers": [["b"]]}}),
    )
    .unwrap_err();
    assert_eq!(lol.to_api_error().to_status()["code"], 422);
    let bad_type = smp(json!({"metadata": {"labels": {"$patch": "merge-please"}}})).unwrap_err();
    assert!(
        bad_type
            .to_string()
            .starts_with("unknown patch type: merge-please in map: ")
    );
    assert_eq!(smp(json!([1])).unwrap_err().to_api_error().code, 400);
}

#[test]
fn custom_resources_refuse_strategic_merge_patch() {
    let cr = schema::from_crd(
        &json!({"type": "object"}),
        "courier.dev/v1alpha1",
        "WorkerCluster",
        true,
        false,
    )
    .unwrap();
    let err = strategic_merge(&cr, &json!({}), &json!({})).unwrap_err();
    let s = err.to_api_error().to_status();
    assert_eq!(s["code"], 415);
    assert_eq!(s["reason"], "UnsupportedMediaType");
}

#[test]
fn apply_on_custom_resources_uses_the_crd_schema() {
    let cr = schema::from_crd(
        &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}},
            "tags": {"type": "array", "items": {"type": "string"}}}}}}),
        "courier.dev/v1alpha1",
        "WorkerCluster",
        true,
        false,
    )
    .unwrap();
    let m = Manager {
        name: "courier",
        api_version: "courier.dev/v1alpha1",
        subresource: None,
        now: T0,
    };
    let cfg = json!({"apiVersion": "courier.dev/v1alpha1", "kind": "WorkerCluster", "metadata": {"name": "w"},
        "spec": {"items": [{"name": "a", "v": 1}], "tags": ["x"]}});
    let r = apply(&cr, None, &cfg, &m, false).unwrap();
    assert_eq!(
        fields_of(&r.object, "courier"),
        &json!({"f:spec": {"f:items": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:v": {}}}, "f:tags": {}}})
    );
}

/// core/v1 Event -> events.k8s.io/v1 Event, for the fields the test uses.
struct EventsConverter;

impl VersionConverter for EventsConverter {
    fn convert(&self, obj: &Value, api_version: &str) -> Option<(TypeRef, Value)> {
        if api_version != "events.k8s.io/v1" {
            return None;
        }
        let t = builtin("events.k8s.io/v1", "Event")?;
        let mut out = json!({"apiVersion": api_version, "kind": "Event", "metadata": obj["metadata"].clone(),
            "reason": obj["reason"].clone(), "note": obj["message"].clone()});
        schema::normalize(t.schema(), t.root(), &mut out);
        Some((t, out))
    }
}

#[test]
fn entries_of_other_versions_are_compared_in_their_version() {
    let t = builtin("v1", "Event").unwrap();
    let mut live = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "uid": "u"},
        "reason": "R", "message": "old", "involvedObject": {}, "source": {}, "firstTimestamp": null,
        "lastTimestamp": null, "eventTime": null, "reportingComponent": "", "reportingInstance": ""});
    live["metadata"]["managedFields"] = json!([{"manager": "recorder", "operation": "Update",
        "apiVersion": "events.k8s.io/v1", "time": T0, "fieldsType": "FieldsV1",
        "fieldsV1": {"f:note": {}, "f:reason": {}}}]);
    let mut new = live.clone();
    new["message"] = json!("new");
    let m = Manager {
        name: "kubectl",
        api_version: "v1",
        subresource: None,
        now: T1,
    };
    let mut without = new.clone();
    update_managed_fields(&t, Some(&live), &mut without, &m);
    assert_eq!(
        fields_of(&without, "recorder"),
        &json!({"f:note": {}, "f:reason": {}})
    );
    update_managed_fields_with(&t, Some(&live), &mut new, &m, Some(&EventsConverter));
    assert_eq!(fields_of(&new, "recorder"), &json!({"f:reason": {}}));
    assert_eq!(fields_of(&new, "kubectl"), &json!({"f:message": {}}));
}
