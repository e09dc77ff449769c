//! The management chart's hardening (issue #17 §5, §10, §11), rendered for real (see tests/support):
//! - the ValidatingAdmissionPolicy that lets only Courier write its intent on managed Jobs: the chart's
//!   policy and binding are created in a kubesim management server, and every request goes through
//!   kubesim's HTTP API with a real identity (Courier's ServiceAccount as the chart names it, a user, a
//!   cluster admin; the namespace controller and the garbage collector are kubesim's own), so what
//!   passes here is what the chart's expressions decide (#12 §9);
//! - the NetworkPolicy (off by default) in front of the metrics and web view ports;
//! - the WorkerCluster CRD's name-length rule, evaluated with kubesim's CEL (kubesim does not evaluate
//!   CRD validation rules on writes).
//!
//! Checked by breaking it: with the finalizer validation's expression replaced by `true` in
//! charts/courier/templates/admission.yaml, a user's addition and removals of Courier's finalizer
//! (on a live Job, a Job deleted in the foreground, a Job in a terminating namespace) were admitted
//! and both policy tests below failed.
//!
//! Python 3 with helm-python-sdk is required, as for charts.rs.

use std::time::Duration;

use kube::Client;
use kube::api::DeleteParams;
use kubesim::Role;
use kubesim::admission::cel;
use serde_json::{Value, json};

mod support;
use support::apiserver::{
    Server, TEAM, Verdicts, create, jobs, namespaces_api, outcome, patch, patch_status,
};
use support::{Rendered, render, repo};

const NS: &str = "courier-system";

const CREATED: &str = "placement is Courier's decision";
const KEYS: &str = "the courier.dev/ labels and annotations of a Job (but courier.dev/cluster-selector) can only be added, changed or removed by Courier";
const FINALIZER: &str =
    "the finalizer courier.dev/mirror-cleanup can only be added or removed by Courier";
const CONDITIONS: &str =
    "the courier.dev/ status conditions of a Job can only be written by Courier";

fn management(values: Value) -> Rendered {
    render("courier", "courier", NS, &values)
}

/// The username of the ServiceAccount the chart runs Courier as.
fn courier_user(chart: &Rendered) -> String {
    let sa = chart.one("ServiceAccount");
    let name = sa["metadata"]["name"].as_str().unwrap_or_default();
    let ns = sa["metadata"]["namespace"].as_str().unwrap_or(NS);
    format!("system:serviceaccount:{ns}:{name}")
}

/// A management cluster with the chart's policy, and a client per identity.
struct Management {
    server: Server,
    admin: Client,
    courier: Client,
    alice: Client,
}

impl Management {
    async fn start(chart: &Rendered) -> Management {
        let courier = courier_user(chart);
        let users = [("courier", courier.as_str()), ("alice", "alice")];
        let server = Server::start(chart, Role::Management, &users, &[TEAM]).await;
        Management {
            courier: server.client("courier").await,
            alice: server.client("alice").await,
            admin: server.admin.clone(),
            server,
        }
    }
}

/// A Job as Alice submits it; `managed` sets Courier's managedBy.
fn origin(name: &str, managed: bool) -> Value {
    let mut j = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"app": "train"},
                     "annotations": {"courier.dev/cluster-selector": "region=eu"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox:1.36"}]}}},
    });
    if managed {
        j["spec"]["managedBy"] = json!("courier.dev/dispatcher");
    }
    j
}

fn with(mut j: Value, f: impl FnOnce(&mut Value)) -> Value {
    f(&mut j);
    j
}

/// What Courier writes on an origin when it places it.
fn intent(cluster: &str, epoch: &str) -> Value {
    json!({"metadata": {
        "labels": {"courier.dev/cluster": cluster},
        "annotations": {"courier.dev/epoch": epoch, "courier.dev/redispatches": "1"},
        "finalizers": ["courier.dev/mirror-cleanup"],
    }})
}

fn dispatched(message: &str) -> Value {
    json!({"status": {"conditions": [{"type": "courier.dev/Dispatched", "status": "True",
        "reason": "MirrorCreated", "message": message,
        "lastProbeTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
}

/// Alice submits `name`, Courier places it on eu-1 (intent, finalizer, Dispatched condition).
async fn placed(m: &Management, v: &mut Verdicts, name: &str) {
    v.check(
        &format!("a user submits {name}"),
        create(&m.alice, TEAM, origin(name, true)).await,
        None,
    );
    v.check(
        &format!("Courier places {name}"),
        patch(&m.courier, name, intent("eu-1", "2")).await,
        None,
    );
    v.check(
        &format!("Courier marks {name} dispatched"),
        patch_status(&m.courier, name, dispatched("eu-1 epoch 2")).await,
        None,
    );
}

async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) {
    for _ in 0..100 {
        if done().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} did not happen within 5s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_courier_writes_its_intent_on_managed_jobs() {
    let m = Management::start(&management(json!({}))).await;
    let mut v = Verdicts::default();
    let (alice, admin, courier) = (&m.alice, &m.admin, &m.courier);

    // Creating: a user's managed Job carries no intent of Courier's.
    v.check(
        "a user submits a managed Job with a cluster selector",
        create(alice, TEAM, origin("plain", true)).await,
        None,
    );
    for (what, key, set) in [
        ("picks the cluster", "courier.dev/cluster", "labels"),
        ("sets an epoch", "courier.dev/epoch", "annotations"),
        (
            "sets the re-dispatch count",
            "courier.dev/redispatches",
            "annotations",
        ),
        ("sets an epoch label", "courier.dev/epoch", "labels"),
    ] {
        let j = with(origin("forged", true), |j| {
            j["metadata"][set][key] = json!("1")
        });
        v.check(
            &format!("a user {what} at creation"),
            create(alice, TEAM, j.clone()).await,
            Some(CREATED),
        );
        v.check(
            &format!("a cluster admin {what} at creation"),
            create(admin, TEAM, j).await,
            Some(CREATED),
        );
    }
    v.check(
        "a user sets Courier's finalizer at creation",
        create(
            alice,
            TEAM,
            with(origin("forged", true), |j| {
                j["metadata"]["finalizers"] = json!(["courier.dev/mirror-cleanup"])
            }),
        )
        .await,
        Some(CREATED),
    );
    v.check(
        "a Job Courier does not manage may carry anything",
        create(
            alice,
            TEAM,
            with(origin("unmanaged", false), |j| {
                j["metadata"]["labels"]["courier.dev/cluster"] = json!("x");
                j["metadata"]["finalizers"] = json!(["courier.dev/mirror-cleanup"]);
            }),
        )
        .await,
        None,
    );

    // Updating: Courier's record stays Courier's.
    placed(&m, &mut v, "train").await;
    for (what, p) in [
        (
            "moves the Job to another cluster",
            json!({"metadata": {"labels": {"courier.dev/cluster": "paused-1"}}}),
        ),
        (
            "removes the cluster label",
            json!({"metadata": {"labels": {"courier.dev/cluster": null}}}),
        ),
        (
            "resets the re-dispatch budget",
            json!({"metadata": {"annotations": {"courier.dev/redispatches": "0"}}}),
        ),
        (
            "strips the epoch",
            json!({"metadata": {"annotations": {"courier.dev/epoch": null}}}),
        ),
        (
            "adds a courier.dev/ annotation",
            json!({"metadata": {"annotations": {"courier.dev/other": "x"}}}),
        ),
    ] {
        v.check(
            &format!("a user {what}"),
            patch(alice, "train", p.clone()).await,
            Some(KEYS),
        );
        v.check(
            &format!("a cluster admin {what}"),
            patch(admin, "train", p).await,
            Some(KEYS),
        );
    }
    v.check(
        "a user adds the cluster label to an unplaced Job",
        patch(
            alice,
            "plain",
            json!({"metadata": {"labels": {"courier.dev/cluster": "eu-1"}}}),
        )
        .await,
        Some(KEYS),
    );
    v.check(
        "a user adds Courier's finalizer",
        patch(
            alice,
            "plain",
            json!({"metadata": {"finalizers": ["courier.dev/mirror-cleanup"]}}),
        )
        .await,
        Some(FINALIZER),
    );
    v.check(
        "a user removes Courier's finalizer",
        patch(alice, "train", json!({"metadata": {"finalizers": null}})).await,
        Some(FINALIZER),
    );
    v.check(
        "a user forges the Dispatched marker through status",
        patch_status(alice, "train", dispatched("eu-2 epoch 1")).await,
        Some(CONDITIONS),
    );
    v.check(
        "a user marks an unplaced Job dispatched",
        patch_status(alice, "plain", dispatched("eu-2 epoch 1")).await,
        Some(CONDITIONS),
    );
    v.check(
        "a user rewrites the cluster label through the status subresource",
        patch_status(
            alice,
            "train",
            json!({"metadata": {"labels": {"courier.dev/cluster": "paused-1"}}}),
        )
        .await,
        Some(KEYS),
    );

    // What keeps working.
    v.check(
        "a user changes their own labels and the selector",
        patch(
            alice,
            "train",
            json!({"metadata": {
            "labels": {"app": "v2"},
            "annotations": {"courier.dev/cluster-selector": "region=us", "note": "mine"}}}),
        )
        .await,
        None,
    );
    v.check(
        "a user suspends the Job",
        patch(alice, "train", json!({"spec": {"suspend": true}})).await,
        None,
    );
    v.check(
        "a user gives a managed Job their own finalizer",
        patch(
            alice,
            "plain",
            json!({"metadata": {"finalizers": ["example.com/keep"]}}),
        )
        .await,
        None,
    );
    v.check(
        "a user removes their own finalizer",
        patch(alice, "plain", json!({"metadata": {"finalizers": null}})).await,
        None,
    );
    v.check(
        "Courier re-places the Job",
        patch(courier, "train", intent("eu-2", "3")).await,
        None,
    );
    v.check(
        "Courier updates its condition",
        patch_status(courier, "train", dispatched("eu-2 epoch 3")).await,
        None,
    );
    v.check(
        "Courier copies the mirror's status",
        patch_status(courier, "train", json!({"status": {"active": 1}})).await,
        None,
    );
    v.check(
        "Courier releases the Job",
        patch(
            courier,
            "train",
            json!({"metadata": {"labels": {"courier.dev/cluster": null},
                "annotations": {"courier.dev/epoch": null, "courier.dev/redispatches": null}}}),
        )
        .await,
        None,
    );
    v.check(
        "a user deletes a managed Job",
        outcome(
            jobs(alice, TEAM)
                .delete("plain", &DeleteParams::background())
                .await,
        ),
        None,
    );

    // A placed Job deleted in the foreground: the garbage collector's finalizer writes go through, the
    // user cannot drop Courier's finalizer, Courier can.
    placed(&m, &mut v, "fg").await;
    v.check(
        "a user deletes a placed Job in the foreground",
        outcome(
            jobs(alice, TEAM)
                .delete("fg", &DeleteParams::foreground())
                .await,
        ),
        None,
    );
    eventually(
        "the garbage collector's removal of foregroundDeletion",
        async || {
            let j = jobs(admin, TEAM).get_opt("fg").await.ok().flatten();
            j.is_some_and(|j| {
                j.metadata.finalizers == Some(vec!["courier.dev/mirror-cleanup".into()])
            })
        },
    )
    .await;
    v.check(
        "a user removes Courier's finalizer from a deleted Job",
        patch(alice, "fg", json!({"metadata": {"finalizers": []}})).await,
        Some(FINALIZER),
    );
    v.check(
        "Courier removes its finalizer from a deleted Job",
        patch(courier, "fg", json!({"metadata": {"finalizers": null}})).await,
        None,
    );
    v.assert_all_right();
    eventually("the Job's removal", async || {
        matches!(jobs(admin, TEAM).get_opt("fg").await, Ok(None))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_namespace_waits_for_courier_and_completes() {
    let m = Management::start(&management(json!({}))).await;
    let mut v = Verdicts::default();
    placed(&m, &mut v, "train").await;
    v.check(
        "a user submits another managed Job",
        create(&m.alice, TEAM, origin("queued", true)).await,
        None,
    );
    v.check(
        "a cluster admin deletes the namespace",
        outcome(
            namespaces_api(&m.admin)
                .delete(TEAM, &DeleteParams::default())
                .await,
        ),
        None,
    );
    // kubesim's namespace controller deletes the Jobs; the placed one waits for Courier's finalizer.
    eventually(
        "the namespace controller's deletion of the Jobs",
        async || {
            let placed = jobs(&m.admin, TEAM).get_opt("train").await.ok().flatten();
            let queued = jobs(&m.admin, TEAM).get_opt("queued").await;
            placed.is_some_and(|j| j.metadata.deletion_timestamp.is_some())
                && matches!(queued, Ok(None))
        },
    )
    .await;
    v.check(
        "a user removes Courier's finalizer in a terminating namespace",
        patch(&m.alice, "train", json!({"metadata": {"finalizers": null}})).await,
        Some(FINALIZER),
    );
    v.check(
        "Courier removes its finalizer in a terminating namespace",
        patch(
            &m.courier,
            "train",
            json!({"metadata": {"finalizers": null}}),
        )
        .await,
        None,
    );
    v.assert_all_right();
    eventually("the namespace's removal", async || {
        matches!(namespaces_api(&m.admin).get_opt(TEAM).await, Ok(None))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exemption_follows_the_releases_account_and_can_be_turned_off() {
    let chart = render("courier", "dispatch", "batch-control", &json!({}));
    let account = courier_user(&chart);
    assert_eq!(
        account,
        "system:serviceaccount:batch-control:dispatch-courier"
    );
    let m = Management::start(&chart).await;
    m.server.sim.add_token(
        "default-name",
        "system:serviceaccount:courier-system:courier",
        kubesim::kinds::ssar::RuleSet::allow_all(),
    );
    let default_name = m.server.client("default-name").await;
    let mut v = Verdicts::default();
    v.check(
        "a user submits a managed Job",
        create(&m.alice, TEAM, origin("train", true)).await,
        None,
    );
    v.check(
        "the default account name places it in another release",
        patch(&default_name, "train", intent("eu-1", "1")).await,
        Some(KEYS),
    );
    v.check(
        &format!("{account} places it"),
        patch(&m.courier, "train", intent("eu-1", "1")).await,
        None,
    );
    v.assert_all_right();

    let off = management(json!({"protectIntent": false}));
    assert!(off.of_kind("ValidatingAdmissionPolicy").is_empty());
    assert!(off.of_kind("ValidatingAdmissionPolicyBinding").is_empty());
}
fn ports(rule: &Value) -> Vec<Value> {
    rule["ports"].as_array().cloned().unwrap_or_default()
}

#[test]
fn the_network_policy_admits_only_the_listed_peers_on_the_served_ports() {
    assert!(
        management(json!({})).of_kind("NetworkPolicy").is_empty(),
        "off by default"
    );
    let r = management(json!({"networkPolicy": {"enabled": true}}));
    let np = r.one("NetworkPolicy");
    let pod_labels = &r.one("Deployment")["spec"]["template"]["metadata"]["labels"];
    for (k, v) in np["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
    {
        assert_eq!(
            &pod_labels[k], v,
            "the policy selects the controller's pods"
        );
    }
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
    let rules = np["spec"]["ingress"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(
        ports(&rules[0]),
        [json!({"port": "metrics", "protocol": "TCP"})]
    );
    assert_eq!(rules[0]["from"], json!([{"podSelector": {}}]));

    let monitoring = json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}});
    let r = management(json!({
        "ui": {"enabled": true},
        "networkPolicy": {"enabled": true, "metricsFrom": [monitoring], "uiFrom": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}
    }));
    let rules = r.one("NetworkPolicy")["spec"]["ingress"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert_eq!(rules[0]["from"], json!([monitoring]));
    assert_eq!(ports(&rules[1]), [json!({"port": "ui", "protocol": "TCP"})]);
    assert_eq!(
        rules[1]["from"],
        json!([{"ipBlock": {"cidr": "10.0.0.0/8"}}])
    );
    // The named ports exist on the container.
    let c = &r.one("Deployment")["spec"]["template"]["spec"]["containers"][0];
    for name in ["metrics", "ui"] {
        assert!(
            c["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["name"] == name),
            "container port {name}"
        );
    }
    assert!(
        support::try_render(
            "courier",
            "courier",
            NS,
            &json!({"networkPolicy": {"enabled": true, "from": []}})
        )
        .is_err(),
        "the schema refuses unknown networkPolicy keys"
    );
}

#[test]
fn worker_cluster_names_longer_than_a_label_value_are_refused_by_the_crd() {
    let path = repo().join("charts/courier/crds/workercluster.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let crd: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let rules = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rules.len(), 1, "{rules:?}");
    let rule = rules[0]["rule"].as_str().unwrap_or_default();
    let program = cel::compile(rule).unwrap_or_else(|e| panic!("{rule}: {e}"));
    let admitted = |name: &str| {
        let mut ctx = cel::Context::default();
        ctx.add_variable_from_value("self", cel::to_cel(&json!({"metadata": {"name": name}})));
        cel::eval_bool(&program, &ctx)
    };
    assert_eq!(admitted(&"a".repeat(63)), Ok(true));
    assert_eq!(admitted(&"a".repeat(64)), Ok(false));
    let message = rules[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("at most 63"), "{message}");
}
