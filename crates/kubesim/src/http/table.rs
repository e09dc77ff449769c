//! `as=Table` responses (what `kubectl get` asks for).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::{Api, Served};
use crate::kinds::common::{AGE_DESCRIPTION, NAME_DESCRIPTION};
use crate::store::Stored;

/// A Table of `items`. `include` is `includeObject` (`None`, `Metadata` (default) or `Object`).
pub fn table(
    api: &Api,
    s: &Served,
    items: &[Arc<Stored>],
    list_meta: Value,
    include: &str,
) -> Value {
    let spec = s.strategy.table();
    let columns: Vec<Value> = match spec {
        Some(t) => t
            .columns
            .iter()
            .map(|(n, ty, fmt, d, p)| json!({"name": n, "type": ty, "format": fmt, "description": d, "priority": p}))
            .collect(),
        None => vec![
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0}),
            json!({"name": "Created At", "type": "date", "format": "", "description": AGE_DESCRIPTION, "priority": 0}),
        ],
    };
    let rows: Vec<Value> = items
        .iter()
        .map(|st| {
            let obj = api.served_value(s, st);
            let cells = match spec {
                Some(t) => (t.cells)(&obj),
                None => vec![
                    obj.pointer("/metadata/name")
                        .cloned()
                        .unwrap_or(Value::Null),
                    obj.pointer("/metadata/creationTimestamp")
                        .cloned()
                        .unwrap_or(Value::Null),
                ],
            };
            let mut row = json!({"cells": cells});
            match include {
                "None" => {}
                "Object" => row["object"] = obj,
                _ => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": obj.get("metadata").cloned().unwrap_or_default(),
                    })
                }
            }
            row
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": columns, "rows": rows})
}
