//! Job controller tests: runs, backoff, indexed and suspended Jobs, scale-down, managedBy, TTL,
//! the management role, and many Jobs on one timer wheel.

use super::*;

#[tokio::test]
async fn job_runs_to_completion_in_two_phase_writes() {
    let c = worker(50.0);
    let api = &c.api;
    let mut log = Log::new(api, JOBS);
    create(
        api,
        JOBS,
        "default",
        job(
            "ok",
            json!({"completions": 2, "parallelism": 2}),
            json!({"sim/run-seconds": "1"}),
        ),
    )
    .unwrap();
    let done = wait_job(api, "ok", "Complete", |s| has(s, "Complete")).await;
    let st = &done["status"];
    assert_eq!(n(st, "succeeded"), 2);
    assert_eq!(n(st, "active"), 0);
    assert_eq!(
        (st["ready"].clone(), st["terminating"].clone()),
        (json!(0), json!(0))
    );
    assert!(st["startTime"].is_string() && st["completionTime"].is_string());
    assert_eq!(
        cond(st, "Complete").unwrap()["reason"],
        "CompletionsReached"
    );
    let states = log.statuses("ok");
    assert_eq!(states[0], json!({}), "created with an empty status");
    assert!(
        states
            .iter()
            .any(|s| n(s, "active") == 2 && n(s, "ready") == 0)
    );
    assert!(
        states
            .iter()
            .any(|s| n(s, "active") == 2 && n(s, "ready") == 2)
    );
    // Two-phase: finished pods first as uncounted UIDs, with SuccessCriteriaMet before Complete.
    let uncounted = states
        .iter()
        .position(|s| {
            s["uncountedTerminatedPods"]["succeeded"]
                .as_array()
                .is_some_and(|a| a.len() == 2)
        })
        .expect("uncounted succeeded pods");
    assert_eq!(n(&states[uncounted], "succeeded"), 0);
    assert!(has(&states[uncounted], "SuccessCriteriaMet"));
    assert!(!has(&states[uncounted], "Complete"));
    assert_eq!(states.last().unwrap(), st);
    // Written by the controller manager through /status.
    let mf = done["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        mf.iter()
            .any(|m| m["manager"] == CONTROLLER_MANAGER && m["subresource"] == "status"),
        "{mf:?}"
    );
}

#[tokio::test]
async fn backoff_limit_fails_the_job() {
    let c = worker(50.0);
    let api = &c.api;
    let mut log = Log::new(api, JOBS);
    create(
        api,
        JOBS,
        "default",
        job(
            "bad",
            json!({"backoffLimit": 1}),
            json!({"sim/outcome": "fail:3", "sim/run-seconds": "0.5"}),
        ),
    )
    .unwrap();
    let done = wait_job(api, "bad", "Failed", |s| has(s, "Failed")).await;
    let st = &done["status"];
    assert_eq!(n(st, "failed"), 2);
    assert_eq!(
        cond(st, "Failed").unwrap()["reason"],
        "BackoffLimitExceeded"
    );
    assert_eq!(
        cond(st, "FailureTarget").unwrap()["message"],
        "Job has reached the specified backoff limit"
    );
    assert!(st.get("completionTime").is_none());
    let states = log.statuses("bad");
    let ft = states.iter().position(|s| has(s, "FailureTarget")).unwrap();
    assert!(!has(&states[ft], "Failed"), "FailureTarget precedes Failed");
    // The first failure was counted (failed=1) while a replacement was still to come.
    assert!(
        states
            .iter()
            .any(|s| n(s, "failed") == 1 && !has(s, "FailureTarget"))
    );
}

#[tokio::test]
async fn indexed_job_with_success_policy() {
    let c = worker(50.0);
    let api = &c.api;
    let mut log = Log::new(api, JOBS);
    create(
        api,
        JOBS,
        "default",
        job(
            "idx",
            json!({
                "completionMode": "Indexed", "completions": 4, "parallelism": 4,
                "successPolicy": {"rules": [{"succeededCount": 2}]}
            }),
            json!({"sim/plan": r#"{"i0": "succeed@1", "i1": "succeed@2", "i2": "hang", "i3": "hang"}"#}),
        ),
    )
    .unwrap();
    let done = wait_job(api, "idx", "Complete", |s| has(s, "Complete")).await;
    let st = &done["status"];
    assert_eq!(st["completedIndexes"], "0,1");
    assert_eq!(n(st, "succeeded"), 2);
    assert_eq!(n(st, "failed"), 0, "cut-off pods are not counted");
    assert_eq!(cond(st, "Complete").unwrap()["reason"], "SuccessPolicy");
    let states = log.statuses("idx");
    let scm = states
        .iter()
        .find(|s| has(s, "SuccessCriteriaMet"))
        .unwrap();
    assert_eq!(
        n(scm, "terminating"),
        2,
        "the other indexes are deleted: {scm}"
    );
    assert!(!has(scm, "Complete"));
}

#[tokio::test]
async fn suspend_and_resume_through_patches() {
    let c = worker(50.0);
    let api = &c.api;
    create(
        api,
        JOBS,
        "default",
        job(
            "s",
            json!({"suspend": true}),
            json!({"sim/run-seconds": "1"}),
        ),
    )
    .unwrap();
    let j = wait_job(api, "s", "Suspended", |s| has(s, "Suspended")).await;
    assert_eq!(
        cond(&j["status"], "Suspended").unwrap()["reason"],
        "JobSuspended"
    );
    assert!(j["status"].get("startTime").is_none());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        n(&get(api, JOBS, "default", "s").unwrap()["status"], "active"),
        0
    );
    merge_patch(
        api,
        JOBS,
        "default",
        "s",
        json!({"spec": {"suspend": false}}),
    );
    let j = wait_job(api, "s", "resumed", |s| n(s, "active") == 1).await;
    let resumed = j["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Suspended")
        .unwrap();
    assert_eq!(
        (resumed["status"].as_str(), resumed["reason"].as_str()),
        (Some("False"), Some("JobResumed"))
    );
    assert!(j["status"]["startTime"].is_string());
    wait_job(api, "s", "Complete", |s| has(s, "Complete")).await;
}

#[tokio::test]
async fn parallelism_scale_down_deletes_pods_without_counting_them() {
    let c = worker(20.0);
    let api = &c.api;
    let mut log = Log::new(api, JOBS);
    create(
        api,
        JOBS,
        "default",
        job(
            "p",
            json!({"completions": 3, "parallelism": 3}),
            json!({"sim/run-seconds": "4"}),
        ),
    )
    .unwrap();
    wait_job(api, "p", "3 ready", |s| n(s, "ready") == 3).await;
    merge_patch(
        api,
        JOBS,
        "default",
        "p",
        json!({"spec": {"parallelism": 1}}),
    );
    wait_job(api, "p", "scaled down", |s| {
        n(s, "active") == 1 && n(s, "terminating") == 2
    })
    .await;
    let done = wait_job(api, "p", "Complete", |s| has(s, "Complete")).await;
    assert_eq!(n(&done["status"], "succeeded"), 3);
    assert_eq!(n(&done["status"], "failed"), 0);
    assert!(
        log.statuses("p")
            .iter()
            .all(|s| n(s, "active") <= 3 && n(s, "failed") == 0)
    );
}

#[tokio::test]
async fn managed_by_jobs_are_left_alone() {
    let c = worker(50.0);
    let api = &c.api;
    let created = create(
        api,
        JOBS,
        "default",
        job(
            "mine",
            json!({"managedBy": "courier.dev/dispatcher"}),
            json!({}),
        ),
    )
    .unwrap();
    create(
        api,
        JOBS,
        "default",
        job("theirs", json!({}), json!({"sim/run-seconds": "1"})),
    )
    .unwrap();
    // The controller is running: the ordinary Job finishes...
    wait_job(api, "theirs", "Complete", |s| has(s, "Complete")).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // ...while the managedBy one was never written to.
    let j = get(api, JOBS, "default", "mine").unwrap();
    assert_eq!(j["status"], json!({}));
    assert_eq!(
        j["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn ttl_deletes_finished_jobs_in_the_foreground() {
    let c = worker(50.0);
    let api = &c.api;
    let mut log = Log::new(api, JOBS);
    create(
        api,
        JOBS,
        "default",
        job(
            "ttl",
            json!({"ttlSecondsAfterFinished": 2}),
            json!({"sim/run-seconds": "1"}),
        ),
    )
    .unwrap();
    // A managedBy Job finished by its own controller (here: the test) is deleted too.
    create(
        api,
        JOBS,
        "default",
        job(
            "ext",
            json!({"managedBy": "courier.dev/dispatcher", "ttlSecondsAfterFinished": 1}),
            json!({}),
        ),
    )
    .unwrap();
    finish(api, "ext");
    eventually("both Jobs deleted", WAIT, || {
        (get(api, JOBS, "default", "ttl").is_none() && get(api, JOBS, "default", "ext").is_none())
            .then_some(())
    })
    .await;
    for name in ["ttl", "ext"] {
        let evs = log.events(name);
        let deleting = evs
            .iter()
            .find(|e| e.kind == EventType::Modified && is_deleting(&e.obj.value()))
            .unwrap_or_else(|| panic!("{name}: no deletionTimestamp before DELETED"));
        let v = &deleting.obj.value();
        assert_eq!(
            v["metadata"]["finalizers"],
            json!(["foregroundDeletion"]),
            "{name}"
        );
        assert_eq!(v["metadata"]["generation"], 2, "{name}");
        assert!(has(&v["status"], "Complete"), "{name}: finished first");
        assert_eq!(evs.last().unwrap().kind, EventType::Deleted, "{name}");
    }
}

/// A finished status as Courier copies it onto an origin Job.
fn finish(api: &Api, name: &str) {
    let s = served(api, JOBS);
    let mut j = get(api, JOBS, "default", name).unwrap();
    let now = crate::time::now_string();
    j["status"] = json!({
        "startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "m", "lastTransitionTime": now, "lastProbeTime": now},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "m", "lastTransitionTime": now, "lastProbeTime": now}
        ]
    });
    api.update(&s, "default", name, j, Part::Status, &opts())
        .unwrap();
}

#[tokio::test]
async fn management_cluster_runs_no_job_controller_but_gc() {
    let c = cluster(Controllers::for_role(Role::Management).with_speed(50.0));
    let api = &c.api;
    let origin = json!({"managedBy": "courier.dev/dispatcher"});
    create(api, JOBS, "default", job("origin", origin, json!({}))).unwrap();
    create(api, JOBS, "default", job("plain", json!({}), json!({}))).unwrap();
    finish(api, "origin");
    // Foreground deletion of a Job: no simulated pods here, so the gc lets it go at once.
    delete(api, JOBS, "default", "origin", Some("Foreground"));
    eventually("origin gone", WAIT, || {
        get(api, JOBS, "default", "origin").is_none().then_some(())
    })
    .await;
    assert_eq!(
        get(api, JOBS, "default", "plain").unwrap()["status"],
        json!({})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_jobs_run_on_one_timer_wheel() {
    const N: usize = 200;
    let c = worker(20.0);
    let api = &c.api;
    for i in 0..N {
        let name = format!("j{i}");
        let ann = json!({"sim/run-seconds": format!("{}", 1 + i % 3)});
        create(api, JOBS, "default", job(&name, json!({}), ann)).unwrap();
    }
    let s = served(api, JOBS);
    // Each Job also makes a Pod object and its status writes: a loaded machine needs the margin.
    eventually("every Job complete", Duration::from_secs(30), || {
        let page = api.list(&s, Some("default"), &Default::default()).unwrap();
        let done = page
            .items
            .iter()
            .filter(|st| {
                has(&st.value()["status"], "Complete") && n(&st.value()["status"], "succeeded") == 1
            })
            .count();
        (done == N).then_some(())
    })
    .await;
}
