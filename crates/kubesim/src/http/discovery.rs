//! Discovery documents, shaped like the real server's, listing exactly what kubesim serves.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::api::{Registry, Served};

/// Group order of the real server's `/apis` (its registration priority); groups not listed (custom
/// resources) follow in name order.
const GROUP_ORDER: &[&str] = &[
    "apiregistration.k8s.io",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "resource.k8s.io",
    "flowcontrol.apiserver.k8s.io",
];

/// `/version`.
pub fn version(git_version: &str) -> Value {
    let (major, minor) = parse_version(git_version);
    json!({
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "minCompatibilityMajor": major,
        "minCompatibilityMinor": minor.parse::<u32>().map(|m| m.saturating_sub(1).to_string()).unwrap_or_default(),
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "kubesim",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else { std::env::consts::ARCH }),
    })
}

fn parse_version(v: &str) -> (String, String) {
    let core = v.trim_start_matches('v');
    let mut it = core.split(['.', '-', '+']);
    (
        it.next().unwrap_or("1").to_string(),
        it.next().unwrap_or("0").to_string(),
    )
}

/// The served resources of one group, by version.
type Versions = BTreeMap<String, Vec<Arc<Served>>>;

/// Served resources grouped as `group -> version -> [served]`.
fn grouped(reg: &Registry) -> BTreeMap<String, Versions> {
    let mut out: BTreeMap<String, Versions> = BTreeMap::new();
    for s in reg.all() {
        let i = s.info();
        out.entry(i.group.clone())
            .or_default()
            .entry(i.version.clone())
            .or_default()
            .push(s);
    }
    out
}

fn ordered_groups(reg: &Registry) -> Vec<(String, Versions)> {
    let mut groups: Vec<_> = grouped(reg)
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .collect();
    groups.sort_by_key(|(g, _)| {
        (
            GROUP_ORDER
                .iter()
                .position(|x| x == g)
                .unwrap_or(usize::MAX),
            g.clone(),
        )
    });
    groups
}

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]})
}

fn group_entry(name: &str, versions: &Versions) -> Value {
    let vs: Vec<Value> = versions
        .keys()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = vs.first().cloned().unwrap_or(Value::Null);
    json!({"name": name, "versions": vs, "preferredVersion": preferred})
}

/// `/apis`.
pub fn groups(reg: &Registry) -> Value {
    let gs: Vec<Value> = ordered_groups(reg)
        .iter()
        .map(|(g, vs)| group_entry(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `/apis/<group>`, or None when the group is not served.
pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    let g = grouped(reg);
    let vs = g.get(name).filter(|_| !name.is_empty())?;
    let mut v = group_entry(name, vs);
    if let Value::Object(m) = &mut v {
        let mut out = Map::new();
        out.insert("kind".into(), json!("APIGroup"));
        out.insert("apiVersion".into(), json!("v1"));
        out.extend(std::mem::take(m));
        return Some(Value::Object(out));
    }
    None
}

fn resource_entries(list: &[Arc<Served>]) -> Vec<Value> {
    let mut entries: Vec<(String, Value)> = Vec::new();
    for s in list {
        let i = s.info();
        let mut e = Map::new();
        e.insert("name".into(), json!(i.plural));
        e.insert("singularName".into(), json!(i.singular));
        e.insert("namespaced".into(), json!(i.namespaced));
        e.insert("kind".into(), json!(i.kind));
        e.insert("verbs".into(), json!(i.verbs));
        if !i.short_names.is_empty() {
            e.insert("shortNames".into(), json!(i.short_names));
        }
        if !i.categories.is_empty() {
            e.insert("categories".into(), json!(i.categories));
        }
        if let Some(h) = &i.storage_version_hash {
            e.insert("storageVersionHash".into(), json!(h));
        }
        entries.push((i.plural.clone(), Value::Object(e)));
        let mut subs: Vec<(&str, Vec<&str>)> = s
            .strategy
            .extra_subresources()
            .iter()
            .map(|(n, v)| (*n, v.to_vec()))
            .collect();
        if i.status_subresource {
            subs.push(("status", vec!["get", "patch", "update"]));
        }
        for (sub, verbs) in subs {
            let name = format!("{}/{sub}", i.plural);
            let mut e = json!({"name": name, "singularName": "", "namespaced": i.namespaced, "kind": i.kind, "verbs": verbs});
            if let Some((group, version, kind)) = s.strategy.subresource_kind(sub) {
                e["group"] = json!(group);
                e["version"] = json!(version);
                e["kind"] = json!(kind);
            }
            entries.push((name.clone(), e));
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.into_iter().map(|(_, v)| v).collect()
}

/// `/api/v1` or `/apis/<group>/<version>`, or None when not served.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let g = grouped(reg);
    let list = g.get(group)?.get(version)?;
    let resources = resource_entries(list);
    Some(if group.is_empty() {
        json!({"kind": "APIResourceList", "groupVersion": version, "resources": resources})
    } else {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/{version}"), "resources": resources})
    })
}

fn aggregated_version(version: &str, list: &[Arc<Served>]) -> Value {
    let mut list: Vec<&Arc<Served>> = list.iter().collect();
    list.sort_by(|a, b| a.info().plural.cmp(&b.info().plural));
    let resources: Vec<Value> = list
        .iter()
        .map(|s| {
            let i = s.info();
            let kind = json!({"group": "", "version": "", "kind": i.kind});
            let mut e = Map::new();
            e.insert("resource".into(), json!(i.plural));
            e.insert("responseKind".into(), kind.clone());
            e.insert(
                "scope".into(),
                json!(if i.namespaced {
                    "Namespaced"
                } else {
                    "Cluster"
                }),
            );
            e.insert("singularResource".into(), json!(i.singular));
            e.insert("verbs".into(), json!(i.verbs));
            if !i.short_names.is_empty() {
                e.insert("shortNames".into(), json!(i.short_names));
            }
            if !i.categories.is_empty() {
                e.insert("categories".into(), json!(i.categories));
            }
            let mut subs: Vec<(String, Vec<String>)> = s
                .strategy
                .extra_subresources()
                .iter()
                .map(|(n, v)| (n.to_string(), v.iter().map(|x| x.to_string()).collect()))
                .collect();
            if i.status_subresource {
                subs.push((
                    "status".into(),
                    vec!["get".into(), "patch".into(), "update".into()],
                ));
            }
            subs.sort();
            if !subs.is_empty() {
                let subs: Vec<Value> = subs
                    .into_iter()
                    .map(|(n, v)| {
                        let kind = match s.strategy.subresource_kind(&n) {
                            Some((g, ver, k)) => json!({"group": g, "version": ver, "kind": k}),
                            None => kind.clone(),
                        };
                        json!({"subresource": n, "responseKind": kind, "verbs": v})
                    })
                    .collect();
                e.insert("subresources".into(), json!(subs));
            }
            Value::Object(e)
        })
        .collect();
    json!({"version": version, "resources": resources, "freshness": "Current"})
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2`) for `/api` (core) or `/apis` (groups).
pub fn aggregated(reg: &Registry, core: bool) -> Value {
    let items: Vec<Value> = if core {
        grouped(reg)
            .get("")
            .map(|vs| {
                vec![json!({"metadata": {}, "versions": vs.iter().map(|(v, l)| aggregated_version(v, l)).collect::<Vec<_>>()})]
            })
            .unwrap_or_default()
    } else {
        ordered_groups(reg)
            .iter()
            .map(|(g, vs)| {
                json!({"metadata": {"name": g}, "versions": vs.iter().map(|(v, l)| aggregated_version(v, l)).collect::<Vec<_>>()})
            })
            .collect()
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}
