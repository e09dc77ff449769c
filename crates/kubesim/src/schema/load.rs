//! Loading the generated built-in schema (`crates/kubesim/schema/builtin.json`, see
//! `crates/kubesim/schema/tools/gen_builtin_schema.py` for the format and how it is produced).

use std::collections::HashMap;

use serde_json::Value;

use super::model::{
    Field, GoMode, ListDef, ListKind, MapDef, PatchMeta, ScalarKind, Schema, TypeDef, TypeId,
};

/// The generated data, compiled in so the server has no run-time file dependency.
const BUILTIN_JSON: &str = include_str!("../../schema/builtin.json");

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("builtin schema is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("builtin schema is malformed: {0}")]
    Malformed(String),
}

/// Parses the built-in schema; returns it and the `group/version/Kind` -> root type table.
pub(crate) fn load_builtin() -> Result<(Schema, HashMap<String, TypeId>), LoadError> {
    let doc: Value = serde_json::from_str(BUILTIN_JSON)?;
    let bad = |what: &str| LoadError::Malformed(what.to_string());
    let types_json = doc
        .get("types")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("types"))?;
    let named_json = doc
        .get("named")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("named"))?;
    let mut named = HashMap::new();
    let mut names_by_id: HashMap<u32, &str> = HashMap::new();
    for (name, id) in named_json {
        let id = id.as_u64().ok_or_else(|| bad("named id"))? as TypeId;
        named.insert(name.clone(), id);
        if !name.starts_with("__") {
            names_by_id.insert(id, name.rsplit('.').next().unwrap_or(name));
        }
    }
    let mut types = Vec::with_capacity(types_json.len());
    for (i, t) in types_json.iter().enumerate() {
        let mut def = parse_type(t).map_err(|e| LoadError::Malformed(format!("type {i}: {e}")))?;
        def.name = names_by_id.get(&(i as u32)).map(|n| Box::<str>::from(*n));
        types.push(def);
    }
    let mut kinds = HashMap::new();
    if let Some(k) = doc.get("kinds").and_then(Value::as_object) {
        for (gvk, def) in k {
            let def = def.as_str().ok_or_else(|| bad("kinds"))?;
            let id = *named.get(def).ok_or_else(|| bad("kind root"))?;
            kinds.insert(gvk.clone(), id);
        }
    }
    Ok((
        Schema {
            types,
            offset: 0,
            base: None,
            named,
        },
        kinds,
    ))
}

fn parse_type(t: &Value) -> Result<TypeDef, String> {
    let mut def = TypeDef::default();
    if let Some(s) = t.get("s").and_then(Value::as_str) {
        def.scalar = Some(match s {
            "string" => ScalarKind::String,
            "numeric" => ScalarKind::Numeric,
            "boolean" => ScalarKind::Boolean,
            _ => ScalarKind::Untyped,
        });
    }
    if let Some(l) = t.get("l") {
        def.list = Some(parse_list(l)?);
    }
    if let Some(m) = t.get("m") {
        def.map = Some(parse_map(m)?);
    }
    Ok(def)
}

fn id_of(v: Option<&Value>) -> Result<TypeId, String> {
    v.and_then(Value::as_u64)
        .map(|i| i as TypeId)
        .ok_or_else(|| "missing type id".to_string())
}

fn parse_list(l: &Value) -> Result<ListDef, String> {
    let kind = match l.get("t").and_then(Value::as_str) {
        Some("set") => ListKind::Set,
        Some("map") => ListKind::Map,
        _ => ListKind::Atomic,
    };
    let keys: Box<[Box<str>]> = l
        .get("k")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(Box::from).collect())
        .unwrap_or_default();
    let key_defaults: Box<[(Box<str>, Value)]> = l
        .get("kd")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (Box::from(k.as_str()), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    Ok(ListDef {
        elem: id_of(l.get("e"))?,
        kind,
        keys,
        key_defaults,
    })
}

fn parse_map(m: &Value) -> Result<MapDef, String> {
    let mut fields = Vec::new();
    if let Some(fs) = m.get("f").and_then(Value::as_array) {
        for f in fs {
            let name = f
                .get("n")
                .and_then(Value::as_str)
                .ok_or("field without name")?;
            let go = match f.get("g").and_then(Value::as_str) {
                Some("p") => GoMode::Pointer,
                Some("e") => GoMode::Empty,
                Some("v") => GoMode::ValueScalar,
                Some("s") => GoMode::ValueStruct,
                Some("t") => GoMode::OmitZero,
                Some("z") => GoMode::Never(f.get("z").cloned().unwrap_or(Value::Null)),
                other => return Err(format!("field {name}: bad go mode {other:?}")),
            };
            let strategies: Box<[Box<str>]> = f
                .get("ps")
                .and_then(Value::as_str)
                .map(|s| s.split(',').map(Box::from).collect())
                .unwrap_or_default();
            fields.push(Field {
                name: name.into(),
                ty: id_of(f.get("t"))?,
                go,
                patch: PatchMeta {
                    strategies,
                    merge_key: f.get("pk").and_then(Value::as_str).map(Box::from),
                },
                default: None,
                nullable: false,
            });
        }
    }
    fields.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(MapDef {
        fields: fields.into_boxed_slice(),
        elem: m.get("e").and_then(Value::as_u64).map(|i| i as TypeId),
        atomic: m.get("a").and_then(Value::as_bool).unwrap_or(false),
    })
}
