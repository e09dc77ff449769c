//! Single recorded steps replayed outside the scenario driver: finalizers while terminating, an
//! immutable template patch, the namespace name rule, the Job table and field selector, and SSA.

use super::*;

#[test]
fn delete_finalizer_scenario() {
    let fx = load("apiserver", "delete_finalizer.json");
    let steps = fx["steps"].as_array().unwrap();
    let find = |n: &str| steps.iter().find(|s| s["name"] == n).unwrap();
    let s = find("create job with finalizer");
    let created = create(&denorm(&s["request"]["body"]), None, &uuid(1));
    check(s, &created, "<gen:1>");
    // The DELETE itself is generic; continue from the object as the server then served it.
    let mut stored = denorm(&find("GET while finalizer pending")["response"]["body"]);
    for n in [
        "merge-patch labels while terminating (allowed)",
        "add a new finalizer while terminating",
        "clear deletionTimestamp (ignored?)",
        "remove finalizers",
    ] {
        let step = find(n);
        let outcome = update(merge(&stored, &denorm(&step["request"]["body"])), &stored);
        check(step, &outcome, "<gen:1>");
        if let Ok(o) = outcome {
            stored = o;
        }
    }
    let s = find("create job with invalid finalizer name");
    check(
        s,
        &create(&denorm(&s["request"]["body"]), None, &uuid(99)),
        "<gen:1>",
    );
}

#[test]
fn patch_job_immutable_template() {
    let fx = load("apiserver", "patch_job.json");
    let steps = fx["steps"].as_array().unwrap();
    let find = |n: &str| steps.iter().find(|s| s["name"] == n).unwrap();
    let s = find("create job");
    let created = create(&denorm(&s["request"]["body"]), None, &uuid(1));
    check(s, &created, "<gen:1>");
    let stored = created.unwrap();
    let s = find("merge: immutable field (template image)");
    check(
        s,
        &update(merge(&stored, &denorm(&s["request"]["body"])), &stored),
        "<gen:1>",
    );
}

#[test]
fn namespace_name_rule() {
    let fx = load("apiserver", "namespaces.json");
    let s = fx["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "create namespace with invalid name")
        .unwrap();
    let errs = crate::validation::validate_object_meta_create(
        &s["request"]["body"]["metadata"],
        false,
        NameRule::DnsLabel,
    );
    let e = ApiError::invalid("", "Namespace", "Bad_Name", &errs);
    assert_eq!(e.to_status(), s["response"]["body"]);
}

#[test]
fn list_table_and_field_selector() {
    let fx = load("apiserver", "list_selectors.json");
    let steps = fx["steps"].as_array().unwrap();
    let find = |n: &str| steps.iter().find(|s| s["name"] == n).unwrap();
    let table = &find("Table output (kubectl get)")["response"]["body"];
    let cols: Vec<Value> = table::JOB_TABLE
        .columns
        .iter()
        .map(|(n, t, f, d, p)| json!({"name": n, "type": t, "format": f, "description": d, "priority": p}))
        .collect();
    assert_eq!(Value::Array(cols), table["columnDefinitions"]);
    let all = &find("list all")["response"]["body"]["items"];
    let s = strat();
    for row in table["rows"].as_array().unwrap() {
        let name = row["cells"][0].as_str().unwrap();
        let job = all
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["metadata"]["name"] == name)
            .unwrap();
        let mut cells = (table::JOB_TABLE.cells)(&denorm(job));
        cells[4] = json!("<age>");
        assert_eq!(
            Value::Array(norm(&Value::Array(cells), "").as_array().unwrap().clone()),
            row["cells"]
        );
    }
    let zero = &find("fieldSelector status.successful=0")["response"]["body"]["items"];
    for j in zero.as_array().unwrap() {
        assert_eq!(s.field_value(j, "status.successful").as_deref(), Some("0"));
    }
    assert_eq!(
        find("fieldSelector unsupported field")["response"]["code"],
        400
    );
    assert_eq!(s.field_value(&json!({}), "spec.parallelism"), None);
}

/// Server-side apply is generic; what it produces for an invalid spec is validated like any update,
/// so the spec error is reported twice (`ValidateJob` and `ValidateJobSpecUpdate`).
#[test]
fn server_side_apply_invalid_update() {
    let fx = load("apiserver", "server_side_apply.json");
    let step = fx["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "apply invalid (negative parallelism)")
        .unwrap();
    let body = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "applied", "labels": {"owner": "fm2"}},
        "spec": {"parallelism": 2, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "registry.k8s.io/busybox:1.36"}]}}}});
    let stored = create(&body, None, &uuid(1)).unwrap();
    let applied = merge(&stored, &json!({"spec": {"parallelism": -2}}));
    check(step, &update(applied, &stored), "<gen:1>");
}
