//! `courier cluster list`.

use clap::Args;
use courier_api::WorkerCluster;
use courier_api::reasons::{CONDITION_POLICY_INSTALLED, CONDITION_READY};
use kube::Client;

use super::format_labels;
use crate::output::{Listing, OutputFormat, Table};
use crate::util::age;
use crate::workers::list_worker_clusters;

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Output format: table, wide (with Secret, worker namespaces, last probe and message), name,
    /// json or yaml
    /// (`kind: List`).
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: OutputFormat,
}

/// `workercluster.courier.dev/NAME`, the `-o name` form.
fn qualified_name(wc: &WorkerCluster) -> String {
    format!(
        "workercluster.courier.dev/{}",
        wc.metadata.name.as_deref().unwrap_or_default()
    )
}

/// (status, reason, message) of the Ready condition; Unknown/NotObserved before the first probe.
fn ready(wc: &WorkerCluster) -> (String, String, String) {
    match wc
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == CONDITION_READY))
    {
        Some(c) => (c.status.clone(), c.reason.clone(), c.message.clone()),
        None => ("Unknown".into(), "NotObserved".into(), String::new()),
    }
}

fn table(items: &[WorkerCluster], wide: bool) -> Table {
    let mut header = vec![
        "NAME", "READY", "REASON", "VERSION", "MIRRORS", "WEIGHT", "PAUSED", "LABELS", "AGE",
    ];
    if wide {
        header.extend(["SECRET", "NAMESPACES", "LAST-PROBE", "MESSAGE"]);
    }
    let rows = items
        .iter()
        .map(|wc| {
            let status = wc.status.clone().unwrap_or_default();
            let (ready, reason, message) = ready(wc);
            let mut row = vec![
                wc.metadata.name.clone().unwrap_or_default(),
                ready,
                reason,
                status.server_version.unwrap_or_else(|| "-".into()),
                status
                    .current_mirrors
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "-".into()),
                wc.spec.weight.to_string(),
                if wc.spec.paused { "yes" } else { "no" }.to_string(),
                format_labels(&wc.metadata.labels.clone().unwrap_or_default()),
                age(wc.metadata.creation_timestamp.as_ref().map(|t| t.0)),
            ];
            if wide {
                row.push(wc.spec.kubeconfig_secret_ref.name.clone());
                // spec.namespaces: the worker namespaces Courier may use there.
                row.push(match &wc.spec.namespaces {
                    Some(list) => list.join(","),
                    None => "all".into(),
                });
                row.push(match &status.last_probe_time {
                    Some(t) => format!("{} ago", age(Some(t.0))),
                    None => "-".into(),
                });
                row.push(if message.is_empty() {
                    "-".into()
                } else {
                    message
                });
            }
            row
        })
        .collect();
    Table { header, rows }
}

/// Why each cluster that is not Ready is not, and a warning for each worker without the worker
/// chart's admission policy (printed under the table).
fn notes(items: &[WorkerCluster]) -> Vec<String> {
    let mut out: Vec<String> = items
        .iter()
        .filter_map(|wc| {
            let (status, reason, message) = ready(wc);
            (status != "True" && !message.is_empty()).then(|| {
                format!(
                    "{}: {reason}: {message}",
                    wc.metadata.name.as_deref().unwrap_or_default()
                )
            })
        })
        .collect();
    out.extend(items.iter().filter_map(|wc| {
        let c = wc
            .status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_POLICY_INSTALLED && c.status == "False")?;
        Some(format!(
            "warning: {}: {}: {}",
            wc.metadata.name.as_deref().unwrap_or_default(),
            c.reason,
            c.message
        ))
    }));
    out
}

pub async fn list(client: &Client, a: ListArgs) -> anyhow::Result<()> {
    let mut items = list_worker_clusters(client).await?;
    items.sort_by(|x, y| x.metadata.name.cmp(&y.metadata.name));
    Listing {
        items: &items,
        name_of: &qualified_name,
        table: &table,
        empty: "No worker clusters registered. Add one with `courier cluster add NAME \
                --cluster-kubeconfig FILE`.",
    }
    .print(a.output)?;
    let notes = notes(&items);
    if a.output == OutputFormat::Table && !notes.is_empty() {
        println!();
        for n in notes {
            println!("{n}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wc(name: &str, ready: Option<(&str, &str, &str)>) -> WorkerCluster {
        let mut v = json!({
            "apiVersion": "courier.dev/v1alpha1", "kind": "WorkerCluster",
            "metadata": {"name": name, "labels": {"region": "eu"}},
            "spec": {"kubeconfigSecretRef": {"name": format!("{name}-kubeconfig")}, "weight": 2},
        });
        if let Some((s, r, m)) = ready {
            v["status"] = json!({"conditions": [{"type": "Ready", "status": s, "reason": r,
                "message": m, "lastTransitionTime": "2025-01-01T00:00:00Z"}],
                "serverVersion": "v1.36.0", "currentMirrors": 3});
        }
        serde_json::from_value(v).expect("WorkerCluster")
    }

    #[test]
    fn table_wide_and_notes() {
        let items = [
            wc("a", Some(("True", "Connected", "ok"))),
            wc("b", Some(("False", "Unreachable", "dial tcp: refused"))),
            wc("c", None),
        ];
        let t = table(&items, false);
        assert_eq!(t.header.len(), 9);
        assert_eq!(t.rows[0][..5], ["a", "True", "Connected", "v1.36.0", "3"]);
        assert_eq!(t.rows[2][1..3], ["Unknown", "NotObserved"]);
        assert_eq!(t.rows[0][7], "region=eu");
        let w = table(&items, true);
        assert_eq!(
            w.header[9..],
            ["SECRET", "NAMESPACES", "LAST-PROBE", "MESSAGE"]
        );
        assert_eq!(w.rows[1][9], "b-kubeconfig");
        assert_eq!(w.rows[1][10], "all");
        assert_eq!(w.rows[1][12], "dial tcp: refused");
        let mut listed = wc("n", None);
        listed.spec.namespaces = Some(vec!["team-a".into(), "team-b".into()]);
        assert_eq!(table(&[listed], true).rows[0][10], "team-a,team-b");
        assert_eq!(notes(&items), ["b: Unreachable: dial tcp: refused"]);
        let mut unprotected = wc("d", Some(("True", "Connected", "ok")));
        if let Some(s) = &mut unprotected.status {
            s.conditions.push(
                serde_json::from_value(json!({"type": "PolicyInstalled", "status": "False",
                    "reason": "WorkerPolicyMissing", "message": "install the chart",
                    "lastTransitionTime": "2025-01-01T00:00:00Z"}))
                .expect("condition"),
            );
        }
        assert_eq!(
            notes(&[unprotected]),
            ["warning: d: WorkerPolicyMissing: install the chart"]
        );
        assert_eq!(qualified_name(&items[0]), "workercluster.courier.dev/a");
        // Items in a List carry their own kind (kube's derive serialises it).
        let v = crate::output::list_object(&items).expect("list");
        assert_eq!(v["items"][0]["kind"], "WorkerCluster");
        assert_eq!(v["items"][0]["apiVersion"], "courier.dev/v1alpha1");
    }
}
