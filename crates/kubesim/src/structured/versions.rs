//! Entries recorded through another served version of a resource, compared in that version.

use serde_json::Value;

use super::fieldset::FieldSet;
use super::{reset_set, typed};
use crate::schema::TypeRef;

/// Converts objects to another served version of the same resource, for managedFields entries recorded
/// through that version (an Event written as `v1` and as `events.k8s.io/v1`): the real server compares the
/// objects in each entry's own version.
pub trait VersionConverter {
    /// `obj` converted to `api_version` and that version's schema; `None` when not served (the entry is
    /// then left as it is).
    fn convert(&self, obj: &Value, api_version: &str) -> Option<(TypeRef, Value)>;
}

/// Per-version comparisons of one write, computed on demand for entries recorded in other versions.
pub(super) struct OtherVersions<'a> {
    pub(super) conv: Option<&'a dyn VersionConverter>,
    pub(super) live: &'a Value,
    pub(super) new: &'a Value,
    pub(super) subresource: Option<&'a str>,
    /// `(version, (changed, removed))`, `None` when the version cannot be compared.
    pub(super) cache: Vec<(String, Option<(FieldSet, FieldSet)>)>,
}

impl OtherVersions<'_> {
    pub(super) fn sets(&mut self, version: &str) -> Option<&(FieldSet, FieldSet)> {
        if !self.cache.iter().any(|(v, _)| v == version) {
            let computed = self.conv.and_then(|c| {
                let (t, live) = c.convert(self.live, version)?;
                let (_, new) = c.convert(self.new, version)?;
                let mut cmp = typed::compare(t.schema(), t.root(), &live, &new).ok()?;
                cmp.exclude(&reset_set(&t, self.subresource));
                Some((cmp.modified.union(&cmp.added), cmp.removed))
            });
            self.cache.push((version.to_string(), computed));
        }
        self.cache
            .iter()
            .find(|(v, _)| v == version)
            .and_then(|(_, s)| s.as_ref())
    }
}
