//! `courier cluster kubeconfig`: a worker kubeconfig for the ServiceAccount of the courier-worker chart.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use courier_api::DEFAULT_NAMESPACE;
use kube::config::{AuthInfo, Cluster, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};

use super::token::{
    AdminCtx, ROOT_CA_CONFIGMAP, admin_client, read_token_secret, request_token, root_ca,
};
use crate::kubeconfig;
use crate::management::KubeconfigSource;
use crate::util::{self, parse_duration};

/// The ServiceAccount the courier-worker chart creates (its `serviceAccount` value).
pub const DEFAULT_WORKER_SERVICE_ACCOUNT: &str = "courier-dispatcher";
pub const DEFAULT_TOKEN_DURATION: Duration = Duration::from_secs(24 * 3600);

#[derive(Args, Debug, Clone)]
pub struct KubeconfigArgs {
    /// An admin kubeconfig of the worker, used to request (or read) the token [default:
    /// $KUBECONFIG, ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    pub cluster_kubeconfig: Option<PathBuf>,
    /// Context of the worker's admin kubeconfig [default: its current-context].
    #[arg(long, value_name = "NAME")]
    pub cluster_context: Option<String>,
    /// Namespace the courier-worker chart is installed in on the worker (the ServiceAccount's).
    #[arg(long, default_value = DEFAULT_NAMESPACE)]
    pub worker_namespace: String,
    /// The ServiceAccount Courier uses on the worker (the chart's `serviceAccount` value).
    #[arg(long, default_value = DEFAULT_WORKER_SERVICE_ACCOUNT)]
    pub service_account: String,
    /// Read the ServiceAccount's long-lived token Secret instead of requesting a bound token
    /// (only where the courier-worker chart was installed with `tokenSecret: true`).
    #[arg(long)]
    pub token_secret: bool,
    /// With --token-secret: the Secret to read (default: SERVICE_ACCOUNT-token, the chart's name
    /// for it).
    #[arg(long, requires = "token_secret")]
    pub secret: Option<String>,
    /// Deprecated, and ignored: a bound token from the TokenRequest API is the default.
    #[arg(long, hide = true, conflicts_with = "token_secret")]
    pub token_request: bool,
    /// How long the requested token stays valid [default: 24h; at least 10m]. The API server may
    /// shorten it (--service-account-max-token-expiration).
    #[arg(long, conflicts_with = "token_secret", value_parser = parse_duration, value_name = "DURATION")]
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

pub async fn print_worker_kubeconfig(
    a: KubeconfigArgs,
    worker: &KubeconfigSource,
) -> anyhow::Result<()> {
    if a.token_request {
        eprintln!(
            "warning: --token-request is deprecated and does nothing: a bound token is the default \
             (--token-secret reads the chart's token Secret instead)"
        );
    }
    let out = worker_kubeconfig(&a, worker).await?;
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
        "Register it with: courier cluster add {} --cluster-kubeconfig {target}",
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

/// Reads the ServiceAccount's token from the worker (a TokenRequest, or its token Secret) through
/// an admin kubeconfig, and builds a self-contained kubeconfig from it: server and CA inline, the
/// token inline, no programs and no file references — what the controller's policy accepts.
pub async fn worker_kubeconfig(
    a: &KubeconfigArgs,
    worker: &KubeconfigSource,
) -> anyhow::Result<WorkerKubeconfig> {
    let (kc, source) = match &worker.file {
        // read_from resolves relative file references against the file's directory.
        Some(path) => (
            Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?,
            util::display_path(path),
        ),
        None => (
            Kubeconfig::read().context(
                "no kubeconfig for the worker: pass --cluster-kubeconfig FILE with an admin kubeconfig of \
                 the worker cluster, or set KUBECONFIG",
            )?,
            "the default kubeconfig ($KUBECONFIG, ~/.kube/config)".to_string(),
        ),
    };
    let admin = kubeconfig::minify(&kc, worker.context.as_deref(), &source)?;
    let server = match &a.server {
        Some(s) => {
            kubeconfig::check_server_url(s)?;
            s.clone()
        }
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
    let (token, token_source, secret_ca, expires) = if a.token_secret {
        let secret_name = a.secret.clone().unwrap_or_else(|| format!("{sa}-token"));
        let (token, ca) = read_token_secret(&client, &ctx, ns, sa, &secret_name).await?;
        (token, format!("Secret {ns}/{secret_name}"), ca, None)
    } else {
        let duration = a.duration.unwrap_or(DEFAULT_TOKEN_DURATION);
        let (token, expires) = request_token(&client, &ctx, ns, sa, duration).await?;
        (token, "TokenRequest".to_string(), None, Some(expires))
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

pub fn chart_hint(ns: &str) -> String {
    format!(
        "install the courier-worker chart on the worker (`helm install courier-worker \
         charts/courier-worker -n {ns} --create-namespace`), or pass --worker-namespace and \
         --service-account with the values it was installed with"
    )
}
