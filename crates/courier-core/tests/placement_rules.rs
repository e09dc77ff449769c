//! Placement rules a user can see, written from docs/placement.md and the WorkerCluster API
//! reference rather than from the code (issue #12 §11: these kill mutants of
//! `courier_core::placement` that `cargo mutants` found surviving the unit tests; docs/testing.md
//! lists them).

mod support;

use std::collections::BTreeMap;

use courier_api::WorkerCluster;
use courier_core::placement::{
    ClusterView, Exclusions, Ineligibility, NAMESPACE_NAME_LABEL, NoEligibleCluster,
    choose_cluster, namespace_labels, namespace_selector, namespaces_note,
};
use serde_json::json;
use support::cluster_view;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn worker(name: &str) -> ClusterView {
    cluster_view(name, &[])
}

fn worker_cluster(namespace_selector: serde_json::Value) -> WorkerCluster {
    let mut spec = json!({"kubeconfigSecretRef": {"name": "w1"}});
    if !namespace_selector.is_null() {
        spec["namespaceSelector"] = namespace_selector;
    }
    serde_json::from_value(json!({
        "apiVersion": "courier.dev/v1alpha1",
        "kind": "WorkerCluster",
        "metadata": {"name": "w1"},
        "spec": spec,
    }))
    .unwrap_or_else(|e| panic!("a WorkerCluster: {e}"))
}

/// The API reference: every namespace carries `kubernetes.io/metadata.name` = its name, whatever
/// the cache holds, and the cached labels are kept.
#[test]
fn a_namespace_is_matched_by_its_labels_and_its_name() {
    assert_eq!(NAMESPACE_NAME_LABEL, "kubernetes.io/metadata.name");
    assert_eq!(
        namespace_labels("team-a", None),
        labels(&[("kubernetes.io/metadata.name", "team-a")])
    );
    let cached = labels(&[("env", "prod"), ("kubernetes.io/metadata.name", "stale")]);
    assert_eq!(
        namespace_labels("team-a", Some(&cached)),
        labels(&[("env", "prod"), ("kubernetes.io/metadata.name", "team-a")])
    );
}

/// `spec.namespaceSelector`: absent takes every namespace; a valid one takes the namespaces it
/// selects (by name or by label); an invalid one takes none and says why.
#[test]
fn the_namespace_selector_decides_which_namespaces_a_worker_takes() {
    assert!(namespace_selector(&worker_cluster(serde_json::Value::Null)).is_none());

    let by_name = worker_cluster(json!({"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a"]}
    ]}));
    let by_label = worker_cluster(json!({"matchLabels": {"env": "prod"}}));
    let invalid = worker_cluster(json!({"matchExpressions": [
        {"key": "env", "operator": "In", "values": []}
    ]}));

    let mut w1 = worker("w1");
    w1.namespace_selector = namespace_selector(&by_name);
    let mut w2 = worker("w2");
    w2.namespace_selector = namespace_selector(&by_label);
    let chosen = |clusters: &[ClusterView], ns: &str, cached: Option<&BTreeMap<_, _>>| {
        choose_cluster(
            clusters,
            None,
            &namespace_labels(ns, cached),
            &Exclusions::new(),
        )
        .map(|c| c.name.clone())
    };
    assert_eq!(
        chosen(std::slice::from_ref(&w1), "team-a", None),
        Ok("w1".into())
    );
    let err =
        chosen(std::slice::from_ref(&w1), "team-b", None).expect_err("team-b is not selected");
    assert!(err.all_for(Ineligibility::NamespaceNotSelected), "{err}");
    let prod = labels(&[("env", "prod")]);
    assert_eq!(
        chosen(std::slice::from_ref(&w2), "team-b", Some(&prod)),
        Ok("w2".into())
    );
    assert!(chosen(std::slice::from_ref(&w2), "team-b", None).is_err());

    match namespace_selector(&invalid).as_deref() {
        Some(Err(message)) => assert!(
            message.starts_with("invalid spec.namespaceSelector: "),
            "{message}"
        ),
        other => panic!("an In requirement without values is invalid: {other:?}"),
    }
    let mut w3 = worker("w3");
    w3.namespace_selector = namespace_selector(&invalid);
    let err = chosen(&[w3], "team-a", Some(&prod)).expect_err("an invalid selector takes nothing");
    assert!(err.all_for(Ineligibility::NamespaceNotSelected), "{err}");
}

/// `spec.namespaces` (the API reference): absent, the worker takes Jobs from every namespace;
/// set, only from the namespaces listed (a mirror lands in its origin's namespace), and `courier
/// describe job` says "cluster w1 takes only namespaces team-a, team-b".
#[test]
fn the_namespace_list_decides_which_namespaces_a_worker_takes() {
    let listed: WorkerCluster = serde_json::from_value(json!({
        "apiVersion": "courier.dev/v1alpha1",
        "kind": "WorkerCluster",
        "metadata": {"name": "w1"},
        "spec": {"kubeconfigSecretRef": {"name": "w1"}, "namespaces": ["team-a", "team-b"]},
    }))
    .unwrap_or_else(|e| panic!("a WorkerCluster: {e}"));
    let mut w1 = worker("w1");
    w1.namespaces = listed.spec.namespaces.as_deref().map(Into::into);
    let w2 = worker("w2");
    let chosen = |clusters: &[ClusterView], ns: &str| {
        choose_cluster(
            clusters,
            None,
            &namespace_labels(ns, None),
            &Exclusions::new(),
        )
        .map(|c| c.name.clone())
    };
    for ns in ["team-a", "team-b"] {
        assert_eq!(chosen(std::slice::from_ref(&w1), ns), Ok("w1".into()));
        assert_eq!(namespaces_note(&listed, ns), None);
    }
    let err = chosen(std::slice::from_ref(&w1), "team-c").expect_err("team-c is not listed");
    assert!(err.all_for(Ineligibility::NamespaceNotListed), "{err}");
    assert!(!Ineligibility::NamespaceNotListed.is_refusal());
    // The unlisted namespace's Job goes to a worker without a list.
    assert_eq!(chosen(&[w1, w2.clone()], "team-c"), Ok("w2".into()));
    assert_eq!(
        namespaces_note(&listed, "team-c").as_deref(),
        Some("cluster w1 takes only namespaces team-a, team-b")
    );
    assert_eq!(
        namespaces_note(&worker_cluster(serde_json::Value::Null), "team-c"),
        None
    );
    assert_eq!(chosen(&[w2], "anything"), Ok("w2".into()));
}

/// Refusals are about this Job on that worker (the worker refused or did not answer its mirror,
/// or lacks its namespace); every other reason is about the worker as a whole.
#[test]
fn only_the_per_job_reasons_are_refusals() {
    use Ineligibility::*;
    let all = [
        SelectorMismatch,
        NamespaceNotSelected,
        NamespaceNotListed,
        Removing,
        Duplicate,
        Conflict,
        Lost,
        Refused,
        Unanswered,
        NamespaceMissing,
        Paused,
        ZeroWeight,
        NotReady,
    ];
    let refusals: Vec<Ineligibility> = all.into_iter().filter(|r| r.is_refusal()).collect();
    assert_eq!(refusals, [Refused, Unanswered, NamespaceMissing]);
}

/// `all_for` is true only when there were rejected clusters and every one was rejected for that
/// reason; the "(all paused)" / "(none Ready)" note appears only then.
#[test]
fn all_for_and_the_summary_note_need_every_cluster_rejected_for_that_reason() {
    let mut paused = worker("a");
    paused.paused = true;
    let mut down = worker("b");
    down.ready = false;
    let ns = namespace_labels("default", None);
    let none = Exclusions::new();

    let err = choose_cluster(&[paused.clone(), down.clone()], None, &ns, &none)
        .expect_err("nothing eligible");
    assert!(!err.all_for(Ineligibility::Paused), "{err}");
    assert!(!err.all_for(Ineligibility::NotReady), "{err}");
    let text = err.to_string();
    assert_eq!(
        text,
        "no eligible WorkerCluster among 2: paused: a; not Ready: b"
    );

    let err = choose_cluster(std::slice::from_ref(&down), None, &ns, &none).expect_err("down");
    assert!(err.all_for(Ineligibility::NotReady));
    assert!(!err.all_for(Ineligibility::Paused));
    assert_eq!(
        err.to_string(),
        "no eligible WorkerCluster among 1 (none Ready): not Ready: b"
    );

    let empty = NoEligibleCluster::NoneEligible {
        selector: None,
        rejected: Vec::new(),
    };
    assert!(!empty.all_for(Ineligibility::Paused));
    assert!(!NoEligibleCluster::NoClusters.all_for(Ineligibility::Paused));
}
