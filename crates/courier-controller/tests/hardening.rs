//! The management side hardened (issue #17): placement is Courier's decision (§5), a forged cluster
//! name never becomes a metric label (§10), and the controller reads only Secrets labelled for it
//! (§8). Each test was written first and seen failing on the code before its fix.

mod support;

use std::time::Duration;

use courier_api::{LABEL_KUBECONFIG_SECRET, WorkerCluster};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

const T: Duration = Duration::from_secs(20);

/// `job` with Courier's intent written by its submitter.
fn forged(mut j: Value, cluster: &str) -> Value {
    j["metadata"]["labels"]["courier.dev/cluster"] = json!(cluster);
    j["metadata"]["annotations"] =
        json!({"courier.dev/epoch": "1", "courier.dev/redispatches": "0"});
    j
}

/// §5. Before: the controller adopted the submitter's intent, added its finalizer and created the
/// mirror on the paused cluster the submitter named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submitter_cannot_place_a_job_on_a_paused_cluster() {
    let env = Env::start().await;
    let patch = json!({"spec": {"paused": true}});
    Api::<WorkerCluster>::all(env.mc.clone())
        .patch("w2", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("pausing w2: {e}"));
    // The pause is seen before the Job arrives.
    tokio::time::sleep(Duration::from_secs(1)).await;
    submit(&env.mc, forged(job("sneaky", 1), "w2")).await;
    let done = wait_finished(&env.mc, "sneaky").await;
    assert_eq!(label(&done, "courier.dev/cluster"), Some("w1"));
    assert!(env.mirror("w2", "sneaky").await.is_none());
    env.stop().await;
}

/// §10. Before: the submitter's `courier.dev/cluster` value became the `cluster` label of
/// `courier_status_sync_total`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_cluster_name_never_becomes_a_metric_label() {
    let env = Env::start().await;
    let mut j = forged(job("label-bomb", 1), "attacker-chosen-1");
    j["spec"]["suspend"] = json!(true);
    submit(&env.mc, j).await;
    wait_job(&env.mc, "label-bomb", "suspended status written", T, |j| {
        is_true(j, "Suspended")
    })
    .await;
    // The metric counts the write once its answer is back, which may be after the status shows.
    let ok = r#"courier_status_sync_total{cluster="unknown",result="ok"}"#;
    let metrics = eventually("the status sync counted", T, || async {
        Some(env.ctl.metrics_text()).filter(|m| m.contains(ok))
    })
    .await;
    assert!(!metrics.contains("attacker-chosen-1"), "{metrics}");
    env.stop().await;
}

/// §8. Before: the controller listed every Secret in its namespace, so an unlabelled one was read
/// and the cluster turned Ready. Now it is not read, and the condition says how to label it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlabelled_kubeconfig_secret_is_not_read_and_the_condition_names_the_fix() {
    let env = Env::with(Setup {
        register: false,
        ..Default::default()
    })
    .await;
    let w1 = env.worker_sim("w1");
    register(&env.mc, "w1", &w1.kubeconfig(), &[]).await;
    wait_ready_reason(&env.mc, "w1", "True", "Connected").await;

    // A Secret someone created by hand, without the label.
    let secrets: Api<Secret> = Api::namespaced(env.mc.clone(), NS);
    let plain: Secret = serde_json::from_value(json!({
        "metadata": {"name": "w2-by-hand"},
        "stringData": {"kubeconfig": env.worker_sim("w2").kubeconfig()}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    secrets
        .create(&Default::default(), &plain)
        .await
        .unwrap_or_else(|e| panic!("creating the Secret: {e}"));
    create_worker_cluster(&env.mc, "w2", "w2-by-hand", &[]).await;
    let message = wait_ready_reason(&env.mc, "w2", "False", "SecretNotLabelled").await;
    assert!(
        message.contains(&format!(
            "kubectl label secret -n {NS} w2-by-hand {LABEL_KUBECONFIG_SECRET}=true"
        )),
        "{message}"
    );

    // Labelled, it is read (the watch wakes the cluster) and the cluster turns Ready.
    let patch = json!({"metadata": {"labels": {LABEL_KUBECONFIG_SECRET: "true"}}});
    secrets
        .patch("w2-by-hand", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("labelling: {e}"));
    wait_ready_reason(&env.mc, "w2", "True", "Connected").await;

    // The label removed again: the Secret leaves the cache, the cluster is not Ready.
    let patch = json!({"metadata": {"labels": {LABEL_KUBECONFIG_SECRET: null}}});
    secrets
        .patch("w2-by-hand", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("unlabelling: {e}"));
    wait_ready_reason(&env.mc, "w2", "False", "SecretNotLabelled").await;

    // A Secret that does not exist at all stays SecretNotFound.
    create_worker_cluster(&env.mc, "w3", "nowhere", &[]).await;
    let message = wait_ready_reason(&env.mc, "w3", "False", "SecretNotFound").await;
    assert!(message.contains("nowhere"), "{message}");
    env.stop().await;
}
