//! `courier cluster pause|resume`.

use anyhow::{Context as _, anyhow};
use clap::Args;
use courier_api::WorkerCluster;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use super::unfinished_jobs_on;
use crate::util::{FIELD_MANAGER, api_message};
use crate::workers::get_cluster;

#[derive(Args, Debug)]
pub struct NameArgs {
    /// The WorkerCluster.
    pub name: String,
}

pub async fn patch_paused(client: &Client, name: &str, paused: bool) -> anyhow::Result<()> {
    let wcs: Api<WorkerCluster> = Api::all(client.clone());
    wcs.patch(
        name,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        },
        &Patch::Merge(serde_json::json!({"spec": {"paused": paused}})),
    )
    .await
    .map_err(|e| anyhow!(api_message(&e)))
    .with_context(|| format!("updating WorkerCluster {name}"))?;
    Ok(())
}

pub async fn set_paused(client: &Client, name: &str, paused: bool) -> anyhow::Result<()> {
    let wc = get_cluster(client, name).await?;
    if wc.spec.paused == paused {
        println!(
            "WorkerCluster {name} is already {}.",
            if paused { "paused" } else { "taking new Jobs" }
        );
        return Ok(());
    }
    patch_paused(client, name, paused).await?;
    if paused {
        let running = unfinished_jobs_on(client, name).await.unwrap_or_default();
        println!(
            "Paused WorkerCluster {name}: no new Jobs are placed there; {} Job(s) running there continue.",
            running.len()
        );
    } else {
        println!("Resumed WorkerCluster {name}: it takes new Jobs again.");
    }
    Ok(())
}
