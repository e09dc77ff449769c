//! Garbage collector and namespace controller tests: finalizers, orphaning and cascading deletion.

use super::*;

#[tokio::test]
async fn gc_removes_orphan_and_foreground_finalizers() {
    let c = worker(20.0);
    let api = &c.api;
    for (name, policy) in [("orphaned", "Orphan"), ("fg", "Foreground")] {
        create(
            api,
            CONFIGMAPS,
            "default",
            json!({"metadata": {"name": name}}),
        )
        .unwrap();
        delete(api, CONFIGMAPS, "default", name, Some(policy));
    }
    // Jobs default to Orphan.
    create(
        api,
        JOBS,
        "default",
        job("orphan-job", json!({}), json!({"sim/outcome": "hang"})),
    )
    .unwrap();
    wait_job(api, "orphan-job", "running", |s| n(s, "ready") == 1).await;
    delete(api, JOBS, "default", "orphan-job", None);
    // A running Job deleted in the foreground waits for its pods (2 s to terminate).
    create(
        api,
        JOBS,
        "default",
        job(
            "fg-job",
            json!({}),
            json!({"sim/outcome": "hang", "sim/term-seconds": "2"}),
        ),
    )
    .unwrap();
    wait_job(api, "fg-job", "running", |s| n(s, "ready") == 1).await;
    let t0 = tokio::time::Instant::now();
    delete(api, JOBS, "default", "fg-job", Some("Foreground"));
    eventually("configmaps and the orphaned Job gone", WAIT, || {
        (get(api, CONFIGMAPS, "default", "orphaned").is_none()
            && get(api, CONFIGMAPS, "default", "fg").is_none()
            && get(api, JOBS, "default", "orphan-job").is_none())
        .then_some(())
    })
    .await;
    let j = get(api, JOBS, "default", "fg-job").expect("held while its pods terminate");
    assert_eq!(j["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    eventually("fg-job gone", WAIT, || {
        get(api, JOBS, "default", "fg-job").is_none().then_some(())
    })
    .await;
    // 2 s of pod termination at 20x.
    assert!(
        t0.elapsed() >= Duration::from_millis(90),
        "{:?}",
        t0.elapsed()
    );
}

#[tokio::test]
async fn without_gc_finalizers_stay() {
    let c = cluster(Controllers {
        gc: false,
        ..Controllers::for_role(Role::Worker).with_speed(50.0)
    });
    let api = &c.api;
    create(
        api,
        CONFIGMAPS,
        "default",
        json!({"metadata": {"name": "cm"}}),
    )
    .unwrap();
    delete(api, CONFIGMAPS, "default", "cm", Some("Foreground"));
    create(
        api,
        JOBS,
        "default",
        job("j", json!({}), json!({"sim/run-seconds": "1"})),
    )
    .unwrap();
    wait_job(api, "j", "Complete", |s| has(s, "Complete")).await;
    delete(api, JOBS, "default", "j", None);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let cm = get(api, CONFIGMAPS, "default", "cm").unwrap();
    assert_eq!(cm["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    let j = get(api, JOBS, "default", "j").unwrap();
    assert_eq!(j["metadata"]["finalizers"], json!(["orphan"]));
}

// ------------------------------------------------------------------------------------------------
// Namespace controller.

#[tokio::test]
async fn namespace_deletion_cascades() {
    let c = worker(50.0);
    let api = &c.api;
    let mut log = Log::new(api, NAMESPACES);
    create(api, NAMESPACES, "", json!({"metadata": {"name": "team"}})).unwrap();
    create(api, CONFIGMAPS, "team", json!({"metadata": {"name": "a"}})).unwrap();
    create(
        api,
        CONFIGMAPS,
        "team",
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .unwrap();
    create(
        api,
        SECRETS,
        "team",
        json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}}),
    )
    .unwrap();
    create(
        api,
        JOBS,
        "team",
        job("run", json!({}), json!({"sim/outcome": "hang"})),
    )
    .unwrap();
    create(
        api,
        CONFIGMAPS,
        "default",
        json!({"metadata": {"name": "elsewhere"}}),
    )
    .unwrap();
    eventually("job running", WAIT, || {
        get(api, JOBS, "team", "run").filter(|j| n(&j["status"], "ready") == 1)
    })
    .await;

    delete(api, NAMESPACES, "", "team", None);
    // The Job's pod terminates (its grace period) before only the held ConfigMap is left.
    let ns = eventually("content remaining reported", WAIT, || {
        get(api, NAMESPACES, "", "team").filter(|ns| {
            cond(&ns["status"], "NamespaceContentRemaining").is_some_and(|c| {
                c["message"] == "Some resources are remaining: configmaps. has 1 resource instances"
            })
        })
    })
    .await;
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert_eq!(
        cond(&ns["status"], "NamespaceContentRemaining").unwrap()["message"],
        "Some resources are remaining: configmaps. has 1 resource instances"
    );
    assert_eq!(
        cond(&ns["status"], "NamespaceFinalizersRemaining").unwrap()["message"],
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    );
    let types: Vec<&str> = ns["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types.len(), 5, "{types:?}");
    assert!(get(api, CONFIGMAPS, "team", "a").is_none());
    assert!(get(api, SECRETS, "team", "s").is_none());
    assert!(get(api, JOBS, "team", "run").is_none());
    assert!(get(api, CONFIGMAPS, "default", "elsewhere").is_some());
    // Nothing new may be created meanwhile.
    let e = create(
        api,
        CONFIGMAPS,
        "team",
        json!({"metadata": {"name": "late"}}),
    )
    .unwrap_err();
    assert_eq!(e.code, 403);
    // Releasing the last object lets the namespace go.
    merge_patch(
        api,
        CONFIGMAPS,
        "team",
        "held",
        json!({"metadata": {"finalizers": null}}),
    );
    eventually("namespace gone", WAIT, || {
        get(api, NAMESPACES, "", "team").is_none().then_some(())
    })
    .await;
    let evs = log.events("team");
    assert_eq!(evs.last().unwrap().kind, EventType::Deleted);
    // The last state before removal had every condition in its "ok" form.
    let last = &evs[evs.len() - 2].obj.value();
    assert!(
        last["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] == "False"),
        "{last}"
    );
    assert_eq!(
        last["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["manager"] == CONTROLLER_MANAGER)
            .count(),
        1
    );
}
