//! Lifecycle of one Job on real-shaped clusters (issue #11): spec changes that must reach the mirror
//! (elastic Indexed Jobs, template changes while suspended, changes the worker refuses), suspend
//! never costing the re-dispatch budget, finished mirrors cleaned up, status hygiene when no mirror
//! is read, and Kueue-queued mirrors. Each test was written first and seen failing on the code
//! before its fix (the failure it showed is noted on each).

mod support;

use std::time::Duration;

use courier_controller::ControllerConfig;
use jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

const LONG: u32 = 600; // simulated seconds: 30 s of real time at speed 20
const T: Duration = Duration::from_secs(20);

fn active(j: &Value) -> i64 {
    j["status"]["active"].as_i64().unwrap_or(0)
}

/// Point 1. Before the fix the mirror kept `completions: 4` and the origin never finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elastic_indexed_job_scales_completions_with_parallelism() {
    let env = Env::start().await;
    let mut j = job("elastic", LONG);
    j["spec"]["completionMode"] = json!("Indexed");
    j["spec"]["completions"] = json!(4);
    j["spec"]["parallelism"] = json!(4);
    j["spec"]["template"]["metadata"]["annotations"]["sim/plan"] =
        json!(r#"{"i0": "succeed@1", "i1": "succeed@1", "i2": "hang", "i3": "hang"}"#);
    submit(&env.mc, j).await;
    wait_job(&env.mc, "elastic", "indexes 0 and 1 done", T, |j| {
        j["status"]["succeeded"] == json!(2)
    })
    .await;
    merge_patch(
        &env.mc,
        "elastic",
        json!({"spec": {"completions": 2, "parallelism": 2}}),
    )
    .await;
    let done = wait_finished(&env.mc, "elastic").await;
    assert!(is_true(&done, "Complete"), "{done:#}");
    assert_eq!(done["status"]["completedIndexes"], json!("0,1"));
    let m = env.mirror("w1", "elastic").await.unwrap_or_default();
    assert_eq!(m["spec"]["completions"], json!(2));
    assert_eq!(m["spec"]["parallelism"], json!(2));
    env.stop().await;
}

/// Point 6 (and 9). Before the fix the resumed mirror ran with 100m and no node selector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_changed_while_suspended_reach_the_resumed_mirror() {
    let env = Env::start().await;
    let mut j = job("resize", LONG);
    j["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "100m"}});
    submit(&env.mc, j).await;
    env.wait_mirror("w1", "resize", "running", |m| active(m) == 1)
        .await;
    merge_patch(&env.mc, "resize", json!({"spec": {"suspend": true}})).await;
    wait_job(&env.mc, "resize", "suspended and idle", T, |j| {
        is_true(j, "Suspended") && active(j) == 0
    })
    .await;
    // Kubernetes 1.36 accepts new resources and scheduling directives on a suspended, idle Job.
    merge_patch(
        &env.mc,
        "resize",
        json!({"spec": {"template": {"spec": {
            "nodeSelector": {"disk": "ssd"},
            "containers": [{"name": "main", "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": "2"}}}]}}}}),
    )
    .await;
    merge_patch(&env.mc, "resize", json!({"spec": {"suspend": false}})).await;
    let m = env
        .wait_mirror("w1", "resize", "resumed with the new template", |m| {
            m["spec"]["suspend"] == json!(false)
                && m.pointer("/spec/template/spec/containers/0/resources/requests/cpu")
                    == Some(&json!("2"))
        })
        .await;
    assert_eq!(
        m.pointer("/spec/template/spec/nodeSelector"),
        Some(&json!({"disk": "ssd"}))
    );
    assert_eq!(
        label(&m, "courier.dev/epoch"),
        Some("1"),
        "patched in place"
    );
    env.wait_mirror("w1", "resize", "running again", |m| active(m) == 1)
        .await;
    env.stop().await;
}

/// Point 9: a change the worker refuses is never silently out of sync. Running: one
/// `MirrorOutOfSync` Warning, not a patch per reconcile. Suspended and idle: recreated with the new
/// spec. Before the fix the refused patch was retried forever and nothing said why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_the_worker_refuses_is_announced_or_applied_by_recreating() {
    let env = Env::start().await;
    let w1 = env.worker_sim("w1");
    w1.record_requests();
    let mut j = job("rigid", LONG);
    j["spec"]["parallelism"] = json!(1);
    j["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": "region=eu"});
    submit(&env.mc, j).await;
    env.wait_mirror("w1", "rigid", "running", |m| active(m) == 1)
        .await;
    // From now on the worker refuses every change of Jobs in that namespace (a policy).
    use_token(&env, "w1", "refusing", denying_in_jobs_ns(&["patch"])).await;
    merge_patch(&env.mc, "rigid", json!({"spec": {"parallelism": 2}})).await;
    let note = wait_event(&env.mc, "rigid", "MirrorOutOfSync").await;
    assert!(note.contains("w1"), "{note}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let patches = w1
        .recorded_requests()
        .iter()
        .filter(|r| r.user == "refusing" && r.attributes.verb == "patch")
        .count();
    assert!(
        (1..=2).contains(&patches),
        "{patches} refused patches in 3 s"
    );
    assert_eq!(
        events_with_reason(&env.mc, "rigid", "MirrorOutOfSync")
            .await
            .len(),
        1
    );

    // Allowed again: the change flows (with the suspend).
    allow_everything(&env, "w1").await;
    merge_patch(&env.mc, "rigid", json!({"spec": {"suspend": true}})).await;
    env.wait_mirror("w1", "rigid", "suspended with parallelism 2", |m| {
        is_true(m, "Suspended") && active(m) == 0 && m["spec"]["parallelism"] == json!(2)
    })
    .await;
    // Refused while suspended and idle: nothing runs, so the mirror is created again.
    use_token(&env, "w1", "refusing-again", denying_in_jobs_ns(&["patch"])).await;
    merge_patch(&env.mc, "rigid", json!({"spec": {"backoffLimit": 5}})).await;
    let o = wait_job(&env.mc, "rigid", "recreated as epoch 2", T, |j| {
        annotation(j, "courier.dev/epoch") == Some("2")
    })
    .await;
    assert_eq!(label(&o, "courier.dev/cluster"), Some("w1"));
    assert_eq!(annotation(&o, "courier.dev/redispatches"), Some("0"));
    let m = env
        .wait_mirror("w1", "rigid", "epoch 2 with the new spec", |m| {
            label(m, "courier.dev/epoch") == Some("2")
        })
        .await;
    assert_eq!(m["spec"]["backoffLimit"], json!(5));
    assert_eq!(m["spec"]["parallelism"], json!(2));
    assert_eq!(m["spec"]["suspend"], json!(true));
    let note = wait_event(&env.mc, "rigid", "MirrorRecreated").await;
    assert!(note.contains("epoch 2"), "{note}");
    env.stop().await;
}

/// Point 8. Before the fix, losing the mirror while suspended counted as a re-dispatch and, with a
/// budget of 0, failed the Job with DispatchFailed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspending_never_uses_the_redispatch_budget() {
    let env = Env::with(Setup::cfg(ControllerConfig {
        max_redispatch: 0,
        ..config()
    }))
    .await;
    submit(&env.mc, job("napper", 60)).await;
    for round in 0..2 {
        env.wait_mirror("w1", "napper", "running", |m| active(m) == 1)
            .await;
        merge_patch(&env.mc, "napper", json!({"spec": {"suspend": true}})).await;
        env.wait_mirror("w1", "napper", "suspended", |m| {
            is_true(m, "Suspended") && active(m) == 0
        })
        .await;
        if round == 1 {
            // Lost while suspended: recreated (suspended), not counted.
            jobs(env.worker("w1"), JOBS_NS)
                .delete("napper", &kube::api::DeleteParams::background())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let o = wait_job(&env.mc, "napper", "epoch 2", T, |j| {
                annotation(j, "courier.dev/epoch") == Some("2")
            })
            .await;
            assert_eq!(annotation(&o, "courier.dev/redispatches"), Some("0"));
            let on = label(&o, "courier.dev/cluster")
                .unwrap_or_default()
                .to_string();
            env.wait_mirror(&on, "napper", "epoch 2, suspended", |m| {
                label(m, "courier.dev/epoch") == Some("2") && m["spec"]["suspend"] == json!(true)
            })
            .await;
        }
        merge_patch(&env.mc, "napper", json!({"spec": {"suspend": false}})).await;
    }
    let done = wait_finished(&env.mc, "napper").await;
    assert!(is_true(&done, "Complete"), "{done:#}");
    assert_eq!(annotation(&done, "courier.dev/redispatches"), Some("0"));
    assert!(
        events_with_reason(&env.mc, "napper", "DispatchFailed")
            .await
            .is_empty()
    );
    env.stop().await;
}

/// Point 10. Before the fix finished mirrors stayed on the worker until the origin was deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_mirrors_are_deleted_after_the_ttl() {
    let env = Env::with(Setup::cfg(ControllerConfig {
        finished_mirror_ttl: Some(Duration::from_secs(2)),
        ..config()
    }))
    .await;
    submit(&env.mc, job("tidy", 2)).await;
    let done = wait_finished(&env.mc, "tidy").await;
    assert!(env.mirror("w1", "tidy").await.is_some(), "kept for the TTL");
    eventually("finished mirror deleted", T, || async {
        env.mirror("w1", "tidy").await.is_none().then_some(())
    })
    .await;
    // Where it ran is still on the origin.
    let o = get(&env.mc, "tidy").await.unwrap_or_default();
    assert_eq!(label(&o, "courier.dev/cluster"), Some("w1"));
    assert_eq!(annotation(&o, "courier.dev/epoch"), Some("1"));
    assert_eq!(o["status"], done["status"], "the origin is left as it was");
    let note = wait_event(&env.mc, "tidy", "Dispatched").await;
    assert!(note.contains("w1"), "{note}");
    env.stop().await;
}

/// Point 11: a worker without a Job controller, whose mirror statuses the test writes with a clock
/// an hour ahead. Before the fix `active` stayed 2 while the worker was unreachable, and the origin
/// carried the worker's future times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_stale_gauges_and_no_times_from_the_future() {
    let mut env = Env::start().await;
    let w3 = env.add_registered_api_server(&[("region", "lab")]).await;
    let mut j = job("skewed", LONG);
    j["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": "region=lab"});
    submit(&env.mc, j).await;
    env.wait_mirror(&w3, "skewed", "created", |_| true).await;
    let future = Timestamp::now()
        .checked_add(jiff::SignedDuration::from_hours(1))
        .unwrap_or_else(|e| panic!("{e}"));
    let at = jiff::Timestamp::from_second(future.as_second())
        .unwrap_or(future)
        .to_string();
    let write = |status: Value| write_status(env.worker(&w3), "skewed", status);
    write(json!({"startTime": at, "active": 2, "ready": 1, "terminating": 0})).await;
    wait_job(&env.mc, "skewed", "two active", T, |j| active(j) == 2).await;
    env.worker_sim(&w3)
        .set_faults(kubesim::faults::FaultConfig {
            refuse: true,
            ..Default::default()
        });
    env.worker_sim(&w3).restart();
    let o = wait_job(&env.mc, "skewed", "gauges at zero", T, |j| {
        active(j) == 0 && j["status"]["ready"].as_i64().unwrap_or(0) == 0
    })
    .await;
    assert!(o["status"]["startTime"].is_string(), "startTime stays");
    env.worker_sim(&w3).set_faults(Default::default());
    wait_ready_reason(&env.mc, &w3, "True", "Connected").await;
    write(json!({
        "active": 0, "ready": 0, "succeeded": 1, "completionTime": at,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
             "message": "Reached expected number of succeeded pods", "lastTransitionTime": at,
             "lastProbeTime": at},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached",
             "message": "Reached expected number of succeeded pods", "lastTransitionTime": at,
             "lastProbeTime": at}]
    }))
    .await;
    let done = wait_finished(&env.mc, "skewed").await;
    let now = Timestamp::now();
    let time = |v: &Value| -> Timestamp {
        v.as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not a time: {v}"))
    };
    let start = time(&done["status"]["startTime"]);
    let completion = time(&done["status"]["completionTime"]);
    assert!(start <= now && completion <= now, "{done:#}");
    assert!(start <= completion, "{done:#}");
    for c in done["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        assert!(time(&c["lastTransitionTime"]) <= now, "{c}");
    }
    env.stop().await;
}

/// Point 18. Before the fix Courier unsuspended the queued mirror itself (`suspend: false` from the
/// origin), bypassing the worker's Kueue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_admits_the_mirror_courier_only_suspends_it() {
    let env = Env::start().await;
    let w1 = env.worker_sim("w1");
    w1.record_requests();
    let mut j = job("queued", 60);
    j["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = json!("team-a-queue");
    submit(&env.mc, j).await;
    let m = env.wait_mirror("w1", "queued", "created", |_| true).await;
    assert_eq!(label(&m, "kueue.x-k8s.io/queue-name"), Some("team-a-queue"));
    assert_eq!(m["spec"]["suspend"], json!(true), "created suspended");
    // Queued: the origin says it is not suspended by its user, and does not claim it started.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let o = get(&env.mc, "queued").await.unwrap_or_default();
    assert!(o["status"].get("startTime").is_none(), "{o:#}");
    assert!(!is_true(&o, "Suspended"), "{o:#}");
    let m = env.mirror("w1", "queued").await.unwrap_or_default();
    assert_eq!(m["spec"]["suspend"], json!(true), "Courier never admits it");
    let patches = w1
        .recorded_requests()
        .iter()
        .filter(|r| r.attributes.verb == "patch" && r.attributes.resource == "jobs")
        .count();
    assert_eq!(patches, 0, "no patch while nothing changed");
    // Kueue admits it.
    let admit = |on: bool| {
        let c = env.worker("w1").clone();
        async move {
            jobs(&c, JOBS_NS)
                .patch(
                    "queued",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"suspend": !on}})),
                )
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
    };
    admit(true).await;
    wait_job(&env.mc, "queued", "running", T, |j| active(j) == 1).await;
    // The user suspends the origin: Courier suspends the mirror; resuming is Kueue's call.
    merge_patch(&env.mc, "queued", json!({"spec": {"suspend": true}})).await;
    env.wait_mirror("w1", "queued", "suspended by Courier", |m| {
        m["spec"]["suspend"] == json!(true)
    })
    .await;
    merge_patch(&env.mc, "queued", json!({"spec": {"suspend": false}})).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let m = env.mirror("w1", "queued").await.unwrap_or_default();
    assert_eq!(m["spec"]["suspend"], json!(true), "left to Kueue");
    admit(true).await;
    let done = wait_finished(&env.mc, "queued").await;
    assert!(is_true(&done, "Complete"), "{done:#}");
    env.stop().await;
}
