//! Claiming this controller's `--origin` id on a worker before anything acts there
//! ([`courier_core::claim`] decides; this performs): the management cluster's identity is the UID of
//! its `kube-system` namespace ([`super::namespaces`]), the claim namespace is that of the ServiceAccount the
//! worker credentials belong to (a SelfSubjectReview, once per connection), and the claim is a key
//! of the ConfigMap `courier-origins` there, added with a resourceVersion precondition so that two
//! management clusters racing for one id cannot both win.
//!
//! Run by the cluster task on every cycle before the mirror watch starts, so a worker whose id
//! belongs to another management cluster never gets a watch, a garbage-collection sweep, a
//! placement or a delete (it stays `Ready=False`, `OriginIdInUse`).

use std::collections::BTreeMap;

use courier_api::ORIGIN_CLAIMS_CONFIGMAP;
use courier_core::claim::{Claim, claim_namespace, in_use_message, judge};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::Ctx;
use super::{Cluster, Connection};
use crate::config::FIELD_MANAGER;
use crate::errors::{CallError, with_timeout};
use crate::locks::MutexExt as _;

/// Why the claim did not hold.
pub enum ClaimError {
    /// Another management cluster holds the id (the `Ready=False` message).
    InUse(String),
    /// A call failed (the worker's or the management cluster's answer).
    Call(CallError),
}

impl From<CallError> for ClaimError {
    fn from(e: CallError) -> Self {
        ClaimError::Call(e)
    }
}

/// Makes sure this management cluster holds its origin id on the worker behind `conn`.
pub async fn ensure(shared: &Ctx, cluster: &Cluster, conn: &Connection) -> Result<(), ClaimError> {
    let deadline = shared.tuning.request_timeout;
    let mine = management_uid(shared)?;
    let ns = namespace_for(cluster, conn).await?;
    let api: Api<ConfigMap> = Api::namespaced(conn.request.clone(), &ns);
    let origin = &shared.cfg.origin_id;
    // Two rounds: a create or patch that lost a race is judged again on what won.
    for _ in 0..2 {
        let current = with_timeout(deadline, api.get_opt(ORIGIN_CLAIMS_CONFIGMAP)).await?;
        let claims = current.as_ref().map(|c| c.data.clone().unwrap_or_default());
        let attempt = match judge(claims.as_ref(), origin, &mine) {
            Claim::Held => return Ok(()),
            Claim::Taken { by } => {
                return Err(ClaimError::InUse(in_use_message(origin, &ns, &by, &mine)));
            }
            Claim::Free => match current {
                None => {
                    let cm: ConfigMap = serde_json::from_value(json!({
                        "metadata": {"name": ORIGIN_CLAIMS_CONFIGMAP, "namespace": ns},
                        "data": BTreeMap::from([(origin.as_str(), mine.as_str())]),
                    }))
                    .map_err(|e| CallError::Other(e.to_string()))?;
                    let pp = PostParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..Default::default()
                    };
                    with_timeout(deadline, api.create(&pp, &cm)).await.map(drop)
                }
                Some(cm) => {
                    let patch = json!({
                        "metadata": {"resourceVersion": cm.metadata.resource_version},
                        "data": {origin.as_str(): mine},
                    });
                    let pp = PatchParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..Default::default()
                    };
                    let patch = Patch::Merge(&patch);
                    let call = api.patch(ORIGIN_CLAIMS_CONFIGMAP, &pp, &patch);
                    with_timeout(deadline, call).await.map(drop)
                }
            },
        };
        match attempt {
            Ok(()) => {
                tracing::info!(cluster = %cluster.name, namespace = %ns, origin = %origin, "origin id claimed on the worker");
                return Ok(());
            }
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ClaimError::Call(CallError::Other(format!(
        "the claim of origin id {origin:?} in ConfigMap {ns}/{ORIGIN_CLAIMS_CONFIGMAP} kept \
         conflicting with concurrent writes; retrying"
    ))))
}

/// The management cluster's identity: the UID of its `kube-system` namespace (from the namespace
/// cache, which the cluster task waits for).
fn management_uid(shared: &Ctx) -> Result<String, CallError> {
    shared.registry.namespaces.kube_system_uid().ok_or_else(|| {
        CallError::Other(
            "the management cluster's kube-system namespace is not known yet (namespace list)"
                .into(),
        )
    })
}

/// The claim namespace for this connection's credentials (asked once per connection).
async fn namespace_for(cluster: &Cluster, conn: &Connection) -> Result<String, CallError> {
    if let Some((fp, ns)) = cluster.claim_namespace.lock_or_recover().clone()
        && fp == conn.fingerprint
    {
        return Ok(ns);
    }
    let api: Api<SelfSubjectReview> = Api::all(conn.request.clone());
    let review = with_timeout(
        cluster.request_timeout,
        api.create(&PostParams::default(), &SelfSubjectReview::default()),
    )
    .await?;
    let user = review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_default();
    let ns = claim_namespace(&user);
    *cluster.claim_namespace.lock_or_recover() = Some((conn.fingerprint, ns.clone()));
    Ok(ns)
}
