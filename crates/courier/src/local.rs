//! Everything in one process for `courier sandbox` and `courier demo`: a management and worker
//! kubesim clusters, the WorkerCluster CRD, the workers registered through the same checks as
//! `courier cluster add`, and the controller.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use courier_api::DEFAULT_NAMESPACE;
use courier_controller::ControllerConfig;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use kubesim::{Role, Sim, SimOptions};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cluster::{self, Registration};
use crate::kubeconfig;

/// One worker to start.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct LocalOptions {
    pub speed: f64,
    pub management_port: u16,
    pub workers: Vec<WorkerSpec>,
    pub metrics_addr: Option<SocketAddr>,
    /// The controller's web view (`--ui-addr`); `None` = off.
    pub ui_addr: Option<SocketAddr>,
    /// Start each worker's kubesim admin endpoint (faults: make a worker unreachable on purpose).
    pub worker_admin: bool,
    pub gc_interval: Duration,
    /// Run the controller in this process. `courier bench` runs it as a child process instead, so
    /// its CPU and memory are measured apart from the clusters'.
    pub in_process_controller: bool,
}

impl LocalOptions {
    /// Two workers, `worker-1` (region=eu) and `worker-2` (region=us).
    pub fn two_workers(speed: f64) -> Self {
        let w = |name: &str, region: &str| WorkerSpec {
            name: name.into(),
            labels: BTreeMap::from([("region".to_string(), region.to_string())]),
        };
        Self {
            speed,
            management_port: 0,
            workers: vec![w("worker-1", "eu"), w("worker-2", "us")],
            metrics_addr: None,
            ui_addr: None,
            worker_admin: false,
            gc_interval: Duration::from_secs(10),
            in_process_controller: true,
        }
    }
}

pub struct Local {
    pub management: Sim,
    pub workers: Vec<(WorkerSpec, Sim)>,
    pub client: Client,
    /// The in-process controller (`None` when `in_process_controller` is off).
    pub controller: Option<JoinHandle<anyhow::Result<()>>>,
    shutdown: CancellationToken,
}

/// A client for a kubeconfig held in memory.
pub async fn client_for(kubeconfig_yaml: &str) -> anyhow::Result<Client> {
    let kc = Kubeconfig::from_yaml(kubeconfig_yaml).context("parsing a kubesim kubeconfig")?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .context("loading a kubesim kubeconfig")?;
    courier_controller::credentials::client::client(config).context("building a client")
}

/// Creates the WorkerCluster CRD and waits until the API server serves it.
pub async fn install_crd(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = courier_api::crd();
    let name = crd.metadata.name.clone().unwrap_or_default();
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(e) if crate::util::is_conflict(&e) => {}
        Err(e) => return Err(anyhow!(e)).context("creating the WorkerCluster CRD"),
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let established = crds
            .get_opt(&name)
            .await
            .ok()
            .flatten()
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if established {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("the WorkerCluster CRD was not Established within 20s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Local {
    pub async fn start(opts: LocalOptions) -> anyhow::Result<Local> {
        let management = Sim::start(SimOptions {
            name: "management".into(),
            port: opts.management_port,
            role: Role::Management,
            speed: opts.speed,
            ..Default::default()
        })
        .await
        .context("starting the management kubesim cluster")?;
        let mut workers = Vec::new();
        for w in &opts.workers {
            let sim = Sim::start(SimOptions {
                name: w.name.clone(),
                role: Role::Worker,
                speed: opts.speed,
                admin_port: opts.worker_admin.then_some(0),
                ..Default::default()
            })
            .await
            .with_context(|| format!("starting the kubesim cluster {}", w.name))?;
            workers.push((w.clone(), sim));
        }
        let client = client_for(&management.kubeconfig()).await?;
        install_crd(&client).await?;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(DEFAULT_NAMESPACE.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(e) if crate::util::is_conflict(&e) => {}
            Err(e) => return Err(anyhow!(e)).context("creating namespace courier-system"),
        }
        for (w, sim) in &workers {
            register(&client, w, &sim.kubeconfig()).await?;
        }
        let shutdown = CancellationToken::new();
        if !opts.in_process_controller {
            return Ok(Local {
                management,
                workers,
                client,
                controller: None,
                shutdown,
            });
        }
        let cfg = ControllerConfig {
            metrics_addr: opts.metrics_addr,
            ui_addr: opts.ui_addr,
            gc_interval: opts.gc_interval,
            identity: crate::run::default_identity(),
            ..Default::default()
        };
        let controller = tokio::spawn({
            let client = client.clone();
            let shutdown = shutdown.clone();
            async move { crate::controller::run(client, cfg, shutdown).await }
        });
        let local = Local {
            management,
            workers,
            client,
            controller: Some(controller),
            shutdown,
        };
        local.wait_ready(Duration::from_secs(30)).await?;
        Ok(local)
    }

    /// Waits until every worker is Ready (or the in-process controller stops).
    pub async fn wait_ready(&self, timeout: Duration) -> anyhow::Result<()> {
        let started = tokio::time::Instant::now();
        for (w, _) in &self.workers {
            let left = timeout.saturating_sub(started.elapsed());
            tokio::select! {
                r = cluster::wait_ready(&self.client, &w.name, left) => r?,
                _ = wait_finished(self.controller.as_ref()) => bail!("the controller stopped before the workers were Ready"),
            }
        }
        Ok(())
    }

    /// Whether the in-process controller has stopped (never, when there is none).
    pub fn controller_finished(&self) -> bool {
        self.controller.as_ref().is_some_and(|c| c.is_finished())
    }

    /// A client for worker `i`.
    pub async fn worker_client(&self, name: &str) -> anyhow::Result<Client> {
        let Some((_, sim)) = self.workers.iter().find(|(w, _)| w.name == name) else {
            bail!("no worker named {name}");
        };
        client_for(&sim.kubeconfig()).await
    }

    /// Stops the controller (waiting up to 5 s) and the clusters.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        let result = match self.controller {
            None => Ok(()),
            Some(controller) => {
                match tokio::time::timeout(Duration::from_secs(5), controller).await {
                    Ok(Ok(r)) => r,
                    Ok(Err(join)) => Err(anyhow!("the controller task failed: {join}")),
                    Err(_) => Err(anyhow!("the controller did not stop within 5s")),
                }
            }
        };
        for (_, sim) in &self.workers {
            sim.shutdown();
        }
        self.management.shutdown();
        result
    }
}

async fn wait_finished(handle: Option<&JoinHandle<anyhow::Result<()>>>) {
    let Some(handle) = handle else {
        return std::future::pending().await;
    };
    while !handle.is_finished() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Registers a worker like `courier cluster add` does (same checks, same objects).
async fn register(client: &Client, w: &WorkerSpec, kubeconfig_yaml: &str) -> anyhow::Result<()> {
    let kc = Kubeconfig::from_yaml(kubeconfig_yaml).context("parsing a kubesim kubeconfig")?;
    let min = kubeconfig::minify(&kc, None, &w.name)?;
    let secret_name = format!("{}-kubeconfig", w.name);
    cluster::preflight_management(client, DEFAULT_NAMESPACE, &w.name, &secret_name).await?;
    cluster::check_worker(&min, None, Duration::from_secs(10)).await?;
    cluster::create_registration(
        client,
        &Registration {
            name: w.name.clone(),
            namespace: DEFAULT_NAMESPACE.into(),
            secret_name,
            kubeconfig_yaml: kubeconfig::to_yaml(&min.kubeconfig)?,
            labels: w.labels.clone(),
            weight: 1,
            paused: false,
            namespaces: None,
            secret_annotations: Default::default(),
        },
    )
    .await
}
