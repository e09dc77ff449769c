//! `courier_controller::api_calls` against reality: a dispatch scenario in process (leader election,
//! dispatch, status, a spec change flowing down, deletion, garbage collection) with kubesim recording
//! every request. Each request the controller's own users sent must be a row of the table (verb,
//! group, resource, subresource, and a namespace allowed by the row's scope). The chart tests then
//! check that the charts grant every row, so together: the charts grant what the code does.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use courier_controller::ControllerConfig;
use courier_controller::api_calls::{self, ApiCall, Scope, Target};
use kubesim::kinds::ssar::RuleSet;
use kubesim::record::RecordedRequest;
use serde_json::json;
use support::*;

fn fits(row: &ApiCall, target: Target, r: &RecordedRequest) -> bool {
    let a = &r.attributes;
    row.target == target
        && row.verb == a.verb
        && row.group == a.group
        && row.resource == a.resource
        && row.subresource == a.subresource
        && (row.name.is_empty() || row.name == a.name)
        && match row.scope {
            Scope::AnyNamespace => true,
            Scope::OwnNamespace => a.namespace == NS,
            Scope::Cluster => a.namespace.is_empty(),
        }
}

fn describe(r: &RecordedRequest) -> String {
    let a = &r.attributes;
    let res = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    format!(
        "{} {res} (group {:?}, namespace {:?}, name {:?})",
        a.verb, a.group, a.namespace, a.name
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_the_controller_makes_is_in_the_api_call_table() {
    let RecordedPair { mgmt, w1, mc, wc } = recorded_pair().await;
    mgmt.record_requests();
    w1.record_requests();

    let ctl_client = client_for(&mgmt.kubeconfig_for("ctl")).await;
    // The web view off loopback, so its access reviews are among the calls (one view below).
    let ui_port = free_port_any();
    mgmt.add_token("viewer", "viewer", RuleSet::allow_all());
    let cfg = ControllerConfig {
        leader_elect: true,
        identity: "api-calls-test".into(),
        ui_addr: Some(([0, 0, 0, 0], ui_port).into()),
        // So that the namespace create (only made with the flag) is among the calls.
        worker_namespaces: courier_controller::WorkerNamespaces::Create {
            pod_security: courier_controller::PodSecurityLevel::Restricted,
        },
        ..config()
    };
    let (_handle, stop, task) = start_controller(ctl_client, cfg).await;
    wait_ready_reason(&mc, "w1", "True", "Connected").await;

    // Dispatch and status copy to completion.
    submit(&mc, job("plain", 2)).await;
    let done = wait_finished(&mc, "plain").await;
    assert!(is_true(&done, "Complete"), "{done:#}");

    // A running Job: a spec change flows down, then deleting the origin deletes the mirror.
    let mut long = job("long", 600);
    long["spec"]["parallelism"] = json!(1);
    long["spec"]["completions"] = json!(3);
    submit(&mc, long).await;
    eventually(
        "mirror of long running",
        Duration::from_secs(20),
        || async {
            get(&wc, "long")
                .await
                .filter(|m| m["status"]["active"] == json!(1))
        },
    )
    .await;
    merge_patch(&mc, "long", json!({"spec": {"parallelism": 2}})).await;
    eventually(
        "parallelism on the mirror",
        Duration::from_secs(20),
        || async {
            get(&wc, "long")
                .await
                .filter(|m| m["spec"]["parallelism"] == json!(2))
        },
    )
    .await;
    delete(&mc, "long").await;
    eventually("origin long gone", Duration::from_secs(15), || async {
        get(&mc, "long").await.is_none().then_some(())
    })
    .await;
    eventually("mirror long gone", Duration::from_secs(15), || async {
        get(&wc, "long").await.is_none().then_some(())
    })
    .await;

    // An orphaned mirror: garbage collection deletes it.
    let mut orphan = job("orphan", 600);
    orphan["spec"]
        .as_object_mut()
        .map(|s| s.remove("managedBy"));
    orphan["metadata"]["labels"] = json!({
        "courier.dev/origin": ORIGIN,
        "courier.dev/origin-uid": "00000000-0000-0000-0000-000000000000",
        "courier.dev/epoch": "1",
    });
    let obj: kube::api::DynamicObject =
        serde_json::from_value(orphan).unwrap_or_else(|e| panic!("{e}"));
    jobs(&wc, JOBS_NS)
        .create(&Default::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating the orphan: {e}"));
    eventually("orphan collected", Duration::from_secs(15), || async {
        get(&wc, "orphan").await.is_none().then_some(())
    })
    .await;

    // One page view of the web view by a user with a token.
    let (code, _, body) = http_request(
        ui_port,
        "GET",
        "/api/jobs",
        &[("Authorization", "Bearer viewer")],
        "",
    )
    .await;
    assert_eq!(code, 200, "{body}");

    // Shutdown releases the Lease.
    stop.cancel();
    match tokio::time::timeout(Duration::from_secs(15), task).await {
        Ok(Ok(Ok(()))) => {}
        other => panic!("controller did not stop cleanly: {other:?}"),
    }

    let mut seen = BTreeSet::new();
    let mut missing = Vec::new();
    for (target, sim, user) in [
        (Target::Management, &mgmt, CONTROLLER_MGMT_USER),
        (Target::Worker, &w1, CONTROLLER_WORKER_USER),
    ] {
        for r in sim.recorded_requests().iter().filter(|r| r.user == user) {
            match api_calls::all().position(|row| fits(row, target, r)) {
                Some(i) => {
                    seen.insert(i);
                }
                None => missing.push(format!("{target:?}: {}", describe(r))),
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "the controller made calls that crates/courier-controller/src/api_calls.rs does not list \
         (add a row, then grant it in the charts):\n  {}",
        missing.join("\n  ")
    );

    // The recording saw the scenario's calls (a recorder that saw nothing would prove nothing).
    let rows: Vec<&ApiCall> = api_calls::all().collect();
    let expected: &[(Target, &str, &str, &str)] = &[
        (Target::Management, "watch", "jobs", ""),
        (Target::Management, "patch", "jobs", ""),
        (Target::Management, "patch", "jobs", "status"),
        (Target::Management, "create", "events", ""),
        (Target::Management, "watch", "workerclusters", ""),
        (Target::Management, "patch", "workerclusters", "status"),
        (Target::Management, "watch", "secrets", ""),
        (Target::Management, "create", "leases", ""),
        (Target::Management, "update", "leases", ""),
        (Target::Management, "create", "tokenreviews", ""),
        (Target::Management, "create", "subjectaccessreviews", ""),
        (Target::Worker, "create", "jobs", ""),
        (Target::Worker, "watch", "jobs", ""),
        (Target::Worker, "patch", "jobs", ""),
        (Target::Worker, "delete", "jobs", ""),
        (Target::Worker, "create", "namespaces", ""),
        (Target::Worker, "create", "selfsubjectaccessreviews", ""),
        (Target::Worker, "create", "selfsubjectreviews", ""),
        (Target::Worker, "get", "configmaps", ""),
        (Target::Worker, "create", "configmaps", ""),
        (Target::Management, "watch", "namespaces", ""),
    ];
    for (target, verb, resource, sub) in expected {
        let hit = seen.iter().any(|i| {
            let r = rows[*i];
            r.target == *target
                && r.verb == *verb
                && r.resource == *resource
                && r.subresource == *sub
        });
        assert!(
            hit,
            "the scenario never sent {verb} {resource}/{sub} to {target:?}"
        );
    }
    let unused: Vec<String> = rows
        .iter()
        .enumerate()
        .filter(|(i, _)| !seen.contains(i))
        .map(|(_, r)| format!("{:?} {} {}/{}", r.target, r.verb, r.resource, r.subresource))
        .collect();
    eprintln!("table rows this scenario did not exercise: {unused:?}");
    mgmt.shutdown();
    w1.shutdown();
}
