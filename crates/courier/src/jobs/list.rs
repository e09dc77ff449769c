//! `courier jobs`: the Jobs Courier manages, where each runs and how it is doing.

use anyhow::{Context as _, anyhow};
use clap::Args;
use courier_api::ANNOTATION_CLUSTER_SELECTOR;
use courier_core::phase::{ALL_PHASES, JobPhase};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::ListParams;

use super::{cluster_of, completions, epoch_of, is_managed, phase};
use crate::management::ManagementArgs;
use crate::output::{Listing, OutputFormat, Table};
use crate::util::{age, api_message};

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    courier jobs                     # the context's namespace\n  \
    courier jobs -A --phase running  # running Jobs in every namespace\n  \
    courier jobs -o name | xargs -n1 courier describe")]
pub struct JobsArgs {
    #[command(flatten)]
    pub management: ManagementArgs,
    /// List the Jobs of every namespace.
    #[arg(long, short = 'A', conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Only Jobs in this phase: pending, dispatched, running, suspended, finishing, complete,
    /// failed or deleting.
    #[arg(long, value_parser = parse_phase, value_name = "PHASE")]
    pub phase: Option<JobPhase>,
    /// Only Jobs with these labels (a label selector, e.g. `team=ml,tier!=batch`).
    #[arg(long, short = 'l', value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Output format: table, wide (with containers, images and cluster selector), name, json or
    /// yaml (`kind: List`).
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: OutputFormat,
}

fn parse_phase(s: &str) -> Result<JobPhase, String> {
    JobPhase::parse(s).ok_or_else(|| {
        let all: Vec<&str> = ALL_PHASES.iter().map(|p| p.label()).collect();
        format!("unknown phase {s:?}; one of {}", all.join(", "))
    })
}

fn qualified_name(j: &Job) -> String {
    format!(
        "job.batch/{}",
        j.metadata.name.as_deref().unwrap_or_default()
    )
}

/// kubectl's columns for Jobs, plus where each runs; NAMESPACE first with -A.
fn table(items: &[Job], wide: bool, all_namespaces: bool) -> Table {
    let mut header = Vec::new();
    if all_namespaces {
        header.push("NAMESPACE");
    }
    header.extend(["NAME", "CLUSTER", "EPOCH", "STATUS", "COMPLETIONS", "AGE"]);
    if wide {
        header.extend(["CONTAINERS", "IMAGES", "CLUSTER-SELECTOR"]);
    }
    let rows = items
        .iter()
        .map(|j| {
            let mut row = Vec::new();
            if all_namespaces {
                row.push(j.metadata.namespace.clone().unwrap_or_default());
            }
            row.extend([
                j.metadata.name.clone().unwrap_or_default(),
                cluster_of(j).unwrap_or_else(|| "-".into()),
                epoch_of(j).unwrap_or_else(|| "-".into()),
                phase(j).to_string(),
                completions(j),
                age(j.metadata.creation_timestamp.as_ref().map(|t| t.0)),
            ]);
            if wide {
                let containers = j
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref())
                    .map(|p| p.containers.as_slice())
                    .unwrap_or_default();
                let join = |f: &dyn Fn(&k8s_openapi::api::core::v1::Container) -> String| {
                    let v: Vec<String> = containers.iter().map(f).collect();
                    if v.is_empty() {
                        "-".into()
                    } else {
                        v.join(",")
                    }
                };
                row.push(join(&|c| c.name.clone()));
                row.push(join(&|c| c.image.clone().unwrap_or_default()));
                row.push(
                    j.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(ANNOTATION_CLUSTER_SELECTOR).cloned())
                        .unwrap_or_else(|| "<none>".into()),
                );
            }
            row
        })
        .collect();
    Table { header, rows }
}

pub async fn jobs(a: JobsArgs) -> anyhow::Result<()> {
    let m = a.management.connect().await?;
    let api: Api<Job> = if a.all_namespaces {
        Api::all(m.client.clone())
    } else {
        Api::namespaced(m.client.clone(), &m.namespace)
    };
    let mut lp = ListParams::default();
    if let Some(sel) = &a.selector {
        lp = lp.labels(sel);
    }
    let where_ = if a.all_namespaces {
        "in any namespace".to_string()
    } else {
        format!("in namespace {}", m.namespace)
    };
    let mut items: Vec<Job> = api
        .list(&lp)
        .await
        .map_err(|e| anyhow!(api_message(&e)))
        .with_context(|| format!("listing Jobs {where_} of the management cluster"))?
        .items
        .into_iter()
        .filter(|j| is_managed(j) && a.phase.is_none_or(|p| phase(j) == p))
        .collect();
    items.sort_by(|x, y| {
        (&x.metadata.namespace, &x.metadata.name).cmp(&(&y.metadata.namespace, &y.metadata.name))
    });
    let empty = format!(
        "No Jobs managed by Courier {where_}{}. Submit one with `courier submit -f FILE`{}.",
        a.phase
            .map(|p| format!(" in phase {p}"))
            .unwrap_or_default(),
        if a.all_namespaces {
            ""
        } else {
            "; -A lists every namespace"
        }
    );
    let all = a.all_namespaces;
    Listing {
        items: &items,
        name_of: &qualified_name,
        table: &|items: &[Job], wide: bool| table(items, wide, all),
        empty: &empty,
    }
    .print(a.output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(ns: &str, name: &str) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns,
                "labels": {"courier.dev/cluster": "w1"},
                "annotations": {"courier.dev/epoch": "2", "courier.dev/cluster-selector": "region=eu"}},
            "spec": {"managedBy": "courier.dev/dispatcher", "completions": 3,
                "template": {"spec": {"containers": [
                    {"name": "main", "image": "busybox"}, {"name": "side", "image": "envoy"}]}}},
            "status": {"active": 1, "succeeded": 1}
        }))
        .expect("job")
    }

    #[test]
    fn columns() {
        let items = [job("a", "x")];
        let t = table(&items, false, false);
        assert_eq!(
            t.header,
            ["NAME", "CLUSTER", "EPOCH", "STATUS", "COMPLETIONS", "AGE"]
        );
        assert_eq!(t.rows[0][..5], ["x", "w1", "2", "Running", "1/3"]);
        let t = table(&items, true, true);
        assert_eq!(t.header[0], "NAMESPACE");
        assert_eq!(t.rows[0][0], "a");
        assert_eq!(t.rows[0][7..], ["main,side", "busybox,envoy", "region=eu"]);
        assert_eq!(qualified_name(&items[0]), "job.batch/x");
    }

    #[test]
    fn phases_parse_in_any_case() {
        assert_eq!(parse_phase("Running"), Ok(JobPhase::Running));
        assert_eq!(parse_phase("complete"), Ok(JobPhase::Complete));
        let e = parse_phase("done").unwrap_err();
        assert!(e.contains("pending") && e.contains("deleting"), "{e}");
    }
}
