//! The worker chart's opt-in `cliReads` rules: exactly what `courier logs` and `courier describe`
//! read on a worker through Courier's ServiceAccount (list pods, get pods/log, list events), bound to
//! that account, and absent unless asked for. Renders with `charts/render.py` like `charts.rs`
//! (Python 3 with helm-python-sdk; `.ci/run` installs it).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// What the CLI reads on a worker: (verb, resource) in the core group.
const CLI_READS: [(&str, &str); 3] = [("list", "pods"), ("get", "pods/log"), ("list", "events")];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn render(values: &Value) -> Vec<Value> {
    let out = Command::new("python3")
        .arg(repo().join("charts/render.py"))
        .arg(repo().join("charts/courier-worker"))
        .args(["courier-worker", "courier-system", &values.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 for charts/render.py: {e}"));
    assert!(
        out.status.success(),
        "rendering failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: Value = serde_json::from_slice(&out.stdout).expect("render.py prints JSON");
    let lint: Vec<&Value> = parsed["lint"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["severity"].as_i64().is_none_or(|s| s >= 2))
        .collect();
    assert!(lint.is_empty(), "helm lint: {lint:?}");
    let mut docs = Vec::new();
    for (path, text) in parsed["templates"].as_object().expect("templates") {
        if path.ends_with("NOTES.txt") {
            continue;
        }
        let text = text.as_str().unwrap_or_default();
        let parsed: Vec<Value> = serde_saphyr::from_multiple(text).expect("YAML");
        docs.extend(parsed.into_iter().filter(|d| !d.is_null()));
    }
    docs
}

/// (group, verb, resource) of the ClusterRole `name`, if rendered.
fn rules_of(docs: &[Value], name: &str) -> Option<BTreeSet<(String, String, String)>> {
    let role = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == name)?;
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().into_iter().flatten() {
        let list = |k: &str| -> Vec<String> {
            rule[k]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        };
        for g in list("apiGroups") {
            for r in list("resources") {
                for v in list("verbs") {
                    out.insert((g.clone(), v.clone(), r.clone()));
                }
            }
        }
    }
    Some(out)
}

#[test]
fn cli_reads_are_opt_in_and_exactly_what_the_cli_needs() {
    let off = render(&json!({}));
    assert!(
        rules_of(&off, "courier-worker-cli-reads").is_none(),
        "off by default"
    );
    let on = render(&json!({"cliReads": true, "serviceAccount": "dispatcher-eu"}));
    let expected: BTreeSet<(String, String, String)> = CLI_READS
        .iter()
        .map(|(v, r)| (String::new(), v.to_string(), r.to_string()))
        .collect();
    assert_eq!(
        rules_of(&on, "courier-worker-cli-reads"),
        Some(expected),
        "least privilege: the CLI's reads, nothing more"
    );
    let binding = on
        .iter()
        .find(|d| {
            d["kind"] == "ClusterRoleBinding" && d["roleRef"]["name"] == "courier-worker-cli-reads"
        })
        .expect("bound");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "dispatcher-eu", "namespace": "courier-system"}])
    );
    // The controller's own ClusterRole is unchanged by the switch.
    let controller = rules_of(&on, "courier-worker").expect("the controller's ClusterRole");
    assert_eq!(Some(controller.clone()), rules_of(&off, "courier-worker"));
    assert!(
        !controller
            .iter()
            .any(|(_, _, r)| r.starts_with("pods") || r == "events"),
        "{controller:?}"
    );
}
