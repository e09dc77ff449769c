//! End to end with the management chart's admission policy (#17 §5, #12 §9): the rendered
//! ValidatingAdmissionPolicy and binding are loaded into the management kubesim, the controller runs
//! as the chart's ServiceAccount, and a user submits Jobs. The API server itself refuses the user's
//! forged intent, while Courier places, runs and cleans up the user's Job as usual (its writes of the
//! cluster label, epoch, finalizer and Dispatched condition pass the policy).
//!
//! The chart is rendered by Helm like the chart tests do (Python 3 with helm-python-sdk), through
//! the courier crate's test support, which is shared rather than copied.
//!
//! Checked by breaking the chart's policy: with the creation rule's expression replaced by `true`,
//! the forged Job was admitted and the test failed; with the `not-courier` match condition naming
//! another account, Courier's own writes were refused and the Job never finished.

mod support;

#[path = "../../courier/tests/support/mod.rs"]
mod charts;

use std::time::Duration;

use courier_api::{ANNOTATION_REDISPATCHES, FINALIZER, LABEL_CLUSTER};
use courier_controller::Controller;
use kube::api::DeleteParams;
use kubesim::Role;
use kubesim::kinds::ssar::RuleSet;
use serde_json::{Value, json};
use support::*;
use tokio_util::sync::CancellationToken;

const CREATED: &str = "placement is Courier's decision";
const KEYS: &str = "can only be added, changed or removed by Courier";

/// `Ok` when admitted, else the API error's code and message.
async fn submit_as(c: &kube::Client, j: Value) -> charts::apiserver::Outcome {
    charts::apiserver::create(c, JOBS_NS, j).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_refuses_a_users_forged_intent_and_courier_still_runs_the_job() {
    init_tracing();
    let chart = charts::render("courier", "courier", NS, &json!({}));
    let sa = chart.one("ServiceAccount");
    let account = format!(
        "system:serviceaccount:{NS}:{}",
        sa["metadata"]["name"].as_str().unwrap_or_default()
    );

    let mgmt = sim(Role::Management, "mgmt").await;
    let w1 = sim(Role::Worker, "w1").await;
    let admin = client_for(&mgmt.kubeconfig()).await;
    install_crd(&admin).await;
    ensure_namespace(&admin, NS).await;
    ensure_namespace(&admin, JOBS_NS).await;
    // Courier never creates namespaces on workers by default: the Jobs' namespace exists there.
    ensure_namespace(&client_for(&w1.kubeconfig()).await, JOBS_NS).await;
    charts::apiserver::install_policy(&admin, &chart).await;
    register(&admin, "w1", &w1.kubeconfig(), &[("region", "eu")]).await;
    mgmt.add_token("courier", &account, RuleSet::allow_all());
    mgmt.add_token("alice", "alice", RuleSet::allow_all());
    let courier = charts::apiserver::client(&mgmt, "courier").await;
    let alice = charts::apiserver::client(&mgmt, "alice").await;

    let controller = Controller::with_tuning(courier, config(), tuning())
        .unwrap_or_else(|e| panic!("controller: {e}"));
    let ctl = controller.handle();
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));
    tokio::time::timeout(Duration::from_secs(15), ctl.ready())
        .await
        .unwrap_or_else(|_| panic!("controller not ready"));
    wait_ready_reason(&admin, "w1", "True", "Connected").await;

    // The forged placement never reaches the controller.
    let mut forged = job("forged", 1);
    forged["metadata"]["labels"][LABEL_CLUSTER] = json!("w2");
    let refused = submit_as(&alice, forged).await;
    assert!(
        matches!(&refused, Err((403, m)) if m.contains(CREATED)),
        "the API server should refuse a user's courier.dev/cluster label at creation: {refused:?}"
    );

    // The user's own Job is placed and run by Courier, through the policy.
    assert_eq!(submit_as(&alice, job("train", 1)).await, Ok(()));
    let done = wait_finished(&admin, "train").await;
    assert_eq!(label(&done, LABEL_CLUSTER), Some("w1"));
    assert!(
        is_true(&done, "courier.dev/Dispatched"),
        "Courier's condition was written: {done:#}"
    );
    assert_eq!(done["metadata"]["finalizers"], json!([FINALIZER]));

    // Courier's record stays Courier's.
    for p in [
        json!({"metadata": {"labels": {LABEL_CLUSTER: "w2"}}}),
        json!({"metadata": {"annotations": {ANNOTATION_REDISPATCHES: "7"}}}),
    ] {
        let got = charts::apiserver::outcome(
            jobs(&alice, JOBS_NS)
                .patch(
                    "train",
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&p),
                )
                .await,
        );
        assert!(
            matches!(&got, Err((403, m)) if m.contains(KEYS)),
            "{p}: {got:?}"
        );
    }

    // The user deletes the Job: Courier deletes the mirror and drops its finalizer.
    jobs(&alice, JOBS_NS)
        .delete("train", &DeleteParams::background())
        .await
        .unwrap_or_else(|e| panic!("deleting train: {e}"));
    let w1_admin = client_for(&w1.kubeconfig()).await;
    eventually(
        "the origin and its mirror gone",
        Duration::from_secs(20),
        || async {
            (get(&admin, "train").await.is_none() && get(&w1_admin, "train").await.is_none())
                .then_some(())
        },
    )
    .await;

    stop.cancel();
    match tokio::time::timeout(Duration::from_secs(15), task).await {
        Ok(Ok(Ok(()))) => {}
        other => panic!("controller did not stop cleanly: {other:?}"),
    }
    mgmt.shutdown();
    w1.shutdown();
}
