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

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};

use super::common::{self, child, index, key};
use super::{ResourceInfo, Strategy};
use crate::errors::{BadValue, FieldError, FieldErrorKind, FieldErrors, go_quote};
use crate::json::{bool_at, ensure_obj, str_at};

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
pub fn spec_has_defaults(versions: &[Value]) -> bool {
    fn has(s: &Value) -> bool {
        let Some(m) = s.as_object() else {
            return false;
        };
        m.contains_key("default")
            || m.get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| p.values().any(has))
            || ["items", "additionalProperties", "not"]
                .iter()
                .any(|k| m.get(*k).is_some_and(has))
            || ["allOf", "anyOf", "oneOf"].iter().any(|k| {
                m.get(*k)
                    .and_then(Value::as_array)
                    .is_some_and(|a| a.iter().any(has))
            })
    }
    versions
        .iter()
        .filter_map(|v| v.pointer("/schema/openAPIV3Schema"))
        .any(has)
}

// ---------------------------------------------------------------------------------------------
// Defaulting (`structuraldefaulting`): nulls of non-nullable fields without default are dropped,
// then missing (or null non-nullable) fields with a default get it, recursively.

fn prop_schema<'a>(schema: &'a Value, k: &str) -> Option<&'a Value> {
    schema
        .get("properties")
        .and_then(|p| p.get(k))
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

fn is_nullable(s: &Value) -> bool {
    s.get("nullable").and_then(Value::as_bool).unwrap_or(false)
}

pub fn prune_non_nullable_nulls(data: &mut Value, schema: &Value) {
    match data {
        Value::Object(m) => {
            m.retain(|k, v| match prop_schema(schema, k) {
                Some(s) => !(v.is_null() && !is_nullable(s) && s.get("default").is_none()),
                None => true,
            });
            for (k, v) in m.iter_mut() {
                if let Some(s) = prop_schema(schema, k) {
                    prune_non_nullable_nulls(v, s);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for v in a {
                    prune_non_nullable_nulls(v, items);
                }
            }
        }
        _ => {}
    }
}

pub fn apply_defaults(data: &mut Value, schema: &Value) {
    match data {
        Value::Object(m) => {
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (k, p) in props {
                    if let Some(d) = p.get("default") {
                        let missing = match m.get(k) {
                            None => true,
                            Some(Value::Null) => !is_nullable(p),
                            Some(_) => false,
                        };
                        if missing {
                            m.insert(k.clone(), d.clone());
                        }
                    }
                }
            }
            let ap = schema.get("additionalProperties").filter(|a| a.is_object());
            let props = schema.get("properties").and_then(Value::as_object);
            for (k, v) in m.iter_mut() {
                if let Some(p) = props.and_then(|p| p.get(k)) {
                    apply_defaults(v, p);
                } else if let Some(ap) = ap {
                    if v.is_null()
                        && !is_nullable(ap)
                        && let Some(d) = ap.get("default")
                    {
                        *v = d.clone();
                    }
                    apply_defaults(v, ap);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for v in a {
                    if v.is_null()
                        && !is_nullable(items)
                        && let Some(d) = items.get("default")
                    {
                        *v = d.clone();
                    }
                    apply_defaults(v, items);
                }
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Validation of a value against a schema (kube-openapi's SchemaValidator).

/// Formats the apiextensions apiserver keeps (others are stripped before validation).
const SUPPORTED_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "date-time",
];

fn re(p: &str) -> Regex {
    // Constant patterns of this file; covered by the tests.
    Regex::new(p).unwrap_or_else(|e| panic!("bad built-in regex {p}: {e}"))
}

static DATE_TIME_RE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}([.,]\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?$")
});
static DATE_RE: LazyLock<Regex> = LazyLock::new(|| re(r"^\d{4}-\d{2}-\d{2}$"));
static UUID_RE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?([0-9a-f])[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static MAC_RE: LazyLock<Regex> = LazyLock::new(|| re(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$"));
static HOSTNAME_RE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^([a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*\.?$",
    )
});
static DURATION_RE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^[-+]?(\d+(\.\d+)?(ns|us|µs|ms|s|m|h|d|w))+$|^P(\d+[YMWD])*(T(\d+[HMS])+)?$")
});

/// Whether `s` is valid for `format`; `None` when the format is not one the server checks.
fn format_ok(format: &str, s: &str) -> Option<bool> {
    if !SUPPORTED_FORMATS.contains(&format) {
        return None;
    }
    Some(match format {
        "date-time" | "datetime" => DATE_TIME_RE.is_match(s),
        "date" => {
            DATE_RE.is_match(s)
                && common::go_parse_time(&format!("{s}T00:00:00Z"), common::TimeLayout::Rfc3339)
                    .is_ok()
        }
        "byte" => common::go_base64_decode(s).is_ok(),
        "uuid" => UUID_RE.is_match(s),
        "uuid3" | "uuid4" | "uuid5" => UUID_RE
            .captures(s)
            .and_then(|c| c.get(1))
            .is_some_and(|v| v.as_str() == &format[4..]),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            let max = if ip.contains(':') { 128 } else { 32 };
            ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= max)
        }),
        "mac" => MAC_RE.is_match(s),
        "hostname" => s.len() <= 255 && HOSTNAME_RE.is_match(s),
        "email" => s.split_once('@').is_some_and(|(a, b)| {
            !a.is_empty() && b.contains('.') && !s.contains(char::is_whitespace)
        }),
        "uri" => s.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }),
        "duration" => DURATION_RE.is_match(s),
        "bsonobjectid" => s.len() == 24 && s.chars().all(|c| c.is_ascii_hexdigit()),
        "hexcolor" => {
            let h = s.strip_prefix('#').unwrap_or(s);
            (h.len() == 3 || h.len() == 6) && h.chars().all(|c| c.is_ascii_hexdigit())
        }
        "ssn" | "isbn" | "isbn10" | "isbn13" | "creditcard" | "rgbcolor" | "password" => true,
        _ => true,
    })
}

/// The JSON type kube-openapi infers for a decoded value, and its format.
fn schema_type_of(v: &Value) -> (&'static str, &'static str) {
    match v {
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) if n.is_i64() || n.is_u64() => ("integer", "int64"),
        Value::Number(_) => ("number", "double"),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
        Value::Null => ("null", ""),
    }
}

fn types_of(schema: &Value) -> Vec<&str> {
    if schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return vec!["integer", "string"];
    }
    match schema.get("type").and_then(Value::as_str) {
        Some(t) if !t.is_empty() => vec![t],
        _ => Vec::new(),
    }
}

fn effective_format(schema: &Value) -> &str {
    let f = str_at(schema, &["format"]);
    if SUPPORTED_FORMATS.contains(&f) {
        f
    } else {
        ""
    }
}

/// `kubeOpenAPIResultToFieldErrors`' field path for an error named `name` (leading `.` trimmed;
/// the root has no path and prints `<nil>`).
fn err_field(name: &str) -> String {
    let t = name.strip_prefix('.').unwrap_or(name);
    if t.is_empty() {
        "<nil>".to_string()
    } else {
        t.to_string()
    }
}

fn type_fail(path: &str, typ: &str, value: &str) -> FieldError {
    FieldError::new(
        FieldErrorKind::TypeInvalid,
        err_field(path),
        BadValue::Str(value.into()),
        format!("{path} in body must be of type {typ}: {}", go_quote(value)),
    )
}

fn as_f64(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

fn is_integral(f: f64) -> bool {
    f.is_finite() && f.fract() == 0.0
}

fn num_text(limit: f64, data_is_int: bool) -> String {
    // Integer data is compared (and printed) against the limit truncated to int64.
    if data_is_int {
        (limit as i64).to_string()
    } else {
        common::go_float_v(limit)
    }
}

fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Validates `data` against `schema` at kube-openapi path `path` ("" for the root). `old` enables
/// ratcheting (CRDValidationRatcheting, GA): a subtree equal to the old object's is not re-validated.
pub fn validate_value(
    data: &Value,
    schema: &Value,
    path: &str,
    old: Option<&Value>,
    errs: &mut FieldErrors,
) {
    if old.is_some_and(|o| o == data) {
        return;
    }
    let types = types_of(schema);
    let format = effective_format(schema);
    let enum_values = schema.get("enum").and_then(Value::as_array);

    if data.is_null() {
        if !types.is_empty() && !types.contains(&"null") && !is_nullable(schema) {
            errs.push(type_fail(path, &types.join(","), "null"));
        }
        if let Some(values) = enum_values
            && !values.iter().any(Value::is_null)
        {
            errs.push(enum_error(path, data, values));
        }
        return;
    }

    let (sch_type, sch_format) = schema_type_of(data);
    let is_string = data.is_string();
    let is_array = data.is_array();

    // 1. type
    if !types.is_empty() || !format.is_empty() {
        let is_float_int =
            sch_type == "number" && is_integral(as_f64(data)) && types.contains(&"integer");
        let is_int_float = sch_type == "integer" && types.contains(&"number");
        let matches = types.contains(&sch_type) || is_float_int || is_int_float;
        // A non-string value under a format: the format must agree with the value's own.
        let format_mismatch = !is_string && !is_array && !format.is_empty();
        if format_mismatch && !matches && sch_format != format {
            errs.push(type_fail(path, format, sch_format));
        } else if !matches {
            // A string (or list) with a format is the format validator's business, unless the
            // schema's type is numeric.
            let format_decides = !types.contains(&"number")
                && !types.contains(&"integer")
                && !format.is_empty()
                && (is_string || is_array);
            if !format_decides {
                errs.push(type_fail(path, &types.join(","), sch_type));
            }
        }
    }

    // 2. allOf / anyOf / oneOf / not
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for s in all {
            validate_value(data, s, path, None, errs);
        }
    }
    let passes = |s: &Value| {
        let mut e = Vec::new();
        validate_value(data, s, path, None, &mut e);
        e.is_empty()
    };
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array)
        && !any.is_empty()
        && !any.iter().any(passes)
    {
        errs.push(FieldError::invalid(
            "<nil>",
            BadValue::Str(String::new()),
            format!("{path} must validate at least one schema (anyOf)"),
        ));
    }
    if let Some(one) = schema.get("oneOf").and_then(Value::as_array)
        && !one.is_empty()
        && one.iter().filter(|s| passes(s)).count() != 1
    {
        errs.push(FieldError::invalid(
            "<nil>",
            BadValue::Str(String::new()),
            format!("{path} must validate one and only one schema (oneOf)"),
        ));
    }
    if let Some(not) = schema.get("not").filter(|n| n.is_object())
        && passes(not)
    {
        errs.push(FieldError::invalid(
            "<nil>",
            BadValue::Str(String::new()),
            format!("{path} must not validate the schema (not)"),
        ));
    }

    // 3. string, 4. format
    if let Value::String(s) = data {
        let runes = s.chars().count() as i64;
        let int = |k: &str| schema.get(k).and_then(Value::as_i64);
        if let Some(max) = int("maxLength")
            && runes > max
        {
            let unit = if max == 1 { "byte" } else { "bytes" };
            errs.push(FieldError::new(
                FieldErrorKind::TooLong,
                err_field(path),
                BadValue::Omit,
                format!("may not be more than {max} {unit}"),
            ));
        } else if let Some(min) = int("minLength")
            && runes < min
        {
            errs.push(FieldError::invalid(
                err_field(path),
                BadValue::Str(s.clone()),
                format!("{path} in body should be at least {min} chars long"),
            ));
        } else if let Some(p) = schema.get("pattern").and_then(Value::as_str)
            && Regex::new(p).is_ok_and(|r| !r.is_match(s))
        {
            errs.push(FieldError::invalid(
                err_field(path),
                BadValue::Str(s.clone()),
                format!("{path} in body should match '{p}'"),
            ));
        }
        if !format.is_empty() && format_ok(format, s) == Some(false) {
            errs.push(FieldError::new(
                FieldErrorKind::TypeInvalid,
                err_field(path),
                BadValue::Str(s.clone()),
                format!("{path} in body must be of type {format}: {}", go_quote(s)),
            ));
        }
    }

    // 5. number
    if let Value::Number(n) = data {
        let is_int = n.is_i64() || n.is_u64();
        let x = as_f64(data);
        let value = BadValue::from_json(data);
        if let Some(factor) = schema.get("multipleOf").and_then(Value::as_f64) {
            let bad = if is_int && is_integral(factor) && factor != 0.0 {
                (x as i64) % (factor as i64) != 0
            } else {
                let mult = if factor < 1.0 {
                    1.0 / factor * x
                } else {
                    x / factor
                };
                !is_integral(mult)
            };
            if bad {
                errs.push(FieldError::invalid(
                    err_field(path),
                    value.clone(),
                    format!(
                        "{path} in body should be a multiple of {}",
                        num_text(factor, is_int && is_integral(factor))
                    ),
                ));
            }
        }
        let excl = |k: &str| schema.get(k).and_then(Value::as_bool).unwrap_or(false);
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            let ex = excl("exclusiveMinimum");
            let lim = if is_int { (min as i64) as f64 } else { min };
            if (!ex && x < lim) || (ex && x <= lim) {
                let rel = if ex {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                errs.push(FieldError::invalid(
                    err_field(path),
                    value.clone(),
                    format!("{path} in body should be {rel} {}", num_text(min, is_int)),
                ));
            }
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            let ex = excl("exclusiveMaximum");
            let lim = if is_int { (max as i64) as f64 } else { max };
            if (!ex && x > lim) || (ex && x >= lim) {
                let rel = if ex {
                    "less than"
                } else {
                    "less than or equal to"
                };
                errs.push(FieldError::invalid(
                    err_field(path),
                    value,
                    format!("{path} in body should be {rel} {}", num_text(max, is_int)),
                ));
            }
        }
    }

    // 6. array
    if let Value::Array(items) = data {
        if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
            for (i, v) in items.iter().enumerate() {
                let o = old.and_then(|o| o.get(i));
                validate_value(v, item_schema, &format!("{path}[{i}]"), o, errs);
            }
        }
        let len = items.len() as i64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_i64)
            && len < min
        {
            errs.push(FieldError::invalid(
                err_field(path),
                BadValue::Int(len),
                format!("{path} in body should have at least {min} items"),
            ));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_i64)
            && len > max
        {
            errs.push(too_many(path, len, max));
        }
    }

    // 7. enum
    if let Some(values) = enum_values
        && !values.is_empty()
        && !values.iter().any(|e| json_eq(e, data))
    {
        errs.push(enum_error(path, data, values));
    }

    // 8. object
    if let Value::Object(m) = data {
        let n = m.len() as i64;
        if let Some(min) = schema.get("minProperties").and_then(Value::as_i64)
            && n < min
        {
            errs.push(FieldError::invalid(
                err_field(path),
                BadValue::Int(n),
                format!("{path} in body should have at least {min} properties"),
            ));
            return;
        }
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_i64)
            && n > max
        {
            errs.push(too_many(path, n, max));
            return;
        }
        let props = schema.get("properties").and_then(Value::as_object);
        let ap = schema.get("additionalProperties");
        let sub = |k: &str| {
            if path.is_empty() {
                k.to_string()
            } else {
                format!("{path}.{k}")
            }
        };
        match ap {
            Some(Value::Bool(false)) => {
                for k in m.keys() {
                    if !props.is_some_and(|p| p.contains_key(k)) {
                        errs.push(FieldError::invalid(
                            err_field(path),
                            BadValue::Str(k.clone()),
                            format!("{path}.{k} in body is a forbidden property"),
                        ));
                    }
                }
            }
            Some(ap @ Value::Object(_)) => {
                for (k, v) in m {
                    if !props.is_some_and(|p| p.contains_key(k)) {
                        let o = old.and_then(|o| o.get(k));
                        validate_value(v, ap, &format!("{path}.{k}"), o, errs);
                    }
                }
            }
            _ => {}
        }
        if let Some(props) = props {
            for (k, ps) in props {
                if let Some(v) = m.get(k) {
                    let o = old.and_then(|o| o.get(k));
                    validate_value(v, ps, &sub(k), o, errs);
                }
            }
        }
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !m.contains_key(r) {
                errs.push(FieldError::required(err_field(&format!("{path}.{r}")), ""));
            }
        }
    }
}

fn too_many(path: &str, actual: i64, max: i64) -> FieldError {
    let unit = if max == 1 { "item" } else { "items" };
    FieldError::new(
        FieldErrorKind::TooMany,
        err_field(path),
        BadValue::Int(actual),
        format!("must have at most {max} {unit}"),
    )
}

fn enum_error(path: &str, data: &Value, values: &[Value]) -> FieldError {
    let texts: Vec<String> = values
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => crate::errors::go_json(other),
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    FieldError::not_supported(err_field(path), BadValue::from_json(data), &refs)
}

// ---------------------------------------------------------------------------------------------
// A CRD's own checks of a version schema (`validateCustomResourceDefinitionValidation`).

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

// ---------------------------------------------------------------------------------------------

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::testutil::{fixture, invalid_status, step};

    fn strategy(f: &Value) -> CustomResourceStrategy {
        let crd = step(f, "wait until Established")["response"]["body"].clone();
        CustomResourceStrategy::from_crd(&crd, "v1alpha1").expect("version served")
    }

    fn request(f: &Value, name: &str) -> Value {
        let body = serde_json::to_string(&step(f, name)["request"]["body"])
            .unwrap()
            .replace("${run}", "run");
        serde_json::from_str(&body).unwrap()
    }

    #[test]
    fn resource_info_matches_discovery() {
        let f = fixture("crd.json");
        let s = strategy(&f);
        let disco =
            &step(&f, "discovery /apis/courier.dev/v1alpha1")["response"]["body"]["resources"][0];
        assert_eq!(s.info().plural, disco["name"]);
        assert_eq!(s.info().singular, disco["singularName"]);
        assert_eq!(json!(s.info().namespaced), disco["namespaced"]);
        assert_eq!(json!(s.info().verbs), disco["verbs"]);
        assert_eq!(json!(s.info().short_names), disco["shortNames"]);
        assert_eq!(
            json!(s.info().storage_version_hash),
            disco["storageVersionHash"]
        );
        assert!(s.info().status_subresource);
    }

    #[test]
    fn create_defaults_and_drops_status() {
        let f = fixture("crd.json");
        let s = strategy(&f);
        for name in [
            "create WorkerCluster",
            "create with status in body (status dropped?)",
        ] {
            let mut obj = request(&f, name);
            s.default(&mut obj);
            s.prepare_for_create(&mut obj);
            assert!(s.validate_create(&obj).is_empty(), "{name}");
            let want = &step(&f, name)["response"]["body"];
            assert_eq!(obj["spec"], want["spec"], "{name}");
            assert_eq!(obj.get("status"), want.get("status"), "{name}");
            assert_eq!(obj["metadata"]["generation"], 1);
        }
    }

    #[test]
    fn schema_errors_match_recordings() {
        let f = fixture("crd.json");
        let s = strategy(&f);
        for name in [
            "missing required field",
            "missing required nested field",
            "wrong type",
        ] {
            let mut obj = request(&f, name);
            s.default(&mut obj);
            s.prepare_for_create(&mut obj);
            let errs = s.validate_create(&obj);
            let mut want = step(&f, name)["response"]["body"].clone();
            // The recording's names carry the normalised run id.
            let got =
                serde_json::to_string(&invalid_status("courier.dev", "WorkerCluster", &obj, &errs))
                    .unwrap()
                    .replace("-run", "-<run>");
            want = serde_json::from_str(&serde_json::to_string(&want).unwrap()).unwrap();
            assert_eq!(serde_json::from_str::<Value>(&got).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn updates_bump_generation_on_spec_only_and_keep_status() {
        let f = fixture("crd.json");
        let s = strategy(&f);
        let before = step(&f, "merge-patch status")["response"]["body"].clone();
        // merge-patch status via the main resource: ignored.
        let mut new = before.clone();
        json_patch::merge(
            &mut new,
            &step(&f, "merge-patch status via main resource (ignored)")["request"]["body"],
        );
        s.prepare_for_update(&mut new, &before);
        assert_eq!(new, before);
        // merge-patch spec: generation 2.
        let mut new = before.clone();
        json_patch::merge(
            &mut new,
            &step(&f, "merge-patch spec (generation bump)")["request"]["body"],
        );
        s.default(&mut new);
        s.prepare_for_update(&mut new, &before);
        assert!(s.validate_update(&new, &before).is_empty());
        let want = &step(&f, "merge-patch spec (generation bump)")["response"]["body"];
        assert_eq!(
            new["metadata"]["generation"],
            want["metadata"]["generation"]
        );
        assert_eq!(new["spec"], want["spec"]);
        assert_eq!(new["status"], want["status"]);
        // The status subresource keeps everything else.
        let created = step(&f, "get WorkerCluster")["response"]["body"].clone();
        let mut st = created.clone();
        json_patch::merge(&mut st, &step(&f, "merge-patch status")["request"]["body"]);
        st["spec"]["labels"]["region"] = json!("changed");
        s.prepare_for_status_update(&mut st, &created);
        assert!(s.validate_status_update(&st, &created).is_empty());
        let want = &step(&f, "merge-patch status")["response"]["body"];
        assert_eq!(st["spec"], want["spec"]);
        assert_eq!(st["status"], want["status"]);
        assert_eq!(st["metadata"]["generation"], want["metadata"]["generation"]);
    }

    #[test]
    fn kube_openapi_messages() {
        let schema = json!({"type": "object", "properties": {
            "s": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
            "e": {"type": "string", "enum": ["a", "b"]},
            "n": {"type": "integer", "minimum": 1, "maximum": 10},
            "f": {"type": "number", "exclusiveMinimum": true, "minimum": 0.5},
            "l": {"type": "array", "maxItems": 1, "items": {"type": "string", "minLength": 2}},
            "t": {"type": "string", "format": "date-time"},
            "i": {"x-kubernetes-int-or-string": true},
            "m": {"type": "object", "additionalProperties": {"type": "string"}}
        }});
        let data = json!({"s": "abcd", "e": "c", "n": 0, "f": 0.5, "l": ["x", "yy", "zz"], "t": "yesterday",
            "i": true, "m": {"k": 1}});
        let mut errs = Vec::new();
        validate_value(&data, &schema, "", None, &mut errs);
        let msgs: Vec<String> = errs.iter().map(FieldError::message).collect();
        assert_eq!(
            msgs,
            [
                "e: Unsupported value: \"c\": supported values: \"a\", \"b\"",
                "f: Invalid value: 0.5: f in body should be greater than 0.5",
                "i: Invalid value: \"boolean\": i in body must be of type integer,string: \"boolean\"",
                "l[0]: Invalid value: \"x\": l[0] in body should be at least 2 chars long",
                "l: Too many: 3: must have at most 1 item",
                "m.k: Invalid value: \"integer\": m.k in body must be of type string: \"integer\"",
                "n: Invalid value: 0: n in body should be greater than or equal to 1",
                "s: Too long: may not be more than 3 bytes",
                "t: Invalid value: \"yesterday\": t in body must be of type date-time: \"yesterday\"",
            ]
        );
        // Ratcheting: an unchanged invalid value is not reported again.
        let mut errs = Vec::new();
        validate_value(&data, &schema, "", Some(&data), &mut errs);
        assert!(errs.is_empty());
    }

    #[test]
    fn crd_schema_checks() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a": {"description": "no type"}, "b": {"type": "strin"},
                "c": {"type": "array"}, "d": {"type": "string", "default": 5}}},
            "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}
        }});
        let msgs: Vec<String> = validate_crd_schema(&schema, "spec.validation", true)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            [
                "spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
                "spec.validation.openAPIV3Schema.properties[spec].properties[a].type: Required value: must not be empty for specified object fields",
                "spec.validation.openAPIV3Schema.properties[spec].properties[c].items: Required value: must be specified",
                "spec.validation.openAPIV3Schema.properties[spec].properties[b].type: Unsupported value: \"strin\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
            ]
        );
        let ok = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"d": {"type": "string", "default": 5}}}}});
        let msgs: Vec<String> = validate_crd_schema(&ok, "spec.validation", false)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            [
                "spec.validation.openAPIV3Schema.properties[spec].properties[d].default: Invalid value: \"integer\":  in body must be of type string: \"integer\""
            ]
        );
    }

    #[test]
    fn defaults_and_null_pruning() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "string", "default": "x"},
            "b": {"type": "string"},
            "c": {"type": "string", "nullable": true},
            "l": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "integer", "default": 1}}}}
        }});
        let mut v = json!({"b": null, "c": null, "l": [{}, {"k": 2}]});
        prune_non_nullable_nulls(&mut v, &schema);
        apply_defaults(&mut v, &schema);
        assert_eq!(v, json!({"a": "x", "c": null, "l": [{"k": 1}, {"k": 2}]}));
    }

    #[test]
    fn selectable_fields() {
        let f = fixture("crd.json");
        let mut crd = step(&f, "wait until Established")["response"]["body"].clone();
        crd["spec"]["versions"][0]["selectableFields"] =
            json!([{"jsonPath": ".spec.kubeconfigSecretRef.name"}]);
        let s = CustomResourceStrategy::from_crd(&crd, "v1alpha1").unwrap();
        assert_eq!(
            s.convert_field_label("spec.kubeconfigSecretRef.name"),
            Ok("spec.kubeconfigSecretRef.name".into())
        );
        assert_eq!(
            s.convert_field_label("metadata.namespace"),
            Err("field label not supported: metadata.namespace".into())
        );
        let obj = step(&f, "get WorkerCluster")["response"]["body"].clone();
        assert_eq!(
            s.field_value(&obj, "spec.kubeconfigSecretRef.name")
                .as_deref(),
            Some("w1-kubeconfig")
        );
    }
}
