//! A CustomResourceDefinition's validation on create and update (`apiextensions/validation`).

use serde_json::{Value, json};

use super::super::common::{child, index, key};
use super::{hoisted, is_established, schema_of, version_name, versions};
use crate::errors::{BadValue, FieldError, FieldErrors};
use crate::json::{bool_at, meta_str, str_at};
use crate::validation::names;

fn join_invalid(path: String, value: &str, errs: Vec<String>, out: &mut FieldErrors) {
    if !errs.is_empty() {
        out.push(FieldError::invalid(
            path,
            BadValue::Str(value.into()),
            errs.join(","),
        ));
    }
}

/// Go's `%#v` of a `[]string` (the bad value of some storedVersions errors).
fn go_string_slice(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        None => "[]string(nil)".into(),
        Some(a) => format!(
            "[]string{{{}}}",
            a.iter()
                .map(|s| crate::errors::go_quote(s.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `ValidateCustomResourceDefinitionNames`.
pub fn validate_names(names: Option<&Value>, path: &str) -> FieldErrors {
    let mut errs = Vec::new();
    let empty = json!({});
    let names = names.unwrap_or(&empty);
    let s = |k: &str| str_at(names, &[k]);
    for k in ["plural", "singular"] {
        if !s(k).is_empty() {
            join_invalid(
                child(path, k),
                s(k),
                names::legacy::is_dns1035_label(s(k)),
                &mut errs,
            );
        }
    }
    for k in ["kind", "listKind"] {
        let v = s(k);
        let msgs = names::legacy::is_dns1035_label(&v.to_lowercase());
        if !v.is_empty() && !msgs.is_empty() {
            errs.push(FieldError::invalid(
                child(path, k),
                BadValue::Str(v.into()),
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    msgs.join(",")
                ),
            ));
        }
    }
    for (i, sn) in names
        .get("shortNames")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let sn = sn.as_str().unwrap_or("");
        join_invalid(
            index(&child(path, "shortNames"), i),
            sn,
            names::legacy::is_dns1035_label(sn),
            &mut errs,
        );
    }
    if !s("kind").is_empty() && s("kind") == s("listKind") {
        errs.push(FieldError::invalid(
            child(path, "listKind"),
            BadValue::Str(s("listKind").into()),
            "kind and listKind may not be the same",
        ));
    }
    for (i, c) in names
        .get("categories")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let c = c.as_str().unwrap_or("");
        join_invalid(
            index(&child(path, "categories"), i),
            c,
            names::legacy::is_dns1035_label(c),
            &mut errs,
        );
    }
    errs
}

fn has_status(sub: Option<&Value>) -> bool {
    sub.and_then(|s| s.get("status"))
        .is_some_and(|s| !s.is_null())
}

/// `ValidateCustomResourceDefinitionSubresources` (scale paths).
fn validate_subresources(sub: Option<&Value>, path: &str) -> FieldErrors {
    let mut errs = Vec::new();
    let Some(scale) = sub.and_then(|s| s.get("scale")).filter(|s| s.is_object()) else {
        return errs;
    };
    for (k, prefix, what) in [
        (
            "specReplicasPath",
            ".spec.",
            "should be a json path under .spec",
        ),
        (
            "statusReplicasPath",
            ".status.",
            "should be a json path under .status",
        ),
    ] {
        let p = format!("{path}.scale.{k}");
        let v = str_at(scale, &[k]);
        if v.is_empty() {
            errs.push(FieldError::required(p, ""));
        } else if !v.starts_with('.') {
            errs.push(FieldError::invalid(
                p,
                BadValue::Str(v.into()),
                "must be a simple json path starting with .",
            ));
        } else if !v.starts_with(prefix) {
            errs.push(FieldError::invalid(p, BadValue::Str(v.into()), what));
        }
    }
    errs
}

/// `validateCustomResourceDefinitionSpec` + status + storedVersions + API approval + preserveUnknownFields.
pub fn validate_crd(crd: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    let spec = crd.get("spec").cloned().unwrap_or(json!({}));
    let group = str_at(&spec, &["group"]);
    let plural = str_at(&spec, &["names", "plural"]);

    // The extra rule of the CRD's name function: `<plural>.<group>`.
    let name = meta_str(crd, "name");
    if name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid(
            "metadata.name",
            BadValue::Str(name.into()),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }

    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else {
        let msgs = names::legacy::is_dns1123_subdomain(group);
        if !msgs.is_empty() {
            join_invalid("spec.group".into(), group, msgs, &mut errs);
        } else if !group.contains('.') {
            errs.push(FieldError::invalid(
                "spec.group",
                BadValue::Str(group.into()),
                "should be a domain with at least one dot",
            ));
        }
    }

    let scope = str_at(&spec, &["scope"]);
    match scope {
        "" => errs.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported(
            "spec.scope",
            BadValue::Str(other.into()),
            &["Cluster", "Namespaced"],
        )),
    }

    let vs = versions(crd);
    let schema_hoisted = !vs.is_empty() && hoisted(&vs, "schema");
    let sub_hoisted = !vs.is_empty() && hoisted(&vs, "subresources");
    let top_schema = if schema_hoisted {
        vs.first().and_then(schema_of)
    } else {
        None
    };
    if top_schema.is_none() {
        for (i, v) in vs.iter().enumerate() {
            if schema_of(v).is_none() {
                errs.push(FieldError::required(
                    format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    "",
                ));
            }
        }
    }
    if spec.get("preserveUnknownFields") == Some(&json!(true))
        && crate::kinds::customresource::spec_has_defaults(&vs)
    {
        errs.push(FieldError::invalid(
            "spec.preserveUnknownFields",
            BadValue::Bool(true),
            "must be false in order to use defaults in the schema",
        ));
    }

    let any_status = vs.iter().any(|v| has_status(v.get("subresources")));
    let mut storage_count = 0;
    let mut seen = std::collections::HashSet::new();
    let mut unique = true;
    for (i, v) in vs.iter().enumerate() {
        if bool_at(v, &["storage"]) {
            storage_count += 1;
        }
        let vn = version_name(v);
        if !seen.insert(vn.to_string()) {
            unique = false;
        }
        let vpath = index("spec.versions", i);
        join_invalid(
            child(&vpath, "name"),
            vn,
            names::legacy::is_dns1035_label(vn),
            &mut errs,
        );
        // validateCustomResourceDefinitionVersion
        let deprecated = bool_at(v, &["deprecated"]);
        if let Some(w) = v.get("deprecationWarning").and_then(Value::as_str) {
            let mut problems = Vec::new();
            if !deprecated {
                problems.push("can only be set for deprecated versions".to_string());
            } else {
                if w.len() > 256 {
                    problems.push("must be <= 256 characters long".into());
                }
                if w.is_empty() {
                    problems.push("must not be an empty string".into());
                }
            }
            for p in problems {
                errs.push(FieldError::invalid(
                    child(&vpath, "deprecationWarning"),
                    BadValue::Str(w.into()),
                    p,
                ));
            }
        }
        if !schema_hoisted && let Some(schema) = schema_of(v) {
            errs.extend(crate::kinds::customresource::validate_crd_schema(
                schema,
                &child(&vpath, "schema"),
                has_status(v.get("subresources")),
            ));
        }
        if !sub_hoisted {
            errs.extend(validate_subresources(
                v.get("subresources"),
                &child(&vpath, "subresources"),
            ));
        }
    }
    let versions_value = BadValue::Raw(format!(
        "[]apiextensions.CustomResourceDefinitionVersion{{{}}}",
        vs.iter()
            .map(|v| format!(
                "apiextensions.CustomResourceDefinitionVersion{{Name:{}, Served:{}, Storage:{}, ...}}",
                crate::errors::go_quote(version_name(v)),
                bool_at(v, &["served"]),
                bool_at(v, &["storage"])
            ))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if !unique {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_value.clone(),
            "must contain unique version names",
        ));
    }
    if storage_count != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_value,
            "must have exactly one version marked as storage version",
        ));
    }
    for k in ["plural", "singular", "kind", "listKind"] {
        if str_at(&spec, &["names", k]).is_empty() {
            errs.push(FieldError::required(format!("spec.names.{k}"), ""));
        }
    }
    errs.extend(validate_names(spec.get("names"), "spec.names"));
    if let Some(schema) = top_schema {
        errs.extend(crate::kinds::customresource::validate_crd_schema(
            schema,
            "spec.validation",
            any_status,
        ));
    }
    if sub_hoisted {
        errs.extend(validate_subresources(
            vs.first().and_then(|v| v.get("subresources")),
            "spec.subresources",
        ));
    }

    // Conversion.
    let conv = spec.get("conversion").cloned().unwrap_or(Value::Null);
    let strategy = str_at(&conv, &["strategy"]);
    match strategy {
        "" => errs.push(FieldError::required("spec.conversion.strategy", "")),
        "None" => {
            if conv
                .pointer("/webhook/clientConfig")
                .is_some_and(|c| !c.is_null())
            {
                errs.push(FieldError::forbidden(
                    "spec.conversion.webhookClientConfig",
                    "should not be set when strategy is not set to Webhook",
                ));
            }
            if conv
                .pointer("/webhook/conversionReviewVersions")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
            {
                errs.push(FieldError::forbidden(
                    "spec.conversion.conversionReviewVersions",
                    "should not be set when strategy is not set to Webhook",
                ));
            }
        }
        "Webhook" => {
            match conv
                .pointer("/webhook/clientConfig")
                .filter(|c| !c.is_null())
            {
                None => errs.push(FieldError::required(
                    "spec.conversion.webhookClientConfig",
                    "required when strategy is set to Webhook",
                )),
                Some(cc) => {
                    let has_url = cc.get("url").is_some_and(|u| !u.is_null());
                    let has_svc = cc.get("service").is_some_and(|s| !s.is_null());
                    if has_url == has_svc {
                        errs.push(FieldError::required(
                            "spec.conversion.webhookClientConfig",
                            "exactly one of url or service is required",
                        ));
                    }
                }
            }
            let crv = conv
                .pointer("/webhook/conversionReviewVersions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if crv.is_empty() {
                errs.push(FieldError::required(
                    "spec.conversion.conversionReviewVersions",
                    "",
                ));
            } else if !crv.iter().any(|v| v == "v1" || v == "v1beta1") {
                errs.push(FieldError::invalid(
                    "spec.conversion.conversionReviewVersions",
                    BadValue::Raw(go_string_slice(Some(&Value::Array(crv.clone())))),
                    "must include at least one of v1, v1beta1",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            "spec.conversion.strategy",
            BadValue::Str(other.into()),
            &["None", "Webhook"],
        )),
    }

    errs.extend(validate_names(
        crd.pointer("/status/acceptedNames"),
        "status.acceptedNames",
    ));
    errs.extend(validate_stored_versions(crd));
    errs.extend(validate_api_approval(crd, None));
    if spec.get("preserveUnknownFields") == Some(&json!(true)) {
        errs.push(FieldError::invalid(
            "spec.preserveUnknownFields",
            BadValue::Bool(true),
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in openAPIV3Schema instead",
        ));
    }
    errs
}

/// `ValidateCustomResourceDefinitionStoredVersions`.
fn validate_stored_versions(crd: &Value) -> FieldErrors {
    let stored = crd.pointer("/status/storedVersions");
    let list = crate::json::strings(stored);
    if list.is_empty() {
        return vec![FieldError::invalid(
            "status.storedVersions",
            BadValue::Raw(go_string_slice(stored)),
            "must have at least one stored version",
        )];
    }
    let mut errs = Vec::new();
    let vs = versions(crd);
    for v in &vs {
        if bool_at(v, &["storage"]) && !list.iter().any(|s| s == version_name(v)) {
            errs.push(FieldError::invalid(
                "status.storedVersions",
                BadValue::Raw(go_string_slice(stored)),
                format!("must have the storage version {}", version_name(v)),
            ));
        }
    }
    for (i, s) in list.iter().enumerate() {
        if !vs.iter().any(|v| version_name(v) == s) {
            errs.push(FieldError::invalid(
                index("status.storedVersions", i),
                BadValue::Str(s.clone()),
                format!("missing from spec.versions; {s} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {s} and removes {s} from status.storedVersions"),
            ));
        }
    }
    errs
}

const API_APPROVAL: &str = "api-approved.kubernetes.io";

/// `validateAPIApproval`: groups `k8s.io`, `kubernetes.io` and their subdomains need the
/// `api-approved.kubernetes.io` annotation (a URL, or a value starting with `unapproved`).
fn validate_api_approval(crd: &Value, old: Option<&Value>) -> FieldErrors {
    let group = str_at(crd, &["spec", "group"]);
    let protected = group == "k8s.io"
        || group == "kubernetes.io"
        || group.ends_with(".k8s.io")
        || group.ends_with(".kubernetes.io");
    if !protected {
        return Vec::new();
    }
    let state = |obj: &Value| -> (u8, String) {
        match obj
            .pointer(&format!("/metadata/annotations/{API_APPROVAL}"))
            .and_then(Value::as_str)
        {
            None => (
                0,
                format!(
                    "protected groups must have approval annotation {}, see https://github.com/kubernetes/enhancements/pull/1111",
                    crate::errors::go_quote(API_APPROVAL)
                ),
            ),
            Some(v) if v.starts_with("unapproved") => (2, String::new()),
            // `url.ParseRequestURI` accepts absolute URLs and absolute paths.
            Some(v) if v.starts_with('/') || v.contains("://") => (1, String::new()),
            Some(_) => (
                3,
                format!(
                    "protected groups must have approval annotation {} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111",
                    crate::errors::go_quote(API_APPROVAL)
                ),
            ),
        }
    };
    let (new_state, reason) = state(crd);
    if let Some(old) = old
        && state(old).0 == new_state
    {
        return Vec::new();
    }
    let path = key("metadata.annotations", API_APPROVAL);
    match new_state {
        0 => vec![FieldError::required(path, reason)],
        3 => vec![FieldError::invalid(
            path,
            BadValue::Str(str_at(crd, &["metadata", "annotations", API_APPROVAL]).into()),
            reason,
        )],
        _ => Vec::new(),
    }
}

/// `validateCustomResourceDefinitionUpdate` minus ObjectMeta: the create rules, `group` and
/// `names.plural` immutable, `scope` and `names.kind` immutable once Established.
pub fn validate_crd_update(new: &Value, old: &Value) -> FieldErrors {
    let mut errs = validate_crd(new);
    // The API-approval rule compares with the old state on update.
    errs.retain(|e| !e.field.starts_with("metadata.annotations[api-approved"));
    errs.extend(validate_api_approval(new, Some(old)));
    let immutable = |errs: &mut FieldErrors, path: &str, ptr: &str| {
        let (n, o) = (new.pointer(ptr), old.pointer(ptr));
        if n != o {
            errs.push(FieldError::invalid(
                path,
                BadValue::Str(n.and_then(Value::as_str).unwrap_or("").into()),
                "field is immutable",
            ));
        }
    };
    // These sit inside the spec checks on the real server; appended here.
    if is_established(old) {
        immutable(&mut errs, "spec.scope", "/spec/scope");
        immutable(&mut errs, "spec.names.kind", "/spec/names/kind");
    }
    immutable(&mut errs, "spec.group", "/spec/group");
    immutable(&mut errs, "spec.names.plural", "/spec/names/plural");
    errs
}
