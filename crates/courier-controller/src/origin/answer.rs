//! [`WriteAnswer`]: the server's answer to a write of an origin's status (or of its finalizers on
//! the way out), decoded only as far as the cache needs it: the new `resourceVersion` and the
//! status. A status write changes nothing else the cache keeps (the status subresource ignores
//! metadata and spec; only `managedFields`, which the cache does not keep, moves along), so the
//! cached entry of the version the write was made from, with these two fields replaced, is the
//! entry of the answer. This saves decoding the answer's labels, annotations and spec and trimming
//! them again, four times per Job (one status copy per mirror status change).

use std::collections::BTreeMap;

use courier_core::job::finished;
use courier_core::job_status::CachedStatus;
use courier_core::mirror::{is_bookkeeping_annotation, is_bookkeeping_label};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::store::OriginEntry;
use crate::watch::SlimJob;
use crate::watch::job::status_from_text;

/// A Job as the answer to a write decodes it: the resourceVersion, and the status as the text it
/// arrived in (parsed into the cached view's own status type by [`WriteAnswer::apply_to`]).
#[derive(Clone, Debug, Deserialize)]
pub struct WriteAnswer {
    #[serde(deserialize_with = "version_only", default)]
    metadata: ObjectMeta,
    #[serde(default)]
    status: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Version {
    resource_version: Option<String>,
}

fn version_only<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let v = Version::deserialize(d)?;
    Ok(ObjectMeta {
        resource_version: v.resource_version,
        ..ObjectMeta::default()
    })
}

impl WriteAnswer {
    /// `cached` (the entry of the version the status write was made from) as of this answer: its
    /// resourceVersion and status replaced, the mirror source dropped once the Job finished (no
    /// mirror is built for a finished Job). `None` when the answer lacks a version or its status
    /// cannot be read (then the watch brings the new version).
    pub fn apply_to(&self, cached: &OriginEntry) -> Option<OriginEntry> {
        let rv = self.metadata.resource_version.clone()?;
        let status: CachedStatus = status_from_text(self.status.as_deref()).ok()?;
        let source = if finished(&status).is_some() {
            None
        } else {
            cached.source.clone()
        };
        Some(OriginEntry {
            view: cached.view.with_status(status, Some(rv)),
            created: cached.created,
            source,
        })
    }
}

crate::watch::batch_v1_job_resource!(WriteAnswer);

/// `cached` (the entry of the version a metadata write was made from, under its resourceVersion
/// precondition) as of `answer`, the server's answer to that write: the answer's metadata and
/// status on the cached view, the spec facts, the template hash, the creation time and the mirror
/// source kept. This saves parsing the answer's spec (pod template included) and trimming it
/// again, once per Job (the placement intent). The source keeps the labels and annotations of
/// the version before: the write adds only Courier's bookkeeping keys, which a mirror never
/// carries (`courier_core::mirror::mirror_for`). `None` when the spec may have changed too (the
/// generation moved, e.g. a mutating admission webhook) or the answer lacks a version or a
/// readable status: then the answer is trimmed whole. So is an answer whose other labels or
/// annotations differ from the source's (a mutating admission webhook that edits metadata on
/// update leaves the generation alone): the mirror must be built with them.
pub fn metadata_applied(cached: &OriginEntry, answer: &SlimJob) -> Option<OriginEntry> {
    let m = &answer.metadata;
    if m.generation != cached.view.generation || m.resource_version.is_none() {
        return None;
    }
    if let Some(source) = cached.source.as_deref()
        && !same_mirrored_metadata(source, m.labels.as_ref(), m.annotations.as_ref())
    {
        return None;
    }
    let mut view = cached.view.with_metadata(
        m.labels.clone().unwrap_or_default(),
        m.annotations.clone().unwrap_or_default(),
        m.finalizers.clone().unwrap_or_default(),
        m.deletion_timestamp.as_ref().map(|t| t.0),
        m.resource_version.clone(),
    );
    view.status = answer.status_as().ok()?;
    let mut entry = OriginEntry {
        view,
        ..cached.clone()
    };
    if finished(&entry.view.status).is_some() {
        entry.source = None;
    }
    Some(entry)
}

/// The labels and annotations of a cached mirror source (`store::Source`); its spec is skipped
/// unread.
#[derive(Deserialize)]
struct SourceMetadata {
    metadata: SourceLabels,
}

#[derive(Deserialize)]
struct SourceLabels {
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// Whether `labels` and `annotations` are the source's, Courier's bookkeeping keys aside (the only
/// keys the intent write adds, and ones no mirror carries). An unreadable source is not the same.
fn same_mirrored_metadata(
    source: &str,
    labels: Option<&BTreeMap<String, String>>,
    annotations: Option<&BTreeMap<String, String>>,
) -> bool {
    fn same(
        a: Option<&BTreeMap<String, String>>,
        b: Option<&BTreeMap<String, String>>,
        bookkeeping: fn(&str) -> bool,
    ) -> bool {
        let a = a.into_iter().flatten().filter(|(k, _)| !bookkeeping(k));
        let b = b.into_iter().flatten().filter(|(k, _)| !bookkeeping(k));
        a.eq(b)
    }
    let Ok(src) = serde_json::from_str::<SourceMetadata>(source) else {
        return false;
    };
    same(src.metadata.labels.as_ref(), labels, is_bookkeeping_label)
        && same(
            src.metadata.annotations.as_ref(),
            annotations,
            is_bookkeeping_annotation,
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::origin::store::trim;
    use serde_json::{Value, json};

    fn origin(rv: &str, status: Value) -> Value {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": rv,
                         "generation": 1, "finalizers": ["courier.dev/mirror-cleanup"],
                         "labels": {"app": "x", "courier.dev/cluster": "w1"},
                         "annotations": {"courier.dev/epoch": "1"},
                         "managedFields": [{"manager": "courier", "fieldsV1": {"f:status": {}}}]},
            "spec": {"managedBy": "courier.dev/dispatcher", "backoffLimit": 2,
                     "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}],
                                           "restartPolicy": "Never"}}},
            "status": status,
        })
    }

    /// The cheap path gives the entry a full decode and trim of the same answer gives.
    #[test]
    fn an_answer_applied_to_the_cached_version_is_the_answers_own_entry() {
        let before = trim(&origin("7", json!({"active": 1})))
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("not trimmed"));
        for status in [
            json!({"active": 1, "ready": 1, "startTime": "2026-01-01T00:00:00Z"}),
            json!({"succeeded": 1, "completionTime": "2026-01-01T00:00:09Z",
                   "startTime": "2026-01-01T00:00:00Z",
                   "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                                  {"type": "Complete", "status": "True"}]}),
            Value::Null,
        ] {
            let after = origin("8", status);
            let full = trim(&after)
                .ok()
                .flatten()
                .unwrap_or_else(|| panic!("not trimmed"));
            let answer: WriteAnswer =
                serde_json::from_value(after).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(answer.metadata.resource_version.as_deref(), Some("8"));
            let cheap = answer
                .apply_to(&before)
                .unwrap_or_else(|| panic!("not applied"));
            assert_eq!(cheap.view, full.view);
            assert_eq!(cheap.created, full.created);
            assert_eq!(cheap.source.is_some(), full.source.is_some());
        }
    }

    /// The placement intent's answer applied to the cached version gives the entry a full trim of
    /// the answer gives (the mirror source aside: it keeps the version before's labels); a
    /// moved generation is left to the full trim.
    #[test]
    fn an_intent_answer_applied_to_the_cached_version_is_the_answers_own_entry() {
        let mut plain = origin("7", Value::Null);
        plain["metadata"]["labels"] = json!({"app": "x"});
        plain["metadata"]["annotations"] = json!({"courier.dev/cluster-selector": "a=b",
                                                  "courier.dev/huge": "x".repeat(2000)});
        plain["metadata"]["finalizers"] = json!([]);
        let before = trim(&plain)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("not trimmed"));
        assert!(before.view.intent().is_none());
        let mut after = plain.clone();
        after["metadata"]["resourceVersion"] = json!("8");
        after["metadata"]["finalizers"] = json!(["courier.dev/mirror-cleanup"]);
        after["metadata"]["labels"]["courier.dev/cluster"] = json!("w1");
        after["metadata"]["annotations"]["courier.dev/epoch"] = json!("2");
        after["metadata"]["annotations"]["courier.dev/redispatches"] = json!("1");
        let full = trim(&after)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("not trimmed"));
        let answer: SlimJob =
            serde_json::from_value(after.clone()).unwrap_or_else(|e| panic!("{e}"));
        let cheap = metadata_applied(&before, &answer).unwrap_or_else(|| panic!("not applied"));
        assert_eq!(cheap.view, full.view);
        assert_eq!(cheap.created, full.created);
        assert_eq!(cheap.source, before.source);
        assert_eq!(cheap.view.intent().map(|i| i.epoch), Some(2));

        // Metadata the write did not send (a mutating webhook on update): the mirror needs it,
        // so the answer is trimmed whole.
        let mut mutated = after.clone();
        mutated["metadata"]["labels"]["team"] = json!("added-by-a-webhook");
        let mutated: SlimJob = serde_json::from_value(mutated).unwrap_or_else(|e| panic!("{e}"));
        assert!(metadata_applied(&before, &mutated).is_none());
        let mut mutated = after.clone();
        mutated["metadata"]["annotations"]["note"] = json!("added-by-a-webhook");
        let mutated: SlimJob = serde_json::from_value(mutated).unwrap_or_else(|e| panic!("{e}"));
        assert!(metadata_applied(&before, &mutated).is_none());

        after["metadata"]["generation"] = json!(2);
        let moved: SlimJob = serde_json::from_value(after).unwrap_or_else(|e| panic!("{e}"));
        assert!(metadata_applied(&before, &moved).is_none());
    }

    #[test]
    fn an_answer_without_a_version_or_a_readable_status_is_not_applied() {
        let before = trim(&origin("7", Value::Null))
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("not trimmed"));
        let no_version: WriteAnswer =
            serde_json::from_value(json!({"status": {}})).unwrap_or_else(|e| panic!("{e}"));
        assert!(no_version.apply_to(&before).is_none());
        let bad: WriteAnswer = serde_json::from_value(json!({"metadata": {"resourceVersion": "8"},
                                          "status": {"active": "many"}}))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(bad.apply_to(&before).is_none());
    }
}
