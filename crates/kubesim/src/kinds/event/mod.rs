//! Events: core/v1 `events` and events.k8s.io/v1 `events`, one storage (the core/v1 shape, which
//! carries every field of the internal `core.Event`) served in two versions.
//!
//! Sources: `pkg/apis/events/v1/conversion.go` (regarding<->involvedObject, note<->message,
//! deprecated* <-> source/firstTimestamp/lastTimestamp/count, reportingController<->reportingComponent),
//! `pkg/apis/core/validation/events.go` (`ValidateEventCreate`/`ValidateEventUpdate`: legacy checks
//! for core/v1, strict ones for events.k8s.io/v1), `pkg/registry/core/event/strategy.go`
//! (`AllowCreateOnUpdate`/`AllowUnconditionalUpdate` true, selectable fields) and the field-label
//! conversions of both versions. Output shapes follow the Go structs' `omitempty` tags, which the
//! recordings (`events.json`) show: core/v1 always writes `source`, `firstTimestamp`,
//! `lastTimestamp`, `eventTime`, `reportingComponent`, `reportingInstance`; events.k8s.io/v1 always
//! writes `eventTime`, `regarding`, `deprecatedSource`, `deprecatedFirstTimestamp`,
//! `deprecatedLastTimestamp`.

use serde_json::{Map, Value, json};

use super::common::{self, TimeLayout};
use super::{NameRule, ResourceInfo, Strategy, TableSpec, Warnings};
use crate::errors::{ApiError, FieldErrors};
use crate::json::{meta_str, str_at};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventVersion {
    /// core/v1 (`/api/v1/.../events`).
    Core,
    /// events.k8s.io/v1.
    EventsV1,
}

pub struct EventStrategy {
    version: EventVersion,
    info: ResourceInfo,
}

impl EventStrategy {
    pub fn core() -> Self {
        Self::new(EventVersion::Core)
    }

    pub fn events_v1() -> Self {
        Self::new(EventVersion::EventsV1)
    }

    fn new(version: EventVersion) -> Self {
        let group = match version {
            EventVersion::Core => "",
            EventVersion::EventsV1 => "events.k8s.io",
        };
        Self {
            version,
            info: ResourceInfo {
                group: group.into(),
                version: "v1".into(),
                kind: "Event".into(),
                plural: "events".into(),
                singular: "event".into(),
                namespaced: true,
                short_names: vec!["ev".into()],
                categories: Vec::new(),
                verbs: common::standard_verbs(),
                status_subresource: false,
                // Both versions name the same storage version (core/v1), hence the same hash.
                storage_version_hash: Some("r2yiGXH7wu8=".into()),
            },
        }
    }

    pub fn version(&self) -> EventVersion {
        self.version
    }

    /// The internal (storage) form of a body of this served version.
    fn internal(&self, obj: &Value) -> Value {
        match self.version {
            EventVersion::Core => normalize_core(obj),
            EventVersion::EventsV1 => to_core(obj),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shapes and conversion.

const REF_FIELDS: &[&str] = &[
    "kind",
    "namespace",
    "name",
    "uid",
    "apiVersion",
    "resourceVersion",
    "fieldPath",
];

/// An `ObjectReference` with its `omitempty` strings dropped.
fn normalize_ref(v: Option<&Value>) -> Value {
    let mut out = Map::new();
    if let Some(Value::Object(m)) = v {
        for f in REF_FIELDS {
            if let Some(Value::String(s)) = m.get(*f)
                && !s.is_empty()
            {
                out.insert((*f).to_string(), json!(s));
            }
        }
    }
    Value::Object(out)
}

fn normalize_source(v: Option<&Value>) -> Value {
    let mut out = Map::new();
    if let Some(Value::Object(m)) = v {
        for f in ["component", "host"] {
            if let Some(Value::String(s)) = m.get(f)
                && !s.is_empty()
            {
                out.insert(f.to_string(), json!(s));
            }
        }
    }
    Value::Object(out)
}

fn non_empty_str(m: &Map<String, Value>, k: &str) -> Option<Value> {
    match m.get(k) {
        Some(Value::String(s)) if !s.is_empty() => Some(json!(s)),
        _ => None,
    }
}

fn time_or_null(m: &Map<String, Value>, k: &str) -> Value {
    match m.get(k) {
        Some(Value::String(s)) => json!(s),
        _ => Value::Null,
    }
}

fn non_zero_int(m: &Map<String, Value>, k: &str) -> Option<Value> {
    m.get(k)
        .and_then(Value::as_i64)
        .filter(|n| *n != 0)
        .map(|n| json!(n))
}

/// The canonical core/v1 form (what the server stores and writes back for core/v1).
pub fn normalize_core(obj: &Value) -> Value {
    let empty = Map::new();
    let m = obj.as_object().unwrap_or(&empty);
    let mut out = Map::new();
    out.insert("kind".into(), json!("Event"));
    out.insert("apiVersion".into(), json!("v1"));
    if let Some(meta) = m.get("metadata") {
        out.insert("metadata".into(), meta.clone());
    }
    out.insert(
        "involvedObject".into(),
        normalize_ref(m.get("involvedObject")),
    );
    for k in ["reason", "message"] {
        if let Some(v) = non_empty_str(m, k) {
            out.insert(k.into(), v);
        }
    }
    out.insert("source".into(), normalize_source(m.get("source")));
    out.insert("firstTimestamp".into(), time_or_null(m, "firstTimestamp"));
    out.insert("lastTimestamp".into(), time_or_null(m, "lastTimestamp"));
    if let Some(c) = non_zero_int(m, "count") {
        out.insert("count".into(), c);
    }
    if let Some(t) = non_empty_str(m, "type") {
        out.insert("type".into(), t);
    }
    out.insert("eventTime".into(), time_or_null(m, "eventTime"));
    if let Some(Value::Object(series)) = m.get("series") {
        let mut s = Map::new();
        if let Some(c) = non_zero_int(series, "count") {
            s.insert("count".into(), c);
        }
        s.insert(
            "lastObservedTime".into(),
            time_or_null(series, "lastObservedTime"),
        );
        out.insert("series".into(), Value::Object(s));
    }
    if let Some(a) = non_empty_str(m, "action") {
        out.insert("action".into(), a);
    }
    if let Some(r) = m.get("related").filter(|r| r.is_object()) {
        out.insert("related".into(), normalize_ref(Some(r)));
    }
    for k in ["reportingComponent", "reportingInstance"] {
        out.insert(
            k.into(),
            json!(m.get(k).and_then(Value::as_str).unwrap_or("")),
        );
    }
    Value::Object(out)
}

/// events.k8s.io/v1 -> the core/v1 (storage) form (`Convert_v1_Event_To_core_Event`).
pub fn to_core(ev: &Value) -> Value {
    let empty = Map::new();
    let m = ev.as_object().unwrap_or(&empty);
    let mut core = Map::new();
    if let Some(meta) = m.get("metadata") {
        core.insert("metadata".into(), meta.clone());
    }
    let copy = |core: &mut Map<String, Value>, from: &str, to: &str| {
        if let Some(v) = m.get(from) {
            core.insert(to.to_string(), v.clone());
        }
    };
    copy(&mut core, "regarding", "involvedObject");
    copy(&mut core, "reason", "reason");
    copy(&mut core, "note", "message");
    copy(&mut core, "deprecatedSource", "source");
    copy(&mut core, "deprecatedFirstTimestamp", "firstTimestamp");
    copy(&mut core, "deprecatedLastTimestamp", "lastTimestamp");
    copy(&mut core, "deprecatedCount", "count");
    copy(&mut core, "type", "type");
    copy(&mut core, "eventTime", "eventTime");
    copy(&mut core, "series", "series");
    copy(&mut core, "action", "action");
    copy(&mut core, "related", "related");
    copy(&mut core, "reportingController", "reportingComponent");
    copy(&mut core, "reportingInstance", "reportingInstance");
    normalize_core(&Value::Object(core))
}

/// The stored (core/v1) form -> events.k8s.io/v1 (`Convert_core_Event_To_v1_Event`).
pub fn to_events_v1(stored: &Value) -> Value {
    let core = normalize_core(stored);
    let empty = Map::new();
    let m = core.as_object().unwrap_or(&empty);
    let mut out = Map::new();
    out.insert("kind".into(), json!("Event"));
    out.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    if let Some(meta) = m.get("metadata") {
        out.insert("metadata".into(), meta.clone());
    }
    out.insert("eventTime".into(), time_or_null(m, "eventTime"));
    if let Some(Value::Object(series)) = m.get("series") {
        // events.k8s.io/v1 EventSeries has no omitempty.
        out.insert(
            "series".into(),
            json!({
                "count": series.get("count").and_then(Value::as_i64).unwrap_or(0),
                "lastObservedTime": time_or_null(series, "lastObservedTime"),
            }),
        );
    }
    if let Some(v) = non_empty_str(m, "reportingComponent") {
        out.insert("reportingController".into(), v);
    }
    for k in ["reportingInstance", "action", "reason"] {
        if let Some(v) = non_empty_str(m, k) {
            out.insert(k.into(), v);
        }
    }
    out.insert("regarding".into(), normalize_ref(m.get("involvedObject")));
    if let Some(r) = m.get("related") {
        out.insert("related".into(), r.clone());
    }
    if let Some(v) = non_empty_str(m, "message") {
        out.insert("note".into(), v);
    }
    if let Some(v) = non_empty_str(m, "type") {
        out.insert("type".into(), v);
    }
    out.insert("deprecatedSource".into(), normalize_source(m.get("source")));
    out.insert(
        "deprecatedFirstTimestamp".into(),
        time_or_null(m, "firstTimestamp"),
    );
    out.insert(
        "deprecatedLastTimestamp".into(),
        time_or_null(m, "lastTimestamp"),
    );
    if let Some(c) = non_zero_int(m, "count") {
        out.insert("deprecatedCount".into(), c);
    }
    Value::Object(out)
}

// ---------------------------------------------------------------------------------------------
// Decoding: the Time / MicroTime fields of each version.

fn decode_event(obj: &mut Value, version: EventVersion) -> Result<(), String> {
    let Some(m) = obj.as_object_mut() else {
        return Ok(());
    };
    let (times, micro): (&[&str], &[&str]) = match version {
        EventVersion::Core => (&["firstTimestamp", "lastTimestamp"], &["eventTime"]),
        EventVersion::EventsV1 => (
            &["deprecatedFirstTimestamp", "deprecatedLastTimestamp"],
            &["eventTime"],
        ),
    };
    for k in times {
        common::normalize_time_field(m, k, TimeLayout::Rfc3339)?;
    }
    for k in micro {
        common::normalize_time_field(m, k, TimeLayout::Rfc3339Micro)?;
    }
    if let Some(Value::Object(series)) = m.get_mut("series") {
        common::normalize_time_field(series, "lastObservedTime", TimeLayout::Rfc3339Micro)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
mod validation;

pub use validation::{legacy_validate, validate_create, validate_update};

// ---------------------------------------------------------------------------------------------
// Field selectors (on the stored form).

/// `ToSelectableFields` of the event registry, for a stored Event and an internal label.
pub fn selectable_field(stored: &Value, label: &str) -> Option<String> {
    if let Some(f) = label.strip_prefix("involvedObject.") {
        return REF_FIELDS
            .contains(&f)
            .then(|| str_at(stored, &["involvedObject", f]).to_string());
    }
    match label {
        "reason" | "type" | "reportingComponent" => Some(str_at(stored, &[label]).to_string()),
        "source" => {
            let component = str_at(stored, &["source", "component"]);
            Some(if component.is_empty() {
                str_at(stored, &["reportingComponent"]).to_string()
            } else {
                component.to_string()
            })
        }
        _ => None,
    }
}

impl Strategy for EventStrategy {
    fn invalid_kind(&self) -> (&str, &str) {
        ("", "Event")
    }

    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn decode(&self, obj: &mut Value) -> Result<Warnings, ApiError> {
        decode_event(obj, self.version).map_err(|e| common::decode_error("Event", "v1", &e))?;
        Ok(Vec::new())
    }

    fn validate_create(&self, obj: &Value) -> FieldErrors {
        validate_create(&self.internal(obj), self.version)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> FieldErrors {
        // `old` may arrive in either form; normalising the stored form is idempotent.
        let old_core = if old.get("regarding").is_some() || old.get("note").is_some() {
            to_core(old)
        } else {
            normalize_core(old)
        };
        validate_update(&self.internal(new), &old_core, self.version)
    }

    /// `field` is the internal label `convert_field_label` answered; `obj` the stored Event.
    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        selectable_field(obj, field)
    }

    fn convert_field_label(&self, label: &str) -> Result<String, String> {
        let mapped = match (self.version, label) {
            (_, "metadata.namespace" | "metadata.name" | "reason" | "type") => {
                Some(label.to_string())
            }
            (EventVersion::Core, "reportingComponent" | "source") => Some(label.to_string()),
            (EventVersion::Core, l) if l.starts_with("involvedObject.") => REF_FIELDS
                .contains(&&l["involvedObject.".len()..])
                .then(|| l.to_string()),
            (EventVersion::EventsV1, "reportingController") => Some("reportingComponent".into()),
            (EventVersion::EventsV1, l) if l.starts_with("regarding.") => {
                let f = &l["regarding.".len()..];
                REF_FIELDS
                    .contains(&f)
                    .then(|| format!("involvedObject.{f}"))
            }
            _ => None,
        };
        mapped.ok_or_else(|| common::field_label_not_supported(label))
    }

    fn table(&self) -> Option<&'static TableSpec> {
        Some(&EVENT_TABLE)
    }

    fn name_rule(&self) -> NameRule {
        match self.version {
            // Legacy validation never checks the name; only the generic path-segment check applies.
            EventVersion::Core => NameRule::PathSegment,
            EventVersion::EventsV1 => NameRule::DnsSubdomain,
        }
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn storage(&self) -> (&str, &str) {
        ("", "events")
    }

    fn converts(&self) -> bool {
        true
    }

    fn to_storage(&self, obj: Value) -> Value {
        self.internal(&obj)
    }

    fn from_storage(&self, stored: &Value) -> Value {
        match self.version {
            EventVersion::Core => normalize_core(stored),
            EventVersion::EventsV1 => to_events_v1(stored),
        }
    }
}

static EVENT_TABLE: TableSpec = TableSpec {
    columns: &[
        (
            "Last Seen",
            "string",
            "",
            "The time at which the most recent occurrence of this event was recorded.",
            0,
        ),
        (
            "Type",
            "string",
            "",
            "Type of this event (Normal, Warning), new types could be added in the future",
            0,
        ),
        (
            "Reason",
            "string",
            "",
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            0,
        ),
        (
            "Object",
            "string",
            "",
            "The object that this event is about.",
            0,
        ),
        (
            "Subobject",
            "string",
            "",
            "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.",
            1,
        ),
        (
            "Source",
            "string",
            "",
            "The component reporting this event. Should be a short machine understandable string.",
            1,
        ),
        (
            "Message",
            "string",
            "",
            "A human-readable description of the status of this operation.",
            0,
        ),
        (
            "First Seen",
            "string",
            "",
            "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
            1,
        ),
        (
            "Count",
            "string",
            "",
            "The number of times this event has occurred.",
            1,
        ),
        ("Name", "string", "name", common::NAME_DESCRIPTION, 1),
    ],
    cells: event_cells,
};

/// `printEvent` (server-side tables are always wide).
fn event_cells(obj: &Value) -> Vec<Value> {
    let core = if obj.get("regarding").is_some() || obj.get("note").is_some() {
        to_core(obj)
    } else {
        normalize_core(obj)
    };
    let ts = |k: &str| core.get(k).and_then(Value::as_str);
    let first = match ts("firstTimestamp") {
        Some(t) => common::age_of(Some(t)),
        None => common::age_of(ts("eventTime")),
    };
    let mut last = match ts("lastTimestamp") {
        Some(t) => common::age_of(Some(t)),
        None => first.clone(),
    };
    let mut count = core.get("count").and_then(Value::as_i64).unwrap_or(0);
    if let Some(series) = core.get("series").filter(|s| s.is_object()) {
        last = common::age_of(series.get("lastObservedTime").and_then(Value::as_str));
        count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        // Singleton events have no count in the new API.
        count = 1;
    }
    let kind = str_at(&core, &["involvedObject", "kind"]).to_lowercase();
    let name = str_at(&core, &["involvedObject", "name"]);
    let target = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };
    let first_non_empty = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else {
            a.to_string()
        }
    };
    let component = first_non_empty(
        str_at(&core, &["source", "component"]),
        str_at(&core, &["reportingComponent"]),
    );
    let instance = first_non_empty(
        str_at(&core, &["source", "host"]),
        str_at(&core, &["reportingInstance"]),
    );
    let source = if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last),
        json!(str_at(&core, &["type"])),
        json!(str_at(&core, &["reason"])),
        json!(target),
        json!(str_at(&core, &["involvedObject", "fieldPath"])),
        json!(source),
        json!(str_at(&core, &["message"]).trim()),
        json!(first),
        json!(count),
        json!(meta_str(&core, "name")),
    ]
}
