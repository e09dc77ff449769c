//! PATCH (JSON patch, merge patch, strategic merge patch) and server-side apply.

use super::*;

impl Api {
    /// PATCH: JSON patch, merge patch, strategic merge patch or server-side apply.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        s: &Served,
        ns: &str,
        name: &str,
        kind: PatchKind,
        raw: &[u8],
        part: Part,
        o: &WriteOpts,
    ) -> Result<Written, ApiError> {
        crate::structured::validate_patch_options(
            kind == PatchKind::Apply,
            o.explicit_manager.then_some(o.manager.as_str()),
            o.force_given,
        )?;
        if kind == PatchKind::Strategic && !s.supports_strategic() {
            return Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        let parsed: Option<Value> = match kind {
            PatchKind::Merge | PatchKind::Strategic => {
                if let Some(e) = crate::gojson::syntax_error(raw) {
                    return Err(ApiError::bad_request(format!("error decoding patch: {e}")));
                }
                Some(
                    serde_json::from_slice(raw)
                        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
                )
            }
            PatchKind::Apply => {
                Some(crate::structured::parse_apply_body(raw).map_err(|e| e.to_api_error())?)
            }
            PatchKind::Json => None,
        };
        let empty = Value::Null;
        let patch_doc = parsed.as_ref().unwrap_or(&empty);
        if kind == PatchKind::Apply {
            return self.apply(s, ns, name, patch_doc, part, o);
        }
        loop {
            let old = self.get(s, ns, name)?;
            let current = self.served_value(s, &old);
            let mut doc = current.clone();
            match kind {
                PatchKind::Json => patch::json_patch(&mut doc, raw)?,
                PatchKind::Merge => patch::merge_patch(&mut doc, patch_doc),
                PatchKind::Strategic => doc = s.strategic_merge(&doc, patch_doc)?,
                PatchKind::Apply => {}
            }
            let mut warnings = Vec::new();
            let decoded = match kind {
                PatchKind::Merge => s.decode_merge_patched(doc, &current, patch_doc, &mut warnings),
                _ => s.decode_object(doc, &mut warnings),
            };
            let (doc, pruned) = match decoded {
                Ok(d) => d,
                // A codec failure (e.g. bad base64 in a Secret) on a patched document is reported against
                // the patch, with the patched document in the message.
                Err(e) if e.code == 400 && kind == PatchKind::Merge => {
                    let cause = crate::kinds::common::decode_error_cause(&e.message);
                    let text = crate::kinds::secret::merge_patched_text(&current, patch_doc);
                    return Err(crate::kinds::secret::patch_decode_error(&text, cause));
                }
                Err(e) => return Err(e),
            };
            decode::report_issues(
                s,
                pruned
                    .into_iter()
                    .map(crate::schema::StrictIssue::UnknownField)
                    .collect(),
                o.field_validation,
                &mut warnings,
            )?;
            // A resourceVersion the patch itself wrote is a precondition; otherwise the patch applies to
            // whatever is current (retrying on races).
            let want_rv = match get_str(&doc, &["metadata", "resourceVersion"]) {
                Some(rv) if rv != old.rv.to_string() => {
                    Some(parse_rv(rv).map_err(|m| ApiError::bare(500, m))?)
                }
                _ => None,
            };
            if let Some(mut w) =
                self.update_from(s, ns, name, (old, current), doc, want_rv, part, o, false)?
            {
                warnings.append(&mut w.warnings);
                w.warnings = warnings;
                return Ok(w);
            }
        }
    }

    /// Server-side apply: merge by field ownership, create when missing.
    fn apply(
        &self,
        s: &Served,
        ns: &str,
        name: &str,
        applied: &Value,
        part: Part,
        o: &WriteOpts,
    ) -> Result<Written, ApiError> {
        let Some(t) = s.schema.clone() else {
            return Err(ApiError::unsupported_media_type(
                "415: Unsupported Media Type",
            ));
        };
        let stamp = s.stamp(o, part);
        let mgr = stamp.manager();
        loop {
            let old = self.store.get(&s.table, ns, name);
            let live = old.as_ref().map(|st| self.served_value(s, st));
            if live.is_none() && part == Part::Status {
                return Err(s.not_found(name));
            }
            let result = crate::structured::apply(&t, live.as_ref(), applied, &mgr, o.force)
                .map_err(|e| e.to_api_error())?;
            let mut warnings = Vec::new();
            let (obj, _) = s.decode_object(result.object, &mut warnings)?;
            crate::structured::check_patched_name(&obj, name, s.info().namespaced.then_some(ns))?;
            let Some(old) = old else {
                return self.create_inner(s, ns, obj, o, true);
            };
            let live = live.unwrap_or_else(|| self.served_value(s, &old));
            if let Some(w) = self.update_from(s, ns, name, (old, live), obj, None, part, o, true)? {
                return Ok(w);
            }
        }
    }
}

#[cfg(test)]
#[path = "patching_tests.rs"]
mod tests;
