//! `courier run`: the controller. Every flag is also read from `COURIER_<FLAG>`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use courier_api::{DEFAULT_NAMESPACE, DEFAULT_ORIGIN_ID};
use courier_controller::{
    ControllerConfig, CredentialPolicy, LeaseTimings, PodSecurityLevel, WorkerNamespaces,
};
use tokio_util::sync::CancellationToken;

use crate::util::{self, parse_duration};

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Kubeconfig of the management cluster (default: in-cluster service account, then $KUBECONFIG).
    #[arg(long, env = "COURIER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of that kubeconfig (default: its current-context).
    #[arg(long, env = "COURIER_CONTEXT")]
    pub context: Option<String>,
    /// Courier's own namespace: kubeconfig Secrets and the leader Lease live there.
    #[arg(long, env = "COURIER_NAMESPACE", default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// This management cluster's id, written on every mirror (`courier.dev/origin`).
    #[arg(long, env = "COURIER_ORIGIN", default_value = DEFAULT_ORIGIN_ID)]
    pub origin: String,
    /// Address of /metrics, /healthz and /readyz (`off` = no HTTP endpoint).
    #[arg(long, env = "COURIER_METRICS_ADDR", default_value = "0.0.0.0:8080", value_parser = parse_metrics_addr)]
    pub metrics_addr: MetricsAddr,
    /// Serve the read-only web view here (default: off). On a loopback address (127.0.0.1:8081) it
    /// is open to whoever reaches it (use `kubectl port-forward`); on any other address every request
    /// needs a bearer token, checked with a TokenReview, and shows only what its user may list.
    #[arg(long, env = "COURIER_UI_ADDR")]
    pub ui_addr: Option<SocketAddr>,
    /// Take part in leader election on a Lease in --namespace; only the leader writes.
    #[arg(long, env = "COURIER_LEADER_ELECT", num_args = 0..=1, default_missing_value = "true",
          default_value = "false", value_parser = clap::builder::BoolishValueParser::new())]
    pub leader_elect: bool,
    /// How long a Lease stays valid without renewal: the standbys take over after it.
    #[arg(long, env = "COURIER_LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// A leader that could not renew for this long stops writing (at most 2/3 of the lease duration).
    #[arg(long, env = "COURIER_LEADER_ELECT_RENEW_DEADLINE", default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// Interval of leader-election rounds.
    #[arg(long, env = "COURIER_LEADER_ELECT_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// Leader-election identity (default: the host name plus a random suffix).
    #[arg(long, env = "COURIER_IDENTITY")]
    pub identity: Option<String>,
    /// How long a worker may be not Ready before its unfinished Jobs are re-dispatched elsewhere.
    #[arg(long, env = "COURIER_WORKER_LOST_TIMEOUT", default_value = "15m", value_parser = parse_duration)]
    pub worker_lost_timeout: Duration,
    /// Whether Jobs of a lost worker are re-dispatched.
    #[arg(
        long,
        env = "COURIER_REDISPATCH_ON_WORKER_LOSS",
        value_enum,
        default_value = "always"
    )]
    pub redispatch_on_worker_loss: RedispatchOnWorkerLoss,
    /// Interval of the garbage-collection sweep over every worker's mirrors.
    #[arg(long, env = "COURIER_GC_INTERVAL", default_value = "1m", value_parser = parse_duration)]
    pub gc_interval: Duration,
    /// How long a finished mirror (and its pods) stays on its worker once the origin holds its final
    /// status (`never` keeps it until the origin is deleted). Where the Job ran stays on the origin.
    #[arg(long, env = "COURIER_FINISHED_MIRROR_TTL", default_value = "10m", value_parser = parse_ttl)]
    pub finished_mirror_ttl: Ttl,
    /// How many times a Job whose mirror disappeared is re-dispatched before it is failed.
    #[arg(long, env = "COURIER_MAX_REDISPATCH", default_value_t = 3)]
    pub max_redispatch: u32,
    /// Origin Jobs reconciled at once; as many workers again copy mirror statuses only.
    #[arg(long, env = "COURIER_CONCURRENCY", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: u32,
    /// Accept worker kubeconfigs that run programs (exec plugins, auth-provider).
    #[arg(long, env = "COURIER_ALLOW_EXEC_KUBECONFIGS", num_args = 0..=1, default_missing_value = "true",
          default_value = "false", value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_exec_kubeconfigs: bool,
    /// Accept worker kubeconfigs that read local files (tokenFile, certificate or key paths).
    #[arg(long, env = "COURIER_ALLOW_FILE_KUBECONFIGS", num_args = 0..=1, default_missing_value = "true",
          default_value = "false", value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_file_kubeconfigs: bool,
    /// Accept worker kubeconfigs with insecure-skip-tls-verify.
    #[arg(long, env = "COURIER_ALLOW_INSECURE_KUBECONFIGS", num_args = 0..=1, default_missing_value = "true",
          default_value = "false", value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_insecure_kubeconfigs: bool,
    /// Create a Job's namespace on a worker that lacks it (labelled with
    /// --worker-namespace-pod-security). Off by default: the namespace must exist on the worker, and
    /// a worker without it is skipped for that Job (Warning event NamespaceMissing).
    #[arg(long, env = "COURIER_CREATE_WORKER_NAMESPACES", num_args = 0..=1, default_missing_value = "true",
          default_value = "false", value_parser = clap::builder::BoolishValueParser::new())]
    pub create_worker_namespaces: bool,
    /// Pod Security Admission level (enforce, audit and warn, version latest) of the namespaces
    /// --create-worker-namespaces creates: restricted, baseline or privileged.
    #[arg(
        long,
        env = "COURIER_WORKER_NAMESPACE_POD_SECURITY",
        default_value = "restricted"
    )]
    pub worker_namespace_pod_security: PodSecurityLevel,
    /// Threads that run the controller's tasks. 1 (the default) runs them all on one thread: no
    /// wake-ups of other threads between a request's tasks, about a fifth less CPU per Job, and at
    /// most one core (about 2,000 Jobs/s at the 0.5 ms per Job measured on the build machine).
    /// More threads use more cores for a fleet that needs them; an exec credential plugin run as
    /// a worker's client is built holds every task of a one-thread controller until it returns.
    #[arg(
        long,
        env = "COURIER_WORKER_THREADS",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub worker_threads: u32,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedispatchOnWorkerLoss {
    Always,
    Never,
}

/// `--finished-mirror-ttl`: a duration or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ttl(pub Option<Duration>);

fn parse_ttl(s: &str) -> Result<Ttl, String> {
    if s == "never" {
        return Ok(Ttl(None));
    }
    parse_duration(s).map(|d| Ttl(Some(d)))
}

/// `--metrics-addr`: an address or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsAddr(pub Option<SocketAddr>);

fn parse_metrics_addr(s: &str) -> Result<MetricsAddr, String> {
    if matches!(s, "off" | "none" | "" | "0") {
        return Ok(MetricsAddr(None));
    }
    s.parse::<SocketAddr>()
        .map(|a| MetricsAddr(Some(a)))
        .map_err(|_| format!("{s:?} is not HOST:PORT (e.g. 0.0.0.0:8080) or off"))
}

impl RunArgs {
    /// The controller configuration these flags describe.
    pub fn config(&self) -> ControllerConfig {
        ControllerConfig {
            origin_id: self.origin.clone(),
            namespace: self.namespace.clone(),
            metrics_addr: self.metrics_addr.0,
            ui_addr: self.ui_addr,
            concurrency: self.concurrency as usize,
            max_redispatch: self.max_redispatch,
            worker_lost_timeout: self.worker_lost_timeout,
            redispatch_on_worker_loss: self.redispatch_on_worker_loss
                == RedispatchOnWorkerLoss::Always,
            gc_interval: self.gc_interval,
            finished_mirror_ttl: self.finished_mirror_ttl.0,
            leader_elect: self.leader_elect,
            lease: Some(LeaseTimings {
                duration: self.leader_elect_lease_duration,
                renew_deadline: self.leader_elect_renew_deadline,
                retry_period: self.leader_elect_retry_period,
            }),
            identity: self.identity.clone().unwrap_or_else(default_identity),
            credentials: CredentialPolicy {
                allow_exec: self.allow_exec_kubeconfigs,
                allow_file_references: self.allow_file_kubeconfigs,
                allow_insecure_tls: self.allow_insecure_kubeconfigs,
            },
            worker_namespaces: if self.create_worker_namespaces {
                WorkerNamespaces::Create {
                    pod_security: self.worker_namespace_pod_security,
                }
            } else {
                WorkerNamespaces::MustExist
            },
        }
    }
}

/// `POD_NAME` or the host name, plus a random suffix (two processes never share an identity).
pub fn default_identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "courier".into());
    format!("{base}-{:08x}", rand::random::<u32>())
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    if args.origin.is_empty() || courier_core::selector::label_value_problem(&args.origin).is_some()
    {
        anyhow::bail!(
            "--origin {:?} must be a valid label value (at most 63 characters: alphanumerics, '-', '_' \
             or '.', starting and ending with an alphanumeric)",
            args.origin
        );
    }
    if let Some(p) = util::dns_subdomain_problem(&args.namespace) {
        anyhow::bail!("--namespace {:?}: it {p}", args.namespace);
    }
    let config =
        util::management_config(args.kubeconfig.as_deref(), args.context.as_deref(), true).await?;
    let server = config.cluster_url.to_string();
    let client = courier_controller::credentials::client::client(config)
        .context("building the management cluster client")?;
    let cfg = args.config();
    tracing::info!(
        management = %server,
        origin = %cfg.origin_id,
        namespace = %cfg.namespace,
        metrics = ?cfg.metrics_addr,
        ui = ?cfg.ui_addr,
        leader_elect = cfg.leader_elect,
        identity = %cfg.identity,
        concurrency = cfg.concurrency,
        "starting courier controller"
    );
    let shutdown = CancellationToken::new();
    tokio::spawn(shutdown_on_signal(shutdown.clone()));
    crate::controller::run(client, cfg, shutdown).await?;
    tracing::info!("courier controller stopped");
    Ok(())
}

/// Cancels `token` on SIGTERM or SIGINT; a second signal exits at once.
pub async fn shutdown_on_signal(token: CancellationToken) {
    wait_signal().await;
    tracing::info!("shutting down (signal received; a second one exits immediately)");
    token.cancel();
    wait_signal().await;
    eprintln!("second signal: exiting now");
    std::process::exit(130);
}

async fn wait_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn defaults_match_the_design() {
        let t = T::try_parse_from(["t"]).expect("parses");
        let c = t.run.config();
        assert_eq!(c.origin_id, "courier");
        assert_eq!(c.namespace, "courier-system");
        assert_eq!(c.metrics_addr, Some("0.0.0.0:8080".parse().expect("addr")));
        assert_eq!(c.worker_lost_timeout, Duration::from_secs(900));
        assert_eq!(c.gc_interval, Duration::from_secs(60));
        assert_eq!(c.max_redispatch, 3);
        assert_eq!(c.finished_mirror_ttl, Some(Duration::from_secs(600)));
        assert!(c.redispatch_on_worker_loss);
        assert!(!c.leader_elect);
        assert_eq!(c.credentials, CredentialPolicy::default());
        assert_eq!(c.ui_addr, None, "the web view is off unless asked for");
        assert_eq!(
            c.worker_namespaces,
            WorkerNamespaces::MustExist,
            "namespaces on workers are not Courier's to create unless asked for"
        );
    }

    #[test]
    fn worker_namespace_flags() {
        let t = T::try_parse_from(["t", "--create-worker-namespaces"]).expect("parses");
        assert_eq!(
            t.run.config().worker_namespaces,
            WorkerNamespaces::Create {
                pod_security: PodSecurityLevel::Restricted
            }
        );
        let t = T::try_parse_from([
            "t",
            "--create-worker-namespaces=true",
            "--worker-namespace-pod-security=baseline",
        ])
        .expect("parses");
        assert_eq!(
            t.run.config().worker_namespaces,
            WorkerNamespaces::Create {
                pod_security: PodSecurityLevel::Baseline
            }
        );
        let e = T::try_parse_from(["t", "--worker-namespace-pod-security=strict"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("restricted, baseline or privileged"), "{e}");
    }

    #[test]
    fn flags() {
        let t = T::try_parse_from([
            "t",
            "--leader-elect",
            "--worker-lost-timeout=30s",
            "--gc-interval",
            "2s",
            "--redispatch-on-worker-loss=never",
            "--allow-exec-kubeconfigs",
            "--metrics-addr=off",
            "--concurrency=4",
            "--finished-mirror-ttl=never",
        ])
        .expect("parses");
        let c = t.run.config();
        assert!(c.leader_elect);
        assert_eq!(c.worker_lost_timeout, Duration::from_secs(30));
        assert_eq!(c.gc_interval, Duration::from_secs(2));
        assert!(!c.redispatch_on_worker_loss);
        assert!(c.credentials.allow_exec && !c.credentials.allow_insecure_tls);
        assert_eq!(c.metrics_addr, None);
        assert_eq!(c.concurrency, 4);
        assert_eq!(c.finished_mirror_ttl, None);
        let t = T::try_parse_from(["t", "--finished-mirror-ttl", "30s"]).expect("parses");
        assert_eq!(
            t.run.config().finished_mirror_ttl,
            Some(Duration::from_secs(30))
        );
        assert!(T::try_parse_from(["t", "--finished-mirror-ttl=soon"]).is_err());
        let t = T::try_parse_from([
            "t",
            "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=300ms",
        ])
        .expect("parses");
        assert_eq!(
            t.run.config().lease,
            Some(LeaseTimings {
                duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_millis(300),
            })
        );
        assert!(T::try_parse_from(["t", "--concurrency=0"]).is_err());
        assert_eq!(t.run.worker_threads, 1, "one thread unless asked");
        let four = T::try_parse_from(["t", "--worker-threads=4"]).expect("parses");
        assert_eq!(four.run.worker_threads, 4);
        assert!(T::try_parse_from(["t", "--worker-threads=0"]).is_err());
        assert!(T::try_parse_from(["t", "--metrics-addr=nope"]).is_err());
        assert!(T::try_parse_from(["t", "--leader-elect=false"]).is_ok());
        let ui = T::try_parse_from(["t", "--ui-addr=127.0.0.1:8081"]).expect("parses");
        assert_eq!(
            ui.run.config().ui_addr,
            Some("127.0.0.1:8081".parse().expect("addr"))
        );
        assert!(T::try_parse_from(["t", "--ui-addr=localhost"]).is_err());
    }
}
