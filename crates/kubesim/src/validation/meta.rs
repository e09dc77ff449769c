//! `ObjectMeta` validation on create and update, as the real server does it.
//!
//! Two layers exist in Kubernetes and both are reproduced:
//! - apimachinery's `ValidateObjectMetaAccessor` / `ValidateObjectMetaAccessorUpdate`
//!   (`staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go`), which the generic registry
//!   runs for every kind (custom resources included);
//! - core's `ValidateObjectMeta` / `ValidateObjectMetaUpdate` (`pkg/apis/core/validation`), which built-in
//!   kinds (Jobs, Secrets, Namespaces, ...) call from their own validation and which additionally rejects
//!   finalizer names that are neither standard nor domain-qualified.

use serde_json::{Map, Value};

use super::names::{
    is_qualified_name, is_valid_label_value, name_is_dns_label, name_is_dns_subdomain,
    name_is_dns1035_label, name_is_path_segment,
};
use super::{sorted_keys, time_bad_value, times_equal};
use crate::errors::{BadValue, FieldError, FieldErrors, go_quote, write_go_string};
use crate::json::{get, get_arr, get_i64, get_obj, get_str};

/// Total size of all annotation keys and values (`TotalAnnotationSizeLimitB`).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// The name format a kind requires (its `ValidateNameFunc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: Jobs, Secrets, Leases, Events, custom resources, most kinds.
    DnsSubdomain,
    /// `NameIsDNSLabel`: Namespaces.
    DnsLabel,
    /// `NameIsDNS1035Label`: Services.
    Dns1035Label,
    /// `ValidatePathSegmentName`: only what every URL path segment needs.
    PathSegment,
}

impl NameRule {
    /// The problems with `name` (`prefix` = it is a `generateName`, so a trailing '-' is fine).
    pub fn check(self, name: &str, prefix: bool) -> Vec<String> {
        match self {
            Self::DnsSubdomain => name_is_dns_subdomain(name, prefix),
            Self::DnsLabel => name_is_dns_label(name, prefix),
            Self::Dns1035Label => name_is_dns1035_label(name, prefix),
            Self::PathSegment => name_is_path_segment(name, prefix),
        }
    }
}

/// Which flavour of ObjectMeta validation to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaOptions {
    pub namespaced: bool,
    pub name_rule: NameRule,
    /// Core's extra finalizer rule (`name is neither a standard finalizer name nor is it fully
    /// qualified`): on for built-in kinds, off for custom resources.
    pub kube_finalizers: bool,
}

/// Finalizer names core accepts without a domain prefix (`helper.IsStandardFinalizerName`).
const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// Core's `ValidateObjectMeta` for built-in kinds: name or generateName, name format (per `name_rule`),
/// namespace, generation, labels, annotations, ownerReferences, finalizers, managedFields, then the
/// kube finalizer-name rule. `meta` is the object's `metadata` (or `Value::Null`).
pub fn validate_object_meta_create(
    meta: &Value,
    namespaced: bool,
    name_rule: NameRule,
) -> FieldErrors {
    validate_object_meta_create_with(
        meta,
        MetaOptions {
            namespaced,
            name_rule,
            kube_finalizers: true,
        },
    )
}

/// `ValidateObjectMetaAccessor` with the chosen options (see [`MetaOptions`]).
pub fn validate_object_meta_create_with(meta: &Value, opts: MetaOptions) -> FieldErrors {
    let mut errs = Vec::new();
    let generate_name = get_str(meta, &["generateName"]).unwrap_or("");
    if !generate_name.is_empty() {
        for msg in opts.name_rule.check(generate_name, true) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                BadValue::Str(generate_name.to_string()),
                msg,
            ));
        }
    }
    let name = get_str(meta, &["name"]).unwrap_or("");
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for msg in opts.name_rule.check(name, false) {
            errs.push(FieldError::invalid(
                "metadata.name",
                BadValue::Str(name.to_string()),
                msg,
            ));
        }
    }
    let namespace = get_str(meta, &["namespace"]).unwrap_or("");
    if opts.namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for msg in name_is_dns_label(namespace, false) {
                errs.push(FieldError::invalid(
                    "metadata.namespace",
                    BadValue::Str(namespace.to_string()),
                    msg,
                ));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    if let Some(g) = get_i64(meta, &["generation"])
        && g < 0
    {
        errs.push(FieldError::invalid(
            "metadata.generation",
            BadValue::Int(g),
            "must be greater than or equal to 0",
        ));
    }
    errs.extend(validate_common(meta));
    errs.extend(validate_finalizers(
        get_arr(meta, &["finalizers"]).map(Vec::as_slice),
        "metadata.finalizers",
    ));
    errs.extend(validate_managed_fields(meta));
    if opts.kube_finalizers {
        errs.extend(validate_kube_finalizer_names(meta));
    }
    errs
}

/// Labels, annotations and ownerReferences: the part create and update share.
fn validate_common(meta: &Value) -> FieldErrors {
    let mut errs = validate_labels(get_obj(meta, &["labels"]), "metadata.labels");
    errs.extend(validate_annotations(
        get_obj(meta, &["annotations"]),
        "metadata.annotations",
    ));
    errs.extend(validate_owner_references(
        get_arr(meta, &["ownerReferences"]).map(Vec::as_slice),
        "metadata.ownerReferences",
    ));
    errs
}

/// apimachinery's `ValidateObjectMetaAccessorUpdate`: what the generic registry checks on every update
/// of every kind (`new_meta`, `old_meta` are the two `metadata` objects).
///
/// The store fills a missing `resourceVersion` from the stored object before validating when the kind
/// allows unconditional updates (Jobs, Secrets), and answers its own error otherwise (Leases); the check
/// here is the library's last line and is only reached when a caller skipped that step.
pub fn validate_object_meta_update(new_meta: &Value, old_meta: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    if get(old_meta, &["deletionTimestamp"]).is_some_and(|v| !v.is_null()) {
        errs.extend(validate_no_new_finalizers(new_meta, old_meta));
    }
    if get_str(new_meta, &["resourceVersion"])
        .unwrap_or("")
        .is_empty()
    {
        errs.push(FieldError::invalid(
            "metadata.resourceVersion",
            BadValue::Str(String::new()),
            "must be specified for an update",
        ));
    }
    let new_gen = get_i64(new_meta, &["generation"]).unwrap_or(0);
    if new_gen < get_i64(old_meta, &["generation"]).unwrap_or(0) {
        errs.push(FieldError::invalid(
            "metadata.generation",
            BadValue::Int(new_gen),
            "must not be decremented",
        ));
    }
    for key in ["name", "namespace", "uid"] {
        let n = get_str(new_meta, &[key]).unwrap_or("");
        if n != get_str(old_meta, &[key]).unwrap_or("") {
            errs.push(FieldError::invalid(
                format!("metadata.{key}"),
                BadValue::Str(n.to_string()),
                "field is immutable",
            ));
        }
    }
    for key in ["creationTimestamp", "deletionTimestamp"] {
        let n = get_str(new_meta, &[key]);
        if !times_equal(n, get_str(old_meta, &[key])) {
            errs.push(FieldError::invalid(
                format!("metadata.{key}"),
                n.map_or(BadValue::Null, time_bad_value),
                "field is immutable",
            ));
        }
    }
    let n = get_i64(new_meta, &["deletionGracePeriodSeconds"]);
    if n != get_i64(old_meta, &["deletionGracePeriodSeconds"]) {
        errs.push(FieldError::invalid(
            "metadata.deletionGracePeriodSeconds",
            n.map_or(BadValue::Null, BadValue::Int),
            "field is immutable",
        ));
    }
    errs.extend(validate_common(new_meta));
    errs.extend(validate_managed_fields(new_meta));
    errs
}

/// Core's `ValidateObjectMetaUpdate`: apimachinery's update rules plus the kube finalizer-name rule.
/// Built-in kinds call this from their own update validation, in addition to the generic pass.
pub fn validate_object_meta_update_core(new_meta: &Value, old_meta: &Value) -> FieldErrors {
    let mut errs = validate_object_meta_update(new_meta, old_meta);
    errs.extend(validate_kube_finalizer_names(new_meta));
    errs
}

/// `ValidateNoNewFinalizers`.
fn validate_no_new_finalizers(new_meta: &Value, old_meta: &Value) -> FieldErrors {
    let old: Vec<&str> = get_arr(old_meta, &["finalizers"])
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut extra: Vec<&str> = get_arr(new_meta, &["finalizers"])
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter(|f| !old.contains(f))
                .collect()
        })
        .unwrap_or_default();
    if extra.is_empty() {
        return Vec::new();
    }
    extra.sort_unstable();
    extra.dedup();
    // Go prints the set with %#v: []string{"a", "b"}.
    let list = extra
        .iter()
        .map(|f| go_quote(f))
        .collect::<Vec<_>>()
        .join(", ");
    vec![FieldError::forbidden(
        "metadata.finalizers",
        format!(
            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
        ),
    )]
}

/// `ValidateLabels` (meta/v1): every key a qualified name, every value a label value. Used for
/// `metadata.labels`, pod template labels and `nodeSelector`.
/// `field` is a `&str` or a [`Path`](super::path::Path), spelled only for an error.
pub fn validate_labels(
    labels: Option<&Map<String, Value>>,
    field: impl Into<String> + Copy,
) -> FieldErrors {
    let mut errs = Vec::new();
    let Some(labels) = labels else {
        return errs;
    };
    for k in sorted_keys(labels) {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid(field, BadValue::Str(k.clone()), msg));
        }
        let v = labels[k].as_str().unwrap_or("");
        for msg in is_valid_label_value(v) {
            errs.push(FieldError::invalid(
                field,
                BadValue::Str(v.to_string()),
                msg,
            ));
        }
    }
    errs
}

/// `ValidateAnnotations`: keys are qualified names (case-insensitive), total size at most 256 KiB.
/// `field` as in [`validate_labels`].
pub fn validate_annotations(
    annotations: Option<&Map<String, Value>>,
    field: impl Into<String> + Copy,
) -> FieldErrors {
    let mut errs = Vec::new();
    let Some(annotations) = annotations else {
        return errs;
    };
    let mut total = 0usize;
    for k in sorted_keys(annotations) {
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(field, BadValue::Str(k.clone()), msg));
        }
        total += k.len() + annotations[k].as_str().map_or(0, str::len);
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

/// apimachinery's `ValidateFinalizers`: each name a qualified name (reported on the list's path, without
/// an index, like Go), and `orphan` + `foregroundDeletion` never together.
pub fn validate_finalizers(finalizers: Option<&[Value]>, field: &str) -> FieldErrors {
    let mut errs = Vec::new();
    let Some(finalizers) = finalizers else {
        return errs;
    };
    let (mut orphan, mut foreground) = (false, false);
    for f in finalizers {
        let f = f.as_str().unwrap_or("");
        for msg in is_qualified_name(f) {
            errs.push(FieldError::invalid(
                field,
                BadValue::Str(f.to_string()),
                msg,
            ));
        }
        orphan |= f == "orphan";
        foreground |= f == "foregroundDeletion";
    }
    if orphan && foreground {
        errs.push(FieldError::invalid(
            field,
            BadValue::Raw(crate::errors::go_json(&Value::Array(finalizers.to_vec()))),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errs
}

/// Core's `validateKubeFinalizerName` for each finalizer (indexed path).
fn validate_kube_finalizer_names(meta: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    if let Some(finalizers) = get_arr(meta, &["finalizers"]) {
        for (i, f) in finalizers.iter().enumerate() {
            let f = f.as_str().unwrap_or("");
            if !f.contains('/') && !STANDARD_FINALIZERS.contains(&f) {
                errs.push(FieldError::invalid(
                    format!("metadata.finalizers[{i}]"),
                    BadValue::Str(f.to_string()),
                    "name is neither a standard finalizer name nor is it fully qualified",
                ));
            }
        }
    }
    errs
}

/// `ValidateOwnerReferences`.
pub fn validate_owner_references(refs: Option<&[Value]>, field: &str) -> FieldErrors {
    let mut errs = Vec::new();
    let Some(refs) = refs else {
        return errs;
    };
    // (kind, name), spelled `kind/name` only if a second controller is found.
    let mut first_controller: Option<(&str, &str)> = None;
    for r in refs {
        let api_version = get_str(r, &["apiVersion"]).unwrap_or("");
        let kind = get_str(r, &["kind"]).unwrap_or("");
        let name = get_str(r, &["name"]).unwrap_or("");
        let uid = get_str(r, &["uid"]).unwrap_or("");
        // schema.FromAPIVersionAndKind: an unparsable apiVersion yields an empty group/version.
        let (group, version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] => ("", *v),
            [g, v] => (*g, *v),
            _ => ("", ""),
        };
        if version.is_empty() {
            errs.push(FieldError::invalid(
                format!("{field}.apiVersion"),
                BadValue::Str(api_version.to_string()),
                "version must not be empty",
            ));
        }
        if kind.is_empty() {
            errs.push(FieldError::invalid(
                format!("{field}.kind"),
                BadValue::Str(kind.to_string()),
                "must not be empty",
            ));
        }
        if name.is_empty() {
            errs.push(FieldError::invalid(
                format!("{field}.name"),
                BadValue::Str(name.to_string()),
                "must not be empty",
            ));
        }
        if uid.is_empty() {
            errs.push(FieldError::invalid(
                format!("{field}.uid"),
                BadValue::Str(uid.to_string()),
                "must not be empty",
            ));
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            errs.push(FieldError::invalid(
                field,
                BadValue::Raw(owner_reference_json(r)),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            match first_controller {
                Some((first_kind, first_name)) => errs.push(FieldError::invalid(
                    field,
                    BadValue::Raw(format!(
                        "[{}]",
                        refs.iter()
                            .map(owner_reference_json)
                            .collect::<Vec<_>>()
                            .join(",")
                    )),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first_kind}/{first_name} and {kind}/{name}"
                    ),
                )),
                None => first_controller = Some((kind, name)),
            }
        }
    }
    errs
}

/// `json.Marshal(metav1.OwnerReference)`: struct field order, optional fields omitted when unset.
fn owner_reference_json(r: &Value) -> String {
    let mut out = String::from("{");
    for (i, key) in ["apiVersion", "kind", "name", "uid"].iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_go_string(key, &mut out);
        out.push(':');
        write_go_string(get_str(r, &[key]).unwrap_or(""), &mut out);
    }
    for key in ["controller", "blockOwnerDeletion"] {
        if let Some(b) = r.get(key).and_then(Value::as_bool) {
            out.push(',');
            write_go_string(key, &mut out);
            out.push(':');
            out.push_str(if b { "true" } else { "false" });
        }
    }
    out.push('}');
    out
}

/// `ValidateManagedFields`.
fn validate_managed_fields(meta: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    let Some(entries) = get_arr(meta, &["managedFields"]) else {
        return errs;
    };
    for (i, e) in entries.iter().enumerate() {
        // Named only when an entry has an error: every update of every object runs this.
        let path = || format!("metadata.managedFields[{i}]");
        let op = get_str(e, &["operation"]).unwrap_or("");
        if op != "Apply" && op != "Update" {
            errs.push(FieldError::invalid(
                format!("{}.operation", path()),
                BadValue::Str(op.to_string()),
                "must be `Apply` or `Update`",
            ));
        }
        let ft = get_str(e, &["fieldsType"]).unwrap_or("");
        if !ft.is_empty() && ft != "FieldsV1" {
            errs.push(FieldError::invalid(
                format!("{}.fieldsType", path()),
                BadValue::Str(ft.to_string()),
                "must be `FieldsV1`",
            ));
        }
        let manager = get_str(e, &["manager"]).unwrap_or("");
        if manager.len() > 128 {
            errs.push(FieldError::too_long(format!("{}.manager", path()), 128));
        }
        if manager.chars().any(|c| c.is_control()) {
            errs.push(FieldError::invalid(
                format!("{}.manager", path()),
                BadValue::Str(manager.to_string()),
                "invalid characters",
            ));
        }
        if get_str(e, &["subresource"]).map_or(0, str::len) > 256 {
            errs.push(FieldError::too_long(format!("{}.subresource", path()), 256));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::ApiError;
    use serde_json::json;

    #[test]
    fn namespace_name_rule_matches_the_recording() {
        let errs =
            validate_object_meta_create(&json!({"name": "Bad_Name"}), false, NameRule::DnsLabel);
        let s = ApiError::invalid("", "Namespace", "Bad_Name", &errs).to_status();
        assert_eq!(
            s["message"],
            "Namespace \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        );
    }

    #[test]
    fn generate_name_is_checked_before_the_name() {
        let errs = validate_object_meta_create(
            &json!({"generateName": "Bad_Gen-", "name": "Bad_Gen-abcde", "namespace": "ns"}),
            true,
            NameRule::DnsSubdomain,
        );
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["metadata.generateName", "metadata.name"]);
        assert!(errs[0].body().starts_with(
            "Invalid value: \"Bad_Gen-\": a lowercase RFC 1123 subdomain must consist"
        ));
    }

    #[test]
    fn name_namespace_and_scope_rules() {
        let e = validate_object_meta_create(&json!({}), true, NameRule::DnsSubdomain);
        assert_eq!(
            e.iter().map(FieldError::message).collect::<Vec<_>>(),
            [
                "metadata.name: Required value: name or generateName is required",
                "metadata.namespace: Required value"
            ]
        );
        let e = validate_object_meta_create(
            &json!({"name": "x", "namespace": "ns"}),
            false,
            NameRule::DnsLabel,
        );
        assert_eq!(
            e[0].message(),
            "metadata.namespace: Forbidden: not allowed on this type"
        );
    }

    #[test]
    fn finalizer_rules() {
        let e = validate_object_meta_create(
            &json!({"name": "badfin", "namespace": "ns", "finalizers": ["nodomain"]}),
            true,
            NameRule::DnsSubdomain,
        );
        assert_eq!(
            e.iter().map(FieldError::message).collect::<Vec<_>>(),
            [
                "metadata.finalizers[0]: Invalid value: \"nodomain\": name is neither a standard finalizer name nor is it fully qualified"
            ]
        );
        // Custom resources do not get core's rule.
        let e = validate_object_meta_create_with(
            &json!({"name": "x", "finalizers": ["nodomain", "orphan", "foregroundDeletion"]}),
            MetaOptions {
                namespaced: false,
                name_rule: NameRule::DnsSubdomain,
                kube_finalizers: false,
            },
        );
        assert_eq!(
            e.iter().map(FieldError::message).collect::<Vec<_>>(),
            [
                "metadata.finalizers: Invalid value: [\"nodomain\",\"orphan\",\"foregroundDeletion\"]: finalizer orphan and foregroundDeletion cannot be both set"
            ]
        );
        let e = validate_object_meta_create(
            &json!({"name": "x", "namespace": "n", "finalizers": ["a/b/c"]}),
            true,
            NameRule::DnsSubdomain,
        );
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].field, "metadata.finalizers");
    }

    #[test]
    fn no_new_finalizers_while_deleting() {
        let old = json!({"name": "fin", "resourceVersion": "3", "deletionTimestamp": "2025-06-01T10:00:00Z",
                         "finalizers": ["courier.dev/cleanup"]});
        let mut new = old.clone();
        new["finalizers"] = json!(["courier.dev/cleanup", "courier.dev/new"]);
        let e = validate_object_meta_update(&new, &old);
        assert_eq!(
            e.iter().map(FieldError::message).collect::<Vec<_>>(),
            [
                "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"courier.dev/new\"}"
            ]
        );
        new["finalizers"] = json!([]);
        assert!(validate_object_meta_update(&new, &old).is_empty());
    }

    #[test]
    fn immutable_metadata_on_update() {
        let old = json!({"name": "a", "namespace": "n", "uid": "u1", "resourceVersion": "5", "generation": 2,
                         "creationTimestamp": "2025-06-01T10:00:00Z"});
        let new = json!({"name": "b", "namespace": "n", "uid": "u2", "resourceVersion": "5", "generation": 1,
                         "creationTimestamp": "2025-06-01T12:00:00+02:00", "labels": {"a": "b c"}});
        let msgs: Vec<String> = validate_object_meta_update(&new, &old)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(msgs.len(), 4, "{msgs:?}");
        assert_eq!(
            msgs[0],
            "metadata.generation: Invalid value: 1: must not be decremented"
        );
        assert_eq!(
            msgs[1],
            "metadata.name: Invalid value: \"b\": field is immutable"
        );
        assert_eq!(
            msgs[2],
            "metadata.uid: Invalid value: \"u2\": field is immutable"
        );
        assert!(msgs[3].starts_with("metadata.labels: Invalid value: \"b c\""));
        let mut bad_rv = old.clone();
        bad_rv["resourceVersion"] = json!("");
        assert_eq!(
            validate_object_meta_update(&bad_rv, &old)[0].message(),
            "metadata.resourceVersion: Invalid value: \"\": must be specified for an update"
        );
    }

    #[test]
    fn labels_annotations_owner_refs() {
        let e = validate_labels(
            json!({"ok": "v", "bad key": "v", "k": "bad value"}).as_object(),
            "metadata.labels",
        );
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].field, "metadata.labels");
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        let e = validate_annotations(
            json!({"Upper.Case/Key": "v", "a": big}).as_object(),
            "metadata.annotations",
        );
        assert_eq!(e.len(), 1);
        assert_eq!(
            e[0].message(),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
        let refs = json!([
            {"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"},
            {"apiVersion": "", "kind": "", "name": "", "uid": "", "controller": true},
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u2", "controller": true}
        ]);
        let e = validate_owner_references(
            refs.as_array().map(Vec::as_slice),
            "metadata.ownerReferences",
        );
        let msgs: Vec<String> = e.iter().map(FieldError::message).collect();
        assert_eq!(
            msgs[0],
            "metadata.ownerReferences: Invalid value: {\"apiVersion\":\"v1\",\"kind\":\"Event\",\"name\":\"e\",\"uid\":\"u\"}: /v1, Kind=Event is disallowed from being an owner"
        );
        assert_eq!(
            msgs[1],
            "metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty"
        );
        assert!(
            msgs[5].ends_with("Found \"true\" in references for / and Job/j"),
            "{}",
            msgs[5]
        );
    }
}
