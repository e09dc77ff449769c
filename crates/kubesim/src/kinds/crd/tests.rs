use super::*;
use crate::errors::FieldError;
use crate::kinds::testutil::{fixture, step};

fn created(f: &Value) -> Value {
    let s = CrdStrategy::new();
    let mut obj = step(f, "create CRD")["request"]["body"].clone();
    s.default(&mut obj);
    s.prepare_for_create(&mut obj);
    obj
}

fn without_meta(v: &Value) -> Value {
    let mut v = v.clone();
    v.as_object_mut().unwrap().remove("metadata");
    v
}

#[test]
fn create_response_shape() {
    let f = fixture("crd.json");
    let obj = created(&f);
    let errs = CrdStrategy::new().validate_create(&obj);
    assert!(errs.is_empty(), "{errs:?}");
    let want = &step(&f, "create CRD")["response"]["body"];
    assert_eq!(without_meta(&obj), without_meta(want));
    assert_eq!(obj["metadata"]["generation"], 1);
}

#[test]
fn controllers_establish_like_the_recording() {
    let f = fixture("crd.json");
    let obj = created(&f);
    let now = "<time>";
    let done = reconcile(&obj, std::slice::from_ref(&obj), now).expect("changes");
    let want = &step(&f, "wait until Established")["response"]["body"];
    assert_eq!(done["status"], want["status"]);
    assert!(reconcile(&done, std::slice::from_ref(&done), "later").is_none());
    assert_eq!(served_versions(&done).len(), 1);
    assert!(served_versions(&obj).is_empty());
}

#[test]
fn delete_adds_finalizer_and_terminating_condition() {
    let f = fixture("crd.json");
    let established = step(&f, "wait until Established")["response"]["body"].clone();
    let DeleteAction::Update(deleting) =
        CrdStrategy::new().on_delete(&established, &json!({}), "<time>")
    else {
        panic!("first delete updates");
    };
    let want = &step(&f, "delete CRD")["response"]["body"];
    assert_eq!(deleting["status"], want["status"]);
    assert_eq!(
        deleting["metadata"]["finalizers"],
        want["metadata"]["finalizers"]
    );
    let gone = finish_cleanup(&deleting, "t");
    assert!(gone["metadata"].get("finalizers").is_none());
    assert_eq!(
        gone["status"]["conditions"][2]["reason"],
        "InstanceDeletionCompleted"
    );
}

#[test]
fn name_conflicts_are_reported() {
    let f = fixture("crd.json");
    let established = step(&f, "wait until Established")["response"]["body"].clone();
    let mut other = created(&f);
    other["metadata"]["name"] = json!("others.courier.dev");
    other["spec"]["names"]["plural"] = json!("others");
    let status = accept_names(&other, &[established.clone(), other.clone()], "t");
    // Every check runs; the last conflict found names the condition.
    let c = &status["conditions"][0];
    assert_eq!(c["reason"], "ListKindConflict");
    assert_eq!(c["message"], "\"WorkerClusterList\" is already in use");
    assert_eq!(status["acceptedNames"]["plural"], "others");
    assert_eq!(status["conditions"][1]["reason"], "NotAccepted");
}

#[test]
fn spec_validation_messages() {
    let f = fixture("crd.json");
    let mut bad = created(&f);
    bad["spec"]["group"] = json!("courier");
    bad["spec"]["scope"] = json!("Global");
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["weight"] =
        json!({"minimum": 1});
    let msgs: Vec<String> = validate_crd(&bad).iter().map(FieldError::message).collect();
    assert_eq!(
        msgs,
        [
            "metadata.name: Invalid value: \"workerclusters.courier.dev\": must be spec.names.plural+\".\"+spec.group",
            "spec.group: Invalid value: \"courier\": should be a domain with at least one dot",
            "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
            "spec.validation.openAPIV3Schema.properties[spec].properties[weight].type: Required value: must not be empty for specified object fields",
        ]
    );
    let mut noschema = created(&f);
    noschema["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("schema");
    noschema["spec"]["versions"][0]["storage"] = json!(false);
    let msgs: Vec<String> = validate_crd(&noschema)
        .iter()
        .map(FieldError::message)
        .collect();
    assert_eq!(
        msgs[0],
        "spec.versions[0].schema.openAPIV3Schema: Required value"
    );
    assert!(msgs[1].ends_with("must have exactly one version marked as storage version"));
}

#[test]
fn update_rules() {
    let f = fixture("crd.json");
    let old = step(&f, "wait until Established")["response"]["body"].clone();
    let s = CrdStrategy::new();
    let mut new = old.clone();
    new["spec"]["names"]["kind"] = json!("Worker");
    new["spec"]["names"]["listKind"] = json!("WorkerList");
    new["status"] = json!({});
    s.prepare_for_update(&mut new, &old);
    assert_eq!(new["status"], old["status"]);
    assert_eq!(new["metadata"]["generation"], 2);
    let msgs: Vec<String> = s
        .validate_update(&new, &old)
        .iter()
        .map(FieldError::message)
        .collect();
    assert_eq!(
        msgs,
        ["spec.names.kind: Invalid value: \"Worker\": field is immutable"]
    );
    assert!(!s.allow_unconditional_update());
}
