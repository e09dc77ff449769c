//! The patcher: merges maps and lists by the schema's patch strategies and merge keys.

use super::lists::{
    deduplicate_scalars, delete_from_slice, find_by_key, merge_special_elements,
    normalize_element_order, partition_maps, partition_primitives, slice_element_kind,
    validate_set_order,
};
use super::*;

pub(super) struct Patcher<'a> {
    pub(super) schema: &'a Schema,
}

impl Patcher<'_> {
    fn struct_name(&self, ty: Option<TypeId>) -> String {
        ty.and_then(|t| self.schema.get(t).name.as_deref())
            .unwrap_or("")
            .to_string()
    }

    /// `LookupPatchMetadataForStruct`: the type and patch metadata of field `key` of `ty`.
    fn lookup_struct(
        &self,
        ty: Option<TypeId>,
        key: &str,
    ) -> Result<(Option<TypeId>, PatchMeta), PatchError> {
        let Some(t) = ty else {
            return Ok((None, PatchMeta::default()));
        };
        let def = self.schema.get(t);
        match &def.map {
            Some(m) => match m.field(key) {
                Some(f) => Ok((Some(f.ty), f.patch.clone())),
                None => match m.elem {
                    Some(e) => Ok((Some(e), PatchMeta::default())),
                    None => Err(PatchError::Internal(format!(
                        "unable to find api field in struct {} for the json field {}",
                        self.struct_name(ty),
                        crate::errors::go_quote(key)
                    ))),
                },
            },
            None if def.scalar.is_some() || def.list.is_some() => Err(PatchError::Internal(
                "merging an object in json but data type is not map or struct".to_string(),
            )),
            None => Ok((None, PatchMeta::default())),
        }
    }

    /// `LookupPatchMetadataForSlice`: the element type of list field `key`.
    fn lookup_slice(
        &self,
        ty: Option<TypeId>,
        key: &str,
    ) -> Result<(Option<TypeId>, PatchMeta), PatchError> {
        let (sub, meta) = self.lookup_struct(ty, key)?;
        let elem = sub.and_then(|s| self.schema.get(s).list.as_ref().map(|l| l.elem));
        Ok((elem, meta))
    }

    pub(super) fn merge_map(
        &self,
        mut original: Map<String, Value>,
        mut patch: Map<String, Value>,
        ty: Option<TypeId>,
    ) -> Result<Map<String, Value>, PatchError> {
        if let Some(d) = patch.get(DIRECTIVE) {
            return match d.as_str() {
                Some("replace") => {
                    patch.remove(DIRECTIVE);
                    Ok(patch)
                }
                Some("delete") => Ok(Map::new()),
                _ => Err(PatchError::Internal(format!(
                    "unknown patch type: {} in map: {}",
                    go_v(d),
                    go_map_v(&patch)
                ))),
            };
        }
        self.apply_retain_keys(&mut original, &mut patch)?;
        self.merge_set_element_order(&mut original, &mut patch, ty)?;
        for (k, patch_v) in patch {
            let (key, is_delete) = if k.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
                (
                    extract_key(&k, DELETE_FROM_PRIMITIVE_LIST, ERR_BAD_PRIMITIVE_LIST)?
                        .to_string(),
                    true,
                )
            } else {
                (k, false)
            };
            if patch_v.is_null() {
                original.remove(&key);
                continue;
            }
            let same_kind = original.get(&key).map(|o| kind(o) == kind(&patch_v));
            match same_kind {
                None | Some(false) => {
                    // Not in the original, or a different type: take the patch value (minus directives
                    // and nulls). A deletion list for a missing list does nothing.
                    if !is_delete {
                        let mut v = patch_v;
                        discard_nulls(&mut v);
                        match remove_directives(v) {
                            Some(v) => {
                                original.insert(key, v);
                            }
                            None => {
                                original.remove(&key);
                            }
                        }
                    }
                }
                Some(true) => {
                    let orig_v = original.remove(&key).unwrap_or(Value::Null);
                    let merged = match (orig_v, patch_v) {
                        (Value::Object(o), Value::Object(p)) => {
                            let (sub, meta) = self.lookup_struct(ty, &key)?;
                            let (_, strategy) = split_strategies(&meta)?;
                            if strategy == "replace" {
                                Some(Value::Object(p))
                            } else {
                                Some(Value::Object(self.merge_map(o, p, sub)?))
                            }
                        }
                        (Value::Array(o), Value::Array(p)) => {
                            let (elem, meta) = self.lookup_slice(ty, &key)?;
                            let (_, strategy) = split_strategies(&meta)?;
                            let merge_key = meta.merge_key.as_deref().unwrap_or("");
                            if strategy == "merge" || is_delete {
                                Some(Value::Array(
                                    self.merge_slice(o, p, elem, merge_key, is_delete)?,
                                ))
                            } else {
                                Some(Value::Array(p))
                            }
                        }
                        (_, p) => remove_directives(p),
                    };
                    if let Some(v) = merged {
                        original.insert(key, v);
                    }
                }
            }
        }
        Ok(original)
    }

    /// `applyRetainKeysDirective`.
    fn apply_retain_keys(
        &self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
    ) -> Result<(), PatchError> {
        let Some(retain) = patch.remove(RETAIN_KEYS) else {
            return Ok(());
        };
        let Value::Array(list) = retain else {
            return Err(bad(ERR_BAD_RETAIN_KEYS));
        };
        let keep: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
        for (k, v) in patch.iter() {
            if v.is_null()
                || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
                || k.starts_with(SET_ELEMENT_ORDER)
            {
                continue;
            }
            if !keep.contains(&k.as_str()) {
                return Err(bad(ERR_BAD_RETAIN_KEYS));
            }
        }
        original.retain(|k, _| keep.contains(&k.as_str()));
        Ok(())
    }

    /// `mergePatchIntoOriginal`: lists with a `$setElementOrder/<field>` directive are merged here and
    /// ordered by it.
    fn merge_set_element_order(
        &self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
        ty: Option<TypeId>,
    ) -> Result<(), PatchError> {
        let keys: Vec<String> = patch
            .keys()
            .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
            .cloned()
            .collect();
        for key in keys {
            let Some(order_v) = patch.remove(&key) else {
                continue;
            };
            let Value::Array(order) = order_v else {
                return Err(bad_arg_type("[]interface {}", &order_v));
            };
            let original_key =
                extract_key(&key, SET_ELEMENT_ORDER, ERR_BAD_SET_ELEMENT_ORDER)?.to_string();
            let original_list = match original.get(&original_key) {
                None => None,
                Some(Value::Array(a)) => Some(a.clone()),
                Some(other) => return Err(bad_arg_type("[]interface {}", other)),
            };
            let patch_list = match patch.get(&original_key) {
                None => None,
                Some(Value::Array(a)) => Some(a.clone()),
                Some(other) => return Err(bad_arg_type("[]interface {}", other)),
            };
            let (elem, meta) = self.lookup_slice(ty, &original_key)?;
            let (_, strategy) = split_strategies(&meta)?;
            let merge_key = meta.merge_key.as_deref().unwrap_or("");
            validate_set_order(patch_list.as_deref().unwrap_or(&[]), &order, merge_key)?;
            let merged = match (&original_list, &patch_list) {
                (Some(o), None) => o.clone(),
                (None, Some(p)) => match remove_directives(Value::Array(p.clone())) {
                    Some(Value::Array(a)) => a,
                    _ => continue,
                },
                (Some(o), Some(p)) => {
                    if strategy == "merge" {
                        self.merge_slice(o.clone(), p.clone(), elem, merge_key, false)?
                    } else {
                        p.clone()
                    }
                }
                (None, None) => continue,
            };
            let (patch_items, server_only) = if merge_key.is_empty() {
                partition_primitives(&merged, &order)
            } else {
                partition_maps(&merged, &order, merge_key)?
            };
            let elem_kind = slice_element_kind(&[
                original_list.as_deref().unwrap_or(&[]),
                patch_list.as_deref().unwrap_or(&[]),
            ])?;
            let both = normalize_element_order(
                patch_items,
                server_only,
                &order,
                original_list.as_deref().unwrap_or(&[]),
                merge_key,
                elem_kind,
            )?;
            original.insert(original_key.clone(), Value::Array(both));
            patch.remove(&original_key);
        }
        Ok(())
    }

    fn merge_slice(
        &self,
        original: Vec<Value>,
        patch: Vec<Value>,
        elem: Option<TypeId>,
        merge_key: &str,
        is_delete: bool,
    ) -> Result<Vec<Value>, PatchError> {
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        let k = slice_element_kind(&[&original, &patch])?;
        let (original, patch, merged) = if k != Kind::Map {
            if is_delete {
                return Ok(delete_from_slice(&original, &patch));
            }
            let mut both = original.clone();
            both.extend(patch.iter().cloned());
            let merged = deduplicate_scalars(both);
            (original, patch, merged)
        } else {
            if merge_key.is_empty() {
                return Err(PatchError::Internal(format!(
                    "cannot merge lists without merge key for {}",
                    self.struct_name(elem)
                )));
            }
            let (original, patch) = merge_special_elements(original, patch, merge_key)?;
            let merged = self.merge_without_special(original.clone(), &patch, merge_key, elem)?;
            (original, patch, merged)
        };
        let (patch_items, server_only) = if merge_key.is_empty() {
            partition_primitives(&merged, &patch)
        } else {
            partition_maps(&merged, &patch, merge_key)?
        };
        normalize_element_order(patch_items, server_only, &patch, &original, merge_key, k)
    }

    /// `mergeSliceWithoutSpecialElements`.
    fn merge_without_special(
        &self,
        mut original: Vec<Value>,
        patch: &[Value],
        merge_key: &str,
        elem: Option<TypeId>,
    ) -> Result<Vec<Value>, PatchError> {
        for v in patch {
            let Value::Object(pm) = v else {
                return Err(bad_arg_type("map[string]interface {}", v));
            };
            let Some(mv) = pm.get(merge_key) else {
                return Err(no_merge_key(pm, merge_key));
            };
            match find_by_key(&original, merge_key, mv)? {
                Some(i) => {
                    let om = match std::mem::take(&mut original[i]) {
                        Value::Object(m) => m,
                        _ => Map::new(),
                    };
                    original[i] = Value::Object(self.merge_map(om, pm.clone(), elem)?);
                }
                None => original.push(v.clone()),
            }
        }
        Ok(original)
    }
}
