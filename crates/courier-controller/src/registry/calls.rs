//! Calls to one worker on behalf of reconciles: every call has a deadline, at most
//! `Tuning::cluster_inflight` run at once per worker (waiting briefly for a slot, then giving up
//! with `Busy` so the reconcile worker is freed for other clusters), and after a timeout or a
//! connection failure calls fail fast (`CircuitOpen`) until the cluster's next successful probe,
//! which the failure triggers at once. So a worker that hangs holds at most a bounded number of
//! reconciles for at most one request timeout.

use crate::locks::MutexExt as _;
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Resource as _;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    PostParams, Preconditions, PropagationPolicy,
};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::Cluster;
use crate::config::FIELD_MANAGER;
use crate::errors::{CallError, with_timeout};
use crate::watch::SlimJob;

/// batch/v1 Jobs as a dynamic resource (origins and mirrors are read and built as JSON).
pub fn jobs_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("batch", "v1", "Job"), "jobs")
}

/// How long a reconcile waits for a call slot on a busy worker before giving up.
const SLOT_WAIT: Duration = Duration::from_millis(250);

/// Waiting for a slot only pays while the worker is answering: with calls pending and no answer for
/// this long, a reconcile gives up at once instead of holding a reconcile worker for [`SLOT_WAIT`]
/// (the first second of a hang, before [`STALL_AFTER`] takes the worker out of placement).
const ANSWERING_WITHIN: Duration = Duration::from_millis(100);

/// Calls pending this long with none completing mark the worker as stalled: no new placements
/// there and no waiting for its call slots, long before a request times out. A healthy worker
/// completes some call every few milliseconds even under full load.
const STALL_AFTER: Duration = Duration::from_secs(1);

/// One call in flight; dropping it (also when the caller is cancelled) ends it.
struct Pending<'a> {
    cluster: &'a Cluster,
    /// The worker responded (success or an API error), as opposed to a timeout, a transport
    /// failure or a cancelled call.
    answered: bool,
}

impl super::Progress {
    /// Calls are pending and none has been answered for `quiet`.
    fn silent_for(&self, now: Instant, quiet: Duration) -> bool {
        self.pending > 0
            && self
                .last
                .is_some_and(|t| now.saturating_duration_since(t) >= quiet)
    }

    fn stalled(&self, now: Instant) -> bool {
        self.silent_for(now, STALL_AFTER)
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let mut p = self.cluster.progress.lock_or_recover();
        p.pending = p.pending.saturating_sub(1);
        if self.answered {
            p.last = Some(Instant::now());
        }
    }
}

impl Cluster {
    fn circuit_open(&self) -> bool {
        let mut c = self.circuit.lock_or_recover();
        match *c {
            Some(until) if Instant::now() < until => true,
            Some(_) => {
                *c = None;
                false
            }
            None => false,
        }
    }

    /// Lets calls through again (a probe succeeded).
    pub fn close_circuit(&self) {
        *self.circuit.lock_or_recover() = None;
    }

    fn note_failure(&self, e: &CallError) {
        if e.is_unreachable() {
            *self.circuit.lock_or_recover() = Some(Instant::now() + self.request_timeout);
            self.wake.notify_one();
        } else if matches!(e.code(), Some(401 | 403)) {
            self.wake.notify_one();
        }
    }

    /// Calls are pending and none has completed for [`STALL_AFTER`]: the worker accepted them but
    /// does not answer (hung, blackholed, overloaded). Placement avoids it until calls complete again.
    pub fn stalled(&self) -> bool {
        let p = self.progress.lock_or_recover();
        p.stalled(Instant::now())
    }

    fn call_started(&self) -> Pending<'_> {
        let mut p = self.progress.lock_or_recover();
        if p.pending == 0 {
            p.last = Some(Instant::now());
        }
        p.pending += 1;
        Pending {
            cluster: self,
            answered: false,
        }
    }

    /// Runs one request against the worker under the limits described in the module docs.
    pub async fn call<T, F, Fut>(&self, f: F) -> Result<T, CallError>
    where
        F: FnOnce(kube::Client) -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        let conn = self
            .connection()
            .ok_or_else(|| CallError::NotConnected(self.name.clone()))?;
        if self.circuit_open() {
            return Err(CallError::CircuitOpen(self.name.clone()));
        }
        // A worker that is not answering will not free its slots soon: give the reconcile worker
        // back at once.
        let silent = self
            .progress
            .lock_or_recover()
            .silent_for(Instant::now(), ANSWERING_WITHIN);
        let slot_wait = if silent { Duration::ZERO } else { SLOT_WAIT };
        let Ok(Ok(_permit)) = tokio::time::timeout(slot_wait, self.inflight.acquire()).await else {
            return Err(CallError::Busy(self.name.clone()));
        };
        let mut pending = self.call_started();
        let result = with_timeout(self.request_timeout, f(conn.request.clone())).await;
        pending.answered = !matches!(&result, Err(e) if e.is_unreachable());
        drop(pending);
        if let Err(e) = &result {
            self.note_failure(e);
        }
        result
    }

    fn jobs(client: kube::Client, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client, ns, &jobs_resource())
    }

    /// Creates a Job on the worker. The answer is decoded only as far as the mirror cache reads it
    /// (no managedFields, the spec kept as text), as the mirror watch decodes it.
    pub async fn create_job(&self, ns: &str, job: &Value) -> Result<SlimJob, CallError> {
        if !job.is_object() {
            return Err(CallError::Other("mirror is not a Job object".into()));
        }
        // A mirror is a few KB: written into one buffer rather than grown from empty.
        let mut body = Vec::with_capacity(4096);
        serde_json::to_writer(&mut body, job)
            .map_err(|e| CallError::Other(format!("mirror cannot be encoded: {e}")))?;
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let path = SlimJob::url_path(&(), Some(ns));
        self.call(|c| async move {
            let request = kube::core::Request::new(path)
                .create(&pp, body)
                .map_err(kube::Error::BuildRequest)?;
            c.request::<SlimJob>(request).await
        })
        .await
    }

    /// Reads a Job (`None` if it does not exist).
    pub async fn get_job(&self, ns: &str, name: &str) -> Result<Option<DynamicObject>, CallError> {
        self.call(|c| async move { Self::jobs(c, ns).get_opt(name).await })
            .await
    }

    /// JSON merge patch with a UID precondition (`metadata.uid` in the patch): a Job that was
    /// deleted and re-created under the name answers 409 instead of being patched.
    pub async fn patch_job(
        &self,
        ns: &str,
        name: &str,
        uid: &str,
        patch: &Value,
    ) -> Result<DynamicObject, CallError> {
        let mut patch = patch.clone();
        if let Some(obj) = patch.as_object_mut() {
            let meta = obj.entry("metadata").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("uid".into(), json!(uid));
            }
        }
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        self.call(|c| async move {
            Self::jobs(c, ns)
                .patch(name, &pp, &Patch::Merge(&patch))
                .await
        })
        .await
    }

    /// Deletes a Job with Background propagation (its pods go too) and a UID precondition.
    /// Already gone (404) or replaced by another Job (409) counts as done.
    pub async fn delete_job(&self, ns: &str, name: &str, uid: &str) -> Result<(), CallError> {
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self
            .call(|c| async move { Self::jobs(c, ns).delete(name, &dp).await })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates the namespace with `labels` if missing (remembered per connection). An existing
    /// namespace is left as it is: its labels are the worker operator's.
    pub async fn ensure_namespace(
        &self,
        ns: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), CallError> {
        if self.namespaces.lock_or_recover().contains(ns) {
            return Ok(());
        }
        let obj: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}
        }))
        .map_err(|e| CallError::Other(e.to_string()))?;
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let created = self
            .call(|c| async move { Api::<Namespace>::all(c).create(&pp, &obj).await })
            .await;
        match created {
            Ok(_) => {}
            Err(e) if e.is_already_exists() => {}
            Err(e) => return Err(e),
        }
        self.namespaces.lock_or_recover().insert(ns.to_string());
        Ok(())
    }

    /// Forgets that `ns` exists (a create there answered "namespace not found").
    pub fn forget_namespace(&self, ns: &str) {
        self.namespaces.lock_or_recover().remove(ns);
    }

    /// Forgets every namespace (new connection: maybe another cluster).
    pub fn forget_namespaces(&self) {
        self.namespaces.lock_or_recover().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::super::Progress;
    use super::*;

    #[test]
    fn a_worker_is_stalled_only_while_calls_wait_without_any_answer() {
        let t0 = Instant::now();
        let idle = Progress {
            pending: 0,
            last: Some(t0),
        };
        assert!(!idle.stalled(t0 + STALL_AFTER * 10), "nothing pending");
        let busy = Progress {
            pending: 3,
            last: Some(t0),
        };
        assert!(!busy.stalled(t0 + STALL_AFTER / 2), "answers are recent");
        assert!(
            busy.stalled(t0 + STALL_AFTER),
            "pending with no answer for STALL_AFTER"
        );
        assert!(!busy.silent_for(t0 + ANSWERING_WITHIN / 2, ANSWERING_WITHIN));
        assert!(
            busy.silent_for(t0 + ANSWERING_WITHIN, ANSWERING_WITHIN),
            "no slot wait long before the worker counts as stalled"
        );
        assert!(!idle.silent_for(t0 + STALL_AFTER, ANSWERING_WITHIN));
    }
}
