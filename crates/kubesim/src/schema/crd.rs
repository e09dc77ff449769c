//! Schemas of custom resources, built from a CustomResourceDefinition version's `openAPIV3Schema`.
//!
//! The real server derives two things from it: the structural schema (pruning of unknown fields,
//! defaulting) and, through the published OpenAPI, the structured-merge-diff schema (managedFields, apply).
//! Both come out of the same tree here: objects with `properties` are structs (unknown fields pruned unless
//! `x-kubernetes-preserve-unknown-fields`), `additionalProperties` makes a map, arrays are atomic unless
//! `x-kubernetes-list-type` says set/map, `x-kubernetes-map-type: atomic` makes a map atomic,
//! `x-kubernetes-int-or-string` and formatted strings are untyped scalars. The resource root (and any
//! `x-kubernetes-embedded-resource`) gets `apiVersion`, `kind` and the built-in ObjectMeta as `metadata`.

use crate::json::bool_at;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::model::{
    Field, GoMode, ListDef, ListKind, MapDef, PatchMeta, ScalarKind, Schema, TypeDef, TypeId,
};
use super::{Resource, SchemaRef, TypeRef, builtin_schema};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CrdSchemaError {
    #[error("openAPIV3Schema must be an object")]
    NotAnObject,
    #[error("{path}: x-kubernetes-list-type map requires x-kubernetes-list-map-keys")]
    MissingMapKeys { path: String },
    #[error("{path}: unknown x-kubernetes-list-type {value:?}")]
    BadListType { path: String, value: String },
    #[error("the built-in ObjectMeta schema is missing")]
    NoObjectMeta,
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const DEDUCED: &str = "__untyped_deduced_";

/// Builds the schema of a custom resource `api_version`/`kind` from its version's `openAPIV3Schema`.
/// `status_subresource`: whether `/status` is enabled (then the main resource ignores `status` and
/// `/status` ignores `spec`). `preserve_unknown_fields`: the CRD's `spec.preserveUnknownFields`.
pub fn from_crd(
    open_api_v3_schema: &Value,
    api_version: &str,
    kind: &str,
    status_subresource: bool,
    preserve_unknown_fields: bool,
) -> Result<TypeRef, CrdSchemaError> {
    if !open_api_v3_schema.is_object() {
        return Err(CrdSchemaError::NotAnObject);
    }
    let base = builtin_schema();
    let object_meta = base
        .named(OBJECT_META)
        .ok_or(CrdSchemaError::NoObjectMeta)?;
    let deduced = base.named(DEDUCED).ok_or(CrdSchemaError::NoObjectMeta)?;
    let offset = base.types.len() as u32 + base.offset;
    let mut b = Builder {
        types: Vec::new(),
        offset,
        object_meta,
        deduced,
        string: 0,
    };
    b.string = b.push(TypeDef {
        scalar: Some(ScalarKind::String),
        ..TypeDef::default()
    });
    let root = b.convert(open_api_v3_schema, "", true, preserve_unknown_fields)?;
    let schema = Schema {
        types: b.types,
        offset,
        base: Some(base),
        named: HashMap::new(),
    };
    let resets = if status_subresource {
        vec![
            (String::new(), vec!["status".to_string()]),
            ("status".to_string(), vec!["spec".to_string()]),
        ]
    } else {
        Vec::new()
    };
    let mut zero = Map::new();
    zero.insert("apiVersion".into(), Value::String(api_version.to_string()));
    zero.insert("kind".into(), Value::String(kind.to_string()));
    Ok(TypeRef(Arc::new(Resource {
        schema: SchemaRef::Owned(Arc::new(schema)),
        root,
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        custom: true,
        resets,
        zero: Value::Object(zero),
    })))
}

struct Builder {
    types: Vec<TypeDef>,
    offset: u32,
    object_meta: TypeId,
    deduced: TypeId,
    string: TypeId,
}

impl Builder {
    fn push(&mut self, t: TypeDef) -> TypeId {
        self.types.push(t);
        self.offset + self.types.len() as u32 - 1
    }

    fn field(&self, name: &str, ty: TypeId, s: Option<&Value>, go: GoMode) -> Field {
        Field {
            name: name.into(),
            ty,
            go,
            patch: PatchMeta::default(),
            default: s.and_then(|s| s.get("default")).cloned(),
            nullable: s.is_some_and(|s| bool_at(s, &["nullable"])),
        }
    }

    /// An object type with `fields`; other keys are kept as `additionalProperties` (or
    /// preserve-unknown-fields) says, else pruned.
    fn map(
        &mut self,
        s: &Value,
        path: &str,
        preserve: bool,
        fields: Box<[Field]>,
    ) -> Result<TypeId, CrdSchemaError> {
        let elem = match s.get("additionalProperties") {
            Some(ap) if ap.is_object() => Some(self.convert(ap, path, false, preserve)?),
            Some(Value::Bool(true)) => Some(self.deduced),
            _ if preserve => Some(self.deduced),
            _ => None,
        };
        Ok(self.push(TypeDef {
            map: Some(MapDef {
                fields,
                elem,
                atomic: s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"),
            }),
            ..TypeDef::default()
        }))
    }

    fn convert(
        &mut self,
        s: &Value,
        path: &str,
        resource: bool,
        inherited_preserve: bool,
    ) -> Result<TypeId, CrdSchemaError> {
        let preserve = inherited_preserve || bool_at(s, &["x-kubernetes-preserve-unknown-fields"]);
        if bool_at(s, &["x-kubernetes-int-or-string"]) {
            return Ok(self.push(TypeDef {
                scalar: Some(ScalarKind::Untyped),
                ..TypeDef::default()
            }));
        }
        let embedded = resource || bool_at(s, &["x-kubernetes-embedded-resource"]);
        let ty = s.get("type").and_then(Value::as_str);
        match ty {
            Some("object") | None if embedded || s.get("properties").is_some() => {
                let mut fields = Vec::new();
                if let Some(props) = s.get("properties").and_then(Value::as_object) {
                    for (name, sub) in props {
                        if embedded && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                            continue;
                        }
                        let child = self.convert(sub, &join(path, name), false, preserve)?;
                        fields.push(self.field(name, child, Some(sub), GoMode::Raw));
                    }
                }
                if embedded {
                    let props = s.get("properties");
                    let sub = |n: &str| props.and_then(|p| p.get(n));
                    fields.push(self.field(
                        "apiVersion",
                        self.string,
                        sub("apiVersion"),
                        GoMode::Raw,
                    ));
                    fields.push(self.field("kind", self.string, sub("kind"), GoMode::Raw));
                    // metadata goes through the typed ObjectMeta (the real server coerces it), so its own
                    // Go modes apply inside; the field itself is only dropped when null.
                    fields.push(self.field("metadata", self.object_meta, None, GoMode::Pointer));
                }
                fields.sort_by(|a, b| a.name.cmp(&b.name));
                self.map(s, path, preserve, fields.into_boxed_slice())
            }
            // `type: object` without properties: every field not allowed by
            // additionalProperties or preserve-unknown-fields is pruned.
            Some("object") => self.map(s, path, preserve, Box::new([])),
            Some("array") => {
                let items = s.get("items").cloned().unwrap_or(Value::Object(Map::new()));
                let elem = self.convert(&items, &format!("{path}[]"), false, preserve)?;
                let (kind, keys) = match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
                    None | Some("atomic") => (ListKind::Atomic, Vec::new()),
                    Some("set") => (ListKind::Set, Vec::new()),
                    Some("map") => {
                        let keys: Vec<Box<str>> = s
                            .get("x-kubernetes-list-map-keys")
                            .and_then(Value::as_array)
                            .map(|a| a.iter().filter_map(Value::as_str).map(Box::from).collect())
                            .unwrap_or_default();
                        if keys.is_empty() {
                            return Err(CrdSchemaError::MissingMapKeys {
                                path: path.to_string(),
                            });
                        }
                        (ListKind::Map, keys)
                    }
                    Some(other) => {
                        return Err(CrdSchemaError::BadListType {
                            path: path.to_string(),
                            value: other.to_string(),
                        });
                    }
                };
                // Key defaults come from the item schema's property defaults.
                let key_defaults: Vec<(Box<str>, Value)> = keys
                    .iter()
                    .filter_map(|k| {
                        items
                            .get("properties")
                            .and_then(|p| p.get(&**k))
                            .and_then(|p| p.get("default"))
                            .map(|d| (k.clone(), d.clone()))
                    })
                    .collect();
                Ok(self.push(TypeDef {
                    list: Some(ListDef {
                        elem,
                        kind,
                        keys: keys.into_boxed_slice(),
                        key_defaults: key_defaults.into_boxed_slice(),
                    }),
                    ..TypeDef::default()
                }))
            }
            Some("string") => {
                let fmt = s.get("format").and_then(Value::as_str).unwrap_or("");
                let kind = if fmt.is_empty() || fmt == "byte" {
                    ScalarKind::String
                } else {
                    ScalarKind::Untyped
                };
                Ok(self.push(TypeDef {
                    scalar: Some(kind),
                    ..TypeDef::default()
                }))
            }
            Some("integer") | Some("number") => Ok(self.push(TypeDef {
                scalar: Some(ScalarKind::Numeric),
                ..TypeDef::default()
            })),
            Some("boolean") => Ok(self.push(TypeDef {
                scalar: Some(ScalarKind::Boolean),
                ..TypeDef::default()
            })),
            // No type: arbitrary JSON (only valid with x-kubernetes-preserve-unknown-fields).
            _ => Ok(self.deduced),
        }
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// Applies the `default`s of a custom resource schema (structural defaulting): an absent field, or a null
/// one that is not `nullable`, gets its default; defaults apply inside defaulted values too.
pub fn apply_crd_defaults(t: &TypeRef, obj: &mut Value) {
    default_value(t.schema(), t.root(), obj);
}

fn default_value(schema: &Schema, ty: TypeId, v: &mut Value) {
    let def = schema.get(ty);
    match v {
        Value::Object(m) => {
            let Some(md) = &def.map else { return };
            for f in md.fields.iter() {
                if let Some(d) = &f.default {
                    let set = match m.get(&*f.name) {
                        None => true,
                        Some(Value::Null) => !f.nullable,
                        _ => false,
                    };
                    if set {
                        m.insert(f.name.to_string(), d.clone());
                    }
                }
            }
            for (k, child) in m.iter_mut() {
                if let Some(cty) = md.field(k).map(|f| f.ty).or(md.elem) {
                    default_value(schema, cty, child);
                }
            }
        }
        Value::Array(a) => {
            if let Some(l) = &def.list {
                for item in a {
                    default_value(schema, l.elem, item);
                }
            }
        }
        _ => {}
    }
}
