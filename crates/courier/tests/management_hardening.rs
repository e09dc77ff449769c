//! The management chart's hardening (issue #17 §5, §10, §11), rendered for real (see tests/support):
//! - the ValidatingAdmissionPolicy that lets only Courier write its intent on managed Jobs, its exact
//!   expressions evaluated by a CEL interpreter (kubesim does not evaluate policies yet);
//! - the NetworkPolicy (off by default) in front of the metrics and web view ports;
//! - the WorkerCluster CRD's name-length rule, evaluated the same way (kubesim does not evaluate
//!   CRD validation rules either).

use serde_json::{Value, json};

mod support;
use support::vap::{Req, admit, compile, policy, to_cel};
use support::{Rendered, render, repo};

const NS: &str = "courier-system";
const COURIER: &str = "system:serviceaccount:courier-system:courier";
const ALICE: &str = "alice";

fn management(values: Value) -> Rendered {
    render("courier", "courier", NS, &values)
}

/// A Job as Alice submits it; `managed` sets Courier's managedBy.
fn origin(managed: bool) -> Value {
    let mut j = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a", "labels": {"app": "train"},
                     "annotations": {"courier.dev/cluster-selector": "region=eu"}},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
        "status": {},
    });
    if managed {
        j["spec"]["managedBy"] = json!("courier.dev/dispatcher");
    }
    j
}

/// `origin(true)` as Courier has placed it.
fn placed() -> Value {
    let mut j = origin(true);
    j["metadata"]["labels"]["courier.dev/cluster"] = json!("eu-1");
    j["metadata"]["annotations"]["courier.dev/epoch"] = json!("2");
    j["metadata"]["annotations"]["courier.dev/redispatches"] = json!("1");
    j["metadata"]["finalizers"] = json!(["courier.dev/mirror-cleanup"]);
    j["status"]["conditions"] = json!([{"type": "courier.dev/Dispatched", "status": "True",
        "reason": "MirrorCreated", "message": "eu-1 epoch 2"}]);
    j
}

fn edit(mut j: Value, f: impl FnOnce(&mut Value)) -> Value {
    f(&mut j);
    j
}

#[test]
fn only_courier_writes_its_intent_on_managed_jobs() {
    let p = policy(&management(json!({})));
    let create = Req::create;
    let update = Req::update;
    let status = |user, old: &Value, new: Value| Req {
        subresource: "status",
        ..update(user, old, new)
    };
    let placed = placed();
    #[rustfmt::skip]
    let cases: Vec<(&str, Req, bool)> = vec![
        ("a user submits a managed Job with a cluster selector", create(ALICE, origin(true)), true),
        ("a user picks the cluster at creation", create(ALICE, edit(origin(true), |j| j["metadata"]["labels"]["courier.dev/cluster"] = json!("paused-1"))), false),
        ("a user sets an epoch at creation", create(ALICE, edit(origin(true), |j| j["metadata"]["annotations"]["courier.dev/epoch"] = json!("9"))), false),
        ("a user sets Courier's finalizer at creation", create(ALICE, edit(origin(true), |j| j["metadata"]["finalizers"] = json!(["courier.dev/mirror-cleanup"]))), false),
        ("a Job Courier does not manage may carry anything", create(ALICE, edit(origin(false), |j| j["metadata"]["labels"]["courier.dev/cluster"] = json!("x"))), true),
        ("Courier writes its intent", update(COURIER, &origin(true), placed.clone()), true),
        ("a user resets the re-dispatch budget", update(ALICE, &placed, edit(placed.clone(), |j| j["metadata"]["annotations"]["courier.dev/redispatches"] = json!("0"))), false),
        ("a user moves the Job to another cluster", update(ALICE, &placed, edit(placed.clone(), |j| j["metadata"]["labels"]["courier.dev/cluster"] = json!("paused-1"))), false),
        ("a user strips the epoch", update(ALICE, &placed, edit(placed.clone(), |j| { j["metadata"]["annotations"].as_object_mut().map(|a| a.remove("courier.dev/epoch")); })), false),
        ("a user adds a courier.dev/ label", update(ALICE, &origin(true), edit(origin(true), |j| j["metadata"]["labels"]["courier.dev/cluster"] = json!("eu-1"))), false),
        ("a user removes Courier's finalizer", update(ALICE, &placed, edit(placed.clone(), |j| j["metadata"]["finalizers"] = json!([]))), false),
        ("a user changes their own labels and the selector", update(ALICE, &placed, edit(placed.clone(), |j| { j["metadata"]["labels"]["app"] = json!("v2"); j["metadata"]["annotations"]["courier.dev/cluster-selector"] = json!("region=us"); })), true),
        ("a user suspends the Job", update(ALICE, &placed, edit(placed.clone(), |j| j["spec"]["suspend"] = json!(true))), true),
        ("a user forges the Dispatched marker through status", status(ALICE, &placed, edit(placed.clone(), |j| j["status"]["conditions"][0]["message"] = json!("eu-2 epoch 1"))), false),
        ("Courier copies status", status(COURIER, &placed, edit(placed.clone(), |j| j["status"]["active"] = json!(1))), true),
        ("a user deletes the Job (not guarded)", Req { operation: "DELETE", ..update(ALICE, &placed, placed.clone()) }, true),
    ];
    let mut wrong = Vec::new();
    for (what, req, allowed) in &cases {
        let got = admit(&p, req);
        if got.is_ok() != *allowed {
            wrong.push(format!("{what}: expected allowed={allowed}, got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let msg = admit(&p, &cases[1].1).err().unwrap_or_default();
    assert!(msg.contains("placement is Courier's decision"), "{msg}");

    // The exemption follows the release's ServiceAccount, and the policy can be turned off.
    let other = render("courier", "dispatch", "batch-control", &json!({}));
    let p = policy(&other);
    let sa = "system:serviceaccount:batch-control:dispatch-courier";
    assert!(admit(&p, &update(sa, &origin(true), placed.clone())).is_ok());
    assert!(admit(&p, &update(COURIER, &origin(true), placed.clone())).is_err());
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
    let program = compile(rules[0]["rule"].as_str().unwrap_or_default());
    let admitted = |name: &str| {
        let mut ctx = cel::Context::default();
        ctx.add_variable_from_value("self", to_cel(&json!({"metadata": {"name": name}})));
        program.execute(&ctx)
    };
    assert!(matches!(
        admitted(&"a".repeat(63)),
        Ok(cel::Value::Bool(true))
    ));
    assert!(matches!(
        admitted(&"a".repeat(64)),
        Ok(cel::Value::Bool(false))
    ));
    let message = rules[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("at most 63"), "{message}");
}
