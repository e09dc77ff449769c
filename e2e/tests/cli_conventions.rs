//! The CLI's kubectl conventions against kubesim processes: `-n`/`-A` defaults from the kubeconfig
//! context, `-o table|wide|name|json|yaml` (`kind: List`), `submit -f FILE|-`, `describe job` with
//! both sides' Events, shell completion, and `kubectl courier` as a kubectl plugin. Old spellings,
//! `--server` and `--skip-check` are in `cli_register.rs`, `courier logs` in `cli_logs.rs`.

mod support;

use std::path::{Path, PathBuf};

use anyhow::ensure;
use courier_e2e::{Env, EnvOptions, bin, job};
use serde_json::json;
use support::{T, courier, has, opts, run, yaml};

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
