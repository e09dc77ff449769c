use serde_json::json;

use super::*;

fn job() -> TypeRef {
    builtin("batch/v1", "Job").expect("Job schema")
}

#[test]
fn every_served_builtin_kind_has_a_schema() {
    for (gv, kind) in [
        ("batch/v1", "Job"),
        ("v1", "Secret"),
        ("v1", "ConfigMap"),
        ("v1", "Namespace"),
        ("v1", "Event"),
        ("events.k8s.io/v1", "Event"),
        ("coordination.k8s.io/v1", "Lease"),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
        ("v1", "Status"),
    ] {
        let t = builtin(gv, kind).unwrap_or_else(|| panic!("{gv} {kind}"));
        assert_eq!(t.api_version(), gv);
        assert_eq!(t.kind(), kind);
        assert!(!t.is_custom());
    }
    assert!(builtin("batch/v1", "CronJob").is_none());
}

#[test]
fn go_zero_values_have_the_non_omitempty_fields() {
    assert_eq!(
        job().zero_value(),
        &json!({"metadata": {}, "spec": {"template": {"metadata": {}, "spec": {"containers": null}}}, "status": {}})
    );
    assert_eq!(
        builtin("v1", "Event").unwrap().zero_value(),
        &json!({"metadata": {}, "involvedObject": {}, "source": {}, "firstTimestamp": null,
                "lastTimestamp": null, "eventTime": null, "reportingComponent": "", "reportingInstance": ""})
    );
    assert_eq!(
        builtin("apiextensions.k8s.io/v1", "CustomResourceDefinition")
            .unwrap()
            .zero_value(),
        &json!({"metadata": {}, "spec": {"group": "", "names": {"plural": "", "kind": ""}, "scope": "", "versions": null},
                "status": {"conditions": null, "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": null}})
    );
    assert_eq!(
        builtin("v1", "Secret").unwrap().zero_value(),
        &json!({"metadata": {}})
    );
}

#[test]
fn list_semantics_come_from_the_openapi_extensions() {
    let t = job();
    let s = t.schema();
    let pod_spec = s.named("io.k8s.api.core.v1.PodSpec").unwrap();
    let container = s.named("io.k8s.api.core.v1.Container").unwrap();
    let list = |owner, field: &str| {
        s.get(s.child_type(owner, field).unwrap())
            .list
            .clone()
            .unwrap()
    };
    // SSA keys differ from the SMP merge key for ports and topologySpreadConstraints.
    let ports = list(container, "ports");
    assert_eq!(ports.kind, ListKind::Map);
    assert_eq!(
        &*ports.keys,
        &[Box::from("containerPort"), Box::from("protocol")]
    );
    assert_eq!(ports.key_defaults[0].1, json!("TCP"));
    let md = s.get(container).map.as_ref().unwrap();
    assert_eq!(
        md.field("ports").unwrap().patch.merge_key.as_deref(),
        Some("containerPort")
    );
    let tsc = list(pod_spec, "topologySpreadConstraints");
    assert_eq!(
        &*tsc.keys,
        &[Box::from("topologyKey"), Box::from("whenUnsatisfiable")]
    );
    assert_eq!(list(pod_spec, "tolerations").kind, ListKind::Atomic);
    let volumes = s
        .get(pod_spec)
        .map
        .as_ref()
        .unwrap()
        .field("volumes")
        .unwrap();
    assert_eq!(
        &*volumes.patch.strategies,
        &[Box::from("merge"), Box::from("retainKeys")]
    );
    // Job conditions: atomic for apply, merged by type for strategic merge patch.
    let status = s.named("io.k8s.api.batch.v1.JobStatus").unwrap();
    assert_eq!(list(status, "conditions").kind, ListKind::Atomic);
    let conditions = s
        .get(status)
        .map
        .as_ref()
        .unwrap()
        .field("conditions")
        .unwrap();
    assert_eq!(conditions.patch.merge_key.as_deref(), Some("type"));
    let meta = s
        .named("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
        .unwrap();
    assert_eq!(list(meta, "finalizers").kind, ListKind::Set);
    // ObjectReference is an atomic struct; nodeSelector an atomic map.
    let reference = s.named("io.k8s.api.core.v1.ObjectReference").unwrap();
    assert!(s.get(reference).map.as_ref().unwrap().atomic);
    let node_selector = s.child_type(pod_spec, "nodeSelector").unwrap();
    assert!(s.get(node_selector).map.as_ref().unwrap().atomic);
}

#[test]
fn object_keys_iterate_sorted_like_declared_fields() {
    // `normalize` and `prune` walk an object's keys together with its type's declared fields (sorted by
    // name): that needs serde_json's sorted map (its `preserve_order` feature off in the whole build).
    let obj = json!({"spec": 1, "apiVersion": 2, "status": 3, "kind": 4, "metadata": 5});
    let keys: Vec<&str> = obj
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata", "spec", "status"]);
    let job = job();
    let structs: Vec<_> = job
        .schema()
        .types
        .iter()
        .filter_map(|t| t.map.as_ref())
        .collect();
    assert!(structs.len() > 100, "{}", structs.len());
    for md in structs {
        let names: Vec<&str> = md.fields.iter().map(|f| &*f.name).collect();
        assert!(names.is_sorted(), "{names:?}");
    }
}

#[test]
fn normalize_does_the_go_json_round_trip() {
    let t = job();
    let mut obj = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "labels": {}, "finalizers": [], "generation": 0},
        "spec": {"completions": null, "suspend": false, "managedBy": "",
                 "template": {"spec": {"containers": [{"name": "main", "stdin": false, "ports": [],
                                                       "workingDir": ""}]}}},
        "status": {"active": 0, "ready": 0, "failed": 0, "completedIndexes": "",
                   "conditions": [{"type": "Complete", "status": "True"}]}
    });
    normalize(t.schema(), t.root(), &mut obj);
    assert_eq!(
        obj,
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"suspend": false, "managedBy": "",
                     "template": {"metadata": {}, "spec": {"containers": [{"name": "main", "resources": {}}]}}},
            "status": {"ready": 0, "conditions": [{"type": "Complete", "status": "True",
                                                    "lastProbeTime": null, "lastTransitionTime": null}]}
        })
    );
}

#[test]
fn prune_reports_unknown_fields_with_go_paths() {
    let t = job();
    let mut obj = json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": {"any": "x"}, "bogus": 1},
        "spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "b", "requests": {}}]}}, "extra": true}
    });
    let paths = prune_unknown(&t, &mut obj);
    assert_eq!(
        paths,
        vec![
            "metadata.bogus".to_string(),
            "spec.extra".to_string(),
            "spec.template.spec.containers[1].requests".to_string()
        ]
    );
    assert_eq!(
        obj["spec"]["template"]["spec"]["containers"][1],
        json!({"name": "b"})
    );
    assert_eq!(
        obj["metadata"],
        json!({"name": "j", "labels": {"any": "x"}})
    );
}

#[test]
fn strict_scan_reports_in_document_order_and_skips_unknown_values() {
    let t = job();
    let raw = br#"{"kind":"Job","zzz":{"dup":1,"dup":2},"metadata":{"name":"a","name":"b","labels":{"k":"1","k":"2"}},
        "spec":{"template":{"spec":{"containers":[{"name":"m","bogus":1,"bogus":2}]}}},"aaa":1}"#;
    let issues = strict_issues(&t, raw).unwrap();
    let text: Vec<String> = issues.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        vec![
            "unknown field \"zzz\"",
            "duplicate field \"metadata.name\"",
            "duplicate field \"metadata.labels.k\"",
            "unknown field \"spec.template.spec.containers[0].bogus\"",
            "duplicate field \"spec.template.spec.containers[0].bogus\"",
            "unknown field \"aaa\"",
        ]
    );
    assert_eq!(
        strict_decoding_message(&t, &issues[..1]),
        "Job in version \"v1\" cannot be handled as a Job: strict decoding error: unknown field \"zzz\""
    );
    assert_eq!(
        warning_header_value(&issues[0].to_string()),
        "299 - \"unknown field \\\"zzz\\\"\""
    );
    assert!(strict_issues(&t, b"{\"kind\": ").is_err());
}

fn worker_cluster() -> TypeRef {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["ref"], "properties": {
            "ref": {"type": "object", "properties": {"name": {"type": "string"}, "key": {"type": "string", "default": "kubeconfig"}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer", "default": 80}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "weight": {"x-kubernetes-int-or-string": true}}},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}});
    from_crd(
        &schema,
        "courier.dev/v1alpha1",
        "WorkerCluster",
        true,
        false,
    )
    .unwrap()
}

#[test]
fn crd_schemas_prune_sorted_default_and_reset_status() {
    let t = worker_cluster();
    assert!(t.is_custom());
    assert_eq!(t.reset_fields(None), &["status".to_string()]);
    assert_eq!(t.reset_fields(Some("status")), &["spec".to_string()]);
    let mut obj = json!({"apiVersion": "courier.dev/v1alpha1", "kind": "WorkerCluster",
        "metadata": {"name": "w", "nope": 1},
        "spec": {"zeta": 1, "ref": {"name": "x"}, "alpha": 2, "free": {"anything": {"goes": 1}},
                 "items": [{"name": "a"}], "weight": "50%"}});
    let pruned = prune_unknown(&t, &mut obj);
    assert_eq!(pruned, vec!["metadata.nope", "spec.alpha", "spec.zeta"]);
    apply_crd_defaults(&t, &mut obj);
    assert_eq!(
        obj["spec"]["ref"],
        json!({"name": "x", "key": "kubeconfig"})
    );
    assert_eq!(obj["spec"]["items"], json!([{"name": "a", "port": 80}]));
    assert_eq!(obj["spec"]["free"], json!({"anything": {"goes": 1}}));
    // Custom resources are unstructured: only duplicates come from the decoder.
    let issues = strict_issues(&t, br#"{"spec":{"bogus":1,"bogus":2}}"#).unwrap();
    assert_eq!(
        issues,
        vec![StrictIssue::DuplicateField("spec.bogus".into())]
    );
    assert!(from_crd(&json!([]), "a/v1", "A", false, false).is_err());
    assert!(
        from_crd(&json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map"}}}), "a/v1", "A", false, false)
            .is_err()
    );
}
