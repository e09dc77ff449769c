//! `courier submit`, `courier jobs`, `courier explain`: origin Jobs as a user sees them.

use std::io::Read as _;
use std::path::PathBuf;

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use courier_api::reasons::CONDITION_READY;
use courier_api::{
    ANNOTATION_CLUSTER_SELECTOR, ANNOTATION_EPOCH, ANNOTATION_REDISPATCHES, FINALIZER,
    LABEL_CLUSTER, MANAGED_BY, WorkerCluster,
};
use courier_core::phase::{JobPhase, PhaseFacts};
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::Event;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::Value;

use crate::ManagementArgsK;
use crate::cluster::{FIELD_MANAGER, Output};
use crate::util::{self, age, api_message, is_not_found};

#[derive(Args, Debug)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub management: ManagementArgsK,
    /// A YAML (or JSON) file with one or more batch/v1 Jobs; `-` reads standard input.
    pub file: PathBuf,
    /// Namespace for Jobs that do not name one (default: the kubeconfig context's, else `default`).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
}

#[derive(Args, Debug)]
pub struct JobsArgs {
    #[command(flatten)]
    pub management: ManagementArgsK,
    /// Only this namespace (default: all namespaces).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: Output,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub management: ManagementArgsK,
    /// The Job as NAMESPACE/NAME (or NAME with --namespace).
    pub job: String,
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
}

/// Whether a Job has a true Complete or Failed condition.
pub fn is_finished(job: &Job) -> bool {
    finished_as(job).is_some()
}

/// `Complete` or `Failed` (with the condition's reason), if the Job finished.
pub fn finished_as(job: &Job) -> Option<(String, String)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find_map(|c| {
            ((c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
                .then(|| (c.type_.clone(), c.reason.clone().unwrap_or_default()))
        })
}

/// The one-word state of an origin Job, in the vocabulary every Courier view shares.
pub fn phase(job: &Job) -> JobPhase {
    let default = JobStatus::default();
    JobPhase::of(PhaseFacts {
        deleting: job.metadata.deletion_timestamp.is_some(),
        suspend: job.spec.as_ref().and_then(|s| s.suspend) == Some(true),
        status: job.status.as_ref().unwrap_or(&default),
        placed: cluster_of(job).is_some(),
    })
}

pub fn cluster_of(job: &Job) -> Option<String> {
    job.metadata.labels.as_ref()?.get(LABEL_CLUSTER).cloned()
}

pub fn epoch_of(job: &Job) -> Option<String> {
    job.metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_EPOCH)
        .cloned()
}

fn completions(job: &Job) -> String {
    let succeeded = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
    match job.spec.as_ref().and_then(|s| s.completions) {
        Some(c) => format!("{succeeded}/{c}"),
        None => format!("{succeeded}/1"),
    }
}

/// Reads documents from a file (or stdin), parses YAML (JSON is YAML), skips empty documents.
fn read_documents(file: &PathBuf) -> anyhow::Result<(String, Vec<Value>)> {
    let (source, text) = if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading standard input")?;
        ("standard input".to_string(), s)
    } else {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        (file.display().to_string(), text)
    };
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .map_err(|e| anyhow!("{source} is not valid YAML: {e}"))?;
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    if docs.is_empty() {
        bail!("{source} holds no Job (it is empty)");
    }
    Ok((source, docs))
}

/// Checks one document and sets `spec.managedBy` when absent; returns a note for the user when it
/// did. Errors name the document and the fix.
pub fn prepare_job(doc: &mut Value, what: &str) -> anyhow::Result<Option<String>> {
    let Some(obj) = doc.as_object_mut() else {
        bail!("{what} is not a Kubernetes object (a YAML mapping with apiVersion and kind)");
    };
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if api_version != "batch/v1" || kind != "Job" {
        bail!(
            "{what} is a {} ({}), not a batch/v1 Job; courier submit only takes Jobs",
            if kind.is_empty() { "<no kind>" } else { kind },
            if api_version.is_empty() {
                "<no apiVersion>"
            } else {
                api_version
            }
        );
    }
    let meta = obj.get("metadata").and_then(Value::as_object);
    let has_name = meta.is_some_and(|m| {
        m.get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty())
            || m.get("generateName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty())
    });
    if !has_name {
        bail!("{what} has no metadata.name; give the Job a name");
    }
    let spec = obj
        .entry("spec")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(spec) = spec.as_object_mut() else {
        bail!("{what}: spec is not a mapping");
    };
    match spec.get("managedBy") {
        None | Some(Value::Null) => {
            spec.insert("managedBy".into(), Value::String(MANAGED_BY.into()));
            Ok(Some(format!(
                "{what}: spec.managedBy was not set; set it to {MANAGED_BY} so that Courier \
                 dispatches the Job (add it to the manifest to silence this note)"
            )))
        }
        Some(Value::String(s)) if s == MANAGED_BY => Ok(None),
        Some(other) => bail!(
            "{what}: spec.managedBy is {other}; Courier only dispatches Jobs whose spec.managedBy is \
             {MANAGED_BY}: set it to that, or remove the field and let courier submit set it"
        ),
    }
}

fn job_resource() -> ApiResource {
    ApiResource::erase::<Job>(&())
}

pub async fn submit(a: SubmitArgs) -> anyhow::Result<()> {
    let (source, mut docs) = read_documents(&a.file)?;
    let count = docs.len();
    let mut notes = Vec::new();
    for (i, doc) in docs.iter_mut().enumerate() {
        let what = if count == 1 {
            source.clone()
        } else {
            format!("{source} document {}", i + 1)
        };
        if let Some(note) = prepare_job(doc, &what)? {
            notes.push(note);
        }
    }
    let client = a.management.client().await?;
    for n in notes {
        eprintln!("note: {n}");
    }
    let default_ns = a
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let ar = job_resource();
    for doc in docs {
        let doc_ns = doc
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let (Some(d), Some(flag)) = (&doc_ns, &a.namespace)
            && d != flag
        {
            bail!(
                "the Job's metadata.namespace is {d} but --namespace is {flag}; drop one of them"
            );
        }
        let ns = doc_ns.unwrap_or_else(|| default_ns.clone());
        let obj: DynamicObject =
            serde_json::from_value(doc).context("reading the Job's metadata")?;
        let name = obj
            .metadata
            .name
            .clone()
            .or_else(|| obj.metadata.generate_name.clone())
            .unwrap_or_default();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        match api.create(&pp, &obj).await {
            Ok(created) => {
                let name = created.metadata.name.unwrap_or(name);
                println!(
                    "job.batch/{name} created in namespace {ns}; Courier dispatches it to a worker \
                     cluster (follow it with `courier explain {ns}/{name}`)"
                );
            }
            Err(e) => {
                let msg = api_message(&e);
                let hint = match util::api_code(&e) {
                    Some(409) => format!(
                        "; delete it first (`kubectl delete job -n {ns} {name}`) or change metadata.name"
                    ),
                    Some(404) => format!(
                        "; does namespace {ns} exist in the management cluster? Create it or pass \
                         --namespace"
                    ),
                    Some(422) => causes(&e),
                    _ => String::new(),
                };
                bail!("creating Job {ns}/{name}: {msg}{hint}");
            }
        }
    }
    Ok(())
}

fn causes(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s
            .details
            .as_ref()
            .map(|d| {
                d.causes
                    .iter()
                    .map(|c| format!("\n  - {}: {}", c.field, c.message))
                    .collect::<String>()
            })
            .unwrap_or_default(),
        _ => String::new(),
    }
}

pub async fn jobs(a: JobsArgs) -> anyhow::Result<()> {
    let client = a.management.client().await?;
    let api: Api<Job> = match &a.namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let mut items: Vec<Job> = api
        .list(&ListParams::default())
        .await
        .map_err(|e| anyhow!(api_message(&e)))
        .context("listing Jobs in the management cluster")?
        .items
        .into_iter()
        .filter(|j| j.spec.as_ref().and_then(|s| s.managed_by.as_deref()) == Some(MANAGED_BY))
        .collect();
    items.sort_by(|x, y| {
        (&x.metadata.namespace, &x.metadata.name).cmp(&(&y.metadata.namespace, &y.metadata.name))
    });
    if a.output.print_structured(&items)? {
        return Ok(());
    }
    if items.is_empty() {
        println!(
            "No Jobs managed by Courier{}. Submit one with `courier submit FILE`.",
            a.namespace
                .as_ref()
                .map(|n| format!(" in namespace {n}"))
                .unwrap_or_default()
        );
        return Ok(());
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|j| {
            vec![
                j.metadata.namespace.clone().unwrap_or_default(),
                j.metadata.name.clone().unwrap_or_default(),
                cluster_of(j).unwrap_or_else(|| "-".into()),
                epoch_of(j).unwrap_or_else(|| "-".into()),
                phase(j).to_string(),
                completions(j),
                age(j.metadata.creation_timestamp.as_ref().map(|t| t.0)),
            ]
        })
        .collect();
    util::print_table(
        &[
            "NAMESPACE",
            "NAME",
            "CLUSTER",
            "EPOCH",
            "STATUS",
            "COMPLETIONS",
            "AGE",
        ],
        &rows,
    );
    Ok(())
}

fn parse_ref(s: &str, ns: Option<&str>) -> anyhow::Result<(String, String)> {
    match (s.split_once('/'), ns) {
        (Some((n, name)), None) if !n.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((n.to_string(), name.to_string()))
        }
        (Some((n, name)), Some(flag)) if n == flag && !name.is_empty() => {
            Ok((n.to_string(), name.to_string()))
        }
        (None, Some(flag)) if !s.is_empty() => Ok((flag.to_string(), s.to_string())),
        (None, None) if !s.is_empty() => Ok(("default".into(), s.to_string())),
        _ => bail!("expected NAMESPACE/NAME (e.g. default/hello), got {s:?}"),
    }
}

pub async fn explain(a: ExplainArgs) -> anyhow::Result<()> {
    let (ns, name) = parse_ref(&a.job, a.namespace.as_deref())?;
    let client = a.management.client().await?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let job = match jobs.get_opt(&name).await {
        Ok(Some(j)) => j,
        Ok(None) => bail!(
            "Job {ns}/{name} not found in the management cluster; `courier jobs` lists the Jobs \
             Courier manages"
        ),
        Err(e) => return Err(anyhow!(api_message(&e))).context(format!("reading Job {ns}/{name}")),
    };
    print!("{}", explain_text(&client, &job).await);
    Ok(())
}

/// The explanation of one origin Job: what Courier decided and why, its state, recent events.
pub async fn explain_text(client: &Client, job: &Job) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let ns = job.metadata.namespace.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let _ = writeln!(
        out,
        "Job {ns}/{name} (created {} ago)",
        age(job.metadata.creation_timestamp.as_ref().map(|t| t.0))
    );
    let managed_by = job.spec.as_ref().and_then(|s| s.managed_by.clone());
    if managed_by.as_deref() != Some(MANAGED_BY) {
        let _ = writeln!(
            out,
            "  Courier does not manage this Job: spec.managedBy is {}. Only Jobs with spec.managedBy: \
             {MANAGED_BY} are dispatched (the field cannot be changed after creation; resubmit with \
             `courier submit`).",
            managed_by
                .as_deref()
                .unwrap_or("unset (the cluster's own Job controller runs it)")
        );
        return out;
    }
    let annotations = job.metadata.annotations.clone().unwrap_or_default();
    let selector = annotations.get(ANNOTATION_CLUSTER_SELECTOR).cloned();
    let wcs: Vec<WorkerCluster> = Api::<WorkerCluster>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();

    let _ = writeln!(out, "\nPlacement");
    match &selector {
        Some(sel) => {
            let matching: Vec<String> = match courier_core::selector::ClusterSelector::parse(sel) {
                Ok(parsed) => wcs
                    .iter()
                    .filter(|w| parsed.matches(&w.metadata.labels.clone().unwrap_or_default()))
                    .filter_map(|w| w.metadata.name.clone())
                    .collect(),
                Err(e) => {
                    let _ = writeln!(
                        out,
                        "  cluster selector {sel:?} is invalid: {e}; fix the {ANNOTATION_CLUSTER_SELECTOR} annotation"
                    );
                    Vec::new()
                }
            };
            let _ = writeln!(
                out,
                "  cluster selector: {sel} (matches {})",
                if matching.is_empty() {
                    "no registered cluster".to_string()
                } else {
                    matching.join(", ")
                }
            );
        }
        None => {
            let _ = writeln!(out, "  cluster selector: none (any worker cluster)");
        }
    }
    match (cluster_of(job), epoch_of(job)) {
        (Some(cluster), epoch) => {
            let _ = writeln!(
                out,
                "  placed on: {cluster}, epoch {}{}",
                epoch.unwrap_or_else(|| "?".into()),
                annotations
                    .get(ANNOTATION_REDISPATCHES)
                    .map(|r| format!(" (re-dispatched {r} time(s))"))
                    .unwrap_or_default()
            );
            match wcs
                .iter()
                .find(|w| w.metadata.name.as_deref() == Some(&cluster))
            {
                Some(wc) => {
                    let st = wc.status.clone().unwrap_or_default();
                    let ready = st
                        .conditions
                        .iter()
                        .find(|c| c.type_ == CONDITION_READY)
                        .map(|c| format!("Ready={} ({})", c.status, c.reason))
                        .unwrap_or_else(|| "Ready unknown".into());
                    let _ = writeln!(
                        out,
                        "  {cluster}: {ready}, server {}, {} current mirror(s){}",
                        st.server_version.unwrap_or_else(|| "?".into()),
                        st.current_mirrors.unwrap_or(0),
                        if wc.spec.paused { ", paused" } else { "" }
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "  WorkerCluster {cluster} is not registered any more: Courier cannot reach \
                         the mirror there"
                    );
                }
            }
        }
        (None, _) => {
            let why = if finished_as(job).is_some() {
                "never dispatched".to_string()
            } else if job.spec.as_ref().and_then(|s| s.suspend) == Some(true) {
                "not dispatched: the Job is suspended (set spec.suspend=false to dispatch it)"
                    .into()
            } else {
                "not dispatched yet (see the events below for why)".into()
            };
            let _ = writeln!(out, "  {why}");
        }
    }
    if job
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
    {
        let _ = writeln!(
            out,
            "  finalizer {FINALIZER}: deleting the Job deletes its mirror first"
        );
    }

    let status = job.status.clone().unwrap_or_default();
    let _ = writeln!(out, "\nStatus: {}", phase(job));
    let _ = writeln!(
        out,
        "  active {}, ready {}, succeeded {} (of {}), failed {}{}",
        status.active.unwrap_or(0),
        status.ready.unwrap_or(0),
        status.succeeded.unwrap_or(0),
        job.spec
            .as_ref()
            .and_then(|s| s.completions)
            .map(|c| c.to_string())
            .unwrap_or_else(|| "1".into()),
        status.failed.unwrap_or(0),
        status
            .completed_indexes
            .as_ref()
            .filter(|s| !s.is_empty())
            .map(|s| format!(", completed indexes {s}"))
            .unwrap_or_default()
    );
    let conditions = status.conditions.clone().unwrap_or_default();
    if !conditions.is_empty() {
        let rows: Vec<Vec<String>> = conditions
            .iter()
            .map(|c| {
                vec![
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone().unwrap_or_default(),
                    age(c.last_transition_time.as_ref().map(|t| t.0)),
                    c.message.clone().unwrap_or_default(),
                ]
            })
            .collect();
        let _ = writeln!(out, "\nConditions");
        for line in
            util::render_table(&["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], &rows).lines()
        {
            let _ = writeln!(out, "  {line}");
        }
    }

    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await;
    let list = match list {
        Ok(l) => Ok(l),
        Err(_) => events.list(&ListParams::default()).await,
    };
    match list {
        Ok(l) => {
            let mut evs: Vec<Event> = l
                .items
                .into_iter()
                .filter(|e| {
                    e.involved_object.name.as_deref() == Some(&name)
                        && e.involved_object.kind.as_deref() == Some("Job")
                        && (uid.is_empty()
                            || e.involved_object.uid.as_deref().is_none_or(|u| u == uid))
                })
                .collect();
            evs.sort_by_key(event_time);
            let recent: Vec<&Event> = evs.iter().rev().take(15).collect();
            let _ = writeln!(out, "\nEvents (most recent last)");
            if recent.is_empty() {
                let _ = writeln!(out, "  none");
            } else {
                let rows: Vec<Vec<String>> = recent
                    .iter()
                    .rev()
                    .map(|e| {
                        vec![
                            age(event_time(e)),
                            e.type_.clone().unwrap_or_default(),
                            e.reason.clone().unwrap_or_default(),
                            e.count
                                .filter(|c| *c > 1)
                                .map(|c| format!("x{c}"))
                                .unwrap_or_default(),
                            e.message.clone().unwrap_or_default(),
                        ]
                    })
                    .collect();
                for line in
                    util::render_table(&["AGE", "TYPE", "REASON", "COUNT", "MESSAGE"], &rows)
                        .lines()
                {
                    let _ = writeln!(out, "  {line}");
                }
            }
        }
        Err(e) => {
            let _ = writeln!(out, "\nEvents: could not be read ({})", api_message(&e));
        }
    }
    out
}

fn event_time(e: &Event) -> Option<jiff::Timestamp> {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// `explain` of a Job that might not exist, for callers that only have its name.
pub async fn explain_ref(client: &Client, ns: &str, name: &str) -> anyhow::Result<String> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    match jobs.get(name).await {
        Ok(j) => Ok(explain_text(client, &j).await),
        Err(e) if is_not_found(&e) => bail!("Job {ns}/{name} not found"),
        Err(e) => Err(anyhow!(api_message(&e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prepare_sets_managed_by() {
        let mut d =
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"}, "spec": {}});
        let note = prepare_job(&mut d, "f").expect("ok");
        assert!(note.is_some());
        assert_eq!(d["spec"]["managedBy"], MANAGED_BY);
        let note = prepare_job(&mut d, "f").expect("ok");
        assert!(note.is_none());
    }

    #[test]
    fn prepare_errors() {
        let mut d = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}});
        let e = prepare_job(&mut d, "f").unwrap_err().to_string();
        assert!(e.contains("Pod") && e.contains("not a batch/v1 Job"), "{e}");
        let mut d = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {}});
        let e = prepare_job(&mut d, "f").unwrap_err().to_string();
        assert!(e.contains("metadata.name"), "{e}");
        let mut d = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"},
            "spec": {"managedBy": "kueue.x-k8s.io/multikueue"}});
        let e = prepare_job(&mut d, "f").unwrap_err().to_string();
        assert!(e.contains("multikueue") && e.contains(MANAGED_BY), "{e}");
        let mut d = json!([1]);
        assert!(prepare_job(&mut d, "f").is_err());
    }

    #[test]
    fn refs() {
        assert_eq!(
            parse_ref("a/b", None).expect("ok"),
            ("a".to_string(), "b".to_string())
        );
        assert_eq!(
            parse_ref("b", Some("x")).expect("ok"),
            ("x".to_string(), "b".to_string())
        );
        assert_eq!(
            parse_ref("b", None).expect("ok"),
            ("default".to_string(), "b".to_string())
        );
        assert!(parse_ref("a/", None).is_err());
        assert!(parse_ref("a/b/c", None).is_err());
        assert!(parse_ref("a/b", Some("z")).is_err());
    }

    #[test]
    fn phases() {
        let at = |status: serde_json::Value| -> String {
            let j: Job = serde_json::from_value(json!({
                "metadata": {"name": "a", "labels": {"courier.dev/cluster": "w1"}},
                "spec": {"template": {}},
                "status": status,
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            phase(&j).to_string()
        };
        assert_eq!(at(json!({})), "Dispatched");
        assert_eq!(at(json!({"active": 1})), "Running");
        // The last index done, the terminal condition not yet written.
        assert_eq!(at(json!({"active": 0, "succeeded": 1})), "Running");
        assert_eq!(
            at(json!({"succeeded": 1, "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"}]})),
            "Finishing"
        );
        assert_eq!(
            at(json!({"succeeded": 1, "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True"}]})),
            "Complete"
        );
    }
}
