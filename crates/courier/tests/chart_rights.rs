//! The two charts' rights at work: the controller dispatches a Job and cleans it up with nothing but
//! the rights the management and worker charts grant (their rendered rules loaded into kubesim's
//! authorizer). Split from charts.rs, which checks the rendered rules against the API-call table.
//!
//! Python 3 with helm-python-sdk is required (`.ci/run` installs it); without it these tests fail.

use std::time::Duration;

use courier_api::{WorkerCluster, WorkerClusterSpec};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kubesim::kinds::ssar::{Rule, RuleSet};
use serde_json::{Value, json};

mod support;
use support::{Rendered, granted, render};

const NS: &str = "courier-system";

fn management_default() -> Rendered {
    render("courier", "courier", NS, &json!({}))
}

fn worker_default() -> Rendered {
    render("courier-worker", "courier-worker", NS, &json!({}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_crd_applies_to_kubesim_and_serves_worker_clusters() {
    let r = management_default();
    let (_, text) = r
        .crds
        .first()
        .unwrap_or_else(|| panic!("the chart has no CRD"));
    let crd: Value = serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("CRD YAML: {e}"));
    let sim = kubesim::Sim::start(kubesim::SimOptions {
        role: kubesim::Role::Management,
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| panic!("kubesim: {e}"));
    let client = client_for(&sim.kubeconfig()).await;

    let crd_ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &crd_ar);
    let obj: DynamicObject = serde_json::from_value(crd).unwrap_or_else(|e| panic!("{e}"));
    crds.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("kubesim refused the chart's CRD: {e}"));

    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    let mut wc = WorkerCluster::new("eu-1", WorkerClusterSpec::new("eu-1-kubeconfig"));
    wc.metadata.labels = Some([("region".to_string(), "eu".to_string())].into());
    let mut created = None;
    for _ in 0..100 {
        match wcs.create(&PostParams::default(), &wc).await {
            Ok(c) => {
                created = Some(c);
                break;
            }
            // The CR endpoint appears once the CRD is established.
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let created = created.unwrap_or_else(|| panic!("no WorkerCluster could be created"));
    assert_eq!(created.spec.kubeconfig_secret_ref.name, "eu-1-kubeconfig");
    let back = wcs
        .get("eu-1")
        .await
        .unwrap_or_else(|e| panic!("reading eu-1 back: {e}"));
    assert_eq!(back.spec, created.spec);
    // The schema is enforced: a negative weight is refused.
    let mut bad = serde_json::to_value(WorkerCluster::new(
        "bad",
        WorkerClusterSpec::new("bad-kubeconfig"),
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    bad["spec"]["weight"] = json!(-1);
    let wc_ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("courier.dev", "v1alpha1", "WorkerCluster"),
        "workerclusters",
    );
    let dyn_wcs: Api<DynamicObject> = Api::all_with(client, &wc_ar);
    let bad: DynamicObject = serde_json::from_value(bad).unwrap_or_else(|e| panic!("{e}"));
    match dyn_wcs.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(s)) if s.code == 422 => {}
        other => panic!("a negative weight must be refused with 422, got {other:?}"),
    }
    sim.shutdown();
}

/// What Kubernetes grants every authenticated user (ClusterRole system:basic-user).
fn basic_user() -> Rule {
    Rule::new(
        &["create"],
        &["authorization.k8s.io"],
        &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
    )
    .named("system:basic-user")
}

/// `system:basic-user`'s other half: SelfSubjectReviews (who am I), open to everyone too.
fn basic_user_whoami() -> Rule {
    Rule::new(
        &["create"],
        &["authentication.k8s.io"],
        &["selfsubjectreviews"],
    )
    .named("system:basic-user")
}

fn rule_set(r: &Rendered, ns: &str, sa: &str) -> RuleSet {
    let mut allow: Vec<Rule> = granted(r, ns, sa)
        .into_iter()
        .map(|(rule, _)| rule)
        .collect();
    allow.push(basic_user());
    allow.push(basic_user_whoami());
    RuleSet {
        allow,
        deny: Vec::new(),
    }
}

async fn client_for(kubeconfig: &str) -> kube::Client {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig)
        .unwrap_or_else(|e| panic!("kubeconfig: {e}"));
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("config: {e}"));
    kube::Client::try_from(cfg).unwrap_or_else(|e| panic!("client: {e}"))
}

/// Polls `f` for up to 20 s; `None` on timeout.
async fn poll<T, F, Fut>(mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..400 {
        if let Some(v) = f().await {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Requests of `user` that `sim`'s authorizer refused.
fn refused(sim: &kubesim::Sim, user: &str) -> Vec<String> {
    let mut out: Vec<String> = sim
        .recorded_requests()
        .into_iter()
        .filter(|r| r.user == user && !r.allowed)
        .map(|r| {
            let a = r.attributes;
            format!(
                "{}: {} {}/{} (group {:?}, namespace {:?})",
                sim.name, a.verb, a.resource, a.subresource, a.group, a.namespace
            )
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The controller runs a Job to completion and cleans it up with nothing but the rights the two
/// charts grant (their rendered rules loaded into kubesim's authorizer), and none of its requests is
/// ever refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_rights_are_enough_to_dispatch_a_job() {
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    let mgmt_user = format!("system:serviceaccount:{NS}:courier");
    let worker_user = format!("system:serviceaccount:{NS}:courier-dispatcher");
    let start = |role, name: &str| {
        kubesim::Sim::start(kubesim::SimOptions {
            role,
            name: name.into(),
            speed: 20.0,
            ..Default::default()
        })
    };
    let mgmt = start(kubesim::Role::Management, "mgmt")
        .await
        .unwrap_or_else(|e| panic!("kubesim: {e}"));
    let w1 = start(kubesim::Role::Worker, "w1")
        .await
        .unwrap_or_else(|e| panic!("kubesim: {e}"));
    mgmt.add_token(
        "ctl",
        &mgmt_user,
        rule_set(&management_default(), NS, "courier"),
    );
    w1.add_token(
        "ctl-w1",
        &worker_user,
        rule_set(&worker_default(), NS, "courier-dispatcher"),
    );
    mgmt.record_requests();
    w1.record_requests();

    // The admin does what the chart and `courier cluster add` do: CRD, namespaces, Secret, WorkerCluster.
    let admin = client_for(&mgmt.kubeconfig()).await;
    let r = management_default();
    let (_, crd_text) = r
        .crds
        .first()
        .unwrap_or_else(|| panic!("the chart has no CRD"));
    let crd: Value = serde_saphyr::from_str(crd_text).unwrap_or_else(|e| panic!("CRD: {e}"));
    let crd_ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let crd: DynamicObject = serde_json::from_value(crd).unwrap_or_else(|e| panic!("{e}"));
    Api::<DynamicObject>::all_with(admin.clone(), &crd_ar)
        .create(&PostParams::default(), &crd)
        .await
        .unwrap_or_else(|e| panic!("CRD: {e}"));
    for ns in [NS, "team-a"] {
        let obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("namespace {ns}: {e}"));
    }
    // On the worker: the chart's namespace, and the Job's (Courier does not create it by default).
    let w1_admin = client_for(&w1.kubeconfig()).await;
    for ns in [NS, "team-a"] {
        let obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<Namespace>::all(w1_admin.clone())
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("namespace {ns} on w1: {e}"));
    }
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": "w1-kubeconfig", "namespace": NS,
            "labels": {(courier_api::names::LABEL_KUBECONFIG_SECRET): "true"},
        },
        "stringData": {"kubeconfig": w1.kubeconfig_for("ctl-w1")},
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    Api::<Secret>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("Secret: {e}"));
    let wcs: Api<WorkerCluster> = Api::all(admin.clone());
    poll(|| async {
        let wc = WorkerCluster::new("w1", WorkerClusterSpec::new("w1-kubeconfig"));
        wcs.create(&PostParams::default(), &wc).await.ok()
    })
    .await
    .unwrap_or_else(|| panic!("the WorkerCluster CRD never served"));

    let cfg = courier_controller::ControllerConfig {
        namespace: NS.into(),
        leader_elect: true,
        identity: "chart-rights-test".into(),
        gc_interval: Duration::from_secs(1),
        ..Default::default()
    };
    let tuning = courier_controller::Tuning {
        probe_interval: Duration::from_millis(500),
        request_timeout: Duration::from_secs(2),
        backoff_min: Duration::from_millis(100),
        backoff_max: Duration::from_secs(1),
        retry_max: Duration::from_secs(1),
        retry_interval: Duration::from_secs(1),
        short_retry: Duration::from_millis(200),
        lease_duration: Duration::from_secs(3),
        lease_renew_deadline: Duration::from_secs(2),
        lease_retry_period: Duration::from_millis(300),
        ..Default::default()
    };
    let controller = courier_controller::Controller::with_tuning(
        client_for(&mgmt.kubeconfig_for("ctl")).await,
        cfg,
        tuning,
    )
    .unwrap_or_else(|e| panic!("controller: {e}"));
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));
    // A wait that times out names the requests the charts' rules refused and the worker's condition.
    let stuck = |what: &'static str| {
        let (mgmt, w1, wcs) = (&mgmt, &w1, &wcs);
        let (mgmt_user, worker_user) = (&mgmt_user, &worker_user);
        async move {
            let mut why = refused(mgmt, mgmt_user);
            why.extend(refused(w1, worker_user));
            let ready = wcs
                .get("w1")
                .await
                .ok()
                .and_then(|wc| wc.status?.ready_condition().cloned());
            panic!(
                "timed out waiting for {what}; WorkerCluster w1 Ready: {ready:?}; requests the \
                 charts' RBAC refused:\n  {}",
                why.join("\n  ")
            )
        }
    };

    let jobs_ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("batch", "v1", "Job"), "jobs");
    let jobs: Api<DynamicObject> = Api::namespaced_with(admin.clone(), "team-a", &jobs_ar);
    let job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "charted", "namespace": "team-a"},
        "spec": {
            "managedBy": "courier.dev/dispatcher",
            "template": {
                "metadata": {"annotations": {"sim/run-seconds": "2"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}
            }
        }
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    jobs.create(&PostParams::default(), &job)
        .await
        .unwrap_or_else(|e| panic!("submitting: {e}"));
    let completed = poll(|| async {
        let j = jobs.get("charted").await.ok()?;
        let complete = j.data["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Complete" && c["status"] == "True");
        complete.then_some(())
    })
    .await;
    if completed.is_none() {
        stuck("the Job to complete through w1").await;
    }
    let ready = wcs
        .get("w1")
        .await
        .ok()
        .and_then(|wc| wc.status?.ready_condition().map(|c| c.status.clone()));
    assert_eq!(
        ready.as_deref(),
        Some("True"),
        "WorkerCluster status written"
    );
    jobs.delete("charted", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("deleting: {e}"));
    let worker_jobs: Api<DynamicObject> =
        Api::namespaced_with(client_for(&w1.kubeconfig()).await, "team-a", &jobs_ar);
    let deleted = poll(|| async {
        let gone = jobs.get_opt("charted").await.ok()?.is_none()
            && worker_jobs.get_opt("charted").await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    if deleted.is_none() {
        stuck("the origin and its mirror to be deleted").await;
    }
    stop.cancel();
    match tokio::time::timeout(Duration::from_secs(15), task).await {
        Ok(Ok(Ok(()))) => {}
        other => panic!("controller did not stop cleanly: {other:?}"),
    }

    for (sim, user) in [(&mgmt, &mgmt_user), (&w1, &worker_user)] {
        assert!(
            sim.recorded_requests().iter().any(|r| &r.user == user),
            "{user} sent nothing to {}",
            sim.name
        );
    }
    let mut why = refused(&mgmt, &mgmt_user);
    why.extend(refused(&w1, &worker_user));
    assert!(
        why.is_empty(),
        "the charts' RBAC refused requests the controller made:\n  {}",
        why.join("\n  ")
    );
    mgmt.shutdown();
    w1.shutdown();
}
