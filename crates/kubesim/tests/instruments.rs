//! The instruments tests observe Courier's promises with, through the library and the admin
//! endpoint: pod starts per origin UID (kept after the Job is deleted), the create log with the
//! creating user, and the request recorder with user, verb, code and sequence numbers.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kubesim::kinds::ssar::RuleSet;
use kubesim::{Role, Sim, SimOptions};
use serde_json::{Value, json};

async fn client(sim: &Sim, token: &str) -> Client {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_for(token)).unwrap();
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(cfg).unwrap()
}

/// A plain-HTTP request to the admin endpoint; the JSON answer.
fn admin(sim: &Sim, method: &str, path: &str) -> Value {
    let addr = sim.admin_addr.unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let body = out.split_once("\r\n\r\n").unwrap().1;
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

fn mirror(name: &str, origin_uid: &str, epoch: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"courier.dev/origin-uid": origin_uid, "courier.dev/epoch": epoch}},
        "spec": {"parallelism": 2, "completions": 2, "template": {"metadata": {"annotations": {"sim/run-seconds": "1"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .unwrap()
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// Multi-threaded: the admin calls below block their thread while the server answers on another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_starts_creates_and_writes_by_user() {
    let sim = Sim::start(SimOptions {
        role: Role::Worker,
        speed: 10.0,
        admin_port: Some(0),
        ..Default::default()
    })
    .await
    .unwrap();
    sim.add_token("alice-token", "alice", RuleSet::allow_all());
    sim.add_token("bob-token", "bob", RuleSet::allow_all());
    let alice: Api<Job> = Api::namespaced(client(&sim, "alice-token").await, "default");
    let bob: Api<Job> = Api::namespaced(client(&sim, "bob-token").await, "default");

    assert_eq!(admin(&sim, "POST", "/record/start")["recording"], true);
    alice
        .create(&PostParams::default(), &mirror("m", "uid-1", "1"))
        .await
        .unwrap();
    until("two pods started", || {
        sim.pod_starts().get("uid-1") == Some(&2)
    })
    .await;
    // The mirror goes and is made again (a second epoch): the count goes on from where it was.
    alice
        .delete("m", &DeleteParams::background())
        .await
        .unwrap();
    until("mirror gone", || {
        sim.api()
            .store
            .get(
                &kubesim::store::TableKey::new("batch", "jobs"),
                "default",
                "m",
            )
            .is_none()
    })
    .await;
    bob.create(&PostParams::default(), &mirror("m", "uid-1", "2"))
        .await
        .unwrap();
    until("four pods started", || {
        sim.pod_starts().get("uid-1") == Some(&4)
    })
    .await;
    let runs = admin(&sim, "GET", "/runs");
    assert_eq!(runs["counts"], json!({"uid-1": 4}));
    let epochs: Vec<&str> = runs["starts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["epoch"].as_str().unwrap())
        .collect();
    assert_eq!(epochs, ["1", "1", "2", "2"]);
    assert_eq!(sim.pod_start_details()[0].job, "m");

    // Every mirror ever created, with its creator, even the deleted one.
    let creates = admin(&sim, "GET", "/creates?resource=jobs");
    let who: Vec<(&str, &str)> = creates["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["user"].as_str().unwrap(),
                c["labels"]["courier.dev/epoch"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(who, [("alice", "1"), ("bob", "2")]);
    assert!(
        sim.creates(Some("pods"))
            .iter()
            .all(|c| c.user == "system:kube-controller-manager")
    );

    // Writes by identity, in order: alice created then deleted, bob created.
    let record = admin(&sim, "GET", "/record");
    let writes: Vec<(String, String, u64, u64)> = record["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| matches!(r["verb"].as_str(), Some("create" | "delete")))
        .map(|r| {
            (
                r["user"].as_str().unwrap().to_string(),
                r["verb"].as_str().unwrap().to_string(),
                r["code"].as_u64().unwrap(),
                r["seq"].as_u64().unwrap(),
            )
        })
        .collect();
    let shape: Vec<(&str, &str, u64)> = writes
        .iter()
        .map(|(u, v, c, _)| (u.as_str(), v.as_str(), *c))
        .collect();
    assert_eq!(
        shape,
        [
            ("alice", "create", 201),
            ("alice", "delete", 200),
            ("bob", "create", 201)
        ]
    );
    assert!(writes.windows(2).all(|w| w[0].3 < w[1].3), "{writes:?}");
    let stopped = admin(&sim, "POST", "/record/stop");
    assert_eq!(stopped["recording"], false);
    assert!(
        !admin(&sim, "GET", "/record")["recording"]
            .as_bool()
            .unwrap()
    );
    sim.shutdown();
}

/// Injected faults are recorded too, keyed like the request they stood in for, so a test can pair a
/// 429 with the client's retry and measure the spacing (without `record_injected` the log holds
/// only the successful create and the first assertion fails). A create (a POST to the collection,
/// no name in the URL) records the name of its object: from the body under a fault, from the
/// answer otherwise (the created object, or the Status of an AlreadyExists).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_faults_are_recorded_with_the_request_they_answered() {
    let sim = Sim::start(SimOptions {
        role: Role::Worker,
        admin_port: Some(0),
        ..Default::default()
    })
    .await
    .unwrap();
    sim.add_token("alice-token", "alice", RuleSet::allow_all());
    // Without kube's own retries (which would wait out each Retry-After, 15 times).
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_for("alice-token")).unwrap();
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    cfg.default_retry = false;
    let alice: Api<Job> = Api::namespaced(Client::try_from(cfg).unwrap(), "default");
    sim.record_requests();
    sim.set_faults(kubesim::faults::FaultConfig {
        throttle_rate: 1.0,
        retry_after_seconds: 3,
        ..Default::default()
    });
    let refused = alice
        .create(&PostParams::default(), &mirror("m", "uid-1", "1"))
        .await;
    assert!(refused.is_err(), "every request throttled");
    sim.faults().clear();
    alice
        .create(&PostParams::default(), &mirror("m", "uid-1", "1"))
        .await
        .unwrap();
    let again = alice
        .create(&PostParams::default(), &mirror("m", "uid-1", "1"))
        .await;
    assert!(
        matches!(&again, Err(kube::Error::Api(s)) if s.code == 409),
        "{again:?}"
    );
    let items = admin(&sim, "GET", "/record")["items"]
        .as_array()
        .cloned()
        .unwrap();
    let creates: Vec<&Value> = items.iter().filter(|r| r["verb"] == "create").collect();
    assert!(creates.len() >= 3, "{items:?}");
    let (first, last) = (creates[0], creates[creates.len() - 2]);
    let conflict = creates[creates.len() - 1];
    assert_eq!(
        (
            first["user"].as_str(),
            first["resource"].as_str(),
            first["namespace"].as_str(),
            first["code"].as_u64()
        ),
        (Some("alice"), Some("jobs"), Some("default"), Some(429))
    );
    assert_eq!(first["fault"], json!({"code": 429, "retryAfterSeconds": 3}));
    assert_eq!(
        (last["code"].as_u64(), last.get("fault")),
        (Some(201), None)
    );
    assert_eq!(conflict["code"], 409);
    for r in [first, last, conflict] {
        assert_eq!(
            (r["name"].as_str(), r["object"].as_str()),
            (Some(""), Some("m")),
            "{r}"
        );
    }
    sim.shutdown();
}
