//! Registered workers as the CLI reaches them: WorkerClusters in the management cluster, clients
//! for worker kubeconfigs, and the kubeconfig a WorkerCluster's Secret holds (what `courier logs` and
//! `courier describe` use to read the mirror, with Courier's own credentials on the worker).

use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use courier_api::WorkerCluster;
use courier_api::reasons::CONDITION_READY;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::kubeconfig::{self, Minified};
use crate::util::{self, api_message, is_not_found};

/// The error for a management cluster without the WorkerCluster CRD.
pub fn crd_missing() -> anyhow::Error {
    anyhow!(
        "the WorkerCluster CRD (workerclusters.courier.dev) is not installed in the management \
         cluster: install it with `courier crds | kubectl apply -f -` (or the charts/courier Helm chart)"
    )
}

/// Builds a client for a minified worker kubeconfig, with `timeout` on connecting and reading.
pub async fn worker_client(min: &Minified, timeout: Duration) -> anyhow::Result<Client> {
    client_for(min, timeout, "the worker kubeconfig").await
}

/// A client for one context of a minified kubeconfig (`what` names it in errors), with `timeout` on
/// connecting, reading and writing.
pub async fn client_for(min: &Minified, timeout: Duration, what: &str) -> anyhow::Result<Client> {
    client_with(min, timeout, Some(timeout), what).await
}

/// [`client_for`] with its own read timeout (None for long streams such as `logs -f`).
pub async fn client_with(
    min: &Minified,
    timeout: Duration,
    read_timeout: Option<Duration>,
    what: &str,
) -> anyhow::Result<Client> {
    let mut config = Config::from_custom_kubeconfig(
        min.kubeconfig.clone(),
        &KubeConfigOptions {
            context: Some(min.context.clone()),
            ..Default::default()
        },
    )
    .await
    .with_context(|| format!("cannot use context {} of {what}", min.context))?;
    config.connect_timeout = Some(timeout);
    config.read_timeout = read_timeout;
    config.write_timeout = Some(timeout);
    courier_controller::credentials::client::client(config).with_context(|| {
        format!(
            "cannot build a client for the worker at {} (context {})",
            min.server, min.context
        )
    })
}

pub async fn list_worker_clusters(client: &Client) -> anyhow::Result<Vec<WorkerCluster>> {
    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    match wcs.list(&ListParams::default()).await {
        Ok(l) => Ok(l.items),
        Err(e) if is_not_found(&e) => Err(crd_missing()),
        Err(e) => Err(anyhow!(api_message(&e))).context("listing WorkerClusters"),
    }
}

/// One WorkerCluster, or None when there is no such registration.
pub async fn get_cluster_opt(client: &Client, name: &str) -> anyhow::Result<Option<WorkerCluster>> {
    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    match wcs.get_opt(name).await {
        Ok(wc) => Ok(wc),
        Err(e) if is_not_found(&e) => Err(crd_missing()),
        Err(e) => Err(anyhow!(api_message(&e))).context(format!("reading WorkerCluster {name}")),
    }
}

/// One WorkerCluster; not found names the registered ones.
pub async fn get_cluster(client: &Client, name: &str) -> anyhow::Result<WorkerCluster> {
    if let Some(wc) = get_cluster_opt(client, name).await? {
        return Ok(wc);
    }
    let known: Vec<String> = list_worker_clusters(client)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|w| w.metadata.name)
        .collect();
    if known.is_empty() {
        bail!("WorkerCluster {name} not found: no worker clusters are registered")
    }
    bail!(
        "WorkerCluster {name} not found; registered clusters: {} (`courier cluster list`)",
        known.join(", ")
    )
}

/// `Ready=False (Reason): message`, or None when the cluster is Ready.
pub fn not_ready(wc: &WorkerCluster) -> Option<String> {
    if wc.is_ready() {
        return None;
    }
    let cond = wc
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == CONDITION_READY));
    Some(match cond {
        Some(c) => format!("Ready={} ({}): {}", c.status, c.reason, c.message),
        None => "no Ready condition yet (is `courier run` running?)".to_string(),
    })
}

/// A registered worker reached with the kubeconfig in its WorkerCluster's Secret: Courier's own
/// credentials there. Reading that Secret needs `get secrets` in Courier's namespace.
pub struct RegisteredWorker {
    pub name: String,
    pub server: String,
    pub client: Client,
}

/// Connects to worker `wc` through its kubeconfig Secret in `courier_ns`; `for_what` says in errors
/// why the CLI needs it (`courier logs`).
pub async fn connect_registered(
    management: &Client,
    courier_ns: &str,
    wc: &WorkerCluster,
    for_what: &str,
    timeout: Duration,
    read_timeout: Option<Duration>,
) -> anyhow::Result<RegisteredWorker> {
    let name = wc.metadata.name.clone().unwrap_or_default();
    let r = &wc.spec.kubeconfig_secret_ref;
    let secrets: Api<Secret> = Api::namespaced(management.clone(), courier_ns);
    let secret = match secrets.get_opt(&r.name).await {
        Ok(Some(s)) => s,
        Ok(None) => bail!(
            "Secret {courier_ns}/{} (the kubeconfig of WorkerCluster {name}) does not exist; if \
             Courier runs in another namespace pass --courier-namespace, else register the cluster \
             again (`courier cluster remove {name}`, `courier cluster add {name} ...`)",
            r.name
        ),
        Err(e) if util::api_code(&e) == Some(403) => bail!(
            "{for_what} reads worker {name} with Courier's credentials, in Secret {courier_ns}/{}, \
             and the management cluster refused that ({}): ask for `get secrets` in namespace \
             {courier_ns} (docs/security.md, \"Who reads logs\")",
            r.name,
            api_message(&e)
        ),
        Err(e) => {
            return Err(anyhow!(api_message(&e)))
                .context(format!("reading Secret {courier_ns}/{}", r.name));
        }
    };
    let key = if r.key.is_empty() {
        courier_api::DEFAULT_KUBECONFIG_KEY
    } else {
        r.key.as_str()
    };
    let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(key)) else {
        bail!(
            "Secret {courier_ns}/{} has no key {key:?}: WorkerCluster {name}'s kubeconfig is missing; \
             register the cluster again",
            r.name
        );
    };
    let source = format!("Secret {courier_ns}/{} (key {key})", r.name);
    let text = std::str::from_utf8(&bytes.0)
        .with_context(|| format!("{source} is not a text kubeconfig"))?;
    let kc =
        Kubeconfig::from_yaml(text).with_context(|| format!("{source} is not a kubeconfig"))?;
    let min = kubeconfig::minify(&kc, None, &source)?;
    let client = client_with(&min, timeout, read_timeout, &source).await?;
    Ok(RegisteredWorker {
        name,
        server: min.server,
        client,
    })
}
