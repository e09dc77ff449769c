//! `kubesim serve`: one in-memory Kubernetes API server as its own process.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use kubesim::sim::{Role, Sim, SimOptions};

#[derive(Parser)]
#[command(
    name = "kubesim",
    version,
    about = "An in-memory Kubernetes API server for tests and benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve HTTPS on 127.0.0.1 until interrupted.
    Serve {
        /// Port to listen on (0 = any free port; the chosen one is printed and written to the kubeconfig).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Port of the plain-HTTP admin endpoint (faults, tokens, stats) on 127.0.0.1; 0 = any free port.
        #[arg(long)]
        admin_port: Option<u16>,
        /// Write a kubeconfig for the admin token here.
        #[arg(long)]
        kubeconfig_out: Option<PathBuf>,
        /// apiserver (no controllers, like the recordings), management, or worker (simulated Job controller).
        #[arg(long, default_value = "management")]
        role: Role,
        /// Simulated-time speed for the Job controller (1 = real time).
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// Name of the cluster and context in the kubeconfig.
        #[arg(long, default_value = "kubesim")]
        name: String,
        /// The admin bearer token (generated when not given).
        #[arg(long, env = "KUBESIM_TOKEN")]
        token: Option<String>,
        /// The gitVersion `/version` reports.
        #[arg(long, default_value = "v1.36.0")]
        server_version: String,
        /// Whether a worker's simulated pods are real Pod objects (`pods`, `pods/log`); `false` only
        /// for throughput benchmarks.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        pod_objects: bool,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KUBESIM_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let Command::Serve {
        port,
        admin_port,
        kubeconfig_out,
        role,
        speed,
        name,
        token,
        server_version,
        pod_objects,
    } = Cli::parse().command;
    if !(speed.is_finite() && speed > 0.0) {
        anyhow::bail!("--speed must be a positive number, got {speed}");
    }
    let sim = Sim::start(SimOptions {
        name,
        port,
        admin_port,
        role,
        speed,
        token,
        server_version,
        pod_objects,
        ..Default::default()
    })
    .await
    .context("starting kubesim")?;
    if let Some(path) = &kubeconfig_out {
        sim.write_kubeconfig(path)
            .with_context(|| format!("writing the kubeconfig to {}", path.display()))?;
    }
    match sim.admin_addr {
        Some(a) => println!("kubesim serving {} (admin http://{a})", sim.url()),
        None => println!("kubesim serving {}", sim.url()),
    }
    shutdown_signal().await;
    sim.shutdown();
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
