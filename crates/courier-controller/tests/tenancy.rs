//! Tenancy on workers (issue #17): a Job's namespace must exist on a worker unless the controller
//! runs with `--create-worker-namespaces`, and then it is created with Pod Security labels. Each
//! test was written first and seen failing (noted on each).

mod support;

use std::time::Duration;

use courier_controller::{ControllerConfig, PodSecurityLevel, WorkerNamespaces};
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

const T: Duration = Duration::from_secs(20);

fn on_w1(mut j: Value) -> Value {
    j["metadata"]["annotations"] = json!({ "courier.dev/cluster-selector": "region=eu" });
    j
}

async fn namespace(c: &kube::Client, name: &str) -> Option<Namespace> {
    Api::<Namespace>::all(c.clone())
        .get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading namespace {name}: {e}"))
}

/// Deletes the Job namespace on a worker and waits until it is gone.
async fn remove_jobs_namespace(worker: &kube::Client) {
    Api::<Namespace>::all(worker.clone())
        .delete(JOBS_NS, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting namespace {JOBS_NS}: {e}"));
    eventually("the namespace gone", T, || async {
        namespace(worker, JOBS_NS).await.is_none().then_some(())
    })
    .await;
}

/// §1. Before: w1 got the namespace created, unlabelled, and the Job ran there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_without_the_namespace_is_skipped_and_the_origin_says_why() {
    let env = Env::start().await;
    let w1 = env.worker("w1");
    remove_jobs_namespace(w1).await;

    // w2 has it: the Job runs there, with a warning naming w1, the namespace and the fix.
    // w1 is tried first (equal load: the name decides).
    submit(&env.mc, job("anywhere", 1)).await;
    let done = wait_finished(&env.mc, "anywhere").await;
    assert!(is_true(&done, "Complete"), "{done:#}");
    assert_eq!(label(&done, "courier.dev/cluster"), Some("w2"));
    let note = wait_event(&env.mc, "anywhere", "NamespaceMissing").await;
    assert!(
        note.contains("namespace team-a does not exist on WorkerCluster w1")
            && note.contains("--create-worker-namespaces"),
        "{note}"
    );
    assert!(
        namespace(w1, JOBS_NS).await.is_none(),
        "Courier created the namespace on w1"
    );

    // Only w1 may take it: the origin waits, saying why.
    submit(&env.mc, on_w1(job("eu-only", 1))).await;
    let o = wait_job(&env.mc, "eu-only", "Placed=False", T, |j| {
        condition_srm(j, "courier.dev/Placed").is_some_and(|(s, _, _)| s == "False")
    })
    .await;
    let (_, reason, message) = condition_srm(&o, "courier.dev/Placed").unwrap_or_default();
    assert_eq!(reason, "NamespaceMissing", "{message}");
    assert!(
        message.contains("namespace team-a does not exist on WorkerCluster w1"),
        "{message}"
    );
    // The worker's admin creates it: the Job runs there (retried with backoff).
    ensure_namespace(w1, JOBS_NS).await;
    let done = wait_finished(&env.mc, "eu-only").await;
    assert_eq!(label(&done, "courier.dev/cluster"), Some("w1"));
    env.stop().await;
}

/// §1, a namespace being deleted counts as missing, flag or not. Before: the 403 from the
/// namespace lifecycle was a plain `MirrorRejected`, and with the flag the create was retried on
/// the terminating namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminating_namespace_counts_as_missing() {
    let env = Env::with(Setup::cfg(ControllerConfig {
        worker_namespaces: WorkerNamespaces::Create {
            pod_security: PodSecurityLevel::Restricted,
        },
        ..config()
    }))
    .await;
    let w1 = env.worker("w1");
    // A finalizer of someone else's keeps the namespace Terminating.
    Api::<Namespace>::all(w1.clone())
        .patch(
            JOBS_NS,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    Api::<Namespace>::all(w1.clone())
        .delete(JOBS_NS, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    submit(&env.mc, on_w1(job("held", 1))).await;
    let o = wait_job(&env.mc, "held", "Placed=False", T, |j| {
        condition_srm(j, "courier.dev/Placed").is_some_and(|(s, _, _)| s == "False")
    })
    .await;
    let (_, reason, message) = condition_srm(&o, "courier.dev/Placed").unwrap_or_default();
    assert_eq!(reason, "NamespaceMissing", "{message}");
    assert!(message.contains("being deleted"), "{message}");
    let note = wait_event(&env.mc, "held", "NamespaceMissing").await;
    assert!(note.contains("WorkerCluster w1"), "{note}");
    env.stop().await;
}

/// §1 with `--create-worker-namespaces`: the namespace is created with the configured Pod Security
/// level. Before: it was created without labels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_flag_the_namespace_is_created_with_pod_security_labels() {
    let env = Env::with(Setup::cfg(ControllerConfig {
        worker_namespaces: WorkerNamespaces::Create {
            pod_security: PodSecurityLevel::Baseline,
        },
        ..config()
    }))
    .await;
    let w1 = env.worker("w1");
    remove_jobs_namespace(w1).await;
    submit(&env.mc, on_w1(job("created", 1))).await;
    let done = wait_finished(&env.mc, "created").await;
    assert_eq!(label(&done, "courier.dev/cluster"), Some("w1"));
    let ns = namespace(w1, JOBS_NS)
        .await
        .unwrap_or_else(|| panic!("no namespace {JOBS_NS} on w1"));
    let labels = ns.metadata.labels.unwrap_or_default();
    for mode in ["enforce", "audit", "warn"] {
        let key = format!("pod-security.kubernetes.io/{mode}");
        assert_eq!(
            labels.get(&key).map(String::as_str),
            Some("baseline"),
            "{labels:?}"
        );
        assert_eq!(
            labels.get(&format!("{key}-version")).map(String::as_str),
            Some("latest"),
            "{labels:?}"
        );
    }
    env.stop().await;
}

/// The UID of a cluster's `kube-system` namespace (a management cluster's identity).
async fn kube_system_uid(c: &kube::Client) -> String {
    namespace(c, "kube-system")
        .await
        .and_then(|n| n.metadata.uid)
        .unwrap_or_else(|| panic!("kube-system has no uid"))
}

/// §7. Two management clusters with the same origin id share w1: the second one finds the id
/// claimed, keeps w1 out of use (`OriginIdInUse`) and deletes nothing there. Before: its garbage
/// collection deleted the first one's running mirror as an orphan of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_management_cluster_with_the_same_origin_id_touches_nothing() {
    let env = Env::start().await;
    submit(&env.mc, on_w1(job("first", 600))).await;
    let mirror = env
        .wait_mirror("w1", "first", "running", |m| {
            m["status"]["active"] == json!(1)
        })
        .await;
    let first_uid = kube_system_uid(&env.mc).await;

    // Management cluster B: same origin id, the same worker registered with the same credentials.
    let mgmt_b = sim(kubesim::Role::Management, "mgmt-b").await;
    let mc_b = client_for(&mgmt_b.kubeconfig()).await;
    install_crd(&mc_b).await;
    ensure_namespace(&mc_b, NS).await;
    ensure_namespace(&mc_b, JOBS_NS).await;
    register(
        &mc_b,
        "w1",
        &env.worker_sim("w1").kubeconfig(),
        &[("region", "eu")],
    )
    .await;
    let controller = courier_controller::Controller::with_tuning(mc_b.clone(), config(), tuning())
        .unwrap_or_else(|e| panic!("controller: {e}"));
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));
    let message = wait_ready_reason(&mc_b, "w1", "False", "OriginIdInUse").await;
    assert!(
        message.contains(&first_uid) && message.contains("--origin"),
        "names the other management cluster and the fix: {message}"
    );
    // B's Jobs do not go there either.
    submit(&mc_b, on_w1(job("second", 1))).await;
    // Several garbage-collection intervals (2 s) later the first one's mirror is untouched.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let now = env
        .mirror("w1", "first")
        .await
        .unwrap_or_else(|| panic!("the first management cluster's mirror was deleted"));
    assert_eq!(now["metadata"]["uid"], mirror["metadata"]["uid"]);
    assert!(
        now["metadata"].get("deletionTimestamp").is_none(),
        "{now:#}"
    );
    assert!(env.mirror("w1", "second").await.is_none());
    let b_job = get(&mc_b, "second").await.unwrap_or_default();
    assert_eq!(label(&b_job, "courier.dev/cluster"), None, "{b_job:#}");
    // A still holds w1.
    assert!(
        ready_condition(&env.mc, "w1")
            .await
            .is_some_and(|(s, _, _)| s == "True")
    );
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(15), task).await;
    mgmt_b.shutdown();
    env.stop().await;
}

/// §2. A WorkerCluster's `spec.namespaceSelector` keeps Jobs of other management namespaces off it;
/// the origin says why, and relabelling the namespace lets the Job go there. Before: the field did
/// not exist and w1 took the Job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_takes_only_the_namespaces_its_selector_selects() {
    let env = Env::start().await;
    Api::<courier_api::WorkerCluster>::all(env.mc.clone())
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"namespaceSelector": {"matchLabels": {"tenant": "b"}}}})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    submit(&env.mc, on_w1(job("picky", 1))).await;
    let o = wait_job(&env.mc, "picky", "Placed=False", T, |j| {
        condition_srm(j, "courier.dev/Placed").is_some_and(|(s, _, _)| s == "False")
    })
    .await;
    let (_, reason, message) = condition_srm(&o, "courier.dev/Placed").unwrap_or_default();
    assert_eq!(reason, "NoEligibleCluster", "{message}");
    assert!(
        message.contains("not taking Jobs from this namespace: w1"),
        "{message}"
    );
    // The management namespace gets the label: the Job goes to w1.
    Api::<Namespace>::all(env.mc.clone())
        .patch(
            JOBS_NS,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tenant": "b"}}})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let done = wait_finished(&env.mc, "picky").await;
    assert_eq!(label(&done, "courier.dev/cluster"), Some("w1"));
    env.stop().await;
}
