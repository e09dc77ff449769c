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

use super::common::{self, child, index, key};
use super::{DeleteAction, ResourceInfo, Strategy};
use crate::errors::{BadValue, FieldError, FieldErrors};
use crate::json::{bool_at, ensure_obj, meta_str, str_at};
use crate::validation::names;

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

// ---------------------------------------------------------------------------------------------
// Validation.

fn join_invalid(path: String, value: &str, errs: Vec<String>, out: &mut FieldErrors) {
    if !errs.is_empty() {
        out.push(FieldError::invalid(
            path,
            BadValue::Str(value.into()),
            errs.join(","),
        ));
    }
}

/// Go's `%#v` of a `[]string` (the bad value of some storedVersions errors).
fn go_string_slice(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        None => "[]string(nil)".into(),
        Some(a) => format!(
            "[]string{{{}}}",
            a.iter()
                .map(|s| crate::errors::go_quote(s.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `ValidateCustomResourceDefinitionNames`.
pub fn validate_names(names: Option<&Value>, path: &str) -> FieldErrors {
    let mut errs = Vec::new();
    let empty = json!({});
    let names = names.unwrap_or(&empty);
    let s = |k: &str| str_at(names, &[k]);
    for k in ["plural", "singular"] {
        if !s(k).is_empty() {
            join_invalid(
                child(path, k),
                s(k),
                names::legacy::is_dns1035_label(s(k)),
                &mut errs,
            );
        }
    }
    for k in ["kind", "listKind"] {
        let v = s(k);
        let msgs = names::legacy::is_dns1035_label(&v.to_lowercase());
        if !v.is_empty() && !msgs.is_empty() {
            errs.push(FieldError::invalid(
                child(path, k),
                BadValue::Str(v.into()),
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    msgs.join(",")
                ),
            ));
        }
    }
    for (i, sn) in names
        .get("shortNames")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let sn = sn.as_str().unwrap_or("");
        join_invalid(
            index(&child(path, "shortNames"), i),
            sn,
            names::legacy::is_dns1035_label(sn),
            &mut errs,
        );
    }
    if !s("kind").is_empty() && s("kind") == s("listKind") {
        errs.push(FieldError::invalid(
            child(path, "listKind"),
            BadValue::Str(s("listKind").into()),
            "kind and listKind may not be the same",
        ));
    }
    for (i, c) in names
        .get("categories")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let c = c.as_str().unwrap_or("");
        join_invalid(
            index(&child(path, "categories"), i),
            c,
            names::legacy::is_dns1035_label(c),
            &mut errs,
        );
    }
    errs
}

fn has_status(sub: Option<&Value>) -> bool {
    sub.and_then(|s| s.get("status"))
        .is_some_and(|s| !s.is_null())
}

/// `ValidateCustomResourceDefinitionSubresources` (scale paths).
fn validate_subresources(sub: Option<&Value>, path: &str) -> FieldErrors {
    let mut errs = Vec::new();
    let Some(scale) = sub.and_then(|s| s.get("scale")).filter(|s| s.is_object()) else {
        return errs;
    };
    for (k, prefix, what) in [
        (
            "specReplicasPath",
            ".spec.",
            "should be a json path under .spec",
        ),
        (
            "statusReplicasPath",
            ".status.",
            "should be a json path under .status",
        ),
    ] {
        let p = format!("{path}.scale.{k}");
        let v = str_at(scale, &[k]);
        if v.is_empty() {
            errs.push(FieldError::required(p, ""));
        } else if !v.starts_with('.') {
            errs.push(FieldError::invalid(
                p,
                BadValue::Str(v.into()),
                "must be a simple json path starting with .",
            ));
        } else if !v.starts_with(prefix) {
            errs.push(FieldError::invalid(p, BadValue::Str(v.into()), what));
        }
    }
    errs
}

/// `validateCustomResourceDefinitionSpec` + status + storedVersions + API approval + preserveUnknownFields.
pub fn validate_crd(crd: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    let spec = crd.get("spec").cloned().unwrap_or(json!({}));
    let group = str_at(&spec, &["group"]);
    let plural = str_at(&spec, &["names", "plural"]);

    // The extra rule of the CRD's name function: `<plural>.<group>`.
    let name = meta_str(crd, "name");
    if name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid(
            "metadata.name",
            BadValue::Str(name.into()),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }

    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else {
        let msgs = names::legacy::is_dns1123_subdomain(group);
        if !msgs.is_empty() {
            join_invalid("spec.group".into(), group, msgs, &mut errs);
        } else if !group.contains('.') {
            errs.push(FieldError::invalid(
                "spec.group",
                BadValue::Str(group.into()),
                "should be a domain with at least one dot",
            ));
        }
    }

    let scope = str_at(&spec, &["scope"]);
    match scope {
        "" => errs.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported(
            "spec.scope",
            BadValue::Str(other.into()),
            &["Cluster", "Namespaced"],
        )),
    }

    let vs = versions(crd);
    let schema_hoisted = !vs.is_empty() && hoisted(&vs, "schema");
    let sub_hoisted = !vs.is_empty() && hoisted(&vs, "subresources");
    let top_schema = if schema_hoisted {
        vs.first().and_then(schema_of)
    } else {
        None
    };
    if top_schema.is_none() {
        for (i, v) in vs.iter().enumerate() {
            if schema_of(v).is_none() {
                errs.push(FieldError::required(
                    format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    "",
                ));
            }
        }
    }
    if spec.get("preserveUnknownFields") == Some(&json!(true))
        && super::customresource::spec_has_defaults(&vs)
    {
        errs.push(FieldError::invalid(
            "spec.preserveUnknownFields",
            BadValue::Bool(true),
            "must be false in order to use defaults in the schema",
        ));
    }

    let any_status = vs.iter().any(|v| has_status(v.get("subresources")));
    let mut storage_count = 0;
    let mut seen = std::collections::HashSet::new();
    let mut unique = true;
    for (i, v) in vs.iter().enumerate() {
        if bool_at(v, &["storage"]) {
            storage_count += 1;
        }
        let vn = version_name(v);
        if !seen.insert(vn.to_string()) {
            unique = false;
        }
        let vpath = index("spec.versions", i);
        join_invalid(
            child(&vpath, "name"),
            vn,
            names::legacy::is_dns1035_label(vn),
            &mut errs,
        );
        // validateCustomResourceDefinitionVersion
        let deprecated = bool_at(v, &["deprecated"]);
        if let Some(w) = v.get("deprecationWarning").and_then(Value::as_str) {
            let mut problems = Vec::new();
            if !deprecated {
                problems.push("can only be set for deprecated versions".to_string());
            } else {
                if w.len() > 256 {
                    problems.push("must be <= 256 characters long".into());
                }
                if w.is_empty() {
                    problems.push("must not be an empty string".into());
                }
            }
            for p in problems {
                errs.push(FieldError::invalid(
                    child(&vpath, "deprecationWarning"),
                    BadValue::Str(w.into()),
                    p,
                ));
            }
        }
        if !schema_hoisted && let Some(schema) = schema_of(v) {
            errs.extend(super::customresource::validate_crd_schema(
                schema,
                &child(&vpath, "schema"),
                has_status(v.get("subresources")),
            ));
        }
        if !sub_hoisted {
            errs.extend(validate_subresources(
                v.get("subresources"),
                &child(&vpath, "subresources"),
            ));
        }
    }
    let versions_value = BadValue::Raw(format!(
        "[]apiextensions.CustomResourceDefinitionVersion{{{}}}",
        vs.iter()
            .map(|v| format!(
                "apiextensions.CustomResourceDefinitionVersion{{Name:{}, Served:{}, Storage:{}, ...}}",
                crate::errors::go_quote(version_name(v)),
                bool_at(v, &["served"]),
                bool_at(v, &["storage"])
            ))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if !unique {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_value.clone(),
            "must contain unique version names",
        ));
    }
    if storage_count != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_value,
            "must have exactly one version marked as storage version",
        ));
    }
    for k in ["plural", "singular", "kind", "listKind"] {
        if str_at(&spec, &["names", k]).is_empty() {
            errs.push(FieldError::required(format!("spec.names.{k}"), ""));
        }
    }
    errs.extend(validate_names(spec.get("names"), "spec.names"));
    if let Some(schema) = top_schema {
        errs.extend(super::customresource::validate_crd_schema(
            schema,
            "spec.validation",
            any_status,
        ));
    }
    if sub_hoisted {
        errs.extend(validate_subresources(
            vs.first().and_then(|v| v.get("subresources")),
            "spec.subresources",
        ));
    }

    // Conversion.
    let conv = spec.get("conversion").cloned().unwrap_or(Value::Null);
    let strategy = str_at(&conv, &["strategy"]);
    match strategy {
        "" => errs.push(FieldError::required("spec.conversion.strategy", "")),
        "None" => {
            if conv
                .pointer("/webhook/clientConfig")
                .is_some_and(|c| !c.is_null())
            {
                errs.push(FieldError::forbidden(
                    "spec.conversion.webhookClientConfig",
                    "should not be set when strategy is not set to Webhook",
                ));
            }
            if conv
                .pointer("/webhook/conversionReviewVersions")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
            {
                errs.push(FieldError::forbidden(
                    "spec.conversion.conversionReviewVersions",
                    "should not be set when strategy is not set to Webhook",
                ));
            }
        }
        "Webhook" => {
            match conv
                .pointer("/webhook/clientConfig")
                .filter(|c| !c.is_null())
            {
                None => errs.push(FieldError::required(
                    "spec.conversion.webhookClientConfig",
                    "required when strategy is set to Webhook",
                )),
                Some(cc) => {
                    let has_url = cc.get("url").is_some_and(|u| !u.is_null());
                    let has_svc = cc.get("service").is_some_and(|s| !s.is_null());
                    if has_url == has_svc {
                        errs.push(FieldError::required(
                            "spec.conversion.webhookClientConfig",
                            "exactly one of url or service is required",
                        ));
                    }
                }
            }
            let crv = conv
                .pointer("/webhook/conversionReviewVersions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if crv.is_empty() {
                errs.push(FieldError::required(
                    "spec.conversion.conversionReviewVersions",
                    "",
                ));
            } else if !crv.iter().any(|v| v == "v1" || v == "v1beta1") {
                errs.push(FieldError::invalid(
                    "spec.conversion.conversionReviewVersions",
                    BadValue::Raw(go_string_slice(Some(&Value::Array(crv.clone())))),
                    "must include at least one of v1, v1beta1",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            "spec.conversion.strategy",
            BadValue::Str(other.into()),
            &["None", "Webhook"],
        )),
    }

    errs.extend(validate_names(
        crd.pointer("/status/acceptedNames"),
        "status.acceptedNames",
    ));
    errs.extend(validate_stored_versions(crd));
    errs.extend(validate_api_approval(crd, None));
    if spec.get("preserveUnknownFields") == Some(&json!(true)) {
        errs.push(FieldError::invalid(
            "spec.preserveUnknownFields",
            BadValue::Bool(true),
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in openAPIV3Schema instead",
        ));
    }
    errs
}

/// `ValidateCustomResourceDefinitionStoredVersions`.
fn validate_stored_versions(crd: &Value) -> FieldErrors {
    let stored = crd.pointer("/status/storedVersions");
    let list = crate::json::strings(stored);
    if list.is_empty() {
        return vec![FieldError::invalid(
            "status.storedVersions",
            BadValue::Raw(go_string_slice(stored)),
            "must have at least one stored version",
        )];
    }
    let mut errs = Vec::new();
    let vs = versions(crd);
    for v in &vs {
        if bool_at(v, &["storage"]) && !list.iter().any(|s| s == version_name(v)) {
            errs.push(FieldError::invalid(
                "status.storedVersions",
                BadValue::Raw(go_string_slice(stored)),
                format!("must have the storage version {}", version_name(v)),
            ));
        }
    }
    for (i, s) in list.iter().enumerate() {
        if !vs.iter().any(|v| version_name(v) == s) {
            errs.push(FieldError::invalid(
                index("status.storedVersions", i),
                BadValue::Str(s.clone()),
                format!("missing from spec.versions; {s} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {s} and removes {s} from status.storedVersions"),
            ));
        }
    }
    errs
}

const API_APPROVAL: &str = "api-approved.kubernetes.io";

/// `validateAPIApproval`: groups `k8s.io`, `kubernetes.io` and their subdomains need the
/// `api-approved.kubernetes.io` annotation (a URL, or a value starting with `unapproved`).
fn validate_api_approval(crd: &Value, old: Option<&Value>) -> FieldErrors {
    let group = str_at(crd, &["spec", "group"]);
    let protected = group == "k8s.io"
        || group == "kubernetes.io"
        || group.ends_with(".k8s.io")
        || group.ends_with(".kubernetes.io");
    if !protected {
        return Vec::new();
    }
    let state = |obj: &Value| -> (u8, String) {
        match obj
            .pointer(&format!("/metadata/annotations/{API_APPROVAL}"))
            .and_then(Value::as_str)
        {
            None => (
                0,
                format!(
                    "protected groups must have approval annotation {}, see https://github.com/kubernetes/enhancements/pull/1111",
                    crate::errors::go_quote(API_APPROVAL)
                ),
            ),
            Some(v) if v.starts_with("unapproved") => (2, String::new()),
            // `url.ParseRequestURI` accepts absolute URLs and absolute paths.
            Some(v) if v.starts_with('/') || v.contains("://") => (1, String::new()),
            Some(_) => (
                3,
                format!(
                    "protected groups must have approval annotation {} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111",
                    crate::errors::go_quote(API_APPROVAL)
                ),
            ),
        }
    };
    let (new_state, reason) = state(crd);
    if let Some(old) = old
        && state(old).0 == new_state
    {
        return Vec::new();
    }
    let path = key("metadata.annotations", API_APPROVAL);
    match new_state {
        0 => vec![FieldError::required(path, reason)],
        3 => vec![FieldError::invalid(
            path,
            BadValue::Str(str_at(crd, &["metadata", "annotations", API_APPROVAL]).into()),
            reason,
        )],
        _ => Vec::new(),
    }
}

/// `validateCustomResourceDefinitionUpdate` minus ObjectMeta: the create rules, `group` and
/// `names.plural` immutable, `scope` and `names.kind` immutable once Established.
pub fn validate_crd_update(new: &Value, old: &Value) -> FieldErrors {
    let mut errs = validate_crd(new);
    // The API-approval rule compares with the old state on update.
    errs.retain(|e| !e.field.starts_with("metadata.annotations[api-approved"));
    errs.extend(validate_api_approval(new, Some(old)));
    let immutable = |errs: &mut FieldErrors, path: &str, ptr: &str| {
        let (n, o) = (new.pointer(ptr), old.pointer(ptr));
        if n != o {
            errs.push(FieldError::invalid(
                path,
                BadValue::Str(n.and_then(Value::as_str).unwrap_or("").into()),
                "field is immutable",
            ));
        }
    };
    // These sit inside the spec checks on the real server; appended here.
    if is_established(old) {
        immutable(&mut errs, "spec.scope", "/spec/scope");
        immutable(&mut errs, "spec.names.kind", "/spec/names/kind");
    }
    immutable(&mut errs, "spec.group", "/spec/group");
    immutable(&mut errs, "spec.names.plural", "/spec/names/plural");
    errs
}

// ---------------------------------------------------------------------------------------------
// Controllers.

/// The naming controller's answer for `crd` (`calculateNamesAndConditions`): accepted names (each
/// requested name unless another CRD of the group already accepted it) and the NamesAccepted /
/// Established conditions. `all` holds every CRD (this one included). Returns the new status.
pub fn accept_names(crd: &Value, all: &[Value], now: &str) -> Value {
    let group = str_at(crd, &["spec", "group"]);
    let mut resources = std::collections::HashSet::new();
    let mut kinds = std::collections::HashSet::new();
    for other in all
        .iter()
        .filter(|o| str_at(o, &["spec", "group"]) == group)
    {
        let a = other
            .pointer("/status/acceptedNames")
            .cloned()
            .unwrap_or(json!({}));
        resources.insert(str_at(&a, &["plural"]).to_string());
        resources.insert(str_at(&a, &["singular"]).to_string());
        for s in a
            .get("shortNames")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            resources.insert(s.as_str().unwrap_or("").to_string());
        }
        kinds.insert(str_at(&a, &["kind"]).to_string());
        kinds.insert(str_at(&a, &["listKind"]).to_string());
    }
    let requested = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let accepted = crd
        .pointer("/status/acceptedNames")
        .cloned()
        .unwrap_or(json!({}));
    let mut new_names = accepted.as_object().cloned().unwrap_or_default();
    let mut cond: Option<(&str, String)> = None;
    let fresh = |req: &str, acc: &str, used: &std::collections::HashSet<String>| {
        if req == acc || !used.contains(req) {
            Ok(())
        } else {
            Err(format!(
                "{} is already in use",
                crate::errors::go_quote(req)
            ))
        }
    };
    for (k, used, reason) in [
        ("plural", &resources, "PluralConflict"),
        ("singular", &resources, "SingularConflict"),
    ] {
        let (req, acc) = (str_at(&requested, &[k]), str_at(&accepted, &[k]));
        match fresh(req, acc, used) {
            Ok(()) => {
                new_names.insert(k.into(), json!(req));
            }
            Err(e) => cond = Some((reason, e)),
        }
    }
    let req_short = requested.get("shortNames").cloned().unwrap_or(Value::Null);
    let acc_short = accepted.get("shortNames").cloned().unwrap_or(Value::Null);
    if req_short != acc_short {
        let existing: Vec<&str> = acc_short
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut problems = Vec::new();
        for s in req_short
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if existing.contains(&s) {
                continue;
            }
            if let Err(e) = fresh(s, "", &resources) {
                problems.push(e);
            }
        }
        if problems.is_empty() {
            match req_short {
                Value::Null => new_names.remove("shortNames"),
                v => new_names.insert("shortNames".into(), v),
            };
        } else {
            let msg = if problems.len() == 1 {
                problems.remove(0)
            } else {
                format!("[{}]", problems.join(", "))
            };
            cond = Some(("ShortNamesConflict", msg));
        }
    }
    for (k, reason) in [("kind", "KindConflict"), ("listKind", "ListKindConflict")] {
        let (req, acc) = (str_at(&requested, &[k]), str_at(&accepted, &[k]));
        match fresh(req, acc, &kinds) {
            Ok(()) => {
                new_names.insert(k.into(), json!(req));
            }
            Err(e) => cond = Some((reason, e)),
        }
    }
    match requested.get("categories").and_then(Value::as_array) {
        Some(c) if !c.is_empty() => {
            new_names.insert("categories".into(), Value::Array(c.clone()));
        }
        _ => {
            new_names.remove("categories");
        }
    }

    let mut status = crd.get("status").cloned().unwrap_or(json!({}));
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names_ok = cond.is_none();
    match cond {
        None => common::set_condition(
            &mut conditions,
            "NamesAccepted",
            "True",
            "NoConflicts",
            "no conflicts found",
            now,
        ),
        Some((reason, msg)) => {
            common::set_condition(&mut conditions, "NamesAccepted", "False", reason, &msg, now)
        }
    }
    let established_true = conditions.iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some("Established")
            && c.get("status").and_then(Value::as_str) == Some("True")
    });
    if !established_true {
        let has_established = conditions
            .iter()
            .any(|c| c.get("type").and_then(Value::as_str) == Some("Established"));
        if names_ok {
            common::set_condition(
                &mut conditions,
                "Established",
                "False",
                "Installing",
                "the initial names have been accepted",
                now,
            );
        } else if !has_established {
            common::set_condition(
                &mut conditions,
                "Established",
                "False",
                "NotAccepted",
                "not all names are accepted",
                now,
            );
        }
    }
    if let Some(m) = status.as_object_mut() {
        m.insert("acceptedNames".into(), Value::Object(new_names));
        m.insert("conditions".into(), Value::Array(conditions));
    }
    status
}

/// The establishing controller: once names are accepted, Established becomes True.
pub fn establish(status: &mut Value, now: &str) {
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names_ok = conditions.iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some("NamesAccepted")
            && c.get("status").and_then(Value::as_str) == Some("True")
    });
    if names_ok {
        common::set_condition(
            &mut conditions,
            "Established",
            "True",
            "InitialNamesAccepted",
            "the initial names have been accepted",
            now,
        );
    }
    if let Some(m) = status.as_object_mut() {
        m.insert("conditions".into(), Value::Array(conditions));
    }
}

/// What the apiextensions controllers write after a CRD is created or changed: the CRD with its
/// new status, or `None` when nothing changes (the lead stores it as a status update, which bumps
/// the resourceVersion, as "wait until Established" in crd.json shows).
pub fn reconcile(crd: &Value, all: &[Value], now: &str) -> Option<Value> {
    if crd
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return None;
    }
    let mut status = accept_names(crd, all, now);
    establish(&mut status, now);
    if crd.get("status") == Some(&status) {
        return None;
    }
    let mut out = crd.clone();
    out["status"] = status;
    Some(out)
}

/// The CRD after its first DELETE: deletionTimestamp, the cleanup finalizer and the Terminating
/// condition (crd.json "delete CRD").
pub fn mark_deleting(stored: &Value, now: &str) -> Value {
    let mut crd = stored.clone();
    if let Some(meta) = ensure_obj(&mut crd, "metadata") {
        meta.entry("deletionTimestamp").or_insert(json!(now));
        let fins = meta.entry("finalizers").or_insert_with(|| json!([]));
        if !fins.is_array() {
            *fins = json!([]);
        }
        if let Some(a) = fins.as_array_mut()
            && !a.iter().any(|f| f == CLEANUP_FINALIZER)
        {
            a.push(json!(CLEANUP_FINALIZER));
        }
    }
    set_status_condition(
        &mut crd,
        "Terminating",
        "True",
        "InstanceDeletionPending",
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        now,
    );
    crd
}

fn set_status_condition(
    crd: &mut Value,
    ctype: &str,
    status: &str,
    reason: &str,
    msg: &str,
    now: &str,
) {
    let mut conditions: Vec<Value> = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    common::set_condition(&mut conditions, ctype, status, reason, msg, now);
    if let Some(s) = ensure_obj(crd, "status") {
        s.insert("conditions".into(), Value::Array(conditions));
    }
}

/// The finalizer controller once every custom object is gone: Terminating=False
/// (`InstanceDeletionCompleted`, or `NeverEstablished`) and the cleanup finalizer removed. Stored
/// through the status strategy; with no finalizers left the object is deleted during that update.
pub fn finish_cleanup(crd: &Value, now: &str) -> Value {
    let mut out = crd.clone();
    if is_established(crd) {
        set_status_condition(
            &mut out,
            "Terminating",
            "False",
            "InstanceDeletionCompleted",
            "removed all instances",
            now,
        );
    } else {
        set_status_condition(
            &mut out,
            "Terminating",
            "False",
            "NeverEstablished",
            "resource was never established",
            now,
        );
    }
    if let Some(Value::Array(f)) = out.pointer_mut("/metadata/finalizers") {
        f.retain(|x| x != CLEANUP_FINALIZER);
    }
    if out
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
        && let Some(m) = out.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.remove("finalizers");
    }
    out
}

/// The custom-resource strategies a CRD serves, one per served version (empty until Established).
pub fn served_versions(crd: &Value) -> Vec<super::customresource::CustomResourceStrategy> {
    if !is_established(crd) {
        return Vec::new();
    }
    versions(crd)
        .iter()
        .filter(|v| bool_at(v, &["served"]))
        .filter_map(|v| {
            super::customresource::CustomResourceStrategy::from_crd(crd, version_name(v))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::testutil::{fixture, step};

    fn created(f: &Value) -> Value {
        let s = CrdStrategy::new();
        let mut obj = step(f, "create CRD")["request"]["body"].clone();
        s.default(&mut obj);
        s.prepare_for_create(&mut obj);
        obj
    }

    fn without_meta(v: &Value) -> Value {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("metadata");
        v
    }

    #[test]
    fn create_response_shape() {
        let f = fixture("crd.json");
        let obj = created(&f);
        let errs = CrdStrategy::new().validate_create(&obj);
        assert!(errs.is_empty(), "{errs:?}");
        let want = &step(&f, "create CRD")["response"]["body"];
        assert_eq!(without_meta(&obj), without_meta(want));
        assert_eq!(obj["metadata"]["generation"], 1);
    }

    #[test]
    fn controllers_establish_like_the_recording() {
        let f = fixture("crd.json");
        let obj = created(&f);
        let now = "<time>";
        let done = reconcile(&obj, std::slice::from_ref(&obj), now).expect("changes");
        let want = &step(&f, "wait until Established")["response"]["body"];
        assert_eq!(done["status"], want["status"]);
        assert!(reconcile(&done, std::slice::from_ref(&done), "later").is_none());
        assert_eq!(served_versions(&done).len(), 1);
        assert!(served_versions(&obj).is_empty());
    }

    #[test]
    fn delete_adds_finalizer_and_terminating_condition() {
        let f = fixture("crd.json");
        let established = step(&f, "wait until Established")["response"]["body"].clone();
        let DeleteAction::Update(deleting) =
            CrdStrategy::new().on_delete(&established, &json!({}), "<time>")
        else {
            panic!("first delete updates");
        };
        let want = &step(&f, "delete CRD")["response"]["body"];
        assert_eq!(deleting["status"], want["status"]);
        assert_eq!(
            deleting["metadata"]["finalizers"],
            want["metadata"]["finalizers"]
        );
        let gone = finish_cleanup(&deleting, "t");
        assert!(gone["metadata"].get("finalizers").is_none());
        assert_eq!(
            gone["status"]["conditions"][2]["reason"],
            "InstanceDeletionCompleted"
        );
    }

    #[test]
    fn name_conflicts_are_reported() {
        let f = fixture("crd.json");
        let established = step(&f, "wait until Established")["response"]["body"].clone();
        let mut other = created(&f);
        other["metadata"]["name"] = json!("others.courier.dev");
        other["spec"]["names"]["plural"] = json!("others");
        let status = accept_names(&other, &[established.clone(), other.clone()], "t");
        // Every check runs; the last conflict found names the condition.
        let c = &status["conditions"][0];
        assert_eq!(c["reason"], "ListKindConflict");
        assert_eq!(c["message"], "\"WorkerClusterList\" is already in use");
        assert_eq!(status["acceptedNames"]["plural"], "others");
        assert_eq!(status["conditions"][1]["reason"], "NotAccepted");
    }

    #[test]
    fn spec_validation_messages() {
        let f = fixture("crd.json");
        let mut bad = created(&f);
        bad["spec"]["group"] = json!("courier");
        bad["spec"]["scope"] = json!("Global");
        bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["weight"] = json!({"minimum": 1});
        let msgs: Vec<String> = validate_crd(&bad).iter().map(FieldError::message).collect();
        assert_eq!(
            msgs,
            [
                "metadata.name: Invalid value: \"workerclusters.courier.dev\": must be spec.names.plural+\".\"+spec.group",
                "spec.group: Invalid value: \"courier\": should be a domain with at least one dot",
                "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
                "spec.validation.openAPIV3Schema.properties[spec].properties[weight].type: Required value: must not be empty for specified object fields",
            ]
        );
        let mut noschema = created(&f);
        noschema["spec"]["versions"][0]
            .as_object_mut()
            .unwrap()
            .remove("schema");
        noschema["spec"]["versions"][0]["storage"] = json!(false);
        let msgs: Vec<String> = validate_crd(&noschema)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs[0],
            "spec.versions[0].schema.openAPIV3Schema: Required value"
        );
        assert!(msgs[1].ends_with("must have exactly one version marked as storage version"));
    }

    #[test]
    fn update_rules() {
        let f = fixture("crd.json");
        let old = step(&f, "wait until Established")["response"]["body"].clone();
        let s = CrdStrategy::new();
        let mut new = old.clone();
        new["spec"]["names"]["kind"] = json!("Worker");
        new["spec"]["names"]["listKind"] = json!("WorkerList");
        new["status"] = json!({});
        s.prepare_for_update(&mut new, &old);
        assert_eq!(new["status"], old["status"]);
        assert_eq!(new["metadata"]["generation"], 2);
        let msgs: Vec<String> = s
            .validate_update(&new, &old)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            ["spec.names.kind: Invalid value: \"Worker\": field is immutable"]
        );
        assert!(!s.allow_unconditional_update());
    }
}
