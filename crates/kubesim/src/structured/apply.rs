//! Server-side apply: the apply body, conflicts, merging the applied configuration and pruning
//! fields the manager no longer applies.

use super::*;

/// One apply conflict: a field the applier sets to a different value, owned by another manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager as messages name it (`"fm1"`, `"x" using batch/v1`).
    pub manager: String,
    /// The field (`.metadata.labels.owner`).
    pub field: String,
}

/// Why an apply was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    /// 400: the applied object's apiVersion/kind are not the resource's (`invalid object type: /, Kind=`).
    #[error("invalid object type: {0}")]
    InvalidObjectType(String),
    /// 400: the configuration carries managedFields.
    #[error("metadata.managedFields must be nil")]
    ManagedFieldsNotNil,
    /// 400: the body is neither YAML nor JSON.
    #[error("error decoding YAML: {0}")]
    BadYaml(String),
    /// 409: fields owned by other managers would change (use force to take them).
    #[error("{}", conflict_message(.0))]
    Conflicts(Vec<Conflict>),
    /// 500: the configuration does not fit the schema (unknown field, duplicate key in a list).
    #[error("{0}")]
    InvalidPatchObject(String),
}

fn conflict_message(conflicts: &[Conflict]) -> String {
    if conflicts.len() == 1 {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            conflicts[0].manager, conflicts[0].field
        );
    }
    let mut managers: Vec<&str> = Vec::new();
    for c in conflicts {
        if !managers.contains(&c.manager.as_str()) {
            managers.push(&c.manager);
        }
    }
    let mut lines = Vec::new();
    for m in managers {
        lines.push(format!("conflicts with {m}:"));
        for c in conflicts.iter().filter(|c| c.manager == m) {
            lines.push(format!("- {}", c.field));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

impl ApplyError {
    /// The `metav1.Status` the server answers with.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            ApplyError::InvalidObjectType(_)
            | ApplyError::ManagedFieldsNotNil
            | ApplyError::BadYaml(_) => ApiError::bad_request(self.to_string()),
            ApplyError::Conflicts(cs) => {
                let causes: Vec<Value> = cs
                    .iter()
                    .map(|c| {
                        json!({"reason": "FieldManagerConflict", "message": format!("conflict with {}", c.manager), "field": c.field})
                    })
                    .collect();
                ApiError::new(409, "Conflict", self.to_string())
                    .with_details(json!({ "causes": causes }))
            }
            ApplyError::InvalidPatchObject(m) => ApiError::bare(500, m.clone()),
        }
    }
}

/// The outcome of an apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The object to store (not yet defaulted), with its managedFields. When `changed` is false this is the
    /// live object with the (possibly updated) managedFields.
    pub object: Value,
    /// Whether the object itself (apart from managedFields) changed.
    pub changed: bool,
}

/// Parses an apply body (`application/apply-patch+yaml`: YAML, which includes JSON).
pub fn parse_apply_body(body: &[u8]) -> Result<Value, ApplyError> {
    let text = std::str::from_utf8(body).map_err(|e| ApplyError::BadYaml(e.to_string()))?;
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return Ok(v);
    }
    let v: Value = serde_saphyr::from_str(text).map_err(|e| ApplyError::BadYaml(e.to_string()))?;
    Ok(match v {
        Value::Null => Value::Object(Map::new()),
        v => v,
    })
}

/// `GroupVersionKind.String()` of an object's type meta (`batch/v1, Kind=Job`, `/v1, Kind=Secret`).
fn gvk_string(obj: &Value) -> String {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    format!("{group}/{version}, Kind={kind}")
}

/// `namespace/name; group/version, Kind=kind`, how field-manager errors name an object.
fn object_gvknn(obj: &Value) -> String {
    let meta = obj.get("metadata");
    let get = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    format!("{}/{}; {}", get("namespace"), get("name"), gvk_string(obj))
}

/// Server-side apply of `applied` (the parsed body) to `live` (`None` creates), owned by `mgr`.
///
/// Runs the field manager's apply path: the apiVersion/kind check, the first-apply bookkeeping of objects
/// without managedFields, the structured merge, removal of fields the applier applied before but no longer
/// applies (unless someone else owns them), conflict detection against other managers (overridden by
/// `force`, which takes the fields over), and the applier's `Apply` entry.
pub fn apply(
    t: &TypeRef,
    live: Option<&Value>,
    applied: &Value,
    mgr: &Manager<'_>,
    force: bool,
) -> Result<Applied, ApplyError> {
    apply_with(t, live, applied, mgr, force, None)
}

/// [`apply`] for resources served in several versions (see [`update_managed_fields_with`]).
pub fn apply_with(
    t: &TypeRef,
    live: Option<&Value>,
    applied: &Value,
    mgr: &Manager<'_>,
    force: bool,
    conv: Option<&dyn VersionConverter>,
) -> Result<Applied, ApplyError> {
    // versionCheckManager
    let expected = format!(
        "{}, Kind={}",
        match t.api_version().split_once('/') {
            Some((g, v)) => format!("{g}/{v}"),
            None => format!("/{}", t.api_version()),
        },
        t.kind()
    );
    let got = gvk_string(applied);
    if got != expected {
        return Err(ApplyError::InvalidObjectType(got));
    }
    let live_obj = live.unwrap_or_else(|| t.zero_value());
    let mut entries = decode(managed_fields_of(live_obj), false).unwrap_or_default();
    let mut live_for_apply = live_obj.clone();
    if entries.is_empty() {
        // skipNonAppliedManager: before the first apply, whatever is there is owned by
        // "before-first-apply" (nothing, for an apply that creates).
        let first = Manager {
            name: "before-first-apply",
            ..*mgr
        };
        entries = update_entries(t, t.zero_value(), live_obj, Vec::new(), &first, conv, false)
            .map_err(|e| {
                ApplyError::InvalidPatchObject(format!(
                    "failed to create manager for existing fields: {}",
                    typed::errors_text(&e)
                ))
            })?;
    }
    take_managed_fields(&mut live_for_apply);

    if applied
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApplyError::ManagedFieldsNotNil);
    }
    let schema = t.schema();
    let root = t.root();
    let invalid = |e: Vec<TypedError>| {
        ApplyError::InvalidPatchObject(format!(
            "failed to create typed patch object ({}): {}",
            object_gvknn(applied),
            typed::errors_text(&e)
        ))
    };
    let config_set = typed::to_field_set(schema, root, applied, false).map_err(invalid)?;
    let merged = typed::merge(schema, root, &live_for_apply, applied)
        .map_err(|e| {
            ApplyError::InvalidPatchObject(format!(
                "failed to merge config: {}",
                typed::errors_text(&e)
            ))
        })?
        .unwrap_or(Value::Null);

    let (name, sub) = (mgr.name(), mgr.subresource());
    let last = entries
        .iter()
        .position(|e| e.is(name, Operation::Apply, mgr.api_version, sub))
        .map(|i| entries[i].set.clone());
    let reset = reset_set(t, mgr.subresource);
    let set = config_set.recursive_difference(&reset);
    match entries
        .iter_mut()
        .find(|e| e.is(name, Operation::Apply, mgr.api_version, sub))
    {
        Some(e) => {
            e.set = set;
            e.api_version = mgr.api_version.to_string();
        }
        None => entries.push(Entry {
            manager: name.to_string(),
            operation: Operation::Apply,
            api_version: mgr.api_version.to_string(),
            subresource: sub.to_string(),
            time: None,
            set,
        }),
    }
    let merged = prune(t, merged, &entries, last.as_ref()).map_err(invalid)?;

    // Conflicts and releases against every other manager (the applier itself is skipped).
    let mut cmp = typed::compare(schema, root, &live_for_apply, &merged).map_err(invalid)?;
    cmp.exclude(&reset);
    let changed = cmp.modified.union(&cmp.added);
    let me = |e: &Entry| e.is(name, Operation::Apply, mgr.api_version, sub);
    let mut other_versions = OtherVersions {
        conv,
        live: &live_for_apply,
        new: &merged,
        subresource: mgr.subresource,
        cache: Vec::new(),
    };
    if !force {
        let mut conflicts: Vec<(String, Conflict)> = Vec::new();
        for e in entries.iter().filter(|e| !me(e)) {
            let theirs = if e.api_version == mgr.api_version {
                &changed
            } else {
                match other_versions.sets(&e.api_version) {
                    Some((c, _)) => c,
                    None => continue,
                }
            };
            let c = e.set.intersection(theirs);
            for p in c.paths() {
                conflicts.push((
                    e.identifier(),
                    Conflict {
                        manager: e.printable(),
                        field: path_string(&p),
                    },
                ));
            }
        }
        if !conflicts.is_empty() {
            conflicts.sort_by(|a, b| a.0.cmp(&b.0));
            return Err(ApplyError::Conflicts(
                conflicts.into_iter().map(|(_, c)| c).collect(),
            ));
        }
    }
    let mut others: Vec<Entry> = Vec::new();
    let mut mine: Option<Entry> = None;
    for e in entries {
        if me(&e) {
            mine = Some(e);
        } else {
            others.push(e);
        }
    }
    release(
        &mut others,
        &changed,
        &cmp.removed,
        mgr.api_version,
        &mut other_versions,
    );
    let changed_object = !typed_equal(&live_for_apply, &merged);
    if let Some(mut m) = mine {
        // stripMetaManager, then managedFieldsUpdater stamps the time only when the object changed.
        m.set = m.set.difference(&STRIP);
        if !m.set.is_empty() {
            if changed_object {
                m.time = Some(mgr.now.to_string());
            }
            others.push(m);
        }
    }
    let mut object = if changed_object {
        merged
    } else {
        live_for_apply
    };
    set_managed_fields(&mut object, encode(others));
    Ok(Applied {
        object,
        changed: changed_object,
    })
}

fn typed_equal(a: &Value, b: &Value) -> bool {
    value::equal(a, b)
}

/// `Updater.prune`: removes what the applier applied last time but not this time, unless another manager
/// (or this apply) owns it.
fn prune(
    t: &TypeRef,
    merged: Value,
    entries: &[Entry],
    last: Option<&FieldSet>,
) -> Result<Value, Vec<TypedError>> {
    let Some(last) = last.filter(|s| !s.is_empty()) else {
        return Ok(merged);
    };
    let (schema, root) = (t.schema(), t.root());
    let ensure = |s: &FieldSet| s.ensure_named_fields_are_members(schema, root);
    let pruned = typed::remove_items(schema, root, &merged, &ensure(last));
    // addBackOwnedItems: anything still owned by someone comes back.
    let mut managed = FieldSet::new();
    for e in entries {
        managed = managed.union(&e.set);
    }
    let merged_set = typed::to_field_set(schema, root, &merged, true)?;
    let pruned_set = typed::to_field_set(schema, root, &pruned, true)?;
    let keep = ensure(&pruned_set).union(&ensure(&managed));
    let pruned = typed::remove_items(
        schema,
        root,
        &merged,
        &ensure(&merged_set).difference(&keep),
    );
    // addBackDanglingItems: only what the applier owned last time may go.
    let pruned_set = ensure(&typed::to_field_set(schema, root, &pruned, true)?);
    let remove = ensure(&merged_set)
        .difference(&pruned_set)
        .intersection(&ensure(last));
    Ok(typed::remove_items(schema, root, &merged, &remove))
}
