//! Small pieces the built-in kinds share: Go-compatible decoding (base64, `time.Parse`) so decode
//! errors read like the real server's, Go's value formatting (`%v` of floats, `Time.String()`),
//! discovery's storage-version hash, `kubectl` age strings and condition bookkeeping. The
//! apimachinery name checks the kinds run on their own fields are in `crate::validation::names`.

mod encoding;
mod gofmt;
mod gotime;

use serde_json::{Value, json};

use crate::errors::go_quote;
use crate::validation::path::Path;

pub use encoding::{base64_encode, go_base64_decode, sha256, storage_version_hash};
pub use gofmt::{OBJECT_META_ORDER, go_float_v, go_print_v, merge_patch_text, object_meta_order};
pub use gotime::{GoTime, TimeLayout, go_parse_time, normalize_time_field};

// ---------------------------------------------------------------------------------------------
// Field paths (`field.Path`), spelled at once where the caller already holds its parent as a
// string; the spelling itself is `validation::path::Path`'s (`Key` renders `parent[key]` unquoted,
// `Index` renders `parent[i]`).

pub fn key(parent: &str, k: &str) -> String {
    Path::new(parent).key(k).to_string()
}

pub fn index(parent: &str, i: usize) -> String {
    Path::new(parent).index(i).to_string()
}

/// `parent.c`, or `c` alone under an empty parent (no path yet).
pub fn child(parent: &str, c: &str) -> String {
    if parent.is_empty() {
        c.to_string()
    } else {
        Path::new(parent).child(c).to_string()
    }
}

/// The codec's wrapper around a decode error: `<Kind> in version "<v>" cannot be handled as a <Kind>: <err>`.
pub fn decode_error(kind: &str, version: &str, err: &str) -> crate::errors::ApiError {
    crate::errors::ApiError::bad_request(format!(
        "{kind} in version {} cannot be handled as a {kind}: {err}",
        go_quote(version)
    ))
}

// ---------------------------------------------------------------------------------------------
// Field selectors: the refusals of `ConvertFieldLabel`.

/// The core/v1 conversion funcs' refusal (`field label not supported: x`), used by Secrets,
/// Namespaces, core/v1 Events, events.k8s.io/v1 Events and custom resources.
pub fn field_label_not_supported(label: &str) -> String {
    format!("field label not supported: {label}")
}

/// `runtime.DefaultMetaV1FieldSelectorConversion`'s refusal, for kinds without a conversion func
/// (ConfigMaps, Leases, CRDs).
pub fn field_label_not_known(label: &str) -> String {
    format!(
        "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
        go_quote(label)
    )
}

/// The cause inside a codec decode error (`X in version "v" cannot be handled as a X: <cause>`),
/// which the PATCH path reports on its own (see `secret::patch_decode_error`).
pub fn decode_error_cause(message: &str) -> &str {
    match message.find(" cannot be handled as a ") {
        Some(i) => match message[i..].find(": ") {
            Some(j) => &message[i + j + 2..],
            None => message,
        },
        None => message,
    }
}

// ---------------------------------------------------------------------------------------------
// What every kind with a spec and a status does on update (`PrepareForUpdate`,
// `PrepareForStatusUpdate`).

/// Keeps the stored object's `part` in `new` (removed if the stored object has none): an update
/// through the main resource keeps the status (the status subresource owns it), one through
/// `/status` (or `/finalize`) keeps the spec, as the API server's `PrepareForUpdate` and
/// `PrepareForStatusUpdate` of every kind with a status do.
pub fn keep_stored(new: &mut Value, old: &Value, part: &str) {
    // Already the stored part (an in-process writer's object is built over the stored one): left
    // as it is instead of replaced by a copy of it.
    if let (Some(n), Some(o)) = (new.get(part), old.get(part))
        && crate::json::identical(n, o)
    {
        return;
    }
    if let Some(m) = new.as_object_mut() {
        match old.get(part) {
            Some(s) => m.insert(part.into(), s.clone()),
            None => m.remove(part),
        };
    }
}

/// `metadata.generation` on update: the stored one, plus one when the desired state (`changed`:
/// the spec, or for a custom resource everything but metadata and status) changed.
pub fn next_generation(new: &mut Value, old: &Value, changed: bool) {
    let old_gen = old
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(meta) = crate::json::ensure_obj(new, "metadata") {
        meta.insert(
            "generation".into(),
            json!(if changed { old_gen + 1 } else { old_gen }),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Table cells.

/// `duration.HumanDuration` (what `kubectl get` shows in AGE / LAST SEEN columns).
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".to_string();
    }
    if secs < 0 {
        return "0s".to_string();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// `translateTimestampSince`: `<unknown>` for a missing timestamp, else the human age.
pub fn age_of(ts: Option<&str>) -> String {
    let parsed = ts.and_then(|s| {
        go_parse_time(s, TimeLayout::Rfc3339)
            .or_else(|_| go_parse_time(s, TimeLayout::Rfc3339Micro))
            .ok()
    });
    match parsed {
        Some(t) => human_duration(GoTime::now().secs - t.secs),
        None => "<unknown>".to_string(),
    }
}

/// The AGE cell of an object.
pub fn creation_age(obj: &Value) -> String {
    age_of(
        obj.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
    )
}

/// The verbs discovery lists for an ordinary namespaced built-in resource.
pub fn standard_verbs() -> Vec<String> {
    [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

/// Column descriptions shared by every printer (swagger docs of `ObjectMeta.name` and
/// `.creationTimestamp`, as the recorded Job table shows them).
pub const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
pub const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

// ---------------------------------------------------------------------------------------------
// Conditions.

/// Sets a condition the way the apiextensions helpers do (`SetCRDCondition`): replace the entry of
/// that type, keeping its `lastTransitionTime` unless the status changed; append if new. Conditions
/// are written `{type, status, lastTransitionTime, reason, message}`.
pub fn set_condition(
    conditions: &mut Vec<Value>,
    ctype: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) {
    let mut cond = json!({"type": ctype, "status": status, "lastTransitionTime": now});
    if let Value::Object(m) = &mut cond {
        if !reason.is_empty() {
            m.insert("reason".into(), json!(reason));
        }
        if !message.is_empty() {
            m.insert("message".into(), json!(message));
        }
    }
    match conditions
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ctype))
    {
        Some(existing) => {
            let same_status = existing.get("status").and_then(Value::as_str) == Some(status);
            if same_status
                && let (Some(old_t), Value::Object(m)) =
                    (existing.get("lastTransitionTime").cloned(), &mut cond)
            {
                m.insert("lastTransitionTime".into(), old_t);
            }
            *existing = cond;
        }
        None => conditions.push(cond),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        assert_eq!(human_duration(-5), "<invalid>");
        assert_eq!(human_duration(-1), "0s");
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(59), "59s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 120), "3h2m");
        assert_eq!(human_duration(50 * 3600), "2d2h");
        assert_eq!(human_duration(10 * 3600), "10h");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
        assert_eq!(human_duration(30 * 86400), "30d");
        assert_eq!(human_duration(3 * 365 * 86400 + 86400), "3y1d");
        assert_eq!(human_duration(9 * 365 * 86400), "9y");
    }
}
