//! Every Kubernetes API call Courier's controller makes, as data. Three things depend on this table:
//! the worker rights probed with SelfSubjectAccessReviews (by the controller and by `courier cluster
//! add`), a test that records what the controller really sends to kubesim and fails on any call
//! missing here, and the chart tests that fail if the Helm charts' RBAC does not grant every entry.
//! A new call in the code therefore needs a row here, and the row needs a rule in the charts.

use courier_api::{ORIGIN_CLAIMS_CONFIGMAP, WORKER_POLICY_NAME};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};

/// Which cluster a call goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The management cluster Courier runs in (`charts/courier`).
    Management,
    /// Every registered worker cluster (`charts/courier-worker`).
    Worker,
}

/// Where a call may land, which decides whether a ClusterRole or a namespaced Role must grant it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Namespaced objects in any namespace, or a list/watch across all namespaces.
    AnyNamespace,
    /// Only Courier's own namespace (`--namespace`): a Role there is enough.
    OwnNamespace,
    /// A cluster-scoped resource.
    Cluster,
}

/// Who has to grant a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Courier's RBAC (the charts' Roles and ClusterRoles).
    Rbac,
    /// Every authenticated user, through the default `system:basic-user` ClusterRole.
    Everyone,
    /// Courier's RBAC, only when the web view reviews its callers (`ui.enabled` in the chart).
    RbacWithUi,
    /// Courier's RBAC, only when the controller creates missing namespaces on workers
    /// (`--create-worker-namespaces`; `createNamespaces` in the worker chart).
    RbacCreatingNamespaces,
}

/// One kind of request: verb on group/resource[/subresource].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiCall {
    pub target: Target,
    /// API group; empty for the core group.
    pub group: &'static str,
    /// Plural resource name.
    pub resource: &'static str,
    /// Empty unless the call goes to a subresource (`status`).
    pub subresource: &'static str,
    /// The authorization verb (get, list, watch, create, update, patch, delete).
    pub verb: &'static str,
    pub scope: Scope,
    pub grant: Grant,
    /// The one object the call may name (RBAC `resourceNames`); empty = any object. Never set on
    /// create, list or watch: RBAC cannot restrict those by name.
    pub name: &'static str,
    /// What the call is for (shown in docs and test failures).
    pub why: &'static str,
}

const fn call(
    target: Target,
    group: &'static str,
    resource: &'static str,
    subresource: &'static str,
    verb: &'static str,
    scope: Scope,
    why: &'static str,
) -> ApiCall {
    ApiCall {
        target,
        group,
        resource,
        subresource,
        verb,
        scope,
        grant: Grant::Rbac,
        name: "",
        why,
    }
}

use Scope::{AnyNamespace, Cluster, OwnNamespace};
use Target::{Management as M, Worker as W};

/// Calls to the management cluster.
#[rustfmt::skip]
pub const MANAGEMENT_CALLS: &[ApiCall] = &[
    call(M, "batch", "jobs", "", "list", AnyNamespace, "origin Job cache (initial list)"),
    call(M, "batch", "jobs", "", "watch", AnyNamespace, "origin Job cache"),
    call(M, "batch", "jobs", "", "get", AnyNamespace, "fresh read of an origin (reconcile, GC confirmation)"),
    call(M, "batch", "jobs", "", "patch", AnyNamespace, "intent (cluster label, epoch, finalizer) and finalizer removal"),
    call(M, "batch", "jobs", "status", "patch", AnyNamespace, "copy the mirror's status onto the origin"),
    call(M, "events.k8s.io", "events", "", "create", AnyNamespace, "events on origin Jobs"),
    call(M, "events.k8s.io", "events", "", "patch", AnyNamespace, "repeated events on origin Jobs (series count)"),
    call(M, "courier.dev", "workerclusters", "", "list", Cluster, "WorkerCluster registrations (initial list)"),
    call(M, "courier.dev", "workerclusters", "", "watch", Cluster, "WorkerCluster registrations"),
    call(M, "courier.dev", "workerclusters", "", "patch", Cluster, "drain finalizer: added to every WorkerCluster, removed once a deleted one is drained"),
    call(M, "courier.dev", "workerclusters", "", "get", Cluster, "fresh read of a WorkerCluster when a drain-finalizer write meets a conflict"),
    call(M, "courier.dev", "workerclusters", "status", "patch", Cluster, "Ready condition, version, mirror count"),
    call(M, "", "namespaces", "", "list", Cluster, "namespace labels (WorkerClusters' namespaceSelector) and the kube-system UID (initial list)"),
    call(M, "", "namespaces", "", "watch", Cluster, "namespace labels and the kube-system UID: this management cluster's identity in origin id claims"),
    call(M, "", "secrets", "", "list", OwnNamespace, "worker kubeconfig Secrets labelled courier.dev/kubeconfig=true (initial list)"),
    call(M, "", "secrets", "", "watch", OwnNamespace, "worker kubeconfig Secrets labelled courier.dev/kubeconfig=true (rotation)"),
    call(M, "", "secrets", "", "get", OwnNamespace, "a referenced Secret missing from the labelled cache: does it exist without the label?"),
    ApiCall {
        name: crate::config::DEFAULT_LEASE_NAME,
        ..call(M, "coordination.k8s.io", "leases", "", "get", OwnNamespace, "leader election: read the Lease")
    },
    call(M, "coordination.k8s.io", "leases", "", "create", OwnNamespace, "leader election: the first leader creates the Lease"),
    ApiCall {
        name: crate::config::DEFAULT_LEASE_NAME,
        ..call(M, "coordination.k8s.io", "leases", "", "update", OwnNamespace, "leader election: acquire, renew, release")
    },
    ApiCall {
        grant: Grant::RbacWithUi,
        ..call(M, "authentication.k8s.io", "tokenreviews", "", "create", Cluster,
               "web view off loopback: who a caller's bearer token belongs to")
    },
    ApiCall {
        grant: Grant::RbacWithUi,
        ..call(M, "authorization.k8s.io", "subjectaccessreviews", "", "create", Cluster,
               "web view off loopback: which namespaces' Jobs (and whether the clusters) a caller may list")
    },
];

/// Calls to every worker cluster.
#[rustfmt::skip]
pub const WORKER_CALLS: &[ApiCall] = &[
    call(W, "batch", "jobs", "", "create", AnyNamespace, "create a mirror"),
    call(W, "batch", "jobs", "", "get", AnyNamespace, "read a mirror back (adoption after AlreadyExists)"),
    call(W, "batch", "jobs", "", "list", AnyNamespace, "mirror cache (initial list, label courier.dev/origin)"),
    call(W, "batch", "jobs", "", "watch", AnyNamespace, "mirror cache"),
    call(W, "batch", "jobs", "", "patch", AnyNamespace, "spec changes flowing down (suspend, parallelism, ...)"),
    call(W, "batch", "jobs", "", "delete", AnyNamespace, "delete stale, orphaned and finished mirrors"),
    ApiCall {
        grant: Grant::RbacCreatingNamespaces,
        ..call(W, "", "namespaces", "", "create", Cluster,
               "the origin's namespace when the worker lacks it (only with --create-worker-namespaces)")
    },
    call(W, "", "namespaces", "", "get", Cluster, "the kube-system namespace's UID: the worker's identity (duplicate registrations)"),
    ApiCall {
        name: ORIGIN_CLAIMS_CONFIGMAP,
        ..call(W, "", "configmaps", "", "get", OwnNamespace, "origin id claims: read them")
    },
    call(W, "", "configmaps", "", "create", OwnNamespace, "origin id claims: the first management cluster creates them"),
    ApiCall {
        name: ORIGIN_CLAIMS_CONFIGMAP,
        ..call(W, "", "configmaps", "", "patch", OwnNamespace, "origin id claims: add this origin id (resourceVersion precondition)")
    },
    ApiCall {
        name: WORKER_POLICY_NAME,
        ..call(W, "admissionregistration.k8s.io", "validatingadmissionpolicies", "", "get", Cluster,
               "probe: whether the worker chart's admission policy is installed (PolicyInstalled)")
    },
    ApiCall {
        name: WORKER_POLICY_NAME,
        ..call(W, "admissionregistration.k8s.io", "validatingadmissionpolicybindings", "", "get", Cluster,
               "probe: whether that policy's binding is installed (PolicyInstalled)")
    },
    ApiCall {
        grant: Grant::Everyone,
        ..call(W, "authorization.k8s.io", "selfsubjectaccessreviews", "", "create", Cluster,
               "probe that the credentials still hold every right above")
    },
    ApiCall {
        grant: Grant::Everyone,
        ..call(W, "authentication.k8s.io", "selfsubjectreviews", "", "create", Cluster,
               "who the credentials belong to: the ServiceAccount's namespace holds the origin id claims")
    },
];

/// Every call, management first.
pub fn all() -> impl Iterator<Item = &'static ApiCall> {
    MANAGEMENT_CALLS.iter().chain(WORKER_CALLS)
}

/// The rights a worker's credentials must hold everywhere (what `courier cluster add` and the probe
/// review, cluster-wide): (verb, group, resource) of every worker call granted by RBAC, namespace
/// creation only when the controller creates namespaces. Calls in Courier's own namespace there
/// (the origin id claims) are not reviewed: the claim itself reports a refusal, naming it. Nor are
/// calls restricted to one object by name (the admission policy reads): a cluster-wide review
/// cannot pass for them, and the probe reports their refusal as unknown, not as Forbidden. No
/// worker call uses a subresource (a unit test holds that, so a new one cannot slip past the
/// reviews).
pub fn worker_rights(
    creating_namespaces: bool,
) -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
    worker_rights_scoped(creating_namespaces)
        .map(|(_, verb, group, resource)| (verb, group, resource))
}

/// [`worker_rights`] with each right's [`Scope`]: a WorkerCluster listing its namespaces
/// (`spec.namespaces`) needs the `AnyNamespace` ones only in those namespaces.
pub fn worker_rights_scoped(
    creating_namespaces: bool,
) -> impl Iterator<Item = (Scope, &'static str, &'static str, &'static str)> {
    WORKER_CALLS
        .iter()
        .filter(|c| c.scope != OwnNamespace && c.name.is_empty())
        .filter(move |c| {
            c.grant == Grant::Rbac
                || (creating_namespaces && c.grant == Grant::RbacCreatingNamespaces)
        })
        .map(|c| (c.scope, c.verb, c.group, c.resource))
}

/// The SelfSubjectAccessReview asking whether the caller may `verb` `group`/`resource` (in any
/// namespace): one shape for the controller's probe and `courier cluster add`.
pub fn access_review(verb: &str, group: &str, resource: &str) -> SelfSubjectAccessReview {
    access_review_in(verb, group, resource, None)
}

/// [`access_review`] in one namespace (`Some`), or in every namespace (`None`).
pub fn access_review_in(
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: namespace.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_unique_and_on_their_own_cluster() {
        for (i, a) in all().enumerate() {
            for b in all().skip(i + 1) {
                assert!(
                    (a.target, a.group, a.resource, a.subresource, a.verb)
                        != (b.target, b.group, b.resource, b.subresource, b.verb),
                    "duplicate row {a:?}"
                );
            }
        }
        assert!(
            MANAGEMENT_CALLS
                .iter()
                .all(|c| c.target == Target::Management)
        );
        assert!(WORKER_CALLS.iter().all(|c| c.target == Target::Worker));
    }

    #[test]
    fn worker_rights_cover_the_mirror_lifecycle() {
        let rights: Vec<_> = worker_rights(false).collect();
        for verb in ["create", "get", "list", "watch", "patch", "delete"] {
            assert!(rights.contains(&(verb, "batch", "jobs")), "{verb} jobs");
        }
        assert!(
            !rights.contains(&("create", "", "namespaces")),
            "namespaces are not Courier's to create by default"
        );
        assert!(worker_rights(true).any(|r| r == ("create", "", "namespaces")));
        // Only the Job rights can be granted per namespace; the rest stays cluster-wide.
        let per_namespace: Vec<_> = worker_rights_scoped(true)
            .filter(|(scope, ..)| *scope == AnyNamespace)
            .map(|(_, verb, group, resource)| (verb, group, resource))
            .collect();
        assert_eq!(per_namespace.len(), 6, "{per_namespace:?}");
        assert!(
            per_namespace
                .iter()
                .all(|(_, g, r)| (*g, *r) == ("batch", "jobs"))
        );
        assert!(rights.contains(&("get", "", "namespaces")));
        assert!(
            !rights.iter().any(|(_, _, r)| *r == "configmaps"),
            "the claims ConfigMap is in one namespace: a cluster-wide review would refuse it"
        );
        assert!(
            WORKER_CALLS.iter().all(|c| c.subresource.is_empty()),
            "worker_rights() and the access reviews would need the subresource"
        );
        // Access reviews are open to everyone: probing for them would be circular.
        assert!(
            !rights
                .iter()
                .any(|(_, _, r)| *r == "selfsubjectaccessreviews")
        );
    }
}
