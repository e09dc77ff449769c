//! The Helm charts, rendered for real by the Helm v4 library (`charts/render.py`, PyPI package
//! `helm-python-sdk`) with default and non-default values, then checked:
//! - `helm lint --strict` finds nothing; every rendered document parses and lands where it should;
//! - the CRD in `charts/courier/crds` is byte for byte what `courier crds` prints (kubesim serving it,
//!   and the charts' rights at work, are in chart_rights.rs);
//! - the RBAC grants every API call in `courier_controller::api_calls` (itself checked against the
//!   calls the controller really makes, in courier-controller's `api_calls` test) and nothing else;
//! - the Deployment is hardened and `courier run` accepts every flag and value the chart passes;
//! - the worker chart's ValidatingAdmissionPolicy is evaluated for real, through kubesim's admission,
//!   in worker_policy.rs.
//!
//! Python 3 with helm-python-sdk is required (`.ci/run` installs it); without it these tests fail.

use std::process::Command;

use courier_controller::api_calls::{self, ApiCall, Grant, Scope, Target};
use kubesim::kinds::ssar::AccessAttributes;
use serde_json::{Value, json};

mod support;
use support::{Rendered, granted, render, repo, try_render};

// ------------------------------------------------------------------------------- value sets

const NS: &str = "courier-system";

fn management_default() -> Rendered {
    render("courier", "courier", NS, &json!({}))
}

/// Every knob changed, in another namespace.
fn management_custom_values() -> Value {
    json!({
        "image": {"repository": "registry.example.com/courier", "tag": "1.2.3", "pullPolicy": "Always"},
        "origin": "eu-mgmt",
        "replicas": 3,
        "concurrency": 4,
        "workerThreads": 2,
        "maxRedispatch": 1,
        "workerLostTimeout": "5m",
        "redispatchOnWorkerLoss": "never",
        "gcInterval": "30s",
        "metricsPort": 9100,
        "logLevel": "info,courier_controller=debug",
        "credentials": {"allowExecPlugins": true, "allowFileReferences": true, "allowInsecureTLS": true},
        "serviceMonitor": {"enabled": true, "interval": "15s", "labels": {"release": "prom"}},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "logFormat": "text",
        "extraArgs": ["--identity=chart-test"],
        "workerNamespaces": {"create": true, "podSecurity": "baseline"},
    })
}

fn management_custom() -> Rendered {
    render(
        "courier",
        "dispatch",
        "batch-control",
        &management_custom_values(),
    )
}

fn worker_default() -> Rendered {
    render("courier-worker", "courier-worker", NS, &json!({}))
}

const CUSTOM_WORKER_NS: &str = "batch-ops";
const EXTRA_ALLOWED: &str = "system:serviceaccount:courier-system:courier";

fn worker_custom() -> Rendered {
    render(
        "courier-worker",
        "w",
        CUSTOM_WORKER_NS,
        &json!({
            "serviceAccount": "dispatcher-eu",
            "tokenSecret": false,
            "createNamespaces": true,
            "extraAllowedUsernames": [EXTRA_ALLOWED],
        }),
    )
}

// ------------------------------------------------------------------------------- documents

#[test]
fn crd_in_the_chart_is_what_courier_crds_prints() {
    let path = repo().join("charts/courier/crds/workercluster.yaml");
    let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let out = Command::new(env!("CARGO_BIN_EXE_courier"))
        .arg("crds")
        .output()
        .unwrap_or_else(|e| panic!("running courier crds: {e}"));
    assert!(out.status.success(), "courier crds failed: {out:?}");
    assert!(
        committed == out.stdout,
        "charts/courier/crds/workercluster.yaml differs from `courier crds` (the CRD is generated \
         from the Rust types in courier-api). Regenerate it with:\n  \
         cargo run -p courier -- crds > charts/courier/crds/workercluster.yaml"
    );
    // Helm installs it from crds/ (before the templates, never templated).
    let r = management_default();
    let text = String::from_utf8_lossy(&committed);
    assert_eq!(
        r.crds,
        vec![(
            "courier/crds/workercluster.yaml".to_string(),
            text.to_string()
        )]
    );
}

/// Kinds each chart may render, and whether they are namespaced.
const KINDS: &[(&str, bool)] = &[
    ("ServiceAccount", true),
    ("Secret", true),
    ("Deployment", true),
    ("Service", true),
    ("ServiceMonitor", true),
    ("PrometheusRule", true),
    ("ConfigMap", true),
    ("PodDisruptionBudget", true),
    ("Role", true),
    ("RoleBinding", true),
    ("ClusterRole", false),
    ("ClusterRoleBinding", false),
    ("ValidatingAdmissionPolicy", false),
    ("ValidatingAdmissionPolicyBinding", false),
    ("NetworkPolicy", true),
];

fn kinds(r: &Rendered) -> Vec<&str> {
    let mut k: Vec<&str> = r
        .docs
        .iter()
        .filter_map(|(_, d)| d["kind"].as_str())
        .collect();
    k.sort();
    k
}

fn check_placement(r: &Rendered, ns: &str, release: &str) {
    for (path, d) in &r.docs {
        let kind = d["kind"].as_str().unwrap_or_default();
        let Some((_, namespaced)) = KINDS.iter().find(|(k, _)| *k == kind) else {
            panic!("{path}: unexpected kind {kind}");
        };
        let got = d.pointer("/metadata/namespace").and_then(Value::as_str);
        if *namespaced {
            assert_eq!(
                got,
                Some(ns),
                "{path}: {kind} must be in the release namespace"
            );
        } else {
            assert_eq!(got, None, "{path}: {kind} is cluster-scoped");
        }
        assert_eq!(
            d.pointer("/metadata/labels/app.kubernetes.io~1instance"),
            Some(&json!(release)),
            "{path}: {kind} carries the release's labels"
        );
    }
    assert!(!r.notes.trim().is_empty(), "NOTES.txt renders");
}

#[test]
fn every_rendered_document_parses_and_lands_in_the_release_namespace() {
    let m = management_default();
    check_placement(&m, NS, "courier");
    assert_eq!(
        kinds(&m),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ]
    );
    let mc = management_custom();
    check_placement(&mc, "batch-control", "dispatch");
    assert_eq!(mc.of_kind("ServiceMonitor").len(), 1);

    let w = worker_default();
    check_placement(&w, NS, "courier-worker");
    assert_eq!(
        kinds(&w),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ServiceAccount",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ]
    );
    // No long-lived token by default (issue #17 §4): NOTES explain bound, expiring tokens.
    assert!(
        w.of_kind("Secret").is_empty(),
        "tokenSecret defaults to false"
    );
    assert!(
        w.notes.contains("--token-ttl 720h")
            && w.notes.contains("courier cluster rotate-token eu-1")
            && w.notes.contains("service-account-max-token-expiration"),
        "{}",
        w.notes
    );
    let long = render(
        "courier-worker",
        "courier-worker",
        NS,
        &json!({"tokenSecret": true}),
    );
    let secret = long.one("Secret");
    assert_eq!(secret["type"], "kubernetes.io/service-account-token");
    assert_eq!(
        secret.pointer("/metadata/annotations/kubernetes.io~1service-account.name"),
        Some(&json!("courier-dispatcher"))
    );
    assert!(
        long.notes.contains("courier-dispatcher-token") && long.notes.contains("--token-secret"),
        "{}",
        long.notes
    );

    let wc = worker_custom();
    check_placement(&wc, CUSTOM_WORKER_NS, "w");
    assert!(wc.of_kind("Secret").is_empty(), "tokenSecret=false");
    assert!(
        wc.notes.contains(
            "--worker-namespace batch-ops --service-account dispatcher-eu --token-ttl 720h"
        ),
        "without a token Secret, NOTES.txt explains bound tokens: {}",
        wc.notes
    );
    let off = render(
        "courier-worker",
        "w",
        NS,
        &json!({"protectMirrorLabels": false, "policy": {"enabled": false}}),
    );
    check_placement(&off, NS, "w");
    assert!(off.of_kind("ValidatingAdmissionPolicy").is_empty());
    assert!(off.of_kind("ValidatingAdmissionPolicyBinding").is_empty());
    // Either half alone keeps the policy, with only its own rules (evaluated in worker_policy.rs).
    for (values, kept, dropped) in [
        (
            json!({"protectMirrorLabels": false}),
            "rule no-privileged",
            "rule courier-labels",
        ),
        (
            json!({"policy": {"enabled": false}}),
            "rule courier-labels",
            "rule no-privileged",
        ),
    ] {
        let half = render("courier-worker", "w", NS, &values);
        let text = half.one("ValidatingAdmissionPolicy")["spec"]["validations"].to_string();
        assert!(
            text.contains(kept) && !text.contains(dropped),
            "{values}: {text}"
        );
        assert_eq!(half.of_kind("ValidatingAdmissionPolicyBinding").len(), 1);
    }
}

#[test]
fn values_schemas_refuse_mistakes_at_install_time() {
    #[rustfmt::skip]
    let bad: &[(&str, Value, &str)] = &[
        ("courier", json!({"redispatchOnWorkerLoss": "sometimes"}), "/redispatchOnWorkerLoss"),
        ("courier", json!({"gcInterval": "1 minute"}), "/gcInterval"),
        ("courier", json!({"workerLostTimeout": 900}), "/workerLostTimeout"),
        ("courier", json!({"origin": "-not-a-label-value"}), "/origin"),
        ("courier", json!({"metricsPort": "8080"}), "/metricsPort"),
        ("courier", json!({"serviceMonitor": true}), "/serviceMonitor"),
        ("courier", json!({"replicaCount": 3}), "replicaCount"),
        ("courier", json!({"workerNamespaces": {"podSecurity": "strict"}}), "/workerNamespaces/podSecurity"),
        ("courier-worker", json!({"createNamespaces": "yes"}), "/createNamespaces"),
        ("courier-worker", json!({"serviceAccount": "Not_A_Name"}), "/serviceAccount"),
        ("courier-worker", json!({"protectMirrorLabels": "yes"}), "/protectMirrorLabels"),
        ("courier-worker", json!({"extraAllowedUsernames": "alice"}), "/extraAllowedUsernames"),
        ("courier-worker", json!({"policy": {"deniedNamespaces": "kube-system"}}), "/policy/deniedNamespaces"),
        ("courier-worker", json!({"policy": {"privilegedNamespaces": ["GPU_Jobs"]}}), "/policy/privilegedNamespaces/0"),
        ("courier-worker", json!({"policy": {"enable": true}}), "enable"),
    ];
    for (chart, values, field) in bad {
        match try_render(chart, "r", NS, values) {
            Ok(_) => panic!("{chart} accepted invalid values {values}"),
            Err(e) => assert!(
                e.contains(field),
                "{chart} {values}: the error names {field}: {e}"
            ),
        }
    }
    // Durations as `courier run` writes them pass.
    for d in ["90s", "1h30m", "500ms", "2.5m"] {
        assert!(
            try_render("courier", "r", NS, &json!({"gcInterval": d})).is_ok(),
            "{d}"
        );
    }
}

// ------------------------------------------------------------------------------- RBAC

fn attrs(c: &ApiCall, namespace: &str) -> AccessAttributes {
    support::call_attributes(c, namespace)
}

fn describe(c: &ApiCall) -> String {
    let sub = if c.subresource.is_empty() {
        String::new()
    } else {
        format!("/{}", c.subresource)
    };
    format!(
        "{} {}{sub} (group {:?}, {:?}): {}",
        c.verb, c.resource, c.group, c.scope, c.why
    )
}

/// Every call of `target` is granted where it is made, calls in Courier's namespace are granted only
/// there, and every granted (verb, group, resource) is a call of the table: nothing more.
/// `creating_namespaces`: the values let Courier create namespaces (worker `createNamespaces`).
fn check_rbac(
    r: &Rendered,
    target: Target,
    ns: &str,
    sa: &str,
    chart: &str,
    creating_namespaces: bool,
) {
    let rules = granted(r, ns, sa);
    // The web view's reviews are granted only when the chart turns it on.
    let ui = ui_addr(r).is_some();
    let calls: Vec<&ApiCall> = api_calls::all()
        .filter(|c| {
            c.target == target
                && match c.grant {
                    Grant::Rbac => true,
                    Grant::RbacWithUi => ui,
                    Grant::RbacCreatingNamespaces => creating_namespaces,
                    Grant::Everyone => false,
                }
        })
        .collect();
    // The worker chart names its admission policy after the release; a release other than
    // `courier-worker` grants reading its own policy (the controller, looking for the default
    // name, then reports PolicyInstalled as unknown).
    let policy_name = r
        .of_kind("ValidatingAdmissionPolicy")
        .first()
        .and_then(|p| p["metadata"]["name"].as_str())
        .map(str::to_string);
    let attrs = |c: &ApiCall, namespace: &str| {
        let mut a = attrs(c, namespace);
        if c.name == courier_api::WORKER_POLICY_NAME
            && let Some(p) = &policy_name
        {
            a.name = p.clone();
        }
        a
    };
    let allowed = |c: &ApiCall, namespace: &str| {
        rules
            .iter()
            .any(|(rule, _)| rule.matches(&attrs(c, namespace)))
    };
    let mut missing = Vec::new();
    for c in &calls {
        let namespaces: &[&str] = match c.scope {
            // A namespaced object anywhere, and a list/watch across all namespaces.
            Scope::AnyNamespace => &["", "team-a"],
            Scope::OwnNamespace => &[ns],
            Scope::Cluster => &[""],
        };
        for n in namespaces {
            if !allowed(c, n) {
                missing.push(format!("{} in namespace {n:?}", describe(c)));
            }
        }
        if c.scope == Scope::OwnNamespace {
            assert!(
                !allowed(c, "team-a") && !allowed(c, ""),
                "{chart}: {} is granted beyond Courier's namespace",
                describe(c)
            );
        }
        if !c.name.is_empty() {
            let other = AccessAttributes {
                name: "someone-elses".into(),
                ..attrs(c, namespaces[0])
            };
            assert!(
                !rules.iter().any(|(rule, _)| rule.matches(&other)),
                "{chart}: {} is granted on objects other than {} (resourceNames)",
                describe(c),
                c.name
            );
        }
    }
    assert!(
        missing.is_empty(),
        "{chart}'s RBAC does not grant calls the controller makes (crates/courier-controller/src/\
         api_calls.rs):\n  {}",
        missing.join("\n  ")
    );
    for (rule, cluster_wide) in &rules {
        for group in &rule.api_groups {
            for resource in &rule.resources {
                let (res, sub) = resource.split_once('/').unwrap_or((resource, ""));
                for verb in &rule.verbs {
                    let row = calls.iter().find(|c| {
                        c.group == group
                            && c.resource == res
                            && c.subresource == sub
                            && c.verb == verb
                    });
                    match row {
                        None => panic!(
                            "{chart}: {} grants {verb} {resource} (group {group:?}), which Courier \
                             never does (not in api_calls.rs): least privilege",
                            rule.name
                        ),
                        Some(c) if *cluster_wide && c.scope == Scope::OwnNamespace => panic!(
                            "{chart}: {} grants {verb} {resource} cluster-wide; Courier needs it only \
                             in its own namespace",
                            rule.name
                        ),
                        Some(_) => {}
                    }
                }
            }
        }
    }
}

#[test]
fn management_rbac_grants_exactly_the_management_calls() {
    check_rbac(
        &management_default(),
        Target::Management,
        NS,
        "courier",
        "charts/courier",
        false,
    );
    let custom = management_custom();
    // Release "dispatch": the account is named after the release.
    check_rbac(
        &custom,
        Target::Management,
        "batch-control",
        "dispatch-courier",
        "charts/courier (custom)",
        false,
    );
    // The Deployment runs as the account the RBAC is bound to.
    for (r, sa) in [
        (management_default(), "courier"),
        (custom, "dispatch-courier"),
    ] {
        let d = r.one("Deployment");
        assert_eq!(d["spec"]["template"]["spec"]["serviceAccountName"], sa);
        assert_eq!(r.one("ServiceAccount")["metadata"]["name"], sa);
    }
}

/// The Deployment's `--ui-addr`, if the chart turned the web view on.
fn ui_addr(r: &Rendered) -> Option<String> {
    r.of_kind("Deployment").into_iter().find_map(|d| {
        let args: Vec<String> = d["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect();
        flag(&args, "ui-addr").map(str::to_string)
    })
}

#[test]
fn web_view_is_off_by_default_and_on_its_own_port_with_its_reviews() {
    let off = management_default();
    assert_eq!(ui_addr(&off), None, "the web view is off by default");
    let values = json!({"ui": {"enabled": true, "port": 9090}});
    let on = render("courier", "courier", NS, &values);
    // Bound to every address of the pod, so the view reviews every caller's token.
    assert_eq!(ui_addr(&on).as_deref(), Some("0.0.0.0:9090"));
    check_rbac(
        &on,
        Target::Management,
        NS,
        "courier",
        "charts/courier (ui.enabled)",
        false,
    );
    let c = &on.one("Deployment")["spec"]["template"]["spec"]["containers"][0];
    let port = c["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "ui")
        .unwrap_or_else(|| panic!("no container port named ui: {c:#}"));
    assert_eq!(port["containerPort"], 9090);
    let svc = on.one("Service");
    let sp = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "ui")
        .unwrap_or_else(|| panic!("no Service port named ui: {svc:#}"));
    assert_eq!(
        (sp["port"].clone(), sp["targetPort"].clone()),
        (json!(9090), json!("ui"))
    );
    assert!(on.notes.contains("port-forward"), "{}", on.notes);
    // Everything else about the Deployment holds, and `courier run` accepts --ui-addr.
    check_deployment(&on, NS, &values);
    assert!(
        try_render("courier", "courier", NS, &json!({"ui": {"enabled": "yes"}})).is_err(),
        "the values schema refuses a non-boolean ui.enabled"
    );
}

#[test]
fn worker_rbac_grants_exactly_the_worker_calls() {
    check_rbac(
        &worker_default(),
        Target::Worker,
        NS,
        "courier-dispatcher",
        "charts/courier-worker",
        false,
    );
    let custom = worker_custom();
    check_rbac(
        &custom,
        Target::Worker,
        CUSTOM_WORKER_NS,
        "dispatcher-eu",
        "charts/courier-worker (custom)",
        true,
    );
    assert_eq!(
        custom.one("ServiceAccount")["metadata"]["name"],
        "dispatcher-eu"
    );
}

// ------------------------------------------------------------------------------- Deployment

/// The value of `--flag=value` in `args`.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let prefix = format!("--{name}=");
    args.iter().find_map(|a| a.strip_prefix(&prefix))
}

fn check_deployment(r: &Rendered, ns: &str, values: &Value) {
    let d = r.one("Deployment");
    let replicas = values.get("replicas").cloned().unwrap_or(json!(2));
    assert_eq!(d["spec"]["replicas"], replicas);
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let containers = pod["containers"].as_array().cloned().unwrap_or_default();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert!(sc.get("privileged").is_none_or(|p| p == false));
    for res in ["cpu", "memory"] {
        assert!(
            c["resources"]["requests"][res].is_string(),
            "requests.{res}"
        );
    }
    let args: Vec<String> = c["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("run"));
    assert_eq!(flag(&args, "namespace"), Some(ns));
    assert_eq!(
        flag(&args, "leader-elect"),
        Some("true"),
        "two replicas need leader election"
    );
    let origin = values
        .get("origin")
        .and_then(Value::as_str)
        .unwrap_or("courier");
    assert_eq!(flag(&args, "origin"), Some(origin));
    let level = values
        .get("logLevel")
        .and_then(Value::as_str)
        .unwrap_or("info");
    assert_eq!(flag(&args, "log"), Some(level));
    if let Some(image) = values.pointer("/image/repository").and_then(Value::as_str) {
        let tag = values
            .pointer("/image/tag")
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert_eq!(c["image"], format!("{image}:{tag}"));
    } else {
        assert_eq!(c["image"], "ghcr.io/courier-dev/courier:0.1.0");
    }

    // One port serves /metrics, /healthz and /readyz: the container port, both probes, the Service
    // and the ServiceMonitor all point at what --metrics-addr binds.
    let addr = flag(&args, "metrics-addr").unwrap_or_else(|| panic!("no --metrics-addr: {args:?}"));
    let port: u16 = addr
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("--metrics-addr={addr} has no port"));
    let named = c["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "metrics")
        .unwrap_or_else(|| panic!("no container port named metrics"));
    assert_eq!(named["containerPort"], json!(port));
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(c[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(c[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    let svc = r.one("Service");
    let sp = &svc["spec"]["ports"][0];
    assert_eq!(
        (sp["port"].clone(), sp["targetPort"].clone()),
        (json!(port), json!("metrics"))
    );
    for (k, v) in svc["spec"]["selector"].as_object().into_iter().flatten() {
        assert_eq!(
            &d["spec"]["template"]["metadata"]["labels"][k], v,
            "Service selects the pods"
        );
    }
    for sm in r.of_kind("ServiceMonitor") {
        assert_eq!(sm["spec"]["endpoints"][0]["port"], sp["name"]);
        assert_eq!(sm["spec"]["endpoints"][0]["path"], "/metrics");
        for (k, v) in sm["spec"]["selector"]["matchLabels"]
            .as_object()
            .into_iter()
            .flatten()
        {
            assert_eq!(
                &svc["metadata"]["labels"][k], v,
                "ServiceMonitor selects the Service"
            );
        }
    }

    // Replicas spread over nodes, and a drain keeps one running.
    let spread =
        &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(
        spread["podAffinityTerm"]["topologyKey"],
        "kubernetes.io/hostname"
    );
    assert_eq!(
        spread["podAffinityTerm"]["labelSelector"]["matchLabels"],
        d["spec"]["selector"]["matchLabels"]
    );
    let pdb = r.one("PodDisruptionBudget");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(pdb["spec"]["selector"], d["spec"]["selector"]);

    // `courier run` itself accepts every flag and value: it gets past argument parsing (clap exits 2
    // on an unknown flag or a bad value) and stops at the missing kubeconfig.
    let out = Command::new(env!("CARGO_BIN_EXE_courier"))
        .args(&args)
        .arg("--kubeconfig=/nonexistent/courier-chart-test/kubeconfig")
        .env_clear()
        .output()
        .unwrap_or_else(|e| panic!("running courier: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(1)
            && stderr.contains("/nonexistent/courier-chart-test/kubeconfig"),
        "`courier {}` did not accept the chart's arguments ({}): {stderr}",
        args.join(" "),
        out.status
    );
}

#[test]
fn deployment_is_hardened_and_courier_run_accepts_its_arguments() {
    check_deployment(&management_default(), NS, &json!({}));
    check_deployment(
        &management_custom(),
        "batch-control",
        &management_custom_values(),
    );
    let args = |r: &Rendered| -> Vec<String> {
        r.one("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect()
    };
    let custom = args(&management_custom());
    for f in [
        "--allow-exec-kubeconfigs",
        "--allow-file-kubeconfigs",
        "--allow-insecure-kubeconfigs",
    ] {
        assert!(
            custom.iter().any(|a| a == f),
            "{f} with the credentials values"
        );
        assert!(
            !args(&management_default()).iter().any(|a| a == f),
            "{f} off by default"
        );
    }
    let single = render("courier", "courier", NS, &json!({"replicas": 1}));
    assert!(
        single.of_kind("PodDisruptionBudget").is_empty(),
        "minAvailable 1 with one replica would block every drain"
    );
    assert_eq!(flag(&custom, "gc-interval"), Some("30s"));
    assert_eq!(flag(&custom, "worker-lost-timeout"), Some("5m"));
    assert_eq!(flag(&custom, "redispatch-on-worker-loss"), Some("never"));
    assert_eq!(flag(&custom, "worker-threads"), Some("2"));
    assert!(custom.iter().any(|a| a == "--create-worker-namespaces"));
    assert_eq!(
        flag(&custom, "worker-namespace-pod-security"),
        Some("baseline")
    );
    let default = args(&management_default());
    assert_eq!(flag(&default, "worker-threads"), Some("1"));
    assert!(
        !default
            .iter()
            .any(|a| a.starts_with("--create-worker-namespaces")),
        "Courier creates no namespaces on workers unless asked: {default:?}"
    );
}
