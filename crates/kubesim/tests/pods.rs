//! Pod objects and `pods/log` on a worker over HTTPS, through kube-rs (what `courier logs` and
//! kubectl use): the simulated containers' lines, every log option, the real errors, and pods off.

use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kubesim::{Role, Sim, SimOptions};
use serde_json::{Value, json};

async fn worker(pod_objects: bool) -> (Sim, Client) {
    let sim = Sim::start(SimOptions {
        role: Role::Worker,
        speed: 10.0,
        pod_objects,
        ..Default::default()
    })
    .await
    .unwrap();
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig()).unwrap();
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = Client::try_from(cfg).unwrap();
    (sim, client)
}

fn job(name: &str, annotations: Value, containers: Value) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"completionMode": "Indexed", "completions": 1,
            "template": {"metadata": {"annotations": annotations},
                "spec": {"restartPolicy": "Never", "containers": containers}}}
    }))
    .unwrap()
}

fn one_container() -> Value {
    json!([{"name": "c", "image": "busybox"}])
}

/// The pods of Job `name`, polled until `pred` holds (20 s).
async fn wait_pods(pods: &Api<Pod>, name: &str, pred: impl Fn(&[Pod]) -> bool) -> Vec<Pod> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lp = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}"));
        let list = pods.list(&lp).await.unwrap().items;
        if pred(&list) {
            return list;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for pods of {name}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// The Status of a refused request: (code, message).
fn refusal(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn logs_of_a_simulated_container_with_every_option_and_error() {
    let (sim, c) = worker(true).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job(
            "echo",
            json!({"sim/log": "hello ${pod}\nindex=${index}", "sim/run-seconds": "3",
                "sim/pending-seconds": "2"}),
            one_container(),
        ),
    )
    .await
    .unwrap();
    let p = wait_pods(&pods, "echo", |l| l.len() == 1).await;
    let pod = name(&p[0]);
    // Still Pending: the kubelet's answer, through the API server.
    let (code, msg) = refusal(pods.logs(&pod, &LogParams::default()).await.unwrap_err());
    assert_eq!(
        (code, msg),
        (
            400,
            format!("container \"c\" in pod \"{pod}\" is waiting to start: ContainerCreating")
        )
    );
    wait_pods(&pods, "echo", |l| {
        l.first().is_some_and(|p| phase(p) == "Running")
    })
    .await;
    // follow: the lines so far, then the rest as it is printed, until the container exits.
    let follow = LogParams {
        follow: true,
        ..LogParams::default()
    };
    let mut lines = pods.log_stream(&pod, &follow).await.unwrap().lines();
    let mut got = Vec::new();
    while let Some(l) = lines.try_next().await.unwrap() {
        got.push(l);
    }
    assert_eq!(
        got,
        [
            format!("[kubesim] {pod}/c started"),
            format!("hello {pod}"),
            "index=0".to_string(),
            format!("[kubesim] {pod}/c exited with code 0"),
        ]
    );
    wait_pods(&pods, "echo", |l| {
        l.first().is_some_and(|p| phase(p) == "Succeeded")
    })
    .await;
    let all = pods.logs(&pod, &LogParams::default()).await.unwrap();
    assert_eq!(all, format!("{}\n", got.join("\n")));
    let tail = LogParams {
        tail_lines: Some(1),
        timestamps: true,
        container: Some("c".into()),
        ..LogParams::default()
    };
    let last = pods.logs(&pod, &tail).await.unwrap();
    let (stamp, text) = last.trim_end().split_once(' ').unwrap();
    assert_eq!(text, format!("[kubesim] {pod}/c exited with code 0"));
    assert!(
        stamp.len() == "2026-01-01T00:00:00.000000000Z".len() && stamp.ends_with('Z'),
        "{stamp}"
    );
    // sinceSeconds far back: everything; limitBytes: cut.
    let since = LogParams {
        since_seconds: Some(3600),
        limit_bytes: Some(5),
        ..LogParams::default()
    };
    assert_eq!(pods.logs(&pod, &since).await.unwrap(), "[kube");
    // previous: this container never restarted.
    let previous = LogParams {
        previous: true,
        ..LogParams::default()
    };
    assert_eq!(
        refusal(pods.logs(&pod, &previous).await.unwrap_err()),
        (
            400,
            format!("previous terminated container \"c\" in pod \"{pod}\" not found")
        )
    );
    let bad = LogParams {
        tail_lines: Some(-1),
        ..LogParams::default()
    };
    assert_eq!(
        refusal(pods.logs(&pod, &bad).await.unwrap_err()),
        (
            422,
            format!(
                "PodLogOptions \"{pod}\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"
            )
        )
    );
    let unknown = LogParams {
        container: Some("nope".into()),
        ..LogParams::default()
    };
    assert_eq!(
        refusal(pods.logs(&pod, &unknown).await.unwrap_err()),
        (400, format!("container nope is not valid for pod {pod}"))
    );
    assert_eq!(
        refusal(
            pods.logs("missing", &LogParams::default())
                .await
                .unwrap_err()
        ),
        (404, "pods \"missing\" not found".to_string())
    );
    sim.shutdown();
}

#[tokio::test]
async fn several_containers_need_a_name_and_a_failure_shows_its_exit_code() {
    let (sim, c) = worker(true).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job(
            "two",
            json!({"sim/outcome": "fail:3", "sim/run-seconds": "1"}),
            json!([{"name": "main", "image": "busybox"}, {"name": "side", "image": "busybox"}]),
        ),
    )
    .await
    .unwrap();
    let p = wait_pods(&pods, "two", |l| {
        l.first().is_some_and(|p| phase(p) == "Failed")
    })
    .await;
    let pod = name(&p[0]);
    assert_eq!(
        refusal(pods.logs(&pod, &LogParams::default()).await.unwrap_err()),
        (
            400,
            format!("a container name must be specified for pod {pod}, choose one of: [main side]")
        )
    );
    let side = LogParams {
        container: Some("side".into()),
        ..LogParams::default()
    };
    let text = pods.logs(&pod, &side).await.unwrap();
    assert!(
        text.ends_with(&format!("[kubesim] {pod}/side exited with code 3\n")),
        "{text}"
    );
    let st = p[0].status.as_ref().unwrap();
    let term = st.container_statuses.as_ref().unwrap()[0]
        .state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap();
    assert_eq!((term.exit_code, term.reason.as_deref()), (3, Some("Error")));
    sim.shutdown();
}

#[tokio::test]
async fn pods_off_serves_no_pod_objects() {
    let (sim, c) = worker(false).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job("quiet", json!({"sim/run-seconds": "1"}), one_container()),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let j = jobs.get("quiet").await.unwrap();
        if j.status.and_then(|s| s.succeeded) == Some(1) {
            break;
        }
        assert!(Instant::now() < deadline, "the Job did not complete");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    sim.shutdown();
}
