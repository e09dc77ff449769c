//! `courier cluster remove`.

use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use courier_api::{FINALIZER_DRAIN, WorkerCluster};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};

use super::pause::patch_paused;
use super::{LABEL_SECRET_OF, summarize, unfinished_jobs_on};
use crate::util::{self, FIELD_MANAGER, api_message, is_not_found, parse_duration};
use crate::workers::get_cluster;

#[derive(Args, Debug)]
pub struct RemoveArgs {
    /// The WorkerCluster to remove.
    pub name: String,
    /// Pause the cluster, wait until its Jobs have finished, then remove it.
    #[arg(long, conflicts_with = "force")]
    pub drain: bool,
    /// Remove it even though Jobs run there (Courier loses track of their mirrors).
    #[arg(long)]
    pub force: bool,
    /// With --drain: give up after this long.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub timeout: Duration,
}

pub async fn remove(client: &Client, ns: &str, a: RemoveArgs) -> anyhow::Result<()> {
    let wc = get_cluster(client, &a.name).await?;
    let name = a.name.as_str();
    let running = unfinished_jobs_on(client, name).await?;
    if !running.is_empty() && !a.drain && !a.force {
        bail!(
            "WorkerCluster {name} still has {} current mirror(s) ({}); pass --drain to stop new \
             placements there and wait until they finish, or --force to remove it anyway (Courier then \
             loses track of those mirrors)",
            running.len(),
            summarize(&running)
        );
    }
    if a.drain && !running.is_empty() {
        if !wc.spec.paused {
            patch_paused(client, name, true).await?;
            println!("Paused WorkerCluster {name}: no new Jobs are placed there.");
        }
        println!(
            "Waiting for {} Job(s) on {name} to finish ({})...",
            running.len(),
            summarize(&running)
        );
        let deadline = tokio::time::Instant::now() + a.timeout;
        let mut last = running.len();
        loop {
            let left = unfinished_jobs_on(client, name).await?;
            if left.is_empty() {
                break;
            }
            if left.len() != last {
                println!("{} Job(s) left on {name}", left.len());
                last = left.len();
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "WorkerCluster {name} still has {} unfinished Job(s) after {} ({}); it stays \
                     paused. Run the command again to keep waiting, or use --force",
                    left.len(),
                    util::short_duration(a.timeout),
                    summarize(&left)
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    match wcs.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => {
            return Err(anyhow!(api_message(&e))).context(format!("deleting WorkerCluster {name}"));
        }
    }
    // The controller's drain finalizer holds a deleted WorkerCluster until its mirrors there are
    // deleted. --force lets go of them at once; otherwise wait for the drain (bounded).
    if a.force {
        release_drain_finalizer(&wcs, name).await?;
    } else {
        wait_drained(&wcs, name, a.timeout.min(Duration::from_secs(120))).await?;
    }
    let secret_name = wc.spec.kubeconfig_secret_ref.name.clone();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret_note = match secrets.get_opt(&secret_name).await {
        Ok(Some(s))
            if s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_SECRET_OF))
                .is_some_and(|v| v == name) =>
        {
            match secrets.delete(&secret_name, &DeleteParams::default()).await {
                Ok(_) => format!(" and its Secret {ns}/{secret_name}"),
                Err(e) => format!(
                    "; deleting its Secret {ns}/{secret_name} failed ({}): delete it by hand",
                    api_message(&e)
                ),
            }
        }
        Ok(Some(_)) => format!(
            "; Secret {ns}/{secret_name} was not created by `courier cluster add` and is left in place"
        ),
        Ok(None) => String::new(),
        Err(e) => format!(
            "; could not read Secret {ns}/{secret_name} ({})",
            api_message(&e)
        ),
    };
    if running.is_empty() || a.drain {
        println!("Removed WorkerCluster {name}{secret_note}.");
    } else {
        println!(
            "Removed WorkerCluster {name}{secret_note} while {} Job(s) ran there ({}).",
            running.len(),
            summarize(&running)
        );
    }
    Ok(())
}

/// Removes Courier's drain finalizer from a deleted WorkerCluster (`--force`).
async fn release_drain_finalizer(wcs: &Api<WorkerCluster>, name: &str) -> anyhow::Result<()> {
    let Some(wc) = wcs
        .get_opt(name)
        .await
        .map_err(|e| anyhow!(api_message(&e)))?
    else {
        return Ok(());
    };
    let finalizers = wc.metadata.finalizers.clone().unwrap_or_default();
    if !finalizers.iter().any(|f| f == FINALIZER_DRAIN) {
        return Ok(());
    }
    let rest: Vec<&String> = finalizers
        .iter()
        .filter(|f| *f != FINALIZER_DRAIN)
        .collect();
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": wc.metadata.resource_version, "finalizers": rest}});
    match wcs
        .patch(
            name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            },
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(anyhow!(api_message(&e))).context(format!(
            "releasing the drain finalizer of WorkerCluster {name}"
        )),
    }
}

/// Waits until a deleted WorkerCluster is gone (the controller drained its mirrors).
async fn wait_drained(
    wcs: &Api<WorkerCluster>,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut told = false;
    loop {
        match wcs
            .get_opt(name)
            .await
            .map_err(|e| anyhow!(api_message(&e)))?
        {
            None => return Ok(()),
            Some(_) if tokio::time::Instant::now() >= deadline => bail!(
                "WorkerCluster {name} is being removed: Courier is still deleting its mirrors there \
                 (the WorkerCluster goes once they are gone, or once the worker stayed unreachable for \
                 the worker-lost timeout); use --force to let go of them now"
            ),
            Some(_) => {
                if !told {
                    println!("Courier is deleting its mirrors on {name}...");
                    told = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}
