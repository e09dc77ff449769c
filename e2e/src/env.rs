//! [`Env`]: a management cluster, workers and the controller, each its own process.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use courier_api::{LABEL_ORIGIN, LABEL_ORIGIN_UID};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::*;

/// How to set up an [`Env`].
#[derive(Debug, Clone)]
pub struct EnvOptions {
    pub workers: usize,
    /// kubesim `--speed` of every cluster.
    pub speed: f64,
    /// Labels of worker `i` (default: w1 region=eu, w2 region=us, others none).
    pub labels: Vec<BTreeMap<String, String>>,
    /// Extra `courier run` flags.
    pub controller_args: Vec<String>,
    pub start_controller: bool,
    pub register_workers: bool,
    /// Run alone: no other Env of this test binary exists meanwhile (timing measurements, heavy
    /// load). Other tests of the binary wait for it, and it waits for them.
    pub exclusive: bool,
    /// The controller's log filter (`COURIER_LOG`) for this Env; default `$COURIER_E2E_LOG` or
    /// `info`. Tests that check what the log must never contain set `trace`.
    pub log_filter: Option<String>,
}

impl Default for EnvOptions {
    fn default() -> Self {
        let l = |r: &str| BTreeMap::from([("region".to_string(), r.to_string())]);
        Self {
            workers: 2,
            speed: 10.0,
            labels: vec![l("eu"), l("us")],
            controller_args: Vec::new(),
            start_controller: true,
            register_workers: true,
            exclusive: false,
            log_filter: None,
        }
    }
}

/// A management cluster, workers and the controller, each its own process.
pub struct Env {
    pub dir: PathBuf,
    pub mgmt: Kubesim,
    pub workers: Vec<Kubesim>,
    pub controller: Option<Proc>,
    pub mgmt_client: Client,
    pub worker_clients: Vec<Client>,
    pub metrics_port: u16,
    controller_args: Vec<String>,
    log_filter: String,
    controller_starts: u32,
    keep: bool,
    _turn: Turn,
}

/// An Env's share of the test binary: shared, or exclusive (see [`EnvOptions::exclusive`]).
enum Turn {
    Shared(#[allow(dead_code)] tokio::sync::OwnedRwLockReadGuard<()>),
    Exclusive(#[allow(dead_code)] tokio::sync::OwnedRwLockWriteGuard<()>),
}

static TURNS: std::sync::LazyLock<std::sync::Arc<tokio::sync::RwLock<()>>> =
    std::sync::LazyLock::new(|| std::sync::Arc::new(tokio::sync::RwLock::new(())));

async fn take_turn(exclusive: bool) -> Turn {
    let lock = TURNS.clone();
    if exclusive {
        Turn::Exclusive(lock.write_owned().await)
    } else {
        Turn::Shared(lock.read_owned().await)
    }
}

/// `$COURIER_E2E_LOG`, else `info`.
fn default_log_filter() -> String {
    std::env::var("COURIER_E2E_LOG").unwrap_or_else(|_| "info".into())
}

/// `courier run` flags for the leader-election tests: a lease short enough that a failover fits in a
/// test.
pub const FAST_LEASE: &[&str] = &[
    "--leader-elect-lease-duration",
    "3s",
    "--leader-elect-renew-deadline",
    "2s",
    "--leader-elect-retry-period",
    "300ms",
];

/// A recorded request (kubesim's request recorder) that writes, other than the leader election's own
/// Lease traffic.
pub fn is_write(r: &Value) -> bool {
    matches!(
        r["verb"].as_str(),
        Some("create" | "update" | "patch" | "delete" | "deletecollection")
    ) && r["resource"] != "leases"
}

/// A free TCP port on 127.0.0.1 (bound and released).
pub fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

impl Env {
    pub async fn start(test: &str, opts: EnvOptions) -> anyhow::Result<Env> {
        let turn = take_turn(opts.exclusive).await;
        let dir = work_dir(test)?;
        let mgmt = Kubesim::start(&dir, "management", "management", opts.speed)?;
        let mut workers = Vec::new();
        for i in 0..opts.workers {
            workers.push(Kubesim::start(
                &dir,
                &format!("w{}", i + 1),
                "worker",
                opts.speed,
            )?);
        }
        let mgmt_client = mgmt.client().await?;
        let mut worker_clients = Vec::new();
        for w in &workers {
            worker_clients.push(w.client().await?);
        }
        let mut env = Env {
            dir,
            mgmt,
            workers,
            controller: None,
            mgmt_client,
            worker_clients,
            metrics_port: free_port()?,
            controller_args: opts.controller_args.clone(),
            log_filter: opts.log_filter.clone().unwrap_or_else(default_log_filter),
            controller_starts: 0,
            keep: true,
            _turn: turn,
        };
        env.install_crd().await?;
        env.create_namespace("courier-system").await?;
        if opts.register_workers {
            for i in 0..env.workers.len() {
                let labels = opts.labels.get(i).cloned().unwrap_or_default();
                env.register_worker(i, &labels).await?;
            }
        }
        if opts.start_controller {
            env.start_controller()?;
            if opts.register_workers {
                for i in 0..env.workers.len() {
                    let name = env.workers[i].name.clone();
                    env.wait_cluster_ready(&name, Duration::from_secs(30))
                        .await?;
                }
            }
        }
        Ok(env)
    }

    /// Installs the CRD `courier crds` prints and waits until it is Established.
    pub async fn install_crd(&self) -> anyhow::Result<()> {
        let out = self.courier(&["crds"]).await?.ok()?;
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&out.stdout).map_err(|e| anyhow!("courier crds output: {e}"))?;
        let api: Api<CustomResourceDefinition> = Api::all(self.mgmt_client.clone());
        api.create(&PostParams::default(), &crd).await?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        wait_for("the CRD to be Established", Duration::from_secs(20), || {
            let api = api.clone();
            let name = name.clone();
            async move {
                let c = api.get(&name).await.map_err(|e| e.to_string())?;
                let ok = c.status.and_then(|s| s.conditions).is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
                if ok {
                    Ok(())
                } else {
                    Err("not Established".into())
                }
            }
        })
        .await
    }

    /// Creates namespace `name` in the management cluster and on every worker (Courier does not
    /// create namespaces on workers: their administrators do, as the worker chart's release does
    /// for `courier-system`). An existing one is fine.
    /// The holder of the controllers' leader Lease in courier-system (an error when none holds it).
    pub async fn lease_holder(&self) -> Result<String, String> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.mgmt_client.clone(), "courier-system");
        let l = leases
            .get_opt("courier-leader")
            .await
            .map_err(|e| e.to_string())?;
        l.and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty())
            .ok_or_else(|| "no holder".to_string())
    }

    pub async fn create_namespace(&self, name: &str) -> anyhow::Result<()> {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        for client in std::iter::once(&self.mgmt_client).chain(&self.worker_clients) {
            let api: Api<Namespace> = Api::all(client.clone());
            match api.create(&PostParams::default(), &ns).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// `courier cluster add wN --cluster-kubeconfig ... --label k=v`.
    pub async fn register_worker(
        &self,
        i: usize,
        labels: &BTreeMap<String, String>,
    ) -> anyhow::Result<CliOutput> {
        let w = &self.workers[i];
        let kc = w.kubeconfig.display().to_string();
        let mut args: Vec<String> = vec![
            "cluster".into(),
            "add".into(),
            w.name.clone(),
            "--cluster-kubeconfig".into(),
            kc,
        ];
        for (k, v) in labels {
            args.push("--label".into());
            args.push(format!("{k}={v}"));
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.courier(&refs).await?.ok()
    }

    /// Runs the courier CLI against this management cluster.
    pub async fn courier(&self, args: &[&str]) -> anyhow::Result<CliOutput> {
        courier(&self.mgmt.kubeconfig, args).await
    }

    /// Starts `courier run` (a new process; the old one must be gone).
    pub fn start_controller(&mut self) -> anyhow::Result<()> {
        self.controller_starts += 1;
        let mut cmd = Command::new(bin("courier")?);
        cmd.arg("run")
            .arg("--kubeconfig")
            .arg(&self.mgmt.kubeconfig)
            .arg("--metrics-addr")
            .arg(format!("127.0.0.1:{}", self.metrics_port))
            .args(["--origin", ORIGIN])
            .args(&self.controller_args)
            .env("COURIER_LOG", &self.log_filter);
        // A short sweep interval unless the test chose one (`1h` = the garbage collector off).
        if !self.controller_args.iter().any(|a| a == "--gc-interval") {
            cmd.args(["--gc-interval", "2s"]);
        }
        let log = self.dir.join("controller.log");
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
        {
            use std::io::Write as _;
            let _ = writeln!(
                f,
                "===== controller start #{} =====",
                self.controller_starts
            );
        }
        self.controller = Some(Proc::spawn("courier run", cmd, &log, false)?);
        Ok(())
    }

    /// Replaces the extra `courier run` flags used by the next `start_controller`.
    pub fn set_controller_args(&mut self, args: &[&str]) {
        self.controller_args = args.iter().map(|s| s.to_string()).collect();
    }

    /// Starts another `courier run` process (a replica), logging to `controller-<identity>.log`,
    /// with `--identity` and no metrics endpoint; the caller owns it.
    pub fn start_replica(&self, identity: &str, extra: &[&str]) -> anyhow::Result<Proc> {
        self.start_replica_with(identity, &self.mgmt.kubeconfig, extra)
    }

    /// [`Self::start_replica`] with its own management kubeconfig (e.g. its own user).
    pub fn start_replica_with(
        &self,
        identity: &str,
        kubeconfig: &Path,
        extra: &[&str],
    ) -> anyhow::Result<Proc> {
        let mut cmd = Command::new(bin("courier")?);
        cmd.arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "--metrics-addr",
                "off",
                "--gc-interval",
                "2s",
                "--origin",
                ORIGIN,
            ])
            .args(["--identity", identity])
            .args(extra)
            .env("COURIER_LOG", &self.log_filter);
        Proc::spawn(
            &format!("courier run ({identity})"),
            cmd,
            &self.dir.join(format!("controller-{identity}.log")),
            false,
        )
    }

    /// Writes a kubeconfig Secret directly (no `cluster add` checks), replacing an existing one.
    pub async fn put_kubeconfig_secret(&self, name: &str, kubeconfig: &str) -> anyhow::Result<()> {
        let api: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.mgmt_client.clone(), "courier-system");
        // The controller reads only Secrets labelled for it.
        let label = courier_api::LABEL_KUBECONFIG_SECRET;
        let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {label: "true"}},
            "stringData": {"kubeconfig": kubeconfig}
        }))?;
        match api.get_opt(name).await? {
            Some(_) => {
                api.patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"stringData": {"kubeconfig": kubeconfig}})),
                )
                .await?;
            }
            None => {
                api.create(&PostParams::default(), &secret).await?;
            }
        }
        Ok(())
    }

    /// Creates a WorkerCluster directly, naming Secret `secret`.
    pub async fn create_worker_cluster(
        &self,
        name: &str,
        secret: &str,
        labels: &BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        let api: Api<courier_api::WorkerCluster> = Api::all(self.mgmt_client.clone());
        let wc: courier_api::WorkerCluster = serde_json::from_value(json!({
            "apiVersion": courier_api::API_VERSION,
            "kind": "WorkerCluster",
            "metadata": {"name": name, "labels": labels},
            "spec": {"kubeconfigSecretRef": {"name": secret}}
        }))?;
        api.create(&PostParams::default(), &wc).await?;
        Ok(())
    }

    /// Waits until the WorkerCluster's Ready condition has `status` and `reason`; returns its
    /// message.
    pub async fn wait_cluster_condition(
        &self,
        name: &str,
        status: &str,
        reason: &str,
        timeout: Duration,
    ) -> anyhow::Result<String> {
        let api: Api<courier_api::WorkerCluster> = Api::all(self.mgmt_client.clone());
        wait_for(
            &format!("WorkerCluster {name} Ready={status} ({reason})"),
            timeout,
            || {
                let api = api.clone();
                async move {
                    let wc = api.get(name).await.map_err(|e| e.to_string())?;
                    let c = wc
                        .status
                        .as_ref()
                        .and_then(|s| s.ready_condition())
                        .cloned();
                    match c {
                        Some(c) if c.status == status && c.reason == reason => Ok(c.message),
                        Some(c) => Err(format!("Ready={} ({}): {}", c.status, c.reason, c.message)),
                        None => Err("no Ready condition".into()),
                    }
                }
            },
        )
        .await
        .with_context(|| format!("controller log:\n{}", self.controller_log_tail(30)))
    }

    /// `kill -9` of the controller.
    pub fn kill_controller(&mut self) {
        if let Some(mut p) = self.controller.take() {
            p.kill9();
        }
    }

    pub fn controller_log_tail(&self, n: usize) -> String {
        self.controller
            .as_ref()
            .map(|p| p.log_tail(n))
            .unwrap_or_else(|| {
                let text =
                    std::fs::read_to_string(self.dir.join("controller.log")).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                lines[lines.len().saturating_sub(n)..].join("\n")
            })
    }

    pub async fn wait_cluster_ready(&self, name: &str, timeout: Duration) -> anyhow::Result<()> {
        let api: Api<courier_api::WorkerCluster> = Api::all(self.mgmt_client.clone());
        wait_for(&format!("WorkerCluster {name} Ready"), timeout, || {
            let api = api.clone();
            async move {
                let wc = api.get(name).await.map_err(|e| e.to_string())?;
                if wc.is_ready() {
                    Ok(())
                } else {
                    Err(format!("{:?}", wc.status))
                }
            }
        })
        .await
        .with_context(|| format!("controller log:\n{}", self.controller_log_tail(30)))
    }

    pub fn jobs(&self, ns: &str) -> Api<Job> {
        Api::namespaced(self.mgmt_client.clone(), ns)
    }

    pub fn worker_jobs(&self, i: usize, ns: &str) -> Api<Job> {
        Api::namespaced(self.worker_clients[i].clone(), ns)
    }

    /// Index of the worker named `name`.
    pub fn worker_index(&self, name: &str) -> anyhow::Result<usize> {
        self.workers
            .iter()
            .position(|w| w.name == name)
            .ok_or_else(|| anyhow!("no worker named {name}"))
    }

    /// Creates an origin Job from JSON in `ns`.
    pub async fn create_job(&self, ns: &str, job: Value) -> anyhow::Result<Job> {
        let job: Job = serde_json::from_value(job)?;
        Ok(self.jobs(ns).create(&PostParams::default(), &job).await?)
    }

    pub async fn get_job(&self, ns: &str, name: &str) -> anyhow::Result<Job> {
        Ok(self.jobs(ns).get(name).await?)
    }

    /// Waits until `pred` holds for the origin Job; returns it.
    pub async fn wait_job<P>(
        &self,
        ns: &str,
        name: &str,
        what: &str,
        timeout: Duration,
        pred: P,
    ) -> anyhow::Result<Job>
    where
        P: Fn(&Job) -> bool,
    {
        let api = self.jobs(ns);
        let pred = &pred;
        wait_for(&format!("{ns}/{name}: {what}"), timeout, || {
            let api = api.clone();
            async move {
                let j = api.get(name).await.map_err(|e| e.to_string())?;
                if pred(&j) { Ok(j) } else { Err(summary(&j)) }
            }
        })
        .await
        .with_context(|| format!("controller log:\n{}", self.controller_log_tail(30)))
    }

    /// Waits until the origin Job is Complete or Failed.
    pub async fn wait_finished(
        &self,
        ns: &str,
        name: &str,
        timeout: Duration,
    ) -> anyhow::Result<Job> {
        self.wait_job(ns, name, "finished", timeout, |j| finished(j).is_some())
            .await
    }

    /// Every mirror (label `courier.dev/origin`) on every worker: (worker index, Job).
    pub async fn mirrors(&self) -> anyhow::Result<Vec<(usize, Job)>> {
        let mut out = Vec::new();
        for (i, c) in self.worker_clients.iter().enumerate() {
            let api: Api<Job> = Api::all(c.clone());
            let list = api
                .list(&ListParams::default().labels(&format!("{LABEL_ORIGIN}={ORIGIN}")))
                .await?;
            out.extend(list.items.into_iter().map(|j| (i, j)));
        }
        Ok(out)
    }

    /// The mirrors of one origin UID.
    pub async fn mirrors_of(&self, uid: &str) -> anyhow::Result<Vec<(usize, Job)>> {
        Ok(self
            .mirrors()
            .await?
            .into_iter()
            .filter(|(_, j)| label(j, LABEL_ORIGIN_UID) == Some(uid))
            .collect())
    }

    /// Events on the origin Job (core/v1).
    pub async fn events(&self, ns: &str, name: &str) -> anyhow::Result<Vec<Event>> {
        let api: Api<Event> = Api::namespaced(self.mgmt_client.clone(), ns);
        let list = api.list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .collect())
    }

    /// Waits for an event with `reason` on the origin Job; returns its message.
    pub async fn wait_event(
        &self,
        ns: &str,
        name: &str,
        reason: &str,
        timeout: Duration,
    ) -> anyhow::Result<String> {
        wait_for(
            &format!("event {reason} on {ns}/{name}"),
            timeout,
            || async move {
                let evs = self.events(ns, name).await.map_err(|e| e.to_string())?;
                evs.iter()
                    .find(|e| e.reason.as_deref() == Some(reason))
                    .map(|e| e.message.clone().unwrap_or_default())
                    .ok_or_else(|| {
                        format!(
                            "events: {:?}",
                            evs.iter().map(|e| e.reason.clone()).collect::<Vec<_>>()
                        )
                    })
            },
        )
        .await
    }

    pub async fn patch_job(&self, ns: &str, name: &str, patch: Value) -> anyhow::Result<Job> {
        Ok(self
            .jobs(ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await?)
    }

    pub async fn delete_job(&self, ns: &str, name: &str) -> anyhow::Result<()> {
        self.jobs(ns)
            .delete(name, &DeleteParams::background())
            .await?;
        Ok(())
    }

    /// GET on the controller's HTTP endpoint (`/metrics`, `/healthz`, `/readyz`).
    pub async fn http_get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let host = format!("127.0.0.1:{}", self.metrics_port);
        let mut stream = tokio::net::TcpStream::connect(&host).await?;
        let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        stream.write_all(req.as_bytes()).await?;
        let mut buf = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf)).await??;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let code = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map(|x| x.1.to_string())
            .unwrap_or_default();
        Ok((code, body))
    }
}

impl Env {
    /// Ends a test: on error prints where the logs are (and keeps them) and the controller's log
    /// tail; on success the work directory is removed when the Env is dropped.
    pub fn finish<T>(&mut self, r: anyhow::Result<T>) -> anyhow::Result<T> {
        match &r {
            Ok(_) => self.keep = false,
            Err(e) => eprintln!(
                "e2e: {e:#}
logs and kubeconfigs kept in {}
controller log tail:
{}",
                self.dir.display(),
                self.controller_log_tail(60)
            ),
        }
        r
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.kill_controller();
        for w in &mut self.workers {
            w.proc.kill9();
        }
        self.mgmt.proc.kill9();
        if self.keep {
            eprintln!("e2e: logs and kubeconfigs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
