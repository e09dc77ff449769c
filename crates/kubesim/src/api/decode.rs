//! Request-body decoding as the real server's codec does it: syntax errors, apiVersion/kind checks,
//! unknown and duplicate fields per `fieldValidation`, then the kind's codec hook and defaults.

use serde_json::{Value, json};

use super::{FieldValidation, Served};
use crate::errors::{ApiError, go_quote};
use crate::schema::StrictIssue;

/// Decodes a JSON body for `s`. Returns the object and the warnings to send.
pub fn decode_body(
    s: &Served,
    raw: &[u8],
    fv: FieldValidation,
) -> Result<(Value, Vec<String>), ApiError> {
    let info = s.info();
    if let Some(e) = crate::gojson::syntax_error(raw) {
        let shown = if raw.len() > 30 {
            format!("{} ...", String::from_utf8_lossy(&raw[..30]))
        } else {
            String::from_utf8_lossy(raw).into_owned()
        };
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {e} ({shown})",
            info.kind
        )));
    }
    // Duplicate fields (and, for built-ins, unknown ones) are found on the raw bytes, in document order.
    let mut issues: Vec<StrictIssue> = match &s.schema {
        Some(t) if fv != FieldValidation::Ignore => {
            crate::schema::strict_issues(t, raw).unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let mut obj: Value = serde_json::from_slice(raw)
        .map_err(|e| ApiError::bad_request(format!("error decoding body: {e}")))?;
    if !obj.is_object() {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
            info.kind,
            crate::gojson::json_kind(&obj)
        )));
    }
    check_type(s, &mut obj)?;
    let mut warnings = Vec::new();
    let (obj, pruned) = s.decode_object(obj, &mut warnings)?;
    if s.schema.as_ref().is_some_and(|t| t.is_custom()) {
        issues.extend(pruned.into_iter().map(StrictIssue::UnknownField));
    }
    report_issues(s, issues, fv, &mut warnings)?;
    Ok((obj, warnings))
}

/// Unknown/duplicate fields: a 400 with `fieldValidation=Strict`, warnings by default.
pub fn report_issues(
    s: &Served,
    issues: Vec<StrictIssue>,
    fv: FieldValidation,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    if issues.is_empty() {
        return Ok(());
    }
    match (fv, &s.schema) {
        (FieldValidation::Strict, Some(t)) => Err(ApiError::bad_request(
            crate::schema::strict_decoding_message(t, &issues),
        )),
        (FieldValidation::Warn, _) => {
            warnings.extend(issues.iter().map(ToString::to_string));
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `apiVersion`/`kind` must name this resource's kind; missing ones default to the endpoint's (the
/// server decodes with the endpoint's group/version/kind as the default).
fn check_type(s: &Served, obj: &mut Value) -> Result<(), ApiError> {
    let info = s.info();
    let want_av = info.api_version();
    let av = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let av = if av.is_empty() { want_av.clone() } else { av };
    let kind = if kind.is_empty() {
        info.kind.clone()
    } else {
        kind
    };
    if av != want_av || kind != info.kind {
        let version = av.rsplit('/').next().unwrap_or(&av);
        return Err(ApiError::bad_request(format!(
            "{kind} in version {} cannot be handled as a {}: no kind {} is registered for version {} in scheme \"pkg/api/legacyscheme/scheme.go:30\"",
            go_quote(version),
            info.kind,
            go_quote(&kind),
            go_quote(&av)
        )));
    }
    if let Value::Object(m) = obj {
        m.insert("apiVersion".into(), json!(want_av));
        m.insert("kind".into(), json!(info.kind));
    }
    Ok(())
}
