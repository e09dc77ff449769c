//! The generic request flow: what the real API server's generic registry does for every resource
//! (create, read, list, update, patch, delete, watch), calling each kind's `Strategy` hooks in the same
//! order. Both the HTTP layer and kubesim's in-process controllers go through here, so a controller's
//! write is validated exactly like a client's.

pub mod decode;
mod delete;
mod list;
pub mod patch;
mod patching;
pub mod registry;
pub mod watch;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::errors::{ApiError, go_quote};
use crate::json::{ensure_obj, finalizers, get_str, is_deleting};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{Precondition, Store, StoreError, Stored};

pub use registry::{Registry, Served};

/// `fieldValidation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

/// Options common to writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    /// The field manager (`fieldManager`, else derived from the User-Agent).
    pub manager: String,
    /// Whether `fieldManager` was given explicitly (server-side apply requires it).
    pub explicit_manager: bool,
    /// Server-side apply `force`.
    pub force: bool,
    /// Whether a `force` parameter was present at all (it is only allowed with apply).
    pub force_given: bool,
    /// The authenticated user (HTTP requests) or the in-process component's identity.
    pub user: Option<String>,
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Main,
    Status,
}

/// An object in a response: either as stored (serialised once at write time) or built for this answer.
#[derive(Debug, Clone)]
pub enum ObjOut {
    Stored(Arc<Stored>),
    Value(Value),
}

/// The answer to a write.
#[derive(Debug, Clone)]
pub struct Written {
    pub code: u16,
    pub obj: ObjOut,
    pub warnings: Vec<String>,
}

/// `DeleteOptions` as far as kubesim honours them.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    pub propagation: Option<String>,
    pub orphan_dependents: Option<bool>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
    /// `gracePeriodSeconds` (honoured by kinds with graceful deletion: Pods).
    pub grace_period: Option<i64>,
}

/// Options of a list (and of a watch's filter).
#[derive(Debug, Clone, Default)]
pub struct ListOpts {
    pub label: LabelSelector,
    pub field: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

/// One page of a list.
pub struct ListPage {
    pub rv: u64,
    pub items: Vec<Arc<Stored>>,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

/// The API: store + served resources.
pub struct Api {
    pub store: Arc<Store>,
    pub registry: Registry,
    /// Pod starts and the create log (see `crate::instrument`).
    pub instruments: crate::instrument::Instruments,
}

const GENERATE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    match ensure_obj(obj, "metadata") {
        Some(m) => m,
        None => unreachable!("made an object above"),
    }
}

/// Parses a resourceVersion the way the API server does (`strconv.ParseUint`).
pub fn parse_rv(s: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .map_err(|_| format!("strconv.ParseUint: parsing {}: invalid syntax", go_quote(s)))
}

/// Equal ignoring the server-maintained bookkeeping that a no-op write would only touch
/// (`metadata.resourceVersion` and `metadata.managedFields`); compared in place, without copies.
fn same_content(a: &Value, b: &Value) -> bool {
    const BOOKKEEPING: [&str; 2] = ["resourceVersion", "managedFields"];
    /// Equal maps, leaving out the keys `skip` says to.
    fn maps_equal(
        a: &Map<String, Value>,
        b: &Map<String, Value>,
        skip: impl Fn(&str) -> bool,
        eq: impl Fn(&str, &Value, &Value) -> bool,
    ) -> bool {
        let kept = |m: &Map<String, Value>| m.keys().filter(|k| !skip(k)).count();
        kept(a) == kept(b)
            && a.iter()
                .filter(|(k, _)| !skip(k))
                .all(|(k, va)| b.get(k).is_some_and(|vb| eq(k, va, vb)))
    }
    let meta_equal = |x: &Value, y: &Value| match (x, y) {
        (Value::Object(x), Value::Object(y)) => {
            maps_equal(x, y, |k| BOOKKEEPING.contains(&k), |_, va, vb| va == vb)
        }
        _ => x == y,
    };
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => maps_equal(
            a,
            b,
            |_| false,
            |k, va, vb| {
                if k == "metadata" {
                    meta_equal(va, vb)
                } else {
                    va == vb
                }
            },
        ),
        _ => a == b,
    }
}

impl Api {
    pub fn new(store: Arc<Store>, registry: Registry) -> Self {
        Self {
            store,
            registry,
            instruments: Default::default(),
        }
    }

    /// The served form of a stored object, with `kind`/`apiVersion`.
    pub fn served_value(&self, s: &Served, stored: &Stored) -> Value {
        let mut v = if s.strategy.converts() {
            s.strategy.from_storage(&stored.value())
        } else {
            stored.value()
        };
        if let Value::Object(m) = &mut v {
            m.insert("kind".into(), json!(s.info().kind));
            m.insert("apiVersion".into(), json!(s.info().api_version()));
        }
        v
    }

    /// Serialises an object for a response.
    pub fn render(&self, s: &Served, o: &ObjOut) -> Bytes {
        match o {
            ObjOut::Value(v) => Bytes::from(serde_json::to_vec(v).unwrap_or_default()),
            ObjOut::Stored(st) => self.render_stored(s, st),
        }
    }

    /// Serialises a stored object in the served version, with `kind`/`apiVersion`.
    pub fn render_stored(&self, s: &Served, st: &Stored) -> Bytes {
        let mut out = bytes::BytesMut::new();
        self.render_stored_into(s, st, &mut out);
        out.freeze()
    }

    /// Appends what [`Self::render_stored`] returns to `out` (a watch writes it straight into its
    /// chunk).
    pub fn render_stored_into(&self, s: &Served, st: &Stored, out: &mut bytes::BytesMut) {
        if s.strategy.converts() {
            let start = out.len();
            if serde_json::to_writer(bytes::BufMut::writer(&mut *out), &self.served_value(s, st))
                .is_err()
            {
                // As `to_vec(..).unwrap_or_default()` did: nothing rather than half an object.
                out.truncate(start);
            }
        } else {
            s.put_typed(&st.json, out);
        }
    }

    /// A list item: stored form, converted if the served version differs (no kind/apiVersion).
    pub fn render_item(&self, s: &Served, st: &Stored) -> Bytes {
        if s.strategy.converts() {
            let mut v = s.strategy.from_storage(&st.value());
            if let Value::Object(m) = &mut v {
                m.remove("kind");
                m.remove("apiVersion");
            }
            Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
        } else {
            st.json.clone()
        }
    }

    pub fn get(&self, s: &Served, ns: &str, name: &str) -> Result<Arc<Stored>, ApiError> {
        self.store
            .get(&s.table, ns, name)
            .ok_or_else(|| s.not_found(name))
    }

    // ------------------------------------------------------------------------------------ create

    /// Creates `obj` (already decoded) in `ns` (empty for cluster-scoped resources).
    pub fn create(
        &self,
        s: &Served,
        ns: &str,
        obj: Value,
        o: &WriteOpts,
    ) -> Result<Written, ApiError> {
        self.create_inner(s, ns, obj, o, false)
    }

    fn create_inner(
        &self,
        s: &Served,
        ns: &str,
        mut obj: Value,
        o: &WriteOpts,
        managed_fields_done: bool,
    ) -> Result<Written, ApiError> {
        let info = s.info();
        if info.namespaced {
            match get_str(&obj, &["metadata", "namespace"]) {
                Some(b) if !b.is_empty() && b != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    meta_mut(&mut obj).insert("namespace".into(), json!(ns));
                }
            }
        } else {
            meta_mut(&mut obj).remove("namespace");
        }
        if !managed_fields_done {
            s.track_managed_fields(None, &mut obj, o, Part::Main);
        }
        if info.namespaced {
            self.admit_namespace(s, ns, &obj)?;
        }
        let now = crate::time::now_string();
        {
            let m = meta_mut(&mut obj);
            let has_name = m
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            if !has_name
                && let Some(prefix) = m
                    .get("generateName")
                    .and_then(Value::as_str)
                    .filter(|p| !p.is_empty())
            {
                let suffix: String = (0..5)
                    .map(|_| {
                        GENERATE_ALPHABET[rand::random_range(0..GENERATE_ALPHABET.len())] as char
                    })
                    .collect();
                let name = format!("{}{suffix}", truncate_prefix(prefix));
                m.insert("name".into(), json!(name));
            }
            m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), json!(now));
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
            m.remove("generation");
            m.remove("selfLink");
        }
        s.strategy.prepare_for_create(&mut obj);
        let name = get_str(&obj, &["metadata", "name"])
            .unwrap_or_default()
            .to_string();
        let mut errs = s.validate_meta_create(&obj);
        errs.extend(s.strategy.validate_create(&obj));
        if !errs.is_empty() {
            return Err(s.invalid(&name, &errs));
        }
        if get_str(&obj, &["metadata", "resourceVersion"]).is_some_and(|rv| !rv.is_empty()) {
            return Err(ApiError::bare(
                500,
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let warnings = crate::admission::admit(
            self,
            &crate::admission::Request {
                operation: "CREATE",
                info,
                subresource: "",
                namespace: ns,
                name: &name,
                object: &obj,
                old: None,
                user: o.user.as_deref().unwrap_or(&o.manager),
                dry_run: o.dry_run,
            },
        )?;
        if o.dry_run {
            return Ok(Written {
                code: 201,
                obj: ObjOut::Value(obj),
                warnings,
            });
        }
        let stored_form = s.to_storage(obj);
        let st = self
            .store
            .put(&s.table, ns, &name, stored_form, Precondition::MustNotExist)
            .map_err(|_| ApiError::already_exists(&info.group, &info.plural, &name))?;
        self.sync_quotas(&s.table, ns);
        self.instruments.record_create(
            &info.group,
            &info.plural,
            &st,
            o.user.as_deref().unwrap_or(&o.manager),
        );
        Ok(Written {
            code: 201,
            obj: ObjOut::Stored(st),
            warnings,
        })
    }

    /// Keeps ResourceQuota usage current after a create or delete in `ns` (see `admission::quota`).
    fn sync_quotas(&self, table: &crate::store::TableKey, ns: &str) {
        if crate::admission::quota::counts(self, table, ns) {
            crate::admission::quota::sync_status(self, ns);
        }
    }

    /// Namespace lifecycle admission: the namespace must exist and not be terminating.
    fn admit_namespace(&self, s: &Served, ns: &str, obj: &Value) -> Result<(), ApiError> {
        let nss = crate::store::TableKey::new("", "namespaces");
        let terminating = self
            .store
            .get(&nss, "", ns)
            .map(|n| crate::kinds::namespace::stored_is_terminating(&n.json));
        let info = s.info();
        crate::kinds::namespace::admit_create(terminating, ns, &info.group, &info.plural, obj)
    }

    // ------------------------------------------------------------------------------------ update

    /// PUT of the main resource or `/status`.
    pub fn update(
        &self,
        s: &Served,
        ns: &str,
        name: &str,
        obj: Value,
        part: Part,
        o: &WriteOpts,
    ) -> Result<Written, ApiError> {
        self.update_over(s, ns, name, obj, part, o, None)
    }

    /// [`Api::update`] by an in-process writer that built `obj` from `current`: the stored object it
    /// read and that object's served form ([`Api::served_value`]), which the write compares against
    /// instead of parsing the stored object again (`None`: read now, as `update` does), and whose
    /// unchanged members the stored bytes are copied for (so it must be exactly that). When `obj`
    /// carries `current`'s resourceVersion (as a served form does), a newer stored version makes the
    /// write a 409 exactly as through `update`.
    #[allow(clippy::too_many_arguments)]
    pub fn update_over(
        &self,
        s: &Served,
        ns: &str,
        name: &str,
        obj: Value,
        part: Part,
        o: &WriteOpts,
        mut current: Option<(Arc<Stored>, Value)>,
    ) -> Result<Written, ApiError> {
        let mut obj = obj;
        self.check_identity(s, ns, name, &obj)?;
        let want_rv = match get_str(&obj, &["metadata", "resourceVersion"]) {
            None | Some("") => None,
            Some(rv) => Some(parse_rv(rv).map_err(|m| ApiError::bare(500, m))?),
        };
        loop {
            let known = current.take().or_else(|| {
                self.store
                    .get(&s.table, ns, name)
                    .map(|st| (st.clone(), self.served_value(s, &st)))
            });
            let Some(old) = known else {
                if part == Part::Main && s.strategy.allow_create_on_update() {
                    let mut created = self.create(s, ns, obj, o)?;
                    created.code = 201;
                    return Ok(created);
                }
                return Err(s.not_found(name));
            };
            if want_rv.is_none() && !s.strategy.allow_unconditional_update() {
                return Err(crate::kinds::unconditional_update_error(s.info(), name));
            }
            // Only an unconditional write is tried again, so a conditional one hands its object over
            // instead of copying it.
            let attempt = match want_rv {
                Some(_) => std::mem::take(&mut obj),
                None => obj.clone(),
            };
            match self.update_from(s, ns, name, old, attempt, want_rv, part, o, false)? {
                Some(w) => return Ok(w),
                // Lost a race on an unconditional write: re-read and try again, like GuaranteedUpdate.
                None => continue,
            }
        }
    }

    fn check_identity(
        &self,
        s: &Served,
        ns: &str,
        name: &str,
        obj: &Value,
    ) -> Result<(), ApiError> {
        if let Some(n) = get_str(obj, &["metadata", "name"])
            && n != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        if s.info().namespaced
            && let Some(b) = get_str(obj, &["metadata", "namespace"])
            && !b.is_empty()
            && b != ns
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        Ok(())
    }

    /// One attempt at an update against `old`. `Ok(None)` = lost an unconditional race (retry).
    #[allow(clippy::too_many_arguments)]
    fn update_from(
        &self,
        s: &Served,
        ns: &str,
        name: &str,
        (old, old_obj): (Arc<Stored>, Value),
        mut obj: Value,
        want_rv: Option<u64>,
        part: Part,
        o: &WriteOpts,
        managed_fields_done: bool,
    ) -> Result<Option<Written>, ApiError> {
        let info = s.info();
        if want_rv.is_some_and(|rv| rv != old.rv) {
            return Err(ApiError::modified(&info.group, &info.plural, name));
        }
        let old_uid = get_str(&old_obj, &["metadata", "uid"])
            .unwrap_or_default()
            .to_string();
        if let Some(uid) =
            get_str(&obj, &["metadata", "uid"]).filter(|u| !u.is_empty() && *u != old_uid)
        {
            let key = if info.namespaced {
                format!(
                    "/registry/{}/{ns}/{name}",
                    storage_prefix(&info.group, &info.plural)
                )
            } else {
                format!(
                    "/registry/{}/{name}",
                    storage_prefix(&info.group, &info.plural)
                )
            };
            return Err(ApiError::conflict(
                &info.group,
                &info.plural,
                name,
                &format!(
                    "StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}"
                ),
            ));
        }
        {
            // Read in place: the old metadata (managedFields included) is not copied.
            let om = old_obj.get("metadata").unwrap_or(&Value::Null);
            let m = meta_mut(&mut obj);
            if info.namespaced {
                m.insert("namespace".into(), json!(ns));
            }
            m.insert("name".into(), json!(name));
            for k in ["uid", "creationTimestamp"] {
                if m.get(k)
                    .is_none_or(|v| v.as_str().is_none_or(str::is_empty))
                {
                    if let Some(v) = om.get(k) {
                        m.insert(k.into(), v.clone());
                    }
                } else if k == "creationTimestamp"
                    && let Some(v) = om.get(k)
                {
                    m.insert(k.into(), v.clone());
                }
            }
            for k in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
                match om.get(k) {
                    Some(v) => {
                        m.insert(k.into(), v.clone());
                    }
                    None => {
                        m.remove(k);
                    }
                }
            }
            match om.get("generation") {
                Some(g) => {
                    m.insert("generation".into(), g.clone());
                }
                None => {
                    m.remove("generation");
                }
            }
            m.insert("resourceVersion".into(), json!(old.rv.to_string()));
        }
        if !managed_fields_done {
            s.track_managed_fields(Some(&old_obj), &mut obj, o, part);
        }
        match part {
            Part::Main => s.strategy.prepare_for_update(&mut obj, &old_obj),
            Part::Status => s.strategy.prepare_for_status_update(&mut obj, &old_obj),
        }
        let mut errs = s.validate_meta_update(&obj, &old_obj);
        errs.extend(match part {
            Part::Main => s.strategy.validate_update(&obj, &old_obj),
            Part::Status => s.strategy.validate_status_update(&obj, &old_obj),
        });
        if !errs.is_empty() {
            return Err(s.invalid(name, &errs));
        }
        let warnings = crate::admission::admit(
            self,
            &crate::admission::Request {
                operation: "UPDATE",
                info,
                subresource: if part == Part::Status { "status" } else { "" },
                namespace: ns,
                name,
                object: &obj,
                old: Some(&old_obj),
                user: o.user.as_deref().unwrap_or(&o.manager),
                dry_run: o.dry_run,
            },
        )?;
        if same_content(&obj, &old_obj) {
            return Ok(Some(Written {
                code: 200,
                obj: ObjOut::Stored(old.clone()),
                warnings: warnings.clone(),
            }));
        }
        if o.dry_run {
            return Ok(Some(Written {
                code: 200,
                obj: ObjOut::Value(obj),
                warnings: warnings.clone(),
            }));
        }
        // The last finalizer removed from an object being deleted: it goes now.
        if is_deleting(&obj)
            && finalizers(&obj).is_empty()
            && !s.strategy.pending_finalization(&obj)
        {
            return match self.store.remove(&s.table, ns, name, Some(old.rv)) {
                Ok(_) => {
                    self.sync_quotas(&s.table, ns);
                    let mut v = obj;
                    meta_mut(&mut v).insert("resourceVersion".into(), json!(old.rv.to_string()));
                    Ok(Some(Written {
                        code: 200,
                        obj: ObjOut::Value(v),
                        warnings: warnings.clone(),
                    }))
                }
                Err(StoreError::Conflict) if want_rv.is_none() => Ok(None),
                Err(StoreError::NotFound) => Err(s.not_found(name)),
                Err(_) => Err(ApiError::modified(&info.group, &info.plural, name)),
            };
        }
        let stored_form = s.to_storage(obj);
        // `old_obj` is `old` parsed ([`Api::served_value`]), its storage form unless the kind converts.
        let basis = (!s.strategy.converts()).then_some(crate::store::Basis {
            stored: &old,
            value: &old_obj,
        });
        match self.store.put_over(
            &s.table,
            ns,
            name,
            stored_form,
            Precondition::Exists(Some(old.rv)),
            basis,
        ) {
            Ok(st) => {
                if s.table == crate::store::TableKey::new("", "resourcequotas") {
                    self.sync_quotas(&s.table, ns);
                }
                Ok(Some(Written {
                    code: 200,
                    obj: ObjOut::Stored(st),
                    warnings,
                }))
            }
            Err(StoreError::Conflict) if want_rv.is_none() => Ok(None),
            Err(StoreError::NotFound) => Err(s.not_found(name)),
            Err(_) => Err(ApiError::modified(&info.group, &info.plural, name)),
        }
    }
}

/// The prefix of an object's etcd key (`/registry/<prefix>/...`), as the real server names it.
fn storage_prefix(group: &str, plural: &str) -> String {
    match (group, plural) {
        ("", p) => p.to_string(),
        ("batch", p) | ("coordination.k8s.io", p) | ("events.k8s.io", p) => p.to_string(),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            "apiextensions.k8s.io/customresourcedefinitions".into()
        }
        (g, p) => format!("{g}/{p}"),
    }
}

fn truncate_prefix(prefix: &str) -> &str {
    // generateName keeps room for the 5-character suffix within 63 characters.
    const MAX: usize = 58;
    if prefix.len() > MAX {
        &prefix[..MAX]
    } else {
        prefix
    }
}

/// Patch document types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_content_ignores_only_the_bookkeeping() {
        // The definition it replaced: both sides copied, the bookkeeping removed, then compared.
        fn stripped_equal(a: &Value, b: &Value) -> bool {
            let strip = |v: &Value| {
                let mut v = v.clone();
                if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("resourceVersion");
                    m.remove("managedFields");
                }
                v
            };
            strip(a) == strip(b)
        }
        let base = json!({"metadata": {"name": "a", "resourceVersion": "1", "managedFields": [1]},
            "spec": {"x": 1}, "status": {"y": [1, 2]}});
        let cases = [
            json!({"metadata": {"name": "a", "resourceVersion": "9", "managedFields": [2]},
                "spec": {"x": 1}, "status": {"y": [1, 2]}}),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"y": [1, 2]}}),
            json!({"metadata": {"name": "b", "resourceVersion": "1"}, "spec": {"x": 1},
                "status": {"y": [1, 2]}}),
            json!({"metadata": {"name": "a", "uid": "u"}, "spec": {"x": 1}, "status": {"y": [1, 2]}}),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"y": [2, 1]}}),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}}),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"y": [1, 2]}, "z": 0}),
            json!({"metadata": "a", "spec": {"x": 1}, "status": {"y": [1, 2]}}),
            json!({"spec": {"x": 1}, "status": {"y": [1, 2]}}),
            json!([1]),
            Value::Null,
        ];
        let mut same = 0;
        for c in &cases {
            for (x, y) in [(&base, c), (c, &base), (c, c)] {
                assert_eq!(same_content(x, y), stripped_equal(x, y), "{x} vs {y}");
            }
            same += usize::from(same_content(&base, c));
        }
        // Only the first two differ from `base` in bookkeeping alone.
        assert_eq!(same, 2);
    }
}
