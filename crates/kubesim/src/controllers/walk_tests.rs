//! The shortcuts of the write path, proven equal to the full work on every write a worker's
//! controllers and the floor's kind of client make to Jobs and Pods: the field manager's comparison
//! passes over what a write left equal (`typed::compare_changes`, used when the stored object has
//! managedFields); a status writer decodes only the status (`decoded_status`, `with_status`).

use serde_json::{Value, json};

use super::pods::{drop_finalizer, drop_owners};
use super::tests::{Gvr, JOBS, create, has, job, merge_patch, opts, served, wait_job, worker};
use super::{decoded, decoded_status, status_over, with_status};
use crate::api::{Api, Part, PatchKind};
use crate::structured::{Manager, full_walk};

const PODS: (&str, &str, &str) = ("", "v1", "pods");

#[tokio::test]
async fn every_write_of_a_worker_takes_the_shortcuts_to_the_same_result() {
    let c = worker(50.0);
    let api = &c.api;
    let spec = json!({"completions": 3, "parallelism": 2});
    let fast = json!({"sim/run-seconds": "0.2"});
    create(api, JOBS, "default", job("ok", spec, fast)).unwrap();
    let failing = json!({"sim/outcome": "fail:3", "sim/run-seconds": "0.2"});
    create(
        api,
        JOBS,
        "default",
        job("bad", json!({"backoffLimit": 1}), failing),
    )
    .unwrap();
    // The floor's writes: one metadata merge patch, one status merge patch.
    merge_patch(
        api,
        JOBS,
        "default",
        "ok",
        json!({"metadata": {"finalizers": ["courier.dev/x"], "labels": {"a": "b"},
            "annotations": {"courier.dev/epoch": "1"}}}),
    );
    let jobs = served(api, JOBS);
    let status = json!({"status": {"conditions": [{"type": "courier.dev/Dispatched",
        "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let raw = serde_json::to_vec(&status).unwrap();
    api.patch(
        &jobs,
        "default",
        "bad",
        PatchKind::Merge,
        &raw,
        Part::Status,
        &opts(),
    )
    .unwrap();
    wait_job(api, "ok", "Complete", |s| has(s, "Complete")).await;
    wait_job(api, "bad", "Failed", |s| has(s, "Failed")).await;
    let pairs = written_pairs(api);
    assert!(pairs.len() > 20, "{} writes", pairs.len());
    the_changes_walk_records_what_the_full_walk_records(api, &pairs);
    a_status_decoded_alone_is_the_status_of_the_whole_decoded(api, &pairs);
    every_written_status_decodes_to_itself(api, &pairs);
    a_pod_without_its_finalizer_or_owners_decodes_to_itself(api, &pairs);
    keeping_a_stored_part_already_there_stores_the_same_bytes(&pairs);
    for (_, _, next) in pairs.iter().filter(|(gvr, ..)| *gvr == JOBS) {
        // The controllers' views of every Job version of the run read the same as the whole Job.
        super::slim_tests::job_reads_alike(next);
        super::slim_tests::ttl_reads_alike(next);
    }
}

/// `keep_stored` leaves a part already equal to the stored one as it is instead of replacing it
/// by a copy: on every write of the run, in both directions, the result serialises byte for byte
/// as the copy does.
fn keeping_a_stored_part_already_there_stores_the_same_bytes(pairs: &[(Gvr, Value, Value)]) {
    let mut kept = 0;
    for (_, current, next) in pairs {
        for (new, old) in [(next, current), (current, next)] {
            for part in ["spec", "status", "metadata"] {
                let mut fast = new.clone();
                crate::kinds::common::keep_stored(&mut fast, old, part);
                let mut copied = new.clone();
                match (copied.as_object_mut(), old.get(part)) {
                    (Some(m), Some(p)) => {
                        m.insert(part.into(), p.clone());
                    }
                    (Some(m), None) => {
                        m.remove(part);
                    }
                    (None, _) => {}
                }
                assert_eq!(
                    serde_json::to_vec(&fast).unwrap(),
                    serde_json::to_vec(&copied).unwrap(),
                    "{part} of {}",
                    new["metadata"]["resourceVersion"]
                );
                kept += usize::from(new.get(part) == old.get(part));
            }
        }
    }
    assert!(kept > 40, "{kept} parts already stored");
}

/// `(resource, stored version before, stored version after)` of every update of Jobs and Pods.
fn written_pairs(api: &Api) -> Vec<(Gvr, Value, Value)> {
    let mut out = Vec::new();
    for gvr in [JOBS, PODS] {
        let s = served(api, gvr);
        let from = match api.store.watch(&s.table, Some(0)) {
            Ok(_) => 0,
            Err(oldest) => oldest,
        };
        for e in api.store.watch(&s.table, Some(from)).unwrap().backlog {
            if let Some(prev) = &e.prev {
                out.push((
                    gvr,
                    api.served_value(&s, prev),
                    api.served_value(&s, &e.obj),
                ));
            }
        }
    }
    out
}

fn the_changes_walk_records_what_the_full_walk_records(api: &Api, pairs: &[(Gvr, Value, Value)]) {
    let mut count = 0;
    let mut changed = 0;
    for (gvr, live, next) in pairs {
        let s = served(api, *gvr);
        let t = s.schema.clone().unwrap();
        let api_version = s.info().api_version();
        {
            for (name, sub) in [("kubelet", Some("status")), ("writer", None)] {
                let mgr = Manager {
                    name,
                    api_version: &api_version,
                    subresource: sub,
                    now: "2026-01-01T00:00:00Z",
                };
                // As the controllers write: the stored list carried over.
                let mut new = next.clone();
                new["metadata"]["managedFields"] = live["metadata"]["managedFields"].clone();
                let mut full = new.clone();
                crate::structured::update_managed_fields(&t, Some(live), &mut new, &mgr);
                let (whole, of_changes) = full_walk(&t, live, &mut full, &mgr);
                let at = format!(
                    "{} {} as {name}",
                    gvr.2, next["metadata"]["resourceVersion"]
                );
                assert_eq!(new, full, "{at}: managedFields");
                assert_eq!(whole, of_changes, "{at}: comparison");
                assert!(whole.is_some(), "{at}: the full walk failed");
                count += 1;
                changed += usize::from(whole.is_some_and(|c| !c.is_same()));
            }
        }
    }
    // Jobs: status writes, the patches; pods: status writes, finalizer removals.
    assert!(
        count > 40 && changed > 40,
        "{count} pairs, {changed} with changes"
    );
}

fn a_status_decoded_alone_is_the_status_of_the_whole_decoded(
    api: &Api,
    pairs: &[(Gvr, Value, Value)],
) {
    for (gvr, current, next) in pairs {
        let s = served(api, *gvr);
        let written = next["status"].clone();
        // Also as a writer might send it: zero counters, nulls, an unknown field, no status.
        let mut raw = written.clone();
        if let Value::Object(m) = &mut raw {
            m.insert("active".into(), json!(0));
            m.insert("startTime".into(), Value::Null);
            m.insert("bogus".into(), json!({"x": 1}));
        }
        for status in [written, raw, Value::Null, json!({})] {
            let mut whole = current.clone();
            whole["status"] = status.clone();
            let whole = decoded(&s, whole).unwrap();
            let alone = decoded_status(&s, status.clone()).unwrap();
            let at = format!(
                "{} {}: {status}",
                gvr.2, next["metadata"]["resourceVersion"]
            );
            assert_eq!(with_status(current.clone(), alone.as_ref()), whole, "{at}");
            // What the status writers send: the copy made without the old status is the same.
            assert_eq!(
                status_over(current, alone.as_ref()),
                whole,
                "{at}: status_over"
            );
        }
    }
}

/// The simulated controllers write their statuses undecoded (`debug_assert_decodes_to_itself`):
/// every status stored in the run, theirs written as built, is what decoding makes of it.
fn every_written_status_decodes_to_itself(api: &Api, pairs: &[(Gvr, Value, Value)]) {
    let mut checked = 0;
    for (gvr, _, next) in pairs {
        let s = served(api, *gvr);
        let Some(status) = next.get("status") else {
            continue;
        };
        let again = decoded_status(&s, status.clone()).unwrap();
        let at = format!("{} {}", gvr.2, next["metadata"]["resourceVersion"]);
        assert_eq!(again.as_ref(), Some(status), "{at}");
        checked += 1;
    }
    assert!(checked > 20, "{checked} statuses");
}

/// The Job controller's metadata edits of a pod (the tracking finalizer, the ownerReferences
/// taken out) are written without decoding the pod again: on every version of every pod of the
/// run, the edited served form is what decoding it makes of it.
fn a_pod_without_its_finalizer_or_owners_decodes_to_itself(
    api: &Api,
    pairs: &[(Gvr, Value, Value)],
) {
    let s = served(api, PODS);
    let mut edited = 0;
    for (_, current, _) in pairs.iter().filter(|(gvr, ..)| *gvr == PODS) {
        for (what, edit) in [
            (
                "finalizer",
                drop_finalizer as fn(&mut serde_json::Map<String, Value>) -> bool,
            ),
            ("owners", drop_owners),
        ] {
            let mut obj = current.clone();
            let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
                panic!("a pod without metadata: {current}");
            };
            if !edit(m) {
                continue;
            }
            let again = decoded(&s, obj.clone()).unwrap();
            let at = format!(
                "pod {} without its {what}",
                current["metadata"]["resourceVersion"]
            );
            assert_eq!(again, obj, "{at}");
            edited += 1;
        }
    }
    assert!(edited > 10, "{edited} pod versions edited");
}

/// A stored object without managedFields may hold what the schema does not fit (its write's
/// comparison failed, which dropped the list): a write over it walks all of it, as before, and
/// fails the same way.
#[test]
fn an_object_without_managed_fields_is_walked_whole() {
    let t = crate::schema::builtin("batch/v1", "Job").unwrap();
    // A container without its key (`name`): the walk fails on it even where nothing changed.
    let live = json!({"metadata": {"name": "j", "uid": "u"},
        "spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}, "status": {}});
    // A PUT carrying a managedFields list of its own, and a new label.
    let mut new = live.clone();
    new["metadata"]["labels"] = json!({"a": "b"});
    new["metadata"]["managedFields"] = json!([{"manager": "m", "operation": "Update",
        "apiVersion": "batch/v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]);
    let mgr = Manager {
        name: "writer",
        api_version: "batch/v1",
        subresource: None,
        now: "2026-01-01T00:00:00Z",
    };
    let mut full = new.clone();
    crate::structured::update_managed_fields(&t, Some(&live), &mut new, &mgr);
    let (whole, of_changes) = full_walk(&t, &live, &mut full, &mgr);
    assert!(whole.is_none(), "the full walk finds the missing key");
    assert!(of_changes.is_some(), "a walk of the changes alone does not");
    assert_eq!(new, full);
    assert!(new["metadata"].get("managedFields").is_none(), "{new}");
}
