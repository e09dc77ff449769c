//! `courier`: dispatch Kubernetes Jobs from a management cluster to worker clusters.
//!
//! `run` is the controller; `cluster`, `submit`, `jobs`, `describe`, `logs` and `crds` are for
//! users, with kubectl's conventions (`--kubeconfig`, `--context`, `-n`, `-A`, `-o`); `sandbox` and
//! `demo` start everything in one process on kubesim clusters. Installed as `kubectl-courier` it is
//! also `kubectl courier ...`.

#[cfg(feature = "sandbox")]
mod bench;
mod cluster;
mod completion;
mod controller;
#[cfg(feature = "sandbox")]
mod demo;
mod jobs;
mod kubeconfig;
#[cfg(feature = "sandbox")]
mod local;
mod logging;
mod management;
mod output;
mod run;
#[cfg(feature = "sandbox")]
mod sandbox;
mod util;
mod workers;

use std::process::ExitCode;

/// jemalloc instead of the C library's malloc, for the controller (`courier run`) above all: back
/// to back against glibc's malloc and mimalloc on `courier bench --jobs 20000`, the least RSS per
/// tracked Job and less controller CPU per Job (docs/benchmarks.md, "Allocator"). The container
/// image links musl, whose malloc is slower than glibc's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use anyhow::Context as _;
use clap::{FromArgMatches as _, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "courier",
    version,
    about = "Dispatch Kubernetes Jobs from a management cluster to worker clusters",
    long_about = "Courier dispatches batch/v1 Jobs with spec.managedBy: courier.dev/dispatcher from a \
                  management cluster to registered worker clusters, and copies their status back.\n\n\
                  --kubeconfig, --context and -n/--namespace always mean the management cluster, as \
                  in kubectl; a worker's kubeconfig is --cluster-kubeconfig.\n\n\
                  Try it without a cluster: `courier demo`."
)]
pub struct Cli {
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
    /// Create Jobs in the management cluster for Courier to dispatch (like `kubectl create -f`).
    Submit(jobs::SubmitArgs),
    /// List the Jobs Courier manages: where they run and how they are doing.
    Jobs(jobs::JobsArgs),
    /// Show a Job in detail: placement and why, its and its mirror's conditions, Events of both sides.
    Describe(jobs::DescribeArgs),
    /// Alias of `describe job`.
    Explain(jobs::ExplainArgs),
    /// Print the logs of a Job's pods on the worker it runs on.
    Logs(jobs::LogsArgs),
    /// Print the WorkerCluster CustomResourceDefinition as YAML.
    Crds,
    /// Print a shell completion script (bash, zsh or fish).
    Completion(completion::CompletionArgs),
    /// Start a management and two worker kubesim clusters plus the controller, until Ctrl-C.
    #[cfg(feature = "sandbox")]
    Sandbox(sandbox::SandboxArgs),
    /// Run the examples on in-process kubesim clusters and show where and how each Job ran.
    #[cfg(feature = "sandbox")]
    Demo(demo::DemoArgs),
    /// Measure dispatch throughput, status lag and cost on in-process kubesim clusters.
    #[cfg(feature = "sandbox")]
    Bench(bench::BenchArgs),
    /// `sandbox`, `demo` and `bench` in a build without the `sandbox` feature: an error saying so.
    #[cfg(not(feature = "sandbox"))]
    #[command(name = "sandbox", aliases = ["demo", "bench"], hide = true)]
    NoSandbox {
        /// Ignored.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// What `sandbox`, `demo` and `bench` answer in a build without in-process clusters.
#[cfg(not(feature = "sandbox"))]
const NO_SANDBOX: &str = "`courier sandbox`, `demo` and `bench` run in-process kubesim clusters, and \
                          this courier binary was built without them (the `sandbox` cargo feature is \
                          off, as in the container image). Use a build with default features, e.g. \
                          `cargo install --path crates/courier`";

/// Prints the WorkerCluster CRD as YAML.
fn crds() -> anyhow::Result<()> {
    let yaml = serde_saphyr::to_string(&courier_api::crd()).context("serialising the CRD")?;
    print!("{yaml}");
    Ok(())
}

/// The async runtime: one worker thread per core unless `worker_threads` (`courier run
/// --worker-threads`, 1 by default) says otherwise. One thread is a current-thread runtime: every task runs on
/// the calling thread, so handing a request to kube's buffer task, hyper's connection task and back
/// wakes no other thread (a multi-thread runtime with one worker still runs the main task apart).
fn build_runtime(worker_threads: Option<u32>) -> std::io::Result<tokio::runtime::Runtime> {
    match worker_threads {
        Some(1) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            if let Some(n) = n {
                b.worker_threads(n as usize);
            }
            b.enable_all().build()
        }
    }
}

fn main() -> ExitCode {
    let argv0 = std::env::args_os().next();
    let matches = completion::command_for(argv0.as_deref()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let default_log = match &cli.command {
        Command::Run(_) => "info",
        #[cfg(feature = "sandbox")]
        Command::Sandbox(_) => "warn,courier_controller=info",
        _ => "warn",
    };
    logging::init(cli.log.as_deref(), default_log, cli.log_format);
    let worker_threads = match &cli.command {
        Command::Run(a) => Some(a.worker_threads),
        _ => None,
    };
    let runtime = match build_runtime(worker_threads) {
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
            Command::Describe(a) => jobs::describe(a).await.map(|_| ExitCode::SUCCESS),
            Command::Explain(a) => jobs::explain(a).await.map(|_| ExitCode::SUCCESS),
            Command::Logs(a) => jobs::logs(a).await.map(|_| ExitCode::SUCCESS),
            Command::Crds => crds().map(|_| ExitCode::SUCCESS),
            Command::Completion(a) => completion::print(a).map(|_| ExitCode::SUCCESS),
            #[cfg(feature = "sandbox")]
            Command::Sandbox(a) => sandbox::run(a).await.map(|_| ExitCode::SUCCESS),
            #[cfg(feature = "sandbox")]
            Command::Demo(a) => demo::run(a).await,
            #[cfg(feature = "sandbox")]
            Command::Bench(a) => bench::run(a).await.map(|_| ExitCode::SUCCESS),
            #[cfg(not(feature = "sandbox"))]
            Command::NoSandbox { .. } => Err(anyhow::anyhow!(NO_SANDBOX)),
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

    /// Every subcommand and every flag and argument says what it is for (`--help`). (Removing the
    /// doc comment of `cluster pause NAME` makes it fail.)
    #[test]
    fn everything_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name());
            if cmd.get_about().is_none() && !path.ends_with(" help") {
                missing.push(format!("{path}: no about"));
            }
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.get_help().is_none() && !matches!(id, "help" | "version") {
                    missing.push(format!("{path} {id}: no help"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &path, missing);
            }
        }
        let mut missing = Vec::new();
        let mut cmd = Cli::command();
        cmd.build();
        walk(&cmd, "", &mut missing);
        assert!(missing.is_empty(), "{missing:#?}");
    }

    #[test]
    fn one_worker_thread_is_a_current_thread_runtime() {
        use tokio::runtime::RuntimeFlavor;
        let flavor = |n| {
            build_runtime(n)
                .unwrap_or_else(|e| panic!("{e}"))
                .handle()
                .runtime_flavor()
        };
        assert_eq!(flavor(Some(1)), RuntimeFlavor::CurrentThread);
        assert_eq!(flavor(Some(2)), RuntimeFlavor::MultiThread);
        assert_eq!(flavor(None), RuntimeFlavor::MultiThread);
    }

    #[test]
    fn crd_yaml_parses_back() {
        let yaml = serde_saphyr::to_string(&courier_api::crd()).expect("yaml");
        let v: serde_json::Value = serde_saphyr::from_str(&yaml).expect("parses");
        assert_eq!(v["metadata"]["name"], "workerclusters.courier.dev");
        assert_eq!(v["kind"], "CustomResourceDefinition");
    }
}
