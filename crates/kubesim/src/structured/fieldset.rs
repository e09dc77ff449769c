//! Sets of field paths (structured-merge-diff `fieldpath.Set`), kept directly in their FieldsV1 form.
//!
//! A set is a JSON object whose keys are serialized path elements (`f:spec`, `k:{"name":"main"}`,
//! `v:"x"`, `i:0`). A child node is an object: the path ending there is a member of the set when the
//! node is empty (`{}`) or has a `"."` key; its other keys are the node's own children. Working on this form
//! avoids converting every manager's FieldsV1 to a tree and back on each write: a status update that only
//! touches `.status` leaves the other managers' entries untouched, byte for byte.
//!
//! Invariant: no node is both a non-member and childless (such a node would read back as a member).

use serde_json::{Map, Value};

use super::value::PathElement;
use crate::schema::Schema;
use crate::schema::model::TypeId;

/// A set of field paths.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSet(pub(crate) Map<String, Value>);

const DOT: &str = ".";

fn empty_node() -> Value {
    Value::Object(Map::new())
}

/// Whether the path ending at `node` is a member of the set.
fn is_member(node: &Value) -> bool {
    match node {
        Value::Object(m) => m.is_empty() || m.contains_key(DOT),
        // Malformed (non-object) nodes read as leaves, like a `{}`.
        _ => true,
    }
}

fn children(node: &Value) -> Option<&Map<String, Value>> {
    match node {
        Value::Object(m) if m.keys().any(|k| k != DOT) => Some(m),
        _ => None,
    }
}

/// Adds a node to `out` from its parts, keeping the invariant.
fn emit(out: &mut Map<String, Value>, key: &str, member: bool, kids: Map<String, Value>) {
    if kids.is_empty() {
        if member {
            out.insert(key.to_string(), empty_node());
        }
        return;
    }
    let mut node = kids;
    if member {
        node.insert(DOT.to_string(), empty_node());
    }
    out.insert(key.to_string(), Value::Object(node));
}

/// The children of `node` without its `"."` marker, as a set.
fn child_set(node: &Value) -> Map<String, Value> {
    match node {
        Value::Object(m) => m
            .iter()
            .filter(|(k, _)| k.as_str() != DOT)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        _ => Map::new(),
    }
}

fn union(a: &Map<String, Value>, b: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, na) in a {
        if k == DOT {
            continue;
        }
        match b.get(k) {
            None => {
                out.insert(k.clone(), na.clone());
            }
            Some(nb) => {
                let kids = match (children(na), children(nb)) {
                    (Some(x), Some(y)) => union(x, y),
                    (Some(_), None) => child_set(na),
                    (None, Some(_)) => child_set(nb),
                    (None, None) => Map::new(),
                };
                emit(&mut out, k, is_member(na) || is_member(nb), kids);
            }
        }
    }
    for (k, nb) in b {
        if k != DOT && !a.contains_key(k) {
            out.insert(k.clone(), nb.clone());
        }
    }
    out
}

fn intersection(a: &Map<String, Value>, b: &Map<String, Value>) -> Map<String, Value> {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let mut out = Map::new();
    for (k, ns) in small {
        if k == DOT {
            continue;
        }
        let Some(nl) = large.get(k) else { continue };
        let kids = match (children(ns), children(nl)) {
            (Some(x), Some(y)) => intersection(x, y),
            _ => Map::new(),
        };
        emit(&mut out, k, is_member(ns) && is_member(nl), kids);
    }
    out
}

/// `Set.Difference`: members of `a` not in `b`; a child subtree is only reduced where `b` has children
/// at the same element (parent - child = parent).
fn difference(a: &Map<String, Value>, b: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, na) in a {
        if k == DOT {
            continue;
        }
        match b.get(k) {
            None => {
                out.insert(k.clone(), na.clone());
            }
            Some(nb) => {
                let kids = match (children(na), children(nb)) {
                    (Some(x), Some(y)) => difference(x, y),
                    (Some(_), None) => child_set(na),
                    _ => Map::new(),
                };
                emit(&mut out, k, is_member(na) && !is_member(nb), kids);
            }
        }
    }
    out
}

/// `Set.RecursiveDifference`: like difference, but a member of `b` removes the whole subtree of `a`.
fn recursive_difference(a: &Map<String, Value>, b: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, na) in a {
        if k == DOT {
            continue;
        }
        match b.get(k) {
            None => {
                out.insert(k.clone(), na.clone());
            }
            Some(nb) => {
                let kids = if is_member(nb) {
                    Map::new()
                } else {
                    match (children(na), children(nb)) {
                        (Some(x), Some(y)) => recursive_difference(x, y),
                        (Some(_), None) => child_set(na),
                        _ => Map::new(),
                    }
                };
                emit(&mut out, k, is_member(na) && !is_member(nb), kids);
            }
        }
    }
    out
}

/// Finishes a node rebuilt in place the way [`emit`] builds one: `node` holds its children (no `"."`);
/// returns whether the node is to be dropped (childless non-member).
fn settle(node: &mut Map<String, Value>, member: bool) -> bool {
    if node.is_empty() {
        return !member;
    }
    if member {
        node.insert(DOT.to_string(), empty_node());
    }
    false
}

/// [`difference`] (`recursive`: [`recursive_difference`]) of `a` and `b` written into `a`, walking
/// `b`'s keys only.
fn difference_in_place(a: &mut Map<String, Value>, b: &Map<String, Value>, recursive: bool) {
    a.remove(DOT);
    for (k, nb) in b {
        if k == DOT {
            continue;
        }
        let Some(na) = a.get_mut(k) else { continue };
        if recursive && is_member(nb) {
            a.remove(k);
            continue;
        }
        let member = is_member(na) && !is_member(nb);
        let kids_a = children(na).is_some();
        let node = match na {
            Value::Object(m) if kids_a => {
                m.remove(DOT);
                if let Some(y) = children(nb) {
                    difference_in_place(m, y, recursive);
                }
                m
            }
            _ => {
                *na = empty_node();
                match na {
                    Value::Object(m) => m,
                    _ => continue,
                }
            }
        };
        if settle(node, member) {
            a.remove(k);
        }
    }
}

/// [`union`] of `b` and `a` written into `a`, walking `b`'s keys only.
fn union_in_place(a: &mut Map<String, Value>, b: &Map<String, Value>) {
    a.remove(DOT);
    for (k, nb) in b {
        if k == DOT {
            continue;
        }
        let Some(na) = a.get_mut(k) else {
            a.insert(k.clone(), nb.clone());
            continue;
        };
        let member = is_member(na) || is_member(nb);
        let kids_a = children(na).is_some();
        let node = match (na, children(nb)) {
            (Value::Object(m), Some(y)) if kids_a => {
                m.remove(DOT);
                union_in_place(m, y);
                m
            }
            (Value::Object(m), None) if kids_a => {
                m.remove(DOT);
                m
            }
            (na, kids_b) => {
                *na = Value::Object(kids_b.map(|_| child_set(nb)).unwrap_or_default());
                match na {
                    Value::Object(m) => m,
                    _ => continue,
                }
            }
        };
        if settle(node, member) {
            a.remove(k);
        }
    }
}

fn has_any_member(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    small.iter().any(|(k, ns)| {
        k != DOT
            && large.get(k).is_some_and(|nl| {
                (is_member(ns) && is_member(nl))
                    || matches!((children(ns), children(nl)), (Some(x), Some(y)) if has_any_member(x, y))
            })
    })
}

impl FieldSet {
    pub fn new() -> FieldSet {
        FieldSet(Map::new())
    }

    /// A set from a FieldsV1 object (anything else is the empty set).
    pub fn from_fields_v1(v: &Value) -> FieldSet {
        match v {
            Value::Object(m) => FieldSet(m.clone()),
            _ => FieldSet::new(),
        }
    }

    pub fn from_fields_v1_owned(v: Value) -> FieldSet {
        match v {
            Value::Object(m) => FieldSet(m),
            _ => FieldSet::new(),
        }
    }

    /// The FieldsV1 JSON of this set.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.0.clone())
    }

    pub fn into_fields_v1(self) -> Value {
        Value::Object(self.0)
    }

    pub fn is_empty(&self) -> bool {
        !self.0.keys().any(|k| k != DOT)
    }

    /// Adds `path` (FieldsV1 keys). The empty path (the whole object) is never tracked.
    pub fn insert(&mut self, path: &[String]) {
        insert(&mut self.0, path);
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[String]) -> bool {
        let Some((last, init)) = path.split_last() else {
            return false;
        };
        let mut cur = &self.0;
        for k in init {
            match cur.get(k) {
                Some(Value::Object(m)) => cur = m,
                _ => return false,
            }
        }
        cur.get(last).is_some_and(is_member)
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet(union(&self.0, &other.0))
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        FieldSet(intersection(&self.0, &other.0))
    }

    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet(difference(&self.0, &other.0))
    }

    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet(recursive_difference(&self.0, &other.0))
    }

    /// `self = self.difference(other)`, in place: only the nodes `other` reaches are visited, the rest
    /// of `self` stays as it is (no copy). Same result as [`FieldSet::difference`].
    pub fn remove_all(&mut self, other: &FieldSet) {
        difference_in_place(&mut self.0, &other.0, false);
    }

    /// `self = self.recursive_difference(other)`, in place, like [`FieldSet::remove_all`].
    pub fn remove_all_below(&mut self, other: &FieldSet) {
        difference_in_place(&mut self.0, &other.0, true);
    }

    /// `self = other.union(self)`, in place: only the nodes `other` reaches are visited, the rest of
    /// `self` stays as it is (no copy). Same result as [`FieldSet::union`] (either order: the maps are
    /// sorted).
    pub fn add_all(&mut self, other: &FieldSet) {
        union_in_place(&mut self.0, &other.0);
    }

    /// Whether the two sets share a member (cheaper than building the intersection).
    pub fn intersects(&self, other: &FieldSet) -> bool {
        has_any_member(&self.0, &other.0)
    }

    /// The subset under one path element (`Set.WithPrefix`).
    pub fn child(&self, key: &str) -> FieldSet {
        match self.0.get(key) {
            Some(n) => FieldSet(child_set(n)),
            None => FieldSet::new(),
        }
    }

    /// The member paths in structured-merge-diff's iteration order: this level's members (sorted by path
    /// element), then each child's paths.
    pub fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        collect_paths(&self.0, &mut prefix, &mut out);
        out
    }

    /// `Set.EnsureNamedFieldsAreMembers`: struct fields that only have children become members too (a set
    /// made of `a.b.c` also owns `a` when `a` is a struct field, but not `a.b` when `a` is a map).
    pub fn ensure_named_fields_are_members(&self, schema: &Schema, ty: TypeId) -> FieldSet {
        FieldSet(ensure_named(&self.0, schema, Some(ty)))
    }

    /// Re-serializes every key in canonical form (key fields sorted, Go JSON encoding), so that sets coming
    /// from a client compare equal to the ones the server computes.
    pub fn canonicalize(&self) -> FieldSet {
        FieldSet(canonical(&self.0))
    }
}

fn insert(set: &mut Map<String, Value>, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        match set.get_mut(first) {
            None => {
                set.insert(first.clone(), empty_node());
            }
            Some(Value::Object(m)) => {
                if !m.is_empty() && !m.contains_key(DOT) {
                    m.insert(DOT.to_string(), empty_node());
                }
            }
            Some(other) => *other = empty_node(),
        }
        return;
    }
    match set.get_mut(first) {
        Some(Value::Object(m)) => {
            if m.is_empty() {
                // An existing leaf member keeps its membership once it gets children.
                m.insert(DOT.to_string(), empty_node());
            }
            insert(m, rest);
        }
        _ => {
            let mut m = Map::new();
            insert(&mut m, rest);
            set.insert(first.clone(), Value::Object(m));
        }
    }
}

fn sorted_keys(m: &Map<String, Value>) -> Vec<(&String, &Value, PathElement)> {
    let mut v: Vec<_> = m
        .iter()
        .filter(|(k, _)| k.as_str() != DOT)
        .map(|(k, n)| (k, n, PathElement::parse(k)))
        .collect();
    v.sort_by(|a, b| a.2.cmp(&b.2).then_with(|| a.0.cmp(b.0)));
    v
}

fn collect_paths(m: &Map<String, Value>, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let keys = sorted_keys(m);
    for (k, n, _) in &keys {
        if is_member(n) {
            let mut p = prefix.clone();
            p.push((*k).clone());
            out.push(p);
        }
    }
    for (k, n, _) in &keys {
        if let Some(kids) = children(n) {
            prefix.push((*k).clone());
            collect_paths(kids, prefix, out);
            prefix.pop();
        }
    }
}

fn ensure_named(m: &Map<String, Value>, schema: &Schema, ty: Option<TypeId>) -> Map<String, Value> {
    let def = ty.map(|t| schema.get(t));
    let mut out = Map::new();
    for (k, n) in m {
        if k == DOT {
            continue;
        }
        let (named, child_ty) = match (k.strip_prefix("f:"), def) {
            (Some(name), Some(d)) => match &d.map {
                Some(md) => match md.field(name) {
                    Some(f) => (true, Some(f.ty)),
                    None => (false, md.elem),
                },
                None => (false, None),
            },
            (None, Some(d)) if k.starts_with("k:") => (false, d.list.as_ref().map(|l| l.elem)),
            _ => (false, None),
        };
        let kids = match children(n) {
            Some(c) => ensure_named(c, schema, child_ty),
            None => Map::new(),
        };
        // Only nodes with children are promoted (a member leaf already is one).
        let member = is_member(n) || (named && !kids.is_empty());
        emit(&mut out, k, member, kids);
    }
    out
}

fn canonical_key(k: &str) -> String {
    match PathElement::parse(k) {
        PathElement::Key(fields) => {
            let mut s = String::from("k:{");
            for (i, (name, v)) in fields.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(&crate::errors::go_json(&Value::String(name.clone())));
                s.push(':');
                s.push_str(&crate::errors::go_json(v));
            }
            s.push('}');
            s
        }
        PathElement::Value(v) => format!("v:{}", crate::errors::go_json(&v)),
        _ => k.to_string(),
    }
}

fn canonical(m: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, n) in m {
        if k == DOT {
            continue;
        }
        let key = canonical_key(k);
        let kids = match children(n) {
            Some(c) => canonical(c),
            None => Map::new(),
        };
        let member = is_member(n);
        // Two spellings of the same key merge.
        match out.get(&key) {
            Some(existing) => {
                let mut a = Map::new();
                a.insert(key.clone(), existing.clone());
                let mut b = Map::new();
                emit(&mut b, &key, member, kids);
                let merged = union(&a, &b);
                out.extend(merged);
            }
            None => emit(&mut out, &key, member, kids),
        }
    }
    out
}

#[cfg(test)]
#[path = "fieldset_tests.rs"]
mod tests;
