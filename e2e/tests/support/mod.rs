//! What the CLI e2e tests share: running `courier` (or kubectl) as a user would, and small checks.

#![allow(dead_code)] // each test binary uses a part

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, anyhow, ensure};
use courier_e2e::{CliOutput, EnvOptions, bin};
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;

pub const T: Duration = Duration::from_secs(60);

pub fn opts(workers: usize, controller: bool) -> EnvOptions {
    EnvOptions {
        workers,
        start_controller: controller,
        register_workers: false,
        ..Default::default()
    }
}

/// Runs `program ARGS` as a user would: no COURIER_* or KUBECONFIG from the test's environment,
/// a HOME of its own (no ~/.kube/config), `env` on top, `stdin` piped in.
pub async fn run(
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> anyhow::Result<CliOutput> {
    let home = std::env::temp_dir().join(format!("courier-e2e-home-{}", std::process::id()));
    std::fs::create_dir_all(&home)?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_remove("KUBECONFIG")
        .env_remove("COURIER_MANAGEMENT_KUBECONFIG")
        .env_remove("COURIER_NAMESPACE")
        .env("HOME", &home)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {} {args:?}", program.display()))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes()).await?;
        drop(pipe);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .map_err(|_| anyhow!("{args:?} did not finish within 120s"))??;
    Ok(CliOutput {
        success: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

pub async fn courier(args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<CliOutput> {
    run(&bin("courier")?, args, env, None).await
}

pub fn has(out: &CliOutput, needles: &[&str]) -> anyhow::Result<()> {
    for n in needles {
        ensure!(
            out.stdout.contains(n),
            "stdout lacks {n:?}:\n{}\nstderr: {}",
            out.stdout,
            out.stderr
        );
    }
    Ok(())
}

pub fn yaml(text: &str) -> anyhow::Result<Value> {
    serde_saphyr::from_str(text).map_err(|e| anyhow!("not YAML ({e}):\n{text}"))
}
