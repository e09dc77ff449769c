//! Served resources: each binds a kind's `Strategy` to its storage table and its type schema, and
//! carries the per-resource glue the generic flow needs (error naming, storage form, managedFields).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value, json};

use super::{Part, WriteOpts};
use crate::errors::{ApiError, FieldErrors};
use crate::kinds::{ResourceInfo, Strategy};
use crate::schema::TypeRef;
use crate::selectors::FieldSelector;
use crate::store::TableKey;

/// One served resource (`group/version/plural`).
pub struct Served {
    pub strategy: Arc<dyn Strategy>,
    pub table: TableKey,
    /// The type schema (pruning, managedFields, strategic merge, apply). `None` only for kinds that are
    /// never stored (SelfSubjectAccessReview).
    pub schema: Option<TypeRef>,
    /// `{"kind":"…","apiVersion":"…",` — spliced in front of a stored object's JSON.
    type_prefix: Bytes,
}

impl Served {
    pub fn new(strategy: Arc<dyn Strategy>, schema: Option<TypeRef>) -> Self {
        let (g, p) = strategy.storage();
        let table = TableKey::new(g, p);
        let info = strategy.info();
        let type_prefix = Bytes::from(format!(
            "{{\"kind\":{},\"apiVersion\":{},",
            serde_json::to_string(&info.kind).unwrap_or_default(),
            serde_json::to_string(&info.api_version()).unwrap_or_default()
        ));
        Self {
            strategy,
            table,
            schema,
            type_prefix,
        }
    }

    /// A built-in kind with its schema from the built-in schema set.
    pub fn builtin(strategy: Arc<dyn Strategy>) -> Self {
        let info = strategy.info();
        let schema = crate::schema::builtin(&info.api_version(), &info.kind);
        Self::new(strategy, schema)
    }

    /// A custom resource (served from a CRD): its lists are unstructured, so every item carries
    /// `apiVersion`/`kind` and list metadata always has `continue`.
    pub fn is_custom(&self) -> bool {
        self.schema.as_ref().is_some_and(TypeRef::is_custom)
    }

    pub fn info(&self) -> &ResourceInfo {
        self.strategy.info()
    }

    pub fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(&self.info().group, &self.info().plural, name)
    }

    pub fn invalid(&self, name: &str, errs: &FieldErrors) -> ApiError {
        let (group, kind) = self.strategy.invalid_kind();
        ApiError::invalid(group, kind, name, errs)
    }

    /// Appends stored JSON (`{"metadata":…}`) with `kind`/`apiVersion` in front to `out`.
    pub fn put_typed(&self, json: &[u8], out: &mut BytesMut) {
        if json.len() < 2 {
            out.put_slice(json);
            return;
        }
        out.reserve(self.type_prefix.len() + json.len());
        if json == b"{}" {
            // `{"kind":..,"apiVersion":..,` + `}` would leave a trailing comma.
            out.put_slice(&self.type_prefix[..self.type_prefix.len() - 1]);
            out.put_slice(b"}");
        } else {
            out.put_slice(&self.type_prefix);
            out.put_slice(&json[1..]);
        }
    }

    /// The storage form: the strategy's conversion, without `kind`/`apiVersion`.
    pub fn to_storage(&self, obj: Value) -> Value {
        let mut v = if self.strategy.converts() {
            self.strategy.to_storage(obj)
        } else {
            obj
        };
        if let Value::Object(m) = &mut v {
            m.remove("kind");
            m.remove("apiVersion");
        }
        v
    }

    /// Records field ownership for an Update-operation write (create, PUT, JSON/merge/strategic patch).
    pub fn track_managed_fields(
        &self,
        old: Option<&Value>,
        obj: &mut Value,
        o: &WriteOpts,
        part: Part,
    ) {
        let Some(t) = &self.schema else { return };
        crate::structured::update_managed_fields(t, old, obj, &self.stamp(o, part).manager());
    }

    /// Who writes `part` with options `o`, now, as managedFields record it.
    pub fn stamp(&self, o: &WriteOpts, part: Part) -> crate::structured::Stamp {
        crate::structured::Stamp::new(&o.manager, self.info().api_version(), part == Part::Status)
    }

    /// The generic ObjectMeta checks `rest.BeforeCreate` runs, with the kind's name rule.
    pub fn validate_meta_create(&self, obj: &Value) -> FieldErrors {
        let meta = obj.get("metadata").unwrap_or(&Value::Null);
        crate::validation::validate_object_meta_create_with(
            meta,
            crate::validation::MetaOptions {
                namespaced: self.info().namespaced,
                name_rule: self.strategy.name_rule(),
                kube_finalizers: !self.schema.as_ref().is_some_and(TypeRef::is_custom),
            },
        )
    }

    /// The generic ObjectMeta update checks every kind gets (`validateCommonFields`).
    pub fn validate_meta_update(&self, new: &Value, old: &Value) -> FieldErrors {
        crate::validation::validate_object_meta_update(
            new.get("metadata").unwrap_or(&Value::Null),
            old.get("metadata").unwrap_or(&Value::Null),
        )
    }

    pub fn supports_strategic(&self) -> bool {
        self.strategy.supports_strategic_merge_patch()
    }

    pub fn strategic_merge(&self, doc: &Value, patch: &Value) -> Result<Value, ApiError> {
        let Some(t) = &self.schema else {
            return Err(ApiError::unsupported_media_type(
                "415: Unsupported Media Type",
            ));
        };
        crate::structured::strategic_merge(t, doc, patch).map_err(|e| e.to_api_error())
    }

    /// A decoded or patched object: unknown fields pruned (their paths returned, for the caller to warn
    /// about or reject), the kind's codec hook, scheme defaults, and the Go JSON round trip.
    pub fn decode_object(
        &self,
        doc: Value,
        warnings: &mut Vec<String>,
    ) -> Result<(Value, Vec<String>), ApiError> {
        self.decode_over(doc, None, warnings)
    }

    /// [`Served::decode_object`] of `doc`, a merge patch's result over `current` (the served form of
    /// the stored object): the top-level members the patch has no key for are `current`'s, which a
    /// stored built-in object has pruned and normalised already, so pruning passes over them and so
    /// does normalising where defaulting left them as they were. (Defaults may cross members: a Job
    /// without labels takes its template's.) Not for custom resources, whose schema may have changed
    /// since the object was stored, nor for kinds stored in another version. The result is
    /// `decode_object`'s, which debug builds check on every such patch.
    pub fn decode_merge_patched(
        &self,
        doc: Value,
        current: &Value,
        patch: &Value,
        warnings: &mut Vec<String>,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let over = match patch {
            Value::Object(p)
                if current.is_object()
                    && !self.strategy.converts()
                    && self.schema.as_ref().is_some_and(|t| !t.is_custom()) =>
            {
                Some(Unpatched { current, patch: p })
            }
            _ => None,
        };
        #[cfg(debug_assertions)]
        let full = over
            .is_some()
            .then(|| self.decode_object(doc.clone(), &mut Vec::new()));
        let out = self.decode_over(doc, over, warnings);
        #[cfg(debug_assertions)]
        if let Some(full) = full {
            match (&out, &full) {
                (Ok(a), Ok(b)) => debug_assert_eq!(a, b, "decoding a merge patch's result"),
                (Err(a), Err(b)) => debug_assert_eq!(a.message, b.message),
                _ => debug_assert!(
                    false,
                    "decoding a merge patch's result: {out:?} vs {full:?}"
                ),
            }
        }
        out
    }

    fn decode_over(
        &self,
        mut doc: Value,
        over: Option<Unpatched<'_>>,
        warnings: &mut Vec<String>,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let untouched = |k: &str| over.as_ref().is_some_and(|o| !o.patch.contains_key(k));
        let pruned = match &self.schema {
            Some(t) => crate::schema::prune_unknown_except(t, &mut doc, &untouched),
            None => Vec::new(),
        };
        warnings.extend(self.strategy.decode(&mut doc)?);
        self.strategy.default(&mut doc);
        if let Some(t) = &self.schema {
            if t.is_custom() {
                crate::schema::apply_crd_defaults(t, &mut doc);
            }
            let unchanged = |k: &str, v: &Value| {
                untouched(k) && over.as_ref().is_some_and(|o| o.current.get(k) == Some(v))
            };
            crate::schema::normalize_except(t.schema(), t.root(), &mut doc, &unchanged);
        }
        Ok((doc, pruned))
    }

    /// Validates a field selector against the kind's selectable fields and converts it to the labels the
    /// stored object is matched on.
    pub fn convert_field_selector(&self, f: &FieldSelector) -> Result<FieldSelector, ApiError> {
        let mut out = f.clone();
        for t in &mut out.terms {
            t.field = self
                .strategy
                .convert_field_label(&t.field)
                .map_err(ApiError::bad_request)?;
        }
        Ok(out)
    }

    /// The BOOKMARK body: the kind's Go zero value with only a resourceVersion.
    pub fn bookmark(&self, rv: u64) -> Value {
        let mut v = self
            .schema
            .as_ref()
            .map(|t| t.zero_value().clone())
            .unwrap_or_else(|| json!({}));
        if let Value::Object(m) = &mut v {
            m.insert("kind".into(), json!(self.info().kind));
            m.insert("apiVersion".into(), json!(self.info().api_version()));
            m.insert(
                "metadata".into(),
                json!({"resourceVersion": rv.to_string()}),
            );
        }
        v
    }
}

/// A merge patch's result is decoded over the object it patched: `patch`'s top-level keys name the
/// members it touched, the others are `current`'s.
struct Unpatched<'a> {
    current: &'a Value,
    patch: &'a Map<String, Value>,
}

/// `details` of a Status naming an object.
pub fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut m = Map::new();
    if !name.is_empty() {
        m.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        m.insert("group".into(), json!(group));
    }
    m.insert("kind".into(), json!(kind));
    Value::Object(m)
}

/// `details` with causes.
pub fn details_with_causes(name: &str, group: &str, kind: &str, causes: Value) -> Value {
    let mut d = details(name, group, kind);
    if let Value::Object(m) = &mut d {
        m.insert("causes".into(), causes);
    }
    d
}

type Key = (String, String, String);

/// Every served resource, by `(group, version, plural)`. Custom resources come and go at run time.
#[derive(Default)]
pub struct Registry {
    map: RwLock<Resources>,
}

/// The served resources, and how many of them each group has (every resource request asks whether
/// its group is served: one lookup instead of a sorted copy of the whole registry).
#[derive(Default)]
struct Resources {
    by_key: HashMap<Key, Arc<Served>>,
    per_group: HashMap<String, usize>,
}

impl Resources {
    fn insert(&mut self, key: Key, s: Arc<Served>) {
        let group = key.0.clone();
        if self.by_key.insert(key, s).is_none() {
            *self.per_group.entry(group).or_default() += 1;
        }
    }

    fn remove(&mut self, key: &Key) {
        if self.by_key.remove(key).is_some()
            && let Some(n) = self.per_group.get_mut(&key.0)
        {
            *n -= 1;
            if *n == 0 {
                self.per_group.remove(&key.0);
            }
        }
    }
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in kinds kubesim serves.
    pub fn with_builtins() -> Self {
        let r = Self::new();
        r.add(Served::builtin(Arc::new(
            crate::kinds::job::JobStrategy::new(),
        )));
        for s in crate::kinds::other_builtins() {
            r.add(Served::builtin(s));
        }
        r
    }

    pub fn add(&self, s: Served) -> Arc<Served> {
        let info = s.info();
        let key = (
            info.group.clone(),
            info.version.clone(),
            info.plural.clone(),
        );
        let s = Arc::new(s);
        self.write().insert(key, s.clone());
        s
    }

    pub fn remove(&self, group: &str, version: &str, plural: &str) {
        self.write()
            .remove(&(group.into(), version.into(), plural.into()));
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Served>> {
        self.read()
            .by_key
            .get(&(group.into(), version.into(), plural.into()))
            .cloned()
    }

    /// Whether any version of `group` is served.
    pub fn has_group(&self, group: &str) -> bool {
        self.read().per_group.contains_key(group)
    }

    /// Every served resource, sorted by group, version, plural.
    pub fn all(&self) -> Vec<Arc<Served>> {
        let mut v: Vec<_> = self
            .read()
            .by_key
            .iter()
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.into_iter().map(|(_, s)| s).collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Resources> {
        self.map.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Resources> {
        self.map.write().unwrap_or_else(|p| p.into_inner())
    }
}
