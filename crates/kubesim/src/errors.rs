//! API errors shaped exactly like the real API server's: `metav1.Status` bodies with the same reasons,
//! message wording and `details.causes`, and field errors rendered like apimachinery's `field.Error`.

use serde_json::{Map, Value, json};

/// Which kind of field problem, with the wording and cause type the real server uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
    TypeInvalid,
}

impl FieldErrorKind {
    /// The human wording (`field.ErrorType.String()`).
    pub fn wording(self) -> &'static str {
        match self {
            Self::NotFound => "Not found",
            Self::Required => "Required value",
            Self::Duplicate => "Duplicate value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Internal => "Internal error",
        }
    }

    /// The `details.causes[].reason` (`metav1.CauseType`).
    pub fn cause_type(self) -> &'static str {
        match self {
            Self::NotFound => "FieldValueNotFound",
            Self::Required => "FieldValueRequired",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Internal => "InternalError",
            Self::TypeInvalid => "FieldValueTypeInvalid",
        }
    }
}

/// The offending value of a field error, rendered the way apimachinery renders `BadValue`.
#[derive(Debug, Clone, PartialEq)]
pub enum BadValue {
    /// `field.OmitValueType`: nothing printed after the wording.
    Omit,
    /// A nil value: printed `null`.
    Null,
    /// A Go string: printed with `%q`.
    Str(String),
    /// An integer or bool: printed with `%v`.
    Int(i64),
    Bool(bool),
    /// Anything else: printed as its JSON encoding (the caller provides the exact text, since Go's
    /// encoding of internal structs differs from the wire format; see `kinds::job::goprint`).
    Raw(String),
}

impl BadValue {
    /// A JSON value rendered as Go would for a versioned/unstructured value: strings quoted with `%q`,
    /// numbers and bools plain, objects and arrays as compact JSON with sorted keys.
    pub fn from_json(v: &Value) -> Self {
        match v {
            Value::Null => Self::Null,
            Value::String(s) => Self::Str(s.clone()),
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Self::Int(i),
                None => Self::Raw(n.to_string()),
            },
            other => Self::Raw(go_json(other)),
        }
    }

    fn render(&self) -> Option<String> {
        match self {
            Self::Omit => None,
            Self::Null => Some("null".to_string()),
            Self::Str(s) => Some(go_quote(s)),
            Self::Int(i) => Some(i.to_string()),
            Self::Bool(b) => Some(b.to_string()),
            Self::Raw(s) => Some(s.clone()),
        }
    }
}

/// One field error (`field.Error`).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub kind: FieldErrorKind,
    pub field: String,
    pub value: BadValue,
    pub detail: String,
}

impl FieldError {
    pub fn new(
        kind: FieldErrorKind,
        field: impl Into<String>,
        value: BadValue,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            field: field.into(),
            value,
            detail: detail.into(),
        }
    }
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Required, field, BadValue::Omit, detail)
    }
    pub fn invalid(field: impl Into<String>, value: BadValue, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Invalid, field, value, detail)
    }
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Forbidden, field, BadValue::Omit, detail)
    }
    pub fn too_long(field: impl Into<String>, max_bytes: usize) -> Self {
        Self::new(
            FieldErrorKind::TooLong,
            field,
            BadValue::Omit,
            format!("may not be more than {max_bytes} bytes"),
        )
    }
    pub fn not_supported(field: impl Into<String>, value: BadValue, supported: &[&str]) -> Self {
        let list = supported
            .iter()
            .map(|s| go_quote(s))
            .collect::<Vec<_>>()
            .join(", ");
        Self::new(
            FieldErrorKind::NotSupported,
            field,
            value,
            format!("supported values: {list}"),
        )
    }
    pub fn duplicate(field: impl Into<String>, value: BadValue) -> Self {
        Self::new(FieldErrorKind::Duplicate, field, value, "")
    }
    pub fn internal(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Internal, field, BadValue::Omit, detail)
    }

    /// `ErrorBody()`: the text without the field path (used for `details.causes[].message`).
    pub fn body(&self) -> String {
        use FieldErrorKind::*;
        let mut s = self.kind.wording().to_string();
        match self.kind {
            Required | Forbidden | TooLong | Internal => {}
            _ => {
                if let Some(v) = self.value.render() {
                    s.push_str(": ");
                    s.push_str(&v);
                }
            }
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// `Error()`: `<field>: <body>`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

pub type FieldErrors = Vec<FieldError>;

/// `ErrorList.ToAggregate().Error()`: duplicates (by message) dropped, one error bare, several in brackets.
pub fn aggregate_message(errs: &[FieldError]) -> String {
    let mut seen = std::collections::HashSet::new();
    let msgs: Vec<String> = errs
        .iter()
        .map(FieldError::message)
        .filter(|m| seen.insert(m.clone()))
        .collect();
    match msgs.len() {
        0 => String::new(),
        1 => msgs.into_iter().next().unwrap_or_default(),
        _ => format!("[{}]", msgs.join(", ")),
    }
}

/// An error answered to a client: the fields of a `metav1.Status` with `status: Failure`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    /// `None` for errors the real server sends without a reason (e.g. some 500s).
    pub reason: Option<String>,
    pub message: String,
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header (429 and some 5xx).
    pub retry_after: Option<u64>,
}

/// How the real server names a resource in messages: `jobs.batch`, `secrets`, `leases.coordination.k8s.io`.
pub fn group_resource(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// How the real server names a kind in messages: `Job.batch`, `Secret`, `WorkerCluster.courier.dev`.
pub fn group_kind(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut m = Map::new();
    if !name.is_empty() {
        m.insert("name".into(), Value::String(name.into()));
    }
    if !group.is_empty() {
        m.insert("group".into(), Value::String(group.into()));
    }
    if !kind.is_empty() {
        m.insert("kind".into(), Value::String(kind.into()));
    }
    Value::Object(m)
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: Some(reason.to_string()),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 404 `jobs.batch "x" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!(
                "{} {} not found",
                group_resource(group, plural),
                go_quote(name)
            ),
        )
        .with_details(details(name, group, plural))
    }

    /// 409 `... already exists`.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!(
                "{} {} already exists",
                group_resource(group, plural),
                go_quote(name)
            ),
        )
        .with_details(details(name, group, plural))
    }

    /// 409 Conflict: `Operation cannot be fulfilled on <gr> "<name>": <why>`.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {}: {why}",
                group_resource(group, plural),
                go_quote(name)
            ),
        )
        .with_details(details(name, group, plural))
    }

    /// The optimistic-concurrency conflict.
    pub fn modified(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid with causes (`errors.NewInvalid`). `group`/`kind` qualify the kind (`Job`, `batch`).
    pub fn invalid(group: &str, kind: &str, name: &str, errs: &[FieldError]) -> Self {
        let causes: Vec<Value> = errs
            .iter()
            .map(|e| json!({"reason": e.kind.cause_type(), "message": e.body(), "field": e.field}))
            .collect();
        let agg = aggregate_message(errs);
        let gk = group_kind(group, kind);
        let message = if agg.is_empty() {
            format!("{gk} {} is invalid", go_quote(name))
        } else {
            format!("{gk} {} is invalid: {agg}", go_quote(name))
        };
        let mut d = details(name, group, kind);
        if !causes.is_empty()
            && let Value::Object(m) = &mut d
        {
            m.insert("causes".into(), Value::Array(causes));
        }
        Self::new(422, "Invalid", message).with_details(d)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 403 Forbidden: `<gr> "<name>" is forbidden: <why>`.
    pub fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> Self {
        let qualified = if name.is_empty() {
            format!("{} is forbidden: {why}", group_resource(group, plural))
        } else {
            format!(
                "{} {} is forbidden: {why}",
                group_resource(group, plural),
                go_quote(name)
            )
        };
        Self::new(403, "Forbidden", qualified).with_details(details(name, group, plural))
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn method_not_supported(group: &str, plural: &str, verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!(
                "{verb} is not supported on resources of kind {}",
                go_quote(&group_resource(group, plural))
            ),
        )
        .with_details(details("", group, plural))
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 404 for paths the server does not serve at all (`the server could not find the requested resource`).
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 500 `Internal error occurred: ...`.
    pub fn internal(message: impl Into<String>) -> Self {
        let m = message.into();
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {m}"),
        )
        .with_details(json!({"causes": [{"message": m}]}))
    }

    /// A 500 the real server sends with no reason at all (e.g. an unparsable resourceVersion on update).
    pub fn bare(code: u16, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: None,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub fn too_many_requests(retry_after: u64) -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        )
        .with_details(json!({"retryAfterSeconds": retry_after}));
        e.retry_after = Some(retry_after);
        e
    }

    /// 410 Expired for a resourceVersion older than the retained window.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind".into(), json!("Status"));
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("metadata".into(), json!({}));
        m.insert("status".into(), json!("Failure"));
        m.insert("message".into(), json!(self.message));
        if let Some(r) = &self.reason {
            m.insert("reason".into(), json!(r));
        }
        if let Some(d) = &self.details {
            m.insert("details".into(), d.clone());
        }
        m.insert("code".into(), json!(self.code));
        Value::Object(m)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ApiError {}

/// Go's `strconv.Quote` (what `%q` prints): double quotes, Go escapes for control and non-printable runes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32))
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32))
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `json.Marshal` of an unstructured value: compact, object keys sorted, and `<`, `>`, `&` escaped
/// as `\u003c`, `\u003e`, `\u0026` like Go's HTML-safe encoder.
pub fn go_json(v: &Value) -> String {
    let mut out = String::new();
    write_go_json(v, None, &mut Vec::new(), &mut out);
    out
}

/// The Go struct field order of a typed object at a path (`*` stands for any array index); `None`
/// where the path holds a map, which Go writes with sorted keys.
pub type WireOrder = fn(&[&str]) -> Option<&'static [&'static str]>;

/// Writes `v` as Go's encoder does: struct fields in declaration order where `order` knows the path
/// (`path` is where `v` is), everything else as maps with sorted keys. `order: None` is
/// [`go_json`]'s unstructured case: every object a map.
pub fn write_go_json(
    v: &Value,
    order: Option<WireOrder>,
    path: &mut Vec<String>,
    out: &mut String,
) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            let known = order.and_then(|order| {
                let refs: Vec<&str> = path.iter().map(String::as_str).collect();
                order(&refs)
            });
            match known {
                Some(fields) => {
                    keys.sort_by_key(|k| fields.iter().position(|f| f == k).unwrap_or(usize::MAX))
                }
                None => keys.sort(),
            }
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(k, out);
                out.push(':');
                with_step(path, order.is_some(), k, |path| {
                    write_go_json(&m[k], order, path, out)
                });
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                with_step(path, order.is_some(), "*", |path| {
                    write_go_json(x, order, path, out)
                });
            }
            out.push(']');
        }
        Value::String(s) => write_go_string(s, out),
        other => out.push_str(&other.to_string()),
    }
}

/// Runs `f` with `step` appended to `path` (only when the path is `tracked`).
fn with_step(path: &mut Vec<String>, tracked: bool, step: &str, f: impl FnOnce(&mut Vec<String>)) {
    if tracked {
        path.push(step.to_string());
        f(path);
        path.pop();
    } else {
        f(path);
    }
}

/// A JSON string as Go's encoder writes it (HTML-safe escaping).
pub fn write_go_string(s: &str, out: &mut String) {
    let enc = serde_json::to_string(s).unwrap_or_default();
    for c in enc.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_error_wording_matches_apimachinery() {
        let e = FieldError::invalid(
            "spec.managedBy",
            BadValue::Str("dispatcher".into()),
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        );
        assert_eq!(
            e.message(),
            "spec.managedBy: Invalid value: \"dispatcher\": must be a domain-prefixed path (such as \"acme.io/foo\")"
        );
        assert_eq!(
            FieldError::required("spec.managedBy", "").message(),
            "spec.managedBy: Required value"
        );
        assert_eq!(
            FieldError::too_long("spec.managedBy", 63).body(),
            "Too long: may not be more than 63 bytes"
        );
        assert_eq!(
            FieldError::invalid(
                "status.conditions",
                BadValue::Omit,
                "cannot disable the terminal Complete=True condition"
            )
            .body(),
            "Invalid value: cannot disable the terminal Complete=True condition"
        );
        assert_eq!(
            FieldError::invalid("x", BadValue::Null, "field is immutable").body(),
            "Invalid value: null: field is immutable"
        );
        assert_eq!(
            FieldError::not_supported(
                "propagationPolicy",
                BadValue::Str("Sometimes".into()),
                &["Foreground", "Background"]
            )
            .body(),
            "Unsupported value: \"Sometimes\": supported values: \"Foreground\", \"Background\""
        );
    }

    #[test]
    fn invalid_status_dedupes_the_message_but_keeps_every_cause() {
        let e = FieldError::invalid(
            "spec.template.labels",
            BadValue::Str("n".into()),
            "must be no more than 63 bytes",
        );
        let err = ApiError::invalid("batch", "Job", "n", &[e.clone(), e]);
        let s = err.to_status();
        assert_eq!(
            s["message"],
            "Job.batch \"n\" is invalid: spec.template.labels: Invalid value: \"n\": must be no more than 63 bytes"
        );
        assert_eq!(s["details"]["causes"].as_array().map(Vec::len), Some(2));
        assert_eq!(s["code"], 422);
        let two = ApiError::invalid(
            "",
            "Secret",
            "s",
            &[FieldError::required("a", ""), FieldError::required("b", "")],
        );
        assert_eq!(
            two.message,
            "Secret \"s\" is invalid: [a: Required value, b: Required value]"
        );
        assert!(two.details.as_ref().and_then(|d| d.get("group")).is_none());
    }

    #[test]
    fn go_json_sorts_keys_and_escapes_html() {
        assert_eq!(
            go_json(&json!({"b": 1, "a": "<x>"})),
            "{\"a\":\"\\u003cx\\u003e\",\"b\":1}"
        );
        assert_eq!(go_quote("a\"b\n"), "\"a\\\"b\\n\"");
    }

    #[test]
    fn not_found_and_conflict_bodies() {
        let s = ApiError::not_found("batch", "jobs", "missing").to_status();
        assert_eq!(s["message"], "jobs.batch \"missing\" not found");
        assert_eq!(
            s["details"],
            json!({"name": "missing", "group": "batch", "kind": "jobs"})
        );
        let c = ApiError::modified("", "secrets", "s");
        assert_eq!(
            c.message,
            "Operation cannot be fulfilled on secrets \"s\": the object has been modified; please apply your changes to the latest version and try again"
        );
    }
}
