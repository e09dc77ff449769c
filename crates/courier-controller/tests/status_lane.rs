//! Status copies under a dispatch backlog (issue #13, status propagation p99): a mirror's status
//! change is copied to its origin while every dispatch slot is held by a slow call, because the
//! queue keeps workers beyond `concurrency` for the urgent lane (`queue::WorkQueue::limit_normal`).
//!
//! Seen failing with as many workers as `concurrency` (the code before): the copy waited for a
//! slow create to return, so a backlog mirror had been created before the origin showed the
//! status.

mod support;

use std::time::Duration;

use kubesim::faults::FaultConfig;
use serde_json::{Value, json};
use support::*;

const LONG: u32 = 600;
const T: Duration = Duration::from_secs(20);
/// How long w1 and w2 hold every request: far longer than a status copy takes on a loaded machine,
/// shorter than the request timeout below (the creates succeed, late).
const SLOW: Duration = Duration::from_secs(5);

fn selector(mut j: Value, s: &str) -> Value {
    j["metadata"]["annotations"] = json!({ "courier.dev/cluster-selector": s });
    j
}

/// Mirrors created on w1 or w2 so far, as the controller counts them (after the create answered).
fn backlog_creates(env: &Env) -> Vec<String> {
    env.ctl
        .metrics_text()
        .lines()
        .filter(|l| l.starts_with("courier_dispatch_total{"))
        .filter(|l| l.contains("cluster=\"w1\"") || l.contains("cluster=\"w2\""))
        .filter(|l| !l.ends_with(" 0"))
        .map(str::to_string)
        .collect()
}

/// The controller with two dispatch slots (concurrency 2) and a request timeout longer than the
/// slow creates, and a third worker labelled `region=lab` without a Job controller: the test
/// writes its mirrors' statuses. Returns the environment and that worker's name.
async fn two_slots_and_a_lab_worker() -> (Env, String) {
    let mut cfg = config();
    cfg.concurrency = 2;
    let mut tuning = tuning();
    tuning.request_timeout = Duration::from_secs(15);
    let mut env = Env::with(Setup {
        cfg,
        tuning,
        ..Default::default()
    })
    .await;
    let w3 = env.add_registered_api_server(&[("region", "lab")]).await;
    (env, w3)
}

/// Makes w1 and w2 answer `latency` late and queues `backlog` origins there, until both dispatch
/// slots (concurrency 2) are waiting on a create to one of them.
async fn hold_every_dispatch_slot(env: &Env, latency: Duration, backlog: usize) {
    let slow = FaultConfig {
        latency_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
        ..Default::default()
    };
    env.worker_sim("w1").set_faults(slow.clone());
    env.worker_sim("w2").set_faults(slow);
    let backlog: Vec<String> = (0..backlog).map(|i| format!("backlog-{i}")).collect();
    for name in &backlog {
        submit(&env.mc, selector(job(name, 1), "region in (eu,us)")).await;
    }
    eventually(
        "two backlog origins placed (their creates under way)",
        T,
        || async {
            let mut placed = 0;
            for name in &backlog {
                if get(&env.mc, name)
                    .await
                    .is_some_and(|o| label(&o, "courier.dev/cluster").is_some())
                {
                    placed += 1;
                }
            }
            (placed >= 2).then_some(())
        },
    )
    .await;
    // Let the reconciles that wrote the intents reach their creates.
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_change_is_copied_while_every_dispatch_slot_waits_on_a_slow_worker() {
    let (env, w3) = two_slots_and_a_lab_worker().await;
    submit(&env.mc, selector(job("watched", LONG), "region=lab")).await;
    env.wait_mirror(&w3, "watched", "created", |_| true).await;

    // w1 and w2 now answer slowly; a backlog of origins is placed there, and both dispatch slots
    // (concurrency 2) end up waiting on a create.
    hold_every_dispatch_slot(&env, SLOW, 6).await;

    write_status(env.worker(&w3), "watched", json!({"active": 1, "ready": 1})).await;
    wait_job(&env.mc, "watched", "the copied status", T, |j| {
        j["status"]["active"] == json!(1)
    })
    .await;
    let created = backlog_creates(&env);
    assert!(
        created.is_empty(),
        "the status copy waited for a slow create to return: {created:?}"
    );

    env.worker_sim("w1").set_faults(FaultConfig::default());
    env.worker_sim("w2").set_faults(FaultConfig::default());
    env.stop().await;
}

/// When the management server answered the status writes of the origins `names` (recorded requests).
fn status_writes_answered(mgmt: &kubesim::Sim, names: &[&str]) -> Vec<jiff::Timestamp> {
    mgmt.recorded_requests()
        .into_iter()
        .filter(|r| {
            r.attributes.verb == "patch"
                && r.attributes.resource == "jobs"
                && r.attributes.subresource == "status"
                && names.contains(&r.attributes.name.as_str())
        })
        .filter_map(|r| r.time.parse().ok())
        .collect()
}

/// Status copies have workers of their own, as many as dispatch's (`runtime::urgent_only_workers`):
/// with every dispatch slot held by a slow create and the management server answering every
/// request `MGMT_LATENCY` late, two mirrors' status changes are written to their origins side by
/// side, not one after the other.
///
/// Seen failing with one urgent-only worker (the code before): the second status write was
/// answered a whole `MGMT_LATENCY` after the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_copies_run_side_by_side_while_every_dispatch_slot_waits() {
    const MGMT_LATENCY: Duration = Duration::from_secs(3);
    let (env, w3) = two_slots_and_a_lab_worker().await;
    let watched = ["watched-a", "watched-b"];
    for name in watched {
        submit(&env.mc, selector(job(name, LONG), "region=lab")).await;
        env.wait_mirror(&w3, name, "created", |_| true).await;
        // The write that follows the create (the Dispatched marker) is done before anything is slow.
        wait_job(&env.mc, name, "the Dispatched marker", T, |j| {
            is_true(j, "courier.dev/Dispatched")
        })
        .await;
    }

    // Both dispatch slots (concurrency 2) end up waiting on a slow create on w1 or w2.
    hold_every_dispatch_slot(&env, Duration::from_secs(10), 4).await;

    env.mgmt.record_requests();
    env.mgmt.set_faults(FaultConfig {
        latency_ms: u64::try_from(MGMT_LATENCY.as_millis()).unwrap_or(u64::MAX),
        ..Default::default()
    });
    for name in watched {
        write_status(env.worker(&w3), name, json!({"active": 1, "ready": 1})).await;
    }
    let answered = eventually("both status writes answered", 3 * T, || async {
        let at = status_writes_answered(&env.mgmt, &watched);
        (at.len() >= 2).then_some(at)
    })
    .await;
    let apart = answered[1].duration_since(answered[0]).unsigned_abs();
    assert!(
        apart < MGMT_LATENCY / 2,
        "the second status write was answered {apart:?} after the first: the copies ran one after the other"
    );

    env.mgmt.set_faults(FaultConfig::default());
    env.worker_sim("w1").set_faults(FaultConfig::default());
    env.worker_sim("w2").set_faults(FaultConfig::default());
    env.stop().await;
}
