//! Running the `courier` CLI against a management cluster.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};

use crate::*;

/// The output of a `courier` CLI run.
#[derive(Debug)]
pub struct CliOutput {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// Fails unless the command succeeded.
    pub fn ok(self) -> anyhow::Result<CliOutput> {
        if !self.success {
            bail!(
                "courier failed ({:?}):\nstdout: {}\nstderr: {}",
                self.code,
                self.stdout,
                self.stderr
            );
        }
        Ok(self)
    }

    /// Fails unless the command failed with an error mentioning every one of `needles`.
    pub fn fails_with(self, needles: &[&str]) -> anyhow::Result<CliOutput> {
        if self.success {
            bail!(
                "courier succeeded but should have failed mentioning {needles:?}:\nstdout: {}\nstderr: {}",
                self.stdout,
                self.stderr
            );
        }
        for n in needles {
            if !self.stderr.contains(n) {
                bail!(
                    "courier's error does not mention {n:?}:\nstderr: {}",
                    self.stderr
                );
            }
        }
        Ok(self)
    }
}

/// Runs `courier ARGS` with the management kubeconfig in `COURIER_MANAGEMENT_KUBECONFIG`.
pub async fn courier(mgmt_kubeconfig: &Path, args: &[&str]) -> anyhow::Result<CliOutput> {
    courier_env(mgmt_kubeconfig, args, &[]).await
}

pub async fn courier_env(
    mgmt_kubeconfig: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> anyhow::Result<CliOutput> {
    let mut cmd = tokio::process::Command::new(bin("courier")?);
    cmd.args(args)
        .env_remove("KUBECONFIG")
        .env("COURIER_MANAGEMENT_KUBECONFIG", mgmt_kubeconfig)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .map_err(|_| anyhow!("courier {args:?} did not finish within 120s"))?
        .with_context(|| format!("running courier {args:?}"))?;
    Ok(CliOutput {
        success: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}
