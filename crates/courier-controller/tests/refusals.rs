//! Placement when workers say no (issue #11): a worker that refuses the mirror or stops answering
//! as the Job is placed, a stale mirror that cannot be deleted, a cache that lags the origin, and a
//! name conflict that goes away. Each test was written first and seen failing on the code before
//! its fix (the failure it showed is noted on each).

mod support;

use std::time::Duration;

use kube::api::{DeleteParams, PostParams};
use kubesim::api::{Part, PatchKind, WriteOpts};
use kubesim::faults::FaultConfig;
use serde_json::{Value, json};
use support::*;

const LONG: u32 = 600;
const T: Duration = Duration::from_secs(20);

fn selector(mut j: Value, s: &str) -> Value {
    j["metadata"]["annotations"] = json!({ "courier.dev/cluster-selector": s });
    j
}

/// Points 4 and 17. Before the fix the create was retried on w1 forever and the Job never ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_refuses_the_mirror_is_skipped_with_a_warning() {
    let env = Env::with(Setup {
        rules: [Some(denying_in_jobs_ns(&["create"])), None],
        ..Default::default()
    })
    .await;
    let w1 = env.worker_sim("w1");
    w1.record_requests();
    submit(&env.mc, job("quota", 2)).await;
    let done = wait_finished(&env.mc, "quota").await;
    assert!(is_true(&done, "Complete"), "{done:#}");
    assert_eq!(label(&done, "courier.dev/cluster"), Some("w2"));
    assert_eq!(annotation(&done, "courier.dev/epoch"), Some("2"));
    assert_eq!(annotation(&done, "courier.dev/redispatches"), Some("0"));
    let note = wait_event(&env.mc, "quota", "MirrorRejected").await;
    assert!(
        note.contains("w1") && note.contains(r#"cannot create resource "jobs""#),
        "the server's message is quoted: {note}"
    );
    assert!(
        condition(&done, "courier.dev/Placed").is_none(),
        "no Placed condition on a Job that was placed at once"
    );

    // Only w1 may take it: the origin says why it waits, and w1 is retried with backoff.
    submit(&env.mc, selector(job("eu-only", 2), "region=eu")).await;
    let o = wait_job(&env.mc, "eu-only", "Placed=False", T, |j| {
        condition_srm(j, "courier.dev/Placed").is_some_and(|(s, _, _)| s == "False")
    })
    .await;
    let (_, reason, message) = condition_srm(&o, "courier.dev/Placed").unwrap_or_default();
    assert_eq!(reason, "MirrorRejected");
    assert!(message.contains("w1"), "{message}");
    let creates = || {
        w1.recorded_requests()
            .iter()
            .filter(|r| r.attributes.verb == "create" && r.attributes.resource == "jobs")
            .filter(|r| r.attributes.name == "eu-only" || r.attributes.name.is_empty())
            .count()
    };
    let before = creates();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let retried = creates() - before;
    assert!(
        retried <= 3,
        "{retried} creates in 4 s: not backing off (1 s doubling)"
    );
    // The refusal is lifted: the Job runs there, and the condition says so.
    allow_everything(&env, "w1").await;
    let done = wait_finished(&env.mc, "eu-only").await;
    assert_eq!(label(&done, "courier.dev/cluster"), Some("w1"));
    let (status, reason, _) = condition_srm(&done, "courier.dev/Placed").unwrap_or_default();
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Placed"));
    env.stop().await;
}

/// Point 5. Before the fix the Job stayed bound to w1 until the worker-lost timeout (300 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_stops_answering_at_placement_loses_the_job_within_seconds() {
    let env = Env::start().await;
    // Every answer from w1 now takes longer than the request timeout; the create is still carried
    // out, late, so a mirror may exist there that Courier never heard of.
    env.worker_sim("w1").set_faults(FaultConfig {
        latency_ms: 3000,
        ..Default::default()
    });
    submit(&env.mc, job("hurried", 2)).await;
    let o = wait_job(&env.mc, "hurried", "moved to w2", T, |j| {
        label(j, "courier.dev/cluster") == Some("w2")
    })
    .await;
    assert_eq!(annotation(&o, "courier.dev/epoch"), Some("2"));
    let note = wait_event(&env.mc, "hurried", "MirrorRejected").await;
    assert!(note.contains("w1"), "{note}");
    let done = wait_finished(&env.mc, "hurried").await;
    assert!(is_true(&done, "Complete"));
    // w1 answers again: the epoch-1 mirror it created late is stale and goes.
    env.worker_sim("w1").set_faults(FaultConfig::default());
    eventually("no mirror left on w1", Duration::from_secs(30), || async {
        env.mirror("w1", "hurried").await.is_none().then_some(())
    })
    .await;
    env.stop().await;
}

/// Point 7. Before the fix the failed delete of the stale mirror stopped the reconcile: no status
/// was copied from the current mirror and the finalizer was never removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_mirror_that_cannot_be_deleted_blocks_nothing_else() {
    let env = Env::with(Setup {
        rules: [None, Some(denying_in_jobs_ns(&["delete"]))],
        ..Default::default()
    })
    .await;
    submit(&env.mc, selector(job("blocked", 40), "region=eu")).await;
    let m = env
        .wait_mirror("w1", "blocked", "running", |m| {
            m["status"]["active"] == json!(1)
        })
        .await;
    // The same mirror on w2 (as a crash during an old re-dispatch would leave it): stale there.
    ensure_namespace(env.worker("w2"), JOBS_NS).await;
    let stale = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "blocked", "namespace": JOBS_NS, "labels": m["metadata"]["labels"]},
        "spec": {"template": m["spec"]["template"].clone(), "backoffLimit": 0}
    });
    let mut stale = stale;
    if let Some(l) = stale["spec"]["template"]["metadata"]["labels"].as_object_mut() {
        l.retain(|k, _| !k.contains("controller-uid") && !k.contains("job-name"));
    }
    jobs(env.worker("w2"), JOBS_NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(stale).unwrap_or_else(|e| panic!("{e}")),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let done = wait_finished(&env.mc, "blocked").await;
    assert!(is_true(&done, "Complete"), "{done:#}");
    assert!(
        env.mirror("w2", "blocked").await.is_some(),
        "w2 refuses the delete"
    );
    delete(&env.mc, "blocked").await;
    eventually("origin gone", T, || async {
        get(&env.mc, "blocked").await.is_none().then_some(())
    })
    .await;
    env.stop().await;
}

/// Point 12. Before the fix the controller deleted the newer mirror on w2 as stale on the strength
/// of its cache, which had not seen the origin's new placement yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_is_never_deleted_on_a_lagging_cache() {
    let env = Env::start().await;
    submit(&env.mc, job("moved", LONG)).await;
    let m1 = env
        .wait_mirror("w1", "moved", "running", |m| {
            m["status"]["active"] == json!(1)
        })
        .await;
    // The management cluster stops answering (the controller's cache freezes), and meanwhile the
    // origin is placed on w2 as epoch 2 and its mirror created there (another replica's work).
    env.mgmt.set_faults(FaultConfig {
        blackhole: true,
        ..Default::default()
    });
    env.mgmt.drop_watches();
    let api = env.mgmt.api();
    let served = api
        .registry
        .get("batch", "v1", "jobs")
        .unwrap_or_else(|| panic!("jobs served"));
    let patch = json!({"metadata": {"labels": {"courier.dev/cluster": "w2"},
                                    "annotations": {"courier.dev/epoch": "2"}}});
    api.patch(
        &served,
        JOBS_NS,
        "moved",
        PatchKind::Merge,
        patch.to_string().as_bytes(),
        Part::Main,
        &WriteOpts {
            manager: "other-replica".into(),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    ensure_namespace(env.worker("w2"), JOBS_NS).await;
    let mut labels = m1["metadata"]["labels"].clone();
    labels["courier.dev/epoch"] = json!("2");
    let mut template = m1["spec"]["template"].clone();
    if let Some(l) = template["metadata"]["labels"].as_object_mut() {
        l.retain(|k, _| !k.contains("controller-uid") && !k.contains("job-name"));
    }
    let m2 = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "moved", "namespace": JOBS_NS, "labels": labels},
        "spec": {"template": template, "backoffLimit": 0}
    });
    let m2 = jobs(env.worker("w2"), JOBS_NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(m2).unwrap_or_else(|e| panic!("{e}")),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_secs(4)).await;
    let still = env.mirror("w2", "moved").await.unwrap_or_default();
    assert_eq!(
        still["metadata"]["uid"].as_str(),
        m2.metadata.uid.as_deref(),
        "the newer mirror was deleted"
    );
    assert!(still["metadata"].get("deletionTimestamp").is_none());
    // The management cluster answers again: epoch 2 on w2 is current, epoch 1 on w1 is stale.
    env.mgmt.set_faults(FaultConfig::default());
    eventually("the epoch-1 mirror on w1 deleted", T, || async {
        env.mirror("w1", "moved").await.is_none().then_some(())
    })
    .await;
    let still = env.mirror("w2", "moved").await.unwrap_or_default();
    assert_eq!(
        still["metadata"]["uid"].as_str(),
        m2.metadata.uid.as_deref()
    );
    env.stop().await;
}

/// Point 14. Before the fix the foreign verdict was remembered until a restart: the Job never ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_conflict_is_checked_again_once_the_other_job_is_gone() {
    let env = Env::start().await;
    create_foreign_job(env.worker("w1"), "clash").await;
    submit(&env.mc, selector(job("clash", 2), "region=eu")).await;
    wait_event(&env.mc, "clash", "MirrorConflict").await;
    jobs(env.worker("w1"), JOBS_NS)
        .delete("clash", &DeleteParams::background())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let done = wait_finished(&env.mc, "clash").await;
    assert!(is_true(&done, "Complete"), "{done:#}");
    assert_eq!(label(&done, "courier.dev/cluster"), Some("w1"));
    env.stop().await;
}

/// Point 4 with a real refusal: a ResourceQuota on w1 allows no Job in the namespace, so w1 answers
/// the mirror's create with the API server's `exceeded quota` 403; the Event quotes it, and the Job
/// runs on w1 once the quota is raised. (Seen failing with kubesim's quota check switched off: the
/// mirror was created and no Event came.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_over_its_quota_refuses_the_mirror_with_the_servers_message() {
    let env = Env::start().await;
    ensure_namespace(env.worker("w1"), JOBS_NS).await;
    let quotas: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        env.worker("w1").clone(),
        JOBS_NS,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("", "v1", "ResourceQuota"),
            "resourcequotas",
        ),
    );
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota",
                       "metadata": {"name": "no-jobs", "namespace": JOBS_NS},
                       "spec": {"hard": {"count/jobs.batch": "0"}}});
    quotas
        .create(
            &PostParams::default(),
            &serde_json::from_value(quota).unwrap_or_else(|e| panic!("{e}")),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    submit(&env.mc, selector(job("counted", 2), "region=eu")).await;
    let note = wait_event(&env.mc, "counted", "MirrorRejected").await;
    assert!(
        note.contains("w1")
            && note.contains(
                "exceeded quota: no-jobs, requested: count/jobs.batch=1, used: count/jobs.batch=0, limited: count/jobs.batch=0"
            ),
        "the server's message is quoted: {note}"
    );
    assert!(env.mirror("w1", "counted").await.is_none());
    let raise = json!({"spec": {"hard": {"count/jobs.batch": "5"}}});
    quotas
        .patch(
            "no-jobs",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(raise),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let done = wait_finished(&env.mc, "counted").await;
    assert!(is_true(&done, "Complete"), "{done:#}");
    assert_eq!(label(&done, "courier.dev/cluster"), Some("w1"));
    env.stop().await;
}

/// The worker chart's policy (charts/courier-worker, rendered by Helm through charts/render.py) on
/// w1, with the controller acting there as the chart's ServiceAccount: a privileged origin is
/// refused by the policy itself and the Warning Event quotes the policy's message (#17 §3). Needs
/// Python 3 with helm-python-sdk, like the chart tests. (Seen failing with the no-privileged rule
/// removed from admission.yaml: the mirror was created.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_charts_policy_refuses_a_privileged_mirror() {
    let env = Env::start().await;
    let w1 = env.worker("w1");
    for (kind, plural) in [
        ("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
        (
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        ),
    ] {
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
            w1.clone(),
            &kube::api::ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
                plural,
            ),
        );
        let doc = worker_chart_document(kind);
        api.create(
            &PostParams::default(),
            &serde_json::from_value(doc).unwrap_or_else(|e| panic!("{e}")),
        )
        .await
        .unwrap_or_else(|e| panic!("kubesim refused the chart's {kind}: {e}"));
    }
    // The worker chart's release namespace: the ServiceAccount's, where the origin id is claimed.
    ensure_namespace(w1, NS).await;
    use_token(
        &env,
        "w1",
        "system:serviceaccount:courier-system:courier-dispatcher",
        kubesim::kinds::ssar::RuleSet::allow_all(),
    )
    .await;
    let mut privileged = selector(job("escalate", 2), "region=eu");
    privileged["spec"]["template"]["spec"]["containers"][0]["securityContext"] =
        json!({"privileged": true});
    submit(&env.mc, privileged).await;
    let note = wait_event(&env.mc, "escalate", "MirrorRejected").await;
    assert!(
        note.contains("w1")
            && note.contains("ValidatingAdmissionPolicy 'courier-worker-mirror-ownership' with binding 'courier-worker-mirror-ownership' denied request")
            && note.contains("rule no-privileged of the courier-worker chart, lifted by listing the namespace in policy.privilegedNamespaces"),
        "the policy's message is quoted: {note}"
    );
    assert!(env.mirror("w1", "escalate").await.is_none());
    // An unprivileged Job goes through the same policy as Courier's own mirror.
    submit(&env.mc, selector(job("plain", 2), "region=eu")).await;
    let done = wait_finished(&env.mc, "plain").await;
    assert!(is_true(&done, "Complete"), "{done:#}");
    env.stop().await;
}

/// One document of the worker chart rendered with default values (release courier-worker in
/// courier-system), by the Helm library through charts/render.py.
fn worker_chart_document(kind: &str) -> Value {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new("python3")
        .arg(repo.join("charts/render.py"))
        .arg(repo.join("charts/courier-worker"))
        .args(["courier-worker", "courier-system", "{}"])
        .output()
        .unwrap_or_else(|e| panic!("python3 (with helm-python-sdk) is needed: {e}"));
    assert!(
        out.status.success(),
        "charts/render.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let text = rendered["templates"]["courier-worker/templates/admission.yaml"]
        .as_str()
        .unwrap_or_else(|| panic!("no admission.yaml in {rendered}"));
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("admission.yaml: {e}"));
    docs.into_iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in admission.yaml"))
}
