//! A CRD's own checks of a version schema: structural invariants, value validations, the OpenAPI
//! checks and valid defaults (`validateCustomResourceDefinitionValidation`).

use regex::Regex;
use serde_json::{Map, Value, json};

use super::super::common::{child, index, key};
use super::values::validate_value;
use crate::errors::{BadValue, FieldError, FieldErrors};
use crate::json::{bool_at, str_at};

const OPENAPI_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// Internal `JSONSchemaProps` fields in declaration order with their JSON names: the root of a
/// schema with the status subresource may only use some of them (`allowedFieldsAtRootSchema`).
const ROOT_FIELDS: &[(&str, &str, bool)] = &[
    ("id", "ID", false),
    ("$schema", "Schema", false),
    ("$ref", "Ref", false),
    ("description", "Description", true),
    ("type", "Type", true),
    ("nullable", "Nullable", false),
    ("format", "Format", true),
    ("title", "Title", true),
    ("default", "Default", false),
    ("maximum", "Maximum", true),
    ("exclusiveMaximum", "ExclusiveMaximum", true),
    ("minimum", "Minimum", true),
    ("exclusiveMinimum", "ExclusiveMinimum", true),
    ("maxLength", "MaxLength", true),
    ("minLength", "MinLength", true),
    ("pattern", "Pattern", true),
    ("maxItems", "MaxItems", true),
    ("minItems", "MinItems", true),
    ("uniqueItems", "UniqueItems", true),
    ("multipleOf", "MultipleOf", true),
    ("enum", "Enum", false),
    ("maxProperties", "MaxProperties", false),
    ("minProperties", "MinProperties", false),
    ("required", "Required", true),
    ("items", "Items", true),
    ("allOf", "AllOf", false),
    ("oneOf", "OneOf", false),
    ("anyOf", "AnyOf", false),
    ("not", "Not", false),
    ("properties", "Properties", true),
    ("additionalProperties", "AdditionalProperties", false),
    ("patternProperties", "PatternProperties", false),
    ("dependencies", "Dependencies", false),
    ("additionalItems", "AdditionalItems", false),
    ("definitions", "Definitions", false),
    ("externalDocs", "ExternalDocs", true),
    ("example", "Example", true),
    (
        "x-kubernetes-preserve-unknown-fields",
        "XPreserveUnknownFields",
        true,
    ),
    ("x-kubernetes-embedded-resource", "XEmbeddedResource", false),
    ("x-kubernetes-int-or-string", "XIntOrString", false),
    ("x-kubernetes-list-map-keys", "XListMapKeys", false),
    ("x-kubernetes-list-type", "XListType", false),
    ("x-kubernetes-map-type", "XMapType", false),
    ("x-kubernetes-validations", "XValidations", true),
];

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Number(_) => false,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn sorted_props(s: &Value) -> Vec<(&String, &Value)> {
    let mut v: Vec<(&String, &Value)> = s
        .get("properties")
        .and_then(Value::as_object)
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    v.sort_by(|a, b| a.0.cmp(b.0));
    v
}

/// The int-or-string shapes allowed in value validations (`anyOf: [{type: integer}, {type: string}]`).
fn int_or_string_any_of(any: Option<&Value>) -> bool {
    any.and_then(Value::as_array).is_some_and(|a| {
        a.len() == 2 && a[0] == json!({"type": "integer"}) && a[1] == json!({"type": "string"})
    })
}

/// `validateStructuralInvariants` (the errors are sorted by message afterwards, like the real one).
fn structural_invariants(s: &Value, lvl: Level, path: &str, errs: &mut FieldErrors) {
    let typ = str_at(s, &["type"]);
    let embedded = bool_at(s, &["x-kubernetes-embedded-resource"]);
    let int_or_string = bool_at(s, &["x-kubernetes-int-or-string"]);
    let preserve = bool_at(s, &["x-kubernetes-preserve-unknown-fields"]);
    if typ == "array" && s.get("items").is_none_or(Value::is_null) {
        errs.push(FieldError::required(
            child(path, "items"),
            "must be specified",
        ));
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        structural_invariants(items, Level::Item, &child(path, "items"), errs);
    }
    for (k, v) in sorted_props(s) {
        structural_invariants(v, Level::Field, &key(&child(path, "properties"), k), errs);
    }
    if let Some(ap) = s.get("additionalProperties").filter(|a| !a.is_null()) {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(
                child(path, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        if ap.is_object() {
            structural_invariants(ap, Level::Field, &child(path, "additionalProperties"), errs);
        }
    }
    if int_or_string && preserve {
        errs.push(FieldError::invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            BadValue::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid(
            child(path, "x-kubernetes-embedded-resource"),
            BadValue::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = int_or_string_any_of(s.get("anyOf"));
    let skip_first_all_of = s
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .is_some_and(|f| int_or_string_any_of(f.get("anyOf")));
    value_validation(s, skip_any_of, skip_first_all_of, path, errs);

    let check_metadata = lvl == Level::Root || embedded;
    if embedded && typ != "object" {
        if typ.is_empty() {
            errs.push(FieldError::required(
                child(path, "type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errs.push(FieldError::invalid(
                child(path, "type"),
                BadValue::Str(typ.into()),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if typ.is_empty() && !int_or_string && !preserve {
        let msg = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(child(path, "type"), msg));
    }
    if embedded && s.get("additionalProperties").is_some_and(|a| !a.is_null()) {
        errs.push(FieldError::forbidden(
            child(path, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !typ.is_empty() && typ != "object" {
        errs.push(FieldError::invalid(
            child(path, "type"),
            BadValue::Str(typ.into()),
            "must be object at the root",
        ));
    }
    let props = s.get("properties");
    for k in ["kind", "apiVersion"] {
        if let Some(p) = props.and_then(|p| p.get(k))
            && check_metadata
        {
            let t = str_at(p, &["type"]);
            if t != "string" {
                errs.push(FieldError::invalid(
                    child(&key(&child(path, "properties"), k), "type"),
                    BadValue::Str(t.into()),
                    "must be string",
                ));
            }
        }
    }
    if let Some(meta) = props.and_then(|p| p.get("metadata")) {
        let mpath = key(&child(path, "properties"), "metadata");
        let t = str_at(meta, &["type"]);
        if check_metadata && t != "object" {
            errs.push(FieldError::invalid(
                child(&mpath, "type"),
                BadValue::Str(t.into()),
                "must be object",
            ));
        }
        if lvl == Level::Root {
            // Only `type` and restrictions of name/generateName may be given for metadata.
            let ok = meta.as_object().is_none_or(|m| {
                m.iter().all(|(k, v)| match k.as_str() {
                    "type" | "default" => true,
                    "properties" => v.as_object().is_some_and(|p| {
                        !p.is_empty() && p.keys().all(|k| k == "name" || k == "generateName")
                    }),
                    _ => is_zero(v),
                })
            });
            if !ok {
                errs.push(FieldError::forbidden(
                    mpath,
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                ));
            }
        }
    }
    if embedded && !preserve && props.and_then(Value::as_object).is_none_or(Map::is_empty) {
        errs.push(FieldError::required(
            child(path, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// `validateValueValidation`: junctors may only hold value validations.
fn value_validation(
    s: &Value,
    skip_any_of: bool,
    skip_first_all_of: bool,
    path: &str,
    errs: &mut FieldErrors,
) {
    if !skip_any_of {
        for (i, v) in s
            .get("anyOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            nested_value_validation(v, &index(&child(path, "anyOf"), i), errs);
        }
    }
    for (i, v) in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if skip_first_all_of && i == 0 {
            let mut inner = v.clone();
            if let Some(m) = inner.as_object_mut() {
                m.remove("anyOf");
            }
            nested_value_validation(&inner, &index(&child(path, "allOf"), i), errs);
        } else {
            nested_value_validation(v, &index(&child(path, "allOf"), i), errs);
        }
    }
    for (i, v) in s
        .get("oneOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        nested_value_validation(v, &index(&child(path, "oneOf"), i), errs);
    }
    if let Some(not) = s.get("not").filter(|n| n.is_object()) {
        nested_value_validation(not, &child(path, "not"), errs);
    }
    if let Some(p) = s.get("pattern").and_then(Value::as_str)
        && let Err(e) = Regex::new(p)
    {
        errs.push(FieldError::invalid(
            child(path, "pattern"),
            BadValue::Str(p.into()),
            format!("must be a valid regular expression, but isn't: {e}"),
        ));
    }
}

fn nested_value_validation(v: &Value, path: &str, errs: &mut FieldErrors) {
    value_validation(v, false, false, path, errs);
    if let Some(items) = v.get("items").filter(|i| i.is_object()) {
        nested_value_validation(items, &child(path, "items"), errs);
    }
    for (k, p) in sorted_props(v) {
        nested_value_validation(p, &key(&child(path, "properties"), k), errs);
    }
    let set = |k: &str| v.get(k).is_some_and(|x| !is_zero(x));
    if set("type") {
        errs.push(FieldError::forbidden(
            child(path, "type"),
            "must be empty to be structural",
        ));
    }
    if v.get("additionalProperties").is_some_and(|a| !a.is_null()) {
        errs.push(FieldError::forbidden(
            child(path, "additionalProperties"),
            "must be undefined to be structural",
        ));
    }
    if v.get("default").is_some() {
        errs.push(FieldError::forbidden(
            child(path, "default"),
            "must be undefined to be structural",
        ));
    }
    for (k, msg) in [
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        ("nullable", "must be false to be structural"),
        (
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        ),
        ("x-kubernetes-validations", "must be empty to be structural"),
    ] {
        if set(k) {
            errs.push(FieldError::forbidden(child(path, k), msg));
        }
    }
    for k in ["x-kubernetes-list-type", "x-kubernetes-map-type"] {
        if v.get(k).is_some_and(|x| !x.is_null()) {
            errs.push(FieldError::forbidden(
                child(path, k),
                "must be undefined to be structural",
            ));
        }
    }
    if v.pointer("/properties/metadata").is_some() {
        errs.push(FieldError::forbidden(
            key(&child(path, "properties"), "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// `ValidateCustomResourceDefinitionOpenAPISchema`: per-node OpenAPI v3 restrictions.
fn openapi_checks(
    s: &Value,
    path: &str,
    is_root: bool,
    forbid_defaults: Option<&str>,
    errs: &mut FieldErrors,
) {
    let typ = str_at(s, &["type"]);
    if !typ.is_empty() && !OPENAPI_TYPES.contains(&typ) {
        errs.push(FieldError::not_supported(
            child(path, "type"),
            BadValue::Str(typ.into()),
            OPENAPI_TYPES,
        ));
    }
    if let Some(reason) = forbid_defaults
        && s.get("default").is_some()
    {
        errs.push(FieldError::forbidden(
            child(path, "default"),
            format!("must not be set {reason}"),
        ));
    }
    for (k, msg) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ] {
        if s.get(k).is_some_and(|v| !is_zero(v)) {
            errs.push(FieldError::forbidden(child(path, k), msg));
        }
    }
    if typ == "null" {
        errs.push(FieldError::forbidden(
            child(path, "type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if s.get("items").is_some_and(Value::is_array) {
        errs.push(FieldError::forbidden(
            child(path, "items"),
            "items must be a schema object and not an array",
        ));
    }
    if bool_at(s, &["uniqueItems"]) {
        errs.push(FieldError::forbidden(
            child(path, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(ap) = s.get("additionalProperties").filter(|a| !a.is_null()) {
        let has_props = s
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty());
        if has_props && (ap == &Value::Bool(false) || ap.is_object()) {
            errs.push(FieldError::forbidden(
                child(path, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if ap.is_object() {
            openapi_checks(
                ap,
                &child(path, "additionalProperties"),
                false,
                forbid_defaults,
                errs,
            );
        }
    }
    for (k, v) in sorted_props(s) {
        let reason = if is_root && ["metadata", "kind", "apiVersion"].contains(&k.as_str()) {
            Some(match k.as_str() {
                "metadata" => "in top-level metadata",
                "kind" => "in top-level kind",
                _ => "in top-level apiVersion",
            })
        } else {
            forbid_defaults
        };
        openapi_checks(v, &key(&child(path, "properties"), k), false, reason, errs);
    }
    if let Some(not) = s.get("not").filter(|n| n.is_object()) {
        openapi_checks(not, &child(path, "not"), false, forbid_defaults, errs);
    }
    for j in ["allOf", "oneOf", "anyOf"] {
        for (i, v) in s
            .get(j)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            openapi_checks(v, &index(&child(path, j), i), false, forbid_defaults, errs);
        }
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        openapi_checks(items, &child(path, "items"), false, forbid_defaults, errs);
    }
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errs.push(FieldError::invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            BadValue::Bool(false),
            "must be true or undefined",
        ));
    }
    if let Some(mt) = s.get("x-kubernetes-map-type").and_then(Value::as_str) {
        if typ != "object" {
            if typ.is_empty() {
                errs.push(FieldError::required(
                    child(path, "type"),
                    "must be object if x-kubernetes-map-type is specified",
                ));
            } else {
                errs.push(FieldError::invalid(
                    child(path, "type"),
                    BadValue::Str(typ.into()),
                    "must be object if x-kubernetes-map-type is specified",
                ));
            }
        }
        if mt != "atomic" && mt != "granular" {
            errs.push(FieldError::not_supported(
                child(path, "x-kubernetes-map-type"),
                BadValue::Str(mt.into()),
                &["atomic", "granular"],
            ));
        }
    }
    if let Some(lt) = s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        if typ != "array" {
            if typ.is_empty() {
                errs.push(FieldError::required(
                    child(path, "type"),
                    "must be array if x-kubernetes-list-type is specified",
                ));
            } else {
                errs.push(FieldError::invalid(
                    child(path, "type"),
                    BadValue::Str(typ.into()),
                    "must be array if x-kubernetes-list-type is specified",
                ));
            }
        }
        if !["atomic", "set", "map"].contains(&lt) {
            errs.push(FieldError::not_supported(
                child(path, "x-kubernetes-list-type"),
                BadValue::Str(lt.into()),
                &["atomic", "set", "map"],
            ));
        }
        if lt == "map"
            && s.get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
        {
            errs.push(FieldError::required(
                child(path, "x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
    }
    for (i, rule) in s
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if str_at(rule, &["rule"]).trim().is_empty() {
            errs.push(FieldError::required(
                child(&index(&child(path, "x-kubernetes-validations"), i), "rule"),
                "rule is not specified",
            ));
        }
    }
}

/// Validates a version schema as the CRD validation does; `prefix` is `spec.validation` (a schema
/// shared by all versions, hoisted in the internal form) or `spec.versions[i].schema`.
pub fn validate_crd_schema(schema: &Value, prefix: &str, status_enabled: bool) -> FieldErrors {
    let path = child(prefix, "openAPIV3Schema");
    let mut errs = Vec::new();
    if status_enabled {
        for (json_key, go_name, allowed) in ROOT_FIELDS {
            let Some(v) = schema.get(*json_key).filter(|v| !is_zero(v)) else {
                continue;
            };
            if *go_name == "Type" {
                if v.as_str() != Some("object") {
                    errs.push(FieldError::invalid(
                        format!("{path}.type"),
                        BadValue::from_json(v),
                        "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                    ));
                    break;
                }
                continue;
            }
            if !allowed {
                let names: Vec<&str> = ROOT_FIELDS.iter().filter(|f| f.2).map(|f| f.1).collect();
                // The real value is Go's %#v of the whole schema struct; summarised here.
                errs.push(FieldError::invalid(
                    path.clone(),
                    BadValue::Raw("apiextensions.JSONSchemaProps{...}".into()),
                    format!(
                        "only [{}] fields are allowed at the root of the schema if the status subresource is enabled",
                        names.join(" ")
                    ),
                ));
                break;
            }
        }
    }
    if bool_at(schema, &["nullable"]) {
        errs.push(FieldError::forbidden(
            format!("{path}.nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let mut structural = Vec::new();
    structural_invariants(schema, Level::Root, &path, &mut structural);
    structural.sort_by_key(FieldError::message);
    let structural_ok = structural.is_empty();
    errs.extend(structural);
    if structural_ok {
        errs.extend(validate_defaults(schema, &path));
    }
    openapi_checks(schema, &path, true, None, &mut errs);
    errs
}

/// `structuraldefaulting.ValidateDefaults` (simplified): every default must itself be valid for
/// the schema it sits in.
fn validate_defaults(s: &Value, path: &str) -> FieldErrors {
    let mut errs = Vec::new();
    if let Some(d) = s.get("default") {
        let mut inner = Vec::new();
        validate_value(d, s, "", None, &mut inner);
        for mut e in inner {
            let f = if e.field == "<nil>" {
                String::new()
            } else {
                format!(".{}", e.field)
            };
            e.field = format!("{path}.default{f}");
            errs.push(e);
        }
    }
    for (k, v) in sorted_props(s) {
        errs.extend(validate_defaults(v, &key(&child(path, "properties"), k)));
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        errs.extend(validate_defaults(items, &child(path, "items")));
    }
    if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
        errs.extend(validate_defaults(ap, &child(path, "additionalProperties")));
    }
    errs
}
