//! The one place the binary calls into `courier-controller`.

use anyhow::Context as _;
use courier_controller::ControllerConfig;
use kube::Client;
use tokio_util::sync::CancellationToken;

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(
    client: Client,
    cfg: ControllerConfig,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    courier_controller::run(client, cfg, shutdown)
        .await
        .context("the controller stopped with an error")
}
