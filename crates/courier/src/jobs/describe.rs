//! `courier describe job NAME` (alias `courier explain`): where a Job runs and why, its conditions
//! and its mirror's, and the Events of both sides.

use std::fmt::Write as _;
use std::time::Duration;

use clap::Args;
use courier_api::reasons::{CONDITION_POLICY_INSTALLED, CONDITION_READY};
use courier_api::{
    ANNOTATION_CLUSTER_SELECTOR, ANNOTATION_REDISPATCHES, FINALIZER, MANAGED_BY, WorkerCluster,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace};
use kube::api::ListParams;
use kube::{Api, Client};

use super::mirror::{self, Mirror};
use super::{cluster_of, epoch_of, finished_as, get_origin, parse_ref, phase, phase_of};
use crate::management::{Management, ManagementArgs};
use crate::output::indented_table;
use crate::util::{age, api_message, parse_duration};

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    courier describe job hello\n  \
    courier describe job/hello -n team-a\n  \
    courier describe job team-a/hello")]
pub struct DescribeArgs {
    #[command(flatten)]
    pub management: ManagementArgs,
    /// What to describe: `job` (then NAME), or `job/NAME`.
    #[arg(value_name = "TYPE[/NAME]")]
    pub kind: String,
    /// The Job: NAME (in -n or the context's namespace) or NAMESPACE/NAME.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// How long to wait for each answer from the worker the Job runs on.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub request_timeout: Duration,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub management: ManagementArgs,
    /// The Job: NAME (in -n or the context's namespace), NAMESPACE/NAME or job/NAME.
    #[arg(value_name = "JOB")]
    pub job: String,
    /// How long to wait for each answer from the worker the Job runs on.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub request_timeout: Duration,
}

/// The Job named by `describe TYPE [NAME]`.
fn job_name(kind: &str, name: Option<&str>) -> anyhow::Result<String> {
    let (t, inline) = match kind.split_once('/') {
        Some((t, rest)) => (t, Some(rest)),
        None => (kind, None),
    };
    if !matches!(t, "job" | "jobs" | "job.batch" | "jobs.batch") {
        anyhow::bail!(
            "courier describe shows Jobs (`courier describe job NAME`), not {t:?}; for worker \
             clusters use `courier cluster list -o wide` or `-o yaml`"
        );
    }
    match (inline, name) {
        (Some(n), None) if !n.is_empty() => Ok(n.to_string()),
        (None, Some(n)) => Ok(n.to_string()),
        (Some(_), Some(_)) => {
            anyhow::bail!(
                "name the Job once: `courier describe job NAME` or `courier describe job/NAME`"
            )
        }
        _ => anyhow::bail!("which Job? `courier describe job NAME` (`courier jobs` lists them)"),
    }
}

pub async fn describe(a: DescribeArgs) -> anyhow::Result<()> {
    let job = job_name(&a.kind, a.name.as_deref())?;
    show(&a.management, &job, a.request_timeout).await
}

pub async fn explain(a: ExplainArgs) -> anyhow::Result<()> {
    show(&a.management, &a.job, a.request_timeout).await
}

async fn show(args: &ManagementArgs, job: &str, timeout: Duration) -> anyhow::Result<()> {
    let m = args.connect().await?;
    let (ns, name) = parse_ref(job, args.namespace.as_deref(), &m.namespace)?;
    let origin = get_origin(&m.client, &ns, &name).await?;
    print!("{}", describe_text(&m, &origin, timeout).await);
    Ok(())
}

/// `describe` of a Job that might not exist, for callers that only have a client (`courier demo`,
/// whose Courier runs in the default namespace).
#[cfg(feature = "sandbox")]
pub async fn explain_ref(client: &Client, ns: &str, name: &str) -> anyhow::Result<String> {
    let m = Management {
        client: client.clone(),
        namespace: ns.to_string(),
        courier_namespace: courier_api::DEFAULT_NAMESPACE.to_string(),
    };
    let origin = get_origin(client, ns, name).await?;
    Ok(describe_text(&m, &origin, Duration::from_secs(10)).await)
}

/// Everything `describe` says about one origin Job.
pub async fn describe_text(m: &Management, job: &Job, timeout: Duration) -> String {
    let mut out = String::new();
    let ns = job.metadata.namespace.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let managed_by = job.spec.as_ref().and_then(|s| s.managed_by.clone());
    let _ = writeln!(out, "Name:        {name}");
    let _ = writeln!(out, "Namespace:   {ns}");
    let _ = writeln!(
        out,
        "Created:     {} ago",
        age(job.metadata.creation_timestamp.as_ref().map(|t| t.0))
    );
    let _ = writeln!(
        out,
        "Managed by:  {}",
        managed_by.as_deref().unwrap_or("<unset>")
    );
    if managed_by.as_deref() != Some(MANAGED_BY) {
        let _ = writeln!(
            out,
            "\nCourier does not manage this Job: spec.managedBy is {}. Only Jobs with spec.managedBy: \
             {MANAGED_BY} are dispatched (the field cannot be changed after creation; resubmit with \
             `courier submit -f FILE`).",
            managed_by
                .as_deref()
                .unwrap_or("unset (the cluster's own Job controller runs it)")
        );
        return out;
    }
    let _ = writeln!(out, "Status:      {}", status_line(job, true));
    let wcs: Vec<WorkerCluster> = Api::<WorkerCluster>::all(m.client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    placement(&mut out, job, &wcs);
    namespace_selectors(&mut out, &m.client, &ns, &wcs).await;
    for note in wcs
        .iter()
        .filter_map(|wc| courier_core::placement::namespaces_note(wc, &ns))
    {
        let _ = writeln!(out, "  {note}");
    }
    conditions(&mut out, "Conditions", job);

    let mirror = mirror::find(m, job, "courier describe", timeout, Some(timeout)).await;
    let mut worker_events = None;
    if let Some(cluster) = cluster_of(job) {
        let _ = writeln!(out, "\nMirror on {cluster}");
        match mirror {
            Ok(Mirror::NotPlaced) => {}
            Ok(Mirror::UnknownCluster { cluster }) => {
                let _ = writeln!(
                    out,
                    "  not read: WorkerCluster {cluster} is not registered any more"
                );
            }
            Ok(Mirror::NotReady { cluster, why }) => {
                let _ = writeln!(out, "  not read: worker {cluster} is not Ready: {why}");
            }
            Err(e) => {
                let _ = writeln!(out, "  not read: {e:#}");
            }
            Ok(Mirror::Reached {
                worker,
                epoch,
                mirror,
                stranger,
            }) => match mirror {
                Some(mj) => {
                    let _ = writeln!(
                        out,
                        "  Job {ns}/{name} at {} (epoch {epoch}, uid {}, created {} ago)",
                        worker.server,
                        mj.metadata.uid.as_deref().unwrap_or("?"),
                        age(mj.metadata.creation_timestamp.as_ref().map(|t| t.0))
                    );
                    let _ = writeln!(out, "  Status: {}", status_line(&mj, false));
                    let mut sub = String::new();
                    conditions(&mut sub, "Conditions", &mj);
                    for line in sub.lines().filter(|l| !l.is_empty()) {
                        let _ = writeln!(out, "  {line}");
                    }
                    let uid = mj.metadata.uid.clone().unwrap_or_default();
                    worker_events = Some((
                        worker.name.clone(),
                        job_events(&worker.client, &ns, &name, &uid).await,
                    ));
                }
                None if stranger => {
                    let _ = writeln!(
                        out,
                        "  Job {ns}/{name} on {} is not this Job's current mirror (another origin's, \
                         or an older epoch than {epoch}); Courier leaves it alone",
                        worker.name
                    );
                }
                None => {
                    let why = match finished_as(job) {
                        Some((how, _)) => format!(
                            "the Job is {how}: Courier deleted the finished mirror, with its pods \
                             and logs, after the finished-mirror TTL (`courier run \
                             --finished-mirror-ttl`, default 10m)"
                        ),
                        None => "Courier creates it (again) on its next reconcile; the Events \
                                 below say why it is not there"
                            .to_string(),
                    };
                    let _ = writeln!(out, "  not there: {why}");
                }
            },
        }
    }

    let uid = job.metadata.uid.clone().unwrap_or_default();
    events_section(
        &mut out,
        "Events (management cluster)",
        job_events(&m.client, &ns, &name, &uid).await,
    );
    if let Some((cluster, events)) = worker_events {
        events_section(&mut out, &format!("Events (worker {cluster})"), events);
    }
    out
}

/// `Running (active 1, ready 1, succeeded 0 of 3, failed 0)`.
fn status_line(job: &Job, origin: bool) -> String {
    let s = job.status.clone().unwrap_or_default();
    let placed = !origin || cluster_of(job).is_some();
    format!(
        "{} (active {}, ready {}, succeeded {} of {}, failed {}{})",
        phase_of(job, placed),
        s.active.unwrap_or(0),
        s.ready.unwrap_or(0),
        s.succeeded.unwrap_or(0),
        job.spec
            .as_ref()
            .and_then(|s| s.completions)
            .map(|c| c.to_string())
            .unwrap_or_else(|| "1".into()),
        s.failed.unwrap_or(0),
        s.completed_indexes
            .as_ref()
            .filter(|s| !s.is_empty())
            .map(|s| format!(", completed indexes {s}"))
            .unwrap_or_default()
    )
}

/// Where the Job is placed and why (selector, cluster state), or why it is not.
/// The WorkerClusters whose `spec.namespaceSelector` keeps this Job's namespace out, and why. The
/// namespace's labels are read if the user may (else only its name label is known, which is what
/// a selector by name needs).
async fn namespace_selectors(out: &mut String, client: &Client, ns: &str, wcs: &[WorkerCluster]) {
    use courier_core::placement::{namespace_labels, namespace_selector};
    if wcs.iter().all(|w| w.spec.namespace_selector.is_none()) {
        return;
    }
    let cached = Api::<Namespace>::all(client.clone())
        .get_opt(ns)
        .await
        .ok()
        .flatten()
        .and_then(|n| n.metadata.labels);
    let labels = namespace_labels(ns, cached.as_ref());
    for wc in wcs {
        let name = wc.metadata.name.as_deref().unwrap_or("?");
        match namespace_selector(wc).as_deref() {
            Some(Ok(s)) if !s.matches(&labels) => {
                let _ = writeln!(
                    out,
                    "  {name}: not taking Jobs from namespace {ns} (its namespaceSelector {s} does \
                     not select it)"
                );
            }
            Some(Err(e)) => {
                let _ = writeln!(out, "  {name}: takes no Jobs: {e}");
            }
            _ => {}
        }
    }
}

fn placement(out: &mut String, job: &Job, wcs: &[WorkerCluster]) {
    let annotations = job.metadata.annotations.clone().unwrap_or_default();
    let _ = writeln!(out, "\nPlacement");
    match annotations.get(ANNOTATION_CLUSTER_SELECTOR) {
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
                        "  cluster selector {sel:?} is invalid: {e}; fix the \
                         {ANNOTATION_CLUSTER_SELECTOR} annotation"
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
    match cluster_of(job) {
        Some(cluster) => {
            let _ = writeln!(
                out,
                "  placed on: {cluster}, epoch {}{}",
                epoch_of(job).unwrap_or_else(|| "?".into()),
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
                    let unprotected = st
                        .conditions
                        .iter()
                        .find(|c| c.type_ == CONDITION_POLICY_INSTALLED && c.status == "False");
                    let _ = writeln!(
                        out,
                        "  {cluster}: {ready}, server {}, {} current mirror(s){}",
                        st.server_version.unwrap_or_else(|| "?".into()),
                        st.current_mirrors.unwrap_or(0),
                        if wc.spec.paused { ", paused" } else { "" }
                    );
                    if let Some(c) = unprotected {
                        let _ = writeln!(out, "  warning: {cluster}: {}: {}", c.reason, c.message);
                    }
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
        None => {
            let why = if finished_as(job).is_some() {
                "never dispatched".to_string()
            } else if job.spec.as_ref().and_then(|s| s.suspend) == Some(true) {
                "not dispatched: the Job is suspended (set spec.suspend=false to dispatch it)"
                    .into()
            } else {
                format!(
                    "not dispatched yet, phase {} (see the Events below for why)",
                    phase(job)
                )
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
}

fn conditions(out: &mut String, title: &str, job: &Job) {
    let conditions = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    if conditions.is_empty() {
        return;
    }
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
    let _ = writeln!(out, "\n{title}");
    out.push_str(&indented_table(
        &["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"],
        &rows,
    ));
}

/// The Events of Job `ns/name` (uid `uid`, when known), oldest first.
async fn job_events(
    client: &Client,
    ns: &str,
    name: &str,
    uid: &str,
) -> Result<Vec<Event>, kube::Error> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let list = match events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
    {
        Ok(l) => l,
        // A server without that field selector: filter here.
        Err(e) if crate::util::api_code(&e) == Some(400) => {
            events.list(&ListParams::default()).await?
        }
        Err(e) => return Err(e),
    };
    let mut evs: Vec<Event> = list
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.involved_object.kind.as_deref() == Some("Job")
                && (uid.is_empty() || e.involved_object.uid.as_deref().is_none_or(|u| u == uid))
        })
        .collect();
    evs.sort_by_key(event_time);
    Ok(evs)
}

fn events_section(out: &mut String, title: &str, events: Result<Vec<Event>, kube::Error>) {
    let evs = match events {
        Ok(evs) => evs,
        Err(e) => {
            let hint = if crate::util::api_code(&e) == Some(403) {
                " (on a worker: install the courier-worker chart with --set cliReads=true, \
                 docs/security.md)"
            } else {
                ""
            };
            let _ = writeln!(out, "\n{title}: not readable: {}{hint}", api_message(&e));
            return;
        }
    };
    let _ = writeln!(out, "\n{title}, most recent last");
    if evs.is_empty() {
        let _ = writeln!(out, "  none");
        return;
    }
    let recent: Vec<&Event> = evs.iter().rev().take(15).collect();
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
    out.push_str(&indented_table(
        &["AGE", "TYPE", "REASON", "COUNT", "MESSAGE"],
        &rows,
    ));
}

fn event_time(e: &Event) -> Option<jiff::Timestamp> {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn describe_names() {
        assert_eq!(job_name("job", Some("a")).expect("ok"), "a");
        assert_eq!(job_name("job/a", None).expect("ok"), "a");
        assert_eq!(job_name("jobs.batch", Some("ns/a")).expect("ok"), "ns/a");
        let e = job_name("pod", Some("a")).unwrap_err().to_string();
        assert!(e.contains("courier describe job NAME"), "{e}");
        assert!(
            job_name("job", None)
                .unwrap_err()
                .to_string()
                .contains("which Job")
        );
        assert!(job_name("job/a", Some("b")).is_err());
    }

    #[test]
    fn placement_says_why() {
        let j: Job = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "d",
                "annotations": {"courier.dev/cluster-selector": "region=eu"}},
            "spec": {"template": {}, "suspend": true, "managedBy": MANAGED_BY},
        }))
        .expect("job");
        let wc: WorkerCluster = serde_json::from_value(json!({
            "metadata": {"name": "w1", "labels": {"region": "eu"}},
            "spec": {"kubeconfigSecretRef": {"name": "s"}}}))
        .expect("wc");
        let mut out = String::new();
        placement(&mut out, &j, &[wc]);
        assert!(
            out.contains("cluster selector: region=eu (matches w1)"),
            "{out}"
        );
        assert!(out.contains("the Job is suspended"), "{out}");
        assert_eq!(
            status_line(&j, true),
            "Suspended (active 0, ready 0, succeeded 0 of 1, failed 0)"
        );
    }

    #[test]
    fn placement_warns_about_a_worker_without_the_policy() {
        let j: Job = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "d", "labels": {"courier.dev/cluster": "w1"},
                "annotations": {"courier.dev/epoch": "1"}},
            "spec": {"template": {}, "managedBy": MANAGED_BY},
        }))
        .expect("job");
        let wc: WorkerCluster = serde_json::from_value(json!({
            "metadata": {"name": "w1"},
            "spec": {"kubeconfigSecretRef": {"name": "s"}},
            "status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "Connected", "message": "ok",
                 "lastTransitionTime": "2025-01-01T00:00:00Z"},
                {"type": "PolicyInstalled", "status": "False", "reason": "WorkerPolicyMissing",
                 "message": "install the chart with policy.enabled=true",
                 "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}))
        .expect("wc");
        let mut out = String::new();
        placement(&mut out, &j, &[wc]);
        assert!(
            out.contains(
                "warning: w1: WorkerPolicyMissing: install the chart with policy.enabled=true"
            ),
            "{out}"
        );
    }
}
