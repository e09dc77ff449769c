//! Compact forms of what the views keep per Job (see `docs/architecture.md`, "the caches"): a few
//! labels or annotations ([`SmallMap`]) and a few spec fields ([`SpecFields`]). A cache holds one
//! origin and one mirror per Job, so a `BTreeMap` (a 0.5 KB node for a single entry) or a
//! `serde_json::Map` per view is what the memory per Job was made of.
//!
//! Decisions read both through [`Labels`] and [`SpecSource`], which full objects (a `BTreeMap` of
//! labels, a spec as JSON) implement too.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use courier_api::{
    ANNOTATION_CLUSTER_SELECTOR, ANNOTATION_EPOCH, ANNOTATION_REDISPATCHES, ANNOTATION_SPEC_HASH,
    ANNOTATION_TEMPLATE_HASH, LABEL_CLUSTER, LABEL_EPOCH, LABEL_KUEUE_QUEUE_NAME, LABEL_ORIGIN,
    LABEL_ORIGIN_UID,
};

/// Keys a view keeps without allocating their text.
const KNOWN_KEYS: [&str; 10] = [
    LABEL_ORIGIN,
    LABEL_ORIGIN_UID,
    LABEL_EPOCH,
    ANNOTATION_EPOCH,
    LABEL_CLUSTER,
    ANNOTATION_REDISPATCHES,
    ANNOTATION_CLUSTER_SELECTOR,
    ANNOTATION_TEMPLATE_HASH,
    ANNOTATION_SPEC_HASH,
    LABEL_KUEUE_QUEUE_NAME,
];

fn intern(key: String) -> Cow<'static, str> {
    match KNOWN_KEYS.iter().find(|k| **k == key) {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(key),
    }
}

/// Read access to labels or annotations, whatever holds them.
pub trait Labels {
    /// The value of `key`, if present.
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// Labels or annotations as a short list sorted by key: one allocation for the list, none for the
/// keys Courier knows, one per value.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SmallMap(Box<[(Cow<'static, str>, String)]>);

impl SmallMap {
    fn position(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_ref().cmp(key))
    }

    pub fn get(&self, key: &str) -> Option<&String> {
        self.position(key).ok().map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sets `key` to `value` (rare: views are read, not edited).
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        match self.position(&key) {
            Ok(i) => self.0[i].1 = value.into(),
            Err(i) => {
                let mut list = std::mem::take(&mut self.0).into_vec();
                list.insert(i, (intern(key), value.into()));
                self.0 = list.into_boxed_slice();
            }
        }
    }

    /// The pairs in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &String)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }
}

impl Labels for SmallMap {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl FromIterator<(String, String)> for SmallMap {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        let mut list: Vec<(Cow<'static, str>, String)> =
            iter.into_iter().map(|(k, v)| (intern(k), v)).collect();
        list.sort_by(|a, b| a.0.cmp(&b.0));
        // The last value of a repeated key wins, as in a map.
        list.reverse();
        list.dedup_by(|later, earlier| later.0 == earlier.0);
        list.reverse();
        Self(list.into_boxed_slice())
    }
}

impl From<BTreeMap<String, String>> for SmallMap {
    fn from(map: BTreeMap<String, String>) -> Self {
        map.into_iter().collect()
    }
}

impl fmt::Debug for SmallMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for SmallMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Read access to a Job's spec fields, whatever holds them.
pub trait SpecSource {
    /// The field `key` of the spec, if present.
    fn field(&self, key: &str) -> Option<&Value>;
}

impl SpecSource for Value {
    fn field(&self, key: &str) -> Option<&Value> {
        self.get(key)
    }
}

/// The few spec fields a view keeps (a fixed list per view, given as `&'static` names), in the
/// order of that list; null fields are left out.
#[derive(Clone, Default, PartialEq)]
pub struct SpecFields(Box<[(&'static str, Value)]>);

impl SpecFields {
    /// The fields of `spec` named in `keys`.
    pub fn keep(spec: &Value, keys: &[&'static str]) -> Self {
        Self(
            keys.iter()
                .filter_map(|k| Some((*k, spec.get(*k).filter(|v| !v.is_null())?.clone())))
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Sets field `key` (views are read, not edited: tests and trimming use this).
    pub fn set(&mut self, key: &'static str, value: Value) {
        if let Some(slot) = self.0.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
            return;
        }
        let mut list = std::mem::take(&mut self.0).into_vec();
        list.push((key, value));
        self.0 = list.into_boxed_slice();
    }
}

impl SpecSource for SpecFields {
    fn field(&self, key: &str) -> Option<&Value> {
        self.get(key)
    }
}

impl fmt::Debug for SpecFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| (k, v)))
            .finish()
    }
}

impl Serialize for SpecFields {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_small_map_reads_like_the_map_it_replaces() {
        let pairs = [
            ("b", "2"),
            ("courier.dev/epoch", "1"),
            ("a", "0"),
            ("b", "3"),
        ];
        let small: SmallMap = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(small.len(), map.len());
        assert!(small.iter().eq(map.iter().map(|(k, v)| (k.as_str(), v))));
        for key in ["a", "b", "courier.dev/epoch", "c"] {
            assert_eq!(small.get(key), map.get(key), "{key}");
            assert_eq!(small.label(key), map.label(key), "{key}");
            assert_eq!(small.contains_key(key), map.contains_key(key), "{key}");
        }
        assert!(!small.is_empty() && SmallMap::default().is_empty());
        assert_eq!(
            serde_json::to_value(&small).ok(),
            serde_json::to_value(&map).ok()
        );
        let mut grown = small.clone();
        grown.insert("aa", "x");
        grown.insert("a", "y");
        assert_eq!(
            grown.keys().collect::<Vec<_>>(),
            ["a", "aa", "b", "courier.dev/epoch"]
        );
        assert_eq!(grown.get("a").map(String::as_str), Some("y"));
        assert!(
            matches!(small.0[2].0, Cow::Borrowed(_)),
            "a known key is not copied"
        );
    }

    #[test]
    fn spec_fields_keep_the_named_non_null_fields() {
        let spec = json!({"suspend": true, "parallelism": null, "template": {}, "completions": 2});
        let kept = SpecFields::keep(&spec, &["completions", "suspend", "parallelism"]);
        assert_eq!(
            serde_json::to_value(&kept).ok(),
            Some(json!({"completions": 2, "suspend": true}))
        );
        assert_eq!(kept.field("suspend"), spec.field("suspend"));
        assert_eq!(kept.get("template"), None);
        let mut set = kept.clone();
        set.set("suspend", json!(false));
        set.set("parallelism", json!(3));
        assert_eq!(set.get("suspend"), Some(&json!(false)));
        assert_eq!(
            serde_json::to_value(&set).ok(),
            Some(json!({"completions": 2, "suspend": false, "parallelism": 3}))
        );
    }
}
