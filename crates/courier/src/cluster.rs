//! `courier cluster add|list|remove|pause|resume`: WorkerCluster registrations in the management
//! cluster; `courier cluster kubeconfig`: the worker kubeconfig `add` takes, built from the
//! ServiceAccount the courier-worker chart creates.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use clap::{Args, Subcommand};
use courier_api::reasons::CONDITION_READY;
use courier_api::{
    DEFAULT_KUBECONFIG_KEY, DEFAULT_NAMESPACE, FINALIZER_DRAIN, LABEL_CLUSTER, MANAGED_BY,
    WorkerCluster, WorkerClusterSpec,
};
use courier_controller::CredentialPolicy;
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{
    AuthInfo, Cluster, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};
use kube::{Api, Client, Config};

use crate::ManagementArgs;
use crate::kubeconfig::{self, Minified};
use crate::util::{
    self, age, api_message, dns_subdomain_problem, is_not_found, parse_duration, parse_label,
};

/// Label on Secrets created by `courier cluster add`: the WorkerCluster they belong to.
pub const LABEL_SECRET_OF: &str = "courier.dev/worker-cluster";
/// Field manager of the CLI's writes.
pub const FIELD_MANAGER: &str = "courier-cli";

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Check a worker's kubeconfig (reachable, version, rights, credential policy), then register it.
    Add(AddArgs),
    /// List the registered worker clusters with their state.
    List(ListArgs),
    /// Unregister a worker cluster (refused while Jobs run there unless --drain or --force).
    Remove(RemoveArgs),
    /// Stop placing new Jobs on a worker cluster; Jobs already there continue.
    Pause(NameArgs),
    /// Place new Jobs on a paused worker cluster again.
    Resume(NameArgs),
    /// Print a kubeconfig for Courier's ServiceAccount on a worker (token inline), ready for
    /// `courier cluster add`.
    Kubeconfig(Box<KubeconfigArgs>),
}

#[derive(Args, Debug)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub management: ManagementArgs,
    /// Courier's namespace in the management cluster (where kubeconfig Secrets live).
    #[arg(long, short = 'n', env = "COURIER_NAMESPACE", default_value = DEFAULT_NAMESPACE, global = true)]
    pub namespace: String,
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Args, Debug)]
pub struct AddArgs {
    /// Name of the WorkerCluster (a DNS subdomain, e.g. eu-1).
    pub name: String,
    /// The worker cluster's kubeconfig file.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Context of that kubeconfig to use (default: its current-context).
    #[arg(long)]
    pub context: Option<String>,
    /// A label of the WorkerCluster (what cluster selectors match); repeatable.
    #[arg(long = "label", short = 'l', value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Share of placements relative to the other clusters (0 = no new Jobs).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = clap::value_parser!(i32).range(0..))]
    pub weight: i32,
    /// Register it paused (no placements until `courier cluster resume`).
    #[arg(long)]
    pub paused: bool,
    /// Name of the Secret holding the kubeconfig (default: NAME-kubeconfig).
    #[arg(long)]
    pub secret_name: Option<String>,
    /// Embed files the kubeconfig refers to (tokenFile, certificate and key paths).
    #[arg(long)]
    pub flatten: bool,
    /// Accept a kubeconfig that runs programs (exec plugins, auth-provider).
    #[arg(long)]
    pub allow_exec_kubeconfigs: bool,
    /// Accept a kubeconfig that reads local files (tokenFile, certificate or key paths).
    #[arg(long)]
    pub allow_file_kubeconfigs: bool,
    /// Accept a kubeconfig with insecure-skip-tls-verify.
    #[arg(long)]
    pub allow_insecure_kubeconfigs: bool,
    /// How long to wait for each answer from the worker.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// After registering, wait until Courier reports the cluster Ready (up to this long, e.g. 60s).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub wait: Option<Duration>,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: Output,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

impl Output {
    /// Prints `items` as JSON or YAML; false for `Table`, which each command renders itself.
    pub fn print_structured<T: serde::Serialize>(self, items: &T) -> anyhow::Result<bool> {
        match self {
            Output::Json => println!("{}", serde_json::to_string_pretty(items)?),
            Output::Yaml => print!("{}", serde_saphyr::to_string(items)?),
            Output::Table => return Ok(false),
        }
        Ok(true)
    }
}

#[derive(Args, Debug)]
pub struct RemoveArgs {
    pub name: String,
    /// Pause the cluster, wait until its Jobs have finished, then remove it.
    #[arg(long, conflicts_with = "force")]
    pub drain: bool,
    /// Remove it even though Jobs run there (Courier loses track of their mirrors).
    #[arg(long)]
    pub force: bool,
    /// With --drain: give up after this long.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub timeout: Duration,
}

#[derive(Args, Debug)]
pub struct NameArgs {
    pub name: String,
}

pub async fn run(args: ClusterArgs) -> anyhow::Result<()> {
    let ns = args.namespace.as_str();
    let management = || args.management.client();
    match args.command {
        ClusterCommand::Add(a) => add(&management().await?, ns, a).await,
        ClusterCommand::List(a) => list(&management().await?, a).await,
        ClusterCommand::Remove(a) => remove(&management().await?, ns, a).await,
        ClusterCommand::Pause(a) => set_paused(&management().await?, &a.name, true).await,
        ClusterCommand::Resume(a) => set_paused(&management().await?, &a.name, false).await,
        // Talks to the worker only: no management cluster needed.
        ClusterCommand::Kubeconfig(a) => print_worker_kubeconfig(*a).await,
    }
}

/// What a registration writes into the management cluster.
#[derive(Debug, Clone)]
pub struct Registration {
    pub name: String,
    pub namespace: String,
    pub secret_name: String,
    pub kubeconfig_yaml: String,
    pub labels: BTreeMap<String, String>,
    pub weight: i32,
    pub paused: bool,
}

/// What the checks learned about a worker.
#[derive(Debug, Clone)]
pub struct WorkerFacts {
    pub server_version: String,
}

async fn add(client: &Client, ns: &str, a: AddArgs) -> anyhow::Result<()> {
    if let Some(p) = dns_subdomain_problem(&a.name) {
        bail!("invalid WorkerCluster name {:?}: it {p}", a.name);
    }
    let secret_name = a
        .secret_name
        .clone()
        .unwrap_or_else(|| format!("{}-kubeconfig", a.name));
    if let Some(p) = dns_subdomain_problem(&secret_name) {
        bail!(
            "invalid Secret name {secret_name:?}: it {p}; pass a shorter --secret-name or WorkerCluster name"
        );
    }
    let source = util::display_path(&a.kubeconfig);
    let kc = util::read_kubeconfig(&a.kubeconfig)
        .context("pass --kubeconfig with the worker cluster's kubeconfig")?;
    let mut min = kubeconfig::minify(&kc, a.context.as_deref(), &source)?;
    if a.flatten {
        let base = a
            .kubeconfig
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default();
        for field in kubeconfig::flatten(&mut min.kubeconfig, &base)? {
            eprintln!("embedded the file named by {field}");
        }
    }
    let policy = CredentialPolicy {
        allow_exec: a.allow_exec_kubeconfigs,
        allow_file_references: a.allow_file_kubeconfigs,
        allow_insecure_tls: a.allow_insecure_kubeconfigs,
    };
    let problems = kubeconfig::credential_problems(&min.kubeconfig);
    if let Some(msg) = kubeconfig::policy_violation(&problems, &policy) {
        bail!("refusing {source} (context {}): {msg}", min.context);
    }
    for p in &problems {
        eprintln!(
            "warning: {} is allowed by {}; the controller must run with the same flag",
            p.field,
            p.class.flag()
        );
    }
    preflight_management(client, ns, &a.name, &secret_name).await?;
    let facts = check_worker(&min, a.timeout).await?;
    println!(
        "Checked worker {:?} at {} (context {}): server {}, and the credentials may create, get, \
         list, watch, patch and delete Jobs and create namespaces.",
        a.name, min.server, min.context, facts.server_version
    );
    let reg = Registration {
        name: a.name.clone(),
        namespace: ns.to_string(),
        secret_name,
        kubeconfig_yaml: kubeconfig::to_yaml(&min.kubeconfig)?,
        labels: a.labels.iter().cloned().collect(),
        weight: a.weight,
        paused: a.paused,
    };
    create_registration(client, &reg).await?;
    let labels = if reg.labels.is_empty() {
        "no labels".to_string()
    } else {
        format!("labels {}", format_labels(&reg.labels))
    };
    println!(
        "Registered WorkerCluster {} (weight {}, {labels}{}); its kubeconfig is in Secret {}/{}.",
        reg.name,
        reg.weight,
        if reg.paused { ", paused" } else { "" },
        reg.namespace,
        reg.secret_name
    );
    match a.wait {
        Some(timeout) => {
            wait_ready(client, &reg.name, timeout).await?;
            println!("WorkerCluster {} is Ready.", reg.name);
        }
        None => println!(
            "Courier connects to it within seconds; `courier cluster list` shows its state."
        ),
    }
    Ok(())
}

/// Checks everything in the management cluster a registration needs before anything is written:
/// the CRD, Courier's namespace, and that neither object exists yet.
pub async fn preflight_management(
    client: &Client,
    ns: &str,
    name: &str,
    secret_name: &str,
) -> anyhow::Result<()> {
    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    match wcs.get_opt(name).await {
        Ok(Some(existing)) => {
            let secret = existing.spec.kubeconfig_secret_ref.name;
            bail!(
                "WorkerCluster {name} already exists (kubeconfig in Secret {ns}/{secret}); remove it \
                 first with `courier cluster remove {name}` or choose another name"
            );
        }
        Ok(None) => {}
        Err(e) if is_not_found(&e) => bail!(
            "the WorkerCluster CRD (workerclusters.courier.dev) is not installed in the management \
             cluster: install it with `courier crds | kubectl apply -f -` (or the charts/courier Helm \
             chart)"
        ),
        Err(e) => {
            return Err(anyhow!(e)).context("reading WorkerClusters in the management cluster");
        }
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.get_opt(ns).await {
        Ok(Some(_)) => {}
        Ok(None) => bail!(
            "namespace {ns} does not exist in the management cluster: create it (`kubectl create \
             namespace {ns}`, or install charts/courier) or pass --namespace with Courier's namespace"
        ),
        Err(e) => return Err(anyhow!(e)).context(format!("reading namespace {ns}")),
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    if let Some(s) = secrets
        .get_opt(secret_name)
        .await
        .with_context(|| format!("reading Secret {ns}/{secret_name}"))?
    {
        let ours = s
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_SECRET_OF))
            .is_some_and(|v| v == name);
        if !ours {
            bail!(
                "Secret {ns}/{secret_name} already exists and was not created by `courier cluster \
                 add {name}`; pass --secret-name with another name, or delete that Secret"
            );
        }
    }
    Ok(())
}

/// Builds a client for a minified worker kubeconfig, with `timeout` on connecting and reading.
pub async fn worker_client(min: &Minified, timeout: Duration) -> anyhow::Result<Client> {
    client_for(min, timeout, "the worker kubeconfig").await
}

/// A client for one context of a minified kubeconfig (`what` names it in errors), with `timeout` on
/// connecting, reading and writing.
async fn client_for(min: &Minified, timeout: Duration, what: &str) -> anyhow::Result<Client> {
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
    config.read_timeout = Some(timeout);
    config.write_timeout = Some(timeout);
    Client::try_from(config).with_context(|| {
        format!(
            "cannot build a client for the worker at {} (context {})",
            min.server, min.context
        )
    })
}

/// The checks of `cluster add` against the worker itself: reachable, version, credentials, rights.
pub async fn check_worker(min: &Minified, timeout: Duration) -> anyhow::Result<WorkerFacts> {
    let client = worker_client(min, timeout).await?;
    let server = &min.server;
    let user = min.user_name.as_deref().unwrap_or("(none)");
    let info = match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Err(_) => bail!(
            "cannot reach the worker at {server}: no answer within {}; check the server address, that \
             the cluster is up and that this machine can reach it",
            util::short_duration(timeout)
        ),
        Ok(Err(e)) => return Err(worker_error(e, server, user)),
        Ok(Ok(info)) => info,
    };
    let version = info.git_version.clone();
    let minor: u32 = info.minor.trim_end_matches('+').parse().unwrap_or(u32::MAX);
    if info.major == "1" && minor < 30 {
        bail!(
            "the worker at {server} runs Kubernetes {version}; Courier supports worker clusters from \
             v1.30 on: upgrade the cluster"
        );
    }
    // The same rights the controller's probe reviews: its table of worker calls.
    let needed = courier_controller::api_calls::worker_rights();
    let ssar: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut missing = Vec::new();
    for (verb, group, resource) in needed {
        let review = courier_controller::api_calls::access_review(verb, group, resource);
        let answer =
            match tokio::time::timeout(timeout, ssar.create(&PostParams::default(), &review)).await
            {
                Err(_) => bail!(
                    "the worker at {server} did not answer a SelfSubjectAccessReview within {}",
                    util::short_duration(timeout)
                ),
                Ok(Err(e)) => return Err(worker_error(e, server, user)),
                Ok(Ok(a)) => a,
            };
        let allowed = answer.status.as_ref().is_some_and(|s| s.allowed);
        if !allowed {
            let what = if group.is_empty() {
                format!("{verb} {resource}")
            } else {
                format!("{verb} {resource}.{group}")
            };
            missing.push(what);
        }
    }
    if !missing.is_empty() {
        bail!(
            "the credentials of user {user} on the worker at {server} lack rights Courier needs: {} \
             (in all namespaces); grant them (charts/courier-worker creates a ServiceAccount with \
             exactly these) and use that account's token",
            missing.join(", ")
        );
    }
    Ok(WorkerFacts {
        server_version: version,
    })
}

fn worker_error(e: kube::Error, server: &str, user: &str) -> anyhow::Error {
    match util::api_code(&e) {
        Some(401) => anyhow!(
            "the worker at {server} rejected the credentials of user {user} (401 Unauthorized): the \
             token or client certificate is invalid, expired or revoked; put valid credentials in \
             the kubeconfig"
        ),
        Some(403) => anyhow!(
            "the worker at {server} refused user {user} (403 Forbidden): {}; grant the rights \
             charts/courier-worker defines",
            api_message(&e)
        ),
        Some(_) => anyhow!("the worker at {server} answered: {}", api_message(&e)),
        None => {
            let text = format!("{:#}", anyhow!(e));
            let hint = if text.contains("certificate") || text.contains("Certificate") {
                "; the server's certificate does not verify against the kubeconfig's \
                 certificate-authority-data: use the cluster's CA"
            } else {
                "; check the server address, that the cluster is up and that this machine can reach it"
            };
            anyhow!("cannot reach the worker at {server}: {text}{hint}")
        }
    }
}

/// Creates (or, for a leftover of an interrupted `add`, replaces) the Secret, then the
/// WorkerCluster; removes the Secret again when the WorkerCluster cannot be created.
pub async fn create_registration(client: &Client, reg: &Registration) -> anyhow::Result<()> {
    let ns = &reg.namespace;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(reg.secret_name.clone()),
            namespace: Some(ns.clone()),
            labels: Some(BTreeMap::from([
                (LABEL_SECRET_OF.to_string(), reg.name.clone()),
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    courier_api::PRODUCT.to_string(),
                ),
            ])),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            DEFAULT_KUBECONFIG_KEY.to_string(),
            ByteString(reg.kubeconfig_yaml.clone().into_bytes()),
        )])),
        ..Default::default()
    };
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    match secrets.create(&pp, &secret).await {
        Ok(_) => {}
        Err(e) if util::is_conflict(&e) => {
            // A leftover of an interrupted `cluster add` of the same name (preflight checked the label).
            secrets
                .replace(&reg.secret_name, &pp, &secret)
                .await
                .with_context(|| format!("replacing Secret {ns}/{}", reg.secret_name))?;
        }
        Err(e) => {
            return Err(anyhow!(api_message(&e)))
                .with_context(|| format!("creating Secret {ns}/{}", reg.secret_name));
        }
    }
    let mut spec = WorkerClusterSpec::new(reg.secret_name.clone());
    spec.weight = reg.weight;
    spec.paused = reg.paused;
    let mut wc = WorkerCluster::new(&reg.name, spec);
    if !reg.labels.is_empty() {
        wc.metadata.labels = Some(reg.labels.clone());
    }
    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    if let Err(e) = wcs.create(&pp, &wc).await {
        let _ = secrets
            .delete(&reg.secret_name, &DeleteParams::default())
            .await;
        let hint = if util::is_conflict(&e) {
            format!(
                "; it already exists: remove it first with `courier cluster remove {}`",
                reg.name
            )
        } else {
            String::new()
        };
        bail!(
            "creating WorkerCluster {}: {}{hint}",
            reg.name,
            api_message(&e)
        );
    }
    Ok(())
}

/// Waits until the WorkerCluster's Ready condition is True.
pub async fn wait_ready(client: &Client, name: &str, timeout: Duration) -> anyhow::Result<()> {
    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::from("no status yet (is `courier run` running?)");
    loop {
        match wcs.get_opt(name).await {
            Ok(Some(wc)) => {
                if wc.is_ready() {
                    return Ok(());
                }
                if let Some(c) = wc.status.as_ref().and_then(|s| s.ready_condition()) {
                    last = format!("Ready={} ({}): {}", c.status, c.reason, c.message);
                }
            }
            Ok(None) => bail!("WorkerCluster {name} disappeared while waiting for it"),
            Err(e) => last = api_message(&e),
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "WorkerCluster {name} is not Ready after {}: {last}",
                util::short_duration(timeout)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn format_labels(labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return "<none>".into();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

async fn list_worker_clusters(client: &Client) -> anyhow::Result<Vec<WorkerCluster>> {
    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    match wcs.list(&ListParams::default()).await {
        Ok(l) => Ok(l.items),
        Err(e) if is_not_found(&e) => bail!(
            "the WorkerCluster CRD (workerclusters.courier.dev) is not installed in the management \
             cluster: install it with `courier crds | kubectl apply -f -`"
        ),
        Err(e) => Err(anyhow!(api_message(&e))).context("listing WorkerClusters"),
    }
}

async fn list(client: &Client, a: ListArgs) -> anyhow::Result<()> {
    let mut items = list_worker_clusters(client).await?;
    items.sort_by(|x, y| x.metadata.name.cmp(&y.metadata.name));
    if a.output.print_structured(&items)? {
        return Ok(());
    }
    if items.is_empty() {
        println!(
            "No worker clusters registered. Add one with `courier cluster add NAME --kubeconfig FILE`."
        );
        return Ok(());
    }
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for wc in &items {
        let name = wc.metadata.name.clone().unwrap_or_default();
        let status = wc.status.clone().unwrap_or_default();
        let cond = status
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_READY);
        let (ready, reason) = match cond {
            Some(c) => (c.status.clone(), c.reason.clone()),
            None => ("Unknown".to_string(), "NotObserved".to_string()),
        };
        if let Some(c) = cond
            && c.status != "True"
            && !c.message.is_empty()
        {
            notes.push(format!("{name}: {}: {}", c.reason, c.message));
        }
        let mut flags = Vec::new();
        if wc.spec.paused {
            flags.push("paused".to_string());
        }
        rows.push(vec![
            name,
            ready,
            reason,
            status.server_version.unwrap_or_else(|| "-".into()),
            status
                .current_mirrors
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into()),
            wc.spec.weight.to_string(),
            if wc.spec.paused { "yes" } else { "no" }.to_string(),
            format_labels(&wc.metadata.labels.clone().unwrap_or_default()),
            age(wc.metadata.creation_timestamp.as_ref().map(|t| t.0)),
        ]);
    }
    util::print_table(
        &[
            "NAME", "READY", "REASON", "VERSION", "MIRRORS", "WEIGHT", "PAUSED", "LABELS", "AGE",
        ],
        &rows,
    );
    if !notes.is_empty() {
        println!();
        for n in notes {
            println!("{n}");
        }
    }
    Ok(())
}

/// Origin Jobs placed on `cluster` that have not finished, as `namespace/name`.
pub async fn unfinished_jobs_on(client: &Client, cluster: &str) -> anyhow::Result<Vec<String>> {
    let jobs: Api<Job> = Api::all(client.clone());
    let list = jobs
        .list(&ListParams::default().labels(&format!("{LABEL_CLUSTER}={cluster}")))
        .await
        .map_err(|e| anyhow!(api_message(&e)))
        .context("listing the Jobs placed on the cluster")?;
    let mut out: Vec<String> = list
        .items
        .iter()
        .filter(|j| {
            j.spec.as_ref().and_then(|s| s.managed_by.as_deref()) == Some(MANAGED_BY)
                && !crate::jobs::is_finished(j)
        })
        .map(|j| {
            format!(
                "{}/{}",
                j.metadata.namespace.clone().unwrap_or_default(),
                j.metadata.name.clone().unwrap_or_default()
            )
        })
        .collect();
    out.sort();
    Ok(out)
}

async fn get_cluster(client: &Client, name: &str) -> anyhow::Result<WorkerCluster> {
    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    match wcs.get_opt(name).await {
        Ok(Some(wc)) => Ok(wc),
        Ok(None) => {
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
        Err(e) if is_not_found(&e) => bail!(
            "the WorkerCluster CRD (workerclusters.courier.dev) is not installed in the management \
             cluster: install it with `courier crds | kubectl apply -f -`"
        ),
        Err(e) => Err(anyhow!(api_message(&e))).context(format!("reading WorkerCluster {name}")),
    }
}

fn summarize(jobs: &[String]) -> String {
    let shown: Vec<&str> = jobs.iter().take(5).map(String::as_str).collect();
    if jobs.len() > shown.len() {
        format!(
            "{}, and {} more",
            shown.join(", "),
            jobs.len() - shown.len()
        )
    } else {
        shown.join(", ")
    }
}

async fn remove(client: &Client, ns: &str, a: RemoveArgs) -> anyhow::Result<()> {
    let wc = get_cluster(client, &a.name).await?;
    let name = a.name.as_str();
    let running = unfinished_jobs_on(client, name).await?;
    if !running.is_empty() && !a.drain && !a.force {
        bail!(
            "WorkerCluster {name} still has {} current mirror(s) ({}); pass --drain to stop new \
             placements there and wait until they finish, or --force to remove it anyway (Courier then \
             loses track of those mirrors)",
            running.len(),
            summarize(&running)
        );
    }
    if a.drain && !running.is_empty() {
        if !wc.spec.paused {
            patch_paused(client, name, true).await?;
            println!("Paused WorkerCluster {name}: no new Jobs are placed there.");
        }
        println!(
            "Waiting for {} Job(s) on {name} to finish ({})...",
            running.len(),
            summarize(&running)
        );
        let deadline = tokio::time::Instant::now() + a.timeout;
        let mut last = running.len();
        loop {
            let left = unfinished_jobs_on(client, name).await?;
            if left.is_empty() {
                break;
            }
            if left.len() != last {
                println!("{} Job(s) left on {name}", left.len());
                last = left.len();
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "WorkerCluster {name} still has {} unfinished Job(s) after {} ({}); it stays \
                     paused. Run the command again to keep waiting, or use --force",
                    left.len(),
                    util::short_duration(a.timeout),
                    summarize(&left)
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    match wcs.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => {
            return Err(anyhow!(api_message(&e))).context(format!("deleting WorkerCluster {name}"));
        }
    }
    // The controller's drain finalizer holds a deleted WorkerCluster until its mirrors there are
    // deleted. --force lets go of them at once; otherwise wait for the drain (bounded).
    if a.force {
        release_drain_finalizer(&wcs, name).await?;
    } else {
        wait_drained(&wcs, name, a.timeout.min(Duration::from_secs(120))).await?;
    }
    let secret_name = wc.spec.kubeconfig_secret_ref.name.clone();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret_note = match secrets.get_opt(&secret_name).await {
        Ok(Some(s))
            if s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_SECRET_OF))
                .is_some_and(|v| v == name) =>
        {
            match secrets.delete(&secret_name, &DeleteParams::default()).await {
                Ok(_) => format!(" and its Secret {ns}/{secret_name}"),
                Err(e) => format!(
                    "; deleting its Secret {ns}/{secret_name} failed ({}): delete it by hand",
                    api_message(&e)
                ),
            }
        }
        Ok(Some(_)) => format!(
            "; Secret {ns}/{secret_name} was not created by `courier cluster add` and is left in place"
        ),
        Ok(None) => String::new(),
        Err(e) => format!(
            "; could not read Secret {ns}/{secret_name} ({})",
            api_message(&e)
        ),
    };
    if running.is_empty() || a.drain {
        println!("Removed WorkerCluster {name}{secret_note}.");
    } else {
        println!(
            "Removed WorkerCluster {name}{secret_note} while {} Job(s) ran there ({}).",
            running.len(),
            summarize(&running)
        );
    }
    Ok(())
}

/// Removes Courier's drain finalizer from a deleted WorkerCluster (`--force`).
async fn release_drain_finalizer(wcs: &Api<WorkerCluster>, name: &str) -> anyhow::Result<()> {
    let Some(wc) = wcs
        .get_opt(name)
        .await
        .map_err(|e| anyhow!(api_message(&e)))?
    else {
        return Ok(());
    };
    let finalizers = wc.metadata.finalizers.clone().unwrap_or_default();
    if !finalizers.iter().any(|f| f == FINALIZER_DRAIN) {
        return Ok(());
    }
    let rest: Vec<&String> = finalizers
        .iter()
        .filter(|f| *f != FINALIZER_DRAIN)
        .collect();
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": wc.metadata.resource_version, "finalizers": rest}});
    match wcs
        .patch(
            name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            },
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(anyhow!(api_message(&e))).context(format!(
            "releasing the drain finalizer of WorkerCluster {name}"
        )),
    }
}

/// Waits until a deleted WorkerCluster is gone (the controller drained its mirrors).
async fn wait_drained(
    wcs: &Api<WorkerCluster>,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut told = false;
    loop {
        match wcs
            .get_opt(name)
            .await
            .map_err(|e| anyhow!(api_message(&e)))?
        {
            None => return Ok(()),
            Some(_) if tokio::time::Instant::now() >= deadline => bail!(
                "WorkerCluster {name} is being removed: Courier is still deleting its mirrors there \
                 (the WorkerCluster goes once they are gone, or once the worker stayed unreachable for \
                 the worker-lost timeout); use --force to let go of them now"
            ),
            Some(_) => {
                if !told {
                    println!("Courier is deleting its mirrors on {name}...");
                    told = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

async fn patch_paused(client: &Client, name: &str, paused: bool) -> anyhow::Result<()> {
    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    wcs.patch(
        name,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        },
        &Patch::Merge(serde_json::json!({"spec": {"paused": paused}})),
    )
    .await
    .map_err(|e| anyhow!(api_message(&e)))
    .with_context(|| format!("updating WorkerCluster {name}"))?;
    Ok(())
}

async fn set_paused(client: &Client, name: &str, paused: bool) -> anyhow::Result<()> {
    let wc = get_cluster(client, name).await?;
    if wc.spec.paused == paused {
        println!(
            "WorkerCluster {name} is already {}.",
            if paused { "paused" } else { "taking new Jobs" }
        );
        return Ok(());
    }
    patch_paused(client, name, paused).await?;
    if paused {
        let running = unfinished_jobs_on(client, name).await.unwrap_or_default();
        println!(
            "Paused WorkerCluster {name}: no new Jobs are placed there; {} Job(s) running there continue.",
            running.len()
        );
    } else {
        println!("Resumed WorkerCluster {name}: it takes new Jobs again.");
    }
    Ok(())
}

/// The ServiceAccount the courier-worker chart creates (its `serviceAccount` value).
pub const DEFAULT_WORKER_SERVICE_ACCOUNT: &str = "courier-dispatcher";
const SERVICE_ACCOUNT_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
const SERVICE_ACCOUNT_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
/// The ConfigMap with the cluster's CA that Kubernetes (>= 1.21) publishes in every namespace.
const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
const DEFAULT_TOKEN_DURATION: Duration = Duration::from_secs(24 * 3600);

#[derive(Args, Debug, Clone)]
pub struct KubeconfigArgs {
    /// An admin kubeconfig of the worker, used to read (or request) the token (default:
    /// $KUBECONFIG, ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Context of that kubeconfig (default: its current-context).
    #[arg(long)]
    pub context: Option<String>,
    /// Namespace the courier-worker chart is installed in on the worker (the ServiceAccount's).
    #[arg(long, default_value = DEFAULT_NAMESPACE)]
    pub worker_namespace: String,
    /// The ServiceAccount Courier uses on the worker (the chart's `serviceAccount` value).
    #[arg(long, default_value = DEFAULT_WORKER_SERVICE_ACCOUNT)]
    pub service_account: String,
    /// The token Secret to read (default: SERVICE_ACCOUNT-token, the chart's name for it).
    #[arg(long, conflicts_with = "token_request")]
    pub secret: Option<String>,
    /// Issue a time-bound token with the TokenRequest API instead of reading the token Secret.
    #[arg(long)]
    pub token_request: bool,
    /// With --token-request: how long the token stays valid [default: 24h]. The API server may
    /// shorten it (--service-account-max-token-expiration).
    #[arg(long, requires = "token_request", value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// API server address to write into the kubeconfig (default: the admin kubeconfig's): where
    /// the management cluster's pods reach the worker, when that differs.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// Name of the cluster, user and context in the kubeconfig (default: the admin context's).
    #[arg(long)]
    pub name: Option<String>,
    /// Write the kubeconfig to this file (created with mode 0600) instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub output_file: Option<PathBuf>,
    /// How long to wait for each answer from the worker, and for a new token Secret to be filled.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// A kubeconfig built by `courier cluster kubeconfig`, and where its parts came from (for the
/// summary on stderr; never the token itself).
pub struct WorkerKubeconfig {
    pub yaml: String,
    /// Its cluster, user and context name.
    pub name: String,
    pub server: String,
    /// `system:serviceaccount:<namespace>:<name>`.
    pub user: String,
    /// `Secret <namespace>/<name>` or `TokenRequest`.
    pub token_source: String,
    /// Where the CA came from.
    pub ca_source: String,
    /// Expiry of a TokenRequest token (RFC 3339).
    pub expires: Option<String>,
}

impl std::fmt::Debug for WorkerKubeconfig {
    // Never print the kubeconfig: it holds the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerKubeconfig")
            .field("name", &self.name)
            .field("server", &self.server)
            .field("user", &self.user)
            .field("token_source", &self.token_source)
            .finish_non_exhaustive()
    }
}

async fn print_worker_kubeconfig(a: KubeconfigArgs) -> anyhow::Result<()> {
    let out = worker_kubeconfig(&a).await?;
    let target = match &a.output_file {
        Some(path) => {
            write_private(path, &out.yaml)?;
            util::display_path(path)
        }
        None => {
            use std::io::Write as _;
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(out.yaml.as_bytes())
                .and_then(|()| stdout.flush())
                .context("writing the kubeconfig to standard output")?;
            "FILE".to_string()
        }
    };
    eprintln!(
        "Kubeconfig for {} at {} (token from {}, CA from {}).",
        out.user, out.server, out.token_source, out.ca_source
    );
    if let Some(t) = &out.expires {
        eprintln!(
            "The token expires at {t}: issue a new one and replace the kubeconfig before then \
             (docs/operations.md, \"Rotating credentials\")."
        );
    }
    eprintln!(
        "Register it with: courier cluster add {} --kubeconfig {target}",
        out.name
    );
    Ok(())
}

/// Writes `text` to `path`, readable by the owner only: it holds a credential.
fn write_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        opts.mode(0o600);
        // An existing file keeps its mode on open; tighten it before writing the token.
        if path.exists() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("restricting the permissions of {}", path.display()))?;
        }
    }
    let mut f = opts
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Reads the ServiceAccount's token from the worker (its token Secret, or a TokenRequest) through
/// an admin kubeconfig, and builds a self-contained kubeconfig from it: server and CA inline, the
/// token inline, no programs and no file references — what the controller's policy accepts.
pub async fn worker_kubeconfig(a: &KubeconfigArgs) -> anyhow::Result<WorkerKubeconfig> {
    let (kc, source) = match &a.kubeconfig {
        // read_from resolves relative file references against the file's directory.
        Some(path) => (
            Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?,
            util::display_path(path),
        ),
        None => (
            Kubeconfig::read().context(
                "no kubeconfig for the worker: pass --kubeconfig FILE with an admin kubeconfig of \
                 the worker cluster, or set KUBECONFIG",
            )?,
            "the default kubeconfig ($KUBECONFIG, ~/.kube/config)".to_string(),
        ),
    };
    let admin = kubeconfig::minify(&kc, a.context.as_deref(), &source)?;
    let server = match &a.server {
        Some(s) if !s.starts_with("https://") => bail!(
            "--server {s:?} is not an https:// URL; Courier only talks to workers over TLS it verifies"
        ),
        Some(s) => s.clone(),
        None => admin.server.clone(),
    };
    let name = a.name.clone().unwrap_or_else(|| admin.context.clone());
    if name.is_empty() {
        bail!("--name must not be empty");
    }
    let client = admin_client(&admin, a.timeout).await?;
    let ns = a.worker_namespace.as_str();
    let sa = a.service_account.as_str();
    let ctx = AdminCtx {
        server: &admin.server,
        user: admin.user_name.as_deref().unwrap_or("(none)"),
        timeout: a.timeout,
    };
    let (token, token_source, secret_ca, expires) = if a.token_request {
        let duration = a.duration.unwrap_or(DEFAULT_TOKEN_DURATION);
        let (token, expires) = request_token(&client, &ctx, ns, sa, duration).await?;
        (token, "TokenRequest".to_string(), None, Some(expires))
    } else {
        let secret_name = a.secret.clone().unwrap_or_else(|| format!("{sa}-token"));
        let (token, ca) = read_token_secret(&client, &ctx, ns, sa, &secret_name).await?;
        (token, format!("Secret {ns}/{secret_name}"), ca, None)
    };
    let admin_cluster = admin
        .kubeconfig
        .clusters
        .first()
        .and_then(|c| c.cluster.clone())
        .unwrap_or_default();
    let (ca, ca_source) = if let Some(data) = admin_cluster
        .certificate_authority_data
        .clone()
        .filter(|d| !d.trim().is_empty())
    {
        (
            data,
            format!("the admin kubeconfig (context {})", admin.context),
        )
    } else if let Some(path) = &admin_cluster.certificate_authority {
        let pem = std::fs::read(path)
            .with_context(|| format!("cannot read the CA file {path} named by {source}"))?;
        (b64(&pem), path.clone())
    } else if let Some(pem) = secret_ca {
        (b64(&pem), "the token Secret's ca.crt".to_string())
    } else if let Some(pem) = root_ca(&client, &ctx, ns).await? {
        (b64(&pem), format!("ConfigMap {ns}/{ROOT_CA_CONFIGMAP}"))
    } else {
        bail!(
            "no CA certificate for the worker at {server}: {source} (context {}) has none, and \
             neither has the token Secret (ca.crt) or ConfigMap {ns}/{ROOT_CA_CONFIGMAP}; use an \
             admin kubeconfig with certificate-authority-data",
            admin.context
        )
    };
    let user = format!("system:serviceaccount:{ns}:{sa}");
    let out = Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: name.clone(),
            cluster: Some(Cluster {
                server: Some(server.clone()),
                certificate_authority_data: Some(ca),
                // The name the admin kubeconfig verifies the certificate against, when it set one
                // for this same address.
                tls_server_name: if a.server.is_none() {
                    admin_cluster.tls_server_name.clone()
                } else {
                    None
                },
                ..Default::default()
            }),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.clone(),
            auth_info: Some(AuthInfo {
                token: Some(token.into()),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: name.clone(),
            context: Some(kube::config::Context {
                cluster: name.clone(),
                user: Some(name.clone()),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        current_context: Some(name.clone()),
        ..Default::default()
    };
    // Built from inline data only, so this holds by construction; checked because a kubeconfig the
    // controller would refuse must never be printed.
    if let Some(p) = kubeconfig::credential_problems(&out).first() {
        bail!("internal error: the generated kubeconfig has {}", p.field);
    }
    Ok(WorkerKubeconfig {
        yaml: kubeconfig::to_yaml(&out)?,
        name,
        server,
        user,
        token_source,
        ca_source,
        expires,
    })
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// What error messages about the admin connection name.
struct AdminCtx<'a> {
    server: &'a str,
    user: &'a str,
    timeout: Duration,
}

impl AdminCtx<'_> {
    /// `what` failed with `e`; 404s are the callers' (they know which object is missing).
    fn error(&self, e: kube::Error, what: &str) -> anyhow::Error {
        let (server, user) = (self.server, self.user);
        match util::api_code(&e) {
            Some(401) => anyhow!(
                "{what}: the worker at {server} rejected the credentials of user {user} (401 \
                 Unauthorized); use a valid admin kubeconfig of the worker (--kubeconfig, --context)"
            ),
            Some(403) => anyhow!(
                "{what}: user {user} may not do that on the worker at {server} ({}); use an admin \
                 kubeconfig of the worker (--kubeconfig, --context)",
                api_message(&e)
            ),
            Some(_) => anyhow!(
                "{what}: the worker at {server} answered: {}",
                api_message(&e)
            ),
            None => anyhow!(
                "{what}: cannot reach the worker at {server}: {:#}; check the kubeconfig, that the \
                 cluster is up and that this machine can reach it",
                anyhow!(e)
            ),
        }
    }

    fn timed_out(&self, what: &str) -> anyhow::Error {
        anyhow!(
            "{what}: the worker at {} did not answer within {}",
            self.server,
            util::short_duration(self.timeout)
        )
    }
}

/// A client for the admin kubeconfig as the user has it: exec plugins and files are fine here,
/// on the user's own machine (the policy is about what the controller runs).
async fn admin_client(admin: &Minified, timeout: Duration) -> anyhow::Result<Client> {
    client_for(admin, timeout, "the worker's admin kubeconfig").await
}

fn chart_hint(ns: &str) -> String {
    format!(
        "install the courier-worker chart on the worker (`helm install courier-worker \
         charts/courier-worker -n {ns} --create-namespace`), or pass --worker-namespace and \
         --service-account with the values it was installed with"
    )
}

/// The token (and `ca.crt`) of the ServiceAccount's long-lived token Secret. Waits up to the
/// timeout for the token controller to fill a freshly created Secret.
async fn read_token_secret(
    client: &Client,
    ctx: &AdminCtx<'_>,
    ns: &str,
    sa: &str,
    name: &str,
) -> anyhow::Result<(String, Option<Vec<u8>>)> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let what = format!("reading Secret {ns}/{name}");
    let deadline = tokio::time::Instant::now() + ctx.timeout;
    loop {
        let secret = match tokio::time::timeout(ctx.timeout, secrets.get_opt(name)).await {
            Err(_) => return Err(ctx.timed_out(&what)),
            Ok(Err(e)) => return Err(ctx.error(e, &what)),
            Ok(Ok(None)) => bail!(
                "Secret {ns}/{name} (ServiceAccount {sa}'s token) does not exist on the worker at \
                 {}: {}; or pass --secret NAME if the token Secret has another name, or \
                 --token-request to issue a time-bound token instead",
                ctx.server,
                chart_hint(ns)
            ),
            Ok(Ok(Some(s))) => s,
        };
        let type_ = secret.type_.as_deref().unwrap_or("Opaque");
        if type_ != SERVICE_ACCOUNT_TOKEN_TYPE {
            bail!(
                "Secret {ns}/{name} on the worker is of type {type_}, not \
                 {SERVICE_ACCOUNT_TOKEN_TYPE}: it is not a ServiceAccount token; pass --secret with \
                 the token Secret of ServiceAccount {sa}"
            );
        }
        let owner = secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SERVICE_ACCOUNT_NAME_ANNOTATION))
            .map(String::as_str)
            .unwrap_or("");
        if owner != sa {
            bail!(
                "Secret {ns}/{name} on the worker holds the token of ServiceAccount {owner:?}, not \
                 {sa}; pass --service-account {owner} if that is Courier's, or --secret with {sa}'s \
                 token Secret"
            );
        }
        let data = secret.data.unwrap_or_default();
        let token = data
            .get("token")
            .map(|b| String::from_utf8_lossy(&b.0).trim().to_string())
            .filter(|t| !t.is_empty());
        if let Some(token) = token {
            let ca = data
                .get("ca.crt")
                .map(|b| b.0.clone())
                .filter(|c| !c.is_empty());
            return Ok((token, ca));
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "Secret {ns}/{name} on the worker has no token after {}: the worker's token \
                 controller (in kube-controller-manager) fills it in; check that it runs, or pass \
                 --token-request",
                util::short_duration(ctx.timeout)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A bound token for the ServiceAccount from the TokenRequest API, and its expiry.
async fn request_token(
    client: &Client,
    ctx: &AdminCtx<'_>,
    ns: &str,
    sa: &str,
    duration: Duration,
) -> anyhow::Result<(String, String)> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let request = TokenRequest {
        metadata: ObjectMeta::default(),
        spec: TokenRequestSpec {
            // Empty: the API server's own audience, which is what authenticating to it needs.
            audiences: Vec::new(),
            bound_object_ref: None,
            expiration_seconds: Some(i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)),
        },
        status: None,
    };
    let what = format!("requesting a token for ServiceAccount {ns}/{sa}");
    let answer = match tokio::time::timeout(
        ctx.timeout,
        accounts.create_token_request(sa, &PostParams::default(), &request),
    )
    .await
    {
        Err(_) => return Err(ctx.timed_out(&what)),
        Ok(Err(e)) if is_not_found(&e) => bail!(
            "{what}: ServiceAccount {ns}/{sa} (or the TokenRequest API) was not found on the worker \
             at {} ({}): {}",
            ctx.server,
            api_message(&e),
            chart_hint(ns)
        ),
        Ok(Err(e)) => return Err(ctx.error(e, &what)),
        Ok(Ok(t)) => t,
    };
    let Some(status) = answer.status.filter(|s| !s.token.is_empty()) else {
        bail!(
            "{what}: the worker at {} answered without a token",
            ctx.server
        );
    };
    Ok((status.token, status.expiration_timestamp.0.to_string()))
}

/// The cluster's CA from the `kube-root-ca.crt` ConfigMap (None when there is none).
async fn root_ca(client: &Client, ctx: &AdminCtx<'_>, ns: &str) -> anyhow::Result<Option<Vec<u8>>> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let what = format!("reading ConfigMap {ns}/{ROOT_CA_CONFIGMAP}");
    match tokio::time::timeout(ctx.timeout, maps.get_opt(ROOT_CA_CONFIGMAP)).await {
        Err(_) => Err(ctx.timed_out(&what)),
        Ok(Err(e)) => Err(ctx.error(e, &what)),
        Ok(Ok(cm)) => Ok(cm
            .and_then(|c| c.data)
            .and_then(|d| d.get("ca.crt").cloned())
            .filter(|c| !c.is_empty())
            .map(String::into_bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesim::kinds::ssar::{Rule, RuleSet};
    use kubesim::{Role, Sim, SimOptions};

    const SA_USER: &str = "system:serviceaccount:courier-system:courier-dispatcher";
    const TOKEN: &str = "sa-token-6b1f0c";

    /// What charts/courier-worker grants the ServiceAccount (plus access reviews, which every
    /// authenticated user may create).
    fn worker_chart_rules() -> RuleSet {
        RuleSet {
            allow: vec![
                Rule::new(
                    &["create", "get", "list", "watch", "patch", "delete"],
                    &["batch"],
                    &["jobs"],
                ),
                Rule::new(&["create", "get"], &[""], &["namespaces"]),
                Rule::new(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews"],
                ),
            ],
            deny: Vec::new(),
        }
    }

    async fn sim(name: &str, role: Role) -> Sim {
        Sim::start(SimOptions {
            name: name.into(),
            role,
            ..Default::default()
        })
        .await
        .expect("kubesim starts")
    }

    fn tmp_dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("courier-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    fn args(admin: &std::path::Path) -> KubeconfigArgs {
        KubeconfigArgs {
            kubeconfig: Some(admin.to_path_buf()),
            context: None,
            worker_namespace: DEFAULT_NAMESPACE.into(),
            service_account: DEFAULT_WORKER_SERVICE_ACCOUNT.into(),
            secret: None,
            token_request: false,
            duration: None,
            server: None,
            name: None,
            output_file: None,
            timeout: Duration::from_secs(5),
        }
    }

    async fn create_namespace(client: &Client, name: &str) {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace created");
    }

    /// A Secret as the token controller leaves it: type, owner annotation, `token` and `ca.crt`.
    fn token_secret(name: &str, owner: &str, type_: &str, data: &[(&str, &[u8])]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some(BTreeMap::from([(
                    SERVICE_ACCOUNT_NAME_ANNOTATION.to_string(),
                    owner.to_string(),
                )])),
                ..Default::default()
            },
            type_: Some(type_.into()),
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    /// A worker prepared like the courier-worker chart does: namespace, token Secret (filled as
    /// the token controller would) and the ServiceAccount's token with the chart's rights.
    async fn prepared_worker(dir: &std::path::Path) -> (Sim, PathBuf) {
        let worker = sim("w1", Role::Worker).await;
        let admin = crate::local::client_for(&worker.kubeconfig())
            .await
            .expect("admin client");
        create_namespace(&admin, DEFAULT_NAMESPACE).await;
        let secret = token_secret(
            "courier-dispatcher-token",
            DEFAULT_WORKER_SERVICE_ACCOUNT,
            SERVICE_ACCOUNT_TOKEN_TYPE,
            &[
                ("token", TOKEN.as_bytes()),
                ("ca.crt", worker.ca_pem.as_bytes()),
                ("namespace", b"courier-system"),
            ],
        );
        Api::<Secret>::namespaced(admin, DEFAULT_NAMESPACE)
            .create(&PostParams::default(), &secret)
            .await
            .expect("token Secret created");
        worker.add_token(TOKEN, SA_USER, worker_chart_rules());
        let path = dir.join("w1-admin.kubeconfig");
        worker.write_kubeconfig(&path).expect("admin kubeconfig");
        (worker, path)
    }

    #[test]
    fn kubeconfig_flags() {
        use clap::Parser as _;
        let parse = |args: &[&str]| {
            crate::Cli::try_parse_from(["courier", "cluster", "kubeconfig"].iter().chain(args))
        };
        let kc = |args: &[&str]| match parse(args).map(|c| c.command) {
            Ok(crate::Command::Cluster(ClusterArgs {
                command: ClusterCommand::Kubeconfig(a),
                ..
            })) => *a,
            other => panic!("{args:?} parsed as {other:?}"),
        };
        let a = kc(&[]);
        assert_eq!(a.service_account, "courier-dispatcher");
        assert_eq!(a.worker_namespace, "courier-system");
        assert!(!a.token_request && a.duration.is_none() && a.secret.is_none());
        let a = kc(&[
            "--token-request",
            "--duration",
            "2h",
            "--output-file",
            "w.kubeconfig",
        ]);
        assert_eq!(a.duration, Some(Duration::from_secs(7200)));
        assert_eq!(a.output_file, Some(PathBuf::from("w.kubeconfig")));
        // A duration only means something for a requested token; a Secret is not requested.
        assert!(parse(&["--duration", "1h"]).is_err());
        assert!(parse(&["--secret", "s", "--token-request"]).is_err());
    }

    #[tokio::test]
    async fn kubeconfig_from_the_token_secret_passes_cluster_add() {
        let dir = tmp_dir("kubeconfig-add");
        let (worker, admin_path) = prepared_worker(&dir).await;
        let out_path = dir.join("w1.kubeconfig");
        let mut a = args(&admin_path);
        a.name = Some("w1".into());
        a.output_file = Some(out_path.clone());
        print_worker_kubeconfig(a)
            .await
            .expect("kubeconfig printed");

        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&out_path)
                .expect("written")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "the kubeconfig holds a token");
        }
        let kc = util::read_kubeconfig(&out_path).expect("parses");
        assert_eq!(kc.current_context.as_deref(), Some("w1"));
        let min = kubeconfig::minify(&kc, None, "generated").expect("one context");
        assert_eq!(min.server, worker.url());
        let raw: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&out_path).expect("read"))
                .expect("yaml");
        assert_eq!(
            raw["users"][0]["user"]["token"], TOKEN,
            "the ServiceAccount's token, not the admin's"
        );
        assert!(kubeconfig::credential_problems(&kc).is_empty());

        // Registered for real, with every check `cluster add` makes.
        let management = sim("management", Role::Management).await;
        let mc = crate::local::client_for(&management.kubeconfig())
            .await
            .expect("management client");
        crate::local::install_crd(&mc).await.expect("CRD");
        create_namespace(&mc, DEFAULT_NAMESPACE).await;
        add(
            &mc,
            DEFAULT_NAMESPACE,
            AddArgs {
                name: "w1".into(),
                kubeconfig: out_path.clone(),
                context: None,
                labels: Vec::new(),
                weight: 1,
                paused: false,
                secret_name: None,
                flatten: false,
                allow_exec_kubeconfigs: false,
                allow_file_kubeconfigs: false,
                allow_insecure_kubeconfigs: false,
                timeout: Duration::from_secs(5),
                wait: None,
            },
        )
        .await
        .expect("cluster add accepts the generated kubeconfig");
        let stored = Api::<Secret>::namespaced(mc.clone(), DEFAULT_NAMESPACE)
            .get("w1-kubeconfig")
            .await
            .expect("registration Secret");
        let text = stored
            .data
            .and_then(|d| d.get(DEFAULT_KUBECONFIG_KEY).cloned())
            .map(|b| String::from_utf8_lossy(&b.0).to_string())
            .unwrap_or_default();
        assert!(
            text.contains(TOKEN),
            "stored kubeconfig carries the SA token"
        );
        assert!(
            Api::<WorkerCluster>::all(mc)
                .get_opt("w1")
                .await
                .expect("get")
                .is_some()
        );

        // Without the chart's rights the same kubeconfig is refused by `add`'s checks: they really
        // ran as the ServiceAccount.
        worker.set_rules(TOKEN, RuleSet::none());
        let min = kubeconfig::minify(&kc, None, "generated").expect("one context");
        let e = check_worker(&min, Duration::from_secs(5))
            .await
            .expect_err("no rights")
            .to_string();
        assert!(e.contains(SA_USER) || e.contains("403"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn ca_comes_from_the_token_secret_when_the_admin_kubeconfig_has_none() {
        let dir = tmp_dir("kubeconfig-ca");
        let (worker, _) = prepared_worker(&dir).await;
        // An admin kubeconfig that skips TLS verification and carries no CA.
        let mut admin = Kubeconfig::from_yaml(&worker.kubeconfig()).expect("parses");
        for c in &mut admin.clusters {
            if let Some(c) = &mut c.cluster {
                c.certificate_authority_data = None;
                c.insecure_skip_tls_verify = Some(true);
            }
        }
        let admin_path = dir.join("insecure-admin.kubeconfig");
        std::fs::write(&admin_path, kubeconfig::to_yaml(&admin).expect("yaml")).expect("write");
        let out = worker_kubeconfig(&args(&admin_path))
            .await
            .expect("generated");
        assert!(out.ca_source.contains("ca.crt"), "{}", out.ca_source);
        let kc = Kubeconfig::from_yaml(&out.yaml).expect("parses");
        assert!(
            kubeconfig::credential_problems(&kc).is_empty(),
            "no insecure-skip-tls-verify carried over"
        );
        // The worker's certificate verifies against the CA taken from the Secret.
        let min = kubeconfig::minify(&kc, None, "generated").expect("one context");
        check_worker(&min, Duration::from_secs(5))
            .await
            .expect("TLS verified with the Secret's CA");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn errors_name_the_object_and_the_fix_and_never_the_token() {
        let dir = tmp_dir("kubeconfig-errors");
        let (worker, admin_path) = prepared_worker(&dir).await;
        let admin = crate::local::client_for(&worker.kubeconfig())
            .await
            .expect("admin client");
        let secrets: Api<Secret> = Api::namespaced(admin.clone(), DEFAULT_NAMESPACE);
        let fail = |a: KubeconfigArgs| async move {
            let e = format!(
                "{:#}",
                worker_kubeconfig(&a).await.expect_err("must be refused")
            );
            assert!(!e.contains(TOKEN), "the token leaked into an error: {e}");
            e
        };

        // Chart not installed (here: another namespace).
        let mut a = args(&admin_path);
        a.worker_namespace = "elsewhere".into();
        let e = fail(a).await;
        assert!(
            e.contains("Secret elsewhere/courier-dispatcher-token")
                && e.contains("helm install courier-worker charts/courier-worker -n elsewhere"),
            "{e}"
        );

        // Not a token Secret.
        let opaque = token_secret(
            "plain",
            "courier-dispatcher",
            "Opaque",
            &[("token", TOKEN.as_bytes())],
        );
        secrets
            .create(&PostParams::default(), &opaque)
            .await
            .expect("create");
        let mut a = args(&admin_path);
        a.secret = Some("plain".into());
        let e = fail(a).await;
        assert!(e.contains("type Opaque") && e.contains("--secret"), "{e}");

        // Another account's token.
        let foreign = token_secret(
            "someone-token",
            "someone",
            SERVICE_ACCOUNT_TOKEN_TYPE,
            &[("token", TOKEN.as_bytes())],
        );
        secrets
            .create(&PostParams::default(), &foreign)
            .await
            .expect("create");
        let mut a = args(&admin_path);
        a.secret = Some("someone-token".into());
        let e = fail(a).await;
        assert!(e.contains("ServiceAccount \"someone\""), "{e}");

        // Not filled by a token controller.
        let empty = token_secret(
            "empty-token",
            "courier-dispatcher",
            SERVICE_ACCOUNT_TOKEN_TYPE,
            &[],
        );
        secrets
            .create(&PostParams::default(), &empty)
            .await
            .expect("create");
        let mut a = args(&admin_path);
        a.secret = Some("empty-token".into());
        a.timeout = Duration::from_secs(1);
        let e = fail(a).await;
        assert!(e.contains("has no token after 1s"), "{e}");

        // kubesim serves no ServiceAccounts: the TokenRequest path answers 404 like a cluster
        // without the chart.
        let mut a = args(&admin_path);
        a.token_request = true;
        let e = fail(a).await;
        assert!(
            e.contains("ServiceAccount courier-system/courier-dispatcher")
                && e.contains("helm install courier-worker"),
            "{e}"
        );

        // An admin kubeconfig that may not read Secrets.
        worker.add_token("viewer", "viewer", RuleSet::none());
        let viewer_path = dir.join("viewer.kubeconfig");
        std::fs::write(&viewer_path, worker.kubeconfig_for("viewer")).expect("write");
        let e = fail(args(&viewer_path)).await;
        assert!(
            e.contains("reading Secret courier-system/courier-dispatcher-token")
                && e.contains("403")
                && e.contains("admin kubeconfig"),
            "{e}"
        );

        let mut a = args(&admin_path);
        a.server = Some("http://w1:6443".into());
        let e = fail(a).await;
        assert!(e.contains("https://"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
