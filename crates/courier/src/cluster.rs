//! `courier cluster add|list|remove|pause|resume`: WorkerCluster registrations in the management
//! cluster.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use clap::{Args, Subcommand};
use courier_api::reasons::CONDITION_READY;
use courier_api::{
    DEFAULT_KUBECONFIG_KEY, DEFAULT_NAMESPACE, LABEL_CLUSTER, MANAGED_BY, WorkerCluster,
    WorkerClusterSpec,
};
use courier_controller::CredentialPolicy;
use k8s_openapi::ByteString;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::KubeConfigOptions;
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
    let client = args.management.client().await?;
    let ns = args.namespace.as_str();
    match args.command {
        ClusterCommand::Add(a) => add(&client, ns, a).await,
        ClusterCommand::List(a) => list(&client, a).await,
        ClusterCommand::Remove(a) => remove(&client, ns, a).await,
        ClusterCommand::Pause(a) => set_paused(&client, &a.name, true).await,
        ClusterCommand::Resume(a) => set_paused(&client, &a.name, false).await,
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
    let mut config = Config::from_custom_kubeconfig(
        min.kubeconfig.clone(),
        &KubeConfigOptions {
            context: Some(min.context.clone()),
            ..Default::default()
        },
    )
    .await
    .with_context(|| {
        format!(
            "cannot use context {} of the worker kubeconfig",
            min.context
        )
    })?;
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
        let review = SelfSubjectAccessReview {
            metadata: ObjectMeta::default(),
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    group: Some(group.into()),
                    resource: Some(resource.into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            status: None,
        };
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
    match a.output {
        Output::Json => {
            println!("{}", serde_json::to_string_pretty(&items)?);
            return Ok(());
        }
        Output::Yaml => {
            print!("{}", serde_saphyr::to_string(&items)?);
            return Ok(());
        }
        Output::Table => {}
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
