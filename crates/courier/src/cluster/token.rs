//! Requesting (or reading) the worker ServiceAccount's token and CA through an admin kubeconfig
//! (for `cluster kubeconfig`, `cluster add --token-ttl` and `cluster rotate-token`).

use std::time::Duration;

use anyhow::{anyhow, bail};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, Client};

use super::kubeconfig::chart_hint;
use crate::kubeconfig::Minified;
use crate::util::{self, api_message, is_not_found};
use crate::workers::client_for;

pub const SERVICE_ACCOUNT_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
pub const SERVICE_ACCOUNT_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
/// The ConfigMap with the cluster's CA that Kubernetes (>= 1.21) publishes in every namespace.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// What error messages about the admin connection name.
pub struct AdminCtx<'a> {
    pub server: &'a str,
    pub user: &'a str,
    pub timeout: Duration,
}

impl AdminCtx<'_> {
    /// `what` failed with `e`; 404s are the callers' (they know which object is missing).
    pub fn error(&self, e: kube::Error, what: &str) -> anyhow::Error {
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

    pub fn timed_out(&self, what: &str) -> anyhow::Error {
        anyhow!(
            "{what}: the worker at {} did not answer within {}",
            self.server,
            util::short_duration(self.timeout)
        )
    }
}

/// A client for the admin kubeconfig as the user has it: exec plugins and files are fine here,
/// on the user's own machine (the policy is about what the controller runs).
pub async fn admin_client(admin: &Minified, timeout: Duration) -> anyhow::Result<Client> {
    client_for(admin, timeout, "the worker's admin kubeconfig").await
}

/// The token (and `ca.crt`) of the ServiceAccount's long-lived token Secret. Waits up to the
/// timeout for the token controller to fill a freshly created Secret.
pub async fn read_token_secret(
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
                 {}: the courier-worker chart creates it only with `tokenSecret: true` (`helm \
                 upgrade courier-worker charts/courier-worker -n {ns} --reuse-values --set \
                 tokenSecret=true`); or drop --token-secret to request a bound, expiring token \
                 instead (recommended), or pass --secret NAME if the token Secret has another name",
                ctx.server
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
                 controller (in kube-controller-manager) fills it in; check that it runs, or drop \
                 --token-secret to request a bound token",
                util::short_duration(ctx.timeout)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A bound token for the ServiceAccount from the TokenRequest API, and its expiry.
pub async fn request_token(
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
pub async fn root_ca(
    client: &Client,
    ctx: &AdminCtx<'_>,
    ns: &str,
) -> anyhow::Result<Option<Vec<u8>>> {
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
