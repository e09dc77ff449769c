//! The WorkerCluster's `.status` (leader only): the `Ready` condition, `serverVersion`,
//! `currentMirrors` (unfinished origins placed on the cluster) and `lastProbeTime`. Written through
//! the status subresource only when something other than `lastProbeTime` changed, or as a
//! *heartbeat* (so readers can tell a live controller from a dead one) when a full probe (or a
//! failing worker's probe) ran and the stored `lastProbeTime` is older than
//! `Tuning::status_heartbeat`. The checks between full probes never write a heartbeat: with 1,000
//! idle workers a heartbeat per minute was ~17 management writes a second (each also a
//! WorkerCluster watch event back to every replica), where one per full probe
//! (`Tuning::rights_interval`, 2.5-5 min) is ~4.

use courier_api::WorkerClusterStatus;
use courier_api::reasons::{
    CONDITION_POLICY_INSTALLED, CONDITION_READY, REASON_WORKER_POLICY_INSTALLED,
    REASON_WORKER_POLICY_MISSING,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tracing::{debug, warn};

use super::Ctx;
use super::{Cluster, ProbeState};
use crate::config::FIELD_MANAGER;
use crate::errors::with_timeout;

/// The status this replica would write for `cluster` now, or `None` before the first verdict.
pub fn desired(shared: &Ctx, cluster: &Cluster) -> Option<WorkerClusterStatus> {
    let h = cluster.health();
    if h.state == ProbeState::Pending {
        return None;
    }
    let wc = cluster.worker_cluster();
    let current = wc.status.clone().unwrap_or_default();
    let now = Timestamp::now();
    let ready = Condition {
        type_: CONDITION_READY.into(),
        status: if h.ready() { "True" } else { "False" }.into(),
        reason: h.reason.into(),
        message: h.message.clone(),
        last_transition_time: Time(h.since.unwrap_or(now)),
        observed_generation: wc.metadata.generation,
    };
    let policy = h.policy.map(|installed| {
        policy_condition(installed, &current.conditions, now, wc.metadata.generation)
    });
    let mut conditions: Vec<Condition> = current
        .conditions
        .iter()
        .filter(|c| {
            c.type_ != CONDITION_READY
                && !(policy.is_some() && c.type_ == CONDITION_POLICY_INSTALLED)
        })
        .cloned()
        .collect();
    conditions.insert(0, ready);
    conditions.extend(policy);
    Some(WorkerClusterStatus {
        conditions,
        server_version: h.server_version.clone(),
        current_mirrors: Some(
            i32::try_from(shared.hooks.placed_on(&cluster.name)).unwrap_or(i32::MAX),
        ),
        last_probe_time: Some(Time(h.last_probe.unwrap_or(now))),
    })
}

/// The `PolicyInstalled` condition; its transition time kept from `current` while the status
/// stays the same.
fn policy_condition(
    installed: bool,
    current: &[Condition],
    now: Timestamp,
    generation: Option<i64>,
) -> Condition {
    let status = if installed { "True" } else { "False" };
    let since = current
        .iter()
        .find(|c| c.type_ == CONDITION_POLICY_INSTALLED && c.status == status)
        .map_or(now, |c| c.last_transition_time.0);
    let name = courier_api::WORKER_POLICY_NAME;
    let (reason, message) = if installed {
        (
            REASON_WORKER_POLICY_INSTALLED,
            format!("the worker chart's ValidatingAdmissionPolicy {name} and its binding exist"),
        )
    } else {
        (
            REASON_WORKER_POLICY_MISSING,
            format!(
                "the worker has no ValidatingAdmissionPolicy {name} or no binding for it: nothing \
                 stops its users from changing Courier's mirrors, nor Courier's account from \
                 running privileged pods there; install or upgrade the courier-worker chart with \
                 policy.enabled=true (`helm upgrade courier-worker charts/courier-worker \
                 --reuse-values --set policy.enabled=true`)"
            ),
        )
    };
    Condition {
        type_: CONDITION_POLICY_INSTALLED.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: Time(since),
        observed_generation: generation,
    }
}

fn same_condition(a: &Condition, b: &Condition) -> bool {
    a.type_ == b.type_
        && a.status == b.status
        && a.reason == b.reason
        && a.message == b.message
        && a.observed_generation == b.observed_generation
        && a.last_transition_time.0.as_second() == b.last_transition_time.0.as_second()
}

/// Writes the status if it changed, or, when `heartbeat` (a full probe ran) and the stored
/// `lastProbeTime` is older than `Tuning::status_heartbeat`, to refresh it. Leader only; errors
/// are logged.
pub async fn publish(shared: &Ctx, cluster: &Cluster, heartbeat: bool) {
    if !shared.is_leader() {
        return;
    }
    let Some(want) = desired(shared, cluster) else {
        return;
    };
    let current = cluster.worker_cluster().status.clone().unwrap_or_default();
    let conditions_same = want.conditions.len() == current.conditions.len()
        && want
            .conditions
            .iter()
            .zip(&current.conditions)
            .all(|(a, b)| same_condition(a, b));
    let unchanged = conditions_same
        && want.server_version == current.server_version
        && want.current_mirrors == current.current_mirrors;
    let heartbeat_due = heartbeat
        && current.last_probe_time.as_ref().is_none_or(|t| {
            let age = Timestamp::now().duration_since(t.0);
            age.unsigned_abs() >= shared.tuning.status_heartbeat
        });
    if unchanged && !heartbeat_due {
        return;
    }
    let api: Api<courier_api::WorkerCluster> = Api::all(shared.mgmt.clone());
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let patch = json!({ "status": want });
    match with_timeout(
        shared.tuning.request_timeout,
        api.patch_status(&cluster.name, &pp, &Patch::Merge(&patch)),
    )
    .await
    {
        Ok(updated) => {
            debug!(cluster = %cluster.name, "WorkerCluster status written");
            // The watch brings it too; keep the written status now so the next cycle compares
            // against it (only the status: spec changes must still be noticed from the watch).
            let mut wc = (*cluster.worker_cluster()).clone();
            if updated.metadata.uid == wc.metadata.uid {
                wc.status = updated.status;
                cluster.set_worker_cluster(wc);
            }
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => warn!(cluster = %cluster.name, error = %e, "cannot write WorkerCluster status"),
    }
}
