//! Worker kubeconfigs and the worker probe: the one place both `courier run` and `courier cluster
//! add` take them from.
//!
//! A kubeconfig stored in a Secret is data someone pasted; it must not make the controller run
//! programs, read local files or skip TLS verification unless the operator allowed that class
//! explicitly ([`CredentialPolicy`]), and its server must be an `https://` URL without credentials
//! in it (a token sent over plain http travels in clear; a `user:password@` URL would be logged).
//! Problems name the offending kubeconfig field and never quote its values (tokens and keys must
//! not reach logs, events or conditions): YAML errors are reported by position only.
//!
//! [`probe`] is the worker check both run: reachable, a supported version, every right Courier needs.

pub mod client;
pub mod probe;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use kube::config::{AuthInfo, Cluster, KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::config::CredentialPolicy;
use crate::server_wait::ServerWaitLayer;

/// Flag names of the `courier run` switches that relax the policy (named in refusals).
pub const FLAG_ALLOW_EXEC: &str = "--allow-exec-kubeconfigs";
pub const FLAG_ALLOW_FILES: &str = "--allow-file-kubeconfigs";
pub const FLAG_ALLOW_INSECURE: &str = "--allow-insecure-kubeconfigs";

/// Why a kubeconfig cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeconfigProblem {
    #[error("the kubeconfig is not valid YAML or not a kubeconfig{}", position(*line, *column))]
    Syntax {
        line: Option<u64>,
        column: Option<u64>,
    },
    #[error("the kubeconfig defines no context")]
    NoContext,
    #[error("the kubeconfig's current-context {0:?} is not one of its contexts")]
    UnknownContext(String),
    #[error(
        "context {context:?} refers to cluster {cluster:?}, which the kubeconfig does not define"
    )]
    UnknownCluster { context: String, cluster: String },
    #[error("context {context:?} refers to user {user:?}, which the kubeconfig does not define")]
    UnknownUser { context: String, user: String },
    #[error("cluster {0:?} has no server URL")]
    NoServer(String),
    /// The server URL breaks the URL rule ([`server_problem`]); no flag allows it.
    #[error("kubeconfig field {field} {problem}")]
    Server { field: String, problem: String },
    /// One or more fields the policy refuses; each names the field and the flag that allows it.
    #[error("{}", refusals.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Refused { refusals: Vec<Refusal> },
    /// kube could not turn the kubeconfig into a client (bad certificate data, bad URL, ...).
    #[error("the kubeconfig cannot be used: {0}")]
    Unusable(String),
}

fn position(line: Option<u64>, column: Option<u64>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" (line {l}, column {c})"),
        (Some(l), None) => format!(" (line {l})"),
        _ => String::new(),
    }
}

/// A class of credentials refused unless the controller (and `courier cluster add`) runs with the
/// matching flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialClass {
    /// Runs a program (exec plugin, auth-provider).
    Exec,
    /// Reads a local file (tokenFile, certificate or key paths).
    File,
    /// Skips TLS verification.
    Insecure,
}

impl CredentialClass {
    /// The flag that allows this class (on `courier run` and `courier cluster add`).
    pub fn flag(self) -> &'static str {
        match self {
            CredentialClass::Exec => FLAG_ALLOW_EXEC,
            CredentialClass::File => FLAG_ALLOW_FILES,
            CredentialClass::Insecure => FLAG_ALLOW_INSECURE,
        }
    }

    pub fn allowed_by(self, policy: CredentialPolicy) -> bool {
        match self {
            CredentialClass::Exec => policy.allow_exec,
            CredentialClass::File => policy.allow_file_references,
            CredentialClass::Insecure => policy.allow_insecure_tls,
        }
    }
}

/// A kubeconfig field in a refused class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The field as a path into the kubeconfig, e.g. `users[w1].user.exec`.
    pub field: String,
    pub class: CredentialClass,
    /// What the field does and what to use instead, e.g. "runs an exec credential plugin ...".
    pub what: String,
}

impl Refusal {
    /// The flag that allows this field's class.
    pub fn flag(&self) -> &'static str {
        self.class.flag()
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kubeconfig field {} {}; refused unless the controller runs with {}",
            self.field,
            self.what,
            self.flag()
        )
    }
}

/// A kubeconfig that passed the policy, ready to build clients from.
#[derive(Clone)]
pub struct CheckedKubeconfig {
    kubeconfig: Kubeconfig,
    context: String,
    /// The server URL (not secret; for logs and the snapshot API).
    pub server: String,
    /// Changes whenever the kubeconfig text changes (rotation detection, not security).
    pub fingerprint: u64,
}

impl std::fmt::Debug for CheckedKubeconfig {
    // Never print the kubeconfig: it holds credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedKubeconfig")
            .field("context", &self.context)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// Fingerprint of a kubeconfig text.
pub fn fingerprint(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// What is wrong with `url` as a worker's API server address ("is not ..."), or None. Only
/// `https://` with a host, and no `user:password@` (the server URL is logged and shown in
/// conditions). No flag relaxes this: over plain `http://` the token would travel in clear.
pub fn server_problem(url: &str) -> Option<String> {
    let Some(rest) = url.strip_prefix("https://") else {
        return Some(format!(
            "{url:?} is not an https:// URL; Courier only talks to workers over TLS it verifies (over \
             http:// the token would travel in clear)",
            url = scheme_only(url)
        ));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Some(
            "has credentials in the server URL (user:password@); put them in the kubeconfig's user \
             (token or client certificate) instead"
                .into(),
        );
    }
    if authority.is_empty() {
        return Some(format!("{url:?} is an https:// URL without a host"));
    }
    None
}

/// `url` without anything that could be a credential (for quoting a refused URL).
fn scheme_only(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) if rest.contains('@') => {
            let host = rest.rsplit_once('@').map(|(_, h)| h).unwrap_or_default();
            format!("{scheme}://...@{host}")
        }
        _ => url.to_string(),
    }
}

/// Every field of `kc` in a refused class (all its clusters and users), whether or not a policy
/// allows it: [`refused`] filters by policy.
pub fn refusals(kc: &Kubeconfig) -> Vec<Refusal> {
    let mut out = Vec::new();
    for nc in &kc.clusters {
        if let Some(c) = &nc.cluster {
            out.extend(cluster_refusals(&nc.name, c));
        }
    }
    for na in &kc.auth_infos {
        if let Some(a) = &na.auth_info {
            out.extend(user_refusals(&na.name, a));
        }
    }
    out
}

/// The refusals `policy` does not allow.
pub fn refused(refusals: &[Refusal], policy: CredentialPolicy) -> Vec<Refusal> {
    refusals
        .iter()
        .filter(|r| !r.class.allowed_by(policy))
        .cloned()
        .collect()
}

/// Parses `text` and applies `policy` to the context it would use (current-context, or the only
/// context when none is set).
pub fn check(text: &str, policy: CredentialPolicy) -> Result<CheckedKubeconfig, KubeconfigProblem> {
    let kubeconfig: Kubeconfig = serde_saphyr::from_str(text).map_err(|e| {
        let loc = e.location();
        KubeconfigProblem::Syntax {
            line: loc.map(|l| l.line()),
            column: loc.map(|l| l.column()),
        }
    })?;
    let context_name = match &kubeconfig.current_context {
        Some(c) if !c.is_empty() => c.clone(),
        _ => match kubeconfig.contexts.as_slice() {
            [only] => only.name.clone(),
            _ => return Err(KubeconfigProblem::NoContext),
        },
    };
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| KubeconfigProblem::UnknownContext(context_name.clone()))?;
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| KubeconfigProblem::UnknownCluster {
            context: context_name.clone(),
            cluster: context.cluster.clone(),
        })?;
    let user = match &context.user {
        Some(u) if !u.is_empty() => Some((
            u.clone(),
            kubeconfig
                .auth_infos
                .iter()
                .find(|a| &a.name == u)
                .and_then(|a| a.auth_info.clone())
                .ok_or_else(|| KubeconfigProblem::UnknownUser {
                    context: context_name.clone(),
                    user: u.clone(),
                })?,
        )),
        _ => None,
    };
    let mut all = cluster_refusals(&context.cluster, &cluster);
    if let Some((name, auth)) = &user {
        all.extend(user_refusals(name, auth));
    }
    let refusals = refused(&all, policy);
    if !refusals.is_empty() {
        return Err(KubeconfigProblem::Refused { refusals });
    }
    let server = cluster
        .server
        .clone()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| KubeconfigProblem::NoServer(context.cluster.clone()))?;
    if let Some(problem) = server_problem(&server) {
        return Err(KubeconfigProblem::Server {
            field: format!("clusters[{}].cluster.server", context.cluster),
            problem,
        });
    }
    Ok(CheckedKubeconfig {
        kubeconfig,
        context: context_name,
        server,
        fingerprint: fingerprint(text),
    })
}

fn file_refusal(field: String, what: &str, inline: &str) -> Refusal {
    Refusal {
        field,
        class: CredentialClass::File,
        what: format!(
            "{what} on the controller's machine; embed the contents in {inline} instead (`courier \
             cluster add --flatten`, or `kubectl config view --minify --flatten`)"
        ),
    }
}

fn cluster_refusals(name: &str, c: &Cluster) -> Vec<Refusal> {
    let mut out = Vec::new();
    let field = |f: &str| format!("clusters[{name}].cluster.{f}");
    if c.certificate_authority
        .as_ref()
        .is_some_and(|p| !p.is_empty())
    {
        out.push(file_refusal(
            field("certificate-authority"),
            "reads a CA file",
            "certificate-authority-data",
        ));
    }
    if c.insecure_skip_tls_verify == Some(true) {
        out.push(Refusal {
            field: field("insecure-skip-tls-verify"),
            class: CredentialClass::Insecure,
            what: "turns off TLS verification of the worker's API server; put the cluster's CA in \
                   certificate-authority-data instead"
                .into(),
        });
    }
    out
}

fn user_refusals(name: &str, a: &AuthInfo) -> Vec<Refusal> {
    let mut out = Vec::new();
    let field = |f: &str| format!("users[{name}].user.{f}");
    if a.exec.is_some() {
        out.push(Refusal {
            field: field("exec"),
            class: CredentialClass::Exec,
            what:
                "runs an exec credential plugin inside the controller; use a ServiceAccount token \
                   (token) or a client certificate (client-certificate-data) instead"
                    .into(),
        });
    }
    if a.auth_provider.is_some() {
        out.push(Refusal {
            field: field("auth-provider"),
            class: CredentialClass::Exec,
            what: "runs an auth-provider plugin inside the controller; use a ServiceAccount token \
                   (token) instead"
                .into(),
        });
    }
    let files = [
        ("tokenFile", &a.token_file, "reads a token file", "token"),
        (
            "client-certificate",
            &a.client_certificate,
            "reads a client certificate file",
            "client-certificate-data",
        ),
        (
            "client-key",
            &a.client_key,
            "reads a client key file",
            "client-key-data",
        ),
    ];
    for (key, value, what, inline) in files {
        if value.as_ref().is_some_and(|p| !p.is_empty()) {
            out.push(file_refusal(field(key), what, inline));
        }
    }
    out
}

/// Timeouts of one client (kube's client has none by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientTimeouts {
    pub connect: Duration,
    /// Longest silence on a response; for watch clients longer than the server-side watch timeout.
    pub read: Duration,
    pub write: Duration,
}

impl CheckedKubeconfig {
    /// Builds a client. kube's own retries (429/503/504) are off: the controller retries with its
    /// own backoff, and a silent re-POST would only add latency on a struggling worker.
    pub async fn client(&self, timeouts: ClientTimeouts) -> Result<Client, KubeconfigProblem> {
        let options = KubeConfigOptions {
            context: Some(self.context.clone()),
            ..Default::default()
        };
        let mut config = Config::from_custom_kubeconfig(self.kubeconfig.clone(), &options)
            .await
            .map_err(|e| KubeconfigProblem::Unusable(e.to_string()))?;
        config.connect_timeout = Some(timeouts.connect);
        config.read_timeout = Some(timeouts.read);
        config.write_timeout = Some(timeouts.write);
        config.reset_reader_on_write = true;
        // Not kube's retry layer (kube-client 5 `RetryPolicy::server_retry`): it wraps every call
        // of the client (probes, watches, reads, writes alike; it cannot be turned on for writes
        // only), retries 429/503/504 up to 15 times and sleeps inside the call, so a throttled
        // call would hold its in-flight slot and run into the call deadline while the key looked
        // busy. A worker write answered 429 instead fails the reconcile, and the work queue
        // requeues that origin no sooner than the Status's `retryAfterSeconds` (capped), holding
        // only that key (`WorkQueue::retry_no_sooner`).
        config.default_retry = false;
        // A throttled answer's wait is read from `Retry-After` too (see `server_wait`).
        let builder = client::client_builder(config)
            .map_err(|e| KubeconfigProblem::Unusable(e.to_string()))?;
        Ok(builder.with_layer(&ServerWaitLayer).build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
apiVersion: v1
kind: Config
clusters:
- name: w1
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: Zm9v
users:
- name: w1
  user:
    token: s3cr3t-t0ken
contexts:
- name: w1
  context: {cluster: w1, user: w1}
current-context: w1
"#;

    fn deny() -> CredentialPolicy {
        CredentialPolicy::default()
    }

    #[test]
    fn a_plain_token_kubeconfig_passes() {
        let c = check(GOOD, deny()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.server, "https://127.0.0.1:6443");
        assert!(!format!("{c:?}").contains("s3cr3t"));
    }

    #[test]
    fn exec_plugins_are_refused_naming_the_field_and_allowed_with_the_flag() {
        let text = GOOD.replace(
            "    token: s3cr3t-t0ken",
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/get-token",
        );
        let err = check(&text, deny()).err().map(|e| e.to_string());
        let msg = err.unwrap_or_default();
        assert!(msg.contains("users[w1].user.exec"), "{msg}");
        assert!(msg.contains(FLAG_ALLOW_EXEC), "{msg}");
        let allowed = CredentialPolicy {
            allow_exec: true,
            ..deny()
        };
        assert!(check(&text, allowed).is_ok());
    }

    #[test]
    fn file_references_and_insecure_tls_are_refused() {
        let text = GOOD
            .replace(
                "    certificate-authority-data: Zm9v",
                "    certificate-authority: /etc/ca.pem\n    insecure-skip-tls-verify: true",
            )
            .replace("    token: s3cr3t-t0ken", "    tokenFile: /var/run/token");
        let Err(KubeconfigProblem::Refused { refusals }) = check(&text, deny()) else {
            panic!("refused expected");
        };
        let fields: Vec<&str> = refusals.iter().map(|r| r.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "clusters[w1].cluster.certificate-authority",
                "clusters[w1].cluster.insecure-skip-tls-verify",
                "users[w1].user.tokenFile"
            ]
        );
        let all = CredentialPolicy {
            allow_exec: false,
            allow_file_references: true,
            allow_insecure_tls: true,
        };
        assert!(check(&text, all).is_ok());
        // An empty path reads nothing: not a file reference (the CLI and the controller agree).
        let empty = GOOD.replace(
            "    certificate-authority-data: Zm9v",
            "    certificate-authority: \"\"",
        );
        assert!(check(&empty, deny()).is_ok());
    }

    #[test]
    fn the_server_is_https_without_credentials_whatever_the_flags() {
        let all = CredentialPolicy {
            allow_exec: true,
            allow_file_references: true,
            allow_insecure_tls: true,
        };
        let plain = GOOD.replace("https://127.0.0.1:6443", "http://127.0.0.1:6443");
        let msg = check(&plain, all)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            msg.contains("clusters[w1].cluster.server") && msg.contains("is not an https:// URL"),
            "{msg}"
        );
        let userinfo = GOOD.replace("https://127.0.0.1", "https://admin:hunter2@127.0.0.1");
        let msg = check(&userinfo, all)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("user:password@"), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");
        let msg = server_problem("http://admin:hunter2@w1").unwrap_or_default();
        assert!(
            msg.contains("https://") && !msg.contains("hunter2"),
            "{msg}"
        );
        assert_eq!(server_problem("https://w1:6443/prefix"), None);
        assert!(server_problem("https://").is_some());
        assert!(server_problem("https:///x").is_some());
    }

    #[test]
    fn syntax_errors_never_quote_the_input() {
        let text = GOOD.replace("current-context: w1", "current-context: [s3cr3t-t0ken");
        let msg = check(&text, deny())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.starts_with("the kubeconfig is not valid YAML"), "{msg}");
        assert!(!msg.contains("s3cr3t"), "{msg}");
        // A sequence where the token string belongs: refused as a syntax error at its line (an
        // accepting parser used to pass here, since an Ok has no message to quote the secret).
        let typed = GOOD.replace("    token: s3cr3t-t0ken", "    token: [s3cr3t-t0ken]");
        let err = check(&typed, deny()).err();
        assert!(
            matches!(err, Some(KubeconfigProblem::Syntax { line: Some(12), .. })),
            "{err:?}"
        );
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.starts_with("the kubeconfig is not valid YAML"), "{msg}");
        assert!(!msg.contains("s3cr3t"), "{msg}");
    }

    #[test]
    fn dangling_references_are_named() {
        let text = GOOD.replace(
            "context: {cluster: w1, user: w1}",
            "context: {cluster: w2, user: w1}",
        );
        assert_eq!(
            check(&text, deny()).err(),
            Some(KubeconfigProblem::UnknownCluster {
                context: "w1".into(),
                cluster: "w2".into()
            })
        );
        let text = GOOD.replace("current-context: w1", "current-context: nope");
        assert_eq!(
            check(&text, deny()).err(),
            Some(KubeconfigProblem::UnknownContext("nope".into()))
        );
    }
}
