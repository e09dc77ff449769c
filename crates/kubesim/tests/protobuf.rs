//! Protobuf request bodies over HTTPS: what kubectl sent (`testdata/protobuf/kubectl-v1.32.json`) is
//! stored exactly as the JSON the same kubectl writes for the same command, managed fields included;
//! the media-type refusals (415 for custom resources and unknown types, 406 for protobuf-only `Accept`,
//! 400 for broken bodies) answer as in the v1.36 sources.
//!
//! Broken on purpose to see it fail: with the protobuf arm removed from `http::encoding::request_body`
//! every capture answers 415 and `protobuf_and_json_bodies_store_the_same_objects` fails on the first.

use std::time::Duration;

use http_body_util::BodyExt;
use kube::client::Body;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kubesim::{Role, Sim, SimOptions};
use serde_json::{Value, json};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const QUERY: &str = "fieldManager=kubectl-create&fieldValidation=Strict";

async fn sim() -> (Sim, kube::Client) {
    let sim = Sim::start(SimOptions {
        role: Role::ApiServer,
        ..Default::default()
    })
    .await
    .unwrap();
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.default_retry = false;
    config.read_timeout = Some(Duration::from_secs(30));
    let client = kube::Client::try_from(config).unwrap();
    (sim, client)
}

/// Sends a request; returns (status, parsed JSON body or the text as a string).
async fn send(
    c: &kube::Client,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, Value) {
    let mut b = http::Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let res = c.send(b.body(Body::from(body)).unwrap()).await.unwrap();
    let code = res.status().as_u16();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (code, v)
}

fn captures() -> Vec<Value> {
    let path = kubesim::testdata::fixtures_dir("protobuf").join("kubectl-v1.32.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["captures"].as_array().unwrap().clone()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// An answer without what differs between two servers (uid, resourceVersion, times).
fn stable(mut v: Value) -> Value {
    if let Some(md) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["uid", "resourceVersion", "creationTimestamp"] {
            md.remove(k);
        }
        for e in md
            .get_mut("managedFields")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            e.as_object_mut().map(|e| e.remove("time"));
        }
        // The namespace label that carries the name is the same; uids in labels differ.
        if let Some(labels) = md.get_mut("labels").and_then(Value::as_object_mut) {
            labels.retain(|k, _| !k.contains("controller-uid"));
        }
    }
    if let Some(s) = v
        .pointer_mut("/spec/selector/matchLabels")
        .and_then(Value::as_object_mut)
    {
        s.retain(|k, _| !k.contains("controller-uid"));
    }
    if let Some(l) = v
        .pointer_mut("/spec/template/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        l.retain(|k, _| !k.contains("controller-uid"));
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_and_json_bodies_store_the_same_objects() {
    let ((pb_sim, pb), (json_sim, js)) = (sim().await, sim().await);
    let accept = "application/vnd.kubernetes.protobuf,application/json";
    let mut compared = 0;
    for c in captures() {
        let command = c["command"].as_str().unwrap();
        let uri = format!("{}?{QUERY}", c["path"].as_str().unwrap());
        let body = hex(c["protobuf"].as_str().unwrap());
        let headers = [("Content-Type", PROTOBUF), ("Accept", accept)];
        let (code, from_pb) = send(&pb, "POST", &uri, &headers, body).await;
        assert_eq!(code, 201, "{command}: {from_pb}");
        if c["json"].is_null() {
            // auth can-i: the admin may do anything.
            assert_eq!(from_pb["status"]["allowed"], true, "{command}: {from_pb}");
            assert_eq!(from_pb["spec"]["resourceAttributes"]["resource"], "jobs");
            continue;
        }
        let json_body = serde_json::to_vec(&c["json"]).unwrap();
        let headers = [("Content-Type", "application/json"), ("Accept", accept)];
        let (code, from_json) = send(&js, "POST", &uri, &headers, json_body).await;
        assert_eq!(code, 201, "{command}: {from_json}");
        assert_eq!(stable(from_pb), stable(from_json), "{command}");
        compared += 1;
    }
    assert_eq!(compared, 4);
    pb_sim.shutdown();
    json_sim.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_types_refused_as_the_real_server_refuses_them() {
    let (sim, c) = sim().await;
    let ns = &captures()[0];
    let body = hex(ns["protobuf"].as_str().unwrap());

    // An update in protobuf works like a create.
    let (code, created) = send(
        &c,
        "POST",
        "/api/v1/namespaces",
        &[("Content-Type", PROTOBUF)],
        body.clone(),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let (code, updated) = send(
        &c,
        "PUT",
        "/api/v1/namespaces/team-a",
        &[("Content-Type", PROTOBUF)],
        body.clone(),
    )
    .await;
    assert_eq!(code, 200, "{updated}");

    // A body that is not protobuf, and one whose envelope names a kind kubesim does not serve.
    let (code, s) = send(
        &c,
        "POST",
        "/api/v1/namespaces",
        &[("Content-Type", PROTOBUF)],
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        s["message"],
        "the object provided is unrecognized (must be of type Namespace): provided data does not appear to \
         be a protobuf message, expected prefix [107 56 115 0] ({})"
    );
    // A type kubesim does not decode at all.
    let (code, s) = send(
        &c,
        "POST",
        "/api/v1/namespaces",
        &[("Content-Type", "text/plain")],
        b"x".to_vec(),
    )
    .await;
    assert_eq!(
        (code, s["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    assert_eq!(
        s["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, \
         application/yaml, application/vnd.kubernetes.protobuf"
    );

    // Only protobuf accepted: kubesim answers JSON only.
    let (code, s) = send(
        &c,
        "GET",
        "/api/v1/namespaces/team-a",
        &[("Accept", PROTOBUF)],
        vec![],
    )
    .await;
    assert_eq!(
        (code, s["reason"].as_str()),
        (406, Some("NotAcceptable")),
        "{s}"
    );
    let (code, _) = send(
        &c,
        "GET",
        "/api/v1/namespaces/team-a",
        &[(
            "Accept",
            "application/vnd.kubernetes.protobuf, application/json",
        )],
        vec![],
    )
    .await;
    assert_eq!(code, 200);

    // Custom resources are JSON (or YAML) only.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
                 "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (code, s) = send(
        &c,
        "POST",
        crds,
        &[("Content-Type", "application/json")],
        serde_json::to_vec(&crd).unwrap(),
    )
    .await;
    assert_eq!(code, 201, "{s}");
    let things = "/apis/example.com/v1/things";
    let mut served = false;
    for _ in 0..100 {
        if send(&c, "GET", things, &[], vec![]).await.0 == 200 {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served, "the CRD's resource is served");
    let thing = [b"k8s\0".to_vec(), vec![0x0a, 0x0e, 0x0a, 0x0e]].concat();
    let (code, s) = send(&c, "POST", things, &[("Content-Type", PROTOBUF)], thing).await;
    assert_eq!(
        (code, s["reason"].as_str()),
        (415, Some("UnsupportedMediaType")),
        "{s}"
    );
    assert_eq!(
        s["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, \
         application/yaml"
    );
    let (code, s) = send(&c, "GET", things, &[("Accept", PROTOBUF)], vec![]).await;
    assert_eq!(
        (code, s["reason"].as_str()),
        (406, Some("NotAcceptable")),
        "{s}"
    );
    assert_eq!(
        s["message"],
        "object *unstructured.Unstructured does not implement the protobuf marshalling interface and cannot \
         be encoded to a protobuf message"
    );
    sim.shutdown();
}
