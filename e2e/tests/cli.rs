//! The `courier` CLI against kubesim processes: `crds`, `cluster add|list|pause|resume|remove` with
//! an error message for every bad input, `submit`, `jobs`, `explain`, and `run`'s flag checking.
//! No controller runs here (registration and the CLI must work without one). The kubectl
//! conventions (`-n`/`-A`, `-o`, `describe`, `submit -f -`, deprecated spellings, `--server`,
//! `--skip-check`, completion, the kubectl plugin) are in `cli_conventions.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, anyhow, ensure};
use courier_api::{MANAGED_BY, WorkerCluster};
use courier_e2e::{Env, EnvOptions, Kubesim, courier, courier_env, job, wait_for, with_spec};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};

fn cli_env() -> EnvOptions {
    EnvOptions {
        workers: 1,
        start_controller: false,
        register_workers: false,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_prints_the_workercluster_crd() -> anyhow::Result<()> {
    let out = courier(Path::new("/nonexistent"), &["crds"]).await?.ok()?;
    let printed: Value = serde_saphyr::from_str(&out.stdout)
        .map_err(|e| anyhow!("not YAML: {e}\n{}", out.stdout))?;
    let expected = serde_json::to_value(courier_api::crd())?;
    ensure!(printed == expected, "courier crds printed {printed:#}");
    ensure!(printed["spec"]["scope"] == "Cluster");
    Ok(())
}

/// Writes a variant of worker `w`'s kubeconfig, changed by `edit`, and returns its path.
fn variant(
    env: &Env,
    w: &Kubesim,
    file: &str,
    edit: impl FnOnce(&mut Value),
) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(&w.kubeconfig)?;
    let mut v: Value = serde_saphyr::from_str(&text).map_err(|e| anyhow!("{e}"))?;
    edit(&mut v);
    let path = env.dir.join(file);
    std::fs::write(&path, serde_json::to_string_pretty(&v)?)?;
    Ok(path.display().to_string())
}

async fn registrations(env: &Env) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let wcs: Api<WorkerCluster> = Api::all(env.mgmt_client.clone());
    let names = wcs
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|w| w.metadata.name)
        .collect();
    let secrets: Api<Secret> = Api::namespaced(env.mgmt_client.clone(), "courier-system");
    let secret_names = secrets
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    Ok((names, secret_names))
}

/// Every bad input of `cluster add` fails with a message naming the problem and the fix, and
/// writes nothing to the management cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_add_refuses_bad_input_and_writes_nothing() -> anyhow::Result<()> {
    let mut env = Env::start("cluster-add-errors", cli_env()).await?;
    let r = cluster_add_errors(&env).await;
    env.finish(r)
}

async fn cluster_add_errors(env: &Env) -> anyhow::Result<()> {
    let w = &env.workers[0];
    let kc = w.kubeconfig.display().to_string();
    let cases: Vec<(&str, Vec<String>, Vec<&str>)> = vec![
        (
            "missing file",
            vec![
                "w1".into(),
                "--cluster-kubeconfig".into(),
                "/nonexistent/kc".into(),
            ],
            vec![
                "cannot read kubeconfig file /nonexistent/kc",
                "--cluster-kubeconfig",
            ],
        ),
        (
            "invalid name",
            vec!["W_1".into(), "--cluster-kubeconfig".into(), kc.clone()],
            vec!["invalid WorkerCluster name \"W_1\"", "lower case"],
        ),
        (
            "bad label",
            vec![
                "w1".into(),
                "--cluster-kubeconfig".into(),
                kc.clone(),
                "--label".into(),
                "region".into(),
            ],
            vec!["--label", "key=value"],
        ),
        (
            "bad label key",
            vec![
                "w1".into(),
                "--cluster-kubeconfig".into(),
                kc.clone(),
                "-l".into(),
                "a b=c".into(),
            ],
            vec!["label key \"a b\""],
        ),
        (
            "negative weight",
            vec![
                "w1".into(),
                "--cluster-kubeconfig".into(),
                kc.clone(),
                "--weight".into(),
                "-1".into(),
            ],
            vec!["--weight"],
        ),
        (
            "unknown context",
            vec![
                "w1".into(),
                "--cluster-kubeconfig".into(),
                kc.clone(),
                "--cluster-context".into(),
                "nope".into(),
            ],
            vec![
                "context \"nope\" is not in",
                "its contexts are: w1",
                "--cluster-context",
            ],
        ),
    ];
    for (what, args, needles) in cases {
        let mut full = vec!["cluster".to_string(), "add".to_string()];
        full.extend(args);
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        env.courier(&refs)
            .await?
            .fails_with(&needles)
            .with_context(|| format!("case {what}"))?;
    }

    // Not a kubeconfig at all.
    let garbage = env.dir.join("garbage.kubeconfig");
    std::fs::write(&garbage, "clusters: [\n")?;
    env.courier(&[
        "cluster",
        "add",
        "w1",
        "--cluster-kubeconfig",
        &garbage.display().to_string(),
    ])
    .await?
    .fails_with(&["is not a valid kubeconfig"])?;

    // Credential policy: each class is refused naming the field and the flag.
    let exec = variant(env, w, "exec.kubeconfig", |v| {
        v["users"][0]["user"] = json!({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "get-token"}});
    })?;
    env.courier(&["cluster", "add", "w1", "--cluster-kubeconfig", &exec])
        .await?
        .fails_with(&[
            "users[w1].user.exec",
            "--allow-exec-kubeconfigs",
            "runs an exec credential plugin",
        ])?;
    let insecure = variant(env, w, "insecure.kubeconfig", |v| {
        v["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = json!(true);
    })?;
    env.courier(&["cluster", "add", "w1", "--cluster-kubeconfig", &insecure])
        .await?
        .fails_with(&[
            "clusters[w1].cluster.insecure-skip-tls-verify",
            "--allow-insecure-kubeconfigs",
        ])?;
    let token_file = variant(env, w, "tokenfile.kubeconfig", |v| {
        v["users"][0]["user"] = json!({"tokenFile": "w1.token"});
    })?;
    env.courier(&["cluster", "add", "w1", "--cluster-kubeconfig", &token_file])
        .await?
        .fails_with(&[
            "users[w1].user.tokenFile",
            "--flatten",
            "--allow-file-kubeconfigs",
        ])?;
    env.courier(&[
        "cluster",
        "add",
        "w1",
        "--cluster-kubeconfig",
        &token_file,
        "--flatten",
    ])
    .await?
    .fails_with(&["users[w1].user.tokenFile: cannot read", "w1.token"])?;

    // The worker's answers: unreachable, bad credentials, missing rights.
    let port = courier_e2e::free_port()?;
    let unreachable = variant(env, w, "unreachable.kubeconfig", |v| {
        v["clusters"][0]["cluster"]["server"] = json!(format!("https://127.0.0.1:{port}"));
    })?;
    env.courier(&[
        "cluster",
        "add",
        "w1",
        "--cluster-kubeconfig",
        &unreachable,
        "--timeout",
        "3s",
    ])
    .await?
    .fails_with(&[
        "cannot reach the worker at https://127.0.0.1:",
        "check the server address",
    ])?;
    let bad_token = variant(env, w, "badtoken.kubeconfig", |v| {
        v["users"][0]["user"]["token"] = json!("not-a-token");
    })?;
    env.courier(&["cluster", "add", "w1", "--cluster-kubeconfig", &bad_token])
        .await?
        .fails_with(&["rejected the credentials of user w1 (401 Unauthorized)"])?;
    w.add_token(
        "limited",
        "ci-bot",
        Some(json!({"allow": [
            {"verbs": ["get", "list", "watch"], "apiGroups": ["batch"], "resources": ["jobs"]},
            {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"]}
        ]})),
    )
    .await?;
    let limited = variant(env, w, "limited.kubeconfig", |v| {
        v["users"][0]["user"]["token"] = json!("limited");
    })?;
    env.courier(&["cluster", "add", "w1", "--cluster-kubeconfig", &limited])
        .await?
        .fails_with(&[
            "lack rights Courier needs",
            "create jobs.batch, patch jobs.batch, delete jobs.batch, get namespaces",
            "charts/courier-worker",
        ])?;
    w.add_token("no-ssar", "nobody", Some(json!({"allow": []})))
        .await?;
    let no_rights = variant(env, w, "norights.kubeconfig", |v| {
        v["users"][0]["user"]["token"] = json!("no-ssar");
    })?;
    env.courier(&["cluster", "add", "w1", "--cluster-kubeconfig", &no_rights])
        .await?
        .fails_with(&["403 Forbidden"])?;

    // The management side: Courier's namespace (from COURIER_NAMESPACE) and the CRD.
    courier_env(
        &env.mgmt.kubeconfig,
        &["cluster", "add", "w1", "--cluster-kubeconfig", &kc],
        &[("COURIER_NAMESPACE", "nope")],
    )
    .await?
    .fails_with(&[
        "namespace nope does not exist in the management cluster",
        "--namespace",
    ])?;
    let bare = Kubesim::start(&env.dir, "bare", "management", 1.0)?;
    courier(
        &bare.kubeconfig,
        &["cluster", "add", "w1", "--cluster-kubeconfig", &kc],
    )
    .await?
    .fails_with(&[
        "CRD",
        "is not installed",
        "courier crds | kubectl apply -f -",
    ])?;
    courier(&bare.kubeconfig, &["cluster", "list"])
        .await?
        .fails_with(&["courier crds | kubectl apply -f -"])?;

    let (wcs, secrets) = registrations(env).await?;
    ensure!(wcs.is_empty(), "failed adds created WorkerClusters {wcs:?}");
    ensure!(
        secrets.is_empty(),
        "failed adds created Secrets {secrets:?}"
    );
    Ok(())
}

/// A good registration, then list, pause/resume, and remove with its refusals, --drain and --force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_lifecycle() -> anyhow::Result<()> {
    let mut env = Env::start("cluster-lifecycle", cli_env()).await?;
    let r = cluster_lifecycle_body(&env).await;
    env.finish(r)
}

async fn cluster_lifecycle_body(env: &Env) -> anyhow::Result<()> {
    let w = &env.workers[0];
    let kc = w.kubeconfig.display().to_string();
    let wcs: Api<WorkerCluster> = Api::all(env.mgmt_client.clone());
    let secrets: Api<Secret> = Api::namespaced(env.mgmt_client.clone(), "courier-system");

    let out = env
        .courier(&[
            "cluster",
            "add",
            "w1",
            "--cluster-kubeconfig",
            &kc,
            "--label",
            "region=eu",
            "-l",
            "gpu=a100",
            "--weight",
            "2",
        ])
        .await?
        .ok()?;
    ensure!(out.stdout.contains("server v1.36.0"), "{}", out.stdout);
    ensure!(
        out.stdout.contains("Secret courier-system/w1-kubeconfig"),
        "{}",
        out.stdout
    );
    let wc = wcs.get("w1").await?;
    ensure!(wc.spec.weight == 2 && !wc.spec.paused);
    ensure!(wc.spec.kubeconfig_secret_ref.name == "w1-kubeconfig");
    let labels = wc.metadata.labels.clone().unwrap_or_default();
    ensure!(
        labels
            == BTreeMap::from([
                ("region".into(), "eu".into()),
                ("gpu".into(), "a100".into())
            ]),
        "{labels:?}"
    );
    let secret = secrets.get("w1-kubeconfig").await?;
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get("kubeconfig"))
        .ok_or_else(|| anyhow!("Secret has no kubeconfig key"))?;
    let stored: Value =
        serde_saphyr::from_str(std::str::from_utf8(&data.0)?).map_err(|e| anyhow!("{e}"))?;
    ensure!(stored["contexts"].as_array().map(Vec::len) == Some(1));
    ensure!(stored["clusters"].as_array().map(Vec::len) == Some(1));
    ensure!(stored["current-context"] == "w1");

    // A second add of the same name is refused.
    env.courier(&["cluster", "add", "w1", "--cluster-kubeconfig", &kc])
        .await?
        .fails_with(&[
            "WorkerCluster w1 already exists",
            "courier cluster remove w1",
        ])?;

    // An exec kubeconfig is accepted with the flag (and the plugin really runs).
    let token = {
        let text = std::fs::read_to_string(&w.kubeconfig)?;
        let v: Value = serde_saphyr::from_str(&text).map_err(|e| anyhow!("{e}"))?;
        v["users"][0]["user"]["token"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
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
    let exec = env.dir.join("exec.kubeconfig");
    let mut v: Value = serde_saphyr::from_str(&std::fs::read_to_string(&w.kubeconfig)?)
        .map_err(|e| anyhow!("{e}"))?;
    v["users"][0]["user"] = json!({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": plugin.display().to_string()}});
    std::fs::write(&exec, serde_json::to_string(&v)?)?;
    let out = env
        .courier(&[
            "cluster",
            "add",
            "w1-exec",
            "--cluster-kubeconfig",
            &exec.display().to_string(),
            "--allow-exec-kubeconfigs",
            "--paused",
        ])
        .await?
        .ok()?;
    ensure!(
        out.stderr
            .contains("the controller must run with the same flag"),
        "{}",
        out.stderr
    );
    ensure!(wcs.get("w1-exec").await?.spec.paused);

    // list: table and JSON.
    let out = env.courier(&["cluster", "list"]).await?.ok()?;
    for needle in [
        "NAME",
        "READY",
        "REASON",
        "VERSION",
        "MIRRORS",
        "LABELS",
        "AGE",
        "w1",
        "gpu=a100,region=eu",
        "w1-exec",
    ] {
        ensure!(
            out.stdout.contains(needle),
            "cluster list lacks {needle}:\n{}",
            out.stdout
        );
    }
    let out = env
        .courier(&["cluster", "list", "-o", "json"])
        .await?
        .ok()?;
    let list: Value = serde_json::from_str(&out.stdout)?;
    ensure!(list["kind"] == "List", "{list}");
    ensure!(list["items"].as_array().map(Vec::len) == Some(2), "{list}");

    // pause / resume.
    let out = env.courier(&["cluster", "pause", "w1"]).await?.ok()?;
    ensure!(
        out.stdout.contains("Paused WorkerCluster w1"),
        "{}",
        out.stdout
    );
    ensure!(wcs.get("w1").await?.spec.paused);
    let out = env.courier(&["cluster", "pause", "w1"]).await?.ok()?;
    ensure!(out.stdout.contains("already paused"), "{}", out.stdout);
    env.courier(&["cluster", "resume", "w1"]).await?.ok()?;
    ensure!(!wcs.get("w1").await?.spec.paused);
    env.courier(&["cluster", "pause", "nope"])
        .await?
        .fails_with(&["WorkerCluster nope not found", "w1, w1-exec"])?;
    env.courier(&["cluster", "remove", "nope"])
        .await?
        .fails_with(&["WorkerCluster nope not found"])?;

    // remove is refused while a Job is placed there (an origin labelled for w1, as the controller
    // would leave it), then --drain waits for it.
    let placed = |name: &str| {
        let mut j = job(name, &[("sim/outcome", "hang")]);
        j["metadata"]["labels"] = json!({"courier.dev/cluster": "w1"});
        j
    };
    env.create_job("default", placed("running-on-w1")).await?;
    env.courier(&["cluster", "remove", "w1"])
        .await?
        .fails_with(&[
            "WorkerCluster w1 still has 1 current mirror(s) (default/running-on-w1)",
            "--drain",
            "--force",
        ])?;
    ensure!(
        wcs.get_opt("w1").await?.is_some(),
        "refused remove deleted the cluster"
    );
    let drain = {
        let kc = env.mgmt.kubeconfig.clone();
        tokio::spawn(async move {
            courier(
                &kc,
                &["cluster", "remove", "w1", "--drain", "--timeout", "60s"],
            )
            .await
        })
    };
    wait_for("drain to pause w1", Duration::from_secs(30), || {
        let wcs = wcs.clone();
        async move {
            let wc = wcs.get("w1").await.map_err(|e| e.to_string())?;
            if wc.spec.paused {
                Ok(())
            } else {
                Err("not paused".into())
            }
        }
    })
    .await?;
    ensure!(
        !drain.is_finished(),
        "drain returned while a Job was still placed on w1"
    );
    env.delete_job("default", "running-on-w1").await?;
    let out = drain.await??.ok()?;
    ensure!(
        out.stdout
            .contains("Removed WorkerCluster w1 and its Secret courier-system/w1-kubeconfig"),
        "{}",
        out.stdout
    );
    ensure!(wcs.get_opt("w1").await?.is_none());
    ensure!(secrets.get_opt("w1-kubeconfig").await?.is_none());

    // --force removes it at once.
    env.courier(&["cluster", "add", "w1", "--cluster-kubeconfig", &kc])
        .await?
        .ok()?;
    env.create_job("default", placed("still-on-w1")).await?;
    let out = env
        .courier(&["cluster", "remove", "w1", "--force"])
        .await?
        .ok()?;
    ensure!(
        out.stdout.contains("while 1 Job(s) ran there"),
        "{}",
        out.stdout
    );
    ensure!(wcs.get_opt("w1").await?.is_none());
    Ok(())
}

/// `submit` sets managedBy (and says so), refuses what it cannot dispatch; `jobs` and `explain`
/// show a Job nobody has dispatched yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_jobs_explain() -> anyhow::Result<()> {
    let mut env = Env::start(
        "submit",
        EnvOptions {
            workers: 0,
            ..cli_env()
        },
    )
    .await?;
    let r = submit_body(&env).await;
    env.finish(r)
}

async fn submit_body(env: &Env) -> anyhow::Result<()> {
    let mut plain = job("plain", &[]);
    plain["spec"].as_object_mut().map(|s| s.remove("managedBy"));
    let file = env.dir.join("plain.yaml");
    std::fs::write(&file, serde_json::to_string(&plain)?)?;
    let f = file.display().to_string();
    let out = env.courier(&["submit", "-f", &f]).await?.ok()?;
    ensure!(
        out.stderr.contains("spec.managedBy was not set"),
        "{}",
        out.stderr
    );
    ensure!(
        out.stdout
            .contains("job.batch/plain created in namespace default"),
        "{}",
        out.stdout
    );
    let created = env.get_job("default", "plain").await?;
    ensure!(created.spec.and_then(|s| s.managed_by).as_deref() == Some(MANAGED_BY));
    env.courier(&["submit", "-f", &f]).await?.fails_with(&[
        "creating Job default/plain",
        "already exists",
        "change metadata.name",
    ])?;

    let two = env.dir.join("two.yaml");
    let a = serde_json::to_string(&job("multi-a", &[]))?;
    let b = serde_json::to_string(&with_spec(job("multi-b", &[]), "suspend", json!(true)))?;
    std::fs::write(&two, format!("{a}\n---\n{b}\n"))?;
    env.courier(&["submit", "-f", &two.display().to_string(), "-n", "default"])
        .await?
        .ok()?;

    let pod = env.dir.join("pod.yaml");
    std::fs::write(&pod, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")?;
    env.courier(&["submit", "-f", &pod.display().to_string()])
        .await?
        .fails_with(&["is a Pod (v1), not a batch/v1 Job"])?;
    let other = env.dir.join("other.yaml");
    std::fs::write(
        &other,
        serde_json::to_string(&with_spec(
            job("other", &[]),
            "managedBy",
            json!("kueue.x-k8s.io/multikueue"),
        ))?,
    )?;
    env.courier(&["submit", "-f", &other.display().to_string()])
        .await?
        .fails_with(&[
            "spec.managedBy is \"kueue.x-k8s.io/multikueue\"",
            MANAGED_BY,
        ])?;
    env.courier(&["submit", "-f", "/nonexistent.yaml"])
        .await?
        .fails_with(&["cannot read /nonexistent.yaml"])?;
    env.courier(&["submit", "-f", &f, "-n", "nope-ns"])
        .await?
        .fails_with(&["nope-ns"])?;

    let out = env.courier(&["jobs", "-A"]).await?.ok()?;
    for needle in [
        "NAMESPACE",
        "CLUSTER",
        "EPOCH",
        "STATUS",
        "plain",
        "Pending",
        "multi-b",
        "Suspended",
    ] {
        ensure!(
            out.stdout.contains(needle),
            "courier jobs lacks {needle}:\n{}",
            out.stdout
        );
    }
    let out = env.courier(&["explain", "default/plain"]).await?.ok()?;
    ensure!(out.stdout.contains("not dispatched yet"), "{}", out.stdout);
    let out = env.courier(&["explain", "default/multi-b"]).await?.ok()?;
    ensure!(
        out.stdout.contains("the Job is suspended"),
        "{}",
        out.stdout
    );
    env.courier(&["explain", "default/nope"])
        .await?
        .fails_with(&["Job default/nope not found", "courier jobs"])?;
    env.courier(&["explain", "a/b/c"])
        .await?
        .fails_with(&["expected a Job as NAME, NAMESPACE/NAME or job/NAME"])?;
    Ok(())
}

/// `courier run` checks its flags (and their COURIER_* variables) before doing anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_flags_are_checked() -> anyhow::Result<()> {
    let none = Path::new("/nonexistent");
    courier(none, &["run", "--worker-lost-timeout", "5x"])
        .await?
        .fails_with(&["--worker-lost-timeout", "unknown unit \"x\""])?;
    courier_env(none, &["run"], &[("COURIER_CONCURRENCY", "0")])
        .await?
        .fails_with(&["--concurrency"])?;
    courier_env(none, &["run"], &[("COURIER_GC_INTERVAL", "soon")])
        .await?
        .fails_with(&["--gc-interval"])?;
    courier(none, &["run", "--redispatch-on-worker-loss", "sometimes"])
        .await?
        .fails_with(&["always", "never"])?;
    courier(none, &["run", "--metrics-addr", "eight"])
        .await?
        .fails_with(&["HOST:PORT"])?;
    courier(none, &["run", "--kubeconfig", "/nonexistent/kc"])
        .await?
        .fails_with(&["cannot read kubeconfig file /nonexistent/kc"])?;
    courier_env(none, &["run"], &[("COURIER_ORIGIN", "not valid!")])
        .await?
        .fails_with(&["--origin"])?;
    Ok(())
}
