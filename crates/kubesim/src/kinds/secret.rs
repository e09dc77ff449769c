//! core/v1 Secrets.
//!
//! Behaviour from `pkg/apis/core/v1/conversion.go` (`stringData` merged into `data` while decoding),
//! `pkg/apis/core/v1/defaults.go` (`type` defaults to `Opaque`), `pkg/apis/core/validation`
//! (`ValidateSecret`, `ValidateSecretUpdate`) and `pkg/registry/core/secret/strategy.go` (field
//! selector `type`), held to `secrets.json` and `patch_secret.json`.

use serde_json::{Map, Value, json};

use super::common::{self, key};
use super::{ResourceInfo, Strategy, TableSpec, Warnings};
use crate::errors::{ApiError, BadValue, FieldError, FieldErrors};
use crate::gojson::json_kind;
use crate::json::{ensure_obj, meta_str, str_at};
use crate::validation::names;

/// `core.MaxSecretSize`: the decoded data of one Secret (and one ConfigMap) may not exceed 1 MiB.
pub const MAX_SECRET_SIZE: usize = 1024 * 1024;

pub const TYPE_OPAQUE: &str = "Opaque";
pub const TYPE_SERVICE_ACCOUNT_TOKEN: &str = "kubernetes.io/service-account-token";
pub const TYPE_DOCKERCFG: &str = "kubernetes.io/dockercfg";
pub const TYPE_DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
pub const TYPE_BASIC_AUTH: &str = "kubernetes.io/basic-auth";
pub const TYPE_SSH_AUTH: &str = "kubernetes.io/ssh-auth";
pub const TYPE_TLS: &str = "kubernetes.io/tls";

const IMMUTABLE_MSG: &str = "field is immutable when `immutable` is set";

pub struct SecretStrategy {
    info: ResourceInfo,
}

impl Default for SecretStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl SecretStrategy {
    pub fn new() -> Self {
        Self {
            info: ResourceInfo {
                group: String::new(),
                version: "v1".into(),
                kind: "Secret".into(),
                plural: "secrets".into(),
                singular: "secret".into(),
                namespaced: true,
                short_names: Vec::new(),
                categories: Vec::new(),
                verbs: common::standard_verbs(),
                status_subresource: false,
                storage_version_hash: Some("S6u1pOWzb84=".into()),
            },
        }
    }
}

/// The decode step of `runtime.Decode` for a Secret: every `data` value must be base64 (Go's
/// StdEncoding; newlines tolerated and dropped, as re-encoding the bytes does), then `stringData`
/// overwrites `data` and disappears. The error is the bare cause (`illegal base64 data at input
/// byte N`); `decode` wraps it the way the codec does.
///
/// Go reports the first bad value in document order; JSON objects here are key-sorted, so with
/// several bad values the first in key order is reported.
pub fn decode_secret(obj: &mut Value) -> Result<(), String> {
    let Some(map) = obj.as_object_mut() else {
        return Ok(());
    };
    if let Some(data) = map.get_mut("data") {
        match data {
            Value::Null => {}
            Value::Object(entries) => {
                for v in entries.values_mut() {
                    match v {
                        // A null value decodes to a nil []byte and is written back as null.
                        Value::Null => {}
                        Value::String(s) => {
                            let bytes = common::go_base64_decode(s)
                                .map_err(|at| format!("illegal base64 data at input byte {at}"))?;
                            let canonical = common::base64_encode(&bytes);
                            if canonical != *s {
                                *s = canonical;
                            }
                        }
                        other => {
                            return Err(format!(
                                "json: cannot unmarshal {} into Go struct field Secret.data of type []uint8",
                                json_kind(other)
                            ));
                        }
                    }
                }
            }
            other => {
                return Err(format!(
                    "json: cannot unmarshal {} into Go struct field Secret.data of type map[string][]uint8",
                    json_kind(other)
                ));
            }
        }
    }
    if let Some(string_data) = map.remove("stringData") {
        match string_data {
            Value::Null => {}
            Value::Object(entries) => {
                if !entries.is_empty() {
                    let data = ensure_obj(obj, "data");
                    if let Some(data) = data {
                        for (k, v) in entries {
                            let text = match v {
                                Value::String(s) => s,
                                Value::Null => String::new(),
                                other => {
                                    return Err(format!(
                                        "json: cannot unmarshal {} into Go struct field Secret.stringData of type string",
                                        json_kind(&other)
                                    ));
                                }
                            };
                            data.insert(k, Value::String(common::base64_encode(text.as_bytes())));
                        }
                    }
                }
            }
            other => {
                return Err(format!(
                    "json: cannot unmarshal {} into Go struct field Secret.stringData of type map[string]string",
                    json_kind(&other)
                ));
            }
        }
    }
    // `data` is `omitempty`: an empty map is not written back.
    if let Some(map) = obj.as_object_mut()
        && map
            .get("data")
            .is_some_and(|d| d.is_null() || d.as_object().is_some_and(Map::is_empty))
    {
        map.remove("data");
    }
    Ok(())
}

/// Number of bytes a canonical (padded) base64 string decodes to.
fn decoded_len(s: &str) -> usize {
    let pad = s.bytes().rev().take_while(|b| *b == b'=').count();
    (s.len() / 4 * 3).saturating_sub(pad)
}

fn data_map(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("data").and_then(Value::as_object)
}

/// `ValidateSecret` without its `ValidateObjectMeta` call (the generic flow does that).
pub fn validate_secret(obj: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    let data = data_map(obj);
    let mut total = 0usize;
    if let Some(data) = data {
        // Go iterates a map (random order); key order is the deterministic choice here.
        for (k, v) in data {
            for msg in names::legacy::is_config_map_key(k) {
                errs.push(FieldError::invalid(
                    key("data", k),
                    BadValue::Str(k.clone()),
                    msg,
                ));
            }
            total += v.as_str().map(decoded_len).unwrap_or(0);
        }
    }
    if total > MAX_SECRET_SIZE {
        errs.push(FieldError::too_long("data", MAX_SECRET_SIZE));
    }
    let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
    let typ = str_at(obj, &["type"]);
    match typ {
        TYPE_SERVICE_ACCOUNT_TOKEN
            if str_at(
                obj,
                &[
                    "metadata",
                    "annotations",
                    "kubernetes.io/service-account.name",
                ],
            )
            .is_empty() =>
        {
            // Only the annotation is required; the token controller fills in the rest.
            errs.push(FieldError::required(
                key("metadata.annotations", "kubernetes.io/service-account.name"),
                "",
            ));
        }
        TYPE_DOCKERCFG | TYPE_DOCKER_CONFIG_JSON => {
            let k = if typ == TYPE_DOCKERCFG {
                ".dockercfg"
            } else {
                ".dockerconfigjson"
            };
            match data.and_then(|d| d.get(k)) {
                None => errs.push(FieldError::required(key("data", k), "")),
                Some(v) => {
                    let bytes = v
                        .as_str()
                        .and_then(|s| common::go_base64_decode(s).ok())
                        .unwrap_or_default();
                    if let Some(why) = json_object_error(&bytes) {
                        errs.push(FieldError::invalid(
                            key("data", k),
                            BadValue::Str("<secret contents redacted>".into()),
                            why,
                        ));
                    }
                }
            }
        }
        // Username or password may be empty, but one of the keys must be present.
        TYPE_BASIC_AUTH if !has("username") && !has("password") => {
            errs.push(FieldError::required(key("data", "username"), ""));
            errs.push(FieldError::required(key("data", "password"), ""));
        }
        TYPE_SSH_AUTH => {
            let empty = data
                .and_then(|d| d.get("ssh-privatekey"))
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if empty {
                errs.push(FieldError::required(key("data", "ssh-privatekey"), ""));
            }
        }
        TYPE_TLS => {
            if !has("tls.crt") {
                errs.push(FieldError::required(key("data", "tls.crt"), ""));
            }
            if !has("tls.key") {
                errs.push(FieldError::required(key("data", "tls.key"), ""));
            }
        }
        _ => {}
    }
    errs
}

/// Why `json.Unmarshal(bytes, &map[string]interface{}{})` fails, in Go's words (the common cases).
fn json_object_error(bytes: &[u8]) -> Option<String> {
    let trimmed: &[u8] = {
        let start = bytes
            .iter()
            .position(|b| !b" \t\r\n".contains(b))
            .unwrap_or(bytes.len());
        &bytes[start..]
    };
    if trimmed.is_empty() {
        return Some("unexpected end of JSON input".into());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(_)) => None,
        Ok(other) => Some(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&other)
        )),
        Err(e) if e.is_eof() => Some("unexpected end of JSON input".into()),
        Err(_) => {
            let c = trimmed[0] as char;
            if "{[\"-0123456789tfn".contains(c) {
                Some("invalid character in JSON input".into())
            } else {
                Some(format!(
                    "invalid character {} looking for beginning of value",
                    go_quote_rune(c)
                ))
            }
        }
    }
}

/// Go's `%q` of a rune (as json's `quoteChar` prints it: single quotes).
fn go_quote_rune(c: char) -> String {
    match c {
        '\'' => "'\\''".into(),
        '"' => "'\"'".into(),
        c if c.is_control() => format!("'\\x{:02x}'", c as u32),
        c => format!("'{c}'"),
    }
}

/// `ValidateSecretUpdate` without the ObjectMeta parts: `type` immutable, `immutable: true` freezes
/// `data` and itself, then the create checks on the new object.
pub fn validate_secret_update(new: &Value, old: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    let new_type = new.get("type").cloned().unwrap_or(json!(""));
    let old_type = old.get("type").cloned().unwrap_or(json!(""));
    if new_type != old_type {
        errs.push(FieldError::invalid(
            "type",
            BadValue::from_json(&new_type),
            "field is immutable",
        ));
    }
    errs.extend(validate_immutable_data(new, old, &["data"]));
    errs.extend(validate_secret(new));
    errs
}

/// The `immutable: true` rules shared with ConfigMaps: the flag may not be cleared, and each of
/// `fields` must stay equal.
pub fn validate_immutable_data(new: &Value, old: &Value, fields: &[&str]) -> FieldErrors {
    let mut errs = Vec::new();
    if old.get("immutable").and_then(Value::as_bool) == Some(true) {
        if new.get("immutable").and_then(Value::as_bool) != Some(true) {
            errs.push(FieldError::forbidden("immutable", IMMUTABLE_MSG));
        }
        for f in fields {
            // An empty map and a missing one are the same Go value (`omitempty` nil map).
            let norm = |v: Option<&Value>| match v {
                Some(Value::Object(m)) if m.is_empty() => None,
                Some(Value::Null) => None,
                other => other.cloned(),
            };
            if norm(new.get(*f)) != norm(old.get(*f)) {
                errs.push(FieldError::forbidden(*f, IMMUTABLE_MSG));
            }
        }
    }
    errs
}

/// The 422 the real server answers when a merge patch (or JSON patch) produces a document that
/// does not decode, e.g. a `data` value that is not base64 (patch_secret.json "merge: invalid
/// base64"): an Invalid error with no kind and no name, one cause on field `patch` whose value is
/// the whole patched document as text. `patched_text` is `merge_patched_text(current, patch)`;
/// `cause` is the bare decode error (`common::decode_error_cause` of what `decode` answered).
pub fn patch_decode_error(patched_text: &str, cause: &str) -> ApiError {
    ApiError::invalid(
        "",
        "",
        "",
        &[FieldError::invalid(
            "patch",
            BadValue::Str(patched_text.to_string()),
            cause,
        )],
    )
}

/// The strategic-merge-patch flavour of the same error: the server prints the *patch* (not the
/// result) with Go's `%+v` (`map[data:map[bad:!!!]]`).
pub fn strategic_patch_decode_error(patch: &Value, cause: &str) -> ApiError {
    ApiError::invalid(
        "",
        "",
        "",
        &[FieldError::invalid(
            "patch",
            BadValue::Str(common::go_print_v(patch)),
            cause,
        )],
    )
}

/// The Go field order of a Secret as the server encodes it.
pub fn secret_wire_order(path: &[&str]) -> Option<&'static [&'static str]> {
    match path {
        [] => Some(&[
            "kind",
            "apiVersion",
            "metadata",
            "immutable",
            "data",
            "stringData",
            "type",
        ]),
        _ => common::object_meta_order(path),
    }
}

/// The text of the document a merge patch produces from `current` (the stored Secret as served,
/// managedFields included), as the server shows it in `patch_decode_error`.
pub fn merge_patched_text(current: &Value, patch: &Value) -> String {
    common::merge_patch_text(current, patch, secret_wire_order)
}

impl Strategy for SecretStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn decode(&self, obj: &mut Value) -> Result<Warnings, ApiError> {
        decode_secret(obj).map_err(|e| common::decode_error("Secret", "v1", &e))?;
        Ok(Vec::new())
    }

    fn default(&self, obj: &mut Value) {
        // SetDefaults_Secret.
        if let Some(m) = obj.as_object_mut() {
            let empty = m
                .get("type")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if empty {
                m.insert("type".into(), json!(TYPE_OPAQUE));
            }
        }
    }

    fn validate_create(&self, obj: &Value) -> FieldErrors {
        validate_secret(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> FieldErrors {
        validate_secret_update(new, old)
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "type" => Some(str_at(obj, &["type"]).to_string()),
            _ => None,
        }
    }

    fn convert_field_label(&self, label: &str) -> Result<String, String> {
        match label {
            "type" | "metadata.namespace" | "metadata.name" => Ok(label.to_string()),
            _ => Err(common::field_label_not_supported(label)),
        }
    }

    fn table(&self) -> Option<&'static TableSpec> {
        Some(&SECRET_TABLE)
    }
}

static SECRET_TABLE: TableSpec = TableSpec {
    columns: &[
        ("Name", "string", "name", common::NAME_DESCRIPTION, 0),
        (
            "Type",
            "string",
            "",
            "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
            0,
        ),
        (
            "Data",
            "string",
            "",
            "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
            0,
        ),
        ("Age", "string", "", common::AGE_DESCRIPTION, 0),
    ],
    cells: secret_cells,
};

fn secret_cells(obj: &Value) -> Vec<Value> {
    vec![
        json!(meta_str(obj, "name")),
        json!(str_at(obj, &["type"])),
        json!(data_map(obj).map_or(0, Map::len)),
        json!(common::creation_age(obj)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::testutil::{fixture, invalid_status, step};

    fn decoded(mut body: Value) -> Value {
        let s = SecretStrategy::new();
        s.decode(&mut body).expect("decodes");
        s.default(&mut body);
        body
    }

    /// Compares the kind-specific part of a created Secret with the recorded response.
    fn assert_payload(got: &Value, recorded: &Value) {
        for k in ["data", "type", "immutable", "stringData"] {
            assert_eq!(got.get(k), recorded.get(k), "field {k}");
        }
    }

    #[test]
    fn create_merges_string_data_and_defaults_type() {
        let f = fixture("secrets.json");
        for name in [
            "create with data and stringData",
            "create without type (defaults Opaque)",
            "create immutable secret",
        ] {
            let st = step(&f, name);
            let got = decoded(st["request"]["body"].clone());
            assert_payload(&got, &st["response"]["body"]);
            assert!(SecretStrategy::new().validate_create(&got).is_empty());
        }
    }

    #[test]
    fn invalid_base64_is_a_400_with_gos_offset() {
        let f = fixture("secrets.json");
        let st = step(&f, "create invalid base64");
        let mut body = st["request"]["body"].clone();
        let err = SecretStrategy::new().decode(&mut body).unwrap_err();
        assert_eq!(err.to_status(), st["response"]["body"]);
    }

    #[test]
    fn create_validation_matches_recordings() {
        let f = fixture("secrets.json");
        for name in ["create invalid key name", "create tls secret missing keys"] {
            let st = step(&f, name);
            let obj = decoded(st["request"]["body"].clone());
            let errs = SecretStrategy::new().validate_create(&obj);
            assert_eq!(
                invalid_status("", "Secret", &obj, &errs),
                st["response"]["body"],
                "{name}"
            );
        }
    }

    #[test]
    fn update_validation_matches_recordings() {
        let f = fixture("secrets.json");
        let old = step(&f, "get")["response"]["body"].clone();
        let st = step(&f, "update: change type");
        let new = decoded(st["request"]["body"].clone());
        let errs = SecretStrategy::new().validate_update(&new, &old);
        assert_eq!(
            invalid_status("", "Secret", &new, &errs),
            st["response"]["body"]
        );

        // stringData on PUT replaces the value in data.
        let st = step(&f, "update: data via stringData on PUT");
        let new = decoded(st["request"]["body"].clone());
        assert!(SecretStrategy::new().validate_update(&new, &old).is_empty());
        assert_payload(&new, &st["response"]["body"]);
    }

    /// The merge-patch steps on the immutable Secret: the lead's flow applies the patch, then
    /// decode/default/validate_update run on the result.
    #[test]
    fn immutable_secret_patches() {
        let f = fixture("secrets.json");
        let old = step(&f, "create immutable secret")["response"]["body"].clone();
        for name in [
            "patch immutable secret data",
            "patch immutable secret labels (allowed)",
            "patch immutable=false",
        ] {
            let st = step(&f, name);
            let mut patched = old.clone();
            json_patch::merge(&mut patched, &st["request"]["body"]);
            let new = decoded(patched);
            let errs = SecretStrategy::new().validate_update(&new, &old);
            if st["response"]["code"] == 200 {
                assert!(errs.is_empty(), "{name}: {errs:?}");
                assert_payload(&new, &st["response"]["body"]);
            } else {
                assert_eq!(
                    invalid_status("", "Secret", &new, &errs),
                    st["response"]["body"],
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn patch_secret_steps() {
        let f = fixture("patch_secret.json");
        let mut current = step(&f, "create secret")["response"]["body"].clone();
        for name in [
            "merge: add data key and label",
            "merge: stringData",
            "merge: remove data key with null",
        ] {
            let st = step(&f, name);
            let mut patched = current.clone();
            json_patch::merge(&mut patched, &st["request"]["body"]);
            let new = decoded(patched);
            assert!(
                SecretStrategy::new()
                    .validate_update(&new, &current)
                    .is_empty()
            );
            assert_payload(&new, &st["response"]["body"]);
            current = st["response"]["body"].clone();
        }
        // merge: change type (later in the file, same rules).
        let st = step(&f, "merge: change type");
        let before = step(&f, "get final")["response"]["body"].clone();
        let mut patched = before.clone();
        json_patch::merge(&mut patched, &st["request"]["body"]);
        let new = decoded(patched);
        let errs = SecretStrategy::new().validate_update(&new, &before);
        assert_eq!(
            invalid_status("", "Secret", &new, &errs),
            st["response"]["body"]
        );
    }

    /// patch_secret.json "merge: invalid base64": the whole patched document, as the server encodes
    /// it (untouched nodes in Go field order, merged nodes with sorted keys), in a kindless 422.
    #[test]
    fn merge_patch_with_bad_base64_reports_the_patched_document() {
        let f = fixture("patch_secret.json");
        // The object the server patched, as it was stored then (managedFields included).
        let current = step(&f, "merge: remove data key with null")["response"]["body"].clone();
        let recorded_msg = step(&f, "merge: invalid base64")["response"]["body"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(current["metadata"].get("managedFields").is_some());
        let st = step(&f, "merge: invalid base64");
        let patch = &st["request"]["body"];
        let text = merge_patched_text(&current, patch);
        let mut patched = current.clone();
        json_patch::merge(&mut patched, patch);
        let decode_err = SecretStrategy::new().decode(&mut patched).unwrap_err();
        let cause = common::decode_error_cause(&decode_err.message);
        // The recording's placeholders (`<uid:1>`, `<run>`) were substituted after the fact; the
        // real values contain no `<`/`>`, which Go's encoder would escape. Undo that escaping for
        // the comparison only.
        let text = text.replace("\\u003c", "<").replace("\\u003e", ">");
        let err = patch_decode_error(&text, cause);
        assert_eq!(err.message, recorded_msg);
        assert_eq!(err.to_status(), st["response"]["body"]);
    }

    #[test]
    fn type_specific_required_keys() {
        let s = SecretStrategy::new();
        let errs = s.validate_create(&json!({"type": TYPE_BASIC_AUTH}));
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["data[username]", "data[password]"]);
        let errs = s.validate_create(&json!({"type": TYPE_SERVICE_ACCOUNT_TOKEN}));
        assert_eq!(
            errs[0].message(),
            "metadata.annotations[kubernetes.io/service-account.name]: Required value"
        );
        let errs = s.validate_create(
            &json!({"type": TYPE_DOCKER_CONFIG_JSON, "data": {".dockerconfigjson": "e30="}}),
        );
        assert!(errs.is_empty());
        let errs = s.validate_create(
            &json!({"type": TYPE_DOCKER_CONFIG_JSON, "data": {".dockerconfigjson": "W10="}}),
        );
        assert_eq!(
            errs[0].message(),
            "data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        let big = common::base64_encode(&vec![b'x'; MAX_SECRET_SIZE + 1]);
        let errs = s.validate_create(&json!({"type": "Opaque", "data": {"k": big}}));
        assert_eq!(
            errs[0].message(),
            "data: Too long: may not be more than 1048576 bytes"
        );
    }

    #[test]
    fn field_selector_type() {
        let s = SecretStrategy::new();
        assert_eq!(s.convert_field_label("type"), Ok("type".into()));
        assert_eq!(
            s.convert_field_label("data"),
            Err("field label not supported: data".into())
        );
        assert_eq!(
            s.field_value(&json!({"type": "Opaque"}), "type").as_deref(),
            Some("Opaque")
        );
    }

    #[test]
    fn table_cells() {
        let t = SecretStrategy::new().table().unwrap();
        let cells = (t.cells)(
            &json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "", "b": ""}}),
        );
        assert_eq!(cells[..3], [json!("s"), json!("Opaque"), json!(2)]);
        assert_eq!(cells[3], json!("<unknown>"));
    }
}
