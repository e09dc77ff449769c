//! The resources kubesim serves. Each kind is a `Strategy`: the per-kind hooks the generic request
//! flow (`crate::api`) calls, in the same order the real API server's generic registry calls its
//! `RESTCreateStrategy` / `RESTUpdateStrategy` hooks. Hooks are pure functions of JSON values.

pub mod job;

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
    /// for this kind (answered `field label "x" not supported for <Kind>`). `metadata.name` and
    /// `metadata.namespace` are handled by the caller.
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
}

/// A server-side printer: column definitions and a function that fills one row's cells.
pub struct TableSpec {
    /// `(name, type, format, description, priority)`.
    pub columns: &'static [(&'static str, &'static str, &'static str, &'static str, i32)],
    pub cells: fn(&Value) -> Vec<Value>,
}
