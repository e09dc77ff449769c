//! One protobuf message to JSON, field by field from the table, with the JSON forms Go gives the
//! Kubernetes types that do not marshal as plain objects (times, quantities, int-or-string, raw JSON,
//! the JSONSchemaProps unions).
//!
//! The Go unmarshalers write every field present on the wire, zero values included (gogo encodes
//! non-pointer fields always); which of them a JSON client would have left out is decided afterwards by
//! the Go JSON round trip of the kind's schema (`schema::normalize`), as for any JSON body.

use base64::Engine as _;
use jiff::Timestamp;
use serde_json::{Map, Number, Value};

use super::wire::{self, Reader};
use super::{Field, ProtoError, TABLE, Ty};

const TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime";
const FIELDS_V1: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const RAW_EXTENSION: &str = "io.k8s.apimachinery.pkg.runtime.RawExtension";
const CRD_V1: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.";

/// The JSON of message `name` encoded as `data`.
pub fn decode_message(name: &str, data: &[u8]) -> Result<Value, ProtoError> {
    if let Some(v) = special(name, data)? {
        return Ok(v);
    }
    let fields = TABLE
        .messages
        .get(name)
        .ok_or_else(|| ProtoError::Wire(format!("no message {name}")))?;
    let mut out = Map::new();
    let mut r = Reader::new(data);
    while !r.done() {
        let (num, w) = r.key()?;
        let Some(f) = fields.get(&num) else {
            r.skip(w)?;
            continue;
        };
        if f.json.is_empty() {
            // An embedded struct: its fields belong to this object.
            let Ty::Message(m) = &f.ty else {
                return Err(wrong_wire(f, w));
            };
            if w != wire::LEN {
                return Err(wrong_wire(f, w));
            }
            if let Value::Object(inner) = decode_message(m, r.bytes()?)? {
                out.extend(inner);
            }
            continue;
        }
        match &f.ty {
            Ty::Map(k, v) => {
                if w != wire::LEN {
                    return Err(wrong_wire(f, w));
                }
                let (key, value) = map_entry(k, v, r.bytes()?)?;
                let slot = out
                    .entry(f.json.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(m) = slot {
                    m.insert(key, value);
                }
            }
            Ty::Scalar(s) if f.repeated && w == wire::LEN && packable(s) => {
                // A packed repeated number: one length-delimited run of values.
                let mut p = Reader::new(r.bytes()?);
                while !p.done() {
                    let v = scalar(s, packed_wire(s), &mut p, f)?;
                    push(&mut out, &f.json, v);
                }
            }
            t => {
                let v = value(t, w, &mut r, f)?;
                if f.repeated {
                    push(&mut out, &f.json, v);
                } else {
                    out.insert(f.json.clone(), v);
                }
            }
        }
    }
    Ok(Value::Object(out))
}

/// Appends `v` to the list under `key`.
fn push(out: &mut Map<String, Value>, key: &str, v: Value) {
    match out
        .entry(key.to_owned())
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        Value::Array(a) => a.push(v),
        other => *other = Value::Array(vec![v]),
    }
}

fn packable(s: &str) -> bool {
    !matches!(s, "string" | "bytes")
}

fn packed_wire(s: &str) -> u8 {
    match s {
        "double" => wire::FIXED64,
        "float" => wire::FIXED32,
        _ => wire::VARINT,
    }
}

fn wrong_wire(f: &Field, w: u8) -> ProtoError {
    ProtoError::Wire(format!("wrong wireType = {w} for field {}", f.json))
}

fn value(t: &Ty, w: u8, r: &mut Reader<'_>, f: &Field) -> Result<Value, ProtoError> {
    match t {
        Ty::Scalar(s) => scalar(s, w, r, f),
        Ty::Message(m) if w == wire::LEN => decode_message(m, r.bytes()?),
        _ => Err(wrong_wire(f, w)),
    }
}

fn scalar(s: &str, w: u8, r: &mut Reader<'_>, f: &Field) -> Result<Value, ProtoError> {
    let want = match s {
        "string" | "bytes" => wire::LEN,
        "double" => wire::FIXED64,
        "float" => wire::FIXED32,
        _ => wire::VARINT,
    };
    if w != want {
        return Err(wrong_wire(f, w));
    }
    Ok(match s {
        "string" => Value::String(String::from_utf8_lossy(r.bytes()?).into_owned()),
        "bytes" => Value::String(base64::engine::general_purpose::STANDARD.encode(r.bytes()?)),
        "bool" => Value::Bool(r.varint()? != 0),
        // Go truncates a varint to the field's width.
        "int32" => Value::from(r.varint()? as i64 as i32),
        "uint32" => Value::from(r.varint()? as u32),
        "int64" => Value::from(r.varint()? as i64),
        "uint64" => Value::from(r.varint()?),
        "double" => float(f64::from_bits(r.fixed64()?)),
        _ => float(f64::from(f32::from_bits(r.fixed32()?))),
    })
}

/// Go writes a float64 without a fraction as an integer (`3`, not `3.0`).
fn float(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        Value::from(x as i64)
    } else {
        Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

/// A map entry: key = 1, value = 2 (absent ones are their type's zero value).
fn map_entry(k: &str, v: &Ty, data: &[u8]) -> Result<(String, Value), ProtoError> {
    let key_field = Field {
        json: "key".into(),
        ty: Ty::Scalar(k.to_owned()),
        repeated: false,
    };
    let value_field = Field {
        json: "value".into(),
        ty: v.clone(),
        repeated: false,
    };
    let (mut key, mut val) = (None, None);
    let mut r = Reader::new(data);
    while !r.done() {
        match r.key()? {
            (1, w) => key = Some(scalar(k, w, &mut r, &key_field)?),
            (2, w) => val = Some(value(v, w, &mut r, &value_field)?),
            (_, w) => r.skip(w)?,
        }
    }
    let key = match key {
        Some(Value::String(s)) => s,
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let val = match (val, v) {
        (Some(v), _) => v,
        (None, Ty::Scalar(s)) if s == "string" || s == "bytes" => Value::String(String::new()),
        (None, Ty::Message(m)) => decode_message(m, &[])?,
        (None, _) => Value::from(0),
    };
    Ok((key, val))
}

/// The JSON forms of the types that do not marshal as an object of their fields; `None` for the others.
fn special(name: &str, data: &[u8]) -> Result<Option<Value>, ProtoError> {
    Ok(Some(match name {
        TIME | MICRO_TIME => {
            // An empty message is the zero time (JSON null). Time keeps whole seconds only, as its
            // Unmarshal does; MicroTime keeps microseconds.
            if data.is_empty() {
                return Ok(Some(Value::Null));
            }
            let (secs, nanos) = (int_field(data, 1)?, int_field(data, 2)?);
            let t = Timestamp::new(secs, 0)
                .map_err(|e| ProtoError::Json(format!("time out of range: {e}")))?;
            let whole = t.strftime("%Y-%m-%dT%H:%M:%S");
            Value::String(if name == TIME {
                format!("{whole}Z")
            } else {
                format!("{whole}.{:06}Z", nanos.rem_euclid(1_000_000_000) / 1000)
            })
        }
        QUANTITY => {
            let s = string_field(data, 1)?;
            Value::String(if s.is_empty() { "0".into() } else { s })
        }
        INT_OR_STRING => {
            if int_field(data, 1)? == 1 {
                Value::String(string_field(data, 3)?)
            } else {
                Value::from(int_field(data, 2)? as i32)
            }
        }
        RAW_EXTENSION | FIELDS_V1 => raw_json(&bytes_field(data, 1)?)?,
        n if n.strip_prefix(CRD_V1) == Some("JSON") => raw_json(&bytes_field(data, 1)?)?,
        n if n.strip_prefix(CRD_V1) == Some("JSONSchemaPropsOrBool") => match schema(data, 2)? {
            Some(s) => s,
            None => Value::Bool(int_field(data, 1)? != 0),
        },
        n if n.strip_prefix(CRD_V1) == Some("JSONSchemaPropsOrArray") => {
            let many = bytes_fields(data, 2)?;
            if many.is_empty() {
                schema(data, 1)?.unwrap_or(Value::Null)
            } else {
                Value::Array(many.iter().map(|s| props(s)).collect::<Result<_, _>>()?)
            }
        }
        n if n.strip_prefix(CRD_V1) == Some("JSONSchemaPropsOrStringArray") => {
            let strings = bytes_fields(data, 2)?;
            if strings.is_empty() {
                schema(data, 1)?.unwrap_or(Value::Null)
            } else {
                let text = |s: &&[u8]| Value::String(String::from_utf8_lossy(s).into_owned());
                Value::Array(strings.iter().map(text).collect())
            }
        }
        _ => return Ok(None),
    }))
}

/// The last JSONSchemaProps in field `num`, if any.
fn schema(data: &[u8], num: u64) -> Result<Option<Value>, ProtoError> {
    bytes_fields(data, num)?
        .last()
        .map(|s| props(s))
        .transpose()
}

fn props(data: &[u8]) -> Result<Value, ProtoError> {
    decode_message(&format!("{CRD_V1}JSONSchemaProps"), data)
}

/// Raw JSON bytes (`RawExtension`, `FieldsV1`, apiextensions `JSON`): empty is null.
fn raw_json(b: &[u8]) -> Result<Value, ProtoError> {
    if b.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(b).map_err(|e| ProtoError::Json(e.to_string()))
}

/// The last varint of field `num` (0 when absent).
fn int_field(data: &[u8], num: u64) -> Result<i64, ProtoError> {
    let mut r = Reader::new(data);
    let mut out = 0;
    while !r.done() {
        match r.key()? {
            (n, wire::VARINT) if n == num => out = r.varint()? as i64,
            (_, w) => r.skip(w)?,
        }
    }
    Ok(out)
}

/// Every length-delimited occurrence of field `num`.
fn bytes_fields(data: &[u8], num: u64) -> Result<Vec<&[u8]>, ProtoError> {
    let mut r = Reader::new(data);
    let mut out = Vec::new();
    while !r.done() {
        match r.key()? {
            (n, wire::LEN) if n == num => out.push(r.bytes()?),
            (_, w) => r.skip(w)?,
        }
    }
    Ok(out)
}

fn bytes_field(data: &[u8], num: u64) -> Result<Vec<u8>, ProtoError> {
    Ok(bytes_fields(data, num)?
        .last()
        .map(|b| b.to_vec())
        .unwrap_or_default())
}

fn string_field(data: &[u8], num: u64) -> Result<String, ProtoError> {
    Ok(String::from_utf8_lossy(&bytes_field(data, num)?).into_owned())
}
