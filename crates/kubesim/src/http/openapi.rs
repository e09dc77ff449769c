//! `/openapi/v2`: the Swagger 2.0 definitions of the built-in kinds, generated from kubesim's own schema
//! data (`schema/builtin.json`), served as JSON or in the gnostic protobuf encoding kubectl asks for
//! (`Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, answered as
//! `application/octet-stream` like kube-openapi's handler). kubectl validates `create -f` input
//! against it (unknown fields, types) before sending, as it does against a real cluster.

use std::collections::HashMap;
use std::sync::LazyLock;

use bytes::Bytes;
use serde_json::{Map, Value, json};

const BUILTIN_JSON: &str = include_str!("../../schema/builtin.json");

/// The document as JSON.
pub static DOCUMENT: LazyLock<Value> = LazyLock::new(build);

/// The document, encoded once per process.
pub static JSON_BYTES: LazyLock<Bytes> =
    LazyLock::new(|| Bytes::from(serde_json::to_vec(&*DOCUMENT).unwrap_or_default()));
pub static PROTO_BYTES: LazyLock<Bytes> = LazyLock::new(|| Bytes::from(encode_document(&DOCUMENT)));

fn build() -> Value {
    let data: Value = serde_json::from_str(BUILTIN_JSON).unwrap_or_default();
    let types = data["types"].as_array().cloned().unwrap_or_default();
    let named: HashMap<u64, String> = data["named"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_u64().map(|i| (i, k.clone())))
                .collect()
        })
        .unwrap_or_default();
    let mut defs = Map::new();
    let mut names: Vec<(&u64, &String)> = named.iter().collect();
    names.sort_by(|a, b| a.1.cmp(b.1));
    for (idx, name) in names {
        if name.starts_with("__") {
            continue;
        }
        defs.insert(name.clone(), schema_of(&types, &named, *idx, true, 0));
    }
    if let Some(kinds) = data["kinds"].as_object() {
        for (gvk, def) in kinds {
            let parts: Vec<&str> = gvk.split('/').collect();
            let (group, version, kind) = match parts.as_slice() {
                [v, k] => ("", *v, *k),
                [g, v, k] => (*g, *v, *k),
                _ => continue,
            };
            if let Some(Value::Object(d)) = def.as_str().and_then(|n| defs.get_mut(n)) {
                d.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([{"group": group, "kind": kind, "version": version}]),
                );
            }
        }
    }
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.36.0"}, "paths": {}, "definitions": defs})
}

fn schema_of(
    types: &[Value],
    named: &HashMap<u64, String>,
    idx: u64,
    top: bool,
    depth: usize,
) -> Value {
    if !top && let Some(n) = named.get(&idx).filter(|n| !n.starts_with("__")) {
        return json!({"$ref": format!("#/definitions/{n}")});
    }
    let Some(t) = types.get(idx as usize) else {
        return json!({});
    };
    if depth > 32 {
        return json!({});
    }
    if let Some(s) = t.get("s").and_then(Value::as_str) {
        if t.get("m").is_some() || t.get("l").is_some() {
            return json!({});
        }
        return match s {
            "string" => json!({"type": "string"}),
            "numeric" => json!({"type": "integer"}),
            "boolean" => json!({"type": "boolean"}),
            _ => json!({}),
        };
    }
    if let Some(l) = t.get("l") {
        let elem = l["e"].as_u64().unwrap_or(0);
        return json!({"type": "array", "items": schema_of(types, named, elem, false, depth + 1)});
    }
    if let Some(m) = t.get("m") {
        let fields = m["f"].as_array().cloned().unwrap_or_default();
        if fields.is_empty() {
            let mut out = json!({"type": "object"});
            if let Some(e) = m.get("e").and_then(Value::as_u64) {
                out["additionalProperties"] = schema_of(types, named, e, false, depth + 1);
            }
            return out;
        }
        let mut props = Map::new();
        for f in fields {
            let (Some(n), Some(ft)) = (f["n"].as_str(), f["t"].as_u64()) else {
                continue;
            };
            props.insert(n.to_string(), schema_of(types, named, ft, false, depth + 1));
        }
        return json!({"type": "object", "properties": props});
    }
    json!({})
}

// --------------------------------------------------------------------------- protobuf encoding

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn bytes_field(field: u32, data: &[u8], out: &mut Vec<u8>) {
    varint(u64::from(field) << 3 | 2, out);
    varint(data.len() as u64, out);
    out.extend_from_slice(data);
}

fn string_field(field: u32, s: &str, out: &mut Vec<u8>) {
    if !s.is_empty() {
        bytes_field(field, s.as_bytes(), out);
    }
}

fn encode_document(doc: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string_field(1, doc["swagger"].as_str().unwrap_or("2.0"), &mut out);
    let mut info = Vec::new();
    string_field(1, doc["info"]["title"].as_str().unwrap_or(""), &mut info);
    string_field(2, doc["info"]["version"].as_str().unwrap_or(""), &mut info);
    bytes_field(2, &info, &mut out);
    bytes_field(8, &[], &mut out);
    let mut defs = Vec::new();
    if let Some(m) = doc["definitions"].as_object() {
        for (name, schema) in m {
            bytes_field(1, &named_schema(name, schema), &mut defs);
        }
    }
    bytes_field(9, &defs, &mut out);
    out
}

fn named_schema(name: &str, schema: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string_field(1, name, &mut out);
    bytes_field(2, &encode_schema(schema), &mut out);
    out
}

fn encode_schema(s: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        string_field(1, r, &mut out);
    }
    if let Some(ap) = s.get("additionalProperties") {
        let mut item = Vec::new();
        bytes_field(1, &encode_schema(ap), &mut item);
        bytes_field(21, &item, &mut out);
    }
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        let mut ti = Vec::new();
        string_field(1, t, &mut ti);
        bytes_field(22, &ti, &mut out);
    }
    if let Some(items) = s.get("items") {
        let mut ii = Vec::new();
        bytes_field(1, &encode_schema(items), &mut ii);
        bytes_field(23, &ii, &mut out);
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        let mut p = Vec::new();
        for (n, v) in props {
            bytes_field(1, &named_schema(n, v), &mut p);
        }
        bytes_field(25, &p, &mut out);
    }
    if let Some(gvks) = s
        .get("x-kubernetes-group-version-kind")
        .and_then(Value::as_array)
    {
        let mut yaml = String::new();
        for g in gvks {
            yaml.push_str(&format!(
                "- group: {}\n  kind: {}\n  version: {}\n",
                quote_yaml(g["group"].as_str().unwrap_or("")),
                g["kind"].as_str().unwrap_or(""),
                g["version"].as_str().unwrap_or("")
            ));
        }
        let mut any = Vec::new();
        string_field(2, &yaml, &mut any);
        let mut named = Vec::new();
        string_field(1, "x-kubernetes-group-version-kind", &mut named);
        bytes_field(2, &any, &mut named);
        bytes_field(31, &named, &mut out);
    }
    out
}

fn quote_yaml(s: &str) -> String {
    if s.is_empty() {
        "\"\"".into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_cover_the_served_kinds_with_their_gvk() {
        let d = &DOCUMENT["definitions"];
        let job = &d["io.k8s.api.batch.v1.Job"];
        assert_eq!(job["x-kubernetes-group-version-kind"][0]["kind"], "Job");
        assert_eq!(
            job["properties"]["spec"]["$ref"],
            "#/definitions/io.k8s.api.batch.v1.JobSpec"
        );
        assert_eq!(
            d["io.k8s.api.batch.v1.JobSpec"]["properties"]["parallelism"]["type"],
            "integer"
        );
        assert_eq!(
            d["io.k8s.api.core.v1.Secret"]["x-kubernetes-group-version-kind"][0]["group"],
            ""
        );
        assert!(PROTO_BYTES.len() > 1000);
    }

    #[test]
    fn protobuf_framing() {
        let mut v = Vec::new();
        varint(300, &mut v);
        assert_eq!(v, [0xac, 0x02]);
        let mut f = Vec::new();
        string_field(1, "2.0", &mut f);
        assert_eq!(f, [0x0a, 3, b'2', b'.', b'0']);
    }
}
