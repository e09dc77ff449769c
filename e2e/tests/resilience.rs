//! Worker clusters in real life (issue 4): credential policy and Secret problems reported on the
//! WorkerCluster, rotation and lost rights, a blackholed or slow worker that must not slow the
//! others, dropped watches, orphan garbage collection. (A lost worker that returns and two replicas
//! with the leader killed are in `promises.rs`, observed through the servers' logs.)

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, ensure};
use courier_api::reasons::{
    REASON_CONNECTED, REASON_FORBIDDEN, REASON_INVALID_KUBECONFIG, REASON_SECRET_NOT_FOUND,
};
use courier_e2e::{
    Env, EnvOptions, create_many, job, mirror_epoch, placement, summary, wait_all_finished,
    wait_for, with_spec,
};
use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};

const NS: &str = "default";
const T: Duration = Duration::from_secs(60);

fn complete(_: &str) -> &'static str {
    "Complete"
}

fn worker_kubeconfig(env: &Env, i: usize) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(&env.workers[i].kubeconfig)?;
    serde_saphyr::from_str(&text).map_err(|e| anyhow!("{e}"))
}

/// Exec and insecure kubeconfigs are refused with InvalidKubeconfig naming the field (and never
/// the token), a missing Secret is SecretNotFound until it is created; with the flags the refused
/// ones connect. (One worker each: registrations of one server would be DuplicateCluster.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credential_policy_and_missing_secret() -> anyhow::Result<()> {
    let mut env = Env::start(
        "credentials",
        EnvOptions {
            workers: 3,
            register_workers: false,
            log_filter: Some("trace".into()),
            ..Default::default()
        },
    )
    .await?;
    let r = credentials_body(&mut env).await;
    env.finish(r)
}

async fn credentials_body(env: &mut Env) -> anyhow::Result<()> {
    let kc = worker_kubeconfig(env, 0)?;
    let kc_insecure = worker_kubeconfig(env, 1)?;
    let kc_late = worker_kubeconfig(env, 2)?;
    let token = kc["users"][0]["user"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let plugin = env.dir.join("get-token.sh");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\necho '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\"}}}}'\n"
        ),
    )?;
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755))?;
    }
    let mut exec = kc.clone();
    exec["users"][0]["user"] = json!({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": plugin.display().to_string()}});
    let mut insecure = kc_insecure.clone();
    insecure["clusters"][0]["cluster"] = json!({"server": kc_insecure["clusters"][0]["cluster"]["server"],
                                               "insecure-skip-tls-verify": true});
    let none = BTreeMap::new();
    env.put_kubeconfig_secret("exec-kc", &serde_json::to_string(&exec)?)
        .await?;
    env.create_worker_cluster("w-exec", "exec-kc", &none)
        .await?;
    env.put_kubeconfig_secret("insecure-kc", &serde_json::to_string(&insecure)?)
        .await?;
    env.create_worker_cluster("w-insecure", "insecure-kc", &none)
        .await?;
    env.create_worker_cluster("w-late", "late-kc", &none)
        .await?;

    let msg = env
        .wait_cluster_condition("w-exec", "False", REASON_INVALID_KUBECONFIG, T)
        .await?;
    ensure!(
        msg.contains("exec") && msg.contains("--allow-exec-kubeconfigs"),
        "message {msg:?}"
    );
    ensure!(!msg.contains(&token), "the condition leaks the token");
    let msg = env
        .wait_cluster_condition("w-insecure", "False", REASON_INVALID_KUBECONFIG, T)
        .await?;
    ensure!(
        msg.contains("insecure-skip-tls-verify") && msg.contains("--allow-insecure-kubeconfigs"),
        "message {msg:?}"
    );
    let msg = env
        .wait_cluster_condition("w-late", "False", REASON_SECRET_NOT_FOUND, T)
        .await?;
    ensure!(msg.contains("late-kc"), "message {msg:?}");
    // The Secret appears: the cluster connects without a restart.
    env.put_kubeconfig_secret("late-kc", &serde_json::to_string(&kc_late)?)
        .await?;
    env.wait_cluster_condition("w-late", "True", REASON_CONNECTED, T)
        .await?;

    // With the flags, the refused classes are accepted.
    env.kill_controller();
    env.set_controller_args(&["--allow-exec-kubeconfigs", "--allow-insecure-kubeconfigs"]);
    env.start_controller()?;
    env.wait_cluster_condition("w-exec", "True", REASON_CONNECTED, T)
        .await?;
    env.wait_cluster_condition("w-insecure", "True", REASON_CONNECTED, T)
        .await?;
    // The whole log, at trace level (set for this Env), must be there and never hold the token.
    // (Before, an unreadable log read as "" and passed, and only `info` lines were written.)
    let path = env.dir.join("controller.log");
    let log = std::fs::read_to_string(&path)
        .with_context(|| format!("reading the controller log {}", path.display()))?;
    ensure!(
        log.contains("DEBUG") && log.contains("TRACE"),
        "the controller log at {} has no debug/trace lines: the check would see little",
        path.display()
    );
    ensure!(
        !log.contains(&token),
        "the controller log contains the token"
    );
    Ok(())
}

/// A kubeconfig rotated (new token, old one revoked) while Jobs run: they all finish and the
/// cluster stays usable; then the token loses its rights: Ready=False (Forbidden).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_then_lost_rights() -> anyhow::Result<()> {
    let mut env = Env::start(
        "rotation",
        EnvOptions {
            workers: 1,
            register_workers: false,
            ..Default::default()
        },
    )
    .await?;
    let r = async {
        let w = &env.workers[0];
        w.add_token("tok-a", "courier-a", None).await?;
        let file = env.dir.join("w1-a.kubeconfig");
        std::fs::write(&file, w.kubeconfig_with_token("tok-a")?)?;
        env.courier(&["cluster", "add", "w1", "--kubeconfig", &file.display().to_string()])
            .await?
            .ok()?;
        env.wait_cluster_ready("w1", T).await?;
        let jobs: Vec<Value> = (0..20).map(|i| job(&format!("rot-{i}"), &[("sim/run-seconds", "30")])).collect();
        create_many(&env, NS, jobs, 8).await?;
        env.wait_job(NS, "rot-0", "running", T, |j| j.status.as_ref().and_then(|s| s.active).unwrap_or(0) >= 1)
            .await?;
        w.add_token("tok-b", "courier-b", None).await?;
        env.put_kubeconfig_secret("w1-kubeconfig", &w.kubeconfig_with_token("tok-b")?).await?;
        // The old token is revoked right after the Secret changes, as an operator rotating a leaked
        // token would: the controller must pick up the new kubeconfig without a restart.
        w.admin("DELETE", "/tokens/tok-a", None).await?;
        wait_all_finished(&env, NS, 20, T, complete).await?;
        env.wait_cluster_condition("w1", "True", REASON_CONNECTED, T).await?;
        // The token loses its rights.
        w.add_token(
            "tok-b",
            "courier-b",
            Some(json!({"allow": [{"verbs": ["get", "list", "watch"], "apiGroups": ["batch"], "resources": ["jobs"]}]})),
        )
        .await?;
        let msg = env.wait_cluster_condition("w1", "False", REASON_FORBIDDEN, T).await?;
        ensure!(!msg.contains("tok-b"), "condition leaks the token: {msg}");
        Ok(())
    }
    .await;
    env.finish(r)
}

/// Creates `jobs` at a steady `per_second` (below what the controller sustains, so the figure is
/// the time Courier takes per Job rather than the length of a backlog) and measures, for each
/// that lands on one of the `healthy` workers, the time from its create request to its mirror
/// appearing there, as seen by a watch on each of those workers.
async fn dispatch_latencies(
    env: &Env,
    ns: &str,
    jobs: Vec<Value>,
    per_second: u32,
    healthy: &[&str],
) -> anyhow::Result<Vec<Duration>> {
    use futures::StreamExt as _;
    use kube::runtime::watcher;
    let n = jobs.len();
    let names: std::collections::BTreeSet<String> = jobs
        .iter()
        .filter_map(|j| j["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    let mut streams = Vec::new();
    for w in healthy {
        let api = env.worker_jobs(env.worker_index(w)?, ns);
        streams.push(watcher(api, watcher::Config::default()).boxed());
    }
    let mut events = futures::stream::select_all(streams);
    let mut seen: BTreeMap<String, Instant> = BTreeMap::new();
    // First sight of each of our Jobs on a healthy worker.
    let note = |seen: &mut BTreeMap<String, Instant>, e: watcher::Event<Job>| {
        if let watcher::Event::Apply(m) | watcher::Event::InitApply(m) = e {
            let name = m.metadata.name.unwrap_or_default();
            if names.contains(&name) {
                seen.entry(name).or_insert_with(Instant::now);
            }
        }
    };
    // The watches are established (their initial lists done) before the first create.
    let mut initialised = 0;
    while initialised < healthy.len() {
        match tokio::time::timeout(Duration::from_secs(10), events.next()).await {
            Ok(Some(Ok(watcher::Event::InitDone))) => initialised += 1,
            Ok(Some(Ok(e))) => note(&mut seen, e),
            Ok(Some(Err(e))) => anyhow::bail!("watching the healthy workers: {e}"),
            Ok(None) | Err(_) => anyhow::bail!("the watches on the healthy workers did not start"),
        }
    }
    let start: std::sync::Mutex<BTreeMap<String, Instant>> = Default::default();
    let creating = std::sync::atomic::AtomicBool::new(true);
    let create = async {
        let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second);
        for j in jobs {
            tick.tick().await;
            let name = j["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            start
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(name, Instant::now());
            env.create_job(ns, j).await?;
        }
        creating.store(false, std::sync::atomic::Ordering::SeqCst);
        anyhow::Ok(())
    };
    let observe = async {
        let deadline = Instant::now() + Duration::from_secs(120);
        // Done when every Job is seen, or the creates are over and nothing new has landed on the
        // healthy workers for two seconds (the rest went to the faulty one).
        while seen.len() < n && Instant::now() < deadline {
            match tokio::time::timeout(Duration::from_secs(2), events.next()).await {
                Ok(Some(Ok(e))) => note(&mut seen, e),
                Ok(Some(Err(e))) => anyhow::bail!("watching the healthy workers: {e}"),
                Ok(None) => anyhow::bail!("the watches on the healthy workers ended"),
                Err(_) if !creating.load(std::sync::atomic::Ordering::SeqCst) => break,
                Err(_) => {}
            }
        }
        anyhow::Ok(())
    };
    let (created, observed) = tokio::join!(create, observe);
    created?;
    observed?;
    let start = start.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut out: Vec<Duration> = seen
        .iter()
        .filter_map(|(name, t)| start.get(name).map(|s| t.duration_since(*s)))
        .collect();
    out.sort();
    Ok(out)
}

fn pct(v: &[Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

/// One of three workers blackholed, then slow (every request 1.5 s late), while 300 Jobs dispatch
/// each time (50 a second, 4 reconcile workers): dispatch latency on the two healthy workers stays
/// within 2x of the all-healthy run with the same Jobs, plus 50 ms for
/// the scheduling noise of a 2-core machine (all-healthy latencies are ~10 ms, so a few context
/// switches can double them; the failure this guards against, healthy dispatch waiting on the
/// hung worker, costs a request timeout: seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackholed_or_slow_worker_does_not_slow_the_others() -> anyhow::Result<()> {
    let mut env = Env::start(
        "blackhole",
        EnvOptions {
            workers: 3,
            labels: vec![],
            exclusive: true,
            // Few reconcile workers, so that any of them held by the hung worker shows: at 50
            // Jobs/s four suffice, and a call to w3 waits a whole request timeout.
            controller_args: vec!["--concurrency".into(), "4".into()],
            ..Default::default()
        },
    )
    .await?;
    let r = async {
        let quick = |p: &str, i: usize| job(&format!("{p}-{i:03}"), &[("sim/run-seconds", "2")]);
        let base = dispatch_latencies(
            &env,
            NS,
            (0..300).map(|i| quick("base", i)).collect(),
            50,
            &["w1", "w2"],
        )
        .await?;
        env.workers[2]
            .set_faults(json!({"blackhole": true}))
            .await?;
        let faulty = dispatch_latencies(
            &env,
            NS,
            (0..300).map(|i| quick("bh", i)).collect(),
            50,
            &["w1", "w2"],
        )
        .await?;
        let (b50, b95, f50, f95) = (
            pct(&base, 0.5),
            pct(&base, 0.95),
            pct(&faulty, 0.5),
            pct(&faulty, 0.95),
        );
        eprintln!(
            "dispatch latency on healthy workers: all healthy p50 {b50:?} p95 {b95:?} ({} Jobs); \
             one blackholed p50 {f50:?} p95 {f95:?} ({} Jobs)",
            base.len(),
            faulty.len()
        );
        ensure!(
            faulty.len() >= 150,
            "only {} Jobs reached the healthy workers",
            faulty.len()
        );
        // A reconcile worker held by the blackholed server waits for a request timeout (seconds), so
        // a slack of a quarter second still tells a held worker from a busy machine (seen: p50 7 ms
        // alone vs 72 ms with one blackholed, at load average 12 on 2 cores, nothing held).
        let slack = Duration::from_millis(250);
        ensure!(f50 <= b50 * 2 + slack, "p50 {f50:?} > 2 x {b50:?}");
        ensure!(f95 <= b95 * 2 + slack, "p95 {f95:?} > 2 x {b95:?}");
        // A slow worker answers, only late: its calls hold reconcile workers for 1.5 s each.
        env.workers[2]
            .set_faults(json!({"latencyMs": 1500}))
            .await?;
        let slow = dispatch_latencies(
            &env,
            NS,
            (0..300).map(|i| quick("slow", i)).collect(),
            50,
            &["w1", "w2"],
        )
        .await?;
        let (s50, s95) = (pct(&slow, 0.5), pct(&slow, 0.95));
        eprintln!(
            "one slow worker (1.5 s a request): p50 {s50:?} p95 {s95:?} ({} Jobs)",
            slow.len()
        );
        ensure!(
            slow.len() >= 150,
            "only {} Jobs reached the healthy workers",
            slow.len()
        );
        ensure!(
            s50 <= b50 * 2 + slack,
            "slow worker: p50 {s50:?} > 2 x {b50:?}"
        );
        ensure!(
            s95 <= b95 * 2 + slack,
            "slow worker: p95 {s95:?} > 2 x {b95:?}"
        );
        env.workers[2].clear_faults().await?;
        Ok(())
    }
    .await;
    env.finish(r)
}

/// Workers restarted (every connection and watch dropped) and their watch history compacted while
/// Jobs run: no status is missed, every origin completes with its counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_restart_drops_watches_without_missed_status() -> anyhow::Result<()> {
    let mut env = Env::start("watch-drop", EnvOptions::default()).await?;
    let r = async {
        let jobs: Vec<Value> = (0..30)
            .map(|i| {
                with_spec(
                    job(&format!("wd-{i}"), &[("sim/run-seconds", "20")]),
                    "completions",
                    json!(2),
                )
            })
            .collect();
        create_many(&env, NS, jobs, 8).await?;
        env.wait_job(NS, "wd-0", "running", T, |j| {
            j.status.as_ref().and_then(|s| s.active).unwrap_or(0) >= 1
        })
        .await?;
        for w in &env.workers {
            w.admin("POST", "/restart", None).await?;
            w.admin("POST", "/compact", None).await?;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        for w in &env.workers {
            w.admin("POST", "/drop-watches", None).await?;
        }
        let done = wait_all_finished(&env, NS, 30, T, complete).await?;
        for j in &done {
            ensure!(
                j.status.as_ref().and_then(|s| s.succeeded) == Some(2),
                "{}",
                summary(j)
            );
            ensure!(
                placement(j).map(|p| p.1) == Some(1),
                "re-dispatched: {}",
                summary(j)
            );
        }
        Ok(())
    }
    .await;
    env.finish(r)
}

/// An origin deleted while its worker is down: once the worker-lost timeout passes the origin is
/// released, and when the worker returns the orphaned mirror is garbage-collected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_mirror_collected_after_worker_returns() -> anyhow::Result<()> {
    let mut env = Env::start(
        "orphan",
        EnvOptions {
            controller_args: vec!["--worker-lost-timeout".into(), "3s".into()],
            ..Default::default()
        },
    )
    .await?;
    let r = async {
        env.courier(&["cluster", "pause", "w2"]).await?.ok()?;
        env.create_job(NS, job("orphan", &[("sim/outcome", "hang")]))
            .await?;
        env.wait_job(NS, "orphan", "running on w1", T, |j| {
            placement(j).map(|p| p.0).as_deref() == Some("w1")
                && j.status.as_ref().and_then(|s| s.active).unwrap_or(0) >= 1
        })
        .await?;
        // Another management cluster's mirror on the same worker: never Courier's to collect.
        let mut other = job("other-origins", &[("sim/outcome", "hang")]);
        other["spec"].as_object_mut().map(|s| s.remove("managedBy"));
        other["metadata"]["labels"] = json!({
            "courier.dev/origin": "another-management-cluster",
            "courier.dev/origin-uid": "00000000-0000-0000-0000-000000000000",
            "courier.dev/epoch": "1",
        });
        let other: Job = serde_json::from_value(other)?;
        env.worker_jobs(0, NS)
            .create(&Default::default(), &other)
            .await?;
        // Down for every connection: new ones refused, and the requests of those already open
        // held (with `refuse` alone a pooled connection still deletes the mirror, and no orphan
        // is left for the collection to find).
        env.workers[0]
            .set_faults(json!({"refuse": true, "blackhole": true}))
            .await?;
        env.delete_job(NS, "orphan").await?;
        let jobs = env.jobs(NS);
        wait_for(
            "origin released while w1 is down",
            Duration::from_secs(90),
            || {
                let jobs = jobs.clone();
                async move {
                    match jobs.get_opt("orphan").await.map_err(|e| e.to_string())? {
                        None => Ok(()),
                        Some(j) => Err(format!("finalizers {:?}", j.metadata.finalizers)),
                    }
                }
            },
        )
        .await?;
        // Released without its mirror's delete: the finalizer was dropped as orphaned.
        let why = env
            .wait_event(NS, "orphan", "MirrorOrphaned", Duration::from_secs(10))
            .await?;
        ensure!(why.contains("w1"), "MirrorOrphaned names the worker: {why}");
        env.workers[0].clear_faults().await?;
        let w1 = env.worker_jobs(0, NS);
        wait_for("orphan mirror collected on w1", T, || {
            let w1 = w1.clone();
            async move {
                match w1.get_opt("orphan").await.map_err(|e| e.to_string())? {
                    None => Ok(()),
                    Some(m) => Err(format!("still there (epoch {:?})", mirror_epoch(&m))),
                }
            }
        })
        .await?;
        // The sweep that removed it has run: the other origin's Job is still there.
        ensure!(
            env.worker_jobs(0, NS)
                .get_opt("other-origins")
                .await?
                .is_some(),
            "garbage collection deleted another origin id's Job"
        );
        Ok(())
    }
    .await;
    env.finish(r)
}
