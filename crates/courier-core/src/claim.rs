//! Claiming an origin id on a worker. Two management clusters that share a worker with the same
//! `--origin` id would each take the other's mirrors for orphans of its own and delete them. So
//! before acting on a worker, a management cluster claims its id there: a key in the ConfigMap
//! [`courier_api::ORIGIN_CLAIMS_CONFIGMAP`] (in the namespace of Courier's ServiceAccount on the
//! worker) maps the id to the UID of the management cluster's `kube-system` namespace. A worker
//! where the id belongs to another management cluster is not used at all (`OriginIdInUse`).

use std::collections::BTreeMap;

/// The claim namespace for credentials that are not a ServiceAccount's.
pub const USER_CLAIM_NAMESPACE: &str = "default";

/// What the claims ConfigMap says about this management cluster's origin id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The id is claimed by this management cluster.
    Held,
    /// Nobody claimed the id: add it.
    Free,
    /// Another management cluster (its `kube-system` UID) holds the id.
    Taken { by: String },
}

/// Judges the claims (`None`: the ConfigMap does not exist) for `origin_id` and this management
/// cluster's identity.
pub fn judge(
    claims: Option<&BTreeMap<String, String>>,
    origin_id: &str,
    management_uid: &str,
) -> Claim {
    match claims.and_then(|c| c.get(origin_id)) {
        None => Claim::Free,
        Some(uid) if uid == management_uid => Claim::Held,
        Some(uid) => Claim::Taken { by: uid.clone() },
    }
}

/// Where the claim lives on a worker: the namespace of the ServiceAccount the credentials belong to
/// (`system:serviceaccount:<namespace>:<name>`, the worker chart's), else (credentials of a user,
/// e.g. an admin's) the `default` namespace, which every cluster has.
pub fn claim_namespace(username: &str) -> String {
    username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .map(|(ns, _)| ns.to_string())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| USER_CLAIM_NAMESPACE.to_string())
}

/// The `Ready=False` message of a worker where another management cluster holds the id.
pub fn in_use_message(origin_id: &str, namespace: &str, other: &str, mine: &str) -> String {
    format!(
        "origin id {origin_id:?} is claimed on this worker by another management cluster \
         (kube-system UID {other}; this one is {mine}), in ConfigMap {namespace}/{}: nothing is \
         placed, collected or deleted here. Give each management cluster its own --origin (chart \
         value origin)",
        courier_api::ORIGIN_CLAIMS_CONFIGMAP
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_held_free_or_taken() {
        let claims = BTreeMap::from([("courier".to_string(), "uid-a".to_string())]);
        assert_eq!(judge(Some(&claims), "courier", "uid-a"), Claim::Held);
        assert_eq!(
            judge(Some(&claims), "courier", "uid-b"),
            Claim::Taken { by: "uid-a".into() }
        );
        assert_eq!(judge(Some(&claims), "eu", "uid-b"), Claim::Free);
        assert_eq!(judge(None, "courier", "uid-b"), Claim::Free);
    }

    #[test]
    fn the_claim_lives_with_the_service_account() {
        assert_eq!(
            claim_namespace("system:serviceaccount:batch-ops:courier-dispatcher"),
            "batch-ops"
        );
        assert_eq!(claim_namespace("kubernetes-admin"), "default");
        assert_eq!(claim_namespace("system:serviceaccount::x"), "default");
    }

    #[test]
    fn the_message_names_the_other_cluster_and_the_fix() {
        let m = in_use_message("courier", "courier-system", "uid-a", "uid-b");
        assert!(m.contains("uid-a") && m.contains("uid-b") && m.contains("--origin"));
        assert!(m.contains("courier-system/courier-origins"), "{m}");
    }
}
