//! CRD controller tests: establishing, serving, name conflicts and cleanup of custom resources.

use super::*;

#[tokio::test]
async fn crd_lifecycle() {
    let c = cluster(Controllers::for_role(Role::Management));
    let api = &c.api;
    let f = fixture("crd.json");
    let mut log = Log::new(api, CRDS);
    let t0 = tokio::time::Instant::now();
    create(
        api,
        CRDS,
        "",
        step(&f, "create CRD")["request"]["body"].clone(),
    )
    .unwrap();
    let crd = eventually("Established", WAIT, || {
        get(api, CRDS, "", "workerclusters.courier.dev").filter(crate::kinds::crd::is_established)
    })
    .await;
    let wc = api
        .registry
        .get("courier.dev", "v1alpha1", "workerclusters")
        .expect("served once Established");
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    // Served as the CRD says: cluster-scoped, short names, the /status subresource.
    assert_eq!(
        crd["spec"]["versions"][0]["subresources"],
        json!({"status": {}})
    );
    assert!(wc.info().status_subresource);
    assert!(!wc.info().namespaced);
    assert_eq!(wc.info().short_names, ["wc"]);
    let want = &step(&f, "wait until Established")["response"]["body"];
    let strip = |s: &Value| {
        let mut s = s.clone();
        for c in s["conditions"].as_array_mut().unwrap() {
            c["lastTransitionTime"] = json!("<time>");
        }
        s
    };
    assert_eq!(strip(&crd["status"]), want["status"]);
    let mut managers: Vec<(String, String)> = crd["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["manager"].as_str().unwrap().to_string(),
                m["subresource"].to_string(),
            )
        })
        .collect();
    managers.sort();
    assert_eq!(
        managers,
        [
            (APISERVER.to_string(), "\"status\"".to_string()),
            ("test".to_string(), "null".to_string())
        ]
    );
    // One status write: created, then Established (as the recording's <rv:2>).
    assert_eq!(
        log.events("workerclusters.courier.dev")
            .iter()
            .map(|e| e.kind)
            .collect::<Vec<_>>(),
        [EventType::Added, EventType::Modified]
    );

    let body = |name: &str, fins: Value| {
        json!({"apiVersion": "courier.dev/v1alpha1", "kind": "WorkerCluster",
               "metadata": {"name": name, "finalizers": fins},
               "spec": {"kubeconfigSecretRef": {"name": "k", "namespace": "courier-system"}}})
    };
    let mut with_status = body("w1", json!([]));
    with_status["status"] = json!({"phase": "Ready"});
    let w1 = create(api, WORKERCLUSTERS, "", with_status).unwrap();
    assert!(
        w1.get("status").is_none(),
        "status is dropped on create: {w1}"
    );
    let mut st = w1.clone();
    st["status"] = json!({"phase": "Ready"});
    api.update(&wc, "", "w1", st, Part::Status, &opts())
        .unwrap();
    assert_eq!(
        get(api, WORKERCLUSTERS, "", "w1").unwrap()["status"]["phase"],
        "Ready"
    );
    assert_eq!(
        w1["spec"]["kubeconfigSecretRef"]["key"], "kubeconfig",
        "schema defaults"
    );
    create(
        api,
        WORKERCLUSTERS,
        "",
        body("w2", json!(["example.com/keep"])),
    )
    .unwrap();

    delete(api, CRDS, "", "workerclusters.courier.dev", None);
    let w2 = eventually("w1 deleted, w2 held", WAIT, || {
        (get(api, WORKERCLUSTERS, "", "w1").is_none())
            .then(|| get(api, WORKERCLUSTERS, "", "w2"))
            .flatten()
    })
    .await;
    assert!(is_deleting(&w2));
    let crd = get(api, CRDS, "", "workerclusters.courier.dev").expect("held by w2");
    let terminating = cond(&crd["status"], "Terminating").unwrap();
    assert_eq!(terminating["reason"], "InstanceDeletionInProgress");
    assert!(
        api.registry
            .get("courier.dev", "v1alpha1", "workerclusters")
            .is_some()
    );
    merge_patch(
        api,
        WORKERCLUSTERS,
        "",
        "w2",
        json!({"metadata": {"finalizers": null}}),
    );
    eventually("CRD gone", WAIT, || {
        get(api, CRDS, "", "workerclusters.courier.dev")
            .is_none()
            .then_some(())
    })
    .await;
    // Gone means no longer served, at once.
    assert!(
        api.registry
            .get("courier.dev", "v1alpha1", "workerclusters")
            .is_none()
    );
    let last = log.events("workerclusters.courier.dev");
    let before_gone = &last[last.len() - 2].obj.value();
    assert_eq!(before_gone["metadata"]["finalizers"], json!([CLEANUP]));
    let deleted = &last[last.len() - 1];
    assert_eq!(deleted.kind, EventType::Deleted);
    // The finishing status write empties the finalizers, so the object is deleted during that update
    // and the DELETED event carries the last *stored* state, as etcd-backed watches do.
    assert_eq!(
        cond(&deleted.obj.value()["status"], "Terminating").unwrap()["reason"],
        "InstanceDeletionInProgress"
    );

    // Re-created, it is served again.
    create(
        api,
        CRDS,
        "",
        step(&f, "create CRD")["request"]["body"].clone(),
    )
    .unwrap();
    eventually("served again", WAIT, || {
        api.registry
            .get("courier.dev", "v1alpha1", "workerclusters")
    })
    .await;
    assert!(get(api, WORKERCLUSTERS, "", "w2").is_none());
}

const CLEANUP: &str = crate::kinds::crd::CLEANUP_FINALIZER;

#[tokio::test]
async fn conflicting_crd_names_wait_until_free() {
    let c = cluster(Controllers::for_role(Role::ApiServer));
    let api = &c.api;
    let f = fixture("crd.json");
    let first = step(&f, "create CRD")["request"]["body"].clone();
    create(api, CRDS, "", first).unwrap();
    eventually("first established", WAIT, || {
        get(api, CRDS, "", "workerclusters.courier.dev").filter(crate::kinds::crd::is_established)
    })
    .await;
    let mut second = step(&f, "create CRD")["request"]["body"].clone();
    second["metadata"]["name"] = json!("others.courier.dev");
    second["spec"]["names"]["plural"] = json!("others");
    second["spec"]["names"]["singular"] = json!("other");
    second["spec"]["names"]["shortNames"] = json!([]);
    create(api, CRDS, "", second).unwrap();
    let o = eventually("second judged", WAIT, || {
        get(api, CRDS, "", "others.courier.dev").filter(|c| {
            c["status"]["conditions"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        })
    })
    .await;
    let names = o["status"]["conditions"].as_array().unwrap();
    assert_eq!(names[0]["reason"], "ListKindConflict", "{names:?}");
    assert!(
        api.registry
            .get("courier.dev", "v1alpha1", "others")
            .is_none()
    );
    delete(api, CRDS, "", "workerclusters.courier.dev", None);
    eventually("second established once the kind is free", WAIT, || {
        get(api, CRDS, "", "others.courier.dev").filter(crate::kinds::crd::is_established)
    })
    .await;
    assert!(
        api.registry
            .get("courier.dev", "v1alpha1", "others")
            .is_some()
    );
}
