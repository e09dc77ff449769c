//! Reading origins and mirrors (as JSON) into the views `decide` works on; the spec facts and the
//! status are the [`Workload`]'s.

use std::borrow::Cow;
use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Deserialize;
use serde_json::Value;

use courier_api::{
    ANNOTATION_CLUSTER_SELECTOR, ANNOTATION_EPOCH, ANNOTATION_REDISPATCHES, FINALIZER,
    LABEL_CLUSTER, LABEL_KUEUE_QUEUE_NAME, MANAGED_BY,
};

use super::{MirrorOf, OriginOf, ViewError};
use crate::compact::{SmallMap, SpecFields};
use crate::ownership::{Intent, parse_epoch};
use crate::workload::Workload;

/// The origin labels decisions read; every other label is dropped from an [`OriginOf`].
pub const ORIGIN_LABEL_KEYS: [&str; 2] = [LABEL_CLUSTER, LABEL_KUEUE_QUEUE_NAME];
/// The origin annotations decisions read; every other annotation is dropped from an [`OriginOf`].
pub const ORIGIN_ANNOTATION_KEYS: [&str; 3] = [
    ANNOTATION_EPOCH,
    ANNOTATION_REDISPATCHES,
    ANNOTATION_CLUSTER_SELECTOR,
];
/// The longest label or annotation value an [`OriginOf`] keeps (bytes). Courier's own values are
/// a cluster name and two decimals, and a cluster selector needs far less; a longer value is
/// treated as absent (its key is listed in [`OriginOf::oversized`]), so a Job carrying a huge
/// `courier.dev/*` annotation costs no more memory than any other.
pub const MAX_ORIGIN_VALUE: usize = 1024;

/// Keeps the `keys` of `map` whose value is at most [`MAX_ORIGIN_VALUE`] bytes (only those are
/// copied); the keys of longer values are added to `oversized`.
fn keep(
    map: Option<&BTreeMap<String, String>>,
    keys: &[&str],
    oversized: &mut Vec<String>,
) -> SmallMap {
    map.into_iter()
        .flatten()
        .filter(|(k, _)| keys.contains(&k.as_str()))
        .filter_map(|(k, v)| {
            if v.len() > MAX_ORIGIN_VALUE {
                oversized.push(k.clone());
                None
            } else {
                Some((k.clone(), v.clone()))
            }
        })
        .collect()
}

/// An origin's metadata as [`OriginOf::from_parts`] reads it, borrowed from wherever it was
/// decoded: a JSON tree ([`OriginOf::from_json`]) or a watch's typed decode.
#[derive(Debug, Clone, Copy, Default)]
pub struct OriginMeta<'a> {
    pub name: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub uid: Option<&'a str>,
    pub resource_version: Option<&'a str>,
    pub generation: Option<i64>,
    pub deletion_timestamp: Option<Timestamp>,
    pub finalizers: &'a [String],
    /// Every label (only [`ORIGIN_LABEL_KEYS`] are read).
    pub labels: Option<&'a BTreeMap<String, String>>,
    /// Every annotation (only [`ORIGIN_ANNOTATION_KEYS`] are read).
    pub annotations: Option<&'a BTreeMap<String, String>>,
}

impl<W: Workload> OriginOf<W> {
    /// Reads an origin (as JSON: a typed object or `DynamicObject` serialized) into a view,
    /// keeping only the labels and annotations decisions read ([`ORIGIN_LABEL_KEYS`],
    /// [`ORIGIN_ANNOTATION_KEYS`], each at most [`MAX_ORIGIN_VALUE`] bytes): its parts read out
    /// of the tree, then [`Self::from_parts`].
    pub fn from_json(job: &Value) -> Result<Self, ViewError> {
        let meta = Meta::read(job)?;
        let parts = OriginMeta {
            name: Some(&meta.name),
            namespace: Some(&meta.namespace),
            uid: meta.uid.as_deref(),
            resource_version: job
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str),
            generation: job.pointer("/metadata/generation").and_then(Value::as_i64),
            deletion_timestamp: meta.deletion_timestamp,
            finalizers: &meta.finalizers,
            labels: Some(&meta.labels),
            annotations: Some(&meta.annotations),
        };
        let spec = job.get("spec").unwrap_or(&Value::Null);
        Self::from_parts(parts, spec, || read_status::<W>(job))
    }

    /// The one place an origin view is built (from [`Self::from_json`] and from a watch's typed
    /// decode alike). `spec` needs only the fields [`Workload::read_spec`] and
    /// [`Workload::SPEC_FIELDS`] read, `spec.managedBy` and what [`Workload::template_hash`]
    /// hashes (for a Job: the template and `manualSelector`); `Null` when absent. `status` is
    /// decoded only once the metadata proved readable (a missing uid is reported first).
    pub fn from_parts(
        meta: OriginMeta<'_>,
        spec: &Value,
        status: impl FnOnce() -> Result<W::Status, ViewError>,
    ) -> Result<Self, ViewError> {
        let name = meta.name.ok_or(ViewError::MissingField {
            field: "metadata.name",
        })?;
        let uid = meta
            .uid
            .filter(|u| !u.is_empty())
            .ok_or(ViewError::MissingField {
                field: "metadata.uid",
            })?;
        let mut oversized = Vec::new();
        let labels = keep(meta.labels, &ORIGIN_LABEL_KEYS, &mut oversized);
        let annotations = keep(meta.annotations, &ORIGIN_ANNOTATION_KEYS, &mut oversized);
        Ok(Self {
            uid: uid.to_string(),
            namespace: meta.namespace.unwrap_or_default().to_string(),
            name: name.to_string(),
            managed_by: spec
                .get("managedBy")
                .and_then(Value::as_str)
                .map(|m| match m {
                    MANAGED_BY => Cow::Borrowed(MANAGED_BY),
                    other => Cow::Owned(other.to_string()),
                }),
            deletion_timestamp: meta.deletion_timestamp,
            finalizers: meta.finalizers.to_vec(),
            labels,
            annotations,
            oversized,
            spec: W::read_spec(spec),
            spec_fields: SpecFields::keep(spec, W::SPEC_FIELDS),
            status: status()?,
            generation: meta.generation,
            resource_version: meta.resource_version.map(str::to_string),
            template_hash: W::template_hash(spec),
        })
    }

    /// This view as of a later version of the same object whose spec and status did not change
    /// (the answer to a metadata write): its labels, annotations and finalizers, its deletion mark
    /// and `resource_version`, kept as [`Self::from_json`] keeps them.
    pub fn with_metadata(
        &self,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
        finalizers: Vec<String>,
        deletion_timestamp: Option<Timestamp>,
        resource_version: Option<String>,
    ) -> Self {
        let mut oversized = Vec::new();
        Self {
            labels: keep(Some(&labels), &ORIGIN_LABEL_KEYS, &mut oversized),
            annotations: keep(Some(&annotations), &ORIGIN_ANNOTATION_KEYS, &mut oversized),
            oversized,
            finalizers,
            deletion_timestamp,
            resource_version,
            ..self.clone()
        }
    }

    /// This view as of a later version of the same object that differs in its status only (the
    /// answer to a status write): the old status is not copied.
    pub fn with_status(&self, status: W::Status, resource_version: Option<String>) -> Self {
        Self {
            uid: self.uid.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            managed_by: self.managed_by.clone(),
            deletion_timestamp: self.deletion_timestamp,
            finalizers: self.finalizers.clone(),
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
            oversized: self.oversized.clone(),
            spec: self.spec.clone(),
            spec_fields: self.spec_fields.clone(),
            status,
            generation: self.generation,
            resource_version,
            template_hash: self.template_hash.clone(),
        }
    }

    /// Whether Courier owns this origin (`spec.managedBy`).
    pub fn is_ours(&self) -> bool {
        self.managed_by.as_deref() == Some(MANAGED_BY)
    }

    /// The placement intent recorded in the metadata (cluster label and epoch annotation), if both
    /// are present and well-formed.
    pub fn intent(&self) -> Option<Intent> {
        let cluster = self.labels.get(LABEL_CLUSTER).filter(|c| !c.is_empty())?;
        let epoch = parse_epoch(self.annotations.get(ANNOTATION_EPOCH)?)?;
        Some(Intent {
            cluster: cluster.clone(),
            epoch,
        })
    }

    /// Re-dispatches so far (annotation; absent or malformed = 0).
    pub fn redispatches(&self) -> u32 {
        self.annotations
            .get(ANNOTATION_REDISPATCHES)
            .and_then(|r| r.parse().ok())
            .unwrap_or(0)
    }

    /// The user's cluster selector, if set.
    pub fn cluster_selector(&self) -> Option<&str> {
        self.annotations
            .get(ANNOTATION_CLUSTER_SELECTOR)
            .map(String::as_str)
    }

    pub fn has_finalizer(&self) -> bool {
        self.finalizers.iter().any(|f| f == FINALIZER)
    }
}

impl<W: Workload> MirrorOf<W> {
    /// Reads a remote object (as JSON) into a view.
    pub fn from_json(job: &Value) -> Result<Self, ViewError> {
        let meta = Meta::read(job)?;
        let status = read_status::<W>(job)?;
        Ok(Self {
            namespace: meta.namespace,
            name: meta.name,
            uid: meta.uid.ok_or(ViewError::MissingField {
                field: "metadata.uid",
            })?,
            labels: meta.labels.into(),
            annotations: meta
                .annotations
                .into_iter()
                .filter(|(k, _)| k.starts_with("courier.dev/"))
                .collect(),
            spec: SpecFields::keep(job.get("spec").unwrap_or(&Value::Null), W::SPEC_FIELDS),
            counting: W::uncounted(&status),
            status,
            deleting: meta.deletion_timestamp.is_some(),
        })
    }
}

struct Meta {
    name: String,
    namespace: String,
    uid: Option<String>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    finalizers: Vec<String>,
    deletion_timestamp: Option<Timestamp>,
}

impl Meta {
    fn read(job: &Value) -> Result<Self, ViewError> {
        let obj = job.as_object().ok_or(ViewError::NotAnObject)?;
        let meta = obj
            .get("metadata")
            .and_then(Value::as_object)
            .ok_or(ViewError::MissingField { field: "metadata" })?;
        let text = |key: &str| meta.get(key).and_then(Value::as_str).map(str::to_string);
        let map = |key: &str| -> BTreeMap<String, String> {
            meta.get(key)
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default()
        };
        let deletion_timestamp = match meta.get("deletionTimestamp") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_str()
                    .and_then(|s| s.parse::<Timestamp>().ok())
                    .ok_or_else(|| ViewError::Malformed {
                        field: "metadata.deletionTimestamp",
                        reason: v.to_string(),
                    })?,
            ),
        };
        Ok(Self {
            name: text("name").ok_or(ViewError::MissingField {
                field: "metadata.name",
            })?,
            namespace: text("namespace").unwrap_or_default(),
            uid: text("uid").filter(|u| !u.is_empty()),
            labels: map("labels"),
            annotations: map("annotations"),
            finalizers: meta
                .get("finalizers")
                .and_then(Value::as_array)
                .map(|f| {
                    let mut list: Vec<String> = f
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect();
                    list.shrink_to_fit();
                    list
                })
                .unwrap_or_default(),
            deletion_timestamp,
        })
    }
}

fn read_status<W: Workload>(job: &Value) -> Result<W::Status, ViewError> {
    match job.get("status") {
        None | Some(Value::Null) => Ok(W::Status::default()),
        Some(s) => W::Status::deserialize(s).map_err(|e| ViewError::Malformed {
            field: "status",
            reason: e.to_string(),
        }),
    }
}
