//! core/v1 ConfigMaps.
//!
//! Behaviour from `pkg/apis/core/validation` (`ValidateConfigMap`, `ValidateConfigMapUpdate`): keys
//! of `data` and `binaryData` are config keys and may not repeat across the two, the total size is
//! capped at 1 MiB, `immutable: true` freezes both maps and itself. `binaryData` values are base64
//! like Secret data. No field-label conversion func is registered for ConfigMaps, so field
//! selectors other than `metadata.*` get `DefaultMetaV1FieldSelectorConversion`'s refusal.

use serde_json::{Value, json};

use super::common::{self, key};
use super::secret::{MAX_SECRET_SIZE, validate_immutable_data};
use super::{ResourceInfo, Strategy, TableSpec, Warnings};
use crate::errors::{ApiError, BadValue, FieldError, FieldErrors};
use crate::gojson::json_kind;
use crate::json::meta_str;
use crate::validation::names;

pub struct ConfigMapStrategy {
    info: ResourceInfo,
}

impl Default for ConfigMapStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfigMapStrategy {
    pub fn new() -> Self {
        Self {
            info: ResourceInfo {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
                singular: "configmap".into(),
                namespaced: true,
                short_names: vec!["cm".into()],
                categories: Vec::new(),
                verbs: common::standard_verbs(),
                status_subresource: false,
                storage_version_hash: Some("qFsyl6wFWjQ=".into()),
            },
        }
    }
}

/// Decoding: `binaryData` values are `[]byte` (base64, Go's offsets in errors); `data` values are
/// strings. Both maps are `omitempty`.
pub fn decode_config_map(obj: &mut Value) -> Result<(), String> {
    let Some(map) = obj.as_object_mut() else {
        return Ok(());
    };
    if let Some(Value::Object(entries)) = map.get_mut("binaryData") {
        for v in entries.values_mut() {
            match v {
                Value::Null => {}
                Value::String(s) => {
                    let bytes = common::go_base64_decode(s)
                        .map_err(|at| format!("illegal base64 data at input byte {at}"))?;
                    *s = common::base64_encode(&bytes);
                }
                other => {
                    return Err(format!(
                        "json: cannot unmarshal {} into Go struct field ConfigMap.binaryData of type []uint8",
                        json_kind(other)
                    ));
                }
            }
        }
    }
    if let Some(Value::Object(entries)) = map.get("data") {
        for v in entries.values() {
            if !v.is_string() && !v.is_null() {
                return Err(format!(
                    "json: cannot unmarshal {} into Go struct field ConfigMap.data of type string",
                    json_kind(v)
                ));
            }
        }
    }
    for f in ["data", "binaryData"] {
        if map
            .get(f)
            .is_some_and(|d| d.is_null() || d.as_object().is_some_and(|m| m.is_empty()))
        {
            map.remove(f);
        }
    }
    Ok(())
}

/// `ValidateConfigMap` without `ValidateObjectMeta`.
pub fn validate_config_map(obj: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    let mut total = 0usize;
    let data = obj.get("data").and_then(Value::as_object);
    let binary = obj.get("binaryData").and_then(Value::as_object);
    if let Some(data) = data {
        for (k, v) in data {
            for msg in names::legacy::is_config_map_key(k) {
                errs.push(FieldError::invalid(
                    key("data", k),
                    BadValue::Str(k.clone()),
                    msg,
                ));
            }
            if binary.is_some_and(|b| b.contains_key(k)) {
                errs.push(FieldError::invalid(
                    key("data", k),
                    BadValue::Str(k.clone()),
                    "duplicate of key present in binaryData",
                ));
            }
            total += v.as_str().map_or(0, str::len);
        }
    }
    if let Some(binary) = binary {
        for (k, v) in binary {
            for msg in names::legacy::is_config_map_key(k) {
                errs.push(FieldError::invalid(
                    key("binaryData", k),
                    BadValue::Str(k.clone()),
                    msg,
                ));
            }
            total += v
                .as_str()
                .and_then(|s| common::go_base64_decode(s).ok())
                .map_or(0, |b| b.len());
        }
    }
    if total > MAX_SECRET_SIZE {
        // The real server passes an empty path: the error is about the whole object.
        errs.push(FieldError::too_long("", MAX_SECRET_SIZE));
    }
    errs
}

impl Strategy for ConfigMapStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn decode(&self, obj: &mut Value) -> Result<Warnings, ApiError> {
        decode_config_map(obj).map_err(|e| common::decode_error("ConfigMap", "v1", &e))?;
        Ok(Vec::new())
    }

    fn validate_create(&self, obj: &Value) -> FieldErrors {
        validate_config_map(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> FieldErrors {
        let mut errs = validate_immutable_data(new, old, &["data", "binaryData"]);
        errs.extend(validate_config_map(new));
        errs
    }

    fn convert_field_label(&self, label: &str) -> Result<String, String> {
        match label {
            "metadata.namespace" | "metadata.name" => Ok(label.to_string()),
            _ => Err(common::field_label_not_known(label)),
        }
    }

    fn table(&self) -> Option<&'static TableSpec> {
        Some(&CONFIG_MAP_TABLE)
    }
}

static CONFIG_MAP_TABLE: TableSpec = TableSpec {
    columns: &[
        ("Name", "string", "name", common::NAME_DESCRIPTION, 0),
        (
            "Data",
            "string",
            "",
            "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
            0,
        ),
        ("Age", "string", "", common::AGE_DESCRIPTION, 0),
    ],
    cells: config_map_cells,
};

fn config_map_cells(obj: &Value) -> Vec<Value> {
    let count = |f: &str| obj.get(f).and_then(Value::as_object).map_or(0, |m| m.len());
    vec![
        json!(meta_str(obj, "name")),
        json!(count("data") + count("binaryData")),
        json!(common::creation_age(obj)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_duplicates_and_binary_data() {
        let s = ConfigMapStrategy::new();
        let mut obj = json!({"data": {"a": "1", "bad/key": "x"}, "binaryData": {"a": "AQI="}});
        s.decode(&mut obj).unwrap();
        let msgs: Vec<String> = s
            .validate_create(&obj)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs[0],
            "data[a]: Invalid value: \"a\": duplicate of key present in binaryData"
        );
        assert!(
            msgs[1].starts_with("data[bad/key]: Invalid value: \"bad/key\": a valid config key")
        );
        let mut bad = json!({"binaryData": {"x": "%"}});
        assert_eq!(
            s.decode(&mut bad).unwrap_err().message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: illegal base64 data at input byte 0"
        );
        let big = json!({"data": {"k": "x".repeat(MAX_SECRET_SIZE + 1)}});
        assert_eq!(
            s.validate_create(&big)[0].message(),
            ": Too long: may not be more than 1048576 bytes"
        );
    }

    #[test]
    fn immutable_freezes_both_maps() {
        let s = ConfigMapStrategy::new();
        let old = json!({"immutable": true, "data": {"a": "1"}});
        let new = json!({"immutable": true, "data": {"a": "2"}, "binaryData": {"b": "AA=="}});
        let msgs: Vec<String> = s
            .validate_update(&new, &old)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            [
                "data: Forbidden: field is immutable when `immutable` is set",
                "binaryData: Forbidden: field is immutable when `immutable` is set"
            ]
        );
        assert!(s.validate_update(&old, &old).is_empty());
        assert_eq!(
            s.convert_field_label("data.a"),
            Err("\"data.a\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"".into())
        );
    }
}
