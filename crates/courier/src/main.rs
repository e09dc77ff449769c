//! `courier`: dispatch Kubernetes Jobs from a management cluster to worker clusters.
//!
//! `run` is the controller; `cluster`, `submit`, `jobs`, `explain` and `crds` are for users;
//! `sandbox` and `demo` start everything in one process on kubesim clusters.

mod bench;
mod cluster;
mod controller;
mod demo;
mod jobs;
mod kubeconfig;
mod local;
mod logging;
mod run;
mod sandbox;
mod util;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use kube::Client;

#[derive(Parser, Debug)]
#[command(
    name = "courier",
    version,
    about = "Dispatch Kubernetes Jobs from a management cluster to worker clusters",
    long_about = "Courier dispatches batch/v1 Jobs with spec.managedBy: courier.dev/dispatcher from a \
                  management cluster to registered worker clusters, and copies their status back.\n\n\
                  Try it without a cluster: `courier demo`."
)]
struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `courier_controller=debug`.
    #[arg(long, global = true, env = "COURIER_LOG")]
    log: Option<String>,
    /// Log format on standard error: `text` (colours only on a terminal) or `json` (one object per
    /// line: timestamp, level, target, message, fields, spans).
    #[arg(
        long,
        global = true,
        env = "COURIER_LOG_FORMAT",
        value_enum,
        default_value_t
    )]
    log_format: logging::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the controller against a management cluster.
    Run(Box<run::RunArgs>),
    /// Manage worker cluster registrations (WorkerCluster objects).
    Cluster(cluster::ClusterArgs),
    /// Create Jobs in the management cluster for Courier to dispatch.
    Submit(jobs::SubmitArgs),
    /// List the Jobs Courier manages: where they run and how they are doing.
    Jobs(jobs::JobsArgs),
    /// Explain why a Job is where it is: placement, conditions, recent events.
    Explain(jobs::ExplainArgs),
    /// Print the WorkerCluster CustomResourceDefinition as YAML.
    Crds,
    /// Start a management and two worker kubesim clusters plus the controller, until Ctrl-C.
    Sandbox(sandbox::SandboxArgs),
    /// Run the examples on in-process kubesim clusters and show where and how each Job ran.
    Demo(demo::DemoArgs),
    /// Measure dispatch throughput, status lag and cost on in-process kubesim clusters.
    Bench(bench::BenchArgs),
}

/// How client commands reach the management cluster (`cluster` subcommands, whose `--kubeconfig`
/// is the worker's).
#[derive(Args, Debug, Clone)]
pub struct ManagementArgs {
    /// Kubeconfig of the management cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, env = "COURIER_MANAGEMENT_KUBECONFIG", global = true)]
    pub management_kubeconfig: Option<PathBuf>,
    /// Context of the management kubeconfig to use.
    #[arg(long, global = true)]
    pub management_context: Option<String>,
}

impl ManagementArgs {
    pub async fn client(&self) -> anyhow::Result<Client> {
        util::management_client(
            self.management_kubeconfig.as_deref(),
            self.management_context.as_deref(),
        )
        .await
    }
}

/// How `submit`, `jobs` and `explain` reach the management cluster.
#[derive(Args, Debug, Clone)]
pub struct ManagementArgsK {
    /// Kubeconfig of the management cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(
        long = "kubeconfig",
        alias = "management-kubeconfig",
        env = "COURIER_MANAGEMENT_KUBECONFIG"
    )]
    pub kubeconfig: Option<PathBuf>,
    /// Context of that kubeconfig to use.
    #[arg(long, alias = "management-context")]
    pub context: Option<String>,
}

impl ManagementArgsK {
    pub async fn client(&self) -> anyhow::Result<Client> {
        util::management_client(self.kubeconfig.as_deref(), self.context.as_deref()).await
    }
}

/// Prints the WorkerCluster CRD as YAML.
fn crds() -> anyhow::Result<()> {
    let yaml = serde_saphyr::to_string(&courier_api::crd()).context("serialising the CRD")?;
    print!("{yaml}");
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_log = match &cli.command {
        Command::Run(_) => "info",
        Command::Sandbox(_) => "warn,courier_controller=info",
        _ => "warn",
    };
    logging::init(cli.log.as_deref(), default_log, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result: anyhow::Result<ExitCode> = runtime.block_on(async move {
        match cli.command {
            Command::Run(a) => run::run(*a).await.map(|_| ExitCode::SUCCESS),
            Command::Cluster(a) => cluster::run(a).await.map(|_| ExitCode::SUCCESS),
            Command::Submit(a) => jobs::submit(a).await.map(|_| ExitCode::SUCCESS),
            Command::Jobs(a) => jobs::jobs(a).await.map(|_| ExitCode::SUCCESS),
            Command::Explain(a) => jobs::explain(a).await.map(|_| ExitCode::SUCCESS),
            Command::Crds => crds().map(|_| ExitCode::SUCCESS),
            Command::Sandbox(a) => sandbox::run(a).await.map(|_| ExitCode::SUCCESS),
            Command::Demo(a) => demo::run(a).await,
            Command::Bench(a) => bench::run(a).await.map(|_| ExitCode::SUCCESS),
        }
    });
    // Background tasks (watches, in-process clusters) must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn crd_yaml_parses_back() {
        let yaml = serde_saphyr::to_string(&courier_api::crd()).expect("yaml");
        let v: serde_json::Value = serde_saphyr::from_str(&yaml).expect("parses");
        assert_eq!(v["metadata"]["name"], "workerclusters.courier.dev");
        assert_eq!(v["kind"], "CustomResourceDefinition");
    }
}
