//! Unknown and duplicate fields, as the real server's decoder reports them.
//!
//! For built-in kinds the request body is decoded by a strict JSON decoder (sigs.k8s.io/json with
//! DisallowUnknownFields/DisallowDuplicateFields) into the Go struct: unknown fields are dropped and each one
//! is reported once, in document order, with its path (`spec.template.spec.containers[0].bogus`); duplicate
//! keys are reported the same way. fieldValidation=Warn turns each report into a warning, Strict into a 400
//! `strict decoding error: ...`, Ignore drops them silently. Custom resources are decoded unstructured (only
//! duplicates are reported by the decoder) and then pruned by their structural schema, which reports the
//! pruned paths sorted.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde_json::Value;

use super::model::{Schema, TypeId};
use super::{TypeRef, version_of};
use crate::errors::go_quote;

/// One strict-decoding finding, displayed exactly as the server words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StrictIssue {
    UnknownField(String),
    DuplicateField(String),
}

impl fmt::Display for StrictIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StrictIssue::UnknownField(p) => write!(f, "unknown field {}", go_quote(p)),
            StrictIssue::DuplicateField(p) => write!(f, "duplicate field {}", go_quote(p)),
        }
    }
}

/// The 400 message for fieldValidation=Strict:
/// `Job in version "v1" cannot be handled as a Job: strict decoding error: unknown field "spec.x"`.
pub fn strict_decoding_message(t: &TypeRef, issues: &[StrictIssue]) -> String {
    let list = issues
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "{kind} in version {} cannot be handled as a {kind}: strict decoding error: {list}",
        go_quote(version_of(t.api_version())),
        kind = t.kind()
    )
}

/// The `Warning` response header value for one finding (fieldValidation=Warn, the default):
/// `299 - "unknown field \"spec.bogusField\""`.
pub fn warning_header_value(issue: &str) -> String {
    format!("299 - {}", go_quote(issue))
}

/// The real decoder stops accumulating strict errors at this many.
const MAX_STRICT_ERRORS: usize = 100;

/// Removes the fields of `obj` that `t` does not declare (what decoding into the Go struct, or structural
/// pruning for custom resources, does) and returns their paths: in traversal order for built-ins, sorted
/// for custom resources (as the real pruning reports them).
pub fn prune_unknown(t: &TypeRef, obj: &mut Value) -> Vec<String> {
    prune_unknown_except(t, obj, &|_| false)
}

/// [`prune_unknown`] passing over the top-level members `skip` names (members a write left as a
/// stored built-in object has them: pruned already).
pub fn prune_unknown_except(
    t: &TypeRef,
    obj: &mut Value,
    skip: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut path = String::new();
    prune(t.schema(), t.root(), obj, &mut path, &mut out, skip);
    if t.is_custom() {
        out.sort();
    }
    out
}

fn push_key(path: &mut String, key: &str) -> usize {
    let len = path.len();
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
    len
}

/// `skip`: the keys of `v`'s own members to pass over (nested values are all walked).
fn prune(
    schema: &Schema,
    ty: TypeId,
    v: &mut Value,
    path: &mut String,
    out: &mut Vec<String>,
    skip: &dyn Fn(&str) -> bool,
) {
    let def = schema.get(ty);
    match v {
        Value::Object(m) => {
            let Some(md) = &def.map else { return };
            let mut unknown = Vec::new();
            // Keys and declared fields are both sorted by name: walked together, no search per key.
            let mut fields = md.fields.iter().peekable();
            for (k, child) in m.iter_mut() {
                while fields.next_if(|f| *f.name < **k).is_some() {}
                let child_ty = match fields.next_if(|f| *f.name == **k) {
                    Some(f) => Some(f.ty),
                    None => md.elem,
                };
                if skip(k) {
                    continue;
                }
                let len = push_key(path, k);
                match child_ty {
                    Some(cty) => prune(schema, cty, child, path, out, &|_| false),
                    None => {
                        unknown.push(k.clone());
                        out.push(path.clone());
                    }
                }
                path.truncate(len);
            }
            for k in unknown {
                m.remove(&k);
            }
        }
        Value::Array(a) => {
            let Some(l) = &def.list else { return };
            for (i, item) in a.iter_mut().enumerate() {
                let len = path.len();
                path.push('[');
                path.push_str(&i.to_string());
                path.push(']');
                prune(schema, l.elem, item, path, out, &|_| false);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// A JSON syntax problem found while scanning for strict issues (the body is rejected elsewhere with the
/// decoder's own message; this only stops the scan).
#[derive(Debug, thiserror::Error)]
#[error("invalid JSON at byte {0}")]
pub struct ScanError(pub usize);

/// Scans a raw JSON request body for unknown fields (built-in kinds only) and duplicate fields, in document
/// order, deduplicated and capped like the real decoder.
pub fn strict_issues(t: &TypeRef, raw: &[u8]) -> Result<Vec<StrictIssue>, ScanError> {
    let mut s = Scanner {
        b: raw,
        i: 0,
        schema: t.schema(),
        path: Vec::new(),
        issues: Vec::new(),
        seen: HashSet::new(),
        depth: 0,
    };
    // Custom resources are decoded into unstructured maps: only duplicates are found by the decoder.
    let root = if t.is_custom() {
        Mode::Untyped
    } else {
        Mode::Typed(t.root())
    };
    s.ws();
    s.value(root)?;
    s.ws();
    if s.i != s.b.len() {
        return Err(ScanError(s.i));
    }
    Ok(s.issues)
}

/// Go's decoder refuses nesting deeper than this.
const MAX_DEPTH: usize = 10_000;

/// What the value under the cursor is decoded into.
#[derive(Clone, Copy)]
enum Mode {
    /// A typed Go value: unknown struct fields and duplicate keys are reported.
    Typed(TypeId),
    /// `interface{}`: duplicate keys are reported.
    Untyped,
    /// Not decoded at all (the value of an unknown field, or a type mismatch): nothing is reported.
    Skip,
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    schema: &'a Schema,
    /// Where the cursor is; spelled out (`spec.template[0]`) only for an issue, as the strict
    /// decoder builds paths. Keys are borrowed from the body unless they hold escapes: the scan runs
    /// on every request body, and almost every body has no issue.
    path: Vec<Seg<'a>>,
    issues: Vec<StrictIssue>,
    seen: HashSet<String>,
    depth: usize,
}

/// One step of [`Scanner::path`].
enum Seg<'a> {
    Key(Cow<'a, str>),
    Index(usize),
}

impl<'a> Scanner<'a> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn issue(&mut self, unknown: bool, key: &str) {
        if self.issues.len() >= MAX_STRICT_ERRORS {
            return;
        }
        let mut p = String::new();
        for (n, seg) in self.path.iter().enumerate() {
            match seg {
                Seg::Key(k) if n == 0 => p.push_str(k),
                Seg::Key(k) => {
                    p.push('.');
                    p.push_str(k);
                }
                Seg::Index(i) => p.push_str(&format!("[{i}]")),
            }
        }
        if !p.is_empty() {
            p.push('.');
        }
        p.push_str(key);
        let issue = if unknown {
            StrictIssue::UnknownField(p)
        } else {
            StrictIssue::DuplicateField(p)
        };
        if self.seen.insert(issue.to_string()) {
            self.issues.push(issue);
        }
    }

    fn value(&mut self, mode: Mode) -> Result<(), ScanError> {
        match self.b.get(self.i) {
            Some(b'{') => self.object(mode),
            Some(b'[') => self.array(mode),
            Some(b'"') => self.string().map(drop),
            Some(_) => self.literal(),
            None => Err(ScanError(self.i)),
        }
    }

    fn enter(&mut self) -> Result<(), ScanError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ScanError(self.i));
        }
        self.i += 1;
        self.ws();
        Ok(())
    }

    fn object(&mut self, mode: Mode) -> Result<(), ScanError> {
        self.enter()?;
        let md = match mode {
            Mode::Typed(t) => self.schema.get(t).map.as_ref(),
            _ => None,
        };
        // A typed value that is not an object is a decode error reported by the decoder proper.
        let mode = match (mode, md) {
            (Mode::Typed(_), None) => Mode::Skip,
            (m, _) => m,
        };
        let mut keys: HashSet<Cow<'a, str>> = HashSet::new();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return Err(ScanError(self.i));
            }
            self.i += 1;
            self.ws();
            let child = match (mode, md) {
                (Mode::Skip, _) => Mode::Skip,
                (Mode::Untyped, _) => Mode::Untyped,
                (Mode::Typed(_), Some(m)) => match m.field(&key).map(|f| f.ty).or(m.elem) {
                    Some(t) => Mode::Typed(t),
                    None => Mode::Skip,
                },
                (Mode::Typed(_), None) => Mode::Skip,
            };
            if !matches!(mode, Mode::Skip) {
                if !keys.insert(key.clone()) {
                    self.issue(false, &key);
                }
                if matches!(child, Mode::Skip) {
                    self.issue(true, &key);
                }
            }
            self.path.push(Seg::Key(key));
            self.value(child)?;
            self.path.pop();
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(ScanError(self.i)),
            }
        }
    }

    fn array(&mut self, mode: Mode) -> Result<(), ScanError> {
        self.enter()?;
        let elem = match mode {
            Mode::Typed(t) => match &self.schema.get(t).list {
                Some(l) => Mode::Typed(l.elem),
                None => Mode::Skip,
            },
            m => m,
        };
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            self.depth -= 1;
            return Ok(());
        }
        let mut idx = 0usize;
        loop {
            self.ws();
            self.path.push(Seg::Index(idx));
            self.value(elem)?;
            self.path.pop();
            idx += 1;
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(ScanError(self.i)),
            }
        }
    }

    fn literal(&mut self) -> Result<(), ScanError> {
        let start = self.i;
        while self.i < self.b.len()
            && !matches!(
                self.b[self.i],
                b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'
            )
        {
            self.i += 1;
        }
        if self.i == start {
            return Err(ScanError(start));
        }
        Ok(())
    }

    /// Parses a JSON string (the cursor on its opening quote) and returns its unescaped content
    /// (borrowed from the body when it has no escapes).
    fn string(&mut self) -> Result<Cow<'a, str>, ScanError> {
        let b: &'a [u8] = self.b;
        if self.b.get(self.i) != Some(&b'"') {
            return Err(ScanError(self.i));
        }
        let start = self.i;
        self.i += 1;
        let mut escaped = false;
        while self.i < self.b.len() {
            match self.b[self.i] {
                b'\\' => {
                    escaped = true;
                    self.i += 2;
                }
                b'"' => {
                    self.i += 1;
                    let raw = &b[start..self.i];
                    if !escaped {
                        return std::str::from_utf8(&raw[1..raw.len() - 1])
                            .map(Cow::Borrowed)
                            .map_err(|_| ScanError(start));
                    }
                    return serde_json::from_slice::<String>(raw)
                        .map(Cow::Owned)
                        .map_err(|_| ScanError(start));
                }
                _ => self.i += 1,
            }
        }
        Err(ScanError(start))
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
