use super::*;
use crate::kinds::testutil::{fixture, invalid_status, step};

fn strategy(f: &Value) -> CustomResourceStrategy {
    let crd = step(f, "wait until Established")["response"]["body"].clone();
    CustomResourceStrategy::from_crd(&crd, "v1alpha1").expect("version served")
}

fn request(f: &Value, name: &str) -> Value {
    let body = serde_json::to_string(&step(f, name)["request"]["body"])
        .unwrap()
        .replace("${run}", "run");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn resource_info_matches_discovery() {
    let f = fixture("crd.json");
    let s = strategy(&f);
    let disco =
        &step(&f, "discovery /apis/courier.dev/v1alpha1")["response"]["body"]["resources"][0];
    assert_eq!(s.info().plural, disco["name"]);
    assert_eq!(s.info().singular, disco["singularName"]);
    assert_eq!(json!(s.info().namespaced), disco["namespaced"]);
    assert_eq!(json!(s.info().verbs), disco["verbs"]);
    assert_eq!(json!(s.info().short_names), disco["shortNames"]);
    assert_eq!(
        json!(s.info().storage_version_hash),
        disco["storageVersionHash"]
    );
    assert!(s.info().status_subresource);
}

#[test]
fn create_defaults_and_drops_status() {
    let f = fixture("crd.json");
    let s = strategy(&f);
    for name in [
        "create WorkerCluster",
        "create with status in body (status dropped?)",
    ] {
        let mut obj = request(&f, name);
        s.default(&mut obj);
        s.prepare_for_create(&mut obj);
        assert!(s.validate_create(&obj).is_empty(), "{name}");
        let want = &step(&f, name)["response"]["body"];
        assert_eq!(obj["spec"], want["spec"], "{name}");
        assert_eq!(obj.get("status"), want.get("status"), "{name}");
        assert_eq!(obj["metadata"]["generation"], 1);
    }
}

#[test]
fn schema_errors_match_recordings() {
    let f = fixture("crd.json");
    let s = strategy(&f);
    for name in [
        "missing required field",
        "missing required nested field",
        "wrong type",
    ] {
        let mut obj = request(&f, name);
        s.default(&mut obj);
        s.prepare_for_create(&mut obj);
        let errs = s.validate_create(&obj);
        let mut want = step(&f, name)["response"]["body"].clone();
        // The recording's names carry the normalised run id.
        let got =
            serde_json::to_string(&invalid_status("courier.dev", "WorkerCluster", &obj, &errs))
                .unwrap()
                .replace("-run", "-<run>");
        want = serde_json::from_str(&serde_json::to_string(&want).unwrap()).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&got).unwrap(), want, "{name}");
    }
}

#[test]
fn updates_bump_generation_on_spec_only_and_keep_status() {
    let f = fixture("crd.json");
    let s = strategy(&f);
    let before = step(&f, "merge-patch status")["response"]["body"].clone();
    // merge-patch status via the main resource: ignored.
    let mut new = before.clone();
    json_patch::merge(
        &mut new,
        &step(&f, "merge-patch status via main resource (ignored)")["request"]["body"],
    );
    s.prepare_for_update(&mut new, &before);
    assert_eq!(new, before);
    // merge-patch spec: generation 2.
    let mut new = before.clone();
    json_patch::merge(
        &mut new,
        &step(&f, "merge-patch spec (generation bump)")["request"]["body"],
    );
    s.default(&mut new);
    s.prepare_for_update(&mut new, &before);
    assert!(s.validate_update(&new, &before).is_empty());
    let want = &step(&f, "merge-patch spec (generation bump)")["response"]["body"];
    assert_eq!(
        new["metadata"]["generation"],
        want["metadata"]["generation"]
    );
    assert_eq!(new["spec"], want["spec"]);
    assert_eq!(new["status"], want["status"]);
    // The status subresource keeps everything else.
    let created = step(&f, "get WorkerCluster")["response"]["body"].clone();
    let mut st = created.clone();
    json_patch::merge(&mut st, &step(&f, "merge-patch status")["request"]["body"]);
    st["spec"]["labels"]["region"] = json!("changed");
    s.prepare_for_status_update(&mut st, &created);
    assert!(s.validate_status_update(&st, &created).is_empty());
    let want = &step(&f, "merge-patch status")["response"]["body"];
    assert_eq!(st["spec"], want["spec"]);
    assert_eq!(st["status"], want["status"]);
    assert_eq!(st["metadata"]["generation"], want["metadata"]["generation"]);
}

#[test]
fn kube_openapi_messages() {
    let schema = json!({"type": "object", "properties": {
        "s": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
        "e": {"type": "string", "enum": ["a", "b"]},
        "n": {"type": "integer", "minimum": 1, "maximum": 10},
        "f": {"type": "number", "exclusiveMinimum": true, "minimum": 0.5},
        "l": {"type": "array", "maxItems": 1, "items": {"type": "string", "minLength": 2}},
        "t": {"type": "string", "format": "date-time"},
        "i": {"x-kubernetes-int-or-string": true},
        "m": {"type": "object", "additionalProperties": {"type": "string"}}
    }});
    let data = json!({"s": "abcd", "e": "c", "n": 0, "f": 0.5, "l": ["x", "yy", "zz"], "t": "yesterday",
        "i": true, "m": {"k": 1}});
    let mut errs = Vec::new();
    validate_value(&data, &schema, "", None, &mut errs);
    let msgs: Vec<String> = errs.iter().map(FieldError::message).collect();
    assert_eq!(
        msgs,
        [
            "e: Unsupported value: \"c\": supported values: \"a\", \"b\"",
            "f: Invalid value: 0.5: f in body should be greater than 0.5",
            "i: Invalid value: \"boolean\": i in body must be of type integer,string: \"boolean\"",
            "l[0]: Invalid value: \"x\": l[0] in body should be at least 2 chars long",
            "l: Too many: 3: must have at most 1 item",
            "m.k: Invalid value: \"integer\": m.k in body must be of type string: \"integer\"",
            "n: Invalid value: 0: n in body should be greater than or equal to 1",
            "s: Too long: may not be more than 3 bytes",
            "t: Invalid value: \"yesterday\": t in body must be of type date-time: \"yesterday\"",
        ]
    );
    // Ratcheting: an unchanged invalid value is not reported again.
    let mut errs = Vec::new();
    validate_value(&data, &schema, "", Some(&data), &mut errs);
    assert!(errs.is_empty());
}

#[test]
fn crd_schema_checks() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"a": {"description": "no type"}, "b": {"type": "strin"},
            "c": {"type": "array"}, "d": {"type": "string", "default": 5}}},
        "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}
    }});
    let msgs: Vec<String> = validate_crd_schema(&schema, "spec.validation", true)
        .iter()
        .map(FieldError::message)
        .collect();
    assert_eq!(
        msgs,
        [
            "spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
            "spec.validation.openAPIV3Schema.properties[spec].properties[a].type: Required value: must not be empty for specified object fields",
            "spec.validation.openAPIV3Schema.properties[spec].properties[c].items: Required value: must be specified",
            "spec.validation.openAPIV3Schema.properties[spec].properties[b].type: Unsupported value: \"strin\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
        ]
    );
    let ok = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"d": {"type": "string", "default": 5}}}}});
    let msgs: Vec<String> = validate_crd_schema(&ok, "spec.validation", false)
        .iter()
        .map(FieldError::message)
        .collect();
    assert_eq!(
        msgs,
        [
            "spec.validation.openAPIV3Schema.properties[spec].properties[d].default: Invalid value: \"integer\":  in body must be of type string: \"integer\""
        ]
    );
}

#[test]
fn defaults_and_null_pruning() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "string", "default": "x"},
        "b": {"type": "string"},
        "c": {"type": "string", "nullable": true},
        "l": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "integer", "default": 1}}}}
    }});
    let mut v = json!({"b": null, "c": null, "l": [{}, {"k": 2}]});
    prune_non_nullable_nulls(&mut v, &schema);
    apply_defaults(&mut v, &schema);
    assert_eq!(v, json!({"a": "x", "c": null, "l": [{"k": 1}, {"k": 2}]}));
}

#[test]
fn selectable_fields() {
    let f = fixture("crd.json");
    let mut crd = step(&f, "wait until Established")["response"]["body"].clone();
    crd["spec"]["versions"][0]["selectableFields"] =
        json!([{"jsonPath": ".spec.kubeconfigSecretRef.name"}]);
    let s = CustomResourceStrategy::from_crd(&crd, "v1alpha1").unwrap();
    assert_eq!(
        s.convert_field_label("spec.kubeconfigSecretRef.name"),
        Ok("spec.kubeconfigSecretRef.name".into())
    );
    assert_eq!(
        s.convert_field_label("metadata.namespace"),
        Err("field label not supported: metadata.namespace".into())
    );
    let obj = step(&f, "get WorkerCluster")["response"]["body"].clone();
    assert_eq!(
        s.field_value(&obj, "spec.kubeconfigSecretRef.name")
            .as_deref(),
        Some("w1-kubeconfig")
    );
}
