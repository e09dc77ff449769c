//! Bound worker tokens: `courier cluster add --token-ttl` requests one from the worker's TokenRequest
//! API for Courier's ServiceAccount, and `courier cluster rotate-token` replaces it in the
//! registration's Secret before (or after) it expires. The controller reads the changed Secret by
//! itself. The token is never printed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use courier_api::WorkerCluster;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::config::{AuthInfo, Kubeconfig};
use kube::{Api, Client};

use super::kubeconfig::{
    DEFAULT_TOKEN_DURATION, DEFAULT_WORKER_SERVICE_ACCOUNT, KubeconfigArgs, worker_kubeconfig,
};
use crate::kubeconfig::{self, Minified};
use crate::management::KubeconfigSource;
use crate::util::{self, FIELD_MANAGER, api_message, is_not_found, parse_duration};
use crate::workers::crd_missing;

/// On the registration Secret: `NAMESPACE/NAME` of the ServiceAccount its token is for.
pub const ANNOTATION_TOKEN_ACCOUNT: &str = "courier.dev/token-service-account";
/// On the registration Secret: the requested lifetime of its token, in seconds.
pub const ANNOTATION_TOKEN_TTL: &str = "courier.dev/token-ttl-seconds";
/// On the registration Secret: when its token expires (RFC 3339).
pub const ANNOTATION_TOKEN_EXPIRES: &str = "courier.dev/token-expires";
/// The shortest lifetime the TokenRequest API accepts.
const MIN_TOKEN_TTL: Duration = Duration::from_secs(600);

/// A `--token-ttl`: a duration of at least ten minutes.
pub fn parse_token_ttl(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < MIN_TOKEN_TTL {
        return Err(format!(
            "{s} is shorter than 10m, the shortest lifetime the TokenRequest API issues"
        ));
    }
    Ok(d)
}

/// Which ServiceAccount a bound token is for, and for how long.
#[derive(Debug, Clone)]
pub struct BoundToken {
    pub namespace: String,
    pub service_account: String,
    pub ttl: Duration,
}

impl BoundToken {
    /// The registration Secret's annotations recording where the token came from.
    pub fn annotations(&self, expires: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                ANNOTATION_TOKEN_ACCOUNT.to_string(),
                format!("{}/{}", self.namespace, self.service_account),
            ),
            (
                ANNOTATION_TOKEN_TTL.to_string(),
                self.ttl.as_secs().to_string(),
            ),
            (ANNOTATION_TOKEN_EXPIRES.to_string(), expires.to_string()),
        ])
    }
}

/// Requests a bound token through the worker's admin kubeconfig (`admin`) and builds the worker
/// kubeconfig holding it (context `name`, the admin kubeconfig's server and CA); returns it with
/// the token's expiry.
pub async fn request_bound_kubeconfig(
    admin: &KubeconfigSource,
    name: &str,
    token: &BoundToken,
    timeout: Duration,
) -> anyhow::Result<(Minified, String)> {
    let args = KubeconfigArgs {
        cluster_kubeconfig: admin.file.clone(),
        cluster_context: admin.context.clone(),
        worker_namespace: token.namespace.clone(),
        service_account: token.service_account.clone(),
        token_secret: false,
        secret: None,
        token_request: false,
        duration: Some(token.ttl),
        server: None,
        name: Some(name.to_string()),
        output_file: None,
        timeout,
    };
    let out = worker_kubeconfig(&args, admin).await?;
    let kc = Kubeconfig::from_yaml(&out.yaml).context("parsing the generated kubeconfig")?;
    let min = kubeconfig::minify(&kc, None, "the generated kubeconfig")?;
    Ok((min, out.expires.unwrap_or_default()))
}

#[derive(Args, Debug)]
pub struct RotateArgs {
    /// The WorkerCluster whose token to replace.
    pub name: String,
    /// An admin kubeconfig of the worker, used to request the new token [default: $KUBECONFIG,
    /// ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    pub cluster_kubeconfig: Option<PathBuf>,
    /// Context of the worker's admin kubeconfig [default: its current-context].
    #[arg(long, value_name = "NAME")]
    pub cluster_context: Option<String>,
    /// How long the new token stays valid (at least 10m) [default: the lifetime `cluster add
    /// --token-ttl` asked for, else 24h].
    #[arg(long, value_parser = parse_token_ttl, value_name = "DURATION")]
    pub token_ttl: Option<Duration>,
    /// Namespace of Courier's ServiceAccount on the worker [default: the one the token was first
    /// requested for, else courier-system].
    #[arg(long)]
    pub worker_namespace: Option<String>,
    /// Courier's ServiceAccount on the worker [default: the one the token was first requested
    /// for, else courier-dispatcher].
    #[arg(long)]
    pub service_account: Option<String>,
    /// How long to wait for each answer from the worker.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Then wait until Courier reports the cluster Ready (up to this long, e.g. 60s).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub wait: Option<Duration>,
}

/// The ServiceAccount and lifetime for the new token: flags first, then what the Secret recorded
/// when the token was first requested, then the chart's defaults.
fn token_for(a: &RotateArgs, annotations: &BTreeMap<String, String>) -> BoundToken {
    let recorded = annotations
        .get(ANNOTATION_TOKEN_ACCOUNT)
        .and_then(|v| v.split_once('/'));
    let recorded_ttl = annotations
        .get(ANNOTATION_TOKEN_TTL)
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_secs)
        .filter(|d| *d >= MIN_TOKEN_TTL);
    BoundToken {
        namespace: a
            .worker_namespace
            .clone()
            .or_else(|| recorded.map(|(ns, _)| ns.to_string()))
            .unwrap_or_else(|| courier_api::DEFAULT_NAMESPACE.to_string()),
        service_account: a
            .service_account
            .clone()
            .or_else(|| recorded.map(|(_, sa)| sa.to_string()))
            .unwrap_or_else(|| DEFAULT_WORKER_SERVICE_ACCOUNT.to_string()),
        ttl: a
            .token_ttl
            .or(recorded_ttl)
            .unwrap_or(DEFAULT_TOKEN_DURATION),
    }
}

/// `courier cluster rotate-token`: requests a new bound token and writes it into the WorkerCluster's
/// kubeconfig Secret in place of the old one (server, CA and names unchanged).
pub async fn rotate(
    client: &Client,
    ns: &str,
    admin: &KubeconfigSource,
    a: RotateArgs,
) -> anyhow::Result<()> {
    let name = a.name.as_str();
    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    let wc = match wcs.get_opt(name).await {
        Ok(Some(wc)) => wc,
        Ok(None) => bail!(
            "WorkerCluster {name} does not exist; register it with `courier cluster add {name} \
             --cluster-kubeconfig ADMIN.kubeconfig --token-ttl 720h`"
        ),
        Err(e) if is_not_found(&e) => return Err(crd_missing()),
        Err(e) => return Err(anyhow!(api_message(&e))).context("reading the WorkerCluster"),
    };
    let secret_ref = wc.spec.kubeconfig_secret_ref;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let what = format!("Secret {ns}/{}", secret_ref.name);
    let Some(mut secret) = secrets
        .get_opt(&secret_ref.name)
        .await
        .map_err(|e| anyhow!(api_message(&e)))
        .with_context(|| format!("reading {what}"))?
    else {
        bail!(
            "{what} (the kubeconfig of WorkerCluster {name}) does not exist; register the worker \
             again: `courier cluster remove {name}`, then `courier cluster add {name} \
             --cluster-kubeconfig ADMIN.kubeconfig --token-ttl 720h`"
        );
    };
    let text = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&secret_ref.key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .with_context(|| format!("{what} has no key {:?}", secret_ref.key))?;
    let source = format!("{what} (key {})", secret_ref.key);
    let stored = Kubeconfig::from_yaml(&text)
        .map_err(|_| anyhow!("{source} does not hold a readable kubeconfig"))?;
    let mut stored = kubeconfig::minify(&stored, None, &source)?;
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    let token = token_for(&a, &annotations);
    let (fresh, expires) = request_bound_kubeconfig(admin, name, &token, a.timeout).await?;
    let new_token = fresh
        .kubeconfig
        .auth_infos
        .first()
        .and_then(|u| u.auth_info.as_ref())
        .and_then(|u| u.token.clone())
        .context("internal error: the generated kubeconfig has no token")?;
    // The user becomes the token alone (a client certificate or another credential left beside
    // it would still be sent).
    for user in &mut stored.kubeconfig.auth_infos {
        user.auth_info = Some(AuthInfo {
            token: Some(new_token.clone()),
            ..Default::default()
        });
    }
    if let Some(p) = kubeconfig::credential_problems(&stored.kubeconfig).first() {
        bail!(
            "{source} has {}, which a bound token cannot replace; register the worker again with \
             `courier cluster add {name} --token-ttl`",
            p.field
        );
    }
    let yaml = kubeconfig::to_yaml(&stored.kubeconfig)?;
    secret
        .data
        .get_or_insert_with(BTreeMap::new)
        .insert(secret_ref.key.clone(), ByteString(yaml.into_bytes()));
    secret
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(token.annotations(&expires));
    secret.metadata.managed_fields = None;
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    // The resourceVersion read above: a concurrent change is a conflict, not overwritten.
    match secrets.replace(&secret_ref.name, &pp, &secret).await {
        Ok(_) => {}
        Err(e) if util::is_conflict(&e) => bail!(
            "{what} changed while the token was requested; run `courier cluster rotate-token \
             {name}` again"
        ),
        Err(e) => return Err(anyhow!(api_message(&e))).with_context(|| format!("writing {what}")),
    }
    println!(
        "Replaced the token of WorkerCluster {name} in {what}: ServiceAccount {}/{}, valid until \
         {expires}. Courier reads it within seconds.",
        token.namespace, token.service_account
    );
    if let Some(timeout) = a.wait {
        super::add::wait_ready(client, name, timeout).await?;
        println!("WorkerCluster {name} is Ready.");
    }
    Ok(())
}
