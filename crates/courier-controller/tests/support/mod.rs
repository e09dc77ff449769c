//! Test harness: one management and two worker kubesim clusters in process, the WorkerCluster CRD,
//! kubeconfig Secrets and WorkerClusters, and the controller running in process with short timings.

#![allow(dead_code)]

use std::future::Future;
use std::time::{Duration, Instant};

use courier_api::{WorkerCluster, WorkerClusterSpec};
use courier_controller::{Controller, ControllerConfig, ControllerError, ControllerHandle, Tuning};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kubesim::kinds::ssar::{Rule, RuleSet};
use kubesim::{Role, Sim, SimOptions};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const NS: &str = "courier-system";
pub const ORIGIN: &str = "mgmt-a";
/// Namespace the test Jobs live in (created on every worker too, as a worker admin would).
pub const JOBS_NS: &str = "team-a";

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

pub async fn sim(role: Role, name: &str) -> Sim {
    Sim::start(SimOptions {
        role,
        name: name.into(),
        speed: 20.0,
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| panic!("starting sim {name}: {e}"))
}

pub async fn client_for(kubeconfig: &str) -> Client {
    let kc = Kubeconfig::from_yaml(kubeconfig).unwrap_or_else(|e| panic!("kubeconfig: {e}"));
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("config: {e}"));
    Client::try_from(cfg).unwrap_or_else(|e| panic!("client: {e}"))
}

pub fn jobs_ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("batch", "v1", "Job"), "jobs")
}

pub fn jobs(c: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(c.clone(), ns, &jobs_ar())
}

/// Short timings so faults are noticed within a second or two.
pub fn tuning() -> Tuning {
    Tuning {
        probe_interval: Duration::from_millis(500),
        rights_interval: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_millis(1500),
        watch_timeout: Duration::from_secs(10),
        backoff_min: Duration::from_millis(100),
        backoff_max: Duration::from_secs(1),
        retry_min: Duration::from_millis(50),
        retry_max: Duration::from_secs(2),
        retry_interval: Duration::from_secs(1),
        short_retry: Duration::from_millis(200),
        refusal_backoff_min: Duration::from_secs(1),
        refusal_backoff_max: Duration::from_secs(4),
        foreign_backoff_max: Duration::from_secs(2),
        status_heartbeat: Duration::from_secs(30),
        resync_interval: Duration::from_secs(30),
        cluster_inflight: 0,
        lease_name: "courier-leader".into(),
        lease_duration: Duration::from_secs(3),
        lease_renew_deadline: Duration::from_secs(2),
        lease_retry_period: Duration::from_millis(300),
    }
}

pub fn config() -> ControllerConfig {
    ControllerConfig {
        origin_id: ORIGIN.into(),
        namespace: NS.into(),
        concurrency: 8,
        gc_interval: Duration::from_secs(2),
        worker_lost_timeout: Duration::from_secs(300),
        ..Default::default()
    }
}

/// Polls `f` every 50 ms until it returns `Some`, or panics after `timeout` naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn ensure_namespace(c: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))
        .unwrap_or_else(|e| panic!("{e}"));
    match Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("creating namespace {name}: {e}"),
    }
}

pub async fn install_crd(c: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(c.clone());
    api.create(&PostParams::default(), &courier_api::crd())
        .await
        .unwrap_or_else(|e| panic!("creating the CRD: {e}"));
    eventually(
        "the WorkerCluster CRD to be established",
        Duration::from_secs(10),
        || async {
            let crd = api.get("workerclusters.courier.dev").await.ok()?;
            let established = crd
                .status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            // The CR endpoint must answer too.
            let wcs: Api<WorkerCluster> = Api::all(c.clone());
            (established && wcs.list(&ListParams::default()).await.is_ok()).then_some(())
        },
    )
    .await;
}

pub async fn put_secret(c: &Client, name: &str, kubeconfig: &str) {
    let api: Api<Secret> = Api::namespaced(c.clone(), NS);
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            labels: Some(
                [(
                    courier_api::LABEL_KUBECONFIG_SECRET.to_string(),
                    "true".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        data: Some(
            [(
                "kubeconfig".to_string(),
                k8s_openapi::ByteString(kubeconfig.as_bytes().to_vec()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    let pp = PatchParams::apply("courier-tests").force();
    api.patch(name, &pp, &Patch::Apply(&secret))
        .await
        .unwrap_or_else(|e| panic!("writing Secret {name}: {e}"));
}

pub async fn create_worker_cluster(c: &Client, name: &str, secret: &str, labels: &[(&str, &str)]) {
    let mut wc = WorkerCluster::new(name, WorkerClusterSpec::new(secret));
    wc.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    Api::<WorkerCluster>::all(c.clone())
        .create(&PostParams::default(), &wc)
        .await
        .unwrap_or_else(|e| panic!("creating WorkerCluster {name}: {e}"));
}

pub async fn register(c: &Client, name: &str, kubeconfig: &str, labels: &[(&str, &str)]) {
    let secret = format!("{name}-kubeconfig");
    put_secret(c, &secret, kubeconfig).await;
    create_worker_cluster(c, name, &secret, labels).await;
}

/// The users a controller under test authenticates as, so that its requests stand apart from the
/// harness's own (`kubesim-admin`) in kubesim's request record.
pub const CONTROLLER_MGMT_USER: &str = "system:serviceaccount:courier-system:courier";
pub const CONTROLLER_WORKER_USER: &str = "system:serviceaccount:courier-system:courier-dispatcher";

/// A management cluster and worker `w1` for tests that read kubesim's request record: the CRD,
/// Courier's namespace on both, the Jobs' namespace on the management cluster, tokens `ctl` and
/// `ctl-w1` for the controller's own users (allowed everything), and w1 registered with its token.
/// Nothing is recorded yet.
pub struct RecordedPair {
    pub mgmt: Sim,
    pub w1: Sim,
    pub mc: Client,
    pub wc: Client,
}

pub async fn recorded_pair() -> RecordedPair {
    init_tracing();
    let mgmt = sim(Role::Management, "mgmt").await;
    let w1 = sim(Role::Worker, "w1").await;
    let mc = client_for(&mgmt.kubeconfig()).await;
    let wc = client_for(&w1.kubeconfig()).await;
    install_crd(&mc).await;
    ensure_namespace(&mc, NS).await;
    ensure_namespace(&mc, JOBS_NS).await;
    // The worker chart's namespace (its ServiceAccount's: the origin id claim lives there).
    ensure_namespace(&wc, NS).await;
    mgmt.add_token("ctl", CONTROLLER_MGMT_USER, RuleSet::allow_all());
    w1.add_token("ctl-w1", CONTROLLER_WORKER_USER, RuleSet::allow_all());
    register(&mc, "w1", &w1.kubeconfig_for("ctl-w1"), &[]).await;
    RecordedPair { mgmt, w1, mc, wc }
}

/// A controller running on `client` with `cfg` and the tests' tuning, once it reports ready: its
/// handle, the token that stops it and its task.
pub async fn start_controller(
    client: Client,
    cfg: ControllerConfig,
) -> (
    ControllerHandle,
    CancellationToken,
    JoinHandle<Result<(), ControllerError>>,
) {
    let controller = Controller::with_tuning(client, cfg, tuning())
        .unwrap_or_else(|e| panic!("controller: {e}"));
    let handle = controller.handle();
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));
    tokio::time::timeout(Duration::from_secs(15), handle.ready())
        .await
        .unwrap_or_else(|_| panic!("controller not ready"));
    (handle, stop, task)
}

/// The Ready condition of a WorkerCluster: (status, reason, message).
pub async fn ready_condition(c: &Client, name: &str) -> Option<(String, String, String)> {
    let wc = Api::<WorkerCluster>::all(c.clone()).get(name).await.ok()?;
    let cond = wc.status?.ready_condition()?.clone();
    Some((cond.status, cond.reason, cond.message))
}

pub async fn wait_ready_reason(c: &Client, name: &str, status: &str, reason: &str) -> String {
    eventually(
        &format!("WorkerCluster {name} Ready={status} reason {reason}"),
        Duration::from_secs(15),
        || async {
            let (s, r, m) = ready_condition(c, name).await?;
            (s == status && r == reason).then_some(m)
        },
    )
    .await
}

/// A Job Courier manages; `run_seconds` of simulated time per pod (speed 20).
pub fn job(name: &str, run_seconds: u32) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": JOBS_NS, "labels": {"app": "demo"}},
        "spec": {
            "managedBy": "courier.dev/dispatcher",
            "ttlSecondsAfterFinished": 3600,
            "backoffLimit": 2,
            "template": {
                "metadata": {"annotations": {"sim/run-seconds": run_seconds.to_string()}},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "busybox:1.36"}]}
            }
        }
    })
}

pub async fn submit(c: &Client, job: Value) -> Value {
    let obj: DynamicObject = serde_json::from_value(job).unwrap_or_else(|e| panic!("{e}"));
    let created = jobs(c, JOBS_NS)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating Job: {e}"));
    serde_json::to_value(created).unwrap_or_else(|e| panic!("{e}"))
}

pub async fn get(c: &Client, name: &str) -> Option<Value> {
    let j = jobs(c, JOBS_NS).get_opt(name).await.ok()??;
    serde_json::to_value(j).ok()
}

pub async fn merge_patch(c: &Client, name: &str, patch: Value) {
    jobs(c, JOBS_NS)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching Job {name}: {e}"));
}

pub async fn delete(c: &Client, name: &str) {
    jobs(c, JOBS_NS)
        .delete(name, &DeleteParams::background())
        .await
        .unwrap_or_else(|e| panic!("deleting Job {name}: {e}"));
}

/// Merge-patches the status of the Job `name` in the jobs namespace, as its Job controller would.
pub async fn write_status(c: &Client, name: &str, status: Value) {
    jobs(c, JOBS_NS)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap_or_else(|e| panic!("writing the status of Job {name}: {e}"));
}

pub fn condition<'a>(job: &'a Value, type_: &str) -> Option<&'a Value> {
    job.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

pub fn is_true(job: &Value, type_: &str) -> bool {
    condition(job, type_).is_some_and(|c| c["status"] == "True")
}

pub fn label<'a>(job: &'a Value, key: &str) -> Option<&'a str> {
    job.pointer("/metadata/labels")?.get(key)?.as_str()
}

pub fn annotation<'a>(job: &'a Value, key: &str) -> Option<&'a str> {
    job.pointer("/metadata/annotations")?.get(key)?.as_str()
}

/// Waits until the origin satisfies `pred`.
pub async fn wait_job(
    c: &Client,
    name: &str,
    what: &str,
    timeout: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    eventually(&format!("Job {name}: {what}"), timeout, || async {
        get(c, name).await.filter(|j| pred(j))
    })
    .await
}

pub async fn wait_finished(c: &Client, name: &str) -> Value {
    wait_job(c, name, "finished", Duration::from_secs(30), |j| {
        is_true(j, "Complete") || is_true(j, "Failed")
    })
    .await
}

/// (reason, note) of every event on the Job `name` in the jobs namespace.
pub async fn events(c: &Client, name: &str) -> Vec<(String, String)> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("events.k8s.io", "v1", "Event"),
        "events",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(c.clone(), JOBS_NS, &ar);
    let list = api
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing events: {e}"));
    list.items
        .into_iter()
        .filter(|e| e.data.pointer("/regarding/name").and_then(Value::as_str) == Some(name))
        .map(|e| {
            (
                e.data["reason"].as_str().unwrap_or_default().to_string(),
                e.data["note"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

pub async fn wait_event(c: &Client, name: &str, reason: &str) -> String {
    eventually(
        &format!("event {reason} on Job {name}"),
        Duration::from_secs(20),
        || async {
            events(c, name)
                .await
                .into_iter()
                .find(|(r, _)| r == reason)
                .map(|(_, n)| n)
        },
    )
    .await
}

/// Everything a test needs: the clusters, clients to them, and the running controller.
pub struct Env {
    pub mgmt: Sim,
    pub workers: Vec<Sim>,
    pub mc: Client,
    /// Admin clients of the workers, same order as `workers` (w1, w2).
    pub wcs: Vec<Client>,
    pub ctl: ControllerHandle,
    pub stop: CancellationToken,
    pub task: Option<JoinHandle<Result<(), ControllerError>>>,
}

pub struct Setup {
    pub cfg: ControllerConfig,
    pub tuning: Tuning,
    /// Register w1 and w2 (with these labels) before the controller starts.
    pub register: bool,
    pub labels: [Vec<(&'static str, &'static str)>; 2],
    /// Register w1 / w2 with a token holding these rights instead of the admin token.
    pub rules: [Option<RuleSet>; 2],
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            cfg: config(),
            tuning: tuning(),
            register: true,
            labels: [vec![("region", "eu")], vec![("region", "us")]],
            rules: [None, None],
        }
    }
}

impl Setup {
    /// The default setup with this controller configuration.
    pub fn cfg(cfg: ControllerConfig) -> Self {
        Self {
            cfg,
            ..Default::default()
        }
    }
}

/// Every right, except `verbs` on Jobs in the jobs namespace (a cluster-wide access review still
/// says yes, so the worker stays Ready; the real requests get the real 403).
pub fn denying_in_jobs_ns(verbs: &[&str]) -> RuleSet {
    let mut rules = RuleSet::allow_all();
    rules.deny.push(
        Rule::new(verbs, &["batch"], &["jobs"])
            .in_namespaces(&[JOBS_NS])
            .named("test-deny"),
    );
    rules
}

impl Env {
    pub async fn start() -> Env {
        Self::with(Setup::default()).await
    }

    pub async fn with(setup: Setup) -> Env {
        init_tracing();
        let mgmt = sim(Role::Management, "mgmt").await;
        let workers = vec![sim(Role::Worker, "w1").await, sim(Role::Worker, "w2").await];
        let mc = client_for(&mgmt.kubeconfig()).await;
        let mut wcs = Vec::new();
        for w in &workers {
            let wc = client_for(&w.kubeconfig()).await;
            // Courier does not create namespaces on workers by default: the worker's admin does.
            ensure_namespace(&wc, JOBS_NS).await;
            wcs.push(wc);
        }
        install_crd(&mc).await;
        ensure_namespace(&mc, NS).await;
        ensure_namespace(&mc, JOBS_NS).await;
        if setup.register {
            for (i, w) in workers.iter().enumerate() {
                let kubeconfig = match &setup.rules[i] {
                    Some(rules) => {
                        let token = format!("courier-w{}", i + 1);
                        w.add_token(&token, "courier", rules.clone());
                        w.kubeconfig_for(&token)
                    }
                    None => w.kubeconfig(),
                };
                register(&mc, &format!("w{}", i + 1), &kubeconfig, &setup.labels[i]).await;
            }
        }
        let controller = Controller::with_tuning(mc.clone(), setup.cfg, setup.tuning)
            .unwrap_or_else(|e| panic!("controller: {e}"));
        let ctl = controller.handle();
        let stop = CancellationToken::new();
        let task = tokio::spawn(controller.run(stop.clone()));
        let env = Env {
            mgmt,
            workers,
            mc,
            wcs,
            ctl,
            stop,
            task: Some(task),
        };
        tokio::time::timeout(Duration::from_secs(15), env.ctl.ready())
            .await
            .unwrap_or_else(|_| panic!("controller not ready"));
        if setup.register {
            for name in ["w1", "w2"] {
                wait_ready_reason(&env.mc, name, "True", "Connected").await;
            }
        }
        env
    }

    fn worker_index(&self, name: &str) -> usize {
        let i = name
            .strip_prefix('w')
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| n.checked_sub(1));
        match i {
            Some(i) if i < self.workers.len() => i,
            _ => panic!("no worker {name}"),
        }
    }

    /// Admin client of worker `w1`, `w2`, ...
    pub fn worker(&self, name: &str) -> &Client {
        &self.wcs[self.worker_index(name)]
    }

    pub fn worker_sim(&self, name: &str) -> &Sim {
        &self.workers[self.worker_index(name)]
    }

    /// Starts another worker cluster `w<N>` (N = the next number) with `role`, without registering
    /// it; returns its name.
    pub async fn add_worker(&mut self, role: Role) -> String {
        let name = format!("w{}", self.workers.len() + 1);
        let w = sim(role, &name).await;
        let wc = client_for(&w.kubeconfig()).await;
        ensure_namespace(&wc, JOBS_NS).await;
        self.wcs.push(wc);
        self.workers.push(w);
        name
    }

    /// Starts a worker without a Job controller (the test writes its Jobs' statuses with
    /// [`write_status`]), registers it with `labels` and waits until it is Ready; returns its name.
    pub async fn add_registered_api_server(&mut self, labels: &[(&str, &str)]) -> String {
        let name = self.add_worker(Role::ApiServer).await;
        let kubeconfig = self.worker_sim(&name).kubeconfig();
        register(&self.mc, &name, &kubeconfig, labels).await;
        wait_ready_reason(&self.mc, &name, "True", "Connected").await;
        name
    }

    /// The Job named `name` on worker `cluster`, if any.
    pub async fn mirror(&self, cluster: &str, name: &str) -> Option<Value> {
        get(self.worker(cluster), name).await
    }

    /// Waits for the mirror on `cluster` to satisfy `pred`.
    pub async fn wait_mirror(
        &self,
        cluster: &str,
        name: &str,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        eventually(
            &format!("mirror {name} on {cluster}: {what}"),
            Duration::from_secs(20),
            || async { self.mirror(cluster, name).await.filter(|m| pred(m)) },
        )
        .await
    }

    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(t) = self.task.take() {
            match tokio::time::timeout(Duration::from_secs(15), t).await {
                Ok(Ok(Ok(()))) => {}
                other => panic!("controller did not stop cleanly: {other:?}"),
            }
        }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.stop.cancel();
        self.mgmt.shutdown();
        for w in &self.workers {
            w.shutdown();
        }
    }
}

/// A free port on every address (not loopback: the web view there reviews its callers).
pub fn free_port_any() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("free port: {e}"))
}

/// One HTTP/1.1 request to 127.0.0.1:`port`: (status, head, body).
pub async fn http_request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap_or_else(|e| panic!("connecting to 127.0.0.1:{port}: {e}"));
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// Deletes a WorkerCluster (what `kubectl delete workercluster` does).
pub async fn delete_worker_cluster(c: &Client, name: &str) {
    Api::<WorkerCluster>::all(c.clone())
        .delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting WorkerCluster {name}: {e}"));
}

/// The events with `reason` on Job `name`: (note, series count).
pub async fn events_with_reason(c: &Client, name: &str, reason: &str) -> Vec<String> {
    events(c, name)
        .await
        .into_iter()
        .filter(|(r, _)| r == reason)
        .map(|(_, n)| n)
        .collect()
}

/// A condition's (status, reason, message).
pub fn condition_srm(job: &Value, type_: &str) -> Option<(String, String, String)> {
    let c = condition(job, type_)?;
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some((s("status"), s("reason"), s("message")))
}

/// A TCP proxy in front of a worker that counts connection attempts and either forwards them or
/// closes them at once (a worker whose port refuses, as far as the client can tell).
pub struct Proxy {
    pub port: u16,
    forward: std::sync::Arc<std::sync::atomic::AtomicBool>,
    connections: std::sync::Arc<std::sync::atomic::AtomicU64>,
    task: JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: std::net::SocketAddr, forward: bool) -> Proxy {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("proxy bind: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let fwd = Arc::new(AtomicBool::new(forward));
        let count = Arc::new(AtomicU64::new(0));
        let (f, n) = (fwd.clone(), count.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                n.fetch_add(1, Ordering::SeqCst);
                if !f.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Proxy {
            port,
            forward: fwd,
            connections: count,
            task,
        }
    }

    pub fn set_forward(&self, on: bool) {
        self.forward.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn connections(&self) -> u64 {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// `kubeconfig` with its server URL pointing at this proxy (`host` = 127.0.0.1 or localhost).
    pub fn kubeconfig(&self, kubeconfig: &str, target_port: u16, host: &str) -> String {
        kubeconfig.replace(
            &format!("https://127.0.0.1:{target_port}"),
            &format!("https://{host}:{}", self.port),
        )
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Switches the controller's credentials for worker `name` to a new token `user` (also its user
/// name) with `rules`, and waits until the controller uses it.
pub async fn use_token(env: &Env, name: &str, user: &str, rules: RuleSet) {
    let w = env.worker_sim(name);
    w.add_token(user, user, rules);
    w.record_requests();
    put_secret(
        &env.mc,
        &format!("{name}-kubeconfig"),
        &w.kubeconfig_for(user),
    )
    .await;
    eventually(
        &format!("the controller to use token {user} on {name}"),
        Duration::from_secs(15),
        || async {
            w.recorded_requests()
                .iter()
                .any(|r| r.user == user)
                .then_some(())
        },
    )
    .await;
}

/// Creates someone else's Job named `name` on a worker (no Courier labels, no managedBy); returns it.
pub async fn create_foreign_job(worker: &Client, name: &str) -> DynamicObject {
    ensure_namespace(worker, JOBS_NS).await;
    let mut foreign = job(name, 600);
    foreign["spec"]
        .as_object_mut()
        .map(|s| s.remove("managedBy"));
    let obj = serde_json::from_value(foreign).unwrap_or_else(|e| panic!("{e}"));
    jobs(worker, JOBS_NS)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating a foreign Job: {e}"))
}

/// Gives the controller's credentials for worker `name` every right again (a new token `full`).
pub async fn allow_everything(env: &Env, name: &str) {
    use_token(env, name, "full", RuleSet::allow_all()).await;
}
