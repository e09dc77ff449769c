//! The CLI's kubectl conventions against kubesim processes: `-n`/`-A` defaults from the kubeconfig
//! context, `-o table|wide|name|json|yaml` (`kind: List`), `submit -f FILE|-`, `describe job` with
//! both sides' Events, the deprecated spellings (still working, with a warning), `cluster add
//! --server` and `--skip-check`, shell completion, and `kubectl courier` as a kubectl plugin.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, anyhow, ensure};
use courier_api::WorkerCluster;
use courier_e2e::{CliOutput, Env, EnvOptions, bin, job, wait_for};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

const T: Duration = Duration::from_secs(60);

fn opts(workers: usize, controller: bool) -> EnvOptions {
    EnvOptions {
        workers,
        start_controller: controller,
        register_workers: false,
        ..Default::default()
    }
}

/// Runs `program ARGS` as a user would: no COURIER_* or KUBECONFIG from the test's environment,
/// a HOME of its own (no ~/.kube/config), `env` on top, `stdin` piped in.
async fn run(
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

async fn courier(args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<CliOutput> {
    run(&bin("courier")?, args, env, None).await
}

fn has(out: &CliOutput, needles: &[&str]) -> anyhow::Result<()> {
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

fn yaml(text: &str) -> anyhow::Result<Value> {
    serde_saphyr::from_str(text).map_err(|e| anyhow!("not YAML ({e}):\n{text}"))
}

/// The management kubeconfig with two contexts: `team` (namespace team-a, current) and `plain`
/// (no namespace).
fn contexts_kubeconfig(env: &Env) -> anyhow::Result<PathBuf> {
    let mut v = yaml(&std::fs::read_to_string(&env.mgmt.kubeconfig)?)?;
    let base = v["contexts"][0]["context"].clone();
    let mut team = base.clone();
    team["namespace"] = json!("team-a");
    v["contexts"] = json!([
        {"name": "team", "context": team},
        {"name": "plain", "context": base},
    ]);
    v["current-context"] = json!("team");
    let path = env.dir.join("contexts.kubeconfig");
    std::fs::write(&path, serde_json::to_string_pretty(&v)?)?;
    Ok(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_outputs_and_submit_follow_kubectl() -> anyhow::Result<()> {
    let mut env = Env::start("cli-namespaces", opts(0, false)).await?;
    let r = namespaces_body(&env).await;
    env.finish(r)
}

async fn namespaces_body(env: &Env) -> anyhow::Result<()> {
    let kc = contexts_kubeconfig(env)?;
    let kc_s = kc.display().to_string();
    let with_kubeconfig = [("KUBECONFIG", kc_s.as_str())];
    env.create_namespace("team-a").await?;
    env.create_job("default", job("in-default", &[])).await?;

    // submit -f - : several documents from stdin, one without managedBy (added, with a notice),
    // landing in the context's namespace.
    let mut plain = job("in-team", &[]);
    plain["spec"].as_object_mut().map(|s| s.remove("managedBy"));
    let stdin = format!(
        "{}\n---\n{}\n",
        serde_json::to_string(&plain)?,
        serde_json::to_string(&job("in-team-2", &[]))?
    );
    let out = run(
        &bin("courier")?,
        &["submit", "-f", "-"],
        &with_kubeconfig,
        Some(&stdin),
    )
    .await?
    .ok()?;
    has(
        &out,
        &[
            "job.batch/in-team created in namespace team-a",
            "job.batch/in-team-2 created in namespace team-a",
        ],
    )?;
    ensure!(
        out.stderr
            .contains("standard input document 1: spec.managedBy was not set")
            && !out.stderr.contains("document 2"),
        "{}",
        out.stderr
    );
    ensure!(
        env.get_job("team-a", "in-team")
            .await?
            .spec
            .and_then(|s| s.managed_by)
            .as_deref()
            == Some(courier_api::MANAGED_BY)
    );
    // A document naming another namespace than -n is refused before anything is created.
    let other = env.dir.join("other-ns.yaml");
    let mut j = job("elsewhere", &[]);
    j["metadata"]["namespace"] = json!("default");
    std::fs::write(&other, serde_json::to_string(&j)?)?;
    courier(
        &["submit", "-f", &other.display().to_string(), "-n", "team-a"],
        &with_kubeconfig,
    )
    .await?
    .fails_with(&["metadata.namespace is default but --namespace is team-a"])?;
    courier(&["submit"], &with_kubeconfig)
        .await?
        .fails_with(&["-f FILE"])?;

    // -n defaults to the context's namespace; -n and -A as in kubectl.
    let out = courier(&["jobs"], &with_kubeconfig).await?.ok()?;
    has(&out, &["NAME", "CLUSTER", "in-team", "in-team-2"])?;
    ensure!(
        !out.stdout.contains("in-default") && !out.stdout.contains("NAMESPACE"),
        "{}",
        out.stdout
    );
    let out = courier(&["jobs", "-n", "default"], &with_kubeconfig)
        .await?
        .ok()?;
    ensure!(
        out.stdout.contains("in-default") && !out.stdout.contains("in-team"),
        "{}",
        out.stdout
    );
    let out = courier(&["jobs", "--context", "plain"], &with_kubeconfig)
        .await?
        .ok()?;
    ensure!(
        out.stdout.contains("in-default") && !out.stdout.contains("in-team"),
        "--context plain has no namespace: default\n{}",
        out.stdout
    );
    let out = courier(&["jobs", "-A"], &with_kubeconfig).await?.ok()?;
    has(
        &out,
        &["NAMESPACE", "team-a", "in-team", "default", "in-default"],
    )?;
    // --kubeconfig works without $KUBECONFIG.
    let out = courier(&["jobs", "--kubeconfig", &kc_s, "-o", "name"], &[])
        .await?
        .ok()?;
    ensure!(
        out.stdout == "job.batch/in-team\njob.batch/in-team-2\n",
        "{}",
        out.stdout
    );
    let out = courier(&["jobs", "-n", "nobody-here"], &with_kubeconfig)
        .await?
        .ok()?;
    ensure!(out.stdout.is_empty(), "{}", out.stdout);
    ensure!(
        out.stderr
            .contains("No Jobs managed by Courier in namespace nobody-here"),
        "{}",
        out.stderr
    );

    // -o wide|json|yaml, --phase.
    let out = courier(&["jobs", "-o", "wide"], &with_kubeconfig)
        .await?
        .ok()?;
    has(
        &out,
        &["CONTAINERS", "IMAGES", "CLUSTER-SELECTOR", "busybox:1.36"],
    )?;
    for format in ["json", "yaml"] {
        let out = courier(&["jobs", "-A", "-o", format], &with_kubeconfig)
            .await?
            .ok()?;
        let list = yaml(&out.stdout)?;
        ensure!(
            list["kind"] == "List" && list["apiVersion"] == "v1",
            "{list}"
        );
        let items = list["items"].as_array().cloned().unwrap_or_default();
        ensure!(items.len() == 3, "{format}: {list}");
        ensure!(
            items
                .iter()
                .all(|i| i["kind"] == "Job" && i["apiVersion"] == "batch/v1"),
            "{list}"
        );
    }
    let out = courier(
        &["jobs", "-A", "--phase", "pending", "-o", "name"],
        &with_kubeconfig,
    )
    .await?
    .ok()?;
    ensure!(out.stdout.lines().count() == 3, "{}", out.stdout);
    let out = courier(
        &["jobs", "-A", "--phase", "Complete", "-o", "name"],
        &with_kubeconfig,
    )
    .await?
    .ok()?;
    ensure!(out.stdout.is_empty(), "{}", out.stdout);
    courier(&["jobs", "--phase", "done"], &with_kubeconfig)
        .await?
        .fails_with(&["unknown phase \"done\"", "running"])?;
    courier(&["jobs", "-o", "jsonpath"], &with_kubeconfig)
        .await?
        .fails_with(&["table", "wide", "name", "json", "yaml"])?;

    // cluster list: every format, even empty.
    let out = courier(&["cluster", "list"], &with_kubeconfig)
        .await?
        .ok()?;
    ensure!(
        out.stdout.is_empty() && out.stderr.contains("--cluster-kubeconfig"),
        "{out:?}",
        out = (&out.stdout, &out.stderr)
    );
    let out = courier(&["cluster", "list", "-o", "yaml"], &with_kubeconfig)
        .await?
        .ok()?;
    ensure!(yaml(&out.stdout)?["items"] == json!([]), "{}", out.stdout);

    // describe and logs in the context's namespace, before anything is dispatched.
    let out = courier(&["describe", "job", "in-team"], &with_kubeconfig)
        .await?
        .ok()?;
    has(
        &out,
        &[
            "Namespace:   team-a",
            "Status:      Pending",
            "not dispatched yet",
            "Events (management cluster)",
        ],
    )?;
    let out = courier(&["explain", "team-a/in-team"], &with_kubeconfig)
        .await?
        .ok()?;
    has(&out, &["Name:        in-team", "not dispatched yet"])?;
    courier(&["describe", "job/nope"], &with_kubeconfig)
        .await?
        .fails_with(&["Job team-a/nope not found", "courier jobs -n team-a"])?;
    courier(&["describe", "pod", "x"], &with_kubeconfig)
        .await?
        .fails_with(&["courier describe job NAME"])?;
    courier(&["logs", "in-team"], &with_kubeconfig)
        .await?
        .fails_with(&[
            "Job team-a/in-team is not placed on a worker yet (phase Pending)",
            "courier describe job in-team -n team-a",
        ])?;
    Ok(())
}

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
    // `cluster kubeconfig --kubeconfig ADMIN`: read as the worker's (kubesim has no token Secret,
    // so it stops there, naming it).
    courier(&["cluster", "kubeconfig", "--kubeconfig", &w], &[])
        .await?
        .fails_with(&[
            "--cluster-kubeconfig FILE",
            "Secret courier-system/courier-dispatcher-token",
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_shows_both_sides() -> anyhow::Result<()> {
    let mut env = Env::start(
        "cli-describe",
        EnvOptions {
            workers: 1,
            ..Default::default()
        },
    )
    .await?;
    let r = describe_body(&env).await;
    env.finish(r)
}

async fn describe_body(env: &Env) -> anyhow::Result<()> {
    let m = env.mgmt.kubeconfig.display().to_string();
    env.create_job("default", job("hello", &[])).await?;
    env.wait_finished("default", "hello", T).await?;
    let out = courier(&["describe", "job", "hello", "--kubeconfig", &m], &[])
        .await?
        .ok()?;
    has(
        &out,
        &[
            "Name:        hello",
            "Status:      Complete",
            "placed on: w1, epoch 1",
            "w1: Ready=True (Connected)",
            "Mirror on w1",
            "  Job default/hello at https://",
            "  Status: Complete",
            "Events (management cluster), most recent last",
            "Dispatched",
            "Events (worker w1), most recent last",
        ],
    )?;
    // The mirror's own conditions are shown under it.
    let mirror_part = out
        .stdout
        .split("Mirror on w1")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    ensure!(
        mirror_part
            .lines()
            .any(|l| l.trim_start().starts_with("Complete ") && l.contains(" True ")),
        "{mirror_part}"
    );

    // A user who may not read Secrets in courier-system still gets the origin side, and is told why
    // the mirror is missing; `courier logs` refuses with the same reason.
    env.mgmt
        .add_token(
            "viewer-token",
            "viewer",
            Some(json!({"allow": [
                {"verbs": ["get", "list"], "apiGroups": ["batch"], "resources": ["jobs"]},
                {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["events"]},
                {"verbs": ["get", "list"], "apiGroups": ["courier.dev"], "resources": ["workerclusters"]}
            ]})),
        )
        .await?;
    let viewer = env.dir.join("viewer.kubeconfig");
    std::fs::write(&viewer, env.mgmt.kubeconfig_with_token("viewer-token")?)?;
    let v = viewer.display().to_string();
    let out = courier(&["describe", "job", "hello", "--kubeconfig", &v], &[])
        .await?
        .ok()?;
    has(
        &out,
        &[
            "placed on: w1, epoch 1",
            "not read: courier describe reads worker w1 with Courier's credentials",
            "get secrets",
        ],
    )?;
    courier(&["logs", "hello", "--kubeconfig", &v], &[])
        .await?
        .fails_with(&[
            "Secret courier-system/w1-kubeconfig",
            "`get secrets` in namespace courier-system",
        ])?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_scripts() -> anyhow::Result<()> {
    for shell in ["bash", "zsh", "fish"] {
        let out = courier(&["completion", shell], &[]).await?.ok()?;
        for word in [
            "cluster",
            "submit",
            "jobs",
            "describe",
            "logs",
            "completion",
        ] {
            ensure!(out.stdout.contains(word), "{shell} script lacks {word}");
        }
    }
    // The bash script really loads and completes the subcommands.
    let script = courier(&["completion", "bash"], &[]).await?.ok()?.stdout;
    let path = std::env::temp_dir().join(format!("courier-completion-{}.bash", std::process::id()));
    std::fs::write(&path, script)?;
    let probe = format!(
        "source {}; COMP_WORDS=(courier desc); COMP_CWORD=1; COMP_LINE='courier desc'; \
         COMP_POINT=${{#COMP_LINE}}; _courier courier desc courier; echo \"${{COMPREPLY[@]}}\"",
        path.display()
    );
    let out = run(Path::new("bash"), &["-c", &probe], &[], None)
        .await?
        .ok()?;
    let _ = std::fs::remove_file(&path);
    ensure!(
        out.stdout.trim() == "describe",
        "bash completed {:?}",
        out.stdout
    );
    courier(&["completion", "powershell"], &[])
        .await?
        .fails_with(&["bash", "zsh", "fish"])?;
    Ok(())
}

/// kubectl runs `kubectl-courier` from PATH for `kubectl courier ...`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_as_a_kubectl_plugin() -> anyhow::Result<()> {
    let mut env = Env::start("cli-plugin", opts(0, false)).await?;
    let r = plugin_body(&env).await;
    env.finish(r)
}

async fn plugin_body(env: &Env) -> anyhow::Result<()> {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let plugins = env.dir.join("plugins");
    std::fs::create_dir_all(&plugins)?;
    std::os::unix::fs::symlink(bin("courier")?, plugins.join("kubectl-courier"))?;
    let path = format!(
        "{}:{}",
        plugins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env_vars = [("PATH", path.as_str())];
    let k = Path::new(&kubectl);
    let out = run(k, &["plugin", "list"], &env_vars, None).await?;
    ensure!(
        out.stdout.contains("kubectl-courier"),
        "kubectl plugin list does not find kubectl-courier (is kubectl installed? set $KUBECTL):\n{}\n{}",
        out.stdout,
        out.stderr
    );
    let out = run(k, &["courier", "--help"], &env_vars, None)
        .await?
        .ok()?;
    has(
        &out,
        &["Usage: kubectl courier [OPTIONS] <COMMAND>", "describe"],
    )?;
    let out = run(k, &["courier", "jobs", "--help"], &env_vars, None)
        .await?
        .ok()?;
    has(&out, &["Usage: kubectl courier jobs [OPTIONS]"])?;
    env.create_job("default", job("via-kubectl", &[])).await?;
    let m = env.mgmt.kubeconfig.display().to_string();
    let out = run(
        k,
        &["courier", "jobs", "--kubeconfig", &m, "-o", "name"],
        &env_vars,
        None,
    )
    .await?
    .ok()?;
    ensure!(out.stdout == "job.batch/via-kubectl\n", "{}", out.stdout);
    Ok(())
}
