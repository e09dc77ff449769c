//! The generic request flow: what the real API server's generic registry does for every resource
//! (create, read, list, update, patch, delete, watch), calling each kind's `Strategy` hooks in the same
//! order. Both the HTTP layer and kubesim's in-process controllers go through here, so a controller's
//! write is validated exactly like a client's.

pub mod decode;
pub mod patch;
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
        if s.strategy.converts() {
            Bytes::from(serde_json::to_vec(&self.served_value(s, st)).unwrap_or_default())
        } else {
            s.splice_type(&st.json)
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
        let info = s.info().clone();
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
                info: &info,
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
            &st.value(),
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
        let stored = self.store.get(&nss, "", ns);
        let info = s.info();
        crate::kinds::namespace::admit_create(
            stored.map(|n| n.value()).as_ref(),
            ns,
            &info.group,
            &info.plural,
            obj,
        )
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
    /// instead of parsing the stored object again (`None`: read now, as `update` does). When `obj`
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
        let info = s.info().clone();
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
                info: &info,
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
        match self.store.put(
            &s.table,
            ns,
            name,
            stored_form,
            Precondition::Exists(Some(old.rv)),
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

    // ------------------------------------------------------------------------------------ patch

    /// PATCH: JSON patch, merge patch, strategic merge patch or server-side apply.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        s: &Served,
        ns: &str,
        name: &str,
        kind: PatchKind,
        raw: &[u8],
        part: Part,
        o: &WriteOpts,
    ) -> Result<Written, ApiError> {
        crate::structured::validate_patch_options(
            kind == PatchKind::Apply,
            o.explicit_manager.then_some(o.manager.as_str()),
            o.force_given,
        )?;
        if kind == PatchKind::Strategic && !s.supports_strategic() {
            return Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        let parsed: Option<Value> = match kind {
            PatchKind::Merge | PatchKind::Strategic => {
                if let Some(e) = crate::gojson::syntax_error(raw) {
                    return Err(ApiError::bad_request(format!("error decoding patch: {e}")));
                }
                Some(
                    serde_json::from_slice(raw)
                        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
                )
            }
            PatchKind::Apply => {
                Some(crate::structured::parse_apply_body(raw).map_err(|e| e.to_api_error())?)
            }
            PatchKind::Json => None,
        };
        let empty = Value::Null;
        let patch_doc = parsed.as_ref().unwrap_or(&empty);
        if kind == PatchKind::Apply {
            return self.apply(s, ns, name, patch_doc, part, o);
        }
        loop {
            let old = self.get(s, ns, name)?;
            let current = self.served_value(s, &old);
            let mut doc = current.clone();
            match kind {
                PatchKind::Json => patch::json_patch(&mut doc, raw)?,
                PatchKind::Merge => patch::merge_patch(&mut doc, patch_doc),
                PatchKind::Strategic => doc = s.strategic_merge(&doc, patch_doc)?,
                PatchKind::Apply => {}
            }
            let mut warnings = Vec::new();
            let (doc, pruned) = match s.decode_object(doc, &mut warnings) {
                Ok(d) => d,
                // A codec failure (e.g. bad base64 in a Secret) on a patched document is reported against
                // the patch, with the patched document in the message.
                Err(e) if e.code == 400 && kind == PatchKind::Merge => {
                    let cause = crate::kinds::common::decode_error_cause(&e.message);
                    let text = crate::kinds::secret::merge_patched_text(&current, patch_doc);
                    return Err(crate::kinds::secret::patch_decode_error(&text, cause));
                }
                Err(e) => return Err(e),
            };
            decode::report_issues(
                s,
                pruned
                    .into_iter()
                    .map(crate::schema::StrictIssue::UnknownField)
                    .collect(),
                o.field_validation,
                &mut warnings,
            )?;
            // A resourceVersion the patch itself wrote is a precondition; otherwise the patch applies to
            // whatever is current (retrying on races).
            let want_rv = match get_str(&doc, &["metadata", "resourceVersion"]) {
                Some(rv) if rv != old.rv.to_string() => {
                    Some(parse_rv(rv).map_err(|m| ApiError::bare(500, m))?)
                }
                _ => None,
            };
            if let Some(mut w) =
                self.update_from(s, ns, name, (old, current), doc, want_rv, part, o, false)?
            {
                warnings.append(&mut w.warnings);
                w.warnings = warnings;
                return Ok(w);
            }
        }
    }

    /// Server-side apply: merge by field ownership, create when missing.
    fn apply(
        &self,
        s: &Served,
        ns: &str,
        name: &str,
        applied: &Value,
        part: Part,
        o: &WriteOpts,
    ) -> Result<Written, ApiError> {
        let Some(t) = s.schema.clone() else {
            return Err(ApiError::unsupported_media_type(
                "415: Unsupported Media Type",
            ));
        };
        let now = crate::time::now_string();
        let api_version = s.info().api_version();
        let mgr = crate::structured::Manager {
            name: &o.manager,
            api_version: &api_version,
            subresource: (part == Part::Status).then_some("status"),
            now: &now,
        };
        loop {
            let old = self.store.get(&s.table, ns, name);
            let live = old.as_ref().map(|st| self.served_value(s, st));
            if live.is_none() && part == Part::Status {
                return Err(s.not_found(name));
            }
            let result = crate::structured::apply(&t, live.as_ref(), applied, &mgr, o.force)
                .map_err(|e| e.to_api_error())?;
            let mut warnings = Vec::new();
            let (obj, _) = s.decode_object(result.object, &mut warnings)?;
            crate::structured::check_patched_name(&obj, name, s.info().namespaced.then_some(ns))?;
            let Some(old) = old else {
                return self.create_inner(s, ns, obj, o, true);
            };
            let live = live.unwrap_or_else(|| self.served_value(s, &old));
            if let Some(w) = self.update_from(s, ns, name, (old, live), obj, None, part, o, true)? {
                return Ok(w);
            }
        }
    }

    /// PUT `/api/v1/namespaces/<name>/finalize`: replaces `spec.finalizers`; a terminating namespace with
    /// none left goes away.
    pub fn finalize_namespace(
        &self,
        s: &Served,
        name: &str,
        mut obj: Value,
    ) -> Result<Written, ApiError> {
        self.check_identity(s, "", name, &obj)?;
        loop {
            let old = self.get(s, "", name)?;
            let old_obj = self.served_value(s, &old);
            crate::kinds::namespace::prepare_for_finalize(&mut obj, &old_obj);
            let errs = crate::kinds::namespace::validate_finalize(&obj, &old_obj);
            if !errs.is_empty() {
                return Err(s.invalid(name, &errs));
            }
            if is_deleting(&obj)
                && finalizers(&obj).is_empty()
                && !s.strategy.pending_finalization(&obj)
            {
                match self.store.remove(&s.table, "", name, Some(old.rv)) {
                    Ok(_) => {
                        return Ok(Written {
                            code: 200,
                            obj: ObjOut::Value(obj),
                            warnings: Vec::new(),
                        });
                    }
                    Err(StoreError::NotFound) => return Err(s.not_found(name)),
                    Err(_) => continue,
                }
            }
            match self.store.put(
                &s.table,
                "",
                name,
                s.to_storage(obj.clone()),
                Precondition::Exists(Some(old.rv)),
            ) {
                Ok(st) => {
                    return Ok(Written {
                        code: 200,
                        obj: ObjOut::Stored(st),
                        warnings: Vec::new(),
                    });
                }
                Err(StoreError::NotFound) => return Err(s.not_found(name)),
                Err(_) => continue,
            }
        }
    }

    // ------------------------------------------------------------------------------------ delete

    /// DELETE of one object.
    pub fn delete(
        &self,
        s: &Served,
        ns: &str,
        name: &str,
        d: &DeleteOpts,
    ) -> Result<Written, ApiError> {
        validate_delete_opts(d)?;
        if s.info().group.is_empty() && s.info().plural == "namespaces" {
            crate::kinds::namespace::admit_delete(name)?;
        }
        let info = s.info().clone();
        loop {
            let old = self.get(s, ns, name)?;
            let obj = self.served_value(s, &old);
            check_delete_preconditions(&info, name, &obj, old.rv, d)?;
            let accepted_code = if d.orphan_dependents == Some(false) {
                202
            } else {
                200
            };
            let now = crate::time::now_string();
            let new = match s.strategy.on_delete(&obj, &d.as_json(), &now) {
                crate::kinds::DeleteAction::Keep => {
                    return Ok(Written {
                        code: 200,
                        obj: ObjOut::Stored(old),
                        warnings: Vec::new(),
                    });
                }
                crate::kinds::DeleteAction::Update(v) => v,
                crate::kinds::DeleteAction::Default => {
                    let policy = d
                        .propagation
                        .clone()
                        .or_else(|| {
                            d.orphan_dependents
                                .map(|o| if o { "Orphan" } else { "Background" }.to_string())
                        })
                        .unwrap_or_else(|| s.strategy.default_propagation().to_string());
                    let mut fins = finalizers(&obj);
                    let had = fins.clone();
                    match policy.as_str() {
                        "Orphan" if !fins.iter().any(|f| f == "orphan") => {
                            fins.push("orphan".into())
                        }
                        "Foreground" if !fins.iter().any(|f| f == "foregroundDeletion") => {
                            fins.push("foregroundDeletion".into())
                        }
                        _ => {}
                    }
                    // Switching policy on a repeated delete drops the other policy's finalizer.
                    if policy != "Orphan" {
                        fins.retain(|f| f != "orphan");
                    }
                    if policy != "Foreground" {
                        fins.retain(|f| f != "foregroundDeletion" || had.iter().any(|x| x == f));
                    }
                    if fins.is_empty() {
                        if d.dry_run {
                            return Ok(Written {
                                code: 200,
                                obj: ObjOut::Value(success_status(&info, name, &obj)),
                                warnings: Vec::new(),
                            });
                        }
                        match self.store.remove(&s.table, ns, name, Some(old.rv)) {
                            Ok(_) => {
                                self.sync_quotas(&s.table, ns);
                                return Ok(Written {
                                    code: 200,
                                    obj: ObjOut::Value(success_status(&info, name, &obj)),
                                    warnings: Vec::new(),
                                });
                            }
                            Err(StoreError::NotFound) => return Err(s.not_found(name)),
                            Err(_) => continue,
                        }
                    }
                    // Graceful: mark for deletion and keep the object until its finalizers are gone.
                    let mut new = obj.clone();
                    let m = meta_mut(&mut new);
                    if !is_deleting(&obj) {
                        m.insert("deletionTimestamp".into(), json!(now));
                        m.insert("deletionGracePeriodSeconds".into(), json!(0));
                        if let Some(g) = m.get("generation").and_then(Value::as_i64) {
                            m.insert("generation".into(), json!(g + 1));
                        }
                    }
                    m.insert("finalizers".into(), json!(fins));
                    new
                }
            };
            if same_content(&new, &obj) {
                return Ok(Written {
                    code: accepted_code,
                    obj: ObjOut::Stored(old),
                    warnings: Vec::new(),
                });
            }
            if d.dry_run {
                return Ok(Written {
                    code: accepted_code,
                    obj: ObjOut::Value(new),
                    warnings: Vec::new(),
                });
            }
            match self.store.put(
                &s.table,
                ns,
                name,
                s.to_storage(new),
                Precondition::Exists(Some(old.rv)),
            ) {
                Ok(st) => {
                    return Ok(Written {
                        code: accepted_code,
                        obj: ObjOut::Stored(st),
                        warnings: Vec::new(),
                    });
                }
                Err(StoreError::NotFound) => return Err(s.not_found(name)),
                Err(_) => continue,
            }
        }
    }

    /// DELETE of a collection: deletes every object the selectors match; answers the list as it was.
    pub fn delete_collection(
        &self,
        s: &Served,
        ns: Option<&str>,
        l: &ListOpts,
        d: &DeleteOpts,
    ) -> Result<ListPage, ApiError> {
        validate_delete_opts(d)?;
        let page = self.list(
            s,
            ns,
            &ListOpts {
                limit: None,
                continue_token: None,
                ..l.clone()
            },
        )?;
        for item in &page.items {
            match self.delete(s, item.namespace(), item.name(), d) {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ListPage {
            continue_token: None,
            remaining: None,
            ..page
        })
    }

    // ------------------------------------------------------------------------------------ list

    /// LIST with selectors, paging and resourceVersion semantics.
    pub fn list(&self, s: &Served, ns: Option<&str>, l: &ListOpts) -> Result<ListPage, ApiError> {
        if l.resource_version_match.is_some()
            && l.resource_version.as_deref().is_none_or(str::is_empty)
        {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                &[crate::errors::FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )],
            ));
        }
        if let Some(rv) = l.resource_version.as_deref().filter(|r| !r.is_empty()) {
            parse_rv(rv).map_err(|m| {
                ApiError::bad_request(format!(
                    "invalid resource version: resourceVersion: Invalid value: {}: {m}",
                    go_quote(rv)
                ))
            })?;
        }
        let field = s.convert_field_selector(&l.field)?;
        let l = &ListOpts { field, ..l.clone() };
        // resourceVersion=0 is served from the watch cache, which ignores limit (as the real server does).
        let from_cache = l.resource_version.as_deref() == Some("0");
        let limit = if from_cache {
            None
        } else {
            l.limit.filter(|n| *n > 0)
        };
        let (start_after, token_rv) = match l.continue_token.as_deref().filter(|c| !c.is_empty()) {
            Some(tok) => {
                let (rv, key) = decode_continue(tok)?;
                (Some(continue_key_to_obj(&key, ns)), Some(rv))
            }
            None => (None, None),
        };
        let ns_pin = ns
            .map(str::to_string)
            .or_else(|| l.field.exact("metadata.namespace").map(str::to_string));
        let snap = self
            .store
            .list(&s.table, ns_pin.as_deref(), start_after.as_ref());
        let rv = token_rv.unwrap_or(snap.rv);
        let mut items = Vec::new();
        let mut more = false;
        let mut remaining: u64 = 0;
        let filtered = !l.label.is_empty() || !l.field.is_empty();
        for st in snap.items {
            // Like etcd paging: once the page is full, any further key (matching or not) means
            // there is more to read.
            if let Some(n) = limit
                && items.len() >= n
            {
                more = true;
                if filtered {
                    break;
                }
                remaining += 1;
                continue;
            }
            if self.matches(s, &st, &l.label, &l.field) {
                items.push(st);
            }
        }
        let continue_token = if more {
            items.last().map(|last| {
                encode_continue(
                    rv,
                    &continue_key(last, ns.is_some() || !s.info().namespaced),
                )
            })
        } else {
            None
        };
        let remaining = (more && !filtered).then_some(remaining);
        Ok(ListPage {
            rv,
            items,
            continue_token,
            remaining,
        })
    }

    /// Whether a stored object passes a list/watch filter.
    pub fn matches(
        &self,
        s: &Served,
        st: &Stored,
        label: &LabelSelector,
        field: &FieldSelector,
    ) -> bool {
        if !label.is_empty() && !label.matches(|k| st.label(k)) {
            return false;
        }
        if field.is_empty() {
            return true;
        }
        // Field labels were converted to the stored form's (`convert_field_label`); only fields other
        // than name/namespace need the parsed object.
        let mut parsed: Option<Value> = None;
        field.matches(|f| match f {
            "metadata.name" => Some(st.name().to_string()),
            "metadata.namespace" => Some(st.namespace().to_string()),
            other => s
                .strategy
                .field_value(parsed.get_or_insert_with(|| st.value()), other),
        })
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

fn check_delete_preconditions(
    info: &crate::kinds::ResourceInfo,
    name: &str,
    obj: &Value,
    rv: u64,
    d: &DeleteOpts,
) -> Result<(), ApiError> {
    let conflict = |why: String| {
        ApiError::conflict(&info.group, &info.kind, name, &why).with_details(registry::details(
            name,
            &info.group,
            &info.kind,
        ))
    };
    if let Some(uid) = &d.precondition_uid {
        let cur = get_str(obj, &["metadata", "uid"]).unwrap_or_default();
        if uid != cur {
            return Err(conflict(format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({cur}). The object might have been deleted and then recreated"
            )));
        }
    }
    if let Some(want) = &d.precondition_rv
        && *want != rv.to_string()
    {
        return Err(conflict(format!(
            "the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )));
    }
    Ok(())
}

impl DeleteOpts {
    /// The options as a `DeleteOptions` body (what strategies' `on_delete` sees).
    pub fn as_json(&self) -> Value {
        let mut m = Map::new();
        if let Some(p) = &self.propagation {
            m.insert("propagationPolicy".into(), json!(p));
        }
        if let Some(o) = self.orphan_dependents {
            m.insert("orphanDependents".into(), json!(o));
        }
        if let Some(g) = self.grace_period {
            m.insert("gracePeriodSeconds".into(), json!(g));
        }
        Value::Object(m)
    }
}

fn validate_delete_opts(d: &DeleteOpts) -> Result<(), ApiError> {
    use crate::errors::{BadValue, FieldError};
    if let Some(p) = &d.propagation {
        if d.orphan_dependents.is_some() {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                &[FieldError::invalid(
                    "propagationPolicy",
                    BadValue::Str(p.clone()),
                    "orphanDependents and deletionPropagation cannot be both set",
                )],
            ));
        }
        if !matches!(p.as_str(), "Foreground" | "Background" | "Orphan") {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                &[FieldError::not_supported(
                    "propagationPolicy",
                    BadValue::Str(p.clone()),
                    &["Foreground", "Background", "Orphan", "nil"],
                )],
            ));
        }
    }
    Ok(())
}

fn success_status(info: &crate::kinds::ResourceInfo, name: &str, obj: &Value) -> Value {
    let mut details = Map::new();
    details.insert("name".into(), json!(name));
    if !info.group.is_empty() {
        details.insert("group".into(), json!(info.group));
    }
    details.insert("kind".into(), json!(info.plural));
    if let Some(uid) = get_str(obj, &["metadata", "uid"]) {
        details.insert("uid".into(), json!(uid));
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// Patch document types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

// Continue tokens have the real server's shape: base64url(JSON {v, rv, start}) where `start` is the next
// key relative to the list's key prefix, so tokens compare equal exactly when the real ones would.
fn continue_key(st: &Stored, within_namespace: bool) -> String {
    if within_namespace || st.namespace().is_empty() {
        format!("{}\u{0}", st.name())
    } else {
        format!("{}/{}\u{0}", st.namespace(), st.name())
    }
}

fn continue_key_to_obj(key: &str, ns: Option<&str>) -> (String, String) {
    let key = key.trim_end_matches('\u{0}');
    match ns {
        Some(ns) => (ns.to_string(), key.to_string()),
        None => match key.split_once('/') {
            Some((n, name)) => (n.to_string(), name.to_string()),
            None => (String::new(), key.to_string()),
        },
    }
}

fn encode_continue(rv: u64, start: &str) -> String {
    use base64::Engine;
    let doc = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(doc.to_string())
}

fn decode_continue(tok: &str) -> Result<(u64, String), ApiError> {
    use base64::Engine;
    let bad = |why: String| ApiError::bad_request(format!("invalid continue token: {why}"));
    // Go's RawURLEncoding ignores non-zero trailing bits; so must we to fail where it fails.
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let raw = engine
        .decode(tok)
        .map_err(|e| bad(format!("illegal base64 data: {e}")))?;
    if let Some(e) = crate::gojson::syntax_error(&raw) {
        return Err(bad(format!("continue key is not valid: {e}")));
    }
    let v: Value =
        serde_json::from_slice(&raw).map_err(|e| bad(format!("continue key is not valid: {e}")))?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad(
            "continue key is not valid: server does not recognize this encoded key".into(),
        ));
    }
    let rv = v.get("rv").and_then(Value::as_u64).unwrap_or(0);
    let start = v
        .get("start")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Ok((rv, start))
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

    #[test]
    fn continue_tokens_round_trip_and_garbage_is_rejected_like_the_server() {
        let t = encode_continue(42, "d\u{0}");
        assert_eq!(decode_continue(&t).unwrap(), (42, "d\u{0}".to_string()));
        let e = decode_continue("garbage").unwrap_err();
        assert_eq!(
            e.message,
            "invalid continue token: continue key is not valid: invalid character '\\x81' looking for beginning of value"
        );
    }
}
