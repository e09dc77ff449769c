//! Finding an origin's current mirror from the CLI: the cluster and epoch written on the origin
//! (`courier.dev/cluster` label, `courier.dev/epoch` annotation), the WorkerCluster's kubeconfig
//! Secret, and the Job of the same namespace and name on that worker, if it carries this origin's
//! UID and epoch.

use std::time::Duration;

use anyhow::anyhow;
use courier_api::{LABEL_EPOCH, LABEL_ORIGIN_UID};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;

use super::{cluster_of, epoch_of};
use crate::management::Management;
use crate::util::{self, api_message};
use crate::workers::{self, RegisteredWorker};

/// Where the origin's current mirror is, as far as the CLI can tell.
pub enum Mirror {
    /// The origin has no placement yet.
    NotPlaced,
    /// The origin names a cluster that is not registered (any more).
    UnknownCluster { cluster: String },
    /// The cluster is registered but not Ready (`why`: its Ready condition).
    NotReady { cluster: String, why: String },
    /// The worker answered: the mirror is there (`Some`) or gone (`None`; `stranger` = a Job of that
    /// name exists there but is not this origin's current mirror).
    Reached {
        worker: RegisteredWorker,
        epoch: String,
        mirror: Option<Box<Job>>,
        stranger: bool,
    },
}

/// Whether `job` on the worker is the current mirror of `origin` (its UID and epoch).
pub fn is_current_mirror(job: &Job, origin_uid: &str, epoch: &str) -> bool {
    let labels = job.metadata.labels.clone().unwrap_or_default();
    labels.get(LABEL_ORIGIN_UID).map(String::as_str) == Some(origin_uid)
        && labels.get(LABEL_EPOCH).map(String::as_str) == Some(epoch)
}

/// Looks the mirror of `origin` up on its worker; `for_what` names the command in errors.
/// `read_timeout` None = a client for long streams (`logs -f`).
pub async fn find(
    m: &Management,
    origin: &Job,
    for_what: &str,
    timeout: Duration,
    read_timeout: Option<Duration>,
) -> anyhow::Result<Mirror> {
    let Some(cluster) = cluster_of(origin) else {
        return Ok(Mirror::NotPlaced);
    };
    let Some(wc) = workers::get_cluster_opt(&m.client, &cluster).await? else {
        return Ok(Mirror::UnknownCluster { cluster });
    };
    if let Some(why) = workers::not_ready(&wc) {
        return Ok(Mirror::NotReady { cluster, why });
    }
    let worker = workers::connect_registered(
        &m.client,
        &m.courier_namespace,
        &wc,
        for_what,
        timeout,
        read_timeout,
    )
    .await?;
    let ns = origin.metadata.namespace.clone().unwrap_or_default();
    let name = origin.metadata.name.clone().unwrap_or_default();
    let api: Api<Job> = Api::namespaced(worker.client.clone(), &ns);
    let found = match tokio::time::timeout(timeout, api.get_opt(&name)).await {
        Err(_) => {
            return Err(anyhow!(
                "worker {cluster} at {} did not answer within {}",
                worker.server,
                util::short_duration(timeout)
            ));
        }
        Ok(Err(e)) => {
            return Err(anyhow!(
                "reading Job {ns}/{name} on worker {cluster} at {}: {}",
                worker.server,
                api_message(&e)
            ));
        }
        Ok(Ok(j)) => j,
    };
    let uid = origin.metadata.uid.clone().unwrap_or_default();
    let epoch = epoch_of(origin).unwrap_or_default();
    let (mirror, stranger) = match found {
        Some(j) if is_current_mirror(&j, &uid, &epoch) => (Some(Box::new(j)), false),
        Some(_) => (None, true),
        None => (None, false),
    };
    Ok(Mirror::Reached {
        worker,
        epoch,
        mirror,
        stranger,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn current_mirror_needs_uid_and_epoch() {
        let j = |uid: &str, epoch: &str| -> Job {
            serde_json::from_value(json!({"metadata": {"name": "a", "labels": {
                "courier.dev/origin-uid": uid, "courier.dev/epoch": epoch}}}))
            .expect("job")
        };
        assert!(is_current_mirror(&j("u1", "2"), "u1", "2"));
        assert!(
            !is_current_mirror(&j("u1", "1"), "u1", "2"),
            "an older epoch"
        );
        assert!(
            !is_current_mirror(&j("u2", "2"), "u1", "2"),
            "another origin's"
        );
    }
}
