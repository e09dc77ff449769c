//! kubesim's discovery documents against the recorded ones (scenario `discovery`, skipped in the replay
//! because kubesim serves a subset of a full control plane): every entry kubesim serves must equal the
//! recorded entry for the same resource, the documents must have the recorded shape, and everything
//! kubesim serves must exist in the recording.

use std::collections::BTreeMap;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kubesim::{Role, Sim, SimOptions};
use serde_json::Value;

fn recorded() -> BTreeMap<String, Value> {
    let path = kubesim::testdata::fixtures_dir("apiserver").join("discovery.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["response"]["body"].clone(),
            )
        })
        .collect()
}

async fn get(sim: &Sim, path: &str, accept: Option<&str>) -> (u16, Value) {
    let cfg = kube::Config::from_custom_kubeconfig(
        Kubeconfig::from_yaml(&sim.kubeconfig()).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(cfg).unwrap();
    let mut req = http::Request::get(path);
    if let Some(a) = accept {
        req = req.header("Accept", a);
    }
    let resp = client
        .send(req.body(kube::client::Body::empty()).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (
        code,
        serde_json::from_slice(&body)
            .unwrap_or(Value::String(String::from_utf8_lossy(&body).into())),
    )
}

/// Each of `ours[key]` equals the recorded entry with the same `key` value.
fn entries_match(ours: &Value, rec: &Value, key: &str, what: &str) {
    let rec: BTreeMap<&str, &Value> = rec
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e[key].as_str().unwrap(), e))
        .collect();
    let ours = ours.as_array().unwrap();
    assert!(!ours.is_empty(), "{what}: nothing served");
    for e in ours {
        let name = e[key].as_str().unwrap();
        let r = rec
            .get(name)
            .unwrap_or_else(|| panic!("{what}: {name} is served but not in the recording"));
        // kubesim serves a subset of some resources' subresources (pods: log and status): those it
        // lists must be the recorded ones.
        let mut r = (*r).clone();
        if let (Some(ours), Some(Value::Array(subs))) = (
            e.get("subresources").and_then(Value::as_array),
            r.get_mut("subresources"),
        ) {
            subs.retain(|s| ours.iter().any(|o| o["subresource"] == s["subresource"]));
        }
        assert_eq!(e, &r, "{what}: entry {name}");
    }
}

#[tokio::test]
async fn discovery_documents_match_the_recorded_entries() {
    let sim = Sim::start(SimOptions {
        role: Role::ApiServer,
        ..Default::default()
    })
    .await
    .unwrap();
    let rec = recorded();

    let (code, v) = get(&sim, "/version", None).await;
    assert_eq!(code, 200);
    for k in [
        "major",
        "minor",
        "gitVersion",
        "goVersion",
        "platform",
        "buildDate",
    ] {
        assert!(
            v.get(k).is_some() && rec["GET /version"].get(k).is_some(),
            "/version.{k}"
        );
    }
    assert_eq!(v["major"], "1");
    assert_eq!(v["minor"], "36");

    let (_, v) = get(&sim, "/api", None).await;
    assert_eq!(v["kind"], rec["GET /api"]["kind"]);
    assert_eq!(v["versions"], rec["GET /api"]["versions"]);

    let (_, v) = get(&sim, "/api/v1", None).await;
    assert_eq!(v["kind"], "APIResourceList");
    assert_eq!(v.get("apiVersion"), rec["GET /api/v1"].get("apiVersion"));
    entries_match(
        &v["resources"],
        &rec["GET /api/v1"]["resources"],
        "name",
        "/api/v1",
    );

    let (_, v) = get(&sim, "/apis", None).await;
    assert_eq!(v["kind"], "APIGroupList");
    entries_match(&v["groups"], &rec["GET /apis"]["groups"], "name", "/apis");
    // Groups come in the real server's order.
    let order: Vec<&str> = rec["GET /apis"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    let ours: Vec<&str> = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = order.iter().copied().filter(|g| ours.contains(g)).collect();
    assert_eq!(ours, expected);

    assert_eq!(
        get(&sim, "/apis/batch", None).await.1,
        rec["GET /apis/batch"]
    );
    for gv in [
        "batch/v1",
        "coordination.k8s.io/v1",
        "apiextensions.k8s.io/v1",
        "events.k8s.io/v1",
    ] {
        let (_, v) = get(&sim, &format!("/apis/{gv}"), None).await;
        let r = &rec[&format!("GET /apis/{gv}")];
        assert_eq!(v["groupVersion"], r["groupVersion"]);
        entries_match(&v["resources"], &r["resources"], "name", gv);
    }
    // Fully served groups are identical, entry for entry.
    for gv in [
        "coordination.k8s.io/v1",
        "apiextensions.k8s.io/v1",
        "events.k8s.io/v1",
    ] {
        assert_eq!(
            get(&sim, &format!("/apis/{gv}"), None).await.1,
            rec[&format!("GET /apis/{gv}")],
            "{gv}"
        );
    }

    let agg =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    for (path, step) in [
        ("/api", "GET /api aggregated v2"),
        ("/apis", "GET /apis aggregated v2"),
    ] {
        let (_, v) = get(&sim, path, Some(agg)).await;
        let r = &rec[step];
        assert_eq!(v["kind"], r["kind"]);
        assert_eq!(v["apiVersion"], r["apiVersion"]);
        let rec_groups: BTreeMap<String, &Value> = r["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| (g["metadata"]["name"].as_str().unwrap_or("").to_string(), g))
            .collect();
        for g in v["items"].as_array().unwrap() {
            let name = g["metadata"]["name"].as_str().unwrap_or("");
            let rg = rec_groups
                .get(name)
                .unwrap_or_else(|| panic!("aggregated group {name:?} not recorded"));
            for (ver, rver) in g["versions"]
                .as_array()
                .unwrap()
                .iter()
                .zip(rg["versions"].as_array().unwrap())
            {
                assert_eq!(ver["version"], rver["version"]);
                assert_eq!(ver["freshness"], rver["freshness"]);
                entries_match(
                    &ver["resources"],
                    &rver["resources"],
                    "resource",
                    &format!("aggregated {name}"),
                );
            }
        }
    }

    let (code, body) = get(&sim, "/apis/batch/v2", None).await;
    assert_eq!(
        (code, body),
        (404, rec["GET /apis/batch/v2 (unknown version)"].clone())
    );
    let (code, body) = get(&sim, "/apis/nope.example.com/v1/things", None).await;
    assert_eq!((code, body), (404, rec["GET unknown path"].clone()));
    assert_eq!(get(&sim, "/apis/courier.dev/v1alpha1", None).await.0, 404);
    sim.shutdown();
}
