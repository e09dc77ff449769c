//! Validating admission over HTTPS: ValidatingAdmissionPolicies with their bindings, and
//! ResourceQuota object counts, answered with the real server's codes and Status bodies
//! (`plugin/policy/validating/dispatcher.go`, `plugin/pkg/admission/resourcequota/controller.go`).
//! Checked by breaking it: with `admission::admit` skipping the policies, the first two tests fail
//! (the denials are created); with it skipping the quota check, the quota test fails.

use http_body_util::BodyExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kubesim::kinds::ssar::RuleSet;
use kubesim::{Role, Sim, SimOptions};
use serde_json::{Value, json};

async fn client_for(kubeconfig: &str) -> Client {
    let kc = Kubeconfig::from_yaml(kubeconfig).unwrap();
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    cfg.default_retry = false;
    Client::try_from(cfg).unwrap()
}

/// One request: the status code, the JSON body and the Warning headers.
async fn call(
    c: &Client,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value, Vec<String>) {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
        .unwrap();
    let res = c.send(req.map(kube::client::Body::from)).await.unwrap();
    let code = res.status().as_u16();
    let warnings = res
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .collect();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (code, body, warnings)
}

async fn create(c: &Client, path: &str, body: Value) -> (u16, Value, Vec<String>) {
    call(c, "POST", path, Some(body)).await
}

fn job(name: &str, parallelism: i64, labels: Value) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"parallelism": parallelism, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox:1.36"}]}}}
    })
}

const VAP: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const VAPB: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";

fn jobs(ns: &str) -> String {
    format!("/apis/batch/v1/namespaces/{ns}/jobs")
}

async fn sim() -> Sim {
    Sim::start(SimOptions {
        role: Role::ApiServer,
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn namespace(admin: &Client, name: &str, labels: Value) {
    let (code, body, _) = create(
        admin,
        "/api/v1/namespaces",
        json!({"metadata": {"name": name, "labels": labels}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
}

async fn binding(admin: &Client, name: &str, policy: &str, actions: Value, match_resources: Value) {
    let mut spec = json!({"policyName": policy, "validationActions": actions});
    if !match_resources.is_null() {
        spec["matchResources"] = match_resources;
    }
    let (code, body, _) = create(
        admin,
        VAPB,
        json!({"metadata": {"name": name}, "spec": spec}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test]
async fn a_policy_denies_like_the_api_server() {
    let sim = sim().await;
    let admin = client_for(&sim.kubeconfig()).await;
    namespace(&admin, "prod", json!({"env": "prod"})).await;
    namespace(&admin, "dev", json!({"env": "dev"})).await;
    let policy = json!({
        "metadata": {"name": "small-jobs"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["jobs"]}]},
            "matchConditions": [{"name": "not-exempt", "expression": "!('exempt' in (has(object.metadata.labels) ? object.metadata.labels : {}))"}],
            "variables": [{"name": "p", "expression": "has(object.spec.parallelism) ? object.spec.parallelism : 1"}],
            "validations": [
                {"expression": "variables.p <= 2", "message": "too parallel", "reason": "Forbidden",
                 "messageExpression": "'parallelism ' + string(variables.p) + ' is over 2 in ' + request.namespace"},
                {"expression": "!('forbidden' in object.metadata.labels)"},
            ],
        }
    });
    let (code, stored, _) = create(&admin, VAP, policy).await;
    assert_eq!(code, 201, "{stored}");
    assert_eq!(stored["spec"]["failurePolicy"], "Fail", "defaulted");
    assert_eq!(stored["metadata"]["generation"], 1);
    binding(
        &admin,
        "small-jobs-prod",
        "small-jobs",
        json!(["Deny"]),
        json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}}),
    )
    .await;

    // Denied with the validation's reason (403), its messageExpression, and the message as a cause.
    let (code, body, _) = create(&admin, &jobs("prod"), job("big", 3, json!({}))).await;
    let message = "ValidatingAdmissionPolicy 'small-jobs' with binding 'small-jobs-prod' denied request: parallelism 3 is over 2 in prod";
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("jobs.batch \"big\" is forbidden: {message}"),
               "reason": "Forbidden",
               "details": {"name": "big", "group": "batch", "kind": "jobs", "causes": [{"message": message}]},
               "code": 403})
    );
    // The binding's namespace selector leaves dev alone; a false match condition skips the policy.
    assert_eq!(
        create(&admin, &jobs("dev"), job("big", 3, json!({})))
            .await
            .0,
        201
    );
    assert_eq!(
        create(&admin, &jobs("prod"), job("big", 3, json!({"exempt": "y"})))
            .await
            .0,
        201
    );
    // No message and no reason: `failed expression: ...`, 422 Invalid.
    let (code, body, _) = create(
        &admin,
        &jobs("prod"),
        job("f", 1, json!({"forbidden": "y"})),
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (422, Some("Invalid")),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap_or_default().ends_with(
            "denied request: failed expression: !('forbidden' in object.metadata.labels)"
        ),
        "{body}"
    );
    // UPDATE is matched too (a merge patch), and the object is left as it was.
    assert_eq!(
        create(&admin, &jobs("prod"), job("ok", 1, json!({})))
            .await
            .0,
        201
    );
    let (code, body, _) = call(
        &admin,
        "PATCH",
        &format!("{}/ok", jobs("prod")),
        Some(json!({"spec": {"parallelism": 5}})),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    let (_, now, _) = call(&admin, "GET", &format!("{}/ok", jobs("prod")), None).await;
    assert_eq!(now["spec"]["parallelism"], 1);
    // A dry run is admitted like a real write.
    let (code, _, _) = create(
        &admin,
        &format!("{}?dryRun=All", jobs("prod")),
        job("dry", 4, json!({})),
    )
    .await;
    assert_eq!(code, 403);
}

#[tokio::test]
async fn identities_subresources_failure_policy_and_warnings() {
    let sim = sim().await;
    let admin = client_for(&sim.kubeconfig()).await;
    namespace(&admin, "t", json!({})).await;
    sim.add_token("alice", "alice", RuleSet::allow_all());
    sim.add_token(
        "jc",
        "system:serviceaccount:kube-system:job-controller",
        RuleSet::allow_all(),
    );
    let alice = client_for(&sim.kubeconfig_for("alice")).await;
    let jc = client_for(&sim.kubeconfig_for("jc")).await;
    // Only kube-system's service accounts may write Job status (groups from the token's identity).
    let (code, body, _) = create(&admin, VAP, json!({
        "metadata": {"name": "status-writers"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["*"],
                "operations": ["UPDATE"], "resources": ["jobs/status"]}]},
            "validations": [{"expression": "request.subResource == 'status' && 'system:serviceaccounts:kube-system' in request.userInfo.groups && 'system:authenticated' in request.userInfo.groups",
                             "message": "not a controller", "reason": "Forbidden"}],
        }
    })).await;
    assert_eq!(code, 201, "{body}");
    binding(
        &admin,
        "status-writers",
        "status-writers",
        json!(["Deny"]),
        Value::Null,
    )
    .await;
    assert_eq!(
        create(&alice, &jobs("t"), job("j", 1, json!({}))).await.0,
        201,
        "the main resource is not matched"
    );
    let status = Some(json!({"status": {"startTime": "2026-01-01T00:00:00Z", "active": 1}}));
    let path = format!("{}/j/status", jobs("t"));
    let (code, body, _) = call(&alice, "PATCH", &path, status.clone()).await;
    assert_eq!(code, 403, "{body}");
    let (code, body, _) = call(&jc, "PATCH", &path, status).await;
    assert_eq!(code, 200, "{body}");

    // An expression that fails at run time: Fail denies (422), Ignore lets the write through.
    for (policy, failure) in [("broken-fail", "Fail"), ("broken-ignore", "Ignore")] {
        let (code, body, _) = create(&admin, VAP, json!({
            "metadata": {"name": policy},
            "spec": {
                "failurePolicy": failure,
                "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["*"],
                    "operations": ["CREATE"], "resources": ["jobs"]}]},
                "validations": [{"expression": "object.spec.nope == 1"}],
            }
        })).await;
        assert_eq!(code, 201, "{body}");
    }
    binding(
        &admin,
        "broken-ignore",
        "broken-ignore",
        json!(["Deny"]),
        Value::Null,
    )
    .await;
    assert_eq!(
        create(&alice, &jobs("t"), job("k", 1, json!({}))).await.0,
        201
    );
    binding(
        &admin,
        "broken-fail",
        "broken-fail",
        json!(["Deny"]),
        json!({"objectSelector": {"matchLabels": {"check": "yes"}}}),
    )
    .await;
    assert_eq!(
        create(&alice, &jobs("t"), job("l", 1, json!({}))).await.0,
        201,
        "the object selector does not match"
    );
    let (code, body, _) = create(&alice, &jobs("t"), job("m", 1, json!({"check": "yes"}))).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (422, Some("Invalid")),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("expression 'object.spec.nope == 1' resulted in error"),
        "{body}"
    );

    // Warn: admitted, with the warning header.
    let (code, body, _) = create(&admin, VAP, json!({
        "metadata": {"name": "warn-only"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["*"],
                "operations": ["CREATE"], "resources": ["jobs"]}]},
            "validations": [{"expression": "size(object.metadata.name) > 1", "message": "short name"}],
        }
    })).await;
    assert_eq!(code, 201, "{body}");
    binding(
        &admin,
        "warn-only",
        "warn-only",
        json!(["Warn", "Audit"]),
        Value::Null,
    )
    .await;
    let (code, _, warnings) = create(&alice, &jobs("t"), job("n", 1, json!({}))).await;
    assert_eq!(code, 201);
    assert!(
        warnings.iter().any(|w| w.contains("Validation failed for ValidatingAdmissionPolicy 'warn-only' with binding 'warn-only': short name")),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn policies_are_validated_and_served_like_other_kinds() {
    let sim = sim().await;
    let admin = client_for(&sim.kubeconfig()).await;
    let rules = json!({"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["jobs"]}]});
    let (code, body, _) = create(
        &admin,
        VAP,
        json!({"metadata": {"name": "p"},
        "spec": {"matchConstraints": rules, "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                 "validations": [{"expression": "object.spec.x == 1 ||"}]}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message
            .starts_with("ValidatingAdmissionPolicy.admissionregistration.k8s.io \"p\" is invalid"),
        "{message}"
    );
    assert!(
        message.contains(
            "spec.paramKind: Forbidden: kubesim does not evaluate policies with parameters"
        ),
        "{message}"
    );
    assert!(
        message.contains("spec.validations[0].expression: Invalid value"),
        "{message}"
    );
    let (code, body, _) = create(
        &admin,
        VAPB,
        json!({"metadata": {"name": "b"}, "spec": {"validationActions": ["Deny", "Warn"]}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("spec.policyName: Required value"),
        "{message}"
    );
    assert!(
        message.contains("must not contain both Deny and Warn"),
        "{message}"
    );
    // Discovery lists both kinds, cluster-scoped.
    let (_, disc, _) = call(&admin, "GET", "/apis/admissionregistration.k8s.io/v1", None).await;
    let names: Vec<(&str, bool)> = disc["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| Some((r["name"].as_str()?, r["namespaced"].as_bool()?)))
        .collect();
    for want in [
        "validatingadmissionpolicies",
        "validatingadmissionpolicies/status",
        "validatingadmissionpolicybindings",
    ] {
        assert!(names.contains(&(want, false)), "{want} in {names:?}");
    }
}

#[tokio::test]
async fn an_object_count_quota_refuses_the_create_over_its_limit() {
    let sim = sim().await;
    let admin = client_for(&sim.kubeconfig()).await;
    namespace(&admin, "q", json!({})).await;
    let (code, body, _) = create(
        &admin,
        "/api/v1/namespaces/q/resourcequotas",
        json!({"metadata": {"name": "one-job"}, "spec": {"hard": {"count/jobs.batch": "1"}}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let quota = || async {
        call(
            &admin,
            "GET",
            "/api/v1/namespaces/q/resourcequotas/one-job",
            None,
        )
        .await
        .1["status"]
            .clone()
    };
    assert_eq!(
        quota().await,
        json!({"hard": {"count/jobs.batch": "1"}, "used": {"count/jobs.batch": "0"}})
    );
    assert_eq!(
        create(&admin, &jobs("q"), job("a", 1, json!({}))).await.0,
        201
    );
    assert_eq!(quota().await["used"], json!({"count/jobs.batch": "1"}));
    let (code, body, _) = create(&admin, &jobs("q"), job("b", 1, json!({}))).await;
    let why = "exceeded quota: one-job, requested: count/jobs.batch=1, used: count/jobs.batch=1, limited: count/jobs.batch=1";
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("jobs.batch \"b\" is forbidden: {why}"), "reason": "Forbidden",
               "details": {"name": "b", "group": "batch", "kind": "jobs"}, "code": 403})
    );
    // Deleting the Job frees the quota.
    let (code, body, _) = call(
        &admin,
        "DELETE",
        &format!("{}/a", jobs("q")),
        Some(json!({"propagationPolicy": "Background"})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(quota().await["used"], json!({"count/jobs.batch": "0"}));
    assert_eq!(
        create(&admin, &jobs("q"), job("b", 1, json!({}))).await.0,
        201
    );
    // Other namespaces are not limited.
    namespace(&admin, "free", json!({})).await;
    for n in ["x", "y"] {
        assert_eq!(
            create(&admin, &jobs("free"), job(n, 1, json!({}))).await.0,
            201
        );
    }
}

/// Any served kind can be matched, and `namespaceObject` is the request's namespace.
#[tokio::test]
async fn policies_see_the_namespace_object_and_match_other_kinds() {
    let sim = sim().await;
    let admin = client_for(&sim.kubeconfig()).await;
    namespace(&admin, "owned", json!({"team": "a"})).await;
    namespace(&admin, "stray", json!({})).await;
    let (code, body, _) = create(
        &admin,
        VAP,
        json!({
            "metadata": {"name": "team-namespaces"},
            "spec": {
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"], "scope": "Namespaced"}]},
                "validations": [{"expression": "namespaceObject.metadata.name == request.namespace && has(namespaceObject.metadata.labels) && 'team' in namespaceObject.metadata.labels",
                                 "message": "the namespace has no team"}],
            }
        }),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    binding(
        &admin,
        "team-namespaces",
        "team-namespaces",
        json!(["Deny"]),
        Value::Null,
    )
    .await;
    let cm = |ns: &str| {
        (
            format!("/api/v1/namespaces/{ns}/configmaps"),
            json!({"metadata": {"name": "c"}, "data": {"k": "v"}}),
        )
    };
    let (path, body) = cm("owned");
    assert_eq!(create(&admin, &path, body).await.0, 201);
    let (path, body) = cm("stray");
    let (code, body, _) = create(&admin, &path, body).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        "configmaps \"c\" is forbidden: ValidatingAdmissionPolicy 'team-namespaces' with binding 'team-namespaces' denied request: the namespace has no team"
    );
    // Jobs are not matched by this policy.
    assert_eq!(
        create(&admin, &jobs("stray"), job("j", 1, json!({})))
            .await
            .0,
        201
    );
}
