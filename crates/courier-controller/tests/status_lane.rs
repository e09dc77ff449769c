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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_change_is_copied_while_every_dispatch_slot_waits_on_a_slow_worker() {
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
    // w3 has no Job controller: the test writes its mirror's status.
    let w3 = env.add_registered_api_server(&[("region", "lab")]).await;
    submit(&env.mc, selector(job("watched", LONG), "region=lab")).await;
    env.wait_mirror(&w3, "watched", "created", |_| true).await;

    // w1 and w2 now answer slowly; a backlog of origins is placed there, and both dispatch slots
    // (concurrency 2) end up waiting on a create.
    let slow = FaultConfig {
        latency_ms: u64::try_from(SLOW.as_millis()).unwrap_or(u64::MAX),
        ..Default::default()
    };
    env.worker_sim("w1").set_faults(slow.clone());
    env.worker_sim("w2").set_faults(slow);
    let backlog: Vec<String> = (0..6).map(|i| format!("backlog-{i}")).collect();
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
