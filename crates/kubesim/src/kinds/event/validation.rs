//! Validation of Events on create and update, for both API versions, on the
//! internal (core/v1) form (`pkg/apis/core/validation/events.go`).

use serde_json::Value;

use super::super::common::{self, GoTime, TimeLayout};
use super::EventVersion;
use crate::errors::{BadValue, FieldError, FieldErrors, go_quote};
use crate::json::{meta_str, str_at};
use crate::validation::names;

const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

fn is_zero_time(core: &Value, k: &str) -> bool {
    core.get(k).is_none_or(Value::is_null)
}

/// `legacyValidateEvent`: what every Event must satisfy, whatever the version.
pub fn legacy_validate(core: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    let ns = meta_str(core, "namespace");
    let io_ns = str_at(core, &["involvedObject", "namespace"]);
    let mismatch = |errs: &mut FieldErrors| {
        errs.push(FieldError::invalid(
            "involvedObject.namespace",
            BadValue::Str(io_ns.into()),
            "does not match event.namespace",
        ))
    };
    if is_zero_time(core, "eventTime") {
        // Old-style events: the namespaces must agree ("" or "default" for cluster-scoped subjects).
        if io_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                mismatch(&mut errs);
            }
        } else if ns != io_ns {
            mismatch(&mut errs);
        }
    } else {
        if io_ns.is_empty() && ns != "default" && ns != "kube-system" {
            mismatch(&mut errs);
        }
        let rc = str_at(core, &["reportingComponent"]);
        if rc.is_empty() {
            errs.push(FieldError::required("reportingController", ""));
        }
        for msg in names::legacy::is_qualified_name(rc) {
            errs.push(FieldError::invalid(
                "reportingController",
                BadValue::Str(rc.into()),
                msg,
            ));
        }
        let ri = str_at(core, &["reportingInstance"]);
        if ri.is_empty() {
            errs.push(FieldError::required("reportingInstance", ""));
        }
        if ri.len() > REPORTING_INSTANCE_LIMIT {
            errs.push(FieldError::invalid(
                "reportingInstance",
                BadValue::Str(String::new()),
                format!("can have at most {REPORTING_INSTANCE_LIMIT} characters"),
            ));
        }
        let action = str_at(core, &["action"]);
        if action.is_empty() {
            errs.push(FieldError::required("action", ""));
        }
        if action.len() > ACTION_LIMIT {
            errs.push(FieldError::invalid(
                "action",
                BadValue::Str(String::new()),
                format!("can have at most {ACTION_LIMIT} characters"),
            ));
        }
        let reason = str_at(core, &["reason"]);
        if reason.is_empty() {
            errs.push(FieldError::required("reason", ""));
        }
        if reason.len() > REASON_LIMIT {
            errs.push(FieldError::invalid(
                "reason",
                BadValue::Str(String::new()),
                format!("can have at most {REASON_LIMIT} characters"),
            ));
        }
        if str_at(core, &["message"]).len() > NOTE_LIMIT {
            errs.push(FieldError::invalid(
                "message",
                BadValue::Str(String::new()),
                format!("can have at most {NOTE_LIMIT} characters"),
            ));
        }
    }
    for msg in names::legacy::is_dns1123_subdomain(ns) {
        errs.push(FieldError::invalid(
            "namespace",
            BadValue::Str(ns.into()),
            msg,
        ));
    }
    errs
}

/// `validateV1EventSeries`.
fn validate_series(core: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    if let Some(series) = core.get("series").filter(|s| s.is_object()) {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            errs.push(FieldError::invalid(
                "series.count",
                BadValue::Str(String::new()),
                "should be at least 2",
            ));
        }
        if series.get("lastObservedTime").is_none_or(Value::is_null) {
            errs.push(FieldError::required("series.lastObservedTime", ""));
        }
    }
    errs
}

/// `ValidateEventCreate` (ObjectMeta checks excluded: the generic flow runs them).
pub fn validate_create(core: &Value, version: EventVersion) -> FieldErrors {
    let mut errs = legacy_validate(core);
    if version == EventVersion::Core {
        // No further validation for backwards compatibility.
        return errs;
    }
    errs.extend(validate_series(core));
    if is_zero_time(core, "eventTime") {
        errs.push(FieldError::required("eventTime", ""));
    }
    let typ = str_at(core, &["type"]);
    if typ != "Normal" && typ != "Warning" {
        errs.push(FieldError::invalid(
            "type",
            BadValue::Str(String::new()),
            format!("has invalid value: {typ}"),
        ));
    }
    for k in ["firstTimestamp", "lastTimestamp"] {
        if !is_zero_time(core, k) {
            errs.push(FieldError::invalid(
                k,
                BadValue::Str(String::new()),
                "needs to be unset",
            ));
        }
    }
    if core.get("count").and_then(Value::as_i64).unwrap_or(0) != 0 {
        errs.push(FieldError::invalid(
            "count",
            BadValue::Str(String::new()),
            "needs to be unset",
        ));
    }
    if !str_at(core, &["source", "component"]).is_empty()
        || !str_at(core, &["source", "host"]).is_empty()
    {
        errs.push(FieldError::invalid(
            "source",
            BadValue::Str(String::new()),
            "needs to be unset",
        ));
    }
    errs
}

/// Go's `%#v` of an internal `core.ObjectReference`.
fn go_ref_repr(r: &Value) -> String {
    let f = |k: &str| go_quote(str_at(r, &[k]));
    format!(
        "core.ObjectReference{{Kind:{}, Namespace:{}, Name:{}, UID:{}, APIVersion:{}, ResourceVersion:{}, FieldPath:{}}}",
        f("kind"),
        f("namespace"),
        f("name"),
        f("uid"),
        f("apiVersion"),
        f("resourceVersion"),
        f("fieldPath")
    )
}

/// `Time.String()` of a stored timestamp (zero time when null).
fn go_time_repr(v: Option<&Value>) -> String {
    let t = v
        .and_then(Value::as_str)
        .and_then(|s| {
            common::go_parse_time(s, TimeLayout::Rfc3339Micro)
                .or_else(|_| common::go_parse_time(s, TimeLayout::Rfc3339))
                .ok()
        })
        .unwrap_or_else(GoTime::zero);
    t.go_string()
}

/// `ValidateEventUpdate` (ObjectMeta update checks excluded).
pub fn validate_update(new: &Value, old: &Value, version: EventVersion) -> FieldErrors {
    let mut errs = legacy_validate(new);
    if version == EventVersion::Core {
        return errs;
    }
    if new.get("series") != old.get("series") {
        errs.extend(validate_series(new));
    }
    let mut immutable = |path: &str, changed: bool, value: BadValue| {
        if changed {
            errs.push(FieldError::invalid(path, value, "field is immutable"));
        }
    };
    let differs = |k: &str| new.get(k) != old.get(k);
    let s = |k: &str| BadValue::Str(str_at(new, &[k]).to_string());
    immutable(
        "involvedObject",
        differs("involvedObject"),
        BadValue::Raw(go_ref_repr(&new["involvedObject"])),
    );
    immutable("reason", differs("reason"), s("reason"));
    immutable("message", differs("message"), s("message"));
    immutable(
        "source",
        differs("source"),
        BadValue::Raw(format!(
            "core.EventSource{{Component:{}, Host:{}}}",
            go_quote(str_at(new, &["source", "component"])),
            go_quote(str_at(new, &["source", "host"]))
        )),
    );
    for k in ["firstTimestamp", "lastTimestamp"] {
        immutable(k, differs(k), BadValue::Raw(go_time_repr(new.get(k))));
    }
    immutable(
        "count",
        differs("count"),
        BadValue::Int(new.get("count").and_then(Value::as_i64).unwrap_or(0)),
    );
    // The real validator checks `reason` twice; both causes are reported.
    immutable("reason", differs("reason"), s("reason"));
    immutable("type", differs("type"), s("type"));
    immutable(
        "eventTime",
        differs("eventTime"),
        BadValue::Raw(go_time_repr(new.get("eventTime"))),
    );
    immutable("action", differs("action"), s("action"));
    immutable(
        "related",
        differs("related"),
        match new.get("related") {
            Some(r) if r.is_object() => BadValue::Raw(go_ref_repr(r)),
            _ => BadValue::Null,
        },
    );
    immutable(
        "reportingController",
        differs("reportingComponent"),
        s("reportingComponent"),
    );
    immutable(
        "reportingInstance",
        differs("reportingInstance"),
        s("reportingInstance"),
    );
    errs
}
