//! LIST with selectors, paging (continue tokens) and resourceVersion semantics.

use super::*;

impl Api {
    /// LIST with selectors, paging and resourceVersion semantics.
    pub fn list(&self, s: &Served, ns: Option<&str>, l: &ListOpts) -> Result<ListPage, ApiError> {
        if l.resource_version_match.is_some()
            && l.resource_version.as_deref().is_none_or(str::is_empty)
        {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                &[crate::errors::FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )],
            ));
        }
        if let Some(rv) = l.resource_version.as_deref().filter(|r| !r.is_empty()) {
            parse_rv(rv).map_err(|m| {
                ApiError::bad_request(format!(
                    "invalid resource version: resourceVersion: Invalid value: {}: {m}",
                    go_quote(rv)
                ))
            })?;
        }
        let field = s.convert_field_selector(&l.field)?;
        let l = &ListOpts { field, ..l.clone() };
        // resourceVersion=0 is served from the watch cache, which ignores limit (as the real server does).
        let from_cache = l.resource_version.as_deref() == Some("0");
        let limit = if from_cache {
            None
        } else {
            l.limit.filter(|n| *n > 0)
        };
        let (start_after, token_rv) = match l.continue_token.as_deref().filter(|c| !c.is_empty()) {
            Some(tok) => {
                let (rv, key) = decode_continue(tok)?;
                (Some(continue_key_to_obj(&key, ns)), Some(rv))
            }
            None => (None, None),
        };
        let ns_pin = ns
            .map(str::to_string)
            .or_else(|| l.field.exact("metadata.namespace").map(str::to_string));
        let snap = self
            .store
            .list(&s.table, ns_pin.as_deref(), start_after.as_ref());
        let rv = token_rv.unwrap_or(snap.rv);
        let mut items = Vec::new();
        let mut more = false;
        let mut remaining: u64 = 0;
        let filtered = !l.label.is_empty() || !l.field.is_empty();
        for st in snap.items {
            // Like etcd paging: once the page is full, any further key (matching or not) means
            // there is more to read.
            if let Some(n) = limit
                && items.len() >= n
            {
                more = true;
                if filtered {
                    break;
                }
                remaining += 1;
                continue;
            }
            if self.matches(s, &st, &l.label, &l.field) {
                items.push(st);
            }
        }
        let continue_token = if more {
            items.last().map(|last| {
                encode_continue(
                    rv,
                    &continue_key(last, ns.is_some() || !s.info().namespaced),
                )
            })
        } else {
            None
        };
        let remaining = (more && !filtered).then_some(remaining);
        Ok(ListPage {
            rv,
            items,
            continue_token,
            remaining,
        })
    }

    /// Whether a stored object passes a list/watch filter.
    pub fn matches(
        &self,
        s: &Served,
        st: &Stored,
        label: &LabelSelector,
        field: &FieldSelector,
    ) -> bool {
        if !label.is_empty() && !label.matches(|k| st.label(k)) {
            return false;
        }
        if field.is_empty() {
            return true;
        }
        // Field labels were converted to the stored form's (`convert_field_label`); only fields other
        // than name/namespace need the parsed object.
        let mut parsed: Option<Value> = None;
        field.matches(|f| match f {
            "metadata.name" => Some(st.name().to_string()),
            "metadata.namespace" => Some(st.namespace().to_string()),
            other => s
                .strategy
                .field_value(parsed.get_or_insert_with(|| st.value()), other),
        })
    }
}

// Continue tokens have the real server's shape: base64url(JSON {v, rv, start}) where `start` is the next
// key relative to the list's key prefix, so tokens compare equal exactly when the real ones would.
fn continue_key(st: &Stored, within_namespace: bool) -> String {
    if within_namespace || st.namespace().is_empty() {
        format!("{}\u{0}", st.name())
    } else {
        format!("{}/{}\u{0}", st.namespace(), st.name())
    }
}

fn continue_key_to_obj(key: &str, ns: Option<&str>) -> (String, String) {
    let key = key.trim_end_matches('\u{0}');
    match ns {
        Some(ns) => (ns.to_string(), key.to_string()),
        None => match key.split_once('/') {
            Some((n, name)) => (n.to_string(), name.to_string()),
            None => (String::new(), key.to_string()),
        },
    }
}

fn encode_continue(rv: u64, start: &str) -> String {
    use base64::Engine;
    let doc = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(doc.to_string())
}

fn decode_continue(tok: &str) -> Result<(u64, String), ApiError> {
    use base64::Engine;
    let bad = |why: String| ApiError::bad_request(format!("invalid continue token: {why}"));
    // Go's RawURLEncoding ignores non-zero trailing bits; so must we to fail where it fails.
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let raw = engine
        .decode(tok)
        .map_err(|e| bad(format!("illegal base64 data: {e}")))?;
    if let Some(e) = crate::gojson::syntax_error(&raw) {
        return Err(bad(format!("continue key is not valid: {e}")));
    }
    let v: Value =
        serde_json::from_slice(&raw).map_err(|e| bad(format!("continue key is not valid: {e}")))?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad(
            "continue key is not valid: server does not recognize this encoded key".into(),
        ));
    }
    let rv = v.get("rv").and_then(Value::as_u64).unwrap_or(0);
    let start = v
        .get("start")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Ok((rv, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_garbage_is_rejected_like_the_server() {
        let t = encode_continue(42, "d\u{0}");
        assert_eq!(decode_continue(&t).unwrap(), (42, "d\u{0}".to_string()));
        let e = decode_continue("garbage").unwrap_err();
        assert_eq!(
            e.message,
            "invalid continue token: continue key is not valid: invalid character '\\x81' looking for beginning of value"
        );
    }
}
