//! `application/vnd.kubernetes.protobuf` request bodies, as kubectl's typed commands send them for
//! built-in kinds (`create namespace`, `create secret`, `create configmap`, `auth can-i`...).
//!
//! A body is the magic `k8s\0`, then a `runtime.Unknown` message: the object's `apiVersion`/`kind` and
//! its own protobuf encoding. The object is turned into the JSON a JSON client would have sent for the
//! same Go struct (every field the Go type always writes, nothing it omits when empty), so the request
//! then goes through the JSON path unchanged: the same defaulting, validation and field managers.
//!
//! Field numbers and types come from `schema/protobuf.json`, generated from the v1.36 `generated.proto`
//! files by `schema/tools/gen_protobuf.py`. A hand-written table-driven decoder instead of the `k8s-pb`
//! crate (0.9.0, v1.35 types, prost 0.14): its ~1,260 prost structs carry no JSON mapping, so a converter
//! for each of the 165 message types reachable from the served kinds would still be needed on top, and
//! it costs about a minute of CPU to compile (4.5 minutes on this busy 2-core machine). The table covers
//! exactly the served kinds at v1.36 in 40 KB of data, read by ~400 lines.

mod decode;
mod wire;

use std::collections::HashMap;
use std::sync::LazyLock;

use serde_json::Value;

pub use decode::decode_message;

pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// What every protobuf-encoded Kubernetes object starts with.
const MAGIC: [u8; 4] = *b"k8s\0";

/// Why a body could not be read, worded like the Go decoder's errors.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error("empty data")]
    EmptyData,
    #[error(
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    )]
    NoPrefix,
    #[error("empty body")]
    EmptyBody,
    #[error("unexpected EOF")]
    UnexpectedEof,
    #[error("proto: integer overflow")]
    Overflow,
    #[error("proto: negative length found during unmarshaling")]
    NegativeLength,
    #[error("proto: {0}")]
    Wire(String),
    /// The envelope names a kind kubesim has no protobuf table for.
    #[error(
        "no kind {kind:?} is registered for version {api_version:?} in scheme \"pkg/api/legacyscheme/scheme.go:30\""
    )]
    NotRegistered { api_version: String, kind: String },
    #[error("{0}")]
    Json(String),
}

/// A decoded body: the envelope's type and the object as JSON (with `apiVersion` and `kind`).
#[derive(Debug)]
pub struct Decoded {
    pub api_version: String,
    pub kind: String,
    pub object: Value,
}

/// A body that could not be decoded, and the type its envelope named (if it got that far).
#[derive(Debug)]
pub struct Failure {
    pub gvk: Option<(String, String)>,
    pub error: ProtoError,
}

impl Failure {
    /// The real server's 400 message for it (`transformDecodeError` in the create and update
    /// handlers), for an endpoint of kind `expected`.
    pub fn message(&self, expected: &str, body: &[u8]) -> String {
        match &self.gvk {
            Some((api_version, kind)) => {
                let version = api_version.rsplit('/').next().unwrap_or_default();
                format!(
                    "{kind} in version {version:?} cannot be handled as a {expected}: {}",
                    self.error
                )
            }
            None => format!(
                "the object provided is unrecognized (must be of type {expected}): {} ({})",
                self.error,
                summarize(body)
            ),
        }
    }
}

/// `summarizeData`: the first 30 bytes, as text for JSON, in hex otherwise.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let (head, more) = if body.len() > MAX {
        (&body[..MAX], " ...")
    } else {
        (body, "")
    };
    match body.first() {
        None => "<empty>".to_owned(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => {
            let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

/// Decodes a protobuf request body sent to an endpoint of `default_api_version`/`default_kind` (an
/// envelope without a type takes the endpoint's, as the real decoder's defaults do).
pub fn decode(
    body: &[u8],
    default_api_version: &str,
    default_kind: &str,
) -> Result<Decoded, Failure> {
    let (api_version, kind, raw) = envelope(body).map_err(|error| Failure { gvk: None, error })?;
    let api_version = if api_version.is_empty() {
        default_api_version.to_owned()
    } else {
        api_version
    };
    let kind = if kind.is_empty() {
        default_kind.to_owned()
    } else {
        kind
    };
    let fail = |error| Failure {
        gvk: Some((api_version.clone(), kind.clone())),
        error,
    };
    let Some(message) = TABLE.kinds.get(&format!("{api_version}/{kind}")) else {
        return Err(fail(ProtoError::NotRegistered {
            api_version: api_version.clone(),
            kind: kind.clone(),
        }));
    };
    let mut object = decode_message(message, raw).map_err(fail)?;
    if let Value::Object(m) = &mut object {
        m.insert("apiVersion".into(), Value::String(api_version.clone()));
        m.insert("kind".into(), Value::String(kind.clone()));
    }
    // What a JSON client marshalling the same Go struct would have sent: the Go JSON round trip drops
    // the zero values the wire carries for non-pointer fields (`generateName: ""`, `generation: 0`).
    if let Some(t) = crate::schema::builtin(&api_version, &kind) {
        crate::schema::normalize(t.schema(), t.root(), &mut object);
    }
    Ok(Decoded {
        api_version,
        kind,
        object,
    })
}

/// The magic and `runtime.Unknown`: (apiVersion, kind, the object's own encoding).
fn envelope(body: &[u8]) -> Result<(String, String, &[u8]), ProtoError> {
    let data = match body {
        [] => return Err(ProtoError::EmptyData),
        b if !b.starts_with(&MAGIC) => return Err(ProtoError::NoPrefix),
        b if b.len() == MAGIC.len() => return Err(ProtoError::EmptyBody),
        b => &b[MAGIC.len()..],
    };
    // runtime.Unknown: typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2.
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let mut r = wire::Reader::new(data);
    while !r.done() {
        match r.key()? {
            (1, wire::LEN) => {
                let mut t = wire::Reader::new(r.bytes()?);
                while !t.done() {
                    match t.key()? {
                        (1, wire::LEN) => api_version = text(t.bytes()?),
                        (2, wire::LEN) => kind = text(t.bytes()?),
                        (_, w) => t.skip(w)?,
                    }
                }
            }
            (2, wire::LEN) => raw = r.bytes()?,
            (_, w) => r.skip(w)?,
        }
    }
    Ok((api_version, kind, raw))
}

/// Whether kubesim reads protobuf bodies of this kind (`v1/Secret`, `batch/v1/Job`...).
pub fn knows_kind(api_version: &str, kind: &str) -> bool {
    TABLE.kinds.contains_key(&format!("{api_version}/{kind}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A field's type in `schema/protobuf.json`.
#[derive(Debug, Clone, PartialEq)]
enum Ty {
    Scalar(String),
    Message(String),
    Map(String, Box<Ty>),
}

#[derive(Debug)]
struct Field {
    /// `""`: an embedded struct, written into the parent object.
    json: String,
    ty: Ty,
    repeated: bool,
}

struct Table {
    kinds: HashMap<String, String>,
    messages: HashMap<String, HashMap<u64, Field>>,
}

const SCALARS: &[&str] = &[
    "string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float",
];

fn ty(s: &str) -> Ty {
    if let Some(rest) = s.strip_prefix("map:")
        && let Some((k, v)) = rest.split_once(':')
    {
        return Ty::Map(k.to_owned(), Box::new(ty(v)));
    }
    if SCALARS.contains(&s) {
        Ty::Scalar(s.to_owned())
    } else {
        Ty::Message(s.to_owned())
    }
}

/// `schema/protobuf.json`, checked by the tests below (the file is part of the crate).
static TABLE: LazyLock<Table> = LazyLock::new(|| {
    let doc: Value =
        serde_json::from_str(include_str!("../../schema/protobuf.json")).unwrap_or_default();
    let kinds = doc["kinds"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect();
    let messages = doc["messages"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, fields)| {
            let fields = fields
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(num, f)| {
                    let f = f.as_array()?;
                    Some((
                        num.parse().ok()?,
                        Field {
                            json: f.first()?.as_str()?.to_owned(),
                            ty: ty(f.get(1)?.as_str()?),
                            repeated: f.get(2).is_some(),
                        },
                    ))
                })
                .collect();
            (name.clone(), fields)
        })
        .collect();
    Table { kinds, messages }
});

#[cfg(test)]
mod tests;
