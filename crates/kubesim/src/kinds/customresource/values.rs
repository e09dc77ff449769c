//! Validation of a custom resource against its version's OpenAPI v3 schema (kube-openapi's
//! `SchemaValidator`, as the apiextensions apiserver runs it).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::super::common;
use super::defaults::is_nullable;
use crate::errors::{BadValue, FieldError, FieldErrorKind, FieldErrors, go_quote};
use crate::json::str_at;

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
