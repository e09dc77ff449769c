//! Dependencies by layer (issue #15 §6): the pure core and the API types link no Kubernetes client.
//! Reads the resolved dependency graph from `cargo metadata` and walks the normal (non-dev,
//! non-build) edges from courier-core and courier-api.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Crates that are (or pull in) the kube client, its runtime or an HTTP stack.
const CLIENT_CRATES: [&str; 6] = [
    "kube",
    "kube-client",
    "kube-runtime",
    "hyper",
    "tokio",
    "rustls",
];

/// The host's target triple, as cargo reports it (`cargo -vV`: `host: x86_64-unknown-linux-gnu`).
fn host_triple() -> String {
    let out = Command::new(env!("CARGO"))
        .arg("-vV")
        .output()
        .expect("cargo -vV runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .unwrap_or_else(|| panic!("no host line in `cargo -vV`:\n{text}"))
        .to_string()
}

/// The graph as resolved for this host. Offline, `cargo metadata` needs every package of the
/// graph it prints already downloaded, and a build downloads only the host's: without the platform
/// filter a fresh machine fails on crates of other platforms (`android_system_properties`).
fn metadata() -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let host = host_triple();
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        .args(["--filter-platform", &host])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// Package id -> (crate name, ids of its normal dependencies).
fn normal_graph(meta: &Value) -> BTreeMap<String, (String, Vec<String>)> {
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?)))
        .collect();
    let mut graph = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().expect("resolve nodes") {
        let id = node["id"].as_str().expect("node id");
        let deps = node["deps"]
            .as_array()
            .expect("deps")
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|k| k["kind"].is_null()))
            })
            .filter_map(|d| d["pkg"].as_str().map(str::to_string))
            .collect();
        let name = names.get(id).copied().unwrap_or(id).to_string();
        graph.insert(id.to_string(), (name, deps));
    }
    graph
}

/// Every crate reachable from `root` through normal dependencies.
fn reachable(graph: &BTreeMap<String, (String, Vec<String>)>, root: &str) -> BTreeSet<String> {
    let start = graph
        .iter()
        .find(|(_, (name, _))| name == root)
        .map(|(id, _)| id.clone())
        .expect("the crate is in the workspace");
    let mut seen = BTreeSet::from([start.clone()]);
    let mut todo = vec![start];
    while let Some(id) = todo.pop() {
        for dep in graph
            .get(&id)
            .map(|(_, d)| d.as_slice())
            .unwrap_or_default()
        {
            if seen.insert(dep.clone()) {
                todo.push(dep.clone());
            }
        }
    }
    seen.iter()
        .filter_map(|id| graph.get(id).map(|(name, _)| name.clone()))
        .collect()
}

fn client_crates_under(deps: &BTreeSet<String>) -> Vec<&'static str> {
    CLIENT_CRATES
        .into_iter()
        .filter(|c| deps.contains(*c))
        .collect()
}

#[test]
fn the_core_and_the_api_link_no_kube_client() {
    let graph = normal_graph(&metadata());
    for krate in ["courier-core", "courier-api"] {
        let deps = reachable(&graph, krate);
        assert!(
            deps.contains("kube-core"),
            "{krate}: the walk must see kube-core (else it proves nothing)"
        );
        assert_eq!(
            client_crates_under(&deps),
            Vec::<&str>::new(),
            "{krate} must not depend on the kube client or an HTTP/async stack; use kube-core \
             (types) and kube-derive (the CRD derive) instead"
        );
    }
    // The check can fail: the controller links the client.
    let controller = reachable(&graph, "courier-controller");
    assert!(client_crates_under(&controller).contains(&"kube-client"));
}
