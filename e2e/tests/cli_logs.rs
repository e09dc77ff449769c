//! `courier logs` against kubesim's Pods and `pods/log`: several pods (prefixed lines), `-c`,
//! `--index`, `--tail`, `-f` until the container ends, the mirror's pods or the mirror itself gone,
//! a worker whose rights lack the chart's `cliReads`, and a worker that is not Ready.

use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure};
use courier_e2e::{CliOutput, Env, EnvOptions, job, wait_for, with_spec};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use serde_json::json;

const T: Duration = Duration::from_secs(60);
const NS: &str = "default";

fn env_opts() -> EnvOptions {
    EnvOptions {
        workers: 1,
        ..Default::default()
    }
}

async fn logs(env: &Env, args: &[&str]) -> anyhow::Result<CliOutput> {
    let mut full = vec!["logs"];
    full.extend_from_slice(args);
    env.courier(&full).await
}

/// An Indexed Job of three pods with two containers, each printing a line naming itself.
fn indexed(name: &str, run_seconds: &str) -> serde_json::Value {
    let mut j = job(
        name,
        &[
            ("sim/run-seconds", run_seconds),
            (
                "sim/log",
                "hello from ${index} in ${container}\nsecond line of ${container}",
            ),
        ],
    );
    j["spec"]["template"]["spec"]["containers"] = json!([
        {"name": "main", "image": "busybox:1.36", "command": ["true"]},
        {"name": "side", "image": "busybox:1.36", "command": ["true"]}
    ]);
    let j = with_spec(j, "completionMode", json!("Indexed"));
    let j = with_spec(j, "completions", json!(3));
    with_spec(j, "parallelism", json!(3))
}

async fn worker_pods(env: &Env, name: &str) -> anyhow::Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(env.worker_clients[0].clone(), NS);
    Ok(pods
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}")))
        .await?
        .items)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_of_the_mirrors_pods() -> anyhow::Result<()> {
    let mut env = Env::start("cli-logs", env_opts()).await?;
    let r = logs_body(&env).await;
    env.finish(r)
}

async fn logs_body(env: &Env) -> anyhow::Result<()> {
    env.create_job(NS, indexed("idx", "2")).await?;
    env.wait_finished(NS, "idx", T).await?;

    // Several pods: every line prefixed with its pod and container; the default container named.
    let out = logs(env, &["idx"]).await?.ok()?;
    let lines: Vec<&str> = out.stdout.lines().collect();
    for i in 0..3 {
        ensure!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("[pod/idx-{i}-"))
                    && l.ends_with(&format!("/main] hello from {i} in main"))),
            "no prefixed line of index {i}:\n{}",
            out.stdout
        );
    }
    ensure!(!out.stdout.contains("in side"), "{}", out.stdout);
    ensure!(
        out.stderr
            .contains("Defaulted container \"main\" out of: main, side"),
        "{}",
        out.stderr
    );

    // -c and --index: one pod, no prefix.
    let out = logs(env, &["idx", "-c", "side", "--index", "1"])
        .await?
        .ok()?;
    ensure!(
        out.stdout.lines().any(|l| l == "hello from 1 in side")
            && !out.stdout.contains("[pod/")
            && !out.stdout.contains("from 0")
            && !out.stdout.contains("from 2"),
        "{}",
        out.stdout
    );
    // --prefix on one pod, and the NAMESPACE/NAME and job/NAME forms.
    let out = logs(env, &["default/idx", "--index", "2", "--prefix"])
        .await?
        .ok()?;
    ensure!(
        out.stdout.lines().all(|l| l.starts_with("[pod/idx-2-")),
        "{}",
        out.stdout
    );
    let out = logs(
        env,
        &["job/idx", "--index", "0", "-c", "main", "--tail", "1"],
    )
    .await?
    .ok()?;
    ensure!(
        out.stdout.lines().count() == 1 && out.stdout.contains("exited with code 0"),
        "--tail 1 keeps the last line: {}",
        out.stdout
    );
    let out = logs(env, &["idx", "--tail", "0"]).await?.ok()?;
    ensure!(out.stdout.is_empty(), "{}", out.stdout);

    logs(env, &["idx", "--index", "7"])
        .await?
        .fails_with(&["has completion index 7", "indexes there: 0, 1, 2"])?;
    logs(env, &["idx", "-c", "nope"]).await?.fails_with(&[
        "container \"nope\" is not in pod idx-",
        "main, side",
        "-c",
    ])?;
    logs(env, &["nope"])
        .await?
        .fails_with(&["Job default/nope not found"])?;

    // -f follows every pod until its container ends.
    env.create_job(NS, indexed("slow", "40")).await?;
    wait_for("slow's pods to run", T, || async {
        let pods = worker_pods(env, "slow").await.map_err(|e| e.to_string())?;
        let running = pods
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if running == 3 {
            Ok(())
        } else {
            Err(format!("{running} of 3 running"))
        }
    })
    .await?;
    let started = Instant::now();
    let out = logs(env, &["slow", "-f"]).await?.ok()?;
    let took = started.elapsed();
    for i in 0..3 {
        ensure!(
            out.stdout
                .lines()
                .any(|l| l.starts_with(&format!("[pod/slow-{i}-"))
                    && l.contains("exited with code 0")),
            "follow stopped before pod {i} ended:\n{}",
            out.stdout
        );
    }
    // Break follow (LogParams.follow = false) and this fails: the command returns at once, before
    // the containers exit.
    ensure!(
        took >= Duration::from_millis(500),
        "returned after {took:?}: not following"
    );

    // The mirror's pods gone (deleted on the worker): said, with where and what next.
    let pods: Api<Pod> = Api::namespaced(env.worker_clients[0].clone(), NS);
    for p in worker_pods(env, "idx").await? {
        let name = p.metadata.name.clone().unwrap_or_default();
        pods.delete(&name, &DeleteParams::default()).await?;
    }
    wait_for("idx's pods to be gone", T, || async {
        match worker_pods(env, "idx").await {
            Ok(p) if p.is_empty() => Ok(()),
            Ok(p) => Err(format!("{} left", p.len())),
            Err(e) => Err(e.to_string()),
        }
    })
    .await?;
    logs(env, &["idx"]).await?.fails_with(&[
        "Job default/idx ran on worker w1 (epoch 1",
        "its pods are gone there",
        "courier describe job idx -n default",
    ])?;

    // The mirror gone (as after --finished-mirror-ttl): when and where it ran, and what to do.
    env.worker_jobs(0, NS)
        .delete("idx", &DeleteParams::background())
        .await?;
    wait_for("idx's mirror to be gone", T, || async {
        match env.worker_jobs(0, NS).get_opt("idx").await {
            Ok(None) => Ok(()),
            Ok(Some(_)) => Err("still there".into()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await?;
    logs(env, &["idx"]).await?.fails_with(&[
        "Job default/idx ran on worker w1 (epoch 1) and is Complete since",
        "its mirror is gone there",
        "--finished-mirror-ttl",
        "courier describe job idx -n default",
    ])?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_without_the_rights_or_the_worker() -> anyhow::Result<()> {
    let mut env = Env::start("cli-logs-rights", env_opts()).await?;
    let r = rights_body(&env).await;
    env.finish(r)
}

async fn rights_body(env: &Env) -> anyhow::Result<()> {
    env.create_job(NS, job("hello", &[("sim/log", "hi")]))
        .await?;
    env.wait_finished(NS, "hello", T).await?;
    logs(env, &["hello"]).await?.ok()?;

    // Courier's credentials on w1 with the worker chart's default rights (no cliReads, no
    // createNamespaces; the origin id claims in its release namespace): the controller is content,
    // `courier logs` is refused with the fix.
    let w = &env.workers[0];
    let sa = "system:serviceaccount:courier-system:courier-dispatcher";
    let mut rules = vec![
        json!({"verbs": ["create", "get", "list", "watch", "patch", "delete"], "apiGroups": ["batch"], "resources": ["jobs"]}),
        json!({"verbs": ["get"], "apiGroups": [""], "resources": ["namespaces"]}),
        json!({"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"], "namespaces": ["courier-system"]}),
        json!({"verbs": ["get", "patch"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["courier-origins"], "namespaces": ["courier-system"]}),
        json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"]}),
        // Open to every authenticated user on a real server (system:basic-user), like the reviews.
        json!({"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]}),
    ];
    w.add_token("chart-default", sa, Some(json!({"allow": rules})))
        .await?;
    env.put_kubeconfig_secret("w1-kubeconfig", &w.kubeconfig_with_token("chart-default")?)
        .await?;
    logs(env, &["hello"]).await?.fails_with(&[
        "worker w1 refused listing the pods of Job default/hello",
        "--set cliReads=true",
        "docs/security.md",
    ])?;
    // With the chart's cliReads rules added, it reads again.
    rules.extend([
        json!({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}),
        json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}),
        json!({"verbs": ["list"], "apiGroups": [""], "resources": ["events"]}),
    ]);
    w.add_token("chart-cli-reads", sa, Some(json!({"allow": rules})))
        .await?;
    env.put_kubeconfig_secret(
        "w1-kubeconfig",
        &w.kubeconfig_with_token("chart-cli-reads")?,
    )
    .await?;
    let out = logs(env, &["hello"]).await?.ok()?;
    ensure!(out.stdout.contains("hi"), "{}", out.stdout);

    // A worker that is not Ready: its Secret holds no kubeconfig the controller accepts.
    env.put_kubeconfig_secret("w1-kubeconfig", "not: [a kubeconfig")
        .await?;
    env.wait_cluster_condition("w1", "False", "InvalidKubeconfig", T)
        .await?;
    logs(env, &["hello"]).await?.fails_with(&[
        "Job default/hello runs on worker w1, which is not Ready (Ready=False (InvalidKubeconfig)",
        "courier cluster list",
    ])?;
    Ok(())
}

/// A Job nobody placed yet, and one Courier does not manage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_of_jobs_that_have_none() -> anyhow::Result<()> {
    let mut env = Env::start(
        "cli-logs-none",
        EnvOptions {
            workers: 0,
            start_controller: false,
            register_workers: false,
            ..Default::default()
        },
    )
    .await?;
    let r = async {
        let mut plain = job("plain", &[]);
        plain["spec"]
            .as_object_mut()
            .ok_or_else(|| anyhow!("no spec"))?
            .remove("managedBy");
        env.create_job(NS, plain).await?;
        logs(&env, &["plain"]).await?.fails_with(&[
            "Courier does not manage Job default/plain",
            "kubectl logs job/plain -n default",
        ])?;
        env.create_job(NS, job("waiting", &[])).await?;
        logs(&env, &["waiting"]).await?.fails_with(&[
            "Job default/waiting is not placed on a worker yet",
            "courier describe job waiting -n default",
        ])?;
        anyhow::Ok(())
    }
    .await;
    env.finish(r)
}
