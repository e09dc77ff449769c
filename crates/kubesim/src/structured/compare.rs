//! Compare (which fields an update added, modified, removed), structured-merge-diff's `typed.Compare`;
//! the walks' shared rules are in [`super::typed`].

use serde_json::{Map, Value};

use super::fieldset::FieldSet;
use super::typed::{
    Atom, TypedError, as_list, as_map, child_type, deduce, error_at, full_atom, skipped,
};
use super::value::{equal, list_item_key};
use crate::schema::Schema;
use crate::schema::model::{ListDef, ListKind, MapDef, TypeDef, TypeId};

/// The result of comparing two objects (`typed.Comparison`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }

    /// `ExcludeFields`: drops `fields` and everything below them from all three sets.
    pub fn exclude(&mut self, fields: &FieldSet) {
        if fields.is_empty() {
            return;
        }
        self.added.remove_all_below(fields);
        self.modified.remove_all_below(fields);
        self.removed.remove_all_below(fields);
    }
}

/// Compares `lhs` (before) with `rhs` (after), both of type `ty`.
pub fn compare(
    schema: &Schema,
    ty: TypeId,
    lhs: &Value,
    rhs: &Value,
) -> Result<Comparison, Vec<TypedError>> {
    walk(schema, ty, lhs, rhs, false)
}

/// [`compare`] passing over the fields and list items equal on both sides instead of walking them.
/// An equal subtree adds nothing to the comparison; a walk of it could only find errors (a value the
/// schema does not fit, a list item without its key), so this is for a `lhs` a full walk already
/// found without errors (see `update_entries`). Then the result is [`compare`]'s.
pub fn compare_changes(
    schema: &Schema,
    ty: TypeId,
    lhs: &Value,
    rhs: &Value,
) -> Result<Comparison, Vec<TypedError>> {
    walk(schema, ty, lhs, rhs, true)
}

fn walk(
    schema: &Schema,
    ty: TypeId,
    lhs: &Value,
    rhs: &Value,
    skip_equal: bool,
) -> Result<Comparison, Vec<TypedError>> {
    let mut c = Cmp {
        schema,
        path: Vec::new(),
        depth: 0,
        out: Comparison::default(),
        errors: Vec::new(),
        skip_equal,
    };
    c.compare(ty, Some(lhs), Some(rhs));
    if c.errors.is_empty() {
        Ok(c.out)
    } else {
        Err(c.errors)
    }
}

struct Cmp<'a> {
    schema: &'a Schema,
    /// The current path is `path[..depth]`; deeper slots are kept to reuse their allocations (this walk
    /// runs on every write).
    path: Vec<String>,
    depth: usize,
    out: Comparison,
    errors: Vec<TypedError>,
    /// Equal subtrees are passed over ([`compare_changes`]).
    skip_equal: bool,
}

impl Cmp<'_> {
    fn cur(&self) -> &[String] {
        &self.path[..self.depth]
    }

    fn push(&mut self, field: bool, seg: &str) {
        if self.path.len() == self.depth {
            self.path.push(String::new());
        }
        let slot = &mut self.path[self.depth];
        slot.clear();
        if field {
            slot.push_str("f:");
        }
        slot.push_str(seg);
        self.depth += 1;
    }

    fn pop(&mut self) {
        self.depth -= 1;
    }

    fn compare(&mut self, ty: TypeId, lhs: Option<&Value>, rhs: Option<&Value>) {
        let schema = self.schema;
        let def = schema.get(ty);
        let full = full_atom(def);
        if !full.map && !full.scalar && !full.list {
            self.errors
                .push(error_at(self.cur(), "field not declared in schema"));
            return;
        }
        let al = deduce(def, lhs);
        let ar = deduce(def, rhs);
        let mut in_leaf = false;
        if rhs.is_none() {
            self.handle(def, al, lhs, rhs, &mut in_leaf);
        } else if lhs.is_none() || al == ar {
            self.handle(def, ar, lhs, rhs, &mut in_leaf);
        } else {
            // The value changed form (an untyped field): both forms are walked, only the last one's leaf
            // state counts (Go copies the walker for the first).
            let mut first = false;
            self.handle(def, al, lhs, rhs, &mut first);
            self.handle(def, ar, lhs, rhs, &mut in_leaf);
        }
        if !in_leaf {
            if lhs.is_none() {
                self.out.added.insert(&self.path[..self.depth]);
            } else if rhs.is_none() {
                self.out.removed.insert(&self.path[..self.depth]);
            }
        }
    }

    fn handle(
        &mut self,
        def: &TypeDef,
        atom: Atom,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        in_leaf: &mut bool,
    ) {
        if atom.map {
            if let Some(m) = &def.map {
                self.do_map(m, lhs, rhs, in_leaf);
            }
        } else if atom.scalar {
            self.do_leaf(lhs, rhs, in_leaf);
        } else if atom.list
            && let Some(l) = &def.list
        {
            self.do_list(l, lhs, rhs, in_leaf);
        }
    }

    fn do_leaf(&mut self, lhs: Option<&Value>, rhs: Option<&Value>, in_leaf: &mut bool) {
        if *in_leaf {
            return;
        }
        *in_leaf = true;
        match (lhs, rhs) {
            (None, _) => self.out.added.insert(&self.path[..self.depth]),
            (_, None) => self.out.removed.insert(&self.path[..self.depth]),
            (Some(l), Some(r)) => {
                if !equal(l, r) {
                    self.out.modified.insert(&self.path[..self.depth]);
                }
            }
        }
    }

    fn do_list(
        &mut self,
        l: &ListDef,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        in_leaf: &mut bool,
    ) {
        let ll = as_list(lhs);
        let rl = as_list(rhs);
        let empty = ll.is_none_or(|a| a.is_empty()) && rl.is_none_or(|a| a.is_empty());
        if l.kind == ListKind::Atomic || empty {
            self.do_leaf(lhs, rhs, in_leaf);
            return;
        }
        if ll.is_none() && rl.is_none() {
            return;
        }
        self.visit_list_items(l, ll, rl);
    }

    fn index_items<'v>(
        &mut self,
        l: &ListDef,
        items: Option<&'v Vec<Value>>,
        groups: &mut Vec<(String, Vec<&'v Value>, Vec<&'v Value>)>,
        right: bool,
    ) {
        let Some(items) = items else { return };
        for (i, item) in items.iter().enumerate() {
            match list_item_key(l, item) {
                Ok(k) => match groups.iter_mut().find(|g| g.0 == k) {
                    Some(g) => {
                        if right {
                            g.2.push(item)
                        } else {
                            g.1.push(item)
                        }
                    }
                    None => groups.push(if right {
                        (k, Vec::new(), vec![item])
                    } else {
                        (k, vec![item], Vec::new())
                    }),
                },
                Err(e) => self
                    .errors
                    .push(error_at(self.cur(), format!("element {i}: {e}"))),
            }
        }
    }

    fn visit_list_items(&mut self, l: &ListDef, ll: Option<&Vec<Value>>, rl: Option<&Vec<Value>>) {
        // Items grouped by path element, in first-seen order, duplicates kept together.
        let mut groups: Vec<(String, Vec<&Value>, Vec<&Value>)> = Vec::new();
        self.index_items(l, ll, &mut groups, false);
        self.index_items(l, rl, &mut groups, true);
        for (pe, lv, rv) in groups {
            match (lv.len(), rv.len()) {
                (0, 0) => return,
                (a, b) if a <= 1 && b <= 1 => {
                    if self.skip_equal && a == 1 && lv.first() == rv.first() {
                        continue;
                    }
                    self.push(false, &pe);
                    self.compare(l.elem, lv.first().copied(), rv.first().copied());
                    self.pop();
                }
                (a, b) if a >= 2 && b >= 2 => {
                    // Duplicates on both sides: compared as an atomic group.
                    if lv.len() != rv.len() || lv.iter().zip(&rv).any(|(x, y)| !equal(x, y)) {
                        self.push(false, &pe);
                        self.out.modified.insert(&self.path[..self.depth]);
                        self.pop();
                    }
                }
                (a, _) if a >= 2 => {
                    self.push(false, &pe);
                    if let Some(r) = rv.first() {
                        self.compare(l.elem, None, Some(r));
                    }
                    self.out.removed.insert(&self.path[..self.depth]);
                    self.pop();
                }
                _ => {
                    self.push(false, &pe);
                    if let Some(lf) = lv.first() {
                        self.compare(l.elem, Some(lf), None);
                    }
                    self.out.added.insert(&self.path[..self.depth]);
                    self.pop();
                }
            }
        }
    }

    fn do_map(&mut self, m: &MapDef, lhs: Option<&Value>, rhs: Option<&Value>, in_leaf: &mut bool) {
        let lm = as_map(lhs);
        let rm = as_map(rhs);
        let empty = lm.is_none_or(|x| x.is_empty()) && rm.is_none_or(|x| x.is_empty());
        if m.atomic || empty {
            self.do_leaf(lhs, rhs, in_leaf);
            return;
        }
        if lm.is_none() && rm.is_none() {
            return;
        }
        let empty_map = Map::new();
        let lm = lm.unwrap_or(&empty_map);
        let rm = rm.unwrap_or(&empty_map);
        // Both maps are sorted: walk their keys in one merged pass.
        let mut li = lm.iter().peekable();
        let mut ri = rm.iter().peekable();
        loop {
            let (key, lv, rv) = match (li.peek(), ri.peek()) {
                (None, None) => break,
                (Some((lk, _)), Some((rk, _))) if lk == rk => {
                    let (k, l) = li.next().unzip_pair();
                    let (_, r) = ri.next().unzip_pair();
                    (k, l, r)
                }
                (Some((lk, _)), Some((rk, _))) if lk < rk => {
                    let (k, l) = li.next().unzip_pair();
                    (k, l, None)
                }
                (Some(_), None) => {
                    let (k, l) = li.next().unzip_pair();
                    (k, l, None)
                }
                _ => {
                    let (k, r) = ri.next().unzip_pair();
                    (k, None, r)
                }
            };
            let Some(key) = key else { break };
            if skipped(self.cur(), key) || (self.skip_equal && lv.is_some() && lv == rv) {
                continue;
            }
            self.push(true, key);
            match child_type(m, key) {
                Some(t) => self.compare(t, lv, rv),
                None => self
                    .errors
                    .push(error_at(self.cur(), "field not declared in schema")),
            }
            self.pop();
        }
    }
}

/// Splits an optional map entry into its key and value.
trait UnzipPair<'a> {
    fn unzip_pair(self) -> (Option<&'a String>, Option<&'a Value>);
}

impl<'a> UnzipPair<'a> for Option<(&'a String, &'a Value)> {
    fn unzip_pair(self) -> (Option<&'a String>, Option<&'a Value>) {
        match self {
            Some((k, v)) => (Some(k), Some(v)),
            None => (None, None),
        }
    }
}
