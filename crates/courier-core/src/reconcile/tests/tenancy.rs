//! Issue #17 §1: namespaces on workers are not Courier's to create unless the operator says so.

use super::*;
use crate::namespaces::{PodSecurityLevel, WorkerNamespaces};

fn missing(w: &mut World, cluster: &str) {
    let (now, config) = (w.now, w.config.clone());
    let message = crate::namespaces::missing_message(cluster, "ml", "namespaces \"ml\" not found");
    w.hints
        .avoid(cluster, AvoidKind::NamespaceMissing, &message, now, &config);
}

#[test]
fn by_default_no_namespace_is_created_on_a_worker() {
    let d = World::new().decide();
    assert_eq!(kinds(&d), ["WriteIntent(a,1,0)", "CreateMirror(a,1)"]);
}

#[test]
fn with_the_flag_the_namespace_is_created_with_pod_security_labels() {
    let mut w = World::new();
    w.config.worker_namespaces = WorkerNamespaces::Create {
        pod_security: PodSecurityLevel::Baseline,
    };
    let d = w.decide();
    assert_eq!(
        kinds(&d),
        [
            "WriteIntent(a,1,0)",
            "EnsureNamespace(a)",
            "CreateMirror(a,1)"
        ]
    );
    let labels = d
        .actions()
        .find_map(|a| match a {
            Action::EnsureNamespace {
                namespace, labels, ..
            } => Some((namespace.clone(), labels.clone())),
            _ => None,
        })
        .expect("EnsureNamespace");
    assert_eq!(labels.0, "ml");
    assert_eq!(
        labels
            .1
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("baseline")
    );
}

#[test]
fn a_worker_without_the_namespace_is_skipped_with_a_warning_naming_the_fix() {
    let mut w = World::new().with_intent("a", 1, 0);
    missing(&mut w, "a");
    let d = w.decide();
    assert_eq!(
        kinds(&d),
        [
            "WriteIntent(b,2,0)",
            "Event(NamespaceMissing)",
            "CreateMirror(b,2)"
        ]
    );
    let note = event_message(&d, "NamespaceMissing");
    assert!(
        note.contains("namespace ml does not exist on WorkerCluster a")
            && note.contains("--create-worker-namespaces")
            && note.contains("b as epoch 2"),
        "{note}"
    );
    // Nowhere else: Placed=False says so, and the worker is tried again after the backoff.
    w.clusters[1].paused = true;
    let d = w.decide();
    assert_eq!(
        kinds(&d),
        [
            "WriteOriginStatus",
            "Event(NamespaceMissing)",
            "Requeue(30s)"
        ]
    );
    let (_, reason, message) = placed(&d).expect("Placed");
    assert_eq!(reason, "NamespaceMissing");
    assert!(
        message.contains("namespace ml does not exist on WorkerCluster a")
            && message.contains("paused: b"),
        "{message}"
    );
    w.now = ts("2026-05-01T10:00:30Z");
    assert_eq!(kinds(&w.decide()), ["CreateMirror(a,1)"]);
}

/// §2: a WorkerCluster's namespace selector keeps Jobs of other namespaces off it, and the origin
/// says so when nothing else is left.
#[test]
fn a_worker_takes_only_the_namespaces_its_selector_selects() {
    use crate::selector::ClusterSelector;
    let mut w = World::new();
    w.clusters[0].namespace_selector = Some(
        ClusterSelector::parse("kubernetes.io/metadata.name in (team-a)")
            .map_err(|e| e.to_string())
            .into(),
    );
    assert_eq!(
        kinds(&w.decide())[0],
        "WriteIntent(b,1,0)",
        "a does not take ml"
    );
    w.namespace_labels
        .insert("kubernetes.io/metadata.name".into(), "team-a".into());
    assert_eq!(
        kinds(&w.decide())[0],
        "WriteIntent(a,1,0)",
        "a takes team-a"
    );
    // Only a could take it by its cluster selector: Placed=False names the namespace selector.
    let mut w = World::new();
    w.clusters[0].namespace_selector = Some(Err("invalid spec.namespaceSelector".into()).into());
    Arc::make_mut(&mut w.clusters[1].labels).insert("region".into(), "us".into());
    w.origin["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": "region=eu"});
    let d = w.decide();
    let (_, reason, message) = placed(&d).expect("Placed");
    assert_eq!(reason, "NoEligibleCluster");
    assert!(
        message.contains("not taking Jobs from this namespace: a"),
        "{message}"
    );
}

/// §2: a WorkerCluster's `spec.namespaces` (the worker namespaces Courier may use there) keeps Jobs
/// of other namespaces off it, and the origin says so when nothing else is left.
#[test]
fn a_worker_takes_only_the_namespaces_it_lists() {
    let mut w = World::new();
    w.clusters[0].namespaces = Some(vec!["team-a".into()].into());
    assert_eq!(
        kinds(&w.decide())[0],
        "WriteIntent(b,1,0)",
        "a does not list ml"
    );
    w.namespace_labels
        .insert("kubernetes.io/metadata.name".into(), "team-a".into());
    assert_eq!(
        kinds(&w.decide())[0],
        "WriteIntent(a,1,0)",
        "a lists team-a"
    );
    let mut w = World::new();
    w.clusters[0].namespaces = Some(vec!["team-a".into()].into());
    w.clusters[1].namespaces = Some(vec!["team-b".into()].into());
    let d = w.decide();
    let (_, reason, message) = placed(&d).expect("Placed");
    assert_eq!(reason, "NoEligibleCluster");
    assert!(
        message.contains("not listing this namespace in spec.namespaces: a, b"),
        "{message}"
    );
}
