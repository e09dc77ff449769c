//! Lifecycle points of issue #11 that need separate processes: a leader paused past its lease
//! (SIGSTOP) must not write once the standby leads, and `courier cluster remove --force` with a
//! running controller. Written first and seen failing on the code before the fixes.

use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use courier_e2e::*;
use kube::Api;
use serde_json::Value;

const NS: &str = "default";
const T: Duration = Duration::from_secs(30);

fn signal(p: &Proc, sig: libc::c_int) -> anyhow::Result<()> {
    let pid = p.pid().context("the process is gone")?;
    let pid = libc::pid_t::try_from(pid)?;
    // SAFETY: a signal to our own child process; no memory is involved.
    let r = unsafe { libc::kill(pid, sig) };
    ensure!(r == 0, "kill({pid}, {sig}) failed");
    Ok(())
}

/// Point 13. Before the fix the resumed old leader still believed it led until its next election
/// round, and wrote in that window (seen: origin patches and events after the new leader's first
/// write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_writes_nothing_once_the_standby_leads() -> anyhow::Result<()> {
    let mut env = Env::start(
        "paused-leader",
        EnvOptions {
            workers: 1,
            start_controller: false,
            exclusive: true,
            ..Default::default()
        },
    )
    .await?;
    let r = async {
        // Each replica with its own user, so the management cluster's records tell them apart.
        let mut replicas = Vec::new();
        for name in ["replica-a", "replica-b"] {
            env.mgmt.add_token(name, name, None).await?;
            let kc = env.dir.join(format!("{name}.kubeconfig"));
            std::fs::write(&kc, env.mgmt.kubeconfig_with_token(name)?)?;
            let mut args = vec!["--leader-elect"];
            args.extend(FAST_LEASE);
            replicas.push(env.start_replica_with(name, &kc, &args)?);
            if replicas.len() == 1 {
                wait_for("replica-a to lead", T, || env.lease_holder()).await?;
            }
        }
        env.wait_cluster_ready("w1", T).await?;
        let first = env.lease_holder().await.map_err(anyhow::Error::msg)?;
        ensure!(first == "replica-a", "{first} leads");
        // Some work done, then the leader is paused (idle: a request it checked just before the
        // pause could still leave after it, which only the servers' preconditions can fence).
        let jobs: Vec<Value> = (0..10)
            .map(|i| job(&format!("early-{i}"), &[("sim/run-seconds", "1")]))
            .collect();
        create_many(&env, NS, jobs, 4).await?;
        wait_all_finished(&env, NS, 10, T, |_| "Complete").await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        env.mgmt.admin("POST", "/record/start", None).await?;
        signal(&replicas[0], libc::SIGSTOP)?;
        // Jobs keep coming: the standby takes over and handles them; the paused leader's watch
        // buffers them, so it wakes up with a queue full of work and stale beliefs.
        let feed = async {
            for i in 0..60 {
                env.create_job(NS, job(&format!("late-{i}"), &[("sim/run-seconds", "1")]))
                    .await?;
                tokio::time::sleep(Duration::from_millis(75)).await;
            }
            anyhow::Ok(())
        };
        let resume = async {
            wait_for("replica-b to lead", T, || async {
                match env.lease_holder().await? {
                    h if h == "replica-b" => Ok(()),
                    h => Err(format!("still {h}")),
                }
            })
            .await?;
            signal(&replicas[0], libc::SIGCONT)
        };
        let (fed, resumed) = tokio::join!(feed, resume);
        fed?;
        resumed?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let seen = env.mgmt.admin("GET", "/record", None).await?;
        let seen = seen["items"].as_array().context("records")?;
        let Some(b_first) = seen
            .iter()
            .position(|r| r["user"] == "replica-b" && is_write(r))
        else {
            bail!("replica-b never wrote");
        };
        let late: Vec<String> = seen[b_first..]
            .iter()
            .filter(|r| r["user"] == "replica-a" && is_write(r))
            .map(|r| {
                format!(
                    "{} {}/{}/{}",
                    r["verb"], r["resource"], r["namespace"], r["name"]
                )
            })
            .collect();
        ensure!(
            late.is_empty(),
            "the paused leader wrote after the new leader's first write: {late:?}"
        );
        wait_all_finished(&env, NS, 70, Duration::from_secs(90), |_| "Complete").await?;
        check_mirrors(&env, NS).await?;
        Ok(())
    }
    .await;
    env.finish(r.context("paused leader"))
}

/// Point 16 with the CLI: `cluster remove` waits for the controller's drain, `--force` lets go of
/// the mirrors at once. Before the change `--force` left the WorkerCluster hanging on the drain
/// finalizer (and without the finalizer nothing was drained at all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_remove_drains_or_lets_go_with_force() -> anyhow::Result<()> {
    let mut env = Env::start("remove", EnvOptions::default()).await?;
    let r = async {
        let wcs: Api<courier_api::WorkerCluster> = Api::all(env.mgmt_client.clone());
        wait_for("the drain finalizers", T, || async {
            let all = wcs
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let with = all
                .items
                .iter()
                .filter(|w| {
                    w.metadata
                        .finalizers
                        .as_ref()
                        .is_some_and(|f| f.iter().any(|x| x == courier_api::FINALIZER_DRAIN))
                })
                .count();
            if with == 2 {
                Ok(())
            } else {
                Err(format!("{with} of 2"))
            }
        })
        .await?;
        // A finished Job's mirror on w2: removing w2 waits until Courier deleted it.
        let done = job("finished-on-w2", &[("sim/run-seconds", "1")]);
        let done = with_annotation(done, "courier.dev/cluster-selector", "region=us");
        env.create_job(NS, done).await?;
        env.wait_finished(NS, "finished-on-w2", T).await?;
        ensure!(env.mirrors().await?.iter().any(|(i, _)| *i == 1));
        let out = env.courier(&["cluster", "remove", "w2"]).await?.ok()?;
        ensure!(
            out.stdout.contains("Removed WorkerCluster w2"),
            "{}",
            out.stdout
        );
        ensure!(wcs.get_opt("w2").await?.is_none());
        ensure!(
            !env.mirrors().await?.iter().any(|(i, _)| *i == 1),
            "the finished mirror on w2 was drained"
        );
        // A Job runs on w1: --force removes w1 at once, leaving its mirror to the user.
        env.create_job(NS, job("running-on-w1", &[("sim/outcome", "hang")]))
            .await?;
        env.wait_job(NS, "running-on-w1", "running", T, |j| {
            j.status.as_ref().and_then(|s| s.active) == Some(1)
        })
        .await?;
        let out = env
            .courier(&["cluster", "remove", "w1", "--force"])
            .await?
            .ok()?;
        ensure!(
            out.stdout.contains("while 1 Job(s) ran there"),
            "{}",
            out.stdout
        );
        ensure!(wcs.get_opt("w1").await?.is_none(), "--force does not wait");
        Ok(())
    }
    .await;
    env.finish(r.context("cluster remove"))
}
