//! The resources kubesim serves. Each kind is a `Strategy`: the per-kind hooks the generic request
//! flow (`crate::api`) calls, in the same order the real API server's generic registry calls its
//! `RESTCreateStrategy` / `RESTUpdateStrategy` hooks. Hooks are pure functions of JSON values.

pub mod admissionpolicy;
pub mod common;
pub mod configmap;
pub mod crd;
pub mod customresource;
pub mod event;
pub mod job;
pub mod lease;
pub mod namespace;
pub mod pod;
pub mod resourcequota;
pub mod sar;
pub mod secret;
pub mod serviceaccount;
pub mod ssar;
#[cfg(test)]
pub(crate) mod testutil;
pub mod tokenreview;

use serde_json::Value;

use crate::errors::{ApiError, FieldErrors};

/// Static description of a served resource (what discovery lists and what URLs map to).
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceInfo {
    /// API group; empty for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Verbs as discovery lists them.
    pub verbs: Vec<String>,
    /// Whether a `/status` subresource is served.
    pub status_subresource: bool,
    /// Discovery's `storageVersionHash` (opaque; copied from the recordings for built-ins).
    pub storage_version_hash: Option<String>,
}

impl ResourceInfo {
    /// `batch/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }
}

/// A server-side warning (`Warning: 299 - "..."` header).
pub type Warnings = Vec<String>;

/// Which name function the kind's `ValidateObjectMeta` applies (one definition, shared with the
/// generic ObjectMeta validation).
pub use crate::validation::meta::NameRule;

/// What a DELETE of one object does, for kinds whose registry overrides `Delete`.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteAction {
    /// The generic graceful-deletion flow (finalizers, propagation policy, removal).
    Default,
    /// Store this object instead (a new resourceVersion) and answer 200 with it: the first DELETE of
    /// a Namespace (phase Terminating) or of a CRD (cleanup finalizer + Terminating condition).
    Update(Value),
    /// Answer 200 with the stored object unchanged (a Namespace already terminating whose
    /// `spec.finalizers` are not empty yet).
    Keep,
}

/// Per-kind behaviour. Every hook has a do-nothing default so a simple kind implements only what it needs.
///
/// Create: `decode` -> `default` -> (managedFields) -> metadata filled (name, uid, creationTimestamp) ->
/// `prepare_for_create` -> generic ObjectMeta validation + `validate_create` -> store.
/// Update (PUT or a patch on the main resource): `decode` -> `default` -> `prepare_for_update` ->
/// generic ObjectMeta update validation + `validate_update` -> store.
/// Status update (PUT or patch on `/status`): `decode` -> `default` -> `prepare_for_status_update` ->
/// `validate_status_update` -> store.
pub trait Strategy: Send + Sync + 'static {
    fn info(&self) -> &ResourceInfo;

    /// Kind-specific decoding the codec does before anything else (base64 of Secret data, Lease
    /// MicroTime format, ...). Errors are answered as they are (typically 400 BadRequest). Unknown-field
    /// pruning is generic and happens before this hook.
    fn decode(&self, _obj: &mut Value) -> Result<Warnings, ApiError> {
        Ok(Vec::new())
    }

    /// Scheme defaulting (`SetDefaults_*`), applied to every decoded body.
    fn default(&self, _obj: &mut Value) {}

    /// `PrepareForCreate`: drop status, set generation, generate selectors... `metadata.uid` is set.
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// `Validate` (kind-specific part; generic ObjectMeta checks are done by the caller).
    fn validate_create(&self, _obj: &Value) -> FieldErrors {
        Vec::new()
    }

    /// `PrepareForUpdate` on the main resource: keep status from `old`, bump generation on spec change.
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) {}

    /// `ValidateUpdate` (kind-specific part).
    fn validate_update(&self, _new: &Value, _old: &Value) -> FieldErrors {
        Vec::new()
    }

    /// `PrepareForUpdate` of the status strategy: keep everything but status from `old`.
    fn prepare_for_status_update(&self, _new: &mut Value, _old: &Value) {}

    /// `ValidateUpdate` of the status strategy.
    fn validate_status_update(&self, _new: &Value, _old: &Value) -> FieldErrors {
        Vec::new()
    }

    /// The value of a field-selector field for this object, or `None` when the field is not selectable
    /// for this kind. `field` is the label `convert_field_label` answered and `obj` the *stored* object
    /// (they differ from the request's label and served form only for events.k8s.io/v1 Events).
    /// `metadata.name` and `metadata.namespace` are handled by the caller.
    fn field_value(&self, _obj: &Value, _field: &str) -> Option<String> {
        None
    }

    /// Columns and cells for `as=Table` requests (`kubectl get`). `None` = the default Name/Created At table.
    fn table(&self) -> Option<&'static TableSpec> {
        None
    }

    /// The storage this resource's objects live in, as `(group, plural)`. Two served versions of the same
    /// objects (core/v1 `events` and events.k8s.io/v1 `events`) name the same storage and convert.
    fn storage(&self) -> (&str, &str) {
        (&self.info().group, &self.info().plural)
    }

    /// Whether `to_storage`/`from_storage` do anything (skipped on the hot path when not).
    fn converts(&self) -> bool {
        false
    }

    /// Converts an object of this served version into the storage form (called after validation).
    fn to_storage(&self, obj: Value) -> Value {
        obj
    }

    /// Converts a stored object into this served version (for reads, lists and watch events).
    #[allow(clippy::wrong_self_convention)] // `self` is the strategy, not the object converted
    fn from_storage(&self, stored: &Value) -> Value {
        stored.clone()
    }

    /// The name rule of this kind's `ValidateObjectMeta` (see `NameRule`).
    fn name_rule(&self) -> NameRule {
        NameRule::DnsSubdomain
    }

    /// The propagation policy of a DELETE that names none (`DefaultGarbageCollectionPolicy`): `Orphan`
    /// for batch/v1 Jobs (kept for compatibility), `Background` for most kinds.
    fn default_propagation(&self) -> &'static str {
        "Background"
    }

    /// Warnings a DELETE with these `DeleteOptions` gets, whatever its outcome (batch/v1 Jobs warn that
    /// the default propagation orphans pods).
    fn delete_warnings(&self, _options: &Value) -> Warnings {
        Vec::new()
    }

    /// The group and kind `Invalid` errors name (`Job.batch`). Both Event versions validate the internal
    /// core Event, so events.k8s.io answers `Event "x" is invalid`.
    fn invalid_kind(&self) -> (&str, &str) {
        (&self.info().group, &self.info().kind)
    }

    /// `AllowCreateOnUpdate`: a PUT of a missing object creates it (201) instead of answering 404.
    /// True for Leases and Events; false for Jobs, Secrets, ConfigMaps, Namespaces, CRDs and CRs.
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// `AllowUnconditionalUpdate`: a PUT without `metadata.resourceVersion` overwrites. When false
    /// (Leases, CRDs, CRs) such a PUT is a 422 built by `unconditional_update_error`.
    fn allow_unconditional_update(&self) -> bool {
        true
    }

    /// `ConvertFieldLabel` for field selectors: the label to match on the *stored* object (events.k8s.io
    /// maps `regarding.name` to `involvedObject.name`), or the BadRequest message. The default
    /// accepts `metadata.name`, `metadata.namespace` and every field for which `field_value` of an empty
    /// object answers `Some`, and words the refusal like batch/v1 does.
    fn convert_field_label(&self, label: &str) -> Result<String, String> {
        if label == "metadata.name"
            || label == "metadata.namespace"
            || self
                .field_value(&Value::Object(Default::default()), label)
                .is_some()
        {
            Ok(label.to_string())
        } else {
            Err(format!(
                "field label {} not supported for {}",
                crate::errors::go_quote(label),
                self.info().kind
            ))
        }
    }

    /// Subresources other than `status` that discovery lists, as `(name, verbs)`
    /// (`namespaces/finalize` with `["update"]`).
    fn extra_subresources(&self) -> &'static [(&'static str, &'static [&'static str])] {
        &[]
    }

    /// The `(group, version, kind)` a subresource answers with when it is not this resource's own
    /// kind (`serviceaccounts/token`: authentication.k8s.io/v1 TokenRequest), for discovery.
    fn subresource_kind(&self, _sub: &str) -> Option<(&'static str, &'static str, &'static str)> {
        None
    }

    /// Registry-specific DELETE behaviour (`DeleteAction`); `options` is the request's
    /// `DeleteOptions` body (or `{}`) and `now` the server time as RFC3339.
    fn on_delete(&self, _stored: &Value, _options: &Value, _now: &str) -> DeleteAction {
        DeleteAction::Default
    }

    /// Whether `application/strategic-merge-patch+json` is accepted. Custom resources have no
    /// patch strategy metadata, so the real server answers 415 (crd.json "strategic-merge on CR").
    fn supports_strategic_merge_patch(&self) -> bool {
        true
    }

    /// Whether something beyond `metadata.finalizers` keeps a deleted object alive (a Namespace
    /// with `spec.finalizers`). The generic "delete during update" check (`ShouldDeleteDuringUpdate`:
    /// no finalizers left and a deletionTimestamp set) must also require this to be false.
    fn pending_finalization(&self, _obj: &Value) -> bool {
        false
    }
}

/// The 422 for a PUT without `metadata.resourceVersion` on a kind whose strategy does not allow
/// unconditional updates (`leases.coordination.k8s.io "x" is invalid: metadata.resourceVersion:
/// Invalid value: 0: must be specified for an update`). The real registry qualifies the error with
/// the *resource* (`leases.coordination.k8s.io`), not the kind, and prints the parsed version (0).
pub fn unconditional_update_error(info: &ResourceInfo, name: &str) -> ApiError {
    ApiError::invalid(
        &info.group,
        &info.plural,
        name,
        &[crate::errors::FieldError::invalid(
            "metadata.resourceVersion",
            crate::errors::BadValue::Int(0),
            "must be specified for an update",
        )],
    )
}

/// A server-side printer: column definitions and a function that fills one row's cells.
pub struct TableSpec {
    /// `(name, type, format, description, priority)`.
    pub columns: &'static [(&'static str, &'static str, &'static str, &'static str, i32)],
    pub cells: fn(&Value) -> Vec<Value>,
}

/// The built-in kinds of this module other than Jobs, each served version once (core/v1 and
/// events.k8s.io/v1 Events are two strategies over one storage). Custom resources are added per
/// established CRD with `crd::served_versions`.
pub fn other_builtins() -> Vec<std::sync::Arc<dyn Strategy>> {
    vec![
        std::sync::Arc::new(namespace::NamespaceStrategy::new()),
        std::sync::Arc::new(secret::SecretStrategy::new()),
        std::sync::Arc::new(serviceaccount::ServiceAccountStrategy::new()),
        std::sync::Arc::new(configmap::ConfigMapStrategy::new()),
        std::sync::Arc::new(event::EventStrategy::core()),
        std::sync::Arc::new(event::EventStrategy::events_v1()),
        std::sync::Arc::new(lease::LeaseStrategy::new()),
        std::sync::Arc::new(crd::CrdStrategy::new()),
        std::sync::Arc::new(ssar::SelfSubjectAccessReviewStrategy::new()),
        std::sync::Arc::new(sar::SubjectAccessReviewStrategy::new()),
        std::sync::Arc::new(tokenreview::TokenReviewStrategy::new()),
        std::sync::Arc::new(tokenreview::SelfSubjectReviewStrategy::new()),
        std::sync::Arc::new(pod::PodStrategy::new()),
        std::sync::Arc::new(resourcequota::ResourceQuotaStrategy::new()),
        std::sync::Arc::new(admissionpolicy::PolicyStrategy::new()),
        std::sync::Arc::new(admissionpolicy::BindingStrategy::new()),
    ]
}

#[cfg(test)]
mod discovery_tests {
    use serde_json::{Value, json};

    use super::testutil::fixture;

    /// Every strategy's ResourceInfo against the recorded discovery documents (legacy lists carry
    /// storageVersionHash; aggregated discovery covers groups the legacy steps did not fetch).
    #[test]
    fn resource_info_matches_recorded_discovery() {
        let f = fixture("discovery.json");
        let mut legacy: Vec<(String, Value)> = Vec::new();
        let mut aggregated: Vec<(String, Value)> = Vec::new();
        for st in f["steps"].as_array().unwrap() {
            let body = &st["response"]["body"];
            if let Some(gv) = body.get("groupVersion").and_then(Value::as_str) {
                for r in body["resources"].as_array().unwrap() {
                    legacy.push((format!("{gv}/{}", r["name"].as_str().unwrap()), r.clone()));
                }
            }
            if st["name"].as_str().unwrap().contains("aggregated") {
                for g in body["items"].as_array().unwrap() {
                    let group = g["metadata"]["name"].as_str().unwrap_or("");
                    for v in g["versions"].as_array().unwrap() {
                        let gv = if group.is_empty() {
                            v["version"].as_str().unwrap().to_string()
                        } else {
                            format!("{group}/{}", v["version"].as_str().unwrap())
                        };
                        for r in v["resources"].as_array().unwrap() {
                            aggregated.push((
                                format!("{gv}/{}", r["resource"].as_str().unwrap()),
                                r.clone(),
                            ));
                        }
                    }
                }
            }
        }
        let find = |list: &[(String, Value)], k: &str| {
            list.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        };
        for s in super::other_builtins() {
            let i = s.info();
            let id = format!("{}/{}", i.api_version(), i.plural);
            let agg = find(&aggregated, &id)
                .unwrap_or_else(|| panic!("{id} not in aggregated discovery"));
            assert_eq!(json!(i.verbs), agg["verbs"], "{id} verbs");
            assert_eq!(json!(i.singular), agg["singularResource"], "{id} singular");
            assert_eq!(
                agg["scope"],
                if i.namespaced {
                    "Namespaced"
                } else {
                    "Cluster"
                },
                "{id} scope"
            );
            assert_eq!(
                agg.get("shortNames").cloned().unwrap_or(json!([])),
                json!(i.short_names),
                "{id} shortNames"
            );
            assert_eq!(
                agg.get("categories").cloned().unwrap_or(json!([])),
                json!(i.categories),
                "{id} categories"
            );
            let subs: Vec<String> = agg
                .get("subresources")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|s| s["subresource"].as_str().unwrap().to_string())
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(
                subs.contains(&"status".to_string()),
                i.status_subresource,
                "{id} status"
            );
            for (sub, verbs) in s.extra_subresources() {
                assert!(subs.contains(&sub.to_string()), "{id}/{sub}");
                let legacy_sub = find(&legacy, &format!("{id}/{sub}")).unwrap();
                assert_eq!(json!(verbs), legacy_sub["verbs"]);
            }
            if let Some(l) = find(&legacy, &id) {
                assert_eq!(
                    l.get("storageVersionHash").cloned(),
                    i.storage_version_hash.clone().map(Value::String),
                    "{id} storageVersionHash"
                );
                assert_eq!(json!(i.kind), l["kind"]);
            }
        }
    }
}
