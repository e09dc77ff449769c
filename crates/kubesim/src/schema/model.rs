//! The structural schema model: the same information structured-merge-diff's `schema.Schema` carries
//! (scalars, lists with their element relationship, maps/structs with their fields), plus the per-field facts
//! the rest of the server needs: strategic-merge-patch metadata and the Go JSON round-trip behaviour of the
//! field (`omitempty`, pointer or value), which decides the Go zero value and what survives a decode.

use std::collections::HashMap;

use serde_json::Value;

/// Index of a type in a [`Schema`]. Ids below a schema's `offset` refer to the built-in schema it extends.
pub type TypeId = u32;

/// A scalar's kind (structured-merge-diff `schema.Scalar`). Only used to tell scalars apart from containers;
/// values are not type-checked here (the kind-specific validation does that with the real error texts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarKind {
    String,
    Numeric,
    Boolean,
    /// int-or-string, quantities, timestamps and arbitrary JSON scalars.
    Untyped,
}

/// How list items relate (structured-merge-diff `ElementRelationship` for lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// Owned and replaced as a whole (`x-kubernetes-list-type: atomic`, the default).
    Atomic,
    /// A set of scalars, items identified by value (`set`).
    Set,
    /// Items identified by the values of key fields (`map` with `x-kubernetes-list-map-keys`).
    Map,
}

#[derive(Debug, Clone)]
pub struct ListDef {
    pub elem: TypeId,
    pub kind: ListKind,
    /// Key field names for [`ListKind::Map`], in declaration order.
    pub keys: Box<[Box<str>]>,
    /// Defaults of key fields (used to identify an item that omits a defaulted key, e.g. `protocol: TCP`).
    pub key_defaults: Box<[(Box<str>, Value)]>,
}

/// How a struct field behaves in Go's JSON round trip (`encoding/json` + `omitempty`/`omitzero`).
#[derive(Debug, Clone, PartialEq)]
pub enum GoMode {
    /// Pointer with `omitempty`: null is dropped, any other value (even `""`, `0`, `{}`) survives.
    Pointer,
    /// Slice or map with `omitempty`: null and empty are dropped.
    Empty,
    /// Value scalar with `omitempty`: null and the zero value (`""`, `0`, `false`) are dropped.
    ValueScalar,
    /// Never omitted: an absent or null value becomes this zero value.
    Never(Value),
    /// A value struct: never omitted; absent or null becomes the struct's zero value.
    ValueStruct,
    /// `omitzero` on a struct that marshals its zero as null (metav1.Time): null is dropped.
    OmitZero,
    /// Unstructured content (custom resources outside `metadata`): kept exactly as sent.
    Raw,
}

/// Strategic-merge-patch metadata of a field (`patchStrategy`/`patchMergeKey` struct tags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchMeta {
    /// The strategies, e.g. `["merge"]`, `["merge", "retainKeys"]`, `["replace"]`.
    pub strategies: Box<[Box<str>]>,
    pub merge_key: Option<Box<str>>,
}

#[derive(Debug, Clone)]
pub struct Field {
    pub name: Box<str>,
    pub ty: TypeId,
    pub go: GoMode,
    pub patch: PatchMeta,
    /// Default value (custom resource schemas); applied when the field is absent.
    pub default: Option<Value>,
    /// `nullable: true` (custom resource schemas): an explicit null is kept rather than defaulted.
    pub nullable: bool,
}

#[derive(Debug, Clone, Default)]
pub struct MapDef {
    /// Declared fields, sorted by name (binary searched).
    pub fields: Box<[Field]>,
    /// Type of undeclared keys: a map's values, or arbitrary fields preserved by a struct. `None` means
    /// undeclared keys are unknown fields.
    pub elem: Option<TypeId>,
    /// `x-kubernetes-map-type: atomic` (and `+structType=atomic`).
    pub atomic: bool,
}

impl MapDef {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields
            .binary_search_by(|f| (*f.name).cmp(name))
            .ok()
            .map(|i| &self.fields[i])
    }
}

/// One type: like structured-merge-diff's `Atom`, at most one of each form. Untyped types carry several
/// forms and the value decides which applies.
#[derive(Debug, Clone, Default)]
pub struct TypeDef {
    pub scalar: Option<ScalarKind>,
    pub list: Option<ListDef>,
    pub map: Option<MapDef>,
    /// The Go struct name for named types (used in strategic-merge-patch error texts).
    pub name: Option<Box<str>>,
}

/// A set of types. The built-in schema is self-contained; a custom resource's schema is built at run time
/// and refers to built-in types (ObjectMeta) by their ids, its own types being numbered from `offset`.
#[derive(Debug)]
pub struct Schema {
    pub(crate) types: Vec<TypeDef>,
    pub(crate) offset: u32,
    pub(crate) base: Option<&'static Schema>,
    pub(crate) named: HashMap<String, TypeId>,
}

impl Schema {
    pub fn get(&self, id: TypeId) -> &TypeDef {
        if id < self.offset {
            match self.base {
                Some(b) => b.get(id),
                None => &EMPTY_TYPE,
            }
        } else {
            self.types
                .get((id - self.offset) as usize)
                .unwrap_or(&EMPTY_TYPE)
        }
    }

    /// The id of a named type (OpenAPI definition name, e.g. `io.k8s.api.batch.v1.Job`).
    pub fn named(&self, name: &str) -> Option<TypeId> {
        self.named
            .get(name)
            .copied()
            .or_else(|| self.base.and_then(|b| b.named(name)))
    }

    /// Looks a struct field or map entry up: the type of `key` inside a value of type `ty`.
    pub fn child_type(&self, ty: TypeId, key: &str) -> Option<TypeId> {
        let m = self.get(ty).map.as_ref()?;
        m.field(key).map(|f| f.ty).or(m.elem)
    }
}

/// Returned for dangling ids: no form at all, so every value is "not declared in schema".
static EMPTY_TYPE: TypeDef = TypeDef {
    scalar: None,
    list: None,
    map: None,
    name: None,
};
