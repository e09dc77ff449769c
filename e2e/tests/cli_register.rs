//! `cluster add` and `cluster kubeconfig` by their old spellings (still working, with a warning),
//! and `cluster add --server` and `--skip-check` with the controller's probe deciding Ready.

mod support;

use anyhow::{anyhow, ensure};
use courier_api::WorkerCluster;
use courier_e2e::{Env, job, wait_for};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::{Value, json};
use support::{T, courier, has, opts, yaml};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_spellings_work_with_a_warning() -> anyhow::Result<()> {
    let mut env = Env::start("cli-deprecated", opts(1, false)).await?;
    let r = deprecated_body(&env).await;
    env.finish(r)
}

async fn deprecated_body(env: &Env) -> anyhow::Result<()> {
    let w = env.workers[0].kubeconfig.display().to_string();
    let m = env.mgmt.kubeconfig.display().to_string();
    // `cluster add --kubeconfig WORKER` (management from --management-kubeconfig).
    let out = courier(
        &[
            "cluster",
            "add",
            "w1",
            "--kubeconfig",
            &w,
            "--management-kubeconfig",
            &m,
        ],
        &[],
    )
    .await?
    .ok()?;
    has(&out, &["Registered WorkerCluster w1"])?;
    for needle in [
        "--kubeconfig/--context for the worker cluster are deprecated",
        "--cluster-kubeconfig",
        "--management-kubeconfig is deprecated",
    ] {
        ensure!(
            out.stderr.contains(needle),
            "lacks {needle:?}: {}",
            out.stderr
        );
    }
    // Old -n (Courier's namespace) on cluster commands.
    let out = courier(
        &[
            "cluster",
            "remove",
            "w1",
            "-n",
            "courier-system",
            "--kubeconfig",
            &m,
        ],
        &[],
    )
    .await?
    .ok()?;
    has(
        &out,
        &["Removed WorkerCluster w1 and its Secret courier-system/w1-kubeconfig"],
    )?;
    ensure!(out.stderr.contains("--courier-namespace"), "{}", out.stderr);
    // New spellings: no warning.
    let out = courier(
        &[
            "cluster",
            "add",
            "w1",
            "--cluster-kubeconfig",
            &w,
            "--kubeconfig",
            &m,
        ],
        &[],
    )
    .await?
    .ok()?;
    ensure!(!out.stderr.contains("deprecated"), "{}", out.stderr);
    // `submit FILE`.
    let file = env.dir.join("j.yaml");
    std::fs::write(&file, serde_json::to_string(&job("old-submit", &[]))?)?;
    let out = courier(
        &["submit", &file.display().to_string(), "--kubeconfig", &m],
        &[],
    )
    .await?
    .ok()?;
    has(&out, &["job.batch/old-submit created"])?;
    ensure!(
        out.stderr.contains("`courier submit FILE` is deprecated")
            && out.stderr.contains("-f FILE"),
        "{}",
        out.stderr
    );
    // `cluster kubeconfig --kubeconfig ADMIN`: read as the worker's (the worker has no Courier
    // ServiceAccount, so the token request stops there, naming it).
    courier(&["cluster", "kubeconfig", "--kubeconfig", &w], &[])
        .await?
        .fails_with(&[
            "--cluster-kubeconfig FILE",
            "ServiceAccount courier-system/courier-dispatcher",
        ])?;
    Ok(())
}

/// The stored kubeconfig's server of WorkerCluster `name`.
async fn stored_server(env: &Env, name: &str) -> anyhow::Result<String> {
    let secrets: Api<Secret> = Api::namespaced(env.mgmt_client.clone(), "courier-system");
    let s = secrets.get(&format!("{name}-kubeconfig")).await?;
    let data = s
        .data
        .and_then(|d| d.get("kubeconfig").cloned())
        .ok_or_else(|| anyhow!("no kubeconfig in the Secret"))?;
    let v = yaml(std::str::from_utf8(&data.0)?)?;
    Ok(v["clusters"][0]["cluster"]["server"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

async fn wait_not_ready(env: &Env, name: &str) -> anyhow::Result<String> {
    let api: Api<WorkerCluster> = Api::all(env.mgmt_client.clone());
    wait_for(&format!("{name} Ready=False"), T, || {
        let api = api.clone();
        async move {
            let wc = api.get(name).await.map_err(|e| e.to_string())?;
            match wc.status.as_ref().and_then(|s| s.ready_condition()) {
                Some(c) if c.status == "False" => Ok(format!("{}: {}", c.reason, c.message)),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_and_skip_check() -> anyhow::Result<()> {
    let mut env = Env::start("cli-server", opts(1, true)).await?;
    let r = server_body(&env).await;
    env.finish(r)
}

async fn server_body(env: &Env) -> anyhow::Result<()> {
    let w = env.workers[0].kubeconfig.display().to_string();
    let m = env.mgmt.kubeconfig.display().to_string();
    let port = env.workers[0]
        .url
        .rsplit(':')
        .next()
        .ok_or_else(|| anyhow!("no port in {}", env.workers[0].url))?
        .to_string();
    // The controller dials another address than the kubeconfig's (here: localhost for 127.0.0.1;
    // kubesim's certificate names both).
    let via = format!("https://localhost:{port}");
    let out = courier(
        &[
            "cluster",
            "add",
            "w1",
            "--cluster-kubeconfig",
            &w,
            "--server",
            &via,
            "--kubeconfig",
            &m,
            "--wait",
            "60s",
        ],
        &[],
    )
    .await?
    .ok()?;
    has(
        &out,
        &[
            &format!("Checked worker \"w1\" at {}", env.workers[0].url),
            &format!("The controller will reach it at {via}"),
            "WorkerCluster w1 is Ready.",
        ],
    )?;
    ensure!(stored_server(env, "w1").await? == via);

    // An address only the controller would reach: the checks from here pass (they use the
    // kubeconfig's), the controller's probe decides (here: nothing listens there).
    let nowhere = format!("https://127.0.0.1:{}", courier_e2e::free_port()?);
    courier(
        &[
            "cluster",
            "add",
            "w1-far",
            "--cluster-kubeconfig",
            &w,
            "--server",
            &nowhere,
            "--kubeconfig",
            &m,
        ],
        &[],
    )
    .await?
    .ok()?;
    ensure!(stored_server(env, "w1-far").await? == nowhere);
    let why = wait_not_ready(env, "w1-far").await?;
    ensure!(why.starts_with("Unreachable"), "{why}");
    courier(
        &[
            "cluster",
            "add",
            "w1-http",
            "--cluster-kubeconfig",
            &w,
            "--server",
            "http://w1:6443",
            "--kubeconfig",
            &m,
        ],
        &[],
    )
    .await?
    .fails_with(&["is not an https:// URL"])?;

    // --skip-check: a worker this machine cannot reach is registered; the probe decides.
    let mut v = yaml(&std::fs::read_to_string(&env.workers[0].kubeconfig)?)?;
    v["clusters"][0]["cluster"]["server"] =
        json!(format!("https://127.0.0.1:{}", courier_e2e::free_port()?));
    let unreachable = env.dir.join("unreachable.kubeconfig");
    std::fs::write(&unreachable, serde_json::to_string(&v)?)?;
    let u = unreachable.display().to_string();
    courier(
        &[
            "cluster",
            "add",
            "w1-skip",
            "--cluster-kubeconfig",
            &u,
            "--kubeconfig",
            &m,
            "--timeout",
            "2s",
        ],
        &[],
    )
    .await?
    .fails_with(&["cannot reach the worker"])?;
    let out = courier(
        &[
            "cluster",
            "add",
            "w1-skip",
            "--cluster-kubeconfig",
            &u,
            "--kubeconfig",
            &m,
            "--skip-check",
        ],
        &[],
    )
    .await?
    .ok()?;
    ensure!(
        out.stderr
            .contains("Skipped the checks of worker \"w1-skip\" from this machine")
            && !out.stdout.contains("Checked worker"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    wait_not_ready(env, "w1-skip").await?;
    // --skip-check skips the probe only: the credential policy still applies.
    v["users"][0]["user"] =
        json!({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}});
    let exec = env.dir.join("exec.kubeconfig");
    std::fs::write(&exec, serde_json::to_string(&v)?)?;
    courier(
        &[
            "cluster",
            "add",
            "w1-exec",
            "--cluster-kubeconfig",
            &exec.display().to_string(),
            "--kubeconfig",
            &m,
            "--skip-check",
        ],
        &[],
    )
    .await?
    .fails_with(&["users[w1].user.exec", "--allow-exec-kubeconfigs"])?;

    // cluster list in every format shows all three.
    let out = courier(&["cluster", "list", "-o", "wide", "--kubeconfig", &m], &[])
        .await?
        .ok()?;
    has(
        &out,
        &[
            "SECRET",
            "LAST-PROBE",
            "MESSAGE",
            "w1-far-kubeconfig",
            "Unreachable",
        ],
    )?;
    let out = courier(&["cluster", "list", "-o", "name", "--kubeconfig", &m], &[])
        .await?
        .ok()?;
    ensure!(
        out.stdout
            == "workercluster.courier.dev/w1\nworkercluster.courier.dev/w1-far\n\
                workercluster.courier.dev/w1-skip\n",
        "{}",
        out.stdout
    );
    let out = courier(&["cluster", "list", "-o", "json", "--kubeconfig", &m], &[])
        .await?
        .ok()?;
    let list: Value = serde_json::from_str(&out.stdout)?;
    ensure!(
        list["kind"] == "List" && list["items"][0]["kind"] == "WorkerCluster",
        "{list}"
    );
    Ok(())
}
