//! Changes of the origin's spec that flow down to its mirror after creation, judged against what
//! Courier last *sent* (hashes in the mirror's annotations), never only against what the worker
//! echoes: a worker may drop fields it does not know, and comparing with its echo would patch on
//! every reconcile.
//!
//! - **Mutable fields** ([`DRIFTING_SPEC_FIELDS`]: suspend, parallelism, completions with
//!   parallelism for elastic Indexed Jobs, activeDeadlineSeconds, backoffLimit, maxFailedIndexes,
//!   podReplacementPolicy). A field the mirror shows with another value drifts. A field the mirror
//!   lacks drifts only when Courier has not sent that value yet (the `courier.dev/spec-hash`
//!   annotation differs). A field the origin no longer has is removed, except the ones the API
//!   server defaults (absence means "no opinion").
//! - **The pod template**: its hash (after the same label stripping as the mirror gets) against the
//!   mirror's `courier.dev/template-hash`. The origin's API server only accepts template changes on
//!   a suspended Job (scheduling directives; container resources from 1.36), so this flows while
//!   both are suspended. A mirror without the annotation (created by an older Courier) is left alone.
//! - **Kueue** (origin label `kueue.x-k8s.io/queue-name`): the mirror is created suspended and only
//!   the worker's Kueue unsuspends it; Courier only sends `suspend: true`, when the origin is
//!   suspended.

use serde_json::{Map, Value};

use crate::compact::{Labels, SpecSource};
use courier_api::{
    ANNOTATION_SPEC_HASH, ANNOTATION_TEMPLATE_HASH, JOB_CONTROLLER_TEMPLATE_LABELS,
    LABEL_KUEUE_QUEUE_NAME,
};

/// Spec fields that are mutable on a running (or suspended) Job and flow from the origin down.
pub const DRIFTING_SPEC_FIELDS: [&str; 7] = [
    "suspend",
    "parallelism",
    "completions",
    "activeDeadlineSeconds",
    "backoffLimit",
    "maxFailedIndexes",
    "podReplacementPolicy",
];

/// Drifting fields the API server defaults on create: an origin without one has no opinion, so its
/// absence is never propagated as a removal (which the worker would only default back).
const SERVER_DEFAULTED_FIELDS: [&str; 4] = [
    "parallelism",
    "completions",
    "backoffLimit",
    "podReplacementPolicy",
];

/// Whether the worker's Kueue decides when the mirror runs (the origin carries a queue name).
pub fn kueue_managed(labels: &impl Labels) -> bool {
    labels
        .label(LABEL_KUEUE_QUEUE_NAME)
        .is_some_and(|q| !q.is_empty())
}

/// The value Courier sends for the mutable field `key` (`None`: it sends none). `suspend` is
/// always sent, as `false` unless the origin is suspended, except to a Kueue-managed mirror, which
/// only ever gets `true` (Kueue's to decide).
fn desired_field<'a>(
    origin_spec: &'a impl SpecSource,
    kueue: bool,
    key: &str,
) -> Option<&'a Value> {
    static SUSPENDED: Value = Value::Bool(true);
    static NOT_SUSPENDED: Value = Value::Bool(false);
    if key == "suspend" {
        return if origin_spec.field(key).and_then(Value::as_bool) == Some(true) {
            Some(&SUSPENDED)
        } else if kueue {
            None
        } else {
            Some(&NOT_SUSPENDED)
        };
    }
    origin_spec.field(key).filter(|v| !v.is_null())
}

/// The mutable fields the mirror should carry, as Courier sends them.
pub fn desired_fields(origin_spec: &impl SpecSource, kueue: bool) -> Map<String, Value> {
    DRIFTING_SPEC_FIELDS
        .into_iter()
        .filter_map(|key| {
            Some((
                key.to_string(),
                desired_field(origin_spec, kueue, key)?.clone(),
            ))
        })
        .collect()
}

/// The spec-field patch (`{field: value or null}`) that brings the mirror in line with the origin,
/// or `None` when nothing drifts. See the module docs for the rules. Runs on every status copy, so
/// the fields are compared where they are (no copy of the desired ones unless it must hash them).
pub fn spec_drift(
    origin_spec: &impl SpecSource,
    kueue: bool,
    mirror_spec: &impl SpecSource,
    mirror_annotations: &impl Labels,
) -> Option<Map<String, Value>> {
    // Hashed only when a field the origin sets is missing on the mirror (rare): the common case,
    // a mirror in line, compares the fields and nothing else.
    let sent_already = || {
        mirror_annotations.label(ANNOTATION_SPEC_HASH)
            == Some(spec_hash(origin_spec, kueue).as_str())
    };
    const NOT_SUSPENDED: Value = Value::Bool(false);
    let mut patch = Map::new();
    for key in DRIFTING_SPEC_FIELDS {
        let wanted = desired_field(origin_spec, kueue, key);
        if key == "suspend" && kueue && wanted.is_none() {
            continue;
        }
        let mut shown = mirror_spec.field(key).filter(|v| !v.is_null());
        if key == "suspend" {
            shown = Some(shown.unwrap_or(&NOT_SUSPENDED));
        }
        if wanted == shown {
            continue;
        }
        match (wanted, shown) {
            (None, _) if SERVER_DEFAULTED_FIELDS.contains(&key) => continue,
            // The worker does not show what was sent: it dropped the field (an older version).
            (Some(_), None) if sent_already() => continue,
            _ => {}
        }
        patch.insert(key.to_string(), wanted.cloned().unwrap_or(Value::Null));
    }
    (!patch.is_empty()).then_some(patch)
}

/// Hash of the mutable fields as sent (the `courier.dev/spec-hash` annotation).
pub fn spec_hash(origin_spec: &impl SpecSource, kueue: bool) -> String {
    hash_value(&Value::Object(desired_fields(origin_spec, kueue)))
}

/// The pod template the mirror gets from an origin `spec`: the origin's, minus the four
/// controller-generated labels unless `manualSelector` is true (the worker generates its own).
pub fn mirror_template(origin_spec: &Value) -> Option<Value> {
    let (template, metadata) = template_of(origin_spec)?;
    let mut template = template.clone();
    if let Some(metadata) = metadata {
        template.insert("metadata".into(), metadata);
    }
    Some(Value::Object(template))
}

/// An origin's pod template and, where the mirror's differs (no `manualSelector`, a `metadata`
/// present), the mirror's `metadata`: the one part [`mirror_template`] and [`template_hash`]
/// change, so the template itself is read where it is.
fn template_of(origin_spec: &Value) -> Option<(&Map<String, Value>, Option<Value>)> {
    let template = origin_spec.get("template").and_then(Value::as_object)?;
    let manual = origin_spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
    let metadata = template.get("metadata").filter(|_| !manual).map(|meta| {
        let mut meta = meta.clone();
        strip_controller_labels(&mut meta);
        meta
    });
    Some((template, metadata))
}

/// Takes the Job controller's labels out of a template's `metadata` (and `labels` with them when
/// nothing else is left).
fn strip_controller_labels(meta: &mut Value) {
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    let now_empty = match meta.get_mut("labels").and_then(Value::as_object_mut) {
        Some(labels) => {
            for key in JOB_CONTROLLER_TEMPLATE_LABELS {
                labels.remove(key);
            }
            labels.is_empty()
        }
        None => false,
    };
    if now_empty {
        meta.remove("labels");
    }
}

/// Hash of the mirror's template as built from an origin `spec` (the `courier.dev/template-hash`
/// annotation); `None` when the spec has no template.
pub fn template_hash(origin_spec: &Value) -> Option<String> {
    // `hash_value(&mirror_template(origin_spec)?)` without copying the template: only its
    // metadata is copied to take the labels out; the pod spec is hashed where it is.
    let (template, metadata) = template_of(origin_spec)?;
    let mut h = Fnv(FNV_OFFSET);
    feed_map(
        &mut h,
        template.iter().map(|(k, v)| match &metadata {
            Some(meta) if k == "metadata" => (k, meta),
            _ => (k, v),
        }),
    );
    Some(format!("{:016x}", h.0))
}

/// Whether the origin's template differs from the one last sent to the mirror. A mirror without
/// the annotation (made by an older Courier) never drifts.
pub fn template_drifts(
    origin_template_hash: Option<&str>,
    mirror_annotations: &impl Labels,
) -> bool {
    match (
        origin_template_hash,
        mirror_annotations.label(ANNOTATION_TEMPLATE_HASH),
    ) {
        (Some(want), Some(sent)) => want != sent,
        _ => false,
    }
}

/// The merge patch turning the live mirror's template into `desired` (from [`mirror_template`]),
/// keeping the labels the worker generated (its selector matches them). `None` when equal.
pub fn template_patch(live: &Value, desired: &Value) -> Option<Value> {
    let mut want = desired.clone();
    let generated: Map<String, Value> = live
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.iter()
                .filter(|(k, _)| JOB_CONTROLLER_TEMPLATE_LABELS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    if !generated.is_empty()
        && let Some(obj) = want.as_object_mut()
    {
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            let labels = meta
                .entry("labels")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(labels) = labels.as_object_mut() {
                for (k, v) in generated {
                    labels.entry(k).or_insert(v);
                }
            }
        }
    }
    crate::merge_patch::merge_patch(live, &want)
}

/// A stable 64-bit FNV-1a hash of a JSON value (object keys in sorted order), as 16 hex digits.
/// Stable across processes and versions: it is stored on mirrors.
pub fn hash_value(v: &Value) -> String {
    let mut h = Fnv(FNV_OFFSET);
    feed(&mut h, v);
    format!("{:016x}", h.0)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

struct Fnv(u64);

impl Fnv {
    fn bytes(&mut self, b: &[u8]) {
        for byte in b {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn tagged(&mut self, tag: u8, b: &[u8]) {
        self.bytes(&[tag]);
        self.bytes(&(b.len() as u64).to_le_bytes());
        self.bytes(b);
    }
}

fn feed(h: &mut Fnv, v: &Value) {
    match v {
        Value::Null => h.bytes(b"n"),
        Value::Bool(b) => h.bytes(if *b { b"t" } else { b"f" }),
        Value::Number(n) => h.tagged(b'#', n.to_string().as_bytes()),
        Value::String(s) => h.tagged(b's', s.as_bytes()),
        Value::Array(items) => {
            h.tagged(b'[', &(items.len() as u64).to_le_bytes());
            for item in items {
                feed(h, item);
            }
        }
        Value::Object(map) => feed_map(h, map.iter()),
    }
}

/// An object's entries, in key order.
fn feed_map<'a>(h: &mut Fnv, entries: impl Iterator<Item = (&'a String, &'a Value)>) {
    let mut entries: Vec<(&String, &Value)> = entries.collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    h.tagged(b'{', &(entries.len() as u64).to_le_bytes());
    for (k, v) in entries {
        h.tagged(b'k', k.as_bytes());
        feed(h, v);
    }
}

#[cfg(test)]
mod tests;
