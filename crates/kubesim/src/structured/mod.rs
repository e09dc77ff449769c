//! Field ownership (`metadata.managedFields`), server-side apply and strategic merge patch, computed the way
//! the real API server computes them (structured-merge-diff and k8s.io/apimachinery's field manager and
//! strategicpatch), as pure functions over `serde_json::Value`.
//!
//! Where these run in the request flow (mirroring the apiserver handlers):
//!
//! - create: decode -> prune unknown fields -> default -> [`normalize`](crate::schema::normalize) ->
//!   **[`update_managed_fields`]** (`live = None`) -> PrepareForCreate (generated selector/labels, uid,
//!   creationTimestamp...) -> validate -> store. Fields set by PrepareForCreate are therefore not owned.
//! - update (PUT) and JSON/merge/strategic patches: build the new object ([`strategic_merge`] for SMP),
//!   decode/prune/default/normalize it -> **[`update_managed_fields`]** (`live = Some(stored)`) ->
//!   PrepareForUpdate -> validate -> store. `/status` writes pass `subresource: Some("status")`.
//! - apply (`application/apply-patch+yaml`): [`parse_apply_body`] -> **[`apply`]** (it merges, prunes
//!   fields the applier stopped applying, detects conflicts and records ownership) -> default/normalize the
//!   returned object -> [`check_patched_name`] -> PrepareForCreate/Update -> validate -> store. When
//!   [`Applied::changed`] is false and the managedFields did not change either, nothing is written.

mod apply;
mod compare;
mod fieldset;
mod managed;
mod smp;
mod typed;
mod value;
mod versions;

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

pub use apply::{Applied, ApplyError, Conflict, apply, apply_with, parse_apply_body};
pub use fieldset::FieldSet;
pub use managed::{Entry, Operation, Stamp};
pub use smp::{PatchError, strategic_merge};
pub use typed::{Comparison, TypedError};

use crate::errors::{ApiError, FieldError, go_quote};
use crate::schema::TypeRef;
use managed::{cap_update_managers, decode, decode_owned, encode, is_reset};
use value::{field_key, path_string};
use versions::OtherVersions;
pub use versions::VersionConverter;

/// Who is writing, as the field manager sees it.
#[derive(Debug, Clone, Copy)]
pub struct Manager<'a> {
    /// The `fieldManager` query parameter, else [`manager_name`] of the User-Agent; empty becomes
    /// `unknown`.
    pub name: &'a str,
    /// The request's group/version (`batch/v1`): managedFields entries are recorded in it.
    pub api_version: &'a str,
    /// `Some("status")` for writes through `/status`.
    pub subresource: Option<&'a str>,
    /// The current time, RFC 3339 UTC at second precision (`2025-06-01T10:00:00Z`).
    pub now: &'a str,
}

impl Manager<'_> {
    fn name(&self) -> &str {
        if self.name.is_empty() {
            "unknown"
        } else {
            self.name
        }
    }
    fn subresource(&self) -> &str {
        self.subresource.unwrap_or("")
    }
}

/// The longest field manager name (`validation.FieldManagerMaxLength`).
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// `managerOrUserAgent`: the `fieldManager` parameter if set, else the User-Agent up to its first `/`
/// (non-printable characters dropped, cut at 128 bytes): `apifixtures/v1` -> `apifixtures`.
pub fn manager_name(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    let ua = user_agent.unwrap_or("");
    let prefix = ua.split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in prefix.chars() {
        if c.is_control() {
            continue;
        }
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// `ValidatePatchOptions` (the part about field managers): apply needs a `fieldManager`, `force` is only for
/// apply, the name is at most 128 printable characters. The 422 is about `PatchOptions.meta.k8s.io ""`.
pub fn validate_patch_options(
    is_apply: bool,
    field_manager: Option<&str>,
    force_given: bool,
) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    let fm = field_manager.unwrap_or("");
    if !is_apply {
        if force_given {
            errs.push(FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            ));
        }
    } else if fm.is_empty() {
        errs.push(FieldError::required(
            "fieldManager",
            "is required for apply patch",
        ));
    }
    errs.extend(validate_field_manager(fm));
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("meta.k8s.io", "PatchOptions", "", &errs))
    }
}

/// `ValidateFieldManager` (also applied to create and update options).
pub fn validate_field_manager(fm: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if fm.len() > FIELD_MANAGER_MAX_LENGTH {
        errs.push(FieldError::too_long(
            "fieldManager",
            FIELD_MANAGER_MAX_LENGTH,
        ));
    }
    for (i, c) in fm.char_indices() {
        if c.is_control() {
            errs.push(FieldError::invalid(
                "fieldManager",
                crate::errors::BadValue::Str(fm.to_string()),
                format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    errs
}

/// Fields no manager ever owns (`stripMetaManager`): type meta and server-set metadata.
static STRIP: LazyLock<FieldSet> = LazyLock::new(|| {
    let mut s = FieldSet::new();
    s.insert(&[field_key("apiVersion")]);
    s.insert(&[field_key("kind")]);
    s.insert(&[field_key("metadata")]);
    for f in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&[field_key("metadata"), field_key(f)]);
    }
    s
});

/// The fields a write through `subresource` ignores (`GetResetFields`), as a set.
fn reset_set(t: &TypeRef, subresource: Option<&str>) -> FieldSet {
    let mut s = FieldSet::new();
    for f in t.reset_fields(subresource) {
        s.insert(&[field_key(f)]);
    }
    s
}

fn managed_fields_of(obj: &Value) -> Option<&Value> {
    obj.get("metadata").and_then(|m| m.get("managedFields"))
}

fn take_managed_fields(obj: &mut Value) -> Option<Value> {
    obj.get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|m| m.remove("managedFields"))
}

fn set_managed_fields(obj: &mut Value, mf: Option<Value>) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    match mf {
        Some(mf) => {
            let meta = root
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(m) = meta.as_object_mut() {
                m.insert("managedFields".into(), mf);
            }
        }
        None => {
            if let Some(m) = root.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
        }
    }
}

fn has_uid(obj: &Value) -> bool {
    obj.get("metadata")
        .and_then(|m| m.get("uid"))
        .and_then(Value::as_str)
        .is_some_and(|u| !u.is_empty())
}

/// Records an update (create, PUT, JSON/merge/strategic patch, on the main resource or `/status`) in
/// `new`'s `metadata.managedFields`.
///
/// `live` is the stored object (`None` for a create: the Go zero value of the type is used). `new` is the
/// object about to be stored, decoded, defaulted and normalised but before PrepareForCreate/Update; its own
/// `managedFields` (a client may send them) are taken into account like the real server does: a non-empty
/// valid list replaces the stored one (main resource only), `[]` or `[{}]` resets ownership tracking.
///
/// Never fails: like the server's `UpdateNoErrors`, an object that cannot be compared against the schema
/// loses its managedFields.
pub fn update_managed_fields(
    t: &TypeRef,
    live: Option<&Value>,
    new: &mut Value,
    mgr: &Manager<'_>,
) {
    update_managed_fields_with(t, live, new, mgr, None);
}

/// [`update_managed_fields`] for resources served in several versions: entries recorded through another
/// version are compared in that version through `conv`.
pub fn update_managed_fields_with(
    t: &TypeRef,
    live: Option<&Value>,
    new: &mut Value,
    mgr: &Manager<'_>,
    conv: Option<&dyn VersionConverter>,
) {
    track(t, live, new, mgr, conv, true);
}

/// [`update_managed_fields`] with a comparison that walks all of both objects, and both objects'
/// comparisons, full and of the changes only: what the skipping is proven against.
#[cfg(test)]
pub(crate) fn full_walk(
    t: &TypeRef,
    live: &Value,
    new: &mut Value,
    mgr: &Manager<'_>,
) -> (Option<Comparison>, Option<Comparison>) {
    track(t, Some(live), new, mgr, None, false);
    let (s, r) = (t.schema(), t.root());
    (
        typed::compare(s, r, live, new).ok(),
        typed::compare_changes(s, r, live, new).ok(),
    )
}

/// [`update_managed_fields_with`]; `skip_equal`: whether the comparison may pass over what is equal in
/// `live` and `new` (`false` only to prove that it changes nothing).
fn track(
    t: &TypeRef,
    live: Option<&Value>,
    new: &mut Value,
    mgr: &Manager<'_>,
    conv: Option<&dyn VersionConverter>,
    skip_equal: bool,
) {
    let live_obj = live.unwrap_or_else(|| t.zero_value());
    let live_mf = managed_fields_of(live_obj);
    // A stored object with managedFields was stored by a write whose comparison walked all of it
    // without an error (an error drops the list; an apply with one fails), so its equal parts need
    // no walk. A built-in schema does not change after that; a CRD's may, hence not for those. (The
    // one built-in stored in two versions, Event, has no keyed list, and its conversions write only
    // declared fields.)
    let skip_equal = skip_equal
        && !t.is_custom()
        && live_mf
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
    let new_mf = take_managed_fields(new);
    // Patches and most PUTs carry the stored list unchanged: decode that owned copy instead of copying
    // the stored one.
    let same_as_live = new_mf.is_some() && new_mf.as_ref() == live_mf;
    let stored = |new_mf: Option<Value>| {
        if same_as_live {
            decode_owned(new_mf, false)
        } else {
            decode(live_mf, false)
        }
        .unwrap_or_default()
    };
    // decodeLiveOrNew: a subresource never takes managedFields from the request.
    let entries = if mgr.subresource.is_some() {
        stored(new_mf)
    } else if is_reset(new_mf.as_ref()) {
        Vec::new()
    } else if same_as_live {
        stored(new_mf)
    } else {
        match decode(new_mf.as_ref(), true) {
            Ok(e) if !e.is_empty() => e,
            _ => decode(live_mf, false).unwrap_or_default(),
        }
    };
    // skipNonAppliedManager: an existing object whose tracking was reset is not tracked until applied.
    if entries.is_empty() && has_uid(live_obj) {
        return;
    }
    match update_entries(t, live_obj, new, entries, mgr, conv, skip_equal) {
        Ok(entries) => set_managed_fields(new, encode(entries)),
        Err(e) => {
            tracing::warn!("managedFields dropped: {}", typed::errors_text(&e));
        }
    }
}

/// The field manager's update path on decoded entries (`managedFieldsUpdater` + structured-merge-diff
/// `Updater.Update` + `stripMetaManager` + `capManagersManager`).
fn update_entries(
    t: &TypeRef,
    live: &Value,
    new: &Value,
    mut entries: Vec<Entry>,
    mgr: &Manager<'_>,
    conv: Option<&dyn VersionConverter>,
    skip_equal: bool,
) -> Result<Vec<Entry>, Vec<TypedError>> {
    let mut cmp = if skip_equal {
        typed::compare_changes(t.schema(), t.root(), live, new)?
    } else {
        typed::compare(t.schema(), t.root(), live, new)?
    };
    cmp.exclude(&reset_set(t, mgr.subresource));
    // The operation runs as a separate "current-operation" manager: every existing entry (including the
    // writer's own previous one) loses the fields this write changed or removed...
    // (`add_all` copies what it adds: when nothing was modified, as in a create, the added set is
    // taken as it is.)
    let changed = if cmp.modified.is_empty() {
        std::mem::take(&mut cmp.added)
    } else {
        let mut m = std::mem::take(&mut cmp.modified);
        m.add_all(&cmp.added);
        m
    };
    let mut others = OtherVersions {
        conv,
        live,
        new,
        subresource: mgr.subresource,
        cache: Vec::new(),
    };
    release(
        &mut entries,
        &changed,
        &cmp.removed,
        mgr.api_version,
        &mut others,
    );
    // ...and the writer's entry then gets what it changed (`changed` is not needed after this, so it
    // is trimmed in place rather than copied).
    let mut current = changed;
    current.remove_all(&STRIP);
    if !current.is_empty() {
        let (name, sub) = (mgr.name(), mgr.subresource());
        match entries
            .iter_mut()
            .find(|e| e.is(name, Operation::Update, mgr.api_version, sub))
        {
            Some(e) => {
                e.set.add_all(&current);
                e.api_version = mgr.api_version.to_string();
                e.time = Some(mgr.now.to_string());
            }
            None => entries.push(Entry {
                manager: name.to_string(),
                operation: Operation::Update,
                api_version: mgr.api_version.to_string(),
                subresource: sub.to_string(),
                time: Some(mgr.now.to_string()),
                set: current,
            }),
        }
    }
    cap_update_managers(&mut entries);
    Ok(entries)
}

/// Removes `changed` (taken by the writer) and `removed` fields from every entry, dropping entries left
/// empty. Entries recorded at another version use that version's comparison (left as they are when it
/// cannot be made).
fn release(
    entries: &mut Vec<Entry>,
    changed: &FieldSet,
    removed: &FieldSet,
    api_version: &str,
    others: &mut OtherVersions<'_>,
) {
    for e in entries.iter_mut() {
        let (changed, removed) = if e.api_version == api_version {
            (changed, removed)
        } else {
            match others.sets(&e.api_version) {
                Some((c, r)) => (c, r),
                None => continue,
            }
        };
        let hit_changed = e.set.intersects(changed);
        let hit_removed = e.set.intersects(removed);
        if hit_changed {
            e.set.remove_all(changed);
        }
        if hit_removed {
            e.set.remove_all(removed);
        }
    }
    entries.retain(|e| !e.set.is_empty());
}

/// `checkName` after a patch: the patched object's name must be the URL's, and its namespace (when set)
/// the URL's.
pub fn check_patched_name(
    obj: &Value,
    name: &str,
    namespace: Option<&str>,
) -> Result<(), ApiError> {
    let meta = obj.get("metadata");
    let get = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let obj_name = get("name");
    if obj_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({obj_name}) does not match the name on the URL ({name})"
        )));
    }
    if let Some(ns) = namespace.filter(|n| !n.is_empty()) {
        let obj_ns = get("namespace");
        if !obj_ns.is_empty() && obj_ns != ns {
            return Err(ApiError::bad_request(format!(
                "the namespace of the object ({obj_ns}) does not match the namespace on the URL ({ns})"
            )));
        }
    }
    Ok(())
}

/// The warning/strict text for an unknown field (`unknown field "spec.x"`), for callers that only have a
/// path.
pub fn unknown_field_message(path: &str) -> String {
    format!("unknown field {}", go_quote(path))
}

#[cfg(test)]
mod tests;
