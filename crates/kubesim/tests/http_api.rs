//! kubesim over HTTPS through a real kube-rs client: verbs, watch semantics, concurrency, finalizers and
//! every fault knob.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kubesim::faults::FaultConfig;
use kubesim::{Role, Sim, SimOptions};
use serde_json::json;

async fn sim(role: Role) -> Sim {
    Sim::start(SimOptions {
        role,
        speed: 20.0,
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn config(sim: &Sim) -> Config {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig()).unwrap();
    Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap()
}

async fn client(sim: &Sim) -> Client {
    Client::try_from(config(sim).await).unwrap()
}

/// A client that does not retry on its own, so tests see 429/5xx as the server sent them.
async fn raw_client(sim: &Sim, read_timeout: Option<Duration>) -> Client {
    let mut c = config(sim).await;
    c.default_retry = false;
    c.read_timeout = read_timeout;
    c.connect_timeout = Some(Duration::from_secs(2));
    Client::try_from(c).unwrap()
}

fn job(name: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"app": "t"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox:1.36"}]}}}
    }))
    .unwrap()
}

fn managed_job(name: &str) -> Job {
    let mut j = job(name);
    if let Some(s) = j.spec.as_mut() {
        s.managed_by = Some("courier.dev/dispatcher".into());
    }
    j
}

#[tokio::test]
async fn crud_through_kube_client() {
    let sim = sim(Role::ApiServer).await;
    let c = client(&sim).await;
    let nss: Api<Namespace> = Api::all(c.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "t1"}})).unwrap(),
    )
    .await
    .unwrap();
    let jobs: Api<Job> = Api::namespaced(c.clone(), "t1");
    let created = jobs
        .create(&PostParams::default(), &job("a"))
        .await
        .unwrap();
    let spec = created.spec.as_ref().unwrap();
    assert_eq!(spec.backoff_limit, Some(6), "server defaulting applied");
    assert!(spec.selector.is_some(), "selector generated");
    assert_eq!(created.metadata.generation, Some(1));

    let got = jobs.get("a").await.unwrap();
    assert_eq!(got.metadata.uid, created.metadata.uid);
    assert_eq!(
        jobs.list(&ListParams::default().labels("app=t"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert!(
        jobs.list(&ListParams::default().labels("app=other"))
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // merge, JSON, strategic and apply patches
    let p = jobs
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"m": "1"}}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.labels.unwrap()["m"], "1");
    let jp: json_patch::Patch =
        serde_json::from_value(json!([{"op": "add", "path": "/metadata/labels/j", "value": "2"}]))
            .unwrap();
    let p = jobs
        .patch("a", &PatchParams::default(), &Patch::<()>::Json(jp))
        .await
        .unwrap();
    assert_eq!(p.metadata.labels.unwrap()["j"], "2");
    let p = jobs
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"s": "3"}}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.labels.unwrap()["s"], "3");
    let applied = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a", "annotations": {"x": "y"}}});
    let p = jobs
        .patch("a", &PatchParams::apply("tester"), &Patch::Apply(applied))
        .await
        .unwrap();
    assert_eq!(p.metadata.annotations.unwrap()["x"], "y");

    // the generation moves on spec changes only
    let p = jobs
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"parallelism": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(2));

    // invalid input is refused with the server's Status
    let err = jobs
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"completionMode": "Indexed"}})),
        )
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(s.message.contains("field is immutable"), "{}", s.message);
        }
        other => panic!("unexpected {other}"),
    }

    jobs.delete("a", &DeleteParams::background()).await.unwrap();
    assert!(matches!(jobs.get("a").await, Err(kube::Error::Api(s)) if s.code == 404));
    sim.shutdown();
}

#[tokio::test]
async fn status_subresource_is_validated() {
    let sim = sim(Role::ApiServer).await;
    let jobs: Api<Job> = Api::namespaced(client(&sim).await, "default");
    jobs.create(&PostParams::default(), &managed_job("m"))
        .await
        .unwrap();
    let ok = json!({"status": {"startTime": "2025-06-01T10:00:00Z", "active": 1}});
    jobs.patch_status("m", &PatchParams::default(), &Patch::Merge(ok))
        .await
        .unwrap();
    let bad = json!({"status": {"ready": 2}});
    let err = jobs
        .patch_status("m", &PatchParams::default(), &Patch::Merge(bad))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(s) if s.code == 422 && s.message.contains("cannot set more ready pods than active"))
    );
    sim.shutdown();
}

#[tokio::test]
async fn conflicting_writers_never_lose_an_update() {
    let sim = sim(Role::ApiServer).await;
    let c = client(&sim).await;
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "n", "labels": {"count": "0"}}}))
                .unwrap(),
        )
        .await
        .unwrap();
    // Two writers read the same version; the second write must conflict.
    let a = secrets.get("n").await.unwrap();
    let mut b = a.clone();
    let mut a2 = a.clone();
    a2.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("w".into(), "a".into());
    secrets
        .replace("n", &PostParams::default(), &a2)
        .await
        .unwrap();
    b.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("w".into(), "b".into());
    let err = secrets
        .replace("n", &PostParams::default(), &b)
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 409 && s.reason == "Conflict"));

    // Many concurrent read-modify-write loops: every increment lands exactly once.
    let writers = 6;
    let each = 15;
    let mut tasks = Vec::new();
    for _ in 0..writers {
        let secrets = secrets.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for _ in 0..each {
                loop {
                    let mut s = secrets.get("n").await.unwrap();
                    let labels = s.metadata.labels.as_mut().unwrap();
                    let n: u32 = labels["count"].parse().unwrap();
                    labels.insert("count".into(), (n + 1).to_string());
                    match secrets.replace("n", &PostParams::default(), &s).await {
                        Ok(_) => break,
                        Err(kube::Error::Api(e)) if e.code == 409 => conflicts += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for t in tasks {
        conflicts += t.await.unwrap();
    }
    let end = secrets.get("n").await.unwrap();
    assert_eq!(
        end.metadata.labels.unwrap()["count"],
        (writers * each).to_string()
    );
    eprintln!("{conflicts} conflicts resolved by retrying");
    sim.shutdown();
}

async fn next_event(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<Job>>> + Unpin),
) -> WatchEvent<Job> {
    tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("event in time")
        .expect("stream open")
        .unwrap()
}

fn rv_of(e: &WatchEvent<Job>) -> String {
    match e {
        WatchEvent::Added(j) | WatchEvent::Modified(j) | WatchEvent::Deleted(j) => {
            j.metadata.resource_version.clone().unwrap()
        }
        WatchEvent::Bookmark(b) => b.metadata.resource_version.clone(),
        WatchEvent::Error(e) => panic!("watch error {e:?}"),
    }
}

#[tokio::test]
async fn watch_resumes_after_dropped_connection_without_gaps() {
    let sim = sim(Role::ApiServer).await;
    let jobs: Api<Job> = Api::namespaced(client(&sim).await, "default");
    let list = jobs.list(&ListParams::default()).await.unwrap();
    let start = list.metadata.resource_version.unwrap();
    let mut stream = jobs
        .watch(&WatchParams::default(), &start)
        .await
        .unwrap()
        .boxed();
    jobs.create(&PostParams::default(), &managed_job("w1"))
        .await
        .unwrap();
    let e1 = next_event(&mut stream).await;
    assert!(matches!(&e1, WatchEvent::Added(j) if j.metadata.name.as_deref() == Some("w1")));
    let last = rv_of(&e1);

    sim.drop_watches();
    // The stream ends; changes made meanwhile are replayed when resuming from the last version seen.
    let end = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap();
    assert!(end.is_none(), "the dropped watch ends");
    jobs.create(&PostParams::default(), &managed_job("w2"))
        .await
        .unwrap();
    jobs.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
    )
    .await
    .unwrap();
    let mut resumed = jobs
        .watch(&WatchParams::default(), &last)
        .await
        .unwrap()
        .boxed();
    let a = next_event(&mut resumed).await;
    let b = next_event(&mut resumed).await;
    assert!(matches!(&a, WatchEvent::Added(j) if j.metadata.name.as_deref() == Some("w2")));
    assert!(matches!(&b, WatchEvent::Modified(j) if j.metadata.name.as_deref() == Some("w1")));
    assert!(rv_of(&a).parse::<u64>().unwrap() < rv_of(&b).parse::<u64>().unwrap());
    sim.shutdown();
}

#[tokio::test]
async fn bookmarks_and_server_side_timeout() {
    let sim = sim(Role::ApiServer).await;
    let jobs: Api<Job> = Api::namespaced(client(&sim).await, "default");
    let rv = jobs
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let wp = WatchParams {
        bookmarks: true,
        ..WatchParams::default()
    }
    .timeout(2);
    let started = Instant::now();
    let events: Vec<_> = jobs
        .watch(&wp, &rv)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "closed by the server at timeoutSeconds"
    );
    assert!(started.elapsed() < Duration::from_secs(4));
    assert!(
        events.iter().any(|e| matches!(e, WatchEvent::Bookmark(_))),
        "a bookmark before the timeout: {events:?}"
    );
    sim.shutdown();
}

#[tokio::test]
async fn compaction_makes_old_versions_expire() {
    let sim = sim(Role::ApiServer).await;
    let jobs: Api<Job> = Api::namespaced(client(&sim).await, "default");
    let rv = jobs
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    jobs.create(&PostParams::default(), &managed_job("c1"))
        .await
        .unwrap();
    sim.compact();
    let mut s = jobs
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let e = tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .unwrap()
        .unwrap();
    match e {
        Ok(WatchEvent::Error(e)) => assert_eq!(e.code, 410),
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
    sim.shutdown();
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let sim = sim(Role::ApiServer).await;
    let jobs: Api<Job> = Api::namespaced(client(&sim).await, "default");
    let mut j = managed_job("f");
    j.metadata.finalizers = Some(vec!["courier.dev/mirror-cleanup".into()]);
    jobs.create(&PostParams::default(), &j).await.unwrap();
    jobs.delete("f", &DeleteParams::background()).await.unwrap();
    let held = jobs.get("f").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    let err = jobs
        .patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["courier.dev/mirror-cleanup", "x.io/new"]}}),
            ),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 422));
    jobs.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(matches!(jobs.get("f").await, Err(kube::Error::Api(s)) if s.code == 404));
    sim.shutdown();
}

#[tokio::test]
async fn fault_latency_errors_and_throttling() {
    let sim = sim(Role::ApiServer).await;
    let c = raw_client(&sim, Some(Duration::from_secs(5))).await;
    let jobs: Api<Job> = Api::namespaced(c, "default");
    sim.set_faults(FaultConfig {
        latency_ms: 300,
        ..Default::default()
    });
    let t = Instant::now();
    jobs.list(&ListParams::default()).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));

    sim.set_faults(FaultConfig {
        error_rate: 1.0,
        ..Default::default()
    });
    assert!(
        matches!(jobs.list(&ListParams::default()).await, Err(kube::Error::Api(s)) if s.code == 500)
    );

    // The default form is the priority-and-fairness filter's: plain text, the wait only in the
    // header (kube's `Error::Api` then has no details; kube reconstructs a Status from the text).
    sim.set_faults(FaultConfig {
        throttle_rate: 1.0,
        retry_after_seconds: 7,
        ..Default::default()
    });
    let client = jobs.clone().into_client();
    let raw = || {
        client.send(
            http::Request::get("/apis/batch/v1/namespaces/default/jobs")
                .body(kube::client::Body::from(Vec::new()))
                .unwrap(),
        )
    };
    let text = raw().await.unwrap();
    assert_eq!(text.status().as_u16(), 429);
    let header = |r: &http::Response<kube::client::Body>, name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    assert_eq!(header(&text, "retry-after").as_deref(), Some("7"));
    assert_eq!(
        header(&text, "content-type").as_deref(),
        Some("text/plain; charset=utf-8")
    );
    let body = http_body_util::BodyExt::collect(text.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(&body[..], b"Too many requests, please try again later.\n");

    // The Status form (`apierrors.NewTooManyRequests`): the wait in the body and the header.
    sim.set_faults(FaultConfig {
        throttle_rate: 1.0,
        retry_after_seconds: 7,
        throttle_body: kubesim::faults::ThrottleBody::Status,
        ..Default::default()
    });
    match jobs.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 429);
            assert_eq!(s.reason, "TooManyRequests");
            assert_eq!(s.details.map(|d| d.retry_after_seconds), Some(7));
        }
        other => panic!("expected 429, got {other:?}"),
    }
    let status = raw().await.unwrap();
    assert_eq!(status.status().as_u16(), 429);
    assert_eq!(header(&status, "retry-after").as_deref(), Some("7"));
    sim.faults().clear();
    jobs.list(&ListParams::default()).await.unwrap();
    sim.shutdown();
}

#[tokio::test]
async fn fault_blackhole_and_refused_connections() {
    let sim = sim(Role::ApiServer).await;
    sim.set_faults(FaultConfig {
        blackhole: true,
        ..Default::default()
    });
    let jobs: Api<Job> = Api::namespaced(
        raw_client(&sim, Some(Duration::from_millis(500))).await,
        "default",
    );
    let t = Instant::now();
    let r = jobs.list(&ListParams::default()).await;
    assert!(r.is_err(), "a blackholed server never answers");
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "the client gave up on its own timeout"
    );
    sim.faults().clear();
    let jobs: Api<Job> = Api::namespaced(
        raw_client(&sim, Some(Duration::from_secs(5))).await,
        "default",
    );
    jobs.list(&ListParams::default()).await.unwrap();

    sim.set_faults(FaultConfig {
        refuse: true,
        ..Default::default()
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let fresh: Api<Job> = Api::namespaced(
        raw_client(&sim, Some(Duration::from_secs(5))).await,
        "default",
    );
    let t = Instant::now();
    let err = fresh.list(&ListParams::default()).await.unwrap_err();
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "refused, not hanging: {err}"
    );
    let msg = format!("{err:?}").to_lowercase();
    assert!(msg.contains("refused") || msg.contains("connect"), "{msg}");
    sim.faults().clear();
    tokio::time::sleep(Duration::from_millis(200)).await;
    fresh.list(&ListParams::default()).await.unwrap();
    sim.shutdown();
}

#[tokio::test]
async fn restart_ends_watches_and_keeps_data() {
    let sim = sim(Role::ApiServer).await;
    let jobs: Api<Job> = Api::namespaced(client(&sim).await, "default");
    jobs.create(&PostParams::default(), &managed_job("keep"))
        .await
        .unwrap();
    let rv = jobs
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut s = jobs
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    sim.restart();
    let end = tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .unwrap();
    assert!(
        !matches!(end, Some(Ok(_))),
        "the watch ends with the restart"
    );
    assert_eq!(
        jobs.get("keep").await.unwrap().metadata.name.as_deref(),
        Some("keep")
    );
    sim.shutdown();
}

#[tokio::test]
async fn tokens_without_rights_are_forbidden_and_unknown_tokens_unauthorized() {
    let sim = sim(Role::ApiServer).await;
    sim.add_token("weak", "weak-user", kubesim::kinds::ssar::RuleSet::none());
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_for("weak")).unwrap();
    let weak = Client::try_from(
        Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let jobs: Api<Job> = Api::namespaced(weak, "default");
    let err = jobs.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403 && s.message.contains("User \"weak-user\" cannot list resource \"jobs\"")),
        "{err}"
    );
    sim.revoke_token("weak");
    assert!(
        matches!(jobs.list(&ListParams::default()).await, Err(kube::Error::Api(s)) if s.code == 401)
    );
    sim.shutdown();
}

#[tokio::test]
async fn kubeconfig_verifies_tls_against_the_generated_ca() {
    let a = sim(Role::ApiServer).await;
    let b = sim(Role::ApiServer).await;
    // A's kubeconfig pointed at B's address: B's certificate is not signed by A's CA.
    let kc = a.kubeconfig().replace(&a.url(), &b.url());
    let cfg = Config::from_custom_kubeconfig(
        Kubeconfig::from_yaml(&kc).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let c = Client::try_from(cfg).unwrap();
    let jobs: Api<Job> = Api::namespaced(c, "default");
    assert!(
        jobs.list(&ListParams::default()).await.is_err(),
        "TLS verification must fail"
    );
    a.shutdown();
    b.shutdown();
}

#[tokio::test]
async fn recorded_requests_name_user_verb_resource_subresource_and_namespace() {
    let sim = sim(Role::ApiServer).await;
    let admin = client(&sim).await;
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "default");
    jobs.create(&PostParams::default(), &job("before"))
        .await
        .unwrap();
    sim.record_requests();
    jobs.get("before").await.unwrap();
    jobs.patch_status(
        "before",
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {}})),
    )
    .await
    .unwrap();
    sim.add_token("weak", "weak-user", kubesim::kinds::ssar::RuleSet::none());
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_for("weak")).unwrap();
    let weak = Client::try_from(
        Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let all: Api<Job> = Api::all(weak);
    assert!(all.list(&ListParams::default()).await.is_err());

    let seen: Vec<_> = sim
        .recorded_requests()
        .into_iter()
        .map(|r| {
            let a = r.attributes;
            (
                r.user,
                a.verb,
                a.group,
                a.resource,
                a.subresource,
                a.namespace,
                a.name,
                r.allowed,
            )
        })
        .collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        seen,
        vec![
            (
                s("kubesim-admin"),
                s("get"),
                s("batch"),
                s("jobs"),
                s(""),
                s("default"),
                s("before"),
                true
            ),
            (
                s("kubesim-admin"),
                s("patch"),
                s("batch"),
                s("jobs"),
                s("status"),
                s("default"),
                s("before"),
                true
            ),
            (
                s("weak-user"),
                s("list"),
                s("batch"),
                s("jobs"),
                s(""),
                s(""),
                s(""),
                false
            ),
        ],
        "the create before recording started is not there"
    );
    sim.shutdown();
}
