//! DELETE, DELETECOLLECTION and the namespace finalize call, with delete options and preconditions.

use super::*;

impl Api {
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
