//! The dispatcher end to end in process: a management and two worker kubesim clusters, the
//! controller reconciling origin Jobs onto the workers and copying their status home.

mod support;

use std::time::Duration;

use kubesim::faults::FaultConfig;
use serde_json::{Value, json};
use support::*;

const LONG: u32 = 600; // simulated seconds: 30 s of real time at speed 20

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_job_succeeds_with_a_correct_mirror_and_valid_status() {
    let env = Env::start().await;
    let origin = submit(&env.mc, job("plain", 2)).await;
    let uid = origin["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();

    let done = wait_finished(&env.mc, "plain").await;
    assert!(is_true(&done, "Complete"), "{done:#}");
    assert!(
        is_true(&done, "SuccessCriteriaMet"),
        "interim condition precedes Complete"
    );
    assert_eq!(done["status"]["succeeded"], json!(1));
    assert!(done["status"]["startTime"].is_string());
    assert!(done["status"]["completionTime"].is_string());
    assert!(done["status"]["active"].as_i64().unwrap_or(0) == 0);
    // Intent on the origin: the first cluster by name (both empty), epoch 1, the finalizer.
    assert_eq!(label(&done, "courier.dev/cluster"), Some("w1"));
    assert_eq!(annotation(&done, "courier.dev/epoch"), Some("1"));
    assert!(
        done["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == "courier.dev/mirror-cleanup"))
    );

    let m = env
        .mirror("w1", "plain")
        .await
        .unwrap_or_else(|| panic!("mirror on w1"));
    assert_eq!(label(&m, "courier.dev/origin"), Some(ORIGIN));
    assert_eq!(label(&m, "courier.dev/origin-uid"), Some(uid.as_str()));
    assert_eq!(label(&m, "courier.dev/epoch"), Some("1"));
    assert_eq!(label(&m, "app"), Some("demo"), "user labels are kept");
    assert_eq!(
        label(&m, "courier.dev/cluster"),
        None,
        "origin bookkeeping is not copied"
    );
    assert!(
        m["spec"].get("managedBy").is_none(),
        "the worker's own controller runs it"
    );
    assert!(m["spec"].get("ttlSecondsAfterFinished").is_none());
    assert_eq!(m["spec"]["backoffLimit"], json!(2));
    assert_eq!(
        m.pointer("/spec/template/metadata/annotations/sim~1run-seconds"),
        Some(&json!("2"))
    );
    // The worker generated its own selector (the origin's was stripped).
    let mirror_uid = m["metadata"]["uid"].as_str().unwrap_or_default();
    assert_eq!(
        m.pointer("/spec/selector/matchLabels/batch.kubernetes.io~1controller-uid"),
        Some(&json!(mirror_uid))
    );
    assert!(is_true(&m, "Complete"));
    assert!(env.mirror("w2", "plain").await.is_none());

    let note = wait_event(&env.mc, "plain", "Dispatched").await;
    assert!(note.contains("w1") && note.contains("epoch 1"), "{note}");
    let snapshot = env.ctl.jobs();
    assert_eq!(snapshot.len(), 1);
    assert_eq!(snapshot[0].cluster.as_deref(), Some("w1"));
    assert_eq!(snapshot[0].phase, courier_controller::JobPhase::Complete);
    let metrics = env.ctl.metrics_text();
    assert!(
        metrics.contains(r#"courier_dispatch_total{cluster="w1",result="created"} 1"#),
        "{metrics}"
    );
    env.stop().await;
}

/// The controller on one thread (`courier run --worker-threads 1`): nothing of it may need a
/// second worker thread to make progress.
#[tokio::test(flavor = "current_thread")]
async fn a_job_completes_on_a_current_thread_runtime() {
    let env = Env::start().await;
    submit(&env.mc, job("one-thread", 1)).await;
    let done = wait_finished(&env.mc, "one-thread").await;
    assert!(is_true(&done, "Complete"), "{done:#}");
    assert_eq!(done["status"]["succeeded"], json!(1));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_job_with_success_policy_completes_by_policy() {
    let env = Env::start().await;
    let mut j = job("indexed", 2);
    j["spec"]["completionMode"] = json!("Indexed");
    j["spec"]["completions"] = json!(3);
    j["spec"]["parallelism"] = json!(3);
    j["spec"]["successPolicy"] = json!({"rules": [{"succeededIndexes": "0"}]});
    j["spec"]["template"]["metadata"]["annotations"]["sim/plan"] =
        json!(r#"{"i0": "succeed@1", "i1": "hang", "i2": "hang"}"#);
    submit(&env.mc, j).await;
    let done = wait_finished(&env.mc, "indexed").await;
    assert!(is_true(&done, "Complete"), "{done:#}");
    let scm = condition(&done, "SuccessCriteriaMet")
        .cloned()
        .unwrap_or_default();
    assert_eq!(scm["status"], "True");
    assert_eq!(scm["reason"], "SuccessPolicy");
    assert_eq!(done["status"]["completedIndexes"], json!("0"));
    assert_eq!(
        condition(&done, "Complete").map(|c| c["reason"].clone()),
        Some(json!("SuccessPolicy"))
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_by_backoff_limit_fails_the_origin() {
    let env = Env::start().await;
    let mut j = job("failing", 1);
    j["spec"]["backoffLimit"] = json!(1);
    j["spec"]["template"]["metadata"]["annotations"]["sim/outcome"] = json!("fail:3");
    submit(&env.mc, j).await;
    let done = wait_finished(&env.mc, "failing").await;
    assert!(is_true(&done, "Failed"), "{done:#}");
    assert!(
        is_true(&done, "FailureTarget"),
        "interim condition precedes Failed"
    );
    assert!(!is_true(&done, "Complete"));
    assert_eq!(
        condition(&done, "Failed").map(|c| c["reason"].clone()),
        Some(json!("BackoffLimitExceeded"))
    );
    assert!(done["status"]["failed"].as_i64().unwrap_or(0) >= 2);
    assert!(done["status"].get("completionTime").is_none());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_resume_and_parallelism_flow_down() {
    let env = Env::start().await;
    // Created suspended: not dispatched until resumed, but shows Suspended=True.
    let mut j = job("flow", LONG);
    j["spec"]["suspend"] = json!(true);
    j["spec"]["completions"] = json!(4);
    j["spec"]["parallelism"] = json!(1);
    submit(&env.mc, j).await;
    let o = wait_job(
        &env.mc,
        "flow",
        "Suspended=True",
        Duration::from_secs(10),
        |j| is_true(j, "Suspended"),
    )
    .await;
    assert_eq!(
        label(&o, "courier.dev/cluster"),
        None,
        "not placed while suspended"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(env.mirror("w1", "flow").await.is_none() && env.mirror("w2", "flow").await.is_none());

    merge_patch(&env.mc, "flow", json!({"spec": {"suspend": false}})).await;
    env.wait_mirror("w1", "flow", "running", |m| {
        m["status"]["active"] == json!(1)
    })
    .await;
    wait_job(
        &env.mc,
        "flow",
        "resumed and active",
        Duration::from_secs(10),
        |j| {
            condition(j, "Suspended").is_some_and(|c| c["status"] == "False")
                && j["status"]["active"] == json!(1)
        },
    )
    .await;

    // Suspend mid-run.
    merge_patch(&env.mc, "flow", json!({"spec": {"suspend": true}})).await;
    env.wait_mirror("w1", "flow", "suspended", |m| {
        m["spec"]["suspend"] == json!(true) && is_true(m, "Suspended")
    })
    .await;
    wait_job(
        &env.mc,
        "flow",
        "Suspended=True",
        Duration::from_secs(10),
        |j| is_true(j, "Suspended"),
    )
    .await;

    // Resume with more parallelism.
    merge_patch(
        &env.mc,
        "flow",
        json!({"spec": {"suspend": false, "parallelism": 2}}),
    )
    .await;
    env.wait_mirror("w1", "flow", "resumed with parallelism 2", |m| {
        m["spec"]["suspend"] == json!(false) && m["spec"]["parallelism"] == json!(2)
    })
    .await;
    wait_job(
        &env.mc,
        "flow",
        "two active pods",
        Duration::from_secs(15),
        |j| j["status"]["active"] == json!(2) && !is_true(j, "Suspended"),
    )
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_origin_mid_run_deletes_the_mirror() {
    let env = Env::start().await;
    submit(&env.mc, job("doomed", LONG)).await;
    env.wait_mirror("w1", "doomed", "running", |m| {
        m["status"]["active"] == json!(1)
    })
    .await;
    delete(&env.mc, "doomed").await;
    eventually("origin gone", Duration::from_secs(15), || async {
        get(&env.mc, "doomed").await.is_none().then_some(())
    })
    .await;
    eventually("mirror gone from w1", Duration::from_secs(15), || async {
        env.mirror("w1", "doomed").await.is_none().then_some(())
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_job_is_left_alone_and_the_job_runs_elsewhere() {
    let env = Env::start().await;
    // Someone else's Job with the same name on w1, the first choice.
    let created = create_foreign_job(env.worker("w1"), "clash").await;
    let foreign_uid = created.metadata.uid.clone();

    submit(&env.mc, job("clash", 2)).await;
    let done = wait_finished(&env.mc, "clash").await;
    assert!(is_true(&done, "Complete"));
    assert_eq!(label(&done, "courier.dev/cluster"), Some("w2"));
    let note = wait_event(&env.mc, "clash", "MirrorConflict").await;
    assert!(note.contains("w1"), "{note}");

    let still = env
        .mirror("w1", "clash")
        .await
        .unwrap_or_else(|| panic!("foreign Job deleted"));
    assert_eq!(still["metadata"]["uid"].as_str(), foreign_uid.as_deref());
    assert_eq!(
        label(&still, "courier.dev/origin"),
        None,
        "never relabelled"
    );
    assert!(still["metadata"].get("deletionTimestamp").is_none());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_selector_places_on_matching_clusters_only() {
    let env = Env::start().await;
    let mut j = job("us-only", 2);
    j["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": "region=us"});
    submit(&env.mc, j).await;
    let done = wait_finished(&env.mc, "us-only").await;
    assert_eq!(label(&done, "courier.dev/cluster"), Some("w2"));

    let mut j = job("nowhere", 2);
    j["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": "region in (ap,sa)"});
    submit(&env.mc, j).await;
    let note = wait_event(&env.mc, "nowhere", "NoEligibleCluster").await;
    assert!(note.contains("matched none"), "{note}");
    let o = get(&env.mc, "nowhere").await.unwrap_or_default();
    assert_eq!(label(&o, "courier.dev/cluster"), None);
    let explained = env
        .ctl
        .explain(JOBS_NS, "nowhere")
        .unwrap_or_else(|| panic!("explain"));
    assert!(
        explained
            .waiting
            .unwrap_or_default()
            .contains("matched none")
    );
    env.stop().await;
}

/// Two workers of the same weight share a burst of Jobs: the dispatches decided while the first
/// intents are still being written count them (`origin::placing`), instead of each reading the
/// cache, which learns of an intent only from its answer, and all choosing the same worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_jobs_is_shared_between_equal_workers() {
    const BURST: usize = 12;
    let env = Env::start().await;
    // Every request to the management server answers late: the creates of the burst land
    // together, and every intent written for them is still in flight while the others are decided.
    env.mgmt.set_faults(FaultConfig {
        latency_ms: 300,
        ..Default::default()
    });
    let names: Vec<String> = (0..BURST).map(|i| format!("burst-{i}")).collect();
    futures::future::join_all(names.iter().map(|n| submit(&env.mc, job(n, LONG)))).await;
    let mut placed = std::collections::BTreeMap::<String, usize>::new();
    for n in &names {
        let o = wait_job(&env.mc, n, "placed", Duration::from_secs(20), |j| {
            label(j, "courier.dev/cluster").is_some()
        })
        .await;
        let cluster = label(&o, "courier.dev/cluster").unwrap_or_default();
        *placed.entry(cluster.to_string()).or_default() += 1;
    }
    println!("placed: {placed:?}");
    // Two reconciles on the test's two threads may still read the same counts at once, so the
    // share is not exact; before, the whole burst (or nearly) went to one worker.
    let (w1, w2) = (
        placed.get("w1").copied().unwrap_or(0),
        placed.get("w2").copied().unwrap_or(0),
    );
    assert!(
        w1.abs_diff(w2) <= 2,
        "{BURST} Jobs at once on two workers of weight 1: {placed:?}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_deleted_behind_couriers_back_is_redispatched_with_epoch_2() {
    let env = Env::start().await;
    submit(&env.mc, job("lost", LONG)).await;
    // Wait until the mirror has reported (the Dispatched marker names epoch 1).
    wait_job(
        &env.mc,
        "lost",
        "dispatched and running",
        Duration::from_secs(15),
        |j| is_true(j, "courier.dev/Dispatched") && j["status"]["active"] == json!(1),
    )
    .await;
    jobs(env.worker("w1"), JOBS_NS)
        .delete("lost", &kube::api::DeleteParams::background())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let o = wait_job(&env.mc, "lost", "epoch 2", Duration::from_secs(15), |j| {
        annotation(j, "courier.dev/epoch") == Some("2")
    })
    .await;
    assert_eq!(annotation(&o, "courier.dev/redispatches"), Some("1"));
    let cluster = label(&o, "courier.dev/cluster")
        .unwrap_or_default()
        .to_string();
    let m = env
        .wait_mirror(&cluster, "lost", "epoch 2 mirror", |m| {
            label(m, "courier.dev/epoch") == Some("2")
        })
        .await;
    assert_eq!(label(&m, "courier.dev/origin"), Some(ORIGIN));
    let note = wait_event(&env.mc, "lost", "Redispatched").await;
    assert!(note.contains("epoch 2"), "{note}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collection_removes_orphans_and_never_touches_other_origins() {
    let env = Env::start().await;
    ensure_namespace(env.worker("w1"), JOBS_NS).await;
    let mirror_like = |name: &str, origin: &str| -> Value {
        let mut j = job(name, LONG);
        j["spec"].as_object_mut().map(|s| s.remove("managedBy"));
        j["metadata"]["labels"] = json!({
            "courier.dev/origin": origin,
            "courier.dev/origin-uid": "00000000-0000-0000-0000-000000000000",
            "courier.dev/epoch": "1",
        });
        j
    };
    for (name, origin) in [("orphan", ORIGIN), ("theirs", "another-mgmt")] {
        let obj =
            serde_json::from_value(mirror_like(name, origin)).unwrap_or_else(|e| panic!("{e}"));
        jobs(env.worker("w1"), JOBS_NS)
            .create(&Default::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    eventually(
        "orphan mirror garbage-collected",
        Duration::from_secs(15),
        || async { env.mirror("w1", "orphan").await.is_none().then_some(()) },
    )
    .await;
    // Two more GC rounds: the other origin id's Job stays.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let theirs = env.mirror("w1", "theirs").await;
    assert!(
        theirs.is_some_and(|t| t["metadata"].get("deletionTimestamp").is_none()),
        "another origin id's mirror was touched"
    );
    assert!(
        env.ctl
            .metrics_text()
            .contains(r#"courier_gc_deleted_total{cluster="w1",reason="origin_gone"} 1"#)
    );
    env.stop().await;
}
