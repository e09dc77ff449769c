//! [`SlimJob`]: a `batch/v1` Job as the origin and mirror watches (and the answers to origin writes)
//! decode it. Only the metadata fields Courier reads are decoded (no managedFields, no owner
//! references); the spec and the status stay the JSON text they arrived in, decoded only where a
//! projection reads them (the status straight into its cached form, [`SlimJob::status_as`]). A watch
//! event therefore costs one parse of the object and no re-serialisation.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A Job, decoded only as far as Courier reads it.
#[derive(Clone, Debug, Deserialize)]
pub struct SlimJob {
    #[serde(deserialize_with = "slim_meta", default)]
    pub metadata: ObjectMeta,
    /// The spec as the JSON text it arrived in.
    #[serde(default)]
    pub spec: Option<Box<RawValue>>,
    /// The status as the JSON text it arrived in.
    #[serde(default)]
    pub status: Option<Box<RawValue>>,
}

impl SlimJob {
    /// Only the fields of the spec named in `keys`, as a JSON object (`Null` when the spec is absent
    /// or unreadable): every other field (the pod template above all, unless named) is skipped
    /// without building anything.
    pub fn spec_fields(&self, keys: &[&'static str]) -> Value {
        let Some(text) = self.spec.as_deref().map(RawValue::get) else {
            return Value::Null;
        };
        let mut de = serde_json::Deserializer::from_str(text);
        match (Fields { keys }).deserialize(&mut de) {
            Ok(map) => map.map_or(Value::Null, Value::Object),
            Err(_) => Value::Null,
        }
    }

    /// The status decoded as `S` from its text (`S::default()` when absent or null).
    pub fn status_as<S: DeserializeOwned + Default>(&self) -> Result<S, serde_json::Error> {
        status_from_text(self.status.as_deref())
    }
}

/// A status kept as the text it arrived in, decoded as `S` (`S::default()` when absent or null,
/// as `OriginView::from_json` reads it).
pub fn status_from_text<S: DeserializeOwned + Default>(
    raw: Option<&RawValue>,
) -> Result<S, serde_json::Error> {
    match raw.map(RawValue::get) {
        None | Some("null") => Ok(S::default()),
        Some(text) => serde_json::from_str(text),
    }
}

/// Decodes a JSON object keeping only the members named in `keys` (`None` for `null`).
struct Fields<'k> {
    keys: &'k [&'static str],
}

impl<'de> DeserializeSeed<'de> for Fields<'_> {
    type Value = Option<Map<String, Value>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Fields<'_> {
    type Value = Option<Map<String, Value>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Job spec object")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = Map::new();
        while let Some(key) = map.next_key_seed(KeyOf { keys: self.keys })? {
            match key {
                Some(k) => {
                    kept.insert(k.to_string(), map.next_value::<Value>()?);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Some(kept))
    }
}

/// A member name: which of `keys` it is, if any (nothing allocated for the others).
struct KeyOf<'k> {
    keys: &'k [&'static str],
}

impl<'de> DeserializeSeed<'de> for KeyOf<'_> {
    type Value = Option<&'static str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyOf<'_> {
    type Value = Option<&'static str>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.keys.iter().copied().find(|k| *k == v))
    }
}

/// The metadata fields Courier reads; every other field (managedFields above all) is skipped
/// without being decoded.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

fn slim_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = Meta::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        generation: m.generation,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        finalizers: m.finalizers,
        labels: m.labels,
        annotations: m.annotations,
        ..ObjectMeta::default()
    })
}

/// `impl kube::Resource` as a namespaced `batch/v1` Job for a partial decoding of one (`$t` has a
/// `metadata: ObjectMeta` field): the typed `Api` calls then decode an answer only as far as `$t`.
macro_rules! batch_v1_job_resource {
    ($t:ty) => {
        impl kube::Resource for $t {
            type DynamicType = ();
            type Scope = kube::core::NamespaceResourceScope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                "Job".into()
            }

            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                "batch".into()
            }

            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                "v1".into()
            }

            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                "jobs".into()
            }

            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }

            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use batch_v1_job_resource;

batch_v1_job_resource!(SlimJob);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_what_courier_reads_and_skips_the_rest() {
        let text = r#"{"apiVersion":"batch/v1","kind":"Job",
            "metadata":{"name":"a","namespace":"ns","uid":"u","resourceVersion":"7","generation":2,
              "labels":{"l":"1"},"annotations":null,"finalizers":["f"],
              "creationTimestamp":"2026-01-01T00:00:00Z",
              "managedFields":[{"manager":"kubectl","fieldsV1":{"f:spec":{}}}],
              "ownerReferences":[{"apiVersion":"v1","kind":"X","name":"x","uid":"y"}]},
            "spec":{"parallelism":2,"template":{"spec":{"containers":[]}}},
            "status":{"active":1}}"#;
        let job: SlimJob = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        let m = &job.metadata;
        assert_eq!(m.name.as_deref(), Some("a"));
        assert_eq!(m.resource_version.as_deref(), Some("7"));
        assert_eq!(m.generation, Some(2));
        assert_eq!(m.labels.as_ref().map(BTreeMap::len), Some(1));
        assert_eq!(m.annotations, None);
        assert!(m.managed_fields.is_none() && m.owner_references.is_none());
        assert_eq!(
            job.spec.as_deref().map(RawValue::get),
            Some(r#"{"parallelism":2,"template":{"spec":{"containers":[]}}}"#),
            "the spec is kept as the text it arrived in"
        );
        assert_eq!(
            job.spec_fields(&["suspend", "parallelism", "template"]),
            serde_json::json!({"parallelism": 2, "template": {"spec": {"containers": []}}}),
        );
        assert_eq!(
            job.spec_fields(&["suspend", "parallelism"]),
            serde_json::json!({"parallelism": 2}),
            "only the fields asked for"
        );
        let escaped: SlimJob =
            serde_json::from_str(r#"{"spec":{"p\u0061rallelism":3,"x":[1,{"y":null}]}}"#)
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            escaped.spec_fields(&["parallelism"]),
            serde_json::json!({"parallelism": 3})
        );
        let status: k8s_openapi::api::batch::v1::JobStatus =
            job.status_as().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(status.active, Some(1));
        let none: SlimJob = serde_json::from_str(r#"{"metadata":{"name":"a"},"status":null}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(none.spec_fields(&["parallelism"]), Value::Null);
        assert_eq!(
            none.status_as::<k8s_openapi::api::batch::v1::JobStatus>()
                .ok(),
            Some(Default::default())
        );
    }
}
