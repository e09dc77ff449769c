//! Issue #17 §2 through the real binaries: `courier cluster add --namespaces` registers the worker
//! namespaces Courier may use (checked there by `add`), `cluster list -o wide` shows them, a Job of
//! a listed namespace runs there, and `courier describe job` says why a Job of another namespace
//! is not placed on that worker. Seen failing with describe's note left out (the `wait_for` timed
//! out).

mod support;

use courier_e2e::{Env, job};
use support::{T, courier, has, opts};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_add_namespaces_list_and_describe() -> anyhow::Result<()> {
    let mut env = Env::start("cli-namespaces", opts(1, true)).await?;
    let r = body(&env).await;
    env.finish(r)
}

async fn body(env: &Env) -> anyhow::Result<()> {
    let m = env.mgmt.kubeconfig.display().to_string();
    let kc = env.workers[0].kubeconfig.display().to_string();
    for ns in ["team-a", "team-b"] {
        env.create_namespace(ns).await?;
    }
    let add = [
        "cluster",
        "add",
        "w1",
        "--cluster-kubeconfig",
        &kc,
        "--namespaces",
        "team-a",
        "--kubeconfig",
        &m,
    ];
    let out = courier(&add, &[]).await?.ok()?;
    has(&out, &["Jobs in namespaces team-a."])?;
    env.wait_cluster_ready("w1", T).await?;
    let out = courier(&["cluster", "list", "-o", "wide", "--kubeconfig", &m], &[])
        .await?
        .ok()?;
    has(&out, &["NAMESPACES", "team-a"])?;

    env.create_job("team-a", job("in-list", &[])).await?;
    env.wait_finished("team-a", "in-list", T).await?;
    env.create_job("team-b", job("off-list", &[])).await?;
    let describe = [
        "describe",
        "job",
        "off-list",
        "-n",
        "team-b",
        "--kubeconfig",
        &m,
    ];
    courier_e2e::wait_for("describe to say why", T, || async {
        let out = courier(&describe, &[]).await.map_err(|e| e.to_string())?;
        if out
            .stdout
            .contains("cluster w1 takes only namespaces team-a")
            && out
                .stdout
                .contains("not listing this namespace in spec.namespaces: w1")
        {
            Ok(())
        } else {
            Err(format!("{}\n{}", out.stdout, out.stderr))
        }
    })
    .await?;
    // A bad namespace name is refused before anything is written.
    courier(
        &[
            "cluster",
            "add",
            "w2",
            "--cluster-kubeconfig",
            &kc,
            "--namespaces",
            "Team_A",
            "--kubeconfig",
            &m,
        ],
        &[],
    )
    .await?
    .fails_with(&["invalid namespace \"Team_A\" in --namespaces"])?;
    Ok(())
}
