//! Custom resources: the strategy a CRD version is served with, its OpenAPI v3 schema validation
//! (the kube-openapi validator the apiextensions apiserver runs, with its messages and the
//! `kubeOpenAPIResultToFieldErrors` mapping), schema defaulting, and the structural-schema checks a
//! CRD's own validation applies to that schema.
//!
//! Sources: `apiextensions-apiserver/pkg/registry/customresource/strategy.go` and `validator.go`
//! (generation bump on non-metadata changes, status subresource rules, TypeMeta check),
//! `.../apiserver/validation/validation.go` (error mapping), `k8s.io/kube-openapi/pkg/validation/validate`
//! (validator order: type, allOf/anyOf/oneOf/not, string, format, number, slice, enum, object;
//! object: properties before required; array items `path[i]`), `.../validation/errors/schema.go`
//! (wording), `.../apiserver/schema/defaulting` (defaults, null pruning), `.../apiserver/schema/validation.go`
//! (structural invariants). Go iterates maps in random order; properties are visited in key order here.
//! Unknown-field pruning is `crate::schema`'s job and happens before these hooks. Not covered:
//! CEL `x-kubernetes-validations` rules (compiled nowhere here), `x-kubernetes-list-type` uniqueness,
//! embedded-resource metadata, and the nested errors go-openapi merges under a failed anyOf/oneOf.

use serde_json::{Map, Value, json};

use super::common;
use super::{ResourceInfo, Strategy};
use crate::errors::{BadValue, FieldError, FieldErrors};
use crate::json::{ensure_obj, str_at};

/// Discovery's verb order for custom resources (it differs from built-ins).
const CR_VERBS: &[&str] = &[
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

pub struct CustomResourceStrategy {
    info: ResourceInfo,
    schema: Option<Value>,
    scale: Option<Value>,
    /// `selectableFields[].jsonPath` without the leading dot (`spec.color`).
    selectable: Vec<String>,
}

impl CustomResourceStrategy {
    /// The strategy serving `version` of `crd` (names from `status.acceptedNames` once accepted,
    /// as the real handler serves them; `spec.names` before that). `None` if the version is absent.
    pub fn from_crd(crd: &Value, version: &str) -> Option<Self> {
        let spec = crd.get("spec")?;
        let v = spec
            .get("versions")?
            .as_array()?
            .iter()
            .find(|v| str_at(v, &["name"]) == version)?;
        let accepted = crd.pointer("/status/acceptedNames");
        let names = match accepted {
            Some(a) if !str_at(a, &["plural"]).is_empty() => a,
            _ => spec.get("names")?,
        };
        let strings = |k: &str| crate::json::strings(names.get(k));
        let group = str_at(spec, &["group"]).to_string();
        let kind = str_at(names, &["kind"]).to_string();
        let storage = super::crd::storage_version(crd).unwrap_or_else(|| version.to_string());
        let subresources = v.get("subresources");
        let status_subresource = subresources
            .and_then(|s| s.get("status"))
            .is_some_and(|s| !s.is_null());
        let selectable = v
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|f| str_at(f, &["jsonPath"]).trim_start_matches('.').to_string())
                    .collect()
            })
            .unwrap_or_default();
        Some(Self {
            info: ResourceInfo {
                group: group.clone(),
                version: version.to_string(),
                kind: kind.clone(),
                plural: str_at(names, &["plural"]).to_string(),
                singular: str_at(names, &["singular"]).to_string(),
                namespaced: str_at(spec, &["scope"]) == "Namespaced",
                short_names: strings("shortNames"),
                categories: strings("categories"),
                verbs: CR_VERBS.iter().map(|s| s.to_string()).collect(),
                status_subresource,
                storage_version_hash: Some(common::storage_version_hash(&group, &storage, &kind)),
            },
            schema: v.pointer("/schema/openAPIV3Schema").cloned(),
            scale: subresources
                .and_then(|s| s.get("scale"))
                .filter(|s| !s.is_null())
                .cloned(),
            selectable,
        })
    }

    /// The version's `openAPIV3Schema` (what `crate::schema` prunes against).
    pub fn schema(&self) -> Option<&Value> {
        self.schema.as_ref()
    }

    /// The scale subresource definition, if any (`specReplicasPath`, ...).
    pub fn scale(&self) -> Option<&Value> {
        self.scale.as_ref()
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> FieldErrors {
        let mut errs = Vec::new();
        // `ValidateTypeMeta`: answered alone when wrong.
        let kind = str_at(obj, &["kind"]);
        if kind != self.info.kind {
            errs.push(FieldError::invalid(
                "kind",
                BadValue::Str(kind.into()),
                format!("must be {}", self.info.kind),
            ));
        }
        let av = str_at(obj, &["apiVersion"]);
        if av != self.info.api_version() {
            errs.push(FieldError::invalid(
                "apiVersion",
                BadValue::Str(av.into()),
                format!("must be {}", self.info.api_version()),
            ));
        }
        if !errs.is_empty() {
            return errs;
        }
        if let Some(schema) = &self.schema {
            validate_value(obj, schema, "", old, &mut errs);
        }
        errs
    }
}

/// Whether any version's schema sets a default (CRD validation requires structural schemas then).
mod defaults;
mod structural;
#[cfg(test)]
mod tests;
mod values;

pub use defaults::{apply_defaults, prune_non_nullable_nulls, spec_has_defaults};
pub use structural::validate_crd_schema;
pub use values::validate_value;

fn value_at<'a>(obj: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted.split('.').try_fold(obj, |cur, k| cur.get(k))
}

impl Strategy for CustomResourceStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn default(&self, obj: &mut Value) {
        if let Some(schema) = &self.schema {
            prune_non_nullable_nulls(obj, schema);
            apply_defaults(obj, schema);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if self.info.status_subresource
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        if let Some(meta) = ensure_obj(obj, "metadata") {
            meta.insert("generation".into(), json!(1));
        }
    }

    fn validate_create(&self, obj: &Value) -> FieldErrors {
        self.validate(obj, None)
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if self.info.status_subresource {
            common::keep_stored(new, old, "status");
        }
        let non_meta = |v: &Value| -> Map<String, Value> {
            v.as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| k.as_str() != "metadata")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default()
        };
        let changed = non_meta(new) != non_meta(old);
        common::next_generation(new, old, changed);
    }

    fn validate_update(&self, new: &Value, old: &Value) -> FieldErrors {
        self.validate(new, Some(old))
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        // Everything but status (and managedFields, tracked by the caller) comes from `old`.
        let status = new.get("status").cloned();
        let managed = new.pointer("/metadata/managedFields").cloned();
        *new = old.clone();
        if let Some(m) = new.as_object_mut() {
            match status {
                Some(s) => m.insert("status".into(), s),
                None => m.remove("status"),
            };
        }
        if let Some(meta) = ensure_obj(new, "metadata") {
            match managed {
                Some(mf) => meta.insert("managedFields".into(), mf),
                None => meta.remove("managedFields"),
            };
        }
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> FieldErrors {
        self.validate(new, Some(old))
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        if !self.selectable.iter().any(|f| f == field) {
            return None;
        }
        Some(match value_at(obj, field) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        })
    }

    fn convert_field_label(&self, label: &str) -> Result<String, String> {
        if label == "metadata.name"
            || (self.info.namespaced && label == "metadata.namespace")
            || self.selectable.iter().any(|f| f == label)
        {
            Ok(label.to_string())
        } else {
            Err(common::field_label_not_supported(label))
        }
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn supports_strategic_merge_patch(&self) -> bool {
        false
    }
}
