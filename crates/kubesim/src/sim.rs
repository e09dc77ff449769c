//! Starting and steering a kubesim instance from Rust (many instances per process are fine).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api::{Api, Registry, WriteOpts};
use crate::auth::{User, Users};
use crate::faults::{FaultConfig, Faults};
use crate::http::ServerState;
use crate::kinds::ssar::RuleSet;
use crate::store::{Retention, Store};

/// The cluster's role: which controllers run besides the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// A bare kube-apiserver (what the recordings were made against): no controller-manager.
    ApiServer,
    /// A management cluster: garbage collector and namespace controller, no Job controller, no TTL.
    #[default]
    Management,
    /// A worker: everything, including the simulated Job controller and TTL-after-finished.
    Worker,
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "apiserver" => Ok(Self::ApiServer),
            "management" => Ok(Self::Management),
            "worker" => Ok(Self::Worker),
            other => Err(format!(
                "unknown role {other:?}: expected apiserver, management or worker"
            )),
        }
    }
}

/// How to start an instance.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Names the kubeconfig's cluster/context.
    pub name: String,
    /// 0 = an ephemeral port.
    pub port: u16,
    /// The admin endpoint's port (0 = ephemeral); `None` = no admin endpoint.
    pub admin_port: Option<u16>,
    pub role: Role,
    /// Speed of simulated time for the Job controller (1.0 = real time).
    pub speed: f64,
    /// The admin token; generated when `None`.
    pub token: Option<String>,
    /// `gitVersion` of `/version`.
    pub server_version: String,
    pub retention: Retention,
    /// Whether a worker's simulated pods are real `v1` Pod objects (listed, watched, with logs).
    /// Default on; off only for throughput benchmarks (the Job controller then writes Job status only).
    pub pod_objects: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            name: "kubesim".into(),
            port: 0,
            admin_port: None,
            role: Role::default(),
            speed: 1.0,
            token: None,
            server_version: "v1.36.0".into(),
            retention: Retention::default(),
            pod_objects: true,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("binding 127.0.0.1:{port}: {source}")]
    Bind { port: u16, source: std::io::Error },
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error("bootstrapping the cluster: {0}")]
    Bootstrap(crate::errors::ApiError),
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// A running instance. Dropping it does not stop it; call `shutdown`.
pub struct Sim {
    pub name: String,
    pub addr: SocketAddr,
    pub admin_addr: Option<SocketAddr>,
    pub token: String,
    pub ca_pem: String,
    state: Arc<ServerState>,
    shutdown: CancellationToken,
}

impl Sim {
    /// Starts an instance: binds, bootstraps the default namespaces, serves.
    pub async fn start(opts: SimOptions) -> Result<Sim, SimError> {
        let listener = TcpListener::bind(("127.0.0.1", opts.port))
            .await
            .map_err(|source| SimError::Bind {
                port: opts.port,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind {
            port: opts.port,
            source,
        })?;
        let certs = crate::tls::generate(&[])?;
        let store = Arc::new(Store::new(opts.retention));
        let api = Arc::new(Api::new(store, Registry::with_builtins()));
        bootstrap(&api).map_err(SimError::Bootstrap)?;
        let users = Arc::new(Users::new());
        let token = opts
            .token
            .clone()
            .unwrap_or_else(|| format!("kubesim-{}", uuid::Uuid::new_v4().simple()));
        users.add(&token, User::admin("kubesim-admin"));
        let state = Arc::new(ServerState {
            api,
            users,
            faults: Arc::new(Faults::new()),
            server_address: addr.to_string(),
            version: opts.server_version.clone(),
            requests: AtomicU64::new(0),
            handshakes: AtomicU64::new(0),
            recorded: Default::default(),
        });
        let shutdown = CancellationToken::new();
        tokio::spawn(crate::http::serve(
            listener,
            certs.server,
            state.clone(),
            shutdown.clone(),
        ));
        let admin_addr = match opts.admin_port {
            Some(p) => {
                let l = TcpListener::bind(("127.0.0.1", p))
                    .await
                    .map_err(|source| SimError::Bind { port: p, source })?;
                let a = l
                    .local_addr()
                    .map_err(|source| SimError::Bind { port: p, source })?;
                tokio::spawn(crate::admin::serve(l, state.clone(), shutdown.clone()));
                Some(a)
            }
            None => None,
        };
        crate::controllers_hook::spawn(
            state.api.clone(),
            opts.role,
            opts.speed,
            opts.pod_objects,
            shutdown.clone(),
        );
        Ok(Sim {
            name: opts.name,
            addr,
            admin_addr,
            token,
            ca_pem: certs.ca_pem,
            state,
            shutdown,
        })
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    pub fn api(&self) -> &Arc<Api> {
        &self.state.api
    }

    /// A kubeconfig for the admin token.
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_for(&self.token)
    }

    /// A kubeconfig for another token (see `add_token`).
    pub fn kubeconfig_for(&self, token: &str) -> String {
        crate::kubeconfig::render(&self.name, &self.url(), &self.ca_pem, token)
    }

    pub fn write_kubeconfig(&self, path: &std::path::Path) -> Result<(), SimError> {
        std::fs::write(path, self.kubeconfig()).map_err(|source| SimError::Write {
            path: path.display().to_string(),
            source,
        })
    }

    /// Adds a token for `user` with `rules`.
    pub fn add_token(&self, token: &str, user: &str, rules: RuleSet) {
        self.state.users.add(
            token,
            User {
                name: user.to_string(),
                rules,
            },
        );
    }

    /// Grants `rules` to the user `user` (as RBAC bindings would): the rights of the bound tokens
    /// the TokenRequest API issues for a ServiceAccount (`system:serviceaccount:NS:NAME`).
    pub fn grant(&self, user: &str, rules: RuleSet) {
        self.state.users.grant(user, rules);
    }

    /// Moves the clock bound tokens expire by forward (instead of waiting out their lifetime).
    pub fn advance_token_clock(&self, by: std::time::Duration) {
        self.state
            .users
            .advance_clock(i64::try_from(by.as_secs()).unwrap_or(i64::MAX));
    }

    /// Replaces a token's rights (e.g. to simulate a token losing them).
    pub fn set_rules(&self, token: &str, rules: RuleSet) -> bool {
        self.state.users.set_rules(token, rules)
    }

    pub fn revoke_token(&self, token: &str) -> bool {
        self.state.users.revoke(token)
    }

    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    pub fn set_faults(&self, cfg: FaultConfig) {
        self.state.faults.set(cfg);
    }

    pub fn drop_watches(&self) {
        self.state.api.store.drop_watches();
    }

    /// A restart as clients see it: every connection and watch ends; data is kept.
    pub fn restart(&self) {
        self.state.api.store.drop_watches();
        self.state.faults.restart_connections();
    }

    /// Older resourceVersions answer 410 from now on.
    pub fn compact(&self) {
        self.state.api.store.compact();
    }

    pub fn requests_served(&self) -> u64 {
        self.state
            .requests
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// TLS handshakes completed since the server started: how many connections clients opened
    /// (a bare TCP connect closed before any TLS is not counted).
    pub fn tls_handshakes(&self) -> u64 {
        self.state
            .handshakes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Starts recording every resource request (user, verb, group, resource, subresource, namespace,
    /// name, allowed) from now on; see [`crate::record`].
    pub fn record_requests(&self) {
        self.state.recorded.start();
    }

    /// The requests recorded since `record_requests` (recording continues).
    pub fn recorded_requests(&self) -> Vec<crate::record::RecordedRequest> {
        self.state.recorded.snapshot()
    }

    /// Stops recording and returns what was recorded.
    pub fn stop_recording(&self) -> Vec<crate::record::RecordedRequest> {
        self.state.recorded.stop()
    }

    /// Simulated pod starts per origin UID (`courier.dev/origin-uid` of the pod's Job), over the
    /// instance's whole life, Jobs since deleted included.
    pub fn pod_starts(&self) -> std::collections::BTreeMap<String, u64> {
        self.state.api.instruments.pod_starts()
    }

    /// Every counted pod start (origin UID, epoch label, Job, pod, index, time), in order.
    pub fn pod_start_details(&self) -> Vec<crate::instrument::PodStart> {
        self.state.api.instruments.pod_start_details()
    }

    /// Every object created so far (of `resource` when given: `jobs`, `pods`,
    /// `leases.coordination.k8s.io`), in order.
    pub fn creates(&self, resource: Option<&str>) -> Vec<crate::instrument::Created> {
        self.state.api.instruments.creates(resource)
    }

    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }
}

/// The namespaces every cluster has.
fn bootstrap(api: &Api) -> Result<(), crate::errors::ApiError> {
    let Some(ns) = api.registry.get("", "v1", "namespaces") else {
        return Ok(());
    };
    let opts = WriteOpts {
        manager: "kube-apiserver".into(),
        ..Default::default()
    };
    for name in ["default", "kube-node-lease", "kube-public", "kube-system"] {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        let mut warnings = Vec::new();
        let (obj, _) = ns.decode_object(obj, &mut warnings)?;
        api.create(&ns, "", obj, &opts)?;
    }
    Ok(())
}
