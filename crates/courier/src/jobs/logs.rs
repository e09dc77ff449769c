//! `courier logs JOB`: the logs of the mirror's pods, read from the worker the Job runs on with
//! Courier's credentials there (the kubeconfig in its WorkerCluster's Secret).
//!
//! Pods are those labelled `batch.kubernetes.io/job-name=<name>` in the Job's namespace on the
//! worker whose `batch.kubernetes.io/controller-uid` is the mirror's UID (so a pod of an older
//! mirror of the same name is never shown); `--index N` keeps the pod of completion index N. With
//! several pods every line is prefixed `[pod/NAME/CONTAINER]`, like `kubectl logs -l ... --prefix`.

use std::io::Write as _;
use std::time::Duration;

use anyhow::{anyhow, bail};
use clap::Args;
use futures::{AsyncBufReadExt as _, StreamExt as _};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, LogParams};

use super::mirror::{self, Mirror};
use super::{
    epoch_of, finished_as, finished_at, get_origin, is_managed, parse_ref, phase, phase_of,
};
use crate::management::ManagementArgs;
use crate::util::{self, age, api_message, parse_duration};

/// Label the Job controller puts on a Job's pods: the Job's name.
pub const LABEL_JOB_NAME: &str = "batch.kubernetes.io/job-name";
/// Label the Job controller puts on a Job's pods: the Job's UID.
pub const LABEL_CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
/// Label (and annotation) on the pods of an Indexed Job: the pod's completion index.
pub const LABEL_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// Annotation naming the container kubectl shows by default.
pub const ANNOTATION_DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    courier logs hello\n  \
    courier logs job/train -n ml -c trainer --index 3 -f\n  \
    courier logs hello --tail 20\n\n\
    The logs are read from the worker with Courier's credentials there, taken from the WorkerCluster's \
    kubeconfig Secret: you need `get secrets` in Courier's namespace of the management cluster, and the \
    worker chart must grant `list pods` and `get pods/log` (--set cliReads=true). See docs/security.md.")]
pub struct LogsArgs {
    #[command(flatten)]
    pub management: ManagementArgs,
    /// The Job: NAME (in -n or the context's namespace), NAMESPACE/NAME or job/NAME.
    #[arg(value_name = "JOB")]
    pub job: String,
    /// The container to show [default: the pod's kubectl.kubernetes.io/default-container, else its
    /// first container].
    #[arg(long, short = 'c', value_name = "NAME")]
    pub container: Option<String>,
    /// Only the pod of this completion index (Indexed Jobs).
    #[arg(long, value_name = "N")]
    pub index: Option<u32>,
    /// Keep printing new lines from every pod until they stop (Ctrl-C ends it).
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Only the last N lines of each log (-1 = all of it).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true, value_name = "N",
          value_parser = clap::value_parser!(i64).range(-1..))]
    pub tail: i64,
    /// Prefix every line with its pod and container (always on with several pods).
    #[arg(long)]
    pub prefix: bool,
    /// How long to wait for each answer from the clusters.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub request_timeout: Duration,
}

/// A pod's completion index, from its label or annotation.
pub fn completion_index(pod: &Pod) -> Option<u32> {
    let m = &pod.metadata;
    m.labels
        .as_ref()
        .and_then(|l| l.get(LABEL_COMPLETION_INDEX))
        .or_else(|| m.annotations.as_ref()?.get(LABEL_COMPLETION_INDEX))
        .and_then(|v| v.parse().ok())
}

/// The mirror's pods among `pods` (its controller-uid), of completion index `index` when given,
/// ordered by index, then creation, then name.
pub fn select_pods(pods: Vec<Pod>, mirror_uid: &str, index: Option<u32>) -> Vec<Pod> {
    let mut out: Vec<Pod> = pods
        .into_iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_CONTROLLER_UID))
                .is_some_and(|u| u == mirror_uid)
        })
        .filter(|p| index.is_none() || completion_index(p) == index)
        .collect();
    out.sort_by(|a, b| {
        let key = |p: &Pod| {
            (
                completion_index(p),
                p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                p.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    out
}

/// The container to read in `pod`: `wanted`, else the default-container annotation, else the
/// first; with a note on stderr when several were there to choose from (as kubectl says).
pub fn pick_container(pod: &Pod, wanted: Option<&str>) -> anyhow::Result<(String, Option<String>)> {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let names: Vec<String> = spec.containers.iter().map(|c| c.name.clone()).collect();
    let init: Vec<String> = spec
        .init_containers
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.name)
        .collect();
    if let Some(w) = wanted {
        if names.iter().chain(&init).any(|n| n == w) {
            return Ok((w.to_string(), None));
        }
        bail!(
            "container {w:?} is not in pod {pod_name}; its containers are: {}{}; pass -c with one of them",
            names.join(", "),
            if init.is_empty() {
                String::new()
            } else {
                format!(" (init containers: {})", init.join(", "))
            }
        );
    }
    let default = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_DEFAULT_CONTAINER))
        .filter(|d| names.contains(d))
        .cloned();
    let Some(chosen) = default.or_else(|| names.first().cloned()) else {
        bail!("pod {pod_name} has no containers");
    };
    let note = (names.len() > 1).then(|| {
        format!(
            "Defaulted container {chosen:?} out of: {} (pass -c to choose)",
            names.join(", ")
        )
    });
    Ok((chosen, note))
}

/// `[pod/NAME/CONTAINER] `, kubectl's `--prefix`.
pub fn prefix(pod: &str, container: &str) -> String {
    format!("[pod/{pod}/{container}] ")
}

/// Why a placed Job has no mirror to read logs from, and what to do.
pub fn mirror_gone(origin: &Job, cluster: &str, epoch: &str, stranger: bool) -> String {
    let ns = origin.metadata.namespace.as_deref().unwrap_or_default();
    let name = origin.metadata.name.as_deref().unwrap_or_default();
    let describe = format!("`courier describe job {name} -n {ns}`");
    if stranger {
        return format!(
            "Job {ns}/{name} on worker {cluster} is not this Job's current mirror (epoch {epoch}); \
             Courier is replacing it: try again shortly, and see {describe}"
        );
    }
    match (finished_as(origin), finished_at(origin)) {
        (Some((how, _)), at) => format!(
            "Job {ns}/{name} ran on worker {cluster} (epoch {epoch}) and is {how}{}; its mirror is \
             gone there, and its pods and logs with it: Courier deletes a finished mirror after \
             `courier run --finished-mirror-ttl` (default 10m). {describe} shows its status and \
             Events",
            at.map(|t| format!(" since {} ago", age(Some(t))))
                .unwrap_or_default()
        ),
        (None, _) => format!(
            "the mirror of Job {ns}/{name} is not on worker {cluster} (epoch {epoch}): Courier \
             (re)creates it on its next reconcile; {describe} says why, then try again"
        ),
    }
}

/// The error for a worker that refuses what `courier logs` reads there.
fn worker_refused(cluster: &str, what: &str, e: &kube::Error) -> anyhow::Error {
    if util::api_code(e) == Some(403) {
        anyhow!(
            "worker {cluster} refused {what} to Courier's ServiceAccount ({}): `courier logs` needs \
             `list pods` and `get pods/log` there: install or upgrade the courier-worker chart with \
             --set cliReads=true (docs/security.md)",
            api_message(e)
        )
    } else {
        anyhow!("{what} on worker {cluster}: {}", api_message(e))
    }
}

/// Prints to stdout; false once the reader went away (`| head`): then stop quietly.
fn emit(line: &str) -> bool {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).is_ok()
}

pub async fn logs(a: LogsArgs) -> anyhow::Result<()> {
    let m = a.management.connect().await?;
    let (ns, name) = parse_ref(&a.job, a.management.namespace.as_deref(), &m.namespace)?;
    let origin = get_origin(&m.client, &ns, &name).await?;
    if !is_managed(&origin) {
        bail!(
            "Courier does not manage Job {ns}/{name} (its spec.managedBy is not {}): its pods run in \
             the management cluster; use `kubectl logs job/{name} -n {ns}`",
            courier_api::MANAGED_BY
        );
    }
    let timeout = a.request_timeout;
    let read_timeout = (!a.follow).then_some(timeout);
    let describe = format!("`courier describe job {name} -n {ns}`");
    let (worker, mirror) = match mirror::find(&m, &origin, "courier logs", timeout, read_timeout)
        .await?
    {
        Mirror::NotPlaced => bail!(
            "Job {ns}/{name} is not placed on a worker yet (phase {}): it has no pods to read; \
             {describe} says why",
            phase(&origin)
        ),
        Mirror::UnknownCluster { cluster } => bail!(
            "Job {ns}/{name} was placed on worker {cluster}, which is not registered any more \
             (`courier cluster list`): its logs cannot be read through Courier; {describe}"
        ),
        Mirror::NotReady { cluster, why } => bail!(
            "Job {ns}/{name} runs on worker {cluster}, which is not Ready ({why}): its logs cannot \
             be read now; try again when `courier cluster list` shows it Ready"
        ),
        Mirror::Reached {
            worker,
            epoch,
            mirror,
            stranger,
        } => match mirror {
            Some(mj) => (worker, *mj),
            None => bail!("{}", mirror_gone(&origin, &worker.name, &epoch, stranger)),
        },
    };
    let cluster = worker.name.clone();
    let mirror_uid = mirror.metadata.uid.clone().unwrap_or_default();
    let pods_api: Api<Pod> = Api::namespaced(worker.client.clone(), &ns);
    let listed = tokio::time::timeout(
        timeout,
        pods_api.list(&ListParams::default().labels(&format!("{LABEL_JOB_NAME}={name}"))),
    )
    .await
    .map_err(|_| {
        anyhow!(
            "worker {cluster} did not answer listing pods within {}",
            util::short_duration(timeout)
        )
    })?
    .map_err(|e| {
        worker_refused(
            &cluster,
            &format!("listing the pods of Job {ns}/{name}"),
            &e,
        )
    })?
    .items;
    let ours = select_pods(listed, &mirror_uid, None);
    let pods = match a.index {
        Some(i) => {
            let indexes: Vec<String> = ours
                .iter()
                .filter_map(completion_index)
                .map(|i| i.to_string())
                .collect();
            let chosen = select_pods(ours, &mirror_uid, Some(i));
            if chosen.is_empty() {
                bail!(
                    "no pod of Job {ns}/{name} on worker {cluster} has completion index {i} ({}); \
                     drop --index or pick another",
                    if indexes.is_empty() {
                        "its pods carry no completion index: it is not an Indexed Job, or has no \
                         pods"
                            .to_string()
                    } else {
                        format!("indexes there: {}", indexes.join(", "))
                    }
                );
            }
            chosen
        }
        None => ours,
    };
    if pods.is_empty() {
        let how = phase_of(&mirror, true);
        if finished_as(&mirror).is_some() {
            bail!(
                "Job {ns}/{name} ran on worker {cluster} (epoch {}, {how}) and its pods are gone \
                 there (deleted after it finished), and their logs with them; {describe} shows its \
                 status and Events",
                epoch_of(&origin).unwrap_or_default()
            );
        }
        bail!(
            "Job {ns}/{name} runs on worker {cluster} (mirror created {} ago, {how}) but has no pods \
             there yet; try again shortly, or see {describe}",
            age(mirror.metadata.creation_timestamp.as_ref().map(|t| t.0))
        );
    }
    let mut targets = Vec::new();
    for p in &pods {
        let (container, note) = pick_container(p, a.container.as_deref())?;
        if let Some(n) = note {
            eprintln!("{n}");
        }
        targets.push((p.metadata.name.clone().unwrap_or_default(), container));
    }
    let prefixed = a.prefix || targets.len() > 1;
    let params = |container: &str| LogParams {
        container: Some(container.to_string()),
        follow: a.follow,
        tail_lines: (a.tail >= 0).then_some(a.tail),
        ..Default::default()
    };
    let mut failures = Vec::new();
    if a.follow {
        let mut streams = Vec::new();
        for (pod, container) in &targets {
            match pods_api.log_stream(pod, &params(container)).await {
                Ok(r) => {
                    let tag = if prefixed {
                        prefix(pod, container)
                    } else {
                        String::new()
                    };
                    let who = format!("pod {pod} container {container}");
                    streams.push(
                        r.lines()
                            .map(move |l| (tag.clone(), who.clone(), l))
                            .boxed(),
                    );
                }
                Err(e) => failures.push(worker_refused(
                    &cluster,
                    &format!("reading the log of pod {pod} (container {container})"),
                    &e,
                )),
            }
        }
        if streams.is_empty() {
            return Err(first_failure(failures));
        }
        report(&failures);
        let mut all = futures::stream::select_all(streams);
        while let Some((tag, who, line)) = all.next().await {
            match line {
                Ok(l) => {
                    if !emit(&format!("{tag}{l}")) {
                        return Ok(());
                    }
                }
                Err(e) => eprintln!("warning: the log of {who} broke off: {e}"),
            }
        }
        return Ok(());
    }
    let mut printed = 0;
    for (pod, container) in &targets {
        match pods_api.logs(pod, &params(container)).await {
            Ok(text) => {
                printed += 1;
                let tag = if prefixed {
                    prefix(pod, container)
                } else {
                    String::new()
                };
                for l in text.lines() {
                    if !emit(&format!("{tag}{l}")) {
                        return Ok(());
                    }
                }
            }
            Err(e) => failures.push(worker_refused(
                &cluster,
                &format!("reading the log of pod {pod} (container {container})"),
                &e,
            )),
        }
    }
    if printed == 0 {
        return Err(first_failure(failures));
    }
    report(&failures);
    Ok(())
}

fn first_failure(failures: Vec<anyhow::Error>) -> anyhow::Error {
    failures
        .into_iter()
        .next()
        .unwrap_or_else(|| anyhow!("no pod log could be read"))
}

fn report(failures: &[anyhow::Error]) {
    for f in failures {
        eprintln!("warning: {f:#}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(name: &str, uid: &str, index: Option<u32>, created: &str, containers: &[&str]) -> Pod {
        let mut labels = json!({LABEL_JOB_NAME: "j", LABEL_CONTROLLER_UID: uid});
        if let Some(i) = index {
            labels[LABEL_COMPLETION_INDEX] = json!(i.to_string());
        }
        let cs: Vec<Value> = containers
            .iter()
            .map(|c| json!({"name": c, "image": "busybox"}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels, "creationTimestamp": created},
            "spec": {"containers": cs},
        }))
        .expect("pod")
    }

    fn names(pods: &[Pod]) -> Vec<String> {
        pods.iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    }

    #[test]
    fn only_the_mirrors_pods_by_index_then_age() {
        let t1 = "2025-01-01T00:00:01Z";
        let t2 = "2025-01-01T00:00:02Z";
        let pods = vec![
            pod("j-1-b", "m", Some(1), t2, &["main"]),
            pod("j-0-x", "m", Some(0), t2, &["main"]),
            pod("j-1-a", "m", Some(1), t1, &["main"]),
            // A pod of an older mirror of the same name (another controller-uid): never shown.
            // Break the uid filter in select_pods and this test fails.
            pod("j-0-old", "old-mirror", Some(0), t1, &["main"]),
        ];
        assert_eq!(
            names(&select_pods(pods.clone(), "m", None)),
            ["j-0-x", "j-1-a", "j-1-b"]
        );
        assert_eq!(
            names(&select_pods(pods.clone(), "m", Some(1))),
            ["j-1-a", "j-1-b"]
        );
        assert!(select_pods(pods, "m", Some(7)).is_empty());
        // The index may come from the annotation only.
        let mut p = pod("k", "m", None, t1, &["main"]);
        p.metadata.annotations =
            Some([(LABEL_COMPLETION_INDEX.to_string(), "4".to_string())].into());
        assert_eq!(completion_index(&p), Some(4));
    }

    #[test]
    fn containers_like_kubectl() {
        let p = pod("p", "m", None, "2025-01-01T00:00:00Z", &["main", "side"]);
        let (c, note) = pick_container(&p, None).expect("default");
        assert_eq!(c, "main");
        assert!(
            note.expect("a note with two containers")
                .contains("main, side")
        );
        assert_eq!(pick_container(&p, Some("side")).expect("ok").0, "side");
        let e = pick_container(&p, Some("nope")).unwrap_err().to_string();
        assert!(
            e.contains("\"nope\" is not in pod p") && e.contains("main, side") && e.contains("-c"),
            "{e}"
        );
        let mut d = p.clone();
        d.metadata.annotations =
            Some([(ANNOTATION_DEFAULT_CONTAINER.to_string(), "side".to_string())].into());
        assert_eq!(pick_container(&d, None).expect("ok").0, "side");
        let one = pod("q", "m", None, "2025-01-01T00:00:00Z", &["only"]);
        assert_eq!(
            pick_container(&one, None).expect("ok"),
            ("only".to_string(), None)
        );
        assert_eq!(prefix("p", "main"), "[pod/p/main] ");
    }

    #[test]
    fn gone_says_when_where_and_what_next() {
        let origin: Job = serde_json::from_value(json!({
            "metadata": {"name": "hello", "namespace": "default"},
            "spec": {"template": {}},
            "status": {"conditions": [{"type": "Complete", "status": "True",
                "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
        }))
        .expect("job");
        let e = mirror_gone(&origin, "w1", "2", false);
        assert!(
            e.contains("ran on worker w1 (epoch 2) and is Complete since"),
            "{e}"
        );
        assert!(
            e.contains("--finished-mirror-ttl")
                && e.contains("courier describe job hello -n default"),
            "{e}"
        );
        let mut running = origin.clone();
        running.status = None;
        let e = mirror_gone(&running, "w1", "2", false);
        assert!(
            e.contains("not on worker w1") && e.contains("courier describe"),
            "{e}"
        );
        assert!(mirror_gone(&running, "w1", "2", true).contains("not this Job's current mirror"));
    }
}
