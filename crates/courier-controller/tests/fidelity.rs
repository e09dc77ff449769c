//! Two blind spots of the end-to-end promise tests (issue #12 §11, docs/testing.md), closed in
//! process:
//! - the status comparison of `e2e dispatch::success` cannot tell a time copied from the mirror
//!   from one taken from `now` (the copy lands within the mirror's second): here the mirror's times
//!   lie hours in the past and are compared exactly;
//! - `e2e dispatch::delete_origin_mid_run` passed with the current mirror's DELETE made a chain of
//!   its own, because the controller performs chains one after the other and that DELETE succeeded:
//!   here the worker fails it, and the finalizer must stay until the mirror is gone.

mod support;

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kubesim::faults::FaultConfig;
use serde_json::{Value, json};
use support::*;

const LONG: u32 = 600; // simulated seconds: 30 s of real time at speed 20
const T: Duration = Duration::from_secs(20);

/// A whole-second time `hours` before now, as the API server writes it.
fn hours_ago(hours: i64) -> String {
    let t = Timestamp::now()
        .checked_sub(SignedDuration::from_hours(hours))
        .unwrap_or_else(|e| panic!("{e}"));
    Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

/// Status fidelity (the Job API contract: the origin shows the run's own times): a mirror that
/// started two hours ago and finished one hour ago leaves exactly those times on the origin, in
/// `startTime`, `completionTime` and both finishing conditions. Seen failing with the terminal
/// condition's time taken from `now` (`status::terminal_condition`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_origin_carries_the_mirrors_own_times() {
    let mut env = Env::start().await;
    // A worker without a Job controller: the test writes the mirror's status.
    let w3 = env.add_registered_api_server(&[("region", "lab")]).await;
    let mut j = job("old-times", LONG);
    j["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": "region=lab"});
    submit(&env.mc, j).await;
    env.wait_mirror(&w3, "old-times", "created", |_| true).await;
    let (started, finished) = (hours_ago(2), hours_ago(1));
    let write = |status: Value| write_status(env.worker(&w3), "old-times", status);
    write(json!({"startTime": started, "active": 1, "ready": 1, "terminating": 0})).await;
    wait_job(&env.mc, "old-times", "running", T, |j| {
        j["status"]["active"] == json!(1)
    })
    .await;
    let done = |type_: &str| {
        json!({"type": type_, "status": "True", "reason": "CompletionsReached",
               "message": "Reached expected number of succeeded pods",
               "lastTransitionTime": finished, "lastProbeTime": finished})
    };
    write(json!({
        "active": 0, "ready": 0, "succeeded": 1, "completionTime": finished,
        "conditions": [done("SuccessCriteriaMet"), done("Complete")]
    }))
    .await;
    let origin = wait_finished(&env.mc, "old-times").await;
    let status = &origin["status"];
    assert_eq!(status["startTime"], json!(started), "{origin:#}");
    assert_eq!(status["completionTime"], json!(finished), "{origin:#}");
    for type_ in ["SuccessCriteriaMet", "Complete"] {
        let c = condition(&origin, type_).unwrap_or_else(|| panic!("no {type_}: {origin:#}"));
        assert_eq!(c["status"], "True", "{c}");
        assert_eq!(
            c["lastTransitionTime"],
            json!(finished),
            "{type_} must carry the mirror's time, not the copy's: {c}"
        );
    }
    env.stop().await;
}

/// Deletion: "the current mirror's delete precedes the finalizer removal". While the worker
/// answers every call with 500, the origin keeps its finalizer (it is not released within a few
/// seconds; the worker-lost timeout is 300 s); once the worker answers, the mirror is deleted and
/// only then the origin goes. Seen failing with that delete made a chain of its own
/// (`reconcile::paths::delete_everything` pushing it with `side`): the origin was released at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_finalizer_waits_for_a_mirror_delete_the_worker_fails() {
    let env = Env::start().await;
    submit(&env.mc, job("doomed", LONG)).await;
    env.wait_mirror("w1", "doomed", "running", |m| {
        m["status"]["active"] == json!(1)
    })
    .await;
    env.worker_sim("w1").set_faults(FaultConfig {
        error_rate: 1.0,
        ..Default::default()
    });
    delete(&env.mc, "doomed").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let held = get(&env.mc, "doomed").await;
    assert!(
        held.is_some(),
        "the origin's finalizer was released while w1 failed every DELETE of its mirror"
    );
    env.worker_sim("w1").set_faults(FaultConfig::default());
    eventually("origin gone", T, || async {
        get(&env.mc, "doomed").await.is_none().then_some(())
    })
    .await;
    assert!(
        env.mirror("w1", "doomed").await.is_none(),
        "the origin is gone but its mirror is still on w1"
    );
    env.stop().await;
}
