//! `courier cluster add|list|remove|pause|resume`: WorkerCluster registrations in the management
//! cluster; `courier cluster kubeconfig`: the worker kubeconfig `add` takes, built from the
//! ServiceAccount the courier-worker chart creates; `courier cluster rotate-token`: a new bound token
//! for a registration. One file per subcommand; what they share is here.

mod add;
mod kubeconfig;
mod list;
mod pause;
mod remove;
mod rotate;
// Against in-process kubesim clusters (`local`): only with the `sandbox` feature.
#[cfg(all(test, feature = "sandbox"))]
mod tests;
mod token;
#[cfg(all(test, feature = "sandbox"))]
mod token_tests;

use std::collections::BTreeMap;

use anyhow::{Context as _, anyhow};
use clap::{Args, Subcommand};
use courier_api::{LABEL_CLUSTER, MANAGED_BY};
use k8s_openapi::api::batch::v1::Job;
use kube::api::ListParams;
use kube::{Api, Client};

// The in-process clusters (`local`) register workers through the same checks.
#[cfg(feature = "sandbox")]
pub use add::{Registration, check_worker, create_registration, preflight_management, wait_ready};
pub use kubeconfig::KubeconfigArgs;

use crate::management::ManagementArgs;
use crate::util::api_message;

/// Label on Secrets created by `courier cluster add`: the WorkerCluster they belong to.
pub const LABEL_SECRET_OF: &str = "courier.dev/worker-cluster";

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Check a worker's kubeconfig (reachable, version, rights, credential policy), then register it.
    #[command(after_help = "Examples:\n  \
        courier cluster add eu-1 --cluster-kubeconfig admin-eu-1.kubeconfig --token-ttl 720h --wait 60s\n  \
        courier cluster add eu-1 --cluster-kubeconfig eu-1.kubeconfig --label region=eu --wait 60s\n  \
        courier cluster add eu-1 --cluster-context kind-eu-1 --server https://eu-1-control-plane:6443")]
    Add(Box<add::AddArgs>),
    /// List the registered worker clusters with their state.
    List(list::ListArgs),
    /// Unregister a worker cluster (refused while Jobs run there unless --drain or --force).
    Remove(remove::RemoveArgs),
    /// Stop placing new Jobs on a worker cluster; Jobs already there continue.
    Pause(pause::NameArgs),
    /// Place new Jobs on a paused worker cluster again.
    Resume(pause::NameArgs),
    /// Replace the bound token of a worker registered with `cluster add --token-ttl` (request a
    /// new one through an admin kubeconfig of the worker, write it into the registration's Secret).
    #[command(after_help = "Example:\n  \
        courier cluster rotate-token eu-1 --cluster-kubeconfig admin-eu-1.kubeconfig --wait 60s")]
    RotateToken(rotate::RotateArgs),
    /// Print a kubeconfig for Courier's ServiceAccount on a worker (a bound token inline), ready
    /// for `courier cluster add`.
    #[command(after_help = "Example:\n  \
        courier cluster kubeconfig --cluster-kubeconfig admin-eu-1.kubeconfig --output-file eu-1.kubeconfig")]
    Kubeconfig(Box<KubeconfigArgs>),
}

#[derive(Args, Debug)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub management: ManagementArgs,
    #[command(subcommand)]
    pub command: ClusterCommand,
}

pub async fn run(args: ClusterArgs) -> anyhow::Result<()> {
    let m = &args.management;
    match args.command {
        ClusterCommand::Add(a) => {
            let (management, worker) =
                m.split_worker(a.cluster_kubeconfig.as_ref(), a.cluster_context.as_ref());
            let ns = management.courier_namespace_of_cluster_commands();
            let client = management.connect().await?.client;
            add::add(&client, &ns, &worker, *a).await
        }
        ClusterCommand::RotateToken(a) => {
            let (management, worker) =
                m.split_worker(a.cluster_kubeconfig.as_ref(), a.cluster_context.as_ref());
            let ns = management.courier_namespace_of_cluster_commands();
            let client = management.connect().await?.client;
            rotate::rotate(&client, &ns, &worker, a).await
        }
        ClusterCommand::List(a) => list::list(&m.connect().await?.client, a).await,
        ClusterCommand::Remove(a) => {
            let ns = m.courier_namespace_of_cluster_commands();
            remove::remove(&m.connect().await?.client, &ns, a).await
        }
        ClusterCommand::Pause(a) => {
            pause::set_paused(&m.connect().await?.client, &a.name, true).await
        }
        ClusterCommand::Resume(a) => {
            pause::set_paused(&m.connect().await?.client, &a.name, false).await
        }
        // Talks to the worker only: no management cluster needed.
        ClusterCommand::Kubeconfig(a) => {
            let (_, worker) =
                m.split_worker(a.cluster_kubeconfig.as_ref(), a.cluster_context.as_ref());
            kubeconfig::print_worker_kubeconfig(*a, &worker).await
        }
    }
}

/// `a=b,c=d`, or `<none>`.
pub fn format_labels(labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return "<none>".into();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Origin Jobs placed on `cluster` that have not finished, as `namespace/name`.
pub async fn unfinished_jobs_on(client: &Client, cluster: &str) -> anyhow::Result<Vec<String>> {
    let jobs: Api<Job> = Api::all(client.clone());
    let list = jobs
        .list(&ListParams::default().labels(&format!("{LABEL_CLUSTER}={cluster}")))
        .await
        .map_err(|e| anyhow!(api_message(&e)))
        .context("listing the Jobs placed on the cluster")?;
    let mut out: Vec<String> = list
        .items
        .iter()
        .filter(|j| {
            j.spec.as_ref().and_then(|s| s.managed_by.as_deref()) == Some(MANAGED_BY)
                && !crate::jobs::is_finished(j)
        })
        .map(|j| {
            format!(
                "{}/{}",
                j.metadata.namespace.clone().unwrap_or_default(),
                j.metadata.name.clone().unwrap_or_default()
            )
        })
        .collect();
    out.sort();
    Ok(out)
}

/// The first five of `jobs`, and how many more.
pub fn summarize(jobs: &[String]) -> String {
    let shown: Vec<&str> = jobs.iter().take(5).map(String::as_str).collect();
    if jobs.len() > shown.len() {
        format!(
            "{}, and {} more",
            shown.join(", "),
            jobs.len() - shown.len()
        )
    } else {
        shown.join(", ")
    }
}
