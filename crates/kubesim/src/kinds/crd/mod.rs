//! apiextensions.k8s.io/v1 CustomResourceDefinitions (cluster-scoped) and the in-process
//! controllers of the apiextensions apiserver that a client observes (names accepted, established,
//! instance cleanup on delete). Custom objects themselves are served by
//! `customresource::CustomResourceStrategy`, built from a CRD with `served_versions`.
//!
//! Sources: `apiextensions-apiserver/pkg/apis/apiextensions/v1/defaults.go` and `conversion.go` (the
//! internal form hoists per-version schemas/subresources that are identical across versions to
//! `spec.validation` / `spec.subresources`, which is why a single-version CRD's schema errors are
//! reported under `spec.validation.openAPIV3Schema`), `.../apiextensions/validation/validation.go`,
//! `.../apiserver/schema/validation.go` (structural schema rules), `.../registry/customresourcedefinition`
//! (strategy, status strategy, DELETE adding the cleanup finalizer), `.../controller/status/naming_controller.go`
//! and `.../controller/establish`. Held to `crd.json`.

use serde_json::{Map, Value, json};

use super::common;
use super::{DeleteAction, ResourceInfo, Strategy};
use crate::errors::FieldErrors;
use crate::json::{bool_at, ensure_obj, str_at};

pub const GROUP: &str = "apiextensions.k8s.io";
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

pub struct CrdStrategy {
    info: ResourceInfo,
}

impl Default for CrdStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl CrdStrategy {
    pub fn new() -> Self {
        Self {
            info: ResourceInfo {
                group: GROUP.into(),
                version: "v1".into(),
                kind: "CustomResourceDefinition".into(),
                plural: "customresourcedefinitions".into(),
                singular: "customresourcedefinition".into(),
                namespaced: false,
                short_names: vec!["crd".into(), "crds".into()],
                categories: vec!["api-extensions".into()],
                verbs: common::standard_verbs(),
                status_subresource: true,
                storage_version_hash: Some("jfWCUB31mvA=".into()),
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Accessors on the v1 JSON.

fn versions(crd: &Value) -> Vec<Value> {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn version_name(v: &Value) -> &str {
    str_at(v, &["name"])
}

/// The storage version's name (the first version marked `storage`).
pub fn storage_version(crd: &Value) -> Option<String> {
    versions(crd)
        .iter()
        .find(|v| bool_at(v, &["storage"]))
        .map(|v| version_name(v).to_string())
}

fn schema_of(v: &Value) -> Option<&Value> {
    v.pointer("/schema/openAPIV3Schema")
        .filter(|s| !s.is_null())
}

/// Whether the per-version `field` (schema, subresources, ...) is identical in every version, so the
/// internal form carries it at the top level (`Convert_v1_CustomResourceDefinitionSpec_To_apiextensions_...`).
fn hoisted(vs: &[Value], field: &str) -> bool {
    let first = vs.first().and_then(|v| v.get(field));
    vs.iter().all(|v| v.get(field) == first)
}

fn is_true_condition(crd: &Value, ctype: &str) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(ctype)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

pub fn is_established(crd: &Value) -> bool {
    is_true_condition(crd, "Established")
}

// ---------------------------------------------------------------------------------------------
// Defaulting and canonical shape.

const OMITEMPTY_FALSE: &[&str] = &[
    "nullable",
    "uniqueItems",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
];
const OMITEMPTY_EMPTY: &[&str] = &[
    "required",
    "enum",
    "properties",
    "allOf",
    "anyOf",
    "oneOf",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-validations",
    "description",
    "type",
    "format",
    "title",
    "pattern",
];

/// `JSONSchemaProps` as the server writes it back: `omitempty` zero values dropped.
pub fn normalize_schema(schema: &mut Value) {
    let Some(m) = schema.as_object_mut() else {
        return;
    };
    m.retain(|k, v| {
        !(OMITEMPTY_FALSE.contains(&k.as_str()) && v == &Value::Bool(false)
            || OMITEMPTY_EMPTY.contains(&k.as_str())
                && (v.is_null()
                    || v.as_array().is_some_and(Vec::is_empty)
                    || v.as_object().is_some_and(Map::is_empty)
                    || v.as_str().is_some_and(str::is_empty)))
    });
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        props.values_mut().for_each(normalize_schema);
    }
    for k in ["items", "additionalProperties", "not"] {
        if let Some(s) = m.get_mut(k)
            && s.is_object()
        {
            normalize_schema(s);
        }
    }
    for k in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(a)) = m.get_mut(k) {
            a.iter_mut().for_each(normalize_schema);
        }
    }
}

/// `SetDefaults_CustomResourceDefinition` plus the canonical status shape (`conditions`,
/// `acceptedNames.plural`/`.kind` and `storedVersions` are written even when empty).
fn default_crd(crd: &mut Value) {
    let storage = storage_version(crd);
    if let Some(spec) = ensure_obj(crd, "spec") {
        if let Some(Value::Object(names)) = spec.get_mut("names") {
            let kind = names
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if names
                .get("singular")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                names.insert("singular".into(), json!(kind.to_lowercase()));
            }
            if names
                .get("listKind")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
                && !kind.is_empty()
            {
                names.insert("listKind".into(), json!(format!("{kind}List")));
            }
        }
        let conversion = spec
            .entry("conversion")
            .or_insert_with(|| json!({"strategy": "None"}));
        if conversion.is_null() {
            *conversion = json!({"strategy": "None"});
        }
        if let Some(svc) = conversion
            .pointer_mut("/webhook/clientConfig/service")
            .and_then(Value::as_object_mut)
        {
            svc.entry("port").or_insert(json!(443));
        }
        if let Some(Value::Array(vs)) = spec.get_mut("versions") {
            for v in vs.iter_mut().filter_map(Value::as_object_mut) {
                v.entry("served").or_insert(json!(false));
                v.entry("storage").or_insert(json!(false));
                if let Some(s) = v
                    .get_mut("schema")
                    .and_then(|s| s.get_mut("openAPIV3Schema"))
                {
                    normalize_schema(s);
                }
            }
        }
    }
    if let Some(status) = ensure_obj(crd, "status") {
        status.entry("conditions").or_insert(Value::Null);
        let accepted = status.entry("acceptedNames").or_insert_with(|| json!({}));
        if let Some(a) = accepted.as_object_mut() {
            a.entry("plural").or_insert(json!(""));
            a.entry("kind").or_insert(json!(""));
        }
        let empty = status
            .get("storedVersions")
            .is_none_or(|s| s.as_array().is_none_or(Vec::is_empty));
        if empty {
            status.insert(
                "storedVersions".into(),
                storage.map_or(Value::Null, |s| json!([s])),
            );
        }
    }
}

mod controllers;
#[cfg(test)]
mod tests;
mod validation;

pub use controllers::{accept_names, establish, finish_cleanup, mark_deleting, reconcile};
pub use validation::{validate_crd, validate_crd_update, validate_names};

/// The custom-resource strategies a CRD serves, one per served version (empty until Established).
pub fn served_versions(crd: &Value) -> Vec<crate::kinds::customresource::CustomResourceStrategy> {
    if !is_established(crd) {
        return Vec::new();
    }
    versions(crd)
        .iter()
        .filter(|v| bool_at(v, &["served"]))
        .filter_map(|v| {
            crate::kinds::customresource::CustomResourceStrategy::from_crd(crd, version_name(v))
        })
        .collect()
}

impl Strategy for CrdStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn default(&self, obj: &mut Value) {
        default_crd(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        let storage = storage_version(obj);
        if let Some(m) = obj.as_object_mut() {
            m.insert(
                "status".into(),
                json!({
                    "conditions": null,
                    "acceptedNames": {"plural": "", "kind": ""},
                    "storedVersions": storage.map_or(Value::Null, |s| json!([s])),
                }),
            );
        }
        if let Some(meta) = ensure_obj(obj, "metadata") {
            meta.insert("generation".into(), json!(1));
        }
    }

    fn validate_create(&self, obj: &Value) -> FieldErrors {
        validate_crd(obj)
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let mut status = old.get("status").cloned().unwrap_or(json!({}));
        if let Some(sv) = storage_version(new) {
            let stored = status
                .get("storedVersions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if !stored.iter().any(|s| s == &json!(sv))
                && let Some(m) = status.as_object_mut()
            {
                let mut list = stored;
                list.push(json!(sv));
                m.insert("storedVersions".into(), Value::Array(list));
            }
        }
        let spec_changed = new.get("spec") != old.get("spec");
        if let Some(m) = new.as_object_mut() {
            m.insert("status".into(), status);
        }
        common::next_generation(new, old, spec_changed);
    }

    fn validate_update(&self, new: &Value, old: &Value) -> FieldErrors {
        validate_crd_update(new, old)
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        // Status updates change status (and finalizers), not spec or the other metadata.
        if let Some(m) = new.as_object_mut() {
            m.insert(
                "spec".into(),
                old.get("spec").cloned().unwrap_or(Value::Null),
            );
        }
        let keep = [
            "labels",
            "annotations",
            "ownerReferences",
            "generation",
            "selfLink",
        ];
        let old_meta = old
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if let Some(meta) = ensure_obj(new, "metadata") {
            for k in keep {
                match old_meta.get(k) {
                    Some(v) => meta.insert(k.into(), v.clone()),
                    None => meta.remove(k),
                };
            }
        }
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> FieldErrors {
        validate_names(new.pointer("/status/acceptedNames"), "status.acceptedNames")
    }

    fn convert_field_label(&self, label: &str) -> Result<String, String> {
        match label {
            "metadata.namespace" | "metadata.name" => Ok(label.to_string()),
            _ => Err(common::field_label_not_known(label)),
        }
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn on_delete(&self, stored: &Value, _options: &Value, now: &str) -> DeleteAction {
        if stored
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
        {
            DeleteAction::Default
        } else {
            DeleteAction::Update(mark_deleting(stored, now))
        }
    }
}
