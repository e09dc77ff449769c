//! The `WorkerCluster` custom resource (cluster-scoped, `courier.dev/v1alpha1`).
//!
//! A WorkerCluster registers one worker cluster: where its kubeconfig is, how large a share of
//! placements it takes, and whether it takes new ones at all. Its labels are what an origin's
//! `courier.dev/cluster-selector` matches.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, ValidationRule,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube_core::CustomResourceExt;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::DEFAULT_KUBECONFIG_KEY;
use crate::reasons::CONDITION_READY;

/// Desired state of a worker registration.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    // kube-core, not the `kube` facade: the API crate links no client.
    crates(kube_core = "::kube_core"),
    group = "courier.dev",
    version = "v1alpha1",
    kind = "WorkerCluster",
    plural = "workerclusters",
    singular = "workercluster",
    shortname = "wc",
    category = "courier",
    status = "WorkerClusterStatus",
    derive = "PartialEq",
    doc = "A worker cluster Courier may dispatch Jobs to. Cluster-scoped; its labels are what an origin Job's courier.dev/cluster-selector annotation matches.",
    // JSON form: the structured form trips clippy's duplicated_attributes on repeated `type_`.
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.serverVersion"}"#,
    printcolumn = r#"{"name":"Mirrors","type":"integer","jsonPath":".status.currentMirrors"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WorkerClusterSpec {
    /// The Secret (in Courier's own namespace) holding this worker's kubeconfig.
    pub kubeconfig_secret_ref: KubeconfigSecretRef,
    /// Share of placements relative to other clusters' weights. 0 = never chosen for new Jobs
    /// (like `paused`, but meant as a standing policy); default 1.
    #[serde(default = "default_weight")]
    #[schemars(range(min = 0))]
    pub weight: i32,
    /// true = no new placements on this cluster; Jobs already running there continue.
    #[serde(default)]
    pub paused: bool,
    /// Which namespaces of the management cluster this worker takes Jobs from: a label selector
    /// over the labels of the Job's namespace there. Every namespace has the label
    /// `kubernetes.io/metadata.name` (its name), so `{matchExpressions: [{key:
    /// kubernetes.io/metadata.name, operator: In, values: [team-a]}]}` selects by name. Absent:
    /// every namespace; an invalid selector takes none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// The namespaces of the worker Courier may use there (a mirror lands in its origin's
    /// namespace, so this also limits which Jobs it takes). Absent: every namespace, with
    /// cluster-wide rights. Set: Courier watches, lists and probes its rights only in these, so
    /// the worker chart can grant them per namespace (`--set namespaces={team-a,team-b}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "set"))]
    #[schemars(inner(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    ))]
    pub namespaces: Option<Vec<String>>,
}

/// Where a worker's kubeconfig is stored.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeconfigSecretRef {
    /// Name of the Secret in Courier's namespace.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Key in the Secret's data holding the kubeconfig; default "kubeconfig".
    #[serde(default = "default_kubeconfig_key")]
    pub key: String,
}

/// Observed state of a worker, written by Courier's cluster registry.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerClusterStatus {
    /// `Ready`: True/Connected, or False with a reason naming the problem (SecretNotFound,
    /// InvalidKubeconfig, Unreachable, Unauthorized, Forbidden).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The worker's `/version` gitVersion, e.g. `v1.36.2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// Number of current mirrors Courier has on this worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_mirrors: Option<i32>,
    /// When Courier last probed the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
}

fn default_weight() -> i32 {
    1
}

fn default_kubeconfig_key() -> String {
    DEFAULT_KUBECONFIG_KEY.to_string()
}

impl KubeconfigSecretRef {
    /// A reference to `name` with the default key.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            key: default_kubeconfig_key(),
        }
    }
}

impl WorkerClusterSpec {
    /// A spec with the defaults (weight 1, not paused) for a kubeconfig in Secret `secret_name`.
    pub fn new(secret_name: impl Into<String>) -> Self {
        Self {
            kubeconfig_secret_ref: KubeconfigSecretRef::new(secret_name),
            weight: default_weight(),
            paused: false,
            namespace_selector: None,
            namespaces: None,
        }
    }

    /// Whether Courier may use namespace `namespace` of this worker (`spec.namespaces`).
    pub fn takes_namespace(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|list| list.iter().any(|n| n == namespace))
    }
}

impl WorkerClusterStatus {
    /// The `Ready` condition, if any.
    pub fn ready_condition(&self) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == CONDITION_READY)
    }

    /// Whether the `Ready` condition is True.
    pub fn is_ready(&self) -> bool {
        self.ready_condition().is_some_and(|c| c.status == "True")
    }
}

impl WorkerCluster {
    /// Whether the cluster is Ready (status `Ready=True`).
    pub fn is_ready(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(WorkerClusterStatus::is_ready)
    }
}

/// The CEL rule on the WorkerCluster's root limiting its name (a label value) to 63 characters.
pub const NAME_LENGTH_RULE: &str = "size(self.metadata.name) <= 63";
/// The message the API server returns when [`NAME_LENGTH_RULE`] fails.
pub const NAME_LENGTH_MESSAGE: &str = "a WorkerCluster name is at most 63 characters: it becomes the value \
     of the courier.dev/cluster label on origin Jobs";

/// The WorkerCluster CustomResourceDefinition (what `courier crds` prints).
pub fn crd() -> CustomResourceDefinition {
    let mut crd = WorkerCluster::crd();
    for v in &mut crd.spec.versions {
        if let Some(root) = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            root.x_kubernetes_validations = Some(vec![ValidationRule {
                rule: NAME_LENGTH_RULE.into(),
                message: Some(NAME_LENGTH_MESSAGE.into()),
                ..Default::default()
            }]);
        }
    }
    crd
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::API_VERSION;
    use serde_json::json;

    /// Against the names fixed in DESIGN.md, written out (comparing with the constants the CRD
    /// is built from could not catch a changed constant, which breaks every installed CRD).
    #[test]
    fn crd_names_scope_and_version() {
        let crd = crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("workerclusters.courier.dev")
        );
        assert_eq!(crd.spec.group, "courier.dev");
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.kind, "WorkerCluster");
        assert_eq!(crd.spec.names.plural, "workerclusters");
        assert_eq!(crd.spec.names.singular.as_deref(), Some("workercluster"));
        assert_eq!(crd.spec.names.short_names, Some(vec!["wc".to_string()]));
        assert_eq!(crd.spec.versions.len(), 1);
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1alpha1");
        assert!(v.served && v.storage);
        let sub = v.subresources.as_ref().expect("subresources");
        assert!(sub.status.is_some(), "status subresource");
        assert_eq!(API_VERSION, "courier.dev/v1alpha1");
        let wc = serde_json::to_value(WorkerCluster::new("x", WorkerClusterSpec::new("s")))
            .expect("json");
        assert_eq!(
            (&wc["apiVersion"], &wc["kind"]),
            (&json!("courier.dev/v1alpha1"), &json!("WorkerCluster"))
        );
    }

    #[test]
    fn crd_printer_columns() {
        let crd = crd();
        let cols = crd.spec.versions[0]
            .additional_printer_columns
            .clone()
            .expect("columns");
        let got: Vec<(String, String, String)> = cols
            .into_iter()
            .map(|c| (c.name, c.type_, c.json_path))
            .collect();
        let want = [
            (
                "Ready",
                "string",
                r#".status.conditions[?(@.type=="Ready")].status"#,
            ),
            (
                "Reason",
                "string",
                r#".status.conditions[?(@.type=="Ready")].reason"#,
            ),
            ("Version", "string", ".status.serverVersion"),
            ("Mirrors", "integer", ".status.currentMirrors"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ];
        let want: Vec<(String, String, String)> = want
            .iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn crd_schema_defaults_and_bounds() {
        let crd = crd();
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("schema json");
        let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["required"], json!(["kubeconfigSecretRef"]));
        assert_eq!(spec["properties"]["weight"]["default"], json!(1));
        assert_eq!(spec["properties"]["weight"]["minimum"].as_f64(), Some(0.0));
        assert_eq!(spec["properties"]["paused"]["default"], json!(false));
        let secret_ref = &spec["properties"]["kubeconfigSecretRef"];
        assert_eq!(secret_ref["required"], json!(["name"]));
        assert_eq!(
            secret_ref["properties"]["key"]["default"],
            json!("kubeconfig")
        );
        let status = &schema["openAPIV3Schema"]["properties"]["status"]["properties"];
        assert_eq!(status["conditions"]["x-kubernetes-list-type"], json!("map"));
        for field in ["serverVersion", "currentMirrors", "lastProbeTime"] {
            assert!(status.get(field).is_some(), "status.{field} in schema");
        }
    }

    /// `spec.namespaces`: optional, a non-empty set of namespace names; absent takes every one.
    #[test]
    fn crd_schema_of_the_worker_namespaces() {
        let crd = crd();
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("schema json");
        let field = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["namespaces"];
        assert_eq!(field["type"], json!("array"), "{field}");
        assert_eq!(field["minItems"], json!(1), "{field}");
        assert_eq!(field["x-kubernetes-list-type"], json!("set"), "{field}");
        assert_eq!(field["items"]["maxLength"], json!(63), "{field}");
        assert_eq!(
            field["items"]["pattern"],
            json!("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
            "{field}"
        );
        let mut spec = WorkerClusterSpec::new("s");
        assert!(spec.takes_namespace("team-a") && spec.takes_namespace("team-b"));
        spec.namespaces = Some(vec!["team-a".into()]);
        assert!(spec.takes_namespace("team-a"));
        assert!(!spec.takes_namespace("team-b"));
        let back = serde_json::to_value(&spec).expect("serialize");
        assert_eq!(back["namespaces"], json!(["team-a"]));
        let absent = serde_json::to_value(WorkerClusterSpec::new("s")).expect("serialize");
        assert!(absent.get("namespaces").is_none(), "{absent}");
    }

    #[test]
    fn crd_limits_the_name_to_a_label_value() {
        let crd = crd();
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("schema json");
        assert_eq!(
            schema["openAPIV3Schema"]["x-kubernetes-validations"],
            json!([{"rule": NAME_LENGTH_RULE, "message": NAME_LENGTH_MESSAGE}])
        );
        assert!(NAME_LENGTH_RULE.contains(&crate::MAX_WORKER_CLUSTER_NAME.to_string()));
    }

    #[test]
    fn spec_defaults_when_deserialized() {
        let wc: WorkerCluster = serde_json::from_value(json!({
            "apiVersion": "courier.dev/v1alpha1",
            "kind": "WorkerCluster",
            "metadata": {"name": "eu-1", "labels": {"region": "eu"}},
            "spec": {"kubeconfigSecretRef": {"name": "eu-1-kubeconfig"}}
        }))
        .expect("deserialize");
        assert_eq!(wc.spec, WorkerClusterSpec::new("eu-1-kubeconfig"));
        assert_eq!(wc.spec.kubeconfig_secret_ref.key, "kubeconfig");
        assert_eq!(wc.spec.weight, 1);
        assert!(!wc.spec.paused);
        assert!(!wc.is_ready());
    }

    #[test]
    fn ready_condition_lookup() {
        let wc: WorkerCluster = serde_json::from_value(json!({
            "apiVersion": "courier.dev/v1alpha1",
            "kind": "WorkerCluster",
            "metadata": {"name": "eu-1"},
            "spec": {"kubeconfigSecretRef": {"name": "s", "key": "cfg"}, "weight": 3, "paused": true},
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "reason": "Connected", "message": "ok",
                                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "serverVersion": "v1.36.2", "currentMirrors": 12, "lastProbeTime": "2026-01-01T00:00:05Z"
            }
        }))
        .expect("deserialize");
        assert!(wc.is_ready());
        assert_eq!(wc.spec.weight, 3);
        let status = wc.status.as_ref().expect("status");
        assert_eq!(status.current_mirrors, Some(12));
        assert_eq!(
            status.ready_condition().map(|c| c.reason.as_str()),
            Some("Connected")
        );
        // Round trip keeps the wire names.
        let back = serde_json::to_value(&wc).expect("serialize");
        assert_eq!(back["spec"]["kubeconfigSecretRef"]["key"], json!("cfg"));
        assert_eq!(back["status"]["serverVersion"], json!("v1.36.2"));
    }
}
