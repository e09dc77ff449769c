//! `courier cluster add`: check a worker, then register it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use courier_api::{DEFAULT_KUBECONFIG_KEY, DEFAULT_NAMESPACE, WorkerCluster, WorkerClusterSpec};
use courier_controller::CredentialPolicy;
use courier_controller::credentials::{self, probe};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

use super::kubeconfig::DEFAULT_WORKER_SERVICE_ACCOUNT;
use super::rotate::{BoundToken, parse_token_ttl, request_bound_kubeconfig};
use super::{LABEL_SECRET_OF, format_labels};
use crate::kubeconfig::{self, Minified};
use crate::management::KubeconfigSource;
use crate::util::{
    self, FIELD_MANAGER, api_message, dns_subdomain_problem, is_not_found, parse_duration,
    parse_label,
};
use crate::workers::{crd_missing, worker_client};

#[derive(Args, Debug)]
pub struct AddArgs {
    /// Name of the WorkerCluster (a DNS subdomain, e.g. eu-1).
    pub name: String,
    /// The worker cluster's kubeconfig file [default: $KUBECONFIG, ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    pub cluster_kubeconfig: Option<PathBuf>,
    /// Context of the worker's kubeconfig [default: its current-context].
    #[arg(long, value_name = "NAME")]
    pub cluster_context: Option<String>,
    /// The worker's API server address as the controller reaches it, when that differs from the
    /// kubeconfig's (kind, private endpoints): stored in the registration instead. The checks from
    /// this machine still use the kubeconfig's address.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// Register without checking the worker from this machine (when it cannot reach the worker);
    /// the controller's own probe still decides whether the cluster is Ready.
    #[arg(long)]
    pub skip_check: bool,
    /// A label of the WorkerCluster (what cluster selectors match); repeatable.
    #[arg(long = "label", short = 'l', value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Share of placements relative to the other clusters (0 = no new Jobs).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = clap::value_parser!(i32).range(0..))]
    pub weight: i32,
    /// Register it paused (no placements until `courier cluster resume`).
    #[arg(long)]
    pub paused: bool,
    /// The worker namespaces Courier may use there, comma-separated (e.g. team-a,team-b): only
    /// Jobs of these namespaces go to it, and Courier needs its Job rights only in these (install
    /// the worker chart with `--set namespaces={team-a,team-b}`). Default: every namespace.
    #[arg(long, value_delimiter = ',', value_name = "NS,...")]
    pub namespaces: Vec<String>,
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
    /// Request a bound token for Courier's ServiceAccount on the worker, valid this long (e.g.
    /// 720h, at least 10m), and register a kubeconfig with it: the kubeconfig given is then an admin
    /// one, used only for the request and never stored. Renew it with `courier cluster
    /// rotate-token NAME` before it expires.
    #[arg(long, value_parser = parse_token_ttl, value_name = "DURATION")]
    pub token_ttl: Option<Duration>,
    /// With --token-ttl: namespace the courier-worker chart is installed in on the worker.
    #[arg(long, default_value = DEFAULT_NAMESPACE, requires = "token_ttl")]
    pub worker_namespace: String,
    /// With --token-ttl: the ServiceAccount Courier uses on the worker (the chart's
    /// `serviceAccount` value).
    #[arg(long, default_value = DEFAULT_WORKER_SERVICE_ACCOUNT, requires = "token_ttl")]
    pub service_account: String,
    /// After registering, wait until Courier reports the cluster Ready (up to this long, e.g. 60s).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub wait: Option<Duration>,
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
    /// `spec.namespaces`: the worker namespaces Courier may use (`None`: all).
    pub namespaces: Option<Vec<String>>,
    /// Annotations of the Secret (where a requested token came from, see `rotate`).
    pub secret_annotations: BTreeMap<String, String>,
}

/// What the checks learned about a worker.
#[derive(Debug, Clone)]
pub struct WorkerFacts {
    pub server_version: String,
}

/// The worker's kubeconfig as the flags name it: a file, or the default kubeconfig
/// (`$KUBECONFIG`, `~/.kube/config`); with the name used in messages and the directory relative
/// file references are resolved against (`--flatten`).
pub fn load_worker_kubeconfig(
    src: &KubeconfigSource,
) -> anyhow::Result<(kube::config::Kubeconfig, String, PathBuf)> {
    match &src.file {
        Some(path) => {
            let kc = util::read_kubeconfig(path)
                .context("pass --cluster-kubeconfig with the worker cluster's kubeconfig")?;
            let base = path.parent().map(|p| p.to_path_buf()).unwrap_or_default();
            Ok((kc, util::display_path(path), base))
        }
        None if src.context.is_none() => bail!(
            "which worker? pass --cluster-kubeconfig FILE with the worker cluster's kubeconfig, or \
             --cluster-context NAME with a context of your kubeconfig ($KUBECONFIG, ~/.kube/config)"
        ),
        None => {
            // read() resolves relative file references itself.
            let kc = kube::config::Kubeconfig::read().context(
                "cannot read the default kubeconfig ($KUBECONFIG, ~/.kube/config) for \
                 --cluster-context; pass --cluster-kubeconfig FILE",
            )?;
            Ok((
                kc,
                "the default kubeconfig ($KUBECONFIG, ~/.kube/config)".to_string(),
                PathBuf::new(),
            ))
        }
    }
}

/// `url` as the server of every cluster in `min` (`--server`); only https:// is accepted.
pub fn with_server(min: &mut Minified, url: &str) -> anyhow::Result<()> {
    kubeconfig::check_server_url(url)?;
    for c in &mut min.kubeconfig.clusters {
        if let Some(cluster) = &mut c.cluster {
            cluster.server = Some(url.to_string());
        }
    }
    Ok(())
}

pub async fn add(
    client: &Client,
    ns: &str,
    worker: &KubeconfigSource,
    a: AddArgs,
) -> anyhow::Result<()> {
    if let Some(p) = worker_cluster_name_problem(&a.name) {
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
    let namespaces = worker_namespaces(&a.namespaces)?;
    let mut bound = None;
    let (mut min, source, base) = match a.token_ttl {
        Some(ttl) => {
            // Nothing is requested from the worker for a registration that cannot be written.
            preflight_management(client, ns, &a.name, &secret_name).await?;
            let token = BoundToken {
                namespace: a.worker_namespace.clone(),
                service_account: a.service_account.clone(),
                ttl,
            };
            let (min, expires) =
                request_bound_kubeconfig(worker, &a.name, &token, a.timeout).await?;
            println!(
                "Requested a token for ServiceAccount {}/{} on worker {:?}, valid until {expires} \
                 (renew it before then: `courier cluster rotate-token {}`).",
                token.namespace, token.service_account, a.name, a.name
            );
            bound = Some((token, expires));
            let source = "the kubeconfig built for the requested token".to_string();
            (min, source, None)
        }
        None => {
            let (kc, source, base) = load_worker_kubeconfig(worker)?;
            let min = kubeconfig::minify(&kc, worker.context.as_deref(), &source)?;
            (min, source, Some(base))
        }
    };
    if a.flatten
        && let Some(base) = &base
    {
        for field in kubeconfig::flatten(&mut min.kubeconfig, base)? {
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
    if let Some(p) = credentials::server_problem(&min.server) {
        bail!(
            "refusing {source} (context {}): its server {p}",
            min.context
        );
    }
    for p in &problems {
        eprintln!(
            "warning: {} is allowed by {}; the controller must run with the same flag",
            p.field,
            p.class.flag()
        );
    }
    // What the controller gets: the same credentials, at the address it reaches the worker at.
    let mut stored = min.clone();
    if let Some(url) = &a.server {
        with_server(&mut stored, url)?;
    }
    if bound.is_none() {
        preflight_management(client, ns, &a.name, &secret_name).await?;
    }
    if a.skip_check {
        eprintln!(
            "Skipped the checks of worker {:?} from this machine (--skip-check): the controller's \
             probe alone decides whether it is Ready (`courier cluster list` shows its state).",
            a.name
        );
    } else {
        let facts = check_worker(&min, namespaces.as_deref(), a.timeout).await?;
        let place = match &namespaces {
            Some(list) => format!(" in namespaces {}", list.join(", ")),
            None => String::new(),
        };
        println!(
            "Checked worker {:?} at {} (context {}): server {}, and the credentials may create, get, \
             list, watch, patch and delete Jobs{place}.",
            a.name, min.server, min.context, facts.server_version
        );
    }
    if let Some(url) = &a.server {
        println!(
            "The controller will reach it at {url} (--server); its probe from there decides whether \
             the cluster is Ready."
        );
    }
    let reg = Registration {
        name: a.name.clone(),
        namespace: ns.to_string(),
        secret_name,
        kubeconfig_yaml: kubeconfig::to_yaml(&stored.kubeconfig)?,
        labels: a.labels.iter().cloned().collect(),
        weight: a.weight,
        paused: a.paused,
        namespaces: namespaces.clone(),
        secret_annotations: bound
            .map(|(t, expires)| t.annotations(&expires))
            .unwrap_or_default(),
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

/// `--namespaces` as `spec.namespaces`: `None` when none is given; each must be a namespace name
/// (a DNS label), and a name given twice counts once.
pub fn worker_namespaces(given: &[String]) -> anyhow::Result<Option<Vec<String>>> {
    let mut out: Vec<String> = Vec::new();
    for ns in given.iter().map(|n| n.trim()) {
        if let Some(p) = crate::util::dns_label_problem(ns) {
            bail!("invalid namespace {ns:?} in --namespaces: it {p}");
        }
        if !out.iter().any(|n| n == ns) {
            out.push(ns.to_string());
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// Why `name` cannot name a WorkerCluster ("it ..."), or None. Beyond a DNS subdomain, at most 63
/// characters: the name becomes the value of the `courier.dev/cluster` label on origin Jobs (the
/// CRD refuses longer names too).
pub fn worker_cluster_name_problem(name: &str) -> Option<String> {
    if let Some(p) = dns_subdomain_problem(name) {
        return Some(p);
    }
    let max = courier_api::MAX_WORKER_CLUSTER_NAME;
    (name.len() > max).then(|| {
        format!(
            "has {} characters; a WorkerCluster name is at most {max}, as it becomes the value of \
             the {} label on origin Jobs: choose a shorter name",
            name.len(),
            courier_api::LABEL_CLUSTER
        )
    })
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
        Err(e) if is_not_found(&e) => return Err(crd_missing()),
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

/// The checks of `cluster add` against the worker itself: the controller's own probe (reachable, a
/// supported version, every right Courier needs), from this machine.
pub async fn check_worker(
    min: &Minified,
    namespaces: Option<&[String]>,
    timeout: Duration,
) -> anyhow::Result<WorkerFacts> {
    if let Some(p) = credentials::server_problem(&min.server) {
        bail!("the worker's kubeconfig: its server {p}");
    }
    let client = worker_client(min, timeout).await?;
    // Namespace creation is not among the rights checked: a controller run with
    // --create-worker-namespaces finds out at its probe (Ready=False, Forbidden, naming the right).
    let scope = probe::RightsScope {
        creating_namespaces: false,
        namespaces,
    };
    let facts = probe::probe(
        &client,
        &min.server,
        min.user_name.as_deref(),
        scope,
        timeout,
    )
    .await
    .map_err(|f| anyhow!(f.message))?;
    Ok(WorkerFacts {
        server_version: facts.server_version,
    })
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
                // The controller reads only Secrets with this label.
                (
                    courier_api::LABEL_KUBECONFIG_SECRET.to_string(),
                    "true".to_string(),
                ),
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    courier_api::PRODUCT.to_string(),
                ),
            ])),
            annotations: (!reg.secret_annotations.is_empty())
                .then(|| reg.secret_annotations.clone()),
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
    spec.namespaces = reg.namespaces.clone();
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

#[cfg(test)]
mod tests {
    use super::worker_cluster_name_problem;

    #[test]
    fn worker_cluster_names_are_label_values() {
        let longest = "a".repeat(63);
        assert_eq!(worker_cluster_name_problem(&longest), None);
        let long = format!("{longest}b");
        let p = worker_cluster_name_problem(&long).unwrap_or_default();
        assert!(
            p.contains("64 characters") && p.contains("at most 63"),
            "{p}"
        );
        assert!(worker_cluster_name_problem("Eu_1").is_some());
    }
}
