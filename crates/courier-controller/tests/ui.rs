//! The web view bound to a non-loopback address: every request needs a bearer token the
//! management cluster accepts (TokenReview), and each caller sees only the namespaces they may list
//! Jobs in and the clusters page only if they may list WorkerClusters (SubjectAccessReview). The
//! answers are cached: repeated page views send no review. (Checked by breaking it: with the
//! namespace filter removed from the Jobs page, alice saw team-b's Job and this failed.)

mod support;

use std::time::Duration;

use kube::api::{DynamicObject, PostParams};
use kubesim::kinds::ssar::{Rule, RuleSet};
use serde_json::Value;
use support::*;

const CTL_USER: &str = "system:serviceaccount:courier-system:courier";

async fn get_as(port: u16, path: &str, token: Option<&str>) -> (u16, String, String) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    http_request(port, "GET", path, &headers, "").await
}

fn job_names(json: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    v["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{}/{}",
                r["namespace"].as_str().unwrap_or(""),
                r["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_loopback_every_caller_is_reviewed_and_sees_only_their_namespaces() {
    init_tracing();
    let mgmt = sim(kubesim::Role::Management, "mgmt").await;
    let w1 = sim(kubesim::Role::Worker, "w1").await;
    let mc = client_for(&mgmt.kubeconfig()).await;
    install_crd(&mc).await;
    ensure_namespace(&mc, NS).await;
    ensure_namespace(&mc, JOBS_NS).await;
    ensure_namespace(&mc, "team-b").await;
    register(&mc, "w1", &w1.kubeconfig(), &[]).await;
    mgmt.add_token("ctl", CTL_USER, RuleSet::allow_all());
    let list_jobs = |ns: &[&str]| Rule::new(&["list"], &["batch"], &["jobs"]).in_namespaces(ns);
    mgmt.add_token(
        "alice-token",
        "alice",
        RuleSet {
            allow: vec![list_jobs(&[JOBS_NS])],
            deny: Vec::new(),
        },
    );
    mgmt.add_token(
        "bob-token",
        "bob",
        RuleSet {
            allow: vec![
                Rule::new(&["list"], &["batch"], &["jobs"]),
                Rule::new(&["list"], &["courier.dev"], &["workerclusters"]),
            ],
            deny: Vec::new(),
        },
    );
    mgmt.add_token("carol-token", "carol", RuleSet::none());

    // A free port, bound on every address: not loopback, so access is reviewed.
    let port = free_port_any();
    let cfg = courier_controller::ControllerConfig {
        ui_addr: Some(
            format!("0.0.0.0:{port}")
                .parse()
                .unwrap_or_else(|e| panic!("{e}")),
        ),
        ..config()
    };
    let (handle, stop, task) =
        start_controller(client_for(&mgmt.kubeconfig_for("ctl")).await, cfg).await;

    submit(&mc, job("mine", 600)).await;
    let mut theirs = job("theirs", 600);
    theirs["metadata"]["namespace"] = "team-b".into();
    let obj: DynamicObject = serde_json::from_value(theirs).unwrap_or_else(|e| panic!("{e}"));
    jobs(&mc, "team-b")
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eventually(
        "both Jobs in the controller's cache",
        Duration::from_secs(15),
        || {
            let h = handle.clone();
            async move { (h.jobs().len() == 2).then_some(()) }
        },
    )
    .await;

    // No token, or one the cluster does not know: 401, the sign-in page for a browser.
    let (code, head, _) = get_as(port, "/api/jobs", None).await;
    assert_eq!(code, 401);
    assert!(head.contains("www-authenticate: Bearer"), "{head}");
    let (code, _, page) = get_as(port, "/jobs", Some("made-up")).await;
    assert_eq!(code, 401);
    assert!(
        page.contains("does not accept this token") && page.contains("<form"),
        "{page}"
    );

    mgmt.record_requests();
    // alice lists Jobs in team-a only, and may not see the clusters.
    let (code, _, body) = get_as(port, "/api/jobs", Some("alice-token")).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(job_names(&body), ["team-a/mine"]);
    let (code, _, _) = get_as(port, "/api/jobs/team-b/theirs", Some("alice-token")).await;
    assert_eq!(code, 404, "another namespace's Job is not even named");
    let (code, _, body) = get_as(port, "/api/jobs/team-a/mine", Some("alice-token")).await;
    assert_eq!(code, 200, "{body}");
    let (code, _, body) = get_as(port, "/clusters", Some("alice-token")).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("workerclusters"), "{body}");
    let (code, _, page) = get_as(port, "/jobs", Some("alice-token")).await;
    assert_eq!(code, 200);
    assert!(page.contains("/jobs/team-a/mine") && !page.contains("theirs"));
    assert!(page.contains("alice"), "the signed-in user is shown");
    let first_reviews = mgmt
        .recorded_requests()
        .iter()
        .filter(|r| r.user == CTL_USER && r.attributes.resource.ends_with("reviews"))
        .count();
    assert!(
        first_reviews >= 3,
        "token and access reviews were sent ({first_reviews})"
    );

    // The same views again: answered from the caches, no review at all.
    for _ in 0..10 {
        let (code, _, _) = get_as(port, "/api/jobs", Some("alice-token")).await;
        assert_eq!(code, 200);
    }
    let reviews = mgmt
        .recorded_requests()
        .iter()
        .filter(|r| r.user == CTL_USER && r.attributes.resource.ends_with("reviews"))
        .count();
    assert_eq!(reviews, first_reviews, "repeated page views sent reviews");

    // bob may list Jobs everywhere and the clusters; carol nothing.
    let (_, _, body) = get_as(port, "/api/jobs", Some("bob-token")).await;
    let mut names = job_names(&body);
    names.sort();
    assert_eq!(names, ["team-a/mine", "team-b/theirs"]);
    let (code, _, body) = get_as(port, "/api/clusters", Some("bob-token")).await;
    assert_eq!(code, 200);
    assert!(body.contains("\"name\":\"w1\""), "{body}");
    let (_, _, body) = get_as(port, "/api/jobs", Some("carol-token")).await;
    assert!(job_names(&body).is_empty(), "{body}");

    // The sign-in form sets an HTTP-only cookie that then stands for the token.
    let (code, head, _) = http_request(
        port,
        "POST",
        "/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        "token=alice-token",
    )
    .await;
    assert_eq!(code, 303, "{head}");
    assert!(
        head.contains("courier_token=alice-token; Path=/; HttpOnly; SameSite=Strict"),
        "{head}"
    );
    let (code, _, body) = http_request(
        port,
        "GET",
        "/api/jobs",
        &[("Cookie", "courier_token=alice-token")],
        "",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(job_names(&body), ["team-a/mine"]);
    let (code, _, _) = http_request(
        port,
        "POST",
        "/login",
        &[("Origin", "http://evil.example")],
        "token=alice-token",
    )
    .await;
    assert_eq!(code, 403, "a cross-site sign-in is refused");

    // Read-only.
    for method in ["PUT", "DELETE", "PATCH"] {
        let (code, _, _) = http_request(
            port,
            method,
            "/api/jobs/team-a/mine",
            &[("Authorization", "Bearer bob-token")],
            "",
        )
        .await;
        assert_eq!(code, 405, "{method}");
    }

    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(15), task).await;
    mgmt.shutdown();
    w1.shutdown();
}
