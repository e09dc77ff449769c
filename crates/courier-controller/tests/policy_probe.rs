//! Issue #17 §12: the probe reads whether the worker chart's admission policy and its binding exist
//! on each worker, and the WorkerCluster says so in a `PolicyInstalled` condition naming the fix.
//! (Seen failing first: before the probe read them, no such condition was written.)

mod support;

use std::time::Duration;

use courier_api::WorkerCluster;
use courier_api::reasons::CONDITION_POLICY_INSTALLED;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use support::*;

/// (status, reason, message) of `PolicyInstalled` on WorkerCluster `name`.
async fn policy_condition(c: &Client, name: &str) -> Option<(String, String, String)> {
    let wc = Api::<WorkerCluster>::all(c.clone()).get(name).await.ok()?;
    let cond = wc
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == CONDITION_POLICY_INSTALLED)?;
    Some((cond.status, cond.reason, cond.message))
}

async fn wait_policy(c: &Client, name: &str, status: &str, reason: &str) -> String {
    eventually(
        &format!("WorkerCluster {name} PolicyInstalled={status} ({reason})"),
        Duration::from_secs(15),
        || async {
            let (s, r, m) = policy_condition(c, name).await?;
            (s == status && r == reason).then_some(m)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_without_the_chart_policy_is_flagged_naming_the_fix() {
    let env = Env::start().await;
    let message = wait_policy(&env.mc, "w1", "False", "WorkerPolicyMissing").await;
    assert!(
        message.contains("courier-worker-mirror-ownership")
            && message.contains("policy.enabled=true"),
        "{message}"
    );
    // A missing policy is a warning, not an outage.
    wait_ready_reason(&env.mc, "w1", "True", "Connected").await;

    let w1 = &env.wcs[0];
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": {"name": "courier-worker-mirror-ownership"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["jobs"]}]},
            "validations": [{"expression": "true"}]
        }
    }))
    .expect("policy");
    Api::<ValidatingAdmissionPolicy>::all(w1.clone())
        .create(&PostParams::default(), &policy)
        .await
        .expect("policy created");
    // The policy alone, unbound, enforces nothing.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (status, ..) = policy_condition(&env.mc, "w1").await.unwrap_or_default();
    assert_eq!(status, "False", "a policy without its binding");
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": "courier-worker-mirror-ownership"},
        "spec": {"policyName": "courier-worker-mirror-ownership", "validationActions": ["Deny"]}
    }))
    .expect("binding");
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(w1.clone());
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding created");
    wait_policy(&env.mc, "w1", "True", "WorkerPolicyInstalled").await;
    // w2 still has none.
    wait_policy(&env.mc, "w2", "False", "WorkerPolicyMissing").await;

    bindings
        .delete("courier-worker-mirror-ownership", &DeleteParams::default())
        .await
        .expect("binding deleted");
    wait_policy(&env.mc, "w1", "False", "WorkerPolicyMissing").await;
    env.stop().await;
}
