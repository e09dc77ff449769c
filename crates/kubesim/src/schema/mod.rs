//! Structural schemas of the kinds kubesim serves, and the decoder-side operations built on them.
//!
//! - [`builtin`] returns the schema of a built-in kind (generated from the Kubernetes v1.36 OpenAPI document,
//!   see `crates/kubesim/schema/tools/gen_builtin_schema.py`); [`from_crd`] builds one at run time from a
//!   CustomResourceDefinition version's `openAPIV3Schema`.
//! - [`prune_unknown`] drops fields the schema does not know (what Go's decoder silently does) and reports
//!   them; [`strict_issues`] finds unknown and duplicate fields in the raw request body, in document order,
//!   worded like the real server (`unknown field "spec.bogusField"`, `duplicate field "metadata.name"`).
//! - [`normalize`] makes a decoded object look like the Go JSON round trip of the typed object
//!   (omitempty zero values dropped, value structs and non-omitempty fields present).
//!
//! Everything is a pure function over `serde_json::Value`; schemas are parsed once and shared.

mod crd;
mod decode;
mod load;
pub mod model;
mod normalize;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use serde_json::Value;

pub use crd::{CrdSchemaError, apply_crd_defaults, from_crd};
pub use decode::{
    ScanError, StrictIssue, prune_unknown, prune_unknown_except, strict_decoding_message,
    strict_issues, warning_header_value,
};
pub use model::{GoMode, ListKind, Schema, TypeId};
pub use normalize::{normalize, normalize_except, zero_value_of};

/// The built-in schema and its `group/version/Kind` roots, parsed on first use.
static BUILTIN: LazyLock<(Schema, HashMap<String, TypeId>)> =
    LazyLock::new(|| match load::load_builtin() {
        Ok(s) => s,
        // The data file is generated and compiled in; a failure here is a build defect, reported loudly
        // by the schema tests. An empty schema keeps the server running (every field "unknown").
        Err(e) => {
            tracing::error!("kubesim builtin schema failed to load: {e}");
            (
                Schema {
                    types: Vec::new(),
                    offset: 0,
                    base: None,
                    named: HashMap::new(),
                },
                HashMap::new(),
            )
        }
    });

/// The built-in schema (shared by every built-in kind and extended by custom resource schemas).
pub fn builtin_schema() -> &'static Schema {
    &BUILTIN.0
}

static BUILTIN_KINDS: LazyLock<HashMap<String, TypeRef>> = LazyLock::new(|| {
    let mut out = HashMap::new();
    for (gvk, &root) in &BUILTIN.1 {
        let Some((api_version, kind)) = gvk.rsplit_once('/') else {
            continue;
        };
        let resets: &'static [(&'static str, &'static [&'static str])] = match gvk.as_str() {
            // GetResetFields of the kinds' REST strategies: what the main resource and each subresource
            // ignore (the strategy overwrites it from the stored object).
            "batch/v1/Job" => &[("", &["status"]), ("status", &["spec"])],
            "v1/Namespace" => &[
                ("", &["status"]),
                ("status", &["spec"]),
                ("finalize", &["status"]),
            ],
            // podStrategy / podStatusStrategy (the status one also keeps deletionTimestamp and
            // ownerReferences, which kubesim's status flow never takes from a client anyway).
            "v1/Pod" => &[("", &["status"]), ("status", &["spec"])],
            "v1/ResourceQuota" => &[("", &["status"]), ("status", &["spec"])],
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" => {
                &[("", &["status"]), ("status", &["spec"])]
            }
            "apiextensions.k8s.io/v1/CustomResourceDefinition" => {
                &[("", &["status"]), ("status", &["metadata", "spec"])]
            }
            _ => &[],
        };
        let schema = SchemaRef::Static(builtin_schema());
        let zero = zero_value_of(&schema, root);
        out.insert(
            gvk.clone(),
            TypeRef(Arc::new(Resource {
                schema,
                root,
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                custom: false,
                resets: resets
                    .iter()
                    .map(|(s, f)| (s.to_string(), f.iter().map(|x| x.to_string()).collect()))
                    .collect(),
                zero,
            })),
        );
    }
    out
});

/// The schema of a built-in kind: `builtin("batch/v1", "Job")`, `builtin("v1", "Secret")`.
///
/// Served: batch/v1 Job, v1 Secret/ConfigMap/Namespace/Event/Status, events.k8s.io/v1 Event,
/// coordination.k8s.io/v1 Lease, apiextensions.k8s.io/v1 CustomResourceDefinition,
/// authorization.k8s.io/v1 SelfSubjectAccessReview.
pub fn builtin(api_version: &str, kind: &str) -> Option<TypeRef> {
    BUILTIN_KINDS.get(&format!("{api_version}/{kind}")).cloned()
}

/// A schema shared by reference: the static built-in one, or a custom resource's own.
#[derive(Debug, Clone)]
pub enum SchemaRef {
    Static(&'static Schema),
    Owned(Arc<Schema>),
}

impl std::ops::Deref for SchemaRef {
    type Target = Schema;
    fn deref(&self) -> &Schema {
        match self {
            SchemaRef::Static(s) => s,
            SchemaRef::Owned(s) => s,
        }
    }
}

#[derive(Debug)]
struct Resource {
    schema: SchemaRef,
    root: TypeId,
    api_version: String,
    kind: String,
    custom: bool,
    /// `(subresource, top-level fields)`, the main resource being `""`.
    resets: Vec<(String, Vec<String>)>,
    zero: Value,
}

/// The schema of one served kind in one version (cheap to clone).
#[derive(Debug, Clone)]
pub struct TypeRef(Arc<Resource>);

impl TypeRef {
    pub fn schema(&self) -> &Schema {
        &self.0.schema
    }
    pub fn root(&self) -> TypeId {
        self.0.root
    }
    /// `batch/v1`, `v1`, `courier.dev/v1alpha1`.
    pub fn api_version(&self) -> &str {
        &self.0.api_version
    }
    pub fn kind(&self) -> &str {
        &self.0.kind
    }
    /// Whether this is a custom resource (served from a CRD): no strategic merge patch, no Go round trip.
    pub fn is_custom(&self) -> bool {
        self.0.custom
    }
    /// Top-level fields a write through `subresource` (`None` = the main resource) does not own because
    /// the strategy resets them (`GetResetFields`): `status` on the main resource of kinds with a status
    /// subresource, `spec` on `/status`.
    pub fn reset_fields(&self, subresource: Option<&str>) -> &[String] {
        let sub = subresource.unwrap_or("");
        self.0
            .resets
            .iter()
            .find(|(s, _)| s == sub)
            .map(|(_, f)| f.as_slice())
            .unwrap_or(&[])
    }
    /// The Go zero value of the type: the "live object" a create is compared against for managedFields.
    pub fn zero_value(&self) -> &Value {
        &self.0.zero
    }
}

/// The lower-cased last segment of a type's Go package, for messages (`v1`, `v1alpha1`).
pub(crate) fn version_of(api_version: &str) -> &str {
    api_version.rsplit('/').next().unwrap_or(api_version)
}

#[cfg(test)]
mod tests;
