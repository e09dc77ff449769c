//! The worker chart's `namespaces` value (issue #17 §2), rendered for real (see tests/support):
//! empty, Courier's Job rights are cluster-wide (a ClusterRoleBinding); listed, they are bound in
//! each listed namespace only (a RoleBinding per namespace to the Job ClusterRole) and nothing
//! grants Jobs cluster-wide, while what must stay cluster-wide (namespaces get, the policy reads)
//! still is. Every grant is judged with kubesim's RBAC matcher against the worker calls of
//! `courier_controller::api_calls`.
//!
//! Checked by breaking it: keeping the Job rights in the cluster-wide ClusterRole when namespaces
//! are listed fails `listed_namespaces_bind_the_job_rights_there_only`.

use courier_controller::api_calls::{self, ApiCall, Grant, Scope, Target};
use kubesim::kinds::ssar::Rule;
use serde_json::{Value, json};

mod support;
use support::{Rendered, render, try_render};

const NS: &str = "courier-system";
const SA: &str = "courier-dispatcher";

/// The rules bound to `NS/SA`, wherever they apply.
fn granted(r: &Rendered) -> Vec<Rule> {
    support::bound_rules(r, NS, SA)
        .into_iter()
        .map(|(rule, _)| rule)
        .collect()
}

/// Whether `rules` allow worker call `c` in `namespace` ("" = cluster-wide).
fn allows(rules: &[Rule], c: &ApiCall, namespace: &str) -> bool {
    // The release below is `courier-worker`: the admission policy has the default name.
    let a = support::call_attributes(c, namespace);
    rules.iter().any(|r| r.matches(&a))
}

fn worker_calls() -> Vec<&'static ApiCall> {
    api_calls::all()
        .filter(|c| c.target == Target::Worker && c.grant == Grant::Rbac)
        .collect()
}

fn worker(values: Value) -> Rendered {
    render("courier-worker", "courier-worker", NS, &values)
}

#[test]
fn without_namespaces_the_job_rights_are_cluster_wide() {
    let r = worker(json!({}));
    let rules = granted(&r);
    for c in worker_calls() {
        let at = match c.scope {
            Scope::AnyNamespace | Scope::Cluster => "",
            Scope::OwnNamespace => NS,
        };
        assert!(
            allows(&rules, c, at),
            "{} {} not granted",
            c.verb,
            c.resource
        );
    }
    assert!(
        r.of_kind("RoleBinding")
            .iter()
            .all(|b| b["metadata"]["namespace"] == NS),
        "no per-namespace binding without namespaces"
    );
    assert!(!r.notes.contains("--namespaces"), "{}", r.notes);
}

#[test]
fn listed_namespaces_bind_the_job_rights_there_only() {
    let r = worker(json!({"namespaces": ["team-a", "team-b"]}));
    let rules = granted(&r);
    for c in worker_calls() {
        match c.scope {
            Scope::AnyNamespace => {
                for ns in ["team-a", "team-b"] {
                    assert!(
                        allows(&rules, c, ns),
                        "{} {} not granted in {ns}",
                        c.verb,
                        c.resource
                    );
                }
                for ns in ["", "team-c", "kube-system"] {
                    assert!(
                        !allows(&rules, c, ns),
                        "{} {} granted in {ns:?}: only the listed namespaces",
                        c.verb,
                        c.resource
                    );
                }
            }
            Scope::Cluster => assert!(
                allows(&rules, c, ""),
                "{} {} must stay cluster-wide",
                c.verb,
                c.resource
            ),
            Scope::OwnNamespace => assert!(allows(&rules, c, NS), "{} {}", c.verb, c.resource),
        }
    }
    // One RoleBinding per listed namespace, to the Job ClusterRole.
    let mut per_namespace: Vec<(String, String)> = r
        .of_kind("RoleBinding")
        .into_iter()
        .filter(|b| b["roleRef"]["kind"] == "ClusterRole")
        .map(|b| {
            (
                b["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
                b["roleRef"]["name"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    per_namespace.sort();
    assert_eq!(
        per_namespace,
        [
            ("team-a".to_string(), "courier-worker-jobs".to_string()),
            ("team-b".to_string(), "courier-worker-jobs".to_string()),
        ]
    );
    for part in [
        "--namespaces team-a,team-b",
        "RoleBinding in each of team-a, team-b",
        "nothing on Jobs cluster-wide",
    ] {
        assert!(r.notes.contains(part), "NOTES lack {part:?}:\n{}", r.notes);
    }
    // With createNamespaces, creating namespaces stays cluster-wide.
    let r = worker(json!({"namespaces": ["team-a"], "createNamespaces": true}));
    let rules = granted(&r);
    let create_ns = api_calls::all()
        .find(|c| c.target == Target::Worker && c.grant == Grant::RbacCreatingNamespaces)
        .unwrap_or_else(|| panic!("no namespace create row"));
    assert!(allows(&rules, create_ns, ""));
}

#[test]
fn the_schema_takes_only_a_list_of_namespace_names() {
    for bad in [
        json!({"namespaces": "team-a"}),
        json!({"namespaces": ["Team_A"]}),
        json!({"namespaces": ["team-a", "team-a"]}),
    ] {
        assert!(
            try_render("courier-worker", "courier-worker", NS, &bad).is_err(),
            "the schema accepts {bad}"
        );
    }
}
