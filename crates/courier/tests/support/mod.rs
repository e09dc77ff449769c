//! Shared by the chart test files: renders a chart for real with the Helm v4 library
//! (`charts/render.py`, PyPI package `helm-python-sdk`) and parses what it prints.
//!
//! Each test file uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

pub mod apiserver;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One chart rendered: its manifests (template path, document), CRD files, and NOTES.txt.
pub struct Rendered {
    pub docs: Vec<(String, Value)>,
    pub crds: Vec<(String, String)>,
    pub notes: String,
}

impl Rendered {
    pub fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.docs
            .iter()
            .map(|(_, d)| d)
            .filter(|d| d["kind"] == kind)
            .collect()
    }

    pub fn one(&self, kind: &str) -> &Value {
        match self.of_kind(kind).as_slice() {
            [d] => d,
            other => panic!("expected exactly one {kind}, found {}", other.len()),
        }
    }
}

/// Runs charts/render.py: the parsed JSON it prints, or Helm's error (bad values, template errors).
pub fn try_render(
    chart: &str,
    release: &str,
    namespace: &str,
    values: &Value,
) -> Result<Value, String> {
    let script = repo().join("charts/render.py");
    assert!(
        script.is_file(),
        "the chart renderer {} is missing",
        script.display()
    );
    let out = Command::new("python3")
        .arg(&script)
        .arg(repo().join("charts").join(chart))
        .args([release, namespace, &values.to_string()])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run python3 ({e}): the chart tests need Python 3 with the Helm v4 library \
                 (`python3 -m pip install helm-python-sdk`; .ci/run installs it)"
            )
        });
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => Ok(serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("charts/render.py printed no JSON ({e}): {stderr}"))),
        Some(1) => Err(stderr.into_owned()),
        Some(3) => panic!(
            "the Helm v4 Python library is missing, so the charts cannot be rendered: {stderr}"
        ),
        _ => panic!("charts/render.py failed ({}): {stderr}", out.status),
    }
}

pub fn render(chart: &str, release: &str, namespace: &str, values: &Value) -> Rendered {
    let parsed = try_render(chart, release, namespace, values)
        .unwrap_or_else(|e| panic!("rendering {chart} with {values} failed: {e}"));
    let mut docs = Vec::new();
    let mut notes = String::new();
    let templates = parsed["templates"]
        .as_object()
        .unwrap_or_else(|| panic!("no templates in {parsed}"));
    for (path, text) in templates {
        let text = text.as_str().unwrap_or_default();
        if path.ends_with("NOTES.txt") {
            notes = text.to_string();
            continue;
        }
        let parsed: Vec<Value> = serde_saphyr::from_multiple(text)
            .unwrap_or_else(|e| panic!("{chart}: {path} is not valid YAML: {e}\n{text}"));
        for doc in parsed.into_iter().filter(|d| !d.is_null()) {
            for field in ["/apiVersion", "/kind", "/metadata/name"] {
                assert!(
                    doc.pointer(field).and_then(Value::as_str).is_some(),
                    "{chart}: a document in {path} has no {field}: {doc:#}"
                );
            }
            docs.push((path.clone(), doc));
        }
    }
    // `helm lint --strict`: nothing above info (Helm's only info today: "icon is recommended").
    let findings: Vec<&Value> = parsed["lint"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["severity"].as_i64().is_none_or(|s| s >= 2))
        .collect();
    assert!(
        findings.is_empty(),
        "helm lint --strict on {chart} with {values}: {findings:#?}"
    );
    let crds = parsed["crds"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["filename"].as_str().unwrap_or_default().to_string(),
                c["data"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    Rendered { docs, crds, notes }
}

/// The RBAC rules bound to ServiceAccount `ns/sa` in `r`, as kubesim rules (the matcher kubesim
/// authorizes with) named after their role, each with whether it applies cluster-wide: a
/// ClusterRoleBinding's everywhere, a RoleBinding's (to a Role or a ClusterRole) only in the
/// binding's namespace.
pub fn bound_rules(r: &Rendered, ns: &str, sa: &str) -> Vec<(kubesim::kinds::ssar::Rule, bool)> {
    let bound = |binding: &Value| {
        binding["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == ns)
    };
    let mut out = Vec::new();
    for (binding_kind, cluster_wide) in [("ClusterRoleBinding", true), ("RoleBinding", false)] {
        for b in r.of_kind(binding_kind).into_iter().filter(|b| bound(b)) {
            let role_kind = b["roleRef"]["kind"].as_str().unwrap_or_default();
            assert!(
                cluster_wide && role_kind == "ClusterRole"
                    || !cluster_wide && ["Role", "ClusterRole"].contains(&role_kind),
                "{binding_kind} to a {role_kind}: {b:#}"
            );
            let role = r
                .of_kind(role_kind)
                .into_iter()
                .find(|role| role["metadata"]["name"] == b["roleRef"]["name"])
                .unwrap_or_else(|| panic!("{binding_kind} refers to a missing {role_kind}: {b:#}"));
            let role_name = role["metadata"]["name"].as_str().unwrap_or_default();
            for rule in role["rules"].as_array().into_iter().flatten() {
                let list = |k: &str| rule_list(rule, k);
                let mut kr = kubesim::kinds::ssar::Rule::new(&[], &[], &[])
                    .named(&format!("{role_kind} {role_name}"));
                kr.verbs = list("verbs");
                kr.api_groups = list("apiGroups");
                kr.resources = list("resources");
                kr.resource_names = list("resourceNames");
                if !cluster_wide {
                    let at = b["metadata"]["namespace"].as_str().unwrap_or(ns);
                    kr = kr.in_namespaces(&[at]);
                }
                out.push((kr, cluster_wide));
            }
        }
    }
    out
}

/// The authorizer's attributes of API call `c` made in `namespace` ("" = cluster-wide).
pub fn call_attributes(
    c: &courier_controller::api_calls::ApiCall,
    namespace: &str,
) -> kubesim::kinds::ssar::AccessAttributes {
    kubesim::kinds::ssar::AccessAttributes {
        verb: c.verb.into(),
        group: c.group.into(),
        resource: c.resource.into(),
        subresource: c.subresource.into(),
        namespace: namespace.into(),
        name: c.name.into(),
        ..Default::default()
    }
}

/// The strings of RBAC rule field `key` (`verbs`, `apiGroups`, `resources`, `resourceNames`).
pub fn rule_list(rule: &Value, key: &str) -> Vec<String> {
    rule[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// The rules granted to ServiceAccount `ns/sa` ([`bound_rules`]), none with a wildcard
/// (least privilege).
pub fn granted(r: &Rendered, ns: &str, sa: &str) -> Vec<(kubesim::kinds::ssar::Rule, bool)> {
    let out = bound_rules(r, ns, sa);
    for (rule, _) in &out {
        for list in [&rule.verbs, &rule.api_groups, &rule.resources] {
            assert!(
                !list.iter().any(|v| v.contains('*')),
                "least privilege: no wildcards ({}: {list:?})",
                rule.name
            );
        }
    }
    assert!(!out.is_empty(), "nothing is bound to {ns}/{sa}");
    out
}
