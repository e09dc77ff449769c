//! Media types: reading create/update bodies (JSON, YAML, and protobuf for built-in kinds) and refusing
//! a client that accepts nothing kubesim can answer.
//!
//! Following the v1.36 sources (k8s.io/apiserver `handlers/negotiation`, apimachinery's protobuf
//! serializer) where the recordings are silent:
//! - a body in a media type the endpoint does not decode answers 415 listing what it does: JSON, YAML
//!   and protobuf for built-in kinds (CBOR is behind a feature gate that is off in v1.36);
//! - custom resources are JSON or YAML only. kubesim answers their protobuf bodies with a 415 too (the
//!   real server lists protobuf for them, because it can answer Tables in it, and then fails to decode
//!   the body into an unstructured object);
//! - responses are JSON. A client that accepts only protobuf gets `406 NotAcceptable`: for a custom
//!   resource with the real server's message (an unstructured object has no protobuf form); for a
//!   built-in kind, which the real server would encode, with the negotiation error of a server that
//!   offers JSON and YAML only.

use bytes::Bytes;
use http::Request;
use serde_json::Value;

use crate::api::Served;
use crate::errors::ApiError;
use crate::protobuf;

const BUILTIN_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";
const CUSTOM_TYPES: &str = "application/json, application/yaml";

/// A create/update body as JSON bytes, whatever it came in.
pub fn request_body(s: &Served, content_type: &str, body: Bytes) -> Result<Bytes, ApiError> {
    let custom = s.is_custom();
    match content_type {
        "" | "application/json" => Ok(body),
        "application/yaml" => {
            let text = std::str::from_utf8(&body)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
            let v: Value = serde_saphyr::from_str(text).map_err(|e| {
                ApiError::bad_request(format!("error converting YAML to JSON: {e}"))
            })?;
            Ok(Bytes::from(serde_json::to_vec(&v).unwrap_or_default()))
        }
        protobuf::MEDIA_TYPE if !custom => {
            let info = s.info();
            let api_version = info.api_version();
            if !protobuf::knows_kind(&api_version, &info.kind) {
                return Err(unsupported(CUSTOM_TYPES));
            }
            let decoded = protobuf::decode(&body, &api_version, &info.kind)
                .map_err(|f| ApiError::bad_request(f.message(&info.kind, &body)))?;
            Ok(Bytes::from(
                serde_json::to_vec(&decoded.object).unwrap_or_default(),
            ))
        }
        _ => Err(unsupported(if custom {
            CUSTOM_TYPES
        } else {
            BUILTIN_TYPES
        })),
    }
}

fn unsupported(types: &str) -> ApiError {
    ApiError::unsupported_media_type(format!(
        "the body of the request was in an unknown format - accepted media types include: {types}"
    ))
}

/// `406` when the `Accept` header lists protobuf and nothing kubesim writes (JSON, YAML or a wildcard).
pub fn refuse_protobuf_only<B>(s: &Served, req: &Request<B>) -> Result<(), ApiError> {
    let Some(accept) = req
        .headers()
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(());
    };
    let ranges: Vec<&str> = accept
        .split(',')
        .map(|r| r.split(';').next().unwrap_or_default().trim())
        .filter(|r| !r.is_empty())
        .collect();
    let protobuf_only = !ranges.is_empty()
        && ranges
            .iter()
            .all(|r| r.eq_ignore_ascii_case(protobuf::MEDIA_TYPE));
    if !protobuf_only {
        return Ok(());
    }
    let message = if s.is_custom() {
        "object *unstructured.Unstructured does not implement the protobuf marshalling interface and \
         cannot be encoded to a protobuf message"
            .to_owned()
    } else {
        format!("only the following media types are accepted: {CUSTOM_TYPES}")
    };
    Err(ApiError::new(406, "NotAcceptable", message))
}
