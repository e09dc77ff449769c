//! Schema-driven walks over values, ported in behaviour from structured-merge-diff's `typed` package:
//! compare (which fields an update added, modified, removed), merge (apply a configuration over the live
//! object), remove items (prune), and the field set a value mentions.
//!
//! Every walk follows the same rules: a value is matched against the type's form that fits it (map, scalar,
//! list; untyped types carry several); atomic lists and maps, and lists/maps that are empty or null on both
//! sides, are leaves compared as a whole; associative lists are walked item by item, identified by their keys
//! (`k:{...}`) or, for sets, their value (`v:...`). `metadata.managedFields` is never part of a walk (the
//! field manager removes it before comparing).

use serde_json::{Map, Value};

use super::fieldset::FieldSet;
use super::value::{field_key, list_item_key};
use crate::schema::Schema;
use crate::schema::model::{ListDef, ListKind, MapDef, TypeDef, TypeId};

pub use super::compare::{Comparison, compare, compare_changes};

/// Which forms of a type apply to a value (`deduceAtom`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Atom {
    pub(super) scalar: bool,
    pub(super) list: bool,
    pub(super) map: bool,
}

pub(super) fn full_atom(def: &TypeDef) -> Atom {
    Atom {
        scalar: def.scalar.is_some(),
        list: def.list.is_some(),
        map: def.map.is_some(),
    }
}

pub(super) fn deduce(def: &TypeDef, v: Option<&Value>) -> Atom {
    let full = full_atom(def);
    match v {
        Some(Value::Number(_) | Value::String(_) | Value::Bool(_)) if full.scalar => Atom {
            scalar: true,
            list: false,
            map: false,
        },
        Some(Value::Array(_)) if full.list => Atom {
            scalar: false,
            list: true,
            map: false,
        },
        Some(Value::Object(_)) if full.map => Atom {
            scalar: false,
            list: false,
            map: true,
        },
        _ => full,
    }
}

/// `metadata.managedFields` at the object root: skipped by every walk.
pub(super) fn skipped(path: &[String], key: &str) -> bool {
    key == "managedFields" && path.len() == 1 && path[0] == "f:metadata"
}

/// Typed-value errors, worded like structured-merge-diff's `ValidationError` (`.spec.x: message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedError {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for TypedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// `ValidationErrors.Error()`: one error bare, several as an indented list.
pub fn errors_text(errs: &[TypedError]) -> String {
    if errs.len() == 1 {
        return errs[0].to_string();
    }
    let mut lines = vec!["errors:".to_string()];
    lines.extend(errs.iter().map(|e| format!("  {e}")));
    lines.join("\n")
}

pub(super) fn error_at(path: &[String], message: impl Into<String>) -> TypedError {
    TypedError {
        path: super::value::path_string(path),
        message: message.into(),
    }
}

pub(super) fn as_list(v: Option<&Value>) -> Option<&Vec<Value>> {
    match v {
        Some(Value::Array(a)) => Some(a),
        _ => None,
    }
}

pub(super) fn as_map(v: Option<&Value>) -> Option<&Map<String, Value>> {
    match v {
        Some(Value::Object(m)) => Some(m),
        _ => None,
    }
}

pub(super) fn child_type(m: &MapDef, key: &str) -> Option<TypeId> {
    m.field(key).map(|f| f.ty).or(m.elem)
}

// ---------------------------------------------------------------------------------------------------------
// Merge (apply: the configuration over the live object, configuration values winning)

/// Merges `rhs` (the applied configuration) into `lhs` (the live object). `None` when nothing is left.
pub fn merge(
    schema: &Schema,
    ty: TypeId,
    lhs: &Value,
    rhs: &Value,
) -> Result<Option<Value>, Vec<TypedError>> {
    let mut w = Merger {
        schema,
        path: Vec::new(),
        errors: Vec::new(),
    };
    let out = w.merge(ty, Some(lhs), Some(rhs));
    if w.errors.is_empty() {
        Ok(out)
    } else {
        Err(w.errors)
    }
}

/// A list's path elements in item order and the item of each distinct element.
type IndexedItems = (Vec<String>, Vec<(String, Value)>);

struct Merger<'a> {
    schema: &'a Schema,
    path: Vec<String>,
    errors: Vec<TypedError>,
}

impl Merger<'_> {
    fn merge(&mut self, ty: TypeId, lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
        let schema = self.schema;
        let def = schema.get(ty);
        let full = full_atom(def);
        if !full.map && !full.scalar && !full.list {
            self.errors
                .push(error_at(&self.path, "field not declared in schema"));
            return None;
        }
        let al = deduce(def, lhs);
        let ar = deduce(def, rhs);
        let atom = if rhs.is_none() {
            al
        } else if lhs.is_none() || al == ar {
            ar
        } else {
            // The form changed: the left form is only walked for its errors in Go; the result comes from
            // the right.
            ar
        };
        let mut in_leaf = false;
        if atom.map {
            match &def.map {
                Some(m) => self.do_map(m, lhs, rhs, &mut in_leaf),
                None => None,
            }
        } else if atom.scalar {
            self.do_leaf(lhs, rhs, &mut in_leaf)
        } else if atom.list {
            match &def.list {
                Some(l) => self.do_list(l, lhs, rhs, &mut in_leaf),
                None => None,
            }
        } else {
            None
        }
    }

    /// `ruleKeepRHS`.
    fn do_leaf(
        &mut self,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        in_leaf: &mut bool,
    ) -> Option<Value> {
        if *in_leaf {
            return None;
        }
        *in_leaf = true;
        rhs.or(lhs).cloned()
    }

    fn do_list(
        &mut self,
        l: &ListDef,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        in_leaf: &mut bool,
    ) -> Option<Value> {
        let ll = as_list(lhs);
        let rl = as_list(rhs);
        let empty = ll.is_none_or(|a| a.is_empty()) && rl.is_none_or(|a| a.is_empty());
        if l.kind == ListKind::Atomic || empty {
            return self.do_leaf(lhs, rhs, in_leaf);
        }
        if ll.is_none() && rl.is_none() {
            return None;
        }
        self.visit_list_items(l, ll, rl)
    }

    /// The path elements of a list's items in order, and each element's item (null for duplicated
    /// elements); `None` after an error (recorded).
    fn keys_of(
        &mut self,
        l: &ListDef,
        items: Option<&Vec<Value>>,
        allow_duplicates: bool,
    ) -> Option<IndexedItems> {
        let mut pes = Vec::new();
        let mut observed: Vec<(String, Value)> = Vec::new();
        let mut failed = false;
        if let Some(items) = items {
            for (i, item) in items.iter().enumerate() {
                match list_item_key(l, item) {
                    Ok(k) => {
                        if let Some(slot) = observed.iter_mut().find(|(o, _)| *o == k) {
                            if !allow_duplicates {
                                self.errors.push(error_at(
                                    &self.path,
                                    format!(
                                        "duplicate entries for key {}",
                                        super::value::PathElement::parse(&k)
                                    ),
                                ));
                                failed = true;
                                continue;
                            }
                            // Duplicated items are not merged with the configuration: they become null.
                            slot.1 = Value::Null;
                        } else {
                            observed.push((k.clone(), item.clone()));
                        }
                        pes.push(k);
                    }
                    Err(e) => {
                        self.errors
                            .push(error_at(&self.path, format!("element {i}: {e}")));
                        failed = true;
                    }
                }
            }
        }
        if failed { None } else { Some((pes, observed)) }
    }

    fn visit_list_items(
        &mut self,
        l: &ListDef,
        ll: Option<&Vec<Value>>,
        rl: Option<&Vec<Value>>,
    ) -> Option<Value> {
        let (rhs_pes, observed_rhs) = self.keys_of(l, rl, false)?;
        let (lhs_pes, observed_lhs) = self.keys_of(l, ll, true)?;
        let get = |obs: &[(String, Value)], k: &str| -> Option<Value> {
            obs.iter().find(|(o, _)| o == k).map(|(_, v)| v.clone())
        };
        let has = |obs: &[(String, Value)], k: &str| obs.iter().any(|(o, _)| o == k);
        let mut shared: std::collections::VecDeque<String> = rhs_pes
            .iter()
            .filter(|pe| has(&observed_lhs, pe))
            .cloned()
            .collect();
        let mut next_shared = shared.pop_front();
        let mut merged_rhs: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut out = Vec::new();
        let (l_len, r_len) = (lhs_pes.len(), rhs_pes.len());
        let (mut li, mut ri) = (0, 0);
        let lhs_items = ll.map(|v| v.as_slice()).unwrap_or(&[]);
        while li < l_len || ri < r_len {
            if li < l_len && ri < r_len {
                let pe = lhs_pes[li].clone();
                if pe == rhs_pes[ri] {
                    merged_rhs.insert(pe.clone());
                    let lc = get(&observed_lhs, &pe);
                    let rc = get(&observed_rhs, &pe);
                    if let Some(v) = self.merge_item(l, &pe, lc.as_ref(), rc.as_ref()) {
                        out.push(v);
                    }
                    li += 1;
                    ri += 1;
                    next_shared = shared.pop_front();
                    continue;
                }
                if has(&observed_rhs, &pe) && next_shared.as_ref().is_some_and(|n| *n != pe) {
                    // A shared item, but not the one this round waits for.
                    li += 1;
                    continue;
                }
            }
            if li < l_len {
                let pe = lhs_pes[li].clone();
                if !has(&observed_rhs, &pe) {
                    // Take the live item itself (observed may hold null for duplicates).
                    let lc = lhs_items.get(li).cloned();
                    if let Some(v) = self.merge_item(l, &pe, lc.as_ref(), None) {
                        out.push(v);
                    }
                    li += 1;
                    continue;
                } else if merged_rhs.contains(&pe) {
                    li += 1;
                }
            }
            if ri < r_len {
                let pe = rhs_pes[ri].clone();
                merged_rhs.insert(pe.clone());
                let lc = get(&observed_lhs, &pe);
                let rc = get(&observed_rhs, &pe);
                if let Some(v) = self.merge_item(l, &pe, lc.as_ref(), rc.as_ref()) {
                    out.push(v);
                }
                ri += 1;
                if next_shared.as_ref() == Some(&pe) {
                    next_shared = shared.pop_front();
                }
            }
        }
        if out.is_empty() {
            None
        } else {
            Some(Value::Array(out))
        }
    }

    fn merge_item(
        &mut self,
        l: &ListDef,
        pe: &str,
        lc: Option<&Value>,
        rc: Option<&Value>,
    ) -> Option<Value> {
        self.path.push(pe.to_string());
        let v = self.merge(l.elem, lc, rc);
        self.path.pop();
        v
    }

    fn do_map(
        &mut self,
        m: &MapDef,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        in_leaf: &mut bool,
    ) -> Option<Value> {
        let lm = as_map(lhs);
        let rm = as_map(rhs);
        let empty = lm.is_none_or(|x| x.is_empty()) && rm.is_none_or(|x| x.is_empty());
        if m.atomic || empty {
            return self.do_leaf(lhs, rhs, in_leaf);
        }
        if lm.is_none() && rm.is_none() {
            return None;
        }
        let empty_map = Map::new();
        let lm = lm.unwrap_or(&empty_map);
        let rm = rm.unwrap_or(&empty_map);
        let mut out = Map::new();
        let keys: std::collections::BTreeSet<&String> = lm.keys().chain(rm.keys()).collect();
        for key in keys {
            if skipped(&self.path, key) {
                continue;
            }
            self.path.push(field_key(key));
            let v = match child_type(m, key) {
                Some(t) => self.merge(t, lm.get(key), rm.get(key)),
                None => {
                    self.errors
                        .push(error_at(&self.path, "field not declared in schema"));
                    None
                }
            };
            self.path.pop();
            if let Some(v) = v {
                out.insert(key.clone(), v);
            }
        }
        if out.is_empty() {
            None
        } else {
            Some(Value::Object(out))
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// RemoveItems

/// Removes the members of `items` (whole subtrees) from `v` (`TypedValue.RemoveItems`). Containers left
/// empty by the removal disappear.
pub fn remove_items(schema: &Schema, ty: TypeId, v: &Value, items: &FieldSet) -> Value {
    remove(schema, ty, v, items).unwrap_or(Value::Null)
}

/// `removingWalker`: `None` stands for Go's nil output, which the caller stores as null (a container
/// emptied by the removal stays as a null field; the Go round trip then drops it).
fn remove(schema: &Schema, ty: TypeId, v: &Value, items: &FieldSet) -> Option<Value> {
    let def = schema.get(ty);
    let atom = deduce(def, Some(v));
    if atom.map
        && let Some(md) = &def.map
    {
        let Value::Object(m) = v else {
            return None;
        };
        if m.is_empty() || md.atomic {
            return None;
        }
        let mut out = Map::new();
        for (k, child) in m {
            let key = field_key(k);
            if items.has(std::slice::from_ref(&key)) {
                continue;
            }
            let sub = items.child(&key);
            let fty = child_type(md, k);
            let nv = match (sub.is_empty(), fty) {
                (false, Some(t)) => remove(schema, t, child, &sub).unwrap_or(Value::Null),
                _ => child.clone(),
            };
            out.insert(k.clone(), nv);
        }
        return if out.is_empty() {
            None
        } else {
            Some(Value::Object(out))
        };
    }
    if atom.scalar {
        return Some(v.clone());
    }
    if atom.list
        && let Some(l) = &def.list
    {
        let Value::Array(a) = v else {
            return None;
        };
        if a.is_empty() || l.kind == ListKind::Atomic {
            return None;
        }
        let mut out = Vec::new();
        for item in a {
            let key = list_item_key(l, item).unwrap_or_default();
            if items.has(std::slice::from_ref(&key)) {
                continue;
            }
            let sub = items.child(&key);
            let nv = if sub.is_empty() {
                item.clone()
            } else {
                remove(schema, l.elem, item, &sub).unwrap_or(Value::Null)
            };
            out.push(nv);
        }
        return if out.is_empty() {
            None
        } else {
            Some(Value::Array(out))
        };
    }
    Some(v.clone())
}

// ---------------------------------------------------------------------------------------------------------
// ToFieldSet

/// Every leaf field and list item `v` mentions (`TypedValue.ToFieldSet`). `allow_duplicates` is false for
/// an applied configuration (duplicate keys are an error there).
pub fn to_field_set(
    schema: &Schema,
    ty: TypeId,
    v: &Value,
    allow_duplicates: bool,
) -> Result<FieldSet, Vec<TypedError>> {
    let mut w = ToSet {
        schema,
        path: Vec::new(),
        set: FieldSet::new(),
        errors: Vec::new(),
        allow_duplicates,
    };
    w.walk(ty, v);
    if w.errors.is_empty() {
        Ok(w.set)
    } else {
        Err(w.errors)
    }
}

struct ToSet<'a> {
    schema: &'a Schema,
    path: Vec<String>,
    set: FieldSet,
    errors: Vec<TypedError>,
    allow_duplicates: bool,
}

impl ToSet<'_> {
    fn walk(&mut self, ty: TypeId, v: &Value) {
        let schema = self.schema;
        let def = schema.get(ty);
        let atom = deduce(def, Some(v));
        if !atom.map && !atom.scalar && !atom.list {
            self.errors
                .push(error_at(&self.path, "field not declared in schema"));
            return;
        }
        if atom.map
            && let Some(md) = &def.map
        {
            if md.atomic {
                self.set.insert(&self.path);
                return;
            }
            let Value::Object(m) = v else { return };
            for (k, child) in m {
                if skipped(&self.path, k) {
                    continue;
                }
                self.path.push(field_key(k));
                match child_type(md, k) {
                    Some(t) => {
                        self.walk(t, child);
                        let empty_map = matches!(child, Value::Object(c) if c.is_empty());
                        if child.is_null() || empty_map || md.field(k).is_none() {
                            self.set.insert(&self.path);
                        }
                    }
                    None => self
                        .errors
                        .push(error_at(&self.path, "field not declared in schema")),
                }
                self.path.pop();
            }
        } else if atom.scalar {
            self.set.insert(&self.path);
        } else if atom.list
            && let Some(l) = &def.list
        {
            if l.kind == ListKind::Atomic {
                self.set.insert(&self.path);
                return;
            }
            let Value::Array(items) = v else { return };
            let mut seen: Vec<String> = Vec::with_capacity(items.len());
            let mut dups: Vec<String> = Vec::new();
            let mut keys: Vec<Option<String>> = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match list_item_key(l, item) {
                    Ok(k) => {
                        if seen.contains(&k) {
                            if !dups.contains(&k) {
                                if !self.allow_duplicates {
                                    self.errors.push(error_at(
                                        &self.path,
                                        format!(
                                            "duplicate entries for key {}",
                                            super::value::PathElement::parse(&k)
                                        ),
                                    ));
                                }
                                self.path.push(k.clone());
                                self.set.insert(&self.path);
                                self.path.pop();
                                dups.push(k.clone());
                            }
                        } else {
                            seen.push(k.clone());
                        }
                        keys.push(Some(k));
                    }
                    Err(e) => {
                        self.errors
                            .push(error_at(&self.path, format!("element {i}: {e}")));
                        keys.push(None);
                    }
                }
            }
            for (item, k) in items.iter().zip(keys) {
                let Some(k) = k else { continue };
                if dups.contains(&k) {
                    continue;
                }
                self.path.push(k);
                self.walk(l.elem, item);
                self.set.insert(&self.path);
                self.path.pop();
            }
        }
    }
}
