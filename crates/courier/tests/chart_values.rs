//! What a platform team expects of the two charts, rendered for real (see tests/support): object
//! names from the release, the standard labels on every object, a kubeVersion that matches the
//! documented requirements, every value landing where it should, a strict values schema, the
//! monitoring objects only when enabled, and NOTES.txt giving docs/install.md's commands.
//!
//! Checked by breaking it: a hard-coded `name: courier-worker` on the worker ClusterRole fails
//! `names_follow_the_release`; dropping `helm.sh/chart` from a helper fails
//! `every_object_carries_the_standard_labels`; `image.tag` winning over `image.digest` fails
//! `every_value_renders_where_it_should`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

mod support;
use support::{Rendered, render, repo, try_render};

const NS: &str = "courier-system";

/// Every optional object on.
fn everything() -> Value {
    json!({
        "serviceMonitor": {"enabled": true},
        "prometheusRule": {"enabled": true},
        "dashboards": {"enabled": true},
        "networkPolicy": {"enabled": true},
    })
}

fn chart_field(chart: &str, key: &str) -> String {
    let path = repo().join("charts").join(chart).join("Chart.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{chart}/Chart.yaml has no {key}"))
        .to_string()
}

fn name(d: &Value) -> &str {
    d["metadata"]["name"].as_str().unwrap_or_default()
}

fn names(r: &Rendered) -> BTreeSet<(String, String)> {
    r.docs
        .iter()
        .map(|(_, d)| {
            (
                d["kind"].as_str().unwrap_or_default().to_string(),
                name(d).to_string(),
            )
        })
        .collect()
}

/// Management chart objects are named `fullname` (the Service `fullname-metrics`, the dashboard
/// `fullname-dashboard`), and bindings, subjects and the pod's account follow.
fn check_management_names(r: &Rendered, fullname: &str) {
    for (path, d) in &r.docs {
        let want = match d["kind"].as_str().unwrap_or_default() {
            "Service" => format!("{fullname}-metrics"),
            "ConfigMap" => format!("{fullname}-dashboard"),
            "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding" => {
                format!("{fullname}-intent")
            }
            _ => fullname.to_string(),
        };
        assert_eq!(name(d), want, "{path}: {}", d["kind"]);
    }
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        let b = r.one(kind);
        assert_eq!(b["roleRef"]["name"], fullname, "{kind}");
        assert_eq!(b["subjects"][0]["name"], fullname, "{kind}");
    }
    let pod = &r.one("Deployment")["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], fullname);
}

#[test]
fn names_follow_the_release() {
    for (release, values, fullname) in [
        ("courier", json!({}), "courier"),
        ("courier-prod", json!({}), "courier-prod"),
        ("dispatch", json!({}), "dispatch-courier"),
        ("x", json!({"nameOverride": "carrier"}), "x-carrier"),
        (
            "x",
            json!({"fullnameOverride": "batch-dispatcher"}),
            "batch-dispatcher",
        ),
    ] {
        let mut v = everything();
        for (k, val) in values.as_object().into_iter().flatten() {
            v[k] = val.clone();
        }
        check_management_names(&render("courier", release, NS, &v), fullname);
    }

    // Two worker releases on one cluster (one per management cluster, each in its own namespace)
    // share no cluster-scoped name.
    let a = render("courier-worker", "courier-worker", NS, &json!({}));
    let b = render("courier-worker", "mgmt-b", "courier-b", &json!({}));
    for (r, fullname) in [(&a, "courier-worker"), (&b, "mgmt-b-courier-worker")] {
        assert_eq!(name(r.one("ClusterRole")), fullname);
        let crb = r.one("ClusterRoleBinding");
        assert_eq!(name(crb), fullname);
        assert_eq!(crb["roleRef"]["name"], fullname);
        let policy = format!("{fullname}-mirror-ownership");
        assert_eq!(name(r.one("ValidatingAdmissionPolicy")), policy);
        let binding = r.one("ValidatingAdmissionPolicyBinding");
        assert_eq!(name(binding), policy);
        assert_eq!(binding["spec"]["policyName"], policy);
    }
    let cluster_scoped = |r: &Rendered| -> BTreeSet<(String, String)> {
        names(r)
            .into_iter()
            .filter(|(k, _)| k.starts_with("Cluster") || k.starts_with("ValidatingAdmission"))
            .collect()
    };
    assert!(
        cluster_scoped(&a).is_disjoint(&cluster_scoped(&b)),
        "{:?} vs {:?}",
        cluster_scoped(&a),
        cluster_scoped(&b)
    );
    let o = render(
        "courier-worker",
        "w",
        NS,
        &json!({"fullnameOverride": "eu-access"}),
    );
    assert_eq!(name(o.one("ClusterRole")), "eu-access");
    assert_eq!(
        name(o.one("ValidatingAdmissionPolicy")),
        "eu-access-mirror-ownership"
    );
}

fn check_labels(chart: &str, what: &str, labels: &Value, release: &str, component: bool) {
    let version = chart_field(chart, "version");
    let app_version = chart_field(chart, "appVersion");
    let want = [
        ("app.kubernetes.io/name", chart.to_string()),
        ("app.kubernetes.io/instance", release.to_string()),
        ("app.kubernetes.io/version", app_version),
        ("app.kubernetes.io/managed-by", "Helm".to_string()),
        ("helm.sh/chart", format!("{chart}-{version}")),
    ];
    for (k, v) in want {
        assert_eq!(labels[k], v.as_str(), "{chart} {what}: label {k}");
    }
    if component {
        assert!(
            labels["app.kubernetes.io/component"]
                .as_str()
                .is_some_and(|c| !c.is_empty()),
            "{chart} {what}: app.kubernetes.io/component"
        );
    }
}

#[test]
fn every_object_carries_the_standard_labels() {
    let worker_all = json!({"tokenSecret": true, "protectMirrorLabels": true});
    for (chart, values) in [("courier", everything()), ("courier-worker", worker_all)] {
        let r = render(chart, "rel", NS, &values);
        assert!(r.docs.len() >= 6, "{chart}: {:?}", names(&r));
        for (path, d) in &r.docs {
            let what = format!("{path} {}", d["kind"]);
            check_labels(chart, &what, &d["metadata"]["labels"], "rel", true);
            if let Some(pod_labels) = d.pointer("/spec/template/metadata/labels") {
                check_labels(
                    chart,
                    &format!("{what} pod template"),
                    pod_labels,
                    "rel",
                    true,
                );
            }
        }
    }
}

/// `>=MAJOR.MINOR.0-0` -> (MAJOR, MINOR).
fn floor(constraint: &str) -> (u32, u32) {
    let v = constraint
        .strip_prefix(">=")
        .and_then(|v| v.strip_suffix(".0-0"))
        .unwrap_or_else(|| panic!("kubeVersion {constraint:?} is not of the form >=X.Y.0-0"));
    let (major, minor) = v.split_once('.').unwrap_or_default();
    (
        major
            .parse()
            .unwrap_or_else(|e| panic!("{constraint}: {e}")),
        minor
            .parse()
            .unwrap_or_else(|e| panic!("{constraint}: {e}")),
    )
}

/// kubeVersion is set on both charts, admits vendor builds (the "-0" pre-release floor), and says
/// what docs/install.md's requirements say.
#[test]
fn kube_version_constraints_match_the_documented_requirements() {
    let install = std::fs::read_to_string(repo().join("docs/install.md"))
        .unwrap_or_else(|e| panic!("docs/install.md: {e}"));
    for (chart, who) in [
        ("courier", "Management cluster"),
        ("courier-worker", "Worker clusters"),
    ] {
        let (major, minor) = floor(&chart_field(chart, "kubeVersion"));
        let line = install
            .lines()
            .find(|l| l.starts_with(&format!("- {who}:")))
            .unwrap_or_else(|| panic!("docs/install.md names no requirement for {who}"));
        assert!(
            line.contains(&format!("Kubernetes {major}.{minor} or newer")),
            "{chart}: kubeVersion >={major}.{minor} but install.md says: {line}"
        );
    }
    // Job spec.managedBy is on by default from 1.32; the management floor may not be below it.
    assert!(floor(&chart_field("courier", "kubeVersion")) >= (1, 32));
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

fn container(r: &Rendered) -> Value {
    r.one("Deployment")["spec"]["template"]["spec"]["containers"][0].clone()
}

#[test]
fn every_value_renders_where_it_should() {
    let digest = format!("sha256:{}", "ab".repeat(32));
    let values = json!({
        "image": {"repository": "registry.example.com/courier", "tag": "9.9.9", "digest": digest, "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "regcred"}],
        "podAnnotations": {"example.com/scrape": "no"},
        "podLabels": {"team": "batch", "app.kubernetes.io/name": "not-courier"},
        "extraArgs": ["--identity=chart-test"],
        "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "control", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["ctl"]}]}]}}},
        "priorityClassName": "system-cluster-critical",
        "podSecurityContext": {"fsGroup": 65532},
        "securityContext": {"runAsUser": 1001},
        "logFormat": "text",
        "logLevel": "debug",
    });
    let r = render("courier", "courier", NS, &values);
    let d = r.one("Deployment");
    let pod = &d["spec"]["template"];
    let c = container(&r);
    assert_eq!(
        c["image"],
        format!("registry.example.com/courier@{digest}"),
        "the digest wins over the tag"
    );
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(
        pod["spec"]["imagePullSecrets"],
        json!([{"name": "regcred"}])
    );
    assert_eq!(pod["metadata"]["annotations"]["example.com/scrape"], "no");
    assert_eq!(pod["metadata"]["labels"]["team"], "batch");
    assert_eq!(
        pod["metadata"]["labels"]["app.kubernetes.io/name"], "courier",
        "a pod label cannot take the selector's labels away"
    );
    let args = strings(&c["args"]);
    assert_eq!(args.last(), Some(&"--identity=chart-test"), "{args:?}");
    assert!(
        args.contains(&"--log-format=text") && args.contains(&"--log=debug"),
        "{args:?}"
    );
    let env = c["env"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        env.first().map(|e| e["name"].clone()),
        Some(json!("POD_NAME"))
    );
    assert!(
        env.contains(&json!({"name": "HTTPS_PROXY", "value": "http://proxy:3128"})),
        "{env:?}"
    );
    assert_eq!(
        c["resources"]["requests"],
        json!({"cpu": "1", "memory": "1Gi"})
    );
    assert_eq!(
        pod["spec"]["nodeSelector"],
        json!({"kubernetes.io/os": "linux"})
    );
    assert_eq!(pod["spec"]["tolerations"][0]["key"], "dedicated");
    assert!(pod["spec"]["affinity"]["nodeAffinity"].is_object());
    assert!(
        pod["spec"]["affinity"]["podAntiAffinity"].is_null(),
        "affinity replaces the default"
    );
    assert_eq!(pod["spec"]["priorityClassName"], "system-cluster-critical");
    // Keys set are merged over the hardened defaults, which stay.
    let psc = &pod["spec"]["securityContext"];
    assert_eq!(
        (psc["fsGroup"].clone(), psc["runAsNonRoot"].clone()),
        (json!(65532), json!(true))
    );
    assert_eq!(psc["seccompProfile"]["type"], "RuntimeDefault");
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsUser"], 1001);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));

    // Defaults: the chart's appVersion as the tag, JSON logs, no priority class.
    let r = render("courier", "courier", NS, &json!({}));
    let c = container(&r);
    assert_eq!(
        c["image"],
        format!(
            "ghcr.io/courier-dev/courier:{}",
            chart_field("courier", "appVersion")
        )
    );
    let args = strings(&c["args"]);
    assert!(args.contains(&"--log-format=json"), "{args:?}");
    assert!(r.one("Deployment")["spec"]["template"]["spec"]["priorityClassName"].is_null());
    let r = render(
        "courier",
        "courier",
        NS,
        &json!({"image": {"tag": "1.2.3"}}),
    );
    assert_eq!(container(&r)["image"], "ghcr.io/courier-dev/courier:1.2.3");
}

#[test]
fn values_schemas_refuse_unknown_keys_and_bad_types() {
    #[rustfmt::skip]
    let bad: &[(&str, Value, &str)] = &[
        ("courier", json!({"image": {"digest": "latest"}}), "/image/digest"),
        ("courier", json!({"image": {"tagg": "1.0"}}), "tagg"),
        ("courier", json!({"imagePullSecrets": ["regcred"]}), "/imagePullSecrets/0"),
        ("courier", json!({"extraArgs": "--log=debug"}), "/extraArgs"),
        ("courier", json!({"extraArgs": ["log=debug"]}), "/extraArgs/0"),
        ("courier", json!({"extraEnv": [{"value": "x"}]}), "/extraEnv/0"),
        ("courier", json!({"podLabels": {"team": 1}}), "/podLabels/team"),
        ("courier", json!({"podAnnotations": []}), "/podAnnotations"),
        ("courier", json!({"priorityClassName": 5}), "/priorityClassName"),
        ("courier", json!({"logFormat": "yaml"}), "/logFormat"),
        ("courier", json!({"resources": {"request": {}}}), "request"),
        ("courier", json!({"nameOverride": "Not_A_Name"}), "/nameOverride"),
        ("courier", json!({"fullnameOverride": "x".repeat(64)}), "/fullnameOverride"),
        ("courier", json!({"prometheusRule": {"enabled": true, "severity": "page"}}), "severity"),
        ("courier", json!({"prometheusRule": {"statusLagSeconds": "60"}}), "/prometheusRule/statusLagSeconds"),
        ("courier", json!({"prometheusRule": {"workerNotReadyFor": "ten minutes"}}), "/prometheusRule/workerNotReadyFor"),
        ("courier", json!({"dashboards": {"labels": {"grafana_dashboard": 1}}}), "/dashboards/labels/grafana_dashboard"),
        ("courier", json!({"dashboards": {"enable": true}}), "enable"),
        ("courier", json!({"serviceMonitor": {"interval": "soon"}}), "/serviceMonitor/interval"),
        ("courier-worker", json!({"nameOverride": "Bad"}), "/nameOverride"),
        ("courier-worker", json!({"fullname": "x"}), "fullname"),
    ];
    let mut wrong = Vec::new();
    for (chart, values, field) in bad {
        match try_render(chart, "r", NS, values) {
            Ok(_) => wrong.push(format!("{chart} accepted {values}")),
            Err(e) if !e.contains(field) => wrong.push(format!(
                "{chart} {values}: the error does not name {field}: {e}"
            )),
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn monitoring_objects_render_only_when_enabled() {
    let kinds = |r: &Rendered| -> BTreeSet<String> {
        r.docs
            .iter()
            .filter_map(|(_, d)| d["kind"].as_str().map(str::to_string))
            .collect()
    };
    let default = render("courier", "courier", NS, &json!({}));
    for kind in ["ServiceMonitor", "PrometheusRule", "ConfigMap"] {
        assert!(!kinds(&default).contains(kind), "{kind} is off by default");
    }
    for (key, kind) in [
        ("serviceMonitor", "ServiceMonitor"),
        ("prometheusRule", "PrometheusRule"),
        ("dashboards", "ConfigMap"),
    ] {
        let r = render("courier", "courier", NS, &json!({key: {"enabled": true}}));
        let added: Vec<String> = kinds(&r).difference(&kinds(&default)).cloned().collect();
        assert_eq!(
            added,
            [kind.to_string()],
            "{key}.enabled adds exactly a {kind}"
        );
    }
    // The dashboard's labels and annotations are what the sidecar is configured for, in the
    // namespace it watches.
    let r = render(
        "courier",
        "courier",
        NS,
        &json!({"dashboards": {"enabled": true, "labels": {"grafana_dashboard": "courier"},
                "annotations": {"grafana_folder": "Batch"}, "namespace": "monitoring"}}),
    );
    let cm = r.one("ConfigMap");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "courier");
    assert_eq!(cm["metadata"]["annotations"]["grafana_folder"], "Batch");
    assert_eq!(cm["metadata"]["namespace"], "monitoring");
    // ServiceMonitor and PrometheusRule carry the labels a Prometheus selects on.
    let r = render(
        "courier",
        "courier",
        NS,
        &json!({"serviceMonitor": {"enabled": true, "labels": {"release": "prom"}, "scrapeTimeout": "5s"},
                "prometheusRule": {"enabled": true, "labels": {"release": "prom"}}}),
    );
    assert_eq!(
        r.one("ServiceMonitor")["metadata"]["labels"]["release"],
        "prom"
    );
    assert_eq!(
        r.one("ServiceMonitor")["spec"]["endpoints"][0]["scrapeTimeout"],
        "5s"
    );
    assert_eq!(
        r.one("PrometheusRule")["metadata"]["labels"]["release"],
        "prom"
    );
}

/// The commands NOTES.txt prints (indented lines running kubectl, helm or courier), rendered as in
/// docs/install.md (releases `courier` and `courier-worker` in courier-system), are lines of
/// install.md: the two say the same thing.
#[test]
fn notes_give_the_commands_of_install_md() {
    let install = std::fs::read_to_string(repo().join("docs/install.md"))
        .unwrap_or_else(|e| panic!("docs/install.md: {e}"));
    let doc_lines: BTreeSet<&str> = install.lines().map(str::trim).collect();
    for (chart, release) in [("courier", "courier"), ("courier-worker", "courier-worker")] {
        let notes = render(chart, release, NS, &json!({})).notes;
        let commands: Vec<&str> = notes
            .lines()
            .filter(|l| l.starts_with("  "))
            .map(str::trim)
            .filter(|l| {
                ["kubectl ", "helm ", "courier "]
                    .iter()
                    .any(|p| l.starts_with(p))
            })
            .collect();
        assert!(
            commands.len() >= 2,
            "{chart}: NOTES.txt gives no commands:\n{notes}"
        );
        for c in commands {
            assert!(
                doc_lines.contains(c),
                "{chart}'s NOTES.txt says `{c}`, which docs/install.md does not"
            );
        }
    }
    // Another namespace: the commands say so.
    let notes = render("courier", "courier", "batch-control", &json!({})).notes;
    assert!(
        notes.contains("rollout status deploy/courier") && notes.contains("-n batch-control"),
        "{notes}"
    );
}
